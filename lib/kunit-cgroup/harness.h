/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Shared harness of the cgroup_kunit suites.
 *
 * A gang is a set of kthreads started together on a barrier. Each worker has
 * its own PRNG stream (derived from the suite seed, the case and its index),
 * stops on a time bound, an iteration bound, kthread_should_stop() or the
 * first failure of any worker, and records its first failure for the test
 * thread to report: workers never use KUNIT_ASSERT_*() themselves.
 *
 * The oracle watches the console while a case runs and turns any lockdep,
 * KCSAN, KASAN, refcount_t, WARNING or BUG report into a failure of that
 * case, quoting the report's title. It is armed by cgk_suite_init_case()
 * and checked by cgk_suite_exit_case(), which every suite uses as its
 * .init and .exit.
 */
#ifndef _CGROUP_KUNIT_HARNESS_H
#define _CGROUP_KUNIT_HARNESS_H

#include <kunit/test.h>
#include <linux/atomic.h>
#include <linux/completion.h>
#include <linux/prandom.h>
#include <linux/types.h>

#define CGK_MAX_THREADS		64
#define CGK_FAILURE_LEN		160

struct cgk_gang;

/**
 * struct cgk_worker - one thread of a gang
 * @gang: the gang this worker belongs to
 * @task: the kthread
 * @index: position in the gang, 0..nr-1
 * @rnd: this worker's PRNG stream
 * @iterations: completed calls of the step function
 * @priv: per-worker data owned by the suite
 * @failed: set once, by cgk_fail()
 * @failure: the first failure, as text
 */
struct cgk_worker {
	struct cgk_gang *gang;
	struct task_struct *task;
	unsigned int index;
	struct rnd_state rnd;
	unsigned long iterations;
	void *priv;
	bool failed;
	char failure[CGK_FAILURE_LEN];
};

/**
 * struct cgk_gang_ops - what each worker of a gang does
 * @step: one operation; called until a stop rule fires
 * @fini: optional; called once by the worker after its last step, to give
 *	  back what it still holds
 */
struct cgk_gang_ops {
	void (*step)(struct cgk_worker *w);
	void (*fini)(struct cgk_worker *w);
};

/**
 * struct cgk_gang - N workers started together
 * @test: the case that owns the gang
 * @ops: the worker functions
 * @data: shared data owned by the suite
 * @nr: number of workers
 * @seed: the gang's seed (suite seed mixed with the case name)
 * @duration_ms: time bound of each worker
 * @max_iterations: iteration bound of each worker, 0 for none
 * @deadline: jiffies at which workers stop
 * @stop: set to stop every worker early
 * @ready: workers waiting at the start barrier
 * @running: workers that have not finished yet
 * @go: the start barrier
 * @done: completed when the last worker finishes
 * @workers: the workers
 */
struct cgk_gang {
	struct kunit *test;
	const struct cgk_gang_ops *ops;
	void *data;
	unsigned int nr;
	u64 seed;
	unsigned int duration_ms;
	unsigned long max_iterations;
	unsigned long deadline;
	bool stop;
	atomic_t ready;
	atomic_t running;
	struct completion go;
	struct completion done;
	struct cgk_worker workers[] __counted_by(nr);
};

/* Module parameters, validated when set. */
u64 cgk_seed(void);
unsigned int cgk_duration_ms(void);
bool cgk_provoke(const char *what);

struct cgk_gang *cgk_gang_create(struct kunit *test, unsigned int nr,
				 const struct cgk_gang_ops *ops, void *data);
void cgk_gang_run(struct cgk_gang *gang);
bool cgk_gang_report(struct cgk_gang *gang);
unsigned long cgk_gang_iterations(struct cgk_gang *gang);

__printf(2, 3) void cgk_fail(struct cgk_worker *w, const char *fmt, ...);

/**
 * cgk_should_stop - whether a worker must stop now
 * @w: the worker
 *
 * Return: true once the time bound, the iteration bound, a failure of any
 * worker of the gang or kthread_stop() asks the worker to stop.
 */
bool cgk_should_stop(struct cgk_worker *w);

/**
 * cgk_rand - a random number from the worker's own stream
 * @w: the worker
 * @n: upper bound, exclusive; must not be 0
 *
 * Return: a number in [0, @n).
 */
static inline u32 cgk_rand(struct cgk_worker *w, u32 n)
{
	return prandom_u32_state(&w->rnd) % n;
}

void cgk_atomic_long_max(atomic_long_t *max, long val);

/* Parameters: thread counts. */
const void *cgk_threads_gen(struct kunit *test, const void *prev, char *desc);
unsigned int cgk_param_threads(struct kunit *test);

/* Oracle, used as each suite's .init/.exit and .suite_init/.suite_exit. */
int cgk_suite_init(struct kunit_suite *suite);
void cgk_suite_exit(struct kunit_suite *suite);
int cgk_case_init(struct kunit *test);
void cgk_case_exit(struct kunit *test);

/* Polling with an explained bound, for work finished asynchronously. */
bool cgk_wait_for(bool (*cond)(void *arg), void *arg, unsigned int timeout_ms);

#endif /* _CGROUP_KUNIT_HARNESS_H */
