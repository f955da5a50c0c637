/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Pending-signal charges as signal delivery makes them (__sigqueue_alloc()),
 * for the ucount cases and benchmarks.
 */
#ifndef _CGROUP_KUNIT_SIGPENDING_H
#define _CGROUP_KUNIT_SIGPENDING_H

#include <linux/user_namespace.h>

/**
 * cgk_sigpending_charge - charge a pending signal as signal delivery does
 * @uc: the recipient's ucounts
 * @override_rlimit: charge whatever the limits
 * @limit: the recipient's RLIMIT_SIGPENDING
 *
 * inc_rlimit_get_ucounts() checks @limit at @uc and each level's own limit
 * above it.
 *
 * Return: true if charged; dec_rlimit_put_ucounts() uncharges it.
 */
static inline bool cgk_sigpending_charge(struct ucounts *uc,
					 bool override_rlimit, long limit)
{
	return inc_rlimit_get_ucounts(uc, UCOUNT_RLIMIT_SIGPENDING,
				      override_rlimit, limit);
}

#endif /* _CGROUP_KUNIT_SIGPENDING_H */
