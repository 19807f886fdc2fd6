/* SPDX-License-Identifier: MIT */
/*
 * Positions in JSON text, for the profile loader's error messages (runs in
 * the parent, inside profile.c's loading; pure, so any process could).
 *
 * jansson records no positions for parsed values, so a small locator
 * (ab_json_locate) re-scans the original bytes for the value at a JSON path.
 * The same scanner places jansson's syntax errors on the offending token and
 * words them for people; before jansson sees the bytes, they are checked for
 * a BOM, NUL and invalid UTF-8.  Everything here is pure (no allocation, no
 * I/O), iterative and bounded (O(len) per path step), and never reads
 * outside buf[0..len), because it also sees hostile input
 * (tests/fuzz/fuzz_profile.c).
 */
#include "agentbox/json_pos.h"

#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* Text for messages and UTF-8                                              */
/* ------------------------------------------------------------------------ */

/* Length of the UTF-8 sequence starting with lead byte ch (1 if invalid). */
static size_t u8len(unsigned char ch)
{
	if (ch >= 0xc2 && ch <= 0xdf)
		return 2;
	if (ch >= 0xe0 && ch <= 0xef)
		return 3;
	if (ch >= 0xf0 && ch <= 0xf4)
		return 4;
	return 1;
}

const char *ab_json_sanitize(char *out, size_t outsz, const char *s, bool quotes)
{
	size_t o = 0, i = 0;
	while (s[i]) {
		unsigned char ch = (unsigned char)s[i];
		char tmp[8];
		size_t n = 1;
		if (quotes && (ch == '"' || ch == '\\')) {
			tmp[0] = '\\';
			tmp[1] = (char)ch;
			n = 2;
		} else if (ch < 0x20 || ch == 0x7f) {
			n = (size_t)snprintf(tmp, sizeof(tmp), "\\x%02x", ch);
		} else if (ch == 0xc2 && (unsigned char)s[i + 1] >= 0x80 &&
			   (unsigned char)s[i + 1] <= 0x9f) {
			n = (size_t)snprintf(tmp, sizeof(tmp), "\\u%04x", (unsigned char)s[i + 1]);
			i++;
		} else if (ch >= 0x80) {
			n = u8len(ch);
			for (size_t k = 0; k < n; k++) {
				if (!s[i + k] ||
				    (k > 0 && ((unsigned char)s[i + k] & 0xc0) != 0x80)) {
					n = 1;
					break;
				}
				tmp[k] = s[i + k];
			}
			if (n == 1)
				n = (size_t)snprintf(tmp, sizeof(tmp), "\\x%02x", ch);
			else
				i += n - 1;
		} else {
			tmp[0] = (char)ch;
		}
		if (o + n + 4 > outsz)
			break;
		memcpy(out + o, tmp, n);
		o += n;
		i++;
	}
	if (s[i] && outsz >= 4) {
		memcpy(out + o, "...", 3);
		o += 3;
	}
	out[o < outsz ? o : outsz - 1] = '\0';
	return out;
}

/* Offset of the first byte that is NUL or not valid UTF-8 (overlong forms,
 * surrogates and code points above U+10FFFF are invalid), or len. */
static size_t utf8_bad_offset(const unsigned char *s, size_t len)
{
	size_t i = 0;
	while (i < len) {
		unsigned char ch = s[i];
		if (ch == 0)
			return i;
		if (ch < 0x80) {
			i++;
			continue;
		}
		size_t n = u8len(ch);
		if (n == 1 || len - i < n)
			return i;
		unsigned long cp = ch & (n == 2 ? 0x1f : n == 3 ? 0x0f : 0x07);
		for (size_t k = 1; k < n; k++) {
			if ((s[i + k] & 0xc0) != 0x80)
				return i;
			cp = (cp << 6) | (s[i + k] & 0x3f);
		}
		if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
		    (cp >= 0xd800 && cp <= 0xdfff))
			return i;
		i += n;
	}
	return len;
}

/* Fill d; returns true (the caller has diagnosed the text). */
static bool diag(ab_json_diag *d, size_t off, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static bool diag(ab_json_diag *d, size_t off, const char *fmt, ...)
{
	va_list ap;
	d->off = off;
	va_start(ap, fmt);
	vsnprintf(d->msg, sizeof(d->msg), fmt, ap);
	va_end(ap);
	return true;
}

bool ab_json_check_bytes(const char *buf, size_t len, ab_json_diag *d)
{
	size_t bad;
	if (len >= 3 && memcmp(buf, "\xef\xbb\xbf", 3) == 0)
		return diag(d, 0, "byte order mark (BOM) not allowed: save as UTF-8 without BOM");
	bad = utf8_bad_offset((const unsigned char *)buf, len);
	if (bad >= len)
		return false;
	if (buf[bad] == '\0')
		return diag(d, bad, "NUL byte in file");
	return diag(d, bad, "invalid UTF-8 (byte 0x%02x)", (unsigned char)buf[bad]);
}

/* ------------------------------------------------------------------------ */
/* The position locator: pure, iterative, never reads outside buf[0..len)    */
/* ------------------------------------------------------------------------ */

static bool is_ws(char ch)
{
	return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r';
}

static bool is_punct(char ch)
{
	return ch == '{' || ch == '}' || ch == '[' || ch == ']' || ch == ':' || ch == ',';
}

static bool is_delim(char ch)
{
	return is_ws(ch) || is_punct(ch) || ch == '"';
}

static size_t skip_ws(const char *b, size_t len, size_t i)
{
	while (i < len && is_ws(b[i]))
		i++;
	return i;
}

/* b[i] == '"': index after the closing quote; len and *ok = false if none. */
static size_t skip_string(const char *b, size_t len, size_t i, bool *ok)
{
	for (i++; i < len; i++) {
		if (b[i] == '\\')
			i++;
		else if (b[i] == '"')
			return i + 1;
	}
	*ok = false;
	return len;
}

/* Skip one value of any nesting depth (a counter, no recursion). */
static size_t skip_value(const char *b, size_t len, size_t i, bool *ok)
{
	if (i >= len) {
		*ok = false;
		return len;
	}
	if (b[i] == '"')
		return skip_string(b, len, i, ok);
	if (b[i] == '{' || b[i] == '[') {
		size_t depth = 0;
		while (i < len) {
			char ch = b[i];
			if (ch == '"') {
				i = skip_string(b, len, i, ok);
				if (!*ok)
					return len;
				continue;
			}
			if (ch == '{' || ch == '[')
				depth++;
			else if ((ch == '}' || ch == ']') && --depth == 0)
				return i + 1;
			i++;
		}
		*ok = false;
		return len;
	}
	size_t start = i;
	while (i < len && !is_delim(b[i]))
		i++;
	if (i == start)
		*ok = false;
	return i;
}

static int hex4(const char *b, size_t len, size_t i)
{
	int v = 0;
	if (i > len || len - i < 4)
		return -1;
	for (size_t k = 0; k < 4; k++) {
		char ch = b[i + k];
		int d = ch >= '0' && ch <= '9'   ? ch - '0'
			: ch >= 'a' && ch <= 'f' ? ch - 'a' + 10
			: ch >= 'A' && ch <= 'F' ? ch - 'A' + 10
						 : -1;
		if (d < 0)
			return -1;
		v = v * 16 + d;
	}
	return v;
}

static size_t utf8_put(unsigned long cp, unsigned char *o)
{
	if (cp < 0x80) {
		o[0] = (unsigned char)cp;
		return 1;
	}
	if (cp < 0x800) {
		o[0] = (unsigned char)(0xc0 | (cp >> 6));
		o[1] = (unsigned char)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp < 0x10000) {
		o[0] = (unsigned char)(0xe0 | (cp >> 12));
		o[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
		o[2] = (unsigned char)(0x80 | (cp & 0x3f));
		return 3;
	}
	o[0] = (unsigned char)(0xf0 | (cp >> 18));
	o[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3f));
	o[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
	o[3] = (unsigned char)(0x80 | (cp & 0x3f));
	return 4;
}

/* Decode the escape at b[*pi] == '\\' into o; advances *pi.  0 if malformed. */
static size_t decode_escape(const char *b, size_t len, size_t *pi, unsigned char *o)
{
	size_t i = *pi;
	static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
	if (i + 1 >= len)
		return 0;
	char e = b[i + 1];
	const char *m = e ? strchr(from, e) : NULL;
	if (m) {
		o[0] = (unsigned char)to[m - from];
		*pi = i + 2;
		return 1;
	}
	if (e != 'u')
		return 0;
	int cp = hex4(b, len, i + 2);
	if (cp < 0)
		return 0;
	i += 6;
	unsigned long full = (unsigned long)cp;
	if (cp >= 0xd800 && cp <= 0xdbff && i + 1 < len && b[i] == '\\' && b[i + 1] == 'u') {
		int lo = hex4(b, len, i + 2);
		if (lo >= 0xdc00 && lo <= 0xdfff) {
			full = 0x10000 + (((unsigned long)cp - 0xd800) << 10) +
			       ((unsigned long)lo - 0xdc00);
			i += 6;
		}
	}
	*pi = i;
	return utf8_put(full, o);
}

/* b[*pi] == '"'.  Advance *pi past the string; true if its decoded value is
 * exactly key.  *ok = false when the string is malformed. */
static bool string_equals(const char *b, size_t len, size_t *pi, const char *key, bool *ok)
{
	size_t i = *pi + 1, k = 0, klen = strlen(key);
	bool eq = true;
	while (i < len && b[i] != '"') {
		unsigned char tmp[4];
		size_t n = 1;
		if (b[i] == '\\') {
			n = decode_escape(b, len, &i, tmp);
			if (n == 0)
				break;
		} else {
			tmp[0] = (unsigned char)b[i++];
		}
		if (eq && (n > klen - k || memcmp(key + k, tmp, n) != 0))
			eq = false;
		else if (eq)
			k += n;
	}
	if (i >= len || b[i] != '"') {
		*ok = false;
		*pi = len;
		return false;
	}
	*pi = i + 1;
	return eq && k == klen;
}

/* i at '{': find member `key`; *val = its value's offset, *keypos = its key's. */
static int find_member(const char *b, size_t len, size_t i, const char *key, size_t *val,
		       size_t *keypos)
{
	if (i >= len || b[i] != '{')
		return -EINVAL;
	for (i++;;) {
		bool ok = true;
		i = skip_ws(b, len, i);
		if (i < len && b[i] == '}')
			return -ENOENT;
		if (i >= len || b[i] != '"')
			return -EINVAL;
		size_t kpos = i;
		bool match = string_equals(b, len, &i, key, &ok);
		i = skip_ws(b, len, i);
		if (!ok || i >= len || b[i] != ':')
			return -EINVAL;
		i = skip_ws(b, len, i + 1);
		if (i >= len)
			return -EINVAL;
		if (match) {
			*val = i;
			*keypos = kpos;
			return 0;
		}
		i = skip_ws(b, len, skip_value(b, len, i, &ok));
		if (!ok || i >= len)
			return -EINVAL;
		if (b[i] == '}')
			return -ENOENT;
		if (b[i] != ',')
			return -EINVAL;
		i++;
	}
}

/* i at '[': find element number idx. */
static int find_element(const char *b, size_t len, size_t i, size_t idx, size_t *val)
{
	if (i >= len || b[i] != '[')
		return -EINVAL;
	for (size_t n = 0, j = i + 1;; n++) {
		bool ok = true;
		j = skip_ws(b, len, j);
		if (j >= len)
			return -EINVAL;
		if (b[j] == ']')
			return -ENOENT;
		if (n == idx) {
			*val = j;
			return 0;
		}
		j = skip_ws(b, len, skip_value(b, len, j, &ok));
		if (!ok || j >= len)
			return -EINVAL;
		if (b[j] == ']')
			return -ENOENT;
		if (b[j] != ',')
			return -EINVAL;
		j++;
	}
}

void ab_json_linecol(const char *b, size_t len, size_t off, size_t *line, size_t *col)
{
	size_t l = 1, c = 1;
	if (off > len)
		off = len;
	for (size_t i = 0; i < off; i++) {
		unsigned char ch = (unsigned char)b[i];
		if (ch == '\n') {
			l++;
			c = 1;
		} else if ((ch & 0xc0) != 0x80) {
			c++;
		}
	}
	*line = l;
	*col = c;
}

int ab_json_locate(const char *buf, size_t len, const ab_json_step *path, size_t depth,
		   bool want_key, size_t *line, size_t *col)
{
	size_t i, at;
	int r = 0;
	if (!buf)
		len = 0;
	i = skip_ws(buf, len, 0);
	at = i < len ? i : 0;
	for (size_t d = 0; d < depth && path; d++) {
		size_t val = 0, keypos = 0;
		if (path[d].key)
			r = find_member(buf, len, i, path[d].key, &val, &keypos);
		else
			r = find_element(buf, len, i, path[d].index, &val);
		if (r < 0)
			break;
		if (d + 1 == depth && want_key && path[d].key) {
			at = keypos;
			break;
		}
		i = at = val;
	}
	ab_json_linecol(buf, len, at, line, col);
	return r;
}

/* Start of the token containing offset `target`, used to place jansson's
 * syntax errors (jansson reports the offset after the bytes it consumed). */
struct tok {
	bool found, string, closed, has_prev;
	size_t start, end, prev;
};

static void token_at(const char *b, size_t len, size_t target, struct tok *t)
{
	size_t i = 0;
	memset(t, 0, sizeof(*t));
	for (;;) {
		bool ok = true;
		size_t end;
		i = skip_ws(b, len, i);
		if (i >= len || i > target)
			return;
		if (b[i] == '"') {
			end = skip_string(b, len, i, &ok);
		} else if (is_punct(b[i])) {
			end = i + 1;
		} else {
			for (end = i; end < len && !is_delim(b[end]); end++)
				;
			if (end == i)
				end = i + 1;
		}
		if (target < end) {
			*t = (struct tok){.found = true,
					  .string = b[i] == '"',
					  .closed = ok,
					  .start = i,
					  .end = end,
					  .prev = t->prev,
					  .has_prev = t->has_prev};
			return;
		}
		t->prev = i;
		t->has_prev = true;
		i = end;
	}
}

/* ------------------------------------------------------------------------ */
/* Syntax errors (from jansson)                                             */
/* ------------------------------------------------------------------------ */

static void strip_near(const char *text, char *out, size_t outsz)
{
	const char *near = strstr(text, " near ");
	size_t n = near ? (size_t)(near - text) : strlen(text);
	char tmp[JSON_ERROR_TEXT_LENGTH];
	if (n >= sizeof(tmp))
		n = sizeof(tmp) - 1;
	memcpy(tmp, text, n);
	tmp[n] = '\0';
	/* jansson's own words; keep them printable */
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)tmp[i] < 0x20 || (unsigned char)tmp[i] >= 0x7f)
			tmp[i] = '?';
	snprintf(out, outsz, "%s", tmp);
}

static const char *quote(char *out, size_t outsz, const char *s)
{
	return ab_json_sanitize(out, outsz, s, true);
}

static bool eof_error(const char *b, size_t len, const json_error_t *je, ab_json_diag *d)
{
	char what[JSON_ERROR_TEXT_LENGTH + 8];
	struct tok t;
	size_t end = len;
	while (end > 0 && is_ws(b[end - 1]))
		end--;
	if (end == 0)
		return diag(d, 0, "empty file (expected a JSON object)");
	token_at(b, len, end - 1, &t);
	if (t.found && t.string && !t.closed)
		return diag(d, t.start, "unterminated string");
	strip_near(je->text, what, sizeof(what));
	if (strstr(what, "expected"))
		return diag(d, end, "unexpected end of file (%s)", what);
	return diag(d, end, "unexpected end of file");
}

/* The errors jansson names by code; false if `code` is not one of them. */
static bool coded_error(const char *b, enum json_error_code code, const struct tok *t, size_t at,
			ab_json_diag *d)
{
	char raw[72], q[100];
	switch (code) {
	case json_error_duplicate_key: {
		size_t n = t->found && t->string && t->closed ? t->end - t->start - 2 : 0;
		if (n >= sizeof(raw))
			n = sizeof(raw) - 1;
		memcpy(raw, b + t->start + 1, n);
		raw[n] = '\0';
		return diag(d, at, "duplicate key \"%s\"", quote(q, sizeof(q), raw));
	}
	case json_error_null_character:
		return diag(d, at, "strings must not contain NUL characters (\\u0000)");
	case json_error_end_of_input_expected:
		return diag(d, at, "unexpected text after the top-level object");
	case json_error_numeric_overflow: return diag(d, at, "number out of range");
	default: return false;
	}
}

static bool syntax_diag(const char *b, size_t len, const json_error_t *je, ab_json_diag *d)
{
	enum json_error_code code = json_error_code(je);
	size_t pos = je->position > 0 ? (size_t)je->position : 0, at;
	char what[JSON_ERROR_TEXT_LENGTH + 8], raw[72], q[100];
	struct tok t;
	if (pos > len)
		pos = len;
	if (code == json_error_premature_end_of_input || pos == 0)
		return eof_error(b, len, je, d);
	token_at(b, len, pos - 1, &t);
	at = pos - 1;
	if (t.found && !(t.string && (!t.closed || pos != t.end)))
		at = t.start;
	if (coded_error(b, code, &t, at, d))
		return true;
	strip_near(je->text, what, sizeof(what));
	/* jansson stops before a raw control character and after a bad escape */
	if (strncmp(what, "control character", 17) == 0 && pos < len)
		return diag(d, pos, "invalid JSON: %s in a string (escape it, e.g. \\n)", what);
	if (strncmp(what, "invalid escape", 14) == 0 || strncmp(what, "invalid Unicode", 15) == 0) {
		while (at > 0 && t.found && at > t.start && b[at] != '\\')
			at--;
		return diag(d, at, "invalid JSON: %s", what);
	}
	if (strncmp(what, "unexpected newline", 18) == 0 && t.found && t.string)
		return diag(d, t.start, "unterminated string (use \\n for a newline)");
	if (t.found && b[t.start] == '\'')
		return diag(d, at, "invalid JSON: strings and keys take double quotes");
	if (strncmp(what, "'[' or '{' expected", 19) == 0)
		return diag(d, at, "expected a JSON object at the top level");
	if (t.found && b[t.start] == '/')
		return diag(d, at, "comments are not allowed in JSON");
	if (t.found && t.has_prev && (b[t.start] == '}' || b[t.start] == ']') && b[t.prev] == ',')
		return diag(d, t.prev, "trailing comma (not allowed in JSON)");
	if (t.found && !t.string) {
		size_t n = t.end - t.start < sizeof(raw) - 1 ? t.end - t.start : sizeof(raw) - 1;
		memcpy(raw, b + t.start, n);
		raw[n] = '\0';
		return diag(d, at, "invalid JSON: %s near \"%s\"", what, quote(q, sizeof(q), raw));
	}
	return diag(d, at, "invalid JSON: %s", what);
}

void ab_json_syntax_error(const char *buf, size_t len, const struct json_error_t *je,
			  ab_json_diag *d)
{
	(void)syntax_diag(buf, len, je, d);
}

json_t *ab_json_string_lossy(const char *s)
{
	if (!s)
		return json_null();
	json_t *j = json_string(s);
	if (j)
		return j;
	char *c = strdup(s);
	if (!c)
		return NULL;
	for (char *q = c; *q; q++)
		if ((unsigned char)*q >= 0x80)
			*q = '?';
	j = json_string(c);
	free(c);
	return j;
}
