// SPDX-License-Identifier: GPL-2.0-only
/*
 * CPUs under a gang's feet, as torture.c's shuffler and onoff threads do:
 * a shuffler that keeps moving the workers between online CPUs, and, where
 * the kernel has CPU hotplug, a thread that takes CPUs offline and brings
 * them back while the workers run. See harness.h.
 *
 * Both start at the gang's barrier and stop with it (time bound, failure,
 * kthread_stop()). Every CPU taken offline is brought back before the case
 * goes on, also when it ends early. Both only ever act on their own copy of
 * the workers' task references and on CPUs they took offline themselves.
 */

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/cpu.h>
#include <linux/cpumask.h>
#include <linux/delay.h>
#include <linux/kthread.h>
#include <linux/sched.h>
#include <linux/sched/task.h>
#include <linux/smp.h>

#include "harness.h"

/* Pause between two shuffles of all workers, and between hotplug operations. */
#define CGK_SHUFFLE_MAX_MS	10
#define CGK_HOTPLUG_MAX_MS	20
/* How long cgk_cpus_wait_go() sleeps between checks for kthread_stop(). */
#define CGK_GO_POLL_MS		100

/**
 * struct cgk_cpus - the CPU disturbers of one gang
 * @gang: the gang whose workers they disturb
 * @flags: CGK_CPU_SHUFFLE, CGK_CPU_HOTPLUG
 * @shuffler: the shuffling kthread, or NULL
 * @onoff: the hotplug kthread, or NULL
 * @tasks: our references on the workers' tasks (the gang drops its own)
 * @nr_tasks: entries in @tasks
 * @offline: CPUs @onoff took offline and has not brought back yet
 * @mask: the shuffler's scratch mask
 * @moves: successful affinity changes
 * @offlined: successful remove_cpu() calls
 * @onlined: successful add_cpu() calls
 * @refused: remove_cpu() or add_cpu() calls that failed, other than at the end
 * @kept: CPUs cgk_cpus_leave_offline() took offline (not in @offlined)
 */
struct cgk_cpus {
	struct cgk_gang *gang;
	unsigned int flags;
	struct task_struct *shuffler;
	struct task_struct *onoff;
	struct task_struct *tasks[CGK_MAX_THREADS];
	unsigned int nr_tasks;
	cpumask_var_t offline;
	cpumask_var_t mask;
	unsigned long moves, offlined, onlined, refused, kept;
};

/*
 * Whether CPU hotplug can race a gang here: the kernel has it, and a CPU
 * can be taken offline leaving two online.
 */
static bool cgk_cpus_hotplug_possible(void)
{
	unsigned int cpu, candidates = 0;

	if (!IS_ENABLED(CONFIG_HOTPLUG_CPU) || num_online_cpus() < 3)
		return false;
	for_each_online_cpu(cpu)
		if (cpu_is_hotpluggable(cpu))
			candidates++;
	return candidates > 0;
}

/* Wait for the gang's barrier; false if we were stopped before it opened. */
static bool cgk_cpus_wait_go(struct cgk_cpus *d)
{
	while (!wait_for_completion_timeout(&d->gang->go,
					    msecs_to_jiffies(CGK_GO_POLL_MS)))
		if (kthread_should_stop())
			return false;
	return true;
}

static void cgk_cpus_pause(struct rnd_state *rnd, unsigned int max_ms)
{
	fsleep((1 + prandom_u32_state(rnd) % max_ms) * USEC_PER_MSEC);
}

/*
 * Where a worker may run next: every online CPU but one, at random, as
 * torture.c's shuffler does. Never a single CPU: a kthread allowed on one
 * CPU only counts as a per-CPU kthread, which the scheduler leaves for its
 * owner to move before that CPU goes offline ("Dying CPU not properly
 * vacated!").
 */
static void cgk_cpus_pick_mask(struct cgk_cpus *d, struct rnd_state *rnd)
{
	unsigned int cpu = prandom_u32_state(rnd) % nr_cpu_ids;

	cpumask_copy(d->mask, cpu_online_mask);
	if (cpumask_weight(d->mask) > 2)
		cpumask_clear_cpu(cpu, d->mask);
}

static int cgk_shuffler_fn(void *arg)
{
	struct cgk_cpus *d = arg;
	struct rnd_state rnd;
	unsigned int i;

	prandom_seed_state(&rnd, d->gang->seed ^ 0x5bu);
	if (!cgk_cpus_wait_go(d))
		return 0;
	while (!cgk_gang_should_stop(d->gang)) {
		/*
		 * Not while a CPU goes offline, as torture.c's shuffler: a
		 * kthread may be given a CPU that is online but dying, and
		 * would be moved there after the scheduler pushed everything
		 * else away ("Dying CPU not properly vacated!").
		 */
		cpus_read_lock();
		for (i = 0; i < d->nr_tasks; i++) {
			cgk_cpus_pick_mask(d, &rnd);
			if (!set_cpus_allowed_ptr(d->tasks[i], d->mask))
				d->moves++;
		}
		cpus_read_unlock();
		cgk_cpus_pause(&rnd, CGK_SHUFFLE_MAX_MS);
	}
	return 0;
}

/* Take one hotpluggable CPU offline, or bring back one we took, at random. */
static void cgk_onoff_step(struct cgk_cpus *d, struct rnd_state *rnd)
{
	unsigned int cpu = prandom_u32_state(rnd) % nr_cpu_ids;
	int ret;

	if (!cpu_is_hotpluggable(cpu))
		return;
	if (cpumask_test_cpu(cpu, d->offline)) {
		ret = add_cpu(cpu);
		if (!ret) {
			cpumask_clear_cpu(cpu, d->offline);
			d->onlined++;
		}
	} else if (cpu_online(cpu) && num_online_cpus() > 2) {
		ret = remove_cpu(cpu);
		if (!ret) {
			cpumask_set_cpu(cpu, d->offline);
			d->offlined++;
		}
	} else {
		return;
	}
	if (ret)
		d->refused++;
}

static int cgk_onoff_fn(void *arg)
{
	struct cgk_cpus *d = arg;
	struct rnd_state rnd;

	prandom_seed_state(&rnd, d->gang->seed ^ 0x0ffu);
	if (!cgk_cpus_wait_go(d))
		return 0;
	while (!cgk_gang_should_stop(d->gang)) {
		cgk_onoff_step(d, &rnd);
		cgk_cpus_pause(&rnd, CGK_HOTPLUG_MAX_MS);
	}
	return 0;
}

/**
 * cgk_cpus_stop - stop the disturbers, leaving offline what they took offline
 * @d: from cgk_cpus_disturb()
 *
 * Both threads may have returned already: we hold references on their
 * tasks. cgk_cpus_finish() brings the CPUs back.
 */
void cgk_cpus_stop(struct cgk_cpus *d)
{
	if (d->shuffler)
		kthread_stop_put(d->shuffler);
	if (d->onoff)
		kthread_stop_put(d->onoff);
	d->shuffler = NULL;
	d->onoff = NULL;
}

/* Bring back every CPU we took offline: those that stay offline are reported. */
static void cgk_cpus_online_all(struct cgk_cpus *d)
{
	unsigned int cpu;

	for_each_cpu(cpu, d->offline) {
		if (add_cpu(cpu)) {
			pr_err("CPU %u stays offline: add_cpu() failed\n", cpu);
			continue;
		}
		cpumask_clear_cpu(cpu, d->offline);
		d->onlined++;
	}
}

/* Stop both threads and bring back every CPU we took offline. */
static void cgk_cpus_release(void *arg)
{
	struct cgk_cpus *d = arg;
	unsigned int i;

	cgk_cpus_stop(d);
	cgk_cpus_online_all(d);
	for (i = 0; i < d->nr_tasks; i++)
		put_task_struct(d->tasks[i]);
	d->nr_tasks = 0;
}

static void cgk_cpus_free(void *arg)
{
	struct cgk_cpus *d = arg;

	free_cpumask_var(d->offline);
	free_cpumask_var(d->mask);
}

static struct task_struct *cgk_cpus_thread(struct cgk_cpus *d,
					   int (*fn)(void *arg),
					   const char *name)
{
	struct task_struct *task = kthread_create(fn, d, "%s", name);

	if (IS_ERR(task)) {
		KUNIT_FAIL(d->gang->test, "kthread_create of %s: %pe", name, task);
		return NULL;
	}
	get_task_struct(task);
	wake_up_process(task);
	return task;
}

/**
 * cgk_cpus_disturb - move a gang's workers between CPUs while it runs
 * @gang: a gang from cgk_gang_create(), not yet run
 * @flags: CGK_CPU_SHUFFLE and/or CGK_CPU_HOTPLUG
 *
 * Call between cgk_gang_create() and cgk_gang_run(); the disturbers start
 * at the gang's barrier. CGK_CPU_HOTPLUG is dropped where the kernel has no
 * CPU hotplug or too few CPUs are online. Finish with cgk_cpus_finish() after
 * cgk_gang_run(); if the case ends earlier, KUnit stops them and brings the
 * CPUs back.
 *
 * Return: the disturbers, or NULL after failing the case.
 */
struct cgk_cpus *cgk_cpus_disturb(struct cgk_gang *gang, unsigned int flags)
{
	struct kunit *test = gang->test;
	struct cgk_cpus *d;
	unsigned int i;

	d = kunit_kzalloc(test, sizeof(*d), GFP_KERNEL);
	if (!d) {
		KUNIT_FAIL(test, "no memory for the CPU disturbers");
		return NULL;
	}
	/* Frees what was allocated of both masks (zeroed pointers are fine). */
	if (kunit_add_action_or_reset(test, cgk_cpus_free, d))
		return NULL;
	if (!zalloc_cpumask_var(&d->offline, GFP_KERNEL) ||
	    !zalloc_cpumask_var(&d->mask, GFP_KERNEL)) {
		KUNIT_FAIL(test, "no memory for the CPU disturbers' masks");
		return NULL;
	}
	d->gang = gang;
	if (!cgk_cpus_hotplug_possible())
		flags &= ~CGK_CPU_HOTPLUG;
	d->flags = flags;
	for (i = 0; i < gang->nr; i++) {
		if (!gang->workers[i].task)
			continue;
		get_task_struct(gang->workers[i].task);
		d->tasks[d->nr_tasks++] = gang->workers[i].task;
	}
	if (kunit_add_action_or_reset(test, cgk_cpus_release, d))
		return NULL;
	if (flags & CGK_CPU_SHUFFLE) {
		d->shuffler = cgk_cpus_thread(d, cgk_shuffler_fn, "cgk-shuffle");
		if (!d->shuffler)
			return NULL;
	}
	if (flags & CGK_CPU_HOTPLUG) {
		d->onoff = cgk_cpus_thread(d, cgk_onoff_fn, "cgk-onoff");
		if (!d->onoff)
			return NULL;
	}
	return d;
}

/**
 * cgk_cpus_hotplugging - whether these disturbers take CPUs offline
 * @d: from cgk_cpus_disturb()
 *
 * Return: true if they were asked to (CGK_CPU_HOTPLUG).
 */
bool cgk_cpus_hotplugging(const struct cgk_cpus *d)
{
	return d->flags & CGK_CPU_HOTPLUG;
}

/**
 * cgk_cpus_leave_offline - run a function on a CPU, then take that CPU offline
 * @d: stopped disturbers of a gang that may hotplug (cgk_cpus_stop())
 * @fn: what to run there, in a kworker bound to the CPU (smp_call_on_cpu())
 * @arg: its argument
 *
 * For what a CPU leaves behind when it goes offline (per-CPU updates still
 * pending): the CPUs the hotplug thread left offline come back first, and
 * this one stays offline until cgk_cpus_finish().
 *
 * Return: the CPU, or a negative errno (after failing the case) when no CPU
 * could be taken offline.
 */
int cgk_cpus_leave_offline(struct cgk_cpus *d, int (*fn)(void *arg), void *arg)
{
	struct kunit *test = d->gang->test;
	unsigned int cpu;
	int ret;

	cgk_cpus_online_all(d);
	if (num_online_cpus() < 3) {
		KUNIT_FAIL(test, "only %u CPUs online: none to take offline",
			   num_online_cpus());
		return -EBUSY;
	}
	for_each_online_cpu(cpu) {
		if (!cpu_is_hotpluggable(cpu))
			continue;
		ret = smp_call_on_cpu(cpu, fn, arg, false);
		if (ret) {
			KUNIT_FAIL(test, "running on CPU %u: %d", cpu, ret);
			return ret;
		}
		ret = remove_cpu(cpu);
		if (ret) {
			KUNIT_FAIL(test, "taking CPU %u offline: %d", cpu, ret);
			return ret;
		}
		cpumask_set_cpu(cpu, d->offline);
		d->kept++;
		return cpu;
	}
	KUNIT_FAIL(test, "no online CPU can be taken offline");
	return -EBUSY;
}

/**
 * cgk_cpus_finish - stop the disturbers of a gang that has run
 * @d: from cgk_cpus_disturb()
 *
 * Brings every CPU they took offline back online, reports what they did as
 * a diagnostic and fails the case when hotplug was asked for and no CPU
 * ever went offline, or when a CPU could not be brought back.
 */
void cgk_cpus_finish(struct cgk_cpus *d)
{
	struct kunit *test = d->gang->test;
	unsigned int stuck;

	kunit_release_action(test, cgk_cpus_release, d);
	stuck = cpumask_weight(d->offline);
	kunit_info(test, "cpus: %lu worker moves, %lu CPUs taken offline (and %lu for the checks), %lu brought back, %lu hotplug calls refused\n",
		   d->moves, d->offlined, d->kept, d->onlined, d->refused);
	if (d->flags & CGK_CPU_SHUFFLE)
		CGK_EXPECT_EXERCISED(test, d->moves, "no worker was moved to another CPU");
	if (d->flags & CGK_CPU_HOTPLUG)
		CGK_EXPECT_EXERCISED(test, d->offlined, "no CPU was taken offline");
	KUNIT_EXPECT_EQ_MSG(test, stuck, 0, "CPUs could not be brought back online");
}
