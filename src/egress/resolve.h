/* SPDX-License-Identifier: MIT */
/*
 * Asynchronous name resolution for the egress proxy (parent): getaddrinfo()
 * runs on a few worker threads; results come back through an eventfd the
 * event loop watches, so a slow resolver never stalls other connections.
 * Callbacks run on the loop's thread only.
 */
#ifndef AGENTBOX_RESOLVE_H
#define AGENTBOX_RESOLVE_H

#include <netdb.h>

#include "agentbox/loop.h"

#define AB_RESOLVE_THREADS 4
#define AB_RESOLVE_MAX_QUEUE 1024 /* pending lookups; more fail with EAI_AGAIN */

typedef struct ab_resolver ab_resolver;
typedef struct ab_resolve_job ab_resolve_job;

/* gai: 0 or an EAI_* code; res is owned by the resolver (valid during the
 * call only). */
typedef void (*ab_resolve_cb)(void *data, int gai, const struct addrinfo *res);

int ab_resolver_new(ab_loop *loop, ab_resolver **out, ab_err *err);
/* Start a lookup of host (a name; TCP addresses, both families).  Returns the
 * job, or NULL when the queue is full or memory ran out (then nothing is
 * called back). */
ab_resolve_job *ab_resolve(ab_resolver *r, const char *host, ab_resolve_cb cb, void *data);
/* The callback will not be called; the lookup itself finishes in the
 * background. */
void ab_resolve_cancel(ab_resolve_job *j);
/* Stop watching; threads still inside getaddrinfo() finish on their own
 * (their shared state is released by the last one out). */
void ab_resolver_free(ab_resolver *r);

#endif
