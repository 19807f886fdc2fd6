/* SPDX-License-Identifier: MIT */
/*
 * The small languages inside profile strings (parent, pure): ${VAR} and "~"
 * expansion, sizes such as "8G", and the "did you mean" suggestion every
 * unknown-name message offers.  No positions here: the callers place the
 * message (profile_keys.c at the value, profile.c at an `extends` entry).
 */
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "profile_int.h"

#define MAX_EXPANDED 65536 /* a string after variable expansion */

static const ab_vars no_vars;

/* ------------------------------------------------------------------------ */
/* Suggestions                                                              */
/* ------------------------------------------------------------------------ */

/* Optimal string alignment distance (transpositions count 1); SIZE_MAX for
 * strings longer than 64 bytes. */
static size_t edit_distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	unsigned char d[65][65];
	if (la > 64 || lb > 64)
		return SIZE_MAX;
	for (size_t i = 0; i <= la; i++)
		d[i][0] = (unsigned char)i;
	for (size_t j = 0; j <= lb; j++)
		d[0][j] = (unsigned char)j;
	for (size_t i = 1; i <= la; i++) {
		for (size_t j = 1; j <= lb; j++) {
			unsigned v = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
			if (d[i - 1][j] + 1u < v)
				v = d[i - 1][j] + 1u;
			if (d[i][j - 1] + 1u < v)
				v = d[i][j - 1] + 1u;
			if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
			    d[i - 2][j - 2] + 1u < v)
				v = d[i - 2][j - 2] + 1u;
			d[i][j] = (unsigned char)v;
		}
	}
	return d[la][lb];
}

const char *pf_suggest(const char *word, const char *const *cands)
{
	const char *best = NULL;
	size_t bestd = 3;
	for (size_t i = 0; cands[i]; i++) {
		size_t dd = edit_distance(word, cands[i]);
		if (dd < bestd) {
			bestd = dd;
			best = cands[i];
		}
	}
	return best;
}

/* ------------------------------------------------------------------------ */
/* Variables and sizes                                                      */
/* ------------------------------------------------------------------------ */

static const char *const var_names[] = {
	"HOME",          "WORKSPACE",      "USER",           "XDG_CONFIG_HOME",
	"XDG_DATA_HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME", NULL,
};

const char *pf_xdg_dir(const char *val, const char *home, const char *fallback, char *tmp,
		       size_t tmpsz)
{
	if (val && val[0] == '/')
		return val;
	if (!home || home[0] != '/')
		return NULL;
	int n = snprintf(tmp, tmpsz, "%s/%s", home, fallback);
	return n > 0 && (size_t)n < tmpsz ? tmp : NULL;
}

static int var_lookup(const ab_vars *v, const char *name, size_t n, char *tmp, size_t tmpsz,
		      const char **val, ab_err *err)
{
	char nm[72], q[100];
	size_t i;
	memcpy(nm, name, n < 64 ? n : 64);
	nm[n < 64 ? n : 64] = '\0';
	for (i = 0; var_names[i]; i++)
		if (n == strlen(var_names[i]) && memcmp(name, var_names[i], n) == 0)
			break;
	switch (i) {
	case 0: *val = v->home; break;
	case 1: *val = v->workspace; break;
	case 2: *val = v->user; break;
	case 3: *val = pf_xdg_dir(v->xdg_config_home, v->home, ".config", tmp, tmpsz); break;
	case 4: *val = pf_xdg_dir(v->xdg_data_home, v->home, ".local/share", tmp, tmpsz); break;
	case 5: *val = pf_xdg_dir(v->xdg_cache_home, v->home, ".cache", tmp, tmpsz); break;
	case 6: *val = pf_xdg_dir(v->xdg_state_home, v->home, ".local/state", tmp, tmpsz); break;
	default: {
		const char *s = n <= 64 ? pf_suggest(nm, var_names) : NULL,
			   *more = n > 64 ? "..." : "";
		pf_quote(q, sizeof(q), nm);
		if (s)
			return ab_fail(err, 0, "unknown variable ${%s%s} (did you mean ${%s}?)", q,
				       more, s);
		return ab_fail(err, 0,
			       "unknown variable ${%s%s} (known: ${HOME}, ${WORKSPACE}, ${USER}, "
			       "${XDG_CONFIG_HOME}, ${XDG_DATA_HOME}, ${XDG_CACHE_HOME}, "
			       "${XDG_STATE_HOME})",
			       q, more);
	}
	}
	if (!*val)
		return ab_fail(err, 0, "${%s} is not set", var_names[i]);
	return 0;
}

struct sbuf {
	char *s;
	size_t n, cap;
};

static int sb_add(struct sbuf *b, const char *s, size_t n)
{
	if (n > MAX_EXPANDED - b->n)
		return -E2BIG;
	if (!b->s || b->n + n + 1 > b->cap) {
		size_t cap = (b->n + n + 1) * 2;
		if (cap > MAX_EXPANDED + 1)
			cap = MAX_EXPANDED + 1;
		char *t = realloc(b->s, cap);
		if (!t)
			return -ENOMEM;
		b->s = t;
		b->cap = cap;
	}
	memcpy(b->s + b->n, s, n);
	b->n += n;
	b->s[b->n] = '\0';
	return 0;
}

int ab_profile_expand(const char *in, const ab_vars *vars, bool tilde, char **out, ab_err *err)
{
	struct sbuf b = {0};
	char tmp[PATH_MAX];
	const char *p = in;
	int r = sb_add(&b, "", 0);
	if (!vars)
		vars = &no_vars;
	if (r >= 0 && tilde && p[0] == '~' && (p[1] == '\0' || p[1] == '/')) {
		if (!vars->home)
			r = ab_fail(err, 0, "cannot expand \"~\": the home directory is unknown");
		else
			r = sb_add(&b, vars->home, strlen(vars->home));
		p++;
	}
	while (r >= 0 && *p) {
		const char *d = strstr(p, "${"), *e, *val = NULL;
		if (!d) {
			r = sb_add(&b, p, strlen(p));
			break;
		}
		r = sb_add(&b, p, (size_t)(d - p));
		if (r < 0)
			break;
		e = strchr(d + 2, '}');
		if (!e) {
			r = ab_fail(err, 0, "unterminated \"${\" (write ${NAME})");
			break;
		}
		r = var_lookup(vars, d + 2, (size_t)(e - d - 2), tmp, sizeof(tmp), &val, err);
		if (r >= 0)
			r = sb_add(&b, val, strlen(val));
		p = e + 1;
	}
	if (r == -E2BIG)
		r = ab_fail(err, 0, "too long after expansion (more than %d bytes)", MAX_EXPANDED);
	else if (r == -ENOMEM)
		r = ab_fail(err, ENOMEM, "expanding variables");
	if (r < 0) {
		free(b.s);
		return r;
	}
	*out = b.s;
	return 0;
}

int ab_profile_parse_size(const char *s, long long *out)
{
	unsigned long long v = 0;
	bool range = false;
	int shift = 0;
	size_t i = 0;
	if (!s)
		return -EINVAL;
	if (strcmp(s, "unlimited") == 0) {
		*out = LLONG_MAX;
		return 0;
	}
	if (s[0] < '0' || s[0] > '9')
		return -EINVAL;
	for (; s[i] >= '0' && s[i] <= '9'; i++) {
		unsigned d = (unsigned)(s[i] - '0');
		if (v > ((unsigned long long)LLONG_MAX - d) / 10)
			range = true;
		else
			v = v * 10 + d;
	}
	switch (s[i]) {
	case 'K':
	case 'k':
		shift = 10;
		i++;
		break;
	case 'M':
	case 'm':
		shift = 20;
		i++;
		break;
	case 'G':
	case 'g':
		shift = 30;
		i++;
		break;
	case 'T':
	case 't':
		shift = 40;
		i++;
		break;
	default: break;
	}
	if (s[i])
		return -EINVAL;
	if (range || v > ((unsigned long long)LLONG_MAX >> shift))
		return -ERANGE;
	*out = (long long)(v << shift);
	return 0;
}
