/* SPDX-License-Identifier: MIT */
/*
 * The profile schema, format version 1 (parent, pure): the key tables and one
 * handler per key, each checking its value strictly and storing it in the
 * file's own ab_profile (profile.c merges the files).  The `secrets` key has
 * its own file (profile_secrets.c); the value kinds several keys share are
 * read in profile_values.c.
 */
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "agentbox/netpolicy.h"
#include "profile_int.h"
#include "agentbox/credfile.h"

/* ------------------------------------------------------------------------ */
/* Downgrade names (allow_downgrade; doctor and explain describe them)      */
/* ------------------------------------------------------------------------ */

// clang-format off
const char *const ab_downgrade_names[] = {
	"landlock",       "landlock-refer", "landlock-truncate", "landlock-net",
	"landlock-ioctl-dev", "landlock-scope", "cgroup-limits", "seccomp-user-notif",
	"proc-outer", "nested-git-live", NULL,
};
// clang-format on

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
	{"landlock", "no Landlock at all: only the mount namespace keeps host files out of "
		     "reach (no second filesystem layer, no TCP port or scope restrictions)"},
	{"landlock-refer", "Landlock ABI < 2: moving or linking files between directories is "
			   "always refused (EXDEV) -- stricter, but `mv` and some tools may fail"},
	{"landlock-truncate", "Landlock ABI < 3: truncate() of files is not controlled by "
			      "Landlock (the read-only mounts still protect them)"},
	{"landlock-net", "Landlock ABI < 4: TCP bind/connect to loopback ports is not "
			 "restricted (the network namespace still has no route out)"},
	{"landlock-ioctl-dev", "Landlock ABI < 5: ioctl on device files is not controlled by "
			       "Landlock (seccomp still blocks TIOCSTI and TIOCLINUX)"},
	{"landlock-scope", "Landlock ABI < 6: abstract unix sockets and signals are not scoped "
			   "by Landlock (the network and pid namespaces still separate them)"},
	{"cgroup-limits", "limits.memory and limits.pids are not applied (no delegated cgroup "
			  "v2); rlimits still are"},
	{"proc-outer", "where a fresh /proc is refused (a container's /proc has mounts over "
		       "its files), the outer /proc is bound read-only instead: the sandbox "
		       "lists every process of the container and reads their command lines; "
		       "Landlock's ptrace scoping still refuses their environments (the "
		       "harness's API keys), memory and fds, and nothing does where Landlock "
		       "is missing. Safer: unmask /proc for a non-root container user"},
	{"nested-git-live", "creations and writes are left to the kernel, which is faster for "
			    "jobs that make many files: a .git the run makes, or a nested "
			    "repository it writes to, is the host's while the run lasts (an IDE or "
			    "a prompt runs git in it); it is still judged and disarmed at the "
			    "end (docs/nested-git.md)"},
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
/* Schema: one handler per key                                              */
/* ------------------------------------------------------------------------ */

typedef struct key_def key_def;
struct key_def {
	const char *name;
	int (*fn)(pf_ctx *c, json_t *v, const key_def *d);
	size_t off;         /* target inside ab_profile */
	pf_item_fn item;    /* lists: check/transform one entry */
	const key_def *sub; /* sections: their keys */
	int flags;
};
#define F_UNIQUE PF_UNIQUE /* lists: drop duplicates */
#define F_SIZE 2           /* limits: accept "8G" */
#define F_SHORT PF_SHORT   /* lists: at most AB_PROFILE_MAX_SYSCALLS entries */
#define F_POSITIVE 8       /* limits: 0 is refused (a sandbox that cannot start) */
#define NO_TARGET SIZE_MAX

#define TARGET(c, d, type) ((type *)(void *)((char *)(c)->p + (d)->off))

static int parse_object(pf_ctx *c, json_t *obj, const key_def *defs);

bool pf_name_ok(const char *s)
{
	size_t n = strlen(s);
	/* a leading '+' marks an extension profile ("+npm"): still a name */
	size_t i0 = n && s[0] == '+' ? 1 : 0;
	if (n == i0 || n > 64 || !pf_is_alnum(s[i0]))
		return false;
	for (size_t i = i0 + 1; i < n; i++)
		if (!pf_is_alnum(s[i]) && !strchr("._+-", s[i]))
			return false;
	return true;
}

bool pf_is_pathlike(const char *s)
{
	size_t n = strlen(s);
	return strchr(s, '/') || (n >= 5 && strcmp(s + n - 5, ".json") == 0);
}

/* write and tmpfs: never "/" */
static int item_wpath(pf_ctx *c, const char *s, char **out)
{
	int r = pf_item_path(c, s, out);
	if (r >= 0 && *out && strcmp(*out, "/") == 0) {
		free(*out);
		*out = NULL;
		return pf_fail(c, "refusing to make / writable");
	}
	return r;
}

/* guard: "FILE#/POINTER": FILE expanded like any path, POINTER a JSON
 * pointer whose segments may each be "*" (every key of that object). */
static int item_guard(pf_ctx *c, const char *s, char **out)
{
	char q[100];
	const char *hash = strstr(s, "#/");
	if (!hash || hash == s)
		return pf_fail(c,
			       "\"%s\": a guard entry is FILE#/POINTER (e.g. "
			       "~/.claude.json#/mcpServers)",
			       pf_quote(q, sizeof(q), s));
	_cleanup_free_ char *file = strndup(s, (size_t)(hash - s));
	_cleanup_free_ char *abs = NULL, *ptr = strdup(hash + 1);
	if (!file || !ptr)
		return pf_oom(c);
	int r = pf_item_path(c, file, &abs);
	if (r < 0)
		return r;
	/* "*" segments checked as a plain key */
	for (char *p = ptr; (p = strstr(p, "/*")) != NULL; p++)
		if (p[2] == '/' || p[2] == '\0')
			p[1] = 'x';
	if (ab_json_pointer_check(ptr) < 0)
		return pf_fail(c, "\"%s\": not a JSON pointer (RFC 6901, at most %d bytes)",
			       pf_quote(q, sizeof(q), hash + 1), AB_JSON_POINTER_MAX);
	*out = ab_asprintf("%s#%s", abs, hash + 1);
	return *out ? 0 : pf_oom(c);
}

/* protect, anchored: "/abs", "~/x", "${HOME}/x" (expanded like any path)
 * name that one path; kept absolute (with the '?' and the trailing '/'), so
 * the planner tells them from the relative entries by the leading '/'. */
static int item_anchored(pf_ctx *c, const char *s, bool optional, char **out)
{
	size_t sl = strlen(s);
	bool dir = sl > 0 && s[sl - 1] == '/';
	_cleanup_free_ char *abs = NULL;
	int r = pf_item_path(c, s, &abs);
	if (r < 0)
		return r;
	if (strcmp(abs, "/") == 0)
		return pf_fail(c, "\"/\" cannot be protected (it is no writable grant)");
	*out = ab_asprintf("%s%s%s", optional ? "?" : "", abs, dir ? "/" : "");
	return *out ? 0 : pf_oom(c);
}

/* protect: relative to each writable root (no "..", not expanded), or
 * anchored to one path (item_anchored). */
static int item_relpath(pf_ctx *c, const char *s, char **out)
{
	char q[100];
	size_t n = 0;
	pf_quote(q, sizeof(q), s);
	/* a leading '?' means: protect it if it exists, reserve nothing if not */
	bool optional = s[0] == '?';
	if (optional)
		s++;
	if (s[0] == '/' || s[0] == '~' || s[0] == '$')
		return item_anchored(c, s, optional, out);
	if (strstr(s, "${"))
		return pf_fail(c,
			       "\"%s\": a relative protect entry is not expanded (start it "
			       "with a variable, ~/ or / to name one path)",
			       q);
	if (strlen(s) >= PATH_MAX)
		return pf_fail(c, "path too long (at most %d bytes)", PATH_MAX - 1);
	_cleanup_free_ char *o = malloc(strlen(s) + 3);
	if (!o)
		return pf_oom(c);
	if (optional)
		o[n++] = '?';
	for (const char *p = s; *p;) {
		size_t l;
		while (*p == '/')
			p++;
		l = strcspn(p, "/");
		if (l == 2 && p[0] == '.' && p[1] == '.')
			return pf_fail(c, "\"%s\": \"..\" is not allowed", q);
		if (l > 0 && !(l == 1 && p[0] == '.')) {
			if (n > (optional ? 1u : 0u)) /* "?a/b", never "?/a/b" (anchored) */
				o[n++] = '/';
			memcpy(o + n, p, l);
			n += l;
		}
		p += l;
	}
	if (n == (optional ? 1u : 0u))
		return pf_fail(c, "\"%s\" names the writable root itself", q);
	/* a trailing '/' says the path is a directory: kept for the planner */
	if (s[strlen(s) - 1] == '/')
		o[n++] = '/';
	o[n] = '\0';
	*out = TAKE_PTR(o);
	return 0;
}

static int item_envpat(pf_ctx *c, const char *s, char **out)
{
	char q[100];
	size_t n = strlen(s);
	if (strcmp(s, "*") == 0)
		return pf_fail(c, "\"*\" would pass the whole environment; name variables or "
				  "prefixes such as \"LC_*\"");
	if (s[n - 1] == '*')
		n--;
	if (!pf_env_name_ok(s, n))
		return pf_fail(c,
			       "invalid variable name or pattern \"%s\" (letters, digits and _, "
			       "not starting with a digit, optionally ending in *)",
			       pf_quote(q, sizeof(q), s));
	*out = strdup(s);
	return 0;
}

static int item_syscall(pf_ctx *c, const char *s, char **out)
{
	char q[100];
	size_t n = strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789_");
	if (s[n] || n > 64)
		return pf_fail(c, "invalid syscall name \"%s\" (at most 64 of a-z 0-9 _)",
			       pf_quote(q, sizeof(q), s));
	if (c->vars->syscall_check && c->depth >= 2 && c->path[c->depth - 2].key) {
		ab_err e = {0};
		if (c->vars->syscall_check(c->path[c->depth - 2].key, s, &e) < 0) {
			int r = pf_fail(c, "%s", e.msg);
			if (e.hint[0])
				ab_err_hint(c->err, "%s", e.hint);
			return r;
		}
	}
	*out = strdup(s);
	return 0;
}

static int item_downgrade(pf_ctx *c, const char *s, char **out)
{
	char q[100];
	if (!ab_downgrade_known(s)) {
		const char *sug = pf_suggest(s, ab_downgrade_names);
		pf_quote(q, sizeof(q), s);
		if (sug)
			return pf_fail(c, "unknown downgrade \"%s\" (did you mean \"%s\"?)", q,
				       sug);
		return pf_fail(
			c,
			"unknown downgrade \"%s\" (known: landlock, landlock-refer, "
			"landlock-truncate, landlock-net, landlock-ioctl-dev, landlock-scope, "
			"cgroup-limits, seccomp-user-notif)",
			q);
	}
	*out = strdup(s);
	return 0;
}

static int parse_list(pf_ctx *c, json_t *v, const key_def *d)
{
	return pf_parse_strings(c, v, d->item, d->flags, TARGET(c, d, ab_strv));
}

static int parse_section(pf_ctx *c, json_t *v, const key_def *d)
{
	return parse_object(c, v, d->sub);
}

static int parse_noop(pf_ctx *c, json_t *v, const key_def *d)
{
	return 0;
}

/* description, $schema (checked, ignored) */
static int parse_text(pf_ctx *c, json_t *v, const key_def *d)
{
	const char *s;
	int r = pf_get_str(c, v, &s);
	if (r < 0 || d->off == NO_TARGET)
		return r;
	char **dst = TARGET(c, d, char *);
	free(*dst);
	*dst = strdup(s);
	return *dst ? 0 : pf_oom(c);
}

static int parse_hostname(pf_ctx *c, json_t *v, const key_def *d)
{
	const char *s;
	char q[100];
	int r = pf_get_str(c, v, &s);
	if (r < 0)
		return r;
	size_t n = strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-.");
	if (s[n] || n > 64)
		return pf_fail(c, "invalid hostname \"%s\" (1 to 64 of A-Z a-z 0-9 - .)",
			       pf_quote(q, sizeof(q), s));
	free(c->p->hostname);
	c->p->hostname = strdup(s);
	return c->p->hostname ? 0 : pf_oom(c);
}

static int extends_entry(pf_ctx *c, const json_t *e)
{
	const char *s;
	char q[100];
	int r = pf_get_str(c, e, &s);
	if (r < 0)
		return r;
	if (!pf_is_pathlike(s) && !pf_name_ok(s))
		return pf_fail(c, "invalid profile name \"%s\" (%s; or a path containing /)",
			       pf_quote(q, sizeof(q), s), PF_NAME_RULE);
	return ab_strv_push(&c->extends, s) < 0 ? pf_oom(c) : 0;
}

static int parse_extends(pf_ctx *c, json_t *v, const key_def *d)
{
	json_t *e;
	size_t i;
	if (json_is_string(v))
		return extends_entry(c, v);
	if (!json_is_array(v))
		return pf_fail(c, "expected a profile name, a path or an array of them, got %s",
			       pf_jtype(v));
	if (pf_check_count(c, json_array_size(v), AB_PROFILE_MAX_LIST) < 0)
		return -EINVAL;
	c->extends_array = true;
	json_array_foreach(v, i, e)
	{
		pf_push_index(c, i);
		int r = extends_entry(c, e);
		pf_pop(c);
		if (r < 0)
			return r;
	}
	return 0;
}

int pf_add_port(ab_profile *p, long port)
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

static int parse_ports(pf_ctx *c, json_t *v, const key_def *d)
{
	char q[100];
	json_t *e;
	size_t i;
	if (json_is_string(v) && strcmp(json_string_value(v), "any") == 0) {
		c->p->loopback.any = true;
		return 0;
	}
	if (json_is_string(v))
		return pf_fail(c, "expected an array of ports or \"any\", got \"%s\"",
			       pf_quote(q, sizeof(q), json_string_value(v)));
	if (!json_is_array(v))
		return pf_fail(c, "expected an array of ports or \"any\", got %s", pf_jtype(v));
	if (pf_check_count(c, json_array_size(v), AB_PROFILE_MAX_LIST) < 0)
		return -EINVAL;
	json_array_foreach(v, i, e)
	{
		int r = 0;
		pf_push_index(c, i);
		if (!json_is_integer(e))
			r = pf_fail(c, "expected a port number (1-65535), got %s", pf_jtype(e));
		else if (json_integer_value(e) < 1 || json_integer_value(e) > 65535)
			r = pf_fail(c, "port %lld out of range (1-65535)",
				    (long long)json_integer_value(e));
		pf_pop(c);
		if (r < 0)
			return r;
		if (pf_add_port(c->p, (long)json_integer_value(e)) < 0)
			return pf_oom(c);
	}
	return 0;
}

int pf_kv_put(ab_kv **arr, size_t *n, const char *key, const char *val)
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
	a[(*n)++] = (ab_kv){.key = k, .val = v};
	*arr = a;
	return 0;
}

int pf_kv_set(ab_profile *p, const char *key, const char *val)
{
	return pf_kv_put(&p->env.set, &p->env.nset, key, val);
}

static int env_set_one(pf_ctx *c, const char *k, const json_t *val)
{
	_cleanup_free_ char *x = NULL;
	char q[100];
	int r;
	if (!pf_env_name_ok(k, strlen(k)))
		return pf_fail_key(c,
				   "invalid variable name \"%s\" (letters, digits and _, not "
				   "starting with a digit)",
				   pf_quote(q, sizeof(q), k));
	if (!json_is_string(val))
		return pf_fail(c, "expected a string, got %s", pf_jtype(val));
	r = pf_expand_or_fail(c, json_string_value(val), true, &x);
	if (r < 0)
		return r;
	return pf_kv_set(c->p, k, x) < 0 ? pf_oom(c) : 0;
}

/* An object of NAME: value entries, each handled by one(), errors located at
 * the entry; `what` names the object in the type error. */
static int each_entry(pf_ctx *c, json_t *v, const char *what,
		      int (*one)(pf_ctx *c, const char *k, const json_t *val))
{
	const char *k;
	json_t *val;
	if (!json_is_object(v))
		return pf_fail(c, "expected %s, got %s", what, pf_jtype(v));
	if (pf_check_count(c, json_object_size(v), AB_PROFILE_MAX_LIST) < 0)
		return -EINVAL;
	json_object_foreach(v, k, val)
	{
		pf_push_key(c, k);
		int r = one(c, k, val);
		pf_pop(c);
		if (r < 0)
			return r;
	}
	return 0;
}

/* descriptions: {"LIST": {"ENTRY": "text"}} */
static const char *descr_list; /* the LIST being read (parse is single-threaded) */

static int descr_one(pf_ctx *c, const char *k, const json_t *val)
{
	if (!k[0] || strlen(k) > 4096)
		return pf_fail_key(c, "an entry must be 1 to 4096 bytes");
	if (!json_is_string(val))
		return pf_fail(c, "expected a string, got %s", pf_jtype(val));
	const char *t = json_string_value(val);
	size_t n = strlen(t);
	if (n == 0 || n > AB_PROFILE_DESCR_MAX)
		return pf_fail(c, "a description must be 1 to %d bytes, not %zu",
			       AB_PROFILE_DESCR_MAX, n);
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)t[i] < 0x20 || t[i] == 0x7f)
			return pf_fail(c, "a description is one line of text (no control "
					  "characters)");
	_cleanup_free_ char *key = ab_asprintf("%s\t%s", descr_list, k);
	if (!key || pf_kv_put(&c->p->descr, &c->p->ndescr, key, t) < 0)
		return pf_oom(c);
	return 0;
}

static int descr_section(pf_ctx *c, const char *k, const json_t *val)
{
	static const char *const lists[] = AB_PROFILE_DESCR_LISTS;
	char q[100];
	for (size_t i = 0; i < AB_ARRAY_SIZE(lists); i++) {
		if (strcmp(k, lists[i]) != 0)
			continue;
		descr_list = lists[i];
		return each_entry(c, (json_t *)val, "an object of ENTRY: \"text\"", descr_one);
	}
	return pf_fail_key(c,
			   "unknown list \"%s\" (known: filesystem.read, filesystem.write, "
			   "network.allow, env.pass)",
			   pf_quote(q, sizeof(q), k));
}

static int parse_descriptions(pf_ctx *c, json_t *v, const key_def *d)
{
	return each_entry(c, v, "an object of LIST: {ENTRY: \"text\"}", descr_section);
}

static int parse_env_set(pf_ctx *c, json_t *v, const key_def *d)
{
	return each_entry(c, v, "an object", env_set_one);
}

static int zero_limit(pf_ctx *c)
{
	return pf_fail(c, "must be at least 1 (0 leaves the sandbox no memory or no process to "
			  "start with; leave it out for no limit)");
}

static int parse_limit(pf_ctx *c, json_t *v, const key_def *d)
{
	long long *dst = TARGET(c, d, long long);
	const char *want =
		(d->flags & F_SIZE)
			? "expected a non-negative integer, a size such as \"8G\" or \"unlimited\""
			: "expected a non-negative integer or \"unlimited\"";
	const char *s;
	char q[100];
	int r;
	if (json_is_integer(v)) {
		if (json_integer_value(v) < 0)
			return pf_fail(c, "%s, got %lld", want, (long long)json_integer_value(v));
		*dst = (long long)json_integer_value(v);
		return *dst == 0 && (d->flags & F_POSITIVE) ? zero_limit(c) : 0;
	}
	if (!json_is_string(v))
		return pf_fail(c, "%s, got %s", want, pf_jtype(v));
	s = json_string_value(v);
	pf_quote(q, sizeof(q), s);
	if (strcmp(s, "unlimited") == 0) {
		*dst = LLONG_MAX;
		return 0;
	}
	if (!(d->flags & F_SIZE))
		return pf_fail(c, "%s, got \"%s\"", want, q);
	r = ab_profile_parse_size(s, dst);
	if (r == 0 && *dst == 0 && (d->flags & F_POSITIVE))
		return zero_limit(c);
	if (r == -ERANGE)
		return pf_fail(c, "size \"%s\" is too large", q);
	if (r < 0)
		return pf_fail(c,
			       "invalid size \"%s\" (use a number with an optional K, M, G or T "
			       "suffix, or \"unlimited\")",
			       q);
	return 0;
}

/* ---- network ---- */

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

static int net_host_one(pf_ctx *c, const char *k, const json_t *val)
{
	char name[AB_HOST_BUF], addr[AB_HOST_BUF], q[100];
	unsigned port;
	int kind = ab_host_normalize(k, name, sizeof(name));
	if (kind != AB_HOST_NAME)
		return pf_fail_key(c, "invalid host name \"%s\" (%s)", pf_quote(q, sizeof(q), k),
				   kind < 0 ? ab_host_strerror(kind)
					    : "an address needs no mapping");
	if (!json_is_string(val))
		return pf_fail(c,
			       "expected an address string such as \"127.0.0.1\" or "
			       "\"127.0.0.1:8443\", got %s",
			       pf_jtype(val));
	const char *s = json_string_value(val);
	if (ab_profile_parse_hostaddr(s, addr, sizeof(addr), &port) < 0)
		return pf_fail(c,
			       "invalid address \"%s\" (expected IPV4, IPV4:PORT, [IPV6] or "
			       "[IPV6]:PORT)",
			       pf_quote(q, sizeof(q), s));
	char canon[AB_HOST_BUF + 16];
	if (port)
		snprintf(canon, sizeof(canon), "%s:%u", addr, port);
	else
		snprintf(canon, sizeof(canon), "%s", addr);
	return pf_kv_put(&c->p->net.hosts, &c->p->net.nhosts, name, canon) < 0 ? pf_oom(c) : 0;
}

static int parse_net_hosts(pf_ctx *c, json_t *v, const key_def *d)
{
	return each_entry(c, v, "an object of name: address", net_host_one);
}

static int parse_net_transparent(pf_ctx *c, json_t *v, const key_def *d)
{
	if (!json_is_boolean(v))
		return pf_fail(c, "expected true or false, got %s", pf_jtype(v));
	c->p->net.transparent = json_is_true(v) ? 1 : 0;
	return 0;
}

/* audit.exec / audit.denials / terminal.clipboard / ask: an int field, -1 unset */
static int parse_audit_bool(pf_ctx *c, json_t *v, const key_def *d)
{
	if (!json_is_boolean(v))
		return pf_fail(c, "expected true or false, got %s", pf_jtype(v));
	*(int *)((char *)c->p + d->off) = json_is_true(v) ? 1 : 0;
	return 0;
}

static int parse_net_port(pf_ctx *c, json_t *v, const key_def *d)
{
	if (!json_is_integer(v))
		return pf_fail(c, "expected a port number (1-65535), got %s", pf_jtype(v));
	if (json_integer_value(v) < 1 || json_integer_value(v) > 65535)
		return pf_fail(c, "port %lld out of range (1-65535)",
			       (long long)json_integer_value(v));
	if (json_integer_value(v) == 53)
		return pf_fail(c, "port 53 is the sandbox's DNS responder; choose another proxy "
				  "port");
	c->p->net.proxy_port = (long)json_integer_value(v);
	return 0;
}

/* A scalar absolute path (expanded, normalised) into *dst. */
static int set_path(pf_ctx *c, json_t *v, char **dst)
{
	const char *s;
	char *out = NULL;
	int r = pf_get_str(c, v, &s);
	if (r < 0 || (r = pf_item_path(c, s, &out)) < 0)
		return r;
	if (!out)
		return pf_oom(c);
	free(*dst);
	*dst = out;
	return 0;
}

static int parse_net_log(pf_ctx *c, json_t *v, const key_def *d)
{
	return set_path(c, v, &c->p->net.log);
}

static int parse_net_upstream(pf_ctx *c, json_t *v, const key_def *d)
{
	const char *s;
	char q[100], host[AB_HOST_BUF];
	unsigned port;
	int r = pf_get_str(c, v, &s);
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
			return pf_fail(c,
				       "invalid upstream proxy \"%s***%s\": credentials in the "
				       "URL are not supported (\"env\" or \"http://HOST:PORT\")",
				       pf_quote(qs, sizeof(qs), scheme),
				       pf_quote(q, sizeof(q), at));
		}
		return pf_fail(c, "invalid upstream proxy \"%s\" (\"env\" or \"http://HOST:PORT\")",
			       pf_quote(q, sizeof(q), s));
	}
	free(c->p->net.upstream_proxy);
	c->p->net.upstream_proxy = strdup(s);
	return c->p->net.upstream_proxy ? 0 : pf_oom(c);
}

static int parse_net_cafile(pf_ctx *c, json_t *v, const key_def *d)
{
	return set_path(c, v, &c->p->net.ca_file);
}

static int parse_net_elsewhere(pf_ctx *c, json_t *v, const key_def *d)
{
	return pf_get_elsewhere(c, v, &c->p->net.placeholder_elsewhere);
}

/* the `secrets` key: profile_secrets.c */
static int parse_secrets(pf_ctx *c, json_t *v, const key_def *d)
{
	return pf_parse_secrets(c, v);
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
#define LIST(n, f, it, fl)                                                         \
	{                                                                          \
		.name = n, .fn = parse_list, .off = PO(f), .item = it, .flags = fl \
	}
#define LIMIT(n, fl)                                                            \
	{                                                                       \
		.name = #n, .fn = parse_limit, .off = PO(limits.n), .flags = fl \
	}
#define SECTION(n, s)                                    \
	{                                                \
		.name = n, .fn = parse_section, .sub = s \
	}
#define END                  \
	{                    \
		.name = NULL \
	}

// clang-format off
static const key_def fs_keys[] = {
	LIST("read", fs.read, pf_item_path, F_UNIQUE),
	LIST("write", fs.write, item_wpath, F_UNIQUE),
	LIST("deny", fs.deny, pf_item_path, F_UNIQUE),
	LIST("protect", fs.protect, item_relpath, F_UNIQUE),
	LIST("tmpfs", fs.tmpfs, item_wpath, F_UNIQUE),
	LIST("guard", fs.guard, item_guard, F_UNIQUE),
	END,
};
// clang-format on

// clang-format off
static const key_def net_keys[] = {
	{ .name = "loopback_ports", .fn = parse_ports },
	LIST("allow", net.allow, pf_item_netrule, F_UNIQUE),
	LIST("deny", net.deny, pf_item_netrule, F_UNIQUE),
	LIST("private", net.priv, pf_item_netrule_private, F_UNIQUE),
	{ .name = "hosts", .fn = parse_net_hosts },
	{ .name = "transparent", .fn = parse_net_transparent },
	{ .name = "proxy_port", .fn = parse_net_port },
	{ .name = "log", .fn = parse_net_log },
	{ .name = "upstream_proxy", .fn = parse_net_upstream },
	{ .name = "ca_file", .fn = parse_net_cafile },
	{ .name = "placeholder_elsewhere", .fn = parse_net_elsewhere },
	END,
};
// clang-format on

// clang-format off
static const key_def env_keys[] = {
	LIST("pass", env.pass, item_envpat, F_UNIQUE),
	{ .name = "set", .fn = parse_env_set },
	END,
};
// clang-format on

static const key_def limit_keys[] = {
	LIMIT(nofile, 0),
	LIMIT(nproc, 0),
	LIMIT(fsize, F_SIZE),
	LIMIT(core, 0),
	LIMIT(memory, F_SIZE | F_POSITIVE),
	LIMIT(pids, F_POSITIVE),
	LIMIT(cpu, 0),
	END,
};

// clang-format off
static const key_def syscall_keys[] = {
	LIST("deny", syscalls.deny, item_syscall, F_UNIQUE | F_SHORT),
	LIST("allow", syscalls.allow, item_syscall, F_UNIQUE | F_SHORT),
	END,
};
// clang-format on

// clang-format off
static const key_def audit_keys[] = {
	{ .name = "exec", .fn = parse_audit_bool, .off = PO(audit.exec) },
	{ .name = "denials", .fn = parse_audit_bool, .off = PO(audit.denials) },
	END,
};
// clang-format on

/* workspace.mode: "direct" (the default) or "review" (docs/review.md) */
static int parse_ws_mode(pf_ctx *c, json_t *v, const key_def *d)
{
	const char *s;
	char q[100];
	int r = pf_get_str(c, v, &s);
	if (r < 0)
		return r;
	if (strcmp(s, "direct") != 0 && strcmp(s, "review") != 0)
		return pf_fail(c, "unknown workspace mode \"%s\" (known: direct, review)",
			       pf_quote(q, sizeof(q), s));
	c->p->workspace.review = strcmp(s, "review") == 0;
	return 0;
}

static const key_def workspace_keys[] = {
	{.name = "mode", .fn = parse_ws_mode},
	END,
};

static const key_def terminal_keys[] = {
	{.name = "clipboard", .fn = parse_audit_bool, .off = PO(terminal.clipboard)},
	END,
};

// clang-format off
static const key_def top_keys[] = {
	{ .name = "$schema", .fn = parse_text, .off = NO_TARGET },
	{ .name = "version", .fn = parse_noop },
	{ .name = "extends", .fn = parse_extends },
	{ .name = "description", .fn = parse_text, .off = PO(description) },
	LIST("command", command, pf_item_copy, 0),
	SECTION("filesystem", fs_keys),
	SECTION("network", net_keys),
	SECTION("env", env_keys),
	SECTION("limits", limit_keys),
	SECTION("syscalls", syscall_keys),
	{ .name = "secrets", .fn = parse_secrets },
	SECTION("audit", audit_keys),
	SECTION("terminal", terminal_keys),
	SECTION("workspace", workspace_keys),
	LIST("unix_sockets", unix_sockets, pf_item_path, F_UNIQUE),
	LIST("allow_downgrade", allow_downgrade, item_downgrade, F_UNIQUE),
	{ .name = "hostname", .fn = parse_hostname },
	{ .name = "ask", .fn = parse_audit_bool, .off = PO(ask) },
	{ .name = "descriptions", .fn = parse_descriptions },
	END,
};
// clang-format on

static int unknown_key(pf_ctx *c, const char *k, const key_def *defs)
{
	const char *names[24], *s;
	char q[100];
	size_t n = 0;
	int r;
	for (; defs->name && n + 1 < AB_ARRAY_SIZE(names); defs++)
		names[n++] = defs->name;
	names[n] = NULL;
	s = pf_suggest(k, names);
	pf_quote(q, sizeof(q), k);
	pf_push_key(c, k);
	if (s) {
		r = pf_fail_key(c, "unknown key \"%s\" (did you mean \"%s\"?)", q, s);
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
		r = pf_fail_key(c, "unknown key \"%s\" (known: %s)", q, known);
	}
	pf_pop(c);
	return r;
}

static int parse_object(pf_ctx *c, json_t *obj, const key_def *defs)
{
	const char *k;
	json_t *v;
	if (!json_is_object(obj))
		return pf_fail(c, "expected an object, got %s", pf_jtype(obj));
	json_object_foreach(obj, k, v)
	{
		const key_def *d = defs;
		while (d->name && strcmp(d->name, k) != 0)
			d++;
		if (!d->name)
			return unknown_key(c, k, defs);
		pf_push_key(c, k);
		int r = d->fn(c, v, d);
		pf_pop(c);
		if (r < 0)
			return r;
	}
	return 0;
}

int pf_validate(pf_ctx *c, json_t *root)
{
	json_t *v;
	int r = 0;
	if (!json_is_object(root))
		return pf_fail(c, "expected a JSON object at the top level, got %s",
			       pf_jtype(root));
	v = json_object_get(root, "version");
	if (!v)
		return pf_fail(c, "missing required key \"version\" (add \"version\": 1)");
	pf_push_key(c, "version");
	if (!json_is_integer(v))
		r = pf_fail(c, "expected an integer, got %s", pf_jtype(v));
	else if (json_integer_value(v) != 1)
		r = pf_fail(c, "unsupported version %lld (this agentbox reads version 1)",
			    (long long)json_integer_value(v));
	pf_pop(c);
	return r < 0 ? r : parse_object(c, root, top_keys);
}
