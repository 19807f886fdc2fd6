/* SPDX-License-Identifier: MIT */
/*
 * test-escape results, the model (harness process; the runner inside uses
 * ab_esc_result_add too): verdict and category names, one probe's result
 * (attempts, found canary hashes, report), the strict parser of the
 * runner's JSON lines, verdict settling, the counts and the exit status.
 * Pure: no I/O.  The output formats are in report.c.
 *
 * The parser treats every line as hostile: size-limited, strict types,
 * unknown probe ids and verdicts rejected, at most AB_ESC_MAX_ATTEMPTS
 * attempts kept (the worst ones win a place), and the probe's verdict is
 * always recomputed from its attempts (ab_esc_result_settle), so a line
 * cannot claim "ok" while listing an escaped attempt.
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agentbox/escape.h"
#include "agentbox/json_pos.h"
#include "result.h"

#define RESULT_LINE_MAX (1024 * 1024)
#define HEX_HASH_LEN AB_CANARY_HASH_HEX

/* ================================================================ names */

static const char *const verdict_names[] = {
	[AB_ESC_OK] = "ok",
	[AB_ESC_ESCAPED] = "escaped",
	[AB_ESC_ERROR] = "error",
	[AB_ESC_SKIP] = "skip",
};

const char *ab_esc_verdict_name(enum ab_esc_verdict v)
{
	if ((unsigned)v >= AB_ARRAY_SIZE(verdict_names))
		return "?";
	return verdict_names[v];
}

int ab_esc_verdict_parse(const char *s, enum ab_esc_verdict *out)
{
	for (size_t i = 0; s && i < AB_ARRAY_SIZE(verdict_names); i++)
		if (strcmp(s, verdict_names[i]) == 0) {
			if (out)
				*out = (enum ab_esc_verdict)i;
			return 0;
		}
	return -EINVAL;
}

// clang-format off
static const char *const cat_names[AB_CAT__N] = {
	[AB_CAT_CTL] = "CTL", [AB_CAT_FS] = "FS",   [AB_CAT_SEC] = "SEC",
	[AB_CAT_CRD] = "CRD", [AB_CAT_NET] = "NET", [AB_CAT_PRC] = "PRC",
	[AB_CAT_KRN] = "KRN", [AB_CAT_PER] = "PER", [AB_CAT_TTY] = "TTY",
};
// clang-format on

const char *ab_esc_cat_name(enum ab_esc_cat c)
{
	if ((unsigned)c >= AB_CAT__N)
		return "?";
	return cat_names[c];
}

/* ============================================================== results */

static void attempt_free(ab_esc_attempt *a)
{
	free(a->what);
	free(a->result);
	free(a->layer);
	free(a->source);
	*a = (ab_esc_attempt){0};
}

void ab_esc_result_free(ab_esc_result *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->nattempts; i++)
		attempt_free(&r->attempts[i]);
	free(r->attempts);
	ab_strv_free(&r->found);
	if (r->report)
		json_decref(r->report);
	free(r->note);
	*r = (ab_esc_result){0};
}

void ab_esc_results_free(ab_esc_results *rs)
{
	if (!rs)
		return;
	for (size_t i = 0; i < rs->n; i++)
		ab_esc_result_free(&rs->v[i]);
	free(rs->v);
	free(rs->lab_error);
	free(rs->profile);
	*rs = (ab_esc_results){0};
}

bool escr_is_control(const ab_esc_result *r)
{
	return r->def && r->def->control;
}

/* How much an attempt matters when only AB_ESC_MAX_ATTEMPTS can be kept:
 * escapes, then errors, then (for a control) anything that is not OK. */
static int keep_rank(enum ab_esc_verdict v, bool control)
{
	switch (v) {
	case AB_ESC_ESCAPED: return 3;
	case AB_ESC_ERROR: return 2;
	case AB_ESC_SKIP: return control ? 1 : 0;
	case AB_ESC_OK:
	default: return control ? 0 : 1;
	}
}

/* Append *a (taken, also on failure).  At the cap, the new attempt replaces
 * the last kept one of the lowest rank if it ranks higher, so an escape is
 * never pushed out by harmless attempts; either way one is counted in
 * r->dropped. */
static int push_attempt(ab_esc_result *r, ab_esc_attempt *a)
{
	bool control = escr_is_control(r);

	if (r->nattempts < AB_ESC_MAX_ATTEMPTS) {
		ab_esc_attempt *v = realloc(r->attempts, (r->nattempts + 1) * sizeof(*v));
		if (!v) {
			attempt_free(a);
			return -ENOMEM;
		}
		r->attempts = v;
		r->attempts[r->nattempts++] = *a;
		*a = (ab_esc_attempt){0};
		return 0;
	}
	if (r->dropped < SIZE_MAX)
		r->dropped++;
	int want = keep_rank(a->verdict, control), low = want;
	size_t at = SIZE_MAX;
	for (size_t i = r->nattempts; i-- > 0 && low > 0;) {
		int k = keep_rank(r->attempts[i].verdict, control);
		if (k < low) {
			low = k;
			at = i;
		}
	}
	if (at == SIZE_MAX) {
		attempt_free(a);
		return 0;
	}
	attempt_free(&r->attempts[at]);
	memmove(&r->attempts[at], &r->attempts[at + 1],
		(r->nattempts - at - 1) * sizeof(r->attempts[0]));
	r->attempts[r->nattempts - 1] = *a;
	*a = (ab_esc_attempt){0};
	return 0;
}

static int dup_opt(const char *s, char **out)
{
	*out = NULL;
	if (!s)
		return 0;
	*out = strdup(s);
	return *out ? 0 : -ENOMEM;
}

int ab_esc_result_add(ab_esc_result *r, const char *what, enum ab_esc_verdict v, const char *result,
		      const char *layer, const char *source)
{
	ab_esc_attempt a = {.verdict = v};

	if (!r || !what || (unsigned)v > AB_ESC_SKIP)
		return -EINVAL;
	if (dup_opt(what, &a.what) < 0 || dup_opt(result, &a.result) < 0 ||
	    dup_opt(layer, &a.layer) < 0 || dup_opt(source, &a.source) < 0) {
		attempt_free(&a);
		return -ENOMEM;
	}
	int ret = push_attempt(r, &a);
	ab_esc_result_settle(r);
	return ret;
}

static void default_note(ab_esc_result *r, const char *why)
{
	if (!r->note)
		r->note = strdup(why); /* best effort: the verdict is what counts */
}

/* A control proves that something works: only all-OK attempts pass. */
static void settle_control(ab_esc_result *r)
{
	if (r->nattempts == 0) {
		if (r->verdict == AB_ESC_SKIP && r->note)
			return;
		r->verdict = AB_ESC_ERROR;
		default_note(r, "no attempts recorded");
		return;
	}
	for (size_t i = 0; i < r->nattempts; i++)
		if (r->attempts[i].verdict != AB_ESC_OK) {
			r->verdict = AB_ESC_ERROR;
			return;
		}
	if (!(r->verdict == AB_ESC_ERROR && r->note))
		r->verdict = AB_ESC_OK;
}

/* Rules (idempotent; the order matters):
 *   any attempt ESCAPED, or the verdict already ESCAPED -> ESCAPED (sticky:
 *     an escape is never argued away);
 *   any attempt ERROR -> ERROR;
 *   no attempts -> ERROR, unless the verdict is SKIP with a note (gate stop);
 *   verdict ERROR with a note (timeout, crash after some attempts) -> ERROR;
 *   all attempts SKIP -> SKIP; else OK.
 * A control: any non-OK attempt -> ERROR, no attempts -> ERROR unless SKIP
 * with a note. */
void ab_esc_result_settle(ab_esc_result *r)
{
	bool esc = false, err = false, all_skip = true;

	if (!r)
		return;
	if ((unsigned)r->verdict > AB_ESC_SKIP)
		r->verdict = AB_ESC_ERROR;
	if (escr_is_control(r)) {
		settle_control(r);
		return;
	}
	for (size_t i = 0; i < r->nattempts; i++) {
		enum ab_esc_verdict v = r->attempts[i].verdict;
		esc |= v == AB_ESC_ESCAPED;
		err |= v == AB_ESC_ERROR;
		all_skip &= v == AB_ESC_SKIP;
	}
	if (esc || r->verdict == AB_ESC_ESCAPED)
		r->verdict = AB_ESC_ESCAPED;
	else if (err)
		r->verdict = AB_ESC_ERROR;
	else if (r->nattempts == 0) {
		if (!(r->verdict == AB_ESC_SKIP && r->note)) {
			r->verdict = AB_ESC_ERROR;
			default_note(r, "no attempts recorded");
		}
	} else if (r->verdict == AB_ESC_ERROR && r->note)
		r->verdict = AB_ESC_ERROR;
	else
		r->verdict = all_skip ? AB_ESC_SKIP : AB_ESC_OK;
}

/* ================================================================ parse */

/* A short printable copy of hostile text for an error message. */
static const char *printable(const char *s, char buf[48])
{
	size_t i = 0;
	for (; s && s[i] && i < 40; i++)
		buf[i] = (s[i] >= 0x20 && s[i] < 0x7f) ? s[i] : '?';
	buf[i] = '\0';
	if (s && s[i])
		strcpy(buf + i, "...");
	return buf;
}

static int get_str(json_t *o, const char *key, bool required, char **out, const char *ctx,
		   ab_err *err)
{
	json_t *v = json_object_get(o, key);

	*out = NULL;
	if (!v || json_is_null(v)) {
		if (required)
			return ab_fail(err, 0, "%s: \"%s\" missing", ctx, key);
		return 0;
	}
	if (!json_is_string(v))
		return ab_fail(err, 0, "%s: \"%s\" must be a string", ctx, key);
	*out = strdup(json_string_value(v));
	return *out ? 0 : ab_fail(err, ENOMEM, "%s", ctx);
}

static int get_verdict(json_t *o, enum ab_esc_verdict *out, const char *ctx, ab_err *err)
{
	json_t *v = json_object_get(o, "verdict");
	char pb[48];

	if (!json_is_string(v))
		return ab_fail(err, 0, "%s: \"verdict\" missing or not a string", ctx);
	if (ab_esc_verdict_parse(json_string_value(v), out) < 0)
		return ab_fail(err, 0, "%s: unknown verdict \"%s\"", ctx,
			       printable(json_string_value(v), pb));
	return 0;
}

static int parse_attempt(json_t *j, size_t idx, ab_esc_attempt *a, ab_err *err)
{
	char ctx[48];
	int r;

	*a = (ab_esc_attempt){0};
	snprintf(ctx, sizeof(ctx), "attempt %zu", idx + 1);
	if (!json_is_object(j))
		return ab_fail(err, 0, "%s: not an object", ctx);
	if ((r = get_str(j, "what", true, &a->what, ctx, err)) < 0 ||
	    (r = get_verdict(j, &a->verdict, ctx, err)) < 0 ||
	    (r = get_str(j, "result", false, &a->result, ctx, err)) < 0 ||
	    (r = get_str(j, "layer", false, &a->layer, ctx, err)) < 0 ||
	    (r = get_str(j, "source", false, &a->source, ctx, err)) < 0) {
		attempt_free(a);
		return r;
	}
	return 0;
}

static int parse_attempts(json_t *arr, ab_esc_result *r, ab_err *err)
{
	size_t i;
	json_t *j;

	if (!arr || json_is_null(arr))
		return 0;
	if (!json_is_array(arr))
		return ab_fail(err, 0, "\"attempts\" must be an array");
	json_array_foreach(arr, i, j)
	{
		ab_esc_attempt a;
		int ret = parse_attempt(j, i, &a, err);
		if (ret < 0)
			return ret;
		if (push_attempt(r, &a) < 0)
			return ab_fail(err, ENOMEM, "attempts");
	}
	return 0;
}

static bool is_hash(const char *s)
{
	size_t i = 0;
	for (; s[i]; i++)
		if (i >= HEX_HASH_LEN ||
		    !((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return i == HEX_HASH_LEN;
}

/* Every entry must have the hash shape; duplicates collapse; entries beyond
 * AB_ESC_MAX_FOUND are ignored (each found token is an ESCAPED attempt too,
 * so the verdict does not depend on this list). */
static int parse_found(json_t *arr, ab_esc_result *r, ab_err *err)
{
	size_t i;
	json_t *j;

	if (!arr || json_is_null(arr))
		return 0;
	if (!json_is_array(arr))
		return ab_fail(err, 0, "\"found\" must be an array");
	json_array_foreach(arr, i, j)
	{
		if (!json_is_string(j) || !is_hash(json_string_value(j)))
			return ab_fail(err, 0, "found %zu: not a %d-hex-digit hash", i + 1,
				       HEX_HASH_LEN);
		if (r->found.n >= AB_ESC_MAX_FOUND)
			continue;
		if (ab_strv_push_unique(&r->found, json_string_value(j)) < 0)
			return ab_fail(err, ENOMEM, "found");
	}
	return 0;
}

static int parse_numbers(json_t *o, ab_esc_result *r, ab_err *err)
{
	json_t *ms = json_object_get(o, "ms"), *dr = json_object_get(o, "dropped");

	if (ms && !json_is_null(ms)) {
		if (!json_is_number(ms) || !(json_number_value(ms) >= 0) ||
		    !isfinite(json_number_value(ms)))
			return ab_fail(err, 0, "\"ms\" must be a number >= 0");
		r->ms = json_number_value(ms);
	}
	if (dr && !json_is_null(dr)) {
		if (!json_is_integer(dr) || json_integer_value(dr) < 0)
			return ab_fail(err, 0, "\"dropped\" must be an integer >= 0");
		json_int_t d = json_integer_value(dr);
		r->dropped =
			(uint64_t)d > SIZE_MAX - r->dropped ? SIZE_MAX : r->dropped + (size_t)d;
	}
	return 0;
}

static const ab_probe_def *find_def(const ab_probe_def *probes, size_t n, const char *id)
{
	for (size_t i = 0; i < n; i++)
		if (strcasecmp(probes[i].id, id) == 0)
			return &probes[i];
	return NULL;
}

static int parse_object(json_t *o, const ab_probe_def *probes, size_t nprobes, ab_esc_result *r,
			ab_err *err)
{
	json_t *id = json_object_get(o, "id"), *rep = json_object_get(o, "report");
	char pb[48];
	int ret;

	if (!json_is_string(id))
		return ab_fail(err, 0, "\"id\" missing or not a string");
	r->def = find_def(probes, nprobes, json_string_value(id));
	if (!r->def)
		return ab_fail(err, 0, "unknown probe id \"%s\"",
			       printable(json_string_value(id), pb));
	if ((ret = get_verdict(o, &r->verdict, r->def->id, err)) < 0 ||
	    (ret = get_str(o, "note", false, &r->note, r->def->id, err)) < 0 ||
	    (ret = parse_numbers(o, r, err)) < 0 ||
	    (ret = parse_attempts(json_object_get(o, "attempts"), r, err)) < 0 ||
	    (ret = parse_found(json_object_get(o, "found"), r, err)) < 0)
		return ret;
	if (rep && !json_is_null(rep)) {
		if (!json_is_object(rep))
			return ab_fail(err, 0, "\"report\" must be an object");
		r->report = json_incref(rep);
	}
	return 0;
}

int ab_esc_result_parse(const char *line, const ab_probe_def *probes, size_t nprobes,
			ab_esc_result *out, ab_err *err)
{
	ab_esc_result r = {0};
	_cleanup_json_ json_t *j = NULL;
	json_error_t je;
	char pb[48];
	int ret;

	*out = (ab_esc_result){0};
	if (!line)
		return ab_fail(err, EINVAL, "result line");
	size_t len = strnlen(line, RESULT_LINE_MAX + 1);
	if (len > RESULT_LINE_MAX)
		return ab_fail(err, E2BIG, "result line longer than %d bytes", RESULT_LINE_MAX);
	j = json_loadb(line, len, JSON_REJECT_DUPLICATES, &je);
	if (!j)
		return ab_fail(err, 0, "result line: invalid JSON at column %d: %s", je.column,
			       printable(je.text, pb));
	if (!json_is_object(j))
		return ab_fail(err, 0, "result line: not a JSON object");
	ret = parse_object(j, probes, nprobes, &r, err);
	if (ret < 0) {
		ab_err_prefix(err, "result line");
		ab_esc_result_free(&r);
		return ret;
	}
	ab_esc_result_settle(&r);
	*out = r;
	return 0;
}

/* =============================================================== counts */

enum ab_esc_verdict escr_verdict(const ab_esc_result *r)
{
	if ((unsigned)r->verdict > AB_ESC_SKIP)
		return AB_ESC_ERROR;
	if (escr_is_control(r) && r->verdict == AB_ESC_ESCAPED)
		return AB_ESC_ERROR;
	return r->verdict;
}

enum ab_esc_cat escr_cat(const ab_esc_result *r)
{
	return r->def && (unsigned)r->def->cat < AB_CAT__N ? r->def->cat : AB_CAT__N;
}

void escr_count(const ab_esc_results *rs, unsigned cat, escr_counts *c)
{
	*c = (escr_counts){0};
	for (size_t i = 0; i < rs->n; i++) {
		const ab_esc_result *r = &rs->v[i];
		if (cat <= AB_CAT__N && escr_cat(r) != cat)
			continue;
		c->total++;
		c->by[escr_verdict(r)]++;
		if (r->ms >= 0 && isfinite(r->ms))
			c->ms += r->ms;
	}
}

int ab_esc_exit_status(const ab_esc_results *rs)
{
	bool errors = false;

	if (!rs)
		return AB_ESC_EXIT_LAB;
	for (size_t i = 0; i < rs->n; i++) {
		enum ab_esc_verdict v = escr_verdict(&rs->v[i]);
		if (v == AB_ESC_ESCAPED)
			return AB_ESC_EXIT_ESCAPE;
		errors |= v == AB_ESC_ERROR;
	}
	if (rs->not_in_effect)
		return AB_ESC_EXIT_NOT_IN_EFFECT;
	if (rs->lab_error)
		return AB_ESC_EXIT_LAB;
	return errors ? AB_ESC_EXIT_ERRORS : AB_ESC_EXIT_OK;
}
