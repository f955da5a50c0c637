// SPDX-License-Identifier: GPL-2.0-only
/*
 * cgroup_css_set: css_sets created and released under RCU readers, fork,
 * exit and rmdir.
 *
 * A css_set is shared by every task with the same cgroup membership. Tasks
 * and other holders (a fork in progress, a migration's preload lists) pin
 * it with a reference; the last put unlinks it from its cgroups and the
 * hash table under css_set_lock and frees it with kfree_rcu(), so an RCU
 * reader that loaded task->cgroups may keep reading the set while it is
 * being released.
 *
 * What races, on a test hierarchy of the default root (top; a0..a2 in it;
 * three leaves in each a, 13 cgroups; plus, for rmdir, a leaf in top that is
 * removed and re-created), with a gang whose workers have these roles:
 *  - migrators move victim kthreads between the leaves and a2 through
 *    cgroup_procs_write_for_test(). Victims are spread so that most moves
 *    create a new css_set for the destination and drop the last reference
 *    to the one left behind. Where the kernel has the memory, pids and
 *    cpuset controllers, they are enabled in the hierarchy (a0's leaves
 *    get all, a1's only the first, a2's none), so sets differ in their
 *    csses too, migrations run cpuset's can_attach and attach callbacks,
 *    and in the controller cases migrators also toggle the controllers in
 *    a0's and a1's subtree_control, which moves every task below to new
 *    sets (cgroup_update_dfl_csses());
 *  - victims fork kernel threads that live a little and exit inside the
 *    test cgroups, so sets are also created by fork and released by the
 *    exit path: cgroup_task_dead() from the scheduler and the final put in
 *    cgroup_task_free(), from an RCU callback once kthreadd reaped them;
 *  - RCU readers follow a victim's (or a child's, looked up by pid)
 *    task_css_set() under rcu_read_lock(), dwell, and read through the set
 *    while migrations and exits release it: see cs_read_cset() for what is
 *    read without a lock and what needs css_set_lock;
 *  - get/put workers share a few slots of css_set references: they take
 *    references on victims' sets, take extra ones on the sets other workers
 *    published and drop them, so the last put of a set is sometimes theirs;
 *  - an rmdir worker removes the extra leaf while victims (and children
 *    born there) move in and out of it and get/put workers hold its sets:
 *    cgroup removal races the last put, which then drops the last
 *    reference to the removed cgroup.
 *
 * Invariants:
 *  - the css_set accounting is consistent (cgroup_check_css_sets_for_test(),
 *    a walk of the hash table under css_set_lock): every task on a set's
 *    lists points back to it, nr_tasks equals the tasks on its tasks and
 *    mg_tasks lists, the reference count covers the tasks, every set is
 *    linked to its default cgroup and the hash table holds css_set_count
 *    sets. Checked every CS_CHECK_INTERVAL_MS by whichever worker comes
 *    first (it is safe while everything runs: the walk holds css_set_lock,
 *    under which all of this changes together), after the workers stopped,
 *    and after teardown;
 *  - what an RCU reader reads of a set is its own: the default cgroup is in
 *    the test hierarchy (for victims), each css belongs to that cgroup or an
 *    ancestor, the set is linked to its default cgroup unless it has been
 *    released meanwhile, and nothing changes while the reader looks;
 *  - a set someone holds a reference on is never released;
 *  - a cgroup can be removed while a set on it is still referenced, and the
 *    set keeps it until the last put;
 *  - once victims are stopped and released and the hierarchy is removed,
 *    the number of css_sets, the hash table's and the number of cgroups on
 *    the default root are back to their baseline.
 * The oracle (harness.c) fails a case on any refcount_t warning (a put
 * below zero or a get on a released set), KASAN report (an RCU reader or a
 * holder touching a freed set, with CONFIG_KASAN), lockdep report
 * (css_set_lock is taken from irq-disabled and softirq contexts) or KCSAN
 * report (with CONFIG_KCSAN).
 */

#include <linux/cgroup.h>
#include <linux/cgroup_kunit.h>
#include <linux/delay.h>
#include <linux/mutex.h>
#include <linux/pid.h>
#include <linux/rcupdate.h>
#include <linux/slab.h>
#include <linux/spinlock.h>
#include <linux/string.h>

#include "harness.h"

#define CS_A2			3		/* the interior cgroup tasks may join */
#define CS_NR_TARGETS		10		/* a2 and the nine leaves */
#define CS_NR_SLOTS		4		/* shared css_set references */
#define CS_MAX_LINKS		8		/* hierarchies a reader looks at */
#define CS_MAX_CONTROLLERS	3		/* memory, pids, cpuset */
#define CS_READ_DWELL_US	20		/* readers hold the set this long */
#define CS_CHECK_INTERVAL_MS	20
#define CS_RMDIR_PATIENCE	8	/* -EBUSY in a row before evicting */
#define CS_RMDIR_NAP_US		50	/* nap after an -EBUSY before that */
/*
 * Exited children are reaped by kthreadd and freed after an RCU grace
 * period, and their last css_set put comes from that RCU callback; removed
 * cgroups are freed by work items after further grace periods. Seconds at
 * most even under TCG with KASAN: 10 s is a hang, not slowness.
 */
#define CS_SETTLE_TIMEOUT_MS	10000

enum cs_flags {
	CS_FORK		= BIT(0),	/* victims fork children that exit */
	CS_CTRL		= BIT(1),	/* migrators toggle controllers */
	CS_CTRL_HOT	= BIT(2),	/* ... often, and the case needs them */
};

/* What a worker does; a variant gives the roles in turn (see cs_role()). */
enum cs_role {
	CS_MIGRATE,
	CS_READ,
	CS_GETPUT,
	CS_RMDIR,	/* in roles[0] only: worker 0, if it has company */
};

#define CS_NR_ROLES		4	/* worker i has roles[i % CS_NR_ROLES] */

/* A case: what it races, the victims' and migrators' flags, the roles. */
struct cs_variant {
	const char *desc;
	unsigned long flags;
	enum cs_role roles[CS_NR_ROLES];
};

/* A shared reference on a css_set that get/put workers fight over. */
struct cs_slot {
	spinlock_t lock;		/* guards cset */
	struct css_set *cset;		/* holds one reference, or NULL */
};

struct cs_case {
	struct kunit *test;
	const struct cs_variant *v;
	struct cgk_tree tree;		/* the rmdir worker removes its leaf */
	struct cgk_herd *herd;
	struct cs_slot slots[CS_NR_SLOTS];
	/* controllers: indices into cs_controllers[] the kernel has */
	unsigned int avail[CS_MAX_CONTROLLERS];
	unsigned int nr_ctrl;
	struct cgk_root_controllers root;	/* what we enabled on the root */
	struct mutex ctrl_lock;		/* guards ctrl_on and the toggles */
	unsigned int ctrl_on[CGK_TREE_NR];
	atomic_long_t next_check;
	atomic_long_t migrated, enodev, toggles, reads, released, gets, puts,
		      checks;
	struct cgk_baseline base;
	unsigned int base_hashed;	/* css_sets in the hash table */
};

/* Where victims may go: a2 and the leaves, whose subtree_control stays empty. */
static const int cs_target[CS_NR_TARGETS] = { 3, 4, 5, 6, 7, 8, 9, 10, 11, 12 };

/* Controllers used where the kernel has them; the table ends with NULL. */
static const struct cgk_controller cs_controllers[] = {
#if IS_ENABLED(CONFIG_MEMCG)
	{ "memory", memory_cgrp_id },
#endif
#if IS_ENABLED(CONFIG_CGROUP_PIDS)
	{ "pids", pids_cgrp_id },
#endif
#if IS_ENABLED(CONFIG_CPUSETS)
	/* cpuset_can_attach() and cpuset_attach() on every migration under it */
	{ "cpuset", cpuset_cgrp_id },
#endif
	{ NULL, 0 }
};

static_assert(ARRAY_SIZE(cs_controllers) - 1 <= CS_MAX_CONTROLLERS);

static enum cs_role cs_role(const struct cs_case *c, const struct cgk_worker *w)
{
	enum cs_role role = c->v->roles[w->index % CS_NR_ROLES];

	/* A lone worker migrates: there is nothing to remove without. */
	if (role == CS_RMDIR && (w->index || w->gang->nr == 1))
		return CS_MIGRATE;
	return role;
}

/* Whether a gang of @nr workers has someone in @role. */
static bool cs_has_role(const struct cs_variant *v, unsigned int nr, enum cs_role role)
{
	unsigned int i;

	if (role == CS_RMDIR)
		return v->roles[0] == CS_RMDIR && nr > 1;
	for (i = 0; i < nr && i < CS_NR_ROLES; i++) {
		if (v->roles[i] == role)
			return true;
	}
	return false;
}

/* ---- what workers check of a css_set ------------------------------------ */

static bool cs_links(struct cgroup **cgrps, int n, struct cgroup *cgrp)
{
	int i;

	for (i = 0; i < min(n, CS_MAX_LINKS); i++) {
		if (cgrps[i] == cgrp)
			return true;
	}
	return false;
}

/*
 * Read through @cset, reached under rcu_read_lock() from task_css_set(): the
 * caller is in the read-side critical section for the whole call.
 *
 * Without a lock, only what is fixed before the set is published and freed
 * no earlier than the set itself: ->dfl_cgrp and ->subsys[] (RCU-freed with
 * the set), and through them the cgroups' and csses' immutable fields
 * (->root, ->level, ->ancestors[], css->cgroup, css->ss), which are freed
 * after a grace period that starts after the set's last put.
 *
 * With css_set_lock, taken briefly by cgroup_css_set_cgroups_for_test():
 * the cgrp_links list. Links are freed with plain kfree() on the last put,
 * so a reader walking them under RCU alone would use freed memory.
 */
static void cs_read_cset(struct cgk_worker *w, struct css_set *cset,
			 struct cgroup *top)
{
	struct cs_case *c = w->gang->data;
	struct cgroup *cgrps[CS_MAX_LINKS];
	struct cgroup *dfl = cset->dfl_cgrp;
	int i, n;

	if (!dfl || dfl->root != &cgrp_dfl_root) {
		cgk_fail(w, "a css_set read under RCU has no default cgroup");
		return;
	}
	if (top && !cgroup_is_descendant(dfl, top)) {
		cgk_fail(w, "a victim's css_set is outside the test hierarchy");
		return;
	}

	/* Keep the set in use while migrations and exits release it. */
	udelay(cgk_rand(w, CS_READ_DWELL_US + 1));

	for (i = 0; i < CGROUP_SUBSYS_COUNT; i++) {
		struct cgroup_subsys_state *css = cset->subsys[i];

		if (!css)
			continue;
		if (css->ss && css->ss->id != i) {
			cgk_fail(w, "subsys[%d] of a css_set is a css of controller %d",
				 i, css->ss->id);
			return;
		}
		/* The effective css: the set's cgroup's or an ancestor's. */
		if (css->cgroup->root == &cgrp_dfl_root &&
		    !cgroup_is_descendant(dfl, css->cgroup)) {
			cgk_fail(w, "the %s css of a css_set is not its cgroup's or an ancestor's",
				 css->ss ? css->ss->name : "?");
			return;
		}
	}

	n = cgroup_css_set_cgroups_for_test(cset, cgrps, CS_MAX_LINKS);
	if (!n)
		atomic_long_inc(&c->released);	/* released while we looked */
	else if (!cs_links(cgrps, n, dfl))
		cgk_fail(w, "a live css_set is not linked to its default cgroup");

	if (cset->dfl_cgrp != dfl)
		cgk_fail(w, "the default cgroup of a css_set changed under an RCU reader");
	atomic_long_inc(&c->reads);
}

/* A set the caller holds a reference on must be alive and linked. */
static void cs_check_held(struct cgk_worker *w, struct css_set *cset)
{
	struct cgroup *cgrps[CS_MAX_LINKS];
	int n;

	n = cgroup_css_set_cgroups_for_test(cset, cgrps, CS_MAX_LINKS);
	if (!n)
		cgk_fail(w, "a css_set we hold a reference on was released");
	else if (!cs_links(cgrps, n, cset->dfl_cgrp))
		cgk_fail(w, "a css_set we hold is not linked to its default cgroup");
}

/* Any worker, at most every CS_CHECK_INTERVAL_MS: the consistency walk. */
static void cs_maybe_check(struct cgk_worker *w)
{
	struct cs_case *c = w->gang->data;
	long next = atomic_long_read(&c->next_check);
	struct css_set_check_for_test res;
	char buf[CGK_FAILURE_LEN - 16];

	if (time_before(jiffies, (unsigned long)next) ||
	    atomic_long_cmpxchg(&c->next_check, next,
				jiffies + msecs_to_jiffies(CS_CHECK_INTERVAL_MS)) != next)
		return;
	if (cgroup_check_css_sets_for_test(&res, buf, sizeof(buf)))
		cgk_fail(w, "while running: %s", buf);
	atomic_long_inc(&c->checks);
}

/* ---- readers ------------------------------------------------------------ */

static void cs_read_step(struct cgk_worker *w)
{
	struct cs_case *c = w->gang->data;
	struct cgk_victim *v = &c->herd->victims[cgk_rand(w, c->herd->nr)];
	bool child = (c->v->flags & CS_FORK) && !cgk_rand(w, 4);
	struct task_struct *task;

	rcu_read_lock();
	if (child) {
		pid_t pid = READ_ONCE(v->child_pid);

		/*
		 * A child found by pid stays valid until we leave the RCU
		 * read-side section: its last reference, and so its last
		 * css_set put, is dropped after a grace period following
		 * its release. The pid may have been reused by any task;
		 * its set is just as legal to read, but may be anywhere.
		 */
		task = pid ? pid_task(find_vpid(pid), PIDTYPE_PID) : NULL;
	} else {
		task = v->task;
	}
	if (task)
		cs_read_cset(w, task_css_set(task), child ? NULL : c->tree.cg[0]);
	rcu_read_unlock();
}

/* ---- get/put workers ---------------------------------------------------- */

static void cs_getput_step(struct cgk_worker *w)
{
	struct cs_case *c = w->gang->data;
	struct cs_slot *s = &c->slots[cgk_rand(w, CS_NR_SLOTS)];
	struct css_set *cset;

	spin_lock(&s->lock);
	cset = s->cset;
	if (!cset) {
		struct cgk_victim *v = &c->herd->victims[cgk_rand(w, c->herd->nr)];

		spin_unlock(&s->lock);
		cset = cgroup_task_get_css_set_for_test(v->task);
		atomic_long_inc(&c->gets);
		spin_lock(&s->lock);
		if (!s->cset) {
			s->cset = cset;
			cset = NULL;
		}
		spin_unlock(&s->lock);
		if (cset) {		/* another worker filled the slot */
			cgroup_put_css_set_for_test(cset);
			atomic_long_inc(&c->puts);
		}
		return;
	}
	if (!cgk_rand(w, 4)) {
		/* Retire the slot's reference: maybe the last one. */
		s->cset = NULL;
		spin_unlock(&s->lock);
	} else {
		/* An extra reference on a set another worker holds. */
		cgroup_get_css_set_for_test(cset);
		atomic_long_inc(&c->gets);
		spin_unlock(&s->lock);
		udelay(cgk_rand(w, CS_READ_DWELL_US + 1));
	}
	cs_check_held(w, cset);
	cgroup_put_css_set_for_test(cset);
	atomic_long_inc(&c->puts);
}

static void cs_put_slots(struct cs_case *c)
{
	unsigned int i;

	for (i = 0; i < CS_NR_SLOTS; i++) {
		struct css_set *cset;

		spin_lock(&c->slots[i].lock);
		cset = c->slots[i].cset;
		c->slots[i].cset = NULL;
		spin_unlock(&c->slots[i].lock);
		if (cset) {
			cgroup_put_css_set_for_test(cset);
			atomic_long_inc(&c->puts);
		}
	}
}

/* ---- migrators and controller toggles ----------------------------------- */

static int cs_write_control(struct cgroup *cgrp, char sign, unsigned int k)
{
	return cgk_write_control(cgrp, sign, &cs_controllers[k]);
}

/* Flip one controller in a0's or a1's subtree_control. */
static void cs_toggle_step(struct cgk_worker *w)
{
	struct cs_case *c = w->gang->data;
	unsigned int k = c->avail[cgk_rand(w, c->nr_ctrl)];
	int a = 1 + cgk_rand(w, 2);
	bool on;
	int ret;

	mutex_lock(&c->ctrl_lock);
	on = c->ctrl_on[a] & BIT(k);
	ret = cs_write_control(c->tree.cg[a], on ? '-' : '+', k);
	if (!ret) {
		c->ctrl_on[a] ^= BIT(k);
		atomic_long_inc(&c->toggles);
	} else {
		cgk_fail(w, "writing \"%c%s\" to %s's subtree_control: %d",
			 on ? '-' : '+', cs_controllers[k].name, cgk_tree_name(a), ret);
	}
	mutex_unlock(&c->ctrl_lock);
}

static void cs_migrate_step(struct cgk_worker *w)
{
	struct cs_case *c = w->gang->data;
	struct cgk_victim *v = &c->herd->victims[cgk_rand(w, c->herd->nr)];
	bool rmdir = cs_has_role(c->v, w->gang->nr, CS_RMDIR);
	unsigned int odds = (c->v->flags & CS_CTRL_HOT) ? 4 : 32;
	unsigned int t;
	struct cgroup *to;
	int ret;

	if ((c->v->flags & CS_CTRL) && c->nr_ctrl && !cgk_rand(w, odds)) {
		cs_toggle_step(w);
		return;
	}

	t = cgk_rand(w, rmdir ? CS_NR_TARGETS + 1 : CS_NR_TARGETS);
	if (t == CS_NR_TARGETS) {
		to = cgk_tree_get_ephemeral(&c->tree);
		if (!to)
			return;
	} else {
		to = c->tree.cg[cs_target[t]];
		cgroup_get(to);
	}

	ret = cgroup_procs_write_for_test(to, v->task);
	if (!ret)
		atomic_long_inc(&c->migrated);
	else if (ret == -ENODEV && t == CS_NR_TARGETS)
		atomic_long_inc(&c->enodev);	/* the leaf was just removed */
	else
		cgk_fail(w, "migration to %s failed: %d",
			 cgk_tree_name(t == CS_NR_TARGETS ? CGK_TREE_EPHEMERAL : cs_target[t]),
			 ret);
	cgroup_put(to);
}

/* ---- rmdir -------------------------------------------------------------- */

/* Move the victims out of @cgrp, which the rmdir worker wants to remove. */
static int cs_evict(struct cs_case *c, struct cgroup *cgrp)
{
	unsigned int i;
	int ret;

	for (i = 0; i < c->herd->nr; i++) {
		struct task_struct *task = c->herd->victims[i].task;

		if (cgk_where(task) != cgrp)
			continue;
		ret = cgroup_procs_write_for_test(c->tree.cg[CS_A2], task);
		if (ret)
			return ret;
	}
	return 0;
}

static void cs_evict_step(struct cgk_worker *w, struct cgroup *cgrp)
{
	int ret = cs_evict(w->gang->data, cgrp);

	if (ret)
		cgk_fail(w, "moving victims out of the leaf to remove: %d", ret);
}

/*
 * Worker 0 of an rmdir case removes the ephemeral leaf while migrations
 * target it and sets on it are still referenced (by children that exited
 * but are not freed yet, and by get/put workers): cgk_tree_rmdir_step().
 * While patient it naps after -EBUSY; then it moves the victims out.
 */
static const struct cgk_tree_rmdir cs_rmdir = {
	.patience	= CS_RMDIR_PATIENCE,
	.busy_nap_us	= CS_RMDIR_NAP_US,
	.evict		= cs_evict_step,
};

static void cs_step(struct cgk_worker *w)
{
	struct cs_case *c = w->gang->data;

	cs_maybe_check(w);
	switch (cs_role(c, w)) {
	case CS_READ:
		cs_read_step(w);
		break;
	case CS_GETPUT:
		cs_getput_step(w);
		break;
	case CS_RMDIR:
		cgk_tree_rmdir_step(w, &c->tree, &cs_rmdir);
		break;
	default:
		cs_migrate_step(w);
		break;
	}
}

static const struct cgk_gang_ops cs_gang_ops = {
	.step = cs_step,
};

/* ---- fixture ------------------------------------------------------------ */

/* Cleanup action: stop everything, remove the hierarchy, whatever failed. */
static void cs_teardown(void *arg)
{
	struct cs_case *c = arg;

	cs_put_slots(c);
	cgk_herd_stop(c->herd, CS_SETTLE_TIMEOUT_MS);
	if (cgk_tree_remove(c->test, &c->tree, CS_SETTLE_TIMEOUT_MS))
		cgk_root_controllers_restore(c->test, &c->root);
}

/* Enable the controllers the kernel has on the root; list the usable ones. */
static void cs_enable_root_controllers(struct cs_case *c)
{
	unsigned int k;

	c->root.ctrls = cs_controllers;
	cgk_root_controllers_enable(c->test, &c->root);
	for (k = 0; cs_controllers[k].name; k++) {
		if (c->root.avail & BIT(k))
			c->avail[c->nr_ctrl++] = k;
	}
}

/* top and a0 get every controller, a1 the first, a2 none. */
static void cs_enable_controllers(struct cs_case *c)
{
	struct kunit *test = c->test;
	unsigned int i;

	for (i = 0; i < c->nr_ctrl; i++) {
		unsigned int k = c->avail[i];

		KUNIT_ASSERT_EQ_MSG(test, cs_write_control(c->tree.cg[0], '+', k), 0,
				    "enabling %s on top", cs_controllers[k].name);
		KUNIT_ASSERT_EQ_MSG(test, cs_write_control(c->tree.cg[1], '+', k), 0,
				    "enabling %s on a0", cs_controllers[k].name);
		c->ctrl_on[1] |= BIT(k);
		if (i)
			continue;
		KUNIT_ASSERT_EQ_MSG(test, cs_write_control(c->tree.cg[2], '+', k), 0,
				    "enabling %s on a1", cs_controllers[k].name);
		c->ctrl_on[2] |= BIT(k);
	}
}

static struct cs_case *cs_setup(struct kunit *test, const struct cs_variant *v,
				unsigned int nr_victims)
{
	struct css_set_check_for_test res;
	struct cs_case *c;
	char buf[CGK_FAILURE_LEN];
	unsigned int i;

	c = kunit_kzalloc(test, sizeof(*c), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, c);
	c->test = test;
	c->v = v;
	mutex_init(&c->ctrl_lock);
	for (i = 0; i < CS_NR_SLOTS; i++)
		spin_lock_init(&c->slots[i].lock);
	atomic_long_set(&c->next_check, jiffies);
	c->herd = cgk_herd_alloc(test, nr_victims, (c->v->flags & CS_FORK) ? CGK_VICTIM_FORK : 0);
	KUNIT_ASSERT_NOT_NULL(test, c->herd);

	KUNIT_ASSERT_EQ_MSG(test, cgroup_check_css_sets_for_test(&res, buf, sizeof(buf)),
			    0, "css_set accounting broken before the case: %s", buf);
	c->base_hashed = res.nr_hashed;
	cgk_baseline_take(&c->base);
	KUNIT_ASSERT_EQ(test, 0, kunit_add_action_or_reset(test, cs_teardown, c));

	cs_enable_root_controllers(c);
	cgk_tree_create(test, &c->tree, "cset", v->roles[0] == CS_RMDIR);
	cs_enable_controllers(c);

	for (i = 0; i < nr_victims; i++) {
		int dst = cs_target[i % CS_NR_TARGETS];
		struct task_struct *task;

		task = cgk_herd_start(c->herd, i, "cgk-cset");
		KUNIT_ASSERT_NOT_ERR_OR_NULL(test, task);
		KUNIT_ASSERT_EQ_MSG(test, 0, cgroup_procs_write_for_test(c->tree.cg[dst], task),
				    "moving victim %u into %s", i, cgk_tree_name(dst));
	}
	return c;
}

/* ---- checks ------------------------------------------------------------- */

/*
 * How the rmdir worker's race went depends on the machine, so check its
 * rule once more without the race: a cgroup whose only css_set has no task
 * left but is still referenced can be removed, the set keeps the removed
 * cgroup linked until its last put, and that put then lets the cgroup go
 * (checked by the baseline after teardown).
 */
static void cs_check_rmdir_last_put(struct cs_case *c)
{
	struct kunit *test = c->test;
	struct cgroup *cgrps[CS_MAX_LINKS];
	struct task_struct *task = c->herd->victims[0].task;
	struct cgroup *leaf = cgk_tree_cg(&c->tree, CGK_TREE_EPHEMERAL);
	struct css_set *cset;
	int n;

	if (!leaf)
		return;		/* the worker failed to make one: reported */

	KUNIT_ASSERT_EQ(test, 0, cgroup_procs_write_for_test(leaf, task));
	cset = cgroup_task_get_css_set_for_test(task);
	KUNIT_EXPECT_PTR_EQ(test, cset->dfl_cgrp, leaf);
	KUNIT_EXPECT_EQ(test, 0, cs_evict(c, leaf));

	/* Children born in the leaf may still be exiting. */
	cgk_leaf_remove(test, leaf, CS_SETTLE_TIMEOUT_MS);
	KUNIT_EXPECT_TRUE(test, cgroup_is_dead(leaf));

	n = cgroup_css_set_cgroups_for_test(cset, cgrps, CS_MAX_LINKS);
	KUNIT_EXPECT_GT_MSG(test, n, 0, "a css_set we hold was released with its cgroup");
	KUNIT_EXPECT_TRUE_MSG(test, cs_links(cgrps, n, leaf),
			      "a css_set we hold lost the link to its removed cgroup");
	cgroup_put_css_set_for_test(cset);
}

static void cs_check_accounting(struct cs_case *c, const char *when)
{
	struct css_set_check_for_test res;
	char buf[CGK_FAILURE_LEN];

	KUNIT_EXPECT_EQ_MSG(c->test, cgroup_check_css_sets_for_test(&res, buf, sizeof(buf)),
			    0, "css_set accounting %s: %s", when, buf);
}

/* ---- the cases ---------------------------------------------------------- */

static void cs_run(struct kunit *test, const struct cs_variant *v)
{
	unsigned long flags = v->flags;
	unsigned int nr = cgk_param_threads(test);
	struct css_set_check_for_test res;
	char buf[CGK_FAILURE_LEN];
	unsigned long forks;
	struct cgk_gang *gang;
	struct cs_case *c;

	kunit_info(test, "%s\n", v->desc);
	c = cs_setup(test, v, max(nr / 2, 2U) + 2);
	if ((flags & CS_CTRL_HOT) && !c->nr_ctrl)
		kunit_skip(test, "none of the memory, pids and cpuset controllers is available");

	gang = cgk_gang_create(test, nr, &cs_gang_ops, c);
	KUNIT_ASSERT_NOT_NULL(test, gang);
	cgk_gang_run(gang);
	cgk_gang_report(gang);

	forks = cgk_herd_forks(c->herd);
	kunit_info(test, "%ld migrations (%ld -ENODEV), %ld controller toggles, %ld rmdirs (%ld -EBUSY), %lu forks\n",
		   atomic_long_read(&c->migrated), atomic_long_read(&c->enodev),
		   atomic_long_read(&c->toggles), atomic_long_read(&c->tree.rmdirs),
		   atomic_long_read(&c->tree.ebusy), forks);
	kunit_info(test, "%ld RCU reads (%ld of a set released meanwhile), %ld gets, %ld puts, %ld accounting checks\n",
		   atomic_long_read(&c->reads), atomic_long_read(&c->released),
		   atomic_long_read(&c->gets), atomic_long_read(&c->puts),
		   atomic_long_read(&c->checks));

	CGK_EXPECT_EXERCISED(test, atomic_long_read(&c->migrated), "no migration succeeded");
	if (cs_has_role(v, nr, CS_READ))
		CGK_EXPECT_EXERCISED(test, atomic_long_read(&c->reads), "no RCU read");
	if (cs_has_role(v, nr, CS_GETPUT))
		CGK_EXPECT_EXERCISED(test, atomic_long_read(&c->gets), "no css_set get");
	if (flags & CS_FORK)
		CGK_EXPECT_EXERCISED(test, forks, "the victims never forked");
	if (flags & CS_CTRL_HOT)
		CGK_EXPECT_EXERCISED(test, atomic_long_read(&c->toggles),
				     "no controller was toggled");

	/* Victims are idle from here on; their children finish exiting. */
	cgk_herd_stop_forking(c->herd);
	cs_check_accounting(c, "after the workers stopped");
	if (cs_has_role(v, nr, CS_RMDIR))
		cs_check_rmdir_last_put(c);

	kunit_release_action(test, cs_teardown, c);
	cgk_expect_baseline(test, &c->base, CS_SETTLE_TIMEOUT_MS);
	if (cgroup_check_css_sets_for_test(&res, buf, sizeof(buf)))
		KUNIT_FAIL(test, "css_set accounting after teardown: %s", buf);
	KUNIT_EXPECT_EQ_MSG(test, res.nr_hashed, c->base_hashed,
			    "css_sets in the hash table %u (baseline %u)",
			    res.nr_hashed, c->base_hashed);
}

/*
 * The variants, one case each so that a filter names them: the flags of
 * the victims and migrators, and the workers' roles in turn.
 */
static const struct cs_variant cs_migrate_churn = {
	.desc = "migrations create and release sets under RCU readers",
	.flags = CS_CTRL,
	.roles = { CS_MIGRATE, CS_READ, CS_MIGRATE, CS_MIGRATE },
};

static const struct cs_variant cs_fork_exit = {
	.desc = "victims fork children that exit: sets released from the exit path",
	.flags = CS_FORK,
	.roles = { CS_MIGRATE, CS_READ, CS_MIGRATE, CS_MIGRATE },
};

static const struct cs_variant cs_shared_get_put = {
	.desc = "several workers get and put references on the same sets",
	.flags = CS_FORK,
	.roles = { CS_MIGRATE, CS_GETPUT, CS_GETPUT, CS_READ },
};

static const struct cs_variant cs_rmdir_last_put = {
	.desc = "a leaf is removed while its sets are referenced and being released",
	.flags = CS_FORK,
	.roles = { CS_RMDIR, CS_MIGRATE, CS_GETPUT, CS_READ },
};

static const struct cs_variant cs_controller_churn = {
	.desc = "controllers come and go below a0 and a1, moving every task to new sets",
	.flags = CS_CTRL | CS_CTRL_HOT,
	.roles = { CS_MIGRATE, CS_READ, CS_MIGRATE, CS_GETPUT },
};

static const struct cs_variant cs_everything = {
	.desc = "everything at once",
	.flags = CS_FORK | CS_CTRL,
	.roles = { CS_RMDIR, CS_MIGRATE, CS_READ, CS_GETPUT },
};

static void cset_migrate_churn(struct kunit *test)
{
	cs_run(test, &cs_migrate_churn);
}

static void cset_fork_exit(struct kunit *test)
{
	cs_run(test, &cs_fork_exit);
}

static void cset_shared_get_put(struct kunit *test)
{
	cs_run(test, &cs_shared_get_put);
}

static void cset_rmdir_last_put(struct kunit *test)
{
	cs_run(test, &cs_rmdir_last_put);
}

static void cset_controller_churn(struct kunit *test)
{
	cs_run(test, &cs_controller_churn);
}

static void cset_everything(struct kunit *test)
{
	cs_run(test, &cs_everything);
}

static struct kunit_case cgroup_css_set_cases[] = {
	CGK_CASE(cset_migrate_churn),
	CGK_CASE(cset_fork_exit),
	CGK_CASE(cset_shared_get_put),
	CGK_CASE(cset_rmdir_last_put),
	CGK_CASE(cset_controller_churn),
	CGK_CASE(cset_everything),
	{}
};

/* Works in either attach-lock mode: cgroup_migrate_dynmods may come first. */
static struct kunit_suite cgroup_css_set_suite = {
	.name = "cgroup_css_set",
	.suite_init = cgk_suite_init,
	.suite_exit = cgk_suite_exit,
	.init = cgk_case_init,
	.exit = cgk_case_exit,
	.test_cases = cgroup_css_set_cases,
};

kunit_test_suites(&cgroup_css_set_suite);
