/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target (fuzzing only): the clipboard filter of src/sandbox/termfilter.c
 * over the sandbox's terminal output.  The first byte picks the chunk size.
 * Checked: only digits change, each to '9'; and no OSC introducer (ESC ],
 * C2 9D, or 9D after an ASCII byte) in the output is followed, after leading zeros, by the digits of a
 * clipboard sequence (52, 5522, 1337), whatever the chunking.
 */
#include "../../src/sandbox/termfilter.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int starts(const unsigned char *p, size_t n, const char *s)
{
	size_t l = strlen(s);
	return n >= l && memcmp(p, s, l) == 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	size_t step = (size_t)data[0] % 16 + 1, n = size - 1;
	unsigned char *b = malloc(n ? n : 1);
	if (!b)
		return 0;
	memcpy(b, data + 1, n);
	ab_termfilter f = {0};
	for (size_t i = 0; i < n; i += step)
		ab_termfilter_run(&f, b + i, n - i < step ? n - i : step);
	for (size_t i = 0; i < n; i++)
		if (b[i] != data[1 + i] &&
		    !(b[i] == '9' && data[1 + i] >= '0' && data[1 + i] <= '8'))
			abort();
	for (size_t i = 0; i + 1 < n; i++) {
		size_t j;
		if ((b[i] == 0x1b && b[i + 1] == ']') || (b[i] == 0xc2 && b[i + 1] == 0x9d))
			j = i + 2;
		else if (b[i] < 0x80 && b[i + 1] == 0x9d) /* 8-bit C1 OSC */
			j = i + 2;
		else
			continue;
		while (j < n && b[j] == '0')
			j++;
		if (starts(b + j, n - j, "52") || starts(b + j, n - j, "5522") ||
		    starts(b + j, n - j, "1337"))
			abort();
	}
	free(b);
	return 0;
}
