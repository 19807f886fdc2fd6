/* SPDX-License-Identifier: MIT */
/*
 * Reading a profile's values (parent, pure): the validation context of one
 * file, through which every message is located ("FILE:LINE:COL: json.path:
 * what"), and the readers of the kinds of value several keys share: strings,
 * paths, lists of strings, network rules, "forward" or "refuse".
 *
 * jansson records no positions for parsed values: the positions in messages
 * (and the byte checks and syntax-error wording before and after jansson)
 * come from the pure locator in json_pos.c, which also sees hostile input.
 */
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agentbox/netpolicy.h"
#include "profile_int.h"

/* ------------------------------------------------------------------------ */
/* Validation context and errors                                            */
/* ------------------------------------------------------------------------ */

void pf_push_key(pf_ctx *c, const char *key)
{
	if (c->depth < PF_MAX_JPATH)
		c->path[c->depth] = (ab_json_step){.key = key};
	c->depth++;
}

void pf_push_index(pf_ctx *c, size_t i)
{
	if (c->depth < PF_MAX_JPATH)
		c->path[c->depth] = (ab_json_step){.key = NULL, .index = i};
	c->depth++;
}

void pf_pop(pf_ctx *c)
{
	c->depth--;
}

static bool simple_key(const char *k)
{
	size_t n = 0;
	for (; k[n]; n++)
		if (!pf_is_alnum(k[n]) && k[n] != '_' && k[n] != '-' && k[n] != '$')
			return false;
	return n > 0 && n <= 64;
}

/* "filesystem.read[2]", "env.set.EDITOR", `env.set["A B"]`. */
void pf_path_str(const pf_ctx *c, size_t depth, char *out, size_t outsz)
{
	size_t o = 0;
	out[0] = '\0';
	for (size_t i = 0; i < depth && i < PF_MAX_JPATH; i++) {
		const ab_json_step *s = &c->path[i];
		char q[100];
		int n;
		if (!s->key)
			n = snprintf(out + o, outsz - o, "[%zu]", s->index);
		else if (simple_key(s->key))
			n = snprintf(out + o, outsz - o, "%s%s", i ? "." : "", s->key);
		else
			n = snprintf(out + o, outsz - o, "[\"%s\"]",
				     pf_quote(q, sizeof(q), s->key));
		if (n < 0 || (size_t)n >= outsz - o) {
			out[o] = '\0';
			break;
		}
		o += (size_t)n;
	}
}

static int vfail(pf_ctx *c, bool at_key, const char *fmt, va_list ap)
	__attribute__((format(printf, 3, 0)));
static int vfail(pf_ctx *c, bool at_key, const char *fmt, va_list ap)
{
	char msg[1024], path[256];
	size_t line, col, d = c->depth < PF_MAX_JPATH ? c->depth : PF_MAX_JPATH;
	(void)ab_json_locate(c->buf, c->len, c->path, d, at_key, &line, &col);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	pf_path_str(c, at_key && d > 0 ? d - 1 : d, path, sizeof(path));
	return ab_fail(c->err, 0, "%s:%zu:%zu: %s%s%s", c->fname, line, col, path,
		       path[0] ? ": " : "", msg);
}

/* An error about the value at the current path. */
int pf_fail(pf_ctx *c, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int r = vfail(c, false, fmt, ap);
	va_end(ap);
	return r;
}

/* An error about the key that ends the current path (message names the parent). */
int pf_fail_key(pf_ctx *c, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int r = vfail(c, true, fmt, ap);
	va_end(ap);
	return r;
}

/* An error at a byte offset (bytes and syntax). */
static int fail_off(pf_ctx *c, size_t off, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int fail_off(pf_ctx *c, size_t off, const char *fmt, ...)
{
	char msg[1024];
	size_t line, col;
	va_list ap;
	ab_json_linecol(c->buf, c->len, off, &line, &col);
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return ab_fail(c->err, 0, "%s:%zu:%zu: %s", c->fname, line, col, msg);
}

int pf_oom(pf_ctx *c)
{
	return ab_fail(c->err, ENOMEM, "%s: loading profile", c->fname);
}

const char *pf_jtype(const json_t *j)
{
	switch (json_typeof(j)) {
	case JSON_OBJECT: return "an object";
	case JSON_ARRAY: return "an array";
	case JSON_STRING: return "a string";
	case JSON_INTEGER: return "an integer";
	case JSON_REAL: return "a real number";
	case JSON_TRUE:
	case JSON_FALSE: return "a boolean";
	default: return "null";
	}
}

/* A non-empty string. */
int pf_get_str(pf_ctx *c, const json_t *v, const char **s)
{
	if (!json_is_string(v))
		return pf_fail(c, "expected a string, got %s", pf_jtype(v));
	*s = json_string_value(v);
	if (!**s)
		return pf_fail(c, "must not be an empty string");
	return 0;
}

/* Parse with jansson; json_pos.c places and words bad bytes and syntax errors. */
int pf_parse_json(pf_ctx *c, json_t **out)
{
	json_error_t je;
	ab_json_diag d;
	if (ab_json_check_bytes(c->buf, c->len, &d))
		return fail_off(c, d.off, "%s", d.msg);
	*out = json_loadb(c->buf, c->len, JSON_REJECT_DUPLICATES, &je);
	if (!*out) {
		ab_json_syntax_error(c->buf, c->len, &je, &d);
		return fail_off(c, d.off, "%s", d.msg);
	}
	return 0;
}

/* ------------------------------------------------------------------------ */
/* Values several keys share                                                */
/* ------------------------------------------------------------------------ */

int pf_replace_str(char **dst, const char *src)
{
	char *n;
	if (!src)
		return 0;
	n = strdup(src);
	if (!n)
		return -ENOMEM;
	free(*dst);
	*dst = n;
	return 0;
}

int pf_item_copy(pf_ctx *c, const char *s, char **out)
{
	*out = strdup(s);
	return 0;
}

int pf_expand_or_fail(pf_ctx *c, const char *s, bool tilde, char **out)
{
	ab_err e = {0};
	int r = ab_profile_expand(s, c->vars, tilde, out, &e);
	if (r == -ENOMEM)
		return pf_oom(c);
	if (r < 0)
		return pf_fail(c, "%s", e.msg);
	return 0;
}

int pf_item_path(pf_ctx *c, const char *s, char **out)
{
	_cleanup_free_ char *x = NULL;
	char q[100];
	int r = pf_expand_or_fail(c, s, true, &x);
	if (r < 0)
		return r;
	if (x[0] != '/')
		return pf_fail(c,
			       "\"%s\" is not an absolute path (start it with /, ~/ or a variable "
			       "such as ${WORKSPACE})",
			       pf_quote(q, sizeof(q), s));
	*out = ab_path_normalize(x);
	if (*out && strlen(*out) >= PATH_MAX) {
		free(*out);
		*out = NULL;
		return pf_fail(c, "path too long (at most %d bytes)", PATH_MAX - 1);
	}
	return 0;
}

int pf_check_count(pf_ctx *c, size_t n, int max)
{
	if (n > (size_t)max)
		return pf_fail(c, "too many entries (%zu, at most %d)", n, max);
	return 0;
}

int pf_parse_strings(pf_ctx *c, json_t *v, pf_item_fn item, int flags, ab_strv *dst)
{
	json_t *e;
	size_t i;
	if (!json_is_array(v))
		return pf_fail(c, "expected an array, got %s", pf_jtype(v));
	int max = (flags & PF_SHORT) ? AB_PROFILE_MAX_SYSCALLS : AB_PROFILE_MAX_LIST;
	if (pf_check_count(c, json_array_size(v), max) < 0)
		return -EINVAL;
	json_array_foreach(v, i, e)
	{
		const char *s = NULL;
		char *out = NULL;
		int r;
		pf_push_index(c, i);
		r = pf_get_str(c, e, &s);
		if (r >= 0)
			r = item(c, s, &out);
		pf_pop(c);
		if (r < 0)
			return r;
		if (!out)
			return pf_oom(c);
		if ((flags & PF_UNIQUE) && ab_strv_contains(dst, out)) {
			free(out);
			continue;
		}
		if (ab_strv_push_take(dst, out) < 0)
			return pf_oom(c);
	}
	return 0;
}

static int item_netrule_in(pf_ctx *c, const char *s, char **out, bool priv)
{
	ab_netrule r;
	ab_err e = {0};
	char q[100];
	if (ab_netrule_parse(s, &r, &e) < 0)
		return pf_fail(c, "invalid %s", e.msg);
	if (priv && r.wildcard)
		return pf_fail(c,
			       "invalid network rule \"%s\": network.private names exact "
			       "destinations, no wildcards",
			       pf_quote(q, sizeof(q), s));
	*out = strdup(r.text);
	return 0;
}

int pf_item_netrule(pf_ctx *c, const char *s, char **out)
{
	return item_netrule_in(c, s, out, false);
}

int pf_item_netrule_private(pf_ctx *c, const char *s, char **out)
{
	return item_netrule_in(c, s, out, true);
}

/* "forward" or "refuse" (secrets.NAME.elsewhere, network.placeholder_elsewhere) */
int pf_get_elsewhere(pf_ctx *c, json_t *v, int *out)
{
	const char *s = json_string_value(v);
	char q[100];
	if (!json_is_string(v))
		return pf_fail(c, "expected \"forward\" or \"refuse\", got %s", pf_jtype(v));
	if (strcmp(s, "forward") == 0)
		*out = AB_ELSEWHERE_FORWARD;
	else if (strcmp(s, "refuse") == 0)
		*out = AB_ELSEWHERE_REFUSE;
	else
		return pf_fail(c, "expected \"forward\" or \"refuse\", got \"%s\"",
			       pf_quote(q, sizeof(q), s));
	return 0;
}
