/* SPDX-License-Identifier: MIT */
/*
 * Placeholders (parent: the egress proxy): random ones (getrandom), stable
 * ones derived under the placeholder key (HMAC-SHA256), and JWT-shaped ones
 * that keep a token's header and payload.  Pure but for getrandom.  Rules
 * in include/agentbox/secrets.h.
 */
#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>

#include "agentbox/secrets.h"
#include "secrets_int.h"

/* ---------------------------------------------------------- placeholders */

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
	static const char alnum[] =
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
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

/* ------------------------------------------------------------ JWT-shaped */

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
	size_t o = sec_b64_encode(rnd, nbytes, out + keep, sec_b64_url, false);
	explicit_bzero(rnd, sizeof(rnd));
	if (o != siglen) { /* cannot happen for a length that passed jws_part */
		explicit_bzero(out, outsz);
		return -EINVAL;
	}
	return (int)len;
}
