/* SPDX-License-Identifier: MIT */
/*
 * Egress policy: host normalisation, allow/deny/private rules and the
 * classification of resolved addresses.  Pure code: no I/O, no DNS, no
 * allocation except the rule arrays of a policy.
 *
 * Host names (ab_host_normalize):
 *   - ASCII only: letters are lower-cased; allowed characters are
 *     [a-z0-9-_] and '.' as the label separator.  '_' is accepted because
 *     real hosts use it (e.g. some bucket/CDN names) and it is a delimiter in
 *     no URL, DNS or TLS syntax; everything else is refused: '@' (userinfo),
 *     '%' (percent-encoding), ':' , '/', '*', whitespace, control bytes and
 *     any non-ASCII byte (IDN must already be punycode: "xn--" labels pass).
 *   - exactly one trailing dot is stripped ("a.b." == "a.b"; "a.b.." fails);
 *     no empty label, no label > 63, no name > 253, no label starting or
 *     ending with '-'.
 *   - if the last label looks numeric (all digits, or 0x/0X + hex digits),
 *     the name is an IPv4 attempt: only the canonical dotted quad (four
 *     decimal octets 0..255, no leading zeros) is accepted, as AB_HOST_IPV4;
 *     every other form (0x7f.1, 2130706433, 0177.0.0.1, 127.1, 1.2.3.0x4)
 *     fails with -EDOM and is never treated as a name either.
 *   - "[v6]" is an IPv6 literal (inet_pton syntax, no zone id); the output
 *     is the canonical inet_ntop form with brackets, e.g. "[::ffff:127.0.0.1]".
 *     A bare IPv6 address without brackets is refused.
 *
 * Rules (ab_netrule_parse): "HOST", "HOST:PORT", "*.SUFFIX[:PORT]",
 * "IPV4[:PORT]", "[IPV6][:PORT]".  PORT is 1..65535 in decimal without
 * leading zeros; "host:" (empty port) is refused.  No port means the default
 * ports {443, 80} in the allow and private lists, and every port in the
 * deny list.  "*.example.com" matches "a.example.com" and "a.b.example.com",
 * never "example.com" or "evilexample.com".  No wildcards for IP literals; an
 * IP literal host matches only a rule naming that exact address.
 *
 * Policy decision (ab_netpolicy_check): deny list first (deny wins), then
 * the allow list, then the private list (naming a destination under
 * "private" also allows it).  Private rules take no wildcard.
 *
 * Post-resolution (ab_netpolicy_addr_allowed): the address about to be
 * dialled is refused if a deny rule names that IP, and, when it is private
 * (ab_addr_is_private), unless a private rule names it (by IP, or by the
 * exact host name that was resolved) with a matching port.
 */
#ifndef AGENTBOX_NETPOLICY_H
#define AGENTBOX_NETPOLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "agentbox/common.h"

#define AB_HOST_MAX 253             /* longest name, without trailing dot */
#define AB_HOST_BUF 256             /* buffer for any normalised host (names, [v6]) */
#define AB_HOST_INPUT_MAX 300       /* longer inputs are refused without parsing */
#define AB_NETRULE_TEXT 272         /* canonical rule text: host + ":65535" + NUL */
#define AB_NETPOLICY_MAX_RULES 4096 /* per list */

typedef enum ab_host_kind {
	AB_HOST_NAME = 0,
	AB_HOST_IPV4 = 1,
	AB_HOST_IPV6 = 2,
} ab_host_kind;

/* Normalise IN into OUT (see above).  Returns the ab_host_kind (>= 0) or
 * -EINVAL (bad syntax), -ENAMETOOLONG (name/label/input too long), -EDOM
 * (numeric but not a canonical IPv4 literal), -ENOBUFS (OUTLEN too small;
 * AB_HOST_BUF always suffices).  OUT is "" on failure. */
int ab_host_normalize(const char *in, char *out, size_t outlen);

/* Short static description of a negative ab_host_normalize result. */
const char *ab_host_strerror(int r);

/* Does the label [S, S+N) look like a number (WHATWG "ends in a number"):
 * one or more decimal digits, or "0x"/"0X" and any hex digits (none, as in
 * "0x", counts: a URL parser reads it as 0)?  Either case, so it answers
 * the same before and after lower-casing.  A name whose last label is
 * numeric is an IPv4 attempt, never a host name. */
bool ab_host_label_is_numeric(const char *s, size_t n);

typedef struct ab_netrule {
	char host[AB_HOST_BUF];     /* normalised; for wildcards the suffix only */
	char text[AB_NETRULE_TEXT]; /* canonical rule text for logs and messages */
	ab_host_kind kind;
	bool wildcard;    /* "*.host" */
	uint16_t port;    /* 0 = no port given */
	int family;       /* AF_INET/AF_INET6 for IP rules, else 0 */
	uint8_t addr[16]; /* IP rules: 4 or 16 bytes, network order */
} ab_netrule;

/* Parse one rule.  Returns 0 or -EINVAL/-ENAMETOOLONG/-EDOM with *err set. */
int ab_netrule_parse(const char *s, ab_netrule *out, ab_err *err);

typedef enum ab_netlist {
	AB_NETLIST_DENY = 0,
	AB_NETLIST_ALLOW = 1,
	AB_NETLIST_PRIVATE = 2,
} ab_netlist;

typedef struct ab_netpolicy {
	ab_netrule *deny;
	size_t n_deny;
	ab_netrule *allow;
	size_t n_allow;
	ab_netrule *priv;
	size_t n_priv;
} ab_netpolicy;

/* Zero-initialise a policy with {0}.  Adds one rule to a list: 0, or
 * -EINVAL etc. (rule syntax, wildcard in the private list), -E2BIG (more
 * than AB_NETPOLICY_MAX_RULES), -ENOMEM; *err set.  Duplicates are kept. */
int ab_netpolicy_add(ab_netpolicy *p, ab_netlist list, const char *rule, ab_err *err);
void ab_netpolicy_free(ab_netpolicy *p);

typedef enum ab_netverdict {
	AB_NET_NOT_LISTED = 0, /* no rule: refuse, "add it under network.allow" */
	AB_NET_ALLOW = 1,
	AB_NET_DENY = 2,    /* a deny rule matched */
	AB_NET_INVALID = 3, /* host or port unusable (see ab_host_normalize) */
} ab_netverdict;

/* Decide for HOST (raw, normalised here) and PORT (1..65535).  *RULE (if
 * non-NULL) gets the deciding rule or NULL. */
ab_netverdict ab_netpolicy_check(const ab_netpolicy *p, const char *host, unsigned port,
				 const ab_netrule **rule);

/* true if the address must not be dialled unless named explicitly:
 * loopback, unspecified, RFC 1918, link-local (cloud metadata), CGNAT,
 * multicast, reserved/broadcast, benchmarking (also the transparent-mode
 * synthetic range), documentation, IETF special ranges, Azure's
 * 168.63.129.16, unique-local, site-local, IPv4-compatible (::/96), and
 * IPv4-mapped, SIIT, NAT64 and 6to4 forms of any such IPv4, Teredo.  Unknown
 * families and NULL are private (fail closed).  BYTES is 4 (AF_INET) or 16
 * (AF_INET6) bytes in network order. */
bool ab_addr_is_private_raw(int family, const uint8_t *bytes);
bool ab_addr_is_private(const struct sockaddr *sa);

/* Post-resolution check of the address about to be dialled for HOST:PORT
 * (HOST as given to ab_netpolicy_check).  See the top of this file. */
bool ab_netpolicy_addr_allowed(const ab_netpolicy *p, const char *host, unsigned port,
			       const struct sockaddr *sa);

#endif
