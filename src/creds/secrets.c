/* SPDX-License-Identifier: MIT */
/*
 * Credential brokering, the pure part (parent: the egress proxy):
 * placeholders, secrets, the request-head swap, and the scanner sets for
 * request bodies (placeholders -> values) and responses (values and their
 * encodings -> masked).  No I/O: where values come from is sources.c.
 * Every buffer that may hold a real value is wiped before it is freed.  See
 * include/agentbox/secrets.h for the rules.
 */
#include "agentbox/secrets.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>

#include <endian.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>

#include "agentbox/http.h"
#include "secrets_int.h"

void ab_secrets_wipe_free(char *p, size_t len)
{
	if (!p)
		return;
	explicit_bzero(p, len);
	free(p);
}

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

/* ---------------------------------------------------------- placeholders */

static bool is_alnum(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

static bool ph_char(unsigned char c) { return is_alnum(c) || c == '_' || c == '-'; }

static int tolower_ascii(char c) { return c >= 'A' && c <= 'Z' ? c + 32 : (unsigned char)c; }

/* Where a placeholder's characters come from: getrandom, or (KEY set)
 * HMAC-SHA256 under KEY of a message holding the name, the value, the
 * counter and a block number, one 32-byte block after another. */
typedef struct ph_source {
	const unsigned char *key; /* AB_PHKEY_LEN bytes, or NULL: getrandom */
	unsigned char *msg;       /* "agentbox placeholder v1\0" name "\0" value ctr blk */
	size_t msg_len;
	uint32_t block;
} ph_source;

static const char ph_label[] = "agentbox placeholder v1";

static ssize_t ph_bytes(ph_source *src, unsigned char *buf, size_t n)
{
	if (!src->key) {
		ssize_t r;
		do
			r = getrandom(buf, n, 0);
		while (r < 0 && errno == EINTR);
		return r < 0 ? -errno : r;
	}
	if (n < SHA256_DIGEST_LENGTH)
		return -EINVAL;
	uint32_t b = htobe32(src->block++);
	memcpy(src->msg + src->msg_len - 4, &b, 4);
	unsigned int md_len = 0;
	if (!HMAC(EVP_sha256(), src->key, AB_PHKEY_LEN, src->msg, src->msg_len, buf, &md_len))
		return -EIO;
	return (ssize_t)md_len;
}

static int placeholder_fill(const char *prefix, size_t len, size_t value_len, char *out,
			    size_t outsz, ph_source *src)
{
	static const char alnum[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
	unsigned char rnd[64];
	size_t plen = prefix ? strnlen(prefix, AB_PLACEHOLDER_PREFIX_MAX + 1) : 0;
	size_t total = len ? len : value_len, i;

	if (plen > AB_PLACEHOLDER_PREFIX_MAX || total > AB_PLACEHOLDER_MAX)
		return -EINVAL;
	for (i = 0; i < plen; i++)
		if (!ph_char((unsigned char)prefix[i]))
			return -EINVAL;
	if (total < plen + AB_PLACEHOLDER_MIN_RANDOM)
		total = plen + AB_PLACEHOLDER_MIN_RANDOM;
	if (!out || outsz <= total)
		return -ENOBUFS;
	if (plen)
		memcpy(out, prefix, plen);
	while (i < total) {
		ssize_t r = ph_bytes(src, rnd, sizeof(rnd));
		if (r < 0) {
			explicit_bzero(rnd, sizeof(rnd));
			explicit_bzero(out, outsz);
			return (int)r;
		}
		/* 248 = 4 * 62: bytes >= 248 are dropped, the rest map evenly */
		for (ssize_t j = 0; j < r && i < total; j++)
			if (rnd[j] < 248)
				out[i++] = alnum[rnd[j] % 62];
	}
	explicit_bzero(rnd, sizeof(rnd));
	out[total] = '\0';
	return (int)total;
}

int ab_placeholder_make(const char *prefix, size_t len, size_t value_len, char *out, size_t outsz)
{
	ph_source src = {0};
	return placeholder_fill(prefix, len, value_len, out, outsz, &src);
}

int ab_placeholder_derive(const char *prefix, size_t len, const unsigned char *key,
			  const char *name, const char *value, size_t value_len, uint32_t counter,
			  char *out, size_t outsz)
{
	if (!key || !name || !value)
		return -EINVAL;
	size_t nl = strlen(name);
	if (nl > AB_SECRET_NAME_MAX || value_len > AB_SECRET_VALUE_MAX)
		return -EINVAL;
	ph_source src = {.key = key, .msg_len = sizeof(ph_label) + nl + 1 + value_len + 8};
	src.msg = malloc(src.msg_len);
	if (!src.msg)
		return -ENOMEM;
	unsigned char *m = src.msg;
	memcpy(m, ph_label, sizeof(ph_label)); /* with its NUL */
	m += sizeof(ph_label);
	memcpy(m, name, nl + 1);
	m += nl + 1;
	memcpy(m, value, value_len);
	m += value_len;
	uint32_t c = htobe32(counter);
	memcpy(m, &c, 4);
	int r = placeholder_fill(prefix, len, value_len, out, outsz, &src);
	explicit_bzero(src.msg, src.msg_len);
	free(src.msg);
	return r;
}

/* --------------------------------------------------------------- secrets */

static bool name_ok(const char *name)
{
	size_t n = name ? strnlen(name, AB_SECRET_NAME_MAX + 1) : 0;

	if (n == 0 || n > AB_SECRET_NAME_MAX || (name[0] >= '0' && name[0] <= '9'))
		return false;
	for (size_t i = 0; i < n; i++)
		if (!is_alnum((unsigned char)name[i]) && name[i] != '_')
			return false;
	return true;
}

int ab_secret_init(ab_secret *s, const char *name, ab_err *err)
{
	memset(s, 0, sizeof(*s));
	if (!name_ok(name))
		return ab_fail_code(
			err, AB_EXIT_FAIL, EINVAL,
			"secret name '%.80s': use letters, digits and '_' (not first a digit), "
			"at most %d characters",
			name ? name : "", AB_SECRET_NAME_MAX);
	snprintf(s->name, sizeof(s->name), "%s", name);
	return 0;
}

int ab_secret_add_host(ab_secret *s, const char *rule, ab_err *err)
{
	int r = ab_netpolicy_add(&s->hosts, AB_NETLIST_ALLOW, rule ? rule : "", err);

	if (r < 0)
		ab_err_prefix(err, "secret %s: hosts", s->name);
	return r;
}

static bool is_tchar(unsigned char c)
{
	return is_alnum(c) || (c && strchr("!#$%&'*+-.^_`|~", c));
}

/* Headers that frame or route a message: never a place for a secret. */
static const char *const framing_headers[] = {
	"host", "content-length", "transfer-encoding", "connection", "upgrade", "te",
	"trailer", "expect", "keep-alive", "proxy-connection",
};

static int add_header_place(ab_secret *s, const char *h, ab_err *err)
{
	char low[AB_SECRET_HEADER_MAX + 1];
	size_t n = strnlen(h, AB_SECRET_HEADER_MAX + 1);

	if (n == 0 || n > AB_SECRET_HEADER_MAX)
		return ab_fail_code(err, AB_EXIT_FAIL, EINVAL,
				    "secret %s: header name must have 1..%d characters", s->name,
				    AB_SECRET_HEADER_MAX);
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)h[i];
		if (!is_tchar(c))
			return ab_fail_code(err, AB_EXIT_FAIL, EINVAL,
					    "secret %s: '%.64s' is not a header name", s->name, h);
		low[i] = (char)(c >= 'A' && c <= 'Z' ? c + 32 : c);
	}
	low[n] = '\0';
	for (size_t i = 0; i < AB_ARRAY_SIZE(framing_headers); i++)
		if (strcmp(low, framing_headers[i]) == 0)
			return ab_fail_code(err, AB_EXIT_FAIL, EINVAL,
					    "secret %s: header %s frames or routes the request and "
					    "cannot carry a secret", s->name, low);
	if (!ab_strv_contains(&s->headers, low) && s->headers.n >= AB_SECRET_MAX_HEADERS)
		return ab_fail_code(err, AB_EXIT_FAIL, E2BIG,
				    "secret %s: too many header places (max %d)", s->name,
				    AB_SECRET_MAX_HEADERS);
	if (ab_strv_push_unique(&s->headers, low) < 0)
		return ab_fail(err, ENOMEM, "secret %s", s->name);
	return 0;
}

int ab_secret_add_place(ab_secret *s, const char *place, ab_err *err)
{
	int r = 0;

	if (!place)
		place = "";
	if (strncmp(place, "header:", 7) == 0)
		r = add_header_place(s, place + 7, err);
	else if (strcmp(place, "query") == 0)
		s->in_query = true;
	else if (strcmp(place, "body") == 0)
		s->in_body = true;
	else {
		r = ab_fail_code(err, AB_EXIT_FAIL, EINVAL, "secret %s: unknown place '%.64s'",
				 s->name, place);
		ab_err_hint(err, "places are \"header:NAME\", \"query\" and \"body\"");
	}
	if (r == 0)
		s->places_given = true;
	return r;
}

const char *sec_value_problem(const char *v, size_t len)
{
	if (len == 0)
		return "is empty";
	if (len > AB_SECRET_VALUE_MAX)
		return "is longer than 4096 bytes";
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)v[i];
		if (c == '\0')
			return "contains a NUL byte";
		if (c == '\r' || c == '\n')
			return "contains a line break";
		if ((c < 0x20 && c != '\t') || c == 0x7f)
			return "contains a control character";
	}
	return NULL;
}

int ab_secret_set_value(ab_secret *s, char *value, size_t len, ab_err *err)
{
	const char *why = value ? sec_value_problem(value, len) : "is missing";

	if (why) {
		ab_secrets_wipe_free(value, value ? len : 0);
		return ab_fail_code(err, AB_EXIT_FAIL, len > AB_SECRET_VALUE_MAX ? EFBIG : EINVAL,
				    "secret %s: the value %s", s->name, why);
	}
	ab_secrets_wipe_free(s->value, s->value_len);
	s->value = value;
	s->value_len = len;
	return 0;
}

int ab_secret_set_placeholder(ab_secret *s, const char *prefix, size_t len, ab_err *err)
{
	return ab_secret_set_placeholder_keyed(s, prefix, len, NULL, 0, err);
}

int ab_secret_set_placeholder_keyed(ab_secret *s, const char *prefix, size_t len,
				    const unsigned char *key, uint32_t counter, ab_err *err)
{
	char buf[AB_PLACEHOLDER_MAX + 1];
	int r;

	if (!s->value)
		return ab_fail_code(err, AB_EXIT_FAIL, EINVAL, "secret %s: no value yet", s->name);
	r = key ? ab_placeholder_derive(prefix, len, key, s->name, s->value, s->value_len, counter,
					buf, sizeof(buf))
		: ab_placeholder_make(prefix, len, s->value_len, buf, sizeof(buf));
	if (r == -EINVAL)
		return ab_fail_code(
			err, AB_EXIT_FAIL, EINVAL,
			"secret %s: placeholder prefix must be at most %d characters of "
			"[A-Za-z0-9_-], the length at most %d",
			s->name, AB_PLACEHOLDER_PREFIX_MAX, AB_PLACEHOLDER_MAX);
	if (r < 0)
		return ab_fail(err, -r, "secret %s: placeholder", s->name);
	free(s->placeholder);
	s->placeholder = ab_strdup(buf);
	if (!s->placeholder)
		return ab_fail(err, ENOMEM, "secret %s", s->name);
	s->placeholder_len = (size_t)r;
	return 0;
}

int ab_secret_set_placeholder_jwt(ab_secret *s, ab_err *err)
{
	char buf[AB_PLACEHOLDER_MAX + 1];
	if (!s->value)
		return ab_fail_code(err, AB_EXIT_FAIL, EINVAL, "secret %s: no value yet", s->name);
	int r = ab_jwt_placeholder_make(s->value, s->value_len, buf, sizeof(buf));
	if (r == -EINVAL) {
		ab_fail_code(err, AB_EXIT_FAIL, EINVAL,
			     "secret %s: the value is not a JWT (header.payload.signature, "
			     "each in base64url), but its placeholder is {\"jwt\": true}",
			     s->name);
		ab_err_hint(err, "drop \"jwt\" from secrets.%s.placeholder if this secret is not a "
			    "JWT", s->name);
		return -EINVAL;
	}
	if (r == -ERANGE)
		return ab_fail_code(
			err, AB_EXIT_FAIL, ERANGE,
			"secret %s: the JWT's signature is shorter than %d bytes: "
			"a placeholder keeping its header and payload would be guessable",
			s->name, AB_JWT_SIG_MIN_BYTES);
	if (r < 0)
		return ab_fail(err, -r, "secret %s: placeholder", s->name);
	char *ph = ab_strdup(buf);
	explicit_bzero(buf, sizeof(buf));
	if (!ph)
		return ab_fail(err, ENOMEM, "secret %s", s->name);
	free(s->placeholder);
	s->placeholder = ph;
	s->placeholder_len = (size_t)r;
	s->jwt = true;
	return 0;
}

int ab_secret_finish(ab_secret *s, ab_err *err)
{
	if (!s->value)
		return ab_fail_code(err, AB_EXIT_FAIL, EINVAL, "secret %s: no value", s->name);
	if (!s->placeholder || s->placeholder_len == 0)
		return ab_fail_code(err, AB_EXIT_FAIL, EINVAL, "secret %s: no placeholder",
				    s->name);
	for (size_t i = 0; i < s->placeholder_len; i++)
		if (!ph_char((unsigned char)s->placeholder[i]) && !(s->jwt && s->placeholder[i] == '.'))
			return ab_fail_code(err, AB_EXIT_FAIL, EINVAL, "secret %s: bad placeholder",
					    s->name);
	if (s->hosts.n_allow == 0) {
		ab_fail_code(err, AB_EXIT_FAIL, EINVAL, "secret %s: bound to no host", s->name);
		ab_err_hint(err, "list the hosts that may receive it under secrets.%s.hosts", s->name);
		return -EINVAL;
	}
	if (!s->places_given && s->headers.n == 0 &&
	    (ab_strv_push(&s->headers, "authorization") < 0 ||
	     ab_strv_push(&s->headers, "x-api-key") < 0))
		return ab_fail(err, ENOMEM, "secret %s", s->name);
	return 0;
}

void ab_secret_free(ab_secret *s)
{
	if (!s)
		return;
	ab_secrets_wipe_free(s->value, s->value_len);
	ab_secrets_wipe_free(s->placeholder, s->placeholder_len);
	ab_netpolicy_free(&s->hosts);
	ab_strv_free(&s->headers);
	explicit_bzero(s, sizeof(*s));
}

bool ab_secret_bound(const ab_secret *s, const char *host, unsigned port)
{
	return s && host && ab_netpolicy_check(&s->hosts, host, port, NULL) == AB_NET_ALLOW;
}

bool ab_secret_forwards_elsewhere(const ab_secret *s, const char *host, unsigned port)
{
	return s && !s->refuse_elsewhere && !ab_secret_bound(s, host, port);
}

int ab_secrets_check(const ab_secret *secs, size_t n, ab_err *err)
{
	if (n > AB_SECRETS_MAX)
		return ab_fail_code(err, AB_EXIT_FAIL, E2BIG, "too many secrets (max %d)",
				    AB_SECRETS_MAX);
	for (size_t i = 0; i < n; i++) {
		if (!secs[i].value || !secs[i].placeholder || secs[i].headers.n + secs[i].in_query +
		    secs[i].in_body == 0 || secs[i].hosts.n_allow == 0)
			return ab_fail_code(err, AB_EXIT_FAIL, EINVAL, "secret %s is incomplete",
					    secs[i].name);
		for (size_t j = 0; j < i; j++)
			if (strcmp(secs[i].name, secs[j].name) == 0)
				return ab_fail_code(err, AB_EXIT_FAIL, EINVAL,
						    "secret %s is defined twice", secs[i].name);
	}
	return 0;
}

void ab_secrets_names(const ab_secret *secs, size_t n, uint64_t mask, char *buf, size_t bufsz)
{
	size_t o = 0;

	if (!bufsz)
		return;
	buf[0] = '\0';
	for (size_t i = 0; i < n && i < 64; i++) {
		if (!(mask & (UINT64_C(1) << i)))
			continue;
		int k = snprintf(buf + o, bufsz - o, "%s%s", o ? "," : "", secs[i].name);
		if (k < 0 || (size_t)k >= bufsz - o) {
			buf[o] = '\0';
			return;
		}
		o += (size_t)k;
	}
}

/* ------------------------------------------------------------- encodings */

static const char b64_std[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
static const char b64_url[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/* Encode IN[0..N) into OUT (room for 4 * ((N + 2) / 3) + 1). */
static size_t b64_encode(const unsigned char *in, size_t n, char *out, const char *alpha, bool pad)
{
	size_t o = 0, i = 0;

	for (; i + 2 < n; i += 3) {
		uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8 | in[i + 2];
		out[o++] = alpha[v >> 18];
		out[o++] = alpha[(v >> 12) & 63];
		out[o++] = alpha[(v >> 6) & 63];
		out[o++] = alpha[v & 63];
	}
	if (i < n) {
		uint32_t v = (uint32_t)in[i] << 16 | (i + 1 < n ? (uint32_t)in[i + 1] << 8 : 0);
		out[o++] = alpha[v >> 18];
		out[o++] = alpha[(v >> 12) & 63];
		if (i + 1 < n)
			out[o++] = alpha[(v >> 6) & 63];
		else if (pad)
			out[o++] = '=';
		if (pad)
			out[o++] = '=';
	}
	out[o] = '\0';
	return o;
}

/* One part of a compact JWS: unpadded base64url, a possible length. */
static bool jws_part(const char *p, size_t n)
{
	if (!n || n % 4 == 1)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!is_alnum((unsigned char)p[i]) && p[i] != '-' && p[i] != '_')
			return false;
	return true;
}

int ab_jwt_placeholder_make(const char *value, size_t len, char *out, size_t outsz)
{
	const char *d1 = value ? memchr(value, '.', len) : NULL;
	const char *d2 = d1 ? memchr(d1 + 1, '.', len - (size_t)(d1 + 1 - value)) : NULL;
	if (!d2 || memchr(d2 + 1, '.', len - (size_t)(d2 + 1 - value)) || len > AB_PLACEHOLDER_MAX)
		return -EINVAL;
	size_t keep = (size_t)(d2 + 1 - value), siglen = len - keep;
	if (!jws_part(value, (size_t)(d1 - value)) || !jws_part(d1 + 1, (size_t)(d2 - d1 - 1)) ||
	    (siglen && !jws_part(d2 + 1, siglen)))
		return -EINVAL;
	/* the bytes the signature encodes: encoding as many random bytes gives
	 * exactly SIGLEN characters again */
	size_t nbytes = siglen * 3 / 4;
	if (nbytes < AB_JWT_SIG_MIN_BYTES)
		return -ERANGE;
	if (!out || outsz <= len)
		return -ENOBUFS;
	unsigned char rnd[AB_PLACEHOLDER_MAX * 3 / 4 + 3];
	size_t got = 0;
	while (got < nbytes) {
		ssize_t r = getrandom(rnd + got, nbytes - got, 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			int e = errno;
			explicit_bzero(rnd, sizeof(rnd));
			return -e;
		}
		got += (size_t)r;
	}
	memcpy(out, value, keep);
	size_t o = b64_encode(rnd, nbytes, out + keep, b64_url, false);
	explicit_bzero(rnd, sizeof(rnd));
	if (o != siglen) { /* cannot happen for a length that passed jws_part */
		explicit_bzero(out, outsz);
		return -EINVAL;
	}
	return (int)len;
}

static int b64_val(unsigned char c)
{
	const char *p = c ? strchr(b64_std, c) : NULL;
	return p ? (int)(p - b64_std) : -1;
}

/* Standard alphabet, padding optional (but right if present).  OUT needs
 * 3 * N / 4 + 3 bytes.  -1 when invalid. */
static int b64_decode(const char *in, size_t n, unsigned char *out, size_t *outlen)
{
	uint32_t acc = 0;
	size_t o = 0, bits = 0, pad = 0;

	while (n && in[n - 1] == '=' && pad < 2) {
		n--;
		pad++;
	}
	if (n % 4 == 1 || (pad && (n + pad) % 4 != 0))
		return -1;
	for (size_t i = 0; i < n; i++) {
		int v = b64_val((unsigned char)in[i]);
		if (v < 0)
			return -1;
		acc = acc << 6 | (uint32_t)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			out[o++] = (unsigned char)(acc >> bits);
		}
	}
	*outlen = o;
	return 0;
}

static bool unreserved(unsigned char c) { return is_alnum(c) || (c && strchr("-._~", c)); }

/* Percent-encode everything but unreserved characters. OUT: 3 * N + 1. */
static size_t pct_encode(const char *in, size_t n, char *out, bool lower)
{
	const char *hex = lower ? "0123456789abcdef" : "0123456789ABCDEF";
	size_t o = 0;

	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)in[i];
		if (unreserved(c)) {
			out[o++] = (char)c;
			continue;
		}
		out[o++] = '%';
		out[o++] = hex[c >> 4];
		out[o++] = hex[c & 15];
	}
	out[o] = '\0';
	return o;
}

static int hexv(unsigned char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	c |= 0x20;
	return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* Decode %HH sequences of S[0..N) into OUT (may be S).  MAP (optional,
 * N entries) gets the offset in S of each output byte.  Returns the length. */
static size_t pct_decode(const char *s, size_t n, char *out, uint32_t *map)
{
	size_t o = 0;

	for (size_t i = 0; i < n; i++) {
		int hi, lo;
		if (map)
			map[o] = (uint32_t)i;
		if (s[i] == '%' && i + 2 < n && (hi = hexv((unsigned char)s[i + 1])) >= 0 &&
		    (lo = hexv((unsigned char)s[i + 2])) >= 0) {
			out[o++] = (char)(hi << 4 | lo);
			i += 2;
		} else {
			out[o++] = s[i];
		}
	}
	return o;
}

/* JSON string escaping of '"' and '\\' (and '/' as "\/" when SLASH). */
static size_t json_escape(const char *in, size_t n, char *out, bool slash)
{
	size_t o = 0;

	for (size_t i = 0; i < n; i++) {
		if (in[i] == '"' || in[i] == '\\' || (slash && in[i] == '/'))
			out[o++] = '\\';
		out[o++] = in[i];
	}
	out[o] = '\0';
	return o;
}

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

static char *memdup(const char *p, size_t n)
{
	char *d = malloc(n + 1);
	if (d) {
		memcpy(d, p, n);
		d[n] = '\0';
	}
	return d;
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
	*e = (ab_scan_pattern){ .len = len, .action = act, .id = id };
	e->bytes = memdup(pat, len);
	e->repl = repl && rlen == len ? memdup(repl, len) : NULL;
	if (!e->bytes || (repl && rlen == len && !e->repl)) {
		ab_secrets_wipe_free((char *)e->bytes, len);
		free((char *)e->repl);
		b->fail = true;
		return;
	}
	b->n++;
}

enum { D_B64_PAD, D_B64_RAW, D_B64_A0, D_B64_A1, D_B64_A2, D_PCT_UP, D_PCT_LOW, D_JSON,
       D_JSON_SLASH, D_COUNT };

/* The characters of base64(A zero bytes + SRC + ...) that depend on SRC only. */
static size_t b64_core(const char *src, size_t len, unsigned a, const char *alpha, char *out,
		       unsigned char *tmp)
{
	size_t lo = (8 * a + 5) / 6, hi = (8 * (a + len)) / 6;

	memset(tmp, 0, a);
	memcpy(tmp + a, src, len);
	memset(tmp + a + len, 0, 2);
	b64_encode(tmp, a + len + 2, out, alpha, false);
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
		return b64_encode((const unsigned char *)src, len, out, alpha, kind == D_B64_PAD);
	case D_B64_A0:
	case D_B64_A1:
	case D_B64_A2:
		return b64_core(src, len, (unsigned)(kind - D_B64_A0), alpha, out, tmp);
	case D_PCT_UP:
	case D_PCT_LOW:
		return pct_encode(src, len, out, kind == D_PCT_LOW);
	case D_JSON:
	case D_JSON_SLASH:
		return json_escape(src, len, out, kind == D_JSON_SLASH);
	}
	return 0;
}

static void response_patterns(pbuild *b, const ab_secret *s, unsigned id, char *wv, char *wp,
			      unsigned char *tmp)
{
	static const char *const alphas[] = { b64_std, b64_url };

	pb_add(b, s->value, s->value_len, s->placeholder, s->placeholder_len, AB_SCAN_REPLACE, id);
	for (int k = 0; k < D_COUNT; k++) {
		for (size_t a = 0; a < (k <= D_B64_A2 ? 2u : 1u); a++) {
			size_t lv = derive(k, alphas[a], s->value, s->value_len, wv, tmp);
			size_t lp = derive(k, alphas[a], s->placeholder, s->placeholder_len, wp, tmp);
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
		if (r[k - 1] == p[pl - 1] && memcmp(r, p + pl - k, k) == 0 &&
		    memcmp(r, q, k) != 0)
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
	bool used[256] = { false };
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
	pbuild b = { 0 };
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
	pbuild b = { 0 };
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
	ab_scan_pattern p[AB_SECRETS_MAX] = { 0 };
	char *mask[AB_SECRETS_MAX] = { 0 };
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
		p[i] = (ab_scan_pattern){ .bytes = s->placeholder, .len = s->placeholder_len,
					  .repl = ok ? s->value : fwd ? s->placeholder : mask[i],
					  .action = ok || fwd || mask[i] ? AB_SCAN_REPLACE
									 : AB_SCAN_BLOCK,
					  .id = (unsigned)i };
	}
	if (r == 0)
		r = ab_scan_set_new(p, n, out, err);
	for (size_t i = 0; i < n && i < AB_SECRETS_MAX; i++)
		free(mask[i]);
	return r;
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
	buf = memdup(s, n);
	if (!buf)
		return -ENOMEM;
	for (int level = 0; level < 3 && !found && memchr(buf, '%', len); level++) {
		size_t m = pct_decode(buf, len, buf, NULL);
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
	b->len += pct_encode(s->value, s->value_len, b->p + b->len, false);
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
	dlen = pct_decode(q, len, dec, map);
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
	sbuf nq = { 0 };
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
	sbuf nd = { 0 };
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
	if (b64_decode(v + t, n - t, dec, &dlen) == 0 &&
	    next_ph(c, (const char *)dec, dlen, 0, &at, &w)) {
		r = swap_plain(c, (const char *)dec, dlen, lname, where, &nd);
		if (r == 0 && sb_reserve(nv, t + 4 * (nd.len / 3 + 1))) {
			sb_add(nv, v, t);
			nv->len += b64_encode((const unsigned char *)nd.p, nd.len, nv->p + nv->len,
					      b64_std, true);
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
	sbuf nv = { 0 };
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
		r = nv.len ? find_encoded(c, nv.p, nv.len, &w) : find_encoded(c, v, h->value.len, &w);
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
	return h->name.len == strlen(name) && strncasecmp(head + h->name.off, name, h->name.len) == 0;
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
		if (b64_decode(v + t, n - t, dec, &dlen) == 0) {
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

int ab_secrets_rewrite_head(const ab_secret *secs, size_t n, const char *host, unsigned port,
			    const char *head, size_t len, char **out, size_t *outlen,
			    ab_swap_result *res)
{
	const ab_http_limits lim = { AB_HTTP_HARD_MAX_HEAD, AB_HTTP_MAX_HEADERS,
				     AB_HTTP_HARD_MAX_HEAD };
	rw_ctx c = { .secs = secs, .n = n, .head = head, .res = res };
	ab_http_req *q;
	int r;

	*out = NULL;
	*outlen = 0;
	memset(res, 0, sizeof(*res));
	if (n > AB_SECRETS_MAX || !head || (n && !secs) || len > AB_HTTP_HARD_MAX_HEAD)
		return -EINVAL;
	for (size_t i = 0; i < n; i++)
		if (!secs[i].placeholder || !secs[i].placeholder_len || !secs[i].value)
			return -EINVAL;
	q = malloc(sizeof(*q));
	if (!q)
		return -ENOMEM;
	r = ab_http_parse_head(head, len, &lim, q);
	if (r <= 0 || (size_t)r != len) {
		free(q);
		return -EINVAL;
	}
	for (size_t i = 0; i < n; i++) {
		c.bound[i] = ab_secret_bound(&secs[i], host, port);
		if (!c.bound[i] && !secs[i].refuse_elsewhere)
			c.skip |= UINT64_C(1) << i;
	}
	host_display(host, c.hostdisp, sizeof(c.hostdisp));
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
	rw_ctx c = { .secs = secs, .n = n, .res = res };
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
	rw_block(&c, i, secs[i].in_body && secs[i].placeholder_len != secs[i].value_len
				? "body (length differs)" : "body");
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
			 "secrets.%s.elsewhere to \"forward\".\n", name, wt, r->place + 5,
			 r->place + 5, name, name);
	else if (!strcmp(w, "body"))
		snprintf(buf, bufsz,
			 "agentbox blocked this request: the placeholder of secret %s is in the %s, "
			 "where it may not be placed.\nTo allow that, add \"%s\" to secrets.%s.in "
			 "in the profile (or set secrets.%s.mask_in_body to true to send a mask of "
			 "the same length there instead).\n", name, wt, w, name, name);
	else if (strncmp(w, "header:", 7) == 0 || !strcmp(w, "query"))
		snprintf(buf, bufsz,
			 "agentbox blocked this request: the placeholder of secret %s is in the %s, "
			 "where it may not be placed.\nTo allow that, add \"%s\" to secrets.%s.in "
			 "in the profile.\n", name, wt, w, name);
	else if (!strcmp(w, "body (length differs)"))
		snprintf(buf, bufsz,
			 "agentbox blocked this request: the placeholder of secret %s is in the "
			 "request body, but it is not as long as the value, so it cannot be swapped "
			 "there.\nDrop the placeholder length from the profile (the default is the "
			 "value's length).\n", name);
	else
		snprintf(buf, bufsz,
			 "agentbox blocked this request: the placeholder of secret %s is in the %s; "
			 "a secret is never placed there.\n", name, wt);
}
