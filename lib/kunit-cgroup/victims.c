// SPDX-License-Identifier: GPL-2.0-only
/*
 * Victims for the cgroup_kunit suites: kthreads that workers move between
 * cgroups while they fork children and add threads that exit soon after.
 * See harness.h.
 */

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/cgroup.h>
#include <linux/cgroup_kunit.h>
#include <linux/cpu.h>
#include <linux/cred.h>
#include <linux/delay.h>
#include <linux/kthread.h>
#include <linux/sched.h>
#include <linux/sched/signal.h>
#include <linux/sched/task.h>

#include "harness.h"

/* A forked child: lives a little, then exits. */
static int cgk_child_fn(void *arg)
{
	struct cgk_victim *v = arg;

	/*
	 * Long enough for the parent to be moved away now and then, so that
	 * this exit drops the last reference to the css_set they shared.
	 */
	usleep_range(20, 200);
	atomic_dec(&v->children);
	/* Returning would take a kernel_thread() child to user mode. */
	kthread_complete_and_exit(NULL, 0);
}

/* An extra thread of a victim's group: lives a little, then exits. */
static int cgk_thread_fn(void *arg)
{
	struct cgk_victim *v = arg;

	usleep_range(100, 500);
	atomic_dec(&v->threads);
	kthread_complete_and_exit(NULL, 0);
}

/*
 * Add a thread to the victim's group: copy_process() with CLONE_THREAD takes
 * the threadgroup change lock (the group's own rwsem with favordynmods) that
 * migrations of the group take for writing.
 */
static void cgk_victim_add_thread(struct cgk_victim *v)
{
	pid_t pid;

	atomic_inc(&v->threads);
	pid = cgroup_fork_for_test(cgk_thread_fn, v, "cgk-thread",
				   CGROUP_FORK_TEST_THREAD);
	if (pid < 0)
		atomic_dec(&v->threads);
	else
		WRITE_ONCE(v->thread_forks, v->thread_forks + 1);
}

/*
 * Fork a child. It is born in the victim's cgroup, but kthreadd is its
 * parent: kthreadd ignores SIGCHLD, so the child is reaped as soon as it
 * exits, even after the victim. (Orphans would go to PID 1, which does not
 * reap during boot, and pin their cgroup.)
 */
static void cgk_victim_fork(struct cgk_victim *v)
{
	/*
	 * Every other fork under cpus_read_lock(), as the kthreads a CPU
	 * coming up creates are forked while the hotplug lock is held: the
	 * fork's threadgroup lock nests inside cpu_hotplug_lock there, which
	 * lockdep cannot see (kthreadd forks, the hotplug thread waits for it
	 * on a completion). Here the order is taken in one context, so a path
	 * that takes cpu_hotplug_lock inside the threadgroup lock is reported.
	 */
	bool hotplug_locked = v->forks & 1;
	pid_t pid;

	atomic_inc(&v->children);
	if (hotplug_locked)
		cpus_read_lock();
	pid = cgroup_fork_for_test(cgk_child_fn, v, "cgk-child",
				   CGROUP_FORK_TEST_CHILD);
	if (hotplug_locked)
		cpus_read_unlock();
	if (pid < 0) {
		atomic_dec(&v->children);
		if (pid == -EAGAIN)
			WRITE_ONCE(v->fork_eagain, v->fork_eagain + 1);
		else
			WRITE_ONCE(v->fork_errors, v->fork_errors + 1);
		return;
	}
	WRITE_ONCE(v->forks, v->forks + 1);
	WRITE_ONCE(v->child_pid, pid);
}

static int cgk_victim_fn(void *arg)
{
	struct cgk_victim *v = arg;
	struct cgk_herd *herd = v->herd;

	/* From here on kthread() has made this thread migratable. */
	complete(&v->started);
	while (!kthread_should_stop()) {
		bool forking = !READ_ONCE(herd->stop_forking);
		bool busy = false;

		if (forking && (herd->flags & CGK_VICTIM_THREADS) &&
		    atomic_read(&v->threads) < CGK_VICTIM_MAX_THREADS)
			cgk_victim_add_thread(v);
		if (forking && (herd->flags & CGK_VICTIM_FORK) &&
		    atomic_read(&v->children) < CGK_VICTIM_MAX_CHILDREN) {
			cgk_victim_fork(v);
			busy = true;
		}
		/* Orders what this turn counted before it: cgk_herd_settled(). */
		smp_store_release(&v->loops, v->loops + 1);
		if (busy)
			cond_resched();
		else
			usleep_range(50, 100);
	}
	return 0;
}

/* ---- CGK_VICTIM_USER: victims that can be frozen and killed ----------- */

/*
 * What a user task does on its way back to user mode: get_signal() puts it
 * in the freezer's trap until its cgroup thaws, and does not return on
 * SIGKILL. Every other signal is ignored (inherited from kthreadd), so a
 * few turns consume whatever is pending.
 */
static void cgk_user_signals(void)
{
	struct ksignal ksig;
	int i;

	for (i = 0; i < 4 && signal_pending(current); i++)
		get_signal(&ksig);
}

/*
 * Block or unblock CGK_VICTIM_SIGNAL and CGK_VICTIM_FORCED_SIGNAL: blocked,
 * they are queued even though they are ignored; unblocked, get_signal()
 * dequeues and drops what is pending.
 */
static void cgk_user_block(bool block)
{
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, CGK_VICTIM_SIGNAL);
	sigaddset(&set, CGK_VICTIM_FORCED_SIGNAL);
	sigprocmask(block ? SIG_BLOCK : SIG_UNBLOCK, &set, NULL);
}

/*
 * Become @uid, with the ucounts of @uid (what set_cred_ucounts() does for
 * setuid()), keeping every capability and root's user_struct. commit_creds()
 * moves the task's RLIMIT_NPROC charge to the new ucounts only when the
 * user_struct changes, but the exit uncharges the new ones: move it here.
 */
static int cgk_user_become(kuid_t uid)
{
	struct ucounts *old_uc;
	struct cred *new;

	new = prepare_creds();
	if (!new)
		return -ENOMEM;
	new->uid = uid;
	new->euid = uid;
	new->suid = uid;
	new->fsuid = uid;
	old_uc = new->ucounts;
	new->ucounts = alloc_ucounts(new->user_ns, uid);
	if (!new->ucounts) {
		new->ucounts = old_uc;
		abort_creds(new);
		return -EAGAIN;
	}
	inc_rlimit_ucounts(new->ucounts, UCOUNT_RLIMIT_NPROC, 1);
	/* The task's cred still holds @old_uc. */
	dec_rlimit_ucounts(old_uc, UCOUNT_RLIMIT_NPROC, 1);
	put_ucounts(old_uc);
	return commit_creds(new);
}

/* A child of a user victim: lives a little, then exits, unless killed. */
static int cgk_user_child_fn(void *arg)
{
	int i;

	for (i = 0; i < 4; i++) {
		/* Its mask is its parent's: sometimes it exits with signals queued. */
		cgk_user_signals();
		usleep_range_state(20, 100, TASK_INTERRUPTIBLE);
	}
	/* Returning would take a user_mode_thread() to user mode. */
	do_exit(0);
}

static int cgk_user_victim_fn(void *arg)
{
	struct cgk_victim *v = arg;
	struct cgk_herd *herd = v->herd;
	pid_t pid;

	/*
	 * kthreadd ignores every signal, SIGKILL included, and its children
	 * inherit that: give SIGKILL its default action back, for this task
	 * and the children it forks.
	 */
	kernel_sigaction(SIGKILL, SIG_DFL);
	if (uid_valid(herd->uid))
		v->start_error = cgk_user_become(herd->uid);
	v->task = get_task_struct(current);
	complete(&v->started);
	while (!READ_ONCE(herd->stop)) {
		cgk_user_signals();
		WRITE_ONCE(v->loops, v->loops + 1);
		if (herd->flags & CGK_VICTIM_SIGNALS)
			cgk_user_block(v->loops & 4);
		if ((herd->flags & CGK_VICTIM_FORK) && !READ_ONCE(herd->stop_forking)) {
			/* kthreadd, its parent, reaps it: see cgk_victim_fork() */
			pid = cgroup_fork_for_test(cgk_user_child_fn, NULL,
						   NULL, CGROUP_FORK_TEST_USER);
			if (pid > 0) {
				WRITE_ONCE(v->forks, v->forks + 1);
				WRITE_ONCE(v->child_pid, pid);
			}
		}
		usleep_range_state(50, 100, TASK_INTERRUPTIBLE);
	}
	do_exit(0);
}

/**
 * cgk_victim_dead - whether a started victim has exited (or was killed)
 * @v: the victim
 *
 * Return: true once the victim's task is a zombie or dead.
 */
bool cgk_victim_dead(struct cgk_victim *v)
{
	return v->task && READ_ONCE(v->task->exit_state);
}

static bool cgk_herd_dead(void *arg)
{
	struct cgk_herd *herd = arg;
	unsigned int i;

	for (i = 0; i < herd->nr; i++) {
		if (herd->victims[i].task && !cgk_victim_dead(&herd->victims[i]))
			return false;
	}
	return true;
}

/**
 * cgk_herd_alloc - allocate the victims of a case, none started yet
 * @test: the case; the memory is freed when it ends
 * @nr: number of victims, at least 1
 * @flags: what every victim does, CGK_VICTIM_*
 *
 * The caller's cleanup action must call cgk_herd_stop(), which copes with
 * victims never started: register it once this returns.
 *
 * Return: the herd, or NULL after failing @test.
 */
struct cgk_herd *cgk_herd_alloc(struct kunit *test, unsigned int nr,
				unsigned long flags)
{
	struct cgk_herd *herd;
	unsigned int i;

	if (!nr) {
		KUNIT_FAIL(test, "a herd of no victims");
		return NULL;
	}
	herd = kunit_kzalloc(test, struct_size(herd, victims, nr), GFP_KERNEL);
	if (!herd) {
		KUNIT_FAIL(test, "no memory for %u victims", nr);
		return NULL;
	}
	herd->nr = nr;
	herd->flags = flags;
	herd->uid = INVALID_UID;
	for (i = 0; i < nr; i++) {
		herd->victims[i].herd = herd;
		init_completion(&herd->victims[i].started);
	}
	return herd;
}

/**
 * cgk_herd_start - start one victim and wait until it can be migrated
 * @herd: the herd
 * @i: the victim, 0..nr-1
 * @name: the kthread's name prefix; the index is appended
 *
 * Return: the victim's task (the herd holds a reference until
 * cgk_herd_stop()), or an ERR_PTR() from kthread_create().
 */
struct task_struct *cgk_herd_start(struct cgk_herd *herd, unsigned int i,
				   const char *name)
{
	struct cgk_victim *v = &herd->victims[i];
	struct task_struct *task;
	pid_t pid;

	if (herd->flags & CGK_VICTIM_USER) {
		/*
		 * Not a kthread, so no name: it shows as the test's thread,
		 * with the fs_struct of userspace's init.
		 */
		pid = cgroup_fork_for_test(cgk_user_victim_fn, v, NULL,
					   CGROUP_FORK_TEST_USER);
		if (pid < 0)
			return ERR_PTR(pid);
		wait_for_completion(&v->started);
		/* It runs on: cgk_herd_stop() stops it. */
		return v->start_error ? ERR_PTR(v->start_error) : v->task;
	}
	task = kthread_create(cgk_victim_fn, v, "%s-%u", name, i);
	if (IS_ERR(task))
		return task;
	get_task_struct(task);
	v->task = task;
	wake_up_process(task);
	wait_for_completion(&v->started);
	return task;
}

/**
 * cgk_herd_restart - start a new victim in the place of a dead one
 * @herd: a CGK_VICTIM_USER herd
 * @i: the victim, which cgk_victim_dead() says has exited
 * @name: as for cgk_herd_start()
 *
 * Return: as cgk_herd_start().
 */
struct task_struct *cgk_herd_restart(struct cgk_herd *herd, unsigned int i,
				     const char *name)
{
	struct cgk_victim *v = &herd->victims[i];

	if (v->task) {
		put_task_struct(v->task);
		v->task = NULL;
	}
	reinit_completion(&v->started);
	return cgk_herd_start(herd, i, name);
}

/**
 * cgk_herd_stop_forking - let the victims run on, but fork nothing more
 * @herd: the herd
 *
 * Children and threads already forked still exit on their own.
 */
void cgk_herd_stop_forking(struct cgk_herd *herd)
{
	WRITE_ONCE(herd->stop_forking, true);
}

static bool cgk_herd_quiet(void *arg)
{
	struct cgk_herd *herd = arg;
	unsigned int i;

	for (i = 0; i < herd->nr; i++) {
		if (atomic_read(&herd->victims[i].children) ||
		    atomic_read(&herd->victims[i].threads))
			return false;
	}
	return true;
}

/**
 * cgk_herd_stop - stop the victims and wait for their children and threads
 * @herd: the herd, or NULL
 * @timeout_ms: how long to wait for children and threads to exit
 *
 * Safe to call more than once, and on a herd only partly started.
 *
 * Return: true if every child and thread exited within @timeout_ms.
 */
bool cgk_herd_stop(struct cgk_herd *herd, unsigned int timeout_ms)
{
	unsigned int i;

	if (!herd)
		return true;
	WRITE_ONCE(herd->stop_forking, true);
	if (herd->flags & CGK_VICTIM_USER) {
		bool dead;

		WRITE_ONCE(herd->stop, true);
		for (i = 0; i < herd->nr; i++) {
			if (herd->victims[i].task)
				wake_up_process(herd->victims[i].task);
		}
		dead = cgk_wait_for(cgk_herd_dead, herd, timeout_ms);
		for (i = 0; i < herd->nr && dead; i++) {
			if (herd->victims[i].task)
				put_task_struct(herd->victims[i].task);
			herd->victims[i].task = NULL;
		}
		return dead;
	}
	for (i = 0; i < herd->nr; i++) {
		struct cgk_victim *v = &herd->victims[i];

		if (v->task) {
			kthread_stop_put(v->task);
			v->task = NULL;
		}
	}
	return cgk_wait_for(cgk_herd_quiet, herd, timeout_ms);
}

struct cgk_herd_turns {
	struct cgk_herd *herd;
	unsigned long *loops;
};

static bool cgk_herd_turned(void *arg)
{
	struct cgk_herd_turns *t = arg;
	unsigned int i;

	for (i = 0; i < t->herd->nr; i++) {
		/* Pairs with the victim's release: its counters are seen. */
		if (smp_load_acquire(&t->herd->victims[i].loops) < t->loops[i] + 2)
			return false;
	}
	return true;
}

/**
 * cgk_herd_settled - stop forking and wait until no fork is in flight
 * @test: the case, for memory
 * @herd: a herd of kthread victims, all started
 * @timeout_ms: how long to wait
 *
 * Once every victim has turned its loop twice after forking stopped, a
 * fork it had started has finished and its counters (forks, fork_eagain,
 * fork_errors) are final.
 *
 * Return: true if every victim turned in time.
 */
bool cgk_herd_settled(struct kunit *test, struct cgk_herd *herd, unsigned int timeout_ms)
{
	struct cgk_herd_turns t = { .herd = herd };
	unsigned int i;

	t.loops = kunit_kcalloc(test, herd->nr, sizeof(*t.loops), GFP_KERNEL);
	if (!t.loops)
		return false;
	cgk_herd_stop_forking(herd);
	for (i = 0; i < herd->nr; i++)
		/* Pairs with the victim's release, as in cgk_herd_turned(). */
		t.loops[i] = smp_load_acquire(&herd->victims[i].loops);
	return cgk_wait_for(cgk_herd_turned, &t, timeout_ms);
}

/**
 * cgk_herd_forks - children forked so far by all victims
 * @herd: the herd
 *
 * Return: the count; exact once the herd is stopped.
 */
unsigned long cgk_herd_forks(struct cgk_herd *herd)
{
	unsigned long n = 0;
	unsigned int i;

	for (i = 0; i < herd->nr; i++)
		n += READ_ONCE(herd->victims[i].forks);
	return n;
}

/**
 * cgk_herd_thread_forks - threads added so far by all victims
 * @herd: the herd
 *
 * Return: the count; exact once the herd is stopped.
 */
unsigned long cgk_herd_thread_forks(struct cgk_herd *herd)
{
	unsigned long n = 0;
	unsigned int i;

	for (i = 0; i < herd->nr; i++)
		n += READ_ONCE(herd->victims[i].thread_forks);
	return n;
}

/**
 * cgk_herd_expect_members - hold a case's bookkeeping against the iterator
 * @test: the case
 * @herd: its victims
 * @where: where the case's bookkeeping has victim @i: an index into @cgrps
 * @arg: the argument of @where
 * @cgrps: the cgroups the case moves the victims between
 * @names: their names, for the messages
 * @nr: the number of @cgrps
 *
 * For each of @cgrps, the victims css_task_iter_next() finds in it must be
 * as many as the bookkeeping puts there. Call it with no move in flight.
 */
void cgk_herd_expect_members(struct kunit *test, struct cgk_herd *herd,
			     int (*where)(void *arg, unsigned int i), void *arg,
			     struct cgroup *const *cgrps, const char *const *names,
			     int nr)
{
	unsigned int i;
	int cg;

	for (cg = 0; cg < nr; cg++) {
		struct css_task_iter it;
		struct task_struct *task;
		unsigned int expected = 0, found = 0;

		css_task_iter_start(&cgrps[cg]->self, 0, &it);
		while ((task = css_task_iter_next(&it))) {
			for (i = 0; i < herd->nr; i++)
				found += herd->victims[i].task == task;
		}
		css_task_iter_end(&it);
		for (i = 0; i < herd->nr; i++)
			expected += where(arg, i) == cg;
		KUNIT_EXPECT_EQ_MSG(test, found, expected,
				    "%s: task iterator and bookkeeping disagree", names[cg]);
	}
}
