/* SPDX-License-Identifier: MIT */
/*
 * Creation calls, carried out by the creator (parent: the server thread).
 *
 * With notify_create, every call that can give something a name notifies
 * (include/agentbox/mediate.h): open and openat with O_CREAT, creat,
 * mkdir*, mknod*, symlink*, link*, rename*.  Here the caller's paths are
 * read once, the directories they are relative to are opened from its
 * /proc entries (its cwd, its directory fd: as the kernel would resolve
 * them now, while the caller is stopped), and the whole call goes to the
 * creator, a thread of the sandbox's init (src/sandbox/creator.c).  Its
 * answer is the caller's: a return value, an errno, or for an open the fd,
 * installed in the caller with SECCOMP_IOCTL_NOTIF_ADDFD (the return value
 * is its number there, as the kernel's would be).
 *
 * Never CONTINUE: the kernel would read the caller's string again, and a
 * second thread could have made ".git" of "foo" by then.
 */
#include "supervise_int.h"

#include "agentbox/mediate.h"
#include "agentbox/plan.h"
#include "agentbox/trace.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef SECCOMP_ADDFD_FLAG_SEND
#define SECCOMP_ADDFD_FLAG_SEND (1UL << 1)
#endif

typedef struct create_call {
	int nr;
	uint8_t op;
	int8_t dfd1, path1; /* path1: the new name */
	int8_t dfd2, path2; /* path2: the old name, or a symlink's text */
	int8_t flags, mode, dev;
	uint32_t fixed_flags; /* creat: its open flags */
} create_call;

// clang-format off
static const create_call calls[] = {
#ifdef SYS_open
	{SYS_open,      AB_MED_OPEN,    -1, 0, -1, -1,  1,  2, -1, 0},
#endif
	{SYS_openat,    AB_MED_OPEN,     0, 1, -1, -1,  2,  3, -1, 0},
#ifdef SYS_creat
	{SYS_creat,     AB_MED_OPEN,    -1, 0, -1, -1, -1,  1, -1, O_CREAT | O_WRONLY | O_TRUNC},
#endif
#ifdef SYS_mkdir
	{SYS_mkdir,     AB_MED_MKDIR,   -1, 0, -1, -1, -1,  1, -1, 0},
#endif
	{SYS_mkdirat,   AB_MED_MKDIR,    0, 1, -1, -1, -1,  2, -1, 0},
#ifdef SYS_mknod
	{SYS_mknod,     AB_MED_MKNOD,   -1, 0, -1, -1, -1,  1,  2, 0},
#endif
	{SYS_mknodat,   AB_MED_MKNOD,    0, 1, -1, -1, -1,  2,  3, 0},
#ifdef SYS_symlink
	{SYS_symlink,   AB_MED_SYMLINK, -1, 1, -1,  0, -1, -1, -1, 0},
#endif
	{SYS_symlinkat, AB_MED_SYMLINK,  1, 2, -1,  0, -1, -1, -1, 0},
#ifdef SYS_link
	{SYS_link,      AB_MED_LINK,    -1, 1, -1,  0, -1, -1, -1, 0},
#endif
	{SYS_linkat,    AB_MED_LINK,     2, 3,  0,  1,  4, -1, -1, 0},
#ifdef SYS_rename
	{SYS_rename,    AB_MED_RENAME,  -1, 1, -1,  0, -1, -1, -1, 0},
#endif
	{SYS_renameat,  AB_MED_RENAME,   2, 3,  0,  1, -1, -1, -1, 0},
	{SYS_renameat2, AB_MED_RENAME,   2, 3,  0,  1,  4, -1, -1, 0},
};
// clang-format on

static const create_call *find_call(int nr)
{
	for (size_t i = 0; i < AB_ARRAY_SIZE(calls); i++)
		if (calls[i].nr == nr)
			return &calls[i];
	return NULL;
}

bool sup_create_is_creation(const struct seccomp_notif *rq)
{
	const create_call *c = find_call(rq->data.nr);
	if (!c)
		return false;
	if (c->op != AB_MED_OPEN || c->fixed_flags)
		return true;
	uint64_t f = rq->data.args[c->flags];
	return (f & (O_CREAT | O_TRUNC)) || (f & O_ACCMODE) != O_RDONLY;
}

void ab_supervisor_set_creator(ab_supervisor *s, int fd)
{
	if (s->creator >= 0)
		close(s->creator);
	s->creator = fd;
}

/* The caller's umask and its pid and tid inside, from its status file */
static bool caller_status(pid_t tid, uint32_t *umask, int32_t *pid, int32_t *itid)
{
	char path[64], buf[4096];
	snprintf(path, sizeof(path), "/proc/%d/status", (int)tid);
	if (ab_read_small(path, buf, sizeof(buf)) <= 0)
		return false;
	const char *u = strstr(buf, "\nUmask:");
	long p = sup_status_field(buf, "NStgid:", true);
	long t = sup_status_field(buf, "NSpid:", true);
	if (!u || p <= 0 || t <= 0)
		return false;
	*umask = (uint32_t)strtoul(u + 7, NULL, 8);
	*pid = (int32_t)p;
	*itid = (int32_t)t;
	return true;
}

/* The directory a path of TID is relative to (DFD: AT_FDCWD or an fd of
 * TID), or the file DFD itself, opened O_PATH here: -errno */
static int caller_dir(pid_t tid, int dfd)
{
	char link[64];
	if (dfd == AT_FDCWD)
		snprintf(link, sizeof(link), "/proc/%d/cwd", (int)tid);
	else if (dfd >= 0)
		snprintf(link, sizeof(link), "/proc/%d/fd/%d", (int)tid, dfd);
	else
		return -EBADF;
	int fd = open(link, O_PATH | O_CLOEXEC);
	if (fd >= 0)
		return fd;
	return errno == ENOENT ? -EBADF : -errno;
}

/* A path argument of the caller into the request: -errno */
static int read_path(pid_t tid, uint64_t addr, char *out, uint32_t *len)
{
	int r = sup_remote_str(tid, addr, out, PATH_MAX);
	if (r < 0)
		return -EFAULT;
	if (r > 0)
		return -ENAMETOOLONG;
	*len = (uint32_t)strlen(out);
	return 0;
}

/* The request for RQ into s->mreq, its fds opened into FDS: -errno */
static int build(ab_supervisor *s, const create_call *c, const struct seccomp_notif *rq, int fds[2],
		 size_t *nfds)
{
	ab_med_req *m = s->mreq;
	pid_t tid = (pid_t)rq->pid;
	const __u64 *a = rq->data.args;
	memset(m, 0, offsetof(ab_med_req, paths));
	m->op = c->op;
	m->flags = c->fixed_flags ? c->fixed_flags : c->flags >= 0 ? (uint32_t)a[c->flags] : 0;
	m->mode = c->mode >= 0 ? (uint32_t)a[c->mode] : 0;
	m->dev = c->dev >= 0 ? a[c->dev] : 0;
	char *p1 = m->paths;
	int r = read_path(tid, a[c->path1], p1, &m->len1);
	if (r < 0)
		return r;
	char *p2 = m->paths + m->len1 + 1;
	p2[0] = '\0';
	if (c->path2 >= 0 && (r = read_path(tid, a[c->path2], p2, &m->len2)) < 0)
		return r;
	/* the status file only when it matters: the umask of a call that makes
	 * something with a mode, the ids of a path through /proc or /dev */
	bool mode = c->op == AB_MED_MKDIR || c->op == AB_MED_MKNOD ||
		    (c->op == AB_MED_OPEN &&
		     ((m->flags & O_CREAT) || (m->flags & O_TMPFILE) == O_TMPFILE));
	bool ids = !strncmp(p1, "/proc/", 6) || !strncmp(p1, "/dev/", 5) ||
		   !strncmp(p2, "/proc/", 6) || !strncmp(p2, "/dev/", 5);
	if ((mode || ids) && !caller_status(tid, &m->umask, &m->pid, &m->tid))
		return -ESRCH;
	if (!m->pid) /* its pid inside, cheaply: /dev/tty is its own terminal */
		m->pid = (int32_t)sup_inner_pid(s, tid);
	*nfds = 0;
	if (p1[0] != '/') {
		int fd = caller_dir(tid, c->dfd1 >= 0 ? (int)a[c->dfd1] : AT_FDCWD);
		if (fd < 0)
			return fd;
		fds[(*nfds)++] = fd;
		m->fds |= AB_MED_FD1;
	}
	/* the old name of a link or rename (not a symlink's text) */
	bool empty = c->op == AB_MED_LINK && (m->flags & AT_EMPTY_PATH) && !p2[0];
	if (c->op != AB_MED_SYMLINK && c->path2 >= 0 && (p2[0] != '/' || empty)) {
		int fd = caller_dir(tid, c->dfd2 >= 0 ? (int)a[c->dfd2] : AT_FDCWD);
		if (fd < 0)
			return fd;
		fds[(*nfds)++] = fd;
		m->fds |= AB_MED_FD2;
	}
	return 0;
}

static int exchange(ab_supervisor *s, const int *fds, size_t nfds, ab_med_resp *resp, int *out)
{
	union {
		char buf[CMSG_SPACE(2 * sizeof(int))];
		struct cmsghdr align;
	} u;
	memset(&u, 0, sizeof(u));
	struct iovec iov = {.iov_base = s->mreq, .iov_len = sizeof(*s->mreq)};
	struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
	if (nfds) {
		msg.msg_control = u.buf;
		msg.msg_controllen = CMSG_SPACE(nfds * sizeof(int));
		struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(nfds * sizeof(int));
		memcpy(CMSG_DATA(c), fds, nfds * sizeof(int));
	}
	ssize_t n;
	do
		n = sendmsg(s->creator, &msg, MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	if (n != (ssize_t)sizeof(*s->mreq))
		return -EIO;
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} v;
	iov = (struct iovec){.iov_base = resp, .iov_len = sizeof(*resp)};
	msg = (struct msghdr){.msg_iov = &iov,
			      .msg_iovlen = 1,
			      .msg_control = v.buf,
			      .msg_controllen = sizeof(v.buf)};
	do
		n = recvmsg(s->creator, &msg, MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	if (n != (ssize_t)sizeof(*resp))
		return -EIO;
	*out = -1;
	struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
	if (c && c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS &&
	    c->cmsg_len == CMSG_LEN(sizeof(int)))
		memcpy(out, CMSG_DATA(c), sizeof(int));
	return 0;
}

/* The fd FD, installed in the caller as the answer to ID */
static void answer_fd(ab_supervisor *s, uint64_t id, int fd, bool cloexec)
{
	struct seccomp_notif_addfd add = {.id = id,
					  .flags = SECCOMP_ADDFD_FLAG_SEND,
					  .srcfd = (uint32_t)fd,
					  .newfd = 0,
					  .newfd_flags = cloexec ? O_CLOEXEC : 0};
	if (ioctl(s->fd, SECCOMP_IOCTL_NOTIF_ADDFD, &add) >= 0 || errno != EINVAL)
		return; /* done; or the caller is gone (ENOENT), and the fd with it */
	/* before Linux 5.14: install, then answer with its number */
	add.flags = 0;
	int n = ioctl(s->fd, SECCOMP_IOCTL_NOTIF_ADDFD, &add);
	if (n < 0) {
		sup_answer(s, id, errno == ENOENT ? EINTR : EMFILE, false);
		return;
	}
	memset(s->resp, 0, s->resp_size);
	s->resp->id = id;
	s->resp->val = n;
	(void)ioctl(s->fd, SECCOMP_IOCTL_NOTIF_SEND, s->resp);
}

/* An open the creator left waiting (a FIFO without its other end): this
 * thread waits for its answer on SOCK and gives it to the caller, with its
 * own copy of the listener, so that nothing of the supervisor is touched
 * after it started (the run may end first: then the socket ends). */
typedef struct waiting {
	int listener, sock;
	uint64_t id;
	bool cloexec;
	size_t resp_size;
} waiting;

static void *wait_answer(void *arg)
{
	waiting *w = arg;
	ab_med_resp rs = {0};
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} v;
	struct iovec iov = {.iov_base = &rs, .iov_len = sizeof(rs)};
	struct msghdr msg = {.msg_iov = &iov,
			     .msg_iovlen = 1,
			     .msg_control = v.buf,
			     .msg_controllen = sizeof(v.buf)};
	ssize_t n;
	do
		n = recvmsg(w->sock, &msg, MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	int fd = -1;
	struct cmsghdr *c = n == (ssize_t)sizeof(rs) ? CMSG_FIRSTHDR(&msg) : NULL;
	if (c && c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS &&
	    c->cmsg_len == CMSG_LEN(sizeof(int)))
		memcpy(&fd, CMSG_DATA(c), sizeof(int));
	if (n == (ssize_t)sizeof(rs) && rs.ret >= 0 && fd >= 0) {
		struct seccomp_notif_addfd add = {.id = w->id,
						  .flags = SECCOMP_ADDFD_FLAG_SEND,
						  .srcfd = (uint32_t)fd,
						  .newfd_flags = w->cloexec ? O_CLOEXEC : 0};
		(void)ioctl(w->listener, SECCOMP_IOCTL_NOTIF_ADDFD, &add);
	} else if (n == (ssize_t)sizeof(rs)) {
		struct seccomp_notif_resp *resp = calloc(1, w->resp_size);
		if (resp) {
			resp->id = w->id;
			resp->error = rs.ret < 0 ? rs.ret : -EIO;
			(void)ioctl(w->listener, SECCOMP_IOCTL_NOTIF_SEND, resp);
			free(resp);
		}
	}
	if (fd >= 0)
		close(fd);
	close(w->sock);
	close(w->listener);
	free(w);
	return NULL;
}

/* The answer to ID comes on SOCK (taken): true when a thread waits for it */
static bool wait_for_answer(ab_supervisor *s, uint64_t id, int sock, bool cloexec)
{
	waiting *w = calloc(1, sizeof(*w));
	if (!w)
		return false;
	*w = (waiting){.listener = fcntl(s->fd, F_DUPFD_CLOEXEC, 0),
		       .sock = sock,
		       .id = id,
		       .cloexec = cloexec,
		       .resp_size = s->resp_size};
	pthread_t th;
	pthread_attr_t at;
	pthread_attr_init(&at);
	pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
	int r = w->listener < 0 ? EMFILE : pthread_create(&th, &at, wait_answer, w);
	pthread_attr_destroy(&at);
	if (r == 0)
		return true;
	if (w->listener >= 0)
		close(w->listener);
	free(w);
	return false;
}

static void log_git(ab_supervisor *s, pid_t tid, const char *call, uint32_t what, int ret)
{
	if (!s->audit ||
	    !ab_sup_bucket_take(&s->bucket, ab_now_ms(), AB_SUP_RATE_PER_S, AB_SUP_RATE_BURST))
		return;
	json_t *ev = json_object();
	json_object_set_new(ev, "event", json_string("nested-git"));
	json_object_set_new(ev, "action",
			    json_string(what & AB_MED_REFUSED     ? "refused"
					: what & AB_MED_EVACUATED ? "moved-off-host"
								  : "kept-off-host"));
	json_object_set_new(ev, "call", json_string(call));
	json_object_set_new(ev, "path", sup_bytes_json(s->mreq->paths));
	json_object_set_new(ev, "pid", json_integer(sup_inner_pid(s, tid)));
	if (ret < 0)
		json_object_set_new(ev, "errno", json_integer(-ret));
	ab_audit_emit(s->audit, ev);
}

/* run --trace: a call the creator was refused (Landlock, a mode), recorded
 * as the caller's file denial: the kernel's trace sees only init's thread
 * (src/observe/trace.c leaves those out).  Rate-limited like the trace's. */
static void trace_denial(ab_supervisor *s, const create_call *c, pid_t tid, int r)
{
	static const char *const ops[] = {
		[AB_MED_OPEN] = "open",       [AB_MED_MKDIR] = "mkdir", [AB_MED_MKNOD] = "mknod",
		[AB_MED_SYMLINK] = "symlink", [AB_MED_LINK] = "link",   [AB_MED_RENAME] = "rename"};
	char comm[16];
	sup_proc_comm(tid, comm, sizeof(comm));
	ab_audit_count_denial(s->audit, "file", s->mreq->paths, comm, 1);
	if (!ab_sup_bucket_take(&s->trace_rate, ab_now_ms(), AB_TRACE_RATE_PER_S,
				AB_TRACE_RATE_BURST)) {
		s->trace_suppressed++;
		return;
	}
	json_t *ev = json_object();
	json_object_set_new(ev, "event", json_string("denied"));
	json_object_set_new(ev, "kind", json_string("file"));
	json_object_set_new(ev, "source", json_string("agentbox"));
	json_object_set_new(ev, "pid", json_integer(sup_inner_pid(s, tid)));
	json_object_set_new(ev, "comm", sup_bytes_json(comm));
	json_object_set_new(ev, "path", sup_bytes_json(s->mreq->paths));
	json_object_set_new(ev, "op", json_string(ops[c->op]));
	json_object_set_new(ev, "errno", json_string(r == -EACCES ? "EACCES" : "EPERM"));
	ab_audit_emit(s->audit, ev);
}

void sup_on_create(ab_supervisor *s, const struct seccomp_notif *rq)
{
	const create_call *c = find_call(rq->data.nr);
	if (!c || s->creator < 0 || !s->mreq) {
		/* nothing to carry it out with: fail closed */
		sup_answer(s, rq->id, EPERM, false);
		return;
	}
	/* a learning run refuses set-id modes wherever it notifies them, as
	 * src/observe/supervise_learn.c does (no weaker than its filter) */
	if (s->pol->notify_learn && c->mode >= 0 &&
	    (rq->data.args[c->mode] & (S_ISUID | S_ISGID))) {
		sup_answer(s, rq->id, EPERM, false);
		return;
	}
	int fds[2] = {-1, -1};
	size_t nfds = 0;
	int r = build(s, c, rq, fds, &nfds);
	ab_med_resp resp = {0};
	int out = -1;
	/* the fds name the caller's directories only while it is stopped in
	 * this call: a reused tid would be another process */
	if (r == 0 && !sup_still_valid(s, rq->id))
		r = -ESRCH;
	bool done = r == 0 && (r = exchange(s, fds, nfds, &resp, &out)) == 0;
	if (done)
		r = resp.ret;
	/* a refusal of the sandbox's rules (not a .git one), for run --ask's
	 * offer: noted while the caller is still stopped (its cwd holds) */
	if (done && r < 0 && !(resp.what & AB_MED_REFUSED))
		sup_refusal_note(s, rq, c->dfd1 >= 0 ? (int)rq->data.args[c->dfd1] : AT_FDCWD,
				 s->mreq->paths, r);
	if (done && (r == -EACCES || r == -EPERM) && !(resp.what & AB_MED_REFUSED) && s->plan &&
	    s->plan->trace)
		trace_denial(s, c, (pid_t)rq->pid, r);
	for (size_t i = 0; i < nfds; i++)
		close(fds[i]);
	if (r == -ESRCH) {
		if (!sup_still_valid(s, rq->id))
			return; /* the caller went away */
		r = -EIO;
	}
	bool cloexec = (s->mreq->flags & O_CLOEXEC) != 0;
	if (r >= 0 && c->op == AB_MED_OPEN && out >= 0 && (resp.what & AB_MED_DEFERRED)) {
		if (wait_for_answer(s, rq->id, out, cloexec))
			out = -1; /* the thread's now */
		else
			sup_answer(s, rq->id, ENXIO, false);
		resp.what &= ~(uint32_t)AB_MED_DEFERRED;
	} else if (r >= 0 && c->op == AB_MED_OPEN && out >= 0) {
		answer_fd(s, rq->id, out, cloexec);
	} else {
		/* an open's fd must come back with it */
		int e = r < 0 ? -r : c->op == AB_MED_OPEN ? EIO : 0;
		sup_answer(s, rq->id, e, false);
	}
	if (out >= 0)
		close(out);
	/* a redirect that failed (EEXIST: git makes a .git twice) made nothing */
	if (r < 0)
		resp.what &= ~(uint32_t)(AB_MED_REDIRECTED | AB_MED_EVACUATED);
	if (resp.what) {
		char name[32];
		ab_seccomp_name(rq->data.nr, name, sizeof(name));
		log_git(s, (pid_t)rq->pid, name, resp.what, r);
	}
}
