/* SPDX-License-Identifier: MIT */
/*
 * The egress proxy's audit lines (parent): one per request or connection,
 * with the decision and its rule, the bytes and the time, and the names of
 * the secrets whose placeholders were swapped, masked or sent elsewhere
 * (names, never values); the placeholder-elsewhere events.  docs/audit.md
 * describes them.
 */
#include <string.h>

#include "agentbox/broker.h"
#include "proxy_int.h"

static const char *side_name(const px_conn *c)
{
	return c->side == PX_EXPLICIT ? "explicit" : "transparent";
}

static json_t *event_base(px_conn *c, const char *method)
{
	json_t *ev = json_object();
	json_object_set_new(ev, "event", json_string("request"));
	json_object_set_new(ev, "conn", json_integer((json_int_t)c->id));
	json_object_set_new(ev, "side", json_string(side_name(c)));
	json_object_set_new(ev, "method", json_string(method[0] ? method : "?"));
	json_object_set_new(ev, "host", json_string(c->host[0] ? c->host : "?"));
	json_object_set_new(ev, "port", json_integer(c->port));
	return ev;
}

static void event_finish(px_conn *c, json_t *ev, const char *decision, const char *rule, int status,
			 uint64_t up, uint64_t down, uint64_t t0, const char *reason)
{
	json_object_set_new(ev, "decision", json_string(decision));
	json_object_set_new(ev, "rule", json_string(rule && rule[0] ? rule : "-"));
	json_object_set_new(ev, "status", json_integer(status));
	json_object_set_new(ev, "bytes_up", json_integer((json_int_t)up));
	json_object_set_new(ev, "bytes_down", json_integer((json_int_t)down));
	json_object_set_new(ev, "duration_ms", json_integer((json_int_t)(ab_now_ms() - t0)));
	if (c->dialled[0])
		json_object_set_new(ev, "addr", json_string(c->dialled));
	if (reason)
		json_object_set_new(ev, "reason", json_string(reason));
	ab_audit_emit(c->px->audit, ev);
	ab_audit_count(c->px->audit, c->host[0] ? c->host : "?", c->port,
		       strcmp(decision, "allow") == 0, up, down);
}

/* "masked": the secrets whose placeholders the body carried masked
 * (mask_in_body): names, never values. */
static void log_masked(px_conn *c, const px_req *r, json_t *ev)
{
	if (!r->masked_in_body || !c->px->broker)
		return;
	char names[AB_SECRETS_MAX * (AB_SECRET_NAME_MAX + 1) + 1];
	ab_secrets_names(c->px->broker->secs, c->px->broker->n, r->masked_in_body, names,
			 sizeof(names));
	json_object_set_new(ev, "masked", json_string(names));
}

/* "elsewhere": the secrets whose placeholders the request carried on,
 * unchanged, to this host, which they are not bound to: names, never
 * values nor placeholders. */
static void log_elsewhere(px_conn *c, const px_req *r, json_t *ev)
{
	uint64_t m = r->elsewhere_head | r->elsewhere_body;
	if (!m || !c->px->broker)
		return;
	char names[AB_SECRETS_MAX * (AB_SECRET_NAME_MAX + 1) + 1];
	ab_secrets_names(c->px->broker->secs, c->px->broker->n, m, names, sizeof(names));
	json_object_set_new(ev, "elsewhere", json_string(names));
}

/* After the request's line: count each of those secrets for the summary, and
 * the first time for a (secret, host:port), a placeholder-elsewhere event. */
static void note_elsewhere(px_conn *c, const px_req *r)
{
	const ab_broker *b = c->px->broker;
	uint64_t m = r->elsewhere_head | r->elsewhere_body;
	const char *host = c->host[0] ? c->host : "?";
	for (size_t i = 0; b && m && i < b->n && i < AB_SECRETS_MAX; i++) {
		uint64_t bit = (uint64_t)1 << i;
		if (!(m & bit))
			continue;
		int first = ab_audit_count_elsewhere(c->px->audit, b->secs[i].name, host, c->port);
		if (first < 0)
			c->px->elsewhere_suppressed++;
		if (first <= 0)
			continue;
		const char *where = (r->elsewhere_head & bit) && (r->elsewhere_body & bit)
					    ? "head,body"
				    : r->elsewhere_head & bit ? "head"
							      : "body";
		json_t *ev = json_object();
		json_object_set_new(ev, "event", json_string("placeholder-elsewhere"));
		json_object_set_new(ev, "secret", json_string(b->secs[i].name));
		json_object_set_new(ev, "host", json_string(host));
		json_object_set_new(ev, "port", json_integer(c->port));
		json_object_set_new(ev, "where", json_string(where));
		json_object_set_new(ev, "conn", json_integer((json_int_t)c->id));
		ab_audit_emit(c->px->audit, ev);
	}
}

/* A request's audit line, up to its decision. */
static json_t *request_event(px_conn *c, const px_req *r)
{
	json_t *ev = event_base(c, r->method);
	json_object_set_new(ev, "path", json_string(r->path));
	if (c->intercepted)
		json_object_set_new(ev, "intercepted", json_true());
	if (r->secrets && c->px->broker) { /* names, never values */
		char names[AB_SECRETS_MAX * (AB_SECRET_NAME_MAX + 1) + 1];
		ab_secrets_names(c->px->broker->secs, c->px->broker->n, r->secrets, names,
				 sizeof(names));
		json_object_set_new(ev, "secrets", json_string(names));
	}
	if (r->rotated && c->px->broker) { /* a token refresh: names, never values */
		char names[AB_SECRETS_MAX * (AB_SECRET_NAME_MAX + 1) + 1];
		ab_secrets_names(c->px->broker->secs, c->px->broker->n, r->rotated, names,
				 sizeof(names));
		json_object_set_new(ev, "rotated", json_string(names));
	}
	log_masked(c, r, ev);
	log_elsewhere(c, r, ev);
	return ev;
}

void px_log_request(px_conn *c, const px_req *r, const char *decision, int status)
{
	event_finish(c, request_event(c, r), decision, c->rule, status, r->up, r->down, r->t0,
		     NULL);
	note_elsewhere(c, r);
}

/* A request whose response agentbox refused (rule and reason say why). */
void px_log_refused(px_conn *c, const px_req *r, const char *rule, int status, const char *reason)
{
	event_finish(c, request_event(c, r), "deny", rule, status, r->up, r->down, r->t0, reason);
	note_elsewhere(c, r);
}

/* A request refused for carrying a placeholder where it may not go. */
void px_log_exfil(px_conn *c, const px_req *r, int status)
{
	json_t *ev = event_base(c, r->method);
	json_object_set_new(ev, "path", json_string(r->path));
	if (c->intercepted)
		json_object_set_new(ev, "intercepted", json_true());
	log_masked(c, r, ev);
	log_elsewhere(c, r, ev); /* a body cut after its head left */
	event_finish(c, ev, "deny", "exfiltration", status, 0, 0, r->t0, c->exfil);
	note_elsewhere(c, r);
}

/* A tunnel (or a connection that never became one) ends. */
void px_log_conn(px_conn *c, const char *decision, const char *rule, int status, const char *reason)
{
	if (c->logged)
		return;
	c->logged = true;
	json_t *ev = event_base(c, c->method);
	if (c->path[0])
		json_object_set_new(ev, "path", json_string(c->path));
	event_finish(c, ev, decision, rule, status, c->up, c->down, c->t0, reason);
}
