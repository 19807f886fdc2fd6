/* SPDX-License-Identifier: MIT */
/*
 * secrets.c: placeholders (charset, length rules, 10k draws without a
 * repeat), secret set-up and its refusals, the request-head swap (table of
 * allowed swaps and blocks: headers, Basic auth, query, path, method, header
 * names, percent-encoded and double-encoded forms, unbound hosts and ports,
 * case changes, several secrets at once; every output head parses again),
 * placeholders bound elsewhere (sent on unchanged and reported by default,
 * blocked with refuse_elsewhere: head and body),
 * the streaming scanner (every split point against a naive reference,
 * overlaps, hold-back only on partial matches, flush, BLOCK, buffers),
 * JWT-shaped placeholders (shape, refusals, swap, masking),
 * response masking of the value and its encodings, the body sets (swap,
 * mask_in_body's mask, block), and the
 * env/file/command sources (timeouts short through the parameter).  Pure
 * apart from the sources (which run /bin/sh, /bin/echo, /bin/false).
 */
#include "unit.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agentbox/http.h"
#include "agentbox/phkey.h"
#include "agentbox/secrets.h"

#define S(lit) lit, sizeof(lit) - 1

/* ================================================================ helpers */

static char *xstrdup(const char *s)
{
	char *d = strdup(s);
	assert_non_null(d);
	return d;
}

/* A finished secret with a fixed placeholder (tests need to know it). */
static void mk(ab_secret *s, const char *name, const char *value, const char *ph, const char *hosts,
	       const char *places)
{
	ab_err err = {0};
	char buf[512], *save = NULL;

	assert_int_equal(ab_secret_init(s, name, &err), 0);
	assert_int_equal(ab_secret_set_value(s, xstrdup(value), strlen(value), &err), 0);
	s->placeholder = xstrdup(ph);
	s->placeholder_len = strlen(ph);
	snprintf(buf, sizeof(buf), "%s", hosts);
	for (char *t = strtok_r(buf, " ", &save); t; t = strtok_r(NULL, " ", &save))
		assert_int_equal(ab_secret_add_host(s, t, &err), 0);
	if (places) {
		snprintf(buf, sizeof(buf), "%s", places);
		for (char *t = strtok_r(buf, " ", &save); t; t = strtok_r(NULL, " ", &save))
			assert_int_equal(ab_secret_add_place(s, t, &err), 0);
	}
	if (ab_secret_finish(s, &err) != 0)
		fail_msg("%s", err.msg);
}

static size_t b64enc(const unsigned char *in, size_t n, char *out, bool url)
{
	const char *a = url ? "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
			    : "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	size_t o = 0;
	for (size_t i = 0; i < n; i += 3) {
		unsigned v = (unsigned)in[i] << 16 | (i + 1 < n ? (unsigned)in[i + 1] << 8 : 0) |
			     (i + 2 < n ? in[i + 2] : 0);
		out[o++] = a[v >> 18];
		out[o++] = a[(v >> 12) & 63];
		out[o++] = i + 1 < n ? a[(v >> 6) & 63] : '=';
		out[o++] = i + 2 < n ? a[v & 63] : '=';
	}
	out[o] = '\0';
	return o;
}

static size_t b64dec(const char *in, size_t n, unsigned char *out)
{
	const char *a = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	unsigned acc = 0, bits = 0;
	size_t o = 0;
	for (size_t i = 0; i < n && in[i] != '='; i++) {
		const char *p = strchr(a, in[i]);
		assert_non_null(p);
		acc = acc << 6 | (unsigned)(p - a);
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			out[o++] = (unsigned char)(acc >> bits);
		}
	}
	return o;
}

static bool contains(const char *h, size_t n, const char *needle)
{
	return memmem(h, n, needle, strlen(needle)) != NULL;
}

/* ============================================================ placeholders */

static bool all_alnum(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')))
			return false;
	}
	return true;
}

typedef struct {
	const char *prefix;
	size_t len, value_len;
	int want; /* length or -errno */
} ph_case;

// clang-format off
static const ph_case ph_cases[] = {
	{ "sk-ant-", 0, 100, 100 },             /* same length as the value */
	{ "sk-ant-", 0, 10, 7 + 22 },           /* never fewer than prefix + 22 */
	{ NULL, 0, 0, 22 },
	{ "", 0, 22, 22 },
	{ "", 0, 23, 23 },
	{ "ghp_", 40, 5, 40 },                  /* explicit length wins */
	{ "ghp_", 5, 100, 4 + 22 },             /* but not below the minimum */
	{ "a_b-C9", 0, 4096, 4096 },
	{ "", 4096, 0, 4096 },
	{ "", 4097, 0, -EINVAL },
	{ "", 0, 4097, -EINVAL },
	{ "a b", 0, 40, -EINVAL },
	{ "a/b", 0, 40, -EINVAL },
	{ "a.b", 0, 40, -EINVAL },
	{ "a=", 0, 40, -EINVAL },
	{ "\xc3\xa9", 0, 40, -EINVAL },
	{ "%41", 0, 40, -EINVAL },
	{ "0123456789012345678901234567890X", 0, 0, 32 + 22 }, /* 32: the maximum */
	{ "0123456789012345678901234567890XY", 0, 0, -EINVAL },
};
// clang-format on

static void test_placeholder_table(void **state)
{
	static char out[AB_PLACEHOLDER_MAX + 1];

	for (size_t i = 0; i < sizeof(ph_cases) / sizeof(ph_cases[0]); i++) {
		const ph_case *c = &ph_cases[i];
		int r = ab_placeholder_make(c->prefix, c->len, c->value_len, out, sizeof(out));
		if (r != c->want)
			fail_msg("case %zu: %d != %d", i, r, c->want);
		if (r < 0)
			continue;
		size_t pl = c->prefix ? strlen(c->prefix) : 0;
		assert_int_equal(strlen(out), (size_t)r);
		assert_memory_equal(out, c->prefix ? c->prefix : "", pl);
		assert_true(all_alnum(out + pl, (size_t)r - pl));
	}
}

static void test_placeholder_buffer(void **state)
{
	char out[30];

	assert_int_equal(ab_placeholder_make("x", 0, 29, out, 29), -ENOBUFS);
	assert_int_equal(ab_placeholder_make("x", 0, 29, out, 30), 29);
	assert_int_equal(ab_placeholder_make("x", 0, 29, NULL, 30), -ENOBUFS);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(a, b);
}

/* Stable placeholders: a function of key, name, value and counter only; the
 * same shape rules; every input changes it; uniform characters. */
static void test_placeholder_derive(void **state)
{
	unsigned char key[AB_PHKEY_LEN], key2[AB_PHKEY_LEN];
	memset(key, 7, sizeof(key));
	memcpy(key2, key, sizeof(key2));
	key2[31] ^= 1;
	const char *v = "sk-ant-api03-0123456789abcdefghijklmnopqrstuvwxyz";
	size_t vl = strlen(v);
	char a[128], b[128];
	assert_int_equal(
		ab_placeholder_derive("sk-ant-api03-", 0, key, "K", v, vl, 0, a, sizeof(a)),
		(int)vl);
	assert_int_equal(strncmp(a, "sk-ant-api03-", 13), 0);
	assert_true(all_alnum(a + 13, vl - 13));
	assert_string_not_equal(a, v);
	assert_int_equal(
		ab_placeholder_derive("sk-ant-api03-", 0, key, "K", v, vl, 0, b, sizeof(b)),
		(int)vl);
	assert_string_equal(a, b); /* the same inputs: the same placeholder */
	/* each input changes it */
	assert_int_equal(
		ab_placeholder_derive("sk-ant-api03-", 0, key2, "K", v, vl, 0, b, sizeof(b)),
		(int)vl);
	assert_string_not_equal(a, b);
	ab_placeholder_derive("sk-ant-api03-", 0, key, "L", v, vl, 0, b, sizeof(b));
	assert_string_not_equal(a, b);
	ab_placeholder_derive("sk-ant-api03-", 0, key, "K", v, vl - 1, 0, b, sizeof(b));
	assert_string_not_equal(a, b);
	ab_placeholder_derive("sk-ant-api03-", 0, key, "K", v, vl, 1, b, sizeof(b));
	assert_string_not_equal(a, b);
	/* name and value are not one string run together: "K"+"x..." != "Kx"+"..." */
	char c[128], d[128];
	ab_placeholder_derive(NULL, 0, key, "K", "xyz0123456789012345678", 22, 0, c, sizeof(c));
	ab_placeholder_derive(NULL, 0, key, "Kx", "yz0123456789012345678", 21, 0, d, sizeof(d));
	assert_int_not_equal(strncmp(c, d, 21), 0);
	/* length rules and errors as ab_placeholder_make; long ones span blocks */
	assert_int_equal(ab_placeholder_derive(NULL, 0, key, "K", "ab", 2, 0, a, sizeof(a)),
			 AB_PLACEHOLDER_MIN_RANDOM);
	assert_int_equal(ab_placeholder_derive("p", 100, key, "K", v, vl, 0, a, sizeof(a)), 100);
	assert_true(all_alnum(a + 1, 99));
	assert_int_equal(ab_placeholder_derive("p", 100, key, "K", v, vl, 0, a, 100), -ENOBUFS);
	assert_int_equal(ab_placeholder_derive("bad!", 0, key, "K", v, vl, 0, a, sizeof(a)),
			 -EINVAL);
	assert_int_equal(ab_placeholder_derive(NULL, 0, NULL, "K", v, vl, 0, a, sizeof(a)),
			 -EINVAL);
	/* uniform over [A-Za-z0-9]: 2000 x 22 characters, ~710 each */
	size_t freq[256] = {0};
	for (uint32_t i = 0; i < 2000; i++) {
		char e[23];
		assert_int_equal(ab_placeholder_derive(NULL, 22, key, "K", v, vl, i, e, sizeof(e)),
				 22);
		for (int k = 0; k < 22; k++)
			freq[(unsigned char)e[k]]++;
	}
	for (int ch = 0; ch < 256; ch++)
		if (all_alnum((char[]){(char)ch}, 1))
			assert_in_range(freq[ch], 710 * 70 / 100, 710 * 130 / 100);
		else
			assert_int_equal(freq[ch], 0);
}

/* Where the key lives: XDG_STATE_HOME when absolute, else ~/.local/state. */
static void test_phkey_path(void **state)
{
	char *env1[] = {"XDG_STATE_HOME=/x/state/", NULL};
	char *env2[] = {"XDG_STATE_HOME=rel", NULL};
	char *p = ab_phkey_path("/home/u", env1);
	assert_string_equal(p, "/x/state/agentbox/placeholder.key");
	free(p);
	p = ab_phkey_path("/home/u", env2);
	assert_string_equal(p, "/home/u/.local/state/agentbox/placeholder.key");
	free(p);
	p = ab_phkey_path("/home/u/", NULL);
	assert_string_equal(p, "/home/u/.local/state/agentbox/placeholder.key");
	free(p);
	assert_null(ab_phkey_path("relative", NULL));
}

/* The key file: made 0600 in 0700 directories, read back the same; refused
 * when a link, the wrong size or open to others. */
static void test_phkey_load(void **state)
{
	char dir[] = "/tmp/ab-phkey-XXXXXX";
	assert_non_null(mkdtemp(dir));
	char *path = ab_asprintf("%s/a/b/agentbox/placeholder.key", dir);
	unsigned char k1[AB_PHKEY_LEN], k2[AB_PHKEY_LEN];
	ab_err err = {0};
	assert_int_equal(ab_phkey_load(path, k1, &err), 0);
	struct stat st;
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	assert_int_equal(st.st_size, AB_PHKEY_LEN);
	char *d = ab_asprintf("%s/a/b/agentbox", dir);
	assert_int_equal(stat(d, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0700);
	assert_int_equal(ab_phkey_load(path, k2, &err), 0);
	assert_memory_equal(k1, k2, AB_PHKEY_LEN);
	ab_phkey_id id;
	ab_phkey_id_of(path, &id);
	assert_true(id.present);
	assert_int_equal(ab_phkey_settle(path, &id), 0); /* the same file: kept */
	assert_int_equal(chmod(path, 0640), 0);
	assert_int_equal(ab_phkey_load(path, k2, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "mode 0600"));
	assert_int_equal(chmod(path, 0600), 0);
	assert_int_equal(truncate(path, 31), 0);
	assert_int_equal(ab_phkey_load(path, k2, &err), -EINVAL);
	/* another file at the path after a run (the key itself moved away, as
	 * through a writable grant above it): removed */
	char *moved = ab_asprintf("%s/moved.key", dir);
	assert_int_equal(rename(path, moved), 0);
	char *other = ab_asprintf("%s/other", dir);
	int fd = open(other, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(symlink(other, path), 0);
	assert_true(ab_phkey_load(path, k2, &err) < 0); /* a link: O_NOFOLLOW */
	assert_int_equal(ab_phkey_settle(path, &id), 1);
	assert_int_equal(lstat(path, &st), -1);
	assert_int_equal(access(other, F_OK), 0);
	unlink(other);
	free(other);
	unlink(moved);
	free(moved);
	assert_int_equal(ab_phkey_load(path, k2, &err), 0); /* a new key */
	assert_memory_not_equal(k1, k2, AB_PHKEY_LEN);
	unlink(path);
	rmdir(d);
	free(d);
	d = ab_asprintf("%s/a/b", dir);
	rmdir(d);
	free(d);
	d = ab_asprintf("%s/a", dir);
	rmdir(d);
	free(d);
	rmdir(dir);
	free(path);
}

static void test_placeholder_unique(void **state)
{
	enum { N = 10000, L = 22 };
	char(*all)[L + 1] = calloc(N, L + 1);
	size_t freq[256] = {0};

	assert_non_null(all);
	for (size_t i = 0; i < N; i++) {
		assert_int_equal(ab_placeholder_make(NULL, 0, 0, all[i], L + 1), L);
		for (size_t k = 0; k < L; k++)
			freq[(unsigned char)all[i][k]]++;
	}
	qsort(all, N, L + 1, cmp_str);
	for (size_t i = 1; i < N; i++)
		assert_string_not_equal(all[i - 1], all[i]);
	/* 220000 draws over 62 symbols: ~3548 each; every symbol well inside
	 * +-15% (a modulo bias of 256 % 62 would skew 8 of them by ~25%) */
	size_t total = 0;
	for (int c = 0; c < 256; c++) {
		bool in = all_alnum((char[]){(char)c}, 1);
		if (!in) {
			assert_int_equal(freq[c], 0);
			continue;
		}
		total += freq[c];
		assert_in_range(freq[c], 3548 * 85 / 100, 3548 * 115 / 100);
	}
	assert_int_equal(total, (size_t)N * L);
	free(all);
}

/* ========================================================= JWT placeholders */

/* A base64url JWT part of N characters (valid lengths only). */
static void b64url_fill(char *out, size_t n, char c)
{
	memset(out, c, n);
	out[n] = '\0';
}

static bool all_b64url(const char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!all_alnum(p + i, 1) && p[i] != '-' && p[i] != '_')
			return false;
	return true;
}

/* The value of a base64url character. */
static int b64url_val(char c)
{
	static const char a[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
	const char *p = strchr(a, c);
	return p && c ? (int)(p - a) : -1;
}

/* header {"alg":"HS256","typ":"JWT"}, payload {"sub":"1","exp":2000000000} */
#define JWT_H "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9"
#define JWT_P "eyJzdWIiOiIxIiwiZXhwIjoyMDAwMDAwMDAwfQ"
#define JWT_S "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"

static void check_jwt_ph(const char *v)
{
	char out[AB_PLACEHOLDER_MAX + 1], out2[AB_PLACEHOLDER_MAX + 1];
	size_t n = strlen(v), keep = (size_t)(strrchr(v, '.') + 1 - v), sl = n - keep;

	assert_int_equal(ab_jwt_placeholder_make(v, n, out, sizeof(out)), (int)n);
	assert_int_equal(strlen(out), n);
	assert_memory_equal(out, v, keep);       /* header and payload kept */
	assert_true(all_b64url(out + keep, sl)); /* a base64url signature */
	assert_memory_not_equal(out + keep, v + keep, sl);
	/* a canonical encoding: the unused low bits of the last character are 0 */
	int last = b64url_val(out[n - 1]);
	assert_true(last >= 0);
	if (sl % 4 == 2)
		assert_int_equal(last & 15, 0);
	else if (sl % 4 == 3)
		assert_int_equal(last & 3, 0);
	assert_int_equal(ab_jwt_placeholder_make(v, n, out2, sizeof(out2)), (int)n);
	assert_string_not_equal(out, out2); /* fresh every time */
}

static void test_jwt_placeholder(void **state)
{
	char v[AB_PLACEHOLDER_MAX + 1], sig[400], out[AB_PLACEHOLDER_MAX + 1];

	/* HS256 (43 characters), RS256 (342), ES256 (86), and the shortest
	 * signatures allowed (16 bytes: 22 characters; 24 for 18 bytes) */
	check_jwt_ph(JWT_H "." JWT_P "." JWT_S);
	const size_t lens[] = {342, 86, 22, 24, 23};
	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		b64url_fill(sig, lens[i], 'Q');
		snprintf(v, sizeof(v), JWT_H "." JWT_P ".%s", sig);
		check_jwt_ph(v);
	}

	/* not a JWS: -EINVAL */
	static const char *const bad[] = {
		"",
		"abc",
		JWT_H "." JWT_P,
		JWT_H "." JWT_P "." JWT_S ".x",
		JWT_H ".." JWT_S,
		"." JWT_P "." JWT_S,
		JWT_H "=." JWT_P "." JWT_S,
		JWT_H "." JWT_P "." JWT_S "=",
		JWT_H "." JWT_P "+/." JWT_S,
		JWT_H " ." JWT_P "." JWT_S,
		"eyJhbGciO." JWT_P "." JWT_S,   /* 9 % 4 == 1 */
		JWT_H "." JWT_P "." JWT_S "xy", /* 45 % 4 == 1 */
		"a.b.c.d.e",                    /* JWE-like */
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (ab_jwt_placeholder_make(bad[i], strlen(bad[i]), out, sizeof(out)) != -EINVAL)
			fail_msg("bad case %zu accepted", i);
	assert_int_equal(ab_jwt_placeholder_make(NULL, 0, out, sizeof(out)), -EINVAL);

	/* too short a signature (or none: alg "none"): -ERANGE */
	assert_int_equal(ab_jwt_placeholder_make(S(JWT_H "." JWT_P "."), out, sizeof(out)),
			 -ERANGE);
	b64url_fill(sig, 20, 'Q'); /* 15 bytes */
	snprintf(v, sizeof(v), JWT_H "." JWT_P ".%s", sig);
	assert_int_equal(ab_jwt_placeholder_make(v, strlen(v), out, sizeof(out)), -ERANGE);

	/* buffer */
	const char *ok = JWT_H "." JWT_P "." JWT_S;
	assert_int_equal(ab_jwt_placeholder_make(ok, strlen(ok), out, strlen(ok)), -ENOBUFS);
	assert_int_equal(ab_jwt_placeholder_make(ok, strlen(ok), NULL, 0), -ENOBUFS);
	assert_int_equal(ab_jwt_placeholder_make(ok, strlen(ok), out, strlen(ok) + 1),
			 (int)strlen(ok));
}

/* A finished JWT secret, its placeholder made by ab_secret_set_placeholder_jwt. */
static void mk_jwt(ab_secret *s, const char *name, const char *value, const char *places)
{
	ab_err err = {0};

	assert_int_equal(ab_secret_init(s, name, &err), 0);
	assert_int_equal(ab_secret_set_value(s, xstrdup(value), strlen(value), &err), 0);
	assert_int_equal(ab_secret_set_placeholder_jwt(s, &err), 0);
	assert_true(s->jwt);
	assert_int_equal(ab_secret_add_host(s, "chatgpt.test", &err), 0);
	assert_int_equal(ab_secret_add_place(s, places, &err), 0);
	if (ab_secret_finish(s, &err) != 0)
		fail_msg("%s", err.msg);
}

static void test_jwt_secret(void **state)
{
	static const char V[] = JWT_H "." JWT_P "." JWT_S;
	ab_secret s, t;
	ab_err err = {0};
	ab_swap_result res;
	char head[1024], want[1024], body[512], *out = NULL, buf[1024];
	size_t outlen = 0, cap;
	ab_scan_set *set;
	ab_scanner sc;
	ab_scan_hit hit;

	/* the value must be a JWT; the error names the secret, never the value */
	assert_int_equal(ab_secret_init(&t, "NOT_JWT", &err), 0);
	assert_int_equal(
		ab_secret_set_value(&t, xstrdup("sk-not-a-jwt-0123456789abcdef"), 29, &err), 0);
	assert_int_equal(ab_secret_set_placeholder_jwt(&t, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "NOT_JWT"));
	assert_non_null(strstr(err.msg, "not a JWT"));
	assert_null(strstr(err.msg, "sk-not"));
	assert_false(t.jwt);
	ab_secret_free(&t);
	assert_int_equal(ab_secret_init(&t, "SHORT_SIG", &err), 0);
	assert_int_equal(ab_secret_set_value(&t, xstrdup(JWT_H "." JWT_P ".abcdefgh"),
					     strlen(JWT_H "." JWT_P ".abcdefgh"), &err),
			 0);
	assert_int_equal(ab_secret_set_placeholder_jwt(&t, &err), -ERANGE);
	assert_non_null(strstr(err.msg, "SHORT_SIG"));
	assert_null(strstr(err.msg, JWT_P));
	ab_secret_free(&t);

	/* the swap: a Bearer header to the bound host gets the value; the
	 * placeholder's '.' are fine in a finished secret */
	mk_jwt(&s, "ACCESS", V, "header:authorization");
	assert_int_equal(s.placeholder_len, strlen(V));
	snprintf(head, sizeof(head),
		 "GET /backend-api/x HTTP/1.1\r\n"
		 "Host: chatgpt.test\r\n"
		 "Authorization: Bearer %s\r\n\r\n",
		 s.placeholder);
	snprintf(want, sizeof(want),
		 "GET /backend-api/x HTTP/1.1\r\n"
		 "Host: chatgpt.test\r\n"
		 "Authorization: Bearer %s\r\n\r\n",
		 V);
	assert_int_equal(ab_secrets_rewrite_head(&s, 1, "chatgpt.test", 443, head, strlen(head),
						 &out, &outlen, &res),
			 0);
	assert_false(res.blocked);
	assert_int_equal(res.injected, 1);
	assert_int_equal(outlen, strlen(want));
	assert_memory_equal(out, want, outlen);
	ab_secrets_wipe_free(out, outlen);
	/* elsewhere: sent on unchanged (never swapped) and reported by default;
	 * with refuse_elsewhere blocked, although the header and payload are public */
	snprintf(head, sizeof(head),
		 "GET / HTTP/1.1\r\n"
		 "Host: evil.test\r\nAuthorization: Bearer %s\r\n\r\n",
		 s.placeholder);
	assert_int_equal(ab_secrets_rewrite_head(&s, 1, "evil.test", 443, head, strlen(head), &out,
						 &outlen, &res),
			 0);
	assert_false(res.blocked);
	assert_int_equal(res.injected, 0);
	assert_int_equal(res.elsewhere, 1);
	assert_string_equal(out, head);
	ab_secrets_wipe_free(out, outlen);
	s.refuse_elsewhere = true;
	assert_int_equal(ab_secrets_rewrite_head(&s, 1, "evil.test", 443, head, strlen(head), &out,
						 &outlen, &res),
			 0);
	assert_true(res.blocked);
	assert_string_equal(res.place, "host:evil.test");
	s.refuse_elsewhere = false;
	/* the real token alone, or header.payload alone, are not the placeholder:
	 * not swapped, not blocked */
	snprintf(head, sizeof(head),
		 "GET / HTTP/1.1\r\n"
		 "Host: evil.test\r\nX-A: %.*s\r\n\r\n",
		 (int)(strrchr(V, '.') - V), V);
	assert_int_equal(ab_secrets_rewrite_head(&s, 1, "evil.test", 443, head, strlen(head), &out,
						 &outlen, &res),
			 0);
	assert_false(res.blocked);
	ab_secrets_wipe_free(out, outlen);

	/* responses: the value becomes the placeholder (same length) */
	assert_int_equal(ab_secrets_response_set(&s, 1, &set, &err), 0);
	snprintf(body, sizeof(body), "{\"access_token\":\"%s\"}", V);
	assert_int_equal(ab_scanner_init(&sc, set), 0);
	cap = sizeof(buf);
	assert_int_equal(ab_scanner_feed(&sc, body, strlen(body), buf, &cap, &hit), 0);
	size_t o = cap;
	cap = sizeof(buf) - o;
	assert_int_equal(ab_scanner_flush(&sc, buf + o, &cap, &hit), 0);
	o += cap;
	snprintf(want, sizeof(want), "{\"access_token\":\"%s\"}", s.placeholder);
	assert_int_equal(o, strlen(want));
	assert_memory_equal(buf, want, o);
	ab_scanner_free(&sc);
	ab_scan_set_free(set);
	ab_secret_free(&s);

	/* a body place (an id_token sent in a token exchange): swapped, same length */
	mk_jwt(&s, "ID_TOKEN", V, "body");
	assert_int_equal(ab_secrets_body_set(&s, 1, "chatgpt.test", 443, &set, &err), 0);
	snprintf(body, sizeof(body), "subject_token=%s&x=1", s.placeholder);
	snprintf(want, sizeof(want), "subject_token=%s&x=1", V);
	assert_int_equal(ab_scanner_init(&sc, set), 0);
	cap = sizeof(buf);
	assert_int_equal(ab_scanner_feed(&sc, body, strlen(body), buf, &cap, &hit), 0);
	o = cap;
	cap = sizeof(buf) - o;
	assert_int_equal(ab_scanner_flush(&sc, buf + o, &cap, &hit), 0);
	o += cap;
	assert_int_equal(o, strlen(want));
	assert_memory_equal(buf, want, o);
	ab_scanner_free(&sc);
	ab_scan_set_free(set);
	ab_secret_free(&s);
}

/* ================================================================ secrets */

static void test_secret_names(void **state)
{
	static const char *const bad[] = {
		"",         "1A",
		"A-B",      "A B",
		"A.B",      "A=B",
		"\xc3\xa9", "A12345678901234567890123456789012345678901234567890123456789012345"};
	static const char *const good[] = {"A", "_x", "GITHUB_TOKEN", "a1_B2"};
	ab_secret s;
	ab_err err = {0};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(ab_secret_init(&s, bad[i], &err), -EINVAL);
	assert_int_equal(ab_secret_init(&s, NULL, &err), -EINVAL);
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		assert_int_equal(ab_secret_init(&s, good[i], &err), 0);
		assert_string_equal(s.name, good[i]);
		ab_secret_free(&s);
	}
}

static void test_secret_places(void **state)
{
	static const char *const bad[] = {
		"header:",
		"header:host",
		"header:Content-Length",
		"header:transfer-encoding",
		"header:a b",
		"header:a:b",
		"header:\xc3\xa9",
		"cookie",
		"Query",
		"",
		("header:x1234567890123456789012345678901234567890123456789012345678901234")};
	ab_secret s;
	ab_err err = {0};

	assert_int_equal(ab_secret_init(&s, "T", &err), 0);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (ab_secret_add_place(&s, bad[i], &err) >= 0)
			fail_msg("place '%s' accepted", bad[i]);
	assert_false(s.places_given);
	assert_int_equal(ab_secret_add_place(&s, "header:X-Api-KEY", &err), 0);
	assert_int_equal(ab_secret_add_place(&s, "header:x-api-key", &err), 0);
	assert_int_equal(s.headers.n, 1);
	assert_string_equal(s.headers.v[0], "x-api-key");
	assert_int_equal(ab_secret_add_place(&s, "query", &err), 0);
	assert_int_equal(ab_secret_add_place(&s, "body", &err), 0);
	assert_true(s.in_query && s.in_body);
	for (int i = 0; i < AB_SECRET_MAX_HEADERS - 1; i++) {
		char h[32];
		snprintf(h, sizeof(h), "header:h%d", i);
		assert_int_equal(ab_secret_add_place(&s, h, &err), 0);
	}
	assert_int_equal(ab_secret_add_place(&s, "header:one-too-many", &err), -E2BIG);
	ab_secret_free(&s);
}

typedef struct {
	const char *v;
	size_t len;
	int want;
} val_case;

static void test_secret_values(void **state)
{
	static char big[AB_SECRET_VALUE_MAX + 2];
	const val_case cases[] = {
		{"", 0, -EINVAL},
		{S("a\nb"), -EINVAL},
		{S("a\rb"), -EINVAL},
		{S("a\0b"), -EINVAL},
		{S("\x01"), -EINVAL},
		{S("a\x7f"), -EINVAL},
		{big, AB_SECRET_VALUE_MAX + 1, -EFBIG},
		{big, AB_SECRET_VALUE_MAX, 0},
		{S("tok en\t"), 0},
		{S("\xc3\xa9t\xc3\xa9"), 0},
		{S("x"), 0},
	};
	ab_secret s;
	ab_err err = {0};

	memset(big, 'k', sizeof(big) - 1);
	assert_int_equal(ab_secret_init(&s, "T", &err), 0);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *v = malloc(cases[i].len + 1);
		memcpy(v, cases[i].v, cases[i].len);
		v[cases[i].len] = '\0';
		int r = ab_secret_set_value(&s, v, cases[i].len, &err);
		if (r != cases[i].want)
			fail_msg("value case %zu: %d (%s)", i, r, err.msg);
		if (r < 0) {
			assert_non_null(strstr(err.msg, "secret T"));
			assert_null(strstr(err.msg, "tok")); /* never the value */
		}
	}
	assert_int_equal(ab_secret_set_value(&s, NULL, 3, &err), -EINVAL);
	ab_secret_free(&s);
}

static void test_secret_finish(void **state)
{
	ab_secret s;
	ab_err err = {0};

	assert_int_equal(ab_secret_init(&s, "T", &err), 0);
	assert_int_equal(ab_secret_set_placeholder(&s, "p_", 0, &err), -EINVAL); /* no value */
	assert_int_equal(ab_secret_finish(&s, &err), -EINVAL);
	assert_int_equal(
		ab_secret_set_value(&s, xstrdup("value-of-thirty-bytes-exactly!"), 30, &err), 0);
	assert_int_equal(ab_secret_set_placeholder(&s, "bad prefix", 0, &err), -EINVAL);
	assert_int_equal(ab_secret_set_placeholder(&s, "sk-", 0, &err), 0);
	assert_int_equal(s.placeholder_len, 30);
	assert_memory_equal(s.placeholder, "sk-", 3);
	assert_int_equal(ab_secret_finish(&s, &err), -EINVAL); /* no host */
	assert_non_null(strstr(err.hint, "secrets.T.hosts"));
	assert_true(ab_secret_add_host(&s, "*.", &err) < 0);
	assert_true(ab_secret_add_host(&s, "a b", &err) < 0);
	assert_int_equal(ab_secret_add_host(&s, "api.test", &err), 0);
	assert_int_equal(ab_secret_add_host(&s, "*.example.com", &err), 0);
	assert_int_equal(ab_secret_add_host(&s, "localhost:8443", &err), 0);
	assert_int_equal(ab_secret_finish(&s, &err), 0);
	assert_int_equal(s.headers.n, 2); /* defaults */
	assert_true(ab_strv_contains(&s.headers, "authorization"));
	assert_true(ab_strv_contains(&s.headers, "x-api-key"));
	assert_true(ab_secret_bound(&s, "api.test", 443));
	assert_true(ab_secret_bound(&s, "API.test.", 80));
	assert_false(ab_secret_bound(&s, "api.test", 8443));
	assert_true(ab_secret_bound(&s, "a.b.example.com", 443));
	assert_false(ab_secret_bound(&s, "example.com", 443));
	assert_false(ab_secret_bound(&s, "evilexample.com", 443));
	assert_true(ab_secret_bound(&s, "localhost", 8443));
	assert_false(ab_secret_bound(&s, "localhost", 443));
	assert_false(ab_secret_bound(&s, NULL, 443));
	assert_false(ab_secret_bound(&s, "api.test@evil.test", 443));
	ab_secret_free(&s);
	assert_null(s.value);

	/* an explicit place: no default headers */
	mk(&s, "Q", "v", "PHQ_0123456789012345678901", "api.test", "query");
	assert_int_equal(s.headers.n, 0);
	assert_true(s.in_query);
	ab_secret_free(&s);
}

static void test_secrets_set(void **state)
{
	ab_secret s[3];
	ab_err err = {0};
	char names[64];

	mk(&s[0], "A", "va", "PHA_0123456789012345678901", "a.test", NULL);
	mk(&s[1], "B", "vb", "PHB_0123456789012345678901", "b.test", NULL);
	mk(&s[2], "A", "vc", "PHC_0123456789012345678901", "c.test", NULL);
	assert_int_equal(ab_secrets_check(s, 2, &err), 0);
	assert_int_equal(ab_secrets_check(s, 3, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "twice"));
	assert_int_equal(ab_secrets_check(s, AB_SECRETS_MAX + 1, &err), -E2BIG);
	ab_secrets_names(s, 3, 0x5, names, sizeof(names));
	assert_string_equal(names, "A,A");
	ab_secrets_names(s, 3, 0x2, names, sizeof(names));
	assert_string_equal(names, "B");
	ab_secrets_names(s, 3, 0x7, names, 4);
	assert_string_equal(names, "A,B");
	ab_secrets_names(s, 3, 0x7, names, 3);
	assert_string_equal(names, "A");
	for (int i = 0; i < 3; i++)
		ab_secret_free(&s[i]);
}

/* =========================================================== head rewrite */

/* 26-byte placeholders for 26-byte values where it matters. */
#define PHA "PHA_aaaaaaaaaaaaaaaaaaaaaa"
#define VA "real-A-0123456789abcdefghi"
#define PHB "PHB_bbbbbbbbbbbbbbbbbbbbbb"
#define VB "s3cr3t/B+=&?"
#define VB_PCT "s3cr3t%2FB%2B%3D%26%3F"
#define PHC "PHC_cccccccccccccccccccccc"
#define VC "value-C"
#define PHG "ghp_gggggggggggggggggggggg"
#define VG "ghp_REALREALREALREALREAL12"

static ab_secret secs[4];
enum { NSECS = 4 };

static int setup_secs(void **state)
{
	mk(&secs[0], "TOKEN_A", VA, PHA, "api.test", NULL);
	mk(&secs[1], "TOKEN_B", VB, PHB, "*.example.com", "query header:authorization");
	mk(&secs[2], "TOKEN_C", VC, PHC, "api.test", "header:x-api-key");
	mk(&secs[3], "GIT_TOKEN", VG, PHG, "github.test", "header:authorization body");
	return 0;
}

static int teardown_secs(void **state)
{
	for (int i = 0; i < NSECS; i++)
		ab_secret_free(&secs[i]);
	return 0;
}

typedef struct {
	const char *host;
	unsigned port;
	const char *in;
	const char *out;    /* expected head; NULL: blocked */
	const char *secret; /* blocked: name */
	const char *place, *where;
	uint64_t injected;
	uint64_t elsewhere; /* not blocked: res.elsewhere */
} rw_case;

#define GET(t) "GET " t " HTTP/1.1\r\n"
#define HA "Host: api.test\r\n"
#define END "\r\n"

// clang-format off
static const rw_case rw_cases[] = {
	/* allowed swaps */
	{ "api.test", 443, GET("/v1") HA "Authorization: Bearer " PHA END END,
	  GET("/v1") HA "Authorization: Bearer " VA END END, 0, 0, 0, 1, 0 },
	{ "api.test", 80, GET("/v1") HA "X-API-KEY: " PHA END END,
	  GET("/v1") HA "X-API-KEY: " VA END END, 0, 0, 0, 1, 0 },
	{ "api.test", 443, GET("/") HA "Authorization: " PHA " " PHA END END,
	  GET("/") HA "Authorization: " VA " " VA END END, 0, 0, 0, 1, 0 },
	{ "api.test", 443, GET("/") HA "Authorization: x" PHA "y" END END,
	  GET("/") HA "Authorization: x" VA "y" END END, 0, 0, 0, 1, 0 },
	/* two secrets in one head */
	{ "api.test", 443, GET("/") HA "Authorization: Bearer " PHA END "x-api-key: " PHC END END,
	  GET("/") HA "Authorization: Bearer " VA END "x-api-key: " VC END END, 0, 0, 0, 5, 0 },
	/* query: allowed for TOKEN_B, value percent-encoded; encoded placeholder too */
	{ "a.example.com", 443, GET("/q?key=" PHB "&x=1") "Host: a.example.com\r\n" END,
	  GET("/q?key=" VB_PCT "&x=1") "Host: a.example.com\r\n" END, 0, 0, 0, 2, 0 },
	{ "a.example.com", 443, GET("/q?key=%50%48%42_bbbbbbbbbbbbbbbbbbbbb%62") "Host: a.example.com\r\n" END,
	  GET("/q?key=" VB_PCT) "Host: a.example.com\r\n" END, 0, 0, 0, 2, 0 },
	{ "a.example.com", 443, GET("/q?a=" PHB "&b=" PHB) "Host: a.example.com\r\n" END,
	  GET("/q?a=" VB_PCT "&b=" VB_PCT) "Host: a.example.com\r\n" END, 0, 0, 0, 2, 0 },
	{ "a.example.com", 80, GET("http://a.example.com/q?k=" PHB) "Host: a.example.com\r\n" END,
	  GET("http://a.example.com/q?k=" VB_PCT) "Host: a.example.com\r\n" END, 0, 0, 0, 2, 0 },
	/* changed case, split placeholder, lookalikes: not placeholders */
	{ "api.test", 443, GET("/pha_aaaaaaaaaaaaaaaaaaaaaa") HA "X-Foo: pHA_aaaaaaaaaaaaaaaaaaaaaa" END END,
	  GET("/pha_aaaaaaaaaaaaaaaaaaaaaa") HA "X-Foo: pHA_aaaaaaaaaaaaaaaaaaaaaa" END END, 0, 0, 0, 0, 0 },
	{ "evil.test", 443, GET("/") "Host: evil.test\r\nX-A: PHA_aaaaaaaaaaa\r\nX-B: aaaaaaaaaaa" END END,
	  GET("/") "Host: evil.test\r\nX-A: PHA_aaaaaaaaaaa\r\nX-B: aaaaaaaaaaa" END END, 0, 0, 0, 0, 0 },
	{ "evil.test", 443, GET("/") "Host: evil.test\r\nX-A: PHA_aaaaaaaaaaaaaaaaaaaaa" END END,
	  GET("/") "Host: evil.test\r\nX-A: PHA_aaaaaaaaaaaaaaaaaaaaa" END END, 0, 0, 0, 0, 0 },
	/* blocks: unbound host / port (with refuse_elsewhere: rw_cases_forward
	 * has them without) */
	{ "evil.test", 443, GET("/") "Host: evil.test\r\nAuthorization: Bearer " PHA END END, NULL,
	  "TOKEN_A", "host:evil.test", "header:authorization", 0, 0 },
	{ "api.test", 8443, GET("/") "Host: api.test:8443\r\nAuthorization: Bearer " PHA END END, NULL,
	  "TOKEN_A", "host:api.test", "header:authorization", 0, 0 },
	{ "EVIL.test.", 443, GET("/") "Host: evil.test\r\nX-Api-Key: " PHC END END, NULL,
	  "TOKEN_C", "host:evil.test", "header:x-api-key", 0, 0 },
	{ "example.com", 443, GET("/?k=" PHB) "Host: example.com\r\n" END, NULL,
	  "TOKEN_B", "host:example.com", "query", 0, 0 },
	/* blocks: wrong place on a bound host */
	{ "api.test", 443, GET("/") HA "X-Foo: " PHA END END, NULL, "TOKEN_A", "header:x-foo",
	  "header:x-foo", 0, 0 },
	{ "api.test", 443, GET("/") HA "Cookie: s=" PHA END END, NULL, "TOKEN_A", "header:cookie",
	  "header:cookie", 0, 0 },
	{ "api.test", 443, GET("/") HA "Authorization: Bearer " PHC END END, NULL, "TOKEN_C",
	  "header:authorization", "header:authorization", 0, 0 },
	{ "api.test", 443, GET("/?k=" PHA) HA END, NULL, "TOKEN_A", "query", "query", 0, 0 },
	{ "api.test", 443, GET("/?k=%50HA_aaaaaaaaaaaaaaaaaaaaaa") HA END, NULL, "TOKEN_A", "query",
	  "query", 0, 0 },
	{ "api.test", 443, GET("/v1/" PHA "/x") HA END, NULL, "TOKEN_A", "path", "path", 0, 0 },
	{ "api.test", 443, GET("/v1/%50%48%41%5Faaaaaaaaaaaaaaaaaaaaaa") HA END, NULL, "TOKEN_A",
	  "path", "path", 0, 0 },
	{ "api.test", 443, GET("/v1/%2550HA_aaaaaaaaaaaaaaaaaaaaaa") HA END, NULL, "TOKEN_A",
	  "path", "path", 0, 0 },
	{ "api.test", 443, GET("/v1/%252550HA_aaaaaaaaaaaaaaaaaaaaaa") HA END, NULL, "TOKEN_A",
	  "path", "path", 0, 0 },
	{ "api.test", 443, GET("/%4" PHA) HA END, NULL, "TOKEN_A", "path", "path", 0, 0 },
	{ "api.test", 443, GET("/") HA "X-" PHA ": 1" END END, NULL, "TOKEN_A", "header-name",
	  "header-name", 0, 0 },
	{ "api.test", 443, PHA " / HTTP/1.1\r\n" HA END, NULL, "TOKEN_A", "method", "method", 0, 0 },
	{ "api.test", 443, GET("/") "Host: " PHA END END, NULL, "TOKEN_A", "header:host",
	  "header:host", 0, 0 },
	{ "api.test", 443, GET("/") HA "Authorization: Bearer %50HA_aaaaaaaaaaaaaaaaaaaaaa" END END,
	  NULL, "TOKEN_A", "header:authorization", "header:authorization", 0, 0 },
	{ PHA ".test", 80, GET("http://" PHA ".test/") "Host: " PHA ".test\r\n" END, NULL,
	  "TOKEN_A", "host:" "pha_aaaaaaaaaaaaaaaaaaaaaa.test", "authority", 0, 0 },
	/* Basic is decoded in Proxy-Authorization too (not a place by default) */
	{ "api.test", 443, GET("/") HA "Proxy-Authorization: Basic dTpQSEFfYWFhYWFhYWFhYWFhYWFhYWFhYWFhYQ==" END END, NULL, "TOKEN_A",
	  "header:proxy-authorization", "header:proxy-authorization", 0, 0 },
	/* query allowed, but the double-encoded form cannot be swapped */
	{ "a.example.com", 443, GET("/?k=%2550HB_bbbbbbbbbbbbbbbbbbbbbb") "Host: a.example.com\r\n" END,
	  NULL, "TOKEN_B", "query", "query", 0, 0 },
	/* one good swap does not excuse a block elsewhere */
	{ "api.test", 443, GET("/") HA "Authorization: Bearer " PHA END "X-Leak: " PHA END END, NULL,
	  "TOKEN_A", "header:x-leak", "header:x-leak", 0, 0 },
	{ "a.example.com", 443, GET("/?k=" PHB) "Host: a.example.com\r\nX-Api-Key: " PHA END END,
	  NULL, "TOKEN_A", "host:a.example.com", "header:x-api-key", 0, 0 },
	/* no placeholder at all: unchanged */
	{ "evil.test", 443, GET("/x?y=z") "Host: evil.test\r\nAuthorization: Bearer abc" END END,
	  GET("/x?y=z") "Host: evil.test\r\nAuthorization: Bearer abc" END END, 0, 0, 0, 0, 0 },
	{ "api.test", 443, "OPTIONS * HTTP/1.1\r\n" HA END, "OPTIONS * HTTP/1.1\r\n" HA END,
	  0, 0, 0, 0, 0 },
};
// clang-format on

static void check_rw(const rw_case *c, size_t idx, size_t nsecs)
{
	static ab_http_req req;
	ab_swap_result res;
	char *out = (char *)1;
	size_t outlen = 99;
	int r = ab_secrets_rewrite_head(secs, nsecs, c->host, c->port, c->in, strlen(c->in), &out,
					&outlen, &res);

	if (r != 0)
		fail_msg("case %zu: %d", idx, r);
	if (c->out) {
		if (res.blocked)
			fail_msg("case %zu blocked: %s %s %s", idx, res.secret, res.place,
				 res.where);
		if (outlen != strlen(c->out) || memcmp(out, c->out, outlen) != 0)
			fail_msg("case %zu:\n%.*s\n!=\n%s", idx, (int)outlen, out, c->out);
		assert_int_equal(out[outlen], '\0');
		assert_int_equal(ab_http_parse_head(out, outlen, NULL, &req), (int)outlen);
		assert_int_equal(res.injected, c->injected);
		if (res.elsewhere != c->elsewhere)
			fail_msg("case %zu: elsewhere %#llx, expected %#llx", idx,
				 (unsigned long long)res.elsewhere,
				 (unsigned long long)c->elsewhere);
		ab_secrets_wipe_free(out, outlen);
		return;
	}
	if (!res.blocked)
		fail_msg("case %zu not blocked: %.*s", idx, (int)outlen, out);
	assert_null(out);
	assert_int_equal(outlen, 0);
	assert_string_equal(res.secret, c->secret);
	if (strcmp(res.place, c->place) || strcmp(res.where, c->where))
		fail_msg("case %zu: place %s where %s", idx, res.place, res.where);
	assert_int_equal(res.injected, 0);
	assert_int_equal(res.elsewhere, 0);
	assert_string_equal(res.secret, secs[res.secret_index].name);
}

static void refuse_elsewhere(bool on)
{
	for (int i = 0; i < NSECS; i++)
		secs[i].refuse_elsewhere = on;
}

/* Every secret with refuse_elsewhere: the whole table.  By default, the
 * cases that do not block for the host (a place on a bound host, nothing
 * found) come out the same. */
static void test_rewrite_table(void **state)
{
	refuse_elsewhere(true);
	for (size_t i = 0; i < sizeof(rw_cases) / sizeof(rw_cases[0]); i++)
		check_rw(&rw_cases[i], i, NSECS);
	refuse_elsewhere(false);
	for (size_t i = 0; i < sizeof(rw_cases) / sizeof(rw_cases[0]); i++)
		if (!rw_cases[i].place || strncmp(rw_cases[i].place, "host:", 5) != 0)
			check_rw(&rw_cases[i], i, NSECS);
}

#define HE "Host: evil.test\r\n"

/* The default (no refuse_elsewhere): a placeholder in a request to a host
 * its secret is not bound to goes on as it is, wherever it is and however
 * it is encoded, and is reported; never swapped; the other secrets' rules
 * are unchanged in the same head. */
// clang-format off
static const rw_case rw_cases_forward[] = {
	/* the unbound host / port cases of rw_cases */
	{ "evil.test", 443, GET("/") HE "Authorization: Bearer " PHA END END,
	  GET("/") HE "Authorization: Bearer " PHA END END, 0, 0, 0, 0, 1 },
	{ "api.test", 8443, GET("/") "Host: api.test:8443\r\nAuthorization: Bearer " PHA END END,
	  GET("/") "Host: api.test:8443\r\nAuthorization: Bearer " PHA END END, 0, 0, 0, 0, 1 },
	{ "EVIL.test.", 443, GET("/") HE "X-Api-Key: " PHC END END,
	  GET("/") HE "X-Api-Key: " PHC END END, 0, 0, 0, 0, 4 },
	{ "example.com", 443, GET("/?k=" PHB) "Host: example.com\r\n" END,
	  GET("/?k=" PHB) "Host: example.com\r\n" END, 0, 0, 0, 0, 2 },
	{ PHA ".test", 80, GET("http://" PHA ".test/") "Host: " PHA ".test\r\n" END,
	  GET("http://" PHA ".test/") "Host: " PHA ".test\r\n" END, 0, 0, 0, 0, 1 },
	{ "a.example.com", 443, GET("/?k=" PHB) "Host: a.example.com\r\nX-Api-Key: " PHA END END,
	  GET("/?k=" VB_PCT) "Host: a.example.com\r\nX-Api-Key: " PHA END END, 0, 0, 0, 2, 1 },
	/* every place, every form the rewrite finds: found, left as it is */
	{ "evil.test", 443, GET("/v1/" PHA "/x?q=" PHC) HE END,
	  GET("/v1/" PHA "/x?q=" PHC) HE END, 0, 0, 0, 0, 5 },
	{ "evil.test", 443, GET("/v1/%50%48%41%5Faaaaaaaaaaaaaaaaaaaaaa") HE END,
	  GET("/v1/%50%48%41%5Faaaaaaaaaaaaaaaaaaaaaa") HE END, 0, 0, 0, 0, 1 },
	{ "evil.test", 443, GET("/?k=%252550HA_aaaaaaaaaaaaaaaaaaaaaa") HE END,
	  GET("/?k=%252550HA_aaaaaaaaaaaaaaaaaaaaaa") HE END, 0, 0, 0, 0, 1 },
	{ "evil.test", 443, GET("/") HE "X-" PHG ": 1" END END,
	  GET("/") HE "X-" PHG ": 1" END END, 0, 0, 0, 0, 8 },
	{ "evil.test", 443, PHA " / HTTP/1.1\r\n" HE END, PHA " / HTTP/1.1\r\n" HE END,
	  0, 0, 0, 0, 1 },
	{ "evil.test", 443, GET("/") HE "Proxy-Authorization: Basic dTpQSEFfYWFhYWFhYWFhYWFhYWFhYWFhYWFhYQ==" END END,
	  GET("/") HE "Proxy-Authorization: Basic dTpQSEFfYWFhYWFhYWFhYWFhYWFhYWFhYWFhYQ==" END END,
	  0, 0, 0, 0, 1 },
	{ "evil.test", 443, GET("/") HE "Authorization: Bearer " PHA PHC PHG END "X-B: " PHB END END,
	  GET("/") HE "Authorization: Bearer " PHA PHC PHG END "X-B: " PHB END END,
	  0, 0, 0, 0, 15 },
	/* a bound host: its own secrets swapped, another's placeholder (even in
	 * an allowed header, even right next to a swapped one) left as it is */
	{ "api.test", 443, GET("/") HA "Authorization: Bearer " PHA END "X-Foo: " PHG END END,
	  GET("/") HA "Authorization: Bearer " VA END "X-Foo: " PHG END END, 0, 0, 0, 1, 8 },
	{ "api.test", 443, GET("/") HA "X-Api-Key: " PHC PHG END END,
	  GET("/") HA "X-Api-Key: " VC PHG END END, 0, 0, 0, 4, 8 },
	{ "github.test", 443, GET("/?t=" PHA) "Host: github.test\r\nAuthorization: " PHG END END,
	  GET("/?t=" PHA) "Host: github.test\r\nAuthorization: " VG END END, 0, 0, 0, 8, 1 },
	/* and its own secrets' rules still block there, next to a forwarded one */
	{ "api.test", 443, GET("/?k=" PHA) HA "X-Foo: " PHG END END, NULL, "TOKEN_A", "query",
	  "query", 0, 0 },
	{ "api.test", 443, GET("/" PHG) HA "X-Foo: " PHA END END, NULL, "TOKEN_A", "header:x-foo",
	  "header:x-foo", 0, 0 },
};
// clang-format on

static void test_rewrite_forward(void **state)
{
	refuse_elsewhere(false);
	for (size_t i = 0; i < AB_ARRAY_SIZE(rw_cases_forward); i++)
		check_rw(&rw_cases_forward[i], i, NSECS);
	/* refuse_elsewhere per secret: only that one blocks */
	secs[2].refuse_elsewhere = true;
	check_rw(&rw_cases_forward[0], 100, NSECS);
	const rw_case c = {"EVIL.test.",
			   443,
			   GET("/") HE "X-Api-Key: " PHC END END,
			   NULL,
			   "TOKEN_C",
			   "host:evil.test",
			   "header:x-api-key",
			   0,
			   0};
	check_rw(&c, 101, NSECS);
	secs[2].refuse_elsewhere = false;
	assert_true(ab_secret_forwards_elsewhere(&secs[0], "evil.test", 443));
	assert_true(ab_secret_forwards_elsewhere(&secs[0], "api.test", 8443));
	assert_false(ab_secret_forwards_elsewhere(&secs[0], "api.test", 443));
	assert_false(ab_secret_forwards_elsewhere(NULL, "api.test", 443));
	secs[0].refuse_elsewhere = true;
	assert_false(ab_secret_forwards_elsewhere(&secs[0], "evil.test", 443));
	secs[0].refuse_elsewhere = false;
}

/* Authorization: Basic base64(user:placeholder), as git sends it. */
static void test_rewrite_basic(void **state)
{
	static const struct {
		const char *host, *user_pass, *want_user_pass; /* want NULL: blocked */
		const char *place;
	} cases[] = {
		{"github.test", "x-access-token:" PHG, "x-access-token:" VG, NULL},
		{"github.test", PHG ":", VG ":", NULL},
		{"github.test", PHG ":" PHG, VG ":" VG, NULL},
		{"github.test", "a:" PHG "b", "a:" VG "b", NULL},
		{"a.example.com", PHB ":" PHB, VB ":" VB, NULL},
		{"api.test", "u:" PHA, "u:" VA, NULL},
		{"api.test", "u:" PHC, NULL, "header:authorization"},
		{"evil.test", "x-access-token:" PHG, NULL, "host:evil.test"},
		{"github.test", "x:" PHA, NULL, "host:github.test"},
	};
	/* the last two without refuse_elsewhere: unchanged, reported */
	static const uint64_t fwd_bit[] = {0, 0, 0, 0, 0, 0, 0, 8, 1};
	static ab_http_req req;
	char enc[256], head[512], want[512];
	unsigned char dec[256];

	for (size_t k = 0; k < 2 * AB_ARRAY_SIZE(cases); k++) {
		size_t i = k % AB_ARRAY_SIZE(cases);
		refuse_elsewhere(k < AB_ARRAY_SIZE(cases));
		for (int sp = 1; sp <= 2; sp++) {
			ab_swap_result res;
			char *out;
			size_t outlen;
			b64enc((const unsigned char *)cases[i].user_pass,
			       strlen(cases[i].user_pass), enc, false);
			snprintf(head, sizeof(head),
				 GET("/r.git/info/refs") "Host: %s\r\n"
							 "Authorization: %s%s\r\n\r\n",
				 cases[i].host, sp == 1 ? "Basic " : "basic  ", enc);
			assert_int_equal(ab_secrets_rewrite_head(secs, NSECS, cases[i].host, 443,
								 head, strlen(head), &out, &outlen,
								 &res),
					 0);
			if (fwd_bit[i] && !secs[0].refuse_elsewhere) {
				assert_false(res.blocked);
				assert_string_equal(out, head);
				assert_int_equal(res.injected, 0);
				assert_int_equal(res.elsewhere, fwd_bit[i]);
				ab_secrets_wipe_free(out, outlen);
				continue;
			}
			if (!cases[i].want_user_pass) {
				assert_true(res.blocked);
				assert_string_equal(res.place, cases[i].place);
				assert_string_equal(res.where, "header:authorization");
				continue;
			}
			assert_false(res.blocked);
			assert_int_equal(ab_http_parse_head(out, outlen, NULL, &req), (int)outlen);
			const char *v = strstr(out, sp == 1 ? "Basic " : "basic  ");
			assert_non_null(v);
			v += sp == 1 ? 6 : 7;
			size_t n = b64dec(v, strcspn(v, "\r"), dec);
			dec[n] = '\0';
			assert_string_equal((char *)dec, cases[i].want_user_pass);
			/* the exact re-encoding */
			b64enc((const unsigned char *)cases[i].want_user_pass,
			       strlen(cases[i].want_user_pass), enc, false);
			snprintf(want, sizeof(want),
				 GET("/r.git/info/refs") "Host: %s\r\n"
							 "Authorization: %s%s\r\n\r\n",
				 cases[i].host, sp == 1 ? "Basic " : "basic  ", enc);
			assert_string_equal(out, want);
			assert_true(res.injected != 0);
			assert_int_equal(res.elsewhere, 0);
			ab_secrets_wipe_free(out, outlen);
		}
	}
	refuse_elsewhere(false);
}

/* "Basic <placeholder>" (a pre-encoded token given as the secret) and
 * invalid base64: swapped literally. */
static void test_rewrite_basic_literal(void **state)
{
	const rw_case cases[] = {
		{"github.test", 443,
		 GET("/") "Host: github.test\r\nAuthorization: Basic " PHG END END,
		 GET("/") "Host: github.test\r\nAuthorization: Basic " VG END END, 0, 0, 0, 8, 0},
		{"github.test", 443,
		 GET("/") "Host: github.test\r\nAuthorization: Basic !" PHG END END,
		 GET("/") "Host: github.test\r\nAuthorization: Basic !" VG END END, 0, 0, 0, 8, 0},
		{"github.test", 443, GET("/") "Host: github.test\r\nAuthorization: Basic" END END,
		 GET("/") "Host: github.test\r\nAuthorization: Basic" END END, 0, 0, 0, 0, 0},
		{"github.test", 443, GET("/") "Host: github.test\r\nAuthorization: Basic =" END END,
		 GET("/") "Host: github.test\r\nAuthorization: Basic =" END END, 0, 0, 0, 0, 0},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		check_rw(&cases[i], i, NSECS);
}

static void test_rewrite_invalid(void **state)
{
	static const char *const bad[] = {
		"GET / HTTP/1.1\r\nHost: a\r\n",        /* incomplete */
		"GET / HTTP/1.1\r\nHost: a\r\n\r\nGET", /* bytes after the head */
		"GET / HTTP/1.1\nHost: a\r\n\r\n",      /* bare LF */
		"",
	};
	ab_swap_result res;
	char *out;
	size_t outlen;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(ab_secrets_rewrite_head(secs, NSECS, "api.test", 443, bad[i],
							 strlen(bad[i]), &out, &outlen, &res),
				 -EINVAL);
	assert_int_equal(ab_secrets_rewrite_head(secs, AB_SECRETS_MAX + 1, "api.test", 443,
						 S(GET("/") HA END), &out, &outlen, &res),
			 -EINVAL);
	/* no secrets: a copy */
	assert_int_equal(ab_secrets_rewrite_head(NULL, 0, "api.test", 443, S(GET("/") HA END), &out,
						 &outlen, &res),
			 0);
	assert_false(res.blocked);
	assert_string_equal(out, GET("/") HA END);
	ab_secrets_wipe_free(out, outlen);
	/* NULL host: bound to nothing (sent on unchanged, or blocked) */
	assert_int_equal(ab_secrets_rewrite_head(secs, NSECS, NULL, 443,
						 S(GET("/") "Host: x\r\nX-Api-Key: " PHA END END),
						 &out, &outlen, &res),
			 0);
	assert_false(res.blocked);
	assert_int_equal(res.elsewhere, 1);
	assert_string_equal(out, GET("/") "Host: x\r\nX-Api-Key: " PHA END END);
	ab_secrets_wipe_free(out, outlen);
	refuse_elsewhere(true);
	assert_int_equal(ab_secrets_rewrite_head(secs, NSECS, NULL, 443,
						 S(GET("/") "Host: x\r\nX-Api-Key: " PHA END END),
						 &out, &outlen, &res),
			 0);
	assert_true(res.blocked);
	assert_string_equal(res.where, "header:x-api-key");
	refuse_elsewhere(false);
}

/* A 4 KiB value swapped into a 900-placeholder header grows past 1 MiB. */
static void test_rewrite_too_big(void **state)
{
	ab_secret big;
	char *value = malloc(AB_SECRET_VALUE_MAX + 1), *head = malloc(64 * 1024), *out;
	size_t n = 0, outlen;
	ab_swap_result res;
	ab_err err = {0};

	memset(value, 'v', AB_SECRET_VALUE_MAX);
	value[AB_SECRET_VALUE_MAX] = '\0';
	mk(&big, "BIG", value, "PHZ_zzzzzzzzzzzzzzzzzzzzzz", "api.test", NULL);
	n += (size_t)sprintf(head, GET("/") HA "Authorization: ");
	for (int i = 0; i < 300; i++)
		n += (size_t)sprintf(head + n, "PHZ_zzzzzzzzzzzzzzzzzzzzzz ");
	n += (size_t)sprintf(head + n, "\r\n\r\n");
	assert_int_equal(
		ab_secrets_rewrite_head(&big, 1, "api.test", 443, head, n, &out, &outlen, &res),
		-E2BIG);
	assert_null(out);
	(void)err;
	ab_secret_free(&big);
	free(value);
	free(head);
}

static void test_explain(void **state)
{
	ab_swap_result r = {.blocked = true, .secret = "GH"};
	char buf[512];
	static const struct {
		const char *place, *where, *needle;
	} cases[] = {
		{"host:evil.test", "header:authorization", "add it to secrets.GH.hosts"},
		{"header:x-foo", "header:x-foo",
		 "is in the header x-foo, where it may not be placed.\nTo allow that, add "
		 "\"header:x-foo\" to secrets.GH.in"},
		{"query", "query", "add \"query\" to secrets.GH.in"},
		{"body", "body", "add \"body\" to secrets.GH.in"},
		{"body (length differs)", "body (length differs)", "placeholder length"},
		{"path", "path", "is in the URL path; a secret is never placed there"},
		{"header-name", "header-name", "in the name of a header"},
		{"host:evil.test", "query", "(in the URL query) was sent to evil.test"},
		{"host:evil.test", "body", "set secrets.GH.elsewhere to \"forward\""},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		snprintf(r.place, sizeof(r.place), "%s", cases[i].place);
		snprintf(r.where, sizeof(r.where), "%s", cases[i].where);
		ab_swap_explain(&r, buf, sizeof(buf));
		if (!strstr(buf, cases[i].needle))
			fail_msg("%s", buf);
		for (char *p = buf; *p; p++)
			assert_true(*p == '\n' || (*p >= 0x20 && *p < 0x7f));
	}
	ab_swap_explain(&r, buf, 10);
	assert_int_equal(strlen(buf), 9);
	r.blocked = false;
	ab_swap_explain(&r, buf, sizeof(buf));
	assert_string_equal(buf, "");
}

/* ================================================================ scanner */

/* Naive reference: each byte covered by a match takes the replacement of
 * the covering match that starts first (the longest one on a tie). */
static void naive(const ab_scan_pattern *p, size_t np, const char *in, size_t n, char *out)
{
	size_t maxlen = 0;

	for (size_t i = 0; i < np; i++)
		maxlen = p[i].len > maxlen ? p[i].len : maxlen;
	for (size_t j = 0; j < n; j++) {
		size_t best = SIZE_MAX, bstart = 0;
		out[j] = in[j];
		for (size_t q = j + 1; q-- > 0 && q + maxlen > j;) {
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
		}
		if (best != SIZE_MAX)
			out[j] = p[best].repl ? p[best].repl[j - bstart] : '*';
	}
}

/* Longest suffix of IN[0..N) that is a proper prefix of a pattern. */
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

/* Scan IN split at the points of CUTS (sorted, < n); returns the output
 * length (== n unless blocked) and checks the hold-back after each feed
 * (when HOLD and P is given). */
static size_t run_split_x(const ab_scan_set *set, const ab_scan_pattern *p, size_t np, bool hold,
			  const char *in, size_t n, const size_t *cuts, size_t ncuts, char *out,
			  bool *blocked)
{
	ab_scanner s;
	size_t o = 0, prev = 0;
	ab_scan_hit hit;

	*blocked = false;
	assert_int_equal(ab_scanner_init(&s, set), 0);
	for (size_t c = 0; c <= ncuts; c++) {
		size_t end = c < ncuts ? cuts[c] : n, cap = end - prev + ab_scanner_pending(&s);
		int r = ab_scanner_feed(&s, in + prev, end - prev, out + o, &cap, &hit);
		assert_true(r == 0 || r == 1);
		o += cap;
		if (r == 1) {
			*blocked = true;
			assert_true(hit.blocked);
			if (p)
				assert_true(hit.offset + p[hit.pattern].len <= end);
			assert_true(o <= hit.offset);
			cap = 100;
			assert_int_equal(ab_scanner_feed(&s, "x", 1, out, &cap, &hit), -EPIPE);
			assert_int_equal(ab_scanner_flush(&s, out, &cap, &hit), -EPIPE);
			ab_scanner_free(&s);
			return o;
		}
		if (p && hold)
			assert_int_equal(ab_scanner_pending(&s), naive_hold(p, np, in, end));
		assert_int_equal(o + ab_scanner_pending(&s), end);
		prev = end;
	}
	size_t cap = ab_scanner_pending(&s);
	assert_int_equal(ab_scanner_flush(&s, out + o, &cap, NULL), 0);
	o += cap;
	assert_int_equal(ab_scanner_pending(&s), 0);
	ab_scanner_free(&s);
	return o;
}

static size_t run_split(const ab_scan_set *set, const ab_scan_pattern *p, size_t np, const char *in,
			size_t n, const size_t *cuts, size_t ncuts, char *out, bool *blocked)
{
	return run_split_x(set, p, np, true, in, n, cuts, ncuts, out, blocked);
}

typedef struct {
	const char *pats[4];
	const char *repls[4]; /* NULL: '*' */
	const char *in;
	const char *want;
} scan_case;

// clang-format off
static const scan_case scan_cases[] = {
	{ { "abcd" }, { "WXYZ" }, "xxabcdyy", "xxWXYZyy" },
	{ { "abcd" }, { "WXYZ" }, "abcd", "WXYZ" },
	{ { "abcd" }, { "WXYZ" }, "abcdabcd", "WXYZWXYZ" },
	{ { "abcd" }, { NULL }, "xabcabcdx", "xabc****x" },
	{ { "abcd" }, { "WXYZ" }, "abc", "abc" },
	{ { "abcd" }, { "WXYZ" }, "", "" },
	{ { "abc", "bcd" }, { "XYZ", "123" }, "abcd", "XYZ3" },     /* overlap: union */
	{ { "bcd", "abc" }, { "123", "XYZ" }, "abcd", "XYZ3" },
	{ { "ab", "abcd" }, { "12", "WXYZ" }, "abcd", "WXYZ" },     /* longest at a start */
	{ { "ab", "abcd" }, { "12", "WXYZ" }, "abcx", "12cx" },
	{ { "abcd", "bc" }, { "WXYZ", "12" }, "abcd", "WXYZ" },     /* nested */
	{ { "abcd", "bc" }, { "WXYZ", "12" }, "abce", "a12e" },
	{ { "aaa" }, { "XYZ" }, "aaaaa", "XYZZZ" },
	{ { "aab" }, { "XYZ" }, "aaaab", "aaXYZ" },
	{ { "a" }, { "*" }, "banana", "b*n*n*" },
	{ { "abab" }, { "1234" }, "abababab", "12343434" },
	{ { "\xff\xfex" }, { "ABC" }, "q\xff\xfe", "q\xff\xfe" },
	{ { "\xff\xfex" }, { "ABC" }, "\xff\xff\xfe" "x\x80", "\xff" "ABC\x80" },
};
// clang-format on

static void make_pats(const scan_case *c, ab_scan_pattern *p, size_t *np)
{
	*np = 0;
	for (size_t i = 0; i < 4 && c->pats[i]; i++) {
		p[i] = (ab_scan_pattern){.bytes = c->pats[i],
					 .len = strlen(c->pats[i]),
					 .repl = c->repls[i],
					 .id = (unsigned)i};
		(*np)++;
	}
}

static void test_scan_table(void **state)
{
	char out[64], ref[64];

	for (size_t t = 0; t < sizeof(scan_cases) / sizeof(scan_cases[0]); t++) {
		const scan_case *c = &scan_cases[t];
		ab_scan_pattern p[4];
		ab_scan_set *set;
		ab_err err = {0};
		size_t np, n = strlen(c->in);
		bool blocked;

		make_pats(c, p, &np);
		assert_int_equal(ab_scan_set_new(p, np, &set, &err), 0);
		naive(p, np, c->in, n, ref);
		if (memcmp(ref, c->want, n) != 0)
			fail_msg("reference disagrees with case %zu", t);
		/* one shot, then every single and every pair of split points */
		assert_int_equal(run_split(set, p, np, c->in, n, NULL, 0, out, &blocked), n);
		if (memcmp(out, c->want, n) != 0)
			fail_msg("case %zu: %.*s != %s", t, (int)n, out, c->want);
		for (size_t a = 0; a <= n; a++)
			for (size_t b = a; b <= n; b++) {
				size_t cuts[2] = {a, b};
				assert_int_equal(
					run_split(set, p, np, c->in, n, cuts, 2, out, &blocked), n);
				assert_memory_equal(out, c->want, n);
			}
		ab_scan_set_free(set);
	}
}

/* Hold back only what could still start a match. */
static void test_scan_holdback(void **state)
{
	const ab_scan_pattern p = {.bytes = "abdef", .len = 5, .repl = "12345"};
	ab_scan_set *set;
	ab_scanner s;
	ab_err err = {0};
	char out[32];
	size_t cap;

	assert_int_equal(ab_scan_set_new(&p, 1, &set, &err), 0);
	assert_int_equal(ab_scanner_init(&s, set), 0);
	cap = sizeof(out);
	assert_int_equal(ab_scanner_feed(&s, S("xyzab"), out, &cap, NULL), 0);
	assert_int_equal(cap, 3);
	assert_memory_equal(out, "xyz", 3);
	assert_int_equal(ab_scanner_pending(&s), 2); /* "ab" */
	cap = sizeof(out);
	assert_int_equal(ab_scanner_feed(&s, S("c"), out, &cap, NULL), 0);
	assert_int_equal(cap, 3);
	assert_memory_equal(out, "abc", 3); /* "abc": not "abd", nothing held */
	assert_int_equal(ab_scanner_pending(&s), 0);
	cap = sizeof(out);
	assert_int_equal(ab_scanner_feed(&s, S("data: {\"x\":1}\n\n"), out, &cap, NULL), 0);
	assert_int_equal(cap, sizeof("data: {\"x\":1}\n\n") - 1); /* SSE-like: nothing delayed */
	cap = sizeof(out);
	assert_int_equal(ab_scanner_feed(&s, S("abd"), out, &cap, NULL), 0);
	assert_int_equal(cap, 0);
	assert_int_equal(ab_scanner_pending(&s), 3);
	/* capacity: N + pending */
	cap = 4;
	assert_int_equal(ab_scanner_feed(&s, S("ef"), out, &cap, NULL), -ENOBUFS);
	cap = 5;
	assert_int_equal(ab_scanner_feed(&s, S("e"), out, &cap, NULL), 0);
	assert_int_equal(cap, 0);
	cap = 3;
	assert_int_equal(ab_scanner_flush(&s, out, &cap, NULL), -ENOBUFS);
	cap = 4;
	assert_int_equal(ab_scanner_flush(&s, out, &cap, NULL), 0);
	assert_int_equal(cap, 4);
	assert_memory_equal(out, "abde", 4); /* released as is */
	/* after a flush a pattern does not continue across the boundary */
	cap = sizeof(out);
	assert_int_equal(ab_scanner_feed(&s, S("abde"), out, &cap, NULL), 0);
	cap = sizeof(out);
	assert_int_equal(ab_scanner_flush(&s, out, &cap, NULL), 0);
	cap = sizeof(out);
	assert_int_equal(ab_scanner_feed(&s, S("f"), out, &cap, NULL), 0);
	assert_int_equal(cap, 1);
	assert_int_equal(out[0], 'f');
	assert_int_equal(ab_scanner_count(&s, 0), 0);
	cap = sizeof(out);
	assert_int_equal(ab_scanner_feed(&s, S("abdef"), out, &cap, NULL), 0);
	assert_memory_equal(out, "12345", 5);
	assert_int_equal(ab_scanner_count(&s, 0), 1);
	assert_int_equal(ab_scanner_count(&s, 7), 0);
	ab_scanner_free(&s);
	ab_scan_set_free(set);
}

static void test_scan_block(void **state)
{
	const ab_scan_pattern p[] = {
		{.bytes = "SECRET", .len = 6, .action = AB_SCAN_BLOCK, .id = 7},
		{.bytes = "abc", .len = 3, .repl = "xyz", .id = 1},
	};
	const char *in = "abc..SECabcRET..SECRET.abc";
	size_t n = strlen(in);
	ab_scan_set *set;
	ab_err err = {0};
	char out[64], ref[64];
	bool blocked;

	assert_int_equal(ab_scan_set_new(p, 2, &set, &err), 0);
	size_t want = run_split(set, p, 2, in, n, NULL, 0, ref, &blocked);
	assert_true(blocked);
	assert_int_equal(want, 16);
	assert_memory_equal(ref, "xyz..SECxyzRET..", 16);
	for (size_t a = 0; a <= n; a++) {
		size_t cuts[1] = {a};
		assert_int_equal(run_split(set, p, 2, in, n, cuts, 1, out, &blocked), want);
		assert_true(blocked);
		assert_memory_equal(out, ref, want);
	}
	/* one byte at a time: the hit says which and where */
	ab_scanner s;
	ab_scan_hit hit;
	size_t cap;
	assert_int_equal(ab_scanner_init(&s, set), 0);
	for (size_t i = 0; i < n; i++) {
		cap = 8;
		int r = ab_scanner_feed(&s, in + i, 1, out, &cap, &hit);
		if (r == 1) {
			assert_int_equal(i, 21);
			assert_int_equal(hit.id, 7);
			assert_int_equal(hit.pattern, 0);
			assert_int_equal(hit.offset, 16);
			break;
		}
		assert_int_equal(r, 0);
	}
	ab_scanner_free(&s);
	ab_scan_set_free(set);
}

static void test_scan_set_limits(void **state)
{
	ab_scan_pattern p[2] = {{.bytes = "a", .len = 1}, {.bytes = "", .len = 0}};
	ab_scan_set *set = (ab_scan_set *)1;
	ab_err err = {0};
	char *big = calloc(1, AB_SCAN_MAX_PATTERN_LEN + 1);

	assert_int_equal(ab_scan_set_new(p, 2, &set, &err), -EINVAL);
	assert_null(set);
	p[1] = (ab_scan_pattern){.bytes = big, .len = AB_SCAN_MAX_PATTERN_LEN + 1};
	assert_int_equal(ab_scan_set_new(p, 2, &set, &err), -E2BIG);
	p[1].len = AB_SCAN_MAX_PATTERN_LEN;
	assert_int_equal(ab_scan_set_new(p, 2, &set, &err), 0);
	assert_int_equal(ab_scan_set_maxlen(set), AB_SCAN_MAX_PATTERN_LEN);
	ab_scan_set_free(set);
	assert_int_equal(ab_scan_set_new(p, AB_SCAN_MAX_PATTERNS + 1, &set, &err), -E2BIG);
	p[1].action = (ab_scan_action)5;
	assert_int_equal(ab_scan_set_new(p, 2, &set, &err), -EINVAL);
	/* duplicates: BLOCK wins */
	ab_scan_pattern d[2] = {{.bytes = "dup", .len = 3, .repl = "DUP"},
				{.bytes = "dup", .len = 3, .action = AB_SCAN_BLOCK, .id = 9}};
	assert_int_equal(ab_scan_set_new(d, 2, &set, &err), 0);
	assert_int_equal(ab_scan_set_count(set), 2);
	char out[8];
	bool blocked;
	assert_int_equal(run_split(set, NULL, 0, "xdup", 4, NULL, 0, out, &blocked), 1);
	assert_true(blocked);
	ab_scan_set_free(set);
	/* empty set: a copy */
	assert_int_equal(ab_scan_set_new(NULL, 0, &set, &err), 0);
	assert_int_equal(run_split(set, NULL, 0, "abc", 3, NULL, 0, out, &blocked), 3);
	assert_memory_equal(out, "abc", 3);
	ab_scan_set_free(set);
	free(big);
}

/* In place (out == in) when nothing is pending. */
static void test_scan_inplace(void **state)
{
	const ab_scan_pattern p = {.bytes = "key", .len = 3, .repl = "KEY"};
	char buf[] = "a key, a ke";
	ab_scan_set *set;
	ab_scanner s;
	ab_err err = {0};
	size_t cap = sizeof(buf) - 1, tail;

	assert_int_equal(ab_scan_set_new(&p, 1, &set, &err), 0);
	assert_int_equal(ab_scanner_init(&s, set), 0);
	assert_int_equal(ab_scanner_feed(&s, buf, sizeof(buf) - 1, buf, &cap, NULL), 0);
	assert_int_equal(cap, sizeof(buf) - 3);
	tail = 2;
	assert_int_equal(ab_scanner_flush(&s, buf + cap, &tail, NULL), 0);
	assert_string_equal(buf, "a KEY, a ke");
	ab_scanner_free(&s);
	ab_scan_set_free(set);
}

static uint32_t rng_state = 12345;
static uint32_t rnd(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 17;
	rng_state ^= rng_state << 5;
	return rng_state;
}

/* Random patterns over tiny alphabets (lots of overlaps) against the
 * reference, with up to 40 random splits. */
static void test_scan_random(void **state)
{
	char pb[6][8], rb[6][8], in[200], out[200], ref[200];

	for (int iter = 0; iter < 6000; iter++) {
		ab_scan_pattern p[6];
		size_t np = 1 + rnd() % 6, n = rnd() % 200, cuts[40], nc = rnd() % 40;
		unsigned abc = 2 + (unsigned)iter % 6; /* alphabet size: 2..7 */
		ab_scan_set *set;
		ab_err err = {0};
		bool blocked;

		for (size_t i = 0; i < np; i++) {
			size_t l = 1 + rnd() % 7;
			for (size_t k = 0; k < l; k++) {
				pb[i][k] = (char)('a' + rnd() % abc);
				rb[i][k] = (char)('0' + i);
			}
			p[i] = (ab_scan_pattern){
				.bytes = pb[i], .len = l, .repl = rnd() % 4 ? rb[i] : NULL};
		}
		for (size_t k = 0; k < n; k++)
			in[k] = (char)('a' + rnd() % abc);
		for (size_t k = 0; k < nc; k++)
			cuts[k] = n ? rnd() % (n + 1) : 0;
		for (size_t a = 0; a < nc; a++) /* sort */
			for (size_t b = a + 1; b < nc; b++)
				if (cuts[b] < cuts[a]) {
					size_t t = cuts[a];
					cuts[a] = cuts[b];
					cuts[b] = t;
				}
		assert_int_equal(ab_scan_set_new(p, np, &set, &err), 0);
		naive(p, np, in, n, ref);
		assert_int_equal(run_split(set, p, np, in, n, cuts, nc, out, &blocked), n);
		assert_memory_equal(out, ref, n);
		ab_scan_set_free(set);
	}
}

/* The skip-ahead filter (patterns of 4+ bytes): random and planted
 * patterns sharing prefixes, overlapping and nested, over tiny alphabets
 * and over all 256 byte values, shortest patterns below and above the
 * skip window's cap, against the reference at random split points. */
static void test_scan_skip(void **state)
{
	enum { NP = 8, PL = 300, N = 1200 };
	static char pb[NP][PL], rb[NP][PL], in[N], out[N], ref[N];

	for (int iter = 0; iter < 3000; iter++) {
		ab_scan_pattern p[NP];
		size_t np = 1 + rnd() % NP, n = rnd() % N, cuts[40], nc = rnd() % 40;
		unsigned abc = iter % 4 == 3 ? 256 : 2 + (unsigned)iter % 3;
		size_t minl = iter % 50 == 7 ? 256 : 4, span = iter % 50 == 7 ? 40 : 36;
		ab_scan_set *set;
		ab_err err = {0};
		bool blocked;

		for (size_t i = 0; i < np; i++) {
			size_t l = minl + rnd() % span, k = 0;
			if (i && rnd() % 2) { /* share a prefix (or all) of an earlier one */
				size_t j = rnd() % i;
				k = rnd() % (p[j].len + 1);
				if (k > l)
					k = l;
				memcpy(pb[i], pb[j], k);
			}
			for (; k < l; k++)
				pb[i][k] = (char)(abc == 256 ? rnd() % 256 : 'a' + rnd() % abc);
			for (k = 0; k < l; k++)
				rb[i][k] = (char)('0' + i);
			p[i] = (ab_scan_pattern){
				.bytes = pb[i], .len = l, .repl = rnd() % 4 ? rb[i] : NULL};
		}
		for (size_t k = 0; k < n; k++)
			in[k] = (char)(abc == 256 ? rnd() % 256 : 'a' + rnd() % abc);
		for (size_t m = rnd() % 6; m-- > 0 && n;) { /* plant whole or partial copies */
			size_t i = rnd() % np, at = rnd() % n, l = p[i].len;
			if (rnd() % 3 == 0)
				l = rnd() % l;
			if (at + l > n)
				l = n - at;
			memcpy(in + at, p[i].bytes, l);
		}
		for (size_t k = 0; k < nc; k++)
			cuts[k] = n ? rnd() % (n + 1) : 0;
		for (size_t a = 0; a < nc; a++)
			for (size_t b = a + 1; b < nc; b++)
				if (cuts[b] < cuts[a]) {
					size_t t = cuts[a];
					cuts[a] = cuts[b];
					cuts[b] = t;
				}
		assert_int_equal(ab_scan_set_new(p, np, &set, &err), 0);
		naive(p, np, in, n, ref);
		assert_int_equal(run_split(set, p, np, in, n, cuts, nc, out, &blocked), n);
		assert_memory_equal(out, ref, n);
		ab_scan_set_free(set);
	}
}

/* Inputs that defeat the skip (every window ends in a 2-gram of a
 * pattern, every position starts a prefix) are still scanned exactly. */
static void test_scan_skip_adversarial(void **state)
{
	static char in[20000], out[20000], ref[20000];
	const char *pats[] = {"aaaaaaaaaaaaaaaaaaab", "aaaaaaaaab", "abababababababx",
			      "baaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"};
	ab_scan_pattern p[4];
	ab_scan_set *set;
	ab_err err = {0};
	bool blocked;

	for (size_t i = 0; i < 4; i++)
		p[i] = (ab_scan_pattern){.bytes = pats[i], .len = strlen(pats[i])};
	assert_int_equal(ab_scan_set_new(p, 4, &set, &err), 0);
	for (int kind = 0; kind < 3; kind++) {
		size_t n = sizeof(in);
		for (size_t k = 0; k < n; k++)
			in[k] = kind == 0 ? 'a' : kind == 1 ? "ab"[k % 2] : (k % 97 ? 'a' : 'b');
		size_t cuts[3] = {1, 4097, 16385};
		naive(p, 4, in, n, ref);
		assert_int_equal(run_split(set, p, 4, in, n, cuts, 3, out, &blocked), n);
		assert_memory_equal(out, ref, n);
	}
	ab_scan_set_free(set);
}

/* ======================================================= response masking */

/* Mask BUF[0..N) with SET, every split point; returns the one-shot result. */
static char *mask_all(const ab_scan_set *set, const char *in, size_t n)
{
	char *one = malloc(n + 1), *other = malloc(n + 1);
	bool blocked;

	assert_int_equal(run_split(set, NULL, 0, in, n, NULL, 0, one, &blocked), n);
	for (size_t a = 0; a <= n; a++) {
		size_t cuts[1] = {a};
		assert_int_equal(run_split(set, NULL, 0, in, n, cuts, 1, other, &blocked), n);
		assert_memory_equal(one, other, n);
	}
	one[n] = '\0';
	free(other);
	return one;
}

/* No window of OUT decodes (base64, at any of the 4 offsets) to VALUE. */
static bool b64_leaks(const char *out, size_t n, const char *value, bool url)
{
	unsigned char dec[2048];
	char tmp[2048];

	for (size_t off = 0; off < 4 && off < n; off++) {
		size_t m = 0;
		for (size_t k = off; k < n; k++) {
			char c = out[k];
			if (url && c == '-')
				c = '+';
			else if (url && c == '_')
				c = '/';
			tmp[m++] = strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
					  "0123456789+/",
					  c) && c
					   ? c
					   : 'A';
		}
		m -= m % 4;
		size_t d = b64dec(tmp, m, dec);
		if (memmem(dec, d, value, strlen(value)))
			return true;
	}
	return false;
}

static void test_mask_response(void **state)
{
	ab_secret ms[2];
	ab_scan_set *set;
	ab_err err = {0};
	char buf[1024], enc[512], pre[64];
	static const char V0[] = "sk-live-0123456789abcdefXYZ"; /* 27 bytes */
	static const char P0[] = "sk-PHPHPHPHPHPHPHPHPHPHPHPH"; /* 27 bytes */
	static const char V1[] = "p\"a/s\\s+w?o&r d~";          /* needs escaping */
	static const char P1[] = "P1_11111111111111111111111";

	mk(&ms[0], "M0", V0, P0, "api.test", NULL);
	mk(&ms[1], "M1", V1, P1, "api.test", NULL);
	assert_int_equal(ab_secrets_response_set(ms, 2, &set, &err), 0);
	assert_true(ab_scan_set_count(set) > 10);

	/* raw: replaced by the placeholder (same length) */
	snprintf(buf, sizeof(buf), "{\"echo\":\"Bearer %s\"}", V0);
	char *m = mask_all(set, buf, strlen(buf));
	snprintf(enc, sizeof(enc), "{\"echo\":\"Bearer %s\"}", P0);
	assert_string_equal(m, enc);
	free(m);

	/* base64 of prefix + value + suffix, every alignment, both alphabets */
	for (int url = 0; url <= 1; url++)
		for (size_t pl = 0; pl < 6; pl++) {
			memset(pre, 'u', pl);
			pre[pl] = '\0';
			char plain[128];
			int k = snprintf(plain, sizeof(plain), "%s:%s%s", pre, V0,
					 pl % 2 ? "!" : "");
			b64enc((const unsigned char *)plain, (size_t)k, enc, url);
			snprintf(buf, sizeof(buf), "Authorization: Basic %s\r\n", enc);
			assert_true(b64_leaks(buf, strlen(buf), V0, url));
			m = mask_all(set, buf, strlen(buf));
			assert_int_equal(strlen(m), strlen(buf));
			if (b64_leaks(m, strlen(m), V0, url))
				fail_msg("url %d prefix %zu: %s", url, pl, m);
			/* at most 4 bits of the value survive at each edge: no 4+ chars */
			assert_false(b64_leaks(m, strlen(m), "0123", url));
			free(m);
		}
	/* the standalone encoding becomes the placeholder's */
	b64enc((const unsigned char *)V0, strlen(V0), enc, false);
	char penc[128];
	b64enc((const unsigned char *)P0, strlen(P0), penc, false);
	m = mask_all(set, enc, strlen(enc));
	assert_string_equal(m, penc);
	free(m);

	/* percent-encoded (both cases) and JSON-escaped forms of V1 */
	static const char *const forms[] = {
		"x=p%22a%2Fs%5Cs%2Bw%3Fo%26r%20d~&y",
		"x=p%22a%2fs%5cs%2bw%3fo%26r%20d~&y",
		"{\"k\":\"p\\\"a/s\\\\s+w?o&r d~\"}",
		"{\"k\":\"p\\\"a\\/s\\\\s+w?o&r d~\"}",
	};
	for (size_t i = 0; i < sizeof(forms) / sizeof(forms[0]); i++) {
		m = mask_all(set, forms[i], strlen(forms[i]));
		assert_int_equal(strlen(m), strlen(forms[i]));
		assert_false(contains(m, strlen(m), "o%26r"));
		assert_false(contains(m, strlen(m), "w?o&r"));
		assert_non_null(strstr(m, "****"));
		free(m);
	}
	/* the raw V1 becomes P1? no: lengths differ, so stars */
	m = mask_all(set, V1, strlen(V1));
	assert_string_equal(m, "****************");
	free(m);
	/* a stream without any of it is untouched and never held */
	m = mask_all(set, "data: hello world\n\n", 19);
	assert_string_equal(m, "data: hello world\n\n");
	free(m);
	ab_scan_set_free(set);
	for (int i = 0; i < 2; i++)
		ab_secret_free(&ms[i]);
}

/* A placeholder whose tail is the value's head (as fuzz_secrets found:
 * "ghp_gg...g" for "ghp_RE...12"): the value, then the value without its
 * first byte, masked, must not read as the value.  The broker draws such a
 * placeholder again; a set built with it anyway masks with a filler. */
static void test_mask_no_rebuild(void **state)
{
	ab_secret ms[2];
	ab_scan_set *set;
	ab_err err = {0};
	static const char V[] = "ghp_REALREALREALREALREAL12";
	static const char P[] = "ghp_gggggggggggggggggggggg"; /* ends in 'g': V's head */
	static const char Q[] = "ghp_gggggggggggggggggggggQ"; /* ends in 'Q': no pattern's head */

	mk(&ms[0], "G", V, P, "api.test", NULL);
	assert_int_equal(ab_secrets_mask_conflict(ms, 1, 0), 0);
	assert_int_equal(ab_secrets_mask_conflict(ms, 1, 1), -1); /* skipped */
	assert_int_equal(ab_secrets_response_set(ms, 1, &set, &err), 0);
	char in[128];
	snprintf(in, sizeof(in), "x%s%s!", V, V + 1);
	char *m = mask_all(set, in, strlen(in));
	assert_int_equal(strlen(m), strlen(in));
	if (contains(m, strlen(m), V))
		fail_msg("the value was rebuilt: %s", m);
	assert_non_null(strstr(m, "**************************")); /* the filler, not P */
	free(m);
	ab_scan_set_free(set);
	ab_secret_free(&ms[0]);

	/* a placeholder that cannot: kept, and the same input stays clean */
	mk(&ms[0], "G", V, Q, "api.test", NULL);
	mk(&ms[1], "H", "sk-other-0123456789abcdefXY", "sk-PHPHPHPHPHPHPHPHPHPHPHQ", "api.test",
	   NULL);
	assert_int_equal(ab_secrets_mask_conflict(ms, 2, 0), -1);
	assert_int_equal(ab_secrets_response_set(ms, 2, &set, &err), 0);
	m = mask_all(set, in, strlen(in));
	assert_false(contains(m, strlen(m), V));
	assert_non_null(strstr(m, Q));
	free(m);
	ab_scan_set_free(set);
	for (int i = 0; i < 2; i++)
		ab_secret_free(&ms[i]);
}

static void test_body_set(void **state)
{
	ab_scan_set *set;
	ab_err err = {0};
	ab_scanner s;
	ab_scan_hit hit;
	ab_swap_result res;
	char out[256];
	const char *body = "{\"token\":\"" PHG "\"}";
	size_t n = strlen(body), cap;
	ab_secret odd;

	/* bound and "body": replaced, same length */
	assert_int_equal(ab_secrets_body_set(secs, NSECS, "github.test", 443, &set, &err), 0);
	assert_int_equal(ab_scanner_init(&s, set), 0);
	cap = sizeof(out);
	assert_int_equal(ab_scanner_feed(&s, body, n, out, &cap, &hit), 0);
	assert_int_equal(cap, n);
	assert_int_equal(hit.replaced, 1);
	assert_memory_equal(out, "{\"token\":\"" VG "\"}", n);
	assert_int_equal(ab_scanner_count(&s, 3), 1);
	ab_scanner_free(&s);
	ab_scan_set_free(set);

	/* unbound host: replaced by itself (unchanged, counted) */
	assert_true(ab_secret_forwards_elsewhere(&secs[3], "evil.test", 443));
	assert_int_equal(ab_secrets_body_set(secs, NSECS, "evil.test", 443, &set, &err), 0);
	assert_int_equal(ab_scanner_init(&s, set), 0);
	cap = sizeof(out);
	assert_int_equal(ab_scanner_feed(&s, body, n, out, &cap, &hit), 0);
	size_t more = sizeof(out) - cap;
	assert_int_equal(ab_scanner_flush(&s, out + cap, &more, &hit), 0);
	assert_int_equal(cap + more, n);
	assert_memory_equal(out, body, n);
	assert_int_equal(ab_scanner_count(&s, 3), 1);
	ab_scanner_free(&s);
	ab_scan_set_free(set);

	/* ... and with refuse_elsewhere: BLOCK, the explanation names the host */
	secs[3].refuse_elsewhere = true;
	assert_int_equal(ab_secrets_body_set(secs, NSECS, "evil.test", 443, &set, &err), 0);
	assert_int_equal(ab_scanner_init(&s, set), 0);
	cap = sizeof(out);
	assert_int_equal(ab_scanner_feed(&s, body, n, out, &cap, &hit), 1);
	assert_int_equal(cap, 10); /* what came before it, not a byte of it */
	assert_memory_equal(out, "{\"token\":\"", 10);
	ab_secrets_body_blocked(secs, NSECS, "evil.test", 443, &hit, &res);
	assert_true(res.blocked);
	assert_string_equal(res.secret, "GIT_TOKEN");
	assert_string_equal(res.place, "host:evil.test");
	assert_string_equal(res.where, "body");
	ab_scanner_free(&s);
	ab_scan_set_free(set);
	secs[3].refuse_elsewhere = false;

	/* bound, but "body" not allowed */
	assert_int_equal(ab_secrets_body_set(secs, NSECS, "api.test", 443, &set, &err), 0);
	assert_int_equal(ab_scanner_init(&s, set), 0);
	cap = sizeof(out);
	assert_int_equal(ab_scanner_feed(&s, S("x=" PHA), out, &cap, &hit), 1);
	ab_secrets_body_blocked(secs, NSECS, "api.test", 443, &hit, &res);
	assert_string_equal(res.place, "body");
	assert_string_equal(res.secret, "TOKEN_A");
	ab_scanner_free(&s);
	ab_scan_set_free(set);

	/* allowed, but the placeholder is longer than the value */
	mk(&odd, "ODD", "short", "PHO_oooooooooooooooooooooo", "api.test", "body");
	assert_int_equal(ab_secrets_body_set(&odd, 1, "api.test", 443, &set, &err), 0);
	assert_int_equal(ab_scanner_init(&s, set), 0);
	cap = sizeof(out);
	assert_int_equal(ab_scanner_feed(&s, S("PHO_oooooooooooooooooooooo"), out, &cap, &hit), 1);
	ab_secrets_body_blocked(&odd, 1, "api.test", 443, &hit, &res);
	assert_string_equal(res.place, "body (length differs)");
	ab_scanner_free(&s);
	ab_scan_set_free(set);
	ab_secret_free(&odd);
	ab_secrets_body_blocked(secs, NSECS, "api.test", 443, NULL, &res);
	assert_true(res.blocked);
}

/* Feed BODY to a scanner of SET in one go (split = 0) or byte by byte, then
 * flush; the output and the scanner's verdict.  Returns 1 when blocked. */
static int scan_all(const ab_scan_set *set, const char *body, size_t n, bool split, char *out,
		    size_t *outlen, ab_scanner *s, ab_scan_hit *hit)
{
	size_t o = 0, cap;
	int r = 0;

	assert_int_equal(ab_scanner_init(s, set), 0);
	for (size_t i = 0; r == 0 && i < n; i += split ? 1 : n) {
		cap = 8192 - o;
		r = ab_scanner_feed(s, body + i, split ? 1 : n, out + o, &cap, hit);
		o += cap;
	}
	if (r == 0) {
		cap = 8192 - o;
		assert_int_equal(ab_scanner_flush(s, out + o, &cap, hit), 0);
		o += cap;
	}
	*outlen = o;
	return r;
}

static void test_body_mask(void **state)
{
	ab_scan_set *set;
	ab_err err = {0};
	ab_scanner s;
	ab_scan_hit hit;
	ab_swap_result res;
	char out[8192], m[64], *head = NULL;
	size_t n, olen = 0;
	ab_secret ms[4];

#define PHM "PHM_mmmmmmmmmmmmmmmmmmmmmm"
#define VM "real-M-0123456789abcdefghi"
#define MASKM "agentbox-masked***********"
	/* the mask: the text then '*', only '*' when the placeholder is shorter */
	ab_secret_mask(m, 0);
	memset(m, 'x', sizeof(m));
	ab_secret_mask(m, 14);
	assert_memory_equal(m, "**************x", 15);
	ab_secret_mask(m, 15);
	assert_memory_equal(m, "agentbox-maskedx", 16);
	ab_secret_mask(m, 26);
	assert_memory_equal(m, MASKM "x", 27);

	/* M: default places (headers), mask_in_body; W: also "body" (swap wins);
	 * L: "body" but a longer placeholder (still blocked: mask changes nothing);
	 * O: mask_in_body, bound elsewhere */
	mk(&ms[0], "M", VM, PHM, "api.test", NULL);
	ms[0].mask_in_body = true;
	mk(&ms[1], "W", "real-W-0123456789abcdefghi", "PHW_wwwwwwwwwwwwwwwwwwwwww", "api.test",
	   "body");
	ms[1].mask_in_body = true;
	mk(&ms[2], "L", "short", "PHL_llllllllllllllllllllll", "api.test", "body");
	ms[2].mask_in_body = true;
	mk(&ms[3], "O", "real-O-0123456789abcdefghi", "PHO_oooooooooooooooooooooo", "other.test",
	   NULL);
	ms[3].mask_in_body = true;
	assert_true(ab_secret_masks_body(&ms[0], "api.test", 443));
	assert_true(ab_secret_masks_body(&ms[0], "api.test", 80));
	assert_false(ab_secret_masks_body(&ms[0], "api.test", 8443));
	assert_false(ab_secret_masks_body(&ms[0], "evil.test", 443));
	assert_false(ab_secret_masks_body(&ms[1], "api.test", 443));
	assert_false(ab_secret_masks_body(&ms[2], "api.test", 443));
	assert_false(ab_secret_masks_body(&ms[3], "api.test", 443));
	assert_false(ab_secret_masks_body(NULL, "api.test", 443));

	/* bound: REPLACE by the mask, same length, in any split; W swapped */
	static const char body[] =
		"{\"a\":\"" PHM "\",\"b\":\"" PHM "\",\"w\":\"PHW_wwwwwwwwwwwwwwwwwwwwww\"}";
	static const char want[] =
		"{\"a\":\"" MASKM "\",\"b\":\"" MASKM "\",\"w\":\"real-W-0123456789abcdefghi\"}";
	n = sizeof(body) - 1;
	assert_int_equal(ab_secrets_body_set(ms, 4, "api.test", 443, &set, &err), 0);
	for (int split = 0; split < 2; split++) {
		assert_int_equal(scan_all(set, body, n, split, out, &olen, &s, &hit), 0);
		assert_int_equal(olen, n);
		assert_memory_equal(out, want, n);
		assert_null(memmem(out, olen, PHM, strlen(PHM)));
		assert_null(memmem(out, olen, VM, strlen(VM)));
		assert_int_equal(ab_scanner_count(&s, 0), 2); /* pattern i is secret i */
		assert_int_equal(ab_scanner_count(&s, 1), 1);
		assert_int_equal(ab_scanner_count(&s, 2), 0);
		ab_scanner_free(&s);
	}
	/* another secret bound elsewhere: its placeholder goes on unchanged
	 * (not masked: that is for the secret's own hosts) */
	assert_int_equal(scan_all(set, S("x=" PHM "&o=PHO_oooooooooooooooooooooo"), false, out,
				  &olen, &s, &hit),
			 0);
	assert_memory_equal(out, "x=" MASKM "&o=PHO_oooooooooooooooooooooo", olen);
	assert_int_equal(ab_scanner_count(&s, 3), 1);
	ab_scanner_free(&s);
	ab_scan_set_free(set);
	/* ... unless it refuses elsewhere: then it blocks the body */
	ms[3].refuse_elsewhere = true;
	assert_int_equal(ab_secrets_body_set(ms, 4, "api.test", 443, &set, &err), 0);
	assert_int_equal(scan_all(set, S("x=" PHM "&o=PHO_oooooooooooooooooooooo"), false, out,
				  &olen, &s, &hit),
			 1);
	assert_int_equal(hit.id, 3);
	ab_secrets_body_blocked(ms, 4, "api.test", 443, &hit, &res);
	assert_string_equal(res.secret, "O");
	assert_string_equal(res.place, "host:api.test");
	ab_scanner_free(&s);
	ms[3].refuse_elsewhere = false;
	/* "body" allowed but the lengths differ: the block stands */
	assert_int_equal(
		scan_all(set, S("PHL_llllllllllllllllllllll"), false, out, &olen, &s, &hit), 1);
	ab_secrets_body_blocked(ms, 4, "api.test", 443, &hit, &res);
	assert_string_equal(res.secret, "L");
	assert_string_equal(res.place, "body (length differs)");
	ab_scanner_free(&s);
	ab_scan_set_free(set);

	/* unbound host, unbound port: unchanged (not masked) by default */
	static const struct {
		const char *host;
		unsigned port;
		const char *place;
	} unb[] = {{"evil.test", 443, "host:evil.test"}, {"api.test", 8443, "host:api.test"}};
	for (size_t i = 0; i < AB_ARRAY_SIZE(unb); i++) {
		assert_int_equal(ab_secrets_body_set(ms, 4, unb[i].host, unb[i].port, &set, &err),
				 0);
		assert_int_equal(scan_all(set, body, n, true, out, &olen, &s, &hit), 0);
		assert_int_equal(olen, n);
		assert_memory_equal(out, body, n);
		assert_int_equal(ab_scanner_count(&s, 0), 2);
		ab_scanner_free(&s);
		ab_scan_set_free(set);
	}
	/* with refuse_elsewhere: BLOCK as before */
	for (int i = 0; i < 4; i++)
		ms[i].refuse_elsewhere = true;
	for (size_t i = 0; i < AB_ARRAY_SIZE(unb); i++) {
		assert_int_equal(ab_secrets_body_set(ms, 4, unb[i].host, unb[i].port, &set, &err),
				 0);
		assert_int_equal(scan_all(set, body, n, false, out, &olen, &s, &hit), 1);
		assert_int_equal(olen, 6); /* {"a":" and not a byte of it */
		ab_secrets_body_blocked(ms, 4, unb[i].host, unb[i].port, &hit, &res);
		assert_string_equal(res.secret, "M");
		assert_string_equal(res.place, unb[i].place);
		assert_string_equal(res.where, "body");
		ab_scanner_free(&s);
		ab_scan_set_free(set);
	}

	/* a placeholder shorter than the mask text: only '*' */
	ab_secret sh;
	mk(&sh, "SH", "0123456789", "PHS_short", "api.test", NULL);
	sh.mask_in_body = true;
	assert_int_equal(ab_secrets_body_set(&sh, 1, "api.test", 443, &set, &err), 0);
	assert_int_equal(scan_all(set, S("[PHS_short]"), true, out, &olen, &s, &hit), 0);
	assert_int_equal(olen, 11);
	assert_memory_equal(out, "[*********]", 11);
	ab_scanner_free(&s);
	ab_scan_set_free(set);
	ab_secret_free(&sh);

	/* the head is not the body: headers (other than the allowed ones), the
	 * query and the path still block on the bound host */
	static const struct {
		const char *head, *place;
	} hb[] = {
		{GET("/?k=" PHM) HA END, "query"},
		{GET("/" PHM) HA END, "path"},
		{GET("/") HA "X-Foo: " PHM END END, "header:x-foo"},
	};
	for (size_t i = 0; i < AB_ARRAY_SIZE(hb); i++) {
		assert_int_equal(ab_secrets_rewrite_head(ms, 4, "api.test", 443, hb[i].head,
							 strlen(hb[i].head), &head, &olen, &res),
				 0);
		assert_true(res.blocked);
		assert_null(head);
		assert_string_equal(res.secret, "M");
		assert_string_equal(res.place, hb[i].place);
	}
	/* the 403 for a body names the way out */
	ab_swap_result br = {.blocked = true, .secret = "GH"};
	snprintf(br.place, sizeof(br.place), "body");
	snprintf(br.where, sizeof(br.where), "body");
	ab_swap_explain(&br, out, sizeof(out));
	assert_non_null(strstr(out, "add \"body\" to secrets.GH.in"));
	assert_non_null(strstr(out, "secrets.GH.mask_in_body"));
	for (int i = 0; i < 4; i++)
		ab_secret_free(&ms[i]);
#undef PHM
#undef VM
#undef MASKM
}

/* ================================================================ sources */

static void load_ok(const ab_secret_source *src, const char *want)
{
	char *v = NULL;
	size_t len = 0;
	ab_err err = {0};
	int r = ab_secret_load("S", src, &v, &len, &err);

	if (r != 0)
		fail_msg("load: %d %s", r, err.msg);
	assert_int_equal(len, strlen(want));
	assert_memory_equal(v, want, len);
	assert_int_equal(v[len], '\0');
	ab_secrets_wipe_free(v, len);
}

static void load_bad(const ab_secret_source *src, int want, const char *needle)
{
	char *v = (char *)1;
	size_t len = 7;
	ab_err err = {0};
	int r = ab_secret_load("MY_SECRET", src, &v, &len, &err);

	if (r != want)
		fail_msg("load: %d != %d (%s)", r, want, err.msg);
	assert_null(v);
	assert_int_equal(len, 0);
	assert_non_null(strstr(err.msg, "secret MY_SECRET"));
	if (needle && !strstr(err.msg, needle))
		fail_msg("'%s' not in '%s'", needle, err.msg);
	assert_null(strstr(err.msg, "hunter2")); /* never the value */
}

static void test_load_env(void **state)
{
	ab_secret_source src = {.kind = AB_SECRET_SRC_ENV, .env = "AB_TEST_SECRET_X"};

	setenv("AB_TEST_SECRET_X", "hunter2 value", 1);
	load_ok(&src, "hunter2 value");
	setenv("AB_TEST_SECRET_X", "", 1);
	load_bad(&src, -ENODATA, "AB_TEST_SECRET_X");
	setenv("AB_TEST_SECRET_X", "hunter2\x01", 1);
	load_bad(&src, -EINVAL, "control character");
	unsetenv("AB_TEST_SECRET_X");
	load_bad(&src, -ENOENT, "AB_TEST_SECRET_X is not set");
	src.env = NULL;
	load_bad(&src, -EINVAL, NULL);
	src.kind = (ab_secret_src_kind)9;
	load_bad(&src, -EINVAL, "unknown source");
}

static void write_file(const char *path, const char *data, size_t n)
{
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	assert_int_equal(fwrite(data, 1, n, f), n);
	fclose(f);
}

static void test_load_file(void **state)
{
	char dir[] = "/tmp/ab-secrets-XXXXXX", path[64];
	ab_secret_source src = {.kind = AB_SECRET_SRC_FILE, .path = path};
	char *big = malloc(AB_SECRET_FILE_MAX + 2);

	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/tok", dir);
	write_file(path, S("hunter2\n"));
	load_ok(&src, "hunter2");
	write_file(path, S("hunter2\r\n"));
	load_ok(&src, "hunter2");
	write_file(path, S("hunter2"));
	load_ok(&src, "hunter2");
	write_file(path, S("  hunter2 "));
	load_ok(&src, "  hunter2 ");
	write_file(path, S("hunter2\n\n")); /* ONE newline stripped: the other stays */
	load_bad(&src, -EINVAL, "line break");
	write_file(path, S("\n"));
	load_bad(&src, -ENODATA, path);
	write_file(path, S(""));
	load_bad(&src, -ENODATA, "is empty");
	memset(big, 'a', AB_SECRET_FILE_MAX + 1);
	write_file(path, big, AB_SECRET_VALUE_MAX + 1);
	load_bad(&src, -EFBIG, "longer than 4096");
	write_file(path, big, AB_SECRET_FILE_MAX);
	load_bad(&src, -EFBIG, NULL);
	write_file(path, big, AB_SECRET_FILE_MAX + 1);
	load_bad(&src, -EFBIG, "larger than 65536");
	unlink(path);
	load_bad(&src, -ENOENT, path);
	src.path = dir; /* a directory */
	load_bad(&src, -EISDIR, NULL);
	rmdir(dir);
	src.path = "";
	load_bad(&src, -EINVAL, NULL);
	free(big);
}

static long elapsed_ms(const struct timespec *t0)
{
	struct timespec t1;
	clock_gettime(CLOCK_MONOTONIC, &t1);
	return (t1.tv_sec - t0->tv_sec) * 1000 + (t1.tv_nsec - t0->tv_nsec) / 1000000;
}

static void test_load_command(void **state)
{
	char *echo[] = {"/bin/echo", "hunter2", NULL};
	char *echo_path[] = {"echo", "-n", "hunter2", NULL};
	char *trail[] = {"/bin/sh", "-c", "printf 'hunter2 x \\t\\n\\n'; echo oops >&2", NULL};
	char *fals[] = {"/bin/false", NULL};
	char *tru[] = {"/bin/true", NULL};
	char *missing[] = {"/nonexistent/ab-cmd", NULL};
	char *slow[] = {"/bin/sleep", "5", NULL};
	char *daemon[] = {"/bin/sh", "-c", "echo hunter2; sleep 3 2>/dev/null &", NULL};
	char *sig[] = {"/bin/sh", "-c", "echo hunter2; kill -9 $$", NULL};
	char *stdin_null[] = {"/bin/sh", "-c", "cat; echo hunter2", NULL};
	char *flood[] = {"/bin/sh", "-c", "yes hunter2", NULL};
	char *empty[] = {NULL};
	ab_secret_source src = {.kind = AB_SECRET_SRC_COMMAND, .timeout_ms = 3000};
	struct timespec t0;

	src.argv = echo;
	load_ok(&src, "hunter2");
	src.argv = echo_path;
	load_ok(&src, "hunter2");
	src.argv = trail;
	load_ok(&src, "hunter2 x");
	src.argv = stdin_null;
	load_ok(&src, "hunter2");
	src.argv = fals;
	load_bad(&src, -ECHILD, "exited with status 1");
	src.argv = tru;
	load_bad(&src, -ENODATA, "is empty");
	src.argv = missing;
	load_bad(&src, -ENOENT, "cannot run /nonexistent/ab-cmd");
	src.argv = sig;
	load_bad(&src, -ECHILD, "signal 9");
	src.argv = flood;
	load_bad(&src, -EFBIG, NULL);
	src.argv = empty;
	load_bad(&src, -EINVAL, "empty command");
	src.argv = NULL;
	load_bad(&src, -EINVAL, "empty command");

	src.argv = slow;
	src.timeout_ms = 200;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	load_bad(&src, -ETIMEDOUT, "200 ms");
	assert_in_range(elapsed_ms(&t0), 150, 2000);

	/* a background process keeps stdout open: the value is still read
	 * as soon as the command itself exits */
	src.argv = daemon;
	src.timeout_ms = 3000;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	load_ok(&src, "hunter2");
	assert_in_range(elapsed_ms(&t0), 0, 2000);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_placeholder_table),
		cmocka_unit_test(test_placeholder_buffer),
		cmocka_unit_test(test_placeholder_unique),
		cmocka_unit_test(test_placeholder_derive),
		cmocka_unit_test(test_phkey_path),
		cmocka_unit_test(test_phkey_load),
		cmocka_unit_test(test_jwt_placeholder),
		cmocka_unit_test(test_jwt_secret),
		cmocka_unit_test(test_secret_names),
		cmocka_unit_test(test_secret_places),
		cmocka_unit_test(test_secret_values),
		cmocka_unit_test(test_secret_finish),
		cmocka_unit_test(test_secrets_set),
		cmocka_unit_test(test_rewrite_table),
		cmocka_unit_test(test_rewrite_forward),
		cmocka_unit_test(test_rewrite_basic),
		cmocka_unit_test(test_rewrite_basic_literal),
		cmocka_unit_test(test_rewrite_invalid),
		cmocka_unit_test(test_rewrite_too_big),
		cmocka_unit_test(test_explain),
		cmocka_unit_test(test_scan_table),
		cmocka_unit_test(test_scan_holdback),
		cmocka_unit_test(test_scan_block),
		cmocka_unit_test(test_scan_set_limits),
		cmocka_unit_test(test_scan_inplace),
		cmocka_unit_test(test_scan_random),
		cmocka_unit_test(test_scan_skip),
		cmocka_unit_test(test_scan_skip_adversarial),
		cmocka_unit_test(test_mask_response),
		cmocka_unit_test(test_body_set),
		cmocka_unit_test(test_body_mask),
		cmocka_unit_test(test_mask_no_rebuild),
		cmocka_unit_test(test_load_env),
		cmocka_unit_test(test_load_file),
		cmocka_unit_test(test_load_command),
	};
	return cmocka_run_group_tests(tests, setup_secs, teardown_secs);
}
