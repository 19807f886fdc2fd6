/* SPDX-License-Identifier: MIT */
/*
 * The egress part of the plan (parent, pure): which listeners the child
 * creates inside the network namespace, the proxy variables of the sandbox's
 * environment, /etc/resolv.conf and /etc/hosts, and the policy texts the
 * proxy enforces.  See docs/egress.md.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "agentbox/netpolicy.h"
#include "agentbox/plan.h"

static int add_port(ab_egress_plan *e, unsigned port, ab_err *err)
{
	if (port == 53 || port == e->proxy_port)
		return 0; /* served by the DNS responder / the explicit proxy itself */
	for (size_t i = 0; i < e->nports; i++)
		if (e->ports[i] == port)
			return 0;
	if (e->nports >= AB_EGRESS_MAX_PORTS)
		return ab_fail(err, 0, "network: more than %d distinct destination ports in "
				       "network.allow/private (transparent mode listens on each)",
			       AB_EGRESS_MAX_PORTS);
	e->ports[e->nports++] = (uint16_t)port;
	return 0;
}

/* Ports named by the allow and private lists; a rule without a port means
 * 443 and 80. */
static int collect_ports(ab_egress_plan *e, const ab_strv *rules, ab_err *err)
{
	for (size_t i = 0; i < rules->n; i++) {
		ab_netrule r;
		int x = ab_netrule_parse(rules->v[i], &r, err);
		if (x < 0)
			return x;
		if (r.port == e->proxy_port)
			return ab_fail(err, 0, "network: rule %s uses port %u, which is the "
					       "sandbox's proxy port",
				       r.text, (unsigned)r.port);
		if (r.port) {
			x = add_port(e, r.port, err);
		} else {
			x = add_port(e, 443, err);
			if (x == 0)
				x = add_port(e, 80, err);
		}
		if (x < 0)
			return x;
	}
	return 0;
}

static int resolv_and_hosts(ab_plan *p)
{
	int r = ab_plan_add_mount(p, AB_MNT_CONTENT,
				  "# agentbox: the sandbox's own DNS responder; no query leaves it\n"
				  "nameserver 127.0.0.1\n"
				  "options edns0 trust-ad\n",
				  "/etc/resolv.conf", 0, "network");
	if (r < 0)
		return r;
	char *hosts = ab_asprintf("127.0.0.1\tlocalhost\n"
				  "::1\tlocalhost ip6-localhost ip6-loopback\n"
				  "127.0.1.1\t%s\n",
				  p->hostname);
	if (!hosts)
		return -ENOMEM;
	r = ab_plan_add_mount(p, AB_MNT_CONTENT, hosts, "/etc/hosts", 0, "network");
	free(hosts);
	return r;
}

static const char *env_get(char *const *env, const char *name)
{
	size_t n = strlen(name);
	for (; env && *env; env++)
		if (strncmp(*env, name, n) == 0 && (*env)[n] == '=')
			return *env + n + 1;
	return NULL;
}

/* network.upstream_proxy: "http://HOST:PORT", or "env" = agentbox's own
 * HTTPS_PROXY/https_proxy/HTTP_PROXY/http_proxy and NO_PROXY/no_proxy. */
static int plan_upstream(ab_egress_plan *e, const ab_profile *prof, const ab_plan_input *in,
			 ab_plan *p, ab_err *err)
{
	const char *url = prof->net.upstream_proxy;
	if (!url)
		return 0;
	if (strcmp(url, "env") == 0) {
		static const char *const names[] = {"HTTPS_PROXY", "https_proxy", "HTTP_PROXY",
						    "http_proxy"};
		url = NULL;
		for (size_t i = 0; !url && i < AB_ARRAY_SIZE(names); i++) {
			url = env_get(in->environ, names[i]);
			if (url && !url[0])
				url = NULL;
		}
		if (!url) {
			char *w = strdup("network.upstream_proxy is \"env\" but no HTTPS_PROXY/HTTP_PROXY "
					 "is set: connecting directly");
			if (!w || ab_strv_push_take(&p->warnings, w) < 0)
				return ab_fail(err, ENOMEM, "plan");
			return 0;
		}
		const char *np = env_get(in->environ, "NO_PROXY");
		if (!np)
			np = env_get(in->environ, "no_proxy");
		for (const char *q = np; q && *q;) {
			size_t n = strcspn(q, ", ");
			if (n) {
				char *item = strndup(q, n);
				if (!item || ab_strv_push_take(&e->no_proxy, item) < 0)
					return ab_fail(err, ENOMEM, "plan");
			}
			q += n;
			q += strspn(q, ", ");
		}
	}
	char host[AB_HOST_BUF];
	unsigned port;
	if (ab_upstream_proxy_parse(url, host, sizeof(host), &port) < 0)
		return ab_fail(err, EINVAL, "upstream proxy: cannot use the %s URL (expected "
					    "http://HOST:PORT, without credentials)",
			       prof->net.upstream_proxy[0] == 'e' ? "HTTPS_PROXY/HTTP_PROXY" : "profile's");
	if (!(e->upstream_host = strdup(host)))
		return ab_fail(err, ENOMEM, "plan");
	e->upstream_port = (uint16_t)port;
	return 0;
}

int ab_plan_egress(ab_plan *p, const ab_plan_input *in, ab_err *err)
{
	const ab_profile *prof = in->profile;
	ab_egress_plan *e = &p->egress;
	int r;
	e->proxy_port = (uint16_t)(prof->net.proxy_port ? prof->net.proxy_port
							: AB_PROXY_DEFAULT_PORT);
	e->transparent = prof->net.transparent != 0;
	if (ab_strv_copy(&e->allow, &prof->net.allow) < 0 ||
	    ab_strv_copy(&e->deny, &prof->net.deny) < 0 ||
	    ab_strv_copy(&e->priv, &prof->net.priv) < 0)
		return ab_fail(err, ENOMEM, "plan");
	for (size_t i = 0; i < prof->net.nhosts; i++) {
		char *kv = ab_asprintf("%s=%s", prof->net.hosts[i].key, prof->net.hosts[i].val);
		if (!kv || ab_strv_push_take(&e->hosts, kv) < 0)
			return ab_fail(err, ENOMEM, "plan");
	}
	/* loopback ports the sandbox serves itself cannot double as listeners */
	if (e->transparent) {
		if ((r = collect_ports(e, &e->allow, err)) < 0 ||
		    (r = collect_ports(e, &e->priv, err)) < 0)
			return ab_err_prefix(err, "profile");
	}
	for (size_t i = 0; i < prof->loopback.nports; i++) {
		long lp = prof->loopback.ports[i];
		bool clash = lp == e->proxy_port || (e->transparent && lp == 53);
		for (size_t j = 0; j < e->nports; j++)
			clash |= lp == e->ports[j];
		if (clash)
			return ab_fail(err, 0, "profile: loopback_ports lists %ld, which agentbox "
					       "listens on inside the sandbox (proxy, DNS or a "
					       "transparent destination port)",
				       lp);
	}
	if ((r = plan_upstream(e, prof, in, p, err)) < 0)
		return r;
	const char *log = in->log_path ? in->log_path : prof->net.log;
	if (log && !(e->log_path = strdup(log)))
		return ab_fail(err, ENOMEM, "plan");
	const char *name = prof->name ? prof->name : "default";
	if (!(e->profile_name = strdup(name)))
		return ab_fail(err, ENOMEM, "plan");
	e->summary = !in->quiet && (in->tty_mask & 4);
	if ((r = resolv_and_hosts(p)) < 0)
		return ab_fail(err, -r, "plan");
	return 0;
}

static int env_put(ab_strv *env, const char *key, const char *val)
{
	size_t kl = strlen(key);
	for (size_t i = 0; i < env->n; i++)
		if (strncmp(env->v[i], key, kl) == 0 && env->v[i][kl] == '=')
			return 0; /* the profile's env.set wins */
	return ab_strv_push_take(env, ab_asprintf("%s=%s", key, val));
}

/* What common clients need to find the proxy (guide/egress.md).  NO_PROXY is
 * loopback only: the host's is never inherited (env.pass may not carry it
 * either: these names are overwritten). */
int ab_plan_egress_env(ab_plan *p, ab_err *err)
{
	char url[64], port[8], java[256];
	snprintf(url, sizeof(url), "http://127.0.0.1:%u", (unsigned)p->egress.proxy_port);
	snprintf(port, sizeof(port), "%u", (unsigned)p->egress.proxy_port);
	snprintf(java, sizeof(java),
		 "-Dhttp.proxyHost=127.0.0.1 -Dhttp.proxyPort=%s -Dhttps.proxyHost=127.0.0.1 "
		 "-Dhttps.proxyPort=%s -Dhttp.nonProxyHosts=localhost|127.0.0.1|[::1]",
		 port, port);
	static const char *const proxy_vars[] = {
		"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy",
		"npm_config_proxy", "npm_config_https_proxy", "PIP_PROXY",
		"YARN_HTTP_PROXY", "YARN_HTTPS_PROXY",
	};
	static const char *const forced[] = {"NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy"};
	/* the host's proxy settings never cross (env.pass, env.set): these are ours */
	for (size_t i = 0; i < p->envp.n;) {
		bool drop = false;
		for (size_t j = 0; j < AB_ARRAY_SIZE(forced); j++) {
			size_t kl = strlen(forced[j]);
			drop |= strncmp(p->envp.v[i], forced[j], kl) == 0 && p->envp.v[i][kl] == '=';
		}
		for (size_t j = 0; j < AB_ARRAY_SIZE(proxy_vars); j++) {
			size_t kl = strlen(proxy_vars[j]);
			drop |= strncmp(p->envp.v[i], proxy_vars[j], kl) == 0 &&
				p->envp.v[i][kl] == '=';
		}
		if (drop) {
			free(p->envp.v[i]);
			memmove(&p->envp.v[i], &p->envp.v[i + 1], (p->envp.n - i) * sizeof(char *));
			p->envp.n--;
		} else {
			i++;
		}
	}
	int r = 0;
	for (size_t i = 0; !r && i < AB_ARRAY_SIZE(proxy_vars); i++)
		r = env_put(&p->envp, proxy_vars[i], url);
	if (!r)
		r = env_put(&p->envp, "NO_PROXY", "localhost,127.0.0.1,::1");
	if (!r)
		r = env_put(&p->envp, "no_proxy", "localhost,127.0.0.1,::1");
	if (!r)
		r = env_put(&p->envp, "NODE_USE_ENV_PROXY", "1");
	if (!r)
		r = env_put(&p->envp, "JAVA_TOOL_OPTIONS", java);
	return r < 0 ? ab_fail(err, -r, "plan: environment") : 0;
}

void ab_egress_plan_free(ab_egress_plan *e)
{
	ab_strv_free(&e->allow);
	ab_strv_free(&e->deny);
	ab_strv_free(&e->priv);
	ab_strv_free(&e->hosts);
	free(e->log_path);
	free(e->upstream_host);
	ab_strv_free(&e->no_proxy);
	free(e->profile_name);
	memset(e, 0, sizeof(*e));
}
