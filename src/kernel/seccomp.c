/* SPDX-License-Identifier: MIT */
/*
 * The seccomp filter (include/agentbox/seccomp.h).
 *
 * Which process: the PARENT validates the profile's syscall lists, compiles
 * the policy with libseccomp into classic BPF and assembles the guard program
 * (after clone, while the child builds its root), and renders the policy for `agentbox explain`.  The
 * CHILD only calls ab_seccomp_apply(), the very last step before exec; it does
 * not allocate.
 *
 * A deny list by contract (default ALLOW), as in flatpak and firejail: the
 * sandbox runs arbitrary developer tools, and an allow list breaks them in ways
 * nobody predicts.  Denied calls fail with EPERM, or ENOSYS where user space has
 * a fallback (clone3 -> clone, new mount API -> mount(2), itself EPERM), so
 * tools degrade instead of dying.  Only foreign ABIs are killed.
 *
 * Program 1 (libseccomp, the native arch only; no i386/x32 arch is added):
 *   another arch (i386 via int 0x80), x32 numbers   KILL_PROCESS (bad arch)
 *   deny_table[] below                              EPERM, or ENOSYS
 *   clone, unshare with any CLONE_NEW* flag         EPERM: one MASKED_EQ rule
 *                                                   per flag, libseccomp cannot
 *                                                   say "flags & mask != 0"
 *   ioctl TIOCSTI, TIOCLINUX (low 32 bits of cmd)   EPERM (CVE-2019-10063)
 *   socket, socketpair outside UNIX/INET/INET6/NETLINK   EAFNOSUPPORT
 *   the profile's syscalls.deny                     EPERM
 * Program 2 (hand-written guard; the kernel runs both, the stricter wins):
 *   checks the arch itself and kills x32 numbers, like program 1;
 *   personality(): only the 0xffffffff query and PER_LINUX/PER_LINUX32 with
 *     UNAME26/ADDR_NO_RANDOMIZE (gdb), else EPERM.  "Not one of these values"
 *     needs several comparisons of one argument, which libseccomp 2.5 rejects;
 *   native numbers above AB_SECCOMP_MAX_KNOWN_NR -> ENOSYS: a deny list cannot
 *     know tomorrow's syscalls, so new ones stay closed until reviewed.
 *
 * Deliberately allowed: ptrace (the pid namespace confines it to the sandbox's
 * own tree, and debuggers must work), the *xattrat and file_[gs]etattr calls
 * (same checks as their path-based ancestors, mounts and Landlock apply),
 * uretprobe/uprobe (called by kernel trampolines; blocking them crashes traced
 * programs), mseal, memfd_secret.
 */
#include "agentbox/profile.h"
#include "agentbox/seccomp.h"

#include <errno.h>
#include <linux/audit.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <seccomp.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/personality.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__x86_64__) && !defined(__ILP32__)
#define AB_AUDIT_ARCH AUDIT_ARCH_X86_64
#define AB_X32_SYSCALL_BIT 0x40000000u
#define AB_FOREIGN_ABIS "i386 via int 0x80, x32"
#elif defined(__aarch64__)
#define AB_AUDIT_ARCH AUDIT_ARCH_AARCH64
#define AB_FOREIGN_ABIS "32-bit arm"
#else
#error "the seccomp policy knows x86_64 and aarch64 only (clone's flags argument, syscall numbers): port it"
#endif

/* clone(2)'s flags are argument 0 on x86_64 and aarch64; CLONE_BACKWARDS2
 * architectures (s390, cris) pass them as argument 1. */
#define AB_CLONE_FLAGS_ARG 0

/* personality(2) takes an unsigned int: compare the low half of argument 0. */
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define AB_ARG0_LO ((uint32_t)offsetof(struct seccomp_data, args))
#else
#define AB_ARG0_LO ((uint32_t)offsetof(struct seccomp_data, args) + 4u)
#endif

#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080
#endif

#define AB_SECCOMP_NAME_MAX 64    /* longest syscall name accepted from a profile */
#define AB_SECCOMP_LIST_MAX AB_PROFILE_MAX_SYSCALLS /* after merging, too */
#define AB_SECCOMP_EXPORT_MAX (1 << 20) /* bytes read back from libseccomp */

/* The values personality() may set, besides the 0xffffffff query. */
#define AB_PERSONA_OK_BITS ((uint32_t)(PER_LINUX32 | UNAME26 | ADDR_NO_RANDOMIZE))

/* Syscalls newer than libseccomp 2.5.4's table (it stops at futex_requeue,
 * 456).  From 424 on every architecture shares the asm-generic numbers, so
 * this serves x86_64 and aarch64 alike.  Checked against Linux 6.18. */
static const struct {
	const char *name;
	int nr;
} new_syscalls[] = {
	{"statmount", 457},     {"listmount", 458},         {"lsm_get_self_attr", 459},
	{"lsm_set_self_attr", 460}, {"lsm_list_modules", 461}, {"mseal", 462},
	{"setxattrat", 463},    {"getxattrat", 464},        {"listxattrat", 465},
	{"removexattrat", 466}, {"open_tree_attr", 467},    {"file_getattr", 468},
	{"file_setattr", 469},
};
_Static_assert(AB_SECCOMP_MAX_KNOWN_NR == 469,
	       "a new kernel: review its syscalls, extend new_syscalls[] and deny_table[]");

enum {
	D_ENOSYS = 1 << 0, /* ENOSYS instead of EPERM: user space has a fallback */
	D_RELAX = 1 << 1,  /* the profile's syscalls.allow may drop it */
	D_PROBE = 1 << 2,  /* ordinary programs probe it on every start and cope:
			      recorded, but left out of the exit summary */
};

typedef struct deny_entry {
	const char *name;
	unsigned flags;
} deny_entry;

/* At least the union of flatpak's and firejail's default lists.  Names absent
 * on this architecture (umount, stime, vm86 on x86_64; most legacy calls on
 * aarch64) are skipped. */
static const deny_entry deny_table[] = {
	/* Kernel keyrings are not namespaced (threat model 2). */
	{"add_key", 0}, {"keyctl", 0}, {"request_key", 0},
	/* No nested sandboxes, no changes to the mount tree. */
	{"setns", 0}, {"mount", 0}, {"umount", 0}, {"umount2", 0}, {"pivot_root", 0},
	{"chroot", 0}, {"open_by_handle_at", 0}, {"name_to_handle_at", D_RELAX},
	/* clone3's flags sit in memory seccomp cannot read: ENOSYS makes glibc
	 * fall back to clone(), whose flags the rules below inspect. */
	{"clone3", D_ENOSYS},
	/* The new mount API (CVE-2021-41133), ENOSYS as in flatpak. */
	{"fsopen", D_ENOSYS}, {"fsconfig", D_ENOSYS}, {"fsmount", D_ENOSYS},
	{"fspick", D_ENOSYS}, {"open_tree", D_ENOSYS}, {"open_tree_attr", D_ENOSYS},
	{"move_mount", D_ENOSYS}, {"mount_setattr", D_ENOSYS}, {"statmount", D_ENOSYS},
	{"listmount", D_ENOSYS},
	/* Big kernel attack surface; io_uring also runs syscalls seccomp never sees. */
	{"bpf", 0}, {"io_uring_setup", 0}, {"io_uring_enter", 0}, {"io_uring_register", 0},
	{"perf_event_open", D_RELAX}, {"userfaultfd", D_RELAX},
	/* Modules, kexec, host administration (most need capabilities anyway). */
	{"init_module", 0}, {"finit_module", 0}, {"delete_module", 0}, {"create_module", 0},
	{"query_module", 0}, {"get_kernel_syms", 0}, {"kexec_load", 0},
	{"kexec_file_load", 0}, {"reboot", 0}, {"swapon", 0}, {"swapoff", 0}, {"acct", 0},
	{"quotactl", 0}, {"quotactl_fd", 0}, {"nfsservctl", 0}, {"_sysctl", 0},
	{"syslog", 0}, {"vhangup", 0}, {"lookup_dcookie", 0}, {"fanotify_init", 0},
	{"sethostname", 0}, {"setdomainname", 0}, {"ioperm", 0}, {"iopl", 0},
	{"lsm_set_self_attr", 0},
	/* Obsolete or never implemented: nothing legitimate calls them. */
	{"sysfs", 0}, {"ustat", 0}, {"uselib", 0}, {"afs_syscall", 0}, {"tuxcall", 0},
	{"security", 0}, {"vserver", 0}, {"getpmsg", 0}, {"putpmsg", 0},
	{"epoll_ctl_old", 0}, {"epoll_wait_old", 0}, {"vm86", 0}, {"vm86old", 0},
	/* The clock is host-wide; adjtimex/clock_adjtime also read it (ntptime). */
	{"settimeofday", 0}, {"stime", 0}, {"clock_settime", 0},
	{"adjtimex", D_RELAX}, {"clock_adjtime", D_RELAX},
	/* Other processes' memory and kernel object identity (debuggers, CRIU). */
	{"process_vm_readv", D_RELAX}, {"process_vm_writev", D_RELAX},
	{"pidfd_getfd", D_RELAX}, {"kcmp", D_RELAX},
	/* NUMA policy and page migration (libnuma copes with EPERM).  procps
	 * (ps, top) and libnuma probe the policy calls on every start. */
	{"mbind", D_RELAX}, {"get_mempolicy", D_RELAX | D_PROBE},
	{"set_mempolicy", D_RELAX | D_PROBE},
	{"set_mempolicy_home_node", D_RELAX}, {"move_pages", D_RELAX},
	{"migrate_pages", D_RELAX},
	/* Legacy AIO and odd memory/IO calls, blocked by firejail. */
	{"io_setup", D_RELAX}, {"io_destroy", D_RELAX}, {"io_getevents", D_RELAX},
	{"io_pgetevents", D_RELAX}, {"io_submit", D_RELAX}, {"io_cancel", D_RELAX},
	{"ioprio_set", D_RELAX}, {"remap_file_pages", D_RELAX}, {"vmsplice", D_RELAX},
	{"modify_ldt", D_RELAX}, {"lsm_get_self_attr", D_RELAX},
	{"lsm_list_modules", D_RELAX},
};

/* Syscalls with argument rules below: never relaxable as a whole. */
static const char *const special_names[] = {"clone", "unshare", "socket", "socketpair",
					    "ioctl"};

static const struct {
	unsigned long flag;
	const char *name;
} ns_flags[] = {
	{CLONE_NEWNS, "CLONE_NEWNS"},   {CLONE_NEWCGROUP, "CLONE_NEWCGROUP"},
	{CLONE_NEWUTS, "CLONE_NEWUTS"}, {CLONE_NEWIPC, "CLONE_NEWIPC"},
	{CLONE_NEWUSER, "CLONE_NEWUSER"}, {CLONE_NEWPID, "CLONE_NEWPID"},
	{CLONE_NEWNET, "CLONE_NEWNET"},
	/* Last: unshare only.  clone() takes its low byte as the exit signal,
	 * so CLONE_NEWTIME can only come through unshare or clone3. */
	{CLONE_NEWTIME, "CLONE_NEWTIME"},
};

/* Ascending.  AF_VSOCK especially stays out: it is not namespaced. */
static const int allowed_families[] = {AF_UNIX, AF_INET, AF_INET6, AF_NETLINK};

static const struct {
	unsigned long cmd;
	const char *name;
} tty_ioctls[] = {{TIOCSTI, "TIOCSTI"}, {TIOCLINUX, "TIOCLINUX"}};

static void scmp_releasep(scmp_filter_ctx *c)
{
	if (*c)
		seccomp_release(*c);
}
#define _cleanup_scmp_ _cleanup_(scmp_releasep)

/* ---- names ---- */

enum { NR_UNKNOWN = -1, NR_OTHER_ARCH = -2 };

/* Native number, NR_OTHER_ARCH (a syscall, not on this arch) or NR_UNKNOWN. */
static int resolve_nr(const char *name)
{
	int nr = seccomp_syscall_resolve_name(name);
	if (nr >= 0)
		return nr;
	if (nr != __NR_SCMP_ERROR)
		return NR_OTHER_ARCH; /* libseccomp's pseudo number */
	for (size_t i = 0; i < AB_ARRAY_SIZE(new_syscalls); i++)
		if (strcmp(new_syscalls[i].name, name) == 0)
			return new_syscalls[i].nr;
	return NR_UNKNOWN;
}

static const deny_entry *find_deny(const char *name)
{
	for (size_t i = 0; i < AB_ARRAY_SIZE(deny_table); i++)
		if (strcmp(deny_table[i].name, name) == 0)
			return &deny_table[i];
	return NULL;
}

bool ab_seccomp_denial_is_probe(const char *name)
{
	const deny_entry *e = find_deny(name);
	return e && (e->flags & D_PROBE);
}

static bool is_special(const char *name)
{
	for (size_t i = 0; i < AB_ARRAY_SIZE(special_names); i++)
		if (strcmp(special_names[i], name) == 0)
			return true;
	return false;
}

/* Deny always wins over allow. */
static bool relaxed(const ab_seccomp_policy *pol, const char *name)
{
	return ab_strv_contains(&pol->allow, name) && !ab_strv_contains(&pol->extra_deny, name);
}

static bool entry_active(const ab_seccomp_policy *pol, const deny_entry *e)
{
	return !((e->flags & D_RELAX) && relaxed(pol, e->name));
}

static bool personality_guarded(const ab_seccomp_policy *pol)
{
	return !relaxed(pol, "personality");
}

/* Printable, bounded rendering of a name from an untrusted profile. */
static void quote_name(const char *s, char *out, size_t size)
{
	size_t o = 0, i = 0;
	for (; s[i] && i < AB_SECCOMP_NAME_MAX && o + 5 < size; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\')
			out[o++] = (char)c;
		else
			o += (size_t)snprintf(out + o, size - o, "\\x%02x", c);
	}
	out[o] = '\0';
	if (s[i] && o + 4 < size)
		memcpy(out + o, "...", 4);
}

/* ---- validation ---- */

static int check_name(const char *list, const char *name, ab_err *err)
{
	size_t len = strnlen(name, AB_SECCOMP_NAME_MAX + 1);
	bool ok = len > 0 && len <= AB_SECCOMP_NAME_MAX;
	for (size_t i = 0; ok && i < len; i++)
		ok = (name[i] >= 'a' && name[i] <= 'z') || (name[i] >= '0' && name[i] <= '9') ||
		     name[i] == '_';
	if (!ok) {
		char q[4 * AB_SECCOMP_NAME_MAX + 8];
		quote_name(name, q, sizeof(q));
		ab_fail(err, 0, "%s: invalid syscall name \"%s\"", list, q);
		ab_err_hint(err, "use the kernel's name of the system call, e.g. \"ptrace\"");
		return -EINVAL;
	}
	if (resolve_nr(name) == NR_UNKNOWN) {
		ab_fail(err, 0, "%s: unknown syscall \"%s\"", list, name);
		ab_err_hint(err, "use the kernel's name of the system call, as in syscalls(2)");
		return -EINVAL;
	}
	return 0;
}

static int check_list(const ab_strv *l, const char *list, ab_err *err)
{
	if (l->n > AB_SECCOMP_LIST_MAX)
		return ab_fail(err, 0, "%s: too many entries (%zu, at most %d)", list, l->n,
			       AB_SECCOMP_LIST_MAX);
	for (size_t i = 0; i < l->n; i++) {
		int r = check_name(list, l->v[i], err);
		if (r < 0)
			return r;
	}
	return 0;
}

static void hint_relaxable(ab_err *err)
{
	char buf[sizeof(err->hint)];
	size_t o = (size_t)snprintf(buf, sizeof(buf), "only these can be re-allowed: personality");
	for (size_t i = 0; i < AB_ARRAY_SIZE(deny_table) && o < sizeof(buf); i++)
		if (deny_table[i].flags & D_RELAX)
			o += (size_t)snprintf(buf + o, sizeof(buf) - o, " %s", deny_table[i].name);
	ab_err_hint(err, "%s", buf);
}

static int check_relaxable(const char *name, ab_err *err)
{
	const deny_entry *e = find_deny(name);
	if (strcmp(name, "personality") == 0 || (e && (e->flags & D_RELAX)))
		return 0;
	if (e || is_special(name)) {
		ab_fail(err, 0, "syscalls.allow: \"%s\" cannot be re-allowed", name);
		hint_relaxable(err);
		return -EINVAL;
	}
	return ab_fail(err, 0, "syscalls.allow: \"%s\" is not denied by the default policy", name);
}

int ab_seccomp_validate(const ab_seccomp_policy *pol, ab_err *err)
{
	int r = check_list(&pol->extra_deny, "syscalls.deny", err);
	if (r < 0)
		return r;
	for (size_t i = 0; i < pol->extra_deny.n; i++)
		if (strcmp(pol->extra_deny.v[i], "execve") == 0)
			return ab_fail(err, 0, "syscalls.deny: \"execve\" cannot be denied "
					       "(the sandbox could not start the command)");
	r = check_list(&pol->allow, "syscalls.allow", err);
	if (r < 0)
		return r;
	for (size_t i = 0; i < pol->allow.n; i++) {
		r = check_relaxable(pol->allow.v[i], err);
		if (r < 0)
			return r;
	}
	return 0;
}

/* ---- program 1: libseccomp ---- */

/* A denying rule's action: its errno, or a user notification the parent
 * answers with the same errno (notify_denials).  ENOSYS rules stay plain. */
static uint32_t deny_act(const ab_seccomp_policy *pol, int e)
{
	if (pol->notify_denials && e != ENOSYS)
		return SCMP_ACT_NOTIFY;
	return SCMP_ACT_ERRNO((uint32_t)e);
}

static int add_rule(scmp_filter_ctx ctx, uint32_t action, int nr, const char *name,
		    unsigned cnt, const struct scmp_arg_cmp *cmp, ab_err *err)
{
	int r = seccomp_rule_add_array(ctx, action, nr, cnt, cmp);
	if (r < 0)
		return ab_fail(err, -r, "seccomp: add a rule for %s", name);
	return 0;
}

/* The native number of a syscall the policy needs rules for: absent = error. */
static int required_nr(const char *name, ab_err *err)
{
	int nr = resolve_nr(name);
	if (nr < 0)
		return ab_fail(err, ENOSYS, "seccomp: no native \"%s\" on this architecture", name);
	return nr;
}

static int add_table_rules(scmp_filter_ctx ctx, const ab_seccomp_policy *pol, ab_err *err)
{
	for (size_t i = 0; i < AB_ARRAY_SIZE(deny_table); i++) {
		const deny_entry *e = &deny_table[i];
		int nr = resolve_nr(e->name);
		if (nr == NR_UNKNOWN) /* a typo here, or an old libseccomp: fail closed */
			return ab_fail(err, ENOSYS, "seccomp: libseccomp does not know \"%s\"",
				       e->name);
		if (nr == NR_OTHER_ARCH || !entry_active(pol, e))
			continue;
		uint32_t act = deny_act(pol, (e->flags & D_ENOSYS) ? ENOSYS : EPERM);
		int r = add_rule(ctx, act, nr, e->name, 0, NULL, err);
		if (r < 0)
			return r;
	}
	return 0;
}

static int add_namespace_rules(scmp_filter_ctx ctx, const ab_seccomp_policy *pol, ab_err *err)
{
	static const char *const calls[] = {"clone", "unshare"};
	for (size_t c = 0; c < AB_ARRAY_SIZE(calls); c++) {
		if (ab_strv_contains(&pol->extra_deny, calls[c]))
			continue; /* denied outright by add_extra_deny() */
		int nr = required_nr(calls[c], err);
		if (nr < 0)
			return nr;
		bool is_clone = c == 0;
		for (size_t i = 0; i < AB_ARRAY_SIZE(ns_flags); i++) {
			if (is_clone && ns_flags[i].flag == CLONE_NEWTIME)
				continue;
			struct scmp_arg_cmp cmp = {is_clone ? AB_CLONE_FLAGS_ARG : 0,
						   SCMP_CMP_MASKED_EQ, ns_flags[i].flag,
						   ns_flags[i].flag};
			int r = add_rule(ctx, deny_act(pol, EPERM), nr, calls[c], 1, &cmp, err);
			if (r < 0)
				return r;
		}
	}
	return 0;
}

static bool family_allowed(int family)
{
	for (size_t i = 0; i < AB_ARRAY_SIZE(allowed_families); i++)
		if (allowed_families[i] == family)
			return true;
	return false;
}

/* "family not in the set" as one EQ rule per gap below the largest allowed
 * family plus one GT rule.  The comparisons are 64-bit: a value with high bits
 * set is GT and denied, although the kernel would read only the low 32. */
static int add_socket_rules(scmp_filter_ctx ctx, const ab_seccomp_policy *pol, ab_err *err)
{
	static const char *const calls[] = {"socket", "socketpair"};
	const int max = allowed_families[AB_ARRAY_SIZE(allowed_families) - 1];
	for (size_t c = 0; c < AB_ARRAY_SIZE(calls); c++) {
		if (ab_strv_contains(&pol->extra_deny, calls[c]))
			continue;
		int nr = required_nr(calls[c], err);
		if (nr < 0)
			return nr;
		for (int f = 0; f <= max + 1; f++) {
			if (f <= max && family_allowed(f))
				continue;
			struct scmp_arg_cmp cmp = {0, f <= max ? SCMP_CMP_EQ : SCMP_CMP_GT,
						   (scmp_datum_t)(f <= max ? f : max), 0};
			int r = add_rule(ctx, deny_act(pol, EAFNOSUPPORT), nr, calls[c], 1, &cmp,
					 err);
			if (r < 0)
				return r;
		}
	}
	return 0;
}

/* The kernel reads ioctl's cmd as an unsigned int: compare only the low 32
 * bits, or TIOCSTI | (1UL << 32) would slip through (CVE-2019-10063). */
static int add_ioctl_rules(scmp_filter_ctx ctx, const ab_seccomp_policy *pol, ab_err *err)
{
	if (ab_strv_contains(&pol->extra_deny, "ioctl"))
		return 0;
	int nr = required_nr("ioctl", err);
	if (nr < 0)
		return nr;
	for (size_t i = 0; i < AB_ARRAY_SIZE(tty_ioctls); i++) {
		struct scmp_arg_cmp cmp = {1, SCMP_CMP_MASKED_EQ, 0xffffffffu, tty_ioctls[i].cmd};
		int r = add_rule(ctx, deny_act(pol, EPERM), nr, "ioctl", 1, &cmp, err);
		if (r < 0)
			return r;
	}
	return 0;
}

/* No set-user-ID or set-group-ID bits: files written in the workspace live on
 * the host, and with root callers (idmapped workspace) they belong to host
 * root.  Every syscall that takes a mode gets EPERM when the mode has either
 * bit; openat2 carries its mode in a struct the filter cannot read, so it is
 * ENOSYS (glibc and everyone else fall back to openat). */
static const struct {
	const char *name;
	int nr_fallback; /* x86_64 number for calls libseccomp 2.5 does not know */
	unsigned arg;
} mode_calls[] = {
	{"chmod", -1, 1},  {"fchmod", -1, 1}, {"fchmodat", -1, 2}, {"fchmodat2", 452, 2},
	{"creat", -1, 1},  {"open", -1, 2},   {"openat", -1, 3},   {"mknod", -1, 1},
	{"mknodat", -1, 2}, {"mkdir", -1, 1}, {"mkdirat", -1, 2},
};

static int add_mode_rules(scmp_filter_ctx ctx, const ab_seccomp_policy *pol, ab_err *err)
{
	for (size_t i = 0; i < AB_ARRAY_SIZE(mode_calls); i++) {
		int nr = resolve_nr(mode_calls[i].name);
#ifdef __x86_64__
		if (nr < 0)
			nr = mode_calls[i].nr_fallback;
#endif
		if (nr < 0)
			continue; /* not on this architecture (e.g. chmod on aarch64) */
		static const unsigned bits[] = {S_ISUID, S_ISGID};
		for (size_t b = 0; b < AB_ARRAY_SIZE(bits); b++) {
			struct scmp_arg_cmp cmp = {mode_calls[i].arg, SCMP_CMP_MASKED_EQ, bits[b], bits[b]};
			int r = add_rule(ctx, deny_act(pol, EPERM), nr, mode_calls[i].name, 1, &cmp,
					 err);
			if (r < 0)
				return r;
		}
	}
	int nr = resolve_nr("openat2");
#ifdef __x86_64__
	if (nr < 0)
		nr = 437;
#endif
	if (nr >= 0 && !ab_strv_contains(&pol->extra_deny, "openat2"))
		return add_rule(ctx, SCMP_ACT_ERRNO(ENOSYS), nr, "openat2", 0, NULL, err);
	return 0;
}

/* The exec record: execve and execveat notify; the parent logs and lets the
 * call continue (SECCOMP_USER_NOTIF_FLAG_CONTINUE). */
static int add_exec_rules(scmp_filter_ctx ctx, const ab_seccomp_policy *pol, ab_err *err)
{
	static const char *const calls[] = {"execve", "execveat"};
	for (size_t c = 0; pol->notify_exec && c < AB_ARRAY_SIZE(calls); c++) {
		if (ab_strv_contains(&pol->extra_deny, calls[c]))
			continue; /* denied: a denial, not an exec */
		int nr = required_nr(calls[c], err);
		if (nr < 0)
			return nr;
		int r = add_rule(ctx, SCMP_ACT_NOTIFY, nr, calls[c], 0, NULL, err);
		if (r < 0)
			return r;
	}
	return 0;
}

/* Rendered credentials files: every rename notifies; the parent carries out
 * one onto a rendered file and continues the rest.  A rename the profile
 * denies stays a denial (its rule notifies as a denial, or fails). */
static int rename_call_nr(const ab_seccomp_policy *pol, const char *name)
{
	int nr = resolve_nr(name);
	const deny_entry *e = find_deny(name);
	if (!pol->notify_rename || nr < 0 || ab_strv_contains(&pol->extra_deny, name) ||
	    (e && entry_active(pol, e)))
		return -1; /* off; not on this architecture (aarch64: rename); denied */
	return nr;
}

bool ab_seccomp_notifies_rename(const ab_seccomp_policy *pol, int nr)
{
	static const char *const calls[] = AB_SECCOMP_RENAME_CALLS;
	for (size_t c = 0; nr >= 0 && c < AB_ARRAY_SIZE(calls); c++)
		if (rename_call_nr(pol, calls[c]) == nr)
			return true;
	return false;
}

static int add_rename_rules(scmp_filter_ctx ctx, const ab_seccomp_policy *pol, ab_err *err)
{
	static const char *const calls[] = AB_SECCOMP_RENAME_CALLS;
	for (size_t c = 0; c < AB_ARRAY_SIZE(calls); c++) {
		int nr = rename_call_nr(pol, calls[c]);
		int r = nr < 0 ? 0 : add_rule(ctx, SCMP_ACT_NOTIFY, nr, calls[c], 0, NULL, err);
		if (r < 0)
			return r;
	}
	return 0;
}

static int add_extra_deny(scmp_filter_ctx ctx, const ab_seccomp_policy *pol, ab_err *err)
{
	for (size_t i = 0; i < pol->extra_deny.n; i++) {
		const char *name = pol->extra_deny.v[i];
		int nr = resolve_nr(name);
		/* Absent here, or already denied (an ENOSYS entry keeps ENOSYS). */
		if (nr < 0 || find_deny(name))
			continue;
		int r = add_rule(ctx, deny_act(pol, EPERM), nr, name, 0, NULL, err);
		if (r < 0)
			return r;
	}
	return 0;
}

static int set_attrs(scmp_filter_ctx ctx, ab_err *err)
{
	static const struct {
		enum scmp_filter_attr attr;
		uint32_t value;
		const char *name;
	} attrs[] = {
		/* i386 and x32 entry points are not in the filter: kill. */
		{SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS, "bad-arch action"},
		/* The child sets no_new_privs itself; no threads to sync. */
		{SCMP_FLTATR_CTL_NNP, 0, "no_new_privs"},
		{SCMP_FLTATR_CTL_TSYNC, 0, "thread sync"},
		/* Binary search over syscall numbers keeps the ioctl/socket
		 * paths short (allowed calls are cached by the kernel anyway). */
		{SCMP_FLTATR_CTL_OPTIMIZE, 2, "binary tree"},
	};
	for (size_t i = 0; i < AB_ARRAY_SIZE(attrs); i++) {
		int r = seccomp_attr_set(ctx, attrs[i].attr, attrs[i].value);
		if (r < 0)
			return ab_fail(err, -r, "seccomp: set the %s attribute", attrs[i].name);
	}
	return 0;
}

/* Host unix sockets bound after the start: every connect notifies (the
 * address is behind a pointer, so the filter cannot tell a unix path from a
 * TCP port); the parent decides and carries it out (src/observe/supervise.c).  A
 * connect the profile denies stays a denial. */
static int connect_nr(const ab_seccomp_policy *pol)
{
	int nr = resolve_nr("connect");
	const deny_entry *e = find_deny("connect");
	if (!pol->notify_connect || nr < 0 || ab_strv_contains(&pol->extra_deny, "connect") ||
	    (e && entry_active(pol, e)))
		return -1;
	return nr;
}

bool ab_seccomp_notifies_connect(const ab_seccomp_policy *pol, int nr)
{
	return nr >= 0 && connect_nr(pol) == nr;
}

static int add_connect_rule(scmp_filter_ctx ctx, const ab_seccomp_policy *pol, ab_err *err)
{
	int nr = connect_nr(pol);
	return nr < 0 ? 0 : add_rule(ctx, SCMP_ACT_NOTIFY, nr, "connect", 0, NULL, err);
}

static int build_ctx(const ab_seccomp_policy *pol, scmp_filter_ctx *out, ab_err *err)
{
	_cleanup_scmp_ scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
	if (!ctx)
		return ab_fail(err, ENOMEM, "seccomp: seccomp_init");
	int r = set_attrs(ctx, err);
	if (r >= 0)
		r = add_table_rules(ctx, pol, err);
	if (r >= 0)
		r = add_namespace_rules(ctx, pol, err);
	if (r >= 0)
		r = add_ioctl_rules(ctx, pol, err);
	if (r >= 0)
		r = add_socket_rules(ctx, pol, err);
	if (r >= 0)
		r = add_mode_rules(ctx, pol, err);
	if (r >= 0)
		r = add_extra_deny(ctx, pol, err);
	if (r >= 0)
		r = add_exec_rules(ctx, pol, err);
	if (r >= 0)
		r = add_rename_rules(ctx, pol, err);
	if (r >= 0)
		r = add_connect_rule(ctx, pol, err);
	if (r < 0)
		return r;
	*out = ctx;
	ctx = NULL;
	return 0;
}

/* libseccomp 2.5 exports only to an fd: use a memfd and read it back. */
static int export_ctx(scmp_filter_ctx ctx, bool pfc, char **buf, size_t *len, ab_err *err)
{
	const char *what = pfc ? "PFC" : "BPF";
	_cleanup_close_ int fd = memfd_create("agentbox-seccomp", MFD_CLOEXEC);
	if (fd < 0)
		return ab_fail(err, errno, "seccomp: memfd_create");
	int r = pfc ? seccomp_export_pfc(ctx, fd) : seccomp_export_bpf(ctx, fd);
	if (r < 0)
		return ab_fail(err, -r, "seccomp: export the filter as %s", what);
	struct stat st;
	if (fstat(fd, &st) < 0)
		return ab_fail(err, errno, "seccomp: fstat the exported %s", what);
	if (st.st_size < 0 || st.st_size > AB_SECCOMP_EXPORT_MAX)
		return ab_fail(err, EFBIG, "seccomp: exported %s is %lld bytes", what,
			       (long long)st.st_size);
	size_t size = (size_t)st.st_size;
	_cleanup_free_ char *b = malloc(size + 1);
	if (!b)
		return ab_fail(err, ENOMEM, "seccomp: read the exported %s", what);
	for (size_t off = 0; off < size;) {
		ssize_t n = pread(fd, b + off, size - off, (off_t)off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return ab_fail(err, n < 0 ? errno : EIO, "seccomp: read the exported %s", what);
		off += (size_t)n;
	}
	b[size] = '\0';
	*buf = TAKE_PTR(b);
	*len = size;
	return 0;
}

/* ---- program 2: the guard, a tiny assembler with forward labels ---- */

enum { L_NEXT = -1, L_ALLOW, L_ENOSYS, L_EPERM, L_KILL, L_PERSONA, L_COUNT };
#define GUARD_MAX 24

typedef struct guard_asm {
	struct sock_filter f[GUARD_MAX];
	signed char jt[GUARD_MAX], jf[GUARD_MAX]; /* label ids or L_NEXT */
	int at[L_COUNT];                          /* where each label sits, -1 unset */
	size_t n;
	bool overflow;
} guard_asm;

static void g_emit(guard_asm *a, uint16_t code, uint32_t k, int jt, int jf)
{
	if (a->n >= GUARD_MAX) {
		a->overflow = true;
		return;
	}
	a->f[a->n] = (struct sock_filter){code, 0, 0, k};
	a->jt[a->n] = (signed char)jt;
	a->jf[a->n] = (signed char)jf;
	a->n++;
}

static void g_label(guard_asm *a, int label)
{
	a->at[label] = (int)a->n;
}

static int g_link(guard_asm *a)
{
	if (a->overflow)
		return -E2BIG;
	for (size_t i = 0; i < a->n; i++) {
		if (BPF_CLASS(a->f[i].code) != BPF_JMP)
			continue;
		int labels[2] = {a->jt[i], a->jf[i]};
		for (int j = 0; j < 2; j++) {
			int target = labels[j] == L_NEXT ? (int)i + 1 : a->at[labels[j]];
			int off = target - (int)i - 1;
			if (target < 0 || off < 0 || off > 255)
				return -EINVAL;
			if (j == 0)
				a->f[i].jt = (uint8_t)off;
			else
				a->f[i].jf = (uint8_t)off;
		}
	}
	return 0;
}

#define LD_ABS (BPF_LD | BPF_W | BPF_ABS)
#define JEQ (BPF_JMP | BPF_JEQ | BPF_K)
#define JGE (BPF_JMP | BPF_JGE | BPF_K)
#define JGT (BPF_JMP | BPF_JGT | BPF_K)
#define AND (BPF_ALU | BPF_AND | BPF_K)
#define RET (BPF_RET | BPF_K)

static void guard_emit(guard_asm *a, bool persona)
{
	g_emit(a, LD_ABS, offsetof(struct seccomp_data, arch), L_NEXT, L_NEXT);
	g_emit(a, JEQ, AB_AUDIT_ARCH, L_NEXT, L_KILL);
	g_emit(a, LD_ABS, offsetof(struct seccomp_data, nr), L_NEXT, L_NEXT);
	/* -1 is how a tracer skips a syscall: leave it to the kernel, as
	 * libseccomp does, so strace/gdb syscall injection keeps working. */
	g_emit(a, JEQ, 0xffffffffu, L_ALLOW, L_NEXT);
#ifdef AB_X32_SYSCALL_BIT
	g_emit(a, JGE, AB_X32_SYSCALL_BIT, L_KILL, L_NEXT);
#endif
	if (persona)
		g_emit(a, JEQ, __NR_personality, L_PERSONA, L_NEXT);
	g_emit(a, JGT, AB_SECCOMP_MAX_KNOWN_NR, L_ENOSYS, L_ALLOW);
	if (persona) {
		g_label(a, L_PERSONA);
		g_emit(a, LD_ABS, AB_ARG0_LO, L_NEXT, L_NEXT);
		g_emit(a, JEQ, 0xffffffffu, L_ALLOW, L_NEXT); /* the query */
		g_emit(a, AND, ~AB_PERSONA_OK_BITS, L_NEXT, L_NEXT);
		g_emit(a, JEQ, 0, L_ALLOW, L_EPERM);
		g_label(a, L_EPERM);
		g_emit(a, RET, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA), L_NEXT, L_NEXT);
	}
	g_label(a, L_ALLOW);
	g_emit(a, RET, SECCOMP_RET_ALLOW, L_NEXT, L_NEXT);
	g_label(a, L_ENOSYS);
	g_emit(a, RET, SECCOMP_RET_ERRNO | (ENOSYS & SECCOMP_RET_DATA), L_NEXT, L_NEXT);
	g_label(a, L_KILL);
	g_emit(a, RET, SECCOMP_RET_KILL_PROCESS, L_NEXT, L_NEXT);
}

static int build_guard(bool persona, struct sock_fprog *out, ab_err *err)
{
	guard_asm a;
	memset(&a, 0, sizeof(a));
	for (int i = 0; i < L_COUNT; i++)
		a.at[i] = -1;
	guard_emit(&a, persona);
	int r = g_link(&a);
	if (r < 0)
		return ab_fail(err, -r, "seccomp: assemble the guard program");
	struct sock_filter *f = calloc(a.n, sizeof(*f));
	if (!f)
		return ab_fail(err, ENOMEM, "seccomp: assemble the guard program");
	memcpy(f, a.f, a.n * sizeof(*f));
	out->filter = f;
	out->len = (unsigned short)a.n;
	return 0;
}

/* ---- public ---- */

void ab_seccomp_prog_free(ab_seccomp_prog *p)
{
	if (!p)
		return;
	for (size_t i = 0; i < AB_SECCOMP_MAX_PROGS; i++)
		free(p->progs[i].filter);
	memset(p, 0, sizeof(*p));
}

static int compile_libseccomp(const ab_seccomp_policy *pol, struct sock_fprog *out, ab_err *err)
{
	_cleanup_scmp_ scmp_filter_ctx ctx = NULL;
	int r = build_ctx(pol, &ctx, err);
	if (r < 0)
		return r;
	_cleanup_free_ char *bpf = NULL;
	size_t len = 0;
	r = export_ctx(ctx, false, &bpf, &len, err);
	if (r < 0)
		return r;
	size_t ninsn = len / sizeof(struct sock_filter);
	if (len == 0 || len % sizeof(struct sock_filter) != 0 || ninsn > BPF_MAXINSNS)
		return ab_fail(err, E2BIG, "seccomp: the filter has %zu bytes (at most %d instructions)",
			       len, BPF_MAXINSNS);
	out->filter = (struct sock_filter *)(void *)TAKE_PTR(bpf);
	out->len = (unsigned short)ninsn;
	return 0;
}

int ab_seccomp_compile(const ab_seccomp_policy *pol, ab_seccomp_prog *out, ab_err *err)
{
	memset(out, 0, sizeof(*out));
	int r = ab_seccomp_validate(pol, err);
	if (r < 0)
		return r;
	if (pol->disabled)
		return 0; /* ablation: nothing to load */
	r = compile_libseccomp(pol, &out->progs[0], err);
	if (r >= 0)
		r = build_guard(personality_guarded(pol), &out->progs[1], err);
	if (r < 0) {
		ab_seccomp_prog_free(out);
		return r;
	}
	out->nprogs = 2;
	return 0;
}

void ab_seccomp_deny_errnos(const ab_seccomp_policy *pol, int16_t *out, size_t n)
{
	for (size_t nr = 0; nr < n; nr++)
		out[nr] = EPERM; /* anything the policy does not know: fail closed */
	static const char *const families[] = {"socket", "socketpair"};
	for (size_t i = 0; i < AB_ARRAY_SIZE(families); i++) {
		int nr = resolve_nr(families[i]);
		if (nr >= 0 && (size_t)nr < n)
			out[nr] = EAFNOSUPPORT;
	}
	for (size_t i = 0; i < pol->extra_deny.n; i++) {
		int nr = resolve_nr(pol->extra_deny.v[i]);
		if (nr >= 0 && (size_t)nr < n)
			out[nr] = EPERM;
	}
	/* last: a table entry keeps its own errno even when also in syscalls.deny */
	for (size_t i = 0; i < AB_ARRAY_SIZE(deny_table); i++) {
		int nr = resolve_nr(deny_table[i].name);
		if (nr >= 0 && (size_t)nr < n && entry_active(pol, &deny_table[i]))
			out[nr] = (deny_table[i].flags & D_ENOSYS) ? ENOSYS : EPERM;
	}
}

int ab_seccomp_deny_errno(const ab_seccomp_policy *pol, int nr)
{
	int16_t t[AB_SECCOMP_MAX_KNOWN_NR + 1];
	if (nr < 0 || nr > AB_SECCOMP_MAX_KNOWN_NR)
		return EPERM;
	ab_seccomp_deny_errnos(pol, t, AB_ARRAY_SIZE(t));
	return t[nr];
}

void ab_seccomp_name(int nr, char *buf, size_t size)
{
	for (size_t i = 0; i < AB_ARRAY_SIZE(new_syscalls); i++) {
		if (new_syscalls[i].nr == nr) {
			snprintf(buf, size, "%s", new_syscalls[i].name);
			return;
		}
	}
	_cleanup_free_ char *name = seccomp_syscall_resolve_num_arch(SCMP_ARCH_NATIVE, nr);
	if (name)
		snprintf(buf, size, "%s", name);
	else
		snprintf(buf, size, "syscall_%d", nr);
}

#define AB_SECCOMP_WAIT_KILLABLE_RECV (1UL << 5) /* SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV */

/* Child, after no_new_privs, right before exec: no allocation here. */
int ab_seccomp_apply(const ab_seccomp_prog *p, int *listener, ab_err *err)
{
	if (p->nprogs > AB_SECCOMP_MAX_PROGS)
		return ab_fail(err, EINVAL, "seccomp: %zu programs", p->nprogs);
	for (size_t i = 0; i < p->nprogs; i++) {
		/* once agentbox has taken a notification, only a fatal signal ends
		 * the caller's wait (Linux 5.19): a handled signal no longer
		 * restarts a connect agentbox already carried out (EISCONN), nor
		 * sends a Go program's preemption signals round in circles */
		unsigned flags = i == 0 && listener ? SECCOMP_FILTER_FLAG_NEW_LISTENER |
							      AB_SECCOMP_WAIT_KILLABLE_RECV
						    : 0;
		long r = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, flags, &p->progs[i]);
		if (r < 0 && errno == EINVAL && (flags & AB_SECCOMP_WAIT_KILLABLE_RECV)) {
			flags &= ~AB_SECCOMP_WAIT_KILLABLE_RECV; /* before Linux 5.19 */
			r = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, flags, &p->progs[i]);
		}
		if (r >= 0) {
			if (flags)
				*listener = (int)r;
			continue;
		}
		int e = errno;
		ab_fail(err, e, "seccomp: load filter %zu of %zu", i + 1, p->nprogs);
		if (e == EACCES)
			ab_err_hint(err, "no_new_privs must be set before the filter is loaded");
		else if (e == EINVAL)
			ab_err_hint(err, "the kernel refused the filter; `agentbox doctor` checks "
					 "seccomp support");
		return -e;
	}
	return 0;
}

/* ---- rendering for tests and `explain` ---- */

static const char *ld_name(uint32_t k)
{
	if (k == offsetof(struct seccomp_data, nr))
		return "$syscall";
	if (k == offsetof(struct seccomp_data, arch))
		return "$arch";
	if (k == AB_ARG0_LO)
		return "$a0.lo32";
	return "?";
}

static void dump_ret(FILE *out, size_t i, uint32_t k)
{
	uint32_t action = k & SECCOMP_RET_ACTION_FULL;
	if (action == SECCOMP_RET_ALLOW)
		fprintf(out, "# %3zu: action ALLOW;\n", i);
	else if (action == SECCOMP_RET_ERRNO)
		fprintf(out, "# %3zu: action ERRNO(%u);\n", i, k & SECCOMP_RET_DATA);
	else if (action == SECCOMP_RET_KILL_PROCESS)
		fprintf(out, "# %3zu: action KILL_PROCESS;\n", i);
	else
		fprintf(out, "# %3zu: action 0x%08x;\n", i, k);
}

static void dump_guard(const struct sock_fprog *p, FILE *out)
{
	fputs("#\n# guard program (hand-written classic BPF, loaded after the filter above;\n"
	      "# the kernel runs both and applies the stricter result)\n#\n",
	      out);
	for (size_t i = 0; i < p->len; i++) {
		const struct sock_filter *f = &p->filter[i];
		const char *op = BPF_OP(f->code) == BPF_JEQ ? "==" :
				 BPF_OP(f->code) == BPF_JGE ? ">=" : ">";
		switch (f->code) {
		case LD_ABS:
			fprintf(out, "# %3zu: load %s\n", i, ld_name(f->k));
			break;
		case JEQ:
		case JGE:
		case JGT:
			fprintf(out, "# %3zu: if (A %s 0x%08x) goto %zu else goto %zu\n", i, op,
				f->k, i + 1 + f->jt, i + 1 + f->jf);
			break;
		case AND:
			fprintf(out, "# %3zu: A &= 0x%08x\n", i, f->k);
			break;
		case RET:
			dump_ret(out, i, f->k);
			break;
		default:
			fprintf(out, "# %3zu: code 0x%04x k 0x%08x\n", i, f->code, f->k);
		}
	}
	fputs("#\n", out);
}

int ab_seccomp_export_pfc(const ab_seccomp_policy *pol, FILE *out, ab_err *err)
{
	int r = ab_seccomp_validate(pol, err);
	if (r < 0)
		return r;
	if (pol->disabled) {
		fputs("# seccomp disabled (test ablation): no filter is loaded\n", out);
	} else {
		_cleanup_scmp_ scmp_filter_ctx ctx = NULL;
		r = build_ctx(pol, &ctx, err);
		if (r < 0)
			return r;
		_cleanup_free_ char *pfc = NULL;
		size_t len = 0;
		r = export_ctx(ctx, true, &pfc, &len, err);
		if (r < 0)
			return r;
		struct sock_fprog guard = {0, NULL};
		r = build_guard(personality_guarded(pol), &guard, err);
		if (r < 0)
			return r;
		fwrite(pfc, 1, len, out);
		dump_guard(&guard, out);
		free(guard.filter);
	}
	if (fflush(out) != 0 || ferror(out))
		return ab_fail(err, EIO, "seccomp: write the filter");
	return 0;
}

/* "LABEL name name ..." for active table entries with these flags. */
static int push_table_line(ab_strv *lines, const ab_seccomp_policy *pol, const char *label,
			   unsigned flags)
{
	char *buf = NULL;
	size_t size = 0, count = 0;
	FILE *f = open_memstream(&buf, &size);
	if (!f)
		return -ENOMEM;
	fputs(label, f);
	for (size_t i = 0; i < AB_ARRAY_SIZE(deny_table); i++) {
		const deny_entry *e = &deny_table[i];
		if ((e->flags & (D_ENOSYS | D_RELAX)) != flags || !entry_active(pol, e) ||
		    resolve_nr(e->name) < 0)
			continue;
		fprintf(f, " %s", e->name);
		count++;
	}
	if (fclose(f) != 0) {
		free(buf);
		return -ENOMEM;
	}
	if (count == 0) {
		free(buf);
		return 0;
	}
	return ab_strv_push_take(lines, buf);
}

/* "LABEL name ..." for the entries of a profile list that take effect. */
static int push_list_line(ab_strv *lines, const ab_seccomp_policy *pol, const char *label,
			  bool deny)
{
	const ab_strv *l = deny ? &pol->extra_deny : &pol->allow;
	_cleanup_strv_ ab_strv names = {NULL, 0};
	for (size_t i = 0; i < l->n; i++) {
		const char *n = l->v[i];
		if (deny ? (find_deny(n) != NULL || resolve_nr(n) < 0) : !relaxed(pol, n))
			continue;
		if (ab_strv_push_unique(&names, n) < 0)
			return -ENOMEM;
	}
	if (names.n == 0)
		return 0;
	size_t len = strlen(label) + 1;
	for (size_t i = 0; i < names.n; i++)
		len += strlen(names.v[i]) + 1;
	char *s = malloc(len);
	if (!s)
		return -ENOMEM;
	size_t o = (size_t)snprintf(s, len, "%s", label);
	for (size_t i = 0; i < names.n; i++)
		o += (size_t)snprintf(s + o, len - o, " %s", names.v[i]);
	return ab_strv_push_take(lines, s);
}

static int push_fixed_lines(ab_strv *lines, const ab_seccomp_policy *pol)
{
	char ns[256];
	size_t o = 0;
	for (size_t i = 0; i + 1 < AB_ARRAY_SIZE(ns_flags); i++)
		o += (size_t)snprintf(ns + o, sizeof(ns) - o, "%s%s", i ? " " : "", ns_flags[i].name);
	char *fixed[7] = {
		ab_strdup("EPERM: chmod fchmod fchmodat fchmodat2 open openat creat mknod mknodat "
			  "mkdir mkdirat with set-user-ID or set-group-ID mode bits; ENOSYS: openat2"),
		ab_asprintf("EPERM: clone and unshare creating namespaces (%s; unshare also "
			    "CLONE_NEWTIME)", ns),
		ab_strdup("EPERM: ioctl TIOCSTI TIOCLINUX (terminal injection; low 32 bits of "
			  "the request compared)"),
		ab_strdup("EAFNOSUPPORT: socket and socketpair for families other than AF_UNIX "
			  "AF_INET AF_INET6 AF_NETLINK"),
		personality_guarded(pol) ?
			ab_strdup("EPERM: personality except the query and PER_LINUX/PER_LINUX32 "
				  "with UNAME26/ADDR_NO_RANDOMIZE") :
			ab_strdup(""),
		ab_asprintf("ENOSYS: syscall numbers above %d (newer than this build knows)",
			    AB_SECCOMP_MAX_KNOWN_NR),
		ab_strdup("KILL: foreign system call ABIs (" AB_FOREIGN_ABIS ")"),
	};
	int r = 0;
	for (size_t i = 0; i < AB_ARRAY_SIZE(fixed); i++) {
		if (r == 0 && fixed[i] && fixed[i][0] == '\0') {
			free(fixed[i]);
			continue;
		}
		if (r == 0)
			r = ab_strv_push_take(lines, fixed[i]); /* frees on failure */
		else
			free(fixed[i]);
	}
	return r;
}

int ab_seccomp_describe(const ab_seccomp_policy *pol, ab_strv *lines, ab_err *err)
{
	int r = ab_seccomp_validate(pol, err);
	if (r < 0)
		return r;
	if (pol->disabled) {
		r = ab_strv_push(lines, "seccomp: disabled (test ablation), no filter is loaded");
		return r < 0 ? ab_fail(err, -r, "seccomp: describe") : 0;
	}
	r = push_table_line(lines, pol, "EPERM:", 0);
	if (r >= 0)
		r = push_table_line(lines, pol, "EPERM (relaxable with syscalls.allow):", D_RELAX);
	if (r >= 0)
		r = push_table_line(lines, pol, "ENOSYS (user space falls back):", D_ENOSYS);
	if (r >= 0)
		r = push_fixed_lines(lines, pol);
	if (r >= 0)
		r = push_list_line(lines, pol, "EPERM (profile syscalls.deny):", true);
	if (r >= 0)
		r = push_list_line(lines, pol, "allowed again (profile syscalls.allow):", false);
	return r < 0 ? ab_fail(err, -r, "seccomp: describe") : 0;
}
