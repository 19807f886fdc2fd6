/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target (any process; fuzzing only): `agentbox report` on
 * arbitrary bytes as an audit log (every string in a log may come from
 * inside the sandbox).  The first byte picks the limits (line length, items,
 * string bytes) and a chunk size; the rest is the log.  Properties beyond
 * "no crash, no leak, no UB":
 *   - the counters agree (bad lines and events never exceed the lines, the
 *     first bad line is one of them, commands stay within the item budget);
 *   - feeding the log whole and in chunks gives the same text report;
 *   - the text report holds no raw control byte but '\n', no DEL, no C1
 *     control, no bidi override or line separator, and only valid UTF-8;
 *   - the JSON report parses (one object, no duplicate keys) and its
 *     counters match the model (warnings: no more listed than counted);
 *   - ab_report_sanitize on the raw bytes is terminal-safe and keeps to its
 *     width.
 */
#include "agentbox/report.h"

#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char *render(const ab_report *r, bool json, size_t *len)
{
	char *buf = NULL;
	FILE *f = open_memstream(&buf, len);
	if (!f)
		__builtin_trap();
	ab_report_opts o = {.source = "fuzz", .max_lines = 50};
	int rc = json ? ab_report_json(r, &o, f) : ab_report_text(r, &o, f);
	if (fclose(f) != 0 || rc < 0)
		__builtin_trap();
	return buf;
}

static void terminal_safe(const unsigned char *s, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		unsigned char c = s[i];
		if (c == '\n' || (c >= 0x20 && c < 0x7f))
			continue;
		if (c < 0x20 || c == 0x7f)
			__builtin_trap();
		size_t k = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 ? 2 : 0;
		if (!k || c > 0xf4 || i + k > n)
			__builtin_trap();
		uint32_t cp = k == 2 ? c & 0x1f : k == 3 ? c & 0x0f : c & 0x07;
		for (size_t j = 1; j < k; j++) {
			if ((s[i + j] & 0xc0) != 0x80)
				__builtin_trap();
			cp = cp << 6 | (s[i + j] & 0x3f);
		}
		if ((k == 3 && cp < 0x800) || (k == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
		    (cp >= 0xd800 && cp <= 0xdfff) || (cp >= 0x80 && cp <= 0x9f) ||
		    (cp >= 0x2028 && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069) ||
		    cp == 0x200e || cp == 0x200f || cp == 0x061c)
			__builtin_trap();
		i += k - 1;
	}
}

static ab_report *feed(const ab_report_limits *l, const char *log, size_t n, size_t chunk)
{
	ab_report *r = NULL;
	if (ab_report_new(l, &r) < 0)
		__builtin_trap();
	for (size_t i = 0; i < n; i += chunk)
		if (ab_report_feed(r, log + i, n - i < chunk ? n - i : chunk) < 0)
			__builtin_trap();
	if (ab_report_end(r) < 0)
		__builtin_trap();
	return r;
}

static uint64_t jint(json_t *j, const char *k)
{
	json_t *v = json_object_get(j, k);
	if (!json_is_integer(v))
		__builtin_trap();
	return (uint64_t)json_integer_value(v);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	uint8_t sel = data[0];
	const char *log = (const char *)data + 1;
	size_t n = size - 1;
	static const size_t lines[] = {64, 512, 4096, 0};
	static const size_t items[] = {8, 64, 0, 0};
	ab_report_limits l = {.max_line = lines[sel & 3],
			      .max_items = items[(sel >> 2) & 3],
			      .max_bytes = (sel & 0x10) ? 2048 : 0,
			      .seed = 1};
	size_t chunk = 1 + ((sel >> 5) & 7) * 3;

	ab_report *whole = feed(&l, log, n, n ? n : 1);
	ab_report *parts = feed(&l, log, n, chunk);
	ab_report_counts c;
	ab_report_counts_get(whole, &c);
	if (c.bad_lines > c.lines || c.events + c.bad_lines > c.lines ||
	    (c.bad_lines && (!c.first_bad || c.first_bad > c.lines)) ||
	    (!c.bad_lines && c.first_bad) || c.dropped > c.events ||
	    c.commands > (l.max_items ? l.max_items : AB_REPORT_MAX_ITEMS))
		__builtin_trap();

	size_t tl, tl2, jl;
	char *text = render(whole, false, &tl);
	char *text2 = render(parts, false, &tl2);
	if (tl != tl2 || memcmp(text, text2, tl) != 0)
		__builtin_trap();
	terminal_safe((const unsigned char *)text, tl);

	char *js = render(whole, true, &jl);
	json_error_t e;
	json_t *j = json_loadb(js, jl, JSON_REJECT_DUPLICATES, &e);
	if (!json_is_object(j) || jint(j, "lines") != c.lines || jint(j, "events") != c.events ||
	    jint(j, "bad_lines") != c.bad_lines || jint(j, "dropped_events") != c.dropped ||
	    json_array_size(json_object_get(j, "commands")) != c.commands ||
	    json_array_size(json_object_get(j, "sessions")) != c.sessions ||
	    jint(j, "warning_count") != c.warnings || c.warnings > c.events ||
	    !json_is_array(json_object_get(j, "warnings")) ||
	    json_array_size(json_object_get(j, "warnings")) > c.warnings ||
	    !json_is_array(json_object_get(j, "credentials_files")))
		__builtin_trap();
	for (size_t i = 0; i < jl; i++)
		if ((unsigned char)js[i] < 0x20 && js[i] != '\n')
			__builtin_trap();
	json_decref(j);

	char *s = NULL;
	size_t sl = 0;
	FILE *f = open_memstream(&s, &sl);
	size_t cols = 1 + sel % 40;
	size_t w = ab_report_sanitize(f, log, n, cols);
	if (fclose(f) != 0 || w > (cols < 3 ? 3 : cols))
		__builtin_trap();
	terminal_safe((const unsigned char *)s, sl);

	free(s);
	free(js);
	free(text);
	free(text2);
	ab_report_free(whole);
	ab_report_free(parts);
	return 0;
}
