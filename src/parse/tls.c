/* SPDX-License-Identifier: MIT */
/*
 * tls.c (parent: the egress proxy; pure, any process): the TLS ClientHello
 * parser that finds the SNI host name and the ALPN list in the first bytes a
 * client sends on a tunnel, so the proxy can refuse a tunnel whose SNI names
 * another host than the one it was opened for.  Untrusted bytes in, facts
 * out; no I/O, no allocation, explicit limits (AB_TLS_MAX_HELLO bytes,
 * AB_TLS_MAX_RECORDS records, 2^14 bytes per record).
 *
 * The handshake message is read through a small record reader that crosses
 * record boundaries lazily, validating each record header when it reaches
 * it.  Every check looks only at bytes already read, in stream order, and the
 * reader says "need more" only when it runs out of bytes: so every prefix of
 * a stream gives NEED_MORE or the stream's final answer (see tls.h).
 */
#include "agentbox/tls.h"
#include "agentbox/netpolicy.h"

#include <string.h>

#define REC_HDR 5
#define HS_HDR 4

typedef struct {
	const uint8_t *buf;
	size_t len;
	size_t pos;     /* stream offset of the next unread byte */
	size_t rec_end; /* stream offset where the open record's payload ends */
	size_t nrec;    /* records opened so far */
	size_t mo;      /* handshake-message bytes consumed (header included) */
	int res;        /* the answer once a step returned false */
	size_t need;
	const char *reason;
} rd;

/* ------------------------------------------------------------ the reader */

static bool stop(rd *r, int res, const char *reason)
{
	r->res = res;
	r->reason = reason;
	return false;
}

static bool more(rd *r, size_t need)
{
	r->res = AB_TLS_NEED_MORE;
	r->need = need;
	return false;
}

/* Open the record starting at r->pos (== r->rec_end). */
static bool open_record(rd *r)
{
	size_t p = r->pos, n;

	if (r->nrec >= AB_TLS_MAX_RECORDS)
		return stop(r, AB_TLS_TOO_BIG, "ClientHello split into too many records");
	if (p + REC_HDR > AB_TLS_MAX_HELLO)
		return stop(r, AB_TLS_TOO_BIG, "ClientHello larger than the buffer limit");
	if (p >= r->len)
		return more(r, p + REC_HDR);
	if (r->buf[p] != 0x16)
		return p == 0 ? stop(r, AB_TLS_NOT_TLS, "not a TLS handshake record")
			      : stop(r, AB_TLS_BAD, "non-handshake record inside the ClientHello");
	if (p + 1 < r->len && r->buf[p + 1] != 3)
		return stop(r, AB_TLS_BAD, "unsupported TLS record version");
	if (p + 2 < r->len && (r->buf[p + 2] < 1 || r->buf[p + 2] > 4))
		return stop(r, AB_TLS_BAD, "unsupported TLS record version");
	if (p + REC_HDR > r->len)
		return more(r, p + REC_HDR);
	n = (size_t)r->buf[p + 3] << 8 | r->buf[p + 4];
	if (n == 0)
		return stop(r, AB_TLS_BAD, "empty handshake record");
	if (n > AB_TLS_MAX_FRAGMENT)
		return stop(r, AB_TLS_BAD, "record longer than 2^14 bytes");
	if (p + REC_HDR + n > AB_TLS_MAX_HELLO)
		return stop(r, AB_TLS_TOO_BIG, "ClientHello larger than the buffer limit");
	r->pos = p + REC_HDR;
	r->rec_end = r->pos + n;
	r->nrec++;
	return true;
}

/* Read n handshake bytes into dst (NULL: skip them), across records. */
static bool rd_read(rd *r, uint8_t *dst, size_t n)
{
	while (n > 0) {
		size_t k;

		if (r->pos == r->rec_end && !open_record(r))
			return false;
		if (r->pos >= r->len)
			return more(r, r->rec_end);
		k = r->rec_end - r->pos;
		if (k > r->len - r->pos)
			k = r->len - r->pos;
		if (k > n)
			k = n;
		if (dst) {
			memcpy(dst, r->buf + r->pos, k);
			dst += k;
		}
		r->pos += k;
		r->mo += k;
		n -= k;
	}
	return true;
}

/* Read a big-endian integer of nbytes (1..3). */
static bool rd_uint(rd *r, size_t nbytes, size_t *v)
{
	uint8_t b[3];

	if (!rd_read(r, b, nbytes))
		return false;
	*v = 0;
	for (size_t i = 0; i < nbytes; i++)
		*v = *v << 8 | b[i];
	return true;
}

/* Do n more bytes fit before end (a message offset)?  Else BAD. */
static bool fits(rd *r, size_t end, size_t n, const char *reason)
{
	if (n > end - r->mo)
		return stop(r, AB_TLS_BAD, reason);
	return true;
}

/* fits() then rd_uint(). */
static bool get_uint(rd *r, size_t end, size_t nbytes, size_t *v, const char *reason)
{
	return fits(r, end, nbytes, reason) && rd_uint(r, nbytes, v);
}

/* ------------------------------------------------------------ host names */

static bool is_digit(char c)
{
	return c >= '0' && c <= '9';
}

/* Check the labels of the lower-cased name[0..n); NULL if fine. */
static const char *check_labels(const char *name, size_t n)
{
	size_t start = 0;

	for (size_t i = 0; i <= n; i++) {
		size_t l;

		if (i < n && name[i] != '.')
			continue;
		l = i - start;
		if (l == 0)
			return "empty label in server_name";
		if (l > 63)
			return "label longer than 63 bytes in server_name";
		if (name[start] == '-' || name[i - 1] == '-')
			return "label starts or ends with '-' in server_name";
		if (i == n && ab_host_label_is_numeric(name + start, l))
			return "IP literal in server_name";
		start = i + 1;
	}
	return NULL;
}

/* Validate and normalise the raw host_name (full length rawlen, the first
 * min(rawlen, 255) bytes in raw) into out.  Returns NULL or the reason. */
static const char *normalize_sni(const uint8_t *raw, size_t rawlen, char out[256])
{
	char tmp[256];
	size_t n = rawlen;
	const char *why;

	if (n == 0)
		return "empty server_name";
	if (n > 254)
		return "server_name longer than 253 bytes";
	for (size_t i = 0; i < n; i++) {
		char c = (char)raw[i];

		if (c >= 'A' && c <= 'Z')
			c = (char)(c - 'A' + 'a');
		if (!((c >= 'a' && c <= 'z') || is_digit(c) || c == '-' || c == '_' || c == '.'))
			return "character not allowed in a host name in server_name";
		tmp[i] = c;
	}
	if (tmp[n - 1] == '.')
		n--; /* one trailing dot */
	if (n == 0)
		return "empty server_name";
	if (n > 253)
		return "server_name longer than 253 bytes";
	why = check_labels(tmp, n);
	if (why)
		return why;
	memcpy(out, tmp, n);
	out[n] = '\0';
	return NULL;
}

/* ------------------------------------------------------------ extensions */

/* server_name (RFC 6066 3): exactly one host_name entry is valid. */
static bool parse_sni(rd *r, size_t end, ab_tls_hello *out)
{
	uint8_t raw[255];
	size_t list, n_host = 0, n_other = 0, rawlen = 0;

	out->has_sni = true;
	if (!get_uint(r, end, 2, &list, "server_name extension too short"))
		return false;
	if (list != end - r->mo)
		return stop(r, AB_TLS_BAD, "server_name list length does not match its extension");
	if (list == 0)
		return stop(r, AB_TLS_BAD, "empty server_name list");
	while (r->mo < end) {
		size_t type, n, keep = 0;

		if (!get_uint(r, end, 1, &type, "truncated server_name entry") ||
		    !get_uint(r, end, 2, &n, "truncated server_name entry") ||
		    !fits(r, end, n, "server_name entry overflows its list"))
			return false;
		if (type == 0 && ++n_host == 1) {
			rawlen = n;
			keep = n < sizeof(raw) ? n : sizeof(raw);
		} else if (type != 0) {
			n_other++;
		}
		if (!rd_read(r, keep ? raw : NULL, keep) || !rd_read(r, NULL, n - keep))
			return false;
	}
	if (n_host != 1 || n_other != 0) {
		out->sni_invalid = true;
		out->reason = n_host > 1 ? "several host names in server_name"
					 : "server_name is not one host_name entry";
		return true;
	}
	out->reason = normalize_sni(raw, rawlen, out->sni);
	out->sni_invalid = out->reason != NULL;
	return true;
}

/* application_layer_protocol_negotiation (RFC 7301 3.1). */
static bool parse_alpn(rd *r, size_t end, ab_tls_hello *out)
{
	size_t list;

	if (!get_uint(r, end, 2, &list, "ALPN extension too short"))
		return false;
	if (list != end - r->mo)
		return stop(r, AB_TLS_BAD, "ALPN list length does not match its extension");
	if (list == 0)
		return stop(r, AB_TLS_BAD, "empty ALPN list");
	while (r->mo < end) {
		uint8_t name[255];
		size_t n;

		if (!get_uint(r, end, 1, &n, "truncated ALPN list"))
			return false;
		if (n == 0)
			return stop(r, AB_TLS_BAD, "empty ALPN protocol name");
		if (!fits(r, end, n, "ALPN protocol name overflows its list") ||
		    !rd_read(r, name, n))
			return false;
		out->n_alpn++;
		if (n == 2 && memcmp(name, "h2", 2) == 0)
			out->alpn_h2 = true;
		if (n == 8 && memcmp(name, "http/1.1", 8) == 0)
			out->alpn_http11 = true;
	}
	return true;
}

static bool parse_extensions(rd *r, size_t end, ab_tls_hello *out)
{
	uint64_t seen[65536 / 64];
	size_t total;

	if (r->mo == end)
		return true; /* no extension block at all (TLS <= 1.2 allows it) */
	if (!get_uint(r, end, 2, &total, "truncated extensions length"))
		return false;
	if (total != end - r->mo)
		return stop(r, AB_TLS_BAD, "extensions length does not match the ClientHello");
	memset(seen, 0, sizeof(seen));
	while (r->mo < end) {
		size_t type, n, ext_end;
		bool ok;

		if (!get_uint(r, end, 2, &type, "truncated extension header") ||
		    !get_uint(r, end, 2, &n, "truncated extension header") ||
		    !fits(r, end, n, "extension overflows the extension block"))
			return false;
		if (seen[type / 64] & (UINT64_C(1) << (type % 64)))
			return stop(r, AB_TLS_BAD, "duplicate extension");
		seen[type / 64] |= UINT64_C(1) << (type % 64);
		out->n_ext++;
		ext_end = r->mo + n;
		if (type == AB_TLS_EXT_SERVER_NAME)
			ok = parse_sni(r, ext_end, out);
		else if (type == AB_TLS_EXT_ALPN)
			ok = parse_alpn(r, ext_end, out);
		else
			ok = rd_read(r, NULL, n); /* opaque here, ECH included */
		if (type == AB_TLS_EXT_ECH)
			out->has_ech = true;
		if (!ok)
			return false;
	}
	return true;
}

/* ---------------------------------------------------------- the message */

/* Handshake header: type client_hello, length within the limits.  Sets
 * *end to the message end (a message offset, header included). */
static bool parse_header(rd *r, size_t *end)
{
	size_t type, n, left, min_end, extra = 0, recs = 0;

	if (!rd_uint(r, 1, &type))
		return false;
	if (type != 1)
		return stop(r, AB_TLS_BAD, "first handshake message is not a ClientHello");
	if (!rd_uint(r, 3, &n))
		return false;
	/* The least record bytes the rest can take: fill this record, then
	 * full-size records. */
	left = r->rec_end - r->pos;
	if (n > left) {
		extra = n - left;
		recs = (extra + AB_TLS_MAX_FRAGMENT - 1) / AB_TLS_MAX_FRAGMENT;
		min_end = r->rec_end + extra + recs * REC_HDR;
	} else {
		min_end = r->pos + n;
	}
	if (min_end > AB_TLS_MAX_HELLO)
		return stop(r, AB_TLS_TOO_BIG, "ClientHello larger than the buffer limit");
	*end = HS_HDR + n;
	return true;
}

/* legacy_version, random, legacy_session_id, cipher_suites,
 * legacy_compression_methods. */
static bool parse_fixed(rd *r, size_t end, ab_tls_hello *out)
{
	size_t v, n;

	if (!get_uint(r, end, 2, &v, "truncated ClientHello"))
		return false;
	if (v < 0x0301 || v > 0x0304)
		return stop(r, AB_TLS_BAD, "unsupported ClientHello legacy_version");
	out->legacy_version = (uint16_t)v;
	if (!fits(r, end, 32, "truncated ClientHello") || !rd_read(r, NULL, 32) ||
	    !get_uint(r, end, 1, &n, "truncated ClientHello"))
		return false;
	if (n > 32)
		return stop(r, AB_TLS_BAD, "session id longer than 32 bytes");
	if (!fits(r, end, n, "session id overflows the ClientHello") || !rd_read(r, NULL, n) ||
	    !get_uint(r, end, 2, &n, "truncated ClientHello"))
		return false;
	if (n < 2 || n % 2)
		return stop(r, AB_TLS_BAD, "bad cipher_suites length");
	if (!fits(r, end, n, "cipher_suites overflow the ClientHello") || !rd_read(r, NULL, n) ||
	    !get_uint(r, end, 1, &n, "truncated ClientHello"))
		return false;
	if (n < 1)
		return stop(r, AB_TLS_BAD, "no compression methods");
	return fits(r, end, n, "compression methods overflow the ClientHello") &&
	       rd_read(r, NULL, n);
}

static bool parse_hello(rd *r, ab_tls_hello *out)
{
	size_t end;

	if (!parse_header(r, &end) || !parse_fixed(r, end, out) || !parse_extensions(r, end, out))
		return false;
	if (r->pos != r->rec_end)
		return stop(r, AB_TLS_BAD, "trailing handshake bytes after the ClientHello");
	return true;
}

int ab_tls_parse_client_hello(const uint8_t *buf, size_t len, ab_tls_hello *out)
{
	rd r = {.buf = buf, .len = buf ? len : 0};

	memset(out, 0, sizeof(*out));
	if (parse_hello(&r, out)) {
		out->consumed = r.rec_end;
		return AB_TLS_OK;
	}
	memset(out, 0, sizeof(*out));
	if (r.res == AB_TLS_NEED_MORE)
		out->need = r.need;
	else
		out->reason = r.reason;
	return r.res;
}

const char *ab_tls_result_str(int r)
{
	switch (r) {
	case AB_TLS_NEED_MORE: return "need more";
	case AB_TLS_OK: return "ok";
	case AB_TLS_NOT_TLS: return "not TLS";
	case AB_TLS_BAD: return "malformed";
	case AB_TLS_TOO_BIG: return "too big";
	default: return "?";
	}
}
