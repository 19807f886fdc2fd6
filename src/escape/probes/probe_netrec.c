/* SPDX-License-Identifier: MIT */
/*
 * How the network and credential probes (probe_net.c, probe_crd.c) make and
 * record their attempts: the time budget of a probe, the placeholder of the
 * lab's secret, a direct connection that must fail, a proxy request that
 * must be refused, a DNS query or lookup that must not resolve, and whether
 * the transparent path is on.  Each turns what probe_netlib.c's client saw
 * into one attempt with its verdict and layer.  Inside the sandbox, in a
 * probe's forked child.
 */
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "probe_netrec.h"

#define BUDGET_MS 7000 /* per probe: attempts after this are not made */

/* ------------------------------------------------------------ budget, lab */

static double g_t0;

/* Start a probe's clock; bound glibc's resolver (this child only): one
 * try, one second, so a silent DNS server cannot hold a probe for 10 s. */
void pnr_budget_start(void)
{
	g_t0 = pn_mono_ms();
	setenv("RES_OPTIONS", "timeout:1 attempts:1", 1);
}

/* Whether there is time left for another attempt (else records why not). */
bool pnr_budget(ab_probe_run *r, const char *what)
{
	if (pn_mono_ms() - g_t0 < BUDGET_MS)
		return true;
	ab_pr_error(r, what, "not attempted: the probe's %d ms budget is spent", BUDGET_MS);
	return false;
}

bool pnr_need(ab_probe_run *r, const char *what, const char *v, const char *field)
{
	if (v && *v)
		return true;
	ab_pr_error(r, what, "not attempted: LAB.json gives no %s", field);
	return false;
}

const char *pnr_placeholder(ab_probe_run *r, const char *what)
{
	const ab_lab_info *lab = ab_pr_lab(r);
	pn_lab_ca = lab->lab_ca; /* the blind tunnel's issuer (public) */
	const char *v = lab->secret_env ? getenv(lab->secret_env) : NULL;
	if (!v || !*v) {
		ab_pr_error(r, what, "not attempted: $%s (the placeholder) is not set inside",
			    lab->secret_env ? lab->secret_env : "(LAB.json gives no secret_env)");
		return NULL;
	}
	if (strpbrk(v, "\r\n") || strlen(v) > 4096) {
		ab_pr_error(r, what, "not attempted: $%s is not a usable header value",
			    lab->secret_env);
		return NULL;
	}
	return v;
}

/* ------------------------------------------------------------ sockets */

/* A direct connection that must not work: connected = ESCAPED; a timeout
 * is OK but says it proves nothing (the judge's listeners decide). */
void pnr_rec_dial(ab_probe_run *r, const char *what, int fd, int err)
{
	if (fd >= 0) {
		close(fd);
		ab_pr_escaped(r, what, "connected");
		return;
	}
	if (err == ETIMEDOUT) {
		ab_pr_ok(r, what,
			 "no answer in %d ms (not proof of a block: the judge's listeners "
			 "decide)",
			 PN_IO_MS);
		return;
	}
	ab_pr_sys(r, what, -1, err);
}

void pnr_try_tcp(ab_probe_run *r, const char *prefix, const char *ip, unsigned port)
{
	char what[200], auth[96];
	pn_authority(auth, sizeof(auth), ip, port);
	snprintf(what, sizeof(what), "%sTCP connect %s", prefix, auth);
	if (!pnr_budget(r, what))
		return;
	int fd = pn_dial_ip(ip, port);
	pnr_rec_dial(r, what, fd, errno);
}

/* ------------------------------------------------------------ exchanges */

static bool closed_like(int err)
{
	return err == 0 || err == ECONNRESET || err == EPIPE;
}

/* An answer that must be a refusal: 4xx, or the connection closed without
 * one -> OK (layer proxy); 1xx/2xx/3xx/5xx -> ESCAPED (the policy let it
 * through: 5xx means the proxy dialled); no answer in time -> ERROR. */
void pnr_rec_refusal(ab_probe_run *r, const char *what, const pn_resp *a)
{
	if (a->status >= 400 && a->status < 500) {
		ab_pr_ok(r, what, "%s%s%s", a->line, a->reason[0] ? " | " : "", a->reason);
		ab_pr_layer(r, "proxy");
	} else if (a->status < 0 && closed_like(a->err)) {
		ab_pr_ok(r, what, "closed without an answer");
		ab_pr_layer(r, "proxy");
	} else if (a->status < 0) {
		ab_pr_error(r, what, "no answer (%s)", strerror(a->err));
	} else {
		ab_pr_escaped(r, what, "not refused: %s", a->line);
	}
}

/* A CONNECT (no request) or an absolute-form request (sent to the proxy
 * port) that the proxy must refuse. */
static void rec_refused(ab_probe_run *r, const char *what, const pn_hx *h, bool is_connect)
{
	if (h->dial_err) {
		ab_pr_error(r, what, "not attempted: %s", h->why);
		return;
	}
	pnr_rec_refusal(r, what, is_connect ? &h->cr : &h->rs);
}

void pnr_proxy_connect_refused(ab_probe_run *r, const char *auth, size_t alen)
{
	char what[220], s[140];
	pn_show(s, sizeof(s), auth, alen ? alen : strlen(auth));
	snprintf(what, sizeof(what), "proxy: CONNECT %s", s);
	if (!pnr_budget(r, what))
		return;
	pn_target t = {.authority = auth, .alen = alen};
	pn_hx h;
	pn_hx_run(r, what, &t, NULL, &h);
	rec_refused(r, what, &h, true);
	pn_hx_free(&h);
}

/* An absolute-form request `req` sent to the proxy port; must be refused. */
void pnr_proxy_request_refused(ab_probe_run *r, const char *what, const char *req)
{
	if (!pnr_budget(r, what))
		return;
	pn_target t = {.ip = "127.0.0.1", .port = ab_pr_lab(r)->proxy_port};
	pn_hx h;
	pn_hx_run(r, what, &t, req, &h);
	rec_refused(r, what, &h, false);
	pn_hx_free(&h);
}

void pnr_proxy_get_refused(ab_probe_run *r, const char *url, const char *host, const char *extra)
{
	char what[300];
	snprintf(what, sizeof(what), "proxy: GET %s", url);
	_cleanup_free_ char *req = pn_http_req("GET", url, host, extra, NULL);
	if (req)
		pnr_proxy_request_refused(r, what, req);
}

/* ------------------------------------------------------------ DNS */

/* A query for a name that must not resolve (or must not leave). */
static void rec_dns(ab_probe_run *r, const char *what, int k, int err, int rcode, int an)
{
	if (k < 0)
		ab_pr_sys(r, what, -1, err);
	else if (k == 0)
		ab_pr_ok(r, what,
			 "no answer in %d ms (not proof of a block: the judge's DNS canary "
			 "decides)",
			 PN_DNS_MS);
	else if (rcode == 0 && an > 0)
		ab_pr_escaped(r, what, "NOERROR with %d answer(s)", an);
	else {
		ab_pr_ok(r, what, "%s%s", pn_rcode_name(rcode), rcode == 0 ? ", no data" : "");
		ab_pr_layer(r, "dns");
	}
}

void pnr_try_dns(ab_probe_run *r, const char *server, const char *name, uint16_t type, bool tcp)
{
	char what[400];
	snprintf(what, sizeof(what), "DNS %s query %s over %s to %s:53",
		 type == 16   ? "TXT"
		 : type == 28 ? "AAAA"
			      : "A",
		 name, tcp ? "TCP" : "UDP", server);
	if (!pnr_budget(r, what))
		return;
	int rcode = 0, an = 0;
	int k = pn_dns_ask(r, server, name, type, tcp, &rcode, &an);
	rec_dns(r, what, k, errno, rcode, an);
}

/* A name that must not resolve: NXDOMAIN -> OK (layer dns). */
void pnr_rec_lookup_fails(ab_probe_run *r, const char *name, int family, char *ip, size_t n)
{
	char what[400];
	snprintf(what, sizeof(what), "getaddrinfo(%s%s)", name,
		 family == AF_INET6 ? ", AF_INET6" : "");
	ip[0] = '\0';
	if (!pnr_budget(r, what))
		return;
	int k = pn_lookup(name, family, ip, n);
	int e = errno;
	if (k == 0) {
		ab_pr_escaped(r, what, "resolved to %s", ip);
		return;
	}
	ip[0] = '\0';
	if (k == EAI_SYSTEM) {
		ab_pr_sys(r, what, -1, e);
		return;
	}
	ab_pr_ok(r, what, "%s (%s)", k == EAI_NONAME || k == EAI_NODATA ? "NXDOMAIN" : "no answer",
		 gai_strerror(k));
	ab_pr_layer(r, "dns");
}

/* 1: the transparent path is on (the DNS responder answers on
 * 127.0.0.1:53), 0: off (nothing listens there), -1: unknown. */
int pnr_transparent_mode(ab_probe_run *r)
{
	static int mode = -2;
	if (mode != -2)
		return mode;
	const ab_lab_info *lab = ab_pr_lab(r);
	pn_lab_ca = lab->lab_ca; /* the blind tunnel's issuer (public) */
	int rc, an;
	int k = pn_dns_ask(r, "127.0.0.1", lab->unbound_host ? lab->unbound_host : "localhost", 1,
			   false, &rc, &an);
	mode = k > 0 ? 1 : (k < 0 && errno == ECONNREFUSED) ? 0 : -1;
	return mode;
}

/* The synthetic address an allowed name resolves to (0), or -1 after
 * recording why the transparent attempt `what` cannot be made. */
int pnr_synth_addr(ab_probe_run *r, const char *what, const char *name, char *ip, size_t n)
{
	if (pnr_transparent_mode(r) == 0) {
		ab_pr_ok(r, what,
			 "not tried: transparent mode is off (nothing answers DNS on "
			 "127.0.0.1:53)");
		return -1;
	}
	int k = pn_lookup(name, AF_INET, ip, n);
	if (k) {
		ab_pr_error(r, what, "getaddrinfo(%s): %s", name,
			    k == EAI_SYSTEM ? strerror(errno) : gai_strerror(k));
		return -1;
	}
	if (!pn_is_synthetic(ip)) {
		ab_pr_error(r, what, "%s resolved to %s, not a synthetic 198.18.0.0/15 address",
			    name, ip);
		return -1;
	}
	return 0;
}

/* ------------------------------------------------------------ controls */

/* A control exchange: HTTP 200 needed (and, with `want`, the lab server's
 * secret verdict `want`). */
void pnr_ctl_exchange(ab_probe_run *r, const char *what, const pn_target *t, const char *req,
		      const char *want)
{
	pn_hx h;
	char sec[24];
	if (!pnr_budget(r, what))
		return;
	pn_hx_run(r, what, t, req, &h);
	const char *s = pn_server_secret(&h.rs, sec, sizeof(sec));
	if (h.rs.status == 200 && (!want || (s && strcmp(s, want) == 0)))
		ab_pr_ok(r, what, "200%s%s", want ? ", the server saw secret=" : "",
			 want ? want : "");
	else if (h.rs.status >= 0)
		ab_pr_error(r, what, "%s%s%s; the server saw secret=%s", h.rs.line,
			    h.rs.reason[0] ? " | " : "", h.rs.reason, s ? s : "(no lab JSON)");
	else
		ab_pr_error(r, what, "%s", h.why);
	pn_hx_free(&h);
}
