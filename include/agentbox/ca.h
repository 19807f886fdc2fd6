/* SPDX-License-Identifier: MIT */
/*
 * ca.h: the per-session interception CA and the TLS contexts of the
 * intercepted leg (credential brokering).  Parent process, the egress
 * proxy's thread only (nothing here is thread-safe).
 *
 * Everything is made in memory at start and never written anywhere: two CA
 * certificates and three EC P-256 keys.
 *   - The root, the trust anchor handed to the sandbox (ab_ca_cert_pem,
 *     ab_ca_trust_bundle): self-signed, random 16-byte serial, subject
 *     "CN=agentbox session CA <8 hex>, O=agentbox", valid from now-1h to
 *     now+days, basicConstraints critical CA:TRUE pathlen:1, keyUsage
 *     critical keyCertSign+cRLSign, subjectKeyIdentifier.  Its key signs the
 *     issuing CA and is freed at once, inside ab_ca_new(): it never exists
 *     while the sandbox runs.
 *   - The issuing CA, "CN=agentbox session issuing CA <same hex>", signed by
 *     the root, same validity, basicConstraints critical CA:TRUE pathlen:0,
 *     keyUsage critical keyCertSign+cRLSign, extendedKeyUsage serverAuth,
 *     SKI, AKI.  Its key (the only CA key alive during the session) signs the
 *     leaves; servers send it with each leaf.
 *   - The leaf key, shared by every leaf of the session.
 * Why two tiers: some verifiers ignore name constraints on a trust anchor
 * (Java 17's PKIX does: checked by hand on this host) but apply those of an
 * intermediate, and a stolen issuing key can neither mint a sub-CA
 * (pathlen:0) nor escape the constraints.
 *
 * Name constraints (so that a leaked CA key could only vouch for the bound
 * hosts).  With a constraint list, both CA certificates carry the same
 * critical nameConstraints extension built from it, and ab_ca_server_ctx()
 * refuses (-EPERM) to mint a leaf for any host the list does not name.
 * Entries are the allow-list forms: "host" (exactly that name) and
 * "*.suffix" (any name strictly below suffix, at any depth, never suffix
 * itself), as in netpolicy.h.  Encoding:
 *   - "*.suffix" -> permitted dNSName ".suffix".  A leading dot means "at
 *     least one more label" in OpenSSL 3.0 (curl, Python, Node), GnuTLS 3.7
 *     (git on Debian) and Java 17 -- all checked on this host -- and in Go's
 *     crypto/x509 (documented there; not run), so "*.example.com" vouches
 *     for a.example.com and a.b.example.com but not example.com, exactly the
 *     allow-list meaning.  (RFC 5280 defines the leading dot only for URI
 *     constraints; a verifier that ignores it matches nothing under it and
 *     fails closed.)
 *   - "host" -> permitted dNSName "host" (RFC 5280: host and every name
 *     below it) plus excluded dNSName ".host" (every name strictly below it),
 *     so the CA vouches for host alone.  The exclusion is left out when
 *     another entry lies at or below host or a wildcard covers host's
 *     subdomains (then host's subdomains are permitted: looser, never wrong);
 *     an entry already covered by a wildcard adds nothing.
 *   - always: excluded iPAddress 0.0.0.0/0 and ::/0 (no IP-literal leaf can
 *     chain to this CA; IP-literal entries are refused with -EINVAL).
 * Without a list (NULL) the CAs are unconstrained and any valid host name
 * gets a leaf.
 *
 * Keys: freed with EVP_PKEY_free, which in OpenSSL 3.0 ends in EC_KEY_free:
 * BN_clear_free(priv_key) (OPENSSL_cleanse of the limbs) and
 * OPENSSL_clear_free of the EC_KEY (the unit test checks, through
 * CRYPTO_set_mem_functions, that no OpenSSL heap block holds either scalar
 * after the frees).  The issuing key is freed by ab_ca_free(); the leaf key
 * when the CA and every SSL_CTX reference handed out are freed.  No key is
 * ever serialised.
 */
#ifndef AGENTBOX_CA_H
#define AGENTBOX_CA_H

#include <stddef.h>

#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "agentbox/common.h"

#define AB_CA_CACHE_MAX 1024         /* server contexts (one per host) kept; LRU */
#define AB_CA_MAX_CONSTRAINTS 4096   /* entries in a name-constraint list */
#define AB_CA_MAX_DAYS 825           /* longest CA validity accepted */
#define AB_CA_MAX_BUNDLE (64u << 20) /* largest system bundle read */
#define AB_CA_MAX_TRUST_CERTS 8192   /* certificates in the Java truststore */
/* OpenSSL's secure heap (CRYPTO_secure_malloc_init), powers of two.  Holds
 * the private scalars of the session's keys (EC keys are BN_secure): the CA
 * and leaf keys take < 1 KiB; each live TLS 1.3 connection of the proxy
 * keeps its two ephemeral key shares there (64 bytes measured for the pair),
 * so AB_PROXY_MAX_CONNS (4096) intercepted connections take about 257 KiB.
 * 1 MiB leaves room for the buddy allocator's rounding and fragmentation. */
#define AB_CA_SECURE_HEAP (1u << 20)
#define AB_CA_SECURE_HEAP_MIN 16

typedef struct ab_ca ab_ca;

/* OpenSSL objects freed when their variable goes out of scope, as
 * _cleanup_free_ does for malloc'd memory (each free function takes NULL);
 * TAKE_PTR hands one on.  Here, the lowest header that includes OpenSSL's,
 * for the CA and the egress proxy alike. */
static inline void ab_evp_pkey_freep(EVP_PKEY **p)
{
	EVP_PKEY_free(*p);
}
static inline void ab_x509_freep(X509 **p)
{
	X509_free(*p);
}
static inline void ab_ssl_ctx_freep(SSL_CTX **p)
{
	SSL_CTX_free(*p);
}
static inline void ab_bio_freep(BIO **p)
{
	(void)BIO_free(*p);
}
#define _cleanup_evp_pkey_ _cleanup_(ab_evp_pkey_freep)
#define _cleanup_x509_ _cleanup_(ab_x509_freep)
#define _cleanup_ssl_ctx_ _cleanup_(ab_ssl_ctx_freep)
#define _cleanup_bio_ _cleanup_(ab_bio_freep)

/* Fail with WHAT and OpenSSL's first queued error (the queue is cleared):
 * ERRNUM (ENOMEM, EIO, EINVAL...) is recorded, not spelled out, as
 * ab_fail_code does.  Returns -errnum. */
int ab_ossl_fail(ab_err *err, int errnum, const char *what);

/* A fresh CA (see above).  name_constraints: NULL, or a NULL-terminated list
 * of 1..AB_CA_MAX_CONSTRAINTS "host" / "*.suffix" entries (normalised with
 * ab_host_normalize: case and one trailing dot are forgiven; IP literals,
 * other wildcards and an empty list are -EINVAL).  days: 1..AB_CA_MAX_DAYS. */
int ab_ca_new(const char *const *name_constraints, int days, ab_ca **out, ab_err *err);

/* The root certificate (the trust anchor) as PEM (malloc'd, NUL-terminated,
 * public). */
int ab_ca_cert_pem(const ab_ca *ca, char **out, ab_err *err);

/* A server SSL_CTX for `host`, a normalised host name (as ab_host_normalize
 * gives it: lower case, no trailing dot; no IP literal): -EINVAL otherwise,
 * -EPERM if the CA's constraints do not name it.  The chain sent: the leaf
 * and the issuing CA.  The leaf, signed by the issuing CA: SAN DNS:host,
 * CN=host (empty subject and a critical SAN when host is over 64 bytes),
 * basicConstraints CA:FALSE, keyUsage critical digitalSignature, EKU
 * serverAuth, authorityKeyIdentifier, random 16-byte serial, valid from
 * now-1h to the CAs' expiry, the session's shared leaf key.  The context:
 * TLS 1.2 and 1.3 only, no renegotiation, session tickets on (TLS 1.3 sends
 * them right after the handshake), ALPN: "http/1.1" is selected when the
 * client offers it; otherwise no protocol is selected (no ALPN in the
 * ServerHello, the handshake goes on), so a client offering only h2 falls
 * back to HTTP/1.1 or gives up by itself.  SSL modes (partial writes...) are
 * the caller's, per SSL.
 * Contexts are cached per host (AB_CA_CACHE_MAX, least recently used
 * evicted).  *out is a NEW reference: the caller SSL_CTX_free()s it (an SSL
 * made from it keeps the context alive on its own).  A miss mints a leaf and
 * makes a context; a hit is a lookup (docs/performance.md has the costs). */
int ab_ca_server_ctx(ab_ca *ca, const char *host, SSL_CTX **out, ab_err *err);

/* Contexts in the cache now (tests, diagnostics). */
size_t ab_ca_cache_size(const ab_ca *ca);

/* Borrowed pointers for tests and diagnostics (fingerprints): the root, the
 * issuing CA and the issuing CA's private key.  The key must never be
 * serialised or copied. */
X509 *ab_ca_get0_cert(const ab_ca *ca);
X509 *ab_ca_get0_issuer(const ab_ca *ca);
EVP_PKEY *ab_ca_get0_key(const ab_ca *ca);

/* Free the cache's contexts, the certificates and the keys (see above). */
void ab_ca_free(ab_ca *ca);

/* A client SSL_CTX for upstream connections: TLS 1.2+, ALPN "http/1.1",
 * SSL_VERIFY_PEER, no partial wildcards in host checks.  Trust: the system
 * store (ab_ca_system_trust) when ca_file is NULL, else the PEM bundle
 * ca_file ONLY.
 * The host check is per connection: ab_tls_client_setup().  No ALPN
 * callback: the caller reads SSL_get0_alpn_selected() if it cares. */
int ab_ca_client_ctx(const char *ca_file, SSL_CTX **out, ab_err *err);
/* The system's trust anchors into ctx's store, read by need (systrust.c):
 * the hashed directory (SSL_CERT_DIR, else OpenSSL's default) first, the
 * bundle file (SSL_CERT_FILE, else OpenSSL's default) loaded whole only
 * when the directory has no certificate of a subject a chain asks for.
 * The same anchors as SSL_CTX_set_default_verify_paths(), without parsing
 * the whole bundle before the first handshake.  0 or -ENOMEM. */
int ab_ca_system_trust(SSL_CTX *ctx, ab_err *err);
/* Index the bundle of ctx's system store now rather than at its first
 * lookup (nothing is decoded into the store). */
void ab_ca_system_trust_warm(SSL_CTX *ctx);
/* The subject Name of a DER certificate (der[0..n)), decoded on its own
 * without the rest of the certificate (the index above); NULL if the bytes
 * are not a certificate's prefix up to its subject. */
X509_NAME *ab_cert_der_subject(const unsigned char *der, long n);
/* The same, trusting only the certificates of a PEM string (>= 1). */
int ab_ca_client_ctx_mem(const char *pem, SSL_CTX **out, ab_err *err);
/* Per connection: SSL_VERIFY_PEER, the expected name (SSL_set1_host) and SNI
 * for a host name; for an IP literal ("a.b.c.d" or "[v6]") the expected
 * address and no SNI (RFC 6066).  host in ab_host_normalize form: -EINVAL
 * otherwise. */
int ab_tls_client_setup(SSL *ssl, const char *host, ab_err *err);

/* The trust bundle for the sandbox: the system bundle followed by the root PEM
 * (a newline between them when the system's lacks its last), written into
 * FD, an empty memfd made with MFD_ALLOW_SEALING (the caller's; it may have
 * been handed to the child already), which is then sealed against writes
 * and resizing; *LEN bytes.  The system's bytes are copied by the kernel
 * (sendfile), not through memory of ours.  system_bundle: a path, or NULL
 * to use the first existing of /etc/ssl/certs/ca-certificates.crt,
 * /etc/pki/tls/certs/ca-bundle.crt, /etc/ssl/cert.pem.  Returns 0, or 1
 * when system_bundle was NULL and none exists (the bundle is then the root
 * alone); an explicit path that cannot be read is an error. */
int ab_ca_trust_bundle(const ab_ca *ca, const char *system_bundle, int fd, size_t *len,
		       ab_err *err);

/* The Java truststore for the sandbox (DER PKCS#12, malloc'd): every
 * certificate of the PEM text bundle[0..len) (the trust bundle above) as a
 * trusted certificate entry Java accepts -- a certBag with a friendlyName
 * (the alias: "agentbox-session-ca" for the session CA, "system-N" for the
 * others) and Oracle's trusted-key-usage attribute
 * (2.16.840.1.113894.746875.1.1) holding anyExtendedKeyUsage; the session CA
 * is added when the text lacks it.  One unencrypted SafeContents and an
 * HMAC-SHA256 MAC (PKCS12_DEFAULT_ITER iterations) keyed by password,
 * which protects nothing secret: it lets Java check the file's integrity
 * (Java 17 and 25 also load it without a password, skipping the check).
 * Errors: a PEM block that does not decode or a certificate that is not one
 * DER SEQUENCE, or has PEM headers (-EINVAL), more than
 * AB_CA_MAX_TRUST_CERTS (-E2BIG), len > AB_CA_MAX_BUNDLE (-EFBIG). */
int ab_ca_java_truststore(const ab_ca *ca, const char *bundle, size_t len, const char *password,
			  unsigned char **out, size_t *outlen, ab_err *err);
/* The same from the text in fd (read from its start, len bytes: the trust
 * bundle's memfd above), through a small buffer used again and again,
 * written into OUT (an empty memfd; not sealed here), *outlen bytes: the
 * bags go through a memfd of their own and are copied by the kernel, so no
 * buffer the size of the store is allocated.  The same bytes as above but
 * for the MAC's salt and value. */
int ab_ca_java_truststore_fd(const ab_ca *ca, int fd, size_t len, const char *password, int out,
			     size_t *outlen, ab_err *err);

/* Before anything else of OpenSSL's in the process: its random generator
 * is to be a Hash_DRBG over SHA-256 (NIST SP 800-90A, seeded from the kernel
 * as the default is), not the default CTR_DRBG over AES-256, whose first use
 * builds every cipher implementation in OpenSSL 3.0 (~1 ms at each start;
 * the Hash_DRBG needs only the digest the placeholders' HMAC already
 * fetched).  A configuration that names a generator ([random], loaded
 * after) still decides.  Too late (a generator made already): nothing. */
void ab_ca_rand_init(void);

/* OpenSSL's secure heap (AB_CA_SECURE_HEAP: mmap'd with guard pages,
 * mlock'd, MADV_DONTDUMP, cleansed on free), once per process, before the
 * first key is made; private keys made afterwards live there.  1: set up and
 * locked (or already set up); 0: set up but not locked (RLIMIT_MEMLOCK too
 * low: the keys may be swapped); -ENOMEM: not set up (keys go to the
 * ordinary heap, still cleansed on free). */
int ab_ca_secure_heap_init(void);

#endif
