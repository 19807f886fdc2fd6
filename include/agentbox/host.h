/* SPDX-License-Identifier: MIT */
/*
 * Read-only kernel probes.  The only impure input of the planner: everything
 * the planner needs to know about this machine is in struct ab_host, so unit
 * tests build a fake one.  Runs in the parent, before clone.
 */
#ifndef AGENTBOX_HOST_H
#define AGENTBOX_HOST_H

#include <stdio.h>
#include <sys/types.h>

#include "agentbox/common.h"
#include "agentbox/container.h"

enum ab_tristate { AB_NO = 0, AB_YES = 1, AB_UNKNOWN = -1 };

typedef struct ab_host {
	uid_t uid, euid;
	gid_t gid, egid;
	bool is_root; /* euid == 0 */

	/* user namespaces */
	int userns_ok;                /* ab_tristate: actually tried (fork+unshare) */
	int userns_errno;             /* errno of the failed attempt */
	bool userns_nocaps;           /* the userns was created but grants no capabilities
					(unshare(CLONE_NEWNS) inside failed: AppArmor's
					unprivileged_userns restriction) */
	int apparmor_restrict_userns; /* kernel.apparmor_restrict_unprivileged_userns: 0/1, -1 absent */
	int unprivileged_userns_clone; /* Debian/Ubuntu sysctl: 0/1, -1 absent */
	long max_user_namespaces;      /* user.max_user_namespaces, -1 unknown */

	int landlock_abi;   /* 0 = none/disabled, else ABI version */
	int landlock_errno; /* why 0 (ENOSYS: not built, EOPNOTSUPP: disabled at boot) */

	int seccomp_ok;         /* ab_tristate: prctl(PR_GET_SECCOMP) / seccomp(GET_ACTION_AVAIL) */
	int seccomp_user_notif; /* ab_tristate; NO also when a filter above agentbox already
				   has a listener (only one per chain: a container runtime) */
	bool seccomp_listener_busy; /* that case: the kernel has it, a listener is taken */
	int seccomp_mode;           /* PR_GET_SECCOMP of agentbox itself: 0, 2 = already under a
				   filter (container, systemd unit), -1 unknown */
	int container;              /* ab_tristate: /.dockerenv, /run/.containerenv or $container */

	int cgroup_version;    /* 1, 2, or 0 unknown (2 = unified at /sys/fs/cgroup) */
	int cgroup_delegated;  /* ab_tristate: a base cgroup (ours or its parent) is writable and
				    hands memory+pids to children (cgroup.subtree_control) */
	char cgroup_path[512]; /* delegated base (relative to /sys/fs/cgroup, e.g. "/a/b") the
				    sandbox cgroup <base>/agentbox-<pid> is created in: our own
				    cgroup or its parent (see cgroup.h); "" if none */
	char cgroup_self[512]; /* our own cgroup v2 path, "" if unknown */

	int legacy_tiocsti;    /* /proc/sys/dev/tty/legacy_tiocsti: 0/1, -1 absent (always on) */
	int io_uring_disabled; /* /proc/sys/kernel/io_uring_disabled: 0/1/2, -1 absent */
	int idmap_mounts;      /* ab_tristate: mount_setattr exists (kernel >= 5.12) */
	int fresh_proc;        /* ab_tristate: a fresh proc mount works in a new user, mount and
				  pid namespace; probed (ab_ctr_try_proc) only where a profile
				  allows the "proc-outer" downgrade, else AB_UNKNOWN */
	int keyctl_errno;      /* 0: keyctl works here; EPERM/EACCES/ENOSYS: refused to agentbox
				  itself (an outer seccomp filter, or no CONFIG_KEYS), and so to
				  everything it starts */
	int cap_last_cap;      /* /proc/sys/kernel/cap_last_cap */
	long long memlock;     /* RLIMIT_MEMLOCK soft limit in bytes, -1 unlimited or unknown */
	/* agentbox's hard resource limits (RLIM_INFINITY when unknown): a
	 * profile's limit above one becomes it (an unprivileged process cannot
	 * raise a hard limit), and explain says so */
	unsigned long long rlim_hard[16];
	char kernel_release[128];

	/* doctor only (try_userns): the engine around agentbox, and the
	 * sandbox's set-up tried for real in throwaway children */
	bool trial_done;
	ab_ctr_facts ctr;
	ab_ctr_trial trial;
} ab_host;

/* Fill *h.  Never fails; unknowns are AB_UNKNOWN/-1.  `try_userns` forks a
 * child that attempts unshare(CLONE_NEWUSER) (cheap, ~1 ms); explain and run
 * skip it (run finds out at clone), doctor uses it. */
void ab_host_probe(ab_host *h, bool try_userns);

/* A fixed, permissive-modern host for tests: root=false, uid 1000, Landlock
 * ABI `abi`, seccomp yes, cgroup v2 delegated, etc. */
void ab_host_fake(ab_host *h, int landlock_abi);

/* Explain why user namespaces fail on this host and how to fix it, as a
 * complete message + hint (used by run when clone(CLONE_NEWUSER) fails). */
void ab_host_userns_error(const ab_host *h, int errnum, ab_err *err);

/* `agentbox doctor`: probe (with try_userns) and print the report to stdout.
 * Returns 0 if everything agentbox needs works, 1 if something required is
 * missing. */
int ab_doctor(bool json);
/* The same report for a given host, to `out` (tests use ab_host_fake).
 * Returns 0/1 as ab_doctor, or -ENOMEM/-EIO. */
int ab_doctor_report(const ab_host *h, bool json, FILE *out);

#endif
