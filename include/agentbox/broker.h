/* SPDX-License-Identifier: MIT */
/*
 * Credential brokering, the run-time state the egress proxy uses (parent
 * only): the loaded secrets (real values, placeholders, bound hosts, places)
 * and the session CA.  Made by ab_broker_prepare after clone; see
 * src/egress/broker.c and docs/credentials.md.
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
	/* subscription logins (docs/credentials.md) */
	const struct ab_profile_secret **prof; /* secs[i]'s profile entry */
	char **retired; /* values replaced by a token refresh: still masked */
	size_t *retired_len;
	size_t *retired_of; /* the secret each belonged to */
	size_t nretired;
	unsigned rotations;
	ab_strv skipped; /* optional secrets whose source was absent (audit log) */
} ab_broker;

#define AB_BROKER_MAX_ROTATIONS 256 /* token refreshes per run (each retires values) */

/* Values read from agentbox's own environment are moved, BEFORE clone, into
 * memory the clone does not inherit (MADV_WIPEONFORK) and wiped where they
 * were (agentbox's environment block), so the sandbox's first process never
 * holds them, not even in its copy of our memory. */
typedef struct ab_stash {
	char *mem; /* mmap'd, wipe-on-fork, not dumped */
	size_t cap;
	size_t off[AB_SECRETS_MAX], len[AB_SECRETS_MAX];
	bool have[AB_SECRETS_MAX];
} ab_stash;

int ab_broker_stash(const ab_plan *plan, ab_stash *st, ab_err *err);
void ab_stash_free(ab_stash *st);

/* The content of the plan's AB_MNT_F_RUNTIME mounts: memfds sent to the
 * child EMPTY (AB_SYNC_CONTENT, then AB_SYNC_CONTENT_DONE), before the
 * broker runs, so the child mounts them while the secrets and the session CA
 * are made; ab_broker_prepare fills and seals them before
 * AB_SYNC_RUNTIME_DONE, and the child copies them only after that.  -1: the
 * plan has no mount of that content. */
typedef struct ab_broker_files {
	int bundle;  /* the trust bundle (every distro path and AB_TRUST_BUNDLE) */
	int ca;      /* the root alone (AB_TRUST_CA) */
	int java;    /* the Java truststore */
	int *render; /* per plan mount: a rendered credentials file's, or -1 */
	size_t nmounts;
} ab_broker_files;

/* Make and send them (always ends with AB_SYNC_CONTENT_DONE, none or not). */
int ab_broker_files_send(const ab_plan *plan, int sync_fd, ab_broker_files *f, ab_err *err);
void ab_broker_files_close(ab_broker_files *f);

/* Nothing to do (NULL) without secrets.  Otherwise load every secret (a
 * missing or empty one fails the run, unless "optional" allows it to be
 * absent: it is then skipped and *SKIPPED, if not NULL, gets its name),
 * send the placeholders to the child over sync_fd (AB_SYNC_ENV), and fill
 * and seal FILES: the rendered credentials files and the trust files. */
int ab_broker_prepare(const ab_plan *plan, const ab_stash *st, const ab_broker_files *files,
		      int sync_fd, ab_broker **out, ab_err *err);
/* Is a POST to HOST:PORT PATH (no query) a token endpoint some loaded
 * secret rotates through ("rotate")? */
bool ab_broker_token_endpoint(const ab_broker *b, const char *host, unsigned port,
			      const char *path);

/*
 * A token endpoint's successful response BODY[0..LEN) (JSON, at most
 * AB_CREDFILE_MAX bytes): for every secret rotating through HOST:PORT PATH
 * whose field is in it, the field's string becomes the secret's new value
 * (the old one is retired: still masked) and, in the body handed back in
 * *OUT (malloc'd, wipe it), its placeholder: the same one, or a new one of
 * the new length when the secret is swapped in bodies (same-length rule).
 * The new values are written back to the secrets' JSON files on the host
 * (ab_credfile_update, one write per file).  *ROTATED: bit i for secs[i].
 * Fails closed: -EINVAL (not a JSON object, a field not a string, a bad
 * value, a real value left in the output), -E2BIG (too many rotations); no
 * secret is changed then.  A failed write-back leaves the secrets rotated
 * (the sandbox keeps working) and returns -EIO with *err saying so.
 */
int ab_broker_rotate(ab_broker *b, const char *host, unsigned port, const char *path,
		     const char *body, size_t len, char **out, size_t *outlen, uint64_t *rotated,
		     ab_err *err);

/* The response masking set: every secret's value and every retired value. */
int ab_broker_response_set(const ab_broker *b, ab_scan_set **out, ab_err *err);

/* Wipes the values; frees the CA (its keys are cleared by OpenSSL). */
void ab_broker_free(ab_broker *b);

#endif
