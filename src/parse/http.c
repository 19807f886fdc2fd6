/* SPDX-License-Identifier: MIT */
/*
 * http.c (parent: the egress proxy; pure, any process): the HTTP/1.1
 * request-head and response-head parsers.  Untrusted bytes in, offsets and
 * derived facts out; no I/O, no allocation, explicit limits.  Strictness
 * follows RFC 9112 and guide/egress.md: bare LF, obs-fold, bad tokens,
 * control characters, duplicate Host/Content-Length, TE+CL, h2c, userinfo,
 * Host vs target mismatch are all rejected, never repaired.  The head
 * parsers are resumable by re-parsing (the same prefix always gives the
 * same answer).  Where a body ends (the framing decision, chunk sizes, the
 * framer) is http_body.c.  Also the sniffer of a tunnel's first bytes
 * (could a server read them as a request?), which decides what goes to the
 * request parser.
 */
#include "agentbox/http.h"
#include "http_int.h"

#include <errno.h>
#include <limits.h>
#include <string.h>
#include <strings.h>

/* ---------------------------------------------------------------- helpers */

static int fail(ab_http_req *r, int status, const char *reason)
{
	r->status = status;
	r->reason = reason;
	return -EBADMSG;
}

static ab_http_span span(size_t off, size_t len)
{
	return (ab_http_span){(uint32_t)off, (uint32_t)len};
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

/* HTTP-version at v[0..n): the minor version (0, 1), -1 when malformed,
 * -2 when well-formed but unsupported. */
static int version_class(const char *v, size_t n)
{
	if (n < 6 || memcmp(v, "HTTP/", 5) != 0)
		return -1;
	if (n == 8 && v[5] == '1' && v[6] == '.' && (v[7] == '0' || v[7] == '1'))
		return v[7] - '0';
	bool dot = false;
	for (size_t i = 5; i < n; i++) {
		if (v[i] == '.' && !dot && i > 5 && i + 1 < n)
			dot = true;
		else if (!is_digit((unsigned char)v[i]))
			return -1;
	}
	return -2;
}

/* 1*DIGIT at b[v], no sign, no list: NULL or the reason it is invalid. */
static const char *cl_number(const char *b, ab_http_span v, uint64_t *out)
{
	uint64_t n = 0;

	if (v.len == 0)
		return "invalid Content-Length";
	for (size_t i = v.off; i < v.off + v.len; i++) {
		if (!is_digit((unsigned char)b[i]))
			return "invalid Content-Length";
		uint64_t d = (uint64_t)(b[i] - '0');
		if (n > (UINT64_MAX - d) / 10)
			return "Content-Length overflow";
		n = n * 10 + d;
	}
	*out = n;
	return NULL;
}

/* Connection: a list of tokens; records the ones the proxy cares about. */
static const char *connection_tokens(const char *b, ab_http_span v, bool *close, bool *keep_alive,
				     bool *upgrade)
{
	size_t i = v.off, end = v.off + v.len;
	ab_http_span el;

	while (next_elem(b, end, &i, &el)) {
		for (size_t j = el.off; j < el.off + el.len; j++)
			if (!is_tchar((unsigned char)b[j]))
				return "invalid Connection option";
		if (span_ieq(b, el, "close"))
			*close = true;
		else if (span_ieq(b, el, "keep-alive"))
			*keep_alive = true;
		else if (span_ieq(b, el, "upgrade"))
			*upgrade = true;
	}
	return NULL;
}

/* One field line b[off..off+n): name ":" OWS value OWS, strictly.  Fills
 * *h; NULL or the reason it is invalid. */
static const char *parse_field(const char *b, size_t off, size_t n, ab_http_header *h)
{
	size_t i = off, end = off + n;

	if (b[off] == ' ' || b[off] == '\t')
		return "obs-fold (line folding)";
	while (i < end && is_tchar((unsigned char)b[i]))
		i++;
	if (i == end)
		return "header line without colon";
	if (b[i] != ':') {
		if (b[i] == ' ' || b[i] == '\t')
			return "whitespace before colon";
		if (b[i] == '\0')
			return "NUL byte";
		return "invalid header name";
	}
	if (i == off)
		return "empty header name";
	h->name = span(off, i - off);
	i++;
	while (i < end && (b[i] == ' ' || b[i] == '\t'))
		i++;
	size_t vs = i;
	for (; i < end; i++) {
		unsigned char c = (unsigned char)b[i];
		if (c == '\0')
			return "NUL byte";
		if (is_ctl(c))
			return "control character in header value";
	}
	while (i > vs && (b[i - 1] == ' ' || b[i - 1] == '\t'))
		i--;
	h->value = span(vs, i - vs);
	return NULL;
}

/* ---------------------------------------------------------- line scanner */

/* What a head is called in errors and which status answers them. */
typedef struct {
	int st_first, st_field, st_syntax; /* first line too long, fields, syntax */
	const char *first_too_long, *too_large;
} head_kind;

static const head_kind req_kind = {414, 431, 400, "request line too long",
				   "request header block too large"};
static const head_kind resp_kind = {502, 502, 502, "status line too long",
				    "response header block too large"};

typedef struct {
	const char *b;
	size_t len, pos; /* pos: start of the next line */
	size_t max_head, max_hdrs, max_line;
	const head_kind *kind;
	int *status; /* the output struct's status and reason */
	const char **reason;
} scanner;

static void scan_init(scanner *s, const char *b, size_t len, const ab_http_limits *lim,
		      const head_kind *kind, int *status, const char **reason)
{
	s->b = b;
	s->len = len;
	s->pos = 0;
	s->max_head = lim && lim->max_head ? lim->max_head : AB_HTTP_DEFAULT_MAX_HEAD;
	s->max_hdrs = lim && lim->max_headers ? lim->max_headers : AB_HTTP_MAX_HEADERS;
	s->max_line = lim && lim->max_line ? lim->max_line : AB_HTTP_DEFAULT_MAX_LINE;
	if (s->max_head > AB_HTTP_HARD_MAX_HEAD)
		s->max_head = AB_HTTP_HARD_MAX_HEAD;
	if (s->max_hdrs > AB_HTTP_MAX_HEADERS)
		s->max_hdrs = AB_HTTP_MAX_HEADERS;
	if (s->max_line > s->max_head)
		s->max_line = s->max_head;
	s->kind = kind;
	s->status = status;
	s->reason = reason;
}

static int scan_fail(scanner *s, int status, const char *reason)
{
	*s->status = status;
	*s->reason = reason;
	return -EBADMSG;
}

static int too_long(scanner *s, bool first)
{
	return first ? scan_fail(s, s->kind->st_first, s->kind->first_too_long)
		     : scan_fail(s, s->kind->st_field, "header line too long");
}

/* The next complete line: 1 with b[*off..*off+*n) its content (CRLF
 * excluded) and s->pos moved past it, 0 when more bytes are needed, or
 * -EBADMSG (too long, head too large, bare LF).  An incomplete line fails
 * as soon as the outcome is certain. */
static int next_line(scanner *s, bool first, size_t *off, size_t *n)
{
	size_t window = s->len < s->max_head ? s->len : s->max_head; /* the final LF lies here */
	const char *lf = memchr(s->b + s->pos, '\n', window - s->pos);

	if (!lf) {
		size_t seen = (s->len < s->max_head + 1 ? s->len : s->max_head + 1) - s->pos;
		if (seen > s->max_line + 1)
			return too_long(s, first);
		if (s->len > s->max_head)
			return scan_fail(s, s->kind->st_field, s->kind->too_large);
		return 0;
	}
	size_t lfi = (size_t)(lf - s->b);
	bool cr = lfi > s->pos && s->b[lfi - 1] == '\r';
	/* length first: an incomplete line can only ever be judged by it */
	if (lfi - s->pos - cr > s->max_line)
		return too_long(s, first);
	if (!cr)
		return scan_fail(s, s->kind->st_syntax, "bare LF");
	*off = s->pos;
	*n = lfi - s->pos - 1;
	s->pos = lfi + 1;
	return 1;
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
	{"GET", AB_HTTP_GET},         {"HEAD", AB_HTTP_HEAD},       {"POST", AB_HTTP_POST},
	{"PUT", AB_HTTP_PUT},         {"DELETE", AB_HTTP_DELETE},   {"PATCH", AB_HTTP_PATCH},
	{"OPTIONS", AB_HTTP_OPTIONS}, {"CONNECT", AB_HTTP_CONNECT}, {"TRACE", AB_HTTP_TRACE},
};

static int parse_version(const char *v, size_t n, ab_http_req *r)
{
	int k = version_class(v, n);

	if (k == -1)
		return fail(r, 400, "malformed HTTP version");
	if (k == -2)
		return fail(r, 505, "unsupported HTTP version");
	r->version_minor = k;
	return 0;
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
	if (i > ts && i == end)
		return fail(r, 400, "no HTTP version (HTTP/0.9 request line)");
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
	const char *why;

	if (r->has_content_length)
		return fail(r, 400, "duplicate Content-Length");
	if ((why = cl_number(b, v, &r->content_length)))
		return fail(r, 400, why);
	r->has_content_length = true;
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
	const char *why =
		connection_tokens(b, v, &r->conn_close, &r->conn_keep_alive, &r->conn_upgrade);
	return why ? fail(r, 400, why) : 0;
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

static int parse_header_line(const char *b, size_t off, size_t n, ab_http_req *r, bool *te_seen)
{
	ab_http_header *h = &r->headers[r->n_headers];
	const char *why = parse_field(b, off, n, h);

	if (why)
		return fail(r, 400, why);
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

int ab_http_parse_head(const char *buf, size_t len, const ab_http_limits *lim, ab_http_req *out)
{
	scanner s;
	bool te_seen = false;
	size_t off, n;
	int k;

	memset(out, 0, sizeof(*out));
	scan_init(&s, buf, len, lim, &req_kind, &out->status, &out->reason);
	for (;;) {
		bool first = out->method_tok.len == 0;
		if ((k = next_line(&s, first, &off, &n)) <= 0)
			return k;
		if (first) {
			if (n == 0)
				return fail(out, 400, "empty line before request line");
			if ((k = parse_request_line(buf, off, n, out)) < 0)
				return k;
			continue;
		}
		if (n == 0)
			break;
		if (out->n_headers >= s.max_hdrs)
			return fail(out, 431, "too many header fields");
		if ((k = parse_header_line(buf, off, n, out, &te_seen)) < 0)
			return k;
	}
	if ((k = finish(buf, out)) < 0)
		return k;
	return (int)s.pos;
}

/* -------------------------------------------------------------- response */

static int rfail(ab_http_resp *r, const char *reason)
{
	r->status = 502;
	r->reason = reason;
	return -EBADMSG;
}

/* HTTP-version SP 3DIGIT [SP reason-phrase]; the SP before an empty reason
 * may be missing. */
static int parse_status_line(const char *b, size_t off, size_t n, ab_http_resp *r)
{
	const char *s = b + off;
	size_t i = 0;
	int k;

	while (i < n && s[i] != ' ')
		i++;
	k = version_class(s, i);
	if (k == -1)
		return rfail(r, "malformed HTTP version");
	if (k == -2)
		return rfail(r, "unsupported HTTP version");
	if (i == n)
		return rfail(r, "malformed status line");
	r->version_minor = k;
	i++;
	if (n - i < 3 || !is_digit((unsigned char)s[i]) || !is_digit((unsigned char)s[i + 1]) ||
	    !is_digit((unsigned char)s[i + 2]) || (n - i > 3 && s[i + 3] != ' '))
		return rfail(r, "invalid status code");
	r->code = (s[i] - '0') * 100 + (s[i + 1] - '0') * 10 + (s[i + 2] - '0');
	if (r->code < 100 || r->code > 599)
		return rfail(r, "invalid status code");
	i += n - i > 3 ? 4 : 3;
	for (size_t j = i; j < n; j++) {
		if (s[j] == '\0')
			return rfail(r, "NUL byte");
		if (is_ctl((unsigned char)s[j]))
			return rfail(r, "control character in reason phrase");
	}
	r->reason_phrase = span(off + i, n - i);
	return 0;
}

/* A list of identical values ("5, 5") or repeated identical fields are one
 * value (RFC 9110 §8.6); anything differing is an error. */
static int resp_content_length(const char *b, ab_http_span v, ab_http_resp *r)
{
	size_t i = v.off, end = v.off + v.len;
	ab_http_span el;
	uint64_t n = 0;
	const char *why;

	while (next_elem(b, end, &i, &el)) {
		if ((why = cl_number(b, el, &n)))
			return rfail(r, why);
		if (r->has_content_length && r->content_length != n)
			return rfail(r, "conflicting Content-Length");
		r->has_content_length = true;
		r->content_length = n;
	}
	return 0;
}

/* transfer-coding *( OWS ";" ... ): codings other than chunked (gzip, ...)
 * are accepted (the first is recorded); chunked must be last, once, without
 * parameters. */
static int resp_transfer_encoding(const char *b, ab_http_span v, ab_http_resp *r, bool *seen)
{
	size_t i = v.off, end = v.off + v.len;
	ab_http_span el;

	if (*seen)
		return rfail(r, "multiple Transfer-Encoding headers");
	*seen = true;
	while (next_elem(b, end, &i, &el)) {
		size_t t = el.off, e = el.off + el.len;
		if (el.len == 0)
			return rfail(r, "empty transfer-coding");
		while (t < e && is_tchar((unsigned char)b[t]))
			t++;
		ab_http_span name = span(el.off, t - el.off);
		bool chunked = span_ieq(b, name, "chunked");
		while (t < e && (b[t] == ' ' || b[t] == '\t'))
			t++;
		if (name.len == 0 || (t < e && (b[t] != ';' || chunked)))
			return rfail(r, "invalid transfer-coding");
		if (r->chunked)
			return rfail(r, chunked ? "chunked applied more than once"
						: "chunked is not the final transfer-coding");
		r->chunked = chunked;
		if (!chunked && !r->transfer_coding.len)
			r->transfer_coding = name;
	}
	return 0;
}

/* Content-Encoding: #content-coding, in as many fields as the server likes.
 * Records the first coding other than identity (empty elements name none);
 * never an error: whether a coded body may pass is the caller's decision. */
static void resp_content_encoding(const char *b, ab_http_span v, ab_http_resp *r)
{
	size_t i = v.off, end = v.off + v.len;
	ab_http_span el;

	while (!r->content_coding.len && next_elem(b, end, &i, &el))
		if (el.len && !span_ieq(b, el, "identity"))
			r->content_coding = el;
}

static int resp_field_line(const char *b, size_t off, size_t n, ab_http_resp *r, bool *te_seen)
{
	ab_http_header *h = &r->headers[r->n_headers];
	const char *why = parse_field(b, off, n, h);
	bool upgrade = false;

	if (why)
		return rfail(r, why);
	r->n_headers++;
	if (span_ieq(b, h->name, "content-length"))
		return resp_content_length(b, h->value, r);
	if (span_ieq(b, h->name, "transfer-encoding"))
		return resp_transfer_encoding(b, h->value, r, te_seen);
	if (span_ieq(b, h->name, "content-encoding")) {
		resp_content_encoding(b, h->value, r);
		return 0;
	}
	if (span_ieq(b, h->name, "connection")) {
		why = connection_tokens(b, h->value, &r->conn_close, &r->conn_keep_alive, &upgrade);
		return why ? rfail(r, why) : 0;
	}
	return 0;
}

int ab_http_parse_response_head(const char *buf, size_t len, const ab_http_limits *lim,
				ab_http_resp *out)
{
	scanner s;
	bool te_seen = false;
	size_t off, n;
	int k;

	memset(out, 0, sizeof(*out));
	scan_init(&s, buf, len, lim, &resp_kind, &out->status, &out->reason);
	for (;;) {
		bool first = out->code == 0;
		if ((k = next_line(&s, first, &off, &n)) <= 0)
			return k;
		if (first) {
			if (n == 0)
				return rfail(out, "empty line before status line");
			if ((k = parse_status_line(buf, off, n, out)) < 0)
				return k;
			continue;
		}
		if (n == 0)
			break;
		if (out->n_headers >= s.max_hdrs)
			return rfail(out, "too many header fields");
		if ((k = resp_field_line(buf, off, n, out, &te_seen)) < 0)
			return k;
	}
	if (te_seen && out->has_content_length)
		return rfail(out, "both Transfer-Encoding and Content-Length");
	if (te_seen && out->version_minor == 0)
		return rfail(out, "Transfer-Encoding in HTTP/1.0");
	out->body = ab_http_response_body(out, AB_HTTP_GET);
	return (int)s.pos;
}

/* ------------------------------------------------------------------ sniff */

static bool names_http(const char *p, size_t n)
{
	for (size_t i = 0; i + 5 <= n; i++)
		if (strncasecmp(p + i, "HTTP/", 5) == 0)
			return true;
	return false;
}

/* A method of the table followed by SP or HT at p[0..n): 1, 0 (no), -1
 * (a prefix of one: too few bytes). */
static int method_led(const char *p, size_t n)
{
	int more = 0;

	for (size_t m = 0; m < sizeof(methods) / sizeof(methods[0]); m++) {
		size_t ml = strlen(methods[m].name);
		size_t k = n < ml ? n : ml;
		if (memcmp(p, methods[m].name, k) != 0)
			continue;
		if (n <= ml)
			more = -1;
		else if (p[ml] == ' ' || p[ml] == '\t')
			return 1;
	}
	return more;
}

int ab_http_sniff_request(const char *p, size_t n, bool eof)
{
	size_t lim = n < AB_HTTP_SNIFF_MAX ? n : AB_HTTP_SNIFF_MAX, s = 0;

	while (s < lim &&
	       (p[s] == '\0' || p[s] == '\r' || p[s] == '\n' || p[s] == ' ' || p[s] == '\t'))
		s++;
	if (s < lim && method_led(p + s, lim - s) > 0)
		return 1;
	for (size_t i = s; i < lim; i++) {
		unsigned char ch = (unsigned char)p[i];
		if (ch == '\n') {
			size_t len = i - s;
			if (len && p[i - 1] == '\r')
				len--;
			return names_http(p + s, len);
		}
		if ((ch < 0x20 && ch != '\r' && ch != '\t') || ch == 0x7f)
			return 0; /* binary: no HTTP server reads on */
	}
	if (n >= AB_HTTP_SNIFF_MAX)
		return 1;
	if (eof)
		return names_http(p + s, n - s);
	return -1;
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
