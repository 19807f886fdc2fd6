/* SPDX-License-Identifier: MIT */
/*
 * Canary tokens (test-escape): the scanner and the hash.  Pure, no I/O.
 *
 * Runs in two processes: inside the sandbox (the probes, through
 * ab_pr_scan) to find tokens in whatever bytes a probe managed to read, and
 * in the harness (the judge) to hash the tokens it planted.  Both sides
 * report and compare only the first AB_CANARY_HASH_HEX hex digits of the
 * SHA-256 of the whole token; the value itself is never printed.
 *
 * A token is  "ABCANARY-" KIND "-" HEX  where KIND is [A-Z0-9]{2,12} and HEX
 * is exactly AB_CANARY_HEX lowercase hex digits not followed by another
 * lowercase hex digit.  The scanner is linear in the input: memchr finds
 * each 'A', a 9-byte compare checks the prefix, and a bounded window after a
 * prefix is checked (at most 9 + 12 + 1 + 32 + 1 bytes); the prefix cannot
 * overlap itself, so windows start at least 9 bytes apart and resuming one
 * byte after a rejected prefix never misses a token.  (Not memmem: ASan's
 * interceptor checks the whole remaining haystack on every call, which makes
 * a scan quadratic under the sanitizers.)  It never reads outside buf[0..n).
 */
#include <limits.h>
#include <stdbool.h>
#include <string.h>

#include <openssl/evp.h>

#include "agentbox/escape.h"

#define PREFIX_LEN (sizeof(AB_CANARY_PREFIX) - 1)
#define KIND_MIN 2
#define KIND_MAX 12

static bool is_kind_char(unsigned char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

static bool is_lower_hex(unsigned char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

void ab_canary_hash(const char *token, size_t len, char out[AB_CANARY_HASH_HEX + 1])
{
	static const char hex[] = "0123456789abcdef";
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;

	out[0] = '\0';
	if (!token && len)
		return;
	if (!EVP_Digest(token ? token : "", len, md, &mdlen, EVP_sha256(), NULL) ||
	    mdlen * 2 < AB_CANARY_HASH_HEX)
		return; /* an empty string never matches a planted hash */
	for (size_t i = 0; i < AB_CANARY_HASH_HEX / 2; i++) {
		out[2 * i] = hex[md[i] >> 4];
		out[2 * i + 1] = hex[md[i] & 15];
	}
	out[AB_CANARY_HASH_HEX] = '\0';
}

/* The length of the token starting at p (which starts with the prefix), or
 * 0 if what follows the prefix is not a token.  Reads only p[0..avail). */
static size_t token_len(const unsigned char *p, size_t avail)
{
	size_t i = PREFIX_LEN, kind = 0;

	while (i < avail && kind <= KIND_MAX && is_kind_char(p[i])) {
		i++;
		kind++;
	}
	if (kind < KIND_MIN || kind > KIND_MAX || i >= avail || p[i] != '-')
		return 0;
	i++;
	if (avail - i < AB_CANARY_HEX)
		return 0;
	for (size_t k = 0; k < AB_CANARY_HEX; k++)
		if (!is_lower_hex(p[i + k]))
			return 0;
	i += AB_CANARY_HEX;
	if (i < avail && is_lower_hex(p[i]))
		return 0; /* more hex: not a token of our shape */
	return i;
}

int ab_canary_scan(const void *buf, size_t n, void (*cb)(const char *hash, void *ctx), void *ctx)
{
	const unsigned char *s = buf, *end;
	char hash[AB_CANARY_HASH_HEX + 1];
	int found = 0;

	if (!buf || n < PREFIX_LEN)
		return 0;
	end = s + n;
	while ((size_t)(end - s) >= PREFIX_LEN) {
		const unsigned char *p =
			memchr(s, AB_CANARY_PREFIX[0], (size_t)(end - s) - PREFIX_LEN + 1);
		if (!p)
			break;
		size_t len = memcmp(p, AB_CANARY_PREFIX, PREFIX_LEN) == 0
				     ? token_len(p, (size_t)(end - p))
				     : 0;
		if (!len) {
			s = p + 1;
			continue;
		}
		if (found < INT_MAX)
			found++;
		if (cb) {
			ab_canary_hash((const char *)p, len, hash);
			cb(hash, ctx);
		}
		s = p + len;
	}
	return found;
}
