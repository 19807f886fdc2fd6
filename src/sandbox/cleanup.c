/* SPDX-License-Identifier: MIT */
/*
 * Placeholder cleanup (parent, and a watcher process forked by the parent).
 * See include/agentbox/cleanup.h.
 */
#include "cleanup.h"
#include "agentbox/plan.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef __NR_pidfd_open
#define __NR_pidfd_open 434
#endif

/* Wire format, one record per write (each < PIPE_BUF, so atomic):
 *   'P' is_dir(0/1) dev ':' ino ':' path '\0'   a placeholder
 *   'W' pid(decimal) '\0'          the process to outlive
 *   'D' '\0'                       the parent settled (no settle here)    */
#define REC_MAX PIPE_BUF /* one atomic packet */

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
		} else if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			r = ab_fail(err, errno, "fs.protect: placeholder %s", m->dst);
		else if ((r = ab_cleaner_add(c, m->dst, dir, st.st_dev, st.st_ino)) < 0) {
			unlinkat(dfd, name, dir ? AT_REMOVEDIR : 0); /* cannot track it: remove */
			r = ab_fail(err, -r, "fs.protect: too many placeholders (at most %d)",
				    AB_CLEANUP_MAX);
		}
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
				   unsigned long long ino)
{
	_cleanup_close_ int fd =
		openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) ||
	    (unsigned long long)st.st_dev != dev || (unsigned long long)st.st_ino != ino ||
	    st.st_size > 64)
		return false;
	char buf[65];
	ssize_t n = pread(fd, buf, sizeof(buf), 0);
	return n >= 0 && ab_placeholder_content_known(buf, (size_t)n);
}

/* The placeholder name in dfd, removed if it is still the one made. */
static int cleanup_at(int dfd, const char *name, bool is_dir, unsigned long long dev,
		      unsigned long long ino)
{
	struct stat st;
	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : -errno;
	if ((unsigned long long)st.st_dev != dev || (unsigned long long)st.st_ino != ino)
		return -ESTALE; /* not the inode we created: leave it alone */
	if (is_dir && !S_ISDIR(st.st_mode))
		return -ENOTDIR;
	if (!is_dir && (!S_ISREG(st.st_mode) || st.st_size > 64 ||
			!still_placeholder_file(dfd, name, dev, ino)))
		return -EEXIST; /* not a placeholder file any more: leave it */
	return unlinkat(dfd, name, is_dir ? AT_REMOVEDIR : 0) < 0 ? -errno : 0;
}

static int cleanup_cached(parent_cache *pc, const char *path, bool is_dir, unsigned long long dev,
			  unsigned long long ino)
{
	const char *name;
	int dfd = cached_parent(pc, path, &name);
	if (dfd < 0)
		return dfd == -ENOENT ? 0 : dfd;
	return cleanup_at(dfd, name, is_dir, dev, ino);
}

int ab_cleanup_placeholder(const char *path, bool is_dir, unsigned long long dev,
			   unsigned long long ino)
{
	_cleanup_(parent_cache_close) parent_cache pc = {.fd = -1};
	return cleanup_cached(&pc, path, is_dir, dev, ino);
}

static void watcher_main(int rfd, void (*settle)(void *), void *ctx)
{
	static char paths[AB_CLEANUP_MAX][PATH_MAX];
	static bool dirs[AB_CLEANUP_MAX];
	static unsigned long long devs[AB_CLEANUP_MAX], inos[AB_CLEANUP_MAX];
	size_t n = 0;
	pid_t wait_pid = 0;
	char rec[REC_MAX];

	setsid(); /* terminal signals to agentbox's group do not reach us */
	if (chdir("/") < 0)
		_exit(1); /* hold no directory of the user's busy */
	signal(SIGINT, SIG_IGN);
	signal(SIGHUP, SIG_IGN);
	signal(SIGTERM, SIG_IGN);
	signal(SIGQUIT, SIG_IGN);
	for (;;) {
		ssize_t r = read(rfd, rec, sizeof(rec) - 1);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		rec[r] = '\0';
		if (rec[0] == 'P' && r >= 3 && n < AB_CLEANUP_MAX) {
			char *end;
			devs[n] = strtoull(rec + 2, &end, 10);
			if (*end != ':')
				continue;
			inos[n] = strtoull(end + 1, &end, 10);
			if (*end != ':')
				continue;
			size_t len = strnlen(end + 1, PATH_MAX);
			if (len >= PATH_MAX)
				continue;
			dirs[n] = rec[1] == '1';
			memcpy(paths[n], end + 1, len + 1);
			n++;
		} else if (rec[0] == 'W') {
			wait_pid = (pid_t)strtol(rec + 1, NULL, 10);
		} else if (rec[0] == 'D') {
			settle = NULL;
		}
	}
	/* EOF: agentbox finished or died.  Wait for the sandbox to be gone
	 * (it is killed by its parent-death signal), at most a few seconds. */
	if (wait_pid > 0 && (n > 0 || settle)) {
		int pfd = (int)syscall(__NR_pidfd_open, wait_pid, 0);
		if (pfd >= 0) {
			struct pollfd p = {.fd = pfd, .events = POLLIN};
			poll(&p, 1, 5000);
			close(pfd);
		}
	}
	/* deepest first: a placeholder can sit inside another one's parent */
	parent_cache pc = {.fd = -1};
	for (size_t i = n; i-- > 0;)
		cleanup_cached(&pc, paths[i], dirs[i], devs[i], inos[i]);
	parent_cache_close(&pc);
	if (settle && wait_pid > 0) /* the parent died before it settled */
		settle(ctx);
	_exit(0);
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
	if (pipe2(p, O_CLOEXEC | O_DIRECT) < 0) /* packet mode: one record per read */
		return ab_fail(err, errno, "cleanup: pipe");
	pid_t pid = fork();
	if (pid < 0) {
		close(p[0]);
		close(p[1]);
		return ab_fail(err, errno, "cleanup: fork");
	}
	if (pid == 0) {
		close(p[1]);
		/* keep only stdio, our pipe and the workspace lock */
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

static void send_rec(ab_cleaner *c, const char *rec, size_t len)
{
	if (c->pipe_fd < 0)
		return;
	ssize_t r;
	do
		r = write(c->pipe_fd, rec, len);
	while (r < 0 && errno == EINTR);
}

void ab_cleaner_settled(ab_cleaner *c)
{
	send_rec(c, "D", 2);
}

void ab_cleaner_watch_pid(ab_cleaner *c, pid_t pid)
{
	char rec[32];
	int n = snprintf(rec, sizeof(rec), "W%d", (int)pid);
	send_rec(c, rec, (size_t)n + 1);
}

int ab_cleaner_add(ab_cleaner *c, const char *path, bool is_dir, unsigned long long dev,
		   unsigned long long ino)
{
	if (c->n >= AB_CLEANUP_MAX || strlen(path) >= PATH_MAX)
		return -ENOSPC;
	c->paths[c->n] = strdup(path);
	if (!c->paths[c->n])
		return -ENOMEM;
	c->is_dir[c->n] = is_dir;
	c->dev[c->n] = dev;
	c->ino[c->n] = ino;
	c->n++;
	char rec[REC_MAX];
	int n = snprintf(rec, sizeof(rec), "P%c%llu:%llu:%s", is_dir ? '1' : '0', dev, ino, path);
	if (n > 0 && (size_t)n < sizeof(rec))
		send_rec(c, rec, (size_t)n + 1);
	return 0; /* a path too long for one packet is still removed by the parent */
}

void ab_cleaner_remove_now(ab_cleaner *c)
{
	_cleanup_(parent_cache_close) parent_cache pc = {.fd = -1};
	for (size_t i = c->n; i-- > 0;)
		if (c->paths[i] &&
		    cleanup_cached(&pc, c->paths[i], c->is_dir[i], c->dev[i], c->ino[i]) == 0) {
			free(c->paths[i]);
			c->paths[i] = NULL;
		}
}

void ab_cleaner_finish(ab_cleaner *c)
{
	parent_cache pc = {.fd = -1};
	for (size_t i = c->n; i-- > 0;) {
		if (c->paths[i])
			cleanup_cached(&pc, c->paths[i], c->is_dir[i], c->dev[i], c->ino[i]);
		free(c->paths[i]);
		c->paths[i] = NULL;
	}
	parent_cache_close(&pc);
	c->n = 0;
	if (c->pipe_fd >= 0) {
		close(c->pipe_fd);
		c->pipe_fd = -1;
	}
	/* The watcher sees EOF, finds nothing left to remove and exits on its
	 * own; agentbox does not wait for it (it is reaped by whoever adopts it). */
	c->watcher = 0;
}
