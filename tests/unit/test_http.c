/* SPDX-License-Identifier: MIT */
/*
 * http.c and http_body.c: the HTTP/1.1 request-head parser, the chunk-size
 * parser, the response-head parser, the body-framing decision and the body
 * framer.
 * Table-driven valid and hostile heads (each with its exact status and
 * reason), byte-by-byte feeding, limits at and one past each boundary,
 * pipelining; response streams parsed head, body, head, ... as the proxy
 * does; the framer fed in one piece, byte by byte and split at every
 * point, with the same answer each time.  Pure, no privileges.
 */
#include "unit.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agentbox/http.h"

static ab_http_req req; /* ~3 KiB: keep it off the small cmocka stacks */

#define S(lit) lit, sizeof(lit) - 1

static bool span_is(const char *buf, ab_http_span s, const char *want)
{
	return s.len == strlen(want) && memcmp(buf + s.off, want, s.len) == 0;
}
#define assert_span(buf, s, want)                                                         \
	do {                                                                              \
		if (!span_is(buf, s, want))                                               \
			fail_msg("span %.*s != %s", (int)(s).len, (buf) + (s).off, want); \
	} while (0)

/* ------------------------------------------------------------- hostile */

typedef struct {
	const char *in;
	size_t len; /* 0: strlen */
	int status;
	const char *reason;
} bad_case;

#define H11 " HTTP/1.1\r\n"
#define HOST "Host: a.example\r\n"

// clang-format off
static const bad_case bad[] = {
	/* line endings */
	{ "GET / HTTP/1.1\n" HOST "\r\n", 0, 400, "bare LF" },
	{ "GET /" H11 "Host: a.example\n\r\n", 0, 400, "bare LF" },
	{ "GET /" H11 HOST "\n", 0, 400, "bare LF" },
	{ "GET /" H11 "X: a\rb\r\n" HOST "\r\n", 0, 400, "control character in header value" },
	{ "\r\nGET /" H11 HOST "\r\n", 0, 400, "empty line before request line" },
	/* request line */
	{ "GET  /" H11 HOST "\r\n", 0, 400, "invalid request-target" },
	{ "GET /  HTTP/1.1\r\n" HOST "\r\n", 0, 400, "malformed HTTP version" },
	{ "GET / HTTP/1.1 \r\n" HOST "\r\n", 0, 400, "malformed HTTP version" },
	{ " GET /" H11 HOST "\r\n", 0, 400, "invalid method token" },
	{ "GET\t/" H11 HOST "\r\n", 0, 400, "invalid method token" },
	{ "G(T /" H11 HOST "\r\n", 0, 400, "invalid method token" },
	{ "GET /\r\n" HOST "\r\n", 0, 400, "no HTTP version (HTTP/0.9 request line)" },
	{ "GET /t8-smuggled\r\n\r\n", 0, 400, "no HTTP version (HTTP/0.9 request line)" },
	{ "GET /t8 XTTP/1.1\r\n" HOST "\r\n", 0, 400, "malformed HTTP version" },
	{ "GET /t8\r\n" HOST "\r\n", 0, 400, "no HTTP version (HTTP/0.9 request line)" },
	{ "GET \r\n" HOST "\r\n", 0, 400, "invalid request-target" },
	{ "GET / http/1.1\r\n" HOST "\r\n", 0, 400, "malformed HTTP version" },
	{ "GET / HTTP/1.1x\r\n" HOST "\r\n", 0, 400, "malformed HTTP version" },
	{ "GET / HTTP/1\r\n" HOST "\r\n", 0, 505, "unsupported HTTP version" },
	{ "GET / HTTP/2.0\r\n" HOST "\r\n", 0, 505, "unsupported HTTP version" },
	{ "GET / HTTP/0.9\r\n" HOST "\r\n", 0, 505, "unsupported HTTP version" },
	{ "GET / HTTP/1.2\r\n" HOST "\r\n", 0, 505, "unsupported HTTP version" },
	{ "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 0, 505, "unsupported HTTP version" },
	{ "GET /a\xc3\xa9" H11 HOST "\r\n", 0, 400, "invalid request-target" },
	{ "GET /#frag" H11 HOST "\r\n", 0, 400, "fragment in request-target" },
	{ "GET * HTTP/1.1\r\n" HOST "\r\n", 0, 400, "asterisk-form is only for OPTIONS" },
	/* NUL anywhere */
	{ "\0GET /" H11 HOST "\r\n", sizeof("\0GET /" H11 HOST "\r\n") - 1, 400,
	  "invalid method token" },
	{ "G\0T /" H11 HOST "\r\n", sizeof("G\0T /" H11 HOST "\r\n") - 1, 400,
	  "invalid method token" },
	{ "GET /\0" H11 HOST "\r\n", sizeof("GET /\0" H11 HOST "\r\n") - 1, 400,
	  "invalid request-target" },
	{ "GET /" H11 "X\0: 1\r\n" HOST "\r\n", sizeof("GET /" H11 "X\0: 1\r\n" HOST "\r\n") - 1,
	  400, "NUL byte" },
	{ "GET /" H11 "X: 1\0\r\n" HOST "\r\n", sizeof("GET /" H11 "X: 1\0\r\n" HOST "\r\n") - 1,
	  400, "NUL byte" },
	{ "GET /" H11 HOST "X: \0\r\n\r\n", sizeof("GET /" H11 HOST "X: \0\r\n\r\n") - 1, 400,
	  "NUL byte" },
	/* header syntax */
	{ "GET /" H11 HOST "X: a\r\n b\r\n\r\n", 0, 400, "obs-fold (line folding)" },
	{ "GET /" H11 HOST "X: a\r\n\tb\r\n\r\n", 0, 400, "obs-fold (line folding)" },
	{ "GET /" H11 " Host: a.example\r\n\r\n", 0, 400, "obs-fold (line folding)" },
	{ "GET /" H11 "Host : a.example\r\n\r\n", 0, 400, "whitespace before colon" },
	{ "GET /" H11 "Host\t: a.example\r\n\r\n", 0, 400, "whitespace before colon" },
	{ "GET /" H11 HOST "X(y): 1\r\n\r\n", 0, 400, "invalid header name" },
	{ "GET /" H11 HOST "X\x80: 1\r\n\r\n", 0, 400, "invalid header name" },
	{ "GET /" H11 HOST ": 1\r\n\r\n", 0, 400, "empty header name" },
	{ "GET /" H11 HOST "NoColon\r\n\r\n", 0, 400, "header line without colon" },
	{ "GET /" H11 HOST "X: a\x01\r\n\r\n", 0, 400, "control character in header value" },
	{ "GET /" H11 HOST "X: a\x7f\r\n\r\n", 0, 400, "control character in header value" },
	{ "GET /" H11 HOST "X: a\x1b[31m\r\n\r\n", 0, 400, "control character in header value" },
	/* Host */
	{ "GET /" H11 "\r\n", 0, 400, "missing Host header" },
	{ "GET /" H11 HOST HOST "\r\n", 0, 400, "duplicate Host" },
	{ "GET /" H11 HOST "host: b.example\r\n\r\n", 0, 400, "duplicate Host" },
	{ "GET /" H11 "Host:\r\n\r\n", 0, 400, "empty authority" },
	{ "GET /" H11 "Host: u@a.example\r\n\r\n", 0, 400, "userinfo in authority" },
	{ "GET /" H11 "Host: a.example:\r\n\r\n", 0, 400, "invalid port" },
	{ "GET /" H11 "Host: a b\r\n\r\n", 0, 400, "invalid character in host" },
	{ "GET /" H11 "Host: a%2eb\r\n\r\n", 0, 400, "invalid character in host" },
	/* Content-Length */
	{ "POST /" H11 HOST "Content-Length: 1\r\nContent-Length: 1\r\n\r\n", 0, 400,
	  "duplicate Content-Length" },
	{ "POST /" H11 HOST "Content-Length: 1\r\nContent-Length: 2\r\n\r\n", 0, 400,
	  "duplicate Content-Length" },
	{ "POST /" H11 HOST "Content-Length: 1, 1\r\n\r\n", 0, 400, "invalid Content-Length" },
	{ "POST /" H11 HOST "Content-Length: +1\r\n\r\n", 0, 400, "invalid Content-Length" },
	{ "POST /" H11 HOST "Content-Length: -1\r\n\r\n", 0, 400, "invalid Content-Length" },
	{ "POST /" H11 HOST "Content-Length: 0x10\r\n\r\n", 0, 400, "invalid Content-Length" },
	{ "POST /" H11 HOST "Content-Length:\r\n\r\n", 0, 400, "invalid Content-Length" },
	{ "POST /" H11 HOST "Content-Length: 1 2\r\n\r\n", 0, 400, "invalid Content-Length" },
	{ "POST /" H11 HOST "Content-Length: 18446744073709551616\r\n\r\n", 0, 400,
	  "Content-Length overflow" },
	/* Transfer-Encoding */
	{ "POST /" H11 HOST "Transfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n", 0, 400,
	  "both Transfer-Encoding and Content-Length" },
	{ "POST /" H11 HOST "Content-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n", 0, 400,
	  "both Transfer-Encoding and Content-Length" },
	{ "POST /" H11 HOST "Transfer-Encoding: gzip\r\n\r\n", 0, 501, "unsupported transfer-coding" },
	{ "POST /" H11 HOST "Transfer-Encoding: gzip, chunked\r\n\r\n", 0, 501,
	  "unsupported transfer-coding" },
	{ "POST /" H11 HOST "Transfer-Encoding: chunked, identity\r\n\r\n", 0, 501,
	  "unsupported transfer-coding" },
	{ "POST /" H11 HOST "Transfer-Encoding: xchunked\r\n\r\n", 0, 501,
	  "unsupported transfer-coding" },
	{ "POST /" H11 HOST "Transfer-Encoding: chunked, chunked\r\n\r\n", 0, 400,
	  "chunked applied more than once" },
	{ "POST /" H11 HOST "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n", 0,
	  400, "multiple Transfer-Encoding headers" },
	{ "POST /" H11 HOST "Transfer-Encoding: chunked,\r\n\r\n", 0, 400, "empty transfer-coding" },
	{ "POST /" H11 HOST "Transfer-Encoding:\r\n\r\n", 0, 400, "empty transfer-coding" },
	{ "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", 0, 400,
	  "Transfer-Encoding in HTTP/1.0" },
	/* upgrades, expectations */
	{ "GET /" H11 HOST "Connection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\n\r\n", 0, 400,
	  "h2c upgrade" },
	{ "GET /" H11 HOST "Upgrade: websocket, H2C\r\n\r\n", 0, 400, "h2c upgrade" },
	{ "GET /" H11 HOST "Upgrade: h2c/1\r\n\r\n", 0, 400, "h2c upgrade" },
	{ "GET /" H11 HOST "HTTP2-Settings: AAMAAABkAAQAAP__\r\n\r\n", 0, 400,
	  "HTTP2-Settings header" },
	{ "GET /" H11 HOST "Connection: close x\r\n\r\n", 0, 400, "invalid Connection option" },
	{ "PUT /" H11 HOST "Expect: 200-ok\r\n\r\n", 0, 417, "unsupported expectation" },
	/* absolute-form */
	{ "GET https://a.example/" H11 HOST "\r\n", 0, 400, "https absolute-form (use CONNECT)" },
	{ "GET ftp://a.example/" H11 HOST "\r\n", 0, 400, "unsupported scheme" },
	{ "GET a.example:80" H11 HOST "\r\n", 0, 400, "invalid request-target" },
	{ "GET http:/a.example/" H11 HOST "\r\n", 0, 400, "invalid request-target" },
	{ "GET http://u@a.example/" H11 HOST "\r\n", 0, 400, "userinfo in authority" },
	{ "GET http://a.example@evil.example/" H11 HOST "\r\n", 0, 400, "userinfo in authority" },
	{ "GET http:///x" H11 HOST "\r\n", 0, 400, "empty authority" },
	{ "GET http://:80/x" H11 HOST "\r\n", 0, 400, "empty host" },
	{ "GET http://a.example:/x" H11 HOST "\r\n", 0, 400, "invalid port" },
	{ "GET http://a.example:0/x" H11 HOST "\r\n", 0, 400, "invalid port" },
	{ "GET http://a.example:65536/x" H11 HOST "\r\n", 0, 400, "invalid port" },
	{ "GET http://a.example:123456/x" H11 HOST "\r\n", 0, 400, "invalid port" },
	{ "GET http://a.example:8x/x" H11 HOST "\r\n", 0, 400, "invalid port" },
	{ "GET http://a.example:-1/x" H11 HOST "\r\n", 0, 400, "invalid port" },
	{ "GET http://[::1/x" H11 HOST "\r\n", 0, 400, "invalid IPv6 literal" },
	{ "GET http://[fe80::1%25eth0]/" H11 HOST "\r\n", 0, 400, "invalid IPv6 literal" },
	{ "GET http://a.example/" H11 "Host: b.example\r\n\r\n", 0, 400,
	  "Host header does not match request-target" },
	{ "GET http://a.example/" H11 "Host: a.example:8080\r\n\r\n", 0, 400,
	  "Host header does not match request-target" },
	{ "GET http://a.example:8080/" H11 HOST "\r\n", 0, 400,
	  "Host header does not match request-target" },
	{ "GET http://a.example/" H11 "Host: a.example.\r\n\r\n", 0, 400,
	  "Host header does not match request-target" },
	/* authority-form */
	{ "CONNECT /" H11 HOST "\r\n", 0, 400, "CONNECT requires authority-form" },
	{ "CONNECT * HTTP/1.1\r\n" HOST "\r\n", 0, 400, "CONNECT requires authority-form" },
	{ "CONNECT a.example" H11 HOST "\r\n", 0, 400, "CONNECT authority without port" },
	{ "CONNECT a.example:" H11 HOST "\r\n", 0, 400, "invalid port" },
	{ "CONNECT a.example:0" H11 HOST "\r\n", 0, 400, "invalid port" },
	{ "CONNECT a.example:99999" H11 HOST "\r\n", 0, 400, "invalid port" },
	{ "CONNECT u:p@a.example:443" H11 HOST "\r\n", 0, 400, "userinfo in authority" },
	{ "CONNECT :443" H11 HOST "\r\n", 0, 400, "empty host" },
	{ "CONNECT http://a.example:443/" H11 HOST "\r\n", 0, 400,
	  "CONNECT requires authority-form" },
	{ "CONNECT a.example:443/x" H11 HOST "\r\n", 0, 400, "invalid port" },
	{ "CONNECT a.example:443" H11 "\r\n", 0, 400, "missing Host header" },
	{ "CONNECT a.example:443" H11 "Host: evil.example:443\r\n\r\n", 0, 400,
	  "Host header does not match request-target" },
	{ "CONNECT a.example:443" H11 "Host: a.example:80\r\n\r\n", 0, 400,
	  "Host header does not match request-target" },
};
// clang-format on

static void test_hostile(void **state)
{
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		const bad_case *c = &bad[i];
		size_t len = c->len ? c->len : strlen(c->in);
		int r = ab_http_parse_head(c->in, len, NULL, &req);
		if (r != -EBADMSG || req.status != c->status || !req.reason ||
		    strcmp(req.reason, c->reason) != 0)
			fail_msg("case %zu (%.40s): r=%d status=%d reason=%s, want %d %s", i, c->in,
				 r, req.status, req.reason ? req.reason : "(null)", c->status,
				 c->reason);
	}
}

/* Feeding the same bytes one at a time: 0 until the final answer. */
static void feed_bytewise(const char *in, size_t len, const ab_http_limits *lim)
{
	static ab_http_req once;
	int want = ab_http_parse_head(in, len, lim, &once);
	for (size_t n = 0; n <= len; n++) {
		int r = ab_http_parse_head(in, n, lim, &req);
		if (r == 0) {
			assert_true(n < len || want == 0);
			continue;
		}
		assert_int_equal(r, want);
		if (want < 0) {
			assert_int_equal(req.status, once.status);
			assert_string_equal(req.reason, once.reason);
		} else {
			assert_memory_equal(&req, &once, sizeof(req));
		}
		if (want < 0 || n >= (size_t)want)
			return; /* the answer is final from here on */
	}
	assert_int_equal(want, 0);
}

static void test_hostile_bytewise(void **state)
{
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		feed_bytewise(bad[i].in, bad[i].len ? bad[i].len : strlen(bad[i].in), NULL);
}

/* ---------------------------------------------------------------- valid */

static int parse_ok(const char *in)
{
	int r = ab_http_parse_head(in, strlen(in), NULL, &req);
	if (r <= 0)
		fail_msg("%s: r=%d status=%d %s", in, r, req.status, req.reason);
	return r;
}

static void test_origin_form(void **state)
{
	const char *in = "GET /a/b?c=d HTTP/1.1\r\nHost:a.example\r\nUser-Agent: \t x y \t\r\n"
			 "Accept: */*\r\nX-Empty:\r\n\r\n";
	assert_int_equal(parse_ok(in), (int)strlen(in));
	assert_int_equal(req.method, AB_HTTP_GET);
	assert_span(in, req.method_tok, "GET");
	assert_int_equal(req.form, AB_HTTP_ORIGIN);
	assert_span(in, req.target, "/a/b?c=d");
	assert_int_equal(req.version_minor, 1);
	assert_int_equal(req.n_headers, 4);
	assert_span(in, req.headers[0].name, "Host");
	assert_span(in, req.headers[0].value, "a.example");
	assert_span(in, req.headers[1].value, "x y");
	assert_span(in, req.headers[3].name, "X-Empty");
	assert_int_equal(req.headers[3].value.len, 0);
	assert_true(req.has_host);
	assert_span(in, req.host_hdr, "a.example");
	assert_false(req.has_content_length || req.chunked || req.conn_close || req.expect_100);
}

static void test_absolute_form(void **state)
{
	const char *in = "POST HTTP://A.Example:8080/up?x=1 HTTP/1.1\r\nhost: a.example:8080\r\n"
			 "content-length: 0012\r\nConnection: Keep-Alive\r\n"
			 "Expect: 100-Continue\r\n\r\n";
	parse_ok(in);
	assert_int_equal(req.method, AB_HTTP_POST);
	assert_int_equal(req.form, AB_HTTP_ABSOLUTE);
	assert_span(in, req.scheme, "HTTP");
	assert_span(in, req.host, "A.Example"); /* raw: normalising is policy's job */
	assert_span(in, req.port, "8080");
	assert_int_equal(req.port_num, 8080);
	assert_span(in, req.path, "/up?x=1");
	assert_true(req.has_content_length);
	assert_int_equal(req.content_length, 12);
	assert_true(req.conn_keep_alive);
	assert_true(req.expect_100);

	in = "GET http://a.example HTTP/1.1\r\nHost: a.example:80\r\n\r\n";
	parse_ok(in);
	assert_int_equal(req.port_num, 80);
	assert_int_equal(req.port.len, 0);
	assert_int_equal(req.path.len, 0);
	in = "GET http://a.example:80?q HTTP/1.1\r\nHost: a.example\r\n\r\n";
	parse_ok(in);
	assert_span(in, req.path, "?q");
	in = "GET http://[2001:db8::1]:8080/ HTTP/1.1\r\nHost: [2001:DB8::1]:8080\r\n\r\n";
	parse_ok(in);
	assert_span(in, req.host, "[2001:db8::1]");
	assert_int_equal(req.port_num, 8080);
	/* HTTP/1.0 absolute-form without Host is fine */
	in = "GET http://1.2.3.4/ HTTP/1.0\r\n\r\n";
	parse_ok(in);
	assert_int_equal(req.version_minor, 0);
	assert_span(in, req.host, "1.2.3.4");
	assert_false(req.has_host);
}

static void test_connect_and_others(void **state)
{
	const char *in = "CONNECT a.example:443 HTTP/1.1\r\nHost: a.example:443\r\n"
			 "Proxy-Connection: keep-alive\r\n\r\n";
	parse_ok(in);
	assert_int_equal(req.method, AB_HTTP_CONNECT);
	assert_int_equal(req.form, AB_HTTP_AUTHORITY);
	assert_span(in, req.host, "a.example");
	assert_span(in, req.port, "443");
	assert_int_equal(req.port_num, 443);
	parse_ok("CONNECT A.EXAMPLE:443 HTTP/1.1\r\nHost: a.example\r\n\r\n");
	parse_ok("CONNECT [::1]:8443 HTTP/1.1\r\nHost: [::1]:8443\r\n\r\n");
	in = "OPTIONS * HTTP/1.1\r\nHost: a.example\r\n\r\n";
	parse_ok(in);
	assert_int_equal(req.method, AB_HTTP_OPTIONS);
	assert_int_equal(req.form, AB_HTTP_ASTERISK);

	static const struct {
		const char *m;
		ab_http_method e;
	} ms[] = {{"GET", AB_HTTP_GET},         {"HEAD", AB_HTTP_HEAD},
		  {"POST", AB_HTTP_POST},       {"PUT", AB_HTTP_PUT},
		  {"DELETE", AB_HTTP_DELETE},   {"PATCH", AB_HTTP_PATCH},
		  {"OPTIONS", AB_HTTP_OPTIONS}, {"TRACE", AB_HTTP_TRACE},
		  {"PROPFIND", AB_HTTP_OTHER},  {"get", AB_HTTP_OTHER},
		  {"M-SEARCH", AB_HTTP_OTHER}};
	for (size_t i = 0; i < sizeof(ms) / sizeof(ms[0]); i++) {
		char buf[128];
		snprintf(buf, sizeof(buf), "%s /x HTTP/1.1\r\nHost: h\r\n\r\n", ms[i].m);
		parse_ok(buf);
		assert_int_equal(req.method, ms[i].e);
		assert_span(buf, req.method_tok, ms[i].m);
	}
}

static void test_derived_facts(void **state)
{
	parse_ok("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: Chunked\r\n\r\n");
	assert_true(req.chunked);
	assert_false(req.has_content_length);
	parse_ok("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 18446744073709551615\r\n\r\n");
	assert_int_equal(req.content_length, UINT64_MAX);
	parse_ok("GET / HTTP/1.1\r\nHost: h\r\nConnection: foo, close\r\n\r\n");
	assert_true(req.conn_close);
	assert_false(req.conn_keep_alive);
	parse_ok("GET / HTTP/1.1\r\nHost: h\r\nConnection: Upgrade\r\nUpgrade: WebSocket\r\n"
		 "Sec-WebSocket-Version: 13\r\n\r\n");
	assert_true(req.conn_upgrade && req.has_upgrade && req.upgrade_websocket);
	parse_ok("GET / HTTP/1.1\r\nHost: h\r\nUpgrade: foo/2\r\n\r\n");
	assert_true(req.has_upgrade);
	assert_false(req.upgrade_websocket);
	/* obs-text in a value is allowed (reported raw) */
	parse_ok("GET / HTTP/1.1\r\nHost: h\r\nX: caf\xc3\xa9\r\n\r\n");
	parse_ok("GET / HTTP/1.0\r\n\r\n");
	assert_false(req.has_host);
}

static void test_valid_bytewise(void **state)
{
	static const char *const ins[] = {
		"GET /a HTTP/1.1\r\nHost: a.example\r\nX: y\r\n\r\n",
		"CONNECT a.example:443 HTTP/1.1\r\nHost: a.example:443\r\n\r\n",
		"GET http://a.example/ HTTP/1.1\r\nHost: a.example\r\n\r\nbody",
		"GET / HTTP/1.1\r\nHost: a\r\n\r", /* incomplete */
		"GET / HTTP/1.1\r\nHost: a\r\n",   /* incomplete */
	};
	for (size_t i = 0; i < sizeof(ins) / sizeof(ins[0]); i++)
		feed_bytewise(ins[i], strlen(ins[i]), NULL);
}

static void test_pipelined(void **state)
{
	const char *a = "GET /1 HTTP/1.1\r\nHost: h\r\n\r\n";
	const char *b = "GET /2 HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n";
	char buf[256];
	snprintf(buf, sizeof(buf), "%s%s", a, b);
	int r = ab_http_parse_head(buf, strlen(buf), NULL, &req);
	assert_int_equal(r, (int)strlen(a));
	assert_span(buf, req.target, "/1");
	assert_false(req.conn_close);
	assert_int_equal(req.n_headers, 1);
	r = ab_http_parse_head(buf + r, strlen(buf) - (size_t)r, NULL, &req);
	assert_int_equal(r, (int)strlen(b));
	assert_true(req.conn_close);
	/* garbage after the head is not looked at */
	memcpy(buf, a, strlen(a));
	memcpy(buf + strlen(a), "\n\0\x01junk", 7);
	assert_int_equal(ab_http_parse_head(buf, strlen(a) + 7, NULL, &req), (int)strlen(a));
}

/* ---------------------------------------------------------------- limits */

/* "GET /<pad> HTTP/1.1" with a request line of exactly n bytes. */
static char *req_line(size_t n, const char *rest)
{
	size_t rl = strlen(rest);
	char *s = malloc(n + 2 + rl + 1);
	assert_non_null(s);
	memcpy(s, "GET /", 5);
	memset(s + 5, 'a', n - 5 - 9);
	memcpy(s + n - 9, " HTTP/1.1\r\n", 11);
	memcpy(s + n + 2, rest, rl + 1);
	return s;
}

static void expect(const char *in, size_t len, const ab_http_limits *lim, int want_r, int status)
{
	int r = ab_http_parse_head(in, len, lim, &req);
	if (want_r >= 0) {
		if (r != want_r)
			fail_msg("r=%d want %d (%d %s)", r, want_r, req.status, req.reason);
	} else {
		assert_int_equal(r, -EBADMSG);
		assert_int_equal(req.status, status);
	}
}

static void test_limit_line(void **state)
{
	const ab_http_limits lim = {.max_line = 100};
	char *s = req_line(100, "Host: h\r\n\r\n");
	expect(s, strlen(s), &lim, (int)strlen(s), 0);
	feed_bytewise(s, strlen(s), &lim);
	free(s);
	s = req_line(101, "Host: h\r\n\r\n");
	expect(s, strlen(s), &lim, -1, 414);
	expect(s, 101, &lim, 0, 0);    /* the 101st byte could still be the CR */
	expect(s, 102, &lim, -1, 414); /* certain: fail before the LF arrives */
	feed_bytewise(s, strlen(s), &lim);
	free(s);

	/* header line: "X: " + pad, exactly 100 then 101 bytes */
	char buf[512];
	char pad[128];
	memset(pad, 'v', 97);
	pad[97] = '\0';
	snprintf(buf, sizeof(buf), "GET / HTTP/1.1\r\nHost: h\r\nX: %s\r\n\r\n", pad);
	expect(buf, strlen(buf), &lim, (int)strlen(buf), 0);
	pad[97] = 'v';
	pad[98] = '\0';
	snprintf(buf, sizeof(buf), "GET / HTTP/1.1\r\nHost: h\r\nX: %s\r\n\r\n", pad);
	expect(buf, strlen(buf), &lim, -1, 431);
	feed_bytewise(buf, strlen(buf), &lim);
	/* default 8 KiB request line */
	s = req_line(8192, "Host: h\r\n\r\n");
	expect(s, strlen(s), NULL, (int)strlen(s), 0);
	free(s);
	s = req_line(8193, "Host: h\r\n\r\n");
	expect(s, strlen(s), NULL, -1, 414);
	free(s);
}

static void test_limit_head(void **state)
{
	/* default 16 KiB: two 8000-byte headers plus padding to exactly 16384 */
	static char buf[20000];
	const char *start = "GET / HTTP/1.1\r\nHost: h\r\n"; /* 25 bytes */
	size_t n = strlen(start);
	memcpy(buf, start, n);
	for (int i = 0; i < 2; i++) {
		memcpy(buf + n, "X: ", 3);
		memset(buf + n + 3, 'v', 7997);
		memcpy(buf + n + 8000, "\r\n", 2);
		n += 8002;
	}
	/* n = 16029; pad with a header so the head is exactly 16384 */
	size_t padlen = 16384 - n - 2 - 5; /* "Y: " ... "\r\n" then final "\r\n" */
	memcpy(buf + n, "Y: ", 3);
	memset(buf + n + 3, 'p', padlen);
	n += 3 + padlen;
	memcpy(buf + n, "\r\n\r\n", 4);
	n += 4;
	assert_int_equal(n, 16384);
	expect(buf, n, NULL, 16384, 0);
	expect(buf, 16383, NULL, 0, 0);
	/* one byte more (longer padding) -> 431, even before the end arrives */
	memmove(buf + n - 3, buf + n - 4, 4);
	buf[n - 4] = 'p';
	expect(buf, n + 1, NULL, -1, 431);
	assert_string_equal(req.reason, "request header block too large");
	expect(buf, 16384, NULL, 0, 0);
	expect(buf, 16385, NULL, -1, 431);

	const ab_http_limits lim = {.max_head = 64};
	const char *h64 =
		"GET / HTTP/1.1\r\nHost: h\r\nX: 01234567890123456789012345678901\r\n\r\n";
	assert_int_equal(strlen(h64), 64);
	expect(h64, 64, &lim, 64, 0);
	const char *h65 =
		"GET / HTTP/1.1\r\nHost: h\r\nX: 012345678901234567890123456789012\r\n\r\n";
	expect(h65, 65, &lim, -1, 431);
	expect(h65, 64, &lim, 0, 0);
	feed_bytewise(h65, 65, &lim);
	/* pipelined bytes after a complete head do not count */
	char two[200];
	snprintf(two, sizeof(two), "%s%s", h64, h64);
	expect(two, 128, &lim, 64, 0);
}

static void test_limit_count(void **state)
{
	static char buf[4096];
	for (size_t count = 99; count <= 101; count++) {
		size_t n = (size_t)snprintf(buf, sizeof(buf), "GET / HTTP/1.1\r\nHost: h\r\n");
		for (size_t i = 1; i < count; i++)
			n += (size_t)snprintf(buf + n, sizeof(buf) - n, "X%zu: v\r\n", i);
		n += (size_t)snprintf(buf + n, sizeof(buf) - n, "\r\n");
		int r = ab_http_parse_head(buf, n, NULL, &req);
		if (count <= 100) {
			assert_int_equal(r, (int)n);
			assert_int_equal(req.n_headers, count);
		} else {
			assert_int_equal(r, -EBADMSG);
			assert_int_equal(req.status, 431);
			assert_string_equal(req.reason, "too many header fields");
		}
	}
	const ab_http_limits lim = {.max_headers = 2};
	expect(S("GET / HTTP/1.1\r\nHost: h\r\nA: 1\r\n\r\n"), &lim, 33, 0);
	expect(S("GET / HTTP/1.1\r\nHost: h\r\nA: 1\r\nB: 2\r\n\r\n"), &lim, -1, 431);
	/* a larger limit than the struct holds is clamped */
	const ab_http_limits big = {.max_headers = 1000};
	int r = ab_http_parse_head(buf, strlen(buf), &big, &req);
	assert_int_equal(r, -EBADMSG);
	assert_int_equal(req.status, 431);
}

/* ---------------------------------------------------------------- chunks */

static void test_chunk_size(void **state)
{
	static const struct {
		const char *in;
		int r;
		uint64_t size;
		size_t used;
	} cs[] = {
		{"0\r\n", 1, 0, 3},
		{"1a\r\nxx", 1, 26, 4},
		{"FFff\r\n", 1, 0xffff, 6},
		{"0000000010\r\n", 1, 16, 12},
		{"5;name=val\r\n", 1, 5, 12},
		{"5;a=\"q s\"\t;b\r\n", 1, 5, 14},
		{"1000000000000\r\n", 1, 1ull << 48, 15},
		{"1000000000001\r\n", -EBADMSG, 0, 0},
		{"ffffffffffffffffff\r\n", -EBADMSG, 0, 0},
		{"10000000000000000000001\r\n", -EBADMSG, 0, 0},
		{"5\n", -EBADMSG, 0, 0},
		{"5;x\n", -EBADMSG, 0, 0},
		{"5\rx", -EBADMSG, 0, 0},
		{"\r\n", -EBADMSG, 0, 0},
		{";x\r\n", -EBADMSG, 0, 0},
		{"-1\r\n", -EBADMSG, 0, 0},
		{"0x5\r\n", -EBADMSG, 0, 0},
		{" 5\r\n", -EBADMSG, 0, 0},
		{"5 \r\n", -EBADMSG, 0, 0},
		{"5;\x01\r\n", -EBADMSG, 0, 0},
		{"5;\x7f\r\n", -EBADMSG, 0, 0},
		{"", 0, 0, 0},
		{"5", 0, 0, 0},
		{"5\r", 0, 0, 0},
		{"5;ext", 0, 0, 0},
	};
	for (size_t i = 0; i < sizeof(cs) / sizeof(cs[0]); i++) {
		uint64_t sz = 777;
		size_t used = 777;
		int r = ab_http_parse_chunk_size(cs[i].in, strlen(cs[i].in), &sz, &used);
		if (r != cs[i].r)
			fail_msg("chunk case %zu (%s): r=%d want %d", i, cs[i].in, r, cs[i].r);
		if (r == 1) {
			assert_int_equal(sz, cs[i].size);
			assert_int_equal(used, cs[i].used);
		}
		/* byte by byte: 0 until the same answer */
		for (size_t n = 0; n < strlen(cs[i].in); n++) {
			int k = ab_http_parse_chunk_size(cs[i].in, n, &sz, &used);
			assert_true(k == 0 || k == cs[i].r);
		}
	}
	uint64_t sz;
	size_t used;
	assert_int_equal(ab_http_parse_chunk_size("0\0\r\n", 4, &sz, &used), -EBADMSG);
	assert_int_equal(ab_http_parse_chunk_size("5;\0\r\n", 5, &sz, &used), -EBADMSG);

	/* the extension is bounded: line of exactly the limit, then one more */
	static char line[AB_HTTP_CHUNK_LINE_MAX + 8];
	memset(line, 'e', sizeof(line));
	line[0] = '5';
	line[1] = ';';
	line[AB_HTTP_CHUNK_LINE_MAX - 2] = '\r';
	line[AB_HTTP_CHUNK_LINE_MAX - 1] = '\n';
	assert_int_equal(ab_http_parse_chunk_size(line, sizeof(line), &sz, &used), 1);
	assert_int_equal(used, AB_HTTP_CHUNK_LINE_MAX);
	line[AB_HTTP_CHUNK_LINE_MAX - 2] = 'e';
	line[AB_HTTP_CHUNK_LINE_MAX - 1] = '\r';
	line[AB_HTTP_CHUNK_LINE_MAX] = '\n';
	assert_int_equal(ab_http_parse_chunk_size(line, sizeof(line), &sz, &used), -EBADMSG);
	assert_int_equal(ab_http_parse_chunk_size(line, AB_HTTP_CHUNK_LINE_MAX, &sz, &used),
			 -EBADMSG);
	assert_int_equal(ab_http_parse_chunk_size(line, AB_HTTP_CHUNK_LINE_MAX - 1, &sz, &used), 0);
	/* leading zeros are bounded by the same limit */
	memset(line, '0', sizeof(line));
	assert_int_equal(ab_http_parse_chunk_size(line, sizeof(line), &sz, &used), -EBADMSG);
}

static void test_status_text(void **state)
{
	assert_string_equal(ab_http_status_text(400), "Bad Request");
	assert_string_equal(ab_http_status_text(431), "Request Header Fields Too Large");
	assert_string_equal(ab_http_status_text(505), "HTTP Version Not Supported");
	assert_string_equal(ab_http_status_text(299), "Error");
}

/* ------------------------------------------------------------- responses */

static ab_http_resp resp, resp_once;

/* Every prefix of a response head: 0 until the one final answer. */
static void resp_bytewise(const char *in, size_t len, const ab_http_limits *lim)
{
	int want = ab_http_parse_response_head(in, len, lim, &resp_once);
	for (size_t n = 0; n <= len; n++) {
		int r = ab_http_parse_response_head(in, n, lim, &resp);
		if (r == 0) {
			if (n == len && want != 0)
				fail_msg("%.40s: 0 at full length, want %d", in, want);
			continue;
		}
		if (r != want)
			fail_msg("%.40s: prefix %zu gives %d (%s), want %d", in, n, r,
				 r < 0 ? resp.reason : "", want);
		if (want < 0) {
			assert_int_equal(resp.status, 502);
			assert_string_equal(resp.reason, resp_once.reason);
		} else {
			assert_memory_equal(&resp, &resp_once, sizeof(resp));
		}
		if (want < 0 || n >= (size_t)want)
			return;
	}
	assert_int_equal(want, 0);
}

/* Feed a body in pieces of `step` bytes (0: one piece).  Returns the bytes
 * that belong to the body or -EBADMSG; *done as reported. */
static long frame(ab_http_body_kind kind, uint64_t cl, const char *in, size_t len, size_t step,
		  bool *done)
{
	ab_http_framer f;
	size_t pos = 0;

	ab_http_framer_init(&f, kind, cl);
	*done = false;
	do {
		size_t piece = step && len - pos > step ? step : len - pos;
		int n = ab_http_framer_feed(&f, in + pos, piece, done);
		if (n < 0)
			return n;
		assert_true((size_t)n <= piece);
		pos += (size_t)n;
		if (*done)
			break;
		assert_int_equal((size_t)n, piece); /* short only when done */
	} while (pos < len);
	if (*done) { /* stays done, takes nothing more */
		bool d2 = false;
		assert_int_equal(ab_http_framer_feed(&f, in + pos, len - pos, &d2), 0);
		assert_true(d2);
	}
	return (long)pos;
}

/* One feed, byte by byte, and every split into two feeds agree. */
static long frame_all_ways(ab_http_body_kind kind, uint64_t cl, const char *in, size_t len,
			   bool *done)
{
	long want = frame(kind, cl, in, len, 0, done);
	bool d;
	if (frame(kind, cl, in, len, 1, &d) != want || d != *done)
		fail_msg("byte-by-byte differs for %.40s", in);
	for (size_t cut = 1; cut < len; cut++) {
		ab_http_framer f;
		bool d1 = false;
		ab_http_framer_init(&f, kind, cl);
		long got = ab_http_framer_feed(&f, in, cut, &d1);
		if (got >= 0 && !d1) {
			int n = ab_http_framer_feed(&f, in + cut, len - cut, &d1);
			got = n < 0 ? n : (long)cut + n;
		}
		if (got != want || d1 != *done)
			fail_msg("split at %zu: %ld/%d, want %ld/%d for %.40s", cut, got, d1, want,
				 *done, in);
	}
	return want;
}

typedef struct {
	int code;
	ab_http_body_kind kind;
	const char *body; /* the framed bytes as they are on the wire */
} msg_want;

typedef struct {
	const char *in;
	ab_http_method m;
	msg_want want[4];
} stream_case;

#define R200 "HTTP/1.1 200 OK\r\n"
#define CHUNKED "Transfer-Encoding: chunked\r\n"

// clang-format off
static const stream_case streams[] = {
	{ R200 "Content-Length: 5\r\n\r\nhello" "HTTP/1.1 204 No Content\r\n\r\n",
	  AB_HTTP_GET,
	  { { 200, AB_HTTP_BODY_LENGTH, "hello" }, { 204, AB_HTTP_BODY_NONE, "" } } },
	{ R200 CHUNKED "\r\n" "5;x=y\r\nhello\r\nA\r\n0123456789\r\n0\r\nX-Sum: abc\r\nX-B:\r\n\r\n"
	  "HTTP/1.1 304 Not Modified\r\nContent-Length: 1000\r\nETag: \"x\"\r\n\r\n",
	  AB_HTTP_GET,
	  { { 200, AB_HTTP_BODY_CHUNKED,
	      "5;x=y\r\nhello\r\nA\r\n0123456789\r\n0\r\nX-Sum: abc\r\nX-B:\r\n\r\n" },
	    { 304, AB_HTTP_BODY_NONE, "" } } },
	{ R200 CHUNKED "\r\n0\r\n\r\n" R200 "Content-Length: 0\r\n\r\n", AB_HTTP_GET,
	  { { 200, AB_HTTP_BODY_CHUNKED, "0\r\n\r\n" }, { 200, AB_HTTP_BODY_LENGTH, "" } } },
	{ "HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n" R200 "Content-Length: 1\r\n\r\nx",
	  AB_HTTP_DELETE,
	  { { 204, AB_HTTP_BODY_NONE, "" }, { 200, AB_HTTP_BODY_LENGTH, "x" } } },
	/* HEAD: the framing headers describe the GET body that is not sent */
	{ R200 "Content-Length: 1234\r\n\r\n" R200 CHUNKED "\r\n", AB_HTTP_HEAD,
	  { { 200, AB_HTTP_BODY_NONE, "" }, { 200, AB_HTTP_BODY_NONE, "" } } },
	{ "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n"
	  "\x81\x05hello",
	  AB_HTTP_GET, { { 101, AB_HTTP_BODY_TUNNEL, "\x81\x05hello" } } },
	{ "HTTP/1.1 100 Continue\r\n\r\n"
	  "HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n"
	  "HTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nok",
	  AB_HTTP_POST,
	  { { 100, AB_HTTP_BODY_NONE, "" },
	    { 103, AB_HTTP_BODY_NONE, "" },
	    { 201, AB_HTTP_BODY_LENGTH, "ok" } } },
	{ "HTTP/1.0 200 OK\r\nServer: old\r\n\r\nall of it\r\n\r\nHTTP/1.1 200 OK\r\n\r\n",
	  AB_HTTP_GET,
	  { { 200, AB_HTTP_BODY_CLOSE, "all of it\r\n\r\nHTTP/1.1 200 OK\r\n\r\n" } } },
	{ R200 "\r\nno framing: until EOF", AB_HTTP_GET,
	  { { 200, AB_HTTP_BODY_CLOSE, "no framing: until EOF" } } },
	/* a transfer-coding that is not chunked: close-delimited (RFC 9112 §6.3) */
	{ R200 "Transfer-Encoding: gzip\r\n\r\n\x1f\x8b\x08", AB_HTTP_GET,
	  { { 200, AB_HTTP_BODY_CLOSE, "\x1f\x8b\x08" } } },
	{ R200 "Transfer-Encoding: gzip;q=1 , Chunked\r\n\r\n3\r\n\x1f\x8b\x08\r\n0\r\n\r\n",
	  AB_HTTP_GET, { { 200, AB_HTTP_BODY_CHUNKED, "3\r\n\x1f\x8b\x08\r\n0\r\n\r\n" } } },
	/* identical Content-Length values are one value */
	{ R200 "Content-Length: 3\r\ncontent-length: 003\r\n\r\nabc" R200 "Content-Length: 2, 2\r\n\r\nde",
	  AB_HTTP_GET,
	  { { 200, AB_HTTP_BODY_LENGTH, "abc" }, { 200, AB_HTTP_BODY_LENGTH, "de" } } },
	/* CONNECT: 2xx is a tunnel, anything else a normal response */
	{ "HTTP/1.1 200 Connection established\r\n\r\n\x16\x03\x01", AB_HTTP_CONNECT,
	  { { 200, AB_HTTP_BODY_TUNNEL, "\x16\x03\x01" } } },
	{ "HTTP/1.1 407 Proxy Authentication Required\r\nContent-Length: 3\r\n\r\nno!"
	  "HTTP/1.1 204 OK\r\n\r\n",
	  AB_HTTP_CONNECT,
	  { { 407, AB_HTTP_BODY_LENGTH, "no!" }, { 204, AB_HTTP_BODY_TUNNEL, "" } } },
	/* no reason phrase, with and without its SP */
	{ "HTTP/1.1 200\r\nContent-Length: 1\r\n\r\n1HTTP/1.1 404 \r\nContent-Length: 1\r\n\r\n2",
	  AB_HTTP_GET,
	  { { 200, AB_HTTP_BODY_LENGTH, "1" }, { 404, AB_HTTP_BODY_LENGTH, "2" } } },
	{ "HTTP/1.1 599 x\r\nContent-Length: 0\r\n\r\nHTTP/1.1 100 y\r\n\r\n", AB_HTTP_GET,
	  { { 599, AB_HTTP_BODY_LENGTH, "" }, { 100, AB_HTTP_BODY_NONE, "" } } },
};
// clang-format on

static void run_stream(const stream_case *c)
{
	size_t len = strlen(c->in), pos = 0;

	for (size_t i = 0; i < 4 && c->want[i].code; i++) {
		const msg_want *w = &c->want[i];
		int r = ab_http_parse_response_head(c->in + pos, len - pos, NULL, &resp);
		if (r <= 0)
			fail_msg("%.40s msg %zu: r=%d %s", c->in, i, r, resp.reason);
		resp_bytewise(c->in + pos, len - pos, NULL);
		assert_int_equal(resp.code, w->code);
		ab_http_body_kind kind = ab_http_response_body(&resp, c->m);
		if (kind != w->kind)
			fail_msg("%.40s msg %zu: kind %d want %d", c->in, i, kind, w->kind);
		if (c->m != AB_HTTP_HEAD && c->m != AB_HTTP_CONNECT)
			assert_int_equal(resp.body, kind); /* provisional = GET */
		pos += (size_t)r;
		bool done;
		long n = frame_all_ways(kind, resp.content_length, c->in + pos, len - pos, &done);
		assert_true(n >= 0);
		assert_int_equal((size_t)n, strlen(w->body));
		assert_memory_equal(c->in + pos, w->body, (size_t)n);
		bool open_ended = kind == AB_HTTP_BODY_CLOSE || kind == AB_HTTP_BODY_TUNNEL;
		assert_true(done != open_ended);
		pos += (size_t)n;
	}
	assert_int_equal(pos, len);
}

static void test_resp_streams(void **state)
{
	for (size_t i = 0; i < sizeof(streams) / sizeof(streams[0]); i++)
		run_stream(&streams[i]);
}

static void test_resp_fields(void **state)
{
	const char *in = "HTTP/1.0 404 Not  Found \xc3\xa9\r\nServer:  x y \r\n"
			 "Connection: Keep-Alive\r\nContent-Length: 0012\r\n\r\nbody";
	int r = ab_http_parse_response_head(in, strlen(in), NULL, &resp);
	assert_int_equal(r, (int)strlen(in) - 4);
	assert_int_equal(resp.status, 0);
	assert_null(resp.reason);
	assert_int_equal(resp.code, 404);
	assert_int_equal(resp.version_minor, 0);
	assert_span(in, resp.reason_phrase, "Not  Found \xc3\xa9");
	assert_int_equal(resp.n_headers, 3);
	assert_span(in, resp.headers[0].name, "Server");
	assert_span(in, resp.headers[0].value, "x y");
	assert_true(resp.conn_keep_alive);
	assert_false(resp.conn_close || resp.chunked);
	assert_true(resp.has_content_length);
	assert_int_equal(resp.content_length, 12);
	assert_int_equal(resp.body, AB_HTTP_BODY_LENGTH);

	in = "HTTP/1.1 200 OK\r\nConnection: close, x-foo\r\n" CHUNKED "\r\n";
	assert_int_equal(ab_http_parse_response_head(in, strlen(in), NULL, &resp), (int)strlen(in));
	assert_true(resp.conn_close && resp.chunked);
	assert_int_equal(resp.version_minor, 1);
	assert_int_equal(resp.reason_phrase.len, 2);
	in = "HTTP/1.1 200 OK\r\nContent-Length: 18446744073709551615\r\n\r\n";
	assert_true(ab_http_parse_response_head(in, strlen(in), NULL, &resp) > 0);
	assert_int_equal(resp.content_length, UINT64_MAX);

	/* the decision table, method by status */
	static const struct {
		int code;
		ab_http_method m;
		bool chunked, cl;
		ab_http_body_kind want;
	} dt[] = {
		{101, AB_HTTP_GET, false, false, AB_HTTP_BODY_TUNNEL},
		{101, AB_HTTP_HEAD, false, false, AB_HTTP_BODY_TUNNEL},
		{100, AB_HTTP_GET, true, false, AB_HTTP_BODY_NONE},
		{199, AB_HTTP_CONNECT, false, true, AB_HTTP_BODY_NONE},
		{204, AB_HTTP_GET, false, true, AB_HTTP_BODY_NONE},
		{304, AB_HTTP_GET, true, false, AB_HTTP_BODY_NONE},
		{200, AB_HTTP_HEAD, true, false, AB_HTTP_BODY_NONE},
		{500, AB_HTTP_HEAD, false, true, AB_HTTP_BODY_NONE},
		{200, AB_HTTP_CONNECT, false, true, AB_HTTP_BODY_TUNNEL},
		{299, AB_HTTP_CONNECT, false, false, AB_HTTP_BODY_TUNNEL},
		{204, AB_HTTP_CONNECT, false, false, AB_HTTP_BODY_TUNNEL},
		{300, AB_HTTP_CONNECT, false, false, AB_HTTP_BODY_CLOSE},
		{403, AB_HTTP_CONNECT, false, true, AB_HTTP_BODY_LENGTH},
		{200, AB_HTTP_GET, true, false, AB_HTTP_BODY_CHUNKED},
		{205, AB_HTTP_POST, false, true, AB_HTTP_BODY_LENGTH},
		{200, AB_HTTP_OTHER, false, false, AB_HTTP_BODY_CLOSE},
	};
	for (size_t i = 0; i < sizeof(dt) / sizeof(dt[0]); i++) {
		memset(&resp, 0, sizeof(resp));
		resp.code = dt[i].code;
		resp.chunked = dt[i].chunked;
		resp.has_content_length = dt[i].cl;
		if (ab_http_response_body(&resp, dt[i].m) != dt[i].want)
			fail_msg("decision %zu: %d", i, ab_http_response_body(&resp, dt[i].m));
	}
}

typedef struct {
	const char *in;
	size_t len; /* 0: strlen */
	const char *reason;
} bad_resp;

#define CL5 "Content-Length: 5\r\n"

// clang-format off
static const bad_resp bad_resps[] = {
	/* status line */
	{ "HTTP/1.1 099 Low\r\n\r\n", 0, "invalid status code" },
	{ "HTTP/1.1 99 Low\r\n\r\n", 0, "invalid status code" },
	{ "HTTP/1.1 600 High\r\n\r\n", 0, "invalid status code" },
	{ "HTTP/1.1 abc OK\r\n\r\n", 0, "invalid status code" },
	{ "HTTP/1.1 2000 OK\r\n\r\n", 0, "invalid status code" },
	{ "HTTP/1.1 20\r\n\r\n", 0, "invalid status code" },
	{ "HTTP/1.1  200 OK\r\n\r\n", 0, "invalid status code" },
	{ "HTTP/1.1 200\tOK\r\n\r\n", 0, "invalid status code" },
	{ "HTTP/1.1 -20 OK\r\n\r\n", 0, "invalid status code" },
	{ "HTTP/1.1 \r\n\r\n", 0, "invalid status code" },
	{ "HTTP/1.1\r\n\r\n", 0, "malformed status line" },
	{ "HTTP/2.0 200 OK\r\n\r\n", 0, "unsupported HTTP version" },
	{ "HTTP/2 200 OK\r\n\r\n", 0, "unsupported HTTP version" },
	{ "HTTP/1.2 200 OK\r\n\r\n", 0, "unsupported HTTP version" },
	{ "HTTP/0.9 200 OK\r\n\r\n", 0, "unsupported HTTP version" },
	{ "http/1.1 200 OK\r\n\r\n", 0, "malformed HTTP version" },
	{ "ICY 200 OK\r\n\r\n", 0, "malformed HTTP version" },
	{ " HTTP/1.1 200 OK\r\n\r\n", 0, "malformed HTTP version" },
	{ "HTTP/1.1x 200 OK\r\n\r\n", 0, "malformed HTTP version" },
	{ "\r\nHTTP/1.1 200 OK\r\n\r\n", 0, "empty line before status line" },
	{ "HTTP/1.1 200 O\x01K\r\n\r\n", 0, "control character in reason phrase" },
	{ "HTTP/1.1 200 O\rK\r\n\r\n", 0, "control character in reason phrase" },
	{ "HTTP/1.1 200 O\x7fK\r\n\r\n", 0, "control character in reason phrase" },
	{ "HTTP/1.1 200 O\0K\r\n\r\n", sizeof("HTTP/1.1 200 O\0K\r\n\r\n") - 1, "NUL byte" },
	/* line endings, folding, field syntax */
	{ "HTTP/1.1 200 OK\n" CL5 "\r\n", 0, "bare LF" },
	{ R200 "Content-Length: 5\n\r\n", 0, "bare LF" },
	{ R200 CL5 "\n", 0, "bare LF" },
	{ R200 "X: a\r\n b\r\n" CL5 "\r\n", 0, "obs-fold (line folding)" },
	{ R200 CL5 "X: a\r\n\tb\r\n\r\n", 0, "obs-fold (line folding)" },
	{ R200 "Content-Length : 5\r\n\r\n", 0, "whitespace before colon" },
	{ R200 "X(y): 1\r\n\r\n", 0, "invalid header name" },
	{ R200 ": 1\r\n\r\n", 0, "empty header name" },
	{ R200 "NoColon\r\n\r\n", 0, "header line without colon" },
	{ R200 "X: a\x1b[2J\r\n\r\n", 0, "control character in header value" },
	{ R200 "X: a\0\r\n\r\n", sizeof(R200 "X: a\0\r\n\r\n") - 1, "NUL byte" },
	{ R200 "Connection: close x\r\n\r\n", 0, "invalid Connection option" },
	/* Content-Length */
	{ R200 CL5 "Content-Length: 6\r\n\r\n", 0, "conflicting Content-Length" },
	{ R200 "Content-Length: 5, 6\r\n\r\n", 0, "conflicting Content-Length" },
	{ R200 "Content-Length: 5, 5\r\nContent-Length: 6\r\n\r\n", 0, "conflicting Content-Length" },
	{ R200 "Content-Length: -1\r\n\r\n", 0, "invalid Content-Length" },
	{ R200 "Content-Length: +5\r\n\r\n", 0, "invalid Content-Length" },
	{ R200 "Content-Length: 5 5\r\n\r\n", 0, "invalid Content-Length" },
	{ R200 "Content-Length: 5,\r\n\r\n", 0, "invalid Content-Length" },
	{ R200 "Content-Length: ,5\r\n\r\n", 0, "invalid Content-Length" },
	{ R200 "Content-Length:\r\n\r\n", 0, "invalid Content-Length" },
	{ R200 "Content-Length: 0x5\r\n\r\n", 0, "invalid Content-Length" },
	{ R200 "Content-Length: 5.0\r\n\r\n", 0, "invalid Content-Length" },
	{ R200 "Content-Length: 18446744073709551616\r\n\r\n", 0, "Content-Length overflow" },
	{ R200 "Content-Length: 99999999999999999999999\r\n\r\n", 0, "Content-Length overflow" },
	/* Transfer-Encoding */
	{ R200 CHUNKED CL5 "\r\n", 0, "both Transfer-Encoding and Content-Length" },
	{ R200 CL5 CHUNKED "\r\n", 0, "both Transfer-Encoding and Content-Length" },
	{ R200 CL5 "Transfer-Encoding: gzip\r\n\r\n", 0,
	  "both Transfer-Encoding and Content-Length" },
	{ "HTTP/1.1 204 OK\r\n" CL5 CHUNKED "\r\n", 0,
	  "both Transfer-Encoding and Content-Length" },
	{ R200 CHUNKED CHUNKED "\r\n", 0, "multiple Transfer-Encoding headers" },
	{ R200 "Transfer-Encoding: gzip\r\n" CHUNKED "\r\n", 0,
	  "multiple Transfer-Encoding headers" },
	{ R200 "Transfer-Encoding: chunked, gzip\r\n\r\n", 0,
	  "chunked is not the final transfer-coding" },
	{ R200 "Transfer-Encoding: chunked, chunked\r\n\r\n", 0, "chunked applied more than once" },
	{ R200 "Transfer-Encoding: chunked;x=1\r\n\r\n", 0, "invalid transfer-coding" },
	{ R200 "Transfer-Encoding: g zip, chunked\r\n\r\n", 0, "invalid transfer-coding" },
	{ R200 "Transfer-Encoding: \"chunked\"\r\n\r\n", 0, "invalid transfer-coding" },
	{ R200 "Transfer-Encoding: ;q=1\r\n\r\n", 0, "invalid transfer-coding" },
	{ R200 "Transfer-Encoding:\r\n\r\n", 0, "empty transfer-coding" },
	{ R200 "Transfer-Encoding: gzip,,chunked\r\n\r\n", 0, "empty transfer-coding" },
	{ R200 "Transfer-Encoding: chunked,\r\n\r\n", 0, "empty transfer-coding" },
	{ "HTTP/1.0 200 OK\r\n" CHUNKED "\r\n", 0, "Transfer-Encoding in HTTP/1.0" },
	{ "HTTP/1.0 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n", 0, "Transfer-Encoding in HTTP/1.0" },
	/* a request is not a response */
	{ "GET / HTTP/1.1\r\nHost: h\r\n\r\n", 0, "malformed HTTP version" },
};
// clang-format on

static void test_resp_hostile(void **state)
{
	for (size_t i = 0; i < sizeof(bad_resps) / sizeof(bad_resps[0]); i++) {
		const bad_resp *c = &bad_resps[i];
		size_t len = c->len ? c->len : strlen(c->in);
		int r = ab_http_parse_response_head(c->in, len, NULL, &resp);
		if (r != -EBADMSG || resp.status != 502 || !resp.reason ||
		    strcmp(resp.reason, c->reason) != 0)
			fail_msg("resp case %zu (%.40s): r=%d status=%d reason=%s, want %s", i,
				 c->in, r, resp.status, resp.reason ? resp.reason : "(null)",
				 c->reason);
		resp_bytewise(c->in, len, NULL);
	}
}

static void expect_resp(const char *in, size_t len, const ab_http_limits *lim, int want,
			const char *reason)
{
	int r = ab_http_parse_response_head(in, len, lim, &resp);
	if (r != want || (want < 0 && (resp.status != 502 || strcmp(resp.reason, reason) != 0)))
		fail_msg("r=%d (%d %s), want %d %s", r, resp.status, resp.reason, want,
			 reason ? reason : "");
}

static void test_resp_limits(void **state)
{
	static char buf[20000];
	const ab_http_limits lim = {.max_line = 40, .max_head = 100, .max_headers = 2};
	size_t n;

	/* header count: 100 fine, 101 too many (default limit) */
	for (size_t count = 100; count <= 101; count++) {
		n = (size_t)snprintf(buf, sizeof(buf), "HTTP/1.1 200 OK\r\n");
		for (size_t i = 0; i < count; i++)
			n += (size_t)snprintf(buf + n, sizeof(buf) - n, "X%zu: v\r\n", i);
		n += (size_t)snprintf(buf + n, sizeof(buf) - n, "\r\n");
		expect_resp(buf, n, NULL, count <= 100 ? (int)n : -EBADMSG,
			    "too many header fields");
	}
	expect_resp(S("HTTP/1.1 200 OK\r\nA: 1\r\nB: 2\r\n\r\n"), &lim, 31, NULL);
	expect_resp(S("HTTP/1.1 200 OK\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n"), &lim, -EBADMSG,
		    "too many header fields");
	/* status line of exactly 40 bytes, then 41 (known before its LF) */
	char line[128], pad[64];
	memset(pad, 'r', 40);
	snprintf(line, sizeof(line), "HTTP/1.1 200 %.27s\r\n\r\n", pad);
	expect_resp(line, strlen(line), &lim, 44, NULL);
	resp_bytewise(line, strlen(line), &lim);
	snprintf(line, sizeof(line), "HTTP/1.1 200 %.28s\r\n\r\n", pad);
	expect_resp(line, strlen(line), &lim, -EBADMSG, "status line too long");
	expect_resp(line, 41, &lim, 0, NULL); /* the 41st byte could be the CR */
	expect_resp(line, 42, &lim, -EBADMSG, "status line too long");
	resp_bytewise(line, strlen(line), &lim);
	/* header line of exactly 40 bytes, then 41 */
	snprintf(line, sizeof(line), "HTTP/1.1 200 OK\r\nX: %.37s\r\n\r\n", pad);
	expect_resp(line, strlen(line), &lim, (int)strlen(line), NULL);
	snprintf(line, sizeof(line), "HTTP/1.1 200 OK\r\nX: %.38s\r\n\r\n", pad);
	expect_resp(line, strlen(line), &lim, -EBADMSG, "header line too long");
	resp_bytewise(line, strlen(line), &lim);
	/* whole head: 100 bytes fine, 101 too large even before its end */
	snprintf(line, sizeof(line), "HTTP/1.1 200 OK\r\nA: %.35s\r\nB: %.35s\r\n\r\n", pad, pad);
	size_t hl = strlen(line); /* 17 + 40 + 40 + 2 = 99 */
	assert_int_equal(hl, 99);
	expect_resp(line, hl, &lim, 99, NULL);
	snprintf(line, sizeof(line), "HTTP/1.1 200 OK\r\nA: %.36s\r\nB: %.35s\r\n\r\n", pad, pad);
	expect_resp(line, 99, &lim, 0, NULL);
	expect_resp(line, 100, &lim, 100, NULL);
	expect_resp(line, 101, &lim, 100, NULL); /* the next head's byte does not count */
	snprintf(line, sizeof(line), "HTTP/1.1 200 OK\r\nA: %.36s\r\nB: %.36s\r\n\r\n", pad, pad);
	expect_resp(line, 101, &lim, -EBADMSG, "response header block too large");
	expect_resp(line, 100, &lim, 0, NULL);
	resp_bytewise(line, 101, &lim);
	/* default head limit 16 KiB */
	n = (size_t)snprintf(buf, sizeof(buf), "HTTP/1.1 200 OK\r\n");
	while (n < 17000)
		n += (size_t)snprintf(buf + n, sizeof(buf) - n, "X: %0300d\r\n", 0);
	expect_resp(buf, n, NULL, -EBADMSG, "response header block too large");
}

/* ---------------------------------------------------------------- framer */

typedef struct {
	const char *in;
	size_t len; /* 0: strlen */
	long want;  /* bytes of the body, or -EBADMSG */
	bool done;
} chunk_case;

// clang-format off
static const chunk_case chunk_cases[] = {
	/* valid */
	{ "0\r\n\r\n", 0, 5, true },
	{ "0\r\n\r\nHTTP/1.1 200 OK\r\n", 0, 5, true },
	{ "1\r\na\r\n0\r\n\r\n", 0, 11, true },
	{ "00000A;ext;e2=\"v v\"\r\n0123456789\r\n0;last\r\n\r\nnext", 0, 43, true },
	{ "3\r\n\r\n\r\r\n0\r\nA: 1\r\nB-c: x y \r\nD:\r\n\r\n", 0, 34, true },
	{ "5\r\nhel", 0, 6, false },
	{ "5\r\nhello\r\n0\r\nX: y\r\n", 0, 19, false },
	{ "", 0, 0, false },
	{ "3\r\n\0\0\0\r\n0\r\n\r\n", sizeof("3\r\n\0\0\0\r\n0\r\n\r\n") - 1, 13, true },
	/* bad chunk sizes */
	{ "x\r\n", 0, -EBADMSG, false },
	{ "-1\r\n", 0, -EBADMSG, false },
	{ " 5\r\nhello\r\n0\r\n\r\n", 0, -EBADMSG, false },
	{ "5 \r\nhello\r\n0\r\n\r\n", 0, -EBADMSG, false },
	{ "0x5\r\nhello\r\n0\r\n\r\n", 0, -EBADMSG, false },
	{ "\r\n", 0, -EBADMSG, false },
	{ "5\nhello\r\n0\r\n\r\n", 0, -EBADMSG, false },
	{ "5\r\rhello", 0, -EBADMSG, false },
	{ "5;a\x01\r\nhello", 0, -EBADMSG, false },
	{ "1000000000001\r\n", 0, -EBADMSG, false },
	{ "ffffffffffffffffffff\r\n", 0, -EBADMSG, false },
	{ "5\r\nhello\r\n5\r\nworld\r\n-0\r\n\r\n", 0, -EBADMSG, false },
	/* data not followed by CRLF */
	{ "5\r\nhelloX\r\n0\r\n\r\n", 0, -EBADMSG, false },
	{ "5\r\nhello\n0\r\n\r\n", 0, -EBADMSG, false },
	{ "5\r\nhello\r0\r\n\r\n", 0, -EBADMSG, false },
	{ "5\r\nhello world\r\n0\r\n\r\n", 0, -EBADMSG, false },
	{ "5\r\nhell\r\n0\r\n\r\n", 0, -EBADMSG, false },
	/* trailer section */
	{ "0\r\n\n", 0, -EBADMSG, false },
	{ "0\r\n\rX", 0, -EBADMSG, false },
	{ "0\r\nX: y\n\r\n", 0, -EBADMSG, false },
	{ "0\r\nX: y\r\r\n", 0, -EBADMSG, false },
	{ "0\r\nX : y\r\n\r\n", 0, -EBADMSG, false },
	{ "0\r\n y\r\n\r\n", 0, -EBADMSG, false },
	{ "0\r\nA: 1\r\n\tfold\r\n\r\n", 0, -EBADMSG, false },
	{ "0\r\n: v\r\n\r\n", 0, -EBADMSG, false },
	{ "0\r\nNoColon\r\n\r\n", 0, -EBADMSG, false },
	{ "0\r\nX: a\x01\r\n\r\n", 0, -EBADMSG, false },
	{ "0\r\nX: a\x7f\r\n\r\n", 0, -EBADMSG, false },
	{ "0\r\nX: \0\r\n\r\n", sizeof("0\r\nX: \0\r\n\r\n") - 1, -EBADMSG, false },
	{ "0\r\nX(: a\r\n\r\n", 0, -EBADMSG, false },
};
// clang-format on

static void test_framer_chunked(void **state)
{
	for (size_t i = 0; i < sizeof(chunk_cases) / sizeof(chunk_cases[0]); i++) {
		const chunk_case *c = &chunk_cases[i];
		size_t len = c->len ? c->len : strlen(c->in);
		bool done;
		long got = frame_all_ways(AB_HTTP_BODY_CHUNKED, 0, c->in, len, &done);
		if (got != c->want || (got >= 0 && done != c->done))
			fail_msg("chunk case %zu (%.30s): %ld/%d, want %ld/%d", i, c->in, got, done,
				 c->want, c->done);
	}
}

/* A chunked body whose trailer section is `tb` bytes (incl. its final CRLF)
 * in `count` fields. */
static size_t trailer_body(char *buf, size_t tb, unsigned count)
{
	size_t n = 0, body = tb - 2;
	memcpy(buf, "0\r\n", 3);
	n = 3;
	for (unsigned i = 0; i < count; i++) {
		size_t line = body / count + (i < body % count ? 1 : 0); /* incl. CRLF */
		assert_true(line >= 4);
		buf[n] = 'T';
		buf[n + 1] = ':';
		memset(buf + n + 2, 'v', line - 4);
		memcpy(buf + n + line - 2, "\r\n", 2);
		n += line;
	}
	memcpy(buf + n, "\r\n", 2);
	return n + 2;
}

static void test_framer_trailer_limits(void **state)
{
	static char buf[AB_HTTP_TRAILER_MAX_BYTES + 64];
	bool done;
	size_t n;

	n = trailer_body(buf, AB_HTTP_TRAILER_MAX_BYTES, 4);
	assert_int_equal(frame_all_ways(AB_HTTP_BODY_CHUNKED, 0, buf, n, &done), (long)n);
	assert_true(done);
	n = trailer_body(buf, AB_HTTP_TRAILER_MAX_BYTES + 1, 4);
	assert_int_equal(frame(AB_HTTP_BODY_CHUNKED, 0, buf, n, 0, &done), -EBADMSG);
	assert_int_equal(frame(AB_HTTP_BODY_CHUNKED, 0, buf, n, 1, &done), -EBADMSG);
	/* fails on the byte that crosses the limit, not at the end */
	assert_int_equal(
		frame(AB_HTTP_BODY_CHUNKED, 0, buf, 3 + AB_HTTP_TRAILER_MAX_BYTES + 1, 0, &done),
		-EBADMSG);
	n = trailer_body(buf, 4 * AB_HTTP_TRAILER_MAX_FIELDS + 2, AB_HTTP_TRAILER_MAX_FIELDS);
	assert_int_equal(frame_all_ways(AB_HTTP_BODY_CHUNKED, 0, buf, n, &done), (long)n);
	n = trailer_body(buf, 4 * (AB_HTTP_TRAILER_MAX_FIELDS + 1) + 2,
			 AB_HTTP_TRAILER_MAX_FIELDS + 1);
	assert_int_equal(frame(AB_HTTP_BODY_CHUNKED, 0, buf, n, 0, &done), -EBADMSG);
	assert_int_equal(frame(AB_HTTP_BODY_CHUNKED, 0, buf, n, 7, &done), -EBADMSG);

	/* the chunk-size line limit is ab_http_parse_chunk_size's */
	memset(buf, 'e', AB_HTTP_CHUNK_LINE_MAX + 8);
	memcpy(buf, "1;", 2);
	memcpy(buf + AB_HTTP_CHUNK_LINE_MAX - 2, "\r\nx\r\n0\r\n\r\n", 10);
	n = AB_HTTP_CHUNK_LINE_MAX + 8;
	assert_int_equal(frame_all_ways(AB_HTTP_BODY_CHUNKED, 0, buf, n, &done), (long)n);
	memcpy(buf + AB_HTTP_CHUNK_LINE_MAX - 2, "e\r\nx\r\n0\r\n\r\n", 11);
	assert_int_equal(frame(AB_HTTP_BODY_CHUNKED, 0, buf, n + 1, 1, &done), -EBADMSG);
	/* ... and already at its 1024th byte, before the CR arrives */
	assert_int_equal(frame(AB_HTTP_BODY_CHUNKED, 0, buf, AB_HTTP_CHUNK_LINE_MAX, 0, &done),
			 -EBADMSG);
	assert_int_equal(frame(AB_HTTP_BODY_CHUNKED, 0, buf, AB_HTTP_CHUNK_LINE_MAX - 1, 0, &done),
			 AB_HTTP_CHUNK_LINE_MAX - 1);
}

static void test_framer_kinds(void **state)
{
	ab_http_framer f;
	bool done = false;

	/* LENGTH across feeds, then nothing more */
	ab_http_framer_init(&f, AB_HTTP_BODY_LENGTH, 5);
	assert_int_equal(ab_http_framer_feed(&f, "abc", 3, &done), 3);
	assert_false(done);
	assert_int_equal(f.remaining, 2);
	assert_int_equal(ab_http_framer_feed(&f, "", 0, &done), 0);
	assert_false(done);
	assert_int_equal(ab_http_framer_feed(&f, "deNEXT", 6, &done), 2);
	assert_true(done);
	assert_int_equal(ab_http_framer_feed(&f, "NEXT", 4, &done), 0);
	assert_true(done);
	ab_http_framer_init(&f, AB_HTTP_BODY_LENGTH, 0);
	assert_int_equal(ab_http_framer_feed(&f, "x", 1, &done), 0);
	assert_true(done);
	assert_int_equal(ab_http_framer_feed(&f, "", 0, &done), 0);
	assert_true(done);
	/* huge lengths are just counted */
	ab_http_framer_init(&f, AB_HTTP_BODY_LENGTH, UINT64_MAX);
	assert_int_equal(ab_http_framer_feed(&f, "abc", 3, &done), 3);
	assert_false(done);
	assert_true(f.remaining == UINT64_MAX - 3);
	/* NONE, CLOSE, TUNNEL (content_length ignored) */
	ab_http_framer_init(&f, AB_HTTP_BODY_NONE, 7);
	assert_int_equal(ab_http_framer_feed(&f, "abc", 3, &done), 0);
	assert_true(done);
	for (int k = AB_HTTP_BODY_CLOSE; k <= AB_HTTP_BODY_TUNNEL; k++) {
		ab_http_framer_init(&f, (ab_http_body_kind)k, 2);
		assert_int_equal(ab_http_framer_feed(&f, "abc", 3, &done), 3);
		assert_false(done);
		assert_int_equal(ab_http_framer_feed(&f, "0\r\n\r\n", 5, &done), 5);
		assert_false(done);
	}
	/* errors stick */
	ab_http_framer_init(&f, AB_HTTP_BODY_CHUNKED, 0);
	assert_int_equal(ab_http_framer_feed(&f, "5\r\nhello", 8, &done), 8);
	assert_int_equal(ab_http_framer_feed(&f, "X", 1, &done), -EBADMSG);
	assert_int_equal(ab_http_framer_feed(&f, "\r\n0\r\n\r\n", 7, &done), -EBADMSG);
	assert_int_equal(ab_http_framer_feed(&f, "", 0, &done), -EBADMSG);
	ab_http_framer_init(&f, (ab_http_body_kind)42, 0);
	assert_int_equal(ab_http_framer_feed(&f, "x", 1, &done), -EINVAL);

	/* the largest chunk: counted down without reading 256 TiB */
	static char big[1 << 16];
	ab_http_framer_init(&f, AB_HTTP_BODY_CHUNKED, 0);
	assert_int_equal(ab_http_framer_feed(&f, S("1000000000000\r\n"), &done), 15);
	assert_int_equal(f.remaining, AB_HTTP_CHUNK_SIZE_MAX);
	for (int i = 0; i < 16; i++)
		assert_int_equal(ab_http_framer_feed(&f, big, sizeof(big), &done),
				 (int)sizeof(big));
	assert_false(done);
	assert_int_equal(f.remaining, AB_HTTP_CHUNK_SIZE_MAX - 16 * sizeof(big));
}

static unsigned rnd_seed = 12345;
static unsigned rnd(void)
{
	rnd_seed = rnd_seed * 1103515245u + 12345u;
	return (rnd_seed >> 16) & 0x7fff;
}
#define RND() rnd()

/* Pseudo-random chunked bodies: one feed == byte by byte == every split. */
static void test_framer_random(void **state)
{
	static char buf[4096];
	for (int round = 0; round < 200; round++) {
		size_t n = 0;
		int chunks = (int)(RND() % 5);
		for (int c = 0; c < chunks; c++) {
			size_t sz = RND() % 40 + 1;
			n += (size_t)snprintf(buf + n, sizeof(buf) - n,
					      RND() % 2 ? "%zx" : "%zX;e=%d", sz, c);
			memcpy(buf + n, "\r\n", 2);
			n += 2;
			for (size_t j = 0; j < sz; j++)
				buf[n++] = (char)RND();
			memcpy(buf + n, "\r\n", 2);
			n += 2;
		}
		n += (size_t)snprintf(buf + n, sizeof(buf) - n, "0\r\n%s\r\n",
				      RND() % 2 ? "T: 1\r\n" : "");
		size_t body = n;
		n += (size_t)snprintf(buf + n, sizeof(buf) - n, "HTTP/1.1 200 OK\r\n");
		/* corrupt one byte in a third of the rounds */
		if (round % 3 == 0) {
			size_t at = RND() % body;
			buf[at] ^= (char)(1 + RND() % 255);
		}
		bool done;
		long got = frame_all_ways(AB_HTTP_BODY_CHUNKED, 0, buf, n, &done);
		if (round % 3 != 0) {
			assert_int_equal(got, (long)body);
			assert_true(done);
		}
	}
}
#undef RND

/* ------------------------------------------------------- body codings */

/* Content-Encoding and transfer-codings that change the body's bytes: the
 * first such coding is recorded (the proxy refuses it where it masks). */
static void test_resp_codings(void **state)
{
	static const struct {
		const char *hdrs;
		const char *ce, *te; /* the recorded codings, "" for none */
		ab_http_body_kind kind;
	} t[] = {
		{"Content-Encoding: gzip\r\n" CL5, "gzip", "", AB_HTTP_BODY_LENGTH},
		{"Content-Encoding: identity\r\n" CL5, "", "", AB_HTTP_BODY_LENGTH},
		{"content-encoding: IDENTITY\r\n" CL5, "", "", AB_HTTP_BODY_LENGTH},
		{"Content-Encoding: identity, gzip\r\n" CL5, "gzip", "", AB_HTTP_BODY_LENGTH},
		{"Content-Encoding: GZip\r\n" CL5, "GZip", "", AB_HTTP_BODY_LENGTH},
		{"Content-Encoding: ,\t, identity ,\r\n" CL5, "", "", AB_HTTP_BODY_LENGTH},
		{"Content-Encoding:\r\n" CL5, "", "", AB_HTTP_BODY_LENGTH},
		{"Content-Encoding: identity\r\nContent-Encoding: br\r\n" CL5, "br", "",
		 AB_HTTP_BODY_LENGTH},
		{"Content-Encoding: deflate\r\nContent-Encoding: identity\r\n" CL5, "deflate", "",
		 AB_HTTP_BODY_LENGTH},
		{"Content-Encoding: zstd, br\r\n" CHUNKED, "zstd", "", AB_HTTP_BODY_CHUNKED},
		{"Content-Encoding: identity;x=1\r\n" CL5, "identity;x=1", "", AB_HTTP_BODY_LENGTH},
		{"Content-Encoding: x\x80y\r\n", "x\x80y", "", AB_HTTP_BODY_CLOSE},
		{"Content-Encoding: identityx\r\n", "identityx", "", AB_HTTP_BODY_CLOSE},
		{CHUNKED, "", "", AB_HTTP_BODY_CHUNKED},
		{"Transfer-Encoding: gzip, chunked\r\n", "", "gzip", AB_HTTP_BODY_CHUNKED},
		{"Transfer-Encoding: GZIP ,chunked\r\n", "", "GZIP", AB_HTTP_BODY_CHUNKED},
		{"Transfer-Encoding: br;q=1, gzip, chunked\r\n", "", "br", AB_HTTP_BODY_CHUNKED},
		{"Transfer-Encoding: identity, chunked\r\n", "", "identity", AB_HTTP_BODY_CHUNKED},
		{"Transfer-Encoding: gzip\r\n", "", "gzip", AB_HTTP_BODY_CLOSE},
		{"Content-Encoding: br\r\nTransfer-Encoding: deflate, chunked\r\n", "br", "deflate",
		 AB_HTTP_BODY_CHUNKED},
	};
	char in[512];

	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		int n = snprintf(in, sizeof(in), R200 "%s\r\n", t[i].hdrs);
		int r = ab_http_parse_response_head(in, (size_t)n, NULL, &resp);
		if (r != n)
			fail_msg("case %zu: r=%d (%s)", i, r, r < 0 ? resp.reason : "");
		assert_span(in, resp.content_coding, t[i].ce);
		assert_span(in, resp.transfer_coding, t[i].te);
		assert_int_equal(resp.body, t[i].kind);
		resp_bytewise(in, (size_t)n, NULL);
	}
	/* HEAD, 204, 304 and 1xx carry no body, coded or not */
	const char *none = "HTTP/1.1 304 Not Modified\r\nContent-Encoding: gzip\r\n\r\n";
	assert_true(ab_http_parse_response_head(none, strlen(none), NULL, &resp) > 0);
	assert_span(none, resp.content_coding, "gzip");
	assert_int_equal(resp.body, AB_HTTP_BODY_NONE);
	none = R200 "Content-Encoding: gzip\r\nContent-Length: 20\r\n\r\n";
	assert_true(ab_http_parse_response_head(none, strlen(none), NULL, &resp) > 0);
	assert_int_equal(ab_http_response_body(&resp, AB_HTTP_HEAD), AB_HTTP_BODY_NONE);
}

/* --------------------------------------------------------------- sniffing */

#define SN(lit, eof, want)                      \
	{                                       \
		lit, sizeof(lit) - 1, eof, want \
	}

static const struct {
	const char *in;
	size_t len;
	bool eof;
	int want;
} sniffs[] = {
	/* requests the strict parser accepts, and lenient servers' readings */
	SN("GET / HTTP/1.1\r\nHost: a\r\n\r\n", false, 1),
	SN("get /lm HTTP/1.1\r\n", false, 1),
	SN("M-SEARCH /ds HTTP/1.1\r\n", false, 1),
	SN("\r\n\nGET /lc HTTP/1.1\r\n", false, 1),
	SN("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", false, 1),
	SN("X /x http/1.0\n", false, 1),
	/* HTTP/0.9 and versions that are not HTTP/1.x: the method tells */
	SN("GET /t8-smuggled\r\n\r\n", false, 1),
	SN("GET /t8-smuggled", false, 1),
	SN("GET ", false, 1),
	SN("GET /t8 XTTP/1.1\r\nHost: evil.test\r\n\r\n", false, 1),
	SN("POST\t/x\r\n", false, 1),
	SN("HEAD /", false, 1),
	SN("PUT /", false, 1),
	SN("DELETE /", false, 1),
	SN("PATCH /", false, 1),
	SN("OPTIONS *", false, 1),
	SN("TRACE /", false, 1),
	SN("CONNECT a:1", false, 1),
	SN("GET /\0\x01", false, 1),
	/* NUL, empty lines and blanks first */
	SN("\0GET /t8-nul HTTP/1.1\r\nHost: evil.test\r\n\r\n", false, 1),
	SN("\0\0\r\n \t\0GET /x", false, 1),
	SN("\0get /x HTTP/1.1\r\n", false, 1),
	SN(" \0 x HTTP/1.0\r\n", false, 1),
	/* other protocols */
	SN("PING\r\n", false, 0),
	SN("*1\r\n$4\r\nPING\r\n", false, 0),
	SN("hello world\n", false, 0),
	SN("get key\r\n", false, 0),
	SN("GETX /x\r\n", false, 0),
	SN("Get /x\r\n", false, 0),
	SN("0032git-upload-pack /x\0host=a\0", false, 0),
	SN("\0\0\0\x08\x04\xd2\x16\x2f", false, 0),           /* PostgreSQL SSLRequest */
	SN("\0\0\0\x29\0\x03\0\0user\0postgres\0", false, 0), /* PostgreSQL startup */
	SN("\0\0\0\x41\0\x03", false, 0),
	SN("\x16\x03\x01\x02\x00\x01", false, 0),
	SN("SSH-2.0-OpenSSH_9.6\r\n", false, 0),
	SN("GET\x01 / HTTP/1.1\r\n", false, 0),
	SN("G\0T / HTTP/1.1\r\n", false, 0),
	SN("A HTTP/1.1\x7f\n", false, 0),
	/* too few bytes, then the end */
	SN("", false, -1),
	SN("", true, 0),
	SN("GE", false, -1),
	SN("GE", true, 0),
	SN("GET", false, -1),
	SN("GET", true, 0),
	SN("\0\0\0", false, -1),
	SN("\0\0\0", true, 0),
	SN("X /x HTTP/1.1", false, -1),
	SN("X /x HTTP/1.1", true, 1),
	SN("X /x", true, 0),
};

static void test_sniff(void **state)
{
	for (size_t i = 0; i < sizeof(sniffs) / sizeof(sniffs[0]); i++) {
		int r = ab_http_sniff_request(sniffs[i].in, sniffs[i].len, sniffs[i].eof);
		if (r != sniffs[i].want)
			fail_msg("sniff %zu (%.30s): %d, want %d", i, sniffs[i].in, r,
				 sniffs[i].want);
		/* a prefix says "more" or the final answer already */
		int whole = ab_http_sniff_request(sniffs[i].in, sniffs[i].len, false);
		for (size_t n = 0; n < sniffs[i].len; n++) {
			int k = ab_http_sniff_request(sniffs[i].in, n, false);
			if (k != -1 && k != whole)
				fail_msg("sniff %zu: prefix %zu says %d, the whole %d", i, n, k,
					 whole);
			assert_true(ab_http_sniff_request(sniffs[i].in, n, true) >= 0);
		}
	}
	/* a first line that does not end within the limit is HTTP (then a 414) */
	static char big[AB_HTTP_SNIFF_MAX + 1];
	memset(big, 'a', sizeof(big));
	assert_int_equal(ab_http_sniff_request(big, AB_HTTP_SNIFF_MAX - 1, false), -1);
	assert_int_equal(ab_http_sniff_request(big, AB_HTTP_SNIFF_MAX, false), 1);
	memset(big, 0, sizeof(big));
	assert_int_equal(ab_http_sniff_request(big, AB_HTTP_SNIFF_MAX - 1, false), -1);
	assert_int_equal(ab_http_sniff_request(big, sizeof(big), false), 1);
	/* every head the parser accepts is HTTP */
	static const char *ok[] = {
		"GET / HTTP/1.1\r\nHost: a.example\r\n\r\n",
		"M-SEARCH /x HTTP/1.1\r\nHost: a\r\n\r\n",
		"lower /x HTTP/1.0\r\n\r\n",
		"GET http://a.example/x HTTP/1.1\r\nHost: a.example\r\n\r\n",
		"CONNECT a.example:443 HTTP/1.1\r\nHost: a.example:443\r\n\r\n",
	};
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		assert_true(ab_http_parse_head(ok[i], strlen(ok[i]), NULL, &req) > 0);
		assert_int_equal(ab_http_sniff_request(ok[i], strlen(ok[i]), false), 1);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hostile),
		cmocka_unit_test(test_hostile_bytewise),
		cmocka_unit_test(test_origin_form),
		cmocka_unit_test(test_absolute_form),
		cmocka_unit_test(test_connect_and_others),
		cmocka_unit_test(test_derived_facts),
		cmocka_unit_test(test_valid_bytewise),
		cmocka_unit_test(test_pipelined),
		cmocka_unit_test(test_limit_line),
		cmocka_unit_test(test_limit_head),
		cmocka_unit_test(test_limit_count),
		cmocka_unit_test(test_chunk_size),
		cmocka_unit_test(test_status_text),
		cmocka_unit_test(test_resp_streams),
		cmocka_unit_test(test_resp_fields),
		cmocka_unit_test(test_resp_hostile),
		cmocka_unit_test(test_resp_limits),
		cmocka_unit_test(test_framer_chunked),
		cmocka_unit_test(test_framer_trailer_limits),
		cmocka_unit_test(test_framer_kinds),
		cmocka_unit_test(test_framer_random),
		cmocka_unit_test(test_resp_codings),
		cmocka_unit_test(test_sniff),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
