/* SPDX-License-Identifier: MIT */
/*
 * The record of what ran and what was denied (include/agentbox/supervise.h).
 *
 * Which process: the PARENT.  The sandbox's init loads the seccomp filter
 * with SECCOMP_FILTER_FLAG_NEW_LISTENER and sends the listener over the sync
 * socket before it forks the command, so every exec and every denied syscall
 * of the sandbox arrives here as one notification.  One thread of its own
 * serves them, blocked in SECCOMP_IOCTL_NOTIF_RECV: with
 * SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP (Linux 6.6) the kernel hands the CPU
 * from the caller to that thread and back, several times faster than a wake-up
 * through the event loop's epoll.  The caller waits only for:
 *
 *   execve/execveat  read the path and argv (process_vm_readv), check the
 *                    notification is still valid, CONTINUE.  Then, while the
 *                    exec proceeds: the pid, the parent and the cwd (/proc),
 *                    a pidfd, the "exec" line.  Attempts on a path that does
 *                    not exist inside (execvp's walk along PATH) are not
 *                    logged.  The pidfd goes to the event loop (a pipe);
 *                    its becoming readable gives the "exit" line.
 *   anything else    the answer: the policy's errno (never CONTINUE: a
 *                    denied call stays denied whatever happens below).  Then
 *                    the count under (pid, syscall, call site); the first of
 *                    each site is logged, rate-limited.
 *
 * Threads: the server thread owns the site table and the counters until it is
 * joined (ab_supervisor_finish); the event loop owns the tracked processes;
 * the audit log takes whole-line writes from both.
 *
 * A record, not a decision: the kernel re-reads the exec arguments after we
 * let the call continue, so a second thread of the caller can change them in
 * between (time of check / time of use).  The record shows what the process
 * asked for, which is what a well-behaved process runs; a hostile one can
 * make it lie.  docs/audit.md says so.
 */
#include "agentbox/supervise.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <time.h>
#include <linux/audit.h>
#include <linux/openat2.h>
#include <linux/seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef SECCOMP_IOCTL_NOTIF_SET_FLAGS
#define SECCOMP_IOCTL_NOTIF_SET_FLAGS SECCOMP_IOW(4, __u64)
#endif
#ifndef SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP
#define SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP (1UL << 0)
#endif

/* PIDFD_GET_INFO (Linux 6.15): the exit code of a process, even once its
 * parent reaped it.  Version 0 of the struct (64 bytes); the kernel takes
 * the size from the ioctl number. */
struct ab_pidfd_info {
	uint64_t mask;
	uint64_t cgroupid;
	uint32_t pid, tgid, ppid, ruid, rgid, euid, egid, suid, sgid, fsuid, fsgid;
	int32_t exit_code;
};
_Static_assert(sizeof(struct ab_pidfd_info) == 64, "PIDFD_INFO_SIZE_VER0");
#define AB_PIDFD_GET_INFO _IOWR(0xFF, 11, struct ab_pidfd_info)
#define AB_PIDFD_INFO_PID (1ULL << 0)
#define AB_PIDFD_INFO_EXIT (1ULL << 3)

#if defined(__x86_64__)
#define AB_NATIVE_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define AB_NATIVE_ARCH AUDIT_ARCH_AARCH64
#endif

typedef struct site {
	bool used;
	pid_t tid;       /* host tid */
	int nr;
	uint64_t ip;
	uint64_t count;
	long pid;        /* inside */
	char comm[16];
} site;

/* One exec, read by the server thread while the caller waited, finished
 * (logged, its exit awaited) by the event loop. */
typedef struct exec_rec {
	pid_t tid;       /* host: the caller */
	pid_t tgid;      /* host: its process */
	long pid;        /* inside; -1: the loop reads it */
	long host_ppid;
	int pidfd;
	char path[AB_SUP_ARG_MAX];
	char argv[AB_SUP_ARGV_MAX][AB_SUP_ARG_MAX];
	size_t argc;
	bool truncated;
	char cwd[1024];
} exec_rec;

typedef struct tracked {
	struct ab_supervisor *sup;
	pid_t tgid;      /* host */
	long pid;        /* inside */
	int pidfd;
	uint64_t t0;
} tracked;

/* interrupts the server thread's RECV at the end (no SA_RESTART) */
#define SIG_WAKE (SIGRTMIN + 3)

struct ab_supervisor {
	ab_audit *audit;
	ab_loop *loop;
	int fd;
	int pipe[2];     /* exec_rec pointers, thread -> loop */
	pthread_t th;
	bool started;
	int stop;        /* atomic */
	const ab_seccomp_policy *pol;
	int16_t errnos[AB_SECCOMP_MAX_KNOWN_NR + 1];
	int nr_execve, nr_execveat;
	struct seccomp_notif *req;
	struct seccomp_notif_resp *resp;
	size_t req_size, resp_size;
	site *sites;      /* open addressing, 2 * AB_SUP_SITES_MAX slots */
	size_t nsites;
	uint64_t *overflow; /* per syscall: denials beyond the site table */
	tracked **tr;
	size_t ntr;
	ab_sup_bucket bucket;
	uint64_t suppressed;
	uint64_t execs;   /* the loop's */
	/* the thread's: paths that existed inside, recently (execvp check) */
	struct {
		char path[AB_SUP_ARG_MAX];
		uint64_t at_ms;
	} seen[32];
	unsigned seen_next;
};

#define SITE_SLOTS (2 * AB_SUP_SITES_MAX)

/* ------------------------------------------------------------ pure pieces */

static long status_field(const char *text, const char *key, bool last)
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
	*ns_tgid = status_field(text, "NStgid:", true);
	*ppid = status_field(text, "PPid:", false);
	*tgid = status_field(text, "Tgid:", false);
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

static ssize_t read_small(const char *path, char *buf, size_t size)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ssize_t n = read(fd, buf, size - 1);
	if (n < 0)
		return -errno;
	buf[n] = '\0';
	return n;
}

static void proc_ids(pid_t tid, long *inner, long *host_ppid, long *tgid)
{
	char path[64], buf[2048];
	*inner = *host_ppid = *tgid = -1;
	snprintf(path, sizeof(path), "/proc/%d/status", (int)tid);
	if (read_small(path, buf, sizeof(buf)) > 0)
		ab_sup_parse_status(buf, inner, host_ppid, tgid);
}

static long inner_pid_of(long host_pid)
{
	if (host_pid <= 0)
		return -1;
	long inner, ppid, tgid;
	proc_ids((pid_t)host_pid, &inner, &ppid, &tgid);
	return inner;
}

/* The ids of an exec'ing thread without rendering all of /proc/TID/status
 * (10 us): a pidfd (kept for the exit), its fdinfo for the pid inside,
 * PIDFD_GET_INFO (6.13) for the parent.  A thread that is not its process's
 * leader, or an older kernel: the status file. */
static void exec_ids(exec_rec *r)
{
	r->pidfd = (int)syscall(SYS_pidfd_open, r->tid, 0); /* EINVAL: not a leader */
	if (r->pidfd >= 0) {
		char path[64], buf[512];
		snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", r->pidfd);
		if (read_small(path, buf, sizeof(buf)) > 0)
			r->pid = status_field(buf, "NSpid:", true);
		struct ab_pidfd_info info = {.mask = AB_PIDFD_INFO_PID};
		if (ioctl(r->pidfd, AB_PIDFD_GET_INFO, &info) == 0 && (info.mask & AB_PIDFD_INFO_PID))
			r->host_ppid = info.ppid;
	}
	if (r->pid < 0 || r->host_ppid < 0) {
		long tgid;
		proc_ids(r->tid, &r->pid, &r->host_ppid, &tgid);
		if (r->pidfd < 0 && tgid > 0) {
			r->tgid = (pid_t)tgid;
			r->pidfd = (int)syscall(SYS_pidfd_open, r->tgid, 0);
		}
	}
}

static void proc_comm(pid_t tid, char *out, size_t size)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/comm", (int)tid);
	ssize_t n = read_small(path, out, size);
	if (n <= 0) {
		snprintf(out, size, "?");
		return;
	}
	if (out[n - 1] == '\n')
		out[n - 1] = '\0';
}

static ssize_t remote_read(pid_t pid, uint64_t addr, void *buf, size_t len)
{
	struct iovec local = {.iov_base = buf, .iov_len = len};
	struct iovec remote = {.iov_base = (void *)(uintptr_t)addr, .iov_len = len};
	return process_vm_readv(pid, &local, 1, &remote, 1, 0);
}

/* A NUL-terminated string at ADDR in PID, at most SIZE-1 bytes (page by page:
 * a read across an unmapped page fails as a whole).  1 = cut short, 0 = whole,
 * -1 = unreadable. */
static int remote_str(pid_t pid, uint64_t addr, char *out, size_t size)
{
	size_t got = 0;
	while (got < size - 1) {
		uint64_t a = addr + got;
		size_t chunk = 4096 - (size_t)(a & 4095);
		if (chunk > size - 1 - got)
			chunk = size - 1 - got;
		ssize_t n = remote_read(pid, a, out + got, chunk);
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
static json_t *bytes_json(const char *s)
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

/* ------------------------------------------------------------ exits */

static int exit_info(int pidfd)
{
	struct ab_pidfd_info info = {.mask = AB_PIDFD_INFO_EXIT};
	if (ioctl(pidfd, AB_PIDFD_GET_INFO, &info) == 0 && (info.mask & AB_PIDFD_INFO_EXIT))
		return info.exit_code;
	return -1;
}

static void emit_exit(tracked *t)
{
	/* once its parent reaped it, PIDFD_GET_INFO (6.15) has the exit code;
	 * before that (or on older kernels) /proc has it while it is a zombie */
	int code = exit_info(t->pidfd);
	if (code < 0) {
		char path[64], buf[1024];
		snprintf(path, sizeof(path), "/proc/%d/stat", (int)t->tgid);
		if (read_small(path, buf, sizeof(buf)) > 0) {
			const char *st = strrchr(buf, ')');
			if (st && st[1] == ' ' && (st[2] == 'Z' || st[2] == 'X'))
				code = ab_sup_parse_stat_exit(buf);
		}
		if (code < 0) /* reaped meanwhile */
			code = exit_info(t->pidfd);
	}
	json_t *ev = json_object();
	json_object_set_new(ev, "event", json_string("exit"));
	json_object_set_new(ev, "pid", json_integer(t->pid));
	if (code >= 0 && WIFEXITED(code))
		json_object_set_new(ev, "status", json_integer(WEXITSTATUS(code)));
	else if (code >= 0 && WIFSIGNALED(code))
		json_object_set_new(ev, "signal", json_integer(WTERMSIG(code)));
	json_object_set_new(ev, "ms", json_integer((json_int_t)(ab_now_ms() - t->t0)));
	ab_audit_emit(t->sup->audit, ev);
}

static void untrack(ab_supervisor *s, size_t i)
{
	tracked *t = s->tr[i];
	if (s->loop)
		ab_loop_unwatch(s->loop, t->pidfd);
	close(t->pidfd);
	free(t);
	s->tr[i] = s->tr[--s->ntr];
}

static void on_pidfd(ab_loop *l, int fd, unsigned ev, void *data)
{
	tracked *t = data;
	ab_supervisor *s = t->sup;
	emit_exit(t);
	for (size_t i = 0; i < s->ntr; i++) {
		if (s->tr[i] == t) {
			untrack(s, i);
			return;
		}
	}
}

static tracked *find_tracked(ab_supervisor *s, pid_t tgid)
{
	for (size_t i = 0; i < s->ntr; i++)
		if (s->tr[i]->tgid == tgid)
			return s->tr[i];
	return NULL;
}

/* ------------------------------------------------------------ answers */

static void answer(ab_supervisor *s, uint64_t id, int error, bool cont)
{
	memset(s->resp, 0, s->resp_size);
	s->resp->id = id;
	s->resp->error = cont ? 0 : -error;
	s->resp->flags = cont ? SECCOMP_USER_NOTIF_FLAG_CONTINUE : 0;
	/* ENOENT: the caller was interrupted or died meanwhile */
	(void)ioctl(s->fd, SECCOMP_IOCTL_NOTIF_SEND, s->resp);
}

static bool still_valid(ab_supervisor *s, uint64_t id)
{
	return ioctl(s->fd, SECCOMP_IOCTL_NOTIF_ID_VALID, &id) == 0;
}

/* ------------------------------------------------------------ denials */

static site *find_site(ab_supervisor *s, pid_t tid, int nr, uint64_t ip, bool *fresh)
{
	uint64_t h = (uint64_t)tid * 0x9e3779b97f4a7c15ull ^ (uint64_t)nr * 0xc2b2ae3d27d4eb4full ^
		     ip * 0x165667b19e3779f9ull;
	*fresh = false;
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
	answer(s, rq->id, e, false);
	bool fresh;
	site *x = find_site(s, (pid_t)rq->pid, nr, rq->data.instruction_pointer, &fresh);
	if (!x) {
		if (nr >= 0 && nr <= AB_SECCOMP_MAX_KNOWN_NR)
			s->overflow[nr]++;
		return;
	}
	x->count++;
	if (!fresh)
		return;
	long ppid, tgid;
	proc_ids((pid_t)rq->pid, &x->pid, &ppid, &tgid);
	proc_comm((pid_t)rq->pid, x->comm, sizeof(x->comm));
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
	json_object_set_new(ev, "comm", bytes_json(x->comm));
	json_object_set_new(ev, "ip", json_string(ip));
	ab_audit_emit(s->audit, ev);
}

/* ------------------------------------------------------------ execs */


static void read_argv(pid_t tid, uint64_t argv_addr, exec_rec *r)
{
	uint64_t ptrs[AB_SUP_ARGV_MAX + 1];
	size_t have = 0;
	/* the pointer array, page by page */
	while (argv_addr && have < AB_ARRAY_SIZE(ptrs)) {
		uint64_t a = argv_addr + have * sizeof(uint64_t);
		size_t room = (AB_ARRAY_SIZE(ptrs) - have) * sizeof(uint64_t);
		size_t chunk = 4096 - (size_t)(a & 4095);
		if (chunk > room)
			chunk = room;
		chunk -= chunk % sizeof(uint64_t);
		if (!chunk)
			chunk = sizeof(uint64_t);
		ssize_t n = remote_read(tid, a, &ptrs[have], chunk);
		if (n < (ssize_t)sizeof(uint64_t))
			break;
		size_t got = (size_t)n / sizeof(uint64_t);
		bool end = false;
		for (size_t i = 0; i < got && !end; i++)
			end = ptrs[have + i] == 0;
		have += got;
		if (end)
			break;
	}
	for (size_t i = 0; i < have && ptrs[i]; i++) {
		if (r->argc == AB_SUP_ARGV_MAX) {
			r->truncated = true;
			break;
		}
		int st = remote_str(tid, ptrs[i], r->argv[r->argc], AB_SUP_ARG_MAX);
		if (st < 0) {
			r->truncated = true;
			break;
		}
		r->truncated |= st == 1;
		r->argc++;
	}
}

/* Does PATH exist inside the sandbox (as seen by TID)?  Absolute symlinks
 * resolve inside its root (RESOLVE_IN_ROOT).  false only for ENOENT/ENOTDIR. */
static bool exists_inside(pid_t tid, const char *cwd, const char *path)
{
	char buf[2048], root[64];
	if (path[0] == '/')
		snprintf(buf, sizeof(buf), "%s", path);
	else if ((size_t)snprintf(buf, sizeof(buf), "%s/%s", cwd, path) >= sizeof(buf))
		return true;
	snprintf(root, sizeof(root), "/proc/%d/root", (int)tid);
	_cleanup_close_ int rfd = open(root, O_PATH | O_CLOEXEC);
	if (rfd < 0)
		return true;
	struct open_how how = {.flags = O_PATH | O_CLOEXEC, .resolve = RESOLVE_IN_ROOT};
	int fd = (int)syscall(SYS_openat2, rfd, buf, &how, sizeof(how));
	if (fd >= 0) {
		close(fd);
		return true;
	}
	return errno != ENOENT && errno != ENOTDIR;
}

/* exists_inside, with the absolute paths found in the last second
 * remembered (a script running /bin/true 5,000 times checks it once a
 * second).  A path removed meanwhile still counts as found for that long: the
 * record then shows an exec that failed, with its process's exit. */
static bool exists_cached(ab_supervisor *s, pid_t tid, const char *cwd, const char *path)
{
	uint64_t now = ab_now_ms();
	bool abs = path[0] == '/';
	for (size_t i = 0; abs && i < AB_ARRAY_SIZE(s->seen); i++)
		if (now - s->seen[i].at_ms < 1000 && strcmp(s->seen[i].path, path) == 0)
			return true;
	if (!exists_inside(tid, cwd, path))
		return false;
	if (abs && strlen(path) < sizeof(s->seen[0].path)) {
		unsigned k = s->seen_next++ % AB_ARRAY_SIZE(s->seen);
		snprintf(s->seen[k].path, sizeof(s->seen[k].path), "%s", path);
		s->seen[k].at_ms = now;
	}
	return true;
}

static void track(ab_supervisor *s, exec_rec *m)
{
	tracked *t = find_tracked(s, m->tgid);
	if (t) { /* a second exec in the same process: the exit belongs to it */
		t->t0 = ab_now_ms();
		return;
	}
	if (m->pidfd < 0)
		return;
	/* beyond the cap (or out of memory) the exit goes unrecorded */
	t = s->ntr < AB_SUP_TRACKED_MAX ? calloc(1, sizeof(*t)) : NULL;
	tracked **v = t ? realloc(s->tr, (s->ntr + 1) * sizeof(*v)) : NULL;
	if (!v) {
		free(t);
		return;
	}
	s->tr = v;
	*t = (tracked){.sup = s, .tgid = m->tgid, .pid = m->pid, .pidfd = m->pidfd,
		       .t0 = ab_now_ms()};
	if (ab_loop_watch(s->loop, m->pidfd, AB_EV_READ, on_pidfd, t) < 0) {
		free(t);
		return;
	}
	m->pidfd = -1; /* the entry's now */
	s->tr[s->ntr++] = t;
}

static void log_exec(ab_supervisor *s, exec_rec *r)
{
	json_t *ev = json_object();
	json_object_set_new(ev, "event", json_string("exec"));
	json_object_set_new(ev, "pid", json_integer(r->pid));
	/* the parent is usually a shell the record already holds */
	tracked *parent = r->host_ppid > 0 ? find_tracked(s, (pid_t)r->host_ppid) : NULL;
	json_object_set_new(ev, "ppid",
			    json_integer(parent ? parent->pid : inner_pid_of(r->host_ppid)));
	json_object_set_new(ev, "cwd", bytes_json(r->cwd));
	json_object_set_new(ev, "path", bytes_json(r->path));
	json_t *argv = json_array();
	for (size_t i = 0; i < r->argc; i++)
		json_array_append_new(argv, bytes_json(r->argv[i]));
	json_object_set_new(ev, "argv", argv);
	if (r->truncated)
		json_object_set_new(ev, "truncated", json_true());
	ab_audit_emit(s->audit, ev);
	s->execs++;
	track(s, r);
	if (r->pidfd >= 0)
		close(r->pidfd);
	free(r);
}

static void drain_tracks(ab_supervisor *s)
{
	exec_rec *r;
	while (read(s->pipe[0], &r, sizeof(r)) == (ssize_t)sizeof(r))
		log_exec(s, r);
}

static void on_track(ab_loop *l, int fd, unsigned ev, void *data)
{
	drain_tracks(data);
}

/* The server thread's part: what goes away with the process (the arguments
 * with the exec, the ids and the cwd with a quick command's exit) is read
 * while it waits, some 20 microseconds; the line and the exit are the
 * loop's, in parallel with the exec. */
static void on_exec(ab_supervisor *s, const struct seccomp_notif *rq)
{
	pid_t tid = (pid_t)rq->pid;
	bool at = rq->data.nr == s->nr_execveat;
	uint64_t path_addr = at ? rq->data.args[1] : rq->data.args[0];
	uint64_t argv_addr = at ? rq->data.args[2] : rq->data.args[1];
	exec_rec *r = malloc(sizeof(*r));
	if (!r) {
		answer(s, rq->id, 0, true);
		return;
	}
	r->tid = r->tgid = tid;
	r->pid = r->host_ppid = -1;
	r->argc = 0;
	r->truncated = false;
	r->cwd[0] = '\0';
	if (remote_str(tid, path_addr, r->path, sizeof(r->path)) < 0)
		snprintf(r->path, sizeof(r->path), "?");
	read_argv(tid, argv_addr, r);
	exec_ids(r);
	char link[64];
	snprintf(link, sizeof(link), "/proc/%d/cwd", (int)tid);
	ssize_t n = readlink(link, r->cwd, sizeof(r->cwd) - 1);
	r->cwd[n > 0 ? n : 0] = '\0';
	bool found = true;
	if (at && r->path[0] == '\0') { /* fexecve: name the file behind the fd */
		snprintf(link, sizeof(link), "/proc/%d/fd/%d", (int)tid, (int)rq->data.args[0]);
		n = readlink(link, r->path, sizeof(r->path) - 1);
		r->path[n > 0 ? n : 0] = '\0';
	} else {
		/* execvp trying the next directory of PATH: not an exec */
		found = exists_cached(s, tid, r->cwd[0] ? r->cwd : "/", r->path);
	}
	/* all read: is it still the same caller, stopped in this very call?
	 * (then the pid behind the pidfd was not reused either).  The record
	 * goes to the loop before the answer, so the loop writes it while the
	 * exec runs. */
	bool valid = still_valid(s, rq->id);
	bool handed = valid && found && write(s->pipe[1], &r, sizeof(r)) == (ssize_t)sizeof(r);
	answer(s, rq->id, 0, true);
	if (handed)
		return;
	if (r->pidfd >= 0)
		close(r->pidfd);
	free(r);
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
	while (!__atomic_load_n(&s->stop, __ATOMIC_ACQUIRE)) {
		memset(s->req, 0, s->req_size);
		if (ioctl(s->fd, SECCOMP_IOCTL_NOTIF_RECV, s->req) < 0) {
			if (errno == ENOENT || errno == EINTR)
				continue; /* the caller went away; or the end */
			break;    /* no further notification can be read */
		}
		const struct seccomp_notif *rq = s->req;
		bool exec = rq->data.arch == AB_NATIVE_ARCH &&
			    (rq->data.nr == s->nr_execve || rq->data.nr == s->nr_execveat);
		if (exec && s->pol->notify_exec)
			on_exec(s, rq);
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
	s->fd = s->pipe[0] = s->pipe[1] = -1;
	s->pol = pol;
	s->audit = audit;
	struct seccomp_notif_sizes sz = {0};
	if (syscall(SYS_seccomp, SECCOMP_GET_NOTIF_SIZES, 0, &sz) < 0)
		return ab_fail(err, errno, "seccomp: user notification sizes");
	s->req_size = sz.seccomp_notif > sizeof(*s->req) ? sz.seccomp_notif : sizeof(*s->req);
	s->resp_size = sz.seccomp_notif_resp > sizeof(*s->resp) ? sz.seccomp_notif_resp
								 : sizeof(*s->resp);
	s->req = calloc(1, s->req_size);
	s->resp = calloc(1, s->resp_size);
	s->sites = calloc(SITE_SLOTS, sizeof(*s->sites));
	s->overflow = calloc(AB_SECCOMP_MAX_KNOWN_NR + 1, sizeof(*s->overflow));
	if (!s->req || !s->resp || !s->sites || !s->overflow) {
		free(s->req);
		free(s->resp);
		free(s->sites);
		free(s->overflow);
		return ab_fail(err, ENOMEM, "supervisor");
	}
	s->nr_execve = SYS_execve;
	s->nr_execveat = SYS_execveat;
	for (int nr = 0; nr <= AB_SECCOMP_MAX_KNOWN_NR; nr++)
		s->errnos[nr] = (int16_t)ab_seccomp_deny_errno(pol, nr);
	*out = TAKE_PTR(s);
	return 0;
}

int ab_supervisor_attach(ab_supervisor *s, ab_loop *loop, int fd, ab_err *err)
{
	if (s->fd >= 0) {
		close(fd);
		return ab_fail(err, EBUSY, "supervisor: a second listener");
	}
	s->loop = loop;
	s->fd = fd;
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
	if (ab_loop_watch(loop, s->pipe[0], AB_EV_READ, on_track, s) < 0)
		return ab_fail(err, errno, "supervisor: event loop");
	int r = pthread_create(&s->th, NULL, serve_thread, s);
	if (r != 0)
		return ab_fail(err, r, "supervisor: start the thread");
	s->started = true;
	return 0;
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

void ab_supervisor_finish(ab_supervisor *s)
{
	if (!s)
		return;
	stop_thread(s);
	if (s->pipe[0] >= 0) {
		drain_tracks(s);
		if (s->loop)
			ab_loop_unwatch(s->loop, s->pipe[0]);
	}
	while (s->ntr) {
		emit_exit(s->tr[s->ntr - 1]);
		untrack(s, s->ntr - 1);
	}
	char name[48];
	for (size_t i = 0; i < SITE_SLOTS; i++) {
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
		json_object_set_new(ev, "comm", bytes_json(x->comm));
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
	if (s->suppressed) {
		json_t *ev = json_object();
		json_object_set_new(ev, "event", json_string("suppressed"));
		json_object_set_new(ev, "kind", json_string("syscall"));
		json_object_set_new(ev, "count", json_integer((json_int_t)s->suppressed));
		ab_audit_emit(s->audit, ev);
		s->suppressed = 0;
	}
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
	for (int i = 0; i < 2; i++)
		if (s->pipe[i] >= 0)
			close(s->pipe[i]);
	for (size_t i = 0; i < s->ntr; i++) {
		close(s->tr[i]->pidfd);
		free(s->tr[i]);
	}
	free(s->tr);
	free(s->req);
	free(s->resp);
	free(s->sites);
	free(s->overflow);
	free(s);
}
