/* SPDX-License-Identifier: MIT */
/*
 * http.h: pure HTTP/1.1 parsers for the egress proxy: request head,
 * response head, chunk-size line, the response body-framing decision, an
 * incremental body framer (where does this message body end?) and the
 * sniffer of a tunnel's first bytes (is this HTTP?).  No I/O, no
 * allocation: the caller owns the buffer and a fixed-size ab_http_req /
 * ab_http_resp / ab_http_framer.  Strict by design (RFC 9112 plus the
 * smuggling and host-confusion rules of guide/egress.md): anything ambiguous
 * is rejected with the status the proxy should answer, never repaired.
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
#define AB_HTTP_TRAILER_MAX_BYTES 8192 /* trailer section incl. its final CRLF */
#define AB_HTTP_TRAILER_MAX_FIELDS 100

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

/* ------------------------------------------------------------- responses */

typedef enum {
	AB_HTTP_BODY_NONE,
	AB_HTTP_BODY_LENGTH,
	AB_HTTP_BODY_CHUNKED,
	AB_HTTP_BODY_CLOSE,  /* read until the upstream closes */
	AB_HTTP_BODY_TUNNEL, /* 101 Switching Protocols or 2xx to CONNECT: opaque from here */
} ab_http_body_kind;

typedef struct {
	int status;                 /* on error: 502 (the proxy answers 502) */
	const char *reason;         /* on error: static, printable explanation */
	int code;                   /* the response status code 100..599 */
	int version_minor;          /* HTTP/1.0 -> 0, HTTP/1.1 -> 1 */
	ab_http_span reason_phrase; /* may be empty */
	size_t n_headers;
	ab_http_header headers[AB_HTTP_MAX_HEADERS];
	bool has_content_length;
	uint64_t content_length;
	bool chunked; /* Transfer-Encoding whose final coding is chunked */
	/* The first coding that changes the body's bytes (len 0: none): a
	 * Content-Encoding element other than identity (any field, any case),
	 * a transfer-coding other than chunked ("gzip, chunked").  Raw spans
	 * of the caller's buffer; never an error here: the proxy refuses such
	 * a body where it must see into it (response masking). */
	ab_http_span content_coding, transfer_coding;
	bool conn_close, conn_keep_alive;
	/* Set by the parser as ab_http_response_body(r, AB_HTTP_GET); a caller
	 * whose request was HEAD or CONNECT must decide again with its method. */
	ab_http_body_kind body;
} ab_http_resp;

/*
 * Parse one response head at the start of buf[0..len): same contract as
 * ab_http_parse_head (bytes consumed, 0 for more, -EBADMSG with out->status
 * = 502 and out->reason).  Accepted: "HTTP/1.0" or "HTTP/1.1" SP 3DIGIT
 * (100..599) [SP reason-phrase] CRLF; the SP before an empty reason may be
 * missing ("HTTP/1.1 200\r\n", common and unambiguous).  Rejected: other
 * versions, bare LF, obs-fold, empty lines before the status line, header
 * syntax errors as for requests, Content-Length together with
 * Transfer-Encoding, several Transfer-Encoding fields, chunked applied twice
 * or not last, Transfer-Encoding in HTTP/1.0, invalid or differing
 * Content-Length values.  Identical Content-Length values ("5, 5" or two
 * fields of 5) are accepted as one (RFC 9110 §8.6).  A Transfer-Encoding
 * whose final coding is not chunked means close-delimited (RFC 9112 §6.3).
 * Limits as for requests (lim may be NULL), answered with 502.
 */
int ab_http_parse_response_head(const char *buf, size_t len, const ab_http_limits *lim,
				ab_http_resp *out);

/*
 * Body framing per RFC 9112 §6.3 given the request method: 101, and any 2xx
 * to CONNECT (204 too, RFC 9110 §9.3.6) -> TUNNEL; then HEAD, other 1xx, 204,
 * 304 -> NONE (after another 1xx the caller expects another head;
 * Content-Length/Transfer-Encoding are ignored there); chunked -> CHUNKED;
 * Content-Length -> LENGTH; else CLOSE.  (Whether a 101 was asked for is the
 * caller's check.)
 */
ab_http_body_kind ab_http_response_body(const ab_http_resp *r, ab_http_method req_method);

/* Incremental body framer, for request and response bodies alike. */
typedef struct {
	ab_http_body_kind kind;
	uint64_t remaining; /* LENGTH: bytes left; CHUNKED: size/data left */
	/* private */
	int state;
	size_t trailer_bytes;
	unsigned trailer_count;
	unsigned line_len; /* bytes of the chunk-size line so far */
} ab_http_framer;

/* content_length is used for AB_HTTP_BODY_LENGTH only. */
void ab_http_framer_init(ab_http_framer *f, ab_http_body_kind kind, uint64_t content_length);

/*
 * Consume from buf[0..len): returns how many bytes (0..len) belong to this
 * body and sets *done when the body ended exactly there (so a return < len
 * means done, except when len > INT_MAX: at most INT_MAX bytes are looked at
 * per call).  Once done, it keeps returning 0 with *done set.  CHUNKED checks
 * the framing as ab_http_parse_chunk_size does (same code), then CRLF after
 * each chunk's data, then the trailer section (field lines, strict CRLF, at
 * most AB_HTTP_TRAILER_MAX_BYTES / _FIELDS) and its final CRLF; a violation
 * returns -EBADMSG, and keeps returning it.  CLOSE and TUNNEL consume
 * everything and never set *done (the caller ends on EOF); NONE consumes 0
 * and sets *done.  Byte-by-byte feeding gives the same result as one feed.
 * -EINVAL for an unknown kind.
 */
int ab_http_framer_feed(ab_http_framer *f, const char *buf, size_t len, bool *done);

/*
 * Could a server read the first bytes of a client's stream (a CONNECT
 * tunnel, a transparent connection) as an HTTP request?  Then they belong to
 * the strict parser (ab_http_parse_head), which decides, rather than through
 * unchecked.  Leading NUL, CR, LF, SP and HT bytes are skipped (lenient
 * servers skip empty lines, some NULs and blanks); what follows is HTTP when
 * it starts with a method of RFC 9110 or PATCH in upper case and a space or
 * tab (so also an HTTP/0.9 request line, or one with a broken version), or
 * when its first line names "HTTP/" (any case) before any control byte but
 * CR and HT.  A control byte first (binary protocols, TLS, a PostgreSQL
 * startup: 00 00 00 08 04 d2 ...), or a complete first line without either
 * sign (redis "PING", git's "0032git-upload-pack /x\0..."), is another
 * protocol.  1: HTTP, 0: another protocol, -1: too few bytes to tell (never
 * with eof).  A first line not ended within AB_HTTP_SNIFF_MAX bytes is HTTP
 * (the parser refuses it).  Every head ab_http_parse_head accepts sniffs 1;
 * once a prefix gives 0 or 1, every longer input gives the same.
 */
#define AB_HTTP_SNIFF_MAX 8192
int ab_http_sniff_request(const char *p, size_t n, bool eof);

/* "Bad Request" for 400 etc.; "Error" for an unknown status. */
const char *ab_http_status_text(int status);

#endif
