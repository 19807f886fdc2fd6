/* SPDX-License-Identifier: MIT */
/*
 * The encodings the secrets module sees a value or a placeholder in:
 * base64 (standard and URL-safe), percent-encoding and JSON escaping, both
 * ways where a request must be searched decoded.  Pure.  Shared through
 * secrets_int.h.
 */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "secrets_int.h"

const char sec_b64_std[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
const char sec_b64_url[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/* Encode IN[0..N) into OUT (room for 4 * ((N + 2) / 3) + 1). */
size_t sec_b64_encode(const unsigned char *in, size_t n, char *out, const char *alpha, bool pad)
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

static int b64_val(unsigned char c)
{
	const char *p = c ? strchr(sec_b64_std, c) : NULL;
	return p ? (int)(p - sec_b64_std) : -1;
}

/* Standard alphabet, padding optional (but right if present).  OUT needs
 * 3 * N / 4 + 3 bytes.  -1 when invalid. */
int sec_b64_decode(const char *in, size_t n, unsigned char *out, size_t *outlen)
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

static bool unreserved(unsigned char c)
{
	return is_alnum(c) || (c && strchr("-._~", c));
}

/* Percent-encode everything but unreserved characters. OUT: 3 * N + 1. */
size_t sec_pct_encode(const char *in, size_t n, char *out, bool lower)
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
size_t sec_pct_decode(const char *s, size_t n, char *out, uint32_t *map)
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
size_t sec_json_escape(const char *in, size_t n, char *out, bool slash)
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
