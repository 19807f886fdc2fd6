/* SPDX-License-Identifier: MIT */
/*
 * TLS interception of the egress proxy (parent), only for hosts a brokered
 * secret is bound to: the client's TLS ends here with a leaf minted by the
 * session CA for the SNI it sent (which already matched the tunnel's host),
 * a second TLS connection goes to the real host, verified against the system
 * store (or network.ca_file) with a hostname check, and the HTTP engine
 * (pxhttp.c) runs between the two with the placeholder swap and response
 * masking.  Also the I/O wrappers the HTTP engine uses for both plain and
 * TLS connections.
 */
#include <errno.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <string.h>
#include <unistd.h>

#include "agentbox/broker.h"
#include "proxy_int.h"

/* ------------------------------------------------------------ I/O */

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
	case SSL_ERROR_WANT_READ:
		return -EAGAIN;
	case SSL_ERROR_WANT_WRITE:
		*ww = true;
		return -EAGAIN;
	case SSL_ERROR_ZERO_RETURN:
		return 0;
	case SSL_ERROR_SYSCALL:
		ERR_clear_error();
		return errno && errno != EAGAIN ? -errno : 0; /* EOF without close_notify */
	default:
		ERR_clear_error();
		return -EIO;
	}
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
	size_t n = 0;
	errno = 0;
	int r = SSL_read_ex(ssl, b->p + b->len, want, &n);
	if (r <= 0) {
		ssize_t x = ssl_again(c, up, ssl, r);
		if (!b->len)
			px_buf_free(b);
		return x;
	}
	b->len += n;
	return (ssize_t)n;
}

ssize_t px_io_write(px_conn *c, bool up, px_buf *b)
{
	SSL *ssl = side_ssl(c, up);
	if (!ssl)
		return px_buf_write(b, up ? c->ufd : c->cfd);
	if (!b->len)
		return 0;
	size_t n = 0;
	errno = 0;
	int r = SSL_write_ex(ssl, b->p, b->len, &n);
	if (r <= 0) {
		ssize_t x = ssl_again(c, up, ssl, r);
		return x == 0 ? -EPIPE : x;
	}
	px_buf_consume(b, n);
	return (ssize_t)n;
}

/* Bytes TLS decrypted but nobody read yet: no fd event will announce them. */
bool px_io_pending(const px_conn *c)
{
	return (c->cssl && SSL_pending(c->cssl) > 0) || (c->ussl && SSL_pending(c->ussl) > 0);
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

/* The client's ClientHello is in c->in (read while checking its SNI): TLS
 * reads it from a memory BIO first, then from the socket. */
void px_intercept_start(px_conn *c)
{
	ab_proxy *px = c->px;
	SSL_CTX *sctx = NULL;
	ab_err err = {0};
	if (ab_ca_server_ctx(px->broker->ca, c->host, &sctx, &err) < 0) {
		px_log_conn(c, "error", "intercept", 0, err.msg);
		px_close(c);
		return;
	}
	c->cssl = SSL_new(sctx);
	SSL_CTX_free(sctx); /* the SSL holds its own reference */
	BIO *mem = BIO_new(BIO_s_mem());
	BIO *sock = BIO_new_socket(c->cfd, BIO_NOCLOSE);
	if (!c->cssl || !mem || !sock || BIO_write(mem, c->in.p, (int)c->in.len) != (int)c->in.len) {
		BIO_free(mem);
		BIO_free(sock);
		deny_tls(c, "intercept", "out of memory");
		return;
	}
	SSL_set_mode(c->cssl, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
	SSL_set_bio(c->cssl, mem, sock);
	SSL_set_accept_state(c->cssl);
	c->up += c->in.len;
	px_buf_free(&c->in);
	c->intercepted = true;
	c->state = PX_TLS_ACCEPT;
	c->deadline = ab_now_ms() + AB_PROXY_HELLO_TIMEOUT_MS;
	px_tls_pump(c);
}

static int start_upstream_tls(px_conn *c)
{
	ab_proxy *px = c->px;
	if (!px->client_ctx) {
		ab_err err = {0};
		if (ab_ca_client_ctx(px->ca_file, &px->client_ctx, &err) < 0) {
			px_log_conn(c, "error", "intercept", 0, err.msg);
			px_close(c);
			return -1;
		}
	}
	ab_err err = {0};
	c->ussl = SSL_new(px->client_ctx);
	if (!c->ussl || ab_tls_client_setup(c->ussl, c->host, &err) < 0 ||
	    SSL_set_fd(c->ussl, c->ufd) != 1) {
		deny_tls(c, "intercept", err.msg[0] ? err.msg : "upstream TLS set-up");
		return -1;
	}
	SSL_set_mode(c->ussl, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
	SSL_set_connect_state(c->ussl);
	c->state = PX_TLS_CONNECT;
	return 0;
}

void px_tls_pump(px_conn *c)
{
	for (;;) {
		bool up = c->state == PX_TLS_CONNECT;
		SSL *ssl = up ? c->ussl : c->cssl;
		ERR_clear_error();
		int r = SSL_do_handshake(ssl);
		if (r == 1) {
			if (!up) {
				if (start_upstream_tls(c) < 0)
					return;
				continue;
			}
			c->fixed = true;
			c->tls_ww = false;
			px_http_start(c);
			return;
		}
		int e = SSL_get_error(ssl, r);
		if (e == SSL_ERROR_WANT_READ && !up && BIO_ctrl_pending(SSL_get_rbio(ssl)) == 0 &&
		    BIO_method_type(SSL_get_rbio(ssl)) == BIO_TYPE_MEM) {
			/* the ClientHello is used up: from now on, the socket */
			BIO *sock = BIO_new_socket(c->cfd, BIO_NOCLOSE);
			if (!sock) {
				deny_tls(c, "intercept", "out of memory");
				return;
			}
			SSL_set0_rbio(ssl, sock);
			continue;
		}
		if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
			c->tls_ww = e == SSL_ERROR_WANT_WRITE;
			px_update(c);
			return;
		}
		if (up) {
			long v = SSL_get_verify_result(ssl);
			char why[300];
			snprintf(why, sizeof(why), "TLS to %s:%u failed: %s", c->host, (unsigned)c->port,
				 v != X509_V_OK ? X509_verify_cert_error_string(v) : "handshake error");
			ERR_clear_error();
			/* the client's TLS is up: it can read why */
			c->fixed = true;
			c->state = PX_HTTP;
			px_fail(c, 502, "error", "upstream-tls", "%s", why);
			return;
		}
		deny_tls(c, "client-tls", "the client's TLS handshake failed (does it trust the "
					  "session CA?)");
		return;
	}
}

/* ------------------------------------------------------------ upgraded */

/* One direction of a WebSocket (or other 101-upgraded) stream on an
 * intercepted connection: opaque from here, through both TLS sessions.
 * Returns 1 on progress, 0 on none, -1 when the connection must close. */
static int tls_dir(px_conn *c, bool from_up, px_buf *b, px_dir *d, uint64_t *count)
{
	int progress = 0;
	if (b->len) {
		ssize_t n = px_io_write(c, !from_up, b);
		if (n < 0 && n != -EAGAIN)
			return -1;
		progress |= n > 0;
	}
	if (!b->len && !d->eof) {
		ssize_t n = px_io_read(c, from_up, b, 65536);
		if (n == 0)
			d->eof = true;
		else if (n < 0 && n != -EAGAIN)
			return -1;
		else if (n > 0)
			*count += (uint64_t)n;
		progress |= n != -EAGAIN;
	}
	if (d->eof && !b->len && !d->shut) {
		SSL *dst = from_up ? c->cssl : c->ussl;
		(void)SSL_shutdown(dst);
		d->shut = true;
	}
	return progress;
}

void px_tls_tunnel_pump(px_conn *c)
{
	for (int round = 0; round < 8; round++) {
		int a = tls_dir(c, false, &c->out, &c->cu, &c->up);
		int b = a < 0 ? -1 : tls_dir(c, true, &c->toc, &c->uc, &c->down);
		if (a < 0 || b < 0) {
			px_close(c);
			return;
		}
		if (!a && !b)
			break;
	}
	if (c->cu.shut && c->uc.shut) {
		px_close(c);
		return;
	}
	c->deadline = ab_now_ms() + AB_PROXY_IDLE_MS;
	if (px_io_pending(c) && !c->kick)
		c->kick = ab_loop_timer(c->px->loop, 0, px_kick, c);
	px_update(c);
}
