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
 * A herd is the set of victims of a case: kthreads that workers move between
 * cgroups while they fork children and add threads that soon exit
 * (victims.c).
 *
 * The oracle watches the console while a case runs and turns any report
 * whose title report_titles.h lists (lockdep, KCSAN, KASAN, refcount_t,
 * WARNING, BUG, Oops, UBSAN, hung task, RCU stall, lockup, panic) into a
 * failure of that case, quoting the report's title; a tool reading the
 * console can classify it with the same table. It is armed by
 * cgk_case_init() and checked by cgk_case_exit(), which every suite uses
 * as its .init and .exit.
 */
#ifndef _CGROUP_KUNIT_HARNESS_H
#define _CGROUP_KUNIT_HARNESS_H

#include <kunit/test.h>
#include <linux/atomic.h>
#include <linux/bits.h>
#include <linux/completion.h>
#include <linux/mutex.h>
#include <linux/prandom.h>
#include <linux/signal.h>
#include <linux/types.h>
#include <linux/user_namespace.h>

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
 * @start_ns: when the worker left the start barrier
 * @end_ns: when it made its last step
 * @stalled_ns: time between two of its clock checks (cgk_gang_measure())
 *		that was long enough to mean it did not run: it was preempted,
 *		or its vCPU was
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
	u64 start_ns;
	u64 end_ns;
	u64 stalled_ns;
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
 * @measured: each worker reads the clock now and then and counts the gaps
 *	      that mean it did not run (cgk_gang_measure())
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
	bool measured;
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
bool cgk_selfcheck(void);
bool cgk_provoked(void);
bool cgk_too_short(struct kunit *test, const char *what);

/**
 * CGK_EXPECT_EXERCISED - fail a case whose workers never did what it races
 * @test: the case
 * @count: how often they did it
 * @what: a message for when they never did ("nothing was killed")
 *
 * A liveness check, not an invariant: with duration_ms= below the default
 * the case is marked skipped instead (cgk_too_short()).
 */
#define CGK_EXPECT_EXERCISED(test, count, what)				\
	do {								\
		struct kunit *__test = (test);				\
		const char *__what = (what);				\
									\
		if ((count) <= 0 && !cgk_too_short(__test, __what))	\
			KUNIT_FAIL(__test, "%s", __what);		\
	} while (0)

struct cgk_gang *cgk_gang_create(struct kunit *test, unsigned int nr,
				 const struct cgk_gang_ops *ops, void *data);
void cgk_gang_run(struct cgk_gang *gang);
bool cgk_gang_report(struct cgk_gang *gang);
unsigned long cgk_gang_iterations(struct cgk_gang *gang);
void cgk_gang_measure(struct cgk_gang *gang);
unsigned int cgk_gang_busy_permille(struct cgk_gang *gang);

__printf(2, 3) void cgk_fail(struct cgk_worker *w, const char *fmt, ...);

/**
 * cgk_should_stop - whether a worker must stop now
 * @w: the worker
 *
 * Return: true once the time bound, the iteration bound, a failure of any
 * worker of the gang or kthread_stop() asks the worker to stop.
 */
bool cgk_should_stop(struct cgk_worker *w);
bool cgk_gang_should_stop(struct cgk_gang *gang);

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

/*
 * CPUs under a gang's feet (cpus.c): a shuffler moving its workers between
 * online CPUs, and CPU hotplug racing them, where the kernel has it.
 */
#define CGK_CPU_SHUFFLE		BIT(0)
#define CGK_CPU_HOTPLUG		BIT(1)

struct cgk_cpus;

struct cgk_cpus *cgk_cpus_disturb(struct cgk_gang *gang, unsigned int flags);
void cgk_cpus_stop(struct cgk_cpus *d);
bool cgk_cpus_hotplugging(const struct cgk_cpus *d);
int cgk_cpus_leave_offline(struct cgk_cpus *d, int (*fn)(void *arg), void *arg);
void cgk_cpus_finish(struct cgk_cpus *d);

/* Parameters: thread counts. */
const void *cgk_threads_gen(struct kunit *test, const void *prev, char *desc);
unsigned int cgk_param_threads(struct kunit *test);
void cgk_suite_skip(const char *why);

/**
 * CGK_CASE - a case run once per thread count (cgk_threads_gen())
 * @fn: the case
 *
 * Each instance takes its time bound plus the teardown: KUnit calls that
 * slow. cgk_suite_skip() skips every CGK_CASE() of a suite.
 */
#define CGK_CASE(fn) \
	KUNIT_CASE_PARAM_ATTR(fn, cgk_threads_gen, { .speed = KUNIT_SPEED_SLOW })

/* Oracle, used as each suite's .init/.exit and .suite_init/.suite_exit. */
int cgk_suite_init(struct kunit_suite *suite);
void cgk_suite_exit(struct kunit_suite *suite);
int cgk_case_init(struct kunit *test);
void cgk_case_exit(struct kunit *test);
unsigned int cgk_oracle_take(const char **kind, char *title, size_t len);
void cgk_oracle_feed(const char *line);
unsigned long cgk_console_lines(void);
unsigned long cgk_taint_gained(void);

/* Polling with an explained bound, for work finished asynchronously. */
bool cgk_wait_for(bool (*cond)(void *arg), void *arg, unsigned int timeout_ms);

/*
 * Cgroup files (files.c): opened through a mount of their hierarchy, what a
 * shell's echo and cat do to them.
 */
struct vfsmount;
struct file;

struct file *cgk_file_open(struct vfsmount *mnt, const char *path, int flags);
struct file *cgk_file_open_for_test(struct kunit *test, struct vfsmount *mnt,
				    const char *path);
int cgk_file_write(struct file *file, const char *text);
int cgk_file_write_pid(struct file *file, struct task_struct *task, bool tgid);
ssize_t cgk_file_read(struct vfsmount *mnt, const char *path, char *buf, size_t size);

/*
 * Test hierarchies (hierarchy.c): removal of test cgroups, the baselines a
 * case must get back to, and the tree the migrate and css_set suites share:
 * top (named after the suite), a0..a2 in it, three leaves b<i>0..b<i>2 in
 * each a<i>, and a leaf in top that one worker keeps removing and
 * re-creating while the others migrate into it (the ephemeral leaf).
 */
struct cgroup;

/* What a case must leave as it found: css_sets, cgroups on the default root. */
struct cgk_baseline {
	unsigned int css_sets;
	int nr_cgrps;
};

bool cgk_cgroups_remove(struct cgroup **cgrps, int nr);
void cgk_baseline_take(struct cgk_baseline *b);
void cgk_expect_baseline(struct kunit *test, const struct cgk_baseline *b,
			 unsigned int timeout_ms);
struct cgroup *cgk_where(struct task_struct *task);
bool cgk_leaf_remove(struct kunit *test, struct cgroup *leaf,
		     unsigned int timeout_ms);

/**
 * struct cgk_controller - a controller a case uses where the kernel has it
 * @name: as written to cgroup.subtree_control
 * @ssid: its subsystem id
 */
struct cgk_controller {
	const char *name;
	int ssid;
};

/**
 * struct cgk_root_controllers - controllers a case needs on the default root
 * @ctrls: the table, ending with a NULL @name
 * @avail: bits of @ctrls enabled on the root, by the case or before it
 * @enabled: bits of @ctrls the case enabled there and must disable again
 */
struct cgk_root_controllers {
	const struct cgk_controller *ctrls;
	unsigned int avail;
	unsigned int enabled;
};

int cgk_write_control(struct cgroup *cgrp, char sign, const struct cgk_controller *ctrl);
void cgk_root_controllers_enable(struct kunit *test, struct cgk_root_controllers *rc);
void cgk_root_controllers_restore(struct kunit *test, struct cgk_root_controllers *rc);

#define CGK_TREE_NR		13		/* top, a0..a2, b00..b22 */
#define CGK_TREE_EPHEMERAL	CGK_TREE_NR	/* index of the leaf rmdir races */

/**
 * struct cgk_tree - the test hierarchy of the migrate and css_set suites
 * @cg: the cgroups by index, each parent before its children (0 is top,
 *	1..3 are a0..a2, 4..12 are b00..b22), then the published ephemeral
 *	leaf (NULL while there is none); each holds the reference
 *	cgroup_create_for_test() returned
 * @eph_lock: guards @cg[CGK_TREE_EPHEMERAL] and @closing
 * @closing: the leaf the rmdir worker is emptying, no longer published
 * @busy_tries: -EBUSY in a row; owned by the rmdir worker
 * @eph_gen: ephemeral leaves created so far; owned by the rmdir worker
 * @rmdirs: ephemeral leaves removed
 * @ebusy: removals of the ephemeral leaf that failed with -EBUSY
 */
struct cgk_tree {
	struct cgroup *cg[CGK_TREE_NR + 1];
	struct mutex eph_lock;		/* guards the ephemeral leaf */
	struct cgroup *closing;
	unsigned int busy_tries;
	unsigned int eph_gen;
	atomic_long_t rmdirs;
	atomic_long_t ebusy;
};

/**
 * struct cgk_tree_rmdir - how the rmdir worker treats a leaf that stays busy
 * @patience: -EBUSY in a row before it closes the leaf and evicts
 * @busy_nap_us: if not 0, how long it sleeps (up to twice that) after an
 *		 -EBUSY while still patient
 * @evict: move the victims out of the closing leaf; reports its failures
 *	   with cgk_fail()
 */
struct cgk_tree_rmdir {
	unsigned int patience;
	unsigned int busy_nap_us;
	void (*evict)(struct cgk_worker *w, struct cgroup *cgrp);
};

void cgk_tree_create(struct kunit *test, struct cgk_tree *tree,
		     const char *suite, bool ephemeral);
const char *cgk_tree_name(int i);
struct cgroup *cgk_tree_cg(struct cgk_tree *tree, int i);
struct cgroup *cgk_tree_get_ephemeral(struct cgk_tree *tree);
void cgk_tree_rmdir_step(struct cgk_worker *w, struct cgk_tree *tree,
			 const struct cgk_tree_rmdir *how);
bool cgk_tree_removed(void *arg);
bool cgk_tree_remove(struct kunit *test, struct cgk_tree *tree,
		     unsigned int timeout_ms);

/*
 * Victims (victims.c): kthreads that workers move between cgroups. Each is
 * its own thread group; with CGK_VICTIM_FORK it keeps forking children that
 * live a little in its cgroup and exit, with CGK_VICTIM_THREADS it keeps
 * adding threads to its group that do the same. With CGK_VICTIM_USER the
 * victims and their children are not kthreads but user_mode_thread()s,
 * which cgroup.kill and the freezer reach: they handle signals where a
 * user task would on its way back to user mode (get_signal()), so they
 * freeze in the freezer's trap and exit on SIGKILL. With CGK_VICTIM_SIGNALS
 * they (and their children) block and unblock CGK_VICTIM_SIGNAL and
 * CGK_VICTIM_FORCED_SIGNAL in turns, so that signals sent to them are
 * queued (each charged to their user's RLIMIT_SIGPENDING) and later
 * dequeued or flushed at exit.
 */
#define CGK_VICTIM_MAX_CHILDREN	2	/* live forked children per victim */
#define CGK_VICTIM_MAX_THREADS	3	/* live extra threads per victim */

enum cgk_victim_flags {
	CGK_VICTIM_FORK		= BIT(0),
	CGK_VICTIM_THREADS	= BIT(1),
	CGK_VICTIM_USER		= BIT(2),
	CGK_VICTIM_SIGNALS	= BIT(3),	/* with CGK_VICTIM_USER */
};

/* Queued for a CGK_VICTIM_SIGNALS victim (and ignored when delivered). */
#define CGK_VICTIM_SIGNAL	(SIGRTMIN + 1)
/*
 * The same, below SIGRTMIN: sent by the kernel (SEND_SIG_PRIV) it is
 * charged whatever the limits, and queued once while it is pending.
 */
#define CGK_VICTIM_FORCED_SIGNAL	SIGUSR2

struct cgk_herd;

/**
 * struct cgk_victim - a kthread that workers move between cgroups
 * @herd: the herd it belongs to
 * @task: the kthread, referenced; NULL before it starts and once stopped
 * @children: forked children that have not exited yet
 * @threads: extra threads of its group that have not exited yet
 * @forks: children forked so far; written by the victim only
 * @thread_forks: threads added so far; written by the victim only
 * @fork_eagain: forks refused with -EAGAIN (a pids limit); victim only
 * @fork_errors: forks that failed otherwise; written by the victim only
 * @child_pid: pid of the last child forked; written by the victim only
 * @loops: turns of its loop, to see that it runs; written by the victim only
 * @start_error: what went wrong when a CGK_VICTIM_USER victim started
 * @started: completed once the victim runs and can be migrated
 */
struct cgk_victim {
	struct cgk_herd *herd;
	struct task_struct *task;
	atomic_t children;
	atomic_t threads;
	unsigned long forks;
	unsigned long thread_forks;
	unsigned long fork_eagain;
	unsigned long fork_errors;
	pid_t child_pid;
	unsigned long loops;
	int start_error;
	struct completion started;
};

/**
 * struct cgk_herd - the victims of one case
 * @flags: what every victim does, CGK_VICTIM_*
 * @stop_forking: set first when stopping, so that victims stop forking
 * @stop: set to make CGK_VICTIM_USER victims exit
 * @uid: if valid, CGK_VICTIM_USER victims run as this user (set before the
 *	 first victim starts), so their ucounts are theirs alone
 * @nr: number of victims
 * @victims: the victims
 */
struct cgk_herd {
	unsigned long flags;
	bool stop_forking;
	bool stop;
	kuid_t uid;
	unsigned int nr;
	struct cgk_victim victims[] __counted_by(nr);
};

struct cgk_herd *cgk_herd_alloc(struct kunit *test, unsigned int nr,
				unsigned long flags);
struct task_struct *cgk_herd_start(struct cgk_herd *herd, unsigned int i,
				   const char *name);
struct task_struct *cgk_herd_restart(struct cgk_herd *herd, unsigned int i,
				     const char *name);
bool cgk_victim_dead(struct cgk_victim *v);
void cgk_herd_stop_forking(struct cgk_herd *herd);
bool cgk_herd_settled(struct kunit *test, struct cgk_herd *herd, unsigned int timeout_ms);
bool cgk_herd_stop(struct cgk_herd *herd, unsigned int timeout_ms);
unsigned long cgk_herd_forks(struct cgk_herd *herd);
unsigned long cgk_herd_thread_forks(struct cgk_herd *herd);
void cgk_herd_expect_members(struct kunit *test, struct cgk_herd *herd,
			     int (*where)(void *arg, unsigned int i), void *arg,
			     struct cgroup *const *cgrps, const char *const *names,
			     int nr);

#endif /* _CGROUP_KUNIT_HARNESS_H */
