/* SPDX-License-Identifier: MIT */
/*
 * Landlock, the second filesystem layer (and TCP/scope restrictions).
 *
 * Which process runs what:
 *   - any (pure):  ab_landlock_fs_rights, ab_landlock_class_rights,
 *                  ab_landlock_net_rights, ab_landlock_scopes,
 *                  ab_landlock_downgrades, ab_ll_plan_add/free,
 *                  ab_landlock_describe (planner, explain, tests);
 *   - parent:      ab_landlock_probe_abi (host probe, doctor);
 *   - child:       ab_landlock_apply, after pivot_root and before the caps
 *                  drop and seccomp.  It runs after clone(): it allocates
 *                  nothing (stack only) and reports through ab_err.
 *
 * Raw syscalls are used because glibc has no wrappers, and the uapi structs
 * are private copies here because Debian 12's headers stop at ABI 2.
 */
#include "agentbox/landlock.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef SYS_landlock_create_ruleset
#define SYS_landlock_create_ruleset 444
#endif
#ifndef SYS_landlock_add_rule
#define SYS_landlock_add_rule 445
#endif
#ifndef SYS_landlock_restrict_self
#define SYS_landlock_restrict_self 446
#endif
#ifndef LANDLOCK_CREATE_RULESET_VERSION
#define LANDLOCK_CREATE_RULESET_VERSION (1U << 0)
#endif

/*
 * restrict_self flags of ABI 7 (audit logging).  Deliberately NOT set:
 * the defaults already do what a launcher wants.  Denials caused by our own
 * code between restrict_self and execve stay logged (they would be agentbox
 * bugs worth seeing), denials of the untrusted command after execve are not
 * logged (LOG_NEW_EXEC_ON off: an agent probing its boundary would flood the
 * audit log), and nested domains keep their own choice (LOG_SUBDOMAINS_OFF is
 * meant to come from runtime configuration, not to be hardcoded).  Passing any
 * of them to an ABI < 7 kernel would also fail with EINVAL.
 */
#ifndef LANDLOCK_RESTRICT_SELF_LOG_SAME_EXEC_OFF
#define LANDLOCK_RESTRICT_SELF_LOG_SAME_EXEC_OFF (1U << 0)
#endif
#ifndef LANDLOCK_RESTRICT_SELF_LOG_NEW_EXEC_ON
#define LANDLOCK_RESTRICT_SELF_LOG_NEW_EXEC_ON (1U << 1)
#endif
#ifndef LANDLOCK_RESTRICT_SELF_LOG_SUBDOMAINS_OFF
#define LANDLOCK_RESTRICT_SELF_LOG_SUBDOMAINS_OFF (1U << 2)
#endif
#define AB_LL_RESTRICT_FLAGS 0U

/* Private uapi copies (names chosen so newer system headers never clash). */
struct ab_ll_ruleset_attr {
	uint64_t handled_access_fs;  /* ABI 1 */
	uint64_t handled_access_net; /* ABI 4 */
	uint64_t scoped;             /* ABI 6 */
};

struct ab_ll_path_beneath_attr {
	uint64_t allowed_access;
	int32_t parent_fd;
} __attribute__((packed));

struct ab_ll_net_port_attr {
	uint64_t allowed_access;
	uint64_t port;
};

#define AB_LL_RULE_PATH_BENEATH 1
#define AB_LL_RULE_NET_PORT 2

/* ABI 1: EXECUTE .. MAKE_SYM, bits 0-12. */
#define AB_LL_FS_ABI1 ((1ULL << 13) - 1)

/* Rights that make sense on a non-directory; the kernel refuses (EINVAL) a
 * path-beneath rule on a file that carries any other right. */
#define AB_LL_FS_FILE                                                 \
	(LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_WRITE_FILE | \
	 LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_TRUNCATE | \
	 LANDLOCK_ACCESS_FS_IOCTL_DEV)

#define AB_LL_NET_TCP (LANDLOCK_ACCESS_NET_BIND_TCP | LANDLOCK_ACCESS_NET_CONNECT_TCP)
#define AB_LL_SCOPES (LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET | LANDLOCK_SCOPE_SIGNAL)

/* ------------------------------------------------------------------------ */
/* Pure tables                                                              */
/* ------------------------------------------------------------------------ */

static int clamp_abi(int abi)
{
	if (abi <= 0)
		return 0;
	return abi > AB_LANDLOCK_ABI_MAX ? AB_LANDLOCK_ABI_MAX : abi;
}

/*
 * A note on REFER (ABI 2).  On ABI 1 a ruleset cannot handle REFER, and the
 * kernel then denies every rename or link that moves a file to another
 * directory (EXDEV), even inside a fully writable tree.  That is a functional
 * limitation (tools fall back to copy+delete, `git` and `mv` across
 * directories of the workspace may fail), not a security hole: the move is
 * refused, never allowed.  It is reported as the "landlock-refer" downgrade.
 */
uint64_t ab_landlock_fs_rights(int abi)
{
	uint64_t r = 0;

	switch (clamp_abi(abi)) {
	default: /* 6, 7: no new filesystem rights (scopes, logging) */
	case 5:
		r |= LANDLOCK_ACCESS_FS_IOCTL_DEV;
		/* fallthrough */
	case 4: /* network only */
	case 3:
		r |= LANDLOCK_ACCESS_FS_TRUNCATE;
		/* fallthrough */
	case 2:
		r |= LANDLOCK_ACCESS_FS_REFER;
		/* fallthrough */
	case 1: r |= AB_LL_FS_ABI1; break;
	case 0: break;
	}
	return r;
}

uint64_t ab_landlock_net_rights(int abi)
{
	return clamp_abi(abi) >= 4 ? AB_LL_NET_TCP : 0;
}

uint64_t ab_landlock_scopes(int abi)
{
	return clamp_abi(abi) >= 6 ? AB_LL_SCOPES : 0;
}

uint64_t ab_landlock_class_rights(enum ab_ll_class cls, int abi)
{
	uint64_t r;

	switch (cls) {
	case AB_LL_READ:
		r = LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_READ_FILE |
		    LANDLOCK_ACCESS_FS_READ_DIR;
		break;
	case AB_LL_WRITE: r = ab_landlock_fs_rights(abi); break;
	case AB_LL_DEV: /* no EXECUTE, no MAKE_* (no mknod), no REMOVE_* */
		r = LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR |
		    LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_TRUNCATE |
		    LANDLOCK_ACCESS_FS_IOCTL_DEV;
		break;
	case AB_LL_PROC:
		r = LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR |
		    LANDLOCK_ACCESS_FS_WRITE_FILE;
		break;
	default: return 0;
	}
	/* Only what this ABI knows (drops TRUNCATE < 3, IOCTL_DEV < 5, all on 0). */
	return r & ab_landlock_fs_rights(abi);
}

int ab_landlock_downgrades(int abi, ab_strv *names)
{
	static const struct {
		int since;
		const char *name;
	} lost[] = {
		{2, "landlock-refer"},     /* cross-directory rename/link refused */
		{3, "landlock-truncate"},  /* truncate(2) not controlled */
		{4, "landlock-net"},       /* TCP connect/bind not controlled */
		{5, "landlock-ioctl-dev"}, /* ioctl on devices not controlled */
		{6, "landlock-scope"},     /* abstract unix sockets, signals */
	};
	int r;

	if (abi <= 0) /* everything is lost; one name says it */
		return ab_strv_push_unique(names, "landlock");
	for (size_t i = 0; i < AB_ARRAY_SIZE(lost); i++) {
		if (abi >= lost[i].since)
			continue;
		r = ab_strv_push_unique(names, lost[i].name);
		if (r < 0)
			return r;
	}
	return 0;
}

/* ------------------------------------------------------------------------ */
/* Plan                                                                     */
/* ------------------------------------------------------------------------ */

int ab_ll_plan_add(ab_ll_plan *p, const char *path, enum ab_ll_class cls)
{
	uint64_t access = ab_landlock_class_rights(cls, p->abi);

	if (!path || path[0] != '/' || (unsigned)cls > AB_LL_PROC)
		return -EINVAL;
	/* Same path twice: one rule with the union (what the kernel does too). */
	for (size_t i = 0; i < p->nrules; i++) {
		if (strcmp(p->rules[i].path, path) == 0) {
			p->rules[i].access |= access;
			return 0;
		}
	}
	char *copy = strdup(path);
	if (!copy)
		return -ENOMEM;
	ab_ll_rule *nr = realloc(p->rules, (p->nrules + 1) * sizeof(*nr));
	if (!nr) {
		free(copy);
		return -ENOMEM;
	}
	nr[p->nrules].path = copy;
	nr[p->nrules].access = access;
	p->rules = nr;
	p->nrules++;
	return 0;
}

void ab_ll_plan_free(ab_ll_plan *p)
{
	if (!p)
		return;
	for (size_t i = 0; i < p->nrules; i++)
		free(p->rules[i].path);
	free(p->rules);
	free(p->tcp_ports);
	p->rules = NULL;
	p->nrules = 0;
	p->tcp_ports = NULL;
	p->ntcp_ports = 0;
}

/* ------------------------------------------------------------------------ */
/* Kernel                                                                   */
/* ------------------------------------------------------------------------ */

int ab_landlock_probe_abi(int *errno_out)
{
	long r = syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
	if (r < 0) {
		/* ENOSYS: not built in; EOPNOTSUPP: built in, disabled at boot. */
		if (errno_out)
			*errno_out = errno;
		return 0;
	}
	if (errno_out)
		*errno_out = 0;
	return (int)r;
}

static int fail_unavailable(ab_err *err, int e)
{
	if (e == EOPNOTSUPP) {
		ab_fail(err, e, "Landlock is built into this kernel but disabled at boot");
		ab_err_hint(err, "add \"landlock\" to the lsm= kernel boot parameter "
				 "(see `agentbox doctor`), or accept the loss with "
				 "\"allow_downgrade\": [\"landlock\"] in the profile");
	} else {
		ab_fail(err, e, "this kernel has no Landlock support");
		ab_err_hint(err, "use a kernel built with CONFIG_SECURITY_LANDLOCK=y "
				 "(see `agentbox doctor`), or accept the loss with "
				 "\"allow_downgrade\": [\"landlock\"] in the profile");
	}
	return -e;
}

static int create_ruleset(const ab_ll_plan *p, ab_err *err)
{
	struct ab_ll_ruleset_attr attr = {
		.handled_access_fs = p->handled_fs,
		.handled_access_net = p->handled_net,
		.scoped = p->scoped,
	};
	size_t size;
	long fd;

	/* Pass only as much of the struct as the fields in use need: an older
	 * kernel then sees a struct it knows instead of unknown trailing bytes. */
	if (p->scoped)
		size = sizeof(attr);
	else if (p->handled_net)
		size = offsetof(struct ab_ll_ruleset_attr, scoped);
	else
		size = offsetof(struct ab_ll_ruleset_attr, handled_access_net);

	fd = syscall(SYS_landlock_create_ruleset, &attr, size, 0U);
	if (fd >= 0)
		return (int)fd;

	int e = errno;
	if (e == ENOSYS || e == EOPNOTSUPP)
		return fail_unavailable(err, e);
	if (e == ENOMSG) {
		ab_fail(err, e, "Landlock: the plan handles no access at all");
		ab_err_hint(err, "this is an agentbox bug: an enabled Landlock plan "
				 "must handle some access");
		return -e;
	}
	ab_fail(err, e,
		"Landlock: creating the ruleset (plan for ABI %d: "
		"fs 0x%llx, net 0x%llx, scoped 0x%llx)",
		p->abi, (unsigned long long)p->handled_fs, (unsigned long long)p->handled_net,
		(unsigned long long)p->scoped);
	if (e == EINVAL || e == E2BIG)
		ab_err_hint(err, "the running kernel knows fewer Landlock features "
				 "than the plan assumed; run `agentbox doctor` and "
				 "report this as a bug");
	return -e;
}

/* One path-beneath rule.  Returns 0 (added or skipped) or -errno. */
static int add_path_rule(int ruleset, const ab_ll_plan *p, const ab_ll_rule *rule, ab_err *err)
{
	struct ab_ll_path_beneath_attr pb = {0};
	struct stat st;
	int fd, e;

	/* Symlinks are followed on purpose (e.g. /bin -> usr/bin): the paths are
	 * inside the root agentbox just built, before any untrusted code ran. */
	fd = open(rule->path, O_PATH | O_CLOEXEC);
	if (fd < 0) {
		if (errno == ENOENT) /* absent inside: nothing to grant */
			return 0;
		return ab_fail(err, errno, "Landlock: opening %s", rule->path);
	}
	if (fstat(fd, &st) < 0) {
		e = errno;
		close(fd);
		return ab_fail(err, e, "Landlock: stat %s", rule->path);
	}
	pb.allowed_access = rule->access & p->handled_fs;
	if (!S_ISDIR(st.st_mode)) /* directory-only rights are EINVAL on files */
		pb.allowed_access &= AB_LL_FS_FILE;
	if (pb.allowed_access == 0) { /* e.g. READ_DIR only on a file */
		close(fd);
		return 0;
	}
	pb.parent_fd = fd;
	if (syscall(SYS_landlock_add_rule, ruleset, AB_LL_RULE_PATH_BENEATH, &pb, 0U) < 0) {
		e = errno;
		close(fd);
		return ab_fail(err, e, "Landlock: adding a rule for %s (access 0x%llx)", rule->path,
			       (unsigned long long)pb.allowed_access);
	}
	close(fd);
	return 0;
}

static int add_net_rules(int ruleset, const ab_ll_plan *p, ab_err *err)
{
	struct ab_ll_net_port_attr np = {
		.allowed_access = p->handled_net & AB_LL_NET_TCP,
	};

	if (np.allowed_access == 0)
		return 0;
	for (size_t i = 0; i < p->ntcp_ports; i++) {
		np.port = p->tcp_ports[i];
		if (syscall(SYS_landlock_add_rule, ruleset, AB_LL_RULE_NET_PORT, &np, 0U) < 0)
			return ab_fail(err, errno, "Landlock: allowing TCP port %u",
				       (unsigned)p->tcp_ports[i]);
	}
	return 0;
}

int ab_landlock_apply(const ab_ll_plan *p, ab_err *err)
{
	int ruleset, r;

	if (!p->enabled)
		return 0;

	/* The caller sets it before; setting it again is harmless and keeps this
	 * function usable on its own (restrict_self needs it without
	 * CAP_SYS_ADMIN). */
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return ab_fail(err, errno, "Landlock: setting no_new_privs");

	ruleset = create_ruleset(p, err);
	if (ruleset < 0)
		return ruleset;

	for (size_t i = 0; i < p->nrules; i++) {
		r = add_path_rule(ruleset, p, &p->rules[i], err);
		if (r < 0)
			goto out;
	}
	if (p->handled_net) {
		r = add_net_rules(ruleset, p, err);
		if (r < 0)
			goto out;
	}
	if (syscall(SYS_landlock_restrict_self, ruleset, AB_LL_RESTRICT_FLAGS) < 0) {
		int e = errno;
		r = ab_fail(err, e, "Landlock: enforcing the ruleset");
		if (e == E2BIG)
			ab_err_hint(err, "agentbox runs inside too many nested Landlock "
					 "sandboxes (the kernel allows 16)");
		goto out;
	}
	r = 0;
out:
	close(ruleset);
	return r;
}

int ab_landlock_net_ruleset(const ab_ll_plan *p, int *out, ab_err *err)
{
	*out = -1;
	if (!p->enabled || !p->handled_net)
		return 0;
	ab_ll_plan net = *p;
	net.handled_fs = 0;
	net.scoped = 0;
	int fd = create_ruleset(&net, err);
	if (fd < 0)
		return fd;
	int r = add_net_rules(fd, &net, err);
	if (r < 0) {
		close(fd);
		return r;
	}
	*out = fd;
	return 0;
}

int ab_landlock_restrict_thread(int ruleset)
{
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ||
	    syscall(SYS_landlock_restrict_self, ruleset, AB_LL_RESTRICT_FLAGS) < 0)
		return -errno;
	return 0;
}

/* ------------------------------------------------------------------------ */
/* explain                                                                  */
/* ------------------------------------------------------------------------ */

__attribute__((format(printf, 2, 3))) static int push_fmt(ab_strv *lines, const char *fmt, ...)
{
	char *line = NULL;
	va_list ap;

	va_start(ap, fmt);
	if (vasprintf(&line, fmt, ap) < 0)
		line = NULL;
	va_end(ap);
	return ab_strv_push_take(lines, line); /* NULL -> -ENOMEM */
}

#define AB_LL_DESCRIBE_MAX_PORTS 16

static int describe_net(const ab_ll_plan *p, ab_strv *lines)
{
	const char *what;
	char buf[256];
	size_t o, shown;

	if (p->tcp_any)
		return ab_strv_push(lines, "TCP connect/bind: any port (not restricted)");
	if (!(p->handled_net & AB_LL_NET_TCP)) {
		if (p->abi < 4)
			return ab_strv_push(lines, "TCP connect/bind: not restricted "
						   "by Landlock (needs ABI 4)");
		return ab_strv_push(lines, "TCP connect/bind: not restricted by Landlock");
	}
	if ((p->handled_net & AB_LL_NET_TCP) == AB_LL_NET_TCP)
		what = "connect/bind";
	else if (p->handled_net & LANDLOCK_ACCESS_NET_CONNECT_TCP)
		what = "connect";
	else
		what = "bind";
	if (p->ntcp_ports == 0)
		return push_fmt(lines, "TCP %s: none", what);

	/* At most 16 ports of at most 5 digits: always fits in buf. */
	shown = p->ntcp_ports < AB_LL_DESCRIBE_MAX_PORTS ? p->ntcp_ports : AB_LL_DESCRIBE_MAX_PORTS;
	o = (size_t)snprintf(buf, sizeof(buf), "TCP %s: port%s", what,
			     p->ntcp_ports > 1 ? "s" : "");
	for (size_t i = 0; i < shown; i++)
		o += (size_t)snprintf(buf + o, sizeof(buf) - o, "%s%u", i ? ", " : " ",
				      (unsigned)p->tcp_ports[i]);
	if (shown < p->ntcp_ports)
		return push_fmt(lines, "%s, ... (%zu ports)", buf, p->ntcp_ports);
	return ab_strv_push(lines, buf);
}

static int describe_scope(const ab_ll_plan *p, ab_strv *lines)
{
	if (!(p->scoped & AB_LL_SCOPES)) {
		if (p->abi < 6)
			return ab_strv_push(lines, "scoped: none (needs ABI 6)");
		return ab_strv_push(lines, "scoped: none");
	}
	return push_fmt(lines, "scoped:%s%s",
			(p->scoped & LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET) ? " abstract-unix" : "",
			(p->scoped & LANDLOCK_SCOPE_SIGNAL) ? " signal" : "");
}

int ab_landlock_describe(const ab_ll_plan *p, ab_strv *lines)
{
	int r;

	if (!p->enabled)
		return ab_strv_push(lines, "not applied (no usable Landlock on this kernel)");
	if (p->handled_fs)
		r = push_fmt(lines, "ABI %d: filesystem (%zu rule%s)", p->abi, p->nrules,
			     p->nrules == 1 ? "" : "s");
	else
		r = push_fmt(lines, "ABI %d: filesystem not restricted", p->abi);
	if (r < 0)
		return r;
	r = describe_net(p, lines);
	if (r < 0)
		return r;
	return describe_scope(p, lines);
}
