/* SPDX-License-Identifier: MIT */
/*
 * Egress policy (parent: the proxy and DNS responder; pure, any process):
 * host normalisation, rule parsing, the allow/deny/private decision and the
 * classification of resolved addresses.  No I/O and no DNS here: the caller
 * resolves, then asks ab_netpolicy_addr_allowed() about the exact address it
 * is going to dial.  See include/agentbox/netpolicy.h for the rules.
 */
#include "agentbox/netpolicy.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

const char *ab_host_strerror(int r)
{
	switch (r) {
	case -EINVAL:
		return "not a valid host name (allowed: ASCII letters, digits, '-', '_', '.'; "
		       "IPv6 in brackets)";
	case -ENAMETOOLONG: return "host name or label too long";
	case -EDOM: return "not a canonical IP literal (use a dotted quad like 127.0.0.1)";
	case -ENOBUFS: return "output buffer too small";
	default: return "invalid host";
	}
}

static bool is_digit(char c)
{
	return c >= '0' && c <= '9';
}
static bool is_hex(char c)
{
	return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

/* "[v6]" -> canonical "[v6]". */
static int normalize_v6(const char *in, size_t len, char *out, size_t outlen)
{
	char inner[INET6_ADDRSTRLEN];
	char canon[INET6_ADDRSTRLEN];
	struct in6_addr a;

	if (len < 4 || in[len - 1] != ']' || len - 2 >= sizeof(inner))
		return -EINVAL;
	for (size_t i = 1; i < len - 1; i++)
		if (!is_hex(in[i]) && in[i] != ':' && in[i] != '.')
			return -EINVAL; /* zone ids, whitespace, percent-encoding */
	memcpy(inner, in + 1, len - 2);
	inner[len - 2] = '\0';
	if (inet_pton(AF_INET6, inner, &a) != 1)
		return -EINVAL;
	if (!inet_ntop(AF_INET6, &a, canon, sizeof(canon)))
		return -EINVAL;
	if (strlen(canon) + 3 > outlen)
		return -ENOBUFS;
	snprintf(out, outlen, "[%s]", canon);
	return AB_HOST_IPV6;
}

/* The one answer to "is this name an IP literal?" for policy rules, Host
 * and CONNECT targets and TLS server names alike: two answers would let a
 * name pass one check as a host name and reach the other as an address. */
bool ab_host_label_is_numeric(const char *s, size_t n)
{
	size_t i = 0;

	if (n >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
		for (i = 2; i < n; i++)
			if (!is_hex(s[i]))
				return false;
		return true;
	}
	for (i = 0; i < n; i++)
		if (!is_digit(s[i]))
			return false;
	return n > 0;
}

/* Exactly four decimal octets, no leading zeros, each <= 255. */
static bool is_canonical_v4(const char *s)
{
	int labels = 0;

	while (*s) {
		size_t n = 0;
		unsigned v = 0;

		while (is_digit(s[n]) && n < 4) {
			v = v * 10 + (unsigned)(s[n] - '0');
			n++;
		}
		if (n == 0 || n > 3 || v > 255 || (n > 1 && s[0] == '0'))
			return false;
		if (s[n] != '.' && s[n] != '\0')
			return false;
		labels++;
		s += n;
		if (*s == '.') {
			s++;
			if (!*s)
				return false;
		}
	}
	return labels == 4;
}

/* Lower-case and check characters into buf; returns length or -errno. */
static int copy_name(const char *in, size_t len, char *buf)
{
	for (size_t i = 0; i < len; i++) {
		char c = in[i];

		if (c >= 'A' && c <= 'Z')
			c = (char)(c - 'A' + 'a');
		if (!((c >= 'a' && c <= 'z') || is_digit(c) || c == '-' || c == '_' || c == '.'))
			return -EINVAL;
		buf[i] = c;
	}
	if (len > 0 && buf[len - 1] == '.')
		len--; /* one trailing dot */
	buf[len] = '\0';
	if (len == 0)
		return -EINVAL;
	if (len > AB_HOST_MAX)
		return -ENAMETOOLONG;
	return (int)len;
}

/* Check labels; sets *last to the start of the last label. */
static int check_labels(const char *buf, size_t len, const char **last)
{
	const char *p = buf;

	for (;;) {
		const char *dot = memchr(p, '.', len - (size_t)(p - buf));
		size_t n = dot ? (size_t)(dot - p) : len - (size_t)(p - buf);

		if (n == 0)
			return -EINVAL;
		if (n > 63)
			return -ENAMETOOLONG;
		if (p[0] == '-' || p[n - 1] == '-')
			return -EINVAL;
		if (!dot) {
			*last = p;
			return 0;
		}
		p = dot + 1;
	}
}

int ab_host_normalize(const char *in, char *out, size_t outlen)
{
	char buf[AB_HOST_INPUT_MAX + 1];
	const char *last = NULL;
	size_t len;
	int r, n;

	if (out && outlen)
		out[0] = '\0';
	if (!in || !out || outlen == 0)
		return -EINVAL;
	len = strnlen(in, AB_HOST_INPUT_MAX + 1);
	if (len > AB_HOST_INPUT_MAX)
		return -ENAMETOOLONG;
	if (len > 0 && in[0] == '[') {
		r = normalize_v6(in, len, out, outlen);
		if (r < 0)
			out[0] = '\0';
		return r;
	}
	n = copy_name(in, len, buf);
	if (n < 0)
		return n;
	r = check_labels(buf, (size_t)n, &last);
	if (r < 0)
		return r;
	if (ab_host_label_is_numeric(last, strlen(last)) && !is_canonical_v4(buf))
		return -EDOM;
	if ((size_t)n + 1 > outlen)
		return -ENOBUFS;
	memcpy(out, buf, (size_t)n + 1);
	return ab_host_label_is_numeric(last, strlen(last)) ? AB_HOST_IPV4 : AB_HOST_NAME;
}

/* ---- rules ---- */

static int parse_port(const char *s, uint16_t *port)
{
	unsigned v = 0;
	size_t n;

	for (n = 0; s[n]; n++) {
		if (!is_digit(s[n]) || n >= 5)
			return -EINVAL;
		v = v * 10 + (unsigned)(s[n] - '0');
	}
	if (n == 0 || s[0] == '0' || v > 65535)
		return -EINVAL;
	*port = (uint16_t)v;
	return 0;
}

/* Split "host[:port]" / "[v6][:port]" into host text and port. */
static int split_host_port(const char *s, char *host, size_t hostlen, uint16_t *port)
{
	const char *colon;
	size_t hl;

	*port = 0;
	if (s[0] == '[') {
		const char *close = strchr(s, ']');
		if (!close)
			return -EINVAL;
		colon = close[1] ? close + 1 : NULL;
		if (colon && *colon != ':')
			return -EINVAL;
	} else {
		colon = strchr(s, ':');
		if (colon && strchr(colon + 1, ':'))
			return -EINVAL; /* bare IPv6: needs brackets */
	}
	hl = colon ? (size_t)(colon - s) : strlen(s);
	if (hl >= hostlen)
		return -ENAMETOOLONG;
	memcpy(host, s, hl);
	host[hl] = '\0';
	if (colon && parse_port(colon + 1, port) < 0)
		return -EINVAL;
	return 0;
}

static void rule_set_addr(ab_netrule *r)
{
	if (r->kind == AB_HOST_IPV4) {
		r->family = AF_INET;
		(void)inet_pton(AF_INET, r->host, r->addr);
	} else if (r->kind == AB_HOST_IPV6) {
		char inner[AB_HOST_BUF];
		size_t n = strlen(r->host);

		memcpy(inner, r->host + 1, n - 2);
		inner[n - 2] = '\0';
		r->family = AF_INET6;
		(void)inet_pton(AF_INET6, inner, r->addr);
	}
}

/* A rule as it may appear in a message: at most 300 bytes, control bytes
 * (C0, DEL, and C1 as UTF-8) shown as '?', so a hostile profile cannot put
 * terminal escapes into an error. */
static const char *shown(const char *s, char *buf, size_t n)
{
	size_t w = 0;
	for (size_t i = 0; s[i] && w + 1 < n && i < 300; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c == 0xc2 && (unsigned char)s[i + 1] >= 0x80 &&
		    (unsigned char)s[i + 1] <= 0x9f) {
			buf[w++] = '?';
			i++;
			continue;
		}
		buf[w++] = c < 0x20 || c == 0x7f ? '?' : (char)c;
	}
	buf[w] = '\0';
	return buf;
}

int ab_netrule_parse(const char *s, ab_netrule *out, ab_err *err)
{
	char sh[304];
	char host[AB_HOST_INPUT_MAX + 1];
	const char *h = host;
	uint16_t port;
	int r;

	memset(out, 0, sizeof(*out));
	if (!s || strnlen(s, AB_HOST_INPUT_MAX + 1) > AB_HOST_INPUT_MAX)
		return ab_fail(err, ENAMETOOLONG, "network rule too long");
	r = split_host_port(s, host, sizeof(host), &port);
	if (r < 0) {
		ab_fail_code(err, AB_EXIT_FAIL, -r, "network rule '%s': bad HOST:PORT",
			     shown(s, sh, sizeof(sh)));
		ab_err_hint(err, "write HOST, HOST:PORT, *.SUFFIX[:PORT] or [IPv6]:PORT "
				 "(port 1-65535)");
		return r;
	}
	if (strncmp(host, "*.", 2) == 0) {
		out->wildcard = true;
		h = host + 2;
	}
	r = ab_host_normalize(h, out->host, sizeof(out->host));
	if (r >= 0 && out->wildcard && r != AB_HOST_NAME)
		r = -EINVAL;
	if (r < 0) {
		memset(out, 0, sizeof(*out));
		ab_fail_code(err, AB_EXIT_FAIL, -r, "network rule '%s': %s%s",
			     shown(s, sh, sizeof(sh)), ab_host_strerror(r),
			     r == -EINVAL ? " (wildcards only as a leading '*.' on a name)" : "");
		return r;
	}
	out->kind = (ab_host_kind)r;
	out->port = port;
	rule_set_addr(out);
	if (port)
		snprintf(out->text, sizeof(out->text), "%s%s:%u", out->wildcard ? "*." : "",
			 out->host, (unsigned)port);
	else
		snprintf(out->text, sizeof(out->text), "%s%s", out->wildcard ? "*." : "",
			 out->host);
	return 0;
}

/* The slots allocated for N rules: 0, then powers of two from 8. */
static size_t rules_room(size_t n)
{
	size_t room = 8;

	if (n == 0)
		return 0;
	while (room < n)
		room *= 2;
	return room;
}

int ab_netpolicy_add(ab_netpolicy *p, ab_netlist list, const char *rule, ab_err *err)
{
	ab_netrule **arr;
	size_t *n;
	ab_netrule r, *grown;
	int ret;

	switch (list) {
	case AB_NETLIST_DENY:
		arr = &p->deny;
		n = &p->n_deny;
		break;
	case AB_NETLIST_ALLOW:
		arr = &p->allow;
		n = &p->n_allow;
		break;
	case AB_NETLIST_PRIVATE:
		arr = &p->priv;
		n = &p->n_priv;
		break;
	default: return ab_fail(err, EINVAL, "unknown network list %d", (int)list);
	}
	ret = ab_netrule_parse(rule, &r, err);
	if (ret < 0)
		return ret;
	if (list == AB_NETLIST_PRIVATE && r.wildcard)
		return ab_fail(err, EINVAL,
			       "network.private '%s': wildcards are not allowed "
			       "(name each private destination)",
			       r.text);
	if (*n >= AB_NETPOLICY_MAX_RULES)
		return ab_fail(err, E2BIG, "too many network rules (max %d per list)",
			       AB_NETPOLICY_MAX_RULES);
	if (*n == rules_room(*n)) { /* full: double (one at a time is quadratic) */
		grown = realloc(*arr, rules_room(*n + 1) * sizeof(**arr));
		if (!grown)
			return ab_fail(err, ENOMEM, "network rules");
		*arr = grown;
	}
	(*arr)[*n] = r;
	(*n)++;
	return 0;
}

void ab_netpolicy_free(ab_netpolicy *p)
{
	if (!p)
		return;
	free(p->deny);
	free(p->allow);
	free(p->priv);
	memset(p, 0, sizeof(*p));
}

/* ---- decision ---- */

static bool port_matches(const ab_netrule *r, unsigned port, bool any_default)
{
	if (r->port)
		return r->port == port;
	return any_default || port == 443 || port == 80;
}

static bool host_matches(const ab_netrule *r, const char *host, int kind)
{
	size_t hl, sl;

	if ((int)r->kind != kind)
		return false;
	if (!r->wildcard)
		return strcmp(r->host, host) == 0;
	hl = strlen(host);
	sl = strlen(r->host);
	return hl > sl + 1 && host[hl - sl - 1] == '.' && strcmp(host + hl - sl, r->host) == 0;
}

static const ab_netrule *find_rule(const ab_netrule *rules, size_t n, const char *host, int kind,
				   unsigned port, bool any_default)
{
	for (size_t i = 0; i < n; i++)
		if (host_matches(&rules[i], host, kind) &&
		    port_matches(&rules[i], port, any_default))
			return &rules[i];
	return NULL;
}

ab_netverdict ab_netpolicy_check(const ab_netpolicy *p, const char *host, unsigned port,
				 const ab_netrule **rule)
{
	char norm[AB_HOST_BUF];
	const ab_netrule *m;
	int kind;

	if (rule)
		*rule = NULL;
	if (!p || port == 0 || port > 65535)
		return AB_NET_INVALID;
	kind = ab_host_normalize(host, norm, sizeof(norm));
	if (kind < 0)
		return AB_NET_INVALID;
	m = find_rule(p->deny, p->n_deny, norm, kind, port, true);
	if (m) {
		if (rule)
			*rule = m;
		return AB_NET_DENY;
	}
	m = find_rule(p->allow, p->n_allow, norm, kind, port, false);
	if (!m)
		m = find_rule(p->priv, p->n_priv, norm, kind, port, false);
	if (rule)
		*rule = m;
	return m ? AB_NET_ALLOW : AB_NET_NOT_LISTED;
}

/* ---- address classification ---- */

typedef struct v4net {
	uint32_t net;
	uint8_t bits;
} v4net;

// clang-format off
static const v4net private_v4[] = {
	{ 0x00000000u, 8 },  /* 0/8 "this network" */
	{ 0x0a000000u, 8 },  /* 10/8 */
	{ 0x64400000u, 10 }, /* 100.64/10 CGNAT (Alibaba metadata 100.100.100.200) */
	{ 0x7f000000u, 8 },  /* 127/8 loopback */
	{ 0xa83f8110u, 32 }, /* 168.63.129.16 Azure wireserver/metadata */
	{ 0xa9fe0000u, 16 }, /* 169.254/16 link-local (169.254.169.254, 169.254.170.2) */
	{ 0xac100000u, 12 }, /* 172.16/12 */
	{ 0xc0000000u, 24 }, /* 192.0.0/24 IETF (Oracle metadata 192.0.0.192) */
	{ 0xc0000200u, 24 }, /* 192.0.2/24 TEST-NET-1 */
	{ 0xc0586300u, 24 }, /* 192.88.99/24 6to4 relay anycast */
	{ 0xc0a80000u, 16 }, /* 192.168/16 */
	{ 0xc6120000u, 15 }, /* 198.18/15 benchmarking (transparent-mode range) */
	{ 0xc6336400u, 24 }, /* 198.51.100/24 TEST-NET-2 */
	{ 0xcb007100u, 24 }, /* 203.0.113/24 TEST-NET-3 */
	{ 0xe0000000u, 4 },  /* 224/4 multicast */
	{ 0xf0000000u, 4 },  /* 240/4 reserved, 255.255.255.255 */
};
// clang-format on

static bool v4_is_private(const uint8_t *b)
{
	uint32_t a = (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];

	for (size_t i = 0; i < AB_ARRAY_SIZE(private_v4); i++) {
		uint32_t mask = 0xffffffffu << (32 - private_v4[i].bits);
		if ((a & mask) == private_v4[i].net)
			return true;
	}
	return false;
}

static bool prefix_eq(const uint8_t *b, const uint8_t *p, size_t nbytes)
{
	return memcmp(b, p, nbytes) == 0;
}

/* If B (16 bytes) embeds an IPv4 address in a translation form, return it. */
static const uint8_t *v6_embedded_v4(const uint8_t *b)
{
	static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
	static const uint8_t siit[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0};
	static const uint8_t nat64[12] = {0, 0x64, 0xff, 0x9b, 0, 0, 0, 0, 0, 0, 0, 0};

	if (prefix_eq(b, mapped, 12) || prefix_eq(b, siit, 12) || prefix_eq(b, nat64, 12))
		return b + 12;
	if (b[0] == 0x20 && b[1] == 0x02) /* 2002::/16 6to4 */
		return b + 2;
	return NULL;
}

bool ab_addr_is_private_raw(int family, const uint8_t *b)
{
	static const uint8_t zero12[12] = {0};
	const uint8_t *v4;

	if (!b)
		return true;
	if (family == AF_INET)
		return v4_is_private(b);
	if (family != AF_INET6)
		return true;
	if (prefix_eq(b, zero12, 12))
		return true; /* ::, ::1, IPv4-compatible ::/96 (deprecated) */
	v4 = v6_embedded_v4(b);
	if (v4)
		return v4_is_private(v4);
	if (b[0] == 0xff) /* ff00::/8 multicast */
		return true;
	if ((b[0] & 0xfe) == 0xfc) /* fc00::/7 unique-local (fd00:ec2::254) */
		return true;
	if (b[0] == 0xfe && (b[1] & 0x80) == 0x80) /* fe80::/10 link-local, fec0::/10 site-local */
		return true;
	if (b[0] == 0x20 && b[1] == 0x01 && b[2] == 0x0d && b[3] == 0xb8)
		return true; /* 2001:db8::/32 documentation */
	if (b[0] == 0x3f && b[1] == 0xff && (b[2] & 0xf0) == 0)
		return true; /* 3fff::/20 documentation */
	if (b[0] == 0x20 && b[1] == 0x01 && b[2] == 0 && b[3] == 0)
		return true; /* 2001::/32 Teredo (tunnels to any IPv4) */
	if (b[0] == 0 && b[1] == 0x64 && b[2] == 0xff && b[3] == 0x9b)
		return true; /* 64:ff9b::/32 incl. 64:ff9b:1::/48 local NAT64 */
	if (b[0] == 0x01 && b[1] == 0 && b[2] == 0 && b[3] == 0 && !b[4] && !b[5] && !b[6] && !b[7])
		return true; /* 100::/64 discard-only */
	return false;
}

/* Family and address bytes of SA; NULL for unsupported families. */
static const uint8_t *sa_bytes(const struct sockaddr *sa, int *family)
{
	if (!sa)
		return NULL;
	*family = sa->sa_family;
	if (sa->sa_family == AF_INET)
		return (const uint8_t *)&((const struct sockaddr_in *)(const void *)sa)->sin_addr;
	if (sa->sa_family == AF_INET6)
		return (const uint8_t *)&((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr;
	return NULL;
}

bool ab_addr_is_private(const struct sockaddr *sa)
{
	int family = 0;
	const uint8_t *b = sa_bytes(sa, &family);

	return b ? ab_addr_is_private_raw(family, b) : true;
}

/* Does IP rule R name the address (family, b)?  ::ffff:a.b.c.d == a.b.c.d. */
static bool rule_names_addr(const ab_netrule *r, int family, const uint8_t *b)
{
	static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

	if (r->family == 0)
		return false;
	if (r->family == family)
		return memcmp(r->addr, b, family == AF_INET ? 4 : 16) == 0;
	if (r->family == AF_INET && family == AF_INET6)
		return prefix_eq(b, mapped, 12) && memcmp(r->addr, b + 12, 4) == 0;
	if (r->family == AF_INET6 && family == AF_INET)
		return prefix_eq(r->addr, mapped, 12) && memcmp(r->addr + 12, b, 4) == 0;
	return false;
}

bool ab_netpolicy_addr_allowed(const ab_netpolicy *p, const char *host, unsigned port,
			       const struct sockaddr *sa)
{
	char norm[AB_HOST_BUF];
	int family = 0, kind;
	const uint8_t *b = sa_bytes(sa, &family);

	if (!p || !b || port == 0 || port > 65535)
		return false;
	for (size_t i = 0; i < p->n_deny; i++)
		if (rule_names_addr(&p->deny[i], family, b) &&
		    port_matches(&p->deny[i], port, true))
			return false;
	if (!ab_addr_is_private_raw(family, b))
		return true;
	kind = host ? ab_host_normalize(host, norm, sizeof(norm)) : -EINVAL;
	for (size_t i = 0; i < p->n_priv; i++) {
		const ab_netrule *r = &p->priv[i];

		if (!port_matches(r, port, false))
			continue;
		if (rule_names_addr(r, family, b))
			return true;
		if (kind == AB_HOST_NAME && r->kind == AB_HOST_NAME && strcmp(r->host, norm) == 0)
			return true;
	}
	return false;
}
