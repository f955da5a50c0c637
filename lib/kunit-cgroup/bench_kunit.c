// SPDX-License-Identifier: GPL-2.0-only
/*
 * cgroup_bench, cgroup_bench_migrate: benchmarks of cpu.stat reads, pending
 * signal charges and cgroup.procs migrations. Built only with
 * CONFIG_CGROUP_KUNIT_BENCH; they check nothing but that the benchmark ran.
 * They are meant for a kernel without lock, race or memory debugging, booted
 * with one CPU per host core: on UML each CPU is a host thread, so the gangs
 * below run in parallel at native speed.
 *
 * Every measurement is printed as one KTAP diagnostic of the form
 *   metric: <record> <key>=<value> ...
 * with raw counts and the elapsed time in ns; whoever reads them computes
 * the rates and compares kernels. Records of timed repetitions carry
 * busy=<permille>: the part of the repetition in which its least busy
 * worker made steps (cgk_gang_busy_permille()). Well under 1000 means the
 * workers did not run at the same time for that long (a host that
 * descheduled a vCPU), and such a repetition measures no contention.
 *
 *  - bench_rstat_read: R readers read cpu.stat (cgroup_base_stat_read(),
 *    what the file shows) while U updaters charge cputime to the leaves of
 *    one cgroup, R = 1, 2, 4 ... up to the CPUs (and 0, for the updaters'
 *    own cost), U = 0, 1 and half the CPUs. The readers read that one
 *    cgroup (cgroups=1), or each its own leaf (cgroups=R). The leaves are
 *    at depth bench_rstat_depth (module parameter, default 2: the root,
 *    the one cgroup, the leaves); a depth D above 2 puts D - 2 cgroups
 *    between the root and the one cgroup, to price a charge that adds to
 *    every level. Records, each with depth=D:
 *    rstat_read (reads and updates done), then, in one more repetition with
 *    probes on the cgroup_rstat_locked/unlock tracepoints, rstat_locks:
 *    the rstat lock acquisitions the readers made, how many found the lock
 *    taken, and the ns they held it, so that a read's serialized part can
 *    be told from its parallel part whatever the number of CPUs (none
 *    where cpu.stat sums per-cpu subtree totals: a read takes no lock).
 *  - bench_ucount_charge: T threads in K sibling user namespaces under one
 *    parent charge and uncharge a pending signal the way signal delivery
 *    does (inc_rlimit_get_ucounts()/dec_rlimit_put_ucounts()), K = 1, 2, 4
 *    ... up to the CPUs, T = K and T = CPUs (ucount_charge); pairs of
 *    threads in one namespace, one charging, the other uncharging what the
 *    first charged, as when a signal is sent on one CPU and dequeued on
 *    another (ucount_cross); and T threads in K namespaces whose parent
 *    level admits only two pending signals per thread while each thread
 *    wants up to four, so that charges keep meeting the limit
 *    (ucount_limit: charges admitted and refused).
 *  - bench_migrate_latency: one thread moves a thread group back and forth
 *    between two cgroups through the cgroup.procs write path for
 *    duration_ms while F churn threads fork children that exit, in other
 *    thread groups, F = 0, 1, CPUs - 1 and twice the CPUs. The churn is
 *    forking before the first migration is timed, and its forks are
 *    counted over the timed window only. First with the global attach
 *    lock, then, after switching the default hierarchy to favordynmods
 *    (one way), with the per-threadgroup lock: latency percentiles of the
 *    migrations and the churn's fork rate. It is a suite of its own, run
 *    after the others, because favordynmods cannot be switched off again.
 *
 * Each point is measured bench_reps times (module parameter, default 5) for
 * duration_ms each (default 1000).
 */

#include <linux/cgroup.h>
#include <linux/cgroup_kunit.h>
#include <linux/cpumask.h>
#include <linux/delay.h>
#include <linux/kernel_stat.h>
#include <linux/moduleparam.h>
#include <linux/percpu.h>
#include <linux/slab.h>
#include <linux/sort.h>
#include <linux/tracepoint.h>
#include <linux/user_namespace.h>
#include <trace/events/cgroup.h>

#include "harness.h"
#include "shared_writes.h"
#include "sigpending.h"

static unsigned int bench_reps = 5;
static unsigned int bench_migrations = 500000;
static unsigned int bench_rstat_depth = 2;

static int bench_uint_set(const char *val, const struct kernel_param *kp,
			  unsigned int lo, unsigned int hi)
{
	unsigned int n;

	if (kstrtouint(val, 0, &n) || n < lo || n > hi) {
		pr_err("cgroup_kunit: %s=%s: want %u..%u\n", kp->name, val, lo, hi);
		return -EINVAL;
	}
	*(unsigned int *)kp->arg = n;
	return 0;
}

static int bench_reps_set(const char *val, const struct kernel_param *kp)
{
	return bench_uint_set(val, kp, 1, 50);
}

static const struct kernel_param_ops bench_reps_ops = {
	.set = bench_reps_set,
	.get = param_get_uint,
};
module_param_cb(bench_reps, &bench_reps_ops, &bench_reps, 0444);
MODULE_PARM_DESC(bench_reps, "repetitions of each benchmark point, 1..50 (default 5)");

static int bench_migrations_set(const char *val, const struct kernel_param *kp)
{
	return bench_uint_set(val, kp, 10, 5000000);
}

static const struct kernel_param_ops bench_migrations_ops = {
	.set = bench_migrations_set,
	.get = param_get_uint,
};
module_param_cb(bench_migrations, &bench_migrations_ops, &bench_migrations, 0444);
MODULE_PARM_DESC(bench_migrations,
		 "most migrations timed in one repetition of bench_migrate_latency, 10..5000000 (default 500000)");

static int bench_rstat_depth_set(const char *val, const struct kernel_param *kp)
{
	return bench_uint_set(val, kp, 2, 16);
}

static const struct kernel_param_ops bench_rstat_depth_ops = {
	.set = bench_rstat_depth_set,
	.get = param_get_uint,
};
module_param_cb(bench_rstat_depth, &bench_rstat_depth_ops, &bench_rstat_depth, 0444);
MODULE_PARM_DESC(bench_rstat_depth,
		 "depth of the leaves bench_rstat_read charges, the root's children at 1, 2..16 (default 2)");

/* After @n: 2 * @n, but @max last, and UINT_MAX once @max was done. */
static unsigned int bench_next_pow2(unsigned int n, unsigned int max)
{
	if (n >= max)
		return UINT_MAX;
	return min(n * 2, max);
}

static unsigned int bench_cpus(void)
{
	return clamp_t(unsigned int, num_online_cpus(), 1, CGK_MAX_THREADS / 2);
}

static void bench_print_machine(struct kunit *test)
{
	kunit_info(test, "metric: bench_machine vcpus=%u\n", num_online_cpus());
}

/* Run a gang measured for busy time (cgk_gang_measure()); the ns it took. */
static u64 bench_gang_run(struct cgk_gang *gang)
{
	u64 start;

	cgk_gang_measure(gang);
	start = ktime_get_ns();
	cgk_gang_run(gang);
	return ktime_get_ns() - start;
}

static unsigned long bench_iterations(struct cgk_gang *gang, unsigned int from,
				      unsigned int to)
{
	unsigned long n = 0;

	for (; from < to; from++)
		n += gang->workers[from].iterations;
	return n;
}

/* ---- rstat: cpu.stat readers against updaters ---------------------------- */

#define BENCH_RS_LEAVES		(CGK_MAX_THREADS / 2)
#define BENCH_RS_MAX_DEPTH	16	/* bench_rstat_depth_set()'s bound */

/**
 * struct bench_rs - the cgroups of bench_rstat_read
 * @above: the cgroups between the root and @top, the root's child first
 * @nr_above: how many, bench_rstat_depth - 2
 * @depth: the leaves' depth
 * @top: the one cgroup, the leaves' parent
 * @leaf: the leaves, charged by the updaters
 * @nr_readers: the first workers of the gang, which read
 * @own: reader i reads leaf[i], else top
 */
struct bench_rs {
	struct cgroup *above[BENCH_RS_MAX_DEPTH - 2];
	unsigned int nr_above;
	unsigned int depth;
	struct cgroup *top;
	struct cgroup *leaf[BENCH_RS_LEAVES];
	unsigned int nr_readers;
	bool own;
};

static void bench_rs_step(struct cgk_worker *w)
{
	struct bench_rs *b = w->gang->data;

	if (w->index < b->nr_readers) {
		struct cgroup_base_stat shown;

		cgroup_base_stat_read(b->own ? b->leaf[w->index] : b->top, &shown, NULL);
	} else {
		struct cgroup *leaf = b->leaf[w->iterations % BENCH_RS_LEAVES];

		/* What the scheduler charges: run time, then user time. */
		__cgroup_account_cputime(leaf, 1000);
		__cgroup_account_cputime_field(leaf, CPUTIME_USER, 1000);
	}
}

static const struct cgk_gang_ops bench_rs_ops = {
	.step = bench_rs_step,
};

/*
 * Lock counting: probes on the rstat lock tracepoints count what the
 * readers of the gang being counted do with an rstat lock (cpu.stat takes
 * only rstat_base_lock), per CPU so that the counting adds no shared
 * cache line of its own; acquisitions by anyone else are counted apart.
 */
struct bench_lock_count {
	u64 locks;
	u64 contended;
	u64 hold_ns;
	u64 since;
	u64 others;
};

static DEFINE_PER_CPU(struct bench_lock_count, bench_lock_counts);
static struct cgk_gang *bench_counted;

static bool bench_counted_reader(void)
{
	struct cgk_gang *gang = READ_ONCE(bench_counted);
	struct bench_rs *b;
	unsigned int i;

	if (!gang)
		return false;
	b = gang->data;
	for (i = 0; i < b->nr_readers; i++) {
		if (gang->workers[i].task == current)
			return true;
	}
	return false;
}

/* Called with the rstat lock just taken, irqs off: this CPU's counts are ours. */
static void bench_probe_locked(void *data, struct cgroup *cgrp, int cpu,
			       bool contended)
{
	struct bench_lock_count *c = this_cpu_ptr(&bench_lock_counts);

	if (!bench_counted_reader()) {
		c->others++;
		return;
	}
	c->locks++;
	c->contended += contended;
	c->since = ktime_get_ns();
}

/* Called with the rstat lock still held, on the CPU that took it. */
static void bench_probe_unlock(void *data, struct cgroup *cgrp, int cpu,
			       bool contended)
{
	struct bench_lock_count *c = this_cpu_ptr(&bench_lock_counts);

	if (c->since && bench_counted_reader())
		c->hold_ns += ktime_get_ns() - c->since;
	c->since = 0;
}

static int bench_count_locks(struct cgk_gang *gang)
{
	int cpu, ret;

	for_each_possible_cpu(cpu)
		memset(per_cpu_ptr(&bench_lock_counts, cpu), 0, sizeof(struct bench_lock_count));
	WRITE_ONCE(bench_counted, gang);
	ret = register_trace_cgroup_rstat_locked(bench_probe_locked, NULL);
	if (ret)
		return ret;
	ret = register_trace_cgroup_rstat_unlock(bench_probe_unlock, NULL);
	if (ret) {
		unregister_trace_cgroup_rstat_locked(bench_probe_locked, NULL);
		tracepoint_synchronize_unregister();
	}
	return ret;
}

static void bench_stop_counting(struct bench_lock_count *sum)
{
	int cpu;

	unregister_trace_cgroup_rstat_unlock(bench_probe_unlock, NULL);
	unregister_trace_cgroup_rstat_locked(bench_probe_locked, NULL);
	tracepoint_synchronize_unregister();
	WRITE_ONCE(bench_counted, NULL);
	memset(sum, 0, sizeof(*sum));
	for_each_possible_cpu(cpu) {
		struct bench_lock_count *c = per_cpu_ptr(&bench_lock_counts, cpu);

		sum->locks += c->locks;
		sum->contended += c->contended;
		sum->hold_ns += c->hold_ns;
		sum->others += c->others;
	}
}

static void bench_rs_release(void *arg)
{
	struct bench_rs *b = arg;
	int i;

	for (i = 0; i < BENCH_RS_LEAVES; i++) {
		if (!b->leaf[i])
			continue;
		cgroup_destroy_for_test(b->leaf[i]);
		cgroup_put(b->leaf[i]);
	}
	if (b->top) {
		cgroup_destroy_for_test(b->top);
		cgroup_put(b->top);
	}
	for (i = (int)b->nr_above - 1; i >= 0; i--) {
		if (!b->above[i])
			continue;
		cgroup_destroy_for_test(b->above[i]);
		cgroup_put(b->above[i]);
	}
}

static struct cgroup *bench_rs_cgroup(struct kunit *test, struct cgroup *parent,
				      const char *name)
{
	struct cgroup *cgrp = cgroup_create_for_test(parent, name);

	if (IS_ERR(cgrp)) {
		KUNIT_FAIL(test, "creating %s: %ld", name, PTR_ERR(cgrp));
		return NULL;
	}
	return cgrp;
}

/* One point: bench_reps timed repetitions, then one counting the locks. */
static void bench_rs_point(struct kunit *test, struct bench_rs *b,
			   unsigned int readers, unsigned int updaters, bool own)
{
	unsigned int cgroups = own ? readers : !!readers, rep;
	struct bench_lock_count locks;
	struct cgk_gang *gang;
	u64 ns;

	b->nr_readers = readers;
	b->own = own;
	for (rep = 0; rep < bench_reps; rep++) {
		gang = cgk_gang_create(test, readers + updaters, &bench_rs_ops, b);
		KUNIT_ASSERT_NOT_NULL(test, gang);
		ns = bench_gang_run(gang);
		kunit_info(test, "metric: rstat_read readers=%u updaters=%u cgroups=%u depth=%u rep=%u ns=%llu reads=%lu updates=%lu busy=%u\n",
			   readers, updaters, cgroups, b->depth, rep, ns,
			   bench_iterations(gang, 0, readers),
			   bench_iterations(gang, readers, gang->nr),
			   cgk_gang_busy_permille(gang));
	}
	if (!readers)
		return;
	gang = cgk_gang_create(test, readers + updaters, &bench_rs_ops, b);
	KUNIT_ASSERT_NOT_NULL(test, gang);
	KUNIT_ASSERT_EQ(test, 0, bench_count_locks(gang));
	ns = bench_gang_run(gang);
	bench_stop_counting(&locks);
	kunit_info(test, "metric: rstat_locks readers=%u updaters=%u cgroups=%u depth=%u ns=%llu reads=%lu updates=%lu locks=%llu contended=%llu hold_ns=%llu other_locks=%llu\n",
		   readers, updaters, cgroups, b->depth, ns,
		   bench_iterations(gang, 0, readers),
		   bench_iterations(gang, readers, gang->nr), locks.locks,
		   locks.contended, locks.hold_ns, locks.others);
}

static void bench_rstat_read(struct kunit *test)
{
	unsigned int cpus = bench_cpus(), r, u;
	unsigned int updaters[3] = { 0, 1, max(cpus / 2, 1U) };
	struct cgroup *parent = &cgrp_dfl_root.cgrp;
	struct bench_rs *b;
	int i;

	b = kunit_kzalloc(test, sizeof(*b), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, b);
	KUNIT_ASSERT_EQ(test, 0, kunit_add_action_or_reset(test, bench_rs_release, b));
	b->depth = bench_rstat_depth;
	/* The cgroups above the one cgroup, each in the one before. */
	for (i = 0; i < (int)b->depth - 2; i++) {
		char name[24];

		snprintf(name, sizeof(name), i ? "d%d" : "cgk-bench-rstat-d%d", i + 1);
		b->above[i] = bench_rs_cgroup(test, parent, name);
		KUNIT_ASSERT_NOT_NULL(test, b->above[i]);
		b->nr_above = i + 1;
		parent = b->above[i];
	}
	b->top = bench_rs_cgroup(test, parent, "cgk-bench-rstat");
	KUNIT_ASSERT_NOT_NULL(test, b->top);
	for (i = 0; i < BENCH_RS_LEAVES; i++) {
		char name[16];

		snprintf(name, sizeof(name), "leaf%d", i);
		b->leaf[i] = bench_rs_cgroup(test, b->top, name);
		KUNIT_ASSERT_NOT_NULL(test, b->leaf[i]);
	}
	bench_print_machine(test);

	for (u = 0; u < ARRAY_SIZE(updaters); u++) {
		if (u && updaters[u] == updaters[u - 1])
			continue;
		/* readers=0: what the updaters alone do, for their cost */
		for (r = updaters[u] ? 0 : 1; r != UINT_MAX;
		     r = r ? bench_next_pow2(r, cpus) : 1) {
			bench_rs_point(test, b, r, updaters[u], false);
			if (r > 1)
				bench_rs_point(test, b, r, updaters[u], true);
		}
	}
}

/* ---- ucount: pending-signal charges in sibling namespaces ------------------ */

#define BENCH_UC_OWNER		3142000
#define BENCH_UC_UID		3142001
#define BENCH_UC_SIGPENDING	BIT(20)
/* ucount_cross: the charges a charger may have outstanding. */
#define BENCH_UC_CROSS_DEPTH	64
/* ucount_limit: the parent level's limit per thread, and what each wants. */
#define BENCH_UC_LIMIT_PER	2
#define BENCH_UC_WANT		4

enum bench_uc_mode { BENCH_UC_SAME, BENCH_UC_CROSS, BENCH_UC_LIMIT };

/* shared= beside the charges, where the kernel counts such writes. */
static void bench_uc_shared(char *buf, size_t size, unsigned long before)
{
	buf[0] = '\0';
	if (CGK_SHARED_WRITES_COUNTED)
		snprintf(buf, size, " shared=%lu", cgk_shared_writes() - before);
}

struct bench_uc {
	struct user_namespace *parent;
	struct user_namespace *child[CGK_MAX_THREADS];
	unsigned int nr_children;
	enum bench_uc_mode mode;
	atomic_long_t refused;		/* BENCH_UC_SAME: far below the limit */
};

/* What one worker of a point holds. */
/*
 * A worker's own counters, written on every step: a cache line each, or the
 * workers' counters would share a line and bounce it between the CPUs the
 * way the counts being measured do.
 */
struct bench_uc_worker {
	struct ucounts *uc;
	atomic_long_t *outstanding;	/* BENCH_UC_CROSS: shared by a pair */
	unsigned long charges;
	unsigned long refused;
	unsigned int held;		/* BENCH_UC_LIMIT */
} ____cacheline_aligned_in_smp;

/* What the two workers of a BENCH_UC_CROSS pair share, apart from others. */
struct bench_uc_pair {
	atomic_long_t outstanding;
} ____cacheline_aligned_in_smp;

static void bench_uc_release_held(struct bench_uc_worker *p)
{
	for (; p->held; p->held--)
		dec_rlimit_put_ucounts(p->uc, UCOUNT_RLIMIT_SIGPENDING);
}

static void bench_uc_step(struct cgk_worker *w)
{
	struct bench_uc *b = w->gang->data;
	struct bench_uc_worker *p = w->priv;

	switch (b->mode) {
	case BENCH_UC_SAME:
		if (cgk_sigpending_charge(p->uc, false, LONG_MAX)) {
			dec_rlimit_put_ucounts(p->uc, UCOUNT_RLIMIT_SIGPENDING);
			p->charges++;
		} else {
			atomic_long_inc(&b->refused);
		}
		break;
	case BENCH_UC_CROSS:
		/* even workers charge, the odd one next to each uncharges */
		if (!(w->index & 1)) {
			if (atomic_long_read(p->outstanding) >= BENCH_UC_CROSS_DEPTH) {
				cpu_relax();
				break;
			}
			if (cgk_sigpending_charge(p->uc, false, LONG_MAX)) {
				atomic_long_inc(p->outstanding);
				p->charges++;
			} else {
				p->refused++;
			}
		} else if (atomic_long_add_unless(p->outstanding, -1, 0)) {
			dec_rlimit_put_ucounts(p->uc, UCOUNT_RLIMIT_SIGPENDING);
		} else {
			cpu_relax();
		}
		break;
	case BENCH_UC_LIMIT:
		if (p->held < BENCH_UC_WANT &&
		    cgk_sigpending_charge(p->uc, false, LONG_MAX)) {
			p->held++;
			p->charges++;
			break;
		}
		if (p->held < BENCH_UC_WANT)
			p->refused++;
		bench_uc_release_held(p);
		break;
	}
}

static void bench_uc_fini(struct cgk_worker *w)
{
	bench_uc_release_held(w->priv);
}

static const struct cgk_gang_ops bench_uc_ops = {
	.step = bench_uc_step,
	.fini = bench_uc_fini,
};

static void bench_uc_release(void *arg)
{
	struct bench_uc *b = arg;
	unsigned int i;

	for (i = 0; i < b->nr_children; i++)
		put_user_ns(b->child[i]);
	if (b->parent)
		put_user_ns(b->parent);
}

static struct user_namespace *bench_uc_ns(struct kunit *test,
					  struct user_namespace *parent)
{
	struct user_namespace *ns;

	ns = user_ns_create_for_test(parent, KUIDT_INIT(BENCH_UC_OWNER));
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, ns);
	set_userns_rlimit_max(ns, UCOUNT_RLIMIT_SIGPENDING, BENCH_UC_SIGPENDING);
	return ns;
}

static void bench_uc_limit(struct bench_uc *b, unsigned long limit)
{
	unsigned int i;

	for (i = 0; i < b->nr_children; i++)
		set_userns_rlimit_max(b->child[i], UCOUNT_RLIMIT_SIGPENDING, limit);
}

static const char * const bench_uc_record[] = {
	[BENCH_UC_SAME] = "ucount_charge",
	[BENCH_UC_CROSS] = "ucount_cross",
	[BENCH_UC_LIMIT] = "ucount_limit",
};

/* One point: @threads threads spread over the first @nr_ns namespaces. */
static void bench_uc_point(struct kunit *test, struct bench_uc *b,
			   enum bench_uc_mode mode, unsigned int nr_ns,
			   unsigned int threads)
{
	unsigned long charges, refused;
	struct bench_uc_worker *p;
	struct bench_uc_pair *pairs;
	unsigned int rep, i;

	p = kunit_kcalloc(test, threads, sizeof(*p), GFP_KERNEL);
	pairs = kunit_kcalloc(test, threads, sizeof(*pairs), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, p);
	KUNIT_ASSERT_NOT_NULL(test, pairs);
	b->mode = mode;
	if (mode == BENCH_UC_LIMIT)
		bench_uc_limit(b, BENCH_UC_LIMIT_PER * threads);
	for (rep = 0; rep < bench_reps; rep++) {
		unsigned long shared;
		struct cgk_gang *gang;
		char extra[32];
		u64 ns;

		gang = cgk_gang_create(test, threads, &bench_uc_ops, b);
		KUNIT_ASSERT_NOT_NULL(test, gang);
		for (i = 0; i < threads; i++) {
			/* a cross pair charges and uncharges in one namespace */
			unsigned int child = (mode == BENCH_UC_CROSS ? i / 2 : i) % nr_ns;

			memset(&p[i], 0, sizeof(p[i]));
			p[i].uc = alloc_ucounts(b->child[child], KUIDT_INIT(BENCH_UC_UID));
			KUNIT_ASSERT_NOT_NULL(test, p[i].uc);
			atomic_long_set(&pairs[i / 2].outstanding, 0);
			p[i].outstanding = &pairs[i / 2].outstanding;
			gang->workers[i].priv = &p[i];
		}
		shared = cgk_shared_writes();
		ns = bench_gang_run(gang);
		bench_uc_shared(extra, sizeof(extra), shared);
		charges = 0;
		refused = 0;
		for (i = 0; i < threads; i++) {
			charges += p[i].charges;
			refused += p[i].refused;
			if (mode == BENCH_UC_CROSS && !(i & 1)) {
				/* what the uncharger did not get to */
				while (atomic_long_add_unless(&pairs[i / 2].outstanding, -1, 0))
					dec_rlimit_put_ucounts(p[i].uc, UCOUNT_RLIMIT_SIGPENDING);
			}
			put_ucounts(p[i].uc);
		}
		kunit_info(test, "metric: %s namespaces=%u threads=%u rep=%u ns=%llu charges=%lu refused=%lu busy=%u%s\n",
			   bench_uc_record[mode], nr_ns, threads, rep, ns, charges,
			   refused, cgk_gang_busy_permille(gang), extra);
	}
	if (mode == BENCH_UC_LIMIT)
		bench_uc_limit(b, BENCH_UC_SIGPENDING);
}

static void bench_ucount_charge(struct kunit *test)
{
	unsigned int cpus = bench_cpus(), k;
	struct bench_uc *b;

	b = kunit_kzalloc(test, sizeof(*b), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, b);
	KUNIT_ASSERT_EQ(test, 0, kunit_add_action_or_reset(test, bench_uc_release, b));
	b->parent = bench_uc_ns(test, &init_user_ns);
	for (k = 0; k < cpus; k++) {
		b->child[k] = bench_uc_ns(test, b->parent);
		b->nr_children++;
	}
	bench_print_machine(test);

	for (k = 1; k != UINT_MAX; k = bench_next_pow2(k, cpus)) {
		bench_uc_point(test, b, BENCH_UC_SAME, k, k);
		if (k != cpus)
			bench_uc_point(test, b, BENCH_UC_SAME, k, cpus);
	}
	KUNIT_EXPECT_EQ_MSG(test, atomic_long_read(&b->refused), 0L,
			    "charges refused far below the limit");
	if (cpus >= 2)
		bench_uc_point(test, b, BENCH_UC_CROSS, 1, cpus & ~1U);
	bench_uc_point(test, b, BENCH_UC_LIMIT, 1, 1);
	if (cpus >= 2)
		bench_uc_point(test, b, BENCH_UC_LIMIT, cpus, cpus);
}

static struct kunit_case cgroup_bench_cases[] = {
	KUNIT_CASE_SLOW(bench_rstat_read),
	KUNIT_CASE_SLOW(bench_ucount_charge),
	{}
};

static struct kunit_suite cgroup_bench_suite = {
	.name = "cgroup_bench",
	.suite_init = cgk_suite_init,
	.suite_exit = cgk_suite_exit,
	.init = cgk_case_init,
	.exit = cgk_case_exit,
	.test_cases = cgroup_bench_cases,
};

/* ---- migration latency: global vs per-threadgroup attach lock ------------- */

/* The churn must be forking this long before the first migration is timed. */
#define BENCH_MG_WARMUP_MS	50
#define BENCH_MG_WARMUP_MAX_MS	2000

struct bench_mg {
	struct cgroup *cgrp[2];
	struct cgk_herd *victim;
	struct cgk_herd *churn;
	unsigned int where;	/* cgrp[] the victim is in */
	u64 *lat;
};

static void bench_mg_stop_churn(struct bench_mg *b)
{
	cgk_herd_stop(b->churn, 10000);
	b->churn = NULL;
}

static void bench_mg_release(void *arg)
{
	struct bench_mg *b = arg;
	int i;

	bench_mg_stop_churn(b);
	if (b->victim && b->victim->victims[0].task)
		cgroup_procs_write_for_test(&cgrp_dfl_root.cgrp,
					    b->victim->victims[0].task);
	cgk_herd_stop(b->victim, 10000);
	for (i = 0; i < ARRAY_SIZE(b->cgrp); i++) {
		if (!b->cgrp[i])
			continue;
		cgroup_destroy_for_test(b->cgrp[i]);
		cgroup_put(b->cgrp[i]);
	}
	kvfree(b->lat);
}

static int bench_u64_cmp(const void *a, const void *b)
{
	u64 x = *(const u64 *)a, y = *(const u64 *)b;

	return x < y ? -1 : x > y;
}

/* The latency below which @permille of the sorted @lat fall. */
static u64 bench_pct(const u64 *lat, unsigned int n, unsigned int permille)
{
	return lat[(u64)(n - 1) * permille / 1000];
}

/* Every churn thread has forked at least once. */
static bool bench_mg_churning(void *arg)
{
	struct cgk_herd *churn = arg;
	unsigned int i;

	for (i = 0; i < churn->nr; i++) {
		if (!READ_ONCE(churn->victims[i].forks))
			return false;
	}
	return true;
}

static void bench_mg_point(struct kunit *test, struct bench_mg *b,
			   const char *mode, unsigned int churn, unsigned int rep)
{
	struct task_struct *victim = b->victim->victims[0].task;
	u64 start, end, bound_ns = (u64)cgk_duration_ms() * NSEC_PER_MSEC;
	unsigned long forks = 0;
	unsigned int i, n;
	int ret;

	if (churn) {
		b->churn = cgk_herd_alloc(test, churn, CGK_VICTIM_FORK);
		KUNIT_ASSERT_NOT_NULL(test, b->churn);
		for (i = 0; i < churn; i++)
			KUNIT_ASSERT_FALSE(test, IS_ERR(cgk_herd_start(b->churn, i,
								       "cgk-churn")));
		/* Timed only once every churn thread forks, and for a while. */
		if (!cgk_wait_for(bench_mg_churning, b->churn, BENCH_MG_WARMUP_MAX_MS))
			kunit_info(test, "churn %u: not every thread forked in %u ms\n",
				   churn, BENCH_MG_WARMUP_MAX_MS);
		msleep(BENCH_MG_WARMUP_MS);
		forks = cgk_herd_forks(b->churn);
	}
	start = ktime_get_ns();
	for (n = 0; n < bench_migrations; n++) {
		u64 t = ktime_get_ns();

		if (t - start >= bound_ns)
			break;
		b->where ^= 1;
		ret = cgroup_procs_write_for_test(b->cgrp[b->where], victim);
		b->lat[n] = ktime_get_ns() - t;
		if (ret) {
			KUNIT_FAIL(test, "migration %u (%s, churn %u): %d", n, mode,
				   churn, ret);
			break;
		}
		cond_resched();
	}
	end = ktime_get_ns();
	if (b->churn)
		forks = cgk_herd_forks(b->churn) - forks;
	bench_mg_stop_churn(b);
	if (!n)
		return;

	sort(b->lat, n, sizeof(*b->lat), bench_u64_cmp, NULL);
	kunit_info(test, "metric: migrate_latency mode=%s churn=%u rep=%u ns=%llu migrations=%u forks=%lu p50_ns=%llu p90_ns=%llu p99_ns=%llu p999_ns=%llu max_ns=%llu\n",
		   mode, churn, rep, end - start, n, forks,
		   bench_pct(b->lat, n, 500), bench_pct(b->lat, n, 900),
		   bench_pct(b->lat, n, 990), bench_pct(b->lat, n, 999),
		   b->lat[n - 1]);
}

static void bench_mg_mode(struct kunit *test, struct bench_mg *b, const char *mode)
{
	unsigned int cpus = bench_cpus();
	unsigned int churns[] = { 0, 1, max(cpus - 1, 1U), 2 * cpus };
	unsigned int c, rep;

	for (c = 0; c < ARRAY_SIZE(churns); c++) {
		if (c && churns[c] == churns[c - 1])
			continue;
		for (rep = 0; rep < bench_reps; rep++)
			bench_mg_point(test, b, mode, churns[c], rep);
	}
}

static void bench_migrate_latency(struct kunit *test)
{
	bool dynmods = READ_ONCE(cgroup_enable_per_threadgroup_rwsem);
	struct bench_mg *b;
	int i;

	b = kunit_kzalloc(test, sizeof(*b), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, b);
	b->lat = kvmalloc_array(bench_migrations, sizeof(*b->lat), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, b->lat);
	KUNIT_ASSERT_EQ(test, 0, kunit_add_action_or_reset(test, bench_mg_release, b));

	for (i = 0; i < ARRAY_SIZE(b->cgrp); i++) {
		char name[24];

		snprintf(name, sizeof(name), "cgk-bench-mg%d", i);
		b->cgrp[i] = cgroup_create_for_test(&cgrp_dfl_root.cgrp, name);
		if (IS_ERR(b->cgrp[i])) {
			long err = PTR_ERR(b->cgrp[i]);

			b->cgrp[i] = NULL;
			KUNIT_FAIL_AND_ABORT(test, "creating %s: %ld", name, err);
		}
	}
	b->victim = cgk_herd_alloc(test, 1, 0);
	KUNIT_ASSERT_NOT_NULL(test, b->victim);
	KUNIT_ASSERT_FALSE(test, IS_ERR(cgk_herd_start(b->victim, 0, "cgk-bench-victim")));
	bench_print_machine(test);

	if (dynmods)
		kunit_info(test, "favordynmods already on: no global-lock measurements\n");
	else
		bench_mg_mode(test, b, "global");
	cgroup_favor_dynmods_for_test();
	bench_mg_mode(test, b, "dynmods");
}

static struct kunit_case cgroup_bench_migrate_cases[] = {
	KUNIT_CASE_SLOW(bench_migrate_latency),
	{}
};

static struct kunit_suite cgroup_bench_migrate_suite = {
	.name = "cgroup_bench_migrate",
	.suite_init = cgk_suite_init,
	.suite_exit = cgk_suite_exit,
	.init = cgk_case_init,
	.exit = cgk_case_exit,
	.test_cases = cgroup_bench_migrate_cases,
};

kunit_test_suites(&cgroup_bench_suite, &cgroup_bench_migrate_suite);
