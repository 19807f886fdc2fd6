/* SPDX-License-Identifier: MIT */
/*
 * OTLP/HTTP export of the audit events (run --otlp URL): every event the
 * audit log gets (src/observe/audit.c) also goes, as an OpenTelemetry log record, to
 * a collector the user names.  JSON encoding (application/json) POSTed to
 * the collector's logs endpoint by a thread of agentbox's parent, in
 * batches (once a second, or at 512 records), from the host's network
 * namespace: nothing inside the sandbox can reach or steer it.  Memory is
 * bounded: records beyond AB_OTLP_MAX_PENDING wait nowhere and are counted
 * as dropped; a collector that fails a batch loses it (counted, no retry).
 * docs/audit.md ("OTLP export").
 */
#ifndef AGENTBOX_OTLP_H
#define AGENTBOX_OTLP_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "agentbox/common.h"

#define AB_OTLP_BATCH 512        /* records per request */
#define AB_OTLP_MAX_PENDING 8192 /* records waiting; more are dropped */
#define AB_OTLP_FLUSH_MS 1000    /* a partial batch goes after this long */
#define AB_OTLP_TIMEOUT_MS 3000  /* connect, send, and the answer, each */
#define AB_OTLP_HEAD_MAX 8192    /* the collector's response head */

typedef struct ab_otlp_url {
	char host[256]; /* a name, an IPv4 address or an IPv6 one (no brackets) */
	char port[6];
	char path[512]; /* "/v1/logs" when the URL has none */
} ab_otlp_url;

/* Pure: "http://HOST[:PORT][/PATH]".  https, userinfo, a query or a fragment
 * are refused with a reason (err). */
int ab_otlp_parse_url(const char *url, ab_otlp_url *out, ab_err *err);

/* Pure: an audit event (with "ts" and "event") as an OTLP LogRecord
 * (new reference; NULL: out of memory).  AT is when it was written; BODY
 * the line as the log has it (NULL: encoded here). */
json_t *ab_otlp_record(const json_t *line, const char *body, const struct timespec *at);

typedef struct ab_otlp ab_otlp;

typedef struct ab_otlp_stats {
	uint64_t sent;    /* records the collector took (2xx) */
	uint64_t failed;  /* records of batches it refused or that did not reach it */
	uint64_t dropped; /* records beyond the pending limit */
	char last_error[160];
} ab_otlp_stats;

/* Resolve the collector (before the sandbox starts).  PROFILE names the
 * run's profile (a resource attribute).  Events queue until ab_otlp_run. */
int ab_otlp_new(const char *url, const char *profile, ab_otlp **out, ab_err *err);
/* Start the exporter thread: only after the last fork or clone of this
 * process (a child of a threaded process may inherit a lock held by the
 * thread, e.g. malloc's, and hang on it). */
int ab_otlp_run(ab_otlp *o, ab_err *err);
/* Queue one event (any thread; copies what it needs). */
void ab_otlp_push(ab_otlp *o, const json_t *line, const char *body, const struct timespec *at);
/* Send what is queued (bounded by the timeouts), stop the thread, free. */
void ab_otlp_finish(ab_otlp *o, ab_otlp_stats *stats);

#endif
