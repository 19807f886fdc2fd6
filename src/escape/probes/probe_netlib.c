/* SPDX-License-Identifier: MIT */
/*
 * The small network client of the network and credential probes
 * (probe_net.c, probe_crd.c, through probe_netrec.c): non-blocking connect
 * with a short timeout, HTTP/1.1 through agentbox's explicit proxy (CONNECT,
 * absolute-form) or straight to the transparent path's synthetic addresses,
 * TLS with OpenSSL (default verify paths, SNI, hostname check, ALPN
 * http/1.1), strictly bounded response reading, and a minimal DNS client.
 * Inside the sandbox, in a probe's forked child; no policy here: the probes
 * judge.  Every byte read is scanned for canaries.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "probe_netlib.h"

double pn_mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* Printable text of s (escapes for the rest), cut to fit; for `what`. */
void pn_show(char *dst, size_t n, const char *s, size_t len)
{
	size_t j = 0;
	for (size_t i = 0; i < len && j + 8 < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (j > 90) {
			j += (size_t)snprintf(dst + j, n - j, "...(%zu bytes)", len);
			break;
		}
		if (c >= 0x20 && c < 0x7f && c != '\\')
			dst[j++] = (char)c;
		else
			j += (size_t)snprintf(dst + j, n - j, "\\x%02x", c);
	}
	dst[j < n ? j : n - 1] = '\0';
}

/* The first line of src as printable ASCII (for results); canary-shaped
 * text is withheld: values are never printed. */
void pn_clean_line(char *dst, size_t n, const char *src, size_t len)
{
	size_t j = 0;
	for (size_t i = 0; i < len && src[i] != '\r' && src[i] != '\n' && j + 1 < n; i++)
		dst[j++] = (src[i] >= 0x20 && src[i] < 0x7f) ? src[i] : '?';
	dst[j] = '\0';
	if (strcasestr(dst, AB_CANARY_PREFIX))
		snprintf(dst, n, "(withheld: canary-shaped text)");
}

/* "host:port", with brackets for an IPv6 literal. */
void pn_authority(char *dst, size_t n, const char *host, unsigned port)
{
	bool v6 = strchr(host, ':') && host[0] != '[';
	if (snprintf(dst, n, "%s%s%s:%u", v6 ? "[" : "", host, v6 ? "]" : "", port) >= (int)n)
		dst[0] = '\0';
}

bool pn_is_synthetic(const char *ip)
{
	struct in_addr a;
	return inet_pton(AF_INET, ip, &a) == 1 && (ntohl(a.s_addr) & 0xfffe0000u) == 0xc6120000u;
}

bool pn_is_loopback(const char *ip)
{
	struct in_addr a;
	if (inet_pton(AF_INET, ip, &a) == 1)
		return (ntohl(a.s_addr) >> 24) == 127;
	return strcmp(ip, "::1") == 0;
}

int pn_mk_addr(const char *ip, unsigned port, struct sockaddr_storage *ss, socklen_t *sl)
{
	struct sockaddr_in *a4 = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)ss;
	char tmp[INET6_ADDRSTRLEN + 2];
	size_t n = strlen(ip);
	memset(ss, 0, sizeof(*ss));
	if (inet_pton(AF_INET, ip, &a4->sin_addr) == 1) {
		a4->sin_family = AF_INET;
		a4->sin_port = htons((uint16_t)port);
		*sl = sizeof(*a4);
		return 0;
	}
	if (ip[0] == '[' && n > 2 && ip[n - 1] == ']' && n - 2 < sizeof(tmp)) {
		memcpy(tmp, ip + 1, n - 2);
		tmp[n - 2] = '\0';
		ip = tmp;
	}
	if (inet_pton(AF_INET6, ip, &a6->sin6_addr) == 1) {
		a6->sin6_family = AF_INET6;
		a6->sin6_port = htons((uint16_t)port);
		*sl = sizeof(*a6);
		return 0;
	}
	errno = EINVAL;
	return -1;
}

static int close_keep_errno(int fd)
{
	int e = errno;
	close(fd);
	errno = e;
	return -1;
}

/* Connect with a timeout.  Returns a blocking fd with I/O timeouts, or -1
 * with errno (ETIMEDOUT when nothing answered within PN_IO_MS). */
int pn_dial(const struct sockaddr *sa, socklen_t sl, int type, int proto)
{
	int fd = socket(sa->sa_family, type | SOCK_CLOEXEC | SOCK_NONBLOCK, proto);
	if (fd < 0)
		return -1;
	if (connect(fd, sa, sl) < 0) {
		if (errno != EINPROGRESS)
			return close_keep_errno(fd);
		struct pollfd p = {fd, POLLOUT, 0};
		int k;
		do
			k = poll(&p, 1, PN_IO_MS);
		while (k < 0 && errno == EINTR);
		if (k <= 0) {
			errno = k == 0 ? ETIMEDOUT : errno;
			return close_keep_errno(fd);
		}
		int soerr = 0;
		socklen_t l = sizeof(soerr);
		if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &l) < 0)
			return close_keep_errno(fd);
		if (soerr) {
			errno = soerr;
			return close_keep_errno(fd);
		}
	}
	int fl = fcntl(fd, F_GETFL);
	struct timeval tv = {PN_IO_MS / 1000, (PN_IO_MS % 1000) * 1000};
	if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) < 0)
		return close_keep_errno(fd);
	return fd;
}

int pn_dial_ip(const char *ip, unsigned port)
{
	struct sockaddr_storage ss;
	socklen_t sl;
	if (pn_mk_addr(ip, port, &ss, &sl) < 0)
		return -1;
	return pn_dial((struct sockaddr *)&ss, sl, SOCK_STREAM, 0);
}

void pn_conn_close(pn_conn *c)
{
	if (c->ssl)
		SSL_free(c->ssl);
	if (c->fd >= 0)
		close(c->fd);
	c->ssl = NULL;
	c->fd = -1;
}

int pn_conn_send(pn_conn *c, const char *p, size_t n)
{
	while (n) {
		ssize_t k;
		if (c->ssl) {
			ERR_clear_error();
			int w = SSL_write(c->ssl, p, n > INT_MAX ? INT_MAX : (int)n);
			if (w <= 0 && !errno)
				errno = EPIPE;
			k = w > 0 ? w : -1;
		} else {
			k = send(c->fd, p, n, MSG_NOSIGNAL);
		}
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return -1;
		p += k;
		n -= (size_t)k;
	}
	return 0;
}

/* > 0 bytes, 0 end of stream, -1 with errno (ETIMEDOUT: nothing in PN_IO_MS). */
ssize_t pn_conn_recv(pn_conn *c, char *buf, size_t n)
{
	if (c->ssl) {
		ERR_clear_error();
		errno = 0;
		int k = SSL_read(c->ssl, buf, n > INT_MAX ? INT_MAX : (int)n);
		if (k > 0)
			return k;
		int e = SSL_get_error(c->ssl, k);
		if (e == SSL_ERROR_ZERO_RETURN || (e == SSL_ERROR_SYSCALL && errno == 0))
			return 0;
		if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE || errno == EAGAIN)
			errno = ETIMEDOUT;
		else if (!errno)
			errno = EPROTO;
		return -1;
	}
	ssize_t k;
	do
		k = recv(c->fd, buf, n, 0);
	while (k < 0 && errno == EINTR);
	if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
		errno = ETIMEDOUT;
	return k;
}

void pn_resp_free(pn_resp *rs)
{
	free(rs->body);
	rs->body = NULL;
}

/* The value of header `name` in a NUL-terminated head, or NULL. */
static const char *head_field(const char *head, const char *name)
{
	size_t nl = strlen(name);
	for (const char *p = strstr(head, "\r\n"); p && p[2] != '\r' && p[2];
	     p = strstr(p + 2, "\r\n")) {
		const char *l = p + 2;
		if (strncasecmp(l, name, nl) == 0 && l[nl] == ':') {
			l += nl + 1;
			while (*l == ' ' || *l == '\t')
				l++;
			return l;
		}
	}
	return NULL;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	c = (char)(c | 0x20);
	return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* De-chunk in[0..n) into out (capacity n); stops at anything malformed. */
size_t pn_dechunk(const char *in, size_t n, char *out)
{
	size_t i = 0, o = 0;
	while (i < n) {
		size_t sz = 0;
		int digits = 0;
		for (; i < n && hexval(in[i]) >= 0 && digits < 8; i++, digits++)
			sz = sz * 16 + (size_t)hexval(in[i]);
		const char *nl = memchr(in + i, '\n', n - i);
		if (!digits || !nl || sz == 0 || (i < n && hexval(in[i]) >= 0))
			break;
		i = (size_t)(nl - in) + 1;
		size_t take = sz < n - i ? sz : n - i;
		memcpy(out + o, in + i, take);
		o += take;
		i += take + 2;
	}
	return o;
}

/* How many bytes the whole response takes (head + body), as far as the
 * head tells; PN_RESP_MAX when it says nothing (read to the end). */
static size_t resp_want(const char *buf, size_t hend, int status, bool connect_mode, bool *chunked)
{
	const char *te = head_field(buf, "Transfer-Encoding");
	const char *cl = head_field(buf, "Content-Length");
	*chunked = te && strncasecmp(te, "chunked", 7) == 0;
	if ((connect_mode && status / 100 == 2) || status == 204 || status == 304)
		return hend;
	if (cl && !*chunked) {
		char *end;
		errno = 0;
		unsigned long long v = strtoull(cl, &end, 10);
		if (!errno && end != cl && v <= PN_RESP_MAX)
			return hend + (size_t)v < PN_RESP_MAX ? hend + (size_t)v : PN_RESP_MAX;
	}
	return PN_RESP_MAX;
}

static void resp_parse_head(pn_resp *rs, char *buf, size_t hend)
{
	char c = buf[hend];
	buf[hend] = '\0';
	pn_clean_line(rs->line, sizeof(rs->line), buf, hend);
	if (strncmp(buf, "HTTP/1.", 7) == 0 && (buf[7] == '0' || buf[7] == '1') && buf[8] == ' ' &&
	    buf[9] >= '1' && buf[9] <= '5' && buf[10] >= '0' && buf[10] <= '9' && buf[11] >= '0' &&
	    buf[11] <= '9' && (buf[12] == ' ' || buf[12] == '\r'))
		rs->status = (buf[9] - '0') * 100 + (buf[10] - '0') * 10 + (buf[11] - '0');
	buf[hend] = c;
}

/* Read one response (a CONNECT answer reads no byte past its head when it
 * is 2xx: the tunnel follows).  Every byte read is scanned. */
void pn_read_response(ab_probe_run *r, const char *what, pn_conn *c, bool connect_mode, pn_resp *rs)
{
	memset(rs, 0, sizeof(*rs));
	rs->status = -1;
	char *buf = malloc(PN_RESP_MAX + 1);
	size_t got = 0, hend = 0, want = PN_RESP_MAX;
	bool chunked = false;
	if (!buf) {
		rs->err = ENOMEM;
		return;
	}
	while (!hend && got < PN_HEAD_MAX) {
		ssize_t k = pn_conn_recv(c, buf + got, connect_mode ? 1 : PN_HEAD_MAX - got);
		if (k <= 0) {
			rs->err = k < 0 ? errno : 0;
			break;
		}
		got += (size_t)k;
		char *e = memmem(buf, got, "\r\n\r\n", 4);
		if (e)
			hend = (size_t)(e - buf) + 4;
	}
	buf[got] = '\0';
	if (hend) {
		resp_parse_head(rs, buf, hend);
		want = resp_want(buf, hend, rs->status, connect_mode, &chunked);
		if (got > want) /* bytes past the response are not its */
			got = want;
	} else if (got) {
		pn_clean_line(rs->line, sizeof(rs->line), buf, got);
		if (got >= PN_HEAD_MAX)
			rs->err = EMSGSIZE;
	}
	while (hend && got < want) {
		ssize_t k = pn_conn_recv(c, buf + got, want - got);
		if (k <= 0) {
			if (k < 0 && want != PN_RESP_MAX)
				rs->err = errno;
			break;
		}
		got += (size_t)k;
		if (chunked && got - hend >= 5 && memcmp(buf + got - 5, "0\r\n\r\n", 5) == 0)
			break;
	}
	buf[got] = '\0';
	if (r)
		ab_pr_scan(r, what, buf, got);
	if (hend && (rs->body = malloc(got - hend + 1))) {
		rs->nbody = chunked ? pn_dechunk(buf + hend, got - hend, rs->body) : got - hend;
		if (!chunked)
			memcpy(rs->body, buf + hend, rs->nbody);
		rs->body[rs->nbody] = '\0';
		pn_clean_line(rs->reason, sizeof(rs->reason), rs->body, rs->nbody);
	}
	free(buf);
}

/* The lab server's word on what arrived in its secret header ("real",
 * "placeholder", "other", "none"), or NULL when the body is not its JSON. */
const char *pn_server_secret(const pn_resp *rs, char *out, size_t n)
{
	if (!rs->body || !n)
		return NULL;
	json_t *j = json_loadb(rs->body, rs->nbody, 0, NULL);
	const char *s = json_string_value(json_object_get(j, "secret"));
	size_t k = 0;
	for (; s && s[k] && k + 1 < n && k < 16; k++)
		out[k] = (s[k] >= 'a' && s[k] <= 'z') ? s[k] : '?';
	out[k] = '\0';
	json_decref(j);
	return s ? out : NULL;
}

const char *pn_lab_ca;

static SSL_CTX *tls_ctx(bool verify)
{
	static SSL_CTX *ctx[2];
	static const unsigned char alpn[] = "\x08http/1.1";
	if (ctx[verify])
		return ctx[verify];
	SSL_CTX *x = SSL_CTX_new(TLS_client_method());
	if (!x)
		return NULL;
	SSL_CTX_set_min_proto_version(x, TLS1_2_VERSION);
	SSL_CTX_set_alpn_protos(x, alpn, sizeof(alpn) - 1);
	if (verify) {
		SSL_CTX_set_default_verify_paths(x);
		if (pn_lab_ca)
			SSL_CTX_load_verify_locations(x, pn_lab_ca, NULL);
		SSL_CTX_set_verify(x, SSL_VERIFY_PEER, NULL);
	} else {
		SSL_CTX_set_verify(x, SSL_VERIFY_NONE, NULL);
	}
	return ctx[verify] = x;
}

/* TLS over c->fd: SNI `sni` (NULL: none); verified against the default
 * store with a hostname check when `verify` names a host.  0, or -1 with
 * why filled. */
int pn_tls_start(pn_conn *c, const char *sni, const char *verify, char *why, size_t n)
{
	SSL_CTX *x = tls_ctx(verify != NULL);
	if (!x || !(c->ssl = SSL_new(x))) {
		snprintf(why, n, "TLS: out of memory");
		return -1;
	}
	SSL_set_fd(c->ssl, c->fd);
	if (sni)
		SSL_set_tlsext_host_name(c->ssl, sni);
	if (verify)
		SSL_set1_host(c->ssl, verify);
	ERR_clear_error();
	errno = 0;
	if (SSL_connect(c->ssl) == 1)
		return 0;
	long vr = SSL_get_verify_result(c->ssl);
	unsigned long e = ERR_peek_error();
	if (verify && vr != X509_V_OK)
		snprintf(why, n, "TLS: certificate: %s", X509_verify_cert_error_string(vr));
	else if (e)
		snprintf(why, n, "TLS handshake: %s",
			 ERR_reason_error_string(e) ? ERR_reason_error_string(e) : "error");
	else if (errno)
		snprintf(why, n, "TLS handshake: %s", strerror(errno));
	else
		snprintf(why, n, "TLS handshake: closed by the peer");
	SSL_free(c->ssl);
	c->ssl = NULL;
	return -1;
}

void pn_hx_free(pn_hx *h)
{
	pn_resp_free(&h->cr);
	pn_resp_free(&h->rs);
}

static void why_resp(char *why, size_t n, const char *stage, const pn_resp *rs)
{
	if (rs->status >= 0)
		snprintf(why, n, "%s: %s%s%s", stage, rs->line, rs->reason[0] ? " | " : "",
			 rs->reason);
	else if (rs->err && rs->err != ECONNRESET)
		snprintf(why, n, "%s: no answer (%s)", stage, strerror(rs->err));
	else
		snprintf(why, n, "%s: closed without an answer", stage);
}

static int send_connect(pn_conn *c, const char *auth, size_t alen)
{
	size_t n = 2 * alen + 64;
	_cleanup_free_ char *b = malloc(n);
	if (!b)
		return -1;
	size_t k = 0;
	memcpy(b + k, "CONNECT ", 8), k += 8;
	memcpy(b + k, auth, alen), k += alen;
	memcpy(b + k, " HTTP/1.1\r\nHost: ", 17), k += 17;
	memcpy(b + k, auth, alen), k += alen;
	memcpy(b + k, "\r\n\r\n", 4), k += 4;
	return pn_conn_send(c, b, k);
}

void pn_hx_run(ab_probe_run *r, const char *what, const pn_target *t, const char *req, pn_hx *h)
{
	const ab_lab_info *lab = ab_pr_lab(r);
	pn_conn c = {-1, NULL};
	memset(h, 0, sizeof(*h));
	h->cr.status = h->rs.status = -1;
	c.fd = t->authority ? pn_dial_ip("127.0.0.1", lab->proxy_port) : pn_dial_ip(t->ip, t->port);
	if (c.fd < 0) {
		h->dial_err = errno;
		snprintf(h->why, sizeof(h->why), "connect %s port %u: %s",
			 t->authority ? "the proxy, 127.0.0.1" : t->ip,
			 t->authority ? lab->proxy_port : t->port, strerror(errno));
		return;
	}
	h->connected = true;
	h->proxied = t->authority != NULL;
	if (t->authority) {
		size_t alen = t->alen ? t->alen : strlen(t->authority);
		if (send_connect(&c, t->authority, alen) == 0)
			pn_read_response(r, what, &c, true, &h->cr);
		else
			h->cr.err = errno;
		if (h->cr.status != 200) {
			why_resp(h->why, sizeof(h->why), "CONNECT", &h->cr);
			pn_conn_close(&c);
			return;
		}
	}
	if (t->tls) {
		h->tls = pn_tls_start(&c, t->sni, t->verify, h->why, sizeof(h->why)) == 0 ? 1 : -1;
		if (h->tls < 0) {
			pn_conn_close(&c);
			return;
		}
	}
	if (req) {
		int se = pn_conn_send(&c, req, strlen(req)) < 0 ? errno : 0;
		pn_read_response(r, what, &c, false, &h->rs); /* a refusal may precede the cut */
		if (h->rs.status < 0 && se && !h->rs.err)
			h->rs.err = se;
		if (h->rs.status < 0)
			why_resp(h->why, sizeof(h->why), "request", &h->rs);
	}
	pn_conn_close(&c);
}

/* A request line + headers; `extra` is preformatted "Name: value\r\n"... */
char *pn_http_req(const char *method, const char *uri, const char *host, const char *extra,
		  const char *body)
{
	char cl[48] = "";
	if (body)
		snprintf(cl, sizeof(cl), "Content-Length: %zu\r\n", strlen(body));
	return ab_asprintf("%s %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: agentbox-probe\r\n"
			   "Accept: */*\r\n%s%sConnection: close\r\n\r\n%s",
			   method, uri, host, extra ? extra : "", cl, body ? body : "");
}

size_t pn_dns_build(uint8_t *q, size_t cap, uint16_t id, const char *name, uint16_t type)
{
	size_t k = 12;
	if (cap < 12 + 256 + 4)
		return 0;
	memset(q, 0, 12);
	q[0] = (uint8_t)(id >> 8), q[1] = (uint8_t)id, q[2] = 0x01; /* RD */
	q[5] = 1;                                                   /* QDCOUNT */
	for (const char *p = name; *p;) {
		const char *dot = strchr(p, '.');
		size_t l = dot ? (size_t)(dot - p) : strlen(p);
		if (l == 0 || l > 63 || k + l + 1 > 12 + 255)
			return 0;
		q[k++] = (uint8_t)l;
		memcpy(q + k, p, l);
		k += l;
		p += l + (dot ? 1 : 0);
	}
	q[k++] = 0;
	q[k++] = (uint8_t)(type >> 8), q[k++] = (uint8_t)type;
	q[k++] = 0, q[k++] = 1; /* IN */
	return k;
}

/* One query; 1 answered (*rcode, *an), 0 no answer in PN_IO_MS, -1 errno. */
int pn_dns_ask(ab_probe_run *r, const char *server, const char *name, uint16_t type, bool tcp,
	       int *rcode, int *an)
{
	uint8_t q[2 + 512], a[4096];
	uint16_t id = (uint16_t)(getpid() ^ (unsigned)pn_mono_ms());
	size_t n = pn_dns_build(q + 2, sizeof(q) - 2, id, name, type);
	struct sockaddr_storage ss;
	socklen_t sl;
	if (!n || pn_mk_addr(server, 53, &ss, &sl) < 0) {
		errno = EINVAL;
		return -1;
	}
	q[0] = (uint8_t)(n >> 8), q[1] = (uint8_t)n;
	int fd = pn_dial((struct sockaddr *)&ss, sl, tcp ? SOCK_STREAM : SOCK_DGRAM, 0);
	if (fd < 0)
		return errno == ETIMEDOUT ? 0 : -1;
	struct timeval tv = {PN_DNS_MS / 1000, (PN_DNS_MS % 1000) * 1000};
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	ssize_t k = send(fd, tcp ? q : q + 2, tcp ? n + 2 : n, MSG_NOSIGNAL);
	if (k < 0)
		return close_keep_errno(fd);
	size_t got = 0;
	do {
		k = recv(fd, a + got, sizeof(a) - got, 0);
		got += k > 0 ? (size_t)k : 0;
	} while (tcp && k > 0 && (got < 2 || got < 2 + ((size_t)a[0] << 8 | a[1])) &&
		 got < sizeof(a));
	int e = k == 0 ? ECONNRESET : errno;
	close(fd);
	if (got == 0) {
		errno = e;
		return k < 0 && (e == EAGAIN || e == EWOULDBLOCK || e == ETIMEDOUT) ? 0 : -1;
	}
	if (r)
		ab_pr_scan(r, "DNS answer", a, got);
	if (tcp ? pn_dns_parse(a + 2, got >= 2 ? got - 2 : 0, id, rcode, an)
		: pn_dns_parse(a, got, id, rcode, an)) {
		errno = EPROTO;
		return -1;
	}
	return 1;
}

int pn_dns_parse(const uint8_t *m, size_t n, uint16_t id, int *rcode, int *an)
{
	if (n < 12 || (m[0] << 8 | m[1]) != id || !(m[2] & 0x80))
		return -1;
	*rcode = m[3] & 0x0f;
	*an = m[6] << 8 | m[7];
	return 0;
}

const char *pn_rcode_name(int rc)
{
	static const char *const n[] = {"NOERROR",  "FORMERR", "SERVFAIL",
					"NXDOMAIN", "NOTIMP",  "REFUSED"};
	return rc >= 0 && rc < 6 ? n[rc] : "rcode?";
}

/* getaddrinfo -> the first address as text; 0 or an EAI_* code. */
int pn_lookup(const char *name, int family, char *ip, size_t n)
{
	struct addrinfo hints = {.ai_family = family, .ai_socktype = SOCK_STREAM}, *res = NULL;
	int k = getaddrinfo(name, NULL, &hints, &res);
	if (k)
		return k;
	const void *a = res->ai_family == AF_INET
				? (const void *)&((struct sockaddr_in *)res->ai_addr)->sin_addr
				: (const void *)&((struct sockaddr_in6 *)res->ai_addr)->sin6_addr;
	if (!inet_ntop(res->ai_family, a, ip, (socklen_t)n))
		snprintf(ip, n, "?");
	freeaddrinfo(res);
	return 0;
}
