/* SPDX-License-Identifier: MIT */
/*
 * Message bodies through a secrets scanner (parent, egress proxy): request
 * bodies of brokered hosts (placeholders swapped or refused) and responses
 * of intercepted hosts (real values masked).  Chunked bodies are decoded,
 * their payload scanned, and re-chunked, so a value split across chunks is
 * still found (the chunk framing was already checked by ab_http_framer).
 * The scanner is length-preserving; what it holds back (a possible start of
 * a match) comes out with the next bytes or at the end.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proxy_int.h"

enum { DC_SIZE, DC_DATA, DC_DATA_END, DC_TRAILER };

void px_scan_begin(px_scanpass *sp, ab_scanner *s, bool chunked)
{
	memset(sp, 0, sizeof(*sp));
	sp->s = s;
	sp->chunked = chunked;
	sp->st = DC_SIZE;
}

/* Scanner output for n input bytes, written straight into DST (no copy in
 * between); plain bodies as is, chunked ones as a chunk of their own.
 * Returns 0, -EACCES (a BLOCK pattern) or -ENOMEM; then DST is as before. */
static int feed(px_scanpass *sp, const char *p, size_t n, bool flush, px_buf *dst, ab_scan_hit *hit)
{
	char hdr[24];
	size_t room = sp->chunked ? sizeof(hdr) : 0, need = n + ab_scanner_pending(sp->s);
	if (need > SIZE_MAX / 2 || px_buf_reserve(dst, dst->len + room + need + 2) < 0)
		return -ENOMEM;
	char *o = dst->p + dst->len + room;
	size_t len = need, more = 0;
	int r = n ? ab_scanner_feed(sp->s, p, n, o, &len, hit) : (len = 0, 0);
	if (r >= 0 && !hit->blocked && flush) {
		more = need - len;
		r = ab_scanner_flush(sp->s, o + len, &more, hit);
		len += more;
	}
	if (r < 0 || hit->blocked) {
		explicit_bzero(o, need);
		return hit->blocked ? -EACCES : -ENOMEM;
	}
	if (!len)
		return 0;
	if (sp->chunked) {
		int hn = snprintf(hdr, sizeof(hdr), "%zx\r\n", len);
		memcpy(dst->p + dst->len, hdr, (size_t)hn);
		memmove(dst->p + dst->len + hn, o, len);
		len += (size_t)hn;
		memcpy(dst->p + dst->len + len, "\r\n", 2);
		len += 2;
		/* what the move left behind: the held bytes never linger */
		explicit_bzero(dst->p + dst->len + len, room - (size_t)hn);
	}
	dst->len += len;
	return 0;
}

static uint64_t hexsize(const char *line, size_t n)
{
	uint64_t v = 0;
	for (size_t i = 0; i < n; i++) {
		char ch = line[i];
		int d = ch >= '0' && ch <= '9'   ? ch - '0'
			: ch >= 'a' && ch <= 'f' ? ch - 'a' + 10
			: ch >= 'A' && ch <= 'F' ? ch - 'A' + 10
						 : -1;
		if (d < 0)
			break;
		v = v * 16 + (uint64_t)d;
	}
	return v;
}

int px_scan_pass(px_scanpass *sp, const char *p, size_t n, bool done, px_buf *dst, ab_scan_hit *hit)
{
	if (!sp->chunked)
		return feed(sp, p, n, done, dst, hit);
	size_t i = 0;
	while (i < n) {
		switch (sp->st) {
		case DC_SIZE: {
			const char *nl = memchr(p + i, '\n', n - i);
			size_t take = nl ? (size_t)(nl - (p + i)) + 1 : n - i;
			size_t room = sizeof(sp->line) - sp->ll;
			memcpy(sp->line + sp->ll, p + i, take < room ? take : room);
			sp->ll += take < room ? take : room;
			i += take;
			if (!nl)
				break;
			sp->left = hexsize(sp->line, sp->ll);
			sp->ll = 0;
			if (sp->left == 0) { /* last chunk: release what is held, then 0 */
				int r = feed(sp, NULL, 0, true, dst, hit);
				if (r < 0)
					return r;
				if (px_buf_append(dst, "0\r\n", 3) < 0)
					return -ENOMEM;
				sp->st = DC_TRAILER;
			} else {
				sp->st = DC_DATA;
			}
			break;
		}
		case DC_DATA: {
			size_t m = n - i < sp->left ? n - i : (size_t)sp->left;
			int r = feed(sp, p + i, m, false, dst, hit);
			if (r < 0)
				return r;
			i += m;
			sp->left -= m;
			if (!sp->left)
				sp->st = DC_DATA_END;
			break;
		}
		case DC_DATA_END: { /* the CRLF after a chunk's data */
			const char *nl = memchr(p + i, '\n', n - i);
			i = nl ? (size_t)(nl - p) + 1 : n;
			if (nl)
				sp->st = DC_SIZE;
			break;
		}
		default: /* trailer fields and the final CRLF, as they came */
			if (px_buf_append(dst, p + i, n - i) < 0)
				return -ENOMEM;
			i = n;
			break;
		}
	}
	return 0;
}
