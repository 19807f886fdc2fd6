/* SPDX-License-Identifier: MIT */
/*
 * Review mode (parent, pure): the workspace is shown to the command as a
 * copy-on-write view (an overlay whose upper layer is the change set kept
 * under the user's state directory), so nothing the command writes reaches
 * the real workspace until `agentbox apply` (docs/review.md).
 *
 * Decided here: where the change set lives, that the workspace bind carries
 * AB_MNT_F_REVIEW (src/sandbox/mount.c stacks the overlay on it), and what
 * would bypass the view: a write grant inside the workspace is its own bind
 * of the real tree, so it is refused.
 */
#include "plan_int.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>

static const char *env_get(char *const *env, const char *name)
{
	size_t n = strlen(name);
	for (char *const *e = env; e && *e; e++)
		if (strncmp(*e, name, n) == 0 && (*e)[n] == '=')
			return *e + n + 1;
	return NULL;
}

char *ab_review_root(const char *home, char *const *env)
{
	const char *x = env_get(env, "XDG_STATE_HOME");
	if (x && x[0] == '/')
		return ab_asprintf("%s/agentbox/review", x);
	if (home && home[0] == '/')
		return ab_asprintf("%s/.local/state/agentbox/review", home);
	return NULL;
}

char *ab_review_dir_for(const char *root, const char *workspace)
{
	uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a: a name, not a secret */
	for (const char *c = workspace; *c; c++)
		h = (h ^ (unsigned char)*c) * 0x100000001b3ull;
	const char *base = strrchr(workspace, '/');
	base = base && base[1] ? base + 1 : "root";
	char safe[33];
	size_t i = 0;
	for (; base[i] && i < sizeof(safe) - 1; i++) {
		char c = base[i];
		bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			  (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.';
		safe[i] = ok ? c : '_';
	}
	safe[i] = '\0';
	if (safe[0] == '.')
		safe[0] = '_';
	return ab_asprintf("%s/%s-%016llx", root, safe, (unsigned long long)h);
}

int pl_plan_review(ab_plan *p, const ab_plan_input *in, ab_err *err)
{
	if (!in->review && in->profile->workspace.review != 1)
		return 0;
	if (!in->review_root) {
		ab_fail(err, 0, "review mode: no place for the change set");
		ab_err_hint(err, "set HOME or XDG_STATE_HOME to an absolute path");
		return -EINVAL;
	}
	p->review = true;
	p->review_dir = ab_review_dir_for(in->review_root, p->workspace);
	if (!p->review_dir)
		return ab_fail(err, ENOMEM, "plan");
	bool marked = false;
	for (size_t i = 0; i < p->nmounts; i++) {
		ab_mount *m = &p->mounts[i];
		if (m->kind != AB_MNT_BIND_RW)
			continue;
		if (strcmp(m->dst, p->workspace) == 0) {
			m->flags |= AB_MNT_F_REVIEW;
			marked = true;
		} else if (ab_path_is_under(m->dst, p->workspace)) {
			ab_fail(err, 0,
				"review mode: the write grant %s (%s) lies inside the workspace; "
				"it would write the real tree, not the view",
				m->dst, m->why);
			ab_err_hint(err, "drop that grant, or run without --review");
			return -EINVAL;
		}
	}
	if (!marked)
		return ab_fail(err, EINVAL, "review mode: the workspace has no bind to review");
	return 0;
}
