/* SPDX-License-Identifier: MIT */
/*
 * test-escape probes of processes and privileges: CTL-05 (positive
 * control: fork, exec, threads, pipes work), PRC-01 (the gate: the
 * sandbox's posture), PRC-02 (signals outside, set-id programs, raising
 * capabilities or ids) and PRC-04 (ptrace, process_vm_readv and /proc of
 * processes outside) (docs/test-escape.md).
 *
 * Runs INSIDE the sandbox, in the probe's own forked child (runner.c).
 * Every attempt is real and harmless: signal 0 only, ptrace attaches that
 * detach at once, set-id programs run with arguments that only print;
 * anything that could change this process runs in a forked sub-child
 * (psys_sub_run, probe_sysutil.h) that exits at once.  Canary values are
 * never printed: bytes read go through ab_pr_scan.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "agentbox/escape.h"
#include "probe_sysutil.h"

#define EXEC_TIMEOUT_MS 300 /* creds are set once exec returned; --help exits at once */

/* ------------------------------------------------------------------ */
/* CTL-05                                                             */
/* ------------------------------------------------------------------ */

static void *thread_fn(void *arg)
{
	*(int *)arg = 42;
	return arg;
}

static int wait_status(pid_t pid)
{
	int st;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 256 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

static void ctl_expect(ab_probe_run *r, const char *what, bool ok, const char *detail)
{
	if (ok)
		ab_pr_ok(r, what, "works");
	else
		ab_pr_error(r, what, "failed: %s", detail);
}

static int spawn_status(char *const argv[])
{
	pid_t pid = fork();
	if (pid == 0) {
		char *envp[] = {"PATH=/usr/bin:/bin", NULL};
		execve(argv[0], argv, envp);
		_exit(127);
	}
	return pid < 0 ? -1 : wait_status(pid);
}

/* Pipe round trip through a forked child, and the same over a socketpair. */
static bool echo_child(int rfd, int wfd, int close1, int close2)
{
	pid_t pid = fork();
	if (pid == 0) {
		close(close1);
		close(close2);
		char b[16];
		ssize_t k = read(rfd, b, sizeof(b));
		_exit(k > 0 && write(wfd, b, (size_t)k) == k ? 0 : 1);
	}
	return pid > 0;
}

static bool round_trip(bool sockets)
{
	int a[2], b[2];
	bool ok = false;
	if (sockets) {
		if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, a) < 0)
			return false;
		b[0] = a[0], b[1] = a[1];
	} else if (pipe2(a, O_CLOEXEC) < 0) {
		return false;
	} else if (pipe2(b, O_CLOEXEC) < 0) {
		close(a[0]);
		close(a[1]);
		return false;
	}
	/* pipes: parent writes a[1], child reads a[0], writes b[1], parent reads b[0] */
	int crd = sockets ? a[1] : a[0], cwr = sockets ? a[1] : b[1];
	int pwr = sockets ? a[0] : a[1], prd = sockets ? a[0] : b[0];
	if (echo_child(crd, cwr, pwr, prd)) {
		char got[16] = {0};
		ok = write(pwr, "abprobe", 7) == 7 && read(prd, got, sizeof(got) - 1) == 7 &&
		     memcmp(got, "abprobe", 7) == 0;
		wait(NULL);
	}
	close(a[0]);
	close(a[1]);
	if (!sockets) {
		close(b[0]);
		close(b[1]);
	}
	return ok;
}

/* CTL-05 (control): fork+wait (exit status passes); exec /bin/true; exec
 * /bin/sh -c 'exit 7'; posix_spawn; pthread create/join (glibc tries clone3
 * first: ENOSYS must fall back to clone); pipe and AF_UNIX socketpair round
 * trips through a child; SIGTERM to an own child (Landlock signal scope must
 * allow it).  Each must work, else ERROR. */
void ab_probe_ctl05(ab_probe_run *r)
{
	pid_t pid = fork();
	if (pid == 0)
		_exit(42);
	ctl_expect(r, "fork + waitpid", pid > 0 && wait_status(pid) == 42, "no exit status 42");

	char *t[] = {"/bin/true", NULL};
	ctl_expect(r, "exec /bin/true", spawn_status(t) == 0, "exit status not 0");
	char *sh[] = {"/bin/sh", "-c", "exit 7", NULL};
	ctl_expect(r, "exec /bin/sh -c 'exit 7'", spawn_status(sh) == 7, "exit status not 7");

	char *envp[] = {"PATH=/usr/bin:/bin", NULL};
	pid_t sp;
	int e = posix_spawn(&sp, "/bin/true", NULL, NULL, t, envp);
	ctl_expect(r, "posix_spawn /bin/true", e == 0 && wait_status(sp) == 0, psys_ename(e));

	pthread_t th;
	int val = 0;
	void *ret = NULL;
	e = pthread_create(&th, NULL, thread_fn, &val);
	if (e == 0)
		e = pthread_join(th, &ret);
	ctl_expect(r, "pthread_create + pthread_join", e == 0 && val == 42 && ret == &val,
		   e ? psys_ename(e) : "thread did not run");

	ctl_expect(r, "pipe round trip through a child", round_trip(false), "no echo");
	ctl_expect(r, "AF_UNIX socketpair round trip through a child", round_trip(true), "no echo");

	pid = fork();
	if (pid == 0) {
		pause();
		_exit(0);
	}
	bool killed = pid > 0 && kill(pid, SIGTERM) == 0 && wait_status(pid) == 256 + SIGTERM;
	ctl_expect(r, "SIGTERM to an own child", killed, "not delivered");
}

/* ------------------------------------------------------------------ */
/* PRC-01                                                             */
/* ------------------------------------------------------------------ */

struct posture {
	bool caps_zero, nnp, seccomp, map_initial;
	json_t *rep;
};

static const char *status_field(const char *st, const char *name)
{
	char key[32];
	snprintf(key, sizeof(key), "\n%s:", name);
	const char *p = strstr(st, key);
	return p ? p + strlen(key) : NULL;
}

static void posture_status(ab_probe_run *r, struct posture *ps)
{
	static const char *const caps[] = {"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"};
	char st[PSYS_SMALL], what[64];
	st[0] = '\n';
	if (psys_read_small("/proc/self/status", st + 1, sizeof(st) - 1) < 0) {
		ab_pr_error(r, "read /proc/self/status", "%s", psys_ename(errno));
		return;
	}
	ps->caps_zero = true;
	for (size_t i = 0; i < AB_ARRAY_SIZE(caps); i++) {
		const char *v = status_field(st, caps[i]);
		snprintf(what, sizeof(what), "%s is zero", caps[i]);
		if (!v) {
			ab_pr_error(r, what, "no %s line", caps[i]);
			continue;
		}
		unsigned long long c = strtoull(v, NULL, 16);
		json_object_set_new(ps->rep, caps[i], json_sprintf("%016llx", c));
		if (c) {
			ps->caps_zero = false;
			ab_pr_escaped(r, what, "%s = %016llx", caps[i], c);
		} else {
			ab_pr_ok(r, what, "0");
			ab_pr_layer(r, "capabilities");
		}
	}
	const char *nnp = status_field(st, "NoNewPrivs"), *sc = status_field(st, "Seccomp");
	const char *nf = status_field(st, "Seccomp_filters");
	long n = nnp ? strtol(nnp, NULL, 10) : -1, s = sc ? strtol(sc, NULL, 10) : -1;
	long f = nf ? strtol(nf, NULL, 10) : -1;
	ps->nnp = n == 1;
	ps->seccomp = s == 2;
	json_object_set_new(ps->rep, "no_new_privs", json_integer(n));
	json_object_set_new(ps->rep, "seccomp", json_integer(s));
	json_object_set_new(ps->rep, "seccomp_filters", json_integer(f));
	if (ps->nnp)
		ab_pr_ok(r, "NoNewPrivs is 1", "1");
	else
		ab_pr_escaped(r, "NoNewPrivs is 1", "NoNewPrivs %ld", n);
	if (ps->seccomp && prctl(PR_GET_SECCOMP) == 2)
		ab_pr_ok(r, "Seccomp is 2 (filter)", "2, %ld filters", f);
	else
		ab_pr_escaped(r, "Seccomp is 2 (filter)", "Seccomp %ld", s);
	if (ps->seccomp)
		ab_pr_layer(r, "seccomp");
}

/* One line, one id, not the caller's root: "I O 1". */
static void posture_map(ab_probe_run *r, struct posture *ps, const char *file)
{
	char path[64], buf[1024], what[96], shown[256];
	snprintf(path, sizeof(path), "/proc/self/%s", file);
	snprintf(what, sizeof(what), "%s is one unprivileged id", file);
	if (psys_read_small(path, buf, sizeof(buf)) < 0) {
		ab_pr_error(r, what, "%s", psys_ename(errno));
		return;
	}
	psys_printable(buf, strlen(buf), shown, sizeof(shown));
	json_object_set_new(ps->rep, file, json_string(shown));
	unsigned long in = 0, out = 0, cnt = 0, total = 0;
	int lines = 0, off = 0, used;
	bool root = false;
	while (sscanf(buf + off, "%lu %lu %lu%n", &in, &out, &cnt, &used) == 3) {
		off += used;
		lines++;
		total += cnt;
		root |= out == 0;
	}
	if (lines == 1 && in == 0 && out == 0 && cnt == 4294967295UL) {
		if (file[0] == 'u')
			ps->map_initial = true;
		ab_pr_escaped(r, what, "the initial map (no user namespace)");
	} else if (lines != 1 || total != 1) {
		ab_pr_escaped(r, what, "%d lines, %lu ids mapped", lines, total);
	} else if (root) {
		ab_pr_escaped(r, what, "maps to id 0 of the parent user namespace");
	} else {
		ab_pr_ok(r, what, "%lu -> %lu", in, out);
		ab_pr_layer(r, "user-ns");
	}
}

static void posture_groups(ab_probe_run *r, struct posture *ps)
{
	gid_t g[256];
	int n = getgroups(256, g);
	char buf[32];
	long overflow = 65534;
	if (psys_read_small("/proc/sys/kernel/overflowgid", buf, sizeof(buf)) > 0)
		overflow = strtol(buf, NULL, 10);
	if (n < 0) {
		ab_pr_error(r, "getgroups", "%s", psys_ename(errno));
		return;
	}
	json_t *a = json_array();
	int bad = 0;
	gid_t first = 0;
	for (int i = 0; i < n; i++) {
		json_array_append_new(a, json_integer(g[i]));
		if (g[i] != getgid() && g[i] != getegid() && (long)g[i] != overflow && !bad++)
			first = g[i];
	}
	json_object_set_new(ps->rep, "groups", a);
	if (bad)
		ab_pr_escaped(r, "no supplementary groups", "%d other groups (first %u)", bad,
			      (unsigned)first);
	else
		ab_pr_ok(r, "no supplementary groups", "%d groups, none privileged", n);
}

/* Landlock: the ABI, then two denials only Landlock makes here. */
static void posture_landlock(ab_probe_run *r, struct posture *ps)
{
	long abi = syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
	json_object_set_new(ps->rep, "landlock_abi", json_integer(abi < 0 ? 0 : abi));
	if (abi < 0) {
		ab_pr_escaped(r, "Landlock available", "%s: no Landlock layer", psys_ename(errno));
		return;
	}
	/* truncate(2) of an own /proc file: DAC and the rw /proc mount allow
	 * it (a no-op for procfs); the sandbox's /proc rule grants no TRUNCATE. */
	const char *w = "Landlock enforced: truncate /proc/self/comm";
	if (abi < 3) {
		ab_pr_ok(r, w, "ABI %ld: TRUNCATE not handled, not verifiable from inside", abi);
	} else if (truncate("/proc/self/comm", 0) == 0) {
		ab_pr_escaped(r, w, "allowed: no Landlock domain restricts /proc");
	} else if (errno == EACCES) {
		ab_pr_sys(r, w, -1, EACCES);
	} else {
		ab_pr_error(r, w, "inconclusive (%s)", psys_ename(errno));
	}
	/* TCP connect to an own listener on an unlisted loopback port. */
	w = "Landlock enforced: TCP connect to an own loopback listener";
	int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t al = sizeof(a);
	struct timeval tv = {1, 0};
	if (abi < 4) {
		ab_pr_ok(r, w, "ABI %ld: TCP not handled, not verifiable from inside", abi);
	} else if (l < 0 || c < 0 || bind(l, (struct sockaddr *)&a, sizeof(a)) < 0 ||
		   listen(l, 1) < 0 || getsockname(l, (struct sockaddr *)&a, &al) < 0) {
		ab_pr_error(r, w, "no listener (%s)", psys_ename(errno));
	} else {
		setsockopt(c, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
		if (connect(c, (struct sockaddr *)&a, sizeof(a)) == 0)
			ab_pr_ok(r, w, "connected: TCP not restricted (profile allows loopback)");
		else
			ab_pr_sys(r, w, -1, errno);
	}
	if (l >= 0)
		close(l);
	if (c >= 0)
		close(c);
}

/* PRC-01 (gate): /proc/self/status CapInh/CapPrm/CapEff/CapBnd/CapAmb zero,
 * NoNewPrivs 1, Seccomp 2 (and PR_GET_SECCOMP); uid_map and gid_map one line
 * mapping one id, not to id 0; getgroups has only the primary and overflow
 * gid; a raw socket fails (CAP_NET_RAW); Landlock ABI, and Landlock enforced:
 * truncate(/proc/self/comm) EACCES, TCP connect to an own listener EACCES.
 * Reports "sandboxed": false only when nothing at all is in effect. */
void ab_probe_prc01(ab_probe_run *r)
{
	struct posture ps = {false, false, false, false, json_object()};
	posture_status(r, &ps);
	posture_map(r, &ps, "uid_map");
	posture_map(r, &ps, "gid_map");
	posture_groups(r, &ps);
	int s = socket(AF_INET, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_ICMP);
	int e = errno;
	if (s >= 0)
		close(s);
	ab_pr_sys(r, "socket(AF_INET, SOCK_RAW) needs CAP_NET_RAW", s, e);
	if (s < 0)
		ab_pr_layer(r, "capabilities");
	posture_landlock(r, &ps);
	char buf[64];
	if (psys_read_small("/proc/self/setgroups", buf, sizeof(buf)) > 0) {
		buf[strcspn(buf, "\n")] = '\0';
		json_object_set_new(ps.rep, "setgroups", json_string(buf));
	}
	json_object_set_new(ps.rep, "uid", json_integer(getuid()));
	json_object_set_new(ps.rep, "gid", json_integer(getgid()));
	bool none = !ps.seccomp && !ps.nnp && !ps.caps_zero && ps.map_initial;
	ab_pr_report(r, "posture", ps.rep);
	ab_pr_report(r, "sandboxed", json_boolean(!none));
}

/* ------------------------------------------------------------------ */
/* PRC-02                                                             */
/* ------------------------------------------------------------------ */

/* The lab's host pids: visible (signal 0) means outside is reachable. */
static void signal_outside(ab_probe_run *r, pid_t pid, const char *name)
{
	char what[96];
	if (pid <= 0)
		return;
	snprintf(what, sizeof(what), "kill(%s pid %d, 0)", name, (int)pid);
	int k = kill(pid, 0), e = errno;
	if (k == 0 && (pid == 1 || psys_pid_is_ours(pid))) { /* 1: the sandbox's init */
		ab_pr_ok(r, what, "that pid is a process of this sandbox (reuse), not signalled");
		return;
	}
	ab_pr_sys(r, what, k, e);
	if (k < 0)
		psys_layer_for(r, e, EPERM, "permissions (another uid)", ESRCH, "pid-ns");
	snprintf(what, sizeof(what), "pidfd_open(%s pid %d)", name, (int)pid);
	long fd = syscall(SYS_pidfd_open, pid, 0);
	e = errno;
	if (fd >= 0)
		close((int)fd);
	if (!(fd >= 0 && (pid == 1 || psys_pid_is_ours(pid))))
		ab_pr_sys(r, what, fd, e);
}

struct setid_prog {
	const char *path, *arg;
};

/* Fork and exec the program (its stdio on /dev/null): the child's pid, or
 * -1 after recording why it did not run (the exec's errno comes back
 * through a close-on-exec pipe). */
static pid_t setid_spawn(ab_probe_run *r, const char *what, const struct setid_prog *p)
{
	int ep[2];
	if (pipe2(ep, O_CLOEXEC) < 0) {
		ab_pr_error(r, what, "pipe: %s", psys_ename(errno));
		return -1;
	}
	pid_t pid = fork();
	if (pid == 0) {
		int nul = open("/dev/null", O_RDWR);
		for (int fd = 0; fd < 3; fd++) /* never the user's terminal */
			nul >= 0 ? dup2(nul, fd) : close(fd);
		char *argv[] = {(char *)p->path, (char *)p->arg, NULL};
		char *envp[] = {"PATH=/usr/bin:/bin", "LANG=C", NULL};
		execve(p->path, argv, envp);
		int e = errno;
		(void)!write(ep[1], &e, sizeof(e));
		_exit(127);
	}
	close(ep[1]);
	int e = 0;
	bool failed = pid > 0 && read(ep[0], &e, sizeof(e)) == sizeof(e);
	close(ep[0]);
	if (pid < 0 || failed) {
		if (pid > 0)
			wait_status(pid);
		ab_pr_sys(r, what, -1, pid < 0 ? errno : e);
		return -1;
	}
	return pid;
}

/* The child's /proc status, read once it is a zombie (or after
 * EXEC_TIMEOUT_MS) so its creds are those the exec gave; then it is killed
 * and reaped.  st[0] is a newline for status_field; the bytes read, or -1. */
static ssize_t setid_status(pid_t pid, char *st, size_t n)
{
	char path[64];
	siginfo_t si;
	for (int i = 0; i < EXEC_TIMEOUT_MS / 10; i++) {
		memset(&si, 0, sizeof(si));
		if (waitid(P_PID, pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid == pid)
			break;
		usleep(10000);
	}
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	st[0] = '\n';
	st[1] = '\0';
	ssize_t got = psys_read_small(path, st + 1, n - 1);
	kill(pid, SIGKILL);
	wait_status(pid);
	return got;
}

/* Exec a set-id program; its creds must be the caller's, without capabilities. */
static void exec_setid(ab_probe_run *r, const struct setid_prog *p)
{
	char what[160], st[PSYS_SMALL], name[32];
	snprintf(what, sizeof(what), "exec set-id %s %s: no elevation", p->path,
		 p->arg ? p->arg : "");
	pid_t pid = setid_spawn(r, what, p);
	if (pid < 0)
		return;
	ssize_t n = setid_status(pid, st, sizeof(st));
	const char *nm = status_field(st, "Name"), *uid = status_field(st, "Uid");
	const char *gid = status_field(st, "Gid"), *ce = status_field(st, "CapEff");
	const char *cp = status_field(st, "CapPrm");
	if (n <= 0 || !nm || !uid || !gid || !ce || !cp) {
		ab_pr_error(r, what, "no status of the child");
		return;
	}
	sscanf(nm, " %31s", name);
	const char *base = strrchr(p->path, '/') + 1;
	if (strncmp(name, base, 15) != 0) {
		ab_pr_error(r, what, "the exec did not happen (comm %s)", name);
		return;
	}
	unsigned long u[4] = {0}, g[4] = {0};
	sscanf(uid, "%lu %lu %lu %lu", &u[0], &u[1], &u[2], &u[3]);
	sscanf(gid, "%lu %lu %lu %lu", &g[0], &g[1], &g[2], &g[3]);
	unsigned long long capeff = strtoull(ce, NULL, 16), capprm = strtoull(cp, NULL, 16);
	bool same = true;
	for (int i = 0; i < 4; i++)
		same &= u[i] == getuid() && g[i] == getgid();
	if (!same || capeff || capprm)
		ab_pr_escaped(r, what, "ran with uid %lu/%lu/%lu gid %lu/%lu/%lu caps %llx", u[0],
			      u[1], u[2], g[0], g[1], g[2], capeff | capprm);
	else
		ab_pr_ok(r, what, "ran as uid %lu gid %lu, no capabilities", u[1], g[1]);
	if (same && !capeff && !capprm)
		ab_pr_layer(r, "no_new_privs/nosuid");
}

static bool is_setid(const char *path)
{
	struct stat st;
	if (stat(path, &st) < 0 || !S_ISREG(st.st_mode))
		return false;
	if (st.st_mode & (S_ISUID | S_ISGID))
		return true;
	return getxattr(path, "security.capability", NULL, 0) > 0;
}

static long f_capset(const void *arg)
{
	struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
	struct __user_cap_data_struct d[2];
	unsigned last = *(const unsigned *)arg;
	uint64_t all = last >= 63 ? ~0ULL : (1ULL << (last + 1)) - 1;
	d[0].effective = d[0].permitted = d[0].inheritable = (uint32_t)all;
	d[1].effective = d[1].permitted = d[1].inheritable = (uint32_t)(all >> 32);
	return syscall(SYS_capset, &h, d);
}

static long f_setresuid0(const void *arg)
{
	return setresuid(0, 0, 0);
}

static long f_setresgid0(const void *arg)
{
	return setresgid(0, 0, 0);
}

static long f_setgroups0(const void *arg)
{
	gid_t g = 0;
	return setgroups(1, &g);
}

/* PRC-02: kill(PID, 0) and pidfd_open of the lab's canary process and the
 * harness (host pids: ESRCH expected; a pid that exists here is checked to
 * be the sandbox's own, never signalled with more than 0); exec of the
 * set-id / file-capability programs present from a fixed list with harmless
 * arguments, checking the child's uid/gid/caps as a zombie; capset to all
 * capabilities; PR_SET_SECUREBITS; PR_CAP_AMBIENT_RAISE; setresuid(0),
 * setresgid(0), setgroups([0]) in a sub-child. */
void ab_probe_prc02(ab_probe_run *r)
{
	const ab_lab_info *lab = ab_pr_lab(r);
	signal_outside(r, lab->canary_pid, "canary");
	signal_outside(r, lab->harness_pid, "harness");

	static const struct setid_prog progs[] = {
		{"/usr/bin/su", "--help"},        {"/usr/bin/mount", "--version"},
		{"/usr/bin/umount", "--version"}, {"/usr/bin/passwd", "--help"},
		{"/usr/bin/chsh", "--help"},      {"/usr/bin/chfn", "--help"},
		{"/usr/bin/gpasswd", "--help"},   {"/usr/bin/chage", "--help"},
		{"/usr/bin/sudo", "-V"},          {"/usr/bin/pkexec", "--version"},
		{"/usr/bin/newuidmap", NULL},     {"/usr/bin/newgidmap", NULL},
		{"/usr/bin/fusermount", "-V"},    {"/usr/bin/fusermount3", "-V"},
		{"/usr/bin/ping", "-V"},          {"/usr/sbin/mount.nfs", "-V"},
	};
	int tried = 0;
	for (size_t i = 0; i < AB_ARRAY_SIZE(progs); i++)
		if (is_setid(progs[i].path)) {
			exec_setid(r, &progs[i]);
			tried++;
		}
	if (!tried)
		ab_pr_ok(r, "exec a set-id program",
			 "none of the known set-id programs is visible");

	char buf[32];
	unsigned last = 40;
	if (psys_read_small("/proc/sys/kernel/cap_last_cap", buf, sizeof(buf)) > 0)
		last = (unsigned)strtoul(buf, NULL, 10);
	struct psys_out o;
	int rc = psys_sub_run(f_capset, &last, &o);
	psys_rec_sub(r, "capset: raise every capability", rc, &o, NULL, "capabilities");
	const struct psys_sc t[] = {
		{"prctl(PR_SET_SECUREBITS, SECBIT_NOROOT)",
		 SYS_prctl,
		 {PR_SET_SECUREBITS, SECBIT_NOROOT},
		 NULL,
		 "capabilities"},
		{"prctl(PR_CAP_AMBIENT_RAISE, CAP_NET_RAW)",
		 SYS_prctl,
		 {PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, CAP_NET_RAW},
		 NULL,
		 "capabilities"},
		{"prctl(PR_SET_NO_NEW_PRIVS, 0)",
		 SYS_prctl,
		 {PR_SET_NO_NEW_PRIVS, 0},
		 NULL,
		 "no_new_privs"},
	};
	psys_run_table(r, t, AB_ARRAY_SIZE(t));
	if (getuid() == 0) {
		ab_pr_ok(r, "setresuid(0, 0, 0)", "already uid 0 inside: nothing to gain");
	} else {
		rc = psys_sub_run(f_setresuid0, NULL, &o);
		psys_rec_sub(r, "setresuid(0, 0, 0)", rc, &o, NULL, NULL);
		if (rc == 0)
			psys_layer_for(r, o.err, EINVAL, "user-ns (id 0 unmapped)", EPERM,
				       "capabilities");
	}
	if (getgid() == 0) {
		ab_pr_ok(r, "setresgid(0, 0, 0)", "already gid 0 inside: nothing to gain");
	} else {
		rc = psys_sub_run(f_setresgid0, NULL, &o);
		psys_rec_sub(r, "setresgid(0, 0, 0)", rc, &o, NULL, NULL);
		if (rc == 0)
			psys_layer_for(r, o.err, EINVAL, "user-ns (id 0 unmapped)", EPERM,
				       "capabilities");
	}
	rc = psys_sub_run(f_setgroups0, NULL, &o);
	psys_rec_sub(r, "setgroups([0])", rc, &o, NULL, "capabilities");
}

/* ------------------------------------------------------------------ */
/* PRC-04: /proc of other processes                                   */
/* ------------------------------------------------------------------ */

/* ptrace: SEIZE in a sub-child (its exit detaches without a stop); ATTACH
 * only if SEIZE failed, then wait for the stop and detach at once. */
static long f_seize(const void *arg)
{
	return ptrace(PTRACE_SEIZE, *(const pid_t *)arg, NULL, NULL);
}

static void try_ptrace(ab_probe_run *r, pid_t pid, const char *name)
{
	char what[96];
	struct psys_out o;
	snprintf(what, sizeof(what), "ptrace(PTRACE_SEIZE, %s)", name);
	int rc = psys_sub_run(f_seize, &pid, &o);
	psys_rec_sub(r, what, rc, &o, NULL, NULL);
	if (rc == 0)
		psys_layer_for(r, o.err, EPERM, "ptrace access", 0, NULL);
	if (rc != 0 || o.ret >= 0)
		return;
	snprintf(what, sizeof(what), "ptrace(PTRACE_ATTACH, %s)", name);
	long k = ptrace(PTRACE_ATTACH, pid, NULL, NULL);
	int e = errno;
	if (k == 0) {
		int st;
		waitpid(pid, &st, __WALL);
		ptrace(PTRACE_DETACH, pid, NULL, NULL);
	}
	ab_pr_sys(r, what, k, e);
	if (k < 0 && e != ESRCH)
		ab_pr_layer(r, "ptrace access");
}

static void try_vm_read(ab_probe_run *r, pid_t pid, const char *name)
{
	char what[96], buf[64];
	snprintf(what, sizeof(what), "process_vm_readv(%s)", name);
	struct iovec l = {buf, sizeof(buf)}, rm = {(void *)0x10000, sizeof(buf)};
	ssize_t k = process_vm_readv(pid, &l, 1, &rm, 1, 0);
	int e = errno;
	if (k > 0 && ab_pr_scan(r, what, buf, (size_t)k))
		return;
	if (k < 0 && e == EFAULT) /* the access check passed; only the address was bad */
		ab_pr_escaped(r, what, "permitted (EFAULT on a guessed address)");
	else
		psys_rec_filtered(r, what, k, e, (const int[]){EPERM, ESRCH, ENOSYS, 0}, NULL);
}

/* Everything of one process that ptrace access guards. */
static void introspect(ab_probe_run *r, pid_t pid, const char *name, bool outside)
{
	char path[64], what[128];
	try_ptrace(r, pid, name);
	try_vm_read(r, pid, name);
	static const char *const files[] = {"mem", "maps", "environ", "cmdline"};
	for (size_t i = 0; i < AB_ARRAY_SIZE(files); i++) {
		snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, files[i]);
		snprintf(what, sizeof(what), "read %s (%s)", path, name);
		bool esc = outside || i < 3; /* pid 1's cmdline is readable by design */
		if (i == 0) {
			int fd = open(path, O_RDONLY | O_CLOEXEC);
			int e = errno;
			if (fd >= 0)
				close(fd);
			ab_pr_sys(r, what, fd, e);
			if (fd < 0)
				psys_layer_for(r, e, ENOENT, "pid-ns", EACCES, "ptrace access");
		} else {
			psys_read_scan(r, what, path, esc, "ptrace access");
		}
	}
	static const char *const dirs[] = {"root", "cwd", "fd"};
	struct stat mine, theirs;
	stat("/", &mine);
	for (size_t i = 0; i < AB_ARRAY_SIZE(dirs); i++) {
		snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, dirs[i]);
		snprintf(what, sizeof(what), "open %s/ (%s)", path, name);
		int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		int e = errno;
		if (fd < 0) {
			ab_pr_sys(r, what, -1, e);
			psys_layer_for(r, e, ENOENT, "pid-ns", EACCES, "ptrace access");
			continue;
		}
		bool same = i == 0 && fstat(fd, &theirs) == 0 && theirs.st_dev == mine.st_dev &&
			    theirs.st_ino == mine.st_ino;
		close(fd);
		if (!outside && same)
			ab_pr_ok(r, what, "opened: the sandbox's own root");
		else
			ab_pr_escaped(r, what, "opened");
	}
}

/* PRC-04: against the lab's canary process, the harness (host pids, skipped
 * if the number is one of the sandbox's own) and the sandbox's pid 1
 * (agentbox's init: non-dumpable, its memory holds the host environment):
 * ptrace SEIZE/ATTACH (detached at once), process_vm_readv, open
 * /proc/PID/mem, read+scan maps/environ/cmdline, open /proc/PID/{root,cwd,fd};
 * then every readable /proc/PID/environ and cmdline scanned, and processes of
 * other sessions than the sandbox's (besides pid 1) counted as visible. */
void ab_probe_prc04(ab_probe_run *r)
{
	const ab_lab_info *lab = ab_pr_lab(r);
	const struct {
		pid_t pid;
		const char *name;
	} t[] = {{lab->canary_pid, "canary"}, {lab->harness_pid, "harness"}};
	char name[64];
	for (size_t i = 0; i < AB_ARRAY_SIZE(t); i++) {
		if (t[i].pid <= 0)
			continue;
		snprintf(name, sizeof(name), "%s pid %d", t[i].name, (int)t[i].pid);
		if (t[i].pid == getpid() || t[i].pid == 1 || psys_pid_is_ours(t[i].pid)) {
			ab_pr_ok(r, name, "a process of this sandbox (pid reuse), skipped");
			continue;
		}
		introspect(r, t[i].pid, name, true);
	}
	if (getpid() != 1)
		introspect(r, 1, "sandbox pid 1", false);
	psys_scan_all_procs(r, true);
}
