/* SPDX-License-Identifier: MIT */
/*
 * Internals shared by the egress proxy's files (parent only):
 *   proxy.c    set-up, listeners and accept, resolving and dialling, timeouts
 *   pxconn.c   a connection: buffers, loop interest, refusals, closing, the
 *              explicit request head and the policy decision
 *   pxlog.c    the audit lines
 *   pxctl.c    the serving side of `agentbox allow`
 *   pxhttp.c   plain-HTTP forwarding (request/response framing, pipelining)
 *   pxbroker.c what credential brokering does to HTTP: placeholders swapped
 *              or refused, responses masked, token refreshes captured
 *   pxscan.c   bodies through a scanner (de-chunked and re-chunked)
 *   pxtls.c    interception (TLS both ways), its I/O, masked WebSockets
 *   pxtunnel.c the ClientHello/Host check of tunnels and the relay
 *   dnsd.c     the DNS responder and the synthetic address table
 * Functions that can fail return a negative errno, as everywhere else.
 */
#ifndef AGENTBOX_PROXY_INT_H
#define AGENTBOX_PROXY_INT_H

#include <netinet/in.h>
#include <stdint.h>
#include <sys/socket.h>

#include "agentbox/audit.h"
#include "agentbox/http.h"
#include "agentbox/loop.h"
#include "agentbox/netpolicy.h"
#include "agentbox/proxy.h"
#include "resolve.h"
#include "agentbox/secrets.h"
#include "agentbox/wsframe.h"

#define PX_BUF_MAX (64 * 1024) /* stop reading a side when its output holds this */
#define PX_HEAD_MAX AB_HTTP_DEFAULT_MAX_HEAD
#define PX_RESP_HEAD_MAX (64 * 1024) /* upstream response heads (cookies...) */
#define PX_FIFO 16                   /* pipelined requests in flight per connection */
#define PX_MAX_ADDRS 8               /* resolved addresses tried per dial */
#define PX_PATH_LOG 256              /* path bytes kept for the log */

#define PX_WSQ 64 /* frames a masked WebSocket may have waiting for held bytes */

typedef struct px_buf {
	char *p;
	size_t len, cap;
} px_buf;

int px_buf_append(px_buf *b, const void *data, size_t n);
int px_buf_reserve(px_buf *b, size_t need);
void px_buf_consume(px_buf *b, size_t n);
void px_buf_free(px_buf *b);
/* read(2) up to `want` more bytes; returns bytes read, 0 on EOF, -errno */
ssize_t px_buf_read(px_buf *b, int fd, size_t want);
/* write(2) from the front; returns bytes written or -errno (-EAGAIN) */
ssize_t px_buf_write(px_buf *b, int fd);
/* A buffer wiped and freed when its variable goes out of scope. */
#define _cleanup_px_buf_ _cleanup_(px_buf_free)

enum px_side { PX_EXPLICIT, PX_TRANSPARENT };

enum px_state {
	PX_HEAD,       /* explicit: reading a request head */
	PX_RESOLVING,  /* name lookup in flight */
	PX_CONNECTING, /* TCP connect upstream in flight */
	PX_HELLO,      /* tunnel: waiting for the client's first bytes */
	PX_TUNNEL,     /* opaque relay (splice) */
	PX_HTTP,       /* plain HTTP forwarding */
	PX_CLOSING,    /* flushing a final answer to the client */
	PX_UPCONNECT,  /* chaining: CONNECT sent to the corporate proxy, awaiting 200 */
	PX_TLS_ACCEPT, /* interception: the two TLS handshakes, side by side: with the
			   client (session CA leaf) and with the real host (verified) */
	PX_HELD,       /* ask on denial: waiting for the user's answer (pxask.c) */
};

typedef struct px_req {
	char method[16];
	ab_http_method m;
	char path[PX_PATH_LOG];
	uint64_t t0;
	uint64_t up, down;
	uint64_t secrets;        /* bitmask of secrets injected (names in the log) */
	uint64_t masked_in_body; /* bitmask of secrets whose placeholder the body
				    carried masked (mask_in_body; names in the log) */
	uint64_t elsewhere_head, elsewhere_body; /* bitmasks of secrets whose placeholder
				    the head / the body carried on unchanged to this host,
				    which they are not bound to (names in the log) */
	bool upgrade;
	bool ws;        /* the upgrade names websocket */
	bool close;     /* the client said Connection: close (or HTTP/1.0 without keep-alive) */
	bool head_sent; /* response head reached the client */
	int status;
	bool rotate;      /* a POST to a token endpoint: its response is captured */
	uint64_t rotated; /* secrets a token refresh rotated (names in the log) */
} px_req;

typedef struct px_dir {
	bool eof;  /* source said EOF */
	bool shut; /* we shut down the destination's write side */
} px_dir;

/* A body through a scanner (pxscan.c), de-chunked and re-chunked. */
typedef struct px_scanpass {
	ab_scanner *s;
	bool chunked;
	int st;
	uint64_t left;
	char line[40]; /* a chunk-size line: only its hex digits matter */
	size_t ll;
} px_scanpass;

typedef struct px_conn {
	struct px_conn *prev, *next;
	ab_proxy *px;
	uint64_t id;
	int cfd, ufd;
	unsigned cev, uev; /* current loop interest */
	enum px_side side;
	enum px_state state;
	uint16_t lport; /* transparent: the listener's port */
	uint64_t t0, deadline;

	/* destination, decided once per upstream connection */
	char host[AB_HOST_BUF];
	uint16_t port;
	char rule[AB_NETRULE_TEXT];
	char method[16];        /* "CONNECT", "GET", "TLS", "TCP" for the log */
	char path[PX_PATH_LOG]; /* explicit plain HTTP: the first request's path (no query) */
	bool is_connect;        /* explicit CONNECT (answer 200 when dialled) */
	bool fixed;             /* HTTP: every request must target host:port */

	ab_resolve_job *job;
	struct sockaddr_storage addrs[PX_MAX_ADDRS];
	socklen_t alens[PX_MAX_ADDRS];
	int naddrs, ai;
	char dialled[64]; /* the address actually dialled, for the log */

	px_buf in;   /* from the client, not processed yet */
	px_buf out;  /* to upstream */
	px_buf back; /* from upstream, not processed yet (HTTP) */
	px_buf toc;  /* to the client */

	/* HTTP forwarding */
	ab_http_framer reqf, respf;
	bool in_req_body, in_resp_body;
	px_req *fifo; /* PX_FIFO entries, allocated on the first HTTP request */
	int nfifo;
	bool c_eof; /* client closed its side */
	bool u_eof;
	bool close_after; /* close once toc is flushed and nothing is in flight */
	bool want_switch; /* explicit: next request targets another upstream */

	/* tunnel */
	px_dir cu, uc;     /* client->upstream, upstream->client */
	uint64_t up, down; /* bytes client->upstream, upstream->client */
	bool logged;
	bool tunnel_started;
	bool via_up; /* dialled through the corporate proxy */

	/* interception (pxtls.c): the HTTP engine reads and writes through these */
	struct ssl_st *cssl, *ussl;
	bool intercepted;
	bool c_ssl_ww, u_ssl_ww; /* TLS needs the socket writable to read */
	bool tls_ww;             /* the client's handshake waits for writability */
	bool up_hs_ww;           /* the upstream's handshake waits for writability */
	bool cl_hs_done, up_hs_done, up_hs_failed;
	uint64_t kick;            /* timer: TLS holds decrypted bytes no event announces */
	struct ab_scanner *bscan; /* request body: placeholders (bound: swap or mask,
				       else block) */
	struct ab_scan_set *bset;
	struct ab_scanner *rscan; /* response: real values -> masked */
	px_scanpass bpass, rpass; /* the current request / response body */
	uint64_t masked;          /* bytes masked in responses */
	char exfil[1024];         /* why a placeholder was refused (for the 403) */
	px_buf rot;               /* a token endpoint's response, held whole (head and
				       raw body) until its tokens are swapped */
	size_t rot_head;          /* its head's length */
	bool capturing;
	/* a WebSocket on an intercepted connection (pxtls.c): the server's
	 * frames are cut by WSF, their payloads masked through rscan/rpass */
	bool ws_mask;
	ab_ws_framer wsf;
	px_buf wsraw;      /* read from upstream, not cut yet */
	px_buf wsout;      /* masked payload bytes, not placed in frames yet */
	uint8_t wshdr[10]; /* the head being read */
	uint8_t wshn;
	struct px_wsq { /* frames not all out yet, oldest first */
		uint8_t hdr[10];
		uint8_t hn;
		bool sent;     /* the head is out */
		uint64_t left; /* payload bytes still to place */
	} wsq[PX_WSQ];
	size_t wsq_n;
} px_conn;

typedef struct px_map {
	char name[AB_HOST_BUF];
	struct sockaddr_storage addr;
	socklen_t alen;
	uint16_t port; /* 0: the requested port */
} px_map;

/* A listener whose accept4() failed for want of descriptors or memory: not
 * watched for a moment (level-triggered, it would spin), then again. */
typedef struct px_pause {
	struct ab_proxy *px;
	int fd;
	uint64_t timer; /* re-enables the watch, or 0 */
} px_pause;

typedef struct px_listener {
	struct ab_proxy *px;
	int fd;
	int kind;
	uint16_t port;
	px_pause pause;
} px_listener;

struct px_synth;

struct ab_proxy {
	ab_loop *loop;
	ab_resolver *res;
	ab_audit *audit; /* the run's (borrowed) */
	ab_netpolicy pol;
	char *profile;
	json_t *grants;     /* command-line grants (array of strings), for "start" */
	json_t *downgrades; /* the plan's downgrades (array of strings), for "start" */
	px_map *maps;
	size_t nmaps;
	bool transparent;
	uint16_t proxy_port;

	px_listener lst[AB_EGRESS_MAX_PORTS + 4];
	size_t nlst;

	px_conn *conns;
	size_t nconns;
	uint64_t next_id;
	uint64_t sweep;
	uint64_t warm; /* timer: the upstream TLS context made before it is needed */

	struct px_dns *dns;    /* dnsd.c */
	int ctl_fd;            /* `agentbox allow` (control.h); 0/-1 none */
	struct ctl_conn *ctls; /* its open client connections */
	px_pause ctl_pause;
	struct ab_broker *broker;        /* secrets + session CA, or NULL */
	struct ab_learn_set *learn;      /* run --learn: a destination the profile does not
					   list is allowed and recorded here (NULL: not learning) */
	struct ab_supervisor *learn_sup; /* ... which names the program behind a connection */
	uint64_t elsewhere_suppressed;   /* placeholder-elsewhere events beyond the
					  audit's table (written as "suppressed") */
	struct ab_scan_set *rset;        /* response masking patterns of all secrets */
	struct ab_scan_set **old_rsets;  /* replaced after token refreshes; scanners may
					   still read them: freed with the proxy */
	size_t nold_rsets;
	struct ssl_ctx_st *client_ctx; /* upstream TLS of intercepted hosts */
	char *ca_file;
	char *up_host; /* chaining: the host's corporate proxy, or NULL */
	uint16_t up_port;
	ab_strv no_proxy;
	ab_proxy_ask_fn ask_fn; /* ask on denial (pxask.c), or NULL */
	void *ask_ctx;
	struct px_question *questions; /* asked, not answered yet */
	size_t nquestions;
};

/* proxy.c */
/* accept4() just failed with errno E: pause p's listener when that was
 * exhaustion; px_pause_cancel() before the listener is closed */
void px_accept_failed(px_pause *p, int e);
void px_pause_cancel(px_pause *p);
void px_dial(px_conn *c);
void px_connected(px_conn *c);

/* pxconn.c */
void px_update(px_conn *c);
void px_close(px_conn *c);
void px_fail(px_conn *c, int status, const char *decision, const char *rule, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));
int px_decide(px_conn *c, const char *host, unsigned port);
void px_head_process(px_conn *c);
/* the loop's callback for client sockets */
void px_on_client(ab_loop *l, int fd, unsigned ev, void *data);

/* pxlog.c */
void px_log_request(px_conn *c, const px_req *r, const char *decision, int status);
void px_log_exfil(px_conn *c, const px_req *r, int status);
void px_log_refused(px_conn *c, const px_req *r, const char *rule, int status, const char *reason);
void px_log_conn(px_conn *c, const char *decision, const char *rule, int status,
		 const char *reason);

/* pxask.c */
/* C's destination (c->host, c->port) is not listed: hold C and ask, when
 * asking is on.  true: held (the caller stops there); false: refuse it. */
bool px_hold(px_conn *c);
void px_ask_shutdown(ab_proxy *px);

/* pxctl.c */
/* Add RULE (checked) to the allow list, with a "policy" event naming BY
 * ("control": BY_PID is the caller's pid; "ask").  The canonical text in
 * TEXT.  0, or -errno with ERR. */
int px_allow_rule(ab_proxy *px, const char *rule, const char *by, pid_t by_pid,
		  char text[AB_NETRULE_TEXT], ab_err *err);
/* Close the control socket and its connections. */
void px_ctl_shutdown(ab_proxy *px);

/* pxscan.c */
void px_scan_begin(px_scanpass *sp, ab_scanner *s, bool chunked);
int px_scan_pass(px_scanpass *sp, const char *p, size_t n, bool done, px_buf *dst,
		 ab_scan_hit *hit);

/* pxtls.c */
/* The server's WebSocket bytes read so far (c->wsraw), cut into frames:
 * heads as they are, payloads through the masking scanner, which releases
 * what it holds where a message ends (FIN); each frame goes out once its
 * payload is out of the scanner.  Appends to B; 0, or a negative errno
 * (-EPROTO: a frame the scanner could not see into; -ENOMEM...): close. */
int px_ws_cut(px_conn *c, px_buf *b);
ssize_t px_io_read(px_conn *c, bool up, px_buf *b, size_t want);
ssize_t px_io_write(px_conn *c, bool up, px_buf *b);
bool px_io_pending(const px_conn *c);
bool px_should_intercept(const px_conn *c);
void px_intercept_start(px_conn *c);
void px_tls_pump(px_conn *c);
void px_tls_warm(ab_proxy *px);
void px_tls_free(px_conn *c);
void px_tls_tunnel_pump(px_conn *c);

/* pxhttp.c */
bool px_hdr_is(const char *buf, ab_http_span name, const char *want);
void px_copy_path(char *out, size_t n, const char *p, size_t len);
void px_http_free(px_conn *c);
void px_http_start(px_conn *c);
void px_http_pump(px_conn *c);
void px_http_upstream_gone(px_conn *c);
/* the response at the front of c->fifo is complete: logged and dropped */
void px_finish_response(px_conn *c);
/* timer: TLS holds decrypted bytes no event announces */
void px_kick(ab_loop *l, uint64_t id, void *data);

/* pxbroker.c */
/* Swap the placeholders of the upstream-bound HEAD (freed) and queue it;
 * e records the secrets.  The head's length, -EACCES (c->exfil says why)
 * or another negative errno. */
int px_swap_head(px_conn *c, px_req *e, px_buf *head);
/* A request body of CHUNKED framing starts: a new placeholder scanner. */
int px_body_scan_start(px_conn *c, bool chunked);
/* Body bytes through the placeholder scanner to c->out: 0, -EACCES (c->exfil
 * says why) or another negative errno. */
int px_body_out(px_conn *c, const char *p, size_t n, bool done);
/* Scan body bytes that arrived with their head on a scanner of their own
 * (the real pass comes later): 0, or -EACCES (c->exfil says why). */
int px_body_prescan(px_conn *c, const char *p, size_t n, bool chunked);
/* Masking starts afresh for a head (CHUNKED false) or a body. */
int px_resp_begin(px_conn *c, bool chunked);
/* Response bytes to the client (masked when intercepted); DONE: the message
 * ends here, what the scanner held is released. */
int px_resp_out(px_conn *c, const char *p, size_t n, bool done);
/* A token refresh changed the secrets: a new masking set (the old ones kept). */
int px_rotated(struct ab_proxy *px);
/* A token refresh's whole response is in c->rot: its tokens swapped, saved
 * on the host, the placeholders sent on; else a 502.  0, or a negative
 * errno when c is closing. */
int px_finish_capture(px_conn *c);

/* pxtunnel.c */
void px_hello(px_conn *c);
void px_tunnel_start(px_conn *c);
void px_tunnel_pump(px_conn *c, bool c_ev, bool u_ev);
void px_tunnel_free(px_conn *c);

/* dnsd.c */
int px_dns_init(ab_proxy *px);
void px_dns_free(ab_proxy *px);
int px_dns_add_udp(ab_proxy *px, int fd);
int px_dns_add_tcp(ab_proxy *px, int fd);
/* transparent: the name behind a synthetic IPv4 address (network order), or NULL */
const char *px_synth_name(ab_proxy *px, uint32_t addr);
bool px_is_synth(uint32_t addr);

#endif
