/* SPDX-License-Identifier: MIT */
/*
 * What the files of the secrets module share (secrets.c, sources.c), not
 * part of its interface (include/agentbox/secrets.h).
 */
#ifndef AGENTBOX_SECRETS_INT_H
#define AGENTBOX_SECRETS_INT_H

#include <stddef.h>

/* Why V[0..LEN) cannot be a secret's value (a phrase after "the value"), or
 * NULL when it can: one rule for a value set and a value loaded. */
const char *sec_value_problem(const char *v, size_t len);

#endif
