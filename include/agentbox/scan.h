/* SPDX-License-Identifier: MIT */
/*
 * The length-preserving streaming multi-pattern scanner (src/creds/scan.c):
 * a compiled set of byte patterns, each replaced by bytes of the same length
 * or BLOCKing the stream.  It knows nothing of secrets (secrets.h builds its
 * sets from them), so it sits below them:
 *
 *   - ab_scanner over an ab_scan_set replaces every match by bytes of the
 *     same length, holds back only a possible partial match, and stops
 *     before a BLOCK pattern: the caller aborts the message.
 *   - Feed it payload bytes (de-chunked) and re-frame its output; it cannot
 *     see into coded bodies.
 */
#ifndef AGENTBOX_SCAN_H
#define AGENTBOX_SCAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agentbox/common.h"

#define AB_SCAN_MAX_PATTERNS 1024
#define AB_SCAN_MAX_PATTERN_LEN (16 * 1024) /* secrets.h: an encoded secret value fits */
#define AB_SCAN_MAX_TOTAL (1024 * 1024)     /* bytes over all patterns */

typedef enum ab_scan_action {
	AB_SCAN_REPLACE = 0, /* replace by repl (or a run of '*') */
	AB_SCAN_BLOCK = 1,   /* stop the stream, report the hit */
} ab_scan_action;

typedef struct ab_scan_pattern {
	const char *bytes;
	size_t len;       /* 1..AB_SCAN_MAX_PATTERN_LEN */
	const char *repl; /* REPLACE: LEN bytes, or NULL for LEN '*' */
	ab_scan_action action;
	unsigned id; /* the caller's tag, reported in hits */
} ab_scan_pattern;

typedef struct ab_scan_set ab_scan_set; /* compiled patterns, immutable */

/* Compile (copies everything).  A duplicate pattern is kept once (BLOCK wins
 * over REPLACE, else the first).  -EINVAL (empty pattern), -E2BIG (limits
 * above), -ENOMEM; *err set. */
int ab_scan_set_new(const ab_scan_pattern *pats, size_t n, ab_scan_set **out, ab_err *err);
void ab_scan_set_free(ab_scan_set *set); /* wipes the copies */
size_t ab_scan_set_count(const ab_scan_set *set);
size_t ab_scan_set_maxlen(const ab_scan_set *set);

typedef struct ab_scan_slot {
	uint64_t start; /* stream offset of the covering match */
	int32_t pat;    /* its pattern, -1: not covered */
	char byte;      /* the input byte */
} ab_scan_slot;

/* One stream.  The fields are private. */
typedef struct ab_scanner {
	const ab_scan_set *set; /* not owned: must outlive the scanner */
	uint32_t state;
	uint64_t pos;       /* stream offset of the next input byte */
	size_t pending;     /* bytes held back */
	ab_scan_slot *ring; /* capacity: the longest pattern */
	size_t *counts;     /* matches per pattern */
	bool blocked;
} ab_scanner;

typedef struct ab_scan_hit {
	size_t replaced; /* matches replaced during this call */
	bool blocked;    /* a BLOCK pattern matched (the call returned 1) */
	size_t pattern;  /* its index in the set */
	unsigned id;     /* its id */
	uint64_t offset; /* stream offset of its first byte */
} ab_scan_hit;

/* 0 or -ENOMEM. */
int ab_scanner_init(ab_scanner *s, const ab_scan_set *set);
void ab_scanner_free(ab_scanner *s); /* wipes the held bytes */
/* Bytes currently held back. */
size_t ab_scanner_pending(const ab_scanner *s);
/* Matches of pattern I so far (0 for an out-of-range I). */
size_t ab_scanner_count(const ab_scanner *s, size_t i);

/*
 * Scan IN[0..N).  *OUTLEN: on entry the capacity of OUT, which must be at
 * least N + ab_scanner_pending(s) (else -ENOBUFS, nothing consumed); on
 * return the bytes written.  OUT may be the same buffer as IN only when
 * nothing is pending (right after init or flush).  HIT may be NULL.
 * Returns 0, 1 when a BLOCK pattern matched (HIT says which; the scanner is
 * then dead: later calls return -EPIPE), or -errno.
 */
int ab_scanner_feed(ab_scanner *s, const char *in, size_t n, char *out, size_t *outlen,
		    ab_scan_hit *hit);
/* End of message: release the held bytes (at most the longest pattern - 1)
 * and reset the match state (counts are kept).  *OUTLEN as above. */
int ab_scanner_flush(ab_scanner *s, char *out, size_t *outlen, ab_scan_hit *hit);

#endif
