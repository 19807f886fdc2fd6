/* SPDX-License-Identifier: MIT */
/*
 * tls.h: pure TLS ClientHello parser for the egress proxy.
 *
 * The proxy peeks at the first bytes a client sends on a CONNECT tunnel or on
 * a transparently captured connection, and checks that the ClientHello's SNI
 * names the host the tunnel was opened for (domain fronting / host confusion)
 * before relaying a single byte upstream.  Input is hostile: no I/O, no
 * allocation, every length checked against its parent, explicit limits.
 *
 * Input is the raw client stream: TLS records.  The ClientHello handshake
 * message may span several consecutive handshake records (each 1..16384
 * bytes of payload, record version 0x0301..0x0304); any other record type
 * before the hello is complete, trailing handshake bytes in the hello's last
 * record, duplicate extension types, or a length overflowing its parent make
 * the hello AB_TLS_BAD.  Bytes after the hello's last record (early data, a
 * middlebox-compat ChangeCipherSpec) are not looked at.
 *
 * Resumable by re-parsing: call again with the grown buffer (same start).
 * Every prefix of a stream gives AB_TLS_NEED_MORE or the stream's final
 * answer, so reading more can never turn a refusal into an acceptance.
 * NEED_MORE is never returned once len >= AB_TLS_MAX_HELLO.
 */
#ifndef AGENTBOX_TLS_H
#define AGENTBOX_TLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define AB_TLS_MAX_HELLO 65536    /* bytes of records we buffer for one ClientHello */
#define AB_TLS_MAX_RECORDS 64     /* records one ClientHello may be split into */
#define AB_TLS_MAX_FRAGMENT 16384 /* record payload limit (RFC 8446 5.1) */
#define AB_TLS_EXT_SERVER_NAME 0x0000
#define AB_TLS_EXT_ALPN 0x0010
#define AB_TLS_EXT_ECH 0xfe0d /* encrypted_client_hello */

typedef enum {
	AB_TLS_NEED_MORE = 0, /* a valid prefix: read more (until len >= need) */
	AB_TLS_OK = 1,        /* a complete, well-formed ClientHello */
	AB_TLS_NOT_TLS = -1,  /* first byte is not 0x16 (HTTP text, SSLv2, ...) */
	AB_TLS_BAD = -2,      /* 0x16 but malformed: refuse the connection */
	AB_TLS_TOO_BIG = -3,  /* needs > AB_TLS_MAX_HELLO bytes or > MAX_RECORDS */
} ab_tls_result;

typedef struct {
	/* Server name.  sni is the host_name lower-cased with one trailing dot
	 * stripped, in the form ab_host_normalize() gives for a name, so it is
	 * compared with the tunnel's normalised host by strcmp().  Filled only
	 * when valid: [A-Za-z0-9_-] labels of 1..63 bytes not starting or ending
	 * with '-', 1..253 bytes, last label not numeric (no IP literal, RFC 6066
	 * 3).  has_sni && sni_invalid: the extension was present but the name is
	 * not a valid host name, or the list is not exactly one host_name entry;
	 * sni is then "" and the caller refuses. */
	bool has_sni;
	bool sni_invalid;
	char sni[256];
	uint16_t legacy_version;   /* ClientHello.legacy_version (client_version) */
	bool alpn_h2, alpn_http11; /* "h2" / "http/1.1" offered */
	size_t n_alpn;             /* protocol names in the ALPN list (0: none) */
	bool has_ech;              /* encrypted_client_hello: sni is the outer name */
	size_t n_ext;              /* extensions seen */
	size_t consumed;           /* OK: stream bytes of the records holding the hello */
	size_t need;               /* NEED_MORE: the hello cannot complete before len >= need */
	/* BAD/NOT_TLS/TOO_BIG, or OK with sni_invalid: a short static printable
	 * explanation for the audit log ("duplicate extension", ...); else NULL */
	const char *reason;
} ab_tls_hello;

/* Parse the ClientHello at the start of buf[0..len).  Returns an
 * ab_tls_result; *out is always reset first and is meaningful as documented
 * per field above. */
int ab_tls_parse_client_hello(const uint8_t *buf, size_t len, ab_tls_hello *out);

/* "need more", "ok", "not TLS", "malformed", "too big"; "?" otherwise. */
const char *ab_tls_result_str(int r);

#endif
