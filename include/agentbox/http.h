/* SPDX-License-Identifier: MIT */
/*
 * http.h: pure HTTP/1.1 request-head and chunk-size parsers for the egress
 * proxy (issue 3).  No I/O, no allocation: the caller owns the buffer and a
 * fixed-size ab_http_req.  Strict by design (RFC 9112 plus the smuggling and
 * host-confusion rules of guide/egress.md): anything ambiguous is rejected
 * with the status the proxy should answer, never repaired.
 */
#ifndef AGENTBOX_HTTP_H
#define AGENTBOX_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define AB_HTTP_MAX_HEADERS 100          /* capacity of ab_http_req.headers */
#define AB_HTTP_DEFAULT_MAX_HEAD 16384   /* whole head incl. the final CRLFCRLF */
#define AB_HTTP_DEFAULT_MAX_LINE 8192    /* one line, without its CRLF */
#define AB_HTTP_HARD_MAX_HEAD (1u << 20) /* limits are clamped to this */
#define AB_HTTP_CHUNK_LINE_MAX 1024      /* chunk-size line incl. extensions */
#define AB_HTTP_CHUNK_SIZE_MAX (1ull << 48)

typedef enum {
	AB_HTTP_GET,
	AB_HTTP_HEAD,
	AB_HTTP_POST,
	AB_HTTP_PUT,
	AB_HTTP_DELETE,
	AB_HTTP_PATCH,
	AB_HTTP_OPTIONS,
	AB_HTTP_CONNECT,
	AB_HTTP_TRACE,
	AB_HTTP_OTHER, /* any other valid token: see ab_http_req.method_tok */
} ab_http_method;

typedef enum {
	AB_HTTP_ORIGIN,    /* /path?query */
	AB_HTTP_ABSOLUTE,  /* http://host[:port]/path?query (scheme http only) */
	AB_HTTP_AUTHORITY, /* host:port, CONNECT only */
	AB_HTTP_ASTERISK,  /* *, OPTIONS only */
} ab_http_form;

/* A byte range of the caller's buffer. len == 0 means absent/empty. */
typedef struct {
	uint32_t off, len;
} ab_http_span;

typedef struct {
	ab_http_span name, value; /* value trimmed of leading/trailing OWS */
} ab_http_header;

/* Zero (or a NULL pointer) selects the default for each field. */
typedef struct {
	size_t max_head;    /* default 16 KiB -> 431 (even while incomplete) */
	size_t max_headers; /* default 100, at most AB_HTTP_MAX_HEADERS -> 431 */
	size_t max_line;    /* default 8 KiB -> 414 request line, 431 header line */
} ab_http_limits;

typedef struct {
	/* On error: the status to answer (400, 414, 417, 431, 501, 505) and a
	 * static, printable explanation ("bare LF", "duplicate Host", ...). */
	int status;
	const char *reason;

	ab_http_method method;
	ab_http_span method_tok;
	ab_http_span target; /* the raw request-target */
	ab_http_form form;
	/* absolute-form and authority-form only (raw, not case-normalised;
	 * host keeps its brackets for IPv6 literals): */
	ab_http_span scheme, host, port; /* port empty when absent */
	ab_http_span path;               /* absolute-form: path+query, may be empty */
	uint16_t port_num;               /* effective port (80 if absent) */
	int version_minor;               /* HTTP/1.0 -> 0, HTTP/1.1 -> 1 */

	size_t n_headers;
	ab_http_header headers[AB_HTTP_MAX_HEADERS];

	/* derived facts */
	bool has_host;
	ab_http_span host_hdr; /* the Host header value */
	bool has_content_length;
	uint64_t content_length;
	bool chunked;
	bool conn_close, conn_keep_alive, conn_upgrade; /* Connection tokens */
	bool has_upgrade;                               /* Upgrade header present */
	bool upgrade_websocket;                         /* it names websocket */
	bool expect_100;                                /* Expect: 100-continue */
} ab_http_req;

/*
 * Parse one request head at the start of buf[0..len).  Returns the number of
 * bytes consumed (through the blank line) when complete, 0 when more bytes are
 * needed, or -EBADMSG with out->status/out->reason set.  Pure: call again with
 * the grown buffer (same start) to resume.  Bytes after the head (a body or a
 * pipelined request) are not looked at.  lim may be NULL.
 */
int ab_http_parse_head(const char *buf, size_t len, const ab_http_limits *lim, ab_http_req *out);

/*
 * Parse a chunk-size line: 1*HEXDIG [ ";" ext ] CRLF, the size at most 2^48,
 * the whole line at most AB_HTTP_CHUNK_LINE_MAX bytes.  Returns 1 with *size
 * and *consumed set when complete, 0 when more bytes are needed, -EBADMSG on
 * a malformed line (bare LF, no digits, overflow, control characters, ...).
 */
int ab_http_parse_chunk_size(const char *buf, size_t len, uint64_t *size, size_t *consumed);

/* "Bad Request" for 400 etc.; "Error" for an unknown status. */
const char *ab_http_status_text(int status);

#endif
