// SPDX-License-Identifier: GPL-2.0-only
/*
 * cgroup_reach: what the suites before it made lockdep see.
 *
 * A lockdep splat needs both usages of a lock in the same boot: a lock
 * taken from softirq and, elsewhere, with softirqs enabled. Lines covered
 * say nothing about that. This suite runs last (reach_kunit.o is linked
 * last) and prints, for every lock class defined in the C files of
 * kernel/cgroup/ and in kernel/ucount.c or taken there (reach_classes[]),
 * the usage lockdep recorded for it so far in this boot, as /proc/lockdep
 * shows it:
 *
 *	# lockdep_usage: reach: lockdep debug_locks=1 classes=1873 targets=26
 *	# lockdep_usage: reach: class usage={-.-.} fd=34 bd=52 name=css_set_lock
 *	# lockdep_usage: reach: class usage=none name=cpuset_mutex
 *	# lockdep_usage: reach: end matched=21
 *
 * usage holds one character per lockdep state and direction, in lockdep's
 * order (HARDIRQ-W, HARDIRQ-R, SOFTIRQ-W, SOFTIRQ-R): '.' never taken in
 * that irq context nor with that irq enabled, '-' taken in it, '+' taken
 * with it enabled, '?' both. usage=none: the class was never registered
 * (the lock was never taken, or its code is not built). debug_locks=0:
 * lockdep turned itself off after a report; the usage is what it had
 * recorded until then. A tool reading the console can set these lines
 * beside the contexts the kernel's own code takes each lock in.
 *
 * A UML KUnit boot has no userspace: the case mounts procfs itself, as a
 * sysctl= boot argument does, and reads /proc/lockdep with kernel_read().
 * Classes are matched by name; a name's "#N" (another key of the same
 * name) and "/N" (subclass) variants are printed each on its own line.
 * Seqcounts are left out: seqcount_LOCKNAME_init() names every one of them
 * "&____s->seqcount", with a "#N" that depends on the boot.
 *
 * Checks nothing but that /proc/lockdep can be read and parsed; skipped
 * without CONFIG_PROVE_LOCKING (no usage bits) or without /proc/lockdep.
 *
 * cgroup_migrate_dynmods_reach prints the same lines in the boot of its
 * own that cgroup_migrate_dynmods runs in (favordynmods on, which only
 * that boot has: the per-threadgroup attach rwsem is taken nowhere else);
 * its name puts it in that boot's filter, cgroup_migrate_dynmods*, and it
 * skips itself wherever favordynmods is off. A tool reading the console
 * takes the union of the two boots' lines.
 */

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/bitmap.h>
#include <linux/cgroup.h>
#include <linux/debug_locks.h>
#include <linux/file.h>
#include <linux/fs.h>
#include <linux/kallsyms.h>
#include <linux/module.h>
#include <linux/mount.h>
#include <linux/sched.h>
#include <linux/string.h>

#include "harness.h"

/*
 * The classes reported, by the name lockdep gives them: the locks that
 * kernel/cgroup/ and kernel/ucount.c define or take. A tool reading the
 * console that keeps its own list of the contexts each lock is taken in
 * should have one entry for each of these names.
 */
static const char * const reach_classes[] = {
	/* kernel/cgroup/cgroup.c */
	"cgroup_mutex",
	"css_set_lock",
	"cgroup_idr_lock",
	"trace_cgroup_path_lock",
	"cgroup_threadgroup_rwsem",
	"&cgrp->pidlist_mutex",
	"&cfile->lock",
	"(wq_completion)cgroup_offline",
	"(wq_completion)cgroup_release",
	"(wq_completion)cgroup_free",
	/* kernel/cgroup/cgroup-v1.c */
	"release_agent_path_lock",
	"(wq_completion)cgroup_pidlist_destroy",
	/* kernel/cgroup/rstat.c: rstat_base_lock is initialized again there */
	"ss_rstat_lock(ss)",
	"rstat_base_lock",
	/* kernel/cgroup/cpuset.c, cpuset-v1.c */
	"cpuset_top_mutex",
	"cpuset_mutex",
	"callback_lock",
	"&fmp->lock",
	/* kernel/cgroup/legacy_freezer.c, rdma.c, dmem.c */
	"freezer_mutex",
	"rdmacg_mutex",
	"dmemcg_lock",
	/* kernel/ucount.c */
	"ucounts_lock",
	"&esc->lock",
	/* defined elsewhere, taken in kernel/cgroup/ */
	"&sig->cgroup_threadgroup_rwsem",
	"cpu_hotplug_lock",
	"&sighand->siglock",
};

#define REACH_NR	ARRAY_SIZE(reach_classes)
#define REACH_CHUNK	4096
/* Longer lines are cut: a class name is at most KSYM_NAME_LEN long. */
#define REACH_LINE	(KSYM_NAME_LEN + 128)

struct reach_scan {
	struct kunit *test;
	struct vfsmount *mnt;
	struct file *file;
	char chunk[REACH_CHUNK];
	char line[REACH_LINE];
	size_t len;
	unsigned int classes;
	unsigned int printed;
	DECLARE_BITMAP(seen, REACH_NR);
};

/* The index of the class whose name (less "#N" or "/N") is @name, or -1. */
static int reach_match(const char *name)
{
	int i;

	for (i = 0; i < REACH_NR; i++) {
		size_t n = strlen(reach_classes[i]);

		if (!strncmp(name, reach_classes[i], n) &&
		    (!name[n] || name[n] == '#' || name[n] == '/'))
			return i;
	}
	return -1;
}

/*
 * One line of /proc/lockdep (lockdep_proc.c, l_show()):
 * "<key> [OPS:<n> ]FD:<n> BD:<n> <usage>: <name>" for a class, then its
 * forward dependencies, indented, and a blank line.
 */
static void reach_line(struct reach_scan *s, char *line)
{
	char *fd_at, *usage, *end;
	long fd, bd;
	int n = 0, i;

	if (!line[0] || line[0] == ' ')
		return;
	fd_at = strstr(line, " FD:");
	if (!fd_at)
		return;		/* "all lock classes:" */
	s->classes++;
	if (sscanf(fd_at, " FD:%ld BD:%ld %n", &fd, &bd, &n) != 2 || !n)
		return;
	usage = fd_at + n;
	end = strstr(usage, ": ");
	if (!end)
		return;
	*end = '\0';
	i = reach_match(end + 2);
	if (i < 0)
		return;
	__set_bit(i, s->seen);
	s->printed++;
	kunit_info(s->test, "reach: class usage={%s} fd=%ld bd=%ld name=%s\n",
		   usage, fd, bd, end + 2);
}

static void reach_release(void *arg)
{
	struct reach_scan *s = arg;

	if (s->file)
		fput(s->file);
	flush_delayed_fput();
	if (s->mnt)
		kern_unmount(s->mnt);
}

/* Print what lockdep recorded for reach_classes[] so far in this boot. */
static void reach_report(struct kunit *test)
{
	struct file_system_type *proc;
	struct reach_scan *s;
	loff_t pos = 0;
	ssize_t got;
	int i;

	if (!IS_ENABLED(CONFIG_PROVE_LOCKING))
		kunit_skip(test, "needs CONFIG_PROVE_LOCKING: no usage bits without it");

	s = kunit_kzalloc(test, sizeof(*s), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, s);
	s->test = test;
	KUNIT_ASSERT_EQ(test, 0, kunit_add_action_or_reset(test, reach_release, s));

	/* As a sysctl= boot argument does: a mount no one else sees. */
	proc = get_fs_type("proc");
	if (!proc)
		kunit_skip(test, "needs CONFIG_PROC_FS for /proc/lockdep");
	s->mnt = kern_mount(proc);
	module_put(proc->owner);
	if (IS_ERR(s->mnt)) {
		long err = PTR_ERR(s->mnt);

		s->mnt = NULL;
		KUNIT_FAIL_AND_ABORT(test, "mounting proc: %ld", err);
	}
	s->file = file_open_root_mnt(s->mnt, "lockdep", O_RDONLY, 0);
	if (IS_ERR(s->file)) {
		long err = PTR_ERR(s->file);

		s->file = NULL;
		if (err == -ENOENT)
			kunit_skip(test, "no /proc/lockdep in this kernel");
		KUNIT_FAIL_AND_ABORT(test, "opening /proc/lockdep: %ld", err);
	}

	while ((got = kernel_read(s->file, s->chunk, sizeof(s->chunk), &pos)) > 0) {
		for (i = 0; i < got; i++) {
			char ch = s->chunk[i];

			if (ch == '\n') {
				s->line[min(s->len, sizeof(s->line) - 1)] = '\0';
				reach_line(s, s->line);
				s->len = 0;
				continue;
			}
			if (s->len < sizeof(s->line) - 1)
				s->line[s->len] = ch;
			s->len++;
		}
		cond_resched();
	}
	KUNIT_ASSERT_GE_MSG(test, got, 0, "reading /proc/lockdep: %zd", got);
	KUNIT_EXPECT_GT_MSG(test, s->classes, 0U, "no lock class in /proc/lockdep");

	kunit_info(test, "reach: lockdep debug_locks=%d classes=%u targets=%zu\n",
		   READ_ONCE(debug_locks), s->classes, REACH_NR);
	for (i = 0; i < REACH_NR; i++) {
		if (!test_bit(i, s->seen))
			kunit_info(test, "reach: class usage=none name=%s\n",
				   reach_classes[i]);
	}
	kunit_info(test, "reach: end matched=%u\n", s->printed);
	kunit_release_action(test, reach_release, s);
}

static void lockdep_usage(struct kunit *test)
{
	reach_report(test);
}

static struct kunit_case cgroup_reach_cases[] = {
	KUNIT_CASE(lockdep_usage),
	{}
};

static struct kunit_suite cgroup_reach_suite = {
	.name = "cgroup_reach",
	.suite_init = cgk_suite_init,
	.suite_exit = cgk_suite_exit,
	.init = cgk_case_init,
	.exit = cgk_case_exit,
	.test_cases = cgroup_reach_cases,
};

/* After cgroup_migrate_dynmods, in its boot: favordynmods is on there. */
static void lockdep_usage_dynmods(struct kunit *test)
{
	if (!READ_ONCE(cgroup_enable_per_threadgroup_rwsem))
		kunit_skip(test, "favordynmods is off: runs after cgroup_migrate_dynmods, in its boot");
	reach_report(test);
}

static struct kunit_case cgroup_migrate_dynmods_reach_cases[] = {
	KUNIT_CASE(lockdep_usage_dynmods),
	{}
};

static struct kunit_suite cgroup_migrate_dynmods_reach_suite = {
	.name = "cgroup_migrate_dynmods_reach",
	.suite_init = cgk_suite_init,
	.suite_exit = cgk_suite_exit,
	.init = cgk_case_init,
	.exit = cgk_case_exit,
	.test_cases = cgroup_migrate_dynmods_reach_cases,
};

kunit_test_suites(&cgroup_reach_suite, &cgroup_migrate_dynmods_reach_suite);
