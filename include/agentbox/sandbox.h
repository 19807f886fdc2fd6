/* SPDX-License-Identifier: MIT */
/*
 * `run`: clone into new namespaces, the parent/child protocol, the event loop,
 * exit status.  The parent (host namespaces) runs ab_sandbox_run; the child
 * runs ab_child_main (src/sandbox/init.c), which builds the sandbox, forks the command
 * and then acts as its init (pid 1).
 */
#ifndef AGENTBOX_SANDBOX_H
#define AGENTBOX_SANDBOX_H

#include <sys/ioctl.h>

#include "agentbox/learn.h"
#include "agentbox/plan.h"
#include "agentbox/seccomp.h"
#include "agentbox/sync.h"

#define AB_SECCOMP_MAX_INSNS 4096 /* per program (BPF_MAXINSNS) */

/* What the child needs; everything prepared by the parent before clone. */
typedef struct ab_child_args {
	const ab_plan *plan;
	int sync_fd; /* child end of the socketpair */
	bool have_ws;
	struct winsize ws; /* outer window size when use_pty */
	int parent_fds[6]; /* the parent's own fds the clone inherited: closed first */
} ab_child_args;

/* Parent: run the plan; returns the exit status agentbox should exit with
 * (the command's, 128+N, or 125/126/127 with *err filled for 125). */
int ab_sandbox_run(const ab_plan *plan, ab_err *err);

/* The same, for run --learn (plan->seccomp.notify_learn): LEARN's sets are
 * filled by the supervisor (paths) and the proxy (hosts) and are the
 * caller's again when this returns. */
typedef struct ab_learn_sets {
	ab_learn_set paths, hosts;
} ab_learn_sets;
int ab_sandbox_run_learn(const ab_plan *plan, ab_learn_sets *learn, ab_err *err);

/* Child entry (clone callback).  Never returns to the caller's code. */
int ab_child_main(void *arg);

/* The compiled filter crosses as AB_SYNC_SECCOMP + one datagram per program.
 * recv fills `out` with programs whose instructions live in `store` (room for
 * AB_SECCOMP_MAX_PROGS * AB_SECCOMP_MAX_INSNS); no allocation. */
int ab_sync_send_seccomp(int fd, const ab_seccomp_prog *p);
int ab_sync_recv_seccomp(int fd, ab_seccomp_prog *out, struct sock_filter *store);

/* Mount step (child, src/sandbox/mount.c): build the new root under a private tmpfs
 * and pivot_root into it (after AB_SYNC_PLACEHOLDERS_DONE, and for root
 * callers the AB_SYNC_IDMAP trees, arrive on sync_fd). */
/* A run-time mount's file, mounted empty: `to` (the staged file, written
 * through this fd) gets the bytes of `from` (the parent's memfd). */
typedef struct ab_runtime_fill {
	int from, to;
} ab_runtime_fill;

typedef struct ab_runtime {
	ab_strv env;            /* AB_SYNC_ENV entries: added to (or replacing in) plan->envp */
	ab_runtime_fill *fills; /* the run-time mounts' copies, made by ab_mount_fill_runtime */
	size_t nfills, capfills;
} ab_runtime;

int ab_mount_build_root(const ab_plan *plan, int sync_fd, ab_runtime *rt, ab_err *err);
/* After the root is built and the filter received: the placeholders'
 * environment (AB_SYNC_ENV) up to AB_SYNC_RUNTIME_DONE, then each run-time
 * mount's file gets its memfd's bytes (refused unless the parent sealed it:
 * it seals a file once written). */
int ab_mount_fill_runtime(int sync_fd, ab_runtime *rt, ab_err *err);

/* Parent, root callers only: for every mount flagged AB_MNT_F_IDMAP, a
 * detached, idmapped tree (on-disk root -> the sandbox's host ids); fds[i] is
 * -1 for other mounts.  fds has plan->nmounts slots.  Runs after clone, while
 * the child starts; the trees cross as AB_SYNC_IDMAP messages. */
int ab_mount_prepare_idmaps(const ab_plan *plan, int *fds, ab_err *err);

#endif
