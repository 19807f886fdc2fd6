/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target (fuzzing only): the merge of a guarded file
 * (src/sandbox/guard.c) on documents the sandbox and the host choose.
 * Input: three JSON texts separated by NUL bytes, the document at the
 * start, the run's copy and the host's file now (one that does not parse is
 * NULL, as an empty file is).  Properties beyond "no crash, no UB, no leak":
 *   - after the merge and the host's guarded values put back, every guarded
 *     value equals the host's (none of the run's survives);
 *   - putting them back a second time changes nothing;
 *   - a copy the run left as it started merges to the host's document.
 */
#include "../../src/sandbox/guard.h"
#include "agentbox/credfile.h"

#include <assert.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static json_t *parse(const uint8_t **p, const uint8_t *end)
{
	const uint8_t *nul = memchr(*p, '\0', (size_t)(end - *p));
	const uint8_t *stop = nul ? nul : end;
	json_t *doc = NULL;
	ab_err err = {0};
	if (stop > *p)
		(void)ab_credfile_parse_file((const char *)*p, (size_t)(stop - *p), &doc, &err);
	*p = nul ? nul + 1 : end;
	return doc;
}

static json_t *guarded(json_t *doc, const ab_strv *ptrs)
{
	json_t *vals = json_object();
	assert(vals);
	for (size_t i = 0; doc && i < ptrs->n; i++)
		assert(ab_guard_collect(doc, ptrs->v[i], vals) == 0);
	return vals;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char *names[] = {"/a", "/p/*/m", "/p/*/t", "/*/x", "/m~1n"};
	ab_strv ptrs = {.v = names, .n = 5};
	const uint8_t *p = data, *end = data + size;
	json_t *base = parse(&p, end), *ours = parse(&p, end), *theirs = parse(&p, end);
	json_t *host = theirs ? json_deep_copy(theirs) : NULL;
	json_t *hostvals = guarded(host, &ptrs);
	assert(ab_guard_merge(&theirs, base, ours) == 0);
	if (ours && base && json_equal(ours, base))
		assert(theirs == host || (theirs && host && json_equal(theirs, host)));
	ab_strv put = {0}, again = {0};
	if (theirs) {
		assert(ab_guard_restore(theirs, &ptrs, hostvals, &put) >= 0);
		json_t *now = guarded(theirs, &ptrs);
		const char *k;
		json_t *v;
		json_object_foreach(now, k, v)
		{
			json_t *h = json_object_get(hostvals, k);
			assert(h && json_equal(h, v));
		}
		json_decref(now);
		assert(ab_guard_restore(theirs, &ptrs, hostvals, &again) == 0);
	}
	ab_strv_free(&put);
	ab_strv_free(&again);
	json_decref(hostvals);
	json_decref(host);
	json_decref(base);
	json_decref(ours);
	json_decref(theirs);
	return 0;
}
