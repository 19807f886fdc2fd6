/* SPDX-License-Identifier: MIT */
/*
 * Ask on denial, the proxy's side (parent, on the event loop): a request to
 * a host no rule lists is held instead of refused, one question per
 * host:port goes to the hook (src/sandbox/asker.c draws it on the user's
 * terminal), and the answer releases every request held for it: dialled,
 * or refused with the 403 it would have had.  The loop keeps serving every
 * other connection meanwhile; a held connection is not read or written.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "proxy_int.h"

typedef struct px_question {
	struct px_question *next;
	char host[AB_HOST_BUF];
	uint16_t port;
} px_question;

void ab_proxy_set_ask(ab_proxy *px, ab_proxy_ask_fn fn, void *ctx)
{
	px->ask_fn = fn;
	px->ask_ctx = ctx;
}

static px_question **find(ab_proxy *px, const char *host, unsigned port)
{
	px_question **q = &px->questions;
	while (*q && (strcmp((*q)->host, host) != 0 || (*q)->port != port))
		q = &(*q)->next;
	return q;
}

static uint16_t sock_port(int fd, bool peer)
{
	struct sockaddr_storage ss;
	socklen_t l = sizeof(ss);
	int r = peer ? getpeername(fd, (struct sockaddr *)&ss, &l)
		     : getsockname(fd, (struct sockaddr *)&ss, &l);
	if (r < 0)
		return 0;
	if (ss.ss_family == AF_INET)
		return ntohs(((struct sockaddr_in *)&ss)->sin_port);
	if (ss.ss_family == AF_INET6)
		return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
	return 0;
}

/* The request line the question shows (host and path are printable already). */
static void request_line(const px_conn *c, char *out, size_t n)
{
	if (c->side == PX_TRANSPARENT)
		snprintf(out, n, "%s:%u (transparent: the first bytes are not read yet)", c->host,
			 (unsigned)c->port);
	else if (c->is_connect)
		snprintf(out, n, "CONNECT %s:%u", c->host, (unsigned)c->port);
	else
		snprintf(out, n, "%s http://%s:%u%s", c->method, c->host, (unsigned)c->port,
			 c->path);
}

bool px_hold(px_conn *c)
{
	ab_proxy *px = c->px;
	if (!px->ask_fn)
		return false;
	px_question **q = find(px, c->host, c->port);
	if (!*q) {
		if (px->nquestions >= AB_PROXY_MAX_QUESTIONS)
			return false;
		px_question *nq = calloc(1, sizeof(*nq));
		if (!nq)
			return false;
		snprintf(nq->host, sizeof(nq->host), "%s", c->host);
		nq->port = c->port;
		*q = nq;
		px->nquestions++;
		char req[AB_HOST_BUF + PX_PATH_LOG + 64];
		request_line(c, req, sizeof(req));
		ab_ask_question aq = {.host = c->host,
				      .port = c->port,
				      .request = req,
				      .client_port = sock_port(c->cfd, true),
				      .server_port = sock_port(c->cfd, false)};
		c->state = PX_HELD;
		c->deadline = 0; /* the question has its own timeout */
		px_update(c);
		px->ask_fn(px->ask_ctx, &aq); /* may answer at once: C may be gone */
		return true;
	}
	c->state = PX_HELD;
	c->deadline = 0;
	px_update(c);
	return true;
}

/* One held connection gets its answer. */
static void release(px_conn *c, enum ab_ask_answer a, const char *rule)
{
	c->state = PX_HEAD; /* where px_decide left it: the answers below as from there */
	if (a == AB_ASK_ONCE || a == AB_ASK_RUN || a == AB_ASK_ALWAYS) {
		snprintf(c->rule, sizeof(c->rule), "%s", rule);
		px_dial(c);
		return;
	}
	px_fail(c, 403, "deny", "not-listed",
		"%s:%u is not in the allowlist of profile '%s' (add it under network.allow); "
		"%s",
		c->host, (unsigned)c->port, c->px->profile,
		a == AB_ASK_TIMEOUT ? "nobody answered agentbox's question in time"
		: a == AB_ASK_DENY  ? "denied at agentbox's question"
				    : "agentbox's question was not answered");
}

int ab_proxy_answer(ab_proxy *px, const char *host, unsigned port, enum ab_ask_answer a)
{
	px_question **q = find(px, host, port);
	if (!*q)
		return -ENOENT;
	px_question *gone = *q;
	*q = gone->next;
	px->nquestions--;
	char rule[AB_NETRULE_TEXT] = "ask:once";
	if (a == AB_ASK_RUN || a == AB_ASK_ALWAYS) {
		char want[AB_HOST_BUF + 8];
		ab_err e = {0};
		snprintf(want, sizeof(want), "%s:%u", gone->host, (unsigned)gone->port);
		if (px_allow_rule(px, want, a == AB_ASK_RUN ? "ask:run" : "ask:always", 0, rule,
				  &e) < 0)
			a = AB_ASK_ONCE; /* the held requests still go (the user said so) */
	}
	/* px_dial and px_fail may close connections: walk from the head again
	 * after each release */
	for (bool more = true; more;) {
		more = false;
		for (px_conn *c = px->conns; c; c = c->next) {
			if (c->state == PX_HELD && c->port == gone->port &&
			    strcmp(c->host, gone->host) == 0) {
				release(c, a, rule);
				more = true;
				break;
			}
		}
	}
	free(gone);
	return 0;
}

void px_ask_shutdown(ab_proxy *px)
{
	while (px->questions) {
		px_question *q = px->questions;
		px->questions = q->next;
		free(q);
	}
	px->nquestions = 0;
	px->ask_fn = NULL;
}
