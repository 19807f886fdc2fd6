/* SPDX-License-Identifier: MIT */
/* Unit tests for src/parse/netpolicy.c: host normalisation, rules, the policy
 * decision and private-address classification (pure; no privileges). */
#include "unit.h"

#include "agentbox/netpolicy.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

/* ---- ab_host_normalize ---- */

typedef struct norm_case {
	const char *in;
	int ret;         /* kind or -errno */
	const char *out; /* expected output when ret >= 0 */
} norm_case;

// clang-format off
static const norm_case norm_cases[] = {
	{ "example.com", AB_HOST_NAME, "example.com" },
	{ "API.Example.COM", AB_HOST_NAME, "api.example.com" },
	{ "example.com.", AB_HOST_NAME, "example.com" },      /* one trailing dot */
	{ "example.com..", -EINVAL, NULL },
	{ ".example.com", -EINVAL, NULL },
	{ "a..b", -EINVAL, NULL },
	{ ".", -EINVAL, NULL },
	{ "", -EINVAL, NULL },
	{ "localhost", AB_HOST_NAME, "localhost" },
	{ "my_bucket.s3.example.com", AB_HOST_NAME, "my_bucket.s3.example.com" },
	{ "xn--bcher-kva.example", AB_HOST_NAME, "xn--bcher-kva.example" },
	{ "b\xc3\xbc" "cher.example", -EINVAL, NULL },       /* raw IDN */
	{ "\xd0\xb0pple.com", -EINVAL, NULL },               /* Cyrillic homoglyph */
	{ "-a.example", -EINVAL, NULL },
	{ "a-.example", -EINVAL, NULL },
	{ "a-b.example", AB_HOST_NAME, "a-b.example" },
	{ "allowed@evil", -EINVAL, NULL },                   /* userinfo */
	{ "allowed.example.com@evil.test", -EINVAL, NULL },
	{ "evil%2eexample.com", -EINVAL, NULL },             /* percent-encoding */
	{ "%65xample.com", -EINVAL, NULL },
	{ " example.com", -EINVAL, NULL },                   /* whitespace */
	{ "example.com ", -EINVAL, NULL },
	{ "exa mple.com", -EINVAL, NULL },
	{ "example.com\t", -EINVAL, NULL },
	{ "example.com\r\n", -EINVAL, NULL },
	{ "example.com:443", -EINVAL, NULL },                /* port is not part of host */
	{ "example.com:", -EINVAL, NULL },
	{ "example.com/x", -EINVAL, NULL },
	{ "*.example.com", -EINVAL, NULL },
	{ "exa\\mple.com", -EINVAL, NULL },
	/* IPv4: canonical only */
	{ "127.0.0.1", AB_HOST_IPV4, "127.0.0.1" },
	{ "127.0.0.1.", AB_HOST_IPV4, "127.0.0.1" },
	{ "0.0.0.0", AB_HOST_IPV4, "0.0.0.0" },
	{ "255.255.255.255", AB_HOST_IPV4, "255.255.255.255" },
	{ "256.0.0.1", -EDOM, NULL },
	{ "0x7f.1", -EDOM, NULL },
	{ "0x7f.0.0.1", -EDOM, NULL },
	{ "0X7F000001", -EDOM, NULL },
	{ "2130706433", -EDOM, NULL },
	{ "0177.0.0.1", -EDOM, NULL },
	{ "127.1", -EDOM, NULL },
	{ "127.0.1", -EDOM, NULL },
	{ "127.0.0.1.1", -EDOM, NULL },
	{ "1.2.3.0x4", -EDOM, NULL },
	{ "example.0x", -EDOM, NULL },
	{ "example.123", -EDOM, NULL },
	{ "01.2.3.4", -EDOM, NULL },
	{ "1.2.3.04", -EDOM, NULL },
	{ "1.2.3.4444", -EDOM, NULL },
	{ "1.2.3.0000000004", -EDOM, NULL },
	{ "0x7f.example", AB_HOST_NAME, "0x7f.example" },   /* name: last label not numeric */
	{ "1.2.3.4.example", AB_HOST_NAME, "1.2.3.4.example" },
	{ "123abc", AB_HOST_NAME, "123abc" },
	/* IPv6 */
	{ "[::1]", AB_HOST_IPV6, "[::1]" },
	{ "[0:0:0:0:0:0:0:1]", AB_HOST_IPV6, "[::1]" },
	{ "[2001:DB8::1]", AB_HOST_IPV6, "[2001:db8::1]" },
	{ "[::ffff:127.0.0.1]", AB_HOST_IPV6, "[::ffff:127.0.0.1]" },
	{ "[::ffff:7f00:1]", AB_HOST_IPV6, "[::ffff:127.0.0.1]" },
	{ "[fe80::1%25eth0]", -EINVAL, NULL },
	{ "[fe80::1%eth0]", -EINVAL, NULL },
	{ "[::1", -EINVAL, NULL },
	{ "[]", -EINVAL, NULL },
	{ "[ ::1]", -EINVAL, NULL },
	{ "[::1]:443", -EINVAL, NULL },
	{ "[example.com]", -EINVAL, NULL },
	{ "[1.2.3.4]", -EINVAL, NULL },
	{ "::1", -EINVAL, NULL },
};
// clang-format on

static void test_normalize_table(void **state)
{
	for (size_t i = 0; i < AB_ARRAY_SIZE(norm_cases); i++) {
		const norm_case *c = &norm_cases[i];
		char out[AB_HOST_BUF];
		int r = ab_host_normalize(c->in, out, sizeof(out));

		if (r != c->ret) {
			print_error("case %zu '%s': got %d want %d\n", i, c->in, r, c->ret);
			fail();
		}
		if (r >= 0) {
			char again[AB_HOST_BUF];
			assert_string_equal(out, c->out);
			/* idempotent */
			assert_int_equal(ab_host_normalize(out, again, sizeof(again)), r);
			assert_string_equal(again, out);
		} else {
			assert_string_equal(out, "");
			assert_non_null(ab_host_strerror(r));
		}
	}
}

/* The label test on its own, in both cases: the TLS server-name check and
 * ab_host_normalize share it, and a copy of it that knew only lower-case hex
 * called "0xAB" a name. */
static void test_label_is_numeric(void **state)
{
	static const struct {
		const char *s;
		bool numeric;
	} cases[] = {
		{"0", true},     {"127", true},  {"0177", true},   {"4294967296", true},
		{"0x", true},    {"0X", true},   {"0x7f", true},   {"0X7F", true},
		{"0xab", true},  {"0xAB", true}, {"0XaB", true},   {"0x00000000ff", true},
		{"", false},     {"x", false},   {"0xg", false},   {"0XG", false},
		{"12a", false},  {"a12", false}, {"0x7f-", false}, {"x7f", false},
		{"00x1", false}, {"1x", false},  {"0x 1", false},  {"-1", false},
	};

	for (size_t i = 0; i < AB_ARRAY_SIZE(cases); i++)
		if (ab_host_label_is_numeric(cases[i].s, strlen(cases[i].s)) != cases[i].numeric)
			fail_msg("'%s': want %s", cases[i].s,
				 cases[i].numeric ? "numeric" : "a name");
	/* only the N bytes given count */
	assert_true(ab_host_label_is_numeric("12ab", 2));
	assert_false(ab_host_label_is_numeric("0xz", 3));
	assert_true(ab_host_label_is_numeric("0xz", 2));
}

static void test_normalize_lengths(void **state)
{
	char in[AB_HOST_INPUT_MAX + 50], out[AB_HOST_BUF];
	size_t n = 0;

	/* label of 63 ok, 64 too long */
	memset(in, 'a', 63);
	memcpy(in + 63, ".com", 5);
	assert_int_equal(ab_host_normalize(in, out, sizeof(out)), AB_HOST_NAME);
	memset(in, 'a', 64);
	memcpy(in + 64, ".com", 5);
	assert_int_equal(ab_host_normalize(in, out, sizeof(out)), -ENAMETOOLONG);

	/* name of exactly 253 ok (+ trailing dot ok), 254 too long */
	while (n < 253) {
		size_t l = 253 - n >= 50 ? 49 : 253 - n;
		memset(in + n, 'b', l);
		n += l;
		if (n < 253)
			in[n++] = '.';
	}
	in[253] = '\0';
	assert_int_equal(strlen(in), 253);
	assert_int_equal(ab_host_normalize(in, out, sizeof(out)), AB_HOST_NAME);
	assert_int_equal(strlen(out), 253);
	in[253] = '.';
	in[254] = '\0';
	assert_int_equal(ab_host_normalize(in, out, sizeof(out)), AB_HOST_NAME);
	in[253] = 'c';
	assert_int_equal(ab_host_normalize(in, out, sizeof(out)), -ENAMETOOLONG);

	/* enormous input refused without reading past the limit */
	memset(in, 'a', sizeof(in) - 1);
	in[sizeof(in) - 1] = '\0';
	assert_int_equal(ab_host_normalize(in, out, sizeof(out)), -ENAMETOOLONG);

	/* small output buffers */
	assert_int_equal(ab_host_normalize("example.com", out, 11), -ENOBUFS);
	assert_int_equal(ab_host_normalize("example.com", out, 12), AB_HOST_NAME);
	assert_int_equal(ab_host_normalize("[::1]", out, 5), -ENOBUFS);
	assert_int_equal(ab_host_normalize("[::1]", out, 6), AB_HOST_IPV6);
	assert_int_equal(ab_host_normalize(NULL, out, sizeof(out)), -EINVAL);
	assert_int_equal(ab_host_normalize("a", NULL, 0), -EINVAL);
}

/* ---- rules ---- */

typedef struct rule_case {
	const char *in;
	int ret;
	const char *text;
	bool wildcard;
	unsigned port;
	int kind;
} rule_case;

// clang-format off
static const rule_case rule_cases[] = {
	{ "api.example.com", 0, "api.example.com", false, 0, AB_HOST_NAME },
	{ "API.Example.com.", 0, "api.example.com", false, 0, AB_HOST_NAME },
	{ "*.example.com", 0, "*.example.com", true, 0, AB_HOST_NAME },
	{ "registry.npmjs.org:443", 0, "registry.npmjs.org:443", false, 443, AB_HOST_NAME },
	{ "*.githubusercontent.com:443", 0, "*.githubusercontent.com:443", true, 443, AB_HOST_NAME },
	{ "[::1]:8080", 0, "[::1]:8080", false, 8080, AB_HOST_IPV6 },
	{ "[::1]", 0, "[::1]", false, 0, AB_HOST_IPV6 },
	{ "127.0.0.1:8000", 0, "127.0.0.1:8000", false, 8000, AB_HOST_IPV4 },
	{ "host:65535", 0, "host:65535", false, 65535, AB_HOST_NAME },
	{ "host:1", 0, "host:1", false, 1, AB_HOST_NAME },
	{ "host:", -EINVAL, NULL, false, 0, 0 },
	{ "host:0", -EINVAL, NULL, false, 0, 0 },
	{ "host:0443", -EINVAL, NULL, false, 0, 0 },
	{ "host:65536", -EINVAL, NULL, false, 0, 0 },
	{ "host:999999", -EINVAL, NULL, false, 0, 0 },
	{ "host:+443", -EINVAL, NULL, false, 0, 0 },
	{ "host: 443", -EINVAL, NULL, false, 0, 0 },
	{ "host:443 ", -EINVAL, NULL, false, 0, 0 },
	{ "host:443:80", -EINVAL, NULL, false, 0, 0 },
	{ "::1", -EINVAL, NULL, false, 0, 0 },
	{ "[::1]8080", -EINVAL, NULL, false, 0, 0 },
	{ "[::1]:", -EINVAL, NULL, false, 0, 0 },
	{ "*", -EINVAL, NULL, false, 0, 0 },
	{ "*.", -EINVAL, NULL, false, 0, 0 },
	{ "**.example.com", -EINVAL, NULL, false, 0, 0 },
	{ "*example.com", -EINVAL, NULL, false, 0, 0 },
	{ "a.*.example.com", -EINVAL, NULL, false, 0, 0 },
	{ "*.1.2.3.4", -EINVAL, NULL, false, 0, 0 },
	{ "*.[::1]", -EINVAL, NULL, false, 0, 0 },
	{ "*.127.1", -EDOM, NULL, false, 0, 0 },
	{ "0x7f.1:80", -EDOM, NULL, false, 0, 0 },
	{ "", -EINVAL, NULL, false, 0, 0 },
	{ ":443", -EINVAL, NULL, false, 0, 0 },
	{ "user@host", -EINVAL, NULL, false, 0, 0 },
};
// clang-format on

static void test_rule_table(void **state)
{
	for (size_t i = 0; i < AB_ARRAY_SIZE(rule_cases); i++) {
		const rule_case *c = &rule_cases[i];
		ab_netrule r;
		ab_err err;
		int ret;

		memset(&err, 0, sizeof(err));
		ret = ab_netrule_parse(c->in, &r, &err);
		if (ret != c->ret) {
			print_error("case %zu '%s': got %d want %d (%s)\n", i, c->in, ret, c->ret,
				    err.msg);
			fail();
		}
		if (ret == 0) {
			assert_string_equal(r.text, c->text);
			assert_int_equal(r.wildcard, c->wildcard);
			assert_int_equal(r.port, c->port);
			assert_int_equal(r.kind, c->kind);
		} else {
			assert_true(err.msg[0] != '\0');
			assert_int_equal(err.code, -c->ret);
		}
	}
}

/* ---- policy decision ---- */

static void build_policy(ab_netpolicy *p)
{
	static const char *allow[] = {
		"api.example.com",
		"*.example.com",
		"registry.npmjs.org:443",
		"*.githubusercontent.com:443",
		"[::1]:8080",
		"127.0.0.1:8000",
		"allowed.test",
		"8.8.8.8",
		"*.co",
	};
	static const char *deny[] = {"stats.example.com", "*.bad.example.com", "8.8.4.4"};
	static const char *priv[] = {"10.1.2.3:5432", "upstream.test:8443", "[fd00::5]"};
	ab_err err;

	memset(p, 0, sizeof(*p));
	for (size_t i = 0; i < AB_ARRAY_SIZE(allow); i++)
		assert_int_equal(ab_netpolicy_add(p, AB_NETLIST_ALLOW, allow[i], &err), 0);
	for (size_t i = 0; i < AB_ARRAY_SIZE(deny); i++)
		assert_int_equal(ab_netpolicy_add(p, AB_NETLIST_DENY, deny[i], &err), 0);
	for (size_t i = 0; i < AB_ARRAY_SIZE(priv); i++)
		assert_int_equal(ab_netpolicy_add(p, AB_NETLIST_PRIVATE, priv[i], &err), 0);
}

typedef struct check_case {
	const char *host;
	unsigned port;
	ab_netverdict v;
	const char *rule; /* expected rule text, NULL for none */
} check_case;

// clang-format off
static const check_case check_cases[] = {
	{ "api.example.com", 443, AB_NET_ALLOW, "api.example.com" },
	{ "api.example.com", 80, AB_NET_ALLOW, "api.example.com" },
	{ "api.example.com", 8443, AB_NET_NOT_LISTED, NULL },
	{ "API.EXAMPLE.COM.", 443, AB_NET_ALLOW, "api.example.com" },
	{ "x.example.com", 443, AB_NET_ALLOW, "*.example.com" },
	{ "a.b.example.com", 80, AB_NET_ALLOW, "*.example.com" },
	{ "example.com", 443, AB_NET_NOT_LISTED, NULL },      /* bare suffix */
	{ "example.com.", 443, AB_NET_NOT_LISTED, NULL },
	{ "evilexample.com", 443, AB_NET_NOT_LISTED, NULL },  /* label boundary */
	{ "example.com.evil.test", 443, AB_NET_NOT_LISTED, NULL },
	{ "allowed.test.evil.test", 443, AB_NET_NOT_LISTED, NULL },
	{ "allowed.test", 443, AB_NET_ALLOW, "allowed.test" },
	{ "xallowed.test", 443, AB_NET_NOT_LISTED, NULL },
	{ "allowed@evil", 443, AB_NET_INVALID, NULL },
	{ "allowed.test@evil.test", 443, AB_NET_INVALID, NULL },
	{ "allowed%2etest", 443, AB_NET_INVALID, NULL },
	{ "allowed.test ", 443, AB_NET_INVALID, NULL },
	{ "allowed.test..", 443, AB_NET_INVALID, NULL },
	{ "allowed.test", 0, AB_NET_INVALID, NULL },          /* empty port upstream */
	{ "allowed.test", 65536, AB_NET_INVALID, NULL },
	{ "registry.npmjs.org", 443, AB_NET_ALLOW, "registry.npmjs.org:443" },
	{ "registry.npmjs.org", 80, AB_NET_NOT_LISTED, NULL },
	{ "raw.githubusercontent.com", 443, AB_NET_ALLOW, "*.githubusercontent.com:443" },
	{ "raw.githubusercontent.com", 80, AB_NET_NOT_LISTED, NULL },
	{ "githubusercontent.com", 443, AB_NET_NOT_LISTED, NULL },
	{ "stats.example.com", 443, AB_NET_DENY, "stats.example.com" }, /* deny wins */
	{ "stats.example.com", 8080, AB_NET_DENY, "stats.example.com" }, /* deny: all ports */
	{ "Stats.Example.com.", 443, AB_NET_DENY, "stats.example.com" },
	{ "x.bad.example.com", 443, AB_NET_DENY, "*.bad.example.com" },
	{ "bad.example.com", 443, AB_NET_ALLOW, "*.example.com" },
	{ "co", 443, AB_NET_NOT_LISTED, NULL },
	{ "x.co", 443, AB_NET_ALLOW, "*.co" },
	/* IP literals: exact rules only */
	{ "127.0.0.1", 8000, AB_NET_ALLOW, "127.0.0.1:8000" },
	{ "127.0.0.1", 443, AB_NET_NOT_LISTED, NULL },
	{ "127.0.0.2", 8000, AB_NET_NOT_LISTED, NULL },
	{ "0x7f.1", 8000, AB_NET_INVALID, NULL },
	{ "2130706433", 8000, AB_NET_INVALID, NULL },
	{ "0177.0.0.1", 8000, AB_NET_INVALID, NULL },
	{ "127.1", 8000, AB_NET_INVALID, NULL },
	{ "[::1]", 8080, AB_NET_ALLOW, "[::1]:8080" },
	{ "[0::1]", 8080, AB_NET_ALLOW, "[::1]:8080" },
	{ "[::1]", 443, AB_NET_NOT_LISTED, NULL },
	{ "[::ffff:127.0.0.1]", 8000, AB_NET_NOT_LISTED, NULL },
	{ "[::ffff:169.254.169.254]", 80, AB_NET_NOT_LISTED, NULL },
	{ "169.254.169.254", 80, AB_NET_NOT_LISTED, NULL },
	{ "8.8.8.8", 443, AB_NET_ALLOW, "8.8.8.8" },
	{ "8.8.4.4", 443, AB_NET_DENY, "8.8.4.4" },
	{ "1.example.com", 443, AB_NET_ALLOW, "*.example.com" },
	/* private list implies allow */
	{ "10.1.2.3", 5432, AB_NET_ALLOW, "10.1.2.3:5432" },
	{ "upstream.test", 8443, AB_NET_ALLOW, "upstream.test:8443" },
	{ "upstream.test", 443, AB_NET_NOT_LISTED, NULL },
	{ "[fd00::5]", 443, AB_NET_ALLOW, "[fd00::5]" },
	{ "", 443, AB_NET_INVALID, NULL },
	{ NULL, 443, AB_NET_INVALID, NULL },
};
// clang-format on

static void test_check_table(void **state)
{
	ab_netpolicy p;

	build_policy(&p);
	for (size_t i = 0; i < AB_ARRAY_SIZE(check_cases); i++) {
		const check_case *c = &check_cases[i];
		const ab_netrule *r = (const ab_netrule *)1;
		ab_netverdict v = ab_netpolicy_check(&p, c->host, c->port, &r);

		if (v != c->v || (c->rule == NULL) != (r == NULL) ||
		    (r && strcmp(r->text, c->rule) != 0)) {
			print_error("case %zu '%s':%u: got %d (%s) want %d (%s)\n", i,
				    c->host ? c->host : "(null)", c->port, v, r ? r->text : "-",
				    c->v, c->rule ? c->rule : "-");
			fail();
		}
	}
	assert_int_equal(ab_netpolicy_check(&p, "api.example.com", 443, NULL), AB_NET_ALLOW);
	ab_netpolicy_free(&p);
	assert_int_equal(ab_netpolicy_check(&p, "api.example.com", 443, NULL), AB_NET_NOT_LISTED);
	assert_int_equal(ab_netpolicy_check(NULL, "api.example.com", 443, NULL), AB_NET_INVALID);
}

static void test_policy_add_errors(void **state)
{
	ab_netpolicy p = {0};
	ab_err err;

	memset(&err, 0, sizeof(err));
	assert_int_equal(ab_netpolicy_add(&p, AB_NETLIST_PRIVATE, "*.internal", &err), -EINVAL);
	assert_non_null(strstr(err.msg, "wildcard"));
	assert_int_equal(ab_netpolicy_add(&p, (ab_netlist)7, "a.b", &err), -EINVAL);
	assert_int_equal(ab_netpolicy_add(&p, AB_NETLIST_ALLOW, "a b", &err), -EINVAL);
	assert_int_equal(p.n_allow + p.n_deny + p.n_priv, 0);
	for (int i = 0; i < AB_NETPOLICY_MAX_RULES; i++)
		assert_int_equal(ab_netpolicy_add(&p, AB_NETLIST_DENY, "a.b", &err), 0);
	assert_int_equal(ab_netpolicy_add(&p, AB_NETLIST_DENY, "a.b", &err), -E2BIG);
	ab_netpolicy_free(&p);
	ab_netpolicy_free(NULL);
}

/* ---- address classification ---- */

typedef struct addr_case {
	const char *addr;
	bool priv;
} addr_case;

// clang-format off
static const addr_case addr_cases[] = {
	{ "127.0.0.1", true }, { "127.255.255.254", true }, { "0.0.0.0", true },
	{ "0.1.2.3", true }, { "10.0.0.1", true }, { "172.16.0.1", true },
	{ "172.31.255.255", true }, { "172.32.0.1", false }, { "172.15.255.255", false },
	{ "192.168.1.1", true }, { "169.254.169.254", true }, { "169.254.170.2", true },
	{ "100.64.0.1", true }, { "100.100.100.200", true }, { "100.127.255.255", true },
	{ "100.128.0.1", false }, { "100.63.255.255", false }, { "224.0.0.1", true },
	{ "239.255.255.250", true }, { "240.0.0.1", true }, { "255.255.255.255", true },
	{ "192.0.0.1", true }, { "192.0.0.192", true }, { "192.0.2.1", true },
	{ "198.18.0.1", true }, { "198.19.255.255", true }, { "198.20.0.1", false },
	{ "198.51.100.7", true }, { "203.0.113.9", true }, { "168.63.129.16", true },
	{ "168.63.129.17", false }, { "8.8.8.8", false }, { "1.1.1.1", false },
	{ "93.184.216.34", false }, { "223.255.255.255", false }, { "11.0.0.1", false },
	{ "::", true }, { "::1", true }, { "::2", true }, { "::7f00:1", true },
	{ "::8.8.8.8", true }, /* IPv4-compatible: deprecated, always refused */
	{ "fe80::1", true }, { "febf::1", true }, { "fec0::1", true },
	{ "fc00::1", true }, { "fd00:ec2::254", true }, { "ff02::1", true },
	{ "ff0e::1", true }, { "::ffff:127.0.0.1", true }, { "::ffff:169.254.169.254", true },
	{ "::ffff:10.0.0.1", true }, { "::ffff:8.8.8.8", false },
	{ "::ffff:0:127.0.0.1", true }, { "::ffff:0:8.8.8.8", false },
	{ "64:ff9b::127.0.0.1", true }, { "64:ff9b::169.254.169.254", true },
	{ "64:ff9b::8.8.8.8", false }, { "64:ff9b:1::1", true },
	{ "2002:7f00:1::", true }, { "2002:a9fe:a9fe::1", true }, { "2002:808:808::1", false },
	{ "2001:db8::1", true }, { "2001::1", true }, { "3fff::1", true },
	{ "100::1", true }, { "2606:4700::1111", false }, { "2001:4860:4860::8888", false },
	{ "2a00:1450::1", false },
};
// clang-format on

static void test_addr_table(void **state)
{
	for (size_t i = 0; i < AB_ARRAY_SIZE(addr_cases); i++) {
		const addr_case *c = &addr_cases[i];
		struct sockaddr_in sin = {.sin_family = AF_INET};
		struct sockaddr_in6 sin6 = {.sin6_family = AF_INET6};
		bool got;

		if (inet_pton(AF_INET, c->addr, &sin.sin_addr) == 1) {
			got = ab_addr_is_private((struct sockaddr *)&sin);
			assert_int_equal(got,
					 ab_addr_is_private_raw(AF_INET, (uint8_t *)&sin.sin_addr));
			/* the mapped and NAT64 forms classify the same */
			uint8_t m[16] = {[10] = 0xff, [11] = 0xff};
			uint8_t n64[16] = {0, 0x64, 0xff, 0x9b};
			memcpy(m + 12, &sin.sin_addr, 4);
			memcpy(n64 + 12, &sin.sin_addr, 4);
			assert_int_equal(ab_addr_is_private_raw(AF_INET6, m), got);
			assert_int_equal(ab_addr_is_private_raw(AF_INET6, n64), got);
		} else {
			assert_int_equal(inet_pton(AF_INET6, c->addr, &sin6.sin6_addr), 1);
			got = ab_addr_is_private((struct sockaddr *)&sin6);
		}
		if (got != c->priv) {
			print_error("case %zu %s: got %d want %d\n", i, c->addr, got, c->priv);
			fail();
		}
	}
	struct sockaddr_un_like {
		sa_family_t f;
		char p[20];
	} un = {.f = AF_UNIX};
	assert_true(ab_addr_is_private((struct sockaddr *)&un));
	assert_true(ab_addr_is_private(NULL));
	assert_true(ab_addr_is_private_raw(AF_INET, NULL));
	assert_true(ab_addr_is_private_raw(12345, (const uint8_t *)"0123456789abcdef"));
}

/* ---- post-resolution check ---- */

typedef struct dial_case {
	const char *host;
	unsigned port;
	const char *addr;
	bool ok;
} dial_case;

// clang-format off
static const dial_case dial_cases[] = {
	{ "api.example.com", 443, "93.184.216.34", true },
	{ "api.example.com", 443, "127.0.0.1", false },        /* DNS rebinding to loopback */
	{ "api.example.com", 443, "169.254.169.254", false },  /* metadata */
	{ "api.example.com", 443, "::ffff:127.0.0.1", false },
	{ "api.example.com", 443, "::ffff:169.254.169.254", false },
	{ "api.example.com", 443, "64:ff9b::a9fe:a9fe", false },
	{ "api.example.com", 443, "::1", false },
	{ "api.example.com", 443, "fd00:ec2::254", false },
	{ "api.example.com", 443, "100.100.100.200", false },
	{ "api.example.com", 443, "168.63.129.16", false },
	{ "api.example.com", 443, "8.8.4.4", false },          /* deny rule names the IP */
	{ "api.example.com", 443, "::ffff:8.8.4.4", false },
	{ "api.example.com", 443, "2606:4700::1111", true },
	{ "10.1.2.3", 5432, "10.1.2.3", true },                 /* private rule by IP */
	{ "10.1.2.3", 5433, "10.1.2.3", false },
	{ "10.1.2.3", 5432, "::ffff:10.1.2.3", true },
	{ "api.example.com", 5432, "10.1.2.3", true },          /* IP named: same destination */
	{ "upstream.test", 8443, "127.0.0.1", true },           /* private rule by name */
	{ "UPSTREAM.test.", 8443, "127.0.0.1", true },
	{ "upstream.test", 443, "127.0.0.1", false },
	{ "x.upstream.test", 8443, "127.0.0.1", false },
	{ "other.test", 8443, "127.0.0.1", false },
	{ "[fd00::5]", 443, "fd00::5", true },
	{ "[fd00::5]", 80, "fd00::5", true },
	{ "[fd00::5]", 8443, "fd00::5", false },
	{ "[fd00::6]", 443, "fd00::6", false },
	{ "127.0.0.1", 8000, "127.0.0.1", false },              /* allow is not private */
	{ "api.example.com", 0, "93.184.216.34", false },
};
// clang-format on

static void test_dial_table(void **state)
{
	ab_netpolicy p;

	build_policy(&p);
	for (size_t i = 0; i < AB_ARRAY_SIZE(dial_cases); i++) {
		const dial_case *c = &dial_cases[i];
		struct sockaddr_in sin = {.sin_family = AF_INET};
		struct sockaddr_in6 sin6 = {.sin6_family = AF_INET6};
		struct sockaddr *sa;
		bool got;

		if (inet_pton(AF_INET, c->addr, &sin.sin_addr) == 1) {
			sa = (struct sockaddr *)&sin;
		} else {
			assert_int_equal(inet_pton(AF_INET6, c->addr, &sin6.sin6_addr), 1);
			sa = (struct sockaddr *)&sin6;
		}
		got = ab_netpolicy_addr_allowed(&p, c->host, c->port, sa);
		if (got != c->ok) {
			print_error("case %zu %s:%u -> %s: got %d want %d\n", i, c->host, c->port,
				    c->addr, got, c->ok);
			fail();
		}
	}
	assert_false(ab_netpolicy_addr_allowed(&p, "api.example.com", 443, NULL));
	assert_false(ab_netpolicy_addr_allowed(NULL, "api.example.com", 443, NULL));
	ab_netpolicy_free(&p);
}

/* A hostile rule never puts control bytes into the error (found by
 * fuzz_profile: a DEL inside a network.allow entry). */
static void test_rule_error_printable(void **state)
{
	const char *bad[] = {"a\x7f"
			     "b.example",
			     "a\x1b[31m.example",
			     "x\xc2\x9b"
			     "1m.example",
			     "host:\x7f"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ab_netrule r;
		ab_err e = {0};
		assert_true(ab_netrule_parse(bad[i], &r, &e) < 0);
		for (const unsigned char *p = (const unsigned char *)e.msg; *p; p++) {
			assert_false(*p < 0x20 || *p == 0x7f);
			assert_false(p[0] == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f);
		}
		assert_non_null(strstr(e.msg, "network rule '"));
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rule_error_printable),
		cmocka_unit_test(test_normalize_table),
		cmocka_unit_test(test_label_is_numeric),
		cmocka_unit_test(test_normalize_lengths),
		cmocka_unit_test(test_rule_table),
		cmocka_unit_test(test_check_table),
		cmocka_unit_test(test_policy_add_errors),
		cmocka_unit_test(test_addr_table),
		cmocka_unit_test(test_dial_table),
	};
	return cmocka_run_group_tests_name("netpolicy", tests, NULL, NULL);
}
