/* SPDX-License-Identifier: MIT */
/*
 * After a run: nested git repositories the sandbox armed are disarmed
 * (parent; src/observe/gitnest.c says how they are judged).
 *
 * A repository below a writable directory (made with `git init` or `git
 * clone` inside, or a submodule's .git replaced) whose config or hooks were
 * given something to run during the run would run it on the host: `git
 * status` above it recurses into it through a gitlink, a git-aware prompt
 * runs git in it.  The index and the trees must stay writable for git to
 * work inside, so this is settled when the sandbox is gone: such a .git is
 * moved aside, loudly (stderr and the audit log), before anything on the
 * host could be told the run is over.
 */
#ifndef AGENTBOX_GITSCAN_H
#define AGENTBOX_GITSCAN_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "agentbox/common.h"

#define AB_GIT_INDEX_MAX (512u << 20)  /* bytes of .git/index read */
#define AB_GIT_INDEX_ENTRIES 10000000u /* entries */
#define AB_GIT_PATH_MAX 4096
#define AB_GITSCAN_WALK_MAX 16000000 /* directory entries looked at after a run */
#define AB_GITSCAN_DEPTH 128

/* Pure: the gitlink paths (mode 0160000) of a git index (versions 2-4).
 * HASH_LEN: 20 (SHA-1) or 32 (SHA-256).  0, or -EINVAL with a message
 * naming the byte offset (never a crash, never a read past LEN). */
int ab_git_index_gitlinks(const uint8_t *buf, size_t len, size_t hash_len, ab_strv *out,
			  ab_err *err);

/* The workspace's gitlinks now (none without a .git directory or index). */
int ab_gitscan_snapshot(const char *workspace, ab_strv *gitlinks, ab_err *err);

/* A writable directory to settle: its host path, its identity (a root's own
 * .git is a protected path, left alone wherever the walk meets it), and the
 * gitlinks of its index after the run (judged even where the walk stopped). */
typedef struct ab_gitnest_root {
	const char *path;
	dev_t dev;
	ino_t ino;
	ab_strv gitlinks;
	/* a writable grant whose new `.git` entries the run kept off the host
	 * (include/agentbox/mediate.h): the run's tag and the grant's mount
	 * index.  Its links (wherever the walk meets one) get their content
	 * back from its store, before they are judged; what is left in the
	 * store of this run is removed.  NULL: none. */
	const char *tag;
	unsigned index;
} ab_gitnest_root;

/* After the run: walk every root (a root inside another is walked with it),
 * judge each nested .git and bare-shaped directory, and move aside those
 * armed and touched since SINCE (DISARM false: the test ablation, report
 * only).  SHARED (or NULL): paths relative to a work tree that the system or
 * global git config names as hooks or programs; in a nested work tree one
 * the run changed is moved aside too.  One human-readable line per repository settled, and one when the
 * walk had to stop (AB_GITSCAN_WALK_MAX entries, AB_GITSCAN_DEPTH levels). */
int ab_gitnest_settle(const ab_gitnest_root *roots, size_t nroots, const ab_strv *shared,
		      struct timespec since, bool disarm, ab_strv *findings, ab_err *err);

#endif
