/* SPDX-License-Identifier: MIT */
/*
 * http.c: the HTTP/1.1 request-head parser and the chunk-size parser.
 * Table-driven valid and hostile heads (each with its exact status and
 * reason), byte-by-byte feeding, limits at and one past each boundary,
 * pipelining.  Pure, no privileges.
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
#define assert_span(buf, s, want)                                                   \
	do {                                                                        \
		if (!span_is(buf, s, want))                                         \
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
	{ "GET /\r\n" HOST "\r\n", 0, 400, "invalid request-target" },
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
	} ms[] = { { "GET", AB_HTTP_GET },	   { "HEAD", AB_HTTP_HEAD },
		   { "POST", AB_HTTP_POST },	   { "PUT", AB_HTTP_PUT },
		   { "DELETE", AB_HTTP_DELETE },   { "PATCH", AB_HTTP_PATCH },
		   { "OPTIONS", AB_HTTP_OPTIONS }, { "TRACE", AB_HTTP_TRACE },
		   { "PROPFIND", AB_HTTP_OTHER },  { "get", AB_HTTP_OTHER },
		   { "M-SEARCH", AB_HTTP_OTHER } };
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
	const ab_http_limits lim = { .max_line = 100 };
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

	const ab_http_limits lim = { .max_head = 64 };
	const char *h64 = "GET / HTTP/1.1\r\nHost: h\r\nX: 01234567890123456789012345678901\r\n\r\n";
	assert_int_equal(strlen(h64), 64);
	expect(h64, 64, &lim, 64, 0);
	const char *h65 = "GET / HTTP/1.1\r\nHost: h\r\nX: 012345678901234567890123456789012\r\n\r\n";
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
	const ab_http_limits lim = { .max_headers = 2 };
	expect(S("GET / HTTP/1.1\r\nHost: h\r\nA: 1\r\n\r\n"), &lim, 33, 0);
	expect(S("GET / HTTP/1.1\r\nHost: h\r\nA: 1\r\nB: 2\r\n\r\n"), &lim, -1, 431);
	/* a larger limit than the struct holds is clamped */
	const ab_http_limits big = { .max_headers = 1000 };
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
		{ "0\r\n", 1, 0, 3 },
		{ "1a\r\nxx", 1, 26, 4 },
		{ "FFff\r\n", 1, 0xffff, 6 },
		{ "0000000010\r\n", 1, 16, 12 },
		{ "5;name=val\r\n", 1, 5, 12 },
		{ "5;a=\"q s\"\t;b\r\n", 1, 5, 14 },
		{ "1000000000000\r\n", 1, 1ull << 48, 15 },
		{ "1000000000001\r\n", -EBADMSG, 0, 0 },
		{ "ffffffffffffffffff\r\n", -EBADMSG, 0, 0 },
		{ "10000000000000000000001\r\n", -EBADMSG, 0, 0 },
		{ "5\n", -EBADMSG, 0, 0 },
		{ "5;x\n", -EBADMSG, 0, 0 },
		{ "5\rx", -EBADMSG, 0, 0 },
		{ "\r\n", -EBADMSG, 0, 0 },
		{ ";x\r\n", -EBADMSG, 0, 0 },
		{ "-1\r\n", -EBADMSG, 0, 0 },
		{ "0x5\r\n", -EBADMSG, 0, 0 },
		{ " 5\r\n", -EBADMSG, 0, 0 },
		{ "5 \r\n", -EBADMSG, 0, 0 },
		{ "5;\x01\r\n", -EBADMSG, 0, 0 },
		{ "5;\x7f\r\n", -EBADMSG, 0, 0 },
		{ "", 0, 0, 0 },
		{ "5", 0, 0, 0 },
		{ "5\r", 0, 0, 0 },
		{ "5;ext", 0, 0, 0 },
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
	assert_int_equal(ab_http_parse_chunk_size(line, AB_HTTP_CHUNK_LINE_MAX - 1, &sz, &used),
			 0);
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
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
