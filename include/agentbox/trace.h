/* SPDX-License-Identifier: MIT */
/*
 * `run --trace`: kernel tracing with libbpf (parent).  CO-RE BPF programs
 * (bpf/trace.bpf.c, built with clang and bpftool, skeleton in
 * $(BUILD)/bpf/trace.skel.h) record the sandbox's own processes only - those
 * in its pid namespace - into one ring buffer: programs started, connect(2)
 * attempts with their result, and file operations refused with EACCES/EPERM
 * (Landlock, mount flags, permissions).  The parent turns each record into an
 * audit event (docs/audit.md, "Kernel tracing").  Loading and attaching needs
 * root, or CAP_BPF and CAP_PERFMON; an agentbox built without clang/bpftool/
 * BTF has no tracing at all (AB_HAVE_TRACE=0) and says so.
 */
#ifndef AGENTBOX_TRACE_H
#define AGENTBOX_TRACE_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "agentbox/common.h"

/* run --trace[=best-effort] (struct ab_cli.trace, ab_plan.trace) */
enum ab_trace_mode {
	AB_TRACE_OFF = 0,
	AB_TRACE_STRICT,      /* --trace: no tracing, no run (exit 125) */
	AB_TRACE_BEST_EFFORT, /* --trace=best-effort: a warning, then the run without it */
};

/* A sandbox can fail opens or connects in a tight loop: past this rate (per
 * kind, a token bucket) records are counted, not written ("suppressed" at
 * the end); programs started are never limited.  One poll turns at most
 * AB_TRACE_POLL_BUDGET records into events, so the rest of the event loop
 * (terminal, proxy) is not starved. */
#define AB_TRACE_RATE_PER_S 100
#define AB_TRACE_RATE_BURST 1000
#define AB_TRACE_POLL_BUDGET 1024

#define AB_TRACE_NEEDS_BUILD                                                     \
	"this agentbox was built without BPF tracing (needs clang, bpftool and " \
	"/sys/kernel/btf/vmlinux at build time)"

struct ab_audit;
typedef struct ab_trace ab_trace;

/* What a run recorded, for the exit summary. */
typedef struct ab_trace_counts {
	uint64_t execs;           /* programs started */
	uint64_t connects;        /* connect() calls returned */
	uint64_t connects_failed; /* ... with an error other than EINPROGRESS */
	uint64_t file_denied;     /* file operations refused with EACCES/EPERM */
	uint64_t sys_denied;      /* call sites the seccomp filter failed (first calls) */
	uint64_t lost;            /* records the ring buffer had no room for */
	uint64_t malformed;       /* records that did not parse (never expected) */
	uint64_t suppressed_file, suppressed_connect; /* over the rate: counted only */
	uint64_t suppressed_sys;                      /* denied-syscall lines over the rate */
} ab_trace_counts;

/* 0 when this agentbox can trace here; else -errno and a message naming
 * exactly what is missing (the build, the kernel's BTF, CAP_BPF and/or
 * CAP_PERFMON). */
int ab_trace_check(ab_err *err);

/* The libbpf linked in ("v1.1"), NULL in a build without tracing. */
const char *ab_trace_libbpf_version(void);
/* Load and attach the programs for the sandbox whose init is SANDBOX_PID
 * (just cloned: nothing of it has run yet).  AUDIT is borrowed and must
 * outlive the tracer.  DENIALS: also record the seccomp filter's denials
 * (when the kernel takes that part: see ab_trace_records_denials).  Errors
 * are one ab_err (libbpf itself stays quiet unless AGENTBOX_DEBUG is set). */
int ab_trace_start(pid_t sandbox_pid, struct ab_audit *audit, bool denials, ab_trace **out,
		   ab_err *err);
/* The ring buffer's epoll fd (readable when records wait): for the loop. */
int ab_trace_fd(const ab_trace *t);
/* Does the tracer record the seccomp filter's denials?  Then the filter
 * answers them itself, without user notification (src/sandbox/sandbox.c). */
bool ab_trace_records_denials(const ab_trace *t);
/* Turn every waiting record into an audit event. */
void ab_trace_poll(ab_trace *t);
void ab_trace_get_counts(const ab_trace *t, ab_trace_counts *out);
/* Final drain, detach, "trace-lost" if the buffer overflowed; NULL is fine. */
void ab_trace_free(ab_trace *t);

/* ---- pure pieces (src/observe/trace_event.c), exposed for the tests ---- */

/* One ring-buffer record (struct ab_trace_ev, include/agentbox/trace_event.h)
 * of LEN bytes -> a new audit event, counted in *c; NULL (counted as
 * malformed) when it is not a well-formed record. */
json_t *ab_trace_event_json(const void *rec, size_t len, ab_trace_counts *c);
/* A connect() address as the sandbox passed it -> family name ("inet",
 * "inet6", "unix"), printable address (UTF-8 not guaranteed: unix paths are
 * raw bytes) and port (0 for unix).  -EINVAL for another family or an
 * address too short for its family. */
int ab_trace_sockaddr(const void *sa, size_t len, const char **family, char *addr, size_t addr_size,
		      unsigned *port);
/* Arbitrary bytes -> a JSON string: valid UTF-8 as is, each invalid byte and
 * each NUL as U+FFFD (jansson refuses invalid UTF-8; many readers refuse
 * "\u0000").  NULL only on ENOMEM. */
json_t *ab_trace_json_bytes(const void *s, size_t n);

#endif
