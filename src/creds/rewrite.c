/* SPDX-License-Identifier: MIT */
/*
 * The request-head swap (parent: the egress proxy): ab_secrets_rewrite_head
 * finds placeholders in a request head (plain, percent-decoded in the
 * target, inside Basic credentials), swaps them where the secret allows on a
 * bound host and blocks them elsewhere; and the words of a refusal.  Pure.
 * Every buffer that may hold a real value is wiped before it is freed.
 * Rules in include/agentbox/secrets.h.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "agentbox/http.h"
#include "agentbox/secrets.h"
#include "secrets_int.h"

/* ------------------------------------------------------ growable buffer */

/* A byte buffer that wipes what it leaves behind (it may hold values). */
typedef struct {
	char *p;
	size_t len, cap;
	bool fail;
} sbuf;

static bool sb_reserve(sbuf *b, size_t extra)
{
	size_t cap;
	char *np;

	if (b->fail)
		return false;
	if (extra > SIZE_MAX / 4 - b->len) {
		b->fail = true;
		return false;
	}
	if (b->len + extra + 1 <= b->cap)
		return true;
	for (cap = b->cap ? b->cap : 256; cap < b->len + extra + 1; cap *= 2)
		;
	np = malloc(cap);
	if (!np) {
		b->fail = true;
		return false;
	}
	if (b->len)
		memcpy(np, b->p, b->len);
	ab_secrets_wipe_free(b->p, b->cap);
	b->p = np;
	b->cap = cap;
	return true;
}

static void sb_add(sbuf *b, const void *d, size_t n)
{
	if (!sb_reserve(b, n))
		return;
	if (n)
		memcpy(b->p + b->len, d, n);
	b->len += n;
	b->p[b->len] = '\0';
}

static void sb_wipe(sbuf *b)
{
	ab_secrets_wipe_free(b->p, b->cap);
	memset(b, 0, sizeof(*b));
}

/* ---------------------------------------------------------- head rewrite */

typedef struct {
	const ab_secret *secs;
	size_t n;
	const char *head;
	size_t done; /* head bytes already copied to out */
	bool bound[AB_SECRETS_MAX];
	uint64_t skip; /* bit i: next_ph ignores secs[i] (its placeholder goes on
			  unchanged: ab_secret_forwards_elsewhere) */
	char hostdisp[AB_HOST_BUF];
	ab_swap_result *res;
	sbuf out;
} rw_ctx;

/* Always returns 1 (blocked). */
static int rw_block(rw_ctx *c, size_t i, const char *where)
{
	ab_swap_result *r = c->res;

	r->blocked = true;
	r->secret = c->secs[i].name;
	r->secret_index = i;
	snprintf(r->where, sizeof(r->where), "%s", where);
	if (!c->bound[i])
		snprintf(r->place, sizeof(r->place), "host:%s", c->hostdisp);
	else
		snprintf(r->place, sizeof(r->place), "%s", where);
	return 1;
}

/* Copy the head up to OFF, then DATA instead of the LEN bytes there. */
static void rw_replace(rw_ctx *c, size_t off, size_t len, const char *data, size_t dlen)
{
	sb_add(&c->out, c->head + c->done, off - c->done);
	sb_add(&c->out, data, dlen);
	c->done = off + len;
}

/* The earliest placeholder in S[FROM..N) (the longest on a tie). */
static bool next_ph(const rw_ctx *c, const char *s, size_t n, size_t from, size_t *at,
		    size_t *which)
{
	bool found = false;

	for (size_t i = 0; i < c->n && from <= n; i++) {
		const ab_secret *sec = &c->secs[i];
		const char *p;
		if ((c->skip >> i & 1) || sec->placeholder_len == 0 ||
		    sec->placeholder_len > n - from)
			continue;
		p = memmem(s + from, n - from, sec->placeholder, sec->placeholder_len);
		if (!p)
			continue;
		size_t off = (size_t)(p - s);
		if (!found || off < *at ||
		    (off == *at && sec->placeholder_len > c->secs[*which].placeholder_len)) {
			*at = off;
			*which = i;
			found = true;
		}
	}
	return found;
}

/* A placeholder in S[0..N), raw or percent-decoded up to 3 times: 1 with
 * *WHICH set, 0 none, -ENOMEM. */
static int find_encoded(const rw_ctx *c, const char *s, size_t n, size_t *which)
{
	size_t at, len = n;
	char *buf;
	int found = 0;

	if (next_ph(c, s, n, 0, &at, which))
		return 1;
	if (!memchr(s, '%', n))
		return 0;
	buf = sec_memdup(s, n);
	if (!buf)
		return -ENOMEM;
	for (int level = 0; level < 3 && !found && memchr(buf, '%', len); level++) {
		size_t m = sec_pct_decode(buf, len, buf, NULL);
		if (m == len)
			break;
		len = m;
		found = next_ph(c, buf, len, 0, &at, which);
	}
	ab_secrets_wipe_free(buf, n);
	return found;
}

static int check_region(rw_ctx *c, size_t off, size_t len, const char *where)
{
	size_t w;
	int r = find_encoded(c, c->head + off, len, &w);

	return r > 0 ? rw_block(c, w, where) : r;
}

/* Append the value of secret W percent-encoded. */
static void add_pct_value(sbuf *b, const ab_secret *s)
{
	if (!sb_reserve(b, 3 * s->value_len))
		return;
	b->len += sec_pct_encode(s->value, s->value_len, b->p + b->len, false);
}

/* Build the new query of Q[0..LEN) into NQ: placeholders (literal or
 * percent-encoded) replaced by the percent-encoded value where allowed.
 * 0 (NQ empty if nothing changed), 1 blocked, -ENOMEM. */
static int swap_query(rw_ctx *c, const char *q, size_t len, sbuf *nq)
{
	char *dec = malloc(len + 1);
	uint32_t *map = malloc((len + 1) * sizeof(uint32_t));
	size_t dlen, from = 0, rawdone = 0, at, w;
	int r = 0;

	if (!dec || !map) {
		free(map);
		free(dec);
		return -ENOMEM;
	}
	dlen = sec_pct_decode(q, len, dec, map);
	while (r == 0 && next_ph(c, dec, dlen, from, &at, &w)) {
		const ab_secret *s = &c->secs[w];
		size_t last = at + s->placeholder_len - 1;
		if (!s->in_query || !c->bound[w]) {
			r = rw_block(c, w, "query");
			break;
		}
		sb_add(nq, q + rawdone, map[at] - rawdone);
		add_pct_value(nq, s);
		rawdone = map[last] + (q[map[last]] == '%' ? 3 : 1);
		from = last + 1;
		c->res->injected |= UINT64_C(1) << w;
	}
	if (r == 0 && rawdone)
		sb_add(nq, q + rawdone, len - rawdone);
	ab_secrets_wipe_free(dec, len + 1);
	free(map);
	return nq->fail ? -ENOMEM : r;
}

static int rw_query(rw_ctx *c, size_t off, size_t len)
{
	sbuf nq = {0};
	size_t w;
	int r = swap_query(c, c->head + off, len, &nq);

	if (r == 0 && nq.len) {
		/* what is left: a form that could not be swapped (double encoding) */
		r = find_encoded(c, nq.p, nq.len, &w);
		if (r > 0)
			r = rw_block(c, w, "query");
		else if (r == 0)
			rw_replace(c, off, len, nq.p, nq.len);
	} else if (r == 0) {
		r = check_region(c, off, len, "query");
	}
	sb_wipe(&nq);
	return r;
}

static int rw_request_line(rw_ctx *c, const ab_http_req *q)
{
	size_t toff = q->target.off, tend = toff + q->target.len, poff = toff;
	const char *qm;
	int r;

	if ((r = check_region(c, q->method_tok.off, q->method_tok.len, "method")) != 0)
		return r;
	if (q->form == AB_HTTP_ASTERISK)
		return 0;
	if (q->form == AB_HTTP_AUTHORITY)
		return check_region(c, toff, q->target.len, "authority");
	if (q->form == AB_HTTP_ABSOLUTE) {
		poff = q->path.len ? q->path.off : tend;
		if ((r = check_region(c, toff, poff - toff, "authority")) != 0)
			return r;
	}
	qm = memchr(c->head + poff, '?', tend - poff);
	size_t qoff = qm ? (size_t)(qm - c->head) : tend;
	if ((r = check_region(c, poff, qoff - poff, "path")) != 0)
		return r;
	return qm ? rw_query(c, qoff + 1, tend - qoff - 1) : 0;
}

static bool header_allowed(const rw_ctx *c, size_t i, const char *lname)
{
	return c->bound[i] && ab_strv_contains(&c->secs[i].headers, lname);
}

/* Replace every placeholder of S[0..N) by its value into DST (untouched
 * when there is none).  0 or 1 (blocked). */
static int swap_plain(rw_ctx *c, const char *s, size_t n, const char *lname, const char *where,
		      sbuf *dst)
{
	size_t from = 0, at, w;

	while (next_ph(c, s, n, from, &at, &w)) {
		const ab_secret *sec = &c->secs[w];
		if (!header_allowed(c, w, lname))
			return rw_block(c, w, where);
		sb_add(dst, s + from, at - from);
		sb_add(dst, sec->value, sec->value_len);
		from = at + sec->placeholder_len;
		c->res->injected |= UINT64_C(1) << w;
	}
	if (from)
		sb_add(dst, s + from, n - from);
	return 0;
}

/* "Basic <base64(user:pass)>" with a placeholder inside: 0 not such a
 * value, 1 blocked, 2 rewritten into NV, -ENOMEM. */
static int swap_basic(rw_ctx *c, const char *v, size_t n, const char *lname, const char *where,
		      sbuf *nv)
{
	sbuf nd = {0};
	unsigned char *dec;
	size_t t = 5, dlen, at, w;
	int r = 0;

	if (n < 7 || strncasecmp(v, "basic ", 6) != 0)
		return 0;
	while (t < n && v[t] == ' ')
		t++;
	dec = malloc((n - t) / 4 * 3 + 4);
	if (!dec)
		return -ENOMEM;
	if (sec_b64_decode(v + t, n - t, dec, &dlen) == 0 &&
	    next_ph(c, (const char *)dec, dlen, 0, &at, &w)) {
		r = swap_plain(c, (const char *)dec, dlen, lname, where, &nd);
		if (r == 0 && sb_reserve(nv, t + 4 * (nd.len / 3 + 1))) {
			sb_add(nv, v, t);
			nv->len += sec_b64_encode((const unsigned char *)nd.p, nd.len,
						  nv->p + nv->len, sec_b64_std, true);
			r = 2;
		}
		if (nd.fail || nv->fail)
			r = -ENOMEM;
	}
	ab_secrets_wipe_free((char *)dec, (n - t) / 4 * 3 + 4);
	sb_wipe(&nd);
	return r;
}

static int rw_header(rw_ctx *c, const ab_http_header *h)
{
	char lname[AB_SECRET_HEADER_MAX + 4], where[AB_SECRET_HEADER_MAX + 16];
	const char *v = c->head + h->value.off;
	size_t n = h->name.len < AB_SECRET_HEADER_MAX ? h->name.len : AB_SECRET_HEADER_MAX, w;
	sbuf nv = {0};
	int r;

	if ((r = check_region(c, h->name.off, h->name.len, "header-name")) != 0)
		return r;
	for (size_t i = 0; i < n; i++)
		lname[i] = (char)tolower_ascii(c->head[h->name.off + i]);
	strcpy(lname + n, h->name.len > n ? "..." : ""); /* too long: never allowed */
	snprintf(where, sizeof(where), "header:%s", lname);
	r = 0;
	if (strcmp(lname, "authorization") == 0 || strcmp(lname, "proxy-authorization") == 0)
		r = swap_basic(c, v, h->value.len, lname, where, &nv);
	if (r == 0)
		r = swap_plain(c, v, h->value.len, lname, where, &nv);
	if (r >= 0 && r != 1 && nv.fail)
		r = -ENOMEM;
	if (r == 0 || r == 2) {
		/* left over: a placeholder we could not swap (percent-encoded) */
		r = nv.len ? find_encoded(c, nv.p, nv.len, &w)
			   : find_encoded(c, v, h->value.len, &w);
		if (r > 0)
			r = rw_block(c, w, where);
		else if (r == 0 && nv.len)
			rw_replace(c, h->value.off, h->value.len, nv.p, nv.len);
	}
	sb_wipe(&nv);
	return r;
}

/* Defence in depth: the new head parses, and no placeholder is left. */
static int rw_verify(rw_ctx *c, ab_http_req *q, const ab_http_limits *lim)
{
	size_t at, w;

	if (c->out.len > AB_HTTP_HARD_MAX_HEAD)
		return -E2BIG;
	if (next_ph(c, c->out.p, c->out.len, 0, &at, &w))
		return rw_block(c, w, "head");
	if (ab_http_parse_head(c->out.p, c->out.len, lim, q) != (int)c->out.len)
		return -EPROTO;
	return 0;
}

static bool hdr_named(const char *head, const ab_http_header *h, const char *name)
{
	return h->name.len == strlen(name) &&
	       strncasecmp(head + h->name.off, name, h->name.len) == 0;
}

/* The placeholders that the rewrite left alone (C->skip: their secrets are
 * not bound to this host and forward elsewhere) and that the head HEAD[0..LEN)
 * carries, wherever the rewrite would have found them: raw or
 * percent-decoded anywhere, or inside "Basic" credentials.  Sets
 * res->elsewhere; 0 or -ENOMEM. */
static int note_elsewhere(rw_ctx *c, const ab_http_req *q, size_t len)
{
	uint64_t pass = c->skip, seen = 0;
	size_t w, at;
	int r;

	c->skip = ~pass; /* look for those only, each until found */
	while ((r = find_encoded(c, c->head, len, &w)) > 0) {
		seen |= UINT64_C(1) << w;
		c->skip |= UINT64_C(1) << w;
	}
	for (size_t i = 0; r == 0 && i < q->n_headers && c->skip != UINT64_MAX; i++) {
		const ab_http_header *h = &q->headers[i];
		const char *v = c->head + h->value.off;
		size_t n = h->value.len, t = 5, dlen, cap;
		unsigned char *dec;
		if ((!hdr_named(c->head, h, "authorization") &&
		     !hdr_named(c->head, h, "proxy-authorization")) ||
		    n < 7 || strncasecmp(v, "basic ", 6) != 0)
			continue;
		while (t < n && v[t] == ' ')
			t++;
		cap = (n - t) / 4 * 3 + 4;
		if (!(dec = malloc(cap))) {
			r = -ENOMEM;
			break;
		}
		if (sec_b64_decode(v + t, n - t, dec, &dlen) == 0) {
			while (next_ph(c, (const char *)dec, dlen, 0, &at, &w)) {
				seen |= UINT64_C(1) << w;
				c->skip |= UINT64_C(1) << w;
			}
		}
		ab_secrets_wipe_free((char *)dec, cap);
	}
	c->skip = pass;
	c->res->elsewhere = seen;
	return r < 0 ? r : 0;
}

static void host_display(const char *host, char *out, size_t n)
{
	size_t o = 0;

	if (host && ab_host_normalize(host, out, n) >= 0)
		return;
	for (const char *p = host ? host : ""; *p && o + 2 < n && o < 64; p++)
		out[o++] = *p > 0x20 && *p < 0x7f ? *p : '?';
	out[o] = '\0';
}

static bool rw_args_ok(const ab_secret *secs, size_t n, const char *head, size_t len)
{
	if (n > AB_SECRETS_MAX || !head || (n && !secs) || len > AB_HTTP_HARD_MAX_HEAD)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!secs[i].placeholder || !secs[i].placeholder_len || !secs[i].value)
			return false;
	return true;
}

/* Which secrets are bound to the destination, and whose placeholders go on
 * to it unchanged (the searches skip those). */
static void rw_bind(rw_ctx *c, const char *host, unsigned port)
{
	for (size_t i = 0; i < c->n; i++) {
		c->bound[i] = ab_secret_bound(&c->secs[i], host, port);
		if (!c->bound[i] && !c->secs[i].refuse_elsewhere)
			c->skip |= UINT64_C(1) << i;
	}
	host_display(host, c->hostdisp, sizeof(c->hostdisp));
}

int ab_secrets_rewrite_head(const ab_secret *secs, size_t n, const char *host, unsigned port,
			    const char *head, size_t len, char **out, size_t *outlen,
			    ab_swap_result *res)
{
	const ab_http_limits lim = {AB_HTTP_HARD_MAX_HEAD, AB_HTTP_MAX_HEADERS,
				    AB_HTTP_HARD_MAX_HEAD};
	rw_ctx c = {.secs = secs, .n = n, .head = head, .res = res};
	ab_http_req *q;
	int r;

	*out = NULL;
	*outlen = 0;
	memset(res, 0, sizeof(*res));
	if (!rw_args_ok(secs, n, head, len))
		return -EINVAL;
	q = malloc(sizeof(*q));
	if (!q)
		return -ENOMEM;
	r = ab_http_parse_head(head, len, &lim, q);
	if (r <= 0 || (size_t)r != len) {
		free(q);
		return -EINVAL;
	}
	rw_bind(&c, host, port);
	r = rw_request_line(&c, q);
	for (size_t i = 0; r == 0 && i < q->n_headers; i++)
		r = rw_header(&c, &q->headers[i]);
	if (r == 0)
		sb_add(&c.out, head + c.done, len - c.done);
	if (r == 0 && c.out.fail)
		r = -ENOMEM;
	if (r == 0 && c.skip)
		r = note_elsewhere(&c, q, len); /* before rw_verify parses the new head into q */
	if (r == 0)
		r = rw_verify(&c, q, &lim);
	free(q);
	if (r != 0) {
		sb_wipe(&c.out);
		res->injected = 0;
		res->elsewhere = 0;
		return r < 0 ? r : 0;
	}
	*out = c.out.p;
	*outlen = c.out.len;
	return 0;
}

void ab_secrets_body_blocked(const ab_secret *secs, size_t n, const char *host, unsigned port,
			     const ab_scan_hit *hit, ab_swap_result *res)
{
	rw_ctx c = {.secs = secs, .n = n, .res = res};
	size_t i = hit ? hit->id : n;

	memset(res, 0, sizeof(*res));
	if (i >= n || i >= AB_SECRETS_MAX) {
		res->blocked = true;
		snprintf(res->place, sizeof(res->place), "body");
		snprintf(res->where, sizeof(res->where), "body");
		return;
	}
	c.bound[i] = ab_secret_bound(&secs[i], host, port);
	host_display(host, c.hostdisp, sizeof(c.hostdisp));
	rw_block(&c, i,
		 secs[i].in_body && secs[i].placeholder_len != secs[i].value_len
			 ? "body (length differs)"
			 : "body");
}

/* "header x-foo", "the URL query", ... for the explanation. */
static void where_text(const char *w, char *buf, size_t n)
{
	if (strncmp(w, "header:", 7) == 0)
		snprintf(buf, n, "header %s", w + 7);
	else if (strcmp(w, "header-name") == 0)
		snprintf(buf, n, "name of a header");
	else if (strcmp(w, "query") == 0 || strcmp(w, "path") == 0)
		snprintf(buf, n, "URL %s", w);
	else if (strcmp(w, "method") == 0 || strcmp(w, "authority") == 0)
		snprintf(buf, n, "request %s", w);
	else
		snprintf(buf, n, "request %s", strncmp(w, "body", 4) == 0 ? "body" : w);
}

void ab_swap_explain(const ab_swap_result *r, char *buf, size_t bufsz)
{
	const char *name = r->secret ? r->secret : "?", *w = r->where;
	char wt[AB_SWAP_PLACE_MAX + 16];

	if (!bufsz)
		return;
	buf[0] = '\0';
	if (!r->blocked)
		return;
	where_text(w, wt, sizeof(wt));
	if (strncmp(r->place, "host:", 5) == 0)
		snprintf(buf, bufsz,
			 "agentbox blocked this request: the placeholder of secret %s (in the %s) "
			 "was sent to %s, which that secret is not bound to.\nIf %s should "
			 "receive it, add it to secrets.%s.hosts in the profile; to send the "
			 "placeholder (worthless there) on unchanged instead, set "
			 "secrets.%s.elsewhere to \"forward\".\n",
			 name, wt, r->place + 5, r->place + 5, name, name);
	else if (!strcmp(w, "body"))
		snprintf(
			buf, bufsz,
			"agentbox blocked this request: the placeholder of secret %s is in the %s, "
			"where it may not be placed.\nTo allow that, add \"%s\" to secrets.%s.in "
			"in the profile (or set secrets.%s.mask_in_body to true to send a mask of "
			"the same length there instead).\n",
			name, wt, w, name, name);
	else if (strncmp(w, "header:", 7) == 0 || !strcmp(w, "query"))
		snprintf(
			buf, bufsz,
			"agentbox blocked this request: the placeholder of secret %s is in the %s, "
			"where it may not be placed.\nTo allow that, add \"%s\" to secrets.%s.in "
			"in the profile.\n",
			name, wt, w, name);
	else if (!strcmp(w, "body (length differs)"))
		snprintf(
			buf, bufsz,
			"agentbox blocked this request: the placeholder of secret %s is in the "
			"request body, but it is not as long as the value, so it cannot be swapped "
			"there.\nDrop the placeholder length from the profile (the default is the "
			"value's length).\n",
			name);
	else
		snprintf(
			buf, bufsz,
			"agentbox blocked this request: the placeholder of secret %s is in the %s; "
			"a secret is never placed there.\n",
			name, wt);
}
