/* SPDX-License-Identifier: MIT */
/*
 * Profiles (runs in the parent, before anything else): find a profile by
 * name or path, read it, validate it strictly against format version 1
 * (profile_keys.c), resolve `extends` and merge.  Every error reads
 * "FILE:LINE:COL: json.path: what" (profile_values.c places it).
 *
 * Impure parts: reading profile files, stat(), getcwd() and /proc/self/exe.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "profile_int.h"

#ifndef AB_DATADIR
#define AB_DATADIR "/usr/local/share/agentbox"
#endif

#define MAX_FILES 256 /* files loaded through extends, in total (bounds fan-out) */

static const ab_vars no_vars;

/* ------------------------------------------------------------------------ */
/* Profile values: new, merge, free                                         */
/* ------------------------------------------------------------------------ */

static ab_profile *profile_new(void)
{
	ab_profile *p = calloc(1, sizeof(*p));
	if (p)
		p->net.transparent = p->audit.exec = p->audit.denials = p->terminal.clipboard =
			p->ask = p->workspace.review = -1;
	if (p)
		p->limits =
			(ab_limits){AB_LIMIT_UNSET, AB_LIMIT_UNSET, AB_LIMIT_UNSET, AB_LIMIT_UNSET,
				    AB_LIMIT_UNSET, AB_LIMIT_UNSET, AB_LIMIT_UNSET};
	return p;
}

static ab_strv *profile_lists(ab_profile *p, size_t i)
{
	ab_strv *l[] = {
		&p->files,           &p->shadows,       &p->fs.read,        &p->fs.write,
		&p->fs.deny,         &p->fs.protect,    &p->fs.tmpfs,       &p->fs.guard,
		&p->env.pass,        &p->syscalls.deny, &p->syscalls.allow, &p->unix_sockets,
		&p->allow_downgrade, &p->net.allow,     &p->net.deny,       &p->net.priv,
		&p->cli_grants,      &p->cli_write,     &p->command};
	return i < AB_ARRAY_SIZE(l) ? l[i] : NULL;
}

/* A secret of a later profile replaces the one of the same name. */
static int merge_secret(ab_profile *base, const struct ab_profile_secret *s)
{
	struct ab_profile_secret x;
	if (pf_secret_copy(&x, s) < 0)
		return -ENOMEM;
	for (size_t i = 0; i < base->nsecrets; i++) {
		if (strcmp(base->secrets[i].name, s->name) == 0) {
			pf_secret_clear(&base->secrets[i]);
			base->secrets[i] = x;
			return 0;
		}
	}
	struct ab_profile_secret *n = realloc(base->secrets, (base->nsecrets + 1) * sizeof(*n));
	if (!n) {
		pf_secret_clear(&x);
		return -ENOMEM;
	}
	base->secrets = n;
	n[base->nsecrets++] = x;
	return 0;
}

/* All lists but `command` (the last) are unions; a later `command` replaces. */
static int merge_lists(ab_profile *base, const ab_profile *top)
{
	ab_strv cmd = {0};
	int r;
	for (size_t i = 0; profile_lists(base, i + 1); i++)
		if ((r = ab_strv_extend(profile_lists(base, i),
					profile_lists((ab_profile *)top, i))) < 0)
			return r;
	if (top->command.n > 0) {
		if ((r = ab_strv_copy(&cmd, &top->command)) < 0) {
			ab_strv_free(&cmd);
			return r;
		}
		ab_strv_free(&base->command);
		base->command = cmd;
	}
	return 0;
}

static void merge_limits(ab_profile *base, const ab_profile *top)
{
#define OVERRIDE(f)                                     \
	do {                                            \
		if (top->limits.f != AB_LIMIT_UNSET)    \
			base->limits.f = top->limits.f; \
	} while (0)
	OVERRIDE(nofile);
	OVERRIDE(nproc);
	OVERRIDE(fsize);
	OVERRIDE(core);
	OVERRIDE(memory);
	OVERRIDE(pids);
	OVERRIDE(cpu);
#undef OVERRIDE
}

/* network (but its lists and loopback ports), audit and terminal: a value
 * set later wins */
static int merge_settings(ab_profile *base, const ab_profile *top)
{
	for (size_t i = 0; i < top->net.nhosts; i++)
		if (pf_kv_put(&base->net.hosts, &base->net.nhosts, top->net.hosts[i].key,
			      top->net.hosts[i].val) < 0)
			return -ENOMEM;
	if (top->net.transparent >= 0)
		base->net.transparent = top->net.transparent;
	if (top->audit.exec >= 0)
		base->audit.exec = top->audit.exec;
	if (top->audit.denials >= 0)
		base->audit.denials = top->audit.denials;
	if (top->terminal.clipboard >= 0)
		base->terminal.clipboard = top->terminal.clipboard;
	if (top->ask >= 0)
		base->ask = top->ask;
	if (top->workspace.review >= 0)
		base->workspace.review = top->workspace.review;
	if (top->net.proxy_port)
		base->net.proxy_port = top->net.proxy_port;
	if (top->net.placeholder_elsewhere)
		base->net.placeholder_elsewhere = top->net.placeholder_elsewhere;
	if (pf_replace_str(&base->net.log, top->net.log) < 0 ||
	    pf_replace_str(&base->net.upstream_proxy, top->net.upstream_proxy) < 0 ||
	    pf_replace_str(&base->net.ca_file, top->net.ca_file) < 0)
		return -ENOMEM;
	return 0;
}

static int merge_values(ab_profile *base, const ab_profile *top)
{
	int r;
	if (pf_replace_str(&base->description, top->description) < 0 ||
	    pf_replace_str(&base->hostname, top->hostname) < 0)
		return -ENOMEM;
	if ((r = merge_lists(base, top)) < 0)
		return r;
	for (size_t i = 0; i < top->env.nset; i++)
		if (pf_kv_set(base, top->env.set[i].key, top->env.set[i].val) < 0)
			return -ENOMEM;
	merge_limits(base, top);
	if (merge_settings(base, top) < 0)
		return -ENOMEM;
	for (size_t i = 0; i < top->nsecrets; i++)
		if (merge_secret(base, &top->secrets[i]) < 0)
			return -ENOMEM;
	for (size_t i = 0; i < top->ndescr; i++)
		if (pf_kv_put(&base->descr, &base->ndescr, top->descr[i].key, top->descr[i].val) <
		    0)
			return -ENOMEM;
	base->loopback.any = base->loopback.any || top->loopback.any;
	for (size_t i = 0; i < top->loopback.nports; i++)
		if (pf_add_port(base, top->loopback.ports[i]) < 0)
			return -ENOMEM;
	return 0;
}

int ab_profile_merge(ab_profile *base, const ab_profile *top, ab_err *err)
{
	int r = merge_values(base, top);
	char shown[1024];
	if (r < 0)
		return ab_fail(err, -r, "merging profile %s",
			       PF_SHOW(shown, top->path ? top->path : ""));
	return 0;
}

void ab_profile_free(ab_profile *p)
{
	if (!p)
		return;
	for (size_t i = 0; profile_lists(p, i); i++)
		ab_strv_free(profile_lists(p, i));
	for (size_t i = 0; i < p->env.nset; i++) {
		free(p->env.set[i].key);
		free(p->env.set[i].val);
	}
	free(p->env.set);
	for (size_t i = 0; i < p->net.nhosts; i++) {
		free(p->net.hosts[i].key);
		free(p->net.hosts[i].val);
	}
	free(p->net.hosts);
	for (size_t i = 0; i < p->ndescr; i++) {
		free(p->descr[i].key);
		free(p->descr[i].val);
	}
	free(p->descr);
	free(p->net.log);
	free(p->net.upstream_proxy);
	free(p->net.ca_file);
	for (size_t i = 0; i < p->nsecrets; i++)
		pf_secret_clear(&p->secrets[i]);
	free(p->secrets);
	free(p->loopback.ports);
	free(p->name);
	free(p->path);
	free(p->description);
	free(p->hostname);
	free(p);
}

/* Every list gets a NULL-terminated array even when empty, so callers may
 * iterate v without checking n. */
static int ensure_vectors(ab_profile *p)
{
	for (size_t i = 0; profile_lists(p, i); i++) {
		ab_strv *s = profile_lists(p, i);
		if (!s->v && !(s->v = calloc(1, sizeof(char *))))
			return -ENOMEM;
	}
	return 0;
}

/* ------------------------------------------------------------------------ */
/* Finding and reading files                                                */
/* ------------------------------------------------------------------------ */

static bool exists(const char *p)
{
	struct stat st;
	return stat(p, &st) == 0;
}

/* path made absolute against dir (or the cwd when dir is NULL), normalised. */
static char *make_absolute(const char *path, const char *dir)
{
	char cwd[PATH_MAX];
	_cleanup_free_ char *j = NULL;
	if (path[0] == '/')
		return ab_path_normalize(path);
	if (!dir) {
		if (!getcwd(cwd, sizeof(cwd)))
			return NULL;
		dir = cwd;
	}
	j = ab_path_join(dir, path);
	return j ? ab_path_normalize(j) : NULL;
}

static int push_candidate(ab_strv *out, char *p)
{
	char *n = p ? ab_path_normalize(p) : NULL;
	free(p);
	if (!n)
		return -ENOMEM;
	return ab_strv_push_take(out, n);
}

/* Where a profile NAME is looked for, in order (absolute, normalised). */
static int name_candidates(const char *name, const ab_vars *v, const char *sibling_dir,
			   ab_strv *out)
{
	char tmp[PATH_MAX], exe[PATH_MAX];
	const char *cfg = pf_xdg_dir(v->xdg_config_home, v->home, ".config", tmp, sizeof(tmp));
	ssize_t n;
	int r = 0;
	if (sibling_dir)
		r = push_candidate(out, ab_asprintf("%s/%s.json", sibling_dir, name));
	if (r >= 0 && cfg)
		r = push_candidate(out, ab_asprintf("%s/agentbox/profiles/%s.json", cfg, name));
	/* installed: next to the binary (PREFIX/bin -> PREFIX/share/agentbox,
	 * so a relocated install works), then the configured data dir; last the
	 * build tree (build/agentbox -> profiles/) */
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	bool have_exe = n > 0 && exe[0] == '/';
	if (have_exe) {
		exe[n] = '\0';
		*strrchr(exe, '/') = '\0';
	}
	if (r >= 0 && have_exe)
		r = push_candidate(out,
				   ab_asprintf("%s/../share/agentbox/profiles/%s.json", exe, name));
	if (r >= 0)
		r = push_candidate(out, ab_asprintf("%s/profiles/%s.json", AB_DATADIR, name));
	if (r >= 0 && have_exe)
		r = push_candidate(out, ab_asprintf("%s/../profiles/%s.json", exe, name));
	return r;
}

int ab_profile_list_names(const ab_vars *v, ab_strv *out)
{
	_cleanup_strv_ ab_strv dirs = {0};
	int r = name_candidates("x", v, NULL, &dirs);
	for (size_t i = 0; r >= 0 && i < dirs.n; i++) {
		size_t n = strlen(dirs.v[i]);
		if (n < 7 || strcmp(dirs.v[i] + n - 7, "/x.json") != 0)
			continue;
		dirs.v[i][n - 7] = '\0';
		DIR *d = opendir(dirs.v[i]);
		struct dirent *e;
		while (r >= 0 && d && (e = readdir(d))) {
			size_t l = strlen(e->d_name);
			if (l <= 5 || strcmp(e->d_name + l - 5, ".json") != 0 ||
			    strcmp(e->d_name, "schema.json") == 0 || e->d_name[0] == '.')
				continue;
			_cleanup_free_ char *name = strndup(e->d_name, l - 5);
			r = name ? ab_strv_push_unique(out, name) : -ENOMEM;
		}
		if (d)
			closedir(d);
	}
	return r < 0 ? r : 0;
}

/* Resolve NAME: the first candidate that exists and is not `skip`. */
static int find_by_name(const char *name, const ab_vars *v, const char *sibling_dir,
			const char *skip, char **out, ab_strv *shadows, ab_err *err)
{
	_cleanup_strv_ ab_strv cands = {0};
	char list[1024] = "", q[100], tmp[PATH_MAX];
	const char *cfg;
	size_t o = 0;
	pf_quote(q, sizeof(q), name);
	if (!pf_name_ok(name)) {
		ab_fail(err, 0, "invalid profile name \"%s\" (%s)", q, PF_NAME_RULE);
		ab_err_hint(err, "to load a file, give a path containing / or ending in .json");
		return -EINVAL;
	}
	if (name_candidates(name, v, sibling_dir, &cands) < 0)
		return ab_fail(err, ENOMEM, "looking up profile \"%s\"", q);
	for (size_t i = 0; i < cands.n; i++) {
		if (skip && strcmp(cands.v[i], skip) == 0)
			continue;
		if (exists(cands.v[i])) {
			*out = strdup(cands.v[i]);
			return *out ? 0 : ab_fail(err, ENOMEM, "looking up profile \"%s\"", q);
		}
		if (shadows && ab_strv_push_unique(shadows, cands.v[i]) < 0)
			return ab_fail(err, ENOMEM, "looking up profile \"%s\"", q);
		char shown[512];
		int n = snprintf(list + o, sizeof(list) - o, "%s%s", o ? ", " : "",
				 PF_SHOW(shown, cands.v[i]));
		if (n > 0 && (size_t)n < sizeof(list) - o)
			o += (size_t)n;
	}
	ab_fail_code(err, AB_EXIT_FAIL, ENOENT, "profile \"%s\" not found (looked in %s)", q, list);
	cfg = pf_xdg_dir(v->xdg_config_home, v->home, ".config", tmp, sizeof(tmp));
	ab_err_hint(err,
		    "put your own in %s/agentbox/profiles/%s.json (or pass a path to a "
		    ".json file) and validate it with \"agentbox check %s\"",
		    cfg ? cfg : "$XDG_CONFIG_HOME", q, q);
	return -ENOENT;
}

static int find_impl(const char *name_or_path, const ab_vars *vars, char **out_path,
		     ab_strv *shadows, ab_err *err)
{
	char *abs, shown[1024];
	if (!vars)
		vars = &no_vars;
	if (!name_or_path || !*name_or_path)
		return ab_fail(err, 0, "empty profile name");
	if (!pf_is_pathlike(name_or_path))
		return find_by_name(name_or_path, vars, NULL, NULL, out_path, shadows, err);
	abs = make_absolute(name_or_path, NULL);
	if (!abs)
		return ab_fail(err, errno ? errno : ENOMEM, "profile %s",
			       PF_SHOW(shown, name_or_path));
	if (!exists(abs)) {
		int e = errno;
		ab_fail(err, e, "cannot read profile %s", PF_SHOW(shown, abs));
		free(abs);
		return -e;
	}
	*out_path = abs;
	return 0;
}

int ab_profile_find(const char *name_or_path, const ab_vars *vars, char **out_path, ab_err *err)
{
	return find_impl(name_or_path, vars, out_path, NULL, err);
}

static int read_profile_file(const char *path, char **out, size_t *outlen, ab_err *err)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	_cleanup_free_ char *buf = NULL;
	char shown[1024];
	struct stat st;
	size_t n = 0;
	PF_SHOW(shown, path);
	if (fd < 0 || fstat(fd, &st) < 0)
		return ab_fail(err, errno, "cannot read profile %s", shown);
	if (!S_ISREG(st.st_mode))
		return ab_fail(err, 0, "cannot read profile %s: not a regular file", shown);
	if (st.st_size > AB_PROFILE_MAX_BYTES)
		goto too_large;
	int r = ab_read_fd_all(fd, (size_t)st.st_size, AB_PROFILE_MAX_BYTES, &buf, &n);
	if (r == -E2BIG)
		goto too_large;
	if (r < 0)
		return ab_fail(err, -r, "cannot read profile %s", shown);
	*out = TAKE_PTR(buf);
	*outlen = n;
	return 0;
too_large:
	return ab_fail(err, 0, "%s: profile too large (more than %d bytes)", shown,
		       AB_PROFILE_MAX_BYTES);
}

/* ------------------------------------------------------------------------ */
/* Loading with extends                                                     */
/* ------------------------------------------------------------------------ */

typedef struct loader {
	const ab_vars *vars;
	ab_strv chain;   /* absolute paths of the files being loaded, outermost first */
	size_t nfiles;   /* loaded so far */
	ab_strv shadows; /* see ab_profile.shadows */
} loader;

static int load_at(loader *L, const char *buf, size_t len, const char *fname, const char *abspath,
		   ab_profile **out, ab_err *err);

static char *dir_of(const char *abspath)
{
	char *d = strdup(abspath), *s = d ? strrchr(d, '/') : NULL;
	if (s)
		s[s == d ? 1 : 0] = '\0';
	return d;
}

static int resolve_extends(loader *L, const char *entry, const char *includer, char **out,
			   ab_err *err)
{
	_cleanup_free_ char *dir = dir_of(includer), *x = NULL;
	int r;
	if (!dir)
		return ab_fail(err, ENOMEM, "resolving extends");
	if (!pf_is_pathlike(entry))
		return find_by_name(entry, L->vars, dir, includer, out, &L->shadows, err);
	r = ab_profile_expand(entry, L->vars, true, &x, err);
	if (r < 0)
		return r;
	*out = make_absolute(x, dir);
	return *out ? 0 : ab_fail(err, ENOMEM, "resolving extends");
}

/* "A -> B -> ... -> last", the chain from its element `from` on. */
static void chain_str(const loader *L, const char *from, const char *last, char *out, size_t outsz)
{
	size_t i = 0, o = 0;
	while (i < L->chain.n && strcmp(L->chain.v[i], from) != 0)
		i++;
	out[0] = '\0';
	for (; i <= L->chain.n; i++) {
		char shown[512];
		const char *s = i < L->chain.n ? L->chain.v[i] : last;
		int n = snprintf(out + o, outsz - o, "%s%s", o ? " -> " : "", PF_SHOW(shown, s));
		if (n < 0 || (size_t)n >= outsz - o)
			break;
		o += (size_t)n;
	}
}

/* Load extends entry i of c (already validated) and merge it into acc. */
static int load_base(loader *L, pf_ctx *c, size_t i, const char *includer, ab_profile *acc)
{
	_cleanup_free_ char *path = NULL, *buf = NULL;
	_cleanup_profile_ ab_profile *base = NULL;
	char where[256], pstr[64], chain[1024];
	size_t blen = 0, line, col;
	int r;
	c->depth = 0;
	pf_push_key(c, "extends");
	if (c->extends_array)
		pf_push_index(c, i);
	(void)ab_json_locate(c->buf, c->len, c->path, c->depth, false, &line, &col);
	pf_path_str(c, c->depth, pstr, sizeof(pstr));
	snprintf(where, sizeof(where), "%s:%zu:%zu", c->fname, line, col);
	r = resolve_extends(L, c->extends.v[i], includer, &path, c->err);
	if (r < 0)
		return ab_err_prefix(c->err, "%s: %s", where, pstr);
	if (ab_strv_contains(&L->chain, path)) {
		chain_str(L, path, path, chain, sizeof(chain));
		return pf_fail(c, "cycle: %s", chain);
	}
	if (L->chain.n > AB_PROFILE_MAX_DEPTH) {
		chain_str(L, L->chain.v[0], path, chain, sizeof(chain));
		return pf_fail(c, "nested deeper than %d levels (%s)", AB_PROFILE_MAX_DEPTH, chain);
	}
	r = read_profile_file(path, &buf, &blen, c->err);
	if (r < 0)
		return ab_err_prefix(c->err, "%s: %s", where, pstr);
	r = load_at(L, buf, blen, path, path, &base, c->err);
	if (r < 0) {
		char shown[256];
		if (!c->err->hint[0])
			ab_err_hint(c->err, "%s is extended at %s", PF_SHOW(shown, path), where);
		return r;
	}
	return ab_profile_merge(acc, base, c->err);
}

static int load_at(loader *L, const char *buf, size_t len, const char *fname, const char *abspath,
		   ab_profile **out, ab_err *err)
{
	_cleanup_profile_ ab_profile *own = profile_new(), *acc = profile_new();
	char shown[1024];
	pf_ctx c = {.fname = PF_SHOW(shown, fname),
		    .buf = buf ? buf : "",
		    .len = buf ? len : 0,
		    .vars = L->vars,
		    .p = own,
		    .err = err};
	bool pushed = false;
	json_t *root = NULL;
	int r;
	if (!own || !acc)
		return ab_fail(err, ENOMEM, "%s: loading profile", c.fname);
	if (++L->nfiles > MAX_FILES)
		return ab_fail(err, 0, "%s: too many profile files through extends (more than %d)",
			       c.fname, MAX_FILES);
	r = pf_parse_json(&c, &root);
	if (r >= 0) {
		r = pf_validate(&c, root);
		json_decref(root);
	}
	if (r >= 0 &&
	    (ab_strv_push(&own->files, abspath) < 0 || ab_strv_push(&L->chain, abspath) < 0))
		r = pf_oom(&c);
	else if (r >= 0)
		pushed = true;
	for (size_t i = 0; r >= 0 && i < c.extends.n; i++)
		r = load_base(L, &c, i, abspath, acc);
	if (pushed) {
		free(L->chain.v[--L->chain.n]);
		L->chain.v[L->chain.n] = NULL;
	}
	ab_strv_free(&c.extends);
	if (r >= 0)
		r = ab_profile_merge(acc, own, err);
	if (r < 0)
		return r;
	*out = TAKE_PTR(acc);
	return 0;
}

static int load_top(const char *name, const char *buf, size_t len, const char *fname,
		    const char *abspath, const ab_vars *vars, ab_strv *shadows, ab_profile **out,
		    ab_err *err)
{
	loader L = {.vars = vars ? vars : &no_vars};
	ab_profile *p = NULL;
	if (shadows) {
		L.shadows = *shadows;
		*shadows = (ab_strv){0};
	}
	int r = load_at(&L, buf, len, fname, abspath, &p, err);
	ab_strv_free(&L.chain);
	if (r < 0) {
		ab_strv_free(&L.shadows);
		return r;
	}
	r = ab_strv_extend(&p->shadows, &L.shadows);
	ab_strv_free(&L.shadows);
	if (r < 0) {
		ab_profile_free(p);
		return ab_fail(err, ENOMEM, "loading profile");
	}
	p->name = strdup(name);
	p->path = strdup(abspath);
	if (!p->name || !p->path || ensure_vectors(p) < 0) {
		ab_profile_free(p);
		return ab_fail(err, ENOMEM, "loading profile");
	}
	*out = p;
	return 0;
}

int ab_profile_load_buffer(const char *buf, size_t len, const char *fname, const ab_vars *vars,
			   ab_profile **out, ab_err *err)
{
	_cleanup_free_ char *abspath = NULL;
	char shown[1024];
	if (!fname || !*fname)
		fname = "<buffer>";
	if (len > AB_PROFILE_MAX_BYTES)
		return ab_fail(err, 0, "%s: profile too large (more than %d bytes)",
			       PF_SHOW(shown, fname), AB_PROFILE_MAX_BYTES);
	abspath = make_absolute(fname, NULL);
	if (!abspath)
		return ab_fail(err, errno ? errno : ENOMEM, "%s: loading profile",
			       PF_SHOW(shown, fname));
	return load_top(fname, buf, len, fname, abspath, vars, NULL, out, err);
}

int ab_profile_load(const char *name_or_path, const ab_vars *vars, ab_profile **out, ab_err *err)
{
	_cleanup_free_ char *path = NULL, *buf = NULL;
	_cleanup_strv_ ab_strv shadows = {0};
	size_t len = 0;
	int r = find_impl(name_or_path, vars, &path, &shadows, err);
	if (r < 0)
		return r;
	r = read_profile_file(path, &buf, &len, err);
	if (r < 0)
		return r;
	return load_top(name_or_path, buf, len, path, path, vars, &shadows, out, err);
}
