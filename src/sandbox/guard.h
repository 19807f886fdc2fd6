/* SPDX-License-Identifier: MIT */
/*
 * Guarded keys of writable JSON files (filesystem.guard): a harness must
 * write its state file through the run, but some of its keys make the next
 * run of the harness on the host start a program or trust a folder.  Their
 * values are taken when the sandbox starts; when the run ends, each one the
 * run changed is put back (a key it added is removed) and the file rewritten
 * in place of the old (same owner and mode, by rename).  Parent, or the
 * cleanup watcher when the parent was killed.
 */
#ifndef AGENTBOX_GUARD_H
#define AGENTBOX_GUARD_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "agentbox/common.h"

typedef struct ab_guard_file {
	char *path;
	ab_strv ptrs; /* its guarded pointers, "*" segments unexpanded */
	json_t *vals; /* the values at the start: concrete pointer -> value */
} ab_guard_file;

typedef struct ab_guard {
	ab_guard_file *f;
	size_t n;
} ab_guard;

/* Pure: every concrete pointer PTR names in DOC ("*" a whole segment: each
 * key of the object there) that holds a value, as keys of OUT (pointer ->
 * value, borrowed into OUT with a reference).  0 or -ENOMEM. */
int ab_guard_collect(json_t *doc, const char *ptr, json_t *out);

/* Pure: put back in DOC every guarded value that differs from START
 * (restored, or removed when START has none); each pointer changed is pushed
 * to CHANGED.  Returns how many, or -ENOMEM. */
int ab_guard_restore(json_t *doc, const ab_strv *ptrs, json_t *start, ab_strv *changed);

/* At the start: ENTRIES ("FILE#/POINTER") grouped by file, their values
 * read (an absent file: none).  A file that cannot be read or parsed refuses
 * the run. */
int ab_guard_snapshot(ab_guard *g, const ab_strv *entries, ab_err *err);

/* When the run ends: RESTORE false (the test ablation) says only what it
 * would put back.  One line per file settled in FINDINGS. */
void ab_guard_settle(const ab_guard *g, bool restore, ab_strv *findings);

void ab_guard_free(ab_guard *g);

#endif
