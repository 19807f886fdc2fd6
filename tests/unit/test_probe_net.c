/* SPDX-License-Identifier: MIT */
/*
 * The network probes' client (src/escape/probes/probe_netlib.c), its pure and
 * hostile-input parts: response reading over a socketpair (status lines
 * valid and not, heads over the cap, no head, huge and negative
 * Content-Length, chunked bodies, bodies over the cap, a CONNECT answer
 * that must not eat the tunnel's first bytes, canary-shaped and control
 * text withheld or cleaned), de-chunking of malformed input, the lab JSON
 * verdict, DNS query building and reply parsing, address literals, the
 * synthetic range, authorities and printable text.
 */
#include "unit.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../src/escape/probes/probe_netlib.h"

/* ---------------------------------------------------------------- helpers */

/* Feed `len` bytes from a child process into a socketpair, close, and read
 * one response from the other end (the tunnel's leftover goes to *rest). */
static void feed(const char *data, size_t len, bool connect_mode, pn_resp *rs, char *rest,
		 size_t restn)
{
	int sv[2];
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(sv[0]);
		signal(SIGPIPE, SIG_IGN);
		for (size_t off = 0; off < len;) {
			ssize_t k = write(sv[1], data + off, len - off);
			if (k <= 0)
				_exit(1);
			off += (size_t)k;
		}
		_exit(0);
	}
	close(sv[1]);
	pn_conn c = {sv[0], NULL};
	pn_read_response(NULL, "test", &c, connect_mode, rs);
	if (rest) {
		size_t got = 0;
		ssize_t k;
		while (got + 1 < restn && (k = read(sv[0], rest + got, restn - 1 - got)) > 0)
			got += (size_t)k;
		rest[got] = '\0';
	}
	close(sv[0]);
	int st;
	waitpid(pid, &st, 0);
}

static void feed_str(const char *s, bool connect_mode, pn_resp *rs)
{
	feed(s, strlen(s), connect_mode, rs, NULL, 0);
}

/* ---------------------------------------------------------------- responses */

static void test_status_lines(void **state)
{
	(void)state;
	static const struct {
		const char *in;
		int status;
	} t[] = {
		{"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n", 403},
		{"HTTP/1.0 200 OK\r\n\r\n", 200},
		{"HTTP/1.1 200\r\nContent-Length: 0\r\n\r\n", 200},
		{"HTTP/1.1 99 Low\r\n\r\n", -1},
		{"HTTP/1.1 2000 Long\r\n\r\n", -1},
		{"HTTP/1.1 600 High\r\n\r\n", -1},
		{"HTTP/2 200 OK\r\n\r\n", -1},
		{"HTTP/1.2 200 OK\r\n\r\n", -1},
		{"http/1.1 200 OK\r\n\r\n", -1},
		{"SSH-2.0-OpenSSH\r\n\r\n", -1},
		{"HTTP/1.1 2x0 OK\r\n\r\n", -1},
		{"\r\n\r\n", -1},
	};
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		pn_resp rs;
		feed_str(t[i].in, false, &rs);
		if (rs.status != t[i].status)
			fail_msg("case %zu (%s): status %d, want %d", i, t[i].in, rs.status,
				 t[i].status);
		pn_resp_free(&rs);
	}
}

static void test_refusal_reason(void **state)
{
	(void)state;
	pn_resp rs;
	feed_str("HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain\r\nContent-Length: 40\r\n"
		 "X-Agentbox-Decision: deny\r\n\r\nagentbox: x:443 is not in the allowlist\n",
		 true, &rs);
	assert_int_equal(rs.status, 403);
	assert_string_equal(rs.line, "HTTP/1.1 403 Forbidden");
	assert_string_equal(rs.reason, "agentbox: x:443 is not in the allowlist");
	pn_resp_free(&rs);
}

/* A 2xx CONNECT answer: not one byte past the head (the tunnel follows). */
static void test_connect_keeps_tunnel_bytes(void **state)
{
	(void)state;
	static const char in[] =
		"HTTP/1.1 200 Connection established\r\n\r\n\x16\x03\x01SERVERBYTES";
	pn_resp rs;
	char rest[64];
	feed(in, sizeof(in) - 1, true, &rs, rest, sizeof(rest));
	assert_int_equal(rs.status, 200);
	assert_int_equal(rs.nbody, 0);
	assert_string_equal(rest, "\x16\x03\x01SERVERBYTES");
	pn_resp_free(&rs);
}

static void test_no_head(void **state)
{
	(void)state;
	pn_resp rs;
	feed_str("", false, &rs);
	assert_int_equal(rs.status, -1);
	assert_int_equal(rs.err, 0); /* closed by the peer */
	assert_string_equal(rs.line, "");
	pn_resp_free(&rs);
	feed_str("HTTP/1.1 200 OK\r\nContent-Length: 3\r\n", false, &rs);
	assert_int_equal(rs.status, -1);
	assert_string_equal(rs.line, "HTTP/1.1 200 OK");
	assert_null(rs.body);
	pn_resp_free(&rs);
}

static void test_head_over_cap(void **state)
{
	(void)state;
	size_t n = PN_HEAD_MAX + 4096;
	char *big = malloc(n);
	assert_non_null(big);
	memcpy(big, "HTTP/1.1 200 OK\r\nX: ", 20);
	memset(big + 20, 'a', n - 20);
	pn_resp rs;
	feed(big, n, false, &rs, NULL, 0);
	assert_int_equal(rs.status, -1);
	assert_int_equal(rs.err, EMSGSIZE);
	pn_resp_free(&rs);
	free(big);
}

static void test_content_length_hostile(void **state)
{
	(void)state;
	static const char *const t[] = {
		"HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999999\r\n\r\nabc",
		"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\nabc",
		"HTTP/1.1 200 OK\r\nContent-Length: \r\n\r\nabc",
		"HTTP/1.1 200 OK\r\nContent-Length: 3x\r\n\r\nabc",
		"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nabc", /* short: EOF */
	};
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		pn_resp rs;
		feed_str(t[i], false, &rs);
		assert_int_equal(rs.status, 200);
		assert_int_equal(rs.nbody, 3);
		assert_string_equal(rs.body, "abc");
		pn_resp_free(&rs);
	}
	/* a shorter Content-Length stops the read there */
	pn_resp rs;
	feed_str("HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nabcdef", false, &rs);
	assert_int_equal(rs.nbody, 2);
	assert_string_equal(rs.body, "ab");
	pn_resp_free(&rs);
}

static void test_body_over_cap(void **state)
{
	(void)state;
	size_t n = PN_RESP_MAX * 2;
	char *big = malloc(n);
	assert_non_null(big);
	int h = snprintf(big, n, "HTTP/1.1 200 OK\r\n\r\n");
	memset(big + h, 'b', n - (size_t)h);
	pn_resp rs;
	feed(big, n, false, &rs, NULL, 0);
	assert_int_equal(rs.status, 200);
	assert_int_equal(rs.nbody, PN_RESP_MAX - (size_t)h);
	pn_resp_free(&rs);
	free(big);
}

static void test_chunked_json(void **state)
{
	(void)state;
	pn_resp rs;
	char sec[24];
	feed_str(
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
		"5;ext=1\r\n{\"sec\r\nF\r\nret\":\"real\",\"ho\r\n7\r\nst\":\"h\"\r\n1\r\n}\r\n0\r\n\r\n",
		false, &rs);
	assert_int_equal(rs.status, 200);
	assert_string_equal(rs.body, "{\"secret\":\"real\",\"host\":\"h\"}");
	assert_string_equal(pn_server_secret(&rs, sec, sizeof(sec)), "real");
	pn_resp_free(&rs);
}

static void test_withheld_and_cleaned(void **state)
{
	(void)state;
	pn_resp rs;
	feed_str("HTTP/1.1 200 OK\x01\x7f\xff\r\nContent-Length: 54\r\n\r\n"
		 "token ABCANARY-SSH-0123456789abcdef0123456789abcdef\n\n",
		 false, &rs);
	assert_int_equal(rs.status, 200);
	assert_string_equal(rs.line, "HTTP/1.1 200 OK???");
	assert_null(strstr(rs.reason, "ABCANARY"));
	assert_string_equal(rs.reason, "(withheld: canary-shaped text)");
	pn_resp_free(&rs);
}

static void test_server_secret(void **state)
{
	(void)state;
	static const struct {
		const char *body;
		const char *want;
	} t[] = {
		{"{\"host\":\"h\",\"secret\":\"placeholder\"}", "placeholder"},
		{"{\"secret\":\"none\"}", "none"},
		{"{\"secret\":\"Real\\n\\tx\"}", "?eal??x"},
		{"{\"secret\":\"real\\u0000x\"}", NULL}, /* jansson refuses NUL */
		{"{\"secret\":\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"}", "aaaaaaaaaaaaaaaa"},
		{"{\"secret\":1}", NULL},
		{"{\"host\":\"h\"}", NULL},
		{"[\"secret\",\"real\"]", NULL},
		{"not json \"secret\":\"real\"", NULL},
		{"", NULL},
	};
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		char body[128], sec[24];
		snprintf(body, sizeof(body), "%s", t[i].body);
		pn_resp rs = {.status = 200, .body = body, .nbody = strlen(body)};
		const char *s = pn_server_secret(&rs, sec, sizeof(sec));
		if (!t[i].want)
			assert_null(s);
		else
			assert_string_equal(s, t[i].want);
	}
	pn_resp none = {.status = -1};
	char sec[8];
	assert_null(pn_server_secret(&none, sec, sizeof(sec)));
}

/* ---------------------------------------------------------------- de-chunking */

static void test_dechunk_hostile(void **state)
{
	(void)state;
	static const struct {
		const char *in;
		const char *want;
	} t[] = {
		{"3\r\nabc\r\n0\r\n\r\n", "abc"},
		{"3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n", "abcde"},
		{"A\r\n0123456789\r\n0\r\n\r\n", "0123456789"},
		{"ffffffff\r\nabc", "abc"},    /* a size beyond the data: what is there */
		{"fffffffff\r\nabc", ""},      /* 9 digits: refused */
		{"zz\r\nabc\r\n", ""},         /* no digits */
		{"3abc", ""},                  /* no line end */
		{"3\r\nab", "ab"},             /* truncated */
		{"0\r\n\r\n3\r\nabc\r\n", ""}, /* nothing after the last chunk */
		{"", ""},
	};
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		char out[64];
		size_t n = pn_dechunk(t[i].in, strlen(t[i].in), out);
		out[n] = '\0';
		if (strcmp(out, t[i].want) != 0)
			fail_msg("case %zu: got '%s', want '%s'", i, out, t[i].want);
	}
}

/* ---------------------------------------------------------------- DNS */

static void test_dns_build(void **state)
{
	(void)state;
	uint8_t q[600];
	size_t n = pn_dns_build(q, sizeof(q), 0xbeef, "ab.c", 16);
	static const uint8_t want[] = {0xbe, 0xef, 0x01, 0,   0, 1,   0, 0, 0,  0, 0,
				       0,    2,    'a',  'b', 1, 'c', 0, 0, 16, 0, 1};
	assert_int_equal(n, sizeof(want));
	assert_memory_equal(q, want, sizeof(want));
	assert_int_equal(pn_dns_build(q, sizeof(q), 1, "ab.c.", 1),
			 sizeof(want));                             /* trailing dot */
	assert_int_equal(pn_dns_build(q, sizeof(q), 1, "", 1), 17); /* the root */
	char label64[80], longname[400];
	memset(label64, 'a', 64);
	strcpy(label64 + 64, ".x");
	for (size_t i = 0; i < 300; i += 2)
		memcpy(longname + i, "a.", 2);
	longname[300] = '\0';
	const char *const bad[] = {"a..b", ".a", "..", label64, longname};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(pn_dns_build(q, sizeof(q), 1, bad[i], 1), 0);
	assert_int_equal(pn_dns_build(q, 100, 1, "a", 1), 0); /* buffer too small */
}

static void test_dns_parse(void **state)
{
	(void)state;
	uint8_t m[12] = {0x12, 0x34, 0x81, 0x83, 0, 1, 0, 2, 0, 0, 0, 0};
	int rc = -1, an = -1;
	assert_int_equal(pn_dns_parse(m, sizeof(m), 0x1234, &rc, &an), 0);
	assert_int_equal(rc, 3);
	assert_int_equal(an, 2);
	assert_int_equal(pn_dns_parse(m, 11, 0x1234, &rc, &an), -1);        /* short */
	assert_int_equal(pn_dns_parse(m, sizeof(m), 0x1235, &rc, &an), -1); /* not ours */
	m[2] = 0x01; /* a query, not a reply */
	assert_int_equal(pn_dns_parse(m, sizeof(m), 0x1234, &rc, &an), -1);
	assert_string_equal(pn_rcode_name(3), "NXDOMAIN");
	assert_string_equal(pn_rcode_name(15), "rcode?");
	assert_string_equal(pn_rcode_name(-1), "rcode?");
}

/* ---------------------------------------------------------------- addresses */

static void test_addresses(void **state)
{
	(void)state;
	static const struct {
		const char *ip;
		int ok, family;
	} t[] = {
		{"1.2.3.4", 0, AF_INET},
		{"::1", 0, AF_INET6},
		{"[::1]", 0, AF_INET6},
		{"::ffff:1.2.3.4", 0, AF_INET6},
		{"[::1", -1, 0},
		{"::1]", -1, 0},
		{"1.2.3", -1, 0},
		{"0x7f.1", -1, 0},
		{"", -1, 0},
		{"[]", -1, 0},
		{"1.2.3.4:80", -1, 0},
		{"localhost", -1, 0},
	};
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		struct sockaddr_storage ss;
		socklen_t sl;
		int r = pn_mk_addr(t[i].ip, 443, &ss, &sl);
		if (r != t[i].ok || (r == 0 && ss.ss_family != t[i].family))
			fail_msg("case %zu (%s): %d", i, t[i].ip, r);
	}
	char longip[300];
	memset(longip, '1', sizeof(longip) - 1);
	longip[0] = '[';
	longip[sizeof(longip) - 2] = ']';
	longip[sizeof(longip) - 1] = '\0';
	struct sockaddr_storage ss;
	socklen_t sl;
	assert_int_equal(pn_mk_addr(longip, 1, &ss, &sl), -1);

	assert_true(pn_is_synthetic("198.18.0.0"));
	assert_true(pn_is_synthetic("198.19.255.255"));
	assert_false(pn_is_synthetic("198.17.255.255"));
	assert_false(pn_is_synthetic("198.20.0.0"));
	assert_false(pn_is_synthetic("::ffff:198.18.0.1"));
	assert_false(pn_is_synthetic("198.18.0.1x"));
	assert_true(pn_is_loopback("127.0.0.2"));
	assert_true(pn_is_loopback("::1"));
	assert_false(pn_is_loopback("128.0.0.1"));
	assert_false(pn_is_loopback("::ffff:127.0.0.1"));
}

static void test_text(void **state)
{
	(void)state;
	char b[160];
	pn_authority(b, sizeof(b), "h.test", 443);
	assert_string_equal(b, "h.test:443");
	pn_authority(b, sizeof(b), "::1", 80);
	assert_string_equal(b, "[::1]:80");
	pn_authority(b, sizeof(b), "[::1]", 80);
	assert_string_equal(b, "[::1]:80");
	char longhost[200];
	memset(longhost, 'a', sizeof(longhost) - 1);
	longhost[sizeof(longhost) - 1] = '\0';
	pn_authority(b, 64, longhost, 1);
	assert_string_equal(b, ""); /* never a cut host */

	static const char nul[] = "a\0b\\c\xff";
	pn_show(b, sizeof(b), nul, sizeof(nul) - 1);
	assert_string_equal(b, "a\\x00b\\x5cc\\xff");
	char many[400];
	memset(many, 'x', sizeof(many));
	pn_show(b, 140, many, sizeof(many));
	assert_true(strlen(b) < 140);
	assert_non_null(strstr(b, "...(400 bytes)"));
	pn_show(b, 12, many, sizeof(many));
	assert_true(strlen(b) < 12);

	pn_clean_line(b, sizeof(b), "ok\tline\r\nnext", 13);
	assert_string_equal(b, "ok?line");
	pn_clean_line(b, 8, "0123456789", 10);
	assert_string_equal(b, "0123456");
	pn_clean_line(b, sizeof(b), "x abcanary-ssh-", 15);
	assert_string_equal(b, "(withheld: canary-shaped text)");

	char *req = pn_http_req("POST", "/p", "h", "A: b\r\n", "body");
	assert_non_null(req);
	assert_string_equal(req, "POST /p HTTP/1.1\r\nHost: h\r\nUser-Agent: agentbox-probe\r\n"
				 "Accept: */*\r\nA: b\r\nContent-Length: 4\r\nConnection: close\r\n"
				 "\r\nbody");
	free(req);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_status_lines),
		cmocka_unit_test(test_refusal_reason),
		cmocka_unit_test(test_connect_keeps_tunnel_bytes),
		cmocka_unit_test(test_no_head),
		cmocka_unit_test(test_head_over_cap),
		cmocka_unit_test(test_content_length_hostile),
		cmocka_unit_test(test_body_over_cap),
		cmocka_unit_test(test_chunked_json),
		cmocka_unit_test(test_withheld_and_cleaned),
		cmocka_unit_test(test_server_secret),
		cmocka_unit_test(test_dechunk_hostile),
		cmocka_unit_test(test_dns_build),
		cmocka_unit_test(test_dns_parse),
		cmocka_unit_test(test_addresses),
		cmocka_unit_test(test_text),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
