/* SPDX-License-Identifier: MIT */
/*
 * Reaching mount targets inside the staging root (child, before pivot_root).
 *
 * No symlink is ever followed on the way to a target, nor at the target:
 * a writable grant is bound into the stage, and anything an earlier run (or
 * the host user) left in it, a symlink in place of a directory included,
 * must not redirect a mount or a mkdir outside the new root.
 *
 * The plan's targets are sorted and share parents (a writable grant's
 * reserved names, the masks under /etc), so the directory holding a target
 * is opened once and kept: the parent is resolved in one openat2
 * (RESOLVE_NO_SYMLINKS | RESOLVE_BENEATH, from the stage), the last
 * component from the kept parent in another (a symlink there is refused
 * too: ELOOP, as O_NOFOLLOW and a check of the mode did before).  A kept directory is
 * forgotten as soon as anything is mounted on it or above it (its fd would
 * still show the covered directory, not what the new root shows there):
 * ab_walk_forget() after every mount.  Where a directory on the way is
 * missing and may be created, the walk goes component by component from
 * the stage, creating it, as the plain walk always did.
 */
#ifndef AGENTBOX_SANDBOX_MOUNT_WALK_H
#define AGENTBOX_SANDBOX_MOUNT_WALK_H

#include <stdbool.h>
#include <sys/types.h>

#define AB_WALK_KEEP 8 /* directories kept open */

typedef struct ab_walk {
	int stage; /* O_PATH of the staging root (not owned) */
	struct {
		char *path; /* absolute, as the plan writes it ("/a/b") */
		int fd;     /* O_PATH, O_CLOEXEC */
	} keep[AB_WALK_KEEP];
	unsigned next; /* the slot replaced next when all are in use */
} ab_walk;

void ab_walk_init(ab_walk *w, int stage_fd);
void ab_walk_free(ab_walk *w);

/* Reach `dst` (absolute) inside the stage, never following a symlink,
 * creating missing components when `create` (directories, and for a file
 * target (!dir) an empty file last).  Returns an O_PATH fd of the target
 * (the caller closes it) or -errno: -ELOOP when a symlink is on the way or
 * at the target, -ENOTDIR when a non-directory is on the way, -ENOENT.
 * `is_dir`, when not NULL, says whether the target is a directory. */
int ab_walk_open(ab_walk *w, const char *dst, bool dir, bool create, bool *is_dir);

/* Something was mounted at `path`: forget kept directories at or under it. */
void ab_walk_forget(ab_walk *w, const char *path);

#endif
