/* SPDX-License-Identifier: MIT */
/* Unit tests for the clipboard filter on the sandbox's terminal output
 * (src/sandbox/termfilter.c): every split of the input, lengths kept. */
#include "unit.h"

#include <stdlib.h>
#include <string.h>

#include "../../src/sandbox/termfilter.h"

/* Filter IN in chunks of STEP bytes; returns a malloc'd copy. */
static char *run(const char *in, size_t n, size_t step, uint64_t *count)
{
	unsigned char *b = malloc(n + 1);
	assert_non_null(b);
	memcpy(b, in, n);
	b[n] = '\0';
	ab_termfilter f = {0};
	for (size_t i = 0; i < n; i += step)
		ab_termfilter_run(&f, b + i, n - i < step ? n - i : step);
	if (count)
		*count = f.neutralized;
	return (char *)b;
}

static void check(const char *in, const char *want, uint64_t nwant)
{
	size_t n = strlen(in);
	assert_int_equal(strlen(want), n);
	for (size_t step = 1; step <= n + 1; step++) {
		uint64_t cnt = 0;
		char *got = run(in, n, step, &cnt);
		if (memcmp(got, want, n) != 0)
			fail_msg("step %zu: %s -> %s, want %s", step, in, got, want);
		assert_int_equal(cnt, nwant);
		free(got);
	}
}

static void test_clipboard_sequences(void **state)
{
	/* set and query, BEL and ST terminated, C1 form, leading zeros, tmux
	 * passthrough (doubled ESC) */
	check("a\x1b]52;c;aGk=\x07z", "a\x1b]59;c;aGk=\x07z", 1);
	check("\x1b]52;c;?\x1b\\", "\x1b]59;c;?\x1b\\", 1);
	check("\xc2\x9d"
	      "52;c;eA==\x07",
	      "\xc2\x9d"
	      "59;c;eA==\x07",
	      1);
	check("\x1b]0052;p;eA==\x07", "\x1b]0059;p;eA==\x07", 1);
	check("\x1bPtmux;\x1b\x1b]52;c;eA==\x07\x1b\\", "\x1bPtmux;\x1b\x1b]59;c;eA==\x07\x1b\\",
	      1);
	check("\x1b]5522;type=write\x1b\\", "\x1b]5529;type=write\x1b\\", 1);
	check("\x1b]1337;CopyToClipboard=\x07", "\x1b]1339;CopyToClipboard=\x07", 1);
	check("\x1b]52;c;a\x07\x1b]52;c;b\x07", "\x1b]59;c;a\x07\x1b]59;c;b\x07", 2);
	check("x\x9d"
	      "52;c;eA==\x07",
	      "x\x9d"
	      "59;c;eA==\x07",
	      1); /* 8-bit C1 */
	check("\x9d"
	      "052;c;eA==\x07",
	      "\x9d"
	      "059;c;eA==\x07",
	      1);
}

static void test_others_untouched(void **state)
{
	static const char *const same[] = {
		"\x1b]0;title\x07",
		"\x1b]8;;https://example.com\x1b\\link\x1b]8;;\x1b\\",
		"\x1b]5;1;rgb:00/00/00\x07",
		"\x1b]53;x\x07",
		"\x1b]552;x\x07",
		"\x1b]133;A\x07",
		"\x1b[52;1H",
		"]52;",
		"52",
		"\x1b"
		"52",
		"\xc5\x9d"
		"52",
		"\xc2"
		"52",
		"\x1b]1234567852;x\x07",
		"plain text \xe2\x9c\x93 utf-8",
		"\xc5\x9d"
		"52 (a UTF-8 letter, then digits)",
		"\xe2\x9d\x9d"
		"52",
	};
	for (size_t i = 0; i < sizeof(same) / sizeof(same[0]); i++)
		check(same[i], same[i], 0);
}

/* Random bytes: the length is kept and only digits change (to '9'). */
static void test_random(void **state)
{
	unsigned seed = 7;
	for (int round = 0; round < 2000; round++) {
		unsigned char in[64], out[64];
		size_t n = (size_t)(rand_r(&seed) % 64);
		for (size_t i = 0; i < n; i++) {
			static const unsigned char alpha[] = "\x1b]5213702;\x07\xc2\x9d"
							     "a";
			in[i] = alpha[rand_r(&seed) % (sizeof(alpha) - 1)];
		}
		memcpy(out, in, n);
		ab_termfilter f = {0};
		ab_termfilter_run(&f, out, n);
		for (size_t i = 0; i < n; i++)
			if (out[i] != in[i])
				assert_true(out[i] == '9' && in[i] >= '0' && in[i] <= '8');
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_clipboard_sequences),
		cmocka_unit_test(test_others_untouched),
		cmocka_unit_test(test_random),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
