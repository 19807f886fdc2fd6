/* SPDX-License-Identifier: MIT */
/*
 * TLS interception of the egress proxy (parent), only for hosts a brokered
 * secret is bound to: the client's TLS ends here with a leaf minted by the
 * session CA for the SNI it sent (which already matched the tunnel's host),
 * a second TLS connection goes to the real host, verified against the system
 * store (or network.ca_file) with a hostname check, and the HTTP engine
 * (pxhttp.c) runs between the two with the placeholder swap and response
 * masking.  Also the I/O wrappers the HTTP engine uses for both plain and
 * TLS connections (TLS in bulk: records read ahead several per read(2), and
 * written to the client through a BIO pair, several per send(2)).
 */
#include <errno.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agentbox/broker.h"
#include "proxy_int.h"

/* ------------------------------------------------------------ I/O */

#define PX_TLS_RECORD 16384                         /* the most plaintext one TLS record carries */
#define PX_TLS_READ_BUF (4 * PX_TLS_RECORD + 4096)  /* read ahead: four records a read */
#define PX_TLS_WRITE_BUF (8 * PX_TLS_RECORD + 4096) /* coalesced records to the client */

static SSL *side_ssl(const px_conn *c, bool up)
{
	return up ? c->ussl : c->cssl;
}

/* -EAGAIN, recording whether TLS needs the socket writable to go on. */
static ssize_t ssl_again(px_conn *c, bool up, SSL *ssl, int ret)
{
	int e = SSL_get_error(ssl, ret);
	bool *ww = up ? &c->u_ssl_ww : &c->c_ssl_ww;
	*ww = false;
	switch (e) {
	case SSL_ERROR_WANT_READ: return -EAGAIN;
	case SSL_ERROR_WANT_WRITE: *ww = true; return -EAGAIN;
	case SSL_ERROR_ZERO_RETURN: return 0;
	case SSL_ERROR_SYSCALL:
		ERR_clear_error();
		return errno && errno != EAGAIN ? -errno : 0; /* EOF without close_notify */
	default: ERR_clear_error(); return -EIO;
	}
}

/* Read ahead (px_tls_buffers): one read(2) takes in several records, and
 * SSL_has_pending() says some are buffered.  When the last read stopped on a
 * record whose rest is not here yet (the socket drained), the fd announces
 * it: "partial", kept in the SSL's app data, so px_io_pending does not spin
 * on it. */
static void set_partial(SSL *ssl, bool on)
{
	SSL_set_app_data(ssl, on ? (void *)ssl : NULL);
}

static bool buffered(const SSL *ssl)
{
	return ssl &&
	       (SSL_pending(ssl) > 0 || (SSL_has_pending(ssl) && SSL_get_app_data(ssl) == NULL));
}

static void px_tls_buffers(SSL *ssl)
{
	SSL_set_read_ahead(ssl, 1);
	SSL_set_default_read_buffer_len(ssl, PX_TLS_READ_BUF);
}

/*
 * Coalesced writes to the client: once its handshake is done, the client
 * side's TLS writes its records into a BIO pair (PX_TLS_WRITE_BUF bytes)
 * instead of the socket, and wflush sends what collected with one send(2)
 * rather than one per 16 KiB record.  The pair's far end hangs off the SSL
 * (ex_data, freed with it).  While ciphertext waits there, c_ssl_ww stays
 * set: px_update waits for the socket to take more, the pumps call
 * px_io_write even with nothing new, and nothing closes before it is out.
 */
static int wpeer_idx = -1;

static void wpeer_free(void *parent, void *ptr, CRYPTO_EX_DATA *ad, int idx, long argl, void *argp)
{
	(void)parent;
	(void)ad;
	(void)idx;
	(void)argl;
	(void)argp;
	BIO_free(ptr);
}

static BIO *wpeer(const px_conn *c)
{
	return c->cssl && wpeer_idx >= 0 ? SSL_get_ex_data(c->cssl, wpeer_idx) : NULL;
}

/* Without the pair (out of memory) the records go to the socket as before. */
static void coalesce_writes(SSL *ssl)
{
	_cleanup_bio_ BIO *in = NULL, *out = NULL;
	if (wpeer_idx < 0)
		wpeer_idx = SSL_get_ex_new_index(0, NULL, NULL, NULL, wpeer_free);
	if (wpeer_idx < 0 || BIO_new_bio_pair(&in, PX_TLS_WRITE_BUF, &out, PX_TLS_WRITE_BUF) != 1)
		return;
	if (!SSL_set_ex_data(ssl, wpeer_idx, out))
		return;
	out = NULL;                       /* the SSL's now: wpeer_free */
	SSL_set0_wbio(ssl, TAKE_PTR(in)); /* frees the socket BIO (BIO_NOCLOSE) it replaces */
}

/* Send what the pair holds: 0 (all of it), -EAGAIN (the socket is full) or
 * -errno. */
static int wflush(px_conn *c, BIO *peer)
{
	for (;;) {
		char *p = NULL;
		int avail = BIO_nread0(peer, &p);
		if (avail <= 0 || !p)
			return 0;
		ssize_t k;
		do
			k = send(c->cfd, p, (size_t)avail, MSG_NOSIGNAL);
		while (k < 0 && errno == EINTR);
		if (k < 0)
			return errno == EAGAIN || errno == EWOULDBLOCK ? -EAGAIN : -errno;
		(void)BIO_nread(peer, &p, (int)k);
		if (k < avail)
			return -EAGAIN;
	}
}

/* TLS may write while reading or shutting down: ciphertext left in the pair
 * keeps the socket's write interest. */
static void note_wpending(px_conn *c)
{
	BIO *peer = wpeer(c);
	if (peer && BIO_ctrl_pending(peer) > 0)
		c->c_ssl_ww = true;
}

ssize_t px_io_read(px_conn *c, bool up, px_buf *b, size_t want)
{
	SSL *ssl = side_ssl(c, up);
	if (!ssl)
		return px_buf_read(b, up ? c->ufd : c->cfd, want);
	if (b->len + want > b->cap) { /* grow through px_buf (no copies left behind) */
		if (px_buf_reserve(b, b->len + want) < 0)
			return -ENOMEM;
	}
	/* a record per SSL_read: go on while records are buffered (no read(2)
	 * that can only say EAGAIN), up to WANT */
	size_t got = 0;
	ssize_t x = 0;
	set_partial(ssl, false);
	do {
		size_t n = 0;
		errno = 0;
		int r = SSL_read_ex(ssl, b->p + b->len + got, want - got, &n);
		if (r <= 0) {
			x = ssl_again(c, up, ssl, r);
			if (x == -EAGAIN && SSL_get_error(ssl, r) == SSL_ERROR_WANT_READ)
				set_partial(ssl, SSL_has_pending(ssl));
			break;
		}
		got += n;
	} while (got < want && SSL_has_pending(ssl));
	if (!up)
		note_wpending(c);
	if (!got) {
		if (!b->len)
			px_buf_free(b);
		return x;
	}
	b->len += got;
	return (ssize_t)got;
}

ssize_t px_io_write(px_conn *c, bool up, px_buf *b)
{
	SSL *ssl = side_ssl(c, up);
	if (!ssl)
		return px_buf_write(b, up ? c->ufd : c->cfd);
	BIO *peer = up ? NULL : wpeer(c);
	if (!b->len && !(peer && BIO_ctrl_pending(peer) > 0))
		return 0;
	/* partial writes return after each record: go on until the buffer is
	 * sent or the socket is full, then drop the sent bytes once (not one
	 * move of the rest per record) */
	size_t done = 0;
	ssize_t x = 0;
	while (done < b->len) {
		size_t n = 0;
		errno = 0;
		int r = SSL_write_ex(ssl, b->p + done, b->len - done, &n);
		if (r <= 0) {
			x = ssl_again(c, up, ssl, r);
			x = x == 0 ? -EPIPE : x;
			if (x == -EAGAIN && peer && BIO_ctrl_pending(peer) > 0) {
				int f = wflush(c, peer); /* the pair is full */
				if (f == 0)
					continue;
				x = f;
			}
			break;
		}
		done += n;
	}
	if (peer) {
		int f = wflush(c, peer);
		if (f < 0 && f != -EAGAIN && (x == 0 || x == -EAGAIN))
			x = f;
		c->c_ssl_ww = BIO_ctrl_pending(peer) > 0;
	}
	if (!done)
		return x;
	px_buf_consume(b, done);
	return (ssize_t)done;
}

/* Bytes TLS buffered (decrypted, or whole records read ahead) that the
 * pump would read now: no fd event will announce them.  A side whose
 * reading waits for room is left out (its turn comes with the write that
 * makes room), or the kick would spin. */
bool px_io_pending(const px_conn *c)
{
	bool cr, ur;
	if (c->state == PX_TUNNEL) {
		cr = !c->out.len && !c->cu.eof;
		ur = !c->toc.len && !c->uc.eof;
	} else {
		cr = !c->c_eof && c->in.len < PX_BUF_MAX && c->out.len < PX_BUF_MAX;
		ur = c->ufd >= 0 && c->toc.len < PX_BUF_MAX;
	}
	return (cr && buffered(c->cssl)) || (ur && buffered(c->ussl));
}

void px_tls_free(px_conn *c)
{
	if (c->cssl)
		SSL_free(c->cssl);
	if (c->ussl)
		SSL_free(c->ussl);
	c->cssl = c->ussl = NULL;
}

/* ------------------------------------------------------------ handshakes */

bool px_should_intercept(const px_conn *c)
{
	const ab_broker *b = c->px->broker;
	for (size_t i = 0; b && i < b->n; i++)
		if (ab_secret_bound(&b->secs[i], c->host, c->port))
			return true;
	return false;
}

static void deny_tls(px_conn *c, const char *rule, const char *why)
{
	char e[160] = "";
	unsigned long code = ERR_peek_last_error();
	if (code)
		ERR_error_string_n(code, e, sizeof(e));
	ERR_clear_error();
	px_log_conn(c, "deny", rule, 0, e[0] ? e : why);
	px_close(c);
}

static int hs_step(px_conn *c, bool up);

/* The TLS session to the real host, set up and its first flight sent (its
 * handshake goes on in px_tls_pump).  0, or a negative errno once c is
 * closed. */
static int start_upstream_tls(px_conn *c)
{
	ab_proxy *px = c->px;
	ab_err err = {0};
	int r;
	if (!px->client_ctx && (r = ab_ca_client_ctx(px->ca_file, &px->client_ctx, &err)) < 0) {
		px_log_conn(c, "error", "intercept", 0, err.msg);
		px_close(c);
		return r;
	}
	c->ussl = SSL_new(px->client_ctx);
	r = c->ussl ? ab_tls_client_setup(c->ussl, c->host, &err) : -ENOMEM;
	if (r >= 0 && SSL_set_fd(c->ussl, c->ufd) != 1)
		r = -ENOMEM;
	if (r < 0) {
		deny_tls(c, "intercept", err.msg[0] ? err.msg : "upstream TLS set-up");
		return r;
	}
	SSL_set_mode(c->ussl, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
	px_tls_buffers(c->ussl);
	SSL_set_connect_state(c->ussl);
	return 0;
}

/* The client's ClientHello is in c->in (read while checking its SNI): TLS
 * reads it from a memory BIO first, then from the socket.  The handshake
 * with the real host starts first and runs alongside the client's: it does
 * not depend on anything the client sends (the proxy offers the upstream
 * http/1.1 whatever the client asked for), so its round trip overlaps the
 * leaf, the client's handshake and the first use of the trust store rather
 * than following them.  Nothing of the client's reaches the upstream before
 * both are done and the upstream is verified. */
void px_intercept_start(px_conn *c)
{
	ab_proxy *px = c->px;
	_cleanup_ssl_ctx_ SSL_CTX *sctx = NULL; /* the SSL holds its own reference */
	ab_err err = {0};
	c->cl_hs_done = c->up_hs_done = c->up_hs_failed = false;
	if (start_upstream_tls(c) < 0)
		return;
	c->state = PX_TLS_ACCEPT; /* the upstream's first flight goes out now */
	c->deadline = ab_now_ms() + AB_PROXY_HELLO_TIMEOUT_MS;
	if (hs_step(c, true) < 0)
		c->up_hs_failed = true; /* said to the client once its TLS is up */
	if (ab_ca_server_ctx(px->broker->ca, c->host, &sctx, &err) < 0) {
		px_log_conn(c, "error", "intercept", 0, err.msg);
		px_close(c);
		return;
	}
	c->cssl = SSL_new(sctx);
	_cleanup_bio_ BIO *mem = BIO_new(BIO_s_mem());
	_cleanup_bio_ BIO *sock = BIO_new_socket(c->cfd, BIO_NOCLOSE);
	if (!c->cssl || !mem || !sock ||
	    BIO_write(mem, c->in.p, (int)c->in.len) != (int)c->in.len) {
		deny_tls(c, "intercept", "out of memory");
		return;
	}
	SSL_set_mode(c->cssl, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
#ifdef SSL_OP_IGNORE_UNEXPECTED_EOF
	/* the client's bare FIN (no close_notify) is its half-close, as with
	 * OpenSSL 1.1, not an error (3.0): its requests are still answered.  A
	 * request it cuts short is refused by its HTTP framing.  The upstream's
	 * side stays strict: a close-delimited body must not be truncated. */
	SSL_set_options(c->cssl, SSL_OP_IGNORE_UNEXPECTED_EOF);
#endif
	px_tls_buffers(c->cssl);
	SSL_set_bio(c->cssl, TAKE_PTR(mem), TAKE_PTR(sock));
	SSL_set_accept_state(c->cssl);
	c->up += c->in.len;
	px_buf_free(&c->in);
	c->intercepted = true;
	px_tls_pump(c);
}

/* One step of a side's handshake: 1 done, 0 waiting for its socket, -1
 * failed. */
static int hs_step(px_conn *c, bool up)
{
	SSL *ssl = up ? c->ussl : c->cssl;
	for (;;) {
		ERR_clear_error();
		int r = SSL_do_handshake(ssl);
		if (r == 1)
			return 1;
		int e = SSL_get_error(ssl, r);
		if (e == SSL_ERROR_WANT_READ && !up && BIO_ctrl_pending(SSL_get_rbio(ssl)) == 0 &&
		    BIO_method_type(SSL_get_rbio(ssl)) == BIO_TYPE_MEM) {
			/* the ClientHello is used up: from now on, the socket */
			BIO *sock = BIO_new_socket(c->cfd, BIO_NOCLOSE);
			if (!sock)
				return -1;
			SSL_set0_rbio(ssl, sock);
			continue;
		}
		if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
			*(up ? &c->up_hs_ww : &c->tls_ww) = e == SSL_ERROR_WANT_WRITE;
			return 0;
		}
		return -1;
	}
}

/* The upstream's handshake failed: the client's TLS is up, it can read why. */
static void upstream_failed(px_conn *c)
{
	long v = SSL_get_verify_result(c->ussl);
	char why[300];
	snprintf(why, sizeof(why), "TLS to %s:%u failed: %s", c->host, (unsigned)c->port,
		 v != X509_V_OK ? X509_verify_cert_error_string(v) : "handshake error");
	ERR_clear_error();
	c->fixed = true;
	c->state = PX_HTTP;
	px_fail(c, 502, "error", "upstream-tls", "%s", why);
}

void px_tls_pump(px_conn *c)
{
	if (!c->up_hs_done && !c->up_hs_failed) {
		int r = hs_step(c, true);
		c->up_hs_done = r == 1;
		c->up_hs_failed = r < 0;
	}
	if (!c->cl_hs_done) {
		int r = hs_step(c, false);
		if (r < 0) {
			deny_tls(c, "client-tls",
				 "the client's TLS handshake failed (does it trust the "
				 "session CA?)");
			return;
		}
		if (r == 1) {
			c->cl_hs_done = true;
			c->tls_ww = false;
			coalesce_writes(c->cssl);
		}
	}
	if (c->cl_hs_done && c->up_hs_failed) {
		upstream_failed(c);
		return;
	}
	if (c->cl_hs_done && c->up_hs_done) {
		c->fixed = true;
		c->tls_ww = c->up_hs_ww = false;
		px_http_start(c);
		return;
	}
	px_update(c);
}

/* The upstream TLS context, made before the first intercepted connection
 * needs it (proxy.c's timer): OpenSSL's first context in the process and the
 * system trust store's index cost a few milliseconds that would otherwise
 * fall before that connection's first byte.  A failure is left for that
 * connection to meet and report. */
void px_tls_warm(ab_proxy *px)
{
	ab_err err = {0};
	if (px->client_ctx || !px->broker || !px->broker->n)
		return;
	if (ab_ca_client_ctx(px->ca_file, &px->client_ctx, &err) < 0)
		return;
	if (!px->ca_file)
		ab_ca_system_trust_warm(px->client_ctx);
}

/* ------------------------------------------------------------ upgraded */

/* Place the masked payload bytes (c->wsout) into their frames, oldest
 * first: a frame's head, then its payload as the scanner releases it.
 * 0 or -ENOMEM. */
static int ws_place(px_conn *c, px_buf *b)
{
	size_t used = 0, q = 0;
	for (; q < c->wsq_n; q++) {
		struct px_wsq *f = &c->wsq[q];
		if (!f->sent) {
			if (px_buf_append(b, f->hdr, f->hn) < 0)
				return -ENOMEM;
			f->sent = true;
		}
		size_t m = c->wsout.len - used < f->left ? c->wsout.len - used : (size_t)f->left;
		if (m && px_buf_append(b, c->wsout.p + used, m) < 0)
			return -ENOMEM;
		used += m;
		f->left -= m;
		if (f->left)
			break;
	}
	memmove(c->wsq, c->wsq + q, (c->wsq_n - q) * sizeof(*c->wsq));
	c->wsq_n -= q;
	px_buf_consume(&c->wsout, used);
	return 0;
}

/* Payload bytes through the masking scanner into c->wsout; FLUSH: the
 * scanner releases what it holds.  0 or a negative errno (px_scan_pass). */
static int ws_scan(px_conn *c, const uint8_t *p, size_t n, bool flush)
{
	ab_scan_hit hit = {0};
	int r = px_scan_pass(&c->rpass, (const char *)p, n, flush, &c->wsout, &hit);
	c->masked += hit.replaced;
	return r < 0 ? r : 0;
}

int px_ws_cut(px_conn *c, px_buf *b)
{
	const uint8_t *p = (const uint8_t *)c->wsraw.p;
	size_t n = c->wsraw.len, i = 0;
	int r = 0;
	while (r == 0 && i < n) {
		int kind = 0;
		ssize_t k = ab_ws_next(&c->wsf, p + i, n - i, &kind);
		if (k <= 0) {
			r = k < 0 ? (int)k : -EPROTO;
			break;
		}
		if (kind == AB_WS_HEAD || kind == AB_WS_HEAD_END) {
			if ((size_t)k > sizeof(c->wshdr) - c->wshn) {
				r = -EPROTO;
				break;
			}
			memcpy(c->wshdr + c->wshn, p + i, (size_t)k);
			c->wshn += (uint8_t)k;
		}
		if (kind == AB_WS_HEAD_END) {
			/* too many frames wait on held bytes: release them */
			if (c->wsq_n == PX_WSQ &&
			    ((r = ws_scan(c, NULL, 0, true)) < 0 || (r = ws_place(c, b)) < 0 ||
			     c->wsq_n == PX_WSQ)) {
				r = r < 0 ? r : -ENOBUFS;
				break;
			}
			struct px_wsq *f = &c->wsq[c->wsq_n++];
			memcpy(f->hdr, c->wshdr, c->wshn);
			f->hn = c->wshn;
			f->sent = false;
			f->left = c->wsf.len;
			c->wshn = 0;
			if (!c->wsf.len && c->wsf.fin)
				r = ws_scan(c, NULL, 0, true);
		} else if (kind == AB_WS_DATA || kind == AB_WS_DATA_END) {
			/* held bytes are released where a message ends, so a value
			 * split across the fragments of one message is found */
			r = ws_scan(c, p + i, (size_t)k, kind == AB_WS_DATA_END && c->wsf.fin);
		}
		i += (size_t)k;
	}
	if (r == 0)
		r = ws_place(c, b);
	explicit_bzero(c->wsraw.p, n); /* it may hold a real value */
	c->wsraw.len = 0;
	return r;
}

/* One direction of a WebSocket (or other 101-upgraded) stream on an
 * intercepted connection, through both TLS sessions: the server's
 * WebSocket frames masked (px_ws_cut), anything else opaque.
 * Returns 1 on progress, 0 on none, a negative errno when the connection
 * must close. */
static int tls_dir(px_conn *c, bool from_up, px_buf *b, px_dir *d, uint64_t *count)
{
	int progress = 0;
	if (b->len || (from_up && c->c_ssl_ww)) {
		ssize_t n = px_io_write(c, !from_up, b);
		if (n < 0 && n != -EAGAIN)
			return (int)n;
		progress |= n > 0;
	}
	if (!b->len && !d->eof) {
		bool cut = from_up && c->ws_mask;
		ssize_t n = px_io_read(c, from_up, cut ? &c->wsraw : b, 65536);
		if (n == 0)
			d->eof = true;
		else if (n < 0 && n != -EAGAIN)
			return (int)n;
		else if (n > 0)
			*count += (uint64_t)n;
		int r = n > 0 && cut ? px_ws_cut(c, b) : 0;
		if (r < 0)
			return r;
		progress |= n != -EAGAIN;
	}
	if (d->eof && !b->len && !d->shut) {
		SSL *dst = from_up ? c->cssl : c->ussl;
		(void)SSL_shutdown(dst);
		if (from_up) { /* the close_notify to the client, through the pair */
			BIO *peer = wpeer(c);
			if (peer)
				(void)wflush(c, peer);
			note_wpending(c);
		}
		d->shut = true;
	}
	return progress;
}

void px_tls_tunnel_pump(px_conn *c)
{
	for (int round = 0; round < 8; round++) {
		int a = tls_dir(c, false, &c->out, &c->cu, &c->up);
		int b = a < 0 ? a : tls_dir(c, true, &c->toc, &c->uc, &c->down);
		if (a < 0 || b < 0) {
			px_close(c);
			return;
		}
		if (!a && !b)
			break;
	}
	if (c->cu.shut && c->uc.shut && !c->c_ssl_ww) {
		px_close(c);
		return;
	}
	c->deadline = ab_now_ms() + AB_PROXY_IDLE_MS;
	if (px_io_pending(c) && !c->kick)
		c->kick = ab_loop_timer(c->px->loop, 0, px_kick, c);
	px_update(c);
}
