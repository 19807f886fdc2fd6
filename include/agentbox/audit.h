/* SPDX-License-Identifier: MIT */
/*
 * The audit log and the exit summary (parent).  One JSON object per line
 * (jansson), each with "ts" (UTC, RFC 3339 with milliseconds) and "event".
 * The run owns it (src/sandbox/sandbox.c); the proxy (network), the supervisor
 * (commands, syscall denials) and the tracer write to it.  Callers never pass
 * a secret or a URL query; strings are capped.  docs/audit.md has the schema.
 */
#ifndef AGENTBOX_AUDIT_H
#define AGENTBOX_AUDIT_H

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>

#include "agentbox/common.h"

#define AB_AUDIT_MAX_HOSTS 512     /* distinct host:port kept for the summary */
#define AB_AUDIT_MAX_DENIALS 256   /* distinct (category, what, comm) kept for the summary */
#define AB_AUDIT_MAX_ELSEWHERE 256 /* distinct (secret, host:port) kept for the summary */

typedef struct ab_audit ab_audit;

/* path NULL: no log, summary only.  The file is opened O_APPEND|O_CREAT
 * (0600, no symlink followed) before the sandbox starts. */
int ab_audit_open(const char *path, ab_audit **out, ab_err *err);
/* Also send every event to the OTLP/HTTP collector at URL (run --otlp;
 * src/observe/otlp.c).  At free, what is still queued is sent, and a warning says how
 * many events did not reach the collector. */
int ab_audit_export(ab_audit *a, const char *url, const char *profile, ab_err *err);
/* Start sending (a thread: after the last fork; until then events queue). */
int ab_audit_export_run(ab_audit *a, ab_err *err);
/* Do the events go anywhere (a log file, a collector)? */
bool ab_audit_recording(const ab_audit *a);
void ab_audit_free(ab_audit *a);

/* Write one event (adds "ts"; steals the reference).  No-op without a log
 * or a collector. */
void ab_audit_emit(ab_audit *a, json_t *ev);

/* Summary bookkeeping: one connection or request to host:port. */
void ab_audit_count(ab_audit *a, const char *host, unsigned port, bool allowed, uint64_t up,
		    uint64_t down);
void ab_audit_count_dns_denied(ab_audit *a, const char *name);

/* Summary bookkeeping: N denials of WHAT (a syscall name, a path) by COMM in
 * CATEGORY ("syscall", "file"); N commands recorded. */
void ab_audit_count_denial(ab_audit *a, const char *category, const char *what, const char *comm,
			   uint64_t n);
void ab_audit_count_exec(ab_audit *a, uint64_t n);

/* Summary bookkeeping: one request carried secret SECRET's placeholder on,
 * unchanged, to HOST:PORT, which the secret is not bound to.  Returns 1 the
 * first time for that (secret, host, port): the caller writes the
 * placeholder-elsewhere event; 0 after that; -1 when AB_AUDIT_MAX_ELSEWHERE
 * pairs are already kept (counted for the summary as "more"; the caller
 * counts the event as suppressed). */
int ab_audit_count_elsewhere(ab_audit *a, const char *secret, const char *host, unsigned port);

/* One screen: commands recorded, denials by category, placeholders sent on
 * to hosts they are not bound to, hosts reached (requests, bytes), refused
 * attempts. */
void ab_audit_summary(const ab_audit *a, FILE *out);

#endif
