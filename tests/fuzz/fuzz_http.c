/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target (any process; fuzzing only): the HTTP/1.1 request-head
 * parser and the chunk-size parser on arbitrary bytes, with the default
 * limits and with tiny ones.  Properties checked beyond "no crash, no UB":
 * resumability (every prefix gives 0 or exactly the final answer, so feeding
 * byte by byte equals one shot), spans stay inside the consumed head, an
 * error always carries a known status and a printable reason, and a success
 * never reports both chunked and Content-Length.
 */
#include "agentbox/http.h"

#include <stdint.h>
#include <string.h>

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
		case 400: case 414: case 417: case 431: case 501: case 505: break;
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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const ab_http_limits tiny = { .max_head = 200, .max_headers = 4, .max_line = 64 };
	const char *buf = (const char *)data;

	check_head(buf, size, NULL);
	check_head(buf, size, &tiny);
	check_chunk(buf, size);
	return 0;
}
