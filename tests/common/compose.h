/* SPDX-License-Identifier: MIT */
/*
 * The path a user's profiles take before anything runs: each one loaded
 * (a shipped profile by path, a user's extension from a buffer), merged in
 * the order given as `-p A -p B` merges them, the plan built from the
 * result and explained, as text and as JSON.  Shared by the composition
 * unit test and the plan fuzz target, so both drive what `run` and
 * `explain` drive.  Header-only: each includes it once.
 */
#ifndef AB_TESTS_COMPOSE_H
#define AB_TESTS_COMPOSE_H

#include <stdio.h>
#include <string.h>

#include "agentbox/plan.h"
#include "agentbox/profile.h"

typedef struct compose_part {
	const char *path; /* a profile file, or NULL: */
	const char *json; /* a profile's text ... */
	size_t len;       /* ... of this length (0: strlen) */
	const char *name; /* ... shown as this file name */
} compose_part;

static inline int compose_load(const compose_part *c, const ab_vars *v, ab_profile **out,
			       ab_err *err)
{
	if (c->path)
		return ab_profile_load(c->path, v, out, err);
	return ab_profile_load_buffer(c->json, c->len ? c->len : strlen(c->json), c->name, v, out,
				      err);
}

/* Loads and merges parts[order[0]], parts[order[1]], ... (n of them), then
 * plans with `tmpl` (its profile replaced) and explains to `sink`.  0, or
 * -1 with `err` set by whichever step refused. */
static inline int compose_plan(const compose_part *parts, const size_t *order, size_t n,
			       const ab_vars *v, const ab_plan_input *tmpl, FILE *sink, ab_err *err)
{
	ab_profile *merged = NULL;
	int r = 0;
	for (size_t i = 0; r == 0 && i < n; i++) {
		ab_profile *p = NULL;
		if ((r = compose_load(&parts[order[i]], v, &p, err)) < 0)
			break;
		if (!merged) {
			merged = p;
			continue;
		}
		r = ab_profile_merge(merged, p, err);
		ab_profile_free(p);
	}
	if (r == 0 && merged) {
		ab_plan_input in = *tmpl;
		in.profile = merged;
		ab_plan *plan = NULL;
		r = ab_plan_build(&in, &plan, err);
		if (r == 0)
			r = ab_plan_explain(plan, merged, false, sink, err);
		if (r == 0)
			r = ab_plan_explain(plan, merged, true, sink, err);
		ab_plan_free(plan);
	}
	ab_profile_free(merged);
	return r < 0 ? -1 : 0;
}

#endif
