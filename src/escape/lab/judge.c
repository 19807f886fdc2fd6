/* SPDX-License-Identifier: MIT */
/*
 * The judge of test-escape (harness process; two server threads plus one
 * short-lived thread per test HTTPS connection).  Inside the lab it serves:
 *   - canary listeners on [::]:{22,53,80,443,8080,LAB_JUDGE_PORT} (dual
 *     stack; with every address routed to the lab's loopback, any connection
 *     that leaves the sandbox without the proxy lands here), a UDP DNS
 *     canary on :53, fake ssh-agent/gpg-agent/D-Bus/docker sockets, the
 *     other end of the socket fd handed to agentbox, the outer pty;
 *   - the three test HTTPS upstreams on 127.0.0.1:8441..8443 (certificates
 *     from a per-run CA made in memory by src/creds/ca.c), which answer what
 *     arrived in the secret's header: "real", "other" or "none".
 * After the run, lab_judge() adds what it saw to the inside's results:
 * hits, changed or new host files, markers, the canary process, the outer
 * pty's input queue and identity, upstream counts.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "agentbox/ca.h"
#include "lab.h"

#define PTY_KEEP (256u << 10)
#define UP_HEAD_MAX (16u << 10)
#define UP_BODY_MAX (64u << 10)

void lab_hit_add(lab *L, const char *probe, const char *fmt, ...)
{
	pthread_mutex_lock(&L->mu);
	if (L->nhits < LAB_MAX_HITS) {
		lab_hit *h = &L->hits[L->nhits++];
		h->probe = probe;
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(h->what, sizeof(h->what), fmt, ap);
		va_end(ap);
	} else {
		L->hits_dropped++;
	}
	pthread_mutex_unlock(&L->mu);
}

/* ---------------------------------------------------------------- listeners */

static int add_listener(lab *L, int fd, const char *what, const char *probe)
{
	if (L->nlisten >= LAB_MAX_LISTEN) {
		close(fd);
		return -ENOSPC;
	}
	L->listen_fd[L->nlisten] = fd;
	snprintf(L->listen_what[L->nlisten], sizeof(L->listen_what[0]), "%s", what);
	L->listen_probe[L->nlisten++] = probe;
	return 0;
}

static int inet_socket(int type, uint16_t port, bool v4_loopback, ab_err *err)
{
	int fd = -1, one = 1, zero = 0;
	if (!v4_loopback) {
		fd = socket(AF_INET6, type | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
		if (fd >= 0) {
			setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
			setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
			struct sockaddr_in6 a = {.sin6_family = AF_INET6,
						 .sin6_port = htons(port),
						 .sin6_addr = in6addr_any};
			if (bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0)
				goto bound;
			close(fd);
		}
	}
	fd = socket(AF_INET, type | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return ab_fail(err, errno, "lab: socket");
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	struct sockaddr_in a4 = {.sin_family = AF_INET,
				 .sin_port = htons(port),
				 .sin_addr.s_addr =
					 htonl(v4_loopback ? INADDR_LOOPBACK : INADDR_ANY)};
	if (bind(fd, (struct sockaddr *)&a4, sizeof(a4)) < 0) {
		int e = errno;
		close(fd);
		return ab_fail(err, e, "lab: bind port %u", port);
	}
bound:
	if (type == SOCK_STREAM && listen(fd, 64) < 0) {
		int e = errno;
		close(fd);
		return ab_fail(err, e, "lab: listen port %u", port);
	}
	return fd;
}

static int unix_listener(lab *L, const char *path, ab_err *err)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	if (strlen(path) >= sizeof(a.sun_path))
		return ab_fail(err, ENAMETOOLONG, "lab: %s", path);
	strcpy(a.sun_path, path);
	char dir[PATH_MAX];
	snprintf(dir, sizeof(dir), "%s", path);
	char *slash = strrchr(dir, '/');
	if (slash && slash != dir) {
		*slash = '\0';
		mkdir(dir, 0700);
	}
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(fd, 16) < 0) {
		int e = errno;
		if (fd >= 0)
			close(fd);
		return ab_fail(err, e, "lab: fake agent %s", path);
	}
	ab_strv_push(&L->agent_sockets, path);
	return add_listener(L, fd, path, "CRD-01");
}

/* Which probe a connection to a judge listener is charged to. */
static const char *charge(const struct sockaddr_storage *local, uint16_t port, char *addr, size_t n)
{
	const void *ip;
	int fam = local->ss_family;
	struct in_addr v4;
	if (fam == AF_INET6) {
		const struct sockaddr_in6 *s6 = (const void *)local;
		if (IN6_IS_ADDR_V4MAPPED(&s6->sin6_addr)) {
			memcpy(&v4, &s6->sin6_addr.s6_addr[12], 4);
			fam = AF_INET;
			ip = &v4;
		} else {
			ip = &s6->sin6_addr;
		}
	} else {
		ip = &((const struct sockaddr_in *)local)->sin_addr;
	}
	inet_ntop(fam, ip, addr, (socklen_t)n);
	static const char *meta[] = {"169.254.169.254", "fd00:ec2::254", "100.100.100.200",
				     "169.254.170.2", "168.63.129.16"};
	for (size_t i = 0; i < AB_ARRAY_SIZE(meta); i++)
		if (strcmp(addr, meta[i]) == 0)
			return "NET-08";
	if (port == LAB_JUDGE_PORT)
		return "NET-06";
	if (port == 53)
		return "NET-02";
	return "NET-01";
}

static void on_accept(lab *L, int i)
{
	struct sockaddr_storage peer, local;
	socklen_t pl = sizeof(peer), ll = sizeof(local);
	int c = accept4(L->listen_fd[i], (struct sockaddr *)&peer, &pl, SOCK_CLOEXEC);
	if (c < 0)
		return;
	if (getsockname(c, (struct sockaddr *)&local, &ll) == 0 &&
	    (local.ss_family == AF_INET || local.ss_family == AF_INET6)) {
		char addr[64];
		uint16_t port = ntohs(((struct sockaddr_in *)&local)->sin_port);
		const char *p = charge(&local, port, addr, sizeof(addr));
		lab_hit_add(L, p, "judge listener %s%s%s:%u accepted a connection",
			    strchr(addr, ':') ? "[" : "", addr, strchr(addr, ':') ? "]" : "", port);
	} else {
		lab_hit_add(L, L->listen_probe[i], "fake agent %s accepted a connection",
			    L->listen_what[i]);
	}
	close(c);
}

/* The DNS canary.  agentbox's own resolver threads ask it at 127.0.0.1 (the
 * lab's resolv.conf) for allowed names only, so: a query sent to any other
 * address came from a sandbox that has the host's network (NET-01), and a
 * query for a name under the canary domain means a name that must never be
 * resolved was (NET-02).  Nothing is answered. */
static void dns_refuse(int fd, unsigned char *q, size_t n, const struct sockaddr_storage *peer,
		       socklen_t pl, const struct in6_addr *to6, const struct in_addr *to4, bool v4)
{
	q[2] |= 0x80; /* a response, RCODE 5 REFUSED */
	q[3] = (unsigned char)((q[3] & 0xf0) | 5);
	struct iovec iov = {q, n};
	union {
		char buf[CMSG_SPACE(sizeof(struct in6_pktinfo))];
		struct cmsghdr align;
	} u;
	memset(&u, 0, sizeof(u));
	struct msghdr mh = {.msg_name = (void *)peer,
			    .msg_namelen = pl,
			    .msg_iov = &iov,
			    .msg_iovlen = 1,
			    .msg_control = u.buf};
	struct cmsghdr *c = (struct cmsghdr *)u.buf;
	if (peer->ss_family == AF_INET6) {
		struct in6_pktinfo pi = {.ipi6_addr = *to6};
		mh.msg_controllen = CMSG_SPACE(sizeof(pi));
		c->cmsg_level = IPPROTO_IPV6;
		c->cmsg_type = IPV6_PKTINFO;
		c->cmsg_len = CMSG_LEN(sizeof(pi));
		memcpy(CMSG_DATA(c), &pi, sizeof(pi));
	} else if (v4) {
		struct in_pktinfo pi = {.ipi_spec_dst = *to4};
		mh.msg_controllen = CMSG_SPACE(sizeof(pi));
		c->cmsg_level = IPPROTO_IP;
		c->cmsg_type = IP_PKTINFO;
		c->cmsg_len = CMSG_LEN(sizeof(pi));
		memcpy(CMSG_DATA(c), &pi, sizeof(pi));
	}
	(void)sendmsg(fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
}

static void on_dns(lab *L, int fd)
{
	unsigned char q[512];
	char cbuf[256];
	struct sockaddr_storage peer;
	struct iovec iov = {q, sizeof(q)};
	struct msghdr mh = {.msg_name = &peer,
			    .msg_namelen = sizeof(peer),
			    .msg_iov = &iov,
			    .msg_iovlen = 1,
			    .msg_control = cbuf,
			    .msg_controllen = sizeof(cbuf)};
	ssize_t n = recvmsg(fd, &mh, MSG_DONTWAIT);
	if (n < 0)
		return;
	char dst[64] = "?";
	struct in6_addr to6 = IN6ADDR_ANY_INIT;
	struct in_addr to4 = {0};
	bool v4 = false;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
		if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_PKTINFO) {
			struct in_pktinfo pi;
			memcpy(&pi, CMSG_DATA(c), sizeof(pi));
			to4 = pi.ipi_addr;
			v4 = true;
			inet_ntop(AF_INET, &pi.ipi_addr, dst, sizeof(dst));
		} else if (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_PKTINFO) {
			struct in6_pktinfo pi;
			memcpy(&pi, CMSG_DATA(c), sizeof(pi));
			to6 = pi.ipi6_addr;
			if (IN6_IS_ADDR_V4MAPPED(&pi.ipi6_addr))
				inet_ntop(AF_INET, &pi.ipi6_addr.s6_addr[12], dst, sizeof(dst));
			else
				inet_ntop(AF_INET6, &pi.ipi6_addr, dst, sizeof(dst));
		}
	}
	char name[256];
	size_t o = 12, w = 0;
	while (n >= 13 && o < (size_t)n && q[o] && q[o] < 64 && w + q[o] + 1 < sizeof(name)) {
		size_t l = q[o++];
		if (o + l > (size_t)n)
			break;
		for (size_t k = 0; k < l; k++)
			name[w++] = (char)(q[o + k] >= 'A' && q[o + k] <= 'Z' ? q[o + k] + 32
									      : q[o + k]);
		name[w++] = '.';
		o += l;
	}
	name[w] = '\0';
	if (n >= 12)
		dns_refuse(fd, q, (size_t)n, &peer, mh.msg_namelen, &to6, &to4, v4);
	pthread_mutex_lock(&L->mu);
	L->dns_queries++;
	bool canary = strstr(name, LAB_CANARY_DOMAIN) != NULL;
	if (canary)
		L->dns_canary_queries++;
	pthread_mutex_unlock(&L->mu);
	if (strcmp(dst, "127.0.0.1") != 0 && strcmp(dst, "::1") != 0)
		lab_hit_add(L, "NET-01", "a DNS query to %s reached the host's network", dst);
	else if (canary)
		lab_hit_add(L, "NET-02",
			    "a DNS query for a canary name reached the host's resolver");
}

/* Server threads never die of a peer that went away: SIGPIPE is blocked in
 * them (a thread-directed signal then stays pending, harmlessly), while the
 * main thread keeps the default disposition agentbox inherits. */
static void block_sigpipe(void)
{
	sigset_t s;
	sigemptyset(&s);
	sigaddset(&s, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &s, NULL);
}

/* CRD-01 asks (a file in the workspace) for a host socket bound after the
 * sandbox started, which no start-time listing can hide: bind it now. */
static void late_socket(lab *L)
{
	char p[PATH_MAX + 64];
	snprintf(p, sizeof(p), "%s/%s", L->ws, AB_ESC_LATE_REQ);
	if (access(p, F_OK) != 0)
		return;
	L->late_bound = true;
	snprintf(p, sizeof(p), "%s/%s", L->ws, AB_ESC_LATE_SOCK);
	ab_err e = {0};
	(void)unix_listener(L, p, &e); /* not there: the probe says so */
}

static void *poll_thread(void *p)
{
	lab *L = p;
	block_sigpipe();
	while (!atomic_load(&L->stop)) {
		if (!L->late_bound)
			late_socket(L);
		struct pollfd pf[LAB_MAX_LISTEN + 4];
		int n = 0;
		for (int i = 0; i < L->nlisten; i++)
			pf[n++] = (struct pollfd){L->listen_fd[i], POLLIN, 0};
		int idns = n;
		pf[n++] = (struct pollfd){L->dns_fd[0], POLLIN, 0};
		int ipty = n;
		pf[n++] = (struct pollfd){L->pty_master, POLLIN, 0};
		int ipeer = n;
		pf[n++] = (struct pollfd){L->extra_peer, POLLIN, 0};
		if (poll(pf, (nfds_t)n, 200) <= 0)
			continue;
		for (int i = 0; i < L->nlisten; i++)
			if (pf[i].revents & POLLIN)
				on_accept(L, i);
		if (pf[idns].revents & POLLIN)
			on_dns(L, L->dns_fd[0]);
		if (pf[ipty].revents & (POLLIN | POLLHUP)) {
			char buf[4096];
			ssize_t k = read(L->pty_master, buf, sizeof(buf));
			if (k > 0 && L->pty_len + (size_t)k <= PTY_KEEP) {
				char *nb = realloc(L->pty_out, L->pty_len + (size_t)k + 1);
				if (nb) {
					memcpy(nb + L->pty_len, buf, (size_t)k);
					L->pty_len += (size_t)k;
					nb[L->pty_len] = '\0';
					L->pty_out = nb;
				}
			} else if (k <= 0) {
				struct timespec ts = {0, 20 * 1000 * 1000};
				nanosleep(&ts, NULL); /* slave closed: POLLHUP until reopened */
			}
		}
		if (pf[ipeer].revents & POLLIN) {
			char b[256];
			ssize_t k = recv(L->extra_peer, b, sizeof(b), MSG_DONTWAIT);
			if (k > 0)
				lab_hit_add(L, "FS-04",
					    "the socket fd handed to agentbox carried %zd bytes "
					    "from inside",
					    k);
			else if (k == 0) {
				close(L->extra_peer);
				L->extra_peer = -1;
			}
		}
	}
	return NULL;
}

/* ---------------------------------------------------------------- upstreams */

typedef struct conn_arg {
	lab *L;
	lab_upstream *u;
	int fd;
} conn_arg;

static bool has_secret(const char *buf, size_t n, const char *secret)
{
	return memmem(buf, n, secret, strlen(secret)) != NULL;
}

/* the value of header `name` in a request head, or NULL */
static const char *header_value(char *head, const char *name, size_t *len)
{
	size_t nl = strlen(name);
	for (char *l = strstr(head, "\r\n"); l && l[2]; l = strstr(l + 2, "\r\n")) {
		char *h = l + 2;
		if (strncasecmp(h, name, nl) == 0 && h[nl] == ':') {
			char *v = h + nl + 1;
			while (*v == ' ' || *v == '\t')
				v++;
			char *e = strstr(v, "\r\n");
			*len = e ? (size_t)(e - v) : strlen(v);
			return v;
		}
	}
	return NULL;
}

/* One read or write on an upstream connection: TLS, or plain HTTP (S NULL). */
static int up_read(SSL *s, int fd, char *buf, size_t n)
{
	return s ? SSL_read(s, buf, (int)n) : (int)recv(fd, buf, n, 0);
}

static void up_write(SSL *s, int fd, const char *buf, size_t n)
{
	if (s)
		SSL_write(s, buf, (int)n);
	else
		send(fd, buf, n, MSG_NOSIGNAL);
}

/* A request to a lab upstream: over TLS, or in plain HTTP (a first byte that
 * is not a TLS handshake record: a plain-HTTP request the proxy forwarded,
 * the lab's hosts map every port to the upstream's). */
static void *conn_thread(void *p)
{
	conn_arg *a = p;
	lab *L = a->L;
	block_sigpipe();
	lab_upstream *u = a->u;
	struct timeval tv = {5, 0};
	setsockopt(a->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(a->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	unsigned char first = 0;
	bool plain = recv(a->fd, &first, 1, MSG_PEEK) == 1 && first != 0x16;
	SSL *s = plain ? NULL : SSL_new(u->ctx);
	char *buf = malloc(UP_HEAD_MAX + UP_BODY_MAX + 1);
	size_t got = 0;
	if ((!plain && (!s || !SSL_set_fd(s, a->fd) || SSL_accept(s) != 1)) || !buf)
		goto out;
	char *end = NULL;
	while (got < UP_HEAD_MAX && !end) {
		int k = up_read(s, a->fd, buf + got, UP_HEAD_MAX - got);
		if (k <= 0)
			goto out;
		got += (size_t)k;
		buf[got] = '\0';
		end = strstr(buf, "\r\n\r\n");
	}
	if (!end)
		goto out;
	size_t vlen = 0, clen = 0;
	const char *cl = header_value(buf, "content-length", &vlen);
	if (cl)
		clen = strtoul(cl, NULL, 10);
	size_t want = (size_t)(end + 4 - buf) + (clen < UP_BODY_MAX ? clen : UP_BODY_MAX);
	while (got < want) {
		int k = up_read(s, a->fd, buf + got, want - got);
		if (k <= 0)
			break;
		got += (size_t)k;
	}
	buf[got] = '\0';
	const char *cls;
	if (has_secret(buf, got, L->secret)) {
		cls = "real";
		atomic_fetch_add(&u->real, 1);
	} else if (header_value(buf, LAB_SECRET_HEADER, &vlen) && vlen) {
		cls = "other";
		atomic_fetch_add(&u->other, 1);
	} else {
		cls = "none";
		atomic_fetch_add(&u->none, 1);
	}
	char body[256], resp[512];
	int bl =
		snprintf(body, sizeof(body), "{\"host\":\"%s\",\"secret\":\"%s\"}\n", u->name, cls);
	int rl = snprintf(resp, sizeof(resp),
			  "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
			  "Content-Length: %d\r\nConnection: close\r\n\r\n%s",
			  bl, body);
	up_write(s, a->fd, resp, (size_t)rl);
	if (s)
		SSL_shutdown(s);
out:
	free(buf);
	SSL_free(s);
	close(a->fd);
	free(a);
	return NULL;
}

static void *upstream_thread(void *p)
{
	lab *L = p;
	block_sigpipe();
	while (!atomic_load(&L->stop)) {
		struct pollfd pf[3];
		for (int i = 0; i < 3; i++)
			pf[i] = (struct pollfd){L->up[i].fd, POLLIN, 0};
		if (poll(pf, 3, 200) <= 0)
			continue;
		for (int i = 0; i < 3; i++) {
			if (!(pf[i].revents & POLLIN))
				continue;
			int c = accept4(L->up[i].fd, NULL, NULL, SOCK_CLOEXEC);
			if (c < 0)
				continue;
			atomic_fetch_add(&L->up[i].hits, 1);
			conn_arg *a = malloc(sizeof(*a));
			pthread_t t;
			pthread_attr_t at;
			pthread_attr_init(&at);
			pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
			if (a) {
				*a = (conn_arg){L, &L->up[i], c};
				int fl = fcntl(c, F_GETFL);
				fcntl(c, F_SETFL, fl & ~O_NONBLOCK);
			}
			if (!a || pthread_create(&t, &at, conn_thread, a) != 0) {
				free(a);
				close(c);
			}
			pthread_attr_destroy(&at);
		}
	}
	return NULL;
}

static int start_upstreams(lab *L, ab_err *err)
{
	ab_ca *ca = NULL;
	if (ab_ca_new(NULL, 1, &ca, err) < 0)
		return ab_err_prefix(err, "lab: test CA");
	L->ca = ca;
	_cleanup_free_ char *pem = NULL;
	if (ab_ca_cert_pem(ca, &pem, err) < 0)
		return ab_err_ret(err);
	snprintf(L->ca_pem_path, sizeof(L->ca_pem_path), "%.4000s/lab-ca.pem", L->state);
	FILE *f = fopen(L->ca_pem_path, "we");
	if (!f || fputs(pem, f) < 0 || fclose(f) != 0)
		return ab_fail(err, errno, "lab: %s", L->ca_pem_path);
	const char *names[3] = {LAB_BOUND, LAB_UNBOUND, LAB_DENIED};
	for (int i = 0; i < 3; i++) {
		lab_upstream *u = &L->up[i];
		u->name = names[i];
		u->port = (uint16_t)(LAB_UPSTREAM_PORT0 + i);
		if (ab_ca_server_ctx(ca, names[i], &u->ctx, err) < 0)
			return ab_err_prefix(err, "lab: %s", names[i]);
		u->fd = inet_socket(SOCK_STREAM, u->port, true, err);
		if (u->fd < 0)
			return u->fd;
	}
	return 0;
}

int lab_servers_start(lab *L, ab_err *err)
{
	static const uint16_t ports[] = {22, 53, 80, 443, 8080, LAB_JUDGE_PORT};
	pthread_mutex_init(&L->mu, NULL);
	for (size_t i = 0; i < AB_ARRAY_SIZE(ports); i++) {
		int fd = inet_socket(SOCK_STREAM, ports[i], false, err);
		if (fd < 0 || add_listener(L, fd, "tcp", NULL) < 0)
			return fd < 0 ? fd : ab_fail(err, ENOSPC, "lab: listeners");
	}
	L->dns_fd[0] = inet_socket(SOCK_DGRAM, 53, false, err);
	if (L->dns_fd[0] < 0)
		return L->dns_fd[0];
	int one = 1;
	setsockopt(L->dns_fd[0], IPPROTO_IP, IP_PKTINFO, &one, sizeof(one));
	setsockopt(L->dns_fd[0], IPPROTO_IPV6, IPV6_RECVPKTINFO, &one, sizeof(one));
	char p[PATH_MAX + 64];
	const char *rel[] = {"ssh-agent.sock", "gnupg/S.gpg-agent", "gnupg/S.gpg-agent.ssh", "bus"};
	for (size_t i = 0; i < AB_ARRAY_SIZE(rel); i++) {
		snprintf(p, sizeof(p), "%s/%s", L->runtime, rel[i]);
		if (unix_listener(L, p, err) < 0)
			return ab_err_ret(err);
	}
	if (unix_listener(L, "/run/docker.sock", err) < 0 ||
	    unix_listener(L, "/run/dbus/system_bus_socket", err) < 0)
		return ab_err_ret(err);
	/* a host process's socket inside a grant (a dev server's control
	 * socket in the workspace): hidden by agentbox, or CRD-01 escapes */
	snprintf(p, sizeof(p), "%s/.devserver.sock", L->ws);
	if (unix_listener(L, p, err) < 0)
		return ab_err_ret(err);
	if (start_upstreams(L, err) < 0)
		return ab_err_ret(err);
	if (pthread_create(&L->thr[L->nthr], NULL, poll_thread, L) != 0)
		return ab_fail(err, EAGAIN, "lab: thread");
	L->nthr++;
	if (pthread_create(&L->thr[L->nthr], NULL, upstream_thread, L) != 0)
		return ab_fail(err, EAGAIN, "lab: thread");
	L->nthr++;
	return 0;
}

void lab_servers_stop(lab *L)
{
	atomic_store(&L->stop, true);
	for (int i = 0; i < L->nthr; i++)
		pthread_join(L->thr[i], NULL);
	L->nthr = 0;
	/* connections still in a backlog were made all the same */
	for (int i = 0; i < L->nlisten; i++)
		for (int k = 0; k < 64; k++) {
			int before = (int)L->nhits;
			on_accept(L, i);
			if ((int)L->nhits == before)
				break;
		}
	for (int k = 0; k < 64 && L->dns_fd[0] >= 0; k++) {
		size_t before = L->dns_queries;
		on_dns(L, L->dns_fd[0]);
		if (L->dns_queries == before)
			break;
	}
	for (int i = 0; i < 3; i++)
		while (L->up[i].fd > 0) {
			int c = accept4(L->up[i].fd, NULL, NULL, SOCK_CLOEXEC);
			if (c < 0)
				break;
			atomic_fetch_add(&L->up[i].hits, 1);
			close(c);
		}
}

/* ---------------------------------------------------------------- judging */

static ab_esc_result *find(ab_esc_results *rs, const char *id)
{
	for (size_t i = 0; i < rs->n; i++)
		if (strcmp(rs->v[i].def->id, id) == 0)
			return &rs->v[i];
	return NULL;
}

static void judge_add(ab_esc_results *rs, const char *id, enum ab_esc_verdict v, const char *what,
		      const char *result)
{
	ab_esc_result *r = find(rs, id);
	if (r)
		ab_esc_result_add(r, what, v, result, NULL, "judge");
}

static bool snap_changed(const lab_snap *a, const lab_snap *b)
{
	return a->existed != b->existed || a->size != b->size ||
	       memcmp(a->sha, b->sha, sizeof(a->sha)) != 0 || a->mtime.tv_sec != b->mtime.tv_sec ||
	       a->mtime.tv_nsec != b->mtime.tv_nsec;
}

static void judge_files(lab *L, ab_esc_results *rs)
{
	for (size_t i = 0; i < L->nsnap; i++) {
		lab_snap now;
		lab_hash_file(L->snap[i].path, &now);
		if (snap_changed(&L->snap[i], &now))
			judge_add(rs, L->snap[i].probe, AB_ESC_ESCAPED, "host file unchanged",
				  now.existed && !L->snap[i].existed ? "created on the host"
				  : !now.existed                     ? "removed on the host"
								     : "changed on the host");
	}
	/* markers the inside reported, and any abprobe-RUNID file in the lab's
	 * own /tmp, /dev/shm, home and runtime dir */
	for (size_t i = 0; i < rs->n; i++) {
		json_t *m = json_object_get(rs->v[i].report, "markers"), *v;
		size_t k;
		json_array_foreach(m, k, v)
		{
			struct stat st;
			const char *path = json_string_value(v);
			if (path && lstat(path, &st) == 0)
				ab_esc_result_add(&rs->v[i], "marker stays private", AB_ESC_ESCAPED,
						  "the marker exists on the host", NULL, "judge");
		}
	}
}

/* What the inside wrote in private places that must not exist on the host
 * ("home_writes" the judge has no snapshot of), and any abprobe-RUNID name
 * in the lab's own shared places. */
static void judge_leftovers(lab *L, ab_esc_results *rs)
{
	for (size_t i = 0; i < rs->n; i++) {
		json_t *m = json_object_get(rs->v[i].report, "home_writes"), *v;
		size_t k;
		json_array_foreach(m, k, v)
		{
			const char *path = json_string_value(v);
			bool snapped = false;
			for (size_t j = 0; path && j < L->nsnap; j++)
				snapped |= strcmp(L->snap[j].path, path) == 0;
			struct stat st;
			if (path && !snapped && lstat(path, &st) == 0)
				ab_esc_result_add(&rs->v[i], "home write stays private",
						  AB_ESC_ESCAPED, "the file exists on the host",
						  NULL, "judge");
		}
	}
	const char *dirs[] = {"/tmp", "/dev/shm", "/run", L->home, L->runtime, L->base, "/var/tmp"};
	char prefix[64];
	snprintf(prefix, sizeof(prefix), "abprobe-%s", L->run_id);
	for (size_t i = 0; i < AB_ARRAY_SIZE(dirs); i++) {
		DIR *d = opendir(dirs[i]);
		struct dirent *e;
		while (d && (e = readdir(d))) {
			if (strncmp(e->d_name, prefix, strlen(prefix)) != 0)
				continue;
			char what[PATH_MAX + 64];
			snprintf(what, sizeof(what), "%s/%s", dirs[i], e->d_name);
			judge_add(rs, strstr(e->d_name, "per05") ? "PER-05" : "FS-01",
				  AB_ESC_ESCAPED, "nothing from inside appears on the host", what);
		}
		if (d)
			closedir(d);
	}
}

/* PER-05: the user's next git commands on the host must not run anything
 * the sandbox planted.  Run them (hooks enabled, as a user would), then
 * look for the payload's marker. */
static void judge_git(lab *L, ab_esc_results *rs)
{
	ab_esc_result *r = find(rs, "PER-05");
	const char *marker =
		r ? json_string_value(json_object_get(r->report, "payload_marker")) : NULL;
	if (!r)
		return;
	int st[3] = {
		lab_git(L, L->ws, (const char *[]){"status", NULL}),
		lab_git(L, L->ws, (const char *[]){"diff", "HEAD", NULL}),
		lab_git(L, L->ws,
			(const char *[]){"commit", "-q", "--allow-empty", "-m", "judge", NULL}),
	};
	char res[96];
	snprintf(res, sizeof(res), "status %d, diff %d, commit %d", st[0], st[1], st[2]);
	struct stat sb;
	bool ran = marker && lstat(marker, &sb) == 0;
	ab_esc_result_add(r, "host git status/diff/commit run nothing planted",
			  ran ? AB_ESC_ESCAPED : AB_ESC_OK,
			  ran ? "the planted payload ran on the host" : res, NULL, "judge");
}

/* TTY-02's OSC 52: on the outer terminal as written (escaped, unless the
 * profile lets clipboard sequences through), neutralized (52 -> 59), or not
 * at all. */
static void judge_clipboard(lab *L, ab_esc_result *r)
{
	static const char sent[] = "\x1b]52;c;" AB_ESC_CLIP_B64;
	static const char neut[] = "\x1b]59;c;" AB_ESC_CLIP_B64;
	const char *out = L->pty_out ? L->pty_out : "";
	bool raw = memmem(out, L->pty_len, sent, sizeof(sent) - 1) != NULL;
	bool gone = memmem(out, L->pty_len, neut, sizeof(neut) - 1) != NULL;
	const char *what = "the outer terminal never gets a clipboard sequence";
	if (raw && !L->clipboard_ok)
		ab_esc_result_add(r, what, AB_ESC_ESCAPED,
				  "OSC 52 reached the outer terminal (it sets the clipboard)", NULL,
				  "judge");
	else if (raw)
		ab_esc_result_add(r, what, AB_ESC_OK,
				  "passed on purpose: the profile sets terminal.clipboard", NULL,
				  "judge");
	else
		ab_esc_result_add(r, what, AB_ESC_OK,
				  gone ? "neutralized: OSC 52 arrived as OSC 59"
				       : "no clipboard sequence arrived",
				  gone ? "pty" : NULL, "judge");
}

static void judge_ttys(lab *L, ab_esc_results *rs)
{
	int pending = 0;
	if (ioctl(L->pty_slave, FIONREAD, &pending) == 0 && pending > 0)
		judge_add(rs, "TTY-01", AB_ESC_ESCAPED, "outer terminal input queue stays empty",
			  "bytes were pushed into the outer terminal");
	else
		judge_add(rs, "TTY-01", AB_ESC_OK, "outer terminal input queue stays empty",
			  "empty");
	struct stat outer;
	ab_esc_result *r = find(rs, "TTY-02");
	if (r)
		judge_clipboard(L, r);
	if (!r || fstat(L->pty_slave, &outer) < 0)
		return;
	json_t *ttys = json_object_get(r->report, "ttys"), *t;
	size_t i;
	bool same = false;
	json_array_foreach(ttys, i, t)
	{
		json_int_t dev = json_integer_value(json_object_get(t, "dev"));
		json_int_t ino = json_integer_value(json_object_get(t, "ino"));
		if ((dev_t)dev == outer.st_dev && (ino_t)ino == outer.st_ino)
			same = true;
	}
	ab_esc_result_add(r, "no fd refers to the outer terminal",
			  same ? AB_ESC_ESCAPED : AB_ESC_OK,
			  same ? "the sandbox holds the user's terminal" : "different terminal",
			  same ? NULL : "pty", "judge");
}

static void judge_process(lab *L, ab_esc_results *rs)
{
	char path[64], buf[4096];
	snprintf(path, sizeof(path), "/proc/%d/status", (int)L->canary_pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
	if (fd >= 0)
		close(fd);
	if (n <= 0) {
		judge_add(rs, "PRC-04", AB_ESC_ESCAPED, "canary process untouched", "it is gone");
		return;
	}
	buf[n] = '\0';
	const char *tp = strstr(buf, "TracerPid:");
	const char *st = strstr(buf, "State:");
	bool traced = tp && atoi(tp + 10) != 0;
	bool stopped = st && (strstr(st, "T (") == st + 7 || strstr(st, "t (") == st + 7);
	judge_add(rs, "PRC-04", traced || stopped ? AB_ESC_ESCAPED : AB_ESC_OK,
		  "canary process untouched",
		  traced    ? "it is being traced"
		  : stopped ? "it was stopped"
			    : "not traced, running");
}

static void judge_upstreams(lab *L, ab_esc_results *rs)
{
	char b[128];
	int real = atomic_load(&L->up[0].real);
	snprintf(b, sizeof(b), "%d request(s) with the real secret", real);
	judge_add(rs, "CTL-02", real > 0 ? AB_ESC_OK : AB_ESC_ERROR,
		  "the bound host received the real secret", b);
	int ureal = atomic_load(&L->up[1].real);
	snprintf(b, sizeof(b), "%d request(s) with the real secret", ureal);
	judge_add(rs, "CRD-03", ureal ? AB_ESC_ESCAPED : AB_ESC_OK,
		  "the unbound host never received the real secret", b);
	int dh = atomic_load(&L->up[2].hits);
	snprintf(b, sizeof(b), "%d connection(s)", dh);
	judge_add(rs, "CRD-03", dh ? AB_ESC_ESCAPED : AB_ESC_OK,
		  "the denied host got no connection", b);
}

void lab_judge(lab *L, ab_esc_results *rs)
{
	pthread_mutex_lock(&L->mu);
	for (size_t i = 0; i < L->nhits; i++)
		judge_add(rs, L->hits[i].probe, AB_ESC_ESCAPED, "judge saw nothing",
			  L->hits[i].what);
	if (L->hits_dropped)
		judge_add(rs, "NET-01", AB_ESC_ESCAPED, "judge saw nothing", "more hits dropped");
	size_t dnsq = L->dns_queries;
	pthread_mutex_unlock(&L->mu);
	static const char *quiet[] = {"NET-01", "NET-06", "NET-08", "CRD-01"};
	for (size_t i = 0; i < AB_ARRAY_SIZE(quiet); i++) {
		ab_esc_result *r = find(rs, quiet[i]);
		bool any = false;
		for (size_t k = 0; r && k < r->nattempts; k++)
			any |= r->attempts[k].source && r->attempts[k].verdict == AB_ESC_ESCAPED;
		if (r && !any)
			ab_esc_result_add(r, "judge listeners saw nothing", AB_ESC_OK,
					  "0 connections", NULL, "judge");
	}
	char b[64];
	snprintf(b, sizeof(b), "%zu quer%s, none for canary names", dnsq, dnsq == 1 ? "y" : "ies");
	if (!L->dns_canary_queries)
		judge_add(rs, "NET-02", AB_ESC_OK, "no canary name reached the host's DNS", b);
	/* canary hashes the inside reported: name them (never the value) */
	for (size_t i = 0; i < rs->n; i++)
		for (size_t k = 0; k < rs->v[i].found.n; k++) {
			const lab_canary *c = lab_canary_by_hash(L, rs->v[i].found.v[k]);
			char what[PATH_MAX + 64];
			snprintf(what, sizeof(what), "canary %s", c ? c->where : "(unknown)");
			ab_esc_result_add(&rs->v[i], what, AB_ESC_ESCAPED,
					  c ? "a lab canary was read inside"
					    : "a canary-shaped token "
					      "was read inside",
					  NULL, "judge");
		}
	judge_files(L, rs);
	judge_git(L, rs);
	judge_leftovers(L, rs);
	judge_ttys(L, rs);
	judge_process(L, rs);
	judge_upstreams(L, rs);
	for (size_t i = 0; i < rs->n; i++)
		ab_esc_result_settle(&rs->v[i]);
}

void lab_free(lab *L)
{
	for (int i = 0; i < L->nlisten; i++)
		close(L->listen_fd[i]);
	for (int i = 0; i < 3; i++) {
		if (L->up[i].ctx)
			SSL_CTX_free(L->up[i].ctx);
		if (L->up[i].fd > 0)
			close(L->up[i].fd);
	}
	if (L->ca)
		ab_ca_free(L->ca);
	free(L->pty_out);
	ab_strv_free(&L->agent_sockets);
	for (size_t i = 0; i < L->nextra_env; i++) {
		explicit_bzero(L->extra_env[i], strlen(L->extra_env[i]));
		free(L->extra_env[i]);
	}
	explicit_bzero(L->can, sizeof(L->can));
	explicit_bzero(L->secret, sizeof(L->secret));
}
