// SPDX-License-Identifier: GPL-2.0-only
/*
 * cgroup_rstat_reader: the cpu.stat reader, racing the charges and flushes
 * that write what it reads and the removal of the cgroups it reads.
 *
 * The cases hold for both ways the kernel keeps the base stats. Where
 * cpu.stat is flushed, the reader flushes what charges queued, sharing
 * flushes with the other readers, and copies the totals without
 * rstat_base_lock (a seqcount snapshot). Where the base stats are per-cpu
 * subtree totals, a charge adds to the per-cpu totals of every level but
 * the root, and the reader sums them over the possible CPUs, with no lock
 * and no flush; flushing a self css then runs only the BPF flush programs.
 * Either way cpu.stat adjusts the user and system time it shows with
 * cputime_adjust(), against the cgroup's prev_cputime.
 *
 * What races and what is checked:
 *  - reader_whole_counters: on each of a few CPUs, an updater bound there
 *    charges a leaf of its own user, system and total time, each in its own
 *    charge and each by a delta of its own above 2^32, and a flusher bound
 *    there queues that leaf's self css, as a BPF program does, and flushes
 *    it. Every total of a field, the leaves' and the top's, is then a
 *    multiple of that field's delta, and never goes backwards. Readers take
 *    snapshots (cgroup_base_stat_snapshot(): no flush) of the leaves and the
 *    top in a tight loop and check both on every field of every read: a
 *    64-bit counter loaded in two halves from two different values is not
 *    such a multiple. Nothing else charges or flushes these cgroups. Fields
 *    of one snapshot are not checked against each other: a sum taken while
 *    charges run may count a charge in one field and not yet in another.
 *  - reader_fresh: updaters charge random leaves under a top cgroup on any
 *    CPU and, once a charge returned, add it to a ledger; readers read the
 *    ledger, then cpu.stat of the top or a leaf through
 *    cgroup_base_stat_read(): what they see must include everything the
 *    ledger had (a reader never returns data older than what was charged
 *    before it started), and never go backwards; flushers queue and flush
 *    random cgroups' self csses meanwhile, so readers often arrive while a
 *    flush runs.
 *  - reader_fresh_sparse: the same, with updaters that charge now and then
 *    (sleeping between two charges) and no flushers but the readers, so
 *    that most of a read's cpus have nothing new: where cpu.stat is flushed,
 *    a reader that skips such a cpu without the lock must not skip one whose
 *    flush, by another reader, has taken updates off its list and not yet
 *    written them; where it sums per-cpu totals, sparse charges on many
 *    cpus must all be in the sum.
 *  - reader_fresh_cpus: the same as reader_fresh, with the workers moved
 *    between CPUs all the time and, where the kernel has CPU hotplug, CPUs
 *    going offline with charges made there and coming back: a read still
 *    sees everything charged before it began, on whichever cpu (a flush
 *    walks every possible CPU, a sum adds up every possible CPU).
 *  - reader_fresh_removal: the same as reader_fresh, while worker 0 keeps creating leaves,
 *    letting updaters charge them and readers read them, and removing them
 *    while readers still hold them; once everything is freed, the top's
 *    totals equal what was charged below it, exactly.
 *  - reader_file: the same as reader_fresh, with updaters charging user
 *    and system time as well, and readers reading cpu.stat through the
 *    file, as userspace does, of the top, a leaf or the root cgroup (whose
 *    stats come from the system-wide CPU stats instead). Each read must
 *    show at least what was charged before it began, user_usec plus
 *    system_usec must make usage_usec (exact in ns, so within 1 us once
 *    each is cut to us), and no field may go backwards between two reads of
 *    a reader.
 *  - reader_one_snapshot: updaters, each bound to a CPU of its own, charge
 *    total and nice time to the leaves while readers read cpu.stat of the
 *    top through cgroup_base_stat_read(), all at once: readers of one
 *    cgroup race for its prev_cputime. Every field a read shows must come
 *    from one snapshot (one copy, or one set of sums): the usage shown is
 *    the snapshot's, user + system makes it, and the nice time is the same
 *    snapshot's. A reader that lost the race for prev_cputime to a reader
 *    with a newer snapshot must take a newer snapshot itself, not show the
 *    other's user and system time beside its own nice time.
 * After each case, cgroups and css_sets are back to their baseline. The
 * oracle (harness.c) fails a case on any lockdep, KCSAN, KASAN or WARNING
 * report.
 */

#include <linux/cgroup.h>
#include <linux/cgroup_kunit.h>
#include <linux/cpumask.h>
#include <linux/delay.h>
#include <linux/file.h>
#include <linux/fs.h>
#include <linux/kernel_stat.h>
#include <linux/math64.h>
#include <linux/mount.h>
#include <linux/sched.h>
#include <linux/slab.h>
#include <linux/spinlock.h>

#include "harness.h"

#define RR_NR_LEAVES		4
#define RR_MAX_DELTA		1000	/* ns per charge */
#define RR_SETTLE_TIMEOUT_MS	10000

enum rr_kind { RR_WHOLE, RR_FRESH, RR_FRESH_SPARSE, RR_FRESH_CPUS, RR_FRESH_REMOVAL,
	       RR_FILE, RR_ONE_SNAPSHOT };

/* A cgroup the case reads, with what was charged to it and below it. */
struct rr_node {
	struct cgroup *cgrp;
	atomic64_t charged;		/* usage, ns */
};

/* The leaf being created and removed by worker 0, for others to use. */
struct rr_eph {
	spinlock_t lock;		/* guards cgrp */
	struct cgroup *cgrp;
	atomic64_t charged;		/* to the current one */
};

struct rr_case {
	struct kunit *test;
	enum rr_kind kind;
	/* RR_WHOLE: leaf i is charged and flushed on CPU cpu[i] only */
	unsigned int nr_writers;
	unsigned int cpu[RR_NR_LEAVES];
	struct rr_node top;
	struct rr_node leaf[RR_NR_LEAVES];
	struct rr_eph eph;
	unsigned int eph_gen;
	atomic64_t removed_charged;	/* to removed leaves: in top's total */
	atomic_long_t reads, flushes, removed;
	/* RR_FILE: a mount of the default hierarchy, and the top's name */
	struct vfsmount *mnt;
	char name[32];
	struct cgk_baseline base;
};

/* What one reader saw last: the top, the leaves, the root (RR_FILE). */
struct rr_seen {
	u64 usage[2 + RR_NR_LEAVES];
	u64 user[2 + RR_NR_LEAVES];
	u64 system[2 + RR_NR_LEAVES];
};

/* ---- roles -------------------------------------------------------------- */

enum rr_role { RR_UPDATER, RR_FLUSHER, RR_READER, RR_CHURNER };

static enum rr_role rr_role(struct rr_case *c, unsigned int index)
{
	if (c->kind == RR_WHOLE)
		return index >= 2 * c->nr_writers ? RR_READER :
		       index & 1 ? RR_FLUSHER : RR_UPDATER;
	if (c->kind == RR_FRESH_REMOVAL && index == 0)
		return RR_CHURNER;
	if (c->kind == RR_ONE_SNAPSHOT)
		return index < c->nr_writers ? RR_UPDATER : RR_READER;
	if (c->kind == RR_FRESH_SPARSE)
		return index % 4 ? RR_READER : RR_UPDATER;
	switch (index % 4) {
	case 0:
		return RR_UPDATER;
	case 1:
		return RR_FLUSHER;
	default:
		return RR_READER;
	}
}

/* ---- whole counters ----------------------------------------------------- */

/*
 * Each field's own delta, above 2^32 and odd, so that no total of one
 * charge count k has the low half of another count's total: a load that
 * takes the halves of a counter from two of its values (below 2^32 charges
 * apart) is not a multiple of the delta.
 */
#define RR_WHOLE_USER		(BIT_ULL(32) + 1)
#define RR_WHOLE_SYSTEM		(BIT_ULL(33) + 3)
#define RR_WHOLE_USAGE		(BIT_ULL(34) + 5)
#define RR_WHOLE_READS		64	/* snapshots per step of a reader */
/* Charges per updater: the top's totals stay below 2^63, four leaves' worth. */
#define RR_WHOLE_MAX_CHARGES	BIT(26)

/* One field a charge, in turn; once the totals are big enough, only wait. */
static void rr_whole_update(struct cgk_worker *w, struct rr_case *c)
{
	struct cgroup *leaf = c->leaf[w->index / 2].cgrp;

	if (w->iterations >= RR_WHOLE_MAX_CHARGES) {
		usleep_range(1000, 2000);
		return;
	}
	switch (w->iterations % 3) {
	case 0:
		__cgroup_account_cputime_field(leaf, CPUTIME_USER, RR_WHOLE_USER);
		break;
	case 1:
		__cgroup_account_cputime_field(leaf, CPUTIME_SYSTEM, RR_WHOLE_SYSTEM);
		break;
	default:
		__cgroup_account_cputime(leaf, RR_WHOLE_USAGE);
		break;
	}
}

/*
 * Queue the leaf of this CPU as a BPF program does, and flush it: where
 * cpu.stat is flushed, that writes the leaf's and the top's totals while
 * readers copy them.
 */
static void rr_whole_flush(struct cgk_worker *w, struct rr_case *c)
{
	struct cgroup *leaf = c->leaf[w->index / 2].cgrp;

	preempt_disable();
	css_rstat_updated(&leaf->self, smp_processor_id());
	preempt_enable();
	css_rstat_flush(&leaf->self);
	atomic_long_inc(&c->flushes);
}

/* One field of a snapshot: a multiple of its delta, never below the last. */
static bool rr_whole_field(struct cgk_worker *w, const char *what, const char *field,
			   u64 got, u64 delta, u64 *last)
{
	u64 rem;

	div64_u64_rem(got, delta, &rem);
	if (rem) {
		cgk_fail(w, "%s: torn %s: %llu is no multiple of its charge %llu",
			 what, field, got, delta);
		return false;
	}
	if (got < *last) {
		cgk_fail(w, "%s: %s went backwards: %llu after %llu",
			 what, field, got, *last);
		return false;
	}
	*last = got;
	return true;
}

static bool rr_whole_check(struct cgk_worker *w, const char *what,
			   unsigned int slot, struct cgroup *cgrp)
{
	struct rr_seen *seen = w->priv;
	struct cgroup_base_stat s;

	cgroup_base_stat_snapshot(cgrp, &s);
	return rr_whole_field(w, what, "user", s.cputime.utime, RR_WHOLE_USER,
			      &seen->user[slot]) &&
	       rr_whole_field(w, what, "system", s.cputime.stime, RR_WHOLE_SYSTEM,
			      &seen->system[slot]) &&
	       rr_whole_field(w, what, "usage", s.cputime.sum_exec_runtime,
			      RR_WHOLE_USAGE, &seen->usage[slot]);
}

static void rr_whole_read(struct cgk_worker *w, struct rr_case *c)
{
	unsigned int k;
	char what[16];

	for (k = 0; k < RR_WHOLE_READS; k++) {
		unsigned int i = k % c->nr_writers;

		snprintf(what, sizeof(what), "leaf%u", i);
		if (!rr_whole_check(w, what, 1 + i, c->leaf[i].cgrp) ||
		    !rr_whole_check(w, "top", 0, c->top.cgrp))
			break;
	}
	atomic_long_add(k, &c->reads);
}

/* ---- fresh reads -------------------------------------------------------- */

/* Charge a random leaf (sometimes the ephemeral one), then the ledger. */
static void rr_fresh_update(struct cgk_worker *w, struct rr_case *c)
{
	u64 d = 1 + cgk_rand(w, RR_MAX_DELTA);
	bool charged = false;

	if (c->kind == RR_FRESH_REMOVAL && !cgk_rand(w, 4)) {
		/* Under the lock: the ledger is that of this leaf. */
		spin_lock(&c->eph.lock);
		if (c->eph.cgrp) {
			__cgroup_account_cputime(c->eph.cgrp, d);
			atomic64_add_return(d, &c->eph.charged);
			charged = true;
		}
		spin_unlock(&c->eph.lock);
	}
	if (!charged) {
		struct rr_node *n = &c->leaf[cgk_rand(w, RR_NR_LEAVES)];

		if (c->kind == RR_FILE) {
			/* cpu.stat splits usage in this ratio, less what rounds */
			__cgroup_account_cputime_field(n->cgrp, CPUTIME_USER, d);
			__cgroup_account_cputime_field(n->cgrp, CPUTIME_SYSTEM, 2 * d);
			d *= 3;
		}
		__cgroup_account_cputime(n->cgrp, d);
		/* value-returning: ordered after the charge */
		atomic64_add_return(d, &n->charged);
	}
	atomic64_add_return(d, &c->top.charged);
}

/*
 * Now and then, a charge to every leaf on this cpu at once: a cpu with
 * nothing new most of the time. Where cpu.stat is flushed, when it has, a
 * whole tree for the next reader to flush while other readers look at the
 * cpu; where it sums per-cpu totals, counters that must be in the next sum.
 */
static void rr_sparse_update(struct cgk_worker *w, struct rr_case *c)
{
	unsigned int i;

	for (i = 0; i < RR_NR_LEAVES; i++) {
		struct rr_node *n = &c->leaf[i];
		u64 d = 1 + cgk_rand(w, RR_MAX_DELTA);

		__cgroup_account_cputime(n->cgrp, d);
		atomic64_add_return(d, &n->charged);
		atomic64_add_return(d, &c->top.charged);
	}
	usleep_range(5, 20);
}

/* Queue a random cgroup's self css as BPF does, flush a random one. */
static void rr_fresh_flush(struct cgk_worker *w, struct rr_case *c)
{
	unsigned int i = cgk_rand(w, 1 + RR_NR_LEAVES);
	unsigned int q = cgk_rand(w, 1 + RR_NR_LEAVES);
	struct rr_node *n = i ? &c->leaf[i - 1] : &c->top;
	struct rr_node *m = q ? &c->leaf[q - 1] : &c->top;

	preempt_disable();
	css_rstat_updated(&m->cgrp->self, smp_processor_id());
	preempt_enable();
	css_rstat_flush(&n->cgrp->self);
	atomic_long_inc(&c->flushes);
}

static void rr_fresh_check(struct cgk_worker *w, const char *what, u64 *last,
			   u64 before, struct cgroup *cgrp)
{
	struct cgroup_base_stat shown, raw;

	cgroup_base_stat_read(cgrp, &shown, &raw);
	if (raw.cputime.sum_exec_runtime < before)
		cgk_fail(w, "%s: cpu.stat usage %llu, but %llu was charged before the read began",
			 what, raw.cputime.sum_exec_runtime, before);
	else if (last && raw.cputime.sum_exec_runtime < *last)
		cgk_fail(w, "%s: cpu.stat usage went backwards: %llu after %llu",
			 what, raw.cputime.sum_exec_runtime, *last);
	if (last)
		*last = raw.cputime.sum_exec_runtime;
}

static void rr_fresh_read(struct cgk_worker *w, struct rr_case *c)
{
	struct rr_seen *seen = w->priv;
	unsigned int i = cgk_rand(w, 2 + RR_NR_LEAVES);
	struct cgroup *eph = NULL;
	char what[16];
	u64 before;

	if (i == 1 + RR_NR_LEAVES) {
		/* The ephemeral leaf, while it lives and after its removal. */
		spin_lock(&c->eph.lock);
		eph = c->eph.cgrp;
		if (eph) {
			cgroup_get(eph);
			before = atomic64_read_acquire(&c->eph.charged);
		}
		spin_unlock(&c->eph.lock);
		if (!eph)
			return;
		rr_fresh_check(w, "removed leaf", NULL, before, eph);
		cgroup_put(eph);
	} else {
		struct rr_node *n = i ? &c->leaf[i - 1] : &c->top;

		before = atomic64_read_acquire(&n->charged);
		snprintf(what, sizeof(what), i ? "leaf%u" : "top", i - 1);
		rr_fresh_check(w, what, &seen->usage[i], before, n->cgrp);
	}
	atomic_long_inc(&c->reads);
}

/* ---- one snapshot per read ---------------------------------------------- */

/* Total time, then nice time (which cpu.stat also counts as user time). */
static void rr_one_update(struct cgk_worker *w, struct rr_case *c)
{
	struct cgroup *leaf = c->leaf[w->index % RR_NR_LEAVES].cgrp;
	u64 d = 1 + cgk_rand(w, RR_MAX_DELTA);

	__cgroup_account_cputime(leaf, d);
	__cgroup_account_cputime_field(leaf, CPUTIME_NICE, d);
	atomic64_add_return(d, &c->top.charged);
}

static void rr_one_read(struct cgk_worker *w, struct rr_case *c)
{
	struct cgroup_base_stat shown, raw;
	u64 usage, user, system;

	cgroup_base_stat_read(c->top.cgrp, &shown, &raw);
	usage = shown.cputime.sum_exec_runtime;
	user = shown.cputime.utime;
	system = shown.cputime.stime;
	if (usage != raw.cputime.sum_exec_runtime || shown.ntime != raw.ntime)
		cgk_fail(w,
			 "top: cpu.stat shows usage %llu and nice %llu of a snapshot with usage %llu and nice %llu: fields of two snapshots",
			 usage, shown.ntime, raw.cputime.sum_exec_runtime, raw.ntime);
	else if (user + system != usage)
		cgk_fail(w, "top: cpu.stat shows user %llu + system %llu for usage %llu",
			 user, system, usage);
	else
		atomic_long_inc(&c->reads);
}

/* ---- reads through the file --------------------------------------------- */

static bool rr_file_check(struct cgk_worker *w, const char *what, unsigned int slot,
			  u64 before, const char *path)
{
	struct rr_case *c = w->gang->data;
	struct rr_seen *seen = w->priv;
	u64 usage, user, system;
	char buf[256];
	ssize_t ret;

	ret = cgk_file_read(c->mnt, path, buf, sizeof(buf));
	if (ret < 0) {
		cgk_fail(w, "%s: reading %s: %zd", what, path, ret);
		return false;
	}
	if (sscanf(buf, "usage_usec %llu user_usec %llu system_usec %llu",
		   &usage, &user, &system) != 3) {
		cgk_fail(w, "%s: %s does not start with usage, user and system: \"%.60s\"",
			 what, path, buf);
		return false;
	}
	if (usage < div_u64(before, NSEC_PER_USEC)) {
		cgk_fail(w,
			 "%s: cpu.stat shows usage_usec %llu, but %llu ns was charged before the read began",
			 what, usage, before);
		return false;
	}
	if (user + system > usage || user + system + 1 < usage) {
		cgk_fail(w,
			 "%s: cpu.stat shows user_usec %llu + system_usec %llu for usage_usec %llu",
			 what, user, system, usage);
		return false;
	}
	if (usage < seen->usage[slot] || user < seen->user[slot] ||
	    system < seen->system[slot]) {
		cgk_fail(w,
			 "%s: cpu.stat went backwards: usage/user/system_usec %llu/%llu/%llu after %llu/%llu/%llu",
			 what, usage, user, system, seen->usage[slot],
			 seen->user[slot], seen->system[slot]);
		return false;
	}
	seen->usage[slot] = usage;
	seen->user[slot] = user;
	seen->system[slot] = system;
	return true;
}

static void rr_file_read(struct cgk_worker *w, struct rr_case *c)
{
	unsigned int i = cgk_rand(w, 2 + RR_NR_LEAVES);
	char what[16], path[64];
	u64 before = 0;

	if (i == 1 + RR_NR_LEAVES) {
		/* The root's stats are the CPUs', nothing the ledger has. */
		strscpy(what, "root");
		strscpy(path, "cpu.stat");
	} else if (i) {
		before = atomic64_read_acquire(&c->leaf[i - 1].charged);
		snprintf(what, sizeof(what), "leaf%u", i - 1);
		snprintf(path, sizeof(path), "%s/leaf%u/cpu.stat", c->name, i - 1);
	} else {
		before = atomic64_read_acquire(&c->top.charged);
		strscpy(what, "top");
		snprintf(path, sizeof(path), "%s/cpu.stat", c->name);
	}
	if (rr_file_check(w, what, i, before, path))
		atomic_long_inc(&c->reads);
}

/* Create a leaf, let others charge and read it, remove it while they do. */
static void rr_churn(struct cgk_worker *w, struct rr_case *c)
{
	struct cgroup *cgrp;
	char name[24];
	int ret;

	snprintf(name, sizeof(name), "eph%u", c->eph_gen++);
	cgrp = cgroup_create_for_test(c->top.cgrp, name);
	if (IS_ERR(cgrp)) {
		cgk_fail(w, "creating leaf %s: %pe", name, cgrp);
		return;
	}
	spin_lock(&c->eph.lock);
	atomic64_set(&c->eph.charged, 0);
	c->eph.cgrp = cgrp;
	spin_unlock(&c->eph.lock);

	usleep_range(500, 1000);
	ret = cgroup_destroy_for_test(cgrp);
	if (ret)
		cgk_fail(w, "removing leaf %s: %d", name, ret);
	else
		atomic_long_inc(&c->removed);
	/* Readers that hold it keep reading the removed leaf a little. */
	usleep_range(200, 400);

	spin_lock(&c->eph.lock);
	c->eph.cgrp = NULL;
	atomic64_add(atomic64_read(&c->eph.charged), &c->removed_charged);
	spin_unlock(&c->eph.lock);
	cgroup_put(cgrp);
}

static void rr_step(struct cgk_worker *w)
{
	struct rr_case *c = w->gang->data;
	enum rr_role role = rr_role(c, w->index);

	if (c->kind == RR_WHOLE) {
		/* Charges and flushes of a leaf on one CPU; readers anywhere. */
		if (!w->iterations && role != RR_READER)
			set_cpus_allowed_ptr(current, cpumask_of(c->cpu[w->index / 2]));
		if (role == RR_UPDATER)
			rr_whole_update(w, c);
		else if (role == RR_FLUSHER)
			rr_whole_flush(w, c);
		else
			rr_whole_read(w, c);
		return;
	}
	if (c->kind == RR_ONE_SNAPSHOT) {
		if (!w->iterations && role == RR_UPDATER)
			set_cpus_allowed_ptr(current, cpumask_of(c->cpu[w->index]));
		if (role == RR_UPDATER)
			rr_one_update(w, c);
		else
			rr_one_read(w, c);
		return;
	}
	switch (role) {
	case RR_UPDATER:
		if (c->kind == RR_FRESH_SPARSE) {
			rr_sparse_update(w, c);
			break;
		}
		rr_fresh_update(w, c);
		break;
	case RR_FLUSHER:
		rr_fresh_flush(w, c);
		break;
	case RR_READER:
		if (c->kind == RR_FILE)
			rr_file_read(w, c);
		else
			rr_fresh_read(w, c);
		break;
	case RR_CHURNER:
		rr_churn(w, c);
		break;
	}
}

static const struct cgk_gang_ops rr_gang_ops = {
	.step = rr_step,
};

/* ---- fixture ------------------------------------------------------------ */

static void rr_teardown(void *arg)
{
	struct rr_case *c = arg;
	int i, ret;

	for (i = RR_NR_LEAVES - 1; i >= -1; i--) {
		struct rr_node *n = i < 0 ? &c->top : &c->leaf[i];

		if (!n->cgrp)
			continue;
		ret = cgroup_destroy_for_test(n->cgrp);
		if (ret && ret != -ENODEV)
			KUNIT_FAIL(c->test, "removing a test cgroup: %d", ret);
		cgroup_put(n->cgrp);
		n->cgrp = NULL;
	}
	if (c->mnt) {
		/* the workers' last fput()s are deferred */
		flush_delayed_fput();
		kern_unmount(c->mnt);
		c->mnt = NULL;
	}
}

static bool rr_leaves_freed(void *arg)
{
	struct rr_case *c = arg;

	return atomic_read(&cgrp_dfl_root.nr_cgrps) ==
	       c->base.nr_cgrps + 1 + RR_NR_LEAVES;
}

static struct cgroup *rr_create(struct kunit *test, struct cgroup *parent,
				const char *name)
{
	struct cgroup *cgrp = cgroup_create_for_test(parent, name);

	if (IS_ERR(cgrp))
		KUNIT_FAIL_AND_ABORT(test, "creating %s: %ld", name, PTR_ERR(cgrp));
	return cgrp;
}

static struct rr_case *rr_setup(struct kunit *test, enum rr_kind kind)
{
	struct rr_case *c;
	char name[32];
	int i;

	c = kunit_kzalloc(test, sizeof(*c), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, c);
	c->test = test;
	c->kind = kind;
	spin_lock_init(&c->eph.lock);
	cgk_baseline_take(&c->base);
	KUNIT_ASSERT_EQ(test, 0, kunit_add_action_or_reset(test, rr_teardown, c));

	/* A unique name: a failed case may leave its top behind. */
	snprintf(c->name, sizeof(c->name), "cgk-rreader-%d-%d", kind, test->param_index);
	c->top.cgrp = rr_create(test, &cgrp_dfl_root.cgrp, c->name);
	for (i = 0; i < RR_NR_LEAVES; i++) {
		snprintf(name, sizeof(name), "leaf%d", i);
		c->leaf[i].cgrp = rr_create(test, c->top.cgrp, name);
	}
	if (kind == RR_FILE) {
		struct cgroup *root;
		struct vfsmount *mnt = cgroup_mount_for_test(NULL, NULL, &root);

		KUNIT_ASSERT_NOT_ERR_OR_NULL_MSG(test, mnt, "mounting the default hierarchy");
		c->mnt = mnt;
		KUNIT_ASSERT_PTR_EQ(test, root, &cgrp_dfl_root.cgrp);
	}
	return c;
}

/* Once all is quiet: the top's total is what was charged below it. */
static void rr_check_total(struct rr_case *c)
{
	struct cgroup_base_stat shown, raw;
	u64 want = atomic64_read(&c->top.charged);

	cgroup_base_stat_read(c->top.cgrp, &shown, &raw);
	KUNIT_EXPECT_EQ_MSG(c->test, raw.cputime.sum_exec_runtime, want,
			    "top: usage %llu, charged below it %llu (%llu of it to removed leaves)",
			    raw.cputime.sum_exec_runtime, want,
			    atomic64_read(&c->removed_charged));
}

static void rr_run(struct kunit *test, enum rr_kind kind)
{
	unsigned int i, nr = cgk_param_threads(test);
	struct cgk_cpus *cpus = NULL;
	struct cgk_gang *gang;
	struct rr_case *c;

	if ((kind == RR_WHOLE || kind == RR_ONE_SNAPSHOT) && num_online_cpus() < 2)
		kunit_skip(test, "one CPU: readers cannot race the updaters");
	c = rr_setup(test, kind);
	if (kind == RR_WHOLE) {
		unsigned int cpu;

		/* Half the CPUs write, and a reader for each writer pair. */
		c->nr_writers = clamp(min(num_online_cpus() / 2, nr / 4), 1U,
				      (unsigned int)RR_NR_LEAVES);
		i = 0;
		for_each_online_cpu(cpu) {
			if (i == c->nr_writers)
				break;
			c->cpu[i++] = cpu;
		}
	} else if (kind == RR_ONE_SNAPSHOT) {
		unsigned int cpu;

		/* One updater on each of up to half the CPUs, readers anywhere. */
		c->nr_writers = clamp(min(num_online_cpus() / 2, nr / 2), 1U,
				      (unsigned int)RR_NR_LEAVES);
		i = 0;
		for_each_online_cpu(cpu) {
			if (i == c->nr_writers)
				break;
			c->cpu[i++] = cpu;
		}
	}
	gang = cgk_gang_create(test, nr, &rr_gang_ops, c);
	KUNIT_ASSERT_NOT_NULL(test, gang);
	for (i = 0; i < nr; i++) {
		if (rr_role(c, i) != RR_READER)
			continue;
		gang->workers[i].priv = kunit_kzalloc(test, sizeof(struct rr_seen),
						      GFP_KERNEL);
		KUNIT_ASSERT_NOT_NULL(test, gang->workers[i].priv);
	}

	if (kind == RR_FRESH_CPUS) {
		cpus = cgk_cpus_disturb(gang, CGK_CPU_SHUFFLE | CGK_CPU_HOTPLUG);
		KUNIT_ASSERT_NOT_NULL(test, cpus);
	}
	cgk_gang_run(gang);
	if (cpus) {
		cgk_cpus_stop(cpus);
		cgk_cpus_finish(cpus);
	}
	cgk_gang_report(gang);
	kunit_info(test, "%ld reads, %ld flushes, %ld leaves removed\n",
		   atomic_long_read(&c->reads), atomic_long_read(&c->flushes),
		   atomic_long_read(&c->removed));
	CGK_EXPECT_EXERCISED(test, atomic_long_read(&c->reads), "no reader ever read");

	if (kind != RR_WHOLE && kind != RR_ONE_SNAPSHOT) {
		if (!cgk_wait_for(rr_leaves_freed, c, RR_SETTLE_TIMEOUT_MS))
			KUNIT_FAIL(test, "removed leaves not freed %d ms after the workers stopped",
				   RR_SETTLE_TIMEOUT_MS);
		else
			rr_check_total(c);
	}
	if (kind == RR_FRESH_REMOVAL)
		CGK_EXPECT_EXERCISED(test, atomic_long_read(&c->removed),
				     "no leaf was removed while read");

	kunit_release_action(test, rr_teardown, c);
	cgk_expect_baseline(test, &c->base, RR_SETTLE_TIMEOUT_MS);
}

/* Snapshots racing the charges and flushes: every counter loaded whole. */
static void reader_whole_counters(struct kunit *test)
{
	rr_run(test, RR_WHOLE);
}

/* cpu.stat shows at least what was charged before the read began. */
static void reader_fresh(struct kunit *test)
{
	rr_run(test, RR_FRESH);
}

/* The same with updates now and then: most cpus idle when read. */
static void reader_fresh_sparse(struct kunit *test)
{
	rr_run(test, RR_FRESH_SPARSE);
}

/* The same with workers moved between CPUs, and CPUs going offline. */
static void reader_fresh_cpus(struct kunit *test)
{
	rr_run(test, RR_FRESH_CPUS);
}

/* The same on leaves being removed while read; exact totals after. */
static void reader_fresh_removal(struct kunit *test)
{
	rr_run(test, RR_FRESH_REMOVAL);
}

/* Readers of one cgroup racing for its prev_cputime: one snapshot a read. */
static void reader_one_snapshot(struct kunit *test)
{
	rr_run(test, RR_ONE_SNAPSHOT);
}

/* cpu.stat read through the file: as fresh, user + system == usage. */
static void reader_file(struct kunit *test)
{
	rr_run(test, RR_FILE);
}

static struct kunit_case cgroup_rstat_reader_cases[] = {
	CGK_CASE(reader_whole_counters),
	CGK_CASE(reader_fresh),
	CGK_CASE(reader_fresh_sparse),
	CGK_CASE(reader_fresh_cpus),
	CGK_CASE(reader_fresh_removal),
	CGK_CASE(reader_one_snapshot),
	CGK_CASE(reader_file),
	{}
};

static struct kunit_suite cgroup_rstat_reader_suite = {
	.name = "cgroup_rstat_reader",
	.suite_init = cgk_suite_init,
	.suite_exit = cgk_suite_exit,
	.init = cgk_case_init,
	.exit = cgk_case_exit,
	.test_cases = cgroup_rstat_reader_cases,
};

kunit_test_suite(cgroup_rstat_reader_suite);
