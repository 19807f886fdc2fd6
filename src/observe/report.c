/* SPDX-License-Identifier: MIT */
/*
 * `agentbox report` (parent, pure except ab_report_file): an audit log
 * (JSON lines, docs/audit.md) -> a model -> a text or JSON report.
 *
 * The aggregator keeps every distinct string once (an interning pool), so
 * the model compares strings by pointer; aggregates are found through one
 * hash map with a random SipHash key (a hostile log cannot make lookups
 * quadratic).  Output order never depends on the hash: lists are kept in
 * first-seen order and sorted by count, then name.  Budgets: line length,
 * items (commands, distinct keys, policy changes) and bytes of strings;
 * beyond them events are counted as dropped.
 *
 * Sessions: a log may hold several runs (--log appends).  A "start" event
 * opens a new session when the current one has a start already; events
 * before the first "start" form a session without a header.  Pids are
 * looked up within their session.
 *
 * Warnings ("warning": agentbox's findings after a run, such as a nested git
 * repository the run left) are kept once per (session, kind, message) in log
 * order, and shown before everything else.  Credentials files saved (or
 * refused) by rename are aggregates by (path, reason), under Secrets.
 *
 * Commands: exec records linked by ppid.  A second exec by the same pid
 * (before its exit) is the program it became, shown as a child of the
 * first.  A ppid with no exec record of its own is a top-level command.
 * Parents always precede children, so the tree is acyclic, and both
 * renderers walk it without recursion.
 */
#include "agentbox/report.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define NONE UINT32_MAX
#define TS_NONE INT64_MIN
#define SMALL_MAX 128   /* comm, errno names, syscall names, secret names, rules */
#define GRANTS_MAX 64
#define SECRETS_PER_REQ 64

/* ------------------------------------------------------------------ hashing */

#define ROTL(x, b) (uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))
#define SIPROUND                                                                          \
	do {                                                                              \
		v0 += v1; v1 = ROTL(v1, 13); v1 ^= v0; v0 = ROTL(v0, 32);                 \
		v2 += v3; v3 = ROTL(v3, 16); v3 ^= v2;                                    \
		v0 += v3; v3 = ROTL(v3, 21); v3 ^= v0;                                    \
		v2 += v1; v1 = ROTL(v1, 17); v1 ^= v2; v2 = ROTL(v2, 32);                 \
	} while (0)

/* SipHash-1-3 */
static uint64_t siphash(const uint64_t key[2], const void *data, size_t len)
{
	const uint8_t *in = data;
	uint64_t v0 = 0x736f6d6570736575ULL ^ key[0], v1 = 0x646f72616e646f6dULL ^ key[1];
	uint64_t v2 = 0x6c7967656e657261ULL ^ key[0], v3 = 0x7465646279746573ULL ^ key[1];
	uint64_t b = (uint64_t)len << 56, m;
	size_t i = 0;
	for (; i + 8 <= len; i += 8) {
		memcpy(&m, in + i, 8);
		v3 ^= m;
		SIPROUND;
		v0 ^= m;
	}
	for (size_t j = 0; i + j < len; j++)
		b |= (uint64_t)in[i + j] << (8 * j);
	v3 ^= b;
	SIPROUND;
	v0 ^= b;
	v2 ^= 0xff;
	SIPROUND;
	SIPROUND;
	SIPROUND;
	return v0 ^ v1 ^ v2 ^ v3;
}

/* ------------------------------------------------------------------ model */

typedef struct pstr {
	size_t len;
	char s[];
} pstr;

typedef struct tent {
	uint64_t k[5];
	uint32_t v; /* NONE: free slot */
} tent;

enum { K_PID = 1, K_REACHED, K_REFUSED, K_DNS, K_SYS, K_SYSPID, K_FILE, K_NET, K_OTHER,
       K_SECRET, K_SKIPPED, K_WARN, K_CRED };

typedef struct session {
	const char *profile;
	const char **grants;
	size_t ngrants;
	bool grants_cut, has_start, has_end;
	int64_t start_ms, end_ms, first_ms, last_ms;
	int64_t proxy;     /* -1: not said */
	int64_t status;    /* "end" status: the run's exit status; -1 not said */
	int transparent;   /* -1: not said */
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
	uint64_t n, up, down, m;   /* n: count/requests; m: secrets' masked count */
	uint64_t e;                /* secrets: requests that carried the placeholder on
				      unchanged to a host it is not bound to */
} agg;

typedef struct syspid {
	uint32_t agg;
	uint64_t first, rep;
} syspid;

typedef struct policy {
	uint32_t session;
	int64_t ts, by_pid;
	const char *action, *rule;
} policy;

#define VEC(T) struct { T *v; size_t n, cap; }

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
	/* totals (kept even when items are dropped) */
	ab_report_counts c;
	uint64_t req_allowed, req_denied, dns_allowed, dns_denied, execs, exits_unmatched;
	uint64_t sys_total, file_total, net_total, other_total, suppressed, policies;
	uint64_t trace_exec, trace_connect, trace_failed, trace_lost;
	uint64_t warnings, cred_saved, cred_refused;
};

static void *vec_grow(void *v, size_t *cap, size_t need, size_t elsz)
{
	if (need <= *cap)
		return v;
	size_t nc = *cap ? *cap * 2 : 16;
	while (nc < need)
		nc *= 2;
	void *p = reallocarray(v, nc, elsz);
	if (p)
		*cap = nc;
	return p;
}

/* Append one zeroed element; NULL when out of memory (r->oom set). */
#define VEC_PUSH(r, vec)                                                                  \
	({                                                                                \
		__typeof__((vec).v) p_ = vec_grow((vec).v, &(vec).cap, (vec).n + 1,        \
						  sizeof(*(vec).v));                       \
		__typeof__((vec).v) e_ = NULL;                                             \
		if (!p_) {                                                                 \
			(r)->oom = true;                                                   \
		} else {                                                                   \
			(vec).v = p_;                                                      \
			e_ = &(vec).v[(vec).n++];                                          \
			memset(e_, 0, sizeof(*e_));                                        \
		}                                                                          \
		e_;                                                                        \
	})

static bool take_item(ab_report *r)
{
	if (r->oom || r->items >= r->lim.max_items)
		return false;
	r->items++;
	return true;
}

/* ---- the string pool ---- */

static bool pool_grow(ab_report *r)
{
	size_t nc = r->pool_cap ? r->pool_cap * 2 : 1024;
	pstr **n = calloc(nc, sizeof(*n));
	if (!n)
		return false;
	for (size_t i = 0; i < r->pool_cap; i++) {
		pstr *p = r->pool[i];
		if (!p)
			continue;
		size_t j = siphash(r->key, p->s, p->len) & (nc - 1);
		while (n[j])
			j = (j + 1) & (nc - 1);
		n[j] = p;
	}
	free(r->pool);
	r->pool = n;
	r->pool_cap = nc;
	return true;
}

/* The pooled copy of s[0..len) (no NUL inside), or NULL: budget or memory. */
static const char *intern(ab_report *r, const char *s, size_t len)
{
	if (r->oom)
		return NULL;
	if ((r->pool_n + 1) * 2 > r->pool_cap && !pool_grow(r)) {
		r->oom = true;
		return NULL;
	}
	size_t j = siphash(r->key, s, len) & (r->pool_cap - 1);
	for (; r->pool[j]; j = (j + 1) & (r->pool_cap - 1))
		if (r->pool[j]->len == len && memcmp(r->pool[j]->s, s, len) == 0)
			return r->pool[j]->s;
	size_t cost = sizeof(pstr) + len + 1;
	if (r->bytes + cost > r->lim.max_bytes)
		return NULL;
	pstr *p = malloc(cost);
	if (!p) {
		r->oom = true;
		return NULL;
	}
	p->len = len;
	memcpy(p->s, s, len);
	p->s[len] = '\0';
	r->pool[j] = p;
	r->pool_n++;
	r->bytes += cost;
	return p->s;
}

/* ---- the tuple map: 5 words -> index ---- */

static bool map_grow(ab_report *r)
{
	size_t nc = r->map_cap ? r->map_cap * 2 : 1024;
	tent *n = malloc(nc * sizeof(*n));
	if (!n)
		return false;
	for (size_t i = 0; i < nc; i++)
		n[i].v = NONE;
	for (size_t i = 0; i < r->map_cap; i++) {
		if (r->map[i].v == NONE)
			continue;
		size_t j = siphash(r->key, r->map[i].k, sizeof(r->map[i].k)) & (nc - 1);
		while (n[j].v != NONE)
			j = (j + 1) & (nc - 1);
		n[j] = r->map[i];
	}
	free(r->map);
	r->map = n;
	r->map_cap = nc;
	return true;
}

/* The slot for key (found: ->v != NONE; else a free slot to fill), or NULL. */
static tent *map_slot(ab_report *r, const uint64_t k[5])
{
	if ((r->map_n + 1) * 2 > r->map_cap && !map_grow(r)) {
		r->oom = true;
		return NULL;
	}
	size_t j = siphash(r->key, k, 5 * sizeof(uint64_t)) & (r->map_cap - 1);
	for (; r->map[j].v != NONE; j = (j + 1) & (r->map_cap - 1))
		if (memcmp(r->map[j].k, k, 5 * sizeof(uint64_t)) == 0)
			return &r->map[j];
	memcpy(r->map[j].k, k, 5 * sizeof(uint64_t));
	return &r->map[j];
}

static uint32_t map_get(ab_report *r, const uint64_t k[5])
{
	tent *t = map_slot(r, k);
	return t ? t->v : NONE;
}

static void map_set(ab_report *r, tent *t, uint32_t v)
{
	if (t->v == NONE)
		r->map_n++;
	t->v = v;
}

#define P(x) ((uint64_t)(uintptr_t)(x))

/* The aggregate of kind `kind` for (a, b, c, d, port): found or added
 * (first-seen order), NULL when it cannot be kept. */
static agg *agg_get(ab_report *r, int kind, const char *a, const char *b, const char *c,
		    const char *d, uint32_t port)
{
	static const size_t off[] = {
		[K_REACHED] = offsetof(ab_report, reached), [K_REFUSED] = offsetof(ab_report, refused),
		[K_DNS] = offsetof(ab_report, dns),         [K_SYS] = offsetof(ab_report, sys),
		[K_FILE] = offsetof(ab_report, file),       [K_NET] = offsetof(ab_report, net),
		[K_OTHER] = offsetof(ab_report, other),     [K_SECRET] = offsetof(ab_report, secrets),
		[K_SKIPPED] = offsetof(ab_report, skipped), [K_WARN] = offsetof(ab_report, warns),
		[K_CRED] = offsetof(ab_report, creds),
	};
	typedef VEC(agg) aggvec;
	aggvec *vec = (aggvec *)((char *)r + off[kind]);
	uint64_t k[5] = {(uint64_t)kind << 32 | port, P(a), P(b), P(c), P(d)};
	tent *t = map_slot(r, k);
	if (!t)
		return NULL;
	if (t->v != NONE)
		return &vec->v[t->v];
	if (!take_item(r))
		return NULL;
	agg *e = VEC_PUSH(r, *vec);
	if (!e)
		return NULL;
	*e = (agg){.a = a, .b = b, .c = c, .d = d, .port = port};
	map_set(r, t, (uint32_t)(vec->n - 1));
	return e;
}

static uint64_t sat_add(uint64_t a, uint64_t b)
{
	return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

/* ------------------------------------------------------------------ time */

static int64_t days_from_civil(int64_t y, unsigned m, unsigned d)
{
	y -= m <= 2;
	int64_t era = (y >= 0 ? y : y - 399) / 400;
	unsigned yoe = (unsigned)(y - era * 400);
	unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
	unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
	return era * 146097 + (int64_t)doe - 719468;
}

static void civil_from_days(int64_t z, int64_t *y, unsigned *m, unsigned *d)
{
	z += 719468;
	int64_t era = (z >= 0 ? z : z - 146096) / 146097;
	unsigned doe = (unsigned)(z - era * 146097);
	unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
	unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
	unsigned mp = (5 * doy + 2) / 153;
	*d = doy - (153 * mp + 2) / 5 + 1;
	*m = mp < 10 ? mp + 3 : mp - 9;
	*y = (int64_t)yoe + era * 400 + (*m <= 2);
}

static bool digits(const char *s, size_t n, unsigned *out)
{
	unsigned v = 0;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return false;
		v = v * 10 + (unsigned)(s[i] - '0');
	}
	*out = v;
	return true;
}

/* RFC 3339 ("2026-01-02T03:04:05.678Z", fraction and offset optional forms)
 * -> milliseconds since the epoch, or TS_NONE. */
static int64_t parse_ts(const char *s, size_t n)
{
	unsigned y, mo, d, h, mi, se, ms = 0;
	if (n < 20 || !digits(s, 4, &y) || s[4] != '-' || !digits(s + 5, 2, &mo) || s[7] != '-' ||
	    !digits(s + 8, 2, &d) || (s[10] != 'T' && s[10] != 't' && s[10] != ' ') ||
	    !digits(s + 11, 2, &h) || s[13] != ':' || !digits(s + 14, 2, &mi) || s[16] != ':' ||
	    !digits(s + 17, 2, &se))
		return TS_NONE;
	if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || se > 60)
		return TS_NONE;
	size_t i = 19;
	if (s[i] == '.') {
		size_t k = 0;
		for (i++; i < n && s[i] >= '0' && s[i] <= '9'; i++, k++)
			if (k < 3)
				ms = ms * 10 + (unsigned)(s[i] - '0');
		if (k == 0)
			return TS_NONE;
		for (; k < 3; k++)
			ms *= 10;
	}
	int64_t off = 0;
	if (i + 1 == n && (s[i] == 'Z' || s[i] == 'z')) {
		off = 0;
	} else if (i + 6 == n && (s[i] == '+' || s[i] == '-') && s[i + 3] == ':') {
		unsigned oh, om;
		if (!digits(s + i + 1, 2, &oh) || !digits(s + i + 4, 2, &om) || oh > 23 || om > 59)
			return TS_NONE;
		off = (int64_t)(oh * 60 + om) * 60000 * (s[i] == '+' ? 1 : -1);
	} else {
		return TS_NONE;
	}
	int64_t days = days_from_civil(y, mo, d);
	return ((days * 24 + h) * 60 + mi) * 60000 + (int64_t)se * 1000 + ms - off;
}

static void fmt_ts(char *buf, size_t n, int64_t t)
{
	if (t == TS_NONE) {
		snprintf(buf, n, "?");
		return;
	}
	int64_t days = t / 86400000, rem = t % 86400000;
	if (rem < 0) {
		rem += 86400000;
		days--;
	}
	int64_t y;
	unsigned m, d;
	civil_from_days(days, &y, &m, &d);
	snprintf(buf, n, "%04lld-%02u-%02uT%02u:%02u:%02u.%03uZ", (long long)y, m, d,
		 (unsigned)(rem / 3600000), (unsigned)(rem / 60000 % 60), (unsigned)(rem / 1000 % 60),
		 (unsigned)(rem % 1000));
}

/* ------------------------------------------------------------------ events */

typedef struct ev {
	ab_report *r;
	json_t *j;
	bool bad;  /* a field has the wrong type or range: a bad line */
	bool drop; /* something could not be kept */
} ev;

/* Longest prefix of s[0..n) of at most cap bytes that ends on a UTF-8
 * character boundary (jansson hands out valid UTF-8). */
static size_t utf8_cap(const char *s, size_t n, size_t cap)
{
	if (n <= cap)
		return n;
	size_t k = cap;
	while (k > 0 && ((unsigned char)s[k] & 0xc0) == 0x80)
		k--;
	return k;
}

static const char *pool_json(ev *e, json_t *v, size_t cap, bool *cut)
{
	const char *s = json_string_value(v);
	size_t n = json_string_length(v);
	size_t m = utf8_cap(s, n, cap);
	if (cut && m < n)
		*cut = true;
	const char *p = intern(e->r, s, m);
	if (!p)
		e->drop = true;
	return p;
}

static json_t *field(ev *e, const char *key)
{
	json_t *v = json_object_get(e->j, key);
	return json_is_null(v) ? NULL : v;
}

/* A string field: pooled (capped) copy, NULL if absent, not kept or bad. */
static const char *ev_str(ev *e, const char *key, size_t cap, bool required)
{
	json_t *v = field(e, key);
	if (!v || !json_is_string(v)) {
		if (v || required)
			e->bad = true;
		return NULL;
	}
	return pool_json(e, v, cap, NULL);
}

static bool ev_int(ev *e, const char *key, int64_t lo, int64_t hi, int64_t *out, bool required)
{
	json_t *v = field(e, key);
	if (!v) {
		if (required)
			e->bad = true;
		return false;
	}
	if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi) {
		e->bad = true;
		return false;
	}
	*out = json_integer_value(v);
	return true;
}

static session *cur_session(ab_report *r, bool start)
{
	if (r->cur != NONE && !(start && r->ses.v[r->cur].has_start))
		return &r->ses.v[r->cur];
	if (r->cur != NONE && !take_item(r))
		return &r->ses.v[r->cur]; /* over budget: stay in the current one */
	if (r->cur == NONE)
		r->items++;
	session *s = VEC_PUSH(r, r->ses);
	if (!s)
		return NULL;
	*s = (session){.start_ms = TS_NONE, .end_ms = TS_NONE, .first_ms = TS_NONE,
		       .last_ms = TS_NONE, .proxy = -1, .status = -1, .transparent = -1};
	r->cur = (uint32_t)(r->ses.n - 1);
	return s;
}

static void on_start(ev *e, session *s, int64_t ts)
{
	s->has_start = true;
	s->start_ms = ts;
	s->profile = ev_str(e, "profile", AB_REPORT_STR_MAX, false);
	int64_t v;
	if (ev_int(e, "proxy", 0, 65535, &v, false))
		s->proxy = v;
	json_t *t = field(e, "transparent");
	if (t && !json_is_boolean(t))
		e->bad = true;
	else if (t)
		s->transparent = json_is_true(t);
	json_t *g = field(e, "grants");
	if (!g)
		return;
	if (!json_is_array(g)) {
		e->bad = true;
		return;
	}
	size_t n = json_array_size(g);
	s->ngrants = 0;
	free(s->grants);
	s->grants = calloc(n < GRANTS_MAX ? n : GRANTS_MAX, sizeof(*s->grants));
	if (n && !s->grants) {
		e->r->oom = true;
		return;
	}
	s->grants_cut = n > GRANTS_MAX;
	for (size_t i = 0; i < n; i++) {
		json_t *x = json_array_get(g, i);
		if (!json_is_string(x)) {
			e->bad = true;
			return;
		}
		const char *p = i < GRANTS_MAX ? pool_json(e, x, AB_REPORT_STR_MAX, NULL) : NULL;
		if (p)
			s->grants[s->ngrants++] = p;
	}
}

enum name_count { NC_INJECTED, NC_MASKED, NC_ELSEWHERE };

/* "secrets"/"masked"/"elsewhere": names joined by ',' (the proxy's form) or
 * an array. */
static void each_name(ev *e, const char *key, const char *host, uint32_t port,
		      enum name_count what)
{
	json_t *v = field(e, key);
	if (!v)
		return;
	const char *names[SECRETS_PER_REQ];
	size_t n = 0;
	if (json_is_string(v)) {
		const char *s = json_string_value(v);
		size_t len = json_string_length(v);
		for (size_t i = 0; i < len && n < SECRETS_PER_REQ;) {
			size_t j = i;
			while (j < len && s[j] != ',')
				j++;
			if (j > i) {
				const char *p = intern(e->r, s + i, utf8_cap(s + i, j - i, SMALL_MAX));
				if (p)
					names[n++] = p;
				else
					e->drop = true;
			}
			i = j + 1;
		}
	} else if (json_is_array(v)) {
		for (size_t i = 0; i < json_array_size(v) && n < SECRETS_PER_REQ; i++) {
			json_t *x = json_array_get(v, i);
			if (!json_is_string(x)) {
				e->bad = true;
				return;
			}
			const char *p = pool_json(e, x, SMALL_MAX, NULL);
			if (p)
				names[n++] = p;
		}
	} else {
		e->bad = true;
		return;
	}
	for (size_t i = 0; i < n && host; i++) {
		agg *a = agg_get(e->r, K_SECRET, names[i], host, NULL, NULL, port);
		if (!a) {
			e->drop = true;
			continue;
		}
		if (what == NC_MASKED)
			a->m++;
		else if (what == NC_ELSEWHERE)
			a->e++;
		else
			a->n++;
	}
}

static void on_request(ev *e)
{
	ab_report *r = e->r;
	const char *host = ev_str(e, "host", AB_REPORT_STR_MAX, true);
	json_t *d = field(e, "decision");
	int64_t port = 0, up = 0, down = 0;
	ev_int(e, "port", 0, 65535, &port, true);
	ev_int(e, "bytes_up", 0, INT64_MAX, &up, false);
	ev_int(e, "bytes_down", 0, INT64_MAX, &down, false);
	const char *rule = ev_str(e, "rule", SMALL_MAX, false);
	const char *reason = ev_str(e, "reason", 1024, false);
	if (!json_is_string(d))
		e->bad = true;
	if (e->bad)
		return;
	bool allow = strcmp(json_string_value(d), "allow") == 0;
	if (!allow && strcmp(json_string_value(d), "deny") != 0) {
		r->c.unknown++;
		return;
	}
	if (allow)
		r->req_allowed++;
	else
		r->req_denied++;
	if (!host)
		return;
	agg *a = allow ? agg_get(r, K_REACHED, host, NULL, NULL, NULL, (uint32_t)port)
		       : agg_get(r, K_REFUSED, host, rule, NULL, NULL, (uint32_t)port);
	if (!a) {
		e->drop = true;
	} else {
		a->n++;
		a->up = sat_add(a->up, (uint64_t)up);
		a->down = sat_add(a->down, (uint64_t)down);
		if (!allow && !a->c)
			a->c = reason;
	}
	each_name(e, "secrets", host, (uint32_t)port, NC_INJECTED);
	each_name(e, "masked", host, (uint32_t)port, NC_MASKED);
	each_name(e, "elsewhere", host, (uint32_t)port, NC_ELSEWHERE);
}

static void on_dns(ev *e)
{
	ab_report *r = e->r;
	const char *name = ev_str(e, "name", AB_REPORT_STR_MAX, true);
	const char *rcode = ev_str(e, "rcode", SMALL_MAX, false);
	json_t *d = field(e, "decision");
	if (!json_is_string(d))
		e->bad = true;
	if (e->bad)
		return;
	if (strcmp(json_string_value(d), "allow") == 0) {
		r->dns_allowed++;
		return;
	}
	if (strcmp(json_string_value(d), "deny") != 0) {
		r->c.unknown++;
		return;
	}
	r->dns_denied++;
	agg *a = name ? agg_get(r, K_DNS, name, NULL, NULL, NULL, 0) : NULL;
	if (!a) {
		e->drop = true;
		return;
	}
	a->n++;
	if (!a->b)
		a->b = rcode;
}

static void on_policy(ev *e, int64_t ts)
{
	ab_report *r = e->r;
	const char *action = ev_str(e, "action", SMALL_MAX, false);
	const char *rule = ev_str(e, "rule", AB_REPORT_STR_MAX, true);
	int64_t pid = -1;
	ev_int(e, "by_pid", 0, INT32_MAX, &pid, false);
	if (e->bad)
		return;
	r->policies++;
	if (!rule || !take_item(r)) {
		e->drop = true;
		return;
	}
	policy *p = VEC_PUSH(r, r->pol);
	if (p)
		*p = (policy){.session = r->cur, .ts = ts, .by_pid = pid, .action = action,
			      .rule = rule};
}

static bool cmd_add_child(ab_report *r, uint32_t parent, uint32_t i)
{
	uint32_t *first = parent == NONE ? &r->first_root : &r->cmds.v[parent].first_child;
	uint32_t *last = parent == NONE ? &r->last_root : &r->cmds.v[parent].last_child;
	r->cmds.v[i].parent = parent;
	if (*first == NONE)
		*first = i;
	else
		r->cmds.v[*last].next = i;
	*last = i;
	return true;
}

static void on_exec(ev *e, int64_t ts)
{
	ab_report *r = e->r;
	int64_t pid = 0, ppid = -1;
	ev_int(e, "pid", 0, INT32_MAX, &pid, true);
	ev_int(e, "ppid", 0, INT32_MAX, &ppid, false);
	const char *cwd = ev_str(e, "cwd", AB_REPORT_STR_MAX, false);
	const char *path = ev_str(e, "path", AB_REPORT_STR_MAX, false);
	json_t *t = field(e, "truncated"), *av = field(e, "argv");
	if ((t && !json_is_boolean(t)) || (av && !json_is_array(av)))
		e->bad = true;
	for (size_t i = 0; av && i < json_array_size(av); i++)
		if (!json_is_string(json_array_get(av, i)))
			e->bad = true;
	if (e->bad)
		return;
	r->execs++;
	size_t n = av ? json_array_size(av) : 0;
	bool cut = json_is_true(t) || n > AB_REPORT_ARGV_MAX;
	if (n > AB_REPORT_ARGV_MAX)
		n = AB_REPORT_ARGV_MAX;
	size_t cost = n * sizeof(char *);
	if (e->drop || r->cur == NONE || r->bytes + cost > r->lim.max_bytes || !take_item(r)) {
		e->drop = true;
		return;
	}
	const char **argv = n ? calloc(n, sizeof(*argv)) : NULL;
	if (n && !argv) {
		r->oom = true;
		return;
	}
	for (size_t i = 0; i < n; i++) {
		argv[i] = pool_json(e, json_array_get(av, i), AB_REPORT_ARG_MAX, &cut);
		if (!argv[i]) {
			free(argv);
			e->drop = true;
			return;
		}
	}
	uint64_t kp[5] = {K_PID, r->cur, (uint64_t)pid, 0, 0};
	uint64_t kpp[5] = {K_PID, r->cur, (uint64_t)ppid, 0, 0};
	uint32_t prev = map_get(r, kp);
	uint32_t parent = NONE;
	bool same = prev != NONE && !r->cmds.v[prev].exited;
	if (same)
		parent = prev; /* the same process, a new program */
	else if (ppid >= 0)
		parent = map_get(r, kpp);
	tent *slot = map_slot(r, kp);
	cmd *c = slot ? VEC_PUSH(r, r->cmds) : NULL;
	if (!c) {
		free(argv);
		return;
	}
	r->bytes += cost;
	*c = (cmd){.session = r->cur, .first_child = NONE, .last_child = NONE, .next = NONE,
		   .pid = (int32_t)pid, .ppid = (int32_t)ppid, .cwd = cwd, .path = path,
		   .argv = argv, .argc = (uint32_t)n, .truncated = cut, .exec_ms = ts, .ms = -1};
	uint32_t i = (uint32_t)(r->cmds.n - 1);
	if (same)
		r->cmds.v[prev].replaced = true;
	cmd_add_child(r, parent, i);
	map_set(r, slot, i);
	r->c.commands = r->cmds.n;
}

static void on_exit_ev(ev *e, int64_t ts)
{
	ab_report *r = e->r;
	int64_t pid = 0, st = 0, sig = 0, ms = -1;
	ev_int(e, "pid", 0, INT32_MAX, &pid, true);
	bool has_st = ev_int(e, "status", INT32_MIN, INT32_MAX, &st, false);
	bool has_sig = ev_int(e, "signal", 0, 1024, &sig, false);
	ev_int(e, "ms", 0, INT64_MAX, &ms, false);
	if (e->bad)
		return;
	uint64_t kp[5] = {K_PID, r->cur, (uint64_t)pid, 0, 0};
	uint32_t i = r->cur == NONE ? NONE : map_get(r, kp);
	if (i == NONE || r->cmds.v[i].exited) {
		r->exits_unmatched++;
		return;
	}
	cmd *c = &r->cmds.v[i];
	c->exited = true;
	c->has_status = has_st;
	c->status = st;
	c->has_signal = has_sig && !has_st;
	c->sig = sig;
	if (ms < 0 && ts != TS_NONE && c->exec_ms != TS_NONE && ts >= c->exec_ms)
		ms = ts - c->exec_ms;
	c->ms = ms;
}

/* One syscall denial record (first = a "denied" record, else the count of
 * a "denied-repeat"): per (session, pid, syscall) the total is the larger of
 * the first-occurrence records and the repeat count. */
static void syscall_denial(ev *e, bool first, uint64_t count)
{
	ab_report *r = e->r;
	int64_t pid = -1;
	ev_int(e, "pid", 0, INT32_MAX, &pid, !first);
	const char *name = ev_str(e, "syscall", SMALL_MAX, true);
	const char *comm = ev_str(e, "comm", SMALL_MAX, false);
	const char *err = ev_str(e, "errno", SMALL_MAX, false);
	if (e->bad)
		return;
	uint64_t k[5] = {K_SYSPID, r->cur, (uint64_t)pid, P(name), 0};
	uint32_t i = name ? map_get(r, k) : NONE;
	syspid *sp = i != NONE ? &r->syspids.v[i] : NULL;
	if (name && !sp) {
		agg *a = agg_get(r, K_SYS, name, comm, NULL, NULL, 0);
		/* agg_get may have grown the map: look the slot up again */
		tent *t = a && take_item(r) ? map_slot(r, k) : NULL;
		sp = t ? VEC_PUSH(r, r->syspids) : NULL;
		if (sp) {
			sp->agg = (uint32_t)(a - r->sys.v);
			map_set(r, t, (uint32_t)(r->syspids.n - 1));
		}
	}
	if (!sp) {
		e->drop = true;
		r->sys_total = sat_add(r->sys_total, first ? 1 : count);
		return;
	}
	uint64_t before = sp->first > sp->rep ? sp->first : sp->rep;
	if (first)
		sp->first++;
	else if (count > sp->rep)
		sp->rep = count;
	uint64_t after = sp->first > sp->rep ? sp->first : sp->rep;
	agg *a = &r->sys.v[sp->agg];
	a->n = sat_add(a->n, after - before);
	r->sys_total = sat_add(r->sys_total, after - before);
	if (!a->c)
		a->c = err;
}

static void on_denied(ev *e)
{
	ab_report *r = e->r;
	const char *kind = ev_str(e, "kind", SMALL_MAX, true);
	if (e->bad || !kind) {
		e->drop = !e->bad;
		return;
	}
	if (strcmp(kind, "syscall") == 0) {
		syscall_denial(e, true, 1);
		return;
	}
	if (strcmp(kind, "file") == 0) {
		const char *path = ev_str(e, "path", AB_REPORT_STR_MAX, true);
		const char *op = ev_str(e, "op", SMALL_MAX, false);
		const char *comm = ev_str(e, "comm", SMALL_MAX, false);
		const char *err = ev_str(e, "errno", SMALL_MAX, false);
		if (e->bad)
			return;
		r->file_total++;
		agg *a = path ? agg_get(r, K_FILE, path, op, comm, NULL, 0) : NULL;
		if (!a) {
			e->drop = true;
			return;
		}
		a->n++;
		if (!a->d)
			a->d = err;
		return;
	}
	if (strcmp(kind, "unix-socket") == 0) {
		/* connect mediation refused a host's unix socket: a denied connect */
		const char *path = ev_str(e, "path", AB_REPORT_STR_MAX, true);
		const char *comm = ev_str(e, "comm", SMALL_MAX, false);
		if (e->bad)
			return;
		r->net_total++;
		agg *a = path ? agg_get(r, K_NET, path, "unix", comm, "EACCES", 0) : NULL;
		if (a)
			a->n++;
		else
			e->drop = true;
		return;
	}
	r->other_total++;
	agg *a = agg_get(r, K_OTHER, kind, NULL, NULL, NULL, 0);
	if (a)
		a->n++;
	else
		e->drop = true;
}

static void on_trace(ev *e)
{
	ab_report *r = e->r;
	const char *kind = ev_str(e, "kind", SMALL_MAX, true);
	if (e->bad || !kind) {
		e->drop = !e->bad;
		return;
	}
	if (strcmp(kind, "exec") == 0) {
		r->trace_exec++;
		return;
	}
	if (strcmp(kind, "connect") != 0) {
		r->c.unknown++;
		return;
	}
	int64_t ret = 0, port = 0;
	ev_int(e, "ret", INT32_MIN, INT32_MAX, &ret, false);
	ev_int(e, "port", 0, 65535, &port, false);
	const char *err = ev_str(e, "errno", SMALL_MAX, false);
	const char *family = ev_str(e, "family", SMALL_MAX, false);
	const char *addr = ev_str(e, "addr", AB_REPORT_STR_MAX, false);
	const char *comm = ev_str(e, "comm", SMALL_MAX, false);
	if (e->bad)
		return;
	r->trace_connect++;
	if ((ret >= 0 && !err) || (err && strcmp(err, "EINPROGRESS") == 0))
		return; /* connected, or a non-blocking connect under way */
	if (!err || (strcmp(err, "EACCES") != 0 && strcmp(err, "EPERM") != 0)) {
		r->trace_failed++;
		return;
	}
	r->net_total++;
	agg *a = agg_get(r, K_NET, addr, family, comm, err, (uint32_t)port);
	if (a)
		a->n++;
	else
		e->drop = true;
}

/* "warning" (kind "git": a nested git repository or a gitlink the run left;
 * other kinds are shown too): once per (session, kind, message), counted. */
static void on_warning(ev *e)
{
	ab_report *r = e->r;
	const char *kind = ev_str(e, "kind", SMALL_MAX, false);
	const char *msg = ev_str(e, "message", AB_REPORT_STR_MAX, true);
	if (e->bad)
		return;
	r->warnings++;
	agg *a = msg ? agg_get(r, K_WARN, kind, msg, NULL, NULL, r->cur) : NULL;
	if (a)
		a->n++;
	else
		e->drop = true;
}

/* "credentials-saved" / "credentials-refused": a rename onto a rendered
 * credentials file that agentbox carried out, or left to the kernel. */
static void on_credentials(ev *e, bool saved)
{
	ab_report *r = e->r;
	int64_t pid = -1;
	const char *path = ev_str(e, "path", AB_REPORT_STR_MAX, true);
	const char *reason = saved ? NULL : ev_str(e, "reason", 1024, false);
	ev_int(e, "pid", -1, INT32_MAX, &pid, false); /* -1: agentbox could not tell */
	if (e->bad)
		return;
	if (saved)
		r->cred_saved++;
	else
		r->cred_refused++;
	agg *a = path ? agg_get(r, K_CRED, path, reason, NULL, NULL, !saved) : NULL;
	if (a)
		a->n++;
	else
		e->drop = true;
}

static void on_event(ab_report *r, json_t *j)
{
	ev e = {.r = r, .j = j};
	json_t *name = json_object_get(j, "event");
	if (!json_is_string(name)) {
		r->c.bad_lines++;
		return;
	}
	const char *n = json_string_value(name);
	int64_t ts = TS_NONE;
	json_t *tsv = json_object_get(j, "ts");
	if (json_is_string(tsv))
		ts = parse_ts(json_string_value(tsv), json_string_length(tsv));
	static const char *const known[] = {"start", "end", "request", "dns", "policy", "exec",
					    "exit", "denied", "denied-repeat", "suppressed",
					    "trace", "trace-lost", "secret-skipped", "warning",
					    "credentials-saved", "credentials-refused",
					    "placeholder-elsewhere"};
	size_t k = 0;
	while (k < AB_ARRAY_SIZE(known) && strcmp(n, known[k]) != 0)
		k++;
	if (k == AB_ARRAY_SIZE(known)) {
		r->c.events++;
		r->c.unknown++;
		return;
	}
	session *s = cur_session(r, k == 0);
	if (!s)
		return;
	if (ts != TS_NONE) {
		if (s->first_ms == TS_NONE)
			s->first_ms = ts;
		s->last_ms = ts;
	}
	int64_t v = 0;
	switch (k) {
	case 0:
		on_start(&e, s, ts);
		break;
	case 1:
		s->has_end = true;
		s->end_ms = ts;
		if (ev_int(&e, "status", 0, 255, &v, false))
			s->status = v;
		break;
	case 2:
		on_request(&e);
		break;
	case 3:
		on_dns(&e);
		break;
	case 4:
		on_policy(&e, ts);
		break;
	case 5:
		on_exec(&e, ts);
		break;
	case 6:
		on_exit_ev(&e, ts);
		break;
	case 7:
		on_denied(&e);
		break;
	case 8: {
		const char *kind = ev_str(&e, "kind", SMALL_MAX, false);
		if (kind && strcmp(kind, "syscall") != 0) {
			r->c.unknown++;
			break;
		}
		if (ev_int(&e, "count", 0, INT64_MAX, &v, true))
			syscall_denial(&e, false, (uint64_t)v);
		break;
	}
	case 9:
		if (ev_int(&e, "count", 0, INT64_MAX, &v, true))
			r->suppressed = sat_add(r->suppressed, (uint64_t)v);
		break;
	case 10:
		on_trace(&e);
		break;
	case 11:
		if (ev_int(&e, "count", 0, INT64_MAX, &v, true))
			r->trace_lost = sat_add(r->trace_lost, (uint64_t)v);
		break;
	case 12: {
		/* an optional secret whose source was absent (a name) */
		const char *sec = ev_str(&e, "secret", SMALL_MAX, true);
		agg *a = sec ? agg_get(r, K_SKIPPED, sec, NULL, NULL, NULL, 0) : NULL;
		if (a)
			a->n++;
		else if (!e.bad)
			e.drop = true;
		break;
	}
	case 13:
		on_warning(&e);
		break;
	case 14:
	case 15:
		on_credentials(&e, k == 14);
		break;
	case 16:
		/* the first of a (secret, host:port): the request lines'
		 * "elsewhere" count them all */
		break;
	}
	if (e.bad) {
		r->c.bad_lines++;
		if (!r->c.first_bad)
			r->c.first_bad = r->c.lines;
		return;
	}
	r->c.events++;
	if (e.drop)
		r->c.dropped++;
}

int ab_report_feed_line(ab_report *r, const char *line, size_t len)
{
	if (r->oom)
		return -ENOMEM;
	r->c.lines++;
	if (len && line[len - 1] == '\r')
		len--;
	size_t i = 0;
	while (i < len && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r'))
		i++;
	if (i == len)
		return 0; /* blank */
	json_error_t jerr;
	json_t *j = len <= r->lim.max_line ? json_loadb(line, len, JSON_REJECT_DUPLICATES, &jerr)
					   : NULL;
	if (!json_is_object(j)) {
		r->c.bad_lines++;
		if (!r->c.first_bad)
			r->c.first_bad = r->c.lines;
	} else {
		uint64_t bad = r->c.bad_lines;
		on_event(r, j);
		if (r->c.bad_lines != bad && !r->c.first_bad)
			r->c.first_bad = r->c.lines;
	}
	json_decref(j);
	return r->oom ? -ENOMEM : 0;
}

int ab_report_feed(ab_report *r, const char *buf, size_t len)
{
	while (len) {
		const char *nl = memchr(buf, '\n', len);
		size_t n = nl ? (size_t)(nl - buf) : len;
		if (r->skipping) {
			/* the rest of an over-long line, already counted */
		} else if (!r->llen && nl && n <= r->lim.max_line) {
			int e = ab_report_feed_line(r, buf, n); /* a whole line in buf */
			if (e < 0)
				return e;
		} else if (r->llen + n > r->lim.max_line) {
			r->c.lines++;
			r->c.bad_lines++;
			if (!r->c.first_bad)
				r->c.first_bad = r->c.lines;
			r->llen = 0;
			r->skipping = !nl;
		} else {
			if (!r->line) {
				r->line = malloc(r->lim.max_line + 1);
				if (!r->line) {
					r->oom = true;
					return -ENOMEM;
				}
			}
			memcpy(r->line + r->llen, buf, n);
			r->llen += n;
			if (nl) {
				size_t l = r->llen;
				r->llen = 0;
				int e = ab_report_feed_line(r, r->line, l);
				if (e < 0)
					return e;
			}
		}
		if (nl)
			r->skipping = false;
		if (!nl)
			break;
		buf = nl + 1;
		len -= n + 1;
	}
	return r->oom ? -ENOMEM : 0;
}

int ab_report_end(ab_report *r)
{
	r->skipping = false;
	if (!r->llen)
		return r->oom ? -ENOMEM : 0;
	size_t l = r->llen;
	r->llen = 0;
	return ab_report_feed_line(r, r->line, l);
}

int ab_report_new(const ab_report_limits *limits, ab_report **out)
{
	ab_report *r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	if (limits)
		r->lim = *limits;
	if (!r->lim.max_line)
		r->lim.max_line = AB_REPORT_MAX_LINE;
	if (!r->lim.max_items)
		r->lim.max_items = AB_REPORT_MAX_ITEMS;
	if (!r->lim.max_bytes)
		r->lim.max_bytes = AB_REPORT_MAX_BYTES;
	if (r->lim.max_items > NONE - 1)
		r->lim.max_items = NONE - 1;
	r->key[0] = r->lim.seed;
	r->key[1] = r->lim.seed * 0x9e3779b97f4a7c15ULL;
	if (!r->lim.seed && getrandom(r->key, sizeof(r->key), GRND_NONBLOCK) != sizeof(r->key)) {
		/* no entropy yet: still a per-process key */
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		r->key[0] = (uint64_t)ts.tv_nsec ^ P(r);
		r->key[1] = (uint64_t)ts.tv_sec ^ ((uint64_t)getpid() << 32);
	}
	r->cur = r->first_root = r->last_root = NONE;
	*out = r;
	return 0;
}

void ab_report_free(ab_report *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->pool_cap; i++)
		free(r->pool[i]);
	free(r->pool);
	free(r->map);
	for (size_t i = 0; i < r->ses.n; i++)
		free(r->ses.v[i].grants);
	free(r->ses.v);
	for (size_t i = 0; i < r->cmds.n; i++)
		free(r->cmds.v[i].argv);
	free(r->cmds.v);
	free(r->reached.v);
	free(r->refused.v);
	free(r->dns.v);
	free(r->sys.v);
	free(r->file.v);
	free(r->net.v);
	free(r->other.v);
	free(r->secrets.v);
	free(r->skipped.v);
	free(r->warns.v);
	free(r->creds.v);
	free(r->syspids.v);
	free(r->pol.v);
	free(r->line);
	free(r);
}

void ab_report_counts_get(const ab_report *r, ab_report_counts *out)
{
	*out = r->c;
	out->sessions = r->ses.n;
	out->commands = r->cmds.n;
	out->warnings = r->warnings;
}

/* ------------------------------------------------------------------ sanitizing */

static bool escaped_cp(uint32_t cp)
{
	return cp < 0x20 || (cp >= 0x7f && cp <= 0x9f) || cp == 0x061c || cp == 0x200e ||
	       cp == 0x200f || (cp >= 0x2028 && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069);
}

/* One output unit at s[0..n): bytes consumed; *cols its width; *esc true
 * when each consumed byte is shown as \xNN. */
static size_t unit(const unsigned char *s, size_t n, size_t *cols, bool *esc)
{
	unsigned char c = s[0];
	*esc = false;
	if (c == '\\') {
		*cols = 2;
		return 1;
	}
	if (c < 0x80) {
		*esc = escaped_cp(c);
		*cols = *esc ? 4 : 1;
		return 1;
	}
	size_t len = c >= 0xf0 && c <= 0xf4 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 && c < 0xe0 ? 2 : 0;
	if (c > 0xf4)
		len = 0;
	uint32_t cp = len == 2 ? c & 0x1f : len == 3 ? c & 0x0f : c & 0x07;
	bool ok = len && len <= n;
	for (size_t i = 1; ok && i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			ok = false;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	if (ok && ((len == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
		   (len == 4 && (cp < 0x10000 || cp > 0x10ffff))))
		ok = false;
	if (!ok) {
		*esc = true;
		*cols = 4;
		return 1;
	}
	*esc = escaped_cp(cp);
	*cols = *esc ? 4 * len : 1;
	return len;
}

static void put_unit(FILE *out, const unsigned char *s, size_t k, bool esc)
{
	if (esc) {
		for (size_t i = 0; i < k; i++)
			fprintf(out, "\\x%02x", s[i]);
	} else if (k == 1 && s[0] == '\\') {
		fputs("\\\\", out);
	} else {
		fwrite(s, 1, k, out);
	}
}

size_t ab_report_sanitize(FILE *out, const char *str, size_t n, size_t max_cols)
{
	const unsigned char *s = (const unsigned char *)(str ? str : "");
	if (!str)
		n = 0;
	size_t len = strnlen((const char *)s, n), total = 0, cols, k;
	bool esc;
	for (size_t i = 0; i < len; i += k) {
		k = unit(s + i, len - i, &cols, &esc);
		total += cols;
	}
	size_t limit = max_cols && total > max_cols ? (max_cols > 3 ? max_cols - 3 : 0) : SIZE_MAX;
	size_t done = 0;
	for (size_t i = 0; i < len; i += k) {
		k = unit(s + i, len - i, &cols, &esc);
		if (done + cols > limit)
			break;
		put_unit(out, s + i, k, esc);
		done += cols;
	}
	if (limit != SIZE_MAX) {
		fputs("...", out);
		done += 3;
	}
	return done;
}

/* ------------------------------------------------------------------ sorting */

typedef struct sortctx {
	const agg *v;
	bool by_name_first;
} sortctx;

static int strcmp0(const char *a, const char *b)
{
	return strcmp(a ? a : "", b ? b : "");
}

static int cmp_agg(const void *pa, const void *pb, void *pc)
{
	const sortctx *c = pc;
	const agg *a = &c->v[*(const uint32_t *)pa], *b = &c->v[*(const uint32_t *)pb];
	int r;
	if (c->by_name_first && (r = strcmp0(a->a, b->a)) != 0)
		return r;
	if (a->n != b->n)
		return a->n > b->n ? -1 : 1;
	if ((r = strcmp0(a->a, b->a)) != 0 || (r = strcmp0(a->b, b->b)) != 0 ||
	    (r = strcmp0(a->c, b->c)) != 0)
		return r;
	return a->port < b->port ? -1 : a->port > b->port;
}

/* Indices of v[0..n) sorted by count (desc), then names; NULL on ENOMEM
 * (n == 0 gives a non-NULL dummy). */
static uint32_t *sorted(const agg *v, size_t n, bool by_name_first)
{
	uint32_t *ix = malloc((n ? n : 1) * sizeof(*ix));
	if (!ix)
		return NULL;
	for (size_t i = 0; i < n; i++)
		ix[i] = (uint32_t)i;
	sortctx c = {v, by_name_first};
	qsort_r(ix, n, sizeof(*ix), cmp_agg, &c);
	return ix;
}

/* ------------------------------------------------------------------ text */

#define LIST_MAX 50    /* entries per list in the text report */
#define ARGV_COLS 100
#define CWD_COLS 60
#define INDENT_MAX 24

static void put(FILE *out, const char *s, size_t cols)
{
	ab_report_sanitize(out, s, SIZE_MAX, cols);
}

static void human_ms(char *out, size_t n, int64_t ms)
{
	if (ms < 0)
		snprintf(out, n, "?");
	else if (ms < 1000)
		snprintf(out, n, "%lld ms", (long long)ms);
	else if (ms < 60000)
		snprintf(out, n, "%.1f s", (double)ms / 1000);
	else if (ms < 3600000)
		snprintf(out, n, "%lld min %lld s", (long long)(ms / 60000),
			 (long long)(ms / 1000 % 60));
	else
		snprintf(out, n, "%lld h %lld min", (long long)(ms / 3600000),
			 (long long)(ms / 60000 % 60));
}

static const char *plural(uint64_t n, const char *one, const char *many)
{
	return n == 1 ? one : many;
}

static int64_t session_ms(const session *s)
{
	int64_t end = s->end_ms != TS_NONE ? s->end_ms : s->last_ms;
	int64_t start = s->start_ms != TS_NONE ? s->start_ms : s->first_ms;
	return start != TS_NONE && end != TS_NONE && end >= start ? end - start : -1;
}

static void text_session(FILE *out, const session *s, const char *pre)
{
	char a[40], b[40], d[40];
	fmt_ts(a, sizeof(a), s->start_ms != TS_NONE ? s->start_ms : s->first_ms);
	fmt_ts(b, sizeof(b), s->end_ms != TS_NONE ? s->end_ms : s->last_ms);
	human_ms(d, sizeof(d), session_ms(s));
	char st[40] = "";
	if (s->status >= 0)
		snprintf(st, sizeof(st), " (exit status %lld)", (long long)s->status);
	fprintf(out, "%sProfile:  ", pre);
	put(out, s->profile ? s->profile : (s->has_start ? "?" : "(no start record)"), 80);
	fprintf(out, "\n%sStarted:  %s\n%sEnded:    %s%s\n%sDuration: %s\n", pre, a, pre, b,
		s->has_end ? st : " (no end record: still running, or agentbox was killed)", pre,
		d);
	if (s->ngrants || s->grants_cut) {
		fprintf(out, "%sGrants:  ", pre);
		for (size_t i = 0; i < s->ngrants; i++) {
			fputc(' ', out);
			put(out, s->grants[i], 100);
		}
		fprintf(out, "%s\n", s->grants_cut ? " ..." : "");
	}
}

static void status_label(char *buf, size_t n, const cmd *c)
{
	if (c->replaced && !c->exited)
		snprintf(buf, n, "exec");
	else if (!c->exited || (!c->has_status && !c->has_signal))
		snprintf(buf, n, "?");
	else if (c->has_signal) {
		const char *name = c->sig > 0 && c->sig < 65 ? sigabbrev_np((int)c->sig) : NULL;
		if (name)
			snprintf(buf, n, "signal %lld (SIG%s)", (long long)c->sig, name);
		else
			snprintf(buf, n, "signal %lld", (long long)c->sig);
	} else
		snprintf(buf, n, "exit %lld", (long long)c->status);
}

static bool needs_quote(const char *s)
{
	if (!s[0])
		return true;
	for (; *s; s++)
		if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_@%+=:,./-",
			    *s))
			return true;
	return false;
}

/* argv shell-quoted (a quote as '"'"', no backslash the sanitizer would
 * double), then sanitized, capped at cols. */
static void put_argv(FILE *out, const cmd *c, size_t cols)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&buf, &len);
	if (!m)
		return;
	if (!c->argc)
		fputs(c->path ? c->path : "?", m);
	for (uint32_t i = 0; i < c->argc; i++) {
		const char *a = c->argv[i];
		if (i)
			fputc(' ', m);
		if (!needs_quote(a)) {
			fputs(a, m);
			continue;
		}
		fputc('\'', m);
		for (; *a; a++)
			fputs(*a == '\'' ? "'\"'\"'" : (char[]){*a, 0}, m);
		fputc('\'', m);
	}
	if (fclose(m) == 0)
		put(out, buf, cols);
	free(buf);
	if (c->truncated)
		fputs(" [truncated]", out);
}

static bool same_line(const cmd *a, const cmd *b)
{
	if (a->first_child != NONE || b->first_child != NONE || a->argc != b->argc ||
	    a->cwd != b->cwd || a->path != b->path || a->truncated != b->truncated ||
	    a->exited != b->exited || a->replaced != b->replaced ||
	    a->has_status != b->has_status || a->has_signal != b->has_signal ||
	    (a->has_status && a->status != b->status) || (a->has_signal && a->sig != b->sig))
		return false;
	return !a->argc || memcmp(a->argv, b->argv, a->argc * sizeof(*a->argv)) == 0;
}

static void text_commands(const ab_report *r, FILE *out, size_t max_lines)
{
	fprintf(out, "\nCommands (%zu)\n", r->cmds.n);
	if (!r->cmds.n) {
		fprintf(out, "  none recorded%s\n",
			r->execs ? "" : " (this log has no exec records)");
		return;
	}
	size_t lines = 0, shown = 0, depth = 0;
	uint32_t n = r->first_root, prev_root = NONE;
	while (n != NONE) {
		const cmd *c = &r->cmds.v[n];
		uint32_t m = n;
		uint64_t k = 1;
		int64_t ms = c->ms;
		while (r->cmds.v[m].next != NONE && same_line(c, &r->cmds.v[r->cmds.v[m].next])) {
			m = r->cmds.v[m].next;
			k++;
			ms = ms >= 0 && r->cmds.v[m].ms >= 0 ? ms + r->cmds.v[m].ms : -1;
		}
		if (lines >= max_lines)
			break;
		if (c->parent == NONE && r->ses.n > 1 &&
		    (prev_root == NONE || r->cmds.v[prev_root].session != c->session))
			fprintf(out, "  [session %u]\n", c->session + 1);
		fputs("  ", out);
		for (size_t i = 0; i < depth && i < INDENT_MAX; i++)
			fputs("  ", out);
		if (depth > INDENT_MAX)
			fprintf(out, "[depth %zu] ", depth);
		put_argv(out, c, ARGV_COLS);
		char st[64], t[40];
		status_label(st, sizeof(st), c);
		human_ms(t, sizeof(t), ms);
		fprintf(out, "  [%s%s%s]", st, ms >= 0 ? ", " : "", ms >= 0 ? t : "");
		if (k > 1)
			fprintf(out, " (%llu times)", (unsigned long long)k);
		const char *pcwd = c->parent != NONE ? r->cmds.v[c->parent].cwd
			: prev_root != NONE && r->cmds.v[prev_root].session == c->session
				? r->cmds.v[prev_root].cwd : NULL;
		if (c->cwd && c->cwd != pcwd) {
			fputs("  in ", out);
			put(out, c->cwd, CWD_COLS);
		}
		fputc('\n', out);
		lines++;
		shown += k;
		if (c->parent == NONE)
			prev_root = n;
		if (c->first_child != NONE) {
			n = c->first_child;
			depth++;
			continue;
		}
		n = m;
		while (n != NONE && r->cmds.v[n].next == NONE) {
			n = r->cmds.v[n].parent;
			depth--;
		}
		if (n != NONE) {
			if (r->cmds.v[n].parent == NONE)
				prev_root = n;
			n = r->cmds.v[n].next;
		}
	}
	if (shown < r->cmds.n)
		fprintf(out, "  ... %zu more command%s not shown (agentbox report --json lists all)\n",
			r->cmds.n - shown, plural(r->cmds.n - shown, "", "s"));
}

static void more(FILE *out, size_t n)
{
	if (n > LIST_MAX)
		fprintf(out, "    ... %zu more\n", n - LIST_MAX);
}

static int text_network(const ab_report *r, FILE *out)
{
	fputs("\nNetwork\n", out);
	if (!r->req_allowed && !r->req_denied && !r->dns_denied && !r->dns_allowed) {
		fputs("  no requests\n", out);
		return 0;
	}
	_cleanup_free_ uint32_t *a = sorted(r->reached.v, r->reached.n, false);
	_cleanup_free_ uint32_t *b = sorted(r->refused.v, r->refused.n, false);
	_cleanup_free_ uint32_t *d = sorted(r->dns.v, r->dns.n, false);
	if (!a || !b || !d)
		return -ENOMEM;
	uint64_t up = 0, down = 0;
	for (size_t i = 0; i < r->reached.n; i++) {
		up = sat_add(up, r->reached.v[i].up);
		down = sat_add(down, r->reached.v[i].down);
	}
	char u[32], dn[32];
	ab_fmt_bytes(u, sizeof(u), up);
	ab_fmt_bytes(dn, sizeof(dn), down);
	fprintf(out, "  reached: %zu destination%s, %llu request%s, %s up, %s down\n",
		r->reached.n, plural(r->reached.n, "", "s"), (unsigned long long)r->req_allowed,
		plural(r->req_allowed, "", "s"), u, dn);
	for (size_t i = 0; i < r->reached.n && i < LIST_MAX; i++) {
		const agg *h = &r->reached.v[a[i]];
		ab_fmt_bytes(u, sizeof(u), h->up);
		ab_fmt_bytes(dn, sizeof(dn), h->down);
		fputs("    ", out);
		put(out, h->a, 80);
		fprintf(out, ":%u  %llu request%s, %s up, %s down\n", h->port,
			(unsigned long long)h->n, plural(h->n, "", "s"), u, dn);
	}
	more(out, r->reached.n);
	fprintf(out, "  refused: %llu request%s\n", (unsigned long long)r->req_denied,
		plural(r->req_denied, "", "s"));
	for (size_t i = 0; i < r->refused.n && i < LIST_MAX; i++) {
		const agg *h = &r->refused.v[b[i]];
		fputs("    ", out);
		put(out, h->a, 80);
		fprintf(out, ":%u  %llu attempt%s, rule ", h->port, (unsigned long long)h->n,
			plural(h->n, "", "s"));
		put(out, h->b ? h->b : "-", 40);
		if (h->c) {
			fputs(": ", out);
			put(out, h->c, 160);
		}
		fputc('\n', out);
	}
	more(out, r->refused.n);
	fprintf(out, "  DNS: %llu lookup%s answered, %llu refused\n",
		(unsigned long long)r->dns_allowed, plural(r->dns_allowed, "", "s"),
		(unsigned long long)r->dns_denied);
	for (size_t i = 0; i < r->dns.n && i < LIST_MAX; i++) {
		const agg *h = &r->dns.v[d[i]];
		fputs("    ", out);
		put(out, h->a, 80);
		fprintf(out, "  %llu lookup%s", (unsigned long long)h->n, plural(h->n, "", "s"));
		if (h->b) {
			fputs(" (", out);
			put(out, h->b, 20);
			fputc(')', out);
		}
		fputc('\n', out);
	}
	more(out, r->dns.n);
	return 0;
}

static void put_err(FILE *out, const char *e)
{
	if (e) {
		fputs(" (", out);
		put(out, e, 20);
		fputc(')', out);
	}
}

static int text_denials(const ab_report *r, FILE *out)
{
	uint64_t net = sat_add(sat_add(r->req_denied, r->dns_denied), r->net_total);
	uint64_t total = sat_add(sat_add(sat_add(r->sys_total, r->file_total), net), r->other_total);
	fprintf(out, "\nDenials (%llu)\n", (unsigned long long)total);
	_cleanup_free_ uint32_t *s = sorted(r->sys.v, r->sys.n, false);
	_cleanup_free_ uint32_t *f = sorted(r->file.v, r->file.n, false);
	_cleanup_free_ uint32_t *n = sorted(r->net.v, r->net.n, false);
	_cleanup_free_ uint32_t *o = sorted(r->other.v, r->other.n, false);
	if (!s || !f || !n || !o)
		return -ENOMEM;
	fprintf(out, "  syscalls: %llu\n", (unsigned long long)r->sys_total);
	for (size_t i = 0; i < r->sys.n && i < LIST_MAX; i++) {
		const agg *a = &r->sys.v[s[i]];
		fputs("    ", out);
		put(out, a->a, 40);
		fputs(" by ", out);
		put(out, a->b ? a->b : "?", 40);
		fprintf(out, "  %llu time%s", (unsigned long long)a->n, plural(a->n, "", "s"));
		put_err(out, a->c);
		fputc('\n', out);
	}
	more(out, r->sys.n);
	if (r->suppressed)
		fprintf(out, "    %llu more record%s suppressed by the rate limit\n",
			(unsigned long long)r->suppressed, plural(r->suppressed, "", "s"));
	fprintf(out, "  files: %llu\n", (unsigned long long)r->file_total);
	for (size_t i = 0; i < r->file.n && i < LIST_MAX; i++) {
		const agg *a = &r->file.v[f[i]];
		fputs("    ", out);
		put(out, a->b ? a->b : "?", 20);
		fputc(' ', out);
		put(out, a->a, 80);
		fputs(" by ", out);
		put(out, a->c ? a->c : "?", 40);
		fprintf(out, "  %llu time%s", (unsigned long long)a->n, plural(a->n, "", "s"));
		put_err(out, a->d);
		fputc('\n', out);
	}
	more(out, r->file.n);
	fprintf(out, "  network: %llu (%llu request%s refused, %llu DNS lookup%s refused, "
		"%llu connect%s refused)\n", (unsigned long long)net,
		(unsigned long long)r->req_denied, plural(r->req_denied, "", "s"),
		(unsigned long long)r->dns_denied, plural(r->dns_denied, "", "s"),
		(unsigned long long)r->net_total, plural(r->net_total, "", "s"));
	for (size_t i = 0; i < r->net.n && i < LIST_MAX; i++) {
		const agg *a = &r->net.v[n[i]];
		fputs("    connect ", out);
		put(out, a->b ? a->b : "?", 10);
		fputc(' ', out);
		put(out, a->a ? a->a : "?", 80);
		if (a->b && strcmp(a->b, "unix") == 0)
			fputs(" by ", out); /* a socket's path: no port */
		else
			fprintf(out, " port %u by ", a->port);
		put(out, a->c ? a->c : "?", 40);
		fprintf(out, "  %llu time%s", (unsigned long long)a->n, plural(a->n, "", "s"));
		put_err(out, a->d);
		fputc('\n', out);
	}
	more(out, r->net.n);
	if (r->other_total) {
		fprintf(out, "  other: %llu\n", (unsigned long long)r->other_total);
		for (size_t i = 0; i < r->other.n && i < LIST_MAX; i++) {
			fputs("    ", out);
			put(out, r->other.v[o[i]].a, 40);
			fprintf(out, "  %llu\n", (unsigned long long)r->other.v[o[i]].n);
		}
		more(out, r->other.n);
	}
	return 0;
}

/* Security-relevant findings, in log order, each message in full up to
 * WARN_COLS; "... N more" counts the events not shown (kept or not). */
#define WARN_COLS 300

static void text_warnings(const ab_report *r, FILE *out)
{
	if (!r->warnings)
		return;
	fprintf(out, "\nWarnings (%llu)\n", (unsigned long long)r->warnings);
	uint64_t shown = 0;
	for (size_t i = 0; i < r->warns.n && i < LIST_MAX; i++) {
		const agg *w = &r->warns.v[i];
		fputs("  ", out);
		if (r->ses.n > 1)
			fprintf(out, "[session %u] ", w->port + 1);
		put(out, w->a ? w->a : "?", 20);
		fputs(": ", out);
		put(out, w->b, WARN_COLS);
		if (w->n > 1)
			fprintf(out, " x%llu", (unsigned long long)w->n);
		fputc('\n', out);
		shown = sat_add(shown, w->n);
	}
	if (shown < r->warnings)
		fprintf(out, "  ... %llu more\n", (unsigned long long)(r->warnings - shown));
}

/* Renames onto a rendered credentials file: saved ones, then refused ones. */
static void text_creds(const ab_report *r, const uint32_t *ix, bool refused, FILE *out)
{
	size_t shown = 0, n = 0;
	for (size_t i = 0; i < r->creds.n; i++) {
		const agg *a = &r->creds.v[ix[i]];
		if ((a->port != 0) != refused)
			continue;
		n++;
		if (shown >= LIST_MAX)
			continue;
		shown++;
		fputs(refused ? "  credentials files refused: "
			      : "  credentials files saved inside: ", out);
		put(out, a->a, 120);
		if (a->b) {
			fputs(" (", out);
			put(out, a->b, 120);
			fputc(')', out);
		}
		fprintf(out, " x%llu\n", (unsigned long long)a->n);
	}
	more(out, n);
}

static int text_secrets(const ab_report *r, FILE *out)
{
	fputs("\nSecrets\n", out);
	_cleanup_free_ uint32_t *k = sorted(r->skipped.v, r->skipped.n, true);
	if (!k)
		return -ENOMEM;
	for (size_t i = 0; i < r->skipped.n && i < LIST_MAX; i++) {
		fputs("  ", out);
		put(out, r->skipped.v[k[i]].a, 40);
		fputs(" not loaded: its source was absent (optional)\n", out);
	}
	more(out, r->skipped.n);
	_cleanup_free_ uint32_t *s = sorted(r->secrets.v, r->secrets.n, true);
	_cleanup_free_ uint32_t *cr = sorted(r->creds.v, r->creds.n, true);
	if (!s || !cr)
		return -ENOMEM;
	if (!r->secrets.n && !r->cred_saved && !r->cred_refused)
		fputs("  none used\n", out);
	for (size_t i = 0; i < r->secrets.n && i < LIST_MAX; i++) {
		const agg *a = &r->secrets.v[s[i]];
		fputs("  ", out);
		put(out, a->a, 40);
		fputs(" -> ", out);
		put(out, a->b, 80);
		fprintf(out, ":%u  ", a->port);
		if (a->n || a->m || !a->e)
			fprintf(out, "%llu request%s", (unsigned long long)a->n,
				plural(a->n, "", "s"));
		if (a->m)
			fprintf(out, ", masked in %llu", (unsigned long long)a->m);
		if (a->e)
			fprintf(out, "%splaceholder sent on unchanged in %llu request%s (not bound "
				     "there)", a->n || a->m ? ", " : "", (unsigned long long)a->e,
				plural(a->e, "", "s"));
		fputc('\n', out);
	}
	more(out, r->secrets.n);
	text_creds(r, cr, false, out);
	text_creds(r, cr, true, out);
	return 0;
}

static void text_policy(const ab_report *r, FILE *out)
{
	fputs("\nRuntime policy changes\n", out);
	if (!r->policies) {
		fputs("  none\n", out);
		return;
	}
	for (size_t i = 0; i < r->pol.n && i < LIST_MAX; i++) {
		const policy *p = &r->pol.v[i];
		char t[40];
		fmt_ts(t, sizeof(t), p->ts);
		fprintf(out, "  %s  ", t);
		put(out, p->action ? p->action : "?", 20);
		fputc(' ', out);
		put(out, p->rule, 100);
		if (p->by_pid >= 0)
			fprintf(out, "  (by pid %lld)", (long long)p->by_pid);
		fputc('\n', out);
	}
	if (r->policies > LIST_MAX)
		fprintf(out, "  ... %llu more\n", (unsigned long long)(r->policies - LIST_MAX));
}

int ab_report_text(const ab_report *r, const ab_report_opts *o, FILE *out)
{
	size_t max_lines = o && o->max_lines ? o->max_lines : AB_REPORT_LINES;
	fputs("agentbox report", out);
	if (o && o->source) {
		fputs(": ", out);
		put(out, o->source, 0);
	}
	fputc('\n', out);
	if (!r->c.events && !r->c.bad_lines) {
		fputs("no events\n", out);
		return fflush(out) == 0 && !ferror(out) ? 0 : -EIO;
	}
	if (r->ses.n == 1) {
		text_session(out, &r->ses.v[0], "");
	} else if (r->ses.n > 1) {
		fprintf(out, "Sessions: %zu (the log holds several runs; the counts cover all)\n",
			r->ses.n);
		for (size_t i = 0; i < r->ses.n && i < 20; i++) {
			fprintf(out, "  [session %zu]\n", i + 1);
			text_session(out, &r->ses.v[i], "    ");
		}
		if (r->ses.n > 20)
			fprintf(out, "  ... %zu more sessions\n", r->ses.n - 20);
	}
	fprintf(out, "Events:   %llu", (unsigned long long)r->c.events);
	if (r->c.unknown)
		fprintf(out, " (%llu of kinds this agentbox does not know, ignored)",
			(unsigned long long)r->c.unknown);
	fputc('\n', out);
	text_warnings(r, out);
	text_commands(r, out, max_lines);
	if (r->exits_unmatched)
		fprintf(out, "  (%llu exit record%s without an exec record)\n",
			(unsigned long long)r->exits_unmatched, plural(r->exits_unmatched, "", "s"));
	if (text_network(r, out) < 0 || text_denials(r, out) < 0 || text_secrets(r, out) < 0)
		return -ENOMEM;
	text_policy(r, out);
	if (r->trace_exec || r->trace_connect || r->trace_lost) {
		fprintf(out, "\nKernel trace\n  %llu exec%s, %llu connect%s (%llu refused, %llu "
			"failed otherwise), %llu event%s lost\n", (unsigned long long)r->trace_exec,
			plural(r->trace_exec, "", "s"), (unsigned long long)r->trace_connect,
			plural(r->trace_connect, "", "s"), (unsigned long long)r->net_total,
			(unsigned long long)r->trace_failed, (unsigned long long)r->trace_lost,
			plural(r->trace_lost, "", "s"));
	}
	if (r->c.bad_lines || r->c.dropped)
		fputc('\n', out);
	if (r->c.bad_lines)
		fprintf(out, "%llu line%s could not be read (first: line %llu)\n",
			(unsigned long long)r->c.bad_lines,
			plural(r->c.bad_lines, "", "s"), (unsigned long long)r->c.first_bad);
	if (r->c.dropped)
		fprintf(out, "%llu event%s not kept in full: the report holds at most %zu items "
			"and %zu MiB of strings\n", (unsigned long long)r->c.dropped,
			plural(r->c.dropped, " was", "s were"), r->lim.max_items,
			r->lim.max_bytes >> 20);
	return fflush(out) == 0 && !ferror(out) ? 0 : -EIO;
}

/* ------------------------------------------------------------------ JSON */

/* Compact elements, one per line; jansson escapes every string
 * (JSON_ENSURE_ASCII: no raw control or non-ASCII byte reaches the output). */
static int dump(FILE *out, json_t *j, const char *pre, const char *post)
{
	if (!j)
		return -ENOMEM;
	fputs(pre, out);
	int r = json_dumpf(j, out, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_ENSURE_ASCII |
				       JSON_ENCODE_ANY);
	json_decref(j);
	fputs(post, out);
	return r < 0 ? -ENOMEM : 0;
}

static json_t *jstr(const char *s)
{
	return s ? json_string(s) : json_null();
}

static json_t *jts(int64_t t)
{
	char b[40];
	if (t == TS_NONE)
		return json_null();
	fmt_ts(b, sizeof(b), t);
	return json_string(b);
}

static json_t *jint(int64_t v, bool have)
{
	return have ? json_integer(v) : json_null();
}

static json_t *ju(uint64_t v)
{
	return json_integer(v > INT64_MAX ? INT64_MAX : (json_int_t)v);
}

typedef json_t *(*agg_json_fn)(const agg *a);

static int json_list(FILE *out, const char *key, const agg *v, size_t n, bool by_name,
		     agg_json_fn fn, const char *post)
{
	_cleanup_free_ uint32_t *ix = sorted(v, n, by_name);
	if (!ix)
		return -ENOMEM;
	fprintf(out, "\"%s\": [", key);
	for (size_t i = 0; i < n; i++)
		if (dump(out, fn(&v[ix[i]]), i ? ",\n  " : "\n  ", "") < 0)
			return -ENOMEM;
	fprintf(out, "%s]%s", n ? "\n" : "", post);
	return 0;
}

static json_t *j_reached(const agg *a)
{
	return json_pack("{s:o,s:I,s:o,s:o,s:o}", "host", jstr(a->a), "port", (json_int_t)a->port,
			 "requests", ju(a->n), "bytes_up", ju(a->up), "bytes_down", ju(a->down));
}

static json_t *j_refused(const agg *a)
{
	return json_pack("{s:o,s:I,s:o,s:o,s:o}", "host", jstr(a->a), "port", (json_int_t)a->port,
			 "rule", jstr(a->b), "reason", jstr(a->c), "count", ju(a->n));
}

static json_t *j_dns(const agg *a)
{
	return json_pack("{s:o,s:o,s:o}", "name", jstr(a->a), "rcode", jstr(a->b), "count",
			 ju(a->n));
}

static json_t *j_sys(const agg *a)
{
	return json_pack("{s:o,s:o,s:o,s:o}", "syscall", jstr(a->a), "comm", jstr(a->b), "errno",
			 jstr(a->c), "count", ju(a->n));
}

static json_t *j_file(const agg *a)
{
	return json_pack("{s:o,s:o,s:o,s:o,s:o}", "path", jstr(a->a), "op", jstr(a->b), "comm",
			 jstr(a->c), "errno", jstr(a->d), "count", ju(a->n));
}

static json_t *j_net(const agg *a)
{
	return json_pack("{s:o,s:o,s:I,s:o,s:o,s:o}", "family", jstr(a->b), "addr", jstr(a->a),
			 "port", (json_int_t)a->port, "comm", jstr(a->c), "errno", jstr(a->d),
			 "count", ju(a->n));
}

static json_t *j_other(const agg *a)
{
	return json_pack("{s:o,s:o}", "kind", jstr(a->a), "count", ju(a->n));
}

static json_t *j_secret(const agg *a)
{
	return json_pack("{s:o,s:o,s:I,s:o,s:o,s:o}", "name", jstr(a->a), "host", jstr(a->b),
			 "port", (json_int_t)a->port, "requests", ju(a->n), "masked", ju(a->m),
			 "elsewhere", ju(a->e));
}

static json_t *j_skipped(const agg *a)
{
	return json_pack("{s:o}", "name", jstr(a->a));
}

static json_t *j_cred(const agg *a)
{
	return json_pack("{s:o,s:s,s:o,s:o}", "path", jstr(a->a), "outcome",
			 a->port ? "refused" : "saved", "reason", jstr(a->b), "count", ju(a->n));
}

static json_t *j_session(const session *s)
{
	json_t *g = json_array();
	for (size_t i = 0; g && i < s->ngrants; i++)
		json_array_append_new(g, json_string(s->grants[i]));
	int64_t d = session_ms(s);
	return json_pack("{s:o,s:o,s:o,s:b,s:o,s:o,s:o,s:o,s:b}", "profile", jstr(s->profile),
			 "start", jts(s->start_ms != TS_NONE ? s->start_ms : s->first_ms), "end",
			 jts(s->end_ms != TS_NONE ? s->end_ms : s->last_ms), "complete",
			 s->has_start && s->has_end, "duration_ms", jint(d, d >= 0), "status",
			 jint(s->status, s->status >= 0), "proxy_port",
			 jint(s->proxy, s->proxy >= 0), "grants", g, "grants_truncated",
			 s->grants_cut);
}

static json_t *j_cmd(const ab_report *r, uint32_t i)
{
	const cmd *c = &r->cmds.v[i];
	json_t *argv = json_array();
	for (uint32_t k = 0; argv && k < c->argc; k++)
		json_array_append_new(argv, json_string(c->argv[k]));
	const char *state = c->exited ? "exited" : c->replaced ? "exec" : "unknown";
	return json_pack("{s:I,s:o,s:I,s:I,s:o,s:o,s:o,s:o,s:b,s:o,s:s,s:o,s:o,s:o}", "id",
			 (json_int_t)i, "parent", jint(c->parent, c->parent != NONE), "session",
			 (json_int_t)c->session + 1, "pid", (json_int_t)c->pid, "ppid",
			 jint(c->ppid, c->ppid >= 0), "path", jstr(c->path), "cwd", jstr(c->cwd),
			 "argv", argv, "truncated", c->truncated, "start", jts(c->exec_ms), "state",
			 state, "status", jint(c->status, c->exited && c->has_status), "signal",
			 jint(c->sig, c->exited && c->has_signal), "ms", jint(c->ms, c->ms >= 0));
}

int ab_report_json(const ab_report *r, const ab_report_opts *o, FILE *out)
{
	uint64_t net = sat_add(sat_add(r->req_denied, r->dns_denied), r->net_total);
	json_t *head = json_pack(
		"{s:i,s:o,s:o,s:o,s:o,s:o,s:o,s:o}", "version", 1, "source",
		jstr(o ? o->source : NULL), "lines", ju(r->c.lines), "events", ju(r->c.events),
		"bad_lines", ju(r->c.bad_lines), "first_bad_line",
		jint((int64_t)r->c.first_bad, r->c.first_bad > 0), "unknown_events",
		ju(r->c.unknown), "dropped_events", ju(r->c.dropped));
	if (!head)
		return -ENOMEM;
	_cleanup_free_ char *h = json_dumps(head, JSON_INDENT(1) | JSON_PRESERVE_ORDER |
							 JSON_ENSURE_ASCII);
	json_decref(head);
	if (!h)
		return -ENOMEM;
	/* the head object, left open: "{\n <keys>\n}" -> "{\n <keys>," */
	char *end = strrchr(h, '}');
	if (!end)
		return -ENOMEM;
	while (end > h && (end[-1] == '\n' || end[-1] == ' '))
		end--;
	fprintf(out, "%.*s,\n\"sessions\": [", (int)(end - h), h);
	for (size_t i = 0; i < r->ses.n; i++)
		if (dump(out, j_session(&r->ses.v[i]), i ? ",\n  " : "\n  ", "") < 0)
			return -ENOMEM;
	fprintf(out, "%s],\n\"warnings\": [", r->ses.n ? "\n" : "");
	for (size_t i = 0; i < r->warns.n; i++) {
		const agg *w = &r->warns.v[i];
		json_t *j = json_pack("{s:I,s:o,s:o,s:o}", "session", (json_int_t)w->port + 1,
				      "kind", jstr(w->a), "message", jstr(w->b), "count", ju(w->n));
		if (dump(out, j, i ? ",\n  " : "\n  ", "") < 0)
			return -ENOMEM;
	}
	fprintf(out, "%s],\n\"warning_count\": %llu,\n\"commands\": [", r->warns.n ? "\n" : "",
		(unsigned long long)r->warnings);
	for (size_t i = 0; i < r->cmds.n; i++)
		if (dump(out, j_cmd(r, (uint32_t)i), i ? ",\n  " : "\n  ", "") < 0)
			return -ENOMEM;
	fprintf(out, "%s],\n", r->cmds.n ? "\n" : "");
	if (dump(out, json_pack("{s:o,s:o,s:o,s:o,s:o}", "execs", ju(r->execs), "kept",
				ju(r->cmds.n), "exits_without_exec", ju(r->exits_unmatched),
				"trace_execs", ju(r->trace_exec), "trace_lost", ju(r->trace_lost)),
		 "\"command_counts\": ", ",\n") < 0)
		return -ENOMEM;
	if (dump(out, json_pack("{s:o,s:o,s:o,s:o,s:o,s:o}", "requests_allowed",
				ju(r->req_allowed), "requests_denied", ju(r->req_denied),
				"dns_allowed", ju(r->dns_allowed), "dns_denied", ju(r->dns_denied),
				"connects_traced", ju(r->trace_connect), "connects_failed",
				ju(r->trace_failed)),
		 "\"network_counts\": ", ",\n") < 0)
		return -ENOMEM;
	if (json_list(out, "reached", r->reached.v, r->reached.n, false, j_reached, ",\n") < 0 ||
	    json_list(out, "refused", r->refused.v, r->refused.n, false, j_refused, ",\n") < 0 ||
	    json_list(out, "dns_refused", r->dns.v, r->dns.n, false, j_dns, ",\n") < 0)
		return -ENOMEM;
	uint64_t total = sat_add(sat_add(sat_add(r->sys_total, r->file_total), net), r->other_total);
	if (dump(out, json_pack("{s:o,s:o,s:o,s:o,s:o,s:o}", "total", ju(total), "syscall",
				ju(r->sys_total), "file", ju(r->file_total), "network", ju(net),
				"other", ju(r->other_total), "suppressed", ju(r->suppressed)),
		 "\"denial_counts\": ", ",\n") < 0)
		return -ENOMEM;
	if (json_list(out, "denied_syscalls", r->sys.v, r->sys.n, false, j_sys, ",\n") < 0 ||
	    json_list(out, "denied_files", r->file.v, r->file.n, false, j_file, ",\n") < 0 ||
	    json_list(out, "denied_connects", r->net.v, r->net.n, false, j_net, ",\n") < 0 ||
	    json_list(out, "denied_other", r->other.v, r->other.n, false, j_other, ",\n") < 0 ||
	    json_list(out, "secrets", r->secrets.v, r->secrets.n, true, j_secret, ",\n") < 0 ||
	    json_list(out, "secrets_skipped", r->skipped.v, r->skipped.n, true, j_skipped,
		      ",\n") < 0 ||
	    json_list(out, "credentials_files", r->creds.v, r->creds.n, true, j_cred, ",\n") < 0)
		return -ENOMEM;
	fputs("\"policy\": [", out);
	for (size_t i = 0; i < r->pol.n; i++) {
		const policy *p = &r->pol.v[i];
		json_t *j = json_pack("{s:I,s:o,s:o,s:o,s:o}", "session", (json_int_t)p->session + 1,
				      "ts", jts(p->ts), "action", jstr(p->action), "rule",
				      jstr(p->rule), "by_pid", jint(p->by_pid, p->by_pid >= 0));
		if (dump(out, j, i ? ",\n  " : "\n  ", "") < 0)
			return -ENOMEM;
	}
	fprintf(out, "%s],\n\"policy_changes\": %llu\n}\n", r->pol.n ? "\n" : "",
		(unsigned long long)r->policies);
	return fflush(out) == 0 && !ferror(out) ? 0 : -EIO;
}

/* ------------------------------------------------------------------ the command */

static void report_freep(ab_report **r)
{
	ab_report_free(*r);
}

int ab_report_file(const char *path, bool json, FILE *out, ab_err *err)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0) {
		ab_fail(err, errno, "report: cannot open the log %s", path);
		return AB_EXIT_FAIL;
	}
	struct stat st;
	if (fstat(fd, &st) < 0) {
		ab_fail(err, errno, "report: %s", path);
		return AB_EXIT_FAIL;
	}
	if (!S_ISREG(st.st_mode)) {
		ab_fail(err, 0, "report: %s is not a regular file", path);
		return AB_EXIT_FAIL;
	}
	_cleanup_(report_freep) ab_report *r = NULL;
	if (ab_report_new(NULL, &r) < 0) {
		ab_fail(err, ENOMEM, "report");
		return AB_EXIT_FAIL;
	}
	_cleanup_free_ char *buf = malloc(1 << 16);
	if (!buf) {
		ab_fail(err, ENOMEM, "report");
		return AB_EXIT_FAIL;
	}
	for (;;) {
		ssize_t n = read(fd, buf, 1 << 16);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			ab_fail(err, errno, "report: reading %s", path);
			return AB_EXIT_FAIL;
		}
		if (n == 0)
			break;
		if (ab_report_feed(r, buf, (size_t)n) < 0) {
			ab_fail(err, ENOMEM, "report: %s", path);
			return AB_EXIT_FAIL;
		}
	}
	if (ab_report_end(r) < 0) {
		ab_fail(err, ENOMEM, "report: %s", path);
		return AB_EXIT_FAIL;
	}
	if (!r->c.events && r->c.bad_lines) {
		ab_fail(err, 0, "report: %s is not an agentbox audit log (%llu line%s could not be "
			"read, none is an event)", path, (unsigned long long)r->c.bad_lines,
			plural(r->c.bad_lines, "", "s"));
		return AB_EXIT_FAIL;
	}
	ab_report_opts o = {.source = path};
	int rc = json ? ab_report_json(r, &o, out) : ab_report_text(r, &o, out);
	if (rc < 0) {
		ab_fail(err, -rc, "report: writing the report");
		return AB_EXIT_FAIL;
	}
	return 0;
}
