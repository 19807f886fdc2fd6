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
#include <sys/stat.h>
#include <unistd.h>

#include "agentbox/netpolicy.h"
#include "plan_int.h"

static int add_port(ab_egress_plan *e, unsigned port, ab_err *err)
{
	if (port == 53 || port == e->proxy_port)
		return 0; /* served by the DNS responder / the explicit proxy itself */
	for (size_t i = 0; i < e->nports; i++)
		if (e->ports[i] == port)
			return 0;
	if (e->nports >= AB_EGRESS_MAX_PORTS)
		return ab_fail(err, 0,
			       "network: more than %d distinct destination ports in "
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
			return ab_fail(err, 0,
				       "network: rule %s uses port %u, which is the "
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
	int r = pl_add_mount(p, AB_MNT_CONTENT,
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
	r = pl_add_mount(p, AB_MNT_CONTENT, hosts, "/etc/hosts", 0, "network");
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
			char *w = strdup(
				"network.upstream_proxy is \"env\" but no HTTPS_PROXY/HTTP_PROXY "
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
		return ab_fail(err, EINVAL,
			       "upstream proxy: cannot use the %s URL (expected "
			       "http://HOST:PORT, without credentials)",
			       prof->net.upstream_proxy[0] == 'e' ? "HTTPS_PROXY/HTTP_PROXY"
								  : "profile's");
	if (!(e->upstream_host = strdup(host)))
		return ab_fail(err, ENOMEM, "plan");
	e->upstream_port = (uint16_t)port;
	return 0;
}

/* Every host a secret is bound to must be allowed: the proxy would refuse
 * it anyway, and a profile saying otherwise is a mistake worth an error. */
static int check_rotate(const ab_egress_plan *e, const struct ab_profile_secret *x, ab_err *err);

static int check_secret_hosts(const ab_egress_plan *e, ab_err *err)
{
	ab_netpolicy pol = {0};
	int r = 0;
	for (size_t i = 0; !r && i < e->deny.n; i++)
		r = ab_netpolicy_add(&pol, AB_NETLIST_DENY, e->deny.v[i], err);
	for (size_t i = 0; !r && i < e->allow.n; i++)
		r = ab_netpolicy_add(&pol, AB_NETLIST_ALLOW, e->allow.v[i], err);
	for (size_t i = 0; !r && i < e->priv.n; i++)
		r = ab_netpolicy_add(&pol, AB_NETLIST_PRIVATE, e->priv.v[i], err);
	for (size_t i = 0; !r && i < e->nsecrets; i++) {
		const struct ab_profile_secret *x = &e->secrets[i];
		for (size_t j = 0; !r && j < x->hosts.n; j++) {
			ab_netrule rule;
			if ((r = ab_netrule_parse(x->hosts.v[j], &rule, err)) < 0)
				break;
			char probe[AB_HOST_BUF + 32];
			snprintf(probe, sizeof(probe), "%s%s",
				 rule.wildcard ? "x-agentbox-probe." : "", rule.host);
			unsigned port = rule.port ? rule.port : 443;
			if (ab_netpolicy_check(&pol, probe, port, NULL) != AB_NET_ALLOW) {
				r = ab_fail(err, 0,
					    "profile: secret %s is bound to %s, which "
					    "network.allow does not allow",
					    x->name, rule.text);
				ab_err_hint(err,
					    "add it to network.allow (secrets only go where the "
					    "proxy may go)");
			}
		}
	}
	ab_netpolicy_free(&pol);
	for (size_t i = 0; !r && i < e->nsecrets; i++)
		r = check_rotate(e, &e->secrets[i], err);
	return r;
}

/* A token endpoint ("rotate") must be intercepted, so some secret is bound
 * to it; "optional": [NAMES] names secrets of this profile. */
static int check_rotate(const ab_egress_plan *e, const struct ab_profile_secret *x, ab_err *err)
{
	for (size_t j = 0; j < x->optional_unless.n; j++) {
		bool found = false;
		for (size_t k = 0; k < e->nsecrets && !found; k++)
			found = strcmp(e->secrets[k].name, x->optional_unless.v[j]) == 0;
		if (!found)
			return ab_fail(err, 0,
				       "profile: secret %s: \"optional\" names %s, which is "
				       "not a secret of this profile",
				       x->name, x->optional_unless.v[j]);
	}
	if (!x->rot_host)
		return 0;
	ab_netrule rot;
	int r = ab_netrule_parse(x->rot_host, &rot, err);
	if (r < 0)
		return r;
	for (size_t k = 0; k < e->nsecrets; k++) {
		ab_netpolicy pol = {0};
		bool bound = false;
		for (size_t j = 0; j < e->secrets[k].hosts.n; j++)
			if (ab_netpolicy_add(&pol, AB_NETLIST_ALLOW, e->secrets[k].hosts.v[j],
					     NULL) < 0)
				break;
		bound = ab_netpolicy_check(&pol, rot.host, rot.port ? rot.port : 443, NULL) ==
			AB_NET_ALLOW;
		ab_netpolicy_free(&pol);
		if (bound)
			return 0;
	}
	r = ab_fail(err, 0, "profile: secret %s rotates through %s, which no secret is bound to",
		    x->name, x->rot_host);
	ab_err_hint(err, "bind the refresh token's secret to that host (its response is only "
			 "seen when the proxy intercepts it)");
	return r;
}

/* With secrets, the proxy intercepts their hosts: the sandbox must trust the
 * session CA.  The combined bundle replaces the distro bundles in place and
 * both files appear under /run/agentbox for the variables; so does a Java
 * truststore (PKCS#12) of the same certificates, which also replaces Java's
 * distro truststores. */
static int plan_trust(ab_plan *p, const ab_plan_input *in)
{
	static const char *const distro[] = {
		"/etc/ssl/certs/ca-certificates.crt",
		"/etc/pki/tls/certs/ca-bundle.crt",
		"/etc/ssl/cert.pem",
		"/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem",
		"/etc/ssl/ca-bundle.pem",
	};
	int r = 0;
	for (size_t i = 0; !r && i < AB_ARRAY_SIZE(distro); i++) {
		struct stat st;
		if (in->lstat(in->lstat_ctx, distro[i], &st) == 0 && S_ISREG(st.st_mode))
			r = pl_add_mount(p, AB_MNT_CONTENT, NULL, distro[i], AB_MNT_F_RUNTIME,
					 "session CA");
	}
	if (!r)
		r = pl_add_mount(p, AB_MNT_CONTENT, NULL, AB_TRUST_BUNDLE, AB_MNT_F_RUNTIME,
				 "session CA");
	if (!r)
		r = pl_add_mount(p, AB_MNT_CONTENT, NULL, AB_TRUST_CA,
				 AB_MNT_F_RUNTIME | AB_MNT_F_CA_ONLY, "session CA");
	if (!r)
		r = pl_add_mount(p, AB_MNT_CONTENT, NULL, AB_TRUST_JAVA,
				 AB_MNT_F_RUNTIME | AB_MNT_F_JAVA, "session CA");
	/* Java's own default truststores (the JDKs' lib/security/cacerts link to
	 * them; "changeit" is their password): the PKCS#12 one replaces them */
	static const char *const java[] = {
		"/etc/ssl/certs/java/cacerts",
		"/etc/pki/ca-trust/extracted/java/cacerts",
	};
	for (size_t i = 0; !r && i < AB_ARRAY_SIZE(java); i++) {
		struct stat st;
		if (in->lstat(in->lstat_ctx, java[i], &st) == 0 && S_ISREG(st.st_mode))
			r = pl_add_mount(p, AB_MNT_CONTENT, NULL, java[i],
					 AB_MNT_F_RUNTIME | AB_MNT_F_JAVA, "session CA");
	}
	return r;
}

/* Credentials files a secret renders ("render"): present now, shown inside
 * with placeholders (the broker sends the content); absent, nothing is
 * mounted (the profile's deny keeps the path reserved). */
static int plan_rendered(ab_plan *p, const ab_plan_input *in)
{
	const ab_egress_plan *e = &p->egress;
	int r = 0;
	for (size_t i = 0; !r && i < e->nsecrets; i++) {
		const struct ab_profile_secret *x = &e->secrets[i];
		struct stat st;
		bool dup = false;
		if (!x->render)
			continue; /* only a rendered secret has a file (an env one has none) */
		for (size_t j = 0; j < i; j++)
			dup |= e->secrets[j].render &&
			       strcmp(e->secrets[j].src_file, x->src_file) == 0;
		if (dup || in->lstat(in->lstat_ctx, x->src_file, &st) < 0 || !S_ISREG(st.st_mode))
			continue;
		r = pl_add_mount(p, AB_MNT_CONTENT, NULL, x->src_file,
				 AB_MNT_F_RUNTIME | AB_MNT_F_RENDER, "credentials");
	}
	return r;
}

/* The proxy's port and mode, its rules and the local name mappings. */
static int egress_rules(ab_egress_plan *e, const ab_profile *prof, ab_err *err)
{
	e->proxy_port =
		(uint16_t)(prof->net.proxy_port ? prof->net.proxy_port : AB_PROXY_DEFAULT_PORT);
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
	return 0;
}

/* The transparent listeners' ports; loopback ports the sandbox serves itself
 * cannot double as listeners */
static int egress_ports(ab_egress_plan *e, const ab_profile *prof, ab_err *err)
{
	int r;
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
			return ab_fail(err, 0,
				       "profile: loopback_ports lists %ld, which agentbox "
				       "listens on inside the sandbox (proxy, DNS or a "
				       "transparent destination port)",
				       lp);
	}
	return 0;
}

/* Where the run is recorded (audit log, OTLP) and what the record names. */
static int egress_record(ab_egress_plan *e, const ab_profile *prof, const ab_plan_input *in,
			 ab_err *err)
{
	const char *log = in->log_path ? in->log_path : prof->net.log;
	if (log && !(e->log_path = strdup(log)))
		return ab_fail(err, ENOMEM, "plan");
	if (in->otlp_url) { /* checked by the caller (ab_otlp_parse_url) */
		if (!(e->otlp_url = strdup(in->otlp_url)))
			return ab_fail(err, ENOMEM, "plan");
	}
	if (ab_strv_copy(&e->grants, &prof->cli_grants) < 0)
		return ab_fail(err, ENOMEM, "plan");
	const char *name = prof->name ? prof->name : "default";
	if (!(e->profile_name = strdup(name)))
		return ab_fail(err, ENOMEM, "plan");
	e->summary = !in->quiet && (in->tty_mask & 4);
	return 0;
}

int pl_plan_egress(ab_plan *p, const ab_plan_input *in, ab_err *err)
{
	const ab_profile *prof = in->profile;
	ab_egress_plan *e = &p->egress;
	int r;
	if ((r = egress_rules(e, prof, err)) < 0 || (r = egress_ports(e, prof, err)) < 0 ||
	    (r = plan_upstream(e, prof, in, p, err)) < 0)
		return r;
	e->secrets = prof->secrets;
	e->nsecrets = prof->nsecrets;
	e->placeholder_elsewhere = prof->net.placeholder_elsewhere;
	if (prof->net.ca_file && !(e->ca_file = strdup(prof->net.ca_file)))
		return ab_fail(err, ENOMEM, "plan");
	if ((r = check_secret_hosts(e, err)) < 0)
		return r;
	if (e->nsecrets && (r = plan_trust(p, in)) < 0)
		return ab_fail(err, -r, "plan");
	if ((r = plan_rendered(p, in)) < 0)
		return ab_fail(err, -r, "plan");
	if ((r = egress_record(e, prof, in, err)) < 0)
		return r;
	if ((r = resolv_and_hosts(p)) < 0)
		return ab_fail(err, -r, "plan");
	return 0;
}

static void env_drop(ab_strv *env, const char *key)
{
	size_t kl = strlen(key);
	for (size_t i = 0; i < env->n;) {
		if (strncmp(env->v[i], key, kl) == 0 && env->v[i][kl] == '=') {
			explicit_bzero(env->v[i], strlen(env->v[i]));
			free(env->v[i]);
			memmove(&env->v[i], &env->v[i + 1], (env->n - i) * sizeof(char *));
			env->n--;
		} else {
			i++;
		}
	}
}

static int env_put(ab_strv *env, const char *key, const char *val)
{
	size_t kl = strlen(key);
	for (size_t i = 0; i < env->n; i++)
		if (strncmp(env->v[i], key, kl) == 0 && env->v[i][kl] == '=')
			return 0; /* the profile's env.set wins */
	return ab_strv_push_take(env, ab_asprintf("%s=%s", key, val));
}

// clang-format off
static const char *const proxy_vars[] = {
	"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy",
	"npm_config_proxy", "npm_config_https_proxy", "PIP_PROXY",
	"YARN_HTTP_PROXY", "YARN_HTTPS_PROXY",
};
// clang-format on

/* JAVA_TOOL_OPTIONS: with secrets, Java trusts the session CA through its own
 * truststore (its password only keys the integrity MAC) */
static void java_options(const ab_plan *p, char *java, size_t javasz)
{
	char port[8];
	snprintf(port, sizeof(port), "%u", (unsigned)p->egress.proxy_port);
	snprintf(java, javasz,
		 "-Dhttp.proxyHost=127.0.0.1 -Dhttp.proxyPort=%s -Dhttps.proxyHost=127.0.0.1 "
		 "-Dhttps.proxyPort=%s -Dhttp.nonProxyHosts=localhost|127.0.0.1|[::1]%s",
		 port, port,
		 p->egress.nsecrets ? " -Djavax.net.ssl.trustStore=" AB_TRUST_JAVA
				      " -Djavax.net.ssl.trustStoreType=PKCS12"
				      " -Djavax.net.ssl.trustStorePassword=" AB_TRUST_JAVA_PASSWORD
				    : "");
}

/* the host's proxy settings never cross (env.pass, env.set): these are ours */
static void drop_host_proxy_vars(ab_strv *env)
{
	static const char *const forced[] = {"NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy"};
	for (size_t i = 0; i < env->n;) {
		bool drop = false;
		for (size_t j = 0; j < AB_ARRAY_SIZE(forced); j++) {
			size_t kl = strlen(forced[j]);
			drop |= strncmp(env->v[i], forced[j], kl) == 0 && env->v[i][kl] == '=';
		}
		for (size_t j = 0; j < AB_ARRAY_SIZE(proxy_vars); j++) {
			size_t kl = strlen(proxy_vars[j]);
			drop |= strncmp(env->v[i], proxy_vars[j], kl) == 0 && env->v[i][kl] == '=';
		}
		if (drop) {
			free(env->v[i]);
			memmove(&env->v[i], &env->v[i + 1], (env->n - i) * sizeof(char *));
			env->n--;
		} else {
			i++;
		}
	}
}

/* a secret's real value never crosses, whatever env.pass says: its
 * variable is dropped here and set to the placeholder at run time */
static void drop_secret_vars(ab_plan *p)
{
	for (size_t s = 0; s < p->egress.nsecrets; s++) {
		const struct ab_profile_secret *x = &p->egress.secrets[s];
		const char *names[2] = {x->env_name && x->env_name[0] ? x->env_name : x->name,
					x->src == AB_PSECRET_ENV ? x->src_env : NULL};
		for (size_t k = 0; k < 2; k++)
			if (names[k])
				env_drop(&p->envp, names[k]);
	}
}

/* Returns 0 or -errno. */
static int put_egress_vars(ab_plan *p, const char *url, const char *java)
{
	int r = 0;
	for (size_t i = 0; !r && i < AB_ARRAY_SIZE(proxy_vars); i++)
		r = env_put(&p->envp, proxy_vars[i], url);
	if (p->egress.nsecrets) {
		static const char *const bundle_vars[] = {
			"SSL_CERT_FILE", "CURL_CA_BUNDLE",    "REQUESTS_CA_BUNDLE",
			"PIP_CERT",      "GIT_SSL_CAINFO",    "CODEX_CA_CERTIFICATE",
			"AWS_CA_BUNDLE", "CARGO_HTTP_CAINFO",
		};
		static const char *const ca_vars[] = {"NODE_EXTRA_CA_CERTS", "DENO_CERT"};
		for (size_t i = 0; !r && i < AB_ARRAY_SIZE(bundle_vars); i++)
			r = env_put(&p->envp, bundle_vars[i], AB_TRUST_BUNDLE);
		for (size_t i = 0; !r && i < AB_ARRAY_SIZE(ca_vars); i++)
			r = env_put(&p->envp, ca_vars[i], AB_TRUST_CA);
	}
	if (!r)
		r = env_put(&p->envp, "NO_PROXY", "localhost,127.0.0.1,::1");
	if (!r)
		r = env_put(&p->envp, "no_proxy", "localhost,127.0.0.1,::1");
	if (!r)
		r = env_put(&p->envp, "NODE_USE_ENV_PROXY", "1");
	if (!r)
		r = env_put(&p->envp, "JAVA_TOOL_OPTIONS", java);
	return r;
}

/* What common clients need to find the proxy (docs/egress.md).  NO_PROXY is
 * loopback only: the host's is never inherited (env.pass may not carry it
 * either: these names are overwritten). */
int pl_plan_egress_env(ab_plan *p, ab_err *err)
{
	char url[64], java[512];
	snprintf(url, sizeof(url), "http://127.0.0.1:%u", (unsigned)p->egress.proxy_port);
	java_options(p, java, sizeof(java));
	drop_host_proxy_vars(&p->envp);
	drop_secret_vars(p);
	int r = put_egress_vars(p, url, java);
	return r < 0 ? ab_fail(err, -r, "plan: environment") : 0;
}

void pl_egress_plan_free(ab_egress_plan *e)
{
	ab_strv_free(&e->allow);
	ab_strv_free(&e->deny);
	ab_strv_free(&e->priv);
	ab_strv_free(&e->hosts);
	free(e->log_path);
	free(e->otlp_url);
	free(e->upstream_host);
	free(e->ca_file);
	ab_strv_free(&e->no_proxy);
	free(e->profile_name);
	ab_strv_free(&e->grants);
	ab_strv_free(&e->downgrades);
	memset(e, 0, sizeof(*e));
}
