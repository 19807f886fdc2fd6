/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target (any process; fuzzing only): the DNS query parser, the
 * response builders and the TCP framing on arbitrary bytes.  Properties
 * checked beyond "no crash, no UB":
 *   - a parsed query has a name of only [a-z0-9_-] labels joined by single
 *     dots, at most 253 characters, and a question inside the message;
 *   - a refused query names an rcode the builder accepts (or -1), and that
 *     answer is built;
 *   - every built response has the query's id, QR=1, the right counts and
 *     length, echoes the question byte for byte, fits AB_DNS_MAX_RESPONSE,
 *     and one byte less of room gives -ENOBUFS;
 *   - the TCP framer agrees with the 2-byte prefix, and the message it
 *     frames gets the same verdict as the same bytes parsed directly.
 */
#include "agentbox/dns.h"

#include <errno.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint16_t be16(const uint8_t *p)
{
	return (uint16_t)((p[0] << 8) | p[1]);
}

static void check_name(const ab_dns_query *q)
{
	size_t n = strnlen(q->name, sizeof(q->name));
	if (n > AB_DNS_MAX_NAME)
		__builtin_trap();
	if (n && (q->name[0] == '.' || q->name[n - 1] == '.'))
		__builtin_trap();
	for (size_t i = 0; i < n; i++) {
		char c = q->name[i];
		if (c == '.' && q->name[i + 1] == '.')
			__builtin_trap();
		if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
		      c == '.'))
			__builtin_trap();
	}
}

/* A built response: header sane, question echoed, length as computed. */
static void check_resp(const ab_dns_query *q, const uint8_t *msg, const uint8_t *out, int n,
		       int rcode, unsigned ancount)
{
	bool echo = q->question_end != 0;
	size_t qlen = echo ? q->question_end - 12 : 0;
	size_t want = 12 + qlen + 16 * ancount + (q->has_edns ? 11 : 0);

	if (n < 0 || (size_t)n != want || n > AB_DNS_MAX_RESPONSE)
		__builtin_trap();
	uint16_t flags = be16(out + 2);
	if (be16(out) != q->id || !(flags & 0x8000) || (flags & 0x0200) ||
	    (flags & 0xf) != (rcode & 0xf) || ((flags ^ q->flags) & 0x7910))
		__builtin_trap();
	if (be16(out + 4) != (echo ? 1 : 0) || be16(out + 6) != ancount || be16(out + 8) != 0 ||
	    be16(out + 10) != (q->has_edns ? 1 : 0))
		__builtin_trap();
	if (memcmp(out + 12, msg + 12, qlen) != 0)
		__builtin_trap();
	if (ancount && (be16(out + 12 + qlen) != 0xc00c || be16(out + 12 + qlen + 10) != 4))
		__builtin_trap();
	if (q->has_edns &&
	    (out[n - 11] != 0 || be16(out + n - 10) != 41 || out[n - 6] != (rcode >> 4)))
		__builtin_trap();
}

static void check_build(const ab_dns_query *q, const uint8_t *msg, int rcode)
{
	static const uint8_t addr[4] = {198, 18, 0, 1};
	uint8_t out[AB_DNS_MAX_RESPONSE + 64];
	int n;

	if (rcode < 0) { /* A answer */
		n = ab_dns_build_answer_a(q, msg, addr, 60, out, sizeof(out));
		if (n == -EINVAL)
			return;
		check_resp(q, msg, out, n, 0, 1);
		if (ab_dns_build_answer_a(q, msg, addr, 60, out, (size_t)n - 1) != -ENOBUFS)
			__builtin_trap();
		return;
	}
	n = ab_dns_build_rcode(q, msg, rcode, out, sizeof(out));
	check_resp(q, msg, out, n, rcode, 0);
	if (ab_dns_build_rcode(q, msg, rcode, out, (size_t)n - 1) != -ENOBUFS)
		__builtin_trap();
}

static int check_parse(const uint8_t *msg, size_t len, ab_dns_query *q)
{
	int r = ab_dns_parse_query(msg, len, q);

	if (q->question_end > len)
		__builtin_trap();
	if (r == 0) {
		if (q->rcode_hint != 0 || q->question_end < 17)
			__builtin_trap();
		check_name(q);
		check_build(q, msg, -1);
		check_build(q, msg, AB_DNS_NXDOMAIN);
		check_build(q, msg, AB_DNS_NOERROR);
		/* the A builder must also be sound for any parsed question */
		ab_dns_query a = *q;
		a.qtype = AB_DNS_TYPE_A;
		a.qclass = AB_DNS_CLASS_IN;
		check_build(&a, msg, -1);
		return r;
	}
	switch (q->rcode_hint) {
	case -1:
		if (len >= 12 && !(msg[2] & 0x80))
			__builtin_trap();
		return r;
	case AB_DNS_FORMERR:
	case AB_DNS_NXDOMAIN:
	case AB_DNS_NOTIMP:
	case AB_DNS_BADVERS: break;
	default: __builtin_trap();
	}
	if (len < 12 || (q->rcode_hint == AB_DNS_FORMERR && q->has_edns))
		__builtin_trap();
	check_build(q, msg, q->rcode_hint);
	if (ab_dns_build_answer_a(q, msg, (const uint8_t *)"\1\2\3\4", 1, (uint8_t[512]){0}, 512) !=
	    -EINVAL)
		__builtin_trap();
	return r;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static ab_dns_query q, q2;
	int r = check_parse(data, size, &q);

	/* TCP: the same bytes as a stream (first 2 bytes = length) */
	size_t off = 0, len = 0;
	int f = ab_dns_tcp_frame(data, size, &off, &len);
	if (f == 1) {
		if (off != 2 || len != be16(data) || len == 0 || len > AB_DNS_MAX_MSG ||
		    off + len > size)
			__builtin_trap();
		check_parse(data + off, len, &q2);
	} else if (f == 0) {
		if (size >= 2 &&
		    (be16(data) == 0 || be16(data) > AB_DNS_MAX_MSG || size - 2 >= be16(data)))
			__builtin_trap();
	} else if (f != -EMSGSIZE || size < 2) {
		__builtin_trap();
	}

	/* and the same bytes with a correct prefix: framing then parse gives
	 * the verdict of the direct parse */
	if (size <= AB_DNS_MAX_MSG && size > 0) {
		static uint8_t framed[AB_DNS_MAX_MSG + 2];
		framed[0] = (uint8_t)(size >> 8);
		framed[1] = (uint8_t)size;
		memcpy(framed + 2, data, size);
		if (ab_dns_tcp_frame(framed, size + 1, &off, &len) != 0 ||
		    ab_dns_tcp_frame(framed, size + 2, &off, &len) != 1 || len != size)
			__builtin_trap();
		if (ab_dns_parse_query(framed + off, len, &q2) != r ||
		    q2.rcode_hint != q.rcode_hint || q2.question_end != q.question_end ||
		    strcmp(q2.name, q.name) != 0)
			__builtin_trap();
	}
	return 0;
}
