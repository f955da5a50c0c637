// SPDX-License-Identifier: GPL-2.0-only
/*
 * cgroup_bench, cgroup_bench_migrate: benchmarks of the paths the series
 * changes, for `make bench`, which boots the kernel without and with the
 * series and compares what these cases print. Built only with
 * CONFIG_CGROUP_KUNIT_BENCH; they check nothing but that the benchmark ran.
 *
 * Every measurement is printed as one KTAP diagnostic of the form
 *   metric: <benchmark> <key>=<value> ...
 * with the raw counts and the elapsed time in ns, so that the driver
 * computes the rates and compares the two kernels.
 *
 *  - bench_rstat_read: R readers read cpu.stat of one cgroup (through
 *    cgroup_base_stat_read(), what cpu.stat shows) while U updaters charge
 *    cputime to its children, R = 1, 2, 4 ... up to the CPUs (and 0, for
 *    the updaters' own cost), U = 0, 1 and half the CPUs: reads and
 *    updates done in the time bound.
 *  - bench_ucount_charge: T threads in K sibling user namespaces under one
 *    parent charge and uncharge a pending signal the way signal delivery
 *    does (inc_rlimit_get_ucounts()/dec_rlimit_put_ucounts()), K = 1, 2, 4
 *    ... up to the CPUs, with one thread per namespace and with one thread
 *    per CPU: charges done in the time bound.
 *  - bench_migrate_latency: one thread moves a thread group back and forth
 *    between two cgroups through the cgroup.procs write path while F churn
 *    threads fork children that exit, in other thread groups, F = 0, 1,
 *    CPUs - 1 and twice the CPUs; first with the global attach lock, then,
 *    after switching the default hierarchy to favordynmods (one way), with
 *    the per-threadgroup lock: latency percentiles of the migrations and
 *    the churn's fork rate. It is a suite of its own, run after the others,
 *    because favordynmods cannot be switched off again.
 *
 * Each point is measured bench_reps times (module parameter, default 5) for
 * duration_ms each (default 1000).
 */

#include <linux/cgroup.h>
#include <linux/cpumask.h>
#include <linux/kernel_stat.h>
#include <linux/moduleparam.h>
#include <linux/slab.h>
#include <linux/sort.h>
#include <linux/user_namespace.h>

#include "harness.h"

static unsigned int bench_reps = 5;
static unsigned int bench_migrations = 300;

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
	return bench_uint_set(val, kp, 10, 100000);
}

static const struct kernel_param_ops bench_migrations_ops = {
	.set = bench_migrations_set,
	.get = param_get_uint,
};
module_param_cb(bench_migrations, &bench_migrations_ops, &bench_migrations, 0444);
MODULE_PARM_DESC(bench_migrations,
		 "migrations per point of bench_migrate_latency, 10..100000 (default 300)");

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

static u64 bench_gang_run(struct cgk_gang *gang)
{
	u64 start = ktime_get_ns();

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

#define BENCH_RS_LEAVES		4

struct bench_rs {
	struct cgroup *top;
	struct cgroup *leaf[BENCH_RS_LEAVES];
	unsigned int nr_readers;
};

static void bench_rs_step(struct cgk_worker *w)
{
	struct bench_rs *b = w->gang->data;

	if (w->index < b->nr_readers) {
		struct cgroup_base_stat shown;

		cgroup_base_stat_read(b->top, &shown, NULL);
	} else {
		struct cgroup *leaf = b->leaf[w->index % BENCH_RS_LEAVES];

		/* What the scheduler charges: run time, then user time. */
		__cgroup_account_cputime(leaf, 1000);
		__cgroup_account_cputime_field(leaf, CPUTIME_USER, 1000);
	}
}

static const struct cgk_gang_ops bench_rs_ops = {
	.step = bench_rs_step,
};

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
}

static void bench_rstat_read(struct kunit *test)
{
	unsigned int cpus = bench_cpus(), r, u, rep;
	unsigned int updaters[3] = { 0, 1, max(cpus / 2, 1U) };
	struct bench_rs *b;
	int i;

	b = kunit_kzalloc(test, sizeof(*b), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, b);
	KUNIT_ASSERT_EQ(test, 0, kunit_add_action_or_reset(test, bench_rs_release, b));
	b->top = cgroup_create_for_test(&cgrp_dfl_root.cgrp, "cgk-bench-rstat");
	if (IS_ERR(b->top)) {
		long err = PTR_ERR(b->top);

		b->top = NULL;
		KUNIT_FAIL_AND_ABORT(test, "creating the benchmark cgroup: %ld", err);
	}
	for (i = 0; i < BENCH_RS_LEAVES; i++) {
		char name[16];

		snprintf(name, sizeof(name), "leaf%d", i);
		b->leaf[i] = cgroup_create_for_test(b->top, name);
		if (IS_ERR(b->leaf[i])) {
			long err = PTR_ERR(b->leaf[i]);

			b->leaf[i] = NULL;
			KUNIT_FAIL_AND_ABORT(test, "creating %s: %ld", name, err);
		}
	}
	bench_print_machine(test);

	for (u = 0; u < ARRAY_SIZE(updaters); u++) {
		if (u && updaters[u] == updaters[u - 1])
			continue;
		/* readers=0: what the updaters alone do, for their cost */
		for (r = updaters[u] ? 0 : 1; r != UINT_MAX;
		     r = r ? bench_next_pow2(r, cpus) : 1) {
			for (rep = 0; rep < bench_reps; rep++) {
				struct cgk_gang *gang;
				u64 ns;

				b->nr_readers = r;
				gang = cgk_gang_create(test, r + updaters[u],
						       &bench_rs_ops, b);
				KUNIT_ASSERT_NOT_NULL(test, gang);
				ns = bench_gang_run(gang);
				kunit_info(test, "metric: rstat_read readers=%u updaters=%u rep=%u ns=%llu reads=%lu updates=%lu\n",
					   r, updaters[u], rep, ns,
					   bench_iterations(gang, 0, r),
					   bench_iterations(gang, r, gang->nr));
			}
		}
	}
}

/* ---- ucount: pending-signal charges in sibling namespaces ------------------ */

#define BENCH_UC_OWNER		3142000
#define BENCH_UC_UID		3142001
#define BENCH_UC_SIGPENDING	BIT(20)

struct bench_uc {
	struct user_namespace *parent;
	struct user_namespace *child[CGK_MAX_THREADS];
	unsigned int nr_children;
	atomic_long_t refused;
};

static void bench_uc_step(struct cgk_worker *w)
{
	struct bench_uc *b = w->gang->data;
	struct ucounts *uc = w->priv;

	if (cgk_sigpending_charge(uc, false, LONG_MAX))
		dec_rlimit_put_ucounts(uc, UCOUNT_RLIMIT_SIGPENDING);
	else
		atomic_long_inc(&b->refused);
}

static const struct cgk_gang_ops bench_uc_ops = {
	.step = bench_uc_step,
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

/* One point: @threads threads spread over the first @nr_ns namespaces. */
static void bench_uc_point(struct kunit *test, struct bench_uc *b,
			   unsigned int nr_ns, unsigned int threads)
{
	unsigned int rep, i;

	for (rep = 0; rep < bench_reps; rep++) {
		struct cgk_gang *gang;
		u64 ns;

		gang = cgk_gang_create(test, threads, &bench_uc_ops, b);
		KUNIT_ASSERT_NOT_NULL(test, gang);
		for (i = 0; i < threads; i++) {
			gang->workers[i].priv = alloc_ucounts(b->child[i % nr_ns],
							      KUIDT_INIT(BENCH_UC_UID));
			KUNIT_ASSERT_NOT_NULL(test, gang->workers[i].priv);
		}
		ns = bench_gang_run(gang);
		for (i = 0; i < threads; i++)
			put_ucounts(gang->workers[i].priv);
		kunit_info(test, "metric: ucount_charge namespaces=%u threads=%u rep=%u ns=%llu charges=%lu\n",
			   nr_ns, threads, rep, ns, cgk_gang_iterations(gang));
	}
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
		bench_uc_point(test, b, k, k);
		if (k != cpus)
			bench_uc_point(test, b, k, cpus);
	}
	KUNIT_EXPECT_EQ_MSG(test, atomic_long_read(&b->refused), 0L,
			    "charges refused far below the limit");
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

static void bench_mg_point(struct kunit *test, struct bench_mg *b,
			   const char *mode, unsigned int churn, unsigned int rep)
{
	struct task_struct *victim = b->victim->victims[0].task;
	u64 start, end, limit_ns;
	unsigned long forks = 0;
	unsigned int i, n;
	int ret;

	if (churn) {
		b->churn = cgk_herd_alloc(test, churn, CGK_VICTIM_FORK);
		KUNIT_ASSERT_NOT_NULL(test, b->churn);
		for (i = 0; i < churn; i++)
			KUNIT_ASSERT_FALSE(test, IS_ERR(cgk_herd_start(b->churn, i,
								       "cgk-churn")));
	}
	/* A time bound too: a migration under churn may wait long. */
	limit_ns = 5ULL * cgk_duration_ms() * NSEC_PER_MSEC;
	if (b->churn)
		forks = cgk_herd_forks(b->churn);
	start = ktime_get_ns();
	for (n = 0; n < bench_migrations; n++) {
		u64 t = ktime_get_ns();

		b->where ^= 1;
		ret = cgroup_procs_write_for_test(b->cgrp[b->where], victim);
		b->lat[n] = ktime_get_ns() - t;
		if (ret) {
			KUNIT_FAIL(test, "migration %u (%s, churn %u): %d", n, mode,
				   churn, ret);
			break;
		}
		if (b->lat[n] + t - start > limit_ns) {
			n++;
			break;
		}
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
