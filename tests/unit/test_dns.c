/* SPDX-License-Identifier: MIT */
/*
 * dns.c: the DNS query parser and response builders.  Real queries written
 * byte for byte (dig 9.18 with its EDNS COOKIE, glibc with and without
 * `options edns0`), hostile ones (table: exact errno, rcode to answer and
 * whether the question is echoed), every prefix of every valid query, label
 * and name length limits at and one past the boundary, each possible byte
 * inside a label, responses compared byte for byte, buffer sizes down to 0,
 * TCP framing.  Pure, no privileges.
 */
#include "unit.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "agentbox/common.h"
#include "agentbox/dns.h"

#define S(lit) (const uint8_t *)(lit), sizeof(lit) - 1

/* Building blocks.  Careful: "\x07" "example" must stay split, or the
 * compiler reads \x07e as one hex escape. */
#define ID "\xab\xcd"
#define F_RD "\x01\x00"
#define F_RD_AD "\x01\x20"
#define C_1000 "\x00\x01\x00\x00\x00\x00\x00\x00"
#define C_1001 "\x00\x01\x00\x00\x00\x00\x00\x01"
#define H_Q ID F_RD C_1000     /* glibc: RD, one question */
#define H_QE ID F_RD_AD C_1001 /* dig: RD+AD, one question, one OPT */
#define H_QG ID F_RD C_1001    /* glibc with options edns0 */
#define N_EX      \
	"\x07"    \
	"example" \
	"\x03"    \
	"com"     \
	"\x00"
#define T_A "\x00\x01\x00\x01"
#define T_AAAA "\x00\x1c\x00\x01"
#define T_HTTPS "\x00\x41\x00\x01"
/* dig 9.18: payload 1232, COOKIE option with an 8-byte client cookie */
#define OPT_DIG            \
	"\x00"             \
	"\x00\x29"         \
	"\x04\xd0"         \
	"\x00\x00\x00\x00" \
	"\x00\x0c"         \
	"\x00\x0a\x00\x08" \
	"\x01\x02\x03\x04\x05\x06\x07\x08"
/* glibc options edns0: payload 1200, no options */
#define OPT_GLIBC          \
	"\x00"             \
	"\x00\x29"         \
	"\x04\xb0"         \
	"\x00\x00\x00\x00" \
	"\x00\x00"
/* our OPT in responses: payload 1232, no options */
#define OPT_OURS           \
	"\x00"             \
	"\x00\x29"         \
	"\x04\xd0"         \
	"\x00\x00\x00\x00" \
	"\x00\x00"

static ab_dns_query q;

/* ------------------------------------------------------------- valid */

typedef struct {
	const char *desc;
	const uint8_t *msg;
	size_t len;
	const char *name;
	uint16_t qtype, qclass;
	bool edns, edns_do;
	uint16_t udp;
	bool rd;
	size_t qend;
} good_case;

// clang-format off
static const good_case good[] = {
	{ "glibc A", S(H_Q N_EX T_A), "example.com", 1, 1, false, false, 512, true, 29 },
	{ "glibc AAAA", S(H_Q N_EX T_AAAA), "example.com", 28, 1, false, false, 512, true, 29 },
	{ "glibc edns0 A", S(H_QG N_EX T_A OPT_GLIBC), "example.com", 1, 1, true, false, 1200,
	  true, 29 },
	{ "dig A with cookie", S(H_QE N_EX T_A OPT_DIG), "example.com", 1, 1, true, false, 1232,
	  true, 29 },
	{ "dig HTTPS", S(H_QE N_EX T_HTTPS OPT_DIG), "example.com", 65, 1, true, false, 1232,
	  true, 29 },
	{ "dig +dnssec (DO)", S(H_QE N_EX T_A "\x00\x00\x29\x04\xd0\x00\x00\x80\x00\x00\x00"),
	  "example.com", 1, 1, true, true, 1232, true, 29 },
	{ "upper case lowered", S(H_Q "\x03" "WwW" "\x07" "ExAmPlE" "\x03" "COM" "\x00" T_A),
	  "www.example.com", 1, 1, false, false, 512, true, 33 },
	{ "root", S(H_Q "\x00" "\x00\x02\x00\x01"), "", 2, 1, false, false, 512, true, 17 },
	{ "single label", S(H_Q "\x09" "localhost" "\x00" T_A), "localhost", 1, 1, false, false,
	  512, true, 27 },
	{ "underscore, hyphen, digits",
	  S(H_Q "\x0f" "_acme-challenge" "\x03" "a-1" "\x02" "io" "\x00" "\x00\x10\x00\x01"),
	  "_acme-challenge.a-1.io", 16, 1, false, false, 512, true, 40 },
	{ "no RD", S(ID "\x00\x00" C_1000 N_EX T_A), "example.com", 1, 1, false, false, 512,
	  false, 29 },
	{ "class CH accepted by the parser", S(H_Q N_EX "\x00\x10\x00\x03"), "example.com", 16, 3,
	  false, false, 512, true, 29 },
	{ "tiny payload counts as 512", S(H_QG N_EX T_A "\x00\x00\x29\x00\x10\x00\x00\x00\x00\x00\x00"),
	  "example.com", 1, 1, true, false, 512, true, 29 },
	{ "two options, one empty",
	  S(H_QG N_EX T_A "\x00\x00\x29\x04\xd0\x00\x00\x00\x00\x00\x0a"
			  "\x00\x0c\x00\x00" "\x00\x0a\x00\x02\xaa\xbb"),
	  "example.com", 1, 1, true, false, 1232, true, 29 },
	{ "extended rcode bits ignored, Z bits ignored",
	  S(H_QG N_EX T_A "\x00\x00\x29\x04\xd0\x05\x00\x7f\xff\x00\x00"),
	  "example.com", 1, 1, true, false, 1232, true, 29 },
	{ "ANY", S(H_Q N_EX "\x00\xff\x00\x01"), "example.com", 255, 1, false, false, 512, true,
	  29 },
};
// clang-format on

static void check_good(const good_case *c)
{
	int r = ab_dns_parse_query(c->msg, c->len, &q);
	if (r != 0)
		fail_msg("%s: parse %d (hint %d)", c->desc, r, q.rcode_hint);
	assert_int_equal(q.rcode_hint, 0);
	assert_int_equal(q.id, 0xabcd);
	assert_string_equal(q.name, c->name);
	assert_int_equal(q.qtype, c->qtype);
	assert_int_equal(q.qclass, c->qclass);
	assert_int_equal(q.has_edns, c->edns);
	assert_int_equal(q.edns_do, c->edns_do);
	assert_int_equal(q.edns_udp_size, c->udp);
	assert_int_equal(q.rd, c->rd);
	assert_int_equal(q.question_end, c->qend);
	assert_int_equal(q.flags, (c->msg[2] << 8) | c->msg[3]);
}

static void test_valid(void **state)
{
	for (size_t i = 0; i < AB_ARRAY_SIZE(good); i++)
		check_good(&good[i]);
}

/* Every proper prefix of a valid query is an error: nothing to answer below
 * the header, FORMERR without question from there on (the question or the
 * OPT record is cut). */
static void test_prefixes(void **state)
{
	for (size_t i = 0; i < AB_ARRAY_SIZE(good); i++) {
		for (size_t n = 0; n < good[i].len; n++) {
			int r = ab_dns_parse_query(good[i].msg, n, &q);
			if (r != -EBADMSG)
				fail_msg("%s: prefix %zu gave %d", good[i].desc, n, r);
			assert_int_equal(q.rcode_hint, n < 12 ? -1 : AB_DNS_FORMERR);
			assert_false(q.has_edns);
			if (n < good[i].qend)
				assert_int_equal(q.question_end, 0);
		}
	}
}

/* ------------------------------------------------------------- hostile */

typedef struct {
	const char *desc;
	const uint8_t *msg;
	size_t len;
	int ret;
	int rcode;
	bool echo; /* question parsed (question_end != 0) */
} bad_case;

// clang-format off
static const bad_case bad[] = {
	{ "empty", S(""), -EBADMSG, -1, false },
	{ "11 bytes", S(ID F_RD "\x00\x01\x00\x00\x00\x00\x00"), -EBADMSG, -1, false },
	{ "header only", S(H_Q), -EBADMSG, AB_DNS_FORMERR, false },
	{ "QR=1 (a response)", S(ID "\x81\x00" C_1000 N_EX T_A), -EBADMSG, -1, false },
	{ "QR=1 with opcode", S(ID "\x91\x00" C_1000 N_EX T_A), -EBADMSG, -1, false },
	{ "opcode 1 IQUERY", S(ID "\x09\x00" C_1000 N_EX T_A), -EOPNOTSUPP, AB_DNS_NOTIMP, false },
	{ "opcode 2 STATUS", S(ID "\x11\x00" C_1000 N_EX T_A), -EOPNOTSUPP, AB_DNS_NOTIMP, false },
	{ "opcode 4 NOTIFY", S(ID "\x20\x00" C_1000 N_EX T_A), -EOPNOTSUPP, AB_DNS_NOTIMP, false },
	{ "opcode 5 UPDATE", S(ID "\x28\x00" "\x00\x01\x00\x00\x00\x01\x00\x00" N_EX T_A),
	  -EOPNOTSUPP, AB_DNS_NOTIMP, false },
	{ "opcode 15", S(ID "\x78\x00" C_1000 N_EX T_A), -EOPNOTSUPP, AB_DNS_NOTIMP, false },
	{ "TC=1", S(ID "\x03\x00" C_1000 N_EX T_A), -EBADMSG, AB_DNS_FORMERR, false },
	{ "rcode in query", S(ID "\x01\x03" C_1000 N_EX T_A), -EBADMSG, AB_DNS_FORMERR, false },
	{ "QDCOUNT 0", S(ID F_RD "\x00\x00\x00\x00\x00\x00\x00\x00"), -EBADMSG, AB_DNS_FORMERR,
	  false },
	{ "QDCOUNT 0 with OPT", S(ID F_RD "\x00\x00\x00\x00\x00\x00\x00\x01" OPT_GLIBC), -EBADMSG,
	  AB_DNS_FORMERR, false },
	{ "QDCOUNT 2", S(ID F_RD "\x00\x02\x00\x00\x00\x00\x00\x00" N_EX T_A N_EX T_AAAA),
	  -EBADMSG, AB_DNS_FORMERR, false },
	{ "QDCOUNT 65535", S(ID F_RD "\xff\xff\x00\x00\x00\x00\x00\x00" N_EX T_A), -EBADMSG,
	  AB_DNS_FORMERR, false },
	{ "ANCOUNT 1", S(ID F_RD "\x00\x01\x00\x01\x00\x00\x00\x00" N_EX T_A
			 "\xc0\x0c\x00\x01\x00\x01\x00\x00\x00\x3c\x00\x04\x01\x02\x03\x04"),
	  -EBADMSG, AB_DNS_FORMERR, false },
	{ "NSCOUNT 1", S(ID F_RD "\x00\x01\x00\x00\x00\x01\x00\x00" N_EX T_A), -EBADMSG,
	  AB_DNS_FORMERR, false },
	{ "ARCOUNT 2 (two OPT)", S(ID F_RD "\x00\x01\x00\x00\x00\x00\x00\x02" N_EX T_A OPT_GLIBC
				   OPT_GLIBC),
	  -EBADMSG, AB_DNS_FORMERR, false },
	{ "two OPT, ARCOUNT 1", S(H_QG N_EX T_A OPT_GLIBC OPT_GLIBC), -EBADMSG, AB_DNS_FORMERR,
	  true },
	{ "compression pointer to itself", S(H_Q "\xc0\x0c" T_A), -EBADMSG, AB_DNS_FORMERR, false },
	{ "compression pointer after a label", S(H_Q "\x03" "www" "\xc0\x0c" T_A), -EBADMSG,
	  AB_DNS_FORMERR, false },
	{ "compression pointer forward", S(H_Q "\xc0\x12" T_A N_EX), -EBADMSG, AB_DNS_FORMERR,
	  false },
	{ "extended label type 0x40", S(H_Q "\x41" "a" "\x00" T_A), -EBADMSG, AB_DNS_FORMERR, false },
	{ "reserved label type 0x80", S(H_Q "\x81" "a" "\x00" T_A), -EBADMSG, AB_DNS_FORMERR,
	  false },
	{ "label runs past the end", S(H_Q "\x3f" "abc"), -EBADMSG, AB_DNS_FORMERR, false },
	{ "name without terminator", S(H_Q "\x07" "example" "\x03" "com"), -EBADMSG,
	  AB_DNS_FORMERR, false },
	{ "missing qtype/qclass", S(H_Q N_EX), -EBADMSG, AB_DNS_FORMERR, false },
	{ "half qclass", S(H_Q N_EX "\x00\x01\x00"), -EBADMSG, AB_DNS_FORMERR, false },
	{ "qtype OPT", S(H_Q N_EX "\x00\x29\x00\x01"), -EBADMSG, AB_DNS_FORMERR, false },
	{ "trailing byte", S(H_Q N_EX T_A "\x00"), -EBADMSG, AB_DNS_FORMERR, true },
	{ "trailing garbage after OPT", S(H_QG N_EX T_A OPT_GLIBC "garbage"), -EBADMSG,
	  AB_DNS_FORMERR, true },
	{ "ARCOUNT 1 but no record", S(H_QG N_EX T_A), -EBADMSG, AB_DNS_FORMERR, true },
	{ "OPT with non-root owner",
	  S(H_QG N_EX T_A "\x01" "a" "\x00" "\x00\x29\x04\xd0\x00\x00\x00\x00\x00\x00"), -EBADMSG,
	  AB_DNS_FORMERR, true },
	{ "OPT owner as pointer", S(H_QG N_EX T_A "\xc0\x0c" "\x00\x29\x04\xd0\x00\x00\x00\x00\x00\x00"),
	  -EBADMSG, AB_DNS_FORMERR, true },
	{ "additional record not OPT (TSIG)",
	  S(H_QG N_EX T_A "\x00" "\x00\xfa\x00\xff\x00\x00\x00\x00\x00\x00"), -EBADMSG,
	  AB_DNS_FORMERR, true },
	{ "additional A record", S(H_QG N_EX T_A "\x00" "\x00\x01\x00\x01\x00\x00\x00\x00\x00\x00"),
	  -EBADMSG, AB_DNS_FORMERR, true },
	{ "OPT rdlength past the end", S(H_QG N_EX T_A "\x00\x00\x29\x04\xd0\x00\x00\x00\x00\x00\x05"
				       "\x00\x0a"),
	  -EBADMSG, AB_DNS_FORMERR, true },
	{ "OPT option length past rdlength",
	  S(H_QG N_EX T_A "\x00\x00\x29\x04\xd0\x00\x00\x00\x00\x00\x06" "\x00\x0a\x00\x08\x01\x02"),
	  -EBADMSG, AB_DNS_FORMERR, true },
	{ "OPT option header cut",
	  S(H_QG N_EX T_A "\x00\x00\x29\x04\xd0\x00\x00\x00\x00\x00\x03" "\x00\x0a\x00"), -EBADMSG,
	  AB_DNS_FORMERR, true },
	{ "OPT version 1", S(H_QE N_EX T_A "\x00\x00\x29\x04\xd0\x00\x01\x00\x00\x00\x00"),
	  -EPROTONOSUPPORT, AB_DNS_BADVERS, true },
	{ "OPT version 1 and trailing garbage",
	  S(H_QE N_EX T_A "\x00\x00\x29\x04\xd0\x00\x01\x00\x00\x00\x00" "x"), -EBADMSG,
	  AB_DNS_FORMERR, true },
	{ "NUL inside a label", S(H_Q "\x03" "a\0b" "\x03" "com" "\x00" T_A), -EINVAL,
	  AB_DNS_NXDOMAIN, true },
	{ "dot inside a label", S(H_Q "\x0b" "example.com" "\x00" T_A), -EINVAL, AB_DNS_NXDOMAIN,
	  true },
	{ "0x80 inside a label", S(H_Q "\x04" "ab\x80" "c" "\x03" "com" "\x00" T_A), -EINVAL,
	  AB_DNS_NXDOMAIN, true },
	{ "UTF-8 inside a label", S(H_Q "\x05" "caf\xc3\xa9" "\x03" "com" "\x00" T_A), -EINVAL,
	  AB_DNS_NXDOMAIN, true },
	{ "space inside a label", S(H_Q "\x03" "a b" "\x03" "com" "\x00" T_A), -EINVAL,
	  AB_DNS_NXDOMAIN, true },
	{ "wildcard label", S(H_Q "\x01" "*" "\x07" "example" "\x03" "com" "\x00" T_A), -EINVAL,
	  AB_DNS_NXDOMAIN, true },
	{ "bad byte and version 1", S(H_QE "\x03" "a b" "\x00" T_A
				      "\x00\x00\x29\x04\xd0\x00\x01\x00\x00\x00\x00"),
	  -EPROTONOSUPPORT, AB_DNS_BADVERS, true },
	{ "bad byte and trailing garbage", S(H_Q "\x03" "a b" "\x00" T_A "x"), -EBADMSG,
	  AB_DNS_FORMERR, true },
	{ "63-byte label length, message ends", S(H_Q "\x3f"), -EBADMSG, AB_DNS_FORMERR,
	  false },
};
// clang-format on

static void test_hostile(void **state)
{
	for (size_t i = 0; i < AB_ARRAY_SIZE(bad); i++) {
		const bad_case *c = &bad[i];
		int r = ab_dns_parse_query(c->msg, c->len, &q);
		if (r != c->ret || q.rcode_hint != c->rcode || (q.question_end != 0) != c->echo)
			fail_msg("%s: ret %d hint %d qend %zu, want %d %d %s", c->desc, r,
				 q.rcode_hint, q.question_end, c->ret, c->rcode,
				 c->echo ? "echo" : "no echo");
		if (c->len >= 12)
			assert_int_equal(q.id, 0xabcd);
		if (!c->echo)
			assert_string_equal(q.name, "");
		if (c->rcode == AB_DNS_FORMERR)
			assert_false(q.has_edns);
		if (c->rcode == AB_DNS_BADVERS)
			assert_true(q.has_edns);
	}
}

static void test_bad_name_logged(void **state)
{
	assert_int_equal(ab_dns_parse_query(S(H_Q "\x05"
						  "A\x00"
						  "b.C"
						  "\x03"
						  "COM"
						  "\x00" T_A),
					    &q),
			 -EINVAL);
	assert_string_equal(q.name, "a?b?c.com"); /* NUL and '.' both read '?' */
	assert_int_equal(q.question_end, 12 + 11 + 4);
}

static void test_too_big(void **state)
{
	static uint8_t big[AB_DNS_MAX_MSG + 1];
	static const uint8_t base[] = H_QG N_EX T_A OPT_GLIBC;
	size_t opt_rdlen_at = sizeof(base) - 1 - 2;

	/* pad with one option so the message is exactly AB_DNS_MAX_MSG */
	memset(big, 0, sizeof(big));
	memcpy(big, base, sizeof(base) - 1);
	size_t pad = AB_DNS_MAX_MSG - (sizeof(base) - 1);
	big[opt_rdlen_at] = (uint8_t)(pad >> 8);
	big[opt_rdlen_at + 1] = (uint8_t)pad;
	big[sizeof(base) - 1 + 1] = 0x0c; /* option 12 (padding) */
	big[sizeof(base) - 1 + 2] = (uint8_t)((pad - 4) >> 8);
	big[sizeof(base) - 1 + 3] = (uint8_t)(pad - 4);
	assert_int_equal(ab_dns_parse_query(big, AB_DNS_MAX_MSG, &q), 0);
	assert_true(q.has_edns);

	assert_int_equal(ab_dns_parse_query(big, AB_DNS_MAX_MSG + 1, &q), -EMSGSIZE);
	assert_int_equal(q.rcode_hint, AB_DNS_FORMERR);
	assert_int_equal(q.id, 0xabcd);
	assert_int_equal(q.question_end, 0);

	/* many tiny options: the count limit */
	static uint8_t many[512];
	memcpy(many, base, sizeof(base) - 1);
	for (unsigned n = AB_DNS_MAX_OPTIONS; n <= AB_DNS_MAX_OPTIONS + 1; n++) {
		size_t len = sizeof(base) - 1 + 4 * n;
		memset(many + sizeof(base) - 1, 0, 4 * n);
		many[opt_rdlen_at] = (uint8_t)((4 * n) >> 8);
		many[opt_rdlen_at + 1] = (uint8_t)(4 * n);
		int r = ab_dns_parse_query(many, len, &q);
		assert_int_equal(r, n <= AB_DNS_MAX_OPTIONS ? 0 : -EBADMSG);
	}
}

/* ------------------------------------------------------------- limits */

/* Query with labels of the given lengths (all 'a'..), type A. */
static size_t make_query(uint8_t *buf, const unsigned *labels, size_t n)
{
	static const uint8_t hdr[] = H_Q;
	size_t p = sizeof(hdr) - 1;
	memcpy(buf, hdr, p);
	for (size_t i = 0; i < n; i++) {
		buf[p++] = (uint8_t)labels[i];
		memset(buf + p, 'a' + (int)(i % 26), labels[i]);
		p += labels[i];
	}
	buf[p++] = 0;
	memcpy(buf + p, T_A, 4);
	return p + 4;
}

static void test_label_and_name_limits(void **state)
{
	static const struct {
		unsigned labels[8];
		size_t n;
		size_t text_len; /* 0: refused with FORMERR */
	} cases[] = {
		{{63}, 1, 63},
		{{64}, 1, 0},               /* a 0x40 length byte: extended label type */
		{{63, 63, 63, 61}, 4, 253}, /* 255 wire bytes */
		{{63, 63, 63, 62}, 4, 0},   /* 256 wire bytes */
		{{63, 63, 63, 63}, 4, 0},
		{{63, 63, 63, 60, 0}, 4, 252},
		{{1, 1, 1, 1, 1, 1, 1, 1}, 8, 15},
	};
	uint8_t buf[600];

	for (size_t i = 0; i < AB_ARRAY_SIZE(cases); i++) {
		size_t len = make_query(buf, cases[i].labels, cases[i].n);
		int r = ab_dns_parse_query(buf, len, &q);
		if (cases[i].text_len) {
			assert_int_equal(r, 0);
			assert_int_equal(strlen(q.name), cases[i].text_len);
		} else {
			assert_int_equal(r, -EBADMSG);
			assert_int_equal(q.rcode_hint, AB_DNS_FORMERR);
			assert_string_equal(q.name, "");
		}
	}

	/* 127 one-byte labels: 255 wire bytes, the most labels there can be */
	unsigned ones[128];
	for (size_t i = 0; i < 128; i++)
		ones[i] = 1;
	assert_int_equal(ab_dns_parse_query(buf, make_query(buf, ones, 127), &q), 0);
	assert_int_equal(strlen(q.name), 253);
	assert_int_equal(ab_dns_parse_query(buf, make_query(buf, ones, 128), &q), -EBADMSG);
}

/* Every byte value inside a label: only [A-Za-z0-9_-] parse. */
static void test_every_label_byte(void **state)
{
	uint8_t buf[64];
	static const uint8_t hdr[] = H_Q;

	for (unsigned c = 0; c < 256; c++) {
		size_t p = sizeof(hdr) - 1;
		memcpy(buf, hdr, p);
		buf[p++] = 3;
		buf[p++] = 'a';
		buf[p++] = (uint8_t)c;
		buf[p++] = 'z';
		buf[p++] = 0;
		memcpy(buf + p, T_A, 4);
		p += 4;
		int r = ab_dns_parse_query(buf, p, &q);
		bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			  (c >= '0' && c <= '9') || c == '-' || c == '_';
		if (ok) {
			char want[4] = {'a', (char)(c >= 'A' && c <= 'Z' ? c + 32 : c), 'z', 0};
			assert_int_equal(r, 0);
			assert_string_equal(q.name, want);
		} else {
			if (r != -EINVAL)
				fail_msg("byte 0x%02x: %d", c, r);
			assert_int_equal(q.rcode_hint, AB_DNS_NXDOMAIN);
			assert_string_equal(q.name, "a?z");
		}
	}
}

/* ------------------------------------------------------------- builders */

static const uint8_t addr[4] = {198, 18, 0, 5};

static void assert_bytes(const uint8_t *got, int len, const uint8_t *want, size_t wlen)
{
	if (len < 0 || (size_t)len != wlen || memcmp(got, want, wlen) != 0) {
		char hex[1024] = "";
		for (int i = 0; len > 0 && i < len && i < 300; i++)
			snprintf(hex + strlen(hex), sizeof(hex) - strlen(hex), "%02x", got[i]);
		fail_msg("response %d bytes (want %zu): %s", len, wlen, hex);
	}
}

typedef struct {
	const char *desc;
	const uint8_t *query;
	size_t qlen;
	int rcode; /* -1: an A answer */
	const uint8_t *want;
	size_t wlen;
} resp_case;

#define ANS_A              \
	"\xc0\x0c"         \
	"\x00\x01\x00\x01" \
	"\x00\x00\x00\x3c" \
	"\x00\x04"         \
	"\xc6\x12\x00\x05"

// clang-format off
static const resp_case resps[] = {
	{ "A, glibc", S(H_Q N_EX T_A), -1,
	  S(ID "\x85\x00" "\x00\x01\x00\x01\x00\x00\x00\x00" N_EX T_A ANS_A) },
	{ "A, dig with EDNS (AD not copied, cookie not echoed)", S(H_QE N_EX T_A OPT_DIG), -1,
	  S(ID "\x85\x00" "\x00\x01\x00\x01\x00\x00\x00\x01" N_EX T_A ANS_A OPT_OURS) },
	{ "A, 0x20 casing kept", S(H_Q "\x07" "ExAmPlE" "\x03" "cOm" "\x00" T_A), -1,
	  S(ID "\x85\x00" "\x00\x01\x00\x01\x00\x00\x00\x00" "\x07" "ExAmPlE" "\x03" "cOm" "\x00"
	    T_A ANS_A) },
	{ "A, DO and CD copied, no RD",
	  S(ID "\x00\x10" C_1001 N_EX T_A "\x00\x00\x29\x02\x00\x00\x00\x80\x00\x00\x00"), -1,
	  S(ID "\x84\x10" "\x00\x01\x00\x01\x00\x00\x00\x01" N_EX T_A ANS_A
	    "\x00\x00\x29\x04\xd0\x00\x00\x80\x00\x00\x00") },
	{ "A for ANY", S(H_Q N_EX "\x00\xff\x00\x01"), -1,
	  S(ID "\x85\x00" "\x00\x01\x00\x01\x00\x00\x00\x00" N_EX "\x00\xff\x00\x01" ANS_A) },
	{ "NXDOMAIN, glibc", S(H_Q N_EX T_A), AB_DNS_NXDOMAIN,
	  S(ID "\x85\x03" "\x00\x01\x00\x00\x00\x00\x00\x00" N_EX T_A) },
	{ "NXDOMAIN, dig with EDNS", S(H_QE N_EX T_A OPT_DIG), AB_DNS_NXDOMAIN,
	  S(ID "\x85\x03" "\x00\x01\x00\x00\x00\x00\x00\x01" N_EX T_A OPT_OURS) },
	{ "NOERROR no data for AAAA", S(H_Q N_EX T_AAAA), AB_DNS_NOERROR,
	  S(ID "\x85\x00" "\x00\x01\x00\x00\x00\x00\x00\x00" N_EX T_AAAA) },
	{ "REFUSED (not authoritative)", S(H_Q N_EX "\x00\x10\x00\x03"), AB_DNS_REFUSED,
	  S(ID "\x81\x05" "\x00\x01\x00\x00\x00\x00\x00\x00" N_EX "\x00\x10\x00\x03") },
	{ "SERVFAIL", S(H_QE N_EX T_A OPT_DIG), AB_DNS_SERVFAIL,
	  S(ID "\x81\x02" "\x00\x01\x00\x00\x00\x00\x00\x01" N_EX T_A OPT_OURS) },
};
// clang-format on

static void test_responses(void **state)
{
	uint8_t out[600];
	for (size_t i = 0; i < AB_ARRAY_SIZE(resps); i++) {
		const resp_case *c = &resps[i];
		if (ab_dns_parse_query(c->query, c->qlen, &q) != 0)
			fail_msg("%s: parse failed", c->desc);
		int n = c->rcode < 0
				? ab_dns_build_answer_a(&q, c->query, addr, 60, out, sizeof(out))
				: ab_dns_build_rcode(&q, c->query, c->rcode, out, sizeof(out));
		assert_bytes(out, n, c->want, c->wlen);
	}
}

/* Answers to refused queries, from the hint the parser gave. */
// clang-format off
static const resp_case err_resps[] = {
	{ "FORMERR for QDCOUNT 2: header only",
	  S(ID F_RD "\x00\x02\x00\x00\x00\x00\x00\x00" N_EX T_A N_EX T_A), AB_DNS_FORMERR,
	  S(ID "\x81\x01" "\x00\x00\x00\x00\x00\x00\x00\x00") },
	{ "FORMERR for a pointer: header only, no OPT", S(H_QE "\xc0\x0c" T_A OPT_DIG),
	  AB_DNS_FORMERR, S(ID "\x81\x01" "\x00\x00\x00\x00\x00\x00\x00\x00") },
	{ "FORMERR for trailing garbage: question echoed, no OPT",
	  S(H_QE N_EX T_A OPT_DIG "zz"), AB_DNS_FORMERR,
	  S(ID "\x81\x01" "\x00\x01\x00\x00\x00\x00\x00\x00" N_EX T_A) },
	{ "NOTIMP for STATUS: opcode kept", S(ID "\x11\x00" C_1000 N_EX T_A), AB_DNS_NOTIMP,
	  S(ID "\x91\x04" "\x00\x00\x00\x00\x00\x00\x00\x00") },
	{ "BADVERS: rcode 0 in header, 1 in OPT", S(H_QE N_EX T_A
		"\x00\x00\x29\x04\xd0\x00\x01\x00\x00\x00\x00"), AB_DNS_BADVERS,
	  S(ID "\x81\x00" "\x00\x01\x00\x00\x00\x00\x00\x01" N_EX T_A
	    "\x00\x00\x29\x04\xd0\x01\x00\x00\x00\x00\x00") },
	{ "NXDOMAIN for a space in a label: question echoed",
	  S(H_Q "\x03" "a b" "\x00" T_A), AB_DNS_NXDOMAIN,
	  S(ID "\x85\x03" "\x00\x01\x00\x00\x00\x00\x00\x00" "\x03" "a b" "\x00" T_A) },
};
// clang-format on

static void test_error_responses(void **state)
{
	uint8_t out[600];
	for (size_t i = 0; i < AB_ARRAY_SIZE(err_resps); i++) {
		const resp_case *c = &err_resps[i];
		int r = ab_dns_parse_query(c->query, c->qlen, &q);
		if (r >= 0 || q.rcode_hint != c->rcode)
			fail_msg("%s: parse %d hint %d", c->desc, r, q.rcode_hint);
		assert_bytes(out, ab_dns_build_rcode(&q, c->query, q.rcode_hint, out, sizeof(out)),
			     c->want, c->wlen);
		/* and never an A answer */
		assert_int_equal(ab_dns_build_answer_a(&q, c->query, addr, 60, out, sizeof(out)),
				 -EINVAL);
	}
}

static void test_builder_refusals(void **state)
{
	uint8_t out[600];
	static const uint8_t aaaa[] = H_Q N_EX T_AAAA, ch[] = H_Q N_EX "\x00\x01\x00\x03",
			     resp[] = ID "\x81\x00" C_1000 N_EX T_A, a[] = H_Q N_EX T_A;

	assert_int_equal(ab_dns_parse_query(aaaa, sizeof(aaaa) - 1, &q), 0);
	assert_int_equal(ab_dns_build_answer_a(&q, aaaa, addr, 60, out, sizeof(out)), -EINVAL);
	assert_int_equal(ab_dns_parse_query(ch, sizeof(ch) - 1, &q), 0);
	assert_int_equal(ab_dns_build_answer_a(&q, ch, addr, 60, out, sizeof(out)), -EINVAL);
	/* a response is never answered, whatever the caller asks */
	assert_int_equal(ab_dns_parse_query(resp, sizeof(resp) - 1, &q), -EBADMSG);
	assert_int_equal(q.rcode_hint, -1);
	for (int rc = 0; rc <= 16; rc++)
		assert_int_equal(ab_dns_build_rcode(&q, resp, rc, out, sizeof(out)), -EINVAL);
	assert_int_equal(ab_dns_build_answer_a(&q, resp, addr, 60, out, sizeof(out)), -EINVAL);
	/* rcodes we never send; BADVERS needs EDNS */
	assert_int_equal(ab_dns_parse_query(a, sizeof(a) - 1, &q), 0);
	static const int never[] = {-1, 6, 9, 15, 16, 17, 23, 4096};
	for (size_t i = 0; i < AB_ARRAY_SIZE(never); i++)
		assert_int_equal(ab_dns_build_rcode(&q, a, never[i], out, sizeof(out)), -EINVAL);
	/* NULL arguments */
	assert_int_equal(ab_dns_build_answer_a(&q, NULL, addr, 60, out, sizeof(out)), -EINVAL);
	assert_int_equal(ab_dns_build_answer_a(&q, a, NULL, 60, out, sizeof(out)), -EINVAL);
	assert_int_equal(ab_dns_build_answer_a(NULL, a, addr, 60, out, sizeof(out)), -EINVAL);
	assert_int_equal(ab_dns_build_rcode(NULL, a, 3, out, sizeof(out)), -EINVAL);
	/* a TTL with the top bit set is clamped (RFC 2181 would read it as 0) */
	int n = ab_dns_build_answer_a(&q, a, addr, 0xffffffffu, out, sizeof(out));
	assert_int_equal(n, 29 + 16);
	assert_memory_equal(out + 29 + 6, "\x7f\xff\xff\xff", 4);
}

/* Every capacity below the need gives -ENOBUFS and writes nothing; the
 * exact need works. */
static void test_buffer_sizes(void **state)
{
	static const uint8_t longest_name[] =
		H_QE "\x3f"
		     "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
		     "\x3f"
		     "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
		     "\x3f"
		     "ccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc"
		     "\x3d"
		     "ddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddd"
		     "\x00" T_A OPT_DIG;
	uint8_t out[AB_DNS_MAX_RESPONSE + 16];

	assert_int_equal(ab_dns_parse_query(longest_name, sizeof(longest_name) - 1, &q), 0);
	assert_int_equal(strlen(q.name), 253);
	for (int kind = 0; kind < 2; kind++) {
		int need =
			kind ? ab_dns_build_rcode(&q, longest_name, 3, out, sizeof(out))
			     : ab_dns_build_answer_a(&q, longest_name, addr, 1, out, sizeof(out));
		assert_true(need > 0);
		if (!kind)
			assert_int_equal(need, AB_DNS_MAX_RESPONSE);
		for (int cap = 0; cap < need; cap++) {
			memset(out, 0x5a, sizeof(out));
			int r = kind ? ab_dns_build_rcode(&q, longest_name, 3, out, (size_t)cap)
				     : ab_dns_build_answer_a(&q, longest_name, addr, 1, out,
							     (size_t)cap);
			assert_int_equal(r, -ENOBUFS);
			for (size_t i = 0; i < sizeof(out); i++)
				assert_int_equal(out[i], 0x5a);
		}
		int r = kind ? ab_dns_build_rcode(&q, longest_name, 3, out, (size_t)need)
			     : ab_dns_build_answer_a(&q, longest_name, addr, 1, out, (size_t)need);
		assert_int_equal(r, need);
	}
}

/* ------------------------------------------------------------- TCP */

static void test_tcp_frame(void **state)
{
	uint8_t buf[AB_DNS_MAX_MSG + 8];
	size_t off = 99, len = 99;

	for (size_t i = 0; i < AB_ARRAY_SIZE(good); i++) {
		size_t n = good[i].len;
		buf[0] = (uint8_t)(n >> 8);
		buf[1] = (uint8_t)n;
		memcpy(buf + 2, good[i].msg, n);
		buf[2 + n] = 0x00; /* start of a pipelined next frame */
		for (size_t k = 0; k < n + 2; k++)
			assert_int_equal(ab_dns_tcp_frame(buf, k, &off, &len), 0);
		for (size_t k = n + 2; k <= n + 3; k++) {
			assert_int_equal(ab_dns_tcp_frame(buf, k, &off, &len), 1);
			assert_int_equal(off, 2);
			assert_int_equal(len, n);
			assert_int_equal(ab_dns_parse_query(buf + off, len, &q), 0);
		}
	}
	static const struct {
		uint8_t p[2];
		int r;
	} pre[] = {
		{{0x00, 0x00}, -EMSGSIZE}, {{0x10, 0x00}, 0}, /* 4096: allowed, needs more */
		{{0x10, 0x01}, -EMSGSIZE},                    /* 4097 */
		{{0xff, 0xff}, -EMSGSIZE}, {{0x00, 0x01}, 0},
	};
	for (size_t i = 0; i < AB_ARRAY_SIZE(pre); i++)
		assert_int_equal(ab_dns_tcp_frame(pre[i].p, 2, &off, &len), pre[i].r);
	assert_int_equal(ab_dns_tcp_frame(NULL, 0, &off, &len), 0);
	assert_int_equal(ab_dns_tcp_frame(pre[0].p, 1, &off, &len), 0);
}

/* ------------------------------------------------------------- names */

static void test_names(void **state)
{
	assert_string_equal(ab_dns_type_name(1), "A");
	assert_string_equal(ab_dns_type_name(28), "AAAA");
	assert_string_equal(ab_dns_type_name(65), "HTTPS");
	assert_string_equal(ab_dns_type_name(64), "SVCB");
	assert_string_equal(ab_dns_type_name(15), "MX");
	assert_string_equal(ab_dns_type_name(16), "TXT");
	assert_string_equal(ab_dns_type_name(255), "ANY");
	assert_string_equal(ab_dns_type_name(0), "other");
	assert_string_equal(ab_dns_type_name(65535), "other");
	assert_string_equal(ab_dns_rcode_name(0), "NOERROR");
	assert_string_equal(ab_dns_rcode_name(3), "NXDOMAIN");
	assert_string_equal(ab_dns_rcode_name(16), "BADVERS");
	assert_string_equal(ab_dns_rcode_name(-1), "other");
	assert_string_equal(ab_dns_rcode_name(7), "other");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_valid),
		cmocka_unit_test(test_prefixes),
		cmocka_unit_test(test_hostile),
		cmocka_unit_test(test_bad_name_logged),
		cmocka_unit_test(test_too_big),
		cmocka_unit_test(test_label_and_name_limits),
		cmocka_unit_test(test_every_label_byte),
		cmocka_unit_test(test_responses),
		cmocka_unit_test(test_error_responses),
		cmocka_unit_test(test_builder_refusals),
		cmocka_unit_test(test_buffer_sizes),
		cmocka_unit_test(test_tcp_frame),
		cmocka_unit_test(test_names),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
