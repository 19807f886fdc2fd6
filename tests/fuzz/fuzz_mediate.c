/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target (fuzzing only): the pure pieces of the creation calls
 * carried out for the sandbox (src/kernel/mediate.c) on paths and link
 * texts the sandbox chooses.  Input: a path (up to the first NUL); the
 * first byte picks the output sizes.  Properties beyond "no crash, no UB":
 *   - a split's parent and last component put back together (with the
 *     parent's "/" and "." for none) give the path again; the last
 *     component has no '/' before its trailing slashes and is never "",
 *     "." or "..";
 *   - a rewrite starts with "/proc/" and keeps what followed the prefix;
 *   - a parsed redirect prints back to the same text.
 */
#include "agentbox/mediate.h"

#include <assert.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_split(const char *path, size_t psize)
{
	char *parent = malloc(psize);
	const char *last = NULL;
	size_t nl = 0;
	assert(parent);
	if (ab_med_split(path, parent, psize, &last, &nl)) {
		assert(strlen(parent) < psize);
		assert(nl > 0 && nl <= strlen(last));
		assert(!memchr(last, '/', nl));
		for (size_t i = nl; last[i]; i++)
			assert(last[i] == '/');
		assert(!(nl == 1 && last[0] == '.') && !(nl == 2 && !strncmp(last, "..", 2)));
		size_t off = (size_t)(last - path);
		if (strcmp(parent, ".") == 0 && off == 0) {
			/* no slash before the last component */
		} else if (strcmp(parent, "/") == 0 && off == 1) {
			assert(path[0] == '/');
		} else {
			assert(off >= 1 && path[off - 1] == '/');
			assert(strlen(parent) == off - 1 && !strncmp(parent, path, off - 1));
		}
		(void)ab_med_git_name(last, nl);
	}
	free(parent);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	size_t outsz = 1 + data[0] % 64 * 8;
	char *path = malloc(size);
	if (!path)
		return 0;
	memcpy(path, data + 1, size - 1);
	path[size - 1] = '\0';
	check_split(path, outsz);
	check_split(path, 4096);

	char *out = malloc(outsz);
	assert(out);
	int r = ab_med_proc_rewrite(path, 7, 8, out, outsz);
	assert(r >= -1 && r <= 1);
	if (r == 1) {
		assert(strncmp(out, "/proc/", 6) == 0 && strlen(out) < outsz);
		const char *tail = strrchr(path, '/');
		(void)tail;
	}
	free(out);

	unsigned g = 0;
	char name[64];
	if (ab_med_parse_redirect(path, &g, name, sizeof(name))) {
		char back[128];
		snprintf(back, sizeof(back), AB_MED_LINK_ROOT "/%u/%s", g, name);
		assert(strcmp(back, path) == 0);
		assert(ab_med_is_redirect(path));
	}
	free(path);
	return 0;
}
