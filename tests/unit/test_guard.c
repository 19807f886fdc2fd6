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

/* MERGE(base, ours, theirs) must give WANT. */
static void check_merge(const char *base, const char *ours, const char *theirs, const char *want)
{
	json_t *b = base ? parse(base) : NULL, *o = ours ? parse(ours) : NULL;
	json_t *t = theirs ? parse(theirs) : NULL, *w = want ? parse(want) : NULL;
	assert_int_equal(ab_guard_merge(&t, b, o), 0);
	if (!w)
		assert_null(t);
	else if (!json_equal(t, w)) {
		char *got = json_dumps(t, JSON_SORT_KEYS);
		fail_msg("merge gave %s, want %s", got, want);
	}
	json_decref(b);
	json_decref(o);
	json_decref(t);
	json_decref(w);
}

static void test_merge(void **state)
{
	(void)state;
	/* the host left it: the run's document whole */
	check_merge("{\"a\": 1}", "{\"a\": 2, \"b\": 1}", "{\"a\": 1}", "{\"a\": 2, \"b\": 1}");
	/* the run left it: the host's */
	check_merge("{\"a\": 1}", "{\"a\": 1}", "{\"a\": 3}", "{\"a\": 3}");
	/* both, other keys: each one's change, removals too */
	check_merge("{\"a\": 1, \"b\": 1, \"c\": 1}", "{\"a\": 2, \"b\": 1}",
		    "{\"a\": 1, \"b\": 5, \"c\": 1, \"d\": 4}", "{\"a\": 2, \"b\": 5, \"d\": 4}");
	/* both, the same key: the host's stays */
	check_merge("{\"a\": 1, \"x\": 0}", "{\"a\": 2, \"x\": 1}", "{\"a\": 3, \"x\": 0}",
		    "{\"a\": 3, \"x\": 1}");
	/* a removal the host changed meanwhile: the host's stays */
	check_merge("{\"a\": 1}", "{}", "{\"a\": 2}", "{\"a\": 2}");
	/* objects merge key by key, however deep; both added one: merged */
	check_merge("{\"p\": {\"/w\": {\"h\": [1]}}}",
		    "{\"p\": {\"/w\": {\"h\": [1, 2]}, \"/n\": {\"k\": 1}}}",
		    "{\"p\": {\"/w\": {\"h\": [1], \"t\": 1}, \"/o\": {}}}",
		    "{\"p\": {\"/w\": {\"h\": [1, 2], \"t\": 1}, \"/o\": {}, \"/n\": {\"k\": 1}}}");
	check_merge("{}", "{\"m\": {\"x\": 1}}", "{\"m\": {\"y\": 2}}",
		    "{\"m\": {\"y\": 2, \"x\": 1}}");
	/* a type changed on one side against an object on the other: the host's */
	check_merge("{\"m\": {\"x\": 1}}", "{\"m\": [1]}", "{\"m\": {\"x\": 2}}",
		    "{\"m\": {\"x\": 2}}");
	/* an empty copy (NULL) changes nothing; an empty base takes the run's keys */
	check_merge("{\"a\": 1}", NULL, "{\"a\": 1}", "{\"a\": 1}");
	check_merge(NULL, "{\"a\": 1}", "{\"b\": 2}", "{\"b\": 2, \"a\": 1}");
	check_merge(NULL, "{\"a\": 1}", NULL, "{\"a\": 1}");
	/* arrays at the top: whole, never merged */
	check_merge("[1]", "[2]", "[3]", "[3]");
	check_merge("[1]", "[2]", "[1]", "[2]");
}

/* The merge then the host's guarded values: nothing the run put under a
 * guarded key survives, and the host's own do. */
static void test_merge_guarded(void **state)
{
	(void)state;
	json_t *base = parse("{\"n\": 1, \"projects\": {\"/w\": {\"t\": []}}}");
	json_t *ours = parse("{\"n\": 2, \"mcp\": {\"evil\": 1}, \"projects\": {\"/w\": "
			     "{\"t\": [\"Bash\"], \"m\": {\"e\": 1}}}}");
	json_t *theirs = parse("{\"n\": 1, \"mcp\": {\"mine\": 1}, \"projects\": {\"/w\": "
			       "{\"t\": []}}}");
	json_t *copy = json_deep_copy(theirs), *host = json_object();
	ab_strv ptrs = {0}, put = {0};
	const char *p[] = {"/mcp", "/projects/*/t", "/projects/*/m"};
	for (size_t i = 0; i < 3; i++) {
		assert_int_equal(ab_strv_push(&ptrs, p[i]), 0);
		assert_int_equal(ab_guard_collect(copy, p[i], host), 0);
	}
	assert_int_equal(ab_guard_merge(&theirs, base, ours), 0);
	assert_int_equal(ab_guard_restore(theirs, &ptrs, host, &put), 3);
	json_t *want = parse("{\"n\": 2, \"mcp\": {\"mine\": 1}, \"projects\": {\"/w\": "
			     "{\"t\": []}}}");
	assert_true(json_equal(theirs, want));
	ab_strv_free(&ptrs);
	ab_strv_free(&put);
	json_decref(want);
	json_decref(host);
	json_decref(copy);
	json_decref(theirs);
	json_decref(ours);
	json_decref(base);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_collect),
		cmocka_unit_test(test_restore),
		cmocka_unit_test(test_merge),
		cmocka_unit_test(test_merge_guarded),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
