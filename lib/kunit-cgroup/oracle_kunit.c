// SPDX-License-Identifier: GPL-2.0-only
/*
 * cgroup_kunit_oracle: checks of the harness itself.
 *
 * gang_counts races a gang on a spinlock-protected counter and on one atomic
 * counter, and checks both are exact and that every worker ran: the start
 * barrier, the stop rules and the join work.
 *
 * On every boot the oracle proves itself without a report, so without
 * tainting the kernel:
 *  - oracle_matches_titles hands the oracle lines as if the console had
 *    printed them (cgk_oracle_feed()): a title of each kind of report is
 *    captured as that kind, and lines that only look like one are not;
 *  - oracle_probe_attached prints a line and checks that the probe on the
 *    console tracepoint was called for it.
 *
 * With cgroup_kunit.selfcheck=1 the oracle_sees_* cases prove it on real
 * reports, as kcsan_test does: each provokes one report, takes it off the
 * oracle (cgk_oracle_take()), checks that the oracle captured exactly that
 * kind, and passes. They print "oracle: expected <kind> report captured
 * (<n>): <title>", so that a tool scanning the console can tell those <n>
 * reports from findings. The reports taint the kernel, and the WARN() and
 * the KCSAN report panic one booted with panic_on_warn, hence the parameter.
 * They only use reports after which their detector keeps working for the
 * rest of the boot:
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
 * boot of its own.
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

/* A line the console might print, and the report the oracle must see in it. */
struct oracle_line {
	const char *line;
	const char *kind;	/* the oracle's name for the report, NULL for none */
};

static const struct oracle_line oracle_lines[] = {
	{ "WARNING: CPU: 1 PID: 42 at kernel/cgroup/cgroup.c:100 cgroup_x+0x1/0x2", "WARNING" },
	{ "WARNING: kernel/cgroup/cgroup.c:100 at cgroup_x+0x1/0x2, CPU#1: kworker/1:1/42",
	  "WARNING" },
	{ "WARNING: possible circular locking dependency detected", "lockdep" },
	{ "WARNING: suspicious RCU usage", "lockdep" },
	{ "BUG: KCSAN: data-race in cgroup_x / cgroup_y", "KCSAN" },
	{ "BUG: KASAN: slab-use-after-free in cgroup_x+0x1/0x2", "KASAN" },
	{ "refcount_t: underflow; use-after-free.", "refcount_t" },
	{ "BUG: kernel NULL pointer dereference, address: 0000000000000008", "BUG" },
	{ "Oops: general protection fault, probably for non-canonical address", "Oops" },
	{ "INFO: task kworker/1:1:42 blocked for more than 120 seconds.", "hung-task" },
	{ "rcu: INFO: rcu_preempt detected stalls on CPUs/tasks:", "RCU-stall" },
	{ "watchdog: BUG: soft lockup - CPU#1 stuck for 22s! [kworker/1:1:42]", "lockup" },
	{ "UBSAN: shift-out-of-bounds in kernel/cgroup/cgroup.c:100:5", "UBSAN" },
	{ "\t  WARNING: suspicious RCU usage", "lockdep" },
	{ "WARNING: Spectre v2 mitigation leaves CPU vulnerable to RETBleed attacks", NULL },
	{ "BUGS: none", NULL },
	{ "cgroup_kunit: seed=1 threads=2 duration_ms=1000", NULL },
	{ "", NULL },
};

/* The title table and the capture, fed lines the console did not print. */
static void oracle_matches_titles(struct kunit *test)
{
	char title[CGK_FAILURE_LEN];
	const char *kind;
	unsigned int i, n;

	for (i = 0; i < ARRAY_SIZE(oracle_lines); i++) {
		const struct oracle_line *l = &oracle_lines[i];

		cgk_oracle_feed(l->line);
		n = cgk_oracle_take(&kind, title, sizeof(title));
		if (!l->kind) {
			KUNIT_EXPECT_EQ_MSG(test, n, 0U, "line %u taken for a %s report", i, kind);
			continue;
		}
		KUNIT_EXPECT_EQ_MSG(test, n, 1U, "line %u: no report captured", i);
		if (n)
			KUNIT_EXPECT_STREQ_MSG(test, kind, l->kind, "line %u", i);
	}
}

/* The probe sits on the console tracepoint: a line printed reaches it. */
static void oracle_probe_attached(struct kunit *test)
{
	unsigned long before = cgk_console_lines();

	kunit_info(test, "oracle: a line for the console probe\n");
	KUNIT_EXPECT_GT_MSG(test, cgk_console_lines(), before,
			    "the console probe was not called for a line printed");
}

static void oracle_sees_warning(struct kunit *test)
{
	if (!cgk_selfcheck())
		kunit_skip(test, "provokes a WARNING; enable with cgroup_kunit.selfcheck=1");

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
	if (!cgk_selfcheck())
		kunit_skip(test, "provokes a lockdep report; enable with cgroup_kunit.selfcheck=1");
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
	if (!cgk_selfcheck())
		kunit_skip(test, "provokes a KCSAN report; enable with cgroup_kunit.selfcheck=1");

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
	KUNIT_CASE(oracle_matches_titles),
	KUNIT_CASE(oracle_probe_attached),
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
