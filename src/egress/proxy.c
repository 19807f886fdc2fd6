/* SPDX-License-Identifier: MIT */
/*
 * The egress proxy, core (parent): set-up and teardown, the listeners
 * handed over from inside the sandbox and the connections they accept,
 * name resolution and the upstream dial (directly, or through the host's
 * own proxy), timeouts.  A connection's life once accepted is in pxconn.c,
 * the audit lines in pxlog.c, plain HTTP forwarding in pxhttp.c, tunnels in
 * pxtunnel.c, DNS in dnsd.c, `agentbox allow` in pxctl.c.  Everything runs
 * on the run's event loop; nothing blocks (names resolve on resolver
 * threads).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include <openssl/ssl.h>

#include "agentbox/broker.h"
#include "agentbox/sync.h"
#include "proxy_int.h"

/* ------------------------------------------------------------ dialling */

static void on_upstream(ab_loop *l, int fd, unsigned ev, void *data);

static void fmt_addr(const struct sockaddr *sa, char *out, size_t n)
{
	char a[INET6_ADDRSTRLEN] = "?";
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *s4 = (const struct sockaddr_in *)sa;
		inet_ntop(AF_INET, &s4->sin_addr, a, sizeof(a));
		snprintf(out, n, "%s:%u", a, ntohs(s4->sin_port));
	} else if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)sa;
		inet_ntop(AF_INET6, &s6->sin6_addr, a, sizeof(a));
		snprintf(out, n, "[%s]:%u", a, ntohs(s6->sin6_port));
	} else {
		snprintf(out, n, "?");
	}
}

static void set_port(struct sockaddr_storage *ss, uint16_t port)
{
	if (ss->ss_family == AF_INET)
		((struct sockaddr_in *)ss)->sin_port = htons(port);
	else
		((struct sockaddr_in6 *)ss)->sin6_port = htons(port);
}

static void try_connect(px_conn *c)
{
	ab_proxy *px = c->px;
	while (c->ai < c->naddrs) {
		struct sockaddr_storage *ss = &c->addrs[c->ai];
		socklen_t len = c->alens[c->ai];
		c->ai++;
		int fd = socket(ss->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (fd < 0)
			continue;
		int one = 1;
		(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		fmt_addr((struct sockaddr *)ss, c->dialled, sizeof(c->dialled));
		int r = connect(fd, (struct sockaddr *)ss, len);
		if (r < 0 && errno != EINPROGRESS) {
			close(fd);
			continue;
		}
		if (ab_loop_watch(px->loop, fd, AB_EV_WRITE, on_upstream, c) < 0) {
			close(fd);
			continue;
		}
		c->ufd = fd;
		c->uev = AB_EV_WRITE;
		c->state = PX_CONNECTING;
		px_update(c);
		return;
	}
	px_fail(c, 502, "error", c->rule, "could not connect to %s:%u (%s)", c->host, c->port,
		c->dialled[0] ? c->dialled : "no usable address");
}

static void add_addr(px_conn *c, const struct sockaddr *sa, socklen_t len)
{
	if (c->naddrs >= PX_MAX_ADDRS || len > sizeof(c->addrs[0]))
		return;
	memcpy(&c->addrs[c->naddrs], sa, len);
	c->alens[c->naddrs] = len;
	set_port(&c->addrs[c->naddrs], c->port);
	c->naddrs++;
}

static void on_resolved(void *data, int gai, const struct addrinfo *res)
{
	px_conn *c = data;
	ab_proxy *px = c->px;
	c->job = NULL;
	if (gai != 0) {
		px_fail(c, 502, "error", c->rule, "cannot resolve %s (%s)",
			c->via_up ? px->up_host : c->host, gai_strerror(gai));
		return;
	}
	char refused[64] = "";
	c->naddrs = c->ai = 0;
	for (const struct addrinfo *ai = res; ai; ai = ai->ai_next) {
		if (ai->ai_family != AF_INET && ai->ai_family != AF_INET6)
			continue;
		struct sockaddr_storage ss = {0};
		memcpy(&ss, ai->ai_addr, ai->ai_addrlen);
		set_port(&ss, c->via_up ? px->up_port : c->port);
		if (c->via_up) { /* the user's own proxy, typically on a private address */
			add_addr(c, (struct sockaddr *)&ss, ai->ai_addrlen);
			set_port(&c->addrs[c->naddrs - 1], px->up_port);
			continue;
		}
		/* the address we dial is the address we checked: no second lookup */
		if (!ab_netpolicy_addr_allowed(&px->pol, c->host, c->port,
					       (struct sockaddr *)&ss)) {
			if (!refused[0])
				fmt_addr((struct sockaddr *)&ss, refused, sizeof(refused));
			continue;
		}
		add_addr(c, (struct sockaddr *)&ss, ai->ai_addrlen);
	}
	if (c->naddrs == 0) {
		px_fail(c, 403, "deny", "private-address",
			"%s resolved to a private or reserved address (%s); name it under "
			"network.private in profile '%s' to allow it",
			c->host, refused[0] ? refused : "none", px->profile);
		return;
	}
	try_connect(c);
}

/* The host's NO_PROXY: "*", exact names, ".suffix" or "suffix" (curl's
 * reading: a name or any name below it). */
static bool no_proxy_match(const ab_proxy *px, const char *host)
{
	size_t hl = strlen(host);
	for (size_t i = 0; i < px->no_proxy.n; i++) {
		const char *e = px->no_proxy.v[i];
		if (strcmp(e, "*") == 0)
			return true;
		if (e[0] == '.')
			e++;
		size_t el = strlen(e);
		if (el && hl >= el && strcasecmp(host + hl - el, e) == 0 &&
		    (hl == el || host[hl - el - 1] == '.'))
			return true;
	}
	return false;
}

/* The address an IP-literal host names ("1.2.3.4", "[::1]") with port;
 * 0 for a name. */
static socklen_t literal_addr(const char *host, uint16_t port, struct sockaddr_storage *ss)
{
	char bare[AB_HOST_BUF];
	socklen_t len = 0;
	memset(ss, 0, sizeof(*ss));
	snprintf(bare, sizeof(bare), "%s", host);
	if (bare[0] == '[') {
		bare[strlen(bare) - 1] = '\0';
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;
		if (inet_pton(AF_INET6, bare + 1, &s6->sin6_addr) == 1) {
			s6->sin6_family = AF_INET6;
			len = sizeof(*s6);
		}
	} else {
		struct sockaddr_in *s4 = (struct sockaddr_in *)ss;
		if (inet_pton(AF_INET, bare, &s4->sin_addr) == 1) {
			s4->sin_family = AF_INET;
			len = sizeof(*s4);
		}
	}
	if (len)
		set_port(ss, port);
	return len;
}

/* A local name (network.hosts): the profile said where it is, private or
 * not; but a deny rule naming that address still comes first. */
static void dial_mapped(px_conn *c, const px_map *m)
{
	ab_proxy *px = c->px;
	uint16_t port = m->port ? m->port : c->port;
	char a[AB_HOST_BUF];
	const ab_netrule *rule = NULL;
	fmt_addr((const struct sockaddr *)&m->addr, a, sizeof(a));
	char *colon = strrchr(a, ':'); /* fmt_addr wrote "ADDR:PORT" or "[V6]:PORT" */
	if (colon)
		*colon = '\0';
	if (ab_netpolicy_check(&px->pol, a, port, &rule) == AB_NET_DENY) {
		px_fail(c, 403, "deny", rule ? rule->text : "deny",
			"%s is mapped to %s:%u, which is denied by rule '%s' of profile '%s' "
			"(network.deny)",
			c->host, a, (unsigned)port, rule ? rule->text : "?", px->profile);
		return;
	}
	add_addr(c, (const struct sockaddr *)&m->addr, m->alen);
	if (c->naddrs)
		set_port(&c->addrs[c->naddrs - 1], port);
	try_connect(c);
}

static void resolve(px_conn *c, const char *name)
{
	c->state = PX_RESOLVING;
	c->job = ab_resolve(c->px->res, name, on_resolved, c);
	if (!c->job) {
		px_fail(c, 503, "error", c->rule, "too many name lookups in flight; try again");
		return;
	}
	px_update(c);
}

void px_dial(px_conn *c)
{
	ab_proxy *px = c->px;
	c->naddrs = c->ai = 0;
	c->dialled[0] = '\0';
	c->deadline = ab_now_ms() + AB_PROXY_DIAL_TIMEOUT_MS;
	c->via_up = false;
	struct sockaddr_storage ss;
	socklen_t len = literal_addr(c->host, c->port, &ss);
	/* an IP literal the allow list names: checked here, before chaining too */
	if (len && !ab_netpolicy_addr_allowed(&px->pol, c->host, c->port, (struct sockaddr *)&ss)) {
		px_fail(c, 403, "deny", "private-address",
			"%s is a private or reserved address; name it under network.private "
			"in profile '%s' to allow it",
			c->host, px->profile);
		return;
	}
	for (size_t i = 0; i < px->nmaps; i++) {
		if (strcmp(px->maps[i].name, c->host) == 0) {
			dial_mapped(c, &px->maps[i]);
			return;
		}
	}
	if (px->up_host && !no_proxy_match(px, c->host)) {
		/* the corporate proxy resolves and connects; policy was decided by name */
		c->via_up = true;
		resolve(c, px->up_host);
		return;
	}
	if (len) {
		add_addr(c, (struct sockaddr *)&ss, len);
		try_connect(c);
		return;
	}
	resolve(c, c->host);
}

/* Chaining: ask the corporate proxy for a tunnel to host:port. */
static void up_connect_send(px_conn *c)
{
	char req[AB_HOST_BUF * 2 + 96];
	int n = snprintf(req, sizeof(req), "CONNECT %s:%u HTTP/1.1\r\nHost: %s:%u\r\n\r\n", c->host,
			 (unsigned)c->port, c->host, (unsigned)c->port);
	if (send(c->ufd, req, (size_t)n, MSG_NOSIGNAL) != n) {
		px_fail(c, 502, "error", c->rule, "the upstream proxy %s:%u closed the connection",
			c->px->up_host, (unsigned)c->px->up_port);
		return;
	}
	c->state = PX_UPCONNECT;
	px_update(c);
}

static void up_connect_read(px_conn *c)
{
	ssize_t n = px_buf_read(&c->back, c->ufd, 8192);
	if (n == -EAGAIN)
		return;
	if (n <= 0 || c->back.len > 16384) {
		px_fail(c, 502, "error", c->rule, "no answer from the upstream proxy %s:%u",
			c->px->up_host, (unsigned)c->px->up_port);
		return;
	}
	_cleanup_free_ ab_http_resp *rs = malloc(sizeof(*rs));
	if (!rs) {
		px_close(c);
		return;
	}
	int r = ab_http_parse_response_head(c->back.p, c->back.len, NULL, rs);
	int code = rs->code;
	if (r == 0)
		return;
	if (r < 0 || code < 200 || code > 299) {
		px_fail(c, 502, "error", c->rule, "the upstream proxy %s:%u refused %s:%u (%d)",
			c->px->up_host, (unsigned)c->px->up_port, c->host, (unsigned)c->port,
			r < 0 ? 0 : code);
		return;
	}
	px_buf_consume(&c->back, (size_t)r);
	c->via_up = false; /* tunnel established: from here as if dialled directly */
	snprintf(c->dialled, sizeof(c->dialled), "via %s:%u", c->px->up_host,
		 (unsigned)c->px->up_port);
	px_connected(c);
}

void px_connected(px_conn *c)
{
	if (c->via_up) {
		up_connect_send(c);
		return;
	}
	c->deadline = ab_now_ms() + AB_PROXY_IDLE_MS;
	if (c->is_connect) {
		/* once: plain HTTP inside the tunnel may dial again (below) */
		c->is_connect = false;
		static const char ok[] = "HTTP/1.1 200 Connection established\r\n\r\n";
		if (px_buf_append(&c->toc, ok, sizeof(ok) - 1) < 0) {
			px_close(c);
			return;
		}
		c->state = PX_HELLO;
		c->deadline = ab_now_ms() + AB_PROXY_HELLO_TIMEOUT_MS;
		px_update(c);
		px_hello(c);
		return;
	}
	if (c->side == PX_TRANSPARENT && !c->fixed) {
		c->state = PX_HELLO;
		c->deadline = ab_now_ms() + AB_PROXY_HELLO_TIMEOUT_MS;
		px_update(c);
		px_hello(c);
		return;
	}
	px_http_start(c);
}

static void on_upstream(ab_loop *l, int fd, unsigned ev, void *data)
{
	px_conn *c = data;
	if (c->state == PX_CONNECTING) {
		int e = 0;
		socklen_t el = sizeof(e);
		if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &el) < 0)
			e = errno;
		if (e == 0 && !(ev & AB_EV_ERR)) {
			px_connected(c);
			return;
		}
		ab_loop_unwatch(l, fd);
		close(fd);
		c->ufd = -1;
		c->uev = 0;
		try_connect(c);
		return;
	}
	switch (c->state) {
	case PX_UPCONNECT: up_connect_read(c); return;
	case PX_TLS_ACCEPT: px_tls_pump(c); return;
	case PX_HELLO: px_hello(c); return;
	case PX_TUNNEL: px_tunnel_pump(c, false, true); return;
	case PX_HTTP: px_http_pump(c); return;
	default: px_update(c); return;
	}
}

/* ------------------------------------------------------------ accepting */

static px_conn *conn_new(ab_proxy *px, int fd, enum px_side side)
{
	px_conn *c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->px = px;
	c->id = ++px->next_id;
	c->cfd = fd;
	c->ufd = -1;
	c->side = side;
	c->t0 = ab_now_ms();
	c->next = px->conns;
	if (px->conns)
		px->conns->prev = c;
	px->conns = c;
	px->nconns++;
	return c;
}

/* A transparent connection: the synthetic address it dialled names the
 * host (dnsd.c gave it out), the listener's port is the port. */
static void transparent_start(px_conn *c, uint16_t lport)
{
	struct sockaddr_in local = {0};
	socklen_t ll = sizeof(local);
	c->lport = lport;
	snprintf(c->method, sizeof(c->method), "TCP");
	const char *name = NULL;
	if (getsockname(c->cfd, (struct sockaddr *)&local, &ll) == 0 && local.sin_family == AF_INET)
		name = px_synth_name(c->px, local.sin_addr.s_addr);
	if (!name) {
		char a[INET_ADDRSTRLEN] = "?";
		if (local.sin_family == AF_INET)
			inet_ntop(AF_INET, &local.sin_addr, a, sizeof(a));
		snprintf(c->host, sizeof(c->host), "%s", a);
		c->port = lport;
		px_log_conn(c, "deny", "not-synthetic", 0,
			    "connection to an address agentbox's DNS did not give out");
		px_close(c);
		return;
	}
	if (px_decide(c, name, lport) == 0)
		px_dial(c);
}

static void on_resume(ab_loop *l, uint64_t id, void *data)
{
	px_pause *p = data;
	p->timer = 0;
	ab_loop_modify(l, p->fd, AB_EV_READ);
}

void px_accept_failed(px_pause *p, int e)
{
	if (e != EMFILE && e != ENFILE && e != ENOBUFS && e != ENOMEM)
		return; /* EAGAIN, or a connection that died in the queue */
	if (p->timer)
		return;
	/* the pending connection stays queued and the listener readable: a
	 * level-triggered watch would call us again at once, forever */
	p->timer = ab_loop_timer(p->px->loop, 100, on_resume, p);
	if (p->timer)
		ab_loop_modify(p->px->loop, p->fd, 0);
}

void px_pause_cancel(px_pause *p)
{
	if (p->timer)
		ab_loop_timer_cancel(p->px->loop, p->timer);
	p->timer = 0;
}

static void on_accept(ab_loop *l, int fd, unsigned ev, void *data)
{
	px_listener *ls = data;
	ab_proxy *px = ls->px;
	for (int i = 0; i < 64; i++) {
		int cfd = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (cfd < 0) {
			px_accept_failed(&ls->pause, errno);
			return;
		}
		if (px->nconns >= AB_PROXY_MAX_CONNS) {
			/* over the limit: refuse at once rather than queue */
			static const char busy[] =
				"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 52\r\n"
				"Connection: close\r\n\r\nagentbox: too many connections through the proxy\r\n\r\n";
			if (ls->kind == AB_LISTEN_PROXY)
				(void)!send(cfd, busy, sizeof(busy) - 1,
					    MSG_NOSIGNAL | MSG_DONTWAIT);
			close(cfd);
			continue;
		}
		/* small answers (a 200, TLS tickets then a response) must not wait
		 * for the client's delayed ACK */
		int one = 1;
		(void)setsockopt(cfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		px_conn *c = conn_new(px, cfd,
				      ls->kind == AB_LISTEN_PROXY ? PX_EXPLICIT : PX_TRANSPARENT);
		if (!c) {
			close(cfd);
			continue;
		}
		if (ab_loop_watch(l, cfd, 0, px_on_client, c) < 0) {
			px_close(c);
			continue;
		}
		if (ls->kind == AB_LISTEN_PROXY) {
			c->state = PX_HEAD;
			c->deadline = c->t0 + AB_PROXY_HEAD_TIMEOUT_MS;
			px_update(c);
		} else {
			transparent_start(c, ls->port);
		}
	}
}

/* ------------------------------------------------------------ timeouts */

static void on_sweep(ab_loop *l, uint64_t id, void *data)
{
	ab_proxy *px = data;
	uint64_t now = ab_now_ms();
	px->sweep = ab_loop_timer(l, 1000, on_sweep, px);
	for (px_conn *c = px->conns, *n; c; c = n) {
		n = c->next;
		if (!c->deadline || now < c->deadline)
			continue;
		switch (c->state) {
		case PX_HEAD:
			if (c->in.len)
				px_fail(c, 408, "error", "timeout",
					"the request head did not arrive within %d s",
					AB_PROXY_HEAD_TIMEOUT_MS / 1000);
			else
				px_close(c); /* idle keep-alive connection */
			break;
		case PX_RESOLVING:
		case PX_CONNECTING:
		case PX_UPCONNECT:
			px_fail(c, 504, "error", c->rule, "timed out connecting to %s:%u", c->host,
				c->port);
			break;
		case PX_HELLO:
			px_log_conn(c, "error", "timeout", 0, "no ClientHello in time");
			px_close(c);
			break;
		case PX_HTTP:
			if (!c->nfifo && c->in.len)
				px_fail(c, 408, "error", "timeout",
					"the request head did not arrive within %d s",
					AB_PROXY_HEAD_TIMEOUT_MS / 1000);
			else if (c->nfifo && !c->fifo[0].head_sent)
				px_fail(c, 504, "error", c->rule, "%s:%u did not answer in time",
					c->host, (unsigned)c->port);
			else
				px_close(c); /* idle, or cut off mid-response */
			break;
		default: px_close(c); break;
		}
	}
}

/* ------------------------------------------------------------ setup */

static int parse_map(const char *kv, px_map *m, ab_err *err)
{
	const char *eq = strchr(kv, '=');
	if (!eq || (size_t)(eq - kv) >= sizeof(m->name))
		return ab_fail(err, EINVAL, "network.hosts: bad entry");
	memcpy(m->name, kv, (size_t)(eq - kv));
	m->name[eq - kv] = '\0';
	char addr[AB_HOST_BUF];
	unsigned port;
	int k = ab_profile_parse_hostaddr(eq + 1, addr, sizeof(addr), &port);
	if (k < 0)
		return ab_fail(err, EINVAL, "network.hosts: bad address for %s", m->name);
	m->port = (uint16_t)port;
	memset(&m->addr, 0, sizeof(m->addr));
	if (k == AB_HOST_IPV4) {
		struct sockaddr_in *s4 = (struct sockaddr_in *)&m->addr;
		s4->sin_family = AF_INET;
		inet_pton(AF_INET, addr, &s4->sin_addr);
		m->alen = sizeof(*s4);
	} else {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&m->addr;
		addr[strlen(addr) - 1] = '\0';
		s6->sin6_family = AF_INET6;
		inet_pton(AF_INET6, addr + 1, &s6->sin6_addr);
		m->alen = sizeof(*s6);
	}
	return 0;
}

static void proxy_freep(ab_proxy **px)
{
	ab_proxy_free(*px);
}

int ab_proxy_new(const ab_egress_plan *plan, struct ab_audit *audit, ab_proxy **out, ab_err *err)
{
	_cleanup_(proxy_freep) ab_proxy *px = calloc(1, sizeof(*px));
	if (!px)
		return ab_fail(err, ENOMEM, "proxy");
	px->audit = audit;
	int r = 0;
	for (size_t i = 0; !r && i < plan->deny.n; i++)
		r = ab_netpolicy_add(&px->pol, AB_NETLIST_DENY, plan->deny.v[i], err);
	for (size_t i = 0; !r && i < plan->allow.n; i++)
		r = ab_netpolicy_add(&px->pol, AB_NETLIST_ALLOW, plan->allow.v[i], err);
	for (size_t i = 0; !r && i < plan->priv.n; i++)
		r = ab_netpolicy_add(&px->pol, AB_NETLIST_PRIVATE, plan->priv.v[i], err);
	if (!r && plan->hosts.n && !(px->maps = calloc(plan->hosts.n, sizeof(*px->maps))))
		r = ab_fail(err, ENOMEM, "proxy");
	for (size_t i = 0; !r && i < plan->hosts.n; i++)
		r = parse_map(plan->hosts.v[i], &px->maps[px->nmaps++], err);
	if (!r && !(px->profile = strdup(plan->profile_name ? plan->profile_name : "default")))
		r = ab_fail(err, ENOMEM, "proxy");
	if (!r && !(px->grants = json_array()))
		r = ab_fail(err, ENOMEM, "proxy");
	for (size_t i = 0; !r && i < plan->grants.n; i++)
		if (json_array_append_new(px->grants, json_string(plan->grants.v[i])) < 0)
			r = ab_fail(err, ENOMEM, "proxy");
	if (!r && !(px->downgrades = json_array()))
		r = ab_fail(err, ENOMEM, "proxy");
	for (size_t i = 0; !r && i < plan->downgrades.n; i++)
		if (json_array_append_new(px->downgrades, json_string(plan->downgrades.v[i])) < 0)
			r = ab_fail(err, ENOMEM, "proxy");
	if (r < 0)
		return r;
	if (plan->upstream_host) {
		px->up_host = strdup(plan->upstream_host);
		px->up_port = plan->upstream_port;
		if (!px->up_host || ab_strv_copy(&px->no_proxy, &plan->no_proxy) < 0)
			return ab_fail(err, ENOMEM, "proxy");
	}
	if (plan->ca_file && !(px->ca_file = strdup(plan->ca_file)))
		return ab_fail(err, ENOMEM, "proxy");
	px->transparent = plan->transparent;
	px->proxy_port = plan->proxy_port;
	/* every tunnel holds two sockets and two pipes: make room */
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		(void)setrlimit(RLIMIT_NOFILE, &rl);
	}
	*out = TAKE_PTR(px);
	return 0;
}

/* Some milliseconds after the command started: a command that is done by
 * then (a start-up benchmark's `true`, whose exit the loop may still be
 * handling a few milliseconds later) never pays for it, and one that goes on
 * to make requests (an interpreter or an agent starting up) finds the
 * context ready. */
#define PX_WARM_DELAY_MS 20

static void on_warm(ab_loop *l, uint64_t id, void *data)
{
	ab_proxy *px = data;
	px->warm = 0;
	px_tls_warm(px);
}

int ab_proxy_attach(ab_proxy *px, ab_loop *loop, ab_err *err)
{
	px->loop = loop;
	int r = ab_resolver_new(loop, &px->res, err);
	if (r < 0)
		return r;
	if (px_dns_init(px) < 0)
		return ab_fail(err, ENOMEM, "DNS responder");
	px->sweep = ab_loop_timer(loop, 1000, on_sweep, px);
	if (px->broker && px->broker->n)
		px->warm = ab_loop_timer(loop, PX_WARM_DELAY_MS, on_warm, px);
	json_t *ev = json_object();
	json_object_set_new(ev, "event", json_string("start"));
	json_object_set_new(ev, "profile", json_string(px->profile));
	json_object_set_new(ev, "proxy", json_integer(px->proxy_port));
	json_object_set_new(ev, "transparent", json_boolean(px->transparent));
	if (json_array_size(px->grants))
		json_object_set(ev, "grants", px->grants);
	if (json_array_size(px->downgrades))
		json_object_set(ev, "downgrades", px->downgrades);
	ab_audit_emit(px->audit, ev);
	return 0;
}

int ab_proxy_add_listener(ab_proxy *px, int kind, uint16_t port, int fd)
{
	if (!px || !px->loop || px->nlst >= AB_ARRAY_SIZE(px->lst)) {
		close(fd);
		return -ENOSPC;
	}
	int fl = fcntl(fd, F_GETFL);
	if (fl >= 0)
		(void)fcntl(fd, F_SETFL, fl | O_NONBLOCK);
	switch (kind) {
	case AB_LISTEN_DNS_UDP: return px_dns_add_udp(px, fd);
	case AB_LISTEN_DNS_TCP: return px_dns_add_tcp(px, fd);
	case AB_LISTEN_PROXY:
	case AB_LISTEN_TRANSPARENT: break;
	default: close(fd); return -EINVAL;
	}
	px_listener *ls = &px->lst[px->nlst];
	*ls = (px_listener){
		.px = px, .fd = fd, .kind = kind, .port = port, .pause = {.px = px, .fd = fd}};
	int r = ab_loop_watch(px->loop, fd, AB_EV_READ, on_accept, ls);
	if (r < 0) {
		close(fd);
		return r;
	}
	px->nlst++;
	return 0;
}

void ab_proxy_shutdown(ab_proxy *px)
{
	if (!px)
		return;
	while (px->conns)
		px_close(px->conns);
	for (size_t i = 0; i < px->nlst; i++) {
		if (px->loop) {
			px_pause_cancel(&px->lst[i].pause);
			ab_loop_unwatch(px->loop, px->lst[i].fd);
		}
		close(px->lst[i].fd);
	}
	px->nlst = 0;
	px_ctl_shutdown(px);
	px_ask_shutdown(px);
	if (px->loop && px->sweep)
		ab_loop_timer_cancel(px->loop, px->sweep);
	px->sweep = 0;
	if (px->loop && px->warm)
		ab_loop_timer_cancel(px->loop, px->warm);
	px->warm = 0;
	px_dns_free(px);
	if (px->res) {
		ab_resolver_free(px->res);
		px->res = NULL;
	}
}

void ab_proxy_learn(ab_proxy *px, struct ab_learn_set *set, struct ab_supervisor *sup)
{
	px->learn = set;
	px->learn_sup = sup;
}

void ab_proxy_set_broker(ab_proxy *px, struct ab_broker *b)
{
	px->broker = b;
	ab_err err = {0};
	if (b && ab_broker_response_set(b, &px->rset, &err) < 0)
		px->rset = NULL; /* masking then fails closed: see pxhttp.c */
	for (size_t i = 0; b && px->audit && i < b->skipped.n; i++) {
		/* an optional secret whose source was absent (names only) */
		json_t *ev = json_object();
		json_object_set_new(ev, "event", json_string("secret-skipped"));
		json_object_set_new(ev, "secret", json_string(b->skipped.v[i]));
		ab_audit_emit(px->audit, ev);
	}
}

void ab_proxy_free(ab_proxy *px)
{
	if (!px)
		return;
	ab_proxy_shutdown(px);
	if (px->elsewhere_suppressed) {
		json_t *ev = json_object();
		json_object_set_new(ev, "event", json_string("suppressed"));
		json_object_set_new(ev, "kind", json_string("placeholder-elsewhere"));
		json_object_set_new(ev, "count",
				    json_integer((json_int_t)px->elsewhere_suppressed));
		ab_audit_emit(px->audit, ev);
	}
	ab_netpolicy_free(&px->pol);
	free(px->up_host);
	free(px->ca_file);
	if (px->client_ctx)
		SSL_CTX_free(px->client_ctx);
	ab_scan_set_free(px->rset);
	for (size_t i = 0; i < px->nold_rsets; i++)
		ab_scan_set_free(px->old_rsets[i]);
	free(px->old_rsets);
	ab_strv_free(&px->no_proxy);
	free(px->maps);
	free(px->profile);
	json_decref(px->grants);
	json_decref(px->downgrades);
	free(px);
}
