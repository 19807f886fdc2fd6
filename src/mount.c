/* SPDX-License-Identifier: MIT */
/*
 * The new root (child, inside the new user+mount namespaces), plus the
 * parent-side preparation of idmapped trees for root callers.
 *
 * Order:
 *   1. make every mount private (nothing propagates back to the host);
 *   2. open every bind source O_PATH|O_NOFOLLOW while the host tree is
 *      visible, and check it is still what the planner saw (a swapped-in
 *      symlink or a file turned directory is refused);
 *   3. create protected-path placeholders (reported to the parent for cleanup);
 *   4. stage a tmpfs root and attach everything by fd (open_tree/move_mount),
 *      so no path is resolved twice;
 *   5. pivot_root into it, detach the old root, make "/" read-only.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agentbox/sandbox.h"

#ifndef OPEN_TREE_CLONE
#define OPEN_TREE_CLONE 1
#endif
#ifndef OPEN_TREE_CLOEXEC
#define OPEN_TREE_CLOEXEC O_CLOEXEC
#endif
#ifndef MOVE_MOUNT_F_EMPTY_PATH
#define MOVE_MOUNT_F_EMPTY_PATH 0x00000004
#endif
#ifndef MOUNT_ATTR_RDONLY
#define MOUNT_ATTR_RDONLY 0x00000001
#define MOUNT_ATTR_NOSUID 0x00000002
#define MOUNT_ATTR_NODEV 0x00000004
#define MOUNT_ATTR_NOEXEC 0x00000008
#endif
#ifndef MOUNT_ATTR_IDMAP
#define MOUNT_ATTR_IDMAP 0x00100000
#endif
#ifndef AT_RECURSIVE
#define AT_RECURSIVE 0x8000
#endif
#ifndef __NR_open_tree
#define __NR_open_tree 428
#define __NR_move_mount 429
#endif
#ifndef __NR_mount_setattr
#define __NR_mount_setattr 442
#endif

struct ab_mount_attr {
	unsigned long long attr_set, attr_clr, propagation, userns_fd;
};

#define STAGE "/tmp" /* covered by the staging tmpfs in our private mount ns */
#define EMPTY_FILE ".agentbox-empty" /* source of file masks, unlinked before pivot */
#define AB_MAX_MOUNTS 4096

static int sys_open_tree(int dfd, const char *path, unsigned flags)
{
	return (int)syscall(__NR_open_tree, dfd, path, flags);
}
static int sys_move_mount(int from_dfd, const char *from, int to_dfd, const char *to, unsigned fl)
{
	return (int)syscall(__NR_move_mount, from_dfd, from, to_dfd, to, fl);
}
static int sys_mount_setattr(int dfd, const char *path, unsigned flags, struct ab_mount_attr *a)
{
	return (int)syscall(__NR_mount_setattr, dfd, path, flags, a, sizeof(*a));
}

/* ------------------------------------------------------------ path helpers */

static int mkdir_p(char *path, mode_t mode)
{
	/* path is modified temporarily; it is absolute */
	for (char *s = path + 1;; s++) {
		if (*s != '/' && *s != '\0')
			continue;
		char c = *s;
		*s = '\0';
		int r = mkdir(path, mode);
		int e = errno;
		*s = c;
		if (r < 0 && e != EEXIST)
			return -e;
		if (c == '\0')
			return 0;
	}
}

static int staged(char *buf, size_t len, const char *dst)
{
	int n = snprintf(buf, len, "%s%s", STAGE, strcmp(dst, "/") == 0 ? "" : dst);
	return (n < 0 || (size_t)n >= len) ? -ENAMETOOLONG : 0;
}

/* Create the mount point for dst inside the stage: a directory, or an empty
 * file whose parents are directories. */
static int make_mountpoint(const char *spath, bool dir)
{
	char tmp[PATH_MAX];
	struct stat st;
	if (lstat(spath, &st) == 0)
		return 0; /* exists (possibly inside a read-only bind of the same tree) */
	if (strlen(spath) >= sizeof(tmp))
		return -ENAMETOOLONG;
	strcpy(tmp, spath);
	if (dir)
		return mkdir_p(tmp, 0755);
	char *slash = strrchr(tmp, '/');
	if (slash && slash != tmp) {
		*slash = '\0';
		int r = mkdir_p(tmp, 0755);
		if (r < 0)
			return r;
	}
	int fd = open(spath, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (fd < 0 && errno != EEXIST && errno != EISDIR)
		return -errno;
	if (fd >= 0)
		close(fd);
	return 0;
}

/* Attach a detached or fd-referenced tree at spath with the given attributes. */
static int attach_fd(int src_fd, bool clone_tree, const char *spath, unsigned long long attrs,
		     bool recursive)
{
	_cleanup_close_ int tree = -1;
	int fd = src_fd;
	if (clone_tree) {
		tree = sys_open_tree(src_fd, "",
				     OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH |
					     (recursive ? AT_RECURSIVE : 0));
		if (tree < 0)
			return -errno;
		fd = tree;
	}
	if (attrs) {
		struct ab_mount_attr a = {.attr_set = attrs};
		if (sys_mount_setattr(fd, "", AT_EMPTY_PATH | (recursive ? AT_RECURSIVE : 0), &a) < 0)
			return -errno;
	}
	if (sys_move_mount(fd, "", AT_FDCWD, spath, MOVE_MOUNT_F_EMPTY_PATH) < 0)
		return -errno;
	return 0;
}

static int setattr_path(const char *spath, unsigned long long attrs, bool recursive)
{
	struct ab_mount_attr a = {.attr_set = attrs};
	if (sys_mount_setattr(AT_FDCWD, spath, recursive ? AT_RECURSIVE : 0, &a) < 0)
		return -errno;
	return 0;
}

/* ------------------------------------------------------------ parent side */

/* A throwaway user namespace mapping on-disk root to the sandbox's host ids:
 * the idmapping of root-owned grants when root starts agentbox. */
static int idmap_userns(uid_t kuid, gid_t kgid, ab_err *err)
{
	int pipefd[2];
	if (pipe2(pipefd, O_CLOEXEC) < 0)
		return ab_fail(err, errno, "idmap: pipe");
	pid_t pid = fork();
	if (pid < 0) {
		close(pipefd[0]);
		close(pipefd[1]);
		return ab_fail(err, errno, "idmap: fork");
	}
	if (pid == 0) {
		char c;
		close(pipefd[1]);
		if (unshare(CLONE_NEWUSER) < 0)
			_exit(1);
		(void)!read(pipefd[0], &c, 1); /* parent closes when done */
		_exit(0);
	}
	close(pipefd[0]);
	int r = 0, nsfd = -1;
	char path[64], map[64];
	/* wait until the child has unshared: its user ns differs from ours */
	for (int i = 0; i < 2000; i++) {
		struct stat a, b;
		snprintf(path, sizeof(path), "/proc/%d/ns/user", pid);
		if (stat(path, &a) == 0 && stat("/proc/self/ns/user", &b) == 0 && a.st_ino != b.st_ino)
			break;
		usleep(500);
	}
	const char *files[] = {"uid_map", "setgroups", "gid_map"};
	for (size_t i = 0; i < 3 && r == 0; i++) {
		if (i == 0)
			snprintf(map, sizeof(map), "0 %u 1\n", (unsigned)kuid);
		else if (i == 1)
			snprintf(map, sizeof(map), "deny\n");
		else
			snprintf(map, sizeof(map), "0 %u 1\n", (unsigned)kgid);
		snprintf(path, sizeof(path), "/proc/%d/%s", pid, files[i]);
		int fd = open(path, O_WRONLY | O_CLOEXEC);
		if (fd < 0 || write(fd, map, strlen(map)) < 0)
			r = ab_fail(err, errno, "idmap: write %s", path);
		if (fd >= 0)
			close(fd);
	}
	if (r == 0) {
		snprintf(path, sizeof(path), "/proc/%d/ns/user", pid);
		nsfd = open(path, O_RDONLY | O_CLOEXEC);
		if (nsfd < 0)
			r = ab_fail(err, errno, "idmap: open %s", path);
	}
	close(pipefd[1]);
	waitpid(pid, NULL, 0);
	return r < 0 ? r : nsfd;
}

int ab_mount_prepare_idmaps(const ab_plan *plan, int *fds, ab_err *err)
{
	_cleanup_close_ int userns = -1;
	for (size_t i = 0; i < plan->nmounts; i++)
		fds[i] = -1;
	for (size_t i = 0; i < plan->nmounts; i++) {
		const ab_mount *m = &plan->mounts[i];
		if (!(m->flags & AB_MNT_F_IDMAP))
			continue;
		if (userns < 0) {
			userns = idmap_userns(plan->map_kuid, plan->map_kgid, err);
			if (userns < 0)
				return userns;
		}
		_cleanup_close_ int src = open(m->src, O_PATH | O_NOFOLLOW | O_CLOEXEC);
		if (src < 0)
			return ab_fail(err, errno, "%s %s", m->why, m->src);
		int tree = sys_open_tree(src, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
		if (tree < 0)
			return ab_fail(err, errno, "%s %s: open_tree", m->why, m->src);
		struct ab_mount_attr a = {.attr_set = MOUNT_ATTR_IDMAP | MOUNT_ATTR_NOSUID |
						      MOUNT_ATTR_NODEV |
						      (m->kind == AB_MNT_BIND_RO ? MOUNT_ATTR_RDONLY : 0),
					  .userns_fd = (unsigned long long)userns};
		if (sys_mount_setattr(tree, "", AT_EMPTY_PATH, &a) < 0) {
			int e = errno;
			close(tree);
			ab_fail(err, e, "%s %s: idmapped mount", m->why, m->src);
			ab_err_hint(err, "this filesystem does not support idmapped mounts; chown "
					 "%s to an unprivileged user or run agentbox as that user",
				    m->src);
			return -e;
		}
		fds[i] = tree;
	}
	return 0;
}

/* ------------------------------------------------------------ child side */

typedef struct src_state {
	int fd;            /* O_PATH of the source, or -1 */
	bool is_link;
	char *link;        /* symlink target (malloc) */
} src_state;

static int open_sources(const ab_plan *plan, src_state *src, ab_err *err)
{
	for (size_t i = 0; i < plan->nmounts; i++) {
		const ab_mount *m = &plan->mounts[i];
		src[i].fd = -1;
		if (m->kind != AB_MNT_BIND_RO && m->kind != AB_MNT_BIND_RW && m->kind != AB_MNT_PROTECT)
			continue;
		int fd = open(m->src, O_PATH | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0) {
			if (errno == ENOENT && (m->flags & AB_MNT_F_OPTIONAL))
				continue;
			return ab_fail(err, errno, "%s %s", m->why, m->src);
		}
		src[i].fd = fd;
		struct stat st;
		if (fstat(fd, &st) < 0)
			return ab_fail(err, errno, "%s %s: fstat", m->why, m->src);
		if (S_ISLNK(st.st_mode)) {
			char buf[PATH_MAX];
			ssize_t n = readlinkat(fd, "", buf, sizeof(buf) - 1);
			if (n < 0)
				return ab_fail(err, errno, "%s %s: readlink", m->why, m->src);
			buf[n] = '\0';
			src[i].is_link = true;
			src[i].link = strdup(buf);
			if (!src[i].link)
				return ab_fail(err, ENOMEM, "mount");
			if (m->kind == AB_MNT_PROTECT)
				return ab_fail(err, 0, "%s %s became a symbolic link; refusing", m->why,
					       m->src);
			continue;
		}
		if (!!S_ISDIR(st.st_mode) != !!(m->flags & AB_MNT_F_DIR))
			return ab_fail(err, 0, "%s %s changed type while agentbox started; refusing",
				       m->why, m->src);
	}
	return 0;
}

/* Protected paths that do not exist: create an empty placeholder on the host
 * (reported to the parent, which removes it after exit) so a read-only mount
 * can cover it. */
static int make_placeholders(const ab_plan *plan, int sync_fd, ab_err *err)
{
	for (size_t i = 0; i < plan->nmounts; i++) {
		const ab_mount *m = &plan->mounts[i];
		if (m->kind != AB_MNT_PLACEHOLDER)
			continue;
		int r;
		if (m->flags & AB_MNT_F_DIR)
			r = mkdir(m->dst, 0555) < 0 ? -errno : 0;
		else {
			int fd = open(m->dst, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0444);
			r = fd < 0 ? -errno : 0;
			if (fd >= 0)
				close(fd);
		}
		if (r == -EEXIST)
			continue; /* appeared meanwhile: the read-only cover still applies */
		if (r < 0)
			return ab_fail(err, -r, "fs.protect: create placeholder %s", m->dst);
		struct stat st;
		if (lstat(m->dst, &st) < 0)
			return ab_fail(err, errno, "fs.protect: placeholder %s", m->dst);
		ab_sync_msg msg = {.type = AB_SYNC_PLACEHOLDER, .value = !!(m->flags & AB_MNT_F_DIR),
				   .dev = st.st_dev, .ino = st.st_ino};
		snprintf(msg.path, sizeof(msg.path), "%s", m->dst);
		if (ab_sync_send(sync_fd, &msg, -1) < 0)
			return ab_fail(err, errno, "sync: placeholder");
	}
	return 0;
}

static const char *const dev_nodes[] = {"null", "zero", "full", "random", "urandom", "tty"};

static int build_dev(const char *sdev, const int *devfds, uid_t uid, gid_t gid, ab_err *err)
{
	char opts[64], path[PATH_MAX + 32];
	snprintf(opts, sizeof(opts), "mode=0755,size=64k,uid=%u,gid=%u", (unsigned)uid, (unsigned)gid);
	if (mount("tmpfs", sdev, "tmpfs", MS_NOSUID | MS_NOEXEC, opts) < 0)
		return ab_fail(err, errno, "mount /dev");
	for (size_t i = 0; i < AB_ARRAY_SIZE(dev_nodes); i++) {
		snprintf(path, sizeof(path), "%s/%s", sdev, dev_nodes[i]);
		int r = make_mountpoint(path, false);
		if (r == 0)
			r = attach_fd(devfds[i], true, path, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC, false);
		if (r < 0)
			return ab_fail(err, -r, "/dev/%s", dev_nodes[i]);
	}
	snprintf(path, sizeof(path), "%s/pts", sdev);
	if (mkdir(path, 0755) < 0 ||
	    mount("devpts", path, "devpts", MS_NOSUID | MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620") < 0)
		return ab_fail(err, errno, "mount /dev/pts");
	static const char *const links[][2] = {
		{"pts/ptmx", "ptmx"}, {"/proc/self/fd", "fd"}, {"/proc/self/fd/0", "stdin"},
		{"/proc/self/fd/1", "stdout"}, {"/proc/self/fd/2", "stderr"}, {"/proc/kcore", "core"},
	};
	for (size_t i = 0; i < AB_ARRAY_SIZE(links) - 1; i++) {
		snprintf(path, sizeof(path), "%s/%s", sdev, links[i][1]);
		if (symlink(links[i][0], path) < 0)
			return ab_fail(err, errno, "/dev/%s", links[i][1]);
	}
	snprintf(path, sizeof(path), "%s/shm", sdev);
	if (mkdir(path, 01777) < 0)
		return ab_fail(err, errno, "mkdir /dev/shm");
	return 0;
}

static int mount_tmpfs(const char *spath, const char *dst, const ab_plan *plan, bool ro,
		       mode_t ro_mode, ab_err *err)
{
	char opts[96];
	mode_t mode = 0755;
	if (strcmp(dst, "/tmp") == 0 || strcmp(dst, "/var/tmp") == 0 || strcmp(dst, "/dev/shm") == 0)
		mode = 01777;
	else if (strcmp(dst, plan->home) == 0)
		mode = 0700;
	if (ro)
		mode = ro_mode;
	snprintf(opts, sizeof(opts), "mode=%04o,uid=%u,gid=%u%s", (unsigned)mode,
		 (unsigned)plan->inside_uid, (unsigned)plan->inside_gid, ro ? ",size=4k" : "");
	int r = make_mountpoint(spath, true);
	if (r < 0)
		return ab_fail(err, -r, "mkdir %s", dst);
	unsigned long fl = MS_NOSUID | MS_NODEV | (ro ? MS_RDONLY | MS_NOEXEC : 0);
	if (mount("tmpfs", spath, "tmpfs", fl, opts) < 0)
		return ab_fail(err, errno, "mount tmpfs on %s", dst);
	return 0;
}

static int mount_content(const ab_mount *m, const char *spath, ab_err *err)
{
	char tmp[PATH_MAX];
	snprintf(tmp, sizeof(tmp), "%s/.agentbox-content", STAGE);
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (fd < 0)
		return ab_fail(err, errno, "%s: create", m->dst);
	size_t len = strlen(m->src);
	ssize_t w = write(fd, m->src, len);
	close(fd);
	if (w < 0 || (size_t)w != len)
		return ab_fail(err, w < 0 ? errno : EIO, "%s: write", m->dst);
	int r = make_mountpoint(spath, false);
	if (r == 0 && mount(tmp, spath, NULL, MS_BIND, NULL) < 0)
		r = -errno;
	if (r == 0)
		r = setattr_path(spath, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, false);
	unlink(tmp);
	return r < 0 ? ab_fail(err, -r, "%s", m->dst) : 0;
}

static int apply_one(const ab_plan *plan, size_t i, const src_state *src, const int *idmap_fds,
		     const int *devfds, ab_err *err)
{
	const ab_mount *m = &plan->mounts[i];
	char sp[PATH_MAX];
	int r = staged(sp, sizeof(sp), m->dst);
	if (r < 0)
		return ab_fail(err, -r, "%s", m->dst);
	bool dir = m->flags & AB_MNT_F_DIR;
	const unsigned long long base = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
	switch (m->kind) {
	case AB_MNT_TMPFS:
		return mount_tmpfs(sp, m->dst, plan, false, 0, err);
	case AB_MNT_PROC:
		if ((r = make_mountpoint(sp, true)) < 0)
			return ab_fail(err, -r, "mkdir /proc");
		if (mount("proc", sp, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
			return ab_fail(err, errno, "mount /proc");
		return 0;
	case AB_MNT_DEV:
		if ((r = make_mountpoint(sp, true)) < 0)
			return ab_fail(err, -r, "mkdir /dev");
		return build_dev(sp, devfds, plan->inside_uid, plan->inside_gid, err);
	case AB_MNT_BIND_RO:
	case AB_MNT_BIND_RW:
		if (src[i].fd < 0 && idmap_fds[i] < 0)
			return 0; /* optional and absent */
		if (src[i].is_link) {
			if ((r = make_mountpoint(sp, false)) < 0)
				return ab_fail(err, -r, "%s", m->dst);
			unlink(sp);
			if (symlink(src[i].link, sp) < 0 && errno != EEXIST)
				return ab_fail(err, errno, "symlink %s", m->dst);
			return 0;
		}
		if ((r = make_mountpoint(sp, dir)) < 0)
			return ab_fail(err, -r, "%s %s: mount point", m->why, m->dst);
		if (idmap_fds[i] >= 0)
			r = attach_fd(idmap_fds[i], false, sp, 0, false);
		else
			r = attach_fd(src[i].fd, true, sp,
				      base | (m->kind == AB_MNT_BIND_RO ? MOUNT_ATTR_RDONLY : 0), true);
		return r < 0 ? ab_fail(err, -r, "%s: bind %s", m->why, m->src) : 0;
	case AB_MNT_PROTECT:
		r = attach_fd(src[i].fd, true, sp, base | MOUNT_ATTR_RDONLY, true);
		return r < 0 ? ab_fail(err, -r, "fs.protect %s", m->dst) : 0;
	case AB_MNT_MASK:
	case AB_MNT_PLACEHOLDER: {
		struct stat st;
		if (lstat(sp, &st) < 0) {
			if ((errno == ENOENT || errno == ENOTDIR) &&
			    (m->flags & AB_MNT_F_OPTIONAL || m->kind == AB_MNT_MASK))
				return 0; /* nothing there to hide */
			return ab_fail(err, errno, "%s %s", m->why, m->dst);
		}
		/* denied: an empty, inaccessible directory or an empty file;
		 * placeholder: an empty read-only directory or file */
		bool deny = m->kind == AB_MNT_MASK;
		if (S_ISDIR(st.st_mode))
			return mount_tmpfs(sp, m->dst, plan, true, deny ? 0 : 0555, err);
		if (mount(STAGE "/" EMPTY_FILE, sp, NULL, MS_BIND, NULL) < 0)
			return ab_fail(err, errno, "%s %s", m->why, m->dst);
		r = setattr_path(sp, base | MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOEXEC, false);
		return r < 0 ? ab_fail(err, -r, "%s %s", m->why, m->dst) : 0;
	}
	case AB_MNT_RO_REMOUNT: {
		_cleanup_close_ int t = sys_open_tree(AT_FDCWD, sp, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC |
								     AT_RECURSIVE | AT_SYMLINK_NOFOLLOW);
		if (t < 0) {
			if (errno == ENOENT && (m->flags & AB_MNT_F_OPTIONAL))
				return 0;
			return ab_fail(err, errno, "%s read-only", m->dst);
		}
		r = attach_fd(t, false, sp, base | MOUNT_ATTR_RDONLY, true);
		return r < 0 ? ab_fail(err, -r, "%s read-only", m->dst) : 0;
	}
	case AB_MNT_PIN: {
		/* a clone of the staged subtree keeps its flags (and idmap) */
		_cleanup_close_ int t = sys_open_tree(AT_FDCWD, sp, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC |
								     AT_SYMLINK_NOFOLLOW);
		if (t < 0)
			return ab_fail(err, errno, "%s %s", m->why, m->dst);
		r = attach_fd(t, false, sp, 0, false);
		return r < 0 ? ab_fail(err, -r, "%s %s", m->why, m->dst) : 0;
	}
	case AB_MNT_SYMLINK:
		if ((r = make_mountpoint(sp, false)) < 0)
			return ab_fail(err, -r, "%s", m->dst);
		unlink(sp);
		return symlink(m->src, sp) < 0 ? ab_fail(err, errno, "symlink %s", m->dst) : 0;
	case AB_MNT_CONTENT:
		return mount_content(m, sp, err);
	}
	return ab_fail(err, EINVAL, "unknown mount kind %d", m->kind);
}

static int enter_root(const ab_plan *plan, ab_err *err)
{
	char sdev[PATH_MAX];
	if (unlink(STAGE "/" EMPTY_FILE) < 0)
		return ab_fail(err, errno, "remove staging file");
	snprintf(sdev, sizeof(sdev), "%s/dev", STAGE);
	/* /dev itself becomes read-only (pts and shm stay writable submounts) */
	if (setattr_path(sdev, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC, false) < 0)
		return ab_fail(err, errno, "make /dev read-only");
	if (chdir(STAGE) < 0)
		return ab_fail(err, errno, "chdir new root");
	if (syscall(SYS_pivot_root, ".", ".") < 0)
		return ab_fail(err, errno, "pivot_root");
	if (umount2(".", MNT_DETACH) < 0)
		return ab_fail(err, errno, "detach old root");
	if (chdir("/") < 0)
		return ab_fail(err, errno, "chdir /");
	if (setattr_path("/", MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, false) < 0)
		return ab_fail(err, errno, "make / read-only");
	if (chdir(plan->cwd) < 0 && chdir(plan->workspace) < 0)
		return ab_fail(err, errno, "chdir %s", plan->cwd);
	return 0;
}

int ab_mount_build_root(const ab_plan *plan, const int *idmap_fds, int sync_fd, ab_err *err)
{
	if (plan->nmounts > AB_MAX_MOUNTS)
		return ab_fail(err, E2BIG, "too many mounts (%zu)", plan->nmounts);
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		return ab_fail(err, errno, "make mounts private");
	src_state *src = calloc(plan->nmounts ? plan->nmounts : 1, sizeof(*src));
	if (!src)
		return ab_fail(err, ENOMEM, "mount");
	int devfds[AB_ARRAY_SIZE(dev_nodes)];
	int r = 0;
	for (size_t i = 0; i < AB_ARRAY_SIZE(dev_nodes); i++)
		devfds[i] = -1;
	for (size_t i = 0; i < AB_ARRAY_SIZE(dev_nodes) && r == 0; i++) {
		char p[32];
		snprintf(p, sizeof(p), "/dev/%s", dev_nodes[i]);
		devfds[i] = open(p, O_PATH | O_CLOEXEC);
		if (devfds[i] < 0)
			r = ab_fail(err, errno, "open %s", p);
	}
	if (r == 0)
		r = open_sources(plan, src, err);
	if (r == 0)
		r = make_placeholders(plan, sync_fd, err);
	if (r == 0 && plan->root_mode) {
		/* from here on, act as the sandbox user (sources are already open) */
		r = ab_creds_switch(plan->inside_uid, plan->inside_gid, plan->drop_groups, err);
	}
	if (r == 0 && mount("tmpfs", STAGE, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m") < 0)
		r = ab_fail(err, errno, "mount staging tmpfs");
	if (r == 0) {
		int fd = open(STAGE "/" EMPTY_FILE, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0444);
		if (fd < 0)
			r = ab_fail(err, errno, "create staging file");
		else
			close(fd);
	}
	for (size_t i = 0; i < plan->nmounts && r == 0; i++)
		r = apply_one(plan, i, src, idmap_fds, devfds, err);
	for (size_t i = 0; i < plan->nmounts; i++) {
		if (src[i].fd >= 0)
			close(src[i].fd);
		free(src[i].link);
	}
	free(src);
	for (size_t i = 0; i < AB_ARRAY_SIZE(dev_nodes); i++)
		if (devfds[i] >= 0)
			close(devfds[i]);
	if (r < 0)
		return r;
	return enter_root(plan, err);
}
