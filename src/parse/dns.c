/* SPDX-License-Identifier: MIT */
/*
 * dns.c (parent: the in-sandbox DNS responder of the egress proxy; pure, any
 * process): parse one DNS query (RFC 1035, EDNS per RFC 6891) and build the
 * few responses the responder ever sends.  Untrusted bytes in, no I/O, no
 * allocation, no state; every read is bounds-checked against the message
 * length and every count is limited.  What is accepted and refused is listed
 * at the top of include/agentbox/dns.h.
 */
#include "agentbox/dns.h"

#include <errno.h>
#include <string.h>

#define HDR_LEN 12
#define OPT_LEN 11  /* root owner, type, class, ttl, rdlength */
#define A_RR_LEN 16 /* pointer, type, class, ttl, rdlength, 4 bytes */
#define MAX_WIRE_NAME 255
#define MAX_LABEL 63

/* header flag bits */
#define F_QR 0x8000u
#define F_OPCODE 0x7800u
#define F_AA 0x0400u
#define F_TC 0x0200u
#define F_RD 0x0100u
#define F_CD 0x0010u
#define F_RCODE 0x000fu

static uint16_t rd16(const uint8_t *p)
{
	return (uint16_t)((p[0] << 8) | p[1]);
}

static uint32_t rd32(const uint8_t *p)
{
	return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

static uint8_t *wr16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
	return p + 2;
}

static uint8_t *wr32(uint8_t *p, uint32_t v)
{
	p = wr16(p, (uint16_t)(v >> 16));
	return wr16(p, (uint16_t)v);
}

/* Record the outcome; FORMERR responses never carry an OPT record. */
static int refuse(ab_dns_query *q, int err, int rcode)
{
	q->rcode_hint = rcode;
	if (rcode == AB_DNS_FORMERR)
		q->has_edns = false;
	return err;
}

/* A byte a hostname label may carry; letters come back lower-cased, others
 * as 0. */
static char host_char(uint8_t c)
{
	if (c >= 'A' && c <= 'Z')
		return (char)(c - 'A' + 'a');
	if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_')
		return (char)c;
	return 0;
}

/* The question name at *off: uncompressed labels only.  Fills q->name.
 * Returns 0, -EBADMSG (malformed: FORMERR) or -EINVAL (well-formed but a byte
 * no hostname has; the name is complete, with '?' for such bytes). */
static int parse_name(const uint8_t *msg, size_t len, size_t *off, ab_dns_query *q)
{
	size_t p = *off, wire = 0, t = 0;
	bool bad = false;

	for (;;) {
		if (p >= len)
			return -EBADMSG;
		uint8_t l = msg[p++];
		if (l == 0)
			break;
		if (l & 0xc0) /* 0xc0 pointer, 0x40/0x80 extended label types */
			return -EBADMSG;
		wire += 1u + l; /* l <= 63 here */
		if (wire + 1 > MAX_WIRE_NAME || l > len - p)
			return -EBADMSG;
		if (t > 0)
			q->name[t++] = '.';
		for (size_t i = 0; i < l; i++) {
			char c = host_char(msg[p + i]);
			if (!c) {
				bad = true;
				c = '?';
			}
			q->name[t++] = c;
		}
		p += l;
	}
	q->name[t] = '\0'; /* t = wire - 1 <= 253 */
	*off = p;
	return bad ? -EINVAL : 0;
}

/* The EDNS options in msg[p..end): {code, length, data}, exactly filling it. */
static int check_options(const uint8_t *msg, size_t p, size_t end)
{
	for (unsigned n = 0; p < end; n++) {
		if (n >= AB_DNS_MAX_OPTIONS || end - p < 4)
			return -EBADMSG;
		size_t olen = rd16(msg + p + 2);
		p += 4;
		if (olen > end - p)
			return -EBADMSG;
		p += olen;
	}
	return 0;
}

/* The one additional record at *off, which must be an OPT.  Returns 0, or
 * -EBADMSG; *version gets the EDNS version. */
static int parse_opt(const uint8_t *msg, size_t len, size_t *off, ab_dns_query *q,
		     unsigned *version)
{
	size_t p = *off;

	if (len - p < OPT_LEN || msg[p] != 0 || rd16(msg + p + 1) != AB_DNS_TYPE_OPT)
		return -EBADMSG;
	uint16_t udp = rd16(msg + p + 3);
	uint32_t ttl = rd32(msg + p + 5);
	size_t rdlen = rd16(msg + p + 9);
	p += OPT_LEN;
	if (rdlen > len - p || check_options(msg, p, p + rdlen) < 0)
		return -EBADMSG;
	*off = p + rdlen;
	*version = (ttl >> 16) & 0xff;
	q->has_edns = true;
	q->edns_do = (ttl & 0x8000u) != 0;
	q->edns_udp_size = udp < 512 ? 512 : udp;
	return 0;
}

/* The fixed header: everything that can be refused before the question. */
static int parse_header(const uint8_t *msg, size_t len, ab_dns_query *q)
{
	q->id = rd16(msg);
	q->flags = rd16(msg + 2);
	q->rd = (q->flags & F_RD) != 0;
	if (q->flags & F_QR)
		return refuse(q, -EBADMSG, -1);
	if (len > AB_DNS_MAX_MSG)
		return refuse(q, -EMSGSIZE, AB_DNS_FORMERR);
	if (q->flags & F_OPCODE)
		return refuse(q, -EOPNOTSUPP, AB_DNS_NOTIMP);
	if ((q->flags & (F_TC | F_RCODE)) || rd16(msg + 4) != 1 || rd16(msg + 6) != 0 ||
	    rd16(msg + 8) != 0 || rd16(msg + 10) > 1)
		return refuse(q, -EBADMSG, AB_DNS_FORMERR);
	return 0;
}

int ab_dns_parse_query(const uint8_t *msg, size_t len, ab_dns_query *q)
{
	size_t off = HDR_LEN;
	unsigned version = 0;

	memset(q, 0, sizeof(*q));
	q->edns_udp_size = 512;
	if (!msg || len < HDR_LEN)
		return refuse(q, -EBADMSG, -1);
	int r = parse_header(msg, len, q);
	if (r < 0)
		return r;

	int name_r = parse_name(msg, len, &off, q);
	if (name_r == -EBADMSG || len - off < 4) {
		q->name[0] = '\0';
		return refuse(q, -EBADMSG, AB_DNS_FORMERR);
	}
	q->qtype = rd16(msg + off);
	q->qclass = rd16(msg + off + 2);
	off += 4;
	if (q->qtype == AB_DNS_TYPE_OPT) {
		q->name[0] = '\0';
		return refuse(q, -EBADMSG, AB_DNS_FORMERR);
	}
	q->question_end = off;

	if (rd16(msg + 10) == 1 && parse_opt(msg, len, &off, q, &version) < 0)
		return refuse(q, -EBADMSG, AB_DNS_FORMERR);
	if (off != len)
		return refuse(q, -EBADMSG, AB_DNS_FORMERR);
	if (version != 0)
		return refuse(q, -EPROTONOSUPPORT, AB_DNS_BADVERS);
	if (name_r < 0)
		return refuse(q, -EINVAL, AB_DNS_NXDOMAIN);
	q->rcode_hint = 0;
	return 0;
}

/* ---------------------------------------------------------------- builders */

static bool question_ok(const ab_dns_query *q)
{
	/* root name (1 byte) + type + class at least, within what we accept */
	return q->question_end >= HDR_LEN + 5 && q->question_end <= HDR_LEN + MAX_WIRE_NAME + 4;
}

static uint8_t *put_header(uint8_t *p, uint16_t id, uint16_t flags, uint16_t qd, uint16_t an,
			   uint16_t ar)
{
	p = wr16(p, id);
	p = wr16(p, flags);
	p = wr16(p, qd);
	p = wr16(p, an);
	p = wr16(p, 0);
	return wr16(p, ar);
}

/* Our OPT record: root owner, type 41, payload size, extended rcode, version
 * 0, DO copied, no options. */
static uint8_t *put_opt(uint8_t *p, const ab_dns_query *q, int rcode)
{
	*p++ = 0;
	p = wr16(p, AB_DNS_TYPE_OPT);
	p = wr16(p, AB_DNS_EDNS_UDP_SIZE);
	p = wr32(p, ((uint32_t)(rcode >> 4) << 24) | (q->edns_do ? 0x8000u : 0));
	return wr16(p, 0);
}

int ab_dns_build_answer_a(const ab_dns_query *q, const uint8_t *msg, const uint8_t addr[4],
			  uint32_t ttl, uint8_t *out, size_t cap)
{
	if (!q || !msg || !addr || !out || q->rcode_hint != 0 || !question_ok(q))
		return -EINVAL;
	if ((q->qtype != AB_DNS_TYPE_A && q->qtype != AB_DNS_TYPE_ANY) ||
	    (q->qclass != AB_DNS_CLASS_IN && q->qclass != AB_DNS_CLASS_ANY))
		return -EINVAL;
	size_t need = q->question_end + A_RR_LEN + (q->has_edns ? OPT_LEN : 0);
	if (cap < need)
		return -ENOBUFS;

	uint16_t flags = (uint16_t)(F_QR | F_AA | (q->flags & (F_RD | F_CD)));
	uint8_t *p = put_header(out, q->id, flags, 1, 1, q->has_edns ? 1 : 0);
	memcpy(p, msg + HDR_LEN, q->question_end - HDR_LEN);
	p += q->question_end - HDR_LEN;
	p = wr16(p, 0xc000 | HDR_LEN); /* the question name */
	p = wr16(p, AB_DNS_TYPE_A);
	p = wr16(p, AB_DNS_CLASS_IN);
	p = wr32(p, ttl > 0x7fffffffu ? 0x7fffffffu : ttl);
	p = wr16(p, 4);
	memcpy(p, addr, 4);
	p += 4;
	if (q->has_edns)
		p = put_opt(p, q, AB_DNS_NOERROR);
	return (int)(p - out);
}

int ab_dns_build_rcode(const ab_dns_query *q, const uint8_t *msg, int rcode, uint8_t *out,
		       size_t cap)
{
	if (!q || !out || q->rcode_hint < 0)
		return -EINVAL;
	switch (rcode) {
	case AB_DNS_NOERROR:
	case AB_DNS_FORMERR:
	case AB_DNS_SERVFAIL:
	case AB_DNS_NXDOMAIN:
	case AB_DNS_NOTIMP:
	case AB_DNS_REFUSED: break;
	case AB_DNS_BADVERS:
		if (q->has_edns)
			break;
		return -EINVAL;
	default: return -EINVAL;
	}
	bool echo = msg && question_ok(q);
	size_t qlen = echo ? q->question_end - HDR_LEN : 0;
	size_t need = HDR_LEN + qlen + (q->has_edns ? OPT_LEN : 0);
	if (cap < need)
		return -ENOBUFS;

	uint16_t flags = (uint16_t)(F_QR | (q->flags & (F_OPCODE | F_RD | F_CD)) | (rcode & 0xf));
	if (echo && (rcode == AB_DNS_NOERROR || rcode == AB_DNS_NXDOMAIN))
		flags |= F_AA;
	uint8_t *p = put_header(out, q->id, flags, echo ? 1 : 0, 0, q->has_edns ? 1 : 0);
	if (echo) {
		memcpy(p, msg + HDR_LEN, qlen);
		p += qlen;
	}
	if (q->has_edns)
		p = put_opt(p, q, rcode);
	return (int)(p - out);
}

int ab_dns_tcp_frame(const uint8_t *buf, size_t len, size_t *msg_off, size_t *msg_len)
{
	if (!buf || len < 2)
		return 0;
	size_t n = rd16(buf);
	if (n == 0 || n > AB_DNS_MAX_MSG)
		return -EMSGSIZE;
	if (len - 2 < n)
		return 0;
	*msg_off = 2;
	*msg_len = n;
	return 1;
}

/* ---------------------------------------------------------------- names */

const char *ab_dns_type_name(uint16_t qtype)
{
	static const struct {
		uint16_t type;
		const char *name;
	} types[] = {
		{1, "A"},      {2, "NS"},    {5, "CNAME"},  {6, "SOA"},    {12, "PTR"},
		{13, "HINFO"}, {15, "MX"},   {16, "TXT"},   {28, "AAAA"},  {33, "SRV"},
		{35, "NAPTR"}, {41, "OPT"},  {43, "DS"},    {46, "RRSIG"}, {48, "DNSKEY"},
		{52, "TLSA"},  {64, "SVCB"}, {65, "HTTPS"}, {251, "IXFR"}, {252, "AXFR"},
		{255, "ANY"},  {257, "CAA"},
	};
	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
		if (types[i].type == qtype)
			return types[i].name;
	return "other";
}

const char *ab_dns_rcode_name(int rcode)
{
	switch (rcode) {
	case AB_DNS_NOERROR: return "NOERROR";
	case AB_DNS_FORMERR: return "FORMERR";
	case AB_DNS_SERVFAIL: return "SERVFAIL";
	case AB_DNS_NXDOMAIN: return "NXDOMAIN";
	case AB_DNS_NOTIMP: return "NOTIMP";
	case AB_DNS_REFUSED: return "REFUSED";
	case AB_DNS_BADVERS: return "BADVERS";
	default: return "other";
	}
}
