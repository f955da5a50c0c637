// SPDX-License-Identifier: GPL-2.0-only
/*
 * Test hierarchies for the cgroup_kunit suites: the 13-cgroup tree that the
 * migrate and css_set suites move victims around in, with the leaf in its
 * top that a worker keeps removing and re-creating, the removal of test
 * cgroups, the controllers cases enable on the default root, and the
 * baselines a case must get back to. See harness.h.
 */

#include <linux/cgroup.h>
#include <linux/cgroup_kunit.h>
#include <linux/delay.h>
#include <linux/mutex.h>
#include <linux/rcupdate.h>
#include <linux/string.h>

#include "harness.h"

/* top; a0..a2 in it; three leaves in each a. */
static const int cgk_tree_parent[CGK_TREE_NR] = {
	-1, 0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3,
};

static const char * const cgk_tree_names[CGK_TREE_NR] = {
	"top", "a0", "a1", "a2", "b00", "b01", "b02", "b10", "b11", "b12",
	"b20", "b21", "b22",
};

/**
 * cgk_tree_name - the name of a cgroup of the tree, for messages
 * @i: its index, 0..CGK_TREE_EPHEMERAL
 *
 * Return: "top" for the top (whatever it is called), "ephemeral" for the
 * leaf rmdir races, whatever its generation, else the cgroup's name.
 */
const char *cgk_tree_name(int i)
{
	return i == CGK_TREE_EPHEMERAL ? "ephemeral" : cgk_tree_names[i];
}

/**
 * cgk_tree_create - create the test hierarchy, or fail the case
 * @test: the case, asserted on: call from its own thread only
 * @tree: zeroed; its cgroups are created in it
 * @suite: names the top, "cgk-<suite>-<param_index>"
 * @ephemeral: also create the first ephemeral leaf, "eph0" in top
 *
 * Register the cleanup action that removes @tree (cgk_tree_remove()) before
 * calling this: an assertion here leaves the cgroups created so far to it.
 */
void cgk_tree_create(struct kunit *test, struct cgk_tree *tree,
		     const char *suite, bool ephemeral)
{
	int i;

	mutex_init(&tree->eph_lock);
	for (i = 0; i < CGK_TREE_NR; i++) {
		struct cgroup *parent = cgk_tree_parent[i] < 0 ? &cgrp_dfl_root.cgrp :
								  tree->cg[cgk_tree_parent[i]];
		char name[32];

		/* The top gets a unique name: a failed case may leave one. */
		if (i)
			strscpy(name, cgk_tree_names[i]);
		else
			snprintf(name, sizeof(name), "cgk-%s-%d", suite, test->param_index);
		tree->cg[i] = cgroup_create_for_test(parent, name);
		if (IS_ERR(tree->cg[i])) {
			long err = PTR_ERR(tree->cg[i]);

			tree->cg[i] = NULL;
			KUNIT_FAIL_AND_ABORT(test, "creating %s: %ld", name, err);
		}
	}
	if (ephemeral) {
		tree->cg[CGK_TREE_EPHEMERAL] = cgroup_create_for_test(tree->cg[0], "eph0");
		if (IS_ERR(tree->cg[CGK_TREE_EPHEMERAL])) {
			long err = PTR_ERR(tree->cg[CGK_TREE_EPHEMERAL]);

			tree->cg[CGK_TREE_EPHEMERAL] = NULL;
			KUNIT_FAIL_AND_ABORT(test, "creating eph0: %ld", err);
		}
	}
}

/**
 * cgk_tree_cg - the cgroup an index of the tree stands for, on the test thread
 * @tree: the hierarchy
 * @i: the index, 0..CGK_TREE_EPHEMERAL
 *
 * Only once the rmdir worker has stopped: the ephemeral leaf may be closing.
 *
 * Return: the cgroup; for CGK_TREE_EPHEMERAL the published leaf, else the
 * one being closed, NULL if there is neither.
 */
struct cgroup *cgk_tree_cg(struct cgk_tree *tree, int i)
{
	if (i == CGK_TREE_EPHEMERAL && !tree->cg[i])
		return tree->closing;
	return tree->cg[i];
}

/**
 * cgk_tree_get_ephemeral - a reference on the published ephemeral leaf
 * @tree: the hierarchy
 *
 * Return: the leaf, to cgroup_put(), or NULL while none is published.
 */
struct cgroup *cgk_tree_get_ephemeral(struct cgk_tree *tree)
{
	struct cgroup *cgrp;

	mutex_lock(&tree->eph_lock);
	cgrp = tree->cg[CGK_TREE_EPHEMERAL];
	if (cgrp)
		cgroup_get(cgrp);
	mutex_unlock(&tree->eph_lock);
	return cgrp;
}

/**
 * cgk_tree_rmdir_step - one step of the worker that removes the ephemeral leaf
 * @w: the worker; one worker of the gang only
 * @tree: the hierarchy, created with its ephemeral leaf
 * @how: its patience, and how it empties a leaf that stays busy
 *
 * Remove the ephemeral leaf while other workers migrate into it, keep it
 * published a little once removed (migrations into it must now fail with
 * -ENODEV), then publish a new one, eph<N>. After @how->patience -EBUSY in
 * a row, close it to new migrations (cgk_tree_get_ephemeral() returns NULL)
 * and call @how->evict until it can be removed. Failures go to cgk_fail();
 * removals and -EBUSY are counted in @tree.
 */
void cgk_tree_rmdir_step(struct cgk_worker *w, struct cgk_tree *tree,
			 const struct cgk_tree_rmdir *how)
{
	struct cgroup *target, *new;
	char name[24];
	int ret;

	mutex_lock(&tree->eph_lock);
	target = tree->closing ?: tree->cg[CGK_TREE_EPHEMERAL];
	mutex_unlock(&tree->eph_lock);
	if (!target)
		return;

	ret = cgroup_destroy_for_test(target);
	if (ret == -EBUSY) {
		atomic_long_inc(&tree->ebusy);
		if (++tree->busy_tries < how->patience) {
			if (how->busy_nap_us)
				usleep_range(how->busy_nap_us, 2 * how->busy_nap_us);
			return;
		}
		if (!tree->closing) {
			mutex_lock(&tree->eph_lock);
			tree->closing = target;
			tree->cg[CGK_TREE_EPHEMERAL] = NULL;
			mutex_unlock(&tree->eph_lock);
		}
		how->evict(w, target);
		return;
	}
	if (ret) {
		cgk_fail(w, "removing the ephemeral leaf: %d", ret);
		return;
	}
	atomic_long_inc(&tree->rmdirs);
	tree->busy_tries = 0;
	usleep_range(200, 400);

	snprintf(name, sizeof(name), "eph%u", ++tree->eph_gen);
	new = cgroup_create_for_test(tree->cg[0], name);
	if (IS_ERR(new)) {
		cgk_fail(w, "creating %s: %pe", name, new);
		new = NULL;
	}
	mutex_lock(&tree->eph_lock);
	tree->cg[CGK_TREE_EPHEMERAL] = new;
	tree->closing = NULL;
	mutex_unlock(&tree->eph_lock);
	cgroup_put(target);
}

/**
 * cgk_tree_removed - remove what is left of the tree, children first
 * @arg: the struct cgk_tree; its workers have stopped
 *
 * Return: true once nothing is left; false while some cgroup still holds
 * tasks (-EBUSY), for cgk_wait_for().
 */
bool cgk_tree_removed(void *arg)
{
	struct cgk_tree *tree = arg;

	if (tree->closing) {
		if (cgroup_destroy_for_test(tree->closing) == -EBUSY)
			return false;
		cgroup_put(tree->closing);
		tree->closing = NULL;
	}
	return cgk_cgroups_remove(tree->cg, CGK_TREE_NR + 1);
}

/**
 * cgk_tree_remove - remove the tree, or fail the case
 * @test: the case
 * @tree: the hierarchy; its workers have stopped and its tasks are exiting
 * @timeout_ms: how long exiting tasks may keep a cgroup busy
 *
 * For the case's cleanup action, after the victims were stopped.
 *
 * Return: true if everything was removed.
 */
bool cgk_tree_remove(struct kunit *test, struct cgk_tree *tree,
		     unsigned int timeout_ms)
{
	/* Exited victims leave their cgroups once their tasks are released. */
	if (cgk_wait_for(cgk_tree_removed, tree, timeout_ms))
		return true;
	KUNIT_FAIL(test, "test cgroups still busy %u ms after the victims exited",
		   timeout_ms);
	return false;
}

static bool cgk_leaf_removed(void *arg)
{
	return cgroup_destroy_for_test(arg) != -EBUSY;
}

/**
 * cgk_leaf_remove - remove an emptied leaf, or fail the case
 * @test: the case
 * @leaf: the leaf; the caller keeps its reference
 * @timeout_ms: how long children born in it may take to exit
 *
 * Return: true if @leaf is removed (or was already).
 */
bool cgk_leaf_remove(struct kunit *test, struct cgroup *leaf,
		     unsigned int timeout_ms)
{
	if (cgk_wait_for(cgk_leaf_removed, leaf, timeout_ms))
		return true;
	KUNIT_FAIL(test, "the emptied leaf was still busy after %u ms", timeout_ms);
	return false;
}

/**
 * cgk_where - a task's cgroup on the default hierarchy
 * @task: the task
 *
 * Return: the cgroup, to compare with others: not referenced.
 */
struct cgroup *cgk_where(struct task_struct *task)
{
	struct cgroup *cgrp;

	rcu_read_lock();
	cgrp = task_dfl_cgroup(task);
	rcu_read_unlock();
	return cgrp;
}

/**
 * cgk_cgroups_remove - remove test cgroups, children before parents
 * @cgrps: the cgroups, each parent before its children; NULL entries are
 *	   skipped, removed ones are put (cgroup_create_for_test()'s
 *	   reference) and set to NULL
 * @nr: number of entries
 *
 * Return: true once none is left; false while some still hold tasks
 * (-EBUSY), for cgk_wait_for().
 */
bool cgk_cgroups_remove(struct cgroup **cgrps, int nr)
{
	int i, busy = 0;

	for (i = nr - 1; i >= 0; i--) {
		if (!cgrps[i])
			continue;
		if (cgroup_destroy_for_test(cgrps[i]) == -EBUSY) {
			busy++;
			continue;
		}
		cgroup_put(cgrps[i]);
		cgrps[i] = NULL;
	}
	return !busy;
}

/**
 * cgk_baseline_take - count the css_sets and default-root cgroups
 * @b: where to store the counts
 */
void cgk_baseline_take(struct cgk_baseline *b)
{
	b->css_sets = cgroup_nr_css_sets_for_test();
	b->nr_cgrps = atomic_read(&cgrp_dfl_root.nr_cgrps);
}

static bool cgk_baseline_back(void *arg)
{
	const struct cgk_baseline *b = arg;

	return cgroup_nr_css_sets_for_test() == b->css_sets &&
	       atomic_read(&cgrp_dfl_root.nr_cgrps) == b->nr_cgrps;
}

/**
 * cgk_expect_baseline - fail @test unless the counts get back to @b
 * @test: the case
 * @b: what cgk_baseline_take() counted before the case
 * @timeout_ms: how long exiting tasks and removed cgroups may take (RCU)
 */
void cgk_expect_baseline(struct kunit *test, const struct cgk_baseline *b,
			 unsigned int timeout_ms)
{
	if (!cgk_wait_for(cgk_baseline_back, (void *)b, timeout_ms))
		KUNIT_FAIL(test,
			   "css_sets %u (baseline %u), cgroups %d (baseline %d) %u ms after teardown",
			   cgroup_nr_css_sets_for_test(), b->css_sets,
			   atomic_read(&cgrp_dfl_root.nr_cgrps), b->nr_cgrps, timeout_ms);
}

/**
 * cgk_write_control - enable or disable one controller below a cgroup
 * @cgrp: whose cgroup.subtree_control is written
 * @sign: '+' or '-'
 * @ctrl: the controller
 *
 * Return: 0, or the error the write of "+name" or "-name" returned.
 */
int cgk_write_control(struct cgroup *cgrp, char sign, const struct cgk_controller *ctrl)
{
	char buf[32];

	snprintf(buf, sizeof(buf), "%c%s", sign, ctrl->name);
	return cgroup_subtree_control_write_for_test(cgrp, buf);
}

/**
 * cgk_root_controllers_enable - enable a case's controllers on the root
 * @test: the case, asserted on: call from its own thread only
 * @rc: @rc->ctrls set, the masks zero
 *
 * Enables on the default root each controller of @rc->ctrls that is not
 * enabled there yet; those compiled out or disabled at boot are left out,
 * saying so. Register a cleanup action that calls
 * cgk_root_controllers_restore() before this.
 */
void cgk_root_controllers_enable(struct kunit *test, struct cgk_root_controllers *rc)
{
	unsigned int k;
	u16 mask;
	int ret;

	/*
	 * Only the suite's writes change it while the suite runs. Not under
	 * cgroup_lock(): cgroup_mutex is exported to modules only with lockdep.
	 */
	mask = READ_ONCE(cgrp_dfl_root.cgrp.subtree_control);

	for (k = 0; rc->ctrls[k].name; k++) {
		if (!(mask & BIT(rc->ctrls[k].ssid))) {
			ret = cgk_write_control(&cgrp_dfl_root.cgrp, '+', &rc->ctrls[k]);
			if (ret == -EINVAL || ret == -ENOENT) {
				kunit_info(test, "%s controller not available (%d): not using it\n",
					   rc->ctrls[k].name, ret);
				continue;
			}
			KUNIT_ASSERT_EQ_MSG(test, ret, 0, "enabling %s on the root cgroup",
					    rc->ctrls[k].name);
			rc->enabled |= BIT(k);
		}
		rc->avail |= BIT(k);
	}
}

/**
 * cgk_root_controllers_restore - disable on the root what a case enabled
 * @test: the case, failed if a write fails
 * @rc: what cgk_root_controllers_enable() enabled, if it was called; emptied
 *
 * For the case's cleanup action, once its cgroups are removed.
 */
void cgk_root_controllers_restore(struct kunit *test, struct cgk_root_controllers *rc)
{
	unsigned int k;
	int ret;

	if (!rc->ctrls)
		return;		/* the case failed before enabling any */
	for (k = 0; rc->ctrls[k].name; k++) {
		if (!(rc->enabled & BIT(k)))
			continue;
		ret = cgk_write_control(&cgrp_dfl_root.cgrp, '-', &rc->ctrls[k]);
		if (ret)
			KUNIT_FAIL(test, "restoring the root's subtree_control: -%s: %d",
				   rc->ctrls[k].name, ret);
		rc->enabled &= ~BIT(k);
	}
	rc->avail = 0;
}
