/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target (any process; fuzzing only): the TLS ClientHello parser.
 * Each input is parsed three ways: as the raw client stream; as a
 * ClientHello body; as the extension block of a ClientHello with fixed valid
 * fields (the last two wrapped in a handshake header and records whose
 * payload size comes from the first input byte, so the fuzzer reaches the
 * extensions without having to learn the framing).  Properties checked beyond "no crash, no UB":
 *   - resumability: every prefix gives NEED_MORE or exactly the final answer
 *     (same reason; for OK the same struct), so reading more never turns a
 *     refusal into an acceptance;
 *   - NEED_MORE: len < need <= AB_TLS_MAX_HELLO, and need <= consumed when
 *     the whole input turns out OK;
 *   - errors carry a printable reason, NEED_MORE none;
 *   - OK: consumed <= len, the same answer for buf[0..consumed); a valid sni
 *     is a lower-case host name of 1..253 bytes without a trailing dot; an
 *     invalid one is "" with a reason.
 */
#include "agentbox/tls.h"

#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static ab_tls_hello full, part;
static uint8_t wrapped[AB_TLS_MAX_HELLO + 8192];

static void check_reason(const char *r)
{
	if (!r || !r[0])
		__builtin_trap();
	for (; *r; r++)
		if (*r < 0x20 || *r == 0x7f)
			__builtin_trap();
}

static void check_sni(const ab_tls_hello *h)
{
	size_t n = strnlen(h->sni, sizeof(h->sni));

	if (n == sizeof(h->sni))
		__builtin_trap();
	if (h->sni_invalid) {
		if (!h->has_sni || n != 0)
			__builtin_trap();
		check_reason(h->reason);
		return;
	}
	if (h->reason || (h->has_sni != (n > 0)) || n > 253)
		__builtin_trap();
	if (n && (h->sni[0] == '.' || h->sni[n - 1] == '.' || h->sni[0] == '-'))
		__builtin_trap();
	for (size_t i = 0; i < n; i++) {
		char c = h->sni[i];

		if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
		      c == '.'))
			__builtin_trap();
		if (c == '.' && h->sni[i + 1] == '.')
			__builtin_trap();
	}
}

static void check_result(int r, const ab_tls_hello *h, size_t len)
{
	switch (r) {
	case AB_TLS_NEED_MORE:
		if (h->reason || h->need <= len || h->need > AB_TLS_MAX_HELLO || h->has_sni)
			__builtin_trap();
		break;
	case AB_TLS_OK:
		if (h->consumed > len || h->consumed < 5 + 4 + 41 || h->need ||
		    h->n_alpn < (size_t)h->alpn_h2 + h->alpn_http11)
			__builtin_trap();
		check_sni(h);
		break;
	case AB_TLS_NOT_TLS:
	case AB_TLS_BAD:
	case AB_TLS_TOO_BIG:
		check_reason(h->reason);
		if (h->need || h->has_sni || h->consumed)
			__builtin_trap();
		break;
	default: __builtin_trap();
	}
}

static void check_stream(const uint8_t *buf, size_t size)
{
	int r = ab_tls_parse_client_hello(buf, size, &full);
	/* every prefix of short inputs; ~128 of longer ones, at an offset that
	 * varies with the input so that all cut points get their turn */
	size_t step = size > 512 ? size / 128 : 1, first = size > 512 ? buf[size - 1] % step : 0;

	check_result(r, &full, size);
	if (r == AB_TLS_OK) {
		if (ab_tls_parse_client_hello(buf, full.consumed, &part) != r ||
		    memcmp(&part, &full, sizeof(full)) != 0)
			__builtin_trap();
	}
	for (size_t n = first; n < size; n += step) {
		int k = ab_tls_parse_client_hello(buf, n, &part);

		check_result(k, &part, n);
		if (k == AB_TLS_NEED_MORE) {
			if (r == AB_TLS_OK && part.need > full.consumed)
				__builtin_trap();
			continue;
		}
		if (k != r)
			__builtin_trap();
		if (r == AB_TLS_OK ? memcmp(&part, &full, sizeof(full)) != 0
				   : strcmp(part.reason, full.reason) != 0)
			__builtin_trap();
	}
}

/* data[0] picks the record payload size (1..255, or 0: 2^14); the message
 * is the handshake header, then pre (pre_len bytes), then data[1..]. */
static size_t wrap(const uint8_t *data, size_t size, const uint8_t *pre, size_t pre_len)
{
	size_t frag, body, o = 0, i = 0;
	uint8_t hdr[4];

	if (size < 1 || size - 1 + pre_len > AB_TLS_MAX_HELLO)
		return 0;
	frag = data[0] ? data[0] : AB_TLS_MAX_FRAGMENT;
	body = pre_len + size - 1;
	hdr[0] = 1;
	hdr[1] = (uint8_t)(body >> 16);
	hdr[2] = (uint8_t)(body >> 8);
	hdr[3] = (uint8_t)body;
	while (i < body + 4 && o + 5 + frag <= sizeof(wrapped)) {
		size_t k = body + 4 - i < frag ? body + 4 - i : frag;

		memcpy(wrapped + o, "\x16\x03\x01", 3);
		wrapped[o + 3] = (uint8_t)(k >> 8);
		wrapped[o + 4] = (uint8_t)k;
		o += 5;
		for (size_t j = 0; j < k; j++, i++) {
			if (i < 4)
				wrapped[o++] = hdr[i];
			else if (i - 4 < pre_len)
				wrapped[o++] = pre[i - 4];
			else
				wrapped[o++] = data[1 + i - 4 - pre_len];
		}
	}
	return o;
}

/* Each input three ways: the raw stream; data[1..] as the ClientHello body;
 * data[1..] as its extension block after fixed valid fields. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t pre[2 + 32 + 1 + 4 + 2 + 2] = {3, 3};
	size_t n;

	check_stream(data, size);
	n = wrap(data, size, NULL, 0);
	if (n)
		check_stream(wrapped, n);
	if (size < 1 || size - 1 > 0xffff)
		return 0;
	memcpy(pre + 34, "\x00\x00\x02\x13\x01\x01\x00", 7); /* no sid, 1 suite, null comp */
	pre[41] = (uint8_t)((size - 1) >> 8);
	pre[42] = (uint8_t)(size - 1);
	n = wrap(data, size, pre, sizeof(pre));
	if (n)
		check_stream(wrapped, n);
	return 0;
}
