/* SPDX-License-Identifier: MIT */
/*
 * The new root (child, inside the new user+mount namespaces); the parent's
 * idmapped trees for root callers are made in mount_idmap.c.
 *
 * Order:
 *   1. make every mount private (nothing propagates back to the host);
 *   2. open every bind source O_PATH while the host tree is visible (sources
 *      inside writable trees without following any symlink), and check each
 *      is still what the planner saw;
 *   3. wait for the parent to create protected-path placeholders (see
 *      src/sandbox/cleanup.c), which it does meanwhile;
 *   4. stage a tmpfs root and attach everything by fd (open_tree/move_mount);
 *      mount points are reached from the stage without following any
 *      symlink (src/sandbox/mount_walk.h: the parent in one openat2 with
 *      RESOLVE_NO_SYMLINKS, kept for the next targets until something is
 *      mounted over it; the last component O_NOFOLLOW), so a symlink planted
 *      in a writable tree by an earlier run can never redirect a mount or a
 *      mkdir outside the new root;
 *   5. pivot_root into it, detach the old root, make "/" read-only.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agentbox/container.h"
#include "agentbox/mediate.h"
#include "agentbox/sandbox.h"
#include "mount_int.h"
#include "mount_walk.h"

#define STAGE "/tmp"                 /* covered by the staging tmpfs in our private mount ns */
#define EMPTY_FILE ".agentbox-empty" /* source of file masks, unlinked before pivot */
/* empty read-only directories cloned over denied (mode 000) and reserved
 * (placeholder, 0555) directories: a clone is cheaper than a new tmpfs */
#define EMPTY_DENY ".agentbox-deny"
#define EMPTY_RESERVE ".agentbox-reserve"

/* Open a host path O_PATH.  `strict`: no symlink anywhere on the way except
 * that a final symlink is returned as itself (for sources inside writable
 * trees, which the sandbox could have seeded with links). */
int ab_mount_open_host(const char *path, bool strict)
{
	if (!strict)
		return open(path, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	return ab_open_nofollow(path, O_PATH | O_NOFOLLOW);
}

int ab_mount_open_source(const ab_plan *plan, const ab_mount *m)
{
	if (m->copy)
		return ab_open_nofollow(m->copy, O_PATH | O_NOFOLLOW);
	return ab_mount_open_host(m->src, ab_mount_in_writable(plan, m->src));
}

/* Is `path` strictly inside a writable bind of the plan? */
bool ab_mount_in_writable(const ab_plan *plan, const char *path)
{
	for (size_t i = 0; i < plan->nmounts; i++) {
		const ab_mount *m = &plan->mounts[i];
		if (m->kind == AB_MNT_BIND_RW && strcmp(path, m->dst) != 0 &&
		    ab_path_is_under(path, m->dst))
			return true;
	}
	return false;
}

/* ------------------------------------------------------------ child: targets */

/* mount(2) onto an O_PATH fd through its /proc/self/fd link (the host's
 * procfs is still visible before pivot_root). */
static int mount_on_fd(const char *source, int tfd, const char *fstype, unsigned long flags,
		       const char *opts)
{
	char p[64];
	snprintf(p, sizeof(p), "/proc/self/fd/%d", tfd);
	return mount(source, p, fstype, flags, opts) < 0 ? -errno : 0;
}

/* Attach a tree at the target fd.  clone: src_fd is a path to clone (else an
 * already detached tree); attrs set on the (recursive) tree before moving. */
static int attach(int src_fd, bool clone, int tfd, unsigned long long attrs, bool recursive)
{
	_cleanup_close_ int tree = -1;
	int fd = src_fd;
	if (clone) {
		tree = sys_open_tree(src_fd, "",
				     OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH |
					     (recursive ? AT_RECURSIVE : 0));
		if (tree < 0)
			return -errno;
		fd = tree;
	}
	if (attrs) {
		struct ab_mount_attr a = {.attr_set = attrs};
		if (sys_mount_setattr(fd, "", AT_EMPTY_PATH | (recursive ? AT_RECURSIVE : 0), &a) <
		    0)
			return -errno;
	}
	if (sys_move_mount(fd, "", tfd, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
		return -errno;
	return 0;
}

/* The "proc-outer" downgrade: the outer /proc (still this namespace's /proc
 * before pivot_root) with its submounts, the engine's masks among them,
 * read-only: nothing in it can be written, /proc/PID/mem included. */
static int mount_outer_proc(int tfd, ab_err *err)
{
	_cleanup_close_ int src = open("/proc", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (src < 0)
		return ab_fail(err, errno, "proc-outer: open the outer /proc");
	int r = attach(src, true, tfd,
		       MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC,
		       true);
	if (r < 0)
		return ab_fail(err, -r, "proc-outer: bind the outer /proc read-only");
	return 0;
}

/* ------------------------------------------------------------ child: sources */

typedef struct src_state {
	int fd; /* O_PATH of the source, or -1 */
	bool is_link;
	char *link; /* symlink target (malloc) */
} src_state;

static int open_sources(const ab_plan *plan, src_state *src, ab_err *err)
{
	for (size_t i = 0; i < plan->nmounts; i++) {
		const ab_mount *m = &plan->mounts[i];
		if (m->kind != AB_MNT_BIND_RO && m->kind != AB_MNT_BIND_RW)
			continue;
		int fd = ab_mount_open_source(plan, m);
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
			continue;
		}
		if (!!S_ISDIR(st.st_mode) != !!(m->flags & AB_MNT_F_DIR))
			return ab_fail(err, 0,
				       "%s %s changed type while agentbox started; refusing",
				       m->why, m->src);
	}
	return 0;
}

/* ------------------------------------------------------------ child: kinds */

static const char *const dev_nodes[] = {"null", "zero", "full", "random", "urandom", "tty"};

static const struct {
	const char *name, *opts;
	enum ab_mnt_kind kind;
} empties[] = {{EMPTY_DENY, "mode=0000,size=4k", AB_MNT_MASK},
	       {EMPTY_RESERVE, "mode=0555,size=4k", AB_MNT_PLACEHOLDER}};

/* Only stage the empty directories some mount will clone. */
static bool empty_needed(const ab_plan *plan, size_t which)
{
	for (size_t i = 0; i < plan->nmounts; i++)
		if (plan->mounts[i].kind == empties[which].kind &&
		    (plan->mounts[i].flags & AB_MNT_F_DIR))
			return true;
	return false;
}

/* A trust file already staged and mounted: the parent sends one sealed
 * memfd for every mount of the same bytes (the system bundle's two paths,
 * the Java truststore's), and the later ones are clones of the first. */
typedef struct staged_copy {
	dev_t dev;
	ino_t ino;
	int tree;      /* the first mount of it, or -1 */
	char name[32]; /* its file in the stage, removed before pivot_root (a
			  mount whose file is unlinked cannot be cloned) */
} staged_copy;
#define AB_STAGED_COPIES 4

typedef struct stage {
	int fd;              /* O_PATH of the staging root */
	ab_walk *walk;       /* reaches targets in it (mount_walk.h) */
	staged_copy *copies; /* [AB_STAGED_COPIES] */
	int review_fds[2];   /* review mode: the change set's upper/ and work/, or -1 */
	const ab_plan *plan;
	src_state *src;
	const int *idmap_fds;
	const int *devfds;
	/* the memfds of the run-time mounts (empty until RUNTIME_DONE),
	 * received at the first mount needing one */
	int sync_fd;
	ab_runtime *rt;
	bool have_content;
	/* a detached clone of the staging root's mount: the run-time files
	 * are opened for writing through it, so that their writes, made after
	 * the root is read-only, do not count against the root's mount */
	int wfd;
} stage;

/* An O_PATH fd of dst in the stage, no symlink followed (mount_walk.h). */
static int open_target(const stage *st, const char *dst, bool dir, bool create)
{
	return ab_walk_open(st->walk, dst, dir, create, NULL);
}

static int build_dev(const stage *st, int tfd, ab_err *err)
{
	char opts[64];
	snprintf(opts, sizeof(opts), "mode=0755,size=64k,uid=%u,gid=%u",
		 (unsigned)st->plan->inside_uid, (unsigned)st->plan->inside_gid);
	int r = mount_on_fd("tmpfs", tfd, "tmpfs", MS_NOSUID | MS_NOEXEC, opts);
	if (r < 0)
		return ab_fail(err, -r, "mount /dev");
	ab_walk_forget(st->walk, "/dev");
	/* from here on /dev is our own fresh tmpfs: nothing in it can be planted */
	for (size_t i = 0; i < AB_ARRAY_SIZE(dev_nodes); i++) {
		char d[32];
		snprintf(d, sizeof(d), "/dev/%s", dev_nodes[i]);
		_cleanup_close_ int nfd = open_target(st, d, false, true);
		r = nfd < 0 ? nfd
			    : attach(st->devfds[i], true, nfd,
				     MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC, false);
		if (r < 0)
			return ab_fail(err, -r, "/dev/%s", dev_nodes[i]);
	}
	if (mkdirat(st->fd, "dev/pts", 0755) < 0 || mkdirat(st->fd, "dev/shm", 01777) < 0)
		return ab_fail(err, errno, "mkdir /dev/pts");
	if (mount("devpts", STAGE "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC,
		  "newinstance,ptmxmode=0666,mode=0620") < 0)
		return ab_fail(err, errno, "mount /dev/pts");
	static const char *const links[][2] = {
		{"pts/ptmx", "dev/ptmx"},          {"/proc/self/fd", "dev/fd"},
		{"/proc/self/fd/0", "dev/stdin"},  {"/proc/self/fd/1", "dev/stdout"},
		{"/proc/self/fd/2", "dev/stderr"},
	};
	for (size_t i = 0; i < AB_ARRAY_SIZE(links); i++)
		if (symlinkat(links[i][0], st->fd, links[i][1]) < 0)
			return ab_fail(err, errno, "/%s", links[i][1]);
	return 0;
}

static int mount_tmpfs(const stage *st, int tfd, const char *dst, bool ro, mode_t ro_mode,
		       ab_err *err)
{
	const ab_plan *plan = st->plan;
	char opts[96];
	mode_t mode = 0755;
	if (strcmp(dst, "/tmp") == 0 || strcmp(dst, "/var/tmp") == 0 ||
	    strcmp(dst, "/dev/shm") == 0)
		mode = 01777;
	else if (strcmp(dst, plan->home) == 0)
		mode = 0700;
	/* Bounded: tmpfs pages are not reclaimed by the OOM killer, so the
	 * private trees together may hold at most half of RAM. */
	const char *size = "size=10%";
	if (strcmp(dst, plan->home) == 0 || strcmp(dst, "/tmp") == 0)
		size = "size=15%";
	else if (strcmp(dst, "/run") == 0 || strcmp(dst, "/var/tmp") == 0 ||
		 strcmp(dst, "/dev/shm") == 0)
		size = "size=5%";
	if (ro) {
		mode = ro_mode;
		size = "size=4k";
	}
	snprintf(opts, sizeof(opts), "mode=%04o,uid=%u,gid=%u,%s", (unsigned)mode,
		 (unsigned)plan->inside_uid, (unsigned)plan->inside_gid, size);
	unsigned long fl = MS_NOSUID | MS_NODEV | (ro ? MS_RDONLY | MS_NOEXEC : 0);
	int r = mount_on_fd("tmpfs", tfd, "tmpfs", fl, opts);
	return r < 0 ? ab_fail(err, -r, "mount tmpfs on %s", dst) : 0;
}

/* The staged copy of the bytes behind `content_fd`, or NULL (and `*slot`
 * the free entry to record it in, or NULL when all are taken). */
static staged_copy *staged_find(const stage *st, int content_fd, struct stat *sb,
				staged_copy **slot)
{
	*slot = NULL;
	if (fstat(content_fd, sb) < 0)
		return NULL;
	for (size_t i = 0; i < AB_STAGED_COPIES; i++) {
		staged_copy *c = &st->copies[i];
		if (c->tree >= 0 && c->dev == sb->st_dev && c->ino == sb->st_ino)
			return c;
		if (c->tree < 0 && !*slot)
			*slot = c;
	}
	return NULL;
}

/* A clone of the mount of the same bytes made earlier: same attributes. */
static int mount_copy(const ab_mount *m, const staged_copy *c, int tfd, ab_err *err)
{
	_cleanup_close_ int t =
		sys_open_tree(c->tree, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
	int r = t < 0 ? -errno : attach(t, false, tfd, 0, false);
	return r < 0 ? ab_fail(err, -r, "%s", m->dst) : 0;
}

static int mount_content(const stage *st, const ab_mount *m, int content_fd, int tfd, ab_err *err)
{
	bool render = m->flags & AB_MNT_F_RENDER;
	staged_copy *slot = NULL;
	struct stat sb;
	if ((m->flags & AB_MNT_F_RUNTIME) && !render && content_fd >= 0) {
		const staged_copy *c = staged_find(st, content_fd, &sb, &slot);
		if (c)
			return mount_copy(m, c, tfd, err);
	}
	const char *name = slot ? slot->name : ".agentbox-content";
	bool runtime = m->flags & AB_MNT_F_RUNTIME;
	if (runtime && st->wfd < 0)
		return ab_fail(err, EPROTO, "%s: content", m->dst);
	int fd =
		openat(runtime ? st->wfd : st->fd, name,
		       O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, render ? 0600 : 0644);
	if (fd < 0)
		return ab_fail(err, errno, "%s: create", m->dst);
	/* a rendered credentials file: the harness rewrites it after a token
	 * refresh; in the staging tmpfs (memory, at most its size), never on disk */
	if (render && fchown(fd, st->plan->inside_uid, st->plan->inside_gid) < 0) {
		int e = errno;
		close(fd);
		return ab_fail(err, e, "%s: chown", m->dst);
	}
	if (runtime) {
		/* made at run time by the parent, in its memfd: copied once
		 * filled (ab_mount_fill_runtime), into the file mounted now (a
		 * rendered file: its own memfd, never one seen before) */
		int r = ab_mount_defer_fill(st->rt, content_fd, fd);
		if (r < 0) {
			close(fd);
			return ab_fail(err, -r, "%s: content", m->dst);
		}
	} else {
		size_t len = strlen(m->src);
		ssize_t w = write(fd, m->src, len);
		close(fd);
		if (w < 0 || (size_t)w != len)
			return ab_fail(err, w < 0 ? errno : EIO, "%s: write", m->dst);
	}
	_cleanup_close_ int t = sys_open_tree(st->fd, name, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
	int r = t < 0 ? -errno
		      : attach(t, false, tfd,
			       BASE_ATTRS | (render ? MOUNT_ATTR_NOEXEC : MOUNT_ATTR_RDONLY),
			       false);
	if (!slot || r < 0)
		unlinkat(st->fd, name, 0);
	if (r < 0)
		return ab_fail(err, -r, "%s", m->dst);
	if (slot) {
		slot->dev = sb.st_dev;
		slot->ino = sb.st_ino;
		slot->tree = t;
		t = -1;
	}
	return 0;
}

/* Hide (deny) or reserve (placeholder) what is at the target. */
static int mount_cover(const stage *st, const ab_mount *m, int tfd, bool is_dir, ab_err *err)
{
	bool deny = m->kind == AB_MNT_MASK;
	if (!deny && !is_dir) {
		/* a placeholder file keeps its content (e.g. commondir "."): it is
		 * bound onto itself read-only */
		int r = attach(tfd, true, tfd, BASE_ATTRS | MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOEXEC,
			       false);
		return r < 0 ? ab_fail(err, -r, "%s %s", m->why, m->dst) : 0;
	}
	if (is_dir) {
		_cleanup_close_ int d = sys_open_tree(st->fd, deny ? EMPTY_DENY : EMPTY_RESERVE,
						      OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
		int r = d < 0 ? -errno : attach(d, false, tfd, 0, false);
		return r < 0 ? ab_fail(err, -r, "%s %s", m->why, m->dst) : 0;
	}
	_cleanup_close_ int t =
		sys_open_tree(st->fd, EMPTY_FILE, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
	int r = t < 0 ? -errno
		      : attach(t, false, tfd, BASE_ATTRS | MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOEXEC,
			       false);
	return r < 0 ? ab_fail(err, -r, "%s %s", m->why, m->dst) : 0;
}

/* Review mode (docs/review.md): an overlay stacked on the workspace bind just
 * attached, whose lower layer is that bind (the real workspace, never
 * written: the overlay copies up into upper/) and whose upper and work
 * directories are the change set's.  userxattr: its whiteouts and opaque
 * marks are user.overlay.* attributes, which a user namespace may set.
 * Layers are passed as fds (no path lookup); kernels before 6.13 take their
 * /proc/self/fd names instead. */
static int overlay_layer(int fs, const char *key, int fd)
{
	if (syscall(SYS_fsconfig, fs, FSCONFIG_SET_FD, key, NULL, fd) == 0)
		return 0;
	if (errno != EINVAL && errno != EBADF)
		return -errno;
	char p[64];
	snprintf(p, sizeof(p), "/proc/self/fd/%d", fd);
	const char *k = strcmp(key, "lowerdir+") == 0 ? "lowerdir" : key;
	return syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING, k, p, 0) == 0 ? 0 : -errno;
}

static int overlay_make(int lower, const int *rv)
{
	_cleanup_close_ int fs = (int)syscall(SYS_fsopen, "overlay", FSOPEN_CLOEXEC);
	if (fs < 0)
		return -errno;
	static const char *const opts[][2] = {
		{"userxattr", NULL}, {"redirect_dir", "nofollow"},
		{"metacopy", "off"}, {"index", "off"},
		{"xino", "off"},
	};
	for (size_t i = 0; i < AB_ARRAY_SIZE(opts); i++) {
		long r = opts[i][1] ? syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING, opts[i][0],
					      opts[i][1], 0)
				    : syscall(SYS_fsconfig, fs, FSCONFIG_SET_FLAG, opts[i][0], NULL,
					      0);
		if (r < 0)
			return -errno;
	}
	int r;
	if ((r = overlay_layer(fs, "lowerdir+", lower)) < 0 ||
	    (r = overlay_layer(fs, "upperdir", rv[0])) < 0 ||
	    (r = overlay_layer(fs, "workdir", rv[1])) < 0)
		return r;
	if (syscall(SYS_fsconfig, fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
		return -errno;
	int mnt = (int)syscall(SYS_fsmount, fs, FSMOUNT_CLOEXEC,
			       MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
	return mnt < 0 ? -errno : mnt;
}

static int mount_review(const stage *st, const ab_mount *m, ab_err *err)
{
	if (st->review_fds[0] < 0 || st->review_fds[1] < 0)
		return ab_fail(err, EPROTO, "review mode: no change set opened");
	_cleanup_close_ int top = open_target(st, m->dst, true, false);
	if (top < 0)
		return ab_fail(err, -top, "review mode: %s", m->dst);
	_cleanup_close_ int lower = openat(top, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (lower < 0)
		return ab_fail(err, errno, "review mode: %s", m->dst);
	_cleanup_close_ int mnt = overlay_make(lower, st->review_fds);
	int r = mnt < 0 ? mnt : attach(mnt, false, top, 0, false);
	if (r < 0) {
		ab_fail(err, -r, "review mode: overlay on %s", m->dst);
		ab_err_hint(err,
			    "this kernel or the filesystem of %s cannot hold an overlay's upper "
			    "layer in a user namespace (overlayfs with user xattrs); run "
			    "without --review, or set XDG_STATE_HOME to a directory on ext4, "
			    "btrfs, xfs or tmpfs",
			    st->plan->review_dir);
		return r;
	}
	return 0;
}

static int apply_bind(const stage *st, size_t i, ab_err *err)
{
	const ab_mount *m = &st->plan->mounts[i];
	const src_state *s = &st->src[i];
	if (s->fd < 0 && st->idmap_fds[i] < 0)
		return 0; /* optional and absent */
	if (s->is_link) {
		/* never followed: the same link is recreated inside */
		_cleanup_close_ int pfd = -1;
		char parent[PATH_MAX];
		const char *slash = strrchr(m->dst, '/');
		snprintf(parent, sizeof(parent), "%.*s", (int)(slash - m->dst), m->dst);
		pfd = open_target(st, parent[0] ? parent : "/", true, true);
		if (pfd < 0)
			return ab_fail(err, -pfd, "%s %s", m->why, m->dst);
		if (symlinkat(s->link, pfd, slash + 1) < 0 && errno != EEXIST)
			return ab_fail(err, errno, "symlink %s", m->dst);
		return 0;
	}
	_cleanup_close_ int tfd = open_target(st, m->dst, m->flags & AB_MNT_F_DIR, true);
	if (tfd < 0)
		return ab_fail(err, -tfd, "%s %s: mount point", m->why, m->dst);
	int r;
	if (st->idmap_fds[i] >= 0)
		r = attach(st->idmap_fds[i], false, tfd, 0, false);
	else
		r = attach(s->fd, true, tfd,
			   BASE_ATTRS | (m->kind == AB_MNT_BIND_RO ? MOUNT_ATTR_RDONLY : 0), true);
	if (r < 0)
		return ab_fail(err, -r, "%s: bind %s", m->why, m->src);
	return (m->flags & AB_MNT_F_REVIEW) ? mount_review(st, m, err) : 0;
}

/* A protected directory whose files have other names (hard links made while
 * it was not protected) would stay writable through those: refuse. */
static int check_no_links(const stage *st, const ab_mount *m, ab_err *err)
{
	int tfd = open_target(st, m->dst, true, false);
	if (tfd < 0)
		return tfd == -ENOENT ? 0 : ab_fail(err, -tfd, "fs.protect %s", m->dst);
	int dfd = openat(tfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	close(tfd);
	DIR *d = dfd < 0 ? NULL : fdopendir(dfd);
	if (!d) {
		if (dfd >= 0)
			close(dfd);
		return ab_fail(err, errno, "fs.protect %s", m->dst);
	}
	int r = 0;
	for (struct dirent *e; r == 0 && (e = readdir(d));) {
		struct stat sb;
		if (fstatat(dirfd(d), e->d_name, &sb, AT_SYMLINK_NOFOLLOW) == 0 &&
		    S_ISREG(sb.st_mode) && sb.st_nlink > 1) {
			ab_fail(err, 0,
				"fs.protect: %s/%s has %lu hard links; the other names would "
				"stay writable, so it cannot be protected",
				m->dst, e->d_name, (unsigned long)sb.st_nlink);
			ab_err_hint(err, "remove the extra links (find WORKSPACE -samefile FILE)");
			r = -EINVAL;
		}
	}
	closedir(d);
	return r;
}

/* A clone of what is already staged at the target, bound onto itself. */
static int apply_reclone(const stage *st, const ab_mount *m, bool ro, ab_err *err)
{
	_cleanup_close_ int tfd = open_target(st, m->dst, true, false);
	if (tfd < 0) {
		if (tfd == -ENOENT && (m->flags & AB_MNT_F_OPTIONAL))
			return 0;
		return ab_fail(err, -tfd, "%s %s", m->why, m->dst);
	}
	int r = attach(tfd, true, tfd, ro ? BASE_ATTRS | MOUNT_ATTR_RDONLY : 0, true);
	return r < 0 ? ab_fail(err, -r, "%s %s", m->why, m->dst) : 0;
}

/* A credentials file rendered with placeholders goes there (it replaces a
 * deny of the same path). */
static bool rendered_over(const ab_plan *plan, const char *dst)
{
	for (size_t i = 0; i < plan->nmounts; i++)
		if (plan->mounts[i].kind == AB_MNT_CONTENT &&
		    (plan->mounts[i].flags & AB_MNT_F_RENDER) &&
		    strcmp(plan->mounts[i].dst, dst) == 0)
			return true;
	return false;
}

static int apply_one(const stage *st, size_t i, ab_err *err)
{
	const ab_mount *m = &st->plan->mounts[i];
	_cleanup_close_ int tfd = -1;
	bool is_dir = false;
	int r;
	switch (m->kind) {
	case AB_MNT_BIND_RO:
	case AB_MNT_BIND_RW: return apply_bind(st, i, err);
	case AB_MNT_RO_REMOUNT: return apply_reclone(st, m, true, err);
	case AB_MNT_PIN: return apply_reclone(st, m, false, err);
	case AB_MNT_PROTECT:
		/* what the writable tree shows there (idmap included), read-only */
		if ((m->flags & AB_MNT_F_DIR) && (r = check_no_links(st, m, err)) < 0)
			return r;
		return apply_reclone(st, m, true, err);
	case AB_MNT_MASK:
	case AB_MNT_PLACEHOLDER:
		if (m->kind == AB_MNT_MASK && rendered_over(st->plan, m->dst))
			return 0; /* the rendered copy covers it (stacking on the empty
				     file would pin the staging file) */
		tfd = ab_walk_open(st->walk, m->dst, false, false, &is_dir);
		if (tfd == -ENOENT || tfd == -ENOTDIR)
			return 0; /* nothing there to hide */
		if (tfd < 0)
			return ab_fail(err, -tfd, "%s %s", m->why, m->dst);
		return mount_cover(st, m, tfd, is_dir, err);
	default: break;
	}
	bool dir = m->kind != AB_MNT_CONTENT && m->kind != AB_MNT_SYMLINK;
	tfd = open_target(st, m->dst, dir, true);
	if (tfd < 0)
		return ab_fail(err, -tfd, "%s %s: mount point", m->why, m->dst);
	switch (m->kind) {
	case AB_MNT_TMPFS: return mount_tmpfs(st, tfd, m->dst, false, 0, err);
	case AB_MNT_PROC:
		if (m->flags & AB_MNT_F_OUTER)
			return mount_outer_proc(tfd, err);
		r = mount_on_fd("proc", tfd, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
		if (r < 0) {
			ab_fail(err, -r, "mount /proc");
			err->step = AB_STEP_PROC; /* the parent looks at the outer /proc */
		}
		return r;
	case AB_MNT_DEV: return build_dev(st, tfd, err);
	case AB_MNT_CONTENT: return mount_content(st, m, st->src[i].fd, tfd, err);
	default: return ab_fail(err, EINVAL, "unsupported mount kind %d for %s", m->kind, m->dst);
	}
}

static int enter_root(const ab_plan *plan, int stage_fd, ab_err *err)
{
	struct ab_mount_attr ro = {.attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID |
					       MOUNT_ATTR_NOEXEC};
	if (unlinkat(stage_fd, EMPTY_FILE, 0) < 0)
		return ab_fail(err, errno, "remove staging file");
	for (size_t i = 0; i < AB_ARRAY_SIZE(empties); i++) {
		char path[64];
		snprintf(path, sizeof(path), STAGE "/%s", empties[i].name);
		if (empty_needed(plan, i) && (umount2(path, MNT_DETACH) < 0 || rmdir(path) < 0))
			return ab_fail(err, errno, "remove %s", path);
	}
	/* /dev itself becomes read-only (pts and shm stay writable submounts) */
	if (sys_mount_setattr(stage_fd, "dev", AT_SYMLINK_NOFOLLOW, &ro) < 0)
		return ab_fail(err, errno, "make /dev read-only");
	if (fchdir(stage_fd) < 0)
		return ab_fail(err, errno, "chdir new root");
	if (syscall(SYS_pivot_root, ".", ".") < 0)
		return ab_fail(err, errno, "pivot_root");
	if (umount2(".", MNT_DETACH) < 0)
		return ab_fail(err, errno, "detach old root");
	if (chdir("/") < 0)
		return ab_fail(err, errno, "chdir /");
	ro.attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
	if (sys_mount_setattr(AT_FDCWD, "/", 0, &ro) < 0)
		return ab_fail(err, errno, "make / read-only");
	if (chdir(plan->cwd) < 0 && chdir(plan->workspace) < 0)
		return ab_fail(err, errno, "chdir %s", plan->cwd);
	return 0;
}

/* New `.git` entries kept off the host (include/agentbox/mediate.h): the
 * links they are made of point to /.agentbox-git/GRANT/N, and only this root
 * (read-only from pivot_root on) has /.agentbox-git: GRANT leads to that
 * grant's store. */
static int git_links(const ab_plan *plan, int sfd, ab_err *err)
{
	if (mkdirat(sfd, &AB_MED_LINK_ROOT[1], 0755) < 0)
		return ab_fail(err, errno, "nested git: " AB_MED_LINK_ROOT);
	_cleanup_close_ int dfd =
		openat(sfd, &AB_MED_LINK_ROOT[1], O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0)
		return ab_fail(err, errno, "nested git: " AB_MED_LINK_ROOT);
	for (size_t i = 0; i < plan->nmounts; i++) {
		const ab_mount *m = &plan->mounts[i];
		if (!ab_plan_git_grant(m))
			continue;
		char name[24], target[PATH_MAX];
		snprintf(name, sizeof(name), "%zu", i);
		int n = snprintf(target, sizeof(target), "%s/" AB_MED_STORE,
				 strcmp(m->dst, "/") == 0 ? "" : m->dst);
		if (n < 0 || (size_t)n >= sizeof(target) || symlinkat(target, dfd, name) < 0)
			return ab_fail(err,
				       n < 0 || (size_t)n >= sizeof(target) ? ENAMETOOLONG : errno,
				       "nested git: the link to %s", m->dst);
	}
	return 0;
}

static int wait_content(stage *st, ab_err *err);

static int stage_and_apply(const ab_plan *plan, src_state *src, const int *idmap_fds,
			   const int *devfds, const int *review_fds, int sync_fd, ab_runtime *rt,
			   ab_err *err)
{
	/* the content mounts live here: with secrets, the trust files (one copy of
	 * the system bundle, ~220 KB on Debian, and one Java truststore, ~170 KB,
	 * each mounted at all of its paths) */
	if (mount("tmpfs", STAGE, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=4m") < 0) {
		int r = ab_fail(err, errno, "mount staging tmpfs");
		err->step = AB_STEP_MOUNT;
		return r;
	}
	_cleanup_close_ int sfd = open(STAGE, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (sfd < 0)
		return ab_fail(err, errno, "open staging root");
	int fd = openat(sfd, EMPTY_FILE, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0444);
	if (fd < 0)
		return ab_fail(err, errno, "create staging file");
	close(fd);
	for (size_t i = 0; i < AB_ARRAY_SIZE(empties); i++) {
		if (!empty_needed(plan, i))
			continue;
		char path[64], opts[96];
		snprintf(path, sizeof(path), STAGE "/%s", empties[i].name);
		snprintf(opts, sizeof(opts), "%s,uid=%u,gid=%u", empties[i].opts,
			 (unsigned)plan->inside_uid, (unsigned)plan->inside_gid);
		if (mkdirat(sfd, empties[i].name, 0) < 0 ||
		    mount("tmpfs", path, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
			  opts) < 0)
			return ab_fail(err, errno, "staging %s", empties[i].name);
	}
	ab_walk walk;
	ab_walk_init(&walk, sfd);
	staged_copy copies[AB_STAGED_COPIES];
	for (size_t i = 0; i < AB_STAGED_COPIES; i++) {
		copies[i].tree = -1;
		snprintf(copies[i].name, sizeof(copies[i].name), ".agentbox-content-%zu", i);
	}
	stage st = {.fd = sfd,
		    .walk = &walk,
		    .copies = copies,
		    .plan = plan,
		    .src = src,
		    .idmap_fds = idmap_fds,
		    .devfds = devfds,
		    .review_fds = {review_fds[0], review_fds[1]},
		    .sync_fd = sync_fd,
		    .rt = rt,
		    .wfd = -1};
	int r = 0;
	for (size_t i = 0; i < plan->nmounts && r == 0; i++) {
		if ((plan->mounts[i].flags & AB_MNT_F_RUNTIME) && !st.have_content)
			r = wait_content(&st, err);
		if (r == 0)
			r = apply_one(&st, i, err);
		/* what was kept at or under it now shows the covered tree */
		ab_walk_forget(&walk, plan->mounts[i].dst);
	}
	ab_walk_free(&walk);
	/* no run-time mount: the end of the (empty) list still comes */
	if (r == 0 && !st.have_content)
		r = wait_content(&st, err);
	for (size_t i = 0; i < AB_STAGED_COPIES; i++) {
		if (copies[i].tree >= 0 && unlinkat(sfd, copies[i].name, 0) < 0 && r == 0)
			r = ab_fail(err, errno, "remove staging file");
		ab_closep(&copies[i].tree);
	}
	/* the files opened through it hold the clone until they are filled */
	ab_closep(&st.wfd);
	if (r < 0)
		return r;
	r = plan->seccomp.notify_create ? git_links(plan, sfd, err) : 0;
	return r < 0 ? r : enter_root(plan, sfd, err);
}

/* The parent creates the protected-path placeholders while we get going. */
static int wait_placeholders(int sync_fd, ab_err *err)
{
	ab_sync_msg m;
	int fd = -1;
	int r = ab_sync_recv(sync_fd, &m, &fd);
	if (r <= 0)
		return ab_fail(err, r < 0 ? -r : EPIPE, "wait for placeholders");
	if (m.type == AB_SYNC_PLACEHOLDERS_DONE && fd < 0)
		return 0;
	if (fd >= 0)
		close(fd);
	return ab_fail(err, EPROTO, "wait for placeholders");
}

/* The memfds of the AB_MNT_F_RUNTIME mounts (the session CA's trust files,
 * the rendered credentials files), empty for now, up to CONTENT_DONE.
 * Waited for at the first mount that needs one, or once the root is built. */
static int wait_content(stage *st, ab_err *err)
{
	const ab_plan *plan = st->plan;
	for (;;) {
		ab_sync_msg m;
		int fd = -1;
		int r = ab_sync_recv(st->sync_fd, &m, &fd);
		if (r <= 0)
			return ab_fail(err, r < 0 ? -r : EPIPE, "wait for the run-time files");
		if (m.type == AB_SYNC_CONTENT_DONE && fd < 0) {
			st->have_content = true;
			return 0;
		}
		if (st->wfd < 0 && (st->wfd = sys_open_tree(st->fd, "",
							    OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC |
								    AT_EMPTY_PATH)) < 0) {
			int e = errno;
			if (fd >= 0)
				close(fd);
			return ab_fail(err, e, "run-time files: clone the staging mount");
		}
		if (m.type == AB_SYNC_CONTENT && fd >= 0 && m.value >= 0 &&
		    (size_t)m.value < plan->nmounts &&
		    (plan->mounts[m.value].flags & AB_MNT_F_RUNTIME) && st->src[m.value].fd < 0) {
			st->src[m.value].fd = fd;
			continue;
		}
		if (fd >= 0)
			close(fd);
		return ab_fail(err, EPROTO, "wait for the run-time files");
	}
}

/* Review mode: the change set the parent prepared (src/observe/review.c),
 * opened while the host tree is visible, no symlink followed. */
static int open_review(const ab_plan *plan, int *fds, ab_err *err)
{
	static const char *const names[2] = {"upper", "work"};
	for (int i = 0; i < 2; i++) {
		_cleanup_free_ char *p = ab_path_join(plan->review_dir, names[i]);
		if (!p)
			return ab_fail(err, ENOMEM, "review mode");
		fds[i] = p ? ab_open_nofollow(p, O_RDONLY | O_DIRECTORY) : -1;
		if (fds[i] < 0)
			return ab_fail(err, errno, "review mode: open %s", p);
	}
	return 0;
}

/* Root callers: the parent sends the idmapped trees while we get going. */
static int recv_idmaps(const ab_plan *plan, int sync_fd, int *fds, ab_err *err)
{
	for (;;) {
		ab_sync_msg m;
		int fd = -1;
		int r = ab_sync_recv(sync_fd, &m, &fd);
		if (r <= 0)
			return ab_fail(err, r < 0 ? -r : EPIPE, "receive idmapped mounts");
		if (m.type != AB_SYNC_IDMAP) {
			if (fd >= 0)
				close(fd);
			return ab_fail(err, EPROTO, "receive idmapped mounts");
		}
		if (m.value < 0)
			return 0;
		if (fd < 0 || (size_t)m.value >= plan->nmounts || fds[m.value] >= 0) {
			if (fd >= 0)
				close(fd);
			return ab_fail(err, EPROTO, "receive idmapped mounts");
		}
		fds[m.value] = fd;
	}
}

int ab_mount_build_root(const ab_plan *plan, int sync_fd, ab_runtime *rt, ab_err *err)
{
	if (plan->nmounts > AB_MAX_MOUNTS)
		return ab_fail(err, E2BIG, "too many mounts (%zu)", plan->nmounts);
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		return ab_fail(err, errno, "make mounts private");
	src_state *src = calloc(plan->nmounts ? plan->nmounts : 1, sizeof(*src));
	int *idmap_fds = calloc(plan->nmounts ? plan->nmounts : 1, sizeof(int));
	if (!src || !idmap_fds) {
		free(src);
		free(idmap_fds);
		return ab_fail(err, ENOMEM, "mount");
	}
	for (size_t i = 0; i < plan->nmounts; i++)
		src[i].fd = idmap_fds[i] = -1;
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
	int review_fds[2] = {-1, -1};
	if (r == 0 && plan->review)
		r = open_review(plan, review_fds, err);
	if (r == 0)
		r = wait_placeholders(sync_fd, err);
	/* from here on, act as the sandbox user (sources are already open) */
	if (r == 0 && plan->root_mode)
		r = ab_creds_switch(plan->inside_uid, plan->inside_gid, plan->drop_groups, err);
	if (r == 0 && plan->root_mode)
		r = recv_idmaps(plan, sync_fd, idmap_fds, err);
	if (r == 0)
		r = stage_and_apply(plan, src, idmap_fds, devfds, review_fds, sync_fd, rt, err);
	for (int i = 0; i < 2; i++)
		ab_closep(&review_fds[i]);
	for (size_t i = 0; i < plan->nmounts; i++) {
		if (src[i].fd >= 0)
			close(src[i].fd);
		if (idmap_fds[i] >= 0)
			close(idmap_fds[i]);
		free(src[i].link);
	}
	free(src);
	free(idmap_fds);
	for (size_t i = 0; i < AB_ARRAY_SIZE(dev_nodes); i++)
		if (devfds[i] >= 0)
			close(devfds[i]);
	return r;
}
