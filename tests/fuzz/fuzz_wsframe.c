/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target (fuzzing only): the WebSocket frame cutter of
 * src/parse/wsframe.c, fed what an intercepted server sends.  The first byte picks
 * the step size (the stream arrives in reads of any size); the pieces must
 * cover the input exactly, each of positive length, and a payload must never
 * run past the length its head announced.
 */
#include "agentbox/wsframe.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	size_t step = (size_t)data[0] + 1;
	size_t n = size - 1;
	uint8_t *buf = malloc(n ? n : 1);
	if (!buf)
		return 0;
	memcpy(buf, data + 1, n);
	ab_ws_framer f = {0};
	size_t i = 0;
	while (i < n) {
		size_t m = n - i < step ? n - i : step, j = 0;
		while (j < m) {
			int kind = 0;
			uint64_t before = f.in_payload ? f.left : 0;
			ssize_t k = ab_ws_next(&f, buf + i + j, m - j, &kind);
			if (k < 0)
				goto out;
			if (k == 0 || (size_t)k > m - j)
				abort();
			bool head = kind == AB_WS_HEAD || kind == AB_WS_HEAD_END;
			if (!head && (uint64_t)k > before)
				abort();
			if (kind == AB_WS_HEAD_END && f.in_payload != (f.len > 0))
				abort();
			if (kind == AB_WS_DATA_END && (f.in_payload && f.left))
				abort();
			j += (size_t)k;
		}
		i += m;
	}
out:
	free(buf);
	return 0;
}
