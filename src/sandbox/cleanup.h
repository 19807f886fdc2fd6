/* SPDX-License-Identifier: MIT */
/*
 * Host-side cleanup that survives agentbox being SIGKILLed.
 *
 * Protected paths that do not exist get an empty placeholder on the host for
 * the duration of a run.  The parent removes them after the sandbox exits; a
 * tiny watcher process (forked before clone, in its own session) removes them
 * too if the parent dies first: it waits for EOF on a socket from the parent,
 * then for the sandbox's init to be gone (pidfd), then cleans up.  At exit
 * the parent hands the watcher an O_PATH fd of each placeholder it removes,
 * so the removal takes only the name and the inode is freed (on some file
 * systems a synchronous discard) when the watcher exits, after agentbox
 * returned.
 */
#ifndef AGENTBOX_CLEANUP_H
#define AGENTBOX_CLEANUP_H

#include <sys/types.h>

#include "agentbox/common.h"

#define AB_CLEANUP_MAX 256

typedef struct ab_cleaner {
	/* set before ab_cleaner_start: what the watcher runs after the
	 * placeholders are gone when the parent died before ab_cleaner_settled
	 * (the nested repositories of the run), or NULL */
	void (*settle)(void *ctx);
	void *settle_ctx;
	int pipe_fd; /* write end to the watcher, -1 if none */
	pid_t watcher;
	char *paths[AB_CLEANUP_MAX];
	bool is_dir[AB_CLEANUP_MAX];
	unsigned long long dev[AB_CLEANUP_MAX], ino[AB_CLEANUP_MAX];
	long long size[AB_CLEANUP_MAX]; /* a file's size as made (its content) */
	size_t n;
} ab_cleaner;

/* Fork the watcher.  Must run before clone (the sandbox must not inherit the
 * pipe: it is O_CLOEXEC and the child closes every fd it does not need). */
int ab_cleaner_start(ab_cleaner *c, int keep_fd, int keep_fd2, ab_err *err);
/* (c->settle and c->settle_ctx are kept; everything else is reset) */
/* keep_fd: the workspace lock, held by the watcher too until it has cleaned
 * up; keep_fd2: the inotify instance (released by the watcher); -1 for none */
/* The parent settled what settle would (the watcher need not). */
void ab_cleaner_settled(ab_cleaner *c);
/* Tell the watcher which process to wait for before cleaning up. */
void ab_cleaner_watch_pid(ab_cleaner *c, pid_t pid);
/* Create the plan's placeholders (empty 0555 directories, parents reached
 * without following symlinks) as the caller, recording each.  An existing
 * entry is left alone (the read-only cover applies to it anyway). */
struct ab_plan;
int ab_placeholders_create(const struct ab_plan *plan, ab_cleaner *c, ab_err *err);

/* Record a placeholder (copied) and the identity it had when created. */
int ab_cleaner_add(ab_cleaner *c, const char *path, bool is_dir, unsigned long long dev,
		   unsigned long long ino,
		   long long size); /* -ENOSPC past AB_CLEANUP_MAX, -ENOMEM */
/* Remove every placeholder that is still an empty placeholder (their inodes
 * handed to the watcher, which frees them after agentbox returned), stop
 * the watcher and free everything.  Safe to call once on every exit path,
 * after the sandbox is gone. */
void ab_cleaner_finish(ab_cleaner *c);

#endif
