/* SPDX-License-Identifier: MIT */
/*
 * run --learn's pure part (src/plan/learn.c): the record (dedup, limits,
 * hostile bytes) and the draft made from it against a hand-made plan and a
 * fake host filesystem: what the plan already allowed is not repeated,
 * files are named, a file that could not be created gets its nearest
 * existing directory, secrets, the home directory, startup locations,
 * system directories, denied paths and directories to read are left out
 * with a reason, and the draft loads as a profile.
 */
#include "unit.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "agentbox/learn.h"
#include "agentbox/profile.h"

/* ---------------------------------------------------------------- fakes */

// clang-format off
static const char *const host_files[] = {
	"/home/u/.npmrc", "/home/u/.ssh/id_rsa", "/home/u/.config/tool/conf",
	"/data/input.csv", "/data/out/old.txt", "/opt2/tool/bin/run", "/etc/shadow",
	"/var/home/u/.local/bin/tool", "/home/u/.gitconfig", "/data/${HOME}", NULL,
};
static const char *const host_dirs[] = {
	"/", "/home", "/home/u", "/home/u/.ssh", "/home/u/.config", "/home/u/.config/tool",
	"/data", "/data/out", "/opt2", "/opt2/tool", "/opt2/tool/bin", "/etc", "/usr",
	"/usr/lib", "/var", "/var/home", "/var/home/u", "/var/home/u/.local",
	"/var/home/u/.local/bin", NULL,
};
// clang-format on

static int fake_stat(void *ctx, const char *path, bool *is_dir)
{
	for (size_t i = 0; host_files[i]; i++)
		if (strcmp(host_files[i], path) == 0)
			return *is_dir = false, 0;
	for (size_t i = 0; host_dirs[i]; i++)
		if (strcmp(host_dirs[i], path) == 0)
			return *is_dir = true, 0;
	return -ENOENT;
}

static ab_mount mounts[] = {
	{.kind = AB_MNT_TMPFS, .dst = "/home/u"},
	{.kind = AB_MNT_BIND_RO, .src = "/usr", .dst = "/usr"},
	{.kind = AB_MNT_BIND_RO, .src = "/etc", .dst = "/etc"},
	{.kind = AB_MNT_MASK, .dst = "/etc/shadow"},
	{.kind = AB_MNT_BIND_RW, .src = "/srv/ws", .dst = "/srv/ws"},
	{.kind = AB_MNT_PROTECT, .dst = "/srv/ws/.git/hooks"},
	{.kind = AB_MNT_TMPFS, .dst = "/tmp"},
};

static char *other_home[] = {"/var/home/u"};

static ab_plan fake_plan(void)
{
	return (ab_plan){
		.workspace = "/srv/ws",
		.home = "/home/u",
		.other_homes = {.v = other_home, .n = 1},
		.mounts = mounts,
		.nmounts = AB_ARRAY_SIZE(mounts),
	};
}

static void add(ab_learn_set *s, enum ab_learn_kind k, const char *what, const char *prog)
{
	assert_int_equal(ab_learn_add(s, k, what, prog), 0);
}

/* ---------------------------------------------------------------- the record */

static void test_record_limits(void **state)
{
	ab_learn_set s = {0};
	add(&s, AB_LEARN_READ, "/a", "node");
	add(&s, AB_LEARN_READ, "/a", "sh");
	add(&s, AB_LEARN_READ, "/a", "node"); /* a repeat: counted, not named again */
	add(&s, AB_LEARN_READ, "/a", "python3");
	add(&s, AB_LEARN_READ, "/a", "perl"); /* beyond AB_LEARN_PROGS */
	add(&s, AB_LEARN_WRITE, "/a", NULL);  /* another kind: another record */
	assert_int_equal(s.n, 2);
	assert_int_equal(s.v[0].count, 5);
	assert_string_equal(s.v[0].progs[0], "node");
	assert_string_equal(s.v[0].progs[1], "sh");
	assert_string_equal(s.v[0].progs[2], "python3");
	/* hostile: empty, relative, control bytes, too long; odd program bytes */
	assert_int_equal(ab_learn_add(&s, AB_LEARN_READ, "", NULL), -EINVAL);
	assert_int_equal(ab_learn_add(&s, AB_LEARN_READ, NULL, NULL), -EINVAL);
	assert_int_equal(ab_learn_add(&s, AB_LEARN_READ, "rel/path", NULL), -EINVAL);
	assert_int_equal(ab_learn_add(&s, AB_LEARN_READ, "/a\nb", NULL), -EINVAL);
	assert_int_equal(ab_learn_add(&s, AB_LEARN_READ, "/a\x7f", NULL), -EINVAL);
	static const char *const unnormal[] = {"/a/",     "/a//b", "/a/./b",
					       "/a/../b", "/a/.",  "/a/.."};
	for (size_t i = 0; i < AB_ARRAY_SIZE(unnormal); i++)
		assert_int_equal(ab_learn_add(&s, AB_LEARN_READ, unnormal[i], NULL), -EINVAL);
	char *big = malloc(AB_LEARN_WHAT_MAX + 2);
	assert_non_null(big);
	memset(big, 'x', AB_LEARN_WHAT_MAX + 1);
	big[0] = '/';
	big[AB_LEARN_WHAT_MAX + 1] = '\0';
	assert_int_equal(ab_learn_add(&s, AB_LEARN_READ, big, NULL), -E2BIG);
	free(big);
	assert_int_equal(s.dropped, 1);
	add(&s, AB_LEARN_EXEC, "/bin/x", "e\x1b[31mvil\xff");
	assert_string_equal(s.v[2].progs[0], "e?[31mvil?");
	/* full: further records are counted, not kept */
	char p[32];
	for (size_t i = s.n; i < AB_LEARN_MAX; i++) {
		snprintf(p, sizeof(p), "/f/%zu", i);
		add(&s, AB_LEARN_READ, p, "x");
	}
	assert_int_equal(ab_learn_add(&s, AB_LEARN_READ, "/one/more", "x"), -E2BIG);
	assert_int_equal(s.dropped, 2);
	add(&s, AB_LEARN_READ, "/a", "x"); /* a known record still counts */
	ab_learn_set_free(&s);
	assert_int_equal(s.n, 0);
}

/* ---------------------------------------------------------------- the draft */

static const char *const want_left[] = {
	"/data/${HOME}: cannot be written in a profile as it is (it holds \"${\", which a profile "
	"expands)",
	"/data/bad\xff: cannot be written in a profile as it is (not UTF-8 text)",
	"/data: a directory: a grant would show everything below it; name the files it needs",
	"/etc/newfile: needs /etc writable, a system directory",
	"/etc/shadow: denied by the profile (filesystem.deny /etc/shadow)",
	"/home/u/.gitconfig: a startup or configuration file of the shell, an editor or git (it "
	"may hold exported secrets): never learned, grant it by hand if needed",
	"/home/u/.npmrc: a secret or credentials path (/home/u/.npmrc): never learned",
	"/home/u/.ssh/id_rsa: a secret or credentials path (/home/u/.ssh): never learned",
	"/var/home/u/.local/bin/tool: refusing to make /var/home/u/.local/bin/tool writable: it "
	"is inside /var/home/u/.local/bin, where shell or editor startup files, autostart entries "
	"or programs on PATH live",
	"/var/home/u/newfile: needs /var/home/u writable, which is (or holds) the home directory",
	"bad host!: not a valid network rule",
	NULL,
};

static void test_draft(void **state)
{
	ab_plan plan = fake_plan();
	ab_learn_set paths = {0}, hosts = {0};
	/* nothing to add: shown, in the workspace, pseudo files, absent, private */
	add(&paths, AB_LEARN_READ, "/usr/lib/libx.so", "node");
	add(&paths, AB_LEARN_READ, "/srv/ws/package.json", "node");
	add(&paths, AB_LEARN_WRITE, "/srv/ws/.git/hooks/pre-commit", "sh");
	add(&paths, AB_LEARN_READ, "/proc/self/status", "node");
	add(&paths, AB_LEARN_READ, "/home/u/.cache/absent", "node");
	add(&paths, AB_LEARN_WRITE, "/home/u/.cache/new", "node");
	add(&paths, AB_LEARN_WRITE, "/tmp/x", "node");
	add(&paths, AB_LEARN_CREATE, "/home/u/.cache/dir/new", "node"); /* host lacks it too */
	add(&paths, AB_LEARN_CREATE, "/home/u/new", "node");            /* the tmpfs root: there */
	/* a new file in a host directory the private tmpfs hides: that directory */
	add(&paths, AB_LEARN_CREATE, "/home/u/.config/tool/new.db", "tool");
	/* added: files named, the description from the programs (a read below a
	 * directory the draft makes writable is covered by it) */
	add(&paths, AB_LEARN_READ, "/home/u/.config/tool/conf", "tool");
	add(&paths, AB_LEARN_READ, "/data/input.csv", "python3");
	add(&paths, AB_LEARN_READ, "/data/input.csv", "sh");
	add(&paths, AB_LEARN_EXEC, "/opt2/tool/bin/run", "sh");
	/* a new file: the nearest directory the host has, once; a read below it
	 * is covered by it */
	add(&paths, AB_LEARN_WRITE, "/data/out/new.txt", "python3");
	add(&paths, AB_LEARN_WRITE, "/data/out/sub/deeper", "python3");
	add(&paths, AB_LEARN_READ, "/data/out/old.txt", "python3");
	/* left out */
	add(&paths, AB_LEARN_READ, "/home/u/.npmrc", "node");
	add(&paths, AB_LEARN_READ, "/home/u/.ssh/id_rsa", "ssh");
	add(&paths, AB_LEARN_READ, "/data", "ls");
	add(&paths, AB_LEARN_READ, "/etc/shadow", "cat");
	add(&paths, AB_LEARN_WRITE, "/etc/newfile", "tee");
	add(&paths, AB_LEARN_WRITE, "/var/home/u/.local/bin/tool", "pip");
	add(&paths, AB_LEARN_WRITE, "/var/home/u/newfile", "sh");
	add(&paths, AB_LEARN_READ, "/home/u/.gitconfig", "git");
	add(&paths, AB_LEARN_READ, "/data/${HOME}", "cat");
	add(&paths, AB_LEARN_READ, "/data/bad\xff", "cat");
	add(&hosts, AB_LEARN_HOST, "registry.test:8080", "node");
	add(&hosts, AB_LEARN_HOST, "bad host!", NULL);
	ab_strv ext = {0}, argv = {0};
	assert_int_equal(ab_strv_push(&ext, "default"), 0);
	assert_int_equal(ab_strv_push(&argv, "npm"), 0);
	assert_int_equal(ab_strv_push(&argv, "install\n"), 0);
	ab_learn_input in = {.plan = &plan,
			     .extends = &ext,
			     .argv = &argv,
			     .paths = &paths,
			     .hosts = &hosts,
			     .stat = fake_stat};
	ab_learn_result res;
	ab_err e = {0};
	assert_int_equal(ab_learn_build(&in, &res, &e), 0);
	char *got = json_dumps(res.profile, JSON_SORT_KEYS | JSON_COMPACT);
	const char *want =
		"{\"description\":\"Learned by `agentbox run --learn` from `npm install?`: a draft "
		"to review, not an authority\","
		"\"descriptions\":{"
		"\"filesystem.read\":{\"/data/input.csv\":\"read by python3, sh (learned)\","
		"\"/opt2/tool/bin/run\":\"run by sh (learned)\"},"
		"\"filesystem.write\":{\"/data/out\":\"written by python3 (learned)\","
		"\"~/.config/tool\":\"written by tool (learned)\"},"
		"\"network.allow\":{\"registry.test:8080\":\"reached by node (learned)\"}},"
		"\"extends\":[\"default\"],"
		"\"filesystem\":{\"read\":[\"/data/input.csv\",\"/opt2/tool/bin/run\"],"
		"\"write\":[\"/data/out\",\"~/.config/tool\"]},"
		"\"network\":{\"allow\":[\"registry.test:8080\"]},\"version\":1}";
	if (strcmp(got, want) != 0)
		fail_msg("draft:\n got  %s\n want %s", got, want);
	/* the reasons, sorted; the new file below a missing directory is
	 * covered by its directory's grant (no line) */
	size_t k = 0;
	for (size_t i = 0; i < res.left.n; i++, k++) {
		if (!want_left[k])
			fail_msg("unexpected left-out line: %s", res.left.v[i]);
		if (strcmp(res.left.v[i], want_left[k]) != 0)
			fail_msg("left out:\n got  %s\n want %s", res.left.v[i], want_left[k]);
	}
	assert_null(want_left[k]);
	assert_int_equal(res.added.n, 5);

	/* the draft is a profile: it loads, descriptions and all */
	ab_vars vars = {.home = "/home/u", .workspace = "/srv/ws"};
	ab_profile *prof = NULL;
	char *nodefault = strdup(got);
	assert_non_null(nodefault);
	char *x = strstr(nodefault, "\"extends\":[\"default\"],");
	assert_non_null(x);
	memmove(x, x + strlen("\"extends\":[\"default\"],"),
		strlen(x + strlen("\"extends\":[\"default\"],")) + 1);
	if (ab_profile_load_buffer(nodefault, strlen(nodefault), "/x/learned.json", &vars, &prof,
				   &e) < 0)
		fail_msg("the draft does not load: %s", e.msg);
	assert_int_equal(prof->ndescr, 5);
	assert_true(ab_strv_contains(&prof->fs.write, "/home/u/.config/tool"));
	ab_profile_free(prof);
	free(nodefault);
	free(got);
	ab_learn_result_free(&res);
	ab_strv_free(&ext);
	ab_strv_free(&argv);
	ab_learn_set_free(&paths);
	ab_learn_set_free(&hosts);
}

/* A full record says so; an empty one is a bare profile that extends. */
static void test_draft_edges(void **state)
{
	ab_plan plan = fake_plan();
	ab_learn_set paths = {.dropped = 7}, hosts = {0};
	ab_learn_input in = {.plan = &plan, .paths = &paths, .hosts = &hosts, .stat = fake_stat};
	ab_learn_result res;
	ab_err e = {0};
	assert_int_equal(ab_learn_build(&in, &res, &e), 0);
	char *got = json_dumps(res.profile, JSON_SORT_KEYS | JSON_COMPACT);
	assert_string_equal(got,
			    "{\"description\":\"Learned by `agentbox run --learn` from ``: a "
			    "draft to review, not an authority\",\"extends\":[],\"version\":1}");
	free(got);
	assert_int_equal(res.left.n, 1);
	assert_non_null(strstr(res.left.v[0], "(7 more records)"));
	ab_learn_result_free(&res);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_record_limits),
		cmocka_unit_test(test_draft),
		cmocka_unit_test(test_draft_edges),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
