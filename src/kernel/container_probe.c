/* SPDX-License-Identifier: MIT */
/*
 * `doctor` tries the sandbox's set-up for real (parent process, doctor only):
 * a throwaway child cloned with every namespace `run` uses makes the same
 * calls in the same order (sethostname, a mount, a fresh proc mount, the
 * keyring join) in its own private mount namespace, then exits; as root,
 * open_tree first, as `run` does for idmapped binds; and pidfd_getfd on a
 * child, as connect mediation does.  Nothing outside the child changes.
 */
#include "agentbox/container.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/keyctl.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "agentbox/common.h"
#include "agentbox/host.h"

#ifndef SYS_open_tree
#define SYS_open_tree 428
#endif
#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_pidfd_getfd
#define SYS_pidfd_getfd 438
#endif
#ifndef OPEN_TREE_CLONE
#define OPEN_TREE_CLONE 1
#endif
#ifndef OPEN_TREE_CLOEXEC
#define OPEN_TREE_CLOEXEC O_CLOEXEC
#endif

#define TRIAL_HOSTNAME "agentbox-doctor"

typedef struct trial {
	int step, errnum; /* written by the child (CLONE_VM, the parent waits: CLONE_VFORK) */
} trial;

static int fail_at(trial *t, int step)
{
	t->step = step;
	t->errnum = errno;
	return 1;
}

/* The child: system calls only (ab_light_spawn). */
static int trial_child(void *arg)
{
	trial *t = arg;
	if (sethostname(TRIAL_HOSTNAME, sizeof(TRIAL_HOSTNAME) - 1) < 0)
		return fail_at(t, AB_STEP_SETHOSTNAME);
	/* nothing of the child's mounts reaches the outer namespace */
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
	    mount("tmpfs", "/", "tmpfs", MS_NOSUID | MS_NODEV, "size=4k") < 0)
		return fail_at(t, AB_STEP_MOUNT);
	if (mount("proc", "/", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
		return fail_at(t, AB_STEP_PROC);
	if (syscall(SYS_keyctl, KEYCTL_JOIN_SESSION_KEYRING, (const char *)NULL) < 0) {
		/* refused as a whole family (an outer filter, no CONFIG_KEYS):
		 * run skips the join, as nothing inside can call keyctl either */
		int e = errno;
		if (syscall(SYS_keyctl, KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING, 0) >= 0 ||
		    errno != e)
			return fail_at(t, AB_STEP_KEYRING);
	}
	t->step = AB_STEP_NONE;
	return 0;
}

static void try_setup(ab_ctr_trial *out)
{
	trial t = {.step = AB_STEP_USERNS, .errnum = 0};
	ab_light l;
	int flags = CLONE_VFORK | CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC |
		    CLONE_NEWUTS | CLONE_NEWNET;
	if (ab_light_spawn(&l, trial_child, &t, flags) < 0) {
		out->step = AB_STEP_USERNS;
		out->errnum = errno;
		return;
	}
	int st = ab_light_reap(&l);
	if (st < 0 || !WIFEXITED(st)) {
		/* killed, e.g. by a filter that kills instead of failing */
		out->step = t.step == AB_STEP_NONE ? AB_STEP_USERNS : t.step;
		out->errnum = t.errnum ? t.errnum : EPERM;
		return;
	}
	out->step = t.step;
	out->errnum = t.errnum;
}

static int proc_child(void *arg)
{
	int *e = arg;
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
	    mount("tmpfs", "/", "tmpfs", MS_NOSUID | MS_NODEV, "size=4k") < 0)
		return 2;
	if (mount("proc", "/", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0) {
		*e = errno;
		return 1;
	}
	return 0;
}

int ab_ctr_try_proc(void)
{
	int e = 0;
	ab_light l;
	if (ab_light_spawn(&l, proc_child, &e,
			   CLONE_VFORK | CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID) < 0)
		return AB_UNKNOWN;
	int st = ab_light_reap(&l);
	if (st < 0 || !WIFEXITED(st) || WEXITSTATUS(st) == 2)
		return AB_UNKNOWN;
	if (WEXITSTATUS(st) == 0)
		return AB_YES;
	return e == EPERM ? AB_NO : AB_UNKNOWN;
}

static int idle_child(void *unused)
{
	for (;;)
		pause();
	return 0;
}

/* connect mediation's call: pidfd_getfd on a process of ours.  EBADF (the
 * child has no fd 0) means the call itself is allowed. */
static int try_getfd(void)
{
	ab_light l;
	if (ab_light_spawn(&l, idle_child, NULL, 0) < 0)
		return errno;
	int e = 0;
	long pfd = syscall(SYS_pidfd_open, l.pid, 0);
	if (pfd < 0) {
		e = errno;
	} else {
		long fd = syscall(SYS_pidfd_getfd, (int)pfd, 0, 0);
		e = fd < 0 && errno != EBADF ? errno : 0;
		if (fd >= 0)
			close((int)fd);
		close((int)pfd);
	}
	kill(l.pid, SIGKILL);
	ab_light_reap(&l);
	return e;
}

void ab_ctr_trial_run(ab_ctr_trial *out, bool root)
{
	out->open_tree_errno = -1;
	if (root) {
		/* a detached copy of one mount, gone at close */
		long fd =
			syscall(SYS_open_tree, AT_FDCWD, "/", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
		out->open_tree_errno = fd < 0 ? errno : 0;
		if (fd >= 0)
			close((int)fd);
	}
	try_setup(out);
	out->getfd_errno = try_getfd();
}
