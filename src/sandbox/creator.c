/* SPDX-License-Identifier: MIT */
/*
 * The creator (creator.h): a thread of the sandbox's init that carries out
 * the creation calls the supervisor sends it (include/agentbox/mediate.h,
 * docs/nested-git.md).
 *
 * What it is: init's thread, started after Landlock, the capability drop
 * and no_new_privs, so it holds the sandbox's domain, ids and empty
 * capability sets; the seccomp filter is loaded after it started, without
 * TSYNC, so the filter is not its (its own calls would notify the
 * supervisor that waits for it).  It runs only this file's code, on paths
 * the supervisor copied once from the caller: the string the caller's
 * other threads may rewrite meanwhile is never read again.  init is not
 * dumpable and pid 1 of its namespace: nothing inside can trace it, read
 * its memory or kill it.
 *
 * What it does: the call, as the caller asked, with the caller's umask, on
 * its last component in the directory resolved from the caller's own
 * directory fd (or cwd) - except for a new entry named `.git` in a writable
 * grant backed by the host, where the host's git would find a repository
 * that the sandbox controls:
 *
 *   mkdir       the directory is made in the grant's store
 *               (GRANT/.agentbox-git/N) and `.git` becomes a symbolic link
 *               to /.agentbox-git/GRANT/N, a path of the sandbox's
 *               read-only root that the host does not have: inside, git
 *               finds its repository through it; outside, the link leads
 *               nowhere, so host git, an IDE or a prompt see no repository
 *               while the run lasts.  At the end the content is moved back
 *               into place and judged (src/observe/gitnest.c).
 *   open+create the same for a `.git` file (a gitfile).
 *   symlink, link, mknod   refused (EPERM): nothing makes those.
 *   rename      onto `.git`: refused with EXDEV (mv then copies, through
 *               mkdir), unless what moves is such a link already.
 *
 * A caller's own nested Landlock domain (a harness that sandboxes its
 * commands) is not consulted for what is carried out here: agentbox's
 * rules are (docs/nested-git.md says so).
 */
#include "creator.h"

#include "agentbox/mediate.h"
#include "agentbox/sync.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#define MAX_GRANTS 64

typedef struct grant {
	int fd; /* the grant's directory inside (O_PATH) */
	uint64_t mnt_id;
	unsigned index; /* in plan->mounts */
	char dst[PATH_MAX];
} grant;

/* zero-initialized (.bss, not 270 KB of zeros in the binary's .data): sock
 * is valid once started */
static struct {
	bool started;
	int sock;
	char tag[24];
	bool setid_checked;
	grant g[MAX_GRANTS];
	size_t n;
	unsigned next; /* the last store name used */
	ab_med_req rq;
} C;

/* a path resolved for a call on its last component */
typedef struct target {
	int dir;    /* its directory (O_PATH), or -1: act on the whole path */
	int base;   /* the directory the whole path is relative to */
	bool magic; /* /proc/self and kin rewritten: magic links allowed */
	char path[PATH_MAX];
	char parent[PATH_MAX];
	char last[PATH_MAX]; /* as the call needs it (trailing slashes kept) */
	char name[NAME_MAX + 1];
} target;

static target T1, T2;

/* ---------------------------------------------------------- resolution */

static int resolve(int base, const char *path, target *t)
{
	t->dir = -1;
	t->base = base;
	t->name[0] = '\0';
	int rw = ab_med_proc_rewrite(path, C.rq.pid, C.rq.tid, t->path, sizeof(t->path));
	if (rw < 0)
		return -ENAMETOOLONG;
	if (!rw)
		snprintf(t->path, sizeof(t->path), "%s", path);
	t->magic = rw == 1;
	if (t->path[0] != '/' && base < 0)
		return -EPROTO;
	/* the caller's /proc entries only, never init's: no way up from them */
	size_t pl = strlen(t->path);
	if (t->magic && (strstr(t->path, "/../") || (pl >= 3 && !strcmp(t->path + pl - 3, "/.."))))
		return -EACCES;
	const char *last;
	size_t nl;
	if (!ab_med_split(t->path, t->parent, sizeof(t->parent), &last, &nl))
		return 0; /* "", "/", ".", "..": made on the whole path */
	if (nl > NAME_MAX)
		return -ENAMETOOLONG;
	snprintf(t->last, sizeof(t->last), "%s", last);
	memcpy(t->name, last, nl);
	t->name[nl] = '\0';
	struct open_how how = {.flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
			       .resolve = t->magic ? 0 : RESOLVE_NO_MAGICLINKS};
	int fd =
		(int)syscall(SYS_openat2, base < 0 ? AT_FDCWD : base, t->parent, &how, sizeof(how));
	if (fd < 0)
		return -errno;
	/* /proc as this thread sees it is init's view of itself (its own
	 * entries pass checks that stop the caller): only the rewritten paths */
	struct statfs sf;
	if (!t->magic && (fstatfs(fd, &sf) < 0 || sf.f_type == PROC_SUPER_MAGIC)) {
		close(fd);
		return -EACCES;
	}
	t->dir = fd;
	return 0;
}

static void release(target *t)
{
	if (t->dir >= 0)
		close(t->dir);
	t->dir = -1;
}

/* the directory and name a call acts on */
static int dirfd_of(const target *t)
{
	return t->dir >= 0 ? t->dir : t->base < 0 ? AT_FDCWD : t->base;
}

static const char *name_of(const target *t)
{
	return t->dir >= 0 ? t->last : t->path;
}

/* The grant whose store a new `.git` in T's directory goes to, or NULL: T
 * names `.git`, its directory is on a host-backed writable grant's mount,
 * and not inside that grant's store. */
static grant *git_grant(const target *t)
{
	if (t->dir < 0 || !ab_med_git_name(t->name, strlen(t->name)))
		return NULL;
	struct statx x;
	if (statx(t->dir, "", AT_EMPTY_PATH, STATX_MNT_ID, &x) < 0 || !(x.stx_mask & STATX_MNT_ID))
		return NULL;
	grant *g = NULL;
	for (size_t i = 0; i < C.n && !g; i++)
		if (C.g[i].mnt_id == x.stx_mnt_id)
			g = &C.g[i];
	if (!g)
		return NULL;
	char link[64], at[PATH_MAX];
	snprintf(link, sizeof(link), "/proc/self/fd/%d", t->dir);
	ssize_t n = readlink(link, at, sizeof(at) - 1);
	if (n < 0)
		return g;
	at[n] = '\0';
	size_t dl = strlen(g->dst);
	const char *rest = strncmp(at, g->dst, dl) == 0 ? at + dl : NULL;
	if (rest && dl == 1)
		rest--; /* the grant is "/" */
	if (rest && rest[0] == '/' && strncmp(rest + 1, AB_MED_STORE, strlen(AB_MED_STORE)) == 0 &&
	    (rest[1 + strlen(AB_MED_STORE)] == '/' || rest[1 + strlen(AB_MED_STORE)] == '\0'))
		return NULL; /* already inside the store */
	return g;
}

/* Is the entry NAME in DIR a link a redirect made? */
static bool is_redirect_link(int dir, const char *name)
{
	char text[PATH_MAX];
	ssize_t n = readlinkat(dir, name, text, sizeof(text) - 1);
	if (n < 0)
		return false;
	text[n] = '\0';
	return ab_med_is_redirect(text);
}

/* --------------------------------------------------------------- store */

/* G's store, opened (O_PATH); -errno */
static int store_of(const grant *g)
{
	bool made = mkdirat(g->fd, AB_MED_STORE, 0700) == 0;
	if (!made && errno != EEXIST)
		return -errno;
	int fd = openat(g->fd, AB_MED_STORE, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (made) {
		/* the host's `git status` above it lists none of it meanwhile */
		int gi = openat(fd, ".gitignore", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
		if (gi >= 0) {
			(void)!write(gi, "*\n", 2);
			close(gi);
		}
	}
	return fd;
}

/* The link a redirected entry N of G gets, in T's directory: 0 or -errno
 * (then the caller removes N). */
static int link_in_place(const grant *g, const char *n, const target *t)
{
	char text[PATH_MAX];
	snprintf(text, sizeof(text), AB_MED_LINK_ROOT "/%u/%s", g->index, n);
	return symlinkat(text, t->dir, t->name) < 0 ? -errno : 0;
}

static int redirect_mkdir(const grant *g, const target *t, mode_t mode)
{
	_cleanup_close_ int store = store_of(g);
	if (store < 0)
		return store;
	char n[48];
	for (int tries = 0; tries < 64; tries++) {
		snprintf(n, sizeof(n), "%s.%u", C.tag, ++C.next);
		if (mkdirat(store, n, mode) == 0) {
			int r = link_in_place(g, n, t);
			if (r < 0)
				unlinkat(store, n, AT_REMOVEDIR);
			return r;
		}
		if (errno != EEXIST)
			return -errno;
	}
	return -EEXIST;
}

static int open_at(int dir, const char *name, uint32_t flags, mode_t mode, bool magic);

static int redirect_open(const grant *g, const target *t, uint32_t flags, mode_t mode)
{
	_cleanup_close_ int store = store_of(g);
	if (store < 0)
		return store;
	char n[48];
	for (int tries = 0; tries < 64; tries++) {
		snprintf(n, sizeof(n), "%s.%u", C.tag, ++C.next);
		int fd = open_at(store, n, flags | O_EXCL, mode, false);
		if (fd == -EEXIST)
			continue;
		if (fd < 0)
			return fd;
		int r = link_in_place(g, n, t);
		if (r == 0)
			return fd;
		unlinkat(store, n, 0);
		close(fd);
		/* made meanwhile by someone else: open that one, as the kernel would */
		return r == -EEXIST ? open_at(t->dir, t->last, flags, mode, t->magic) : r;
	}
	return -EEXIST;
}

/* The grant T's directory is in, and that directory's path relative to the
 * grant's top ("" or "/A/B") in AT (PATH_MAX + NAME_MAX + 2 bytes, with
 * WITH_NAME T's own name added); NULL when T is not in a grant, or is in a
 * store. */
static grant *where(const target *t, bool with_name, char *at, char **rel)
{
	struct statx x;
	if (t->dir < 0 || statx(t->dir, "", AT_EMPTY_PATH, STATX_MNT_ID, &x) < 0)
		return NULL;
	grant *g = NULL;
	for (size_t i = 0; i < C.n && !g; i++)
		if (C.g[i].mnt_id == x.stx_mnt_id)
			g = &C.g[i];
	char link[64];
	snprintf(link, sizeof(link), "/proc/self/fd/%d", t->dir);
	ssize_t n = g ? readlink(link, at, PATH_MAX) : -1;
	if (n <= 0)
		return NULL;
	at[n] = '\0';
	size_t dl = strcmp(g->dst, "/") == 0 ? 0 : strlen(g->dst);
	if (strncmp(at, g->dst, dl) != 0 || (at[dl] != '/' && at[dl] != '\0'))
		return NULL;
	if (with_name && t->name[0])
		snprintf(at + n, PATH_MAX + NAME_MAX + 2 - (size_t)n, "%s%s", n > 1 ? "/" : "",
			 t->name);
	*rel = at + dl;
	if (strncmp(*rel, "/" AB_MED_STORE, strlen(AB_MED_STORE) + 1) == 0 &&
	    ((*rel)[strlen(AB_MED_STORE) + 1] == '/' || !(*rel)[strlen(AB_MED_STORE) + 1]))
		return NULL;
	return g;
}

/* The entry REL ("/A/B/NAME", below G's top; taken apart) moved to G's store
 * and a link in its place, as if the run had made it.  0 when there is
 * nothing to move (gone, or a link already), -EACCES when it cannot be
 * moved (the caller's call is then refused: fail closed). */
static int move_off(grant *g, char *rel, uint32_t *what)
{
	char *slash = strrchr(rel, '/');
	if (!slash || slash == rel + strlen(rel) - 1)
		return 0;
	char name[NAME_MAX + 1];
	snprintf(name, sizeof(name), "%s", slash + 1);
	*slash = '\0';
	struct open_how how = {.flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
			       .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
					  RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV};
	_cleanup_close_ int pfd =
		(int)syscall(SYS_openat2, g->fd, rel[0] ? rel + 1 : ".", &how, sizeof(how));
	struct stat st;
	if (pfd < 0 || fstatat(pfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
	    !(S_ISDIR(st.st_mode) || S_ISREG(st.st_mode)))
		return 0; /* gone, or a link (a redirect's, or refused when made) */
	_cleanup_close_ int store = store_of(g);
	if (store < 0)
		return -EACCES;
	char sn[48];
	for (int tries = 0;; tries++) {
		snprintf(sn, sizeof(sn), "%s.%u", C.tag, ++C.next);
		if (renameat2(pfd, name, store, sn, RENAME_NOREPLACE) == 0)
			break;
		if (errno != EEXIST || tries == 63)
			return -EACCES;
	}
	target in = {.dir = pfd};
	snprintf(in.name, sizeof(in.name), "%s", name);
	if (link_in_place(g, sn, &in) < 0) {
		(void)renameat2(store, sn, pfd, name, RENAME_NOREPLACE);
		return -EACCES;
	}
	*what |= AB_MED_EVACUATED;
	return 0;
}

/* A write in (or onto) a nested repository the host already had: its .git
 * (a real directory, or with WITH_NAME T itself when T is a .git file) goes
 * to the grant's store first (move_off).  The grant's own .git (its
 * protected paths are mounts) and what is already in a store are left as
 * they are.  0 or -EACCES. */
static int evacuate_around(const target *t, bool with_name, uint32_t *what)
{
	char at[PATH_MAX + NAME_MAX + 2], *rel;
	grant *g = where(t, with_name, at, &rel);
	if (!g)
		return 0;
	/* the first .git below the grant's top, with a directory before it */
	char *git = NULL;
	for (char *c = rel; *c == '/' && !git;) {
		char *e = strchr(c + 1, '/');
		size_t len = e ? (size_t)(e - c - 1) : strlen(c + 1);
		if (ab_med_git_name(c + 1, len) && c != rel)
			git = c;
		c = e ? e : c + 1 + len;
	}
	if (!git)
		return 0;
	char *end = strchr(git + 1, '/');
	if (end)
		*end = '\0';
	return move_off(g, rel, what);
}

/* Is DIR shaped like a git directory: HEAD, and objects and refs or a
 * commondir (git takes such a directory for a bare repository when a
 * prompt or a command runs in it)? */
static bool git_shaped(int dir)
{
	struct stat st;
	if (fstatat(dir, "HEAD", &st, AT_SYMLINK_NOFOLLOW) < 0)
		return false;
	if (fstatat(dir, "commondir", &st, AT_SYMLINK_NOFOLLOW) == 0)
		return true;
	return fstatat(dir, "objects", &st, 0) == 0 && S_ISDIR(st.st_mode) &&
	       fstatat(dir, "refs", &st, 0) == 0 && S_ISDIR(st.st_mode);
}

static bool one_of(const char *name, const char *const *names)
{
	for (; *names; names++)
		if (strcmp(name, *names) == 0)
			return true;
	return false;
}

/* A directory below a grant's top (not a .git, which has its own rules)
 * that is, or with T's entry becomes, shaped like a git directory: moved
 * off the host (move_off) before a write that could arm it (its config,
 * commondir, a hook) and after a call that completed its shape (HEAD,
 * objects, refs, commondir made).  AFTER: the call is done.  0 or -EACCES. */
static int bare_around(const target *t, bool after, uint32_t *what)
{
	static const char *const shape[] = {"HEAD", "objects", "refs", "commondir", NULL};
	static const char *const arms[] = {"config", "config.worktree", "commondir", NULL};
	if (t->dir < 0 || !t->name[0])
		return 0;
	bool hook = false;
	if (after ? !one_of(t->name, shape) : !one_of(t->name, arms)) {
		/* a hook: T in DIR/hooks, DIR shaped (its HEAD first: one call) */
		char at[PATH_MAX + NAME_MAX + 2], *rel;
		struct stat hs;
		if (after || fstatat(t->dir, "../HEAD", &hs, AT_SYMLINK_NOFOLLOW) < 0 ||
		    !where(t, false, at, &rel))
			return 0;
		char *b = strrchr(rel, '/');
		if (!b || strcmp(b, "/hooks") != 0)
			return 0;
		hook = true;
	}
	_cleanup_close_ int up = hook ? openat(t->dir, "..", O_PATH | O_DIRECTORY | O_CLOEXEC) : -1;
	int dir = hook ? up : t->dir;
	if (dir < 0 || !git_shaped(dir))
		return 0;
	target d = {.dir = dir};
	char at[PATH_MAX + NAME_MAX + 2], *rel;
	grant *g = where(&d, false, at, &rel);
	const char *base = g ? strrchr(rel, '/') : NULL;
	if (!g || !base || !base[1] || ab_med_git_name(base + 1, strlen(base + 1)))
		return 0;            /* the grant's top, or a .git */
	for (char *c = rel; *c; c++) /* inside a .git: that .git's rules */
		if (*c == '/' && ab_med_git_name(c + 1, strcspn(c + 1, "/")))
			return 0;
	return move_off(g, rel, what);
}

static bool writes(uint32_t flags)
{
	return (flags & (O_CREAT | O_TRUNC)) || (flags & O_ACCMODE) != O_RDONLY;
}

/* ----------------------------------------------------------------- calls */

#define OPEN_KNOWN                                                                             \
	(O_ACCMODE | O_CREAT | O_EXCL | O_NOCTTY | O_TRUNC | O_APPEND | O_NONBLOCK | O_DSYNC | \
	 O_SYNC | FASYNC | O_DIRECT | O_LARGEFILE | O_DIRECTORY | O_NOFOLLOW | O_NOATIME |     \
	 O_CLOEXEC | O_PATH | O_TMPFILE)

/* The open as asked: never blocking here (a FIFO without its other end
 * answers ENXIO: defer_open then waits in a thread of its own), never init's
 * controlling terminal, and the fd's file flags as asked once it is open. */
static int open_at(int dir, const char *name, uint32_t flags, mode_t mode, bool magic)
{
	uint32_t f = (flags & OPEN_KNOWN) | O_CLOEXEC | O_NOCTTY | O_NONBLOCK;
	struct open_how how = {
		.flags = f,
		.mode = (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE ? mode & 07777 : 0,
		.resolve = magic ? 0 : RESOLVE_NO_MAGICLINKS};
	int fd = (int)syscall(SYS_openat2, dir, name, &how, sizeof(how));
	if (fd < 0)
		return -errno;
	if (!(flags & O_NONBLOCK) && !(flags & O_PATH)) {
		int fl = fcntl(fd, F_GETFL);
		if (fl >= 0)
			(void)fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
	}
	return fd;
}

static bool setid_refused(mode_t mode)
{
	return C.setid_checked && (mode & (S_ISUID | S_ISGID));
}

/* An open of a FIFO that waits for its other end, in a thread of its own:
 * the answer goes on SOCK, whose other end went to the supervisor with the
 * first answer (AB_MED_DEFERRED). */
typedef struct deferred {
	int dir, sock;
	uint32_t flags;
	mode_t mode;
	bool magic;
	char name[PATH_MAX];
} deferred;

#define DEFERRED_MAX 64
static int ndeferred; /* atomic */

static void send_resp_on(int sock, const ab_med_resp *rs, int fd);

static void *wait_open(void *arg)
{
	deferred *d = arg;
	uint32_t f = ((d->flags & OPEN_KNOWN) & ~(uint32_t)O_NONBLOCK) | O_CLOEXEC | O_NOCTTY;
	struct open_how how = {.flags = f,
			       .mode = (d->flags & O_CREAT) ? d->mode & 07777 : 0,
			       .resolve = d->magic ? 0 : RESOLVE_NO_MAGICLINKS};
	int fd = (int)syscall(SYS_openat2, d->dir, d->name, &how, sizeof(how));
	ab_med_resp rs = {.ret = fd < 0 ? -errno : 0};
	send_resp_on(d->sock, &rs, fd);
	if (fd >= 0)
		close(fd);
	close(d->sock);
	if (d->dir >= 0)
		close(d->dir);
	free(d);
	__atomic_sub_fetch(&ndeferred, 1, __ATOMIC_RELAXED);
	return NULL;
}

/* The open of T that found a FIFO without its other end (ENXIO): left to a
 * thread that waits, as the kernel would have; *OUT the supervisor's end of
 * the socket its answer comes on.  -ENXIO when it cannot be. */
static int defer_open(const target *t, uint32_t flags, mode_t mode, int *out, uint32_t *what)
{
	struct stat st;
	if ((flags & O_NONBLOCK) || fstatat(dirfd_of(t), name_of(t), &st, 0) < 0 ||
	    !S_ISFIFO(st.st_mode))
		return -ENXIO; /* a socket, a device without its driver: as the kernel says */
	if (__atomic_add_fetch(&ndeferred, 1, __ATOMIC_RELAXED) > DEFERRED_MAX) {
		__atomic_sub_fetch(&ndeferred, 1, __ATOMIC_RELAXED);
		return -ENXIO;
	}
	deferred *d = calloc(1, sizeof(*d));
	int sv[2] = {-1, -1};
	if (d)
		d->dir = -1;
	if (!d || socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		goto fail;
	d->dir = dirfd_of(t) == AT_FDCWD ? AT_FDCWD : fcntl(dirfd_of(t), F_DUPFD_CLOEXEC, 0);
	d->sock = sv[1];
	d->flags = flags;
	d->mode = mode;
	d->magic = t->magic;
	snprintf(d->name, sizeof(d->name), "%s", name_of(t));
	pthread_t th;
	pthread_attr_t at;
	pthread_attr_init(&at);
	pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
	int r = d->dir == -1 ? EBADF : pthread_create(&th, &at, wait_open, d);
	pthread_attr_destroy(&at);
	if (r != 0)
		goto fail;
	*out = sv[0];
	*what |= AB_MED_DEFERRED;
	return 0;
fail:
	if (d && d->dir >= 0)
		close(d->dir);
	for (int i = 0; i < 2; i++)
		if (sv[i] >= 0)
			close(sv[i]);
	free(d);
	__atomic_sub_fetch(&ndeferred, 1, __ATOMIC_RELAXED);
	return -ENXIO;
}

/* /dev/tty is the opener's controlling terminal: the caller's (from its
 * stat file, field 7), never this thread's (init has none: it left
 * agentbox's session).  Only a pty of the sandbox's devpts can be one. */
static int open_ctty(const ab_med_req *rq, int *out)
{
	char p[64], buf[1024];
	snprintf(p, sizeof(p), "/proc/%d/stat", (int)rq->pid);
	ssize_t n = rq->pid > 0 ? ab_read_small(p, buf, sizeof(buf)) : -1;
	const char *c = n > 0 ? strrchr(buf, ')') : NULL;
	unsigned long tty = 0;
	/* ") S ppid pgrp session tty_nr" */
	if (!c || sscanf(c + 1, " %*c %*d %*d %*d %lu", &tty) != 1 || tty == 0)
		return -ENXIO;
	unsigned maj = (unsigned)((tty >> 8) & 0xfff);
	unsigned min = (unsigned)((tty & 0xff) | ((tty >> 12) & 0xfff00));
	if (maj < 136 || maj > 143)
		return -ENXIO; /* UNIX98 pty slaves: the sandbox has no other tty */
	char pts[64];
	snprintf(pts, sizeof(pts), "/dev/pts/%u", (maj - 136) * 256 + min);
	int fd = open_at(AT_FDCWD, pts, rq->flags & ~(uint32_t)(O_CREAT | O_EXCL | O_TRUNC), 0,
			 false);
	struct stat st;
	if (fd >= 0 &&
	    (fstat(fd, &st) < 0 || !S_ISCHR(st.st_mode) || st.st_rdev != makedev(maj, min))) {
		close(fd);
		fd = -ENXIO;
	}
	*out = fd;
	return fd < 0 ? fd : 0;
}

static int do_open(const ab_med_req *rq, int *out, uint32_t *what)
{
	mode_t mode = rq->mode;
	if (((rq->flags & O_CREAT) || (rq->flags & O_TMPFILE) == O_TMPFILE) && setid_refused(mode))
		return -EPERM;
	const grant *g = git_grant(&T1);
	struct stat st;
	if (g && fstatat(T1.dir, T1.name, &st, AT_SYMLINK_NOFOLLOW) < 0 && errno == ENOENT &&
	    (rq->flags & O_CREAT)) {
		*what |= AB_MED_REDIRECTED;
		*out = redirect_open(g, &T1, rq->flags, mode);
		return *out < 0 ? *out : 0;
	}
	struct stat ts;
	if (fstatat(dirfd_of(&T1), name_of(&T1), &ts, 0) == 0 && S_ISCHR(ts.st_mode) &&
	    ts.st_rdev == makedev(5, 0))
		return open_ctty(rq, out);
	*out = open_at(dirfd_of(&T1), name_of(&T1), rq->flags, mode, T1.magic);
	if (*out == -ENXIO)
		return defer_open(&T1, rq->flags, mode, out, what);
	return *out < 0 ? *out : 0;
}

static int do_mkdir(const ab_med_req *rq, uint32_t *what)
{
	if (setid_refused(rq->mode))
		return -EPERM;
	const grant *g = git_grant(&T1);
	if (g) {
		*what |= AB_MED_REDIRECTED;
		return redirect_mkdir(g, &T1, rq->mode);
	}
	return mkdirat(dirfd_of(&T1), name_of(&T1), rq->mode) < 0 ? -errno : 0;
}

static int do_mknod(const ab_med_req *rq, uint32_t *what)
{
	if (setid_refused(rq->mode))
		return -EPERM;
	if (git_grant(&T1)) {
		*what = AB_MED_REFUSED;
		return -EPERM;
	}
	return mknodat(dirfd_of(&T1), name_of(&T1), rq->mode, (dev_t)rq->dev) < 0 ? -errno : 0;
}

static int do_symlink(const char *text, uint32_t *what)
{
	if (git_grant(&T1)) {
		*what = AB_MED_REFUSED;
		return -EPERM;
	}
	return symlinkat(text, dirfd_of(&T1), name_of(&T1)) < 0 ? -errno : 0;
}

static int do_link(const ab_med_req *rq, int fd2, const char *old, uint32_t *what)
{
	if (git_grant(&T1)) {
		*what = AB_MED_REFUSED;
		return -EPERM;
	}
	if ((rq->flags & AT_EMPTY_PATH) && !old[0])
		return linkat(fd2, "", dirfd_of(&T1), name_of(&T1), AT_EMPTY_PATH) < 0 ? -errno : 0;
	int r = resolve(fd2, old, &T2);
	if (r < 0)
		return r;
	return linkat(dirfd_of(&T2), name_of(&T2), dirfd_of(&T1), name_of(&T1),
		      (int)(rq->flags & AT_SYMLINK_FOLLOW)) < 0
		       ? -errno
		       : 0;
}

static int do_rename(const ab_med_req *rq, int fd2, const char *old, uint32_t *what)
{
	int r = resolve(fd2, old, &T2);
	if (r < 0)
		return r;
	/* onto a new `.git`: only a redirect's link may move there; the same
	 * for what an exchange moves onto an old `.git` */
	bool onto = git_grant(&T1) && !(T2.dir >= 0 && is_redirect_link(T2.dir, T2.name));
	bool back = (rq->flags & RENAME_EXCHANGE) && git_grant(&T2) &&
		    !(T1.dir >= 0 && is_redirect_link(T1.dir, T1.name));
	if (onto || back) {
		*what = AB_MED_REFUSED;
		return -EXDEV;
	}
	return renameat2(dirfd_of(&T2), name_of(&T2), dirfd_of(&T1), name_of(&T1), rq->flags) < 0
		       ? -errno
		       : 0;
}

/* One request: its reply, *OUT an fd to send with it (or -1). */
static void serve(const ab_med_req *rq, const int *fds, ab_med_resp *rs, int *out)
{
	const char *p1 = rq->paths, *p2 = rq->paths + rq->len1 + 1;
	int fd1 = (rq->fds & AB_MED_FD1) ? fds[0] : -1;
	int fd2 = (rq->fds & AB_MED_FD2) ? fds[(rq->fds & AB_MED_FD1) ? 1 : 0] : -1;
	*out = -1;
	umask((mode_t)(rq->umask & 0777));
	int r = resolve(fd1, p1, &T1);
	/* a repository the host has, about to be written: off the host first */
	bool w = rq->op != AB_MED_OPEN || writes(rq->flags);
	if (r == 0 && w && (r = evacuate_around(&T1, rq->op == AB_MED_OPEN, &rs->what)) == 0)
		r = bare_around(&T1, false, &rs->what);
	if (r == 0) {
		switch (rq->op) {
		case AB_MED_OPEN: r = do_open(rq, out, &rs->what); break;
		case AB_MED_MKDIR: r = do_mkdir(rq, &rs->what); break;
		case AB_MED_MKNOD: r = do_mknod(rq, &rs->what); break;
		case AB_MED_SYMLINK: r = do_symlink(p2, &rs->what); break;
		case AB_MED_LINK: r = do_link(rq, fd2, p2, &rs->what); break;
		case AB_MED_RENAME: r = do_rename(rq, fd2, p2, &rs->what); break;
		default: r = -EPROTO;
		}
	}
	/* ... or one this call gave a git directory's shape */
	if (r >= 0 && w)
		(void)bare_around(&T1, true, &rs->what);
	release(&T1);
	release(&T2);
	if (r < 0 && *out >= 0) {
		close(*out);
		*out = -1;
	}
	rs->ret = r;
}

/* ------------------------------------------------------------- the wire */

static ssize_t recv_req(int *fds, size_t *nfds)
{
	union {
		char buf[CMSG_SPACE(2 * sizeof(int))];
		struct cmsghdr align;
	} u;
	struct iovec iov = {.iov_base = &C.rq, .iov_len = sizeof(C.rq)};
	struct msghdr msg = {.msg_iov = &iov,
			     .msg_iovlen = 1,
			     .msg_control = u.buf,
			     .msg_controllen = sizeof(u.buf)};
	ssize_t n;
	do
		n = recvmsg(C.sock, &msg, MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	*nfds = 0;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); n > 0 && c; c = CMSG_NXTHDR(&msg, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < k; i++) {
			int fd;
			memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
			if (*nfds < 2)
				fds[(*nfds)++] = fd;
			else
				close(fd);
		}
	}
	return n;
}

static void send_resp(const ab_med_resp *rs, int fd)
{
	send_resp_on(C.sock, rs, fd);
}

static void send_resp_on(int sock, const ab_med_resp *rs, int fd)
{
	(void)ab_send_with_fd(sock, rs, sizeof(*rs), fd);
}

/* Is the request whole: both paths NUL-terminated where it says, the fds it
 * says it carries? */
static bool well_formed(ssize_t n, size_t nfds)
{
	const ab_med_req *rq = &C.rq;
	size_t want = (size_t) !!(rq->fds & AB_MED_FD1) + (size_t) !!(rq->fds & AB_MED_FD2);
	return n == (ssize_t)sizeof(*rq) && rq->len1 < PATH_MAX && rq->len2 < PATH_MAX &&
	       rq->paths[rq->len1] == '\0' && rq->paths[rq->len1 + 1 + rq->len2] == '\0' &&
	       strlen(rq->paths) == rq->len1 && nfds == want;
}

static void *creator_main(void *arg)
{
	(void)arg;
	sigset_t all;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, NULL);
	/* its own umask (set per call), not init's */
	(void)unshare(CLONE_FS);
	for (;;) {
		int fds[2] = {-1, -1};
		size_t nfds = 0;
		ssize_t n = recv_req(fds, &nfds);
		if (n == 0 || (n < 0 && errno != EINTR))
			break; /* the parent is gone */
		ab_med_resp rs = {0};
		int out = -1;
		if (well_formed(n, nfds))
			serve(&C.rq, fds, &rs, &out);
		else
			rs.ret = -EPROTO;
		send_resp(&rs, out);
		for (size_t i = 0; i < nfds; i++)
			close(fds[i]);
		if (out >= 0)
			close(out);
	}
	return NULL;
}

/* ------------------------------------------------------------- start */

static int add_grant(const ab_plan *plan, size_t i, ab_err *err)
{
	const ab_mount *m = &plan->mounts[i];
	if (C.n >= MAX_GRANTS)
		return ab_fail(err, E2BIG, "nested git: more than %d writable grants", MAX_GRANTS);
	grant *g = &C.g[C.n];
	g->fd = open(m->dst, O_PATH | O_DIRECTORY | O_CLOEXEC);
	struct statx x;
	if (g->fd < 0 || statx(g->fd, "", AT_EMPTY_PATH, STATX_MNT_ID, &x) < 0)
		return ab_fail(err, errno, "nested git: %s", m->dst);
	if (!(x.stx_mask & STATX_MNT_ID))
		return ab_fail(err, ENOSYS, "nested git: the kernel does not tell mount ids");
	g->mnt_id = x.stx_mnt_id;
	g->index = (unsigned)i;
	snprintf(g->dst, sizeof(g->dst), "%s", m->dst);
	C.n++;
	return 0;
}

int ab_creator_start(const ab_plan *plan, int *parent_end, ab_err *err)
{
	C.setid_checked = !plan->seccomp.setid_unchecked;
	snprintf(C.tag, sizeof(C.tag), "%s", plan->git_tag);
	for (size_t i = 0; i < plan->nmounts; i++) {
		int r = ab_plan_git_grant(&plan->mounts[i]) ? add_grant(plan, i, err) : 0;
		if (r < 0)
			return r;
	}
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		return ab_fail(err, errno, "nested git: socketpair");
	C.sock = sv[1];
	C.started = true;
	pthread_t th;
	pthread_attr_t at;
	pthread_attr_init(&at);
	pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
	int r = pthread_create(&th, &at, creator_main, NULL);
	pthread_attr_destroy(&at);
	if (r != 0) {
		close(sv[0]);
		return ab_fail(err, r, "nested git: start the creator");
	}
	*parent_end = sv[0];
	return 0;
}

size_t ab_creator_fds(int *out, size_t max)
{
	size_t k = 0;
	if (C.started && k < max)
		out[k++] = C.sock;
	for (size_t i = 0; i < C.n && k < max; i++)
		out[k++] = C.g[i].fd;
	return k;
}
