/* SPDX-License-Identifier: MIT */
/*
 * The profile edit behind `run --ask`'s "always" answer, and the line diff
 * shown before it is written (pure; include/agentbox/profile_edit.h).
 */
#include "agentbox/profile_edit.h"

#include <errno.h>
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agentbox/profile.h"

static json_t *new_profile(const char *extends)
{
	json_t *o = json_object();
	if (!o)
		return NULL;
	json_object_set_new(o, "version", json_integer(1));
	if (extends)
		json_object_set_new(o, "extends", json_string(extends));
	return o;
}

/* ROOT's SECTION.KEY list (made when absent), or NULL with ERR. */
static json_t *list_of(json_t *root, const char *section, const char *key, ab_err *err)
{
	json_t *sec = json_object_get(root, section);
	if (!sec) {
		sec = json_object();
		if (!sec || json_object_set_new(root, section, sec) < 0) {
			ab_fail(err, ENOMEM, "profile edit");
			return NULL;
		}
	}
	if (!json_is_object(sec)) {
		ab_fail(err, EINVAL, "\"%s\" is not an object", section);
		return NULL;
	}
	json_t *list = json_object_get(sec, key);
	if (!list) {
		list = json_array();
		if (!list || json_object_set_new(sec, key, list) < 0) {
			ab_fail(err, ENOMEM, "profile edit");
			return NULL;
		}
	}
	if (!json_is_array(list)) {
		ab_fail(err, EINVAL, "\"%s.%s\" is not a list", section, key);
		return NULL;
	}
	return list;
}

static bool listed(json_t *list, const char *value)
{
	for (size_t i = 0; i < json_array_size(list); i++) {
		const char *v = json_string_value(json_array_get(list, i));
		if (v && strcmp(v, value) == 0)
			return true;
	}
	return false;
}

int ab_profile_add_list(const char *old, size_t len, const char *extends, const char *section,
			const char *key, const ab_strv *values, char **out, int *changed,
			ab_err *err)
{
	*out = NULL;
	*changed = 0;
	if (len > AB_PROFILE_MAX_BYTES)
		return ab_fail(err, EFBIG, "the profile is larger than %d bytes",
			       AB_PROFILE_MAX_BYTES);
	json_t *root;
	if (!old || !len) {
		root = new_profile(extends);
	} else {
		json_error_t je;
		root = json_loadb(old, len, JSON_REJECT_DUPLICATES, &je);
		if (!root)
			return ab_fail(err, EINVAL, "%d:%d: %s", je.line, je.column, je.text);
	}
	if (!root)
		return ab_fail(err, ENOMEM, "profile edit");
	int r = 0;
	json_t *list = json_is_object(root) ? list_of(root, section, key, err) : NULL;
	if (!json_is_object(root))
		r = ab_fail(err, EINVAL, "the profile is not a JSON object");
	else if (!list)
		r = -EINVAL;
	for (size_t i = 0; r == 0 && i < values->n; i++) {
		if (listed(list, values->v[i]))
			continue;
		if (json_array_append_new(list, json_string(values->v[i])) < 0)
			r = ab_fail(err, ENOMEM, "profile edit");
		*changed = 1;
	}
	if (r == 0) {
		char *s = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
		char *t = s ? ab_asprintf("%s\n", s) : NULL;
		free(s);
		if (!t)
			r = ab_fail(err, ENOMEM, "profile edit");
		*out = t;
	}
	json_decref(root);
	return r;
}

int ab_profile_add_allow(const char *old, size_t len, const char *extends, const char *rule,
			 char **out, int *changed, ab_err *err)
{
	char *v[] = {(char *)rule};
	ab_strv one = {.v = v, .n = 1};
	return ab_profile_add_list(old, len, extends, "network", "allow", &one, out, changed, err);
}

/* ------------------------------------------------------------ the diff */

/* TEXT split into lines (copies; a last line without '\n' counts). */
static int split_lines(const char *text, ab_strv *out)
{
	for (const char *p = text; p && *p;) {
		const char *nl = strchr(p, '\n');
		size_t n = nl ? (size_t)(nl - p) : strlen(p);
		char *l = strndup(p, n);
		if (!l || ab_strv_push_take(out, l) < 0)
			return -ENOMEM;
		p += n + (nl ? 1 : 0);
	}
	return 0;
}

/* Each line marked ' ', '-' or '+', in order, into OPS/LINES. */
static int mark(const ab_strv *a, const ab_strv *b, ab_strv *lines)
{
	size_t n = a->n, m = b->n;
	uint32_t *t = NULL;
	if (n && m && (uint64_t)(n + 1) * (m + 1) <= AB_DIFF_MAX_CELLS)
		t = calloc((n + 1) * (m + 1), sizeof(*t));
	/* t[i][j]: the LCS length of a[i..] and b[j..] */
	for (size_t i = n; t && i-- > 0;)
		for (size_t j = m; j-- > 0;)
			t[i * (m + 1) + j] = strcmp(a->v[i], b->v[j]) == 0
						     ? t[(i + 1) * (m + 1) + j + 1] + 1
					     : t[(i + 1) * (m + 1) + j] > t[i * (m + 1) + j + 1]
						     ? t[(i + 1) * (m + 1) + j]
						     : t[i * (m + 1) + j + 1];
	size_t i = 0, j = 0;
	int r = 0;
	while (r == 0 && (i < n || j < m)) {
		char *l;
		if (t && i < n && j < m && strcmp(a->v[i], b->v[j]) == 0) {
			l = ab_asprintf(" %s", a->v[i]);
			i++, j++;
		} else if (i < n &&
			   (j >= m || !t || t[(i + 1) * (m + 1) + j] >= t[i * (m + 1) + j + 1])) {
			l = ab_asprintf("-%s", a->v[i++]);
		} else {
			l = ab_asprintf("+%s", b->v[j++]);
		}
		if (!l || ab_strv_push_take(lines, l) < 0)
			r = -ENOMEM;
	}
	free(t);
	return r;
}

int ab_text_diff(const char *old, const char *new_text, unsigned context, ab_strv *out)
{
	_cleanup_strv_ ab_strv a = {0}, b = {0}, all = {0};
	if (split_lines(old, &a) < 0 || split_lines(new_text, &b) < 0 || mark(&a, &b, &all) < 0)
		return -ENOMEM;
	bool gap = false;
	for (size_t i = 0; i < all.n; i++) {
		bool near = false;
		for (size_t k = i >= context ? i - context : 0; k < all.n && k <= i + context; k++)
			near |= all.v[k][0] != ' ';
		if (!near) {
			gap = true;
			continue;
		}
		if ((gap && ab_strv_push(out, "...") < 0) || ab_strv_push(out, all.v[i]) < 0)
			return -ENOMEM;
		gap = false;
	}
	if (gap && out->n && ab_strv_push(out, "...") < 0)
		return -ENOMEM;
	return 0;
}
