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
 * cgroup_threadgroup_rwsem; cgroup_migrate_dynmods then switches the default
 * hierarchy to favordynmods, which makes the attach lock per thread group
 * and cannot be undone, and runs the same cases again. The global suite
 * comes first in the module and skips itself if favordynmods is already on.
 * Each victim is a kthread and so its own thread group; in
 * migrate_threadgroups and migrate_everything each victim also keeps adding
 * threads to its group with kernel_thread(CLONE_THREAD) that exit shortly
 * after, so thread creation and exit take the group's threadgroup lock
 * against the migrations of that group.
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
#include <linux/delay.h>
#include <linux/mutex.h>
#include <linux/notifier.h>
#include <linux/sched/signal.h>
#include <linux/slab.h>
#include <linux/sort.h>

#include "harness.h"

#define MG_NR_CGROUPS		13
#define MG_EPHEMERAL		MG_NR_CGROUPS	/* index of the leaf rmdir races */
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
	struct cgroup *cg[MG_NR_CGROUPS + 1];
	struct mutex eph_lock;		/* guards cg[MG_EPHEMERAL] */
	struct cgroup *closing;		/* the leaf worker 0 is removing */
	unsigned int busy_tries;
	unsigned int eph_gen;
	struct cgk_herd *herd;
	struct mg_victim *victims;
	unsigned int nr_victims;
	struct notifier_block nb;
	bool nb_registered;
	atomic_long_t migrated, moved, injected, enodev, ebusy, rmdirs;
	atomic_t ev_migrating, ev_migrated, ev_canceled;
	u64 *lat_ns;
	atomic_t nr_lat;
	unsigned int base_css_sets;
	int base_nr_cgrps;
};

/* The attach lock mode the running suite is about; see mg_run(). */
static bool mg_expect_dynmods;

static const int mg_parent[MG_NR_CGROUPS] = {
	-1, 0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3,
};

static const char * const mg_name[MG_NR_CGROUPS] = {
	"top", "a0", "a1", "a2", "b00", "b01", "b02", "b10", "b11", "b12",
	"b20", "b21", "b22",
};

static const char *mg_cg_name(int i)
{
	return i == MG_EPHEMERAL ? "ephemeral" : mg_name[i];
}

static struct cgroup *mg_where(struct task_struct *task)
{
	struct cgroup *cgrp;

	rcu_read_lock();
	cgrp = task_dfl_cgroup(task);
	rcu_read_unlock();
	return cgrp;
}

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

/* A reference on the current ephemeral leaf, or NULL while there is none. */
static struct cgroup *mg_get_ephemeral(struct mg_case *c)
{
	struct cgroup *cgrp;

	mutex_lock(&c->eph_lock);
	cgrp = c->cg[MG_EPHEMERAL];
	if (cgrp)
		cgroup_get(cgrp);
	mutex_unlock(&c->eph_lock);
	return cgrp;
}

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
	int dst = cgk_rand(w, (c->flags & MG_RMDIR) ? MG_NR_CGROUPS + 1 : MG_NR_CGROUPS);
	struct cgroup *from, *to;
	bool inject;
	u64 t0;
	int ret;

	if (!mutex_trylock(&v->lock))
		return;

	if (dst == MG_EPHEMERAL) {
		to = mg_get_ephemeral(c);
		if (!to)
			goto out_unlock;
	} else {
		to = c->cg[dst];
		cgroup_get(to);
	}
	from = mg_where(v->cv->task);
	inject = (c->flags & MG_INJECT) && from != to && !cgk_rand(w, 4);
	WRITE_ONCE(v->fail_next, inject);

	t0 = ktime_get_ns();
	ret = cgroup_procs_write_for_test(to, v->cv->task);
	mg_record_latency(c, ktime_get_ns() - t0);
	WRITE_ONCE(v->fail_next, false);

	if (!ret) {
		if (inject)
			cgk_fail(w, "injected failure ignored: victim moved to %s",
				 mg_cg_name(dst));
		else if (mg_where(v->cv->task) != to)
			cgk_fail(w, "victim not in %s after a successful migration",
				 mg_cg_name(dst));
		else if (!mg_group_in(v->cv->task, to))
			cgk_fail(w, "a thread of the group is not in %s after the group moved",
				 mg_cg_name(dst));
		else if (cgroup_is_dead(to))
			cgk_fail(w, "victim migrated into %s, which is dead",
				 mg_cg_name(dst));
		v->cg = dst;
		atomic_long_inc(&c->migrated);
		if (from != to)
			atomic_long_inc(&c->moved);
	} else if ((ret == MG_INJECTED && inject) ||
		   (ret == -ENODEV && dst == MG_EPHEMERAL)) {
		atomic_long_inc(ret == -ENODEV ? &c->enodev : &c->injected);
		if (mg_where(v->cv->task) != from)
			cgk_fail(w, "failed migration to %s (%d) moved the victim",
				 mg_cg_name(dst), ret);
	} else {
		cgk_fail(w, "migration to %s failed: %d", mg_cg_name(dst), ret);
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
		if (v->cg == MG_EPHEMERAL && mg_where(v->cv->task) == cgrp) {
			ret = cgroup_procs_write_for_test(c->cg[0], v->cv->task);
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
 * Worker 0 of an MG_RMDIR case: remove the ephemeral leaf while migrations
 * target it, keep it published a little once removed (migrations into it
 * must now fail with -ENODEV), then publish a new one. After repeated
 * -EBUSY, close it to new migrations and move the victims out.
 */
static void mg_rmdir_step(struct cgk_worker *w)
{
	struct mg_case *c = w->gang->data;
	struct cgroup *target, *new;
	char name[24];
	int ret;

	mutex_lock(&c->eph_lock);
	target = c->closing ?: c->cg[MG_EPHEMERAL];
	mutex_unlock(&c->eph_lock);
	if (!target)
		return;

	ret = cgroup_destroy_for_test(target);
	if (ret == -EBUSY) {
		atomic_long_inc(&c->ebusy);
		if (++c->busy_tries < MG_RMDIR_PATIENCE)
			return;
		if (!c->closing) {
			mutex_lock(&c->eph_lock);
			c->closing = target;
			c->cg[MG_EPHEMERAL] = NULL;
			mutex_unlock(&c->eph_lock);
		}
		mg_evict(w, target);
		return;
	}
	if (ret) {
		cgk_fail(w, "removing the ephemeral leaf: %d", ret);
		return;
	}
	atomic_long_inc(&c->rmdirs);
	c->busy_tries = 0;
	usleep_range(200, 400);

	snprintf(name, sizeof(name), "eph%u", ++c->eph_gen);
	new = cgroup_create_for_test(c->cg[0], name);
	if (IS_ERR(new)) {
		cgk_fail(w, "creating %s: %pe", name, new);
		new = NULL;
	}
	mutex_lock(&c->eph_lock);
	c->cg[MG_EPHEMERAL] = new;
	c->closing = NULL;
	mutex_unlock(&c->eph_lock);
	cgroup_put(target);
}

static void mg_step(struct cgk_worker *w)
{
	struct mg_case *c = w->gang->data;

	if ((c->flags & MG_RMDIR) && w->index == 0)
		mg_rmdir_step(w);
	else
		mg_migrate_step(w);
}

static const struct cgk_gang_ops mg_gang_ops = {
	.step = mg_step,
};

/* ---- fixture ------------------------------------------------------------ */

static bool mg_removed(void *arg)
{
	struct mg_case *c = arg;
	int i, busy = 0;

	if (c->closing) {
		if (cgroup_destroy_for_test(c->closing) == -EBUSY)
			return false;
		cgroup_put(c->closing);
		c->closing = NULL;
	}

	for (i = MG_EPHEMERAL; i >= 0; i--) {
		if (!c->cg[i])
			continue;
		if (cgroup_destroy_for_test(c->cg[i]) == -EBUSY) {
			busy++;
			continue;
		}
		cgroup_put(c->cg[i]);
		c->cg[i] = NULL;
	}
	return !busy;
}

/* Cleanup action: stop everything, remove the hierarchy, whatever failed. */
static void mg_teardown(void *arg)
{
	struct mg_case *c = arg;

	if (c->nb_registered) {
		blocking_notifier_chain_unregister(&cgroup_task_notifier, &c->nb);
		c->nb_registered = false;
	}
	cgk_herd_stop(c->herd, MG_SETTLE_TIMEOUT_MS);
	/* Exited victims leave their cgroups once their tasks are released. */
	if (!cgk_wait_for(mg_removed, c, MG_SETTLE_TIMEOUT_MS))
		KUNIT_FAIL(c->test, "test cgroups still busy %d ms after the victims exited",
			   MG_SETTLE_TIMEOUT_MS);
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
	mutex_init(&c->eph_lock);
	c->lat_ns = kunit_kcalloc(test, MG_LAT_SAMPLES, sizeof(*c->lat_ns), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, c->lat_ns);
	c->victims = kunit_kcalloc(test, nr_victims, sizeof(*c->victims), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, c->victims);
	c->herd = cgk_herd_alloc(test, nr_victims,
				 ((flags & MG_FORK) ? CGK_VICTIM_FORK : 0) |
				 ((flags & MG_THREADS) ? CGK_VICTIM_THREADS : 0));
	KUNIT_ASSERT_NOT_NULL(test, c->herd);

	c->base_css_sets = cgroup_nr_css_sets_for_test();
	c->base_nr_cgrps = atomic_read(&cgrp_dfl_root.nr_cgrps);
	KUNIT_ASSERT_EQ(test, 0, kunit_add_action_or_reset(test, mg_teardown, c));

	for (i = 0; i < MG_NR_CGROUPS; i++) {
		struct cgroup *parent = mg_parent[i] < 0 ? &cgrp_dfl_root.cgrp :
							     c->cg[mg_parent[i]];
		char name[32];

		/* The top gets a unique name: a failed case may leave one. */
		if (i)
			strscpy(name, mg_name[i]);
		else
			snprintf(name, sizeof(name), "cgk-migrate-%d", test->param_index);
		c->cg[i] = cgroup_create_for_test(parent, name);
		KUNIT_ASSERT_NOT_ERR_OR_NULL_MSG(test, c->cg[i], "creating %s", name);
	}
	if (flags & MG_RMDIR) {
		c->cg[MG_EPHEMERAL] = cgroup_create_for_test(c->cg[0], "eph0");
		KUNIT_ASSERT_NOT_ERR_OR_NULL(test, c->cg[MG_EPHEMERAL]);
	}

	c->nr_victims = nr_victims;
	for (i = 0; i < nr_victims; i++) {
		struct mg_victim *v = &c->victims[i];
		struct task_struct *task;

		v->cv = &c->herd->victims[i];
		mutex_init(&v->lock);
		task = cgk_herd_start(c->herd, i, "cgk-victim");
		KUNIT_ASSERT_NOT_ERR_OR_NULL(test, task);
		KUNIT_ASSERT_EQ_MSG(test, 0, cgroup_procs_write_for_test(c->cg[0], task),
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
	if (i == MG_EPHEMERAL && !c->cg[i])
		return c->closing;
	return c->cg[i];
}

static void mg_check_membership(struct mg_case *c)
{
	struct kunit *test = c->test;
	unsigned int i;
	int cg;

	for (i = 0; i < c->nr_victims; i++) {
		KUNIT_EXPECT_PTR_EQ_MSG(test, mg_where(c->victims[i].cv->task),
					mg_cg(c, c->victims[i].cg),
					"victim %u is not in %s, where the migrations put it",
					i, mg_cg_name(c->victims[i].cg));
		KUNIT_EXPECT_TRUE_MSG(test, mg_group_in(c->victims[i].cv->task,
							mg_cg(c, c->victims[i].cg)),
				      "a thread of victim %u is not in %s with its group",
				      i, mg_cg_name(c->victims[i].cg));
	}

	for (cg = 0; cg <= MG_EPHEMERAL; cg++) {
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
				    mg_cg_name(cg));
	}
}

static bool mg_leaf_removed(void *arg)
{
	struct mg_case *c = arg;

	return cgroup_destroy_for_test(mg_cg(c, MG_EPHEMERAL)) != -EBUSY;
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
	struct cgroup *leaf = mg_cg(c, MG_EPHEMERAL);
	struct mg_victim *v = &c->victims[0];
	unsigned int i;

	if (!leaf)
		return;		/* the worker failed to make one: reported */

	/* A cgroup with a task in it cannot be removed. */
	if (v->cg != MG_EPHEMERAL) {
		KUNIT_EXPECT_EQ(test, 0, cgroup_procs_write_for_test(leaf, v->cv->task));
		v->cg = MG_EPHEMERAL;
	}
	KUNIT_EXPECT_EQ_MSG(test, cgroup_destroy_for_test(leaf), -EBUSY,
			    "rmdir of a cgroup with a task in it");

	for (i = 0; i < c->nr_victims; i++) {
		if (c->victims[i].cg != MG_EPHEMERAL)
			continue;
		KUNIT_EXPECT_EQ(test, 0, cgroup_procs_write_for_test(c->cg[0],
								     c->victims[i].cv->task));
		c->victims[i].cg = 0;
	}
	/* Children born in the leaf may still be exiting. */
	if (!cgk_wait_for(mg_leaf_removed, c, MG_SETTLE_TIMEOUT_MS)) {
		KUNIT_FAIL(test, "the emptied leaf was still busy after %d ms",
			   MG_SETTLE_TIMEOUT_MS);
		return;
	}
	KUNIT_EXPECT_TRUE(test, cgroup_is_dead(leaf));
	KUNIT_EXPECT_EQ_MSG(test, cgroup_procs_write_for_test(leaf, v->cv->task), -ENODEV,
			    "migration into a removed cgroup");
	KUNIT_EXPECT_PTR_EQ(test, mg_where(v->cv->task), mg_cg(c, v->cg));
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

static bool mg_settled(void *arg)
{
	struct mg_case *c = arg;

	return cgroup_nr_css_sets_for_test() == c->base_css_sets &&
	       atomic_read(&cgrp_dfl_root.nr_cgrps) == c->base_nr_cgrps;
}

/* ---- the cases ---------------------------------------------------------- */

static void mg_run(struct kunit *test, unsigned long flags)
{
	unsigned int nr = cgk_param_threads(test);
	unsigned long forks, thread_forks;
	struct cgk_gang *gang;
	struct mg_case *c;

	if (cgroup_enable_per_threadgroup_rwsem != mg_expect_dynmods)
		kunit_skip(test, "favordynmods is %s in this boot",
			   cgroup_enable_per_threadgroup_rwsem ? "on" : "off");

	c = mg_setup(test, flags, (flags & MG_HOT) ? 2 : max(nr, 2U));
	gang = cgk_gang_create(test, nr, &mg_gang_ops, c);
	KUNIT_ASSERT_NOT_NULL(test, gang);
	cgk_gang_run(gang);
	cgk_gang_report(gang);

	forks = cgk_herd_forks(c->herd);
	thread_forks = cgk_herd_thread_forks(c->herd);
	kunit_info(test, "%ld migrations, %ld injected failures, %ld -ENODEV, %ld rmdirs (%ld -EBUSY), %lu forks, %lu threads\n",
		   atomic_long_read(&c->migrated), atomic_long_read(&c->injected),
		   atomic_long_read(&c->enodev), atomic_long_read(&c->rmdirs),
		   atomic_long_read(&c->ebusy), forks, thread_forks);
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
	if (!cgk_wait_for(mg_settled, c, MG_SETTLE_TIMEOUT_MS))
		KUNIT_FAIL(test,
			   "css_sets %u (baseline %u), cgroups %d (baseline %d) %d ms after teardown",
			   cgroup_nr_css_sets_for_test(), c->base_css_sets,
			   atomic_read(&cgrp_dfl_root.nr_cgrps), c->base_nr_cgrps,
			   MG_SETTLE_TIMEOUT_MS);
}

/* Sleeping victims: migrations race each other only. */
static void migrate_idle(struct kunit *test)
{
	mg_run(test, 0);
}

/* Victims fork and reap children while they are being migrated. */
static void migrate_fork_churn(struct kunit *test)
{
	mg_run(test, MG_FORK);
}

/* The whole gang fights over two forking victims. */
static void migrate_hot_victims(struct kunit *test)
{
	mg_run(test, MG_FORK | MG_HOT);
}

/* A leaf is removed and re-created while migrations target it. */
static void migrate_rmdir_race(struct kunit *test)
{
	mg_run(test, MG_FORK | MG_RMDIR);
}

/* A quarter of the migrations fail at MIGRATING and must roll back. */
static void migrate_injected_failure(struct kunit *test)
{
	mg_run(test, MG_FORK | MG_INJECT);
}

/* Victims are thread groups that keep adding threads that exit. */
static void migrate_threadgroups(struct kunit *test)
{
	mg_run(test, MG_FORK | MG_THREADS);
}

/* Everything at once. */
static void migrate_everything(struct kunit *test)
{
	mg_run(test, MG_FORK | MG_THREADS | MG_RMDIR | MG_INJECT);
}

static int mg_global_init(struct kunit *test)
{
	mg_expect_dynmods = false;
	return cgk_case_init(test);
}

static int mg_dynmods_init(struct kunit *test)
{
	mg_expect_dynmods = true;
	return cgk_case_init(test);
}

static int mg_dynmods_suite_init(struct kunit_suite *suite)
{
	cgroup_favor_dynmods_for_test();
	return cgk_suite_init(suite);
}

/* Each case takes its time bound plus the teardown: KUnit calls that slow. */
#define MG_CASE(fn) \
	KUNIT_CASE_PARAM_ATTR(fn, cgk_threads_gen, { .speed = KUNIT_SPEED_SLOW })

#define MG_CASES(name)					\
static struct kunit_case name[] = {			\
	MG_CASE(migrate_idle),				\
	MG_CASE(migrate_fork_churn),			\
	MG_CASE(migrate_hot_victims),			\
	MG_CASE(migrate_rmdir_race),			\
	MG_CASE(migrate_injected_failure),		\
	MG_CASE(migrate_threadgroups),			\
	MG_CASE(migrate_everything),			\
	{}						\
}

MG_CASES(cgroup_migrate_cases);
MG_CASES(cgroup_migrate_dynmods_cases);

static struct kunit_suite cgroup_migrate_suite = {
	.name = "cgroup_migrate",
	.suite_init = cgk_suite_init,
	.suite_exit = cgk_suite_exit,
	.init = mg_global_init,
	.exit = cgk_case_exit,
	.test_cases = cgroup_migrate_cases,
};

/* Must come after cgroup_migrate: favordynmods cannot be turned off. */
static struct kunit_suite cgroup_migrate_dynmods_suite = {
	.name = "cgroup_migrate_dynmods",
	.suite_init = mg_dynmods_suite_init,
	.suite_exit = cgk_suite_exit,
	.init = mg_dynmods_init,
	.exit = cgk_case_exit,
	.test_cases = cgroup_migrate_dynmods_cases,
};

kunit_test_suites(&cgroup_migrate_suite, &cgroup_migrate_dynmods_suite);
