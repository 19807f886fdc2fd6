/* SPDX-License-Identifier: MIT */
/*
 * `agentbox explain --json`: the plan as one JSON object (explain.c has the
 * text).  Pure apart from writing to `out`; never a secret value.
 */
#include <errno.h>
#include <jansson.h>
#include <string.h>
#include <sys/resource.h>

#include "agentbox/host.h"
#include "agentbox/json_pos.h"
#include "explain_int.h"

/* ---- JSON ----
 * Builders return NULL on allocation failure; json_object_set_new() and
 * json_array_append_new() then fail (and free nothing twice), so one `bad`
 * flag per builder catches every error. */

static json_t *jstr(const char *s)
{
	return ab_json_string_lossy(s);
}

static json_t *strv_json(const ab_strv *v)
{
	json_t *a = json_array();
	int bad = !a;
	for (size_t i = 0; a && i < v->n; i++)
		bad |= json_array_append_new(a, jstr(v->v[i]));
	if (bad) {
		json_decref(a);
		return NULL;
	}
	return a;
}

static json_t *checked(json_t *o, int bad)
{
	if (bad || !o) {
		json_decref(o);
		return NULL;
	}
	return o;
}

static json_t *json_profile(const ab_profile *prof)
{
	json_t *o = json_object();
	int bad = !o;
	bad |= json_object_set_new(o, "name", prof && prof->name ? jstr(prof->name) : json_null());
	bad |= json_object_set_new(o, "files", prof ? strv_json(&prof->files) : json_array());
	bad |= json_object_set_new(o, "cli_grants",
				   prof ? strv_json(&prof->cli_grants) : json_array());
	bad |= json_object_set_new(o, "description",
				   prof && prof->description ? jstr(prof->description)
							     : json_null());
	json_t *d = json_object();
	bad |= !d;
	for (size_t i = 0; d && prof && i < prof->ndescr; i++) {
		_cleanup_free_ char *k = strdup(prof->descr[i].key);
		char *tab = k ? strchr(k, '\t') : NULL;
		if (!tab) {
			bad = 1;
			break;
		}
		*tab = '\0';
		json_t *l = json_object_get(d, k);
		if (!l) {
			l = json_object();
			bad |= json_object_set_new(d, k, l);
		}
		bad |= !l || json_object_set_new(l, tab + 1, jstr(prof->descr[i].val));
	}
	bad |= json_object_set_new(o, "descriptions", d);
	return checked(o, bad);
}

static json_t *json_identity(const ab_plan *p)
{
	json_t *o = json_object();
	int bad = !o;
	bad |= json_object_set_new(o, "inside_uid", json_integer(p->inside_uid));
	bad |= json_object_set_new(o, "inside_gid", json_integer(p->inside_gid));
	bad |= json_object_set_new(o, "host_uid", json_integer(p->map_kuid));
	bad |= json_object_set_new(o, "host_gid", json_integer(p->map_kgid));
	bad |= json_object_set_new(o, "caller_uid", json_integer(p->outer_uid));
	bad |= json_object_set_new(o, "caller_gid", json_integer(p->outer_gid));
	bad |= json_object_set_new(o, "root_mode", json_boolean(p->root_mode));
	bad |= json_object_set_new(o, "drop_groups", json_boolean(p->drop_groups));
	bad |= json_object_set_new(o, "user", p->user_name ? jstr(p->user_name) : json_null());
	bad |= json_object_set_new(o, "hostname", p->hostname ? jstr(p->hostname) : json_null());
	return checked(o, bad);
}

static json_t *json_mount(const ab_mount *m)
{
	static const struct {
		unsigned bit;
		const char *name;
	} fl[] = {{AB_MNT_F_DIR, "dir"},
		  {AB_MNT_F_OPTIONAL, "optional"},
		  {AB_MNT_F_IDMAP, "idmap"},
		  {AB_MNT_F_NOEXEC, "noexec"},
		  {AB_MNT_F_COPY, "private-copy"}};
	json_t *o = json_object(), *flags = json_array();
	int bad = !o || !flags;
	for (size_t i = 0; flags && i < AB_ARRAY_SIZE(fl); i++)
		if (m->flags & fl[i].bit)
			bad |= json_array_append_new(flags, jstr(fl[i].name));
	bad |= json_object_set_new(o, "kind", jstr(ab_mnt_kind_name(m->kind)));
	/* A CONTENT mount's src is file content, not a path: not repeated here. */
	bad |= json_object_set_new(
		o, "src", m->src && m->kind != AB_MNT_CONTENT ? jstr(m->src) : json_null());
	bad |= json_object_set_new(o, "dst", jstr(m->dst));
	if (m->copy)
		bad |= json_object_set_new(o, "copy", jstr(m->copy));
	bad |= json_object_set_new(o, "flags", flags);
	bad |= json_object_set_new(o, "why", m->why ? jstr(m->why) : json_null());
	return checked(o, bad);
}

static json_t *json_mounts(const ab_plan *p, bool (*pick)(const ab_plan *, const ab_mount *))
{
	json_t *a = json_array();
	int bad = !a;
	for (size_t i = 0; a && i < p->nmounts; i++) {
		if (!pick)
			bad |= json_array_append_new(a, json_mount(&p->mounts[i]));
		else if (pick(p, &p->mounts[i]))
			bad |= json_array_append_new(a, jstr(p->mounts[i].dst));
	}
	return checked(a, bad);
}

/* {"path", "key", "source"} per path git's configuration names. */
static json_t *json_gitcfg(const ab_plan *p)
{
	json_t *a = json_array();
	int bad = !a;
	for (size_t i = 0; a && i < p->gitcfg.n; i++) {
		_cleanup_free_ char *e = strdup(p->gitcfg.v[i]);
		char *key = e ? strchr(e, '\t') : NULL;
		char *src = key ? strchr(key + 1, '\t') : NULL;
		if (!src) {
			bad = 1;
			break;
		}
		*key++ = '\0';
		*src++ = '\0';
		bad |= json_array_append_new(a, json_pack("{s:o, s:o, s:o}", "path", jstr(e), "key",
							  jstr(key), "source", jstr(src)));
	}
	return checked(a, bad);
}

static json_t *json_hidden(const ab_plan *p)
{
	json_t *a = strv_json(&p->hidden);
	int bad = !a;
	for (size_t i = 0; a && i < p->nmounts; i++)
		if (ex_mask_listed(p, &p->mounts[i]))
			bad |= json_array_append_new(a, jstr(p->mounts[i].dst));
	return checked(a, bad);
}

static json_t *json_secrets(const ab_plan *p)
{
	const ab_egress_plan *e = &p->egress;
	json_t *a = json_array();
	int bad = !a;
	for (size_t i = 0; a && i < e->nsecrets; i++) {
		const struct ab_profile_secret *x = &e->secrets[i];
		char src[300], by[128];
		json_t *o = json_object();
		const char *var = x->env_name ? x->env_name : x->name;
		bad |= !o || json_object_set_new(o, "name", jstr(x->name)) ||
		       json_object_set_new(o, "source",
					   jstr(ex_secret_source(x, src, sizeof(src)))) ||
		       json_object_set_new(o, "hosts", strv_json(&x->hosts)) ||
		       json_object_set_new(o, "in", strv_json(&x->places)) ||
		       json_object_set_new(o, "mask_in_body", json_boolean(x->mask_in_body)) ||
		       json_object_set_new(o, "elsewhere",
					   jstr(ex_secret_elsewhere(e, x, by, sizeof(by)))) ||
		       json_object_set_new(o, "elsewhere_by", jstr(by)) ||
		       json_object_set_new(o, "optional", json_boolean(x->optional)) ||
		       json_object_set_new(o, "render", json_boolean(x->render)) ||
		       json_object_set_new(o, "env", var[0] ? jstr(var) : json_null());
		bad |= json_array_append_new(a, o);
	}
	return checked(a, bad);
}

static json_t *json_network(const ab_plan *p)
{
	const ab_ll_plan *ll = &p->landlock;
	const ab_egress_plan *e = &p->egress;
	json_t *o = json_object(), *ports, *tports = json_array();
	int bad = !o || !tports;
	if (ll->tcp_any) {
		ports = jstr("any");
	} else {
		ports = json_array();
		for (size_t i = 0; ports && i < ll->ntcp_ports; i++)
			bad |= json_array_append_new(ports, json_integer(ll->tcp_ports[i]));
	}
	for (size_t i = 0; tports && i < e->nports; i++)
		bad |= json_array_append_new(tports, json_integer(e->ports[i]));
	bad |= json_object_set_new(o, "mode", jstr("proxy"));
	bad |= json_object_set_new(o, "proxy_port", json_integer(e->proxy_port));
	bad |= json_object_set_new(o, "transparent", json_boolean(e->transparent));
	bad |= json_object_set_new(o, "transparent_ports", tports);
	bad |= json_object_set_new(o, "allow", strv_json(&e->allow));
	bad |= json_object_set_new(o, "deny", strv_json(&e->deny));
	bad |= json_object_set_new(o, "private", strv_json(&e->priv));
	bad |= json_object_set_new(o, "hosts", strv_json(&e->hosts));
	bad |= json_object_set_new(o, "log", e->log_path ? jstr(e->log_path) : json_null());
	if (e->upstream_host) {
		json_t *u = json_object();
		bad |= !u || json_object_set_new(u, "host", jstr(e->upstream_host)) ||
		       json_object_set_new(u, "port", json_integer(e->upstream_port)) ||
		       json_object_set_new(u, "no_proxy", strv_json(&e->no_proxy));
		bad |= json_object_set_new(o, "upstream_proxy", u);
	} else {
		bad |= json_object_set_new(o, "upstream_proxy", json_null());
	}
	bad |= json_object_set_new(o, "loopback_ports", ports);
	bad |= json_object_set_new(o, "loopback_ports_enforced",
				   json_boolean(ll->enabled && (ll->tcp_any || ll->handled_net)));
	return checked(o, bad);
}

static json_t *json_env(const ab_plan *p)
{
	json_t *o = json_object(), *names = json_array(), *values = json_object();
	int bad = !o || !names || !values;
	for (size_t i = 0; names && values && i < p->envp.n; i++) {
		const char *kv = p->envp.v[i];
		size_t len = strcspn(kv, "=");
		char *n = strndup(kv, len);
		json_t *name = n ? jstr(n) : NULL;
		free(n);
		bad |= json_array_append(names, name);
		if (name && kv[len] == '=' && ex_env_value_shown(kv, len))
			bad |= json_object_setn_new(values, kv, len, jstr(kv + len + 1));
		json_decref(name);
	}
	bad |= json_object_set_new(o, "names", names);
	bad |= json_object_set_new(o, "values", values);
	return checked(o, bad);
}

static json_t *json_landlock(const ab_plan *p)
{
	const ab_ll_plan *ll = &p->landlock;
	json_t *o = json_object(), *rules = json_array();
	int bad = !o || !rules;
	char rights[512];
	for (size_t i = 0; rules && i < ll->nrules; i++) {
		json_t *r = json_object();
		ex_rights_text(ll->rules[i].access, 0, rights, sizeof(rights));
		bad |= json_object_set_new(r, "path", jstr(ll->rules[i].path));
		bad |= json_object_set_new(r, "access", jstr(rights));
		bad |= json_object_set_new(r, "access_bits",
					   json_integer((json_int_t)ll->rules[i].access));
		bad |= json_array_append_new(rules, r);
	}
	bad |= json_object_set_new(o, "abi", json_integer(ll->abi));
	bad |= json_object_set_new(o, "enabled", json_boolean(ll->enabled));
	bad |= json_object_set_new(o, "handled_fs", json_integer((json_int_t)ll->handled_fs));
	bad |= json_object_set_new(o, "handled_net", json_integer((json_int_t)ll->handled_net));
	bad |= json_object_set_new(o, "scoped", json_integer((json_int_t)ll->scoped));
	bad |= json_object_set_new(o, "rules", rules);
	return checked(o, bad);
}

static json_t *rlim_json(rlim_t v)
{
	return v == RLIM_INFINITY ? jstr("unlimited") : json_integer((json_int_t)v);
}

static json_t *json_limits(const ab_plan *p)
{
	json_t *o = json_object(), *rl = json_object();
	int bad = !o || !rl;
	for (size_t i = 0; rl && i < p->nrlimits; i++) {
		json_t *r = json_object();
		bad |= json_object_set_new(r, "soft", rlim_json(p->rlimits[i].soft));
		bad |= json_object_set_new(r, "hard", rlim_json(p->rlimits[i].hard));
		if (p->rlimits[i].asked)
			bad |= json_object_set_new(r, "asked", rlim_json(p->rlimits[i].asked));
		bad |= json_object_set_new(rl, ex_rlimit_name(p->rlimits[i].resource), r);
	}
	bad |= json_object_set_new(o, "rlimits", rl);
	bad |= json_object_set_new(o, "memory",
				   p->cg_memory == AB_LIMIT_UNSET ? json_null()
								  : json_integer(p->cg_memory));
	bad |= json_object_set_new(
		o, "pids", p->cg_pids == AB_LIMIT_UNSET ? json_null() : json_integer(p->cg_pids));
	bad |= json_object_set_new(o, "cgroup", json_boolean(p->cgroup_apply));
	return checked(o, bad);
}

int ex_explain_json(const ab_plan *p, const ab_profile *prof, const ab_strv *sc, FILE *out)
{
	json_t *o = json_object();
	int bad = !o;
	bad |= json_object_set_new(o, "profile", json_profile(prof));
	bad |= json_object_set_new(o, "identity", json_identity(p));
	bad |= json_object_set_new(o, "workspace", jstr(p->workspace ? p->workspace : ""));
	bad |= json_object_set_new(o, "cwd", jstr(p->cwd ? p->cwd : ""));
	bad |= json_object_set_new(
		o, "ask",
		p->ask ? json_pack("{s:b, s:i}", "on", 1, "timeout_s", (json_int_t)p->ask_timeout_s)
		       : json_pack("{s:b}", "on", 0));
	if (p->review) { /* absent: "direct" */
		bad |= json_object_set_new(o, "workspace_mode", jstr("review"));
		bad |= json_object_set_new(o, "review_dir", jstr(p->review_dir));
	}
	bad |= json_object_set_new(o, "command", strv_json(&p->argv));
	bad |= json_object_set_new(o, "mounts", json_mounts(p, NULL));
	bad |= json_object_set_new(o, "readable", json_mounts(p, ex_pick_ro));
	bad |= json_object_set_new(o, "writable", json_mounts(p, ex_pick_rw));
	bad |= json_object_set_new(o, "hidden", json_hidden(p));
	bad |= json_object_set_new(o, "protected", json_mounts(p, ex_pick_protect));
	if (p->gitcfg.n)
		bad |= json_object_set_new(o, "gitconfig", json_gitcfg(p));
	if (p->guard.n)
		bad |= json_object_set_new(o, "guarded", strv_json(&p->guard));
	bad |= json_object_set_new(o, "absent", strv_json(&p->absent));
	bad |= json_object_set_new(o, "network", json_network(p));
	bad |= json_object_set_new(o, "secrets", json_secrets(p));
	bad |= json_object_set_new(o, "env", json_env(p));
	bad |= json_object_set_new(o, "seccomp",
				   p->seccomp.disabled ? json_array() : strv_json(sc));
	bad |= json_object_set_new(o, "seccomp_enabled", json_boolean(!p->seccomp.disabled));
	bad |= json_object_set_new(o, "setid_checked",
				   json_pack("{s:b, s:s?}", "enforced",
					     !p->seccomp.disabled && !p->seccomp.setid_unchecked,
					     "why", p->setid_why));
	bad |= json_object_set_new(o, "record",
				   json_pack("{s:b, s:b}", "exec", p->seccomp.notify_exec,
					     "denials", p->seccomp.notify_denials));
	bad |= json_object_set_new(o, "connect_mediated", json_boolean(p->seccomp.notify_connect));
	bad |= json_object_set_new(o, "nested_repos_disarmed", json_boolean(p->git_settle));
	bad |= json_object_set_new(o, "nested_repos_kept_off_host",
				   json_boolean(p->seccomp.notify_create));
	bad |= json_object_set_new(
		o, "keyring",
		p->keyring_skip ? json_pack("{s:s, s:s}", "session", "skipped", "refused",
					    strerrorname_np(p->keyring_skip)
						    ? strerrorname_np(p->keyring_skip)
						    : "?")
				: json_pack("{s:s}", "session", "fresh"));
	bad |= json_object_set_new(o, "landlock", json_landlock(p));
	bad |= json_object_set_new(o, "limits", json_limits(p));
	bad |= json_object_set_new(o, "pty", jstr(ex_pty_name(p)));
	bad |= json_object_set_new(o, "clipboard", jstr(p->pass_clipboard ? "passed" : "filtered"));
	bad |= json_object_set_new(o, "downgrades", strv_json(&p->downgrades));
	bad |= json_object_set_new(o, "warnings", strv_json(&p->warnings));
	if (!bad)
		bad = json_dumpf(o, out, JSON_INDENT(2)) < 0 || fputc('\n', out) == EOF;
	json_decref(o);
	return bad ? -ENOMEM : 0;
}
