/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target (any process; fuzzing only): the HTTP/1.1 request-head
 * and response-head parsers, the chunk-size parser and the body framer on
 * arbitrary bytes.  The first byte selects the target (its low two bits):
 *   0  request head (default and tiny limits) and chunk-size line
 *   1  response head (default and tiny limits) and the framing decision
 *   2  chunked body framer, against a non-incremental reference decoder
 *      built on ab_http_parse_chunk_size
 *   3  a stream of pipelined responses (or requests, by bit 2) parsed head,
 *      body, head, ... as the proxy does
 * Target 0 also runs the tunnel sniffer (ab_http_sniff_request): every head
 * the parser accepts sniffs as HTTP, a prefix answers "more" or the final
 * answer, the end of the stream always gives an answer.  Target 1 checks
 * the recorded body codings (inside the head, never identity / chunked).
 * Properties checked beyond "no crash, no UB": resumability (every prefix
 * gives 0 or exactly the final answer, so feeding byte by byte equals one
 * shot; the framer gives the same answer however its input is split), spans
 * stay inside the consumed head, an error always carries a known status and
 * a printable reason, a success never reports both chunked and
 * Content-Length, the framer takes fewer bytes than offered only when done.
 */
#include "agentbox/http.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static ab_http_req full, part;

static void check_span(ab_http_span s, int r)
{
	if ((size_t)s.off + s.len > (size_t)r)
		__builtin_trap();
}

static void check_result(int r, const ab_http_req *q)
{
	if (r < 0) {
		if (!q->reason || !q->reason[0])
			__builtin_trap();
		for (const char *p = q->reason; *p; p++)
			if (*p < 0x20 || *p == 0x7f)
				__builtin_trap();
		switch (q->status) {
		case 400:
		case 414:
		case 417:
		case 431:
		case 501:
		case 505: break;
		default: __builtin_trap();
		}
		return;
	}
	if (r == 0)
		return;
	check_span(q->target, r);
	check_span(q->host, r);
	check_span(q->path, r);
	check_span(q->host_hdr, r);
	if (q->n_headers > AB_HTTP_MAX_HEADERS || (q->chunked && q->has_content_length))
		__builtin_trap();
	for (size_t i = 0; i < q->n_headers; i++) {
		check_span(q->headers[i].name, r);
		check_span(q->headers[i].value, r);
		if (q->headers[i].name.len == 0)
			__builtin_trap();
	}
	if (q->version_minor == 1 && !q->has_host)
		__builtin_trap();
}

static void check_head(const char *buf, size_t size, const ab_http_limits *lim)
{
	int r = ab_http_parse_head(buf, size, lim, &full);
	check_result(r, &full);
	size_t step = size > 2048 ? size / 512 : 1;
	for (size_t n = 0; n < size; n += step) {
		int k = ab_http_parse_head(buf, n, lim, &part);
		if (k == 0)
			continue;
		if (k != r)
			__builtin_trap();
		if (r < 0 && (part.status != full.status || strcmp(part.reason, full.reason) != 0))
			__builtin_trap();
		if (r > 0 && memcmp(&part, &full, sizeof(full)) != 0)
			__builtin_trap();
	}
}

static void check_sniff(const char *buf, size_t size)
{
	int whole = ab_http_sniff_request(buf, size, false);
	if (whole < -1 || whole > 1 || ab_http_sniff_request(buf, size, true) < 0)
		__builtin_trap();
	if (ab_http_parse_head(buf, size, NULL, &part) > 0 && whole != 1)
		__builtin_trap(); /* the parser would take it: never relayed unchecked */
	size_t step = size > 2048 ? size / 512 : 1;
	for (size_t n = 0; n < size; n += step) {
		int k = ab_http_sniff_request(buf, n, false);
		if ((k != -1 && k != whole) || ab_http_sniff_request(buf, n, true) < 0)
			__builtin_trap();
	}
}

static void check_chunk(const char *buf, size_t size)
{
	uint64_t sz = 0, sz2;
	size_t used = 0, used2;
	int r = ab_http_parse_chunk_size(buf, size, &sz, &used);
	if (r != 1 && r != 0 && r >= 0)
		__builtin_trap();
	if (r == 1 && (used > size || used > AB_HTTP_CHUNK_LINE_MAX || sz > AB_HTTP_CHUNK_SIZE_MAX))
		__builtin_trap();
	size_t lim = size < AB_HTTP_CHUNK_LINE_MAX + 2 ? size : AB_HTTP_CHUNK_LINE_MAX + 2;
	for (size_t n = 0; n < lim; n++) {
		int k = ab_http_parse_chunk_size(buf, n, &sz2, &used2);
		if (k != 0 && (k != r || (r == 1 && (sz2 != sz || used2 != used))))
			__builtin_trap();
	}
}

/* ------------------------------------------------------------- responses */

static ab_http_resp rfull, rpart;

static void check_reason(const char *reason)
{
	if (!reason || !reason[0])
		__builtin_trap();
	for (const char *p = reason; *p; p++)
		if (*p < 0x20 || *p == 0x7f)
			__builtin_trap();
}

static void check_resp_result(int r, const ab_http_resp *q)
{
	static const ab_http_method ms[] = {AB_HTTP_GET, AB_HTTP_HEAD, AB_HTTP_CONNECT,
					    AB_HTTP_POST, AB_HTTP_OTHER};
	if (r < 0) {
		check_reason(q->reason);
		if (q->status != 502)
			__builtin_trap();
		return;
	}
	if (r == 0)
		return;
	if (q->code < 100 || q->code > 599 || (q->version_minor != 0 && q->version_minor != 1))
		__builtin_trap();
	if (q->n_headers > AB_HTTP_MAX_HEADERS || (q->chunked && q->has_content_length))
		__builtin_trap();
	check_span(q->reason_phrase, r);
	for (size_t i = 0; i < q->n_headers; i++) {
		check_span(q->headers[i].name, r);
		check_span(q->headers[i].value, r);
		if (q->headers[i].name.len == 0)
			__builtin_trap();
	}
	if (q->body != ab_http_response_body(q, AB_HTTP_GET))
		__builtin_trap();
	check_span(q->content_coding, r);
	check_span(q->transfer_coding, r);
	for (size_t i = 0; i < sizeof(ms) / sizeof(ms[0]); i++) {
		ab_http_body_kind k = ab_http_response_body(q, ms[i]);
		if (k > AB_HTTP_BODY_TUNNEL)
			__builtin_trap();
		if (ms[i] == AB_HTTP_HEAD && k != AB_HTTP_BODY_NONE && q->code != 101)
			__builtin_trap();
		if (k == AB_HTTP_BODY_CHUNKED && !q->chunked)
			__builtin_trap();
	}
}

/* A recorded coding is one element: non-empty, no comma, not the no-op. */
static void check_coding(const char *buf, ab_http_span s, const char *noop)
{
	if (!s.len)
		return;
	if (memchr(buf + s.off, ',', s.len) ||
	    (s.len == strlen(noop) && strncasecmp(buf + s.off, noop, s.len) == 0))
		__builtin_trap();
}

static void check_resp(const char *buf, size_t size, const ab_http_limits *lim)
{
	int r = ab_http_parse_response_head(buf, size, lim, &rfull);
	check_resp_result(r, &rfull);
	if (r > 0) {
		check_coding(buf, rfull.content_coding, "identity");
		check_coding(buf, rfull.transfer_coding, "chunked");
	}
	size_t step = size > 2048 ? size / 512 : 1;
	for (size_t n = 0; n < size; n += step) {
		int k = ab_http_parse_response_head(buf, n, lim, &rpart);
		if (k == 0)
			continue;
		if (k != r)
			__builtin_trap();
		if (r < 0 &&
		    (rpart.status != rfull.status || strcmp(rpart.reason, rfull.reason) != 0))
			__builtin_trap();
		if (r > 0 && memcmp(&rpart, &rfull, sizeof(rfull)) != 0)
			__builtin_trap();
	}
}

/* ---------------------------------------------------------------- framer */

/* Feed buf in pieces: sizes cycle through steps[] (0 ends the list; a NULL
 * steps means one piece).  Returns the body's bytes or a negative errno. */
static long frame(ab_http_body_kind kind, uint64_t cl, const char *buf, size_t len,
		  const size_t *steps, bool *done)
{
	ab_http_framer f;
	size_t pos = 0, si = 0;

	ab_http_framer_init(&f, kind, cl);
	*done = false;
	do {
		size_t piece = len - pos;
		if (steps) {
			if (!steps[si])
				si = 0;
			if (steps[si] < piece)
				piece = steps[si];
			si++;
		}
		int n = ab_http_framer_feed(&f, buf + pos, piece, done);
		if (n < 0)
			return n;
		if ((size_t)n > piece || ((size_t)n < piece && !*done))
			__builtin_trap();
		pos += (size_t)n;
		if (*done)
			break;
	} while (pos < len);
	return (long)pos;
}

static bool f_tchar(unsigned char c)
{
	if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))
		return true;
	return c && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

static bool f_ctl(unsigned char c)
{
	return (c < 0x20 && c != '\t') || c == 0x7f;
}

/* Trailer section at b[pos..len), line by line: the end offset (done), len
 * (incomplete) or -EBADMSG, ignoring the size limit. */
static long ref_trailer(const unsigned char *b, size_t len, size_t pos, bool *done)
{
	unsigned count = 0;

	while (pos < len) {
		size_t e = pos;
		if (b[pos] == '\r') {
			if (pos + 1 == len)
				return (long)len;
			if (b[pos + 1] != '\n')
				return -EBADMSG;
			*done = true;
			return (long)pos + 2;
		}
		if (++count > AB_HTTP_TRAILER_MAX_FIELDS)
			return -EBADMSG;
		while (e < len && f_tchar(b[e]))
			e++;
		if (e == pos)
			return -EBADMSG;
		if (e == len)
			return (long)len;
		if (b[e++] != ':')
			return -EBADMSG;
		while (e < len && b[e] != '\r' && !f_ctl(b[e]))
			e++;
		if (e == len || (b[e] == '\r' && e + 1 == len))
			return (long)len;
		if (b[e] != '\r' || b[e + 1] != '\n')
			return -EBADMSG;
		pos = e + 2;
	}
	return (long)len;
}

/* A chunked body, whole-buffer style, on top of ab_http_parse_chunk_size. */
static long ref_chunked(const char *buf, size_t len, bool *done)
{
	const unsigned char *b = (const unsigned char *)buf;
	size_t pos = 0;
	uint64_t sz;
	size_t used;

	*done = false;
	for (;;) {
		int k = ab_http_parse_chunk_size(buf + pos, len - pos, &sz, &used);
		if (k <= 0)
			return k < 0 ? k : (long)len;
		pos += used;
		if (sz == 0)
			break;
		if (len - pos < sz)
			return (long)len;
		pos += sz;
		if (pos == len || (b[pos] == '\r' && pos + 1 == len))
			return (long)len;
		if (b[pos] != '\r' || b[pos + 1] != '\n')
			return -EBADMSG;
		pos += 2;
	}
	long r = ref_trailer(b, len, pos, done);
	if (r >= 0 && (size_t)r - pos > AB_HTTP_TRAILER_MAX_BYTES)
		return -EBADMSG; /* the framer fails on the byte past the limit */
	return r;
}

static void check_framer(const char *buf, size_t size, ab_http_body_kind kind, uint64_t cl)
{
	static const size_t one[] = {1, 0}, odd[] = {2, 3, 7, 1, 13, 64, 0};
	static const size_t big[] = {1000, 1, 0};
	bool done, d;
	long want = frame(kind, cl, buf, size, NULL, &done);

	if (want == -EINVAL || (want >= 0 && (size_t)want > size))
		__builtin_trap();
	if (frame(kind, cl, buf, size, one, &d) != want || (want >= 0 && d != done))
		__builtin_trap();
	if (frame(kind, cl, buf, size, odd, &d) != want || (want >= 0 && d != done))
		__builtin_trap();
	if (frame(kind, cl, buf, size, big, &d) != want || (want >= 0 && d != done))
		__builtin_trap();
	if (kind == AB_HTTP_BODY_CHUNKED) {
		long ref = ref_chunked(buf, size, &d);
		if (ref != want || (want >= 0 && d != done))
			__builtin_trap();
	}
}

/* ---------------------------------------------------------------- stream */

/* Messages one after another, as the proxy reads them from one connection. */
static void check_stream(const char *buf, size_t size, bool requests, unsigned sel)
{
	static const ab_http_method ms[] = {AB_HTTP_GET, AB_HTTP_HEAD, AB_HTTP_CONNECT,
					    AB_HTTP_POST};
	size_t pos = 0;

	for (unsigned i = 0; i < 16 && pos < size; i++) {
		ab_http_body_kind kind;
		uint64_t cl;
		int r;
		if (requests) {
			r = ab_http_parse_head(buf + pos, size - pos, NULL, &full);
			check_result(r, &full);
			kind = full.chunked              ? AB_HTTP_BODY_CHUNKED
			       : full.has_content_length ? AB_HTTP_BODY_LENGTH
							 : AB_HTTP_BODY_NONE;
			cl = full.content_length;
		} else {
			r = ab_http_parse_response_head(buf + pos, size - pos, NULL, &rfull);
			check_resp_result(r, &rfull);
			kind = ab_http_response_body(&rfull, ms[((sel >> 3) + i) & 3]);
			cl = rfull.content_length;
		}
		if (r <= 0)
			return;
		pos += (size_t)r;
		check_framer(buf + pos, size - pos, kind, cl);
		bool done;
		long n = frame(kind, cl, buf + pos, size - pos, NULL, &done);
		if (n < 0 || !done)
			return;
		pos += (size_t)n;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const ab_http_limits tiny = {.max_head = 200, .max_headers = 4, .max_line = 64};
	const char *buf = (const char *)data + 1;

	if (size-- == 0)
		return 0;
	switch (data[0] & 3) {
	case 0:
		check_head(buf, size, NULL);
		check_head(buf, size, &tiny);
		check_chunk(buf, size);
		check_sniff(buf, size);
		break;
	case 1:
		check_resp(buf, size, NULL);
		check_resp(buf, size, &tiny);
		break;
	case 2: check_framer(buf, size, AB_HTTP_BODY_CHUNKED, 0); break;
	default: check_stream(buf, size, data[0] & 4, data[0]); break;
	}
	return 0;
}
