/* SPDX-License-Identifier: MIT */
/*
 * probe_netlib.h: the small network client of the network and credential
 * probes (probe_netlib.c), private to src/escape/probes/ (probe_netrec.c,
 * probe_net.c, probe_crd.c) and its unit test.  Inside the sandbox, in a
 * probe's child.
 */
#ifndef AGENTBOX_ESCAPE_PROBE_NETLIB_H
#define AGENTBOX_ESCAPE_PROBE_NETLIB_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include <openssl/ssl.h>

#include "agentbox/escape.h"

#define PN_IO_MS 1500     /* connect, and each read or write */
#define PN_DNS_MS 1000    /* waiting for a DNS answer */
#define PN_HEAD_MAX 16384 /* a response head */
#define PN_RESP_MAX 65536 /* a whole response */
#define PN_TEXT_MAX 160   /* status line, reason */

double pn_mono_ms(void);
/* Printable text of s[0..len) (\xNN for the rest), cut to fit n. */
void pn_show(char *dst, size_t n, const char *s, size_t len);
/* The first line of src as printable ASCII; canary-shaped text withheld. */
void pn_clean_line(char *dst, size_t n, const char *src, size_t len);
/* "host:port", brackets around an IPv6 literal ("" if it does not fit). */
void pn_authority(char *dst, size_t n, const char *host, unsigned port);
bool pn_is_synthetic(const char *ip); /* 198.18.0.0/15 */
bool pn_is_loopback(const char *ip);  /* 127/8, ::1 */
/* An IPv4 or IPv6 literal (brackets allowed) -> sockaddr; -1 EINVAL. */
int pn_mk_addr(const char *ip, unsigned port, struct sockaddr_storage *ss, socklen_t *sl);
/* Connect within PN_IO_MS: a blocking fd with I/O timeouts, or -1 with
 * errno (ETIMEDOUT when nothing answered). */
int pn_dial(const struct sockaddr *sa, socklen_t sl, int type, int proto);
int pn_dial_ip(const char *ip, unsigned port);

typedef struct pn_conn {
	int fd;
	SSL *ssl;
} pn_conn;

void pn_conn_close(pn_conn *c);
int pn_conn_send(pn_conn *c, const char *p, size_t n);
/* > 0 bytes, 0 end of stream, -1 errno (ETIMEDOUT: nothing in time). */
ssize_t pn_conn_recv(pn_conn *c, char *buf, size_t n);
/* TLS over c->fd (SNI `sni`, NULL none; verified against the default store
 * with a hostname check when `verify` names a host).  0, or -1 + why. */
/* PEM file of the lab's test CA, trusted besides the default store (for the
 * unbound host, a blind tunnel whose certificate the lab's CA issued). */
extern const char *pn_lab_ca;
int pn_tls_start(pn_conn *c, const char *sni, const char *verify, char *why, size_t n);

typedef struct pn_resp {
	int status;               /* -1: no (complete) response head */
	int err;                  /* why not: errno, 0 = closed by the peer */
	char line[PN_TEXT_MAX];   /* status line, cleaned */
	char reason[PN_TEXT_MAX]; /* first body line, cleaned (a 403 says why) */
	char *body;               /* de-chunked, NUL-terminated, or NULL */
	size_t nbody;
} pn_resp;

void pn_resp_free(pn_resp *rs);
/* Read one response (a 2xx CONNECT answer: not a byte past its head).
 * Every byte read is scanned for canaries when r is not NULL. */
void pn_read_response(ab_probe_run *r, const char *what, pn_conn *c, bool connect_mode,
		      pn_resp *rs);
/* De-chunk in[0..n) into out (capacity n); stops at anything malformed. */
size_t pn_dechunk(const char *in, size_t n, char *out);
/* The lab server's JSON verdict on its secret header ("real", ...), or NULL. */
const char *pn_server_secret(const pn_resp *rs, char *out, size_t n);

/* One exchange: CONNECT `authority` through the explicit proxy, or dial
 * ip:port (the transparent path, or the proxy port for absolute-form
 * requests); then TLS if asked; then one request. */
typedef struct pn_target {
	const char *authority; /* may hold a NUL: alen */
	size_t alen;           /* 0: strlen(authority) */
	const char *ip;
	unsigned port;
	bool tls;
	const char *sni, *verify;
} pn_target;

typedef struct pn_hx {
	int dial_err;   /* the TCP connect failed (errno) */
	bool connected; /* TCP connected */
	bool proxied;   /* through a CONNECT */
	pn_resp cr;     /* the CONNECT answer */
	int tls;        /* 1 done, -1 failed, 0 not tried */
	pn_resp rs;     /* the request's response */
	char why[400];  /* where and why it stopped, when it did */
} pn_hx;

void pn_hx_run(ab_probe_run *r, const char *what, const pn_target *t, const char *req, pn_hx *h);
void pn_hx_free(pn_hx *h);
/* "METHOD URI HTTP/1.1" + Host + `extra` ("Name: value\r\n"...) + body. */
char *pn_http_req(const char *method, const char *uri, const char *host, const char *extra,
		  const char *body);

/* DNS: a query message (0 if the name does not fit); a reply's rcode and
 * answer count (-1 malformed or not ours); one query over UDP or TCP to
 * server:53 (1 answered, 0 no answer in PN_DNS_MS, -1 errno). */
size_t pn_dns_build(uint8_t *q, size_t cap, uint16_t id, const char *name, uint16_t type);
int pn_dns_parse(const uint8_t *m, size_t n, uint16_t id, int *rcode, int *an);
int pn_dns_ask(ab_probe_run *r, const char *server, const char *name, uint16_t type, bool tcp,
	       int *rcode, int *an);
const char *pn_rcode_name(int rc);
/* getaddrinfo -> the first address as text; 0 or an EAI_* code. */
int pn_lookup(const char *name, int family, char *ip, size_t n);

#endif
