/* SPDX-License-Identifier: MIT */
/*
 * credfile.c: JSON pointers (escapes, arrays, limits, hostile forms), the
 * credentials file reader (limits, duplicates, not JSON, empty = absent),
 * rendering with placeholders ("keep" subsets), and the write-back to the
 * host file (atomic rename and in place: other keys kept, mode kept, no
 * temporary left, a missing pointer refused with the file unchanged).
 */
#include "unit.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agentbox/credfile.h"

#define S_NUL "{\"t\":\"a\\u0000b\"}"

static json_t *parse(const char *s)
{
	json_t *j = NULL;
	ab_err e = {0};
	assert_int_equal(ab_credfile_parse(s, strlen(s), &j, &e), 0);
	return j;
}

static void test_pointer_check(void **state)
{
	(void)state;
	assert_int_equal(ab_json_pointer_check(""), 0);
	assert_int_equal(ab_json_pointer_check("/a/b"), 0);
	assert_int_equal(ab_json_pointer_check("/a~0b/c~1d"), 0);
	assert_int_equal(ab_json_pointer_check("/"), 0);
	assert_int_equal(ab_json_pointer_check("a"), -EINVAL);
	assert_int_equal(ab_json_pointer_check("/a~2"), -EINVAL);
	assert_int_equal(ab_json_pointer_check("/a~"), -EINVAL);
	assert_int_equal(ab_json_pointer_check(NULL), -EINVAL);
	char deep[64] = "";
	for (int i = 0; i < AB_JSON_POINTER_DEPTH + 1; i++)
		strcat(deep, "/a");
	assert_int_equal(ab_json_pointer_check(deep), -EINVAL);
	deep[2 * AB_JSON_POINTER_DEPTH] = '\0';
	assert_int_equal(ab_json_pointer_check(deep), 0);
	char *long_ = malloc(AB_JSON_POINTER_MAX + 2);
	memset(long_, 'x', AB_JSON_POINTER_MAX + 1);
	long_[0] = '/';
	long_[AB_JSON_POINTER_MAX + 1] = '\0';
	assert_int_equal(ab_json_pointer_check(long_), -EINVAL);
	free(long_);
}

static void test_pointer_get(void **state)
{
	(void)state;
	json_t *j = parse("{\"a\":{\"b/c\":\"x\",\"d~e\":[\"y\",\"z\"]},\"\":\"empty\",\"n\":1}");
	char *v;
	size_t n;
	assert_int_equal(ab_credfile_get(j, "/a/b~1c", &v, &n), 0);
	assert_string_equal(v, "x");
	free(v);
	assert_int_equal(ab_credfile_get(j, "/a/d~0e/1", &v, &n), 0);
	assert_string_equal(v, "z");
	free(v);
	assert_int_equal(ab_credfile_get(j, "/", &v, &n), 0); /* the key "" */
	assert_string_equal(v, "empty");
	free(v);
	assert_int_equal(ab_credfile_get(j, "/a/d~0e/01", &v, &n), -ENOENT); /* leading zero */
	assert_int_equal(ab_credfile_get(j, "/a/d~0e/-", &v, &n), -ENOENT);
	assert_int_equal(ab_credfile_get(j, "/a/d~0e/2", &v, &n), -ENOENT);
	assert_int_equal(ab_credfile_get(j, "/a/d~0e/99999999999", &v, &n), -ENOENT);
	assert_int_equal(ab_credfile_get(j, "/n", &v, &n), -EINVAL); /* not a string */
	assert_int_equal(ab_credfile_get(j, "/a", &v, &n), -EINVAL);
	assert_int_equal(ab_credfile_get(j, "/n/x", &v, &n), -ENOENT); /* through a number */
	assert_int_equal(ab_credfile_get(j, "/missing", &v, &n), -ENOENT);
	json_decref(j);
	/* a NUL inside a string is refused by the parser */
	ab_err e = {0};
	assert_int_equal(ab_credfile_parse(S_NUL, strlen(S_NUL), &j, &e), -EINVAL);
}

static void test_parse_hostile(void **state)
{
	(void)state;
	json_t *j = NULL;
	ab_err e = {0};
	const char *bad[] = {"",
			     "nope",
			     "\"str\"",
			     "1",
			     "{\"a\":1,\"a\":2}",
			     "{\"a\":",
			     "[1,]",
			     "{\"secret-in-error\":tru}"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		memset(&e, 0, sizeof(e));
		assert_int_equal(ab_credfile_parse(bad[i], strlen(bad[i]), &j, &e), -EINVAL);
		assert_null(j);
		assert_null(strstr(e.msg, "secret-in-error")); /* position only, never content */
	}
	size_t big = AB_CREDFILE_MAX + 1;
	char *b = malloc(big);
	memset(b, ' ', big);
	b[0] = '[';
	b[big - 1] = ']';
	assert_int_equal(ab_credfile_parse(b, big, &j, &e), -EFBIG);
	free(b);
	/* deep nesting within the size limit: parsed or refused, never a crash */
	size_t depth = 5000;
	char *d = malloc(2 * depth + 1);
	memset(d, '[', depth);
	memset(d + depth, ']', depth);
	d[2 * depth] = '\0';
	int r = ab_credfile_parse(d, 2 * depth, &j, &e);
	assert_true(r == 0 || r == -EINVAL);
	json_decref(j);
	free(d);
}

static void test_render_keep(void **state)
{
	(void)state;
	json_t *j = parse("{\"claudeAiOauth\":{\"accessToken\":\"AT\",\"refreshToken\":\"RT\","
			  "\"expiresAt\":123},\"mcpOAuth\":{\"s\":{\"accessToken\":\"MCP\"}},"
			  "\"arr\":[{\"x\":\"y\"}]}");
	char *keep[] = {"/claudeAiOauth", "/missing/deeper", "/arr/0/x"};
	json_t *doc = NULL;
	assert_int_equal(ab_credfile_keep(j, keep, 3, &doc), 0);
	assert_int_equal(ab_credfile_set(doc, "/claudeAiOauth/accessToken", "PH1", 3), 0);
	assert_int_equal(ab_credfile_set(doc, "/mcpOAuth/s/accessToken", "PH2", 3), -ENOENT);
	assert_int_equal(ab_credfile_set(doc, "/claudeAiOauth/expiresAt", "x", 1), -EINVAL);
	char *out;
	size_t n;
	assert_int_equal(ab_credfile_dump(doc, &out, &n), 0);
	assert_string_equal(out, "{\"claudeAiOauth\":{\"accessToken\":\"PH1\",\"refreshToken\":"
				 "\"RT\",\"expiresAt\":123}}");
	free(out);
	/* ROOT itself is untouched by changes to the kept copy */
	char *v;
	assert_int_equal(ab_credfile_get(j, "/claudeAiOauth/accessToken", &v, &n), 0);
	assert_string_equal(v, "AT");
	free(v);
	json_decref(doc);
	json_decref(j);
}

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	assert_non_null(f);
	static char buf[4096];
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	return buf;
}

static void update_case(bool in_place)
{
	char dir[] = "/tmp/ab-credfile-XXXXXX";
	assert_non_null(mkdtemp(dir));
	char path[128];
	snprintf(path, sizeof(path), "%s/creds.json", dir);
	FILE *f = fopen(path, "w");
	fputs("{\"o\":{\"a\":\"old-a\",\"r\":\"old-r\",\"keep\":[1,2]},\"other\":\"x\"}\n", f);
	fclose(f);
	chmod(path, 0640);
	struct stat st0, st1;
	stat(path, &st0);
	const char *ptrs[] = {"/o/a", "/o/r"}, *vals[] = {"new-a", "new-r"};
	size_t lens[] = {5, 5};
	ab_err e = {0};
	assert_int_equal(ab_credfile_update(path, ptrs, vals, lens, 2, NULL, in_place, &e), 0);
	assert_string_equal(
		slurp(path),
		"{\"o\":{\"a\":\"new-a\",\"r\":\"new-r\",\"keep\":[1,2]},\"other\":\"x\"}");
	stat(path, &st1);
	assert_int_equal(st1.st_mode & 07777, 0640);
	assert_true(in_place ? st1.st_ino == st0.st_ino : st1.st_ino != st0.st_ino);
	/* a pointer that is not there: refused, the file unchanged */
	const char *bad[] = {"/o/missing"};
	assert_true(ab_credfile_update(path, bad, vals, lens, 1, NULL, in_place, &e) < 0);
	assert_non_null(strstr(e.msg, "not there"));
	assert_string_equal(
		slurp(path),
		"{\"o\":{\"a\":\"new-a\",\"r\":\"new-r\",\"keep\":[1,2]},\"other\":\"x\"}");
	/* the file became garbage: refused */
	f = fopen(path, "w");
	fputs("garbage", f);
	fclose(f);
	assert_int_equal(ab_credfile_update(path, ptrs, vals, lens, 2, NULL, in_place, &e),
			 -EINVAL);
	assert_string_equal(slurp(path), "garbage");
	unlink(path);
	assert_int_equal(rmdir(dir), 0); /* no temporary left behind */
}

static void test_update_atomic(void **state)
{
	(void)state;
	update_case(false);
}

static void test_update_in_place(void **state)
{
	(void)state;
	update_case(true);
}

static void test_stamps(void **state)
{
	(void)state;
	json_t *j = parse("{\"o\":{\"expiresAt\":1,\"a\":\"x\"},\"last_refresh\":\"old\","
			  "\"arr\":[1],\"s\":\"str\"}");
	ab_credfile_stamps st = {.expires_in = 3600, .now_us = 1700000000123456LL};
	assert_true(ab_credfile_stamp_kind_ok("now") && ab_credfile_stamp_kind_ok("expires_at_ms"));
	assert_false(ab_credfile_stamp_kind_ok("NOW") || ab_credfile_stamp_kind_ok(""));
	assert_int_equal(ab_credfile_stamps_add(&st, "/o/expiresAt", "expires_at_ms"), 0);
	assert_int_equal(ab_credfile_stamps_add(&st, "/last_refresh", "now"), 0);
	assert_int_equal(ab_credfile_stamps_add(&st, "/last_refresh", "expires_at_ms"),
			 0);                                                   /* dup */
	assert_int_equal(ab_credfile_stamps_add(&st, "/o/new", "now"), 0);     /* added */
	assert_int_equal(ab_credfile_stamps_add(&st, "/missing/x", "now"), 0); /* no parent */
	assert_int_equal(ab_credfile_stamps_add(&st, "/arr/0", "now"), 0);     /* an array */
	assert_int_equal(ab_credfile_stamps_add(&st, "/s/x", "now"), 0);       /* a string */
	assert_int_equal(ab_credfile_stamps_add(&st, "", "now"), 0);           /* the root */
	assert_int_equal(st.n, 7);
	assert_int_equal(ab_credfile_apply_stamps(j, &st), 3);
	char *out;
	size_t n;
	assert_int_equal(ab_credfile_dump(j, &out, &n), 0);
	assert_string_equal(out, "{\"o\":{\"expiresAt\":1700003600123,\"a\":\"x\",\"new\":"
				 "\"2023-11-14T22:13:20.123456Z\"},\"last_refresh\":"
				 "\"2023-11-14T22:13:20.123456Z\",\"arr\":[1],\"s\":\"str\"}");
	free(out);
	/* no expires_in: expires_at_ms is skipped, "now" is not */
	st.expires_in = 0;
	assert_int_equal(ab_credfile_apply_stamps(j, &st), 2);
	/* the cap */
	ab_credfile_stamps full = {0};
	char names[AB_CREDFILE_STAMPS_MAX + 1][16];
	for (int i = 0; i <= AB_CREDFILE_STAMPS_MAX; i++) {
		snprintf(names[i], sizeof(names[i]), "/k%d", i);
		assert_int_equal(ab_credfile_stamps_add(&full, names[i], "now"),
				 i < AB_CREDFILE_STAMPS_MAX ? 0 : -E2BIG);
	}
	json_decref(j);
	/* expires_in of a token response: a positive integer within limits only */
	const char *const resp[] = {"{\"expires_in\":3600}",
				    "{\"expires_in\":\"3600\"}",
				    "{\"expires_in\":-5}",
				    "{\"expires_in\":0}",
				    "{\"expires_in\":1e3}",
				    "{\"expires_in\":99999999999999}",
				    "{}",
				    "[3600]"};
	const long long want[] = {3600, 0, 0, 0, 0, 0, 0, 0};
	for (size_t i = 0; i < AB_ARRAY_SIZE(resp); i++) {
		json_t *r = parse(resp[i]);
		assert_true(ab_credfile_expires_in(r) == want[i]);
		json_decref(r);
	}
}

static void test_update_stamps(void **state)
{
	(void)state;
	char dir[] = "/tmp/ab-credfile-XXXXXX";
	assert_non_null(mkdtemp(dir));
	char path[128];
	snprintf(path, sizeof(path), "%s/auth.json", dir);
	FILE *f = fopen(path, "w");
	fputs("{\"tokens\":{\"a\":\"old\"},\"last_refresh\":\"2025-01-01T00:00:00Z\"}", f);
	fclose(f);
	const char *ptrs[] = {"/tokens/a"}, *vals[] = {"new"};
	size_t lens[] = {3};
	ab_credfile_stamps st = {.now_us = 1000000LL * 86400 * 366};
	assert_int_equal(ab_credfile_stamps_add(&st, "/last_refresh", "now"), 0);
	ab_err e = {0};
	assert_int_equal(ab_credfile_update(path, ptrs, vals, lens, 1, &st, true, &e), 0);
	assert_string_equal(slurp(path), "{\"tokens\":{\"a\":\"new\"},\"last_refresh\":"
					 "\"1971-01-02T00:00:00.000000Z\"}");
	unlink(path);
	rmdir(dir);
}

static void test_load_limits(void **state)
{
	(void)state;
	char dir[] = "/tmp/ab-credfile-XXXXXX";
	assert_non_null(mkdtemp(dir));
	char path[128];
	snprintf(path, sizeof(path), "%s/c.json", dir);
	json_t *j = NULL;
	ab_err e = {0};
	assert_int_equal(ab_credfile_load(path, &j, &e), -ENOENT);
	int fd = open(path, O_WRONLY | O_CREAT, 0600);
	close(fd);
	assert_int_equal(ab_credfile_load(path, &j, &e), -ENOENT); /* empty: no login */
	fd = open(path, O_WRONLY | O_TRUNC);
	/* a file larger than a document in memory may be (~/.claude.json) loads */
	char *big = malloc(AB_CREDFILE_FILE_MAX + 10);
	memset(big, ' ', AB_CREDFILE_FILE_MAX + 10);
	big[0] = '{';
	big[AB_CREDFILE_MAX + 9] = '}';
	assert_int_equal(write(fd, big, AB_CREDFILE_MAX + 10), AB_CREDFILE_MAX + 10);
	close(fd);
	assert_int_equal(ab_credfile_load(path, &j, &e), 0);
	json_decref(j);
	j = NULL;
	fd = open(path, O_WRONLY | O_TRUNC);
	big[AB_CREDFILE_MAX + 9] = ' ';
	big[AB_CREDFILE_FILE_MAX + 9] = '}';
	assert_int_equal(write(fd, big, AB_CREDFILE_FILE_MAX + 10), AB_CREDFILE_FILE_MAX + 10);
	close(fd);
	free(big);
	assert_int_equal(ab_credfile_load(path, &j, &e), -EFBIG);
	unlink(path);
	assert_int_equal(ab_credfile_load(dir, &j, &e), -EINVAL); /* a directory */
	rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pointer_check), cmocka_unit_test(test_pointer_get),
		cmocka_unit_test(test_parse_hostile), cmocka_unit_test(test_render_keep),
		cmocka_unit_test(test_update_atomic), cmocka_unit_test(test_update_in_place),
		cmocka_unit_test(test_load_limits),   cmocka_unit_test(test_stamps),
		cmocka_unit_test(test_update_stamps),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
