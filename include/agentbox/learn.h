/* SPDX-License-Identifier: MIT */
/*
 * `run --learn FILE` (docs/learn.md): what a learning run recorded, and the
 * pure step that turns the record into a draft profile.
 *
 * The record is two bounded sets: the paths the command's processes opened,
 * created or executed (filled by the supervisor's thread from seccomp
 * notifications, src/observe/supervise_learn.c) and the destinations it
 * reached through the proxy (filled by the proxy on the event loop).  Each
 * set has one writer; the builder reads them after the run.
 *
 * The builder (src/plan/learn.c) decides, for each record, against the
 * plan the learning run had and the host's filesystem: already granted
 * (nothing to add), a grant to add (the file, or for a new file the nearest
 * existing directory), or left out, with the reason (a secret, the home
 * directory or a startup location, a directory to read, a denied path).
 */
#ifndef AGENTBOX_LEARN_H
#define AGENTBOX_LEARN_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "agentbox/common.h"
#include "agentbox/plan.h"

#define AB_LEARN_MAX 4096      /* distinct records per set; more are counted, not kept */
#define AB_LEARN_WHAT_MAX 4095 /* bytes of one path or destination (< PATH_MAX) */
#define AB_LEARN_PROG_MAX 256  /* bytes of one program name */
#define AB_LEARN_PROGS 3       /* programs named per record */

enum ab_learn_kind {
	AB_LEARN_READ,   /* opened for reading */
	AB_LEARN_WRITE,  /* opened for writing, created, or a directory made */
	AB_LEARN_CREATE, /* ... a new file or directory whose parent the sandbox lacked */
	AB_LEARN_EXEC,   /* executed */
	AB_LEARN_HOST,   /* a destination "host:port" reached through the proxy */
};

typedef struct ab_learn_rec {
	enum ab_learn_kind kind;
	char *what;                  /* absolute path inside (normalised), or "host:port" */
	char *progs[AB_LEARN_PROGS]; /* the programs that did it, first seen first */
	uint64_t count;
} ab_learn_rec;

typedef struct ab_learn_set {
	ab_learn_rec *v;
	size_t n, cap;
	uint64_t dropped; /* records beyond AB_LEARN_MAX, or refused (too long) */
} ab_learn_set;

/* Add (KIND, WHAT) by PROG (may be NULL); a repeat adds PROG to the record's
 * programs.  Bytes that are not printable ASCII in PROG are replaced.  0, or
 * -E2BIG (counted in dropped: the set is full or WHAT is too long), -EINVAL
 * (WHAT empty, or a path that is relative, not normalised or holds a control
 * byte), -ENOMEM. */
int ab_learn_add(ab_learn_set *s, enum ab_learn_kind kind, const char *what, const char *prog);
void ab_learn_set_free(ab_learn_set *s);

/* The host's filesystem as the builder sees it (faked in tests):
 * 0 and *IS_DIR, or -errno. */
typedef int (*ab_learn_stat_fn)(void *ctx, const char *path, bool *is_dir);
int ab_learn_real_stat(void *ctx, const char *path, bool *is_dir);

typedef struct ab_learn_input {
	const ab_plan *plan;       /* the learning run's plan (its base profiles) */
	const ab_strv *extends;    /* the profiles the draft extends (names or paths) */
	const ab_strv *argv;       /* the command that was learned (for the description) */
	const ab_learn_set *paths; /* READ / WRITE / EXEC records */
	const ab_learn_set *hosts; /* HOST records */
	ab_learn_stat_fn stat;
	void *stat_ctx;
} ab_learn_input;

typedef struct ab_learn_result {
	json_t *profile; /* the draft, a version 1 profile */
	ab_strv added;   /* "filesystem.read /x/y" ... as added, for the summary */
	ab_strv left;    /* "PATH: why it was left out", for the summary */
} ab_learn_result;

int ab_learn_build(const ab_learn_input *in, ab_learn_result *out, ab_err *err);

/* Would the builder do anything with (KIND, PATH) - add it or name it as left
 * out?  The supervisor keeps only those, so the bounded record is not filled
 * with what the plan already allowed. */
bool ab_learn_matters(const ab_plan *plan, enum ab_learn_kind kind, const char *path,
		      ab_learn_stat_fn stat, void *stat_ctx);
void ab_learn_result_free(ab_learn_result *r);

#endif
