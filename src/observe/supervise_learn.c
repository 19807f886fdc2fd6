/* SPDX-License-Identifier: MIT */
/*
 * The learning record (parent: the supervisor's thread), with notify_learn:
 * `run --learn` (docs/learn.md).
 *
 * open, openat, creat, mkdir and mkdirat notify, and so do execve and
 * execveat.  The path is read from the caller's memory, made absolute
 * against its cwd or directory fd (as a path inside, which is the host's
 * path for a bind), and kept in the record when the draft would do anything
 * with it (ab_learn_matters); then the call continues.  Nothing is decided
 * here: the record only ever adds to a draft the user reviews.  The caller
 * can change the string after it was read, so the record can be lied to by
 * the program it records - one more reason a draft is never an authority.
 *
 * The set-user-ID mode rules (src/kernel/seccomp_filter.c) lose to this
 * file's notification in the filter, so they are applied here: a mode with
 * S_ISUID or S_ISGID is refused with EPERM, as the filter would.
 */
#include "supervise_int.h"

#include "agentbox/learn.h"

#include <errno.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

typedef struct learn_call {
	int nr;
	int dfd;   /* argument holding the directory fd, -1: AT_FDCWD */
	int path;  /* argument holding the path */
	int flags; /* argument holding open flags, -1: a write (creat, mkdir) */
	int mode;  /* argument holding the mode */
} learn_call;

// clang-format off
static const learn_call calls[] = {
#ifdef SYS_open
	{SYS_open, -1, 0, 1, 2},
#endif
	{SYS_openat, 0, 1, 2, 3},
#ifdef SYS_creat
	{SYS_creat, -1, 0, -1, 1},
#endif
#ifdef SYS_mkdir
	{SYS_mkdir, -1, 0, -1, 1},
#endif
	{SYS_mkdirat, 0, 1, -1, 2},
};
// clang-format on

static void prog_of(pid_t tid, char *out, size_t size);

#define LEARN_PORTS 1024

void ab_supervisor_learn(ab_supervisor *s, ab_learn_set *set)
{
	if (!s->learn_ports) {
		s->learn_ports = calloc(LEARN_PORTS, sizeof(*s->learn_ports));
		if (!s->learn_ports)
			return; /* then the destinations go unnamed */
		pthread_mutex_init(&s->learn_mu, NULL);
	}
	s->learn = set;
}

void sup_learn_connected(ab_supervisor *s, pid_t tid, int sock, const struct sockaddr *addr)
{
	struct sockaddr_storage me;
	socklen_t ml = sizeof(me);
	if (!s->learn_ports || !addr || getsockname(sock, (struct sockaddr *)&me, &ml) < 0)
		return;
	uint16_t port = 0;
	if (addr->sa_family == AF_INET && me.ss_family == AF_INET &&
	    ntohl(((const struct sockaddr_in *)addr)->sin_addr.s_addr) >> 24 == 127)
		port = ntohs(((struct sockaddr_in *)&me)->sin_port);
	else if (addr->sa_family == AF_INET6 && me.ss_family == AF_INET6 &&
		 IN6_IS_ADDR_LOOPBACK(&((const struct sockaddr_in6 *)addr)->sin6_addr))
		port = ntohs(((struct sockaddr_in6 *)&me)->sin6_port);
	if (!port)
		return;
	char prog[AB_LEARN_PROG_MAX];
	prog_of(tid, prog, sizeof(prog));
	pthread_mutex_lock(&s->learn_mu);
	struct learn_port *e = &s->learn_ports[s->learn_next++ % LEARN_PORTS];
	e->port = port;
	snprintf(e->prog, sizeof(e->prog), "%s", prog);
	pthread_mutex_unlock(&s->learn_mu);
}

bool ab_supervisor_learn_port(ab_supervisor *s, uint16_t port, char *out, size_t size)
{
	bool found = false;
	if (!s || !s->learn_ports)
		return false;
	pthread_mutex_lock(&s->learn_mu);
	/* newest first: a port is reused after its connection closed */
	for (size_t i = 0; i < LEARN_PORTS && i < s->learn_next && !found; i++) {
		const struct learn_port *e = &s->learn_ports[(s->learn_next - 1 - i) % LEARN_PORTS];
		if (e->port == port) {
			snprintf(out, size, "%s", e->prog);
			found = true;
		}
	}
	pthread_mutex_unlock(&s->learn_mu);
	return found;
}

/* The program behind TID, as a path inside (its exe), else its comm. */
static void prog_of(pid_t tid, char *out, size_t size)
{
	char link[64];
	snprintf(link, sizeof(link), "/proc/%d/exe", (int)tid);
	ssize_t n = readlink(link, out, size - 1);
	if (n > 0) {
		out[n] = '\0';
		return;
	}
	sup_proc_comm(tid, out, size);
}

/* Does PATH (absolute, inside) exist in TID's view?  Looked up under its
 * root, so a link inside cannot lead the lookup to the host's files. */
static bool inside_exists(pid_t tid, const char *path)
{
	char link[64];
	snprintf(link, sizeof(link), "/proc/%d/root", (int)tid);
	_cleanup_close_ int root = open(link, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (root < 0)
		return false;
	struct open_how how = {.flags = O_PATH | O_CLOEXEC,
			       .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS};
	int fd = (int)syscall(SYS_openat2, root, path[1] ? path + 1 : ".", &how, sizeof(how));
	if (fd < 0)
		return false;
	close(fd);
	return true;
}

/* What the call will meet inside, decided before it runs: a file read or
 * run that is there is no news; a new file whose directory is missing
 * inside is a CREATE (the draft may grant the host's directory). */
static bool refine(pid_t tid, const char *norm, enum ab_learn_kind *kind)
{
	if (inside_exists(tid, norm))
		return *kind == AB_LEARN_WRITE; /* a read-only file to write: EROFS */
	if (*kind != AB_LEARN_WRITE)
		return true;
	char parent[PATH_MAX];
	snprintf(parent, sizeof(parent), "%s", norm);
	char *slash = strrchr(parent, '/');
	if (slash && slash != parent) {
		*slash = '\0';
		if (!inside_exists(tid, parent))
			*kind = AB_LEARN_CREATE;
	}
	return true;
}

static void record(ab_supervisor *s, pid_t tid, enum ab_learn_kind kind, int dfd, const char *raw)
{
	char base[PATH_MAX], norm[PATH_MAX], prog[AB_LEARN_PROG_MAX];
	if (!raw[0] || sup_caller_base(tid, raw, dfd, base, sizeof(base)) < 0 ||
	    ab_sup_path_norm(base[0] ? base : NULL, raw, norm, sizeof(norm)) < 0)
		return;
	/* the cheap test first (no lookup inside), then the refined one */
	bool maybe = ab_learn_matters(s->plan, kind, norm, ab_learn_real_stat, NULL) ||
		     (kind == AB_LEARN_WRITE &&
		      ab_learn_matters(s->plan, AB_LEARN_CREATE, norm, ab_learn_real_stat, NULL));
	if (!maybe || !refine(tid, norm, &kind) ||
	    !ab_learn_matters(s->plan, kind, norm, ab_learn_real_stat, NULL))
		return;
	prog_of(tid, prog, sizeof(prog));
	(void)ab_learn_add(s->learn, kind, norm, prog); /* a full set counts it */
}

void sup_learn_exec(ab_supervisor *s, pid_t tid, const char *path)
{
	if (s->learn && s->plan && path[0] && strcmp(path, "?") != 0)
		record(s, tid, AB_LEARN_EXEC, AT_FDCWD, path);
}

static const learn_call *learn_call_of(int nr)
{
	for (size_t i = 0; i < AB_ARRAY_SIZE(calls); i++)
		if (calls[i].nr == nr)
			return &calls[i];
	return NULL;
}

void sup_learn_note(ab_supervisor *s, const struct seccomp_notif *rq)
{
	const learn_call *c = learn_call_of(rq->data.nr);
	if (c && s->learn && s->plan) {
		pid_t tid = (pid_t)rq->pid;
		char raw[PATH_MAX];
		int dfd = c->dfd < 0 ? AT_FDCWD : (int)rq->data.args[c->dfd];
		uint64_t fl = c->flags < 0 ? 0 : rq->data.args[c->flags];
		bool write = c->flags < 0 || (fl & (O_WRONLY | O_RDWR | O_CREAT | O_TRUNC)) != 0 ||
			     (fl & O_TMPFILE) == O_TMPFILE;
		if (sup_remote_str(tid, rq->data.args[c->path], raw, sizeof(raw)) == 0)
			record(s, tid, write ? AB_LEARN_WRITE : AB_LEARN_READ, dfd, raw);
	}
}

void sup_on_learn(ab_supervisor *s, const struct seccomp_notif *rq)
{
	const learn_call *c = learn_call_of(rq->data.nr);
	if (c && (rq->data.args[c->mode] & (S_ISUID | S_ISGID))) {
		sup_answer(s, rq->id, EPERM, false);
		return;
	}
	sup_learn_note(s, rq);
	sup_answer(s, rq->id, 0, true);
}
