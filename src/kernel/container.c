/* SPDX-License-Identifier: MIT */
/*
 * Which container engine agentbox runs in, and what to change when one of
 * its set-up steps is refused there (parent process: run's error path and
 * doctor).  The engines' default seccomp profiles allow some calls agentbox
 * needs only with capabilities it must not ask for; the shipped profiles in
 * AB_DATADIR/containers/ are those defaults plus exactly those calls.
 */
#include "agentbox/container.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agentbox/common.h"
#include "agentbox/host.h"

#define CTR_FILE_MAX 65536 /* /proc/self/cgroup, /proc/self/mountinfo */
#define PROFILES AB_DATADIR "/containers"

static const char *const engine_names[] = {"none", "podman", "Docker", "Kubernetes", "a container"};

const char *ab_engine_name(int engine)
{
	return engine >= 0 && engine < (int)AB_ARRAY_SIZE(engine_names) ? engine_names[engine]
									: "?";
}

static const char *const step_names[] = {"none",      "user namespace", "sethostname",
					 "mount",     "proc mount",     "keyring",
					 "open_tree", "pidfd_getfd"};

const char *ab_step_name(int step)
{
	return step >= 0 && step < AB_STEP_MAX ? step_names[step] : "?";
}

static bool has(const char *text, size_t len, const char *needle)
{
	return text && memmem(text, len, needle, strlen(needle)) != NULL;
}

int ab_ctr_engine_of(bool containerenv, bool dockerenv, const char *env_container,
		     const char *env_kubernetes, const char *cgroup, size_t cgroup_len)
{
	/* a pod's containers run under containerd or CRI-O: the pod's settings
	 * (securityContext) are what the user can change */
	if ((env_kubernetes && *env_kubernetes) || has(cgroup, cgroup_len, "kubepods"))
		return AB_ENGINE_KUBERNETES;
	if (containerenv || (env_container && strcmp(env_container, "podman") == 0) ||
	    has(cgroup, cgroup_len, "libpod"))
		return AB_ENGINE_PODMAN;
	if (dockerenv || (env_container && strcmp(env_container, "docker") == 0) ||
	    has(cgroup, cgroup_len, "/docker") || has(cgroup, cgroup_len, "docker-"))
		return AB_ENGINE_DOCKER;
	if (env_container && *env_container)
		return AB_ENGINE_OTHER;
	return AB_ENGINE_NONE;
}

/* The 5th field of a mountinfo line, [p, end): the mount point. */
static bool mount_point(const char *p, const char *end, const char **mp, size_t *mlen)
{
	for (int field = 0; field < 4; field++) {
		const char *sp = memchr(p, ' ', (size_t)(end - p));
		if (!sp)
			return false;
		p = sp + 1;
	}
	const char *sp = memchr(p, ' ', (size_t)(end - p));
	*mp = p;
	*mlen = (size_t)((sp ? sp : end) - p);
	return true;
}

int ab_ctr_proc_overmounts(const char *text, size_t len, char *out, size_t outlen)
{
	static const char binfmt[] = "/proc/sys/fs/binfmt_misc";
	const char *p = text, *end = text + len;
	int n = 0;
	if (outlen)
		out[0] = '\0';
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *le = nl ? nl : end, *mp;
		size_t ml;
		if (mount_point(p, le, &mp, &ml) && ml > 6 && memcmp(mp, "/proc/", 6) == 0 &&
		    !(ml == sizeof(binfmt) - 1 && memcmp(mp, binfmt, ml) == 0)) {
			size_t used = outlen ? strlen(out) : 0;
			if (outlen && used + (used ? 2 : 0) + ml < outlen)
				snprintf(out + used, outlen - used, "%s%.*s", used ? ", " : "",
					 (int)ml, mp);
			n++;
		}
		p = le + 1;
	}
	return n;
}

/* Is uid_map the identity of the initial namespace ("0 0 4294967295")? */
static int own_userns(void)
{
	char buf[256];
	unsigned long a, b, c;
	if (ab_read_small("/proc/self/uid_map", buf, sizeof(buf)) <= 0)
		return AB_UNKNOWN;
	const char *nl = strchr(buf, '\n');
	bool one_line = !nl || nl[1] == '\0';
	if (one_line && sscanf(buf, "%lu %lu %lu", &a, &b, &c) == 3 && a == 0 && b == 0 &&
	    c == 4294967295UL)
		return AB_NO;
	return AB_YES;
}

void ab_ctr_detect(ab_ctr_facts *f, bool root)
{
	memset(f, 0, sizeof(*f));
	f->root = root;
	_cleanup_free_ char *buf = malloc(CTR_FILE_MAX);
	ssize_t n = buf ? ab_read_small("/proc/self/cgroup", buf, CTR_FILE_MAX) : -1;
	f->engine = ab_ctr_engine_of(access("/run/.containerenv", F_OK) == 0,
				     access("/.dockerenv", F_OK) == 0, getenv("container"),
				     getenv("KUBERNETES_SERVICE_HOST"), n > 0 ? buf : NULL,
				     n > 0 ? (size_t)n : 0);
	f->userns = own_userns();
	char ys[16];
	f->yama_scope = ab_read_small("/proc/sys/kernel/yama/ptrace_scope", ys, sizeof(ys)) > 0
				? atoi(ys)
				: -1;
	n = buf ? ab_read_small("/proc/self/mountinfo", buf, CTR_FILE_MAX) : -1;
	if (n > 0)
		ab_ctr_proc_overmounts(buf, (size_t)n, f->proc_overmounts,
				       sizeof(f->proc_overmounts));
}

/* ---- advice ---- */

/* The engine's flag that loads agentbox's seccomp profile. */
static void seccomp_fix(const ab_ctr_facts *f, const char *why, char *fix, size_t flen)
{
	switch (f->engine) {
	case AB_ENGINE_PODMAN:
		snprintf(fix, flen,
			 "start the container with --security-opt seccomp=" PROFILES
			 "/podman-seccomp.json (podman's default plus %s); not "
			 "seccomp=unconfined, --cap-add SYS_ADMIN or --privileged",
			 why);
		break;
	case AB_ENGINE_DOCKER:
		snprintf(fix, flen,
			 "start the container with --security-opt seccomp=" PROFILES
			 "/docker-seccomp.json (Docker's default plus %s); not "
			 "seccomp=unconfined, --cap-add SYS_ADMIN or --privileged",
			 why);
		break;
	case AB_ENGINE_KUBERNETES:
		snprintf(
			fix, flen,
			"give the pod agentbox's profile: securityContext.seccompProfile "
			"{type: Localhost, localhostProfile: docker-seccomp.json} copied from " PROFILES
			" to each node's kubelet seccomp directory (it adds %s)",
			why);
		break;
	default:
		snprintf(fix, flen,
			 "let agentbox's process make that call (%s): if a container engine or "
			 "service filters it, allow it there (see " PROFILES ")",
			 why);
	}
}

/* Who refuses `step`: podman's default profile gates sethostname alone on
 * CAP_SYS_ADMIN (it allows the rest); Docker's gates all of them. */
static const char *engine_filter(const ab_ctr_facts *f, int step)
{
	switch (f->engine) {
	case AB_ENGINE_PODMAN:
		return step == AB_STEP_SETHOSTNAME ? "podman's default seccomp profile"
						   : "the container's seccomp profile (podman's "
						     "default allows the call)";
	case AB_ENGINE_DOCKER: return "Docker's default seccomp profile";
	case AB_ENGINE_KUBERNETES: return "the pod's seccomp profile (RuntimeDefault)";
	default: return "a seccomp filter or security module around agentbox";
	}
}

/* Docker's and Kubernetes' default profiles allow these calls only with a
 * capability; elsewhere the filter is not one we know. */
static bool gated(const ab_ctr_facts *f)
{
	return f->engine == AB_ENGINE_DOCKER || f->engine == AB_ENGINE_KUBERNETES;
}

static void advise_userns(const ab_ctr_facts *f, char *cause, size_t clen, char *fix, size_t flen)
{
	snprintf(cause, clen, "%s %s new namespaces (clone/unshare with namespace flags, setns)%s",
		 engine_filter(f, AB_STEP_USERNS), gated(f) ? "allows" : "refuses",
		 gated(f) ? " only with CAP_SYS_ADMIN" : "");
	seccomp_fix(f, "the namespace, mount and keyring calls agentbox needs", fix, flen);
}

static void advise_proc(const ab_ctr_facts *f, char *cause, size_t clen, char *fix, size_t flen)
{
	snprintf(cause, clen,
		 "the kernel refuses a fresh /proc while the outer /proc has mounts over its "
		 "files (%s): \"Mount too revealing\" in the kernel log",
		 f->proc_overmounts[0] ? f->proc_overmounts : "not readable here");
	if (f->engine == AB_ENGINE_NONE || f->engine == AB_ENGINE_OTHER) {
		snprintf(fix, flen,
			 "run agentbox where /proc has nothing mounted over it, or unmount those "
			 "in the mount namespace agentbox starts in");
		return;
	}
	if (f->root && f->userns != AB_YES) {
		snprintf(fix, flen,
			 "run agentbox as a non-root container user (--user, USER in the "
			 "Dockerfile) or in a user-namespaced container (podman --userns=auto, "
			 "Docker userns-remap, Kubernetes hostUsers: false), then unmask /proc. "
			 "Never unmask /proc for container root without a user namespace: it "
			 "can write /proc/sys/kernel/core_pattern, which is host root");
		return;
	}
	snprintf(fix, flen, "%s (safe here: %s)",
		 f->engine == AB_ENGINE_PODMAN   ? "start the container with --security-opt "
						   "unmask=/proc/*"
		 : f->engine == AB_ENGINE_DOCKER ? "start the container with --security-opt "
						   "systempaths=unconfined"
						 : "set securityContext.procMount: Unmasked "
						   "(with hostUsers: false)",
		 f->root ? "the container has its own user namespace"
			 : "agentbox runs as a non-root user; keep sudo out of the image");
}

static void advise_open_tree(const ab_ctr_facts *f, int errnum, char *cause, size_t clen, char *fix,
			     size_t flen)
{
	if (errnum == EPERM && f->engine != AB_ENGINE_NONE) {
		snprintf(cause, clen,
			 "root in a container lacks CAP_SYS_ADMIN, which an idmapped bind of a "
			 "root-owned workspace needs (or %s refuses open_tree)",
			 engine_filter(f, AB_STEP_OPEN_TREE));
	} else {
		snprintf(cause, clen, "open_tree is refused (%s)",
			 engine_filter(f, AB_STEP_OPEN_TREE));
	}
	snprintf(fix, flen,
		 "run agentbox as a non-root user that owns the workspace (USER in the "
		 "Dockerfile, --user 1000, runAsNonRoot); root needs no idmapped mount then");
}

static bool advise_pidfd(const ab_ctr_facts *f, char *cause, size_t clen, char *fix, size_t flen)
{
	if (f->yama_scope == 3) {
		snprintf(cause, clen, "kernel.yama.ptrace_scope = 3 forbids it");
		snprintf(fix, flen,
			 "a host with kernel.yama.ptrace_scope <= 2 (3 cannot be "
			 "lowered until reboot)");
		return true;
	}
	snprintf(cause, clen, "%s %s%s", engine_filter(f, AB_STEP_PIDFD_GETFD),
		 gated(f) ? "allows pidfd_getfd only with CAP_SYS_PTRACE" : "refuses pidfd_getfd",
		 f->yama_scope < 0 ? " (Yama is not active)" : "");
	seccomp_fix(f, "pidfd_getfd", fix, flen);
	return true;
}

bool ab_ctr_advise(const ab_ctr_facts *f, int step, int errnum, char *cause, size_t clen, char *fix,
		   size_t flen)
{
	cause[0] = fix[0] = '\0';
	bool denied = errnum == EPERM || errnum == EACCES || errnum == ENOSYS;
	if (!denied)
		return false;
	switch (step) {
	case AB_STEP_USERNS:
		if (f->engine == AB_ENGINE_NONE || errnum == ENOSYS)
			return false; /* the host's settings (host.c) */
		advise_userns(f, cause, clen, fix, flen);
		return true;
	case AB_STEP_SETHOSTNAME:
		snprintf(cause, clen, "%s %s", engine_filter(f, step),
			 f->engine == AB_ENGINE_NONE || f->engine == AB_ENGINE_OTHER
				 ? "refuses sethostname"
				 : "allows sethostname only with CAP_SYS_ADMIN");
		seccomp_fix(f, "sethostname", fix, flen);
		return true;
	case AB_STEP_MOUNT:
		snprintf(cause, clen, "%s refuses mount%s", engine_filter(f, step),
			 f->engine == AB_ENGINE_DOCKER ? " (Docker's seccomp and AppArmor profiles "
							 "allow it only with CAP_SYS_ADMIN)"
						       : "");
		seccomp_fix(f, "mount, umount2, pivot_root and the new mount API", fix, flen);
		return true;
	case AB_STEP_PROC: {
		if (errnum != EPERM)
			return false;
		advise_proc(f, cause, clen, fix, flen);
		size_t n = strlen(fix);
		snprintf(
			fix + n, flen - n,
			". Weaker, on purpose only: \"allow_downgrade\": [\"proc-outer\"] in a "
			"profile binds the outer /proc read-only, and the sandbox then lists every "
			"process here with its command line");
		return true;
	}
	case AB_STEP_KEYRING:
		snprintf(cause, clen, "%s refuses keyctl", engine_filter(f, step));
		seccomp_fix(f, "keyctl", fix, flen);
		return true;
	case AB_STEP_OPEN_TREE: advise_open_tree(f, errnum, cause, clen, fix, flen); return true;
	case AB_STEP_PIDFD_GETFD: return advise_pidfd(f, cause, clen, fix, flen);
	default: return false;
	}
}
