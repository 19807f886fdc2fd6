/* SPDX-License-Identifier: MIT */
/*
 * Credential brokering, the run-time state the egress proxy uses (parent
 * only): the loaded secrets (real values, placeholders, bound hosts, places)
 * and the session CA.  Made by ab_broker_prepare after clone; see
 * src/broker.c and docs/credentials.md.
 */
#ifndef AGENTBOX_BROKER_H
#define AGENTBOX_BROKER_H

#include "agentbox/ca.h"
#include "agentbox/plan.h"
#include "agentbox/secrets.h"

typedef struct ab_broker {
	ab_secret *secs;
	size_t n;
	ab_ca *ca;
} ab_broker;

/* Values read from agentbox's own environment are moved, BEFORE clone, into
 * memory the clone does not inherit (MADV_WIPEONFORK) and wiped where they
 * were (agentbox's environment block), so the sandbox's first process never
 * holds them, not even in its copy of our memory. */
typedef struct ab_stash {
	char *mem;   /* mmap'd, wipe-on-fork, not dumped */
	size_t cap;
	size_t off[AB_SECRETS_MAX], len[AB_SECRETS_MAX];
	bool have[AB_SECRETS_MAX];
} ab_stash;

int ab_broker_stash(const ab_plan *plan, ab_stash *st, ab_err *err);
void ab_stash_free(ab_stash *st);

/* Nothing to do (NULL) without secrets.  Otherwise load every secret (a
 * missing or empty one fails the run), send the placeholders and the trust
 * files to the child over sync_fd (before AB_SYNC_PLACEHOLDERS_DONE). */
int ab_broker_prepare(const ab_plan *plan, const ab_stash *st, int sync_fd, ab_broker **out,
		      ab_err *err);
/* Wipes the values; frees the CA (its keys are cleared by OpenSSL). */
void ab_broker_free(ab_broker *b);

#endif
