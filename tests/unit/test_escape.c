/* SPDX-License-Identifier: MIT */
/*
 * test-escape's pure parts (src/escape/canary.c, src/escape/report.c):
 * the canary scanner (tokens at both buffer ends in exact-size heap buffers,
 * KIND lengths, case, 31/32/33 hex, repeated prefixes, embedded NULs, 16 MiB
 * of near-misses in linear time) and its hash (a literal checked with
 * sha256sum, and EVP in the test); the result-line parser against hostile
 * lines (unknown ids, bad verdicts, wrong types, duplicates, 1 MiB, deep
 * nesting, too many attempts with the escape last); the settle and exit
 * status tables; the TAP 14 output through a small structural checker
 * (version, plan, numbering, subtests and their plans, YAML after every
 * failure, escaping of '#' and '\'); JUnit checked well-formed and counted
 * with python3's minidom; JSON lines parsed back; the terminal summary.
 */
#include "unit.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "agentbox/escape.h"

#define HEX32 "0123456789abcdef0123456789abcdef"
#define TOK_SSH "ABCANARY-SSH-" HEX32
#define TOK_SSH_HASH "6fcc0b1863e32d1e" /* printf %s TOK_SSH | sha256sum */
#define S_(lit) lit, sizeof(lit) - 1

/* ================================================================ helpers */

static char *xstrdup(const char *s)
{
	char *d = strdup(s);
	assert_non_null(d);
	return d;
}

/* The first 16 hex of SHA-256, computed here independently of canary.c. */
static void ref_hash(const char *s, size_t n, char out[17])
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int len = 0;
	assert_int_equal(EVP_Digest(s, n, md, &len, EVP_sha256(), NULL), 1);
	for (int i = 0; i < 8; i++)
		snprintf(out + 2 * i, 3, "%02x", md[i]);
}

typedef struct hits {
	size_t n;
	char h[8][AB_CANARY_HASH_HEX + 1];
} hits;

static void on_hit(const char *hash, void *ctx)
{
	hits *h = ctx;
	assert_int_equal(strlen(hash), AB_CANARY_HASH_HEX);
	if (h->n < 8)
		strcpy(h->h[h->n], hash);
	h->n++;
}

/* Scan exactly n bytes copied into an exact-size heap buffer, so reading
 * past the end is caught by ASan. */
static int scan_exact(const char *s, size_t n, hits *h)
{
	char *buf = malloc(n ? n : 1);
	assert_non_null(buf);
	memcpy(buf, s, n);
	*h = (hits){0};
	int r = ab_canary_scan(buf, n, on_hit, h);
	free(buf);
	assert_int_equal((size_t)r, h->n);
	return r;
}

/* ================================================================ canary */

static void test_canary_hash_literal(void **state)
{
	char h[AB_CANARY_HASH_HEX + 1], ref[17];

	ab_canary_hash(TOK_SSH, strlen(TOK_SSH), h);
	assert_string_equal(h, TOK_SSH_HASH);
	ref_hash(TOK_SSH, strlen(TOK_SSH), ref);
	assert_string_equal(h, ref);
	/* length-bounded: bytes after len are not hashed */
	ab_canary_hash(TOK_SSH "zzz", strlen(TOK_SSH), h);
	assert_string_equal(h, TOK_SSH_HASH);
	/* stable and different per token */
	ab_canary_hash("ABCANARY-AWS-" HEX32, strlen(TOK_SSH), h);
	assert_string_not_equal(h, TOK_SSH_HASH);
	ref_hash("ABCANARY-AWS-" HEX32, strlen(TOK_SSH), ref);
	assert_string_equal(h, ref);
}

static void test_canary_found_hash(void **state)
{
	hits h;
	assert_int_equal(scan_exact(S_(TOK_SSH), &h), 1);
	assert_string_equal(h.h[0], TOK_SSH_HASH);
}

struct scan_case {
	const char *in;
	size_t n;
	int want;
	const char *tok; /* the token whose hash the first hit must carry */
};
#define C(lit, want, tok)                       \
	{                                       \
		lit, sizeof(lit) - 1, want, tok \
	}

// clang-format off
static const struct scan_case scan_cases[] = {
	C("", 0, NULL),
	C("ABCANARY-", 0, NULL),
	C(TOK_SSH, 1, TOK_SSH),
	C("x" TOK_SSH, 1, TOK_SSH),                       /* at the very end */
	C(TOK_SSH "\n", 1, TOK_SSH),
	C("key=" TOK_SSH "; other", 1, TOK_SSH),
	C("ABCANARY-SSH-0123456789abcdef0123456789abcde", 0, NULL),   /* 31 hex */
	C(TOK_SSH "0", 0, NULL),                          /* 33 hex */
	C(TOK_SSH "f", 0, NULL),
	C(TOK_SSH "g", 1, TOK_SSH),                       /* not hex: ends it */
	C(TOK_SSH "A", 1, TOK_SSH),                       /* not lowercase hex */
	C("ABCANARY-SSH-0123456789ABCDEF0123456789abcdef", 0, NULL), /* upper hex */
	C("ABCANARY-SSH-0123456789abcdeF0123456789abcdef", 0, NULL),
	C("ABCANARY-S-" HEX32, 0, NULL),                  /* KIND 1 */
	C("ABCANARY-S3-" HEX32, 1, "ABCANARY-S3-" HEX32), /* KIND 2 */
	C("ABCANARY-ABCDEFGHIJ12-" HEX32, 1, "ABCANARY-ABCDEFGHIJ12-" HEX32), /* 12 */
	C("ABCANARY-ABCDEFGHIJ123-" HEX32, 0, NULL),      /* KIND 13 */
	C("ABCANARY-ssh-" HEX32, 0, NULL),                /* lowercase KIND */
	C("ABCANARY-SS_H-" HEX32, 0, NULL),
	C("ABCANARY-SSH" HEX32, 0, NULL),                 /* no dash */
	C("ABCANARY-SSH--" HEX32, 0, NULL),
	C("abcanary-SSH-" HEX32, 0, NULL),
	C("ABCANARY-" TOK_SSH, 1, TOK_SSH),               /* prefix repeated */
	C("ABCANARY-ABCANARY-ABCANARY-" TOK_SSH, 1, TOK_SSH),
	C("ABCANARY-ABCANARY-" HEX32, 1, "ABCANARY-ABCANARY-" HEX32), /* KIND ABCANARY */
	C("ABCANARY-SSH-ABCANARY-SSH-" HEX32, 1, "ABCANARY-SSH-" HEX32),
	C(TOK_SSH TOK_SSH, 2, TOK_SSH),                   /* back to back */
	C(TOK_SSH "-" TOK_SSH, 2, TOK_SSH),
	C("\0" TOK_SSH "\0", 1, TOK_SSH),                 /* NULs around */
	C("ABCANARY-SSH-0123456789abcdef\0" "123456789abcdef", 0, NULL), /* NUL inside */
	C("ABCANARY\0-SSH-" HEX32, 0, NULL),
	C("\0\0\0\0\0\0\0\0\0\0\0", 0, NULL),
};
// clang-format on

static void test_canary_table(void **state)
{
	for (size_t i = 0; i < AB_ARRAY_SIZE(scan_cases); i++) {
		const struct scan_case *c = &scan_cases[i];
		hits h;
		int got = scan_exact(c->in, c->n, &h);
		if (got != c->want)
			fail_msg("case %zu: want %d tokens, got %d", i, c->want, got);
		if (c->tok) {
			char ref[17];
			ref_hash(c->tok, strlen(c->tok), ref);
			if (strcmp(h.h[0], ref) != 0)
				fail_msg("case %zu: wrong hash", i);
		}
	}
}

/* Every cut of a token at the end of the buffer: nothing until complete. */
static void test_canary_truncated(void **state)
{
	const char *t = "..." TOK_SSH;
	size_t n = strlen(t);
	hits h;

	for (size_t k = 0; k < n; k++)
		assert_int_equal(scan_exact(t, k, &h), 0);
	assert_int_equal(scan_exact(t, n, &h), 1);
	/* and a buffer starting mid-token */
	for (size_t k = 1; k < n; k++)
		assert_int_equal(scan_exact(t + k, n - k, &h), k <= 3 ? 1 : 0);
}

static void test_canary_edge_args(void **state)
{
	hits h = {0};
	assert_int_equal(ab_canary_scan(NULL, 0, on_hit, &h), 0);
	assert_int_equal(ab_canary_scan(NULL, 100, on_hit, &h), 0);
	assert_int_equal(ab_canary_scan(TOK_SSH, strlen(TOK_SSH), NULL, NULL), 1);
	assert_int_equal(h.n, 0);
}

/* 16 MiB of near-misses (each reading a full KIND before failing), a token
 * at the end: linear time, one hit. */
static void test_canary_huge(void **state)
{
	static const char unit[] =
		"ABCANARY-ABCDEFGHIJKL-ABCANARY-AB-0123456789abcdef0123456789abcde-";
	size_t n = 16u << 20, ul = sizeof(unit) - 1, tl = strlen(TOK_SSH);
	char *buf = malloc(n);
	hits h = {0};
	struct timespec a, b;

	assert_non_null(buf);
	for (size_t i = 0; i + ul <= n - tl; i += ul)
		memcpy(buf + i, unit, ul);
	memset(buf + (n - tl) / ul * ul, '.', n - tl - (n - tl) / ul * ul);
	memcpy(buf + n - tl, TOK_SSH, tl);
	clock_gettime(CLOCK_MONOTONIC, &a);
	assert_int_equal(ab_canary_scan(buf, n, on_hit, &h), 1);
	clock_gettime(CLOCK_MONOTONIC, &b);
	double s = (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) / 1e9;
	/* all zero bytes, and all 'A' (a memchr hit on every byte) */
	memset(buf, 0, n);
	int zero = ab_canary_scan(buf, n, NULL, NULL);
	memset(buf, 'A', n);
	int as = ab_canary_scan(buf, n, NULL, NULL);
	free(buf);
	assert_string_equal(h.h[0], TOK_SSH_HASH);
	assert_int_equal(zero, 0);
	assert_int_equal(as, 0);
	if (s > 5) /* ~0.1 s plain, ~1 s under ASan */
		fail_msg("16 MiB took %.1f s", s);
}

/* ================================================================= names */

static void test_names(void **state)
{
	enum ab_esc_verdict v;
	enum ab_esc_format f;

	for (int i = AB_ESC_OK; i <= AB_ESC_SKIP; i++) {
		assert_int_equal(ab_esc_verdict_parse(ab_esc_verdict_name(i), &v), 0);
		assert_int_equal(v, i);
	}
	assert_string_equal(ab_esc_verdict_name(AB_ESC_ESCAPED), "escaped");
	assert_string_equal(ab_esc_verdict_name(99), "?");
	const char *bad[] = {"", "OK", "blocked", "ok ", "escape", NULL};
	for (size_t i = 0; i < AB_ARRAY_SIZE(bad); i++)
		assert_int_equal(ab_esc_verdict_parse(bad[i], &v), -EINVAL);
	const char *cats[] = {"CTL", "FS", "SEC", "CRD", "NET", "PRC", "KRN", "PER", "TTY"};
	for (int c = 0; c < AB_CAT__N; c++)
		assert_string_equal(ab_esc_cat_name(c), cats[c]);
	assert_string_equal(ab_esc_cat_name(AB_CAT__N), "?");
	assert_int_equal(ab_esc_format_parse("tap", &f), 0);
	assert_int_equal(f, AB_ESC_TAP);
	assert_int_equal(ab_esc_format_parse("junit", &f), 0);
	assert_int_equal(f, AB_ESC_JUNIT);
	assert_int_equal(ab_esc_format_parse("json", &f), 0);
	assert_int_equal(f, AB_ESC_JSON);
	assert_int_equal(ab_esc_format_parse("xml", &f), -EINVAL);
	assert_int_equal(ab_esc_format_parse(NULL, &f), -EINVAL);
}

/* ================================================================= parse */

struct parse_case {
	const char *line;
	const char *err; /* NULL: parses; else a substring of the message */
	enum ab_esc_verdict v;
};

// clang-format off
static const struct parse_case parse_cases[] = {
	{ "{\"id\":\"FS-01\",\"verdict\":\"ok\",\"attempts\":[{\"what\":\"x\",\"verdict\":\"ok\"}]}",
	  NULL, AB_ESC_OK },
	{ "{\"id\":\"FS-01\",\"verdict\":\"ok\",\"ms\":1.5,\"attempts\":[{\"what\":\"x\","
	  "\"verdict\":\"ok\",\"result\":\"EACCES\",\"layer\":\"landlock\",\"source\":null}],"
	  "\"dropped\":0,\"found\":[],\"report\":{\"a\":[1]},\"note\":null,\"extra\":1}\n",
	  NULL, AB_ESC_OK },
	/* an inside line cannot claim ok while listing an escape */
	{ "{\"id\":\"FS-01\",\"verdict\":\"ok\",\"attempts\":[{\"what\":\"x\",\"verdict\":\"ok\"},"
	  "{\"what\":\"y\",\"verdict\":\"escaped\"}]}", NULL, AB_ESC_ESCAPED },
	{ "{\"id\":\"CTL-01\",\"verdict\":\"ok\",\"attempts\":[{\"what\":\"x\","
	  "\"verdict\":\"escaped\"}]}", NULL, AB_ESC_ERROR },
	{ "{\"id\":\"NET-06\",\"verdict\":\"error\",\"note\":\"timeout\"}", NULL, AB_ESC_ERROR },
	{ "{\"id\":\"NET-06\",\"verdict\":\"skip\",\"note\":\"gate stop\",\"attempts\":[]}",
	  NULL, AB_ESC_SKIP },
	{ "{\"id\":\"NET-06\",\"verdict\":\"ok\"}", NULL, AB_ESC_ERROR }, /* no attempts */
	{ "{\"id\":\"fs-01\",\"verdict\":\"ok\",\"attempts\":[{\"what\":\"x\",\"verdict\":\"ok\"}]}",
	  NULL, AB_ESC_OK }, /* the registry's lookup is case-insensitive */
	{ "", "invalid JSON", 0 },
	{ "   ", "invalid JSON", 0 },
	{ "{", "invalid JSON", 0 },
	{ "{}x", "invalid JSON", 0 },
	{ "{} {}", "invalid JSON", 0 },
	{ "[]", "not a JSON object", 0 },
	/* jansson refuses a scalar at the top level */
	{ "\"FS-01\"", "invalid JSON", 0 },
	{ "null", "invalid JSON", 0 },
	{ "42", "invalid JSON", 0 },
	{ "{}", "\"id\" missing", 0 },
	{ "{\"id\":7,\"verdict\":\"ok\"}", "\"id\" missing", 0 },
	{ "{\"id\":\"XX-99\",\"verdict\":\"ok\"}", "unknown probe id \"XX-99\"", 0 },
	{ "{\"id\":\"FS-01\\u001b[2J\",\"verdict\":\"ok\"}", "unknown probe id \"FS-01?[2J\"", 0 },
	{ "{\"id\":\"\",\"verdict\":\"ok\"}", "unknown probe id", 0 },
	{ "{\"id\":\"FS-01\"}", "\"verdict\" missing", 0 },
	{ "{\"id\":\"FS-01\",\"verdict\":\"OK\"}", "unknown verdict \"OK\"", 0 },
	{ "{\"id\":\"FS-01\",\"verdict\":\"blocked\"}", "unknown verdict", 0 },
	{ "{\"id\":\"FS-01\",\"verdict\":1}", "\"verdict\" missing or not a string", 0 },
	{ "{\"id\":\"FS-01\",\"id\":\"FS-02\",\"verdict\":\"ok\"}", "invalid JSON", 0 },
	{ "{\"id\":\"FS-01\",\"verdict\":\"ok\",\"attempts\":{}}", "\"attempts\" must be", 0 },
	{ "{\"id\":\"FS-01\",\"verdict\":\"ok\",\"attempts\":[1]}", "attempt 1: not an object", 0 },
	{ "{\"id\":\"FS-01\",\"verdict\":\"ok\",\"attempts\":[{\"verdict\":\"ok\"}]}",
	  "attempt 1: \"what\" missing", 0 },
	{ "{\"id\":\"FS-01\",\"verdict\":\"ok\",\"attempts\":[{\"what\":\"a\",\"verdict\":\"ok\"},"
	  "{\"what\":1,\"verdict\":\"ok\"}]}", "attempt 2: \"what\" must be a string", 0 },
	{ "{\"id\":\"FS-01\",\"verdict\":\"ok\",\"attempts\":[{\"what\":\"a\"}]}",
	  "attempt 1: \"verdict\" missing", 0 },
	{ "{\"id\":\"FS-01\",\"verdict\":\"ok\",\"attempts\":[{\"what\":\"a\",\"verdict\":\"x\"}]}",
	  "attempt 1: unknown verdict", 0 },
	{ "{\"id\":\"FS-01\",\"verdict\":\"ok\",\"attempts\":[{\"what\":\"a\",\"verdict\":\"ok\","
	  "\"result\":13}]}", "\"result\" must be a string", 0 },
	{ "{\"id\":\"FS-01\",\"verdict\":\"ok\",\"attempts\":[{\"what\":\"a\",\"verdict\":\"ok\","
	  "\"layer\":{}}]}", "\"layer\" must be a string", 0 },
	{ "{\"id\":\"FS-01\",\"verdict\":\"ok\",\"attempts\":[{\"what\":\"a\",\"verdict\":\"ok\","
	  "\"source\":[]}]}", "\"source\" must be a string", 0 },
	{ "{\"id\":\"FS-01\",\"verdict\":\"ok\",\"attempts\":[{\"what\":\"a\\u0000b\","
	  "\"verdict\":\"ok\"}]}", "invalid JSON", 0 },
	{ "{\"id\":\"FS-01\",\"verdict\":\"ok\",\"attempts\":[{\"what\":\"\xff\","
	  "\"verdict\":\"ok\"}]}", "invalid JSON", 0 },
	{ "{\"id\":\"FS-01\",\"verdict\":\"ok\",\"found\":\"0123456789abcdef\"}",
	  "\"found\" must be an array", 0 },
	{ "{\"id\":\"FS-01\",\"verdict\":\"ok\",\"found\":[\"0123456789abcde\"]}", "found 1", 0 },
	{ "{\"id\":\"FS-01\",\"verdict\":\"ok\",\"found\":[\"0123456789abcdef0\"]}", "found 1", 0 },
	{ "{\"id\":\"FS-01\",\"verdict\":\"ok\",\"found\":[\"0123456789ABCDEF\"]}", "found 1", 0 },
	{ "{\"id\":\"FS-01\",\"verdict\":\"ok\",\"found\":[\"0123456789abcdef\",7]}", "found 2", 0 },
	{ "{\"id\":\"FS-01\",\"verdict\":\"ok\",\"report\":[]}", "\"report\" must be an object", 0 },
	{ "{\"id\":\"FS-01\",\"verdict\":\"ok\",\"report\":\"x\"}", "\"report\" must be", 0 },
	{ "{\"id\":\"FS-01\",\"verdict\":\"ok\",\"ms\":-1}", "\"ms\" must be", 0 },
	{ "{\"id\":\"FS-01\",\"verdict\":\"ok\",\"ms\":\"5\"}", "\"ms\" must be", 0 },
	{ "{\"id\":\"FS-01\",\"verdict\":\"ok\",\"ms\":1e999}", "invalid JSON", 0 },
	{ "{\"id\":\"FS-01\",\"verdict\":\"ok\",\"dropped\":-1}", "\"dropped\" must be", 0 },
	{ "{\"id\":\"FS-01\",\"verdict\":\"ok\",\"dropped\":1.5}", "\"dropped\" must be", 0 },
	{ "{\"id\":\"FS-01\",\"verdict\":\"ok\",\"note\":5}", "\"note\" must be a string", 0 },
};
// clang-format on

static void test_parse_table(void **state)
{
	for (size_t i = 0; i < AB_ARRAY_SIZE(parse_cases); i++) {
		const struct parse_case *c = &parse_cases[i];
		ab_esc_result r;
		ab_err err = {0};
		int ret = ab_esc_result_parse(c->line, ab_probes, ab_nprobes, &r, &err);
		if (c->err) {
			if (ret >= 0)
				fail_msg("case %zu: parsed", i);
			if (!strstr(err.msg, c->err))
				fail_msg("case %zu: \"%s\" lacks \"%s\"", i, err.msg, c->err);
			assert_null(r.def);
			assert_null(r.attempts);
			continue;
		}
		if (ret < 0)
			fail_msg("case %zu: %s", i, err.msg);
		assert_non_null(r.def);
		if (r.verdict != c->v)
			fail_msg("case %zu: verdict %s", i, ab_esc_verdict_name(r.verdict));
		ab_esc_result_free(&r);
	}
}

static void test_parse_fields(void **state)
{
	ab_esc_result r;
	ab_err err = {0};
	const char *line =
		"{\"id\":\"SEC-01\",\"verdict\":\"escaped\",\"ms\":12,\"dropped\":5,"
		"\"attempts\":[{\"what\":\"open ~/.ssh/id\",\"verdict\":\"escaped\","
		"\"result\":\"read 12 bytes\",\"layer\":null,\"source\":\"judge\"}],"
		"\"found\":[\"0123456789abcdef\",\"0123456789abcdef\",\"fedcba9876543210\"],"
		"\"report\":{\"k\":\"v\"},\"note\":\"n\"}";

	assert_int_equal(ab_esc_result_parse(line, ab_probes, ab_nprobes, &r, &err), 0);
	assert_string_equal(r.def->id, "SEC-01");
	assert_int_equal(r.verdict, AB_ESC_ESCAPED);
	assert_true(r.ms == 12);
	assert_int_equal(r.dropped, 5);
	assert_int_equal(r.nattempts, 1);
	assert_string_equal(r.attempts[0].what, "open ~/.ssh/id");
	assert_string_equal(r.attempts[0].result, "read 12 bytes");
	assert_null(r.attempts[0].layer);
	assert_string_equal(r.attempts[0].source, "judge");
	assert_int_equal(r.found.n, 2); /* duplicates collapse */
	assert_string_equal(json_string_value(json_object_get(r.report, "k")), "v");
	assert_string_equal(r.note, "n");
	ab_esc_result_free(&r);
	assert_null(r.report);
	assert_int_equal(r.nattempts, 0);
}

/* Build one line with `n` attempts, one escaped at index `esc`, and `nf`
 * distinct found hashes. */
static char *big_line(size_t n, size_t esc, size_t nf)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&buf, &len);
	assert_non_null(m);
	fputs("{\"id\":\"FS-02\",\"verdict\":\"ok\",\"attempts\":[", m);
	for (size_t i = 0; i < n; i++)
		fprintf(m, "%s{\"what\":\"a%zu\",\"verdict\":\"%s\"}", i ? "," : "", i,
			i == esc ? "escaped" : "ok");
	fputs("],\"found\":[", m);
	for (size_t i = 0; i < nf; i++)
		fprintf(m, "%s\"%016zx\"", i ? "," : "", i);
	fputs("]}", m);
	assert_int_equal(fclose(m), 0);
	return buf;
}

static void test_parse_limits(void **state)
{
	ab_esc_result r;
	ab_err err = {0};
	size_t n = AB_ESC_MAX_ATTEMPTS + 300;

	/* the escape is the very last attempt: it must keep its place */
	char *line = big_line(n, n - 1, AB_ESC_MAX_FOUND + 10);
	assert_int_equal(ab_esc_result_parse(line, ab_probes, ab_nprobes, &r, &err), 0);
	assert_int_equal(r.nattempts, AB_ESC_MAX_ATTEMPTS);
	assert_int_equal(r.dropped, 300);
	assert_int_equal(r.verdict, AB_ESC_ESCAPED);
	assert_int_equal(r.attempts[AB_ESC_MAX_ATTEMPTS - 1].verdict, AB_ESC_ESCAPED);
	assert_string_equal(r.attempts[AB_ESC_MAX_ATTEMPTS - 1].what, "a555");
	assert_string_equal(r.attempts[0].what, "a0");
	assert_int_equal(r.found.n, AB_ESC_MAX_FOUND);
	ab_esc_result_free(&r);
	free(line);
	/* nothing escaped: all ok, the first ones kept */
	line = big_line(n, SIZE_MAX, 0);
	assert_int_equal(ab_esc_result_parse(line, ab_probes, ab_nprobes, &r, &err), 0);
	assert_int_equal(r.verdict, AB_ESC_OK);
	assert_string_equal(r.attempts[AB_ESC_MAX_ATTEMPTS - 1].what, "a255");
	ab_esc_result_free(&r);
	free(line);

	/* just over 1 MiB (valid JSON made of whitespace): refused unread */
	size_t big = 1024 * 1024 + 1;
	line = malloc(big + 1);
	assert_non_null(line);
	memset(line, ' ', big);
	memcpy(line, "{\"id\":\"FS-01\",\"verdict\":\"ok\"}", 29);
	line[big] = '\0';
	assert_true(ab_esc_result_parse(line, ab_probes, ab_nprobes, &r, &err) < 0);
	assert_non_null(strstr(err.msg, "longer than"));
	/* exactly 1 MiB is read (a probe with no attempts settles to ERROR) */
	line[big - 1] = '\0';
	assert_int_equal(ab_esc_result_parse(line, ab_probes, ab_nprobes, &r, &err), 0);
	assert_int_equal(r.verdict, AB_ESC_ERROR);
	ab_esc_result_free(&r);
	free(line);

	/* deep nesting in the report */
	size_t depth = 100000;
	line = malloc(2 * depth + 64);
	assert_non_null(line);
	size_t k = (size_t)sprintf(line, "{\"id\":\"FS-01\",\"verdict\":\"ok\",\"report\":");
	memset(line + k, '[', depth);
	memset(line + k + depth, ']', depth);
	strcpy(line + k + 2 * depth, "}");
	assert_true(ab_esc_result_parse(line, ab_probes, ab_nprobes, &r, &err) < 0);
	free(line);
	assert_true(ab_esc_result_parse(NULL, ab_probes, ab_nprobes, &r, &err) < 0);
}

/* ================================================================ settle */

struct settle_case {
	bool control;
	enum ab_esc_verdict in;
	const char *note;
	const char *att; /* o ok, e escaped, r error, s skip */
	enum ab_esc_verdict want;
};

#define OK AB_ESC_OK
#define ESC AB_ESC_ESCAPED
#define ERR AB_ESC_ERROR
#define SKP AB_ESC_SKIP

// clang-format off
static const struct settle_case settle_cases[] = {
	{ false, OK, NULL, "oo", OK },
	{ false, OK, NULL, "oe", ESC },
	{ false, OK, NULL, "re", ESC },
	{ false, OK, NULL, "or", ERR },
	{ false, SKP, NULL, "or", ERR },
	{ false, OK, NULL, "", ERR },
	{ false, SKP, "gate stop", "", SKP },
	{ false, SKP, NULL, "", ERR },
	{ false, ERR, "timeout", "", ERR },
	{ false, ERR, NULL, "", ERR },
	{ false, ESC, NULL, "", ESC },     /* an escape is sticky */
	{ false, ESC, NULL, "oo", ESC },
	{ false, ESC, "note", "", ESC },
	{ false, ERR, "timeout", "oo", ERR }, /* killed after some attempts */
	{ false, ERR, NULL, "oo", OK },      /* no reason: from the attempts */
	{ false, OK, NULL, "ss", SKP },
	{ false, OK, NULL, "so", OK },
	{ false, SKP, "note", "o", OK },
	{ false, OK, "note", "o", OK },
	{ true, OK, NULL, "oo", OK },
	{ true, OK, NULL, "os", ERR },
	{ true, OK, NULL, "oe", ERR },
	{ true, OK, NULL, "or", ERR },
	{ true, ESC, NULL, "o", OK },
	{ true, ESC, NULL, "", ERR },
	{ true, OK, NULL, "", ERR },
	{ true, SKP, "gate stop", "", SKP },
	{ true, SKP, NULL, "", ERR },
	{ true, ERR, "crashed", "o", ERR },
	{ true, ERR, "crashed", "", ERR },
	{ true, ERR, NULL, "o", OK },
};
// clang-format on

static enum ab_esc_verdict vchar(char c)
{
	return c == 'o' ? OK : c == 'e' ? ESC : c == 'r' ? ERR : SKP;
}

/* An unsettled result built by hand. */
static void mk_raw(ab_esc_result *r, const char *id, enum ab_esc_verdict v, const char *note,
		   const char *att)
{
	*r = (ab_esc_result){.def = ab_probe_find(id), .verdict = v};
	assert_non_null(r->def);
	r->note = note ? xstrdup(note) : NULL;
	r->nattempts = strlen(att);
	r->attempts = calloc(r->nattempts + 1, sizeof(*r->attempts));
	assert_non_null(r->attempts);
	for (size_t i = 0; i < r->nattempts; i++) {
		char w[32];
		snprintf(w, sizeof(w), "attempt %zu", i + 1);
		r->attempts[i].what = xstrdup(w);
		r->attempts[i].verdict = vchar(att[i]);
	}
}

static void test_settle_table(void **state)
{
	assert_true(ab_probe_find("CTL-01")->control);
	assert_false(ab_probe_find("FS-01")->control);
	for (size_t i = 0; i < AB_ARRAY_SIZE(settle_cases); i++) {
		const struct settle_case *c = &settle_cases[i];
		ab_esc_result r;
		mk_raw(&r, c->control ? "CTL-01" : "FS-01", c->in, c->note, c->att);
		ab_esc_result_settle(&r);
		if (r.verdict != c->want)
			fail_msg("case %zu: want %s, got %s", i, ab_esc_verdict_name(c->want),
				 ab_esc_verdict_name(r.verdict));
		if (!*c->att && r.verdict == ERR)
			assert_non_null(r.note); /* an error always says why */
		ab_esc_result_settle(&r);        /* idempotent */
		if (r.verdict != c->want)
			fail_msg("case %zu: not idempotent", i);
		ab_esc_result_free(&r);
	}
}

static void test_result_add(void **state)
{
	ab_esc_result r = {.def = ab_probe_find("NET-06"), .verdict = ERR};

	assert_int_equal(ab_esc_result_add(&r, NULL, OK, NULL, NULL, NULL), -EINVAL);
	assert_int_equal(ab_esc_result_add(&r, "x", 7, NULL, NULL, NULL), -EINVAL);
	assert_int_equal(
		ab_esc_result_add(&r, "connect 127.0.0.1:9", OK, "ECONNREFUSED", "netns", NULL), 0);
	assert_int_equal(r.verdict, OK);
	assert_string_equal(r.attempts[0].layer, "netns");
	for (int i = 0; i < AB_ESC_MAX_ATTEMPTS + 10; i++)
		assert_int_equal(ab_esc_result_add(&r, "more", OK, NULL, NULL, NULL), 0);
	assert_int_equal(r.nattempts, AB_ESC_MAX_ATTEMPTS);
	assert_int_equal(r.dropped, 11);
	assert_int_equal(r.verdict, OK);
	/* the judge's finding after the cap still lands and wins */
	assert_int_equal(
		ab_esc_result_add(&r, "canary listener hit", ESC, "1 connection", NULL, "judge"),
		0);
	assert_int_equal(r.nattempts, AB_ESC_MAX_ATTEMPTS);
	assert_int_equal(r.dropped, 12);
	assert_int_equal(r.verdict, ESC);
	assert_string_equal(r.attempts[AB_ESC_MAX_ATTEMPTS - 1].source, "judge");
	assert_string_equal(r.attempts[0].what, "connect 127.0.0.1:9");
	/* an error at the cap replaces an ok, never the escape */
	for (int i = 0; i < AB_ESC_MAX_ATTEMPTS + 5; i++)
		assert_int_equal(ab_esc_result_add(&r, "err", ERR, NULL, NULL, NULL), 0);
	size_t esc = 0, err = 0;
	for (size_t i = 0; i < r.nattempts; i++) {
		esc += r.attempts[i].verdict == ESC;
		err += r.attempts[i].verdict == ERR;
	}
	assert_int_equal(esc, 1);
	assert_int_equal(err, AB_ESC_MAX_ATTEMPTS - 1);
	assert_int_equal(r.verdict, ESC);
	ab_esc_result_free(&r);

	/* a timed-out probe stays an error when the judge adds an OK finding */
	ab_esc_result t = {.def = ab_probe_find("NET-06"), .verdict = ERR};
	t.note = xstrdup("timeout after 15 s");
	assert_int_equal(ab_esc_result_add(&t, "listener", OK, "0 connections", NULL, "judge"), 0);
	assert_int_equal(t.verdict, ERR);
	assert_int_equal(ab_esc_result_add(&t, "listener6", ESC, "1 connection", NULL, "judge"), 0);
	assert_int_equal(t.verdict, ESC);
	ab_esc_result_free(&t);
}

/* ============================================================ exit status */

struct exit_case {
	const char *ids;      /* space-separated probe ids */
	const char *verdicts; /* one char per id: o e r s */
	bool nie;
	const char *lab;
	int want;
};

// clang-format off
static const struct exit_case exit_cases[] = {
	{ "", "", false, NULL, AB_ESC_EXIT_OK },
	{ "CTL-01 FS-01", "oo", false, NULL, AB_ESC_EXIT_OK },
	{ "FS-01 FS-02", "os", false, NULL, AB_ESC_EXIT_OK },
	{ "FS-01 FS-02", "or", false, NULL, AB_ESC_EXIT_ERRORS },
	{ "CTL-01 FS-01", "ro", false, NULL, AB_ESC_EXIT_ERRORS },
	{ "CTL-01 FS-01", "eo", false, NULL, AB_ESC_EXIT_ERRORS }, /* a control never escapes */
	{ "FS-01 FS-02", "re", false, NULL, AB_ESC_EXIT_ESCAPE },
	{ "FS-01", "e", true, "x", AB_ESC_EXIT_ESCAPE },
	{ "PRC-01 FS-01", "os", true, NULL, AB_ESC_EXIT_NOT_IN_EFFECT },
	{ "PRC-01 FS-01", "rr", true, "x", AB_ESC_EXIT_NOT_IN_EFFECT },
	{ "", "", false, "lab broke", AB_ESC_EXIT_LAB },
	{ "FS-01", "r", false, "lab broke", AB_ESC_EXIT_LAB },
	{ "FS-01", "o", false, "lab broke", AB_ESC_EXIT_LAB },
};
// clang-format on

static void mk_results(ab_esc_results *rs, const char *ids, const char *verdicts)
{
	char buf[256];
	size_t i = 0;

	*rs = (ab_esc_results){0};
	rs->v = calloc(strlen(verdicts) + 1, sizeof(*rs->v));
	assert_non_null(rs->v);
	snprintf(buf, sizeof(buf), "%s", ids);
	for (char *save = NULL, *t = strtok_r(buf, " ", &save); t;
	     t = strtok_r(NULL, " ", &save), i++) {
		rs->v[i] = (ab_esc_result){.def = ab_probe_find(t),
					   .verdict = vchar(verdicts[i]),
					   .ms = 10.0 * (double)i};
		assert_non_null(rs->v[i].def);
	}
	rs->n = i;
	assert_int_equal(i, strlen(verdicts));
}

static void test_exit_table(void **state)
{
	for (size_t i = 0; i < AB_ARRAY_SIZE(exit_cases); i++) {
		const struct exit_case *c = &exit_cases[i];
		ab_esc_results rs;
		mk_results(&rs, c->ids, c->verdicts);
		rs.not_in_effect = c->nie;
		rs.lab_error = c->lab ? xstrdup(c->lab) : NULL;
		int got = ab_esc_exit_status(&rs);
		if (got != c->want)
			fail_msg("case %zu: want %d, got %d", i, c->want, got);
		ab_esc_results_free(&rs);
	}
	assert_int_equal(ab_esc_exit_status(NULL), AB_ESC_EXIT_LAB);
}

/* ============================================================ fixtures */

#define HOSTILE "a\"b<c>&d'e\x01\x1b[31m#x\\y\nz\xff\xc3( \xef\xbf\xbe ]]> # SKIP"

/* A run with every kind of result and hostile strings in every field. */
static void mk_mixed(ab_esc_results *rs)
{
	mk_results(rs, "CTL-01 CTL-02 PRC-01 FS-01 FS-02 SEC-01 NET-06 NET-08 TTY-01", "ooooooooo");
	for (size_t i = 0; i < rs->n; i++)
		rs->v[i].verdict = ERR;
	ab_esc_result *v = rs->v;
	assert_int_equal(ab_esc_result_add(&v[0], "write in workspace", OK, "ok", NULL, NULL), 0);
	assert_int_equal(ab_esc_result_add(&v[1], "secret arrives", ERR, "403", "proxy", NULL), 0);
	assert_int_equal(ab_esc_result_add(&v[2], "posture", OK, NULL, NULL, NULL), 0);
	assert_int_equal(ab_esc_result_add(&v[3], "create ~/x", OK, "EACCES", "landlock", NULL), 0);
	assert_int_equal(ab_esc_result_add(&v[3], HOSTILE, OK, HOSTILE, HOSTILE, NULL), 0);
	assert_int_equal(ab_esc_result_add(&v[4], "symlink ~/.ssh", OK, "ENOENT", "mount-ns", NULL),
			 0);
	assert_int_equal(ab_esc_result_add(&v[4], HOSTILE, ESC, "read 12 bytes # todo", NULL, NULL),
			 0);
	assert_int_equal(
		ab_esc_result_add(&v[5], "open id_ed25519", ESC, "skip this", NULL, "judge"), 0);
	assert_int_equal(ab_strv_push(&v[5].found, "0123456789abcdef"), 0);
	v[6].verdict = SKP;
	v[6].note = xstrdup("no ipv6 # here \\ there");
	v[7].note = xstrdup(HOSTILE);
	assert_int_equal(ab_esc_result_add(&v[8], "TIOCSTI fd 0", ERR, "EINVAL", NULL, NULL), 0);
	for (size_t i = 0; i < rs->n; i++)
		ab_esc_result_settle(&v[i]);
	rs->profile = xstrdup("default\x1b]0;x\x07");
}

static char *write_fmt(const ab_esc_results *rs, enum ab_esc_format fmt)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&buf, &len);
	ab_err err = {0};

	assert_non_null(m);
	if (ab_esc_write(rs, fmt, m, &err) < 0)
		fail_msg("write: %s", err.msg);
	assert_int_equal(fclose(m), 0);
	assert_int_equal(strlen(buf), len); /* no NUL in the output */
	return buf;
}

/* ================================================================== TAP */

typedef struct tap_stats {
	size_t plan, points, not_ok, skips, subtests, yaml, bails;
	char desc[32][256];     /* unescaped descriptions of the top-level points */
	char sub_desc[64][256]; /* unescaped descriptions of subtest points */
	size_t nsub_desc;
} tap_stats;

static bool starts(const char *s, const char *p)
{
	return strncmp(s, p, strlen(p)) == 0;
}

/* Split "ok 3 - desc # directive": check the number, return the unescaped
 * description and the directive (after an unescaped " # "). */
static bool tap_parse_point(const char *l, size_t want_num, char *desc, size_t dn,
			    const char **directive)
{
	const char *p = l + (starts(l, "not ok ") ? 7 : 3);
	char *end;
	size_t i = 0;

	if (strtoul(p, &end, 10) != want_num || end == p)
		return false;
	if (!starts(end, " - "))
		return false;
	*directive = NULL;
	for (p = end + 3; *p; p++) {
		if (*p == '\\' && (p[1] == '\\' || p[1] == '#')) {
			p++;
		} else if (*p == '#' && p[-1] == ' ' && p[1] == ' ') {
			*directive = p + 2;
			if (i > 0 && desc[i - 1] == ' ')
				i--;
			break;
		} else if (*p == '#') {
			return false; /* we always escape '#' in descriptions */
		}
		if (i + 1 < dn)
			desc[i++] = *p;
	}
	desc[i] = '\0';
	return true;
}

static bool tap_sub_line(const char *c, tap_stats *st, long *sub_plan, size_t *sub_next)
{
	const char *dir;
	char d[256];

	if (starts(c, "# "))
		return true;
	if (starts(c, "1..")) {
		if (*sub_plan >= 0 || *sub_next != 1)
			return false;
		*sub_plan = strtol(c + 3, NULL, 10);
		return true;
	}
	if (!starts(c, "ok ") && !starts(c, "not ok "))
		return false;
	if (!tap_parse_point(c, (*sub_next)++, d, sizeof(d), &dir))
		return false;
	if (st->nsub_desc < 64)
		snprintf(st->sub_desc[st->nsub_desc++], 256, "%s", d);
	/* a directive word that looks like SKIP/TODO must only come from a skip */
	if (dir && (strncasecmp(dir, "todo", 4) == 0 ||
		    (strncasecmp(dir, "skip", 4) == 0 && strncmp(dir, "SKIP", 4) != 0)))
		return false;
	return true;
}

typedef struct tap_state {
	char sub_name[512];
	bool in_yaml, in_sub, need_yaml, after_point;
	long sub_plan;
	size_t next, sub_next;
} tap_state;

/* A top-level "ok"/"not ok" line (which may close a subtest). */
static const char *tap_top_point(const char *l, tap_state *t, tap_stats *st)
{
	const char *dir;
	char d[256];

	if (!tap_parse_point(l, t->next, d, sizeof(d), &dir))
		return "bad test point";
	if (t->in_sub) {
		if (t->sub_plan < 0 || (size_t)t->sub_plan != t->sub_next - 1)
			return "subtest plan does not match its points";
		/* the subtest name must match the raw description */
		size_t nl = strlen(t->sub_name);
		const char *raw = strstr(l, " - ") + 3;
		if (strncmp(raw, t->sub_name, nl) != 0 || (raw[nl] && raw[nl] != ' '))
			return "subtest name does not match its point";
		t->in_sub = false;
	}
	if (t->next - 1 < 32)
		snprintf(st->desc[t->next - 1], 256, "%s", d);
	t->next++;
	st->points++;
	if (dir && strncmp(dir, "SKIP", 4) == 0)
		st->skips++;
	if (starts(l, "not ok ")) {
		st->not_ok++;
		t->need_yaml = true;
	}
	t->after_point = true;
	return NULL;
}

/* One line after the version; NULL if it is fine. */
static const char *tap_line(const char *l, tap_state *t, tap_stats *st)
{
	for (const unsigned char *c = (const unsigned char *)l; *c; c++)
		if (*c < 0x20 || *c == 0x7f)
			return "control character";
	if (t->need_yaml && strcmp(l, "  ---") != 0)
		return "not ok without YAML";
	t->need_yaml = false;
	if (t->in_yaml) {
		if (strcmp(l, "  ...") == 0)
			t->in_yaml = false;
		else if (!starts(l, "  "))
			return "YAML line not indented";
		return NULL;
	}
	if (strcmp(l, "  ---") == 0) {
		if (!t->after_point)
			return "YAML not after a point";
		t->in_yaml = true;
		st->yaml++;
		return NULL;
	}
	t->after_point = false;
	if (starts(l, "    "))
		return t->in_sub && tap_sub_line(l + 4, st, &t->sub_plan, &t->sub_next)
			       ? NULL
			       : "bad subtest line";
	if (starts(l, "# Subtest: ")) {
		if (t->in_sub)
			return "nested subtest comment";
		t->in_sub = true;
		snprintf(t->sub_name, sizeof(t->sub_name), "%s", l + 11);
		t->sub_plan = -1;
		t->sub_next = 1;
		st->subtests++;
		return NULL;
	}
	if (starts(l, "#"))
		return NULL;
	if (starts(l, "Bail out!")) {
		st->bails++;
		return NULL;
	}
	if (starts(l, "1..")) {
		if (st->plan || t->next != 1)
			return "plan not first or twice";
		st->plan = strtoul(l + 3, NULL, 10);
		return st->plan == 0 && strcmp(l, "1..0") != 0 ? "bad plan" : NULL;
	}
	if (!starts(l, "ok ") && !starts(l, "not ok "))
		return "non-TAP line";
	return tap_top_point(l, t, st);
}

/* A small TAP 14 checker: version line, one plan before the points that
 * matches them, consecutive numbers, commented subtests with their own plan
 * closed by a point of the same name, a YAML block after every failure. */
static const char *tap_check(const char *text, tap_stats *st)
{
	_cleanup_free_ char *copy = xstrdup(text);
	char *save = NULL, *l;
	tap_state t = {.sub_plan = -1, .next = 1, .sub_next = 1};

	*st = (tap_stats){0};
	l = strtok_r(copy, "\n", &save);
	if (!l || strcmp(l, "TAP version 14") != 0)
		return "no version line";
	for (l = strtok_r(NULL, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		const char *why = tap_line(l, &t, st);
		if (why)
			return why;
	}
	if (t.in_yaml || t.in_sub || t.need_yaml)
		return "unterminated block";
	if (!st->bails && st->plan != st->points)
		return "plan does not match the points";
	return NULL;
}

/* The checker is not vacuous: each kind of broken stream is refused. */
static void test_tap_checker(void **state)
{
	static const char *const bad[] = {
		"TAP version 13\n1..0\n",
		"TAP version 14\n1..2\nok 1 - a\n",
		"TAP version 14\n1..1\nok 2 - a\n",
		"TAP version 14\n1..1\nnot ok 1 - a\n",
		"TAP version 14\n1..1\nok 1 - a\n  ---\n  x: 1\n",
		"TAP version 14\n1..1\n# Subtest: a\n    1..2\n    ok 1 - x\nok 1 - a\n",
		"TAP version 14\n1..1\n# Subtest: a\n    1..1\n    ok 1 - x\nok 1 - b\n",
		"TAP version 14\n1..1\n    ok 1 - x\nok 1 - a\n",
		"TAP version 14\n1..1\nok 1 - a#b\n",
		"TAP version 14\n1..1\n# Subtest: a\n    1..1\n    ok 1 - x # todo y\nok 1 - a\n",
		"TAP version 14\n1..1\nok 1 - a\x1b\n",
		"TAP version 14\nok 1 - a\n1..1\n",
		"TAP version 14\n1..1\nok 1 - a\nwhat\n",
	};
	tap_stats st;

	for (size_t i = 0; i < AB_ARRAY_SIZE(bad); i++)
		if (!tap_check(bad[i], &st))
			fail_msg("case %zu accepted", i);
	assert_null(tap_check("TAP version 14\n1..1\n# Subtest: a\n    1..1\n    ok 1 - x # "
			      "blocked: y\nnot ok 1 - a\n  ---\n  v: 1\n  ...\n",
			      &st));
}

static void test_tap_all_ok(void **state)
{
	ab_esc_results rs;
	tap_stats st;

	mk_results(&rs, "CTL-01 FS-01 NET-06", "ooo");
	for (size_t i = 0; i < rs.n; i++)
		assert_int_equal(ab_esc_result_add(&rs.v[i], "try", OK, "EPERM", "seccomp", NULL),
				 0);
	_cleanup_free_ char *out = write_fmt(&rs, AB_ESC_TAP);
	const char *why = tap_check(out, &st);
	if (why)
		fail_msg("%s in:\n%s", why, out);
	assert_int_equal(st.plan, 3);
	assert_int_equal(st.not_ok, 0);
	assert_int_equal(st.subtests, 3);
	assert_string_equal(st.desc[1], "FS-01 write-outside-workspace");
	assert_non_null(strstr(out, "\nok 2 - FS-01 write-outside-workspace\n"));
	assert_non_null(strstr(out, "\n    ok 1 - try # blocked: EPERM (seccomp)\n"));
	assert_non_null(strstr(out, "\n    ok 1 - try # worked: EPERM (seccomp)\n"));
	ab_esc_results_free(&rs);
}

static void test_tap_mixed(void **state)
{
	ab_esc_results rs;
	tap_stats st;

	mk_mixed(&rs);
	_cleanup_free_ char *out = write_fmt(&rs, AB_ESC_TAP);
	const char *why = tap_check(out, &st);
	if (why)
		fail_msg("%s in:\n%s", why, out);
	assert_int_equal(st.plan, rs.n);
	/* CTL-02 error, FS-02 escaped, SEC-01 escaped, NET-08 error (no
	 * attempts), TTY-01 error */
	assert_int_equal(st.not_ok, 5);
	assert_int_equal(st.yaml, 5);
	assert_int_equal(st.skips, 1);
	assert_int_equal(st.bails, 0);
	assert_non_null(strstr(out, "\nnot ok 5 - FS-02 symlink-escape\n"));
	assert_non_null(strstr(out, "\nok 7 - NET-06 host-loopback # SKIP no ipv6 \\# here "
				    "\\\\ there\n"));
	assert_non_null(strstr(out, "  verdict: escaped\n"));
	assert_non_null(strstr(out, "  layers: [\"mount-ns\"]\n"));
	/* the hostile text comes back intact after TAP unescaping, with only
	 * control characters and invalid UTF-8 replaced */
	bool seen = false;
	for (size_t i = 0; i < st.nsub_desc; i++)
		seen |= strcmp(st.sub_desc[i],
			       "a\"b<c>&d'e??[31m#x\\y?z\xef\xbf\xbd\xef\xbf\xbd( \xef\xbf\xbe ]]> "
			       "# SKIP") == 0;
	assert_true(seen);
	/* the YAML strings are double-quoted with escapes */
	assert_non_null(strstr(out, "what: \"a\\\"b<c>&d'e\\x01\\x1b[31m#x\\\\y\\nz"));
	assert_non_null(strstr(out, "\\ufffe ]]> # SKIP\""));
	/* an attempt's result cannot turn its line into a TODO or SKIP */
	assert_non_null(strstr(out, "# escaped: read 12 bytes \\# todo\n"));
	assert_non_null(strstr(out, "# escaped: skip this [judge]\n"));
	assert_null(strstr(out, "\x1b"));
	ab_esc_results_free(&rs);
}

static void test_tap_bail(void **state)
{
	ab_esc_results rs;
	tap_stats st;

	mk_results(&rs, "", "");
	rs.lab_error = xstrdup("cannot mount # tmpfs\nnext line");
	_cleanup_free_ char *out = write_fmt(&rs, AB_ESC_TAP);
	assert_null(tap_check(out, &st));
	assert_int_equal(st.bails, 1);
	assert_string_equal(out, "TAP version 14\nBail out! lab setup failed: cannot mount \\# "
				 "tmpfs?next line\n");
	ab_esc_results_free(&rs);

	mk_results(&rs, "PRC-01 FS-01", "es");
	rs.v[1].note = xstrdup("gate stop");
	rs.not_in_effect = true;
	_cleanup_free_ char *out2 = write_fmt(&rs, AB_ESC_TAP);
	const char *why = tap_check(out2, &st);
	if (why)
		fail_msg("%s in:\n%s", why, out2);
	assert_int_equal(st.bails, 1);
	assert_int_equal(st.points, 2);
	assert_non_null(strstr(out2, "\nBail out! sandbox not in effect (gate PRC-01)\n"));
	ab_esc_results_free(&rs);
}

/* ================================================================ JUnit */

static const char junit_py[] =
	"import sys, json, xml.dom.minidom as m\n"
	"d = m.parse(sys.argv[1])\n"
	"r = d.documentElement\n"
	"assert r.tagName == 'testsuites'\n"
	"E = d.getElementsByTagName\n"
	"def text(e): return ''.join(n.data for n in e.childNodes if n.nodeType == n.TEXT_NODE)\n"
	"bad = E('failure') + E('error')\n"
	"print(json.dumps({'tests': int(r.getAttribute('tests')),\n"
	" 'failures': int(r.getAttribute('failures')), 'errors': int(r.getAttribute('errors')),\n"
	" 'skipped': int(r.getAttribute('skipped')), 'name': r.getAttribute('name'),\n"
	" 'suites': [s.getAttribute('name') for s in E('testsuite')],\n"
	" 'suite_tests': sum(int(s.getAttribute('tests')) for s in E('testsuite')),\n"
	" 'cases': [c.getAttribute('name') for c in E('testcase')],\n"
	" 'classes': [c.getAttribute('classname') for c in E('testcase')],\n"
	" 'nfailure': len(E('failure')), 'nerror': len(E('error')), 'nskipped': len(E('skipped')),\n"
	" 'messages': [e.getAttribute('message') for e in bad],\n"
	" 'texts': [text(e) for e in bad] + [text(e) for e in E('system-out')]}))\n";

/* Write the JUnit output to a file, check it with the brief's one-liner and
 * return what python3's minidom saw. */
static json_t *junit_run(const ab_esc_results *rs)
{
	char xml[] = "/tmp/test_escape_XXXXXX", py[] = "/tmp/test_escape_py_XXXXXX";
	_cleanup_free_ char *out = write_fmt(rs, AB_ESC_JUNIT);
	int fx = mkstemp(xml), fp = mkstemp(py);
	char cmd[256], buf[65536];
	json_error_t je;

	assert_true(fx >= 0 && fp >= 0);
	assert_int_equal(write(fx, out, strlen(out)), (ssize_t)strlen(out));
	assert_int_equal(write(fp, junit_py, strlen(junit_py)), (ssize_t)strlen(junit_py));
	close(fx);
	close(fp);
	snprintf(cmd, sizeof(cmd),
		 "python3 -c \"import xml.dom.minidom,sys; "
		 "xml.dom.minidom.parse(sys.argv[1])\" %s",
		 xml);
	if (system(cmd) != 0)
		fail_msg("not well-formed XML:\n%s", out);
	snprintf(cmd, sizeof(cmd), "python3 %s %s", py, xml);
	FILE *p = popen(cmd, "r");
	assert_non_null(p);
	size_t n = fread(buf, 1, sizeof(buf) - 1, p);
	buf[n] = '\0';
	assert_int_equal(pclose(p), 0);
	unlink(xml);
	unlink(py);
	json_t *j = json_loads(buf, 0, &je);
	if (!j)
		fail_msg("python said: %s", buf);
	return j;
}

static size_t jint(json_t *j, const char *k)
{
	return (size_t)json_integer_value(json_object_get(j, k));
}

static bool jarray_has(json_t *a, const char *needle, bool substring)
{
	size_t i;
	json_t *v;
	json_array_foreach(a, i, v)
	{
		const char *s = json_string_value(v);
		if (s && (substring ? strstr(s, needle) != NULL : strcmp(s, needle) == 0))
			return true;
	}
	return false;
}

static void test_junit_mixed(void **state)
{
	ab_esc_results rs;

	mk_mixed(&rs);
	json_t *j = junit_run(&rs);
	assert_string_equal(json_string_value(json_object_get(j, "name")), "agentbox test-escape");
	assert_int_equal(jint(j, "tests"), rs.n);
	assert_int_equal(json_array_size(json_object_get(j, "cases")), rs.n);
	assert_int_equal(jint(j, "suite_tests"), rs.n);
	assert_int_equal(jint(j, "failures"), 2);
	assert_int_equal(jint(j, "nfailure"), 2);
	assert_int_equal(jint(j, "errors"), 3);
	assert_int_equal(jint(j, "nerror"), 3);
	assert_int_equal(jint(j, "skipped"), 1);
	assert_int_equal(jint(j, "nskipped"), 1);
	json_t *suites = json_object_get(j, "suites");
	assert_int_equal(json_array_size(suites), 6); /* CTL FS SEC NET PRC TTY */
	assert_string_equal(json_string_value(json_array_get(suites, 0)), "CTL");
	assert_string_equal(json_string_value(json_array_get(suites, 1)), "FS");
	assert_true(jarray_has(json_object_get(j, "cases"), "FS-02 symlink-escape", false));
	assert_true(jarray_has(json_object_get(j, "classes"), "agentbox.escape.NET", false));
	/* hostile text survives the round trip through attributes and text, with
	 * only what XML cannot carry replaced */
	const char *h = "a\"b<c>&d'e??[31m#x\\y\nz\xef\xbf\xbd\xef\xbf\xbd( ? ]]> # SKIP";
	assert_true(jarray_has(json_object_get(j, "messages"), "escaped: a\"b<c>&d'e??[31m#x\\y\nz",
			       true));
	assert_true(jarray_has(json_object_get(j, "texts"), h, true));
	assert_true(
		jarray_has(json_object_get(j, "messages"), "control failed: secret arrives", true));
	json_decref(j);
	ab_esc_results_free(&rs);
}

static void test_junit_harness(void **state)
{
	ab_esc_results rs;

	mk_results(&rs, "", "");
	rs.lab_error = xstrdup("no <netns> & \"more\"\x02");
	json_t *j = junit_run(&rs);
	assert_int_equal(jint(j, "tests"), 1);
	assert_int_equal(jint(j, "errors"), 1);
	assert_true(jarray_has(json_object_get(j, "messages"), "no <netns> & \"more\"?", false));
	json_decref(j);
	ab_esc_results_free(&rs);

	mk_results(&rs, "PRC-01", "e");
	rs.not_in_effect = true;
	j = junit_run(&rs);
	assert_int_equal(jint(j, "tests"), 2);
	assert_int_equal(jint(j, "failures"), 2);
	assert_true(jarray_has(json_object_get(j, "cases"), "sandbox in effect", false));
	json_decref(j);
	ab_esc_results_free(&rs);
}

/* ================================================================= JSON */

static void test_json_lines(void **state)
{
	ab_esc_results rs;
	ab_err err = {0};

	mk_mixed(&rs);
	_cleanup_free_ char *out = write_fmt(&rs, AB_ESC_JSON);
	char *save = NULL;
	size_t n = 0;
	json_t *sum = NULL;
	for (char *l = strtok_r(out, "\n", &save); l; l = strtok_r(NULL, "\n", &save), n++) {
		json_error_t je;
		json_t *j = json_loads(l, 0, &je);
		if (!j)
			fail_msg("line %zu: %s", n + 1, je.text);
		if (n < rs.n) {
			/* every probe line parses back to the same result */
			ab_esc_result r;
			if (ab_esc_result_parse(l, ab_probes, ab_nprobes, &r, &err) < 0)
				fail_msg("line %zu: %s", n + 1, err.msg);
			assert_ptr_equal(r.def, rs.v[n].def);
			assert_int_equal(r.verdict, rs.v[n].verdict);
			assert_int_equal(r.nattempts, rs.v[n].nattempts);
			assert_int_equal(r.found.n, rs.v[n].found.n);
			ab_esc_result_free(&r);
			json_decref(j);
		} else {
			sum = j;
		}
	}
	assert_int_equal(n, rs.n + 1);
	json_t *s = json_object_get(sum, "summary");
	assert_non_null(s);
	assert_int_equal(jint(s, "total"), rs.n);
	assert_int_equal(jint(s, "ok"), 3);
	assert_int_equal(jint(s, "escaped"), 2);
	assert_int_equal(jint(s, "error"), 3);
	assert_int_equal(jint(s, "skip"), 1);
	assert_int_equal(jint(s, "exit"), AB_ESC_EXIT_ESCAPE);
	assert_string_equal(json_string_value(json_object_get(s, "profile")),
			    "default\x1b]0;x\x07");
	json_decref(sum);
	ab_esc_results_free(&rs);
}

static void test_result_json_utf8(void **state)
{
	ab_esc_result r = {.def = ab_probe_find("FS-01"), .verdict = OK};
	ab_err err = {0};

	assert_int_equal(ab_esc_result_add(&r, "bad \xff\xfe utf8", OK, "\xc0\x80", NULL, NULL), 0);
	json_t *j = ab_esc_result_json(&r);
	assert_non_null(j);
	json_t *a = json_array_get(json_object_get(j, "attempts"), 0);
	assert_string_equal(json_string_value(json_object_get(a, "what")),
			    "bad \xef\xbf\xbd\xef\xbf\xbd utf8");
	assert_string_equal(json_string_value(json_object_get(a, "result")),
			    "\xef\xbf\xbd\xef\xbf\xbd");
	char *s = json_dumps(j, JSON_COMPACT);
	ab_esc_result back;
	assert_int_equal(ab_esc_result_parse(s, ab_probes, ab_nprobes, &back, &err), 0);
	assert_int_equal(back.verdict, OK);
	free(s);
	json_decref(j);
	ab_esc_result_free(&back);
	ab_esc_result_free(&r);
}

/* ============================================================== summary */

static void test_summary(void **state)
{
	ab_esc_results rs;
	char *buf = NULL;
	size_t len = 0;

	mk_mixed(&rs);
	FILE *m = open_memstream(&buf, &len);
	assert_non_null(m);
	ab_esc_write_summary(&rs, m);
	assert_int_equal(fclose(m), 0);
	assert_non_null(strstr(buf, "CTL   2 probes: 1 passed, 1 FAILED (CTL-02)\n"));
	assert_non_null(strstr(buf, "FS    2 probes: 1 blocked, 1 ESCAPED (FS-02)\n"));
	assert_non_null(strstr(buf, "NET   2 probes: 1 ERROR (NET-08), 1 skipped\n"));
	assert_non_null(strstr(buf, "PRC   1 probe: 1 blocked\n"));
	assert_non_null(strstr(buf, "test-escape: FAIL: 9 probes, 3 blocked, 2 escaped, 3 errors, "
				    "1 skipped (profile default?]0;x?) [exit 1]\n"));
	assert_null(strchr(buf, '\x1b'));
	free(buf);
	ab_esc_results_free(&rs);

	mk_results(&rs, "CTL-01 FS-01 FS-02", "oos");
	buf = NULL;
	m = open_memstream(&buf, &len);
	assert_non_null(m);
	ab_esc_write_summary(&rs, m);
	assert_int_equal(fclose(m), 0);
	assert_non_null(strstr(buf, "test-escape: PASS: 3 probes, 2 blocked, 0 escaped, 0 errors, "
				    "1 skipped [exit 0]\n"));
	free(buf);
	ab_esc_results_free(&rs);
}

static void test_write_errors(void **state)
{
	ab_esc_results rs;
	ab_err err = {0};

	mk_results(&rs, "FS-01", "o");
	FILE *f = fopen("/dev/full", "w");
	if (f) {
		setvbuf(f, NULL, _IONBF, 0);
		assert_true(ab_esc_write(&rs, AB_ESC_TAP, f, &err) < 0);
		fclose(f);
	}
	assert_true(ab_esc_write(&rs, 9, stdout, &err) < 0);
	assert_true(ab_esc_write(NULL, AB_ESC_TAP, stdout, &err) < 0);
	ab_esc_results_free(&rs);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_canary_hash_literal),
		cmocka_unit_test(test_canary_found_hash),
		cmocka_unit_test(test_canary_table),
		cmocka_unit_test(test_canary_truncated),
		cmocka_unit_test(test_canary_edge_args),
		cmocka_unit_test(test_canary_huge),
		cmocka_unit_test(test_names),
		cmocka_unit_test(test_parse_table),
		cmocka_unit_test(test_parse_fields),
		cmocka_unit_test(test_parse_limits),
		cmocka_unit_test(test_settle_table),
		cmocka_unit_test(test_result_add),
		cmocka_unit_test(test_exit_table),
		cmocka_unit_test(test_tap_checker),
		cmocka_unit_test(test_tap_all_ok),
		cmocka_unit_test(test_tap_mixed),
		cmocka_unit_test(test_tap_bail),
		cmocka_unit_test(test_junit_mixed),
		cmocka_unit_test(test_junit_harness),
		cmocka_unit_test(test_json_lines),
		cmocka_unit_test(test_result_json_utf8),
		cmocka_unit_test(test_summary),
		cmocka_unit_test(test_write_errors),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
