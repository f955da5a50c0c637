// SPDX-License-Identifier: GPL-2.0-only
/*
 * cgroup_kunit_taint: the suites leave the kernel untainted.
 *
 * Built last into the module, so that it runs after every other suite of
 * it: no taint flag may have been set since the first suite started
 * (cgk_taint_gained(); KUnit's own TAINT_TEST aside). A report the oracle
 * missed, a WARN() in a path no case watches or a taint of the kernel's
 * own making shows here. Skipped when reports are provoked on purpose
 * (cgroup_kunit.selfcheck=1 or cgroup_kunit.provoke=): they taint.
 */

#include <linux/panic.h>

#include "harness.h"

static void taint_unchanged(struct kunit *test)
{
	unsigned long gained;
	int flag;

	if (cgk_provoked())
		kunit_skip(test, "reports provoked on purpose (selfcheck, provoke) taint");

	/* The flags: Documentation/admin-guide/tainted-kernels.rst */
	gained = cgk_taint_gained();
	for (flag = 0; flag < TAINT_FLAGS_COUNT; flag++) {
		if (gained & BIT(flag))
			KUNIT_FAIL(test, "the kernel gained taint flag %d while the suites ran",
				   flag);
	}
	if (!gained)
		kunit_info(test, "taint: no taint flag gained since the first suite started\n");
}

static struct kunit_case cgroup_kunit_taint_cases[] = {
	KUNIT_CASE(taint_unchanged),
	{}
};

static struct kunit_suite cgroup_kunit_taint_suite = {
	.name = "cgroup_kunit_taint",
	.suite_init = cgk_suite_init,
	.suite_exit = cgk_suite_exit,
	.init = cgk_case_init,
	.exit = cgk_case_exit,
	.test_cases = cgroup_kunit_taint_cases,
};

kunit_test_suite(cgroup_kunit_taint_suite);
