/* SPDX-License-Identifier: MIT */
/*
 * LAB.json: the public facts the harness (host side) tells the probes
 * (inside).  No canary value ever goes in here.  Any process.
 */
#include <errno.h>
#include <string.h>

#include "agentbox/escape.h"

static int put_str(json_t *o, const char *k, const char *v)
{
	return v ? json_object_set_new(o, k, json_string(v)) : 0;
}

static int put_strv(json_t *o, const char *k, const ab_strv *s)
{
	json_t *a = json_array();
	if (!a)
		return -1;
	for (size_t i = 0; i < s->n; i++)
		if (json_array_append_new(a, json_string(s->v[i])) < 0) {
			json_decref(a);
			return -1;
		}
	return json_object_set_new(o, k, a);
}

int ab_lab_info_to_json(const ab_lab_info *l, json_t **out, ab_err *err)
{
	json_t *o = json_object();
	int bad = !o;
	if (!bad) {
		bad |= put_str(o, "run_id", l->run_id) | put_str(o, "home", l->home) |
		       put_str(o, "workspace", l->workspace) | put_str(o, "sibling", l->sibling) |
		       put_str(o, "runtime_dir", l->runtime_dir) |
		       put_strv(o, "agent_sockets", &l->agent_sockets) |
		       json_object_set_new(o, "judge_port", json_integer(l->judge_port)) |
		       put_strv(o, "host_addrs", &l->host_addrs) |
		       put_strv(o, "metadata", &l->metadata) |
		       put_str(o, "bound_host", l->bound_host) |
		       put_str(o, "unbound_host", l->unbound_host) |
		       put_str(o, "denied_host", l->denied_host) |
		       put_str(o, "canary_domain", l->canary_domain) |
		       json_object_set_new(o, "https_port", json_integer(l->https_port)) |
		       json_object_set_new(o, "proxy_port", json_integer(l->proxy_port)) |
		       put_str(o, "secret_env", l->secret_env) |
		       put_str(o, "secret_header", l->secret_header) |
		       put_str(o, "lab_ca", l->lab_ca) |
		       json_object_set_new(o, "canary_pid", json_integer(l->canary_pid)) |
		       json_object_set_new(o, "harness_pid", json_integer(l->harness_pid)) |
		       put_strv(o, "only", &l->only);
	}
	if (bad) {
		json_decref(o);
		return ab_fail(err, ENOMEM, "lab description");
	}
	*out = o;
	return 0;
}

static int get_str(json_t *o, const char *k, char **dst, ab_err *err)
{
	json_t *v = json_object_get(o, k);
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_string(v))
		return ab_fail(err, EINVAL, "lab description: %s: not a string", k);
	*dst = strdup(json_string_value(v));
	return *dst ? 0 : ab_fail(err, ENOMEM, "lab description");
}

static int get_strv(json_t *o, const char *k, ab_strv *dst, ab_err *err)
{
	json_t *a = json_object_get(o, k), *v;
	size_t i;
	if (!a)
		return 0;
	if (!json_is_array(a))
		return ab_fail(err, EINVAL, "lab description: %s: not an array", k);
	json_array_foreach(a, i, v)
	{
		if (!json_is_string(v))
			return ab_fail(err, EINVAL, "lab description: %s[%zu]: not a string", k, i);
		if (ab_strv_push(dst, json_string_value(v)) < 0)
			return ab_fail(err, ENOMEM, "lab description");
	}
	return 0;
}

static int get_int(json_t *o, const char *k, long long lo, long long hi, long long *dst,
		   ab_err *err)
{
	json_t *v = json_object_get(o, k);
	if (!v)
		return 0;
	if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi)
		return ab_fail(err, EINVAL, "lab description: %s: not an integer in %lld..%lld", k,
			       lo, hi);
	*dst = json_integer_value(v);
	return 0;
}

int ab_lab_info_from_json(json_t *j, ab_lab_info *l, ab_err *err)
{
	memset(l, 0, sizeof(*l));
	if (!json_is_object(j))
		return ab_fail(err, EINVAL, "lab description: not an object");
	long long jp = 0, hp = 443, pp = 3128, cpid = 0, hpid = 0;
	int r = 0;
	struct {
		const char *k;
		char **d;
	} strs[] = {{"run_id", &l->run_id},
		    {"home", &l->home},
		    {"workspace", &l->workspace},
		    {"sibling", &l->sibling},
		    {"runtime_dir", &l->runtime_dir},
		    {"bound_host", &l->bound_host},
		    {"unbound_host", &l->unbound_host},
		    {"denied_host", &l->denied_host},
		    {"canary_domain", &l->canary_domain},
		    {"secret_env", &l->secret_env},
		    {"secret_header", &l->secret_header},
		    {"lab_ca", &l->lab_ca}};
	for (size_t i = 0; r >= 0 && i < sizeof(strs) / sizeof(strs[0]); i++)
		r = get_str(j, strs[i].k, strs[i].d, err);
	if (r >= 0)
		r = get_strv(j, "agent_sockets", &l->agent_sockets, err);
	if (r >= 0)
		r = get_strv(j, "host_addrs", &l->host_addrs, err);
	if (r >= 0)
		r = get_strv(j, "metadata", &l->metadata, err);
	if (r >= 0)
		r = get_strv(j, "only", &l->only, err);
	if (r >= 0)
		r = get_int(j, "judge_port", 0, 65535, &jp, err);
	if (r >= 0)
		r = get_int(j, "https_port", 1, 65535, &hp, err);
	if (r >= 0)
		r = get_int(j, "proxy_port", 1, 65535, &pp, err);
	if (r >= 0)
		r = get_int(j, "canary_pid", 0, 1 << 30, &cpid, err);
	if (r >= 0)
		r = get_int(j, "harness_pid", 0, 1 << 30, &hpid, err);
	if (r < 0) {
		ab_lab_info_free(l);
		return r;
	}
	l->judge_port = (uint16_t)jp;
	l->https_port = (uint16_t)hp;
	l->proxy_port = (uint16_t)pp;
	l->canary_pid = (pid_t)cpid;
	l->harness_pid = (pid_t)hpid;
	if (!l->run_id || !l->home || !l->workspace) {
		ab_lab_info_free(l);
		return ab_fail(err, EINVAL,
			       "lab description: run_id, home and workspace are required");
	}
	return 0;
}

int ab_lab_info_load(const char *path, ab_lab_info *out, ab_err *err)
{
	json_error_t je;
	json_t *j = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
	if (!j)
		return ab_fail(err, EINVAL, "%s:%d:%d: %s", path, je.line, je.column, je.text);
	int r = ab_lab_info_from_json(j, out, err);
	json_decref(j);
	return r;
}

void ab_lab_info_free(ab_lab_info *l)
{
	char **s[] = {&l->run_id,        &l->home,       &l->workspace,     &l->sibling,
		      &l->runtime_dir,   &l->bound_host, &l->unbound_host,  &l->denied_host,
		      &l->canary_domain, &l->secret_env, &l->secret_header, &l->host_git_marker,
		      &l->lab_ca};
	for (size_t i = 0; i < sizeof(s) / sizeof(s[0]); i++) {
		free(*s[i]);
		*s[i] = NULL;
	}
	ab_strv_free(&l->agent_sockets);
	ab_strv_free(&l->host_addrs);
	ab_strv_free(&l->metadata);
	ab_strv_free(&l->only);
}
