/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for src/config/profile*.c (no privileges): every fixture under
 * fixtures/profiles/valid loads with the expected values; every fixture under
 * fixtures/profiles/invalid fails with the exact message (and hint) in its
 * .err file; the position locator on tricky and hostile input; variables,
 * sizes, extends/merge/cycles/depth, lookup, size limits, the shipped
 * profiles (profiles/ *.json), and schema.json against the parser's key tables.
 */
#include "unit.h"

#include "agentbox/profile.h"

#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef AB_DATADIR
#define AB_DATADIR "/usr/local/share/agentbox"
#endif

#define FIX AB_SRCDIR "/tests/unit/fixtures/profiles"
#define STRV(...) ((const char *const[]){__VA_ARGS__, NULL})
#define NO_STRINGS ((const char *const[]){NULL})

static const ab_vars V = {.home = "/home/user", .workspace = "/work/ws", .user = "user"};

/* ---------------------------------------------------------------- helpers */

static char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rbe");
	char *buf = NULL;
	size_t n = 0;
	if (!f)
		return NULL;
	buf = malloc(2 * 1024 * 1024);
	if (buf) {
		n = fread(buf, 1, 2 * 1024 * 1024 - 1, f);
		buf[n] = '\0';
	}
	fclose(f);
	if (len)
		*len = n;
	return buf;
}

/* s with every `pat` replaced by `rep` (malloc'd). */
static char *subst(const char *s, const char *pat, const char *rep)
{
	size_t lp = strlen(pat), lr = strlen(rep), n = 0;
	for (const char *p = s; (p = strstr(p, pat)); p += lp)
		n++;
	char *out = malloc(strlen(s) + n * lr + 1), *o = out;
	assert_non_null(out);
	for (const char *p = s;;) {
		const char *q = strstr(p, pat);
		size_t k = q ? (size_t)(q - p) : strlen(p);
		memcpy(o, p, k);
		o += k;
		if (!q)
			break;
		memcpy(o, rep, lr);
		o += lr;
		p = q + lp;
	}
	*o = '\0';
	return out;
}

static void write_file(const char *path, const char *content)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, content, strlen(content)), (ssize_t)strlen(content));
	close(fd);
}

static void rm_rf(const char *dir)
{
	char *cmd = ab_asprintf("rm -rf -- '%s'", dir);
	assert_non_null(cmd);
	assert_int_equal(system(cmd), 0);
	free(cmd);
}

static char *tmpdir(void)
{
	char *d = strdup("/tmp/ab-test-profile-XXXXXX");
	assert_non_null(d);
	assert_non_null(mkdtemp(d));
	return d;
}

static ab_profile *load_ok(const char *name, const ab_vars *v)
{
	ab_err e = {0};
	ab_profile *p = NULL;
	int r = ab_profile_load(name, v, &p, &e);
	if (r < 0)
		print_error("loading %s: %s\n", name, e.msg);
	assert_int_equal(r, 0);
	assert_non_null(p);
	return p;
}

static ab_profile *buf_ok_as(const char *json, const char *fname)
{
	ab_err e = {0};
	ab_profile *p = NULL;
	int r = ab_profile_load_buffer(json, strlen(json), fname, &V, &p, &e);
	if (r < 0)
		print_error("%s\n", e.msg);
	assert_int_equal(r, 0);
	return p;
}

/* Loading `json` as /x/p.json fails with exactly `want` and exit code 125. */
static void buf_err_v(const char *json, size_t len, const ab_vars *v, const char *want)
{
	ab_err e = {0};
	ab_profile *p = NULL;
	int r = ab_profile_load_buffer(json, len, "/x/p.json", v, &p, &e);
	assert_true(r < 0);
	assert_null(p);
	assert_int_equal(e.exit_code, AB_EXIT_FAIL);
	assert_string_equal(e.msg, want);
}

static void buf_err(const char *json, const char *want)
{
	buf_err_v(json, strlen(json), &V, want);
}

static void assert_strv(const ab_strv *s, const char *const *want)
{
	size_t n = 0;
	while (want[n])
		n++;
	if (s->n != n)
		for (size_t i = 0; i < s->n; i++)
			print_error("  got [%zu] %s\n", i, s->v[i]);
	assert_int_equal(s->n, n);
	assert_non_null(s->v); /* loaded profiles always have NULL-terminated arrays */
	for (size_t i = 0; i < n; i++)
		assert_string_equal(s->v[i], want[i]);
	assert_null(s->v[n]);
}

static const char *env_get(const ab_profile *p, const char *k)
{
	for (size_t i = 0; i < p->env.nset; i++)
		if (strcmp(p->env.set[i].key, k) == 0)
			return p->env.set[i].val;
	return NULL;
}

static void assert_limits_unset(const ab_limits *l)
{
	assert_true(l->nofile == AB_LIMIT_UNSET && l->nproc == AB_LIMIT_UNSET &&
		    l->fsize == AB_LIMIT_UNSET && l->core == AB_LIMIT_UNSET &&
		    l->memory == AB_LIMIT_UNSET && l->pids == AB_LIMIT_UNSET &&
		    l->cpu == AB_LIMIT_UNSET);
}

/* ---------------------------------------------------------- valid fixtures */

static void test_valid_fixtures_all_load(void **state)
{
	glob_t g;
	assert_int_equal(glob(FIX "/valid/*.json", 0, NULL, &g), 0);
	assert_true(g.gl_pathc >= 5);
	for (size_t i = 0; i < g.gl_pathc; i++) {
		ab_profile *p = load_ok(g.gl_pathv[i], &V);
		assert_string_equal(p->name, g.gl_pathv[i]);
		assert_string_equal(p->path, g.gl_pathv[i]);
		assert_string_equal(p->files.v[p->files.n - 1], g.gl_pathv[i]);
		ab_profile_free(p);
	}
	globfree(&g);
}

static void test_valid_minimal(void **state)
{
	ab_profile *p = load_ok(FIX "/valid/minimal.json", &V);
	assert_null(p->description);
	assert_null(p->hostname);
	assert_strv(&p->files, STRV(FIX "/valid/minimal.json"));
	assert_strv(&p->command, NO_STRINGS);
	assert_strv(&p->fs.read, NO_STRINGS);
	assert_strv(&p->fs.protect, NO_STRINGS);
	assert_strv(&p->allow_downgrade, NO_STRINGS);
	assert_int_equal(p->env.nset, 0);
	assert_int_equal(p->loopback.nports, 0);
	assert_false(p->loopback.any);
	assert_limits_unset(&p->limits);
	ab_profile_free(p);
}

static void test_valid_full(void **state)
{
	ab_profile *p = load_ok(FIX "/valid/full.json", &V);
	assert_string_equal(p->description, "every key, once");
	assert_strv(&p->command, STRV("bash", "-l", "bash")); /* not deduplicated */
	assert_strv(&p->fs.read, STRV("/usr", "/etc/ssl/certs", "/home/user/.config/git",
				      "/home/user/.local/share/fonts"));
	assert_strv(&p->fs.write, STRV("/work/ws", "/home/user/.cache/pip", "/var/tmp/x"));
	assert_strv(&p->fs.deny, STRV("/work/ws/.env", "/home/user/.ssh"));
	assert_strv(&p->fs.protect, STRV(".git/hooks", ".vscode/", "a/b", ".envrc"));
	assert_strv(&p->fs.tmpfs, STRV("/tmp", "/home/user/.npm"));
	assert_int_equal(p->loopback.nports, 2);
	assert_int_equal(p->loopback.ports[0], 8080);
	assert_int_equal(p->loopback.ports[1], 3000);
	assert_false(p->loopback.any);
	assert_strv(&p->env.pass, STRV("TERM", "LC_*", "_X"));
	assert_int_equal(p->env.nset, 4);
	assert_string_equal(p->env.set[0].key, "EDITOR");
	assert_string_equal(env_get(p, "EDITOR"), "vi");
	assert_string_equal(env_get(p, "CACHE"), "/home/user/.cache/tool");
	assert_string_equal(env_get(p, "WHO"), "user@~"); /* ~ only at the start */
	assert_string_equal(env_get(p, "HISTFILE"), "");
	assert_true(p->limits.nofile == 4096);
	assert_true(p->limits.nproc == 2048);
	assert_true(p->limits.fsize == 8LL << 30);
	assert_true(p->limits.core == 0);
	assert_true(p->limits.memory == 512LL << 20);
	assert_true(p->limits.pids == LLONG_MAX);
	assert_true(p->limits.cpu == 3600);
	assert_strv(&p->syscalls.deny, STRV("ptrace", "io_uring_setup"));
	assert_strv(&p->syscalls.allow, STRV("personality"));
	assert_strv(&p->unix_sockets, STRV("/run/user/1000/ssh-agent.sock"));
	assert_strv(&p->allow_downgrade, STRV("landlock-net", "cgroup-limits"));
	assert_string_equal(p->hostname, "box-1.local");
	ab_profile_free(p);
}

static void test_valid_escapes(void **state)
{
	ab_profile *p = load_ok(FIX "/valid/escapes.json", &V);
	assert_string_equal(p->description, "say \"hi\" \xe2\x9c\x93 \xf0\x9f\x98\x80 \\ /");
	assert_string_equal(p->hostname, "h");
	ab_profile_free(p);
}

/* extends by name finds the sibling base.json; child values on top. */
static void test_extends_child(void **state)
{
	ab_profile *p = load_ok(FIX "/valid/child.json", &V);
	assert_strv(&p->files, STRV(FIX "/valid/base.json", FIX "/valid/child.json"));
	assert_string_equal(p->description, "base");
	assert_string_equal(p->hostname, "base");
	assert_strv(&p->command, STRV("sh"));
	assert_strv(&p->fs.read, STRV("/usr", "/etc", "/opt"));
	assert_strv(&p->fs.write, STRV("/work/ws"));
	assert_strv(&p->fs.deny, STRV("/etc/shadow"));
	assert_strv(&p->fs.protect, STRV(".git/hooks"));
	assert_int_equal(p->env.nset, 3);
	assert_string_equal(p->env.set[0].key, "A");
	assert_string_equal(p->env.set[1].key, "B");
	assert_string_equal(p->env.set[2].key, "C");
	assert_string_equal(env_get(p, "A"), "base-a");
	assert_string_equal(env_get(p, "B"), "child-b");
	assert_string_equal(env_get(p, "C"), "child-c");
	assert_true(p->limits.nofile == 4096);
	assert_true(p->limits.core == 0);
	assert_true(p->limits.memory == AB_LIMIT_UNSET);
	assert_int_equal(p->loopback.nports, 1);
	assert_strv(&p->syscalls.deny, STRV("ptrace"));
	assert_strv(&p->allow_downgrade, STRV("landlock-net"));
	ab_profile_free(p);
}

/* Two bases merged in order (a name and a relative path), then the file. */
static void test_extends_multi(void **state)
{
	ab_profile *p = load_ok(FIX "/valid/multi.json", &V);
	assert_strv(&p->files, STRV(FIX "/valid/base.json", FIX "/valid/sub/other.json",
				    FIX "/valid/multi.json"));
	assert_string_equal(p->description, "multi");
	assert_string_equal(p->hostname, "other");
	assert_strv(&p->command, STRV("sh")); /* other.json's [] keeps it */
	assert_strv(&p->fs.read, STRV("/usr", "/etc", "/srv"));
	assert_strv(&p->fs.deny, STRV("/etc/shadow", "/root"));
	assert_strv(&p->env.pass, STRV("TERM", "LANG"));
	assert_string_equal(env_get(p, "A"), "other-a");
	assert_string_equal(env_get(p, "B"), "base-b");
	assert_true(p->loopback.any);
	assert_int_equal(p->loopback.nports, 2);
	assert_int_equal(p->loopback.ports[0], 3000);
	assert_int_equal(p->loopback.ports[1], 8080);
	assert_true(p->limits.nofile == 1024);
	assert_true(p->limits.memory == 1LL << 30);
	assert_true(p->limits.core == 1);
	ab_profile_free(p);
}

/* ---------------------------------------------------------- invalid fixtures */

static void check_invalid(const char *path)
{
	char *errpath = strdup(path), *want = NULL, *hint = NULL, *dir = strdup(path);
	ab_err e = {0};
	ab_profile *p = NULL;
	assert_non_null(errpath);
	assert_non_null(dir);
	strcpy(errpath + strlen(errpath) - 5, ".err");
	*strrchr(dir, '/') = '\0';
	char *raw = slurp(errpath, NULL);
	if (!raw)
		print_error("%s: missing expected-message file %s\n", path, errpath);
	assert_non_null(raw);
	want = subst(raw, "@DIR@", dir);
	char *nl = strchr(want, '\n');
	if (nl) {
		*nl = '\0';
		if (strncmp(nl + 1, "Hint: ", 6) == 0) {
			hint = nl + 7;
			hint[strcspn(hint, "\n")] = '\0';
		}
	}
	int r = ab_profile_load(path, &V, &p, &e);
	if (r >= 0 || strcmp(e.msg, want) != 0)
		print_error("fixture %s\n  want: %s\n  got:  %s\n", path, want,
			    r >= 0 ? "(loaded)" : e.msg);
	assert_true(r < 0);
	assert_null(p);
	assert_string_equal(e.msg, want);
	assert_int_equal(e.exit_code, AB_EXIT_FAIL);
	if (hint)
		assert_string_equal(e.hint, hint);
	free(raw);
	free(want);
	free(errpath);
	free(dir);
}

static void test_invalid_fixtures(void **state)
{
	glob_t g;
	assert_int_equal(glob(FIX "/invalid/*.json", 0, NULL, &g), 0);
	assert_true(g.gl_pathc >= 60);
	for (size_t i = 0; i < g.gl_pathc; i++)
		check_invalid(g.gl_pathv[i]);
	print_message("%zu invalid fixtures fail with their exact messages\n", g.gl_pathc);
	globfree(&g);
}

/* The examples of the format description, byte for byte. */
static void test_spec_examples(void **state)
{
	buf_err("{\n\"version\": 1,\n\"filesystem\": {\n\"read\":\n[\n\n\"/a\", \"/bc\", 7\n]}}",
		"/x/p.json:7:14: filesystem.read[2]: expected a string, got an integer");
	buf_err("{\n  \"version\": 1,\n    \"filesytem\": {}\n}",
		"/x/p.json:3:5: unknown key \"filesytem\" (did you mean \"filesystem\"?)");
	buf_err("{\n\"version\": 1,\n\"limits\": {\n\n\n\n\n\n\n\n\n\"fsize\":\"8Q\"}}",
		"/x/p.json:12:9: limits.fsize: invalid size \"8Q\" (use a number with an "
		"optional K, M, G or T suffix, or \"unlimited\")");
}

static void test_did_you_mean(void **state)
{
	static const struct {
		const char *json, *msg;
	} cases[] = {
		{"{\"version\":1,\"hostnme\":\"x\"}",
		 "/x/p.json:1:14: unknown key \"hostnme\" (did you mean \"hostname\"?)"},
		{"{\"version\":1,\"hstnme\":\"x\"}", /* distance 2 */
		 "/x/p.json:1:14: unknown key \"hstnme\" (did you mean \"hostname\"?)"},
		{"{\"version\":1,\"Version\":1}",
		 "/x/p.json:1:14: unknown key \"Version\" (did you mean \"version\"?)"},
		{"{\"version\":1,\"filesystem\":{\"raed\":[]}}", /* transposition */
		 "/x/p.json:1:28: filesystem: unknown key \"raed\" (did you mean \"read\"?)"},
		{"{\"version\":1,\"limits\":{\"nofiles\":1}}",
		 "/x/p.json:1:24: limits: unknown key \"nofiles\" (did you mean \"nofile\"?)"},
		{"{\"version\":1,\"env\":{\"set\":{},\"pas\":[]}}",
		 "/x/p.json:1:30: env: unknown key \"pas\" (did you mean \"pass\"?)"},
		{"{\"version\":1,\"hstnm\":\"x\"}", /* distance 3: no guess */
		 "/x/p.json:1:14: unknown key \"hstnm\" (known: $schema, version, extends, "
		 "description, command, filesystem, network, env, limits, syscalls, secrets, "
		 "audit, terminal, workspace, unix_sockets, allow_downgrade, hostname, ask, descriptions)"},
		{"{\"version\":1,\"allow_downgrade\":[\"seccomp-usernotif\"]}",
		 "/x/p.json:1:33: allow_downgrade[0]: unknown downgrade \"seccomp-usernotif\" "
		 "(did you mean \"seccomp-user-notif\"?)"},
		{"{\"version\":1,\"hostname\":\"${USR}\"}",
		 "/x/p.json:1:25: hostname: invalid hostname \"${USR}\" (1 to 64 of A-Z a-z 0-9 - .)"},
		{"{\"version\":1,\"filesystem\":{\"read\":[\"${XDG_DATA_HOM}\"]}}",
		 "/x/p.json:1:36: filesystem.read[0]: unknown variable ${XDG_DATA_HOM} "
		 "(did you mean ${XDG_DATA_HOME}?)"},
	};
	for (size_t i = 0; i < AB_ARRAY_SIZE(cases); i++)
		buf_err(cases[i].json, cases[i].msg);
}

/* Paths in messages: odd keys are bracketed and escaped. */
static void test_error_paths(void **state)
{
	buf_err("{\"version\":1,\"env\":{\"set\":{\"A\":\"1\",\"B-C\":\"2\"}}}",
		"/x/p.json:1:36: env.set: invalid variable name \"B-C\" (letters, digits and _, "
		"not starting with a digit)");
	buf_err("{\"version\":1,\"env\":{\"set\":{\"X Y\":2}}}",
		"/x/p.json:1:28: env.set: invalid variable name \"X Y\" (letters, digits and _, "
		"not starting with a digit)");
	buf_err("{\"version\":1,\"env\":{\"set\":{\"OK_1\":[]}}}",
		"/x/p.json:1:35: env.set.OK_1: expected a string, got an array");
	buf_err("{\"version\":1,\"extends\":[\"base\", 7]}",
		"/x/p.json:1:33: extends[1]: expected a string, got an integer");
	buf_err("{\"version\":1,\"network\":{\"loopback_ports\":[22, true]}}",
		"/x/p.json:1:47: network.loopback_ports[1]: expected a port number (1-65535), "
		"got a boolean");
	buf_err("{\"version\":1,\"syscalls\":{\"deny\":[\"a\",\""
		"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"]}}",
		"/x/p.json:1:38: syscalls.deny[1]: invalid syscall name "
		"\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\" "
		"(at most 64 of a-z 0-9 _)");
	buf_err("{\"version\":1,\"version\":1}", "/x/p.json:1:14: duplicate key \"version\"");
	buf_err("{\"version\":true}",
		"/x/p.json:1:12: version: expected an integer, got a boolean");
	buf_err("{\"version\":1.0}",
		"/x/p.json:1:12: version: expected an integer, got a real number");
}

/* ------------------------------------------------------------ the locator */

struct loc_case {
	const char *json;
	ab_json_step path[4];
	size_t depth;
	bool key;
	int ret;
	size_t line, col;
};

#define K(k)             \
	{                \
		.key = k \
	}
#define I(i)                            \
	{                               \
		.key = NULL, .index = i \
	}

// clang-format off
static const struct loc_case loc_cases[] = {
	{ "{\"a\": 1}", { K("a") }, 1, false, 0, 1, 7 },
	{ "{\"a\": 1}", { K("a") }, 1, true, 0, 1, 2 },
	{ "  \n {}", { K("a") }, 0, false, 0, 2, 2 },
	/* escaped quotes and brackets inside strings */
	{ "{\"x\\\"y\": \"a\\\"}b\", \"k\": [1]}", { K("k") }, 1, false, 0, 1, 24 },
	{ "{\"x\\\"y\": \"a\\\"}b\", \"k\": [1]}", { K("x\"y") }, 1, false, 0, 1, 10 },
	{ "{\"s\": \"]}[{\", \"t\": 2}", { K("t") }, 1, false, 0, 1, 20 },
	{ "{\"a\\\\\": 1, \"b\": 2}", { K("b") }, 1, false, 0, 1, 17 },
	{ "{\"a\\\\\": 1, \"b\": 2}", { K("a\\") }, 1, false, 0, 1, 9 },
	/* unicode escapes in keys, columns in characters */
	{ "{\"\\u00e9t\\u00e9\": 1, \"\xc3\xa9\": 2}", { K("\xc3\xa9t\xc3\xa9") }, 1, false, 0, 1, 19 },
	{ "{\"\\u00e9t\\u00e9\": 1, \"\xc3\xa9\": 2}", { K("\xc3\xa9") }, 1, false, 0, 1, 27 },
	{ "{\"\\ud83d\\ude00\": true}", { K("\xf0\x9f\x98\x80") }, 1, false, 0, 1, 18 },
	{ "{\"\\u0041\": 1}", { K("A") }, 1, true, 0, 1, 2 },
	{ "{\"\\/\\b\\f\\n\\r\\t\": 1}", { K("/\b\f\n\r\t") }, 1, false, 0, 1, 18 },
	/* a prefix of a key is not the key */
	{ "{\"ab\": 1, \"a\": 2}", { K("a") }, 1, false, 0, 1, 16 },
	{ "{\"a\": 1, \"ab\": 2}", { K("ab") }, 1, true, 0, 1, 10 },
	/* nested arrays and objects */
	{ "{\"a\": [[1, [2, 3]], {\"b\": [4, {\"c\": 5}]}]}", { K("a"), I(1), K("b"), I(1) }, 4, false, 0, 1, 31 },
	{ "{\"a\": [[1, [2, 3]], {\"b\": [4, {\"c\": 5}]}]}", { K("a"), I(0), I(1), I(1) }, 4, false, 0, 1, 16 },
	{ "{\n  \"a\": {\n    \"b\": [\n      1,\n      \"x\"\n    ]\n  }\n}", { K("a"), K("b"), I(1) }, 3, false, 0, 5, 7 },
	{ "{\r\n\"a\": 1}", { K("a") }, 1, false, 0, 2, 6 },
	{ "[1, {\"k\": [true, null, \"v\"]}]", { I(1), K("k"), I(2) }, 3, false, 0, 1, 24 },
	/* absent: the deepest container found */
	{ "{\"a\": {\"b\": 1}}", { K("a"), K("c") }, 2, false, -ENOENT, 1, 7 },
	{ "{\"a\": [1]}", { K("a"), I(3) }, 2, false, -ENOENT, 1, 7 },
	{ "{\"a\": []}", { K("a"), I(0) }, 2, false, -ENOENT, 1, 7 },
	{ "{}", { K("a") }, 1, false, -ENOENT, 1, 1 },
	/* wrong shape / malformed */
	{ "{\"a\": 1}", { K("a"), I(0) }, 2, false, -EINVAL, 1, 7 },
	{ "", { K("a") }, 1, false, -EINVAL, 1, 1 },
	{ "{\"a\": [1, 2", { K("a"), I(5) }, 2, false, -EINVAL, 1, 7 },
	{ "{\"a\" 1}", { K("a") }, 1, false, -EINVAL, 1, 1 },
	{ "{\"a\": \"unterminated", { K("b") }, 1, false, -EINVAL, 1, 1 },
	{ "{\"a\\", { K("a") }, 1, false, -EINVAL, 1, 1 },
	{ "{\"\\u12", { K("a") }, 1, false, -EINVAL, 1, 1 },
	{ "{\"a\":}", { K("b") }, 1, false, -EINVAL, 1, 1 },
	{ "[[[[", { I(0), I(0), I(0), I(0) }, 4, false, -EINVAL, 1, 4 },
	{ "]]]]", { I(0) }, 1, false, -EINVAL, 1, 1 },
};
// clang-format on

static void test_locator_table(void **state)
{
	for (size_t i = 0; i < AB_ARRAY_SIZE(loc_cases); i++) {
		const struct loc_case *c = &loc_cases[i];
		size_t line = 0, col = 0;
		int r = ab_json_locate(c->json, strlen(c->json), c->path, c->depth, c->key, &line,
				       &col);
		if (r != c->ret || line != c->line || col != c->col)
			print_error("case %zu %s: got %d %zu:%zu want %d %zu:%zu\n", i, c->json, r,
				    line, col, c->ret, c->line, c->col);
		assert_int_equal(r, c->ret);
		assert_int_equal(line, c->line);
		assert_int_equal(col, c->col);
	}
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;
static uint64_t rnd(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

/* Every prefix of a document, random structural noise and huge nesting:
 * no crash (run under ASan/valgrind), always a 1-based position inside. */
static void test_locator_hostile(void **state)
{
	static const char doc[] = "{\"version\": 1, \"filesystem\": {\"read\": [\"/a\\\"]\", "
				  "\"\\u00e9\\ud83d\\ude00\", [[{}]], 3]}, \"env\": {\"set\": "
				  "{\"A\": \"\\\\\"}}}";
	static const ab_json_step paths[][3] = {
		{K("filesystem"), K("read"), I(3)},
		{K("env"), K("set"), K("A")},
		{K("version"), I(0), K("x")},
	};
	static const char alpha[] = "{}[]\":,\\ u0aé\n";
	size_t line, col;
	for (size_t n = 0; n <= sizeof(doc) - 1; n++) {
		char *copy = malloc(n ? n : 1); /* exact size: ASan sees any overread */
		assert_non_null(copy);
		memcpy(copy, doc, n);
		for (size_t p = 0; p < AB_ARRAY_SIZE(paths); p++) {
			for (int key = 0; key < 2; key++) {
				int r = ab_json_locate(copy, n, paths[p], 3, key, &line, &col);
				assert_true(r == 0 || r == -ENOENT || r == -EINVAL);
				assert_true(line >= 1 && col >= 1 && col <= n + 1);
			}
		}
		free(copy);
	}
	for (int it = 0; it < 20000; it++) {
		size_t n = rnd() % 48;
		char *buf = malloc(n ? n : 1);
		assert_non_null(buf);
		for (size_t i = 0; i < n; i++)
			buf[i] = (rnd() % 8) ? alpha[rnd() % (sizeof(alpha) - 1)] : (char)rnd();
		(void)ab_json_locate(buf, n, paths[it % 3], 1 + it % 3, it & 1, &line, &col);
		assert_true(line >= 1 && col >= 1);
		free(buf);
	}
	/* deep nesting is skipped with a counter, not recursion */
	size_t big = 4 * 1024 * 1024;
	char *deep = malloc(big);
	assert_non_null(deep);
	memcpy(deep, "{\"a\": ", 6);
	memset(deep + 6, '[', big - 6);
	assert_int_equal(ab_json_locate(deep, big, (ab_json_step[]){K("b")}, 1, false, &line, &col),
			 -EINVAL);
	assert_int_equal(ab_json_locate(NULL, 0, NULL, 0, false, &line, &col), 0);
	assert_true(line == 1 && col == 1);
	free(deep);
}

/* ------------------------------------------------------- variables, sizes */

static void test_size_parse(void **state)
{
	static const struct {
		const char *s;
		int r;
		long long v;
	} cases[] = {
		{"0", 0, 0},
		{"1", 0, 1},
		{"1K", 0, 1024},
		{"1k", 0, 1024},
		{"8G", 0, 8LL << 30},
		{"512m", 0, 512LL << 20},
		{"2T", 0, 2LL << 40},
		{"007", 0, 7},
		{"unlimited", 0, LLONG_MAX},
		{"9223372036854775807", 0, LLONG_MAX},
		{"8388607T", 0, 8388607LL << 40},
		{"9223372036854775808", -ERANGE, 0},
		{"99999999999999999999999", -ERANGE, 0},
		{"8388608T", -ERANGE, 0},
		{"", -EINVAL, 0},
		{"G", -EINVAL, 0},
		{"8Q", -EINVAL, 0},
		{"8GB", -EINVAL, 0},
		{"8 G", -EINVAL, 0},
		{"-1", -EINVAL, 0},
		{"+1", -EINVAL, 0},
		{" 1", -EINVAL, 0},
		{"1 ", -EINVAL, 0},
		{"1.5G", -EINVAL, 0},
		{"0x10", -EINVAL, 0},
		{"Unlimited", -EINVAL, 0},
		{"99999999999999999999Q", -EINVAL, 0},
	};
	for (size_t i = 0; i < AB_ARRAY_SIZE(cases); i++) {
		long long v = -42;
		int r = ab_profile_parse_size(cases[i].s, &v);
		if (r != cases[i].r)
			print_error("size \"%s\": got %d\n", cases[i].s, r);
		assert_int_equal(r, cases[i].r);
		if (r == 0)
			assert_true(v == cases[i].v);
		else
			assert_true(v == -42);
	}
	assert_int_equal(ab_profile_parse_size(NULL, NULL), -EINVAL);
}

static void test_expand(void **state)
{
	static const ab_vars v = {.home = "/h",
				  .workspace = "/w",
				  .user = "u",
				  .xdg_data_home = "/data",
				  .xdg_cache_home = "rel/cache"};
	static const ab_vars none = {.workspace = "/w"};
#define KNOWN                                                                            \
	"(known: ${HOME}, ${WORKSPACE}, ${USER}, ${XDG_CONFIG_HOME}, ${XDG_DATA_HOME}, " \
	"${XDG_CACHE_HOME}, ${XDG_STATE_HOME})"
	static const struct {
		const ab_vars *v;
		const char *in;
		bool tilde;
		const char *out, *err;
	} cases[] = {
		{&v, "~", true, "/h", NULL},
		{&v, "~/x", true, "/h/x", NULL},
		{&v, "~x", true, "~x", NULL},
		{&v, "a~/b", true, "a~/b", NULL},
		{&v, "~/x", false, "~/x", NULL},
		{&v, "", true, "", NULL},
		{&v, "${HOME}/a", true, "/h/a", NULL},
		{&v, "${WORKSPACE}", true, "/w", NULL},
		{&v, "x${USER}y", true, "xuy", NULL},
		{&v, "${HOME}${HOME}", true, "/h/h", NULL},
		{&v, "~${HOME}", true, "~/h", NULL},
		{&v, "${XDG_CONFIG_HOME}", true, "/h/.config", NULL},
		{&v, "${XDG_DATA_HOME}/f", true, "/data/f", NULL},
		{&v, "${XDG_CACHE_HOME}", true, "/h/.cache", NULL}, /* relative: ignored */
		{&v, "${XDG_STATE_HOME}", true, "/h/.local/state", NULL},
		{&v, "$HOME $ {HOME} $", true, "$HOME $ {HOME} $", NULL},
		{&v, "${", true, NULL, "unterminated \"${\" (write ${NAME})"},
		{&v, "a${HOME", true, NULL, "unterminated \"${\" (write ${NAME})"},
		{&v, "${PATH}", true, NULL, "unknown variable ${PATH} " KNOWN},
		{&v, "${NOPE}", true, NULL, "unknown variable ${NOPE} (did you mean ${HOME}?)"},
		{&v, "${}", true, NULL, "unknown variable ${} " KNOWN},
		{&v, "${HOEM}", true, NULL, "unknown variable ${HOEM} (did you mean ${HOME}?)"},
		{&v, "${home}", true, NULL, "unknown variable ${home} " KNOWN},
		{&v, "${\x1b[2J}", true, NULL, "unknown variable ${\\x1b[2J} " KNOWN},
		{&none, "${USER}", true, NULL, "${USER} is not set"},
		{&none, "${HOME}", true, NULL, "${HOME} is not set"},
		{&none, "${XDG_CONFIG_HOME}", true, NULL, "${XDG_CONFIG_HOME} is not set"},
		{&none, "~/x", true, NULL, "cannot expand \"~\": the home directory is unknown"},
		{&none, "~/x", false, "~/x", NULL},
		{NULL, "${WORKSPACE}", true, NULL, "${WORKSPACE} is not set"},
	};
	for (size_t i = 0; i < AB_ARRAY_SIZE(cases); i++) {
		ab_err e = {0};
		char *out = NULL;
		int r = ab_profile_expand(cases[i].in, cases[i].v, cases[i].tilde, &out, &e);
		if (cases[i].out) {
			if (r < 0)
				print_error("expand %s: %s\n", cases[i].in, e.msg);
			assert_int_equal(r, 0);
			assert_string_equal(out, cases[i].out);
			free(out);
		} else {
			assert_int_equal(r, -EINVAL);
			assert_null(out);
			assert_string_equal(e.msg, cases[i].err);
		}
	}
	/* a long variable name is cut in the message */
	char longname[200] = "${";
	memset(longname + 2, 'A', 150);
	strcpy(longname + 152, "}");
	ab_err e = {0};
	char *out = NULL;
	assert_int_equal(ab_profile_expand(longname, &v, true, &out, &e), -EINVAL);
	char a65[66];
	memset(a65, 'A', 65);
	a65[65] = '\0';
	assert_null(strstr(e.msg, a65)); /* cut at 64 */
	assert_non_null(strstr(e.msg, "AAA...} (known:"));
	/* bounded output */
	static const ab_vars longhome = {.home = "/0123456789"};
	size_t n = 10000 * 7 + 1;
	char *in = malloc(n);
	assert_non_null(in);
	for (size_t i = 0; i < 10000; i++)
		memcpy(in + 7 * i, "${HOME}", 7);
	in[n - 1] = '\0';
	assert_int_equal(ab_profile_expand(in, &longhome, true, &out, &e), -EINVAL);
	assert_string_equal(e.msg, "too long after expansion (more than 65536 bytes)");
	in[7 * 5000] = '\0'; /* 5000 * 11 bytes fits */
	assert_int_equal(ab_profile_expand(in, &longhome, true, &out, &e), 0);
	assert_int_equal(strlen(out), 5000 * 11);
	free(out);
	free(in);
#undef KNOWN
}

/* Expansion inside a profile: errors point at the string. */
static void test_expand_in_profile(void **state)
{
	static const ab_vars v = {.home = "/h", .workspace = "/w/./ws/"};
	ab_profile *p = NULL;
	ab_err e = {0};
	static const char json[] =
		"{\"version\":1,\"filesystem\":{\"write\":[\"${WORKSPACE}/..//x/.\"],"
		"\"protect\":[\"~/x\",\"?${HOME}/y/\",\"/a/../b\",\"rel/${HOME}\"]},"
		"\"env\":{\"set\":{\"P\":\"~/bin:${HOME}\"}}}";
	assert_int_equal(ab_profile_load_buffer(json, strlen(json), "/x/p.json", &v, &p, &e),
			 -EINVAL);
	assert_string_equal(e.msg,
			    "/x/p.json:1:102: filesystem.protect[3]: \"rel/${HOME}\": a relative "
			    "protect entry is not expanded (start it with a variable, ~/ or / "
			    "to name one path)");
	/* anchored entries: expanded, normalised, '?' and a trailing '/' kept */
	static const char json1[] = "{\"version\":1,\"filesystem\":{\"protect\":[\"~/x\","
				    "\"?${HOME}/y/\",\"/a/../b\",\"rel/x/\",\"?./opt/\"]}}";
	assert_int_equal(ab_profile_load_buffer(json1, strlen(json1), "/x/p.json", &v, &p, &e), 0);
	/* an optional relative entry never looks anchored ("?opt/", not "?/opt/") */
	assert_strv(&p->fs.protect, STRV("/h/x", "?/h/y/", "/b", "rel/x/", "?opt/"));
	ab_profile_free(p);
	p = NULL;
	static const char json2[] =
		"{\"version\":1,\"filesystem\":{\"write\":[\"${WORKSPACE}/..//x/.\"]},"
		"\"env\":{\"set\":{\"P\":\"~/bin:${HOME}\"}}}";
	assert_int_equal(ab_profile_load_buffer(json2, strlen(json2), "/x/p.json", &v, &p, &e), 0);
	assert_strv(&p->fs.write, STRV("/w/x"));
	assert_string_equal(env_get(p, "P"), "/h/bin:/h");
	ab_profile_free(p);
	buf_err_v(json2, strlen(json2), &(ab_vars){.home = "/h"},
		  "/x/p.json:1:37: filesystem.write[0]: ${WORKSPACE} is not set");
	buf_err("{\"version\":1,\"unix_sockets\":[\"${USER}/s\"]}",
		"/x/p.json:1:30: unix_sockets[0]: \"${USER}/s\" is not an absolute path (start it "
		"with /, ~/ or a variable such as ${WORKSPACE})");
}

/* ------------------------------------------------------- merge and extends */

static void test_merge(void **state)
{
	ab_err e = {0};
	ab_profile *a = buf_ok_as("{\"version\":1,\"description\":\"a\",\"command\":[\"x\"],"
				  "\"filesystem\":{\"read\":[\"/a\",\"/b\"]},"
				  "\"network\":{\"loopback_ports\":[1,2]},"
				  "\"env\":{\"set\":{\"K\":\"1\",\"L\":\"2\"}},"
				  "\"limits\":{\"nofile\":1,\"core\":0}}",
				  "/x/a.json");
	ab_profile *b = buf_ok_as("{\"version\":1,\"command\":[],"
				  "\"filesystem\":{\"read\":[\"/b\",\"/c\"],\"deny\":[\"/a\"]},"
				  "\"network\":{\"loopback_ports\":[2,3]},"
				  "\"env\":{\"set\":{\"L\":\"3\"}},\"limits\":{\"nofile\":5},"
				  "\"hostname\":\"hb\"}",
				  "/x/b.json");
	ab_profile *c = buf_ok_as("{\"version\":1,\"command\":[\"y\",\"z\"],\"description\":\"c\","
				  "\"network\":{\"loopback_ports\":\"any\"},"
				  "\"allow_downgrade\":[\"landlock\"]}",
				  "/x/c.json");
	assert_int_equal(ab_profile_merge(a, b, &e), 0);
	assert_string_equal(a->description, "a");
	assert_string_equal(a->hostname, "hb");
	assert_strv(&a->command, STRV("x"));
	assert_strv(&a->fs.read, STRV("/a", "/b", "/c"));
	assert_strv(&a->fs.deny, STRV("/a"));
	assert_strv(&a->files, STRV("/x/a.json", "/x/b.json"));
	assert_int_equal(a->loopback.nports, 3);
	assert_int_equal(a->loopback.ports[2], 3);
	assert_int_equal(a->env.nset, 2);
	assert_string_equal(env_get(a, "K"), "1");
	assert_string_equal(env_get(a, "L"), "3");
	assert_true(a->limits.nofile == 5 && a->limits.core == 0 &&
		    a->limits.nproc == AB_LIMIT_UNSET);
	assert_int_equal(ab_profile_merge(a, c, &e), 0);
	assert_strv(&a->command, STRV("y", "z"));
	assert_string_equal(a->description, "c");
	assert_true(a->loopback.any);
	assert_int_equal(a->loopback.nports, 3);
	assert_strv(&a->allow_downgrade, STRV("landlock"));
	assert_strv(&a->files, STRV("/x/a.json", "/x/b.json", "/x/c.json"));
	/* merging into an empty profile copies */
	ab_profile *empty = buf_ok_as("{\"version\":1}", "/x/e.json");
	assert_int_equal(ab_profile_merge(empty, a, &e), 0);
	assert_strv(&empty->fs.read, STRV("/a", "/b", "/c"));
	assert_string_equal(empty->description, "c");
	ab_profile_free(empty);
	ab_profile_free(a);
	ab_profile_free(b);
	ab_profile_free(c);
	ab_profile_free(NULL);
}

/* A chain of 8 extends levels loads; 9 is refused. */
static void test_extends_depth(void **state)
{
	char *d = tmpdir(), path[512], body[256];
	for (int i = 0; i <= 9; i++) {
		snprintf(path, sizeof(path), "%s/l%d.json", d, i);
		if (i < 9)
			snprintf(
				body, sizeof(body),
				"{\"version\":1,\"extends\":\"l%d\",\"filesystem\":{\"read\":[\"/l%d\"]}}",
				i + 1, i);
		else
			snprintf(body, sizeof(body), "{\"version\":1,\"hostname\":\"bottom\"}");
		write_file(path, body);
	}
	snprintf(path, sizeof(path), "%s/l1.json", d);
	ab_profile *p = load_ok(path, &V);
	assert_int_equal(p->files.n, 9);
	assert_int_equal(p->fs.read.n, 8);
	assert_string_equal(p->fs.read.v[0], "/l8"); /* base first */
	assert_string_equal(p->hostname, "bottom");
	ab_profile_free(p);

	ab_err e = {0};
	snprintf(path, sizeof(path), "%s/l0.json", d);
	assert_true(ab_profile_load(path, &V, &p, &e) < 0);
	char *want =
		ab_asprintf("%s/l8.json:1:24: extends: nested deeper than 8 levels (%s/l0.json -> "
			    "%s/l1.json -> %s/l2.json -> %s/l3.json -> %s/l4.json -> "
			    "%s/l5.json -> %s/l6.json -> %s/l7.json -> %s/l8.json -> %s/l9.json)",
			    d, d, d, d, d, d, d, d, d, d, d);
	assert_string_equal(e.msg, want);
	free(want);
	rm_rf(d);
	free(d);
}

/* A profile extending its own name skips itself (override pattern) and
 * finds the next one in the lookup order; names come from the sibling
 * directory first. */
static void test_extends_skip_self_and_xdg(void **state)
{
	char *d = tmpdir(), *a = ab_asprintf("%s/a", d), *cfg = ab_asprintf("%s/cfg", d);
	char *prof = ab_asprintf("%s/cfg/agentbox/profiles", d);
	char *cmd = ab_asprintf("mkdir -p '%s' '%s'", a, prof), *f1, *f2;
	assert_int_equal(system(cmd), 0);
	f1 = ab_asprintf("%s/x.json", a);
	f2 = ab_asprintf("%s/x.json", prof);
	write_file(f1, "{\"version\":1,\"extends\":\"x\",\"hostname\":\"top\"}");
	write_file(f2, "{\"version\":1,\"description\":\"from xdg\",\"hostname\":\"xdg\"}");
	ab_vars v = V;
	v.xdg_config_home = cfg;
	ab_profile *p = load_ok(f1, &v);
	assert_string_equal(p->description, "from xdg");
	assert_string_equal(p->hostname, "top");
	assert_strv(&p->files, STRV(f2, f1));
	ab_profile_free(p);
	/* by name through XDG_CONFIG_HOME, then its sibling */
	v.xdg_config_home = FIX "/xdg";
	p = load_ok("mine", &v);
	assert_string_equal(p->name, "mine");
	assert_string_equal(p->path, FIX "/xdg/agentbox/profiles/mine.json");
	assert_string_equal(p->hostname, "xdg");
	assert_string_equal(p->description, "mine");
	assert_strv(&p->files, STRV(FIX "/xdg/agentbox/profiles/base-xdg.json",
				    FIX "/xdg/agentbox/profiles/mine.json"));
	ab_profile_free(p);
	rm_rf(d);
	free(d), free(a), free(cfg), free(prof), free(cmd), free(f1), free(f2);
}

/* Fan-out is bounded: more than 256 files through extends is refused. */
static void test_extends_fanout(void **state)
{
	char *d = tmpdir(), *top = ab_asprintf("%s/top.json", d), *b = ab_asprintf("%s/b.json", d);
	size_t n = 0, cap = 64 + 300 * 6;
	char *body = malloc(cap);
	assert_non_null(body);
	n += (size_t)snprintf(body, cap, "{\"version\":1,\"extends\":[\"b\"");
	for (int i = 0; i < 299; i++)
		n += (size_t)snprintf(body + n, cap - n, ",\"b\"");
	snprintf(body + n, cap - n, "]}");
	write_file(top, body);
	write_file(b, "{\"version\":1,\"filesystem\":{\"read\":[\"/b\"]}}");
	ab_err e = {0};
	ab_profile *p = NULL;
	assert_true(ab_profile_load(top, &V, &p, &e) < 0);
	char *want = ab_asprintf("%s: too many profile files through extends (more than 256)", b);
	assert_string_equal(e.msg, want);
	free(want);
	free(body);
	rm_rf(d);
	free(d), free(top), free(b);
}

/* ------------------------------------------------------------------ lookup */

static void test_find(void **state)
{
	ab_err e = {0};
	char *path = NULL, cwd[PATH_MAX], exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	assert_true(n > 0);
	exe[n] = '\0';
	*strrchr(exe, '/') = '\0';
	char *exedir_profiles = ab_asprintf("%s/../profiles/zz-none.json", exe);
	char *norm = ab_path_normalize(exedir_profiles);
	char *exedir_share = ab_asprintf("%s/../share/agentbox/profiles/zz-none.json", exe);
	char *norm_share = ab_path_normalize(exedir_share);

	assert_int_equal(ab_profile_find("zz-none", &V, &path, &e), -ENOENT);
	char *want =
		ab_asprintf("profile \"zz-none\" not found (looked in "
			    "/home/user/.config/agentbox/profiles/zz-none.json, %s, " AB_DATADIR
			    "/profiles/zz-none.json, %s)",
			    norm_share, norm);
	assert_string_equal(e.msg, want);
	assert_string_equal(e.hint,
			    "put your own in /home/user/.config/agentbox/profiles/zz-none.json "
			    "(or pass a path to a .json file) and validate it with "
			    "\"agentbox check zz-none\"");
	assert_int_equal(e.exit_code, AB_EXIT_FAIL);
	free(want);
	free(norm);
	free(exedir_share);
	free(norm_share);
	free(exedir_profiles);

	/* a relative XDG_CONFIG_HOME is ignored (XDG spec) */
	ab_vars v = V;
	v.xdg_config_home = "relative/cfg";
	assert_int_equal(ab_profile_find("zz-none", &v, &path, &e), -ENOENT);
	assert_non_null(
		strstr(e.msg, "(looked in /home/user/.config/agentbox/profiles/zz-none.json, "));
	v.xdg_config_home = "/etc/xdg-abs";
	assert_int_equal(ab_profile_find("zz-none", &v, &path, &e), -ENOENT);
	assert_non_null(strstr(e.msg, "(looked in /etc/xdg-abs/agentbox/profiles/zz-none.json, "));

	static const char *const bad[] = {
		"a b", "-x", ".hidden", "a\x1b",
		"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"};
	for (size_t i = 0; i < AB_ARRAY_SIZE(bad); i++) {
		assert_int_equal(ab_profile_find(bad[i], &V, &path, &e), -EINVAL);
		assert_true(strncmp(e.msg, "invalid profile name \"", 22) == 0);
	}
	assert_string_equal(e.hint, "to load a file, give a path containing / or ending in .json");
	assert_int_equal(ab_profile_find("a\x1b", &V, &path, &e), -EINVAL);
	assert_string_equal(
		e.msg,
		"invalid profile name \"a\\x1b\" (an optional +, a letter or digit, then up to 63 "
		"of A-Z a-z 0-9 . _ + -)");
	assert_int_equal(ab_profile_find("", &V, &path, &e), -EINVAL);
	assert_string_equal(e.msg, "empty profile name");
	assert_int_equal(ab_profile_find(NULL, NULL, &path, &e), -EINVAL);
	/* 64 characters is a valid name (just not found) */
	assert_int_equal(
		ab_profile_find("A234567890123456789012345678901234567890123456789012345678901+-.",
				NULL, &path, &e),
		-ENOENT);

	/* paths: relative to the cwd, made absolute and normalised */
	assert_non_null(getcwd(cwd, sizeof(cwd)));
	assert_int_equal(chdir(FIX "/invalid"), 0);
	assert_int_equal(ab_profile_find("../valid/./minimal.json", &V, &path, &e), 0);
	assert_string_equal(path, FIX "/valid/minimal.json");
	free(path);
	assert_int_equal(ab_profile_find("nope.json", &V, &path, &e), -ENOENT);
	assert_string_equal(e.msg, "cannot read profile " FIX
				   "/invalid/nope.json: No such file or directory");
	ab_profile *p = load_ok("../valid/child.json", &V);
	assert_string_equal(p->name, "../valid/child.json");
	assert_string_equal(p->path, FIX "/valid/child.json");
	ab_profile_free(p);
	/* a buffer's relative fname resolves against the cwd too */
	p = buf_ok_as("{\"version\":1,\"extends\":\"../valid/base.json\"}", "mem.json");
	assert_string_equal(p->name, "mem.json");
	assert_string_equal(p->path, FIX "/invalid/mem.json");
	assert_strv(&p->files, STRV(FIX "/valid/base.json", FIX "/invalid/mem.json"));
	ab_profile_free(p);
	assert_int_equal(chdir(cwd), 0);
}

/* ------------------------------------------------------ size and file limits */

static void test_limits(void **state)
{
	ab_err e = {0};
	ab_profile *p = NULL;
	size_t cap = AB_PROFILE_MAX_BYTES + 2;
	char *buf = malloc(cap);
	assert_non_null(buf);

	/* exactly the maximum loads; one more byte does not */
	memset(buf, ' ', cap);
	memcpy(buf, "{\"version\":1}", 13);
	assert_int_equal(ab_profile_load_buffer(buf, AB_PROFILE_MAX_BYTES, "/x/p.json", &V, &p, &e),
			 0);
	ab_profile_free(p);
	assert_true(ab_profile_load_buffer(buf, AB_PROFILE_MAX_BYTES + 1, "/x/p.json", &V, &p, &e) <
		    0);
	assert_string_equal(e.msg, "/x/p.json: profile too large (more than 1048576 bytes)");

	/* lists: AB_PROFILE_MAX_LIST entries load, one more does not */
	for (int extra = 0; extra < 2; extra++) {
		size_t n = (size_t)snprintf(buf, cap, "{\"version\":1,\"filesystem\":{\"read\":[");
		for (int i = 0; i < AB_PROFILE_MAX_LIST + extra; i++)
			n += (size_t)snprintf(buf + n, cap - n, "%s\"/d%d\"", i ? "," : "", i);
		n += (size_t)snprintf(buf + n, cap - n, "]}}");
		int r = ab_profile_load_buffer(buf, n, "/x/p.json", &V, &p, &e);
		if (!extra) {
			assert_int_equal(r, 0);
			assert_int_equal(p->fs.read.n, AB_PROFILE_MAX_LIST);
			ab_profile_free(p);
		} else {
			assert_true(r < 0);
			assert_string_equal(e.msg,
					    "/x/p.json:1:35: filesystem.read: too many entries "
					    "(1025, at most 1024)");
		}
	}
	/* env.set counts too */
	size_t n = (size_t)snprintf(buf, cap, "{\"version\":1,\"env\":{\"set\":{");
	for (int i = 0; i <= AB_PROFILE_MAX_LIST; i++)
		n += (size_t)snprintf(buf + n, cap - n, "%s\"V%d\":\"x\"", i ? "," : "", i);
	n += (size_t)snprintf(buf + n, cap - n, "}}}");
	buf_err_v(buf, n, &V, "/x/p.json:1:27: env.set: too many entries (1025, at most 1024)");
	/* a path longer than PATH_MAX after normalisation */
	n = (size_t)snprintf(buf, cap, "{\"version\":1,\"filesystem\":{\"deny\":[\"/");
	memset(buf + n, 'a', 5000);
	n += 5000;
	n += (size_t)snprintf(buf + n, cap - n, "\"]}}");
	buf_err_v(buf, n, &V,
		  "/x/p.json:1:36: filesystem.deny[0]: path too long (at most 4095 bytes)");
	free(buf);

	/* files: too large, not regular (device, FIFO: must not block, directory) */
	char *d = tmpdir(), *big = ab_asprintf("%s/big.json", d),
	     *fifo = ab_asprintf("%s/f.json", d);
	int fd = open(big, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, AB_PROFILE_MAX_BYTES + 1), 0);
	close(fd);
	assert_true(ab_profile_load(big, &V, &p, &e) < 0);
	char *want = ab_asprintf("%s: profile too large (more than 1048576 bytes)", big);
	assert_string_equal(e.msg, want);
	free(want);
	assert_int_equal(mkfifo(fifo, 0600), 0);
	assert_true(ab_profile_load(fifo, &V, &p, &e) < 0);
	want = ab_asprintf("cannot read profile %s: not a regular file", fifo);
	assert_string_equal(e.msg, want);
	free(want);
	assert_true(ab_profile_load("/dev/null", &V, &p, &e) < 0);
	assert_string_equal(e.msg, "cannot read profile /dev/null: not a regular file");
	want = ab_asprintf("%s/", d);
	assert_true(ab_profile_load(want, &V, &p, &e) < 0);
	free(want);
	want = ab_asprintf("cannot read profile %s: not a regular file", d);
	assert_string_equal(e.msg, want);
	free(want);
	/* extends of a non-regular file: the error names the extends entry */
	char *top = ab_asprintf("%s/top.json", d);
	write_file(top, "{\"version\":1,\"extends\":[\"f.json\"]}");
	assert_true(ab_profile_load(top, &V, &p, &e) < 0);
	want = ab_asprintf("%s:1:25: extends[0]: cannot read profile %s: not a regular file", top,
			   fifo);
	assert_string_equal(e.msg, want);
	free(want);
	/* paths from a profile are shown with control characters escaped */
	write_file(top, "{\"version\":1,\"extends\":\"./\\u001b[2J\\u009b.json\"}");
	assert_true(ab_profile_load(top, &V, &p, &e) < 0);
	want = ab_asprintf("%s:1:24: extends: cannot read profile %s/\\x1b[2J\\u009b.json: No such "
			   "file or directory",
			   top, d);
	assert_string_equal(e.msg, want);
	free(want);
	rm_rf(d);
	free(d), free(big), free(fifo), free(top);
}

/* Mutated profiles: the loader never crashes, leaks or reports without a
 * message (run under valgrind / ASan). */
static void test_loader_hostile(void **state)
{
	size_t len = 0;
	char *orig = slurp(FIX "/valid/full.json", &len);
	static const char noise[] = "{}[]\",:\\u0 \n${~/.*";
	assert_non_null(orig);
	for (int it = 0; it < 3000; it++) {
		char *b = malloc(len + 1);
		size_t n = len;
		assert_non_null(b);
		memcpy(b, orig, len);
		for (int m = 0; m < 1 + (int)(rnd() % 4); m++) {
			size_t at = rnd() % n;
			switch (rnd() % 3) {
			case 0: b[at] = noise[rnd() % (sizeof(noise) - 1)]; break;
			case 1: b[at] = (char)rnd(); break;
			default: n = at + 1; break; /* truncate */
			}
		}
		ab_err e = {0};
		ab_profile *p = NULL;
		int r = ab_profile_load_buffer(b, n, FIX "/valid/fuzz.json", &V, &p, &e);
		if (r == 0) {
			ab_profile_free(p);
		} else {
			assert_null(p);
			assert_true(e.msg[0] != '\0');
			assert_int_equal(e.exit_code, AB_EXIT_FAIL);
			for (const char *s = e.msg; *s; s++) /* no raw control characters */
				assert_true((unsigned char)*s >= 0x20 && *s != 0x7f);
		}
		free(b);
	}
	free(orig);
}

static void test_downgrade_names(void **state)
{
	size_t n = 0;
	while (ab_downgrade_names[n])
		assert_true(ab_downgrade_known(ab_downgrade_names[n++]));
	assert_int_equal(n, 10);
	assert_true(ab_downgrade_known("proc-outer"));
	assert_true(ab_downgrade_known("nested-git-live"));
	assert_false(ab_downgrade_known("landlock-nett"));
	assert_false(ab_downgrade_known(""));
	assert_false(ab_downgrade_known(NULL));
}

/* secrets.NAME.mask_in_body: a boolean, false by default, copied by merges. */
/* descriptions: {"LIST": {"ENTRY": "text"}}; merged per entry (a later text
 * replaces); strict, with FILE:LINE:COL */
static void test_descriptions(void **state)
{
	ab_err e = {0};
	ab_profile *p = buf_ok_as("{\"version\":1,\"network\":{\"allow\":[\"a.test\"]},"
				  "\"descriptions\":{\"network.allow\":{\"a.test\":\"npm\"},"
				  "\"filesystem.read\":{\"/srv/x\":\"python3\"}}}",
				  "/x/d.json");
	assert_int_equal(p->ndescr, 2);
	assert_string_equal(p->descr[0].key, "network.allow\ta.test");
	assert_string_equal(p->descr[0].val, "npm");
	assert_string_equal(p->descr[1].key, "filesystem.read\t/srv/x");
	ab_profile *q = buf_ok_as("{\"version\":1,\"descriptions\":{\"network.allow\":"
				  "{\"a.test\":\"curl\"}}}",
				  "/x/q.json");
	assert_int_equal(ab_profile_merge(p, q, &e), 0);
	assert_int_equal(p->ndescr, 2);
	assert_string_equal(p->descr[0].val, "curl");
	ab_profile_free(q);
	ab_profile_free(p);
	buf_err("{\"version\":1,\n\"descriptions\":{\"network.alow\":{}}}",
		"/x/p.json:2:17: descriptions: unknown list \"network.alow\" (known: "
		"filesystem.read, filesystem.write, network.allow, env.pass)");
	buf_err("{\"version\":1,\"descriptions\":{\"env.pass\":{\"A\":3}}}",
		"/x/p.json:1:46: descriptions[\"env.pass\"].A: expected a string, got an integer");
	buf_err("{\"version\":1,\"descriptions\":{\"env.pass\":{\"A\":\"\"}}}",
		"/x/p.json:1:46: descriptions[\"env.pass\"].A: a description must be 1 to 1024 "
		"bytes, not 0");
	buf_err("{\"version\":1,\"descriptions\":{\"env.pass\":{\"A\":\"a\\nb\"}}}",
		"/x/p.json:1:46: descriptions[\"env.pass\"].A: a description is one line of text "
		"(no control characters)");
	buf_err("{\"version\":1,\"descriptions\":[]}",
		"/x/p.json:1:29: descriptions: expected an object of LIST: {ENTRY: \"text\"}, got "
		"an array");
}

static void test_secret_mask_in_body(void **state)
{
	ab_err e = {0};
	ab_profile *p = buf_ok_as("{\"version\":1,\"secrets\":{"
				  "\"A\":{\"from\":{\"env\":\"A\"},\"hosts\":[\"a.test\"],"
				  "\"mask_in_body\":true},"
				  "\"B\":{\"from\":{\"env\":\"B\"},\"hosts\":[\"b.test\"],"
				  "\"mask_in_body\":false},"
				  "\"C\":{\"from\":{\"env\":\"C\"},\"hosts\":[\"c.test\"]}}}",
				  "/x/s.json");
	assert_int_equal(p->nsecrets, 3);
	assert_string_equal(p->secrets[0].name, "A");
	assert_true(p->secrets[0].mask_in_body);
	assert_false(p->secrets[1].mask_in_body);
	assert_false(p->secrets[2].mask_in_body);
	/* a later profile's secret replaces the earlier one, flag and all */
	ab_profile *q = buf_ok_as("{\"version\":1,\"secrets\":{"
				  "\"A\":{\"from\":{\"env\":\"A\"},\"hosts\":[\"a.test\"]},"
				  "\"C\":{\"from\":{\"env\":\"C\"},\"hosts\":[\"c.test\"],"
				  "\"mask_in_body\":true}}}",
				  "/x/t.json");
	ab_profile *empty = buf_ok_as("{\"version\":1}", "/x/e.json");
	assert_int_equal(ab_profile_merge(empty, p, &e), 0);
	assert_true(empty->secrets[0].mask_in_body);
	assert_int_equal(ab_profile_merge(empty, q, &e), 0);
	assert_int_equal(empty->nsecrets, 3);
	assert_false(empty->secrets[0].mask_in_body);
	assert_false(empty->secrets[1].mask_in_body);
	assert_true(empty->secrets[2].mask_in_body);
	ab_profile_free(empty);
	ab_profile_free(q);
	ab_profile_free(p);
	/* strict: a boolean only, with FILE:LINE:COL */
	buf_err("{\"version\":1,\"secrets\":{\"A\":{\"from\":{\"env\":\"A\"},"
		"\"hosts\":[\"a.test\"],\n\"mask_in_body\":\"yes\"}}}",
		"/x/p.json:2:16: secrets.A.mask_in_body: expected true or false, got a string");
	buf_err("{\"version\":1,\"secrets\":{\"A\":{\"from\":{\"env\":\"A\"},"
		"\"hosts\":[\"a.test\"],\"mask_in_body\":1}}}",
		"/x/p.json:1:83: secrets.A.mask_in_body: expected true or false, got an integer");
	buf_err("{\"version\":1,\"secrets\":{\"A\":{\"from\":{\"env\":\"A\"},"
		"\"hosts\":[\"a.test\"],\"mask_in_body\":null}}}",
		"/x/p.json:1:83: secrets.A.mask_in_body: expected true or false, got null");
	buf_err("{\"version\":1,\"secrets\":{\"A\":{\"from\":{\"env\":\"A\"},"
		"\"hosts\":[\"a.test\"],\"mask_body\":true}}}",
		"/x/p.json:1:68: secrets.A: unknown key \"mask_body\" (from, hosts, in, "
		"placeholder, env, mask_in_body, elsewhere, optional, hint, render, rotate)");
}

/* secrets.NAME.elsewhere and network.placeholder_elsewhere: "forward" or
 * "refuse", unset by default (forward); the secret's own wins; merges: a
 * later secret replaces the earlier one whole, a later profile's
 * network.placeholder_elsewhere replaces the earlier one when it sets it. */
static void test_secret_elsewhere(void **state)
{
	ab_err e = {0};
	ab_profile *p = buf_ok_as("{\"version\":1,\"secrets\":{"
				  "\"A\":{\"from\":{\"env\":\"A\"},\"hosts\":[\"a.test\"],"
				  "\"elsewhere\":\"refuse\"},"
				  "\"B\":{\"from\":{\"env\":\"B\"},\"hosts\":[\"b.test\"],"
				  "\"elsewhere\":\"forward\"},"
				  "\"C\":{\"from\":{\"env\":\"C\"},\"hosts\":[\"c.test\"]}}}",
				  "/x/s.json");
	assert_int_equal(p->nsecrets, 3);
	assert_int_equal(p->secrets[0].elsewhere, AB_ELSEWHERE_REFUSE);
	assert_int_equal(p->secrets[1].elsewhere, AB_ELSEWHERE_FORWARD);
	assert_int_equal(p->secrets[2].elsewhere, AB_ELSEWHERE_UNSET);
	assert_int_equal(p->net.placeholder_elsewhere, AB_ELSEWHERE_UNSET);
	/* in force: the secret's, then the profile's, then forward */
	assert_int_equal(ab_psecret_elsewhere(&p->secrets[0], 0), AB_ELSEWHERE_REFUSE);
	assert_int_equal(ab_psecret_elsewhere(&p->secrets[1], AB_ELSEWHERE_REFUSE),
			 AB_ELSEWHERE_FORWARD);
	assert_int_equal(ab_psecret_elsewhere(&p->secrets[2], 0), AB_ELSEWHERE_FORWARD);
	assert_int_equal(ab_psecret_elsewhere(&p->secrets[2], AB_ELSEWHERE_REFUSE),
			 AB_ELSEWHERE_REFUSE);

	ab_profile *q = buf_ok_as("{\"version\":1,\"network\":{\"placeholder_elsewhere\":"
				  "\"refuse\"},\"secrets\":{"
				  "\"A\":{\"from\":{\"env\":\"A\"},\"hosts\":[\"a.test\"]}}}",
				  "/x/t.json");
	assert_int_equal(q->net.placeholder_elsewhere, AB_ELSEWHERE_REFUSE);
	ab_profile *r = buf_ok_as("{\"version\":1,\"network\":{\"placeholder_elsewhere\":"
				  "\"forward\"}}",
				  "/x/u.json");
	ab_profile *none = buf_ok_as("{\"version\":1}", "/x/n.json");
	ab_profile *empty = buf_ok_as("{\"version\":1}", "/x/e.json");
	assert_int_equal(ab_profile_merge(empty, p, &e), 0);
	assert_int_equal(empty->secrets[0].elsewhere, AB_ELSEWHERE_REFUSE);
	/* q's A replaces p's A whole: its elsewhere is unset again */
	assert_int_equal(ab_profile_merge(empty, q, &e), 0);
	assert_int_equal(empty->nsecrets, 3);
	assert_int_equal(empty->secrets[0].elsewhere, AB_ELSEWHERE_UNSET);
	assert_int_equal(empty->secrets[1].elsewhere, AB_ELSEWHERE_FORWARD);
	assert_int_equal(empty->net.placeholder_elsewhere, AB_ELSEWHERE_REFUSE);
	assert_int_equal(ab_psecret_elsewhere(&empty->secrets[0], empty->net.placeholder_elsewhere),
			 AB_ELSEWHERE_REFUSE);
	assert_int_equal(ab_psecret_elsewhere(&empty->secrets[1], empty->net.placeholder_elsewhere),
			 AB_ELSEWHERE_FORWARD);
	/* a profile that does not set it keeps the earlier one's; one that does wins */
	assert_int_equal(ab_profile_merge(empty, none, &e), 0);
	assert_int_equal(empty->net.placeholder_elsewhere, AB_ELSEWHERE_REFUSE);
	assert_int_equal(ab_profile_merge(empty, r, &e), 0);
	assert_int_equal(empty->net.placeholder_elsewhere, AB_ELSEWHERE_FORWARD);
	ab_profile_free(empty);
	ab_profile_free(none);
	ab_profile_free(r);
	ab_profile_free(q);
	ab_profile_free(p);
	/* strict: the two words only, with FILE:LINE:COL */
	buf_err("{\"version\":1,\"secrets\":{\"A\":{\"from\":{\"env\":\"A\"},"
		"\"hosts\":[\"a.test\"],\n\"elsewhere\":\"block\"}}}",
		"/x/p.json:2:13: secrets.A.elsewhere: expected \"forward\" or \"refuse\", got "
		"\"block\"");
	buf_err("{\"version\":1,\"secrets\":{\"A\":{\"from\":{\"env\":\"A\"},"
		"\"hosts\":[\"a.test\"],\"elsewhere\":true}}}",
		"/x/p.json:1:80: secrets.A.elsewhere: expected \"forward\" or \"refuse\", got "
		"a boolean");
	buf_err("{\"version\":1,\"secrets\":{\"A\":{\"from\":{\"env\":\"A\"},"
		"\"hosts\":[\"a.test\"],\"elsewhere\":\"Refuse\"}}}",
		"/x/p.json:1:80: secrets.A.elsewhere: expected \"forward\" or \"refuse\", got "
		"\"Refuse\"");
	buf_err("{\"version\":1,\"network\":{\n  \"placeholder_elsewhere\": \"\"}}",
		"/x/p.json:2:28: network.placeholder_elsewhere: expected \"forward\" or "
		"\"refuse\", got \"\"");
	buf_err("{\"version\":1,\"network\":{\"placeholder_elsewhere\":[\"refuse\"]}}",
		"/x/p.json:1:49: network.placeholder_elsewhere: expected \"forward\" or "
		"\"refuse\", got an array");
}

/* secrets.NAME.rotate.stamp: JSON pointers to "now" or "expires_at_ms",
 * 1 to 8, copied by merges; anything else refused with its place. */
#define ROT_HEAD                                                               \
	"{\"version\":1,\"secrets\":{\"A\":{\"from\":{\"json\":\"/x/c.json\"," \
	"\"pointer\":\"/t\"},\"hosts\":[\"a.test\"],\"rotate\":{\"url\":"      \
	"\"https://a.test/tok\",\"field\":\"/access_token\",\"stamp\":"
static void test_secret_rotate_stamp(void **state)
{
	ab_err e = {0};
	ab_profile *p = buf_ok_as(ROT_HEAD "{\"/o/expiresAt\":\"expires_at_ms\","
					   "\"/last~1refresh\":\"now\"}}}}}",
				  "/x/s.json");
	const struct ab_profile_secret *x = &p->secrets[0];
	assert_int_equal(x->rot_stamp_ptr.n, 2);
	assert_int_equal(x->rot_stamp_kind.n, 2);
	assert_string_equal(x->rot_stamp_ptr.v[0], "/o/expiresAt");
	assert_string_equal(x->rot_stamp_kind.v[0], "expires_at_ms");
	assert_string_equal(x->rot_stamp_ptr.v[1], "/last~1refresh");
	assert_string_equal(x->rot_stamp_kind.v[1], "now");
	ab_profile *empty = buf_ok_as("{\"version\":1}", "/x/e.json");
	assert_int_equal(ab_profile_merge(empty, p, &e), 0);
	assert_int_equal(empty->secrets[0].rot_stamp_ptr.n, 2);
	assert_string_equal(empty->secrets[0].rot_stamp_kind.v[1], "now");
	ab_profile_free(empty);
	ab_profile_free(p);
	buf_err(ROT_HEAD "{\"/a\":\"later\"}}}}}",
		"/x/p.json:1:161: secrets.A.rotate.stamp: unknown stamp \"later\" "
		"(now, expires_at_ms)");
	buf_err(ROT_HEAD "{\"a\":\"now\"}}}}}",
		"/x/p.json:1:153: secrets.A.rotate: invalid JSON pointer \"a\"");
	buf_err(ROT_HEAD "{\"/a~2\":\"now\"}}}}}",
		"/x/p.json:1:153: secrets.A.rotate: invalid JSON pointer \"/a~2\"");
	buf_err(ROT_HEAD "{}}}}}",
		"/x/p.json:1:161: secrets.A.rotate.stamp: expected {\"/pointer\": \"now\" or "
		"\"expires_at_ms\"} (1 to 8)");
	buf_err(ROT_HEAD "{\"/a\":1}}}}}",
		"/x/p.json:1:161: secrets.A.rotate.stamp: expected a string, got an integer");
	buf_err(ROT_HEAD
		"{\"/1\":\"now\",\"/2\":\"now\",\"/3\":\"now\",\"/4\":\"now\","
		"\"/5\":\"now\",\"/6\":\"now\",\"/7\":\"now\",\"/8\":\"now\",\"/9\":\"now\"}}}}}",
		"/x/p.json:1:161: secrets.A.rotate.stamp: expected {\"/pointer\": \"now\" or "
		"\"expires_at_ms\"} (1 to 8)");
	buf_err(ROT_HEAD "[\"/a\"]}}}}",
		"/x/p.json:1:161: secrets.A.rotate.stamp: expected {\"/pointer\": \"now\" or "
		"\"expires_at_ms\"} (1 to 8)");
}

/* secrets.NAME.placeholder.jwt: a boolean, alone (no prefix, no length),
 * copied by merges. */
static void test_secret_placeholder_jwt(void **state)
{
	ab_err e = {0};
	ab_profile *p = buf_ok_as("{\"version\":1,\"secrets\":{"
				  "\"A\":{\"from\":{\"env\":\"A\"},\"hosts\":[\"a.test\"],"
				  "\"placeholder\":{\"jwt\":true}},"
				  "\"B\":{\"from\":{\"env\":\"B\"},\"hosts\":[\"b.test\"],"
				  "\"placeholder\":{\"jwt\":false,\"prefix\":\"x-\"}}}}",
				  "/x/s.json");
	assert_true(p->secrets[0].ph_jwt);
	assert_false(p->secrets[1].ph_jwt);
	ab_profile *empty = buf_ok_as("{\"version\":1}", "/x/e.json");
	assert_int_equal(ab_profile_merge(empty, p, &e), 0);
	assert_true(empty->secrets[0].ph_jwt);
	assert_false(empty->secrets[1].ph_jwt);
	ab_profile_free(empty);
	ab_profile_free(p);
	buf_err("{\"version\":1,\"secrets\":{\"A\":{\"from\":{\"env\":\"A\"},"
		"\"hosts\":[\"a.test\"],\"placeholder\":{\"jwt\":1}}}}",
		"/x/p.json:1:89: secrets.A.placeholder.jwt: expected true or false, got an integer");
	buf_err("{\"version\":1,\"secrets\":{\"A\":{\"from\":{\"env\":\"A\"},"
		"\"hosts\":[\"a.test\"],\"placeholder\":{\"jwt\":true,\"prefix\":\"e\"}}}}",
		"/x/p.json:1:82: secrets.A.placeholder: a JWT placeholder keeps the shape of the "
		"value: no \"prefix\" or \"length\" with \"jwt\"");
	buf_err("{\"version\":1,\"secrets\":{\"A\":{\"from\":{\"env\":\"A\"},"
		"\"hosts\":[\"a.test\"],\"placeholder\":{\"length\":40,\"jwt\":true}}}}",
		"/x/p.json:1:82: secrets.A.placeholder: a JWT placeholder keeps the shape of the "
		"value: no \"prefix\" or \"length\" with \"jwt\"");
	buf_err("{\"version\":1,\"secrets\":{\"A\":{\"from\":{\"env\":\"A\"},"
		"\"hosts\":[\"a.test\"],\"placeholder\":{\"jwts\":true}}}}",
		"/x/p.json:1:83: secrets.A.placeholder: unknown key \"jwts\" (prefix, length, jwt, "
		"stable)");
}

/* secrets.NAME.placeholder.stable: a boolean, not with jwt, copied by merges. */
static void test_secret_placeholder_stable(void **state)
{
	ab_err e = {0};
	ab_profile *p = buf_ok_as("{\"version\":1,\"secrets\":{"
				  "\"A\":{\"from\":{\"env\":\"A\"},\"hosts\":[\"a.test\"],"
				  "\"placeholder\":{\"prefix\":\"sk-\",\"stable\":true}},"
				  "\"B\":{\"from\":{\"env\":\"B\"},\"hosts\":[\"b.test\"]}}}",
				  "/x/s.json");
	assert_true(p->secrets[0].ph_stable);
	assert_false(p->secrets[1].ph_stable);
	ab_profile *empty = buf_ok_as("{\"version\":1}", "/x/e.json");
	assert_int_equal(ab_profile_merge(empty, p, &e), 0);
	assert_true(empty->secrets[0].ph_stable);
	ab_profile_free(empty);
	ab_profile_free(p);
	buf_err("{\"version\":1,\"secrets\":{\"A\":{\"from\":{\"env\":\"A\"},"
		"\"hosts\":[\"a.test\"],\"placeholder\":{\"stable\":\"yes\"}}}}",
		"/x/p.json:1:92: secrets.A.placeholder.stable: expected true or false, got a string");
	buf_err("{\"version\":1,\"secrets\":{\"A\":{\"from\":{\"env\":\"A\"},"
		"\"hosts\":[\"a.test\"],\"placeholder\":{\"jwt\":true,\"stable\":true}}}}",
		"/x/p.json:1:82: secrets.A.placeholder: a JWT placeholder is drawn anew each run: "
		"no \"stable\" with \"jwt\"");
}

/* ------------------------------------------- shipped profiles and schema */

static void test_shipped_profiles(void **state)
{
	glob_t g;
	size_t n = 0;
	if (glob(AB_SRCDIR "/profiles/*.json", 0, NULL, &g) != 0) {
		print_message("no profiles/*.json in %s yet\n", AB_SRCDIR);
		skip();
	}
	for (size_t i = 0; i < g.gl_pathc; i++) {
		const char *base = strrchr(g.gl_pathv[i], '/') + 1;
		if (strcmp(base, "schema.json") == 0)
			continue;
		ab_profile *p = load_ok(g.gl_pathv[i], &V);
		assert_true(p->files.n >= 1);
		print_message("profiles/%s loads (%zu file%s merged)\n", base, p->files.n,
			      p->files.n == 1 ? "" : "s");
		ab_profile_free(p);
		n++;
	}
	globfree(&g);
	assert_true(n > 0);
}

/* The parser's key tables, as it lists them in "(known: ...)". */
static char *parser_keys(const char *section)
{
	char json[128];
	ab_err e = {0};
	ab_profile *p = NULL;
	if (section)
		snprintf(json, sizeof(json), "{\"version\":1,\"%s\":{\"zzzzzzzzzz\":1}}", section);
	else
		snprintf(json, sizeof(json), "{\"version\":1,\"zzzzzzzzzz\":1}");
	assert_true(ab_profile_load_buffer(json, strlen(json), "/x/p.json", &V, &p, &e) < 0);
	char *k = strstr(e.msg, "(known: ");
	assert_non_null(k);
	k = strdup(k + 8);
	k[strlen(k) - 1] = '\0';
	return k;
}

static int cmpstr(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sorted ", "-joined keys of a schema "properties" object. */
static char *schema_keys(json_t *props)
{
	const char *keys[64], *k;
	json_t *v;
	size_t n = 0, o = 0;
	char *out = calloc(1, 1024);
	assert_true(json_is_object(props));
	json_object_foreach(props, k, v) keys[n++] = k;
	qsort(keys, n, sizeof(keys[0]), cmpstr);
	for (size_t i = 0; i < n; i++)
		o += (size_t)snprintf(out + o, 1024 - o, "%s%s", i ? ", " : "", keys[i]);
	return out;
}

static char *sorted_list(char *list)
{
	char *items[64], *save = NULL, *out = calloc(1, 1024);
	size_t n = 0, o = 0;
	for (char *t = strtok_r(list, ", ", &save); t; t = strtok_r(NULL, ", ", &save))
		items[n++] = t;
	qsort(items, n, sizeof(items[0]), cmpstr);
	for (size_t i = 0; i < n; i++)
		o += (size_t)snprintf(out + o, 1024 - o, "%s%s", i ? ", " : "", items[i]);
	return out;
}

static void test_schema_matches_parser(void **state)
{
	static const char *const sections[] = {NULL,     "filesystem", "network",  "env",
					       "limits", "syscalls",   "workspace"};
	json_error_t je;
	json_t *schema =
		json_load_file(AB_SRCDIR "/profiles/schema.json", JSON_REJECT_DUPLICATES, &je);
	if (!schema)
		print_error("schema.json: %d:%d: %s\n", je.line, je.column, je.text);
	assert_non_null(schema);
	assert_string_equal(json_string_value(json_object_get(schema, "$schema")),
			    "https://json-schema.org/draft/2020-12/schema");
	json_t *top = json_object_get(schema, "properties");
	for (size_t i = 0; i < AB_ARRAY_SIZE(sections); i++) {
		json_t *props = sections[i] ? json_object_get(json_object_get(top, sections[i]),
							      "properties")
					    : top;
		json_t *addl = sections[i] ? json_object_get(json_object_get(top, sections[i]),
							     "additionalProperties")
					   : json_object_get(schema, "additionalProperties");
		char *pk = parser_keys(sections[i]), *sorted = sorted_list(pk),
		     *sk = schema_keys(props);
		if (strcmp(sorted, sk) != 0)
			print_error("%s: parser knows [%s], schema has [%s]\n",
				    sections[i] ? sections[i] : "top level", sorted, sk);
		assert_string_equal(sorted, sk);
		assert_true(json_is_false(addl)); /* strict like the parser */
		free(pk), free(sorted), free(sk);
	}
	/* a secret's keys, as the parser lists them for an unknown one */
	{
		static const char js[] = "{\"version\":1,\"secrets\":{\"S\":{\"zzzzzzzzzz\":1}}}";
		ab_err e = {0};
		ab_profile *p = NULL;
		assert_true(ab_profile_load_buffer(js, strlen(js), "/x/p.json", &V, &p, &e) < 0);
		char *k = strstr(e.msg, "\" (");
		assert_non_null(k);
		k = strdup(k + 3);
		k[strlen(k) - 1] = '\0';
		json_t *sec =
			json_object_get(json_object_get(top, "secrets"), "additionalProperties");
		char *sorted = sorted_list(k),
		     *sk = schema_keys(json_object_get(sec, "properties"));
		if (strcmp(sorted, sk) != 0)
			print_error("secrets: parser knows [%s], schema has [%s]\n", sorted, sk);
		assert_string_equal(sorted, sk);
		assert_true(json_is_false(json_object_get(sec, "additionalProperties")));
		free(k), free(sorted), free(sk);
	}
	json_t *en = json_object_get(
		json_object_get(json_object_get(top, "allow_downgrade"), "items"), "enum");
	assert_int_equal(json_array_size(en), 10);
	for (size_t i = 0; ab_downgrade_names[i]; i++)
		assert_string_equal(json_string_value(json_array_get(en, i)),
				    ab_downgrade_names[i]);
	json_t *req = json_object_get(schema, "required");
	assert_int_equal(json_array_size(req), 1);
	assert_string_equal(json_string_value(json_array_get(req, 0)), "version");
	json_decref(schema);
}

/* A proxy URL's password is never echoed in the error (terminals, CI logs). */
static void test_upstream_proxy_credentials_not_printed(void **state)
{
	buf_err("{\"version\":1,\"network\":{\"upstream_proxy\":"
		"\"http://u:secretpw@proxy.corp:3128\"}}",
		"/x/p.json:1:42: network.upstream_proxy: invalid upstream proxy "
		"\"http://***@proxy.corp:3128\": credentials in the URL are not supported "
		"(\"env\" or \"http://HOST:PORT\")");
	buf_err("{\"version\":1,\"network\":{\"upstream_proxy\":\"secretpw@p:1/x\"}}",
		"/x/p.json:1:42: network.upstream_proxy: invalid upstream proxy "
		"\"***@p:1/x\": credentials in the URL are not supported "
		"(\"env\" or \"http://HOST:PORT\")");
	buf_err("{\"version\":1,\"network\":{\"upstream_proxy\":\"ftp://p:1\"}}",
		"/x/p.json:1:42: network.upstream_proxy: invalid upstream proxy "
		"\"ftp://p:1\" (\"env\" or \"http://HOST:PORT\")");
}

/* limits.memory and .pids of 0 would leave a sandbox that cannot start */
static void test_zero_cgroup_limits_refused(void **state)
{
	static const char *const bodies[] = {"\"memory\":0", "\"memory\":\"0G\"", "\"pids\":0"};
	for (size_t i = 0; i < AB_ARRAY_SIZE(bodies); i++) {
		char json[128], want[256];
		snprintf(json, sizeof(json), "{\"version\":1,\"limits\":{%s}}", bodies[i]);
		snprintf(want, sizeof(want),
			 "/x/p.json:1:%d: limits.%s: must be at least 1 (0 leaves the sandbox no "
			 "memory or no process to start with; leave it out for no limit)",
			 (int)(strchr(bodies[i], ':') - bodies[i]) + 25,
			 bodies[i][1] == 'm' ? "memory" : "pids");
		buf_err(json, want);
	}
	ab_profile *p =
		buf_ok_as("{\"version\":1,\"limits\":{\"memory\":\"1K\",\"pids\":1}}", "/x/p.json");
	assert_int_equal(p->limits.memory, 1024);
	assert_int_equal(p->limits.pids, 1);
	ab_profile_free(p);
}

/* workspace.mode: "direct" or "review", FILE:LINE:COL for anything else;
 * the last profile that sets it wins */
static void test_workspace_mode(void **state)
{
	buf_err("{\"version\":1,\"workspace\":{\"mode\":\"cow\"}}",
		"/x/p.json:1:34: workspace.mode: unknown workspace mode \"cow\" (known: direct, "
		"review)");
	buf_err("{\"version\":1,\"workspace\":{\"mode\":true}}",
		"/x/p.json:1:34: workspace.mode: expected a string, got a boolean");
	buf_err("{\"version\":1,\"workspace\":{\"moed\":\"review\"}}",
		"/x/p.json:1:27: workspace: unknown key \"moed\" (did you mean \"mode\"?)");
	ab_profile *p =
		buf_ok_as("{\"version\":1,\"workspace\":{\"mode\":\"review\"}}", "/x/p.json");
	assert_int_equal(p->workspace.review, 1);
	ab_profile_free(p);
	p = buf_ok_as("{\"version\":1}", "/x/p.json");
	assert_int_equal(p->workspace.review, -1);
	ab_profile_free(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_workspace_mode),
		cmocka_unit_test(test_valid_fixtures_all_load),
		cmocka_unit_test(test_valid_minimal),
		cmocka_unit_test(test_valid_full),
		cmocka_unit_test(test_valid_escapes),
		cmocka_unit_test(test_extends_child),
		cmocka_unit_test(test_extends_multi),
		cmocka_unit_test(test_invalid_fixtures),
		cmocka_unit_test(test_spec_examples),
		cmocka_unit_test(test_did_you_mean),
		cmocka_unit_test(test_error_paths),
		cmocka_unit_test(test_locator_table),
		cmocka_unit_test(test_locator_hostile),
		cmocka_unit_test(test_size_parse),
		cmocka_unit_test(test_expand),
		cmocka_unit_test(test_expand_in_profile),
		cmocka_unit_test(test_merge),
		cmocka_unit_test(test_extends_depth),
		cmocka_unit_test(test_extends_skip_self_and_xdg),
		cmocka_unit_test(test_extends_fanout),
		cmocka_unit_test(test_find),
		cmocka_unit_test(test_limits),
		cmocka_unit_test(test_loader_hostile),
		cmocka_unit_test(test_downgrade_names),
		cmocka_unit_test(test_secret_mask_in_body),
		cmocka_unit_test(test_secret_elsewhere),
		cmocka_unit_test(test_secret_placeholder_jwt),
		cmocka_unit_test(test_secret_placeholder_stable),
		cmocka_unit_test(test_secret_rotate_stamp),
		cmocka_unit_test(test_shipped_profiles),
		cmocka_unit_test(test_schema_matches_parser),
		cmocka_unit_test(test_upstream_proxy_credentials_not_printed),
		cmocka_unit_test(test_zero_cgroup_limits_refused),
		cmocka_unit_test(test_descriptions),
	};
	return cmocka_run_group_tests_name("profile", tests, NULL, NULL);
}
