/* SPDX-License-Identifier: MIT */
/*
 * `run`: clone into new namespaces, the parent/child protocol, the event loop,
 * exit status.  The parent (host namespaces) runs ab_sandbox_run; the child
 * runs ab_child_main (src/init.c), which builds the sandbox, forks the command
 * and then acts as its init (pid 1).
 */
#ifndef AGENTBOX_SANDBOX_H
#define AGENTBOX_SANDBOX_H

#include <sys/ioctl.h>

#include "agentbox/plan.h"
#include "agentbox/seccomp.h"

/* Messages on the sync socket (SOCK_SEQPACKET, one message per write). */
enum ab_sync_type {
	AB_SYNC_MAPS_DONE = 1,  /* parent -> child: uid/gid maps written, go on */
	AB_SYNC_PTY_MASTER,     /* child -> parent: SCM_RIGHTS master fd */
	AB_SYNC_READY,          /* child -> parent: sandbox built, command started (pid) */
	AB_SYNC_ERROR,          /* child -> parent: ab_err follows in the payload */
	AB_SYNC_EXIT,           /* child -> parent: command exit status (128+N for signals) */
	AB_SYNC_PLACEHOLDERS_DONE, /* parent -> child: placeholders exist, build the root */
	AB_SYNC_IDMAP,          /* parent -> child (root callers): SCM_RIGHTS an idmapped
				   tree for mount index `value`; value -1 ends the list */
	AB_SYNC_SECCOMP,        /* parent -> child: `value` programs follow, one raw
				   datagram of struct sock_filter each (compiled while the
				   child builds its root) */
	AB_SYNC_LISTENER,       /* child -> parent: SCM_RIGHTS an egress listener created
				   inside the netns; value = AB_LISTENER_VALUE(kind, port) */
	AB_SYNC_CONTENT,        /* parent -> child (before PLACEHOLDERS_DONE): SCM_RIGHTS a
				   sealed memfd with the content of mount index `value`
				   (AB_MNT_F_RUNTIME: the session CA's trust files) */
	AB_SYNC_ENV,            /* parent -> child (before PLACEHOLDERS_DONE): one raw
				   datagram of `value` bytes follows, "NAME=VALUE" for the
				   command's environment (a secret's placeholder) */
	AB_SYNC_NOTIFY,         /* child -> parent: SCM_RIGHTS the seccomp user-notification
				   listener (the exec and denial record, supervise.c) */
	AB_SYNC_SOCKDIAG,       /* child -> parent (before AB_SYNC_NOTIFY): SCM_RIGHTS a
				   NETLINK_SOCK_DIAG socket made in the sandbox's network
				   namespace (connect mediation: which sockets it bound) */
};

#define AB_SECCOMP_MAX_INSNS 4096 /* per program (BPF_MAXINSNS) */

typedef struct ab_sync_msg {
	int type;
	int value;      /* pid, status, ... */
	ab_err err;     /* AB_SYNC_ERROR */
} ab_sync_msg;

/* What the child needs; everything prepared by the parent before clone. */
typedef struct ab_child_args {
	const ab_plan *plan;
	int sync_fd;          /* child end of the socketpair */
	bool have_ws;
	struct winsize ws;    /* outer window size when use_pty */
	int parent_fds[6];    /* the parent's own fds the clone inherited: closed first */
} ab_child_args;

/* Parent: run the plan; returns the exit status agentbox should exit with
 * (the command's, 128+N, or 125/126/127 with *err filled for 125). */
int ab_sandbox_run(const ab_plan *plan, ab_err *err);

/* Child entry (clone callback).  Never returns to the caller's code. */
int ab_child_main(void *arg);

/* Send/receive one sync message (with optional fd). */
int ab_sync_send(int fd, const ab_sync_msg *m, int pass_fd);
int ab_sync_recv(int fd, ab_sync_msg *m, int *recv_fd);

/* The compiled filter crosses as AB_SYNC_SECCOMP + one datagram per program.
 * recv fills `out` with programs whose instructions live in `store` (room for
 * AB_SECCOMP_MAX_PROGS * AB_SECCOMP_MAX_INSNS); no allocation. */
int ab_sync_send_seccomp(int fd, const ab_seccomp_prog *p);
int ab_sync_recv_seccomp(int fd, ab_seccomp_prog *out, struct sock_filter *store);

/* Mount step (child, src/mount.c): build the new root under a private tmpfs
 * and pivot_root into it (after AB_SYNC_PLACEHOLDERS_DONE, and for root
 * callers the AB_SYNC_IDMAP trees, arrive on sync_fd). */
typedef struct ab_runtime {
	ab_strv env; /* AB_SYNC_ENV entries: added to (or replacing in) plan->envp */
} ab_runtime;

#define AB_SYNC_ENV_MAX 8192 /* one AB_SYNC_ENV entry */

int ab_mount_build_root(const ab_plan *plan, int sync_fd, ab_runtime *rt, ab_err *err);

/* Parent, root callers only: for every mount flagged AB_MNT_F_IDMAP, a
 * detached, idmapped tree (on-disk root -> the sandbox's host ids); fds[i] is
 * -1 for other mounts.  fds has plan->nmounts slots.  Runs after clone, while
 * the child starts; the trees cross as AB_SYNC_IDMAP messages. */
int ab_mount_prepare_idmaps(const ab_plan *plan, int *fds, ab_err *err);

/* cgroup v2 limits (parent, src/cgroup.c): create a child cgroup under our
 * delegated one, set memory.max/pids.max, move `pid` in.  Cleanup removes it. */
int ab_cgroup_setup(const ab_plan *plan, const ab_host *host, pid_t pid, char **out_path,
		    ab_err *err);

void ab_cgroup_cleanup(const char *path);

#endif
