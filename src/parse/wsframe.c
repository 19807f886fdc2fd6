/* SPDX-License-Identifier: MIT */
/* WebSocket frames from a server (see include/agentbox/wsframe.h). */
#include "agentbox/wsframe.h"

#include <errno.h>
#include <string.h>

/* Head length once its second byte is known: 2, 4 or 10. */
static size_t head_len(const ab_ws_framer *f)
{
	if (f->hn < 2)
		return 2;
	uint8_t l7 = f->hdr[1] & 0x7f;
	return l7 == 126 ? 4 : l7 == 127 ? 10 : 2;
}

ssize_t ab_ws_next(ab_ws_framer *f, const uint8_t *p, size_t n, int *kind)
{
	if (!n)
		return 0;
	if (f->in_payload) {
		size_t m = (uint64_t)n < f->left ? n : (size_t)f->left;
		f->left -= m;
		*kind = f->left ? AB_WS_DATA : AB_WS_DATA_END;
		if (!f->left) {
			f->in_payload = false;
			f->frames++;
		}
		return (ssize_t)m;
	}
	size_t used = 0;
	while (used < n && f->hn < head_len(f)) {
		f->hdr[f->hn++] = p[used++];
		if (f->hn == 1 && (f->hdr[0] & 0x70))
			return -EPROTO; /* RSV1-3: an extension (compression) */
		if (f->hn == 2 && (f->hdr[1] & 0x80))
			return -EPROTO; /* masked by the server */
	}
	*kind = AB_WS_HEAD;
	if (f->hn < head_len(f))
		return (ssize_t)used; /* the rest of the head comes later */
	*kind = AB_WS_HEAD_END;
	uint8_t l7 = f->hdr[1] & 0x7f;
	uint64_t len = l7;
	if (l7 == 126) {
		len = (uint64_t)f->hdr[2] << 8 | f->hdr[3];
	} else if (l7 == 127) {
		len = 0;
		for (int i = 2; i < 10; i++)
			len = len << 8 | f->hdr[i];
		if (len >> 63)
			return -EPROTO;
	}
	f->hn = 0;
	f->fin = f->hdr[0] & 0x80;
	f->len = len;
	f->left = len;
	f->in_payload = len > 0;
	if (!len)
		f->frames++;
	return (ssize_t)used;
}
