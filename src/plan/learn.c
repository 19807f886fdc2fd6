/* SPDX-License-Identifier: MIT */
/*
 * run --learn (parent, pure): the learning run's record, and the draft
 * profile made from it (include/agentbox/learn.h, docs/learn.md).
 *
 * A record is judged against the plan the learning run had: a path that
 * plan already showed (or let write) needs nothing; a path it did not show
 * is added when the host has it - the file itself, never a directory to
 * read; for a file the command could not create, the nearest directory the
 * host has.  Secrets, the home directory, startup locations (the planner's
 * own write-grant check), denied and protected paths are left out, each
 * with its reason.
 */
#include "agentbox/learn.h"

#include "agentbox/netpolicy.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ------------------------------------------------------------ the record */

static bool path_ok(enum ab_learn_kind kind, const char *what)
{
	if (kind == AB_LEARN_HOST)
		return true;
	if (what[0] != '/')
		return false;
	for (const char *p = what; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			return false;
	/* normalised (ab_sup_path_norm): no empty, "." or ".." component, no
	 * trailing slash, so that one file has one name */
	size_t n = strlen(what);
	if (strstr(what, "//") || strstr(what, "/./") || strstr(what, "/../") ||
	    (n > 1 && what[n - 1] == '/') || (n >= 2 && strcmp(what + n - 2, "/.") == 0) ||
	    (n >= 3 && strcmp(what + n - 3, "/..") == 0))
		return false;
	return true;
}

static char *prog_copy(const char *prog)
{
	size_t n = strnlen(prog, AB_LEARN_PROG_MAX - 1);
	char *c = malloc(n + 1);
	if (!c)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		unsigned char b = (unsigned char)prog[i];
		c[i] = b >= 0x20 && b < 0x7f ? (char)b : '?';
	}
	c[n] = '\0';
	return c;
}

static int add_prog(ab_learn_rec *r, const char *prog)
{
	if (!prog || !prog[0])
		return 0;
	size_t i = 0;
	for (; i < AB_LEARN_PROGS && r->progs[i]; i++)
		if (strncmp(r->progs[i], prog, AB_LEARN_PROG_MAX - 1) == 0)
			return 0;
	if (i == AB_LEARN_PROGS)
		return 0;
	r->progs[i] = prog_copy(prog);
	return r->progs[i] ? 0 : -ENOMEM;
}

int ab_learn_add(ab_learn_set *s, enum ab_learn_kind kind, const char *what, const char *prog)
{
	size_t len = what ? strnlen(what, AB_LEARN_WHAT_MAX + 1) : 0;
	if (len == 0 || !path_ok(kind, what))
		return -EINVAL;
	for (size_t i = 0; i < s->n; i++) {
		if (s->v[i].kind == kind && strcmp(s->v[i].what, what) == 0) {
			s->v[i].count++;
			return add_prog(&s->v[i], prog);
		}
	}
	if (len > AB_LEARN_WHAT_MAX || s->n >= AB_LEARN_MAX) {
		s->dropped++;
		return -E2BIG;
	}
	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 64;
		ab_learn_rec *v = realloc(s->v, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		s->v = v;
		s->cap = cap;
	}
	ab_learn_rec *r = &s->v[s->n];
	*r = (ab_learn_rec){.kind = kind, .what = strdup(what), .count = 1};
	if (!r->what)
		return -ENOMEM;
	s->n++;
	return add_prog(r, prog);
}

void ab_learn_set_free(ab_learn_set *s)
{
	for (size_t i = 0; i < s->n; i++) {
		free(s->v[i].what);
		for (size_t k = 0; k < AB_LEARN_PROGS; k++)
			free(s->v[i].progs[k]);
	}
	free(s->v);
	*s = (ab_learn_set){0};
}

int ab_learn_real_stat(void *ctx, const char *path, bool *is_dir)
{
	struct stat st;
	if (lstat(path, &st) < 0)
		return -errno;
	*is_dir = S_ISDIR(st.st_mode);
	return 0;
}

/* ------------------------------------------------------------ judging */

/* Credentials and keys under a home: never learned, whatever read them (the
 * files of test-escape's SEC-02 probe and the key stores). */
// clang-format off
static const char *const secret_paths[] = {
	"/.ssh", "/.gnupg", "/.aws", "/.azure", "/.kube", "/.docker", "/.config/gcloud",
	"/.config/gh", "/.config/hub", "/.git-credentials", "/.config/git/credentials",
	"/.netrc", "/.npmrc", "/.yarnrc.yml", "/.pypirc", "/.config/pip/pip.conf",
	"/.cargo/credentials.toml", "/.cargo/credentials", "/.m2/settings.xml",
	"/.gradle/gradle.properties", "/.terraform.d", "/.vault-token", "/.pgpass",
	"/.my.cnf", "/.s3cfg", "/.boto", "/.config/rclone", "/.config/doctl",
	"/.cache/huggingface/token", "/.huggingface", "/.claude/.credentials.json",
	"/.codex/auth.json", "/.config/github-copilot", "/.local/share/keyrings",
	"/.password-store", "/.mozilla", "/.config/google-chrome", "/.config/chromium",
	"/.bash_history", "/.zsh_history", "/.python_history", "/.node_repl_history",
	"/.psql_history", "/.mysql_history", "/.lesshst", "/.viminfo",
};
// clang-format on

static const char *secret_in(const char *home, const char *path, char *buf, size_t size)
{
	for (size_t i = 0; home && i < AB_ARRAY_SIZE(secret_paths); i++) {
		int n = snprintf(buf, size, "%s%s", home, secret_paths[i]);
		if (n < 0 || (size_t)n >= size)
			continue;
		/* the secret itself, below it, or a directory holding it */
		if (ab_path_is_under(path, buf) || ab_path_is_under(buf, path))
			return buf;
	}
	return NULL;
}

static const char *secret_of(const ab_plan *p, const char *path, char *buf, size_t size)
{
	const char *s = secret_in(p->home, path, buf, size);
	for (size_t i = 0; !s && i < p->other_homes.n; i++)
		s = secret_in(p->other_homes.v[i], path, buf, size);
	return s;
}

static bool is_home(const ab_plan *p, const char *path)
{
	if (p->home && ab_path_is_under(p->home, path))
		return true;
	for (size_t i = 0; i < p->other_homes.n; i++)
		if (ab_path_is_under(p->other_homes.v[i], path))
			return true;
	return false;
}

/* The mounts of the plan that decide PATH: the deepest covering grant (a
 * bind or tmpfs) and the deepest mask, protection or content over it. */
typedef struct cover {
	const ab_mount *grant, *over;
} cover;

static cover cover_of(const ab_plan *p, const char *path)
{
	cover c = {0};
	for (size_t i = 0; i < p->nmounts; i++) {
		const ab_mount *m = &p->mounts[i];
		if (!ab_path_is_under(path, m->dst))
			continue;
		bool grant = m->kind == AB_MNT_BIND_RO || m->kind == AB_MNT_BIND_RW ||
			     m->kind == AB_MNT_TMPFS;
		bool over = m->kind == AB_MNT_MASK || m->kind == AB_MNT_PROTECT ||
			    m->kind == AB_MNT_PLACEHOLDER || m->kind == AB_MNT_CONTENT ||
			    m->kind == AB_MNT_RO_REMOUNT;
		if (grant && (!c.grant || strlen(m->dst) >= strlen(c.grant->dst)))
			c.grant = m;
		if (over && (!c.over || strlen(m->dst) >= strlen(c.over->dst)))
			c.over = m;
	}
	if (c.over && c.grant && strlen(c.over->dst) < strlen(c.grant->dst))
		c.over = NULL; /* a grant deeper than the mask shows it again */
	return c;
}

static bool pseudo_fs(const char *path)
{
	static const char *const roots[] = {"/proc", "/sys", "/dev"};
	for (size_t i = 0; i < AB_ARRAY_SIZE(roots); i++)
		if (ab_path_is_under(path, roots[i]))
			return true;
	return false;
}

/* Top-level and system directories: never a learned write grant. */
static bool system_dir(const char *path)
{
	static const char *const dirs[] = {"/",    "/etc",   "/usr",   "/bin",     "/sbin",
					   "/lib", "/lib32", "/lib64", "/libx32",  "/boot",
					   "/opt", "/var",   "/home",  "/root",    "/srv",
					   "/mnt", "/media", "/tmp",   "/var/tmp", "/run"};
	for (size_t i = 0; i < AB_ARRAY_SIZE(dirs); i++)
		if (strcmp(path, dirs[i]) == 0)
			return true;
	return ab_path_is_under(path, "/usr") || ab_path_is_under(path, "/boot");
}

typedef enum verdict { V_SKIP, V_READ, V_WRITE, V_LEFT } verdict;

typedef struct judged {
	verdict v;
	char *target; /* V_READ, V_WRITE: the entry (malloc'd) */
	char *why;    /* V_LEFT: the reason (malloc'd) */
} judged;

static judged left(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static judged left(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char *w = NULL;
	if (vasprintf(&w, fmt, ap) < 0)
		w = NULL;
	va_end(ap);
	return (judged){.v = w ? V_LEFT : V_SKIP, .why = w};
}

static judged judge_read(const ab_learn_input *in, const char *path, const cover *c)
{
	const ab_plan *p = in->plan;
	char buf[4200];
	bool dir = false;
	if (ab_plan_shows(p, path) || in->stat(in->stat_ctx, path, &dir) < 0)
		return (judged){.v = V_SKIP}; /* seen already, or the host has nothing */
	if (c->over && c->over->kind == AB_MNT_MASK)
		return left("denied by the profile (filesystem.deny %s)", c->over->dst);
	if (secret_of(p, path, buf, sizeof(buf)))
		return left("a secret or credentials path (%s): never learned", buf);
	if (dir)
		return left("a directory: a grant would show everything below it; name the "
			    "files it needs");
	if (is_home(p, path))
		return left("the home directory");
	ab_err e = {0};
	if (ab_plan_check_write_grant(p, path, &e) < 0)
		return left(
			"a startup or configuration file of the shell, an editor or git (it "
			"may hold exported secrets): never learned, grant it by hand if needed");
	char *t = strdup(path);
	return (judged){.v = t ? V_READ : V_SKIP, .target = t};
}

/* The nearest directory the host has, at or above PATH's parent. */
static char *existing_parent(const ab_learn_input *in, const char *path)
{
	char *d = strdup(path);
	while (d) {
		char *slash = strrchr(d, '/');
		if (!slash || slash == d) {
			free(d);
			return strdup("/");
		}
		*slash = '\0';
		bool dir = false;
		if (in->stat(in->stat_ctx, d, &dir) == 0)
			return dir ? d : (free(d), NULL);
	}
	return NULL;
}

static bool writable(const cover *c)
{
	return c->grant && !c->over &&
	       (c->grant->kind == AB_MNT_BIND_RW || c->grant->kind == AB_MNT_TMPFS);
}

/* CREATE: the sandbox lacked the new file's directory, which a private
 * tmpfs over a host directory explains */
static judged judge_write(const ab_learn_input *in, const char *path, const cover *c, bool create)
{
	const ab_plan *p = in->plan;
	char buf[4200];
	bool dir = false;
	if (writable(c) && (!create || c->grant->kind != AB_MNT_TMPFS))
		return (judged){.v = V_SKIP}; /* the plan let it write there */
	if (c->over && c->over->kind == AB_MNT_MASK)
		return left("denied by the profile (filesystem.deny %s)", c->over->dst);
	if (c->over)
		return left("protected (%s stays read-only in every run)", c->over->dst);
	_cleanup_free_ char *t = NULL;
	bool tmpfs = c->grant && c->grant->kind == AB_MNT_TMPFS;
	if (in->stat(in->stat_ctx, path, &dir) == 0)
		t = strdup(path);
	else if (tmpfs && !create)
		return (judged){.v = V_SKIP}; /* a new file in a private tmpfs */
	else
		t = existing_parent(in, path);
	if (!t || (tmpfs && !ab_path_is_under(t, c->grant->dst)) ||
	    (tmpfs && strcmp(t, c->grant->dst) == 0))
		return (judged){.v = V_SKIP}; /* the sandbox has that directory */
	if (is_home(p, t))
		return left("needs %s writable, which is (or holds) the home directory", t);
	if (secret_of(p, t, buf, sizeof(buf)))
		return left("a secret or credentials path (%s): never learned", buf);
	if (system_dir(t))
		return left("needs %s writable, a system directory", t);
	ab_err e = {0};
	if (ab_plan_check_write_grant(p, t, &e) < 0)
		return left("%s", e.msg);
	return (judged){.v = V_WRITE, .target = TAKE_PTR(t)};
}

static judged judge(const ab_learn_input *in, const ab_learn_rec *r)
{
	const ab_plan *p = in->plan;
	if (r->kind == AB_LEARN_HOST || pseudo_fs(r->what) ||
	    (p->workspace && ab_path_is_under(r->what, p->workspace)))
		return (judged){.v = V_SKIP};
	/* what a profile could not say as it is: its loader expands "${" and
	 * reads JSON text (UTF-8) */
	json_t *utf8 = json_string(r->what);
	json_decref(utf8);
	if (!utf8 || strstr(r->what, "${"))
		return left("cannot be written in a profile as it is (%s)",
			    utf8 ? "it holds \"${\", which a profile expands" : "not UTF-8 text");
	cover c = cover_of(p, r->what);
	if (r->kind == AB_LEARN_WRITE || r->kind == AB_LEARN_CREATE)
		return judge_write(in, r->what, &c, r->kind == AB_LEARN_CREATE);
	return judge_read(in, r->what, &c);
}

bool ab_learn_matters(const ab_plan *plan, enum ab_learn_kind kind, const char *path,
		      ab_learn_stat_fn stat, void *stat_ctx)
{
	ab_learn_input in = {.plan = plan, .stat = stat, .stat_ctx = stat_ctx};
	ab_learn_rec r = {.kind = kind, .what = (char *)path};
	if (kind == AB_LEARN_HOST || !path_ok(kind, path))
		return false;
	judged j = judge(&in, &r);
	free(j.target);
	free(j.why);
	return j.v != V_SKIP;
}

/* ------------------------------------------------------------ the draft */

static const char *verb(enum ab_learn_kind k)
{
	switch (k) {
	case AB_LEARN_READ: return "read by";
	case AB_LEARN_WRITE:
	case AB_LEARN_CREATE: return "written by";
	case AB_LEARN_EXEC: return "run by";
	default: return "reached by";
	}
}

static char *describe(const ab_learn_rec *r)
{
	char progs[AB_LEARN_PROGS * AB_LEARN_PROG_MAX + 16] = "";
	size_t o = 0;
	for (size_t i = 0; i < AB_LEARN_PROGS && r->progs[i]; i++) {
		int n = snprintf(progs + o, sizeof(progs) - o, "%s%s", i ? ", " : "", r->progs[i]);
		if (n < 0 || (size_t)n >= sizeof(progs) - o)
			break;
		o += (size_t)n;
	}
	return ab_asprintf("%s %s (learned)", verb(r->kind), o ? progs : "the command");
}

/* "~/rest" for a path under the home, so the draft follows $HOME */
static char *entry_text(const ab_plan *p, const char *path)
{
	size_t hl = p->home ? strlen(p->home) : 0;
	if (hl > 1 && strncmp(path, p->home, hl) == 0 && path[hl] == '/')
		return ab_asprintf("~%s", path + hl);
	return strdup(path);
}

typedef struct draft {
	json_t *read, *write, *allow, *descr;
} draft;

static int describe_entry(draft *d, const char *list, const char *entry, const ab_learn_rec *r)
{
	json_t *l = json_object_get(d->descr, list);
	if (!l) {
		l = json_object();
		if (!l || json_object_set_new(d->descr, list, l) < 0)
			return -ENOMEM;
	}
	if (json_object_get(l, entry))
		return 0; /* the first record named it */
	_cleanup_free_ char *text = describe(r);
	json_t *s = text ? json_string(text) : NULL;
	return s && json_object_set_new(l, entry, s) == 0 ? 0 : -ENOMEM;
}

static int push_unique(json_t *arr, const char *s)
{
	size_t i;
	json_t *v;
	json_array_foreach(arr, i, v) if (strcmp(json_string_value(v), s) == 0) return 0;
	return json_array_append_new(arr, json_string(s)) == 0 ? 0 : -ENOMEM;
}

static int strcmp_p(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Judge every path record: the write targets first (a directory granted
 * covers what lies below it), then the reads not under one. */
static int judge_paths(const ab_learn_input *in, ab_learn_result *out, ab_strv *reads,
		       ab_strv *writes, size_t *rec_of_read, size_t *rec_of_write)
{
	for (size_t i = 0; i < in->paths->n; i++) {
		const ab_learn_rec *r = &in->paths->v[i];
		judged j = judge(in, r);
		_cleanup_free_ char *t = j.target, *w = j.why;
		int rc = 0;
		if (j.v == V_LEFT) {
			char *line = ab_asprintf("%s: %s", r->what, w);
			rc = line ? ab_strv_push_take(&out->left, line) : -ENOMEM;
		} else if (j.v == V_READ && !ab_strv_contains(reads, t)) {
			rec_of_read[reads->n] = i;
			rc = ab_strv_push(reads, t);
		} else if (j.v == V_WRITE && !ab_strv_contains(writes, t)) {
			rec_of_write[writes->n] = i;
			rc = ab_strv_push(writes, t);
		}
		if (rc < 0)
			return rc;
	}
	return 0;
}

static int emit_paths(const ab_learn_input *in, draft *d, ab_learn_result *out, const ab_strv *list,
		      const size_t *rec_of, const ab_strv *writes, bool is_write)
{
	const char *name = is_write ? "filesystem.write" : "filesystem.read";
	for (size_t i = 0; i < list->n; i++) {
		const char *path = list->v[i];
		/* narrowest: an entry under a granted write directory is covered */
		bool covered = false;
		for (size_t k = 0; k < writes->n && !covered; k++)
			covered = (!is_write || strcmp(writes->v[k], path) != 0) &&
				  ab_path_is_under(path, writes->v[k]);
		if (covered)
			continue;
		_cleanup_free_ char *e = entry_text(in->plan, path);
		char *line = e ? ab_asprintf("%s %s", name, e) : NULL;
		if (!line || push_unique(is_write ? d->write : d->read, e) < 0 ||
		    describe_entry(d, name, e, &in->paths->v[rec_of[i]]) < 0 ||
		    ab_strv_push_take(&out->added, line) < 0)
			return -ENOMEM;
	}
	return 0;
}

static int emit_hosts(const ab_learn_input *in, draft *d, ab_learn_result *out)
{
	for (size_t i = 0; in->hosts && i < in->hosts->n; i++) {
		const ab_learn_rec *r = &in->hosts->v[i];
		ab_netrule rule;
		ab_err e = {0};
		if (r->kind != AB_LEARN_HOST)
			continue;
		if (ab_netrule_parse(r->what, &rule, &e) < 0) {
			char *line = ab_asprintf("%s: not a valid network rule", r->what);
			if (!line || ab_strv_push_take(&out->left, line) < 0)
				return -ENOMEM;
			continue;
		}
		char *line = ab_asprintf("network.allow %s", r->what);
		if (!line || push_unique(d->allow, r->what) < 0 ||
		    describe_entry(d, "network.allow", r->what, r) < 0 ||
		    ab_strv_push_take(&out->added, line) < 0)
			return -ENOMEM;
	}
	return 0;
}

static json_t *header(const ab_learn_input *in)
{
	char cmd[512] = "";
	size_t o = 0;
	for (size_t i = 0; in->argv && i < in->argv->n; i++) {
		int n = snprintf(cmd + o, sizeof(cmd) - o, "%s%s", i ? " " : "", in->argv->v[i]);
		if (n < 0 || (size_t)n >= sizeof(cmd) - o) {
			snprintf(cmd + sizeof(cmd) - 4, 4, "...");
			break;
		}
		o += (size_t)n;
	}
	for (char *c = cmd; *c; c++)
		if ((unsigned char)*c < 0x20 || *c == 0x7f)
			*c = '?';
	_cleanup_free_ char *desc = ab_asprintf("Learned by `agentbox run --learn` from `%s`: a "
						"draft to review, not an authority",
						cmd);
	json_t *root = json_object();
	json_t *ext = json_array();
	for (size_t i = 0; ext && in->extends && i < in->extends->n; i++)
		if (json_array_append_new(ext, json_string(in->extends->v[i])) < 0)
			break;
	if (!root || !ext || !desc || json_object_set_new(root, "version", json_integer(1)) < 0 ||
	    json_object_set_new(root, "description", json_string(desc)) < 0 ||
	    json_object_set_new(root, "extends", ext) < 0) {
		json_decref(root);
		return NULL;
	}
	return root;
}

static int assemble(json_t *root, draft *d)
{
	json_t *fs = json_object(), *net = json_object();
	int bad = !fs || !net;
	if (!bad && json_array_size(d->read))
		bad |= json_object_set(fs, "read", d->read);
	if (!bad && json_array_size(d->write))
		bad |= json_object_set(fs, "write", d->write);
	if (!bad && json_array_size(d->allow))
		bad |= json_object_set(net, "allow", d->allow);
	if (!bad && json_object_size(fs))
		bad |= json_object_set(root, "filesystem", fs);
	if (!bad && json_object_size(net))
		bad |= json_object_set(root, "network", net);
	if (!bad && json_object_size(d->descr))
		bad |= json_object_set(root, "descriptions", d->descr);
	json_decref(fs);
	json_decref(net);
	return bad ? -ENOMEM : 0;
}

static int build(const ab_learn_input *in, ab_learn_result *out, draft *d)
{
	size_t n = in->paths ? in->paths->n : 0;
	_cleanup_free_ size_t *rr = calloc(n + 1, sizeof(size_t));
	_cleanup_free_ size_t *rw = calloc(n + 1, sizeof(size_t));
	_cleanup_strv_ ab_strv reads = {0}, writes = {0};
	int r;
	if (!rr || !rw)
		return -ENOMEM;
	if (in->paths && (r = judge_paths(in, out, &reads, &writes, rr, rw)) < 0)
		return r;
	if ((r = emit_paths(in, d, out, &writes, rw, &writes, true)) < 0 ||
	    (r = emit_paths(in, d, out, &reads, rr, &writes, false)) < 0 ||
	    (r = emit_hosts(in, d, out)) < 0)
		return r;
	json_t *lists[] = {d->read, d->write, d->allow};
	for (size_t i = 0; i < AB_ARRAY_SIZE(lists); i++) {
		/* sorted, so a draft is the same for the same run */
		size_t k = json_array_size(lists[i]);
		_cleanup_free_ const char **s = calloc(k + 1, sizeof(*s));
		if (!s)
			return -ENOMEM;
		for (size_t j = 0; j < k; j++)
			s[j] = strdup(json_string_value(json_array_get(lists[i], j)));
		qsort(s, k, sizeof(*s), strcmp_p);
		json_array_clear(lists[i]);
		for (size_t j = 0; j < k; j++) {
			if (!s[j] || json_array_append_new(lists[i], json_string(s[j])) < 0)
				r = -ENOMEM;
			free((char *)s[j]);
		}
		if (r < 0)
			return r;
	}
	if (out->left.n > 1)
		qsort(out->left.v, out->left.n, sizeof(char *), strcmp_p);
	return assemble(out->profile, d);
}

int ab_learn_build(const ab_learn_input *in, ab_learn_result *out, ab_err *err)
{
	*out = (ab_learn_result){0};
	draft d = {json_array(), json_array(), json_array(), json_object()};
	out->profile = header(in);
	int r = out->profile && d.read && d.write && d.allow && d.descr ? build(in, out, &d)
									: -ENOMEM;
	json_decref(d.read);
	json_decref(d.write);
	json_decref(d.allow);
	json_decref(d.descr);
	if (r < 0) {
		ab_learn_result_free(out);
		return ab_fail(err, -r, "learn: the draft profile");
	}
	if (in->paths && in->paths->dropped) {
		char *line = ab_asprintf("(%llu more records): the record is full "
					 "(at most %d distinct paths); run --learn again with "
					 "the draft to see the rest",
					 (unsigned long long)in->paths->dropped, AB_LEARN_MAX);
		if (line)
			ab_strv_push_take(&out->left, line);
	}
	return 0;
}

void ab_learn_result_free(ab_learn_result *r)
{
	json_decref(r->profile);
	ab_strv_free(&r->added);
	ab_strv_free(&r->left);
	*r = (ab_learn_result){0};
}
