/* SPDX-License-Identifier: MIT */
/*
 * Placeholder cleanup (parent, and a watcher process forked by the parent).
 * See include/agentbox/cleanup.h.
 */
#include "cleanup.h"
#include "agentbox/plan.h"
#include "agentbox/sync.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef __NR_pidfd_open
#define __NR_pidfd_open 434
#endif

/* Wire format, one record per message on a SOCK_SEQPACKET socketpair:
 *   'P' is_dir(0/1) dev ':' ino ':' path '\0'   a placeholder
 *   'W' pid(decimal) '\0'          the process to outlive
 *   'D' '\0'                       the parent settled (no settle here)
 *   'H' '\0' + up to HOLD_MAX fds   placeholders the parent removed: keep
 *   'F' '\0'                       the parent removed the placeholders
 *
 * 'H' is why agentbox returns sooner.  At exit the parent opens each
 * placeholder (O_PATH), removes it and hands the fd here: the rmdir/unlink
 * only takes the name, and the inode is freed when the watcher exits, after
 * agentbox returned.  Freeing it is the slow part on a file system that
 * discards freed blocks synchronously (ext4 without a journal, mounted with
 * discard: docs/performance.md).  The names are gone before agentbox
 * returns, so no host tool and no next run sees them.  Nothing holds a
 * placeholder while the sandbox runs: a held dentry would delay the
 * IN_DELETE_SELF the parent watches for (watch.c) until it was let go. */
#define REC_MAX PIPE_BUF
#define HOLD_MAX AB_SEND_FDS_MAX /* fds per 'H' (the kernel takes up to 253) */

static int open_parent(const char *path, char *parent, size_t size, const char **name)
{
	const char *slash = strrchr(path, '/');
	if (!slash || path[0] != '/' || slash[1] == '\0' || (size_t)(slash - path) >= size)
		return -EINVAL;
	size_t plen = slash == path ? 1 : (size_t)(slash - path);
	memcpy(parent, path, plen);
	parent[plen] = '\0';
	*name = slash + 1;
	int dfd = ab_open_nofollow(parent, O_PATH | O_DIRECTORY);
	return dfd < 0 ? -errno : dfd;
}

/* The last parent directory opened: placeholders come in runs under one
 * parent (a writable tree's reserved names), so each run walks the parent's
 * path once, not once per placeholder.  The fd pins the directory opened
 * without following a link; a parent renamed meanwhile is the same
 * directory, and each entry is still checked by its dev and inode. */
typedef struct parent_cache {
	char path[PATH_MAX];
	int fd;
} parent_cache;

static void parent_cache_close(parent_cache *pc)
{
	if (pc->fd >= 0)
		close(pc->fd);
	pc->fd = -1;
	pc->path[0] = '\0';
}

/* The parent of path through the cache (the cache owns the fd). */
static int cached_parent(parent_cache *pc, const char *path, const char **name)
{
	char parent[PATH_MAX];
	const char *slash = strrchr(path, '/');
	if (!slash || path[0] != '/' || slash[1] == '\0' || (size_t)(slash - path) >= PATH_MAX)
		return -EINVAL;
	size_t plen = slash == path ? 1 : (size_t)(slash - path);
	*name = slash + 1;
	if (pc->fd >= 0 && strlen(pc->path) == plen && memcmp(pc->path, path, plen) == 0)
		return pc->fd;
	parent_cache_close(pc);
	int dfd = open_parent(path, parent, sizeof(parent), name);
	if (dfd < 0)
		return dfd;
	memcpy(pc->path, parent, plen + 1);
	pc->fd = dfd;
	return dfd;
}

static int make_dir(int dfd, const char *name)
{
	return mkdirat(dfd, name, 0555) < 0 ? -errno : 0;
}

static int make_file(int dfd, const char *name, const char *content)
{
	int fd = openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0444);
	if (fd < 0)
		return -errno;
	size_t len = content ? strlen(content) : 0;
	ssize_t w = len ? write(fd, content, len) : 0;
	int e = (w < 0 || (size_t)w != len) ? (w < 0 ? errno : EIO) : 0;
	close(fd);
	if (e) {
		unlinkat(dfd, name, 0);
		return -e;
	}
	return 0;
}

static void hand_over(ab_cleaner *c, int *fds, size_t *n);

/* Record the placeholder NAME in DFD just made; one that cannot be tracked
 * is removed again.  (Test ablation "phhold": its fd to the watcher now.) */
static int track_new(ab_cleaner *c, int dfd, const char *name, const char *path, bool dir,
		     bool hold, ab_err *err)
{
	int fd = hold ? openat(dfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC) : -1;
	size_t one = fd >= 0;
	hand_over(c, &fd, &one);
	struct stat st;
	int r = fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0 ? -errno : 0;
	if (r == 0 && (r = ab_cleaner_add(c, path, dir, st.st_dev, st.st_ino, st.st_size)) == 0)
		return 0;
	unlinkat(dfd, name, dir ? AT_REMOVEDIR : 0); /* cannot track it: remove */
	if (r == -ENOSPC)
		return ab_fail(err, ENOSPC, "fs.protect: too many placeholders (at most %d)",
			       AB_CLEANUP_MAX);
	return ab_fail(err, -r, "fs.protect: placeholder %s", path);
}

int ab_placeholders_create(const struct ab_plan *plan, ab_cleaner *c, ab_err *err)
{
	_cleanup_(parent_cache_close) parent_cache pc = {.fd = -1};
	for (size_t i = 0; i < plan->nmounts; i++) {
		const ab_mount *m = &plan->mounts[i];
		if (m->kind != AB_MNT_PLACEHOLDER)
			continue;
		const char *name;
		int dfd = cached_parent(&pc, m->dst, &name);
		if (dfd < 0)
			return ab_fail(err, -dfd, "fs.protect: %s", m->dst);
		struct stat st;
		bool dir = m->flags & AB_MNT_F_DIR;
		int r = dir ? make_dir(dfd, name) : make_file(dfd, name, m->src);
		if (r == -EEXIST)
			r = 1; /* appeared meanwhile: the read-only cover applies to it */
		else if (r < 0) {
			r = ab_fail(err, -r, "fs.protect: create placeholder %s", m->dst);
			if ((r == -EACCES || r == -EPERM) && fstat(dfd, &st) == 0)
				ab_err_hint(err,
					    "an absent protected path is reserved by an empty "
					    "placeholder, made as you (uid %u) in %s, which uid %u "
					    "owns; run agentbox as the user who owns the workspace "
					    "(in a container: that user, --user or USER, not "
					    "container root)",
					    (unsigned)geteuid(), pc.path, (unsigned)st.st_uid);
		} else
			r = track_new(c, dfd, name, m->dst, dir, plan->ph_hold, err);
		if (r < 0)
			return r;
	}
	return 0;
}

/* Whether the file NAME in DFD is still the placeholder agentbox wrote: the
 * same inode, a regular file holding one of the contents agentbox gives a
 * placeholder.  Opened without following a link and without blocking (a FIFO
 * swapped in meanwhile is not read), and checked again through the fd. */
static bool still_placeholder_file(int dfd, const char *name, unsigned long long dev,
				   unsigned long long ino, long long size)
{
	_cleanup_close_ int fd =
		openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) ||
	    (unsigned long long)st.st_dev != dev || (unsigned long long)st.st_ino != ino ||
	    st.st_size > 64 || (size >= 0 && st.st_size != size))
		return false; /* SIZE: as made (a "{}" emptied on the host is the user's) */
	char buf[65];
	ssize_t n = pread(fd, buf, sizeof(buf), 0);
	return n >= 0 && ab_placeholder_content_known(buf, (size_t)n);
}

/* The placeholder name in dfd, removed if it is still the one made.  With
 * HOLD, *hold gets an O_PATH fd of the removed entry: its inode is freed
 * when the last such fd closes, not by the removal. */
static int cleanup_at(int dfd, const char *name, bool is_dir, unsigned long long dev,
		      unsigned long long ino, long long size, int *hold)
{
	struct stat st;
	_cleanup_close_ int fd = -1;
	if (hold)
		fd = openat(dfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (hold ? fd < 0 || fstat(fd, &st) < 0 : fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : -errno;
	if ((unsigned long long)st.st_dev != dev || (unsigned long long)st.st_ino != ino)
		return -ESTALE; /* not the inode we created: leave it alone */
	if (is_dir && !S_ISDIR(st.st_mode))
		return -ENOTDIR;
	if (!is_dir && (!S_ISREG(st.st_mode) || st.st_size > 64 ||
			!still_placeholder_file(dfd, name, dev, ino, size)))
		return -EEXIST; /* not a placeholder file any more: leave it */
	if (unlinkat(dfd, name, is_dir ? AT_REMOVEDIR : 0) < 0)
		return -errno;
	if (hold)
		*hold = TAKE_FD(fd);
	return 0;
}

/* Remove one placeholder if it is still ours: the same inode (dev, ino) as
 * created, still an empty directory (or an empty placeholder file), its
 * parent opened without following any symlink (ab_open_nofollow), so a
 * sandbox that swapped a parent for a link cannot make agentbox delete
 * anything else.  0 if removed or absent, or -errno. */
static int cleanup_cached(parent_cache *pc, const char *path, bool is_dir, unsigned long long dev,
			  unsigned long long ino, long long size, int *hold)
{
	const char *name;
	int dfd = cached_parent(pc, path, &name);
	if (dfd < 0)
		return dfd == -ENOENT ? 0 : dfd;
	return cleanup_at(dfd, name, is_dir, dev, ino, size, hold);
}

/* One record from the parent.  The fds beside it are kept for an 'H'
 * record (until _exit: holding them is all they are for), else closed. */
static ssize_t recv_rec(int sfd, char *rec, size_t size)
{
	struct iovec iov = {.iov_base = rec, .iov_len = size};
	union {
		char buf[CMSG_SPACE(HOLD_MAX * sizeof(int))];
		struct cmsghdr align;
	} u;
	struct msghdr msg = {.msg_iov = &iov,
			     .msg_iovlen = 1,
			     .msg_control = u.buf,
			     .msg_controllen = sizeof(u.buf)};
	ssize_t r;
	do
		r = recvmsg(sfd, &msg, MSG_CMSG_CLOEXEC);
	while (r < 0 && errno == EINTR);
	if (r <= 0 || rec[0] == 'H')
		return r;
	for (struct cmsghdr *cm = CMSG_FIRSTHDR(&msg); cm; cm = CMSG_NXTHDR(&msg, cm)) {
		if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
			continue;
		size_t nfd = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < nfd; i++) {
			int fd;
			memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
			close(fd);
		}
	}
	return r;
}

/* What the watcher learnt; the held fds close when it exits. */
typedef struct watch_list {
	char (*paths)[PATH_MAX];
	bool *dirs;
	unsigned long long *devs, *inos;
	size_t n;
	pid_t wait_pid;
	bool finished; /* 'F': the parent removed them itself */
} watch_list;

/* A 'P' record: path, kind and identity. */
static void learn_placeholder(watch_list *w, const char *rec, size_t r)
{
	char *end;
	size_t len;
	if (r < 3 || w->n >= AB_CLEANUP_MAX)
		return;
	w->devs[w->n] = strtoull(rec + 2, &end, 10);
	if (*end != ':')
		return;
	w->inos[w->n] = strtoull(end + 1, &end, 10);
	if (*end != ':' || (len = strnlen(end + 1, PATH_MAX)) >= PATH_MAX)
		return;
	w->dirs[w->n] = rec[1] == '1';
	memcpy(w->paths[w->n], end + 1, len + 1);
	w->n++;
}

/* agentbox has returned (or died): whoever ran it may be reading our copies
 * of its stdout and stderr to their end (`out=$(agentbox run ...)`), so they
 * go now; stderr stays when a settle may still have to speak. */
static void release_stdio(bool keep_stderr)
{
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	for (int fd = 0; fd <= (keep_stderr ? 1 : 2); fd++)
		if (null < 0 || dup2(null, fd) < 0)
			close(fd);
	if (null > 2)
		close(null);
}

static void watcher_main(int rfd, void (*settle)(void *), void *ctx)
{
	static char paths[AB_CLEANUP_MAX][PATH_MAX];
	static bool dirs[AB_CLEANUP_MAX];
	static unsigned long long devs[AB_CLEANUP_MAX], inos[AB_CLEANUP_MAX];
	watch_list w = {.paths = paths, .dirs = dirs, .devs = devs, .inos = inos};
	char rec[REC_MAX];

	setsid(); /* terminal signals to agentbox's group do not reach us */
	if (chdir("/") < 0)
		_exit(1); /* hold no directory of the user's busy */
	signal(SIGINT, SIG_IGN);
	signal(SIGHUP, SIG_IGN);
	signal(SIGTERM, SIG_IGN);
	signal(SIGQUIT, SIG_IGN);
	for (;;) {
		ssize_t r = recv_rec(rfd, rec, sizeof(rec) - 1);
		if (r <= 0)
			break;
		rec[r] = '\0';
		if (rec[0] == 'P')
			learn_placeholder(&w, rec, (size_t)r);
		else if (rec[0] == 'W')
			w.wait_pid = (pid_t)strtol(rec + 1, NULL, 10);
		else if (rec[0] == 'D')
			settle = NULL;
		else if (rec[0] == 'F')
			w.finished = true;
	}
	release_stdio(settle != NULL);
	/* EOF: agentbox finished or died.  Wait for the sandbox to be gone
	 * (it is killed by its parent-death signal), at most a few seconds;
	 * not when agentbox reaped it and removed the placeholders itself. */
	if (w.wait_pid > 0 && !w.finished && (w.n > 0 || settle)) {
		int pfd = (int)syscall(__NR_pidfd_open, w.wait_pid, 0);
		if (pfd >= 0) {
			struct pollfd p = {.fd = pfd, .events = POLLIN};
			poll(&p, 1, 5000);
			close(pfd);
		}
	}
	/* deepest first: a placeholder can sit inside another one's parent */
	parent_cache pc = {.fd = -1};
	for (size_t i = w.n; i-- > 0;)
		cleanup_cached(&pc, paths[i], dirs[i], devs[i], inos[i], -1, NULL);
	parent_cache_close(&pc);
	if (settle && w.wait_pid > 0) /* the parent died before it settled */
		settle(ctx);
	_exit(0); /* closes the held fds: the removed placeholders are freed here */
}

int ab_cleaner_start(ab_cleaner *c, int keep_fd, int keep_fd2, ab_err *err)
{
	void (*settle)(void *) = c->settle;
	void *ctx = c->settle_ctx;
	memset(c, 0, sizeof(*c));
	c->settle = settle;
	c->settle_ctx = ctx;
	c->pipe_fd = -1;
	int p[2];
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, p) < 0)
		return ab_fail(err, errno, "cleanup: socketpair");
	pid_t pid = fork();
	if (pid < 0) {
		close(p[0]);
		close(p[1]);
		return ab_fail(err, errno, "cleanup: fork");
	}
	if (pid == 0) {
		close(p[1]);
		/* keep only stdio, our socket, the workspace lock and the
		 * inotify instance */
		int keep[3] = {p[0], keep_fd, keep_fd2};
		for (int i = 0; i < 3; i++) /* sort the three */
			for (int j = i + 1; j < 3; j++)
				if (keep[j] < keep[i]) {
					int t = keep[i];
					keep[i] = keep[j];
					keep[j] = t;
				}
		unsigned lo = 3;
		for (int i = 0; i < 3; i++) {
			if (keep[i] < 3 || (unsigned)keep[i] < lo)
				continue;
			if ((unsigned)keep[i] > lo)
				syscall(SYS_close_range, lo, (unsigned)keep[i] - 1, 0);
			lo = (unsigned)keep[i] + 1;
		}
		syscall(SYS_close_range, lo, ~0U, 0);
		watcher_main(p[0], settle, ctx);
	}
	close(p[0]);
	c->pipe_fd = p[1];
	c->watcher = pid;
	return 0;
}

static void send_rec(ab_cleaner *c, const char *rec, size_t len, int pass_fd)
{
	if (c->pipe_fd >= 0)
		(void)ab_send_with_fd(c->pipe_fd, rec, len, pass_fd);
}

/* The removed placeholders' fds to the watcher ('H'), then closed here: if
 * the watcher took them, their inodes are freed when it exits; if not (it
 * is gone), now. */
static void hand_over(ab_cleaner *c, int *fds, size_t *n)
{
	if (*n && c->pipe_fd >= 0)
		(void)ab_send_with_fds(c->pipe_fd, "H", 2, fds, *n);
	for (size_t i = 0; i < *n; i++)
		close(fds[i]);
	*n = 0;
}

void ab_cleaner_settled(ab_cleaner *c)
{
	send_rec(c, "D", 2, -1);
}

void ab_cleaner_watch_pid(ab_cleaner *c, pid_t pid)
{
	char rec[32];
	int n = snprintf(rec, sizeof(rec), "W%d", (int)pid);
	send_rec(c, rec, (size_t)n + 1, -1);
}

int ab_cleaner_add(ab_cleaner *c, const char *path, bool is_dir, unsigned long long dev,
		   unsigned long long ino, long long size)
{
	if (c->n >= AB_CLEANUP_MAX || strlen(path) >= PATH_MAX)
		return -ENOSPC;
	c->paths[c->n] = strdup(path);
	if (!c->paths[c->n])
		return -ENOMEM;
	c->is_dir[c->n] = is_dir;
	c->dev[c->n] = dev;
	c->ino[c->n] = ino;
	c->size[c->n] = size;
	c->n++;
	char rec[REC_MAX];
	int n = snprintf(rec, sizeof(rec), "P%c%llu:%llu:%s", is_dir ? '1' : '0', dev, ino, path);
	if (n > 0 && (size_t)n < sizeof(rec))
		send_rec(c, rec, (size_t)n + 1, -1);
	return 0; /* a path too long for one packet is still removed by the parent */
}

void ab_cleaner_finish(ab_cleaner *c)
{
	parent_cache pc = {.fd = -1};
	int held[HOLD_MAX];
	size_t nheld = 0;
	for (size_t i = c->n; i-- > 0;) {
		int fd = -1;
		if (c->paths[i])
			cleanup_cached(&pc, c->paths[i], c->is_dir[i], c->dev[i], c->ino[i],
				       c->is_dir[i] ? -1 : c->size[i],
				       c->pipe_fd >= 0 ? &fd : NULL);
		if (fd >= 0)
			held[nheld++] = fd;
		if (nheld == HOLD_MAX)
			hand_over(c, held, &nheld);
		free(c->paths[i]);
		c->paths[i] = NULL;
	}
	hand_over(c, held, &nheld);
	parent_cache_close(&pc);
	c->n = 0;
	send_rec(c, "F", 2, -1);
	if (c->pipe_fd >= 0) {
		close(c->pipe_fd);
		c->pipe_fd = -1;
	}
	/* The watcher sees EOF, finds nothing left to remove and exits on its
	 * own, freeing the removed placeholders' inodes (it held them: see the
	 * wire format); agentbox does not wait for it (it is reaped by whoever
	 * adopts it). */
	c->watcher = 0;
}
