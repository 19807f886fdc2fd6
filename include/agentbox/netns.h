/* SPDX-License-Identifier: MIT */
/*
 * Egress listeners inside the sandbox's network namespace (src/netns.c, run
 * by the child before it drops capabilities) and how they cross to the
 * parent: one AB_SYNC_LISTENER message per socket, SCM_RIGHTS.
 */
#ifndef AGENTBOX_NETNS_H
#define AGENTBOX_NETNS_H

#include <stdbool.h>
#include <stdint.h>

#include "agentbox/plan.h"

enum ab_listen_kind {
	AB_LISTEN_PROXY = 1,       /* 127.0.0.1:proxy_port, explicit proxy */
	AB_LISTEN_DNS_UDP = 2,     /* 127.0.0.1:53/udp */
	AB_LISTEN_DNS_TCP = 3,     /* 127.0.0.1:53/tcp */
	AB_LISTEN_TRANSPARENT = 4, /* 0.0.0.0:P, connections to synthetic addresses */
};

#define AB_LISTENER_VALUE(kind, port) ((int)(((unsigned)(kind) << 16) | (unsigned)(port)))
#define AB_LISTENER_KIND(v) ((int)(((unsigned)(v) >> 16) & 0xff))
#define AB_LISTENER_PORT(v) ((uint16_t)((unsigned)(v) & 0xffff))

/* Child: transparent route, listeners, hand-over.  Needs CAP_NET_ADMIN and
 * CAP_NET_BIND_SERVICE in the namespace (before caps are dropped). */
int ab_netns_setup(const ab_plan *plan, int sync_fd, ab_err *err);

/* ip route add (replace: or replace) local DST/PREFIX dev lo table local, in
 * the caller's network namespace (needs CAP_NET_ADMIN there); prefix 0 makes
 * every address of the family local (test-escape's lab).  DST: a numeric
 * IPv4 or IPv6 address of `family`. */
int ab_netns_route_local(int family, const char *dst, unsigned prefix, bool replace,
			 ab_err *err);

#endif
