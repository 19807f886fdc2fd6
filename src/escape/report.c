/* SPDX-License-Identifier: MIT */
/*
 * test-escape results, the outputs (harness process): the three formats
 * (TAP 14, JUnit XML, JSON lines) and the per-category terminal summary,
 * drawn from the model of result.c.  Pure: no syscalls beyond stdio on the
 * FILE the caller gives.
 *
 * Every string that reaches an output is re-encoded for it: invalid UTF-8
 * becomes U+FFFD, control characters are escaped or replaced, '#' and '\'
 * are escaped in TAP descriptions, XML gets entities and loses the
 * characters XML 1.0 cannot carry.
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

#define MSG_WHATS 3 /* attempts named in a JUnit message attribute */

static inline void fclosep(FILE **f)
{
	if (*f)
		fclose(*f);
}

/* ============================================================== formats */

int ab_esc_format_parse(const char *s, enum ab_esc_format *out)
{
	static const struct {
		const char *name;
		enum ab_esc_format f;
	} fmts[] = {
		{"tap", AB_ESC_TAP},
		{"junit", AB_ESC_JUNIT},
		{"json", AB_ESC_JSON},
	};
	for (size_t i = 0; s && i < AB_ARRAY_SIZE(fmts); i++)
		if (strcmp(s, fmts[i].name) == 0) {
			if (out)
				*out = fmts[i].f;
			return 0;
		}
	return -EINVAL;
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
	default: break;
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
	default: break;
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
		case ENC_YAML: put_yaml_cp(f, cp); break;
		case ENC_XML_TEXT:
		case ENC_XML_ATTR: put_xml_cp(f, cp, e == ENC_XML_ATTR); break;
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
	    json_object_set_new(o, "ms", ms_json(r->ms)) < 0 || result_json_lists(o, r) < 0 ||
	    json_object_set_new(o, "dropped",
				json_integer(r->dropped > (size_t)INT64_MAX
						     ? INT64_MAX
						     : (json_int_t)r->dropped)) < 0 ||
	    (r->report && json_object_set(o, "report", r->report) < 0) ||
	    set_str(o, "note", r->note) < 0)
		return NULL;
	return TAKE_PTR(o);
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
	case AB_ESC_OK: return control ? "worked" : "blocked";
	case AB_ESC_ESCAPED: return "escaped";
	case AB_ESC_SKIP: return "SKIP";
	case AB_ESC_ERROR:
	default: return "error";
	}
}

static void tap_subtest(FILE *f, const ab_esc_result *r)
{
	bool control = escr_is_control(r);

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
	fprintf(f, "  verdict: %s\n", ab_esc_verdict_name(escr_verdict(r)));
	fprintf(f, "  category: %s\n", ab_esc_cat_name(escr_cat(r)));
	if (escr_is_control(r))
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
	if (escr_is_control(r)) {
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
	enum ab_esc_verdict v = escr_verdict(r);
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

static void xml_counts(FILE *f, const escr_counts *c, size_t extra_fail, size_t extra_err)
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
	bool control = escr_is_control(r);

	if (!mf || !bf)
		return -ENOMEM;
	fputs(v == AB_ESC_ESCAPED ? "escaped" : control ? "control failed" : "error", mf);
	for (size_t k = 0; k < r->nattempts; k++) {
		const ab_esc_attempt *a = &r->attempts[k];
		bool bad = control ? a->verdict != AB_ESC_OK
				   : a->verdict ==
					     (v == AB_ESC_ESCAPED ? AB_ESC_ESCAPED : AB_ESC_ERROR);
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
	enum ab_esc_verdict v = escr_verdict(r);
	_cleanup_free_ char *name = NULL, *cls = NULL, *msg = NULL, *body = NULL;

	name = ab_asprintf("%s %s", r->def ? r->def->id : "?", r->def ? r->def->name : "?");
	cls = ab_asprintf("agentbox.escape.%s", ab_esc_cat_name(escr_cat(r)));
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
	escr_counts c = {0};
	size_t nf = rs->not_in_effect ? 1 : 0, ne = rs->lab_error ? 1 : 0;

	if (!nf && !ne)
		return;
	fputs("  <testsuite name=\"harness\"", f);
	xml_counts(f, &c, nf, ne);
	fputs(">\n", f);
	if (ne) {
		fputs("    <testcase classname=\"agentbox.escape.harness\" name=\"lab setup\""
		      " time=\"0.000\">\n      <error type=\"lab\"",
		      f);
		xml_attr(f, "message", rs->lab_error);
		fputs("/>\n    </testcase>\n", f);
	}
	if (nf) {
		const char *g = gate_id(rs);
		fputs("    <testcase classname=\"agentbox.escape.harness\""
		      " name=\"sandbox in effect\" time=\"0.000\">\n"
		      "      <failure type=\"not-in-effect\" message=\"sandbox not in effect",
		      f);
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
	escr_counts all;

	escr_count(rs, ESCR_ALL_CATS, &all);
	fputs("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites", f);
	xml_attr(f, "name", "agentbox test-escape");
	xml_counts(f, &all, rs->not_in_effect ? 1 : 0, rs->lab_error ? 1 : 0);
	fputs(">\n", f);
	for (unsigned cat = 0; cat <= AB_CAT__N; cat++) {
		escr_counts c;
		escr_count(rs, cat, &c);
		if (!c.total)
			continue;
		fputs("  <testsuite", f);
		xml_attr(f, "name", ab_esc_cat_name((enum ab_esc_cat)cat));
		xml_counts(f, &c, 0, 0);
		fputs(">\n", f);
		for (size_t i = 0; i < rs->n; i++)
			if (escr_cat(&rs->v[i]) == cat && junit_case(f, &rs->v[i]) < 0)
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
	escr_counts c;
	_cleanup_json_ json_t *sum = NULL;

	for (size_t i = 0; i < rs->n; i++) {
		_cleanup_json_ json_t *j = ab_esc_result_json(&rs->v[i]);
		if (put_json_line(f, j) < 0)
			return -ENOMEM;
	}
	escr_count(rs, ESCR_ALL_CATS, &c);
	sum = json_pack("{s:{s:I,s:I,s:I,s:I,s:I,s:i,s:b}}", "summary", "total",
			(json_int_t)c.total, "ok", (json_int_t)c.by[AB_ESC_OK], "escaped",
			(json_int_t)c.by[AB_ESC_ESCAPED], "error", (json_int_t)c.by[AB_ESC_ERROR],
			"skip", (json_int_t)c.by[AB_ESC_SKIP], "exit", ab_esc_exit_status(rs),
			"not_in_effect", rs->not_in_effect);
	json_t *in = json_object_get(sum, "summary");
	if (!in ||
	    json_object_set_new(in, "profile", rs->profile ? jstr(rs->profile) : json_null()) < 0 ||
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
	case AB_ESC_TAP: write_tap(rs, out); break;
	case AB_ESC_JUNIT: r = write_junit(rs, out); break;
	case AB_ESC_JSON: r = write_json(rs, out); break;
	default: return ab_fail(err, EINVAL, "write results: unknown format %d", (int)fmt);
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
		if (escr_cat(r) != cat || escr_verdict(r) != v)
			continue;
		if (!first)
			fputs(", ", f);
		put_enc(f, r->def ? r->def->id : "?", ENC_TEXT);
		first = false;
	}
	putc(')', f);
}

static void summary_cat(FILE *f, const ab_esc_results *rs, unsigned cat, const escr_counts *c)
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
	escr_counts all;
	int ex;

	if (!rs || !out)
		return;
	for (unsigned cat = 0; cat <= AB_CAT__N; cat++) {
		escr_counts c;
		escr_count(rs, cat, &c);
		if (c.total)
			summary_cat(out, rs, cat, &c);
	}
	escr_count(rs, ESCR_ALL_CATS, &all);
	ex = ab_esc_exit_status(rs);
	fprintf(out,
		"test-escape: %s: %zu probe%s, %zu blocked, %zu escaped, %zu error%s, "
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
