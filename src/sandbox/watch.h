/* SPDX-License-Identifier: MIT */
/*
 * Protected paths changed from outside (parent).
 *
 * A read-only bind covers a dentry.  When something on the host replaces or
 * removes that dentry (`git config` renames a new .git/config over the old
 * one, an editor saves .envrc by rename, another process removes a
 * placeholder), the kernel detaches the mounts on it in every namespace and
 * the sandbox would see a writable path.  agentbox watches the protected
 * inodes with inotify and stops the sandbox (fail closed) when one changes.
 * There is a short window between the change and the kill; docs/threat-model.md
 * says so.
 */
#ifndef AGENTBOX_WATCH_H
#define AGENTBOX_WATCH_H

#include "agentbox/common.h"
#include "agentbox/plan.h"

typedef struct ab_watch {
	int fd;      /* inotify, -1 when nothing is watched */
	int *wd;     /* watch descriptor per entry */
	char **path; /* path per entry (borrowed from the plan) */
	size_t n;
} ab_watch;

/* Create the inotify instance when the plan has anything to watch (before
 * the cleanup watcher is forked: the watcher keeps a reference so that the
 * instance's slow teardown, an SRCU grace period of ~10 ms, happens in that
 * process after agentbox has exited, not on the user's time). */
int ab_watch_init(ab_watch *w, const ab_plan *plan, ab_err *err);

/* Watch every protected path, placeholder and pinned directory of the plan
 * (call after the placeholders exist).  Fails closed if a watch cannot be set. */
int ab_watch_start(ab_watch *w, const ab_plan *plan, ab_err *err);

/* Drain events; returns the path that changed (borrowed), or NULL. */
const char *ab_watch_changed(ab_watch *w);

void ab_watch_free(ab_watch *w);

#endif
