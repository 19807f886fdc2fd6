/* SPDX-License-Identifier: MIT */
/*
 * The new root, planned (parent, pure): the base tree, the grants, the
 * identity files, the denied paths, the protected paths and the profile files
 * kept read-only, as the ordered mount list the child applies.  The other
 * parts of the planner add to the list through pl_add_mount (plan_int.h).
 */
#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "agentbox/phkey.h"
#include "plan_int.h"

/* ---------------------------------------------------------------- mounts */

static int depth_of(const char *p)
{
	int d = 0;
	for (; *p; p++)
		if (*p == '/' && p[1])
			d++;
	return d;
}

int pl_add_mount(ab_plan *p, enum ab_mnt_kind kind, const char *src, const char *dst,
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
	case AB_MNT_DEV: return 0;
	case AB_MNT_SYMLINK:
	case AB_MNT_BIND_RO:
	case AB_MNT_BIND_RW: return 1;
	case AB_MNT_MASK:
	case AB_MNT_PROTECT:
	case AB_MNT_PLACEHOLDER:
	case AB_MNT_RO_REMOUNT:
	case AB_MNT_PIN: return 2;
	case AB_MNT_CONTENT: return 3;
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

void pl_sort_mounts(ab_plan *p)
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

const char *pl_under_any(const ab_strv *list, const char *path)
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
		if (m->kind != AB_MNT_BIND_RO && m->kind != AB_MNT_BIND_RW &&
		    m->kind != AB_MNT_TMPFS)
			continue;
		if (!ab_path_is_under(path, m->dst))
			continue;
		if (!best || strlen(m->dst) >= strlen(best->dst))
			best = m;
	}
	return best;
}

bool ab_plan_shows(const ab_plan *p, const char *path)
{
	const ab_mount *cov = covering_bind(p, path);
	if (!cov || cov->kind == AB_MNT_TMPFS)
		return false;
	for (size_t i = 0; i < p->nmounts; i++) {
		const ab_mount *m = &p->mounts[i];
		if ((m->kind == AB_MNT_MASK || m->kind == AB_MNT_CONTENT) &&
		    ab_path_is_under(path, m->dst) && strlen(m->dst) >= strlen(cov->dst))
			return false;
	}
	return true;
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
	const char *d = pl_under_any(&prof->fs.deny, path);
	if (d) {
		/* deny wins: a grant inside a denied tree is dropped */
		char *note = ab_asprintf("%s (%s, inside denied %s)", path, why, d);
		return note ? ab_strv_push_take(&p->hidden, note) : -ENOMEM;
	}
	struct stat st;
	int r = pl_lstat(in, path, &st);
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
	return pl_add_mount(p, rw ? AB_MNT_BIND_RW : AB_MNT_BIND_RO, path, path, flags, why);
}

/* A fresh procfs of the sandbox's pid namespace; where the kernel refuses
 * one (probed only when allowed) and the profile allows "proc-outer", the
 * outer /proc bound read-only, said as a downgrade. */
static int plan_proc(ab_plan *p, const ab_plan_input *in)
{
	unsigned flags = AB_MNT_F_DIR;
	if (in->host->fresh_proc == AB_NO &&
	    ab_strv_contains(&in->profile->allow_downgrade, "proc-outer")) {
		flags |= AB_MNT_F_OUTER;
		if (ab_strv_push(
			    &p->downgrades,
			    "proc-outer: the sandbox's /proc is the outer one, bound read-only "
			    "(a fresh one is refused here): processes outside the sandbox "
			    "are listed") < 0)
			return -1;
	}
	return pl_add_mount(p, AB_MNT_PROC, NULL, "/proc", flags, "proc");
}

static int plan_base_mounts(ab_plan *p, const ab_plan_input *in, ab_err *err)
{
	static const char *const tmpfs_dirs[] = {"/tmp", "/run", "/var/tmp"};
	int r = 0;
	r |= plan_proc(p, in);
	r |= pl_add_mount(p, AB_MNT_DEV, NULL, "/dev", AB_MNT_F_DIR, "dev");
	r |= pl_add_mount(p, AB_MNT_TMPFS, NULL, "/dev/shm", AB_MNT_F_DIR, "dev");
	for (size_t i = 0; i < AB_ARRAY_SIZE(tmpfs_dirs); i++)
		r |= pl_add_mount(p, AB_MNT_TMPFS, NULL, tmpfs_dirs[i], AB_MNT_F_DIR,
				  "private tmp");
	if (in->ablate & AB_ABLATE_HOME)
		r |= pl_add_mount(p, AB_MNT_BIND_RW, p->home, p->home,
				  AB_MNT_F_DIR | (p->root_mode ? AB_MNT_F_IDMAP : 0),
				  "TEST ABLATION home");
	else
		r |= pl_add_mount(p, AB_MNT_TMPFS, NULL, p->home, AB_MNT_F_DIR, "private home");
	/* the kernel's knobs stay read-only; the rest of /proc is per-pid-ns */
	static const char *const proc_ro[] = {"/proc/sys", "/proc/sysrq-trigger", "/proc/irq"};
	for (size_t i = 0; i < AB_ARRAY_SIZE(proc_ro); i++)
		r |= pl_add_mount(p, AB_MNT_RO_REMOUNT, NULL, proc_ro[i], AB_MNT_F_OPTIONAL,
				  "proc");
	/* host-wide information the sandbox has no business reading */
	static const char *const proc_mask[] = {"/proc/kcore", "/proc/timer_list",
						"/proc/sched_debug", "/proc/keys",
						"/proc/key-users"};
	for (size_t i = 0; i < AB_ARRAY_SIZE(proc_mask); i++)
		r |= pl_add_mount(p, AB_MNT_MASK, NULL, proc_mask[i], AB_MNT_F_OPTIONAL, "proc");
	if (r)
		return ab_fail(err, ENOMEM, "plan");
	for (size_t i = 0; i < in->profile->fs.tmpfs.n; i++) {
		if (pl_add_mount(p, AB_MNT_TMPFS, NULL, in->profile->fs.tmpfs.v[i], AB_MNT_F_DIR,
				 "fs.tmpfs"))
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
// clang-format off
static const char *const startup_paths[] = {
	"/.bashrc", "/.bash_profile", "/.bash_login", "/.bash_logout", "/.profile", "/.zshrc",
	"/.zshenv", "/.zprofile", "/.zlogin", "/.zlogout", "/.kshrc", "/.mkshrc", "/.cshrc",
	"/.tcshrc", "/.xprofile", "/.xsession", "/.xsessionrc", "/.xinitrc", "/.pam_environment",
	"/.gitconfig", "/.config/git", "/.vimrc", "/.vim", "/.config/nvim", "/.emacs",
	"/.emacs.d", "/.config/emacs", "/.ssh", "/.gnupg", "/.local/bin", "/bin",
	"/.config/autostart", "/.config/systemd", "/.config/fish", "/.config/environment.d",
	"/.config/user-dirs.dirs", "/.local/share/systemd", "/.config/bash", "/.config/zsh",
};
// clang-format on

static int refuse_write(const char *path, const char *what, const char *d, ab_err *err)
{
	ab_fail(err, 0,
		"refusing to make %s writable: it %s %s, where shell or editor startup "
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
		ab_fail(err, 0,
			"refusing to make %s writable: it is (inside) a git directory, whose "
			"hooks and config would not be protected",
			path);
		ab_err_hint(err, "grant the repository's work tree instead");
		return -EINVAL;
	}
	int r = check_write_grant_in(p->home, path, err);
	for (size_t i = 0; r == 0 && i < p->other_homes.n; i++)
		r = check_write_grant_in(p->other_homes.v[i], path, err);
	return r;
}

int ab_plan_check_write_grant(const ab_plan *p, const char *path, ab_err *err)
{
	return check_write_grant(p, path, err);
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
			return ab_err_prefix(err,
					     ab_strv_contains(&prof->cli_write, prof->fs.write.v[i])
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
static int deny_path_check(const ab_plan_input *in, const ab_mount *cov, const char *d, ab_err *err)
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
		int r = pl_lstat(in, cur, &st);
		if (r == -ENOENT || r == -ENOTDIR)
			return 1;
		if (r < 0)
			return ab_fail(err, -r, "fs.deny: %s", cur);
		if (S_ISLNK(st.st_mode)) {
			ab_fail(err, 0,
				"fs.deny: %s is below the symbolic link %s inside a granted "
				"tree; cannot hide it",
				d, cur);
			ab_err_hint(err,
				    "deny the path the link resolves to instead, or remove the "
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
	r = pl_lstat(in, d, &st);
	if (r == -ENOENT && reserve_absent_deny(p, in, cov, d, err) < 0)
		return ab_err_ret(err);
	if (r == -ENOENT || r == -ENOTDIR)
		return 0;
	if (r < 0)
		return ab_fail(err, -r, "fs.deny: %s", d);
	if (S_ISLNK(st.st_mode)) {
		/* A mount cannot cover a symlink; the link is harmless only if
		 * its target is not visible.  Refuse rather than guess. */
		ab_fail(err, 0,
			"fs.deny: %s is a symbolic link inside a granted tree; "
			"cannot hide it",
			d);
		ab_err_hint(err, "deny the link's target instead, or remove the link");
		return -EINVAL;
	}
	unsigned flags = S_ISDIR(st.st_mode) ? AB_MNT_F_DIR : 0;
	if (pl_add_mount(p, AB_MNT_MASK, NULL, d, flags, "fs.deny") < 0 ||
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
	int r = pl_under_any(&prof->fs.deny, dir) ? 0 : deny_one(p, in, dir, err);
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
	    pl_under_any(&in->profile->fs.deny, path))
		return 0;
	struct stat st;
	if (pl_lstat(in, path, &st) < 0 || !S_ISSOCK(st.st_mode))
		return 0; /* gone, or the name is something else now */
	/* the mask goes by path: a symbolic link between the grant and the
	 * socket would send it elsewhere (the socket's real path is in the
	 * list too, and masked where a grant shows it) */
	ab_err ignore = {0};
	if (deny_path_check(in, cov, path, &ignore) != 0)
		return 0;
	if (pl_add_mount(p, AB_MNT_MASK, NULL, path, 0, "host socket") < 0 ||
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
				const char *to =
					t < p->other_homes.n ? p->other_homes.v[t] : p->home;
				if (to == from)
					continue;
				_cleanup_free_ char *alias = ab_path_join(to, s + strlen(from) + 1);
				r = alias ? mask_socket(p, in, alias, err)
					  : ab_fail(err, ENOMEM, "plan");
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
		if (pl_under_any(&in->profile->fs.deny, *d))
			continue; /* hidden already */
		if (deny_one(p, in, *d, err) < 0)
			return ab_err_prefix(err, "agentbox's control directory");
	}
	/* the pending change sets of review mode (plan_review.c): the next
	 * apply lands what is there */
	if (in->review_root && !pl_under_any(&in->profile->fs.deny, in->review_root) &&
	    deny_one(p, in, in->review_root, err) < 0)
		return ab_err_prefix(err, "agentbox's change sets");
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

/* An anchored settings file a harness parses as JSON: an empty file is a
 * parse error to it (gemini-cli exits, codex warns on every run), "{}" is an
 * empty document every one of them accepts.  Reserved denied paths (token
 * files) stay empty: the harness treats an empty one as no login. */
#define AB_JSON_PLACEHOLDER "{}"

static bool is_json_name(const char *path)
{
	const char *slash = strrchr(path, '/');
	const char *base = slash ? slash + 1 : path;
	size_t n = strlen(base);
	return (n > 5 && strcmp(base + n - 5, ".json") == 0) ||
	       (n > 6 && strcmp(base + n - 6, ".jsonc") == 0);
}

bool ab_placeholder_content_known(const char *buf, size_t n)
{
	if (n == 0)
		return true;
	if (n == strlen(AB_JSON_PLACEHOLDER) && memcmp(buf, AB_JSON_PLACEHOLDER, n) == 0)
		return true;
	for (size_t i = 0; i < AB_ARRAY_SIZE(placeholder_content); i++)
		if (n == strlen(placeholder_content[i].content) &&
		    memcmp(buf, placeholder_content[i].content, n) == 0)
			return true;
	return false;
}

/* Reserve an absent protected path.  A directory, so nothing shows up as an
 * untracked file in git, except inside a .git directory (git never lists
 * its own files) for entries not ending in '/': there an empty file is what
 * git tolerates (an empty config.worktree is a valid config).  `denied`: the
 * reservation of an absent denied path (always empty). */
static int add_placeholder(ab_plan *p, const char *cur, const char *root, const char *rel,
			   bool last, bool want_dir, bool anchored, bool denied, ab_err *err)
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
	if (!dir && anchored && !denied && !in_git && is_json_name(cur))
		content = AB_JSON_PLACEHOLDER;
	return pl_add_mount(p, AB_MNT_PLACEHOLDER, content, cur, dir ? AB_MNT_F_DIR : 0,
			    "fs.protect") < 0
		       ? ab_fail(err, ENOMEM, "plan")
		       : 0;
}

/* The walk of protect_one reached an existing path that is the last one or
 * no directory: the last one, or a regular file in between, is re-bound
 * read-only; anything else in between ends the walk. */
static int protect_existing(ab_plan *p, const char *root, const char *cur, const struct stat *st,
			    bool last, ab_err *err)
{
	if (!last && !S_ISREG(st->st_mode))
		return 0;
	if (has_mount_at(p, cur))
		return 0;
	if (S_ISREG(st->st_mode) && st->st_nlink > 1) {
		/* another name for the same file would stay writable */
		ab_fail(err, 0,
			"fs.protect: %s has %lu hard links; the other names "
			"would stay writable, so it cannot be protected",
			cur, (unsigned long)st->st_nlink);
		ab_err_hint(err,
			    "find them with `find %s -samefile %s` and remove the "
			    "extra links",
			    root, cur);
		return -EINVAL;
	}
	unsigned flags = S_ISDIR(st->st_mode) ? AB_MNT_F_DIR : 0;
	return pl_add_mount(p, AB_MNT_PROTECT, cur, cur, flags, "fs.protect") < 0
		       ? ab_fail(err, ENOMEM, "plan")
		       : 0;
}

/* A "?" entry absent at the start: its host path (ROOT is a writable mount's
 * path inside), named after the run if it exists then. */
static int note_unguarded(ab_plan *p, const char *root, const char *path, ab_err *err)
{
	for (size_t i = 0; i < p->nmounts; i++) {
		const ab_mount *m = &p->mounts[i];
		if (m->kind != AB_MNT_BIND_RW || !m->src || strcmp(m->dst, root) != 0)
			continue;
		_cleanup_free_ char *host = ab_asprintf("%s%s", m->src, path + strlen(root));
		if (!host || (!ab_strv_contains(&p->unguarded, host) &&
			      ab_strv_push(&p->unguarded, host) < 0))
			return ab_fail(err, ENOMEM, "plan");
		return 0;
	}
	return 0;
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
	if (!denied && pl_under_any(&in->profile->fs.deny, path))
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
		int r = pl_lstat(in, cur, &st);
		if (r == -ENOENT && if_present)
			return note_unguarded(p, root, path, err);
		if (r == -ENOENT)
			return add_placeholder(p, cur, root, rel, last, want_dir, anchored, denied,
					       err);
		if (r < 0)
			return ab_fail(err, -r, "fs.protect: %s", cur);
		if (S_ISLNK(st.st_mode)) {
			ab_fail(err, 0,
				"fs.protect: %s is a symbolic link; refusing to run because "
				"it cannot be protected",
				cur);
			ab_err_hint(err,
				    "replace the link with the real file or directory, or remove "
				    "\"%s\" from filesystem.protect",
				    rel);
			return -EINVAL;
		}
		if (last || !S_ISDIR(st.st_mode))
			return protect_existing(p, root, cur, &st, last, err);
		if (!has_mount_at(p, cur) &&
		    pl_add_mount(p, AB_MNT_PIN, NULL, cur, AB_MNT_F_DIR, "fs.protect (parent)") < 0)
			return ab_fail(err, ENOMEM, "plan");
		*s = saved;
	}
}

static int plan_protect_one(ab_plan *p, const ab_plan_input *in, const char *root, const char *rel,
			    ab_err *err)
{
	return protect_one(p, in, root, rel, false, false, err);
}

/* The profile files that define this sandbox are read-only inside it, or a
 * profile kept in the workspace could be rewritten to grant the next run
 * more (docs/threat-model.md). */
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
	if (in->ablate & AB_ABLATE_HSTATE)
		return 0; /* test-only: the harness state stays writable */
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
	_cleanup_free_ char *rel =
		root ? ab_asprintf("%s%s", opt ? "?" : "", abs + strlen(root) + 1) : NULL;
	if (!rel)
		return ab_fail(err, ENOMEM, "plan");
	return protect_one(p, in, root, rel, true, false, err);
}

int pl_protect_path(ab_plan *p, const ab_plan_input *in, const char *abs, bool dir, ab_err *err)
{
	const char *best = NULL;
	for (size_t i = 0; i < p->nmounts; i++) {
		const ab_mount *m = &p->mounts[i];
		if (m->kind == AB_MNT_BIND_RW && (m->flags & AB_MNT_F_DIR) &&
		    ab_path_is_under(abs, m->dst) && strcmp(abs, m->dst) != 0 &&
		    (!best || strlen(m->dst) > strlen(best)))
			best = m->dst;
	}
	if (!best)
		return 0;
	_cleanup_free_ char *root = strdup(best);
	_cleanup_free_ char *rel =
		root ? ab_asprintf("%s%s", abs + strlen(root) + 1, dir ? "/" : "") : NULL;
	if (!rel)
		return ab_fail(err, ENOMEM, "plan");
	int r = protect_one(p, in, root, rel, false, false, err);
	return r < 0 ? r : 1;
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
			       p->user_name, (unsigned)p->inside_uid, (unsigned)p->inside_gid,
			       p->home);
	char *gr = ab_asprintf("root:x:0:\n%s:x:%u:\nnogroup:x:65534:\n", p->user_name,
			       (unsigned)p->inside_gid);
	int r = 0;
	if (!pw || !gr)
		r = -ENOMEM;
	if (!r)
		r = pl_add_mount(p, AB_MNT_CONTENT, pw, "/etc/passwd", 0, "identity");
	if (!r)
		r = pl_add_mount(p, AB_MNT_CONTENT, gr, "/etc/group", 0, "identity");
	free(pw);
	free(gr);
	return r < 0 ? ab_fail(err, ENOMEM, "plan") : 0;
}

/* The host path of a path inside a writable tree (NULL if none holds it). */
static char *host_of(const ab_plan *p, const char *inside)
{
	const ab_mount *best = NULL;
	for (size_t i = 0; i < p->nmounts; i++) {
		const ab_mount *m = &p->mounts[i];
		if (m->kind == AB_MNT_BIND_RW && m->src && ab_path_is_under(inside, m->dst) &&
		    (!best || strlen(m->dst) > strlen(best->dst)))
			best = m;
	}
	return best ? ab_asprintf("%s%s", best->src, inside + strlen(best->dst)) : NULL;
}

/* A path both a "?" entry and an anchored entry name is reserved by the
 * anchored one's placeholder: it is agentbox's own, not the run's, and is
 * not moved aside after the run. */
static void drop_reserved_unguarded(ab_plan *p)
{
	for (size_t i = 0; i < p->nmounts; i++) {
		if (p->mounts[i].kind != AB_MNT_PLACEHOLDER)
			continue;
		_cleanup_free_ char *host = host_of(p, p->mounts[i].dst);
		if (!host)
			continue;
		for (size_t j = 0; j < p->unguarded.n; j++) {
			if (strcmp(p->unguarded.v[j], host) != 0)
				continue;
			free(p->unguarded.v[j]);
			memmove(&p->unguarded.v[j], &p->unguarded.v[j + 1],
				(p->unguarded.n - j - 1) * sizeof(char *));
			p->unguarded.n--;
			p->unguarded.v[p->unguarded.n] = NULL;
			break;
		}
	}
}

int pl_plan_mounts(ab_plan *p, const ab_plan_input *in, ab_err *err)
{
	int r;
	if ((r = plan_base_mounts(p, in, err)) < 0 || (r = plan_grants(p, in, err)) < 0 ||
	    (r = plan_identity_files(p, err)) < 0 || (r = plan_denies(p, in, err)) < 0 ||
	    (r = plan_protect(p, in, err)) < 0 || (r = plan_protect_profiles(p, in, err)) < 0)
		return r;
	if (!(in->ablate & AB_ABLATE_GITCFG) && (r = pl_plan_gitcfg(p, in, err)) < 0)
		return r;
	drop_reserved_unguarded(p);
	return 0;
}
