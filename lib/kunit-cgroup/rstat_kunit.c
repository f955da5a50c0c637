// SPDX-License-Identifier: GPL-2.0-only
/*
 * cgroup_rstat: rstat updates, flushes and cpu.stat reads racing each other
 * and the removal of cgroups just charged.
 *
 * What races: a test hierarchy on the default root (top, three children,
 * nine grandchildren, 27 leaves: 40 cgroups, named n0 (the top) to n39 in
 * messages; the memory controller enabled on every level when the kernel
 * has it). Updaters charge random deltas to
 * random cgroups through the entry points the scheduler and the memory
 * controller use: __cgroup_account_cputime(), __cgroup_account_cputime_field()
 * (every field) and mod_memcg_state(), with preemption enabled or disabled,
 * and, in some cases, with interrupts disabled while an hrtimer charges too,
 * in hardirq context. Flushers call css_rstat_flush() on random cgroups, for
 * their self css or for memory, and queue a random cgroup's self css on
 * their CPU first, as a BPF program does (css_rstat_updated()). Readers call
 * cgroup_base_stat_read(), the function that reads cpu.stat (a cgroup's
 * totals, then cputime_adjust()), and read the memory stat after a flush. In
 * the teardown cases worker 0 keeps creating leaves, charging them, letting
 * updaters charge them and removing them right after.
 *
 * The cases hold for both ways the kernel keeps the base stats. Where
 * cpu.stat is flushed, a charge adds to the cgroup's per-cpu stats and
 * queues its self css, a read flushes the queued deltas up the tree and
 * copies the totals, and the release path of a removed cgroup must flush
 * what is still pending into the parent. Where the base stats are per-cpu
 * subtree totals, a charge adds to the per-cpu totals of every level but
 * the root, queueing nothing, a read sums them over the possible CPUs, with
 * no lock and no flush, and a removed cgroup's time is in its ancestors
 * already; flushing a self css then runs only the BPF flush programs.
 *
 * Invariants:
 *  - once the workers stopped, the removed cgroups are freed and a final
 *    flush ran, every cgroup's totals (cputime, user, system and nice time,
 *    and the memory stat) equal, exactly, the sum of the deltas charged to
 *    it and to its descendants, removed ones included;
 *  - no reader ever sees a counter go backwards, in cpu.stat's adjusted
 *    user and system times as in the totals before that adjustment, and in
 *    the flushed memory stat;
 *  - flushing one subsystem leaves another's updates pending: each
 *    subsystem, and the cgroups' self csses, have their own rstat tree
 *    (rstat_subsys_isolation);
 *  - a removed cgroup's last charge reaches the parent once the cgroup is
 *    freed, also where cpu.stat is flushed and the charge was left
 *    unqueued (an update that found the cgroup still on its cpu's list
 *    while a flusher took it off) (rstat_removed_unqueued);
 *  - css_sets and cgroups are back to their baseline after the case.
 * The oracle (harness.c) fails a case on any lockdep, KCSAN, KASAN,
 * refcount_t or WARNING report, e.g. css_rstat_exit()'s check that a freed
 * css is off every updated tree. Reader throughput (reads per second with
 * N readers and M updaters) is printed as a diagnostic; it is not checked.
 */

#include <linux/cgroup.h>
#include <linux/cgroup_kunit.h>
#include <linux/delay.h>
#include <linux/hrtimer.h>
#include <linux/kernel_stat.h>
#include <linux/memcontrol.h>
#include <linux/slab.h>
#include <linux/spinlock.h>

#include "harness.h"

#define RS_NR_NODES		40	/* top, 3 + 9 + 27 below it */
#define RS_NR_INNER		13	/* nodes with children: 0..12 */
#define RS_FIRST_LEAF		RS_NR_INNER
#define RS_NR_LEAVES		(RS_NR_NODES - RS_FIRST_LEAF)
#define RS_MAX_CPU_DELTA	1000	/* ns per charge */
#define RS_MAX_MEM_DELTA	16	/* pages per charge */
#define RS_MEM_ITEM		MEMCG_SOCK	/* no task, no socket: only ours */
#define RS_EPH_CHARGES		8	/* the churner's own charges per leaf */
#define RS_TIMER_PERIOD_NS	(50 * NSEC_PER_USEC)
#define RS_ISOLATION_TRIES	3
#define RS_MAX_REPORTS		6
/* Removed cgroups are flushed and freed after RCU: wait for them. */
#define RS_SETTLE_TIMEOUT_MS	10000

enum rs_field { RS_SUM, RS_USER, RS_SYSTEM, RS_NICE, RS_MEM, RS_NR_FIELDS };

static const char * const rs_field_name[RS_NR_FIELDS] = {
	"usage", "user", "system", "nice", "memory",
};

enum rs_flags {
	RS_BASE		= BIT(0),	/* updaters charge cputime */
	RS_MEMCG	= BIT(1),	/* updaters charge the memory stat */
	RS_IRQ		= BIT(2),	/* irqs off, and an hrtimer charging */
	RS_CHURN	= BIT(3),	/* worker 0 removes leaves with updates */
	RS_ISOLATE	= BIT(4),	/* subsystem isolation steps only */
	RS_CPUS		= BIT(5),	/* workers shuffled, CPUs hotplugged */
};

enum rs_role { RS_UPDATER, RS_FLUSHER, RS_READER, RS_CHURNER, RS_ISOLATOR };

struct rs_node {
	struct cgroup *cgrp;
	struct cgroup_subsys_state *mem_css;	/* NULL without memcg */
	/* charged to this cgroup itself and to removed leaves below it */
	atomic64_t charged[RS_NR_FIELDS];
};

/* The leaf the churner is about to remove, for updaters to charge. */
struct rs_eph {
	spinlock_t lock;		/* guards the fields below */
	struct cgroup *cgrp;
	struct cgroup_subsys_state *mem_css;
	int parent;
};

struct rs_case {
	struct kunit *test;
	unsigned long flags;
	bool memcg;
	bool root_memory_enabled;	/* by us: disable it again */
	struct rs_node node[RS_NR_NODES];
	struct rs_eph eph;
	unsigned int eph_gen;
	atomic_long_t removed, eph_charges, flushes, reads;
	unsigned int nr_readers, nr_updaters;
	struct hrtimer timer;
	struct rnd_state timer_rnd;
	bool timer_armed;
	bool timer_stop;
	unsigned long timer_charges;
	struct cgk_baseline base;
};

/* What one reader saw last of one cgroup. */
struct rs_seen {
	u64 shown[RS_NR_FIELDS];
	u64 raw[RS_NR_FIELDS];
};

static int rs_parent(int i)
{
	return (i - 1) / 3;
}

/* ---- charging ----------------------------------------------------------- */

static void rs_charge_base(struct rs_case *c, struct cgroup *cgrp, int ledger,
			   struct rnd_state *rnd)
{
	atomic64_t *charged = c->node[ledger].charged;
	u64 d = 1 + prandom_u32_state(rnd) % RS_MAX_CPU_DELTA;

	switch (prandom_u32_state(rnd) % 6) {
	case 0:
	case 1:
		__cgroup_account_cputime(cgrp, d);
		atomic64_add(d, &charged[RS_SUM]);
		break;
	case 2:
		__cgroup_account_cputime_field(cgrp, CPUTIME_USER, d);
		atomic64_add(d, &charged[RS_USER]);
		break;
	case 3:
		/* nice time is user time too */
		__cgroup_account_cputime_field(cgrp, CPUTIME_NICE, d);
		atomic64_add(d, &charged[RS_USER]);
		atomic64_add(d, &charged[RS_NICE]);
		break;
	case 4:
		__cgroup_account_cputime_field(cgrp, CPUTIME_SYSTEM, d);
		atomic64_add(d, &charged[RS_SYSTEM]);
		break;
	default:
		__cgroup_account_cputime_field(cgrp, prandom_u32_state(rnd) & 1 ?
					       CPUTIME_IRQ : CPUTIME_SOFTIRQ, d);
		atomic64_add(d, &charged[RS_SYSTEM]);
		break;
	}
}

static void rs_charge_mem(struct rs_case *c, struct cgroup_subsys_state *css,
			  int ledger, struct rnd_state *rnd)
{
	int d = 1 + prandom_u32_state(rnd) % RS_MAX_MEM_DELTA;

	mod_memcg_state(mem_cgroup_from_css(css), RS_MEM_ITEM, d);
	atomic64_add(d, &c->node[ledger].charged[RS_MEM]);
}

static void rs_charge(struct rs_case *c, struct cgroup *cgrp,
		      struct cgroup_subsys_state *mem_css, int ledger,
		      struct rnd_state *rnd)
{
	if (c->flags & RS_BASE)
		rs_charge_base(c, cgrp, ledger, rnd);
	if ((c->flags & RS_MEMCG) && mem_css)
		rs_charge_mem(c, mem_css, ledger, rnd);
}

/*
 * Queue @cgrp's self css on this CPU, as a BPF program does after updating
 * its own per-cpu stats of the cgroup, for the next flush of the self css
 * to hand to bpf_rstat_flush(). Base charges queue it too where cpu.stat is
 * flushed, and never where it sums per-cpu subtree totals.
 */
static void rs_queue_self(struct cgroup *cgrp)
{
	preempt_disable();
	css_rstat_updated(&cgrp->self, smp_processor_id());
	preempt_enable();
}

/* ---- hardirq updater ---------------------------------------------------- */

static enum hrtimer_restart rs_timer_fn(struct hrtimer *timer)
{
	struct rs_case *c = container_of(timer, struct rs_case, timer);
	int i;

	if (READ_ONCE(c->timer_stop))
		return HRTIMER_NORESTART;
	i = prandom_u32_state(&c->timer_rnd) % RS_NR_NODES;
	rs_charge(c, c->node[i].cgrp, c->node[i].mem_css, i, &c->timer_rnd);
	c->timer_charges++;
	hrtimer_forward_now(timer, ns_to_ktime(RS_TIMER_PERIOD_NS));
	return HRTIMER_RESTART;
}

static void rs_timer_stop(void *arg)
{
	struct rs_case *c = arg;

	if (!c->timer_armed)
		return;
	WRITE_ONCE(c->timer_stop, true);
	hrtimer_cancel(&c->timer);
	c->timer_armed = false;
}

/* ---- workers ------------------------------------------------------------ */

static enum rs_role rs_role(struct rs_case *c, unsigned int index)
{
	if (c->flags & RS_ISOLATE)
		return RS_ISOLATOR;
	if ((c->flags & RS_CHURN) && index == 0)
		return RS_CHURNER;
	switch (index % 4) {
	case 1:
		return RS_FLUSHER;
	case 3:
		return RS_READER;
	default:
		return RS_UPDATER;
	}
}

/* Charge a random cgroup, sometimes the leaf being removed. */
static void rs_update(struct cgk_worker *w, struct rs_case *c)
{
	struct cgroup_subsys_state *mem_css = NULL;
	struct cgroup *cgrp = NULL;
	unsigned long irqflags;
	int ledger = 0;

	if ((c->flags & RS_CHURN) && !cgk_rand(w, 4)) {
		spin_lock(&c->eph.lock);
		if (c->eph.cgrp) {
			cgrp = c->eph.cgrp;
			cgroup_get(cgrp);
			mem_css = c->eph.mem_css;
			if (mem_css)
				css_get(mem_css);
			ledger = c->eph.parent;
		}
		spin_unlock(&c->eph.lock);
		if (cgrp)
			atomic_long_inc(&c->eph_charges);
	}
	if (!cgrp) {
		ledger = cgk_rand(w, RS_NR_NODES);
		cgrp = c->node[ledger].cgrp;
		cgroup_get(cgrp);
		mem_css = c->node[ledger].mem_css;
		if (mem_css)
			css_get(mem_css);
	}

	/*
	 * The scheduler charges with its runqueue locked, irqs off, and the
	 * tick from hardirq. On 64-bit the per-cpu update does not disable
	 * irqs itself (its u64_stats need no seqcount there), so where the
	 * hrtimer charges too (RS_IRQ), a charge from a task must have irqs
	 * off, as the kernel's own callers do: else the hrtimer's charge to
	 * the same counter (of the same cgroup, or, with per-cpu subtree
	 * totals, of an ancestor both charges add to) can land inside the
	 * task's add and be lost. With no charger in hardirq, preemption off
	 * or nothing at all is as good.
	 */
	switch ((c->flags & RS_IRQ) ? 2 : cgk_rand(w, 2)) {
	case 0:
		rs_charge(c, cgrp, mem_css, ledger, &w->rnd);
		break;
	case 1:
		preempt_disable();
		rs_charge(c, cgrp, mem_css, ledger, &w->rnd);
		preempt_enable();
		break;
	default:
		local_irq_save(irqflags);
		rs_charge(c, cgrp, mem_css, ledger, &w->rnd);
		local_irq_restore(irqflags);
		break;
	}

	if (mem_css)
		css_put(mem_css);
	cgroup_put(cgrp);
}

/* Flush memory, or queue a self css as BPF does and flush a self css. */
static void rs_flush(struct cgk_worker *w, struct rs_case *c)
{
	struct rs_node *n = &c->node[cgk_rand(w, RS_NR_NODES)];

	if (n->mem_css && cgk_rand(w, 2)) {
		css_rstat_flush(n->mem_css);
	} else {
		rs_queue_self(c->node[cgk_rand(w, RS_NR_NODES)].cgrp);
		css_rstat_flush(&n->cgrp->self);
	}
	atomic_long_inc(&c->flushes);
}

static void rs_check_monotonic(struct cgk_worker *w, int i, const char *what,
			       enum rs_field f, u64 *last, u64 now)
{
	if (now < *last)
		cgk_fail(w, "n%d: %s %s went backwards: %llu after %llu",
			 i, what, rs_field_name[f], now, *last);
	*last = now;
}

static void rs_read(struct cgk_worker *w, struct rs_case *c)
{
	struct rs_seen *seen = w->priv;
	int i = cgk_rand(w, RS_NR_NODES);
	struct rs_node *n = &c->node[i];
	struct cgroup_base_stat shown, raw;
	struct rs_seen *s = &seen[i];

	cgroup_base_stat_read(n->cgrp, &shown, &raw);
	rs_check_monotonic(w, i, "cpu.stat", RS_SUM, &s->shown[RS_SUM],
			   shown.cputime.sum_exec_runtime);
	rs_check_monotonic(w, i, "cpu.stat", RS_USER, &s->shown[RS_USER],
			   shown.cputime.utime);
	rs_check_monotonic(w, i, "cpu.stat", RS_SYSTEM, &s->shown[RS_SYSTEM],
			   shown.cputime.stime);
	rs_check_monotonic(w, i, "cpu.stat", RS_NICE, &s->shown[RS_NICE], shown.ntime);
	rs_check_monotonic(w, i, "unadjusted", RS_USER, &s->raw[RS_USER],
			   raw.cputime.utime);
	rs_check_monotonic(w, i, "unadjusted", RS_SYSTEM, &s->raw[RS_SYSTEM],
			   raw.cputime.stime);

	if (n->mem_css && (c->flags & RS_MEMCG)) {
		css_rstat_flush(n->mem_css);
		rs_check_monotonic(w, i, "flushed", RS_MEM, &s->raw[RS_MEM],
				   memcg_page_state(mem_cgroup_from_css(n->mem_css),
						    RS_MEM_ITEM));
	}
	atomic_long_inc(&c->reads);
}

/* Create a leaf, charge it, let updaters charge it, remove it right after. */
static void rs_churn(struct cgk_worker *w, struct rs_case *c)
{
	struct cgroup_subsys_state *mem_css = NULL;
	int parent = cgk_rand(w, RS_NR_INNER);
	struct cgroup *cgrp;
	char name[24];
	int i, ret;

	snprintf(name, sizeof(name), "eph%u", c->eph_gen++);
	cgrp = cgroup_create_for_test(c->node[parent].cgrp, name);
	if (IS_ERR(cgrp)) {
		cgk_fail(w, "creating a leaf under n%d: %pe", parent, cgrp);
		return;
	}
#if IS_ENABLED(CONFIG_MEMCG)
	if (c->memcg) {
		mem_css = cgroup_get_e_css(cgrp, &memory_cgrp_subsys);
		if (mem_css->cgroup != cgrp) {
			cgk_fail(w, "leaf under n%d has no memory css of its own",
				 parent);
			css_put(mem_css);
			mem_css = NULL;
		}
	}
#endif

	spin_lock(&c->eph.lock);
	c->eph.cgrp = cgrp;
	c->eph.mem_css = mem_css;
	c->eph.parent = parent;
	spin_unlock(&c->eph.lock);

	for (i = 0; i < RS_EPH_CHARGES; i++) {
		preempt_disable();
		rs_charge(c, cgrp, mem_css, parent, &w->rnd);
		preempt_enable();
		if (!cgk_rand(w, 4))
			usleep_range(50, 100);
	}

	spin_lock(&c->eph.lock);
	c->eph.cgrp = NULL;
	c->eph.mem_css = NULL;
	spin_unlock(&c->eph.lock);

	/*
	 * Removed right after its charges. Where cpu.stat is flushed, some
	 * are still pending, and the release path must flush them into the
	 * parent; with per-cpu subtree totals they are in the ancestors
	 * already.
	 */
	ret = cgroup_destroy_for_test(cgrp);
	if (ret)
		cgk_fail(w, "removing leaf %s: %d", name, ret);
	else
		atomic_long_inc(&c->removed);
	if (mem_css)
		css_put(mem_css);
	cgroup_put(cgrp);
}

/*
 * Charge both subsystems on this worker's own leaf and queue its self css,
 * as a BPF program does, flush memory, check the self css is still pending;
 * then charge memory, flush the self css, check memory is still pending.
 * The self css is queued by hand because only where cpu.stat is flushed
 * does a base charge queue it: with per-cpu subtree totals it queues
 * nothing. The memory controller's periodic flusher (every 2 s) may flush
 * in between: only a miss repeated RS_ISOLATION_TRIES times in a row counts.
 */
static void rs_isolate(struct cgk_worker *w, struct rs_case *c)
{
	int i = RS_FIRST_LEAF + w->index;
	struct rs_node *n = &c->node[i];
	unsigned int try;

	for (try = 0; try < RS_ISOLATION_TRIES; try++) {
		preempt_disable();
		rs_charge_base(c, n->cgrp, i, &w->rnd);
		rs_charge_mem(c, n->mem_css, i, &w->rnd);
		css_rstat_updated(&n->cgrp->self, smp_processor_id());
		preempt_enable();
		css_rstat_flush(n->mem_css);
		if (css_rstat_pending_for_test(n->mem_css)) {
			cgk_fail(w, "n%d: memory updates still pending after a memory flush",
				 i);
			return;
		}
		if (!css_rstat_pending_for_test(&n->cgrp->self)) {
			cgk_fail(w, "n%d: flushing memory flushed the self css too",
				 i);
			return;
		}

		preempt_disable();
		rs_charge_mem(c, n->mem_css, i, &w->rnd);
		preempt_enable();
		css_rstat_flush(&n->cgrp->self);
		if (css_rstat_pending_for_test(&n->cgrp->self)) {
			cgk_fail(w, "n%d: self css still pending after its flush",
				 i);
			return;
		}
		if (css_rstat_pending_for_test(n->mem_css))
			break;
	}
	if (try == RS_ISOLATION_TRIES)
		cgk_fail(w, "n%d: flushing the self css flushed memory too, %u times in a row",
			 i, RS_ISOLATION_TRIES);
	css_rstat_flush(n->mem_css);
	atomic_long_inc(&c->flushes);
}

static void rs_step(struct cgk_worker *w)
{
	struct rs_case *c = w->gang->data;

	switch (rs_role(c, w->index)) {
	case RS_UPDATER:
		rs_update(w, c);
		break;
	case RS_FLUSHER:
		rs_flush(w, c);
		break;
	case RS_READER:
		rs_read(w, c);
		break;
	case RS_CHURNER:
		rs_churn(w, c);
		break;
	case RS_ISOLATOR:
		rs_isolate(w, c);
		break;
	}
}

static const struct cgk_gang_ops rs_gang_ops = {
	.step = rs_step,
};

/* ---- fixture ------------------------------------------------------------ */

/* Only the fixed hierarchy is left: removed leaves are freed. */
static bool rs_leaves_freed(void *arg)
{
	struct rs_case *c = arg;

	return atomic_read(&cgrp_dfl_root.nr_cgrps) == c->base.nr_cgrps + RS_NR_NODES;
}

/* Give back to the root what the memory stat was charged: root shows it. */
static void rs_uncharge_memory(struct rs_case *c)
{
	struct mem_cgroup *top;
	s64 total = 0;
	int i;

	if (!c->node[0].mem_css)
		return;
	for (i = 0; i < RS_NR_NODES; i++)
		total += atomic64_read(&c->node[i].charged[RS_MEM]);
	top = mem_cgroup_from_css(c->node[0].mem_css);
	while (total > 0) {
		int d = min_t(s64, total, INT_MAX / 2);

		mod_memcg_state(top, RS_MEM_ITEM, -d);
		total -= d;
	}
}

static void rs_teardown(void *arg)
{
	struct rs_case *c = arg;
	int i, ret;

	rs_timer_stop(c);
	rs_uncharge_memory(c);
	for (i = RS_NR_NODES - 1; i >= 0; i--) {
		struct rs_node *n = &c->node[i];

		if (!n->cgrp)
			continue;
		ret = cgroup_destroy_for_test(n->cgrp);
		if (ret && ret != -ENODEV)
			KUNIT_FAIL(c->test, "removing n%d: %d", i, ret);
		if (n->mem_css)
			css_put(n->mem_css);
		n->mem_css = NULL;
		cgroup_put(n->cgrp);
		n->cgrp = NULL;
	}
	if (c->root_memory_enabled) {
		ret = cgroup_subtree_control_write_for_test(&cgrp_dfl_root.cgrp, "-memory");
		if (ret)
			KUNIT_FAIL(c->test, "disabling memory on the root again: %d", ret);
		c->root_memory_enabled = false;
	}
}

/* Turn the memory controller on below @cgrp; false if the kernel has none. */
static bool rs_enable_memory(struct rs_case *c, struct cgroup *cgrp)
{
#if IS_ENABLED(CONFIG_MEMCG)
	int ret;

	if (mem_cgroup_disabled())
		return false;
	ret = cgroup_subtree_control_write_for_test(cgrp, "+memory");
	if (ret)
		KUNIT_FAIL(c->test, "enabling memory below %s: %d",
			   cgroup_parent(cgrp) ? "a test cgroup" : "the root", ret);
	return !ret;
#else
	return false;
#endif
}

static struct rs_case *rs_setup(struct kunit *test, unsigned long flags)
{
	struct cgroup *root = &cgrp_dfl_root.cgrp;
	struct rs_case *c;
	int i;

	c = kunit_kzalloc(test, sizeof(*c), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, c);
	c->test = test;
	c->flags = flags;
	spin_lock_init(&c->eph.lock);
	cgk_baseline_take(&c->base);
	KUNIT_ASSERT_EQ(test, 0, kunit_add_action_or_reset(test, rs_teardown, c));

#if IS_ENABLED(CONFIG_MEMCG)
	if (!mem_cgroup_disabled() &&
	    !(root->subtree_control & BIT(memory_cgrp_id))) {
		c->memcg = rs_enable_memory(c, root);
		c->root_memory_enabled = c->memcg;
	} else {
		c->memcg = !mem_cgroup_disabled();
	}
#endif
	if ((flags & (RS_MEMCG | RS_ISOLATE)) && !c->memcg &&
	    !(flags & RS_BASE))
		kunit_skip(test, "no memory controller in this kernel");
	if ((flags & RS_ISOLATE) && !c->memcg)
		kunit_skip(test, "no memory controller: one rstat tree only");

	for (i = 0; i < RS_NR_NODES; i++) {
		struct cgroup *parent = i ? c->node[rs_parent(i)].cgrp : root;
		struct rs_node *n = &c->node[i];
		char name[32];

		/* The top gets a unique name: a failed case may leave one. */
		if (i)
			snprintf(name, sizeof(name), "n%d", i);
		else
			snprintf(name, sizeof(name), "cgk-rstat-%d", test->param_index);
		n->cgrp = cgroup_create_for_test(parent, name);
		if (IS_ERR(n->cgrp)) {
			long err = PTR_ERR(n->cgrp);

			n->cgrp = NULL;
			KUNIT_FAIL_AND_ABORT(test, "creating %s: %ld", name, err);
		}
		if (c->memcg && i < RS_NR_INNER && !rs_enable_memory(c, n->cgrp))
			KUNIT_FAIL_AND_ABORT(test, "no memory controller below %s", name);
#if IS_ENABLED(CONFIG_MEMCG)
		if (c->memcg) {
			n->mem_css = cgroup_get_e_css(n->cgrp, &memory_cgrp_subsys);
			KUNIT_ASSERT_PTR_EQ_MSG(test, n->mem_css->cgroup, n->cgrp,
						"%s has no memory css of its own", name);
		}
#endif
	}
	return c;
}

/* ---- checks ------------------------------------------------------------- */

static void rs_check_totals(struct rs_case *c)
{
	s64 (*want)[RS_NR_FIELDS];
	unsigned int reports = 0;
	int i, f;

	want = kunit_kcalloc(c->test, RS_NR_NODES, sizeof(*want), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(c->test, want);
	for (i = 0; i < RS_NR_NODES; i++)
		for (f = 0; f < RS_NR_FIELDS; f++)
			want[i][f] = atomic64_read(&c->node[i].charged[f]);
	/* parents come before their children: sum the subtrees bottom-up */
	for (i = RS_NR_NODES - 1; i > 0; i--)
		for (f = 0; f < RS_NR_FIELDS; f++)
			want[rs_parent(i)][f] += want[i][f];

	/* the final flush: of the base stats too where cpu.stat is flushed */
	css_rstat_flush(&c->node[0].cgrp->self);
	if (c->node[0].mem_css)
		css_rstat_flush(c->node[0].mem_css);

	for (i = 0; i < RS_NR_NODES; i++) {
		struct rs_node *n = &c->node[i];
		struct cgroup_base_stat shown, raw;
		s64 got[RS_NR_FIELDS] = {};

		cgroup_base_stat_read(n->cgrp, &shown, &raw);
		got[RS_SUM] = raw.cputime.sum_exec_runtime;
		got[RS_USER] = raw.cputime.utime;
		got[RS_SYSTEM] = raw.cputime.stime;
		got[RS_NICE] = raw.ntime;
		if (n->mem_css)
			got[RS_MEM] = memcg_page_state(mem_cgroup_from_css(n->mem_css),
						       RS_MEM_ITEM);
		for (f = 0; f < RS_NR_FIELDS; f++) {
			if (got[f] == want[i][f])
				continue;
			if (reports++ < RS_MAX_REPORTS)
				KUNIT_FAIL(c->test,
					   "n%d: %s total %lld, charged to it and below %lld",
					   i, rs_field_name[f], got[f],
					   want[i][f]);
		}
	}
	if (reports > RS_MAX_REPORTS)
		KUNIT_FAIL(c->test, "%u more totals wrong", reports - RS_MAX_REPORTS);
	kunit_info(c->test, "charged: usage %lld ns, user %lld ns, system %lld ns, nice %lld ns, memory %lld pages\n",
		   want[0][RS_SUM], want[0][RS_USER], want[0][RS_SYSTEM], want[0][RS_NICE],
		   want[0][RS_MEM]);
}

/*
 * Run on a CPU about to go offline: charge the last leaf there, so that the
 * final check must count a charge made on an offline CPU: pending there
 * where cpu.stat is flushed, in that CPU's per-cpu totals where it sums
 * them. Workers and timer are stopped: nothing else charges or flushes
 * before the check.
 */
static int rs_charge_here(void *arg)
{
	struct rs_case *c = arg;
	struct rs_node *n = &c->node[RS_NR_NODES - 1];
	unsigned long irqflags;

	local_irq_save(irqflags);
	rs_charge(c, n->cgrp, n->mem_css, RS_NR_NODES - 1, &c->timer_rnd);
	local_irq_restore(irqflags);
	return 0;
}

/* ---- the cases ---------------------------------------------------------- */

static void rs_run(struct kunit *test, unsigned long flags)
{
	unsigned int i, nr = cgk_param_threads(test);
	struct cgk_cpus *cpus = NULL;
	struct cgk_gang *gang;
	struct rs_case *c;
	u64 start, elapsed_ms;

	c = rs_setup(test, flags);
	if (flags & RS_ISOLATE)
		nr = min_t(unsigned int, nr, RS_NR_LEAVES);
	gang = cgk_gang_create(test, nr, &rs_gang_ops, c);
	KUNIT_ASSERT_NOT_NULL(test, gang);
	for (i = 0; i < nr; i++) {
		switch (rs_role(c, i)) {
		case RS_READER:
			c->nr_readers++;
			gang->workers[i].priv = kunit_kcalloc(test, RS_NR_NODES,
							      sizeof(struct rs_seen),
							      GFP_KERNEL);
			KUNIT_ASSERT_NOT_NULL(test, gang->workers[i].priv);
			break;
		case RS_UPDATER:
			c->nr_updaters++;
			break;
		default:
			break;
		}
	}

	if (flags & RS_IRQ) {
		prandom_seed_state(&c->timer_rnd, gang->seed ^ 0x7257a7ULL);
		hrtimer_setup(&c->timer, rs_timer_fn, CLOCK_MONOTONIC,
			      HRTIMER_MODE_REL_HARD);
		KUNIT_ASSERT_EQ(test, 0, kunit_add_action_or_reset(test, rs_timer_stop, c));
		c->timer_armed = true;
		hrtimer_start(&c->timer, ns_to_ktime(RS_TIMER_PERIOD_NS),
			      HRTIMER_MODE_REL_HARD);
	}

	if (flags & RS_CPUS) {
		cpus = cgk_cpus_disturb(gang, CGK_CPU_SHUFFLE | CGK_CPU_HOTPLUG);
		KUNIT_ASSERT_NOT_NULL(test, cpus);
	}

	start = ktime_get_ns();
	cgk_gang_run(gang);
	elapsed_ms = max_t(u64, div_u64(ktime_get_ns() - start, NSEC_PER_MSEC), 1);
	if (cpus)
		cgk_cpus_stop(cpus);
	rs_timer_stop(c);
	cgk_gang_report(gang);

	kunit_info(test, "%lu steps, %ld flushes, %lu hardirq charges, %ld leaves removed with %ld charges from updaters\n",
		   cgk_gang_iterations(gang), atomic_long_read(&c->flushes),
		   c->timer_charges, atomic_long_read(&c->removed),
		   atomic_long_read(&c->eph_charges));
	if (c->nr_readers)
		kunit_info(test, "rstat readers: %u readers, %u updaters: %ld reads in %llu ms, %llu reads/s\n",
			   c->nr_readers, c->nr_updaters, atomic_long_read(&c->reads),
			   elapsed_ms,
			   div64_u64(atomic_long_read(&c->reads) * MSEC_PER_SEC, elapsed_ms));

	if (!cgk_wait_for(rs_leaves_freed, c, RS_SETTLE_TIMEOUT_MS)) {
		KUNIT_FAIL(test, "removed leaves not freed %d ms after the workers stopped",
			   RS_SETTLE_TIMEOUT_MS);
	} else {
		if (cpus && cgk_cpus_hotplugging(cpus))
			cgk_cpus_leave_offline(cpus, rs_charge_here, c);
		rs_check_totals(c);
	}
	if (cpus)
		cgk_cpus_finish(cpus);
	if (flags & RS_CHURN)
		CGK_EXPECT_EXERCISED(test, atomic_long_read(&c->removed),
				     "no leaf was removed right after its charges");

	kunit_release_action(test, rs_teardown, c);
	cgk_expect_baseline(test, &c->base, RS_SETTLE_TIMEOUT_MS);
}

/* Base stats: updaters, flushers and cpu.stat readers. */
static void rstat_base_exact(struct kunit *test)
{
	rs_run(test, RS_BASE);
}

/* The memory stat: updaters, flushers of both trees, readers. */
static void rstat_memcg_exact(struct kunit *test)
{
	rs_run(test, RS_MEMCG);
}

/* Both, also with irqs off and from an hrtimer in hardirq context. */
static void rstat_irq_updates(struct kunit *test)
{
	rs_run(test, RS_BASE | RS_MEMCG | RS_IRQ);
}

/* Flushing one subsystem leaves the other's updates pending. */
static void rstat_subsys_isolation(struct kunit *test)
{
	rs_run(test, RS_ISOLATE);
}

/* Leaves removed right after their charges, while updaters still charge them. */
static void rstat_teardown_pending(struct kunit *test)
{
	rs_run(test, RS_BASE | RS_MEMCG | RS_CHURN);
}

/*
 * Workers keep being moved between CPUs and, where the kernel has CPU
 * hotplug, CPUs go offline with charges made on them and come back, while
 * the hrtimer migrates with its CPU. At the end one CPU is left offline
 * with a charge made on it during the final check: totals stay exact
 * because a flush walks the updated tree of every possible CPU (for the
 * memory stat, and the base stats where cpu.stat is flushed), and a read
 * sums the per-cpu totals of every possible CPU (with per-cpu subtree
 * totals).
 */
static void rstat_cpu_hotplug(struct kunit *test)
{
	rs_run(test, RS_BASE | RS_MEMCG | RS_IRQ | RS_CPUS);
}

/* Everything at once. */
static void rstat_everything(struct kunit *test)
{
	rs_run(test, RS_BASE | RS_MEMCG | RS_IRQ | RS_CHURN);
}

/* ---- a removed cgroup's unqueued update -------------------------------- */

#define RS_UNQUEUED_NS		1000003	/* odd: not a sum of other charges */

struct rs_unqueued {
	struct cgroup *top;
	struct cgroup *leaf;
	struct cgk_baseline base;
};

static void rs_unqueued_teardown(void *arg)
{
	struct rs_unqueued *u = arg;

	if (u->leaf) {
		cgroup_destroy_for_test(u->leaf);
		cgroup_put(u->leaf);
	}
	if (u->top) {
		cgroup_destroy_for_test(u->top);
		cgroup_put(u->top);
	}
}

static bool rs_unqueued_freed(void *arg)
{
	struct rs_unqueued *u = arg;

	return atomic_read(&cgrp_dfl_root.nr_cgrps) == u->base.nr_cgrps + 1;
}

static u64 rs_usage(struct cgroup *cgrp)
{
	struct cgroup_base_stat shown, raw;

	cgroup_base_stat_read(cgrp, &shown, &raw);
	return raw.cputime.sum_exec_runtime;
}

/*
 * Where cpu.stat is flushed, an update that finds its cgroup already queued
 * on its cpu returns without queueing it; if a flusher took the cgroup off
 * that cpu's list at the same time and read the stats from before the
 * update, the update waits, unqueued, for the next update of the cgroup on
 * that cpu. This case leaves a leaf in exactly that state (with
 * cgroup_base_stat_charge_unqueued_for_test(): its per-cpu stats grown,
 * nothing queued), removes it, and waits for it to be freed: its parent must
 * then show the delta, as it would have after the next update. Without a
 * flush of every cpu when the leaf is freed, the delta is freed with the
 * per-cpu stats. With per-cpu subtree totals a charge queues nothing, so no
 * update can be left unqueued: the hook charges the leaf the usual way, and
 * the case checks that the parent keeps a removed leaf's last charge.
 */
static void rstat_removed_unqueued(struct kunit *test)
{
	struct rs_unqueued *u;
	u64 before, after;
	bool queues;
	int cpu;

	u = kunit_kzalloc(test, sizeof(*u), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, u);
	cgk_baseline_take(&u->base);
	KUNIT_ASSERT_EQ(test, 0, kunit_add_action_or_reset(test, rs_unqueued_teardown, u));
	u->top = cgroup_create_for_test(&cgrp_dfl_root.cgrp, "cgk-rstat-unqueued");
	if (IS_ERR(u->top)) {
		long err = PTR_ERR(u->top);

		u->top = NULL;
		KUNIT_FAIL_AND_ABORT(test, "creating the top cgroup: %ld", err);
	}
	u->leaf = cgroup_create_for_test(u->top, "leaf");
	if (IS_ERR(u->leaf)) {
		long err = PTR_ERR(u->leaf);

		u->leaf = NULL;
		KUNIT_FAIL_AND_ABORT(test, "creating the leaf: %ld", err);
	}

	/*
	 * A charge the usual way. Where cpu.stat is flushed it queues the
	 * leaf, and the read flushes it: nothing queued after. Where it sums
	 * per-cpu subtree totals nothing is queued at all, and nothing can be
	 * left unqueued: that is how the case tells the two apart.
	 */
	preempt_disable();
	__cgroup_account_cputime(u->leaf, 1000);
	preempt_enable();
	queues = css_rstat_pending_for_test(&u->leaf->self);
	before = rs_usage(u->top);
	KUNIT_EXPECT_EQ(test, before, 1000ULL);

	/*
	 * What the race leaves: the stats of this cpu grown, the leaf not
	 * queued. On this cpu, so that where nothing is queued the hook's
	 * charge is just what a charge from here is.
	 */
	cpu = get_cpu();
	cgroup_base_stat_charge_unqueued_for_test(u->leaf, cpu, RS_UNQUEUED_NS);
	put_cpu();
	if (queues)
		KUNIT_EXPECT_FALSE_MSG(test, css_rstat_pending_for_test(&u->leaf->self),
				       "the leaf is queued: the case does not test what it says");
	else
		kunit_info(test, "a charge queues nothing here: the leaf's last charge is a plain one\n");

	KUNIT_ASSERT_EQ(test, 0, cgroup_destroy_for_test(u->leaf));
	cgroup_put(u->leaf);
	u->leaf = NULL;
	if (!cgk_wait_for(rs_unqueued_freed, u, RS_SETTLE_TIMEOUT_MS))
		KUNIT_FAIL_AND_ABORT(test, "the removed leaf was not freed in %d ms",
				     RS_SETTLE_TIMEOUT_MS);

	after = rs_usage(u->top);
	KUNIT_EXPECT_EQ_MSG(test, after, before + RS_UNQUEUED_NS,
			    "the parent of a removed leaf lost its last, unqueued update: usage %llu, want %llu",
			    after, before + RS_UNQUEUED_NS);

	kunit_release_action(test, rs_unqueued_teardown, u);
	cgk_expect_baseline(test, &u->base, RS_SETTLE_TIMEOUT_MS);
}

static struct kunit_case cgroup_rstat_cases[] = {
	CGK_CASE(rstat_base_exact),
	CGK_CASE(rstat_memcg_exact),
	CGK_CASE(rstat_irq_updates),
	CGK_CASE(rstat_subsys_isolation),
	CGK_CASE(rstat_teardown_pending),
	CGK_CASE(rstat_cpu_hotplug),
	CGK_CASE(rstat_everything),
	KUNIT_CASE(rstat_removed_unqueued),
	{}
};

static struct kunit_suite cgroup_rstat_suite = {
	.name = "cgroup_rstat",
	.suite_init = cgk_suite_init,
	.suite_exit = cgk_suite_exit,
	.init = cgk_case_init,
	.exit = cgk_case_exit,
	.test_cases = cgroup_rstat_cases,
};

kunit_test_suite(cgroup_rstat_suite);
