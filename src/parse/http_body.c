/* SPDX-License-Identifier: MIT */
/*
 * http_body.c (parent: the egress proxy; pure, any process): where an
 * HTTP/1.1 message body ends.  The response body-framing decision
 * (ab_http_response_body), the chunk-size line parser and the incremental
 * body framer, a byte-level state machine that keeps its state between
 * calls and shares the chunk-size line code with ab_http_parse_chunk_size.
 * The heads are parsed in http.c.  Untrusted bytes in, no I/O, no
 * allocation, explicit limits (AB_HTTP_CHUNK_LINE_MAX, AB_HTTP_TRAILER_*).
 */
#include "agentbox/http.h"
#include "http_int.h"

#include <errno.h>
#include <limits.h>
#include <string.h>

/* ------------------------------------------------------------ framing */

ab_http_body_kind ab_http_response_body(const ab_http_resp *r, ab_http_method req_method)
{
	/* any 2xx to CONNECT is a tunnel, 204 included (RFC 9110 §9.3.6) */
	if (r->code == 101 || (req_method == AB_HTTP_CONNECT && r->code >= 200 && r->code < 300))
		return AB_HTTP_BODY_TUNNEL;
	if (req_method == AB_HTTP_HEAD || r->code < 200 || r->code == 204 || r->code == 304)
		return AB_HTTP_BODY_NONE;
	if (r->chunked)
		return AB_HTTP_BODY_CHUNKED;
	if (r->has_content_length)
		return AB_HTTP_BODY_LENGTH;
	return AB_HTTP_BODY_CLOSE;
}

/* ---------------------------------------------------------------- chunked */

/* States of the chunk-size line (shared by ab_http_parse_chunk_size and the
 * framer) and of the rest of a chunked body (framer only). */
enum {
	CL_SIZE, /* 1*HEXDIG */
	CL_EXT,  /* after ";" until CR */
	CL_LF,   /* after CR */
	F_DATA,
	F_DATA_CR,
	F_DATA_LF,
	F_TR_START, /* start of a trailer line (or of the final CRLF) */
	F_TR_NAME,
	F_TR_VALUE,
	F_TR_LF,
	F_END_LF,
	F_BODY, /* LENGTH, CLOSE, TUNNEL, NONE: no byte-level state */
	F_DONE,
	F_ERROR,
};

/* Byte idx (0-based) of a chunk-size line: 1 when it was the final LF, 0 to
 * go on, -EBADMSG.  *v accumulates the size.  The line, CRLF included, is at
 * most AB_HTTP_CHUNK_LINE_MAX bytes: fails as soon as that is certain. */
static int chunk_line_step(int *st, uint64_t *v, size_t idx, unsigned char c)
{
	int d;

	switch (*st) {
	case CL_SIZE:
		if ((d = hexval(c)) >= 0) {
			*v = *v * 16 + (uint64_t)d;
			if (*v > AB_HTTP_CHUNK_SIZE_MAX)
				return -EBADMSG;
		} else if (idx == 0) {
			return -EBADMSG;
		} else if (c == ';') {
			*st = CL_EXT;
		} else if (c == '\r') {
			*st = CL_LF;
		} else {
			return -EBADMSG;
		}
		break;
	case CL_EXT:
		if (c == '\r')
			*st = CL_LF;
		else if (is_ctl(c))
			return -EBADMSG;
		break;
	default: return c == '\n' ? 1 : -EBADMSG;
	}
	return idx + 1 >= AB_HTTP_CHUNK_LINE_MAX ? -EBADMSG : 0;
}

int ab_http_parse_chunk_size(const char *buf, size_t len, uint64_t *size, size_t *consumed)
{
	int st = CL_SIZE, k;
	uint64_t v = 0;

	for (size_t i = 0; i < len; i++) {
		if ((k = chunk_line_step(&st, &v, i, (unsigned char)buf[i])) < 0)
			return k;
		if (k == 1) {
			*size = v;
			*consumed = i + 1;
			return 1;
		}
	}
	return 0;
}

/* ----------------------------------------------------------------- framer */

void ab_http_framer_init(ab_http_framer *f, ab_http_body_kind kind, uint64_t content_length)
{
	memset(f, 0, sizeof(*f));
	f->kind = kind;
	f->state = kind == AB_HTTP_BODY_CHUNKED ? CL_SIZE : F_BODY;
	if (kind == AB_HTTP_BODY_LENGTH)
		f->remaining = content_length;
}

/* One byte of the trailer section: field lines, strict CRLF, bounded. */
static int trailer_byte(ab_http_framer *f, unsigned char c)
{
	if (++f->trailer_bytes > AB_HTTP_TRAILER_MAX_BYTES)
		return -EBADMSG;
	switch (f->state) {
	case F_TR_START:
		if (c == '\r') {
			f->state = F_END_LF;
			return 0;
		}
		if (!is_tchar(c) || ++f->trailer_count > AB_HTTP_TRAILER_MAX_FIELDS)
			return -EBADMSG; /* also obs-fold, bare LF, empty name */
		f->state = F_TR_NAME;
		return 0;
	case F_TR_NAME:
		if (c == ':')
			f->state = F_TR_VALUE;
		else if (!is_tchar(c))
			return -EBADMSG;
		return 0;
	case F_TR_VALUE:
		if (c == '\r')
			f->state = F_TR_LF;
		else if (is_ctl(c))
			return -EBADMSG;
		return 0;
	case F_TR_LF:
		if (c != '\n')
			return -EBADMSG;
		f->state = F_TR_START;
		return 0;
	case F_END_LF:
		if (c != '\n')
			return -EBADMSG;
		f->state = F_DONE;
		return 0;
	default: return -EBADMSG;
	}
}

/* One byte of a chunked body outside chunk data. */
static int chunked_byte(ab_http_framer *f, unsigned char c)
{
	int k;

	switch (f->state) {
	case CL_SIZE:
	case CL_EXT:
	case CL_LF:
		if ((k = chunk_line_step(&f->state, &f->remaining, f->line_len, c)) <= 0)
			return k < 0 ? k : (f->line_len++, 0);
		f->line_len = 0;
		f->state = f->remaining ? F_DATA : F_TR_START;
		return 0;
	case F_DATA_CR:
		if (c != '\r')
			return -EBADMSG;
		f->state = F_DATA_LF;
		return 0;
	case F_DATA_LF:
		if (c != '\n')
			return -EBADMSG;
		f->state = CL_SIZE; /* remaining is 0 again */
		return 0;
	default: return trailer_byte(f, c);
	}
}

static int chunked_feed(ab_http_framer *f, const char *buf, size_t len, bool *done)
{
	size_t i = 0;

	while (i < len && f->state != F_DONE) {
		if (f->state == F_ERROR)
			return -EBADMSG;
		if (f->state == F_DATA) {
			size_t n = f->remaining < len - i ? (size_t)f->remaining : len - i;
			i += n;
			f->remaining -= n;
			if (f->remaining == 0)
				f->state = F_DATA_CR;
			continue;
		}
		if (chunked_byte(f, (unsigned char)buf[i]) < 0) {
			f->state = F_ERROR;
			return -EBADMSG;
		}
		i++;
	}
	if (f->state == F_ERROR)
		return -EBADMSG;
	*done = f->state == F_DONE;
	return (int)i;
}

int ab_http_framer_feed(ab_http_framer *f, const char *buf, size_t len, bool *done)
{
	size_t n;

	*done = false;
	if (len > INT_MAX)
		len = INT_MAX;
	switch (f->kind) {
	case AB_HTTP_BODY_NONE: *done = true; return 0;
	case AB_HTTP_BODY_CLOSE:
	case AB_HTTP_BODY_TUNNEL: return (int)len;
	case AB_HTTP_BODY_LENGTH:
		n = f->remaining < len ? (size_t)f->remaining : len;
		f->remaining -= n;
		*done = f->remaining == 0;
		return (int)n;
	case AB_HTTP_BODY_CHUNKED: return chunked_feed(f, buf, len, done);
	}
	return -EINVAL;
}
