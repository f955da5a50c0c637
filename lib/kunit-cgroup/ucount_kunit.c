// SPDX-License-Identifier: GPL-2.0-only
/*
 * cgroup_ucount: ucount charging from many kthreads at once.
 *
 * What races: a gang of kthreads charges and uncharges ucounts through the
 * kernel's own entry points - inc_ucount()/dec_ucount(),
 * inc_rlimit_ucounts()/dec_rlimit_ucounts(),
 * inc_rlimit_get_ucounts()/dec_rlimit_put_ucounts() - and takes and drops
 * ucounts with alloc_ucounts()/put_ucounts(), on a tree of user namespaces
 * three levels deep (A; B0..B2 in A; C0..C5, two in each B), at every level
 * at once. One case also charges from hardirq context (an hrtimer), as the
 * signal code does when a timer sends a signal, and one from softirq (an
 * hrtimer on each CPU that expires there), as a SIGIO is charged from the
 * network softirq.
 *
 * Each charge walks up the tree: a charge of (C3, uid) also charges the
 * owner of C3 in B1, of B1 in A and of A in the initial namespace. The
 * namespaces are owned by a uid of this suite's own and the charges use
 * other uids of its own, so nothing else in the system touches the counters.
 * Limits are set low, per level, so that they are hit all the time.
 *
 * Invariants, checked by the test thread after the workers stopped:
 *  - every counter at every level is back at its starting value;
 *  - no counter was ever seen above its limit after a limit-checked charge
 *    (for inc_ucount() the counter itself; for the rlimit charges, the sum
 *    of charges that succeeded, kept in shadow counters that are raised
 *    after a success and lowered before the uncharge, so they never exceed
 *    what the kernel admitted);
 *  - the limits were actually hit;
 *  - every ucounts reference count is back at its starting value, and once
 *    the namespaces are gone, no ucounts of the suite's uids is left in the
 *    hash table (nothing leaked, and the namespaces were all freed: each
 *    holds a reference on its owner's ucounts in its parent).
 * The oracle (harness.c) fails the case on any lockdep, KCSAN, KASAN or
 * refcount_t report; a lost update shows as a counter off at the end, a
 * missing limit check as a shadow counter above its limit.
 *
 * Pending signals (RLIMIT_SIGPENDING, inc_rlimit_get_ucounts()): a
 * namespace owner's ucounts (an owner node here) keeps per-CPU reservations
 * for the namespaces below it, counted in its count, and drains them into
 * exact mode near the lowest of their limits (kernel/ucount.c). Cases on
 * the limits, with every limit huge but one:
 *  - rlimit_exact_limit: workers in sibling namespaces charge, never
 *    uncharging, until refused, while an idle sibling holds a charge; per
 *    level whose limit binds (B, A, init; the idle charge right below it,
 *    or deeper in a subtree no worker charges from), the charges admitted
 *    equal the limit exactly and get_rlimit_value() there reports them;
 *  - rlimit_reclaim_near_limit (test thread only): one charge from C0, then
 *    charges from its sibling C1 get all the rest of the limit, with
 *    get_rlimit_value() exact at every step; and a sibling with a lower
 *    limit is refused once the level's count passes that limit;
 *  - rlimit_override_parent_full (test thread only): with B0's level full,
 *    charges from C0 that override the limits (as signal delivery makes
 *    them for a signal the kernel sends) are all admitted, past B0's, A's
 *    and init's limits, get_rlimit_value() exact at every level after
 *    each; charges that do not override stay refused;
 *  - rlimit_forced_signal_own_limit (test thread only): with the recipient
 *    at its own RLIMIT_SIGPENDING, a real-time signal's charge is refused
 *    and forced signals' are admitted (also with a limit of 0), with the
 *    override and limit arguments signal delivery passes;
 *  - ucounts_last_put_cred_rcu (test thread only): the last reference of
 *    a ucounts dropped by put_cred_rcu(), an RCU callback, as when a
 *    user's last cred goes: ucounts_lock taken in softirq, as the kernel
 *    takes it there (the reach report, reach_kunit.c, shows lockdep saw it);
 *  - signals_from_timers (with user victims): signals queued to a user
 *    victim from an hrtimer (hardirq, as it_real_fn() sends SIGALRM) and a
 *    timer_list (softirq): its siglock taken in both, as the kernel takes
 *    it there; the charges all given back once it exits;
 *  - rlimit_teardown_percpu_held: charges made on one CPU and uncharged on
 *    another leave reservations on CPUs (checked): every level is back at
 *    its start, and everything is freed, the escrows too;
 *  - rlimit_reported_exact: after the workers of the get/put gang stop
 *    with their charges still held, get_rlimit_value() of every node equals,
 *    exactly, the charges outstanding through it (its shadow counter).
 * They hold for any implementation of the counter. Cases on the escrow
 * itself (its test hooks are in include/linux/cgroup_kunit.h), each
 * checking that no charge takes a level past the limit that applied to it,
 * that a charge that fits is never refused and that get_rlimit_value() is
 * exact whenever nothing is in flight, and that nothing is left once the
 * namespaces are freed:
 *  - rlimit_escrow_cross_cpu: pairs of workers bound to two CPUs, one
 *    charging and one giving back, fill A's level to its limit and empty
 *    it, over and over: refills on one CPU, give-backs on the other, exact
 *    mode and back;
 *  - rlimit_escrow_lowered: a limit lowered while reservations are held on
 *    several CPUs, the test thread's among them: the level drains, and the
 *    namespace gets exactly one more charge, on that very CPU;
 *  - rlimit_escrow_lowered_racing: the same while workers of two sibling
 *    namespaces race to the limit, charges only, each checked against a
 *    lower bound of the level's count;
 *  - rlimit_escrow_mixed_limits: one level charged by three namespaces
 *    with three limits and by the owner's own tasks with theirs (the
 *    owner's ucounts is their first level): first step by step on one CPU,
 *    then racing, each within its own limit;
 *  - rlimit_escrow_cpu_hotplug: random charges while CPUs go offline and
 *    come back (where the kernel has CPU hotplug; shuffled only elsewhere),
 *    then checks and the teardown with a CPU offline holding reservations.
 *  - rlimit_escrow_softirq: charges and give-backs from softirq on every
 *    CPU (a soft hrtimer pinned to it) race workers' from process context
 *    on A's level, which they fill to its limit and empty over and over:
 *    drains and re-enables of the escrow, which take its lock, are made
 *    from softirq as well as from process context; then every escrow is in
 *    one mode on every CPU and holds what the count says.
 *  - rlimit_escrow_hardirq: the same with the chargers in hardirq (plain
 *    hrtimers, as it_real_fn()'s), so that the escrow's lock is taken in
 *    hardirq on every run.
 *
 * ucount_sysctl_per_ns writes each namespace's limits through its own set
 * of user.* sysctls (/proc/sys/user/) while namespaces are created and freed
 * around it; see its comment below.
 */

#include <linux/cgroup_kunit.h>
#include <linux/cred.h>
#include <linux/delay.h>
#include <linux/file.h>
#include <linux/fs.h>
#include <linux/hrtimer.h>
#include <linux/minmax.h>
#include <linux/module.h>
#include <linux/mount.h>
#include <linux/preempt.h>
#include <linux/rcuref.h>
#include <linux/sched/signal.h>
#include <linux/timer.h>
#include <linux/user_namespace.h>

#include "harness.h"
#include "sigpending.h"

/* Charged by nothing else for the suite's uids. */
#define UC_TYPE			UCOUNT_CGROUP_NAMESPACES
#define UC_RL_ADD		UCOUNT_RLIMIT_MSGQUEUE
#define UC_RL_GET		UCOUNT_RLIMIT_SIGPENDING

/* Owner of every test namespace; charges use the uids after it. */
#define UC_UID_OWNER		3141000
#define UC_NR_CHARGE_UIDS	2
#define UC_NR_CHURN_UIDS	4
#define UC_NR_UIDS		(1 + UC_NR_CHARGE_UIDS + UC_NR_CHURN_UIDS)

/* A, B0..B2 in A, C0..C5 in the Bs; index 0 is A. */
#define UC_NR_NS		10
static const int uc_ns_parent[UC_NR_NS] = { -1, 0, 0, 0, 1, 1, 2, 2, 3, 3 };
static const char * const uc_ns_name[UC_NR_NS] = {
	"A", "B0", "B1", "B2", "C0", "C1", "C2", "C3", "C4", "C5",
};

/* Limits by namespace level (A is level 1). */
static const long uc_ucount_max[4] = { 0, 8, 5, 3 };
/* rlimit_max of a level-L namespace limits its owner's charges at level L-1. */
static const long uc_rlimit_max[4] = { 0, 16, 12, 8 };
/* What the caller of an rlimit charge allows at the charged level. */
#define UC_LEAF_RLIMIT		6

/* Operations a worker can do; a case enables some. */
enum uc_op {
	UC_OP_UCOUNT,
	UC_OP_RL_ADD,
	UC_OP_RL_GET,
	UC_OP_ALLOC,
	UC_NR_OPS,
};

#define UC_HOLD_MAX		4
/* Owner nodes: (init, owner), (A, owner), (B0..B2, owner). */
#define UC_NR_OWNER_NODES	5
#define UC_NR_TARGETS		((UC_NR_NS - 1) * UC_NR_CHARGE_UIDS)
#define UC_NR_NODES		(UC_NR_OWNER_NODES + UC_NR_TARGETS)
#define UC_MAX_CHAIN		4

/* Namespaces and owner nodes by name, for the cases that pick levels. */
#define UC_NS_A			0
#define UC_NS_B(i)		(1 + (i))
#define UC_NS_C(i)		(4 + (i))
#define UC_NODE_INIT		0	/* owner of A in the initial namespace */
#define UC_NODE_A		1	/* owner of B0..B2 in A */
#define UC_NODE_B(i)		(2 + (i))	/* owner of C2i and C2i+1 in Bi */
/* The target of charge uid @u (1..UC_NR_CHARGE_UIDS) in namespace @ns. */
#define UC_TARGET(ns, u)	(((ns) - 1) * UC_NR_CHARGE_UIDS + (u) - 1)
#define UC_TARGETS_IN(ns)	(GENMASK(UC_NR_CHARGE_UIDS - 1, 0) << UC_TARGET(ns, 1))
#define UC_ALL_TARGETS		GENMASK(UC_NR_TARGETS - 1, 0)

/* A ucounts the suite follows: charged directly (target) or via a child. */
struct uc_node {
	struct ucounts *uc;
	char name[32];
	long rlimit_max;		/* limit of an admitted rlimit charge */
	atomic_long_t shadow[2];	/* admitted rlimit charges: ADD, GET */
	atomic_long_t seen_max[3];	/* ucount, shadow ADD, shadow GET */
	long base_ucount;
	long base_rlimit[2];
	long base_rlimit_raw;		/* GET's count, reservations included */
	unsigned int base_ref;
};

struct uc_target {
	struct user_namespace *ns;
	kuid_t uid;
	int chain[UC_MAX_CHAIN];	/* node indices, charged level first */
	int chain_len;
};

struct uc_held {
	u8 op;
	u8 target;
	u8 v;
	struct ucounts *uc;		/* UC_OP_UCOUNT, UC_OP_ALLOC */
};

struct uc_worker {
	struct uc_held held[UC_HOLD_MAX];
	unsigned int nr_held;
};

struct uc_case {
	struct kunit *test;
	unsigned long ops;		/* mask of enum uc_op */
	struct user_namespace *ns[UC_NR_NS];
	struct uc_node node[UC_NR_NODES];
	struct uc_target target[UC_NR_TARGETS];
	unsigned int base_hashed[UC_NR_UIDS];
	long base_escrows;
	atomic_long_t refused;
	atomic_long_t admitted;
	/* hardirq charger */
	struct hrtimer timer;
	bool timer_armed;
	bool timer_stop;
	struct rnd_state timer_rnd;
	unsigned long timer_charges;
	bool timer_failed;
	char timer_failure[CGK_FAILURE_LEN];
};

static kuid_t uc_uid(unsigned int i)
{
	return KUIDT_INIT(UC_UID_OWNER + i);
}

static int uc_ns_level(int i)
{
	int level = 1;

	for (; uc_ns_parent[i] >= 0; i = uc_ns_parent[i])
		level++;
	return level;
}

static int uc_node_of(struct uc_case *c, struct ucounts *uc)
{
	int i;

	for (i = 0; i < UC_NR_NODES; i++) {
		if (c->node[i].uc == uc)
			return i;
	}
	return -1;
}

/* ---- charging, shared by the workers and the hardirq charger ------------ */

static long uc_ucount_limit(struct uc_node *n)
{
	return READ_ONCE(n->uc->ns->ucount_max[UC_TYPE]);
}

/*
 * Admit an rlimit charge in the shadow counters of every level; returns
 * false, with @why filled, if a level went above its limit.
 */
static bool uc_shadow_admit(struct uc_case *c, struct uc_target *t, int rl,
			    long v, char *why, size_t len)
{
	bool ok = true;
	int i;

	for (i = 0; i < t->chain_len; i++) {
		struct uc_node *n = &c->node[t->chain[i]];
		long now = atomic_long_add_return(v, &n->shadow[rl]);

		cgk_atomic_long_max(&n->seen_max[1 + rl], now);
		if (now > n->rlimit_max && ok) {
			scnprintf(why, len, "%s: %ld admitted rlimit %s charges, limit %ld",
				  n->name, now, rl ? "get" : "add", n->rlimit_max);
			ok = false;
		}
	}
	return ok;
}

static void uc_shadow_release(struct uc_case *c, struct uc_target *t, int rl,
			      long v)
{
	int i;

	for (i = 0; i < t->chain_len; i++)
		atomic_long_sub(v, &c->node[t->chain[i]].shadow[rl]);
}

/*
 * Do one charge of kind @op on target @ti. Returns false with @why filled on
 * a broken invariant; *held is valid (h->op < UC_NR_OPS) only if the charge
 * was admitted and must be released later.
 */
static bool uc_charge(struct uc_case *c, enum uc_op op, unsigned int ti,
		      long v, struct uc_held *h, char *why, size_t len)
{
	struct uc_target *t = &c->target[ti];
	struct uc_node *leaf = &c->node[t->chain[0]];
	struct ucounts *uc;
	long ret;
	int i;

	h->op = UC_NR_OPS;
	h->target = ti;
	h->v = v;

	switch (op) {
	case UC_OP_UCOUNT:
		uc = inc_ucount(t->ns, t->uid, UC_TYPE);
		if (!uc) {
			atomic_long_inc(&c->refused);
			return true;
		}
		h->op = op;
		h->uc = uc;
		if (uc != leaf->uc) {
			scnprintf(why, len, "inc_ucount(%s) returned another ucounts",
				  leaf->name);
			return false;
		}
		for (i = 0; i < t->chain_len; i++) {
			struct uc_node *n = &c->node[t->chain[i]];
			long now = atomic_long_read(&n->uc->ucount[UC_TYPE]);

			cgk_atomic_long_max(&n->seen_max[0], now);
			if (now > uc_ucount_limit(n)) {
				scnprintf(why, len, "%s: ucount %ld above its limit %ld",
					  n->name, now, uc_ucount_limit(n));
				return false;
			}
		}
		break;
	case UC_OP_RL_ADD:
		ret = inc_rlimit_ucounts(leaf->uc, UC_RL_ADD, v);
		if (ret == LONG_MAX || ret > UC_LEAF_RLIMIT) {
			/* Refused: the caller undoes the whole charge. */
			dec_rlimit_ucounts(leaf->uc, UC_RL_ADD, v);
			atomic_long_inc(&c->refused);
			return true;
		}
		h->op = op;
		atomic_long_inc(&c->admitted);
		return uc_shadow_admit(c, t, 0, v, why, len);
	case UC_OP_RL_GET:
		if (!cgk_sigpending_charge(leaf->uc, false, UC_LEAF_RLIMIT)) {
			atomic_long_inc(&c->refused);
			return true;
		}
		h->op = op;
		atomic_long_inc(&c->admitted);
		return uc_shadow_admit(c, t, 1, 1, why, len);
	default:
		break;
	}
	atomic_long_inc(&c->admitted);
	return true;
}

/*
 * Take a reference on a ucounts of a churn uid, which nothing else holds, so
 * that lookups race with insertion into and removal from the hash table.
 */
static bool uc_alloc(struct uc_case *c, unsigned int r, struct uc_held *h,
		     char *why, size_t len)
{
	struct user_namespace *ns = c->ns[r % UC_NR_NS];
	unsigned int u = 1 + UC_NR_CHARGE_UIDS + r / UC_NR_NS;
	struct ucounts *uc;

	h->op = UC_NR_OPS;
	uc = alloc_ucounts(ns, uc_uid(u));
	if (!uc) {
		scnprintf(why, len, "alloc_ucounts(%s, uid %u) failed",
			  uc_ns_name[r % UC_NR_NS], UC_UID_OWNER + u);
		return false;
	}
	h->op = UC_OP_ALLOC;
	h->uc = uc;
	if (uc->ns != ns || !uid_eq(uc->uid, uc_uid(u))) {
		scnprintf(why, len, "alloc_ucounts(%s, uid %u) returned another user's ucounts",
			  uc_ns_name[r % UC_NR_NS], UC_UID_OWNER + u);
		return false;
	}
	atomic_long_inc(&c->admitted);
	return true;
}

static void uc_release(struct uc_case *c, struct uc_held *h)
{
	struct uc_target *t = NULL;
	struct ucounts *leaf = NULL;

	if (h->op == UC_OP_RL_ADD || h->op == UC_OP_RL_GET) {
		t = &c->target[h->target];
		leaf = c->node[t->chain[0]].uc;
	}

	switch (h->op) {
	case UC_OP_UCOUNT:
		dec_ucount(h->uc, UC_TYPE);
		break;
	case UC_OP_RL_ADD:
		uc_shadow_release(c, t, 0, h->v);
		dec_rlimit_ucounts(leaf, UC_RL_ADD, h->v);
		break;
	case UC_OP_RL_GET:
		uc_shadow_release(c, t, 1, 1);
		dec_rlimit_put_ucounts(leaf, UC_RL_GET);
		break;
	case UC_OP_ALLOC:
		put_ucounts(h->uc);
		break;
	default:
		break;
	}
	h->op = UC_NR_OPS;
}

static unsigned int uc_pick_target(struct rnd_state *rnd)
{
	return prandom_u32_state(rnd) % UC_NR_TARGETS;
}

static enum uc_op uc_pick_op(struct uc_case *c, struct rnd_state *rnd)
{
	unsigned int n = hweight_long(c->ops), k = prandom_u32_state(rnd) % n;
	int op;

	for_each_set_bit(op, &c->ops, UC_NR_OPS) {
		if (!k--)
			return op;
	}
	return UC_OP_UCOUNT;
}

/* ---- workers ------------------------------------------------------------ */

static void uc_step(struct cgk_worker *w)
{
	struct uc_case *c = w->gang->data;
	struct uc_worker *me = w->priv;
	char why[CGK_FAILURE_LEN];
	struct uc_held *h;
	enum uc_op op;
	bool ok;

	if (me->nr_held == UC_HOLD_MAX || (me->nr_held && cgk_rand(w, 2))) {
		unsigned int i = cgk_rand(w, me->nr_held);

		uc_release(c, &me->held[i]);
		me->held[i] = me->held[--me->nr_held];
		return;
	}

	op = uc_pick_op(c, &w->rnd);
	h = &me->held[me->nr_held];
	if (op == UC_OP_ALLOC)
		ok = uc_alloc(c, cgk_rand(w, UC_NR_NS * UC_NR_CHURN_UIDS), h,
			      why, sizeof(why));
	else
		ok = uc_charge(c, op, uc_pick_target(&w->rnd), 1 + cgk_rand(w, 3),
			       h, why, sizeof(why));
	if (!ok)
		cgk_fail(w, "%s", why);
	if (h->op != UC_NR_OPS)
		me->nr_held++;
}

static void uc_fini(struct cgk_worker *w)
{
	struct uc_case *c = w->gang->data;
	struct uc_worker *me = w->priv;

	while (me->nr_held)
		uc_release(c, &me->held[--me->nr_held]);
}

static const struct cgk_gang_ops uc_gang_ops = {
	.step = uc_step,
	.fini = uc_fini,
};

/* ---- hardirq charger ---------------------------------------------------- */

#define UC_TIMER_PERIOD_NS	(50 * NSEC_PER_USEC)

static enum hrtimer_restart uc_timer_fn(struct hrtimer *timer)
{
	struct uc_case *c = container_of(timer, struct uc_case, timer);
	struct uc_held h;

	if (READ_ONCE(c->timer_stop))
		return HRTIMER_NORESTART;

	if (!uc_charge(c, UC_OP_RL_GET, uc_pick_target(&c->timer_rnd), 1, &h,
		       c->timer_failure, sizeof(c->timer_failure))) {
		WRITE_ONCE(c->timer_failed, true);
		WRITE_ONCE(c->timer_stop, true);
	}
	if (h.op != UC_NR_OPS)
		uc_release(c, &h);
	c->timer_charges++;

	if (READ_ONCE(c->timer_stop))
		return HRTIMER_NORESTART;
	hrtimer_forward_now(timer, ns_to_ktime(UC_TIMER_PERIOD_NS));
	return HRTIMER_RESTART;
}

static void uc_timer_stop(void *arg)
{
	struct uc_case *c = arg;

	if (!c->timer_armed)
		return;
	WRITE_ONCE(c->timer_stop, true);
	hrtimer_cancel(&c->timer);
	c->timer_armed = false;
}

/* ---- fixture: the namespace tree and the nodes -------------------------- */

static void uc_tree_release(void *arg)
{
	struct uc_case *c = arg;
	int i;

	for (i = UC_NR_OWNER_NODES; i < UC_NR_NODES; i++) {
		if (c->node[i].uc)
			put_ucounts(c->node[i].uc);
	}
	for (i = UC_NR_NS - 1; i >= 0; i--) {
		if (c->ns[i])
			put_user_ns(c->ns[i]);
	}
}

static void uc_node_init(struct uc_node *n, struct ucounts *uc, long rlimit_max,
			 const char *ns_name, unsigned int uid)
{
	n->uc = uc;
	n->rlimit_max = rlimit_max;
	snprintf(n->name, sizeof(n->name), "(%s, uid %u)", ns_name, uid);
}

static void uc_snapshot(struct uc_node *n)
{
	n->base_ucount = atomic_long_read(&n->uc->ucount[UC_TYPE]);
	n->base_rlimit[0] = get_rlimit_value(n->uc, UC_RL_ADD);
	n->base_rlimit[1] = get_rlimit_value(n->uc, UC_RL_GET);
	n->base_rlimit_raw = atomic_long_read(&n->uc->rlimit[UC_RL_GET]);
	n->base_ref = rcuref_read(&n->uc->count);
}

/*
 * The limit each owner node is checked against, from the RLIMIT_SIGPENDING
 * rlimit_max of every namespace (@lim, indexed as uc_ns_name): the largest
 * of the namespaces right below it, whose limits apply there.
 */
static void uc_expect_sigpending_max(struct uc_case *c, const long *lim)
{
	int i;

	c->node[UC_NODE_INIT].rlimit_max = lim[UC_NS_A];
	c->node[UC_NODE_A].rlimit_max = max3(lim[UC_NS_B(0)], lim[UC_NS_B(1)],
					     lim[UC_NS_B(2)]);
	for (i = 0; i < 3; i++)
		c->node[UC_NODE_B(i)].rlimit_max = max(lim[UC_NS_C(2 * i)],
						       lim[UC_NS_C(2 * i + 1)]);
}

/*
 * The namespace tree and the nodes of a case. @sigpending_max: the
 * RLIMIT_SIGPENDING rlimit_max of each namespace (indexed as uc_ns_name),
 * set as it is created, or NULL for uc_rlimit_max by level.
 */
static struct uc_case *uc_setup(struct kunit *test, unsigned long ops,
				const long *sigpending_max)
{
	struct uc_case *c;
	int i, u;

	c = kunit_kzalloc(test, sizeof(*c), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, c);
	c->test = test;
	c->ops = ops;

	for (u = 0; u < UC_NR_UIDS; u++)
		c->base_hashed[u] = ucounts_nr_hashed_for_uid(uc_uid(u));
	c->base_escrows = ucounts_nr_escrows_for_test();

	KUNIT_ASSERT_EQ(test, 0, kunit_add_action_or_reset(test, uc_tree_release, c));

	for (i = 0; i < UC_NR_NS; i++) {
		int p = uc_ns_parent[i], level = uc_ns_level(i);
		struct user_namespace *parent = p < 0 ? &init_user_ns : c->ns[p];
		struct user_namespace *ns;

		ns = user_ns_create_for_test(parent, uc_uid(0));
		KUNIT_ASSERT_NOT_ERR_OR_NULL_MSG(test, ns, "creating namespace %s",
						 uc_ns_name[i]);
		c->ns[i] = ns;
		ns->ucount_max[UC_TYPE] = uc_ucount_max[level];
		set_userns_rlimit_max(ns, UC_RL_ADD, uc_rlimit_max[level]);
		set_userns_rlimit_max(ns, UC_RL_GET, sigpending_max ?
				      sigpending_max[i] : uc_rlimit_max[level]);
	}

	/* Owner nodes: A's owner in init, B's in A, C's in each B. */
	uc_node_init(&c->node[0], c->ns[0]->ucounts, uc_rlimit_max[1], "init",
		     UC_UID_OWNER);
	uc_node_init(&c->node[1], c->ns[1]->ucounts, uc_rlimit_max[2], "A",
		     UC_UID_OWNER);
	for (i = 0; i < 3; i++)
		uc_node_init(&c->node[2 + i], c->ns[4 + 2 * i]->ucounts,
			     uc_rlimit_max[3], uc_ns_name[1 + i], UC_UID_OWNER);

	if (sigpending_max)
		uc_expect_sigpending_max(c, sigpending_max);

	/* Targets: every namespace below A, with each charge uid. */
	for (i = 0; i < UC_NR_TARGETS; i++) {
		int nsi = 1 + i / UC_NR_CHARGE_UIDS, u = 1 + i % UC_NR_CHARGE_UIDS;
		struct uc_node *n = &c->node[UC_NR_OWNER_NODES + i];
		struct uc_target *t = &c->target[i];
		struct ucounts *iter;

		t->ns = c->ns[nsi];
		t->uid = uc_uid(u);
		iter = alloc_ucounts(t->ns, t->uid);
		KUNIT_ASSERT_NOT_NULL(test, iter);
		uc_node_init(n, iter, UC_LEAF_RLIMIT, uc_ns_name[nsi],
			     UC_UID_OWNER + u);

		for (; iter; iter = iter->ns->ucounts) {
			int ni = uc_node_of(c, iter);

			KUNIT_ASSERT_GE_MSG(test, ni, 0, "%s: chain leaves the tree",
					    n->name);
			KUNIT_ASSERT_LT(test, t->chain_len, UC_MAX_CHAIN);
			t->chain[t->chain_len++] = ni;
		}
		KUNIT_ASSERT_EQ(test, t->chain_len, uc_ns_level(nsi) + 1);
	}

	for (i = 0; i < UC_NR_NODES; i++)
		uc_snapshot(&c->node[i]);
	return c;
}

/* ---- checks ------------------------------------------------------------- */

static void uc_check_counters(struct uc_case *c)
{
	struct kunit *test = c->test;
	int i;

	for (i = 0; i < UC_NR_NODES; i++) {
		struct uc_node *n = &c->node[i];
		long raw = atomic_long_read(&n->uc->rlimit[UC_RL_GET]);

		KUNIT_EXPECT_EQ_MSG(test, atomic_long_read(&n->uc->ucount[UC_TYPE]),
				    n->base_ucount, "%s: ucount not back", n->name);
		KUNIT_EXPECT_EQ_MSG(test, get_rlimit_value(n->uc, UC_RL_ADD),
				    n->base_rlimit[0], "%s: rlimit (add) not back",
				    n->name);
		KUNIT_EXPECT_EQ_MSG(test, get_rlimit_value(n->uc, UC_RL_GET),
				    n->base_rlimit[1], "%s: rlimit (get) not back",
				    n->name);
		/*
		 * A level holds one reference on itself while its count is
		 * not zero, which for a namespace owner also counts the
		 * reservations its escrow holds (kernel/ucount.c).
		 */
		KUNIT_EXPECT_EQ_MSG(test, rcuref_read(&n->uc->count),
				    n->base_ref - (n->base_rlimit_raw > 0) + (raw > 0),
				    "%s: reference count not back (count %ld, %ld before)",
				    n->name, raw, n->base_rlimit_raw);
		KUNIT_EXPECT_LE_MSG(test, atomic_long_read(&n->seen_max[0]),
				    uc_ucount_limit(n), "%s: ucount above its limit",
				    n->name);
		KUNIT_EXPECT_LE_MSG(test, atomic_long_read(&n->seen_max[1]),
				    n->rlimit_max, "%s: rlimit (add) above its limit",
				    n->name);
		KUNIT_EXPECT_LE_MSG(test, atomic_long_read(&n->seen_max[2]),
				    n->rlimit_max, "%s: rlimit (get) above its limit",
				    n->name);
	}
}

static bool uc_hashed_back(void *arg)
{
	struct uc_case *c = arg;
	int u;

	for (u = 0; u < UC_NR_UIDS; u++) {
		if (ucounts_nr_hashed_for_uid(uc_uid(u)) != c->base_hashed[u])
			return false;
	}
	/* Freed with their ucounts (kernel/ucount.c). */
	if (ucounts_nr_escrows_for_test() != c->base_escrows)
		return false;
	return true;
}

/* Freeing a user namespace is deferred to a workqueue: wait for it. */
#define UC_FREE_TIMEOUT_MS	10000

static void uc_check_released(struct uc_case *c)
{
	int u;

	kunit_release_action(c->test, uc_tree_release, c);
	if (cgk_wait_for(uc_hashed_back, c, UC_FREE_TIMEOUT_MS))
		return;
	for (u = 0; u < UC_NR_UIDS; u++) {
		unsigned int now = ucounts_nr_hashed_for_uid(uc_uid(u));

		if (now != c->base_hashed[u])
			KUNIT_FAIL(c->test,
				   "uid %u: %u ucounts left %d ms after the namespaces were put, %u before",
				   UC_UID_OWNER + u, now, UC_FREE_TIMEOUT_MS,
				   c->base_hashed[u]);
	}
	KUNIT_EXPECT_EQ_MSG(c->test, ucounts_nr_escrows_for_test(), c->base_escrows,
			    "escrows of namespace owners left %d ms after the namespaces were put",
			    UC_FREE_TIMEOUT_MS);
}

/* ---- the cases ---------------------------------------------------------- */

static void uc_run(struct kunit *test, unsigned long ops, bool hardirq)
{
	unsigned int i, nr = cgk_param_threads(test);
	struct cgk_gang *gang;
	struct uc_case *c;

	c = uc_setup(test, ops, NULL);
	gang = cgk_gang_create(test, nr, &uc_gang_ops, c);
	KUNIT_ASSERT_NOT_NULL(test, gang);
	for (i = 0; i < nr; i++) {
		gang->workers[i].priv = kunit_kzalloc(test, sizeof(struct uc_worker),
						      GFP_KERNEL);
		KUNIT_ASSERT_NOT_NULL(test, gang->workers[i].priv);
	}

	if (hardirq) {
		prandom_seed_state(&c->timer_rnd, gang->seed ^ 0x5eed1e55ULL);
		/*
		 * Not a _HARD timer: as the signal code's own hrtimers, it
		 * expires in hardirq context, or in softirq with PREEMPT_RT,
		 * where the locks of the charge path may sleep.
		 */
		hrtimer_setup(&c->timer, uc_timer_fn, CLOCK_MONOTONIC,
			      HRTIMER_MODE_REL);
		KUNIT_ASSERT_EQ(test, 0, kunit_add_action_or_reset(test, uc_timer_stop, c));
		c->timer_armed = true;
		hrtimer_start(&c->timer, ns_to_ktime(UC_TIMER_PERIOD_NS),
			      HRTIMER_MODE_REL);
	}

	cgk_gang_run(gang);
	uc_timer_stop(c);
	cgk_gang_report(gang);
	if (c->timer_failed)
		KUNIT_FAIL(test, "hardirq charger: %s", c->timer_failure);

	kunit_info(test, "%lu steps, %ld charges admitted, %ld refused, %lu from hardirq\n",
		   cgk_gang_iterations(gang), atomic_long_read(&c->admitted),
		   atomic_long_read(&c->refused), c->timer_charges);
	/* Each worker alone can reach a limit unless it also churns. */
	if (!(ops & BIT(UC_OP_ALLOC)))
		CGK_EXPECT_EXERCISED(test, atomic_long_read(&c->refused),
				     "no charge was ever refused: limits not exercised");
	if (hardirq)
		CGK_EXPECT_EXERCISED(test, c->timer_charges, "the hardirq charger never ran");

	uc_check_counters(c);
	uc_check_released(c);
}

/* inc_ucount()/dec_ucount() with limits at every level. */
static void ucount_inc_dec(struct kunit *test)
{
	uc_run(test, BIT(UC_OP_UCOUNT), false);
}

/* inc_rlimit_ucounts()/dec_rlimit_ucounts() with amounts of 1..3. */
static void rlimit_add_sub(struct kunit *test)
{
	uc_run(test, BIT(UC_OP_RL_ADD), false);
}

/* inc_rlimit_get_ucounts()/dec_rlimit_put_ucounts(): references on 0<->1. */
static void rlimit_get_put(struct kunit *test)
{
	uc_run(test, BIT(UC_OP_RL_GET), false);
}

/* The same, also from an hrtimer in hardirq context. */
static void rlimit_get_put_hardirq(struct kunit *test)
{
	uc_run(test, BIT(UC_OP_RL_GET), true);
}

/* alloc_ucounts()/put_ucounts() lookups racing get/put on 0<->1. */
static void ucounts_alloc_put(struct kunit *test)
{
	uc_run(test, BIT(UC_OP_ALLOC) | BIT(UC_OP_RL_GET), false);
}

/* Every path at once, on every level, from threads and hardirq. */
static void ucount_all_paths(struct kunit *test)
{
	uc_run(test, BIT(UC_OP_UCOUNT) | BIT(UC_OP_RL_ADD) | BIT(UC_OP_RL_GET) |
		     BIT(UC_OP_ALLOC), true);
}

/* ---- pending-signal limits: helpers ------------------------------------- */

/* Limit of every level but the one a case makes binding. */
#define UC_HUGE_RLIMIT		BIT(20)

static struct ucounts *uc_leaf(struct uc_case *c, unsigned int t)
{
	return c->node[c->target[t].chain[0]].uc;
}

static const char *uc_leaf_name(struct uc_case *c, unsigned int t)
{
	return c->node[c->target[t].chain[0]].name;
}

/*
 * Exactly the @fit charges that fit were admitted: more means some were
 * admitted past the limit, fewer that a charge that fits was refused.
 */
static void uc_expect_limit(struct kunit *test, const char *what, long admitted,
			    long fit)
{
	if (admitted > fit)
		KUNIT_FAIL(test, "%s: %ld admitted, %ld past the limit (%ld fit)",
			   what, admitted, admitted - fit, fit);
	else if (admitted < fit)
		KUNIT_FAIL(test, "%s: %ld admitted, %ld fit: a charge that fits was refused",
			   what, admitted, fit);
}

/* Pending signals counted at @n's level, as get_rlimit_value() reports. */
static long uc_pending(struct uc_node *n)
{
	return get_rlimit_value(n->uc, UC_RL_GET) - n->base_rlimit[1];
}

/**
 * struct uc_ledger - pending-signal charges held, per target
 * @c: the case
 * @charged: charges admitted and not given back yet
 *
 * Written by one thread, a worker or the test thread; given back by
 * uc_ledger_uncharge() once that thread is done with it.
 */
struct uc_ledger {
	struct uc_case *c;
	long charged[UC_NR_TARGETS];
};

static bool uc_ledger_charge(struct uc_ledger *l, unsigned int t)
{
	if (!cgk_sigpending_charge(uc_leaf(l->c, t), false, LONG_MAX))
		return false;
	l->charged[t]++;
	return true;
}

/* Charge from target @t until refused or @max admitted: how many were. */
static long uc_ledger_charge_upto(struct uc_ledger *l, unsigned int t, long max)
{
	long k = 0;

	while (k < max && uc_ledger_charge(l, t))
		k++;
	return k;
}

static void uc_ledger_uncharge(struct uc_ledger *l)
{
	unsigned int t;

	for (t = 0; t < UC_NR_TARGETS; t++) {
		for (; l->charged[t] > 0; l->charged[t]--)
			dec_rlimit_put_ucounts(uc_leaf(l->c, t), UC_RL_GET);
	}
}

static void uc_ledger_release(void *arg)
{
	uc_ledger_uncharge(arg);
}

/* ---- rlimit_exact_limit ------------------------------------------------- */

/* The binding limit: room for reservations on every CPU (kernel/ucount.c). */
#define UC_EXACT_LIMIT		100
/* Workers under B0 and B1, none under B2. */
#define UC_EXACT_B0_B1		(UC_TARGETS_IN(UC_NS_B(0)) | UC_TARGETS_IN(UC_NS_B(1)) | \
				 UC_TARGETS_IN(UC_NS_C(0)) | UC_TARGETS_IN(UC_NS_C(1)) | \
				 UC_TARGETS_IN(UC_NS_C(2)) | UC_TARGETS_IN(UC_NS_C(3)))
#define UC_EXACT_BS		(BIT(UC_NS_B(0)) | BIT(UC_NS_B(1)) | BIT(UC_NS_B(2)))

/**
 * struct uc_exact_variant - where the limit binds, in rlimit_exact_limit
 * @desc: the parameter's description, naming the level
 * @limited: namespaces whose rlimit_max is UC_EXACT_LIMIT; the others' is huge
 * @node: the owner node at which their limit applies
 * @targets: the targets the workers charge from, all below @node
 * @idle: a target below @node the test thread charges once before the
 *	  workers start and never again: the sibling that sits on a charge
 */
struct uc_exact_variant {
	const char *desc;
	unsigned long limited;
	int node;
	unsigned long targets;
	unsigned int idle;
};

static const struct uc_exact_variant uc_exact_variants[] = {
	{
		.desc = "limit on the B level (owner of C0, C1 in B0), idle charge in C1",
		.limited = BIT(UC_NS_C(0)) | BIT(UC_NS_C(1)),
		.node = UC_NODE_B(0),
		.targets = UC_TARGETS_IN(UC_NS_C(0)) | BIT(UC_TARGET(UC_NS_C(1), 1)),
		.idle = UC_TARGET(UC_NS_C(1), 2),
	},
	{
		.desc = "limit on the A level (owner of B0..B2 in A), idle charge in B2",
		.limited = UC_EXACT_BS,
		.node = UC_NODE_A,
		.targets = UC_ALL_TARGETS & ~BIT(UC_TARGET(UC_NS_B(2), 2)),
		.idle = UC_TARGET(UC_NS_B(2), 2),
	},
	{
		.desc = "limit on the init level (owner of A), idle charge in B2",
		.limited = BIT(UC_NS_A),
		.node = UC_NODE_INIT,
		.targets = UC_ALL_TARGETS & ~BIT(UC_TARGET(UC_NS_B(2), 2)),
		.idle = UC_TARGET(UC_NS_B(2), 2),
	},
	{
		.desc = "limit on the A level, idle charge in C5 under B2, workers under B0, B1",
		.limited = UC_EXACT_BS,
		.node = UC_NODE_A,
		.targets = UC_EXACT_B0_B1,
		.idle = UC_TARGET(UC_NS_C(5), 2),
	},
	{
		.desc = "limit on the init level, idle charge in C5 under B2, workers under B0, B1",
		.limited = BIT(UC_NS_A),
		.node = UC_NODE_INIT,
		.targets = UC_EXACT_B0_B1,
		.idle = UC_TARGET(UC_NS_C(5), 2),
	},
};

KUNIT_ARRAY_PARAM_DESC(uc_exact, uc_exact_variants, desc);

/**
 * struct uc_exact_worker - what one worker of rlimit_exact_limit holds
 * @ledger: its charges, given back by the test thread after the checks
 * @admitted: charges admitted to it
 * @finished: refused once, or admitted more than the limit by itself
 */
struct uc_exact_worker {
	struct uc_ledger ledger;
	long admitted;
	bool finished;
};

/**
 * struct uc_exact - the shared state of rlimit_exact_limit
 * @idle: the idle sibling's charge
 * @w: the workers' state, @nr of them
 * @nr: number of workers
 * @targets: the targets the workers pick from, @nr_targets of them
 * @nr_targets: number of targets
 * @finished: workers finished; the last one stops the gang
 */
struct uc_exact {
	struct uc_ledger idle;
	struct uc_exact_worker *w;
	unsigned int nr;
	u8 targets[UC_NR_TARGETS];
	unsigned int nr_targets;
	atomic_t finished;
};

/* Charge, never uncharging, until refused; then wait for the others. */
static void uc_exact_step(struct cgk_worker *w)
{
	struct uc_exact *x = w->gang->data;
	struct uc_exact_worker *me = w->priv;
	unsigned int t;

	if (me->finished) {
		/* Keep off the CPUs of the workers still charging. */
		usleep_range(50, 100);
		return;
	}
	t = x->targets[cgk_rand(w, x->nr_targets)];
	if (uc_ledger_charge(&me->ledger, t) && ++me->admitted <= UC_EXACT_LIMIT)
		return;
	me->finished = true;
	if (atomic_inc_return(&x->finished) == w->gang->nr)
		WRITE_ONCE(w->gang->stop, true);
}

static const struct cgk_gang_ops uc_exact_ops = {
	.step = uc_exact_step,
};

static void uc_exact_uncharge(void *arg)
{
	struct uc_exact *x = arg;
	unsigned int i;

	for (i = 0; i < x->nr; i++)
		uc_ledger_uncharge(&x->w[i].ledger);
	uc_ledger_uncharge(&x->idle);
}

/*
 * KUNIT_ARRAY_PARAM() takes the parameter, so cgk_param_threads() has no
 * thread count to give here: take the first one the thread-count generator
 * yields, which is the threads module parameter when set (so a failure
 * replays as printed) and 8 otherwise, more workers than the CPUs of a
 * small test machine, so that charges are preempted half way through a
 * batch or a revocation.
 */
static unsigned int uc_exact_threads(struct kunit *test)
{
	char desc[KUNIT_PARAM_DESC_SIZE];
	const unsigned int *nr = cgk_threads_gen(test, NULL, desc);

	return nr ? *nr : 8;
}

/* The targets of @mask, in @targets; returns how many. */
static unsigned int uc_pick_targets(u8 *targets, unsigned long mask)
{
	unsigned int t, nr = 0;

	for (t = 0; t < UC_NR_TARGETS; t++) {
		if (mask & BIT(t))
			targets[nr++] = t;
	}
	return nr;
}

/*
 * Workers in sibling namespaces race to the last unit of one level's limit,
 * while an idle sibling holds a charge: exactly the limit is admitted.
 */
static void rlimit_exact_limit(struct kunit *test)
{
	const struct uc_exact_variant *v = test->param_value;
	unsigned int i, nr = uc_exact_threads(test);
	long lim[UC_NR_NS], total;
	struct cgk_gang *gang;
	struct uc_exact *x;
	struct uc_node *n;
	struct uc_case *c;

	for (i = 0; i < UC_NR_NS; i++)
		lim[i] = v->limited & BIT(i) ? UC_EXACT_LIMIT : UC_HUGE_RLIMIT;
	c = uc_setup(test, BIT(UC_OP_RL_GET), lim);
	n = &c->node[v->node];

	x = kunit_kzalloc(test, sizeof(*x), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, x);
	x->w = kunit_kcalloc(test, nr, sizeof(*x->w), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, x->w);
	x->nr = nr;
	x->idle.c = c;
	for (i = 0; i < nr; i++)
		x->w[i].ledger.c = c;
	x->nr_targets = uc_pick_targets(x->targets, v->targets);
	/* Registered before the gang, so it runs after the gang stopped. */
	KUNIT_ASSERT_EQ(test, 0, kunit_add_action_or_reset(test, uc_exact_uncharge, x));

	KUNIT_ASSERT_TRUE_MSG(test, uc_ledger_charge(&x->idle, v->idle),
			      "the first charge from %s was refused",
			      uc_leaf_name(c, v->idle));

	gang = cgk_gang_create(test, nr, &uc_exact_ops, x);
	KUNIT_ASSERT_NOT_NULL(test, gang);
	for (i = 0; i < nr; i++)
		gang->workers[i].priv = &x->w[i];
	cgk_gang_run(gang);
	cgk_gang_report(gang);

	total = x->idle.charged[v->idle];
	for (i = 0; i < nr; i++)
		total += x->w[i].admitted;
	kunit_info(test, "%ld charges admitted from %u targets; %s: %ld pending\n",
		   total, x->nr_targets + 1, n->name, uc_pending(n));
	KUNIT_EXPECT_EQ_MSG(test, atomic_read(&x->finished), (int)nr,
			    "%d of %u workers stopped by the time bound, not by a refusal",
			    (int)nr - atomic_read(&x->finished), nr);
	uc_expect_limit(test, v->desc, total, UC_EXACT_LIMIT);
	KUNIT_EXPECT_EQ_MSG(test, uc_pending(n), total,
			    "%s: %s reports %ld pending with %ld charges admitted",
			    v->desc, n->name, uc_pending(n), total);

	kunit_release_action(test, uc_exact_uncharge, x);
	uc_check_counters(c);
	uc_check_released(c);
}

/* ---- rlimit_reclaim_near_limit ------------------------------------------ */

#define UC_RECLAIM_LIMIT	100	/* of C0, C1 and C3 */
#define UC_RECLAIM_LOW		40	/* of C2 */

/*
 * Near the limit, a sibling gets exactly what is left (B0: C0 then C1, same
 * limit); and a sibling whose own limit the count passed is refused (B1: C2
 * below C3's limit). The test thread alone charges, so every count is known
 * at every step.
 */
static void rlimit_reclaim_near_limit(struct kunit *test)
{
	const unsigned int c0 = UC_TARGET(UC_NS_C(0), 1), c1 = UC_TARGET(UC_NS_C(1), 1);
	const unsigned int c2 = UC_TARGET(UC_NS_C(2), 1), c3 = UC_TARGET(UC_NS_C(3), 1);
	struct uc_node *b0, *b1;
	long lim[UC_NR_NS], k, now;
	struct uc_ledger *l;
	bool exact = true;
	struct uc_case *c;
	int i;

	for (i = 0; i < UC_NR_NS; i++)
		lim[i] = UC_HUGE_RLIMIT;
	lim[UC_NS_C(0)] = UC_RECLAIM_LIMIT;
	lim[UC_NS_C(1)] = UC_RECLAIM_LIMIT;
	lim[UC_NS_C(2)] = UC_RECLAIM_LOW;
	lim[UC_NS_C(3)] = UC_RECLAIM_LIMIT;
	c = uc_setup(test, BIT(UC_OP_RL_GET), lim);
	b0 = &c->node[UC_NODE_B(0)];
	b1 = &c->node[UC_NODE_B(1)];

	l = kunit_kzalloc(test, sizeof(*l), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, l);
	l->c = c;
	KUNIT_ASSERT_EQ(test, 0, kunit_add_action_or_reset(test, uc_ledger_release, l));

	/* C0 charges once. */
	KUNIT_ASSERT_TRUE_MSG(test, uc_ledger_charge(l, c0),
			      "the first charge from C0 was refused");
	KUNIT_EXPECT_EQ_MSG(test, uc_pending(b0), 1L,
			    "%s reports %ld pending after one charge",
			    b0->name, uc_pending(b0));

	/* C1 gets the rest of the limit. */
	for (k = 0; k < 2 * UC_RECLAIM_LIMIT && uc_ledger_charge(l, c1); k++) {
		now = uc_pending(b0);
		if (exact && now != k + 2) {
			KUNIT_FAIL(test,
				   "%s reports %ld pending after %ld charges through it",
				   b0->name, now, k + 2);
			exact = false;
		}
	}
	KUNIT_EXPECT_EQ_MSG(test, k, UC_RECLAIM_LIMIT - 1L,
			    "C1: %ld charges admitted after C0's one, want the limit %d less that one (fewer: charges that fit were refused; more: some past the limit were admitted)",
			    k, UC_RECLAIM_LIMIT);
	KUNIT_EXPECT_EQ_MSG(test, uc_pending(b0), (long)UC_RECLAIM_LIMIT,
			    "%s reports %ld pending at the limit %d",
			    b0->name, uc_pending(b0), UC_RECLAIM_LIMIT);
	KUNIT_EXPECT_FALSE_MSG(test, uc_ledger_charge(l, c0),
			       "C0 charged again with %s at the limit",
			       b0->name);

	/*
	 * C2 charges B1 once; C3's charges take B1's count past C2's lower
	 * limit: C2's next charge is refused, C3's go on to its own.
	 */
	KUNIT_ASSERT_TRUE_MSG(test, uc_ledger_charge(l, c2),
			      "the first charge from C2 was refused");
	k = uc_ledger_charge_upto(l, c3, UC_RECLAIM_LOW);
	KUNIT_EXPECT_EQ_MSG(test, k, (long)UC_RECLAIM_LOW,
			    "C3: refused after %ld charges with one from C2, under its limit %d",
			    k, UC_RECLAIM_LIMIT);
	now = uc_pending(b1);
	KUNIT_EXPECT_FALSE_MSG(test, uc_ledger_charge(l, c2),
			       "C2 charged with %ld pending in %s, past its limit %d",
			       now, b1->name, UC_RECLAIM_LOW);
	uc_ledger_charge_upto(l, c3, 2 * UC_RECLAIM_LIMIT);
	KUNIT_EXPECT_EQ_MSG(test, uc_pending(b1), (long)UC_RECLAIM_LIMIT,
			    "%s reports %ld pending once C3 was refused, want C3's limit %d",
			    b1->name, uc_pending(b1), UC_RECLAIM_LIMIT);

	kunit_release_action(test, uc_ledger_release, l);
	uc_check_counters(c);
	uc_check_released(c);
}

/* ---- overriding charges ------------------------------------------------- */

/*
 * What signal delivery charges a pending signal with: __send_signal_locked()
 * lets a signal below SIGRTMIN that the kernel sends (SEND_SIG_NOINFO,
 * SEND_SIG_PRIV, or si_code >= 0, as force_sig() sends with SI_KERNEL)
 * override RLIMIT_SIGPENDING, and sig_get_ucounts() passes the recipient's
 * RLIMIT_SIGPENDING as the limit at its own level.
 */
static bool uc_signal_overrides(int sig, const struct kernel_siginfo *info)
{
	if (sig >= SIGRTMIN)
		return false;
	return info <= SEND_SIG_PRIV || info->si_code >= 0;
}

/*
 * Charge from target @t as signal delivery does (@override, @limit at the
 * charged level); on success count it in @l and, in @want, at every level
 * of its chain.
 */
static bool uc_ovr_charge(struct uc_ledger *l, unsigned int t, bool override,
			  long limit, long *want)
{
	struct uc_target *tg = &l->c->target[t];
	int i;

	if (!cgk_sigpending_charge(uc_leaf(l->c, t), override, limit))
		return false;
	l->charged[t]++;
	for (i = 0; i < tg->chain_len; i++)
		want[tg->chain[i]]++;
	return true;
}

/*
 * Every node reports exactly the charges @want says went through it;
 * fails once per call, naming the first node off. Return: true if exact.
 */
static bool uc_expect_pending_all(struct uc_case *c, const long *want,
				  const char *when)
{
	int i;

	for (i = 0; i < UC_NR_NODES; i++) {
		long now = uc_pending(&c->node[i]);

		if (now != want[i]) {
			KUNIT_FAIL(c->test, "%s: %s reports %ld pending, %ld charged through it",
				   when, c->node[i].name, now, want[i]);
			return false;
		}
	}
	return true;
}

/* Limits that bind at three levels, so that overriding charges pass all three. */
#define UC_OVR_LIMIT_B		8	/* C0's and C1's: at B0's owner */
#define UC_OVR_LIMIT_A		10	/* B0's: at A's owner */
#define UC_OVR_LIMIT_INIT	12	/* A's: at init's owner */
/* More than two escrow refills (ESCROW_BATCH is 16), well past every limit. */
#define UC_OVR_CHARGES		40

/*
 * A ledger of the charges a case makes on @c, given back by
 * uc_ledger_release(); *@want: the expected count of each node.
 */
static struct uc_ledger *uc_ledger_new(struct kunit *test, struct uc_case *c,
				       long **want)
{
	struct uc_ledger *l;

	*want = kunit_kcalloc(test, UC_NR_NODES, sizeof(**want), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, *want);
	l = kunit_kzalloc(test, sizeof(*l), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, l);
	l->c = c;
	KUNIT_ASSERT_EQ(test, 0, kunit_add_action_or_reset(test, uc_ledger_release, l));
	return l;
}

/*
 * rlimit_override_parent_full (test thread only): C1 fills B0's level to
 * its limit; then a charge from C0 without override is refused, and
 * UC_OVR_CHARGES overriding charges from C0 (as signal delivery makes them
 * for a signal the kernel sends) are all admitted though they take B0's, A's
 * and init's levels past their limits: the parent's limit does not refuse an
 * overriding charge. get_rlimit_value() is exact at every level after each
 * charge; charges without override stay refused (from C0 and C1 at B0's
 * level, from C2 under B1, whose own limits are huge, at init's); everything
 * is back at its start once they are given back.
 */
static void rlimit_override_parent_full(struct kunit *test)
{
	const unsigned int c0 = UC_TARGET(UC_NS_C(0), 1), c1 = UC_TARGET(UC_NS_C(1), 1);
	const unsigned int c2 = UC_TARGET(UC_NS_C(2), 1);
	struct kernel_siginfo info = { .si_signo = SIGSEGV, .si_code = SI_KERNEL };
	long lim[UC_NR_NS], *want, k;
	bool override, exact = true;
	struct uc_ledger *l;
	struct uc_case *c;
	int i;

	override = uc_signal_overrides(SIGSEGV, &info);
	KUNIT_ASSERT_TRUE_MSG(test, override, "a SIGSEGV with SI_KERNEL does not override");

	for (i = 0; i < UC_NR_NS; i++)
		lim[i] = UC_HUGE_RLIMIT;
	lim[UC_NS_C(0)] = UC_OVR_LIMIT_B;
	lim[UC_NS_C(1)] = UC_OVR_LIMIT_B;
	lim[UC_NS_B(0)] = UC_OVR_LIMIT_A;
	lim[UC_NS_A] = UC_OVR_LIMIT_INIT;
	c = uc_setup(test, BIT(UC_OP_RL_GET), lim);
	l = uc_ledger_new(test, c, &want);

	/* C1 fills B0's level. */
	k = 0;
	while (k < 2 * UC_OVR_LIMIT_B && uc_ovr_charge(l, c1, false, LONG_MAX, want))
		k++;
	KUNIT_EXPECT_EQ_MSG(test, k, (long)UC_OVR_LIMIT_B,
			    "C1: %ld charges without override admitted, want B0's limit %d",
			    k, UC_OVR_LIMIT_B);
	uc_expect_pending_all(c, want, "B0 full");
	KUNIT_EXPECT_FALSE_MSG(test, uc_ovr_charge(l, c0, false, LONG_MAX, want),
			       "C0: a charge without override admitted with B0's level full");

	/* Overriding charges from C0: no level refuses them. */
	for (k = 0; k < UC_OVR_CHARGES; k++) {
		if (!uc_ovr_charge(l, c0, override, LONG_MAX, want)) {
			KUNIT_FAIL(test,
				   "C0: overriding charge %ld refused (%s at %ld pending, limit %d): a parent's limit refused it",
				   k + 1, c->node[UC_NODE_B(0)].name,
				   uc_pending(&c->node[UC_NODE_B(0)]), UC_OVR_LIMIT_B);
			break;
		}
		if (exact)
			exact = uc_expect_pending_all(c, want, "after an overriding charge");
	}
	KUNIT_EXPECT_EQ_MSG(test, l->charged[c0], (long)UC_OVR_CHARGES,
			    "C0: %ld of %d overriding charges admitted",
			    l->charged[c0], UC_OVR_CHARGES);

	/* The limits still hold for charges that do not override. */
	KUNIT_EXPECT_FALSE_MSG(test, uc_ovr_charge(l, c0, false, LONG_MAX, want),
			       "C0: a charge without override admitted past B0's limit");
	KUNIT_EXPECT_FALSE_MSG(test, uc_ovr_charge(l, c1, false, LONG_MAX, want),
			       "C1: a charge without override admitted past B0's limit");
	KUNIT_EXPECT_FALSE_MSG(test, uc_ovr_charge(l, c2, false, LONG_MAX, want),
			       "C2: a charge without override admitted with init's level past A's limit %d",
			       UC_OVR_LIMIT_INIT);
	uc_expect_pending_all(c, want, "after the refused charges");

	kunit_release_action(test, uc_ledger_release, l);
	uc_check_counters(c);
	uc_check_released(c);
}

/* The recipient's RLIMIT_SIGPENDING in rlimit_forced_signal_own_limit. */
#define UC_FORCED_RLIMIT	4
#define UC_FORCED_CHARGES	3

/*
 * rlimit_forced_signal_own_limit (test thread only): the charge of a forced
 * signal, with the arguments signal delivery passes (override as
 * __send_signal_locked() decides it, the recipient's RLIMIT_SIGPENDING as
 * the limit): with the recipient at its own limit, a real-time signal
 * (SI_QUEUE) is refused and forced signals (SIGSEGV, SI_KERNEL; SIGKILL,
 * SEND_SIG_PRIV) are admitted, also with a limit of 0; the counts are exact
 * at every level and back at their start afterwards.
 */
static void rlimit_forced_signal_own_limit(struct kunit *test)
{
	const unsigned int t = UC_TARGET(UC_NS_C(2), 1);
	struct kernel_siginfo segv = { .si_signo = SIGSEGV, .si_code = SI_KERNEL };
	struct kernel_siginfo rt = { .si_signo = SIGRTMIN + 1, .si_code = SI_QUEUE };
	long lim[UC_NR_NS], *want, k;
	struct uc_ledger *l;
	struct uc_case *c;
	int i;

	KUNIT_ASSERT_FALSE(test, uc_signal_overrides(rt.si_signo, &rt));
	KUNIT_ASSERT_TRUE(test, uc_signal_overrides(SIGKILL, SEND_SIG_PRIV));

	for (i = 0; i < UC_NR_NS; i++)
		lim[i] = UC_HUGE_RLIMIT;
	c = uc_setup(test, BIT(UC_OP_RL_GET), lim);
	l = uc_ledger_new(test, c, &want);

	/* Real-time signals up to the recipient's limit. */
	k = 0;
	while (k < 2 * UC_FORCED_RLIMIT &&
	       uc_ovr_charge(l, t, uc_signal_overrides(rt.si_signo, &rt), UC_FORCED_RLIMIT,
			     want))
		k++;
	KUNIT_EXPECT_EQ_MSG(test, k, (long)UC_FORCED_RLIMIT,
			    "%s: %ld real-time signals charged, want its RLIMIT_SIGPENDING %d",
			    uc_leaf_name(c, t), k, UC_FORCED_RLIMIT);

	/* Forced signals at the limit, and with a limit of 0. */
	for (k = 0; k < UC_FORCED_CHARGES; k++)
		KUNIT_EXPECT_TRUE_MSG(test,
				      uc_ovr_charge(l, t, uc_signal_overrides(SIGSEGV, &segv),
						    UC_FORCED_RLIMIT, want),
				      "%s: forced SIGSEGV %ld refused at its RLIMIT_SIGPENDING %d",
				      uc_leaf_name(c, t), k + 1, UC_FORCED_RLIMIT);
	KUNIT_EXPECT_TRUE_MSG(test,
			      uc_ovr_charge(l, t, uc_signal_overrides(SIGKILL, SEND_SIG_PRIV),
					    0, want),
			      "%s: SIGKILL (SEND_SIG_PRIV) refused with RLIMIT_SIGPENDING 0",
			      uc_leaf_name(c, t));
	uc_expect_pending_all(c, want, "after the forced signals");
	KUNIT_EXPECT_EQ_MSG(test, uc_pending(&c->node[c->target[t].chain[0]]),
			    UC_FORCED_RLIMIT + UC_FORCED_CHARGES + 1L,
			    "%s: pending signals not exact", uc_leaf_name(c, t));

	/* Real-time signals are still refused: the count is past the limit. */
	KUNIT_EXPECT_FALSE_MSG(test,
			       uc_ovr_charge(l, t, uc_signal_overrides(rt.si_signo, &rt),
					     UC_FORCED_RLIMIT, want),
			       "%s: a real-time signal charged past its RLIMIT_SIGPENDING",
			       uc_leaf_name(c, t));

	kunit_release_action(test, uc_ledger_release, l);
	uc_check_counters(c);
	uc_check_released(c);
}

/* ---- ucounts_last_put_cred_rcu ------------------------------------------ */

/* A uid of the suite's own, in the initial namespace, for one cred at a time. */
#define UC_UID_CRED		(UC_UID_OWNER + 900)
#define UC_CRED_ROUNDS		8

static bool uc_cred_uid_gone(void *arg)
{
	return !ucounts_nr_hashed_for_uid(KUIDT_INIT(UC_UID_CRED));
}

/*
 * ucounts_last_put_cred_rcu: the last reference of a ucounts dropped where
 * the kernel drops it once a user's last task and cred are gone:
 * put_cred_rcu(), an RCU callback (softirq), puts the cred's ucounts. Each
 * round gives a fresh ucounts of (init_user_ns, UC_UID_CRED) to a cred that
 * runs as that uid, as set_cred_ucounts() would, and that nothing else
 * holds, puts the cred and waits until the ucounts is gone from the hash
 * table. lockdep then has ucounts_lock as taken in softirq (cgroup_reach
 * shows it); checked: nothing of the uid is left.
 */
static void ucounts_last_put_cred_rcu(struct kunit *test)
{
	const kuid_t uid = KUIDT_INIT(UC_UID_CRED);
	int round;

	KUNIT_ASSERT_TRUE_MSG(test, uc_cred_uid_gone(NULL), "uid %u in use before the case",
			      UC_UID_CRED);
	for (round = 0; round < UC_CRED_ROUNDS; round++) {
		struct ucounts *uc, *old;
		struct cred *cred;

		cred = prepare_creds();
		KUNIT_ASSERT_NOT_NULL(test, cred);
		uc = alloc_ucounts(&init_user_ns, uid);
		if (!uc) {
			abort_creds(cred);
			KUNIT_FAIL_AND_ABORT(test, "alloc_ucounts() failed");
		}
		cred->uid = uid;
		cred->euid = uid;
		cred->suid = uid;
		cred->fsuid = uid;
		old = cred->ucounts;
		cred->ucounts = uc;
		put_ucounts(old);
		/* The cred's only reference: put_cred_rcu() puts uc. */
		put_cred(cred);
		if (!cgk_wait_for(uc_cred_uid_gone, NULL, UC_FREE_TIMEOUT_MS))
			KUNIT_FAIL_AND_ABORT(test,
					     "round %d: the ucounts of uid %u left %d ms after its cred was put",
					     round, UC_UID_CRED, UC_FREE_TIMEOUT_MS);
	}
}

/* ---- signals_from_timers ------------------------------------------------ */

#define UC_UID_SIGNALS		(UC_UID_OWNER + 901)
#define UC_SIG_RUN_MS		300
#define UC_SIG_HARD_PERIOD_NS	(500 * NSEC_PER_USEC)
#define UC_SIG_SETTLE_MS	5000

/**
 * struct uc_sig - signals_from_timers: a victim and the timers that signal it
 * @herd: one user victim, running as UC_UID_SIGNALS, CGK_VICTIM_SIGNAL
 *	  blocked half of the time
 * @task: the victim, referenced by @herd until cgk_herd_stop()
 * @uc: a reference on the victim's ucounts, to read its charge
 * @hard: the hrtimer, in hardirq, as it_real_fn() runs
 * @soft: the timer_list, in softirq
 * @stop: set first when stopping; neither timer re-arms after it
 * @armed: the timers were started
 * @hard_sent: signals sent from the hrtimer; written by it only
 * @soft_sent: signals sent from the timer_list; written by it only
 * @forced_sent: of @soft_sent, CGK_VICTIM_FORCED_SIGNAL (every other one)
 * @send_error: the first error send_sig() returned, 0 if none
 */
struct uc_sig {
	struct cgk_herd *herd;
	struct task_struct *task;
	struct ucounts *uc;
	struct hrtimer hard;
	struct timer_list soft;
	bool stop;
	bool armed;
	unsigned long hard_sent;
	unsigned long soft_sent;
	unsigned long forced_sent;
	int send_error;
};

/* As it_real_fn() sends SIGALRM: a kernel signal, SEND_SIG_PRIV. */
static bool uc_sig_send(struct uc_sig *s, int sig)
{
	int err = send_sig(sig, s->task, 1);

	if (err && !READ_ONCE(s->send_error))
		WRITE_ONCE(s->send_error, err);
	return !err;
}

static enum hrtimer_restart uc_sig_hard_fn(struct hrtimer *timer)
{
	struct uc_sig *s = container_of(timer, struct uc_sig, hard);

	if (READ_ONCE(s->stop))
		return HRTIMER_NORESTART;
	if (uc_sig_send(s, CGK_VICTIM_SIGNAL))
		s->hard_sent++;
	hrtimer_forward_now(timer, ns_to_ktime(UC_SIG_HARD_PERIOD_NS));
	return HRTIMER_RESTART;
}

static void uc_sig_soft_fn(struct timer_list *timer)
{
	struct uc_sig *s = timer_container_of(s, timer, soft);
	bool forced = s->soft_sent & 1;

	if (READ_ONCE(s->stop))
		return;
	if (uc_sig_send(s, forced ? CGK_VICTIM_FORCED_SIGNAL : CGK_VICTIM_SIGNAL)) {
		s->soft_sent++;
		s->forced_sent += forced;
	}
	mod_timer(&s->soft, jiffies + 1);
}

static void uc_sig_stop_timers(struct uc_sig *s)
{
	WRITE_ONCE(s->stop, true);
	if (!s->armed)
		return;
	hrtimer_cancel(&s->hard);
	timer_shutdown_sync(&s->soft);
	s->armed = false;
}

static void uc_sig_release(void *arg)
{
	struct uc_sig *s = arg;

	uc_sig_stop_timers(s);
	cgk_herd_stop(s->herd, UC_SIG_SETTLE_MS);
	if (s->uc)
		put_ucounts(s->uc);
}

static bool uc_sig_uncharged(void *arg)
{
	struct uc_sig *s = arg;

	return !get_rlimit_value(s->uc, UCOUNT_RLIMIT_SIGPENDING);
}

static bool uc_sig_uid_gone(void *arg)
{
	return !ucounts_nr_hashed_for_uid(KUIDT_INIT(UC_UID_SIGNALS));
}

/*
 * signals_from_timers: pending signals queued, and charged, from the
 * contexts the kernel sends them in besides process context: an hrtimer in
 * hardirq (as it_real_fn() sends SIGALRM) and a timer_list in softirq, both
 * with SEND_SIG_PRIV, to a user victim that blocks the signals half of the
 * time and drops what is pending when it unblocks them. lockdep then has
 * the victim's siglock taken in hardirq and in softirq (cgroup_reach shows
 * it). Every other signal of the timer_list is below SIGRTMIN
 * (CGK_VICTIM_FORCED_SIGNAL), which __send_signal_locked() charges with
 * override_rlimit, as it does SIGALRM. Checked: every send succeeded, both
 * timers sent, forced signals among them, and once the victim exited,
 * nothing is charged to its user and its ucounts are freed.
 */
static void signals_from_timers(struct kunit *test)
{
	const kuid_t uid = KUIDT_INIT(UC_UID_SIGNALS);
	struct uc_sig *s;

	KUNIT_ASSERT_TRUE_MSG(test, uc_sig_uid_gone(NULL), "uid %u in use before the case",
			      UC_UID_SIGNALS);
	s = kunit_kzalloc(test, sizeof(*s), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, s);
	s->herd = cgk_herd_alloc(test, 1, CGK_VICTIM_USER | CGK_VICTIM_SIGNALS);
	KUNIT_ASSERT_NOT_NULL(test, s->herd);
	s->herd->uid = uid;
	KUNIT_ASSERT_EQ(test, 0, kunit_add_action_or_reset(test, uc_sig_release, s));
	s->uc = alloc_ucounts(&init_user_ns, uid);
	KUNIT_ASSERT_NOT_NULL(test, s->uc);
	s->task = cgk_herd_start(s->herd, 0, "cgk-uc-sig");
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, s->task);

	/* as it_real_fn()'s: hardirq, or softirq with PREEMPT_RT (siglock may sleep) */
	hrtimer_setup(&s->hard, uc_sig_hard_fn, CLOCK_MONOTONIC, HRTIMER_MODE_REL);
	timer_setup(&s->soft, uc_sig_soft_fn, 0);
	s->armed = true;
	hrtimer_start(&s->hard, ns_to_ktime(UC_SIG_HARD_PERIOD_NS), HRTIMER_MODE_REL);
	mod_timer(&s->soft, jiffies + 1);
	msleep(UC_SIG_RUN_MS);
	uc_sig_stop_timers(s);

	kunit_info(test, "%lu signals sent from hardirq, %lu from softirq (%lu forced)\n",
		   s->hard_sent, s->soft_sent, s->forced_sent);
	KUNIT_EXPECT_EQ_MSG(test, s->send_error, 0, "send_sig() from a timer failed: %d",
			    s->send_error);
	CGK_EXPECT_EXERCISED(test, s->hard_sent, "the hrtimer sent no signal");
	CGK_EXPECT_EXERCISED(test, s->soft_sent, "the timer_list sent no signal");
	CGK_EXPECT_EXERCISED(test, s->forced_sent, "the timer_list sent no forced signal");

	KUNIT_EXPECT_TRUE_MSG(test, cgk_herd_stop(s->herd, UC_SIG_SETTLE_MS),
			      "the victim did not exit within %d ms", UC_SIG_SETTLE_MS);
	if (!cgk_wait_for(uc_sig_uncharged, s, UC_SIG_SETTLE_MS))
		KUNIT_FAIL(test,
			   "%ld pending signals still charged to uid %u %d ms after its victim exited",
			   get_rlimit_value(s->uc, UCOUNT_RLIMIT_SIGPENDING), UC_UID_SIGNALS,
			   UC_SIG_SETTLE_MS);
	kunit_release_action(test, uc_sig_release, s);
	if (!cgk_wait_for(uc_sig_uid_gone, NULL, UC_FREE_TIMEOUT_MS))
		KUNIT_FAIL(test, "ucounts of uid %u left %d ms after its victim exited",
			   UC_UID_SIGNALS, UC_FREE_TIMEOUT_MS);
}

/* ---- rlimit_teardown_percpu_held ---------------------------------------- */

#define UC_TEARDOWN_CHARGES	6
/* Where ucounts of a churn uid charge and uncharge, on different CPUs. */
static const int uc_teardown_ns[] = {
	UC_NS_C(0), UC_NS_C(1), UC_NS_C(2), UC_NS_B(2),
};

/* Levels they charge: the owners of C0, C1 in B0, of C2 in B1, of Bs in A. */
static const int uc_teardown_parent[] = {
	UC_NODE_B(0), UC_NODE_B(1), UC_NODE_A,
};

/* How many of uc_teardown_ns charge each of those levels. */
static const int uc_teardown_fanin[] = { 2, 1, 4 };

/**
 * struct uc_teardown - the ucounts rlimit_teardown_percpu_held allocates
 * @uc: references from alloc_ucounts(), NULL once put
 * @charged: their charges not given back yet
 */
struct uc_teardown {
	struct ucounts *uc[ARRAY_SIZE(uc_teardown_ns)];
	long charged[ARRAY_SIZE(uc_teardown_ns)];
};

static void uc_teardown_put(void *arg)
{
	struct uc_teardown *td = arg;
	int i;

	for (i = 0; i < ARRAY_SIZE(td->uc); i++) {
		if (!td->uc[i])
			continue;
		for (; td->charged[i] > 0; td->charged[i]--)
			dec_rlimit_put_ucounts(td->uc[i], UC_RL_GET);
		put_ucounts(td->uc[i]);
		td->uc[i] = NULL;
	}
	set_cpus_allowed_ptr(current, cpu_possible_mask);
}

/* Run the test thread on the @k-th online CPU. */
static void uc_move_to_cpu(unsigned int k)
{
	unsigned int cpu = cpumask_nth(k % num_online_cpus(), cpu_online_mask);

	set_cpus_allowed_ptr(current, cpumask_of(cpu));
}

/* Levels whose escrow holds reservations on some CPU. */
static int uc_levels_with_percpu_amounts(struct uc_case *c)
{
	struct ucounts_escrow_for_test st;
	int i, held = 0;

	for (i = 0; i < ARRAY_SIZE(uc_teardown_parent); i++) {
		if (ucounts_escrow_read_for_test(c->node[uc_teardown_parent[i]].uc, &st) &&
		    st.reserved > 0)
			held++;
	}
	return held;
}

/*
 * Charges made on one CPU and uncharged on another leave reservations in
 * the escrow of every owner level (kernel/ucount.c): each level reports
 * exactly what is pending while the charges are held, and is back where it
 * was once they are uncharged; putting the ucounts and the namespaces
 * drains the escrows and frees everything.
 */
static void rlimit_teardown_percpu_held(struct kunit *test)
{
	kuid_t uid = uc_uid(1 + UC_NR_CHARGE_UIDS);
	struct uc_teardown *td;
	long lim[UC_NR_NS];
	struct uc_node *n;
	struct uc_case *c;
	int i, k;

	if (num_online_cpus() < 2)
		kunit_skip(test, "one CPU: nothing is left on another");
	for (i = 0; i < UC_NR_NS; i++)
		lim[i] = UC_HUGE_RLIMIT;
	c = uc_setup(test, BIT(UC_OP_RL_GET), lim);

	td = kunit_kzalloc(test, sizeof(*td), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, td);
	KUNIT_ASSERT_EQ(test, 0, kunit_add_action_or_reset(test, uc_teardown_put, td));

	for (i = 0; i < ARRAY_SIZE(uc_teardown_ns); i++) {
		const char *ns_name = uc_ns_name[uc_teardown_ns[i]];

		td->uc[i] = alloc_ucounts(c->ns[uc_teardown_ns[i]], uid);
		KUNIT_ASSERT_NOT_NULL_MSG(test, td->uc[i], "alloc_ucounts(%s, uid %u)",
					  ns_name, __kuid_val(uid));
		/* All charged on the first CPU ... */
		uc_move_to_cpu(0);
		for (k = 0; k < UC_TEARDOWN_CHARGES; k++) {
			KUNIT_ASSERT_TRUE_MSG(test,
					      cgk_sigpending_charge(td->uc[i], false, LONG_MAX),
					      "charge %d from (%s, uid %u) refused under huge limits",
					      k, ns_name, __kuid_val(uid));
			td->charged[i]++;
		}
	}
	for (i = 0; i < ARRAY_SIZE(uc_teardown_parent); i++) {
		n = &c->node[uc_teardown_parent[i]];
		KUNIT_EXPECT_EQ_MSG(test, uc_pending(n),
				    (long)uc_teardown_fanin[i] * UC_TEARDOWN_CHARGES,
				    "%s: %ld pending with %d charges through it held",
				    n->name, uc_pending(n),
				    uc_teardown_fanin[i] * UC_TEARDOWN_CHARGES);
	}
	/* ... and all uncharged on the second. */
	uc_move_to_cpu(1);
	for (i = 0; i < ARRAY_SIZE(uc_teardown_ns); i++) {
		for (; td->charged[i] > 0; td->charged[i]--)
			dec_rlimit_put_ucounts(td->uc[i], UC_RL_GET);
	}
	set_cpus_allowed_ptr(current, cpu_possible_mask);

	for (i = 0; i < ARRAY_SIZE(uc_teardown_parent); i++) {
		n = &c->node[uc_teardown_parent[i]];
		KUNIT_EXPECT_EQ_MSG(test, uc_pending(n), 0L,
				    "%s: %ld pending once every charge through it was uncharged",
				    n->name, uc_pending(n));
	}
	CGK_EXPECT_EXERCISED(test, uc_levels_with_percpu_amounts(c),
			     "no level holds amounts on a CPU: the case proves nothing");

	/* Free the ucounts that charged, then the tree. */
	kunit_release_action(test, uc_teardown_put, td);
	for (i = 0; i < ARRAY_SIZE(uc_teardown_parent); i++) {
		n = &c->node[uc_teardown_parent[i]];
		KUNIT_EXPECT_EQ_MSG(test, uc_pending(n), 0L,
				    "%s: %ld pending after the ucounts that charged it were freed",
				    n->name, uc_pending(n));
	}
	uc_check_counters(c);
	uc_check_released(c);
}

/* ---- rlimit_reported_exact ---------------------------------------------- */

/*
 * Limits by level, reached now and then by the workers; the odd Cs get a
 * lower one, so that siblings charge one level under different limits.
 */
static const long uc_reported_rlimit_max[4] = { 0, 128, 96, 64 };
#define UC_REPORTED_RLIMIT_LOW	48

/**
 * struct uc_reported - what rlimit_reported_exact gives back at the end
 * @c: the case
 * @gang: the gang whose workers still hold charges; NULL until created
 */
struct uc_reported {
	struct uc_case *c;
	struct cgk_gang *gang;
};

static void uc_reported_release(void *arg)
{
	struct uc_reported *r = arg;
	unsigned int i;

	for (i = 0; r->gang && i < r->gang->nr; i++) {
		struct uc_worker *me = r->gang->workers[i].priv;

		while (me && me->nr_held)
			uc_release(r->c, &me->held[--me->nr_held]);
	}
}

/* uc_step() without the final uncharge: holdings stay for the check. */
static const struct cgk_gang_ops uc_hold_ops = {
	.step = uc_step,
};

/*
 * Random charges and uncharges from every target; once the workers stopped,
 * still holding what they held, every level reports its true count.
 */
static void rlimit_reported_exact(struct kunit *test)
{
	unsigned int i, nr = cgk_param_threads(test);
	long lim[UC_NR_NS];
	struct uc_reported *r;
	struct uc_case *c;

	for (i = 0; i < UC_NR_NS; i++)
		lim[i] = uc_reported_rlimit_max[uc_ns_level(i)];
	for (i = 1; i < 6; i += 2)
		lim[UC_NS_C(i)] = UC_REPORTED_RLIMIT_LOW;
	c = uc_setup(test, BIT(UC_OP_RL_GET), lim);

	r = kunit_kzalloc(test, sizeof(*r), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, r);
	r->c = c;
	/* Registered before the gang, so it runs after the gang stopped. */
	KUNIT_ASSERT_EQ(test, 0, kunit_add_action_or_reset(test, uc_reported_release, r));

	r->gang = cgk_gang_create(test, nr, &uc_hold_ops, c);
	KUNIT_ASSERT_NOT_NULL(test, r->gang);
	for (i = 0; i < nr; i++) {
		r->gang->workers[i].priv = kunit_kzalloc(test, sizeof(struct uc_worker),
							 GFP_KERNEL);
		KUNIT_ASSERT_NOT_NULL(test, r->gang->workers[i].priv);
	}
	/* The check is of the state they leave: a quarter is mix enough. */
	r->gang->duration_ms = max(cgk_duration_ms() / 4, 10U);
	cgk_gang_run(r->gang);
	cgk_gang_report(r->gang);

	for (i = 0; i < UC_NR_NODES; i++) {
		struct uc_node *n = &c->node[i];
		long held = atomic_long_read(&n->shadow[1]);

		KUNIT_EXPECT_EQ_MSG(test, uc_pending(n), held,
				    "%s: get_rlimit_value() says %ld pending once the workers stopped, %ld charges through it are held",
				    n->name, uc_pending(n), held);
	}
	kunit_info(test, "%lu steps, %ld charges admitted, %ld refused\n",
		   cgk_gang_iterations(r->gang), atomic_long_read(&c->admitted),
		   atomic_long_read(&c->refused));

	kunit_release_action(test, uc_reported_release, r);
	uc_check_counters(c);
	uc_check_released(c);
}

/* ---- the escrow of namespace owners: helpers ----------------------------- */

/*
 * The owner nodes keep per-CPU reservations of pending signals for the
 * namespaces below them (kernel/ucount.c). The cases below build them up
 * on several CPUs, then lower a limit, charge on one CPU and uncharge on
 * another, take a CPU offline, or charge one level under several limits,
 * and check that no charge takes a level over the limit that applied to it,
 * that a charge that fits is never refused, and that get_rlimit_value() is
 * exact, whenever nothing is in flight.
 */

/* A limit far above what the CPUs reserve, so that reservations are kept. */
#define UC_ESCROW_LIMIT		600

/*
 * Set RLIMIT_SIGPENDING's rlimit_max of every namespace of a running case
 * (@lim, indexed as uc_ns_name) and what the owner nodes are checked
 * against. A lower limit lowers what the owner's escrow may reserve; a
 * higher one does not raise it (kernel/ucount.c), so cases that want
 * reservations set their limits in uc_setup(). The namespaces are the
 * case's own and go with it: nothing to restore.
 */
static void uc_set_sigpending_max(struct uc_case *c, const long *lim)
{
	int i;

	for (i = 0; i < UC_NR_NS; i++)
		set_userns_rlimit_max(c->ns[i], UC_RL_GET, lim[i]);
	uc_expect_sigpending_max(c, lim);
}

static bool uc_escrow_read(struct kunit *test, struct uc_node *n,
			   struct ucounts_escrow_for_test *st)
{
	if (ucounts_escrow_read_for_test(n->uc, st))
		return true;
	KUNIT_FAIL(test, "%s: owns namespaces but has no escrow", n->name);
	return false;
}

/* Every node reports, exactly, the charges held through it. */
static void uc_expect_reported(struct uc_case *c, const char *when)
{
	int i;

	for (i = 0; i < UC_NR_NODES; i++) {
		struct uc_node *n = &c->node[i];
		long held = atomic_long_read(&n->shadow[1]);

		KUNIT_EXPECT_EQ_MSG(c->test, uc_pending(n), held,
				    "%s: %s: get_rlimit_value() says %ld pending, %ld charges through it are held",
				    when, n->name, uc_pending(n), held);
	}
}

/*
 * Charge from target @t until refused: every charge that fits is admitted
 * and none past the limit, so exactly @want are, and @n then reports
 * @pending. Charges stay in @l.
 */
static void uc_expect_fit(struct uc_case *c, struct uc_ledger *l, unsigned int t,
			  long want, struct uc_node *n, long pending, const char *when)
{
	long k = uc_ledger_charge_upto(l, t, want + UC_ESCROW_LIMIT);
	char what[96];

	snprintf(what, sizeof(what), "%s: charges from %s before the first refusal",
		 when, uc_leaf_name(c, t));
	uc_expect_limit(c->test, what, k, want);
	KUNIT_EXPECT_EQ_MSG(c->test, uc_pending(n), pending,
			    "%s: %s reports %ld pending, want %ld",
			    when, n->name, uc_pending(n), pending);
}

/*
 * uc_expect_fit() with a ledger of its own, whose charges are given back
 * before it returns: what a sibling gets once everything else is back.
 */
static void uc_expect_fit_alone(struct uc_case *c, unsigned int t, long want,
				struct uc_node *n, long pending, const char *when)
{
	struct kunit *test = c->test;
	struct uc_ledger *l;

	l = kunit_kzalloc(test, sizeof(*l), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, l);
	l->c = c;
	KUNIT_ASSERT_EQ(test, 0, kunit_add_action_or_reset(test, uc_ledger_release, l));
	uc_expect_fit(c, l, t, want, n, pending, when);
	kunit_release_action(test, uc_ledger_release, l);
}

/* Let the test thread run anywhere again after uc_move_to_cpu(). */
static void uc_pin_release(void *arg)
{
	set_cpus_allowed_ptr(current, cpu_possible_mask);
}

/* ---- rlimit_escrow_cross_cpu --------------------------------------------- */

/* What a pair holds at most, over its share of the limit: together they fill it. */
#define UC_CROSS_OVER_SHARE	16
/* How often an uncharger looks at the escrow of the level under test. */
#define UC_CROSS_SAMPLE		32
/*
 * Runs of the pairs, each duration_ms long, until the level has refused a
 * charge, held reservations and held them again after exact mode: in one
 * run alone it misses one of them about one run in five (UML, 4 CPUs).
 */
#define UC_CROSS_ROUNDS		4

/**
 * struct uc_pair - a charger and an uncharger on two CPUs
 * @held: charges the charger made and the uncharger has not given back
 * @total: the sum of @held
 * @draining: the charger waits for the uncharger to give back everything;
 *	      the charger's own
 */
struct uc_pair {
	atomic_long_t held[UC_NR_TARGETS];
	atomic_long_t total;
	bool draining;
};

/**
 * struct uc_cross - the shared state of rlimit_escrow_cross_cpu
 * @c: the case
 * @node: the level whose limit binds (A's owner)
 * @pairs: @nr_pairs of them, workers 2i (charger) and 2i + 1 (uncharger)
 * @pair_max: what a pair holds at most: a little over its share of the limit
 * @targets: where chargers charge from, @nr_targets of them
 * @charges: admitted; @refusals: refused; @uncharges: given back
 * @held: what all pairs hold
 * @emptying: a charge was refused: every charger waits until the pairs
 *	      hold nothing, so that the level's count falls to 0 and the next
 *	      charge enables its escrow again (with pairs emptied one at a
 *	      time, the others keep the count above where it re-enables)
 * @seen_reserved: an uncharger saw reservations at @node
 * @seen_exact: an uncharger saw @node drained
 * @seen_reenabled: an uncharger saw reservations after @node was drained
 */
struct uc_cross {
	struct uc_case *c;
	struct uc_node *node;
	struct uc_pair *pairs;
	unsigned int nr_pairs;
	long pair_max;
	u8 targets[UC_NR_TARGETS];
	unsigned int nr_targets;
	atomic_long_t charges, refusals, uncharges;
	atomic_long_t held;
	bool emptying;
	atomic_t seen_reserved, seen_exact, seen_reenabled;
};

struct uc_cross_worker {
	bool pinned;
	unsigned long steps;
};

static void uc_cross_pin(struct cgk_worker *w, struct uc_cross_worker *me)
{
	unsigned int cpu = cpumask_nth(w->index % num_online_cpus(), cpu_online_mask);

	set_cpus_allowed_ptr(current, cpumask_of(cpu));
	me->pinned = true;
}

static void uc_cross_charge(struct cgk_worker *w, struct uc_cross *x,
			    struct uc_pair *p)
{
	struct uc_case *c = x->c;
	char why[CGK_FAILURE_LEN];
	unsigned int t;

	if (READ_ONCE(x->emptying)) {
		if (atomic_long_read(&x->held)) {
			usleep_range(20, 50);
			return;
		}
		WRITE_ONCE(x->emptying, false);
	}
	if (p->draining) {
		if (atomic_long_read(&p->total)) {
			usleep_range(20, 50);
			return;
		}
		p->draining = false;
	}
	t = x->targets[cgk_rand(w, x->nr_targets)];
	if (!cgk_sigpending_charge(uc_leaf(c, t), false, LONG_MAX)) {
		atomic_long_inc(&x->refusals);
		WRITE_ONCE(x->emptying, true);
		return;
	}
	atomic_long_inc(&x->charges);
	if (!uc_shadow_admit(c, &c->target[t], 1, 1, why, sizeof(why)))
		cgk_fail(w, "%s", why);
	atomic_long_inc(&p->held[t]);
	atomic_long_inc(&x->held);
	if (atomic_long_inc_return(&p->total) >= x->pair_max)
		p->draining = true;
}

static void uc_cross_sample(struct uc_cross *x)
{
	struct ucounts_escrow_for_test st;

	if (!ucounts_escrow_read_for_test(x->node->uc, &st))
		return;
	if (st.exact)
		atomic_set(&x->seen_exact, 1);
	if (st.reserved > 0) {
		atomic_set(&x->seen_reserved, 1);
		if (atomic_read(&x->seen_exact))
			atomic_set(&x->seen_reenabled, 1);
	}
}

static void uc_cross_uncharge(struct cgk_worker *w, struct uc_cross *x,
			      struct uc_pair *p, struct uc_cross_worker *me)
{
	struct uc_case *c = x->c;
	unsigned int k, t, start = cgk_rand(w, x->nr_targets);

	if (!(++me->steps % UC_CROSS_SAMPLE))
		uc_cross_sample(x);
	for (k = 0; k < x->nr_targets; k++) {
		t = x->targets[(start + k) % x->nr_targets];
		if (atomic_long_dec_if_positive(&p->held[t]) >= 0)
			break;
	}
	if (k == x->nr_targets) {
		usleep_range(10, 20);
		return;
	}
	uc_shadow_release(c, &c->target[t], 1, 1);
	dec_rlimit_put_ucounts(uc_leaf(c, t), UC_RL_GET);
	atomic_long_dec(&p->total);
	atomic_long_dec(&x->held);
	atomic_long_inc(&x->uncharges);
}

static void uc_cross_step(struct cgk_worker *w)
{
	struct uc_cross *x = w->gang->data;
	struct uc_cross_worker *me = w->priv;
	struct uc_pair *p = &x->pairs[w->index / 2];

	if (!me->pinned)
		uc_cross_pin(w, me);
	if (w->index % 2)
		uc_cross_uncharge(w, x, p, me);
	else
		uc_cross_charge(w, x, p);
}

static void uc_cross_fini(struct cgk_worker *w)
{
	set_cpus_allowed_ptr(current, cpu_possible_mask);
}

static const struct cgk_gang_ops uc_cross_ops = {
	.step = uc_cross_step,
	.fini = uc_cross_fini,
};

/* Give back what the pairs still hold. */
static void uc_cross_release(void *arg)
{
	struct uc_cross *x = arg;
	unsigned int i, t;

	for (i = 0; i < x->nr_pairs; i++) {
		for (t = 0; t < UC_NR_TARGETS; t++) {
			while (atomic_long_dec_if_positive(&x->pairs[i].held[t]) >= 0) {
				uc_shadow_release(x->c, &x->c->target[t], 1, 1);
				dec_rlimit_put_ucounts(uc_leaf(x->c, t), UC_RL_GET);
			}
		}
	}
}

/*
 * The escrow cases' hierarchy: B0, B1 and B2 limited to UC_ESCROW_LIMIT,
 * every other namespace unlimited, and the leaves charged with no limit
 * of their own, as cgk_sigpending_charge() charges them.
 */
static struct uc_case *uc_escrow_setup(struct kunit *test)
{
	long lim[UC_NR_NS];
	struct uc_case *c;
	unsigned int i, t;

	for (i = 0; i < UC_NR_NS; i++)
		lim[i] = UC_HUGE_RLIMIT;
	for (i = 0; i < 3; i++)
		lim[UC_NS_B(i)] = UC_ESCROW_LIMIT;
	c = uc_setup(test, BIT(UC_OP_RL_GET), lim);
	for (t = 0; t < UC_NR_TARGETS; t++)
		c->node[c->target[t].chain[0]].rlimit_max = LONG_MAX;
	return c;
}

/*
 * Charges made on one CPU and given back on another: pairs of workers,
 * each bound to two CPUs, fill A's level to its limit together and, once
 * a charge is refused, all empty it again, so that the chargers' CPUs
 * refill their escrows, the unchargers' give back, and the level goes
 * from reservations to exact mode and back, over and over. Every
 * admitted charge keeps every level within its limit; once the workers
 * stop, every level reports exactly what is held; after that a sibling
 * gets exactly the limit.
 */
static void rlimit_escrow_cross_cpu(struct kunit *test)
{
	unsigned int i, round, nr_pairs = num_online_cpus() / 2;
	unsigned long writes;
	struct cgk_gang *gang;
	struct uc_cross *x;
	struct uc_case *c;
	bool ok;

	if (!nr_pairs)
		kunit_skip(test, "one CPU: nothing to uncharge on another");
	c = uc_escrow_setup(test);

	x = kunit_kzalloc(test, sizeof(*x), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, x);
	x->pairs = kunit_kcalloc(test, nr_pairs, sizeof(*x->pairs), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, x->pairs);
	x->c = c;
	x->node = &c->node[UC_NODE_A];
	x->nr_pairs = nr_pairs;
	x->pair_max = UC_ESCROW_LIMIT / nr_pairs + UC_CROSS_OVER_SHARE;
	x->nr_targets = uc_pick_targets(x->targets, UC_EXACT_B0_B1);
	/* Registered before the gang, so it runs after the gang stopped. */
	KUNIT_ASSERT_EQ(test, 0, kunit_add_action_or_reset(test, uc_cross_release, x));

	writes = ucounts_shared_writes_for_test();
	for (round = 1; round <= UC_CROSS_ROUNDS; round++) {
		gang = cgk_gang_create(test, 2 * nr_pairs, &uc_cross_ops, x);
		KUNIT_ASSERT_NOT_NULL(test, gang);
		for (i = 0; i < gang->nr; i++) {
			gang->workers[i].priv =
				kunit_kzalloc(test, sizeof(struct uc_cross_worker), GFP_KERNEL);
			KUNIT_ASSERT_NOT_NULL(test, gang->workers[i].priv);
		}
		cgk_gang_run(gang);
		ok = cgk_gang_report(gang);
		if (!ok || (atomic_long_read(&x->refusals) && atomic_read(&x->seen_reserved) &&
			    atomic_read(&x->seen_reenabled)))
			break;
	}
	writes = ucounts_shared_writes_for_test() - writes;

	kunit_info(test, "%u round(s) of %u pairs: %ld charges admitted, %ld refused, %ld given back on another CPU; A's level seen with reservations %d, drained %d, with reservations after a drain %d; %lu writes of owners' counts (%lu per 100 charges and uncharges)\n",
		   min_t(unsigned int, round, UC_CROSS_ROUNDS), nr_pairs,
		   atomic_long_read(&x->charges), atomic_long_read(&x->refusals),
		   atomic_long_read(&x->uncharges), atomic_read(&x->seen_reserved),
		   atomic_read(&x->seen_exact), atomic_read(&x->seen_reenabled), writes,
		   writes * 100 / max(1L, atomic_long_read(&x->charges) +
				      atomic_long_read(&x->uncharges)));
	CGK_EXPECT_EXERCISED(test, atomic_long_read(&x->refusals),
			     "no charge was refused: the level never reached its limit");
	CGK_EXPECT_EXERCISED(test, atomic_read(&x->seen_reserved),
			     "A's level never held reservations");
	CGK_EXPECT_EXERCISED(test, atomic_read(&x->seen_reenabled),
			     "A's level never held reservations again after exact mode");

	uc_expect_reported(c, "workers stopped");
	kunit_release_action(test, uc_cross_release, x);
	uc_expect_reported(c, "all given back");

	uc_expect_fit_alone(c, UC_TARGET(UC_NS_C(0), 1), UC_ESCROW_LIMIT, x->node,
			    UC_ESCROW_LIMIT, "after the pairs");

	uc_check_counters(c);
	uc_check_released(c);
}

/* ---- rlimit_escrow_lowered ----------------------------------------------- */

/*
 * A limit lowered while the escrow of its level holds reservations on
 * several CPUs: workers charge and uncharge at random under A until they
 * stop, holding what they hold; the test thread leaves reservations on its
 * own CPU too, then lowers B0's limit to one more than what A's level
 * holds. The level must drain (it holds more than that), report exactly
 * what is held, and give B0 exactly one more charge, on the very CPU that
 * held reservations; B1, whose limit is unchanged, exactly the rest of its.
 */
static void rlimit_escrow_lowered(struct kunit *test)
{
	const unsigned int b0 = UC_TARGET(UC_NS_C(0), 1), b1 = UC_TARGET(UC_NS_C(2), 1);
	unsigned int i, nr = cgk_param_threads(test);
	struct ucounts_escrow_for_test before, after;
	struct uc_reported *r;
	struct uc_ledger *l;
	long lim[UC_NR_NS], held;
	struct uc_node *a;
	struct uc_case *c;

	for (i = 0; i < UC_NR_NS; i++)
		lim[i] = UC_HUGE_RLIMIT;
	for (i = 0; i < 3; i++)
		lim[UC_NS_B(i)] = UC_ESCROW_LIMIT;
	c = uc_setup(test, BIT(UC_OP_RL_GET), lim);
	a = &c->node[UC_NODE_A];

	r = kunit_kzalloc(test, sizeof(*r), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, r);
	r->c = c;
	KUNIT_ASSERT_EQ(test, 0, kunit_add_action_or_reset(test, uc_reported_release, r));
	r->gang = cgk_gang_create(test, nr, &uc_hold_ops, c);
	KUNIT_ASSERT_NOT_NULL(test, r->gang);
	for (i = 0; i < nr; i++) {
		r->gang->workers[i].priv = kunit_kzalloc(test, sizeof(struct uc_worker),
							 GFP_KERNEL);
		KUNIT_ASSERT_NOT_NULL(test, r->gang->workers[i].priv);
	}
	r->gang->duration_ms = max(cgk_duration_ms() / 4, 10U);
	cgk_gang_run(r->gang);
	cgk_gang_report(r->gang);
	uc_expect_reported(c, "workers stopped");

	l = kunit_kzalloc(test, sizeof(*l), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, l);
	l->c = c;
	KUNIT_ASSERT_EQ(test, 0, kunit_add_action_or_reset(test, uc_ledger_release, l));
	KUNIT_ASSERT_EQ(test, 0, kunit_add_action_or_reset(test, uc_pin_release, NULL));
	uc_move_to_cpu(0);
	/* Reservations on this CPU: a charge from B1 and its uncharge. */
	KUNIT_ASSERT_TRUE(test, uc_ledger_charge(l, b1));
	uc_ledger_uncharge(l);

	if (!uc_escrow_read(test, a, &before))
		return;
	held = atomic_long_read(&a->shadow[1]);
	KUNIT_EXPECT_GT_MSG(test, ucounts_escrow_cpu_for_test(a->uc, raw_smp_processor_id()), 0L,
			    "%s: no reservation on this CPU after a charge and its uncharge",
			    a->name);
	CGK_EXPECT_EXERCISED(test, before.count > held + 1,
			     "A's level held too little for lowering the limit to drain it");

	lim[UC_NS_B(0)] = held + 1;
	uc_set_sigpending_max(c, lim);
	if (!uc_escrow_read(test, a, &after))
		return;
	kunit_info(test, "%s: %ld held, %ld reserved on %u CPUs, limit %ld; B0's lowered to %ld: %s, %ld reserved\n",
		   a->name, held, before.reserved, before.cpus_reserved, before.min_limit,
		   held + 1, after.exact ? "exact" : "reserving", after.reserved);
	if (before.count > held + 1) {
		KUNIT_EXPECT_TRUE_MSG(test, after.exact,
				      "%s: count %ld past the lowered limit %ld, not drained",
				      a->name, after.count, held + 1);
		KUNIT_EXPECT_EQ_MSG(test, after.count, held,
				    "%s: count %ld once drained, %ld charges held",
				    a->name, after.count, held);
	}
	KUNIT_EXPECT_EQ_MSG(test, uc_pending(a), held,
			    "%s reports %ld pending, %ld held", a->name, uc_pending(a), held);

	uc_expect_fit(c, l, b0, 1, a, held + 1, "B0's limit lowered");
	uc_expect_fit(c, l, b1, UC_ESCROW_LIMIT - held - 1, a, UC_ESCROW_LIMIT,
		      "B1 next to it");

	kunit_release_action(test, uc_ledger_release, l);
	kunit_release_action(test, uc_pin_release, NULL);
	kunit_release_action(test, uc_reported_release, r);
	uc_check_counters(c);
	uc_check_released(c);
}

/* ---- charge-only races with one limit per source ------------------------- */

#define UC_RACE_MAX_SRC		4

/**
 * struct uc_race_src - where some workers of a race charge from
 * @desc: for messages
 * @uc: the ucounts charged, the charge's first level
 * @own: the first level's own limit
 * @limit: the limit these charges have at the level checked (may be
 *	   lowered during the race: smp_store_release() after the kernel's)
 */
struct uc_race_src {
	const char *desc;
	struct ucounts *uc;
	long own;
	long limit;
};

/**
 * struct uc_race - charges only, every charging worker until refused
 * @node: the level checked
 * @base: what @node held before the race
 * @src: the sources, @nr_src of them; worker i charges from i % @nr_src
 * @nr_chargers: workers that charge; one more, if @lower_ns is set, lowers
 * @lower_ns: the namespace whose limit that worker lowers, once @done
 *	      reaches @lower_after, to @base + @done + @lower_headroom
 * @lower_src: the source whose limit at @node that is
 * @lowered_to: the limit it set, 0 until then
 * @started: charging workers that ran a step
 * @done: charges admitted and returned, every source
 * @admitted: per source
 * @finished: charging workers refused; the last one stops the gang
 *
 * No charge is given back during the race, so a charge admitted after
 * @done read k was admitted with at least @base + k + 1 pending at @node:
 * that must be within the limit of its source.
 */
struct uc_race {
	struct uc_node *node;
	long base;
	struct uc_race_src src[UC_RACE_MAX_SRC];
	unsigned int nr_src;
	unsigned int nr_chargers;
	struct user_namespace *lower_ns;
	long lower_after;
	long lower_headroom;
	unsigned int lower_src;
	long lowered_to;
	atomic_t started;
	atomic_long_t done;
	atomic_long_t admitted[UC_RACE_MAX_SRC];
	atomic_t finished;
};

struct uc_race_worker {
	long charged;
	bool started;
	bool finished;
};

/*
 * Charges are much faster than a scheduler tick: without sleeping now and
 * then, the first workers on each CPU would take the whole limit before
 * the others ran at all (PREEMPT_VOLUNTARY kthreads yield at the tick).
 */
#define UC_RACE_YIELD_EVERY	4

/*
 * A race ends when every charger was refused: a few hundred charges and
 * their sleeps. Its time bound only stops a kernel that never refuses, so
 * it does not shrink with duration_ms, or a short or slow run would stop
 * the chargers before the limit (seen at duration_ms=200 under lockdep).
 */
#define UC_RACE_BOUND_MS	10000U

/* The lowering worker: lower a limit while the others charge. */
static void uc_race_lower(struct uc_race *r)
{
	long limit;

	if (r->lowered_to || (atomic_long_read(&r->done) < r->lower_after &&
			      atomic_read(&r->finished) < r->nr_chargers)) {
		usleep_range(5, 10);
		return;
	}
	limit = r->base + atomic_long_read(&r->done) + r->lower_headroom;
	if (limit >= READ_ONCE(r->src[r->lower_src].limit)) {
		r->lowered_to = -1;	/* too late: not a lowering */
		return;
	}
	set_userns_rlimit_max(r->lower_ns, UC_RL_GET, limit);
	/* Charges that see it started after the kernel had it. */
	smp_store_release(&r->src[r->lower_src].limit, limit);
	r->lowered_to = limit;
}

static void uc_race_step(struct cgk_worker *w)
{
	struct uc_race *r = w->gang->data;
	struct uc_race_worker *me = w->priv;
	struct uc_race_src *s = &r->src[w->index % r->nr_src];
	long limit, before;

	if (w->index >= r->nr_chargers) {
		uc_race_lower(r);
		return;
	}
	if (me->finished) {
		usleep_range(50, 100);
		return;
	}
	/* Start together, so that every source races every other. */
	if (!me->started) {
		me->started = true;
		atomic_inc(&r->started);
	}
	if (atomic_read(&r->started) < r->nr_chargers) {
		usleep_range(5, 10);
		return;
	}
	/* A limit lowered before this charge started applies to it. */
	limit = smp_load_acquire(&s->limit);
	before = atomic_long_read(&r->done);
	if (!cgk_sigpending_charge(s->uc, false, s->own)) {
		me->finished = true;
		if (atomic_inc_return(&r->finished) == r->nr_chargers)
			WRITE_ONCE(w->gang->stop, true);
		return;
	}
	me->charged++;
	atomic_long_inc(&r->admitted[w->index % r->nr_src]);
	if (r->base + before + 1 > limit)
		cgk_fail(w, "%s: admitted with at least %ld pending at %s, its limit there %ld",
			 s->desc, r->base + before + 1, r->node->name, limit);
	atomic_long_inc(&r->done);
	if (!(me->charged % UC_RACE_YIELD_EVERY))
		usleep_range(2, 5);
}

static const struct cgk_gang_ops uc_race_ops = {
	.step = uc_race_step,
};

/* Give back what the workers of a race charged. */
static void uc_race_release(void *arg)
{
	struct cgk_gang *gang = arg;
	struct uc_race *r = gang->data;
	unsigned int i;

	for (i = 0; i < gang->nr; i++) {
		struct uc_race_worker *me = gang->workers[i].priv;

		for (; me && me->charged > 0; me->charged--)
			dec_rlimit_put_ucounts(r->src[i % r->nr_src].uc, UC_RL_GET);
	}
}

static struct cgk_gang *uc_race_create(struct kunit *test, struct uc_race *r,
				       unsigned int nr)
{
	struct cgk_gang *gang;
	unsigned int i;

	r->base = uc_pending(r->node);
	r->nr_chargers = nr;
	if (r->lower_ns)
		nr++;
	gang = cgk_gang_create(test, nr, &uc_race_ops, r);
	KUNIT_ASSERT_NOT_NULL(test, gang);
	gang->duration_ms = max(gang->duration_ms, UC_RACE_BOUND_MS);
	for (i = 0; i < nr; i++) {
		gang->workers[i].priv = kunit_kzalloc(test, sizeof(struct uc_race_worker),
						      GFP_KERNEL);
		KUNIT_ASSERT_NOT_NULL(test, gang->workers[i].priv);
	}
	KUNIT_ASSERT_EQ(test, 0, kunit_add_action_or_reset(test, uc_race_release, gang));
	return gang;
}

/* After a race: exactly @want admitted in all, and reported at the node. */
static void uc_race_expect(struct kunit *test, struct cgk_gang *gang, long want)
{
	struct uc_race *r = gang->data;
	long done = atomic_long_read(&r->done);
	unsigned int i;

	for (i = 0; i < r->nr_src; i++) {
		kunit_info(test, "%s: %ld admitted\n", r->src[i].desc,
			   atomic_long_read(&r->admitted[i]));
		CGK_EXPECT_EXERCISED(test, atomic_long_read(&r->admitted[i]),
				     "a source had no charge admitted: the sources did not race");
	}
	KUNIT_EXPECT_EQ_MSG(test, atomic_read(&r->finished), (int)r->nr_chargers,
			    "%d of %u workers stopped by the time bound, not by a refusal",
			    (int)r->nr_chargers - atomic_read(&r->finished), r->nr_chargers);
	uc_expect_limit(test, r->node->name, r->base + done, want);
	KUNIT_EXPECT_EQ_MSG(test, uc_pending(r->node), r->base + done,
			    "%s reports %ld pending, %ld held", r->node->name,
			    uc_pending(r->node), r->base + done);
}

/* ---- rlimit_escrow_lowered_racing ---------------------------------------- */

/* How far above what is done B0's limit is lowered to, while charges race. */
#define UC_RACE_HEADROOM	24

/*
 * The same while charges race: workers from B0 and from B1 charge A's level
 * (both limited to UC_ESCROW_LIMIT there) until refused; once a tenth of it
 * is charged, the test thread lowers B0's limit to what is charged then,
 * plus a little. B0's charges that start after that must keep within it,
 * B1's get exactly the rest of theirs.
 */
static void rlimit_escrow_lowered_racing(struct kunit *test)
{
	unsigned int i, nr = cgk_param_threads(test);
	struct cgk_gang *gang;
	long lim[UC_NR_NS];
	struct uc_race *r;
	struct uc_case *c;

	for (i = 0; i < UC_NR_NS; i++)
		lim[i] = UC_HUGE_RLIMIT;
	lim[UC_NS_B(0)] = UC_ESCROW_LIMIT;
	lim[UC_NS_B(1)] = UC_ESCROW_LIMIT;
	c = uc_setup(test, BIT(UC_OP_RL_GET), lim);

	r = kunit_kzalloc(test, sizeof(*r), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, r);
	r->node = &c->node[UC_NODE_A];
	r->src[0] = (struct uc_race_src){ "B0", uc_leaf(c, UC_TARGET(UC_NS_B(0), 1)),
					  LONG_MAX, UC_ESCROW_LIMIT };
	r->src[1] = (struct uc_race_src){ "B1", uc_leaf(c, UC_TARGET(UC_NS_B(1), 1)),
					  LONG_MAX, UC_ESCROW_LIMIT };
	r->nr_src = 2;
	r->lower_ns = c->ns[UC_NS_B(0)];
	r->lower_src = 0;
	r->lower_after = UC_ESCROW_LIMIT / 10;
	r->lower_headroom = UC_RACE_HEADROOM;
	gang = uc_race_create(test, r, nr);
	cgk_gang_run(gang);
	cgk_gang_report(gang);

	kunit_info(test, "B0's limit lowered to %ld while charges raced\n", r->lowered_to);
	CGK_EXPECT_EXERCISED(test, r->lowered_to > 0 ? r->lowered_to : 0,
			     "B0's limit was not lowered while the charges raced");
	uc_race_expect(test, gang, UC_ESCROW_LIMIT);

	kunit_release_action(test, uc_race_release, gang);
	uc_check_counters(c);
	uc_check_released(c);
}

/* ---- rlimit_escrow_mixed_limits ------------------------------------------ */

/* A's owner node: limits of B0, its own tasks, B1, B2 there. */
#define UC_MIXED_B0		200
#define UC_MIXED_OWNER		300
#define UC_MIXED_B1		400
#define UC_MIXED_B2		800

/* The owner's own pending signals on A's level (its first level). */
struct uc_owner {
	struct ucounts *uc;
	long charged;
};

static bool uc_owner_charge(struct uc_owner *o)
{
	if (!cgk_sigpending_charge(o->uc, false, UC_MIXED_OWNER))
		return false;
	o->charged++;
	return true;
}

static void uc_owner_release(void *arg)
{
	struct uc_owner *o = arg;

	for (; o->charged > 0; o->charged--)
		dec_rlimit_put_ucounts(o->uc, UC_RL_GET);
}

/*
 * Heterogeneous limits on one level: A's owner node charged from B0, B1
 * and B2, each with its own limit there, and by the owner's own tasks, for
 * which the node is their first level, with a limit of their own. First the
 * test thread alone, on one CPU: B0 leaves reservations, the owner's tasks
 * charge past B0's limit, and B0 must then be refused on that CPU; each
 * source gets exactly what its limit leaves. Then workers race from all
 * four until refused, each charge within its own limit.
 */
static void rlimit_escrow_mixed_limits(struct kunit *test)
{
	const unsigned int b0 = UC_TARGET(UC_NS_B(0), 1), b1 = UC_TARGET(UC_NS_B(1), 1);
	const unsigned int b2 = UC_TARGET(UC_NS_B(2), 1);
	struct ucounts_escrow_for_test st;
	struct cgk_gang *gang;
	struct uc_owner *o;
	struct uc_ledger *l;
	long lim[UC_NR_NS];
	struct uc_race *r;
	struct uc_node *a;
	struct uc_case *c;
	unsigned int i;
	long k;

	for (i = 0; i < UC_NR_NS; i++)
		lim[i] = UC_HUGE_RLIMIT;
	lim[UC_NS_B(0)] = UC_MIXED_B0;
	lim[UC_NS_B(1)] = UC_MIXED_B1;
	lim[UC_NS_B(2)] = UC_MIXED_B2;
	c = uc_setup(test, BIT(UC_OP_RL_GET), lim);
	a = &c->node[UC_NODE_A];

	l = kunit_kzalloc(test, sizeof(*l), GFP_KERNEL);
	o = kunit_kzalloc(test, sizeof(*o), GFP_KERNEL);
	KUNIT_ASSERT_TRUE(test, l && o);
	l->c = c;
	o->uc = a->uc;
	KUNIT_ASSERT_EQ(test, 0, kunit_add_action_or_reset(test, uc_ledger_release, l));
	KUNIT_ASSERT_EQ(test, 0, kunit_add_action_or_reset(test, uc_owner_release, o));
	KUNIT_ASSERT_EQ(test, 0, kunit_add_action_or_reset(test, uc_pin_release, NULL));
	uc_move_to_cpu(0);

	/* B0 reserves on this CPU; the owner's tasks charge past B0's limit. */
	KUNIT_ASSERT_TRUE(test, uc_ledger_charge(l, b0));
	KUNIT_EXPECT_GT_MSG(test, ucounts_escrow_cpu_for_test(a->uc, raw_smp_processor_id()), 0L,
			    "%s: no reservation on this CPU after B0's first charge", a->name);
	k = 1;
	while (k < UC_MIXED_B0 + 50 && uc_owner_charge(o))
		k++;
	KUNIT_EXPECT_EQ_MSG(test, k, UC_MIXED_B0 + 50L,
			    "the owner's tasks: refused at %ld pending, under their limit %d",
			    k, UC_MIXED_OWNER);
	if (uc_escrow_read(test, a, &st)) {
		KUNIT_EXPECT_TRUE_MSG(test, st.exact && !st.reserved,
				      "%s: count %ld past B0's limit %d with %ld reserved",
				      a->name, st.count, UC_MIXED_B0, st.reserved);
	}
	KUNIT_EXPECT_FALSE_MSG(test, uc_ledger_charge(l, b0),
			       "B0 charged with %ld pending at %s, past its limit %d",
			       uc_pending(a), a->name, UC_MIXED_B0);
	uc_expect_fit(c, l, b1, UC_MIXED_B1 - k, a, UC_MIXED_B1, "B1 after the owner");
	KUNIT_EXPECT_FALSE_MSG(test, uc_owner_charge(o),
			       "the owner's tasks charged with %ld pending at %s, past their limit %d",
			       uc_pending(a), a->name, UC_MIXED_OWNER);
	uc_expect_fit(c, l, b2, UC_MIXED_B2 - UC_MIXED_B1, a, UC_MIXED_B2, "B2 last");
	/* One given back: only B2's limit leaves room for it. */
	dec_rlimit_put_ucounts(uc_leaf(c, b2), UC_RL_GET);
	l->charged[b2]--;
	KUNIT_EXPECT_FALSE(test, uc_ledger_charge(l, b0));
	KUNIT_EXPECT_FALSE(test, uc_owner_charge(o));
	KUNIT_EXPECT_FALSE(test, uc_ledger_charge(l, b1));
	uc_expect_fit(c, l, b2, 1, a, UC_MIXED_B2, "B2 after one given back");

	uc_ledger_uncharge(l);
	uc_owner_release(o);
	kunit_release_action(test, uc_pin_release, NULL);
	KUNIT_EXPECT_EQ(test, uc_pending(a), 0L);

	/* All four race, each within its own limit. */
	r = kunit_kzalloc(test, sizeof(*r), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, r);
	r->node = a;
	r->src[0] = (struct uc_race_src){ "B0", uc_leaf(c, b0), LONG_MAX, UC_MIXED_B0 };
	r->src[1] = (struct uc_race_src){ "the owner's tasks", a->uc, UC_MIXED_OWNER,
					  UC_MIXED_OWNER };
	r->src[2] = (struct uc_race_src){ "B1", uc_leaf(c, b1), LONG_MAX, UC_MIXED_B1 };
	r->src[3] = (struct uc_race_src){ "B2", uc_leaf(c, b2), LONG_MAX, UC_MIXED_B2 };
	r->nr_src = 4;
	gang = uc_race_create(test, r, 2 * r->nr_src);
	cgk_gang_run(gang);
	cgk_gang_report(gang);
	uc_race_expect(test, gang, UC_MIXED_B2);
	kunit_release_action(test, uc_race_release, gang);

	kunit_release_action(test, uc_owner_release, o);
	kunit_release_action(test, uc_ledger_release, l);
	uc_check_counters(c);
	uc_check_released(c);
}

/* ---- rlimit_escrow_cpu_hotplug ------------------------------------------- */

/* On the CPU about to go offline: leave reservations at every owner level. */
static int uc_reserve_here(void *arg)
{
	struct uc_case *c = arg;
	struct ucounts *uc = uc_leaf(c, UC_TARGET(UC_NS_C(0), 1));

	if (!cgk_sigpending_charge(uc, false, LONG_MAX))
		return -EAGAIN;
	dec_rlimit_put_ucounts(uc, UC_RL_GET);
	return 0;
}

/*
 * Random charges and uncharges at every level, all limits far above what
 * is held, while a shuffler moves the workers between CPUs and, where the
 * kernel has CPU hotplug, CPUs go offline and come back with reservations
 * on them. Then one CPU is taken offline holding reservations and kept
 * offline: every level reports exactly what is held, a sibling gets
 * exactly the limit of A's level, and the namespaces are freed with
 * nothing left behind, all with that CPU offline.
 */
static void rlimit_escrow_cpu_hotplug(struct kunit *test)
{
	unsigned int i, nr = cgk_param_threads(test);
	struct uc_reported *r;
	struct cgk_cpus *cpus;
	long lim[UC_NR_NS];
	struct uc_node *a;
	struct uc_case *c;
	int cpu = -1;

	for (i = 0; i < UC_NR_NS; i++)
		lim[i] = UC_ESCROW_LIMIT;
	c = uc_setup(test, BIT(UC_OP_RL_GET), lim);
	a = &c->node[UC_NODE_A];

	r = kunit_kzalloc(test, sizeof(*r), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, r);
	r->c = c;
	KUNIT_ASSERT_EQ(test, 0, kunit_add_action_or_reset(test, uc_reported_release, r));
	r->gang = cgk_gang_create(test, nr, &uc_hold_ops, c);
	KUNIT_ASSERT_NOT_NULL(test, r->gang);
	for (i = 0; i < nr; i++) {
		r->gang->workers[i].priv = kunit_kzalloc(test, sizeof(struct uc_worker),
							 GFP_KERNEL);
		KUNIT_ASSERT_NOT_NULL(test, r->gang->workers[i].priv);
	}
	cpus = cgk_cpus_disturb(r->gang, CGK_CPU_SHUFFLE | CGK_CPU_HOTPLUG);
	KUNIT_ASSERT_NOT_NULL(test, cpus);
	cgk_gang_run(r->gang);
	cgk_cpus_stop(cpus);
	cgk_gang_report(r->gang);
	if (cgk_cpus_hotplugging(cpus)) {
		cpu = cgk_cpus_leave_offline(cpus, uc_reserve_here, c);
		if (cpu >= 0)
			KUNIT_EXPECT_GT_MSG(test, ucounts_escrow_cpu_for_test(a->uc, cpu), 0L,
					    "%s: CPU %d went offline without reservations",
					    a->name, cpu);
	} else {
		kunit_info(test, "no CPU hotplug here: workers shuffled only\n");
	}

	uc_expect_reported(c, cpu >= 0 ? "a CPU offline with reservations" : "workers stopped");
	kunit_release_action(test, uc_reported_release, r);
	uc_expect_reported(c, "all given back");

	uc_expect_fit_alone(c, UC_TARGET(UC_NS_B(1), 1), UC_ESCROW_LIMIT, a,
			    UC_ESCROW_LIMIT, "all given back");

	uc_check_counters(c);
	/* With that CPU still offline. */
	uc_check_released(c);
	cgk_cpus_finish(cpus);
}

/* ---- rlimit_escrow_softirq ----------------------------------------------- */

/* Period of each CPU's softirq charger, as the hardirq charger's. */
#define UC_SOFT_PERIOD_NS	(50 * NSEC_PER_USEC)
/* Charges and give-backs per expiry, so that softirq makes a good share. */
#define UC_SOFT_BATCH		64
/*
 * How long past the workers' time bound a softirq charger still re-arms if
 * nothing stops it: the chargers start before the workers' start barrier,
 * which waits up to 10 s (harness.c).
 */
#define UC_SOFT_SLACK_MS	10000

/* Who charges: the workers, or the softirq chargers. */
enum { UC_SOFT_TASK, UC_SOFT_IRQ, UC_SOFT_NR_CTX };

struct uc_soft;

/**
 * struct uc_soft_cpu - the softirq charger of one CPU
 * @s: the case's shared state
 * @timer: a soft hrtimer pinned to @cpu: it expires in softirq there
 * @rnd: its PRNG stream
 * @cpu: the CPU it was armed on
 * @expiries: its callbacks that ran a batch
 * @ops: charges and give-backs it made
 * @drains_seen: of those, the ones across which this CPU's escrow word at
 *		 A's owner went from enabled to disabled: a drain under way,
 *		 as a rule its own (the charge that takes the level past its
 *		 limit drains, under the escrow's lock)
 * @enables_seen: from disabled to enabled: escrow_enable() under way
 * @outside_softirq: callbacks that did not run in softirq (in hardirq,
 *		     for rlimit_escrow_hardirq's)
 * @failed: set once, with @failure: the first broken invariant it saw
 * @failure: as text
 *
 * Written by its callback only, which never runs twice at once; read by
 * the test thread once the timer is cancelled.
 */
struct uc_soft_cpu {
	struct uc_soft *s;
	struct hrtimer timer;
	struct rnd_state rnd;
	int cpu;
	unsigned long expiries;
	unsigned long ops;
	unsigned long drains_seen;
	unsigned long enables_seen;
	unsigned long outside_softirq;
	bool failed;
	char failure[CGK_FAILURE_LEN];
};

/**
 * struct uc_soft - the shared state of rlimit_escrow_softirq
 * @c: the case
 * @node: the level whose limit binds (A's owner)
 * @gang: the workers, in process context
 * @targets: where both contexts charge from, @nr_targets of them
 * @nr_targets: number of targets
 * @held: charges admitted and not given back yet, per target, whoever
 *	  made them: either context gives back what either charged
 * @emptying: a charge was refused: both contexts give back until nothing
 *	      is held, so that the level's count falls to its start and the
 *	      next charge enables its escrow again; the first to find nothing
 *	      to give back starts the next fill
 * @stop: set first when stopping; no softirq charger re-arms after it
 * @deadline: jiffies after which no softirq charger re-arms
 * @charges: charges admitted, per context (UC_SOFT_TASK, UC_SOFT_IRQ)
 * @uncharges: charges given back, per context
 * @refusals: charges refused, per context
 * @fills: fills started after the level was emptied
 * @cpus: the softirq chargers, one per online CPU, @nr_cpus of them
 * @nr_cpus: number of softirq chargers
 * @armed: the softirq chargers' timers were started
 * @hard: the chargers are hardirq timers instead (rlimit_escrow_hardirq)
 */
struct uc_soft {
	struct uc_case *c;
	struct uc_node *node;
	struct cgk_gang *gang;
	u8 targets[UC_NR_TARGETS];
	unsigned int nr_targets;
	atomic_long_t held[UC_NR_TARGETS];
	atomic_t emptying;
	bool stop;
	unsigned long deadline;
	atomic_long_t charges[UC_SOFT_NR_CTX];
	atomic_long_t uncharges[UC_SOFT_NR_CTX];
	atomic_long_t refusals[UC_SOFT_NR_CTX];
	atomic_long_t fills;
	struct uc_soft_cpu *cpus;
	unsigned int nr_cpus;
	bool armed;
	bool hard;
};

/* Give back one charge held, trying the targets from @r's; false if none is. */
static bool uc_soft_give_back(struct uc_soft *s, u32 r, int ctx)
{
	unsigned int k, t, start = r % s->nr_targets;

	for (k = 0; k < s->nr_targets; k++) {
		t = s->targets[(start + k) % s->nr_targets];
		if (atomic_long_dec_if_positive(&s->held[t]) < 0)
			continue;
		uc_shadow_release(s->c, &s->c->target[t], 1, 1);
		dec_rlimit_put_ucounts(uc_leaf(s->c, t), UC_RL_GET);
		atomic_long_inc(&s->uncharges[ctx]);
		return true;
	}
	return false;
}

/*
 * One step of either context, through the kernel's entry points. Filling:
 * a charge two times in three and a give-back otherwise, so that CPUs
 * refill and give back on the way up; the first refusal starts emptying.
 * Emptying: give-backs only, until nothing is held.
 *
 * Return: false, with @why filled, if an admitted charge took a level past
 * its limit (in the shadow counters); the charge is held all the same.
 */
static bool uc_soft_op(struct uc_soft *s, struct rnd_state *rnd, int ctx,
		       char *why, size_t len)
{
	u32 r = prandom_u32_state(rnd);
	unsigned int t;
	bool ok;

	if (atomic_read(&s->emptying)) {
		if (!uc_soft_give_back(s, r, ctx) &&
		    atomic_cmpxchg(&s->emptying, 1, 0) == 1)
			atomic_long_inc(&s->fills);
		return true;
	}
	if (!(r % 3)) {
		uc_soft_give_back(s, r / 3, ctx);
		return true;
	}
	t = s->targets[(r / 3) % s->nr_targets];
	if (!cgk_sigpending_charge(uc_leaf(s->c, t), false, LONG_MAX)) {
		atomic_long_inc(&s->refusals[ctx]);
		atomic_set(&s->emptying, 1);
		return true;
	}
	atomic_long_inc(&s->charges[ctx]);
	ok = uc_shadow_admit(s->c, &s->c->target[t], 1, 1, why, len);
	atomic_long_inc(&s->held[t]);
	return ok;
}

static void uc_soft_step(struct cgk_worker *w)
{
	struct uc_soft *s = w->gang->data;
	char why[CGK_FAILURE_LEN];

	if (!uc_soft_op(s, &w->rnd, UC_SOFT_TASK, why, sizeof(why)))
		cgk_fail(w, "%s", why);
}

static const struct cgk_gang_ops uc_soft_ops = {
	.step = uc_soft_step,
};

/*
 * Whether the softirq chargers must stop: the test thread stops them, a
 * failure of theirs or of a worker stops the gang, and a time bound of
 * their own ends them if the test thread never gets to it. Not
 * cgk_gang_should_stop(): kthread_should_stop() is for the kthread itself,
 * not for whatever task a softirq interrupted.
 */
static bool uc_soft_stopping(struct uc_soft *s)
{
	return READ_ONCE(s->stop) || READ_ONCE(s->gang->stop) ||
	       time_after(jiffies, s->deadline);
}

static void uc_soft_fail(struct uc_soft_cpu *sc, const char *why)
{
	if (!sc->failed) {
		strscpy(sc->failure, why, sizeof(sc->failure));
		sc->failed = true;
	}
	WRITE_ONCE(sc->s->stop, true);
	WRITE_ONCE(sc->s->gang->stop, true);
}

/*
 * A batch of charges and give-backs in softirq, as a SIGIO is charged from
 * the network softirq (kill_fasync() -> send_sigio()) or a signal from a
 * timer_list callback; each looks at this CPU's escrow word at A's owner
 * before and after, without its lock.
 */
static enum hrtimer_restart uc_soft_fn(struct hrtimer *timer)
{
	struct uc_soft_cpu *sc = container_of(timer, struct uc_soft_cpu, timer);
	struct uc_soft *s = sc->s;
	struct ucounts *uc = s->node->uc;
	char why[CGK_FAILURE_LEN];
	unsigned int i;

	if (uc_soft_stopping(s))
		return HRTIMER_NORESTART;
	/* With PREEMPT_RT, hrtimers not marked _HARD expire in softirq. */
	if (s->hard && !IS_ENABLED(CONFIG_PREEMPT_RT) ? !in_hardirq() : !in_serving_softirq())
		sc->outside_softirq++;
	for (i = 0; i < UC_SOFT_BATCH && !uc_soft_stopping(s); i++) {
		int cpu = smp_processor_id();
		long before = ucounts_escrow_cpu_for_test(uc, cpu), after;

		if (!uc_soft_op(s, &sc->rnd, UC_SOFT_IRQ, why, sizeof(why)))
			uc_soft_fail(sc, why);
		after = ucounts_escrow_cpu_for_test(uc, cpu);
		if (before >= 0 && after < 0)
			sc->drains_seen++;
		else if (before < 0 && after >= 0)
			sc->enables_seen++;
		sc->ops++;
	}
	sc->expiries++;
	if (uc_soft_stopping(s))
		return HRTIMER_NORESTART;
	hrtimer_forward_now(timer, ns_to_ktime(UC_SOFT_PERIOD_NS));
	return HRTIMER_RESTART;
}

/* Stop the softirq chargers: none runs once this returns. */
static void uc_soft_stop(void *arg)
{
	struct uc_soft *s = arg;
	unsigned int i;

	WRITE_ONCE(s->stop, true);
	if (!s->armed)
		return;
	for (i = 0; i < s->nr_cpus; i++)
		hrtimer_cancel(&s->cpus[i].timer);
	s->armed = false;
}

/* Give back what both contexts still hold. */
static void uc_soft_release(void *arg)
{
	struct uc_soft *s = arg;
	unsigned int t;

	for (t = 0; t < UC_NR_TARGETS; t++) {
		while (atomic_long_dec_if_positive(&s->held[t]) >= 0) {
			uc_shadow_release(s->c, &s->c->target[t], 1, 1);
			dec_rlimit_put_ucounts(uc_leaf(s->c, t), UC_RL_GET);
		}
	}
}

/*
 * The escrow of every owner node, read under its lock with nothing in
 * flight: in one mode on every possible CPU (drained: every word disabled
 * and nothing reserved; enabled: no word disabled), and its count exactly
 * the charges held through it plus what the CPUs reserve.
 */
static void uc_expect_escrows(struct uc_case *c, const char *when)
{
	struct ucounts_escrow_for_test st;
	int i;

	for (i = 0; i < UC_NR_OWNER_NODES; i++) {
		struct uc_node *n = &c->node[i];
		long held = atomic_long_read(&n->shadow[1]);

		if (!uc_escrow_read(c->test, n, &st))
			continue;
		if (st.exact)
			KUNIT_EXPECT_TRUE_MSG(c->test,
					      st.cpus_off == num_possible_cpus() && !st.reserved,
					      "%s: %s drained, with %u of %u CPUs' escrows disabled and %ld reserved",
					      when, n->name, st.cpus_off, num_possible_cpus(),
					      st.reserved);
		else
			KUNIT_EXPECT_EQ_MSG(c->test, st.cpus_off, 0U,
					    "%s: %s not drained, with %u CPUs' escrows disabled",
					    when, n->name, st.cpus_off);
		KUNIT_EXPECT_EQ_MSG(c->test, st.count - st.reserved, n->base_rlimit[1] + held,
				    "%s: %s counts %ld, %ld of them reserved, with %ld charges held through it",
				    when, n->name, st.count, st.reserved, held);
	}
}

/*
 * Pending signals charged from softirq on every CPU, as the kernel charges
 * a SIGIO from the network softirq, while workers charge the same
 * namespaces from process context: a soft hrtimer pinned to each online
 * CPU makes batches of charges and give-backs through
 * inc_rlimit_get_ucounts() and dec_rlimit_put_ucounts(), the workers the
 * same, all from one pool of charges that either context gives back. They
 * fill A's level (limit UC_ESCROW_LIMIT, far above what the CPUs reserve)
 * to its limit and, once a charge is refused, empty it, over and over: on
 * the way up CPUs refill their escrows and give back, at the limit the
 * level drains, and emptied it is enabled again, under the escrow's lock,
 * from whichever context makes that charge, softirq included (lockdep then
 * has the lock taken in softirq: the reach table's &esc->lock softirq
 * cell). Checked: no admitted charge takes a level past its limit; once
 * both stopped, every level reports exactly what is held, and every escrow
 * is in one mode on every CPU and counts exactly what is held plus what is
 * reserved; once everything is given back, the same, and a sibling gets
 * exactly the limit; everything is back at its start and freed.
 */
static void uc_escrow_irq(struct kunit *test, bool hard)
{
	const char *ctx = hard ? "hardirq" : "softirq";
	unsigned long expiries = 0, ops = 0, drains = 0, enables = 0, outside = 0;
	unsigned int i, cpus_ran = 0, nr = cgk_param_threads(test);
	struct cgk_gang *gang;
	struct uc_soft *s;
	struct uc_case *c;

	c = uc_escrow_setup(test);

	s = kunit_kzalloc(test, sizeof(*s), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, s);
	s->nr_cpus = num_online_cpus();
	s->cpus = kunit_kcalloc(test, s->nr_cpus, sizeof(*s->cpus), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, s->cpus);
	s->c = c;
	s->hard = hard;
	s->node = &c->node[UC_NODE_A];
	s->nr_targets = uc_pick_targets(s->targets, UC_EXACT_B0_B1);
	/* Registered before the gang and the timers, so it runs after both stopped. */
	KUNIT_ASSERT_EQ(test, 0, kunit_add_action_or_reset(test, uc_soft_release, s));

	gang = cgk_gang_create(test, nr, &uc_soft_ops, s);
	KUNIT_ASSERT_NOT_NULL(test, gang);
	s->gang = gang;
	s->deadline = jiffies + msecs_to_jiffies(gang->duration_ms + UC_SOFT_SLACK_MS);
	for (i = 0; i < s->nr_cpus; i++) {
		struct uc_soft_cpu *sc = &s->cpus[i];

		sc->s = s;
		prandom_seed_state(&sc->rnd, gang->seed ^ (0x50f71e55ULL + i));
		/*
		 * Soft, as the softirq it stands for; else neither _SOFT nor
		 * _HARD, as it_real_fn()'s: hardirq, or softirq with PREEMPT_RT.
		 */
		hrtimer_setup(&sc->timer, uc_soft_fn, CLOCK_MONOTONIC,
			      hard ? HRTIMER_MODE_REL : HRTIMER_MODE_REL_SOFT);
	}
	/* After the gang's own: stops the timers before the gang at the end. */
	KUNIT_ASSERT_EQ(test, 0, kunit_add_action_or_reset(test, uc_soft_stop, s));

	/* Each armed from its CPU, pinned there: every CPU charges in irq. */
	KUNIT_ASSERT_EQ(test, 0, kunit_add_action_or_reset(test, uc_pin_release, NULL));
	s->armed = true;
	for (i = 0; i < s->nr_cpus; i++) {
		uc_move_to_cpu(i);
		s->cpus[i].cpu = raw_smp_processor_id();
		hrtimer_start(&s->cpus[i].timer, ns_to_ktime(UC_SOFT_PERIOD_NS),
			      hard ? HRTIMER_MODE_REL_PINNED : HRTIMER_MODE_REL_PINNED_SOFT);
	}
	kunit_release_action(test, uc_pin_release, NULL);

	cgk_gang_run(gang);
	kunit_release_action(test, uc_soft_stop, s);
	cgk_gang_report(gang);

	for (i = 0; i < s->nr_cpus; i++) {
		struct uc_soft_cpu *sc = &s->cpus[i];

		if (sc->failed)
			KUNIT_FAIL(test, "%s charger of CPU %d: %s", ctx, sc->cpu, sc->failure);
		expiries += sc->expiries;
		ops += sc->ops;
		drains += sc->drains_seen;
		enables += sc->enables_seen;
		outside += sc->outside_softirq;
		cpus_ran += sc->ops > 0;
	}
	kunit_info(test, "process context: %lu steps, %ld admitted, %ld refused, %ld given back; %s on %u of %u CPUs: %lu expiries, %ld admitted, %ld refused, %ld given back, %lu drains and %lu enables of A's escrow seen; %ld fills\n",
		   cgk_gang_iterations(gang), atomic_long_read(&s->charges[UC_SOFT_TASK]),
		   atomic_long_read(&s->refusals[UC_SOFT_TASK]),
		   atomic_long_read(&s->uncharges[UC_SOFT_TASK]), ctx, cpus_ran, s->nr_cpus,
		   expiries, atomic_long_read(&s->charges[UC_SOFT_IRQ]),
		   atomic_long_read(&s->refusals[UC_SOFT_IRQ]),
		   atomic_long_read(&s->uncharges[UC_SOFT_IRQ]), drains, enables,
		   atomic_long_read(&s->fills));
	KUNIT_EXPECT_EQ_MSG(test, outside, 0UL,
			    "%lu expiries of the %s chargers ran outside %s", outside, ctx, ctx);
	CGK_EXPECT_EXERCISED(test, atomic_long_read(&s->charges[UC_SOFT_IRQ]),
			     "no charge was admitted from irq");
	CGK_EXPECT_EXERCISED(test, cpus_ran == s->nr_cpus,
			     "the irq charger of a CPU never charged nor gave back");
	CGK_EXPECT_EXERCISED(test, atomic_long_read(&s->refusals[UC_SOFT_TASK]) +
			     atomic_long_read(&s->refusals[UC_SOFT_IRQ]),
			     "no charge was refused: A's level never reached its limit");
	CGK_EXPECT_EXERCISED(test, atomic_long_read(&s->fills),
			     "A's level was never emptied after its limit");
	CGK_EXPECT_EXERCISED(test, drains + enables,
			     "no charge from irq drained or enabled A's escrow: its lock was not taken there");

	uc_expect_reported(c, "workers and irq chargers stopped");
	uc_expect_escrows(c, "workers and irq chargers stopped");
	kunit_release_action(test, uc_soft_release, s);
	uc_expect_reported(c, "all given back");
	uc_expect_escrows(c, "all given back");

	uc_expect_fit_alone(c, UC_TARGET(UC_NS_C(0), 1), UC_ESCROW_LIMIT, s->node,
			    UC_ESCROW_LIMIT, "after the irq chargers");

	uc_check_counters(c);
	uc_check_released(c);
}

static void rlimit_escrow_softirq(struct kunit *test)
{
	uc_escrow_irq(test, false);
}

/*
 * The same from hardirq, as it_real_fn() charges a SIGALRM: drains and
 * re-enables of A's escrow, and so its lock, taken in hardirq on every
 * run (the reach table's &esc->lock hardirq cell), where the other hardirq
 * cases take it only when one of their charges happens to drain the level.
 */
static void rlimit_escrow_hardirq(struct kunit *test)
{
	uc_escrow_irq(test, true);
}

/* ---- user.* sysctls, one set per namespace ------------------------------ */

/*
 * ucount_sysctl_per_ns: worker i owns namespace i, a child of init owned
 * by a uid of its own. As root of it, the worker writes a new
 * max_user_namespaces through /proc/sys/user/ of a kernel mount of proc,
 * reads it back, and checks that its namespace now has that limit; checks
 * that a write without CAP_SYS_RESOURCE in the namespace is refused; and
 * that exactly that many namespaces can then be created in it. Lookups in
 * the per-namespace sysctl sets race the registration and retirement of
 * the sets of the namespaces created and freed meanwhile. At the end each
 * namespace has the limit its own worker wrote last and init's is what it
 * was: no write reached another namespace's set.
 */
#define US_UID_BASE		3144000
#define US_MAX_LIMIT		5
#define US_SYSCTL		"sys/user/max_user_namespaces"
#define US_TYPE			UCOUNT_USER_NAMESPACES
#define US_FREE_TIMEOUT_MS	10000

struct us_ns {
	struct user_namespace *ns;
	const struct cred *root;	/* its uid 0, every capability in it */
	const struct cred *nocap;	/* the same without CAP_SYS_RESOURCE */
	struct ucounts *uc;		/* counts the namespaces created in it */
	long last;			/* the limit its worker wrote last */
};

struct us_case {
	struct kunit *test;
	struct vfsmount *mnt;
	unsigned int nr;
	struct us_ns *ns;
	long base_init_max;
	atomic_long_t writes, refused, children;
};

static kuid_t us_uid(unsigned int i)
{
	return KUIDT_INIT(US_UID_BASE + i);
}

static const struct cred *us_cred(struct user_namespace *ns, kuid_t uid,
				  bool sys_resource)
{
	struct cred *cred = prepare_creds();

	if (!cred)
		return NULL;
	cred->uid = uid;
	cred->euid = uid;
	cred->suid = uid;
	cred->fsuid = uid;
	put_user_ns(cred->user_ns);
	cred->user_ns = get_user_ns(ns);
	cred->cap_effective = CAP_FULL_SET;
	cred->cap_permitted = CAP_FULL_SET;
	if (!sys_resource)
		cap_lower(cred->cap_effective, CAP_SYS_RESOURCE);
	return cred;
}

/* Write @val to the sysctl as @cred: 0 once taken, else a negative errno. */
static int us_write(struct us_case *c, const struct cred *cred, long val)
{
	const struct cred *old = override_creds(cred);
	struct file *file;
	char buf[16];
	int ret;

	file = cgk_file_open(c->mnt, US_SYSCTL, O_WRONLY);
	if (IS_ERR(file)) {
		ret = PTR_ERR(file);
	} else {
		snprintf(buf, sizeof(buf), "%ld\n", val);
		ret = cgk_file_write(file, buf);
		fput(file);
	}
	revert_creds(old);
	return ret;
}

static int us_read(struct us_case *c, const struct cred *cred, long *val)
{
	const struct cred *old = override_creds(cred);
	char buf[16];
	ssize_t ret;

	ret = cgk_file_read(c->mnt, US_SYSCTL, buf, sizeof(buf));
	revert_creds(old);
	if (ret < 0)
		return ret;
	return kstrtol(strim(buf), 10, val);
}

/* Create namespaces in @n until refused; return how many were. */
static int us_fill(struct us_case *c, unsigned int i, int *err)
{
	struct user_namespace *child[US_MAX_LIMIT + 1];
	int nr = 0, k;

	*err = 0;
	while (nr < ARRAY_SIZE(child)) {
		struct user_namespace *ns;

		ns = user_ns_create_for_test(c->ns[i].ns, us_uid(i));
		if (IS_ERR(ns)) {
			*err = PTR_ERR(ns);
			break;
		}
		child[nr++] = ns;
	}
	atomic_long_add(nr, &c->children);
	for (k = 0; k < nr; k++)
		put_user_ns(child[k]);
	return nr;
}

static void us_step(struct cgk_worker *w)
{
	struct us_case *c = w->gang->data;
	struct us_ns *n = &c->ns[w->index];
	long want = 1 + cgk_rand(w, US_MAX_LIMIT), seen = -1;
	int ret, nr;

	ret = us_write(c, n->root, want);
	if (!ret)
		ret = us_read(c, n->root, &seen);
	if (ret) {
		cgk_fail(w, "ns%u: writing %ld to %s as its root: %d", w->index, want,
			 US_SYSCTL, ret);
		return;
	}
	atomic_long_inc(&c->writes);
	n->last = want;
	if (seen != want || READ_ONCE(n->ns->ucount_max[US_TYPE]) != want) {
		cgk_fail(w, "ns%u: wrote %ld to %s, read back %ld, the namespace's limit is %ld",
			 w->index, want, US_SYSCTL, seen,
			 READ_ONCE(n->ns->ucount_max[US_TYPE]));
		return;
	}

	/* proc_sys_call_handler() refuses it with -EPERM */
	ret = us_write(c, n->nocap, want + 1);
	if (ret != -EPERM) {
		cgk_fail(w, "ns%u: writing %s without CAP_SYS_RESOURCE in it: %d, not -EPERM",
			 w->index, US_SYSCTL, ret);
		return;
	}
	atomic_long_inc(&c->refused);

	/* The limit written is the one enforced, at this level. */
	nr = us_fill(c, w->index, &ret);
	if (nr != want || ret != -ENOSPC) {
		cgk_fail(w, "ns%u: limit %ld, but %d namespaces created in it before %d",
			 w->index, want, nr, ret);
		return;
	}
	/* Freed by a work item: wait, so the next fill starts from none. */
	while (atomic_long_read(&n->uc->ucount[US_TYPE]) && !cgk_should_stop(w))
		usleep_range(100, 200);
}

static const struct cgk_gang_ops us_gang_ops = {
	.step = us_step,
};

static void us_release(void *arg)
{
	struct us_case *c = arg;
	unsigned int i;

	for (i = 0; i < c->nr; i++) {
		struct us_ns *n = &c->ns[i];

		if (n->uc)
			put_ucounts(n->uc);
		if (n->root)
			put_cred(n->root);
		if (n->nocap)
			put_cred(n->nocap);
		if (n->ns)
			put_user_ns(n->ns);
	}
	flush_delayed_fput();
	if (c->mnt)
		kern_unmount(c->mnt);
}

static bool us_freed(void *arg)
{
	struct us_case *c = arg;
	unsigned int i;

	for (i = 0; i < c->nr; i++) {
		if (ucounts_nr_hashed_for_uid(us_uid(i)))
			return false;
	}
	return true;
}

static void ucount_sysctl_per_ns(struct kunit *test)
{
	unsigned int i, nr = cgk_param_threads(test);
	struct file_system_type *proc;
	struct cgk_gang *gang;
	struct us_case *c;

	c = kunit_kzalloc(test, sizeof(*c), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, c);
	c->ns = kunit_kcalloc(test, nr, sizeof(*c->ns), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, c->ns);
	c->test = test;
	c->nr = nr;
	c->base_init_max = READ_ONCE(init_user_ns.ucount_max[US_TYPE]);
	for (i = 0; i < nr; i++)
		KUNIT_ASSERT_EQ_MSG(test, 0U, ucounts_nr_hashed_for_uid(us_uid(i)),
				    "uid %u in use before the case", US_UID_BASE + i);
	KUNIT_ASSERT_EQ(test, 0, kunit_add_action_or_reset(test, us_release, c));

	/* As a sysctl= boot argument does: a mount no one else sees. */
	proc = get_fs_type("proc");
	KUNIT_ASSERT_NOT_NULL(test, proc);
	c->mnt = kern_mount(proc);
	module_put(proc->owner);
	if (IS_ERR(c->mnt)) {
		long err = PTR_ERR(c->mnt);

		c->mnt = NULL;
		KUNIT_FAIL_AND_ABORT(test, "mounting proc: %ld", err);
	}

	for (i = 0; i < nr; i++) {
		struct us_ns *n = &c->ns[i];
		struct user_namespace *ns;

		ns = user_ns_create_for_test(&init_user_ns, us_uid(i));
		KUNIT_ASSERT_NOT_ERR_OR_NULL_MSG(test, ns, "creating namespace %u", i);
		n->ns = ns;
		n->root = us_cred(ns, us_uid(i), true);
		n->nocap = us_cred(ns, us_uid(i), false);
		n->uc = alloc_ucounts(ns, us_uid(i));
		KUNIT_ASSERT_TRUE(test, n->root && n->nocap && n->uc);
	}

	gang = cgk_gang_create(test, nr, &us_gang_ops, c);
	KUNIT_ASSERT_NOT_NULL(test, gang);
	cgk_gang_run(gang);
	cgk_gang_report(gang);
	kunit_info(test, "%ld limits written, %ld writes refused, %ld namespaces created\n",
		   atomic_long_read(&c->writes), atomic_long_read(&c->refused),
		   atomic_long_read(&c->children));
	CGK_EXPECT_EXERCISED(test, atomic_long_read(&c->writes), "no limit was written");

	for (i = 0; i < nr; i++) {
		struct us_ns *n = &c->ns[i];

		if (n->last)
			KUNIT_EXPECT_EQ_MSG(test, READ_ONCE(n->ns->ucount_max[US_TYPE]),
					    n->last,
					    "ns%u: limit %ld, its worker wrote %ld last",
					    i, READ_ONCE(n->ns->ucount_max[US_TYPE]), n->last);
	}
	KUNIT_EXPECT_EQ_MSG(test, READ_ONCE(init_user_ns.ucount_max[US_TYPE]),
			    c->base_init_max, "init's max_user_namespaces changed");

	kunit_release_action(test, us_release, c);
	if (!cgk_wait_for(us_freed, c, US_FREE_TIMEOUT_MS))
		KUNIT_FAIL(test,
			   "ucounts of the case's uids left %d ms after its namespaces were put",
			   US_FREE_TIMEOUT_MS);
}

static struct kunit_case cgroup_ucount_cases[] = {
	KUNIT_CASE_PARAM(ucount_inc_dec, cgk_threads_gen),
	KUNIT_CASE_PARAM(rlimit_add_sub, cgk_threads_gen),
	KUNIT_CASE_PARAM(rlimit_get_put, cgk_threads_gen),
	KUNIT_CASE_PARAM(rlimit_get_put_hardirq, cgk_threads_gen),
	KUNIT_CASE_PARAM(ucounts_alloc_put, cgk_threads_gen),
	KUNIT_CASE_PARAM(ucount_all_paths, cgk_threads_gen),
	KUNIT_CASE_PARAM(rlimit_exact_limit, uc_exact_gen_params),
	KUNIT_CASE(rlimit_reclaim_near_limit),
	KUNIT_CASE(rlimit_override_parent_full),
	KUNIT_CASE(rlimit_forced_signal_own_limit),
	KUNIT_CASE(ucounts_last_put_cred_rcu),
	KUNIT_CASE(signals_from_timers),
	KUNIT_CASE(rlimit_teardown_percpu_held),
	KUNIT_CASE_PARAM(rlimit_reported_exact, cgk_threads_gen),
	KUNIT_CASE(rlimit_escrow_cross_cpu),
	KUNIT_CASE_PARAM(rlimit_escrow_lowered, cgk_threads_gen),
	KUNIT_CASE_PARAM(rlimit_escrow_lowered_racing, cgk_threads_gen),
	KUNIT_CASE(rlimit_escrow_mixed_limits),
	KUNIT_CASE_PARAM(rlimit_escrow_cpu_hotplug, cgk_threads_gen),
	CGK_CASE(rlimit_escrow_softirq),
	CGK_CASE(rlimit_escrow_hardirq),
	KUNIT_CASE_PARAM_ATTR(ucount_sysctl_per_ns, cgk_threads_gen,
			      { .speed = KUNIT_SPEED_SLOW }),
	{}
};

static struct kunit_suite cgroup_ucount_suite = {
	.name = "cgroup_ucount",
	.suite_init = cgk_suite_init,
	.suite_exit = cgk_suite_exit,
	.init = cgk_case_init,
	.exit = cgk_case_exit,
	.test_cases = cgroup_ucount_cases,
};

kunit_test_suite(cgroup_ucount_suite);
