/* SPDX-License-Identifier: MIT */
/* filesystem.guard's pure part: pointers with "*" expanded, values put back. */
#include "unit.h"

#include "../../src/sandbox/guard.h"

static json_t *parse(const char *s)
{
	json_error_t e;
	json_t *j = json_loads(s, 0, &e);
	assert_non_null(j);
	return j;
}

static void test_collect(void **state)
{
	(void)state;
	json_t *doc =
		parse("{\"a\": 1, \"projects\": {\"/x\": {\"m\": {\"s\": 1}}, \"y~z\": {\"n\": 2},"
		      " \"arr\": [1]}, \"list\": [1, 2]}");
	json_t *out = json_object();
	assert_int_equal(ab_guard_collect(doc, "/projects/*/m", out), 0);
	assert_int_equal(ab_guard_collect(doc, "/a", out), 0);
	assert_int_equal(ab_guard_collect(doc, "/absent", out), 0);
	assert_int_equal(ab_guard_collect(doc, "/list/*", out), 0); /* arrays: not expanded */
	assert_int_equal(json_object_size(out), 2);
	assert_non_null(json_object_get(out, "/projects/~1x/m"));
	assert_non_null(json_object_get(out, "/a"));
	json_decref(out);
	json_decref(doc);
}

static void test_restore(void **state)
{
	(void)state;
	json_t *start = json_object();
	json_t *before =
		parse("{\"n\": 1, \"mcp\": {\"ok\": {}}, \"projects\": {\"/w\": {\"t\": [],"
		      " \"keep\": 1}, \"/gone\": {\"t\": [\"x\"]}}, \"trust\": true}");
	ab_strv ptrs = {0};
	const char *p[] = {"/mcp", "/projects/*/t", "/trust", "/projects/*/new"};
	for (size_t i = 0; i < 4; i++) {
		assert_int_equal(ab_strv_push(&ptrs, p[i]), 0);
		assert_int_equal(ab_guard_collect(before, p[i], start), 0);
	}
	/* the run: a counter (kept), an MCP server added, allowed tools widened,
	 * trust removed, a project added with its own server, one removed */
	json_t *doc = parse("{\"n\": 2, \"mcp\": {\"ok\": {}, \"evil\": {\"command\": \"x\"}},"
			    " \"projects\": {\"/w\": {\"t\": [\"Bash\"], \"keep\": 2},"
			    " \"/other\": {\"new\": 1, \"t\": [\"y\"], \"x\": 3}}}");
	ab_strv changed = {0};
	assert_int_equal(ab_guard_restore(doc, &ptrs, start, &changed), 5);
	json_t *want = parse("{\"n\": 2, \"mcp\": {\"ok\": {}}, \"projects\": {\"/w\": {\"t\": [],"
			     " \"keep\": 2}, \"/other\": {\"x\": 3}}, \"trust\": true}");
	assert_true(json_equal(doc, want));
	/* settled: nothing more to put back */
	ab_strv again = {0};
	assert_int_equal(ab_guard_restore(doc, &ptrs, start, &again), 0);
	ab_strv_free(&again);
	ab_strv_free(&changed);
	ab_strv_free(&ptrs);
	json_decref(want);
	json_decref(doc);
	json_decref(before);
	json_decref(start);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_collect),
		cmocka_unit_test(test_restore),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
