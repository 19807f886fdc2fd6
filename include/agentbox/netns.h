/* SPDX-License-Identifier: MIT */
/*
 * Egress listeners inside the sandbox's network namespace (src/sandbox/netns.c, run
 * by the child before it drops capabilities) and how they cross to the
 * parent: one AB_SYNC_LISTENER message per socket, SCM_RIGHTS.
 */
#ifndef AGENTBOX_NETNS_H
#define AGENTBOX_NETNS_H

#include <stdbool.h>
#include <stdint.h>

#include "agentbox/plan.h"
#include "agentbox/sync.h"

/* Child: transparent route, listeners, hand-over.  Needs CAP_NET_ADMIN and
 * CAP_NET_BIND_SERVICE in the namespace (before caps are dropped). */
int ab_netns_setup(const ab_plan *plan, int sync_fd, ab_err *err);

/* ip route add (replace: or replace) local DST/PREFIX dev lo table local, in
 * the caller's network namespace (needs CAP_NET_ADMIN there); prefix 0 makes
 * every address of the family local (test-escape's lab).  DST: a numeric
 * IPv4 or IPv6 address of `family`. */
int ab_netns_route_local(int family, const char *dst, unsigned prefix, bool replace, ab_err *err);

#endif
