/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target (fuzzing only): run --ask's pure parts.  The keys
 * (src/parse/ask.c): the first byte picks the chunk size; the answer must
 * not depend on the chunking, USED stays in bounds, and a decisive byte is
 * always one of the documented keys.  The profile edit and its diff
 * (src/config/profile_edit.c) over the rest as a profile's text: either a
 * refusal with a message, or a text that lists the rule.
 */
#include "agentbox/ask.h"
#include "agentbox/profile_edit.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static enum ab_askkey_out run(const uint8_t *p, size_t n, size_t step, enum ab_ask_answer *a,
			      size_t *at)
{
	ab_askkey k = {0};
	enum ab_askkey_out o = AB_ASKKEY_MORE;
	size_t i = 0;
	*a = AB_ASK_NONE;
	while (i < n) {
		size_t len = n - i < step ? n - i : step, used = 0;
		o = ab_askkey_feed(&k, p + i, len, &used, a);
		if (used > len)
			abort();
		i += used;
		if (o != AB_ASKKEY_MORE) {
			*at = i;
			return o;
		}
	}
	*at = n;
	return o;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	size_t step = (size_t)data[0] % 16 + 1, n = size - 1;
	const uint8_t *p = data + 1;
	enum ab_ask_answer a1, a2;
	size_t at1, at2;
	enum ab_askkey_out o1 = run(p, n, n ? n : 1, &a1, &at1);
	enum ab_askkey_out o2 = run(p, n, step, &a2, &at2);
	if (o1 != o2 || a1 != a2 || at1 != at2)
		abort();
	if (o1 != AB_ASKKEY_MORE) {
		unsigned char ch = p[at1 - 1];
		if (!strchr("oOrRaAdDnNqQ\x03\x04", ch) || ch == 0)
			abort();
	}
	ab_err e = {0};
	char *out = NULL;
	int changed = 0;
	if (ab_profile_add_allow((const char *)p, n, NULL, "fuzz.example:443", &out, &changed, &e) <
	    0) {
		if (out || !e.msg[0])
			abort();
		return 0;
	}
	if (!strstr(out, "\"fuzz.example:443\""))
		abort();
	/* the offer at exit's edit: the same text, a filesystem.write list */
	char *w = NULL, *vals[] = {"/fuzz/out", "~/fuzz"};
	ab_strv v = {.v = vals, .n = 2};
	ab_err e2 = {0};
	if (ab_profile_add_list((const char *)p, n, NULL, "filesystem", "write", &v, &w, &changed,
				&e2) == 0 &&
	    (!strstr(w, "\"/fuzz/out\"") || !strstr(w, "\"~/fuzz\"")))
		abort();
	free(w);
	char *old = strndup((const char *)p, n);
	ab_strv d = {0};
	if (old && ab_text_diff(old, out, 2, &d) < 0)
		abort();
	ab_strv_free(&d);
	free(old);
	free(out);
	return 0;
}
