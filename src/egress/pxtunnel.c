/* SPDX-License-Identifier: MIT */
/*
 * Tunnels of the egress proxy (parent): the check of a tunnel's first bytes
 * (a TLS ClientHello must name the tunnel's host: no domain fronting; what a
 * server could read as HTTP goes to the HTTP engine with the destination
 * fixed (ab_http_sniff_request); anything else is relayed opaque to the
 * destination already decided), then the relay itself
 * (read into one shared buffer, send on at once).
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agentbox/tls.h"
#include "proxy_int.h"

#define RELAY_CHUNK (512 * 1024)
#define RELAY_ROUNDS 8 /* per direction per event: fairness between connections */

static void deny(px_conn *c, const char *rule, const char *why)
{
	c->logged = true;
	json_t *ev = json_object();
	json_object_set_new(ev, "event", json_string("request"));
	json_object_set_new(ev, "conn", json_integer((json_int_t)c->id));
	json_object_set_new(ev, "side",
			    json_string(c->side == PX_EXPLICIT ? "explicit" : "transparent"));
	json_object_set_new(ev, "method", json_string(c->method));
	json_object_set_new(ev, "host", json_string(c->host));
	json_object_set_new(ev, "port", json_integer(c->port));
	json_object_set_new(ev, "decision", json_string("deny"));
	json_object_set_new(ev, "rule", json_string(rule));
	json_object_set_new(ev, "status", json_integer(0));
	json_object_set_new(ev, "bytes_up", json_integer(0));
	json_object_set_new(ev, "bytes_down", json_integer(0));
	json_object_set_new(ev, "duration_ms", json_integer((json_int_t)(ab_now_ms() - c->t0)));
	json_object_set_new(ev, "reason", json_string(why));
	ab_audit_emit(c->px->audit, ev);
	ab_audit_count(c->px->audit, c->host, c->port, false, 0, 0);
	px_close(c);
}

/* Does the stream start with a PROXY protocol header (v1 text, v2 binary)?
 * A server that trusts one would read a ClientHello or request behind it
 * that the checks here never look at.  1: yes, 0: no, -1: too few bytes. */
static int proxy_protocol(const char *p, size_t n)
{
	static const struct {
		const char *sig;
		size_t len;
	} hdr[] = {{"PROXY ", 6}, {"\r\n\r\n\0\r\nQUIT\n", 12}};
	for (size_t i = 0; i < AB_ARRAY_SIZE(hdr); i++) {
		size_t k = n < hdr[i].len ? n : hdr[i].len;
		if (memcmp(p, hdr[i].sig, k) == 0)
			return n < hdr[i].len ? -1 : 1;
	}
	return 0;
}

/* Returns false while more bytes are needed; true when c was handed on
 * (tunnel) or closed: c must not be touched then. */
static bool check_hello(px_conn *c)
{
	ab_tls_hello h;
	int r = ab_tls_parse_client_hello((const uint8_t *)c->in.p, c->in.len, &h);
	if (r == AB_TLS_NEED_MORE)
		return false;
	if (r != AB_TLS_OK) {
		deny(c, "bad-client-hello", h.reason ? h.reason : ab_tls_result_str(r));
		return true;
	}
	if (h.has_ech) {
		deny(c, "ech", "encrypted ClientHello hides the server name");
		return true;
	}
	if (h.has_sni && (h.sni_invalid || strcmp(h.sni, c->host) != 0)) {
		deny(c, "sni-mismatch", "the TLS server name does not match the tunnel's host");
		return true;
	}
	if (c->side == PX_TRANSPARENT)
		snprintf(c->method, sizeof(c->method), "TLS");
	if (px_should_intercept(c)) /* a secret is bound here: TLS ends in agentbox */
		px_intercept_start(c);
	else
		px_tunnel_start(c);
	return true;
}

void px_hello(px_conn *c)
{
	/* the server speaks first (ssh, smtp...): an opaque tunnel.  Its first
	 * bytes may already be in c->back (read with a chained proxy's 200): no
	 * event would tell of them. */
	if (!c->in.len && c->ufd >= 0) {
		char b;
		ssize_t n = c->back.len ? 1 : recv(c->ufd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
		if (n > 0) {
			px_tunnel_start(c);
			return;
		}
		if (n == 0) {
			deny(c, "upstream-closed", "the upstream closed before the client spoke");
			return;
		}
	}
	if (c->toc.len) {
		ssize_t n = px_buf_write(&c->toc, c->cfd);
		if (n < 0 && n != -EAGAIN) {
			px_close(c);
			return;
		}
	}
	bool eof = false;
	if (c->in.len < AB_TLS_MAX_HELLO) {
		size_t room = AB_TLS_MAX_HELLO - c->in.len;
		ssize_t n = px_buf_read(&c->in, c->cfd, room < 4096 ? room : 4096);
		if (n == 0) {
			if (!c->in.len) {
				/* no byte to check: the client only reads now (a server
				 * that speaks first, or nothing).  An opaque tunnel with
				 * the half-close passed on; logged when it ends. */
				c->cu.eof = true;
				px_tunnel_start(c);
				return;
			}
			eof = true;
		} else if (n < 0 && n != -EAGAIN) {
			px_close(c);
			return;
		}
	}
	if (!c->in.len) {
		px_update(c);
		return;
	}
	int pp = proxy_protocol(c->in.p, c->in.len);
	if (pp > 0) {
		deny(c, "proxy-protocol", "a PROXY protocol header from the client");
		return;
	}
	if (pp < 0 && !eof) {
		px_update(c);
		return;
	}
	if ((unsigned char)c->in.p[0] == 0x16) {
		if (!check_hello(c)) {
			if (eof)
				deny(c, "bad-client-hello",
				     "the client closed inside its ClientHello");
			else
				px_update(c);
		}
		return;
	}
	/* what a server could read as a request goes to the strict parser, which
	 * refuses what it refuses everywhere (HTTP/0.9, a NUL first, no HTTP/1.x) */
	int h = ab_http_sniff_request(c->in.p, c->in.len, eof);
	if (h < 0 && !eof) {
		px_update(c);
		return;
	}
	if (h > 0) {
		c->fixed = true;
		c->state = PX_HTTP;
		px_http_start(c);
		return;
	}
	px_tunnel_start(c);
}

void px_tunnel_start(px_conn *c)
{
	c->state = PX_TUNNEL;
	c->deadline = ab_now_ms() + AB_PROXY_IDLE_MS;
	/* bytes already read (the ClientHello, a server banner) go first */
	if (c->in.len) {
		c->up += c->in.len;
		if (px_buf_append(&c->out, c->in.p, c->in.len) < 0) {
			px_close(c);
			return;
		}
		px_buf_free(&c->in);
	}
	if (c->back.len) {
		c->down += c->back.len;
		/* a masked WebSocket's first frames came with the 101 */
		if (px_buf_append(c->ws_mask ? &c->wsraw : &c->toc, c->back.p, c->back.len) < 0 ||
		    (c->ws_mask && px_ws_cut(c, &c->toc) < 0)) {
			explicit_bzero(c->back.p, c->back.len);
			px_close(c);
			return;
		}
		explicit_bzero(c->back.p, c->back.len);
		px_buf_free(&c->back);
	}
	c->tunnel_started = true;
	px_tunnel_pump(c, true, true);
}

void px_tunnel_free(px_conn *c)
{
	c->cu = c->uc = (px_dir){0};
}

/* One buffer for every tunnel (the loop is single-threaded): bytes go
 * socket -> scratch -> socket in one read and one send; only what the
 * destination does not take at once is kept, in the tunnel's own buffer.
 * Measured faster than splice(2) through a pipe on loopback (docs/
 * performance.md), and an idle tunnel holds two sockets and no memory. */
static char scratch[RELAY_CHUNK];

/* Move one direction as far as it goes without blocking.  Returns 0, or a
 * negative errno when the connection must close. */
static int dir_pump(px_conn *c, int src, int dst, px_dir *d, px_buf *pre, uint64_t *count)
{
	for (int round = 0; round < RELAY_ROUNDS; round++) {
		if (pre->len) {
			ssize_t n = px_buf_write(pre, dst);
			if (n == -EAGAIN)
				return 0;
			if (n < 0)
				return (int)n;
			continue;
		}
		if (d->eof)
			break;
		ssize_t n;
		do
			n = read(src, scratch, sizeof(scratch));
		while (n < 0 && errno == EINTR);
		if (n < 0)
			return errno == EAGAIN ? 0 : -errno;
		if (n == 0) {
			d->eof = true;
			break;
		}
		*count += (uint64_t)n;
		ssize_t w;
		do
			w = send(dst, scratch, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT);
		while (w < 0 && errno == EINTR);
		if (w < 0 && errno != EAGAIN)
			return -errno;
		if (w < 0)
			w = 0;
		if (w < n && px_buf_append(pre, scratch + w, (size_t)(n - w)) < 0)
			return -ENOMEM;
		if (w < n)
			return 0; /* dst is full: wait for it */
	}
	if (d->eof && !pre->len && !d->shut) {
		shutdown(dst, SHUT_WR);
		d->shut = true;
	}
	return 0;
}

void px_tunnel_pump(px_conn *c, bool c_ev, bool u_ev)
{
	(void)c_ev;
	(void)u_ev;
	if (c->intercepted) { /* an upgraded stream between two TLS sessions */
		px_tls_tunnel_pump(c);
		return;
	}
	if (dir_pump(c, c->cfd, c->ufd, &c->cu, &c->out, &c->up) < 0 ||
	    dir_pump(c, c->ufd, c->cfd, &c->uc, &c->toc, &c->down) < 0) {
		px_close(c);
		return;
	}
	if (c->cu.shut && c->uc.shut) {
		px_close(c);
		return;
	}
	c->deadline = ab_now_ms() + AB_PROXY_IDLE_MS;
	px_update(c);
}
