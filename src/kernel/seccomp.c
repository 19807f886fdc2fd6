/* SPDX-License-Identifier: MIT */
/*
 * The seccomp filter (include/agentbox/seccomp.h).
 *
 * Which process: the PARENT validates the profile's syscall lists (this
 * file), compiles the policy with libseccomp into classic BPF
 * (seccomp_filter.c) and assembles the guard program (seccomp_prog.c), after
 * clone, while the child builds its root, and renders the policy for
 * `agentbox explain`.  The CHILD only calls ab_seccomp_apply()
 * (seccomp_prog.c), the very last step before exec; it does not allocate.
 *
 * This file is the policy itself: the tables below, syscall names and
 * numbers, the profile's lists checked, the errno of each denial, and the
 * words `explain` shows.
 *
 * A deny list by contract (default ALLOW), as in flatpak and firejail: the
 * sandbox runs arbitrary developer tools, and an allow list breaks them in ways
 * nobody predicts.  Denied calls fail with EPERM, or ENOSYS where user space has
 * a fallback (clone3 -> clone, new mount API -> mount(2), itself EPERM), so
 * tools degrade instead of dying.  Only foreign ABIs are killed.
 *
 * Program 1 (libseccomp, the native arch only; no i386/x32 arch is added):
 *   another arch (i386 via int 0x80), x32 numbers   KILL_PROCESS (bad arch)
 *   sc_deny_table[] below                           EPERM, or ENOSYS
 *   clone, unshare with any CLONE_NEW* flag         EPERM: one MASKED_EQ rule
 *                                                   per flag, libseccomp cannot
 *                                                   say "flags & mask != 0"
 *   ioctl TIOCSTI, TIOCLINUX (low 32 bits of cmd)   EPERM (CVE-2019-10063)
 *   socket, socketpair outside UNIX/INET/INET6/NETLINK   EAFNOSUPPORT
 *   set-id mode bits (chmod family, open, openat, ...)   EPERM, openat2 ENOSYS;
 *                                                   only with a writable
 *                                                   idmapped grant (the plan)
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
#include "seccomp_int.h"

#include <errno.h>
#include <sched.h>
#include <seccomp.h>
#include <stdio.h>
#include <string.h>

#define AB_SECCOMP_NAME_MAX 64 /* longest syscall name accepted from a profile */
#define AB_SECCOMP_LIST_MAX AB_PROFILE_MAX_SYSCALLS /* after merging, too */

/* Syscalls newer than libseccomp 2.5.4's table (it stops at futex_requeue,
 * 456).  From 424 on every architecture shares the asm-generic numbers, so
 * this serves x86_64 and aarch64 alike.  Checked against Linux 6.18. */
static const struct {
	const char *name;
	int nr;
} new_syscalls[] = {
	{"statmount", 457},         {"listmount", 458},        {"lsm_get_self_attr", 459},
	{"lsm_set_self_attr", 460}, {"lsm_list_modules", 461}, {"mseal", 462},
	{"setxattrat", 463},        {"getxattrat", 464},       {"listxattrat", 465},
	{"removexattrat", 466},     {"open_tree_attr", 467},   {"file_getattr", 468},
	{"file_setattr", 469},
};
_Static_assert(AB_SECCOMP_MAX_KNOWN_NR == 469,
	       "a new kernel: review its syscalls, extend new_syscalls[] and sc_deny_table[]");

/* At least the union of flatpak's and firejail's default lists.  Names absent
 * on this architecture (umount, stime, vm86 on x86_64; most legacy calls on
 * aarch64) are skipped. */
// clang-format off
const sc_deny_entry sc_deny_table[] = {
	/* Kernel keyrings are not namespaced. */
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
// clang-format on

const size_t sc_deny_table_n = AB_ARRAY_SIZE(sc_deny_table);

/* Syscalls with argument rules (seccomp_filter.c): never relaxable as a whole. */
static const char *const special_names[] = {"clone", "unshare", "socket", "socketpair", "ioctl"};

// clang-format off
const sc_ns_flag sc_ns_flags[] = {
	{CLONE_NEWNS, "CLONE_NEWNS"},   {CLONE_NEWCGROUP, "CLONE_NEWCGROUP"},
	{CLONE_NEWUTS, "CLONE_NEWUTS"}, {CLONE_NEWIPC, "CLONE_NEWIPC"},
	{CLONE_NEWUSER, "CLONE_NEWUSER"}, {CLONE_NEWPID, "CLONE_NEWPID"},
	{CLONE_NEWNET, "CLONE_NEWNET"},
	/* Last: unshare only.  clone() takes its low byte as the exit signal,
	 * so CLONE_NEWTIME can only come through unshare or clone3. */
	{CLONE_NEWTIME, "CLONE_NEWTIME"},
};
// clang-format on

const size_t sc_ns_flags_n = AB_ARRAY_SIZE(sc_ns_flags);

/* ---- names ---- */

int sc_resolve_nr(const char *name)
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

const sc_deny_entry *sc_find_deny(const char *name)
{
	for (size_t i = 0; i < sc_deny_table_n; i++)
		if (strcmp(sc_deny_table[i].name, name) == 0)
			return &sc_deny_table[i];
	return NULL;
}

bool ab_seccomp_denial_is_probe(const char *name)
{
	const sc_deny_entry *e = sc_find_deny(name);
	return e && (e->flags & D_PROBE);
}

static bool is_special(const char *name)
{
	for (size_t i = 0; i < AB_ARRAY_SIZE(special_names); i++)
		if (strcmp(special_names[i], name) == 0)
			return true;
	return false;
}

bool sc_relaxed(const ab_seccomp_policy *pol, const char *name)
{
	return ab_strv_contains(&pol->allow, name) && !ab_strv_contains(&pol->extra_deny, name);
}

bool sc_entry_active(const ab_seccomp_policy *pol, const sc_deny_entry *e)
{
	return !((e->flags & D_RELAX) && sc_relaxed(pol, e->name));
}

bool sc_personality_guarded(const ab_seccomp_policy *pol)
{
	return !sc_relaxed(pol, "personality");
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
	if (sc_resolve_nr(name) == NR_UNKNOWN) {
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
	for (size_t i = 0; i < sc_deny_table_n && o < sizeof(buf); i++)
		if (sc_deny_table[i].flags & D_RELAX)
			o += (size_t)snprintf(buf + o, sizeof(buf) - o, " %s",
					      sc_deny_table[i].name);
	ab_err_hint(err, "%s", buf);
}

static int check_relaxable(const char *name, ab_err *err)
{
	const sc_deny_entry *e = sc_find_deny(name);
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
			return ab_fail(err, 0,
				       "syscalls.deny: \"execve\" cannot be denied "
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

/* ---- the errno of a denial, a number's name ---- */

void ab_seccomp_deny_errnos(const ab_seccomp_policy *pol, int16_t *out, size_t n)
{
	for (size_t nr = 0; nr < n; nr++)
		out[nr] = EPERM; /* anything the policy does not know: fail closed */
	static const char *const families[] = {"socket", "socketpair"};
	for (size_t i = 0; i < AB_ARRAY_SIZE(families); i++) {
		int nr = sc_resolve_nr(families[i]);
		if (nr >= 0 && (size_t)nr < n)
			out[nr] = EAFNOSUPPORT;
	}
	for (size_t i = 0; i < pol->extra_deny.n; i++) {
		int nr = sc_resolve_nr(pol->extra_deny.v[i]);
		if (nr >= 0 && (size_t)nr < n)
			out[nr] = EPERM;
	}
	/* last: a table entry keeps its own errno even when also in syscalls.deny */
	for (size_t i = 0; i < sc_deny_table_n; i++) {
		int nr = sc_resolve_nr(sc_deny_table[i].name);
		if (nr >= 0 && (size_t)nr < n && sc_entry_active(pol, &sc_deny_table[i]))
			out[nr] = (sc_deny_table[i].flags & D_ENOSYS) ? ENOSYS : EPERM;
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

/* ---- the policy in words, for `explain` ---- */

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
	for (size_t i = 0; i < sc_deny_table_n; i++) {
		const sc_deny_entry *e = &sc_deny_table[i];
		if ((e->flags & (D_ENOSYS | D_RELAX)) != flags || !sc_entry_active(pol, e) ||
		    sc_resolve_nr(e->name) < 0)
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
		if (deny ? (sc_find_deny(n) != NULL || sc_resolve_nr(n) < 0) : !sc_relaxed(pol, n))
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
	for (size_t i = 0; i + 1 < sc_ns_flags_n; i++)
		o += (size_t)snprintf(ns + o, sizeof(ns) - o, "%s%s", i ? " " : "",
				      sc_ns_flags[i].name);
	char *fixed[7] = {
		pol->setid_unchecked /* no rule: the plan's explain line says why */
			? ab_strdup("")
			: ab_strdup(
				  "EPERM: chmod fchmod fchmodat fchmodat2 open openat creat mknod "
				  "mknodat mkdir mkdirat with set-user-ID or set-group-ID mode "
				  "bits; ENOSYS: openat2"),
		ab_asprintf("EPERM: clone and unshare creating namespaces (%s; unshare also "
			    "CLONE_NEWTIME)",
			    ns),
		ab_strdup("EPERM: ioctl TIOCSTI TIOCLINUX (terminal injection; low 32 bits of "
			  "the request compared)"),
		ab_strdup("EAFNOSUPPORT: socket and socketpair for families other than AF_UNIX "
			  "AF_INET AF_INET6 AF_NETLINK"),
		sc_personality_guarded(pol)
			? ab_strdup("EPERM: personality except the query and PER_LINUX/PER_LINUX32 "
				    "with UNAME26/ADDR_NO_RANDOMIZE")
			: ab_strdup(""),
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
