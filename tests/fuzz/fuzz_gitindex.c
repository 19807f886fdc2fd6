/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target (fuzzing only): the git index parser of src/observe/gitscan.c,
 * which reads a file the sandbox can write.  The first byte picks the hash
 * length (SHA-1 or SHA-256); the rest is the index, copied to an exact-size
 * buffer so ASan sees any read past the end.  Every gitlink reported must be
 * a NUL-free path of at most AB_GIT_PATH_MAX bytes.
 */
#include "agentbox/gitscan.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	size_t hash = (data[0] & 1) ? 32 : 20;
	uint8_t *buf = malloc(size - 1 ? size - 1 : 1);
	if (!buf)
		return 0;
	memcpy(buf, data + 1, size - 1);
	ab_strv out = {0};
	ab_err err = {0};
	int r = ab_git_index_gitlinks(buf, size - 1, hash, &out, &err);
	if (r < 0 && !err.msg[0])
		abort(); /* an error always says why */
	for (size_t i = 0; i < out.n; i++)
		if (strlen(out.v[i]) > AB_GIT_PATH_MAX)
			abort();
	ab_strv_free(&out);
	free(buf);
	return 0;
}
