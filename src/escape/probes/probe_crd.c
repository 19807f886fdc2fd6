/* SPDX-License-Identifier: MIT */
/*
 * Credential probes of `agentbox test-escape`: CTL-02 (positive control:
 * the placeholder sent to the bound host arrives there as the real secret),
 * CRD-01 (agent and daemon sockets, agentbox's own control socket) and
 * CRD-03 (the placeholder where it must never become the secret: other
 * hosts, other places in the request, header smuggling).
 *
 * Runs INSIDE the sandbox, each probe in its own forked child of the runner
 * (runner.c), through the client of probe_netlib.c and the recording
 * helpers of probe_netrec.c.  Unix sockets are connected to, never written
 * to; the lab's servers answer what arrived in the secret's header, and
 * the judge (host side) counts what its fake agents and servers saw.
 */
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "agentbox/control.h"
#include "probe_netrec.h"

/* ------------------------------------------------------------ CTL-02 */

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
	pnr_budget_start();
	const char *ph = pnr_placeholder(r, what);
	if (!ph || !pnr_need(r, what, lab->bound_host, "bound_host") ||
	    !pnr_need(r, what, lab->secret_header, "secret_header"))
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
	pn_target t = {
		.authority = auth, .tls = true, .sni = lab->bound_host, .verify = lab->bound_host};
	pnr_ctl_exchange(r, w, &t, req, "real");
	snprintf(w, sizeof(w),
		 "transparent: %s -> synthetic address :%u, TLS (verified), GET / "
		 "with %s",
		 lab->bound_host, lab->https_port, lab->secret_header);
	if (pnr_synth_addr(r, w, lab->bound_host, ip, sizeof(ip)) == 0) {
		pn_target t2 = {.ip = ip,
				.port = lab->https_port,
				.tls = true,
				.sni = lab->bound_host,
				.verify = lab->bound_host};
		pnr_ctl_exchange(r, w, &t2, req, "real");
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
	if (!pnr_budget(r, what))
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
	try_unix_addr(
		r, what, &sa,
		(socklen_t)(offsetof(struct sockaddr_un, sun_path) + abstract + n + !abstract));
}

// clang-format off
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
// clang-format on

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
			snprintf(path, sizeof(path), "/run/user/%u/agentbox/%s", (unsigned)uids[i],
				 name);
			try_unix(r, path, false);
			snprintf(path, sizeof(path), "/tmp/agentbox-%u/%s", (unsigned)uids[i],
				 name);
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
	pnr_budget_start();
	for (size_t i = 0; i < lab->agent_sockets.n; i++)
		if (lab->agent_sockets.v[i][0] != '@')
			ab_strv_push_unique(&paths, lab->agent_sockets.v[i]);
	const char *ssh = getenv("SSH_AUTH_SOCK");
	if (ssh && *ssh)
		ab_strv_push_unique(&paths, ssh);
	const char *home = getenv("HOME");
	_cleanup_free_ char *gpg =
		home && *home ? ab_asprintf("%s/.gnupg/S.gpg-agent", home) : NULL;
	if (gpg)
		ab_strv_push_unique(&paths, gpg);
	const char *dirs[] = {lab->runtime_dir, getenv("XDG_RUNTIME_DIR"), lab->home, home};
	for (size_t d = 0; d < AB_ARRAY_SIZE(dirs); d++) {
		if (!dirs[d] || dirs[d][0] != '/')
			continue;
		for (size_t p = 0; p < 2; p++) {
			_cleanup_free_ char *pat =
				d < 2 ? ab_asprintf("%s/%s", dirs[d], p ? "*/*" : "*")
				      : ab_asprintf("%s/%s", dirs[d],
						    p ? ".ssh/*.sock" : ".gnupg/S.*");
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
		pnr_rec_refusal(r, what, &h->cr);
	} else if (h->rs.status < 0 || (h->rs.status >= 400 && h->rs.status < 500 && !s)) {
		pnr_rec_refusal(r, what, &h->rs);
	} else if (s && strcmp(s, "real") == 0 && ex == EXP_ANY) {
		ab_pr_ok(r, what, "%s: secret=real (the allowed header)", h->rs.line);
	} else if (s && strcmp(s, "real") == 0) {
		ab_pr_escaped(r, what, "%s: the server saw the REAL secret", h->rs.line);
	} else if (ex != EXP_REFUSE && s) {
		ab_pr_ok(r, what, "%s: the server saw secret=%s", h->rs.line, s);
	} else {
		ab_pr_error(r, what,
			    "not refused: %s (the server saw secret=%s; the inside "
			    "cannot tell what arrived)",
			    h->rs.line, s ? s : "(no lab JSON)");
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
	if (!req || !pnr_budget(r, what))
		return;
	pn_authority(auth, sizeof(auth), host, lab->https_port);
	pn_target t = {.authority = ip ? NULL : auth,
		       .ip = ip,
		       .port = lab->https_port,
		       .tls = true,
		       .sni = host};
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
	if (!pnr_budget(r, what))
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
	if (pnr_need(r, "the placeholder to the unbound host", u, "unbound_host")) {
		_cleanup_free_ char *req = pn_http_req("GET", "/", u, hdr, NULL);
		snprintf(w, sizeof(w), "explicit: CONNECT %s:%u, TLS, GET / with %s", u,
			 lab->https_port, hn);
		crd03_https(r, w, u, NULL, req, EXP_NOT_REAL);
		snprintf(w, sizeof(w), "transparent: %s:%u, TLS, GET / with %s", u, lab->https_port,
			 hn);
		if (pnr_synth_addr(r, w, u, ip, sizeof(ip)) == 0)
			crd03_https(r, w, u, ip, req, EXP_NOT_REAL);
		snprintf(url, sizeof(url), "http://%s/", u);
		snprintf(w, sizeof(w), "proxy: plain GET %s with %s", url, hn);
		_cleanup_free_ char *preq = pn_http_req("GET", url, u, hdr, NULL);
		if (preq)
			proxy_request_not_real(r, w, preq);
	}
	if (!pnr_need(r, "the placeholder to the denied host", d, "denied_host"))
		return;
	pn_authority(auth, sizeof(auth), d, lab->https_port);
	pnr_proxy_connect_refused(r, auth, 0);
	snprintf(url, sizeof(url), "http://%s/", d);
	snprintf(w, sizeof(w), "proxy: GET %s with %s", url, hn);
	_cleanup_free_ char *dreq = pn_http_req("GET", url, d, hdr, NULL);
	if (dreq)
		pnr_proxy_request_refused(r, w, dreq);
	pnr_rec_lookup_fails(r, d, AF_UNSPEC, ip, sizeof(ip));
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
		EVP_EncodeBlock((unsigned char *)b64, (const unsigned char *)b64in,
				(int)strlen(b64in));
	struct {
		const char *label;
		char *req;
		enum expect ex;
	} v[] = {
		{"in the URL query",
		 ab_asprintf("GET /?token=%s HTTP/1.1\r\nHost: %s\r\n"
			     "Connection: close\r\n\r\n",
			     ph, b),
		 EXP_REFUSE},
		{"in the path",
		 ab_asprintf("GET /%s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", ph, b),
		 EXP_REFUSE},
		{"in the body",
		 ab_asprintf("POST / HTTP/1.1\r\nHost: %s\r\nContent-Type: "
			     "application/x-www-form-urlencoded\r\nContent-Length: %zu\r\n"
			     "Connection: close\r\n\r\ntoken=%s",
			     b, strlen(ph) + 6, ph),
		 EXP_REFUSE},
		{"in another header",
		 ab_asprintf("GET / HTTP/1.1\r\nHost: %s\r\nX-Probe-Other: %s\r\n"
			     "Connection: close\r\n\r\n",
			     b, ph),
		 EXP_REFUSE},
		{"as a header name",
		 ab_asprintf("GET / HTTP/1.1\r\nHost: %s\r\n%s: x\r\n"
			     "Connection: close\r\n\r\n",
			     b, ph),
		 EXP_REFUSE},
		{"in Authorization: Basic",
		 ab_asprintf("GET / HTTP/1.1\r\nHost: %s\r\nAuthorization: "
			     "Basic %s\r\nConnection: close\r\n\r\n",
			     b, b64),
		 EXP_REFUSE},
		{"split across two secret headers",
		 ab_asprintf("GET / HTTP/1.1\r\nHost: %s\r\n"
			     "%s: %.*s\r\n%s: %s\r\nConnection: close\r\n\r\n",
			     b, hn, (int)half, ph, hn, ph + half),
		 EXP_NOT_REAL},
		{"in a second Host header",
		 ab_asprintf("GET / HTTP/1.1\r\nHost: %s\r\nHost: %s\r\n"
			     "Connection: close\r\n\r\n",
			     b, ph),
		 EXP_REFUSE},
		{"in an obs-fold continuation of the secret header",
		 ab_asprintf("GET / HTTP/1.1\r\n"
			     "Host: %s\r\n%s: x\r\n %s\r\nConnection: close\r\n\r\n",
			     b, hn, ph),
		 EXP_REFUSE},
		{"in an obs-fold line after another header",
		 ab_asprintf("GET / HTTP/1.1\r\nHost: %s\r\n"
			     "X-Probe-Fold: x\r\n %s: %s\r\nConnection: close\r\n\r\n",
			     b, hn, ph),
		 EXP_REFUSE},
		{"with a space before the colon",
		 ab_asprintf("GET / HTTP/1.1\r\nHost: %s\r\n%s : %s\r\n"
			     "Connection: close\r\n\r\n",
			     b, hn, ph),
		 EXP_REFUSE},
		{"behind Content-Length + Transfer-Encoding (smuggled request)",
		 ab_asprintf(
			 "POST / HTTP/1.1\r\nHost: %s\r\nContent-Length: 4\r\nTransfer-Encoding: chunked"
			 "\r\n\r\n0\r\n\r\nGET /?t=%s HTTP/1.1\r\nHost: %s\r\nX-Probe-Other: %s\r\n\r\n",
			 b, ph, b, ph),
		 EXP_REFUSE},
		{"in the secret header, name upper-cased (same header: real is right)",
		 ab_asprintf("GET / HTTP/1.1\r\nHost: %s\r\n%s: %s\r\nConnection: close\r\n\r\n", b,
			     up, ph),
		 EXP_ANY},
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
		pnr_proxy_request_refused(r, w, preq);
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
	pnr_budget_start();
	const char *ph = pnr_placeholder(r, what);
	if (!ph || !pnr_need(r, what, lab->secret_header, "secret_header"))
		return;
	crd03_unbound_denied(r, ph);
	if (pnr_need(r, "the placeholder to the bound host", lab->bound_host, "bound_host"))
		crd03_bound(r, ph);
}
