/* SPDX-License-Identifier: MIT */
/* Unit tests for run --ask's pure parts: the answer keys
 * (src/parse/ask.c) and the profile edit with its diff
 * (src/config/profile_edit.c). */
#include "unit.h"

#include <stdlib.h>
#include <jansson.h>
#include <string.h>

#include "agentbox/ask.h"
#include "agentbox/profile_edit.h"

/* Feed S whole and byte by byte: both give the same result. */
static enum ab_askkey_out feed(const char *s, bool confirming, enum ab_ask_answer *ans)
{
	ab_askkey k = {.confirming = confirming};
	size_t used;
	enum ab_askkey_out whole =
		ab_askkey_feed(&k, (const unsigned char *)s, strlen(s), &used, ans);
	enum ab_ask_answer a2 = AB_ASK_NONE;
	enum ab_askkey_out split = AB_ASKKEY_MORE;
	ab_askkey k2 = {.confirming = confirming};
	for (size_t i = 0; i < strlen(s) && split == AB_ASKKEY_MORE; i++)
		split = ab_askkey_feed(&k2, (const unsigned char *)s + i, 1, &used, &a2);
	assert_int_equal(whole, split);
	assert_int_equal(*ans, a2);
	return whole;
}

static void test_keys(void **state)
{
	enum ab_ask_answer a;
	assert_int_equal(feed("o", false, &a), AB_ASKKEY_ANSWER);
	assert_int_equal(a, AB_ASK_ONCE);
	assert_int_equal(feed("R", false, &a), AB_ASKKEY_ANSWER);
	assert_int_equal(a, AB_ASK_RUN);
	assert_int_equal(feed("d", false, &a), AB_ASKKEY_ANSWER);
	assert_int_equal(a, AB_ASK_DENY);
	assert_int_equal(feed("\x03", false, &a), AB_ASKKEY_ANSWER);
	assert_int_equal(a, AB_ASK_DENY);
	assert_int_equal(feed("a", false, &a), AB_ASKKEY_CONFIRM);
	assert_int_equal(feed("y", true, &a), AB_ASKKEY_ANSWER);
	assert_int_equal(a, AB_ASK_ALWAYS);
	assert_int_equal(feed("n", true, &a), AB_ASKKEY_BACK);
	/* y outside the confirmation answers nothing; o inside it neither */
	assert_int_equal(feed("y\r\n ", false, &a), AB_ASKKEY_MORE);
	assert_int_equal(feed("o", true, &a), AB_ASKKEY_MORE);
	/* the first decisive key wins; USED stops there */
	ab_askkey k = {0};
	size_t used;
	assert_int_equal(ab_askkey_feed(&k, (const unsigned char *)"xxrd", 4, &used, &a),
			 AB_ASKKEY_ANSWER);
	assert_int_equal(used, 3);
	assert_int_equal(a, AB_ASK_RUN);
	assert_string_equal(ab_ask_answer_name(AB_ASK_TIMEOUT), "timeout");
}

/* No byte inside an escape sequence answers: arrow keys, a terminal's
 * replies to queries (a title report the command chose: "o", "r"...). */
static void test_escape_sequences_never_answer(void **state)
{
	enum ab_ask_answer a;
	static const char *const seqs[] = {
		"\033[A\033[B\033OA\033Or", /* arrows, SS3 */
		"\033[1;5R",                /* cursor position report (R final) */
		"\033]lorda\033\\",         /* OSC title report, ST */
		"\033]lrun\007",            /* OSC, BEL */
		"\033Pdo\033\\",            /* DCS */
		"\033_apc-r\033\\",         /* APC */
		"\233?1;2c",                /* 8-bit CSI */
		"\235odd\234",              /* 8-bit OSC ... ST */
		"\033(B",                   /* charset designation */
		"\033o",                    /* Alt-o */
	};
	for (size_t i = 0; i < sizeof(seqs) / sizeof(seqs[0]); i++) {
		assert_int_equal(feed(seqs[i], false, &a), AB_ASKKEY_MORE);
		assert_int_equal(feed(seqs[i], true, &a), AB_ASKKEY_MORE);
	}
	/* after a sequence, a key counts again */
	assert_int_equal(feed("\033]lo\007r", false, &a), AB_ASKKEY_ANSWER);
	assert_int_equal(a, AB_ASK_RUN);
}

static void test_profile_add_allow(void **state)
{
	ab_err e = {0};
	char *out = NULL;
	int changed = 0;
	assert_int_equal(ab_profile_add_allow(NULL, 0, "/usr/share/agentbox/profiles/default.json",
					      "example.com:443", &out, &changed, &e),
			 0);
	assert_true(changed);
	assert_non_null(strstr(out, "\"extends\": \"/usr/share/agentbox/profiles/default.json\""));
	assert_non_null(strstr(out, "\"example.com:443\""));
	free(out);

	const char *old = "{\"version\": 1, \"description\": \"mine\",\n"
			  " \"network\": {\"allow\": [\"a.example\"]}}\n";
	assert_int_equal(
		ab_profile_add_allow(old, strlen(old), NULL, "b.example:80", &out, &changed, &e),
		0);
	assert_true(changed);
	char *d = strstr(out, "\"description\"");
	assert_non_null(d);
	assert_true(strstr(out, "\"a.example\"") < strstr(out, "\"b.example:80\""));
	free(out);
	/* already listed: unchanged */
	assert_int_equal(
		ab_profile_add_allow(old, strlen(old), NULL, "a.example", &out, &changed, &e), 0);
	assert_false(changed);
	free(out);
	/* hostile or broken input: refused with a message, nothing made */
	static const char *const bad[] = {"[1]", "{\"network\": 3}",
					  "{\"network\": {\"allow\": {}}}", "{\"version\": 1",
					  "{\"a\":1,\"a\":2}"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		e = (ab_err){0};
		out = NULL;
		assert_true(ab_profile_add_allow(bad[i], strlen(bad[i]), NULL, "x.example", &out,
						 &changed, &e) < 0);
		assert_null(out);
		assert_true(e.msg[0] != '\0');
	}
}

/* run --ask's offer at exit: entries added to filesystem.write, kept in
 * order, the listed ones skipped; a filesystem of the wrong type refused. */
static void test_profile_add_list(void **state)
{
	ab_err e = {0};
	char *out = NULL;
	int changed = 0;
	char *two[] = {"/srv/out", "~/cache"};
	ab_strv v = {.v = two, .n = 2};
	const char *old = "{\"version\": 1, \"filesystem\": {\"read\": [\"/srv/out\"],"
			  " \"write\": [\"~/cache\"]}}";
	assert_int_equal(ab_profile_add_list(old, strlen(old), NULL, "filesystem", "write", &v,
					     &out, &changed, &e),
			 0);
	assert_true(changed);
	json_t *j = json_loads(out, 0, NULL);
	json_t *w = json_object_get(json_object_get(j, "filesystem"), "write");
	assert_int_equal(json_array_size(w), 2);
	assert_string_equal(json_string_value(json_array_get(w, 0)), "~/cache");
	assert_string_equal(json_string_value(json_array_get(w, 1)), "/srv/out");
	json_decref(j);
	free(out);
	/* all listed already: unchanged */
	const char *both = "{\"filesystem\": {\"write\": [\"~/cache\", \"/srv/out\"]}}";
	assert_int_equal(ab_profile_add_list(both, strlen(both), NULL, "filesystem", "write", &v,
					     &out, &changed, &e),
			 0);
	assert_false(changed);
	free(out);
	static const char *const bad[] = {"{\"filesystem\": []}",
					  "{\"filesystem\": {\"write\": \"/x\"}}"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		out = NULL;
		e = (ab_err){0};
		assert_true(ab_profile_add_list(bad[i], strlen(bad[i]), NULL, "filesystem", "write",
						&v, &out, &changed, &e) < 0);
		assert_null(out);
		assert_non_null(strstr(e.msg, "filesystem"));
	}
}

static void test_text_diff(void **state)
{
	ab_strv d = {0};
	assert_int_equal(ab_text_diff("a\nb\nc\nd\ne\nf\ng\n", "a\nb\nc\nX\ne\nf\ng\n", 1, &d), 0);
	/* ... b? no: context 1 around the change: c, -d, +X, e */
	assert_int_equal(d.n, 6);
	assert_string_equal(d.v[0], "...");
	assert_string_equal(d.v[1], " c");
	assert_string_equal(d.v[2], "-d");
	assert_string_equal(d.v[3], "+X");
	assert_string_equal(d.v[4], " e");
	assert_string_equal(d.v[5], "...");
	ab_strv_free(&d);
	assert_int_equal(ab_text_diff(NULL, "x\ny", 3, &d), 0);
	assert_int_equal(d.n, 2);
	assert_string_equal(d.v[0], "+x");
	assert_string_equal(d.v[1], "+y");
	ab_strv_free(&d);
	assert_int_equal(ab_text_diff("same\n", "same\n", 3, &d), 0);
	assert_int_equal(d.n, 0);
	ab_strv_free(&d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_keys),
		cmocka_unit_test(test_escape_sequences_never_answer),
		cmocka_unit_test(test_profile_add_allow),
		cmocka_unit_test(test_profile_add_list),
		cmocka_unit_test(test_text_diff),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
