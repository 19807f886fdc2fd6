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
 *   rename, renameat, renameat2 (notify_rename: a rendered credentials
 *                    file in the plan)  onto a rendered file: carried out
 *                    here, as the sandbox (see "renames" below); any other:
 *                    CONTINUE at once, after reading the new name.
 *   connect          (notify_connect) carried out here, on the caller's own
 *                    socket (pidfd_getfd) with the address read once, so
 *                    what was checked is what is connected.  A pathname unix
 *                    address is resolved inside (the caller's root and cwd,
 *                    openat2 RESOLVE_IN_ROOT) and pinned (O_PATH); it is
 *                    refused (EACCES) unless a socket of the sandbox's own
 *                    network namespace is bound to that file (socket
 *                    diagnostics) or the profile shares it (unix_sockets):
 *                    a host process's socket bound after the start.  The
 *                    connect goes to /proc/self/fd/PIN, as the sandbox's
 *                    uid and gid.  A blocking socket's is tried without
 *                    blocking first; one that must wait (a full backlog, a
 *                    handshake under way) waits in a pool thread, and so
 *                    does an IP socket's connect to a port the Landlock
 *                    rules do not list (the pool's threads hold those rules
 *                    on themselves: the kernel decides).
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
#include "agentbox/landlock.h"
#include "agentbox/plan.h"
#include "agentbox/unixsock.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <time.h>
#include <linux/audit.h>
#include <linux/openat2.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef SECCOMP_IOCTL_NOTIF_SET_FLAGS
#define SECCOMP_IOCTL_NOTIF_SET_FLAGS SECCOMP_IOW(4, __u64)
#endif
#ifndef TMPFS_MAGIC
#define TMPFS_MAGIC 0x01021994
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
/* linux/nsfs.h (6.11): a pid of the caller's namespace, translated into the
 * pid namespace behind the fd (its process's pid there) */
#define AB_NS_GET_TGID_IN_PIDNS _IOR(0xb7, 0x9, int)
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
	long ppid;       /* inside (-1: outside, or unknown) */
	int pidfd;
	uint64_t at_ms;  /* when it exec'd (the exit's "ms" counts from here) */
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
	int pidns;       /* the sandbox's pid namespace: pids inside in one ioctl */
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
	uint64_t cred_suppressed; /* credentials-refused lines the rate limit kept out */
	uint64_t exec_lost;       /* exec records the loop could not take (a full pipe) */
	uint64_t execs;   /* the loop's */
	uint64_t batch;   /* the loop's timer: records are taken in batches */
	/* rendered credentials files (notify_rename): their paths inside, their
	 * owner on the host, the run's start (a new file's birth is after it) */
	char **rendered;
	size_t nrendered;
	uid_t kuid;
	gid_t kgid;
	bool no_groups_failed;
	struct timespec t0;
	struct rename_buf *rb; /* the thread's scratch */
	/* connect mediation: the sandbox's NETLINK_SOCK_DIAG socket (-1: none,
	 * then only shared sockets are reachable by path), the host paths of
	 * the profile's unix_sockets, the refused paths for the summary */
	int diag;
	struct ours_file {
		uint64_t ino;
		uint32_t major, minor;
		int64_t btime_sec;
		uint32_t btime_nsec;
	} ours[64];
	unsigned ours_next;
	bool getfd_warned;
	int root;        /* the sandbox's root (O_PATH), from the first caller */
	int ll_net;      /* the plan's Landlock port rules (-1: none) */
	uint16_t *tcp_ports; /* ... the ports they list */
	size_t ntcp_ports;
	char **shared;
	size_t nshared;
	struct {
		char path[AB_SUP_ARG_MAX];
		char comm[16];
		uint64_t n;
	} refused[16];
	size_t nrefused;
	uint64_t refused_other;
	/* the thread's: paths that existed inside, recently (execvp check) */
	struct {
		char path[AB_SUP_ARG_MAX];
		uint64_t at_ms;
	} seen[32];
	unsigned seen_next;
};

#define SITE_SLOTS (2 * AB_SUP_SITES_MAX)

/* a rename's paths as the caller gave them, the directory they are relative
 * to, joined; the new file's bytes */
struct rename_buf {
	char new_raw[PATH_MAX], old_raw[PATH_MAX];
	char nbase[PATH_MAX], obase[PATH_MAX];
	char norm[2 * PATH_MAX], nfull[2 * PATH_MAX + 2], ofull[2 * PATH_MAX + 2];
	char data[AB_SUP_RENDERED_MAX + 1];
};

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

static void proc_ids(pid_t tid, long *inner, long *host_ppid, long *tgid)
{
	char path[64], buf[2048];
	*inner = *host_ppid = *tgid = -1;
	snprintf(path, sizeof(path), "/proc/%d/status", (int)tid);
	if (ab_read_small(path, buf, sizeof(buf)) > 0)
		ab_sup_parse_status(buf, inner, host_ppid, tgid);
}

/* HOST_PID's process's pid inside: one ioctl on the sandbox's pid namespace
 * (Linux 6.11), else its status file */
static long inner_pid_of(const ab_supervisor *s, long host_pid)
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
	proc_ids((pid_t)host_pid, &inner, &ppid, &tgid);
	return inner;
}

/* The ids of an exec'ing thread without rendering all of /proc/TID/status
 * (10 us): a pidfd (kept for the exit), the pid inside from the namespace
 * (or the pidfd's fdinfo), PIDFD_GET_INFO (6.13) for the parent.  A thread
 * that is not its process's leader, or an older kernel: the status file. */
static void exec_ids(const ab_supervisor *s, exec_rec *r)
{
	r->pidfd = (int)syscall(SYS_pidfd_open, r->tid, 0); /* EINVAL: not a leader */
	if (r->pidfd >= 0) {
		int v = s->pidns >= 0 ? ioctl(s->pidns, AB_NS_GET_TGID_IN_PIDNS, (int)r->tid) : -1;
		char path[64], buf[512];
		snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", r->pidfd);
		if (v > 0)
			r->pid = v;
		else if (ab_read_small(path, buf, sizeof(buf)) > 0)
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
	ssize_t n = ab_read_small(path, out, size);
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
		if (ab_read_small(path, buf, sizeof(buf)) > 0) {
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
		answer(s, rq->id, e, false);
		if (nr >= 0 && nr <= AB_SECCOMP_MAX_KNOWN_NR)
			s->overflow[nr]++;
		return;
	}
	x->count++;
	if (fresh) {
		/* read who it is while the caller still waits for the answer:
		 * a denied call just before exit would otherwise race the reap */
		x->pid = inner_pid_of(s, (long)rq->pid);
		proc_comm((pid_t)rq->pid, x->comm, sizeof(x->comm));
	}
	answer(s, rq->id, e, false);
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
		t->t0 = m->at_ms;
		return;
	}
	if (m->pidfd < 0)
		return;
	/* gone before its batch was taken (a short command): its exit now */
	struct pollfd p = {.fd = m->pidfd, .events = POLLIN};
	if (poll(&p, 1, 0) == 1) {
		tracked gone = {.sup = s, .tgid = m->tgid, .pid = m->pid, .pidfd = m->pidfd,
				.t0 = m->at_ms};
		emit_exit(&gone);
		return;
	}
	/* beyond the cap (or out of memory) the exit goes unrecorded */
	t = s->ntr < AB_SUP_TRACKED_MAX ? calloc(1, sizeof(*t)) : NULL;
	tracked **v = t ? realloc(s->tr, (s->ntr + 1) * sizeof(*v)) : NULL;
	if (!v) {
		free(t);
		return;
	}
	s->tr = v;
	*t = (tracked){.sup = s, .tgid = m->tgid, .pid = m->pid, .pidfd = m->pidfd,
		       .t0 = m->at_ms};
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
	json_object_set_new(ev, "ppid", json_integer(r->ppid));
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
	exec_rec *r[64];
	ssize_t n;
	do {
		n = read(s->pipe[0], r, sizeof(r));
		for (ssize_t i = 0; i < n / (ssize_t)sizeof(r[0]); i++)
			log_exec(s, r[i]);
	} while (n == (ssize_t)sizeof(r));
}

/* The records are taken AB_SUP_BATCH_MS (10 ms) after the first of a batch arrives,
 * not one by one: a script running short commands then wakes the loop once
 * for several of them, and most of their exits are already known when their
 * execs are logged (no watch, no wakeup of their own).  The loop's share of
 * the record's cost was the most of it (docs/performance.md). */
static void on_batch(ab_loop *l, uint64_t id, void *data)
{
	ab_supervisor *s = data;
	s->batch = 0;
	drain_tracks(s);
	(void)ab_loop_modify(l, s->pipe[0], AB_EV_READ);
}

static void on_track(ab_loop *l, int fd, unsigned ev, void *data)
{
	ab_supervisor *s = data;
	if (s->batch)
		return;
	s->batch = ab_loop_timer(l, AB_SUP_BATCH_MS, on_batch, s);
	if (!s->batch) { /* no timer (out of memory): at once */
		drain_tracks(s);
		return;
	}
	(void)ab_loop_modify(l, fd, 0);
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
	r->at_ms = ab_now_ms();
	r->argc = 0;
	r->truncated = false;
	r->cwd[0] = '\0';
	if (remote_str(tid, path_addr, r->path, sizeof(r->path)) < 0)
		snprintf(r->path, sizeof(r->path), "?");
	read_argv(tid, argv_addr, r);
	exec_ids(s, r);
	/* now: the parent may be gone when the batch is taken */
	r->ppid = inner_pid_of(s, r->host_ppid);
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
	if (valid && found) /* 131,072 records behind: counted, never silent */
		s->exec_lost++;
	if (r->pidfd >= 0)
		close(r->pidfd);
	free(r);
}

/* ------------------------------------------------------------ renames */

/*
 * A rendered credentials file (docs/credentials.md) is a mount point inside:
 * a harness that saves a refreshed login by writing a new file next to it
 * and renaming that over it gets EBUSY from the kernel.  With notify_rename
 * every rename notifies.  One whose target is not exactly a rendered file
 * (the common case: decided on the new name's last component alone, then on
 * the whole path) continues: the kernel does it, as without agentbox.  One
 * onto a rendered file is carried out here, as the sandbox: the new file's
 * bytes are copied into the rendered copy and the new file is removed.
 *
 * The supervisor runs outside Landlock and may be root, so it must not be a
 * confused deputy.  It only ever copies a file the sandbox itself made into
 * the sandbox's own copy:
 *   - every path is resolved in the caller's root (/proc/TID/root,
 *     RESOLVE_IN_ROOT), with no symlink and no magic link anywhere on the
 *     way (RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS, O_NOFOLLOW);
 *   - the new file (ab_sup_rename_refusal) is a regular file with one link,
 *     owned by the sandbox's host uid, born after the sandbox started (so
 *     the sandbox made it, or moved it there: it could write and remove
 *     files in that directory itself, agentbox's Landlock rules grant
 *     writing as a whole), at most 64 KiB, not a mount point, in the same
 *     directory (and mount) as the target;
 *   - the target is a tmpfs file that is a mount point, with no name left
 *     anywhere (its staging name was removed once it was mounted), owned by
 *     the sandbox's uid: the rendered copy in the sandbox's staging memory,
 *     which the sandbox can rewrite in place anyway;
 *   - it reads and removes the new file with the sandbox's uid and gid on
 *     the file system (carry_out_as_sandbox), so only if the sandbox may;
 *   - anything else is left to the kernel (CONTINUE), which answers as
 *     before (EBUSY for the mount point) with every check of its own: a
 *     second thread of the caller changing the paths meanwhile gets nothing
 *     the caller could not do itself.
 * What is copied is the sandbox's own (placeholders: it never holds real
 * values); the real tokens reach the host file only through the proxy's
 * capture of the token response (src/egress/broker.c).  Nothing of the content is
 * logged.
 */

static bool same_file(const struct statx *a, const struct statx *b)
{
	return a->stx_dev_major == b->stx_dev_major && a->stx_dev_minor == b->stx_dev_minor &&
	       a->stx_ino == b->stx_ino;
}

int ab_supervisor_configure(ab_supervisor *s, const struct ab_plan *plan, ab_err *err)
{
	s->kuid = plan->map_kuid;
	s->kgid = plan->map_kgid;
	if (plan->seccomp.notify_connect && s->ll_net < 0 &&
	    ab_landlock_net_ruleset(&plan->landlock, &s->ll_net, err) < 0)
		return ab_err_prefix(err, "connect mediation");
	if (s->ll_net >= 0 && plan->landlock.ntcp_ports && !s->tcp_ports) {
		s->tcp_ports = calloc(plan->landlock.ntcp_ports, sizeof(*s->tcp_ports));
		if (!s->tcp_ports)
			return ab_fail(err, ENOMEM, "supervisor");
		memcpy(s->tcp_ports, plan->landlock.tcp_ports,
		       plan->landlock.ntcp_ports * sizeof(*s->tcp_ports));
		s->ntcp_ports = plan->landlock.ntcp_ports;
	}
	for (size_t i = 0; i < plan->nmounts; i++) {
		const ab_mount *m = &plan->mounts[i];
		if (m->kind == AB_MNT_BIND_RW && m->src && m->why &&
		    strcmp(m->why, "unix_sockets") == 0) {
			/* shared on purpose: connect mediation lets these through */
			char **v = realloc(s->shared, (s->nshared + 1) * sizeof(*v));
			if (!v)
				return ab_fail(err, ENOMEM, "supervisor");
			s->shared = v;
			if (!(v[s->nshared] = strdup(m->src)))
				return ab_fail(err, ENOMEM, "supervisor");
			s->nshared++;
			continue;
		}
		if (m->kind != AB_MNT_CONTENT || !(m->flags & AB_MNT_F_RENDER))
			continue;
		char **v = realloc(s->rendered, (s->nrendered + 1) * sizeof(*v));
		if (!v)
			return ab_fail(err, ENOMEM, "supervisor");
		s->rendered = v;
		if (!(v[s->nrendered] = strdup(m->dst)))
			return ab_fail(err, ENOMEM, "supervisor");
		s->nrendered++;
	}
	if (s->nrendered && !s->rb && !(s->rb = malloc(sizeof(*s->rb))))
		return ab_fail(err, ENOMEM, "supervisor");
	return 0;
}

/* The last component of PATH when it names something (not "." or "..", no
 * trailing slash), else NULL. */
static const char *plain_last(const char *path)
{
	const char *b = strrchr(path, '/');
	b = b ? b + 1 : path;
	return *b && strcmp(b, ".") != 0 && strcmp(b, "..") != 0 ? b : NULL;
}

static bool rendered_name(const ab_supervisor *s, const char *name)
{
	for (size_t i = 0; i < s->nrendered; i++) {
		const char *b = strrchr(s->rendered[i], '/');
		if (b && strcmp(b + 1, name) == 0)
			return true;
	}
	return false;
}

/* The directory a relative PATH of TID is relative to (DFD: AT_FDCWD or an
 * fd of TID), as a path inside; "" for an absolute PATH. */
static int caller_base(pid_t tid, const char *path, int dfd, char *out, size_t size)
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
static int join_raw(const char *base, const char *path, char *out, size_t size)
{
	int n = path[0] == '/' ? snprintf(out, size, "%s", path)
			       : snprintf(out, size, "%s/%s", base, path);
	return n < 0 || (size_t)n >= size ? -ENAMETOOLONG : 0;
}

/* The directory FULL's last component is in, opened (O_PATH) inside ROOT;
 * *NAME: that component. */
static int open_parent(int root, char *full, const char **name)
{
	char *slash = strrchr(full, '/');
	*slash = '\0';
	*name = slash + 1;
	struct open_how how = {.flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
			       .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS |
					  RESOLVE_NO_MAGICLINKS};
	int fd = (int)syscall(SYS_openat2, root, full[0] ? full : "/", &how, sizeof(how));
	return fd < 0 ? -errno : fd;
}

static int statx_fd(int fd, struct statx *x)
{
	memset(x, 0, sizeof(*x));
	return statx(fd, "", AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW,
		     STATX_BASIC_STATS | STATX_BTIME | STATX_MNT_ID, x) < 0 ? -errno : 0;
}

/* An O_PATH fd opened again for reading or writing (it is a regular file). */
static int reopen(int fd, int flags)
{
	char p[64];
	snprintf(p, sizeof(p), "/proc/self/fd/%d", fd);
	int r = open(p, flags | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
	return r < 0 ? -errno : r;
}

/* Outcomes of carry_out */
#define RN_GONE (-1)    /* the notification is no longer valid: nothing was done */
#define RN_REFUSED (-2) /* not carried out (*WHY): the kernel's turn (EBUSY) */

/* The rename of OLD (relative to ODFD) onto the rendered file whose path
 * the caller gave as s->rb->new_raw (relative to s->rb->nbase): carried
 * out (0; EIO when the copy failed after the new file was removed), or
 * RN_REFUSED (*WHY), or RN_GONE.  Runs as the sandbox's uid and gid on the
 * file system (as_sandbox). */
static int carry_out(ab_supervisor *s, uint64_t id, pid_t tid, int odfd, uint64_t oaddr,
		     const char **why)
{
	struct rename_buf *b = s->rb;
	*why = "the new file's path cannot be read";
	if (remote_str(tid, oaddr, b->old_raw, sizeof(b->old_raw)) != 0 || !plain_last(b->old_raw) ||
	    caller_base(tid, b->old_raw, odfd, b->obase, sizeof(b->obase)) < 0 ||
	    join_raw(b->obase, b->old_raw, b->ofull, sizeof(b->ofull)) < 0 ||
	    join_raw(b->nbase, b->new_raw, b->nfull, sizeof(b->nfull)) < 0)
		return RN_REFUSED;
	char rootp[64];
	snprintf(rootp, sizeof(rootp), "/proc/%d/root", (int)tid);
	*why = "a path cannot be resolved inside the sandbox without symlinks";
	_cleanup_close_ int root = open(rootp, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (root < 0)
		return RN_REFUSED;
	const char *oname, *nname;
	_cleanup_close_ int odir = open_parent(root, b->ofull, &oname);
	_cleanup_close_ int ndir = open_parent(root, b->nfull, &nname);
	if (odir < 0 || ndir < 0)
		return RN_REFUSED;
	_cleanup_close_ int src = openat(odir, oname, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	_cleanup_close_ int tgt = openat(ndir, nname, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	struct statx xs, xsd, xt, xtd;
	struct statfs fs;
	if (src < 0 || tgt < 0 || statx_fd(src, &xs) < 0 || statx_fd(odir, &xsd) < 0 ||
	    statx_fd(tgt, &xt) < 0 || statx_fd(ndir, &xtd) < 0 || fstatfs(tgt, &fs) < 0)
		return RN_REFUSED;
	*why = ab_sup_rename_refusal(&xs, &xsd, &xt, &xtd, fs.f_type == TMPFS_MAGIC, s->kuid,
				     s->t0.tv_sec, (uint32_t)s->t0.tv_nsec);
	if (*why)
		return RN_REFUSED;
	*why = "the new file cannot be read";
	_cleanup_close_ int rfd = reopen(src, O_RDONLY);
	size_t len = 0;
	for (ssize_t n = 1; rfd >= 0 && n > 0 && len < sizeof(b->data); len += (size_t)n) {
		n = read(rfd, b->data + len, sizeof(b->data) - len);
		if (n < 0 && errno == EINTR)
			n = 0;
		else if (n < 0)
			return RN_REFUSED;
		else if (n == 0)
			break;
	}
	if (rfd < 0 || len > AB_SUP_RENDERED_MAX)
		return RN_REFUSED;
	*why = "the rendered copy cannot be written";
	_cleanup_close_ int wfd = reopen(tgt, O_WRONLY);
	if (wfd < 0)
		return RN_REFUSED;
	/* all checked: is it still the same caller, stopped in this very call? */
	if (!still_valid(s, id))
		return RN_GONE;
	struct statx now;
	*why = "the new file cannot be removed";
	if (statx(odir, oname, AT_SYMLINK_NOFOLLOW, STATX_INO, &now) < 0 || !same_file(&now, &xs) ||
	    unlinkat(odir, oname, 0) < 0)
		return RN_REFUSED;
	/* the new file is gone: its bytes are the rendered copy's now */
	*why = "the rendered copy cannot be written";
	if (ftruncate(wfd, 0) < 0)
		return EIO;
	for (size_t off = 0; off < len;) {
		ssize_t n = pwrite(wfd, b->data + off, len - off, (off_t)off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return EIO;
		off += (size_t)n;
	}
	*why = NULL;
	return 0;
}

/* The file system checks of this thread as the sandbox's: its uid and gid
 * (setfsuid/setfsgid act on the calling thread only; for a root agentbox
 * the change from fsuid 0 also drops CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH
 * and CAP_FOWNER from its effective set, and its supplementary groups were
 * cleared when the thread started).  So the new file is read and removed
 * only if the sandbox's uid may; Landlock is the directory's: the sandbox
 * made or moved the new file there, so it holds the write rights on it,
 * which include reading and removing. */
static int carry_out_as_sandbox(ab_supervisor *s, uint64_t id, pid_t tid, int odfd,
				uint64_t oaddr, const char **why)
{
	uid_t ouid = (uid_t)setfsuid(s->kuid);
	gid_t ogid = (gid_t)setfsgid(s->kgid);
	int r = RN_REFUSED;
	*why = "cannot take the sandbox's uid";
	if ((uid_t)setfsuid((uid_t)-1) == s->kuid && (gid_t)setfsgid((gid_t)-1) == s->kgid)
		r = carry_out(s, id, tid, odfd, oaddr, why);
	setfsgid(ogid);
	setfsuid(ouid);
	return r;
}

static void log_rename(ab_supervisor *s, pid_t tid, const char *dst, const char *why)
{
	if (why && !ab_sup_bucket_take(&s->bucket, ab_now_ms(), AB_SUP_RATE_PER_S,
				       AB_SUP_RATE_BURST)) {
		s->cred_suppressed++;
		return;
	}
	long pid = inner_pid_of(s, tid);
	json_t *ev = json_object();
	json_object_set_new(ev, "event", json_string(why ? "credentials-refused"
							 : "credentials-saved"));
	json_object_set_new(ev, "path", bytes_json(dst));
	json_object_set_new(ev, "pid", json_integer(pid));
	if (why)
		json_object_set_new(ev, "reason", json_string(why));
	ab_audit_emit(s->audit, ev);
}

static void on_rename(ab_supervisor *s, const struct seccomp_notif *rq)
{
	pid_t tid = (pid_t)rq->pid;
	const __u64 *a = rq->data.args;
	int odfd = AT_FDCWD, ndfd = AT_FDCWD;
	uint64_t oaddr = a[1], naddr = a[3];
	unsigned flags = rq->data.nr == SYS_renameat2 ? (unsigned)a[4] : 0;
#ifdef SYS_rename
	if (rq->data.nr == SYS_rename) {
		oaddr = a[0];
		naddr = a[1];
	} else
#endif
	{
		odfd = (int)a[0];
		ndfd = (int)a[2];
	}
	struct rename_buf *b = s->rb;
	/* the common case, at once: not onto a rendered file (or flags the
	 * kernel would refuse anyway): the kernel does it */
	const char *nname;
	if (!b || s->no_groups_failed || flags || remote_str(tid, naddr, b->new_raw, sizeof(b->new_raw)) != 0 ||
	    !(nname = plain_last(b->new_raw)) || !rendered_name(s, nname) ||
	    caller_base(tid, b->new_raw, ndfd, b->nbase, sizeof(b->nbase)) < 0 ||
	    ab_sup_path_norm(b->nbase, b->new_raw, b->norm, sizeof(b->norm)) < 0) {
		answer(s, rq->id, 0, true);
		return;
	}
	const char *dst = NULL;
	for (size_t i = 0; i < s->nrendered && !dst; i++)
		if (strcmp(s->rendered[i], b->norm) == 0)
			dst = s->rendered[i];
	if (!dst) {
		answer(s, rq->id, 0, true);
		return;
	}
	const char *why = NULL;
	int e = carry_out_as_sandbox(s, rq->id, tid, odfd, oaddr, &why);
	if (e == RN_GONE)
		return; /* the caller went away: nothing was done */
	/* refused: the kernel does what it did before (EBUSY on the mount
	 * point; ENOENT, EXDEV, ENOTDIR... first), as the caller, with every
	 * check of its own: letting it continue grants nothing */
	answer(s, rq->id, e == RN_REFUSED ? 0 : e, e == RN_REFUSED);
	log_rename(s, tid, dst, why);
}

/* ------------------------------------------------------------ connects */

#ifndef PIDFD_THREAD
#define PIDFD_THREAD O_EXCL /* Linux 6.9: a pidfd for a thread */
#endif
#define CONNECT_WORKERS_MAX 32


/* A connect carried out for a caller: its socket (ours now: pidfd_getfd),
 * the address, the pinned socket file it names (or -1). */
typedef struct conn_job {
	uint64_t id;
	int sock, pin;
	struct sockaddr_storage addr;
	socklen_t alen;
	bool wait; /* the connect was made: wait for its handshake (conn_wait) */
	uid_t kuid;
	gid_t kgid;
	size_t resp_size;
} conn_job;

static void conn_job_close(conn_job *j)
{
	if (j->sock >= 0)
		close(j->sock);
	if (j->pin >= 0)
		close(j->pin);
	j->sock = j->pin = -1;
}

/* The connect itself, as the sandbox's uid and gid (this thread's effective
 * ids only: raw setresuid/setresgid act on the calling thread, and a root
 * agentbox keeps 0 as its saved id to come back to): the socket file's write
 * permission is checked for them, and a server inside sees them as its
 * peer's (SO_PEERCRED), not root's.  Then the answer. */
static int conn_connect(const conn_job *j)
{
	uid_t ou = geteuid();
	gid_t og = getegid();
	int e = EACCES;
	if (ou == j->kuid && og == j->kgid) {
		/* agentbox runs as the sandbox's user: nothing to change */
		e = connect(j->sock, (const struct sockaddr *)&j->addr, j->alen) == 0 ? 0 : errno;
	} else if (syscall(SYS_setresgid, -1, j->kgid, -1) == 0) {
		if (syscall(SYS_setresuid, -1, j->kuid, -1) == 0) {
			e = connect(j->sock, (const struct sockaddr *)&j->addr, j->alen) == 0 ? 0
											       : errno;
			(void)syscall(SYS_setresuid, -1, ou, -1);
		}
		(void)syscall(SYS_setresgid, -1, og, -1);
	}
	return e;
}

static void conn_answer(const conn_job *j, struct seccomp_notif_resp *resp, int notif, int e)
{
	memset(resp, 0, j->resp_size);
	resp->id = j->id;
	resp->error = -e;
	/* ENOENT: the caller was killed meanwhile */
	(void)ioctl(notif, SECCOMP_IOCTL_NOTIF_SEND, resp);
}

/* A TCP handshake a non-blocking attempt left under way (conn_try): wait
 * for it as the blocking connect would (SO_SNDTIMEO, else for good), and
 * its outcome is the answer (EINPROGRESS when the time runs out, as
 * Linux's own blocking connect says). */
static int conn_wait(const conn_job *j)
{
	struct timeval tv = {0};
	socklen_t tl = sizeof(tv);
	int ms = -1;
	if (getsockopt(j->sock, SOL_SOCKET, SO_SNDTIMEO, &tv, &tl) == 0 && (tv.tv_sec || tv.tv_usec))
		ms = tv.tv_sec > 86400 ? 86400000 : (int)(tv.tv_sec * 1000 + (tv.tv_usec + 999) / 1000);
	struct pollfd p = {.fd = j->sock, .events = POLLOUT};
	int r;
	while ((r = poll(&p, 1, ms)) < 0 && errno == EINTR)
		;
	if (r == 0)
		return EINPROGRESS;
	int soe = 0;
	socklen_t sl = sizeof(soe);
	if (r < 0 || getsockopt(j->sock, SOL_SOCKET, SO_ERROR, &soe, &sl) < 0)
		return EIO;
	return soe;
}

/* The connect, then its answer (a pool thread: J->wait is a handshake
 * under way). */
static void conn_do(conn_job *j, struct seccomp_notif_resp *resp, int notif)
{
	conn_answer(j, resp, notif, j->wait ? conn_wait(j) : conn_connect(j));
}

/* A blocking socket's connect tried without blocking (O_NONBLOCK on the
 * caller's file for the one call, FL restored right after; the caller is
 * stopped in this very connect): 1 with *E the answer when it completed at
 * once (most do: a unix listener with room, a loopback handshake), 0 when it
 * must wait (J->wait set for a TCP handshake under way; a unix backlog that
 * is full: a blocking connect again), in the pool. */
static int conn_try(conn_job *j, int fl, int *e)
{
	if (fl < 0 || fcntl(j->sock, F_SETFL, fl | O_NONBLOCK) < 0)
		return 0;
	*e = conn_connect(j);
	(void)fcntl(j->sock, F_SETFL, fl);
	if (*e == EAGAIN && j->addr.ss_family == AF_UNIX)
		return 0; /* the listener's backlog is full: wait for room */
	if (*e != EINPROGRESS)
		return 1;
	struct pollfd p = {.fd = j->sock, .events = POLLOUT};
	int soe = 0;
	socklen_t sl = sizeof(soe);
	if (poll(&p, 1, 0) == 1 && getsockopt(j->sock, SOL_SOCKET, SO_ERROR, &soe, &sl) == 0) {
		*e = soe; /* the handshake is over already */
		return 1;
	}
	j->wait = true;
	return 0;
}

/* The connect pool: threads that carry out connects which may wait (a
 * blocking socket: a full backlog, a TCP handshake) or must hold the
 * sandbox's Landlock port rules (an IP socket), away from the server thread,
 * where every exec and denial of the sandbox waits its turn.  Each thread
 * enforces those rules on itself once (its own Landlock domain: no file
 * system rights, no scopes, so a unix connect is unaffected), then takes
 * jobs.  Made on first use, up to CONNECT_WORKERS_MAX; they live as long as
 * the process (they own nothing of the supervisor: the job carries its fds,
 * the pool its copies of the listener and the ruleset). */
static struct conn_pool {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	conn_job *q[CONNECT_WORKERS_MAX * 4];
	size_t head, n;
	unsigned threads, idle;
	int notif, ll;
	size_t resp_size;
} pool = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER, .notif = -1, .ll = -1};

static void *conn_thread(void *arg)
{
	(void)arg;
	sigset_t set;
	sigfillset(&set);
	pthread_sigmask(SIG_SETMASK, &set, NULL);
	struct seccomp_notif_resp *resp = calloc(1, pool.resp_size);
	/* the supplementary groups of a root agentbox are not the sandbox's */
	bool ready = resp && (geteuid() != 0 || syscall(SYS_setgroups, 0, NULL) == 0) &&
		     (pool.ll < 0 || ab_landlock_restrict_thread(pool.ll) == 0);
	for (;;) {
		pthread_mutex_lock(&pool.mu);
		pool.idle++;
		while (!pool.n)
			pthread_cond_wait(&pool.cv, &pool.mu);
		pool.idle--;
		conn_job *j = pool.q[pool.head];
		pool.head = (pool.head + 1) % AB_ARRAY_SIZE(pool.q);
		pool.n--;
		pthread_mutex_unlock(&pool.mu);
		if (ready) {
			conn_do(j, resp, pool.notif);
		} else {
			/* the checks cannot apply here: refused */
			struct seccomp_notif_resp r0 = {.id = j->id, .error = -EACCES};
			(void)ioctl(pool.notif, SECCOMP_IOCTL_NOTIF_SEND, &r0);
		}
		conn_job_close(j);
		free(j);
	}
	return NULL;
}

/* J to the pool (which owns its fds from then on); false when it cannot
 * take it (then J is still the caller's). */
static bool conn_spawn(conn_job *j)
{
	conn_job *w = malloc(sizeof(*w));
	if (!w)
		return false;
	pthread_mutex_lock(&pool.mu);
	bool ok = pool.notif >= 0 && pool.n < AB_ARRAY_SIZE(pool.q);
	if (ok && pool.idle <= pool.n && pool.threads < CONNECT_WORKERS_MAX) {
		pthread_attr_t at;
		pthread_t th;
		if (pthread_attr_init(&at) == 0) {
			pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
			pthread_attr_setstacksize(&at, 64 * 1024);
			if (pthread_create(&th, &at, conn_thread, NULL) == 0)
				pool.threads++;
			pthread_attr_destroy(&at);
		}
	}
	ok = ok && pool.threads > 0;
	if (ok) {
		*w = *j;
		pool.q[(pool.head + pool.n) % AB_ARRAY_SIZE(pool.q)] = w;
		pool.n++;
		pthread_cond_signal(&pool.cv);
		j->sock = j->pin = -1;
	}
	pthread_mutex_unlock(&pool.mu);
	if (!ok)
		free(w);
	return ok;
}

/* The pool's copies of the listener and the Landlock ruleset (attach). */
static int conn_pool_setup(ab_supervisor *s)
{
	pthread_mutex_lock(&pool.mu);
	int r = 0;
	if (pool.notif < 0) {
		pool.notif = fcntl(s->fd, F_DUPFD_CLOEXEC, 3);
		pool.ll = s->ll_net >= 0 ? fcntl(s->ll_net, F_DUPFD_CLOEXEC, 3) : -1;
		pool.resp_size = s->resp_size;
		if (pool.notif < 0 || (s->ll_net >= 0 && pool.ll < 0))
			r = -errno;
	} else {
		r = -EBUSY; /* one sandbox per process */
	}
	pthread_mutex_unlock(&pool.mu);
	return r;
}

/* A pidfd for the caller TID (its own fd table); -errno. */
static int caller_pidfd(pid_t tid)
{
	int fd = (int)syscall(SYS_pidfd_open, tid, PIDFD_THREAD);
	if (fd < 0 && errno == EINVAL) {
		long inner, ppid, tgid = -1;
		proc_ids(tid, &inner, &ppid, &tgid); /* before Linux 6.9: the process's */
		fd = tgid > 0 ? (int)syscall(SYS_pidfd_open, (pid_t)tgid, 0) : -1;
	}
	return fd < 0 ? -errno : fd;
}

static bool shared_socket(const ab_supervisor *s, const struct statx *x)
{
	for (size_t i = 0; i < s->nshared; i++) {
		struct statx h;
		if (statx(AT_FDCWD, s->shared[i], 0, STATX_INO, &h) == 0 &&
		    h.stx_dev_major == x->stx_dev_major && h.stx_dev_minor == x->stx_dev_minor &&
		    h.stx_ino == x->stx_ino)
			return true;
	}
	return false;
}

/* Socket files a socket of the sandbox is bound to, as asked before: a
 * socket file is made by bind(2) and no other socket can ever be bound to it,
 * so the answer holds for the file's life; a file is known by its device,
 * inode and birth time (a reused inode number is born later).  Without a
 * birth time, nothing is remembered. */
static bool same_birth(const struct ours_file *o, const struct statx *x)
{
	return o->ino == x->stx_ino && o->major == x->stx_dev_major &&
	       o->minor == x->stx_dev_minor && o->btime_sec == x->stx_btime.tv_sec &&
	       o->btime_nsec == x->stx_btime.tv_nsec;
}

static bool ours_cached(const ab_supervisor *s, const struct statx *x)
{
	if (!(x->stx_mask & STATX_BTIME))
		return false;
	for (size_t i = 0; i < AB_ARRAY_SIZE(s->ours); i++)
		if (s->ours[i].ino && same_birth(&s->ours[i], x))
			return true;
	return false;
}

static void ours_remember(ab_supervisor *s, const struct statx *x)
{
	if (!(x->stx_mask & STATX_BTIME) || !x->stx_ino)
		return;
	struct ours_file *o = &s->ours[s->ours_next++ % AB_ARRAY_SIZE(s->ours)];
	*o = (struct ours_file){.ino = x->stx_ino, .major = x->stx_dev_major,
				.minor = x->stx_dev_minor, .btime_sec = x->stx_btime.tv_sec,
				.btime_nsec = x->stx_btime.tv_nsec};
}

static void note_refused(ab_supervisor *s, pid_t tid, const char *full_path)
{
	char comm[16], key[sizeof(s->refused[0].path)];
	proc_comm(tid, comm, sizeof(comm));
	size_t pl = strnlen(full_path, sizeof(key) - 1);
	memcpy(key, full_path, pl);
	key[pl] = '\0';
	const char *path = key;
	size_t i = 0;
	while (i < s->nrefused &&
	       (strcmp(s->refused[i].path, path) || strcmp(s->refused[i].comm, comm)))
		i++;
	if (i == s->nrefused) {
		if (i == AB_ARRAY_SIZE(s->refused)) {
			s->refused_other++;
			return;
		}
		memcpy(s->refused[i].path, key, sizeof(key));
		memcpy(s->refused[i].comm, comm, sizeof(comm));
		s->refused[i].n = 0;
		s->nrefused++;
	}
	if (s->refused[i].n++)
		return; /* the first of each is logged */
	if (!ab_sup_bucket_take(&s->bucket, ab_now_ms(), AB_SUP_RATE_PER_S, AB_SUP_RATE_BURST)) {
		s->suppressed++;
		return;
	}
	json_t *ev = json_object();
	json_object_set_new(ev, "event", json_string("denied"));
	json_object_set_new(ev, "kind", json_string("unix-socket"));
	json_object_set_new(ev, "path", bytes_json(full_path));
	json_object_set_new(ev, "reason", json_string("bound outside the sandbox"));
	json_object_set_new(ev, "pid", json_integer(inner_pid_of(s, tid)));
	json_object_set_new(ev, "comm", bytes_json(comm));
	ab_audit_emit(s->audit, ev);
}

/* A pathname unix address of the caller TID, resolved inside and checked:
 * J's address becomes /proc/self/fd/PIN.  0, or the errno to answer. */
static int conn_unix_path(ab_supervisor *s, pid_t tid, conn_job *j, size_t plen)
{
	struct sockaddr_un *un = (struct sockaddr_un *)&j->addr;
	char path[sizeof(un->sun_path) + 1], base[PATH_MAX], full[PATH_MAX + sizeof(path) + 1];
	memcpy(path, un->sun_path, plen);
	path[plen] = '\0'; /* the kernel's reading: up to a NUL, or the length */
	int r = caller_base(tid, path, AT_FDCWD, base, sizeof(base));
	if (r < 0 || join_raw(base, path, full, sizeof(full)) < 0)
		return r == -ENOTDIR ? ENOENT : ENAMETOOLONG;
	if (s->root < 0) {
		/* every process inside has the same root (chroot, pivot_root and
		 * new mount namespaces are denied): opened once, from a caller
		 * (init is not dumpable) */
		char rootp[64];
		snprintf(rootp, sizeof(rootp), "/proc/%d/root", (int)tid);
		s->root = open(rootp, O_PATH | O_DIRECTORY | O_CLOEXEC);
		if (s->root < 0)
			return EACCES;
	}
	int root = s->root;
	/* symlinks are followed as the kernel would, inside the sandbox's root;
	 * magic links (/proc/PID/fd/N) would be ours, not the caller's */
	struct open_how how = {.flags = O_PATH | O_CLOEXEC,
			       .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS};
	j->pin = (int)syscall(SYS_openat2, root, full, &how, sizeof(how));
	if (j->pin < 0)
		return errno == EXDEV ? EACCES : errno;
	struct statx x;
	if (statx_fd(j->pin, &x) < 0)
		return EACCES;
	if (!S_ISSOCK(x.stx_mode))
		return ECONNREFUSED; /* the kernel's answer for a file that is no socket */
	bool ours = ours_cached(s, &x);
	if (!ours && s->diag >= 0) {
		uint32_t dev = (x.stx_dev_major << 20) | (x.stx_dev_minor & 0xfffff);
		ours = ab_unixsock_bound_in(s->diag, dev, (uint32_t)x.stx_ino) == 1;
		if (ours)
			ours_remember(s, &x);
	}
	if (!ours && !shared_socket(s, &x)) {
		note_refused(s, tid, full);
		return EACCES;
	}
	/* the checked file, whatever happens to the path meanwhile */
	memset(un->sun_path, 0, sizeof(un->sun_path));
	int n = snprintf(un->sun_path, sizeof(un->sun_path), "/proc/self/fd/%d", j->pin);
	j->alen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + (size_t)n + 1);
	return 0;
}

/* A call connect mediation needs failed (a kernel before 5.6 has no
 * pidfd_getfd; kernel.yama.ptrace_scope 3 refuses it): the connects inside
 * are refused from now on, and that is said once, not left silent. */
static void cannot_mediate(ab_supervisor *s, const char *call, int e)
{
	if (s->getfd_warned)
		return;
	s->getfd_warned = true;
	ab_warn("connect mediation cannot take a socket of the sandbox's (%s: %s%s): its "
		"connects are refused",
		call, strerror(e), e == EPERM ? "; kernel.yama.ptrace_scope 3 forbids it" : "");
}

/* Would the sandbox's Landlock rules let this connect through?  Only the
 * plain yes is answered here, and then the server thread connects (without
 * blocking: conn_try for a blocking socket): an address of the socket's own
 * family, as long as Landlock requires, to a port a rule lists.  Landlock's TCP rules are
 * ports and nothing else, so a listed port is allowed whatever the socket
 * (UDP is not restricted at all).  Anything else goes to the pool, whose
 * threads hold the rules themselves. */
static bool port_listed(const ab_supervisor *s, const conn_job *j, int domain)
{
	uint16_t port;
	if (domain == AF_INET && j->alen >= sizeof(struct sockaddr_in) &&
	    j->addr.ss_family == AF_INET)
		port = ntohs(((const struct sockaddr_in *)&j->addr)->sin_port);
	else if (domain == AF_INET6 && j->alen >= 24 /* SIN6_LEN_RFC2133 */ &&
		 j->addr.ss_family == AF_INET6)
		port = ntohs(((const struct sockaddr_in6 *)&j->addr)->sin6_port);
	else
		return false;
	for (size_t i = 0; i < s->ntcp_ports; i++)
		if (s->tcp_ports[i] == port)
			return true;
	return false;
}

static void on_connect(ab_supervisor *s, const struct seccomp_notif *rq)
{
	pid_t tid = (pid_t)rq->pid;
	conn_job j = {.id = rq->id, .sock = -1, .pin = -1, .kuid = s->kuid,
		      .kgid = s->kgid, .resp_size = s->resp_size};
	int len = (int)(uint32_t)rq->data.args[2];
	int e = 0;
	/* the kernel's own checks first, on one copy of the address */
	if (len < 0 || (size_t)len > sizeof(j.addr))
		e = EINVAL;
	else if (len && remote_read(tid, rq->data.args[1], &j.addr, (size_t)len) != len)
		e = EFAULT;
	j.alen = (socklen_t)len;
	int pidfd = e ? -1 : caller_pidfd(tid);
	if (!e && pidfd < 0) {
		if (pidfd != -ESRCH) /* ESRCH: the caller is gone */
			cannot_mediate(s, "pidfd_open", -pidfd);
		answer(s, rq->id, EACCES, false);
		return;
	}
	if (!e && !still_valid(s, rq->id)) {
		close(pidfd);
		return; /* the caller went away (its tid may name another task now) */
	}
	if (!e) {
		j.sock = (int)syscall(SYS_pidfd_getfd, pidfd, (int)rq->data.args[0], 0);
		int ge = errno;
		e = j.sock < 0 ? (ge == EBADF ? EBADF : EACCES) : 0;
		if (j.sock < 0 && ge != EBADF && ge != ESRCH)
			cannot_mediate(s, "pidfd_getfd", ge);
	}
	if (pidfd >= 0)
		close(pidfd);
	int domain = 0;
	socklen_t dl = sizeof(domain);
	if (!e && getsockopt(j.sock, SOL_SOCKET, SO_DOMAIN, &domain, &dl) < 0)
		e = errno == ENOTSOCK ? ENOTSOCK : EACCES;
	const struct sockaddr_un *un = (const struct sockaddr_un *)&j.addr;
	size_t off = offsetof(struct sockaddr_un, sun_path);
	if (!e && domain == AF_UNIX && (size_t)len > off && un->sun_family == AF_UNIX &&
	    un->sun_path[0] != '\0') {
		size_t plen = strnlen(un->sun_path, (size_t)len - off);
		e = conn_unix_path(s, tid, &j, plen);
	}
	/* anything else (TCP to the proxy, an abstract or unnamed unix address,
	 * a wrong family): as given, on the caller's socket, in its network
	 * namespace; the kernel answers */
	int fl = e ? 0 : fcntl(j.sock, F_GETFL);
	bool nonblock = fl >= 0 && (fl & O_NONBLOCK);
	if (!e && (domain == AF_INET || domain == AF_INET6) && s->ll_net >= 0 &&
	    !port_listed(s, &j, domain)) {
		/* the sandbox's Landlock port rules hold for it: in a thread that
		 * enforces them on itself (the kernel decides, as for the sandbox) */
		if (conn_spawn(&j))
			return;
		e = EAGAIN;
	}
	if (!e && !nonblock) {
		/* most complete at once; the rest wait in the pool, never here */
		int done = 0;
		if (conn_try(&j, fl, &done)) {
			answer(s, rq->id, done, false);
			conn_job_close(&j);
			return;
		}
		if (conn_spawn(&j))
			return; /* the pool owns the socket, the pin and the answer */
		e = EAGAIN;
	}
	if (e)
		answer(s, rq->id, e, false);
	else
		conn_do(&j, s->resp, s->fd);
	conn_job_close(&j);
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
				break;    /* no further notification can be read */
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
		if (exec && s->pol->notify_exec)
			on_exec(s, rq);
		else if (rq->data.arch == AB_NATIVE_ARCH &&
			 ab_seccomp_notifies_rename(s->pol, rq->data.nr))
			on_rename(s, rq);
		else if (rq->data.arch == AB_NATIVE_ARCH &&
			 ab_seccomp_notifies_connect(s->pol, rq->data.nr))
			on_connect(s, rq);
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
	if (ab_loop_watch(loop, s->pipe[0], AB_EV_READ, on_track, s) < 0)
		return ab_fail(err, errno, "supervisor: event loop");
	int pr = s->pol->notify_connect ? conn_pool_setup(s) : 0;
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

void ab_supervisor_finish(ab_supervisor *s)
{
	if (!s)
		return;
	stop_thread(s);
	if (s->batch && s->loop)
		ab_loop_timer_cancel(s->loop, s->batch);
	s->batch = 0;
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
	if (s->exec_lost) {
		json_t *ev = json_object();
		json_object_set_new(ev, "event", json_string("suppressed"));
		json_object_set_new(ev, "kind", json_string("exec"));
		json_object_set_new(ev, "count", json_integer((json_int_t)s->exec_lost));
		ab_audit_emit(s->audit, ev);
		s->exec_lost = 0;
	}
	if (s->cred_suppressed) {
		json_t *ev = json_object();
		json_object_set_new(ev, "event", json_string("suppressed"));
		json_object_set_new(ev, "kind", json_string("credentials"));
		json_object_set_new(ev, "count", json_integer((json_int_t)s->cred_suppressed));
		ab_audit_emit(s->audit, ev);
		s->cred_suppressed = 0;
	}
	for (size_t i = 0; i < s->nrefused; i++)
		ab_audit_count_denial(s->audit, "socket", s->refused[i].path, s->refused[i].comm,
				      s->refused[i].n);
	s->nrefused = 0;
	if (s->refused_other) {
		json_t *ev = json_object();
		json_object_set_new(ev, "event", json_string("suppressed"));
		json_object_set_new(ev, "kind", json_string("unix-socket"));
		json_object_set_new(ev, "count", json_integer((json_int_t)s->refused_other));
		ab_audit_emit(s->audit, ev);
		ab_audit_count_denial(s->audit, "socket", "other paths", "?", s->refused_other);
		s->refused_other = 0;
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
	if (s->pidns >= 0)
		close(s->pidns);
	if (s->diag >= 0)
		close(s->diag);
	if (s->ll_net >= 0)
		close(s->ll_net);
	if (s->root >= 0)
		close(s->root);
	free(s->tcp_ports);
	for (size_t i = 0; i < s->nshared; i++)
		free(s->shared[i]);
	free(s->shared);
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
	for (size_t i = 0; i < s->nrendered; i++)
		free(s->rendered[i]);
	free(s->rendered);
	free(s->rb);
	free(s);
}
