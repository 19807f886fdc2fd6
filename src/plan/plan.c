/* SPDX-License-Identifier: MIT */
/*
 * The planner (parent, pure): profile + CLI + host probe + an lstat provider
 * -> struct ab_plan.  Every policy decision and every downgrade is made here,
 * once, so it can be unit-tested without privileges and printed by `explain`.
 * This file checks the paths, decides the identity, the command, the
 * environment and the limits, and builds the plan in order; the new root
 * (plan_mounts.c), the egress (plan_net.c) and Landlock (plan_landlock.c)
 * are planned in files of their own (plan_int.h).
 */
#include <errno.h>
#include <fnmatch.h>
#include <string.h>
#include <sys/resource.h>

#include "agentbox/ask.h"
#include "plan_int.h"

#define SYSTEM_PATH "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin"

int ab_real_lstat(void *ctx, const char *path, struct stat *st)
{
	(void)ctx;
	return lstat(path, st) < 0 ? -errno : 0;
}

/* ---------------------------------------------------------------- identity */

static int plan_identity(ab_plan *p, const ab_plan_input *in, ab_err *err)
{
	const ab_host *h = in->host;
	p->outer_uid = h->uid;
	p->outer_gid = h->gid;
	if (!h->is_root) {
		p->inside_uid = h->uid;
		p->inside_gid = h->gid;
		p->map_kuid = h->uid;
		p->map_kgid = h->gid;
		p->drop_groups = false;
		p->user_name = strdup(in->user && *in->user ? in->user : "agent");
		if (!p->user_name)
			return ab_fail(err, ENOMEM, "plan");
		return 0;
	}
	/* Root: the command never runs as uid 0 anywhere.  It runs as uid 1000
	 * inside, mapped to the workspace owner (or nobody for a root-owned
	 * workspace, whose files stay writable through an idmapped mount). */
	struct stat st;
	int r = pl_lstat(in, p->workspace, &st);
	if (r < 0)
		return ab_fail(err, -r, "workspace %s", p->workspace);
	p->root_mode = true;
	p->drop_groups = true;
	p->inside_uid = AB_ROOT_INSIDE_UID;
	p->inside_gid = AB_ROOT_INSIDE_GID;
	p->map_kuid = st.st_uid != 0 ? st.st_uid : AB_ROOT_FALLBACK_KUID;
	p->map_kgid = st.st_uid != 0 ? st.st_gid : AB_ROOT_FALLBACK_KGID;
	p->user_name = strdup("agent");
	if (!p->user_name)
		return ab_fail(err, ENOMEM, "plan");
	if (st.st_uid == 0 && h->idmap_mounts == AB_NO) {
		ab_fail(err, 0,
			"run as root on a root-owned workspace needs idmapped mounts, "
			"which this kernel lacks (Linux >= 5.12)");
		ab_err_hint(err, "chown the workspace to an unprivileged user, or run agentbox as "
				 "that user");
		return -EINVAL;
	}
	return 0;
}

/* ---------------------------------------------------------------- env */

static bool env_name_matches(const ab_strv *pass, const char *name, size_t len)
{
	char buf[256];
	if (len >= sizeof(buf))
		return false;
	memcpy(buf, name, len);
	buf[len] = '\0';
	for (size_t i = 0; i < pass->n; i++) {
		if (fnmatch(pass->v[i], buf, 0) == 0)
			return true;
	}
	return false;
}

static int env_set(ab_strv *env, const char *key, const char *val)
{
	size_t kl = strlen(key);
	for (size_t i = 0; i < env->n; i++) {
		if (strncmp(env->v[i], key, kl) == 0 && env->v[i][kl] == '=') {
			char *nv = ab_asprintf("%s=%s", key, val);
			if (!nv)
				return -ENOMEM;
			free(env->v[i]);
			env->v[i] = nv;
			return 0;
		}
	}
	return ab_strv_push_take(env, ab_asprintf("%s=%s", key, val));
}

static int plan_env(ab_plan *p, const ab_plan_input *in, ab_err *err)
{
	const ab_profile *prof = in->profile;
	ab_strv pass = {0};
	int r = ab_strv_copy(&pass, &prof->env.pass);
	/* always allowed through (the allowlist) */
	static const char *const base[] = {"TERM", "LANG", "LC_*", "COLORTERM", "TZ", "PATH"};
	for (size_t i = 0; !r && i < AB_ARRAY_SIZE(base); i++)
		r = ab_strv_push_unique(&pass, base[i]);
	if (!r && (in->ablate & AB_ABLATE_ENV))
		r = ab_strv_push_unique(&pass, "*");
	for (char *const *e = in->environ; !r && e && *e; e++) {
		const char *eq = strchr(*e, '=');
		if (!eq || eq == *e)
			continue;
		if (env_name_matches(&pass, *e, (size_t)(eq - *e)))
			r = ab_strv_push(&p->envp, *e);
	}
	ab_strv_free(&pass);
	bool has_path = false;
	for (size_t i = 0; i < p->envp.n; i++)
		if (strncmp(p->envp.v[i], "PATH=", 5) == 0)
			has_path = true;
	if (!r && !has_path)
		r = env_set(&p->envp, "PATH", SYSTEM_PATH);
	if (!r)
		r = env_set(&p->envp, "HOME", p->home);
	if (!r)
		r = env_set(&p->envp, "TMPDIR", "/tmp");
	if (!r)
		r = env_set(&p->envp, "USER", p->user_name);
	if (!r)
		r = env_set(&p->envp, "LOGNAME", p->user_name);
	if (!r)
		r = env_set(&p->envp, "AGENTBOX", "1");
	for (size_t i = 0; !r && i < prof->env.nset; i++)
		r = env_set(&p->envp, prof->env.set[i].key, prof->env.set[i].val);
	return r < 0 ? ab_fail(err, -r, "plan: environment") : 0;
}

/* ---------------------------------------------------------------- limits */

static int plan_limits(ab_plan *p, const ab_plan_input *in, ab_err *err)
{
	const ab_limits *l = &in->profile->limits;
	const struct {
		long long v;
		int res;
	} map[] = {
		{l->nofile, RLIMIT_NOFILE}, {l->nproc, RLIMIT_NPROC},
		{l->fsize, RLIMIT_FSIZE},   {l->core == AB_LIMIT_UNSET ? 0 : l->core, RLIMIT_CORE},
		{l->cpu, RLIMIT_CPU},
	};
	p->rlimits = calloc(AB_ARRAY_SIZE(map), sizeof(*p->rlimits));
	if (!p->rlimits)
		return ab_fail(err, ENOMEM, "plan");
	for (size_t i = 0; i < AB_ARRAY_SIZE(map); i++) {
		if (map[i].v == AB_LIMIT_UNSET)
			continue;
		rlim_t v = map[i].v == __LONG_LONG_MAX__ ? RLIM_INFINITY : (rlim_t)map[i].v;
		/* a ceiling: above the hard limit agentbox inherited (which only
		 * a privileged process can raise), that hard limit applies */
		rlim_t max = in->host->rlim_hard[map[i].res];
		rlim_t asked = max != RLIM_INFINITY && (v == RLIM_INFINITY || v > max) ? v : 0;
		if (asked)
			v = max;
		p->rlimits[p->nrlimits++] = (ab_rlimit){map[i].res, v, v, asked};
	}
	p->cg_memory = l->memory;
	p->cg_pids = l->pids;
	if (l->memory == AB_LIMIT_UNSET && l->pids == AB_LIMIT_UNSET)
		return 0;
	if (in->host->cgroup_version == 2 && in->host->cgroup_delegated == AB_YES) {
		p->cgroup_apply = true;
		return 0;
	}
	if (ab_strv_contains(&in->profile->allow_downgrade, "cgroup-limits")) {
		return ab_strv_push(&p->downgrades,
				    "cgroup-limits: limits.memory/limits.pids are NOT ENFORCED "
				    "(no delegated cgroup v2 here)") < 0
			       ? ab_fail(err, ENOMEM, "plan")
			       : 0;
	}
	ab_fail(err, 0,
		"the profile sets limits.memory/limits.pids, which need a delegated "
		"cgroup v2, and this machine has %s",
		in->host->cgroup_version == 2 ? "no writable cgroup v2 subtree" : "cgroup v1");
	ab_err_hint(err, "run under systemd-run --user --scope -p Delegate=yes, or add "
			 "\"cgroup-limits\" to allow_downgrade to run without them");
	return -EINVAL;
}

/* ---------------------------------------------------------------- build */

/* HOME may have been pointed elsewhere, or reach the home through a
 * symlink (/home -> /var/home): every form of it is just as private */
static int plan_other_homes(ab_plan *p, const ab_plan_input *in, ab_err *err)
{
	const char *cands[64];
	size_t nc = 0;
	if (in->pw_home)
		cands[nc++] = in->pw_home;
	for (size_t i = 0; in->home_aliases && in->home_aliases[i] && nc < 64; i++)
		cands[nc++] = in->home_aliases[i];
	for (size_t i = 0; i < nc; i++) {
		_cleanup_free_ char *h = ab_path_normalize(cands[i]);
		if (!h || strcmp(h, "/") == 0 || strcmp(h, p->home) == 0)
			continue;
		if (ab_strv_push_unique(&p->other_homes, h) < 0)
			return ab_fail(err, ENOMEM, "plan");
		if (!ab_path_is_under(h, p->workspace))
			continue;
		ab_fail(err, 0,
			"refusing to use %s as the workspace: it contains the home "
			"directory of your account (%s)",
			p->workspace, h);
		ab_err_hint(err, "run agentbox from a project directory, or pass -w DIR");
		return -EINVAL;
	}
	return 0;
}

/* System trees are never a workspace: as root (idmapped) the sandbox
 * could otherwise write /etc or /usr, and unprivileged it is a mistake. */
static int check_workspace_place(const ab_plan *p, const ab_plan_input *in, ab_err *err)
{
	static const char *const system_trees[] = {"/etc",   "/usr",   "/bin",    "/sbin", "/lib",
						   "/lib32", "/lib64", "/libx32", "/boot", "/dev",
						   "/proc",  "/sys",   "/run",    "/snap"};
	static const char *const system_dirs[] = {
		"/var",      "/var/lib", "/var/log", "/var/cache", "/var/spool",
		"/var/mail", "/home",    "/root",    "/opt",       "/srv",
		"/mnt",      "/media",   "/tmp",     "/var/tmp"};
	for (size_t i = 0; i < AB_ARRAY_SIZE(system_trees); i++) {
		if (!ab_path_is_under(p->workspace, system_trees[i]))
			continue;
		ab_fail(err, 0,
			"refusing to use %s as the workspace: it is inside the system "
			"tree %s",
			p->workspace, system_trees[i]);
		ab_err_hint(err, "run agentbox from a project directory, or pass -w DIR");
		return -EINVAL;
	}
	for (size_t i = 0; i < AB_ARRAY_SIZE(system_dirs); i++) {
		if (strcmp(p->workspace, system_dirs[i]) != 0)
			continue;
		ab_fail(err, 0,
			"refusing to use %s as the workspace: it is a system directory "
			"holding other people's or programs' files",
			p->workspace);
		ab_err_hint(err, "run agentbox from a project directory, or pass -w DIR");
		return -EINVAL;
	}
	for (const char *const *c = in->control_dirs; c && *c; c++) {
		if (!ab_path_is_under(p->workspace, *c))
			continue;
		ab_fail(err, 0,
			"refusing to use %s as the workspace: it is inside %s, where "
			"agentbox keeps its control sockets",
			p->workspace, *c);
		ab_err_hint(err, "run agentbox from a project directory, or pass -w DIR");
		return -EINVAL;
	}
	return 0;
}

static int plan_paths(ab_plan *p, const ab_plan_input *in, ab_err *err)
{
	p->workspace = ab_path_normalize(in->workspace);
	p->home = ab_path_normalize(in->home);
	if (!p->workspace || !p->home)
		return ab_fail(err, EINVAL, "workspace and home must be absolute paths");
	if (strcmp(p->home, "/") == 0) {
		/* the private home is a tmpfs at $HOME: over "/" it would replace the
		 * whole new root (and make every root-owned grant "under home") */
		ab_fail(err, 0, "refusing to use / as the home directory");
		ab_err_hint(err, "set HOME to a real home directory");
		return -EINVAL;
	}
	if (strcmp(p->workspace, "/") == 0 || ab_path_is_under(p->home, p->workspace)) {
		ab_fail(err, 0,
			"refusing to use %s as the workspace: it contains your home "
			"directory (%s), which the sandbox must not see",
			p->workspace, p->home);
		ab_err_hint(err, "run agentbox from a project directory, or pass -w DIR");
		return -EINVAL;
	}
	int r = plan_other_homes(p, in, err);
	if (r < 0 || (r = check_workspace_place(p, in, err)) < 0)
		return r;
	const char *d = pl_under_any(&in->profile->fs.deny, p->workspace);
	if (d) {
		ab_fail(err, 0, "the workspace %s is inside a denied path (%s)", p->workspace, d);
		return -EINVAL;
	}
	p->hostname = strdup(in->profile->hostname ? in->profile->hostname : "agentbox");
	if (!p->hostname)
		return ab_fail(err, ENOMEM, "plan");
	return 0;
}

/* Ask on denial: asked for by --ask or the profile; on only where the
 * answer can come from the user's own terminal and nothing inside holds it
 * (the sandbox's pty, stdin a terminal) and there is a proxy to hold the
 * request.  Otherwise the run behaves as without it. */
static int plan_ask(ab_plan *p, const ab_plan_input *in, ab_err *err)
{
	bool want = in->ask == 1 || in->profile->ask == 1;
	p->ask_timeout_s = in->ask_timeout_s ? in->ask_timeout_s : AB_ASK_DEFAULT_TIMEOUT_S;
	if (!want)
		return 0;
	p->ask_wanted = true;
	if ((in->tty_mask & 1) && in->force_pty == 0) {
		if (ab_strv_push(&p->warnings, "--ask: not asking, the command holds your terminal "
					       "(--no-pty); refused hosts get their 403") < 0)
			return ab_fail(err, ENOMEM, "plan");
		return 0;
	}
	p->ask = (p->pty_mask & 1) && (in->tty_mask & 1) && !(in->ablate & AB_ABLATE_NETNS);
	if (p->ask && in->ask_profile &&
	    (!(p->ask_profile = strdup(in->ask_profile)) ||
	     (in->ask_extends && !(p->ask_extends = strdup(in->ask_extends)))))
		return ab_fail(err, ENOMEM, "plan");
	return 0;
}

static int plan_command(ab_plan *p, const ab_plan_input *in, ab_err *err)
{
	int r = 0;
	if (in->argv && in->argv[0]) {
		for (char *const *a = in->argv; !r && *a; a++)
			r = ab_strv_push(&p->argv, *a);
	} else if (in->profile->command.n) {
		r = ab_strv_copy(&p->argv, &in->profile->command);
	} else {
		ab_fail(err, 0, "no command to run");
		ab_err_hint(err,
			    "give one after '--' (agentbox run -- COMMAND), or set \"command\" "
			    "in the profile");
		return -EINVAL;
	}
	if (r < 0)
		return ab_fail(err, ENOMEM, "plan");
	/* Nothing inside may hold the user's real terminal: every one of 0-2
	 * that is a terminal is replaced by the sandbox's own pty. */
	if (in->force_pty == 1 && !(in->ablate & AB_ABLATE_PTY))
		p->pty_mask = in->tty_mask ? in->tty_mask : 7;
	else if (in->force_pty == 0 || (in->ablate & AB_ABLATE_PTY))
		p->pty_mask = 0;
	else
		p->pty_mask = in->tty_mask & 7;
	p->use_pty = p->pty_mask != 0;
	p->pass_clipboard = in->profile->terminal.clipboard == 1;
	return plan_ask(p, in, err);
}

static int plan_cwd(ab_plan *p, const ab_plan_input *in, ab_err *err)
{
	_cleanup_free_ char *n = in->cwd ? ab_path_normalize(in->cwd) : NULL;
	if (n && ab_path_is_under(n, p->workspace))
		p->cwd = TAKE_PTR(n);
	else
		p->cwd = strdup(p->workspace);
	return p->cwd ? 0 : ab_fail(err, ENOMEM, "plan");
}

static const struct {
	unsigned bit;
	const char *name, *what;
} ablations[] = {
	{AB_ABLATE_SECCOMP, "seccomp", "no seccomp filter"},
	{AB_ABLATE_LANDLOCK, "landlock", "no Landlock rules"},
	{AB_ABLATE_NETNS, "netns", "the host's network, no proxy"},
	{AB_ABLATE_ENV, "env", "agentbox's whole environment passes in"},
	{AB_ABLATE_HOME, "home", "the real home, read-write"},
	{AB_ABLATE_PTY, "pty", "no pty: the real terminal passes in"},
	{AB_ABLATE_CONNECT, "connect", "connect is not mediated"},
	{AB_ABLATE_SETTLE, "settle",
	 "what the run leaves armed stays (nested repositories, "
	 "\"?\" entries)"},
	{AB_ABLATE_GITCFG, "gitconfig", "paths named by git's configuration are writable"},
	{AB_ABLATE_HSTATE, "hstate", "anchored fs.protect entries are ignored"},
	{AB_ABLATE_SETID, "setid", "set-id mode bits are not checked, even in idmapped grants"},
	{AB_ABLATE_GITLIVE, "gitlive", "a new .git is made where the host's git finds it"},
	{AB_ABLATE_GUARDCOPY, "guardcopy", "a guarded file is the host's own while the run lasts"},
	{AB_ABLATE_PHHOLD, "phhold",
	 "placeholders held open during the run: removing one on the host does not stop it"},
};

int ab_ablate_parse(const char *s, unsigned *out, ab_err *err)
{
	*out = 0;
	_cleanup_free_ char *dup = strdup(s ? s : "");
	char *save = NULL;
	if (!dup)
		return ab_fail(err, ENOMEM, "AGENTBOX_TEST_ABLATE");
	for (char *t = strtok_r(dup, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		size_t i = 0;
		while (i < AB_ARRAY_SIZE(ablations) && strcmp(ablations[i].name, t) != 0)
			i++;
		if (i == AB_ARRAY_SIZE(ablations))
			return ab_fail(
				err, 0,
				"AGENTBOX_TEST_ABLATE: unknown layer '%s' (seccomp, "
				"landlock, netns, env, home, pty, connect, settle, gitconfig, "
				"hstate, setid, gitlive, guardcopy, phhold)",
				t);
		*out |= ablations[i].bit;
	}
	return 0;
}

/* Test-only weakening (plan.h): applied last, each one listed loudly. */
static int plan_ablate(ab_plan *p, const ab_plan_input *in, ab_err *err)
{
	if (in->ablate & AB_ABLATE_SECCOMP)
		p->seccomp.disabled = true;
	if (in->ablate & AB_ABLATE_LANDLOCK)
		p->landlock.enabled = false;
	if (in->ablate & AB_ABLATE_NETNS)
		p->share_net = true;
	p->git_settle = !(in->ablate & AB_ABLATE_SETTLE);
	p->ph_hold = in->ablate & AB_ABLATE_PHHOLD;
	snprintf(p->git_tag, sizeof(p->git_tag), "%s", in->run_tag ? in->run_tag : "0");
	for (char *c = p->git_tag; *c; c++)
		if (!((*c >= '0' && *c <= '9') || (*c >= 'a' && *c <= 'f')))
			*c = '0';
	for (size_t i = 0; i < AB_ARRAY_SIZE(ablations); i++) {
		if (!(in->ablate & ablations[i].bit))
			continue;
		char *w = ab_asprintf("TEST ABLATION %s: %s (this binary is for agentbox's own "
				      "tests only)",
				      ablations[i].name, ablations[i].what);
		if (!w || ab_strv_push_take(&p->downgrades, w) < 0)
			return ab_fail(err, ENOMEM, "plan");
	}
	return 0;
}

/* Seccomp's set-id mode rules, only where they protect something.  A file
 * the sandbox creates, or chmods (no CAP_FOWNER inside), is owned on the host
 * by its own host uid (map_kuid), with its group or one of its groups -- except
 * in a writable idmapped grant (a root caller's root-owned workspace or
 * write grant), where new files belong to host root and a set-id bit would
 * make a set-uid root program for every local user.  On a file of its own a
 * set-id bit gives other local users only what that uid has, and the
 * sandbox nothing: it cannot run it unconfined (nosuid, no_new_privs), and any
 * executable it leaves is already a program the owner may run.  Read-only
 * idmapped grants cannot take a new file or a chmod (EROFS).  Without the
 * rules, open and openat carry no argument check, and the kernel's seccomp
 * action cache lets them skip the filter. */
static int plan_setid(ab_plan *p, const ab_plan_input *in, ab_err *err)
{
	const ab_mount *idm = NULL;
	for (size_t i = 0; !idm && i < p->nmounts; i++)
		if (p->mounts[i].kind == AB_MNT_BIND_RW && (p->mounts[i].flags & AB_MNT_F_IDMAP))
			idm = &p->mounts[i];
	p->seccomp.setid_unchecked = !idm || (in->ablate & AB_ABLATE_SETID);
	if (idm && (in->ablate & AB_ABLATE_SETID))
		p->setid_why = ab_asprintf("NOT CHECKED (test ablation), although %s is writable "
					   "through an idmapped mount: files created there belong "
					   "to host root",
					   idm->dst);
	else if (idm)
		p->setid_why = ab_asprintf("refused (EPERM): %s is writable through an idmapped "
					   "mount, where files created belong to host root",
					   idm->dst);
	else
		p->setid_why = ab_asprintf(
			"allowed: no writable grant is idmapped, so every file the sandbox can "
			"create or chmod on the host is owned by uid %u, its own host identity, and "
			"a set-id bit gives nothing; open and openat skip the filter (the kernel's "
			"seccomp action cache)",
			(unsigned)p->map_kuid);
	return p->setid_why ? 0 : ab_fail(err, ENOMEM, "plan");
}

/* Connect mediation (host unix sockets bound after the start) rides on
 * seccomp user notification too: without it, such a socket in a granted
 * tree would be reachable.  Refused unless the profile accepts that. */
static int plan_connect_lost(ab_plan *p, const ab_plan_input *in, ab_err *err)
{
	if (in->ablate & AB_ABLATE_CONNECT)
		return 0;
	if (ab_strv_contains(&in->profile->allow_downgrade, "seccomp-user-notif"))
		return ab_strv_push(&p->downgrades,
				    "seccomp-user-notif: connect is NOT MEDIATED: a unix socket a "
				    "host process binds in a granted tree after the start is "
				    "reachable; a new .git is the host's while the run lasts "
				    "(no seccomp user notification here)") < 0
			       ? ab_fail(err, ENOMEM, "plan")
			       : 0;
	ab_fail(err, 0, "connect mediation needs seccomp user notification, and %s",
		in->host->seccomp_listener_busy
			? "a seccomp filter above agentbox (a container runtime's) already has the "
			  "one notification listener a process may have"
			: "this kernel has none (Linux 5.0)");
	ab_err_hint(err, "run agentbox outside that filter, or add \"seccomp-user-notif\" to "
			 "allow_downgrade to run with only the host sockets bound at the start "
			 "hidden");
	return -EINVAL;
}

/* The record (src/observe/supervise.c): denied syscalls always, commands
 * when there is an audit log to write them to.  Both ride on seccomp user
 * notification; without it the filter still denies, only the record is lost,
 * and the run says so. */
static int plan_record(ab_plan *p, const ab_plan_input *in, ab_err *err)
{
	if (in->learn && (p->seccomp.disabled || in->host->seccomp_user_notif != AB_YES)) {
		ab_fail(err, 0, "run --learn records through seccomp user notification, which %s",
			p->seccomp.disabled ? "this run has switched off"
			: in->host->seccomp_listener_busy
				? "a seccomp filter above agentbox (a container runtime's) "
				  "already holds"
				: "this kernel lacks (Linux 5.0)");
		ab_err_hint(err, "learn on a host where `agentbox doctor` shows seccomp user "
				 "notification, or write the profile by hand");
		return -EINVAL;
	}
	p->seccomp.notify_learn = in->learn;
	if (p->seccomp.disabled)
		return 0;
	if (in->host->seccomp_user_notif != AB_YES) {
		int r = plan_connect_lost(p, in, err);
		if (r < 0)
			return r;
		const char *w =
			in->host->seccomp_listener_busy
				? "no record of commands or denied syscalls: a seccomp filter "
				  "above agentbox (a container runtime's) already has the one "
				  "notification listener a process may have"
				: "no record of commands or denied syscalls: this kernel has no "
				  "seccomp user notification (Linux 5.0)";
		if (ab_strv_push(&p->warnings, w) < 0)
			return ab_fail(err, ENOMEM, "plan");
		p->record_lost = w;
		return 0;
	}
	p->seccomp.notify_connect = !(in->ablate & AB_ABLATE_CONNECT);
	/* a new .git in a host-backed writable grant is kept off the host
	 * while the run lasts (include/agentbox/mediate.h) */
	for (size_t i = 0; i < p->nmounts && !(in->ablate & AB_ABLATE_GITLIVE); i++)
		if (ab_plan_git_grant(&p->mounts[i]))
			p->seccomp.notify_create = true;
	if (p->seccomp.notify_create &&
	    ab_strv_contains(&in->profile->allow_downgrade, "nested-git-live")) {
		p->seccomp.notify_create = false;
		if (ab_strv_push(
			    &p->downgrades,
			    "nested-git-live: creations and writes are NOT MEDIATED: a .git the "
			    "run makes, or a nested repository it writes to, is the host's while "
			    "the run lasts (disarmed when it ends)") < 0)
			return ab_fail(err, ENOMEM, "plan");
	}
	p->seccomp.notify_denials = in->profile->audit.denials != 0;
	p->seccomp.notify_exec = in->profile->audit.exec != 0 &&
				 (p->egress.log_path != NULL || p->egress.otlp_url != NULL);
	/* a rendered credentials file is a mount point: a harness that saves it
	 * by renaming a new file over it needs the parent (src/observe/supervise.c) */
	for (size_t i = 0; i < p->nmounts; i++)
		if (p->mounts[i].kind == AB_MNT_CONTENT && (p->mounts[i].flags & AB_MNT_F_RENDER))
			p->seccomp.notify_rename = true;
	return 0;
}

int ab_plan_build(const ab_plan_input *in, ab_plan **out, ab_err *err)
{
	_cleanup_plan_ ab_plan *p = calloc(1, sizeof(*p));
	if (!p)
		return ab_fail(err, ENOMEM, "plan");
	p->cg_memory = p->cg_pids = AB_LIMIT_UNSET;
	p->trace = in->trace;
	p->cap_last_cap = in->host->cap_last_cap > 0 ? in->host->cap_last_cap : 40;
	p->keyring_skip = in->host->keyctl_errno;
	int r;
	if ((r = plan_paths(p, in, err)) < 0 || (r = plan_identity(p, in, err)) < 0 ||
	    (r = plan_command(p, in, err)) < 0 || (r = plan_cwd(p, in, err)) < 0)
		return r;
	if (in->host->seccomp_ok == AB_NO) {
		ab_fail(err, 0,
			"this kernel has no seccomp filter support; agentbox cannot run "
			"without it");
		ab_err_hint(err, "use a kernel built with CONFIG_SECCOMP_FILTER=y");
		return -EINVAL;
	}
	if ((r = pl_plan_mounts(p, in, err)) < 0 || (r = pl_plan_review(p, in, err)) < 0)
		return r;
	if ((r = pl_plan_egress(p, in, err)) < 0)
		return r;
	pl_sort_mounts(p);
	if ((r = plan_env(p, in, err)) < 0 || (r = pl_plan_egress_env(p, err)) < 0 ||
	    (r = plan_limits(p, in, err)) < 0 || (r = pl_plan_landlock(p, in, err)) < 0)
		return r;
	if (ab_strv_copy(&p->guard, &in->profile->fs.guard) < 0 ||
	    ab_strv_copy(&p->seccomp.extra_deny, &in->profile->syscalls.deny) < 0 ||
	    ab_strv_copy(&p->seccomp.allow, &in->profile->syscalls.allow) < 0)
		return ab_fail(err, ENOMEM, "plan");
	if ((r = ab_seccomp_validate(&p->seccomp, err)) < 0 || (r = plan_ablate(p, in, err)) < 0 ||
	    (r = pl_plan_guard_copies(p, in, err)) < 0 || (r = plan_setid(p, in, err)) < 0 ||
	    (r = plan_record(p, in, err)) < 0)
		return r;
	if (!p->root_mode && in->supplementary_groups > 0) {
		char *w = ab_asprintf("supplementary groups of uid %u are kept (an unprivileged "
				      "user cannot drop them); files are shown as nogroup",
				      (unsigned)p->outer_uid);
		if (!w || ab_strv_push_take(&p->warnings, w) < 0)
			return ab_fail(err, ENOMEM, "plan");
	}
	if (ab_strv_copy(&p->egress.downgrades, &p->downgrades) < 0)
		return ab_fail(err, ENOMEM, "plan");
	*out = TAKE_PTR(p);
	return 0;
}

void ab_plan_free(ab_plan *p)
{
	if (!p)
		return;
	for (size_t i = 0; i < p->nmounts; i++) {
		free(p->mounts[i].src);
		free(p->mounts[i].copy);
		free(p->mounts[i].dst);
		free(p->mounts[i].why);
	}
	free(p->mounts);
	free(p->workspace);
	free(p->review_dir);
	free(p->home);
	ab_strv_free(&p->other_homes);
	free(p->cwd);
	free(p->hostname);
	free(p->user_name);
	free(p->ask_profile);
	free(p->ask_extends);
	free(p->rlimits);
	ab_strv_free(&p->hidden);
	ab_strv_free(&p->absent);
	ab_strv_free(&p->unguarded);
	ab_strv_free(&p->guard);
	ab_strv_free(&p->gitcfg);
	ab_strv_free(&p->git_shared_rel);
	ab_ll_plan_free(&p->landlock);
	pl_egress_plan_free(&p->egress);
	ab_strv_free(&p->seccomp.extra_deny);
	ab_strv_free(&p->seccomp.allow);
	free(p->setid_why);
	ab_strv_free(&p->argv);
	ab_strv_free(&p->envp);
	ab_strv_free(&p->downgrades);
	ab_strv_free(&p->warnings);
	free(p->ph_key);
	free(p);
}
