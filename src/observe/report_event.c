/* SPDX-License-Identifier: MIT */
/*
 * `agentbox report` (parent, pure): one audit event (docs/audit.md) into the
 * model (report_int.h).  A field of the wrong type or range makes the line a
 * bad line; what does not fit the budgets is counted as dropped.
 *
 * Sessions: a log may hold several runs (--log appends).  A "start" event
 * opens a new session when the current one has a start already; events
 * before the first "start" form a session without a header.  Pids are
 * looked up within their session.
 *
 * Warnings ("warning": agentbox's findings after a run, such as a nested git
 * repository the run armed) are kept once per (session, kind, message) in log
 * order.  Credentials files saved (or refused) by rename are aggregates by
 * (path, reason).
 *
 * Commands: exec records linked by ppid.  A second exec by the same pid
 * (before its exit) is the program it became, a child of the first.  A ppid
 * with no exec record of its own is a top-level command.  Parents always
 * precede children, so the tree is acyclic and the renderers walk it
 * without recursion.
 */
#include "report_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SMALL_MAX 128 /* comm, errno names, syscall names, secret names, rules */
#define GRANTS_MAX 64
#define SECRETS_PER_REQ 64

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
	const char *p = rep_intern(e->r, s, m);
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
	*s = (session){.start_ms = TS_NONE,
		       .end_ms = TS_NONE,
		       .first_ms = TS_NONE,
		       .last_ms = TS_NONE,
		       .proxy = -1,
		       .status = -1,
		       .transparent = -1};
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
static void each_name(ev *e, const char *key, const char *host, uint32_t port, enum name_count what)
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
				const char *p =
					rep_intern(e->r, s + i, utf8_cap(s + i, j - i, SMALL_MAX));
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
		agg *a = rep_agg_get(e->r, K_SECRET, names[i], host, NULL, NULL, port);
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

static void on_request(ev *e, session *s, int64_t ts)
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
	agg *a = allow ? rep_agg_get(r, K_REACHED, host, NULL, NULL, NULL, (uint32_t)port)
		       : rep_agg_get(r, K_REFUSED, host, rule, NULL, NULL, (uint32_t)port);
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

static void on_dns(ev *e, session *s, int64_t ts)
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
	agg *a = name ? rep_agg_get(r, K_DNS, name, NULL, NULL, NULL, 0) : NULL;
	if (!a) {
		e->drop = true;
		return;
	}
	a->n++;
	if (!a->b)
		a->b = rcode;
}

static void on_policy(ev *e, session *s, int64_t ts)
{
	ab_report *r = e->r;
	const char *action = ev_str(e, "action", SMALL_MAX, false);
	const char *rule = ev_str(e, "rule", AB_REPORT_STR_MAX, true);
	const char *by = ev_str(e, "by", SMALL_MAX, false);
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
		*p = (policy){.session = r->cur,
			      .ts = ts,
			      .by_pid = pid,
			      .action = action,
			      .rule = rule,
			      .by = by};
}

/* "ask" (run --ask): questions are counted; an answer carries its
 * question's host, port, request and program, and is kept. */
static void on_ask(ev *e, session *s, int64_t ts)
{
	ab_report *r = e->r;
	const char *phase = ev_str(e, "phase", SMALL_MAX, true);
	askrec a = {.session = r->cur, .ts = ts, .port = -1, .waited_ms = -1};
	a.host = ev_str(e, "host", AB_REPORT_STR_MAX, true);
	ev_int(e, "port", 0, 65535, &a.port, true);
	a.request = ev_str(e, "request", AB_REPORT_STR_MAX, false);
	a.program = ev_str(e, "program", AB_REPORT_STR_MAX, false);
	bool answer = phase && strcmp(phase, "answer") == 0;
	if (answer) {
		a.answer = ev_str(e, "answer", SMALL_MAX, true);
		ev_int(e, "waited_ms", 0, INT64_MAX, &a.waited_ms, false);
		a.profile = ev_str(e, "profile", AB_REPORT_STR_MAX, false);
		a.note = ev_str(e, "note", 1024, false);
	}
	if (e->bad)
		return;
	if (!answer) {
		if (phase && strcmp(phase, "question") == 0)
			r->ask_questions++;
		else
			r->c.unknown++;
		return;
	}
	r->ask_answers++;
	askrec *p = take_item(r) ? VEC_PUSH(r, r->asks) : NULL;
	if (p)
		*p = a;
	else
		e->drop = true;
}

#define REVIEW_PATHS 256 /* paths kept per list of a "review" event */

/* A "review" event's list KEY (strings, or {path, reason|error} objects)
 * and its count N_KEY into *L. */
static void rev_list(ev *e, const char *key, const char *why_key, pathlist *l)
{
	char nkey[32];
	snprintf(nkey, sizeof(nkey), "n_%s", key);
	l->total = -1;
	ev_int(e, nkey, 0, INT64_MAX, &l->total, false);
	json_t *v = field(e, key);
	if (!v)
		return;
	size_t n = json_array_size(v);
	if (!json_is_array(v)) {
		e->bad = true;
		return;
	}
	n = n < REVIEW_PATHS ? n : REVIEW_PATHS;
	l->path = calloc(n ? n : 1, sizeof(*l->path));
	l->why = calloc(n ? n : 1, sizeof(*l->why));
	if (!l->path || !l->why) {
		e->r->oom = true;
		return;
	}
	for (size_t i = 0; i < n; i++) {
		json_t *x = json_array_get(v, i);
		json_t *p = json_is_object(x) ? json_object_get(x, "path") : x;
		json_t *w = json_is_object(x) && why_key ? json_object_get(x, why_key) : NULL;
		if (!json_is_string(p) || (w && !json_is_string(w))) {
			e->bad = true;
			return;
		}
		l->path[l->n] = pool_json(e, p, AB_REPORT_STR_MAX, NULL);
		l->why[l->n] = w ? pool_json(e, w, 1024, NULL) : NULL;
		if (l->path[l->n])
			l->n++;
	}
	if (json_array_size(v) > n)
		e->drop = true;
}

/* "ask-path" (run --ask's offer at exit): offers are counted; an answer
 * is kept with its paths (and their programs) and the lines offered. */
static void on_ask_path(ev *e, session *s, int64_t ts)
{
	ab_report *r = e->r;
	const char *phase = ev_str(e, "phase", SMALL_MAX, true);
	bool answer = phase && strcmp(phase, "answer") == 0;
	if (!answer) {
		if (!e->bad && phase && strcmp(phase, "offer") == 0)
			r->path_offers++;
		else if (!e->bad)
			r->c.unknown++;
		return;
	}
	pathaskrec a = {.session = r->cur, .ts = ts, .waited_ms = -1};
	a.answer = ev_str(e, "answer", SMALL_MAX, true);
	ev_int(e, "waited_ms", 0, INT64_MAX, &a.waited_ms, false);
	a.profile = ev_str(e, "profile", AB_REPORT_STR_MAX, false);
	a.note = ev_str(e, "note", 1024, false);
	rev_list(e, "paths", "program", &a.paths);
	rev_list(e, "lines", NULL, &a.lines);
	pathaskrec *p = !e->bad && take_item(r) ? VEC_PUSH(r, r->pathasks) : NULL;
	if (!e->bad)
		r->path_answers++;
	if (p) {
		*p = a;
		return;
	}
	free(a.paths.path);
	free(a.paths.why);
	free(a.lines.path);
	free(a.lines.why);
	if (!e->bad)
		e->drop = true;
}

static void rev_free(revrec *v)
{
	free(v->applied.path);
	free(v->applied.why);
	free(v->left_out.path);
	free(v->left_out.why);
	free(v->failed.path);
	free(v->failed.why);
}

/* "review" (run --review, agentbox review / apply / discard) */
static void on_review(ev *e, session *s, int64_t ts)
{
	ab_report *r = e->r;
	revrec v = {.session = r->cur, .ts = ts, .diff = -1};
	v.action = ev_str(e, "action", SMALL_MAX, true);
	v.workspace = ev_str(e, "workspace", AB_REPORT_STR_MAX, false);
	v.change_set = ev_str(e, "change_set", AB_REPORT_STR_MAX, false);
	int64_t *n[] = {&v.changes, &v.added, &v.modified, &v.deleted, &v.pending, &v.status};
	static const char *const nk[] = {"changes", "added",   "modified",
					 "deleted", "pending", "status"};
	for (size_t i = 0; i < AB_ARRAY_SIZE(n); i++) {
		*n[i] = -1;
		ev_int(e, nk[i], 0, i == 5 ? 255 : INT64_MAX, n[i], false);
	}
	json_t *d = field(e, "diff"), *inc = field(e, "incomplete");
	if ((d && !json_is_boolean(d)) || (inc && !json_is_boolean(inc)))
		e->bad = true;
	v.diff = d ? json_is_true(d) : -1;
	v.incomplete = json_is_true(inc);
	rev_list(e, "applied", "reason", &v.applied);
	rev_list(e, "left_out", "reason", &v.left_out);
	rev_list(e, "failed", "error", &v.failed);
	revrec *p = !e->bad && take_item(r) ? VEC_PUSH(r, r->revs) : NULL;
	if (!e->bad)
		r->reviews++;
	if (p) {
		*p = v;
		return;
	}
	rev_free(&v);
	if (!e->bad)
		e->drop = true;
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

/* The N strings of an exec's argv pooled (capped: *CUT) in an array of
 * their own; false when they cannot be kept (e->drop, or r->oom). */
static bool pooled_argv(ev *e, json_t *av, size_t n, bool *cut, const char ***out)
{
	const char **argv = n ? calloc(n, sizeof(*argv)) : NULL;
	if (n && !argv) {
		e->r->oom = true;
		return false;
	}
	for (size_t i = 0; i < n; i++) {
		argv[i] = pool_json(e, json_array_get(av, i), AB_REPORT_ARG_MAX, cut);
		if (!argv[i]) {
			free(argv);
			e->drop = true;
			return false;
		}
	}
	*out = argv;
	return true;
}

/* C (its argv the model's from here on, COST bytes of it) into the current
 * session's tree: under the same pid's program when that has not exited
 * (the program it became), else under its ppid's command, if any. */
static void cmd_insert(ab_report *r, const cmd *c, size_t cost)
{
	uint64_t kp[5] = {K_PID, r->cur, (uint64_t)c->pid, 0, 0};
	uint64_t kpp[5] = {K_PID, r->cur, (uint64_t)c->ppid, 0, 0};
	uint32_t prev = rep_map_get(r, kp);
	uint32_t parent = NONE;
	bool same = prev != NONE && !r->cmds.v[prev].exited;
	if (same)
		parent = prev; /* the same process, a new program */
	else if (c->ppid >= 0)
		parent = rep_map_get(r, kpp);
	tent *slot = rep_map_slot(r, kp);
	cmd *n = slot ? VEC_PUSH(r, r->cmds) : NULL;
	if (!n) {
		free(c->argv);
		return;
	}
	r->bytes += cost;
	*n = *c;
	uint32_t i = (uint32_t)(r->cmds.n - 1);
	if (same)
		r->cmds.v[prev].replaced = true;
	cmd_add_child(r, parent, i);
	rep_map_set(r, slot, i);
	r->c.commands = r->cmds.n;
}

static void on_exec(ev *e, session *s, int64_t ts)
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
	const char **argv = NULL;
	if (!pooled_argv(e, av, n, &cut, &argv))
		return;
	cmd c = {.session = r->cur,
		 .first_child = NONE,
		 .last_child = NONE,
		 .next = NONE,
		 .pid = (int32_t)pid,
		 .ppid = (int32_t)ppid,
		 .cwd = cwd,
		 .path = path,
		 .argv = argv,
		 .argc = (uint32_t)n,
		 .truncated = cut,
		 .exec_ms = ts,
		 .ms = -1};
	cmd_insert(r, &c, cost);
}

static void on_exit_ev(ev *e, session *s, int64_t ts)
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
	uint32_t i = r->cur == NONE ? NONE : rep_map_get(r, kp);
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
	uint32_t i = name ? rep_map_get(r, k) : NONE;
	syspid *sp = i != NONE ? &r->syspids.v[i] : NULL;
	if (name && !sp) {
		agg *a = rep_agg_get(r, K_SYS, name, comm, NULL, NULL, 0);
		/* agg_get may have grown the map: look the slot up again */
		tent *t = a && take_item(r) ? rep_map_slot(r, k) : NULL;
		sp = t ? VEC_PUSH(r, r->syspids) : NULL;
		if (sp) {
			sp->agg = (uint32_t)(a - r->sys.v);
			rep_map_set(r, t, (uint32_t)(r->syspids.n - 1));
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

static void on_denied(ev *e, session *s, int64_t ts)
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
		agg *a = path ? rep_agg_get(r, K_FILE, path, op, comm, NULL, 0) : NULL;
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
		agg *a = path ? rep_agg_get(r, K_NET, path, "unix", comm, "EACCES", 0) : NULL;
		if (a)
			a->n++;
		else
			e->drop = true;
		return;
	}
	r->other_total++;
	agg *a = rep_agg_get(r, K_OTHER, kind, NULL, NULL, NULL, 0);
	if (a)
		a->n++;
	else
		e->drop = true;
}

static void on_trace(ev *e, session *s, int64_t ts)
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
	agg *a = rep_agg_get(r, K_NET, addr, family, comm, err, (uint32_t)port);
	if (a)
		a->n++;
	else
		e->drop = true;
}

/* "warning" (kind "git": a nested git repository the run armed, disarmed;
 * "unprotected": a "?" protect entry the run created; other kinds are shown
 * too): once per (session, kind, message), counted. */
static void on_warning(ev *e, session *s, int64_t ts)
{
	ab_report *r = e->r;
	const char *kind = ev_str(e, "kind", SMALL_MAX, false);
	const char *msg = ev_str(e, "message", AB_REPORT_STR_MAX, true);
	if (e->bad)
		return;
	r->warnings++;
	agg *a = msg ? rep_agg_get(r, K_WARN, kind, msg, NULL, NULL, r->cur) : NULL;
	if (a)
		a->n++;
	else
		e->drop = true;
}

/* "nested-git": a .git the run made or wrote to, kept off the host while
 * it lasted (read, not shown: the protection at work), or one it was
 * refused (docs/nested-git.md): shown with the warnings, kind "nested-git",
 * once per (session, action, call, path). */
static void on_nested_git(ev *e, session *s, int64_t ts)
{
	ab_report *r = e->r;
	const char *action = ev_str(e, "action", SMALL_MAX, false);
	const char *call = ev_str(e, "call", SMALL_MAX, false);
	const char *path = ev_str(e, "path", AB_REPORT_STR_MAX, true);
	if (e->bad || !action || !path)
		return;
	if (strcmp(action, "refused") != 0)
		return; /* kept off the host: the protection at work, not a finding */
	char msg[AB_REPORT_STR_MAX + 2 * SMALL_MAX + 8];
	int n = snprintf(msg, sizeof(msg), "%s: %s (%s)", action, path, call ? call : "?");
	const char *m = n > 0 ? rep_intern(r, msg, strnlen(msg, sizeof(msg) - 1)) : NULL;
	const char *kind = rep_intern(r, "nested-git", 10);
	r->warnings++;
	agg *a = m && kind ? rep_agg_get(r, K_WARN, kind, m, NULL, NULL, r->cur) : NULL;
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
	agg *a = path ? rep_agg_get(r, K_CRED, path, reason, NULL, NULL, !saved) : NULL;
	if (a)
		a->n++;
	else
		e->drop = true;
}

static void on_cred_saved(ev *e, session *s, int64_t ts)
{
	on_credentials(e, true);
}

static void on_cred_refused(ev *e, session *s, int64_t ts)
{
	on_credentials(e, false);
}

static void on_end(ev *e, session *s, int64_t ts)
{
	int64_t v = 0;
	s->has_end = true;
	s->end_ms = ts;
	if (ev_int(e, "status", 0, 255, &v, false))
		s->status = v;
}

static void on_denied_repeat(ev *e, session *s, int64_t ts)
{
	int64_t v = 0;
	const char *kind = ev_str(e, "kind", SMALL_MAX, false);
	if (kind && strcmp(kind, "syscall") != 0) {
		e->r->c.unknown++;
		return;
	}
	if (ev_int(e, "count", 0, INT64_MAX, &v, true))
		syscall_denial(e, false, (uint64_t)v);
}

static void on_suppressed(ev *e, session *s, int64_t ts)
{
	int64_t v = 0;
	if (ev_int(e, "count", 0, INT64_MAX, &v, true))
		e->r->suppressed = sat_add(e->r->suppressed, (uint64_t)v);
}

static void on_trace_lost(ev *e, session *s, int64_t ts)
{
	int64_t v = 0;
	if (ev_int(e, "count", 0, INT64_MAX, &v, true))
		e->r->trace_lost = sat_add(e->r->trace_lost, (uint64_t)v);
}

/* an optional secret whose source was absent (a name) */
static void on_secret_skipped(ev *e, session *s, int64_t ts)
{
	const char *sec = ev_str(e, "secret", SMALL_MAX, true);
	agg *a = sec ? rep_agg_get(e->r, K_SKIPPED, sec, NULL, NULL, NULL, 0) : NULL;
	if (a)
		a->n++;
	else if (!e->bad)
		e->drop = true;
}

/* the first of a (secret, host:port): the request lines' "elsewhere"
 * count them all */
static void on_elsewhere(ev *e, session *s, int64_t ts)
{
}

/* The events this version knows, each with its handler (S: the event's
 * session, a new one for a "start" when the current one has started). */
static const struct {
	const char *name;
	void (*fn)(ev *e, session *s, int64_t ts);
} handlers[] = {
	{"start", on_start},
	{"end", on_end},
	{"request", on_request},
	{"dns", on_dns},
	{"policy", on_policy},
	{"exec", on_exec},
	{"exit", on_exit_ev},
	{"denied", on_denied},
	{"denied-repeat", on_denied_repeat},
	{"suppressed", on_suppressed},
	{"trace", on_trace},
	{"trace-lost", on_trace_lost},
	{"secret-skipped", on_secret_skipped},
	{"warning", on_warning},
	{"nested-git", on_nested_git},
	{"credentials-saved", on_cred_saved},
	{"credentials-refused", on_cred_refused},
	{"placeholder-elsewhere", on_elsewhere},
	{"ask", on_ask},
	{"ask-path", on_ask_path},
	{"review", on_review},
};

void rep_on_event(ab_report *r, json_t *j)
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
		ts = rep_parse_ts(json_string_value(tsv), json_string_length(tsv));
	size_t k = 0;
	while (k < AB_ARRAY_SIZE(handlers) && strcmp(n, handlers[k].name) != 0)
		k++;
	if (k == AB_ARRAY_SIZE(handlers)) {
		r->c.events++;
		r->c.unknown++;
		return;
	}
	session *s = cur_session(r, handlers[k].fn == on_start);
	if (!s)
		return;
	if (ts != TS_NONE) {
		if (s->first_ms == TS_NONE)
			s->first_ms = ts;
		s->last_ms = ts;
	}
	handlers[k].fn(&e, s, ts);
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
