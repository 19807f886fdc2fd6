/* SPDX-License-Identifier: MIT */
/*
 * The egress proxy (parent, in-process, on the run's event loop).  It serves
 * the listeners the child created inside the sandbox's network namespace
 * (src/sandbox/netns.c): the explicit HTTP proxy (CONNECT and absolute-form
 * requests), the DNS responder and the transparent listeners.  Upstream
 * connections leave from the host namespace.  docs/egress.md describes the
 * behaviour; this header the wiring.
 */
#ifndef AGENTBOX_PROXY_H
#define AGENTBOX_PROXY_H

#include <stdint.h>
#include <stdio.h>

#include "agentbox/ask.h"
#include "agentbox/loop.h"
#include "agentbox/plan.h"

/* Limits and timeouts (per sandbox). */
#define AB_PROXY_MAX_CONNS 4096         /* client connections at once; more are closed */
#define AB_PROXY_HEAD_TIMEOUT_MS 30000  /* a request head must arrive within this */
#define AB_PROXY_KEEPALIVE_MS 120000    /* idle client connection between requests */
#define AB_PROXY_DIAL_TIMEOUT_MS 15000  /* name lookup + TCP connect upstream */
#define AB_PROXY_HELLO_TIMEOUT_MS 30000 /* first bytes (ClientHello) of a tunnel */
#define AB_PROXY_IDLE_MS 3600000        /* no byte either way on a tunnel or response */
#define AB_PROXY_MAX_SYNTH 65536        /* names given synthetic addresses */

typedef struct ab_proxy ab_proxy;

/* Build the policy from the plan (before the sandbox starts).  AUDIT (may be
 * NULL) is the run's audit log, borrowed: it outlives the proxy. */
struct ab_audit;
int ab_proxy_new(const ab_egress_plan *plan, struct ab_audit *audit, ab_proxy **out, ab_err *err);
/* Attach to the loop (after it exists). */
int ab_proxy_attach(ab_proxy *px, ab_loop *loop, ab_err *err);
/* A listener created inside the sandbox (kind: enum ab_listen_kind).  The
 * proxy owns fd from here on (closed on error too). */
int ab_proxy_add_listener(ab_proxy *px, int kind, uint16_t port, int fd);
/* Credential brokering: intercept the hosts of these secrets (owned by the
 * caller, alive until ab_proxy_free). */
struct ab_broker;
void ab_proxy_set_broker(ab_proxy *px, struct ab_broker *b);
/* run --learn (docs/learn.md): a destination no rule lists is allowed (rule
 * "learn" in the audit log) and recorded in SET as "host:port"; deny rules
 * and the private-address check still apply.  The set is the event loop's.
 * SUP names the program that connected (ab_supervisor_learn_port). */
struct ab_learn_set;
struct ab_supervisor;
void ab_proxy_learn(ab_proxy *px, struct ab_learn_set *set, struct ab_supervisor *sup);
/* Serve `agentbox allow` on the listener FD (ab_control_open); the proxy
 * owns it from here on (closed on error too). */
int ab_proxy_control(ab_proxy *px, int fd, ab_err *err);
/* Ask on denial (docs/ask.md): with a hook set, a request to a host that no
 * rule lists (no deny rule, no invalid name) is held, not refused: the
 * connection stays open, nothing is read from it, and FN is called once per
 * host:port (later requests for it wait for the same answer; at most
 * AB_PROXY_MAX_QUESTIONS at once, beyond that refused as before).  Nothing
 * is asked for a host a deny rule names. */
#define AB_PROXY_MAX_QUESTIONS 64
typedef struct ab_ask_question {
	const char *host;
	unsigned port;
	const char *request;  /* "CONNECT host:port", "GET http://host:port/path" (no
				  query), "TLS host:port (transparent)"; printable */
	uint16_t client_port; /* the client's source port inside the sandbox (0: unknown) */
	uint16_t server_port; /* the proxy listener's port it connected to */
} ab_ask_question;
typedef void (*ab_proxy_ask_fn)(void *ctx, const ab_ask_question *q);
void ab_proxy_set_ask(ab_proxy *px, ab_proxy_ask_fn fn, void *ctx);
/* The answer for HOST:PORT: every request held for it proceeds (ONCE; RUN
 * and ALWAYS also add "HOST:PORT" to the allow list for the rest of the run,
 * with a "policy" audit event) or gets the 403 it would have got without
 * asking (DENY, TIMEOUT, CLOSED).  0, or -ENOENT: no such question. */
int ab_proxy_answer(ab_proxy *px, const char *host, unsigned port, enum ab_ask_answer a);

/* Close every connection (the sandbox is gone). */
void ab_proxy_shutdown(ab_proxy *px);
void ab_proxy_free(ab_proxy *px);

#endif
