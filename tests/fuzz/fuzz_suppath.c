/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target (parent; fuzzing only): the path of a rename onto a
 * rendered credentials file, as the sandbox gives it and as /proc gives the
 * directory it is relative to (src/observe/supervise_path.c, ab_sup_path_norm).
 * Input: the base directory, a NUL, the path; the first byte picks the
 * output size.  Properties beyond "no crash, no UB":
 *   - a result is absolute, NUL-terminated within the buffer, and holds no
 *     "//", "/./" or "/../" and no trailing "/." or "/..", nor a trailing
 *     slash (but "/");
 *   - normalising the result again gives it back;
 *   - -EINVAL only for an empty path or a relative one on a relative base.
 */
#include "agentbox/supervise.h"

#include <assert.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_clean(const char *out, size_t size)
{
	size_t n = strnlen(out, size);
	assert(n < size && out[0] == '/');
	assert(!strstr(out, "//") && !strstr(out, "/./") && !strstr(out, "/../"));
	assert(n == 1 || out[n - 1] != '/');
	assert(!(n >= 2 && strcmp(out + n - 2, "/.") == 0));
	assert(!(n >= 3 && strcmp(out + n - 3, "/..") == 0));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 2)
		return 0;
	size_t outsz = 2 + data[0] % 64 * 8; /* 2 .. 506 */
	char *buf = malloc(size);
	if (!buf)
		return 0;
	memcpy(buf, data + 1, size - 1);
	buf[size - 1] = '\0';
	const char *base = buf;
	const char *nul = memchr(buf, '\0', size - 1);
	const char *path = nul && nul + 1 < buf + size - 1 ? nul + 1 : "";
	char *out = malloc(outsz), *again = malloc(outsz);
	if (out && again) {
		int r = ab_sup_path_norm(base, path, out, outsz);
		assert(r == 0 || r == -EINVAL || r == -ENAMETOOLONG);
		if (r == -EINVAL)
			assert(!path[0] || (path[0] != '/' && base[0] != '/'));
		if (r == 0) {
			check_clean(out, outsz);
			assert(ab_sup_path_norm("/", out, again, outsz) == 0);
			assert(strcmp(out, again) == 0);
		}
	}
	free(out);
	free(again);
	free(buf);
	return 0;
}
