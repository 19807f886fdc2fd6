/* SPDX-License-Identifier: MIT */
/*
 * Credentials, capabilities, no_new_privs, rlimits, session keyring.
 *
 * Runs in the child, after clone() and before the final execve (seccomp is
 * loaded after these, so keyctl/prctl/capset are still allowed).  The child
 * is single-threaded, so libcap's allocation in ab_caps_drop_all is fine;
 * everything else uses the stack only.  Errors go into ab_err for the parent.
 *
 * Order the child must use:
 *   ab_rlimits_apply, ab_keyring_new_session   (any time before seccomp)
 *   ab_creds_switch                            (keeps capabilities, see there)
 *   ab_caps_drop_all                           (needs CAP_SETPCAP: last of these)
 */
#include "agentbox/caps.h"
#include "agentbox/container.h"

#include <errno.h>
#include <grp.h>
#include <inttypes.h>
#include <linux/keyctl.h>
#include <stdio.h>
#include <string.h>
#include <sys/capability.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef PR_CAP_AMBIENT
#define PR_CAP_AMBIENT 47
#define PR_CAP_AMBIENT_IS_SET 1
#define PR_CAP_AMBIENT_CLEAR_ALL 4
#endif

/* Capability numbers are < 64 (two 32-bit words in the capget ABI). */
#define AB_CAP_SCAN_MAX 64

/* ------------------------------------------------------------------------ */
/* rlimits                                                                  */
/* ------------------------------------------------------------------------ */

static const char *rlimit_name(int resource)
{
	static const struct {
		int res;
		const char *name;
	} names[] = {
		{RLIMIT_AS, "as"},
		{RLIMIT_CORE, "core"},
		{RLIMIT_CPU, "cpu"},
		{RLIMIT_DATA, "data"},
		{RLIMIT_FSIZE, "fsize"},
		{RLIMIT_LOCKS, "locks"},
		{RLIMIT_MEMLOCK, "memlock"},
		{RLIMIT_MSGQUEUE, "msgqueue"},
		{RLIMIT_NICE, "nice"},
		{RLIMIT_NOFILE, "nofile"},
		{RLIMIT_NPROC, "nproc"},
		{RLIMIT_RSS, "rss"},
		{RLIMIT_RTPRIO, "rtprio"},
		{RLIMIT_RTTIME, "rttime"},
		{RLIMIT_SIGPENDING, "sigpending"},
		{RLIMIT_STACK, "stack"},
	};
	for (size_t i = 0; i < AB_ARRAY_SIZE(names); i++)
		if (names[i].res == resource)
			return names[i].name;
	return NULL;
}

static const char *rlim_str(rlim_t v, char *buf, size_t len)
{
	if (v == RLIM_INFINITY)
		return "infinity";
	snprintf(buf, len, "%llu", (unsigned long long)v);
	return buf;
}

static int rlimit_fail(const ab_rlimit *l, int e, ab_err *err)
{
	char nbuf[32], sbuf[24], hbuf[24], cbuf[24];
	const char *name = rlimit_name(l->resource);
	struct rlimit cur;

	if (!name) {
		snprintf(nbuf, sizeof(nbuf), "resource %d", l->resource);
		name = nbuf;
	}
	ab_fail(err, e, "setting rlimit %s to soft=%s hard=%s", name,
		rlim_str(l->soft, sbuf, sizeof(sbuf)), rlim_str(l->hard, hbuf, sizeof(hbuf)));
	if (e == EINVAL && l->soft > l->hard)
		ab_err_hint(err, "the soft limit of %s must not exceed its hard limit", name);
	else if (e == EPERM && getrlimit(l->resource, &cur) == 0)
		ab_err_hint(err,
			    "the inherited hard limit of %s is %s and only a privileged "
			    "process can raise it: lower the value in the profile, or raise "
			    "the limit before starting agentbox (e.g. `ulimit -H`)",
			    name, rlim_str(cur.rlim_max, cbuf, sizeof(cbuf)));
	return -e;
}

int ab_rlimits_apply(const ab_rlimit *r, size_t n, ab_err *err)
{
	for (size_t i = 0; i < n; i++) {
		struct rlimit rl = {.rlim_cur = r[i].soft, .rlim_max = r[i].hard};
		if (setrlimit(r[i].resource, &rl) < 0)
			return rlimit_fail(&r[i], errno, err);
	}
	return 0;
}

/* ------------------------------------------------------------------------ */
/* keyring                                                                  */
/* ------------------------------------------------------------------------ */

int ab_keyring_new_session(int refused, ab_err *err)
{
	long id = syscall(SYS_keyctl, KEYCTL_JOIN_SESSION_KEYRING, (const char *)NULL);
	if (id >= 0)
		return 0;

	int e = errno;
	if (refused != 0 && e == refused)
		return 0; /* the whole family is refused to us and to everything we start */
	ab_fail(err, e, "joining a new anonymous session keyring");
	err->step = AB_STEP_KEYRING;
	switch (e) {
	case ENOSYS:
		ab_err_hint(err, "this kernel has no key management (CONFIG_KEYS); "
				 "the caller's keyring cannot be reached either");
		break;
	case EPERM:
	case EACCES:
		ab_err_hint(err, "keyctl is refused here, probably by an outer seccomp "
				 "filter (container runtime)");
		break;
	case EDQUOT:
		ab_err_hint(err, "this user's key quota is exhausted "
				 "(see /proc/key-users, kernel.keys.maxkeys)");
		break;
	default: break;
	}
	return -e;
}

/* ------------------------------------------------------------------------ */
/* credentials                                                              */
/* ------------------------------------------------------------------------ */

static int caps_read(struct __user_cap_data_struct d[2])
{
	struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3};
	return capget(&h, d);
}

static int caps_write(struct __user_cap_data_struct d[2])
{
	struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3};
	return capset(&h, d);
}

static int ids_switch(uid_t uid, gid_t gid, ab_err *err)
{
	if (setresgid(gid, gid, gid) < 0) {
		int e = errno;
		ab_fail(err, e, "switching to gid %u", (unsigned)gid);
		if (e == EINVAL)
			ab_err_hint(err, "gid %u is not mapped in the user namespace",
				    (unsigned)gid);
		return -e;
	}
	if (setresuid(uid, uid, uid) < 0) {
		int e = errno;
		ab_fail(err, e, "switching to uid %u", (unsigned)uid);
		if (e == EINVAL)
			ab_err_hint(err, "uid %u is not mapped in the user namespace",
				    (unsigned)uid);
		return -e;
	}
	return 0;
}

static int ids_verify(uid_t uid, gid_t gid, bool drop_groups, ab_err *err)
{
	uid_t ru, eu, su;
	gid_t rg, eg, sg;

	if (getresuid(&ru, &eu, &su) < 0 || getresgid(&rg, &eg, &sg) < 0)
		return ab_fail(err, errno, "reading back uid/gid");
	if (ru != uid || eu != uid || su != uid || rg != gid || eg != gid || sg != gid)
		return ab_fail(err, EPERM,
			       "uid/gid switch did not take: uids %u/%u/%u "
			       "gids %u/%u/%u, wanted %u/%u",
			       (unsigned)ru, (unsigned)eu, (unsigned)su, (unsigned)rg, (unsigned)eg,
			       (unsigned)sg, (unsigned)uid, (unsigned)gid);
	if (drop_groups && getgroups(0, NULL) != 0)
		return ab_fail(err, EPERM, "supplementary groups remain after setgroups(0)");
	return 0;
}

/*
 * Capabilities are deliberately KEPT across the switch (PR_SET_KEEPCAPS, then
 * the effective set restored): ab_caps_drop_all must run afterwards and needs
 * CAP_SETPCAP to empty the bounding set.  Letting the kernel's uid-change
 * fixup clear permitted/effective here would leave the bounding set full.
 */
int ab_creds_switch(uid_t uid, gid_t gid, bool drop_groups, ab_err *err)
{
	struct __user_cap_data_struct before[2], after[2];
	int keep, r;

	if (drop_groups && setgroups(0, NULL) < 0) {
		int e = errno;
		ab_fail(err, e, "dropping supplementary groups");
		if (e == EPERM)
			ab_err_hint(err, "setgroups is denied in this user namespace "
					 "(/proc/self/setgroups is \"deny\"); only a root "
					 "caller can drop groups");
		return -e;
	}
	if (caps_read(before) < 0)
		return ab_fail(err, errno, "reading capabilities");
	keep = prctl(PR_GET_KEEPCAPS, 0, 0, 0, 0);
	if (keep < 0 || prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0) < 0)
		return ab_fail(err, errno, "setting PR_SET_KEEPCAPS");

	r = ids_switch(uid, gid, err);
	if (prctl(PR_SET_KEEPCAPS, keep, 0, 0, 0) < 0 && r == 0)
		r = ab_fail(err, errno, "restoring PR_SET_KEEPCAPS");
	if (r < 0)
		return r;

	/* A uid change away from 0 empties the effective set even with
	 * KEEPCAPS; give back what was effective and is still permitted. */
	if (caps_read(after) < 0)
		return ab_fail(err, errno, "reading capabilities");
	bool changed = false;
	for (int i = 0; i < 2; i++) {
		uint32_t want = before[i].effective & after[i].permitted;
		changed |= after[i].effective != want;
		after[i].effective = want;
	}
	if (changed && caps_write(after) < 0)
		return ab_fail(err, errno,
			       "restoring effective capabilities after "
			       "the uid switch");
	return ids_verify(uid, gid, drop_groups, err);
}

/* ------------------------------------------------------------------------ */
/* capabilities                                                             */
/* ------------------------------------------------------------------------ */

static int drop_bounding(int cap_last_cap, ab_err *err)
{
	/* Up to the larger of the caller's view and 63: a kernel newer than the
	 * probe is still emptied; EINVAL marks the end of the kernel's range. */
	int last = cap_last_cap > AB_CAP_SCAN_MAX - 1 ? cap_last_cap : AB_CAP_SCAN_MAX - 1;

	for (int cap = 0; cap <= last; cap++) {
		if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) == 0)
			continue;
		if (errno == EINVAL)
			break;
		int e = errno;
		ab_fail(err, e, "dropping capability %d from the bounding set", cap);
		if (e == EPERM)
			ab_err_hint(err, "CAP_SETPCAP was lost before the drop: "
					 "ab_caps_drop_all must run before anything clears "
					 "the capability sets (this is an agentbox bug)");
		return -e;
	}
	return 0;
}

static int clear_sets(ab_err *err)
{
	/* Ambient first (lowering permitted would clear it too, be explicit).
	 * EINVAL: a kernel without ambient capabilities, nothing to clear. */
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
		return ab_fail(err, errno, "clearing the ambient capabilities");

	cap_t none = cap_init(); /* all three sets empty */
	if (!none)
		return ab_fail(err, errno ? errno : ENOMEM, "libcap: cap_init");
	if (cap_set_proc(none) < 0) {
		int e = errno;
		cap_free(none);
		return ab_fail(err, e, "clearing effective/permitted/inheritable capabilities");
	}
	cap_free(none);
	return 0;
}

/* Read everything back from the kernel (no /proc: it may not be mounted). */
static int verify_dropped(ab_err *err)
{
	struct __user_cap_data_struct d[2];

	if (caps_read(d) < 0)
		return ab_fail(err, errno, "capget");
	for (int i = 0; i < 2; i++)
		if (d[i].effective || d[i].permitted || d[i].inheritable)
			return ab_fail(err, EPERM,
				       "capabilities remain after the drop: "
				       "eff 0x%08" PRIx32 "%08" PRIx32 " prm 0x%08" PRIx32
				       "%08" PRIx32 " inh 0x%08" PRIx32 "%08" PRIx32,
				       d[1].effective, d[0].effective, d[1].permitted,
				       d[0].permitted, d[1].inheritable, d[0].inheritable);
	for (int cap = 0; cap < AB_CAP_SCAN_MAX; cap++) {
		int b = prctl(PR_CAPBSET_READ, cap, 0, 0, 0);
		if (b < 0 && errno == EINVAL)
			break;
		if (b != 0)
			return ab_fail(err, b < 0 ? errno : EPERM,
				       "capability %d remains in the bounding set", cap);
		int a = prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_IS_SET, cap, 0, 0);
		if (a > 0 || (a < 0 && errno != EINVAL))
			return ab_fail(err, a < 0 ? errno : EPERM,
				       "capability %d remains in the ambient set", cap);
	}
	if (prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) != 1)
		return ab_fail(err, EPERM, "no_new_privs is not set after the drop");
	return 0;
}

/*
 * Securebits (SECBIT_NOROOT, NO_SETUID_FIXUP, KEEP_CAPS_LOCKED, ... and their
 * locks) are deliberately NOT set.  After this function bounding, ambient,
 * inheritable, permitted and effective are all empty and no_new_privs is
 * set, so execve computes an empty set for any file (setuid-root, file
 * capabilities or running as uid 0 alike) and nothing can raise a
 * capability; the securebits only change how non-empty sets are handled,
 * and their locks only stop a CAP_SETPCAP holder that no longer exists.
 * They would add a failure mode (an outer runtime's locked bits make
 * PR_SET_SECUREBITS fail) and no protection; the read-back below is what
 * guarantees the state.
 */
int ab_caps_drop_all(int cap_last_cap, ab_err *err)
{
	int r;

	r = drop_bounding(cap_last_cap, err); /* needs CAP_SETPCAP: first */
	if (r < 0)
		return r;
	r = clear_sets(err);
	if (r < 0)
		return r;
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return ab_fail(err, errno, "setting no_new_privs");
	r = verify_dropped(err);
	if (r < 0)
		return ab_err_prefix(err, "verifying the capability drop");
	return 0;
}
