/* SPDX-License-Identifier: MIT */
/*
 * Internals shared by the planner's files (parent, pure), each using only the
 * ones listed below it:
 *   plan.c          ab_plan_build: paths, identity, command, environment,
 *                   limits, seccomp, ablations, and the order of it all
 *   plan_landlock.c the Landlock rules, from the mounts and the egress ports
 *   plan_net.c      the egress plan, its mounts and its environment
 *   plan_mounts.c   the new root: grants, denies, protected paths, and the
 *                   mount list every other part adds to
 *   plan_guard.c    the private copies of guarded files (filesystem.guard)
 * The egress part adds its files (/etc/resolv.conf, the session CA, rendered
 * credentials) to the mount list itself, through pl_add_mount: they are
 * mounts like any other, decided where their reason is known.
 */
#ifndef AGENTBOX_PLAN_INT_H
#define AGENTBOX_PLAN_INT_H

#include "agentbox/plan.h"

/* The filesystem as the planner sees it (ab_plan_input.lstat: faked in tests). */
static inline int pl_lstat(const ab_plan_input *in, const char *path, struct stat *st)
{
	return in->lstat(in->lstat_ctx, path, st);
}

/* ---- plan_mounts.c */
int pl_add_mount(ab_plan *p, enum ab_mnt_kind kind, const char *src, const char *dst,
		 unsigned flags, const char *why);
/* The entry of list that path is (under), or NULL. */
const char *pl_under_any(const ab_strv *list, const char *path);
/* The base tree, grants, identity files, denies and protected paths, in that
 * order (each step sees the mounts of the ones before). */
int pl_plan_mounts(ab_plan *p, const ab_plan_input *in, ab_err *err);
/* Protect ABS (a directory when DIR) like a filesystem.protect entry under
 * the deepest writable directory grant holding it: 1, or 0 when no
 * writable grant holds it (or it is the grant itself). */
int pl_protect_path(ab_plan *p, const ab_plan_input *in, const char *abs, bool dir, ab_err *err);
/* Grants and structure by depth (parents first), then masks and protections
 * by depth, then generated files. */
void pl_sort_mounts(ab_plan *p);

/* ---- plan_gitcfg.c: after the protected paths (plan_mounts.c calls it) */
int pl_plan_gitcfg(ab_plan *p, const ab_plan_input *in, ab_err *err);

/* ---- plan_net.c: after the mounts (its own are added to them) */
int pl_plan_egress(ab_plan *p, const ab_plan_input *in, ab_err *err);
/* after plan.c's environment: the proxy variables, a secret's variable dropped */
int pl_plan_egress_env(ab_plan *p, ab_err *err);
void pl_egress_plan_free(ab_egress_plan *e);

/* ---- plan_review.c: after the mounts (marks the workspace bind) */
int pl_plan_review(ab_plan *p, const ab_plan_input *in, ab_err *err);

/* ---- plan_guard.c: after the mounts and the ablations (the run's tag) */
int pl_plan_guard_copies(ab_plan *p, const ab_plan_input *in, ab_err *err);

/* ---- plan_landlock.c: after the mounts and the egress plan */
int pl_plan_landlock(ab_plan *p, const ab_plan_input *in, ab_err *err);

#endif
