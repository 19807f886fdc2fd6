/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target (any process; fuzzing only): credential brokering.  The
 * first byte selects (low two bits):
 *   0  the streaming scanner with patterns taken from the input (up to 6, of
 *      1..8 bytes, REPLACE with a replacement or '*', or BLOCK), the rest
 *      scanned in one shot and split at pseudo-random points: the outputs
 *      must be equal, the held-back bytes must be exactly the longest suffix
 *      that is a proper prefix of a pattern, and without BLOCK the output
 *      must equal a naive reference (leftmost, then longest, covering match);
 *      bit 2 of the first byte: patterns of 4..35 bytes instead, so that the
 *      scanner's skip-ahead filter is on (the same checks)
 *   1  the request-head swap on whatever complete head the input starts
 *      with, for a destination picked by byte 1: it must not fail (except
 *      -E2BIG), and unless blocked the new head parses, holds no
 *      placeholder but those of secrets not bound to the destination
 *      (reported in res.elsewhere), and equals the input when nothing was
 *      injected; bit 3 of the first byte: every secret refuses elsewhere
 *      (then no placeholder at all is left)
 *   2  the response set (values and their encodings) on the input, split:
 *      same length, split-independent, no raw value left; and the JWT
 *      placeholder of the input (refused, or the same header and payload
 *      and a base64url signature of the same length)
 *   3  like 1, then the body set for the same destination on the bytes
 *      after the head
 */
#include "agentbox/http.h"
#include "agentbox/secrets.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define PHA "PHA_aaaaaaaaaaaaaaaaaaaaaa"
#define PHB "PHB_bbbbbbbbbbbbbbbbbbbbbb"
#define PHC "PHC_cccccccccccccccccccccc"
#define PHG "ghp_gggggggggggggggggggggg"

static ab_secret secs[4];
static ab_scan_set *resp_set;
static ab_http_req req;
static bool ready;

static void mk(ab_secret *s, const char *name, const char *value, const char *ph, const char *host,
	       const char *const *places)
{
	ab_err err;

	if (ab_secret_init(s, name, &err) < 0 ||
	    ab_secret_set_value(s, strdup(value), strlen(value), &err) < 0 ||
	    ab_secret_add_host(s, host, &err) < 0)
		__builtin_trap();
	for (; places && *places; places++)
		if (ab_secret_add_place(s, *places, &err) < 0)
			__builtin_trap();
	s->placeholder = strdup(ph);
	s->placeholder_len = strlen(ph);
	if (ab_secret_finish(s, &err) < 0)
		__builtin_trap();
}

static void setup(void)
{
	static const char *const pb[] = {"query", "header:authorization", "body", NULL};
	static const char *const pc[] = {"header:x-api-key", NULL};
	static const char *const pg[] = {"header:authorization", "body", NULL};
	ab_err err;

	mk(&secs[0], "TOKEN_A", "real-A-0123456789abcdefghi", PHA, "api.test", NULL);
	mk(&secs[1], "TOKEN_B", "s3cr3t/B+=&?~\"\\ %x", PHB, "*.example.com", pb);
	mk(&secs[2], "TOKEN_C", "value-C", PHC, "api.test", pc);
	mk(&secs[3], "GIT_TOKEN", "ghp_REALREALREALREALREAL12", PHG, "github.test", pg);
	if (ab_secrets_response_set(secs, 4, &resp_set, &err) < 0)
		__builtin_trap();
	ready = true;
}

/* ------------------------------------------------------------- scanner */

static uint64_t rng;
static size_t next_rand(void)
{
	rng = rng * 6364136223846793005ull + 1442695040888963407ull;
	return (size_t)(rng >> 33);
}

#define LONGEST 35 /* the longest pattern fuzz_scanner makes */

static void naive(const ab_scan_pattern *p, size_t np, const char *in, size_t n, char *out)
{
	for (size_t j = 0; j < n; j++) {
		size_t best = SIZE_MAX, bstart = 0;
		out[j] = in[j];
		for (size_t q = j + 1; q-- > 0 && j - q < LONGEST;)
			for (size_t i = 0; i < np; i++) {
				if (q + p[i].len <= j || q + p[i].len > n ||
				    memcmp(in + q, p[i].bytes, p[i].len) != 0)
					continue;
				if (best == SIZE_MAX || q < bstart ||
				    (q == bstart && p[i].len > p[best].len)) {
					best = i;
					bstart = q;
				}
			}
		if (best != SIZE_MAX)
			out[j] = p[best].repl ? p[best].repl[j - bstart] : '*';
	}
}

static size_t naive_hold(const ab_scan_pattern *p, size_t np, const char *in, size_t n)
{
	size_t best = 0;
	for (size_t i = 0; i < np; i++)
		for (size_t k = p[i].len - 1; k > best; k--)
			if (k <= n && memcmp(in + n - k, p[i].bytes, k) == 0) {
				best = k;
				break;
			}
	return best;
}

/* Scan IN[0..N) fed in pieces (MAXPIECE 0: one shot).  Returns the output
 * length; *BLOCKED set on a BLOCK hit. */
static size_t scan(const ab_scan_set *set, const ab_scan_pattern *p, size_t np, const char *in,
		   size_t n, size_t maxpiece, char *out, bool *blocked)
{
	ab_scanner s;
	ab_scan_hit hit;
	size_t o = 0, i = 0;

	*blocked = false;
	if (ab_scanner_init(&s, set) < 0)
		__builtin_trap();
	while (i < n) {
		size_t k = maxpiece ? next_rand() % (maxpiece + 1) : n - i;
		if (k > n - i)
			k = n - i;
		size_t held = ab_scanner_pending(&s), cap = k + held;
		int r = ab_scanner_feed(&s, in + i, k, out + o, &cap, &hit);
		if (r < 0 || cap > k + held || (held && held >= ab_scan_set_maxlen(set)))
			__builtin_trap();
		o += cap;
		i += k;
		if (r == 1) {
			if (!hit.blocked || o > hit.offset || hit.offset >= i)
				__builtin_trap();
			*blocked = true;
			ab_scanner_free(&s);
			return o;
		}
		if (o + ab_scanner_pending(&s) != i)
			__builtin_trap();
		if (p && ab_scanner_pending(&s) != naive_hold(p, np, in, i))
			__builtin_trap();
	}
	size_t cap = ab_scanner_pending(&s);
	if (ab_scanner_flush(&s, out + o, &cap, NULL) < 0)
		__builtin_trap();
	ab_scanner_free(&s);
	return o + cap;
}

static void fuzz_scanner(const uint8_t *d, size_t size)
{
	ab_scan_pattern p[6];
	char pat[6][LONGEST], rep[6][LONGEST];
	bool skip = d[0] & 4; /* patterns of 4..35 bytes: the skip-ahead filter works */
	size_t np, k = 1;
	bool any_block = false, b1, b2;
	ab_scan_set *set;
	ab_err err;

	if (size < 2)
		return;
	np = 1 + d[k++] % 6;
	for (size_t i = 0; i < np; i++) {
		if (k >= size)
			return;
		uint8_t spec = d[k++];
		size_t len = skip ? 4 + spec % 32 : 1 + spec % 8;
		for (size_t j = 0; j < len; j++) {
			pat[i][j] = k < size ? (char)d[k++] : 'a';
			rep[i][j] = (char)('A' + i);
		}
		p[i] = (ab_scan_pattern){.bytes = pat[i],
					 .len = len,
					 .repl = spec & 0x40 ? NULL : rep[i],
					 .action = (spec & 0xc0) == 0xc0 ? AB_SCAN_BLOCK
									 : AB_SCAN_REPLACE,
					 .id = (unsigned)i};
		any_block |= p[i].action == AB_SCAN_BLOCK;
	}
	if (ab_scan_set_new(p, np, &set, &err) < 0)
		__builtin_trap();
	const char *in = (const char *)d + k;
	size_t n = size - k;
	if (n > 4096)
		n = 4096;
	char *one = malloc(n + 1), *two = malloc(n + 1), *ref = malloc(n + 1);
	rng = size * 0x9e3779b97f4a7c15ull + d[0];
	size_t o1 = scan(set, p, np, in, n, 0, one, &b1);
	size_t o2 = scan(set, p, np, in, n, 1 + d[1] % 16, two, &b2);
	if (o1 != o2 || b1 != b2 || memcmp(one, two, o1) != 0)
		__builtin_trap();
	if (!b1 && o1 != n)
		__builtin_trap();
	if (!any_block) {
		naive(p, np, in, n, ref);
		if (b1 || memcmp(one, ref, n) != 0)
			__builtin_trap();
	}
	free(one);
	free(two);
	free(ref);
	ab_scan_set_free(set);
}

/* --------------------------------------------------------- head rewrite */

static const char *const hosts[] = {"api.test",  "a.example.com", "github.test",
				    "evil.test", "example.com",   "API.TEST."};
static const unsigned ports[] = {443, 80, 8443};

static int fuzz_head(const uint8_t *d, size_t size, size_t *head_len, const char **host,
		     unsigned *port)
{
	ab_swap_result res;
	char *out;
	size_t outlen;

	if (size < 3)
		return -1;
	*host = hosts[d[1] % 6];
	*port = ports[d[2] % 3];
	const char *head = (const char *)d + 3;
	int k = ab_http_parse_head(head, size - 3, NULL, &req);
	if (k <= 0)
		return -1;
	*head_len = (size_t)k;
	for (int i = 0; i < 4; i++)
		secs[i].refuse_elsewhere = d[0] & 8;
	int r = ab_secrets_rewrite_head(secs, 4, *host, *port, head, (size_t)k, &out, &outlen,
					&res);
	if (r == -E2BIG)
		return 0;
	if (r != 0)
		__builtin_trap();
	if (res.blocked) {
		if (out || !res.secret || !res.place[0] || !res.where[0] || res.injected ||
		    res.elsewhere)
			__builtin_trap();
		return 1;
	}
	if (!out || ab_http_parse_head(out, outlen, NULL, &req) != (int)outlen)
		__builtin_trap();
	for (int i = 0; i < 4; i++) {
		bool fwd = ab_secret_forwards_elsewhere(&secs[i], *host, *port);
		if (memmem(out, outlen, secs[i].placeholder, secs[i].placeholder_len) &&
		    !(fwd && (res.elsewhere >> i & 1)))
			__builtin_trap();
		if ((res.elsewhere >> i & 1) && !fwd)
			__builtin_trap();
		bool bound = ab_secret_bound(&secs[i], *host, *port);
		if ((res.injected >> i & 1) && !bound)
			__builtin_trap();
	}
	if (!res.injected && (outlen != (size_t)k || memcmp(out, head, outlen) != 0))
		__builtin_trap();
	ab_secrets_wipe_free(out, outlen);
	return 0;
}

static void fuzz_body(const uint8_t *d, size_t size, size_t off, const char *host, unsigned port)
{
	ab_scan_set *set;
	ab_err err;
	bool b1, b2;
	size_t n = size - off;

	if (ab_secrets_body_set(secs, 4, host, port, &set, &err) < 0)
		__builtin_trap();
	char *one = malloc(n + 1), *two = malloc(n + 1);
	rng = size;
	size_t o1 = scan(set, NULL, 0, (const char *)d + off, n, 0, one, &b1);
	size_t o2 = scan(set, NULL, 0, (const char *)d + off, n, 7, two, &b2);
	if (o1 != o2 || b1 != b2 || memcmp(one, two, o1) != 0 || (!b1 && o1 != n))
		__builtin_trap();
	free(one);
	free(two);
	ab_scan_set_free(set);
}

/* ------------------------------------------------------------- responses */

static void fuzz_response(const uint8_t *d, size_t size)
{
	const char *in = (const char *)d + 1;
	size_t n = size - 1;
	bool b1, b2;
	char *one = malloc(n + 1), *two = malloc(n + 1);

	rng = size;
	size_t o1 = scan(resp_set, NULL, 0, in, n, 0, one, &b1);
	size_t o2 = scan(resp_set, NULL, 0, in, n, 1 + (size % 32), two, &b2);
	if (b1 || b2 || o1 != n || o2 != n || memcmp(one, two, n) != 0)
		__builtin_trap();
	for (int i = 0; i < 4; i++)
		if (memmem(one, n, secs[i].value, secs[i].value_len))
			__builtin_trap();
	free(one);
	free(two);
}

/* The JWT placeholder of the input: refused unless it is header.payload.sig
 * in base64url; else as long, the same up to the last '.', a base64url
 * signature. */
static void fuzz_jwt(const uint8_t *data, size_t size)
{
	static char out[AB_PLACEHOLDER_MAX + 1];
	const char *v = (const char *)data;
	size_t dots = 0;
	for (size_t i = 0; i < size; i++)
		dots += v[i] == '.';
	int r = ab_jwt_placeholder_make(v, size, out, sizeof(out));
	if (r < 0) {
		if (r != -EINVAL && r != -ERANGE)
			__builtin_trap();
		return;
	}
	const char *last = memrchr(v, '.', size);
	if ((size_t)r != size || dots != 2 || !last || strlen(out) != size)
		__builtin_trap();
	size_t keep = (size_t)(last + 1 - v);
	if (memcmp(out, v, keep) != 0 || size - keep < 22)
		__builtin_trap();
	for (size_t i = keep; i < size; i++)
		if (!strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_",
			    out[i]))
			__builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t hl;
	const char *host;
	unsigned port;

	if (!ready)
		setup();
	if (size < 1)
		return 0;
	switch (data[0] & 3) {
	case 0: fuzz_scanner(data, size); break;
	case 1: fuzz_head(data, size, &hl, &host, &port); break;
	case 2:
		fuzz_response(data, size);
		fuzz_jwt(data + 1, size - 1);
		break;
	case 3:
		if (fuzz_head(data, size, &hl, &host, &port) == 0)
			fuzz_body(data, size, 3 + hl, host, port);
		break;
	}
	return 0;
}
