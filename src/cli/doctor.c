/* SPDX-License-Identifier: MIT */
/*
 * `agentbox doctor` (parent process, no sandbox): probe the kernel with
 * ab_host_probe(try_userns) and print one line per protection agentbox relies
 * on, with a "fix:" line for each that is not fine.  Also the sentences that
 * say what each named downgrade costs (shared with explain).  Prints by design.
 */
#include "agentbox/host.h"

#include <errno.h>
#include <jansson.h>

#include "agentbox/json_pos.h"
#include <stdio.h>
#include <string.h>

#include "agentbox/ca.h"
#include "agentbox/cgroup.h"
#include "agentbox/landlock.h"
#include "agentbox/plan.h"

enum dr_status { DR_OK, DR_WARN, DR_MISSING };

static const char *const status_names[] = {"ok", "warn", "missing"};

typedef struct dr_item {
	const char *id;    /* stable key for --json */
	const char *title; /* text column */
	enum dr_status status;
	bool required; /* missing -> agentbox run cannot work */
	char detail[1600];
	char fix[1024]; /* how to fix (non-ok items) */
	char note[768]; /* extra facts, e.g. what each downgrade costs */
} dr_item;

#define DR_MAX_ITEMS 20

typedef struct dr_report {
	dr_item items[DR_MAX_ITEMS];
	size_t n;
	ab_strv landlock_missing; /* ab_landlock_downgrades() of this ABI */
} dr_report;

/* ---- the checks ---- */

static dr_item *add(dr_report *r, const char *id, const char *title, enum dr_status st,
		    bool required)
{
	dr_item *it = &r->items[r->n < DR_MAX_ITEMS ? r->n++ : DR_MAX_ITEMS - 1];
	memset(it, 0, sizeof(*it));
	it->id = id;
	it->title = title;
	it->status = st;
	it->required = required;
	return it;
}

static void check_identity(const ab_host *h, dr_report *r)
{
	dr_item *it = add(r, "identity", "running as", DR_OK, false);
	if (h->is_root)
		snprintf(it->detail, sizeof(it->detail),
			 "root: the command runs as uid %d inside, never as root; a root-owned "
			 "workspace is shown to it through an idmapped mount",
			 AB_ROOT_INSIDE_UID);
	else
		snprintf(it->detail, sizeof(it->detail),
			 "uid %u: the command runs as the same uid inside (no privileges needed)",
			 (unsigned)h->uid);
}

static void check_userns(const ab_host *h, dr_report *r)
{
	char lim[64] = "";
	if (h->max_user_namespaces >= 0)
		snprintf(lim, sizeof(lim), " (user.max_user_namespaces = %ld)",
			 h->max_user_namespaces);
	if (h->userns_ok == AB_YES) {
		dr_item *it = add(r, "user-namespaces", "user namespaces", DR_OK, true);
		snprintf(it->detail, sizeof(it->detail), "%s work%s",
			 h->is_root ? "user namespaces" : "unprivileged user namespaces", lim);
		return;
	}
	if (h->userns_ok == AB_UNKNOWN) {
		dr_item *it = add(r, "user-namespaces", "user namespaces", DR_WARN, true);
		snprintf(it->detail, sizeof(it->detail), "could not be tested%s", lim);
		snprintf(it->fix, sizeof(it->fix), "try `agentbox run -- true`");
		return;
	}
	dr_item *it = add(r, "user-namespaces", "user namespaces", DR_MISSING, true);
	ab_err e = {0};
	ab_host_userns_error(h, h->userns_errno, &e);
	const char *msg = strstr(e.msg, "namespace: ");
	snprintf(it->detail, sizeof(it->detail), "%s", msg ? msg + 11 : e.msg);
	snprintf(it->fix, sizeof(it->fix), "%s", e.hint);
}

static void check_apparmor(const ab_host *h, dr_report *r)
{
	int v = h->apparmor_restrict_userns;
	bool blocked = v == 1 && !h->is_root && h->userns_ok == AB_NO;
	dr_item *it =
		add(r, "apparmor-userns", "AppArmor userns", blocked ? DR_MISSING : DR_OK, blocked);
	if (v < 0) {
		snprintf(it->detail, sizeof(it->detail),
			 "no AppArmor user namespace restriction on this kernel");
	} else if (v == 0) {
		snprintf(it->detail, sizeof(it->detail),
			 "kernel.apparmor_restrict_unprivileged_userns = 0 (not restricted)");
	} else if (h->is_root) {
		snprintf(it->detail, sizeof(it->detail),
			 "kernel.apparmor_restrict_unprivileged_userns = 1, which does not "
			 "apply to root");
	} else if (!blocked) {
		snprintf(it->detail, sizeof(it->detail),
			 "kernel.apparmor_restrict_unprivileged_userns = 1, but agentbox may use "
			 "user namespaces (an AppArmor profile grants `userns`)");
	} else {
		/* The same hint run prints, whatever else is wrong. */
		ab_host tmp = *h;
		ab_err e = {0};
		tmp.max_user_namespaces = -1;
		tmp.unprivileged_userns_clone = -1;
		ab_host_userns_error(&tmp, EPERM, &e);
		snprintf(
			it->detail, sizeof(it->detail),
			"kernel.apparmor_restrict_unprivileged_userns = 1 (Ubuntu 23.10 and later): "
			"unprivileged user namespaces get no capabilities");
		snprintf(it->fix, sizeof(it->fix), "%s", e.hint);
	}
}

static void join_names(const ab_strv *names, char *buf, size_t len)
{
	buf[0] = '\0';
	for (size_t i = 0; i < names->n; i++) {
		size_t used = strlen(buf);
		snprintf(buf + used, len - used, "%s\"%s\"", i ? ", " : "", names->v[i]);
	}
}

static void note_costs(const ab_strv *names, char *buf, size_t len)
{
	buf[0] = '\0';
	for (size_t i = 0; i < names->n; i++) {
		size_t used = strlen(buf);
		snprintf(buf + used, len - used, "%s%s: %s", i ? "\n" : "", names->v[i],
			 ab_downgrade_describe(names->v[i]));
	}
}

static int check_landlock(const ab_host *h, dr_report *r)
{
	char names[256];
	int abi = h->landlock_abi;
	int ret = ab_landlock_downgrades(abi, &r->landlock_missing);
	if (ret < 0)
		return ret;
	join_names(&r->landlock_missing, names, sizeof(names));
	if (abi <= 0) {
		dr_item *it = add(r, "landlock", "Landlock", DR_MISSING, true);
		bool off = h->landlock_errno == EOPNOTSUPP;
		snprintf(it->detail, sizeof(it->detail), "%s",
			 off ? "built into the kernel but not enabled at boot"
			     : "this kernel has no Landlock (Linux >= 5.13 with "
			       "CONFIG_SECURITY_LANDLOCK=y)");
		snprintf(
			it->fix, sizeof(it->fix),
			"%s; or accept running without it: \"allow_downgrade\": [%s] in the profile",
			off ? "add landlock to the lsm= kernel parameter (e.g. "
			      "lsm=landlock,lockdown,yama,integrity,apparmor,bpf) and reboot"
			    : "use a kernel with Landlock enabled",
			names);
		note_costs(&r->landlock_missing, it->note, sizeof(it->note));
		return 0;
	}
	if (r->landlock_missing.n == 0) {
		dr_item *it = add(r, "landlock", "Landlock", DR_OK, true);
		snprintf(it->detail, sizeof(it->detail), "ABI %d%s", abi,
			 abi > AB_LANDLOCK_ABI_MAX ? " (agentbox uses what it knows of it)"
						   : ": every Landlock protection agentbox uses");
		return 0;
	}
	dr_item *it = add(r, "landlock", "Landlock", DR_WARN, false);
	snprintf(it->detail, sizeof(it->detail),
		 "ABI %d: this kernel lacks %s; a profile must list them in allow_downgrade "
		 "or agentbox refuses to run it (the shipped default accepts the ones the "
		 "namespaces already cover)",
		 abi, names);
	snprintf(
		it->fix, sizeof(it->fix),
		"a newer kernel (Landlock ABI 6 needs Linux >= 6.12); or \"allow_downgrade\": [%s] "
		"in the profile",
		names);
	note_costs(&r->landlock_missing, it->note, sizeof(it->note));
	return 0;
}

static void check_seccomp(const ab_host *h, dr_report *r)
{
	static const char outer[] = "; agentbox itself already runs under a seccomp filter "
				    "(container or service), its filter stacks on top";
	enum dr_status st = h->seccomp_ok == AB_YES  ? DR_OK
			    : h->seccomp_ok == AB_NO ? DR_MISSING
						     : DR_WARN;
	dr_item *it = add(r, "seccomp", "seccomp", st, true);
	if (st == DR_OK) {
		snprintf(it->detail, sizeof(it->detail), "filters available%s",
			 h->seccomp_mode == 2 ? outer : "");
	} else if (st == DR_MISSING) {
		snprintf(it->detail, sizeof(it->detail), "this kernel has no seccomp support");
		snprintf(it->fix, sizeof(it->fix),
			 "use a kernel built with CONFIG_SECCOMP_FILTER=y");
	} else {
		snprintf(it->detail, sizeof(it->detail), "could not be probed (prctl failed)");
		snprintf(it->fix, sizeof(it->fix), "try `agentbox run -- true`");
	}

	/* connect mediation needs it: runs are refused without it unless the
	 * profile accepts "seccomp-user-notif" */
	st = h->seccomp_user_notif == AB_YES ? DR_OK : DR_WARN;
	it = add(r, "seccomp-user-notif", "seccomp notify", st, false);
	snprintf(
		it->detail, sizeof(it->detail), "%s",
		st == DR_OK ? "SECCOMP_RET_USER_NOTIF available (connect mediation, the record "
			      "of commands and denied syscalls)"
		: h->seccomp_listener_busy
			? "a seccomp filter above agentbox already has a notification listener: "
			  "runs are refused unless the profile accepts \"seccomp-user-notif\" "
			  "(no connect mediation, no record)"
			: "SECCOMP_RET_USER_NOTIF not available: runs are refused unless the "
			  "profile accepts \"seccomp-user-notif\" (no connect mediation, no record)");
	if (st != DR_OK)
		snprintf(
			it->fix, sizeof(it->fix), "%s",
			h->seccomp_listener_busy
				? "run agentbox outside that container's filter, or add "
				  "\"seccomp-user-notif\" to allow_downgrade"
				: "Linux >= 5.0, or add \"seccomp-user-notif\" to allow_downgrade");
}

static void check_cgroup(const ab_host *h, dr_report *r)
{
	static const char downgrade[] = "profiles that set limits.memory or limits.pids need "
					"\"allow_downgrade\": [\"cgroup-limits\"]";
	bool ok = h->cgroup_version == 2 && h->cgroup_delegated == AB_YES;
	dr_item *it = add(r, "cgroup", "cgroup limits", ok ? DR_OK : DR_WARN, false);

	if (ok) {
		snprintf(
			it->detail, sizeof(it->detail),
			"cgroup v2, delegated: memory and pids limits are applied in " AB_CGROUP_ROOT
			"%s/agentbox-PID",
			strcmp(h->cgroup_path, "/") == 0 ? "" : h->cgroup_path);
	} else if (h->cgroup_version == 2) {
		snprintf(it->detail, sizeof(it->detail),
			 "cgroup v2, but neither our cgroup (%s) nor its parent is writable with "
			 "memory and pids in cgroup.subtree_control: %s",
			 h->cgroup_self[0] ? h->cgroup_self : "unknown", downgrade);
		snprintf(it->fix, sizeof(it->fix),
			 "start agentbox in its own scope under a cgroup you own, e.g. "
			 "`systemd-run --user --scope agentbox run ...`");
	} else if (h->cgroup_version == 1) {
		snprintf(
			it->detail, sizeof(it->detail),
			"cgroup v1: agentbox applies memory and pids limits only with cgroup v2; %s",
			downgrade);
		snprintf(it->fix, sizeof(it->fix),
			 "boot with systemd.unified_cgroup_hierarchy=1 (cgroup v2)");
	} else {
		snprintf(it->detail, sizeof(it->detail),
			 "no cgroup file system at " AB_CGROUP_ROOT ": %s", downgrade);
		snprintf(it->fix, sizeof(it->fix), "mount cgroup2 at " AB_CGROUP_ROOT);
	}
}

static void check_tty_uring(const ab_host *h, dr_report *r)
{
	static const char blocks[] = "agentbox blocks it itself: the command gets its own "
				     "pseudo-terminal and seccomp fails TIOCSTI and TIOCLINUX";
	dr_item *it = add(r, "tiocsti", "TIOCSTI", DR_OK, false);
	if (h->legacy_tiocsti == 0)
		snprintf(it->detail, sizeof(it->detail),
			 "disabled by the kernel (dev.tty.legacy_tiocsti = 0); %s", blocks);
	else if (h->legacy_tiocsti == 1)
		snprintf(it->detail, sizeof(it->detail),
			 "the kernel still allows TIOCSTI (dev.tty.legacy_tiocsti = 1); %s",
			 blocks);
	else
		snprintf(it->detail, sizeof(it->detail),
			 "this kernel (< 6.2) always allows TIOCSTI; %s", blocks);
	if (h->legacy_tiocsti == 1)
		snprintf(it->note, sizeof(it->note),
			 "to protect programs outside agentbox too: "
			 "sudo sysctl -w dev.tty.legacy_tiocsti=0");

	static const char filtered[] = "agentbox blocks io_uring_setup, io_uring_enter and "
				       "io_uring_register with seccomp inside the sandbox";
	it = add(r, "io_uring", "io_uring", DR_OK, false);
	if (h->io_uring_disabled == 0)
		snprintf(it->detail, sizeof(it->detail),
			 "enabled on this host (kernel.io_uring_disabled = 0); %s", filtered);
	else if (h->io_uring_disabled > 0)
		snprintf(it->detail, sizeof(it->detail),
			 "%s on this host (kernel.io_uring_disabled = %d); %s as well",
			 h->io_uring_disabled == 1 ? "restricted" : "disabled",
			 h->io_uring_disabled, filtered);
	else
		snprintf(it->detail, sizeof(it->detail),
			 "available if built (no io_uring_disabled sysctl, kernel < 6.6); %s",
			 filtered);
}

static bool kernel_at_least(const ab_host *h, int major, int minor)
{
	int a = 0, b = 0;
	return sscanf(h->kernel_release, "%d.%d", &a, &b) == 2 &&
	       (a > major || (a == major && b >= minor));
}

/* root: open_tree refused in the trial (container root without
 * CAP_SYS_ADMIN, or a filter) */
static bool idmap_refused(const ab_host *h, dr_item *it)
{
	char cause[512];
	int e = h->trial.open_tree_errno;
	if (!h->is_root || !h->trial_done || e <= 0)
		return false;
	it->status = DR_WARN;
	ab_ctr_advise(&h->ctr, AB_STEP_OPEN_TREE, e, cause, sizeof(cause), it->fix,
		      sizeof(it->fix));
	snprintf(it->detail, sizeof(it->detail),
		 "open_tree: %s%s%s: as root, agentbox cannot let the sandbox write a root-owned "
		 "workspace",
		 strerror(e), cause[0] ? ": " : "", cause);
	if (!it->fix[0])
		snprintf(it->fix, sizeof(it->fix), "run agentbox as a regular user");
	return true;
}

static void check_idmap(const ab_host *h, dr_report *r)
{
	bool have = h->idmap_mounts == AB_YES;
	bool new_enough = kernel_at_least(h, 5, 12);
	const char *why = h->idmap_mounts == AB_NO ? "not available (Linux < 5.12)"
			  : new_enough ? "mount_setattr is refused here (a seccomp filter, e.g. "
					 "a container's default profile)"
				       : "could not be probed";
	dr_item *it = add(r, "idmap-mounts", "idmapped mounts",
			  have || !h->is_root ? DR_OK : DR_WARN, false);
	if (idmap_refused(h, it))
		return;
	if (have)
		snprintf(it->detail, sizeof(it->detail),
			 "available (used when root runs agentbox on a root-owned workspace; the "
			 "file system must support them)");
	else if (!h->is_root)
		snprintf(it->detail, sizeof(it->detail),
			 "%s; only needed when agentbox runs as root", why);
	else {
		snprintf(
			it->detail, sizeof(it->detail),
			"%s: as root, agentbox cannot let the sandbox write a root-owned workspace",
			why);
		snprintf(it->fix, sizeof(it->fix), "run agentbox as a regular user%s",
			 h->idmap_mounts == AB_NO ? ", or use Linux >= 5.12"
			 : new_enough ? ", or allow mount_setattr and open_tree in the outer "
					"seccomp profile"
				      : "");
	}
}

static void check_container(const ab_host *h, dr_report *r)
{
	const ab_ctr_facts *f = &h->ctr;
	if (!h->trial_done)
		return;
	dr_item *it = add(r, "container", "container", DR_OK, false);
	if (f->engine == AB_ENGINE_NONE) {
		snprintf(it->detail, sizeof(it->detail),
			 "no container engine found (/run/.containerenv, /.dockerenv, $container, "
			 "$KUBERNETES_SERVICE_HOST, /proc/self/cgroup)");
		return;
	}
	snprintf(it->detail, sizeof(it->detail), "engine: %s; agentbox runs as %s%s%s%s",
		 ab_engine_name(f->engine), f->root ? "container root" : "a non-root user",
		 f->userns == AB_YES  ? " in a user namespace of its own"
		 : f->userns == AB_NO ? " without a user namespace"
				      : "",
		 f->proc_overmounts[0] ? "; mounted over /proc: " : "", f->proc_overmounts);
	if (f->root && f->userns == AB_NO)
		snprintf(
			it->note, sizeof(it->note),
			"never unmask /proc (podman unmask=/proc/*, Docker systempaths=unconfined) "
			"for this container: its root could write /proc/sys/kernel/core_pattern, "
			"which is host root");
}

static void check_setup(const ab_host *h, dr_report *r)
{
	const ab_ctr_trial *t = &h->trial;
	char cause[512];
	if (!h->trial_done)
		return;
	if (t->step == AB_STEP_NONE) {
		dr_item *it = add(r, "sandbox-setup", "sandbox set-up", DR_OK, true);
		snprintf(it->detail, sizeof(it->detail),
			 "tried in a throwaway child cloned with every namespace: sethostname, a "
			 "mount, a fresh /proc, the keyring join");
	} else {
		dr_item *it = add(r, "sandbox-setup", "sandbox set-up", DR_MISSING, true);
		bool known = ab_ctr_advise(&h->ctr, t->step, t->errnum, cause, sizeof(cause),
					   it->fix, sizeof(it->fix));
		snprintf(it->detail, sizeof(it->detail), "%s refused in a throwaway child: %s%s%s",
			 ab_step_name(t->step), strerror(t->errnum), known ? ": " : "",
			 known ? cause : "");
		if (!known)
			snprintf(it->fix, sizeof(it->fix), "%s",
				 t->step == AB_STEP_USERNS
					 ? "see the user namespaces line"
					 : "run `agentbox run -- true` for the full error");
	}
	bool getfd_ok = t->getfd_errno == 0;
	dr_item *it = add(r, "pidfd-getfd", "pidfd_getfd", getfd_ok ? DR_OK : DR_WARN, false);
	if (getfd_ok) {
		snprintf(it->detail, sizeof(it->detail),
			 "works (connect mediation takes the sandbox's sockets with it)");
		return;
	}
	ab_ctr_advise(&h->ctr, AB_STEP_PIDFD_GETFD, t->getfd_errno, cause, sizeof(cause), it->fix,
		      sizeof(it->fix));
	snprintf(it->detail, sizeof(it->detail),
		 "%s%s%s: connect mediation cannot take the sandbox's sockets, its connects are "
		 "refused",
		 strerror(t->getfd_errno), cause[0] ? ": " : "", cause);
	if (!it->fix[0])
		snprintf(it->fix, sizeof(it->fix), "Linux >= 5.6");
}

/* Runs with secrets lock OpenSSL's secure heap (the session CA's keys). */
static void check_memlock(const ab_host *h, dr_report *r)
{
	bool enough = h->is_root || h->memlock < 0 || h->memlock >= 2ll * AB_CA_SECURE_HEAP;
	dr_item *it = add(r, "memlock", "locked memory", enough ? DR_OK : DR_WARN, false);
	char lim[64] = "unlimited";
	if (h->memlock >= 0)
		snprintf(lim, sizeof(lim), "%lld KiB", h->memlock >> 10);
	if (h->is_root)
		snprintf(
			it->detail, sizeof(it->detail),
			"root (CAP_IPC_LOCK): the session CA's keys (runs with secrets) are locked "
			"in memory, in OpenSSL's %u KiB secure heap",
			AB_CA_SECURE_HEAP >> 10);
	else
		snprintf(it->detail, sizeof(it->detail),
			 "RLIMIT_MEMLOCK %s: %s the %u KiB secure heap that keeps the session CA's "
			 "keys (runs with secrets) locked in memory",
			 lim, enough ? "enough for" : "may be too low for",
			 AB_CA_SECURE_HEAP >> 10);
	if (!enough)
		snprintf(it->fix, sizeof(it->fix),
			 "raise the limit (`ulimit -l`, or memlock in /etc/security/limits.conf) "
			 "to 2048 KiB or more; below it a run with secrets warns and its keys "
			 "could be swapped to disk");
}

static void check_kernel(const ab_host *h, dr_report *r)
{
	dr_item *it = add(r, "kernel", "kernel", DR_OK, false);
	snprintf(it->detail, sizeof(it->detail), "Linux %s, cap_last_cap %d%s",
		 h->kernel_release[0] ? h->kernel_release : "(unknown)", h->cap_last_cap,
		 h->container == AB_YES ? ", inside a container" : "");
}

static int build_report(const ab_host *h, dr_report *r)
{
	check_identity(h, r);
	check_userns(h, r);
	check_apparmor(h, r);
	int ret = check_landlock(h, r);
	if (ret < 0)
		return ret;
	check_seccomp(h, r);
	check_cgroup(h, r);
	check_tty_uring(h, r);
	check_idmap(h, r);
	check_container(h, r);
	check_setup(h, r);
	check_memlock(h, r);
	check_kernel(h, r);
	return 0;
}

static bool report_ok(const dr_report *r)
{
	for (size_t i = 0; i < r->n; i++)
		if (r->items[i].required && r->items[i].status == DR_MISSING)
			return false;
	return true;
}

/* ---- output ---- */

/* Print `text` with every line after the first indented by `indent`. */
static void put_indented(FILE *out, const char *text, const char *indent)
{
	for (const char *p = text; *p; p++) {
		fputc(*p, out);
		if (*p == '\n' && p[1])
			fputs(indent, out);
	}
	fputc('\n', out);
}

static void print_text(const ab_host *h, const dr_report *r, FILE *out)
{
	static const char ind[] = "                           "; /* 10 + 16 + 1 */
	fprintf(out, "agentbox doctor: Linux %s\n\n",
		h->kernel_release[0] ? h->kernel_release : "?");
	for (size_t i = 0; i < r->n; i++) {
		const dr_item *it = &r->items[i];
		fprintf(out, "%-8s  %-16s ", status_names[it->status], it->title);
		put_indented(out, it->detail, ind);
		if (it->note[0]) {
			fprintf(out, "%s", ind);
			put_indented(out, it->note, ind);
		}
		if (it->status != DR_OK && it->fix[0]) {
			fprintf(out, "%sfix: ", ind);
			put_indented(out, it->fix, ind);
		}
	}
	fputc('\n', out);
	if (report_ok(r)) {
		fputs("Result: agentbox run can work on this host.\n", out);
		return;
	}
	fputs("Result: agentbox run cannot work on this host; missing:", out);
	for (size_t i = 0; i < r->n; i++)
		if (r->items[i].required && r->items[i].status == DR_MISSING)
			fprintf(out, " %s", r->items[i].title);
	fputs(".\n", out);
}

static json_t *jstr(const char *s)
{
	return ab_json_string_lossy(s);
}

static int set_tri(json_t *o, const char *key, int v)
{
	return json_object_set_new(o, key,
				   v == AB_UNKNOWN ? json_null() : json_boolean(v == AB_YES));
}

static json_t *host_json(const ab_host *h, const dr_report *r)
{
	json_t *o = json_object(), *ll = json_array();
	int bad = !o || !ll;
	for (size_t i = 0; ll && i < r->landlock_missing.n; i++)
		bad |= json_array_append_new(ll, jstr(r->landlock_missing.v[i]));
	bad |= json_object_set_new(o, "kernel_release", jstr(h->kernel_release));
	bad |= json_object_set_new(o, "uid", json_integer(h->uid));
	bad |= json_object_set_new(o, "euid", json_integer(h->euid));
	bad |= json_object_set_new(o, "root", json_boolean(h->is_root));
	bad |= set_tri(o, "userns", h->userns_ok);
	bad |= json_object_set_new(o, "userns_errno", json_integer(h->userns_errno));
	bad |= json_object_set_new(o, "userns_nocaps", json_boolean(h->userns_nocaps));
	bad |= json_object_set_new(o, "apparmor_restrict_unprivileged_userns",
				   json_integer(h->apparmor_restrict_userns));
	bad |= json_object_set_new(o, "unprivileged_userns_clone",
				   json_integer(h->unprivileged_userns_clone));
	bad |= json_object_set_new(o, "max_user_namespaces", json_integer(h->max_user_namespaces));
	bad |= json_object_set_new(o, "landlock_abi", json_integer(h->landlock_abi));
	bad |= json_object_set_new(o, "landlock_errno", json_integer(h->landlock_errno));
	bad |= json_object_set_new(o, "landlock_downgrades", ll);
	bad |= set_tri(o, "seccomp", h->seccomp_ok);
	bad |= set_tri(o, "seccomp_user_notif", h->seccomp_user_notif);
	bad |= json_object_set_new(o, "seccomp_mode", json_integer(h->seccomp_mode));
	bad |= set_tri(o, "container", h->container);
	bad |= json_object_set_new(o, "cgroup_version", json_integer(h->cgroup_version));
	bad |= set_tri(o, "cgroup_delegated", h->cgroup_delegated);
	bad |= json_object_set_new(o, "cgroup_self", jstr(h->cgroup_self));
	bad |= json_object_set_new(o, "cgroup_base", jstr(h->cgroup_path));
	bad |= json_object_set_new(o, "legacy_tiocsti", json_integer(h->legacy_tiocsti));
	bad |= json_object_set_new(o, "io_uring_disabled", json_integer(h->io_uring_disabled));
	bad |= set_tri(o, "idmap_mounts", h->idmap_mounts);
	bad |= json_object_set_new(o, "cap_last_cap", json_integer(h->cap_last_cap));
	if (h->trial_done) {
		bad |= json_object_set_new(o, "container_engine",
					   jstr(ab_engine_name(h->ctr.engine)));
		bad |= json_object_set_new(o, "setup_refused", jstr(ab_step_name(h->trial.step)));
		bad |= json_object_set_new(o, "setup_errno", json_integer(h->trial.errnum));
		bad |= json_object_set_new(o, "pidfd_getfd_errno",
					   json_integer(h->trial.getfd_errno));
	}
	if (bad) {
		json_decref(o);
		return NULL;
	}
	return o;
}

static json_t *item_json(const dr_item *it)
{
	json_t *o = json_object();
	int bad = !o;
	bad |= json_object_set_new(o, "id", jstr(it->id));
	bad |= json_object_set_new(o, "title", jstr(it->title));
	bad |= json_object_set_new(o, "status", jstr(status_names[it->status]));
	bad |= json_object_set_new(o, "required", json_boolean(it->required));
	bad |= json_object_set_new(o, "detail", jstr(it->detail));
	if (it->note[0])
		bad |= json_object_set_new(o, "note", jstr(it->note));
	if (it->status != DR_OK && it->fix[0])
		bad |= json_object_set_new(o, "fix", jstr(it->fix));
	if (bad) {
		json_decref(o);
		return NULL;
	}
	return o;
}

static int print_json(const ab_host *h, const dr_report *r, FILE *out)
{
	json_t *root = json_object(), *checks = json_array();
	int bad = !root || !checks;
	bad |= json_object_set_new(root, "ok", json_boolean(report_ok(r)));
	for (size_t i = 0; checks && i < r->n; i++)
		bad |= json_array_append_new(checks, item_json(&r->items[i]));
	bad |= json_object_set_new(root, "checks", checks);
	bad |= json_object_set_new(root, "host", host_json(h, r));
	if (!bad)
		bad = json_dumpf(root, out, JSON_INDENT(2)) < 0 || fputc('\n', out) == EOF;
	json_decref(root);
	return bad ? -ENOMEM : 0;
}

int ab_doctor_report(const ab_host *h, bool json, FILE *out)
{
	dr_report *r = calloc(1, sizeof(*r));
	int ret;

	if (!r)
		return -ENOMEM;
	ret = build_report(h, r);
	if (ret == 0) {
		if (json)
			ret = print_json(h, r, out);
		else
			print_text(h, r, out);
	}
	if (ret == 0)
		ret = fflush(out) == EOF || ferror(out) ? -EIO : (report_ok(r) ? 0 : 1);
	ab_strv_free(&r->landlock_missing);
	free(r);
	return ret;
}

int ab_doctor(bool json)
{
	ab_host h;

	ab_host_probe(&h, true);
	int r = ab_doctor_report(&h, json, stdout);
	if (r < 0) {
		ab_err e = {0};
		ab_fail(&e, -r, "doctor: writing the report");
		ab_err_print(&e);
		return 1;
	}
	return r;
}
