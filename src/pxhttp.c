/* SPDX-License-Identifier: MIT */
/*
 * Plain-HTTP forwarding of the egress proxy (parent): explicit absolute-form
 * requests, and plain HTTP inside a tunnel or on a transparent port (the
 * destination then fixed).  Every request head is parsed strictly
 * (src/http.c) and checked against the destination; bodies are framed both
 * ways (ab_http_framer), so persistent connections and pipelining work and
 * the upstream changes only between responses.  One upstream connection per
 * client connection, reused while the destination stays the same.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "proxy_int.h"

static bool hdr_is(const char *buf, ab_http_span name, const char *want)
{
	return name.len == strlen(want) && strncasecmp(buf + name.off, want, name.len) == 0;
}

void px_copy_path(char *out, size_t n, const char *p, size_t len)
{
	size_t o = 0;
	for (size_t i = 0; i < len && o + 1 < n; i++) {
		unsigned char ch = (unsigned char)p[i];
		if (ch == '?' || ch == '#')
			break; /* the query never reaches the log */
		out[o++] = ch > 0x20 && ch < 0x7f && ch != '"' && ch != '\\' ? (char)ch : '?';
	}
	out[o] = '\0';
}

/* The request's destination, normalised.  For origin-form only the Host
 * header names it. */
static int target_of(const px_conn *c, const ab_http_req *q, const char *buf, char *host,
		     unsigned *port)
{
	char raw[AB_HOST_INPUT_MAX + 1];
	ab_http_span h = q->form == AB_HTTP_ABSOLUTE ? q->host : q->host_hdr;
	*port = q->form == AB_HTTP_ABSOLUTE ? q->port_num : c->port;
	if (q->form != AB_HTTP_ABSOLUTE) {
		/* Host: name[:port] */
		size_t len = h.len;
		const char *s = buf + h.off;
		const char *colon = NULL;
		if (len && s[0] == '[') {
			const char *rb = memchr(s, ']', len);
			if (rb && (size_t)(rb - s) + 1 < len && rb[1] == ':')
				colon = rb + 1;
		} else {
			colon = memchr(s, ':', len);
		}
		if (colon) {
			size_t pl = len - (size_t)(colon - s) - 1;
			unsigned v = 0;
			if (!pl || pl > 5)
				return -EINVAL;
			for (size_t i = 0; i < pl; i++) {
				if (colon[1 + i] < '0' || colon[1 + i] > '9')
					return -EINVAL;
				v = v * 10 + (unsigned)(colon[1 + i] - '0');
			}
			if (!v || v > 65535)
				return -EINVAL;
			*port = v;
			len = (size_t)(colon - s);
		}
		h.len = (uint32_t)len;
	}
	if (!h.len || h.len > AB_HOST_INPUT_MAX)
		return -EINVAL;
	memcpy(raw, buf + h.off, h.len);
	raw[h.len] = '\0';
	return ab_host_normalize(raw, host, AB_HOST_BUF) < 0 ? -EINVAL : 0;
}

/* Rewrite the head for the upstream: origin-form target, no Proxy-*
 * headers, Host added for HTTP/1.0 requests without one. */
static int forward_head(px_conn *c, const ab_http_req *q, const char *buf)
{
	px_buf *o = &c->out;
	size_t before = o->len;
	int r = px_buf_append(o, buf + q->method_tok.off, q->method_tok.len);
	r |= px_buf_append(o, " ", 1);
	if (q->form == AB_HTTP_ABSOLUTE) {
		if (q->path.len)
			r |= px_buf_append(o, buf + q->path.off, q->path.len);
		else if (q->method == AB_HTTP_OPTIONS)
			r |= px_buf_append(o, "*", 1);
		else
			r |= px_buf_append(o, "/", 1);
	} else {
		r |= px_buf_append(o, buf + q->target.off, q->target.len);
	}
	r |= px_buf_append(o, q->version_minor ? " HTTP/1.1\r\n" : " HTTP/1.0\r\n", 11);
	for (size_t i = 0; i < q->n_headers; i++) {
		const ab_http_header *h = &q->headers[i];
		if (hdr_is(buf, h->name, "proxy-connection") ||
		    hdr_is(buf, h->name, "proxy-authorization"))
			continue;
		r |= px_buf_append(o, buf + h->name.off, h->name.len);
		r |= px_buf_append(o, ": ", 2);
		r |= px_buf_append(o, buf + h->value.off, h->value.len);
		r |= px_buf_append(o, "\r\n", 2);
	}
	if (!q->has_host) {
		char hh[AB_HOST_BUF + 16];
		int n = snprintf(hh, sizeof(hh), "Host: %s:%u\r\n", c->host, (unsigned)c->port);
		r |= px_buf_append(o, hh, (size_t)n);
	}
	r |= px_buf_append(o, "\r\n", 2);
	if (r)
		return -ENOMEM;
	return (int)(o->len - before);
}

/* Returns 1 to go on, 0 to wait for more bytes, -1 when c changed state or
 * is gone (stop touching it). */
static int one_request(px_conn *c)
{
	ab_http_req *q = malloc(sizeof(*q));
	if (!q) {
		px_close(c);
		return -1;
	}
	int r = ab_http_parse_head(c->in.p, c->in.len, NULL, q);
	if (r == 0) {
		free(q);
		return 0;
	}
	if (r < 0) {
		int st = q->status;
		const char *why = q->reason;
		free(q);
		if (c->nfifo) { /* cannot answer out of order */
			px_close(c);
			return -1;
		}
		px_fail(c, st, "deny", "malformed", "malformed request: %s", why);
		return -1;
	}
	char host[AB_HOST_BUF];
	unsigned port = 0;
	if (q->method == AB_HTTP_CONNECT) {
		free(q);
		if (c->fixed) {
			px_fail(c, 400, "deny", "nested-connect",
				"CONNECT inside a tunnel or to a transparent destination");
			return -1;
		}
		if (c->nfifo || c->in_resp_body) {
			c->want_switch = true;
			return 0;
		}
		/* a new CONNECT on a kept-alive proxy connection */
		px_head_process(c);
		return -1;
	}
	if (!c->fixed && q->form != AB_HTTP_ABSOLUTE) {
		free(q);
		px_fail(c, 400, "deny", "not-a-proxy-request",
			"this is agentbox's egress proxy: send absolute-form requests "
			"(http://host/path) or CONNECT host:port");
		return -1;
	}
	if (target_of(c, q, c->in.p, host, &port) < 0) {
		free(q);
		px_fail(c, 400, "deny", "invalid-host", "the request names no valid host");
		return -1;
	}
	if (strcmp(host, c->host) != 0 || port != c->port) {
		free(q);
		if (c->fixed) {
			px_fail(c, 400, "deny", "host-mismatch",
				"the request is for %s:%u but this connection goes to %s:%u", host,
				port, c->host, (unsigned)c->port);
			return -1;
		}
		if (c->nfifo || c->in_resp_body) {
			c->want_switch = true; /* after the responses in flight */
			return 0;
		}
		px_head_process(c); /* another destination: decide and dial again */
		return -1;
	}
	if (c->ufd < 0) { /* the upstream closed a kept-alive connection: dial again */
		free(q);
		px_dial(c);
		return -1;
	}
	px_req *e = &c->fifo[c->nfifo];
	memset(e, 0, sizeof(*e));
	snprintf(e->method, sizeof(e->method), "%.*s", (int)q->method_tok.len,
		 c->in.p + q->method_tok.off);
	e->m = q->method;
	if (q->form == AB_HTTP_ABSOLUTE)
		px_copy_path(e->path, sizeof(e->path), c->in.p + q->path.off, q->path.len);
	else
		px_copy_path(e->path, sizeof(e->path), c->in.p + q->target.off, q->target.len);
	if (!e->path[0])
		snprintf(e->path, sizeof(e->path), "/");
	e->t0 = ab_now_ms();
	e->upgrade = q->conn_upgrade && q->has_upgrade;
	int hn = forward_head(c, q, c->in.p);
	bool chunked = q->chunked;
	uint64_t cl = q->has_content_length ? q->content_length : 0;
	free(q);
	if (hn < 0) {
		px_close(c);
		return -1;
	}
	e->up = (uint64_t)hn;
	c->nfifo++;
	px_buf_consume(&c->in, (size_t)r);
	if (chunked || cl) {
		ab_http_framer_init(&c->reqf, chunked ? AB_HTTP_BODY_CHUNKED : AB_HTTP_BODY_LENGTH, cl);
		c->in_req_body = true;
	}
	c->deadline = ab_now_ms() + AB_PROXY_IDLE_MS;
	return 1;
}

static int process_requests(px_conn *c)
{
	for (;;) {
		if (c->in_req_body) {
			if (!c->in.len)
				return 0;
			bool done = false;
			int n = ab_http_framer_feed(&c->reqf, c->in.p, c->in.len, &done);
			if (n < 0) {
				px_close(c); /* a broken body: the stream cannot be resynchronised */
				return -1;
			}
			if (px_buf_append(&c->out, c->in.p, (size_t)n) < 0) {
				px_close(c);
				return -1;
			}
			c->fifo[c->nfifo - 1].up += (uint64_t)n;
			px_buf_consume(&c->in, (size_t)n);
			if (!done)
				return 0;
			c->in_req_body = false;
			continue;
		}
		if (!c->in.len || c->nfifo >= PX_FIFO || c->out.len >= PX_BUF_MAX || c->want_switch ||
		    c->close_after || (c->nfifo && c->fifo[c->nfifo - 1].upgrade))
			return 0;
		int r = one_request(c);
		if (r <= 0)
			return r;
	}
}

static void finish_response(px_conn *c)
{
	px_req *e = &c->fifo[0];
	px_log_request(c, e, "allow", e->status);
	c->up += e->up;
	c->down += e->down;
	memmove(&c->fifo[0], &c->fifo[1], (size_t)(c->nfifo - 1) * sizeof(c->fifo[0]));
	c->nfifo--;
	c->in_resp_body = false;
	c->deadline = ab_now_ms() + (c->nfifo ? AB_PROXY_IDLE_MS : AB_PROXY_KEEPALIVE_MS);
}

static int process_responses(px_conn *c)
{
	static const ab_http_limits lim = {.max_head = PX_RESP_HEAD_MAX};
	for (;;) {
		if (c->in_resp_body) {
			if (!c->back.len)
				return 0;
			bool done = false;
			int n = ab_http_framer_feed(&c->respf, c->back.p, c->back.len, &done);
			if (n < 0 || px_buf_append(&c->toc, c->back.p, (size_t)n) < 0) {
				px_close(c);
				return -1;
			}
			c->fifo[0].down += (uint64_t)n;
			px_buf_consume(&c->back, (size_t)n);
			if (!done)
				return 0;
			finish_response(c);
			continue;
		}
		if (!c->back.len)
			return 0;
		if (!c->nfifo) { /* bytes nobody asked for */
			px_close(c);
			return -1;
		}
		ab_http_resp *rs = malloc(sizeof(*rs));
		if (!rs) {
			px_close(c);
			return -1;
		}
		int r = ab_http_parse_response_head(c->back.p, c->back.len, &lim, rs);
		if (r == 0) {
			free(rs);
			return 0;
		}
		if (r < 0) {
			const char *why = rs->reason;
			free(rs);
			if (c->fifo[0].head_sent) {
				px_close(c);
				return -1;
			}
			px_fail(c, 502, "error", c->rule, "invalid response from %s:%u (%s)", c->host,
				(unsigned)c->port, why);
			return -1;
		}
		px_req *e = &c->fifo[0];
		ab_http_body_kind kind = ab_http_response_body(rs, e->m);
		int code = rs->code;
		bool close_after = rs->conn_close || (rs->version_minor == 0 && !rs->conn_keep_alive);
		uint64_t cl = rs->content_length;
		free(rs);
		if (px_buf_append(&c->toc, c->back.p, (size_t)r) < 0) {
			px_close(c);
			return -1;
		}
		px_buf_consume(&c->back, (size_t)r);
		e->down += (uint64_t)r;
		e->head_sent = true;
		e->status = code;
		if (code >= 100 && code < 200 && code != 101)
			continue; /* interim: the final response follows */
		if (kind == AB_HTTP_BODY_TUNNEL) {
			if (code != 101 || !e->upgrade || c->nfifo != 1) {
				px_close(c);
				return -1;
			}
			finish_response(c); /* logged as the upgrade request */
			px_tunnel_start(c);
			return -1;
		}
		if (close_after)
			c->close_after = true;
		if (kind == AB_HTTP_BODY_NONE || (kind == AB_HTTP_BODY_LENGTH && cl == 0)) {
			finish_response(c);
			continue;
		}
		ab_http_framer_init(&c->respf, kind, cl);
		c->in_resp_body = true;
	}
}

/* The upstream said EOF. */
static int upstream_eof(px_conn *c)
{
	if (c->in_resp_body && c->respf.kind == AB_HTTP_BODY_CLOSE) {
		finish_response(c);
		c->close_after = true;
	}
	if (c->nfifo) {
		if (!c->fifo[0].head_sent) {
			px_fail(c, 502, "error", c->rule,
				"%s:%u closed the connection without answering", c->host,
				(unsigned)c->port);
			return -1;
		}
		px_close(c); /* cut off mid-response: the client sees the close */
		return -1;
	}
	/* an idle kept-alive upstream went away: the next request dials again */
	ab_loop_unwatch(c->px->loop, c->ufd);
	close(c->ufd);
	c->ufd = -1;
	c->uev = 0;
	c->u_eof = false;
	return 0;
}

void px_http_start(px_conn *c)
{
	if (!c->fifo && !(c->fifo = calloc(PX_FIFO, sizeof(*c->fifo)))) {
		px_close(c);
		return;
	}
	c->state = PX_HTTP;
	c->deadline = ab_now_ms() + AB_PROXY_IDLE_MS;
	px_http_pump(c);
}

void px_http_pump(px_conn *c)
{
	for (int round = 0; round < 4; round++) {
		bool progress = false;
		if (c->toc.len) {
			ssize_t n = px_buf_write(&c->toc, c->cfd);
			if (n < 0 && n != -EAGAIN) {
				px_close(c);
				return;
			}
			progress |= n > 0;
		}
		if (c->out.len && c->ufd >= 0) {
			ssize_t n = px_buf_write(&c->out, c->ufd);
			if (n < 0 && n != -EAGAIN) {
				if (upstream_eof(c) < 0)
					return;
			}
			progress |= n > 0;
		}
		if (!c->c_eof && c->in.len < PX_BUF_MAX && c->out.len < PX_BUF_MAX) {
			ssize_t n = px_buf_read(&c->in, c->cfd, 16384);
			if (n == 0) {
				c->c_eof = true;
				if (c->in_req_body || (c->in.len && !c->nfifo)) {
					px_close(c); /* cut off inside a request */
					return;
				}
			} else if (n < 0 && n != -EAGAIN) {
				px_close(c);
				return;
			}
			progress |= n > 0;
		}
		if (process_requests(c) < 0)
			return;
		if (c->ufd >= 0 && c->toc.len < PX_BUF_MAX) {
			ssize_t n = px_buf_read(&c->back, c->ufd, 65536);
			if (n == 0) {
				if (upstream_eof(c) < 0)
					return;
			} else if (n < 0 && n != -EAGAIN) {
				if (upstream_eof(c) < 0)
					return;
			}
			progress |= n > 0;
		}
		if (process_responses(c) < 0)
			return;
		if (!c->nfifo && !c->in_resp_body && c->want_switch) {
			c->want_switch = false;
			px_head_process(c); /* the queued request names another destination */
			return;
		}
		if (!progress)
			break;
	}
	if (!c->toc.len && !c->nfifo && (c->close_after || c->c_eof)) {
		shutdown(c->cfd, SHUT_WR);
		px_close(c);
		return;
	}
	px_update(c);
}

void px_http_upstream_gone(px_conn *c)
{
	if (upstream_eof(c) == 0)
		px_update(c);
}
