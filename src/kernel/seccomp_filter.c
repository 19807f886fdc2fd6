/* SPDX-License-Identifier: MIT */
/*
 * Program 1 of the seccomp filter (seccomp.c describes both): the policy as
 * libseccomp rules, exported as classic BPF for the child to load, or as PFC
 * text for `explain --seccomp`.  Parent only, after clone.
 *
 * Every denying rule fails the call with its errno, or notifies the parent,
 * which answers with the same errno (notify_denials); the exec, rename and
 * connect rules notify and let the parent carry the call out or continue it.
 */
#include "agentbox/seccomp.h"
#include "seccomp_int.h"

#include <errno.h>
#include <fcntl.h>
#include <seccomp.h>
#include <stdint.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

/* clone(2)'s flags are argument 0 on x86_64 and aarch64; CLONE_BACKWARDS2
 * architectures (s390, cris) pass them as argument 1. */
#define AB_CLONE_FLAGS_ARG 0
#define AB_SECCOMP_EXPORT_MAX (1 << 20) /* bytes read back from libseccomp */

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

/* A denying rule's action: its errno, or a user notification the parent
 * answers with the same errno (notify_denials).  ENOSYS rules stay plain. */
static uint32_t deny_act(const ab_seccomp_policy *pol, int e)
{
	if (pol->notify_denials && e != ENOSYS)
		return SCMP_ACT_NOTIFY;
	return SCMP_ACT_ERRNO((uint32_t)e);
}

static int add_rule(scmp_filter_ctx ctx, uint32_t action, int nr, const char *name, unsigned cnt,
		    const struct scmp_arg_cmp *cmp, ab_err *err)
{
	int r = seccomp_rule_add_array(ctx, action, nr, cnt, cmp);
	if (r < 0)
		return ab_fail(err, -r, "seccomp: add a rule for %s", name);
	return 0;
}

/* The native number of a syscall the policy needs rules for: absent = error. */
static int required_nr(const char *name, ab_err *err)
{
	int nr = sc_resolve_nr(name);
	if (nr < 0)
		return ab_fail(err, ENOSYS, "seccomp: no native \"%s\" on this architecture", name);
	return nr;
}

static int add_table_rules(scmp_filter_ctx ctx, const ab_seccomp_policy *pol, ab_err *err)
{
	for (size_t i = 0; i < sc_deny_table_n; i++) {
		const sc_deny_entry *e = &sc_deny_table[i];
		int nr = sc_resolve_nr(e->name);
		if (nr == NR_UNKNOWN) /* a typo here, or an old libseccomp: fail closed */
			return ab_fail(err, ENOSYS, "seccomp: libseccomp does not know \"%s\"",
				       e->name);
		if (nr == NR_OTHER_ARCH || !sc_entry_active(pol, e))
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
		for (size_t i = 0; i < sc_ns_flags_n; i++) {
			if (is_clone && sc_ns_flags[i].flag == CLONE_NEWTIME)
				continue;
			struct scmp_arg_cmp cmp = {is_clone ? AB_CLONE_FLAGS_ARG : 0,
						   SCMP_CMP_MASKED_EQ, sc_ns_flags[i].flag,
						   sc_ns_flags[i].flag};
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

/* No set-user-ID or set-group-ID bits where files land on the host owned by
 * someone else than the sandbox's own host uid: a writable idmapped grant of
 * a root caller, whose new files belong to host root.  Every syscall that
 * takes a mode gets EPERM when the mode has either bit; openat2 carries its
 * mode in a struct the filter cannot read, so it is ENOSYS (glibc and everyone
 * else fall back to openat).  The plan leaves them out where no such grant
 * exists (setid_unchecked): argument rules keep open and openat out of the
 * kernel's action cache, so every open would run this program. */
static const struct {
	const char *name;
	int nr_fallback; /* x86_64 number for calls libseccomp 2.5 does not know */
	unsigned arg;
} mode_calls[] = {
	{"chmod", -1, 1},   {"fchmod", -1, 1}, {"fchmodat", -1, 2}, {"fchmodat2", 452, 2},
	{"creat", -1, 1},   {"open", -1, 2},   {"openat", -1, 3},   {"mknod", -1, 1},
	{"mknodat", -1, 2}, {"mkdir", -1, 1},  {"mkdirat", -1, 2},
};

static int add_mode_rules(scmp_filter_ctx ctx, const ab_seccomp_policy *pol, ab_err *err)
{
	if (pol->setid_unchecked)
		return 0; /* openat2 too: its mode was its only reason */
	for (size_t i = 0; i < AB_ARRAY_SIZE(mode_calls); i++) {
		int nr = sc_resolve_nr(mode_calls[i].name);
#ifdef __x86_64__
		if (nr < 0)
			nr = mode_calls[i].nr_fallback;
#endif
		if (nr < 0)
			continue; /* not on this architecture (e.g. chmod on aarch64) */
		static const unsigned bits[] = {S_ISUID, S_ISGID};
		for (size_t b = 0; b < AB_ARRAY_SIZE(bits); b++) {
			struct scmp_arg_cmp cmp = {mode_calls[i].arg, SCMP_CMP_MASKED_EQ, bits[b],
						   bits[b]};
			int r = add_rule(ctx, deny_act(pol, EPERM), nr, mode_calls[i].name, 1, &cmp,
					 err);
			if (r < 0)
				return r;
		}
	}
	int nr = sc_resolve_nr("openat2");
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
	for (size_t c = 0; (pol->notify_exec || pol->notify_learn) && c < AB_ARRAY_SIZE(calls);
	     c++) {
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
/* NAME's number when the notification mode ON has it notify: -1 when ON is
 * off, the call is not on this architecture, or the policy denies it (a
 * denial stays a denial). */
static int notified_nr(const ab_seccomp_policy *pol, bool on, const char *name)
{
	int nr = sc_resolve_nr(name);
	const sc_deny_entry *e = sc_find_deny(name);
	if (!on || nr < 0 || ab_strv_contains(&pol->extra_deny, name) ||
	    (e && sc_entry_active(pol, e)))
		return -1;
	return nr;
}

static int rename_call_nr(const ab_seccomp_policy *pol, const char *name)
{
	/* with notify_create, the creation rules hold the renames */
	return notified_nr(pol, pol->notify_rename && !pol->notify_create, name);
}

static int create_call_nr(const ab_seccomp_policy *pol, const char *name);

bool ab_seccomp_notifies_rename(const ab_seccomp_policy *pol, int nr)
{
	if (pol->notify_rename && pol->notify_create && nr >= 0) {
		static const char *const calls[] = AB_SECCOMP_RENAME_CALLS;
		for (size_t c = 0; c < AB_ARRAY_SIZE(calls); c++)
			if (create_call_nr(pol, calls[c]) == nr)
				return true;
	}
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
		int nr = sc_resolve_nr(name);
		/* Absent here, or already denied (an ENOSYS entry keeps ENOSYS). */
		if (nr < 0 || sc_find_deny(name))
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
	return notified_nr(pol, pol->notify_connect, "connect");
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

/* run --learn: the file calls notify; the parent records the path and
 * continues.  In libseccomp's filter this rule without arguments replaces
 * the set-user-ID mode rules of the same calls, so the parent refuses those
 * modes itself (src/observe/supervise_learn.c).  A call the profile denies
 * stays a denial. */
static int learn_call_nr(const ab_seccomp_policy *pol, const char *name)
{
	return notified_nr(pol, pol->notify_learn, name);
}

bool ab_seccomp_notifies_learn(const ab_seccomp_policy *pol, int nr)
{
	static const char *const calls[] = AB_SECCOMP_LEARN_CALLS;
	for (size_t c = 0; nr >= 0 && c < AB_ARRAY_SIZE(calls); c++)
		if (learn_call_nr(pol, calls[c]) == nr)
			return true;
	return false;
}

static int add_learn_rules(scmp_filter_ctx ctx, const ab_seccomp_policy *pol, ab_err *err)
{
	static const char *const calls[] = AB_SECCOMP_LEARN_CALLS;
	for (size_t c = 0; c < AB_ARRAY_SIZE(calls); c++) {
		int nr = learn_call_nr(pol, calls[c]);
		int r = nr < 0 ? 0 : add_rule(ctx, SCMP_ACT_NOTIFY, nr, calls[c], 0, NULL, err);
		if (r < 0)
			return r;
	}
	return 0;
}

/* New `.git` entries kept off the host: every call that gives something a
 * name notifies, and the parent has it carried out (never continued: the
 * caller's path could change under the kernel's second read).  open and
 * openat only when they create, truncate or write (argument rules: they
 * leave the kernel's action cache); reads go on as before.  A call the
 * profile denies stays a denial. */
static int create_call_nr(const ab_seccomp_policy *pol, const char *name)
{
	return notified_nr(pol, pol->notify_create, name);
}

bool ab_seccomp_notifies_create(const ab_seccomp_policy *pol, int nr)
{
	static const char *const calls[] = AB_SECCOMP_CREATE_CALLS;
	for (size_t c = 0; nr >= 0 && c < AB_ARRAY_SIZE(calls); c++)
		if (create_call_nr(pol, calls[c]) == nr)
			return true;
	return false;
}

static int add_create_rules(scmp_filter_ctx ctx, const ab_seccomp_policy *pol, ab_err *err)
{
	static const char *const calls[] = AB_SECCOMP_CREATE_CALLS;
	for (size_t c = 0; c < AB_ARRAY_SIZE(calls); c++) {
		int nr = create_call_nr(pol, calls[c]);
		if (nr < 0)
			continue;
		int arg = strcmp(calls[c], "open") == 0     ? 1
			  : strcmp(calls[c], "openat") == 0 ? 2
							    : -1;
		if (arg < 0) {
			int r = add_rule(ctx, SCMP_ACT_NOTIFY, nr, calls[c], 0, NULL, err);
			if (r < 0)
				return r;
			continue;
		}
		/* an open that creates, truncates or writes: not a read */
		static const struct {
			uint64_t mask, value;
		} writes[] = {{O_CREAT, O_CREAT},
			      {O_TRUNC, O_TRUNC},
			      {O_ACCMODE, O_WRONLY},
			      {O_ACCMODE, O_RDWR}};
		for (size_t w = 0; w < AB_ARRAY_SIZE(writes); w++) {
			struct scmp_arg_cmp cmp = {(unsigned)arg, SCMP_CMP_MASKED_EQ,
						   writes[w].mask, writes[w].value};
			int r = add_rule(ctx, SCMP_ACT_NOTIFY, nr, calls[c], 1, &cmp, err);
			if (r < 0)
				return r;
		}
	}
	int nr = sc_resolve_nr("openat2");
#ifdef __x86_64__
	if (nr < 0)
		nr = 437;
#endif
	/* the set-id rules deny it already where they apply */
	if (pol->notify_create && pol->setid_unchecked && nr >= 0 &&
	    !ab_strv_contains(&pol->extra_deny, "openat2"))
		return add_rule(ctx, SCMP_ACT_ERRNO(ENOSYS), nr, "openat2", 0, NULL, err);
	return 0;
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
	if (r >= 0)
		r = add_learn_rules(ctx, pol, err);
	if (r >= 0)
		r = add_create_rules(ctx, pol, err);
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
			return ab_fail(err, n < 0 ? errno : EIO, "seccomp: read the exported %s",
				       what);
		off += (size_t)n;
	}
	b[size] = '\0';
	*buf = TAKE_PTR(b);
	*len = size;
	return 0;
}

/* ---- the exports ---- */

int sc_filter_bpf(const ab_seccomp_policy *pol, struct sock_fprog *out, ab_err *err)
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
		return ab_fail(err, E2BIG,
			       "seccomp: the filter has %zu bytes (at most %d instructions)", len,
			       BPF_MAXINSNS);
	out->filter = (struct sock_filter *)(void *)TAKE_PTR(bpf);
	out->len = (unsigned short)ninsn;
	return 0;
}

int sc_filter_pfc(const ab_seccomp_policy *pol, char **buf, size_t *len, ab_err *err)
{
	_cleanup_scmp_ scmp_filter_ctx ctx = NULL;
	int r = build_ctx(pol, &ctx, err);
	if (r < 0)
		return r;
	return export_ctx(ctx, true, buf, len, err);
}
