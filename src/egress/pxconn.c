/* SPDX-License-Identifier: MIT */
/*
 * A client connection of the egress proxy (parent), from accept to close:
 * its buffers, the loop interest its state asks for, the answer that
 * refuses it and explains itself, the explicit proxy's request head and the
 * policy decision on its destination.  The dial is proxy.c's; what follows
 * it (HTTP, tunnels, interception) is in the files proxy_int.h names.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/ssl.h>

#include "proxy_int.h"

#include "agentbox/learn.h"
#include "agentbox/supervise.h"

#include <arpa/inet.h>
#include <netinet/in.h>

/* ------------------------------------------------------------ buffers */

/* Buffers may hold a secret's real value (requests to a brokered host):
 * growing, draining and freeing never leave a copy behind. */
static int buf_grow(px_buf *b, size_t need)
{
	size_t cap = b->cap ? b->cap : 4096;
	while (cap < need)
		cap *= 2;
	char *p = malloc(cap);
	if (!p)
		return -ENOMEM;
	if (b->len)
		memcpy(p, b->p, b->len);
	if (b->p) {
		explicit_bzero(b->p, b->cap);
		free(b->p);
	}
	b->p = p;
	b->cap = cap;
	return 0;
}

int px_buf_reserve(px_buf *b, size_t need)
{
	return need > b->cap ? buf_grow(b, need) : 0;
}

int px_buf_append(px_buf *b, const void *data, size_t n)
{
	if (!n)
		return 0; /* (data may be NULL then) */
	if (b->len + n > b->cap && buf_grow(b, b->len + n) < 0)
		return -ENOMEM;
	memcpy(b->p + b->len, data, n);
	b->len += n;
	return 0;
}

/* Drop n bytes from the front; an emptied buffer gives its memory back, so
 * idle connections cost no buffer space. */
void px_buf_consume(px_buf *b, size_t n)
{
	if (n >= b->len) {
		px_buf_free(b);
		return;
	}
	memmove(b->p, b->p + n, b->len - n);
	explicit_bzero(b->p + b->len - n, n);
	b->len -= n;
}

void px_buf_free(px_buf *b)
{
	if (b->p) {
		explicit_bzero(b->p, b->len);
		free(b->p);
	}
	*b = (px_buf){0};
}

ssize_t px_buf_read(px_buf *b, int fd, size_t want)
{
	if (b->len + want > b->cap && buf_grow(b, b->len + want) < 0)
		return -ENOMEM;
	ssize_t n;
	do
		n = read(fd, b->p + b->len, want);
	while (n < 0 && errno == EINTR);
	int e = errno;
	if (n > 0)
		b->len += (size_t)n;
	if (b->len == 0)
		px_buf_free(b); /* EAGAIN is the common case: idle sides hold no memory */
	return n < 0 ? -e : n;
}

ssize_t px_buf_write(px_buf *b, int fd)
{
	if (!b->len)
		return 0;
	ssize_t n;
	do
		n = send(fd, b->p, b->len, MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	px_buf_consume(b, (size_t)n);
	return n;
}

/* ------------------------------------------------------------ connections */

static void set_interest(ab_proxy *px, int fd, unsigned *cur, unsigned want)
{
	if (fd < 0 || *cur == want)
		return;
	ab_loop_modify(px->loop, fd, want);
	*cur = want;
}

void px_update(px_conn *c)
{
	unsigned cw = 0, uw = 0;
	bool toc = c->toc.len > 0;
	switch (c->state) {
	case PX_HEAD: cw = AB_EV_READ | (toc ? AB_EV_WRITE : 0); break;
	case PX_RESOLVING: cw = toc ? AB_EV_WRITE : 0; break;
	case PX_CONNECTING:
		cw = toc ? AB_EV_WRITE : 0;
		uw = AB_EV_WRITE;
		break;
	case PX_UPCONNECT:
		cw = toc ? AB_EV_WRITE : 0;
		uw = AB_EV_READ;
		break;
	case PX_HELLO:
		cw = AB_EV_READ | (toc ? AB_EV_WRITE : 0);
		/* the upstream matters only until the client's first byte (does the
		 * server speak first?); after it, its data or EOF would spin us */
		uw = c->in.len ? 0 : AB_EV_READ;
		break;
	case PX_TUNNEL:
		/* a side is read only when what it sent last is all delivered */
		cw = (!c->out.len && !c->cu.eof ? AB_EV_READ : 0) |
		     (c->toc.len || c->c_ssl_ww ? AB_EV_WRITE : 0);
		uw = (!c->toc.len && !c->uc.eof ? AB_EV_READ : 0) |
		     (c->out.len || c->u_ssl_ww ? AB_EV_WRITE : 0);
		break;
	case PX_HTTP: {
		bool upgrading = c->nfifo > 0 && c->fifo[c->nfifo - 1].upgrade;
		if (!c->c_eof && c->out.len < PX_BUF_MAX && c->in.len < PX_BUF_MAX &&
		    c->nfifo < PX_FIFO && !c->want_switch && !upgrading && !c->close_after)
			cw |= AB_EV_READ;
		if (toc)
			cw |= AB_EV_WRITE;
		if (c->ufd >= 0) {
			if (!c->u_eof && c->toc.len < PX_BUF_MAX)
				uw |= AB_EV_READ;
			if (c->out.len || c->u_ssl_ww)
				uw |= AB_EV_WRITE;
		}
		if (c->c_ssl_ww)
			cw |= AB_EV_WRITE;
		break;
	}
	case PX_TLS_ACCEPT:
		if (!c->cl_hs_done)
			cw = AB_EV_READ | (c->tls_ww ? AB_EV_WRITE : 0);
		if (!c->up_hs_done && !c->up_hs_failed)
			uw = AB_EV_READ | (c->up_hs_ww ? AB_EV_WRITE : 0);
		break;
	case PX_CLOSING: cw = AB_EV_WRITE; break;
	case PX_HELD: break; /* nothing read or written until the answer */
	}
	set_interest(c->px, c->cfd, &c->cev, cw);
	set_interest(c->px, c->ufd, &c->uev, uw);
}

static void close_upstream(px_conn *c)
{
	if (c->job) {
		ab_resolve_cancel(c->job);
		c->job = NULL;
	}
	if (c->ussl) {
		SSL_free(c->ussl);
		c->ussl = NULL;
	}
	if (c->ufd >= 0) {
		ab_loop_unwatch(c->px->loop, c->ufd);
		close(c->ufd);
		c->ufd = -1;
		c->uev = 0;
	}
	px_buf_free(&c->out);
	px_buf_free(&c->back);
}

void px_close(px_conn *c)
{
	ab_proxy *px = c->px;
	if (!c->logged && c->state == PX_TUNNEL)
		px_log_conn(c, "allow", c->rule, 200, NULL);
	close_upstream(c);
	if (c->cfd >= 0) {
		ab_loop_unwatch(px->loop, c->cfd);
		close(c->cfd);
	}
	px_tunnel_free(c);
	px_tls_free(c);
	px_http_free(c);
	if (c->kick)
		ab_loop_timer_cancel(px->loop, c->kick);
	px_buf_free(&c->in);
	px_buf_free(&c->toc);
	free(c->fifo);
	if (c->prev)
		c->prev->next = c->next;
	else
		px->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	px->nconns--;
	free(c);
}

/* Printable, bounded copy of untrusted text for messages and the log. */
static void sanitize(char *out, size_t n, const char *in, size_t len)
{
	size_t o = 0;
	for (size_t i = 0; i < len && o + 1 < n; i++) {
		unsigned char ch = (unsigned char)in[i];
		out[o++] = ch >= 0x20 && ch < 0x7f && ch != '"' && ch != '\\' ? (char)ch : '?';
	}
	out[o] = '\0';
}

/* Answer the client with `status` and a one-line plain-text explanation
 * (when it still speaks HTTP to us), log the decision, close after the
 * answer is flushed.  Tunnels already established are just closed. */
void px_fail(px_conn *c, int status, const char *decision, const char *rule, const char *fmt, ...)
{
	char msg[768];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	bool http = c->state == PX_HEAD ||
		    ((c->state == PX_RESOLVING || c->state == PX_CONNECTING ||
		      c->state == PX_UPCONNECT) &&
		     (c->side == PX_EXPLICIT || c->fixed)) ||
		    (c->state == PX_HTTP && (c->nfifo == 0 || !c->fifo[0].head_sent));
	if (c->nfifo > 0) {
		px_log_request(c, &c->fifo[0], decision, status);
		c->logged = true;
	} else {
		px_log_conn(c, decision, rule, status, msg);
	}
	close_upstream(c);
	px_tunnel_free(c);
	if (!http || c->cfd < 0) {
		px_close(c);
		return;
	}
	char head[256];
	int hn = snprintf(head, sizeof(head),
			  "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\n"
			  "Content-Length: %zu\r\nConnection: close\r\n"
			  "X-Agentbox-Decision: %s\r\n\r\n",
			  status, ab_http_status_text(status),
			  strlen(msg) + 1 + (strncmp(msg, "agentbox", 8) ? 10 : 0), decision);
	/* toc keeps what it holds: only complete earlier responses (a partial one
	 * made http false above), which the client is owed before this answer */
	px_buf_free(&c->in);
	c->nfifo = 0;
	bool own = strncmp(msg, "agentbox", 8) == 0; /* already says who speaks */
	if (px_buf_append(&c->toc, head, (size_t)hn) < 0 ||
	    (!own && px_buf_append(&c->toc, "agentbox: ", 10) < 0) ||
	    px_buf_append(&c->toc, msg, strlen(msg)) < 0 || px_buf_append(&c->toc, "\n", 1) < 0) {
		px_close(c);
		return;
	}
	c->state = PX_CLOSING;
	c->deadline = ab_now_ms() + 10000;
	px_update(c);
}

/* ------------------------------------------------------------ decisions */

/* run --learn: record NORM:PORT ("[v6]:port" for an IPv6 literal).  0, or
 * -errno when it cannot be kept (then it is refused as usual). */
static int learn_record(px_conn *c, const char *norm, unsigned port)
{
	char what[AB_HOST_BUF + 16], prog[AB_LEARN_PROG_MAX];
	snprintf(what, sizeof(what), strchr(norm, ':') ? "[%s]:%u" : "%s:%u", norm, port);
	/* the program: the one whose connect from this client's port the
	 * supervisor carried out */
	struct sockaddr_storage peer;
	socklen_t pl = sizeof(peer);
	uint16_t pport = 0;
	if (getpeername(c->cfd, (struct sockaddr *)&peer, &pl) == 0)
		pport = peer.ss_family == AF_INET ? ntohs(((struct sockaddr_in *)&peer)->sin_port)
			: peer.ss_family == AF_INET6
				? ntohs(((struct sockaddr_in6 *)&peer)->sin6_port)
				: 0;
	bool named = pport && ab_supervisor_learn_port(c->px->learn_sup, pport, prog, sizeof(prog));
	return ab_learn_add(c->px->learn, AB_LEARN_HOST, what, named ? prog : NULL);
}

/* Policy for host:port; fills c->host/port/rule.  Returns 0 to go on, or a
 * negative errno after answering the client: -EINVAL (not a valid
 * destination), -EACCES (the policy refuses it), or -EINPROGRESS: held
 * while the user is asked (pxask.c). */
int px_decide(px_conn *c, const char *host, unsigned port)
{
	ab_proxy *px = c->px;
	char norm[AB_HOST_BUF], shown[80];
	int k = ab_host_normalize(host, norm, sizeof(norm));
	if (k < 0) {
		sanitize(shown, sizeof(shown), host, strlen(host));
		snprintf(c->host, sizeof(c->host), "%s", "invalid");
		c->port = (uint16_t)port;
		px_fail(c, 400, "deny", "invalid-host", "'%s' is not a valid host name (%s)", shown,
			ab_host_strerror(k));
		return -EINVAL;
	}
	snprintf(c->host, sizeof(c->host), "%s", norm);
	c->port = (uint16_t)port;
	const ab_netrule *rule = NULL;
	ab_netverdict v = ab_netpolicy_check(&px->pol, norm, port, &rule);
	switch (v) {
	case AB_NET_ALLOW:
		snprintf(c->rule, sizeof(c->rule), "%s", rule ? rule->text : "allow");
		return 0;
	case AB_NET_DENY:
		px_fail(c, 403, "deny", rule ? rule->text : "deny",
			"%s:%u is denied by rule '%s' of profile '%s' (network.deny)", norm, port,
			rule ? rule->text : "?", px->profile);
		return -EACCES;
	case AB_NET_INVALID:
		px_fail(c, 400, "deny", "invalid-host", "%s:%u is not a valid destination", norm,
			port);
		return -EINVAL;
	default:
		if (px->learn && learn_record(c, norm, port) == 0) {
			snprintf(c->rule, sizeof(c->rule), "%s", "learn");
			return 0;
		}
		if (px_hold(c))
			return -EINPROGRESS;
		px_fail(c, 403, "deny", "not-listed",
			"%s:%u is not in the allowlist of profile '%s' (add it under "
			"network.allow)",
			norm, port, px->profile);
		return -EACCES;
	}
}

/* ------------------------------------------------------------ events */

static void head_read(px_conn *c)
{
	ssize_t n = px_buf_read(&c->in, c->cfd, 16384);
	if (n == -EAGAIN)
		return;
	if (n == 0 && c->in.len) {
		/* the client closed its side (it may still read) inside a head */
		px_fail(c, 400, "deny", "incomplete",
			"incomplete request: the client closed its side inside the request head");
		return;
	}
	if (n <= 0) {
		px_close(c); /* EOF or error before a request: nothing to log */
		return;
	}
	px_head_process(c);
}

/* An explicit request head at the front of c->in: CONNECT, or the first
 * absolute-form request for a destination. */
void px_head_process(px_conn *c)
{
	close_upstream(c); /* a new destination (or the first) */
	c->state = PX_HEAD;
	c->is_connect = false;
	c->fixed = false;
	c->logged = false;
	c->t0 = ab_now_ms();
	c->up = c->down = 0;
	c->dialled[0] = '\0';
	c->path[0] = '\0';
	_cleanup_free_ ab_http_req *req = malloc(sizeof(*req));
	if (!req) {
		px_close(c);
		return;
	}
	int r = ab_http_parse_head(c->in.p, c->in.len, NULL, req);
	if (r == 0) { /* the deadline set when the head began still holds */
		px_update(c);
		return;
	}
	if (r < 0) {
		snprintf(c->method, sizeof(c->method), "?");
		px_fail(c, req->status, "deny", "malformed", "malformed request: %s", req->reason);
		return;
	}
	sanitize(c->method, sizeof(c->method), c->in.p + req->method_tok.off, req->method_tok.len);
	if (req->form == AB_HTTP_AUTHORITY) {
		char host[AB_HOST_INPUT_MAX + 1];
		sanitize(host, sizeof(host), c->in.p + req->host.off, req->host.len);
		unsigned port = req->port_num;
		px_buf_consume(&c->in, (size_t)r);
		c->is_connect = true;
		if (px_decide(c, host, port) == 0)
			px_dial(c);
		return;
	}
	if (req->form != AB_HTTP_ABSOLUTE) {
		px_fail(c, 400, "deny", "not-a-proxy-request",
			"this is agentbox's egress proxy: send absolute-form requests "
			"(http://host/path) or CONNECT host:port");
		return;
	}
	char host[AB_HOST_INPUT_MAX + 1];
	sanitize(host, sizeof(host), c->in.p + req->host.off, req->host.len);
	unsigned port = req->port_num;
	px_copy_path(c->path, sizeof(c->path), c->in.p + req->path.off, req->path.len);
	if (!c->path[0])
		snprintf(c->path, sizeof(c->path), "/");
	/* the HTTP engine parses the head again, with its body */
	if (px_decide(c, host, port) == 0)
		px_dial(c);
}

void px_on_client(ab_loop *l, int fd, unsigned ev, void *data)
{
	px_conn *c = data;
	switch (c->state) {
	case PX_HEAD:
		if (ev & AB_EV_WRITE) {
			ssize_t n = px_buf_write(&c->toc, c->cfd);
			if (n < 0 && n != -EAGAIN) {
				px_close(c);
				return;
			}
		}
		if (ev & (AB_EV_READ | AB_EV_HUP | AB_EV_ERR))
			head_read(c);
		else
			px_update(c);
		return;
	case PX_HELLO:
		if (ev & AB_EV_WRITE) {
			ssize_t n = px_buf_write(&c->toc, c->cfd);
			if (n < 0 && n != -EAGAIN) {
				px_close(c);
				return;
			}
		}
		px_hello(c);
		return;
	case PX_TUNNEL: px_tunnel_pump(c, true, false); return;
	case PX_HTTP: px_http_pump(c); return;
	case PX_TLS_ACCEPT: px_tls_pump(c); return;
	case PX_CLOSING: {
		ssize_t n = px_io_write(c, false, &c->toc);
		if ((n < 0 && n != -EAGAIN) || (!c->toc.len && !c->c_ssl_ww)) {
			shutdown(c->cfd, SHUT_WR);
			px_close(c);
		}
		return;
	}
	default: /* dialling: toc may still hold the previous destination's answers */
		if (ev & AB_EV_WRITE) {
			ssize_t n = px_buf_write(&c->toc, c->cfd);
			if (n < 0 && n != -EAGAIN) {
				px_close(c);
				return;
			}
		}
		if (ev & (AB_EV_HUP | AB_EV_ERR))
			px_close(c);
		else
			px_update(c);
		return;
	}
}
