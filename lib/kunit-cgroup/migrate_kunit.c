// SPDX-License-Identifier: GPL-2.0-only
/*
 * cgroup_migrate, cgroup_migrate_dynmods: migrations racing fork, exit,
 * rmdir and failing migrations, in both attach-lock modes.
 *
 * What races: a gang of migrator kthreads moves victim kthreads between the
 * cgroups of a test hierarchy on the default root (top; a0..a2 in it; three
 * leaves in each a, 13 cgroups) through cgroup_procs_write_for_test(), which
 * is what a write to cgroup.procs does: cgroup_mutex, the attach lock chosen
 * by cgroup_procs_write_start() and cgroup_attach_task(). Depending on the
 * case, the victims meanwhile fork short-lived kernel threads that exit soon
 * after (cgroup_can_fork(), cgroup_post_fork(), cgroup_exit() and the
 * threadgroup change lock), a worker keeps creating and removing a leaf that
 * migrations target (rmdir racing migrations into it), or a cgroup task
 * notifier makes chosen migrations fail at CGROUP_TASK_MIGRATING.
 *
 * Lock modes: cgroup_migrate runs every case with the global
 * cgroup_threadgroup_rwsem; cgroup_migrate_dynmods switches the default
 * hierarchy to favordynmods, which makes the attach lock per thread group,
 * and runs the same cases again. The kernel cannot switch favordynmods off
 * again (cgroup_enable_per_threadgroup_rwsem stays true), so everything that
 * runs after it in the boot, later suites and later loads of the module,
 * would inherit that mode. cgroup_migrate_dynmods therefore switches it only
 * with the module parameter dynmods=1 (cgroup_kunit.dynmods=1 when built
 * in), meant for a boot of its own that runs only this suite
 * (kunit.filter_glob=cgroup_migrate_dynmods); without it each of its cases
 * is skipped, saying why, and nothing is switched. cgroup_migrate comes
 * first in the module and skips itself if favordynmods is already on (in a
 * load of the module after one with dynmods=1, for instance).
 * Each victim is a kthread and so its own thread group; in
 * migrate_threadgroups and migrate_everything each victim also keeps adding
 * threads to its group (cgroup_fork_for_test(), CGROUP_FORK_TEST_THREAD)
 * that exit shortly after, so thread creation and exit take the group's
 * threadgroup lock against the migrations of that group.
 *
 * Invariants, checked by the migrators right after each migration and by
 * the test thread after they stopped:
 *  - a successful migration left the victim, and every thread of its group
 *    that was not already exiting, in the destination, which is not dead;
 *    a failed one (injected, or -ENODEV into a removed cgroup) left it
 *    where it was;
 *  - the task notifier saw MIGRATING exactly for the migrations that
 *    succeeded plus the injected failures, and MIGRATED exactly for the
 *    successes: a failure is rolled back completely;
 *  - walking each cgroup with a css task iterator finds exactly the victims
 *    the bookkeeping puts there;
 *  - once the victims have exited and the hierarchy is removed, the number
 *    of css_sets and of cgroups on the default root is back to its baseline.
 * The oracle (harness.c) fails a case on any lockdep, KCSAN, KASAN,
 * refcount_t or WARNING report. Migration latency (p50, p99, max) is
 * printed as a diagnostic; it is not checked.
 */

#include <linux/cgroup.h>
#include <linux/cgroup_kunit.h>
#include <linux/mutex.h>
#include <linux/notifier.h>
#include <linux/sched/signal.h>
#include <linux/slab.h>
#include <linux/sort.h>

#include "harness.h"

#define MG_LAT_SAMPLES		8192
#define MG_INJECTED		(-ECANCELED)
#define MG_RMDIR_PATIENCE	8	/* -EBUSY in a row before evicting */
/* Exiting tasks and removed cgroups are freed after RCU: wait for them. */
#define MG_SETTLE_TIMEOUT_MS	10000

enum mg_flags {
	MG_FORK		= BIT(0),	/* victims fork and reap children */
	MG_RMDIR	= BIT(1),	/* worker 0 keeps removing a target leaf */
	MG_INJECT	= BIT(2),	/* some migrations fail at MIGRATING */
	MG_HOT		= BIT(3),	/* two victims for the whole gang */
	MG_THREADS	= BIT(4),	/* victims are thread groups */
	MG_CPUS		= BIT(5),	/* workers shuffled, CPUs hotplugged */
};

/* What migrations know of a victim of the herd. */
struct mg_victim {
	struct cgk_victim *cv;		/* the kthread, in the herd */
	struct mutex lock;		/* held by the migrator moving it */
	int cg;				/* bookkeeping: where it is */
	bool fail_next;			/* the notifier fails its migration */
};

struct mg_case {
	struct kunit *test;
	unsigned long flags;
	struct cgk_tree tree;		/* worker 0 removes its ephemeral leaf */
	struct cgk_herd *herd;
	struct mg_victim *victims;
	unsigned int nr_victims;
	struct notifier_block nb;
	bool nb_registered;
	atomic_long_t migrated, moved, injected, enodev;
	atomic_t ev_migrating, ev_migrated, ev_canceled;
	u64 *lat_ns;
	atomic_t nr_lat;
	struct cgk_baseline base;
};

/* The attach lock mode the running suite is about; see mg_run(). */
static bool mg_expect_dynmods;

/* dynmods=1: cgroup_migrate_dynmods switches favordynmods on, for good. */
static bool mg_dynmods;

#define MG_DYNMODS_OFF \
	"favordynmods cannot be switched off again: runs only with cgroup_kunit.dynmods=1, in a boot of its own"

static int mg_dynmods_set(const char *val, const struct kernel_param *kp)
{
	if (param_set_bool(val, kp)) {
		pr_err(KBUILD_MODNAME ": dynmods=%s: want 1 or 0 (y or n)\n", val);
		return -EINVAL;
	}
	return 0;
}

static const struct kernel_param_ops mg_dynmods_ops = {
	.flags = KERNEL_PARAM_OPS_FL_NOARG,
	.set = mg_dynmods_set,
	.get = param_get_bool,
};
module_param_cb(dynmods, &mg_dynmods_ops, &mg_dynmods, 0444);
MODULE_PARM_DESC(dynmods,
		 "run cgroup_migrate_dynmods, which switches favordynmods on for good (default 0: skip it)");

/*
 * Whether every thread of @leader's group is in @cgrp. Skipped: threads
 * that were already exiting (migration leaves PF_EXITING tasks behind),
 * and threads still in the root cgroup: copy_process() lists a new thread
 * in its group before cgroup_post_fork() moves it from init_css_set to its
 * parent's css_set, and no victim is ever in the root.
 */
static bool mg_group_in(struct task_struct *leader, struct cgroup *cgrp)
{
	struct task_struct *t;
	bool in = true;

	rcu_read_lock();
	for_each_thread(leader, t) {
		struct cgroup *where = task_dfl_cgroup(t);

		if (READ_ONCE(t->flags) & PF_EXITING || where == &cgrp_dfl_root.cgrp)
			continue;
		if (where != cgrp) {
			in = false;
			break;
		}
	}
	rcu_read_unlock();
	return in;
}

/* ---- the task notifier: injected failures and event counts -------------- */

static struct mg_victim *mg_victim_of(struct mg_case *c, struct task_struct *task)
{
	unsigned int i;

	for (i = 0; i < c->nr_victims; i++) {
		if (c->victims[i].cv->task == task)
			return &c->victims[i];
	}
	return NULL;
}

static int mg_notify(struct notifier_block *nb, unsigned long event, void *data)
{
	struct mg_case *c = container_of(nb, struct mg_case, nb);
	struct cgroup_task_migrate_ctx *ctx = data;
	struct mg_victim *v = mg_victim_of(c, ctx->task);

	if (!v)
		return NOTIFY_DONE;
	switch (event) {
	case CGROUP_TASK_MIGRATING:
		atomic_inc(&c->ev_migrating);
		if (READ_ONCE(v->fail_next))
			return notifier_from_errno(MG_INJECTED);
		break;
	case CGROUP_TASK_MIGRATED:
		atomic_inc(&c->ev_migrated);
		break;
	case CGROUP_TASK_MIGRATE_CANCELED:
		atomic_inc(&c->ev_canceled);
		break;
	}
	return NOTIFY_OK;
}

/* ---- migrators ---------------------------------------------------------- */

static void mg_record_latency(struct mg_case *c, u64 ns)
{
	int i = atomic_inc_return(&c->nr_lat) - 1;

	if (i < MG_LAT_SAMPLES)
		c->lat_ns[i] = ns;
}

static void mg_migrate_step(struct cgk_worker *w)
{
	struct mg_case *c = w->gang->data;
	struct mg_victim *v = &c->victims[cgk_rand(w, c->nr_victims)];
	int dst = cgk_rand(w, (c->flags & MG_RMDIR) ? CGK_TREE_NR + 1 : CGK_TREE_NR);
	struct cgroup *from, *to;
	bool inject;
	u64 t0;
	int ret;

	if (!mutex_trylock(&v->lock))
		return;

	if (dst == CGK_TREE_EPHEMERAL) {
		to = cgk_tree_get_ephemeral(&c->tree);
		if (!to)
			goto out_unlock;
	} else {
		to = c->tree.cg[dst];
		cgroup_get(to);
	}
	from = cgk_where(v->cv->task);
	inject = (c->flags & MG_INJECT) && from != to && !cgk_rand(w, 4);
	WRITE_ONCE(v->fail_next, inject);

	t0 = ktime_get_ns();
	ret = cgroup_procs_write_for_test(to, v->cv->task);
	mg_record_latency(c, ktime_get_ns() - t0);
	WRITE_ONCE(v->fail_next, false);

	if (!ret) {
		if (inject)
			cgk_fail(w, "injected failure ignored: victim moved to %s",
				 cgk_tree_name(dst));
		else if (cgk_where(v->cv->task) != to)
			cgk_fail(w, "victim not in %s after a successful migration",
				 cgk_tree_name(dst));
		else if (!mg_group_in(v->cv->task, to))
			cgk_fail(w, "a thread of the group is not in %s after the group moved",
				 cgk_tree_name(dst));
		else if (cgroup_is_dead(to))
			cgk_fail(w, "victim migrated into %s, which is dead",
				 cgk_tree_name(dst));
		v->cg = dst;
		atomic_long_inc(&c->migrated);
		if (from != to)
			atomic_long_inc(&c->moved);
	} else if ((ret == MG_INJECTED && inject) ||
		   (ret == -ENODEV && dst == CGK_TREE_EPHEMERAL)) {
		atomic_long_inc(ret == -ENODEV ? &c->enodev : &c->injected);
		if (cgk_where(v->cv->task) != from)
			cgk_fail(w, "failed migration to %s (%d) moved the victim",
				 cgk_tree_name(dst), ret);
	} else {
		cgk_fail(w, "migration to %s failed: %d", cgk_tree_name(dst), ret);
	}
	cgroup_put(to);
out_unlock:
	mutex_unlock(&v->lock);
}

/* Move the victims out of @cgrp, which worker 0 wants to remove. */
static void mg_evict(struct cgk_worker *w, struct cgroup *cgrp)
{
	struct mg_case *c = w->gang->data;
	unsigned int i;
	int ret;

	for (i = 0; i < c->nr_victims; i++) {
		struct mg_victim *v = &c->victims[i];

		if (!mutex_trylock(&v->lock))
			continue;
		if (v->cg == CGK_TREE_EPHEMERAL && cgk_where(v->cv->task) == cgrp) {
			ret = cgroup_procs_write_for_test(c->tree.cg[0], v->cv->task);
			if (ret) {
				cgk_fail(w, "moving victim %u out of the leaf to remove: %d",
					 i, ret);
			} else {
				v->cg = 0;
				atomic_long_inc(&c->migrated);
				atomic_long_inc(&c->moved);
			}
		}
		mutex_unlock(&v->lock);
	}
}

/*
 * Worker 0 of an MG_RMDIR case removes the ephemeral leaf while migrations
 * target it (cgk_tree_rmdir_step()); after repeated -EBUSY it moves the
 * victims out.
 */
static const struct cgk_tree_rmdir mg_rmdir = {
	.patience	= MG_RMDIR_PATIENCE,
	.evict		= mg_evict,
};

static void mg_step(struct cgk_worker *w)
{
	struct mg_case *c = w->gang->data;

	if ((c->flags & MG_RMDIR) && w->index == 0)
		cgk_tree_rmdir_step(w, &c->tree, &mg_rmdir);
	else
		mg_migrate_step(w);
}

static const struct cgk_gang_ops mg_gang_ops = {
	.step = mg_step,
};

/* ---- fixture ------------------------------------------------------------ */

/* Cleanup action: stop everything, remove the hierarchy, whatever failed. */
static void mg_teardown(void *arg)
{
	struct mg_case *c = arg;

	if (c->nb_registered) {
		blocking_notifier_chain_unregister(&cgroup_task_notifier, &c->nb);
		c->nb_registered = false;
	}
	cgk_herd_stop(c->herd, MG_SETTLE_TIMEOUT_MS);
	cgk_tree_remove(c->test, &c->tree, MG_SETTLE_TIMEOUT_MS);
}

static struct mg_case *mg_setup(struct kunit *test, unsigned long flags,
				unsigned int nr_victims)
{
	struct mg_case *c;
	unsigned int i;

	c = kunit_kzalloc(test, sizeof(*c), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, c);
	c->test = test;
	c->flags = flags;
	c->lat_ns = kunit_kcalloc(test, MG_LAT_SAMPLES, sizeof(*c->lat_ns), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, c->lat_ns);
	c->victims = kunit_kcalloc(test, nr_victims, sizeof(*c->victims), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, c->victims);
	c->herd = cgk_herd_alloc(test, nr_victims,
				 ((flags & MG_FORK) ? CGK_VICTIM_FORK : 0) |
				 ((flags & MG_THREADS) ? CGK_VICTIM_THREADS : 0));
	KUNIT_ASSERT_NOT_NULL(test, c->herd);

	cgk_baseline_take(&c->base);
	KUNIT_ASSERT_EQ(test, 0, kunit_add_action_or_reset(test, mg_teardown, c));
	cgk_tree_create(test, &c->tree, "migrate", flags & MG_RMDIR);

	c->nr_victims = nr_victims;
	for (i = 0; i < nr_victims; i++) {
		struct mg_victim *v = &c->victims[i];
		struct task_struct *task;

		v->cv = &c->herd->victims[i];
		mutex_init(&v->lock);
		task = cgk_herd_start(c->herd, i, "cgk-victim");
		KUNIT_ASSERT_NOT_ERR_OR_NULL(test, task);
		KUNIT_ASSERT_EQ_MSG(test, 0, cgroup_procs_write_for_test(c->tree.cg[0], task),
				    "moving victim %u into the test hierarchy", i);
	}

	if (flags & MG_INJECT) {
		c->nb.notifier_call = mg_notify;
		KUNIT_ASSERT_EQ(test, 0, blocking_notifier_chain_register(&cgroup_task_notifier,
									  &c->nb));
		c->nb_registered = true;
	}
	return c;
}

/* ---- checks ------------------------------------------------------------- */

/* The cgroup a bookkeeping index stands for: the leaf may be closing. */
static struct cgroup *mg_cg(struct mg_case *c, int i)
{
	return cgk_tree_cg(&c->tree, i);
}

static void mg_check_membership(struct mg_case *c)
{
	struct kunit *test = c->test;
	unsigned int i;
	int cg;

	for (i = 0; i < c->nr_victims; i++) {
		KUNIT_EXPECT_PTR_EQ_MSG(test, cgk_where(c->victims[i].cv->task),
					mg_cg(c, c->victims[i].cg),
					"victim %u is not in %s, where the migrations put it",
					i, cgk_tree_name(c->victims[i].cg));
		KUNIT_EXPECT_TRUE_MSG(test, mg_group_in(c->victims[i].cv->task,
							mg_cg(c, c->victims[i].cg)),
				      "a thread of victim %u is not in %s with its group",
				      i, cgk_tree_name(c->victims[i].cg));
	}

	for (cg = 0; cg <= CGK_TREE_EPHEMERAL; cg++) {
		struct css_task_iter it;
		struct task_struct *task;
		unsigned int expected = 0, found = 0;

		if (!mg_cg(c, cg))
			continue;
		css_task_iter_start(&mg_cg(c, cg)->self, 0, &it);
		while ((task = css_task_iter_next(&it))) {
			struct mg_victim *v = mg_victim_of(c, task);

			if (v)
				found++;
		}
		css_task_iter_end(&it);
		for (i = 0; i < c->nr_victims; i++)
			expected += c->victims[i].cg == cg;
		KUNIT_EXPECT_EQ_MSG(test, found, expected,
				    "%s: task iterator and bookkeeping disagree",
				    cgk_tree_name(cg));
	}
}

/*
 * How much rmdir the racing worker got done depends on the machine, so
 * check its rules once more without the race: a leaf with a task in it
 * cannot be removed, an emptied one can, and a migration into it then
 * fails and moves nothing.
 */
static void mg_check_rmdir(struct mg_case *c)
{
	struct kunit *test = c->test;
	struct cgroup *leaf = mg_cg(c, CGK_TREE_EPHEMERAL);
	struct mg_victim *v = &c->victims[0];
	unsigned int i;

	if (!leaf)
		return;		/* the worker failed to make one: reported */

	/* A cgroup with a task in it cannot be removed. */
	if (v->cg != CGK_TREE_EPHEMERAL) {
		KUNIT_EXPECT_EQ(test, 0, cgroup_procs_write_for_test(leaf, v->cv->task));
		v->cg = CGK_TREE_EPHEMERAL;
	}
	KUNIT_EXPECT_EQ_MSG(test, cgroup_destroy_for_test(leaf), -EBUSY,
			    "rmdir of a cgroup with a task in it");

	for (i = 0; i < c->nr_victims; i++) {
		if (c->victims[i].cg != CGK_TREE_EPHEMERAL)
			continue;
		KUNIT_EXPECT_EQ(test, 0, cgroup_procs_write_for_test(c->tree.cg[0],
								     c->victims[i].cv->task));
		c->victims[i].cg = 0;
	}
	/* Children born in the leaf may still be exiting. */
	if (!cgk_leaf_remove(test, leaf, MG_SETTLE_TIMEOUT_MS))
		return;
	KUNIT_EXPECT_TRUE(test, cgroup_is_dead(leaf));
	KUNIT_EXPECT_EQ_MSG(test, cgroup_procs_write_for_test(leaf, v->cv->task), -ENODEV,
			    "migration into a removed cgroup");
	KUNIT_EXPECT_PTR_EQ(test, cgk_where(v->cv->task), mg_cg(c, v->cg));
}

static int mg_cmp_u64(const void *a, const void *b)
{
	u64 x = *(const u64 *)a, y = *(const u64 *)b;

	return x < y ? -1 : x > y;
}

static void mg_report_latency(struct mg_case *c)
{
	unsigned int n = min(atomic_read(&c->nr_lat), MG_LAT_SAMPLES);

	if (!n)
		return;
	sort(c->lat_ns, n, sizeof(*c->lat_ns), mg_cmp_u64, NULL);
	kunit_info(c->test, "migration latency (%s lock): p50=%lluus p99=%lluus max=%lluus n=%u\n",
		   cgroup_enable_per_threadgroup_rwsem ? "per-threadgroup" : "global",
		   div_u64(c->lat_ns[n / 2], NSEC_PER_USEC),
		   div_u64(c->lat_ns[n * 99 / 100], NSEC_PER_USEC),
		   div_u64(c->lat_ns[n - 1], NSEC_PER_USEC), n);
}

/* ---- the cases ---------------------------------------------------------- */

/* A case: what it races and the flags that make it. */
struct mg_variant {
	const char *desc;
	unsigned long flags;
};

static void mg_run(struct kunit *test, const struct mg_variant *v)
{
	unsigned long flags = v->flags;
	unsigned int nr = cgk_param_threads(test);
	unsigned long forks, thread_forks;
	struct cgk_cpus *cpus = NULL;
	struct cgk_gang *gang;
	struct mg_case *c;

	if (cgroup_enable_per_threadgroup_rwsem != mg_expect_dynmods)
		kunit_skip(test, "favordynmods is %s in this boot",
			   cgroup_enable_per_threadgroup_rwsem ? "on" : "off");

	kunit_info(test, "%s\n", v->desc);
	c = mg_setup(test, flags, (flags & MG_HOT) ? 2 : max(nr, 2U));
	gang = cgk_gang_create(test, nr, &mg_gang_ops, c);
	KUNIT_ASSERT_NOT_NULL(test, gang);
	if (flags & MG_CPUS) {
		cpus = cgk_cpus_disturb(gang, CGK_CPU_SHUFFLE | CGK_CPU_HOTPLUG);
		KUNIT_ASSERT_NOT_NULL(test, cpus);
	}
	cgk_gang_run(gang);
	if (cpus)
		cgk_cpus_finish(cpus);
	cgk_gang_report(gang);

	forks = cgk_herd_forks(c->herd);
	thread_forks = cgk_herd_thread_forks(c->herd);
	kunit_info(test, "%ld migrations, %ld injected failures, %ld -ENODEV, %ld rmdirs (%ld -EBUSY), %lu forks, %lu threads\n",
		   atomic_long_read(&c->migrated), atomic_long_read(&c->injected),
		   atomic_long_read(&c->enodev), atomic_long_read(&c->tree.rmdirs),
		   atomic_long_read(&c->tree.ebusy), forks, thread_forks);
	mg_report_latency(c);

	CGK_EXPECT_EXERCISED(test, atomic_long_read(&c->migrated), "no migration succeeded");
	if (flags & MG_FORK)
		CGK_EXPECT_EXERCISED(test, forks, "the victims never forked");
	if (flags & MG_THREADS)
		CGK_EXPECT_EXERCISED(test, thread_forks, "the victims never added a thread");
	if (flags & MG_INJECT) {
		long migrating = atomic_read(&c->ev_migrating) - atomic_read(&c->ev_canceled);

		CGK_EXPECT_EXERCISED(test, atomic_long_read(&c->injected),
				     "no migration failure was injected");
		KUNIT_EXPECT_EQ_MSG(test, (long)atomic_read(&c->ev_migrated),
				    atomic_long_read(&c->moved),
				    "MIGRATED events do not match the migrations that moved a victim");
		KUNIT_EXPECT_EQ_MSG(test, migrating,
				    atomic_long_read(&c->moved) + atomic_long_read(&c->injected),
				    "MIGRATING events do not match the moves and injected failures");
	}

	mg_check_membership(c);
	if (flags & MG_RMDIR)
		mg_check_rmdir(c);

	kunit_release_action(test, mg_teardown, c);
	cgk_expect_baseline(test, &c->base, MG_SETTLE_TIMEOUT_MS);
}

/*
 * The variants, one case each so that a filter names them: what the
 * victims and the workers do besides migrating.
 */
static const struct mg_variant mg_idle = {
	.desc = "sleeping victims: migrations race each other only",
	.flags = 0,
};

static const struct mg_variant mg_fork_churn = {
	.desc = "victims fork and reap children while they are being migrated",
	.flags = MG_FORK,
};

static const struct mg_variant mg_hot_victims = {
	.desc = "the whole gang fights over two forking victims",
	.flags = MG_FORK | MG_HOT,
};

static const struct mg_variant mg_rmdir_race = {
	.desc = "a leaf is removed and re-created while migrations target it",
	.flags = MG_FORK | MG_RMDIR,
};

static const struct mg_variant mg_injected_failure = {
	.desc = "a quarter of the migrations fail at MIGRATING and must roll back",
	.flags = MG_FORK | MG_INJECT,
};

static const struct mg_variant mg_threadgroups = {
	.desc = "victims are thread groups that keep adding threads that exit",
	.flags = MG_FORK | MG_THREADS,
};

/*
 * Workers keep being moved between CPUs and, where the kernel has CPU
 * hotplug, CPUs go offline and come back: the attach lock takes
 * cpus_read_lock() against the hotplug thread's cpus_write_lock().
 */
static const struct mg_variant mg_cpu_hotplug = {
	.desc = "workers shuffled between CPUs that go offline and come back",
	.flags = MG_FORK | MG_CPUS,
};

static const struct mg_variant mg_everything = {
	.desc = "everything at once",
	.flags = MG_FORK | MG_THREADS | MG_RMDIR | MG_INJECT,
};

static void migrate_idle(struct kunit *test)
{
	mg_run(test, &mg_idle);
}

static void migrate_fork_churn(struct kunit *test)
{
	mg_run(test, &mg_fork_churn);
}

static void migrate_hot_victims(struct kunit *test)
{
	mg_run(test, &mg_hot_victims);
}

static void migrate_rmdir_race(struct kunit *test)
{
	mg_run(test, &mg_rmdir_race);
}

static void migrate_injected_failure(struct kunit *test)
{
	mg_run(test, &mg_injected_failure);
}

static void migrate_threadgroups(struct kunit *test)
{
	mg_run(test, &mg_threadgroups);
}

static void migrate_cpu_hotplug(struct kunit *test)
{
	mg_run(test, &mg_cpu_hotplug);
}

static void migrate_everything(struct kunit *test)
{
	mg_run(test, &mg_everything);
}

static int mg_global_suite_init(struct kunit_suite *suite)
{
	mg_expect_dynmods = false;
	return cgk_suite_init(suite);
}

/* Without dynmods=1 every case of cgroup_migrate_dynmods skips, saying why. */
static int mg_dynmods_suite_init(struct kunit_suite *suite)
{
	mg_expect_dynmods = true;
	if (mg_dynmods)
		cgroup_favor_dynmods_for_test();
	else
		cgk_suite_skip(MG_DYNMODS_OFF);
	return cgk_suite_init(suite);
}

#define MG_CASES(name)					\
static struct kunit_case name[] = {			\
	CGK_CASE(migrate_idle),				\
	CGK_CASE(migrate_fork_churn),			\
	CGK_CASE(migrate_hot_victims),			\
	CGK_CASE(migrate_rmdir_race),			\
	CGK_CASE(migrate_injected_failure),		\
	CGK_CASE(migrate_threadgroups),			\
	CGK_CASE(migrate_cpu_hotplug),			\
	CGK_CASE(migrate_everything),			\
	{}						\
}

MG_CASES(cgroup_migrate_cases);
MG_CASES(cgroup_migrate_dynmods_cases);

static struct kunit_suite cgroup_migrate_suite = {
	.name = "cgroup_migrate",
	.suite_init = mg_global_suite_init,
	.suite_exit = cgk_suite_exit,
	.init = cgk_case_init,
	.exit = cgk_case_exit,
	.test_cases = cgroup_migrate_cases,
};

/*
 * After cgroup_migrate, and with dynmods=1 only: favordynmods cannot be
 * turned off, so nothing that runs later in the boot has the global lock.
 */
static struct kunit_suite cgroup_migrate_dynmods_suite = {
	.name = "cgroup_migrate_dynmods",
	.suite_init = mg_dynmods_suite_init,
	.suite_exit = cgk_suite_exit,
	.init = cgk_case_init,
	.exit = cgk_case_exit,
	.test_cases = cgroup_migrate_dynmods_cases,
};

kunit_test_suites(&cgroup_migrate_suite, &cgroup_migrate_dynmods_suite);
