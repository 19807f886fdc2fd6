/* SPDX-License-Identifier: MIT */
/*
 * After a run: nested git repositories the sandbox planted (parent).
 *
 * The open gap in docs/threat-model.md: the sandbox can create a repository
 * below the workspace (with its own core.fsmonitor or hooks) and register it
 * as a gitlink in the workspace's index, or replace an existing submodule's
 * .git; a later `git status` on the host then runs its configuration.  The
 * index must stay writable for git to work inside, so agentbox cannot stop
 * it; it makes it visible instead: after the run it compares the index's
 * gitlinks with those before it, and looks for .git entries below the
 * workspace created or changed during the run.  Findings go to the audit log
 * ("warning" events) and to stderr, always.
 */
#ifndef AGENTBOX_GITSCAN_H
#define AGENTBOX_GITSCAN_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "agentbox/common.h"

#define AB_GIT_INDEX_MAX (512u << 20)   /* bytes of .git/index read */
#define AB_GIT_INDEX_ENTRIES 10000000u  /* entries */
#define AB_GIT_PATH_MAX 4096
#define AB_GITSCAN_WALK_MAX 100000      /* directory entries looked at after a run */
#define AB_GITSCAN_DEPTH 12

/* Pure: the gitlink paths (mode 0160000) of a git index (versions 2-4).
 * HASH_LEN: 20 (SHA-1) or 32 (SHA-256).  0, or -EINVAL with a message
 * naming the byte offset (never a crash, never a read past LEN). */
int ab_git_index_gitlinks(const uint8_t *buf, size_t len, size_t hash_len, ab_strv *out,
			  ab_err *err);

/* The workspace's gitlinks now (none without a .git directory or index). */
int ab_gitscan_snapshot(const char *workspace, ab_strv *gitlinks, ab_err *err);

/* Is the workspace a repository (a .git entry of any type)?  Asked before
 * the run: during it an absent .git is a placeholder (docs/protected-paths). */
bool ab_gitscan_is_repo(const char *workspace);

/* After the run: human-readable findings (one line each) for gitlinks not
 * in BEFORE (NULL: the index could not be read before, no comparison), and,
 * when the workspace was a repository (REPO; elsewhere nothing runs git),
 * for .git entries below it whose change time is at or after SINCE.  The
 * walk stops after AB_GITSCAN_WALK_MAX entries and says so. */
int ab_gitscan_findings(const char *workspace, const ab_strv *before, struct timespec since,
			bool repo, ab_strv *findings, ab_err *err);

#endif
