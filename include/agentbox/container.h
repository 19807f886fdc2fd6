/* SPDX-License-Identifier: MIT */
/*
 * agentbox inside a container engine (podman, Docker, Kubernetes): which
 * engine it is, and why a step of the sandbox's set-up fails there, with the
 * smallest change to the container's flags that fixes it.  Detection reads
 * a few files; the advice is a pure function of the facts (unit-tested).
 */
#ifndef AGENTBOX_CONTAINER_H
#define AGENTBOX_CONTAINER_H

#include <stdbool.h>
#include <stddef.h>

enum ab_engine {
	AB_ENGINE_NONE = 0,   /* no container found */
	AB_ENGINE_PODMAN,     /* /run/.containerenv, container=podman, libpod cgroup */
	AB_ENGINE_DOCKER,     /* /.dockerenv, container=docker, docker cgroup */
	AB_ENGINE_KUBERNETES, /* KUBERNETES_SERVICE_HOST, kubepods cgroup */
	AB_ENGINE_OTHER,      /* $container names another one (lxc, systemd-nspawn, ...) */
};

/* The set-up steps an outer sandbox can refuse (ab_err.step). */
enum ab_step {
	AB_STEP_NONE = 0,
	AB_STEP_USERNS,      /* clone with CLONE_NEWUSER and the other namespaces */
	AB_STEP_SETHOSTNAME, /* sethostname in the new UTS namespace */
	AB_STEP_MOUNT,       /* any mount (the new root's tmpfs) */
	AB_STEP_PROC,        /* a fresh proc mount in the new pid namespace */
	AB_STEP_KEYRING,     /* keyctl(KEYCTL_JOIN_SESSION_KEYRING) */
	AB_STEP_OPEN_TREE,   /* root callers: open_tree(OPEN_TREE_CLONE) for idmapped binds */
	AB_STEP_PIDFD_GETFD, /* connect mediation: pidfd_getfd on a sandboxed process */
	AB_STEP_MAX,
};

#define AB_CTR_OVERMOUNTS_MAX 256

typedef struct ab_ctr_facts {
	int engine;     /* enum ab_engine */
	bool root;      /* agentbox runs as uid 0 */
	int userns;     /* ab_tristate: agentbox runs in a user namespace of its own
			     (uid_map is not the identity), e.g. podman --userns, rootless */
	int yama_scope; /* kernel.yama.ptrace_scope, -1 when Yama is not active */
	/* mount points on or under /proc's files that make a fresh proc mount
	 * "too revealing" (comma-separated, cut at the size) */
	char proc_overmounts[AB_CTR_OVERMOUNTS_MAX];
} ab_ctr_facts;

/* The engine from what a process can see (pure): whether /run/.containerenv
 * and /.dockerenv exist, $container, $KUBERNETES_SERVICE_HOST, and the text of
 * /proc/self/cgroup (NULL/0 when unread). */
int ab_ctr_engine_of(bool containerenv, bool dockerenv, const char *env_container,
		     const char *env_kubernetes, const char *cgroup, size_t cgroup_len);
const char *ab_engine_name(int engine);
const char *ab_step_name(int step);

/* The mount points under /proc/ in mountinfo text (pure; bounded by `len`):
 * each that is not /proc/sys/fs/binfmt_misc (an always-empty directory, which
 * the kernel does not count), comma-separated into out.  Returns how many. */
int ab_ctr_proc_overmounts(const char *mountinfo, size_t len, char *out, size_t outlen);

/* Read the facts of this process (a few small files; no child). */
void ab_ctr_detect(ab_ctr_facts *f, bool root);

/* `doctor`: the sandbox's set-up tried in throwaway children. */
typedef struct ab_ctr_trial {
	int step;            /* the first refused (enum ab_step), AB_STEP_NONE if all worked:
				clone with every namespace, sethostname, a mount, a fresh
				proc mount, the keyring join */
	int errnum;          /* its errno */
	int open_tree_errno; /* root: open_tree(OPEN_TREE_CLONE) 0 or errno; -1 not tried */
	int getfd_errno;     /* pidfd_getfd on a child of ours: 0 or errno */
} ab_ctr_trial;

void ab_ctr_trial_run(ab_ctr_trial *t, bool root);

/* Does a fresh proc mount work in a new user, mount and pid namespace
 * (a throwaway child)?  AB_NO when the kernel refuses it with EPERM (the
 * outer /proc has mounts over its files: a container), AB_UNKNOWN when
 * the namespaces themselves fail (run says why). */
int ab_ctr_try_proc(void); /* enum ab_tristate (host.h) */

/* Why `step` failed with `errnum` given the facts, and the minimal fix (pure).
 * false when there is nothing specific to say (cause and fix left empty). */
bool ab_ctr_advise(const ab_ctr_facts *f, int step, int errnum, char *cause, size_t clen, char *fix,
		   size_t flen);

#endif
