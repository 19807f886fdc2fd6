/* SPDX-License-Identifier: MIT */
/*
 * Paths named by git's configuration (parent, pure but for the file reader
 * in ab_plan_input): for each writable directory grant in a git work tree
 * (the grant itself, or the nearest parent with a ".git", as git finds
 * it), the host's effective configuration is read the way git reads it,
 * without running anything: the system file, the global files, the
 * repository's config (and config.worktree), GIT_CONFIG_COUNT's pairs, and
 * every include.path / includeIf.*.path they reach (whatever the condition).
 * Each path a key that runs a program or names hooks, config or attributes
 * points at inside a writable grant is protected like a filesystem.protect
 * entry (docs/protected-paths.md, "Paths named by git's configuration").
 * A file git would refuse (a syntax error) or that cannot be read makes
 * agentbox refuse too.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agentbox/gitconfig.h"
#include "plan_int.h"

/* Files read for one work tree, includes counted (git has no such limit
 * but its include depth; a fan-out of includes is refused here). */
#define GC_MAX_FILES 64
/* Paths protected for git's configuration, in all (each is a mount). */
#define GC_MAX_PATHS 256

int ab_real_readfile(void *ctx, const char *path, size_t max, char **buf, size_t *len)
{
	(void)ctx;
	/* O_NONBLOCK: a FIFO planted where a config is looked for does not hang */
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0)
		return -errno;
	struct stat st;
	if (fstat(fd, &st) < 0)
		return -errno;
	if (S_ISDIR(st.st_mode))
		return -EISDIR;
	if (!S_ISREG(st.st_mode))
		return -EINVAL;
	return ab_read_fd_all(fd, (size_t)st.st_size, max, buf, len);
}

typedef struct gc {
	ab_plan *p;
	const ab_plan_input *in;
	ab_err *err;
	const char *top;  /* the work tree: the grant */
	char *gitdir;     /* its git directory */
	char *commondir;  /* where config lives (a linked worktree's main .git) */
	const char *file; /* the file being read, NULL for GIT_CONFIG_COUNT */
	int depth;        /* of includes */
	int nfiles;
	bool wtconfig;     /* extensions.worktreeConfig */
	bool shared;       /* reading the system or global config, or the environment */
	bool collect_only; /* no repository at TOP: only collect git_shared_rel */
} gc;

#define GC_MAX_SHARED 64

/* A relative path the shared config names: every work tree has its own,
 * nested repositories' included (settled after the run, gitnest.c). */
static int note_shared(gc *g, const char *value)
{
	if (!g->shared || value[0] == '/' || value[0] == '~' || !value[0] ||
	    ab_strv_contains(&g->p->git_shared_rel, value) ||
	    g->p->git_shared_rel.n >= GC_MAX_SHARED)
		return 0;
	return ab_strv_push(&g->p->git_shared_rel, value) < 0 ? ab_fail(g->err, ENOMEM, "plan") : 0;
}

static const char *env_get(const ab_plan_input *in, const char *name)
{
	size_t n = strlen(name);
	for (char *const *e = in->environ; e && *e; e++)
		if (strncmp(*e, name, n) == 0 && (*e)[n] == '=')
			return *e + n + 1;
	return NULL;
}

/* git_env_bool: unset is DEF; else git's boolean (a non-boolean counts as
 * true here: fail towards reading more). */
static bool env_bool(const ab_plan_input *in, const char *name, bool def)
{
	const char *v = env_get(in, name);
	if (!v)
		return def;
	return !(strcasecmp(v, "false") == 0 || strcasecmp(v, "no") == 0 ||
		 strcasecmp(v, "off") == 0 || strcmp(v, "0") == 0 || v[0] == '\0');
}

/* A path as git resolves one from config: "~/" is the home, "~user" is not
 * followed (NULL), relative is under BASE.  Normalised; NULL on ENOMEM too. */
static char *resolve(const gc *g, const char *v, const char *base)
{
	_cleanup_free_ char *raw = NULL;
	if (v[0] == '~' && (v[1] == '/' || v[1] == '\0'))
		raw = ab_asprintf("%s/%s", g->p->home, v + 1);
	else if (v[0] == '~')
		return NULL;
	else if (v[0] == '/')
		raw = strdup(v);
	else if (base)
		raw = ab_path_join(base, v);
	return raw ? ab_path_normalize(raw) : NULL;
}

/* FILE for a person: relative to the work tree when inside it. */
static const char *shown(const gc *g, const char *path)
{
	size_t n = strlen(g->top);
	if (path && strncmp(path, g->top, n) == 0 && path[n] == '/')
		return path + n + 1;
	return path;
}

static int protect(gc *g, const char *key, const char *path, bool dir, unsigned line)
{
	char origin[64];
	if (!g->file)
		snprintf(origin, sizeof(origin), "GIT_CONFIG_KEY_%u", line);
	int r = pl_protect_path(g->p, g->in, path, dir, g->err);
	if (r < 0) {
		if (strstr(g->err->hint, "filesystem.protect"))
			ab_err_hint(g->err,
				    "replace the link with the real file or directory, or "
				    "change %s",
				    key);
		if (g->file)
			return ab_err_prefix(g->err, "%s in %s:%u", key, g->file, line);
		return ab_err_prefix(g->err, "%s in %s", key, origin);
	}
	if (r == 0)
		return 0;
	if (g->p->gitcfg.n >= GC_MAX_PATHS)
		return ab_fail_code(g->err, AB_EXIT_FAIL, E2BIG,
				    "git config names more than %d paths inside writable grants "
				    "(the last: %s)",
				    GC_MAX_PATHS, path);
	_cleanup_free_ char *src =
		g->file ? ab_asprintf("%s:%u", shown(g, g->file), line) : strdup(origin);
	char *e =
		src ? ab_asprintf("%s%s\t%s\t%s", shown(g, path), dir ? "/" : "", key, src) : NULL;
	if (e && ab_strv_contains(&g->p->gitcfg, e)) {
		free(e);
		return 0;
	}
	if (!e || ab_strv_push_take(&g->p->gitcfg, e) < 0)
		return ab_fail(g->err, ENOMEM, "plan");
	return 0;
}

/* core.hooksPath naming a writable grant (or the directory of a writable
 * file grant, which could be a hook): every file the sandbox
 * writes there would be a hook, and a grant cannot be protected whole. */
static int hooks_cover_grant(gc *g, const char *key, const char *path, unsigned line)
{
	size_t n = strlen(path);
	for (size_t i = 0; i < g->p->nmounts; i++) {
		const ab_mount *m = &g->p->mounts[i];
		const char *slash = strrchr(m->dst, '/');
		size_t dl = slash ? (size_t)(slash - m->dst) : 0;
		bool file_there =
			!(m->flags & AB_MNT_F_DIR) && ((dl == n && strncmp(m->dst, path, n) == 0) ||
						       (dl == 0 && strcmp(path, "/") == 0));
		if (m->kind != AB_MNT_BIND_RW || !(strcmp(m->dst, path) == 0 || file_there))
			continue;
		ab_fail(g->err, 0,
			"%s in %s:%u names %s, the writable %s or its directory: the "
			"sandbox could write hooks there, so agentbox refuses to run",
			key, g->file ? g->file : "the environment", line, path, m->dst);
		ab_err_hint(g->err,
			    "point %s at a directory inside the repository (e.g. "
			    ".githooks), which agentbox keeps read-only",
			    key);
		return -EINVAL;
	}
	return 0;
}

static int on_path(gc *g, const char *key, const char *value, unsigned line)
{
	if (!value)
		return 0;
	bool wt = strcmp(key, "core.worktree") == 0;
	if (!wt && note_shared(g, value) < 0)
		return -ENOMEM;
	if (g->collect_only)
		return 0;
	/* core.worktree is relative to the git directory; the others to the
	 * work tree's top, where git runs */
	_cleanup_free_ char *path = resolve(g, value, wt ? g->gitdir : g->top);
	if (!path)
		return 0;
	if (wt)
		return strcmp(path, g->top) == 0 ? 0 : protect(g, key, path, true, line);
	bool hooks = strcmp(key, "core.hookspath") == 0;
	if (hooks && hooks_cover_grant(g, key, path, line) < 0)
		return -EINVAL;
	return protect(g, key, path, hooks, line);
}

/* Does word W (of a command) name a file?  It holds a '/', and is neither
 * an option ("-x", "--x=/y"), a URL ("https://h/p"), nor an assignment
 * ("VAR=/x"). */
static bool names_file(const char *w)
{
	const char *slash = strchr(w, '/');
	if (!slash || w[0] == '-' || strstr(w, "://"))
		return false;
	return !memchr(w, '=', (size_t)(slash - w));
}

/* Every word of a command that names a file, resolved from the work
 * tree's top, where git runs it.  Words are split at blanks and shell
 * quotes; a leading '!' (aliases, submodule.*.update) is dropped. */
static int on_program(gc *g, const char *key, const char *value, unsigned line)
{
	_cleanup_free_ char *v = value ? strdup(value) : NULL;
	if (!v)
		return value ? ab_fail(g->err, ENOMEM, "plan") : 0;
	char *save = NULL;
	for (char *w = strtok_r(v, " \t\n'\"", &save); w; w = strtok_r(NULL, " \t\n'\"", &save)) {
		w += w[0] == '!';
		if (!names_file(w))
			continue;
		if (note_shared(g, w) < 0)
			return -ENOMEM;
		if (g->collect_only)
			continue;
		_cleanup_free_ char *path = resolve(g, w, g->top);
		if (path && strcmp(path, "/") != 0) {
			int r = protect(g, key, path, false, line);
			if (r < 0)
				return r;
		}
	}
	return 0;
}

static int read_one(gc *g, const char *path);

static int on_include(gc *g, const char *key, const char *value, unsigned line)
{
	if (!value || !value[0])
		return 0;
	if (!g->file && value[0] != '/' && value[0] != '~')
		return 0; /* git refuses a relative include from the environment */
	/* (every file read has an absolute name: see abs_env) */
	_cleanup_free_ char *dir = g->file ? strdup(g->file) : NULL;
	char *slash = dir ? strrchr(dir, '/') : NULL;
	if (slash)
		*slash = '\0';
	_cleanup_free_ char *path = resolve(g, value, dir);
	if (!path)
		return 0;
	int r = protect(g, key, path, false, line);
	if (r < 0)
		return r;
	if (g->depth >= AB_GITCFG_MAX_INCLUDE_DEPTH) {
		ab_fail(g->err, 0, "%s:%u: exceeded the maximum include depth (%d) of git config",
			g->file ? g->file : "GIT_CONFIG_COUNT", line, AB_GITCFG_MAX_INCLUDE_DEPTH);
		ab_err_hint(g->err, "git refuses this configuration too: remove the include loop");
		return -ELOOP;
	}
	const char *saved = g->file;
	g->depth++;
	r = read_one(g, path);
	g->depth--;
	g->file = saved;
	return r;
}

static int on_key(const char *key, const char *value, unsigned line, void *ctx)
{
	gc *g = ctx;
	switch (ab_gitkey_classify(key, value)) {
	case AB_GITKEY_INCLUDE: return on_include(g, key, value, line);
	case AB_GITKEY_PATH: return on_path(g, key, value, line);
	case AB_GITKEY_PROGRAM: return on_program(g, key, value, line);
	default:
		if (strcmp(key, "extensions.worktreeconfig") == 0)
			g->wtconfig = !value || !(strcasecmp(value, "false") == 0 ||
						  strcasecmp(value, "no") == 0 ||
						  strcasecmp(value, "off") == 0 ||
						  strcmp(value, "0") == 0 || !value[0]);
		return 0;
	}
}

static int read_err(gc *g, const char *path, int r)
{
	if (r == -EACCES || r == -EPERM) {
		ab_fail(g->err, -r, "git config %s", path);
		ab_err_hint(g->err, "agentbox reads git's configuration to protect the paths it "
				    "names; make the file readable by you, or remove it");
		return r;
	}
	if (r == -E2BIG)
		return ab_fail_code(g->err, AB_EXIT_FAIL, E2BIG,
				    "git config %s: larger than %u bytes", path,
				    AB_GITCFG_MAX_BYTES);
	if (r == -EINVAL)
		return ab_fail_code(g->err, AB_EXIT_FAIL, EINVAL,
				    "git config %s: not a regular file", path);
	return ab_fail(g->err, -r, "git config %s", path);
}

/* Read and walk one config file.  Absent (or a directory): nothing, as in
 * git. */
static int read_one(gc *g, const char *path)
{
	if (++g->nfiles > GC_MAX_FILES)
		return ab_fail_code(g->err, AB_EXIT_FAIL, E2BIG,
				    "git config: more than %d files included for %s", GC_MAX_FILES,
				    g->top);
	_cleanup_free_ char *buf = NULL;
	size_t len = 0;
	int r = g->in->readfile(g->in->readfile_ctx, path, AB_GITCFG_MAX_BYTES, &buf, &len);
	if (r == -ENOENT || r == -ENOTDIR || r == -EISDIR)
		return 0;
	if (r < 0)
		return read_err(g, path, r);
	g->file = path;
	ab_err perr = {0};
	r = ab_gitconfig_parse(buf, len, on_key, g, &perr);
	if (r < 0 && perr.msg[0]) {
		/* the parser's "LINE:COL: what" after the file's name */
		ab_fail_code(g->err, AB_EXIT_FAIL, -r, "git config %s:%s", path, perr.msg);
		ab_err_hint(g->err,
			    "git refuses this file too; fix it (git config -f %s -l "
			    "shows where)",
			    path);
	}
	return r;
}

/* GIT_CONFIG_COUNT / GIT_CONFIG_KEY_<n> / GIT_CONFIG_VALUE_<n>. */
static int read_env_pairs(gc *g)
{
	const char *c = env_get(g->in, "GIT_CONFIG_COUNT");
	long n = c ? strtol(c, NULL, 10) : 0;
	g->file = NULL;
	g->shared = true;
	for (long i = 0; i < n && i < 1000; i++) {
		char kn[40], vn[40];
		snprintf(kn, sizeof(kn), "GIT_CONFIG_KEY_%ld", i);
		snprintf(vn, sizeof(vn), "GIT_CONFIG_VALUE_%ld", i);
		const char *k = env_get(g->in, kn), *v = env_get(g->in, vn);
		if (!k || !v)
			continue; /* git refuses to start; nothing to protect */
		_cleanup_free_ char *key = strdup(k);
		if (!key)
			return ab_fail(g->err, ENOMEM, "plan");
		/* section and name are case-insensitive, the subsection is not */
		char *last = strrchr(key, '.');
		for (char *s = key; *s && *s != '.'; s++)
			*s = (char)(*s >= 'A' && *s <= 'Z' ? *s + 32 : *s);
		for (char *s = last ? last : key; *s; s++)
			*s = (char)(*s >= 'A' && *s <= 'Z' ? *s + 32 : *s);
		int r = on_key(key, v, (unsigned)i, g);
		if (r < 0)
			return r;
	}
	g->shared = false;
	return 0;
}

/* NAME from the environment as an absolute path: a relative one is taken
 * from the caller's directory, where git started from there would take it.
 * NULL when unset or empty (*SET says whether it is set); *OOM on ENOMEM. */
static char *abs_env(gc *g, const char *name, bool *set, bool *oom)
{
	const char *v = env_get(g->in, name);
	*set = v != NULL;
	if (!v || !v[0] || (v[0] != '/' && !g->in->cwd))
		return NULL;
	_cleanup_free_ char *j = v[0] == '/' ? strdup(v) : ab_path_join(g->in->cwd, v);
	char *n = j ? ab_path_normalize(j) : NULL;
	*oom = !n;
	return n;
}

static int read_system_global_files(gc *g)
{
	const ab_plan_input *in = g->in;
	int r = 0;
	bool set = false, oom = false;
	if (!env_bool(in, "GIT_CONFIG_NOSYSTEM", false)) {
		_cleanup_free_ char *sys = abs_env(g, "GIT_CONFIG_SYSTEM", &set, &oom);
		r = oom ? ab_fail(g->err, ENOMEM, "plan")
			: read_one(g, sys ? sys : "/etc/gitconfig");
	}
	_cleanup_free_ char *glob = r < 0 ? NULL : abs_env(g, "GIT_CONFIG_GLOBAL", &set, &oom);
	if (oom)
		return ab_fail(g->err, ENOMEM, "plan");
	if (r < 0 || set)
		return r < 0 || !glob ? r : read_one(g, glob);
	const char *xdg = env_get(in, "XDG_CONFIG_HOME");
	_cleanup_free_ char *x = xdg && xdg[0] ? ab_asprintf("%s/git/config", xdg)
					       : ab_asprintf("%s/.config/git/config", g->p->home);
	_cleanup_free_ char *h = ab_asprintf("%s/.gitconfig", g->p->home);
	if (!x || !h)
		return ab_fail(g->err, ENOMEM, "plan");
	r = read_one(g, x);
	return r < 0 ? r : read_one(g, h);
}

static int read_system_global(gc *g)
{
	g->shared = true;
	int r = read_system_global_files(g);
	g->shared = false;
	return r;
}

/* TOP/.git: a directory, or a file "gitdir: PATH" (a linked worktree, a
 * submodule); the common directory from GITDIR/commondir.  0 and
 * g->gitdir set, or 0 with it NULL when TOP is no work tree. */
static int find_gitdir(gc *g)
{
	_cleanup_free_ char *dotgit = ab_path_join(g->top, ".git");
	if (!dotgit)
		return ab_fail(g->err, ENOMEM, "plan");
	struct stat st;
	if (pl_lstat(g->in, dotgit, &st) < 0)
		return 0;
	if (S_ISDIR(st.st_mode)) {
		g->gitdir = TAKE_PTR(dotgit);
	} else if (S_ISREG(st.st_mode)) {
		_cleanup_free_ char *buf = NULL;
		size_t len = 0;
		if (g->in->readfile(g->in->readfile_ctx, dotgit, 4096, &buf, &len) < 0 ||
		    strncmp(buf, "gitdir: ", 8) != 0)
			return 0; /* git would not take it either */
		buf[strcspn(buf, "\r\n")] = '\0';
		g->gitdir =
			buf[8] == '/' ? ab_path_normalize(buf + 8) : resolve(g, buf + 8, g->top);
	} else {
		return 0;
	}
	_cleanup_free_ char *cd = g->gitdir ? ab_path_join(g->gitdir, "commondir") : NULL;
	_cleanup_free_ char *buf = NULL;
	size_t len = 0;
	if (cd && g->in->readfile(g->in->readfile_ctx, cd, 4096, &buf, &len) == 0) {
		buf[strcspn(buf, "\r\n")] = '\0';
		g->commondir = buf[0] == '/' ? ab_path_normalize(buf) : resolve(g, buf, g->gitdir);
	} else if (g->gitdir) {
		g->commondir = strdup(g->gitdir);
	}
	return g->gitdir && g->commondir ? 0 : ab_fail(g->err, ENOMEM, "plan");
}

static int plan_tree(ab_plan *p, const ab_plan_input *in, const char *top, ab_err *err)
{
	gc g = {.p = p, .in = in, .err = err, .top = top};
	int r = find_gitdir(&g);
	if (r == 0 && g.gitdir) {
		_cleanup_free_ char *local = ab_path_join(g.commondir, "config");
		_cleanup_free_ char *wt = ab_path_join(g.gitdir, "config.worktree");
		if (!local || !wt)
			r = ab_fail(err, ENOMEM, "plan");
		if (r == 0)
			r = read_system_global(&g);
		if (r == 0)
			r = read_one(&g, local);
		if (r == 0 && g.wtconfig)
			r = read_one(&g, wt);
		if (r == 0)
			r = read_env_pairs(&g);
	}
	free(g.gitdir);
	free(g.commondir);
	return r;
}

/* The work tree DIR is in, as git finds it: DIR or the nearest parent
 * holding a ".git" (a directory or a file).  Malloc'd, or NULL (none, or
 * ENOMEM: then *OOM). */
static char *find_top(const ab_plan_input *in, const char *dir, bool *oom)
{
	_cleanup_free_ char *cur = strdup(dir);
	while (cur) {
		_cleanup_free_ char *dotgit = ab_path_join(cur, ".git");
		struct stat st;
		if (!dotgit)
			break;
		if (pl_lstat(in, dotgit, &st) == 0 && (S_ISDIR(st.st_mode) || S_ISREG(st.st_mode)))
			return TAKE_PTR(cur);
		char *slash = strrchr(cur, '/');
		if (!slash || slash == cur) /* the root has no parent to try */
			return NULL;
		*slash = '\0';
	}
	*oom = true;
	return NULL;
}

int pl_plan_gitcfg(ab_plan *p, const ab_plan_input *in, ab_err *err)
{
	if (!in->readfile)
		return 0;
	/* the work trees of the workspace first, then of the other writable
	 * directory grants (a grant inside a repository: that repository's) */
	ab_strv tops = {0};
	bool oom = false;
	for (size_t i = 0; !oom && i <= p->nmounts; i++) {
		const ab_mount *m = i ? &p->mounts[i - 1] : NULL;
		if (m && (m->kind != AB_MNT_BIND_RW || !(m->flags & AB_MNT_F_DIR)))
			continue;
		char *top = find_top(in, m ? m->dst : p->workspace, &oom);
		if (top && !ab_strv_contains(&tops, top))
			oom = ab_strv_push_take(&tops, top) < 0;
		else
			free(top);
	}
	int r = oom ? ab_fail(err, ENOMEM, "plan") : 0;
	for (size_t i = 0; r == 0 && i < tops.n; i++)
		r = plan_tree(p, in, tops.v[i], err);
	ab_strv_free(&tops);
	if (r == 0 && !tops.n) { /* no repository: the shared names, for nested ones */
		gc g = {.p = p, .in = in, .err = err, .top = p->workspace, .collect_only = true};
		r = read_system_global(&g);
		if (r == 0)
			r = read_env_pairs(&g);
	}
	return r;
}
