// SPDX-License-Identifier: GPL-2.0-only
/*
 * Interface files of test hierarchies for the cgroup_kunit suites, opened
 * through a mount that cgroup_mount_for_test() made and written or read as
 * a shell would. See harness.h.
 */

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/cgroup_kunit.h>
#include <linux/cred.h>
#include <linux/file.h>
#include <linux/fs.h>
#include <linux/mount.h>
#include <linux/namei.h>
#include <linux/pid.h>
#include <linux/sched.h>

#include "harness.h"

/**
 * cgk_file_open - open a cgroup file through a mount
 * @mnt: a mount of the hierarchy
 * @path: the file's path from the root of @mnt
 * @flags: O_RDONLY or O_WRONLY
 *
 * A kthread's last fput() is deferred: call flush_delayed_fput() after
 * closing, before kern_unmount() of @mnt.
 *
 * Return: the open file, or an ERR_PTR().
 */
struct file *cgk_file_open(struct vfsmount *mnt, const char *path, int flags)
{
	struct file *file;
	struct path p;
	int ret;

	ret = vfs_path_lookup(mnt->mnt_root, mnt, path, 0, &p);
	if (ret)
		return ERR_PTR(ret);
	file = dentry_open(&p, flags, current_cred());
	path_put(&p);
	return file;
}

/**
 * cgk_file_open_for_test - open a cgroup file for writing, or fail the case
 * @test: the case, asserted on: call from its own thread only
 * @mnt: a mount of the hierarchy
 * @path: the file's path from the root of @mnt
 *
 * Return: the open file.
 */
struct file *cgk_file_open_for_test(struct kunit *test, struct vfsmount *mnt,
				    const char *path)
{
	struct file *file = cgk_file_open(mnt, path, O_WRONLY);

	KUNIT_ASSERT_NOT_ERR_OR_NULL_MSG(test, file, "opening %s", path);
	return file;
}

/**
 * cgk_file_write - write a string to a cgroup file, as echo would
 * @file: opened with O_WRONLY
 * @text: what to write, usually ending in a newline
 *
 * Return: 0 if all of @text was taken, else a negative errno.
 */
int cgk_file_write(struct file *file, const char *text)
{
	size_t len = strlen(text);
	loff_t pos = 0;
	ssize_t ret;

	ret = kernel_write(file, text, len, &pos);
	if (ret < 0)
		return ret;
	return ret == len ? 0 : -EIO;
}

/**
 * cgk_file_write_pid - write a task's pid to cgroup.procs, tasks or threads
 * @file: opened with O_WRONLY
 * @task: the task
 * @tgid: write its thread group's id (cgroup.procs) rather than its own
 *
 * Return: as cgk_file_write().
 */
int cgk_file_write_pid(struct file *file, struct task_struct *task, bool tgid)
{
	char buf[16];

	snprintf(buf, sizeof(buf), "%d\n", tgid ? task_tgid_vnr(task) : task_pid_vnr(task));
	return cgk_file_write(file, buf);
}

/**
 * cgk_file_read - read a cgroup file through a mount, as cat would
 * @mnt: a mount of the hierarchy
 * @path: the file's path from the root of @mnt
 * @buf: where to store what was read, NUL-terminated
 * @size: size of @buf
 *
 * Return: the number of bytes read, or a negative errno.
 */
ssize_t cgk_file_read(struct vfsmount *mnt, const char *path, char *buf, size_t size)
{
	struct file *file = cgk_file_open(mnt, path, O_RDONLY);
	loff_t pos = 0;
	ssize_t ret;

	if (IS_ERR(file))
		return PTR_ERR(file);
	ret = kernel_read(file, buf, size - 1, &pos);
	fput(file);
	buf[ret < 0 ? 0 : ret] = '\0';
	return ret;
}
