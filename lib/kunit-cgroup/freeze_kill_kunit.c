// SPDX-License-Identifier: GPL-2.0-only
/*
 * cgroup_freeze_kill: the v2 freezer and cgroup.kill racing fork and
 * migration.
 *
 * What races: victims that are not kthreads (CGK_VICTIM_USER, see
 * harness.h; the freezer and cgroup.kill skip kthreads) keep forking
 * children in a test hierarchy on the default root (top; a and b in it; c
 * in a) while migrator kthreads move them between its cgroups by writing
 * their pids to cgroup.procs (opened through a mount of the default
 * hierarchy) or through the KUnit entry point below it, and:
 *  - in cgroup_freeze_migrate, a worker writes 1 or 0 to the cgroup.freeze
 *    file of a random cgroup;
 *  - in cgroup_kill_migrate, a worker writes 1 to the cgroup.kill file of
 *    a random cgroup and starts new victims for the ones killed;
 *  - in signal_queue_kill, migrators also send real-time signals to the
 *    victims, which block and unblock them in turns (and run as a user of
 *    their own), so signals are queued, each charged to that user's
 *    RLIMIT_SIGPENDING, then dequeued, or flushed when a kill or an exit
 *    comes first;
 *  - in freeze_kill_everything, all of it;
 *  - in kill_forks_in_flight, each worker writes 1 to the cgroup.kill of a
 *    leaf of its own while a parent there keeps forking (see the section
 *    of that case below).
 * Freezing and killing exclude the moves (a case rwsem), so that what each
 * must do is known exactly; the kernel still races them against the
 * victims and their children forking and exiting. A victim started after
 * a kill is moved into the top while it runs, and may be forking then:
 * if the top is frozen, its child is born in a frozen cgroup, and a kill
 * that comes before the victim reached the freezer's trap meets that fork
 * in flight. Each wait for a state is bounded by what freezing and
 * thawing every victim took at the start (fk_measure_pace()), so that a
 * slow machine waits longer instead of failing.
 *
 * Invariants, checked right after each operation and at the end:
 *  - a move leaves the victim in its destination, frozen (in the freezer's
 *    trap) if the destination is effectively frozen, and running again
 *    (its loop turns) if it is not;
 *  - after a write to cgroup.freeze, every cgroup of the hierarchy reports
 *    frozen exactly when it or an ancestor is set to freeze (children
 *    forked meanwhile included), and every victim is frozen or runs
 *    accordingly;
 *  - after a write to cgroup.kill, every victim in the killed subtree dies,
 *    every other victim lives, and the subtree empties: no child forked
 *    meanwhile escapes; in kill_forks_in_flight, a child still running
 *    once the write returned has SIGKILL pending;
 *  - once every victim and child has exited, nothing is charged to their
 *    user's RLIMIT_SIGPENDING or RLIMIT_NPROC any more, and its ucounts
 *    are freed;
 *  - at the end, freezing the top of the hierarchy freezes everything in
 *    it (no victim turns its loop), and thawing it lets everything run;
 *    css task iterators find exactly the victims the bookkeeping puts in
 *    each cgroup; after teardown the css_sets and cgroups are back to
 *    their baseline.
 * The oracle (harness.c) fails a case on any lockdep, KCSAN, KASAN,
 * refcount_t or WARNING report.
 */

#include <linux/cgroup.h>
#include <linux/cgroup_kunit.h>
#include <linux/delay.h>
#include <linux/file.h>
#include <linux/fs.h>
#include <linux/ktime.h>
#include <linux/math64.h>
#include <linux/minmax.h>
#include <linux/mount.h>
#include <linux/mutex.h>
#include <linux/rwsem.h>
#include <linux/sched/debug.h>
#include <linux/sched/signal.h>
#include <linux/sched/task.h>

#include "harness.h"

#define FK_NR_CGROUPS		4	/* top; a and b in it; c in a */
/*
 * How long a victim or cgroup may take to reach the state it must: the case
 * measures how long freezing and thawing all its victims takes before the
 * race starts (fk_measure_pace()) and allows FK_STATE_PACE times that, at
 * least FK_STATE_TIMEOUT_MS and at most FK_STATE_TIMEOUT_MAX_MS. A slower
 * machine (TCG, KASAN, a busy host) gets a bound as much longer.
 */
#define FK_STATE_TIMEOUT_MS	5000
#define FK_STATE_PACE		20
#define FK_STATE_TIMEOUT_MAX_MS	60000
/* Exiting tasks and removed cgroups are freed after RCU: wait for them. */
#define FK_SETTLE_TIMEOUT_MS	10000
/* How long a frozen victim is watched for not turning its loop. */
#define FK_STILL_MS		20
/* The victims' user in signal cases, plus the parameter index. */
#define FK_UID			3143000

enum fk_flags {
	FK_FREEZE	= BIT(0),	/* a worker freezes and thaws cgroups */
	FK_KILL		= BIT(1),	/* a worker kills cgroups */
	FK_SIGNAL	= BIT(2),	/* migrators also queue signals */
};

enum fk_file {
	FK_PROCS,
	FK_FREEZE_FILE,
	FK_KILL_FILE,
	FK_NR_FILES
};

static const char * const fk_file_name[FK_NR_FILES] = {
	"cgroup.procs", "cgroup.freeze", "cgroup.kill",
};

static const int fk_parent[FK_NR_CGROUPS] = { -1, 0, 0, 1 };
static const char * const fk_name[FK_NR_CGROUPS] = { "top", "a", "b", "c" };

struct fk_victim {
	struct cgk_victim *cv;
	struct mutex lock;		/* held by the worker moving it */
	int cg;				/* bookkeeping: where it is */
};

struct fk_case {
	struct kunit *test;
	unsigned long flags;
	struct cgroup *cg[FK_NR_CGROUPS];
	struct vfsmount *mnt;
	struct file *file[FK_NR_CGROUPS][FK_NR_FILES];
	bool freeze[FK_NR_CGROUPS];	/* what cgroup.freeze was set to */
	/* Moves take it for reading; freezing and killing to write. */
	struct rw_semaphore state;
	struct cgk_herd *herd;
	struct fk_victim *victims;
	unsigned int nr_victims;
	atomic_long_t moves, freezes, thaws, kills, killed, signals, max_pending;
	struct ucounts *uc;		/* the victims' user's, with FK_SIGNAL */
	unsigned int pace_ms;		/* freezing and thawing every victim took */
	unsigned int state_ms;		/* bound of every wait for a state */
	struct cgk_baseline base;
};

/* Whether cgroup @i or an ancestor is set to freeze. */
static bool fk_e_freeze(struct fk_case *c, int i)
{
	for (; i >= 0; i = fk_parent[i]) {
		if (c->freeze[i])
			return true;
	}
	return false;
}

/* Whether cgroup @i is in the subtree of cgroup @top. */
static bool fk_in_subtree(int i, int top)
{
	for (; i >= 0; i = fk_parent[i]) {
		if (i == top)
			return true;
	}
	return false;
}

static bool fk_task_frozen(struct task_struct *task)
{
	/* Set under the task's siglock; peeked at and polled until it settles. */
	return data_race(cgroup_task_frozen(task));
}

static bool fk_populated(struct cgroup *cgrp)
{
	/* Counted under css_set_lock; peeked at and polled until it settles. */
	return data_race(cgroup_is_populated(cgrp));
}

/* ---- states a victim or cgroup must reach -------------------------------- */

struct fk_want {
	struct fk_victim *v;
	unsigned long loops;		/* what the victim's loop had turned */
	bool frozen;
};

/* In the freezer's trap, or running: turned its loop since @w->loops. */
static bool fk_victim_reached(void *arg)
{
	struct fk_want *w = arg;
	struct task_struct *task = w->v->cv->task;

	if (w->frozen)
		return fk_task_frozen(task);
	return !fk_task_frozen(task) &&
	       READ_ONCE(w->v->cv->loops) != w->loops;
}

/* Wait for @v to be frozen or running, as its cgroup wants. */
static bool fk_victim_settle(struct fk_case *c, struct fk_victim *v)
{
	struct fk_want w = {
		.v = v, .loops = READ_ONCE(v->cv->loops),
		.frozen = fk_e_freeze(c, v->cg),
	};

	return cgk_wait_for(fk_victim_reached, &w, c->state_ms);
}

/* Every cgroup reports frozen exactly when it or an ancestor is set to. */
static bool fk_cgroups_reached(void *arg)
{
	struct fk_case *c = arg;
	int i;

	for (i = 0; i < FK_NR_CGROUPS; i++) {
		if (test_bit(CGRP_FROZEN, &c->cg[i]->flags) != fk_e_freeze(c, i))
			return false;
	}
	return true;
}

static const char *fk_cgroup_mismatch(struct fk_case *c)
{
	int i;

	for (i = 0; i < FK_NR_CGROUPS; i++) {
		if (test_bit(CGRP_FROZEN, &c->cg[i]->flags) != fk_e_freeze(c, i))
			return fk_name[i];
	}
	return NULL;
}

/*
 * After a freeze or a thaw: every cgroup and every victim in the state it
 * must reach. Returns the failure to report, or NULL.
 */
static const char *fk_check_states(struct fk_case *c, unsigned int *victim)
{
	unsigned int i;

	if (!cgk_wait_for(fk_cgroups_reached, c, c->state_ms))
		return "cgroup";
	for (i = 0; i < c->nr_victims; i++) {
		if (!fk_victim_settle(c, &c->victims[i])) {
			*victim = i;
			return "victim";
		}
	}
	return NULL;
}

/*
 * A task that did not reach the state it must within c->state_ms:
 * say what it was doing, and print its stack, for the failure to be
 * understood from the console alone.
 */
static void fk_describe(struct task_struct *task, char *buf, size_t len)
{
	bool sigkill, group_exit;

	/* Unlocked peek at a stuck task's signals: a hint for the message */
	sigkill = data_race(sigismember(&task->pending.signal, SIGKILL) ||
			    sigismember(&task->signal->shared_pending.signal, SIGKILL));
	/* Likewise: whether its group is on the way out */
	group_exit = data_race(task->signal->flags & SIGNAL_GROUP_EXIT);
	snprintf(buf, len, "state %#x, jobctl %#lx, %sfrozen, %s, %s%s",
		 READ_ONCE(task->__state), READ_ONCE(task->jobctl),
		 fk_task_frozen(task) ? "" : "not ",
		 READ_ONCE(task->exit_state) ? "exited" : "alive",
		 sigkill ? "SIGKILL pending" : "no SIGKILL",
		 group_exit ? ", group exit" : "");
	sched_show_task(task);
}

/* A live task in @cgrp, with a reference, or NULL. */
static struct task_struct *fk_any_task(struct cgroup *cgrp)
{
	struct task_struct *task;
	struct css_task_iter it;

	css_task_iter_start(&cgrp->self, 0, &it);
	task = css_task_iter_next(&it);
	if (task)
		get_task_struct(task);
	css_task_iter_end(&it);
	return task;
}

/* ---- the operations ----------------------------------------------------- */

static void fk_move_step(struct cgk_worker *w)
{
	struct fk_case *c = w->gang->data;
	struct fk_victim *v = &c->victims[cgk_rand(w, c->nr_victims)];
	int dst = cgk_rand(w, FK_NR_CGROUPS);
	struct task_struct *task = v->cv->task;
	int ret;

	if (!mutex_trylock(&v->lock))
		return;
	if (cgk_rand(w, 3))
		ret = cgk_file_write_pid(c->file[dst][FK_PROCS], task, true);
	else
		ret = cgroup_procs_write_for_test(c->cg[dst], task);
	if (ret) {
		cgk_fail(w, "moving a victim to %s: %d", fk_name[dst], ret);
	} else {
		v->cg = dst;
		atomic_long_inc(&c->moves);
		if (cgk_where(task) != c->cg[dst])
			cgk_fail(w, "victim not in %s after a move", fk_name[dst]);
		else if (!fk_victim_settle(c, v))
			cgk_fail(w, "victim moved into %s (%s) is %s",
				 fk_name[dst], fk_e_freeze(c, dst) ? "frozen" : "thawed",
				 fk_task_frozen(task) ?
				 "still frozen" : "not frozen");
	}
	mutex_unlock(&v->lock);
}

/* Queue a few signals for a victim, which may have them blocked. */
static void fk_signal_step(struct cgk_worker *w)
{
	struct fk_case *c = w->gang->data;
	struct fk_victim *v = &c->victims[cgk_rand(w, c->nr_victims)];
	struct task_struct *task = v->cv->task;
	unsigned int i, n = 1 + cgk_rand(w, 4);
	long pending;

	/* A victim killed or on its way out queues nothing: leave it. */
	if ((READ_ONCE(task->flags) & PF_EXITING) ||
	    (READ_ONCE(task->signal->flags) & SIGNAL_GROUP_EXIT))
		return;
	for (i = 0; i < n; i++) {
		if (send_sig(CGK_VICTIM_SIGNAL, task, 0)) {
			cgk_fail(w, "sending a signal to a victim failed");
			return;
		}
		atomic_long_inc(&c->signals);
	}
	pending = get_rlimit_value(c->uc, UCOUNT_RLIMIT_SIGPENDING);
	if (pending < 0)
		cgk_fail(w, "%ld pending signals charged to the victims' user", pending);
	cgk_atomic_long_max(&c->max_pending, pending);
}

static void fk_freeze_step(struct cgk_worker *w)
{
	struct fk_case *c = w->gang->data;
	int i = cgk_rand(w, FK_NR_CGROUPS);
	char why[CGK_FAILURE_LEN / 2];
	const char *bad;
	unsigned int victim = 0;
	int ret;

	down_write(&c->state);
	ret = cgk_file_write(c->file[i][FK_FREEZE_FILE], c->freeze[i] ? "0\n" : "1\n");
	if (ret) {
		cgk_fail(w, "writing %s/cgroup.freeze: %d", fk_name[i], ret);
		goto out;
	}
	c->freeze[i] = !c->freeze[i];
	atomic_long_inc(c->freeze[i] ? &c->freezes : &c->thaws);
	bad = fk_check_states(c, &victim);
	if (bad && !strcmp(bad, "cgroup"))
		cgk_fail(w, "after %s %s: %s does not report what it must",
			 c->freeze[i] ? "freezing" : "thawing", fk_name[i],
			 fk_cgroup_mismatch(c) ?: "a cgroup");
	else if (bad) {
		fk_describe(c->victims[victim].cv->task, why, sizeof(why));
		cgk_fail(w, "after %s %s: victim %u in %s is not %s: %s",
			 c->freeze[i] ? "freezing" : "thawing", fk_name[i], victim,
			 fk_name[c->victims[victim].cg],
			 fk_e_freeze(c, c->victims[victim].cg) ? "frozen" : "running",
			 why);
	}
out:
	up_write(&c->state);
}

struct fk_kill {
	struct fk_case *c;
	int top;
};

/* The killed victims are dead and the killed subtree is empty. */
static bool fk_kill_done(void *arg)
{
	struct fk_kill *k = arg;
	struct fk_case *c = k->c;
	unsigned int i;

	for (i = 0; i < c->nr_victims; i++) {
		if (fk_in_subtree(c->victims[i].cg, k->top) &&
		    !cgk_victim_dead(c->victims[i].cv))
			return false;
	}
	return !fk_populated(c->cg[k->top]);
}

static void fk_kill_step(struct cgk_worker *w)
{
	struct fk_case *c = w->gang->data;
	/*
	 * The top (everything) one time in eight, and the first time: on a
	 * busy host the worker may kill only once, and a cgroup with no
	 * victim in it would leave nothing killed.
	 */
	struct fk_kill k = {
		.c = c,
		.top = cgk_rand(w, 8) && atomic_long_read(&c->killed) ?
		       1 + cgk_rand(w, 3) : 0,
	};
	char why[CGK_FAILURE_LEN / 2];
	struct task_struct *task;
	unsigned int i, nr = 0;
	int ret;

	down_write(&c->state);
	ret = cgk_file_write(c->file[k.top][FK_KILL_FILE], "1\n");
	if (ret) {
		cgk_fail(w, "writing %s/cgroup.kill: %d", fk_name[k.top], ret);
		goto out;
	}
	atomic_long_inc(&c->kills);
	if (!cgk_wait_for(fk_kill_done, &k, c->state_ms)) {
		task = fk_any_task(c->cg[k.top]);
		for (i = 0; !task && i < c->nr_victims; i++) {
			if (fk_in_subtree(c->victims[i].cg, k.top) &&
			    !cgk_victim_dead(c->victims[i].cv))
				task = get_task_struct(c->victims[i].cv->task);
		}
		strscpy(why, "none found now");
		if (task) {
			fk_describe(task, why, sizeof(why));
			put_task_struct(task);
		}
		cgk_fail(w, "after killing %s: %s (one: %s)", fk_name[k.top],
			 fk_populated(c->cg[k.top]) ?
			 "tasks are left in it" : "a victim in it lives", why);
		goto out;
	}
	for (i = 0; i < c->nr_victims; i++) {
		struct fk_victim *v = &c->victims[i];

		if (!fk_in_subtree(v->cg, k.top)) {
			if (cgk_victim_dead(v->cv)) {
				cgk_fail(w, "killing %s killed a victim in %s",
					 fk_name[k.top], fk_name[v->cg]);
				goto out;
			}
			continue;
		}
		/* A new victim in its place, in the top of the hierarchy. */
		nr++;
		task = cgk_herd_restart(c->herd, i, "cgk-fk");
		if (IS_ERR(task)) {
			cgk_fail(w, "starting a victim: %pe", task);
			goto out;
		}
		ret = cgroup_procs_write_for_test(c->cg[0], task);
		if (ret) {
			cgk_fail(w, "moving a new victim to top: %d", ret);
			goto out;
		}
		v->cg = 0;
	}
	atomic_long_add(nr, &c->killed);
out:
	up_write(&c->state);
}

static void fk_step(struct cgk_worker *w)
{
	struct fk_case *c = w->gang->data;
	bool both = (c->flags & FK_FREEZE) && (c->flags & FK_KILL);

	if ((c->flags & FK_FREEZE) && w->index == 0) {
		fk_freeze_step(w);
	} else if ((c->flags & FK_KILL) && w->index == (both ? 1 : 0)) {
		fk_kill_step(w);
	} else {
		down_read(&c->state);
		if ((c->flags & FK_SIGNAL) && !cgk_rand(w, 3))
			fk_signal_step(w);
		else
			fk_move_step(w);
		up_read(&c->state);
	}
}

static const struct cgk_gang_ops fk_gang_ops = {
	.step = fk_step,
};

/* ---- fixture ------------------------------------------------------------ */

static bool fk_removed(void *arg)
{
	struct fk_case *c = arg;
	bool done = true;

	done &= cgk_cgroups_remove(c->cg, FK_NR_CGROUPS);
	return done;
}

/* Cleanup action: thaw, stop the victims, remove the hierarchy. */
static void fk_teardown(void *arg)
{
	struct fk_case *c = arg;
	int i, f;

	/* Frozen victims cannot exit. */
	for (i = 0; i < FK_NR_CGROUPS; i++) {
		if (c->freeze[i] && !cgk_file_write(c->file[i][FK_FREEZE_FILE], "0\n"))
			c->freeze[i] = false;
	}
	if (!cgk_herd_stop(c->herd, FK_SETTLE_TIMEOUT_MS))
		KUNIT_FAIL(c->test, "victims still there %d ms after they were told to exit",
			   FK_SETTLE_TIMEOUT_MS);
	for (i = 0; i < FK_NR_CGROUPS; i++) {
		for (f = 0; f < FK_NR_FILES; f++) {
			if (c->file[i][f])
				fput(c->file[i][f]);
			c->file[i][f] = NULL;
		}
	}
	/* A kthread's last fput() is deferred: the mount stays until then. */
	flush_delayed_fput();
	if (c->mnt)
		kern_unmount(c->mnt);
	c->mnt = NULL;
	if (!cgk_wait_for(fk_removed, c, FK_SETTLE_TIMEOUT_MS))
		KUNIT_FAIL(c->test, "test cgroups still busy %d ms after the victims exited",
			   FK_SETTLE_TIMEOUT_MS);
}

/* Cleanup action: drop the test's reference on the victims' ucounts. */
static void fk_put_ucounts(void *arg)
{
	struct fk_case *c = arg;

	put_ucounts(c->uc);
}

/*
 * The reference for the bound of every wait: freeze the top with every victim
 * in it, wait until all is frozen, thaw it and wait until all runs again, as
 * the case does after each freeze and thaw, and time it.
 */
static void fk_measure_pace(struct fk_case *c)
{
	struct kunit *test = c->test;
	unsigned int victim = 0;
	const char *bad;
	u64 t0;

	c->state_ms = FK_SETTLE_TIMEOUT_MS;
	t0 = ktime_get_ns();
	KUNIT_ASSERT_EQ(test, 0, cgk_file_write(c->file[0][FK_FREEZE_FILE], "1\n"));
	c->freeze[0] = true;
	bad = fk_check_states(c, &victim);
	KUNIT_ASSERT_NULL_MSG(test, bad, "freezing the top at the start: %s not frozen", bad);
	KUNIT_ASSERT_EQ(test, 0, cgk_file_write(c->file[0][FK_FREEZE_FILE], "0\n"));
	c->freeze[0] = false;
	bad = fk_check_states(c, &victim);
	KUNIT_ASSERT_NULL_MSG(test, bad, "thawing the top at the start: %s not running", bad);
	c->pace_ms = div_u64(ktime_get_ns() - t0, NSEC_PER_MSEC);
	c->state_ms = clamp_t(unsigned int, FK_STATE_PACE * c->pace_ms,
			      FK_STATE_TIMEOUT_MS, FK_STATE_TIMEOUT_MAX_MS);
}

static struct fk_case *fk_setup(struct kunit *test, unsigned long flags,
				unsigned int nr_victims)
{
	char name[48], path[128];
	struct cgroup *root = NULL;
	struct vfsmount *mnt;
	struct fk_case *c;
	unsigned int i;
	int f;

	c = kunit_kzalloc(test, sizeof(*c), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, c);
	c->test = test;
	c->flags = flags;
	init_rwsem(&c->state);
	c->victims = kunit_kcalloc(test, nr_victims, sizeof(*c->victims), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, c->victims);
	c->herd = cgk_herd_alloc(test, nr_victims, CGK_VICTIM_USER | CGK_VICTIM_FORK |
				 ((flags & FK_SIGNAL) ? CGK_VICTIM_SIGNALS : 0));
	KUNIT_ASSERT_NOT_NULL(test, c->herd);
	if (flags & FK_SIGNAL) {
		c->herd->uid = KUIDT_INIT(FK_UID + test->param_index);
		c->uc = alloc_ucounts(&init_user_ns, c->herd->uid);
		KUNIT_ASSERT_NOT_NULL(test, c->uc);
		KUNIT_ASSERT_EQ(test, 0, kunit_add_action_or_reset(test, fk_put_ucounts, c));
	}

	cgk_baseline_take(&c->base);
	KUNIT_ASSERT_EQ(test, 0, kunit_add_action_or_reset(test, fk_teardown, c));

	/* The top gets a unique name: a failed case may leave one. */
	snprintf(name, sizeof(name), "cgk-fk-%s-%d", test->name, test->param_index);
	for (i = 0; i < FK_NR_CGROUPS; i++) {
		c->cg[i] = cgroup_create_for_test(i ? c->cg[fk_parent[i]] : &cgrp_dfl_root.cgrp,
						  i ? fk_name[i] : name);
		KUNIT_ASSERT_NOT_ERR_OR_NULL_MSG(test, c->cg[i], "creating %s", fk_name[i]);
	}

	mnt = cgroup_mount_for_test(NULL, NULL, &root);
	KUNIT_ASSERT_NOT_ERR_OR_NULL_MSG(test, mnt, "mounting the default hierarchy");
	c->mnt = mnt;
	KUNIT_ASSERT_PTR_EQ(test, root, &cgrp_dfl_root.cgrp);
	for (i = 0; i < FK_NR_CGROUPS; i++) {
		for (f = 0; f < FK_NR_FILES; f++) {
			if (!i)
				snprintf(path, sizeof(path), "%s/%s", name, fk_file_name[f]);
			else if (fk_parent[i])
				snprintf(path, sizeof(path), "%s/%s/%s/%s", name,
					 fk_name[fk_parent[i]], fk_name[i], fk_file_name[f]);
			else
				snprintf(path, sizeof(path), "%s/%s/%s", name, fk_name[i],
					 fk_file_name[f]);
			c->file[i][f] = cgk_file_open_for_test(test, c->mnt, path);
		}
	}

	c->nr_victims = nr_victims;
	for (i = 0; i < nr_victims; i++) {
		struct fk_victim *v = &c->victims[i];
		struct task_struct *task;

		v->cv = &c->herd->victims[i];
		mutex_init(&v->lock);
		task = cgk_herd_start(c->herd, i, "cgk-fk");
		KUNIT_ASSERT_NOT_ERR_OR_NULL(test, task);
		KUNIT_ASSERT_EQ(test, 0, cgk_file_write_pid(c->file[0][FK_PROCS], task, true));
	}
	fk_measure_pace(c);
	return c;
}

/* ---- checks ------------------------------------------------------------- */

/* Where the bookkeeping has victim @i (cgk_herd_expect_members()). */
static int fk_where(void *arg, unsigned int i)
{
	struct fk_case *c = arg;

	return c->victims[i].cg;
}

/*
 * Without the race: freezing the top freezes everything under it, and no
 * victim turns its loop while frozen; thawing lets every victim run.
 */
static void fk_check_freeze_all(struct fk_case *c)
{
	struct kunit *test = c->test;
	unsigned long loops[64];
	unsigned int i, n = min_t(unsigned int, c->nr_victims, ARRAY_SIZE(loops));
	unsigned int victim = 0;
	const char *bad;

	for (i = 1; i < FK_NR_CGROUPS; i++) {
		if (c->freeze[i]) {
			KUNIT_EXPECT_EQ(test, 0, cgk_file_write(c->file[i][FK_FREEZE_FILE], "0\n"));
			c->freeze[i] = false;
		}
	}
	if (!c->freeze[0]) {
		KUNIT_EXPECT_EQ(test, 0, cgk_file_write(c->file[0][FK_FREEZE_FILE], "1\n"));
		c->freeze[0] = true;
	}
	bad = fk_check_states(c, &victim);
	KUNIT_EXPECT_NULL_MSG(test, bad, "freezing the top: %s %s is not frozen", bad,
			      bad && !strcmp(bad, "cgroup") ? fk_cgroup_mismatch(c) :
			      fk_name[c->victims[victim].cg]);
	for (i = 0; i < n; i++)
		loops[i] = READ_ONCE(c->victims[i].cv->loops);
	msleep(FK_STILL_MS);
	for (i = 0; i < n; i++)
		KUNIT_EXPECT_EQ_MSG(test, READ_ONCE(c->victims[i].cv->loops), loops[i],
				    "frozen victim %u ran", i);

	KUNIT_EXPECT_EQ(test, 0, cgk_file_write(c->file[0][FK_FREEZE_FILE], "0\n"));
	c->freeze[0] = false;
	bad = fk_check_states(c, &victim);
	KUNIT_EXPECT_NULL_MSG(test, bad, "thawing the top: %s %s did not thaw", bad,
			      bad && !strcmp(bad, "cgroup") ? fk_cgroup_mismatch(c) :
			      fk_name[c->victims[victim].cg]);
}

static bool fk_uncharged(void *arg)
{
	struct fk_case *c = arg;

	return !get_rlimit_value(c->uc, UCOUNT_RLIMIT_SIGPENDING) &&
	       !get_rlimit_value(c->uc, UCOUNT_RLIMIT_NPROC);
}

static bool fk_ucounts_freed(void *arg)
{
	struct fk_case *c = arg;

	return !ucounts_nr_hashed_for_uid(c->herd->uid);
}

/* Every queued signal uncharged, every task counted out, ucounts freed. */
static void fk_check_ucounts(struct fk_case *c)
{
	struct kunit *test = c->test;

	/*
	 * A signal is charged when it is queued, but a victim may dequeue it,
	 * or drop it for a kill that came first, before the sender reads the
	 * charge: in a run starved of CPU time no charge may ever be seen.
	 */
	CGK_EXPECT_EXERCISED(test, atomic_long_read(&c->signals), "no signal was ever sent");
	if (atomic_long_read(&c->signals) && !atomic_long_read(&c->max_pending))
		kunit_info(test, "no signal was seen queued: each was dequeued or dropped first\n");
	if (!cgk_wait_for(fk_uncharged, c, FK_SETTLE_TIMEOUT_MS))
		KUNIT_FAIL(test,
			   "%ld pending signals and %ld tasks still charged to the victims' user %d ms after",
			   get_rlimit_value(c->uc, UCOUNT_RLIMIT_SIGPENDING),
			   get_rlimit_value(c->uc, UCOUNT_RLIMIT_NPROC), FK_SETTLE_TIMEOUT_MS);
	kunit_release_action(test, fk_put_ucounts, c);
	if (!cgk_wait_for(fk_ucounts_freed, c, FK_SETTLE_TIMEOUT_MS))
		KUNIT_FAIL(test, "%u ucounts of the victims' user left %d ms after they exited",
			   ucounts_nr_hashed_for_uid(c->herd->uid), FK_SETTLE_TIMEOUT_MS);
}

/* ---- cgroup.kill against the forks it meets ----------------------------- */

/*
 * kill_forks_in_flight: each worker sits in a leaf of its own (a kthread,
 * which cgroup.kill skips) beside a few pads, user tasks that ignore SIGKILL
 * (inherited from kthreadd, so the kill walks them but cannot kill them),
 * and, round after round, starts a parent there that keeps forking
 * children, then writes 1 to the leaf's cgroup.kill in the middle of it.
 * The pads make the kill's walk of the leaf take a while before it reaches
 * the parent, which was started after them: a fork can begin after the
 * kill began and pass its last fatal signal check in copy_process() before
 * the walk reaches the parent.
 *
 * Invariant: a child that sees the write to cgroup.kill returned has a
 * fatal signal pending. The kill sends SIGKILL to every task it walks
 * before the write returns, and cgroup_post_fork() sends it to a child
 * linked once a kill had begun before the child runs: a child still
 * running after the write returned, with no SIGKILL, was never sent one.
 * No timing is involved. The child sees the write returned because it
 * waits for it (at most FKF_CHILD_WAIT_MS) when it found the kill begun.
 */
/* Tasks the kill walks before a parent: 8, 16, 24 or 32, by worker. */
#define FKF_PADS_STEP		8
#define FKF_PADS_KINDS		4
#define FKF_MAX_CHILDREN	4	/* live children per parent */
/* The kill begins up to this long after the parent began a fork. */
#define FKF_MAX_DELAY_US	40
/* How long a child that met a kill waits for its write to return. */
#define FKF_CHILD_WAIT_MS	1000
/* Rounds per worker: each round's record lives until the case ends. */
#define FKF_MAX_ROUNDS		4000
/* Tasks of the case outlive the gang by at most this. */
#define FKF_TASK_SLACK_MS	5000

struct fkf_case {
	struct kunit *test;
	struct vfsmount *mnt;
	/* top, then one leaf per worker */
	struct cgroup *cg[CGK_MAX_THREADS + 1];
	struct file *kill_file[CGK_MAX_THREADS];
	unsigned int nr;
	bool *ready;			/* a worker moved into its leaf; per worker */
	bool stop;			/* pads and parents leave their loops */
	unsigned long deadline;		/* jiffies: no task of the case runs past it */
	atomic_long_t rounds, forks, overlaps, escaped, late;
	pid_t escaped_pid;
	struct cgk_baseline base;
};

/* One round: a parent, its children, and the kill they meet. */
struct fkf_round {
	struct fkf_case *c;
	struct completion started;
	struct task_struct *parent;	/* referenced by the worker */
	atomic_t children;		/* live children, for the parent */
	unsigned long forking;		/* forks begun; written by the parent */
	unsigned long forks;		/* written by the parent */
	bool kill_started;		/* set before cgroup.kill is written */
	bool kill_done;			/* released once the write returned */
};

/* What a user task does on its way back to user mode: die on SIGKILL. */
static void fkf_signals(void)
{
	struct ksignal ksig;
	int i;

	for (i = 0; i < 4 && signal_pending(current); i++)
		get_signal(&ksig);
}

static bool fkf_running(struct fkf_case *c)
{
	return !READ_ONCE(c->stop) && time_before(jiffies, c->deadline);
}

/* A pad: sleeps in its leaf until the case ends; SIGKILL is ignored. */
static int fkf_pad_fn(void *arg)
{
	struct fkf_case *c = arg;

	while (fkf_running(c))
		schedule_timeout_interruptible(HZ / 10);
	do_exit(0);
}

static int fkf_child_fn(void *arg)
{
	struct fkf_round *r = arg;
	struct fkf_case *c = r->c;
	unsigned long end;

	/* Killed when it was linked, or by the walk: it exits here. */
	fkf_signals();
	/* A hint only: whether to wait for kill_done below. */
	if (!READ_ONCE(r->kill_started))
		goto out;
	/* Met the kill: it must have been sent SIGKILL once the write returns. */
	end = jiffies + msecs_to_jiffies(FKF_CHILD_WAIT_MS);
	/* Pairs with the release in fkf_step(), as below. */
	while (!smp_load_acquire(&r->kill_done) && time_before(jiffies, end)) {
		fkf_signals();
		usleep_range_state(10, 20, TASK_INTERRUPTIBLE);
	}
	/* Pairs with the release of kill_done: every SIGKILL it sent is seen. */
	if (!smp_load_acquire(&r->kill_done)) {
		atomic_long_inc(&c->late);
		goto out;
	}
	fkf_signals();
	/* Still here: the kill never sent it SIGKILL. */
	atomic_long_inc(&c->escaped);
	WRITE_ONCE(c->escaped_pid, task_pid_nr(current));
out:
	atomic_dec(&r->children);
	do_exit(0);
}

static int fkf_parent_fn(void *arg)
{
	struct fkf_round *r = arg;
	struct fkf_case *c = r->c;
	bool during;
	pid_t pid;

	/* kthreadd's children ignore SIGKILL: the parent must not */
	kernel_sigaction(SIGKILL, SIG_DFL);
	r->parent = get_task_struct(current);
	complete(&r->started);
	while (fkf_running(c)) {
		/* Killed: it exits here. */
		fkf_signals();
		if (atomic_read(&r->children) >= FKF_MAX_CHILDREN) {
			cond_resched();
			continue;
		}
		during = READ_ONCE(r->kill_started);
		atomic_inc(&r->children);
		/* The worker begins the kill as it sees this: fkf_step(). */
		WRITE_ONCE(r->forking, r->forking + 1);
		pid = cgroup_fork_for_test(fkf_child_fn, r, NULL, CGROUP_FORK_TEST_USER);
		if (pid < 0) {
			atomic_dec(&r->children);
			continue;
		}
		WRITE_ONCE(r->forks, r->forks + 1);
		atomic_long_inc(&c->forks);
		/* This fork was under way when the kill began. */
		if (!during && READ_ONCE(r->kill_started))
			atomic_long_inc(&c->overlaps);
	}
	do_exit(0);
}

/* Move the worker into its leaf and start its pads there. */
static void fkf_settle_in(struct cgk_worker *w)
{
	struct fkf_case *c = w->gang->data;
	struct cgroup *leaf = c->cg[1 + w->index];
	unsigned int i;
	pid_t pid;
	int ret;

	ret = cgroup_procs_write_for_test(leaf, current);
	if (ret) {
		cgk_fail(w, "moving worker %u into its leaf: %d", w->index, ret);
		return;
	}
	/* Forked in the leaf, with kthreadd's signal handlers. */
	for (i = 0; i < FKF_PADS_STEP * (1 + w->index % FKF_PADS_KINDS); i++) {
		pid = cgroup_fork_for_test(fkf_pad_fn, c, NULL, CGROUP_FORK_TEST_USER);
		if (pid < 0) {
			cgk_fail(w, "starting a pad: %d", pid);
			return;
		}
	}
	c->ready[w->index] = true;
}

/*
 * Killed parents die at once: poll without sleeping (a short sleep can take
 * a tick on UML), for many rounds a second.
 */
static bool fkf_parent_died(struct fkf_round *r)
{
	unsigned long end = jiffies + msecs_to_jiffies(FK_SETTLE_TIMEOUT_MS);

	while (!READ_ONCE(r->parent->exit_state)) {
		if (time_after(jiffies, end))
			return false;
		cond_resched();
		cpu_relax();
	}
	return true;
}

static void fkf_step(struct cgk_worker *w)
{
	struct fkf_case *c = w->gang->data;
	unsigned long end, seen;
	struct fkf_round *r;
	pid_t pid;
	int ret;

	if (!c->ready[w->index]) {
		/*
		 * Settling in forks up to 32 pads per worker, which on a busy
		 * host can take the whole of a short run at 16 threads: go on
		 * with a round in the same step, so that every worker that
		 * ran at all makes one, however slow the host.
		 */
		fkf_settle_in(w);
		if (!c->ready[w->index])
			return;
	}
	r = kunit_kzalloc(c->test, sizeof(*r), GFP_KERNEL);
	if (!r) {
		cgk_fail(w, "no memory for a round");
		return;
	}
	r->c = c;
	init_completion(&r->started);
	pid = cgroup_fork_for_test(fkf_parent_fn, r, NULL, CGROUP_FORK_TEST_USER);
	if (pid < 0) {
		cgk_fail(w, "starting a parent: %d", pid);
		return;
	}
	wait_for_completion(&r->started);
	/*
	 * Begin the kill as the parent begins a fork, or a little later: the
	 * fork must sample kill_seq after the kill incremented it and pass
	 * its fatal signal check before the walk, slowed by the pads, reaches
	 * the parent. Where that falls depends on the machine: spread it.
	 */
	seen = READ_ONCE(r->forking);
	end = jiffies + msecs_to_jiffies(100);
	while (READ_ONCE(r->forking) == seen && time_before(jiffies, end)) {
		cond_resched();
		cpu_relax();
	}
	udelay(cgk_rand(w, FKF_MAX_DELAY_US + 1));
	WRITE_ONCE(r->kill_started, true);
	ret = cgk_file_write(c->kill_file[w->index], "1\n");
	/* Orders every SIGKILL the write sent before it: fkf_child_fn(). */
	smp_store_release(&r->kill_done, true);
	if (ret)
		cgk_fail(w, "writing cgroup.kill of leaf %u: %d", w->index, ret);
	else if (!fkf_parent_died(r))
		cgk_fail(w, "a killed parent still lives %d ms later", FK_SETTLE_TIMEOUT_MS);
	else
		atomic_long_inc(&c->rounds);
	put_task_struct(r->parent);
	if (atomic_long_read(&c->escaped))
		cgk_fail(w, "child %d, forked as its cgroup was killed, was never sent SIGKILL",
			 READ_ONCE(c->escaped_pid));
}

static const struct cgk_gang_ops fkf_gang_ops = {
	.step = fkf_step,
};

/* Every task of the case has left the leaves. */
static bool fkf_leaves_empty(void *arg)
{
	struct fkf_case *c = arg;
	unsigned int i;

	for (i = 1; i <= c->nr; i++) {
		if (c->cg[i] && fk_populated(c->cg[i]))
			return false;
	}
	return true;
}

static bool fkf_removed(void *arg)
{
	struct fkf_case *c = arg;

	return cgk_cgroups_remove(c->cg, c->nr + 1);
}

/* Cleanup action: end the pads, wait for every task, remove the cgroups. */
static void fkf_teardown(void *arg)
{
	struct fkf_case *c = arg;
	unsigned int i;

	WRITE_ONCE(c->stop, true);
	/* Parents, children and pads end their loops within their bounds. */
	if (!cgk_wait_for(fkf_leaves_empty, c, FK_SETTLE_TIMEOUT_MS + FKF_CHILD_WAIT_MS))
		KUNIT_FAIL(c->test, "tasks still in the leaves %d ms after the case ended",
			   FK_SETTLE_TIMEOUT_MS + FKF_CHILD_WAIT_MS);
	for (i = 0; i < c->nr; i++) {
		if (c->kill_file[i])
			fput(c->kill_file[i]);
		c->kill_file[i] = NULL;
	}
	flush_delayed_fput();
	if (c->mnt)
		kern_unmount(c->mnt);
	c->mnt = NULL;
	if (!cgk_wait_for(fkf_removed, c, FK_SETTLE_TIMEOUT_MS))
		KUNIT_FAIL(c->test, "test cgroups still busy %d ms after their tasks exited",
			   FK_SETTLE_TIMEOUT_MS);
}

/* Cgroups are killed while parents in them fork. */
static void kill_forks_in_flight(struct kunit *test)
{
	unsigned int nr = cgk_param_threads(test);
	struct cgroup *root = NULL;
	char name[48], path[128];
	struct cgk_gang *gang;
	struct fkf_case *c;
	unsigned int i;

	c = kunit_kzalloc(test, sizeof(*c), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, c);
	c->ready = kunit_kcalloc(test, nr, sizeof(*c->ready), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, c->ready);
	c->test = test;
	c->nr = nr;
	c->deadline = jiffies + msecs_to_jiffies(cgk_duration_ms() + FKF_TASK_SLACK_MS);
	cgk_baseline_take(&c->base);
	KUNIT_ASSERT_EQ(test, 0, kunit_add_action_or_reset(test, fkf_teardown, c));

	snprintf(name, sizeof(name), "cgk-fkf-%d", test->param_index);
	c->cg[0] = cgroup_create_for_test(&cgrp_dfl_root.cgrp, name);
	KUNIT_ASSERT_NOT_ERR_OR_NULL_MSG(test, c->cg[0], "creating %s", name);
	for (i = 0; i < nr; i++) {
		char leaf[16];

		snprintf(leaf, sizeof(leaf), "w%u", i);
		c->cg[1 + i] = cgroup_create_for_test(c->cg[0], leaf);
		KUNIT_ASSERT_NOT_ERR_OR_NULL_MSG(test, c->cg[1 + i], "creating %s", leaf);
	}
	c->mnt = cgroup_mount_for_test(NULL, NULL, &root);
	KUNIT_ASSERT_NOT_ERR_OR_NULL_MSG(test, c->mnt, "mounting the default hierarchy");
	KUNIT_ASSERT_PTR_EQ(test, root, &cgrp_dfl_root.cgrp);
	for (i = 0; i < nr; i++) {
		snprintf(path, sizeof(path), "%s/w%u/cgroup.kill", name, i);
		c->kill_file[i] = cgk_file_open_for_test(test, c->mnt, path);
	}

	gang = cgk_gang_create(test, nr, &fkf_gang_ops, c);
	KUNIT_ASSERT_NOT_NULL(test, gang);
	gang->max_iterations = FKF_MAX_ROUNDS;
	cgk_gang_run(gang);
	cgk_gang_report(gang);

	kunit_release_action(test, fkf_teardown, c);
	kunit_info(test, "%ld rounds, %ld forks, %ld of them under way as a kill began, %ld children that met a kill not reached by it, %ld gave up waiting for it\n",
		   atomic_long_read(&c->rounds), atomic_long_read(&c->forks),
		   atomic_long_read(&c->overlaps), atomic_long_read(&c->escaped),
		   atomic_long_read(&c->late));
	KUNIT_EXPECT_EQ_MSG(test, atomic_long_read(&c->escaped), 0,
			    "children forked as their cgroup was killed outlived the kill: never sent SIGKILL");
	CGK_EXPECT_EXERCISED(test, atomic_long_read(&c->rounds), "no round finished");
	/*
	 * Whether a kill meets a fork is up to the scheduler, and a busy host
	 * makes it rarer (none in some runs of 50 rounds): say so, do not fail.
	 */
	if (atomic_long_read(&c->rounds) && !atomic_long_read(&c->overlaps))
		kunit_info(test, "no fork was under way as a kill began: the race was not reached\n");
	cgk_expect_baseline(test, &c->base, FK_SETTLE_TIMEOUT_MS);
}

/* ---- the cases ---------------------------------------------------------- */

static void fk_run(struct kunit *test, unsigned long flags)
{
	unsigned int nr = cgk_param_threads(test);
	struct cgk_gang *gang;
	struct fk_case *c;

	c = fk_setup(test, flags, max(nr, 2U));
	gang = cgk_gang_create(test, max(nr, 3U), &fk_gang_ops, c);
	KUNIT_ASSERT_NOT_NULL(test, gang);
	cgk_gang_run(gang);
	cgk_gang_report(gang);

	kunit_info(test, "freezing and thawing every victim took %u ms: each wait for a state may take %u ms\n",
		   c->pace_ms, c->state_ms);
	kunit_info(test, "%ld moves, %ld freezes, %ld thaws, %ld kills (%ld victims), %ld signals (at most %ld queued), %lu forks\n",
		   atomic_long_read(&c->moves), atomic_long_read(&c->freezes),
		   atomic_long_read(&c->thaws), atomic_long_read(&c->kills),
		   atomic_long_read(&c->killed), atomic_long_read(&c->signals),
		   atomic_long_read(&c->max_pending), cgk_herd_forks(c->herd));
	CGK_EXPECT_EXERCISED(test, atomic_long_read(&c->moves), "no move succeeded");
	CGK_EXPECT_EXERCISED(test, cgk_herd_forks(c->herd), "the victims never forked");
	if (flags & FK_FREEZE)
		CGK_EXPECT_EXERCISED(test, atomic_long_read(&c->freezes), "nothing was frozen");
	if (flags & FK_KILL)
		CGK_EXPECT_EXERCISED(test, atomic_long_read(&c->killed), "nothing was killed");

	cgk_herd_expect_members(test, c->herd, fk_where, c, c->cg, fk_name, FK_NR_CGROUPS);
	fk_check_freeze_all(c);

	kunit_release_action(test, fk_teardown, c);
	cgk_expect_baseline(test, &c->base, FK_SETTLE_TIMEOUT_MS);
	if (flags & FK_SIGNAL)
		fk_check_ucounts(c);
}

/* Cgroups freeze and thaw while their victims move and fork. */
static void cgroup_freeze_migrate(struct kunit *test)
{
	fk_run(test, FK_FREEZE);
}

/* Cgroups are killed while their victims move and fork. */
static void cgroup_kill_migrate(struct kunit *test)
{
	fk_run(test, FK_KILL);
}

/* Signals are queued for victims that are killed, exit or dequeue them. */
static void signal_queue_kill(struct kunit *test)
{
	fk_run(test, FK_SIGNAL | FK_KILL);
}

/* All at once. */
static void freeze_kill_everything(struct kunit *test)
{
	fk_run(test, FK_FREEZE | FK_KILL | FK_SIGNAL);
}

static struct kunit_case cgroup_freeze_kill_cases[] = {
	CGK_CASE(cgroup_freeze_migrate),
	CGK_CASE(cgroup_kill_migrate),
	CGK_CASE(signal_queue_kill),
	CGK_CASE(freeze_kill_everything),
	CGK_CASE(kill_forks_in_flight),
	{}
};

static struct kunit_suite cgroup_freeze_kill_suite = {
	.name = "cgroup_freeze_kill",
	.suite_init = cgk_suite_init,
	.suite_exit = cgk_suite_exit,
	.init = cgk_case_init,
	.exit = cgk_case_exit,
	.test_cases = cgroup_freeze_kill_cases,
};

kunit_test_suite(cgroup_freeze_kill_suite);
