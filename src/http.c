/* SPDX-License-Identifier: MIT */
/*
 * http.c (parent: the egress proxy; pure, any process): the HTTP/1.1
 * request-head parser and the chunk-size line parser.  Untrusted bytes in,
 * offsets and derived facts out; no I/O, no allocation, explicit limits.
 * Strictness follows RFC 9112 and guide/egress.md: bare LF, obs-fold, bad
 * tokens, control characters, duplicate Host/Content-Length, TE+CL, h2c,
 * userinfo, Host vs target mismatch are all rejected, never repaired.
 * Resumable by re-parsing: the same prefix always gives the same answer, so
 * the caller just calls again once more bytes have arrived.
 */
#include "agentbox/http.h"

#include <errno.h>
#include <string.h>
#include <strings.h>

/* ---------------------------------------------------------------- helpers */

static int fail(ab_http_req *r, int status, const char *reason)
{
	r->status = status;
	r->reason = reason;
	return -EBADMSG;
}

static bool is_tchar(unsigned char c)
{
	if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))
		return true;
	return c && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

static bool is_digit(unsigned char c) { return c >= '0' && c <= '9'; }

static int hexval(unsigned char c)
{
	if (is_digit(c))
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

static ab_http_span span(size_t off, size_t len)
{
	return (ab_http_span){ (uint32_t)off, (uint32_t)len };
}

static bool span_ieq(const char *b, ab_http_span s, const char *lit)
{
	size_t n = strlen(lit);
	return s.len == n && strncasecmp(b + s.off, lit, n) == 0;
}

/* Next comma-separated list element of b[*i..end), OWS-trimmed.  Returns
 * false at the end of the list; an empty element yields len == 0. */
static bool next_elem(const char *b, size_t end, size_t *i, ab_http_span *el)
{
	if (*i > end)
		return false;
	size_t s = *i, e;
	while (s < end && (b[s] == ' ' || b[s] == '\t'))
		s++;
	e = s;
	while (e < end && b[e] != ',')
		e++;
	*i = e + 1;
	size_t t = e;
	while (t > s && (b[t - 1] == ' ' || b[t - 1] == '\t'))
		t--;
	*el = span(s, t - s);
	return true;
}

/* ------------------------------------------------------------- authority */

typedef struct {
	ab_http_span host, port;
	uint16_t port_num; /* 0 when absent */
} authority;

static bool reg_name_char(unsigned char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       c == '-' || c == '.' || c == '_' || c == '~';
}

/* host[:port] at b[off..off+len).  Reg-names are restricted to unreserved
 * characters (no percent-encoding, no sub-delims); IPv6 literals to hex
 * digits, ':' and '.' (no zone id). */
static int parse_authority(const char *b, size_t off, size_t len, bool need_port, authority *a,
			   ab_http_req *r)
{
	const char *s = b + off;
	size_t h = 0;

	memset(a, 0, sizeof(*a));
	if (len == 0)
		return fail(r, 400, "empty authority");
	if (memchr(s, '@', len))
		return fail(r, 400, "userinfo in authority");
	if (s[0] == '[') {
		for (h = 1; h < len && s[h] != ']'; h++)
			if (hexval((unsigned char)s[h]) < 0 && s[h] != ':' && s[h] != '.')
				return fail(r, 400, "invalid IPv6 literal");
		if (h >= len || h < 3)
			return fail(r, 400, "invalid IPv6 literal");
		h++;
	} else {
		while (h < len && reg_name_char((unsigned char)s[h]))
			h++;
		if (h == 0)
			return fail(r, 400, "empty host");
	}
	a->host = span(off, h);
	if (h == len) {
		if (need_port)
			return fail(r, 400, "CONNECT authority without port");
		return 0;
	}
	if (s[h] != ':')
		return fail(r, 400, "invalid character in host");
	size_t p = h + 1, n = len - p;
	unsigned v = 0;
	if (n == 0 || n > 5)
		return fail(r, 400, "invalid port");
	for (size_t i = p; i < len; i++) {
		if (!is_digit((unsigned char)s[i]))
			return fail(r, 400, "invalid port");
		v = v * 10 + (unsigned)(s[i] - '0');
	}
	if (v < 1 || v > 65535)
		return fail(r, 400, "invalid port");
	a->port = span(off + p, n);
	a->port_num = (uint16_t)v;
	return 0;
}

/* ----------------------------------------------------------- request line */

static const struct {
	const char *name;
	ab_http_method m;
} methods[] = {
	{ "GET", AB_HTTP_GET },	    { "HEAD", AB_HTTP_HEAD },	    { "POST", AB_HTTP_POST },
	{ "PUT", AB_HTTP_PUT },	    { "DELETE", AB_HTTP_DELETE },   { "PATCH", AB_HTTP_PATCH },
	{ "OPTIONS", AB_HTTP_OPTIONS }, { "CONNECT", AB_HTTP_CONNECT }, { "TRACE", AB_HTTP_TRACE },
};

static int parse_version(const char *v, size_t n, ab_http_req *r)
{
	if (n < 6 || memcmp(v, "HTTP/", 5) != 0)
		return fail(r, 400, "malformed HTTP version");
	if (n == 8 && v[5] == '1' && v[6] == '.' && (v[7] == '0' || v[7] == '1')) {
		r->version_minor = v[7] - '0';
		return 0;
	}
	bool dot = false;
	for (size_t i = 5; i < n; i++) {
		if (v[i] == '.' && !dot && i > 5 && i + 1 < n)
			dot = true;
		else if (!is_digit((unsigned char)v[i]))
			return fail(r, 400, "malformed HTTP version");
	}
	return fail(r, 505, "unsupported HTTP version");
}

static int parse_absolute(const char *b, ab_http_req *r)
{
	size_t off = r->target.off, end = off + r->target.len, i = off;
	authority a;
	int k;

	while (i < end && (is_tchar((unsigned char)b[i]) && b[i] != ':'))
		i++;
	if (i == off || end - i < 3 || memcmp(b + i, "://", 3) != 0)
		return fail(r, 400, "invalid request-target");
	r->scheme = span(off, i - off);
	if (span_ieq(b, r->scheme, "https"))
		return fail(r, 400, "https absolute-form (use CONNECT)");
	if (!span_ieq(b, r->scheme, "http"))
		return fail(r, 400, "unsupported scheme");
	size_t as = i + 3, ae = as;
	while (ae < end && b[ae] != '/' && b[ae] != '?')
		ae++;
	if ((k = parse_authority(b, as, ae - as, false, &a, r)) < 0)
		return k;
	r->host = a.host;
	r->port = a.port;
	r->port_num = a.port_num ? a.port_num : 80;
	r->path = span(ae, end - ae);
	r->form = AB_HTTP_ABSOLUTE;
	return 0;
}

static int parse_target(const char *b, ab_http_req *r)
{
	const char *t = b + r->target.off;
	size_t n = r->target.len;
	authority a;
	int k;

	if (memchr(t, '#', n))
		return fail(r, 400, "fragment in request-target");
	if (r->method == AB_HTTP_CONNECT) {
		if (t[0] == '/' || t[0] == '*' || memmem(t, n, "://", 3))
			return fail(r, 400, "CONNECT requires authority-form");
		if ((k = parse_authority(b, r->target.off, n, true, &a, r)) < 0)
			return k;
		r->form = AB_HTTP_AUTHORITY;
		r->host = a.host;
		r->port = a.port;
		r->port_num = a.port_num;
		return 0;
	}
	if (n == 1 && t[0] == '*') {
		if (r->method != AB_HTTP_OPTIONS)
			return fail(r, 400, "asterisk-form is only for OPTIONS");
		r->form = AB_HTTP_ASTERISK;
		return 0;
	}
	if (t[0] == '/') {
		r->form = AB_HTTP_ORIGIN;
		return 0;
	}
	return parse_absolute(b, r);
}

/* METHOD SP TARGET SP HTTP/1.x, exactly. */
static int parse_request_line(const char *b, size_t off, size_t n, ab_http_req *r)
{
	size_t i = off, end = off + n;
	int k;

	while (i < end && is_tchar((unsigned char)b[i]))
		i++;
	if (i == off || i == end || b[i] != ' ')
		return fail(r, 400, "invalid method token");
	r->method_tok = span(off, i - off);
	r->method = AB_HTTP_OTHER;
	for (size_t m = 0; m < sizeof(methods) / sizeof(methods[0]); m++)
		if (r->method_tok.len == strlen(methods[m].name) &&
		    memcmp(b + off, methods[m].name, r->method_tok.len) == 0)
			r->method = methods[m].m;
	size_t ts = ++i;
	while (i < end && (unsigned char)b[i] > 0x20 && (unsigned char)b[i] < 0x7f)
		i++;
	if (i == ts || i == end || b[i] != ' ')
		return fail(r, 400, "invalid request-target");
	r->target = span(ts, i - ts);
	i++;
	if ((k = parse_version(b + i, end - i, r)) < 0)
		return k;
	return parse_target(b, r);
}

/* ---------------------------------------------------------------- headers */

static int hdr_content_length(const char *b, ab_http_span v, ab_http_req *r)
{
	uint64_t n = 0;

	if (r->has_content_length)
		return fail(r, 400, "duplicate Content-Length");
	if (v.len == 0)
		return fail(r, 400, "invalid Content-Length");
	for (size_t i = v.off; i < v.off + v.len; i++) {
		if (!is_digit((unsigned char)b[i]))
			return fail(r, 400, "invalid Content-Length");
		uint64_t d = (uint64_t)(b[i] - '0');
		if (n > (UINT64_MAX - d) / 10)
			return fail(r, 400, "Content-Length overflow");
		n = n * 10 + d;
	}
	r->has_content_length = true;
	r->content_length = n;
	return 0;
}

static int hdr_transfer_encoding(const char *b, ab_http_span v, ab_http_req *r, bool *seen)
{
	size_t i = v.off, end = v.off + v.len, chunked = 0;
	ab_http_span el;

	if (*seen)
		return fail(r, 400, "multiple Transfer-Encoding headers");
	*seen = true;
	while (next_elem(b, end, &i, &el)) {
		if (el.len == 0)
			return fail(r, 400, "empty transfer-coding");
		if (!span_ieq(b, el, "chunked"))
			return fail(r, 501, "unsupported transfer-coding");
		chunked++;
	}
	if (chunked != 1)
		return fail(r, 400, "chunked applied more than once");
	r->chunked = true;
	return 0;
}

static int hdr_connection(const char *b, ab_http_span v, ab_http_req *r)
{
	size_t i = v.off, end = v.off + v.len;
	ab_http_span el;

	while (next_elem(b, end, &i, &el)) {
		for (size_t j = el.off; j < el.off + el.len; j++)
			if (!is_tchar((unsigned char)b[j]))
				return fail(r, 400, "invalid Connection option");
		if (span_ieq(b, el, "close"))
			r->conn_close = true;
		else if (span_ieq(b, el, "keep-alive"))
			r->conn_keep_alive = true;
		else if (span_ieq(b, el, "upgrade"))
			r->conn_upgrade = true;
	}
	return 0;
}

static int hdr_upgrade(const char *b, ab_http_span v, ab_http_req *r)
{
	size_t i = v.off, end = v.off + v.len;
	ab_http_span el;

	r->has_upgrade = true;
	while (next_elem(b, end, &i, &el)) {
		const char *slash = memchr(b + el.off, '/', el.len);
		ab_http_span name = slash ? span(el.off, (size_t)(slash - (b + el.off))) : el;
		if (span_ieq(b, name, "h2c") || span_ieq(b, name, "h2"))
			return fail(r, 400, "h2c upgrade");
		if (span_ieq(b, name, "websocket"))
			r->upgrade_websocket = true;
	}
	return 0;
}

/* Derived facts from one header; errors as soon as a rule is broken. */
static int process_header(const char *b, const ab_http_header *h, ab_http_req *r, bool *te_seen)
{
	authority a;
	int k;

	if (span_ieq(b, h->name, "host")) {
		if (r->has_host)
			return fail(r, 400, "duplicate Host");
		if ((k = parse_authority(b, h->value.off, h->value.len, false, &a, r)) < 0)
			return k;
		r->has_host = true;
		r->host_hdr = h->value;
	} else if (span_ieq(b, h->name, "content-length")) {
		return hdr_content_length(b, h->value, r);
	} else if (span_ieq(b, h->name, "transfer-encoding")) {
		return hdr_transfer_encoding(b, h->value, r, te_seen);
	} else if (span_ieq(b, h->name, "connection")) {
		return hdr_connection(b, h->value, r);
	} else if (span_ieq(b, h->name, "upgrade")) {
		return hdr_upgrade(b, h->value, r);
	} else if (span_ieq(b, h->name, "http2-settings")) {
		return fail(r, 400, "HTTP2-Settings header");
	} else if (span_ieq(b, h->name, "expect")) {
		if (!span_ieq(b, h->value, "100-continue"))
			return fail(r, 417, "unsupported expectation");
		r->expect_100 = true;
	}
	return 0;
}

/* name ":" OWS value OWS, strictly. */
static int parse_header_line(const char *b, size_t off, size_t n, ab_http_req *r, bool *te_seen)
{
	size_t i = off, end = off + n;

	if (b[off] == ' ' || b[off] == '\t')
		return fail(r, 400, "obs-fold (line folding)");
	while (i < end && is_tchar((unsigned char)b[i]))
		i++;
	if (i == end)
		return fail(r, 400, "header line without colon");
	if (b[i] != ':') {
		if (b[i] == ' ' || b[i] == '\t')
			return fail(r, 400, "whitespace before colon");
		if (b[i] == '\0')
			return fail(r, 400, "NUL byte");
		return fail(r, 400, "invalid header name");
	}
	if (i == off)
		return fail(r, 400, "empty header name");
	ab_http_header *h = &r->headers[r->n_headers];
	h->name = span(off, i - off);
	i++;
	while (i < end && (b[i] == ' ' || b[i] == '\t'))
		i++;
	size_t vs = i;
	for (; i < end; i++) {
		unsigned char c = (unsigned char)b[i];
		if (c == '\0')
			return fail(r, 400, "NUL byte");
		if ((c < 0x20 && c != '\t') || c == 0x7f)
			return fail(r, 400, "control character in header value");
	}
	while (i > vs && (b[i - 1] == ' ' || b[i - 1] == '\t'))
		i--;
	h->value = span(vs, i - vs);
	r->n_headers++;
	return process_header(b, h, r, te_seen);
}

/* Rules that need the whole head. */
static int finish(const char *b, ab_http_req *r)
{
	authority a;
	int k;

	if (r->chunked && r->has_content_length)
		return fail(r, 400, "both Transfer-Encoding and Content-Length");
	if (r->chunked && r->version_minor == 0)
		return fail(r, 400, "Transfer-Encoding in HTTP/1.0");
	if (!r->has_host) {
		if (r->version_minor >= 1)
			return fail(r, 400, "missing Host header");
		return 0;
	}
	if (r->form != AB_HTTP_ABSOLUTE && r->form != AB_HTTP_AUTHORITY)
		return 0;
	if ((k = parse_authority(b, r->host_hdr.off, r->host_hdr.len, false, &a, r)) < 0)
		return k;
	bool port_ok = a.port_num ? a.port_num == r->port_num
				  : (r->form == AB_HTTP_AUTHORITY || r->port_num == 80);
	if (a.host.len != r->host.len ||
	    strncasecmp(b + a.host.off, b + r->host.off, a.host.len) != 0 || !port_ok)
		return fail(r, 400, "Host header does not match request-target");
	return 0;
}

/* ------------------------------------------------------------------- head */

/* One complete line b[pos..lf): returns 1 at the blank line, 0 to go on. */
static int do_line(const char *b, size_t pos, size_t lf, size_t max_line, size_t max_hdrs,
		   ab_http_req *r, bool *te_seen)
{
	bool first = r->method_tok.len == 0;

	bool cr = lf > pos && b[lf - 1] == '\r';
	size_t n = lf - pos - cr;

	/* length first: an incomplete line can only ever be judged by it */
	if (n > max_line)
		return first ? fail(r, 414, "request line too long")
			     : fail(r, 431, "header line too long");
	if (!cr)
		return fail(r, 400, "bare LF");
	if (first) {
		if (n == 0)
			return fail(r, 400, "empty line before request line");
		return parse_request_line(b, pos, n, r);
	}
	if (n == 0)
		return 1;
	if (r->n_headers >= max_hdrs)
		return fail(r, 431, "too many header fields");
	return parse_header_line(b, pos, n, r, te_seen);
}

int ab_http_parse_head(const char *buf, size_t len, const ab_http_limits *lim, ab_http_req *out)
{
	size_t max_head = lim && lim->max_head ? lim->max_head : AB_HTTP_DEFAULT_MAX_HEAD;
	size_t max_hdrs = lim && lim->max_headers ? lim->max_headers : AB_HTTP_MAX_HEADERS;
	size_t max_line = lim && lim->max_line ? lim->max_line : AB_HTTP_DEFAULT_MAX_LINE;
	size_t pos = 0, window;
	bool te_seen = false;
	int k;

	if (max_head > AB_HTTP_HARD_MAX_HEAD)
		max_head = AB_HTTP_HARD_MAX_HEAD;
	if (max_hdrs > AB_HTTP_MAX_HEADERS)
		max_hdrs = AB_HTTP_MAX_HEADERS;
	if (max_line > max_head)
		max_line = max_head;
	memset(out, 0, sizeof(*out));
	window = len < max_head ? len : max_head; /* the final LF must lie here */
	for (;;) {
		const char *lf = memchr(buf + pos, '\n', window - pos);
		if (!lf) {
			/* Incomplete line: fail as soon as the outcome is certain. */
			size_t seen = (len < max_head + 1 ? len : max_head + 1) - pos;
			bool first = out->method_tok.len == 0;
			if (seen > max_line + 1)
				return first ? fail(out, 414, "request line too long")
					     : fail(out, 431, "header line too long");
			if (len > max_head)
				return fail(out, 431, "request header block too large");
			return 0;
		}
		size_t lfi = (size_t)(lf - buf);
		k = do_line(buf, pos, lfi, max_line, max_hdrs, out, &te_seen);
		if (k < 0)
			return k;
		pos = lfi + 1;
		if (k == 1)
			break;
	}
	if ((k = finish(buf, out)) < 0)
		return k;
	return (int)pos;
}

/* ---------------------------------------------------------------- chunked */

int ab_http_parse_chunk_size(const char *buf, size_t len, uint64_t *size, size_t *consumed)
{
	size_t n = len < AB_HTTP_CHUNK_LINE_MAX ? len : AB_HTTP_CHUNK_LINE_MAX;
	size_t i = 0;
	uint64_t v = 0;
	int d;

/* Byte i is needed: beyond the line limit it is an error, else wait. */
#define NEED()                                                                \
	do {                                                                  \
		if (i >= n)                                                   \
			return i >= AB_HTTP_CHUNK_LINE_MAX ? -EBADMSG : 0;    \
	} while (0)

	for (;; i++) {
		NEED();
		if ((d = hexval((unsigned char)buf[i])) < 0)
			break;
		v = v * 16 + (uint64_t)d;
		if (v > AB_HTTP_CHUNK_SIZE_MAX)
			return -EBADMSG;
	}
	if (i == 0)
		return -EBADMSG;
	if (buf[i] == ';') {
		for (i++;; i++) {
			NEED();
			unsigned char c = (unsigned char)buf[i];
			if (c == '\r')
				break;
			if ((c < 0x20 && c != '\t') || c == 0x7f)
				return -EBADMSG;
		}
	}
	if (buf[i] != '\r')
		return -EBADMSG;
	i++;
	NEED();
	if (buf[i] != '\n')
		return -EBADMSG;
#undef NEED
	*size = v;
	*consumed = i + 1;
	return 1;
}

const char *ab_http_status_text(int status)
{
	switch (status) {
	case 400: return "Bad Request";
	case 403: return "Forbidden";
	case 414: return "URI Too Long";
	case 417: return "Expectation Failed";
	case 431: return "Request Header Fields Too Large";
	case 501: return "Not Implemented";
	case 502: return "Bad Gateway";
	case 505: return "HTTP Version Not Supported";
	default: return "Error";
	}
}
