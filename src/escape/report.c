/* SPDX-License-Identifier: MIT */
/*
 * test-escape results (harness process; the runner inside uses the result
 * helpers too): verdict names, one probe's result (attempts, found canary
 * hashes, report), the strict parser of the runner's JSON lines, verdict
 * settling, the exit status, and the three output formats (TAP 14, JUnit
 * XML, JSON lines) plus the per-category terminal summary.  Pure: no
 * syscalls beyond stdio on the FILE the caller gives.
 *
 * The parser treats every line as hostile: size-limited, strict types,
 * unknown probe ids and verdicts rejected, at most AB_ESC_MAX_ATTEMPTS
 * attempts kept (the worst ones win a place), and the probe's verdict is
 * always recomputed from its attempts (ab_esc_result_settle), so a line
 * cannot claim "ok" while listing an escaped attempt.
 *
 * Every string that reaches an output is re-encoded for it: invalid UTF-8
 * becomes U+FFFD, control characters are escaped or replaced, '#' and '\'
 * are escaped in TAP descriptions, XML gets entities and loses the
 * characters XML 1.0 cannot carry.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agentbox/escape.h"

#define RESULT_LINE_MAX (1024 * 1024)
#define HEX_HASH_LEN AB_CANARY_HASH_HEX
#define MSG_WHATS 3 /* attempts named in a JUnit message attribute */

static inline void fclosep(FILE **f)
{
	if (*f)
		fclose(*f);
}
#define _cleanup_json_ _cleanup_(json_decrefp) /* jansson >= 2.9 */

/* ================================================================ names */

static const char *const verdict_names[] = {
	[AB_ESC_OK] = "ok", [AB_ESC_ESCAPED] = "escaped",
	[AB_ESC_ERROR] = "error", [AB_ESC_SKIP] = "skip",
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

static const char *const cat_names[AB_CAT__N] = {
	[AB_CAT_CTL] = "CTL", [AB_CAT_FS] = "FS",   [AB_CAT_SEC] = "SEC",
	[AB_CAT_CRD] = "CRD", [AB_CAT_NET] = "NET", [AB_CAT_PRC] = "PRC",
	[AB_CAT_KRN] = "KRN", [AB_CAT_PER] = "PER", [AB_CAT_TTY] = "TTY",
};

const char *ab_esc_cat_name(enum ab_esc_cat c)
{
	if ((unsigned)c >= AB_CAT__N)
		return "?";
	return cat_names[c];
}

int ab_esc_format_parse(const char *s, enum ab_esc_format *out)
{
	static const struct { const char *name; enum ab_esc_format f; } fmts[] = {
		{ "tap", AB_ESC_TAP }, { "junit", AB_ESC_JUNIT }, { "json", AB_ESC_JSON },
	};
	for (size_t i = 0; s && i < AB_ARRAY_SIZE(fmts); i++)
		if (strcmp(s, fmts[i].name) == 0) {
			if (out)
				*out = fmts[i].f;
			return 0;
		}
	return -EINVAL;
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

static bool is_control(const ab_esc_result *r)
{
	return r->def && r->def->control;
}

/* How much an attempt matters when only AB_ESC_MAX_ATTEMPTS can be kept:
 * escapes, then errors, then (for a control) anything that is not OK. */
static int keep_rank(enum ab_esc_verdict v, bool control)
{
	switch (v) {
	case AB_ESC_ESCAPED:
		return 3;
	case AB_ESC_ERROR:
		return 2;
	case AB_ESC_SKIP:
		return control ? 1 : 0;
	case AB_ESC_OK:
	default:
		return control ? 0 : 1;
	}
}

/* Append *a (taken, also on failure).  At the cap, the new attempt replaces
 * the last kept one of the lowest rank if it ranks higher, so an escape is
 * never pushed out by harmless attempts; either way one is counted in
 * r->dropped. */
static int push_attempt(ab_esc_result *r, ab_esc_attempt *a)
{
	bool control = is_control(r);

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

int ab_esc_result_add(ab_esc_result *r, const char *what, enum ab_esc_verdict v,
		      const char *result, const char *layer, const char *source)
{
	ab_esc_attempt a = { .verdict = v };

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
	if (is_control(r)) {
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
	json_array_foreach(arr, i, j) {
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
	json_array_foreach(arr, i, j) {
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
		r->dropped = (uint64_t)d > SIZE_MAX - r->dropped ? SIZE_MAX
								 : r->dropped + (size_t)d;
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

/* =============================================================== encode */

/* One code point of the NUL-terminated s; *len: bytes used (>= 1).  Invalid,
 * overlong and surrogate sequences give U+FFFD and use one byte.  Never
 * reads past the terminator (NUL is no continuation byte). */
static uint32_t utf8_next(const unsigned char *s, size_t *len)
{
	unsigned char c = s[0];
	uint32_t cp;
	size_t n;

	*len = 1;
	if (c < 0x80)
		return c;
	if (c >= 0xc2 && c <= 0xdf)
		n = 2, cp = c & 0x1f;
	else if (c >= 0xe0 && c <= 0xef)
		n = 3, cp = c & 0x0f;
	else if (c >= 0xf0 && c <= 0xf4)
		n = 4, cp = c & 0x07;
	else
		return 0xfffd;
	for (size_t i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0xfffd;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
	    (cp >= 0xd800 && cp <= 0xdfff))
		return 0xfffd;
	*len = n;
	return cp;
}

static void put_cp(FILE *f, uint32_t cp)
{
	if (cp < 0x80) {
		putc((int)cp, f);
	} else if (cp < 0x800) {
		putc((int)(0xc0 | cp >> 6), f);
		putc((int)(0x80 | (cp & 0x3f)), f);
	} else if (cp < 0x10000) {
		putc((int)(0xe0 | cp >> 12), f);
		putc((int)(0x80 | (cp >> 6 & 0x3f)), f);
		putc((int)(0x80 | (cp & 0x3f)), f);
	} else {
		putc((int)(0xf0 | cp >> 18), f);
		putc((int)(0x80 | (cp >> 12 & 0x3f)), f);
		putc((int)(0x80 | (cp >> 6 & 0x3f)), f);
		putc((int)(0x80 | (cp & 0x3f)), f);
	}
}

static bool is_cntrl_cp(uint32_t cp)
{
	return cp < 0x20 || (cp >= 0x7f && cp <= 0x9f) || cp == 0x2028 || cp == 0x2029;
}

enum enc { ENC_TEXT, ENC_TAP, ENC_YAML, ENC_XML_TEXT, ENC_XML_ATTR };

static void put_xml_cp(FILE *f, uint32_t cp, bool attr)
{
	switch (cp) {
	case '&': fputs("&amp;", f); return;
	case '<': fputs("&lt;", f); return;
	case '>': fputs("&gt;", f); return;
	case '"': fputs("&quot;", f); return;
	case '\'': fputs("&apos;", f); return;
	case '\r': fputs("&#13;", f); return;
	case '\t': fputs(attr ? "&#9;" : "\t", f); return;
	case '\n': fputs(attr ? "&#10;" : "\n", f); return;
	default:
		break;
	}
	/* XML 1.0 cannot carry other C0 controls, even as references; C1 and
	 * U+FFFE/U+FFFF are legal or not, but never useful here. */
	if (is_cntrl_cp(cp) || cp == 0xfffe || cp == 0xffff)
		putc('?', f);
	else
		put_cp(f, cp);
}

static void put_yaml_cp(FILE *f, uint32_t cp)
{
	switch (cp) {
	case '"': fputs("\\\"", f); return;
	case '\\': fputs("\\\\", f); return;
	case '\n': fputs("\\n", f); return;
	case '\t': fputs("\\t", f); return;
	default:
		break;
	}
	if (is_cntrl_cp(cp) || cp == 0xfeff || cp == 0xfffe || cp == 0xffff)
		fprintf(f, cp < 0x100 ? "\\x%02x" : "\\u%04x", (unsigned)cp);
	else
		put_cp(f, cp);
}

/* Write s re-encoded for a context (see the top of the file).  NULL: "". */
static void put_enc(FILE *f, const char *s, enum enc e)
{
	const unsigned char *p = (const unsigned char *)(s ? s : "");
	size_t len;

	while (*p) {
		uint32_t cp = utf8_next(p, &len);
		p += len;
		switch (e) {
		case ENC_TAP:
			if (cp == '#' || cp == '\\') {
				putc('\\', f);
				putc((int)cp, f);
				continue;
			}
			/* fallthrough */
		case ENC_TEXT:
			if (is_cntrl_cp(cp))
				putc('?', f);
			else
				put_cp(f, cp);
			break;
		case ENC_YAML:
			put_yaml_cp(f, cp);
			break;
		case ENC_XML_TEXT:
		case ENC_XML_ATTR:
			put_xml_cp(f, cp, e == ENC_XML_ATTR);
			break;
		}
	}
}

/* A copy of s that is valid UTF-8 (for jansson).  NULL on OOM. */
static char *utf8_clean(const char *s)
{
	char *buf = NULL;
	size_t n = 0;
	FILE *m = open_memstream(&buf, &n);
	const unsigned char *p = (const unsigned char *)s;
	size_t len;

	if (!m)
		return NULL;
	while (*p) {
		uint32_t cp = utf8_next(p, &len);
		p += len;
		put_cp(m, cp);
	}
	if (fclose(m) != 0) {
		free(buf);
		return NULL;
	}
	return buf;
}

static json_t *jstr(const char *s)
{
	json_t *j = json_string(s);
	if (j || !s)
		return j;
	_cleanup_free_ char *c = utf8_clean(s);
	return c ? json_string(c) : NULL;
}

/* ================================================================= json */

static int set_str(json_t *o, const char *key, const char *s)
{
	return s ? json_object_set_new(o, key, jstr(s)) : 0;
}

static json_t *attempt_json(const ab_esc_attempt *a)
{
	json_t *o = json_object();

	if (!o || set_str(o, "what", a->what ? a->what : "") < 0 ||
	    set_str(o, "verdict", ab_esc_verdict_name(a->verdict)) < 0 ||
	    set_str(o, "result", a->result) < 0 || set_str(o, "layer", a->layer) < 0 ||
	    set_str(o, "source", a->source) < 0) {
		json_decref(o);
		return NULL;
	}
	return o;
}

static json_t *ms_json(double ms)
{
	if (!(ms >= 0) || !isfinite(ms))
		return json_integer(0);
	if (ms < 9007199254740992.0 && ms == floor(ms))
		return json_integer((json_int_t)ms);
	return json_real(ms);
}

static int result_json_lists(json_t *o, const ab_esc_result *r)
{
	json_t *att = json_array(), *found = json_array();

	if (json_object_set_new(o, "attempts", att) < 0 ||
	    json_object_set_new(o, "found", found) < 0)
		return -ENOMEM;
	for (size_t i = 0; i < r->nattempts; i++)
		if (json_array_append_new(att, attempt_json(&r->attempts[i])) < 0)
			return -ENOMEM;
	for (size_t i = 0; i < r->found.n; i++)
		if (json_array_append_new(found, jstr(r->found.v[i])) < 0)
			return -ENOMEM;
	return 0;
}

json_t *ab_esc_result_json(const ab_esc_result *r)
{
	_cleanup_json_ json_t *o = json_object();
	const ab_probe_def *d = r->def;

	if (!o || set_str(o, "id", d ? d->id : "?") < 0 ||
	    set_str(o, "name", d ? d->name : "?") < 0 ||
	    set_str(o, "category", ab_esc_cat_name(d ? d->cat : AB_CAT__N)) < 0 ||
	    set_str(o, "verdict", ab_esc_verdict_name(r->verdict)) < 0 ||
	    json_object_set_new(o, "ms", ms_json(r->ms)) < 0 ||
	    result_json_lists(o, r) < 0 ||
	    json_object_set_new(o, "dropped",
				json_integer(r->dropped > (size_t)INT64_MAX ? INT64_MAX
									    : (json_int_t)r->dropped)) < 0 ||
	    (r->report && json_object_set(o, "report", r->report) < 0) ||
	    set_str(o, "note", r->note) < 0)
		return NULL;
	return TAKE_PTR(o);
}

/* =============================================================== counts */

/* A control can never "escape": whatever it says, its failure is an error. */
static enum ab_esc_verdict eff_verdict(const ab_esc_result *r)
{
	if ((unsigned)r->verdict > AB_ESC_SKIP)
		return AB_ESC_ERROR;
	if (is_control(r) && r->verdict == AB_ESC_ESCAPED)
		return AB_ESC_ERROR;
	return r->verdict;
}

static enum ab_esc_cat cat_of(const ab_esc_result *r)
{
	return r->def && (unsigned)r->def->cat < AB_CAT__N ? r->def->cat : AB_CAT__N;
}

typedef struct counts {
	size_t total, by[4];
	double ms;
} counts;

/* cat AB_CAT__N + 1: every category. */
static void count(const ab_esc_results *rs, unsigned cat, counts *c)
{
	*c = (counts){0};
	for (size_t i = 0; i < rs->n; i++) {
		const ab_esc_result *r = &rs->v[i];
		if (cat <= AB_CAT__N && cat_of(r) != cat)
			continue;
		c->total++;
		c->by[eff_verdict(r)]++;
		if (r->ms >= 0 && isfinite(r->ms))
			c->ms += r->ms;
	}
}
#define ALL_CATS (AB_CAT__N + 1u)

int ab_esc_exit_status(const ab_esc_results *rs)
{
	bool errors = false;

	if (!rs)
		return AB_ESC_EXIT_LAB;
	for (size_t i = 0; i < rs->n; i++) {
		enum ab_esc_verdict v = eff_verdict(&rs->v[i]);
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

/* ================================================================== TAP */

static const char *gate_id(const ab_esc_results *rs)
{
	for (size_t i = 0; i < rs->n; i++)
		if (rs->v[i].def && rs->v[i].def->gate)
			return rs->v[i].def->id;
	return NULL;
}

static void tap_desc(FILE *f, const ab_esc_result *r)
{
	put_enc(f, r->def ? r->def->id : "?", ENC_TAP);
	putc(' ', f);
	put_enc(f, r->def ? r->def->name : "?", ENC_TAP);
}

/* The word after '#' on an attempt's line: never starts with "skip" or
 * "todo" unless the attempt was skipped, whatever its result text says. */
static const char *attempt_word(const ab_esc_attempt *a, bool control)
{
	switch (a->verdict) {
	case AB_ESC_OK:
		return control ? "worked" : "blocked";
	case AB_ESC_ESCAPED:
		return "escaped";
	case AB_ESC_SKIP:
		return "SKIP";
	case AB_ESC_ERROR:
	default:
		return "error";
	}
}

static void tap_subtest(FILE *f, const ab_esc_result *r)
{
	bool control = is_control(r);

	fputs("# Subtest: ", f);
	tap_desc(f, r);
	fprintf(f, "\n    1..%zu\n", r->nattempts);
	for (size_t k = 0; k < r->nattempts; k++) {
		const ab_esc_attempt *a = &r->attempts[k];
		bool ok = control ? a->verdict == AB_ESC_OK
				  : a->verdict == AB_ESC_OK || a->verdict == AB_ESC_SKIP;
		fprintf(f, "    %s %zu - ", ok ? "ok" : "not ok", k + 1);
		put_enc(f, a->what, ENC_TAP);
		fprintf(f, " # %s", attempt_word(a, control));
		if (a->result) {
			fputs(a->verdict == AB_ESC_SKIP ? " " : ": ", f);
			put_enc(f, a->result, ENC_TAP);
		}
		if (a->layer) {
			fputs(" (", f);
			put_enc(f, a->layer, ENC_TAP);
			putc(')', f);
		}
		if (a->source) {
			fputs(" [", f);
			put_enc(f, a->source, ENC_TAP);
			putc(']', f);
		}
		putc('\n', f);
	}
	if (r->dropped)
		fprintf(f, "    # %zu more attempts not kept\n", r->dropped);
}

static void yaml_str(FILE *f, const char *indent, const char *key, const char *s)
{
	if (!s)
		return;
	fprintf(f, "%s%s: \"", indent, key);
	put_enc(f, s, ENC_YAML);
	fputs("\"\n", f);
}

/* The attempts of one kind, as a YAML list under `key`. */
static void yaml_attempts(FILE *f, const ab_esc_result *r, const char *key, bool not_ok,
			  enum ab_esc_verdict v)
{
	bool any = false;

	for (size_t k = 0; k < r->nattempts; k++) {
		const ab_esc_attempt *a = &r->attempts[k];
		if (not_ok ? a->verdict == AB_ESC_OK : a->verdict != v)
			continue;
		if (!any)
			fprintf(f, "  %s:\n", key);
		any = true;
		yaml_str(f, "    - ", "what", a->what ? a->what : "");
		if (not_ok)
			yaml_str(f, "      ", "verdict", ab_esc_verdict_name(a->verdict));
		yaml_str(f, "      ", "result", a->result);
		yaml_str(f, "      ", "layer", a->layer);
		yaml_str(f, "      ", "source", a->source);
	}
}

static void tap_yaml(FILE *f, const ab_esc_result *r)
{
	bool first = true;

	fputs("  ---\n", f);
	fprintf(f, "  verdict: %s\n", ab_esc_verdict_name(eff_verdict(r)));
	fprintf(f, "  category: %s\n", ab_esc_cat_name(cat_of(r)));
	if (is_control(r))
		fputs("  control: true\n", f);
	yaml_str(f, "  ", "note", r->note);
	for (size_t k = 0; k < r->nattempts; k++) {
		const char *l = r->attempts[k].layer;
		bool seen = false;
		for (size_t m = 0; l && m < k && !seen; m++)
			seen = r->attempts[m].layer && strcmp(r->attempts[m].layer, l) == 0;
		if (!l || seen)
			continue;
		fputs(first ? "  layers: [\"" : ", \"", f);
		put_enc(f, l, ENC_YAML);
		putc('"', f);
		first = false;
	}
	if (!first)
		fputs("]\n", f);
	if (is_control(r)) {
		yaml_attempts(f, r, "failed", true, AB_ESC_OK);
	} else {
		yaml_attempts(f, r, "escaped", false, AB_ESC_ESCAPED);
		yaml_attempts(f, r, "errors", false, AB_ESC_ERROR);
	}
	fprintf(f, "  attempts: %zu\n", r->nattempts);
	if (r->dropped)
		fprintf(f, "  dropped: %zu\n", r->dropped);
	if (r->found.n)
		fprintf(f, "  canaries_found: %zu\n", r->found.n);
	fputs("  ...\n", f);
}

static void tap_point(FILE *f, size_t num, const ab_esc_result *r)
{
	enum ab_esc_verdict v = eff_verdict(r);
	bool ok = v == AB_ESC_OK || v == AB_ESC_SKIP;

	if (r->nattempts)
		tap_subtest(f, r);
	fprintf(f, "%s %zu - ", ok ? "ok" : "not ok", num);
	tap_desc(f, r);
	if (v == AB_ESC_SKIP) {
		fputs(" # SKIP", f);
		if (r->note) {
			putc(' ', f);
			put_enc(f, r->note, ENC_TAP);
		}
	}
	putc('\n', f);
	if (!ok)
		tap_yaml(f, r);
}

static void write_tap(const ab_esc_results *rs, FILE *f)
{
	fputs("TAP version 14\n", f);
	if (rs->lab_error && rs->n == 0) {
		fputs("Bail out! lab setup failed: ", f);
		put_enc(f, rs->lab_error, ENC_TAP);
		putc('\n', f);
		return;
	}
	if (rs->profile) {
		fputs("# profile: ", f);
		put_enc(f, rs->profile, ENC_TEXT);
		putc('\n', f);
	}
	fprintf(f, "1..%zu\n", rs->n);
	for (size_t i = 0; i < rs->n; i++)
		tap_point(f, i + 1, &rs->v[i]);
	if (rs->not_in_effect) {
		const char *g = gate_id(rs);
		fputs("Bail out! sandbox not in effect", f);
		if (g) {
			fputs(" (gate ", f);
			put_enc(f, g, ENC_TAP);
			putc(')', f);
		}
		putc('\n', f);
	} else if (rs->lab_error) {
		fputs("Bail out! lab setup failed: ", f);
		put_enc(f, rs->lab_error, ENC_TAP);
		putc('\n', f);
	}
}

/* ================================================================ JUnit */

static void xml_attr(FILE *f, const char *name, const char *val)
{
	fprintf(f, " %s=\"", name);
	put_enc(f, val, ENC_XML_ATTR);
	putc('"', f);
}

/* Milliseconds as JUnit seconds, without the locale's decimal point. */
static void xml_time(FILE *f, double ms)
{
	unsigned long long t = 0;
	if (ms >= 0 && ms < 1e15)
		t = (unsigned long long)(ms + 0.5);
	fprintf(f, " time=\"%llu.%03llu\"", t / 1000, t % 1000);
}

static void xml_counts(FILE *f, const counts *c, size_t extra_fail, size_t extra_err)
{
	fprintf(f, " tests=\"%zu\" failures=\"%zu\" errors=\"%zu\" skipped=\"%zu\"",
		c->total + extra_fail + extra_err, c->by[AB_ESC_ESCAPED] + extra_fail,
		c->by[AB_ESC_ERROR] + extra_err, c->by[AB_ESC_SKIP]);
	xml_time(f, c->ms);
}

static void attempt_line(FILE *m, const ab_esc_attempt *a)
{
	fprintf(m, "[%s] %s", ab_esc_verdict_name(a->verdict), a->what ? a->what : "");
	if (a->result)
		fprintf(m, ": %s", a->result);
	if (a->layer)
		fprintf(m, " (%s)", a->layer);
	if (a->source)
		fprintf(m, " [%s]", a->source);
	putc('\n', m);
}

/* The message attribute and the body of a <failure>/<error>, raw text. */
static int junit_texts(const ab_esc_result *r, enum ab_esc_verdict v, char **msg, char **body)
{
	size_t mn = 0, bn = 0, named = 0, more = 0;
	_cleanup_(fclosep) FILE *mf = open_memstream(msg, &mn);
	_cleanup_(fclosep) FILE *bf = open_memstream(body, &bn);
	bool control = is_control(r);

	if (!mf || !bf)
		return -ENOMEM;
	fputs(v == AB_ESC_ESCAPED ? "escaped" : control ? "control failed" : "error", mf);
	for (size_t k = 0; k < r->nattempts; k++) {
		const ab_esc_attempt *a = &r->attempts[k];
		bool bad = control ? a->verdict != AB_ESC_OK
				   : a->verdict == (v == AB_ESC_ESCAPED ? AB_ESC_ESCAPED
									 : AB_ESC_ERROR);
		if (!bad)
			continue;
		attempt_line(bf, a);
		if (named < MSG_WHATS)
			fprintf(mf, "%s %s", named++ ? ";" : ":", a->what ? a->what : "");
		else
			more++;
	}
	if (more)
		fprintf(mf, " (+%zu more)", more);
	if (r->note) {
		fprintf(mf, "%s%s", named ? "; " : ": ", r->note);
		fprintf(bf, "note: %s\n", r->note);
	}
	if (r->found.n)
		fprintf(bf, "canary hashes found: %zu\n", r->found.n);
	if (r->dropped)
		fprintf(bf, "attempts not kept: %zu\n", r->dropped);
	int e1 = fclose(TAKE_PTR(mf)), e2 = fclose(TAKE_PTR(bf));
	return e1 || e2 ? -ENOMEM : 0;
}

static int junit_case(FILE *f, const ab_esc_result *r)
{
	enum ab_esc_verdict v = eff_verdict(r);
	_cleanup_free_ char *name = NULL, *cls = NULL, *msg = NULL, *body = NULL;

	name = ab_asprintf("%s %s", r->def ? r->def->id : "?", r->def ? r->def->name : "?");
	cls = ab_asprintf("agentbox.escape.%s", ab_esc_cat_name(cat_of(r)));
	if (!name || !cls)
		return -ENOMEM;
	fputs("    <testcase", f);
	xml_attr(f, "classname", cls);
	xml_attr(f, "name", name);
	xml_time(f, r->ms);
	fputs(">\n", f);
	if (v == AB_ESC_SKIP) {
		fputs("      <skipped", f);
		xml_attr(f, "message", r->note ? r->note : "skipped");
		fputs("/>\n", f);
	} else if (v != AB_ESC_OK) {
		const char *el = v == AB_ESC_ESCAPED ? "failure" : "error";
		if (junit_texts(r, v, &msg, &body) < 0)
			return -ENOMEM;
		fprintf(f, "      <%s", el);
		xml_attr(f, "type", ab_esc_verdict_name(v));
		xml_attr(f, "message", msg);
		fputs(">", f);
		put_enc(f, body, ENC_XML_TEXT);
		fprintf(f, "</%s>\n", el);
	}
	if (r->nattempts) {
		fputs("      <system-out>", f);
		for (size_t k = 0; k < r->nattempts; k++) {
			_cleanup_free_ char *line = NULL;
			size_t ln = 0;
			FILE *m = open_memstream(&line, &ln);
			if (!m)
				return -ENOMEM;
			attempt_line(m, &r->attempts[k]);
			if (fclose(m) != 0)
				return -ENOMEM;
			put_enc(f, line, ENC_XML_TEXT);
		}
		fputs("</system-out>\n", f);
	}
	fputs("    </testcase>\n", f);
	return 0;
}

/* Lab failure and a stopped gate as test cases of their own, so CI shows
 * them even when no probe ran. */
static void junit_harness(FILE *f, const ab_esc_results *rs)
{
	counts c = {0};
	size_t nf = rs->not_in_effect ? 1 : 0, ne = rs->lab_error ? 1 : 0;

	if (!nf && !ne)
		return;
	fputs("  <testsuite name=\"harness\"", f);
	xml_counts(f, &c, nf, ne);
	fputs(">\n", f);
	if (ne) {
		fputs("    <testcase classname=\"agentbox.escape.harness\" name=\"lab setup\""
		      " time=\"0.000\">\n      <error type=\"lab\"", f);
		xml_attr(f, "message", rs->lab_error);
		fputs("/>\n    </testcase>\n", f);
	}
	if (nf) {
		const char *g = gate_id(rs);
		fputs("    <testcase classname=\"agentbox.escape.harness\""
		      " name=\"sandbox in effect\" time=\"0.000\">\n"
		      "      <failure type=\"not-in-effect\" message=\"sandbox not in effect", f);
		if (g) {
			fputs(" (gate ", f);
			put_enc(f, g, ENC_XML_ATTR);
			putc(')', f);
		}
		fputs("\"/>\n    </testcase>\n", f);
	}
	fputs("  </testsuite>\n", f);
}

static int write_junit(const ab_esc_results *rs, FILE *f)
{
	counts all;

	count(rs, ALL_CATS, &all);
	fputs("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites", f);
	xml_attr(f, "name", "agentbox test-escape");
	xml_counts(f, &all, rs->not_in_effect ? 1 : 0, rs->lab_error ? 1 : 0);
	fputs(">\n", f);
	for (unsigned cat = 0; cat <= AB_CAT__N; cat++) {
		counts c;
		count(rs, cat, &c);
		if (!c.total)
			continue;
		fputs("  <testsuite", f);
		xml_attr(f, "name", ab_esc_cat_name((enum ab_esc_cat)cat));
		xml_counts(f, &c, 0, 0);
		fputs(">\n", f);
		for (size_t i = 0; i < rs->n; i++)
			if (cat_of(&rs->v[i]) == cat && junit_case(f, &rs->v[i]) < 0)
				return -ENOMEM;
		fputs("  </testsuite>\n", f);
	}
	junit_harness(f, rs);
	fputs("</testsuites>\n", f);
	return 0;
}

/* ================================================================= JSON */

static int put_json_line(FILE *f, json_t *j)
{
	_cleanup_free_ char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
	if (!s)
		return -ENOMEM;
	fputs(s, f);
	putc('\n', f);
	return 0;
}

static int write_json(const ab_esc_results *rs, FILE *f)
{
	counts c;
	_cleanup_json_ json_t *sum = NULL;

	for (size_t i = 0; i < rs->n; i++) {
		_cleanup_json_ json_t *j = ab_esc_result_json(&rs->v[i]);
		if (put_json_line(f, j) < 0)
			return -ENOMEM;
	}
	count(rs, ALL_CATS, &c);
	sum = json_pack("{s:{s:I,s:I,s:I,s:I,s:I,s:i,s:b}}", "summary",
			"total", (json_int_t)c.total, "ok", (json_int_t)c.by[AB_ESC_OK],
			"escaped", (json_int_t)c.by[AB_ESC_ESCAPED],
			"error", (json_int_t)c.by[AB_ESC_ERROR], "skip", (json_int_t)c.by[AB_ESC_SKIP],
			"exit", ab_esc_exit_status(rs), "not_in_effect", rs->not_in_effect);
	json_t *in = json_object_get(sum, "summary");
	if (!in || json_object_set_new(in, "profile", rs->profile ? jstr(rs->profile)
								  : json_null()) < 0 ||
	    set_str(in, "lab_error", rs->lab_error) < 0)
		return -ENOMEM;
	return put_json_line(f, sum);
}

int ab_esc_write(const ab_esc_results *rs, enum ab_esc_format fmt, FILE *out, ab_err *err)
{
	int r = 0;

	if (!rs || !out)
		return ab_fail(err, EINVAL, "write results");
	switch (fmt) {
	case AB_ESC_TAP:
		write_tap(rs, out);
		break;
	case AB_ESC_JUNIT:
		r = write_junit(rs, out);
		break;
	case AB_ESC_JSON:
		r = write_json(rs, out);
		break;
	default:
		return ab_fail(err, EINVAL, "write results: unknown format %d", (int)fmt);
	}
	if (r < 0)
		return ab_fail(err, -r, "write results");
	if (fflush(out) != 0 || ferror(out))
		return ab_fail(err, errno ? errno : EIO, "write results");
	return 0;
}

/* ============================================================== summary */

static void summary_ids(FILE *f, const ab_esc_results *rs, unsigned cat, enum ab_esc_verdict v)
{
	bool first = true;

	fputs(" (", f);
	for (size_t i = 0; i < rs->n; i++) {
		const ab_esc_result *r = &rs->v[i];
		if (cat_of(r) != cat || eff_verdict(r) != v)
			continue;
		if (!first)
			fputs(", ", f);
		put_enc(f, r->def ? r->def->id : "?", ENC_TEXT);
		first = false;
	}
	putc(')', f);
}

static void summary_cat(FILE *f, const ab_esc_results *rs, unsigned cat, const counts *c)
{
	bool ctl = cat == AB_CAT_CTL, sep = false;

	fprintf(f, "%-5s%2zu probe%s:", ab_esc_cat_name((enum ab_esc_cat)cat), c->total,
		c->total == 1 ? "" : "s");
	if (c->by[AB_ESC_OK]) {
		fprintf(f, " %zu %s", c->by[AB_ESC_OK], ctl ? "passed" : "blocked");
		sep = true;
	}
	if (c->by[AB_ESC_ESCAPED]) {
		fprintf(f, "%s %zu ESCAPED", sep ? "," : "", c->by[AB_ESC_ESCAPED]);
		summary_ids(f, rs, cat, AB_ESC_ESCAPED);
		sep = true;
	}
	if (c->by[AB_ESC_ERROR]) {
		fprintf(f, "%s %zu %s", sep ? "," : "", c->by[AB_ESC_ERROR],
			ctl ? "FAILED" : "ERROR");
		summary_ids(f, rs, cat, AB_ESC_ERROR);
		sep = true;
	}
	if (c->by[AB_ESC_SKIP])
		fprintf(f, "%s %zu skipped", sep ? "," : "", c->by[AB_ESC_SKIP]);
	putc('\n', f);
}

void ab_esc_write_summary(const ab_esc_results *rs, FILE *out)
{
	counts all;
	int ex;

	if (!rs || !out)
		return;
	for (unsigned cat = 0; cat <= AB_CAT__N; cat++) {
		counts c;
		count(rs, cat, &c);
		if (c.total)
			summary_cat(out, rs, cat, &c);
	}
	count(rs, ALL_CATS, &all);
	ex = ab_esc_exit_status(rs);
	fprintf(out, "test-escape: %s: %zu probe%s, %zu blocked, %zu escaped, %zu error%s, "
		     "%zu skipped",
		ex == AB_ESC_EXIT_OK ? "PASS" : "FAIL", all.total, all.total == 1 ? "" : "s",
		all.by[AB_ESC_OK], all.by[AB_ESC_ESCAPED], all.by[AB_ESC_ERROR],
		all.by[AB_ESC_ERROR] == 1 ? "" : "s", all.by[AB_ESC_SKIP]);
	if (rs->not_in_effect)
		fputs("; sandbox not in effect", out);
	if (rs->lab_error) {
		fputs("; lab setup failed: ", out);
		put_enc(out, rs->lab_error, ENC_TEXT);
	}
	if (rs->profile) {
		fputs(" (profile ", out);
		put_enc(out, rs->profile, ENC_TEXT);
		putc(')', out);
	}
	fprintf(out, " [exit %d]\n", ex);
}
