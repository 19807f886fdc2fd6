/* SPDX-License-Identifier: MIT */
/*
 * wsframe.h: the frames of a WebSocket stream from the server (RFC 6455,
 * section 5.2), so the egress proxy can mask real values in their payloads
 * on intercepted connections (src/egress/pxtls.c).  Pure, streaming, fuzzed
 * (tests/fuzz/fuzz_wsframe.c).
 *
 * The stream is cut into pieces: frame-head bytes, which pass as they are,
 * and payload bytes, which go through the masking scanner.  The scanner is
 * length-preserving, so the frames' lengths stay right; the proxy releases
 * what it holds at the end of each frame that ends a message (FIN), so a
 * value split across the fragments of one message is still found, and a
 * whole message is never held back waiting for the next one.
 *
 * Refused (-EPROTO; the proxy closes the connection, since it could not see
 * the payload): a masked frame (servers never mask), a reserved bit set (an
 * extension such as permessage-deflate, which the proxy does not let the
 * client offer), a 64-bit length with its top bit set.
 */
#ifndef AGENTBOX_WSFRAME_H
#define AGENTBOX_WSFRAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct ab_ws_framer {
	uint8_t hdr[10]; /* the frame head so far (no mask key: refused) */
	uint8_t hn;      /* bytes of it seen */
	uint64_t left;   /* payload bytes left of the current frame */
	bool in_payload;
	bool fin;        /* the current frame (head complete) ends its message:
			    FIN set (control frames always have it) */
	uint64_t len;    /* the current frame's payload length (head complete) */
	uint64_t frames; /* frames seen whole (head and payload) */
} ab_ws_framer;

/* Piece kinds: a part of a head, the last part of a head (FIN and LEN are
 * set from then on), payload, the last payload byte(s) of a frame. */
enum { AB_WS_HEAD = 1, AB_WS_HEAD_END, AB_WS_DATA, AB_WS_DATA_END };

/* The next piece of P[0..N): sets *KIND (AB_WS_*) and returns its length
 * (> 0), 0 when N is 0, or -EPROTO (see above; the framer is then stuck). */
ssize_t ab_ws_next(ab_ws_framer *f, const uint8_t *p, size_t n, int *kind);

#endif
