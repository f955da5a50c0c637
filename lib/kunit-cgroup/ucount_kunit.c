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
 * signal code does when a timer sends a signal.
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
 */

#include <linux/cred.h>
#include <linux/hrtimer.h>
#include <linux/rcuref.h>
#include <linux/user_namespace.h>

#include "harness.h"

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

/* A ucounts the suite follows: charged directly (target) or via a child. */
struct uc_node {
	struct ucounts *uc;
	char name[32];
	long rlimit_max;		/* limit of an admitted rlimit charge */
	atomic_long_t shadow[2];	/* admitted rlimit charges: ADD, GET */
	atomic_long_t seen_max[3];	/* ucount, shadow ADD, shadow GET */
	long base_ucount;
	long base_rlimit[2];
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
	atomic_long_t refused;
	atomic_long_t admitted;
	bool released;
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
		ret = inc_rlimit_get_ucounts(leaf->uc, UC_RL_GET, false);
		if (!ret) {
			atomic_long_inc(&c->refused);
			return true;
		}
		if (ret > UC_LEAF_RLIMIT) {
			dec_rlimit_put_ucounts(leaf->uc, UC_RL_GET);
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

	if (c->released)
		return;
	c->released = true;
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
	n->base_rlimit[0] = atomic_long_read(&n->uc->rlimit[UC_RL_ADD]);
	n->base_rlimit[1] = atomic_long_read(&n->uc->rlimit[UC_RL_GET]);
	n->base_ref = rcuref_read(&n->uc->count);
}

static struct uc_case *uc_setup(struct kunit *test, unsigned long ops)
{
	struct uc_case *c;
	int i, u;

	c = kunit_kzalloc(test, sizeof(*c), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, c);
	c->test = test;
	c->ops = ops;

	for (u = 0; u < UC_NR_UIDS; u++)
		c->base_hashed[u] = ucounts_nr_hashed_for_uid(uc_uid(u));

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
		set_userns_rlimit_max(ns, UC_RL_GET, uc_rlimit_max[level]);
	}

	/* Owner nodes: A's owner in init, B's in A, C's in each B. */
	uc_node_init(&c->node[0], c->ns[0]->ucounts, uc_rlimit_max[1], "init",
		     UC_UID_OWNER);
	uc_node_init(&c->node[1], c->ns[1]->ucounts, uc_rlimit_max[2], "A",
		     UC_UID_OWNER);
	for (i = 0; i < 3; i++)
		uc_node_init(&c->node[2 + i], c->ns[4 + 2 * i]->ucounts,
			     uc_rlimit_max[3], uc_ns_name[1 + i], UC_UID_OWNER);

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

		KUNIT_EXPECT_EQ_MSG(test, atomic_long_read(&n->uc->ucount[UC_TYPE]),
				    n->base_ucount, "%s: ucount not back", n->name);
		KUNIT_EXPECT_EQ_MSG(test, atomic_long_read(&n->uc->rlimit[UC_RL_ADD]),
				    n->base_rlimit[0], "%s: rlimit (add) not back",
				    n->name);
		KUNIT_EXPECT_EQ_MSG(test, atomic_long_read(&n->uc->rlimit[UC_RL_GET]),
				    n->base_rlimit[1], "%s: rlimit (get) not back",
				    n->name);
		KUNIT_EXPECT_EQ_MSG(test, rcuref_read(&n->uc->count), n->base_ref,
				    "%s: reference count not back", n->name);
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
	return true;
}

/* Freeing a user namespace is deferred to a workqueue: wait for it. */
#define UC_FREE_TIMEOUT_MS	10000

static void uc_check_released(struct uc_case *c)
{
	int u;

	uc_tree_release(c);
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
}

/* ---- the cases ---------------------------------------------------------- */

static void uc_run(struct kunit *test, unsigned long ops, bool hardirq)
{
	unsigned int i, nr = cgk_param_threads(test);
	struct cgk_gang *gang;
	struct uc_case *c;

	c = uc_setup(test, ops);
	gang = cgk_gang_create(test, nr, &uc_gang_ops, c);
	KUNIT_ASSERT_NOT_NULL(test, gang);
	for (i = 0; i < nr; i++) {
		gang->workers[i].priv = kunit_kzalloc(test, sizeof(struct uc_worker),
						      GFP_KERNEL);
		KUNIT_ASSERT_NOT_NULL(test, gang->workers[i].priv);
	}

	if (hardirq) {
		prandom_seed_state(&c->timer_rnd, gang->seed ^ 0x5eed1e55ULL);
		hrtimer_setup(&c->timer, uc_timer_fn, CLOCK_MONOTONIC,
			      HRTIMER_MODE_REL_HARD);
		KUNIT_ASSERT_EQ(test, 0, kunit_add_action_or_reset(test, uc_timer_stop, c));
		c->timer_armed = true;
		hrtimer_start(&c->timer, ns_to_ktime(UC_TIMER_PERIOD_NS),
			      HRTIMER_MODE_REL_HARD);
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
		KUNIT_EXPECT_GT_MSG(test, atomic_long_read(&c->refused), 0L,
				    "no charge was ever refused: limits not exercised");
	if (hardirq)
		KUNIT_EXPECT_GT_MSG(test, c->timer_charges, 0UL,
				    "the hardirq charger never ran");

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

static struct kunit_case cgroup_ucount_cases[] = {
	KUNIT_CASE_PARAM(ucount_inc_dec, cgk_threads_gen),
	KUNIT_CASE_PARAM(rlimit_add_sub, cgk_threads_gen),
	KUNIT_CASE_PARAM(rlimit_get_put, cgk_threads_gen),
	KUNIT_CASE_PARAM(rlimit_get_put_hardirq, cgk_threads_gen),
	KUNIT_CASE_PARAM(ucounts_alloc_put, cgk_threads_gen),
	KUNIT_CASE_PARAM(ucount_all_paths, cgk_threads_gen),
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
