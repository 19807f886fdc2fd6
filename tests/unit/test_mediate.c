/* SPDX-License-Identifier: MIT */
/* Unit tests for the pure pieces of the creation calls carried out for the
 * sandbox (src/kernel/mediate.c) and for which calls the filter routes to
 * them (src/kernel/seccomp_filter.c). */
#include "unit.h"

#include <string.h>
#include <sys/syscall.h>

#include "agentbox/mediate.h"
#include "agentbox/seccomp.h"

static void split_is(const char *path, const char *parent, const char *last, size_t nl)
{
	char p[PATH_MAX];
	const char *l = NULL;
	size_t n = 0;
	if (!ab_med_split(path, p, sizeof(p), &l, &n))
		fail_msg("%s: no last component", path);
	if (strcmp(p, parent) != 0 || strcmp(l, last) != 0 || n != nl)
		fail_msg("%s: (%s, %s, %zu), want (%s, %s, %zu)", path, p, l, n, parent, last, nl);
}

static void test_split(void **state)
{
	split_is("a", ".", "a", 1);
	split_is("a/b", "a", "b", 1);
	split_is("/a", "/", "a", 1);
	split_is("/a/b/.git", "/a/b", ".git", 4);
	split_is("sub/.git/", "sub", ".git/", 4);
	split_is("sub//.git//", "sub/", ".git//", 4);
	split_is("x/../y", "x/..", "y", 1);
	split_is("..a", ".", "..a", 3);
	char p[PATH_MAX];
	const char *l;
	size_t n;
	static const char *const whole[] = {"", "/", "//", ".", "..", "a/.", "a/..", "/..", "./"};
	for (size_t i = 0; i < sizeof(whole) / sizeof(*whole); i++)
		if (ab_med_split(whole[i], p, sizeof(p), &l, &n))
			fail_msg("%s: split, want the whole path", whole[i]);
	/* a parent that does not fit */
	char small[3];
	assert_false(ab_med_split("abc/d", small, sizeof(small), &l, &n));
}

static void test_git_name(void **state)
{
	assert_true(ab_med_git_name(".git", 4));
	assert_true(ab_med_git_name(".GIT", 4));
	assert_true(ab_med_git_name(".Git/", 4)); /* the length without the slashes */
	assert_false(ab_med_git_name(".gitx", 5));
	assert_false(ab_med_git_name("git", 3));
	assert_false(ab_med_git_name(".gi", 3));
	assert_false(ab_med_git_name(".git.agentbox-disarmed", 22));
}

static void rewrite_is(const char *in, const char *want)
{
	char out[PATH_MAX];
	int r = ab_med_proc_rewrite(in, 42, 43, out, sizeof(out));
	if (!want) {
		assert_int_equal(r, 0);
		return;
	}
	assert_int_equal(r, 1);
	if (strcmp(out, want) != 0)
		fail_msg("%s -> %s, want %s", in, out, want);
}

static void test_proc_rewrite(void **state)
{
	rewrite_is("/dev/stdout", "/proc/42/fd/1");
	rewrite_is("/dev/stderr", "/proc/42/fd/2");
	rewrite_is("/dev/stdin", "/proc/42/fd/0");
	rewrite_is("/dev/fd/5", "/proc/42/fd/5");
	rewrite_is("/dev/fd", "/proc/42/fd");
	rewrite_is("/proc/self/fd/3/x", "/proc/42/fd/3/x");
	rewrite_is("/proc/self", "/proc/42");
	rewrite_is("/proc/thread-self/fd/1", "/proc/42/task/43/fd/1");
	rewrite_is("/dev/stdoutx", NULL);
	rewrite_is("/proc/selfish", NULL);
	rewrite_is("dev/stdout", NULL);
	rewrite_is("/proc/1/fd/1", NULL);
	char out[8];
	assert_int_equal(ab_med_proc_rewrite("/proc/self/fd/1", 42, 43, out, sizeof(out)), -1);
}

static void test_redirect_text(void **state)
{
	unsigned g = 0;
	char name[64];
	assert_true(ab_med_parse_redirect("/.agentbox-git/15/0a1b.3", &g, name, sizeof(name)));
	assert_int_equal(g, 15);
	assert_string_equal(name, "0a1b.3");
	assert_true(ab_med_is_redirect("/.agentbox-git/0/f.12"));
	static const char *const bad[] = {
		"/.agentbox-git/15/3",        "/.agentbox-git/15/.3",    "/.agentbox-git/15/a.",
		"/.agentbox-git/15/A.3",      "/.agentbox-git/15/a.3x",  "/.agentbox-git/15/a.3/x",
		"/.agentbox-git//a.3",        "/.agentbox-git/015/a.3",  "/.agentbox-git/x/a.3",
		"/.agentbox-gitx/15/a.3",     ".agentbox-git/15/a.3",    "/.agentbox-git/15/..",
		"/.agentbox-git/1234567/a.3", "/.agentbox-git/15/a.b.3", "",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++)
		if (ab_med_is_redirect(bad[i]))
			fail_msg("%s: taken for a redirect", bad[i]);
	/* the name must fit */
	assert_false(ab_med_parse_redirect("/.agentbox-git/1/abcdef.1234", &g, name, 8));
}

static void test_filter_routes(void **state)
{
	ab_seccomp_policy pol = {0};
	assert_false(ab_seccomp_notifies_create(&pol, SYS_mkdirat));
	pol.notify_create = true;
	static const int calls[] = {SYS_openat, SYS_mkdirat,  SYS_mknodat,  SYS_symlinkat,
				    SYS_linkat, SYS_renameat, SYS_renameat2};
	for (size_t i = 0; i < sizeof(calls) / sizeof(*calls); i++)
		assert_true(ab_seccomp_notifies_create(&pol, calls[i]));
	assert_false(ab_seccomp_notifies_create(&pol, SYS_unlinkat));
	assert_false(ab_seccomp_notifies_create(&pol, SYS_read));
	assert_true(ab_seccomp_listens(&pol));
	/* a call the profile denies stays a denial */
	char *deny[] = {"symlinkat", NULL};
	pol.extra_deny = (ab_strv){.v = deny, .n = 1};
	assert_false(ab_seccomp_notifies_create(&pol, SYS_symlinkat));
	assert_true(ab_seccomp_notifies_create(&pol, SYS_linkat));
	/* rendered files too: renames are the creator's then, as well */
	pol.extra_deny = (ab_strv){0};
	pol.notify_rename = true;
	assert_true(ab_seccomp_notifies_rename(&pol, SYS_renameat2));
	/* and it compiles */
	ab_seccomp_prog prog = {0};
	ab_err err = {0};
	assert_int_equal(ab_seccomp_compile(&pol, &prog, &err), 0);
	ab_seccomp_prog_free(&prog);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_split),         cmocka_unit_test(test_git_name),
		cmocka_unit_test(test_proc_rewrite),  cmocka_unit_test(test_redirect_text),
		cmocka_unit_test(test_filter_routes),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
