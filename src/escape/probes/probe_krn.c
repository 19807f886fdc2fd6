/* SPDX-License-Identifier: MIT */
/*
 * test-escape probes of the kernel surface: KRN-01 (namespaces), KRN-02
 * (io_uring, bpf, perf, the mount API, modules... bad-argument calls), KRN-03
 * (/proc/sys, sysrq), KRN-04 (cgroups, /sys, oom_score_adj, kmsg) (docs/test-escape.md).
 *
 * Runs INSIDE the sandbox, in the probe's own forked child (src/escape/probes/runner.c).
 * Every call that could change the process runs in a forked sub-child
 * (psys_sub_run, probe_sysutil.h).  Bad-argument calls: an errno other than
 * EPERM/ENOSYS (EBADF, EFAULT, EINVAL...) means the call reached the kernel,
 * i.e. it is not filtered; nothing is ever written to /proc/sys or /sys.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <linux/perf_event.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fanotify.h>
#include <sys/mount.h>
#include <sys/personality.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agentbox/escape.h"
#include "probe_sysutil.h"

/* ------------------------------------------------------------------ */
/* KRN-01                                                             */
/* ------------------------------------------------------------------ */

static long f_unshare(const void *arg)
{
	return unshare(*(const int *)arg);
}

static long f_clone(const void *arg)
{
	unsigned long fl = *(const unsigned long *)arg;
	long pid = syscall(SYS_clone, fl | SIGCHLD, 0, NULL, NULL, 0);
	if (pid == 0)
		_exit(0);
	int e = errno;
	if (pid > 0)
		waitpid((pid_t)pid, NULL, 0);
	errno = e;
	return pid;
}

struct ab_clone_args { /* struct clone_args, version 2 */
	uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls, set_tid,
		set_tid_size, cgroup;
};

static long f_clone3(const void *arg)
{
	struct ab_clone_args ca;
	memset(&ca, 0, sizeof(ca));
	ca.flags = *(const uint64_t *)arg;
	ca.exit_signal = SIGCHLD;
	long pid = syscall(SYS_clone3, &ca, sizeof(ca));
	if (pid == 0)
		_exit(0);
	int e = errno;
	if (pid > 0)
		waitpid((pid_t)pid, NULL, 0);
	errno = e;
	return pid;
}

static long f_setns(const void *arg)
{
	return setns(*(const int *)arg, 0);
}

static const struct {
	unsigned long flag;
	const char *name;
} ns_flags[] = {
	{CLONE_NEWUSER, "CLONE_NEWUSER"},
	{CLONE_NEWNS, "CLONE_NEWNS"},
	{CLONE_NEWNET, "CLONE_NEWNET"},
	{CLONE_NEWPID, "CLONE_NEWPID"},
	{CLONE_NEWIPC, "CLONE_NEWIPC"},
	{CLONE_NEWUTS, "CLONE_NEWUTS"},
	{CLONE_NEWCGROUP, "CLONE_NEWCGROUP"},
	{CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWNET, "CLONE_NEWUSER|CLONE_NEWNS|CLONE_NEWNET"},
	{CLONE_NEWUSER | (1UL << 32), "CLONE_NEWUSER|1<<32"},
	{CLONE_NEWTIME, "CLONE_NEWTIME"}, /* last: unshare and clone3 only */
};

static void setns_all(ab_probe_run *r, const char *pid)
{
	static const char *const ns[] = {"user", "mnt", "net",    "pid",  "pid_for_children",
					 "ipc",  "uts", "cgroup", "time", "time_for_children"};
	char path[64], what[128];
	for (size_t i = 0; i < AB_ARRAY_SIZE(ns); i++) {
		snprintf(path, sizeof(path), "/proc/%s/ns/%s", pid, ns[i]);
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0) { /* pid 1 is non-dumpable: EACCES */
			int e = errno;
			snprintf(what, sizeof(what), "open %s", path);
			ab_pr_sys(r, what, -1, e);
			if (e == EACCES || e == EPERM)
				ab_pr_layer(r, "ptrace access");
			continue;
		}
		snprintf(what, sizeof(what), "setns(%s)", path);
		struct psys_out o;
		int rc = psys_sub_run(f_setns, &fd, &o);
		close(fd);
		psys_rec_sub(r, what, rc, &o, psys_b_seccomp, NULL);
	}
}

/* KRN-01: unshare with each CLONE_NEW* flag alone, with USER|NS|NET and with
 * NEWUSER|1<<32 (each in a sub-child); clone() with each (not NEWTIME: its
 * bit is the exit signal's byte) in a sub-child whose child exits at once;
 * clone3 with CLONE_NEWUSER, with no flags, and clone3(NULL, 0) (ENOSYS
 * expected: its flags are out of the filter's sight); setns on every
 * /proc/self/ns/NAME and /proc/1/ns/NAME (each in a sub-child), setns(-1);
 * open_tree(OPEN_TREE_CLONE) and fsopen("tmpfs") (ENOSYS expected). */
void ab_probe_krn01(ab_probe_run *r)
{
	char what[96];
	struct psys_out o;
	for (size_t i = 0; i < AB_ARRAY_SIZE(ns_flags); i++) {
		int fl = (int)ns_flags[i].flag;
		if (ns_flags[i].flag >> 32)
			continue; /* unshare takes only known bits: EINVAL, no bypass */
		snprintf(what, sizeof(what), "unshare(%s)", ns_flags[i].name);
		int rc = psys_sub_run(f_unshare, &fl, &o);
		psys_rec_sub(r, what, rc, &o, psys_b_seccomp, NULL);
	}
	for (size_t i = 0; i + 1 < AB_ARRAY_SIZE(ns_flags); i++) {
		snprintf(what, sizeof(what), "clone(%s)", ns_flags[i].name);
		int rc = psys_sub_run(f_clone, &ns_flags[i].flag, &o);
		psys_rec_sub(r, what, rc, &o, psys_b_seccomp, NULL);
	}
	static const uint64_t c3[] = {CLONE_NEWUSER, 0};
	for (size_t i = 0; i < AB_ARRAY_SIZE(c3); i++) {
		snprintf(what, sizeof(what), "clone3(%s)", c3[i] ? "CLONE_NEWUSER" : "no flags");
		int rc = psys_sub_run(f_clone3, &c3[i], &o);
		psys_rec_sub(r, what, rc, &o, (const int[]){ENOSYS, 0}, "seccomp");
	}
	const struct psys_sc t[] = {
		{"clone3(NULL, 0) (bad args)",
		 SYS_clone3,
		 {0},
		 (const int[]){ENOSYS, 0},
		 "seccomp"},
		{"setns(-1, 0) (bad fd)", SYS_setns, {-1, 0}, psys_b_seccomp, NULL},
		{"open_tree(\"/\", OPEN_TREE_CLONE|AT_RECURSIVE)",
		 SYS_open_tree,
		 {AT_FDCWD, PSYS_L("/"), OPEN_TREE_CLONE | AT_RECURSIVE | O_CLOEXEC},
		 psys_b_enosys,
		 NULL},
		{"fsopen(\"tmpfs\")",
		 SYS_fsopen,
		 {PSYS_L("tmpfs"), 1 /* FSOPEN_CLOEXEC */},
		 psys_b_enosys,
		 NULL},
	};
	psys_run_table(r, t, AB_ARRAY_SIZE(t));
	setns_all(r, "self");
	setns_all(r, "1");
}

/* ------------------------------------------------------------------ */
/* KRN-02                                                             */
/* ------------------------------------------------------------------ */

static long f_io_uring(const void *arg)
{
	uint32_t params[64]; /* struct io_uring_params is 120 bytes */
	memset(params, 0, sizeof(params));
	return syscall(SYS_io_uring_setup, 1, params);
}

static long f_bpf_map(const void *arg)
{
	union bpf_attr a;
	memset(&a, 0, sizeof(a));
	a.map_type = BPF_MAP_TYPE_ARRAY;
	a.key_size = 4;
	a.value_size = 4;
	a.max_entries = 1;
	return syscall(SYS_bpf, BPF_MAP_CREATE, &a, sizeof(a));
}

static long f_perf(const void *arg)
{
	struct perf_event_attr a;
	memset(&a, 0, sizeof(a));
	a.type = PERF_TYPE_SOFTWARE;
	a.size = sizeof(a);
	a.config = PERF_COUNT_SW_CPU_CLOCK;
	a.disabled = 1;
	a.exclude_kernel = 1;
	a.exclude_hv = 1;
	return syscall(SYS_perf_event_open, &a, 0, -1, -1, 0);
}

static long f_vhangup(const void *arg)
{
	if (setsid() < 0) /* no new session: never risk hanging up a terminal */
		_exit(3);
	return syscall(SYS_vhangup); /* no controlling terminal: hangs up nothing */
}

static long f_personality(const void *arg)
{
	long old = personality(0xffffffff);
	long k = personality(*(const unsigned long *)arg);
	int e = errno;
	if (k >= 0)
		personality((unsigned long)old);
	errno = e;
	return k;
}

#ifdef __x86_64__
static long f_int80(const void *arg)
{
	long ret;
	__asm__ volatile("int $0x80" : "=a"(ret) : "a"(20L) /* i386 getpid */ : "memory");
	if (ret < 0 && ret > -4096) {
		errno = (int)-ret;
		return -1;
	}
	return ret;
}
#endif

/* Real calls with valid arguments that an unfiltered kernel would grant. */
static void krn02_real(ab_probe_run *r)
{
	static const struct {
		const char *what;
		psys_fn fn;
		unsigned long arg;
	} t[] = {
		{"io_uring_setup(1) (io_uring runs syscalls seccomp never sees)", f_io_uring, 0},
		{"bpf(BPF_MAP_CREATE, array)", f_bpf_map, 0},
		{"perf_event_open(software clock, self)", f_perf, 0},
		{"vhangup() (in a new session)", f_vhangup, 0},
		{"personality(READ_IMPLIES_EXEC)", f_personality, READ_IMPLIES_EXEC},
		{"personality(MMAP_PAGE_ZERO)", f_personality, MMAP_PAGE_ZERO},
	};
	struct psys_out o;
	for (size_t i = 0; i < AB_ARRAY_SIZE(t); i++) {
		int rc = psys_sub_run(t[i].fn, &t[i].arg, &o);
		psys_rec_sub(r, t[i].what, rc, &o, psys_b_seccomp, NULL);
	}
#ifdef __x86_64__
	int rc = psys_sub_run(f_int80, NULL, &o);
	if (rc == SIGSEGV)
		ab_pr_ok(r, "int 0x80 (i386 getpid)", "no 32-bit entry in this kernel (SIGSEGV)");
	else
		psys_rec_sub(r, "int 0x80 (i386 getpid)", rc, &o, (const int[]){ENOSYS, 0},
			     "seccomp");
	const struct psys_sc x32 = {"x32 getpid (nr | 0x40000000)",
				    0x40000000L | SYS_getpid,
				    {0},
				    (const int[]){ENOSYS, 0},
				    NULL};
	psys_run_table(r, &x32, 1);
#endif
	static char log[1 << 16];
	long n = syscall(SYS_syslog, 3 /* SYSLOG_ACTION_READ_ALL */, log, (long)sizeof(log));
	int e = errno;
	if (n > 0 && !ab_pr_scan(r, "syslog(SYSLOG_ACTION_READ_ALL)", log, (size_t)n))
		ab_pr_escaped(r, "syslog(SYSLOG_ACTION_READ_ALL)",
			      "read %ld bytes of the kernel log", n);
	else if (n <= 0)
		psys_rec_filtered(r, "syslog(SYSLOG_ACTION_READ_ALL)", n, e, psys_b_seccomp, NULL);
}

/* The new mount API and mount(2)'s relatives, bad arguments. */
static void krn02_mount(ab_probe_run *r)
{
	const struct psys_sc t[] = {
		{"fsconfig(-1)", SYS_fsconfig, {-1, 0}, psys_b_enosys, NULL},
		{"fsmount(-1)", SYS_fsmount, {-1, 0, 0}, psys_b_enosys, NULL},
		{"fspick(-1, \"\")", SYS_fspick, {-1, PSYS_L(""), 0}, psys_b_enosys, NULL},
		{"open_tree(-1, \"\") (no clone: needs no capability)",
		 SYS_open_tree,
		 {-1, PSYS_L(""), 0},
		 psys_b_enosys,
		 NULL},
		{"move_mount(-1, \"\", -1, \"\")",
		 SYS_move_mount,
		 {-1, PSYS_L(""), -1, PSYS_L(""), 0},
		 psys_b_enosys,
		 NULL},
		{"mount_setattr(-1, \"\", size 0)",
		 SYS_mount_setattr,
		 {-1, PSYS_L(""), 0, 0, 0},
		 psys_b_enosys,
		 NULL},
		{"statmount(NULL)", SYS_statmount, {0, 0, 0, 0}, psys_b_enosys, NULL},
		{"listmount(NULL)", SYS_listmount, {0, 0, 0, 0}, psys_b_enosys, NULL},
		{"open_tree_attr(-1, \"\")",
		 SYS_open_tree_attr,
		 {-1, PSYS_L(""), 0, 0, 0},
		 psys_b_enosys,
		 NULL},
		{"mount(NULL, NULL)", SYS_mount, {0, 0, 0, 0, 0}, psys_b_seccomp, NULL},
		{"umount2(\"/\", bad flags)",
		 SYS_umount2,
		 {PSYS_L("/"), 0xffffffffL},
		 psys_b_seccomp,
		 NULL},
		{"pivot_root(NULL, NULL)", SYS_pivot_root, {0, 0}, psys_b_seccomp, NULL},
		{"chroot(NULL)", SYS_chroot, {0}, psys_b_seccomp, NULL},
		{"name_to_handle_at(\"/\", NULL)",
		 SYS_name_to_handle_at,
		 {AT_FDCWD, PSYS_L("/"), 0, 0, 0},
		 psys_b_seccomp,
		 NULL},
		{"open_by_handle_at(-1, NULL)",
		 SYS_open_by_handle_at,
		 {-1, 0, 0},
		 psys_b_seccomp,
		 NULL},
		{"quotactl(0, NULL)", SYS_quotactl, {0, 0, 0, 0}, psys_b_seccomp, NULL},
		{"quotactl_fd(-1)", SYS_quotactl_fd, {-1, 0, 0, 0}, psys_b_seccomp, NULL},
		{"fanotify_init(FAN_REPORT_FID) (unprivileged since 5.13)",
		 SYS_fanotify_init,
		 {FAN_CLASS_NOTIF | FAN_REPORT_FID, O_RDONLY},
		 psys_b_seccomp,
		 NULL},
		{"userfaultfd(UFFD_USER_MODE_ONLY)",
		 SYS_userfaultfd,
		 {UFFD_USER_MODE_ONLY | O_CLOEXEC},
		 psys_b_seccomp,
		 NULL},
		{"io_uring_enter(-1)",
		 SYS_io_uring_enter,
		 {-1, 0, 0, 0, 0, 0},
		 psys_b_seccomp,
		 NULL},
		{"io_uring_register(-1)",
		 SYS_io_uring_register,
		 {-1, 0, 0, 0},
		 psys_b_seccomp,
		 NULL},
		{"bpf(BPF_PROG_LOAD, NULL)", SYS_bpf, {BPF_PROG_LOAD, 0, 0}, psys_b_seccomp, NULL},
		{"perf_event_open(NULL)",
		 SYS_perf_event_open,
		 {0, 0, -1, -1, 0},
		 psys_b_seccomp,
		 NULL},
	};
	psys_run_table(r, t, AB_ARRAY_SIZE(t));
}

/* Host administration: most also need a capability (EPERM either way). */
static void krn02_admin(ab_probe_run *r)
{
	const struct psys_sc t[] = {
		{"init_module(NULL)", SYS_init_module, {0, 0, PSYS_L("")}, psys_b_seccomp, NULL},
		{"finit_module(-1)", SYS_finit_module, {-1, PSYS_L(""), 0}, psys_b_seccomp, NULL},
		{"delete_module(\"abprobe\")",
		 SYS_delete_module,
		 {PSYS_L("abprobe_none"), O_NONBLOCK},
		 psys_b_seccomp,
		 NULL},
		{"kexec_load(bad)", SYS_kexec_load, {0, 0, 0, 0xffffffffL}, psys_b_seccomp, NULL},
		{"kexec_file_load(-1, -1)",
		 SYS_kexec_file_load,
		 {-1, -1, 0, 0, 0},
		 psys_b_seccomp,
		 NULL},
		{"reboot(bad magic)", SYS_reboot, {0, 0, 0, 0}, psys_b_seccomp, NULL},
		{"swapon(NULL)", SYS_swapon, {0, 0}, psys_b_seccomp, NULL},
		{"swapoff(NULL)", SYS_swapoff, {0}, psys_b_seccomp, NULL},
		{"acct(bad pointer)", SYS_acct, {1}, psys_b_seccomp, NULL}, /* NULL = switch off */
		/* a length above 64: EINVAL once past the capability check, never a change */
		{"sethostname(NULL, 1000)", SYS_sethostname, {0, 1000}, psys_b_seccomp, NULL},
		{"setdomainname(NULL, 1000)", SYS_setdomainname, {0, 1000}, psys_b_seccomp, NULL},
		{"settimeofday(NULL, NULL)", SYS_settimeofday, {0, 0}, psys_b_seccomp, NULL},
		{"clock_settime(CLOCK_REALTIME, NULL)",
		 SYS_clock_settime,
		 {CLOCK_REALTIME, 0},
		 psys_b_seccomp,
		 NULL},
		{"adjtimex(NULL)", SYS_adjtimex, {0}, psys_b_seccomp, NULL},
		{"clock_adjtime(CLOCK_REALTIME, NULL)",
		 SYS_clock_adjtime,
		 {CLOCK_REALTIME, 0},
		 psys_b_seccomp,
		 NULL},
		{"lookup_dcookie(0, NULL)", SYS_lookup_dcookie, {0, 0, 0}, psys_b_seccomp, NULL},
		{"nfsservctl(0, NULL)", SYS_nfsservctl, {0, 0, 0}, psys_b_seccomp, NULL},
		{"lsm_set_self_attr(0, NULL)",
		 SYS_lsm_set_self_attr,
		 {0, 0, 0, 0},
		 psys_b_seccomp,
		 NULL},
#ifdef __x86_64__
		{"ioperm(0x80, 1, 1)", SYS_ioperm, {0x80, 1, 1}, psys_b_seccomp, NULL},
		{"iopl(3)", SYS_iopl, {3}, psys_b_seccomp, NULL},
		{"modify_ldt(0, NULL, 0)", SYS_modify_ldt, {0, 0, 0}, psys_b_seccomp, NULL},
		{"sysfs(3)", SYS_sysfs, {3}, psys_b_seccomp, NULL},
		{"ustat(0, NULL)", SYS_ustat, {0, 0}, psys_b_seccomp, NULL},
		{"uselib(NULL)", SYS_uselib, {0}, psys_b_seccomp, NULL},
		{"create_module(NULL)", SYS_create_module, {0, 0}, psys_b_seccomp, NULL},
#endif
	};
	psys_run_table(r, t, AB_ARRAY_SIZE(t));
}

/* Other processes' memory, NUMA, legacy AIO, socket families not namespaced. */
static void krn02_misc(ab_probe_run *r)
{
	pid_t me = getpid();
	const struct psys_sc t[] = {
		{"process_vm_readv(self, NULL)",
		 SYS_process_vm_readv,
		 {me, 0, 1, 0, 1, 0},
		 psys_b_seccomp,
		 NULL},
		{"process_vm_writev(self, NULL)",
		 SYS_process_vm_writev,
		 {me, 0, 1, 0, 1, 0},
		 psys_b_seccomp,
		 NULL},
		{"pidfd_getfd(-1)", SYS_pidfd_getfd, {-1, 0, 0}, psys_b_seccomp, NULL},
		{"kcmp(self, self, KCMP_VM)", SYS_kcmp, {me, me, 1, 0, 0}, psys_b_seccomp, NULL},
		{"get_mempolicy(NULL)", SYS_get_mempolicy, {0, 0, 0, 0, 0}, psys_b_seccomp, NULL},
		{"mbind(NULL, 0)", SYS_mbind, {0, 0, 0, 0, 0, 0}, psys_b_seccomp, NULL},
		{"move_pages(self, 0)", SYS_move_pages, {0, 0, 0, 0, 0, 0}, psys_b_seccomp, NULL},
		{"io_setup(1, NULL)", SYS_io_setup, {1, 0}, psys_b_seccomp, NULL},
		{"io_destroy(0)", SYS_io_destroy, {0}, psys_b_seccomp, NULL},
		{"vmsplice(-1)", SYS_vmsplice, {-1, 0, 0, 0}, psys_b_seccomp, NULL},
		{"remap_file_pages(0)",
		 SYS_remap_file_pages,
		 {0, 0, 0, 0, 0},
		 psys_b_seccomp,
		 NULL},
		{"ioprio_set(bad which)", SYS_ioprio_set, {0, 0, 0}, psys_b_seccomp, NULL},
		{"socket(AF_ALG)", SYS_socket, {38, SOCK_SEQPACKET | SOCK_CLOEXEC, 0}, NULL, NULL},
		{"socket(AF_ALG | 1<<32)",
		 SYS_socket,
		 {(1L << 32) | 38, SOCK_SEQPACKET, 0},
		 NULL,
		 NULL},
		{"socket(AF_VSOCK) (not namespaced)",
		 SYS_socket,
		 {40, SOCK_STREAM | SOCK_CLOEXEC, 0},
		 NULL,
		 NULL},
		{"socket(AF_PACKET)", SYS_socket, {17, SOCK_RAW | SOCK_CLOEXEC, 0}, NULL, NULL},
	};
	psys_run_table(r, t, AB_ARRAY_SIZE(t));
}

/* KRN-02: real calls an unfiltered kernel grants without privilege
 * (io_uring_setup, bpf map, perf_event_open on self, userfaultfd user-mode,
 * fanotify_init FID, personality READ_IMPLIES_EXEC/MMAP_PAGE_ZERO, vhangup in a
 * new session, AF_ALG/AF_VSOCK/AF_PACKET sockets), the 32-bit (int 0x80) and
 * x32 entries, syslog READ_ALL (scanned), and bad-argument calls of the
 * mount API, mount/umount2/pivot_root/chroot, handles, quotactl, modules,
 * kexec, reboot (bad magic), swap, acct, hostname, clock setters, ioperm/iopl,
 * modify_ldt, legacy calls, process_vm_*, pidfd_getfd, kcmp, NUMA, AIO: an
 * errno other than EPERM/ENOSYS (EBADF, EFAULT, EINVAL...) means the call
 * reached the kernel, i.e. it is not filtered (ESCAPED).  Each call runs in a
 * sub-child. */
void ab_probe_krn02(ab_probe_run *r)
{
	krn02_real(r);
	krn02_mount(r);
	krn02_admin(r);
	krn02_misc(r);
}

/* ------------------------------------------------------------------ */
/* KRN-03                                                             */
/* ------------------------------------------------------------------ */

/* KRN-03: for each of /proc/sys/kernel/{core_pattern,modprobe,hostname,
 * poweroff_cmd,sysrq,panic,yama/ptrace_scope,
 * unprivileged_bpf_disabled,kptr_restrict,randomize_va_space},
 * /proc/sys/fs/{binfmt_misc/register,binfmt_misc/status,suid_dumpable,
 * protected_symlinks}, /proc/sys/vm/{panic_on_oom,overcommit_memory,
 * drop_caches}, /proc/sys/net/ipv4/ip_forward, /proc/sys/user/
 * max_user_namespaces, /proc/sysrq-trigger: read the value (reported, scanned),
 * then open O_WRONLY|O_APPEND and close without writing.  (Not ns_last_pid:
 * it is mode 0666 and its write is capability-checked, so an open proves
 * nothing.) */
void ab_probe_krn03(ab_probe_run *r)
{
	static const char *const paths[] = {
		"/proc/sys/kernel/core_pattern",
		"/proc/sys/kernel/modprobe",
		"/proc/sys/kernel/hostname",
		"/proc/sys/kernel/poweroff_cmd",
		"/proc/sys/kernel/sysrq",
		"/proc/sys/kernel/panic",
		"/proc/sys/kernel/yama/ptrace_scope",
		"/proc/sys/kernel/unprivileged_bpf_disabled",
		"/proc/sys/kernel/kptr_restrict",
		"/proc/sys/kernel/randomize_va_space",
		"/proc/sys/fs/binfmt_misc/register",
		"/proc/sys/fs/binfmt_misc/status",
		"/proc/sys/fs/suid_dumpable",
		"/proc/sys/fs/protected_symlinks",
		"/proc/sys/vm/panic_on_oom",
		"/proc/sys/vm/overcommit_memory",
		"/proc/sys/vm/drop_caches",
		"/proc/sys/net/ipv4/ip_forward",
		"/proc/sys/user/max_user_namespaces",
		"/proc/sysrq-trigger",
	};
	json_t *vals = json_object();
	char buf[512], shown[160];
	for (size_t i = 0; i < AB_ARRAY_SIZE(paths); i++) {
		ssize_t n = psys_read_small(paths[i], buf, sizeof(buf));
		if (n >= 0) {
			ab_pr_scan(r, paths[i], buf, (size_t)n);
			psys_printable(buf, (size_t)n, shown, sizeof(shown));
			json_object_set_new(vals, paths[i], json_string(shown));
		} else {
			json_object_set_new(vals, paths[i],
					    json_sprintf("(%s)", psys_ename(errno)));
		}
		psys_open_for_write(r, paths[i]);
	}
	ab_pr_report(r, "values", vals);
}

/* ------------------------------------------------------------------ */
/* KRN-04                                                             */
/* ------------------------------------------------------------------ */

/* Control files of one cgroup directory: open for writing, mkdir a child. */
static void cgroup_dir(ab_probe_run *r, const char *dir, const char *run_id)
{
	static const char *const files[] = {"release_agent",          "notify_on_release",
					    "cgroup.procs",           "tasks",
					    "cgroup.subtree_control", "devices.allow"};
	char path[600], what[700];
	for (size_t i = 0; i < AB_ARRAY_SIZE(files); i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, files[i]);
		if (access(path, F_OK) == 0)
			psys_open_for_write(r, path);
	}
	snprintf(path, sizeof(path), "%s/abprobe-%s", dir, run_id);
	snprintf(what, sizeof(what), "mkdir %s", path);
	int k = mkdir(path, 0755);
	int e = errno;
	if (k == 0)
		rmdir(path);
	ab_pr_sys(r, what, k, e);
	if (k < 0)
		psys_layer_for(r, e, EACCES, "permissions", 0, NULL);
}

/* cgroup and cgroup2 mounts visible here (from mountinfo), plus the usual
 * places; each is probed. */
static int cgroup_mounts(ab_probe_run *r, const char *run_id)
{
	static char mi[1 << 16];
	int found = 0;
	if (psys_read_small("/proc/self/mountinfo", mi, sizeof(mi)) < 0)
		return 0;
	for (char *line = strtok(mi, "\n"); line; line = strtok(NULL, "\n")) {
		char mnt[512], fstype[64];
		const char *sep = strstr(line, " - ");
		if (!sep || sscanf(line, "%*s %*s %*s %*s %511s", mnt) != 1 ||
		    sscanf(sep + 3, "%63s", fstype) != 1)
			continue;
		if (strcmp(fstype, "cgroup") && strcmp(fstype, "cgroup2"))
			continue;
		found++;
		cgroup_dir(r, mnt, run_id);
	}
	return found;
}

static void oom_lower(ab_probe_run *r)
{
	const char *w = "lower /proc/self/oom_score_adj to -1000";
	char buf[32];
	if (psys_read_small("/proc/self/oom_score_adj", buf, sizeof(buf)) <= 0) {
		ab_pr_sys(r, w, -1, errno);
		return;
	}
	long cur = strtol(buf, NULL, 10);
	if (cur == -1000) {
		ab_pr_ok(r, w, "already -1000 (inherited from outside)");
		return;
	}
	int fd = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
	if (fd < 0) {
		ab_pr_sys(r, w, -1, errno);
		return;
	}
	ssize_t k = write(fd, "-1000", 5);
	int e = errno;
	if (k > 0) { /* write back the old value (raising is always allowed) */
		char old[24];
		int len = snprintf(old, sizeof(old), "%ld", cur);
		(void)!pwrite(fd, old, (size_t)len, 0);
	}
	close(fd);
	ab_pr_sys(r, w, k, e);
	if (k < 0 && e == EACCES)
		ab_pr_layer(r, "capabilities");
}

/* KRN-04: every cgroup/cgroup2 mount in mountinfo and /sys/fs/cgroup{,/NAME}:
 * open release_agent, notify_on_release, cgroup.procs, tasks,
 * cgroup.subtree_control, devices.allow for writing (no write), mkdir a child
 * cgroup (removed at once); mount a fresh cgroup (v1 rdma) and cgroup2 on a
 * private /tmp directory; /sys/kernel/uevent_helper, /sys/module/
 * firmware_class/parameters/path, /sys/kernel/mm/transparent_hugepage/enabled,
 * /sys/power/state opened for writing (no write); lowering oom_score_adj to
 * -1000 (old value written back if it worked); /dev/kmsg for writing; open
 * /proc/kmsg and /proc/kcore (never read). */
void ab_probe_krn04(ab_probe_run *r)
{
	const char *run_id = ab_pr_lab(r)->run_id;
	char buf[1024], shown[512], path[600];
	if (psys_read_small("/proc/self/cgroup", buf, sizeof(buf)) >= 0) {
		psys_printable(buf, strlen(buf), shown, sizeof(shown));
		ab_pr_report(r, "cgroup", json_string(shown));
	}
	int found = cgroup_mounts(r, run_id);
	DIR *d = found ? NULL : opendir("/sys/fs/cgroup"); /* mountinfo lists them */
	if (!d && !found)
		ab_pr_sys(r, "cgroup filesystem visible (/sys/fs/cgroup)", -1, errno);
	for (struct dirent *de; d && (de = readdir(d));) {
		if (de->d_name[0] == '.' || de->d_type != DT_DIR)
			continue;
		snprintf(path, sizeof(path), "/sys/fs/cgroup/%s", de->d_name);
		cgroup_dir(r, path, run_id);
	}
	if (d)
		closedir(d);

	char dir[128];
	snprintf(dir, sizeof(dir), "/tmp/abprobe-%s-cgmnt", run_id);
	bool made = mkdir(dir, 0700) == 0;
	ab_pr_report(r, "markers", json_pack("[s]", dir));
	int k = mount("cgroup", dir, "cgroup", 0, "rdma");
	int e = errno;
	if (k == 0)
		umount2(dir, MNT_DETACH);
	ab_pr_sys(r, "mount a new cgroup v1 hierarchy (rdma)", k, e);
	k = mount("cgroup2", dir, "cgroup2", 0, NULL);
	e = errno;
	if (k == 0)
		umount2(dir, MNT_DETACH);
	ab_pr_sys(r, "mount a new cgroup2 hierarchy", k, e);
	if (made)
		rmdir(dir);

	static const char *const sysw[] = {
		"/sys/kernel/uevent_helper", "/sys/module/firmware_class/parameters/path",
		"/sys/kernel/mm/transparent_hugepage/enabled", "/sys/power/state", "/dev/kmsg"};
	for (size_t i = 0; i < AB_ARRAY_SIZE(sysw); i++)
		psys_open_for_write(r, sysw[i]);
	oom_lower(r);
	static const char *const ro[] = {"/proc/kmsg", "/proc/kcore"};
	for (size_t i = 0; i < AB_ARRAY_SIZE(ro); i++) {
		snprintf(path, sizeof(path), "open %s O_RDONLY (never read)", ro[i]);
		int fd = open(ro[i], O_RDONLY | O_CLOEXEC | O_NONBLOCK);
		e = errno;
		if (fd >= 0)
			close(fd);
		ab_pr_sys(r, path, fd, e);
		if (fd < 0)
			psys_layer_for(r, e, EACCES, "permissions", 0, NULL);
	}
}
