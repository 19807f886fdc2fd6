/* SPDX-License-Identifier: MIT */
/*
 * Positions in JSON text, for error messages (src/base/json_pos.c).  Used by the
 * profile loader in the parent; pure, so any process could call it.
 *
 * jansson records no positions for parsed values, so these functions re-scan
 * the original bytes.  All are pure (no allocation, no I/O), bounded and
 * never read outside buf[0..len): hostile input is fine.
 *
 * Also the cleanup attribute for jansson's references (_cleanup_json_), the
 * one header of the lowest folder that includes jansson.
 */
#ifndef AGENTBOX_JSON_POS_H
#define AGENTBOX_JSON_POS_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "agentbox/common.h"

struct json_error_t; /* jansson.h's json_error_t */

/* A json_t reference dropped when its variable goes out of scope (NULL is
 * fine), as _cleanup_free_ does for malloc'd memory; TAKE_PTR hands it on. */
static inline void ab_json_decrefp(json_t **j)
{
	json_decref(*j);
}
#define _cleanup_json_ _cleanup_(ab_json_decrefp)

/* One step of a JSON path: an object key (key != NULL) or an array index. */
typedef struct ab_json_step {
	const char *key;
	size_t index;
} ab_json_step;

/* Find where the value at `path` (or, with want_key, the key of its last
 * step) starts in the JSON text buf[0..len): 1-based line and column, the
 * column counted in UTF-8 characters like jansson's.  Pure and bounded: never
 * reads outside buf, O(len) per step, no recursion; hostile input is fine.
 * Returns 0, or -ENOENT / -EINVAL when the path is absent or the text
 * malformed; line/col then point at the deepest value found (or 1:1). */
int ab_json_locate(const char *buf, size_t len, const ab_json_step *path, size_t depth,
		   bool want_key, size_t *line, size_t *col);

/* 1-based line and column (in UTF-8 characters) of byte offset `off` in
 * buf[0..len); an offset past len counts as len. */
void ab_json_linecol(const char *buf, size_t len, size_t off, size_t *line, size_t *col);

/* Copy the C string s into out for a message: escape control characters
 * (C0, DEL, C1) so a profile can never put terminal escapes on the user's
 * screen, and with `quotes` also " and \ (for use inside "...").  Cut with
 * "..." at a character boundary when it does not fit.  Returns out. */
const char *ab_json_sanitize(char *out, size_t outsz, const char *s, bool quotes);

/* What is wrong with a JSON text and where: a byte offset (turn it into a
 * position with ab_json_linecol) and a printable message without position. */
typedef struct ab_json_diag {
	size_t off;
	char msg[512];
} ab_json_diag;

/* Bytes that must not reach jansson: a UTF-8 byte order mark, a NUL byte, or
 * invalid UTF-8 (overlong forms, surrogates and code points above U+10FFFF
 * are invalid).  Returns true and fills d for the first one found. */
bool ab_json_check_bytes(const char *buf, size_t len, ab_json_diag *d);

/* Place the syntax error that json_loadb() reported in `je` for buf[0..len)
 * on the offending token (jansson reports the offset after the bytes it
 * consumed) and word it for people: trailing commas, comments, single quotes,
 * unterminated strings, duplicate keys... */
void ab_json_syntax_error(const char *buf, size_t len, const struct json_error_t *je,
			  ab_json_diag *d);

/* A JSON string that never fails on bytes that are not UTF-8 (file names may
 * hold any): such bytes become '?'.  NULL -> JSON null.  (explain, doctor) */
json_t *ab_json_string_lossy(const char *s);

#endif
