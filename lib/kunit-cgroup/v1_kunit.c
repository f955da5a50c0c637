// SPDX-License-Identifier: GPL-2.0-only
/*
 * cgroup_v1: a v1 hierarchy next to the default one, and the attach paths
 * kernel code takes instead of cgroup.procs.
 *
 * What races: each case mounts a named v1 hierarchy with no controllers
 * (cgroup_mount_for_test(): "mount -t cgroup -o none,name=..."), so every
 * css_set links a cgroup of each root. Victim kthreads fork short-lived
 * children while migrator kthreads, all at once:
 *  - move a victim to a cgroup of either hierarchy by writing its pid to
 *    that cgroup's cgroup.procs (or, on v1, tasks) file, opened through a
 *    mount of each hierarchy and kept open, or through the KUnit entry
 *    point below the write handler (cgroup_procs_write_for_test());
 *  - attach a victim to every cgroup of another victim with
 *    cgroup_attach_task_all(), as vhost does for its worker, one root after
 *    the other;
 *  - move everything in one v1 cgroup to another with
 *    cgroup_transfer_tasks(), as cpuset v1 does when a cpuset loses its
 *    last CPU (v1_attach_paths);
 *  - mount a new hierarchy, move a victim into a cgroup of it and back,
 *    remove that cgroup and unmount it, so roots are set up (linking every
 *    css_set in the system) and destroyed (unlinking them) while the
 *    others migrate and fork (v1_mount_churn).
 * The v1 root has notify_on_release set, which its cgroups inherit, so each
 * one that empties queues its release work.
 *
 * v1_controllers runs v1_attach_paths on a hierarchy with the cpuset and
 * freezer controllers bound to it ("-o cpuset,freezer,name=..."), and cpu,
 * perf_event, net_cls and net_prio where the kernel has them, so every
 * move, attach-to-all, transfer and fork there runs their attach and fork
 * callbacks, while a worker freezes and thaws its cgroups and reads
 * cpuset.memory_pressure. The controllers leave the default hierarchy for
 * the case and come back after it.
 *
 * v1_release_agent_file writes two release agents to a v1 root's
 * release_agent file while others read it: each read shows one agent
 * whole, or none. No agent is ever run: that hierarchy has no task.
 *
 * Invariants, checked right after each operation and after the workers
 * stopped:
 *  - a move leaves the victim in its destination on that hierarchy and
 *    where it was on the other;
 *  - after cgroup_attach_task_all(@from, @tsk), @tsk is in @from's cgroup
 *    on both hierarchies;
 *  - after cgroup_transfer_tasks(@to, @from), every victim that was in
 *    @from is in @to, no live task is left in @from (children forked
 *    meanwhile included: the function promises that none slips out through
 *    fork), and the victims' default cgroups did not change; the css_set
 *    accounting is consistent (cgroup_check_css_sets_for_test());
 *  - css task iterators find exactly the victims the bookkeeping puts in
 *    each cgroup of both hierarchies;
 *  - with the controllers (v1_controllers): a victim runs on exactly the
 *    CPUs of the cpuset it is in; each cgroup's freezer.state is THAWED
 *    when neither it nor an ancestor was last written FROZEN, else
 *    FREEZING or FROZEN; cpuset.memory_pressure reads 0 (the root's
 *    memory_pressure_enabled is off, so no reclaim is ever recorded); the
 *    controllers are back on the default hierarchy after the unmount;
 *  - after teardown every hierarchy the case mounted is gone (its id no
 *    longer resolves) and the css_sets and default-root cgroups are back
 *    to their baseline.
 * The oracle (harness.c) fails a case on any lockdep, KCSAN, KASAN,
 * refcount_t or WARNING report.
 */

#include <linux/cgroup.h>
#include <linux/cgroup_kunit.h>
#include <linux/cpumask.h>
#include <linux/delay.h>
#include <linux/file.h>
#include <linux/fs.h>
#include <linux/mount.h>
#include <linux/mutex.h>
#include <linux/nodemask.h>
#include <linux/random.h>
#include <linux/rwsem.h>
#include <linux/sched/signal.h>

#include "harness.h"

#define V1_NR_DFL		3	/* top, x0 and x1 in it */
#define V1_NR_V1		5	/* the root, p0..p2, q0 in p0 */
#define V1_MAX_CHURN		64	/* churned hierarchies checked at the end */
/* Exiting tasks and removed cgroups are freed after RCU: wait for them. */
#define V1_SETTLE_TIMEOUT_MS	10000

enum v1_flags {
	V1_TRANSFER	= BIT(0),	/* some steps are cgroup_transfer_tasks() */
	V1_CHURN	= BIT(1),	/* worker 0 mounts and unmounts hierarchies */
	V1_CONTROLLERS	= BIT(2),	/* cpuset and freezer on the v1 hierarchy */
};

/*
 * v1_controllers: cpuset v1 and the v1 freezer bound to its hierarchy, and
 * each other controller with attach callbacks that the kernel has.
 */
#define V1_HAS_CONTROLLERS	(IS_ENABLED(CONFIG_CPUSETS_V1) && \
				 IS_ENABLED(CONFIG_CGROUP_FREEZER))
#ifdef CONFIG_CGROUP_SCHED
#define V1_CTL_CPU		",cpu"
#else
#define V1_CTL_CPU		""
#endif
#ifdef CONFIG_CGROUP_PERF
#define V1_CTL_PERF		",perf_event"
#else
#define V1_CTL_PERF		""
#endif
#ifdef CONFIG_CGROUP_NET_CLASSID
#define V1_CTL_NET_CLS		",net_cls"
#else
#define V1_CTL_NET_CLS		""
#endif
#ifdef CONFIG_CGROUP_NET_PRIO
#define V1_CTL_NET_PRIO		",net_prio"
#else
#define V1_CTL_NET_PRIO		""
#endif
#define V1_CONTROLLER_LIST	"cpuset,freezer" V1_CTL_CPU V1_CTL_PERF \
				V1_CTL_NET_CLS V1_CTL_NET_PRIO

static const char * const v1_dfl_name[V1_NR_DFL] = { "top", "x0", "x1" };
static const int v1_parent[V1_NR_V1] = { -1, 0, 0, 0, 1 };
static const char * const v1_name[V1_NR_V1] = { "root", "p0", "p1", "p2", "q0" };

struct v1_victim {
	struct cgk_victim *cv;
	struct mutex lock;		/* held by the worker moving it */
	int dfl;			/* bookkeeping: where it is on each */
	int v1;
};

/* How a move gets to cgroup_attach_task(). */
enum v1_via {
	V1_VIA_KUNIT,			/* cgroup_procs_write_for_test() */
	V1_VIA_PROCS,			/* a write to cgroup.procs */
	V1_VIA_TASKS,			/* a write to tasks (v1 only) */
	V1_NR_VIA
};

struct v1_case {
	struct kunit *test;
	unsigned long flags;
	struct cgroup *dfl[V1_NR_DFL];
	struct cgroup *v1[V1_NR_V1];	/* v1[0] is pinned by the mount */
	unsigned int ss_mask;		/* controllers bound to v1[0]'s root */
	struct vfsmount *mnt, *dfl_mnt;
	/* The files moves write to, open for the whole case. */
	struct file *dfl_procs[V1_NR_DFL];
	struct file *v1_file[V1_NR_V1][V1_NR_VIA];
	int hierarchy_id;
	/* V1_CONTROLLERS: each v1 cgroup's CPUs, freezer.state and its writer. */
	struct cpumask cpus[V1_NR_V1];
	struct file *v1_freeze[V1_NR_V1];
	bool frozen[V1_NR_V1];		/* last written FROZEN */
	struct mutex freeze_lock;	/* serializes the freezer steps */
	atomic_long_t freezes, thaws, pressure_reads;
	/* Moves take it for reading, a transfer (which moves many) to write. */
	struct rw_semaphore xfer;
	struct cgk_herd *herd;
	struct v1_victim *victims;
	unsigned int nr_victims;
	atomic_long_t moves, file_writes, attach_alls, transfers, transferred, churns;
	int churn_ids[V1_MAX_CHURN];
	unsigned int nr_churn_ids, churn_gen;
	struct cgk_baseline base;
};

/* @task's cgroup on hierarchy @id, or NULL. Only compared, not used. */
static struct cgroup *v1_cgroup_of(struct task_struct *task, int id)
{
	struct cgroup *cgrp = task_get_cgroup1(task, id);

	if (IS_ERR(cgrp))
		return NULL;
	cgroup_put(cgrp);
	return cgrp;
}

/*
 * Whether @v runs on exactly the CPUs of its cpuset, as cpuset_attach()
 * leaves the tasks it moves into a v1 cpuset. The caller holds @v->lock,
 * which every move of @v takes, so nothing changes them meanwhile.
 */
static bool v1_cpus_match(struct v1_case *c, struct v1_victim *v)
{
	return cpumask_equal(&v->cv->task->cpus_mask, &c->cpus[v->v1]);
}

/* Whether @v is where the bookkeeping says, on both hierarchies. */
static bool v1_check_victim(struct cgk_worker *w, struct v1_victim *v,
			    const char *after)
{
	struct v1_case *c = w->gang->data;
	struct task_struct *task = v->cv->task;

	if (cgk_where(task) != c->dfl[v->dfl]) {
		cgk_fail(w, "after %s: victim not in %s on the default hierarchy",
			 after, v1_dfl_name[v->dfl]);
		return false;
	}
	if (v1_cgroup_of(task, c->hierarchy_id) != c->v1[v->v1]) {
		cgk_fail(w, "after %s: victim not in %s on the v1 hierarchy",
			 after, v1_name[v->v1]);
		return false;
	}
	if ((c->flags & V1_CONTROLLERS) && !v1_cpus_match(c, v)) {
		cgk_fail(w, "after %s: victim in cpuset %s runs on CPUs %*pbl, not %*pbl",
			 after, v1_name[v->v1], cpumask_pr_args(&task->cpus_mask),
			 cpumask_pr_args(&c->cpus[v->v1]));
		return false;
	}
	return true;
}

/* Tasks in @cgrp itself that are not exiting. */
static unsigned int v1_live_tasks(struct cgroup *cgrp)
{
	struct css_task_iter it;
	struct task_struct *task;
	unsigned int n = 0;

	css_task_iter_start(&cgrp->self, 0, &it);
	while ((task = css_task_iter_next(&it)))
		n += !(READ_ONCE(task->flags) & PF_EXITING);
	css_task_iter_end(&it);
	return n;
}

/* ---- the operations ----------------------------------------------------- */

static void v1_move_step(struct cgk_worker *w)
{
	struct v1_case *c = w->gang->data;
	struct v1_victim *v = &c->victims[cgk_rand(w, c->nr_victims)];
	bool on_v1 = cgk_rand(w, 2);
	int dst = cgk_rand(w, on_v1 ? V1_NR_V1 : V1_NR_DFL);
	enum v1_via via = cgk_rand(w, on_v1 ? V1_NR_VIA : V1_VIA_TASKS);
	struct task_struct *task = v->cv->task;
	int ret;

	if (!mutex_trylock(&v->lock))
		return;
	if (via == V1_VIA_KUNIT)
		ret = cgroup_procs_write_for_test(on_v1 ? c->v1[dst] : c->dfl[dst], task);
	else if (on_v1)
		ret = cgk_file_write_pid(c->v1_file[dst][via], task, via == V1_VIA_PROCS);
	else
		ret = cgk_file_write_pid(c->dfl_procs[dst], task, true);
	if (ret) {
		cgk_fail(w, "moving a victim to %s%s: %d", on_v1 ? "v1 " : "",
			 on_v1 ? v1_name[dst] : v1_dfl_name[dst], ret);
	} else {
		if (via != V1_VIA_KUNIT)
			atomic_long_inc(&c->file_writes);
		if (on_v1)
			v->v1 = dst;
		else
			v->dfl = dst;
		v1_check_victim(w, v, "a move");
		atomic_long_inc(&c->moves);
	}
	mutex_unlock(&v->lock);
}

static void v1_attach_all_step(struct cgk_worker *w)
{
	struct v1_case *c = w->gang->data;
	unsigned int i = cgk_rand(w, c->nr_victims);
	unsigned int j = (i + 1 + cgk_rand(w, c->nr_victims - 1)) % c->nr_victims;
	struct v1_victim *tsk = &c->victims[i], *from = &c->victims[j];
	int ret;

	if (!mutex_trylock(&tsk->lock))
		return;
	if (!mutex_trylock(&from->lock))
		goto out;
	ret = cgroup_attach_task_all(from->cv->task, tsk->cv->task);
	if (ret) {
		cgk_fail(w, "cgroup_attach_task_all(): %d", ret);
	} else {
		tsk->dfl = from->dfl;
		tsk->v1 = from->v1;
		v1_check_victim(w, tsk, "cgroup_attach_task_all()");
		atomic_long_inc(&c->attach_alls);
	}
	mutex_unlock(&from->lock);
out:
	mutex_unlock(&tsk->lock);
}

/* Move everything in one v1 cgroup to another; never out of the root. */
static void v1_transfer_step(struct cgk_worker *w)
{
	struct v1_case *c = w->gang->data;
	int from = 1 + cgk_rand(w, V1_NR_V1 - 1);
	int to = cgk_rand(w, V1_NR_V1 - 1);
	struct css_set_check_for_test res;
	unsigned int i, moved = 0, left;
	char buf[CGK_FAILURE_LEN];
	int ret;

	if (to >= from)
		to++;
	down_write(&c->xfer);
	ret = cgroup_transfer_tasks(c->v1[to], c->v1[from]);
	if (ret) {
		cgk_fail(w, "cgroup_transfer_tasks(%s, %s): %d",
			 v1_name[to], v1_name[from], ret);
		goto out;
	}
	left = v1_live_tasks(c->v1[from]);
	if (left) {
		cgk_fail(w, "%u live tasks left in %s after moving all to %s",
			 left, v1_name[from], v1_name[to]);
		goto out;
	}
	for (i = 0; i < c->nr_victims; i++) {
		struct v1_victim *v = &c->victims[i];

		if (v->v1 == from) {
			v->v1 = to;
			moved++;
		}
		if (!v1_check_victim(w, v, "cgroup_transfer_tasks()"))
			goto out;
	}
	if (cgroup_check_css_sets_for_test(&res, buf, sizeof(buf)))
		cgk_fail(w, "after cgroup_transfer_tasks(): %s", buf);
	atomic_long_inc(&c->transfers);
	atomic_long_add(moved, &c->transferred);
out:
	up_write(&c->xfer);
}

static int v1_path(char *buf, size_t size, int i);

/* Whether v1 cgroup @i or one of its ancestors was last written FROZEN. */
static bool v1_freezing(struct v1_case *c, int i)
{
	for (; i > 0; i = v1_parent[i]) {
		if (c->frozen[i])
			return true;
	}
	return false;
}

/*
 * V1_CONTROLLERS: freeze or thaw one v1 cgroup through its freezer.state,
 * then read every cgroup's state back (freezer_read() updates each one
 * under freezer_mutex), and cpuset.memory_pressure of one of them
 * (fmeter_getrate() under its &fmp->lock).
 */
static void v1_controller_step(struct cgk_worker *w)
{
	struct v1_case *c = w->gang->data;
	int i = 1 + cgk_rand(w, V1_NR_V1 - 1);
	bool freeze = cgk_rand(w, 2);
	char path[96], buf[32];
	ssize_t n;
	int ret, len;

	mutex_lock(&c->freeze_lock);
	ret = cgk_file_write(c->v1_freeze[i], freeze ? "FROZEN\n" : "THAWED\n");
	if (ret) {
		cgk_fail(w, "writing %s to %s's freezer.state: %d",
			 freeze ? "FROZEN" : "THAWED", v1_name[i], ret);
		goto out;
	}
	c->frozen[i] = freeze;
	atomic_long_inc(freeze ? &c->freezes : &c->thaws);
	for (i = 1; i < V1_NR_V1; i++) {
		len = v1_path(path, sizeof(path), i);
		strscpy(path + len, "freezer.state", sizeof(path) - len);
		n = cgk_file_read(c->mnt, path, buf, sizeof(buf));
		if (n < 0) {
			cgk_fail(w, "reading %s: %zd", path, n);
			goto out;
		}
		if (v1_freezing(c, i) ? !strcmp(buf, "THAWED\n") : strcmp(buf, "THAWED\n")) {
			cgk_fail(w, "%s reads %.*s, %s", path, (int)strcspn(buf, "\n"), buf,
				 v1_freezing(c, i) ? "yet it or an ancestor was frozen" :
				 "yet neither it nor an ancestor is frozen");
			goto out;
		}
	}
out:
	mutex_unlock(&c->freeze_lock);

	i = cgk_rand(w, V1_NR_V1);
	len = v1_path(path, sizeof(path), i);
	strscpy(path + len, "cpuset.memory_pressure", sizeof(path) - len);
	n = cgk_file_read(c->mnt, path, buf, sizeof(buf));
	if (n < 0)
		cgk_fail(w, "reading %s: %zd", path, n);
	else if (strcmp(buf, "0\n"))
		cgk_fail(w, "%s reads %.*s with memory_pressure_enabled off", path,
			 (int)strcspn(buf, "\n"), buf);
	else
		atomic_long_inc(&c->pressure_reads);
}

static bool v1_no_children(void *arg)
{
	struct cgroup *cgrp = arg;

	return list_empty(&cgrp->self.children);
}

/*
 * Removed children linger on their parent's list until they are released,
 * and an unmount only destroys a hierarchy whose root has none: wait.
 */
static bool v1_unmount(struct vfsmount *mnt, struct cgroup *root)
{
	bool empty = cgk_wait_for(v1_no_children, root, V1_SETTLE_TIMEOUT_MS);

	kern_unmount(mnt);
	return empty;
}

struct v1_rmdir {
	struct cgroup *cgrp;
	int ret;
};

static bool v1_rmdir_done(void *arg)
{
	struct v1_rmdir *r = arg;

	r->ret = cgroup_destroy_for_test(r->cgrp);
	return r->ret != -EBUSY;
}

/* Remove @cgrp once the children born in it have exited, and drop it. */
static int v1_rmdir(struct cgroup *cgrp)
{
	struct v1_rmdir r = { .cgrp = cgrp };

	cgk_wait_for(v1_rmdir_done, &r, V1_SETTLE_TIMEOUT_MS);
	if (!r.ret)
		cgroup_put(cgrp);
	return r.ret;
}

/* Worker 0 of v1_mount_churn: a hierarchy that lives for one step. */
static void v1_churn_step(struct cgk_worker *w)
{
	struct v1_case *c = w->gang->data;
	struct v1_victim *v = &c->victims[cgk_rand(w, c->nr_victims)];
	struct cgroup *root, *leaf;
	struct vfsmount *mnt;
	char name[40];
	int ret;

	snprintf(name, sizeof(name), "cgk-churn-%d-%u", c->test->param_index,
		 ++c->churn_gen);
	mnt = cgroup_mount_for_test(name, NULL, &root);
	if (IS_ERR(mnt)) {
		cgk_fail(w, "mounting %s: %pe", name, mnt);
		return;
	}
	if (c->nr_churn_ids < V1_MAX_CHURN)
		c->churn_ids[c->nr_churn_ids++] = root->root->hierarchy_id;

	leaf = cgroup_create_for_test(root, "leaf");
	if (IS_ERR(leaf)) {
		cgk_fail(w, "creating a cgroup in %s: %pe", name, leaf);
		goto unmount;
	}
	/*
	 * Holding its lock keeps cgroup_attach_task_all() from following it,
	 * and the transfers from changing its bookkeeping meanwhile.
	 */
	down_read(&c->xfer);
	mutex_lock(&v->lock);
	ret = cgroup_procs_write_for_test(leaf, v->cv->task);
	if (ret) {
		cgk_fail(w, "moving a victim into %s: %d", name, ret);
	} else {
		if (v1_cgroup_of(v->cv->task, root->root->hierarchy_id) != leaf)
			cgk_fail(w, "victim not in the cgroup of %s it was moved to", name);
		v1_check_victim(w, v, "a move on a third hierarchy");
		ret = cgroup_procs_write_for_test(root, v->cv->task);
		if (ret)
			cgk_fail(w, "moving a victim out of %s: %d", name, ret);
	}
	mutex_unlock(&v->lock);
	up_read(&c->xfer);
	ret = v1_rmdir(leaf);
	if (ret)
		cgk_fail(w, "removing the cgroup of %s: %d", name, ret);
unmount:
	if (!v1_unmount(mnt, root))
		cgk_fail(w, "%s: removed cgroups not released after %d ms",
			 name, V1_SETTLE_TIMEOUT_MS);
	atomic_long_inc(&c->churns);
}

static void v1_step(struct cgk_worker *w)
{
	struct v1_case *c = w->gang->data;
	unsigned int op = cgk_rand(w, 8);

	if ((c->flags & V1_CHURN) && w->index == 0) {
		v1_churn_step(w);
		return;
	}
	if ((c->flags & V1_TRANSFER) && !op) {
		v1_transfer_step(w);
		return;
	}
	if ((c->flags & V1_CONTROLLERS) && op == 7) {
		v1_controller_step(w);
		return;
	}
	down_read(&c->xfer);
	if (op < 3)
		v1_attach_all_step(w);
	else
		v1_move_step(w);
	up_read(&c->xfer);
}

static const struct cgk_gang_ops v1_gang_ops = {
	.step = v1_step,
};

/* ---- fixture ------------------------------------------------------------ */

static bool v1_removed(void *arg)
{
	struct v1_case *c = arg;
	bool done = true;

	done &= cgk_cgroups_remove(c->v1 + 1, V1_NR_V1 - 1);
	done &= cgk_cgroups_remove(c->dfl, V1_NR_DFL);
	return done;
}

static void v1_close_files(struct v1_case *c)
{
	int i, via;

	for (i = 0; i < V1_NR_DFL; i++) {
		if (c->dfl_procs[i])
			fput(c->dfl_procs[i]);
		c->dfl_procs[i] = NULL;
	}
	for (i = 0; i < V1_NR_V1; i++) {
		for (via = 0; via < V1_NR_VIA; via++) {
			if (c->v1_file[i][via])
				fput(c->v1_file[i][via]);
			c->v1_file[i][via] = NULL;
		}
		if (c->v1_freeze[i])
			fput(c->v1_freeze[i]);
		c->v1_freeze[i] = NULL;
	}
	/* A kthread's last fput() is deferred: the mounts stay until then. */
	flush_delayed_fput();
	if (c->dfl_mnt)
		kern_unmount(c->dfl_mnt);
	c->dfl_mnt = NULL;
}

/* Cleanup action: stop everything, remove both hierarchies. */
static void v1_teardown(void *arg)
{
	struct v1_case *c = arg;

	v1_close_files(c);
	cgk_herd_stop(c->herd, V1_SETTLE_TIMEOUT_MS);
	if (!cgk_wait_for(v1_removed, c, V1_SETTLE_TIMEOUT_MS))
		KUNIT_FAIL(c->test, "test cgroups still busy %d ms after the victims exited",
			   V1_SETTLE_TIMEOUT_MS);
	else if (c->mnt && !v1_unmount(c->mnt, c->v1[0]))
		KUNIT_FAIL(c->test, "removed v1 cgroups not released after %d ms",
			   V1_SETTLE_TIMEOUT_MS);
	c->mnt = NULL;
}

/* The path of v1 cgroup @i from the root of its mount, with a trailing '/'. */
static int v1_path(char *buf, size_t size, int i)
{
	if (i <= 0) {
		buf[0] = '\0';
		return 0;
	}
	if (v1_parent[i] > 0)
		return scnprintf(buf, size, "%s/%s/", v1_name[v1_parent[i]], v1_name[i]);
	return scnprintf(buf, size, "%s/", v1_name[i]);
}

struct v1_mount {
	const char *name, *controllers;
	struct cgroup *root;
	struct vfsmount *mnt;
};

static bool v1_mount_done(void *arg)
{
	struct v1_mount *m = arg;

	m->mnt = cgroup_mount_for_test(m->name, m->controllers, &m->root);
	return m->mnt != ERR_PTR(-EBUSY);
}

/*
 * Mount a v1 hierarchy. With controllers, wait for them to be free: the
 * default hierarchy keeps them while earlier cases' removed cgroups there
 * are still being released, and a hierarchy unmounted before is freed
 * after an RCU grace period.
 */
static struct vfsmount *v1_mount(const char *name, const char *controllers,
				 struct cgroup **rootp)
{
	struct v1_mount m = { .name = name, .controllers = controllers };

	cgk_wait_for(v1_mount_done, &m, V1_SETTLE_TIMEOUT_MS);
	if (!IS_ERR(m.mnt))
		*rootp = m.root;
	return m.mnt;
}

/*
 * Give each v1 cpuset CPUs and memory, without which it takes no task: p0
 * the first half of the active CPUs, p1 the rest, p2 all of them, q0 (in
 * p0) the first; a task moved to the root may run on any possible CPU.
 * Open each cgroup's freezer.state for the freezer steps.
 */
static void v1_setup_controllers(struct v1_case *c)
{
	struct kunit *test = c->test;
	unsigned int n = num_active_cpus(), k = 0, cpu;
	char path[96], mems[16], text[64];
	struct file *file;
	int i, len;

	cpumask_copy(&c->cpus[0], cpu_possible_mask);
	for_each_cpu(cpu, cpu_active_mask) {
		cpumask_set_cpu(cpu, &c->cpus[k < max(n / 2, 1U) ? 1 : 2]);
		cpumask_set_cpu(cpu, &c->cpus[3]);
		if (!k++)
			cpumask_set_cpu(cpu, &c->cpus[4]);
	}
	if (cpumask_empty(&c->cpus[2]))
		cpumask_copy(&c->cpus[2], &c->cpus[1]);
	snprintf(mems, sizeof(mems), "%d\n", first_node(node_states[N_MEMORY]));

	for (i = 1; i < V1_NR_V1; i++) {
		len = v1_path(path, sizeof(path), i);
		strscpy(path + len, "cpuset.cpus", sizeof(path) - len);
		scnprintf(text, sizeof(text), "%*pbl\n", cpumask_pr_args(&c->cpus[i]));
		file = cgk_file_open_for_test(test, c->mnt, path);
		KUNIT_EXPECT_EQ_MSG(test, cgk_file_write(file, text), 0, "writing %s", path);
		fput(file);
		strscpy(path + len, "cpuset.mems", sizeof(path) - len);
		file = cgk_file_open_for_test(test, c->mnt, path);
		KUNIT_EXPECT_EQ_MSG(test, cgk_file_write(file, mems), 0, "writing %s", path);
		fput(file);
		strscpy(path + len, "freezer.state", sizeof(path) - len);
		c->v1_freeze[i] = cgk_file_open_for_test(test, c->mnt, path);
	}
}

static struct v1_case *v1_setup(struct kunit *test, unsigned long flags,
				unsigned int nr_victims)
{
	struct cgroup *dfl_root = NULL;
	struct vfsmount *mnt;
	struct v1_case *c;
	char name[40], path[96];
	unsigned int i;

	c = kunit_kzalloc(test, sizeof(*c), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, c);
	c->test = test;
	c->flags = flags;
	init_rwsem(&c->xfer);
	mutex_init(&c->freeze_lock);
	c->victims = kunit_kcalloc(test, nr_victims, sizeof(*c->victims), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, c->victims);
	c->herd = cgk_herd_alloc(test, nr_victims, CGK_VICTIM_FORK);
	KUNIT_ASSERT_NOT_NULL(test, c->herd);

	cgk_baseline_take(&c->base);
	KUNIT_ASSERT_EQ(test, 0, kunit_add_action_or_reset(test, v1_teardown, c));

	/* Unique names: a failed case may leave its hierarchies behind. */
	snprintf(name, sizeof(name), "cgk-v1-%s-%d", test->name, test->param_index);
	mnt = v1_mount(name, flags & V1_CONTROLLERS ? V1_CONTROLLER_LIST : NULL, &c->v1[0]);
	KUNIT_ASSERT_NOT_ERR_OR_NULL_MSG(test, mnt, "mounting %s%s%s", name,
					 flags & V1_CONTROLLERS ? " with " : "",
					 flags & V1_CONTROLLERS ? V1_CONTROLLER_LIST : "");
	c->mnt = mnt;
	c->hierarchy_id = c->v1[0]->root->hierarchy_id;
	c->ss_mask = c->v1[0]->root->subsys_mask;
	/* What writing 1 to its notify_on_release does; children inherit it. */
	set_bit(CGRP_NOTIFY_ON_RELEASE, &c->v1[0]->flags);
	for (i = 1; i < V1_NR_V1; i++) {
		c->v1[i] = cgroup_create_for_test(c->v1[v1_parent[i]], v1_name[i]);
		KUNIT_ASSERT_NOT_ERR_OR_NULL_MSG(test, c->v1[i], "creating %s", v1_name[i]);
	}
	if (flags & V1_CONTROLLERS)
		v1_setup_controllers(c);
	for (i = 0; i < V1_NR_DFL; i++) {
		c->dfl[i] = cgroup_create_for_test(i ? c->dfl[0] : &cgrp_dfl_root.cgrp,
						   i ? v1_dfl_name[i] : name);
		KUNIT_ASSERT_NOT_ERR_OR_NULL_MSG(test, c->dfl[i], "creating %s",
						 v1_dfl_name[i]);
	}

	mnt = cgroup_mount_for_test(NULL, NULL, &dfl_root);
	KUNIT_ASSERT_NOT_ERR_OR_NULL_MSG(test, mnt, "mounting the default hierarchy");
	c->dfl_mnt = mnt;
	KUNIT_ASSERT_PTR_EQ(test, dfl_root, &cgrp_dfl_root.cgrp);
	for (i = 0; i < V1_NR_DFL; i++) {
		snprintf(path, sizeof(path), "%s/%s%scgroup.procs", name,
			 i ? v1_dfl_name[i] : "", i ? "/" : "");
		c->dfl_procs[i] = cgk_file_open_for_test(test, c->dfl_mnt, path);
	}
	for (i = 0; i < V1_NR_V1; i++) {
		int len = v1_path(path, sizeof(path), i);

		strscpy(path + len, "cgroup.procs", sizeof(path) - len);
		c->v1_file[i][V1_VIA_PROCS] = cgk_file_open_for_test(test, c->mnt, path);
		strscpy(path + len, "tasks", sizeof(path) - len);
		c->v1_file[i][V1_VIA_TASKS] = cgk_file_open_for_test(test, c->mnt, path);
	}

	c->nr_victims = nr_victims;
	for (i = 0; i < nr_victims; i++) {
		struct v1_victim *v = &c->victims[i];
		struct task_struct *task;

		v->cv = &c->herd->victims[i];
		mutex_init(&v->lock);
		task = cgk_herd_start(c->herd, i, "cgk-v1");
		KUNIT_ASSERT_NOT_ERR_OR_NULL(test, task);
		KUNIT_ASSERT_EQ(test, 0, cgroup_procs_write_for_test(c->dfl[0], task));
		KUNIT_ASSERT_EQ(test, 0, cgroup_procs_write_for_test(c->v1[1], task));
		v->v1 = 1;
	}
	return c;
}

/* ---- checks ------------------------------------------------------------- */

static unsigned int v1_victims_in(struct v1_case *c, struct cgroup *cgrp)
{
	struct css_task_iter it;
	struct task_struct *task;
	unsigned int i, n = 0;

	css_task_iter_start(&cgrp->self, 0, &it);
	while ((task = css_task_iter_next(&it))) {
		for (i = 0; i < c->nr_victims; i++)
			n += c->victims[i].cv->task == task;
	}
	css_task_iter_end(&it);
	return n;
}

static void v1_check_membership(struct v1_case *c)
{
	struct kunit *test = c->test;
	unsigned int i, expected;
	int cg;

	for (i = 0; i < c->nr_victims; i++) {
		struct task_struct *task = c->victims[i].cv->task;

		KUNIT_EXPECT_PTR_EQ_MSG(test, cgk_where(task), c->dfl[c->victims[i].dfl],
					"victim %u is not in %s", i,
					v1_dfl_name[c->victims[i].dfl]);
		KUNIT_EXPECT_PTR_EQ_MSG(test, v1_cgroup_of(task, c->hierarchy_id),
					c->v1[c->victims[i].v1],
					"victim %u is not in v1 %s", i,
					v1_name[c->victims[i].v1]);
		if (c->flags & V1_CONTROLLERS)
			KUNIT_EXPECT_TRUE_MSG(test, v1_cpus_match(c, &c->victims[i]),
					      "victim %u in cpuset %s runs on CPUs %*pbl, not %*pbl",
					      i, v1_name[c->victims[i].v1],
					      cpumask_pr_args(&task->cpus_mask),
					      cpumask_pr_args(&c->cpus[c->victims[i].v1]));
	}
	for (cg = 0; cg < V1_NR_DFL; cg++) {
		for (expected = 0, i = 0; i < c->nr_victims; i++)
			expected += c->victims[i].dfl == cg;
		KUNIT_EXPECT_EQ_MSG(test, v1_victims_in(c, c->dfl[cg]), expected,
				    "%s: task iterator and bookkeeping disagree",
				    v1_dfl_name[cg]);
	}
	for (cg = 0; cg < V1_NR_V1; cg++) {
		for (expected = 0, i = 0; i < c->nr_victims; i++)
			expected += c->victims[i].v1 == cg;
		KUNIT_EXPECT_EQ_MSG(test, v1_victims_in(c, c->v1[cg]), expected,
				    "v1 %s: task iterator and bookkeeping disagree",
				    v1_name[cg]);
	}
}

/* How many of the hierarchies the case mounted are still there. */
static unsigned int v1_nr_left(struct v1_case *c)
{
	unsigned int i, n = !!v1_cgroup_of(current, c->hierarchy_id);

	for (i = 0; i < c->nr_churn_ids; i++)
		n += !!v1_cgroup_of(current, c->churn_ids[i]);
	return n;
}

/*
 * Whether the controllers the v1 hierarchy had are back on the default
 * one. Only rebind_subsystems() changes the mask, under cgroup_mutex,
 * which is exported to modules only with lockdep: a racy read, polled.
 */
static bool v1_controllers_home(struct v1_case *c)
{
	return (data_race(cgrp_dfl_root.subsys_mask) & c->ss_mask) == c->ss_mask;
}

static bool v1_all_gone(void *arg)
{
	struct v1_case *c = arg;

	return !v1_nr_left(c) && v1_controllers_home(c);
}

/* ---- the cases ---------------------------------------------------------- */

static void v1_run(struct kunit *test, unsigned long flags)
{
	unsigned int nr = cgk_param_threads(test);
	struct css_set_check_for_test res;
	char buf[CGK_FAILURE_LEN];
	struct cgk_gang *gang;
	struct v1_case *c;

	c = v1_setup(test, flags, max(nr, 2U));
	gang = cgk_gang_create(test, nr, &v1_gang_ops, c);
	KUNIT_ASSERT_NOT_NULL(test, gang);
	cgk_gang_run(gang);
	cgk_gang_report(gang);

	kunit_info(test, "%ld moves (%ld through files), %ld cgroup_attach_task_all(), %ld transfers (%ld victims), %ld hierarchies mounted and destroyed, %lu forks\n",
		   atomic_long_read(&c->moves), atomic_long_read(&c->file_writes),
		   atomic_long_read(&c->attach_alls),
		   atomic_long_read(&c->transfers), atomic_long_read(&c->transferred),
		   atomic_long_read(&c->churns), cgk_herd_forks(c->herd));
	CGK_EXPECT_EXERCISED(test, atomic_long_read(&c->moves), "no move succeeded");
	CGK_EXPECT_EXERCISED(test, atomic_long_read(&c->file_writes),
			     "no move through a cgroup file succeeded");
	CGK_EXPECT_EXERCISED(test, atomic_long_read(&c->attach_alls),
			     "no cgroup_attach_task_all() succeeded");
	CGK_EXPECT_EXERCISED(test, cgk_herd_forks(c->herd), "the victims never forked");
	if (flags & V1_TRANSFER)
		CGK_EXPECT_EXERCISED(test, atomic_long_read(&c->transfers),
				     "no cgroup_transfer_tasks() succeeded");
	if (flags & V1_CHURN)
		CGK_EXPECT_EXERCISED(test, atomic_long_read(&c->churns),
				     "no hierarchy was mounted and destroyed");
	if (flags & V1_CONTROLLERS) {
		kunit_info(test, "with %s: %ld freezes, %ld thaws, %ld memory_pressure reads\n",
			   V1_CONTROLLER_LIST, atomic_long_read(&c->freezes),
			   atomic_long_read(&c->thaws), atomic_long_read(&c->pressure_reads));
		CGK_EXPECT_EXERCISED(test, atomic_long_read(&c->freezes), "nothing was frozen");
		CGK_EXPECT_EXERCISED(test, atomic_long_read(&c->thaws), "nothing was thawed");
		CGK_EXPECT_EXERCISED(test, atomic_long_read(&c->pressure_reads),
				     "cpuset.memory_pressure was never read");
	}

	v1_check_membership(c);
	KUNIT_EXPECT_EQ_MSG(test, cgroup_check_css_sets_for_test(&res, buf, sizeof(buf)), 0,
			    "css_set accounting: %s", buf);

	kunit_release_action(test, v1_teardown, c);
	if (!cgk_wait_for(v1_all_gone, c, V1_SETTLE_TIMEOUT_MS)) {
		if (v1_nr_left(c))
			KUNIT_FAIL(test,
				   "%u of the %u hierarchies mounted are still there %d ms after their unmount",
				   v1_nr_left(c), c->nr_churn_ids + 1, V1_SETTLE_TIMEOUT_MS);
		else
			KUNIT_FAIL(test,
				   "%s not back on the default hierarchy %d ms after the unmount",
				   V1_CONTROLLER_LIST, V1_SETTLE_TIMEOUT_MS);
	}
	cgk_expect_baseline(test, &c->base, V1_SETTLE_TIMEOUT_MS);
}

/* The attach paths on a hierarchy with cpuset and the v1 freezer bound to it. */
static void v1_controllers(struct kunit *test)
{
	if (!V1_HAS_CONTROLLERS)
		kunit_skip(test, "needs CONFIG_CPUSETS_V1 and CONFIG_CGROUP_FREEZER");
	v1_run(test, V1_TRANSFER | V1_CONTROLLERS);
}

/* ---- v1_release_agent_file --------------------------------------------- */

/*
 * Two release agents of different lengths, so that a read that mixes them
 * is neither. They are never run: the hierarchy has no task, and no cgroup
 * with notify_on_release, and its agent is emptied before it goes away.
 */
#define V1_AGENT_LONG	"/cgk/release-agent/never-run/that-is-longer-than-the-other"
#define V1_AGENT_SHORT	"/cgk/ra"
#define V1_RA_MS	300U

struct v1_ra {
	struct vfsmount *mnt;
	struct cgroup *root;
	atomic_long_t writes;
	atomic_long_t reads;
};

/* Even workers write one agent or the other, odd ones read and check. */
static void v1_ra_step(struct cgk_worker *w)
{
	struct v1_ra *ra = w->gang->data;
	char buf[128];
	ssize_t n;

	if (!(w->index & 1)) {
		struct file *file = w->priv;
		const char *agent = cgk_rand(w, 2) ? V1_AGENT_LONG "\n" : V1_AGENT_SHORT "\n";
		int ret = cgk_file_write(file, agent);

		if (ret)
			cgk_fail(w, "writing release_agent: %d", ret);
		else
			atomic_long_inc(&ra->writes);
		return;
	}
	n = cgk_file_read(ra->mnt, "release_agent", buf, sizeof(buf));
	if (n < 0) {
		cgk_fail(w, "reading release_agent: %zd", n);
		return;
	}
	if (strcmp(buf, "\n") && strcmp(buf, V1_AGENT_LONG "\n") &&
	    strcmp(buf, V1_AGENT_SHORT "\n"))
		cgk_fail(w, "release_agent read as \"%.*s\": no agent ever written",
			 (int)strcspn(buf, "\n"), buf);
	else
		atomic_long_inc(&ra->reads);
}

static const struct cgk_gang_ops v1_ra_ops = {
	.step = v1_ra_step,
};

static void v1_ra_teardown(void *arg)
{
	struct v1_ra *ra = arg;

	flush_delayed_fput();
	if (ra->mnt && !v1_unmount(ra->mnt, ra->root))
		pr_warn("cgk: a release-agent hierarchy still has cgroups\n");
	ra->mnt = NULL;
}

/*
 * The root's release_agent file, written and read at once: each read shows
 * the whole of one agent written (or none), as release_agent_path_lock
 * makes sure, never a mix of two.
 */
static void v1_release_agent_file(struct kunit *test)
{
	unsigned int nr = 4, i;
	struct cgk_gang *gang;
	struct v1_ra *ra;
	char name[40], buf[128];

	ra = kunit_kzalloc(test, sizeof(*ra), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, ra);
	snprintf(name, sizeof(name), "cgk-v1-ra-%u", get_random_u32());
	ra->mnt = cgroup_mount_for_test(name, NULL, &ra->root);
	KUNIT_ASSERT_NOT_ERR_OR_NULL_MSG(test, ra->mnt, "mounting %s", name);
	KUNIT_ASSERT_EQ(test, 0, kunit_add_action_or_reset(test, v1_ra_teardown, ra));

	gang = cgk_gang_create(test, nr, &v1_ra_ops, ra);
	KUNIT_ASSERT_NOT_NULL(test, gang);
	gang->duration_ms = min(gang->duration_ms, V1_RA_MS);
	for (i = 0; i < nr; i += 2)
		gang->workers[i].priv = cgk_file_open_for_test(test, ra->mnt, "release_agent");
	cgk_gang_run(gang);
	for (i = 0; i < nr; i += 2)
		fput(gang->workers[i].priv);
	cgk_gang_report(gang);
	kunit_info(test, "%ld release agents written, %ld read\n",
		   atomic_long_read(&ra->writes), atomic_long_read(&ra->reads));
	CGK_EXPECT_EXERCISED(test, atomic_long_read(&ra->writes), "no agent was written");
	CGK_EXPECT_EXERCISED(test, atomic_long_read(&ra->reads), "no agent was read");

	/* Emptied, so that nothing would ever run it. */
	gang->workers[0].priv = cgk_file_open_for_test(test, ra->mnt, "release_agent");
	KUNIT_EXPECT_EQ(test, cgk_file_write(gang->workers[0].priv, "\n"), 0);
	fput(gang->workers[0].priv);
	KUNIT_EXPECT_GE(test, cgk_file_read(ra->mnt, "release_agent", buf, sizeof(buf)), 0);
	KUNIT_EXPECT_STREQ(test, buf, "\n");
	kunit_release_action(test, v1_ra_teardown, ra);
}

/* Moves on both hierarchies, attach-to-all and transfers, racing fork. */
static void v1_attach_paths(struct kunit *test)
{
	v1_run(test, V1_TRANSFER);
}

/* The same with hierarchies mounted and destroyed all along. */
static void v1_mount_churn(struct kunit *test)
{
	v1_run(test, V1_TRANSFER | V1_CHURN);
}

static struct kunit_case cgroup_v1_cases[] = {
	CGK_CASE(v1_attach_paths),
	CGK_CASE(v1_mount_churn),
	CGK_CASE(v1_controllers),
	KUNIT_CASE(v1_release_agent_file),
	{}
};

static struct kunit_suite cgroup_v1_suite = {
	.name = "cgroup_v1",
	.suite_init = cgk_suite_init,
	.suite_exit = cgk_suite_exit,
	.init = cgk_case_init,
	.exit = cgk_case_exit,
	.test_cases = cgroup_v1_cases,
};

kunit_test_suite(cgroup_v1_suite);
