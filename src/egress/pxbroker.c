/* SPDX-License-Identifier: MIT */
/*
 * What credential brokering does to the HTTP engine's streams (parent,
 * egress proxy): the placeholders of a request head swapped for the real
 * values bound to its host (or the request refused where one may not go),
 * request bodies through the placeholder scanner, responses from an
 * intercepted host through the masking scanner, and a token refresh's
 * response, held whole (pxhttp.c captures it), its new tokens kept here
 * and the sandbox sent placeholders.  The framing is pxhttp.c's.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agentbox/broker.h"
#include "agentbox/credfile.h"
#include "proxy_int.h"

/* ------------------------------------------------------------ requests */

/* Credential brokering: swap the placeholders of the upstream-bound head
 * (or find one where it must not be), then queue it.  Returns the head's
 * length, -EACCES (blocked: e->path names the place) or another -errno. */
int px_swap_head(px_conn *c, px_req *e, px_buf *head)
{
	const ab_broker *b = c->px->broker;
	if (!b) {
		int r = px_buf_append(&c->out, head->p, head->len);
		int n = (int)head->len;
		px_buf_free(head);
		return r < 0 ? -ENOMEM : n;
	}
	char *out = NULL;
	size_t outlen = 0;
	ab_swap_result res;
	int r = ab_secrets_rewrite_head(b->secs, b->n, c->host, c->port, head->p, head->len, &out,
					&outlen, &res);
	px_buf_free(head); /* placeholders only */
	if (r < 0)
		return r;
	if (res.blocked) {
		ab_swap_explain(&res, c->exfil, sizeof(c->exfil));
		ab_secrets_wipe_free(out, outlen);
		return -EACCES;
	}
	if (res.injected && !c->intercepted) {
		/* a secret's host reached over plain HTTP: the value would cross the
		 * network in clear and come back unmasked */
		ab_secrets_wipe_free(out, outlen);
		char names[AB_SECRETS_MAX * (AB_SECRET_NAME_MAX + 1) + 1];
		ab_secrets_names(b->secs, b->n, res.injected, names, sizeof(names));
		snprintf(
			c->exfil, sizeof(c->exfil),
			"agentbox: the placeholder of %.300s would be sent to %.260s:%u over plain HTTP; "
			"secrets are only sent over TLS (use https://)",
			names, c->host, (unsigned)c->port);
		return -EACCES;
	}
	e->secrets = res.injected;
	e->elsewhere_head = res.elsewhere;
	r = px_buf_append(&c->out, out, outlen);
	ab_secrets_wipe_free(out, outlen); /* the real value: c->out is wiped as it drains */
	return r < 0 ? -ENOMEM : (int)outlen;
}

/* A new body scanner (and its set, for this host) for the request body
 * about to start. */
int px_body_scan_start(px_conn *c, bool chunked)
{
	const ab_broker *b = c->px->broker;
	ab_err err = {0};
	if (c->bscan)
		ab_scanner_free(c->bscan); /* before its set: it reads the set */
	ab_scan_set_free(c->bset);
	c->bset = NULL;
	int r = ab_secrets_body_set(b->secs, b->n, c->host, c->port, &c->bset, &err);
	if (r < 0)
		return r;
	if (!c->bscan && !(c->bscan = calloc(1, sizeof(*c->bscan))))
		return -ENOMEM;
	if ((r = ab_scanner_init(c->bscan, c->bset)) < 0)
		return r;
	px_scan_begin(&c->bpass, c->bscan, chunked);
	return 0;
}

/* The secrets whose placeholders the body scanner has masked so far (their
 * names go to the request's audit line; pattern i is secret i). */
static uint64_t body_masked(const px_conn *c)
{
	const ab_broker *b = c->px->broker;
	uint64_t m = 0;
	for (size_t i = 0; c->bscan && i < b->n && i < AB_SECRETS_MAX; i++)
		if (ab_scanner_count(c->bscan, i) &&
		    ab_secret_masks_body(&b->secs[i], c->host, c->port))
			m |= (uint64_t)1 << i;
	return m;
}

/* The secrets whose placeholders the body scanner has let through unchanged
 * so far (not bound to this host: ab_secret_forwards_elsewhere). */
static uint64_t body_elsewhere(const px_conn *c)
{
	const ab_broker *b = c->px->broker;
	uint64_t m = 0;
	for (size_t i = 0; c->bscan && i < b->n && i < AB_SECRETS_MAX; i++)
		if (ab_scanner_count(c->bscan, i) &&
		    ab_secret_forwards_elsewhere(&b->secs[i], c->host, c->port))
			m |= (uint64_t)1 << i;
	return m;
}

/* c->exfil: why a body was blocked (names and places, never a value) */
static void explain_blocked(px_conn *c, const ab_scan_hit *hit)
{
	const ab_broker *b = c->px->broker;
	ab_swap_result res;
	ab_secrets_body_blocked(b->secs, b->n, c->host, c->port, hit, &res);
	ab_swap_explain(&res, c->exfil, sizeof(c->exfil));
}

/* Body bytes through the placeholder scanner (held-back bytes come later).
 * Returns 0, or -EACCES when a placeholder may not go to this host. */
int px_body_out(px_conn *c, const char *p, size_t n, bool done)
{
	if (!c->bscan)
		return px_buf_append(&c->out, p, n);
	ab_scan_hit hit = {0};
	int r = px_scan_pass(&c->bpass, p, n, done, &c->out, &hit);
	if (c->nfifo) {
		c->fifo[c->nfifo - 1].masked_in_body |= body_masked(c);
		c->fifo[c->nfifo - 1].elsewhere_body |= body_elsewhere(c);
	}
	if (r == -EACCES)
		explain_blocked(c, &hit);
	return r;
}

/* Scan body bytes that arrived with their head, on a scanner of their own
 * (the real pass comes later).  -EACCES (c->exfil says why) or 0. */
int px_body_prescan(px_conn *c, const char *p, size_t n, bool chunked)
{
	ab_scanner s;
	if (ab_scanner_init(&s, c->bset) < 0)
		return -ENOMEM;
	px_scanpass sp;
	_cleanup_px_buf_ px_buf sink = {0}; /* wiped: it may hold a real value */
	ab_scan_hit hit = {0};
	px_scan_begin(&sp, &s, chunked);
	int r = px_scan_pass(&sp, p, n, false, &sink, &hit);
	ab_scanner_free(&s);
	if (r == -EACCES)
		explain_blocked(c, &hit);
	return r;
}

/* ------------------------------------------------------------ responses */

/* Response bytes to the client; on intercepted connections through the
 * masking scanner first (the real values and their encodings never reach
 * the sandbox).  done: the message ends here (release what was held). */
int px_resp_out(px_conn *c, const char *p, size_t n, bool done)
{
	if (!c->intercepted)
		return px_buf_append(&c->toc, p, n);
	ab_scan_hit hit = {0};
	int r = px_scan_pass(&c->rpass, p, n, done, &c->toc, &hit);
	c->masked += hit.replaced;
	return r;
}

/* Masking starts afresh for a head (done: true) or a body. */
int px_resp_begin(px_conn *c, bool chunked)
{
	if (!c->intercepted)
		return 0;
	if (!c->px->rset)
		return -EIO; /* no masking set: fail closed */
	if (c->rscan && c->rscan->set != c->px->rset) {
		/* a token refresh changed the values: mask the new ones too */
		ab_scanner_free(c->rscan);
		if (ab_scanner_init(c->rscan, c->px->rset) < 0) {
			free(c->rscan);
			c->rscan = NULL;
			return -ENOMEM;
		}
	}
	if (!c->rscan) {
		if (!(c->rscan = calloc(1, sizeof(*c->rscan))) ||
		    ab_scanner_init(c->rscan, c->px->rset) < 0)
			return -ENOMEM;
	}
	px_scan_begin(&c->rpass, c->rscan, chunked);
	return 0;
}

/* ------------------------------------------------------------ token refreshes */

int px_rotated(ab_proxy *px)
{
	ab_scan_set *set = NULL, **old;
	ab_err err = {0};
	if (ab_broker_response_set(px->broker, &set, &err) < 0)
		return -ENOMEM;
	old = realloc(px->old_rsets, (px->nold_rsets + 1) * sizeof(*old));
	if (!old) {
		ab_scan_set_free(set);
		return -ENOMEM;
	}
	px->old_rsets = old;
	if (px->rset)
		px->old_rsets[px->nold_rsets++] = px->rset;
	px->rset = set;
	return 0;
}

/* The payload of a complete chunked body (already checked by the framer). */
static int dechunk(const char *p, size_t n, px_buf *out)
{
	size_t i = 0;
	for (;;) {
		uint64_t size = 0;
		size_t digits = 0;
		while (i < n && strchr("0123456789abcdefABCDEF", p[i]) && p[i]) {
			char ch = p[i++];
			size = size * 16 +
			       (uint64_t)(ch <= '9' ? ch - '0' : (ch | 0x20) - 'a' + 10);
			if (++digits > 8)
				return -EINVAL;
		}
		const char *eol = digits ? memmem(p + i, n - i, "\r\n", 2) : NULL;
		if (!eol)
			return -EINVAL;
		i = (size_t)(eol - p) + 2;
		if (!size)
			return 0; /* trailers follow: not part of the payload */
		if (size > n - i || n - i - size < 2 || px_buf_append(out, p + i, size) < 0)
			return -EINVAL;
		i += size + 2;
	}
}

/* The captured head again, its framing replaced by Content-Length: LEN. */
static int rebuild_head(const char *head, size_t hlen, size_t len, px_buf *o)
{
	static const ab_http_limits lim = {.max_head = PX_RESP_HEAD_MAX};
	_cleanup_free_ ab_http_resp *rs = malloc(sizeof(*rs));
	if (!rs || ab_http_parse_response_head(head, hlen, &lim, rs) <= 0)
		return -EINVAL;
	const char *eol = memmem(head, hlen, "\r\n", 2);
	int r = eol ? px_buf_append(o, head, (size_t)(eol - head) + 2) : -EINVAL;
	for (size_t i = 0; r >= 0 && i < rs->n_headers; i++) {
		const ab_http_header *h = &rs->headers[i];
		if (px_hdr_is(head, h->name, "content-length") ||
		    px_hdr_is(head, h->name, "transfer-encoding"))
			continue;
		r = px_buf_append(o, head + h->name.off, h->name.len);
		r |= px_buf_append(o, ": ", 2);
		r |= px_buf_append(o, head + h->value.off, h->value.len);
		r |= px_buf_append(o, "\r\n", 2);
	}
	char cl[48];
	int cn = snprintf(cl, sizeof(cl), "Content-Length: %zu\r\n\r\n", len);
	if (r >= 0)
		r = px_buf_append(o, cl, (size_t)cn);
	return r < 0 ? -EINVAL : 0;
}

/* The whole token response is here: swap its tokens, save them on the host,
 * send the sandbox the placeholders.  Fails closed (502: nothing of it
 * reaches the client).  Returns 0, or a negative errno when c is closing. */
int px_finish_capture(px_conn *c)
{
	px_req *e = &c->fifo[0];
	_cleanup_px_buf_ px_buf body = {0}, head = {0};
	char *out = NULL;
	size_t outlen = 0;
	uint64_t rotated = 0;
	ab_err err = {0};
	const char *raw = c->rot.p + c->rot_head;
	size_t rawlen = c->rot.len - c->rot_head;
	int r = c->respf.kind == AB_HTTP_BODY_CHUNKED ? dechunk(raw, rawlen, &body)
						      : px_buf_append(&body, raw, rawlen);
	if (r < 0)
		ab_fail(&err, 0, "unreadable body");
	else if (body.len > AB_CREDFILE_MAX)
		r = ab_fail(&err, EFBIG, "larger than %d bytes", AB_CREDFILE_MAX);
	if (r >= 0)
		r = ab_broker_rotate(c->px->broker, c->host, c->port, e->path, body.p, body.len,
				     &out, &outlen, &rotated, &err);
	px_buf_free(&body); /* wiped: the new values */
	if (rotated && px_rotated(c->px) < 0)
		r = -ENOMEM; /* the new values could not be masked: nothing goes out */
	if (r == -EIO && out) {
		/* rotated, but the host file was not updated: the session goes on */
		ab_warn("the refreshed login could not be saved on the host: %s", err.msg);
		r = 0;
	}
	if (r >= 0 && rebuild_head(c->rot.p, c->rot_head, outlen, &head) < 0)
		r = -EINVAL;
	explicit_bzero(c->rot.p, c->rot.len);
	px_buf_free(&c->rot);
	c->capturing = false;
	if (r < 0) {
		ab_secrets_wipe_free(out, outlen);
		px_fail(c, 502, "error", "token-refresh",
			"agentbox: the token refresh response from %s was not passed on (%s)",
			c->host, err.msg[0] ? err.msg : "out of memory");
		return r;
	}
	e->rotated = rotated;
	r = px_resp_begin(c, false);
	if (r >= 0)
		r = px_resp_out(c, head.p, head.len, true);
	if (r >= 0)
		r = px_resp_begin(c, false);
	if (r >= 0)
		r = px_resp_out(c, out, outlen, true);
	ab_secrets_wipe_free(out, outlen);
	if (r < 0) {
		px_close(c);
		return r;
	}
	e->head_sent = true;
	px_finish_response(c);
	return 0;
}
