/* SPDX-License-Identifier: MIT */
/*
 * Network and credential probes of `agentbox test-escape`: CTL-02, CTL-03
 * (positive controls: the proxy and the secret swap work), CRD-01 (agent
 * sockets), CRD-03 (the placeholder where it must not become the secret),
 * NET-01, NET-02, NET-06, NET-08, NET-09 (direct egress, DNS and raw
 * sockets, the host's loopback, cloud metadata, proxy host forms).
 *
 * Runs INSIDE the sandbox, each probe in its own forked child of the runner
 * (src/escape/probes/runner.c), through the small client of probe_netlib.c.
 * Connect-only or one request per attempt, 1.5 s timeouts, a time budget
 * per probe; every byte read is scanned for canaries (ab_pr_scan) and only
 * cleaned status lines reach the results.  The judge (host side) counts
 * what its listeners, DNS canary and HTTPS servers saw.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <linux/if_ether.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/vm_sockets.h>
#include <net/if.h>

#include <openssl/evp.h>

#include "agentbox/control.h"
#include "agentbox/escape.h"
#include "probe_netlib.h"

#ifndef IPPROTO_MPTCP
#define IPPROTO_MPTCP 262
#endif
#ifndef SOCK_DCCP
#define SOCK_DCCP 6
#endif

#define BUDGET_MS 7000 /* per probe: attempts after this are not made */

/* ------------------------------------------------------------ basics */

static double g_t0;

/* Start a probe's clock; bound glibc's resolver (this child only): one
 * try, one second, so a silent DNS server cannot hold a probe for 10 s. */
static void budget_start(void)
{
	g_t0 = pn_mono_ms();
	setenv("RES_OPTIONS", "timeout:1 attempts:1", 1);
}

/* Whether there is time left for another attempt (else records why not). */
static bool budget(ab_probe_run *r, const char *what)
{
	if (pn_mono_ms() - g_t0 < BUDGET_MS)
		return true;
	ab_pr_error(r, what, "not attempted: the probe's %d ms budget is spent", BUDGET_MS);
	return false;
}

static bool need(ab_probe_run *r, const char *what, const char *v, const char *field)
{
	if (v && *v)
		return true;
	ab_pr_error(r, what, "not attempted: LAB.json gives no %s", field);
	return false;
}

static const char *placeholder(ab_probe_run *r, const char *what)
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
static void rec_dial(ab_probe_run *r, const char *what, int fd, int err)
{
	if (fd >= 0) {
		close(fd);
		ab_pr_escaped(r, what, "connected");
		return;
	}
	if (err == ETIMEDOUT) {
		ab_pr_ok(r, what, "no answer in %d ms (not proof of a block: the judge's listeners "
			 "decide)", PN_IO_MS);
		return;
	}
	ab_pr_sys(r, what, -1, err);
}

static void try_tcp(ab_probe_run *r, const char *prefix, const char *ip, unsigned port)
{
	char what[200], auth[96];
	pn_authority(auth, sizeof(auth), ip, port);
	snprintf(what, sizeof(what), "%sTCP connect %s", prefix, auth);
	if (!budget(r, what))
		return;
	int fd = pn_dial_ip(ip, port);
	rec_dial(r, what, fd, errno);
}

/* ------------------------------------------------------------ exchanges */

static bool closed_like(int err)
{
	return err == 0 || err == ECONNRESET || err == EPIPE;
}

/* An answer that must be a refusal: 4xx, or the connection closed without
 * one -> OK (layer proxy); 1xx/2xx/3xx/5xx -> ESCAPED (the policy let it
 * through: 5xx means the proxy dialled); no answer in time -> ERROR. */
static void rec_refusal(ab_probe_run *r, const char *what, const pn_resp *a)
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
	rec_refusal(r, what, is_connect ? &h->cr : &h->rs);
}

static void proxy_connect_refused(ab_probe_run *r, const char *auth, size_t alen)
{
	char what[220], s[140];
	pn_show(s, sizeof(s), auth, alen ? alen : strlen(auth));
	snprintf(what, sizeof(what), "proxy: CONNECT %s", s);
	if (!budget(r, what))
		return;
	pn_target t = {.authority = auth, .alen = alen};
	pn_hx h;
	pn_hx_run(r, what, &t, NULL, &h);
	rec_refused(r, what, &h, true);
	pn_hx_free(&h);
}

/* An absolute-form request `req` sent to the proxy port; must be refused. */
static void proxy_request_refused(ab_probe_run *r, const char *what, const char *req)
{
	if (!budget(r, what))
		return;
	pn_target t = {.ip = "127.0.0.1", .port = ab_pr_lab(r)->proxy_port};
	pn_hx h;
	pn_hx_run(r, what, &t, req, &h);
	rec_refused(r, what, &h, false);
	pn_hx_free(&h);
}

static void proxy_get_refused(ab_probe_run *r, const char *url, const char *host,
			      const char *extra)
{
	char what[300];
	snprintf(what, sizeof(what), "proxy: GET %s", url);
	_cleanup_free_ char *req = pn_http_req("GET", url, host, extra, NULL);
	if (req)
		proxy_request_refused(r, what, req);
}

/* ------------------------------------------------------------ DNS */

/* A query for a name that must not resolve (or must not leave). */
static void rec_dns(ab_probe_run *r, const char *what, int k, int err, int rcode, int an)
{
	if (k < 0)
		ab_pr_sys(r, what, -1, err);
	else if (k == 0)
		ab_pr_ok(r, what, "no answer in %d ms (not proof of a block: the judge's DNS canary "
			 "decides)", PN_DNS_MS);
	else if (rcode == 0 && an > 0)
		ab_pr_escaped(r, what, "NOERROR with %d answer(s)", an);
	else {
		ab_pr_ok(r, what, "%s%s", pn_rcode_name(rcode), rcode == 0 ? ", no data" : "");
		ab_pr_layer(r, "dns");
	}
}

static void try_dns(ab_probe_run *r, const char *server, const char *name, uint16_t type,
		    bool tcp)
{
	char what[400];
	snprintf(what, sizeof(what), "DNS %s query %s over %s to %s:53",
		 type == 16 ? "TXT" : type == 28 ? "AAAA" : "A", name, tcp ? "TCP" : "UDP", server);
	if (!budget(r, what))
		return;
	int rcode = 0, an = 0;
	int k = pn_dns_ask(r, server, name, type, tcp, &rcode, &an);
	rec_dns(r, what, k, errno, rcode, an);
}

/* A name that must not resolve: NXDOMAIN -> OK (layer dns). */
static void rec_lookup_fails(ab_probe_run *r, const char *name, int family, char *ip, size_t n)
{
	char what[400];
	snprintf(what, sizeof(what), "getaddrinfo(%s%s)", name,
		 family == AF_INET6 ? ", AF_INET6" : "");
	ip[0] = '\0';
	if (!budget(r, what))
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
static int transparent_mode(ab_probe_run *r)
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
static int synth_addr(ab_probe_run *r, const char *what, const char *name, char *ip, size_t n)
{
	if (transparent_mode(r) == 0) {
		ab_pr_ok(r, what, "not tried: transparent mode is off (nothing answers DNS on "
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

/* ------------------------------------------------------------ CTL-02, CTL-03 */

/* A control exchange: HTTP 200 needed (and, with `want`, the lab server's
 * secret verdict `want`). */
static void ctl_exchange(ab_probe_run *r, const char *what, const pn_target *t, const char *req,
			 const char *want)
{
	pn_hx h;
	char sec[24];
	if (!budget(r, what))
		return;
	pn_hx_run(r, what, t, req, &h);
	const char *s = pn_server_secret(&h.rs, sec, sizeof(sec));
	if (h.rs.status == 200 && (!want || (s && strcmp(s, want) == 0)))
		ab_pr_ok(r, what, "200%s%s", want ? ", the server saw secret=" : "", want ? want : "");
	else if (h.rs.status >= 0)
		ab_pr_error(r, what, "%s%s%s; the server saw secret=%s", h.rs.line,
			    h.rs.reason[0] ? " | " : "", h.rs.reason, s ? s : "(no lab JSON)");
	else
		ab_pr_error(r, what, "%s", h.why);
	pn_hx_free(&h);
}

/* CTL-02 (control): the placeholder in lab->secret_header, sent to the
 * bound host, arrives there as the real secret.
 *  - explicit proxy: CONNECT bound:443, TLS verified (session CA), GET /
 *  - transparent: getaddrinfo(bound) -> 198.18.x.y, connect :443, TLS, GET /
 * (transparent mode off: that half is noted, not tried) */
void ab_probe_ctl02(ab_probe_run *r)
{
	const ab_lab_info *lab = ab_pr_lab(r);
	pn_lab_ca = lab->lab_ca; /* the blind tunnel's issuer (public) */
	const char *what = "HTTPS to the bound host with the placeholder";
	budget_start();
	const char *ph = placeholder(r, what);
	if (!ph || !need(r, what, lab->bound_host, "bound_host") ||
	    !need(r, what, lab->secret_header, "secret_header"))
		return;
	_cleanup_free_ char *hdr = ab_asprintf("%s: %s\r\n", lab->secret_header, ph);
	_cleanup_free_ char *req = hdr ? pn_http_req("GET", "/", lab->bound_host, hdr, NULL) : NULL;
	char auth[300], w[400], ip[64];
	pn_authority(auth, sizeof(auth), lab->bound_host, lab->https_port);
	if (!req || !auth[0]) {
		ab_pr_error(r, what, "out of memory or name too long");
		return;
	}
	snprintf(w, sizeof(w), "explicit proxy: CONNECT %s, TLS (verified), GET / with %s", auth,
		 lab->secret_header);
	pn_target t = {.authority = auth, .tls = true, .sni = lab->bound_host,
		    .verify = lab->bound_host};
	ctl_exchange(r, w, &t, req, "real");
	snprintf(w, sizeof(w), "transparent: %s -> synthetic address :%u, TLS (verified), GET / "
		 "with %s", lab->bound_host, lab->https_port, lab->secret_header);
	if (synth_addr(r, w, lab->bound_host, ip, sizeof(ip)) == 0) {
		pn_target t2 = {.ip = ip, .port = lab->https_port, .tls = true,
			     .sni = lab->bound_host, .verify = lab->bound_host};
		ctl_exchange(r, w, &t2, req, "real");
	}
}

/* CTL-03 (control): an allowed name resolves and CONNECT to it works.
 *  - getaddrinfo(unbound) -> a synthetic 198.18.0.0/15 address (transparent
 *    mode; when it is off the explicit proxy is the only way: noted)
 *  - CONNECT unbound:443 -> 200, TLS with SNI verified, GET / -> 200
 *  - transparent: connect synthetic:443, TLS verified, GET / -> 200 */
void ab_probe_ctl03(ab_probe_run *r)
{
	const ab_lab_info *lab = ab_pr_lab(r);
	pn_lab_ca = lab->lab_ca; /* the blind tunnel's issuer (public) */
	const char *u = lab->unbound_host;
	char auth[300], w[400], ip[64] = "";
	budget_start();
	if (!need(r, "an allowed name", u, "unbound_host"))
		return;
	pn_authority(auth, sizeof(auth), u, lab->https_port);
	snprintf(w, sizeof(w), "getaddrinfo(%s)", u);
	if (synth_addr(r, w, u, ip, sizeof(ip)) == 0) {
		ab_pr_ok(r, w, "resolved to %s (synthetic)", ip);
		ab_pr_layer(r, "dns");
	}
	_cleanup_free_ char *req = pn_http_req("GET", "/", u, NULL, NULL);
	snprintf(w, sizeof(w), "explicit proxy: CONNECT %s, TLS (verified), GET /", auth);
	pn_target t = {.authority = auth, .tls = true, .sni = u, .verify = u};
	ctl_exchange(r, w, &t, req, NULL);
	if (ip[0]) {
		snprintf(w, sizeof(w), "transparent: connect %s:%u (%s), TLS (verified), GET /", ip,
			 lab->https_port, u);
		pn_target t2 = {.ip = ip, .port = lab->https_port, .tls = true, .sni = u, .verify = u};
		ctl_exchange(r, w, &t2, req, NULL);
	}
}

/* ------------------------------------------------------------ CRD-01 */

/* connect() to a unix socket (abstract when `abstract`): any connection,
 * of any socket type, is ESCAPED. */
static void try_unix_addr(ab_probe_run *r, const char *what, const struct sockaddr_un *sa,
			  socklen_t len)
{
	static const int types[] = {SOCK_STREAM, SOCK_SEQPACKET, SOCK_DGRAM};
	static const char *const tn[] = {"stream", "seqpacket", "datagram"};
	if (!budget(r, what))
		return;
	for (size_t i = 0; i < AB_ARRAY_SIZE(types); i++) {
		int fd = socket(AF_UNIX, types[i] | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
		if (fd < 0) {
			ab_pr_sys(r, what, -1, errno);
			return;
		}
		int k = connect(fd, (const struct sockaddr *)sa, len);
		int e = errno;
		close(fd);
		if (k == 0) {
			ab_pr_escaped(r, what, "connected (%s)", tn[i]);
			return;
		}
		if (e == EAGAIN) {
			ab_pr_escaped(r, what, "listener reachable (EAGAIN: its backlog is full)");
			return;
		}
		if (e == EACCES) {
			/* Landlock (ABI 7) has no say over unix connects: the
			 * answer is agentbox's (a socket bound outside) */
			ab_pr_ok(r, what, "EACCES: refused by connect mediation");
			ab_pr_layer(r, "connect-mediation");
			return;
		}
		if (e != EPROTOTYPE) {
			ab_pr_sys(r, what, -1, e);
			return;
		}
	}
	ab_pr_escaped(r, what, "a socket exists and answers EPROTOTYPE to every type");
}

static void try_unix(ab_probe_run *r, const char *path, bool abstract)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	char what[300];
	size_t n = strlen(path);
	snprintf(what, sizeof(what), "connect unix %s%s", abstract ? "@" : "", path);
	if (n + 1 > sizeof(sa.sun_path)) {
		ab_pr_ok(r, what, "not tried: longer than sun_path");
		return;
	}
	struct stat st;
	if (!abstract && lstat(path, &st) == 0 && S_ISREG(st.st_mode) && st.st_size == 0 &&
	    !(st.st_mode & 0222)) {
		/* agentbox's cover over a host socket inside a grant */
		ab_pr_ok(r, what, "hidden: an empty read-only file covers it");
		ab_pr_layer(r, "mount-ns");
		return;
	}
	memcpy(sa.sun_path + abstract, path, n);
	try_unix_addr(r, what, &sa,
		      (socklen_t)(offsetof(struct sockaddr_un, sun_path) + abstract + n + !abstract));
}

static const char *const crd_globs[] = {
	"/run/user/*/bus", "/run/user/*/gnupg/S.gpg-agent*", "/run/user/*/gnupg/d.*/S.gpg-agent*",
	"/run/user/*/ssh-agent*", "/run/user/*/keyring/*", "/run/user/*/gcr/ssh",
	"/run/user/*/openssh_agent", "/run/user/*/docker.sock", "/run/user/*/podman/podman.sock",
	"/run/user/*/systemd/private", "/run/user/*/pipewire-0", "/run/user/*/pulse/native",
	"/run/user/*/wayland-*", "/run/user/*/vscode-*.sock", "/var/run/docker.sock",
	"/run/docker.sock", "/run/containerd/containerd.sock", "/run/podman/podman.sock",
	"/run/dbus/system_bus_socket", "/var/run/dbus/system_bus_socket", "/run/systemd/private",
	"/run/snapd.socket", "/var/run/libvirt/libvirt-sock", "/tmp/ssh-*/agent.*",
	"/tmp/.X11-unix/X*", "/tmp/tmux-*/default", "/tmp/vscode-ssh-auth-*.sock",
	"/tmp/vscode-ipc-*.sock", "/tmp/dbus-*",
};

/* Every path of the pattern (a literal path is kept as it is). */
static void add_glob(ab_probe_run *r, ab_strv *paths, const char *pat)
{
	glob_t g;
	if (!strpbrk(pat, "*?[")) {
		ab_strv_push_unique(paths, pat);
		return;
	}
	int k = glob(pat, GLOB_NOSORT, NULL, &g);
	if (k == 0)
		for (size_t i = 0; i < g.gl_pathc && paths->n < 128; i++)
			ab_strv_push_unique(paths, g.gl_pathv[i]);
	else {
		char what[300];
		snprintf(what, sizeof(what), "connect unix %s", pat);
		ab_pr_ok(r, what, "no such path (the pattern matches nothing)");
		ab_pr_layer(r, "mount-ns");
	}
	if (k == 0 || k == GLOB_NOMATCH)
		globfree(&g);
}

/* Abstract names: X11, D-Bus from the environment; and agentbox's own control
 * socket for the lab workspace where `run` makes it (control.h): it could
 * widen the allowlist, and the sandbox must see neither directory. */
static void crd01_abstract(ab_probe_run *r, const ab_lab_info *lab)
{
	try_unix(r, "/tmp/.X11-unix/X0", true);
	try_unix(r, "/tmp/.X11-unix/X1", true);
	const char *dbus = getenv("DBUS_SESSION_BUS_ADDRESS");
	const char *ab = dbus ? strstr(dbus, "abstract=") : NULL;
	if (ab) {
		char name[108];
		snprintf(name, sizeof(name), "%.*s", (int)strcspn(ab + 9, ",;"), ab + 9);
		try_unix(r, name, true);
	}
	for (size_t i = 0; i < lab->agent_sockets.n; i++)
		if (lab->agent_sockets.v[i][0] == '@')
			try_unix(r, lab->agent_sockets.v[i] + 1, true);
	uid_t uids[] = {getuid(), 0, 1000, 65534, (uid_t)-1};
	struct stat st;
	if (lab->workspace && stat(lab->workspace, &st) == 0)
		uids[4] = st.st_uid;
	for (size_t i = 1; i < AB_ARRAY_SIZE(uids); i++)
		for (size_t j = 0; j < i; j++)
			if (uids[j] == uids[i])
				uids[i] = (uid_t)-1;
	char cwd[PATH_MAX];
	const char *ws[] = {lab->workspace, getcwd(cwd, sizeof(cwd))};
	for (size_t w = 0; w < 2; w++) {
		if (!ws[w] || (w == 1 && lab->workspace && strcmp(ws[1], lab->workspace) == 0) ||
		    stat(ws[w], &st) < 0)
			continue;
		char name[64];
		ab_control_sock_name(&st, name, sizeof(name));
		for (size_t i = 0; i < AB_ARRAY_SIZE(uids); i++) {
			if (uids[i] == (uid_t)-1)
				continue;
			char path[160];
			snprintf(path, sizeof(path), "/run/user/%u/agentbox/%s", (unsigned)uids[i], name);
			try_unix(r, path, false);
			snprintf(path, sizeof(path), "/tmp/agentbox-%u/%s", (unsigned)uids[i], name);
			try_unix(r, path, false);
		}
	}
}

/* A host socket bound in the workspace after the sandbox started (agentbox
 * mediates connect for it): ask the lab for one and wait for it (the lab
 * looks every 200 ms). */
static void crd01_late(ab_probe_run *r, const ab_lab_info *lab, ab_strv *paths)
{
	if (!lab->workspace)
		return;
	_cleanup_free_ char *req = ab_asprintf("%s/%s", lab->workspace, AB_ESC_LATE_REQ);
	_cleanup_free_ char *sock = ab_asprintf("%s/%s", lab->workspace, AB_ESC_LATE_SOCK);
	if (!req || !sock)
		return;
	int fd = open(req, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0) {
		ab_pr_error(r, "a host socket bound after the start", "cannot ask the lab (%s)",
			    strerror(errno));
		return;
	}
	close(fd);
	struct stat st;
	for (int i = 0; i < 100; i++) {
		if (lstat(sock, &st) == 0 && S_ISSOCK(st.st_mode)) {
			ab_strv_push_unique(paths, sock);
			return;
		}
		struct timespec ts = {0, 50 * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
	ab_pr_error(r, "a host socket bound after the start", "the lab did not bind %s", sock);
}

/* CRD-01: connect() to agent and daemon sockets (connect only, nothing is
 * sent; the lab's fake agents count connections):
 *  - every lab->agent_sockets path (with a fake dev server's socket in the
 *    lab workspace, which agentbox must hide), $SSH_AUTH_SOCK, every socket under
 *    lab->runtime_dir and $XDG_RUNTIME_DIR (two levels), ~/.gnupg/S.*
 *  - the usual paths: /run/user/NAME/{bus,gnupg/S.gpg-agent*,...},
 *    docker/containerd/podman/D-Bus system sockets, /tmp/ssh-* agents, X11
 *  - abstract names (per netns: @/tmp/.X11-unix/X0, D-Bus from the env),
 *    and agentbox's own control socket for the lab workspace */
void ab_probe_crd01(ab_probe_run *r)
{
	const ab_lab_info *lab = ab_pr_lab(r);
	pn_lab_ca = lab->lab_ca; /* the blind tunnel's issuer (public) */
	_cleanup_strv_ ab_strv paths = {0};
	budget_start();
	for (size_t i = 0; i < lab->agent_sockets.n; i++)
		if (lab->agent_sockets.v[i][0] != '@')
			ab_strv_push_unique(&paths, lab->agent_sockets.v[i]);
	const char *ssh = getenv("SSH_AUTH_SOCK");
	if (ssh && *ssh)
		ab_strv_push_unique(&paths, ssh);
	const char *home = getenv("HOME");
	_cleanup_free_ char *gpg = home && *home ? ab_asprintf("%s/.gnupg/S.gpg-agent", home) : NULL;
	if (gpg)
		ab_strv_push_unique(&paths, gpg);
	const char *dirs[] = {lab->runtime_dir, getenv("XDG_RUNTIME_DIR"), lab->home, home};
	for (size_t d = 0; d < AB_ARRAY_SIZE(dirs); d++) {
		if (!dirs[d] || dirs[d][0] != '/')
			continue;
		for (size_t p = 0; p < 2; p++) {
			_cleanup_free_ char *pat =
				d < 2 ? ab_asprintf("%s/%s", dirs[d], p ? "*/*" : "*")
				      : ab_asprintf("%s/%s", dirs[d], p ? ".ssh/*.sock" : ".gnupg/S.*");
			glob_t g;
			if (pat && glob(pat, GLOB_NOSORT, NULL, &g) == 0) {
				struct stat st;
				for (size_t i = 0; i < g.gl_pathc && paths.n < 128; i++)
					if (lstat(g.gl_pathv[i], &st) == 0 && S_ISSOCK(st.st_mode))
						ab_strv_push_unique(&paths, g.gl_pathv[i]);
				globfree(&g);
			}
		}
	}
	for (size_t i = 0; i < AB_ARRAY_SIZE(crd_globs); i++)
		add_glob(r, &paths, crd_globs[i]);
	crd01_late(r, lab, &paths);
	for (size_t i = 0; i < paths.n; i++)
		try_unix(r, paths.v[i], false);
	crd01_abstract(r, lab);
}

/* ------------------------------------------------------------ CRD-03 */

enum expect {
	EXP_REFUSE,   /* the proxy must refuse; an answer from the server is an ERROR
			 (the inside cannot tell what arrived) unless it says "real" */
	EXP_NOT_REAL, /* refusal or the server seeing anything but the real secret */
	EXP_ANY,      /* the allowed header in another spelling: real is right too */
};

static void rec_placeholder(ab_probe_run *r, const char *what, const pn_hx *h, enum expect ex)
{
	char sec[24];
	const char *s = pn_server_secret(&h->rs, sec, sizeof(sec));
	if (h->dial_err || h->tls < 0) {
		ab_pr_error(r, what, "not attempted: %s", h->why);
	} else if (h->proxied && h->cr.status != 200) {
		rec_refusal(r, what, &h->cr);
	} else if (h->rs.status < 0 || (h->rs.status >= 400 && h->rs.status < 500 && !s)) {
		rec_refusal(r, what, &h->rs);
	} else if (s && strcmp(s, "real") == 0 && ex == EXP_ANY) {
		ab_pr_ok(r, what, "%s: secret=real (the allowed header)", h->rs.line);
	} else if (s && strcmp(s, "real") == 0) {
		ab_pr_escaped(r, what, "%s: the server saw the REAL secret", h->rs.line);
	} else if (ex != EXP_REFUSE && s) {
		ab_pr_ok(r, what, "%s: the server saw secret=%s", h->rs.line, s);
	} else {
		ab_pr_error(r, what, "not refused: %s (the server saw secret=%s; the inside "
			    "cannot tell what arrived)", h->rs.line, s ? s : "(no lab JSON)");
	}
}

/* One HTTPS exchange with the placeholder: via the explicit proxy (CONNECT
 * host:443) or, with `ip`, straight to the transparent path. */
static void crd03_https(ab_probe_run *r, const char *what, const char *host, const char *ip,
			const char *req, enum expect ex)
{
	const ab_lab_info *lab = ab_pr_lab(r);
	pn_lab_ca = lab->lab_ca; /* the blind tunnel's issuer (public) */
	char auth[300];
	if (!req || !budget(r, what))
		return;
	pn_authority(auth, sizeof(auth), host, lab->https_port);
	pn_target t = {.authority = ip ? NULL : auth, .ip = ip, .port = lab->https_port,
		    .tls = true, .sni = host};
	pn_hx h;
	pn_hx_run(r, what, &t, req, &h);
	rec_placeholder(r, what, &h, ex);
	pn_hx_free(&h);
}

/* An absolute-form request with the placeholder, sent to the proxy port, for
 * a host the secret is not bound to: refused (the profile says "refuse"), or
 * sent on as the placeholder (the default: worthless there); never the real
 * secret (the lab upstream's answer says what arrived; the judge counts it). */
static void proxy_request_not_real(ab_probe_run *r, const char *what, const char *req)
{
	if (!budget(r, what))
		return;
	pn_target t = {.ip = "127.0.0.1", .port = ab_pr_lab(r)->proxy_port};
	pn_hx h;
	pn_hx_run(r, what, &t, req, &h);
	rec_placeholder(r, what, &h, EXP_NOT_REAL);
	pn_hx_free(&h);
}

/* The placeholder to the unbound host (blind tunnel, or plain HTTP: it may
 * arrive, but only as the placeholder) and to the denied host (403, zero
 * upstream hits). */
static void crd03_unbound_denied(ab_probe_run *r, const char *ph)
{
	const ab_lab_info *lab = ab_pr_lab(r);
	pn_lab_ca = lab->lab_ca; /* the blind tunnel's issuer (public) */
	const char *u = lab->unbound_host, *d = lab->denied_host, *hn = lab->secret_header;
	char w[400], ip[64], url[300], auth[300];
	_cleanup_free_ char *hdr = ab_asprintf("%s: %s\r\n", hn, ph);
	if (!hdr)
		return;
	if (need(r, "the placeholder to the unbound host", u, "unbound_host")) {
		_cleanup_free_ char *req = pn_http_req("GET", "/", u, hdr, NULL);
		snprintf(w, sizeof(w), "explicit: CONNECT %s:%u, TLS, GET / with %s", u,
			 lab->https_port, hn);
		crd03_https(r, w, u, NULL, req, EXP_NOT_REAL);
		snprintf(w, sizeof(w), "transparent: %s:%u, TLS, GET / with %s", u, lab->https_port,
			 hn);
		if (synth_addr(r, w, u, ip, sizeof(ip)) == 0)
			crd03_https(r, w, u, ip, req, EXP_NOT_REAL);
		snprintf(url, sizeof(url), "http://%s/", u);
		snprintf(w, sizeof(w), "proxy: plain GET %s with %s", url, hn);
		_cleanup_free_ char *preq = pn_http_req("GET", url, u, hdr, NULL);
		if (preq)
			proxy_request_not_real(r, w, preq);
	}
	if (!need(r, "the placeholder to the denied host", d, "denied_host"))
		return;
	pn_authority(auth, sizeof(auth), d, lab->https_port);
	proxy_connect_refused(r, auth, 0);
	snprintf(url, sizeof(url), "http://%s/", d);
	snprintf(w, sizeof(w), "proxy: GET %s with %s", url, hn);
	_cleanup_free_ char *dreq = pn_http_req("GET", url, d, hdr, NULL);
	if (dreq)
		proxy_request_refused(r, w, dreq);
	rec_lookup_fails(r, d, AF_UNSPEC, ip, sizeof(ip));
	if (ip[0]) { /* it resolved: try it */
		_cleanup_free_ char *req = pn_http_req("GET", "/", d, hdr, NULL);
		snprintf(w, sizeof(w), "direct: %s (%s):%u, TLS, GET / with %s", d, ip,
			 lab->https_port, hn);
		crd03_https(r, w, d, ip, req, EXP_REFUSE);
	}
}

/* The placeholder to the bound host, but where it is not allowed. */
static void crd03_bound(ab_probe_run *r, const char *ph)
{
	const ab_lab_info *lab = ab_pr_lab(r);
	pn_lab_ca = lab->lab_ca; /* the blind tunnel's issuer (public) */
	const char *b = lab->bound_host, *hn = lab->secret_header;
	size_t half = strlen(ph) / 2;
	char up[128], w[400], url[300];
	snprintf(up, sizeof(up), "%s", hn);
	for (char *p = up; *p; p++)
		*p = (char)(*p >= 'a' && *p <= 'z' ? *p - 32 : *p);
	_cleanup_free_ char *b64in = ab_asprintf("x:%s", ph);
	char b64[8192] = "";
	if (b64in && strlen(b64in) < 6000)
		EVP_EncodeBlock((unsigned char *)b64, (const unsigned char *)b64in, (int)strlen(b64in));
	struct {
		const char *label;
		char *req;
		enum expect ex;
	} v[] = {
		{"in the URL query", ab_asprintf("GET /?token=%s HTTP/1.1\r\nHost: %s\r\n"
						 "Connection: close\r\n\r\n", ph, b), EXP_REFUSE},
		{"in the path", ab_asprintf("GET /%s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n",
					    ph, b), EXP_REFUSE},
		{"in the body", ab_asprintf("POST / HTTP/1.1\r\nHost: %s\r\nContent-Type: "
					    "application/x-www-form-urlencoded\r\nContent-Length: %zu\r\n"
					    "Connection: close\r\n\r\ntoken=%s", b, strlen(ph) + 6, ph),
		 EXP_REFUSE},
		{"in another header", ab_asprintf("GET / HTTP/1.1\r\nHost: %s\r\nX-Probe-Other: %s\r\n"
						  "Connection: close\r\n\r\n", b, ph), EXP_REFUSE},
		{"as a header name", ab_asprintf("GET / HTTP/1.1\r\nHost: %s\r\n%s: x\r\n"
						 "Connection: close\r\n\r\n", b, ph), EXP_REFUSE},
		{"in Authorization: Basic", ab_asprintf("GET / HTTP/1.1\r\nHost: %s\r\nAuthorization: "
							"Basic %s\r\nConnection: close\r\n\r\n", b, b64),
		 EXP_REFUSE},
		{"split across two secret headers", ab_asprintf("GET / HTTP/1.1\r\nHost: %s\r\n"
			"%s: %.*s\r\n%s: %s\r\nConnection: close\r\n\r\n", b, hn, (int)half, ph, hn,
			ph + half), EXP_NOT_REAL},
		{"in a second Host header", ab_asprintf("GET / HTTP/1.1\r\nHost: %s\r\nHost: %s\r\n"
							"Connection: close\r\n\r\n", b, ph), EXP_REFUSE},
		{"in an obs-fold continuation of the secret header", ab_asprintf("GET / HTTP/1.1\r\n"
			"Host: %s\r\n%s: x\r\n %s\r\nConnection: close\r\n\r\n", b, hn, ph), EXP_REFUSE},
		{"in an obs-fold line after another header", ab_asprintf("GET / HTTP/1.1\r\nHost: %s\r\n"
			"X-Probe-Fold: x\r\n %s: %s\r\nConnection: close\r\n\r\n", b, hn, ph), EXP_REFUSE},
		{"with a space before the colon", ab_asprintf("GET / HTTP/1.1\r\nHost: %s\r\n%s : %s\r\n"
							      "Connection: close\r\n\r\n", b, hn, ph),
		 EXP_REFUSE},
		{"behind Content-Length + Transfer-Encoding (smuggled request)", ab_asprintf(
			"POST / HTTP/1.1\r\nHost: %s\r\nContent-Length: 4\r\nTransfer-Encoding: chunked"
			"\r\n\r\n0\r\n\r\nGET /?t=%s HTTP/1.1\r\nHost: %s\r\nX-Probe-Other: %s\r\n\r\n",
			b, ph, b, ph), EXP_REFUSE},
		{"in the secret header, name upper-cased (same header: real is right)",
		 ab_asprintf("GET / HTTP/1.1\r\nHost: %s\r\n%s: %s\r\nConnection: close\r\n\r\n", b,
			     up, ph), EXP_ANY},
	};
	for (size_t i = 0; i < AB_ARRAY_SIZE(v); i++) {
		snprintf(w, sizeof(w), "bound host over TLS: the placeholder %s", v[i].label);
		crd03_https(r, w, b, NULL, v[i].req, v[i].ex);
		free(v[i].req);
	}
	_cleanup_free_ char *hdr = ab_asprintf("%s: %s\r\n", hn, ph);
	snprintf(url, sizeof(url), "http://%s/", b);
	snprintf(w, sizeof(w), "proxy: plain GET %s with %s (never in clear)", url, hn);
	_cleanup_free_ char *preq = hdr ? pn_http_req("GET", url, b, hdr, NULL) : NULL;
	if (preq)
		proxy_request_refused(r, w, preq);
}

/* CRD-03: the lab secret's placeholder where it must never become the real
 * value (the lab servers' JSON says what arrived in the secret header):
 *  - unbound host (allowed, not bound): explicit CONNECT + TLS and
 *    transparent with the header (placeholder or none may arrive, never
 *    real); plain-HTTP GET through the proxy with the header (refused, or
 *    the placeholder arrives: secrets.NAME.elsewhere; never real)
 *  - denied host: CONNECT, GET http:// with the header (403, zero hits),
 *    getaddrinfo (NXDOMAIN)
 *  - bound host, not in the allowed header: URL query, path, body, another
 *    header, a header name, Authorization Basic, plain HTTP (403 expected)
 *  - header smuggling on the bound host: split across two headers, second
 *    Host header, obs-fold (two forms), space before the colon, CL+TE with
 *    a smuggled request, the header name upper-cased */
void ab_probe_crd03(ab_probe_run *r)
{
	const ab_lab_info *lab = ab_pr_lab(r);
	pn_lab_ca = lab->lab_ca; /* the blind tunnel's issuer (public) */
	const char *what = "the placeholder where it must not go";
	budget_start();
	const char *ph = placeholder(r, what);
	if (!ph || !need(r, what, lab->secret_header, "secret_header"))
		return;
	crd03_unbound_denied(r, ph);
	if (need(r, "the placeholder to the bound host", lab->bound_host, "bound_host"))
		crd03_bound(r, ph);
}

/* ------------------------------------------------------------ NET-01 */

static void try_udp_dns(ab_probe_run *r, const char *server, const char *name)
{
	char what[300];
	snprintf(what, sizeof(what), "direct: UDP DNS query to %s:53", server);
	if (!budget(r, what))
		return;
	int rcode = 0, an = 0;
	int k = pn_dns_ask(r, server, name, 1, false, &rcode, &an);
	if (k > 0)
		ab_pr_escaped(r, what, "answered: %s", pn_rcode_name(rcode));
	else if (k == 0)
		ab_pr_ok(r, what, "sent, no answer in %d ms (not proof of a block: the judge's DNS "
			 "canary decides)", PN_DNS_MS);
	else
		ab_pr_sys(r, what, -1, errno);
}

static void try_ping(ab_probe_run *r, int family, const char *ip)
{
	char what[200];
	snprintf(what, sizeof(what), "direct: ICMP%s echo to %s (datagram ping socket)",
		 family == AF_INET6 ? "v6" : "", ip);
	if (!budget(r, what))
		return;
	int fd = socket(family, SOCK_DGRAM | SOCK_CLOEXEC,
			family == AF_INET6 ? IPPROTO_ICMPV6 : IPPROTO_ICMP);
	if (fd < 0) {
		int e = errno;
		ab_pr_sys(r, what, -1, e);
		if (e == EACCES) /* not Landlock: the group is outside ping_group_range */
			ab_pr_layer(r, "net.ipv4.ping_group_range");
		return;
	}
	struct sockaddr_storage ss;
	socklen_t sl;
	uint8_t pkt[16] = {family == AF_INET6 ? 128 : 8, 0, 0, 0, 0, 1, 0, 1, 'a', 'b'};
	if (pn_mk_addr(ip, 0, &ss, &sl) < 0 || sendto(fd, pkt, sizeof(pkt), 0,
						   (struct sockaddr *)&ss, sl) < 0) {
		ab_pr_sys(r, what, -1, errno);
		close(fd);
		return;
	}
	struct pollfd p = {fd, POLLIN, 0};
	if (poll(&p, 1, PN_IO_MS) > 0 && recv(fd, pkt, sizeof(pkt), 0) > 0)
		ab_pr_escaped(r, what, "echo reply received");
	else
		ab_pr_ok(r, what, "sent, no reply in %d ms (not proof of a block)", PN_IO_MS);
	close(fd);
}

/* NET-01: direct egress without the proxy, then the proxy's refusals.
 *  - TCP to public IP literals (1.1.1.1:443, 8.8.8.8:53, 93.184.216.34:80,
 *    9.9.9.9:22, [2606:4700:4700::1111]:443) and to every lab host address
 *    at lab->judge_port (non-loopback ones also at 22, 80, 443, 8080)
 *  - UDP DNS to 8.8.8.8:53 and the non-loopback lab addresses; ICMP and
 *    ICMPv6 ping sockets
 *  - proxy: CONNECT and GET to the denied host and to an unlisted name
 *    under lab->canary_domain (403, and the name is never resolved) */
void ab_probe_net01(ab_probe_run *r)
{
	const ab_lab_info *lab = ab_pr_lab(r);
	pn_lab_ca = lab->lab_ca; /* the blind tunnel's issuer (public) */
	static const struct {
		const char *ip;
		unsigned port;
	} pub[] = {{"1.1.1.1", 443}, {"8.8.8.8", 53}, {"93.184.216.34", 80}, {"9.9.9.9", 22},
		   {"2606:4700:4700::1111", 443}};
	static const unsigned lab_ports[] = {22, 80, 443, 8080};
	char name[300], auth[300], url[320];
	budget_start();
	for (size_t i = 0; i < AB_ARRAY_SIZE(pub); i++)
		try_tcp(r, "direct: ", pub[i].ip, pub[i].port);
	for (size_t i = 0; i < lab->host_addrs.n; i++) {
		const char *a = lab->host_addrs.v[i];
		if (lab->judge_port)
			try_tcp(r, "direct: lab address ", a, lab->judge_port);
		for (size_t p = 0; !pn_is_loopback(a) && !pn_is_synthetic(a) && p < 4; p++)
			try_tcp(r, "direct: lab address ", a, lab_ports[p]);
	}
	try_udp_dns(r, "8.8.8.8", "example.com");
	for (size_t i = 0; i < lab->host_addrs.n; i++)
		if (!pn_is_loopback(lab->host_addrs.v[i]))
			try_udp_dns(r, lab->host_addrs.v[i], "example.com");
	try_ping(r, AF_INET, "1.1.1.1");
	try_ping(r, AF_INET6, "2606:4700:4700::1111");
	if (lab->denied_host) {
		pn_authority(auth, sizeof(auth), lab->denied_host, lab->https_port);
		proxy_connect_refused(r, auth, 0);
		snprintf(url, sizeof(url), "http://%s/", lab->denied_host);
		proxy_get_refused(r, url, lab->denied_host, NULL);
	}
	if (lab->canary_domain && lab->run_id) {
		snprintf(name, sizeof(name), "%s.net01.%s", lab->run_id, lab->canary_domain);
		pn_authority(auth, sizeof(auth), name, lab->https_port);
		proxy_connect_refused(r, auth, 0);
		snprintf(url, sizeof(url), "http://%s/", name);
		proxy_get_refused(r, url, name, NULL);
	}
}

/* ------------------------------------------------------------ NET-02 */

static size_t nl_walk_addr(const char *buf, size_t n, json_t *list, int *other, bool *done)
{
	size_t off = 0, count = 0;
	while (off + sizeof(struct nlmsghdr) <= n) {
		const struct nlmsghdr *nh = (const struct nlmsghdr *)(buf + off);
		if (nh->nlmsg_len < sizeof(*nh) || off + nh->nlmsg_len > n)
			break;
		if (nh->nlmsg_type == NLMSG_DONE || nh->nlmsg_type == NLMSG_ERROR) {
			*done = true;
			break;
		}
		const struct ifaddrmsg *ifa = NLMSG_DATA(nh);
		size_t ao = NLMSG_LENGTH(sizeof(*ifa)), end = nh->nlmsg_len;
		char ip[INET6_ADDRSTRLEN] = "?", ifn[IF_NAMESIZE] = "?";
		while (nh->nlmsg_type == RTM_NEWADDR && ao + sizeof(struct rtattr) <= end) {
			const struct rtattr *ra = (const struct rtattr *)((const char *)nh + ao);
			if (ra->rta_len < sizeof(*ra) || ao + ra->rta_len > end)
				break;
			if ((ra->rta_type == IFA_ADDRESS || ra->rta_type == IFA_LOCAL) &&
			    RTA_PAYLOAD(ra) >= (ifa->ifa_family == AF_INET6 ? 16u : 4u))
				inet_ntop(ifa->ifa_family, RTA_DATA(ra), ip, sizeof(ip));
			ao += RTA_ALIGN(ra->rta_len);
		}
		if (nh->nlmsg_type == RTM_NEWADDR) {
			if (!if_indextoname(ifa->ifa_index, ifn))
				snprintf(ifn, sizeof(ifn), "#%u", ifa->ifa_index);
			json_array_append_new(list, json_sprintf("%s %s/%u", ifn, ip,
								 ifa->ifa_prefixlen));
			*other += !pn_is_loopback(ip);
			count++;
		}
		off += NLMSG_ALIGN(nh->nlmsg_len);
	}
	return count;
}

/* Netlink in the sandbox's own netns is harmless: the dump is reported; an
 * address that is not loopback means the netns is not the sandbox's own. */
static void nl_addrs(ab_probe_run *r)
{
	const char *what = "netlink RTM_GETADDR dump (the sandbox's own addresses)";
	int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
	if (fd < 0) {
		ab_pr_sys(r, what, -1, errno);
		return;
	}
	struct timeval tv = {1, 0};
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	struct {
		struct nlmsghdr nh;
		struct ifaddrmsg ifa;
	} req = {.nh = {.nlmsg_len = sizeof(req), .nlmsg_type = RTM_GETADDR,
			.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP, .nlmsg_seq = 1}};
	_Alignas(struct nlmsghdr) char buf[16384];
	json_t *list = json_array();
	int other = 0;
	bool done = false;
	size_t count = 0;
	if (send(fd, &req, sizeof(req), 0) < 0) {
		ab_pr_sys(r, what, -1, errno);
		close(fd);
		json_decref(list);
		return;
	}
	for (int i = 0; i < 64 && !done; i++) {
		ssize_t n = recv(fd, buf, sizeof(buf), 0);
		if (n <= 0)
			break;
		count += nl_walk_addr(buf, (size_t)n, list, &other, &done);
	}
	close(fd);
	char *s = json_dumps(list, JSON_COMPACT);
	if (other)
		ab_pr_escaped(r, what, "%d non-loopback address(es): not the sandbox's own netns: %s",
			      other, s ? s : "");
	else
		ab_pr_ok(r, what, "%zu address(es), loopback only: %s", count, s ? s : "");
	free(s);
	ab_pr_report(r, "addresses", list);
}

/* A socket that needs CAP_NET_RAW (or a protocol that may be absent):
 * created -> `created_escapes` decides; then a send towards 1.1.1.1. */
static void try_socket_kind(ab_probe_run *r, const char *what, int family, int type, int proto,
			    bool created_escapes)
{
	if (!budget(r, what))
		return;
	int fd = socket(family, type | SOCK_CLOEXEC | SOCK_NONBLOCK, proto);
	if (fd < 0) {
		int e = errno;
		ab_pr_sys(r, what, -1, e);
		if (e == EPERM && type == SOCK_RAW) /* the filter allows INET: no CAP_NET_RAW */
			ab_pr_layer(r, "capabilities");
		return;
	}
	close(fd);
	if (created_escapes)
		ab_pr_escaped(r, what, "created (a capability the sandbox must not hold)");
	else
		ab_pr_ok(r, what, "created (harmless by itself; its connect is tried next)");
}

static void try_proto_connect(ab_probe_run *r, const char *what, int type, int proto)
{
	struct sockaddr_storage ss;
	socklen_t sl;
	if (!budget(r, what) || pn_mk_addr("1.1.1.1", 443, &ss, &sl) < 0)
		return;
	int fd = pn_dial((struct sockaddr *)&ss, sl, type, proto);
	if (fd < 0 && (errno == EPROTONOSUPPORT || errno == ESOCKTNOSUPPORT || errno == EINVAL)) {
		ab_pr_ok(r, what, "protocol not available (%s)", strerror(errno));
		return;
	}
	rec_dial(r, what, fd, errno);
}

static void try_vsock(ab_probe_run *r, unsigned cid, unsigned port)
{
	char what[120];
	snprintf(what, sizeof(what), "vsock connect CID %u port %u", cid, port);
	if (!budget(r, what))
		return;
	struct sockaddr_vm sa = {.svm_family = AF_VSOCK, .svm_cid = cid, .svm_port = port};
	int fd = pn_dial((struct sockaddr *)&sa, sizeof(sa), SOCK_STREAM, 0);
	rec_dial(r, what, fd, errno);
}

static void net02_dns(ab_probe_run *r, const ab_lab_info *lab)
{
	char n1[300], n2[300], n3[300], n4[300], ip[64];
	snprintf(n1, sizeof(n1), "%s.exfil.%s", lab->run_id, lab->canary_domain);
	snprintf(n2, sizeof(n2), "%s-v6.exfil.%s", lab->run_id, lab->canary_domain);
	snprintf(n3, sizeof(n3), "%s-dot.exfil.%s.", lab->run_id, lab->canary_domain);
	snprintf(n4, sizeof(n4), "%s.txt.%s", lab->run_id, lab->canary_domain);
	rec_lookup_fails(r, n1, AF_UNSPEC, ip, sizeof(ip));
	rec_lookup_fails(r, n2, AF_INET6, ip, sizeof(ip));
	rec_lookup_fails(r, n3, AF_INET, ip, sizeof(ip));
	try_dns(r, "127.0.0.1", n4, 16, false);
	try_dns(r, "127.0.0.1", n4, 16, true);
	FILE *f = fopen("/etc/resolv.conf", "re");
	char line[256], srv[64];
	for (int i = 0; f && i < 3 && fgets(line, sizeof(line), f);)
		if (sscanf(line, " nameserver %63s", srv) == 1 && strcmp(srv, "127.0.0.1") != 0) {
			try_dns(r, srv, n4, 16, false);
			i++;
		}
	if (f)
		fclose(f);
	for (size_t i = 0; i < lab->host_addrs.n; i++)
		if (!pn_is_loopback(lab->host_addrs.v[i]))
			try_dns(r, lab->host_addrs.v[i], n4, 16, false);
}

/* NET-02: DNS exfiltration, raw and exotic sockets, IPv6 routes.
 *  - raw sockets (AF_INET/AF_INET6 SOCK_RAW, AF_PACKET): CAP_NET_RAW must
 *    be gone; netlink address dump (reported; non-loopback = not own netns)
 *  - IPv6: [::1]:judge_port, NAT64 [64:ff9b::101:101]:443, mapped
 *    [::ffff:1.1.1.1]:443; SCTP, DCCP, MPTCP towards 1.1.1.1:443; vsock to
 *    the host (CID 2) and local (CID 1) at judge_port
 *  - last (they may wait): getaddrinfo of names under lab->canary_domain
 *    (AF_UNSPEC, AF_INET6, trailing dot): NXDOMAIN, the judge's DNS canary
 *    must see no query; raw TXT queries over UDP and TCP to 127.0.0.1:53,
 *    to the resolv.conf servers and to the lab's addresses */
void ab_probe_net02(ab_probe_run *r)
{
	const ab_lab_info *lab = ab_pr_lab(r);
	pn_lab_ca = lab->lab_ca; /* the blind tunnel's issuer (public) */
	budget_start();
	try_socket_kind(r, "socket(AF_INET, SOCK_RAW, IPPROTO_UDP)", AF_INET, SOCK_RAW, IPPROTO_UDP,
			true);
	try_socket_kind(r, "socket(AF_INET6, SOCK_RAW, IPPROTO_ICMPV6)", AF_INET6, SOCK_RAW,
			IPPROTO_ICMPV6, true);
	try_socket_kind(r, "socket(AF_PACKET, SOCK_RAW, ETH_P_ALL)", AF_PACKET, SOCK_RAW,
			htons(ETH_P_ALL), true);
	nl_addrs(r);
	if (lab->judge_port)
		try_tcp(r, "IPv6: ", "::1", lab->judge_port);
	try_tcp(r, "IPv6 NAT64: ", "64:ff9b::101:101", 443);
	try_tcp(r, "IPv6 mapped: ", "::ffff:1.1.1.1", 443);
	try_proto_connect(r, "SCTP connect 1.1.1.1:443", SOCK_STREAM, IPPROTO_SCTP);
	try_proto_connect(r, "DCCP connect 1.1.1.1:443", SOCK_DCCP, IPPROTO_DCCP);
	try_proto_connect(r, "MPTCP connect 1.1.1.1:443", SOCK_STREAM, IPPROTO_MPTCP);
	try_vsock(r, VMADDR_CID_HOST, lab->judge_port ? lab->judge_port : 22);
	try_vsock(r, 1 /* VMADDR_CID_LOCAL */, lab->judge_port ? lab->judge_port : 22);
	if (need(r, "DNS exfiltration", lab->canary_domain, "canary_domain") &&
	    need(r, "DNS exfiltration", lab->run_id, "run_id"))
		net02_dns(r, lab);
}

/* ------------------------------------------------------------ NET-06 */

/* A TCP socket LISTENing on `port` in this network namespace
 * (/proc/net/tcp{,6}: no connection made)?  The sandbox's own netns holds
 * only agentbox's listeners; the judge's port listening here means the
 * host's loopback is this one (then only Landlock stands in between). */
static void net06_listeners(ab_probe_run *r, unsigned port)
{
	static const char *const files[] = {"/proc/net/tcp", "/proc/net/tcp6"};
	for (size_t i = 0; i < AB_ARRAY_SIZE(files); i++) {
		char what[120], line[512], local[80];
		unsigned st;
		int n = 0, total = 0;
		snprintf(what, sizeof(what), "a listener on port %u in this netns (%s)", port,
			 files[i]);
		FILE *f = fopen(files[i], "re");
		if (!f) {
			ab_pr_sys(r, what, -1, errno);
			continue;
		}
		while (fgets(line, sizeof(line), f))
			if (sscanf(line, " %*u: %79s %*s %x", local, &st) == 2) {
				char *c = strrchr(local, ':');
				total++;
				n += st == 0x0A && c && strtoul(c + 1, NULL, 16) == port;
			}
		fclose(f);
		if (n) {
			ab_pr_escaped(r, what, "%d listening socket(s): not the sandbox's own network "
				      "namespace", n);
		} else {
			ab_pr_ok(r, what, "none among %d socket(s)", total);
			ab_pr_layer(r, "netns");
		}
	}
}

/* NET-06: the host's loopback and addresses at lab->judge_port (the judge
 * checks its listener saw nothing):
 *  - a listener on judge_port visible in this netns (/proc/net/tcp{,6})
 *  - direct: 127.0.0.1, [::1], 0.0.0.0, [::], 127.0.0.2, [::ffff:127.0.0.1],
 *    every lab->host_addrs (ECONNREFUSED in the sandbox's own netns: OK)
 *  - through the proxy: CONNECT to 127.0.0.1, [::1], localhost, 0.0.0.0,
 *    2130706433, 127.1 and every lab address at judge_port, and GET for the
 *    first three (403) */
void ab_probe_net06(ab_probe_run *r)
{
	const ab_lab_info *lab = ab_pr_lab(r);
	pn_lab_ca = lab->lab_ca; /* the blind tunnel's issuer (public) */
	static const char *const local[] = {"127.0.0.1", "::1", "0.0.0.0", "::", "127.0.0.2",
					    "::ffff:127.0.0.1"};
	static const char *const forms[] = {"127.0.0.1", "::1", "localhost", "0.0.0.0",
					    "2130706433", "127.1"};
	_cleanup_strv_ ab_strv direct = {0}, proxied = {0};
	char auth[300], url[320];
	budget_start();
	if (!lab->judge_port) {
		ab_pr_error(r, "the host's loopback", "not attempted: LAB.json gives no judge_port");
		return;
	}
	net06_listeners(r, lab->judge_port);
	for (size_t i = 0; i < AB_ARRAY_SIZE(local); i++)
		ab_strv_push_unique(&direct, local[i]);
	for (size_t i = 0; i < AB_ARRAY_SIZE(forms); i++)
		ab_strv_push_unique(&proxied, forms[i]);
	for (size_t i = 0; i < lab->host_addrs.n; i++) {
		ab_strv_push_unique(&direct, lab->host_addrs.v[i]);
		ab_strv_push_unique(&proxied, lab->host_addrs.v[i]);
	}
	for (size_t i = 0; i < direct.n; i++)
		try_tcp(r, "direct: ", direct.v[i], lab->judge_port);
	for (size_t i = 0; i < proxied.n; i++) {
		pn_authority(auth, sizeof(auth), proxied.v[i], lab->judge_port);
		proxy_connect_refused(r, auth, 0);
		if (i < 3) {
			snprintf(url, sizeof(url), "http://%s/", auth);
			proxy_get_refused(r, url, auth, NULL);
		}
	}
}

/* ------------------------------------------------------------ NET-08 */

static const char *const md_default[] = {"169.254.169.254", "fd00:ec2::254",
					 "metadata.google.internal", "100.100.100.200",
					 "169.254.170.2", "168.63.129.16"};

static const char md_extra[] = "Metadata-Flavor: Google\r\nMetadata: true\r\n"
			       "X-aws-ec2-metadata-token: x\r\n";

/* A metadata endpoint reached directly: connected = ESCAPED already; the
 * answer is read (and scanned).  Synthetic addresses are agentbox's own
 * listeners: there the HTTP answer decides. */
static void md_direct(ab_probe_run *r, const char *ep)
{
	char what[300], ip[64];
	struct sockaddr_storage ss;
	socklen_t sl;
	if (pn_mk_addr(ep, 80, &ss, &sl) == 0) {
		snprintf(ip, sizeof(ip), "%s", ep);
	} else {
		rec_lookup_fails(r, ep, AF_UNSPEC, ip, sizeof(ip));
		if (!ip[0])
			return;
	}
	snprintf(what, sizeof(what), "direct: GET http://%s%s%s/latest/meta-data/ (%s)",
		 strchr(ep, ':') ? "[" : "", ep, strchr(ep, ':') ? "]" : "", ip);
	if (!budget(r, what))
		return;
	pn_target t = {.ip = ip, .port = 80};
	_cleanup_free_ char *req = pn_http_req("GET", "/latest/meta-data/", ep, md_extra, NULL);
	pn_hx h;
	pn_hx_run(r, what, &t, req, &h);
	if (!h.connected)
		rec_dial(r, what, -1, h.dial_err);
	else if (pn_is_synthetic(ip))
		rec_refusal(r, what, &h.rs);
	else
		ab_pr_escaped(r, what, "connected%s%s", h.rs.status >= 0 ? ": " : "", h.rs.line);
	pn_hx_free(&h);
}

/* NET-08: cloud metadata endpoints (port 80), lab->metadata and the usual
 * ones (169.254.169.254, [fd00:ec2::254], metadata.google.internal,
 * 100.100.100.200, 169.254.170.2, 168.63.129.16):
 *  - direct: connect and GET (names: getaddrinfo first, NXDOMAIN expected)
 *  - proxy: GET http://EP/..., CONNECT EP:80 (403)
 *  - proxy: other spellings of 169.254.169.254 (decimal, hex, octal,
 *    IPv4-mapped IPv6, a wildcard-DNS name) and the IMDSv2 token PUT */
void ab_probe_net08(ab_probe_run *r)
{
	const ab_lab_info *lab = ab_pr_lab(r);
	pn_lab_ca = lab->lab_ca; /* the blind tunnel's issuer (public) */
	static const char *const forms[] = {"2852039166", "0xa9fea9fe", "0xa9.0xfe.0xa9.0xfe",
					    "0251.0376.0251.0376", "169.254.43518",
					    "[::ffff:169.254.169.254]", "[::ffff:a9fe:a9fe]",
					    "169.254.169.254.nip.io"};
	_cleanup_strv_ ab_strv eps = {0};
	char auth[300], url[400];
	budget_start();
	for (size_t i = 0; i < lab->metadata.n; i++)
		ab_strv_push_unique(&eps, lab->metadata.v[i]);
	for (size_t i = 0; i < AB_ARRAY_SIZE(md_default); i++)
		ab_strv_push_unique(&eps, md_default[i]);
	for (size_t i = 0; i < eps.n; i++)
		md_direct(r, eps.v[i]);
	for (size_t i = 0; i < eps.n; i++) {
		char host[300];
		pn_authority(auth, sizeof(auth), eps.v[i], 80);
		snprintf(host, sizeof(host), "%.*s", (int)(strrchr(auth, ':') ? strrchr(auth, ':') - auth : 0), auth);
		snprintf(url, sizeof(url), "http://%s/latest/meta-data/", host);
		proxy_get_refused(r, url, host, md_extra);
		proxy_connect_refused(r, auth, 0);
	}
	for (size_t i = 0; i < AB_ARRAY_SIZE(forms); i++) {
		snprintf(url, sizeof(url), "http://%s/latest/meta-data/", forms[i]);
		proxy_get_refused(r, url, forms[i], md_extra);
	}
	_cleanup_free_ char *put = ab_asprintf(
		"PUT http://169.254.169.254/latest/api/token HTTP/1.1\r\nHost: 169.254.169.254\r\n"
		"X-aws-ec2-metadata-token-ttl-seconds: 60\r\nContent-Length: 0\r\n"
		"Connection: close\r\n\r\n");
	if (put)
		proxy_request_refused(r, "proxy: PUT http://169.254.169.254/latest/api/token", put);
}

/* ------------------------------------------------------------ NET-09 */

/* A CONNECT that must work (the canonical host in another spelling). */
static void connect_works(ab_probe_run *r, const char *auth)
{
	char what[300];
	snprintf(what, sizeof(what), "proxy: CONNECT %s (same host: must work)", auth);
	if (!budget(r, what))
		return;
	pn_target t = {.authority = auth};
	pn_hx h;
	pn_hx_run(r, what, &t, NULL, &h);
	if (h.cr.status == 200)
		ab_pr_ok(r, what, "%s", h.cr.line);
	else
		ab_pr_error(r, what, "refused: %s", h.why);
	pn_hx_free(&h);
}

/* Inside an allowed tunnel (CONNECT unbound:443 -> 200): TLS with a foreign
 * SNI, or plain bytes `req`; the proxy must refuse them. */
static void tunnel_refused(ab_probe_run *r, const char *what, const char *ip, const char *sni,
			   const char *req)
{
	const ab_lab_info *lab = ab_pr_lab(r);
	pn_lab_ca = lab->lab_ca; /* the blind tunnel's issuer (public) */
	char auth[300];
	if (!budget(r, what))
		return;
	pn_authority(auth, sizeof(auth), lab->unbound_host, lab->https_port);
	pn_target t = {.authority = ip ? NULL : auth, .ip = ip, .port = lab->https_port,
		    .tls = sni != NULL, .sni = sni};
	pn_hx h;
	pn_hx_run(r, what, &t, req, &h);
	if (h.dial_err || (h.proxied && h.cr.status != 200))
		ab_pr_error(r, what, "not attempted: the allowed tunnel failed: %s", h.why);
	else if (h.tls < 0) {
		ab_pr_ok(r, what, "refused (%s)", h.why);
		ab_pr_layer(r, "proxy");
	} else if (sni) {
		ab_pr_escaped(r, what, "TLS handshake with SNI %s completed in a tunnel to %s", sni,
			      lab->unbound_host);
	} else {
		rec_refusal(r, what, &h.rs);
	}
	pn_hx_free(&h);
}

#define REFUSE(...)                                                                       \
	do {                                                                              \
		if (snprintf(a, sizeof(a), __VA_ARGS__) < (int)sizeof(a))                 \
			proxy_connect_refused(r, a, 0);                                   \
	} while (0)

static void net09_forms(ab_probe_run *r, const char *u, unsigned p, const char *ip)
{
	char a[700];
	REFUSE("127.0.0.1:%u", p);
	REFUSE("[::1]:%u", p);
	REFUSE("[::ffff:127.0.0.1]:%u", p);
	REFUSE("2130706433:%u", p);
	REFUSE("0x7f.1:%u", p);
	REFUSE("localhost:%u", p);
	if (ip)
		REFUSE("%s:%u", ip, p);
	REFUSE("%s:22", u);
	REFUSE("%s:8443", u);
	REFUSE("%s:0", u);
	REFUSE("%s:65536", u);
	REFUSE("%s:", u);
	REFUSE("%s:%u:%u", u, p, p);
	REFUSE("%s.evil.test:%u", u, p);
	REFUSE("evil%s:%u", u, p);
	REFUSE("sub.%s:%u", u, p);
	REFUSE("*.%s:%u", u, p);
	REFUSE("%s..:%u", u, p);
	REFUSE("%s:%u@evil.test:%u", u, p, p);
	REFUSE("user@%s:%u", u, p);
	REFUSE("%s@evil.test:%u", u, p);
	REFUSE("%s%%2eevil.test:%u", u, p);
	REFUSE("%%%02X%s:%u", (unsigned char)u[0], u + 1, p);
	REFUSE("%s :%u", u, p);
	REFUSE("\xc3\xa9%s:%u", u, p);
	REFUSE("%s;evil.test:%u", u, p);
	/* a NUL inside the name */
	int n = snprintf(a, sizeof(a), "%s#.evil.test:%u", u, p);
	if (n > 0 && n < (int)sizeof(a)) {
		a[strlen(u)] = '\0';
		proxy_connect_refused(r, a, (size_t)n);
	}
	/* very long: a 300-byte name ending in the allowed host; a 64-byte label */
	size_t k = 0, ul = strlen(u);
	while (k + ul + 60 < 300) {
		memset(a + k, 'a', 49);
		a[k + 49] = '.';
		k += 50;
	}
	char longname[320];
	memcpy(longname, a, k);
	longname[k] = '\0';
	REFUSE("%s%s:%u", longname, u, p);
	char label[65];
	memset(label, 'a', 64);
	label[64] = '\0';
	REFUSE("%s.%s:%u", label, u, p);
}
#undef REFUSE

static void net09_http(ab_probe_run *r, const ab_lab_info *lab, const char *ip)
{
	const char *u = lab->unbound_host, *d = lab->denied_host ? lab->denied_host : "evil.test";
	char w[400], url[300];
	snprintf(w, sizeof(w), "tunnel to %s: TLS with SNI %s (domain fronting)", u, d);
	tunnel_refused(r, w, NULL, d, NULL);
	if (ip) {
		snprintf(w, sizeof(w), "transparent %s (%s): TLS with SNI %s", ip, u, d);
		tunnel_refused(r, w, ip, d, NULL);
	}
	_cleanup_free_ char *plain = ab_asprintf("GET / HTTP/1.1\r\nHost: %s\r\nConnection: close"
						 "\r\n\r\n", d);
	snprintf(w, sizeof(w), "tunnel to %s: plain HTTP with Host: %s", u, d);
	if (plain)
		tunnel_refused(r, w, NULL, NULL, plain);
	_cleanup_free_ char *nested = ab_asprintf("CONNECT %s:%u HTTP/1.1\r\nHost: %s:%u\r\n\r\n",
						  d, lab->https_port, d, lab->https_port);
	snprintf(w, sizeof(w), "tunnel to %s: nested CONNECT %s", u, d);
	if (nested)
		tunnel_refused(r, w, NULL, NULL, nested);
	snprintf(url, sizeof(url), "http://%s/", u);
	snprintf(w, sizeof(w), "proxy: GET %s with Host: %s", url, d);
	_cleanup_free_ char *m1 = pn_http_req("GET", url, d, NULL, NULL);
	if (m1)
		proxy_request_refused(r, w, m1);
	snprintf(w, sizeof(w), "proxy: GET %s with Host: %s and Host: %s", url, u, d);
	_cleanup_free_ char *hh = ab_asprintf("Host: %s\r\n", d);
	_cleanup_free_ char *m2 = hh ? pn_http_req("GET", url, u, hh, NULL) : NULL;
	if (m2)
		proxy_request_refused(r, w, m2);
	snprintf(url, sizeof(url), "http://%s@%s/", u, d);
	snprintf(w, sizeof(w), "proxy: GET %s (userinfo)", url);
	_cleanup_free_ char *m3 = pn_http_req("GET", url, u, NULL, NULL);
	if (m3)
		proxy_request_refused(r, w, m3);
}

/* NET-09: proxy host forms with lab->unbound_host allowed on 443.
 *  - must work (same host): CONNECT UPPER-CASE:443, trailing dot, the
 *    canonical form; getaddrinfo of the upper-case and dotted names
 *  - must be refused: its IP forms (127.0.0.1, [::1], mapped, decimal, hex,
 *    localhost, the synthetic address), other ports (22, 8443, 0, 65536,
 *    empty, doubled), look-alikes (HOST.evil.test, evilHOST, sub.HOST,
 *    double dot, *.HOST), userinfo and '@' forms, percent-encoding, a space,
 *    non-ASCII, ';', a NUL byte, 300-byte and 64-byte-label names
 *  - inside an allowed tunnel: TLS with SNI = the denied host (explicit and
 *    transparent), plain HTTP with another Host, a nested CONNECT
 *  - absolute-form: host != Host header, two Host headers, userinfo */
void ab_probe_net09(ab_probe_run *r)
{
	const ab_lab_info *lab = ab_pr_lab(r);
	pn_lab_ca = lab->lab_ca; /* the blind tunnel's issuer (public) */
	const char *u = lab->unbound_host;
	char up[256], a[300], ip[64] = "", w[400];
	budget_start();
	if (!need(r, "proxy host forms", u, "unbound_host") || strlen(u) > 200)
		return;
	for (size_t i = 0; i <= strlen(u); i++)
		up[i] = (char)(u[i] >= 'a' && u[i] <= 'z' ? u[i] - 32 : u[i]);
	pn_authority(a, sizeof(a), u, lab->https_port);
	connect_works(r, a);
	pn_authority(a, sizeof(a), up, lab->https_port);
	connect_works(r, a);
	snprintf(a, sizeof(a), "%s.:%u", u, lab->https_port);
	connect_works(r, a);
	if (transparent_mode(r) != 0) {
		snprintf(w, sizeof(w), "getaddrinfo(%s) (same host: must resolve)", up);
		if (synth_addr(r, w, up, a, sizeof(a)) == 0)
			ab_pr_ok(r, w, "resolved to %s", a);
		snprintf(a, sizeof(a), "%s.", u);
		snprintf(w, sizeof(w), "getaddrinfo(%s) (same host: must resolve)", a);
		char ip2[64];
		if (synth_addr(r, w, a, ip2, sizeof(ip2)) == 0)
			ab_pr_ok(r, w, "resolved to %s", ip2);
		if (pn_lookup(u, AF_INET, ip, sizeof(ip)) != 0 || !pn_is_synthetic(ip))
			ip[0] = '\0';
	}
	net09_forms(r, u, lab->https_port, ip[0] ? ip : NULL);
	net09_http(r, lab, ip[0] ? ip : NULL);
}
