/* SPDX-License-Identifier: MIT */
/*
 * test-escape probe FS-03 (special files and mounts): dangerous device
 * nodes, mknod, hard links out of the workspace, mounting and remounting
 * (the old and the new mount API), chroot, open_by_handle_at, set-id bits
 * and file capabilities, writes to /sys.  Runs inside the sandbox, in the
 * probe's own forked child of `agentbox __probe` (runner.c), as the
 * sandboxed user.
 *
 * The rules of the file probes (probe_fs.c) hold; here in particular:
 * devices are opened, never read or ioctl'd; privilege probes use a
 * target where a privileged caller gets EINVAL instead of a change; a
 * read-only mount is only remounted where it is read-only, and restored if
 * that works; whatever is created (a node, a link, a set-id file, a mount)
 * is removed again at once; chroot runs in a grandchild.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "probe_fsutil.h"

#ifndef __NR_open_tree
#define __NR_open_tree 428
#endif
#ifndef __NR_move_mount
#define __NR_move_mount 429
#endif
#ifndef __NR_fsopen
#define __NR_fsopen 430
#endif
#ifndef __NR_fspick
#define __NR_fspick 433
#endif
#ifndef __NR_mount_setattr
#define __NR_mount_setattr 442
#endif
#ifndef OPEN_TREE_CLONE
#define OPEN_TREE_CLONE 1
#endif
#ifndef MOVE_MOUNT_F_EMPTY_PATH
#define MOVE_MOUNT_F_EMPTY_PATH 0x4
#endif
#ifndef FSOPEN_CLOEXEC
#define FSOPEN_CLOEXEC 0x1
#endif
#ifndef FSPICK_CLOEXEC
#define FSPICK_CLOEXEC 0x1
#endif
#ifndef MOUNT_ATTR_RDONLY
#define MOUNT_ATTR_RDONLY 0x1
#endif

struct ab_mount_attr {
	unsigned long long attr_set, attr_clr, propagation, userns_fd;
};

/* ------------------------------------------------------------------ FS-03 */

static void fs03_devices(ab_probe_run *r)
{
	/* open only, never read or ioctl; no watchdog, snapshot or vhost */
	static const char *const devs[] = {
		"/dev/mem",          "/dev/kmem",       "/dev/port",         "/dev/sda",
		"/dev/sda1",         "/dev/vda",        "/dev/vda1",         "/dev/xvda",
		"/dev/nvme0",        "/dev/nvme0n1",    "/dev/nvme0n1p1",    "/dev/dm-0",
		"/dev/md0",          "/dev/loop0",      "/dev/loop-control", "/dev/mapper/control",
		"/dev/kvm",          "/dev/fuse",       "/dev/net/tun",      "/dev/console",
		"/dev/tty0",         "/dev/tty1",       "/dev/kmsg",         "/dev/cpu/0/msr",
		"/dev/input/event0", "/dev/input/mice", "/dev/uinput",       "/dev/dri/card0",
		"/dev/sg0",          "/dev/hidraw0"};
	char what[128];
	for (size_t i = 0; i < AB_ARRAY_SIZE(devs); i++) {
		fsp_pf(what, sizeof(what), "open %s O_RDONLY", devs[i]);
		int fd = open(devs[i], RD_FLAGS);
		int e = errno;
		if (fd >= 0)
			close(fd);
		ab_pr_sys(r, what, fd, e);
	}
	/* any other device node in /dev (names only) */
	static const char *const std_devs[] = {"null",    "zero", "full", "random",
					       "urandom", "tty",  "ptmx", "console"};
	json_t *odd = json_array();
	DIR *dir = opendir("/dev");
	struct dirent *e;
	while (dir && (e = readdir(dir))) {
		struct stat st;
		bool known = false;
		for (size_t i = 0; i < AB_ARRAY_SIZE(std_devs); i++)
			known |= !strcmp(e->d_name, std_devs[i]);
		if (!known && fstatat(dirfd(dir), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
		    (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)))
			fsp_mark(odd, e->d_name);
	}
	if (dir)
		closedir(dir);
	fsp_report_arr(r, "dev_nodes_other", odd);
}

static void fs03_mknod(ab_probe_run *r)
{
	const char *ws = ab_pr_lab(r)->workspace;
	const char *dirs[] = {ws, "/tmp", "/dev/shm", "/dev"};
	char p[PMAX], what[PMAX + 64];
	for (size_t i = 0; i < AB_ARRAY_SIZE(dirs); i++) {
		if (!fsp_mkname(p, sizeof(p), r, dirs[i], "fs03-null"))
			continue;
		fsp_pf(what, sizeof(what), "mknod %s c 1 3", p);
		if (mknod(p, S_IFCHR | 0600, makedev(1, 3)) < 0) {
			ab_pr_sys(r, what, -1, errno);
			continue;
		}
		int fd = open(p, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
		int e = errno;
		ab_pr_escaped(r, what, "device node created (open: %s; removed again)",
			      fd >= 0 ? "works" : fsp_ename(e));
		if (fd >= 0)
			close(fd);
		unlink(p);
	}
	if (fsp_mkname(p, sizeof(p), r, ws, "fs03-blk")) {
		fsp_pf(what, sizeof(what), "mknod %s b 8 0", p);
		long k = mknod(p, S_IFBLK | 0600, makedev(8, 0));
		ab_pr_sys(r, what, k, errno);
		if (k == 0)
			unlink(p);
	}
}

/* Hard links from the workspace to files outside it and to protected files
 * (a second name would stay writable). */
static void fs03_links(ab_probe_run *r)
{
	const ab_lab_info *lab = ab_pr_lab(r);
	char src[8][PMAX], dst[PMAX], what[2 * PMAX];
	size_t n = 0;
	n += fsp_pf(src[n], PMAX, "/etc/passwd");
	n += fsp_pf(src[n], PMAX, "/etc/hostname");
	n += fsp_pf(src[n], PMAX, "%s/.bashrc", lab->home);
	n += fsp_pf(src[n], PMAX, "%s/.ssh/id_ed25519", lab->home);
	n += lab->sibling && fsp_pf(src[n], PMAX, "%s/.env", lab->sibling);
	n += fsp_pf(src[n], PMAX, "%s/.git/config", lab->workspace);
	n += fsp_pf(src[n], PMAX, "%s/.git/hooks/pre-commit.sample", lab->workspace);
	n += fsp_pf(src[n], PMAX, "%s/.git/info/attributes", lab->workspace);
	for (size_t i = 0; i < n; i++) {
		char tag[32];
		fsp_pf(tag, sizeof(tag), "fs03-hl%zu", i);
		if (!fsp_mkname(dst, sizeof(dst), r, lab->workspace, tag))
			continue;
		fsp_pf(what, sizeof(what), "hard link %s -> workspace", src[i]);
		long k = linkat(AT_FDCWD, src[i], AT_FDCWD, dst, 0);
		int e = errno;
		if (k == 0) {
			ab_pr_escaped(r, what, "second name created (removed again)");
			unlink(dst);
		} else {
			ab_pr_sys(r, what, -1, e);
		}
	}
}

/* A read-only mount made writable again: remount without MS_RDONLY, then
 * mount_setattr clearing MOUNT_ATTR_RDONLY.  Only tried on a mount that is
 * read-only here; restored if it works. */
static void fs03_remount(ab_probe_run *r, const char *t)
{
	char what[PMAX + 64];
	struct statvfs sv;
	fsp_pf(what, sizeof(what), "remount %s read-write (MS_REMOUNT|MS_BIND)", t);
	if (statvfs(t, &sv) < 0) {
		ab_pr_sys(r, what, -1, errno);
		return;
	}
	if (!(sv.f_flag & ST_RDONLY)) {
		ab_pr_ok(r, what, "not read-only here: nothing to remount (skipped)");
		return;
	}
	unsigned long keep = sv.f_flag & (ST_NOSUID | ST_NODEV | ST_NOEXEC);
	if (mount(NULL, t, NULL, MS_REMOUNT | MS_BIND | keep, NULL) == 0) {
		ab_pr_escaped(r, what, "a read-only mount became writable (restored)");
		mount(NULL, t, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | keep, NULL);
	} else {
		ab_pr_sys(r, what, -1, errno);
	}
	struct ab_mount_attr a = {.attr_clr = MOUNT_ATTR_RDONLY};
	fsp_pf(what, sizeof(what), "mount_setattr %s clear MOUNT_ATTR_RDONLY", t);
	if (syscall(__NR_mount_setattr, AT_FDCWD, t, 0, &a, sizeof(a)) == 0) {
		ab_pr_escaped(r, what, "a read-only mount became writable (restored)");
		a = (struct ab_mount_attr){.attr_set = MOUNT_ATTR_RDONLY};
		syscall(__NR_mount_setattr, AT_FDCWD, t, 0, &a, sizeof(a));
	} else {
		ab_pr_sys(r, what, -1, errno);
	}
}

/* Run fn in a grandchild (its root or namespace changes die with it). */
static void in_child(ab_probe_run *r, const char *what, int (*fn)(const char *), const char *arg)
{
	pid_t pid = fork();
	if (pid == 0)
		_exit(fn(arg) == 0 ? 0 : (errno & 0x7f) + 1);
	int st = 0;
	while (pid > 0 && waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (pid < 0 || !WIFEXITED(st))
		ab_pr_error(r, what, "could not run it in a child");
	else if (WEXITSTATUS(st) == 0)
		ab_pr_escaped(r, what, "succeeded");
	else
		ab_pr_sys(r, what, -1, WEXITSTATUS(st) - 1);
}

static int do_chroot(const char *d)
{
	return chroot(d);
}

/* The privilege behind mounting: a privileged caller gets EINVAL (the
 * target is no mount point), an unprivileged one EPERM. */
static void fs03_mounts(ab_probe_run *r, const char *d, const char *pd)
{
	static const int einval[] = {EINVAL, 0};
	const char *ws = ab_pr_lab(r)->workspace;
	FSP_REACH(r, "mount(MS_REMOUNT|MS_BIND) of a plain directory",
		  mount(NULL, d, NULL, MS_REMOUNT | MS_BIND, NULL), einval,
		  "CAP_SYS_ADMIN over the mount namespace");
	FSP_REACH(r, "umount2 of a plain directory", umount2(d, 0), einval,
		  "CAP_SYS_ADMIN over the mount namespace");
	FSP_REACH(r, "pivot_root(dir, dir) of a plain directory", syscall(SYS_pivot_root, pd, pd),
		  einval, "CAP_SYS_ADMIN over the mount namespace");
	long k = mount("abprobe", d, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=16k");
	ab_pr_sys(r, "mount a tmpfs in the workspace", k, errno);
	if (k == 0)
		umount2(d, MNT_DETACH);
	k = mount("/", d, NULL, MS_BIND, NULL);
	ab_pr_sys(r, "bind-mount / into the workspace", k, errno);
	if (k == 0)
		umount2(d, MNT_DETACH);
	in_child(r, "chroot into the workspace", do_chroot, d);
	char p[PMAX];
	fs03_remount(r, "/");
	fs03_remount(r, "/usr");
	fs03_remount(r, "/etc");
	if (fsp_pf(p, sizeof(p), "%s/.git/hooks", ws))
		fs03_remount(r, p);
	if (fsp_pf(p, sizeof(p), "%s/.git/config", ws))
		fs03_remount(r, p);
}

/* The new mount API: open_tree (clone) + move_mount, fsopen, fspick. */
static void fs03_newmount(ab_probe_run *r, const char *d)
{
	long fd = syscall(__NR_open_tree, AT_FDCWD, "/", OPEN_TREE_CLONE | O_CLOEXEC);
	ab_pr_sys(r, "open_tree(/, OPEN_TREE_CLONE)", fd, errno);
	if (fd >= 0) {
		long k =
			syscall(__NR_move_mount, (int)fd, "", AT_FDCWD, d, MOVE_MOUNT_F_EMPTY_PATH);
		ab_pr_sys(r, "move_mount the clone of / into the workspace", k, errno);
		if (k == 0)
			umount2(d, MNT_DETACH);
		close((int)fd);
	}
	fd = syscall(__NR_fsopen, "tmpfs", FSOPEN_CLOEXEC);
	ab_pr_sys(r, "fsopen(tmpfs)", fd, errno);
	if (fd >= 0)
		close((int)fd);
	fd = syscall(__NR_fspick, AT_FDCWD, "/", FSPICK_CLOEXEC);
	ab_pr_sys(r, "fspick(/)", fd, errno);
	if (fd >= 0)
		close((int)fd);
}

/* The "shocker" attack: open_by_handle_at with a real handle and with a
 * forged one for inode 2 (the root of an ext4 file system). */
static void fs03_handles(ab_probe_run *r)
{
	const char *ws = ab_pr_lab(r)->workspace;
	struct {
		struct file_handle fh;
		unsigned char bytes[MAX_HANDLE_SZ];
	} h = {.fh.handle_bytes = MAX_HANDLE_SZ},
	  forged = {.fh.handle_bytes = 8, .fh.handle_type = 1};
	int mid = 0;
	_cleanup_close_ int mfd = open(ws, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (mfd < 0) {
		ab_pr_error(r, "open the workspace", "%s", fsp_ename(errno));
		return;
	}
	if (name_to_handle_at(AT_FDCWD, ws, &h.fh, &mid, 0) < 0) {
		ab_pr_ok(r, "name_to_handle_at(workspace)", "%s (no handle to replay)",
			 fsp_ename(errno));
	} else {
		int fd = open_by_handle_at(mfd, &h.fh, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		int e = errno;
		ab_pr_sys(r, "open_by_handle_at(workspace's own handle)", fd, e);
		if (fd >= 0)
			close(fd);
	}
	uint32_t ino_gen[2] = {2, 0};
	memcpy(forged.fh.f_handle, ino_gen, sizeof(ino_gen));
	int fd = open_by_handle_at(mfd, &forged.fh, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int e = errno;
	ab_pr_sys(r, "open_by_handle_at(forged handle: inode 2 of the workspace's fs)", fd, e);
	if (fd >= 0) {
		fsp_check_dir_fd(r, "the forged handle's directory", fd);
		close(fd);
	}
}

/* A set-id attempt on PATH: failed (blocked), worked but the kernel dropped
 * the bit (blocked, by the kernel), or kept the bit.  A kept bit is an escape
 * where the file's host owner is not the sandbox's own host uid: on an
 * idmapped mount (a root caller's root-owned grant, whose new files belong to
 * host root) or with an owner or group not its own.  On its own file (every
 * file of an unprivileged run) a set-id bit gives nothing: the plan then
 * leaves seccomp's set-id rules out (`explain`: "set-id mode bits"). */
static void setid_result(ab_probe_run *r, const char *what, long k, int e, const char *path,
			 mode_t bit)
{
	struct stat st;
	if (k < 0) {
		ab_pr_sys(r, what, -1, e);
		return;
	}
	if (lstat(path, &st) != 0) {
		ab_pr_error(r, what, "the call worked, but lstat: %s", fsp_ename(errno));
		return;
	}
	if (!(st.st_mode & bit)) {
		ab_pr_ok(r, what, "the call worked but the kernel dropped the bit");
		return;
	}
	int idm = fsp_path_idmapped(path);
	if (idm < 0)
		ab_pr_error(r, what,
			    "the set-id bit is set (removed again), on a mount the probe "
			    "cannot find in /proc/self/mountinfo");
	else if (idm)
		ab_pr_escaped(r, what,
			      "the set-id bit is set on an idmapped mount: the file "
			      "belongs to someone else on the host (removed again)");
	else if (st.st_uid != getuid() || ((bit & S_ISGID) && st.st_gid != getgid()))
		ab_pr_escaped(r, what,
			      "the set-id bit is set on a file owned by uid %u gid %u, not "
			      "the sandbox's own (removed again)",
			      (unsigned)st.st_uid, (unsigned)st.st_gid);
	else
		ab_pr_ok(r, what,
			 "the bit is set, on the sandbox's own file (its host owner is "
			 "the sandbox's own uid: nothing gained; removed again)");
}

/* Set-id bits and file capabilities on files that land on the host. */
static void fs03_setid(ab_probe_run *r)
{
	const char *ws = ab_pr_lab(r)->workspace;
	char f[PMAX], g[PMAX], dd[PMAX];
	if (!fsp_mkname(f, sizeof(f), r, ws, "fs03-suid") ||
	    !fsp_mkname(g, sizeof(g), r, ws, "fs03-plain") ||
	    !fsp_mkname(dd, sizeof(dd), r, ws, "fs03-sgid.d"))
		return;
	int fd = open(f, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 04755);
	int e = errno;
	setid_result(r, "create a set-user-ID file", fd, e, f, S_ISUID);
	if (fd >= 0) {
		close(fd);
		unlink(f);
	}
	fd = open(g, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0755);
	if (fd < 0) {
		ab_pr_error(r, "create a plain file in the workspace", "%s", fsp_ename(errno));
		return;
	}
	long k = fchmod(fd, 04755);
	e = errno;
	setid_result(r, "fchmod 4755", k, e, g, S_ISUID);
	k = fchmodat(AT_FDCWD, g, 02755, 0);
	e = errno;
	setid_result(r, "chmod 2755", k, e, g, S_ISGID);
	/* v2 file capability: effective, permitted CAP_NET_RAW */
	uint32_t cap[5] = {0x02000000u | 1u, 1u << 13, 0, 0, 0};
	k = fsetxattr(fd, "security.capability", cap, sizeof(cap), 0);
	ab_pr_sys(r, "setxattr security.capability (file capabilities)", k, errno);
	close(fd);
	unlink(g);
	k = mkdir(dd, 02755);
	e = errno;
	setid_result(r, "mkdir with the set-group-ID bit", k, e, dd, S_ISGID);
	if (k == 0)
		rmdir(dd);
}

static void fs03_sys(ab_probe_run *r)
{
	static const char *const files[] = {"/sys/kernel/mm/transparent_hugepage/enabled",
					    "/sys/kernel/uevent_helper", "/sys/kernel/profiling",
					    "/sys/class/net/lo/mtu"};
	char what[128];
	for (size_t i = 0; i < AB_ARRAY_SIZE(files); i++) {
		fsp_pf(what, sizeof(what), "append-open %s (zero bytes)", files[i]);
		fsp_append_open(r, what, files[i], false);
	}
}

/*
 * FS-03 special-files-and-mounts.  Sub-attempts: open /dev/mem, /dev/kmem,
 * /dev/port, disks and other dangerous devices read-only (open only) and
 * list odd device nodes; mknod a char device (1,3) in the workspace, /tmp,
 * /dev/shm, /dev and a block device; hard links from the workspace to
 * /etc/passwd, the home, the sibling and protected .git files;
 * remount/umount2/pivot_root of a plain directory (EINVAL = privileged), a
 * tmpfs and a bind of / into the workspace, chroot (in a child); remount
 * read-only mounts read-write (/, /usr, /etc, .git/hooks, .git/config) and
 * mount_setattr; open_tree+move_mount, fsopen, fspick; open_by_handle_at
 * with a real and a forged handle (shocker); set-id bits and file
 * capabilities; zero-byte writes to /sys.
 */
void ab_probe_fs03(ab_probe_run *r)
{
	char d[PMAX], pd[PMAX];
	const char *ws = ab_pr_lab(r)->workspace;
	if (!fsp_mkname(d, sizeof(d), r, ws, "fs03.d") ||
	    !fsp_mkname(pd, sizeof(pd), r, ws, "fs03.p")) {
		ab_pr_error(r, "workspace paths", "path too long");
		return;
	}
	if (mkdir(d, 0700) < 0 || mkdir(pd, 0700) < 0) {
		ab_pr_error(r, "mkdir scratch directories in the workspace", "%s",
			    fsp_ename(errno));
		rmdir(d);
		return;
	}
	fs03_devices(r);
	fs03_mknod(r);
	fs03_links(r);
	fs03_mounts(r, d, pd);
	fs03_newmount(r, d);
	fs03_handles(r);
	fs03_setid(r);
	fs03_sys(r);
	if (rmdir(d) < 0)
		ab_pr_error(r, "remove the scratch directory", "%s (still mounted?)",
			    fsp_ename(errno));
	rmdir(pd);
}
