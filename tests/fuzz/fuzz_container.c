/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target (fuzzing only): the two readers of text a process's
 * surroundings choose in src/kernel/container.c: /proc/self/mountinfo (mount
 * points any user with a mount namespace picks) for the mounts over /proc,
 * and /proc/self/cgroup for the engine.  The input is copied to an
 * exact-size buffer so ASan sees any read past the end.  The list must be a
 * NUL-terminated string within its buffer, only of mount points under /proc/.
 */
#include "agentbox/container.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *buf = malloc(size ? size : 1);
	if (!buf)
		return 0;
	memcpy(buf, data, size);
	char out[AB_CTR_OVERMOUNTS_MAX], small[16];
	int n = ab_ctr_proc_overmounts(buf, size, out, sizeof(out));
	int m = ab_ctr_proc_overmounts(buf, size, small, sizeof(small));
	if (n < 0 || n != m || strnlen(out, sizeof(out)) == sizeof(out) ||
	    strnlen(small, sizeof(small)) == sizeof(small) || (n == 0 && out[0]) ||
	    (out[0] && strncmp(out, "/proc/", 6) != 0))
		abort();
	int e = ab_ctr_engine_of(false, false, NULL, NULL, buf, size);
	if (e < AB_ENGINE_NONE || e > AB_ENGINE_OTHER)
		abort();
	free(buf);
	return 0;
}
