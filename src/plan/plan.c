/* SPDX-License-Identifier: MIT */
/*
 * The planner (parent, pure): profile + CLI + host probe + an lstat provider
 * -> struct ab_plan.  Every policy decision and every downgrade is made here,
 * once, so it can be unit-tested without privileges and printed by `explain`.
 */
#include "agentbox/plan.h"

#include <errno.h>
#include <fnmatch.h>
#include <string.h>
#include <sys/resource.h>

#include "agentbox/phkey.h"

#define SYSTEM_PATH "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin"

int ab_real_lstat(void *ctx, const char *path, struct stat *st)
{
	(void)ctx;
	return lstat(path, st) < 0 ? -errno : 0;
}

static int plan_lstat(const ab_plan_input *in, const char *path, struct stat *st)
{
	return in->lstat(in->lstat_ctx, path, st);
}

/* ---------------------------------------------------------------- mounts */

static int depth_of(const char *p)
{
	int d = 0;
	for (; *p; p++)
		if (*p == '/' && p[1])
			d++;
	return d;
}

static int add_mount(ab_plan *p, enum ab_mnt_kind kind, const char *src, const char *dst,
		     unsigned flags, const char *why);

int ab_plan_add_mount(ab_plan *p, enum ab_mnt_kind kind, const char *src, const char *dst,
		      unsigned flags, const char *why)
{
	return add_mount(p, kind, src, dst, flags, why);
}

static int add_mount(ab_plan *p, enum ab_mnt_kind kind, const char *src, const char *dst,
		     unsigned flags, const char *why)
{
	ab_mount *nm = realloc(p->mounts, (p->nmounts + 1) * sizeof(*nm));
	if (!nm)
		return -ENOMEM;
	p->mounts = nm;
	ab_mount *m = &p->mounts[p->nmounts];
	*m = (ab_mount){.kind = kind, .flags = flags};
	m->src = src ? strdup(src) : NULL;
	m->dst = strdup(dst);
	m->why = strdup(why);
	if ((src && !m->src) || !m->dst || !m->why) {
		free(m->src);
		free(m->dst);
		free(m->why);
		return -ENOMEM;
	}
	p->nmounts++;
	return 0;
}

static int kind_prio(enum ab_mnt_kind k)
{
	switch (k) {
	case AB_MNT_TMPFS:
	case AB_MNT_PROC:
	case AB_MNT_DEV:
		return 0;
	case AB_MNT_SYMLINK:
	case AB_MNT_BIND_RO:
	case AB_MNT_BIND_RW:
		return 1;
	case AB_MNT_MASK:
	case AB_MNT_PROTECT:
	case AB_MNT_PLACEHOLDER:
	case AB_MNT_RO_REMOUNT:
	case AB_MNT_PIN:
		return 2;
	case AB_MNT_CONTENT:
		return 3;
	}
	return 4;
}

/* Order: grants and structure by depth (parents first), then masks and
 * protections by depth, then generated files.  Stable for equal keys. */
static int mount_cmp(const void *a, const void *b)
{
	const ab_mount *x = a, *y = b;
	int gx = kind_prio(x->kind) >= 2 ? kind_prio(x->kind) : 0;
	int gy = kind_prio(y->kind) >= 2 ? kind_prio(y->kind) : 0;
	if (gx != gy)
		return gx - gy;
	int dx = depth_of(x->dst), dy = depth_of(y->dst);
	if (dx != dy)
		return dx - dy;
	return kind_prio(x->kind) - kind_prio(y->kind);
}

static void sort_mounts(ab_plan *p)
{
	/* insertion sort: stable, n is small */
	for (size_t i = 1; i < p->nmounts; i++) {
		ab_mount t = p->mounts[i];
		size_t j = i;
		while (j > 0 && mount_cmp(&p->mounts[j - 1], &t) > 0) {
			p->mounts[j] = p->mounts[j - 1];
			j--;
		}
		p->mounts[j] = t;
	}
}

static const char *under_any(const ab_strv *list, const char *path)
{
	for (size_t i = 0; i < list->n; i++)
		if (ab_path_is_under(path, list->v[i]))
			return list->v[i];
	return NULL;
}

/* The bind grant (RO or RW) that `path` lives in, deepest first. */
static const ab_mount *covering_bind(const ab_plan *p, const char *path)
{
	const ab_mount *best = NULL;
	for (size_t i = 0; i < p->nmounts; i++) {
		const ab_mount *m = &p->mounts[i];
		if (m->kind != AB_MNT_BIND_RO && m->kind != AB_MNT_BIND_RW && m->kind != AB_MNT_TMPFS)
			continue;
		if (!ab_path_is_under(path, m->dst))
			continue;
		if (!best || strlen(m->dst) >= strlen(best->dst))
			best = m;
	}
	return best;
}

static bool has_mount_at(const ab_plan *p, const char *dst)
{
	for (size_t i = 0; i < p->nmounts; i++)
		if (strcmp(p->mounts[i].dst, dst) == 0)
			return true;
	return false;
}

static int add_grant(ab_plan *p, const ab_plan_input *in, const char *path, bool rw,
		     const char *why, ab_err *err)
{
	const ab_profile *prof = in->profile;
	const char *d = under_any(&prof->fs.deny, path);
	if (d) {
		/* deny wins: a grant inside a denied tree is dropped */
		char *note = ab_asprintf("%s (%s, inside denied %s)", path, why, d);
		return note ? ab_strv_push_take(&p->hidden, note) : -ENOMEM;
	}
	struct stat st;
	int r = plan_lstat(in, path, &st);
	if (r == -ENOENT || r == -ENOTDIR) {
		char *note = ab_asprintf("%s (%s)", path, why);
		return note ? ab_strv_push_take(&p->absent, note) : -ENOMEM;
	}
	if (r < 0)
		return ab_fail(err, -r, "%s: %s", why, path);
	unsigned flags = S_ISDIR(st.st_mode) ? AB_MNT_F_DIR : 0;
	/* Root caller: root-owned grants under home or writable ones are shown to
	 * the unprivileged sandbox user through an idmapped mount. */
	if (p->root_mode && st.st_uid == 0 && !S_ISLNK(st.st_mode) &&
	    (rw || ab_path_is_under(path, p->home)))
		flags |= AB_MNT_F_IDMAP;
	/* Symlinks are never followed: the applier recreates the link inside,
	 * and Landlock gets no rule for it (a rule would follow the link). */
	if (S_ISLNK(st.st_mode))
		flags = (flags & ~AB_MNT_F_DIR) | AB_MNT_F_SYMLINK;
	return add_mount(p, rw ? AB_MNT_BIND_RW : AB_MNT_BIND_RO, path, path, flags, why);
}

static int plan_base_mounts(ab_plan *p, const ab_plan_input *in, ab_err *err)
{
	static const char *const tmpfs_dirs[] = {"/tmp", "/run", "/var/tmp"};
	int r = 0;
	r |= add_mount(p, AB_MNT_PROC, NULL, "/proc", AB_MNT_F_DIR, "proc");
	r |= add_mount(p, AB_MNT_DEV, NULL, "/dev", AB_MNT_F_DIR, "dev");
	r |= add_mount(p, AB_MNT_TMPFS, NULL, "/dev/shm", AB_MNT_F_DIR, "dev");
	for (size_t i = 0; i < AB_ARRAY_SIZE(tmpfs_dirs); i++)
		r |= add_mount(p, AB_MNT_TMPFS, NULL, tmpfs_dirs[i], AB_MNT_F_DIR, "private tmp");
	if (in->ablate & AB_ABLATE_HOME)
		r |= add_mount(p, AB_MNT_BIND_RW, p->home, p->home,
			       AB_MNT_F_DIR | (p->root_mode ? AB_MNT_F_IDMAP : 0), "TEST ABLATION home");
	else
		r |= add_mount(p, AB_MNT_TMPFS, NULL, p->home, AB_MNT_F_DIR, "private home");
	/* the kernel's knobs stay read-only; the rest of /proc is per-pid-ns */
	static const char *const proc_ro[] = {"/proc/sys", "/proc/sysrq-trigger", "/proc/irq"};
	for (size_t i = 0; i < AB_ARRAY_SIZE(proc_ro); i++)
		r |= add_mount(p, AB_MNT_RO_REMOUNT, NULL, proc_ro[i], AB_MNT_F_OPTIONAL, "proc");
	/* host-wide information the sandbox has no business reading */
	static const char *const proc_mask[] = {"/proc/kcore", "/proc/timer_list",
						"/proc/sched_debug", "/proc/keys",
						"/proc/key-users"};
	for (size_t i = 0; i < AB_ARRAY_SIZE(proc_mask); i++)
		r |= add_mount(p, AB_MNT_MASK, NULL, proc_mask[i], AB_MNT_F_OPTIONAL, "proc");
	if (r)
		return ab_fail(err, ENOMEM, "plan");
	for (size_t i = 0; i < in->profile->fs.tmpfs.n; i++) {
		if (add_mount(p, AB_MNT_TMPFS, NULL, in->profile->fs.tmpfs.v[i], AB_MNT_F_DIR, "fs.tmpfs"))
			return ab_fail(err, ENOMEM, "plan");
	}
	return 0;
}

/* Code in these runs later outside the sandbox without anyone asking: shell
 * and editor startup files, autostart and systemd user units, git's global
 * config (hooksPath, fsmonitor), programs on PATH in ~/.local/bin and ~/bin.
 * A write grant may never be one of them, lie inside one, or contain one.
 * The directories they live in (~, ~/.config, ~/.local, ~/.local/share) may
 * not be granted whole either; a subdirectory of them may (~/.config/NAME). */
static const char *const startup_holders[] = {"", "/.config", "/.local", "/.local/share"};
static const char *const startup_paths[] = {
	"/.bashrc", "/.bash_profile", "/.bash_login", "/.bash_logout", "/.profile", "/.zshrc",
	"/.zshenv", "/.zprofile", "/.zlogin", "/.zlogout", "/.kshrc", "/.mkshrc", "/.cshrc",
	"/.tcshrc", "/.xprofile", "/.xsession", "/.xsessionrc", "/.xinitrc", "/.pam_environment",
	"/.gitconfig", "/.config/git", "/.vimrc", "/.vim", "/.config/nvim", "/.emacs",
	"/.emacs.d", "/.config/emacs", "/.ssh", "/.gnupg", "/.local/bin", "/bin",
	"/.config/autostart", "/.config/systemd", "/.config/fish", "/.config/environment.d",
	"/.config/user-dirs.dirs", "/.local/share/systemd", "/.config/bash", "/.config/zsh",
};

static int refuse_write(const char *path, const char *what, const char *d, ab_err *err)
{
	ab_fail(err, 0, "refusing to make %s writable: it %s %s, where shell or editor startup "
			"files, autostart entries or programs on PATH live",
		path, what, d);
	ab_err_hint(err, "grant the specific subdirectory the program needs (e.g. ~/.config/NAME)");
	return -EINVAL;
}

static int check_write_grant_in(const char *home, const char *path, ab_err *err)
{
	for (size_t i = 0; i < AB_ARRAY_SIZE(startup_holders); i++) {
		_cleanup_free_ char *d = ab_asprintf("%s%s", home, startup_holders[i]);
		if (!d)
			return ab_fail(err, ENOMEM, "plan");
		if (ab_path_is_under(d, path))
			return refuse_write(path, strcmp(d, path) == 0 ? "is" : "contains", d, err);
	}
	for (size_t i = 0; i < AB_ARRAY_SIZE(startup_paths); i++) {
		_cleanup_free_ char *d = ab_asprintf("%s%s", home, startup_paths[i]);
		if (!d)
			return ab_fail(err, ENOMEM, "plan");
		if (ab_path_is_under(d, path))
			return refuse_write(path, strcmp(d, path) == 0 ? "is" : "contains", d, err);
		if (ab_path_is_under(path, d))
			return refuse_write(path, "is inside", d, err);
	}
	return 0;
}

static int check_write_grant(const ab_plan *p, const char *path, ab_err *err)
{
	/* protect entries are relative to each writable root: a root inside a
	 * git directory would leave that repository's hooks and config writable */
	const char *g = path;
	while ((g = strstr(g, "/.git")) && g[5] != '\0' && g[5] != '/')
		g += 5;
	if (g) {
		ab_fail(err, 0, "refusing to make %s writable: it is (inside) a git directory, whose "
				"hooks and config would not be protected", path);
		ab_err_hint(err, "grant the repository's work tree instead");
		return -EINVAL;
	}
	int r = check_write_grant_in(p->home, path, err);
	for (size_t i = 0; r == 0 && i < p->other_homes.n; i++)
		r = check_write_grant_in(p->other_homes.v[i], path, err);
	return r;
}

static int plan_grants(ab_plan *p, const ab_plan_input *in, ab_err *err)
{
	const ab_profile *prof = in->profile;
	int r;
	for (size_t i = 0; i < prof->fs.read.n; i++)
		if ((r = add_grant(p, in, prof->fs.read.v[i], false, "fs.read", err)) < 0)
			return r;
	for (size_t i = 0; i < prof->fs.write.n; i++) {
		if ((r = check_write_grant(p, prof->fs.write.v[i], err)) < 0)
			return ab_err_prefix(err, ab_strv_contains(&prof->cli_write,
								   prof->fs.write.v[i])
							  ? "--write"
							  : "fs.write");
		if ((r = add_grant(p, in, prof->fs.write.v[i], true, "fs.write", err)) < 0)
			return r;
	}
	if ((r = check_write_grant(p, p->workspace, err)) < 0)
		return ab_err_prefix(err, "workspace");
	if (!has_mount_at(p, p->workspace))
		if ((r = add_grant(p, in, p->workspace, true, "workspace", err)) < 0)
			return r;
	for (size_t i = 0; i < prof->unix_sockets.n; i++)
		if ((r = add_grant(p, in, prof->unix_sockets.v[i], true, "unix_sockets", err)) < 0)
			return r;
	return 0;
}

/* The mask is placed by path in the new root: a symbolic link between the
 * covering grant and the denied path would send it elsewhere and the deny
 * would silently not apply.  Returns 0, 1 if a component is absent (nothing
 * to hide), or an error. */
static int deny_path_check(const ab_plan_input *in, const ab_mount *cov, const char *d,
			   ab_err *err)
{
	if (strcmp(cov->dst, d) == 0)
		return 0;
	_cleanup_free_ char *cur = strdup(d);
	if (!cur)
		return ab_fail(err, ENOMEM, "plan");
	/* from the covering grant itself (a symlinked grant is bound as a link)
	 * down to the denied path's parent */
	size_t base = strlen(cov->dst);
	for (char *s = cur + (base > 1 ? base : 1); *s; s++) {
		if (*s != '/')
			continue;
		*s = '\0';
		struct stat st;
		int r = plan_lstat(in, cur, &st);
		if (r == -ENOENT || r == -ENOTDIR)
			return 1;
		if (r < 0)
			return ab_fail(err, -r, "fs.deny: %s", cur);
		if (S_ISLNK(st.st_mode)) {
			ab_fail(err, 0, "fs.deny: %s is below the symbolic link %s inside a granted "
					"tree; cannot hide it", d, cur);
			ab_err_hint(err, "deny the path the link resolves to instead, or remove the "
					 "link");
			return -EINVAL;
		}
		*s = '/';
	}
	return 0;
}

static int protect_one(ab_plan *p, const ab_plan_input *in, const char *root, const char *rel,
		       bool anchored, bool denied, ab_err *err);

/* A denied path that does not exist yet inside a writable grant other than
 * the workspace (a harness's token file, ~/.claude/.credentials.json) is
 * reserved, read-only, for the run: else the sandbox could create it, and
 * the harness run on the host later would use what it planted (another
 * account's tokens).  In the workspace an absent denied path stays
 * creatable (a placeholder there would show up in the project). */
static int reserve_absent_deny(ab_plan *p, const ab_plan_input *in, const ab_mount *cov,
			       const char *d, ab_err *err)
{
	if (cov->kind != AB_MNT_BIND_RW || !(cov->flags & AB_MNT_F_DIR) ||
	    strcmp(cov->dst, p->workspace) == 0 || !ab_path_is_under(d, cov->dst) ||
	    strcmp(d, cov->dst) == 0)
		return 0;
	_cleanup_free_ char *root = strdup(cov->dst);
	if (!root)
		return ab_fail(err, ENOMEM, "plan");
	return protect_one(p, in, root, d + strlen(root) + 1, true, true, err);
}

static int deny_one(ab_plan *p, const ab_plan_input *in, const char *d, ab_err *err)
{
	const ab_mount *cov = covering_bind(p, d);
	if (!cov || cov->kind == AB_MNT_TMPFS)
		return 0; /* not visible inside anyway (or private and empty) */
	int r = deny_path_check(in, cov, d, err);
	if (r)
		return r < 0 ? r : 0;
	struct stat st;
	r = plan_lstat(in, d, &st);
	if (r == -ENOENT && reserve_absent_deny(p, in, cov, d, err) < 0)
		return ab_err_ret(err);
	if (r == -ENOENT || r == -ENOTDIR)
		return 0;
	if (r < 0)
		return ab_fail(err, -r, "fs.deny: %s", d);
	if (S_ISLNK(st.st_mode)) {
		/* A mount cannot cover a symlink; the link is harmless only if
		 * its target is not visible.  Refuse rather than guess. */
		ab_fail(err, 0, "fs.deny: %s is a symbolic link inside a granted tree; "
				"cannot hide it", d);
		ab_err_hint(err, "deny the link's target instead, or remove the link");
		return -EINVAL;
	}
	unsigned flags = S_ISDIR(st.st_mode) ? AB_MNT_F_DIR : 0;
	if (add_mount(p, AB_MNT_MASK, NULL, d, flags, "fs.deny") < 0 ||
	    ab_strv_push_unique(&p->hidden, d) < 0)
		return ab_fail(err, ENOMEM, "plan");
	return 0;
}

/* Stable placeholders: their key's directory is denied in every sandbox that
 * uses one, as if the profile listed it (a grant of ~/.local hides it, an
 * absent one inside a writable grant is reserved). */
static int plan_phkey(ab_plan *p, const ab_plan_input *in, ab_err *err)
{
	const ab_profile *prof = in->profile;
	size_t i;
	for (i = 0; i < prof->nsecrets && !prof->secrets[i].ph_stable; i++)
		;
	if (i == prof->nsecrets)
		return 0;
	p->ph_key = ab_phkey_path(p->home, in->environ);
	_cleanup_free_ char *dir = p->ph_key ? strdup(p->ph_key) : NULL;
	if (!dir)
		return ab_fail(err, ENOMEM, "plan");
	*strrchr(dir, '/') = '\0';
	/* (a deny entry over it has hidden it already) */
	int r = under_any(&prof->fs.deny, dir) ? 0 : deny_one(p, in, dir, err);
	if (r < 0)
		return ab_err_prefix(err, "secret %s: placeholder.stable", prof->secrets[i].name);
	const ab_mount *cov = covering_bind(p, p->ph_key);
	p->ph_key_rw = cov && cov->kind == AB_MNT_BIND_RW;
	return 0;
}

/* A socket of the host seen through a grant (and not denied already):
 * masked, so no host process serves the sandbox through it. */
static int mask_socket(ab_plan *p, const ab_plan_input *in, const char *path, ab_err *err)
{
	const ab_mount *cov = covering_bind(p, path);
	if (!cov || cov->kind == AB_MNT_TMPFS || has_mount_at(p, path) ||
	    under_any(&in->profile->fs.deny, path))
		return 0;
	struct stat st;
	if (plan_lstat(in, path, &st) < 0 || !S_ISSOCK(st.st_mode))
		return 0; /* gone, or the name is something else now */
	/* the mask goes by path: a symbolic link between the grant and the
	 * socket would send it elsewhere (the socket's real path is in the
	 * list too, and masked where a grant shows it) */
	ab_err ignore = {0};
	if (deny_path_check(in, cov, path, &ignore) != 0)
		return 0;
	if (add_mount(p, AB_MNT_MASK, NULL, path, 0, "host socket") < 0 ||
	    ab_strv_push_unique(&p->hidden, path) < 0)
		return ab_fail(err, ENOMEM, "plan");
	return 0;
}

static int plan_host_sockets(ab_plan *p, const ab_plan_input *in, ab_err *err)
{
	const ab_strv *socks = in->host_sockets;
	for (size_t i = 0; socks && i < socks->n; i++) {
		const char *s = socks->v[i];
		int r = mask_socket(p, in, s, err);
		/* the same socket under the other spellings of the home */
		for (size_t h = 0; r == 0 && h <= p->other_homes.n; h++) {
			const char *from = h < p->other_homes.n ? p->other_homes.v[h] : p->home;
			if (!ab_path_is_under(s, from) || strcmp(s, from) == 0)
				continue;
			for (size_t t = 0; r == 0 && t <= p->other_homes.n; t++) {
				const char *to = t < p->other_homes.n ? p->other_homes.v[t] : p->home;
				if (to == from)
					continue;
				_cleanup_free_ char *alias = ab_path_join(to, s + strlen(from) + 1);
				r = alias ? mask_socket(p, in, alias, err) : ab_fail(err, ENOMEM, "plan");
			}
		}
		if (r < 0)
			return r;
	}
	return 0;
}

/* agentbox's control directories (control.h) are denied in every sandbox,
 * as if the profile listed them: a grant that shows one (of /tmp, of
 * /run/user/UID) has it masked, and an absent one inside a writable grant is
 * reserved.  Else the sandbox could connect to the socket `agentbox allow`
 * uses (its peer would be the user's own uid), or replace it with its own. */
static int plan_control_dirs(ab_plan *p, const ab_plan_input *in, ab_err *err)
{
	for (const char *const *d = in->control_dirs; d && *d; d++) {
		if (under_any(&in->profile->fs.deny, *d))
			continue; /* hidden already */
		if (deny_one(p, in, *d, err) < 0)
			return ab_err_prefix(err, "agentbox's control directory");
	}
	return 0;
}

static int plan_denies(ab_plan *p, const ab_plan_input *in, ab_err *err)
{
	const ab_profile *prof = in->profile;
	for (size_t i = 0; i < prof->fs.deny.n; i++) {
		int r = deny_one(p, in, prof->fs.deny.v[i], err);
		if (r < 0)
			return r;
	}
	int r = plan_phkey(p, in, err);
	if (r >= 0)
		r = plan_host_sockets(p, in, err);
	return r < 0 ? r : plan_control_dirs(p, in, err);
}

/* What a placeholder holds when an empty one would break the tool reading it:
 * git dies on an empty $GIT_DIR/commondir, and "." names the repository itself. */
static const struct {
	const char *rel, *content;
} placeholder_content[] = {{".git/commondir", "."}};

/* Reserve an absent protected path.  A directory, so nothing shows up as an
 * untracked file in git, except inside a .git directory (git never lists
 * its own files) for entries not ending in '/': there an empty file is what
 * git tolerates (an empty config.worktree is a valid config). */
static int add_placeholder(ab_plan *p, const char *cur, const char *root, const char *rel,
			   bool last, bool want_dir, bool anchored, ab_err *err)
{
	if (has_mount_at(p, cur))
		return 0;
	bool in_git = strncmp(rel, ".git/", 5) == 0 || strstr(rel, "/.git/");
	/* a missing file is reserved by an empty directory in a workspace (git
	 * never lists one) but by an empty file inside .git and for anchored
	 * entries (a harness reading its settings file finds an empty file) */
	bool dir = !last || want_dir || (!in_git && !anchored);
	const char *content = NULL;
	for (size_t i = 0; last && i < AB_ARRAY_SIZE(placeholder_content); i++)
		if (strcmp(cur + strlen(root) + 1, placeholder_content[i].rel) == 0)
			content = placeholder_content[i].content;
	return add_mount(p, AB_MNT_PLACEHOLDER, content, cur, dir ? AB_MNT_F_DIR : 0,
			 "fs.protect") < 0
		       ? ab_fail(err, ENOMEM, "plan")
		       : 0;
}

/* One protected entry under one writable root.  `anchored`: an entry naming
 * one path (a missing file is reserved by an empty file); `denied`: the
 * reservation of an absent denied path (plan_denies), which the deny check
 * below must not skip. */
static int protect_one(ab_plan *p, const ab_plan_input *in, const char *root, const char *rel,
		       bool anchored, bool denied, ab_err *err)
{
	/* "?path": protected when present, nothing reserved when absent */
	bool if_present = rel[0] == '?';
	if (if_present)
		rel++;
	size_t rl = strlen(rel);
	bool want_dir = rl > 0 && rel[rl - 1] == '/';
	_cleanup_free_ char *full = ab_path_join(root, rel);
	_cleanup_free_ char *path = full ? ab_path_normalize(full) : NULL;
	if (!path)
		return ab_fail(err, ENOMEM, "plan");
	if (!ab_path_is_under(path, root) || strcmp(path, root) == 0)
		return 0;
	if (!denied && under_any(&in->profile->fs.deny, path))
		return 0;
	/* Walk from the root down: the first missing component becomes the
	 * placeholder; an existing final path is re-bound read-only; every
	 * existing directory in between is pinned (bound onto itself) so that it
	 * cannot be renamed away and recreated without the protection; a regular
	 * file in between (a worktree's or submodule's ".git" file naming its
	 * git directory) is itself made read-only, so it cannot be replaced by
	 * a repository the sandbox controls. */
	_cleanup_free_ char *cur = strdup(path);
	if (!cur)
		return ab_fail(err, ENOMEM, "plan");
	size_t rootlen = strlen(root);
	for (char *s = cur + rootlen + 1;; s++) {
		bool last = (*s == '\0');
		if (*s != '/' && !last)
			continue;
		char saved = *s;
		*s = '\0';
		struct stat st;
		int r = plan_lstat(in, cur, &st);
		if (r == -ENOENT)
			return if_present ? 0
					  : add_placeholder(p, cur, root, rel, last, want_dir, anchored,
							    err);
		if (r < 0)
			return ab_fail(err, -r, "fs.protect: %s", cur);
		if (S_ISLNK(st.st_mode)) {
			ab_fail(err, 0, "fs.protect: %s is a symbolic link; refusing to run because "
					"it cannot be protected", cur);
			ab_err_hint(err, "replace the link with the real file or directory, or remove "
					 "\"%s\" from filesystem.protect", rel);
			return -EINVAL;
		}
		if (last || !S_ISDIR(st.st_mode)) {
			if (!last && !S_ISREG(st.st_mode))
				return 0;
			if (has_mount_at(p, cur))
				return 0;
			if (S_ISREG(st.st_mode) && st.st_nlink > 1) {
				/* another name for the same file would stay writable */
				ab_fail(err, 0, "fs.protect: %s has %lu hard links; the other names "
						"would stay writable, so it cannot be protected",
					cur, (unsigned long)st.st_nlink);
				ab_err_hint(err, "find them with `find %s -samefile %s` and remove the "
						 "extra links", root, cur);
				return -EINVAL;
			}
			unsigned flags = S_ISDIR(st.st_mode) ? AB_MNT_F_DIR : 0;
			return add_mount(p, AB_MNT_PROTECT, cur, cur, flags, "fs.protect") < 0
				       ? ab_fail(err, ENOMEM, "plan")
				       : 0;
		}
		if (!has_mount_at(p, cur) &&
		    add_mount(p, AB_MNT_PIN, NULL, cur, AB_MNT_F_DIR, "fs.protect (parent)") < 0)
			return ab_fail(err, ENOMEM, "plan");
		*s = saved;
	}
}

static int plan_protect_one(ab_plan *p, const ab_plan_input *in, const char *root,
			    const char *rel, ab_err *err)
{
	return protect_one(p, in, root, rel, false, false, err);
}

/* The profile files that define this sandbox are read-only inside it, or a
 * profile kept in the workspace could be rewritten to grant the next run
 * more (threat model 8). */
static int protect_under_writable(ab_plan *p, const ab_plan_input *in, const ab_strv *files,
				  ab_err *err);

static int plan_protect_profiles(ab_plan *p, const ab_plan_input *in, ab_err *err)
{
	/* the files it loaded, and the places a lookup would have preferred
	 * (a profile planted there would be loaded instead next time) */
	int r = protect_under_writable(p, in, &in->profile->files, err);
	return r < 0 ? r : protect_under_writable(p, in, &in->profile->shadows, err);
}

static int protect_under_writable(ab_plan *p, const ab_plan_input *in, const ab_strv *files,
				  ab_err *err)
{
	for (size_t f = 0; f < files->n; f++) {
		const ab_mount *root = NULL;
		for (size_t i = 0; i < p->nmounts; i++) {
			const ab_mount *m = &p->mounts[i];
			if (m->kind == AB_MNT_BIND_RW && (m->flags & AB_MNT_F_DIR) &&
			    ab_path_is_under(files->v[f], m->dst) && strcmp(files->v[f], m->dst) &&
			    (!root || strlen(m->dst) > strlen(root->dst)))
				root = m;
		}
		if (!root)
			continue;
		_cleanup_free_ char *r = strdup(root->dst);
		if (!r)
			return ab_fail(err, ENOMEM, "plan");
		int ret = plan_protect_one(p, in, r, files->v[f] + strlen(r) + 1, err);
		if (ret < 0)
			return ret;
	}
	return 0;
}

/* An anchored entry ("?" optional, then an absolute path, "/" at the end for
 * a directory): protected under the deepest writable root that holds it;
 * nothing to do when no writable grant holds it (it is read-only or absent
 * inside anyway). */
static int plan_protect_anchored(ab_plan *p, const ab_plan_input *in, const char *entry,
				 size_t nmounts, ab_err *err)
{
	bool opt = entry[0] == '?';
	const char *abs = entry + opt;
	const char *best = NULL;
	for (size_t i = 0; i < nmounts; i++) {
		const ab_mount *m = &p->mounts[i];
		if (m->kind != AB_MNT_BIND_RW || !(m->flags & AB_MNT_F_DIR))
			continue;
		if (ab_path_is_under(abs, m->dst) && strcmp(abs, m->dst) != 0 &&
		    (!best || strlen(m->dst) > strlen(best)))
			best = m->dst;
	}
	if (!best)
		return 0;
	_cleanup_free_ char *root = strdup(best);
	_cleanup_free_ char *rel = root ? ab_asprintf("%s%s", opt ? "?" : "",
						      abs + strlen(root) + 1)
					: NULL;
	if (!rel)
		return ab_fail(err, ENOMEM, "plan");
	return protect_one(p, in, root, rel, true, false, err);
}

static int plan_protect(ab_plan *p, const ab_plan_input *in, ab_err *err)
{
	const ab_profile *prof = in->profile;
	size_t n = p->nmounts;
	for (size_t i = 0; i < n; i++) {
		if (p->mounts[i].kind != AB_MNT_BIND_RW || !(p->mounts[i].flags & AB_MNT_F_DIR))
			continue;
		_cleanup_free_ char *root = strdup(p->mounts[i].dst);
		if (!root)
			return ab_fail(err, ENOMEM, "plan");
		for (size_t j = 0; j < prof->fs.protect.n; j++) {
			const char *e = prof->fs.protect.v[j];
			if (e[0] == '/' || (e[0] == '?' && e[1] == '/'))
				continue; /* anchored: below */
			int r = plan_protect_one(p, in, root, e, err);
			if (r < 0)
				return r;
		}
	}
	for (size_t j = 0; j < prof->fs.protect.n; j++) {
		const char *e = prof->fs.protect.v[j];
		int r = 0;
		if (e[0] == '/' || (e[0] == '?' && e[1] == '/'))
			r = plan_protect_anchored(p, in, e, n, err);
		if (r < 0)
			return r;
	}
	return 0;
}

/* /etc/passwd and /etc/group with the inside user, so whoami, git, ssh and
 * friends find a name and a home.  Host entries are not copied. */
static int plan_identity_files(ab_plan *p, ab_err *err)
{
	if (strpbrk(p->home, ":\n") || strpbrk(p->user_name, ":\n"))
		return ab_fail(err, EINVAL, "HOME (%s) or the user name contains ':' or a newline",
			       p->home);
	char *pw = ab_asprintf("root:x:0:0:root:/root:/usr/sbin/nologin\n"
			       "%s:x:%u:%u:agentbox sandbox user:%s:/bin/sh\n"
			       "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
			       p->user_name, (unsigned)p->inside_uid, (unsigned)p->inside_gid, p->home);
	char *gr = ab_asprintf("root:x:0:\n%s:x:%u:\nnogroup:x:65534:\n", p->user_name,
			       (unsigned)p->inside_gid);
	int r = 0;
	if (!pw || !gr)
		r = -ENOMEM;
	if (!r)
		r = add_mount(p, AB_MNT_CONTENT, pw, "/etc/passwd", 0, "identity");
	if (!r)
		r = add_mount(p, AB_MNT_CONTENT, gr, "/etc/group", 0, "identity");
	free(pw);
	free(gr);
	return r < 0 ? ab_fail(err, ENOMEM, "plan") : 0;
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
	int r = plan_lstat(in, p->workspace, &st);
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
		ab_fail(err, 0, "run as root on a root-owned workspace needs idmapped mounts, "
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
		{l->nofile, RLIMIT_NOFILE}, {l->nproc, RLIMIT_NPROC}, {l->fsize, RLIMIT_FSIZE},
		{l->core == AB_LIMIT_UNSET ? 0 : l->core, RLIMIT_CORE}, {l->cpu, RLIMIT_CPU},
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
	ab_fail(err, 0, "the profile sets limits.memory/limits.pids, which need a delegated "
			"cgroup v2, and this machine has %s",
		in->host->cgroup_version == 2 ? "no writable cgroup v2 subtree" : "cgroup v1");
	ab_err_hint(err, "run under systemd-run --user --scope -p Delegate=yes, or add "
			 "\"cgroup-limits\" to allow_downgrade to run without them");
	return -EINVAL;
}

/* ---------------------------------------------------------------- landlock */

static int plan_landlock(ab_plan *p, const ab_plan_input *in, ab_err *err)
{
	const ab_host *h = in->host;
	const ab_profile *prof = in->profile;
	ab_strv missing = {0};
	int r = ab_landlock_downgrades(h->landlock_abi, &missing);
	if (r < 0)
		return ab_fail(err, -r, "plan");
	for (size_t i = 0; i < missing.n; i++) {
		const char *name = missing.v[i];
		if (strcmp(name, "landlock-refer") == 0)
			continue; /* ABI 1 denies cross-directory renames: stricter, not weaker */
		if (strcmp(name, "landlock-net") == 0 && prof->loopback.any)
			continue; /* nothing to restrict */
		if (ab_strv_contains(&prof->allow_downgrade, name)) {
			char *msg = ab_asprintf("%s: NOT ENFORCED on this kernel (Landlock ABI %d)",
						name, h->landlock_abi);
			if (!msg || ab_strv_push_take(&p->downgrades, msg) < 0) {
				ab_strv_free(&missing);
				return ab_fail(err, ENOMEM, "plan");
			}
			continue;
		}
		ab_fail(err, 0, "this kernel cannot enforce \"%s\" (Landlock ABI %d%s), which the "
				"profile requires",
			name, h->landlock_abi, h->landlock_abi == 0 ? ": Landlock unavailable" : "");
		ab_err_hint(err, "use a newer kernel (Landlock ABI 6 needs Linux >= 6.12)%s, or add "
				 "\"%s\" to allow_downgrade in the profile to accept running without it",
			    h->landlock_abi == 0 ? " booted with lsm=...,landlock" : "", name);
		ab_strv_free(&missing);
		return -EINVAL;
	}
	ab_strv_free(&missing);

	ab_ll_plan *ll = &p->landlock;
	ll->abi = h->landlock_abi;
	ll->enabled = h->landlock_abi > 0;
	if (!ll->enabled)
		return 0;
	ll->handled_fs = ab_landlock_fs_rights(ll->abi);
	ll->scoped = 0;
	if (ll->abi >= 6)
		ll->scoped = ab_landlock_scopes(ll->abi);
	ll->tcp_any = prof->loopback.any;
	if (ll->abi >= 4 && !prof->loopback.any) {
		/* connect only: servers inside may listen, clients reach only the
		 * listed ports (the network namespace already has nothing else) */
		ll->handled_net = LANDLOCK_ACCESS_NET_CONNECT_TCP;
		size_t want = prof->loopback.nports + p->egress.nports + 2;
		ll->tcp_ports = calloc(want, sizeof(*ll->tcp_ports));
		if (!ll->tcp_ports)
			return ab_fail(err, ENOMEM, "plan");
		for (size_t i = 0; i < prof->loopback.nports; i++) {
			long port = prof->loopback.ports[i];
			if (port < 1 || port > 65535) /* never truncate into another port */
				return ab_fail(err, 0, "loopback_ports: %ld is not a TCP port", port);
			ll->tcp_ports[ll->ntcp_ports++] = (uint16_t)port;
		}
		/* the way out: the explicit proxy, DNS over TCP, transparent ports */
		ll->tcp_ports[ll->ntcp_ports++] = p->egress.proxy_port;
		if (p->egress.transparent)
			ll->tcp_ports[ll->ntcp_ports++] = 53;
		for (size_t i = 0; i < p->egress.nports; i++)
			ll->tcp_ports[ll->ntcp_ports++] = p->egress.ports[i];
	}
	r = 0;
	for (size_t i = 0; !r && i < p->nmounts; i++) {
		const ab_mount *m = &p->mounts[i];
		if (m->flags & AB_MNT_F_SYMLINK)
			continue;
		switch (m->kind) {
		case AB_MNT_BIND_RO:
			r = ab_ll_plan_add(ll, m->dst, AB_LL_READ);
			break;
		case AB_MNT_BIND_RW:
		case AB_MNT_TMPFS:
			r = ab_ll_plan_add(ll, m->dst, AB_LL_WRITE);
			break;
		case AB_MNT_PROC:
			r = ab_ll_plan_add(ll, m->dst, AB_LL_PROC);
			break;
		case AB_MNT_DEV:
			r = ab_ll_plan_add(ll, m->dst, AB_LL_DEV);
			break;
		case AB_MNT_CONTENT:
			r = ab_ll_plan_add(ll, m->dst, AB_LL_READ);
			break;
		default:
			break;
		}
	}
	/* "/" itself is a read-only tmpfs of mount points: listing it is fine,
	 * reading files through it is only what the per-mount rules grant. */
	if (!r)
		r = ab_ll_plan_add(ll, "/", AB_LL_READ);
	for (size_t i = 0; !r && i < ll->nrules; i++)
		if (strcmp(ll->rules[i].path, "/") == 0)
			ll->rules[i].access = LANDLOCK_ACCESS_FS_READ_DIR;
	return r < 0 ? ab_fail(err, -r, "plan: landlock") : 0;
}

/* ---------------------------------------------------------------- build */

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
		ab_fail(err, 0, "refusing to use %s as the workspace: it contains your home "
				"directory (%s), which the sandbox must not see",
			p->workspace, p->home);
		ab_err_hint(err, "run agentbox from a project directory, or pass -w DIR");
		return -EINVAL;
	}
	/* HOME may have been pointed elsewhere, or reach the home through a
	 * symlink (/home -> /var/home): every form of it is just as private */
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
		ab_fail(err, 0, "refusing to use %s as the workspace: it contains the home "
				"directory of your account (%s)",
			p->workspace, h);
		ab_err_hint(err, "run agentbox from a project directory, or pass -w DIR");
		return -EINVAL;
	}
	/* System trees are never a workspace: as root (idmapped) the sandbox
	 * could otherwise write /etc or /usr, and unprivileged it is a mistake. */
	static const char *const system_trees[] = {"/etc", "/usr", "/bin", "/sbin", "/lib",
						   "/lib32", "/lib64", "/libx32", "/boot",
						   "/dev", "/proc", "/sys", "/run", "/snap"};
	static const char *const system_dirs[] = {"/var", "/var/lib", "/var/log", "/var/cache",
						  "/var/spool", "/var/mail", "/home", "/root",
						  "/opt", "/srv", "/mnt", "/media", "/tmp", "/var/tmp"};
	for (size_t i = 0; i < AB_ARRAY_SIZE(system_trees); i++) {
		if (!ab_path_is_under(p->workspace, system_trees[i]))
			continue;
		ab_fail(err, 0, "refusing to use %s as the workspace: it is inside the system "
				"tree %s", p->workspace, system_trees[i]);
		ab_err_hint(err, "run agentbox from a project directory, or pass -w DIR");
		return -EINVAL;
	}
	for (size_t i = 0; i < AB_ARRAY_SIZE(system_dirs); i++) {
		if (strcmp(p->workspace, system_dirs[i]) != 0)
			continue;
		ab_fail(err, 0, "refusing to use %s as the workspace: it is a system directory "
				"holding other people's or programs' files", p->workspace);
		ab_err_hint(err, "run agentbox from a project directory, or pass -w DIR");
		return -EINVAL;
	}
	for (const char *const *c = in->control_dirs; c && *c; c++) {
		if (!ab_path_is_under(p->workspace, *c))
			continue;
		ab_fail(err, 0, "refusing to use %s as the workspace: it is inside %s, where "
				"agentbox keeps its control sockets", p->workspace, *c);
		ab_err_hint(err, "run agentbox from a project directory, or pass -w DIR");
		return -EINVAL;
	}
	const char *d = under_any(&in->profile->fs.deny, p->workspace);
	if (d) {
		ab_fail(err, 0, "the workspace %s is inside a denied path (%s)", p->workspace, d);
		return -EINVAL;
	}
	p->hostname = strdup(in->profile->hostname ? in->profile->hostname : "agentbox");
	if (!p->hostname)
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
		ab_err_hint(err, "give one after '--' (agentbox run -- COMMAND), or set \"command\" "
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
	return 0;
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
			return ab_fail(err, 0, "AGENTBOX_TEST_ABLATE: unknown layer '%s' (seccomp, "
					       "landlock, netns, env, home, pty)", t);
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
	for (size_t i = 0; i < AB_ARRAY_SIZE(ablations); i++) {
		if (!(in->ablate & ablations[i].bit))
			continue;
		char *w = ab_asprintf("TEST ABLATION %s: %s (this binary is for agentbox's own "
				      "tests only)", ablations[i].name, ablations[i].what);
		if (!w || ab_strv_push_take(&p->downgrades, w) < 0)
			return ab_fail(err, ENOMEM, "plan");
	}
	return 0;
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
				    "reachable (no seccomp user notification here)") < 0
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

/* The record (issue 7, src/observe/supervise.c): denied syscalls always, commands
 * when there is an audit log to write them to.  Both ride on seccomp user
 * notification; without it the filter still denies, only the record is lost,
 * and the run says so. */
static int plan_record(ab_plan *p, const ab_plan_input *in, ab_err *err)
{
	if (p->seccomp.disabled)
		return 0;
	if (in->host->seccomp_user_notif != AB_YES) {
		int r = plan_connect_lost(p, in, err);
		if (r < 0)
			return r;
		const char *w = in->host->seccomp_listener_busy
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
	int r;
	if ((r = plan_paths(p, in, err)) < 0 || (r = plan_identity(p, in, err)) < 0 ||
	    (r = plan_command(p, in, err)) < 0 || (r = plan_cwd(p, in, err)) < 0)
		return r;
	if (in->host->seccomp_ok == AB_NO) {
		ab_fail(err, 0, "this kernel has no seccomp filter support; agentbox cannot run "
				"without it");
		ab_err_hint(err, "use a kernel built with CONFIG_SECCOMP_FILTER=y");
		return -EINVAL;
	}
	if ((r = plan_base_mounts(p, in, err)) < 0 || (r = plan_grants(p, in, err)) < 0 ||
	    (r = plan_identity_files(p, err)) < 0 || (r = plan_denies(p, in, err)) < 0 ||
	    (r = plan_protect(p, in, err)) < 0 || (r = plan_protect_profiles(p, in, err)) < 0)
		return r;
	if ((r = ab_plan_egress(p, in, err)) < 0)
		return r;
	sort_mounts(p);
	if ((r = plan_env(p, in, err)) < 0 || (r = ab_plan_egress_env(p, err)) < 0 ||
	    (r = plan_limits(p, in, err)) < 0 ||
	    (r = plan_landlock(p, in, err)) < 0)
		return r;
	if (ab_strv_copy(&p->seccomp.extra_deny, &in->profile->syscalls.deny) < 0 ||
	    ab_strv_copy(&p->seccomp.allow, &in->profile->syscalls.allow) < 0)
		return ab_fail(err, ENOMEM, "plan");
	if ((r = ab_seccomp_validate(&p->seccomp, err)) < 0 || (r = plan_ablate(p, in, err)) < 0 ||
	    (r = plan_record(p, in, err)) < 0)
		return r;
	if (!p->root_mode && in->supplementary_groups > 0) {
		char *w = ab_asprintf("supplementary groups of uid %u are kept (an unprivileged "
				      "user cannot drop them); files are shown as nogroup",
				      (unsigned)p->outer_uid);
		if (!w || ab_strv_push_take(&p->warnings, w) < 0)
			return ab_fail(err, ENOMEM, "plan");
	}
	*out = TAKE_PTR(p);
	return 0;
}

void ab_plan_free(ab_plan *p)
{
	if (!p)
		return;
	for (size_t i = 0; i < p->nmounts; i++) {
		free(p->mounts[i].src);
		free(p->mounts[i].dst);
		free(p->mounts[i].why);
	}
	free(p->mounts);
	free(p->workspace);
	free(p->home);
	ab_strv_free(&p->other_homes);
	free(p->cwd);
	free(p->hostname);
	free(p->user_name);
	free(p->rlimits);
	ab_strv_free(&p->hidden);
	ab_strv_free(&p->absent);
	ab_ll_plan_free(&p->landlock);
	ab_egress_plan_free(&p->egress);
	ab_strv_free(&p->seccomp.extra_deny);
	ab_strv_free(&p->seccomp.allow);
	ab_strv_free(&p->argv);
	ab_strv_free(&p->envp);
	ab_strv_free(&p->downgrades);
	ab_strv_free(&p->warnings);
	free(p->ph_key);
	free(p);
}
