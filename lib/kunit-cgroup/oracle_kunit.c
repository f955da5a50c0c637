// SPDX-License-Identifier: GPL-2.0-only
/*
 * cgroup_kunit_oracle: checks of the harness itself.
 *
 * gang_counts races a gang on a spinlock-protected counter and on one atomic
 * counter, and checks both are exact and that every worker ran: the start
 * barrier, the stop rules and the join work.
 *
 * The oracle_sees_* cases run on every boot and prove the oracle from inside,
 * as kcsan_test does: each provokes one report, takes it off the oracle
 * (cgk_oracle_take()), checks that the oracle captured exactly that kind,
 * and passes. They print "oracle: expected <kind> report captured (<n>):
 * <title>", which the driver reads to not count those <n> reports as
 * findings. They only use reports after which their detector keeps
 * working for the rest of the boot:
 *  - oracle_sees_warning: a WARN();
 *  - oracle_sees_lockdep: lockdep's suspicious-RCU report (an
 *    rcu_dereference() outside any RCU reader), which lockdep prints without
 *    turning itself off; a lock-order report would end lockdep checking for
 *    every later case of the boot. That report comes once per call site per
 *    boot (or module load), so the case skips once lockdep is off;
 *  - oracle_sees_kcsan: two workers racing on a plain int.
 * No case provokes KASAN: without kasan_multi_shot its first report is its
 * last in the boot, and it taints the kernel in a way that turns lockdep
 * off. A KASAN report reaches the oracle by the same console path as the
 * three above.
 *
 * The provoke_* cases prove that the oracle turns a report into a failure of
 * the case that caused it. They are skipped unless asked for with
 * cgroup_kunit.provoke=lockdep,kcsan,warn, and each is then expected to FAIL,
 * quoting the report. Lockdep reports once per boot, so ask for lockdep in a
 * boot of its own (the driver's "check" job does).
 */

#include <linux/mutex.h>
#include <linux/rcupdate.h>
#include <linux/spinlock.h>
#include <linux/string.h>

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

/* ---- the oracle proves itself ---------------------------------------- */

/*
 * Take the report just provoked off the oracle; check it is one of @want.
 * @raced: provoked by workers racing for duration_ms, which may be too short
 * to hit the race (the case is then skipped, as CGK_EXPECT_EXERCISED() does).
 */
static void oracle_expect(struct kunit *test, const char *want, const char *prefix,
			  bool raced)
{
	char title[CGK_FAILURE_LEN];
	const char *kind;
	unsigned int n;

	n = cgk_oracle_take(&kind, title, sizeof(title));
	if (!n) {
		if (!raced || !cgk_too_short(test, "no race was reported"))
			KUNIT_FAIL(test, "oracle: the %s report provoked here was not captured",
				   want);
		return;
	}
	KUNIT_EXPECT_STREQ_MSG(test, kind, want, "oracle: captured \"%s\"", title);
	KUNIT_EXPECT_TRUE_MSG(test, strstarts(title, prefix),
			      "oracle: captured \"%s\", not a \"%s\" report", title, prefix);
	kunit_info(test, "oracle: expected %s report captured (%u): %s\n", want, n, title);
}

static void oracle_sees_warning(struct kunit *test)
{
	WARN(1, "cgroup_kunit: a warning the oracle must see\n");
	oracle_expect(test, "WARNING", "WARNING: ", false);
}

struct oracle_obj {
	int v;
};

static struct oracle_obj __rcu *oracle_rcu_ptr;

static void oracle_sees_lockdep(struct kunit *test)
{
	struct oracle_obj *p;

	if (!IS_ENABLED(CONFIG_PROVE_RCU))
		kunit_skip(test, "needs CONFIG_PROVE_RCU");
	if (!debug_lockdep_rcu_enabled())
		kunit_skip(test, "lockdep is off in this boot");

	/* Outside rcu_read_lock(): "suspicious RCU usage" */
	p = rcu_dereference(oracle_rcu_ptr);
	KUNIT_EXPECT_NULL(test, p);
	oracle_expect(test, "lockdep", "WARNING: suspicious RCU usage", false);
}

/* Plain read-modify-write of the gang's int from both workers. */
static noinline void oracle_race_step(struct cgk_worker *w)
{
	int *racy = w->gang->data;

	(*racy)++;
}

static const struct cgk_gang_ops oracle_race_ops = {
	.step = oracle_race_step,
};

/* Two workers race on @racy for duration_ms: KCSAN reports it. */
static void oracle_race(struct kunit *test, int *racy)
{
	struct cgk_gang *gang;

	gang = cgk_gang_create(test, 2, &oracle_race_ops, racy);
	KUNIT_ASSERT_NOT_NULL(test, gang);
	cgk_gang_run(gang);
}

static int oracle_racy;

static void oracle_sees_kcsan(struct kunit *test)
{
	if (!IS_ENABLED(CONFIG_KCSAN))
		kunit_skip(test, "needs CONFIG_KCSAN");

	oracle_race(test, &oracle_racy);
	oracle_expect(test, "KCSAN", "BUG: KCSAN: data-race in ", true);
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

static void provoke_kcsan(struct kunit *test)
{
	if (!IS_ENABLED(CONFIG_KCSAN))
		kunit_skip(test, "needs CONFIG_KCSAN");
	if (!cgk_provoke("kcsan"))
		kunit_skip(test, "expected to fail; enable with cgroup_kunit.provoke=kcsan");

	oracle_race(test, &provoke_racy);
}

static void provoke_warn(struct kunit *test)
{
	if (!cgk_provoke("warn"))
		kunit_skip(test, "expected to fail; enable with cgroup_kunit.provoke=warn");

	WARN(1, "cgroup_kunit: deliberate warning to prove the oracle\n");
}

static struct kunit_case cgroup_kunit_oracle_cases[] = {
	KUNIT_CASE_PARAM(gang_counts, cgk_threads_gen),
	KUNIT_CASE(oracle_sees_warning),
	KUNIT_CASE(oracle_sees_lockdep),
	KUNIT_CASE(oracle_sees_kcsan),
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
