/* SPDX-License-Identifier: MIT */
/*
 * cgroup v2 helpers.  The pure parts (parsing /proc/self/cgroup, controller
 * lists, the file writes a plan needs) are here so they can be unit-tested;
 * ab_cgroup_setup/ab_cgroup_cleanup (declared in sandbox.h) do the few
 * syscalls.  The host probe (src/kernel/host.c) uses the parsers to decide whether a
 * delegated cgroup is available.
 *
 * Where the sandbox's cgroup goes: cgroup v2's "no internal processes" rule
 * means the cgroup agentbox runs in cannot both hold agentbox and hand memory
 * and pids controllers to a child (only the root cgroup can).  So the sandbox
 * cgroup is created in the first of
 *   1. our own cgroup, if its cgroup.subtree_control already has memory and
 *      pids (the root cgroup),
 *   2. its parent, if that has them in cgroup.subtree_control,
 * whose directory and cgroup.procs we may write (cgroup.procs of the common
 * ancestor is what moving a process needs).  ab_host.cgroup_path is that
 * base; the sandbox's cgroup is <base>/agentbox-<pid>.
 */
#ifndef AGENTBOX_CGROUP_H
#define AGENTBOX_CGROUP_H

#include <sys/types.h>

#include "agentbox/common.h"
#include "agentbox/host.h"

#define AB_CGROUP_ROOT "/sys/fs/cgroup"
#define AB_CGROUP_MAX_WRITES 4

/* One write into the sandbox's cgroup directory. */
typedef struct ab_cg_write {
	const char *file; /* "memory.max", ... (static string) */
	char value[32];   /* decimal */
	bool optional;    /* ENOENT is fine (e.g. memory.swap.max without swap accounting) */
} ab_cg_write;

/* The writes that apply `memory` (bytes) and `pids` (count), each
 * AB_LIMIT_UNSET when not wanted, in order.  cgroup.procs is not included
 * (the caller writes the pid last).  Returns the number of writes (0..max) or
 * -EINVAL for a value < 1 (other than AB_LIMIT_UNSET) or -ENOSPC if `max` is
 * too small. */
int ab_cgroup_plan_writes(long long memory, long long pids, ab_cg_write *w, size_t max);

/* Find the cgroup v2 line ("0::/path") in the contents of /proc/PID/cgroup
 * and copy the path to out.  Returns 0, -ENOENT if there is none, -EINVAL if
 * the path is not a clean absolute path, -ENAMETOOLONG if it does not fit. */
int ab_cgroup_parse_self(const char *buf, size_t len, char *out, size_t outlen);

/* true if the space-separated controller list (cgroup.controllers or
 * cgroup.subtree_control contents) contains `name` as a whole word. */
bool ab_cgroup_list_has(const char *list, const char *name);

/* Lexical check of a cgroup path relative to the cgroup root: absolute, no
 * "." or ".." components, no empty components, no control characters. */
bool ab_cgroup_path_valid(const char *path);

/* "<AB_CGROUP_ROOT><base>/agentbox-<pid>" into out.  -EINVAL for an invalid
 * base, -ENAMETOOLONG if it does not fit. */
int ab_cgroup_child_path(const char *base, pid_t pid, char *out, size_t outlen);

/* The parent of a cgroup path ("/a/b" -> "/a", "/a" -> "/"); -EINVAL for "/". */
int ab_cgroup_parent_path(const char *path, char *out, size_t outlen);

/* cgroup v2 limits (parent, src/kernel/cgroup.c): create a child cgroup under our
 * delegated one, set memory.max/pids.max, move `pid` in.  Cleanup removes it. */
int ab_cgroup_setup(long long memory, long long pids, const ab_host *host, pid_t pid,
		    char **out_path, ab_err *err);

void ab_cgroup_cleanup(const char *path);

#endif
