// SPDX-License-Identifier: GPL-2.0-only
/*
 * Shared harness of the cgroup_kunit suites: module parameters, gangs of
 * kthreads and the console oracle. See harness.h.
 */

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/cpumask.h>
#include <linux/debug_locks.h>
#include <linux/delay.h>
#include <linux/glob.h>
#include <linux/jhash.h>
#include <linux/kthread.h>
#include <linux/math64.h>
#include <linux/moduleparam.h>
#include <linux/panic.h>
#include <linux/preempt.h>
#include <linux/random.h>
#include <linux/sched/task.h>
#include <linux/spinlock.h>
#include <linux/string.h>
#include <linux/tracepoint.h>
#include <trace/events/printk.h>

#include "harness.h"

MODULE_DESCRIPTION("KUnit stress tests for cgroup and ucount concurrency");
MODULE_LICENSE("GPL");
MODULE_IMPORT_NS("EXPORTED_FOR_KUNIT_TESTING");

/* Slack given to workers past their time bound before the case gives up. */
#define CGK_STOP_SLACK_MS	30000
/* Time the workers get to reach the start barrier. */
#define CGK_START_TIMEOUT_MS	10000
/*
 * Interval of the diagnostic the test thread prints while the workers run,
 * so that a long duration_ms does not look like a hung kernel to a watchdog
 * reading the console, such as one that stops a boot after a few minutes
 * without output, or sooner once a lockdep or hung-task report was printed.
 */
#define CGK_HEARTBEAT_MS	20000

/* ---- module parameters -------------------------------------------------- */

static u64 seed_param;
static u64 seed_effective;
static unsigned int threads_param;
#define CGK_DEFAULT_DURATION_MS	1000
static unsigned int duration_param = CGK_DEFAULT_DURATION_MS;
static char provoke_param[32];
static bool selfcheck_param;

static const char * const cgk_provoke_names[] = { "lockdep", "kcsan", "warn" };

static int seed_set(const char *val, const struct kernel_param *kp)
{
	u64 seed;

	if (kstrtou64(val, 0, &seed)) {
		pr_err("seed=%s: want an unsigned 64-bit number (0 picks one at random)\n",
		       val);
		return -EINVAL;
	}
	*(u64 *)kp->arg = seed;
	return 0;
}

static int seed_get(char *buf, const struct kernel_param *kp)
{
	return sysfs_emit(buf, "%llu\n", *(u64 *)kp->arg);
}

static const struct kernel_param_ops seed_ops = {
	.set = seed_set,
	.get = seed_get,
};
module_param_cb(seed, &seed_ops, &seed_param, 0444);
MODULE_PARM_DESC(seed, "PRNG seed of every case (0: pick one at random and print it)");

static int threads_set(const char *val, const struct kernel_param *kp)
{
	unsigned int n;

	if (kstrtouint(val, 0, &n) || n > CGK_MAX_THREADS) {
		pr_err("threads=%s: want 1..%d, or 0 for each case's own list\n",
		       val, CGK_MAX_THREADS);
		return -EINVAL;
	}
	*(unsigned int *)kp->arg = n;
	return 0;
}

static const struct kernel_param_ops threads_ops = {
	.set = threads_set,
	.get = param_get_uint,
};
module_param_cb(threads, &threads_ops, &threads_param, 0444);
MODULE_PARM_DESC(threads, "kthreads per gang, 1..64 (0: 2, 1 and 4 per online CPU)");

static int duration_set(const char *val, const struct kernel_param *kp)
{
	unsigned int ms;

	if (kstrtouint(val, 0, &ms) || ms < 10 || ms > 600000) {
		pr_err("duration_ms=%s: want 10..600000\n", val);
		return -EINVAL;
	}
	*(unsigned int *)kp->arg = ms;
	return 0;
}

static const struct kernel_param_ops duration_ops = {
	.set = duration_set,
	.get = param_get_uint,
};
module_param_cb(duration_ms, &duration_ops, &duration_param, 0444);
MODULE_PARM_DESC(duration_ms, "time bound of each gang in ms, 10..600000 (default 1000)");

static bool provoke_word_known(const char *word, size_t len)
{
	int i;

	for (i = 0; i < ARRAY_SIZE(cgk_provoke_names); i++) {
		if (strlen(cgk_provoke_names[i]) == len &&
		    !strncmp(cgk_provoke_names[i], word, len))
			return true;
	}
	return false;
}

static int provoke_set(const char *val, const struct kernel_param *kp)
{
	size_t total = strcspn(val, "\n");
	const char *p = val, *end = val + total;

	if (total >= sizeof(provoke_param))
		goto bad;
	while (p < end) {
		size_t len = strcspn(p, ",\n");

		if (!len || !provoke_word_known(p, len))
			goto bad;
		p += len;
		if (*p == ',')
			p++;
	}
	strscpy(provoke_param, val, total + 1);
	return 0;
bad:
	pr_err("provoke=%s: want a comma-separated list of lockdep, kcsan, warn\n",
	       val);
	return -EINVAL;
}

static const struct kernel_param_ops provoke_ops = {
	.set = provoke_set,
	.get = param_get_string,
};

static struct kparam_string provoke_kps = {
	.maxlen = sizeof(provoke_param),
	.string = provoke_param,
};
module_param_cb(provoke, &provoke_ops, &provoke_kps, 0444);
MODULE_PARM_DESC(provoke, "deliberately provoke reports to prove the oracle: lockdep,kcsan,warn");

static int selfcheck_set(const char *val, const struct kernel_param *kp)
{
	if (param_set_bool(val, kp)) {
		pr_err("selfcheck=%s: want 1 or 0 (y or n)\n", val);
		return -EINVAL;
	}
	return 0;
}

static const struct kernel_param_ops selfcheck_ops = {
	.flags = KERNEL_PARAM_OPS_FL_NOARG,
	.set = selfcheck_set,
	.get = param_get_bool,
};
module_param_cb(selfcheck, &selfcheck_ops, &selfcheck_param, 0444);
MODULE_PARM_DESC(selfcheck,
		 "prove the oracle on real reports it captures, which taint the kernel (default 0)");

/**
 * cgk_seed - the suite seed
 *
 * Return: the seed given as module parameter, or the one picked at random
 * when the first suite started.
 */
u64 cgk_seed(void)
{
	return seed_effective;
}

/**
 * cgk_duration_ms - time bound of each gang
 *
 * Return: the duration_ms module parameter.
 */
unsigned int cgk_duration_ms(void)
{
	return duration_param;
}

/**
 * cgk_too_short - whether a case that never reached its race ran too short
 * @test: the case
 * @what: what never happened, for the skip reason
 *
 * With duration_ms= below the default, a slow machine may not get a case
 * to what it races (a kill, a transfer, a queued signal) in time: the case
 * then proves nothing either way and is marked skipped, saying so, unless
 * it already failed. With the default bound or longer it must get there.
 *
 * Return: true if the bound was shorter than the default (CGK_EXPECT_EXERCISED()
 * does not fail the case then).
 */
bool cgk_too_short(struct kunit *test, const char *what)
{
	if (duration_param >= CGK_DEFAULT_DURATION_MS)
		return false;
	if (READ_ONCE(test->status) == KUNIT_SUCCESS)
		kunit_mark_skipped(test, "%s in %u ms: duration_ms too short to reach the race",
				   what, duration_param);
	return true;
}

/**
 * cgk_provoke - whether a deliberate report was asked for
 * @what: "lockdep", "kcsan" or "warn"
 *
 * Return: true if @what is in the provoke module parameter.
 */
bool cgk_provoke(const char *what)
{
	size_t len = strlen(what);
	const char *p = provoke_param;

	while (*p) {
		size_t n = strcspn(p, ",");

		if (n == len && !strncmp(p, what, len))
			return true;
		p += n;
		if (*p == ',')
			p++;
	}
	return false;
}

/**
 * cgk_selfcheck - whether the oracle may prove itself on real reports
 *
 * The oracle_sees_* self-checks provoke a WARNING, a suspicious RCU usage
 * report or a KCSAN data race, which taint the kernel (and panic one booted
 * with panic_on_warn): they run only with the selfcheck module parameter.
 *
 * Return: the selfcheck module parameter.
 */
bool cgk_selfcheck(void)
{
	return selfcheck_param;
}

/**
 * cgk_provoked - whether reports are provoked on purpose in this boot
 *
 * Return: true with selfcheck or any word in provoke.
 */
bool cgk_provoked(void)
{
	return selfcheck_param || provoke_param[0];
}

/* ---- parameters: thread counts ------------------------------------------ */

/* Workers per online CPU of each instance, in this order: 2x first. */
static const unsigned int cgk_threads_per_cpu[] = { 2, 1, 4 };
static unsigned int cgk_threads_default[ARRAY_SIZE(cgk_threads_per_cpu)];
/* Why every case of the running suite skips: set by cgk_suite_skip(). */
static const char *cgk_skip_suite;

/**
 * cgk_suite_skip - skip every CGK_CASE() of the suite about to run
 * @why: the reason each case gives; must stay valid while the suite runs
 *
 * For a suite's .suite_init, for a suite that cannot run in this boot:
 * cgk_threads_gen() then yields no thread count and marks the case skipped
 * with @why. cgk_suite_exit() clears it.
 */
void cgk_suite_skip(const char *why)
{
	cgk_skip_suite = why;
}

/**
 * cgk_threads_gen - KUnit parameter generator over thread counts
 * @test: the case
 * @prev: the previous value, NULL for the first
 * @desc: where to write the description
 *
 * Yields the threads module parameter if set, else, as kcsan_test sizes its
 * threads by the CPUs it has, 2, 1 and 4 workers per online CPU (at least
 * 2, at most CGK_MAX_THREADS): 8, 4 and 16 with 4 CPUs. One per CPU runs
 * every worker at once; more than one per CPU also preempts workers inside
 * the paths they race, which is where a missing lock or barrier shows.
 *
 * Return: the next thread count, or NULL after the last (and for every case
 * of a suite that cgk_suite_skip() skips).
 */
const void *cgk_threads_gen(struct kunit *test, const void *prev, char *desc)
{
	const unsigned int *p = prev;
	unsigned int i;

	if (cgk_skip_suite) {
		kunit_mark_skipped(test, "%s", cgk_skip_suite);
		return NULL;
	}
	if (threads_param) {
		if (p)
			return NULL;
		p = &threads_param;
	} else if (!p) {
		for (i = 0; i < ARRAY_SIZE(cgk_threads_per_cpu); i++)
			cgk_threads_default[i] =
				clamp(cgk_threads_per_cpu[i] * num_online_cpus(),
				      2U, (unsigned int)CGK_MAX_THREADS);
		p = cgk_threads_default;
	} else {
		p++;
		if (p == cgk_threads_default + ARRAY_SIZE(cgk_threads_default))
			return NULL;
	}
	snprintf(desc, KUNIT_PARAM_DESC_SIZE, "%u threads", *p);
	return p;
}

/**
 * cgk_param_threads - the thread count of the running parameter
 * @test: the case, run through cgk_threads_gen()
 *
 * Return: the number of workers the case should start.
 */
unsigned int cgk_param_threads(struct kunit *test)
{
	return *(const unsigned int *)test->param_value;
}

/* ---- gangs -------------------------------------------------------------- */

/**
 * cgk_should_stop - whether a worker must stop now (see harness.h)
 * @w: the worker
 *
 * Return: true when the worker must leave its loop.
 */
bool cgk_should_stop(struct cgk_worker *w)
{
	struct cgk_gang *gang = w->gang;

	if (cgk_gang_should_stop(gang))
		return true;
	return gang->max_iterations && w->iterations >= gang->max_iterations;
}

/**
 * cgk_gang_should_stop - whether a thread racing a gang must stop now
 * @gang: the gang
 *
 * Return: true once the gang's time bound, a failure of any of its workers
 * or kthread_stop() of the calling kthread asks it to stop.
 */
bool cgk_gang_should_stop(struct cgk_gang *gang)
{
	return READ_ONCE(gang->stop) || kthread_should_stop() ||
	       time_after(jiffies, gang->deadline);
}

/**
 * cgk_fail - record a worker's failure and stop the gang
 * @w: the worker
 * @fmt: printf-style description of what was wrong
 *
 * Only the first failure of each worker is kept; the test thread reports it
 * through cgk_gang_report().
 */
void cgk_fail(struct cgk_worker *w, const char *fmt, ...)
{
	va_list args;

	if (!w->failed) {
		va_start(args, fmt);
		vsnprintf(w->failure, sizeof(w->failure), fmt, args);
		va_end(args);
		w->failed = true;
	}
	WRITE_ONCE(w->gang->stop, true);
}

/**
 * cgk_atomic_long_max - raise a running maximum
 * @max: the maximum
 * @val: a value seen
 */
void cgk_atomic_long_max(atomic_long_t *max, long val)
{
	long cur = atomic_long_read(max);

	while (val > cur && !atomic_long_try_cmpxchg(max, &cur, val))
		;
}

/*
 * A measured worker (cgk_gang_measure()) reads the clock every so many
 * steps, adapting that number so that two reads are CGK_CLOCK_MIN_NS to
 * CGK_CLOCK_MAX_NS apart while it runs: cheap for steps of nanoseconds,
 * fine-grained for steps of microseconds, and at most CGK_CLOCK_MAX_EVERY
 * steps, so that even steps slowed down tenfold by contention leave reads
 * well under CGK_STALL_NS apart. A gap of CGK_STALL_NS or more between two
 * reads means the worker did not run for most of it: the host descheduled
 * its vCPU (a host time slice is a millisecond or more), or the guest ran
 * something else there. A single step that long counts the same way.
 */
#define CGK_CLOCK_MIN_NS	(2 * NSEC_PER_USEC)
#define CGK_CLOCK_MAX_NS	(20 * NSEC_PER_USEC)
#define CGK_CLOCK_MAX_EVERY	256
#define CGK_STALL_NS		NSEC_PER_MSEC

struct cgk_clock {
	u64 last;
	unsigned int every;	/* steps between two reads */
	unsigned int steps;	/* since the last read */
};

static void cgk_worker_clock(struct cgk_worker *w, struct cgk_clock *clk)
{
	u64 now = ktime_get_ns(), gap = now - clk->last;

	if (gap >= CGK_STALL_NS)
		w->stalled_ns += gap;
	if (gap < CGK_CLOCK_MIN_NS && clk->every < CGK_CLOCK_MAX_EVERY)
		clk->every *= 2;
	else if (gap > CGK_CLOCK_MAX_NS && clk->every > 1)
		clk->every /= 2;
	clk->last = now;
	clk->steps = 0;
}

static int cgk_worker_fn(void *arg)
{
	struct cgk_worker *w = arg;
	struct cgk_gang *gang = w->gang;
	struct cgk_clock clk = { .every = 1 };
	bool measured;

	atomic_inc(&gang->ready);
	wait_for_completion(&gang->go);
	/* set before the start barrier opened (cgk_gang_measure()) */
	measured = READ_ONCE(gang->measured);
	w->start_ns = ktime_get_ns();
	clk.last = w->start_ns;
	while (!cgk_should_stop(w)) {
		gang->ops->step(w);
		/* Read by the test thread's heartbeat while the worker runs. */
		WRITE_ONCE(w->iterations, w->iterations + 1);
		if (measured && ++clk.steps >= clk.every)
			cgk_worker_clock(w, &clk);
		cond_resched();
	}
	if (measured)
		cgk_worker_clock(w, &clk);
	w->end_ns = clk.last;
	if (gang->ops->fini)
		gang->ops->fini(w);
	if (atomic_dec_and_test(&gang->running))
		complete(&gang->done);
	return 0;
}

static void cgk_gang_stop(struct cgk_gang *gang)
{
	unsigned int i;

	WRITE_ONCE(gang->stop, true);
	complete_all(&gang->go);
	for (i = 0; i < gang->nr; i++) {
		struct task_struct *task = gang->workers[i].task;

		if (!task)
			continue;
		kthread_stop_put(task);
		gang->workers[i].task = NULL;
	}
}

static void cgk_gang_release(void *arg)
{
	cgk_gang_stop(arg);
}

/**
 * cgk_gang_create - create the workers of a gang, waiting at the barrier
 * @test: the case; the gang is stopped when it ends, whatever happens
 * @nr: number of workers, 1..CGK_MAX_THREADS
 * @ops: what each worker does
 * @data: shared data for @ops
 *
 * Return: the gang, or NULL after failing @test.
 */
struct cgk_gang *cgk_gang_create(struct kunit *test, unsigned int nr,
				 const struct cgk_gang_ops *ops, void *data)
{
	struct cgk_gang *gang;
	unsigned int i;
	u64 seed;

	if (nr < 1 || nr > CGK_MAX_THREADS) {
		KUNIT_FAIL(test, "gang of %u workers: want 1..%d", nr, CGK_MAX_THREADS);
		return NULL;
	}
	gang = kunit_kzalloc(test, struct_size(gang, workers, nr), GFP_KERNEL);
	if (!gang) {
		KUNIT_FAIL(test, "no memory for a gang of %u", nr);
		return NULL;
	}
	gang->nr = nr;
	gang->test = test;
	gang->ops = ops;
	gang->data = data;
	gang->duration_ms = cgk_duration_ms();
	init_completion(&gang->go);
	init_completion(&gang->done);
	atomic_set(&gang->running, nr);

	/* The same case and parameter get the same streams for a given seed. */
	seed = cgk_seed();
	seed ^= (u64)jhash(test->name, strlen(test->name), test->param_index) << 32;
	gang->seed = seed;

	if (kunit_add_action_or_reset(test, cgk_gang_release, gang))
		return NULL;

	for (i = 0; i < nr; i++) {
		struct cgk_worker *w = &gang->workers[i];
		struct task_struct *task;

		w->gang = gang;
		w->index = i;
		prandom_seed_state(&w->rnd, seed + i * 0x9e3779b97f4a7c15ULL);
		task = kthread_create(cgk_worker_fn, w, "cgk-%u", i);
		if (IS_ERR(task)) {
			KUNIT_FAIL(test, "kthread_create of worker %u: %pe", i, task);
			/* Workers not created never run: let the others finish. */
			atomic_sub(nr - i, &gang->running);
			WRITE_ONCE(gang->stop, true);
			return NULL;
		}
		get_task_struct(task);
		w->task = task;
		wake_up_process(task);
	}
	return gang;
}

static bool cgk_gang_ready(void *arg)
{
	struct cgk_gang *gang = arg;

	return atomic_read(&gang->ready) == gang->nr;
}

/*
 * Wait until the last worker finished, at most their time bound plus
 * CGK_STOP_SLACK_MS, printing how far they got every CGK_HEARTBEAT_MS.
 * Return: true if they all finished in time.
 */
static bool cgk_gang_wait(struct cgk_gang *gang)
{
	unsigned long start = jiffies, now = start;
	unsigned long end = start + msecs_to_jiffies(gang->duration_ms + CGK_STOP_SLACK_MS);
	unsigned long beat = msecs_to_jiffies(CGK_HEARTBEAT_MS);
	unsigned int bound_s = DIV_ROUND_UP(gang->duration_ms, MSEC_PER_SEC);
	unsigned int run_s;

	while (time_before(now, end)) {
		if (wait_for_completion_timeout(&gang->done, min(end - now, beat)))
			return true;
		now = jiffies;
		if (!time_before(now, end))
			break;
		run_s = jiffies_to_msecs(now - start) / MSEC_PER_SEC;
		kunit_info(gang->test, "running %u s of %u s, %lu steps\n",
			   run_s, bound_s, cgk_gang_iterations(gang));
		now = jiffies;
	}
	return false;
}

/**
 * cgk_gang_run - release the workers and wait until they all stopped
 * @gang: a gang from cgk_gang_create()
 *
 * Prints the seed, thread count and time bound as a KTAP diagnostic so the
 * case can be replayed with the same parameters, and while the workers run,
 * every CGK_HEARTBEAT_MS, how long they have run and the steps they made.
 */
void cgk_gang_run(struct cgk_gang *gang)
{
	struct kunit *test = gang->test;

	kunit_info(test, "cgroup_kunit: seed=%llu threads=%u duration_ms=%u\n",
		   cgk_seed(), gang->nr, gang->duration_ms);

	if (!cgk_wait_for(cgk_gang_ready, gang, CGK_START_TIMEOUT_MS))
		KUNIT_FAIL(test, "only %d of %u workers reached the start barrier in %d ms",
			   atomic_read(&gang->ready), gang->nr, CGK_START_TIMEOUT_MS);

	gang->deadline = jiffies + msecs_to_jiffies(gang->duration_ms);
	complete_all(&gang->go);

	if (!cgk_gang_wait(gang))
		KUNIT_FAIL(test, "%d of %u workers still running %d ms past their time bound",
			   atomic_read(&gang->running), gang->nr, CGK_STOP_SLACK_MS);
	cgk_gang_stop(gang);
}

/**
 * cgk_gang_report - fail the case for every worker that recorded a failure
 * @gang: a gang that has run
 *
 * Return: true if no worker failed.
 */
bool cgk_gang_report(struct cgk_gang *gang)
{
	bool ok = true;
	unsigned int i;

	for (i = 0; i < gang->nr; i++) {
		struct cgk_worker *w = &gang->workers[i];

		if (w->failed) {
			KUNIT_FAIL(gang->test, "worker %u: %s", i, w->failure);
			ok = false;
		}
	}
	return ok;
}

/**
 * cgk_gang_iterations - total steps made by the workers
 * @gang: a gang that has run or is running
 *
 * Return: the sum of the workers' iterations (so far, while they run).
 */
unsigned long cgk_gang_iterations(struct cgk_gang *gang)
{
	unsigned long sum = 0;
	unsigned int i;

	for (i = 0; i < gang->nr; i++)
		sum += READ_ONCE(gang->workers[i].iterations);
	return sum;
}

/**
 * cgk_gang_measure - let a benchmark see whether a gang really ran in parallel
 * @gang: a gang from cgk_gang_create(), not started yet
 *
 * Each worker records when it ran and the gaps in which it made no step.
 * With no more workers than online CPUs, worker i is also bound to the
 * i-th online CPU, so that the guest's scheduler does not put two of them
 * on one CPU; see cgk_gang_busy_permille().
 */
void cgk_gang_measure(struct cgk_gang *gang)
{
	unsigned int i = 0;
	int cpu;

	gang->measured = true;
	if (gang->nr > num_online_cpus())
		return;
	for_each_online_cpu(cpu) {
		if (i == gang->nr)
			break;
		set_cpus_allowed_ptr(gang->workers[i++].task, cpumask_of(cpu));
	}
}

/**
 * cgk_gang_busy_permille - how much of a measured gang's run each worker ran
 * @gang: a gang that has run, with cgk_gang_measure()
 *
 * Return: for the worker that ran least, the part of the gang's time (from
 * the first worker's start to the last worker's last step) in which it
 * made steps, in permille. Well below 1000 means the workers did not all
 * run at the same time for that long: a benchmark drops such a repetition
 * rather than averaging it with the others.
 */
unsigned int cgk_gang_busy_permille(struct cgk_gang *gang)
{
	u64 start = U64_MAX, end = 0, span, busy, min_busy = U64_MAX;
	unsigned int i;

	for (i = 0; i < gang->nr; i++) {
		start = min(start, gang->workers[i].start_ns);
		end = max(end, gang->workers[i].end_ns);
	}
	if (end <= start)
		return 0;
	span = end - start;
	for (i = 0; i < gang->nr; i++) {
		struct cgk_worker *w = &gang->workers[i];

		busy = w->end_ns - w->start_ns;
		busy -= min(busy, w->stalled_ns);
		min_busy = min(min_busy, busy);
	}
	return div64_u64(min(min_busy, span) * 1000, span);
}

/**
 * cgk_wait_for - poll for a condition met by asynchronous work
 * @cond: the condition
 * @arg: its argument
 * @timeout_ms: how long to wait at most
 *
 * Return: true if @cond became true within @timeout_ms.
 */
bool cgk_wait_for(bool (*cond)(void *arg), void *arg, unsigned int timeout_ms)
{
	unsigned long end = jiffies + msecs_to_jiffies(timeout_ms);

	for (;;) {
		if (cond(arg))
			return true;
		if (time_after(jiffies, end))
			return false;
		fsleep(5 * USEC_PER_MSEC);
	}
}

/* ---- oracle ------------------------------------------------------------- */

/* The report titles, first match wins: report_titles.h */
static const struct {
	const char *kind;	/* the report's kind, for tools reading the console */
	const char *name;	/* the oracle's, in what it prints */
	const char *pattern;
} cgk_reports[] = {
#define CGK_REPORT(kind, name, pattern) { kind, name, pattern },
#include "report_titles.h"
#undef CGK_REPORT
};

/* Console lines the probe was called for, armed or not. */
static atomic_long_t cgk_lines_seen;

static struct {
	spinlock_t lock;	/* guards the fields below */
	bool armed;
	unsigned int reports;
	const char *kind;
	char title[CGK_FAILURE_LEN];
	int debug_locks_before;
} cgk_oracle = {
	.lock = __SPIN_LOCK_UNLOCKED(cgk_oracle.lock),
};

/*
 * Called for every console line, by printk() in any context, NMI included
 * (the hard-lockup detector reports from one): must not print, sleep or
 * allocate. buf is not NUL-terminated: the patterns are matched against a
 * copy as long as the title the oracle keeps (glob_match() neither recurses
 * nor allocates).
 */
__no_kcsan
static void cgk_probe_console(void *ignore, const char *buf, size_t len)
{
	char line[CGK_FAILURE_LEN];
	unsigned long flags;
	int i;

	atomic_long_inc(&cgk_lines_seen);
	while (len && (*buf == ' ' || *buf == '\t')) {
		buf++;
		len--;
	}
	len = min(len, sizeof(line) - 1);
	memcpy(line, buf, len);
	line[len] = '\0';
	for (i = 0; i < ARRAY_SIZE(cgk_reports); i++) {
		if (glob_match(cgk_reports[i].pattern, line))
			break;
	}
	if (i == ARRAY_SIZE(cgk_reports))
		return;

	/* An NMI may have come while this CPU held the lock: only try it there. */
	if (!in_nmi())
		spin_lock_irqsave(&cgk_oracle.lock, flags);
	else if (!spin_trylock_irqsave(&cgk_oracle.lock, flags))
		return;
	if (cgk_oracle.armed && !cgk_oracle.reports++) {
		cgk_oracle.kind = cgk_reports[i].name;
		strscpy(cgk_oracle.title, line);
	}
	spin_unlock_irqrestore(&cgk_oracle.lock, flags);
}

/**
 * cgk_oracle_feed - hand the oracle a line as if the console printed it
 * @line: the line, without its printk prefix
 *
 * For the oracle's own checks: the title table and the capture, without a
 * real report. What @line makes the oracle capture is taken back with
 * cgk_oracle_take().
 */
void cgk_oracle_feed(const char *line)
{
	cgk_probe_console(NULL, line, strlen(line));
}

/**
 * cgk_console_lines - console lines the oracle's probe was called for
 *
 * Return: the count since the module started; it moves with each line
 * printed while a suite runs (the probe is attached from .suite_init to
 * .suite_exit).
 */
unsigned long cgk_console_lines(void)
{
	return atomic_long_read(&cgk_lines_seen);
}

/* The kernel's taint flags when the first suite started; see cgk_taint_gained(). */
static unsigned long cgk_taint_before;
static bool cgk_taint_taken;

static unsigned long cgk_taint_mask(void)
{
	unsigned long mask = 0;
	int flag;

	for (flag = 0; flag < TAINT_FLAGS_COUNT; flag++) {
		if (test_taint(flag))
			mask |= BIT(flag);
	}
	return mask;
}

/**
 * cgk_taint_gained - taint flags the kernel gained while the suites ran
 *
 * KUnit's own TAINT_TEST aside.
 *
 * Return: the flags (BIT(TAINT_*)) set now that were not when the first
 * suite of the module started.
 */
unsigned long cgk_taint_gained(void)
{
	return cgk_taint_mask() & ~cgk_taint_before & ~BIT(TAINT_TEST);
}

/**
 * cgk_suite_init - .suite_init of every cgroup_kunit suite
 * @suite: the suite
 *
 * Picks the seed if none was given, notes the kernel's taint flags when
 * the first suite starts and attaches the oracle to the console.
 *
 * Return: 0 or a negative error.
 */
int cgk_suite_init(struct kunit_suite *suite)
{
	if (!cgk_taint_taken) {
		cgk_taint_before = cgk_taint_mask();
		cgk_taint_taken = true;
	}
	/* seed=0 asks for a random seed; every case prints the one it uses. */
	if (!seed_effective)
		seed_effective = seed_param;
	while (!seed_effective)
		seed_effective = get_random_u64();
	return register_trace_console(cgk_probe_console, NULL);
}

/**
 * cgk_suite_exit - .suite_exit of every cgroup_kunit suite
 * @suite: the suite
 */
void cgk_suite_exit(struct kunit_suite *suite)
{
	cgk_skip_suite = NULL;
	unregister_trace_console(cgk_probe_console, NULL);
	tracepoint_synchronize_unregister();
}

/**
 * cgk_case_init - .init of every cgroup_kunit suite: arm the oracle
 * @test: the case about to run
 *
 * Return: 0.
 */
int cgk_case_init(struct kunit *test)
{
	spin_lock_irq(&cgk_oracle.lock);
	cgk_oracle.armed = true;
	cgk_oracle.reports = 0;
	cgk_oracle.kind = NULL;
	cgk_oracle.title[0] = '\0';
	cgk_oracle.debug_locks_before = READ_ONCE(debug_locks);
	spin_unlock_irq(&cgk_oracle.lock);

	if (IS_ENABLED(CONFIG_LOCKDEP) && !cgk_oracle.debug_locks_before)
		kunit_info(test, "lockdep turned itself off earlier in this boot: not checking this case with it\n");
	return 0;
}

/**
 * cgk_oracle_take - take what the oracle captured so far in this case
 * @kind: set to the first report's kind, or NULL if there was none
 * @title: where to copy the first report's title
 * @len: size of @title
 *
 * For the oracle's own checks, which provoke a report on purpose: the
 * report is taken off the oracle, so cgk_case_exit() does not fail the
 * case for it, and the oracle stays armed for anything that follows.
 *
 * Return: the number of reports seen since the case began (or since the
 * last take).
 */
unsigned int cgk_oracle_take(const char **kind, char *title, size_t len)
{
	unsigned int reports;

	spin_lock_irq(&cgk_oracle.lock);
	reports = cgk_oracle.reports;
	*kind = cgk_oracle.kind;
	strscpy(title, cgk_oracle.title, len);
	cgk_oracle.reports = 0;
	cgk_oracle.kind = NULL;
	cgk_oracle.title[0] = '\0';
	spin_unlock_irq(&cgk_oracle.lock);
	return reports;
}

/**
 * cgk_case_exit - .exit of every cgroup_kunit suite: check the oracle
 * @test: the case that ran
 *
 * Fails @test if a report was printed while it ran, quoting the first one,
 * or if lockdep turned itself off meanwhile.
 */
void cgk_case_exit(struct kunit *test)
{
	char title[CGK_FAILURE_LEN];
	unsigned int reports;
	const char *kind;

	spin_lock_irq(&cgk_oracle.lock);
	cgk_oracle.armed = false;
	reports = cgk_oracle.reports;
	kind = cgk_oracle.kind;
	strscpy(title, cgk_oracle.title);
	spin_unlock_irq(&cgk_oracle.lock);

	if (reports)
		KUNIT_FAIL(test, "oracle: %s report while the case ran: %s",
			   kind, title);
	else if (cgk_oracle.debug_locks_before && !READ_ONCE(debug_locks))
		KUNIT_FAIL(test, "oracle: lockdep turned itself off while the case ran");
}
