/* SPDX-License-Identifier: MIT */
/*
 * Read-only kernel probes (parent process, before clone): ids, user
 * namespaces, Landlock, seccomp, cgroups, TIOCSTI, io_uring, idmapped mounts.
 * Nothing here changes the host; the only child is the optional userns probe,
 * which exits at once.  Also the fake host for tests and the user-namespace
 * error explainer used by `run`.
 */
#include "agentbox/host.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/filter.h>
#include <linux/keyctl.h>
#include <linux/magic.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>

#include "agentbox/cgroup.h"
#include "agentbox/container.h"

#ifndef __NR_landlock_create_ruleset
#define __NR_landlock_create_ruleset 444
#endif
#ifndef LANDLOCK_CREATE_RULESET_VERSION
#define LANDLOCK_CREATE_RULESET_VERSION (1U << 0)
#endif
#ifndef __NR_mount_setattr
#define __NR_mount_setattr 442
#endif
#ifndef SECCOMP_GET_ACTION_AVAIL
#define SECCOMP_GET_ACTION_AVAIL 2
#endif
#ifndef SECCOMP_RET_USER_NOTIF
#define SECCOMP_RET_USER_NOTIF 0x7fc00000U
#endif
#ifndef CGROUP2_SUPER_MAGIC
#define CGROUP2_SUPER_MAGIC 0x63677270
#endif
#ifndef CGROUP_SUPER_MAGIC
#define CGROUP_SUPER_MAGIC 0x27e0eb
#endif
#ifndef EUSERS
#define EUSERS 87
#endif

#define AB_PROBE_FILE_MAX 65536 /* /proc/self/cgroup and controller lists */

/* A sysctl holding one integer; `dflt` if absent or unparsable. */
static long read_sysctl(const char *path, long dflt)
{
	char buf[64], *end;

	if (ab_read_small(path, buf, sizeof(buf)) <= 0)
		return dflt;
	errno = 0;
	long v = strtol(buf, &end, 10);
	if (errno != 0 || end == buf || (*end != '\0' && *end != '\n'))
		return dflt;
	return v;
}

/* Exit codes of the probe child: 0 ok, errno of unshare(CLONE_NEWUSER), or
 * 128 + errno of unshare(CLONE_NEWNS) inside it. */
static int probe_child(void)
{
	if (unshare(CLONE_NEWUSER) < 0)
		return errno > 0 && errno < 128 ? errno : EPERM;
	if (unshare(CLONE_NEWNS) < 0)
		return 128 + (errno > 0 && errno < 127 ? errno : EPERM);
	return 0;
}

static void probe_userns(ab_host *h)
{
	int status;
	pid_t pid = fork();

	if (pid < 0) {
		h->userns_ok = AB_UNKNOWN;
		h->userns_errno = errno;
		return;
	}
	if (pid == 0)
		_exit(probe_child());
	while (waitpid(pid, &status, 0) < 0) {
		if (errno != EINTR) {
			h->userns_ok = AB_UNKNOWN;
			return;
		}
	}
	if (!WIFEXITED(status)) {
		h->userns_ok = AB_UNKNOWN; /* killed (e.g. by an outer seccomp filter) */
		return;
	}
	int code = WEXITSTATUS(status);
	if (code == 0) {
		h->userns_ok = AB_YES;
	} else if (code < 128) {
		h->userns_ok = AB_NO;
		h->userns_errno = code;
	} else {
		h->userns_ok = AB_NO;
		h->userns_nocaps = true;
		h->userns_errno = code - 128;
	}
}

/* Already under a filter (a container): does one of those filters have a
 * notification listener?  A chain holds one at most, so ours would get
 * EBUSY.  Tried in a throwaway child with an allow-everything filter: a
 * light one (CLONE_VFORK), as this runs before every `run` in a container.
 * no_new_privs and the filter are the child's own (per task). */
static int listener_child(void *unused)
{
	static const struct sock_filter allow = BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
	struct sock_fprog prog = {.len = 1, .filter = (struct sock_filter *)&allow};
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return 0;
	long fd = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER,
			  &prog);
	return fd < 0 && errno == EBUSY ? 1 : 0;
}

static bool listener_busy(void)
{
	ab_light l;
	if (ab_light_spawn(&l, listener_child, NULL, CLONE_VFORK) < 0)
		return false;
	int st = ab_light_reap(&l);
	return st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 1;
}

static void probe_seccomp(ab_host *h)
{
	int mode = prctl(PR_GET_SECCOMP, 0, 0, 0, 0);

	if (mode < 0) {
		/* EINVAL: kernel built without CONFIG_SECCOMP. */
		h->seccomp_ok = errno == EINVAL ? AB_NO : AB_UNKNOWN;
		h->seccomp_mode = -1;
		h->seccomp_user_notif = h->seccomp_ok;
		return;
	}
	h->seccomp_ok = AB_YES;
	h->seccomp_mode = mode;

	uint32_t action = SECCOMP_RET_USER_NOTIF;
	if (syscall(SYS_seccomp, SECCOMP_GET_ACTION_AVAIL, 0, &action) == 0)
		h->seccomp_user_notif = AB_YES;
	else if (errno == EOPNOTSUPP || errno == EINVAL || errno == ENOSYS)
		h->seccomp_user_notif = AB_NO;
	else
		h->seccomp_user_notif = AB_UNKNOWN;
	if (mode == 2 && h->seccomp_user_notif == AB_YES && listener_busy()) {
		h->seccomp_user_notif = AB_NO;
		h->seccomp_listener_busy = true;
	}
}

static int cgroup_fs_version(void)
{
	static const char *const v1_dirs[] = {"memory", "pids", "cpu", "systemd"};
	struct statfs sfs;

	if (statfs(AB_CGROUP_ROOT, &sfs) < 0)
		return 0;
	if (sfs.f_type == CGROUP2_SUPER_MAGIC)
		return 2;
	if (sfs.f_type == CGROUP_SUPER_MAGIC)
		return 1;
	if (sfs.f_type != TMPFS_MAGIC)
		return 0;
	/* A tmpfs holding v1 hierarchies (legacy or hybrid layout). */
	for (size_t i = 0; i < AB_ARRAY_SIZE(v1_dirs); i++) {
		char path[64];
		snprintf(path, sizeof(path), AB_CGROUP_ROOT "/%s", v1_dirs[i]);
		if (statfs(path, &sfs) == 0 && sfs.f_type == CGROUP_SUPER_MAGIC)
			return 1;
	}
	return 0;
}

/* Can agentbox create <rel>/agentbox-<pid> with memory and pids limits and
 * move a process from <rel> or one of its children into it?  Only checks. */
static bool cgroup_base_usable(const char *rel)
{
	char dir[PATH_MAX], file[PATH_MAX + 32];
	_cleanup_free_ char *ctl = malloc(4096);

	if (!ctl || snprintf(dir, sizeof(dir), AB_CGROUP_ROOT "%s",
			     strcmp(rel, "/") == 0 ? "" : rel) >= (int)sizeof(dir))
		return false;
	if (access(dir, W_OK) < 0)
		return false;
	snprintf(file, sizeof(file), "%s/cgroup.procs", dir);
	if (access(file, W_OK) < 0)
		return false;
	snprintf(file, sizeof(file), "%s/cgroup.subtree_control", dir);
	if (ab_read_small(file, ctl, 4096) < 0)
		return false;
	return ab_cgroup_list_has(ctl, "memory") && ab_cgroup_list_has(ctl, "pids");
}

static void probe_cgroup(ab_host *h)
{
	char parent[sizeof(h->cgroup_self)];
	_cleanup_free_ char *buf = NULL;

	h->cgroup_version = cgroup_fs_version();
	h->cgroup_delegated = AB_UNKNOWN;
	if (h->cgroup_version == 1)
		h->cgroup_delegated = AB_NO;
	if (h->cgroup_version != 2)
		return;
	buf = malloc(AB_PROBE_FILE_MAX);
	if (!buf)
		return;
	ssize_t n = ab_read_small("/proc/self/cgroup", buf, AB_PROBE_FILE_MAX);
	if (n < 0 ||
	    ab_cgroup_parse_self(buf, (size_t)n, h->cgroup_self, sizeof(h->cgroup_self)) < 0)
		return;
	h->cgroup_delegated = AB_NO;
	if (cgroup_base_usable(h->cgroup_self)) {
		snprintf(h->cgroup_path, sizeof(h->cgroup_path), "%s", h->cgroup_self);
		h->cgroup_delegated = AB_YES;
	} else if (ab_cgroup_parent_path(h->cgroup_self, parent, sizeof(parent)) == 0 &&
		   cgroup_base_usable(parent)) {
		snprintf(h->cgroup_path, sizeof(h->cgroup_path), "%s", parent);
		h->cgroup_delegated = AB_YES;
	}
}

static int probe_cap_last_cap(void)
{
	long v = read_sysctl("/proc/sys/kernel/cap_last_cap", -1);

	if (v >= 0 && v < 64)
		return (int)v;
	/* /proc not readable: ask the bounding set which numbers exist. */
	int c = 0;
	while (c < 63 && prctl(PR_CAPBSET_READ, c + 1, 0, 0, 0) >= 0)
		c++;
	return c;
}

static int probe_idmap(void)
{
	/* usize 0 is invalid: a kernel that has the syscall says EINVAL (or
	 * EBADF), one that lacks it ENOSYS.  Anything else (EPERM from an
	 * outer seccomp filter) leaves it unknown. */
	if (syscall(__NR_mount_setattr, -1, "", 0, NULL, 0) == 0)
		return AB_YES;
	if (errno == ENOSYS)
		return AB_NO;
	if (errno == EINVAL || errno == EBADF || errno == E2BIG || errno == EFAULT)
		return AB_YES;
	return AB_UNKNOWN;
}

/* A read-only keyctl call: EPERM/EACCES from an outer filter (or ENOSYS:
 * no key management in the kernel) refuses the whole family to agentbox and,
 * filters being inherited, to the sandbox. */
static int probe_keyctl(void)
{
	if (syscall(SYS_keyctl, KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING, 0) >= 0)
		return 0;
	return errno == EPERM || errno == EACCES || errno == ENOSYS ? errno : 0;
}

void ab_host_probe(ab_host *h, bool try_userns)
{
	struct utsname u;

	memset(h, 0, sizeof(*h));
	h->uid = getuid();
	h->euid = geteuid();
	h->gid = getgid();
	h->egid = getegid();
	h->is_root = h->euid == 0;

	h->userns_ok = AB_UNKNOWN;
	if (try_userns) {
		probe_userns(h);
		ab_ctr_detect(&h->ctr, h->is_root);
		ab_ctr_trial_run(&h->trial, h->is_root);
		h->trial_done = true;
	}
	h->apparmor_restrict_userns =
		(int)read_sysctl("/proc/sys/kernel/apparmor_restrict_unprivileged_userns", -1);
	h->unprivileged_userns_clone =
		(int)read_sysctl("/proc/sys/kernel/unprivileged_userns_clone", -1);
	h->max_user_namespaces = read_sysctl("/proc/sys/user/max_user_namespaces", -1);

	long abi = syscall(__NR_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
	h->landlock_abi = abi > 0 && abi < INT_MAX ? (int)abi : 0;
	h->landlock_errno = abi > 0 ? 0 : (abi < 0 ? errno : EINVAL);

	probe_seccomp(h);
	h->container = (access("/.dockerenv", F_OK) == 0 ||
			access("/run/.containerenv", F_OK) == 0 || getenv("container"))
			       ? AB_YES
			       : AB_NO;
	probe_cgroup(h);

	h->legacy_tiocsti = (int)read_sysctl("/proc/sys/dev/tty/legacy_tiocsti", -1);
	h->io_uring_disabled = (int)read_sysctl("/proc/sys/kernel/io_uring_disabled", -1);
	h->idmap_mounts = probe_idmap();
	h->keyctl_errno = probe_keyctl();
	h->fresh_proc = AB_UNKNOWN;
	h->cap_last_cap = probe_cap_last_cap();
	for (int i = 0; i < (int)AB_ARRAY_SIZE(h->rlim_hard); i++) {
		struct rlimit rl;
		h->rlim_hard[i] = getrlimit(i, &rl) == 0 ? rl.rlim_max : RLIM_INFINITY;
	}
	struct rlimit ml;
	h->memlock = getrlimit(RLIMIT_MEMLOCK, &ml) == 0 && ml.rlim_cur != RLIM_INFINITY &&
				     ml.rlim_cur < (rlim_t)LLONG_MAX
			     ? (long long)ml.rlim_cur
			     : -1;
	if (uname(&u) == 0)
		snprintf(h->kernel_release, sizeof(h->kernel_release), "%s", u.release);
}

void ab_host_fake(ab_host *h, int landlock_abi)
{
	memset(h, 0, sizeof(*h));
	h->uid = h->euid = 1000;
	h->gid = h->egid = 1000;
	h->is_root = false;
	h->userns_ok = AB_YES;
	h->apparmor_restrict_userns = -1;
	h->unprivileged_userns_clone = -1;
	h->max_user_namespaces = 63000;
	h->landlock_abi = landlock_abi;
	h->landlock_errno = landlock_abi > 0 ? 0 : EOPNOTSUPP;
	h->seccomp_ok = AB_YES;
	h->seccomp_user_notif = AB_YES;
	h->seccomp_mode = 0;
	h->container = AB_NO;
	h->cgroup_version = 2;
	h->cgroup_delegated = AB_YES;
	snprintf(h->cgroup_self, sizeof(h->cgroup_self),
		 "/user.slice/user-1000.slice/user@1000.service/app.slice/test.scope");
	snprintf(h->cgroup_path, sizeof(h->cgroup_path),
		 "/user.slice/user-1000.slice/user@1000.service/app.slice");
	h->legacy_tiocsti = 0;
	h->io_uring_disabled = 0;
	h->idmap_mounts = AB_YES;
	h->fresh_proc = AB_YES;
	h->cap_last_cap = 40;
	h->memlock = 8ll << 20;
	for (size_t i = 0; i < AB_ARRAY_SIZE(h->rlim_hard); i++)
		h->rlim_hard[i] = RLIM_INFINITY;
	snprintf(h->kernel_release, sizeof(h->kernel_release), "6.12.0-fake");
	h->trial_done = true;
	h->trial.step = AB_STEP_NONE;
	h->trial.open_tree_errno = -1;
	h->ctr.engine = AB_ENGINE_NONE;
	h->ctr.userns = AB_NO;
	h->ctr.yama_scope = -1;
}

/* ---- why user namespaces fail ---- */

/* The path an AppArmor profile must attach to: this binary, if it is a
 * plain path that is safe inside a single-quoted printf format. */
static void self_exe(char *buf, size_t len)
{
	ssize_t n = readlink("/proc/self/exe", buf, len - 1);
	bool plain = n > 1 && n < 160 && buf[0] == '/';

	for (ssize_t i = 0; plain && i < n; i++) {
		char c = buf[i];
		plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			(c >= '0' && c <= '9') || c == '/' || c == '.' || c == '_' || c == '-' ||
			c == '+';
	}
	if (plain)
		buf[n] = '\0';
	else
		snprintf(buf, len, "/usr/local/bin/agentbox");
}

static void hint_apparmor(ab_err *err)
{
	char exe[PATH_MAX];

	self_exe(exe, sizeof(exe));
	ab_err_hint(err,
		    "allow agentbox to use user namespaces with an AppArmor profile:\n"
		    "  printf 'abi <abi/4.0>,\\ninclude <tunables/global>\\nprofile agentbox %s "
		    "flags=(unconfined) {\\n  userns,\\n}\\n' | sudo tee /etc/apparmor.d/agentbox\n"
		    "  sudo apparmor_parser -r /etc/apparmor.d/agentbox\n"
		    "or lift the restriction for every program (less safe): "
		    "sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0",
		    exe);
}

#define USERNS_WHAT "cannot set up the sandbox's user namespace"

/* Host-wide settings that forbid user namespaces.  true if one matched. */
static bool userns_error_sysctl(const ab_host *h, int errnum, ab_err *err)
{
	if (h->max_user_namespaces == 0) {
		ab_fail(err, errnum,
			USERNS_WHAT ": user namespaces are disabled on this host "
				    "(user.max_user_namespaces = 0)");
		ab_err_hint(err, "enable them: sudo sysctl -w user.max_user_namespaces=15000 "
				 "(add the setting to /etc/sysctl.d/ to keep it after a reboot)");
	} else if (errnum == ENOSPC || errnum == EUSERS) {
		char cur[64] = "";
		if (h->max_user_namespaces > 0)
			snprintf(cur, sizeof(cur), " = %ld here", h->max_user_namespaces);
		ab_fail(err, errnum,
			USERNS_WHAT ": the limit on user namespaces is reached "
				    "(user.max_user_namespaces%s, the limit of an enclosing "
				    "namespace, or 32 nested levels)",
			cur);
		ab_err_hint(err,
			    "if agentbox runs inside another sandbox (a container, bwrap "
			    "--disable-userns), that one forbids nesting: run agentbox outside "
			    "it; otherwise raise the limit: sudo sysctl -w "
			    "user.max_user_namespaces=15000");
	} else if (!h->is_root && h->unprivileged_userns_clone == 0) {
		ab_fail(err, errnum,
			USERNS_WHAT ": unprivileged user namespaces are disabled "
				    "(kernel.unprivileged_userns_clone = 0)");
		ab_err_hint(err, "sudo sysctl -w kernel.unprivileged_userns_clone=1 (to keep it: "
				 "echo kernel.unprivileged_userns_clone=1 | sudo tee "
				 "/etc/sysctl.d/90-agentbox-userns.conf)");
	} else if (!h->is_root && h->apparmor_restrict_userns == 1) {
		ab_fail(err, errnum,
			USERNS_WHAT ": AppArmor restricts unprivileged user "
				    "namespaces (kernel.apparmor_restrict_unprivileged_userns = "
				    "1, Ubuntu 23.10 and later)");
		hint_apparmor(err);
	} else {
		return false;
	}
	return true;
}

void ab_host_userns_error(const ab_host *h, int errnum, ab_err *err)
{
	if (errnum <= 0)
		errnum = h->userns_errno > 0 ? h->userns_errno : EPERM;
	if (userns_error_sysctl(h, errnum, err))
		return;
	ab_ctr_facts f;
	char cause[512], fix[sizeof(err->hint)];
	if (errnum == EPERM && h->container == AB_YES) {
		if (h->trial_done)
			f = h->ctr; /* doctor (and tests) */
		else
			ab_ctr_detect(&f, h->is_root);
		if (f.engine == AB_ENGINE_NONE)
			f.engine = AB_ENGINE_OTHER;
	}
	if (errnum == EPERM && h->container == AB_YES &&
	    ab_ctr_advise(&f, AB_STEP_USERNS, errnum, cause, sizeof(cause), fix, sizeof(fix))) {
		ab_fail(err, errnum, USERNS_WHAT ": %s", cause);
		ab_err_hint(err, "%s", fix);
	} else if (errnum == EPERM && h->seccomp_mode == 2) {
		ab_fail(err, errnum,
			USERNS_WHAT
			": agentbox itself runs under a seccomp filter "
			"(Seccomp: 2 in /proc/self/status) that forbids new namespaces");
		ab_err_hint(err,
			    "start agentbox from a process that is not seccomp-filtered (for a "
			    "systemd service: no RestrictNamespaces=, SystemCallFilter= allowing "
			    "unshare/clone)");
	} else if (errnum == EINVAL) {
		ab_fail(err, errnum, USERNS_WHAT ": this kernel has no user namespace support");
		ab_err_hint(err, "use a kernel built with CONFIG_USER_NS=y");
	} else if (errnum == EPERM && h->userns_nocaps) {
		ab_fail(err, errnum,
			USERNS_WHAT ": it was created but grants no capabilities "
				    "(a security module policy restricts user namespaces)");
		ab_err_hint(err,
			    "look for a denial in the kernel log: sudo journalctl -k | grep -i "
			    "-e denied -e userns; run `agentbox doctor`");
	} else if (errnum == EPERM) {
		ab_fail(err, errnum,
			USERNS_WHAT ": the kernel refused (a security module such as "
				    "SELinux or AppArmor, or a chroot, may forbid it)");
		ab_err_hint(err, "run `agentbox doctor`; look for a denial in the kernel log: "
				 "sudo journalctl -k | grep -i -e denied -e userns");
	} else {
		ab_fail(err, errnum, USERNS_WHAT);
		ab_err_hint(err, "run `agentbox doctor` for a diagnosis of this host");
	}
}
