/* SPDX-License-Identifier: MIT */
/*
 * common.c: the error value (formatting, prefixing, hints, truncation), the
 * string vectors, the lexical path helpers, reading and writing whole fds
 * and byte counts for people.  Table-driven.
 */
#include "unit.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agentbox/common.h"

/* ---------------------------------------------------------------- ab_err */

static void test_fail_formats(void **state)
{
	ab_err e = {0};
	int r = ab_fail(&e, ENOENT, "open %s", "/x");
	assert_int_equal(r, -ENOENT);
	assert_int_equal(e.code, ENOENT);
	assert_int_equal(e.exit_code, AB_EXIT_FAIL);
	char want[128];
	snprintf(want, sizeof(want), "open /x: %s", strerror(ENOENT));
	assert_string_equal(e.msg, want);
	assert_string_equal(e.hint, "");
	assert_int_equal(ab_err_ret(&e), -ENOENT);
}

static void test_fail_no_errno(void **state)
{
	ab_err e = {0};
	assert_int_equal(ab_fail(&e, 0, "bad value %d", 7), -EINVAL);
	assert_string_equal(e.msg, "bad value 7");
	assert_int_equal(e.code, 0);
	assert_int_equal(ab_err_ret(&e), -EINVAL);
}

static void test_fail_overwrites_and_clears_hint(void **state)
{
	ab_err e = {0};
	ab_fail(&e, EPERM, "first");
	ab_err_hint(&e, "do %s", "this");
	assert_string_equal(e.hint, "do this");
	ab_fail(&e, 0, "second");
	assert_string_equal(e.msg, "second");
	assert_string_equal(e.hint, ""); /* a new error never keeps an old hint */
	assert_int_equal(e.code, 0);
}

static void test_fail_code(void **state)
{
	ab_err e = {0};
	assert_int_equal(ab_fail_code(&e, AB_EXIT_NOTFOUND, 0, "%s: command not found", "nope"),
			 -EINVAL);
	assert_int_equal(e.exit_code, AB_EXIT_NOTFOUND);
	assert_string_equal(e.msg, "nope: command not found");
	assert_int_equal(ab_fail_code(&e, AB_EXIT_NOEXEC, EACCES, "x"), -EACCES);
	assert_int_equal(e.exit_code, AB_EXIT_NOEXEC);
	assert_int_equal(e.code, EACCES);
	assert_string_equal(e.msg, "x"); /* the code is recorded, its strerror not said */
	/* a plain ab_fail resets the exit code to 125 */
	ab_fail(&e, 0, "y");
	assert_int_equal(e.exit_code, AB_EXIT_FAIL);
}

static void test_prefix(void **state)
{
	ab_err e = {0};
	ab_fail(&e, EACCES, "open %s", "/a");
	ab_err_hint(&e, "chmod it");
	assert_int_equal(ab_err_prefix(&e, "profile %s", "p"), -EACCES);
	assert_int_equal(ab_err_prefix(&e, "run"), -EACCES);
	char want[128];
	snprintf(want, sizeof(want), "run: profile p: open /a: %s", strerror(EACCES));
	assert_string_equal(e.msg, want);
	assert_string_equal(e.hint, "chmod it"); /* prefix keeps the hint */
	ab_fail(&e, 0, "x");
	assert_int_equal(ab_err_prefix(&e, "ctx"), -EINVAL);
	assert_string_equal(e.msg, "ctx: x");
}

static void test_prefix_empty_message(void **state)
{
	ab_err e = {0};
	ab_err_prefix(&e, "ctx");
	assert_string_equal(e.msg, "ctx: ");
}

/* Hostile lengths: everything stays NUL-terminated inside the fixed buffers,
 * and prefixing keeps the leading context. */
static void test_truncation(void **state)
{
	static char big[4000];
	memset(big, 'A', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	ab_err e;
	memset(&e, 0x55, sizeof(e)); /* garbage in */
	ab_fail(&e, ENOENT, "%s", big);
	assert_int_equal(strlen(e.msg), sizeof(e.msg) - 1);
	assert_int_equal(e.code, ENOENT);

	/* long message, short prefix: the prefix survives, the tail is cut */
	ab_err_prefix(&e, "ctx");
	assert_int_equal(strlen(e.msg), sizeof(e.msg) - 1);
	assert_memory_equal(e.msg, "ctx: AAAA", 9);

	/* a prefix longer than its own buffer: truncated, still terminated */
	ab_fail(&e, 0, "tail");
	ab_err_prefix(&e, "%s", big);
	size_t l = strlen(e.msg);
	assert_true(l < sizeof(e.msg));
	assert_true(l >= 500);
	assert_memory_equal(e.msg + l - 6, ": tail", 6);

	/* repeated prefixes never overflow */
	for (int i = 0; i < 200; i++)
		ab_err_prefix(&e, "step %d", i);
	assert_true(strlen(e.msg) < sizeof(e.msg));
	assert_memory_equal(e.msg, "step 199: step 198: ", 20);

	ab_err_hint(&e, "%s", big);
	assert_int_equal(strlen(e.hint), sizeof(e.hint) - 1);
}

/* The message buffer filled exactly: no room for strerror, still sane. */
static void test_truncation_errno_no_room(void **state)
{
	ab_err e = {0};
	char buf[sizeof(e.msg)];
	memset(buf, 'b', sizeof(buf) - 1);
	buf[sizeof(buf) - 1] = '\0';
	ab_fail(&e, EIO, "%s", buf);
	assert_int_equal(strlen(e.msg), sizeof(e.msg) - 1);
	assert_int_equal(ab_err_ret(&e), -EIO);
}

/* ---------------------------------------------------------------- strv */

static void test_strv_push(void **state)
{
	ab_strv s = {0};
	assert_false(ab_strv_contains(&s, "a"));
	assert_int_equal(ab_strv_push(&s, "a"), 0);
	assert_int_equal(ab_strv_push(&s, "b"), 0);
	assert_int_equal(ab_strv_push(&s, "a"), 0); /* push allows duplicates */
	assert_int_equal(s.n, 3);
	assert_null(s.v[3]);
	assert_string_equal(s.v[0], "a");
	assert_string_equal(s.v[2], "a");
	assert_true(ab_strv_contains(&s, "b"));
	assert_false(ab_strv_contains(&s, "c"));
	assert_false(ab_strv_contains(&s, ""));
	assert_int_equal(ab_strv_push_unique(&s, "b"), 0);
	assert_int_equal(s.n, 3);
	assert_int_equal(ab_strv_push_unique(&s, "c"), 0);
	assert_int_equal(s.n, 4);
	assert_null(s.v[4]);
	ab_strv_free(&s);
	assert_null(s.v);
	assert_int_equal(s.n, 0);
	ab_strv_free(&s); /* twice is fine */
}

static void test_strv_push_take(void **state)
{
	ab_strv s = {0};
	char *x = strdup("owned");
	assert_int_equal(ab_strv_push_take(&s, x), 0);
	assert_ptr_equal(s.v[0], x);
	/* NULL (a failed allocation upstream) is reported, not stored */
	assert_int_equal(ab_strv_push_take(&s, NULL), -ENOMEM);
	assert_int_equal(s.n, 1);
	assert_int_equal(ab_strv_push_take(&s, ab_asprintf("%d-%s", 3, "x")), 0);
	assert_string_equal(s.v[1], "3-x");
	ab_strv_free(&s);
}

static void test_strv_extend_copy(void **state)
{
	_cleanup_strv_ ab_strv a = {0};
	_cleanup_strv_ ab_strv b = {0};
	_cleanup_strv_ ab_strv c = {0};
	const char *av[] = {"x", "y"}, *bv[] = {"y", "z", "z"};
	for (size_t i = 0; i < AB_ARRAY_SIZE(av); i++)
		ab_strv_push(&a, av[i]);
	for (size_t i = 0; i < AB_ARRAY_SIZE(bv); i++)
		ab_strv_push(&b, bv[i]);
	assert_int_equal(ab_strv_extend(&a, &b), 0); /* unique append */
	assert_int_equal(a.n, 3);
	assert_string_equal(a.v[2], "z");
	assert_null(a.v[3]);
	assert_int_equal(ab_strv_copy(&c, &b), 0); /* verbatim, duplicates kept */
	assert_int_equal(c.n, 3);
	assert_string_equal(c.v[2], "z");
	assert_ptr_not_equal(c.v[0], b.v[0]); /* deep copy */
	/* extend/copy of an empty vector: nothing happens */
	ab_strv empty = {0};
	assert_int_equal(ab_strv_extend(&c, &empty), 0);
	assert_int_equal(ab_strv_copy(&c, &empty), 0);
	assert_int_equal(c.n, 3);
}

/* ---------------------------------------------------------------- strings */

static void test_strdup_asprintf(void **state)
{
	assert_null(ab_strdup(NULL));
	_cleanup_free_ char *s = ab_strdup("abc");
	assert_string_equal(s, "abc");
	_cleanup_free_ char *f = ab_asprintf("%s=%u", "K", 7u);
	assert_string_equal(f, "K=7");
}

static void test_path_join(void **state)
{
	static const struct {
		const char *a, *b, *want;
	} t[] = {
		{"/a", "b", "/a/b"},       {"/a/", "b", "/a/b"}, {"/a//", "//b", "/a/b"},
		{"/", "b", "/b"},          {"/", "/", "/"},      {"/a", "", "/a/"},
		{"/a", "b/c/", "/a/b/c/"}, {"", "x", "/x"},
	};
	for (size_t i = 0; i < AB_ARRAY_SIZE(t); i++) {
		_cleanup_free_ char *got = ab_path_join(t[i].a, t[i].b);
		if (!got || strcmp(got, t[i].want) != 0)
			fail_msg("join(%s, %s) = %s, want %s", t[i].a, t[i].b, got ? got : "NULL",
				 t[i].want);
	}
}

static void test_path_normalize(void **state)
{
	static const struct {
		const char *in, *want; /* want NULL = rejected */
	} t[] = {
		{"/a/./b//c/../d", "/a/b/d"},
		{"/..", "/"},
		{"/", "/"},
		{"//", "/"},
		{"/./", "/"},
		{"/../..", "/"},
		{"/../a", "/a"},
		{"/a/..", "/"},
		{"/a/b/../../..", "/"},
		{"/a/b/", "/a/b"},
		{"/a/b//", "/a/b"},
		{"/a/b/.", "/a/b"},
		{"/a/b/..", "/a"},
		{"/a/.../b", "/a/.../b"}, /* three dots is a name */
		{"/a/..b/c", "/a/..b/c"},
		{"/a/.b", "/a/.b"},
		{"/.git/hooks", "/.git/hooks"},
		{"/a b/c", "/a b/c"},
		{"a", NULL},
		{"a/b", NULL},
		{"./a", NULL},
		{"../a", NULL},
		{"", NULL},
		{"~/x", NULL},
	};
	for (size_t i = 0; i < AB_ARRAY_SIZE(t); i++) {
		_cleanup_free_ char *got = ab_path_normalize(t[i].in);
		if (!t[i].want) {
			if (got)
				fail_msg("normalize(%s) = %s, want NULL", t[i].in, got);
			continue;
		}
		if (!got || strcmp(got, t[i].want) != 0)
			fail_msg("normalize(%s) = %s, want %s", t[i].in, got ? got : "NULL",
				 t[i].want);
	}
	assert_null(ab_path_normalize(NULL));
}

/* A long hostile path: output never longer than input, stays absolute. */
static void test_path_normalize_long(void **state)
{
	char in[8192];
	size_t o = 0;
	while (o + 8 < sizeof(in)) {
		memcpy(in + o, "/x/../..", 8);
		o += 8;
	}
	in[o] = '\0';
	_cleanup_free_ char *got = ab_path_normalize(in);
	assert_string_equal(got, "/");
	memset(in, '/', sizeof(in) - 1);
	in[sizeof(in) - 1] = '\0';
	_cleanup_free_ char *slashes = ab_path_normalize(in);
	assert_string_equal(slashes, "/");
}

static void test_path_is_under(void **state)
{
	static const struct {
		const char *path, *dir;
		bool want;
	} t[] = {
		{"/foo/bar", "/foo", true},
		{"/foo", "/foo", true},
		{"/foo/bar/baz", "/foo", true},
		{"/foobar", "/foo", false},
		{"/foo.d/x", "/foo", false},
		{"/fo", "/foo", false},
		{"/", "/foo", false},
		{"/bar/foo", "/foo", false},
		{"/foo", "/foo/bar", false},
		{"/", "/", true},
		{"/anything", "/", true},
		{"/a/b/c", "/", true},
		{"/home/u/.ssh", "/home/u", true},
		{"/home/u2", "/home/u", false},
		{"/home/u-x/.ssh", "/home/u", false},
		{"relative", "/", false},
	};
	for (size_t i = 0; i < AB_ARRAY_SIZE(t); i++) {
		if (ab_path_is_under(t[i].path, t[i].dir) != t[i].want)
			fail_msg("is_under(%s, %s) != %d", t[i].path, t[i].dir, t[i].want);
	}
}

static void test_explicit_bzero(void **state)
{
	char secret[16] = "hunter2hunter2";
	ab_explicit_bzero(secret, sizeof(secret));
	for (size_t i = 0; i < sizeof(secret); i++)
		assert_int_equal(secret[i], 0);
}

static void test_cleanup_macros(void **state)
{
	int fd;
	{
		_cleanup_close_ int f = dup(0);
		fd = TAKE_FD(f);
		assert_int_equal(f, -1);
	}
	assert_true(fd >= 0);
	{
		_cleanup_close_ int f2 = fd; /* closed at scope end */
		(void)f2;
	}
	errno = 0;
	assert_int_equal(close(fd), -1); /* already closed */
	char *p;
	{
		_cleanup_free_ char *q = strdup("x");
		p = TAKE_PTR(q);
		assert_null(q);
	}
	assert_string_equal(p, "x");
	free(p);
}

/* ab_read_fd_all: past its hint, up to the limit, nothing, over it. */
static void test_read_fd_all(void **state)
{
	char data[10000];
	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (char)('a' + i % 26);
	for (size_t hint = 0; hint <= 20000; hint += 5000) {
		int p[2];
		assert_int_equal(pipe2(p, O_CLOEXEC), 0);
		assert_int_equal(write(p[1], data, sizeof(data)), (ssize_t)sizeof(data));
		close(p[1]);
		char *out = NULL;
		size_t len = 0;
		assert_int_equal(ab_read_fd_all(p[0], hint, sizeof(data), &out, &len), 0);
		assert_int_equal(len, sizeof(data));
		assert_memory_equal(out, data, sizeof(data));
		assert_int_equal(out[len], '\0');
		free(out);
		close(p[0]);
	}
	int p[2];
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	assert_int_equal(write(p[1], data, 101), 101);
	close(p[1]);
	char *out = (char *)1;
	size_t len = 7;
	assert_int_equal(ab_read_fd_all(p[0], 0, 100, &out, &len), -E2BIG);
	assert_null(out);
	close(p[0]);
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	close(p[1]);
	assert_int_equal(ab_read_fd_all(p[0], 0, 100, &out, &len), 0);
	assert_int_equal(len, 0);
	assert_string_equal(out, "");
	free(out);
	close(p[0]);
	assert_int_equal(ab_read_fd_all(-1, 0, 100, &out, &len), -EBADF);
}

/* ab_read_full: less than asked (to the end), exactly, one byte more than
 * asked stays unread, no fd. */
static void test_read_full(void **state)
{
	char buf[16];
	int p[2];
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	assert_int_equal(write(p[1], "abcdefghijk", 11), 11);
	assert_int_equal(ab_read_full(p[0], buf, 4), 4);
	assert_memory_equal(buf, "abcd", 4);
	assert_int_equal(ab_read_full(p[0], buf, 6), 6);
	assert_memory_equal(buf, "efghij", 6);
	close(p[1]);
	assert_int_equal(ab_read_full(p[0], buf, sizeof(buf)), 1);
	assert_int_equal(buf[0], 'k');
	assert_int_equal(ab_read_full(p[0], buf, sizeof(buf)), 0);
	close(p[0]);
	assert_int_equal(ab_read_full(-1, buf, sizeof(buf)), -EBADF);
}

/* ab_write_all: more than a pipe holds (a child drains it), nothing, a
 * closed reader, no fd. */
static void test_write_all(void **state)
{
	static char data[300000];
	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (char)('a' + i % 26);
	int p[2];
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(p[1]);
		char *out = NULL;
		size_t len = 0;
		int ok = ab_read_fd_all(p[0], 0, sizeof(data), &out, &len) == 0 &&
			 len == sizeof(data) && memcmp(out, data, len) == 0;
		_exit(ok ? 0 : 1);
	}
	close(p[0]);
	assert_int_equal(ab_write_all(p[1], data, sizeof(data)), 0);
	assert_int_equal(ab_write_all(p[1], data, 0), 0);
	close(p[1]);
	int st = 0;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);

	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	close(p[0]);
	void (*old)(int) = signal(SIGPIPE, SIG_IGN);
	assert_int_equal(ab_write_all(p[1], "x", 1), -EPIPE);
	signal(SIGPIPE, old);
	close(p[1]);
	assert_int_equal(ab_write_all(-1, "x", 1), -EBADF);
}

/* ab_fmt_bytes: bytes as they are below 1 KiB, then one decimal in the
 * largest unit reached, up to EiB. */
static void test_fmt_bytes(void **state)
{
	static const struct {
		uint64_t b;
		const char *want;
	} cases[] = {
		{0, "0 B"},
		{1023, "1023 B"},
		{1024, "1.0 KiB"},
		{1536, "1.5 KiB"},
		{1048575, "1024.0 KiB"},
		{1048576, "1.0 MiB"},
		{1073741824, "1.0 GiB"},
		{1ULL << 40, "1.0 TiB"},
		{1ULL << 50, "1.0 PiB"},
		{1ULL << 60, "1.0 EiB"},
		{UINT64_MAX, "16.0 EiB"},
	};
	for (size_t i = 0; i < AB_ARRAY_SIZE(cases); i++) {
		char out[32];
		ab_fmt_bytes(out, sizeof(out), cases[i].b);
		assert_string_equal(out, cases[i].want);
	}
	char small[4];
	ab_fmt_bytes(small, sizeof(small), 1536);
	assert_string_equal(small, "1.5");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fail_formats),
		cmocka_unit_test(test_fail_no_errno),
		cmocka_unit_test(test_fail_overwrites_and_clears_hint),
		cmocka_unit_test(test_fail_code),
		cmocka_unit_test(test_prefix),
		cmocka_unit_test(test_prefix_empty_message),
		cmocka_unit_test(test_truncation),
		cmocka_unit_test(test_truncation_errno_no_room),
		cmocka_unit_test(test_strv_push),
		cmocka_unit_test(test_strv_push_take),
		cmocka_unit_test(test_strv_extend_copy),
		cmocka_unit_test(test_strdup_asprintf),
		cmocka_unit_test(test_path_join),
		cmocka_unit_test(test_path_normalize),
		cmocka_unit_test(test_path_normalize_long),
		cmocka_unit_test(test_path_is_under),
		cmocka_unit_test(test_explicit_bzero),
		cmocka_unit_test(test_cleanup_macros),
		cmocka_unit_test(test_read_fd_all),
		cmocka_unit_test(test_read_full),
		cmocka_unit_test(test_write_all),
		cmocka_unit_test(test_fmt_bytes),
	};
	return cmocka_run_group_tests_name("common", tests, NULL, NULL);
}
