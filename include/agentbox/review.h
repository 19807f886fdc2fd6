/* SPDX-License-Identifier: MIT */
/*
 * Review mode's change sets (docs/review.md): what a `run --review` wrote,
 * held in an overlay's upper layer under the user's state directory until
 * `agentbox apply` lands it or `agentbox discard` drops it.  Parent only.
 *
 * The upper layer was written by the sandbox: untrusted.  It is read
 * without following a symbolic link, within limits (AB_REVIEW_MAX_ENTRIES,
 * AB_REVIEW_DEPTH, PATH_MAX), and anything the overlay itself would not
 * have written plainly (a device other than a whiteout, a FIFO, a socket,
 * an overlay redirect or metacopy mark) is listed as a special entry that
 * is never applied unless named.
 */
#ifndef AGENTBOX_REVIEW_H
#define AGENTBOX_REVIEW_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "agentbox/audit.h"
#include "agentbox/common.h"

struct ab_plan;

#define AB_REVIEW_MAX_ENTRIES 2000000  /* upper-layer entries looked at */
#define AB_REVIEW_DEPTH 256            /* directory levels */
#define AB_REVIEW_READ_MAX (64u << 20) /* bytes of a file read to count its lines */
#define AB_REVIEW_LARGE (1u << 20)     /* a binary file this large is flagged */

enum ab_change_kind { AB_CHG_DELETED, AB_CHG_ADDED, AB_CHG_MODIFIED };
enum ab_change_type { AB_CHT_FILE, AB_CHT_DIR, AB_CHT_SYMLINK, AB_CHT_SPECIAL };

#define AB_RISK_EXEC 0x01       /* an executable bit */
#define AB_RISK_PROTECTED 0x02  /* at, below or above a protected path of the run */
#define AB_RISK_NESTED_GIT 0x04 /* inside a .git below the workspace's top */
#define AB_RISK_UNUSUAL 0x08    /* not one of the usual source types */
#define AB_RISK_BINARY 0x10     /* a large binary */
#define AB_RISK_SYMLINK 0x20
#define AB_RISK_SPECIAL 0x40 /* device, FIFO, socket, overlay mark: never applied */
#define AB_RISK_CONFLICT \
	0x80 /* the workspace changed there since the run (a directory the run
		added to is now something else, a symlink say): never applied */
/* applied only when a PATH names them (and special ones never) */
#define AB_RISK_NAMED_ONLY (AB_RISK_PROTECTED | AB_RISK_NESTED_GIT | AB_RISK_SPECIAL)

typedef struct ab_change {
	char *path; /* relative to the workspace */
	enum ab_change_kind kind;
	enum ab_change_type type;
	mode_t mode;           /* the new one (the old one for a deletion) */
	long lines, old_lines; /* -1: binary, too large or not a file */
	uint64_t size;
	unsigned risk; /* AB_RISK_* */
	char *target;  /* a symlink's, else NULL */
} ab_change;

typedef struct ab_changeset {
	ab_change *v;
	size_t n, cap;
	size_t seen;     /* entries looked at */
	bool cut;        /* a limit stopped the walk: the list is incomplete */
	ab_strv protect; /* protected paths of the run, relative (from meta) */
} ab_changeset;

void ab_changeset_free(ab_changeset *cs);

/* Pure: the risks of PATH (relative) given its type, mode, size and whether
 * its bytes look binary; PROTECT as in ab_changeset. */
unsigned ab_review_path_risk(const char *path, enum ab_change_type type, mode_t mode, uint64_t size,
			     bool binary, const ab_strv *protect);

/* Before a review run: the change set directory (0700, upper/ and work/,
 * owned by the sandbox's host ids) and its meta file.  A pending change set
 * is continued: said on stderr. */
int ab_review_prepare(const struct ab_plan *plan, ab_err *err);

/* Compare UPPER (an overlay upper layer) with WORKSPACE into *CS (sorted by
 * path, a deletion before an addition at the same path). */
int ab_review_scan(const char *workspace, const char *upper, ab_changeset *cs, ab_err *err);

/* The change set directory of WORKSPACE (ab_review_dir_for), when one is
 * pending: 1 and *DIR (malloc'd), 0 none, or -errno. */
int ab_review_find(const char *workspace, char *const *env, const char *home, char **dir,
		   ab_err *err);

/* "sub/.git" of "sub/.git/HEAD" (also ".git" of ".git/HEAD"): the length
 * up to and with the first ".git" component, or 0.  A repository is one
 * line of the listing. */
size_t ab_review_git_prefix(const char *path);

/* The listing on OUT (paths cleaned for a terminal). */
void ab_review_print(const char *dir, const ab_changeset *cs, FILE *out);

/* At the end of a review run: scan, print on stderr, and write the
 * "review" event (action "held") to AUDIT (may be NULL). */
void ab_review_after_run(const struct ab_plan *plan, ab_audit *audit);

/* The audit log the run that made change set DIR wrote (from its meta file,
 * an absolute path), or NULL: none, or unreadable. */
char *ab_review_log_of(const char *dir);

/* A "review" audit event (docs/audit.md): ACTION, the workspace, the change
 * set's directory, and with CS its counts. */
json_t *ab_review_event(const char *action, const char *workspace, const char *dir,
			const ab_changeset *cs);

/* agentbox review / apply / discard (src/observe/review_apply.c): the exit
 * status (0, 1 apply left something out, AB_EXIT_FAIL with *err).  Each
 * writes its "review" event to AUDIT (may be NULL). */
int ab_review_cmd_show(const char *workspace, const char *dir, bool diff, ab_audit *audit,
		       ab_err *err);
int ab_review_cmd_apply(const char *workspace, const char *dir, char *const *paths, int npaths,
			ab_audit *audit, ab_err *err);
int ab_review_cmd_discard(const char *workspace, const char *dir, ab_audit *audit, ab_err *err);

#endif
