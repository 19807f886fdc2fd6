/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target (any process; fuzzing only): the egress policy on
 * arbitrary bytes -- host normalisation, rule parsing, the policy decision
 * and address classification.  Properties checked beyond "no crash, no
 * leak, no UB":
 *   - a normalised host is idempotent, at most 253 characters, and only
 *     [a-z0-9._-] (names, canonical IPv4) or "[" hex/':'/'.' "]" (IPv6);
 *   - a name never looks numeric in its last label (alternative IP forms
 *     are never names);
 *   - a parsed rule's text re-parses to the same rule;
 *   - ab_netpolicy_check never allows an invalid host, and a deny rule wins;
 *   - an IPv4 address and its IPv4-mapped and NAT64 IPv6 forms classify the
 *     same, and every IPv4-mapped loopback/metadata form is private.
 */
#include "agentbox/netpolicy.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static ab_netpolicy policy;
static bool policy_ready;

static void setup_policy(void)
{
	static const char *allow[] = {"api.example.com", "*.example.com", "127.0.0.1:8000",
				      "[::1]:8080", "*.githubusercontent.com:443"};
	ab_err err;

	for (size_t i = 0; i < sizeof(allow) / sizeof(allow[0]); i++)
		if (ab_netpolicy_add(&policy, AB_NETLIST_ALLOW, allow[i], &err) < 0)
			__builtin_trap();
	if (ab_netpolicy_add(&policy, AB_NETLIST_DENY, "*.bad.example.com", &err) < 0 ||
	    ab_netpolicy_add(&policy, AB_NETLIST_PRIVATE, "upstream.test:8443", &err) < 0 ||
	    ab_netpolicy_add(&policy, AB_NETLIST_PRIVATE, "10.0.0.1:5432", &err) < 0)
		__builtin_trap();
	policy_ready = true;
}

static void check_host(const char *s)
{
	char out[AB_HOST_BUF], again[AB_HOST_BUF];
	int r = ab_host_normalize(s, out, sizeof(out));
	size_t n;

	if (r < 0) {
		if (out[0])
			__builtin_trap();
		return;
	}
	n = strlen(out);
	if (n == 0 || n > AB_HOST_MAX)
		__builtin_trap();
	if (ab_host_normalize(out, again, sizeof(again)) != r || strcmp(out, again) != 0)
		__builtin_trap();
	for (size_t i = 0; i < n; i++) {
		char c = out[i];
		bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' ||
			  c == '-' || c == '_';
		if (r == AB_HOST_IPV6)
			ok = (i == 0 && c == '[') || (i == n - 1 && c == ']') ||
			     (c >= 'a' && c <= 'f') || (c >= '0' && c <= '9') || c == ':' ||
			     c == '.';
		if (!ok)
			__builtin_trap();
	}
	if (r == AB_HOST_IPV4) {
		struct in_addr a;
		char back[INET_ADDRSTRLEN];
		if (inet_pton(AF_INET, out, &a) != 1 ||
		    !inet_ntop(AF_INET, &a, back, sizeof(back)) || strcmp(back, out) != 0)
			__builtin_trap();
	}
	if (r == AB_HOST_NAME) {
		const char *last = strrchr(out, '.');
		last = last ? last + 1 : out;
		if (strspn(last, "0123456789") == strlen(last))
			__builtin_trap();
		if (last[0] == '0' && last[1] == 'x' &&
		    strspn(last + 2, "0123456789abcdef") == strlen(last + 2))
			__builtin_trap();
	}
}

static void check_rule(const char *s)
{
	ab_netrule r, r2;
	ab_err err;

	if (ab_netrule_parse(s, &r, &err) < 0)
		return;
	if (ab_netrule_parse(r.text, &r2, &err) < 0 || memcmp(&r, &r2, sizeof(r)) != 0)
		__builtin_trap();
}

static void check_policy(const char *s, unsigned port)
{
	char norm[AB_HOST_BUF];
	const ab_netrule *rule = NULL;
	ab_netverdict v = ab_netpolicy_check(&policy, s, port, &rule);
	int kind = ab_host_normalize(s, norm, sizeof(norm));

	if (kind < 0 && v != AB_NET_INVALID)
		__builtin_trap();
	if ((v == AB_NET_ALLOW || v == AB_NET_DENY) != (rule != NULL))
		__builtin_trap();
	if (v == AB_NET_ALLOW) {
		static const char bad[] = ".bad.example.com";
		size_t n = strlen(norm), b = sizeof(bad) - 1;
		if (n > b && strcmp(norm + n - b, bad) == 0)
			__builtin_trap();
	}
	if (kind >= 0 && strcmp(norm, "127.0.0.1") != 0 && strcmp(norm, "[::1]") != 0 &&
	    kind != AB_HOST_NAME && v == AB_NET_ALLOW)
		__builtin_trap();
}

static void check_addr(const uint8_t *data, size_t size)
{
	uint8_t m[16] = {[10] = 0xff, [11] = 0xff};
	uint8_t n64[16] = {0, 0x64, 0xff, 0x9b};
	struct sockaddr_in6 sin6 = {.sin6_family = AF_INET6};
	bool p4;

	if (size < 4)
		return;
	p4 = ab_addr_is_private_raw(AF_INET, data);
	memcpy(m + 12, data, 4);
	memcpy(n64 + 12, data, 4);
	if (ab_addr_is_private_raw(AF_INET6, m) != p4 ||
	    ab_addr_is_private_raw(AF_INET6, n64) != p4)
		__builtin_trap();
	if ((data[0] == 127 || (data[0] == 169 && data[1] == 254) || data[0] == 10) && !p4)
		__builtin_trap();
	if (size >= 16) {
		memcpy(&sin6.sin6_addr, data, 16);
		bool p6 = ab_addr_is_private((struct sockaddr *)&sin6);
		if (data[0] == 0xfe && (data[1] & 0xc0) == 0x80 && !p6)
			__builtin_trap();
		if (!p6 && !ab_netpolicy_addr_allowed(&policy, "api.example.com", 443,
						      (struct sockaddr *)&sin6))
			__builtin_trap();
		if (p6 && ab_netpolicy_addr_allowed(&policy, "api.example.com", 443,
						    (struct sockaddr *)&sin6))
			__builtin_trap();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char s[512];
	size_t n = size < sizeof(s) - 1 ? size : sizeof(s) - 1;
	unsigned port;

	if (!policy_ready)
		setup_policy();
	memcpy(s, data, n);
	s[n] = '\0';
	check_host(s);
	check_rule(s);
	port = size >= 2 ? ((unsigned)data[0] << 8 | data[1]) : 443;
	check_policy(s, port);
	check_policy(s, 443);
	check_addr(data, size);
	return 0;
}
