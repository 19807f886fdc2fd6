/* SPDX-License-Identifier: MIT */
/*
 * Editing a profile for `run --ask`'s "always" answer (pure: text in, text
 * out; the caller reads and writes the file).  The result is shown to the
 * user as a line diff before it is written (docs/ask.md).
 */
#ifndef AGENTBOX_PROFILE_EDIT_H
#define AGENTBOX_PROFILE_EDIT_H

#include <stddef.h>

#include "agentbox/common.h"

#define AB_DIFF_MAX_CELLS (4u * 1024 * 1024) /* lines(old) x lines(new) compared */

/* OLD (LEN bytes; NULL or empty: a new file, "version": 1, extending
 * EXTENDS when not NULL) with RULE appended to network.allow, unless it is
 * listed there already (*CHANGED false then).  Every other key is kept, in
 * its order; the text is re-indented (2 spaces).  *OUT is malloc'd.  0, or a
 * negative errno with ERR: OLD is not a JSON object, network or
 * network.allow has the wrong type, longer than AB_PROFILE_MAX_BYTES... */
int ab_profile_add_allow(const char *old, size_t len, const char *extends, const char *rule,
			 char **out, int *changed, ab_err *err);

/* The same for any list: each of VALUES appended to SECTION.KEY (e.g.
 * "filesystem", "write": run --ask's offer at exit) unless it is listed
 * there already; *CHANGED when one was added. */
int ab_profile_add_list(const char *old, size_t len, const char *extends, const char *section,
			const char *key, const ab_strv *values, char **out, int *changed,
			ab_err *err);

/* The lines that differ between OLD and NEW (either may be NULL: empty), as
 * "-line" and "+line", with up to CONTEXT unchanged lines " line" around each
 * change and "..." where unchanged lines are left out.  A longest common
 * subsequence of lines; beyond AB_DIFF_MAX_CELLS, every old line removed and
 * every new line added.  0 or -ENOMEM. */
int ab_text_diff(const char *old, const char *new_text, unsigned context, ab_strv *out);

#endif
