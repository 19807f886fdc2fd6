/* SPDX-License-Identifier: MIT */
/*
 * Profiles (runs in the parent, before anything else): read a JSON profile,
 * validate it strictly against format version 1, expand variables, resolve
 * `extends` and merge.  Every error reads "FILE:LINE:COL: json.path: what".
 *
 * jansson records no positions for parsed values: the positions in messages
 * (and the byte checks and syntax-error wording before and after jansson)
 * come from the pure locator in json_pos.c, which also sees hostile input.
 *
 * Impure parts: reading profile files, stat(), getcwd() and /proc/self/exe.
 */
#include "agentbox/profile.h"
#include "agentbox/netpolicy.h"
#include "agentbox/credfile.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#ifndef AB_DATADIR
#define AB_DATADIR "/usr/local/share/agentbox"
#endif

#define MAX_JPATH 4          /* deepest path in the format: filesystem.read[i], env.set.NAME */
#define MAX_EXPANDED 65536   /* a string after variable expansion */
#define MAX_FILES 256        /* files loaded through extends, in total (bounds fan-out) */
#define NAME_RULE "an optional +, a letter or digit, then up to 63 of A-Z a-z 0-9 . _ + -"

const char *const ab_downgrade_names[] = {
	"landlock",       "landlock-refer", "landlock-truncate", "landlock-net",
	"landlock-ioctl-dev", "landlock-scope", "cgroup-limits", "seccomp-user-notif",
	NULL,
};

static const ab_vars no_vars;

bool ab_downgrade_known(const char *name)
{
	for (size_t i = 0; name && ab_downgrade_names[i]; i++)
		if (strcmp(name, ab_downgrade_names[i]) == 0)
			return true;
	return false;
}

static const struct {
	const char *name;
	const char *what;
} downgrade_costs[] = {
	{ "landlock", "no Landlock at all: only the mount namespace keeps host files out of "
		      "reach (no second filesystem layer, no TCP port or scope restrictions)" },
	{ "landlock-refer", "Landlock ABI < 2: moving or linking files between directories is "
			    "always refused (EXDEV) -- stricter, but `mv` and some tools may fail" },
	{ "landlock-truncate", "Landlock ABI < 3: truncate() of files is not controlled by "
			       "Landlock (the read-only mounts still protect them)" },
	{ "landlock-net", "Landlock ABI < 4: TCP bind/connect to loopback ports is not "
			  "restricted (the network namespace still has no route out)" },
	{ "landlock-ioctl-dev", "Landlock ABI < 5: ioctl on device files is not controlled by "
				"Landlock (seccomp still blocks TIOCSTI and TIOCLINUX)" },
	{ "landlock-scope", "Landlock ABI < 6: abstract unix sockets and signals are not scoped "
			    "by Landlock (the network and pid namespaces still separate them)" },
	{ "cgroup-limits", "limits.memory and limits.pids are not applied (no delegated cgroup "
			   "v2); rlimits still are" },
};

const char *ab_downgrade_describe(const char *name)
{
	size_t len = strcspn(name, ":"); /* plan entries read "name: NOT ENFORCED ..." */

	for (size_t i = 0; i < AB_ARRAY_SIZE(downgrade_costs); i++)
		if (strlen(downgrade_costs[i].name) == len &&
		    strncmp(downgrade_costs[i].name, name, len) == 0)
			return downgrade_costs[i].what;
	if (strncmp(name, "landlock-", 9) == 0)
		return "a Landlock protection this kernel's ABI does not have";
	return "a protection this host cannot apply";
}

/* ------------------------------------------------------------------------ */
/* Small string helpers                                                     */
/* ------------------------------------------------------------------------ */

static bool is_alnum(char ch)
{
	return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9');
}

/* A string for a message, inside "..." (see ab_json_sanitize). */
static const char *quote(char *out, size_t outsz, const char *s)
{
	return ab_json_sanitize(out, outsz, s, true);
}

/* A path for a message (paths come from profiles too). */
#define SHOW(buf, s) ab_json_sanitize(buf, sizeof(buf), s, false)

/* Optimal string alignment distance (transpositions count 1); SIZE_MAX for
 * strings longer than 64 bytes. */
static size_t edit_distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	unsigned char d[65][65];
	if (la > 64 || lb > 64)
		return SIZE_MAX;
	for (size_t i = 0; i <= la; i++)
		d[i][0] = (unsigned char)i;
	for (size_t j = 0; j <= lb; j++)
		d[0][j] = (unsigned char)j;
	for (size_t i = 1; i <= la; i++) {
		for (size_t j = 1; j <= lb; j++) {
			unsigned v = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
			if (d[i - 1][j] + 1u < v)
				v = d[i - 1][j] + 1u;
			if (d[i][j - 1] + 1u < v)
				v = d[i][j - 1] + 1u;
			if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
			    d[i - 2][j - 2] + 1u < v)
				v = d[i - 2][j - 2] + 1u;
			d[i][j] = (unsigned char)v;
		}
	}
	return d[la][lb];
}

/* The closest candidate within edit distance 2 (first wins ties), or NULL. */
static const char *suggest(const char *word, const char *const *cands)
{
	const char *best = NULL;
	size_t bestd = 3;
	for (size_t i = 0; cands[i]; i++) {
		size_t dd = edit_distance(word, cands[i]);
		if (dd < bestd) {
			bestd = dd;
			best = cands[i];
		}
	}
	return best;
}

/* ------------------------------------------------------------------------ */
/* Variables and sizes                                                      */
/* ------------------------------------------------------------------------ */

static const char *const var_names[] = {
	"HOME",          "WORKSPACE",      "USER",           "XDG_CONFIG_HOME",
	"XDG_DATA_HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME", NULL,
};

/* $XDG_*_HOME if absolute, else HOME/fallback (the XDG spec), else NULL. */
static const char *xdg_dir(const char *val, const char *home, const char *fallback, char *tmp,
			   size_t tmpsz)
{
	if (val && val[0] == '/')
		return val;
	if (!home || home[0] != '/')
		return NULL;
	int n = snprintf(tmp, tmpsz, "%s/%s", home, fallback);
	return n > 0 && (size_t)n < tmpsz ? tmp : NULL;
}

static int var_lookup(const ab_vars *v, const char *name, size_t n, char *tmp, size_t tmpsz,
		      const char **val, ab_err *err)
{
	char nm[72], q[100];
	size_t i;
	memcpy(nm, name, n < 64 ? n : 64);
	nm[n < 64 ? n : 64] = '\0';
	for (i = 0; var_names[i]; i++)
		if (n == strlen(var_names[i]) && memcmp(name, var_names[i], n) == 0)
			break;
	switch (i) {
	case 0: *val = v->home; break;
	case 1: *val = v->workspace; break;
	case 2: *val = v->user; break;
	case 3: *val = xdg_dir(v->xdg_config_home, v->home, ".config", tmp, tmpsz); break;
	case 4: *val = xdg_dir(v->xdg_data_home, v->home, ".local/share", tmp, tmpsz); break;
	case 5: *val = xdg_dir(v->xdg_cache_home, v->home, ".cache", tmp, tmpsz); break;
	case 6: *val = xdg_dir(v->xdg_state_home, v->home, ".local/state", tmp, tmpsz); break;
	default: {
		const char *s = n <= 64 ? suggest(nm, var_names) : NULL, *more = n > 64 ? "..." : "";
		quote(q, sizeof(q), nm);
		if (s)
			return ab_fail(err, 0, "unknown variable ${%s%s} (did you mean ${%s}?)", q,
				       more, s);
		return ab_fail(err, 0,
			       "unknown variable ${%s%s} (known: ${HOME}, ${WORKSPACE}, ${USER}, "
			       "${XDG_CONFIG_HOME}, ${XDG_DATA_HOME}, ${XDG_CACHE_HOME}, "
			       "${XDG_STATE_HOME})",
			       q, more);
	}
	}
	if (!*val)
		return ab_fail(err, 0, "${%s} is not set", var_names[i]);
	return 0;
}

struct sbuf {
	char *s;
	size_t n, cap;
};

static int sb_add(struct sbuf *b, const char *s, size_t n)
{
	if (n > MAX_EXPANDED - b->n)
		return -E2BIG;
	if (!b->s || b->n + n + 1 > b->cap) {
		size_t cap = (b->n + n + 1) * 2;
		if (cap > MAX_EXPANDED + 1)
			cap = MAX_EXPANDED + 1;
		char *t = realloc(b->s, cap);
		if (!t)
			return -ENOMEM;
		b->s = t;
		b->cap = cap;
	}
	memcpy(b->s + b->n, s, n);
	b->n += n;
	b->s[b->n] = '\0';
	return 0;
}

int ab_profile_expand(const char *in, const ab_vars *vars, bool tilde, char **out, ab_err *err)
{
	struct sbuf b = { 0 };
	char tmp[PATH_MAX];
	const char *p = in;
	int r = sb_add(&b, "", 0);
	if (!vars)
		vars = &no_vars;
	if (r >= 0 && tilde && p[0] == '~' && (p[1] == '\0' || p[1] == '/')) {
		if (!vars->home)
			r = ab_fail(err, 0, "cannot expand \"~\": the home directory is unknown");
		else
			r = sb_add(&b, vars->home, strlen(vars->home));
		p++;
	}
	while (r >= 0 && *p) {
		const char *d = strstr(p, "${"), *e, *val = NULL;
		if (!d) {
			r = sb_add(&b, p, strlen(p));
			break;
		}
		r = sb_add(&b, p, (size_t)(d - p));
		if (r < 0)
			break;
		e = strchr(d + 2, '}');
		if (!e) {
			r = ab_fail(err, 0, "unterminated \"${\" (write ${NAME})");
			break;
		}
		r = var_lookup(vars, d + 2, (size_t)(e - d - 2), tmp, sizeof(tmp), &val, err);
		if (r >= 0)
			r = sb_add(&b, val, strlen(val));
		p = e + 1;
	}
	if (r == -E2BIG)
		r = ab_fail(err, 0, "too long after expansion (more than %d bytes)", MAX_EXPANDED);
	else if (r == -ENOMEM)
		r = ab_fail(err, ENOMEM, "expanding variables");
	if (r < 0) {
		free(b.s);
		return r;
	}
	*out = b.s;
	return 0;
}

int ab_profile_parse_size(const char *s, long long *out)
{
	unsigned long long v = 0;
	bool range = false;
	int shift = 0;
	size_t i = 0;
	if (!s)
		return -EINVAL;
	if (strcmp(s, "unlimited") == 0) {
		*out = LLONG_MAX;
		return 0;
	}
	if (s[0] < '0' || s[0] > '9')
		return -EINVAL;
	for (; s[i] >= '0' && s[i] <= '9'; i++) {
		unsigned d = (unsigned)(s[i] - '0');
		if (v > ((unsigned long long)LLONG_MAX - d) / 10)
			range = true;
		else
			v = v * 10 + d;
	}
	switch (s[i]) {
	case 'K': case 'k': shift = 10; i++; break;
	case 'M': case 'm': shift = 20; i++; break;
	case 'G': case 'g': shift = 30; i++; break;
	case 'T': case 't': shift = 40; i++; break;
	default: break;
	}
	if (s[i])
		return -EINVAL;
	if (range || v > ((unsigned long long)LLONG_MAX >> shift))
		return -ERANGE;
	*out = (long long)(v << shift);
	return 0;
}

/* ------------------------------------------------------------------------ */
/* Validation context and errors                                            */
/* ------------------------------------------------------------------------ */

typedef struct ctx {
	const char *fname; /* as shown in messages */
	const char *buf;
	size_t len;
	const ab_vars *vars;
	ab_profile *p;     /* this file's own values */
	ab_strv extends;   /* raw entries, in order */
	bool extends_array;
	ab_json_step path[MAX_JPATH];
	size_t depth;
	ab_err *err;
} ctx;

static void push_key(ctx *c, const char *key)
{
	if (c->depth < MAX_JPATH)
		c->path[c->depth] = (ab_json_step){ .key = key };
	c->depth++;
}

static void push_index(ctx *c, size_t i)
{
	if (c->depth < MAX_JPATH)
		c->path[c->depth] = (ab_json_step){ .key = NULL, .index = i };
	c->depth++;
}

static void pop(ctx *c)
{
	c->depth--;
}

static bool simple_key(const char *k)
{
	size_t n = 0;
	for (; k[n]; n++)
		if (!is_alnum(k[n]) && k[n] != '_' && k[n] != '-' && k[n] != '$')
			return false;
	return n > 0 && n <= 64;
}

/* "filesystem.read[2]", "env.set.EDITOR", `env.set["A B"]`. */
static void path_str(const ctx *c, size_t depth, char *out, size_t outsz)
{
	size_t o = 0;
	out[0] = '\0';
	for (size_t i = 0; i < depth && i < MAX_JPATH; i++) {
		const ab_json_step *s = &c->path[i];
		char q[100];
		int n;
		if (!s->key)
			n = snprintf(out + o, outsz - o, "[%zu]", s->index);
		else if (simple_key(s->key))
			n = snprintf(out + o, outsz - o, "%s%s", i ? "." : "", s->key);
		else
			n = snprintf(out + o, outsz - o, "[\"%s\"]", quote(q, sizeof(q), s->key));
		if (n < 0 || (size_t)n >= outsz - o) {
			out[o] = '\0';
			break;
		}
		o += (size_t)n;
	}
}

static int vfail(ctx *c, bool at_key, const char *fmt, va_list ap)
	__attribute__((format(printf, 3, 0)));
static int vfail(ctx *c, bool at_key, const char *fmt, va_list ap)
{
	char msg[1024], path[256];
	size_t line, col, d = c->depth < MAX_JPATH ? c->depth : MAX_JPATH;
	(void)ab_json_locate(c->buf, c->len, c->path, d, at_key, &line, &col);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	path_str(c, at_key && d > 0 ? d - 1 : d, path, sizeof(path));
	return ab_fail(c->err, 0, "%s:%zu:%zu: %s%s%s", c->fname, line, col, path,
		       path[0] ? ": " : "", msg);
}

/* An error about the value at the current path. */
static int fail(ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(ctx *c, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int r = vfail(c, false, fmt, ap);
	va_end(ap);
	return r;
}

/* An error about the key that ends the current path (message names the parent). */
static int fail_key(ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail_key(ctx *c, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int r = vfail(c, true, fmt, ap);
	va_end(ap);
	return r;
}

/* An error at a byte offset (bytes and syntax). */
static int fail_off(ctx *c, size_t off, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail_off(ctx *c, size_t off, const char *fmt, ...)
{
	char msg[1024];
	size_t line, col;
	va_list ap;
	ab_json_linecol(c->buf, c->len, off, &line, &col);
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return ab_fail(c->err, 0, "%s:%zu:%zu: %s", c->fname, line, col, msg);
}

static int oom(ctx *c)
{
	return ab_fail(c->err, ENOMEM, "%s: loading profile", c->fname);
}

static const char *jtype(const json_t *j)
{
	switch (json_typeof(j)) {
	case JSON_OBJECT: return "an object";
	case JSON_ARRAY: return "an array";
	case JSON_STRING: return "a string";
	case JSON_INTEGER: return "an integer";
	case JSON_REAL: return "a real number";
	case JSON_TRUE:
	case JSON_FALSE: return "a boolean";
	default: return "null";
	}
}

/* A non-empty string. */
static int get_str(ctx *c, const json_t *v, const char **s)
{
	if (!json_is_string(v))
		return fail(c, "expected a string, got %s", jtype(v));
	*s = json_string_value(v);
	if (!**s)
		return fail(c, "must not be an empty string");
	return 0;
}

/* Parse with jansson; json_pos.c places and words bad bytes and syntax errors. */
static int parse_json(ctx *c, json_t **out)
{
	json_error_t je;
	ab_json_diag d;
	if (ab_json_check_bytes(c->buf, c->len, &d))
		return fail_off(c, d.off, "%s", d.msg);
	*out = json_loadb(c->buf, c->len, JSON_REJECT_DUPLICATES, &je);
	if (!*out) {
		ab_json_syntax_error(c->buf, c->len, &je, &d);
		return fail_off(c, d.off, "%s", d.msg);
	}
	return 0;
}

/* ------------------------------------------------------------------------ */
/* Schema: one handler per key                                              */
/* ------------------------------------------------------------------------ */

typedef struct key_def key_def;
struct key_def {
	const char *name;
	int (*fn)(ctx *c, json_t *v, const key_def *d);
	size_t off;                                     /* target inside ab_profile */
	int (*item)(ctx *c, const char *s, char **out); /* lists: check/transform one entry */
	const key_def *sub;                             /* sections: their keys */
	int flags;
};
#define F_UNIQUE 1 /* lists: drop duplicates */
#define F_SIZE 2   /* limits: accept "8G" */
#define F_SHORT 4  /* lists: at most AB_PROFILE_MAX_SYSCALLS entries */
#define F_POSITIVE 8 /* limits: 0 is refused (a sandbox that cannot start) */
#define NO_TARGET SIZE_MAX

#define TARGET(c, d, type) ((type *)(void *)((char *)(c)->p + (d)->off))

static int parse_object(ctx *c, json_t *obj, const key_def *defs);

static bool env_name_ok(const char *s, size_t n)
{
	if (n == 0 || (s[0] >= '0' && s[0] <= '9'))
		return false;
	for (size_t i = 0; i < n; i++)
		if (!is_alnum(s[i]) && s[i] != '_')
			return false;
	return true;
}

static bool name_ok(const char *s)
{
	size_t n = strlen(s);
	/* a leading '+' marks an extension profile ("+npm"): still a name */
	size_t i0 = n && s[0] == '+' ? 1 : 0;
	if (n == i0 || n > 64 || !is_alnum(s[i0]))
		return false;
	for (size_t i = i0 + 1; i < n; i++)
		if (!is_alnum(s[i]) && !strchr("._+-", s[i]))
			return false;
	return true;
}

static bool is_pathlike(const char *s)
{
	size_t n = strlen(s);
	return strchr(s, '/') || (n >= 5 && strcmp(s + n - 5, ".json") == 0);
}

static int item_copy(ctx *c, const char *s, char **out)
{
	*out = strdup(s);
	return 0;
}

static int expand_or_fail(ctx *c, const char *s, bool tilde, char **out)
{
	ab_err e = { 0 };
	int r = ab_profile_expand(s, c->vars, tilde, out, &e);
	if (r == -ENOMEM)
		return oom(c);
	if (r < 0)
		return fail(c, "%s", e.msg);
	return 0;
}

static int item_path(ctx *c, const char *s, char **out)
{
	_cleanup_free_ char *x = NULL;
	char q[100];
	int r = expand_or_fail(c, s, true, &x);
	if (r < 0)
		return r;
	if (x[0] != '/')
		return fail(c,
			    "\"%s\" is not an absolute path (start it with /, ~/ or a variable "
			    "such as ${WORKSPACE})",
			    quote(q, sizeof(q), s));
	*out = ab_path_normalize(x);
	if (*out && strlen(*out) >= PATH_MAX) {
		free(*out);
		*out = NULL;
		return fail(c, "path too long (at most %d bytes)", PATH_MAX - 1);
	}
	return 0;
}

/* write and tmpfs: never "/" */
static int item_wpath(ctx *c, const char *s, char **out)
{
	int r = item_path(c, s, out);
	if (r >= 0 && *out && strcmp(*out, "/") == 0) {
		free(*out);
		*out = NULL;
		return fail(c, "refusing to make / writable");
	}
	return r;
}

/* protect, anchored: "/abs", "~/x", "${HOME}/x" (expanded like any path)
 * name that one path; kept absolute (with the '?' and the trailing '/'), so
 * the planner tells them from the relative entries by the leading '/'. */
static int item_anchored(ctx *c, const char *s, bool optional, char **out)
{
	size_t sl = strlen(s);
	bool dir = sl > 0 && s[sl - 1] == '/';
	_cleanup_free_ char *abs = NULL;
	int r = item_path(c, s, &abs);
	if (r < 0)
		return r;
	if (strcmp(abs, "/") == 0)
		return fail(c, "\"/\" cannot be protected (it is no writable grant)");
	*out = ab_asprintf("%s%s%s", optional ? "?" : "", abs, dir ? "/" : "");
	return *out ? 0 : oom(c);
}

/* protect: relative to each writable root (no "..", not expanded), or
 * anchored to one path (item_anchored). */
static int item_relpath(ctx *c, const char *s, char **out)
{
	char q[100];
	size_t n = 0;
	quote(q, sizeof(q), s);
	/* a leading '?' means: protect it if it exists, reserve nothing if not */
	bool optional = s[0] == '?';
	if (optional)
		s++;
	if (s[0] == '/' || s[0] == '~' || s[0] == '$')
		return item_anchored(c, s, optional, out);
	if (strstr(s, "${"))
		return fail(c, "\"%s\": a relative protect entry is not expanded (start it with a "
			    "variable, ~/ or / to name one path)", q);
	if (strlen(s) >= PATH_MAX)
		return fail(c, "path too long (at most %d bytes)", PATH_MAX - 1);
	_cleanup_free_ char *o = malloc(strlen(s) + 3);
	if (!o)
		return oom(c);
	if (optional)
		o[n++] = '?';
	for (const char *p = s; *p;) {
		size_t l;
		while (*p == '/')
			p++;
		l = strcspn(p, "/");
		if (l == 2 && p[0] == '.' && p[1] == '.')
			return fail(c, "\"%s\": \"..\" is not allowed", q);
		if (l > 0 && !(l == 1 && p[0] == '.')) {
			if (n > (optional ? 1u : 0u)) /* "?a/b", never "?/a/b" (anchored) */
				o[n++] = '/';
			memcpy(o + n, p, l);
			n += l;
		}
		p += l;
	}
	if (n == (optional ? 1u : 0u))
		return fail(c, "\"%s\" names the writable root itself", q);
	/* a trailing '/' says the path is a directory: kept for the planner */
	if (s[strlen(s) - 1] == '/')
		o[n++] = '/';
	o[n] = '\0';
	*out = TAKE_PTR(o);
	return 0;
}

static int item_envpat(ctx *c, const char *s, char **out)
{
	char q[100];
	size_t n = strlen(s);
	if (strcmp(s, "*") == 0)
		return fail(c, "\"*\" would pass the whole environment; name variables or "
			    "prefixes such as \"LC_*\"");
	if (s[n - 1] == '*')
		n--;
	if (!env_name_ok(s, n))
		return fail(c, "invalid variable name or pattern \"%s\" (letters, digits and _, "
			    "not starting with a digit, optionally ending in *)",
			    quote(q, sizeof(q), s));
	*out = strdup(s);
	return 0;
}

static int item_syscall(ctx *c, const char *s, char **out)
{
	char q[100];
	size_t n = strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789_");
	if (s[n] || n > 64)
		return fail(c, "invalid syscall name \"%s\" (at most 64 of a-z 0-9 _)",
			    quote(q, sizeof(q), s));
	if (c->vars->syscall_check && c->depth >= 2 && c->path[c->depth - 2].key) {
		ab_err e = { 0 };
		if (c->vars->syscall_check(c->path[c->depth - 2].key, s, &e) < 0) {
			int r = fail(c, "%s", e.msg);
			if (e.hint[0])
				ab_err_hint(c->err, "%s", e.hint);
			return r;
		}
	}
	*out = strdup(s);
	return 0;
}

static int item_downgrade(ctx *c, const char *s, char **out)
{
	char q[100];
	if (!ab_downgrade_known(s)) {
		const char *sug = suggest(s, ab_downgrade_names);
		quote(q, sizeof(q), s);
		if (sug)
			return fail(c, "unknown downgrade \"%s\" (did you mean \"%s\"?)", q, sug);
		return fail(c, "unknown downgrade \"%s\" (known: landlock, landlock-refer, "
			    "landlock-truncate, landlock-net, landlock-ioctl-dev, landlock-scope, "
			    "cgroup-limits, seccomp-user-notif)", q);
	}
	*out = strdup(s);
	return 0;
}

static int check_count(ctx *c, size_t n, int max)
{
	if (n > (size_t)max)
		return fail(c, "too many entries (%zu, at most %d)", n, max);
	return 0;
}

static int parse_list_into(ctx *c, json_t *v, const key_def *d, ab_strv *dst);

static int parse_list(ctx *c, json_t *v, const key_def *d)
{
	return parse_list_into(c, v, d, TARGET(c, d, ab_strv));
}

static int parse_list_into(ctx *c, json_t *v, const key_def *d, ab_strv *dst)
{
	json_t *e;
	size_t i;
	if (!json_is_array(v))
		return fail(c, "expected an array, got %s", jtype(v));
	int max = (d->flags & F_SHORT) ? AB_PROFILE_MAX_SYSCALLS : AB_PROFILE_MAX_LIST;
	if (check_count(c, json_array_size(v), max) < 0)
		return -EINVAL;
	json_array_foreach(v, i, e) {
		const char *s = NULL;
		char *out = NULL;
		int r;
		push_index(c, i);
		r = get_str(c, e, &s);
		if (r >= 0)
			r = d->item(c, s, &out);
		pop(c);
		if (r < 0)
			return r;
		if (!out)
			return oom(c);
		if ((d->flags & F_UNIQUE) && ab_strv_contains(dst, out)) {
			free(out);
			continue;
		}
		if (ab_strv_push_take(dst, out) < 0)
			return oom(c);
	}
	return 0;
}

static int parse_section(ctx *c, json_t *v, const key_def *d)
{
	return parse_object(c, v, d->sub);
}

static int parse_noop(ctx *c, json_t *v, const key_def *d)
{
	return 0;
}

/* description, $schema (checked, ignored) */
static int parse_text(ctx *c, json_t *v, const key_def *d)
{
	const char *s;
	int r = get_str(c, v, &s);
	if (r < 0 || d->off == NO_TARGET)
		return r;
	char **dst = TARGET(c, d, char *);
	free(*dst);
	*dst = strdup(s);
	return *dst ? 0 : oom(c);
}

static int parse_hostname(ctx *c, json_t *v, const key_def *d)
{
	const char *s;
	char q[100];
	int r = get_str(c, v, &s);
	if (r < 0)
		return r;
	size_t n = strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-.");
	if (s[n] || n > 64)
		return fail(c, "invalid hostname \"%s\" (1 to 64 of A-Z a-z 0-9 - .)",
			    quote(q, sizeof(q), s));
	free(c->p->hostname);
	c->p->hostname = strdup(s);
	return c->p->hostname ? 0 : oom(c);
}

static int extends_entry(ctx *c, const json_t *e)
{
	const char *s;
	char q[100];
	int r = get_str(c, e, &s);
	if (r < 0)
		return r;
	if (!is_pathlike(s) && !name_ok(s))
		return fail(c, "invalid profile name \"%s\" (%s; or a path containing /)",
			    quote(q, sizeof(q), s), NAME_RULE);
	return ab_strv_push(&c->extends, s) < 0 ? oom(c) : 0;
}

static int parse_extends(ctx *c, json_t *v, const key_def *d)
{
	json_t *e;
	size_t i;
	if (json_is_string(v))
		return extends_entry(c, v);
	if (!json_is_array(v))
		return fail(c, "expected a profile name, a path or an array of them, got %s",
			    jtype(v));
	if (check_count(c, json_array_size(v), AB_PROFILE_MAX_LIST) < 0)
		return -EINVAL;
	c->extends_array = true;
	json_array_foreach(v, i, e) {
		push_index(c, i);
		int r = extends_entry(c, e);
		pop(c);
		if (r < 0)
			return r;
	}
	return 0;
}

static int add_port(ab_profile *p, long port)
{
	for (size_t i = 0; i < p->loopback.nports; i++)
		if (p->loopback.ports[i] == port)
			return 0;
	long *n = realloc(p->loopback.ports, (p->loopback.nports + 1) * sizeof(long));
	if (!n)
		return -ENOMEM;
	n[p->loopback.nports++] = port;
	p->loopback.ports = n;
	return 0;
}

static int parse_ports(ctx *c, json_t *v, const key_def *d)
{
	char q[100];
	json_t *e;
	size_t i;
	if (json_is_string(v) && strcmp(json_string_value(v), "any") == 0) {
		c->p->loopback.any = true;
		return 0;
	}
	if (json_is_string(v))
		return fail(c, "expected an array of ports or \"any\", got \"%s\"",
			    quote(q, sizeof(q), json_string_value(v)));
	if (!json_is_array(v))
		return fail(c, "expected an array of ports or \"any\", got %s", jtype(v));
	if (check_count(c, json_array_size(v), AB_PROFILE_MAX_LIST) < 0)
		return -EINVAL;
	json_array_foreach(v, i, e) {
		int r = 0;
		push_index(c, i);
		if (!json_is_integer(e))
			r = fail(c, "expected a port number (1-65535), got %s", jtype(e));
		else if (json_integer_value(e) < 1 || json_integer_value(e) > 65535)
			r = fail(c, "port %lld out of range (1-65535)",
				 (long long)json_integer_value(e));
		pop(c);
		if (r < 0)
			return r;
		if (add_port(c->p, (long)json_integer_value(e)) < 0)
			return oom(c);
	}
	return 0;
}

static int kv_put(ab_kv **arr, size_t *n, const char *key, const char *val)
{
	char *v = strdup(val);
	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < *n; i++) {
		if (strcmp((*arr)[i].key, key) == 0) {
			free((*arr)[i].val);
			(*arr)[i].val = v;
			return 0;
		}
	}
	char *k = strdup(key);
	ab_kv *a = k ? realloc(*arr, (*n + 1) * sizeof(ab_kv)) : NULL;
	if (!a) {
		free(k);
		free(v);
		return -ENOMEM;
	}
	a[(*n)++] = (ab_kv){ .key = k, .val = v };
	*arr = a;
	return 0;
}

static int kv_set(ab_profile *p, const char *key, const char *val)
{
	return kv_put(&p->env.set, &p->env.nset, key, val);
}

static int env_set_one(ctx *c, const char *k, const json_t *val)
{
	_cleanup_free_ char *x = NULL;
	char q[100];
	int r;
	if (!env_name_ok(k, strlen(k)))
		return fail_key(c, "invalid variable name \"%s\" (letters, digits and _, not "
				"starting with a digit)", quote(q, sizeof(q), k));
	if (!json_is_string(val))
		return fail(c, "expected a string, got %s", jtype(val));
	r = expand_or_fail(c, json_string_value(val), true, &x);
	if (r < 0)
		return r;
	return kv_set(c->p, k, x) < 0 ? oom(c) : 0;
}

/* An object of NAME: value entries, each handled by one(), errors located at
 * the entry; `what` names the object in the type error. */
static int each_entry(ctx *c, json_t *v, const char *what,
		      int (*one)(ctx *c, const char *k, const json_t *val))
{
	const char *k;
	json_t *val;
	if (!json_is_object(v))
		return fail(c, "expected %s, got %s", what, jtype(v));
	if (check_count(c, json_object_size(v), AB_PROFILE_MAX_LIST) < 0)
		return -EINVAL;
	json_object_foreach(v, k, val) {
		push_key(c, k);
		int r = one(c, k, val);
		pop(c);
		if (r < 0)
			return r;
	}
	return 0;
}

static int parse_env_set(ctx *c, json_t *v, const key_def *d)
{
	return each_entry(c, v, "an object", env_set_one);
}

static int zero_limit(ctx *c)
{
	return fail(c, "must be at least 1 (0 leaves the sandbox no memory or no process to "
		       "start with; leave it out for no limit)");
}

static int parse_limit(ctx *c, json_t *v, const key_def *d)
{
	long long *dst = TARGET(c, d, long long);
	const char *want = (d->flags & F_SIZE)
		? "expected a non-negative integer, a size such as \"8G\" or \"unlimited\""
		: "expected a non-negative integer or \"unlimited\"";
	const char *s;
	char q[100];
	int r;
	if (json_is_integer(v)) {
		if (json_integer_value(v) < 0)
			return fail(c, "%s, got %lld", want, (long long)json_integer_value(v));
		*dst = (long long)json_integer_value(v);
		return *dst == 0 && (d->flags & F_POSITIVE) ? zero_limit(c) : 0;
	}
	if (!json_is_string(v))
		return fail(c, "%s, got %s", want, jtype(v));
	s = json_string_value(v);
	quote(q, sizeof(q), s);
	if (strcmp(s, "unlimited") == 0) {
		*dst = LLONG_MAX;
		return 0;
	}
	if (!(d->flags & F_SIZE))
		return fail(c, "%s, got \"%s\"", want, q);
	r = ab_profile_parse_size(s, dst);
	if (r == 0 && *dst == 0 && (d->flags & F_POSITIVE))
		return zero_limit(c);
	if (r == -ERANGE)
		return fail(c, "size \"%s\" is too large", q);
	if (r < 0)
		return fail(c, "invalid size \"%s\" (use a number with an optional K, M, G or T "
			    "suffix, or \"unlimited\")", q);
	return 0;
}

/* ---- network ---- */

static int item_netrule_in(ctx *c, const char *s, char **out, bool priv)
{
	ab_netrule r;
	ab_err e = { 0 };
	char q[100];
	if (ab_netrule_parse(s, &r, &e) < 0)
		return fail(c, "invalid %s", e.msg);
	if (priv && r.wildcard)
		return fail(c, "invalid network rule \"%s\": network.private names exact "
			    "destinations, no wildcards", quote(q, sizeof(q), s));
	*out = strdup(r.text);
	return 0;
}

static int item_netrule(ctx *c, const char *s, char **out)
{
	return item_netrule_in(c, s, out, false);
}

static int item_netrule_private(ctx *c, const char *s, char **out)
{
	return item_netrule_in(c, s, out, true);
}

/* "ADDR" or "ADDR:PORT" (IPv4 dotted quad or [IPv6]); the canonical form
 * goes to out. */
int ab_profile_parse_hostaddr(const char *s, char *out, size_t outlen, unsigned *port)
{
	char host[AB_HOST_BUF];
	const char *colon = NULL;
	*port = 0;
	if (s[0] == '[') {
		const char *rb = strchr(s, ']');
		if (!rb)
			return -EINVAL;
		if (rb[1] == ':')
			colon = rb + 1;
		else if (rb[1])
			return -EINVAL;
	} else {
		colon = strchr(s, ':');
	}
	size_t hl = colon ? (size_t)(colon - s) : strlen(s);
	if (hl == 0 || hl >= sizeof(host))
		return -EINVAL;
	memcpy(host, s, hl);
	host[hl] = '\0';
	if (colon) {
		const char *ps = colon + 1;
		unsigned long v = 0;
		if (!*ps || *ps == '0' || strlen(ps) > 5)
			return -EINVAL;
		for (; *ps; ps++) {
			if (*ps < '0' || *ps > '9')
				return -EINVAL;
			v = v * 10 + (unsigned long)(*ps - '0');
		}
		if (v < 1 || v > 65535)
			return -EINVAL;
		*port = (unsigned)v;
	}
	int k = ab_host_normalize(host, out, outlen);
	if (k != AB_HOST_IPV4 && k != AB_HOST_IPV6)
		return -EINVAL;
	return k;
}

static int net_host_one(ctx *c, const char *k, const json_t *val)
{
	char name[AB_HOST_BUF], addr[AB_HOST_BUF], q[100];
	unsigned port;
	int kind = ab_host_normalize(k, name, sizeof(name));
	if (kind != AB_HOST_NAME)
		return fail_key(c, "invalid host name \"%s\" (%s)", quote(q, sizeof(q), k),
				kind < 0 ? ab_host_strerror(kind) : "an address needs no mapping");
	if (!json_is_string(val))
		return fail(c, "expected an address string such as \"127.0.0.1\" or "
			    "\"127.0.0.1:8443\", got %s", jtype(val));
	const char *s = json_string_value(val);
	if (ab_profile_parse_hostaddr(s, addr, sizeof(addr), &port) < 0)
		return fail(c, "invalid address \"%s\" (expected IPV4, IPV4:PORT, [IPV6] or "
			    "[IPV6]:PORT)", quote(q, sizeof(q), s));
	char canon[AB_HOST_BUF + 16];
	if (port)
		snprintf(canon, sizeof(canon), "%s:%u", addr, port);
	else
		snprintf(canon, sizeof(canon), "%s", addr);
	return kv_put(&c->p->net.hosts, &c->p->net.nhosts, name, canon) < 0 ? oom(c) : 0;
}

static int parse_net_hosts(ctx *c, json_t *v, const key_def *d)
{
	return each_entry(c, v, "an object of name: address", net_host_one);
}

static int parse_net_transparent(ctx *c, json_t *v, const key_def *d)
{
	if (!json_is_boolean(v))
		return fail(c, "expected true or false, got %s", jtype(v));
	c->p->net.transparent = json_is_true(v) ? 1 : 0;
	return 0;
}

/* audit.exec / audit.denials / terminal.clipboard: an int field, -1 unset */
static int parse_audit_bool(ctx *c, json_t *v, const key_def *d)
{
	if (!json_is_boolean(v))
		return fail(c, "expected true or false, got %s", jtype(v));
	*(int *)((char *)c->p + d->off) = json_is_true(v) ? 1 : 0;
	return 0;
}

static int parse_net_port(ctx *c, json_t *v, const key_def *d)
{
	if (!json_is_integer(v))
		return fail(c, "expected a port number (1-65535), got %s", jtype(v));
	if (json_integer_value(v) < 1 || json_integer_value(v) > 65535)
		return fail(c, "port %lld out of range (1-65535)", (long long)json_integer_value(v));
	if (json_integer_value(v) == 53)
		return fail(c, "port 53 is the sandbox's DNS responder; choose another proxy port");
	c->p->net.proxy_port = (long)json_integer_value(v);
	return 0;
}

/* A scalar absolute path (expanded, normalised) into *dst. */
static int set_path(ctx *c, json_t *v, char **dst)
{
	const char *s;
	char *out = NULL;
	int r = get_str(c, v, &s);
	if (r < 0 || (r = item_path(c, s, &out)) < 0)
		return r;
	if (!out)
		return oom(c);
	free(*dst);
	*dst = out;
	return 0;
}

static int parse_net_log(ctx *c, json_t *v, const key_def *d)
{
	return set_path(c, v, &c->p->net.log);
}

static int parse_net_upstream(ctx *c, json_t *v, const key_def *d)
{
	const char *s;
	char q[100], host[AB_HOST_BUF];
	unsigned port;
	int r = get_str(c, v, &s);
	if (r < 0)
		return r;
	if (strcmp(s, "env") != 0 && ab_upstream_proxy_parse(s, host, sizeof(host), &port) < 0) {
		/* user:password@ is never echoed: errors reach terminals and CI logs */
		const char *auth = strstr(s, "://");
		auth = auth ? auth + 3 : s;
		const char *at = memchr(auth, '@', strcspn(auth, "/"));
		if (at) {
			char scheme[24], qs[40];
			snprintf(scheme, sizeof(scheme), "%.*s", (int)(auth - s), s);
			return fail(c, "invalid upstream proxy \"%s***%s\": credentials in the "
				       "URL are not supported (\"env\" or \"http://HOST:PORT\")",
				    quote(qs, sizeof(qs), scheme), quote(q, sizeof(q), at));
		}
		return fail(c, "invalid upstream proxy \"%s\" (\"env\" or \"http://HOST:PORT\")",
			    quote(q, sizeof(q), s));
	}
	free(c->p->net.upstream_proxy);
	c->p->net.upstream_proxy = strdup(s);
	return c->p->net.upstream_proxy ? 0 : oom(c);
}

static int parse_net_cafile(ctx *c, json_t *v, const key_def *d)
{
	return set_path(c, v, &c->p->net.ca_file);
}

/* "forward" or "refuse" (secrets.NAME.elsewhere, network.placeholder_elsewhere) */
static int get_elsewhere(ctx *c, json_t *v, int *out)
{
	const char *s = json_string_value(v);
	char q[100];
	if (!json_is_string(v))
		return fail(c, "expected \"forward\" or \"refuse\", got %s", jtype(v));
	if (strcmp(s, "forward") == 0)
		*out = AB_ELSEWHERE_FORWARD;
	else if (strcmp(s, "refuse") == 0)
		*out = AB_ELSEWHERE_REFUSE;
	else
		return fail(c, "expected \"forward\" or \"refuse\", got \"%s\"",
			    quote(q, sizeof(q), s));
	return 0;
}

static int parse_net_elsewhere(ctx *c, json_t *v, const key_def *d)
{
	return get_elsewhere(c, v, &c->p->net.placeholder_elsewhere);
}

/* ---- secrets ---- */

static void psecret_clear(struct ab_profile_secret *x)
{
	free(x->name);
	free(x->src_env);
	free(x->src_file);
	ab_strv_free(&x->src_cmd);
	ab_strv_free(&x->hosts);
	ab_strv_free(&x->places);
	free(x->ph_prefix);
	free(x->env_name);
	free(x->src_pointer);
	ab_strv_free(&x->optional_unless);
	ab_strv_free(&x->render_keep);
	free(x->hint);
	free(x->rot_host);
	free(x->rot_path);
	free(x->rot_field);
	ab_strv_free(&x->rot_stamp_ptr);
	ab_strv_free(&x->rot_stamp_kind);
	memset(x, 0, sizeof(*x));
}

static int secret_from(ctx *c, json_t *v, struct ab_profile_secret *x)
{
	const char *k;
	json_t *e;
	char q[100];
	bool json = json_is_object(v) && json_object_get(v, "json");
	if (!json_is_object(v) || json_object_size(v) != (json ? 2 : 1) ||
	    (json && !json_object_get(v, "pointer")))
		return fail(c, "expected one of {\"env\": NAME}, {\"file\": PATH}, "
			    "{\"command\": [ARGV...]}, {\"json\": PATH, \"pointer\": \"/a/b\"}");
	json_object_foreach(v, k, e) {
		int r = 0;
		push_key(c, k);
		if (strcmp(k, "json") == 0) {
			const char *s;
			x->src = AB_PSECRET_JSON;
			if ((r = get_str(c, e, &s)) == 0)
				r = item_path(c, s, &x->src_file);
		} else if (strcmp(k, "pointer") == 0 && json) {
			const char *s;
			if ((r = get_str(c, e, &s)) == 0 && (!s[0] || ab_json_pointer_check(s) < 0))
				r = fail(c, "invalid JSON pointer \"%s\" (\"/key/key\", ~0 for ~ and ~1 "
					 "for /, at most %d bytes and %d keys)", quote(q, sizeof(q), s),
					 AB_JSON_POINTER_MAX, AB_JSON_POINTER_DEPTH);
			if (r == 0 && !(x->src_pointer = strdup(s)))
				r = oom(c);
		} else if (strcmp(k, "env") == 0) {
			const char *s;
			x->src = AB_PSECRET_ENV;
			if ((r = get_str(c, e, &s)) == 0 && !env_name_ok(s, strlen(s)))
				r = fail(c, "invalid variable name \"%s\"", quote(q, sizeof(q), s));
			if (r == 0 && !(x->src_env = strdup(s)))
				r = oom(c);
		} else if (strcmp(k, "file") == 0) {
			const char *s;
			x->src = AB_PSECRET_FILE;
			if ((r = get_str(c, e, &s)) == 0)
				r = item_path(c, s, &x->src_file);
		} else if (strcmp(k, "command") == 0) {
			x->src = AB_PSECRET_COMMAND;
			key_def d = {.name = "command", .fn = parse_list, .item = item_copy};
			if (!json_is_array(e) || json_array_size(e) == 0)
				r = fail(c, "expected a non-empty array (argv)");
			else
				r = parse_list_into(c, e, &d, &x->src_cmd);
		} else {
			r = fail_key(c, "unknown secret source \"%s\" (env, file, command or json)",
				     quote(q, sizeof(q), k));
		}
		pop(c);
		if (r < 0)
			return r;
	}
	return 0;
}

static int item_place(ctx *c, const char *s, char **out)
{
	char q[100];
	bool ok = strcmp(s, "query") == 0 || strcmp(s, "body") == 0;
	if (!ok && strncmp(s, "header:", 7) == 0 && s[7]) {
		ok = strlen(s + 7) <= 64;
		for (const char *p = s + 7; ok && *p; p++)
			ok = is_alnum(*p) || strchr("!#$%&'*+-.^_`|~", *p);
	}
	if (!ok)
		return fail(c, "invalid place \"%s\" (\"header:NAME\", \"query\" or \"body\")",
			    quote(q, sizeof(q), s));
	*out = strdup(s);
	return 0;
}

static int secret_placeholder(ctx *c, json_t *v, struct ab_profile_secret *x)
{
	const char *k;
	json_t *e;
	char q[100];
	if (!json_is_object(v))
		return fail(c, "expected an object {\"prefix\": ..., \"length\": ...}, got %s",
			    jtype(v));
	json_object_foreach(v, k, e) {
		int r = 0;
		push_key(c, k);
		if (strcmp(k, "prefix") == 0) {
			const char *s;
			if ((r = get_str(c, e, &s)) == 0) {
				size_t n = strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
						     "0123456789_-");
				if (s[n] || n > 32)
					r = fail(c, "invalid prefix \"%s\" (up to 32 of A-Z a-z 0-9 _ -)",
						 quote(q, sizeof(q), s));
				else if (!(x->ph_prefix = strdup(s)))
					r = oom(c);
			}
		} else if (strcmp(k, "length") == 0) {
			if (!json_is_integer(e) || json_integer_value(e) < 22 ||
			    json_integer_value(e) > 4096)
				r = fail(c, "expected a length from 22 to 4096");
			else
				x->ph_len = (long)json_integer_value(e);
		} else if (strcmp(k, "jwt") == 0 || strcmp(k, "stable") == 0) {
			if (json_is_boolean(e))
				*(k[0] == 'j' ? &x->ph_jwt : &x->ph_stable) = json_is_true(e);
			else
				r = fail(c, "expected true or false, got %s", jtype(e));
		} else {
			r = fail_key(c, "unknown key \"%s\" (prefix, length, jwt, stable)",
				     quote(q, sizeof(q), k));
		}
		pop(c);
		if (r < 0)
			return r;
	}
	if (x->ph_jwt && (x->ph_prefix || x->ph_len))
		return fail(c, "a JWT placeholder keeps the shape of the value: no \"prefix\" or "
			    "\"length\" with \"jwt\"");
	if (x->ph_jwt && x->ph_stable)
		return fail(c, "a JWT placeholder is drawn anew each run: no \"stable\" with "
			    "\"jwt\"");
	return 0;
}

/* "stamp": {"/json/pointer": "now" | "expires_at_ms", ...} (credfile.h) */
static int rotate_stamp(ctx *c, json_t *v, struct ab_profile_secret *x)
{
	const char *k;
	json_t *e;
	char q[100];
	if (!json_is_object(v) || !json_object_size(v) ||
	    json_object_size(v) > AB_CREDFILE_STAMPS_PER_SECRET)
		return fail(c, "expected {\"/pointer\": \"now\" or \"expires_at_ms\"} (1 to %d)",
			    AB_CREDFILE_STAMPS_PER_SECRET);
	json_object_foreach(v, k, e) {
		int r = 0;
		const char *s = NULL;
		push_key(c, k);
		if (!k[0] || ab_json_pointer_check(k) < 0)
			r = fail_key(c, "invalid JSON pointer \"%s\"", quote(q, sizeof(q), k));
		else if ((r = get_str(c, e, &s)) == 0 && !ab_credfile_stamp_kind_ok(s))
			r = fail(c, "unknown stamp \"%s\" (now, expires_at_ms)", quote(q, sizeof(q), s));
		if (r == 0 && (ab_strv_push(&x->rot_stamp_ptr, k) < 0 ||
			       ab_strv_push(&x->rot_stamp_kind, s) < 0))
			r = oom(c);
		pop(c);
		if (r < 0)
			return r;
	}
	return 0;
}

/* "rotate": {"url": "https://HOST[:PORT]/PATH", "field": "/json/pointer",
 *            "stamp": {...}} */
static int secret_rotate(ctx *c, json_t *v, struct ab_profile_secret *x)
{
	const char *k;
	json_t *e;
	char q[100];
	if (!json_is_object(v) || !json_object_get(v, "url") || !json_object_get(v, "field"))
		return fail(c, "expected {\"url\": \"https://HOST/PATH\", \"field\": \"/pointer\"}");
	json_object_foreach(v, k, e) {
		int r = 0;
		const char *s = NULL;
		push_key(c, k);
		if (strcmp(k, "url") == 0) {
			if ((r = get_str(c, e, &s)) == 0) {
				const char *h = strncmp(s, "https://", 8) == 0 ? s + 8 : NULL;
				const char *slash = h ? strchr(h, '/') : NULL;
				ab_netrule rule;
				ab_err ne = {0};
				char host[AB_HOST_INPUT_MAX + 8];
				size_t hl = slash ? (size_t)(slash - h) : 0;
				bool ok = slash && hl && hl < sizeof(host) && !strpbrk(slash, "?# ") &&
					  strlen(slash) <= 1024;
				if (ok) {
					memcpy(host, h, hl);
					host[hl] = '\0';
					ok = ab_netrule_parse(host, &rule, &ne) == 0 && !rule.wildcard;
				}
				if (!ok)
					r = fail(c, "invalid token endpoint \"%s\" (https://HOST[:PORT]/PATH, "
						 "no wildcard, no query)", quote(q, sizeof(q), s));
				else if (!(x->rot_host = strdup(rule.text)) ||
					 !(x->rot_path = strdup(slash)))
					r = oom(c);
			}
		} else if (strcmp(k, "field") == 0) {
			if ((r = get_str(c, e, &s)) == 0 && (!s[0] || ab_json_pointer_check(s) < 0))
				r = fail(c, "invalid JSON pointer \"%s\"", quote(q, sizeof(q), s));
			if (r == 0 && !(x->rot_field = strdup(s)))
				r = oom(c);
		} else if (strcmp(k, "stamp") == 0) {
			r = rotate_stamp(c, e, x);
		} else {
			r = fail_key(c, "unknown key \"%s\" (url, field, stamp)", quote(q, sizeof(q), k));
		}
		pop(c);
		if (r < 0)
			return r;
	}
	return 0;
}

/* "render": true, or {"keep": ["/pointer", ...]} (only those parts are shown). */
static int secret_render(ctx *c, json_t *e, struct ab_profile_secret *x)
{
	char q[100];
	if (json_is_boolean(e)) {
		x->render = json_is_true(e);
		return 0;
	}
	json_t *keep = json_is_object(e) ? json_object_get(e, "keep") : NULL;
	if (!keep || json_object_size(e) != 1 || !json_is_array(keep) || !json_array_size(keep) ||
	    json_array_size(keep) > 32)
		return fail(c, "expected true, false or {\"keep\": [\"/pointer\", ...]} (1 to 32)");
	size_t i;
	json_t *it;
	json_array_foreach(keep, i, it) {
		const char *s = json_string_value(it);
		if (!s || !s[0] || ab_json_pointer_check(s) < 0)
			return fail(c, "invalid JSON pointer \"%s\" in keep",
				    quote(q, sizeof(q), s ? s : "?"));
		if (ab_strv_push(&x->render_keep, s) < 0)
			return oom(c);
	}
	x->render = true;
	return 0;
}

/* "optional": true, or the names of secrets of which one must be loaded. */
static int secret_optional(ctx *c, json_t *e, struct ab_profile_secret *x)
{
	if (json_is_boolean(e)) {
		x->optional = json_is_true(e);
		return 0;
	}
	if (!json_is_array(e) || !json_array_size(e))
		return fail(c, "expected true, false or a non-empty array of secret names");
	size_t i;
	json_t *it;
	json_array_foreach(e, i, it) {
		const char *s = json_string_value(it);
		if (!s || !env_name_ok(s, strlen(s)) || strlen(s) > 64)
			return fail(c, "expected secret names");
		if (ab_strv_push(&x->optional_unless, s) < 0)
			return oom(c);
	}
	x->optional = true;
	return 0;
}

static int secret_one(ctx *c, const char *name, json_t *v, struct ab_profile_secret *x)
{
	const char *k;
	json_t *e;
	char q[100];
	if (!env_name_ok(name, strlen(name)) || strlen(name) > 64)
		return fail_key(c, "invalid secret name \"%s\" (letters, digits and _, not starting "
				"with a digit, at most 64)", quote(q, sizeof(q), name));
	if (!json_is_object(v))
		return fail(c, "expected an object, got %s", jtype(v));
	if (!(x->name = strdup(name)))
		return oom(c);
	bool have_from = false, have_hosts = false;
	json_object_foreach(v, k, e) {
		int r = 0;
		push_key(c, k);
		if (strcmp(k, "from") == 0) {
			r = secret_from(c, e, x);
			have_from = true;
		} else if (strcmp(k, "hosts") == 0) {
			key_def d = {.name = "hosts", .fn = parse_list, .item = item_netrule,
				     .flags = F_UNIQUE};
			r = parse_list_into(c, e, &d, &x->hosts);
			have_hosts = x->hosts.n > 0;
		} else if (strcmp(k, "in") == 0) {
			key_def d = {.name = "in", .fn = parse_list, .item = item_place,
				     .flags = F_UNIQUE};
			r = parse_list_into(c, e, &d, &x->places);
		} else if (strcmp(k, "placeholder") == 0) {
			r = secret_placeholder(c, e, x);
		} else if (strcmp(k, "env") == 0) {
			if (json_is_false(e)) {
				r = (x->env_name = strdup("")) ? 0 : oom(c);
			} else if (json_is_string(e) &&
				   env_name_ok(json_string_value(e), strlen(json_string_value(e)))) {
				r = (x->env_name = strdup(json_string_value(e))) ? 0 : oom(c);
			} else {
				r = fail(c, "expected a variable name or false");
			}
		} else if (strcmp(k, "mask_in_body") == 0) {
			if (json_is_boolean(e))
				x->mask_in_body = json_is_true(e);
			else
				r = fail(c, "expected true or false, got %s", jtype(e));
		} else if (strcmp(k, "elsewhere") == 0) {
			r = get_elsewhere(c, e, &x->elsewhere);
		} else if (strcmp(k, "optional") == 0) {
			r = secret_optional(c, e, x);
		} else if (strcmp(k, "hint") == 0) {
			const char *s;
			if ((r = get_str(c, e, &s)) == 0 && strlen(s) > 300)
				r = fail(c, "a hint of at most 300 bytes");
			if (r == 0 && !(x->hint = strdup(s)))
				r = oom(c);
		} else if (strcmp(k, "render") == 0) {
			r = secret_render(c, e, x);
		} else if (strcmp(k, "rotate") == 0) {
			r = secret_rotate(c, e, x);
		} else {
			r = fail_key(c, "unknown key \"%s\" (from, hosts, in, placeholder, env, "
				     "mask_in_body, elsewhere, optional, hint, render, rotate)",
				     quote(q, sizeof(q), k));
		}
		pop(c);
		if (r < 0)
			return r;
	}
	if (!have_from)
		return fail(c, "secret %s: missing \"from\" (where agentbox reads the value)", name);
	if (!have_hosts)
		return fail(c, "secret %s: missing \"hosts\" (where the value may be sent)", name);
	if (x->render && x->src != AB_PSECRET_JSON)
		return fail(c, "secret %s: \"render\" needs a {\"json\": ...} source", name);
	if (x->rot_host && x->src != AB_PSECRET_JSON)
		return fail(c, "secret %s: \"rotate\" needs a {\"json\": ...} source (the file "
			    "the new value is written back to)", name);
	return 0;
}

static int parse_secrets(ctx *c, json_t *v, const key_def *d)
{
	const char *k;
	json_t *val;
	if (!json_is_object(v))
		return fail(c, "expected an object of secrets by name, got %s", jtype(v));
	if (json_object_size(v) > 64)
		return fail(c, "too many secrets (at most 64)");
	json_object_foreach(v, k, val) {
		struct ab_profile_secret x = {0};
		push_key(c, k);
		int r = secret_one(c, k, val, &x);
		pop(c);
		if (r < 0) {
			psecret_clear(&x);
			return r;
		}
		struct ab_profile_secret *n = realloc(c->p->secrets,
						      (c->p->nsecrets + 1) * sizeof(*n));
		if (!n) {
			psecret_clear(&x);
			return oom(c);
		}
		c->p->secrets = n;
		n[c->p->nsecrets++] = x;
	}
	return 0;
}

/* "http://HOST[:PORT][/]" (port default 8080): a corporate HTTP proxy. */
int ab_upstream_proxy_parse(const char *url, char *host, size_t hostlen, unsigned *port)
{
	if (strncasecmp(url, "http://", 7) != 0)
		return -EINVAL;
	const char *h = url + 7;
	size_t n = strcspn(h, "/");
	if (h[n] && strcmp(h + n, "/") != 0)
		return -EINVAL;
	char hp[AB_HOST_INPUT_MAX + 8];
	if (n == 0 || n >= sizeof(hp) || memchr(h, '@', n))
		return -EINVAL;
	memcpy(hp, h, n);
	hp[n] = '\0';
	*port = 8080;
	char *colon = hp[0] == '[' ? strstr(hp, "]:") : strrchr(hp, ':');
	if (colon) {
		if (hp[0] == '[')
			colon++;
		char *end;
		unsigned long v = strtoul(colon + 1, &end, 10);
		if (*end || v < 1 || v > 65535 || colon[1] == '\0')
			return -EINVAL;
		*port = (unsigned)v;
		*colon = '\0';
	}
	return ab_host_normalize(hp, host, hostlen) < 0 ? -EINVAL : 0;
}

#define PO(field) offsetof(ab_profile, field)
#define LIST(n, f, it, fl) { .name = n, .fn = parse_list, .off = PO(f), .item = it, .flags = fl }
#define LIMIT(n, fl) { .name = #n, .fn = parse_limit, .off = PO(limits.n), .flags = fl }
#define SECTION(n, s) { .name = n, .fn = parse_section, .sub = s }
#define END { .name = NULL }

static const key_def fs_keys[] = {
	LIST("read", fs.read, item_path, F_UNIQUE),
	LIST("write", fs.write, item_wpath, F_UNIQUE),
	LIST("deny", fs.deny, item_path, F_UNIQUE),
	LIST("protect", fs.protect, item_relpath, F_UNIQUE),
	LIST("tmpfs", fs.tmpfs, item_wpath, F_UNIQUE),
	END,
};

static const key_def net_keys[] = {
	{ .name = "loopback_ports", .fn = parse_ports },
	LIST("allow", net.allow, item_netrule, F_UNIQUE),
	LIST("deny", net.deny, item_netrule, F_UNIQUE),
	LIST("private", net.priv, item_netrule_private, F_UNIQUE),
	{ .name = "hosts", .fn = parse_net_hosts },
	{ .name = "transparent", .fn = parse_net_transparent },
	{ .name = "proxy_port", .fn = parse_net_port },
	{ .name = "log", .fn = parse_net_log },
	{ .name = "upstream_proxy", .fn = parse_net_upstream },
	{ .name = "ca_file", .fn = parse_net_cafile },
	{ .name = "placeholder_elsewhere", .fn = parse_net_elsewhere },
	END,
};

static const key_def env_keys[] = {
	LIST("pass", env.pass, item_envpat, F_UNIQUE),
	{ .name = "set", .fn = parse_env_set },
	END,
};

static const key_def limit_keys[] = {
	LIMIT(nofile, 0), LIMIT(nproc, 0), LIMIT(fsize, F_SIZE), LIMIT(core, 0),
	LIMIT(memory, F_SIZE | F_POSITIVE), LIMIT(pids, F_POSITIVE), LIMIT(cpu, 0), END,
};

static const key_def syscall_keys[] = {
	LIST("deny", syscalls.deny, item_syscall, F_UNIQUE | F_SHORT),
	LIST("allow", syscalls.allow, item_syscall, F_UNIQUE | F_SHORT),
	END,
};

static const key_def audit_keys[] = {
	{ .name = "exec", .fn = parse_audit_bool, .off = PO(audit.exec) },
	{ .name = "denials", .fn = parse_audit_bool, .off = PO(audit.denials) },
	END,
};

static const key_def terminal_keys[] = {
	{ .name = "clipboard", .fn = parse_audit_bool, .off = PO(terminal.clipboard) },
	END,
};

static const key_def top_keys[] = {
	{ .name = "$schema", .fn = parse_text, .off = NO_TARGET },
	{ .name = "version", .fn = parse_noop },
	{ .name = "extends", .fn = parse_extends },
	{ .name = "description", .fn = parse_text, .off = PO(description) },
	LIST("command", command, item_copy, 0),
	SECTION("filesystem", fs_keys),
	SECTION("network", net_keys),
	SECTION("env", env_keys),
	SECTION("limits", limit_keys),
	SECTION("syscalls", syscall_keys),
	{ .name = "secrets", .fn = parse_secrets },
	SECTION("audit", audit_keys),
	SECTION("terminal", terminal_keys),
	LIST("unix_sockets", unix_sockets, item_path, F_UNIQUE),
	LIST("allow_downgrade", allow_downgrade, item_downgrade, F_UNIQUE),
	{ .name = "hostname", .fn = parse_hostname },
	END,
};

static int unknown_key(ctx *c, const char *k, const key_def *defs)
{
	const char *names[24], *s;
	char q[100];
	size_t n = 0;
	int r;
	for (; defs->name && n + 1 < AB_ARRAY_SIZE(names); defs++)
		names[n++] = defs->name;
	names[n] = NULL;
	s = suggest(k, names);
	quote(q, sizeof(q), k);
	push_key(c, k);
	if (s) {
		r = fail_key(c, "unknown key \"%s\" (did you mean \"%s\"?)", q, s);
	} else {
		char known[256];
		size_t o = 0;
		for (size_t i = 0; i < n; i++) {
			int w = snprintf(known + o, sizeof(known) - o, "%s%s", i ? ", " : "",
					 names[i]);
			if (w < 0 || (size_t)w >= sizeof(known) - o)
				break;
			o += (size_t)w;
		}
		r = fail_key(c, "unknown key \"%s\" (known: %s)", q, known);
	}
	pop(c);
	return r;
}

static int parse_object(ctx *c, json_t *obj, const key_def *defs)
{
	const char *k;
	json_t *v;
	if (!json_is_object(obj))
		return fail(c, "expected an object, got %s", jtype(obj));
	json_object_foreach(obj, k, v) {
		const key_def *d = defs;
		while (d->name && strcmp(d->name, k) != 0)
			d++;
		if (!d->name)
			return unknown_key(c, k, defs);
		push_key(c, k);
		int r = d->fn(c, v, d);
		pop(c);
		if (r < 0)
			return r;
	}
	return 0;
}

static int validate(ctx *c, json_t *root)
{
	json_t *v;
	int r = 0;
	if (!json_is_object(root))
		return fail(c, "expected a JSON object at the top level, got %s", jtype(root));
	v = json_object_get(root, "version");
	if (!v)
		return fail(c, "missing required key \"version\" (add \"version\": 1)");
	push_key(c, "version");
	if (!json_is_integer(v))
		r = fail(c, "expected an integer, got %s", jtype(v));
	else if (json_integer_value(v) != 1)
		r = fail(c, "unsupported version %lld (this agentbox reads version 1)",
			 (long long)json_integer_value(v));
	pop(c);
	return r < 0 ? r : parse_object(c, root, top_keys);
}

/* ------------------------------------------------------------------------ */
/* Profile values: new, merge, free                                         */
/* ------------------------------------------------------------------------ */

static ab_profile *profile_new(void)
{
	ab_profile *p = calloc(1, sizeof(*p));
	if (p)
		p->net.transparent = p->audit.exec = p->audit.denials = p->terminal.clipboard = -1;
	if (p)
		p->limits = (ab_limits){ AB_LIMIT_UNSET, AB_LIMIT_UNSET, AB_LIMIT_UNSET,
					 AB_LIMIT_UNSET, AB_LIMIT_UNSET, AB_LIMIT_UNSET,
					 AB_LIMIT_UNSET };
	return p;
}

static ab_strv *profile_lists(ab_profile *p, size_t i)
{
	ab_strv *l[] = { &p->files,        &p->shadows,       &p->fs.read,       &p->fs.write,
			 &p->fs.deny,      &p->fs.protect,    &p->fs.tmpfs,
			 &p->env.pass,     &p->syscalls.deny, &p->syscalls.allow,
			 &p->unix_sockets, &p->allow_downgrade, &p->net.allow,
			 &p->net.deny,     &p->net.priv,      &p->cli_grants,
			 &p->cli_write,    &p->command };
	return i < AB_ARRAY_SIZE(l) ? l[i] : NULL;
}

static int replace_str(char **dst, const char *src)
{
	char *n;
	if (!src)
		return 0;
	n = strdup(src);
	if (!n)
		return -ENOMEM;
	free(*dst);
	*dst = n;
	return 0;
}

static int psecret_copy(struct ab_profile_secret *d, const struct ab_profile_secret *s)
{
	memset(d, 0, sizeof(*d));
	d->src = s->src;
	d->ph_len = s->ph_len;
	d->ph_jwt = s->ph_jwt;
	d->ph_stable = s->ph_stable;
	d->mask_in_body = s->mask_in_body;
	d->elsewhere = s->elsewhere;
	d->optional = s->optional;
	d->render = s->render;
	if (replace_str(&d->src_pointer, s->src_pointer) < 0 || replace_str(&d->hint, s->hint) < 0 ||
	    replace_str(&d->rot_host, s->rot_host) < 0 || replace_str(&d->rot_path, s->rot_path) < 0 ||
	    replace_str(&d->rot_field, s->rot_field) < 0 ||
	    ab_strv_copy(&d->rot_stamp_ptr, &s->rot_stamp_ptr) < 0 ||
	    ab_strv_copy(&d->rot_stamp_kind, &s->rot_stamp_kind) < 0 ||
	    ab_strv_copy(&d->optional_unless, &s->optional_unless) < 0 ||
	    ab_strv_copy(&d->render_keep, &s->render_keep) < 0) {
		psecret_clear(d);
		return -ENOMEM;
	}
	if (!(d->name = strdup(s->name)) || replace_str(&d->src_env, s->src_env) < 0 ||
	    replace_str(&d->src_file, s->src_file) < 0 ||
	    replace_str(&d->ph_prefix, s->ph_prefix) < 0 ||
	    replace_str(&d->env_name, s->env_name) < 0 || ab_strv_copy(&d->src_cmd, &s->src_cmd) < 0 ||
	    ab_strv_copy(&d->hosts, &s->hosts) < 0 || ab_strv_copy(&d->places, &s->places) < 0) {
		psecret_clear(d);
		return -ENOMEM;
	}
	return 0;
}

/* A secret of a later profile replaces the one of the same name. */
static int merge_secret(ab_profile *base, const struct ab_profile_secret *s)
{
	struct ab_profile_secret x;
	if (psecret_copy(&x, s) < 0)
		return -ENOMEM;
	for (size_t i = 0; i < base->nsecrets; i++) {
		if (strcmp(base->secrets[i].name, s->name) == 0) {
			psecret_clear(&base->secrets[i]);
			base->secrets[i] = x;
			return 0;
		}
	}
	struct ab_profile_secret *n = realloc(base->secrets, (base->nsecrets + 1) * sizeof(*n));
	if (!n) {
		psecret_clear(&x);
		return -ENOMEM;
	}
	base->secrets = n;
	n[base->nsecrets++] = x;
	return 0;
}

static int merge_values(ab_profile *base, const ab_profile *top)
{
	ab_strv cmd = { 0 };
	int r;
	if (replace_str(&base->description, top->description) < 0 ||
	    replace_str(&base->hostname, top->hostname) < 0)
		return -ENOMEM;
	/* all lists but `command` (the last) are unions */
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
	for (size_t i = 0; i < top->env.nset; i++)
		if (kv_set(base, top->env.set[i].key, top->env.set[i].val) < 0)
			return -ENOMEM;
#define OVERRIDE(f)                                 \
	do {                                        \
		if (top->limits.f != AB_LIMIT_UNSET) \
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
	for (size_t i = 0; i < top->net.nhosts; i++)
		if (kv_put(&base->net.hosts, &base->net.nhosts, top->net.hosts[i].key,
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
	if (top->net.proxy_port)
		base->net.proxy_port = top->net.proxy_port;
	if (top->net.placeholder_elsewhere)
		base->net.placeholder_elsewhere = top->net.placeholder_elsewhere;
	if (replace_str(&base->net.log, top->net.log) < 0 ||
	    replace_str(&base->net.upstream_proxy, top->net.upstream_proxy) < 0 ||
	    replace_str(&base->net.ca_file, top->net.ca_file) < 0)
		return -ENOMEM;
	for (size_t i = 0; i < top->nsecrets; i++)
		if (merge_secret(base, &top->secrets[i]) < 0)
			return -ENOMEM;
	base->loopback.any = base->loopback.any || top->loopback.any;
	for (size_t i = 0; i < top->loopback.nports; i++)
		if (add_port(base, top->loopback.ports[i]) < 0)
			return -ENOMEM;
	return 0;
}

int ab_profile_merge(ab_profile *base, const ab_profile *top, ab_err *err)
{
	int r = merge_values(base, top);
	char shown[1024];
	if (r < 0)
		return ab_fail(err, -r, "merging profile %s", SHOW(shown, top->path ? top->path : ""));
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
	free(p->net.log);
	free(p->net.upstream_proxy);
	free(p->net.ca_file);
	for (size_t i = 0; i < p->nsecrets; i++)
		psecret_clear(&p->secrets[i]);
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
	const char *cfg = xdg_dir(v->xdg_config_home, v->home, ".config", tmp, sizeof(tmp));
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
		r = push_candidate(out, ab_asprintf("%s/../share/agentbox/profiles/%s.json", exe, name));
	if (r >= 0)
		r = push_candidate(out, ab_asprintf("%s/profiles/%s.json", AB_DATADIR, name));
	if (r >= 0 && have_exe)
		r = push_candidate(out, ab_asprintf("%s/../profiles/%s.json", exe, name));
	return r;
}

int ab_profile_list_names(const ab_vars *v, ab_strv *out)
{
	_cleanup_strv_ ab_strv dirs = { 0 };
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
	_cleanup_strv_ ab_strv cands = { 0 };
	char list[1024] = "", q[100], tmp[PATH_MAX];
	const char *cfg;
	size_t o = 0;
	quote(q, sizeof(q), name);
	if (!name_ok(name)) {
		ab_fail(err, 0, "invalid profile name \"%s\" (%s)", q, NAME_RULE);
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
				 SHOW(shown, cands.v[i]));
		if (n > 0 && (size_t)n < sizeof(list) - o)
			o += (size_t)n;
	}
	ab_fail_code(err, AB_EXIT_FAIL, ENOENT, "profile \"%s\" not found (looked in %s)", q,
		     list);
	cfg = xdg_dir(v->xdg_config_home, v->home, ".config", tmp, sizeof(tmp));
	ab_err_hint(err, "put your own in %s/agentbox/profiles/%s.json (or pass a path to a "
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
	if (!is_pathlike(name_or_path))
		return find_by_name(name_or_path, vars, NULL, NULL, out_path, shadows, err);
	abs = make_absolute(name_or_path, NULL);
	if (!abs)
		return ab_fail(err, errno ? errno : ENOMEM, "profile %s", SHOW(shown, name_or_path));
	if (!exists(abs)) {
		int e = errno;
		ab_fail(err, e, "cannot read profile %s", SHOW(shown, abs));
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
	SHOW(shown, path);
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
	ab_strv chain; /* absolute paths of the files being loaded, outermost first */
	size_t nfiles; /* loaded so far */
	ab_strv shadows; /* see ab_profile.shadows */
} loader;

static int load_at(loader *L, const char *buf, size_t len, const char *fname,
		   const char *abspath, ab_profile **out, ab_err *err);

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
	if (!is_pathlike(entry))
		return find_by_name(entry, L->vars, dir, includer, out, &L->shadows, err);
	r = ab_profile_expand(entry, L->vars, true, &x, err);
	if (r < 0)
		return r;
	*out = make_absolute(x, dir);
	return *out ? 0 : ab_fail(err, ENOMEM, "resolving extends");
}

/* "A -> B -> ... -> last", the chain from its element `from` on. */
static void chain_str(const loader *L, const char *from, const char *last, char *out,
		      size_t outsz)
{
	size_t i = 0, o = 0;
	while (i < L->chain.n && strcmp(L->chain.v[i], from) != 0)
		i++;
	out[0] = '\0';
	for (; i <= L->chain.n; i++) {
		char shown[512];
		const char *s = i < L->chain.n ? L->chain.v[i] : last;
		int n = snprintf(out + o, outsz - o, "%s%s", o ? " -> " : "", SHOW(shown, s));
		if (n < 0 || (size_t)n >= outsz - o)
			break;
		o += (size_t)n;
	}
}

/* Load extends entry i of c (already validated) and merge it into acc. */
static int load_base(loader *L, ctx *c, size_t i, const char *includer, ab_profile *acc)
{
	_cleanup_free_ char *path = NULL, *buf = NULL;
	_cleanup_profile_ ab_profile *base = NULL;
	char where[256], pstr[64], chain[1024];
	size_t blen = 0, line, col;
	int r;
	c->depth = 0;
	push_key(c, "extends");
	if (c->extends_array)
		push_index(c, i);
	(void)ab_json_locate(c->buf, c->len, c->path, c->depth, false, &line, &col);
	path_str(c, c->depth, pstr, sizeof(pstr));
	snprintf(where, sizeof(where), "%s:%zu:%zu", c->fname, line, col);
	r = resolve_extends(L, c->extends.v[i], includer, &path, c->err);
	if (r < 0)
		return ab_err_prefix(c->err, "%s: %s", where, pstr);
	if (ab_strv_contains(&L->chain, path)) {
		chain_str(L, path, path, chain, sizeof(chain));
		return fail(c, "cycle: %s", chain);
	}
	if (L->chain.n > AB_PROFILE_MAX_DEPTH) {
		chain_str(L, L->chain.v[0], path, chain, sizeof(chain));
		return fail(c, "nested deeper than %d levels (%s)", AB_PROFILE_MAX_DEPTH, chain);
	}
	r = read_profile_file(path, &buf, &blen, c->err);
	if (r < 0)
		return ab_err_prefix(c->err, "%s: %s", where, pstr);
	r = load_at(L, buf, blen, path, path, &base, c->err);
	if (r < 0) {
		char shown[256];
		if (!c->err->hint[0])
			ab_err_hint(c->err, "%s is extended at %s", SHOW(shown, path), where);
		return r;
	}
	return ab_profile_merge(acc, base, c->err);
}

static int load_at(loader *L, const char *buf, size_t len, const char *fname,
		   const char *abspath, ab_profile **out, ab_err *err)
{
	_cleanup_profile_ ab_profile *own = profile_new(), *acc = profile_new();
	char shown[1024];
	ctx c = { .fname = SHOW(shown, fname), .buf = buf ? buf : "", .len = buf ? len : 0,
		  .vars = L->vars, .p = own, .err = err };
	bool pushed = false;
	json_t *root = NULL;
	int r;
	if (!own || !acc)
		return ab_fail(err, ENOMEM, "%s: loading profile", c.fname);
	if (++L->nfiles > MAX_FILES)
		return ab_fail(err, 0, "%s: too many profile files through extends (more than %d)",
			       c.fname, MAX_FILES);
	r = parse_json(&c, &root);
	if (r >= 0) {
		r = validate(&c, root);
		json_decref(root);
	}
	if (r >= 0 && (ab_strv_push(&own->files, abspath) < 0 ||
		       ab_strv_push(&L->chain, abspath) < 0))
		r = oom(&c);
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
	loader L = { .vars = vars ? vars : &no_vars };
	ab_profile *p = NULL;
	if (shadows) {
		L.shadows = *shadows;
		*shadows = (ab_strv){ 0 };
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
			       SHOW(shown, fname), AB_PROFILE_MAX_BYTES);
	abspath = make_absolute(fname, NULL);
	if (!abspath)
		return ab_fail(err, errno ? errno : ENOMEM, "%s: loading profile", SHOW(shown, fname));
	return load_top(fname, buf, len, fname, abspath, vars, NULL, out, err);
}

int ab_profile_load(const char *name_or_path, const ab_vars *vars, ab_profile **out,
		    ab_err *err)
{
	_cleanup_free_ char *path = NULL, *buf = NULL;
	_cleanup_strv_ ab_strv shadows = { 0 };
	size_t len = 0;
	int r = find_impl(name_or_path, vars, &path, &shadows, err);
	if (r < 0)
		return r;
	r = read_profile_file(path, &buf, &len, err);
	if (r < 0)
		return r;
	return load_top(name_or_path, buf, len, path, path, vars, &shadows, out, err);
}
