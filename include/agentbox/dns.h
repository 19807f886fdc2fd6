/* SPDX-License-Identifier: MIT */
/*
 * dns.h: pure DNS query parser and response builder for the in-sandbox DNS
 * responder of the egress proxy.  No I/O, no allocation, no state.
 * The responder answers allowlisted names with one synthetic IPv4 address
 * (198.18.0.0/15), NXDOMAIN for everything else, and forwards nothing.
 * Queries are hostile input: anything a stub resolver has no reason to send
 * is refused, never repaired.
 *
 * ACCEPTED (ab_dns_parse_query() returns 0, rcode_hint 0):
 *   - 12 <= length <= AB_DNS_MAX_MSG;
 *   - header: QR=0, OPCODE=0 (QUERY), TC=0, RCODE=0, QDCOUNT=1, ANCOUNT=0,
 *     NSCOUNT=0, ARCOUNT 0 or 1.  RD, CD, AD, AA, RA and Z are ignored
 *     (RD and CD are copied into the answer);
 *   - one question: an uncompressed name of labels 1..63 bytes, at most 255
 *     bytes on the wire (= at most 253 characters as text), each label byte a
 *     letter, digit, '-' or '_'; then QTYPE (any but OPT, 41) and QCLASS (any:
 *     the builders only answer IN or ANY);
 *   - when ARCOUNT is 1, exactly one EDNS(0) OPT record: owner the root (a
 *     single 0x00 byte, no pointer), TYPE 41, CLASS = UDP payload size (values
 *     under 512 count as 512), TTL = extended rcode / version 0 / DO / Z,
 *     RDATA a sequence of well-formed {code, length, data} options (at most
 *     AB_DNS_MAX_OPTIONS, contents ignored, so COOKIE etc. are not echoed);
 *   - nothing after the last record.
 *
 * REFUSED (return value, rcode_hint = what to answer, -1 = do not answer):
 *   length < 12                          -EBADMSG   -1 (nothing to answer)
 *   QR=1 (a response: answering it
 *     could loop two responders)         -EBADMSG   -1 (drop silently)
 *   length > AB_DNS_MAX_MSG              -EMSGSIZE  FORMERR, header only
 *   OPCODE != 0 (IQUERY, STATUS, NOTIFY,
 *     UPDATE, ...)                       -EOPNOTSUPP NOTIMP, header only
 *   TC=1, RCODE != 0, QDCOUNT != 1,
 *     ANCOUNT/NSCOUNT != 0, ARCOUNT > 1  -EBADMSG   FORMERR, header only
 *   question truncated, compression
 *     pointer or extended label type
 *     (0x40/0x80) in the name, name over
 *     255 wire bytes, QTYPE OPT          -EBADMSG   FORMERR, header only
 *   additional record not a well-formed
 *     OPT (non-root owner, other type,
 *     truncated, bad option layout, too
 *     many options), or trailing bytes   -EBADMSG   FORMERR, question echoed
 *   OPT version != 0                     -EPROTONOSUPPORT BADVERS (16), with OPT
 *   a label byte outside [A-Za-z0-9_-]
 *     ('.', NUL, space, '*', bytes
 *     >= 0x80, ...): well-formed DNS but
 *     a name no allowlist can hold       -EINVAL    NXDOMAIN, question echoed
 * The first matching row (top to bottom) decides.
 *
 * Responses never exceed 12 + 259 + 16 + 11 = 298 bytes, under the 512 bytes
 * any UDP client accepts, so TC is never needed.  Negative answers carry no
 * SOA, so they are not cached (RFC 2308): an `agentbox allow` takes effect
 * on the next lookup.  Over TCP each message (query and response) is preceded
 * by its length as 2 bytes big-endian: see ab_dns_tcp_frame().
 *
 * Suggested responder policy: rcode_hint < 0 -> drop; parse error -> answer
 * ab_dns_build_rcode(q, msg, q->rcode_hint); parsed: class not IN/ANY ->
 * REFUSED; name not allowed -> NXDOMAIN; allowed and QTYPE A (or ANY) ->
 * ab_dns_build_answer_a(); allowed, other QTYPE (AAAA, HTTPS, ...) ->
 * NOERROR with no answer, so clients fall back to IPv4.
 */
#ifndef AGENTBOX_DNS_H
#define AGENTBOX_DNS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define AB_DNS_MAX_MSG 4096       /* larger queries are refused (FORMERR) */
#define AB_DNS_MAX_NAME 253       /* text form, without the trailing dot */
#define AB_DNS_MAX_OPTIONS 32     /* EDNS options in one OPT record */
#define AB_DNS_EDNS_UDP_SIZE 1232 /* what our OPT record announces */
#define AB_DNS_MAX_RESPONSE 298   /* upper bound of any built response */

/* rcodes (RFC 1035, 6891) */
#define AB_DNS_NOERROR 0
#define AB_DNS_FORMERR 1
#define AB_DNS_SERVFAIL 2
#define AB_DNS_NXDOMAIN 3
#define AB_DNS_NOTIMP 4
#define AB_DNS_REFUSED 5
#define AB_DNS_BADVERS 16 /* extended: needs an OPT record in the response */

/* types and classes the responder cares about */
#define AB_DNS_TYPE_A 1
#define AB_DNS_TYPE_AAAA 28
#define AB_DNS_TYPE_OPT 41
#define AB_DNS_TYPE_SVCB 64
#define AB_DNS_TYPE_HTTPS 65
#define AB_DNS_TYPE_ANY 255
#define AB_DNS_CLASS_IN 1
#define AB_DNS_CLASS_ANY 255

typedef struct {
	uint16_t id;    /* set whenever length >= 12 */
	uint16_t flags; /* raw header flags of the query */
	uint16_t qtype, qclass;
	/* Lower-cased dotted text without the trailing dot, "" for the root.
	 * On -EINVAL (bad label bytes) each such byte reads '?': for logging
	 * only, never for matching.  "" when question_end is 0. */
	char name[AB_DNS_MAX_NAME + 3];
	size_t question_end;    /* offset just past the question; 0 if not parsed */
	bool rd;                /* recursion desired (copied into answers) */
	bool has_edns;          /* a valid OPT record (false on FORMERR) */
	bool edns_do;           /* its DO bit (copied into our OPT) */
	uint16_t edns_udp_size; /* its payload size, at least 512; 512 without */
	int rcode_hint;         /* 0 on success; rcode to answer; -1: don't answer */
} ab_dns_query;

/* Parse one query (a UDP datagram, or a TCP message without its 2-byte
 * prefix).  Returns 0 or a negative errno; see the table above.  Always
 * fills *q (zeroed first). */
int ab_dns_parse_query(const uint8_t *msg, size_t len, ab_dns_query *q);

/* Builders.  q must come from ab_dns_parse_query() on this same msg.  They
 * write one response into out[0..cap) and return its length, or -ENOBUFS if
 * cap is too small, or -EINVAL if the request makes no sense (see each). */

/* Authoritative answer with one A record: header (id, RD and CD copied, QR=1,
 * AA=1, RA=0), the question copied verbatim (so the client's 0x20 casing
 * survives), the A record owned by a pointer to the question name (0xC00C),
 * class IN, ttl (clamped to 2^31-1), the 4 address bytes; plus an OPT record
 * (payload AB_DNS_EDNS_UDP_SIZE, DO copied, no options) when the query had
 * EDNS.  -EINVAL unless the parse succeeded and QTYPE is A or ANY and QCLASS
 * IN or ANY. */
int ab_dns_build_answer_a(const ab_dns_query *q, const uint8_t *msg, const uint8_t addr[4],
			  uint32_t ttl, uint8_t *out, size_t cap);

/* Answer without records: NOERROR (no data), FORMERR, SERVFAIL, NXDOMAIN,
 * NOTIMP, REFUSED, or BADVERS (only when q->has_edns).  The question is echoed
 * when it was parsed (q->question_end != 0), else QDCOUNT=0 and the header
 * alone (id, opcode and RD copied).  AA=1 for NOERROR/NXDOMAIN with a
 * question.  An OPT record is added when q->has_edns.  -EINVAL for another
 * rcode or when q->rcode_hint < 0 (a message that must not be answered). */
int ab_dns_build_rcode(const ab_dns_query *q, const uint8_t *msg, int rcode, uint8_t *out,
		       size_t cap);

/* TCP framing: is a whole length-prefixed message at the start of buf?
 * Returns 1 and sets *msg_off (always 2) and *msg_len, 0 when more bytes are
 * needed, -EMSGSIZE when the prefix announces 0 or more than AB_DNS_MAX_MSG
 * (close the connection).  The message after it starts at msg_off+msg_len. */
int ab_dns_tcp_frame(const uint8_t *buf, size_t len, size_t *msg_off, size_t *msg_len);

/* Static names for logs: "A", "AAAA", "HTTPS", ... or "other". */
const char *ab_dns_type_name(uint16_t qtype);
/* "NOERROR", "NXDOMAIN", ... or "other". */
const char *ab_dns_rcode_name(int rcode);

#endif
