// SPDX-License-Identifier: GPL-2.0-only
/*
 * Victims for the cgroup_kunit suites: kthreads that workers move between
 * cgroups while they fork children and add threads that exit soon after.
 * See harness.h.
 */

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/delay.h>
#include <linux/kthread.h>
#include <linux/sched.h>
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
	pid = kernel_thread(cgk_thread_fn, v, "cgk-thread",
			    CLONE_THREAD | CLONE_SIGHAND | CLONE_FS | CLONE_FILES);
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
	pid_t pid;

	atomic_inc(&v->children);
	pid = kernel_thread(cgk_child_fn, v, "cgk-child",
			    CLONE_PARENT | CLONE_FS | CLONE_FILES);
	if (pid < 0) {
		atomic_dec(&v->children);
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
		if (busy)
			cond_resched();
		else
			usleep_range(50, 100);
	}
	return 0;
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
	for (i = 0; i < herd->nr; i++) {
		struct cgk_victim *v = &herd->victims[i];

		if (v->task) {
			kthread_stop_put(v->task);
			v->task = NULL;
		}
	}
	return cgk_wait_for(cgk_herd_quiet, herd, timeout_ms);
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
