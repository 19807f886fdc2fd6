/* SPDX-License-Identifier: MIT */
/*
 * `agentbox report --json` (parent, pure): the model (report_int.h) as one
 * JSON object for tools, its lists one element per line.
 */
#include "report_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Compact elements, one per line; jansson escapes every string
 * (JSON_ENSURE_ASCII: no raw control or non-ASCII byte reaches the output). */
static int dump(FILE *out, json_t *j, const char *pre, const char *post)
{
	if (!j)
		return -ENOMEM;
	fputs(pre, out);
	int r = json_dumpf(
		j, out, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_ENSURE_ASCII | JSON_ENCODE_ANY);
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
	rep_fmt_ts(b, sizeof(b), t);
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
	_cleanup_free_ uint32_t *ix = rep_sorted(v, n, by_name);
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
	int64_t d = rep_session_ms(s);
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

/* The counters, as the head object left open: "{\n <keys>\n}" ->
 * "{\n <keys>," */
static int json_head(const ab_report *r, const ab_report_opts *o, FILE *out)
{
	json_t *head =
		json_pack("{s:i,s:o,s:o,s:o,s:o,s:o,s:o,s:o}", "version", 1, "source",
			  jstr(o ? o->source : NULL), "lines", ju(r->c.lines), "events",
			  ju(r->c.events), "bad_lines", ju(r->c.bad_lines), "first_bad_line",
			  jint((int64_t)r->c.first_bad, r->c.first_bad > 0), "unknown_events",
			  ju(r->c.unknown), "dropped_events", ju(r->c.dropped));
	if (!head)
		return -ENOMEM;
	_cleanup_free_ char *h =
		json_dumps(head, JSON_INDENT(1) | JSON_PRESERVE_ORDER | JSON_ENSURE_ASCII);
	json_decref(head);
	if (!h)
		return -ENOMEM;
	char *end = strrchr(h, '}');
	if (!end)
		return -ENOMEM;
	while (end > h && (end[-1] == '\n' || end[-1] == ' '))
		end--;
	fprintf(out, "%.*s,\n", (int)(end - h), h);
	return 0;
}

/* Sessions, warnings, commands: in log order, the index of a command is
 * its "id" */
static int json_runs(const ab_report *r, FILE *out)
{
	fputs("\"sessions\": [", out);
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
	return 0;
}

static int json_network(const ab_report *r, FILE *out)
{
	if (dump(out,
		 json_pack("{s:o,s:o,s:o,s:o,s:o}", "execs", ju(r->execs), "kept", ju(r->cmds.n),
			   "exits_without_exec", ju(r->exits_unmatched), "trace_execs",
			   ju(r->trace_exec), "trace_lost", ju(r->trace_lost)),
		 "\"command_counts\": ", ",\n") < 0)
		return -ENOMEM;
	if (dump(out,
		 json_pack("{s:o,s:o,s:o,s:o,s:o,s:o}", "requests_allowed", ju(r->req_allowed),
			   "requests_denied", ju(r->req_denied), "dns_allowed", ju(r->dns_allowed),
			   "dns_denied", ju(r->dns_denied), "connects_traced", ju(r->trace_connect),
			   "connects_failed", ju(r->trace_failed)),
		 "\"network_counts\": ", ",\n") < 0)
		return -ENOMEM;
	if (json_list(out, "reached", r->reached.v, r->reached.n, false, j_reached, ",\n") < 0 ||
	    json_list(out, "refused", r->refused.v, r->refused.n, false, j_refused, ",\n") < 0 ||
	    json_list(out, "dns_refused", r->dns.v, r->dns.n, false, j_dns, ",\n") < 0)
		return -ENOMEM;
	return 0;
}

/* Denials, secrets and credentials files */
static int json_denials(const ab_report *r, FILE *out)
{
	uint64_t net = sat_add(sat_add(r->req_denied, r->dns_denied), r->net_total);
	uint64_t total =
		sat_add(sat_add(sat_add(r->sys_total, r->file_total), net), r->other_total);
	if (dump(out,
		 json_pack("{s:o,s:o,s:o,s:o,s:o,s:o}", "total", ju(total), "syscall",
			   ju(r->sys_total), "file", ju(r->file_total), "network", ju(net), "other",
			   ju(r->other_total), "suppressed", ju(r->suppressed)),
		 "\"denial_counts\": ", ",\n") < 0)
		return -ENOMEM;
	if (json_list(out, "denied_syscalls", r->sys.v, r->sys.n, false, j_sys, ",\n") < 0 ||
	    json_list(out, "denied_files", r->file.v, r->file.n, false, j_file, ",\n") < 0 ||
	    json_list(out, "denied_connects", r->net.v, r->net.n, false, j_net, ",\n") < 0 ||
	    json_list(out, "denied_other", r->other.v, r->other.n, false, j_other, ",\n") < 0 ||
	    json_list(out, "secrets", r->secrets.v, r->secrets.n, true, j_secret, ",\n") < 0 ||
	    json_list(out, "secrets_skipped", r->skipped.v, r->skipped.n, true, j_skipped, ",\n") <
		    0 ||
	    json_list(out, "credentials_files", r->creds.v, r->creds.n, true, j_cred, ",\n") < 0)
		return -ENOMEM;
	return 0;
}

static int json_policy(const ab_report *r, FILE *out)
{
	fputs("\"policy\": [", out);
	for (size_t i = 0; i < r->pol.n; i++) {
		const policy *p = &r->pol.v[i];
		json_t *j = json_pack("{s:I,s:o,s:o,s:o,s:o,s:o}", "session",
				      (json_int_t)p->session + 1, "ts", jts(p->ts), "action",
				      jstr(p->action), "rule", jstr(p->rule), "by_pid",
				      jint(p->by_pid, p->by_pid >= 0), "by", jstr(p->by));
		if (dump(out, j, i ? ",\n  " : "\n  ", "") < 0)
			return -ENOMEM;
	}
	fprintf(out, "%s],\n\"policy_changes\": %llu,\n", r->pol.n ? "\n" : "",
		(unsigned long long)r->policies);
	return 0;
}

/* run --ask's answers */
static int json_asks(const ab_report *r, FILE *out)
{
	fputs("\"asks\": [", out);
	for (size_t i = 0; i < r->asks.n; i++) {
		const askrec *a = &r->asks.v[i];
		json_t *j = json_pack("{s:I,s:o,s:o,s:I,s:o,s:o,s:o,s:o,s:o,s:o}", "session",
				      (json_int_t)a->session + 1, "ts", jts(a->ts), "host",
				      jstr(a->host), "port", (json_int_t)a->port, "request",
				      jstr(a->request), "program", jstr(a->program), "answer",
				      jstr(a->answer), "waited_ms",
				      jint(a->waited_ms, a->waited_ms >= 0), "profile",
				      jstr(a->profile), "note", jstr(a->note));
		if (dump(out, j, i ? ",\n  " : "\n  ", "") < 0)
			return -ENOMEM;
	}
	fprintf(out, "%s],\n\"ask_counts\": {\"questions\": %llu, \"answers\": %llu},\n",
		r->asks.n ? "\n" : "", (unsigned long long)r->ask_questions,
		(unsigned long long)r->ask_answers);
	return 0;
}

static json_t *jpaths(const pathlist *l, const char *why_key)
{
	json_t *a = json_array();
	for (uint32_t i = 0; a && i < l->n; i++)
		json_array_append_new(a, why_key ? json_pack("{s:o,s:o}", "path", jstr(l->path[i]),
							     why_key, jstr(l->why[i]))
						 : jstr(l->path[i]));
	return a;
}

static json_t *j_review(const revrec *v)
{
	json_t *j = json_pack("{s:I,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:b,s:o}", "session",
			      (json_int_t)v->session + 1, "ts", jts(v->ts), "action",
			      jstr(v->action), "workspace", jstr(v->workspace), "change_set",
			      jstr(v->change_set), "changes", jint(v->changes, v->changes >= 0),
			      "added", jint(v->added, v->added >= 0), "modified",
			      jint(v->modified, v->modified >= 0), "deleted",
			      jint(v->deleted, v->deleted >= 0), "incomplete", v->incomplete,
			      "diff", v->diff < 0 ? json_null() : json_boolean(v->diff));
	if (!j)
		return NULL;
	const pathlist *l[] = {&v->applied, &v->left_out, &v->failed};
	static const char *const key[] = {"applied", "left_out", "failed"};
	static const char *const why[] = {NULL, "reason", "error"};
	for (size_t k = 0; k < 3; k++) {
		char nkey[32];
		snprintf(nkey, sizeof(nkey), "n_%s", key[k]);
		bool have = l[k]->total >= 0 || l[k]->n;
		json_object_set_new(j, key[k], have ? jpaths(l[k], why[k]) : json_null());
		json_object_set_new(j, nkey,
				    l[k]->total >= 0 ? json_integer(l[k]->total)
				    : have           ? json_integer(l[k]->n)
						     : json_null());
	}
	json_object_set_new(j, "pending", jint(v->pending, v->pending >= 0));
	json_object_set_new(j, "status", jint(v->status, v->status >= 0));
	return j;
}

/* run --ask's offers of refused paths at exit */
static int json_path_asks(const ab_report *r, FILE *out)
{
	fputs("\"path_asks\": [", out);
	for (size_t i = 0; i < r->pathasks.n; i++) {
		const pathaskrec *a = &r->pathasks.v[i];
		json_t *j = json_pack(
			"{s:I,s:o,s:o,s:o,s:o,s:o,s:o,s:o}", "session", (json_int_t)a->session + 1,
			"ts", jts(a->ts), "answer", jstr(a->answer), "waited_ms",
			jint(a->waited_ms, a->waited_ms >= 0), "profile", jstr(a->profile), "note",
			jstr(a->note), "paths", jpaths(&a->paths, "program"), "lines",
			jpaths(&a->lines, NULL));
		if (dump(out, j, i ? ",\n  " : "\n  ", "") < 0)
			return -ENOMEM;
	}
	fprintf(out, "%s],\n\"path_ask_counts\": {\"offers\": %llu, \"answers\": %llu},\n",
		r->pathasks.n ? "\n" : "", (unsigned long long)r->path_offers,
		(unsigned long long)r->path_answers);
	return 0;
}

/* run --review's steps, then the end of the object */
static int json_review(const ab_report *r, FILE *out)
{
	fputs("\"review\": [", out);
	for (size_t i = 0; i < r->revs.n; i++)
		if (dump(out, j_review(&r->revs.v[i]), i ? ",\n  " : "\n  ", "") < 0)
			return -ENOMEM;
	fprintf(out, "%s],\n\"review_events\": %llu\n}\n", r->revs.n ? "\n" : "",
		(unsigned long long)r->reviews);
	return 0;
}

int ab_report_json(const ab_report *r, const ab_report_opts *o, FILE *out)
{
	if (json_head(r, o, out) < 0 || json_runs(r, out) < 0 || json_network(r, out) < 0 ||
	    json_denials(r, out) < 0 || json_policy(r, out) < 0 || json_asks(r, out) < 0 ||
	    json_path_asks(r, out) < 0 || json_review(r, out) < 0)
		return -ENOMEM;
	return fflush(out) == 0 && !ferror(out) ? 0 : -EIO;
}
