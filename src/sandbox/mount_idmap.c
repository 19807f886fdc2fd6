/* SPDX-License-Identifier: MIT */
/*
 * The parent-side preparation of idmapped trees for root callers: root-owned
 * grants are shown to the sandbox's uid through an idmapped mount, made here
 * (the child, in its user namespace, could not) and sent to the child.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agentbox/sandbox.h"
#include "mount_int.h"

/* The idmap helper: it lives in its new user namespace until killed, by
 * agentbox or by agentbox's death (it holds agentbox's memory: it must not
 * outlive it). ARG: agentbox's pid. */
static int idmap_hold(void *arg)
{
	sigset_t all;
	sigfillset(&all);
	sigprocmask(SIG_SETMASK, &all, NULL);
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != (pid_t)(intptr_t)arg)
		return 0;
	for (;;)
		pause();
	return 0;
}

/* A throwaway user namespace mapping on-disk root to the sandbox's host ids:
 * the idmapping of root-owned grants when root starts agentbox.  Its holder
 * is a light child (CLONE_VM|CLONE_NEWUSER: no copy of agentbox's page
 * tables), created in the namespace, killed once the namespace is open. */
static int idmap_userns(uid_t kuid, gid_t kgid, ab_err *err)
{
	ab_light l;
	if (ab_light_spawn(&l, idmap_hold, (void *)(intptr_t)getpid(), CLONE_NEWUSER) < 0)
		return ab_fail(err, errno, "idmap: create a user namespace");
	int r = 0, nsfd = -1;
	char path[64], map[64];
	static const char *const files[] = {"uid_map", "setgroups", "gid_map"};
	for (size_t i = 0; i < 3 && r == 0; i++) {
		if (i == 0)
			snprintf(map, sizeof(map), "0 %u 1\n", (unsigned)kuid);
		else if (i == 1)
			snprintf(map, sizeof(map), "deny\n");
		else
			snprintf(map, sizeof(map), "0 %u 1\n", (unsigned)kgid);
		snprintf(path, sizeof(path), "/proc/%d/%s", (int)l.pid, files[i]);
		int fd = open(path, O_WRONLY | O_CLOEXEC);
		ssize_t n = fd < 0 ? -1 : write(fd, map, strlen(map));
		if (n != (ssize_t)strlen(map))
			r = ab_fail(err, n < 0 ? errno : EIO, "idmap: write %s", path);
		if (fd >= 0)
			close(fd);
	}
	if (r == 0) {
		snprintf(path, sizeof(path), "/proc/%d/ns/user", (int)l.pid);
		nsfd = open(path, O_RDONLY | O_CLOEXEC);
		if (nsfd < 0)
			r = ab_fail(err, errno, "idmap: open %s", path);
	}
	kill(l.pid, SIGKILL);
	ab_light_reap(&l);
	return r < 0 ? r : nsfd;
}

int ab_mount_prepare_idmaps(const ab_plan *plan, int *fds, ab_err *err)
{
	_cleanup_close_ int userns = -1;
	for (size_t i = 0; i < plan->nmounts; i++)
		fds[i] = -1;
	for (size_t i = 0; i < plan->nmounts; i++) {
		const ab_mount *m = &plan->mounts[i];
		if (!(m->flags & AB_MNT_F_IDMAP))
			continue;
		if (userns < 0) {
			userns = idmap_userns(plan->map_kuid, plan->map_kgid, err);
			if (userns < 0)
				return userns;
		}
		_cleanup_close_ int src = ab_mount_open_source(plan, m);
		if (src < 0)
			return ab_fail(err, errno, "%s %s", m->why, m->src);
		struct stat st;
		if (fstat(src, &st) < 0)
			return ab_fail(err, errno, "%s %s", m->why, m->src);
		if (S_ISLNK(st.st_mode) || !!S_ISDIR(st.st_mode) != !!(m->flags & AB_MNT_F_DIR))
			return ab_fail(err, 0,
				       "%s %s changed type while agentbox started; refusing",
				       m->why, m->src);
		int tree =
			sys_open_tree(src, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
		if (tree < 0) {
			int r = ab_fail(err, errno, "%s %s: open_tree", m->why, m->src);
			err->step = AB_STEP_OPEN_TREE;
			return r;
		}
		struct ab_mount_attr a = {
			.attr_set = MOUNT_ATTR_IDMAP | BASE_ATTRS |
				    (m->kind == AB_MNT_BIND_RO ? MOUNT_ATTR_RDONLY : 0),
			.userns_fd = (unsigned long long)userns};
		if (sys_mount_setattr(tree, "", AT_EMPTY_PATH, &a) < 0) {
			int e = errno;
			close(tree);
			ab_fail(err, e, "%s %s: idmapped mount", m->why, m->src);
			ab_err_hint(err,
				    "this filesystem does not support idmapped mounts; chown "
				    "%s to an unprivileged user or run agentbox as that user",
				    m->src);
			return -e;
		}
		fds[i] = tree;
	}
	return 0;
}
