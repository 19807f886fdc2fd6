/* SPDX-License-Identifier: MIT */
/*
 * Internals shared by the files of `agentbox report` (parent; pure):
 *   report.c        the model: strings, the aggregate map, budgets, time
 *                   stamps, feeding lines, the sort order, the command
 *   report_event.c  one audit event into the model
 *   report_text.c   the text report (every string through the sanitizer)
 *   report_json.c   the JSON report
 * Strings in the model are interned: equal strings are the same pointer.
 */
#ifndef AGENTBOX_REPORT_INT_H
#define AGENTBOX_REPORT_INT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "agentbox/report.h"

#define NONE UINT32_MAX
#define TS_NONE INT64_MIN

typedef struct pstr {
	size_t len;
	char s[];
} pstr;

typedef struct tent {
	uint64_t k[5];
	uint32_t v; /* NONE: free slot */
} tent;

enum {
	K_PID = 1,
	K_REACHED,
	K_REFUSED,
	K_DNS,
	K_SYS,
	K_SYSPID,
	K_FILE,
	K_NET,
	K_OTHER,
	K_SECRET,
	K_SKIPPED,
	K_WARN,
	K_CRED
};

typedef struct session {
	const char *profile;
	const char **grants;
	size_t ngrants;
	bool grants_cut, has_start, has_end;
	int64_t start_ms, end_ms, first_ms, last_ms;
	int64_t proxy;   /* -1: not said */
	int64_t status;  /* "end" status: the run's exit status; -1 not said */
	int transparent; /* -1: not said */
} session;

typedef struct cmd {
	uint32_t session, parent, first_child, last_child, next;
	int32_t pid, ppid;
	const char *cwd, *path;
	const char **argv;
	uint32_t argc;
	bool truncated, exited, replaced;
	bool has_status, has_signal;
	int64_t status, sig;
	int64_t exec_ms, ms; /* ms: run time, -1 unknown */
} cmd;

typedef struct agg {
	const char *a, *b, *c, *d; /* by kind: see the K_* handlers */
	uint32_t port;
	uint64_t n, up, down, m; /* n: count/requests; m: secrets' masked count */
	uint64_t e;              /* secrets: requests that carried the placeholder on
				      unchanged to a host it is not bound to */
} agg;

typedef struct syspid {
	uint32_t agg;
	uint64_t first, rep;
} syspid;

typedef struct policy {
	uint32_t session;
	int64_t ts, by_pid;
	const char *action, *rule, *by; /* by: "ask:run", "ask:always" */
} policy;

/* run --ask: one answer (its question's host, port, request, program) */
typedef struct askrec {
	uint32_t session;
	int64_t ts, port, waited_ms; /* -1: not said */
	const char *host, *request, *program, *answer, *profile, *note;
} askrec;

/* paths of a "review" event's list, with their reasons (left out, failed) */
typedef struct pathlist {
	const char **path, **why;
	uint32_t n;
	int64_t total; /* the event's n_*; -1: not said */
} pathlist;

/* run --ask's offer at exit of the paths the sandbox was refused
 * creating: one answer, with the paths (and their programs) and the
 * profile lines offered */
typedef struct pathaskrec {
	uint32_t session;
	int64_t ts, waited_ms; /* -1: not said */
	const char *answer, *profile, *note;
	pathlist paths, lines;
} pathaskrec;

/* run --review's steps: the run ("held"), review, apply, discard */
typedef struct revrec {
	uint32_t session;
	int64_t ts, changes, added, modified, deleted, pending, status; /* -1: not said */
	int diff;                                                       /* -1: not said */
	bool incomplete;
	const char *action, *workspace, *change_set;
	pathlist applied, left_out, failed;
} revrec;

#define VEC(T)                 \
	struct {               \
		T *v;          \
		size_t n, cap; \
	}

struct ab_report {
	ab_report_limits lim;
	uint64_t key[2];
	bool oom;
	/* line assembly */
	char *line;
	size_t llen;
	bool skipping; /* inside an over-long line */
	/* budgets */
	size_t items, bytes;
	/* strings */
	pstr **pool;
	size_t pool_cap, pool_n;
	/* aggregates */
	tent *map;
	size_t map_cap, map_n;
	VEC(session) ses;
	uint32_t cur;
	VEC(cmd) cmds;
	uint32_t first_root, last_root;
	VEC(agg) reached, refused, dns, sys, file, net, other, secrets, skipped;
	VEC(agg) warns; /* a: kind, b: message, port: session; first-seen order */
	VEC(agg) creds; /* a: path, b: reason, port: 0 saved, 1 refused */
	VEC(syspid) syspids;
	VEC(policy) pol;
	VEC(askrec) asks;
	VEC(revrec) revs;
	VEC(pathaskrec) pathasks;
	/* totals (kept even when items are dropped) */
	ab_report_counts c;
	uint64_t req_allowed, req_denied, dns_allowed, dns_denied, execs, exits_unmatched;
	uint64_t sys_total, file_total, net_total, other_total, suppressed, policies;
	uint64_t trace_exec, trace_connect, trace_failed, trace_lost;
	uint64_t warnings, cred_saved, cred_refused;
	uint64_t ask_questions, ask_answers, reviews;
	uint64_t path_offers, path_answers;
};

void *rep_vec_grow(void *v, size_t *cap, size_t need, size_t elsz);

/* Append one zeroed element; NULL when out of memory (r->oom set). */
#define VEC_PUSH(r, vec)                                                                  \
	({                                                                                \
		__typeof__((vec).v) p_ =                                                  \
			rep_vec_grow((vec).v, &(vec).cap, (vec).n + 1, sizeof(*(vec).v)); \
		__typeof__((vec).v) e_ = NULL;                                            \
		if (!p_) {                                                                \
			(r)->oom = true;                                                  \
		} else {                                                                  \
			(vec).v = p_;                                                     \
			e_ = &(vec).v[(vec).n++];                                         \
			memset(e_, 0, sizeof(*e_));                                       \
		}                                                                         \
		e_;                                                                       \
	})

/* One more item (a command, a distinct key, a policy change) within the
 * budget; false when over it (or out of memory). */
static inline bool take_item(ab_report *r)
{
	if (r->oom || r->items >= r->lim.max_items)
		return false;
	r->items++;
	return true;
}

static inline uint64_t sat_add(uint64_t a, uint64_t b)
{
	return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

static inline const char *plural(uint64_t n, const char *one, const char *many)
{
	return n == 1 ? one : many;
}

#define P(x) ((uint64_t)(uintptr_t)(x))

/* The pooled copy of s[0..len) (no NUL inside), or NULL: budget or memory. */
const char *rep_intern(ab_report *r, const char *s, size_t len);
/* The map's slot for key K (found: ->v != NONE; else a free slot to fill
 * with rep_map_set), or NULL (out of memory). */
tent *rep_map_slot(ab_report *r, const uint64_t k[5]);
uint32_t rep_map_get(ab_report *r, const uint64_t k[5]);
void rep_map_set(ab_report *r, tent *t, uint32_t v);
/* The aggregate of kind `kind` for (a, b, c, d, port): found or added
 * (first-seen order), NULL when it cannot be kept. */
agg *rep_agg_get(ab_report *r, int kind, const char *a, const char *b, const char *c, const char *d,
		 uint32_t port);

/* RFC 3339 -> milliseconds since the epoch, or TS_NONE; and back (UTC, "?"
 * for TS_NONE) */
int64_t rep_parse_ts(const char *s, size_t n);
void rep_fmt_ts(char *buf, size_t n, int64_t t);
/* A session's length: its start (else its first event) to its end (else
 * its last event); -1 when unknown. */
int64_t rep_session_ms(const session *s);

/* Indices of v[0..n) sorted by count (desc), then names (the output never
 * depends on the hash); NULL on ENOMEM (n == 0 gives a non-NULL dummy). */
uint32_t *rep_sorted(const agg *v, size_t n, bool by_name_first);

/* One line read as a JSON object: the event into the model (report_event.c) */
void rep_on_event(ab_report *r, json_t *j);

#endif
