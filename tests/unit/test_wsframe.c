/* SPDX-License-Identifier: MIT */
/* Unit tests for the WebSocket frame cutter (src/parse/wsframe.c): the server's
 * frames, fed whole and a byte at a time, hostile ones refused. */
#include "unit.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "agentbox/wsframe.h"

/* Feed BUF in steps of STEP bytes; record per byte what it was (H head,
 * D payload, E the last payload byte of a frame).  Returns 0 or the error. */
static int heads;

static int cut(const uint8_t *buf, size_t n, size_t step, char *what, ab_ws_framer *f)
{
	memset(f, 0, sizeof(*f));
	heads = 0;
	size_t i = 0;
	while (i < n) {
		size_t m = n - i < step ? n - i : step, j = 0;
		while (j < m) {
			int kind = 0;
			ssize_t k = ab_ws_next(f, buf + i + j, m - j, &kind);
			if (k < 0)
				return (int)k;
			assert_true(k > 0);
			for (ssize_t x = 0; x < k; x++)
				what[i + j + (size_t)x] =
					kind == AB_WS_HEAD || kind == AB_WS_HEAD_END ? 'H' : 'D';
			if (kind == AB_WS_HEAD_END)
				heads++;
			if (kind == AB_WS_DATA_END)
				what[i + j + (size_t)k - 1] = 'E';
			j += (size_t)k;
		}
		i += m;
	}
	what[n] = '\0';
	return 0;
}

static void test_frames(void **state)
{
	/* text "hi", an empty ping, a 300-byte binary (16-bit length), a
	 * 2-byte continuation with a 64-bit length */
	uint8_t buf[2 + 2 + 2 + 4 + 300 + 10 + 2];
	size_t n = 0;
	buf[n++] = 0x81, buf[n++] = 2, buf[n++] = 'h', buf[n++] = 'i';
	buf[n++] = 0x89, buf[n++] = 0;
	buf[n++] = 0x82, buf[n++] = 126, buf[n++] = 300 >> 8, buf[n++] = 300 & 0xff;
	memset(buf + n, 'x', 300);
	n += 300;
	buf[n++] = 0x80, buf[n++] = 127;
	for (int i = 0; i < 7; i++)
		buf[n++] = 0;
	buf[n++] = 2;
	buf[n++] = 'o', buf[n++] = 'k';
	char want[sizeof(buf) + 1], got[sizeof(buf) + 1];
	size_t w = 0;
	memcpy(want + w, "HHDE", 4), w += 4;
	memcpy(want + w, "HH", 2), w += 2;
	memcpy(want + w, "HHHH", 4), w += 4;
	memset(want + w, 'D', 299), w += 299;
	want[w++] = 'E';
	memset(want + w, 'H', 10), w += 10;
	memcpy(want + w, "DE", 2), w += 2;
	want[w] = '\0';
	assert_int_equal(w, n);
	size_t steps[] = {1, 2, 3, 7, 64, sizeof(buf)};
	for (size_t s = 0; s < sizeof(steps) / sizeof(steps[0]); s++) {
		ab_ws_framer f;
		assert_int_equal(cut(buf, n, steps[s], got, &f), 0);
		assert_string_equal(got, want);
		assert_int_equal(f.frames, 4);
		assert_int_equal(heads, 4);
		assert_false(f.in_payload);
		assert_true(f.fin); /* the last frame ends its message */
		assert_int_equal(f.len, 2);
	}
	int kind = 0;
	ab_ws_framer f = {0};
	assert_int_equal(ab_ws_next(&f, buf, 0, &kind), 0);
}

/* FIN and the length are known once the head is complete. */
static void test_fin(void **state)
{
	static const uint8_t frag[] = {0x01, 0x03, 'a', 'b', 'c', 0x80, 0x01, 'd'};
	ab_ws_framer f = {0};
	int kind = 0;
	assert_int_equal(ab_ws_next(&f, frag, 1, &kind), 1);
	assert_int_equal(kind, AB_WS_HEAD);
	assert_int_equal(ab_ws_next(&f, frag + 1, 7, &kind), 1);
	assert_int_equal(kind, AB_WS_HEAD_END);
	assert_false(f.fin);
	assert_int_equal(f.len, 3);
	assert_int_equal(ab_ws_next(&f, frag + 2, 6, &kind), 3);
	assert_int_equal(kind, AB_WS_DATA_END);
	assert_int_equal(ab_ws_next(&f, frag + 5, 3, &kind), 2);
	assert_int_equal(kind, AB_WS_HEAD_END);
	assert_true(f.fin);
	assert_int_equal(f.len, 1);
}

static void test_refused(void **state)
{
	static const uint8_t rsv1[] = {0xc1, 0x02, 'h', 'i'}; /* compressed */
	static const uint8_t rsv3[] = {0x91, 0x00};
	static const uint8_t masked[] = {0x81, 0x82, 1, 2, 3, 4, 'h', 'i'};
	static const uint8_t huge[] = {0x82, 127, 0x80, 0, 0, 0, 0, 0, 0, 1};
	const struct {
		const uint8_t *p;
		size_t n;
	} bad[] = {{rsv1, sizeof(rsv1)},
		   {rsv3, sizeof(rsv3)},
		   {masked, sizeof(masked)},
		   {huge, sizeof(huge)}};
	char got[16];
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ab_ws_framer f;
		assert_int_equal(cut(bad[i].p, bad[i].n, 1, got, &f), -EPROTO);
		assert_int_equal(cut(bad[i].p, bad[i].n, bad[i].n, got, &f), -EPROTO);
	}
	/* the largest length allowed is taken as it is (a stream that ends
	 * early just ends) */
	static const uint8_t big[] = {0x82, 127,  0x7f, 0xff, 0xff, 0xff,
				      0xff, 0xff, 0xff, 0xff, 'a'};
	ab_ws_framer f;
	assert_int_equal(cut(big, sizeof(big), 3, got, &f), 0);
	assert_true(f.in_payload);
	assert_int_equal(f.left, 0x7ffffffffffffffeULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_frames),
		cmocka_unit_test(test_fin),
		cmocka_unit_test(test_refused),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
