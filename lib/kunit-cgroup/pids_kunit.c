// SPDX-License-Identifier: GPL-2.0-only
/*
 * cgroup_pids: the pids controller's limit racing fork, exit and migration.
 *
 * What races: in a test hierarchy on the default root with the pids
 * controller enabled (top; lim, free0 and free1 in it), resident victim
 * kthreads in lim keep forking children that exit soon after, more than
 * lim's pids.max admits, so forks are refused in pids_can_fork() all the
 * time, while migrant victims, forking as well, are moved between free0
 * and free1 by writes to their cgroup.procs files (charging the
 * destination and uncharging the source in the pids controller's attach
 * callbacks), and a sampler reads lim's pids.current and pids.peak.
 * Migrations never enter lim: a migration may take a cgroup over its
 * limit by design, which would make the first invariant below inexact.
 * A cgroup task notifier fails a quarter of the moves at
 * CGROUP_TASK_MIGRATING, after every controller's can_attach succeeded,
 * so the migration is rolled back through the cancel_attach callbacks:
 * the pids controller's gives the charge back to the source. Where the
 * kernel has them, the cpuset and cpu controllers are enabled in the
 * hierarchy as well, so their can_attach, attach and cancel_attach
 * callbacks run on the same migrations.
 *
 * Invariants:
 *  - lim's pids.current and pids.peak never exceed its pids.max, at every
 *    sample and at the end; the refusals all show up as -EAGAIN;
 *  - once the victims stopped forking, the "max" count of lim's and top's
 *    pids.events equals the number of forks refused to the residents:
 *    each refusal is counted once, at the cgroup whose limit refused it
 *    and at its ancestors;
 *  - a failed move leaves the victim where it was; a move the notifier
 *    did not fail succeeds;
 *  - once the victims stopped forking and their children exited, every
 *    pids.current of the hierarchy counts exactly the victims the
 *    bookkeeping puts there (top: all of them), whatever number of moves
 *    was rolled back, and no cpuset attach is left in progress
 *    (cpuset_attach_in_progress_for_test(): one left would block every
 *    later write to a cpuset file);
 *  - css task iterators agree with the bookkeeping, and the css_sets and
 *    cgroups are back to their baseline after teardown.
 * The oracle (harness.c) fails a case on any lockdep, KCSAN, KASAN,
 * refcount_t or WARNING report. It is built only with CONFIG_CGROUP_PIDS.
 */

#include <linux/cgroup.h>
#include <linux/cgroup_kunit.h>
#include <linux/delay.h>
#include <linux/file.h>
#include <linux/fs.h>
#include <linux/mount.h>
#include <linux/mutex.h>
#include <linux/notifier.h>

#include "harness.h"

#define PD_NR_CGROUPS		4	/* top; lim, free0 and free1 in it */
#define PD_LIM			1
#define PD_LIMIT		3	/* lim's pids.max */
#define PD_RESIDENTS		2	/* victims that live in lim */
#define PD_INJECTED		(-ECANCELED)	/* what the notifier fails with */
/* Exiting tasks and removed cgroups are freed after RCU: wait for them. */
#define PD_SETTLE_TIMEOUT_MS	10000

static const char * const pd_name[PD_NR_CGROUPS] = { "top", "lim", "free0", "free1" };

/* pids first: the case needs it; the others where the kernel has them. */
static const struct cgk_controller pd_controllers[] = {
	{ "pids", pids_cgrp_id },
#if IS_ENABLED(CONFIG_CPUSETS)
	{ "cpuset", cpuset_cgrp_id },
#endif
#if IS_ENABLED(CONFIG_CGROUP_SCHED)
	{ "cpu", cpu_cgrp_id },
#endif
	{ NULL, 0 }
};

struct pd_victim {
	struct cgk_victim *cv;
	struct mutex lock;		/* held by the worker moving it */
	int cg;				/* bookkeeping: where it is */
	bool fail_next;			/* the notifier fails its move */
};

struct pd_case {
	struct kunit *test;
	struct cgroup *cg[PD_NR_CGROUPS];
	struct vfsmount *mnt;
	struct file *procs[PD_NR_CGROUPS];
	char top_name[48];
	struct cgk_root_controllers root;	/* what we enabled on the root */
	struct cgk_herd *herd;
	struct pd_victim *victims;
	unsigned int nr_victims;
	struct notifier_block nb;
	bool nb_registered;
	atomic_long_t moves, injected, samples;
	struct cgk_baseline base;
};

/* Read a number from a cgroup file of @i: "<key> N" or just "N". */
static int pd_read(struct pd_case *c, int i, const char *file, const char *key, s64 *val)
{
	char path[96], buf[64];
	const char *p = buf;
	ssize_t n;

	snprintf(path, sizeof(path), "%s/%s%s%s", c->top_name, i ? pd_name[i] : "",
		 i ? "/" : "", file);
	n = cgk_file_read(c->mnt, path, buf, sizeof(buf));
	if (n < 0)
		return n;
	if (key) {
		p = strstr(buf, key);
		if (!p)
			return -ENOENT;
		p += strlen(key);
	}
	return sscanf(p, "%lld", val) == 1 ? 0 : -EINVAL;
}

/* ---- workers ------------------------------------------------------------ */

static void pd_sample_step(struct cgk_worker *w)
{
	struct pd_case *c = w->gang->data;
	s64 cur, peak;

	/*
	 * pids.current itself may show one over the limit per racing fork:
	 * pids_try_charge() adds before it compares, and takes it back. The
	 * high-water mark only takes admitted charges.
	 */
	if (pd_read(c, PD_LIM, "pids.current", NULL, &cur) ||
	    pd_read(c, PD_LIM, "pids.peak", NULL, &peak)) {
		cgk_fail(w, "reading lim's pids.current and pids.peak failed");
		return;
	}
	if (peak > PD_LIMIT)
		cgk_fail(w, "lim: pids.peak %lld over pids.max %d (pids.current %lld)",
			 peak, PD_LIMIT, cur);
	atomic_long_inc(&c->samples);
	usleep_range(100, 300);
}

/* The task notifier: fails the moves the movers chose to fail. */
static int pd_notify(struct notifier_block *nb, unsigned long event, void *data)
{
	struct pd_case *c = container_of(nb, struct pd_case, nb);
	struct cgroup_task_migrate_ctx *ctx = data;
	unsigned int i;

	if (event != CGROUP_TASK_MIGRATING)
		return NOTIFY_DONE;
	for (i = PD_RESIDENTS; i < c->nr_victims; i++) {
		if (c->victims[i].cv->task == ctx->task)
			return READ_ONCE(c->victims[i].fail_next) ?
			       notifier_from_errno(PD_INJECTED) : NOTIFY_OK;
	}
	return NOTIFY_DONE;
}

static void pd_move_step(struct cgk_worker *w)
{
	struct pd_case *c = w->gang->data;
	unsigned int i = PD_RESIDENTS + cgk_rand(w, c->nr_victims - PD_RESIDENTS);
	struct pd_victim *v = &c->victims[i];
	int dst = v->cg == 2 ? 3 : 2;
	bool inject = !cgk_rand(w, 4);
	int ret;

	if (!mutex_trylock(&v->lock))
		return;
	WRITE_ONCE(v->fail_next, inject);
	ret = cgk_file_write_pid(c->procs[dst], v->cv->task, true);
	WRITE_ONCE(v->fail_next, false);
	if (inject && ret == PD_INJECTED) {
		atomic_long_inc(&c->injected);
		if (cgk_where(v->cv->task) != c->cg[v->cg])
			cgk_fail(w, "a failed move to %s moved the victim", pd_name[dst]);
	} else if (inject) {
		cgk_fail(w, "a move to %s the notifier failed returned %d", pd_name[dst], ret);
		if (!ret)
			v->cg = dst;
	} else if (ret) {
		cgk_fail(w, "moving a victim to %s: %d", pd_name[dst], ret);
	} else {
		v->cg = dst;
		atomic_long_inc(&c->moves);
	}
	mutex_unlock(&v->lock);
}

static void pd_step(struct cgk_worker *w)
{
	if (w->index == 0)
		pd_sample_step(w);
	else
		pd_move_step(w);
}

static const struct cgk_gang_ops pd_gang_ops = {
	.step = pd_step,
};

/* ---- fixture ------------------------------------------------------------ */

static bool pd_removed(void *arg)
{
	struct pd_case *c = arg;
	bool done = true;

	done &= cgk_cgroups_remove(c->cg, PD_NR_CGROUPS);
	return done;
}

/* Cleanup action: stop the victims, remove the hierarchy, restore the root. */
static void pd_teardown(void *arg)
{
	struct pd_case *c = arg;
	int i;

	if (c->nb_registered) {
		blocking_notifier_chain_unregister(&cgroup_task_notifier, &c->nb);
		c->nb_registered = false;
	}
	if (!cgk_herd_stop(c->herd, PD_SETTLE_TIMEOUT_MS))
		KUNIT_FAIL(c->test, "children still there %d ms after the victims stopped",
			   PD_SETTLE_TIMEOUT_MS);
	for (i = 0; i < PD_NR_CGROUPS; i++) {
		if (c->procs[i])
			fput(c->procs[i]);
		c->procs[i] = NULL;
	}
	/* A kthread's last fput() is deferred: the mount stays until then. */
	flush_delayed_fput();
	if (c->mnt)
		kern_unmount(c->mnt);
	c->mnt = NULL;
	if (!cgk_wait_for(pd_removed, c, PD_SETTLE_TIMEOUT_MS))
		KUNIT_FAIL(c->test, "test cgroups still busy %d ms after the victims exited",
			   PD_SETTLE_TIMEOUT_MS);
	else
		cgk_root_controllers_restore(c->test, &c->root);
}

static int pd_write_max(struct kunit *test, struct vfsmount *mnt, const char *path)
{
	struct file *max = cgk_file_open_for_test(test, mnt, path);
	char buf[16];
	int ret;

	snprintf(buf, sizeof(buf), "%d\n", PD_LIMIT);
	ret = cgk_file_write(max, buf);
	fput(max);
	return ret;
}

static struct pd_case *pd_setup(struct kunit *test, unsigned int nr_victims)
{
	struct cgroup *root = NULL;
	struct vfsmount *mnt;
	struct pd_case *c;
	char path[96];
	unsigned int i, k;
	int ret;

	c = kunit_kzalloc(test, sizeof(*c), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, c);
	c->test = test;
	c->victims = kunit_kcalloc(test, nr_victims, sizeof(*c->victims), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, c->victims);
	c->herd = cgk_herd_alloc(test, nr_victims, CGK_VICTIM_FORK);
	KUNIT_ASSERT_NOT_NULL(test, c->herd);

	cgk_baseline_take(&c->base);
	KUNIT_ASSERT_EQ(test, 0, kunit_add_action_or_reset(test, pd_teardown, c));

	c->root.ctrls = pd_controllers;
	cgk_root_controllers_enable(test, &c->root);
	KUNIT_ASSERT_TRUE_MSG(test, c->root.avail & BIT(0), "pids is not available");
	/* The top gets a unique name: a failed case may leave one. */
	snprintf(c->top_name, sizeof(c->top_name), "cgk-pids-%d", test->param_index);
	for (i = 0; i < PD_NR_CGROUPS; i++) {
		c->cg[i] = cgroup_create_for_test(i ? c->cg[0] : &cgrp_dfl_root.cgrp,
						  i ? pd_name[i] : c->top_name);
		KUNIT_ASSERT_NOT_ERR_OR_NULL_MSG(test, c->cg[i], "creating %s", pd_name[i]);
		if (i)
			continue;
		for (k = 0; pd_controllers[k].name; k++) {
			if (!(c->root.avail & BIT(k)))
				continue;
			ret = cgk_write_control(c->cg[0], '+', &pd_controllers[k]);
			KUNIT_ASSERT_EQ_MSG(test, ret, 0, "enabling %s on top",
					    pd_controllers[k].name);
		}
	}

	mnt = cgroup_mount_for_test(NULL, NULL, &root);
	KUNIT_ASSERT_NOT_ERR_OR_NULL_MSG(test, mnt, "mounting the default hierarchy");
	c->mnt = mnt;
	for (i = 1; i < PD_NR_CGROUPS; i++) {
		snprintf(path, sizeof(path), "%s/%s/cgroup.procs", c->top_name, pd_name[i]);
		c->procs[i] = cgk_file_open_for_test(test, c->mnt, path);
	}
	snprintf(path, sizeof(path), "%s/lim/pids.max", c->top_name);
	KUNIT_ASSERT_EQ_MSG(test, pd_write_max(test, c->mnt, path), 0, "writing %s", path);

	/*
	 * A migration into lim is charged whatever its limit: let no victim
	 * fork before all are in place, or the residents moved in last would
	 * take lim over its pids.max.
	 */
	WRITE_ONCE(c->herd->stop_forking, true);
	c->nr_victims = nr_victims;
	for (i = 0; i < nr_victims; i++) {
		struct pd_victim *v = &c->victims[i];
		struct task_struct *task;
		int dst = i < PD_RESIDENTS ? PD_LIM : 2 + i % 2;

		v->cv = &c->herd->victims[i];
		mutex_init(&v->lock);
		task = cgk_herd_start(c->herd, i, "cgk-pids");
		KUNIT_ASSERT_NOT_ERR_OR_NULL(test, task);
		KUNIT_ASSERT_EQ(test, 0, cgk_file_write_pid(c->procs[dst], task, true));
		v->cg = dst;
	}
	WRITE_ONCE(c->herd->stop_forking, false);

	c->nb.notifier_call = pd_notify;
	KUNIT_ASSERT_EQ(test, 0, blocking_notifier_chain_register(&cgroup_task_notifier, &c->nb));
	c->nb_registered = true;
	return c;
}

/* ---- checks ------------------------------------------------------------- */

/* Where the bookkeeping has victim @i (cgk_herd_expect_members()). */
static int pd_where(void *arg, unsigned int i)
{
	struct pd_case *c = arg;

	return c->victims[i].cg;
}

/* How many victims the bookkeeping puts in cgroup @i (top: all). */
static s64 pd_expected(struct pd_case *c, int i)
{
	unsigned int v;
	s64 n = 0;

	for (v = 0; v < c->nr_victims; v++)
		n += !i || c->victims[v].cg == i;
	return n;
}

/*
 * Only the victims themselves are left: every pids.current counts exactly
 * them, whatever moves were rolled back.
 */
static bool pd_quiet(void *arg)
{
	struct pd_case *c = arg;
	s64 cur;
	int i;

	for (i = 0; i < PD_NR_CGROUPS; i++) {
		if (pd_read(c, i, "pids.current", NULL, &cur) || cur != pd_expected(c, i))
			return false;
	}
	return true;
}

static void pd_check_counts(struct pd_case *c)
{
	struct kunit *test = c->test;
	s64 cur;
	int i;

	if (cgk_wait_for(pd_quiet, c, PD_SETTLE_TIMEOUT_MS))
		return;
	for (i = 0; i < PD_NR_CGROUPS; i++) {
		cur = -1;
		pd_read(c, i, "pids.current", NULL, &cur);
		KUNIT_EXPECT_EQ_MSG(test, cur, pd_expected(c, i),
				    "%s: pids.current %lld, victims there %lld, %d ms after the last fork",
				    pd_name[i], cur, pd_expected(c, i), PD_SETTLE_TIMEOUT_MS);
	}
}

/* Refusals: counted once per refused fork, where the limit is and above. */
static void pd_check_events(struct pd_case *c)
{
	struct kunit *test = c->test;
	unsigned long refused = 0, errors = 0;
	s64 lim_max = -1, top_max = -1, peak = -1;
	unsigned int i;

	KUNIT_EXPECT_TRUE_MSG(test, cgk_herd_settled(test, c->herd, PD_SETTLE_TIMEOUT_MS),
			      "victims did not finish their last forks");
	pd_check_counts(c);
	for (i = 0; i < c->nr_victims; i++) {
		if (i < PD_RESIDENTS)
			refused += READ_ONCE(c->victims[i].cv->fork_eagain);
		else
			KUNIT_EXPECT_EQ_MSG(test, READ_ONCE(c->victims[i].cv->fork_eagain), 0UL,
					    "a fork refused in an unlimited cgroup");
		errors += READ_ONCE(c->victims[i].cv->fork_errors);
	}
	KUNIT_EXPECT_EQ_MSG(test, errors, 0UL, "forks failed other than with -EAGAIN");
	CGK_EXPECT_EXERCISED(test, refused, "no fork was refused");
	KUNIT_EXPECT_EQ(test, 0, pd_read(c, PD_LIM, "pids.events", "max ", &lim_max));
	KUNIT_EXPECT_EQ(test, 0, pd_read(c, 0, "pids.events", "max ", &top_max));
	KUNIT_EXPECT_EQ_MSG(test, lim_max, (s64)refused,
			    "lim's pids.events max %lld, forks refused in it %lu",
			    lim_max, refused);
	KUNIT_EXPECT_EQ_MSG(test, top_max, (s64)refused,
			    "top's pids.events max %lld, forks refused below it %lu",
			    top_max, refused);
	KUNIT_EXPECT_EQ(test, 0, pd_read(c, PD_LIM, "pids.peak", NULL, &peak));
	KUNIT_EXPECT_LE_MSG(test, peak, (s64)PD_LIMIT, "lim's pids.peak over its pids.max");
	kunit_info(test, "%lu forks refused, lim's pids.peak %lld\n", refused, peak);
}

/* ---- the case ----------------------------------------------------------- */

/* Forks refused at a limit while other victims migrate and fork. */
static void pids_limit_fork_churn(struct kunit *test)
{
	unsigned int nr = cgk_param_threads(test);
	struct cgk_gang *gang;
	struct pd_case *c;

	c = pd_setup(test, PD_RESIDENTS + max(nr, 2U));
	gang = cgk_gang_create(test, max(nr, 2U), &pd_gang_ops, c);
	KUNIT_ASSERT_NOT_NULL(test, gang);
	cgk_gang_run(gang);
	cgk_gang_report(gang);

	kunit_info(test, "%ld moves, %ld failed by the notifier, %ld samples, %lu forks\n",
		   atomic_long_read(&c->moves), atomic_long_read(&c->injected),
		   atomic_long_read(&c->samples), cgk_herd_forks(c->herd));
	CGK_EXPECT_EXERCISED(test, atomic_long_read(&c->moves), "no move succeeded");
	CGK_EXPECT_EXERCISED(test, atomic_long_read(&c->injected),
			     "no move was failed by the notifier");
	cgk_herd_expect_members(test, c->herd, pd_where, c, c->cg, pd_name, PD_NR_CGROUPS);
	pd_check_events(c);
#if IS_ENABLED(CONFIG_CPUSETS)
	KUNIT_EXPECT_EQ_MSG(test, cpuset_attach_in_progress_for_test(), 0,
			    "cpuset attaches still in progress after the last move");
#endif

	kunit_release_action(test, pd_teardown, c);
	cgk_expect_baseline(test, &c->base, PD_SETTLE_TIMEOUT_MS);
}

static struct kunit_case cgroup_pids_cases[] = {
	CGK_CASE(pids_limit_fork_churn),
	{}
};

static struct kunit_suite cgroup_pids_suite = {
	.name = "cgroup_pids",
	.suite_init = cgk_suite_init,
	.suite_exit = cgk_suite_exit,
	.init = cgk_case_init,
	.exit = cgk_case_exit,
	.test_cases = cgroup_pids_cases,
};

kunit_test_suite(cgroup_pids_suite);
