/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The writes that pending-signal charges make to the counts sibling user
 * namespaces share, for the ucount benchmarks.
 */
#ifndef _CGROUP_KUNIT_SHARED_WRITES_H
#define _CGROUP_KUNIT_SHARED_WRITES_H

#include <linux/cgroup_kunit.h>

/* The kernel counts them: the benchmarks print shared= beside the charges. */
#define CGK_SHARED_WRITES_COUNTED	true

/**
 * cgk_shared_writes - the writes made to counts that siblings share so far
 *
 * Return: a running count; two reads differ by the writes made in between.
 */
static inline unsigned long cgk_shared_writes(void)
{
	return ucounts_shared_writes_for_test();
}

#endif /* _CGROUP_KUNIT_SHARED_WRITES_H */
