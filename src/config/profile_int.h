/* SPDX-License-Identifier: MIT */
/*
 * Internals shared by the profile loader's files (parent), each using only
 * the ones listed below it:
 *   profile.c         finding and reading files, `extends`, merging, freeing
 *   profile_keys.c    the schema: the key tables and one handler per key
 *   profile_secrets.c the `secrets` key, which has a small schema of its own,
 *                     and the copy and release of a secret's fields
 *   profile_values.c  the validation context every message is located
 *                     through, and the readers of the kinds of value several
 *                     keys share (string, path, list, network rule)
 *   profile_vars.c    ${VAR} expansion and sizes (the small languages inside
 *                     profile strings), and "did you mean" suggestions
 * The public API is agentbox/profile.h.
 */
#ifndef AGENTBOX_PROFILE_INT_H
#define AGENTBOX_PROFILE_INT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "agentbox/profile.h"

#define PF_MAX_JPATH 4 /* deepest path in the format: filesystem.read[i], env.set.NAME */
#define PF_NAME_RULE "an optional +, a letter or digit, then up to 63 of A-Z a-z 0-9 . _ + -"

/* One profile file being validated: its text (for the positions in
 * messages), the JSON path of the value at hand, and its own values. */
typedef struct pf_ctx {
	const char *fname; /* as shown in messages */
	const char *buf;
	size_t len;
	const ab_vars *vars;
	ab_profile *p;   /* this file's own values */
	ab_strv extends; /* raw entries, in order */
	bool extends_array;
	ab_json_step path[PF_MAX_JPATH];
	size_t depth;
	ab_err *err;
} pf_ctx;

static inline bool pf_is_alnum(char ch)
{
	return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9');
}

/* A string for a message, inside "..." (see ab_json_sanitize). */
static inline const char *pf_quote(char *out, size_t outsz, const char *s)
{
	return ab_json_sanitize(out, outsz, s, true);
}

/* A path for a message (paths come from profiles too). */
#define PF_SHOW(buf, s) ab_json_sanitize(buf, sizeof(buf), s, false)

/* An environment variable's name (the first n bytes of s). */
static inline bool pf_env_name_ok(const char *s, size_t n)
{
	if (n == 0 || (s[0] >= '0' && s[0] <= '9'))
		return false;
	for (size_t i = 0; i < n; i++)
		if (!pf_is_alnum(s[i]) && s[i] != '_')
			return false;
	return true;
}

/* ---- profile_vars.c */
/* The closest candidate within edit distance 2 (first wins ties), or NULL. */
const char *pf_suggest(const char *word, const char *const *cands);
/* $XDG_*_HOME if absolute, else HOME/fallback (the XDG spec), else NULL. */
const char *pf_xdg_dir(const char *val, const char *home, const char *fallback, char *tmp,
		       size_t tmpsz);

/* ---- profile_values.c: the path of the value at hand, errors located by it */
void pf_push_key(pf_ctx *c, const char *key);
void pf_push_index(pf_ctx *c, size_t i);
void pf_pop(pf_ctx *c);
/* "filesystem.read[2]", "env.set.EDITOR", `env.set["A B"]`: the first depth steps */
void pf_path_str(const pf_ctx *c, size_t depth, char *out, size_t outsz);
/* "FILE:LINE:COL: json.path: what" about the value at the current path */
int pf_fail(pf_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* ... about the key that ends the current path (the message names the parent) */
int pf_fail_key(pf_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int pf_oom(pf_ctx *c);
const char *pf_jtype(const json_t *j);
/* c's text as JSON; bad bytes and syntax errors located and worded (json_pos.c) */
int pf_parse_json(pf_ctx *c, json_t **out);
int pf_check_count(pf_ctx *c, size_t n, int max);
/* *dst = a copy of src; nothing when src is NULL. */
int pf_replace_str(char **dst, const char *src);

/* ---- profile_values.c: values several keys share */
/* A non-empty string. */
int pf_get_str(pf_ctx *c, const json_t *v, const char **s);
/* s with its variables expanded (ab_profile_expand), the error located at the value */
int pf_expand_or_fail(pf_ctx *c, const char *s, bool tilde, char **out);
/* "forward" or "refuse" (secrets.NAME.elsewhere, network.placeholder_elsewhere) */
int pf_get_elsewhere(pf_ctx *c, json_t *v, int *out);
/* A list entry: checked, transformed into *out (NULL *out: out of memory). */
typedef int (*pf_item_fn)(pf_ctx *c, const char *s, char **out);
int pf_item_copy(pf_ctx *c, const char *s, char **out);
int pf_item_path(pf_ctx *c, const char *s, char **out);
int pf_item_netrule(pf_ctx *c, const char *s, char **out);
int pf_item_netrule_private(pf_ctx *c, const char *s, char **out);
#define PF_UNIQUE 1 /* lists: drop duplicates */
#define PF_SHORT 4  /* lists: at most AB_PROFILE_MAX_SYSCALLS entries */
/* An array of strings, each through item(), into dst (flags: PF_UNIQUE, PF_SHORT). */
int pf_parse_strings(pf_ctx *c, json_t *v, pf_item_fn item, int flags, ab_strv *dst);

/* ---- profile_secrets.c */
int pf_parse_secrets(pf_ctx *c, json_t *v);
void pf_secret_clear(struct ab_profile_secret *x);
int pf_secret_copy(struct ab_profile_secret *d, const struct ab_profile_secret *s);

/* ---- profile_keys.c */
/* The top-level object of one file, into c->p and c->extends. */
int pf_validate(pf_ctx *c, json_t *root);
bool pf_name_ok(const char *s);
bool pf_is_pathlike(const char *s);
/* the values both parsing and merging set */
int pf_kv_put(ab_kv **arr, size_t *n, const char *key, const char *val);
int pf_kv_set(ab_profile *p, const char *key, const char *val);
int pf_add_port(ab_profile *p, long port);

#endif
