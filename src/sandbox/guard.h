/* SPDX-License-Identifier: MIT */
/*
 * Guarded keys of writable JSON files (filesystem.guard): a harness must
 * write its state file through the run, but some of its keys make the next
 * run of the harness on the host start a program or trust a folder.
 *
 * A file granted on its own is shown as the run's private copy
 * (AB_MNT_F_COPY, src/plan/plan_guard.c): made next to the file when the run
 * starts, so the host's file holds nothing the sandbox wrote while it runs.
 * When the run ends, what the run changed in the copy is merged into the
 * host's file key by key (where the host changed the same value meanwhile,
 * the host's stays), except the guarded keys, which keep the host's values;
 * then the copy is removed.
 *
 * A guarded file writable only as part of a granted directory is the host's
 * own while the run lasts: its guarded values are taken at the start, and
 * when the run ends each one the run changed is put back (a key it added is
 * removed).
 *
 * Either way the file is rewritten in place of the old (same owner and mode,
 * by rename).  Parent, or the cleanup watcher when the parent was killed.
 */
#ifndef AGENTBOX_GUARD_H
#define AGENTBOX_GUARD_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "agentbox/common.h"
#include "agentbox/plan.h"

typedef struct ab_guard_file {
	char *path;
	ab_strv ptrs; /* its guarded pointers, "*" segments unexpanded */
	json_t *vals; /* the values at the start: concrete pointer -> value */
	json_t *base; /* with a copy: the whole document at the start (NULL: empty) */
	char *copy;   /* the run's private copy (AB_MNT_F_COPY), or NULL */
	char *start;  /* ... the bytes it was made with */
	size_t start_len;
	int copy_fd;    /* ... open read-write, or -1 */
	dev_t copy_dev; /* ... and which file it is (the cleanup watcher opens it
			   again: its copy of this fd number was closed) */
	ino_t copy_ino;
	bool settled; /* ... merged (or kept for review) and no longer ours */
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

/* Pure: merge into *THEIRS (the host's document now) what OURS (the run's
 * copy) changed of BASE (the document at the start): object members key by
 * key, recursively; a value both changed keeps the host's.  *THEIRS may be
 * replaced (a document the host left as it was becomes OURS).  0 or
 * -ENOMEM. */
int ab_guard_merge(json_t **theirs, json_t *base, json_t *ours);

/* At the start: PLAN's guard entries ("FILE#/POINTER") grouped by file,
 * their values read (an absent file: none), and the private copy of each
 * file with one made.  A file that cannot be read or parsed, or a copy that
 * cannot be made, refuses the run. */
int ab_guard_snapshot(ab_guard *g, const ab_plan *plan, ab_err *err);

/* When the run ends: RESTORE false (the test ablation) says only what it
 * would put back, and merges a copy whole.  One line per file settled in
 * FINDINGS. */
void ab_guard_settle(ab_guard *g, bool restore, ab_strv *findings);

/* Frees G; a copy not settled (the run never ran) is removed. */
void ab_guard_free(ab_guard *g);

#endif
