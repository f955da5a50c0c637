// SPDX-License-Identifier: GPL-2.0-only
/*
 * cgroup_devres: the rdma and dmem controllers' limits, charged from many
 * kthreads at once.
 *
 * Neither controller has anything to charge on UML or in a bare QEMU
 * guest: each case registers a device of its own, a fake RDMA device
 * (rdmacg_register_device(), "cgk_rdma<N>") or a device memory region
 * (dmem_cgroup_register_region(), "cgk_dmem<N>"), and unregisters it at
 * the end. In a test hierarchy on the default root, the controller is
 * enabled in a parent P (cgk-devres-<controller>-<N>) that has one leaf
 * per worker, l0..l<threads-1>; a limit is written to P's rdma.max or
 * dmem.max, the leaves have none. Each worker moves itself into its leaf
 * (both controllers charge the css of current) and charges and uncharges
 * at random through the kernel's entry points, holding at most one charge
 * more than P's limit, so that together the workers hit the limit all the
 * time:
 *  - rdma_charge_exact: rdmacg_try_charge()/rdmacg_uncharge() of
 *    RDMACG_RESOURCE_HCA_HANDLE (P's limit 3) and RDMACG_RESOURCE_HCA_OBJECT
 *    (P's limit 6), one at a time;
 *  - dmem_charge_exact: dmem_cgroup_try_charge()/dmem_cgroup_uncharge() of
 *    1 to 3 chunks of 4 KiB (P's limit 8 chunks). An admitted charge
 *    holds a reference on the pool charged and on its css, which
 *    dmem_cgroup_uncharge() drops; a refused one returns the pool whose
 *    limit refused, with the same two references, which the worker drops
 *    with dmem_cgroup_pool_state_put().
 * rdmacg_mutex is taken by every rdma charge, dmemcg_lock when the region
 * is registered and unregistered and when a cgroup's first charge or limit
 * write creates its pool: from process context with irqs on, as drivers
 * take them (the reach report, reach_kunit.c, shows what lockdep saw).
 *
 * Invariants:
 *  - no admitted charge takes P past its limit: shadow counters of the
 *    charges admitted, raised after a success and lowered before the
 *    uncharge, never exceed it;
 *  - a leaf's rdma.current or dmem.current, read by its worker now and
 *    then, equals what that worker holds: nothing else charges there, and
 *    a refused charge leaves nothing behind in the levels below the one
 *    that refused it;
 *  - rdma: a charge is owned by the worker's own leaf; P's rdma.peak never
 *    exceeds its rdma.max and equals it for a resource that was refused
 *    (a refusal means P was full); the max and alloc_fail counts of P's
 *    rdma.events equal the refusals of each resource;
 *  - dmem: a refusal is -EAGAIN and names the limiting pool, always the
 *    same one (P's), never the worker's own leaf's; P's dmem.peak never
 *    exceeds its dmem.max;
 *  - charges are admitted and refused (liveness);
 *  - once the workers gave everything back, P's and every leaf's
 *    rdma.current or dmem.current show nothing charged to the device or
 *    region; after teardown (the device or region unregistered) the
 *    css_sets and cgroups are back to their baseline.
 * The oracle (harness.c) fails a case on any lockdep, KCSAN, KASAN,
 * refcount_t or WARNING report. Each case skips without its controller
 * (CONFIG_CGROUP_RDMA, CONFIG_CGROUP_DMEM) or when the controller is not
 * available on the default hierarchy.
 */

#include <linux/cgroup.h>
#include <linux/cgroup_dmem.h>
#include <linux/cgroup_kunit.h>
#include <linux/cgroup_rdma.h>
#include <linux/file.h>
#include <linux/fs.h>
#include <linux/mount.h>
#include <linux/sizes.h>
#include <linux/slab.h>
#include <linux/string.h>

#include "harness.h"

#define DV_NR_RES		2	/* resources charged: rdma's two, dmem's one */
#define DV_RDMA_HANDLES		3	/* P's rdma.max hca_handle */
#define DV_RDMA_OBJECTS		6	/* P's rdma.max hca_object */
#define DV_DMEM_CHUNK		SZ_4K
#define DV_DMEM_MAX_CHUNKS	3	/* a dmem charge is 1..3 chunks */
#define DV_DMEM_LIMIT		(8 * DV_DMEM_CHUNK)	/* P's dmem.max */
#define DV_DMEM_SIZE		SZ_1M	/* the region's capacity, only shown */
#define DV_HOLD_MAX		16	/* charges a worker holds at once, at most */
#define DV_CHECK_EVERY		8	/* a worker reads its leaf once in so many steps */
#define DV_READ_LEN		1024	/* what an interface file may show */
#define DV_LINE_LEN		160
/* Exited workers and removed cgroups are freed after RCU: wait for them. */
#define DV_SETTLE_TIMEOUT_MS	10000

/* A worker charges while it holds no more than P's limit: one more at most. */
static_assert((DV_RDMA_HANDLES + 1) + (DV_RDMA_OBJECTS + 1) <= DV_HOLD_MAX);
static_assert(DV_DMEM_LIMIT / DV_DMEM_CHUNK + DV_DMEM_MAX_CHUNKS <= DV_HOLD_MAX);

/**
 * struct dv_charge - a charge a worker holds
 * @rdmacg: rdma: the cgroup rdmacg_try_charge() charged, for rdmacg_uncharge()
 * @pool: dmem: the pool dmem_cgroup_try_charge() charged, referenced, for
 *	  dmem_cgroup_uncharge()
 * @res: the resource charged (rdma), 0 (dmem)
 * @units: how much: 1 (rdma), bytes (dmem)
 */
struct dv_charge {
	struct rdma_cgroup *rdmacg;
	struct dmem_cgroup_pool_state *pool;
	unsigned int res;
	long units;
};

/**
 * struct dv_worker - what one worker holds; written by that worker only
 * @leaf: its leaf, where it charges from
 * @settled: it has moved itself into @leaf
 * @held: the charges it holds
 * @nr_held: how many
 * @units: what @held adds up to, per resource
 * @own_pool: dmem: the pool of its leaf, once a charge of it was admitted;
 *	      only compared
 */
struct dv_worker {
	struct cgroup *leaf;
	bool settled;
	struct dv_charge held[DV_HOLD_MAX];
	unsigned int nr_held;
	long units[DV_NR_RES];
	struct dmem_cgroup_pool_state *own_pool;
};

struct dv_case;

/**
 * struct dv_kind - a controller, and how a case charges its device
 * @ctrl: the controller's name, as cgroup.subtree_control and its files
 *	  spell it
 * @ssid: its subsystem id
 * @nr_res: resources charged, each limited at P
 * @res_name: their names, for messages
 * @res_key: their keys in a line of the interface files ("key=N"); NULL:
 *	     the line's only number
 * @limit: P's limit of each
 * @register_dev: register the device or region named c->key; 0 or -errno
 * @unregister_dev: cleanup action undoing @register_dev
 * @max_text: the text written to P's <ctrl>.max
 * @charge: one charge by a worker: admitted (dv_admit()) or refused
 * @uncharge: give a held charge back
 * @check: optional: this controller's checks once the workers stopped,
 *	   with P's <ctrl>.peak (NULL if it could not be read)
 */
struct dv_kind {
	const char *ctrl;
	int ssid;
	unsigned int nr_res;
	const char *res_name[DV_NR_RES];
	const char *res_key[DV_NR_RES];
	long limit[DV_NR_RES];
	int (*register_dev)(struct dv_case *c);
	void (*unregister_dev)(void *arg);
	void (*max_text)(struct dv_case *c, char *buf, size_t len);
	void (*charge)(struct cgk_worker *w, struct dv_worker *me);
	void (*uncharge)(struct dv_case *c, const struct dv_charge *ch);
	void (*check)(struct dv_case *c, const long long *peak);
};

/**
 * struct dv_case - one case's hierarchy, device and counts
 * @test: the case
 * @kind: what it charges
 * @nr: leaves, one per worker
 * @cg: P, then the leaves l0..l<nr-1>; each holds the reference
 *	cgroup_create_for_test() returned
 * @mnt: a mount of the default hierarchy, for the interface files
 * @top_name: P's name, unique per case and parameter
 * @key: the device's or region's name, as the interface files show it
 * @root_enabled: the case enabled its controller in the root cgroup
 * @workers: per worker
 * @shadow: admitted charges outstanding through P, per resource: raised
 *	    after a success, lowered before the uncharge
 * @seen_max: the highest @shadow seen, per resource
 * @admitted: charges admitted
 * @refused: charges refused with -EAGAIN, per resource
 * @uncharged: charges given back
 * @leaf_reads: reads of a leaf's <ctrl>.current by its worker
 * @rdma_dev: rdma: the fake device
 * @rdma_registered: rdma: @rdma_dev is registered
 * @region: dmem: the region
 * @limit_pool: dmem: the limiting pool the first refusal named; only compared
 * @base: css_sets and cgroups before the case
 */
struct dv_case {
	struct kunit *test;
	const struct dv_kind *kind;
	unsigned int nr;
	struct cgroup **cg;
	struct vfsmount *mnt;
	char top_name[48];
	char key[32];
	bool root_enabled;
	struct dv_worker *workers;
	atomic_long_t shadow[DV_NR_RES];
	atomic_long_t seen_max[DV_NR_RES];
	atomic_long_t admitted;
	atomic_long_t refused[DV_NR_RES];
	atomic_long_t uncharged;
	atomic_long_t leaf_reads;
#if IS_ENABLED(CONFIG_CGROUP_RDMA)
	struct rdmacg_device rdma_dev;
	bool rdma_registered;
#endif
	struct dmem_cgroup_region *region;
	struct dmem_cgroup_pool_state *limit_pool;
	struct cgk_baseline base;
};

/* ---- interface files ---------------------------------------------------- */

/* For messages: "parent" for P (cgroup 0), "leaf l<n>" for cgroup 1 + n. */
static void dv_cg_name(unsigned int i, char *buf, size_t len)
{
	if (i)
		snprintf(buf, len, "leaf l%u", i - 1);
	else
		strscpy(buf, "parent", len);
}

/*
 * Read @file of cgroup @i (0: P, 1 + n: leaf ln) through the mount and copy
 * what its line of the case's device or region shows after the name.
 */
static int dv_read_line(struct dv_case *c, unsigned int i, const char *file,
			char *line, size_t len)
{
	size_t klen = strlen(c->key);
	char path[96], *buf, *p, *end;
	int ret = -ENOENT;
	ssize_t n;

	if (i)
		snprintf(path, sizeof(path), "%s/l%u/%s", c->top_name, i - 1, file);
	else
		snprintf(path, sizeof(path), "%s/%s", c->top_name, file);
	buf = kmalloc(DV_READ_LEN, GFP_KERNEL);
	if (!buf)
		return -ENOMEM;
	n = cgk_file_read(c->mnt, path, buf, DV_READ_LEN);
	if (n < 0) {
		kfree(buf);
		return n;
	}
	for (p = buf; *p; p = end + 1) {
		end = strchrnul(p, '\n');
		if (!strncmp(p, c->key, klen) && p[klen] == ' ') {
			*end = '\0';
			strscpy(line, p + klen + 1, len);
			ret = 0;
			break;
		}
		if (!*end)
			break;
	}
	kfree(buf);
	return ret;
}

/* The number of "@key=N" in @line, or its only number if @key is NULL. */
static int dv_field(const char *line, const char *key, long long *val)
{
	const char *p = line;

	if (key) {
		size_t len = strlen(key);

		for (p = strstr(line, key); p; p = strstr(p + 1, key)) {
			if ((p == line || p[-1] == ' ') && p[len] == '=')
				break;
		}
		if (!p)
			return -ENOENT;
		p += len + 1;
	}
	return sscanf(p, "%lld", val) == 1 ? 0 : -EINVAL;
}

/* What <ctrl>.@what of cgroup @i shows for the device, per resource. */
static int dv_read(struct dv_case *c, unsigned int i, const char *what, long long *vals)
{
	const struct dv_kind *k = c->kind;
	char file[32], line[DV_LINE_LEN];
	unsigned int r;
	int ret;

	snprintf(file, sizeof(file), "%s.%s", k->ctrl, what);
	ret = dv_read_line(c, i, file, line, sizeof(line));
	for (r = 0; !ret && r < k->nr_res; r++)
		ret = dv_field(line, k->res_key[r], &vals[r]);
	return ret;
}

/* ---- workers ------------------------------------------------------------ */

/* Move the worker into its leaf: both controllers charge current's css. */
static void dv_settle_in(struct cgk_worker *w, struct dv_worker *me)
{
	int ret = cgroup_procs_write_for_test(me->leaf, current);

	if (ret) {
		cgk_fail(w, "moving worker %u into its leaf: %d", w->index, ret);
		return;
	}
	if (cgk_where(current) != me->leaf) {
		cgk_fail(w, "worker %u is not in its leaf after moving there", w->index);
		return;
	}
	me->settled = true;
}

/* Hold an admitted charge; fail if it took P past its limit. */
static void dv_admit(struct cgk_worker *w, struct dv_worker *me,
		     const struct dv_charge *ch)
{
	struct dv_case *c = w->gang->data;
	const struct dv_kind *k = c->kind;
	long now = atomic_long_add_return(ch->units, &c->shadow[ch->res]);

	cgk_atomic_long_max(&c->seen_max[ch->res], now);
	atomic_long_inc(&c->admitted);
	me->held[me->nr_held++] = *ch;
	me->units[ch->res] += ch->units;
	if (now > k->limit[ch->res])
		cgk_fail(w, "parent: %s %ld admitted, over its %s.max %ld",
			 k->res_name[ch->res], now, k->ctrl, k->limit[ch->res]);
}

/* Give back held charge @i. */
static void dv_give_back(struct cgk_worker *w, struct dv_worker *me, unsigned int i)
{
	struct dv_case *c = w->gang->data;
	struct dv_charge ch = me->held[i];

	me->held[i] = me->held[--me->nr_held];
	me->units[ch.res] -= ch.units;
	/* Lowered first: the shadow never counts what is being given back. */
	atomic_long_sub(ch.units, &c->shadow[ch.res]);
	c->kind->uncharge(c, &ch);
	atomic_long_inc(&c->uncharged);
}

/* Nothing else charges in the leaf: it shows exactly what its worker holds. */
static void dv_check_leaf(struct cgk_worker *w, struct dv_worker *me)
{
	struct dv_case *c = w->gang->data;
	const struct dv_kind *k = c->kind;
	long long vals[DV_NR_RES];
	unsigned int r;
	int ret;

	ret = dv_read(c, 1 + w->index, "current", vals);
	if (ret) {
		cgk_fail(w, "reading leaf l%u's %s.current: %d", w->index, k->ctrl, ret);
		return;
	}
	atomic_long_inc(&c->leaf_reads);
	for (r = 0; r < k->nr_res; r++) {
		if (vals[r] != me->units[r]) {
			cgk_fail(w, "leaf l%u: %s.current %s=%lld while its worker holds %ld",
				 w->index, k->ctrl, k->res_name[r], vals[r], me->units[r]);
			return;
		}
	}
}

static void dv_step(struct cgk_worker *w)
{
	struct dv_case *c = w->gang->data;
	struct dv_worker *me = &c->workers[w->index];

	if (!me->settled) {
		dv_settle_in(w, me);
		return;
	}
	/* Charges 5 times in 8: the workers keep P at its limit. */
	if (me->nr_held == DV_HOLD_MAX || (me->nr_held && cgk_rand(w, 8) < 3))
		dv_give_back(w, me, cgk_rand(w, me->nr_held));
	else
		c->kind->charge(w, me);
	if (!cgk_rand(w, DV_CHECK_EVERY))
		dv_check_leaf(w, me);
}

/* Give everything back before the worker exits. */
static void dv_fini(struct cgk_worker *w)
{
	struct dv_case *c = w->gang->data;
	struct dv_worker *me = &c->workers[w->index];

	while (me->nr_held)
		dv_give_back(w, me, me->nr_held - 1);
}

static const struct cgk_gang_ops dv_gang_ops = {
	.step = dv_step,
	.fini = dv_fini,
};

/* ---- rdma --------------------------------------------------------------- */

#if IS_ENABLED(CONFIG_CGROUP_RDMA)
static_assert(RDMACG_RESOURCE_MAX == DV_NR_RES);

static int dv_rdma_register(struct dv_case *c)
{
	c->rdma_dev.name = c->key;
	rdmacg_register_device(&c->rdma_dev);
	c->rdma_registered = true;
	return 0;
}

/* Cleanup action: frees the resource pools the device still has. */
static void dv_rdma_unregister(void *arg)
{
	struct dv_case *c = arg;

	if (c->rdma_registered)
		rdmacg_unregister_device(&c->rdma_dev);
	c->rdma_registered = false;
}

static void dv_rdma_max_text(struct dv_case *c, char *buf, size_t len)
{
	const long *limit = c->kind->limit;

	snprintf(buf, len, "%s hca_handle=%ld hca_object=%ld\n", c->key,
		 limit[RDMACG_RESOURCE_HCA_HANDLE], limit[RDMACG_RESOURCE_HCA_OBJECT]);
}

static void dv_rdma_charge(struct cgk_worker *w, struct dv_worker *me)
{
	struct dv_case *c = w->gang->data;
	const struct dv_kind *k = c->kind;
	unsigned int r = cgk_rand(w, RDMACG_RESOURCE_MAX);
	struct dv_charge ch = { .res = r, .units = 1 };
	int ret;

	if (me->units[r] > k->limit[r])
		return;
	/* Charges task_rdmacg(current), every level up to the root. */
	ret = rdmacg_try_charge(&ch.rdmacg, &c->rdma_dev, r);
	if (ret == -EAGAIN) {
		atomic_long_inc(&c->refused[r]);
		return;
	}
	if (ret) {
		cgk_fail(w, "rdmacg_try_charge(%s): %d", k->res_name[r], ret);
		return;
	}
	if (ch.rdmacg->css.cgroup != me->leaf) {
		rdmacg_uncharge(ch.rdmacg, &c->rdma_dev, r);
		cgk_fail(w, "a %s charge of leaf l%u's worker is owned by another cgroup",
			 k->res_name[r], w->index);
		return;
	}
	dv_admit(w, me, &ch);
}

static void dv_rdma_uncharge(struct dv_case *c, const struct dv_charge *ch)
{
	/* Drops the css reference rdmacg_try_charge() took. */
	rdmacg_uncharge(ch->rdmacg, &c->rdma_dev, ch->res);
}

/*
 * Under rdmacg_mutex, a refusal at P means P was at its limit, reached by
 * admitted charges: rdma.peak shows it exactly. Each refusal is counted at
 * P, the cgroup over its limit (max), and below and at P, from the leaf
 * that asked (alloc_fail).
 */
static void dv_rdma_check(struct dv_case *c, const long long *peak)
{
	static const char * const counts[] = { "max", "alloc_fail" };
	const struct dv_kind *k = c->kind;
	struct kunit *test = c->test;
	char line[DV_LINE_LEN], key[32];
	unsigned int r, j;
	long refused;
	long long n;

	for (r = 0; peak && r < RDMACG_RESOURCE_MAX; r++) {
		refused = atomic_long_read(&c->refused[r]);
		if (refused)
			KUNIT_EXPECT_EQ_MSG(test, peak[r], (long long)k->limit[r],
					    "parent: rdma.peak %s=%lld, not its rdma.max %ld, yet %ld charges were refused",
					    k->res_name[r], peak[r], k->limit[r], refused);
	}
	if (dv_read_line(c, 0, "rdma.events", line, sizeof(line))) {
		KUNIT_FAIL(test, "parent: reading rdma.events failed");
		return;
	}
	for (r = 0; r < RDMACG_RESOURCE_MAX; r++) {
		refused = atomic_long_read(&c->refused[r]);
		for (j = 0; j < ARRAY_SIZE(counts); j++) {
			snprintf(key, sizeof(key), "%s.%s", k->res_name[r], counts[j]);
			if (dv_field(line, key, &n)) {
				KUNIT_FAIL(test, "parent: no %s in rdma.events: %s", key, line);
				continue;
			}
			KUNIT_EXPECT_EQ_MSG(test, n, (long long)refused,
					    "parent: rdma.events %s=%lld, %ld %s charges refused",
					    key, n, refused, k->res_name[r]);
		}
	}
}

static const struct dv_kind dv_rdma = {
	.ctrl = "rdma",
	.ssid = rdma_cgrp_id,
	.nr_res = RDMACG_RESOURCE_MAX,
	.res_name = {
		[RDMACG_RESOURCE_HCA_HANDLE] = "hca_handle",
		[RDMACG_RESOURCE_HCA_OBJECT] = "hca_object",
	},
	.res_key = {
		[RDMACG_RESOURCE_HCA_HANDLE] = "hca_handle",
		[RDMACG_RESOURCE_HCA_OBJECT] = "hca_object",
	},
	.limit = {
		[RDMACG_RESOURCE_HCA_HANDLE] = DV_RDMA_HANDLES,
		[RDMACG_RESOURCE_HCA_OBJECT] = DV_RDMA_OBJECTS,
	},
	.register_dev = dv_rdma_register,
	.unregister_dev = dv_rdma_unregister,
	.max_text = dv_rdma_max_text,
	.charge = dv_rdma_charge,
	.uncharge = dv_rdma_uncharge,
	.check = dv_rdma_check,
};
#endif /* CONFIG_CGROUP_RDMA */

/* ---- dmem --------------------------------------------------------------- */

#if IS_ENABLED(CONFIG_CGROUP_DMEM)
static int dv_dmem_register(struct dv_case *c)
{
	const struct dmem_cgroup_init init = { .size = DV_DMEM_SIZE };
	struct dmem_cgroup_region *region;

	region = dmem_cgroup_register_region(&init, "%s", c->key);
	if (IS_ERR_OR_NULL(region))
		return region ? PTR_ERR(region) : -EINVAL;
	c->region = region;
	return 0;
}

/* Cleanup action: drops the region's pools; the last pool put frees it. */
static void dv_dmem_unregister(void *arg)
{
	struct dv_case *c = arg;

	dmem_cgroup_unregister_region(c->region);
	c->region = NULL;
}

static void dv_dmem_max_text(struct dv_case *c, char *buf, size_t len)
{
	snprintf(buf, len, "%s %ld\n", c->key, c->kind->limit[0]);
}

/*
 * A refusal: no pool charged, and the pool whose limit refused returned
 * with a reference on it and on its css, ours to drop. Only P has a
 * limit: every refusal names the same pool, never the worker's own leaf's.
 */
static void dv_dmem_refused(struct cgk_worker *w, struct dv_worker *me,
			    struct dmem_cgroup_pool_state *pool,
			    struct dmem_cgroup_pool_state *limit_pool)
{
	struct dv_case *c = w->gang->data;
	struct dmem_cgroup_pool_state *first;

	if (pool)
		cgk_fail(w, "a refused charge of leaf l%u's worker returned a charged pool",
			 w->index);
	if (!limit_pool) {
		cgk_fail(w, "a charge of leaf l%u's worker refused without its limiting pool",
			 w->index);
		return;
	}
	if (limit_pool == me->own_pool)
		cgk_fail(w, "a charge refused by leaf l%u's own pool, which has no limit",
			 w->index);
	first = cmpxchg(&c->limit_pool, NULL, limit_pool);
	if (first && first != limit_pool)
		cgk_fail(w, "charges refused by two pools: only the parent has a limit");
	dmem_cgroup_pool_state_put(limit_pool);
}

static void dv_dmem_charge(struct cgk_worker *w, struct dv_worker *me)
{
	struct dv_case *c = w->gang->data;
	struct dmem_cgroup_pool_state *pool = NULL, *limit_pool = NULL;
	struct dv_charge ch = {
		.units = (1 + cgk_rand(w, DV_DMEM_MAX_CHUNKS)) * DV_DMEM_CHUNK,
	};
	int ret;

	if (me->units[0] > c->kind->limit[0])
		return;
	/* Charges the pool of current's css, every level up to the root. */
	ret = dmem_cgroup_try_charge(c->region, ch.units, &pool, &limit_pool);
	if (ret == -EAGAIN) {
		atomic_long_inc(&c->refused[0]);
		dv_dmem_refused(w, me, pool, limit_pool);
		return;
	}
	if (ret) {
		cgk_fail(w, "dmem_cgroup_try_charge(%ld bytes): %d", ch.units, ret);
		return;
	}
	if (limit_pool) {
		dmem_cgroup_pool_state_put(limit_pool);
		cgk_fail(w, "an admitted charge returned a limiting pool");
	}
	if (!pool) {
		cgk_fail(w, "a charge of %ld bytes admitted without its pool", ch.units);
		return;
	}
	if (me->own_pool && pool != me->own_pool) {
		dmem_cgroup_uncharge(pool, ch.units);
		cgk_fail(w, "leaf l%u's worker charged another pool than before", w->index);
		return;
	}
	me->own_pool = pool;
	ch.pool = pool;
	dv_admit(w, me, &ch);
}

static void dv_dmem_uncharge(struct dv_case *c, const struct dv_charge *ch)
{
	/* Drops the pool's and its css's references, taken by the charge. */
	dmem_cgroup_uncharge(ch->pool, ch->units);
}

static const struct dv_kind dv_dmem = {
	.ctrl = "dmem",
	.ssid = dmem_cgrp_id,
	.nr_res = 1,
	.res_name = { "bytes" },
	.res_key = { NULL },
	.limit = { DV_DMEM_LIMIT },
	.register_dev = dv_dmem_register,
	.unregister_dev = dv_dmem_unregister,
	.max_text = dv_dmem_max_text,
	.charge = dv_dmem_charge,
	.uncharge = dv_dmem_uncharge,
};
#endif /* CONFIG_CGROUP_DMEM */

/* ---- fixture ------------------------------------------------------------ */

static bool dv_removed(void *arg)
{
	struct dv_case *c = arg;

	return cgk_cgroups_remove(c->cg, c->nr + 1);
}

/* Cleanup action: drop the mount, remove the hierarchy, restore the root. */
static void dv_teardown(void *arg)
{
	struct dv_case *c = arg;
	char ctrl[16];

	/* A kthread's last fput() is deferred: the mount stays until then. */
	flush_delayed_fput();
	if (c->mnt)
		kern_unmount(c->mnt);
	c->mnt = NULL;
	/* The workers have exited: their leaves empty as they are released. */
	if (!cgk_wait_for(dv_removed, c, DV_SETTLE_TIMEOUT_MS)) {
		KUNIT_FAIL(c->test, "test cgroups still busy %d ms after the workers exited",
			   DV_SETTLE_TIMEOUT_MS);
		return;
	}
	if (c->root_enabled) {
		snprintf(ctrl, sizeof(ctrl), "-%s", c->kind->ctrl);
		if (cgroup_subtree_control_write_for_test(&cgrp_dfl_root.cgrp, ctrl))
			KUNIT_FAIL(c->test, "could not disable %s in the root again",
				   c->kind->ctrl);
	}
	c->root_enabled = false;
}

static struct cgroup *dv_create(struct kunit *test, struct cgroup *parent, const char *name)
{
	struct cgroup *cgrp = cgroup_create_for_test(parent, name);

	if (IS_ERR(cgrp))
		KUNIT_FAIL_AND_ABORT(test, "creating %s: %ld", name, PTR_ERR(cgrp));
	return cgrp;
}

static struct dv_case *dv_setup(struct kunit *test, const struct dv_kind *k,
				unsigned int nr)
{
	struct cgroup *root = NULL;
	char path[96], text[96], ctrl[16], name[16];
	struct vfsmount *mnt;
	struct file *max;
	struct dv_case *c;
	unsigned int i;
	int ret;

	c = kunit_kzalloc(test, sizeof(*c), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, c);
	c->cg = kunit_kcalloc(test, nr + 1, sizeof(*c->cg), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, c->cg);
	c->workers = kunit_kcalloc(test, nr, sizeof(*c->workers), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, c->workers);
	c->test = test;
	c->kind = k;
	c->nr = nr;
	/* Unique names: a failed case may leave its cgroups behind. */
	snprintf(c->key, sizeof(c->key), "cgk_%s%d", k->ctrl, test->param_index);
	snprintf(c->top_name, sizeof(c->top_name), "cgk-devres-%s-%d", k->ctrl,
		 test->param_index);
	cgk_baseline_take(&c->base);

	/* Unregistered after the teardown, once nothing is charged to it. */
	ret = k->register_dev(c);
	KUNIT_ASSERT_EQ_MSG(test, ret, 0, "registering %s", c->key);
	KUNIT_ASSERT_EQ(test, 0, kunit_add_action_or_reset(test, k->unregister_dev, c));
	KUNIT_ASSERT_EQ(test, 0, kunit_add_action_or_reset(test, dv_teardown, c));

	if (!(READ_ONCE(cgrp_dfl_root.cgrp.subtree_control) & BIT(k->ssid))) {
		snprintf(ctrl, sizeof(ctrl), "+%s", k->ctrl);
		ret = cgroup_subtree_control_write_for_test(&cgrp_dfl_root.cgrp, ctrl);
		if (ret == -EINVAL || ret == -ENOENT)
			kunit_skip(test, "the %s controller is not on the default hierarchy (%d)",
				   k->ctrl, ret);
		KUNIT_ASSERT_EQ_MSG(test, ret, 0, "enabling %s in the root", k->ctrl);
		c->root_enabled = true;
	}
	c->cg[0] = dv_create(test, &cgrp_dfl_root.cgrp, c->top_name);
	snprintf(ctrl, sizeof(ctrl), "+%s", k->ctrl);
	KUNIT_ASSERT_EQ_MSG(test, 0, cgroup_subtree_control_write_for_test(c->cg[0], ctrl),
			    "enabling %s in %s", k->ctrl, c->top_name);
	for (i = 0; i < nr; i++) {
		snprintf(name, sizeof(name), "l%u", i);
		c->cg[1 + i] = dv_create(test, c->cg[0], name);
		c->workers[i].leaf = c->cg[1 + i];
	}

	mnt = cgroup_mount_for_test(NULL, NULL, &root);
	KUNIT_ASSERT_NOT_ERR_OR_NULL_MSG(test, mnt, "mounting the default hierarchy");
	c->mnt = mnt;
	KUNIT_ASSERT_PTR_EQ(test, root, &cgrp_dfl_root.cgrp);

	snprintf(path, sizeof(path), "%s/%s.max", c->top_name, k->ctrl);
	k->max_text(c, text, sizeof(text));
	max = cgk_file_open_for_test(test, c->mnt, path);
	ret = cgk_file_write(max, text);
	fput(max);
	KUNIT_ASSERT_EQ_MSG(test, ret, 0, "writing \"%s\" to %s", strim(text), path);
	return c;
}

/* ---- checks ------------------------------------------------------------- */

/* Once the workers gave everything back. */
static void dv_check_end(struct dv_case *c)
{
	const struct dv_kind *k = c->kind;
	struct kunit *test = c->test;
	long long vals[DV_NR_RES], peak[DV_NR_RES];
	long refused = 0;
	bool peak_read;
	unsigned int i, r;
	char name[16];

	for (r = 0; r < k->nr_res; r++) {
		KUNIT_EXPECT_EQ_MSG(test, atomic_long_read(&c->shadow[r]), 0L,
				    "%s still held once the workers gave everything back",
				    k->res_name[r]);
		refused += atomic_long_read(&c->refused[r]);
	}
	for (i = 0; i <= c->nr; i++) {
		dv_cg_name(i, name, sizeof(name));
		if (dv_read(c, i, "current", vals)) {
			KUNIT_FAIL(test, "%s: reading %s.current failed", name, k->ctrl);
			continue;
		}
		for (r = 0; r < k->nr_res; r++) {
			if (!vals[r])
				continue;
			KUNIT_FAIL(test, "%s: %s.current %s=%lld after everything was given back",
				   name, k->ctrl, k->res_name[r], vals[r]);
		}
	}

	/* The high-water mark takes admitted charges only. */
	peak_read = !dv_read(c, 0, "peak", peak);
	if (!peak_read)
		KUNIT_FAIL(test, "parent: reading %s.peak failed", k->ctrl);
	for (r = 0; peak_read && r < k->nr_res; r++)
		KUNIT_EXPECT_LE_MSG(test, peak[r], (long long)k->limit[r],
				    "parent: %s.peak %s=%lld over its %s.max %ld",
				    k->ctrl, k->res_name[r], peak[r], k->ctrl, k->limit[r]);
	if (k->check)
		k->check(c, peak_read ? peak : NULL);

	for (r = 0; r < k->nr_res; r++)
		kunit_info(test, "%s: %ld refused, at most %ld admitted at once (limit %ld), peak %lld\n",
			   k->res_name[r], atomic_long_read(&c->refused[r]),
			   atomic_long_read(&c->seen_max[r]), k->limit[r],
			   peak_read ? peak[r] : -1LL);
	kunit_info(test, "%ld charges admitted, %ld given back, %ld leaf reads\n",
		   atomic_long_read(&c->admitted), atomic_long_read(&c->uncharged),
		   atomic_long_read(&c->leaf_reads));
	CGK_EXPECT_EXERCISED(test, atomic_long_read(&c->admitted), "no charge was admitted");
	CGK_EXPECT_EXERCISED(test, refused, "no charge was refused");
	CGK_EXPECT_EXERCISED(test, atomic_long_read(&c->leaf_reads),
			     "no worker read its leaf");
}

/* ---- the cases ---------------------------------------------------------- */

static void __maybe_unused dv_run(struct kunit *test, const struct dv_kind *k)
{
	unsigned int nr = cgk_param_threads(test);
	struct cgk_gang *gang;
	struct dv_case *c;

	c = dv_setup(test, k, nr);
	gang = cgk_gang_create(test, nr, &dv_gang_ops, c);
	KUNIT_ASSERT_NOT_NULL(test, gang);
	/* Stops the workers, each giving back what it holds (dv_fini()). */
	cgk_gang_run(gang);
	cgk_gang_report(gang);
	dv_check_end(c);

	kunit_release_action(test, dv_teardown, c);
	kunit_release_action(test, k->unregister_dev, c);
	cgk_expect_baseline(test, &c->base, DV_SETTLE_TIMEOUT_MS);
}

/* A fake RDMA device's handles and objects charged under a parent's limit. */
static void rdma_charge_exact(struct kunit *test)
{
#if IS_ENABLED(CONFIG_CGROUP_RDMA)
	dv_run(test, &dv_rdma);
#else
	kunit_skip(test, "needs CONFIG_CGROUP_RDMA");
#endif
}

/* A device memory region charged under a parent's limit. */
static void dmem_charge_exact(struct kunit *test)
{
#if IS_ENABLED(CONFIG_CGROUP_DMEM)
	dv_run(test, &dv_dmem);
#else
	kunit_skip(test, "needs CONFIG_CGROUP_DMEM");
#endif
}

static struct kunit_case cgroup_devres_cases[] = {
	CGK_CASE(rdma_charge_exact),
	CGK_CASE(dmem_charge_exact),
	{}
};

static struct kunit_suite cgroup_devres_suite = {
	.name = "cgroup_devres",
	.suite_init = cgk_suite_init,
	.suite_exit = cgk_suite_exit,
	.init = cgk_case_init,
	.exit = cgk_case_exit,
	.test_cases = cgroup_devres_cases,
};

kunit_test_suite(cgroup_devres_suite);
