/* SPDX-License-Identifier: MIT */
/* Internal to the new root's construction (mount.c, mount_idmap.c): the
 * new mount API's calls and constants, and the checks both sides share. */
#ifndef AGENTBOX_SANDBOX_MOUNT_INT_H
#define AGENTBOX_SANDBOX_MOUNT_INT_H

#include <fcntl.h>
#include <stdbool.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "agentbox/plan.h"

#ifndef OPEN_TREE_CLONE
#define OPEN_TREE_CLONE 1
#endif
#ifndef OPEN_TREE_CLOEXEC
#define OPEN_TREE_CLOEXEC O_CLOEXEC
#endif
#ifndef MOVE_MOUNT_F_EMPTY_PATH
#define MOVE_MOUNT_F_EMPTY_PATH 0x00000004
#endif
#ifndef MOVE_MOUNT_T_EMPTY_PATH
#define MOVE_MOUNT_T_EMPTY_PATH 0x00000040
#endif
#ifndef MOUNT_ATTR_RDONLY
#define MOUNT_ATTR_RDONLY 0x00000001
#define MOUNT_ATTR_NOSUID 0x00000002
#define MOUNT_ATTR_NODEV 0x00000004
#define MOUNT_ATTR_NOEXEC 0x00000008
#endif
#ifndef MOUNT_ATTR_IDMAP
#define MOUNT_ATTR_IDMAP 0x00100000
#endif
#ifndef AT_RECURSIVE
#define AT_RECURSIVE 0x8000
#endif
#ifndef __NR_open_tree
#define __NR_open_tree 428
#define __NR_move_mount 429
#endif
#ifndef __NR_mount_setattr
#define __NR_mount_setattr 442
#endif

struct ab_mount_attr {
	unsigned long long attr_set, attr_clr, propagation, userns_fd;
};

#define BASE_ATTRS (MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV)
#define AB_MAX_MOUNTS 4096 /* a plan's mounts, at most */

static inline int sys_open_tree(int dfd, const char *path, unsigned flags)
{
	return (int)syscall(__NR_open_tree, dfd, path, flags);
}
static inline int sys_move_mount(int from_dfd, const char *from, int to_dfd, const char *to,
				 unsigned fl)
{
	return (int)syscall(__NR_move_mount, from_dfd, from, to_dfd, to, fl);
}
static inline int sys_mount_setattr(int dfd, const char *path, unsigned flags,
				    struct ab_mount_attr *a)
{
	return (int)syscall(__NR_mount_setattr, dfd, path, flags, a, sizeof(*a));
}

/* Open a host path O_PATH.  `strict`: no symlink anywhere on the way except
 * that a final symlink is returned as itself (for sources inside writable
 * trees, which the sandbox could have seeded with links). */
int ab_mount_open_host(const char *path, bool strict);
/* Is `path` strictly inside a writable bind of the plan? */
bool ab_mount_in_writable(const ab_plan *plan, const char *path);
/* A bind's source O_PATH, as ab_mount_open_host: the run's private copy of
 * a guarded file in its place (AB_MNT_F_COPY; no symlink on the way). */
int ab_mount_open_source(const ab_plan *plan, const ab_mount *m);

/* mount_runtime.c: a run-time mount's file TO (taken), to get the bytes of
 * the parent's memfd FROM (dup'ed) once the parent is done with it. */
struct ab_runtime;
int ab_mount_defer_fill(struct ab_runtime *rt, int from, int to);

#endif
