/* SPDX-License-Identifier: MIT */
/*
 * `agentbox report LOG [--json]`: an audit log (JSON lines, docs/audit.md)
 * turned into a session report.  A pure aggregator (lines in, model out) and
 * two renderers (text for a terminal, one JSON object for tools).
 *
 * Every string in a log may come from inside the sandbox (argv, paths, host
 * names, comm): the aggregator caps them, and the text renderer prints them
 * only through ab_report_sanitize.  Malformed lines are counted, never fatal;
 * memory is bounded by the limits below (beyond them, events are counted as
 * dropped and the report says so).  "warning" events (agentbox's findings
 * after a run, such as a nested git repository it left) come first in both
 * reports.
 */
#ifndef AGENTBOX_REPORT_H
#define AGENTBOX_REPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "agentbox/common.h"

#define AB_REPORT_MAX_LINE (1u << 20)    /* bytes per line; longer lines are bad lines */
#define AB_REPORT_MAX_ITEMS 1000000u     /* commands + distinct keys + policy changes */
#define AB_REPORT_MAX_BYTES (128u << 20) /* distinct strings kept, in bytes */
#define AB_REPORT_ARGV_MAX 64            /* argv entries kept per command */
#define AB_REPORT_ARG_MAX 256            /* bytes per argv entry */
#define AB_REPORT_STR_MAX 4096           /* bytes per path, cwd, host, reason... */
#define AB_REPORT_LINES 200              /* command lines the text report prints */

typedef struct ab_report ab_report;

typedef struct ab_report_limits {
	size_t max_line;  /* 0 = AB_REPORT_MAX_LINE */
	size_t max_items; /* 0 = AB_REPORT_MAX_ITEMS */
	size_t max_bytes; /* 0 = AB_REPORT_MAX_BYTES */
	uint64_t seed;    /* hash seed; 0 = random (getrandom) */
} ab_report_limits;

/* limits NULL: the defaults.  -ENOMEM on failure. */
int ab_report_new(const ab_report_limits *limits, ab_report **out);
void ab_report_free(ab_report *r);

/* Feed bytes of the log, split anywhere; ab_report_end() takes the last line
 * when it has no '\n'.  Content never fails: a line that is not an event is
 * counted.  Returns 0, or -ENOMEM (the model is then incomplete). */
int ab_report_feed(ab_report *r, const char *buf, size_t len);
int ab_report_end(ab_report *r);
/* One line without its '\n' (a trailing '\r' is ignored). */
int ab_report_feed_line(ab_report *r, const char *line, size_t len);

/* Counters, for the caller's decisions and for tests. */
typedef struct ab_report_counts {
	uint64_t lines;     /* lines seen, blank ones included */
	uint64_t events;    /* lines read as events (known or not) */
	uint64_t bad_lines; /* not JSON, not an object, no "event", wrong types, too long */
	uint64_t first_bad; /* line number of the first bad line (0: none) */
	uint64_t unknown;   /* events of kinds this version does not know (ignored) */
	uint64_t dropped;   /* events not kept: AB_REPORT_MAX_ITEMS/BYTES reached */
	uint64_t warnings;  /* "warning" events (kept or not) */
	size_t sessions, commands;
} ab_report_counts;
void ab_report_counts_get(const ab_report *r, ab_report_counts *out);

typedef struct ab_report_opts {
	const char *source; /* shown in the header (the log's path); may be NULL */
	size_t max_lines;   /* command lines printed; 0 = AB_REPORT_LINES */
} ab_report_opts;

/* Renderers.  Return 0, or -EIO when writing failed. */
int ab_report_text(const ab_report *r, const ab_report_opts *o, FILE *out);
int ab_report_json(const ab_report *r, const ab_report_opts *o, FILE *out);

/* Write s (n bytes; NUL ends it early) for a terminal: control characters,
 * ESC, DEL, C1 controls, bidirectional-override and line-separator code
 * points and invalid UTF-8 as \xNN per byte, a backslash as \\.  At most
 * max_cols characters (0 = no limit); a longer string ends in "...".
 * Returns the number of columns written. */
size_t ab_report_sanitize(FILE *out, const char *s, size_t n, size_t max_cols);

/* The command: open LOG (a regular file, opened without blocking), feed it,
 * render to out.  Returns 0, or AB_EXIT_FAIL with err set (missing, not a
 * regular file, unreadable, not an audit log at all, write error). */
int ab_report_file(const char *path, bool json, FILE *out, ab_err *err);

#endif
