/* SPDX-License-Identifier: MIT */
/*
 * The record of what ran and what was denied, and the calls carried out for
 * the sandbox: the listener (include/agentbox/supervise.h).
 *
 * Which process: the PARENT.  The sandbox's init loads the seccomp filter
 * with SECCOMP_FILTER_FLAG_NEW_LISTENER and sends the listener over the sync
 * socket before it starts the command, so every exec and every denied syscall
 * of the sandbox arrives here as one notification.  One thread of its own
 * serves them, blocked in SECCOMP_IOCTL_NOTIF_RECV: with
 * SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP (Linux 6.6) the kernel hands the CPU
 * from the caller to that thread and back, several times faster than a wake-up
 * through the event loop's epoll.  The caller waits only for:
 *
 *   execve/execveat  its record read (supervise_exec.c), then CONTINUE
 *   rename, renameat, renameat2 (notify_rename)  carried out here when onto
 *                    a rendered credentials file (supervise_rename.c), else
 *                    CONTINUE
 *   connect          (notify_connect) carried out here, on the caller's own
 *                    socket (supervise_connect.c)
 *   anything else    the answer: the policy's errno (never CONTINUE: a
 *                    denied call stays denied whatever happens below).  Then
 *                    the count under (pid, syscall, call site); the first of
 *                    each site is logged, rate-limited.
 */
#include "supervise_int.h"

#include "agentbox/mediate.h"
#include "agentbox/plan.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#ifndef SECCOMP_IOCTL_NOTIF_SET_FLAGS
#define SECCOMP_IOCTL_NOTIF_SET_FLAGS SECCOMP_IOW(4, __u64)
#endif
#ifndef SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP
#define SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP (1UL << 0)
#endif

#if defined(__x86_64__)
#define AB_NATIVE_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define AB_NATIVE_ARCH AUDIT_ARCH_AARCH64
#endif

typedef struct site {
	bool used;
	pid_t tid; /* host tid */
	int nr;
	uint64_t ip;
	uint64_t count;
	long pid; /* inside */
	char comm[16];
} site;

/* interrupts the server thread's RECV at the end (no SA_RESTART) */
#define SIG_WAKE (SIGRTMIN + 3)

#define SITE_SLOTS (2 * AB_SUP_SITES_MAX)

/* ------------------------------------------------------------ pure pieces */

long sup_status_field(const char *text, const char *key, bool last)
{
	size_t kl = strlen(key);
	for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
		if (strncmp(p, key, kl) != 0)
			continue;
		const char *v = p + kl;
		long out = -1;
		for (;;) {
			while (*v == ' ' || *v == '\t')
				v++;
			if (*v < '0' || *v > '9')
				break;
			char *end;
			long n = strtol(v, &end, 10);
			out = n;
			v = end;
			if (!last)
				break;
		}
		return out;
	}
	return -1;
}

void ab_sup_parse_status(const char *text, long *ns_tgid, long *ppid, long *tgid)
{
	*ns_tgid = sup_status_field(text, "NStgid:", true);
	*ppid = sup_status_field(text, "PPid:", false);
	*tgid = sup_status_field(text, "Tgid:", false);
}

int ab_sup_parse_stat_exit(const char *text)
{
	/* "pid (comm) S ..." - comm may hold anything, so count from its ')' */
	const char *p = strrchr(text, ')');
	if (!p)
		return -1;
	int field = 2;
	while (*p && field < 52) {
		if (*p == ' ')
			field++;
		p++;
	}
	if (field != 52 || *p < '0' || *p > '9')
		return -1;
	long v = strtol(p, NULL, 10);
	return v >= 0 && v <= 0xffff ? (int)v : -1;
}

bool ab_sup_bucket_take(ab_sup_bucket *b, uint64_t now_ms, unsigned rate, unsigned burst)
{
	if (b->last_ms == 0) {
		b->tokens = burst;
		b->last_ms = now_ms;
	}
	if (now_ms > b->last_ms) {
		b->tokens += (double)(now_ms - b->last_ms) * rate / 1000.0;
		if (b->tokens > burst)
			b->tokens = burst;
		b->last_ms = now_ms;
	}
	if (b->tokens < 1.0)
		return false;
	b->tokens -= 1.0;
	return true;
}

/* ------------------------------------------------------------ /proc and memory */

void sup_proc_ids(pid_t tid, long *inner, long *host_ppid, long *tgid)
{
	char path[64], buf[2048];
	*inner = *host_ppid = *tgid = -1;
	snprintf(path, sizeof(path), "/proc/%d/status", (int)tid);
	if (ab_read_small(path, buf, sizeof(buf)) > 0)
		ab_sup_parse_status(buf, inner, host_ppid, tgid);
}

/* HOST_PID's process's pid inside: one ioctl on the sandbox's pid namespace
 * (Linux 6.11), else its status file */
long sup_inner_pid(const ab_supervisor *s, long host_pid)
{
	if (host_pid <= 0)
		return -1;
	if (s->pidns >= 0) {
		int v = ioctl(s->pidns, AB_NS_GET_TGID_IN_PIDNS, (int)host_pid);
		if (v > 0)
			return v;
		if (errno == ESRCH)
			return -1;
	}
	long inner, ppid, tgid;
	sup_proc_ids((pid_t)host_pid, &inner, &ppid, &tgid);
	return inner;
}

void sup_proc_comm(pid_t tid, char *out, size_t size)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/comm", (int)tid);
	ssize_t n = ab_read_small(path, out, size);
	if (n <= 0) {
		snprintf(out, size, "?");
		return;
	}
	if (out[n - 1] == '\n')
		out[n - 1] = '\0';
}

ssize_t sup_remote_read(pid_t pid, uint64_t addr, void *buf, size_t len)
{
	struct iovec local = {.iov_base = buf, .iov_len = len};
	struct iovec remote = {.iov_base = (void *)(uintptr_t)addr, .iov_len = len};
	return process_vm_readv(pid, &local, 1, &remote, 1, 0);
}

/* A NUL-terminated string at ADDR in PID, at most SIZE-1 bytes (page by page:
 * a read across an unmapped page fails as a whole).  1 = cut short, 0 = whole,
 * -1 = unreadable. */
int sup_remote_str(pid_t pid, uint64_t addr, char *out, size_t size)
{
	size_t got = 0;
	while (got < size - 1) {
		uint64_t a = addr + got;
		size_t chunk = 4096 - (size_t)(a & 4095);
		if (chunk > size - 1 - got)
			chunk = size - 1 - got;
		ssize_t n = sup_remote_read(pid, a, out + got, chunk);
		if (n <= 0) {
			out[got] = '\0';
			return got ? 1 : -1;
		}
		char *z = memchr(out + got, '\0', (size_t)n);
		if (z)
			return 0;
		got += (size_t)n;
	}
	out[size - 1] = '\0';
	return 1;
}

/* JSON for bytes from the sandbox: valid UTF-8 as is, anything else with the
 * bad bytes as \xNN text (jansson takes UTF-8 only). */
json_t *sup_bytes_json(const char *s)
{
	json_t *j = json_string(s);
	if (j)
		return j;
	char buf[AB_SUP_ARG_MAX * 4 + 1];
	size_t o = 0;
	for (const unsigned char *p = (const unsigned char *)s; *p && o + 5 < sizeof(buf); p++) {
		if (*p < 0x80)
			buf[o++] = (char)*p;
		else
			o += (size_t)snprintf(buf + o, sizeof(buf) - o, "\\x%02x", *p);
	}
	buf[o] = '\0';
	return json_string(buf);
}

/* ------------------------------------------------------------ a caller's paths */

/* The directory a relative PATH of TID is relative to (DFD: AT_FDCWD or an
 * fd of TID), as a path inside; "" for an absolute PATH. */
int sup_caller_base(pid_t tid, const char *path, int dfd, char *out, size_t size)
{
	out[0] = '\0';
	if (path[0] == '/')
		return 0;
	char link[64];
	if (dfd == AT_FDCWD)
		snprintf(link, sizeof(link), "/proc/%d/cwd", (int)tid);
	else if (dfd >= 0)
		snprintf(link, sizeof(link), "/proc/%d/fd/%d", (int)tid, dfd);
	else
		return -EBADF;
	ssize_t n = readlink(link, out, size - 1);
	if (n <= 0 || (size_t)n >= size - 1)
		return -ENAMETOOLONG;
	out[n] = '\0';
	return out[0] == '/' ? 0 : -ENOTDIR; /* "pipe:[...]", a deleted directory... */
}

/* BASE + "/" + PATH (PATH alone when absolute), as given: no "." or ".." is
 * resolved, so a symlink on the way is seen (and refused) by openat2. */
int sup_join_raw(const char *base, const char *path, char *out, size_t size)
{
	int n = path[0] == '/' ? snprintf(out, size, "%s", path)
			       : snprintf(out, size, "%s/%s", base, path);
	return n < 0 || (size_t)n >= size ? -ENAMETOOLONG : 0;
}

int sup_statx_fd(int fd, struct statx *x)
{
	memset(x, 0, sizeof(*x));
	return statx(fd, "", AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW,
		     STATX_BASIC_STATS | STATX_BTIME | STATX_MNT_ID, x) < 0
		       ? -errno
		       : 0;
}

/* ------------------------------------------------------------ answers */

void sup_answer(ab_supervisor *s, uint64_t id, int error, bool cont)
{
	memset(s->resp, 0, s->resp_size);
	s->resp->id = id;
	s->resp->error = cont ? 0 : -error;
	s->resp->flags = cont ? SECCOMP_USER_NOTIF_FLAG_CONTINUE : 0;
	/* ENOENT: the caller was interrupted or died meanwhile */
	(void)ioctl(s->fd, SECCOMP_IOCTL_NOTIF_SEND, s->resp);
}

bool sup_still_valid(ab_supervisor *s, uint64_t id)
{
	return ioctl(s->fd, SECCOMP_IOCTL_NOTIF_ID_VALID, &id) == 0;
}

void sup_suppressed(ab_supervisor *s, const char *kind, uint64_t count)
{
	json_t *ev = json_object();
	json_object_set_new(ev, "event", json_string("suppressed"));
	json_object_set_new(ev, "kind", json_string(kind));
	json_object_set_new(ev, "count", json_integer((json_int_t)count));
	ab_audit_emit(s->audit, ev);
}

/* ------------------------------------------------------------ denials */

static site *find_site(ab_supervisor *s, pid_t tid, int nr, uint64_t ip, bool *fresh)
{
	uint64_t h = (uint64_t)tid * 0x9e3779b97f4a7c15ull ^ (uint64_t)nr * 0xc2b2ae3d27d4eb4full ^
		     ip * 0x165667b19e3779f9ull;
	*fresh = false;
	/* made on the first denial: most runs have none */
	if (!s->sites && !(s->sites = calloc(SITE_SLOTS, sizeof(*s->sites))))
		return NULL;
	for (size_t n = 0; n < SITE_SLOTS; n++) {
		site *x = &s->sites[(h + n) % SITE_SLOTS];
		if (x->used && x->tid == tid && x->nr == nr && x->ip == ip)
			return x;
		if (!x->used) {
			if (s->nsites >= AB_SUP_SITES_MAX)
				return NULL;
			*x = (site){.used = true, .tid = tid, .nr = nr, .ip = ip};
			s->nsites++;
			*fresh = true;
			return x;
		}
	}
	return NULL;
}

static const char *errno_name(int e)
{
	switch (e) {
	case EPERM: return "EPERM";
	case EACCES: return "EACCES";
	case ENOSYS: return "ENOSYS";
	case EAFNOSUPPORT: return "EAFNOSUPPORT";
	default: return "?";
	}
}

static void on_denied(ab_supervisor *s, const struct seccomp_notif *rq)
{
	int nr = rq->data.nr;
	int e = nr >= 0 && nr <= AB_SECCOMP_MAX_KNOWN_NR && s->errnos[nr] ? s->errnos[nr] : EPERM;
	bool fresh;
	site *x = find_site(s, (pid_t)rq->pid, nr, rq->data.instruction_pointer, &fresh);
	if (!x) {
		sup_answer(s, rq->id, e, false);
		if (nr >= 0 && nr <= AB_SECCOMP_MAX_KNOWN_NR)
			s->overflow[nr]++;
		return;
	}
	x->count++;
	if (fresh) {
		/* read who it is while the caller still waits for the answer:
		 * a denied call just before exit would otherwise race the reap */
		x->pid = sup_inner_pid(s, (long)rq->pid);
		sup_proc_comm((pid_t)rq->pid, x->comm, sizeof(x->comm));
	}
	sup_answer(s, rq->id, e, false);
	if (!fresh)
		return;
	if (!ab_sup_bucket_take(&s->bucket, ab_now_ms(), AB_SUP_RATE_PER_S, AB_SUP_RATE_BURST)) {
		s->suppressed++;
		return;
	}
	char name[48], ip[24];
	ab_seccomp_name(nr, name, sizeof(name));
	snprintf(ip, sizeof(ip), "0x%llx", (unsigned long long)rq->data.instruction_pointer);
	json_t *ev = json_object();
	json_object_set_new(ev, "event", json_string("denied"));
	json_object_set_new(ev, "kind", json_string("syscall"));
	json_object_set_new(ev, "syscall", json_string(name));
	json_object_set_new(ev, "errno", json_string(errno_name(e)));
	json_object_set_new(ev, "pid", json_integer(x->pid));
	json_object_set_new(ev, "comm", sup_bytes_json(x->comm));
	json_object_set_new(ev, "ip", json_string(ip));
	ab_audit_emit(s->audit, ev);
}

/* ------------------------------------------------------------ the listener */

static void on_wake(int sig)
{
	(void)sig;
}

static void *serve_thread(void *arg)
{
	ab_supervisor *s = arg;
	sigset_t set;
	sigfillset(&set);
	sigdelset(&set, SIG_WAKE);
	pthread_sigmask(SIG_SETMASK, &set, NULL);
	/* renames and connects are carried out as the sandbox: none of
	 * a root agentbox's supplementary groups (this thread's only: the raw
	 * call, not glibc's process-wide setgroups) */
	if ((s->nrendered || s->pol->notify_connect) && geteuid() == 0 &&
	    syscall(SYS_setgroups, 0, NULL) < 0)
		s->no_groups_failed = true; /* then none is carried out (the kernel's EBUSY) */
	while (!__atomic_load_n(&s->stop, __ATOMIC_ACQUIRE)) {
		memset(s->req, 0, s->req_size);
		if (ioctl(s->fd, SECCOMP_IOCTL_NOTIF_RECV, s->req) < 0) {
			if (errno == EINTR)
				continue; /* the end (SIG_WAKE), or a stray signal */
			if (errno != ENOENT)
				break; /* no further notification can be read */
			/* the caller went away - or every process under the
			 * filter did, and RECV fails at once from now on: then
			 * there is nothing left to serve */
			struct pollfd p = {.fd = s->fd, .events = POLLIN};
			if (poll(&p, 1, 0) == 1 && (p.revents & (POLLHUP | POLLERR | POLLNVAL)))
				break;
			continue;
		}
		const struct seccomp_notif *rq = s->req;
		bool exec = rq->data.arch == AB_NATIVE_ARCH &&
			    (rq->data.nr == s->nr_execve || rq->data.nr == s->nr_execveat);
		bool native = rq->data.arch == AB_NATIVE_ARCH;
		if (exec && (s->pol->notify_exec || s->pol->notify_learn))
			sup_on_exec(s, rq);
		else if (native && ab_seccomp_notifies_create(s->pol, rq->data.nr) &&
			 sup_create_is_creation(rq)) {
			if (s->learn)
				sup_learn_note(s, rq);
			if (s->nrendered && ab_seccomp_notifies_rename(s->pol, rq->data.nr))
				sup_on_rename(s, rq); /* onto a rendered file; else as here */
			else
				sup_on_create(s, rq);
		} else if (native && ab_seccomp_notifies_learn(s->pol, rq->data.nr))
			sup_on_learn(s, rq);
		else if (rq->data.arch == AB_NATIVE_ARCH &&
			 ab_seccomp_notifies_rename(s->pol, rq->data.nr))
			sup_on_rename(s, rq);
		else if (rq->data.arch == AB_NATIVE_ARCH &&
			 ab_seccomp_notifies_connect(s->pol, rq->data.nr))
			sup_on_connect(s, rq);
		else
			on_denied(s, rq);
	}
	return NULL;
}

int ab_supervisor_new(const ab_seccomp_policy *pol, ab_audit *audit, ab_supervisor **out,
		      ab_err *err)
{
	_cleanup_free_ ab_supervisor *s = calloc(1, sizeof(*s));
	if (!s)
		return ab_fail(err, ENOMEM, "supervisor");
	s->fd = s->pidns = s->pipe[0] = s->pipe[1] = s->diag = s->ll_net = s->root = -1;
	s->creator = -1;
	s->pol = pol;
	s->audit = audit;
	struct seccomp_notif_sizes sz = {0};
	if (syscall(SYS_seccomp, SECCOMP_GET_NOTIF_SIZES, 0, &sz) < 0)
		return ab_fail(err, errno, "seccomp: user notification sizes");
	s->req_size = sz.seccomp_notif > sizeof(*s->req) ? sz.seccomp_notif : sizeof(*s->req);
	s->resp_size =
		sz.seccomp_notif_resp > sizeof(*s->resp) ? sz.seccomp_notif_resp : sizeof(*s->resp);
	s->req = calloc(1, s->req_size);
	s->resp = calloc(1, s->resp_size);
	s->overflow = calloc(AB_SECCOMP_MAX_KNOWN_NR + 1, sizeof(*s->overflow));
	if (!s->req || !s->resp || !s->overflow) {
		free(s->req);
		free(s->resp);
		free(s->overflow);
		return ab_fail(err, ENOMEM, "supervisor");
	}
	clock_gettime(CLOCK_REALTIME_COARSE, &s->t0);
	s->nr_execve = SYS_execve;
	s->nr_execveat = SYS_execveat;
	ab_seccomp_deny_errnos(pol, s->errnos, AB_ARRAY_SIZE(s->errnos));
	*out = TAKE_PTR(s);
	return 0;
}

int ab_supervisor_configure(ab_supervisor *s, const struct ab_plan *plan, ab_err *err)
{
	s->kuid = plan->map_kuid;
	s->kgid = plan->map_kgid;
	s->plan = plan;
	int r = sup_connect_configure(s, plan, err);
	if (r == 0 && plan->seccomp.notify_create && !s->mreq &&
	    !(s->mreq = calloc(1, sizeof(*s->mreq))))
		r = ab_fail(err, ENOMEM, "supervisor");
	return r < 0 ? r : sup_rename_configure(s, plan, err);
}

int ab_supervisor_attach(ab_supervisor *s, ab_loop *loop, int fd, pid_t init, ab_err *err)
{
	if (s->fd >= 0) {
		close(fd);
		return ab_fail(err, EBUSY, "supervisor: a second listener");
	}
	s->loop = loop;
	s->fd = fd;
	char ns[64];
	snprintf(ns, sizeof(ns), "/proc/%d/ns/pid", (int)init);
	s->pidns = open(ns, O_RDONLY | O_CLOEXEC); /* else: the status files */
	/* the caller sleeps until we answer: let the kernel switch to the
	 * server thread and back on one CPU (Linux 6.6; older kernels do not
	 * have it and wake it the usual way) */
	uint64_t fl = SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP;
	(void)ioctl(fd, SECCOMP_IOCTL_NOTIF_SET_FLAGS, fl);
	struct sigaction sa = {.sa_handler = on_wake};
	sigemptyset(&sa.sa_mask);
	if (pipe2(s->pipe, O_CLOEXEC | O_NONBLOCK) < 0 || sigaction(SIG_WAKE, &sa, NULL) < 0)
		return ab_fail(err, errno, "supervisor");
	/* the thread's only blocking write would stall every exec: make room */
	(void)fcntl(s->pipe[1], F_SETPIPE_SZ, 1 << 20);
	if (ab_loop_watch(loop, s->pipe[0], AB_EV_READ, sup_on_track, s) < 0)
		return ab_fail(err, errno, "supervisor: event loop");
	int pr = s->pol->notify_connect ? sup_connect_attach(s) : 0;
	if (pr < 0)
		return ab_fail(err, -pr, "supervisor: the connect pool");
	int r = pthread_create(&s->th, NULL, serve_thread, s);
	if (r != 0)
		return ab_fail(err, r, "supervisor: start the thread");
	s->started = true;
	return 0;
}

void ab_supervisor_set_diag(ab_supervisor *s, int fd)
{
	if (s->diag >= 0)
		close(s->diag);
	s->diag = fd;
}

/* The sandbox is gone (nothing can notify any more): stop the thread. */
static void stop_thread(ab_supervisor *s)
{
	if (!s->started)
		return;
	__atomic_store_n(&s->stop, 1, __ATOMIC_RELEASE);
	for (;;) {
		/* the signal may land just before the thread enters RECV: retry */
		pthread_kill(s->th, SIG_WAKE);
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 20 * 1000 * 1000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		if (pthread_timedjoin_np(s->th, NULL, &ts) == 0)
			break;
	}
	s->started = false;
}

/* Each call site's count (the summary's), and a "denied-repeat" line for
 * each denied more than once; the denials beyond the site table */
static void denials_finish(ab_supervisor *s)
{
	char name[48];
	for (size_t i = 0; s->sites && i < SITE_SLOTS; i++) {
		site *x = &s->sites[i];
		if (!x->used)
			continue;
		ab_seccomp_name(x->nr, name, sizeof(name));
		ab_audit_count_denial(s->audit, "syscall", name, x->comm, x->count);
		x->used = false;
		if (x->count < 2)
			continue;
		json_t *ev = json_object();
		json_object_set_new(ev, "event", json_string("denied-repeat"));
		json_object_set_new(ev, "kind", json_string("syscall"));
		json_object_set_new(ev, "syscall", json_string(name));
		json_object_set_new(ev, "pid", json_integer(x->pid));
		json_object_set_new(ev, "comm", sup_bytes_json(x->comm));
		json_object_set_new(ev, "count", json_integer((json_int_t)x->count));
		ab_audit_emit(s->audit, ev);
	}
	for (int nr = 0; nr <= AB_SECCOMP_MAX_KNOWN_NR; nr++) {
		if (!s->overflow[nr])
			continue;
		ab_seccomp_name(nr, name, sizeof(name));
		ab_audit_count_denial(s->audit, "syscall", name, "?", s->overflow[nr]);
		s->suppressed += s->overflow[nr];
		s->overflow[nr] = 0;
	}
}

void ab_supervisor_finish(ab_supervisor *s)
{
	if (!s)
		return;
	stop_thread(s);
	sup_exec_finish(s);
	denials_finish(s);
	if (s->suppressed)
		sup_suppressed(s, "syscall", s->suppressed);
	s->suppressed = 0;
	if (s->exec_lost)
		sup_suppressed(s, "exec", s->exec_lost);
	s->exec_lost = 0;
	if (s->cred_suppressed)
		sup_suppressed(s, "credentials", s->cred_suppressed);
	s->cred_suppressed = 0;
	if (s->trace_suppressed)
		sup_suppressed(s, "file", s->trace_suppressed);
	s->trace_suppressed = 0;
	sup_connect_finish(s);
	ab_audit_count_exec(s->audit, s->execs);
	s->execs = 0;
}

void ab_supervisor_free(ab_supervisor *s)
{
	if (!s)
		return;
	stop_thread(s);
	if (s->fd >= 0)
		close(s->fd);
	if (s->pidns >= 0)
		close(s->pidns);
	if (s->diag >= 0)
		close(s->diag);
	if (s->ll_net >= 0)
		close(s->ll_net);
	if (s->root >= 0)
		close(s->root);
	if (s->creator >= 0)
		close(s->creator);
	free(s->mreq);
	sup_refusal_free(s);
	free(s->tcp_ports);
	if (s->learn_ports) {
		pthread_mutex_destroy(&s->learn_mu);
		free(s->learn_ports);
	}
	for (size_t i = 0; i < s->nshared; i++)
		free(s->shared[i]);
	free(s->shared);
	for (int i = 0; i < 2; i++)
		if (s->pipe[i] >= 0)
			close(s->pipe[i]);
	sup_exec_free(s);
	free(s->req);
	free(s->resp);
	free(s->sites);
	free(s->overflow);
	for (size_t i = 0; i < s->nrendered; i++)
		free(s->rendered[i]);
	free(s->rendered);
	free(s->rb);
	free(s);
}
