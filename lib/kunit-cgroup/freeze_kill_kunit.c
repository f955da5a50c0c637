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
 *  - in freeze_kill_everything, all of it.
 * Freezing and killing exclude the moves (a case rwsem), so that what each
 * must do is known exactly; the kernel still races them against the
 * victims and their children forking and exiting.
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
 *    meanwhile escapes;
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
#include <linux/mount.h>
#include <linux/mutex.h>
#include <linux/rwsem.h>
#include <linux/sched/debug.h>
#include <linux/sched/signal.h>
#include <linux/sched/task.h>

#include "harness.h"

#define FK_NR_CGROUPS		4	/* top; a and b in it; c in a */
/* How long a victim or cgroup may take to reach the state it must. */
#define FK_STATE_TIMEOUT_MS	5000
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

	return cgk_wait_for(fk_victim_reached, &w, FK_STATE_TIMEOUT_MS);
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

	if (!cgk_wait_for(fk_cgroups_reached, c, FK_STATE_TIMEOUT_MS))
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
 * A task that did not reach the state it must within FK_STATE_TIMEOUT_MS:
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
	/* The top (everything) one time in eight. */
	struct fk_kill k = { .c = c, .top = cgk_rand(w, 8) ? 1 + cgk_rand(w, 3) : 0 };
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
	if (!cgk_wait_for(fk_kill_done, &k, FK_STATE_TIMEOUT_MS)) {
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

	mnt = cgroup_mount_for_test(NULL, &root);
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
