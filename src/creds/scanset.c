/* SPDX-License-Identifier: MIT */
/*
 * The secrets' scanner sets (parent: the egress proxy): the response set
 * that masks values and their encodings, the check that a masked response
 * cannot rebuild a value (ab_secrets_mask_conflict), and the request-body
 * set per destination.  Built on the scanner (scan.h), which knows nothing
 * of secrets.  Pure.  Rules in include/agentbox/secrets.h.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "agentbox/secrets.h"
#include "secrets_int.h"

/* ------------------------------------------------- secrets x scanner sets */

#define DERIVED_MIN 8 /* shorter encodings are not masked (too many false hits) */
#define WORK_MAX (4 * AB_SECRET_VALUE_MAX + 64)

typedef struct {
	ab_scan_pattern *p;
	size_t n, cap;
	bool fail;
} pbuild;

static void pb_free(pbuild *b)
{
	for (size_t i = 0; i < b->n; i++) {
		ab_secrets_wipe_free((char *)b->p[i].bytes, b->p[i].len);
		ab_secrets_wipe_free((char *)b->p[i].repl, b->p[i].len);
	}
	free(b->p);
	memset(b, 0, sizeof(*b));
}

/* Add PAT (copied) with REPL (copied; only used when as long as PAT). */
static void pb_add(pbuild *b, const char *pat, size_t len, const char *repl, size_t rlen,
		   ab_scan_action act, unsigned id)
{
	ab_scan_pattern *e;

	if (b->fail || len == 0)
		return;
	for (size_t i = 0; i < b->n; i++)
		if (b->p[i].id == id && b->p[i].len == len && memcmp(b->p[i].bytes, pat, len) == 0)
			return;
	if (b->n == b->cap) {
		size_t cap = b->cap ? b->cap * 2 : 16;
		ab_scan_pattern *np = realloc(b->p, cap * sizeof(*np));
		if (!np) {
			b->fail = true;
			return;
		}
		b->p = np;
		b->cap = cap;
	}
	e = &b->p[b->n];
	*e = (ab_scan_pattern){.len = len, .action = act, .id = id};
	e->bytes = sec_memdup(pat, len);
	e->repl = repl && rlen == len ? sec_memdup(repl, len) : NULL;
	if (!e->bytes || (repl && rlen == len && !e->repl)) {
		ab_secrets_wipe_free((char *)e->bytes, len);
		free((char *)e->repl);
		b->fail = true;
		return;
	}
	b->n++;
}

enum {
	D_B64_PAD,
	D_B64_RAW,
	D_B64_A0,
	D_B64_A1,
	D_B64_A2,
	D_PCT_UP,
	D_PCT_LOW,
	D_JSON,
	D_JSON_SLASH,
	D_COUNT
};

/* The characters of base64(A zero bytes + SRC + ...) that depend on SRC only. */
static size_t b64_core(const char *src, size_t len, unsigned a, const char *alpha, char *out,
		       unsigned char *tmp)
{
	size_t lo = (8 * a + 5) / 6, hi = (8 * (a + len)) / 6;

	memset(tmp, 0, a);
	memcpy(tmp + a, src, len);
	memset(tmp + a + len, 0, 2);
	sec_b64_encode(tmp, a + len + 2, out, alpha, false);
	memmove(out, out + lo, hi - lo);
	explicit_bzero(out + (hi - lo), 4 * ((a + len + 4) / 3) + 1 - (hi - lo));
	return hi - lo;
}

/* Encoding KIND of SRC into OUT (WORK_MAX bytes); TMP is scratch. */
static size_t derive(int kind, const char *alpha, const char *src, size_t len, char *out,
		     unsigned char *tmp)
{
	switch (kind) {
	case D_B64_PAD:
	case D_B64_RAW:
		return sec_b64_encode((const unsigned char *)src, len, out, alpha,
				      kind == D_B64_PAD);
	case D_B64_A0:
	case D_B64_A1:
	case D_B64_A2: return b64_core(src, len, (unsigned)(kind - D_B64_A0), alpha, out, tmp);
	case D_PCT_UP:
	case D_PCT_LOW: return sec_pct_encode(src, len, out, kind == D_PCT_LOW);
	case D_JSON:
	case D_JSON_SLASH: return sec_json_escape(src, len, out, kind == D_JSON_SLASH);
	}
	return 0;
}

static void response_patterns(pbuild *b, const ab_secret *s, unsigned id, char *wv, char *wp,
			      unsigned char *tmp)
{
	static const char *const alphas[] = {sec_b64_std, sec_b64_url};

	pb_add(b, s->value, s->value_len, s->placeholder, s->placeholder_len, AB_SCAN_REPLACE, id);
	for (int k = 0; k < D_COUNT; k++) {
		for (size_t a = 0; a < (k <= D_B64_A2 ? 2u : 1u); a++) {
			size_t lv = derive(k, alphas[a], s->value, s->value_len, wv, tmp);
			size_t lp =
				derive(k, alphas[a], s->placeholder, s->placeholder_len, wp, tmp);
			if (lv < DERIVED_MIN ||
			    (lv == s->value_len && memcmp(wv, s->value, lv) == 0))
				continue;
			pb_add(b, wv, lv, wp, lp, AB_SCAN_REPLACE, id);
		}
	}
}

/* Could the output hold pattern P where replacement R (of the match Q, as long
 * as R) meets its neighbours?  When a proper suffix of R is a prefix of P
 * (R's tail + what follows = P), R lies inside P or P inside R; and when a
 * proper prefix of R is a suffix of P (what precedes + R's head = P), unless
 * that prefix is also Q's: then the input held P before Q, and the scanner,
 * leftmost first, masked that one instead.  Otherwise an occurrence of P in
 * the output lies in unmasked bytes only, where the scanner leaves none. */
static bool repl_conflicts(const char *q, const char *r, size_t rl, const char *p, size_t pl)
{
	for (size_t k = 1; k < rl && k <= pl; k++) {
		if (r[rl - k] == p[0] && memcmp(r + rl - k, p, k) == 0)
			return true;
		if (r[k - 1] == p[pl - 1] && memcmp(r, p + pl - k, k) == 0 && memcmp(r, q, k) != 0)
			return true;
	}
	return (rl <= pl && memmem(p, pl, r, rl)) || (pl <= rl && memmem(r, rl, p, pl));
}

/* Could pattern I's replacement rebuild one of the set's patterns? */
static bool pattern_conflicts(const pbuild *b, size_t i)
{
	const ab_scan_pattern *x = &b->p[i];
	for (size_t j = 0; x->repl && j < b->n; j++)
		if (repl_conflicts(x->bytes, x->repl, x->len, b->p[j].bytes, b->p[j].len))
			return true;
	return false;
}

/* A placeholder shares its shape with the value ("ghp_..." for "ghp_..."), so
 * masking can rebuild a value: the value followed by the value without its
 * first byte became the placeholder (ending in 'g') + "hp_..." = the value
 * (found by fuzz_secrets).  The broker draws placeholders until none can
 * (ab_secrets_mask_conflict); any replacement that still could is a run of one
 * filler byte instead, a byte no pattern contains: such a run can be part of
 * no occurrence (the client then sees, say, "****" where the value was). */
static int safe_replacements(pbuild *b)
{
	bool used[256] = {false};
	for (size_t i = 0; i < b->n; i++)
		for (size_t j = 0; j < b->p[i].len; j++)
			used[(unsigned char)b->p[i].bytes[j]] = true;
	int filler = -1;
	static const char pref[] = "*#~^!";
	for (size_t i = 0; i < sizeof(pref) - 1 && filler < 0; i++)
		if (!used[(unsigned char)pref[i]])
			filler = (unsigned char)pref[i];
	for (int c = 1; c < 256 && filler < 0; c++)
		if (!used[c])
			filler = c;
	for (size_t i = 0; i < b->n; i++) {
		ab_scan_pattern *x = &b->p[i];
		if (x->repl && !pattern_conflicts(b, i))
			continue;
		if (filler < 0)
			return -EDOM; /* every byte value is in some pattern: cannot mask safely */
		char *f = malloc(x->len);
		if (!f)
			return -ENOMEM;
		memset(f, filler, x->len);
		ab_secrets_wipe_free((char *)x->repl, x->repl ? x->len : 0);
		x->repl = f;
	}
	return 0;
}

/* Every secret's response patterns into B (ids = indexes).  -E2BIG: too
 * many secrets; -EINVAL: secret *BAD has no value or placeholder, or one too
 * long; -ENOMEM.  The scratch encodings are wiped. */
static int all_patterns(const ab_secret *secs, size_t n, pbuild *b, size_t *bad)
{
	if (n > AB_SECRETS_MAX)
		return -E2BIG;
	char *wv = malloc(WORK_MAX), *wp = malloc(WORK_MAX);
	unsigned char *tmp = malloc(AB_SECRET_VALUE_MAX + 8);
	int r = wv && wp && tmp ? 0 : -ENOMEM;
	for (size_t i = 0; !r && i < n; i++) {
		if (!secs[i].value || !secs[i].placeholder ||
		    secs[i].value_len > AB_SECRET_VALUE_MAX ||
		    secs[i].placeholder_len > AB_PLACEHOLDER_MAX) {
			*bad = i;
			r = -EINVAL;
			break;
		}
		response_patterns(b, &secs[i], (unsigned)i, wv, wp, tmp);
	}
	if (!r && b->fail)
		r = -ENOMEM;
	ab_secrets_wipe_free(wv, wv ? WORK_MAX : 0);
	ab_secrets_wipe_free(wp, wp ? WORK_MAX : 0);
	ab_secrets_wipe_free((char *)tmp, tmp ? AB_SECRET_VALUE_MAX + 8 : 0);
	return r;
}

int ab_secrets_mask_conflict(const ab_secret *secs, size_t n, uint64_t skip)
{
	pbuild b = {0};
	size_t bad;
	int r = all_patterns(secs, n, &b, &bad), found = -1;
	for (size_t i = 0; !r && found < 0 && i < b.n; i++)
		if (!(b.p[i].id < 64 && (skip >> b.p[i].id & 1)) && pattern_conflicts(&b, i))
			found = (int)b.p[i].id;
	pb_free(&b);
	return r < 0 ? r : found;
}

int ab_secrets_response_set(const ab_secret *secs, size_t n, ab_scan_set **out, ab_err *err)
{
	pbuild b = {0};
	size_t bad = 0;
	int r;

	*out = NULL;
	if ((r = all_patterns(secs, n, &b, &bad)) == -E2BIG)
		r = ab_fail_code(err, AB_EXIT_FAIL, E2BIG, "too many secrets (max %d)",
				 AB_SECRETS_MAX);
	else if (r == -EINVAL)
		r = ab_fail_code(err, AB_EXIT_FAIL, EINVAL, "secret %s is incomplete",
				 secs[bad].name);
	else if (r < 0)
		r = ab_fail(err, -r, "secret masks");
	else if ((r = safe_replacements(&b)) < 0)
		r = ab_fail(err, -r, "secret masks: no byte is free to mask with");
	else if ((r = ab_scan_set_new(b.p, b.n, out, err)) < 0)
		ab_err_prefix(err, "masking secrets in responses");
	pb_free(&b);
	return r;
}

bool ab_secret_masks_body(const ab_secret *s, const char *host, unsigned port)
{
	return s && s->mask_in_body && !s->in_body && ab_secret_bound(s, host, port);
}

void ab_secret_mask(char *out, size_t len)
{
	size_t t = sizeof(AB_SECRET_MASK_TEXT) - 1;

	memset(out, '*', len);
	if (len >= t)
		memcpy(out, AB_SECRET_MASK_TEXT, t);
}

int ab_secrets_body_set(const ab_secret *secs, size_t n, const char *host, unsigned port,
			ab_scan_set **out, ab_err *err)
{
	ab_scan_pattern p[AB_SECRETS_MAX] = {0};
	char *mask[AB_SECRETS_MAX] = {0};
	int r = 0;

	*out = NULL;
	if (n > AB_SECRETS_MAX)
		return ab_fail_code(err, AB_EXIT_FAIL, E2BIG, "too many secrets (max %d)",
				    AB_SECRETS_MAX);
	for (size_t i = 0; r == 0 && i < n; i++) {
		const ab_secret *s = &secs[i];
		bool ok = s->in_body && s->placeholder_len == s->value_len &&
			  ab_secret_bound(s, host, port);
		bool fwd = ab_secret_forwards_elsewhere(s, host, port);
		if (!s->placeholder || !s->value) {
			r = ab_fail_code(err, AB_EXIT_FAIL, EINVAL, "secret %s is incomplete",
					 s->name);
			break;
		}
		if (ab_secret_masks_body(s, host, port)) {
			if (!(mask[i] = malloc(s->placeholder_len + 1))) {
				r = ab_fail(err, ENOMEM, "secret %s", s->name);
				break;
			}
			ab_secret_mask(mask[i], s->placeholder_len);
		}
		/* not bound here: replaced by itself, so sent on unchanged but counted */
		p[i] = (ab_scan_pattern){.bytes = s->placeholder,
					 .len = s->placeholder_len,
					 .repl = ok    ? s->value
						 : fwd ? s->placeholder
						       : mask[i],
					 .action = ok || fwd || mask[i] ? AB_SCAN_REPLACE
									: AB_SCAN_BLOCK,
					 .id = (unsigned)i};
	}
	if (r == 0)
		r = ab_scan_set_new(p, n, out, err);
	for (size_t i = 0; i < n && i < AB_SECRETS_MAX; i++)
		free(mask[i]);
	return r;
}
