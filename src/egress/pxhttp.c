/* SPDX-License-Identifier: MIT */
/*
 * Plain-HTTP forwarding of the egress proxy (parent): explicit absolute-form
 * requests, and plain HTTP inside a tunnel or on a transparent port (the
 * destination then fixed).  Every request head is parsed strictly
 * (src/parse/http.c) and checked against the destination; bodies are framed both
 * ways (ab_http_framer), so persistent connections and pipelining work and
 * the upstream changes only between responses.  One upstream connection per
 * client connection, reused while the destination stays the same.  What
 * credential brokering does to these streams (placeholders, masking, token
 * refreshes) is in pxbroker.c.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agentbox/broker.h"
#include "agentbox/credfile.h"
#include "proxy_int.h"

bool px_hdr_is(const char *buf, ab_http_span name, const char *want)
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
static int forward_head(px_conn *c, const ab_http_req *q, const char *buf, px_buf *o)
{
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
		if (px_hdr_is(buf, h->name, "proxy-connection") ||
		    px_hdr_is(buf, h->name, "proxy-authorization"))
			continue;
		/* masking cannot see into compressed responses, nor into
		 * compressed WebSocket frames (permessage-deflate) */
		if (c->intercepted && (px_hdr_is(buf, h->name, "accept-encoding") ||
				       px_hdr_is(buf, h->name, "sec-websocket-extensions")))
			continue;
		r |= px_buf_append(o, buf + h->name.off, h->name.len);
		r |= px_buf_append(o, ": ", 2);
		r |= px_buf_append(o, buf + h->value.off, h->value.len);
		r |= px_buf_append(o, "\r\n", 2);
	}
	if (c->intercepted)
		r |= px_buf_append(o, "Accept-Encoding: identity\r\n", 27);
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

/* Responses are still owed to the client: a refusal must not overtake them
 * (the client would take it for the answer to an earlier request).  It
 * waits; the pump comes back here as each response completes. */
static bool owed(const px_conn *c)
{
	return c->nfifo || c->in_resp_body;
}

/* The engine's steps return 1 (go on), 0 (wait for bytes, or for the
 * responses owed) or a negative errno once c is no longer theirs to touch:
 * closed (why: -ENOMEM, -EBADMSG...), answered with a refusal and closing
 * (-EACCES...), or handed on to another destination or to a tunnel
 * (HANDED_ON, which is no failure). */
#define HANDED_ON (-EINPROGRESS)

/* Close c for the reason E (a negative errno), returned. */
static int gone(px_conn *c, int e)
{
	px_close(c);
	return e;
}

/* A request or response is moving: the idle timeout starts again. */
static void alive(px_conn *c)
{
	c->deadline = ab_now_ms() + AB_PROXY_IDLE_MS;
}

/* Refuse the request at the front of c->in: now, or once the responses
 * owed are out.  Returns what one_request returns. */
static int refuse(px_conn *c, int status, const char *rule, const char *msg)
{
	if (owed(c))
		return 0;
	px_fail(c, status, "deny", rule, "%s", msg);
	return -EACCES;
}

/* A placeholder where its secret may not go: 403, logged as exfiltration. */
static int refuse_exfil(px_conn *c, px_req *e)
{
	if (owed(c))
		return 0; /* answered once the responses owed are out (the head is re-parsed) */
	px_log_exfil(c, e, 403);
	c->logged = true; /* px_fail: answer only */
	px_fail(c, 403, "deny", "exfiltration", "%s", c->exfil);
	return -EACCES;
}

/* Queue the request (r bytes of head at the front of c->in) for the
 * upstream.  Returns 1, or a negative errno when c was refused or closed. */
static int forward_request(px_conn *c, const ab_http_req *q, int r)
{
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
	e->rotate = c->intercepted && q->method == AB_HTTP_POST &&
		    ab_broker_token_endpoint(c->px->broker, c->host, c->port, e->path);
	e->upgrade = q->conn_upgrade && q->has_upgrade;
	e->ws = e->upgrade && q->upgrade_websocket;
	e->close = q->conn_close || (q->version_minor == 0 && !q->conn_keep_alive);
	_cleanup_px_buf_ px_buf head = {0};
	int hn = forward_head(c, q, c->in.p, &head);
	bool chunked = q->chunked;
	uint64_t cl = q->has_content_length ? q->content_length : 0;
	if (hn < 0)
		return gone(c, hn);
	if (c->px->broker && (chunked || cl)) {
		int k = px_body_scan_start(c, chunked);
		if (k < 0)
			return gone(c, k);
		/* the part of the body already here decides before the head leaves:
		 * a refusal is then still a 403, not a cut */
		size_t have = c->in.len - (size_t)r;
		if (!chunked && have > cl)
			have = (size_t)cl;
		if (have && px_body_prescan(c, c->in.p + r, have, chunked) == -EACCES)
			return refuse_exfil(c, e);
	}
	hn = px_swap_head(c, e, &head);
	if (hn < 0)
		return hn == -EACCES ? refuse_exfil(c, e) : gone(c, hn);
	e->up = (uint64_t)hn;
	c->nfifo++;
	px_buf_consume(&c->in, (size_t)r); /* q's spans pointed in there: not used after */
	if (chunked || cl) {
		ab_http_framer_init(&c->reqf, chunked ? AB_HTTP_BODY_CHUNKED : AB_HTTP_BODY_LENGTH,
				    cl);
		c->in_req_body = true;
	}
	alive(c);
	return 1;
}

/* One request head at the front of c->in: forwarded, refused, or the
 * connection handed on (a step of the engine, above). */
static int one_request(px_conn *c)
{
	_cleanup_free_ ab_http_req *q = malloc(sizeof(*q));
	if (!q)
		return gone(c, -ENOMEM);
	int r = ab_http_parse_head(c->in.p, c->in.len, NULL, q);
	if (r == 0 && c->c_eof) /* the rest of the head will never come */
		return refuse(
			c, 400, "incomplete",
			"incomplete request: the client closed its side inside the request head");
	if (r == 0)
		return 0;
	char msg[AB_HOST_BUF * 2 + 96];
	if (r < 0) {
		snprintf(msg, sizeof(msg), "malformed request: %s", q->reason);
		return refuse(c, q->status, "malformed", msg);
	}
	char host[AB_HOST_BUF];
	unsigned port = 0;
	if (q->method == AB_HTTP_CONNECT && c->fixed)
		return refuse(c, 400, "nested-connect",
			      "CONNECT inside a tunnel or to a transparent destination");
	if (q->method != AB_HTTP_CONNECT && !c->fixed && q->form != AB_HTTP_ABSOLUTE)
		return refuse(c, 400, "not-a-proxy-request",
			      "this is agentbox's egress proxy: send absolute-form requests "
			      "(http://host/path) or CONNECT host:port");
	if (q->method != AB_HTTP_CONNECT && target_of(c, q, c->in.p, host, &port) < 0)
		return refuse(c, 400, "invalid-host", "the request names no valid host");
	if (q->method != AB_HTTP_CONNECT && c->fixed &&
	    (strcmp(host, c->host) || port != c->port)) {
		snprintf(msg, sizeof(msg),
			 "the request is for %s:%u but this connection goes to %s:%u", host, port,
			 c->host, (unsigned)c->port);
		return refuse(c, 400, "host-mismatch", msg);
	}
	if (q->method == AB_HTTP_CONNECT || strcmp(host, c->host) || port != c->port) {
		/* another destination (a CONNECT counts as one) */
		if (owed(c)) {
			c->want_switch = true; /* after the responses in flight */
			return 0;
		}
		px_head_process(c); /* decide and dial again */
		return HANDED_ON;
	}
	if (c->ufd < 0) { /* the upstream closed a kept-alive connection: dial again */
		px_dial(c);
		return HANDED_ON;
	}
	return forward_request(c, q, r);
}

static int process_requests(px_conn *c)
{
	for (;;) {
		if (c->in_req_body) {
			/* no more than PX_BUF_MAX waits for a slow upstream */
			size_t room = c->out.len < PX_BUF_MAX ? PX_BUF_MAX - c->out.len : 0;
			if (!c->in.len && c->c_eof) {
				/* the client closed its side inside a body: it cannot be
				 * completed, and the upstream waits for the rest */
				for (int i = 0; i < c->nfifo; i++)
					px_log_request(c, &c->fifo[i], "error", 0);
				c->nfifo = 0;
				c->logged = true;
				return gone(c, -ECONNRESET);
			}
			if (!c->in.len || !room)
				return 0;
			bool done = false;
			int n = ab_http_framer_feed(&c->reqf, c->in.p,
						    c->in.len < room ? c->in.len : room, &done);
			if (n < 0) /* a broken body: the stream cannot be resynchronised */
				return gone(c, n);
			int br = px_body_out(c, c->in.p, (size_t)n, done);
			if (br == -EACCES) {
				/* the head already left: the only refusal left is the cut */
				if (c->nfifo)
					px_log_exfil(c, &c->fifo[c->nfifo - 1], 0);
				else
					px_log_conn(c, "deny", "exfiltration", 0, c->exfil);
				c->logged = true;
				c->nfifo = 0; /* the cut answers them all */
				return gone(c, -EACCES);
			}
			if (br < 0)
				return gone(c, br);
			if (c->nfifo) /* always: the body's request waits for its response */
				c->fifo[c->nfifo - 1].up += (uint64_t)n;
			px_buf_consume(&c->in, (size_t)n);
			alive(c);
			if (!done && c->c_eof && !c->in.len)
				continue; /* nothing more will come: cut (above) */
			if (!done)
				return 0;
			c->in_req_body = false;
			continue;
		}
		if (!c->in.len || c->nfifo >= PX_FIFO || c->out.len >= PX_BUF_MAX ||
		    c->want_switch || c->close_after || (c->nfifo && c->fifo[c->nfifo - 1].upgrade))
			return 0;
		int r = one_request(c);
		if (r <= 0)
			return r;
	}
}

void px_http_free(px_conn *c)
{
	if (c->bscan) {
		ab_scanner_free(c->bscan);
		free(c->bscan);
	}
	if (c->rscan) {
		ab_scanner_free(c->rscan);
		free(c->rscan);
	}
	ab_scan_set_free(c->bset);
	c->bscan = c->rscan = NULL;
	c->bset = NULL;
	if (c->rot.p)
		explicit_bzero(c->rot.p, c->rot.len);
	px_buf_free(&c->rot);
	if (c->wsraw.p)
		explicit_bzero(c->wsraw.p, c->wsraw.cap);
	px_buf_free(&c->wsraw);
	px_buf_free(&c->wsout);
	c->ws_mask = false;
	c->wsq_n = 0;
	c->capturing = false;
}

/* ------------------------------------------------------------ responses */

/* Does this response carry body bytes coded so that masking cannot see
 * into them (Content-Encoding other than identity, a transfer-coding other
 * than chunked)?  Then it is refused, never passed on: the proxy asked for
 * identity (forward_head), and a server that ignores it could carry a real
 * value compressed.  A response without body bytes (HEAD, 1xx, 204, 304,
 * Content-Length: 0) carries nothing and passes; a 101 starts another
 * protocol (a WebSocket is masked frame by frame, pxtls.c). */
static bool coded_body(const ab_http_resp *rs, ab_http_body_kind kind)
{
	if (!rs->content_coding.len && !rs->transfer_coding.len)
		return false;
	return kind == AB_HTTP_BODY_CHUNKED || kind == AB_HTTP_BODY_CLOSE ||
	       (kind == AB_HTTP_BODY_LENGTH && rs->content_length > 0);
}

/* Refuse the response at the front of c->back (rs, its head): decided at its
 * head, so none of its bytes has reached the client (earlier responses are
 * complete; a 1xx of its own may have gone, and a final 502 may follow
 * one).  The client gets a 502, the upstream connection is closed, and the
 * request's audit line says why.  c is closing afterwards. */
static void refuse_coded(px_conn *c, const ab_http_resp *rs)
{
	bool te = rs->transfer_coding.len != 0;
	ab_http_span sp = te ? rs->transfer_coding : rs->content_coding;
	char coding[40], why[AB_HOST_BUF + 256];
	size_t k = 0;
	for (size_t i = 0; i < sp.len && k + 1 < sizeof(coding); i++) {
		unsigned char ch = (unsigned char)c->back.p[sp.off + i];
		coding[k++] = ch > 0x20 && ch < 0x7f && ch != '"' && ch != '\\' ? (char)ch : '?';
	}
	coding[k] = '\0';
	snprintf(why, sizeof(why),
		 "agentbox: the response from %s:%u was refused: its body is coded "
		 "(%s: %s), and secrets are masked only in bodies that are not "
		 "(the request asked for Accept-Encoding: identity)",
		 c->host, (unsigned)c->port, te ? "Transfer-Encoding" : "Content-Encoding", coding);
	px_log_refused(c, &c->fifo[0], "encoded-response", 502, why);
	c->logged = true;
	/* logged: px_fail only answers (its 502 is the final response; requests
	 * pipelined behind this one get the close) */
	c->nfifo = 0;
	px_fail(c, 502, "deny", "encoded-response", "%s", why);
}

void px_finish_response(px_conn *c)
{
	px_req *e = &c->fifo[0];
	px_log_request(c, e, "allow", e->status);
	if (e->close)
		c->close_after = true; /* the client asked: it may be reading to the close */
	if (c->in_req_body && c->nfifo == 1 && e->status != 101) {
		/* answered before its body was all sent (an early 413 or 401): the
		 * rest of the body is not forwarded, and what follows it cannot be
		 * told apart from it, so the connection ends after this response */
		c->in_req_body = false;
		c->close_after = true;
		px_buf_free(&c->in);
	}
	c->up += e->up;
	c->down += e->down;
	memmove(&c->fifo[0], &c->fifo[1], (size_t)(c->nfifo - 1) * sizeof(c->fifo[0]));
	c->nfifo--;
	c->in_resp_body = false;
	c->deadline = ab_now_ms() + (c->nfifo ? AB_PROXY_IDLE_MS : AB_PROXY_KEEPALIVE_MS);
}

/* What the engine keeps of a response head, whose bytes stay at the front
 * of c->back until they are passed on. */
typedef struct resp_head {
	int len; /* of the head */
	int code;
	ab_http_body_kind kind;
	uint64_t cl; /* Content-Length */
	bool close;  /* Connection: close, or HTTP/1.0 without keep-alive */
} resp_head;

static int refresh_too_large(px_conn *c)
{
	px_fail(c, 502, "error", "token-refresh",
		"agentbox: the token refresh response from %s is larger than %d bytes", c->host,
		AB_CREDFILE_MAX);
	return -EFBIG;
}

/* The head of the next response, parsed into *H: 1, or 0 (not all here
 * yet), or a negative errno (a step of the engine): an invalid head, a
 * response nobody asked for, a coded body refused. */
static int read_head(px_conn *c, resp_head *h)
{
	static const ab_http_limits lim = {.max_head = PX_RESP_HEAD_MAX};
	if (!c->back.len)
		return 0;
	if (!c->nfifo) /* bytes nobody asked for */
		return gone(c, -EBADMSG);
	_cleanup_free_ ab_http_resp *rs = malloc(sizeof(*rs));
	if (!rs)
		return gone(c, -ENOMEM);
	int r = ab_http_parse_response_head(c->back.p, c->back.len, &lim, rs);
	if (r == 0)
		return 0;
	if (r < 0) {
		if (c->fifo[0].head_sent)
			return gone(c, -EBADMSG);
		px_fail(c, 502, "error", c->rule, "invalid response from %s:%u (%s)", c->host,
			(unsigned)c->port, rs->reason);
		return -EBADMSG;
	}
	h->kind = ab_http_response_body(rs, c->fifo[0].m);
	if (c->intercepted && coded_body(rs, h->kind)) {
		refuse_coded(c, rs);
		return -EACCES;
	}
	h->len = r;
	h->code = rs->code;
	h->close = rs->conn_close || (rs->version_minor == 0 && !rs->conn_keep_alive);
	h->cl = rs->content_length;
	return 1;
}

/* A token refresh's response (H: 2xx, a body whose end is known): held
 * whole, head and body, until its tokens are swapped (px_finish_capture). */
static int capture_start(px_conn *c, const resp_head *h)
{
	px_req *e = &c->fifo[0];
	if (h->kind == AB_HTTP_BODY_LENGTH && h->cl > AB_CREDFILE_MAX)
		return refresh_too_large(c);
	px_buf_free(&c->rot);
	if (px_buf_append(&c->rot, c->back.p, (size_t)h->len) < 0)
		return gone(c, -ENOMEM);
	c->rot_head = (size_t)h->len;
	c->capturing = true;
	px_buf_consume(&c->back, (size_t)h->len);
	e->down += (uint64_t)h->len;
	e->status = h->code;
	if (h->close)
		c->close_after = true;
	ab_http_framer_init(&c->respf, h->kind, h->cl);
	c->in_resp_body = true;
	return 1;
}

/* The body of a token refresh's response, held (c->rot) to its end. */
static int capture_body(px_conn *c)
{
	if (!c->back.len)
		return 0;
	bool done = false;
	int n = ab_http_framer_feed(&c->respf, c->back.p, c->back.len, &done);
	if (n < 0)
		return gone(c, n);
	if (px_buf_append(&c->rot, c->back.p, (size_t)n) < 0)
		return gone(c, -ENOMEM);
	px_buf_consume(&c->back, (size_t)n);
	c->fifo[0].down += (uint64_t)n;
	if (c->rot.len - c->rot_head > AB_CREDFILE_MAX + 8192)
		return refresh_too_large(c);
	alive(c);
	if (!done)
		return 0;
	int k = px_finish_capture(c);
	return k < 0 ? k : 1;
}

/* A 101 to the upgrade request: from here on a tunnel.  A WebSocket from an
 * intercepted host has its frames masked (pxtls.c); any other upgrade stays
 * opaque. */
static int start_upgrade(px_conn *c, int code)
{
	px_req *e = &c->fifo[0];
	if (code != 101 || !e->upgrade || c->nfifo != 1)
		return gone(c, -EBADMSG);
	if (c->intercepted && e->ws) {
		int k = px_resp_begin(c, false);
		if (k < 0)
			return gone(c, k);
		c->ws_mask = true;
		memset(&c->wsf, 0, sizeof(c->wsf));
		c->wshn = 0;
		c->wsq_n = 0;
	}
	px_finish_response(c); /* logged as the upgrade request */
	px_tunnel_start(c);
	return HANDED_ON;
}

/* The next response's head: passed on to the client (masked), or held (a
 * token refresh), or refused. */
static int response_head(px_conn *c)
{
	resp_head h;
	int k = read_head(c, &h);
	if (k <= 0)
		return k;
	px_req *e = &c->fifo[0];
	bool refresh = e->rotate && h.code >= 200 && h.code < 300;
	if (refresh &&
	    (h.kind == AB_HTTP_BODY_CHUNKED || (h.kind == AB_HTTP_BODY_LENGTH && h.cl > 0)))
		return capture_start(c, &h);
	if (refresh && h.kind == AB_HTTP_BODY_CLOSE) {
		px_fail(c, 502, "error", "token-refresh",
			"agentbox: the token refresh response from %s has no length", c->host);
		return -EBADMSG;
	}
	k = px_resp_begin(c, false);
	if (k >= 0)
		k = px_resp_out(c, c->back.p, (size_t)h.len, true);
	if (k >= 0)
		k = px_resp_begin(c, h.kind == AB_HTTP_BODY_CHUNKED);
	if (k < 0)
		return gone(c, k);
	px_buf_consume(&c->back, (size_t)h.len);
	e->down += (uint64_t)h.len;
	e->head_sent = true;
	e->status = h.code;
	if (h.code >= 100 && h.code < 200 && h.code != 101)
		return 1; /* interim: the final response follows */
	if (h.kind == AB_HTTP_BODY_TUNNEL)
		return start_upgrade(c, h.code);
	if (h.close)
		c->close_after = true;
	if (h.kind == AB_HTTP_BODY_NONE || (h.kind == AB_HTTP_BODY_LENGTH && h.cl == 0)) {
		px_finish_response(c);
		return 1;
	}
	ab_http_framer_init(&c->respf, h.kind, h.cl);
	c->in_resp_body = true;
	return 1;
}

/* Body bytes of the response at the front, to the client (masked). */
static int response_body(px_conn *c)
{
	if (!c->back.len)
		return 0;
	bool done = false;
	int n = ab_http_framer_feed(&c->respf, c->back.p, c->back.len, &done);
	int k = n < 0 ? n : px_resp_out(c, c->back.p, (size_t)n, done);
	if (k < 0)
		return gone(c, k);
	c->fifo[0].down += (uint64_t)n;
	px_buf_consume(&c->back, (size_t)n);
	alive(c);
	if (!done)
		return 0;
	px_finish_response(c);
	return 1;
}

/* The responses read so far, in order: heads, bodies, token refreshes. */
static int process_responses(px_conn *c)
{
	for (;;) {
		int k;
		if (!c->in_resp_body)
			k = response_head(c);
		else if (c->capturing)
			k = capture_body(c);
		else
			k = response_body(c);
		if (k <= 0)
			return k;
	}
}

/* The upstream said EOF (err: or failed).  0 when it was idle (the next
 * request dials again), else a negative errno: c is closing. */
static int upstream_eof(px_conn *c, bool err)
{
	bool to_close = c->in_resp_body && c->respf.kind == AB_HTTP_BODY_CLOSE;
	if (to_close && !err && px_resp_out(c, NULL, 0, true) < 0)
		err = true; /* what masking held back could not be released */
	if (to_close && !err) {
		px_finish_response(c);
		/* the body ended with the connection, so does the client's: requests
		 * pipelined behind it stay unanswered (the close tells the client) */
		for (int i = 0; i < c->nfifo; i++)
			px_log_request(c, &c->fifo[i], "error", 0);
		c->nfifo = 0;
		c->in_req_body = false;
		c->close_after = true;
		px_buf_free(&c->in);
	}
	if (c->nfifo) {
		if (!c->fifo[0].head_sent) {
			px_fail(c, 502, "error", c->rule,
				"%s:%u closed the connection without answering", c->host,
				(unsigned)c->port);
			return -ECONNRESET;
		}
		if (to_close) { /* a client reading to the close must not take the cut for the end */
			struct linger lg = {.l_onoff = 1, .l_linger = 0};
			(void)setsockopt(c->cfd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
		}
		return gone(c,
			    -ECONNRESET); /* cut off mid-response: the framing shows the client */
	}
	/* an idle kept-alive upstream went away: the next request dials again */
	ab_loop_unwatch(c->px->loop, c->ufd);
	close(c->ufd);
	c->ufd = -1;
	c->uev = 0;
	c->u_eof = false;
	px_buf_free(&c->out);
	px_buf_free(&c->back);
	return 0;
}

void px_kick(ab_loop *l, uint64_t id, void *data)
{
	px_conn *c = data;
	c->kick = 0;
	if (c->state == PX_HTTP)
		px_http_pump(c);
	else if (c->state == PX_TUNNEL && c->intercepted)
		px_tls_tunnel_pump(c);
}

void px_http_start(px_conn *c)
{
	if (!c->fifo && !(c->fifo = calloc(PX_FIFO, sizeof(*c->fifo)))) {
		px_close(c);
		return;
	}
	c->state = PX_HTTP;
	/* the first head must be complete in time, however slowly it drips in
	 * (accepting a request moves the deadline on) */
	c->deadline = ab_now_ms() + AB_PROXY_HEAD_TIMEOUT_MS;
	px_http_pump(c);
}

void px_http_pump(px_conn *c)
{
	for (int round = 0; round < 4; round++) {
		bool progress = false;
		if (c->toc.len || c->c_ssl_ww) { /* (ww: TLS still holds some for the client) */
			ssize_t n = px_io_write(c, false, &c->toc);
			if (n < 0 && n != -EAGAIN) {
				px_close(c);
				return;
			}
			progress |= n > 0;
		}
		if (c->out.len && c->ufd >= 0) {
			ssize_t n = px_io_write(c, true, &c->out);
			if (n < 0 && n != -EAGAIN)
				px_buf_free(
					&c->out); /* gone: reading tells how (a response may wait there) */
			progress |= n > 0;
		}
		if (!c->c_eof && c->in.len < PX_BUF_MAX && c->out.len < PX_BUF_MAX) {
			ssize_t n = px_io_read(c, false, &c->in, 16384);
			if (n == 0) {
				/* a half-close, not an abort: the requests already sent
				 * (a head may be waiting in c->in) are still answered;
				 * one cut short is refused by process_requests */
				c->c_eof = true;
			} else if (n < 0 && n != -EAGAIN) {
				px_close(c);
				return;
			}
			progress |= n > 0;
		}
		if (process_requests(c) < 0)
			return;
		if (c->ufd >= 0 && c->toc.len < PX_BUF_MAX) {
			ssize_t n = px_io_read(c, true, &c->back, 65536);
			if ((n == 0 || (n < 0 && n != -EAGAIN)) && upstream_eof(c, n < 0) < 0)
				return;
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
	if (!c->toc.len && !c->c_ssl_ww && !c->nfifo &&
	    (c->close_after || (c->c_eof && !c->in.len && !c->in_req_body))) {
		shutdown(c->cfd, SHUT_WR);
		px_close(c);
		return;
	}
	if (px_io_pending(c) && !c->kick) /* decrypted bytes no event will announce */
		c->kick = ab_loop_timer(c->px->loop, 0, px_kick, c);
	px_update(c);
}

void px_http_upstream_gone(px_conn *c)
{
	if (upstream_eof(c, false) == 0)
		px_update(c);
}
