/* SPDX-License-Identifier: MIT */
/*
 * Connect mediation (parent: the server thread and a pool of connect
 * threads), with notify_connect.
 *
 * Every connect of the sandbox is carried out here, on the caller's own
 * socket (pidfd_getfd) with the address read once, so what was checked is
 * what is connected.  A pathname unix address is resolved inside (the
 * caller's root and cwd, openat2 RESOLVE_IN_ROOT) and pinned (O_PATH); it is
 * refused (EACCES) unless a socket of the sandbox's own network namespace is
 * bound to that file (socket diagnostics) or the profile shares it
 * (unix_sockets): a host process's socket bound after the start.  The
 * connect goes to /proc/self/fd/PIN, as the sandbox's uid and gid.  A
 * blocking socket's is tried without blocking first; one that must wait (a
 * full backlog, a handshake under way) waits in a pool thread, and so does
 * an IP socket's connect to a port the Landlock rules do not list (the
 * pool's threads hold those rules on themselves: the kernel decides).
 */
#include "supervise_int.h"

#include "agentbox/container.h"
#include "agentbox/landlock.h"
#include "agentbox/plan.h"
#include "agentbox/unixsock.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

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
			e = connect(j->sock, (const struct sockaddr *)&j->addr, j->alen) == 0
				    ? 0
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
	if (getsockopt(j->sock, SOL_SOCKET, SO_SNDTIMEO, &tv, &tl) == 0 &&
	    (tv.tv_sec || tv.tv_usec))
		ms = tv.tv_sec > 86400 ? 86400000
				       : (int)(tv.tv_sec * 1000 + (tv.tv_usec + 999) / 1000);
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
int sup_connect_attach(ab_supervisor *s)
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
		sup_proc_ids(tid, &inner, &ppid, &tgid); /* before Linux 6.9: the process's */
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
	*o = (struct ours_file){.ino = x->stx_ino,
				.major = x->stx_dev_major,
				.minor = x->stx_dev_minor,
				.btime_sec = x->stx_btime.tv_sec,
				.btime_nsec = x->stx_btime.tv_nsec};
}

static void note_refused(ab_supervisor *s, pid_t tid, const char *full_path)
{
	char comm[16], key[sizeof(s->refused[0].path)];
	sup_proc_comm(tid, comm, sizeof(comm));
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
	json_object_set_new(ev, "path", sup_bytes_json(full_path));
	json_object_set_new(ev, "reason", json_string("bound outside the sandbox"));
	json_object_set_new(ev, "pid", json_integer(sup_inner_pid(s, tid)));
	json_object_set_new(ev, "comm", sup_bytes_json(comm));
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
	int r = sup_caller_base(tid, path, AT_FDCWD, base, sizeof(base));
	if (r < 0 || sup_join_raw(base, path, full, sizeof(full)) < 0)
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
	if (sup_statx_fd(j->pin, &x) < 0)
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
 * pidfd_getfd; kernel.yama.ptrace_scope 3 or a container's seccomp profile
 * refuses it): the connects inside
 * are refused from now on, and that is said once, not left silent. */
static void cannot_mediate(ab_supervisor *s, const char *call, int e)
{
	if (s->getfd_warned)
		return;
	s->getfd_warned = true;
	ab_ctr_facts f;
	char cause[512] = "", fix[512] = "";
	if (strcmp(call, "pidfd_getfd") == 0) {
		ab_ctr_detect(&f, geteuid() == 0);
		ab_ctr_advise(&f, AB_STEP_PIDFD_GETFD, e, cause, sizeof(cause), fix, sizeof(fix));
	}
	ab_warn("connect mediation cannot take a socket of the sandbox's (%s: %s%s%s): its "
		"connects are refused%s%s",
		call, strerror(e), cause[0] ? ": " : "", cause, fix[0] ? "; fix: " : "", fix);
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

#define CONN_DONE (-1) /* answered already, or the caller is gone */

/* The caller's address, read once (J->addr), and its socket, ours now
 * (J->sock): 0, the errno to answer, or CONN_DONE. */
static int conn_take(ab_supervisor *s, const struct seccomp_notif *rq, conn_job *j)
{
	pid_t tid = (pid_t)rq->pid;
	int len = (int)(uint32_t)rq->data.args[2];
	/* the kernel's own checks first, on one copy of the address */
	if (len < 0 || (size_t)len > sizeof(j->addr))
		return EINVAL;
	if (len && sup_remote_read(tid, rq->data.args[1], &j->addr, (size_t)len) != len)
		return EFAULT;
	j->alen = (socklen_t)len;
	int pidfd = caller_pidfd(tid);
	if (pidfd < 0) {
		if (pidfd != -ESRCH) /* ESRCH: the caller is gone */
			cannot_mediate(s, "pidfd_open", -pidfd);
		sup_answer(s, rq->id, EACCES, false);
		return CONN_DONE;
	}
	if (!sup_still_valid(s, rq->id)) {
		close(pidfd);
		return CONN_DONE; /* the caller went away (its tid may name another task now) */
	}
	j->sock = (int)syscall(SYS_pidfd_getfd, pidfd, (int)rq->data.args[0], 0);
	int ge = errno;
	int e = j->sock < 0 ? (ge == EBADF ? EBADF : EACCES) : 0;
	if (j->sock < 0 && ge != EBADF && ge != ESRCH)
		cannot_mediate(s, "pidfd_getfd", ge);
	close(pidfd);
	return e;
}

void sup_on_connect(ab_supervisor *s, const struct seccomp_notif *rq)
{
	conn_job j = {.id = rq->id,
		      .sock = -1,
		      .pin = -1,
		      .kuid = s->kuid,
		      .kgid = s->kgid,
		      .resp_size = s->resp_size};
	int e = conn_take(s, rq, &j);
	if (e == CONN_DONE)
		return;
	int domain = 0;
	socklen_t dl = sizeof(domain);
	if (!e && getsockopt(j.sock, SOL_SOCKET, SO_DOMAIN, &domain, &dl) < 0)
		e = errno == ENOTSOCK ? ENOTSOCK : EACCES;
	const struct sockaddr_un *un = (const struct sockaddr_un *)&j.addr;
	size_t off = offsetof(struct sockaddr_un, sun_path);
	if (!e && domain == AF_UNIX && (size_t)j.alen > off && un->sun_family == AF_UNIX &&
	    un->sun_path[0] != '\0') {
		size_t plen = strnlen(un->sun_path, (size_t)j.alen - off);
		e = conn_unix_path(s, (pid_t)rq->pid, &j, plen);
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
			if (s->learn && (done == 0 || done == EINPROGRESS))
				sup_learn_connected(s, (pid_t)rq->pid, j.sock,
						    (const struct sockaddr *)&j.addr);
			sup_answer(s, rq->id, done, false);
			conn_job_close(&j);
			return;
		}
		if (conn_spawn(&j))
			return; /* the pool owns the socket, the pin and the answer */
		e = EAGAIN;
	}
	if (e) {
		sup_answer(s, rq->id, e, false);
	} else if (s->learn) {
		/* noted between the connect and the answer, so before the caller
		 * can send anything to the proxy */
		int done = conn_connect(&j);
		if (done == 0 || done == EINPROGRESS)
			sup_learn_connected(s, (pid_t)rq->pid, j.sock,
					    (const struct sockaddr *)&j.addr);
		conn_answer(&j, s->resp, s->fd, done);
	} else {
		conn_do(&j, s->resp, s->fd);
	}
	conn_job_close(&j);
}

int sup_connect_configure(ab_supervisor *s, const struct ab_plan *plan, ab_err *err)
{
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
		if (m->kind != AB_MNT_BIND_RW || !m->src || !m->why ||
		    strcmp(m->why, "unix_sockets") != 0)
			continue;
		/* shared on purpose: connect mediation lets these through */
		char **v = realloc(s->shared, (s->nshared + 1) * sizeof(*v));
		if (!v)
			return ab_fail(err, ENOMEM, "supervisor");
		s->shared = v;
		if (!(v[s->nshared] = strdup(m->src)))
			return ab_fail(err, ENOMEM, "supervisor");
		s->nshared++;
	}
	return 0;
}

void sup_connect_finish(ab_supervisor *s)
{
	for (size_t i = 0; i < s->nrefused; i++)
		ab_audit_count_denial(s->audit, "socket", s->refused[i].path, s->refused[i].comm,
				      s->refused[i].n);
	s->nrefused = 0;
	if (s->refused_other) {
		sup_suppressed(s, "unix-socket", s->refused_other);
		ab_audit_count_denial(s->audit, "socket", "other paths", "?", s->refused_other);
		s->refused_other = 0;
	}
}
