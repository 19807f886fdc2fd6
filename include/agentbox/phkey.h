/* SPDX-License-Identifier: MIT */
/*
 * phkey.h: the key behind stable placeholders (src/creds/phkey.c).
 */
#ifndef AGENTBOX_PHKEY_H
#define AGENTBOX_PHKEY_H

#include <stdbool.h>
#include <sys/types.h>

#include "agentbox/common.h"
#include "agentbox/secrets.h"

/* Where the key lives: $XDG_STATE_HOME (absolute only, as the XDG rule
 * says) or HOME/.local/state, then agentbox/placeholder.key.  ENV is a
 * NULL-terminated environment.  Malloc'd and normalised; NULL without an
 * absolute base or memory. */
char *ab_phkey_path(const char *home, char *const *env);

/* Read the key at PATH into KEY, making it first (directories 0700, 32 bytes
 * from getrandom, mode 0600) when absent.  Refused unless it is a regular
 * file (not a link) of exactly AB_PHKEY_LEN bytes owned by the effective uid
 * with no group or other access.  0 or -errno with ERR set; KEY is wiped on
 * failure and must be wiped by the caller after use. */
int ab_phkey_load(const char *path, unsigned char key[AB_PHKEY_LEN], ab_err *err);

/* Make the key at PATH when absent (before the plan: a grant that covers it
 * then hides it).  0 or -errno. */
int ab_phkey_ensure(const char *path);

/* Which file PATH names, to compare after a run in which a writable grant
 * covered its directory: the sandbox could not read the key (hidden), but
 * could have moved the directory above it and left its own key at PATH for
 * later runs.  ab_phkey_settle removes whatever PATH names unless it is the
 * file it named before: 1 removed, 0 nothing to do, -errno. */
typedef struct ab_phkey_id {
	bool present;
	dev_t dev;
	ino_t ino;
} ab_phkey_id;
void ab_phkey_id_of(const char *path, ab_phkey_id *id);
int ab_phkey_settle(const char *path, const ab_phkey_id *before);

#endif
