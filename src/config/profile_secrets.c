/* SPDX-License-Identifier: MIT */
/*
 * The `secrets` key of a profile (parent, pure): each secret by name, where
 * its value is read from (env, file, command, a JSON file by pointer), the
 * hosts it may be sent to, its placeholder, its rendering and its rotation.
 * The key has a small schema of its own, so its checks live here beside the
 * copy and the release of a secret's fields (a new field is added in one
 * file).  Errors are located like every other key's (profile_int.h).
 */
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "agentbox/credfile.h"
#include "agentbox/netpolicy.h"
#include "profile_int.h"

/* Every field a secret owns, released; a new field is released here and
 * copied in pf_secret_copy below. */
void pf_secret_clear(struct ab_profile_secret *x)
{
	free(x->name);
	free(x->src_env);
	free(x->src_file);
	ab_strv_free(&x->src_cmd);
	ab_strv_free(&x->hosts);
	ab_strv_free(&x->places);
	free(x->ph_prefix);
	free(x->env_name);
	free(x->src_pointer);
	ab_strv_free(&x->optional_unless);
	ab_strv_free(&x->render_keep);
	free(x->hint);
	free(x->rot_host);
	free(x->rot_path);
	free(x->rot_field);
	ab_strv_free(&x->rot_stamp_ptr);
	ab_strv_free(&x->rot_stamp_kind);
	memset(x, 0, sizeof(*x));
}

static int secret_from(pf_ctx *c, json_t *v, struct ab_profile_secret *x)
{
	const char *k;
	json_t *e;
	char q[100];
	bool json = json_is_object(v) && json_object_get(v, "json");
	if (!json_is_object(v) || json_object_size(v) != (json ? 2 : 1) ||
	    (json && !json_object_get(v, "pointer")))
		return pf_fail(c,
			       "expected one of {\"env\": NAME}, {\"file\": PATH}, "
			       "{\"command\": [ARGV...]}, {\"json\": PATH, \"pointer\": \"/a/b\"}");
	json_object_foreach(v, k, e)
	{
		int r = 0;
		pf_push_key(c, k);
		if (strcmp(k, "json") == 0) {
			const char *s;
			x->src = AB_PSECRET_JSON;
			if ((r = pf_get_str(c, e, &s)) == 0)
				r = pf_item_path(c, s, &x->src_file);
		} else if (strcmp(k, "pointer") == 0 && json) {
			const char *s;
			if ((r = pf_get_str(c, e, &s)) == 0 &&
			    (!s[0] || ab_json_pointer_check(s) < 0))
				r = pf_fail(
					c,
					"invalid JSON pointer \"%s\" (\"/key/key\", ~0 for ~ and "
					"~1 for /, at most %d bytes and %d keys)",
					pf_quote(q, sizeof(q), s), AB_JSON_POINTER_MAX,
					AB_JSON_POINTER_DEPTH);
			if (r == 0 && !(x->src_pointer = strdup(s)))
				r = pf_oom(c);
		} else if (strcmp(k, "env") == 0) {
			const char *s;
			x->src = AB_PSECRET_ENV;
			if ((r = pf_get_str(c, e, &s)) == 0 && !pf_env_name_ok(s, strlen(s)))
				r = pf_fail(c, "invalid variable name \"%s\"",
					    pf_quote(q, sizeof(q), s));
			if (r == 0 && !(x->src_env = strdup(s)))
				r = pf_oom(c);
		} else if (strcmp(k, "file") == 0) {
			const char *s;
			x->src = AB_PSECRET_FILE;
			if ((r = pf_get_str(c, e, &s)) == 0)
				r = pf_item_path(c, s, &x->src_file);
		} else if (strcmp(k, "command") == 0) {
			x->src = AB_PSECRET_COMMAND;
			if (!json_is_array(e) || json_array_size(e) == 0)
				r = pf_fail(c, "expected a non-empty array (argv)");
			else
				r = pf_parse_strings(c, e, pf_item_copy, 0, &x->src_cmd);
		} else {
			r = pf_fail_key(c,
					"unknown secret source \"%s\" (env, file, command or "
					"json)",
					pf_quote(q, sizeof(q), k));
		}
		pf_pop(c);
		if (r < 0)
			return r;
	}
	return 0;
}

static int item_place(pf_ctx *c, const char *s, char **out)
{
	char q[100];
	bool ok = strcmp(s, "query") == 0 || strcmp(s, "body") == 0;
	if (!ok && strncmp(s, "header:", 7) == 0 && s[7]) {
		ok = strlen(s + 7) <= 64;
		for (const char *p = s + 7; ok && *p; p++)
			ok = pf_is_alnum(*p) || strchr("!#$%&'*+-.^_`|~", *p);
	}
	if (!ok)
		return pf_fail(c, "invalid place \"%s\" (\"header:NAME\", \"query\" or \"body\")",
			       pf_quote(q, sizeof(q), s));
	*out = strdup(s);
	return 0;
}

static int secret_placeholder(pf_ctx *c, json_t *v, struct ab_profile_secret *x)
{
	const char *k;
	json_t *e;
	char q[100];
	if (!json_is_object(v))
		return pf_fail(c, "expected an object {\"prefix\": ..., \"length\": ...}, got %s",
			       pf_jtype(v));
	json_object_foreach(v, k, e)
	{
		int r = 0;
		pf_push_key(c, k);
		if (strcmp(k, "prefix") == 0) {
			const char *s;
			if ((r = pf_get_str(c, e, &s)) == 0) {
				size_t n = strspn(
					s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
					   "0123456789_-");
				if (s[n] || n > 32)
					r = pf_fail(
						c,
						"invalid prefix \"%s\" (up to 32 of A-Z a-z 0-9 _ -)",
						pf_quote(q, sizeof(q), s));
				else if (!(x->ph_prefix = strdup(s)))
					r = pf_oom(c);
			}
		} else if (strcmp(k, "length") == 0) {
			if (!json_is_integer(e) || json_integer_value(e) < 22 ||
			    json_integer_value(e) > 4096)
				r = pf_fail(c, "expected a length from 22 to 4096");
			else
				x->ph_len = (long)json_integer_value(e);
		} else if (strcmp(k, "jwt") == 0 || strcmp(k, "stable") == 0) {
			if (json_is_boolean(e))
				*(k[0] == 'j' ? &x->ph_jwt : &x->ph_stable) = json_is_true(e);
			else
				r = pf_fail(c, "expected true or false, got %s", pf_jtype(e));
		} else {
			r = pf_fail_key(c, "unknown key \"%s\" (prefix, length, jwt, stable)",
					pf_quote(q, sizeof(q), k));
		}
		pf_pop(c);
		if (r < 0)
			return r;
	}
	if (x->ph_jwt && (x->ph_prefix || x->ph_len))
		return pf_fail(c, "a JWT placeholder keeps the shape of the value: no \"prefix\" "
				  "or \"length\" with \"jwt\"");
	if (x->ph_jwt && x->ph_stable)
		return pf_fail(c, "a JWT placeholder is drawn anew each run: no \"stable\" with "
				  "\"jwt\"");
	return 0;
}

/* "stamp": {"/json/pointer": "now" | "expires_at_ms", ...} (credfile.h) */
static int rotate_stamp(pf_ctx *c, json_t *v, struct ab_profile_secret *x)
{
	const char *k;
	json_t *e;
	char q[100];
	if (!json_is_object(v) || !json_object_size(v) ||
	    json_object_size(v) > AB_CREDFILE_STAMPS_PER_SECRET)
		return pf_fail(c, "expected {\"/pointer\": \"now\" or \"expires_at_ms\"} (1 to %d)",
			       AB_CREDFILE_STAMPS_PER_SECRET);
	json_object_foreach(v, k, e)
	{
		int r = 0;
		const char *s = NULL;
		pf_push_key(c, k);
		if (!k[0] || ab_json_pointer_check(k) < 0)
			r = pf_fail_key(c, "invalid JSON pointer \"%s\"",
					pf_quote(q, sizeof(q), k));
		else if ((r = pf_get_str(c, e, &s)) == 0 && !ab_credfile_stamp_kind_ok(s))
			r = pf_fail(c, "unknown stamp \"%s\" (now, expires_at_ms)",
				    pf_quote(q, sizeof(q), s));
		if (r == 0 && (ab_strv_push(&x->rot_stamp_ptr, k) < 0 ||
			       ab_strv_push(&x->rot_stamp_kind, s) < 0))
			r = pf_oom(c);
		pf_pop(c);
		if (r < 0)
			return r;
	}
	return 0;
}

/* "rotate": {"url": "https://HOST[:PORT]/PATH", "field": "/json/pointer",
 *            "stamp": {...}} */
static int secret_rotate(pf_ctx *c, json_t *v, struct ab_profile_secret *x)
{
	const char *k;
	json_t *e;
	char q[100];
	if (!json_is_object(v) || !json_object_get(v, "url") || !json_object_get(v, "field"))
		return pf_fail(
			c, "expected {\"url\": \"https://HOST/PATH\", \"field\": \"/pointer\"}");
	json_object_foreach(v, k, e)
	{
		int r = 0;
		const char *s = NULL;
		pf_push_key(c, k);
		if (strcmp(k, "url") == 0) {
			if ((r = pf_get_str(c, e, &s)) == 0) {
				const char *h = strncmp(s, "https://", 8) == 0 ? s + 8 : NULL;
				const char *slash = h ? strchr(h, '/') : NULL;
				ab_netrule rule;
				ab_err ne = {0};
				char host[AB_HOST_INPUT_MAX + 8];
				size_t hl = slash ? (size_t)(slash - h) : 0;
				bool ok = slash && hl && hl < sizeof(host) &&
					  !strpbrk(slash, "?# ") && strlen(slash) <= 1024;
				if (ok) {
					memcpy(host, h, hl);
					host[hl] = '\0';
					ok = ab_netrule_parse(host, &rule, &ne) == 0 &&
					     !rule.wildcard;
				}
				if (!ok)
					r = pf_fail(
						c,
						"invalid token endpoint \"%s\" (https://HOST[:PORT]/PATH, "
						"no wildcard, no query)",
						pf_quote(q, sizeof(q), s));
				else if (!(x->rot_host = strdup(rule.text)) ||
					 !(x->rot_path = strdup(slash)))
					r = pf_oom(c);
			}
		} else if (strcmp(k, "field") == 0) {
			if ((r = pf_get_str(c, e, &s)) == 0 &&
			    (!s[0] || ab_json_pointer_check(s) < 0))
				r = pf_fail(c, "invalid JSON pointer \"%s\"",
					    pf_quote(q, sizeof(q), s));
			if (r == 0 && !(x->rot_field = strdup(s)))
				r = pf_oom(c);
		} else if (strcmp(k, "stamp") == 0) {
			r = rotate_stamp(c, e, x);
		} else {
			r = pf_fail_key(c, "unknown key \"%s\" (url, field, stamp)",
					pf_quote(q, sizeof(q), k));
		}
		pf_pop(c);
		if (r < 0)
			return r;
	}
	return 0;
}

/* "render": true, or {"keep": ["/pointer", ...]} (only those parts are shown). */
static int secret_render(pf_ctx *c, json_t *e, struct ab_profile_secret *x)
{
	char q[100];
	if (json_is_boolean(e)) {
		x->render = json_is_true(e);
		return 0;
	}
	json_t *keep = json_is_object(e) ? json_object_get(e, "keep") : NULL;
	if (!keep || json_object_size(e) != 1 || !json_is_array(keep) || !json_array_size(keep) ||
	    json_array_size(keep) > 32)
		return pf_fail(c, "expected true, false or {\"keep\": [\"/pointer\", ...]} "
				  "(1 to 32)");
	size_t i;
	json_t *it;
	json_array_foreach(keep, i, it)
	{
		const char *s = json_string_value(it);
		if (!s || !s[0] || ab_json_pointer_check(s) < 0)
			return pf_fail(c, "invalid JSON pointer \"%s\" in keep",
				       pf_quote(q, sizeof(q), s ? s : "?"));
		if (ab_strv_push(&x->render_keep, s) < 0)
			return pf_oom(c);
	}
	x->render = true;
	return 0;
}

/* "optional": true, or the names of secrets of which one must be loaded. */
static int secret_optional(pf_ctx *c, json_t *e, struct ab_profile_secret *x)
{
	if (json_is_boolean(e)) {
		x->optional = json_is_true(e);
		return 0;
	}
	if (!json_is_array(e) || !json_array_size(e))
		return pf_fail(c, "expected true, false or a non-empty array of secret names");
	size_t i;
	json_t *it;
	json_array_foreach(e, i, it)
	{
		const char *s = json_string_value(it);
		if (!s || !pf_env_name_ok(s, strlen(s)) || strlen(s) > 64)
			return pf_fail(c, "expected secret names");
		if (ab_strv_push(&x->optional_unless, s) < 0)
			return pf_oom(c);
	}
	x->optional = true;
	return 0;
}

/* "env": the variable the placeholder is set in, or false for none. */
static int secret_env(pf_ctx *c, json_t *e, struct ab_profile_secret *x)
{
	if (json_is_false(e))
		return (x->env_name = strdup("")) ? 0 : pf_oom(c);
	if (json_is_string(e) && pf_env_name_ok(json_string_value(e), strlen(json_string_value(e))))
		return (x->env_name = strdup(json_string_value(e))) ? 0 : pf_oom(c);
	return pf_fail(c, "expected a variable name or false");
}

static int secret_hint(pf_ctx *c, json_t *e, struct ab_profile_secret *x)
{
	const char *s;
	int r;
	if ((r = pf_get_str(c, e, &s)) == 0 && strlen(s) > 300)
		r = pf_fail(c, "a hint of at most 300 bytes");
	if (r == 0 && !(x->hint = strdup(s)))
		r = pf_oom(c);
	return r;
}

/* One key of a secret's object (the current path ends at it). */
static int secret_key(pf_ctx *c, const char *k, json_t *e, struct ab_profile_secret *x)
{
	char q[100];
	if (strcmp(k, "from") == 0)
		return secret_from(c, e, x);
	if (strcmp(k, "hosts") == 0)
		return pf_parse_strings(c, e, pf_item_netrule, PF_UNIQUE, &x->hosts);
	if (strcmp(k, "in") == 0)
		return pf_parse_strings(c, e, item_place, PF_UNIQUE, &x->places);
	if (strcmp(k, "placeholder") == 0)
		return secret_placeholder(c, e, x);
	if (strcmp(k, "env") == 0)
		return secret_env(c, e, x);
	if (strcmp(k, "mask_in_body") == 0) {
		if (!json_is_boolean(e))
			return pf_fail(c, "expected true or false, got %s", pf_jtype(e));
		x->mask_in_body = json_is_true(e);
		return 0;
	}
	if (strcmp(k, "elsewhere") == 0)
		return pf_get_elsewhere(c, e, &x->elsewhere);
	if (strcmp(k, "optional") == 0)
		return secret_optional(c, e, x);
	if (strcmp(k, "hint") == 0)
		return secret_hint(c, e, x);
	if (strcmp(k, "render") == 0)
		return secret_render(c, e, x);
	if (strcmp(k, "rotate") == 0)
		return secret_rotate(c, e, x);
	return pf_fail_key(c,
			   "unknown key \"%s\" (from, hosts, in, placeholder, env, "
			   "mask_in_body, elsewhere, optional, hint, render, rotate)",
			   pf_quote(q, sizeof(q), k));
}

static int secret_one(pf_ctx *c, const char *name, json_t *v, struct ab_profile_secret *x)
{
	const char *k;
	json_t *e;
	char q[100];
	if (!pf_env_name_ok(name, strlen(name)) || strlen(name) > 64)
		return pf_fail_key(
			c,
			"invalid secret name \"%s\" (letters, digits and _, not starting "
			"with a digit, at most 64)",
			pf_quote(q, sizeof(q), name));
	if (!json_is_object(v))
		return pf_fail(c, "expected an object, got %s", pf_jtype(v));
	if (!(x->name = strdup(name)))
		return pf_oom(c);
	bool have_from = false;
	json_object_foreach(v, k, e)
	{
		pf_push_key(c, k);
		int r = secret_key(c, k, e, x);
		pf_pop(c);
		if (r < 0)
			return r;
		have_from |= strcmp(k, "from") == 0;
	}
	if (!have_from)
		return pf_fail(c, "secret %s: missing \"from\" (where agentbox reads the value)",
			       name);
	/* only "hosts" fills x->hosts */
	if (x->hosts.n == 0)
		return pf_fail(c, "secret %s: missing \"hosts\" (where the value may be sent)",
			       name);
	if (x->render && x->src != AB_PSECRET_JSON)
		return pf_fail(c, "secret %s: \"render\" needs a {\"json\": ...} source", name);
	if (x->rot_host && x->src != AB_PSECRET_JSON)
		return pf_fail(c,
			       "secret %s: \"rotate\" needs a {\"json\": ...} source (the file "
			       "the new value is written back to)",
			       name);
	return 0;
}

int pf_parse_secrets(pf_ctx *c, json_t *v)
{
	const char *k;
	json_t *val;
	if (!json_is_object(v))
		return pf_fail(c, "expected an object of secrets by name, got %s", pf_jtype(v));
	if (json_object_size(v) > 64)
		return pf_fail(c, "too many secrets (at most 64)");
	json_object_foreach(v, k, val)
	{
		struct ab_profile_secret x = {0};
		pf_push_key(c, k);
		int r = secret_one(c, k, val, &x);
		pf_pop(c);
		if (r < 0) {
			pf_secret_clear(&x);
			return r;
		}
		struct ab_profile_secret *n =
			realloc(c->p->secrets, (c->p->nsecrets + 1) * sizeof(*n));
		if (!n) {
			pf_secret_clear(&x);
			return pf_oom(c);
		}
		c->p->secrets = n;
		n[c->p->nsecrets++] = x;
	}
	return 0;
}

/* A deep copy, for merging (a later profile's secret replaces the one of the
 * same name). */
int pf_secret_copy(struct ab_profile_secret *d, const struct ab_profile_secret *s)
{
	memset(d, 0, sizeof(*d));
	d->src = s->src;
	d->ph_len = s->ph_len;
	d->ph_jwt = s->ph_jwt;
	d->ph_stable = s->ph_stable;
	d->mask_in_body = s->mask_in_body;
	d->elsewhere = s->elsewhere;
	d->optional = s->optional;
	d->render = s->render;
	if (pf_replace_str(&d->src_pointer, s->src_pointer) < 0 ||
	    pf_replace_str(&d->hint, s->hint) < 0 ||
	    pf_replace_str(&d->rot_host, s->rot_host) < 0 ||
	    pf_replace_str(&d->rot_path, s->rot_path) < 0 ||
	    pf_replace_str(&d->rot_field, s->rot_field) < 0 ||
	    ab_strv_copy(&d->rot_stamp_ptr, &s->rot_stamp_ptr) < 0 ||
	    ab_strv_copy(&d->rot_stamp_kind, &s->rot_stamp_kind) < 0 ||
	    ab_strv_copy(&d->optional_unless, &s->optional_unless) < 0 ||
	    ab_strv_copy(&d->render_keep, &s->render_keep) < 0) {
		pf_secret_clear(d);
		return -ENOMEM;
	}
	if (!(d->name = strdup(s->name)) || pf_replace_str(&d->src_env, s->src_env) < 0 ||
	    pf_replace_str(&d->src_file, s->src_file) < 0 ||
	    pf_replace_str(&d->ph_prefix, s->ph_prefix) < 0 ||
	    pf_replace_str(&d->env_name, s->env_name) < 0 ||
	    ab_strv_copy(&d->src_cmd, &s->src_cmd) < 0 || ab_strv_copy(&d->hosts, &s->hosts) < 0 ||
	    ab_strv_copy(&d->places, &s->places) < 0) {
		pf_secret_clear(d);
		return -ENOMEM;
	}
	return 0;
}
