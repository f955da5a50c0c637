// SPDX-License-Identifier: GPL-2.0-only
/*
 * cgroup_kunit_oracle: checks of the harness itself.
 *
 * gang_counts races a gang on a spinlock-protected counter and on one atomic
 * counter, and checks both are exact and that every worker ran: the start
 * barrier, the stop rules and the join work.
 *
 * The provoke_* cases prove that the oracle turns a report into a failure of
 * the case that caused it. They are skipped unless asked for with
 * cgroup_kunit.provoke=lockdep,kcsan,warn, and each is then expected to FAIL,
 * quoting the report. Lockdep reports once per boot, so ask for lockdep in a
 * boot of its own (the driver's "check" job does).
 */

#include <linux/mutex.h>
#include <linux/spinlock.h>

#include "harness.h"

struct gang_counts {
	spinlock_t lock;	/* guards locked */
	unsigned long locked;
	atomic_long_t atomic;
};

static void gang_counts_step(struct cgk_worker *w)
{
	struct gang_counts *c = w->gang->data;

	spin_lock(&c->lock);
	c->locked++;
	spin_unlock(&c->lock);
	atomic_long_inc(&c->atomic);
}

static const struct cgk_gang_ops gang_counts_ops = {
	.step = gang_counts_step,
};

static void gang_counts(struct kunit *test)
{
	unsigned int i, nr = cgk_param_threads(test);
	struct gang_counts *c;
	struct cgk_gang *gang;
	unsigned long sum;

	c = kunit_kzalloc(test, sizeof(*c), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, c);
	spin_lock_init(&c->lock);

	gang = cgk_gang_create(test, nr, &gang_counts_ops, c);
	KUNIT_ASSERT_NOT_NULL(test, gang);
	gang->max_iterations = 20000;
	cgk_gang_run(gang);
	cgk_gang_report(gang);

	sum = cgk_gang_iterations(gang);
	KUNIT_EXPECT_EQ(test, c->locked, sum);
	KUNIT_EXPECT_EQ(test, atomic_long_read(&c->atomic), (long)sum);
	for (i = 0; i < nr; i++)
		KUNIT_EXPECT_GT_MSG(test, gang->workers[i].iterations, 0UL,
				    "worker %u never ran", i);
}

static DEFINE_MUTEX(provoke_a);
static DEFINE_MUTEX(provoke_b);

/* A then B, later B then A: lockdep reports the inversion, no deadlock. */
static void provoke_lockdep(struct kunit *test)
{
	if (!IS_ENABLED(CONFIG_PROVE_LOCKING))
		kunit_skip(test, "needs CONFIG_PROVE_LOCKING");
	if (!cgk_provoke("lockdep"))
		kunit_skip(test, "expected to fail; enable with cgroup_kunit.provoke=lockdep");

	mutex_lock(&provoke_a);
	mutex_lock(&provoke_b);
	mutex_unlock(&provoke_b);
	mutex_unlock(&provoke_a);

	mutex_lock(&provoke_b);
	mutex_lock(&provoke_a);
	mutex_unlock(&provoke_a);
	mutex_unlock(&provoke_b);
}

static int provoke_racy;

/* Plain read-modify-write of a shared int from every worker. */
static noinline void provoke_kcsan_step(struct cgk_worker *w)
{
	provoke_racy++;
}

static const struct cgk_gang_ops provoke_kcsan_ops = {
	.step = provoke_kcsan_step,
};

static void provoke_kcsan(struct kunit *test)
{
	struct cgk_gang *gang;

	if (!IS_ENABLED(CONFIG_KCSAN))
		kunit_skip(test, "needs CONFIG_KCSAN");
	if (!cgk_provoke("kcsan"))
		kunit_skip(test, "expected to fail; enable with cgroup_kunit.provoke=kcsan");

	gang = cgk_gang_create(test, 2, &provoke_kcsan_ops, NULL);
	KUNIT_ASSERT_NOT_NULL(test, gang);
	cgk_gang_run(gang);
}

static void provoke_warn(struct kunit *test)
{
	if (!cgk_provoke("warn"))
		kunit_skip(test, "expected to fail; enable with cgroup_kunit.provoke=warn");

	WARN(1, "cgroup_kunit: deliberate warning to prove the oracle\n");
}

static struct kunit_case cgroup_kunit_oracle_cases[] = {
	KUNIT_CASE_PARAM(gang_counts, cgk_threads_gen),
	KUNIT_CASE(provoke_lockdep),
	KUNIT_CASE(provoke_kcsan),
	KUNIT_CASE(provoke_warn),
	{}
};

static struct kunit_suite cgroup_kunit_oracle_suite = {
	.name = "cgroup_kunit_oracle",
	.suite_init = cgk_suite_init,
	.suite_exit = cgk_suite_exit,
	.init = cgk_case_init,
	.exit = cgk_case_exit,
	.test_cases = cgroup_kunit_oracle_cases,
};

kunit_test_suite(cgroup_kunit_oracle_suite);
