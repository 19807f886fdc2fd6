/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target (parent; fuzzing only): credentials files and token
 * responses (src/parse/credfile.c), which come from the host file a sandbox may
 * have written to, and from an OAuth token endpoint.  Input: the first line
 * is a JSON pointer, the rest a document.  Properties beyond "no crash, no
 * leak, no UB":
 *   - a pointer that passes the check resolves or is absent, never more;
 *   - a document that parses, with the string at the pointer replaced
 *     (as a token refresh does), dumps to JSON that parses again and holds
 *     the replacement at the same pointer;
 *   - "keep" of the pointer yields an object;
 *   - a stamp at the pointer is written (then the dump parses again and
 *     holds a string or an integer there) or skipped.
 */
#include "agentbox/credfile.h"

#include <assert.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *nl = memchr(data, '\n', size);
	if (!nl)
		return 0;
	size_t pl = (size_t)(nl - (const char *)data);
	char *ptr = strndup((const char *)data, pl);
	if (!ptr || strlen(ptr) != pl) {
		free(ptr);
		return 0;
	}
	const char *doc = nl + 1;
	size_t dl = size - pl - 1;
	ab_err err = {0};
	json_t *root = NULL;
	if (ab_credfile_parse(doc, dl, &root, &err) < 0 || ab_json_pointer_check(ptr) < 0) {
		json_decref(root);
		free(ptr);
		return 0;
	}
	char *keep[] = {ptr};
	json_t *kept = NULL;
	if (ab_credfile_keep(root, keep, 1, &kept) == 0) {
		assert(json_is_object(kept));
		json_decref(kept);
	}
	char *v = NULL;
	size_t n = 0;
	int r = ab_credfile_get(root, ptr, &v, &n);
	assert(r == 0 || r == -ENOENT || r == -EINVAL || r == -ENOMEM);
	free(v);
	static const char ph[] = "sk-ant-oat01-PLACEHOLDERxxxxxxxxxxxxxxxxxxxx";
	if (r == 0 && ab_credfile_set(root, ptr, ph, sizeof(ph) - 1) == 0) {
		char *out = NULL;
		size_t ol = 0;
		if (ab_credfile_dump(root, &out, &ol) == 0) {
			json_t *again = NULL;
			if (ol <= AB_CREDFILE_MAX) {
				assert(ab_credfile_parse(out, ol, &again, &err) == 0);
				assert(ab_credfile_get(again, ptr, &v, &n) == 0);
				assert(n == sizeof(ph) - 1 && memcmp(v, ph, n) == 0);
				free(v);
				json_decref(again);
			}
			free(out);
		}
	}
	/* a stamp at the pointer (the document as a token response gives the
	 * expires_in): written or skipped, and the result still JSON */
	ab_credfile_stamps st = {.expires_in = ab_credfile_expires_in(root),
				 .now_us = 1700000000123456LL};
	assert(st.expires_in >= 0 && st.expires_in <= AB_CREDFILE_EXPIRES_MAX);
	assert(ab_credfile_stamps_add(&st, ptr, (size & 1) ? "now" : "expires_at_ms") == 0);
	int k = ab_credfile_apply_stamps(root, &st);
	assert(k == 0 || k == 1 || k == -ENOMEM);
	char *out = NULL;
	size_t ol = 0;
	if (k == 1 && ab_credfile_dump(root, &out, &ol) == 0) {
		json_t *again = NULL;
		if (ol <= AB_CREDFILE_MAX) {
			assert(ab_credfile_parse(out, ol, &again, &err) == 0);
			json_t *sv = ab_json_pointer_get(again, ptr);
			assert(sv && ((size & 1) ? json_is_string(sv) : json_is_integer(sv)));
			json_decref(again);
		}
		free(out);
	}
	json_decref(root);
	free(ptr);
	return 0;
}
