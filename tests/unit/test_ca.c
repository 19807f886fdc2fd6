/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for src/creds/ca.c (no privileges, no files: memfds stand in for the
 * bundle files): the root and issuing CA certificates, leaves chaining to the
 * root (X509_verify_cert + X509_check_host), the per-host cache and its LRU
 * eviction, name constraints allowing and refusing names (leaves and a
 * sub-CA outside the list are minted here with the issuing key, as a thief
 * would), in-memory TLS handshakes through BIO pairs (ALPN, hostname
 * mismatch, TLS 1.1 refused, untrusted CA), the client contexts, the trust
 * bundle, hostile input, timings (printed), and key wiping: every OpenSSL
 * heap block is tracked through CRYPTO_set_mem_functions and scanned for the
 * private scalars (freed blocks and live ones after the frees).
 *
 * Checked by hand once (not here: needs the clients and a server), with a
 * loopback TLS server presenting leaves of a {"*.example.com", "api.test"}
 * CA, trusting only the root: curl 7.88 and Python 3.11 (OpenSSL 3.0.22),
 * Node 20 (OpenSSL 3.0.19, also with NODE_EXTRA_CA_CERTS), git 2.39 (GnuTLS
 * 3.7.9) and Java 17 all accept a.example.com, b.c.example.com, api.test and
 * refuse example.com, evil.com, x.api.test and an IP-literal leaf, while the
 * same names under an unconstrained CA pass.  Java ignores constraints on
 * the trust anchor itself: with a single-tier CA it accepted every name,
 * hence the constrained issuing CA.
 */
#include "unit.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "agentbox/ca.h"
#include "agentbox/common.h"

/* The scanners read OpenSSL's heap, padding bytes included: tell valgrind
 * (when its header is around) that those bytes are deliberately read. */
#if defined(__has_include)
#if __has_include(<valgrind/memcheck.h>)
#include <valgrind/memcheck.h>
#endif
#endif
#ifndef VALGRIND_MAKE_MEM_DEFINED
#define VALGRIND_MAKE_MEM_DEFINED(p, n) ((void)(p), (void)(n))
#endif

static const char *const nc_basic[] = {"*.example.com", "api.test", NULL};

/* ------------------------------------------------ tracking allocator */
/* Every OpenSSL allocation gets a header linking it into a list, so live
 * blocks can be scanned, and every block is scanned when freed.  The links
 * are stored masked so that LeakSanitizer does not see them as references
 * (an ASan build still reports OpenSSL objects leaked by ca.c). */
#define MH_MAGIC 0x61622d6361u
#define MH_MASK ((uintptr_t)0x5a5a5a5a5a5a5a5aull)
struct mh {
	uintptr_t prev, next; /* masked struct mh pointers */
	size_t size, magic;
};
static struct mh live;
static unsigned char pats[4][32]; /* private scalars, big- and little-endian */
static int npats;
static size_t freed_hits;
static bool hooks_on;
static unsigned char *grave; /* contents of the blocks freed while grave_on */
static size_t grave_len, grave_cap;
static bool grave_on;

static void grave_add(const void *p, size_t n)
{
	if (grave_len + n > grave_cap) {
		size_t cap = (grave_len + n) * 2;
		unsigned char *g = realloc(grave, cap);
		if (!g)
			abort();
		grave = g;
		grave_cap = cap;
	}
	memcpy(grave + grave_len, p, n);
	grave_len += n;
}

static struct mh *mh_get(uintptr_t v)
{
	return (struct mh *)(v ^ MH_MASK);
}

static uintptr_t mh_put(struct mh *h)
{
	return (uintptr_t)h ^ MH_MASK;
}

static bool has_pattern(const void *p, size_t n)
{
	VALGRIND_MAKE_MEM_DEFINED(p, n);
	for (int k = 0; k < npats; k++)
		if (memmem(p, n, pats[k], sizeof(pats[k])))
			return true;
	return false;
}

static void *t_malloc(size_t n, const char *file, int line)
{
	struct mh *h = malloc(sizeof(*h) + n);

	if (!h)
		return NULL;
	if (!live.next)
		live.next = live.prev = mh_put(&live);
	memset(h + 1, 0, n); /* defined bytes for the scanners (and valgrind) */
	h->size = n;
	h->magic = MH_MAGIC;
	h->next = live.next;
	h->prev = mh_put(&live);
	mh_get(live.next)->prev = mh_put(h);
	live.next = mh_put(h);
	return h + 1;
}

static void t_free(void *p, const char *file, int line)
{
	struct mh *h;

	if (!p)
		return;
	h = (struct mh *)p - 1;
	if (h->magic != MH_MAGIC)
		abort();
	if (npats && has_pattern(p, h->size))
		freed_hits++;
	if (grave_on)
		grave_add(p, h->size);
	mh_get(h->prev)->next = h->next;
	mh_get(h->next)->prev = h->prev;
	h->magic = 0;
	free(h);
}

static void *t_realloc(void *p, size_t n, const char *file, int line)
{
	void *q;

	if (!p)
		return t_malloc(n, file, line);
	if (n == 0) {
		t_free(p, file, line);
		return NULL;
	}
	q = t_malloc(n, file, line);
	if (!q)
		return NULL;
	size_t old = ((struct mh *)p - 1)->size;
	memcpy(q, p, old < n ? old : n);
	t_free(p, file, line);
	return q;
}

static size_t live_hits(void)
{
	size_t n = 0;

	for (struct mh *h = mh_get(live.next); h != &live; h = mh_get(h->next))
		n += has_pattern(h + 1, h->size);
	return n;
}

/* ------------------------------------------------ helpers */

static double now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static double median(double *v, size_t n)
{
	qsort(v, n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static ab_ca *new_ca(const char *const *nc)
{
	ab_err err = {0};
	ab_ca *ca = NULL;

	int r = ab_ca_new(nc, 7, &ca, &err);
	if (r < 0)
		fprintf(stderr, "ab_ca_new: %s\n", err.msg);
	assert_int_equal(r, 0);
	assert_non_null(ca);
	return ca;
}

static X509 *leaf_of(ab_ca *ca, const char *host, SSL_CTX **ctxp)
{
	ab_err err = {0};
	SSL_CTX *ctx = NULL;

	int r = ab_ca_server_ctx(ca, host, &ctx, &err);
	if (r < 0)
		fprintf(stderr, "ab_ca_server_ctx(%s): %s\n", host, err.msg);
	assert_int_equal(r, 0);
	assert_non_null(ctx);
	*ctxp = ctx;
	return SSL_CTX_get0_certificate(ctx);
}

/* X509_verify_cert of leaf against a store holding only ca's root, with its
 * issuing CA (and `extra`, if any) as untrusted chain, for TLS server use,
 * with a host check when host is non-NULL.  Returns the X509_V_ result
 * (X509_V_OK on success). */
static int verify_chain(ab_ca *ca, X509 *leaf, X509 *extra, const char *host)
{
	X509_STORE *store = X509_STORE_new();
	X509_STORE_CTX *sc = X509_STORE_CTX_new();
	STACK_OF(X509) *chain = sk_X509_new_null();
	int res;

	assert_non_null(store);
	assert_non_null(sc);
	assert_non_null(chain);
	assert_int_equal(X509_STORE_add_cert(store, ab_ca_get0_cert(ca)), 1);
	assert_true(sk_X509_push(chain, ab_ca_get0_issuer(ca)) > 0);
	if (extra)
		assert_true(sk_X509_push(chain, extra) > 0);
	assert_int_equal(X509_STORE_CTX_init(sc, store, leaf, chain), 1);
	X509_STORE_CTX_set_purpose(sc, X509_PURPOSE_SSL_SERVER);
	if (host)
		X509_VERIFY_PARAM_set1_host(X509_STORE_CTX_get0_param(sc), host, 0);
	res = X509_verify_cert(sc) == 1 ? X509_V_OK : X509_STORE_CTX_get_error(sc);
	if (res == X509_V_OK)
		assert_int_equal(X509_STORE_CTX_get_error(sc), X509_V_OK);
	X509_STORE_CTX_free(sc);
	sk_X509_free(chain);
	X509_STORE_free(store);
	ERR_clear_error();
	return res;
}

static void push_gn(GENERAL_NAMES *gens, int type, const char *v)
{
	GENERAL_NAME *gn = NULL;

	if (type == GEN_DNS) {
		ASN1_IA5STRING *s = ASN1_IA5STRING_new();
		assert_int_equal(ASN1_STRING_set(s, v, -1), 1);
		gn = GENERAL_NAME_new();
		GENERAL_NAME_set0_value(gn, GEN_DNS, s);
	} else {
		gn = a2i_GENERAL_NAME(NULL, NULL, NULL, GEN_IPADD, v, 0);
	}
	assert_non_null(gn);
	assert_true(sk_GENERAL_NAME_push(gens, gn) > 0);
}

/* A certificate signed by `signer` with `sign_key` for any names (what a
 * thief holding the issuing key could mint): SAN from dns[] and ip (either
 * may be empty/NULL; no SAN at all when both are), CN when non-NULL; a CA
 * when *ca_key_out is non-NULL (its new key is returned there). */
static X509 *mint_any(X509 *signer, EVP_PKEY *sign_key, const char *const *dns, const char *ip,
		      const char *cn, EVP_PKEY **ca_key_out)
{
	X509 *x = X509_new(), *cacert = signer;
	EVP_PKEY *k = EVP_EC_gen("P-256");
	X509V3_CTX v3;
	GENERAL_NAMES *gens = sk_GENERAL_NAME_new_null();

	assert_non_null(x);
	assert_non_null(k);
	X509_set_version(x, X509_VERSION_3);
	ASN1_INTEGER_set(X509_get_serialNumber(x), 4242);
	if (cn)
		X509_NAME_add_entry_by_txt(X509_get_subject_name(x), "CN", MBSTRING_UTF8,
					   (const unsigned char *)cn, -1, -1, 0);
	X509_set_issuer_name(x, X509_get_subject_name(cacert));
	X509_gmtime_adj(X509_getm_notBefore(x), -60);
	X509_gmtime_adj(X509_getm_notAfter(x), 3600);
	X509_set_pubkey(x, k);
	X509V3_set_ctx(&v3, cacert, x, NULL, NULL, 0);
	X509_EXTENSION *e = X509V3_EXT_nconf_nid(NULL, &v3, NID_ext_key_usage, "serverAuth");
	X509_add_ext(x, e, -1);
	X509_EXTENSION_free(e);
	if (ca_key_out) {
		e = X509V3_EXT_nconf_nid(NULL, &v3, NID_basic_constraints, "critical,CA:TRUE");
		X509_add_ext(x, e, -1);
		X509_EXTENSION_free(e);
		e = X509V3_EXT_nconf_nid(NULL, &v3, NID_key_usage, "critical,keyCertSign");
		X509_add_ext(x, e, -1);
		X509_EXTENSION_free(e);
	}
	for (size_t i = 0; dns && dns[i]; i++)
		push_gn(gens, GEN_DNS, dns[i]);
	if (ip)
		push_gn(gens, GEN_IPADD, ip);
	if (sk_GENERAL_NAME_num(gens) > 0)
		assert_int_equal(X509_add1_ext_i2d(x, NID_subject_alt_name, gens, 0, 0), 1);
	GENERAL_NAMES_free(gens);
	assert_true(X509_sign(x, sign_key, EVP_sha256()) > 0);
	if (ca_key_out)
		*ca_key_out = k;
	else
		EVP_PKEY_free(k);
	return x;
}

static X509 *thief_mint(ab_ca *ca, const char *const *dns, const char *ip, const char *cn)
{
	return mint_any(ab_ca_get0_issuer(ca), ab_ca_get0_key(ca), dns, ip, cn, NULL);
}

static int ext_critical(X509 *x, int nid)
{
	int i = X509_get_ext_by_NID(x, nid, -1);

	assert_true(i >= 0);
	return X509_EXTENSION_get_critical(X509_get_ext(x, i));
}

/* seconds from now to t (negative: in the past) */
static long secs_from_now(const ASN1_TIME *t)
{
	int day = 0, sec = 0;

	assert_int_equal(ASN1_TIME_diff(&day, &sec, NULL, t), 1);
	return (long)day * 86400 + sec;
}

/* ------------------------------------------------ handshakes */

typedef struct hs_result {
	int who;    /* 0 ok, 1 client failed, 2 server failed, 3 stuck */
	int verify; /* client's SSL_get_verify_result */
	int reason; /* ERR_GET_REASON of the failing side's first error */
} hs_result;

static int step(SSL *s, bool *done, int *reason)
{
	int r = SSL_do_handshake(s);

	if (r == 1) {
		*done = true;
		return 0;
	}
	int e = SSL_get_error(s, r);
	if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
		return 0;
	*reason = ERR_GET_REASON(ERR_peek_error());
	return -1;
}

static hs_result handshake(SSL *c, SSL *s)
{
	BIO *bc = NULL, *bs = NULL;
	bool cdone = false, sdone = false;
	hs_result res = {3, 0, 0};

	assert_int_equal(BIO_new_bio_pair(&bc, 0, &bs, 0), 1);
	SSL_set_bio(c, bc, bc);
	SSL_set_bio(s, bs, bs);
	SSL_set_connect_state(c);
	SSL_set_accept_state(s);
	for (int i = 0; i < 64 && !(cdone && sdone); i++) {
		if (!cdone && step(c, &cdone, &res.reason) < 0) {
			res.who = 1;
			break;
		}
		if (!sdone && step(s, &sdone, &res.reason) < 0) {
			res.who = 2;
			break;
		}
	}
	if (cdone && sdone)
		res.who = 0;
	res.verify = (int)SSL_get_verify_result(c);
	ERR_clear_error();
	return res;
}

/* After a successful handshake: one message each way. */
static void ping(SSL *c, SSL *s)
{
	char buf[16];

	assert_int_equal(SSL_write(c, "ping", 4), 4);
	assert_int_equal(SSL_read(s, buf, sizeof(buf)), 4);
	assert_memory_equal(buf, "ping", 4);
	assert_int_equal(SSL_write(s, "pong", 4), 4);
	int n;
	do /* the client may first read the TLS 1.3 session tickets */
		n = SSL_read(c, buf, sizeof(buf));
	while (n <= 0 && SSL_get_error(c, n) == SSL_ERROR_WANT_READ);
	assert_int_equal(n, 4);
	assert_memory_equal(buf, "pong", 4);
}

static SSL_CTX *client_for(ab_ca *ca)
{
	ab_err err = {0};
	SSL_CTX *cc = NULL;
	char *pem = NULL;

	assert_int_equal(ab_ca_cert_pem(ca, &pem, &err), 0);
	assert_int_equal(ab_ca_client_ctx_mem(pem, &cc, &err), 0);
	free(pem);
	return cc;
}

/* A handshake between a client of cc expecting `expect` and the server
 * context for `host`.  alpn: wire-format protocol list or NULL. */
static hs_result hs_run(SSL_CTX *cc, SSL_CTX *sc, const char *expect, const unsigned char *alpn,
			size_t alpn_len, int client_max, char *alpn_out)
{
	ab_err err = {0};
	SSL *c = SSL_new(cc), *s = SSL_new(sc);

	assert_non_null(c);
	assert_non_null(s);
	assert_int_equal(ab_tls_client_setup(c, expect, &err), 0);
	if (alpn)
		assert_int_equal(SSL_set_alpn_protos(c, alpn, (unsigned)alpn_len), 0);
	else
		assert_int_equal(SSL_set_alpn_protos(c, NULL, 0), 0);
	if (client_max) {
		SSL_set_security_level(c, 0);
		assert_int_equal(SSL_set_cipher_list(c, "DEFAULT:@SECLEVEL=0"), 1);
		assert_int_equal(SSL_set_min_proto_version(c, client_max), 1);
		assert_int_equal(SSL_set_max_proto_version(c, client_max), 1);
	}
	hs_result r = handshake(c, s);
	if (r.who == 0) {
		const unsigned char *p = NULL;
		unsigned int len = 0, slen = 0;
		const unsigned char *sp = NULL;
		SSL_get0_alpn_selected(c, &p, &len);
		SSL_get0_alpn_selected(s, &sp, &slen);
		assert_int_equal(len, slen);
		if (alpn_out) {
			memcpy(alpn_out, p ? (const char *)p : "", len);
			alpn_out[len] = '\0';
		}
		if (client_max)
			assert_int_equal(SSL_version(c), client_max);
		else
			assert_true(SSL_version(c) >= TLS1_2_VERSION);
		ping(c, s);
	}
	SSL_free(c);
	SSL_free(s);
	return r;
}

/* ------------------------------------------------ tests: the CA */

static void check_cn(X509 *x, const char *prefix, char hex[9])
{
	char cn[128], o[64];
	size_t pl = strlen(prefix);

	assert_true(X509_NAME_get_text_by_NID(X509_get_subject_name(x), NID_commonName, cn,
					      sizeof(cn)) > 0);
	assert_int_equal(strlen(cn), pl + 8);
	assert_memory_equal(cn, prefix, pl);
	assert_true(strspn(cn + pl, "0123456789abcdef") == 8);
	memcpy(hex, cn + pl, 9);
	assert_true(X509_NAME_get_text_by_NID(X509_get_subject_name(x), NID_organizationName, o,
					      sizeof(o)) > 0);
	assert_string_equal(o, "agentbox");
}

static void check_p256(EVP_PKEY *pk)
{
	char grp[64];

	assert_true(EVP_PKEY_is_a(pk, "EC"));
	assert_int_equal(EVP_PKEY_get_group_name(pk, grp, sizeof(grp), NULL), 1);
	assert_string_equal(grp, "prime256v1");
}

/* x's key as a client reads it: the DER decoded anew gives a P-256 key,
 * its point uncompressed (RFC 5480), equal to the one x was made with, and
 * x verifies under signer's key after the round trip. */
static void check_spki(X509 *x, X509 *signer)
{
	unsigned char *der = NULL;
	int n = i2d_X509(x, &der);
	assert_true(n > 0);
	const unsigned char *p = der;
	X509 *back = d2i_X509(NULL, &p, n);
	assert_non_null(back);
	const unsigned char *pt = NULL;
	int ptlen = 0;
	ASN1_OBJECT *alg = NULL;
	assert_int_equal(
		X509_PUBKEY_get0_param(&alg, &pt, &ptlen, NULL, X509_get_X509_PUBKEY(back)), 1);
	assert_int_equal(OBJ_obj2nid(alg), NID_X9_62_id_ecPublicKey);
	assert_int_equal(ptlen, 65);
	assert_int_equal(pt[0], 0x04);
	assert_int_equal(EVP_PKEY_get_bits(X509_get0_pubkey(back)), 256);
	assert_int_equal(EVP_PKEY_eq(X509_get0_pubkey(back), X509_get0_pubkey(x)), 1);
	assert_int_equal(X509_verify(back, X509_get0_pubkey(signer)), 1);
	X509_free(back);
	OPENSSL_free(der);
}

static void test_ca_cert(void **state)
{
	ab_ca *ca = new_ca(nc_basic), *ca2 = new_ca(NULL);
	X509 *x = ab_ca_get0_cert(ca), *x2 = ab_ca_get0_cert(ca2), *is = ab_ca_get0_issuer(ca);
	char hex[9], hex_is[9];
	BASIC_CONSTRAINTS *bc;

	/* both keys as clients read them */
	check_spki(x, x);
	check_spki(is, x);
	/* the root */
	assert_int_equal(X509_check_ca(x), 1);
	assert_int_equal(X509_self_signed(x, 1), 1);
	assert_int_equal(X509_get_pathlen(x), 1);
	assert_int_equal(ext_critical(x, NID_basic_constraints), 1);
	assert_int_equal(ext_critical(x, NID_key_usage), 1);
	assert_int_equal(ext_critical(x, NID_name_constraints), 1);
	assert_int_equal(X509_get_ext_by_NID(x2, NID_name_constraints, -1), -1);
	assert_int_equal(X509_get_ext_by_NID(ab_ca_get0_issuer(ca2), NID_name_constraints, -1), -1);
	bc = X509_get_ext_d2i(x, NID_basic_constraints, NULL, NULL);
	assert_non_null(bc);
	assert_true(bc->ca);
	BASIC_CONSTRAINTS_free(bc);
	assert_int_equal(X509_get_key_usage(x), KU_KEY_CERT_SIGN | KU_CRL_SIGN);
	assert_non_null(X509_get0_subject_key_id(x));
	check_cn(x, "agentbox session CA ", hex);
	/* validity: now-1h .. now+7d */
	long nb = secs_from_now(X509_get0_notBefore(x)), na = secs_from_now(X509_get0_notAfter(x));
	assert_true(nb <= -3590 && nb >= -3610);
	assert_true(na >= 7 * 86400 - 10 && na <= 7 * 86400 + 10);
	/* serial: 16 bytes, positive, unique */
	const ASN1_INTEGER *sn = X509_get0_serialNumber(x);
	assert_int_equal(ASN1_STRING_length(sn), 16);
	assert_int_equal(ASN1_STRING_type(sn), V_ASN1_INTEGER);
	assert_int_not_equal(ASN1_INTEGER_cmp(sn, X509_get0_serialNumber(x2)), 0);
	EVP_PKEY *pk = X509_get0_pubkey(x);
	check_p256(pk);
	assert_int_not_equal(EVP_PKEY_eq(pk, X509_get0_pubkey(x2)), 1);
	assert_int_equal(X509_verify(x, pk), 1);
	/* the issuing CA: signed by the root, holds the only CA key we keep */
	assert_int_equal(X509_check_ca(is), 1);
	assert_int_equal(X509_self_signed(is, 0), 0);
	assert_int_equal(X509_check_issued(x, is), X509_V_OK);
	assert_int_equal(X509_verify(is, pk), 1);
	assert_int_equal(X509_get_pathlen(is), 0);
	assert_int_equal(ext_critical(is, NID_basic_constraints), 1);
	assert_int_equal(ext_critical(is, NID_key_usage), 1);
	assert_int_equal(X509_get_key_usage(is), KU_KEY_CERT_SIGN | KU_CRL_SIGN);
	assert_int_equal(X509_get_extended_key_usage(is), XKU_SSL_SERVER);
	assert_int_equal(
		ASN1_OCTET_STRING_cmp(X509_get0_authority_key_id(is), X509_get0_subject_key_id(x)),
		0);
	assert_int_equal(ASN1_STRING_length(X509_get0_serialNumber(is)), 16);
	assert_int_equal(ASN1_TIME_compare(X509_get0_notAfter(is), X509_get0_notAfter(x)), 0);
	check_cn(is, "agentbox session issuing CA ", hex_is);
	assert_string_equal(hex, hex_is);
	check_p256(X509_get0_pubkey(is));
	assert_int_equal(EVP_PKEY_eq(X509_get0_pubkey(is), ab_ca_get0_key(ca)), 1);
	assert_int_not_equal(EVP_PKEY_eq(pk, ab_ca_get0_key(ca)), 1);
	ab_ca_free(ca);
	ab_ca_free(ca2);
}

static void test_ca_pem(void **state)
{
	ab_ca *ca = new_ca(NULL);
	ab_err err = {0};
	char *pem = NULL;

	assert_int_equal(ab_ca_cert_pem(ca, &pem, &err), 0);
	assert_non_null(strstr(pem, "-----BEGIN CERTIFICATE-----\n"));
	assert_null(strstr(pem, "PRIVATE"));
	BIO *b = BIO_new_mem_buf(pem, -1);
	X509 *x = PEM_read_bio_X509(b, NULL, NULL, NULL);
	assert_non_null(x);
	assert_int_equal(X509_cmp(x, ab_ca_get0_cert(ca)), 0);
	X509_free(x);
	BIO_free(b);
	free(pem);
	ab_ca_free(ca);
}

typedef struct bad_new {
	const char *const *list;
	int days;
	int ret;
} bad_new;

static void test_ca_new_bad(void **state)
{
	static const char *const l_empty[] = {NULL};
	static const char *const l_star[] = {"*", NULL};
	static const char *const l_stardot[] = {"*.", NULL};
	static const char *const l_2star[] = {"**.a.com", NULL};
	static const char *const l_mid[] = {"a.*.com", NULL};
	static const char *const l_ip4[] = {"1.2.3.4", NULL};
	static const char *const l_ip6[] = {"[::1]", NULL};
	static const char *const l_hex[] = {"0x7f.1", NULL};
	static const char *const l_wip[] = {"*.1.2.3.4", NULL};
	static const char *const l_blank[] = {"", NULL};
	static const char *const l_space[] = {"a b.com", NULL};
	static const char *const l_comma[] = {"a.com,DNS:evil.com", NULL};
	static const char *const l_dash[] = {"-a.com", NULL};
	static const char *const l_utf8[] = {"b\xc3\xbc"
					     "cher.de",
					     NULL};
	static const char *const l_dot2[] = {"a.com..", NULL};
	static const char *const l_late[] = {"ok.com", "evil com", NULL};
	static const bad_new cases[] = {
		{NULL, 0, -EINVAL},    {NULL, -1, -EINVAL},   {NULL, 826, -EINVAL},
		{l_empty, 7, -EINVAL}, {l_star, 7, -EINVAL},  {l_stardot, 7, -EINVAL},
		{l_2star, 7, -EINVAL}, {l_mid, 7, -EINVAL},   {l_ip4, 7, -EINVAL},
		{l_ip6, 7, -EINVAL},   {l_hex, 7, -EINVAL},   {l_wip, 7, -EINVAL},
		{l_blank, 7, -EINVAL}, {l_space, 7, -EINVAL}, {l_comma, 7, -EINVAL},
		{l_dash, 7, -EINVAL},  {l_utf8, 7, -EINVAL},  {l_dot2, 7, -EINVAL},
		{l_late, 7, -EINVAL},
	};
	for (size_t i = 0; i < AB_ARRAY_SIZE(cases); i++) {
		ab_err err = {0};
		ab_ca *ca = (ab_ca *)&err;
		int r = ab_ca_new(cases[i].list, cases[i].days, &ca, &err);
		if (r != cases[i].ret)
			fprintf(stderr, "case %zu: %d (%s)\n", i, r, err.msg);
		assert_int_equal(r, cases[i].ret);
		assert_null(ca);
		assert_true(err.msg[0] != '\0');
	}
	/* too many entries */
	const char **many = calloc(AB_CA_MAX_CONSTRAINTS + 2, sizeof(*many));
	assert_non_null(many);
	for (size_t i = 0; i <= AB_CA_MAX_CONSTRAINTS; i++)
		many[i] = "a.example.com";
	ab_err err = {0};
	ab_ca *ca = NULL;
	assert_int_equal(ab_ca_new(many, 7, &ca, &err), -E2BIG);
	assert_null(ca);
	many[AB_CA_MAX_CONSTRAINTS] = NULL; /* exactly the limit: fine (deduplicated) */
	assert_int_equal(ab_ca_new(many, 1, &ca, &err), 0);
	ab_ca_free(ca);
	free(many);
	ab_ca_free(NULL);
}

/* The encoded subtrees, in order. */
static void expect_subtrees(STACK_OF(GENERAL_SUBTREE) * sk, const char *const *dns, int n_ip)
{
	int n = 0, ips = 0;

	for (int i = 0; i < sk_GENERAL_SUBTREE_num(sk); i++) {
		GENERAL_SUBTREE *st = sk_GENERAL_SUBTREE_value(sk, i);
		assert_null(st->minimum);
		assert_null(st->maximum);
		if (st->base->type == GEN_IPADD) {
			const ASN1_OCTET_STRING *os = st->base->d.iPAddress;
			static const unsigned char zero[32];
			assert_true(os->length == (ips == 0 ? 8 : 32));
			assert_memory_equal(os->data, zero, (size_t)os->length);
			ips++;
			continue;
		}
		assert_int_equal(st->base->type, GEN_DNS);
		assert_non_null(dns[n]);
		assert_int_equal(st->base->d.dNSName->length, (int)strlen(dns[n]));
		assert_memory_equal(st->base->d.dNSName->data, dns[n], strlen(dns[n]));
		n++;
	}
	assert_null(dns[n]);
	assert_int_equal(ips, n_ip);
}

static void test_nc_encoding(void **state)
{
	static const char *const list[] = {
		"*.example.com",
		"api.test",
		"Example.ORG.",
		"x.example.com" /* covered */,
		"example.net",
		"a.example.net" /* below example.net */,
		"api.test" /* dup */,
		"*.example.org" /* wildcard under example.org: no exclusion for it */,
		NULL,
	};
	static const char *const permitted[] = {
		".example.com",  "api.test",     "example.org", "example.net",
		"a.example.net", ".example.org", NULL,
	};
	static const char *const excluded[] = {".api.test", ".a.example.net", NULL};
	ab_ca *ca = new_ca(list);
	X509 *certs[] = {ab_ca_get0_cert(ca), ab_ca_get0_issuer(ca)};

	for (size_t i = 0; i < AB_ARRAY_SIZE(certs); i++) {
		NAME_CONSTRAINTS *nc = X509_get_ext_d2i(certs[i], NID_name_constraints, NULL, NULL);
		assert_non_null(nc);
		assert_int_equal(ext_critical(certs[i], NID_name_constraints), 1);
		expect_subtrees(nc->permittedSubtrees, permitted, 0);
		expect_subtrees(nc->excludedSubtrees, excluded, 2);
		NAME_CONSTRAINTS_free(nc);
	}
	ab_ca_free(ca);
}

/* ------------------------------------------------ tests: leaves */

/* The leaf profile of x, minted for h (see ca.h). */
static void check_leaf_profile(ab_ca *ca, X509 *x, const char *h)
{
	X509 *cacert = ab_ca_get0_cert(ca), *issuer = ab_ca_get0_issuer(ca);
	char cn[256];
	int cnlen =
		X509_NAME_get_text_by_NID(X509_get_subject_name(x), NID_commonName, cn, sizeof(cn));

	if (strlen(h) <= 64) {
		assert_string_equal(cn, h);
		assert_int_equal(ext_critical(x, NID_subject_alt_name), 0);
	} else {
		assert_int_equal(cnlen, -1);
		assert_int_equal(X509_NAME_entry_count(X509_get_subject_name(x)), 0);
		assert_int_equal(ext_critical(x, NID_subject_alt_name), 1);
	}
	GENERAL_NAMES *san = X509_get_ext_d2i(x, NID_subject_alt_name, NULL, NULL);
	assert_int_equal(sk_GENERAL_NAME_num(san), 1);
	GENERAL_NAME *gn = sk_GENERAL_NAME_value(san, 0);
	assert_int_equal(gn->type, GEN_DNS);
	assert_int_equal(gn->d.dNSName->length, (int)strlen(h));
	assert_memory_equal(gn->d.dNSName->data, h, strlen(h));
	GENERAL_NAMES_free(san);
	assert_int_equal(X509_check_ca(x), 0);
	assert_int_equal(X509_get_key_usage(x), KU_DIGITAL_SIGNATURE);
	assert_int_equal(ext_critical(x, NID_key_usage), 1);
	assert_int_equal(X509_get_extended_key_usage(x), XKU_SSL_SERVER);
	assert_int_equal(X509_check_issued(issuer, x), X509_V_OK);
	assert_int_not_equal(X509_check_issued(cacert, x), X509_V_OK);
	assert_int_equal(ASN1_OCTET_STRING_cmp(X509_get0_authority_key_id(x),
					       X509_get0_subject_key_id(issuer)),
			 0);
	assert_int_equal(ASN1_TIME_compare(X509_get0_notAfter(x), X509_get0_notAfter(cacert)), 0);
	long nb = secs_from_now(X509_get0_notBefore(x));
	assert_true(nb <= -3590 && nb >= -3610);
	assert_int_equal(ASN1_STRING_length(X509_get0_serialNumber(x)), 16);
	assert_int_not_equal(EVP_PKEY_eq(X509_get0_pubkey(x), X509_get0_pubkey(cacert)), 1);
	assert_int_not_equal(EVP_PKEY_eq(X509_get0_pubkey(x), X509_get0_pubkey(issuer)), 1);
}

static void test_leaves_chain(void **state)
{
	static const char *const hosts[] = {
		"a.example.com",
		"b.example.com",
		"deep.er.example.com",
		"api.test",
		"x_y.example.com",
		/* 100 bytes: no CN, critical SAN */
		("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa."
		 "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb.example.com"),
	};
	ab_ca *ca = new_ca(nc_basic);
	SSL_CTX *ctxs[AB_ARRAY_SIZE(hosts)];
	X509 *leaves[AB_ARRAY_SIZE(hosts)];

	for (size_t i = 0; i < AB_ARRAY_SIZE(hosts); i++) {
		const char *h = hosts[i];
		X509 *x = leaves[i] = leaf_of(ca, h, &ctxs[i]);

		assert_int_equal(verify_chain(ca, x, NULL, h), X509_V_OK);
		assert_int_equal(X509_check_host(x, h, 0, 0, NULL), 1);
		assert_int_equal(X509_check_host(x, "other.example.com", 0, 0, NULL), 0);
		check_leaf_profile(ca, x, h);
		check_spki(x, ab_ca_get0_issuer(ca));
		/* one leaf key for the session */
		assert_int_equal(EVP_PKEY_eq(X509_get0_pubkey(x), X509_get0_pubkey(leaves[0])), 1);
		for (size_t j = 0; j < i; j++)
			assert_int_not_equal(ASN1_INTEGER_cmp(X509_get0_serialNumber(x),
							      X509_get0_serialNumber(leaves[j])),
					     0);
		/* the context: the chain sent is the issuing CA; TLS 1.2+ */
		STACK_OF(X509) *extra = NULL;
		assert_int_equal(SSL_CTX_get0_chain_certs(ctxs[i], &extra), 1);
		assert_int_equal(sk_X509_num(extra), 1);
		assert_int_equal(X509_cmp(sk_X509_value(extra, 0), ab_ca_get0_issuer(ca)), 0);
		assert_int_equal(SSL_CTX_get_min_proto_version(ctxs[i]), TLS1_2_VERSION);
		assert_true(SSL_CTX_get_options(ctxs[i]) & SSL_OP_NO_RENEGOTIATION);
	}
	assert_int_equal(ab_ca_cache_size(ca), AB_ARRAY_SIZE(hosts));
	/* a leaf of another CA does not chain */
	ab_ca *other = new_ca(nc_basic);
	assert_int_not_equal(verify_chain(other, leaves[0], NULL, hosts[0]), X509_V_OK);
	ab_ca_free(other);
	ab_ca_free(ca);
	/* the contexts (our references) outlive the CA */
	for (size_t i = 0; i < AB_ARRAY_SIZE(hosts); i++) {
		assert_non_null(SSL_CTX_get0_certificate(ctxs[i]));
		SSL_CTX_free(ctxs[i]);
	}
}

static void test_cache_hit(void **state)
{
	ab_ca *ca = new_ca(nc_basic);
	SSL_CTX *c1, *c2, *c3;
	X509 *x1 = leaf_of(ca, "a.example.com", &c1);
	X509 *x2 = leaf_of(ca, "a.example.com", &c2);
	X509 *x3 = leaf_of(ca, "b.example.com", &c3);

	assert_ptr_equal(c1, c2);
	assert_ptr_equal(x1, x2);
	assert_ptr_not_equal(c1, c3);
	assert_int_not_equal(X509_cmp(x1, x3), 0);
	assert_int_equal(ab_ca_cache_size(ca), 2);
	SSL_CTX_free(c1);
	SSL_CTX_free(c2);
	SSL_CTX_free(c3);
	ab_ca_free(ca);
}

static void test_cache_lru(void **state)
{
	ab_ca *ca = new_ca(NULL);
	char h[64];
	SSL_CTX *c, *keep0, *keep1, *again;

	for (int i = 0; i < AB_CA_CACHE_MAX; i++) {
		snprintf(h, sizeof(h), "h%d.lru.test", i);
		leaf_of(ca, h, &c);
		if (i == 0)
			keep0 = c;
		else if (i == 1)
			keep1 = c;
		else
			SSL_CTX_free(c);
	}
	assert_int_equal(ab_ca_cache_size(ca), AB_CA_CACHE_MAX);
	leaf_of(ca, "h0.lru.test", &again); /* h0 becomes the most recent */
	assert_ptr_equal(again, keep0);
	SSL_CTX_free(again);
	leaf_of(ca, "new.lru.test", &c); /* evicts h1, the least recent */
	SSL_CTX_free(c);
	assert_int_equal(ab_ca_cache_size(ca), AB_CA_CACHE_MAX);
	leaf_of(ca, "h1.lru.test", &again); /* minted again (evicts h2) */
	assert_ptr_not_equal(again, keep1);
	assert_int_not_equal(
		X509_cmp(SSL_CTX_get0_certificate(again), SSL_CTX_get0_certificate(keep1)), 0);
	SSL_CTX_free(again);
	leaf_of(ca, "h0.lru.test", &again);
	assert_ptr_equal(again, keep0);
	SSL_CTX_free(again);
	leaf_of(ca, "new.lru.test", &again);
	SSL_CTX_free(again);
	leaf_of(ca, "h3.lru.test", &again);
	SSL_CTX_free(again);
	/* the evicted context we still hold works: a full handshake */
	SSL_CTX *cc = client_for(ca);
	hs_result r = hs_run(cc, keep1, "h1.lru.test", NULL, 0, 0, NULL);
	assert_int_equal(r.who, 0);
	SSL_CTX_free(cc);
	SSL_CTX_free(keep0);
	SSL_CTX_free(keep1);
	ab_ca_free(ca);
}

typedef struct refuse_case {
	const char *host;
	int ret;
} refuse_case;

static void test_server_ctx_refuse(void **state)
{
	static const refuse_case cases[] = {
		{"example.com", -EPERM}, /* the bare suffix of a wildcard */
		{"evil.com", -EPERM},
		{"x.api.test", -EPERM}, /* below an exact entry */
		{"test", -EPERM},
		{"aexample.com", -EPERM},
		{"A.example.com", -EINVAL}, /* not normalised */
		{"a.example.com.", -EINVAL},
		{"1.2.3.4", -EINVAL},
		{"[::1]", -EINVAL},
		{"0x7f.1", -EINVAL},
		{"", -EINVAL},
		{"*.example.com", -EINVAL},
		{"a b.example.com", -EINVAL},
		{"a..example.com", -EINVAL},
		{"a.example.com\n", -EINVAL},
		{"a.example.com,DNS:evil.com", -EINVAL},
		{"a.example.com/x", -EINVAL},
		{NULL, -EINVAL},
	};
	ab_ca *ca = new_ca(nc_basic);
	char longname[400];

	for (size_t i = 0; i < AB_ARRAY_SIZE(cases); i++) {
		ab_err err = {0};
		SSL_CTX *c = (SSL_CTX *)&err;
		assert_int_equal(ab_ca_server_ctx(ca, cases[i].host, &c, &err), cases[i].ret);
		assert_null(c);
		assert_true(err.msg[0] != '\0');
	}
	memset(longname, 'a', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = '\0';
	memcpy(longname + sizeof(longname) - 13, ".example.com", 12);
	ab_err err = {0};
	SSL_CTX *c = NULL;
	assert_int_equal(ab_ca_server_ctx(ca, longname, &c, &err), -EINVAL);
	assert_int_equal(ab_ca_cache_size(ca), 0);
	ab_ca_free(ca);
}

/* ------------------------------------------------ tests: name constraints */

typedef struct nc_case {
	const char *dns[3];
	const char *ip;
	const char *cn; /* CN, only used when dns[0] and ip are NULL */
	int expect;     /* X509_V_OK or the verification error */
} nc_case;

static void test_nc_verify(void **state)
{
	static const nc_case cases[] = {
		{{"a.example.com"}, NULL, NULL, X509_V_OK},
		{{"a.b.example.com"}, NULL, NULL, X509_V_OK},
		{{"A.EXAMPLE.COM"}, NULL, NULL, X509_V_OK}, /* DNS is case-insensitive */
		{{"example.com"}, NULL, NULL, X509_V_ERR_PERMITTED_VIOLATION},
		{{"evil.com"}, NULL, NULL, X509_V_ERR_PERMITTED_VIOLATION},
		{{"notexample.com"}, NULL, NULL, X509_V_ERR_PERMITTED_VIOLATION},
		{{"example.com.evil.com"}, NULL, NULL, X509_V_ERR_PERMITTED_VIOLATION},
		{{"api.test"}, NULL, NULL, X509_V_OK},
		{{"x.api.test"}, NULL, NULL, X509_V_ERR_EXCLUDED_VIOLATION},
		{{"X.API.TEST"}, NULL, NULL, X509_V_ERR_EXCLUDED_VIOLATION},
		{{"test"}, NULL, NULL, X509_V_ERR_PERMITTED_VIOLATION},
		{{"evilapi.test"}, NULL, NULL, X509_V_ERR_PERMITTED_VIOLATION},
		{{"*.example.com"}, NULL, NULL, X509_V_OK}, /* a wildcard leaf under it */
		{{"*.test"}, NULL, NULL, X509_V_ERR_PERMITTED_VIOLATION},
		{{"a.example.com", "evil.com"}, NULL, NULL, X509_V_ERR_PERMITTED_VIOLATION},
		{{NULL}, "127.0.0.1", NULL, X509_V_ERR_EXCLUDED_VIOLATION},
		{{NULL}, "93.184.216.34", NULL, X509_V_ERR_EXCLUDED_VIOLATION},
		{{NULL}, "::1", NULL, X509_V_ERR_EXCLUDED_VIOLATION},
		{{NULL}, "2001:db8::1", NULL, X509_V_ERR_EXCLUDED_VIOLATION},
		{{"a.example.com"}, "10.0.0.1", NULL, X509_V_ERR_EXCLUDED_VIOLATION},
		/* no SAN: OpenSSL 3 checks a host-like CN against DNS constraints */
		{{NULL}, NULL, "evil.com", X509_V_ERR_PERMITTED_VIOLATION},
		{{NULL}, NULL, "a.example.com", X509_V_OK},
	};
	ab_ca *ca = new_ca(nc_basic), *open_ca = new_ca(NULL);

	for (size_t i = 0; i < AB_ARRAY_SIZE(cases); i++) {
		const nc_case *t = &cases[i];
		X509 *x = thief_mint(ca, t->dns, t->ip, t->cn);
		int r = verify_chain(ca, x, NULL, NULL);
		if (r != t->expect)
			fprintf(stderr, "nc case %zu (%s): got %d (%s)\n", i,
				t->dns[0] ? t->dns[0]
				: t->ip   ? t->ip
					  : t->cn,
				r, X509_verify_cert_error_string(r));
		assert_int_equal(r, t->expect);
		X509_free(x);
		/* control: the same names under an unconstrained CA all verify */
		x = thief_mint(open_ca, t->dns, t->ip, t->cn);
		assert_int_equal(verify_chain(open_ca, x, NULL, NULL), X509_V_OK);
		X509_free(x);
	}
	ab_ca_free(ca);
	ab_ca_free(open_ca);
}

/* A thief holding the issuing key mints an unconstrained sub-CA and leaves
 * under it: refused (pathlen:0 on the issuing CA, and the constraints of
 * both CAs still apply to the whole chain). */
static void test_nc_thief_subca(void **state)
{
	static const char *const inside[] = {"a.example.com", NULL};
	static const char *const outside[] = {"evil.com", NULL};
	ab_ca *ca = new_ca(nc_basic);
	EVP_PKEY *sub_key = NULL;
	X509 *sub = mint_any(ab_ca_get0_issuer(ca), ab_ca_get0_key(ca), NULL, NULL, "thief sub-CA",
			     &sub_key);
	X509 *in = mint_any(sub, sub_key, inside, NULL, NULL, NULL);
	X509 *out = mint_any(sub, sub_key, outside, NULL, NULL, NULL);

	assert_int_equal(verify_chain(ca, in, sub, NULL), X509_V_ERR_PATH_LENGTH_EXCEEDED);
	assert_int_not_equal(verify_chain(ca, out, sub, NULL), X509_V_OK);
	/* and a thief-minted leaf directly under the issuing CA: only inside */
	X509 *direct_in = thief_mint(ca, inside, NULL, NULL);
	X509 *direct_out = thief_mint(ca, outside, NULL, NULL);
	assert_int_equal(verify_chain(ca, direct_in, NULL, "a.example.com"), X509_V_OK);
	assert_int_equal(verify_chain(ca, direct_out, NULL, "evil.com"),
			 X509_V_ERR_PERMITTED_VIOLATION);
	X509_free(direct_in);
	X509_free(direct_out);
	X509_free(in);
	X509_free(out);
	X509_free(sub);
	EVP_PKEY_free(sub_key);
	ab_ca_free(ca);
}

/* ------------------------------------------------ tests: handshakes */

static void test_handshake(void **state)
{
	static const unsigned char h2_h1[] = "\x02h2\x08http/1.1";
	static const unsigned char h1_h2[] = "\x08http/1.1\x02h2";
	static const unsigned char h2[] = "\x02h2";
	static const unsigned char h10[] = "\x08http/1.0";
	ab_ca *ca = new_ca(nc_basic);
	SSL_CTX *cc = client_for(ca), *sc, *sc2;
	char alpn[64];
	hs_result r;

	leaf_of(ca, "a.example.com", &sc);
	leaf_of(ca, "api.test", &sc2);

	r = hs_run(cc, sc, "a.example.com", h2_h1, sizeof(h2_h1) - 1, 0, alpn);
	assert_int_equal(r.who, 0);
	assert_string_equal(alpn, "http/1.1");
	r = hs_run(cc, sc, "a.example.com", h1_h2, sizeof(h1_h2) - 1, 0, alpn);
	assert_int_equal(r.who, 0);
	assert_string_equal(alpn, "http/1.1");
	/* only h2 (or anything else) offered: no ALPN, the handshake goes on */
	r = hs_run(cc, sc, "a.example.com", h2, sizeof(h2) - 1, 0, alpn);
	assert_int_equal(r.who, 0);
	assert_string_equal(alpn, "");
	r = hs_run(cc, sc, "a.example.com", h10, sizeof(h10) - 1, 0, alpn);
	assert_int_equal(r.who, 0);
	assert_string_equal(alpn, "");
	r = hs_run(cc, sc, "a.example.com", NULL, 0, 0, alpn);
	assert_int_equal(r.who, 0);
	assert_string_equal(alpn, "");
	/* exact host */
	r = hs_run(cc, sc2, "api.test", h2_h1, sizeof(h2_h1) - 1, 0, alpn);
	assert_int_equal(r.who, 0);
	/* TLS 1.2 accepted, TLS 1.1 refused by the server */
	r = hs_run(cc, sc, "a.example.com", h2_h1, sizeof(h2_h1) - 1, TLS1_2_VERSION, alpn);
	assert_int_equal(r.who, 0);
	assert_string_equal(alpn, "http/1.1");
	r = hs_run(cc, sc, "a.example.com", NULL, 0, TLS1_1_VERSION, NULL);
	assert_int_equal(r.who, 2);
	assert_int_equal(r.reason, SSL_R_UNSUPPORTED_PROTOCOL);
	r = hs_run(cc, sc, "a.example.com", NULL, 0, TLS1_VERSION, NULL);
	assert_int_equal(r.who, 2);
	/* hostname mismatch: the client refuses */
	r = hs_run(cc, sc, "b.example.com", h2_h1, sizeof(h2_h1) - 1, 0, NULL);
	assert_int_equal(r.who, 1);
	assert_int_equal(r.verify, X509_V_ERR_HOSTNAME_MISMATCH);
	r = hs_run(cc, sc2, "a.example.com", NULL, 0, 0, NULL);
	assert_int_equal(r.who, 1);
	assert_int_equal(r.verify, X509_V_ERR_HOSTNAME_MISMATCH);
	/* a client trusting another session's CA refuses */
	ab_ca *other = new_ca(nc_basic);
	SSL_CTX *cc_other = client_for(other);
	r = hs_run(cc_other, sc, "a.example.com", NULL, 0, 0, NULL);
	assert_int_equal(r.who, 1);
	assert_int_not_equal(r.verify, X509_V_OK);
	SSL_CTX_free(cc_other);
	ab_ca_free(other);
	SSL_CTX_free(sc);
	SSL_CTX_free(sc2);
	SSL_CTX_free(cc);
	ab_ca_free(ca);
}

static int memfd_with(const char *data)
{
	int fd = memfd_create("ab-test", MFD_CLOEXEC);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, data, strlen(data)), (ssize_t)strlen(data));
	return fd;
}

static void test_client_ctx(void **state)
{
	ab_ca *ca = new_ca(nc_basic);
	ab_err err = {0};
	SSL_CTX *cc = NULL, *sc;
	char *pem = NULL, path[64];
	hs_result r;

	leaf_of(ca, "a.example.com", &sc);
	assert_int_equal(ab_ca_cert_pem(ca, &pem, &err), 0);
	/* ca_file: that bundle only */
	int fd = memfd_with(pem);
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	assert_int_equal(ab_ca_client_ctx(path, &cc, &err), 0);
	assert_int_equal(SSL_CTX_get_min_proto_version(cc), TLS1_2_VERSION);
	assert_int_equal(SSL_CTX_get_verify_mode(cc), SSL_VERIFY_PEER);
	r = hs_run(cc, sc, "a.example.com", (const unsigned char *)"\x08http/1.1", 9, 0, NULL);
	assert_int_equal(r.who, 0);
	SSL_CTX_free(cc);
	close(fd);
	/* system store: does not know the session CA */
	assert_int_equal(ab_ca_client_ctx(NULL, &cc, &err), 0);
	r = hs_run(cc, sc, "a.example.com", NULL, 0, 0, NULL);
	assert_int_equal(r.who, 1);
	assert_int_equal(r.verify, X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY);
	SSL_CTX_free(cc);
	/* bad bundles */
	cc = (SSL_CTX *)&err;
	assert_true(ab_ca_client_ctx("/nonexistent/bundle.pem", &cc, &err) < 0);
	assert_null(cc);
	assert_non_null(strstr(err.msg, "CA bundle"));
	fd = memfd_with("not a certificate\n");
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	assert_true(ab_ca_client_ctx(path, &cc, &err) < 0);
	close(fd);
	assert_int_equal(ab_ca_client_ctx_mem("", &cc, &err), -EINVAL);
	assert_int_equal(ab_ca_client_ctx_mem("garbage", &cc, &err), -EINVAL);
	assert_int_equal(ab_ca_client_ctx_mem("-----BEGIN CERTIFICATE-----\nAAAA\n"
					      "-----END CERTIFICATE-----\n",
					      &cc, &err),
			 -EINVAL);
	assert_null(cc);
	free(pem);
	SSL_CTX_free(sc);
	ab_ca_free(ca);
}

static void test_client_setup(void **state)
{
	SSL_CTX *cc = NULL;
	ab_err err = {0};
	static const char *const bad[] = {
		"", "A.example.com", "a.example.com.", "a b", "::1", "0x7f.1", "a@b", "127.1",
	};

	assert_int_equal(ab_ca_client_ctx(NULL, &cc, &err), 0);
	for (size_t i = 0; i < AB_ARRAY_SIZE(bad); i++) {
		SSL *s = SSL_new(cc);
		assert_int_equal(ab_tls_client_setup(s, bad[i], &err), -EINVAL);
		SSL_free(s);
	}
	SSL *s = SSL_new(cc);
	assert_int_equal(ab_tls_client_setup(s, NULL, &err), -EINVAL);
	assert_int_equal(ab_tls_client_setup(s, "api.example.com", &err), 0);
	assert_string_equal(SSL_get_servername(s, TLSEXT_NAMETYPE_host_name), "api.example.com");
	assert_string_equal(SSL_get0_peername(s) ? SSL_get0_peername(s) : "", "");
	assert_int_equal(SSL_get_verify_mode(s), SSL_VERIFY_PEER);
	SSL_free(s);
	/* IP literals: expected address, no SNI */
	static const char *const ips[] = {"127.0.0.1", "[::1]", "[2001:db8::1]"};
	for (size_t i = 0; i < AB_ARRAY_SIZE(ips); i++) {
		s = SSL_new(cc);
		assert_int_equal(ab_tls_client_setup(s, ips[i], &err), 0);
		assert_null(SSL_get_servername(s, TLSEXT_NAMETYPE_host_name));
		SSL_free(s);
	}
	SSL_CTX_free(cc);
}

/* A server for 127.0.0.1 / ::1 cannot exist (no IP leaves), so check the IP
 * expectation against a thief-minted IP leaf through a plain SSL_CTX. */
static void test_client_setup_ip_match(void **state)
{
	ab_ca *ca = new_ca(NULL);
	SSL_CTX *cc = client_for(ca), *sc = SSL_CTX_new(TLS_server_method());
	EVP_PKEY *k = EVP_EC_gen("P-256");
	X509 *x = X509_new();
	X509V3_CTX v3;

	X509_set_version(x, X509_VERSION_3);
	ASN1_INTEGER_set(X509_get_serialNumber(x), 7);
	X509_set_issuer_name(x, X509_get_subject_name(ab_ca_get0_issuer(ca)));
	X509_gmtime_adj(X509_getm_notBefore(x), -60);
	X509_gmtime_adj(X509_getm_notAfter(x), 3600);
	X509_set_pubkey(x, k);
	X509V3_set_ctx(&v3, ab_ca_get0_issuer(ca), x, NULL, NULL, 0);
	X509_EXTENSION *e = X509V3_EXT_nconf_nid(NULL, &v3, NID_subject_alt_name, "IP:127.0.0.1");
	X509_add_ext(x, e, -1);
	X509_EXTENSION_free(e);
	assert_true(X509_sign(x, ab_ca_get0_key(ca), EVP_sha256()) > 0);
	assert_int_equal(SSL_CTX_use_certificate(sc, x), 1);
	assert_int_equal(SSL_CTX_add1_chain_cert(sc, ab_ca_get0_issuer(ca)), 1);
	assert_int_equal(SSL_CTX_use_PrivateKey(sc, k), 1);
	assert_int_equal(hs_run(cc, sc, "127.0.0.1", NULL, 0, 0, NULL).who, 0);
	hs_result r = hs_run(cc, sc, "127.0.0.2", NULL, 0, 0, NULL);
	assert_int_equal(r.who, 1);
	assert_int_equal(r.verify, X509_V_ERR_IP_ADDRESS_MISMATCH);
	r = hs_run(cc, sc, "localhost", NULL, 0, 0, NULL);
	assert_int_equal(r.who, 1);
	assert_int_equal(r.verify, X509_V_ERR_HOSTNAME_MISMATCH);
	X509_free(x);
	EVP_PKEY_free(k);
	SSL_CTX_free(sc);
	SSL_CTX_free(cc);
	ab_ca_free(ca);
}

/* ------------------------------------------------ tests: system store */

static void write_pem(const char *path, X509 *a, X509 *b, bool aux)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	if (a)
		assert_int_equal(aux ? PEM_write_X509_AUX(f, a) : PEM_write_X509(f, a), 1);
	if (b)
		assert_int_equal(aux ? PEM_write_X509_AUX(f, b) : PEM_write_X509(f, b), 1);
	fclose(f);
}

static int store_count(SSL_CTX *cc)
{
	return sk_X509_OBJECT_num(X509_STORE_get0_objects(SSL_CTX_get_cert_store(cc)));
}

/* A client context on the system store that SSL_CERT_FILE / SSL_CERT_DIR
 * name, and one handshake to sc: its verify result. */
static long sys_handshake(const char *file, const char *dir, SSL_CTX *sc, int *before, int *after)
{
	ab_err err = {0};
	SSL_CTX *cc = NULL;

	setenv("SSL_CERT_FILE", file, 1);
	setenv("SSL_CERT_DIR", dir, 1);
	assert_int_equal(ab_ca_client_ctx(NULL, &cc, &err), 0);
	*before = store_count(cc);
	hs_result r = hs_run(cc, sc, "a.example.com", NULL, 0, 0, NULL);
	*after = store_count(cc);
	SSL_CTX_free(cc);
	unsetenv("SSL_CERT_FILE");
	unsetenv("SSL_CERT_DIR");
	return r.who == 0 ? X509_V_OK : r.verify;
}

/* The system store is read by need: nothing is decoded before the first
 * handshake, then only the anchors of that subject; the bundle and the
 * hashed directory both still vouch, and nothing else does. */
static void test_system_trust_by_need(void **state)
{
	ab_ca *ca = new_ca(nc_basic), *other = new_ca(NULL);
	X509 *root = ab_ca_get0_cert(ca);
	SSL_CTX *sc;
	char tmp[] = "/tmp/ab-systrust-XXXXXX", both[96], only_other[96], aux[96], none[96],
	     hashed[96], empty[96], link[128];
	int before, after;

	leaf_of(ca, "a.example.com", &sc);
	assert_non_null(mkdtemp(tmp));
	snprintf(both, sizeof(both), "%s/both.pem", tmp);
	snprintf(only_other, sizeof(only_other), "%s/other.pem", tmp);
	snprintf(aux, sizeof(aux), "%s/aux.pem", tmp);
	snprintf(none, sizeof(none), "%s/none.pem", tmp);
	snprintf(hashed, sizeof(hashed), "%s/hashed", tmp);
	snprintf(empty, sizeof(empty), "%s/empty", tmp);
	assert_int_equal(mkdir(hashed, 0700), 0);
	assert_int_equal(mkdir(empty, 0700), 0);
	snprintf(link, sizeof(link), "%s/%08lx.0", hashed,
		 X509_NAME_hash_ex(X509_get_subject_name(root), NULL, NULL, NULL));
	write_pem(both, ab_ca_get0_cert(other), root, false);
	write_pem(only_other, ab_ca_get0_cert(other), NULL, false);
	write_pem(aux, ab_ca_get0_cert(other), root, true);
	write_pem(link, root, NULL, false);

	/* the bundle: nothing decoded up front, then the one root asked for */
	assert_int_equal(sys_handshake(both, empty, sc, &before, &after), X509_V_OK);
	assert_int_equal(before, 0);
	assert_int_equal(after, 1);
	/* warmed: the bundle indexed ahead, still nothing decoded */
	ab_err err = {0};
	SSL_CTX *cc = NULL;
	setenv("SSL_CERT_FILE", both, 1);
	setenv("SSL_CERT_DIR", empty, 1);
	assert_int_equal(ab_ca_client_ctx(NULL, &cc, &err), 0);
	ab_ca_system_trust_warm(cc);
	assert_int_equal(store_count(cc), 0);
	assert_int_equal(hs_run(cc, sc, "a.example.com", NULL, 0, 0, NULL).who, 0);
	assert_int_equal(store_count(cc), 1);
	SSL_CTX_free(cc);
	unsetenv("SSL_CERT_FILE");
	unsetenv("SSL_CERT_DIR");
	/* "TRUSTED CERTIFICATE" blocks are anchors too */
	assert_int_equal(sys_handshake(aux, empty, sc, &before, &after), X509_V_OK);
	/* the hashed directory, for what the bundle lacks */
	assert_int_equal(sys_handshake(only_other, hashed, sc, &before, &after), X509_V_OK);
	assert_int_equal(sys_handshake(none, hashed, sc, &before, &after), X509_V_OK);
	/* neither vouches: refused */
	assert_int_equal(sys_handshake(only_other, empty, sc, &before, &after),
			 X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY);
	assert_int_equal(sys_handshake(none, empty, sc, &before, &after),
			 X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY);

	unlink(link);
	unlink(both);
	unlink(only_other);
	unlink(aux);
	rmdir(hashed);
	rmdir(empty);
	rmdir(tmp);
	SSL_CTX_free(sc);
	ab_ca_free(other);
	ab_ca_free(ca);
}

/* The subject of a certificate from its DER alone: equal to OpenSSL's for
 * real certificates; NULL, never a read past the end, for every prefix and
 * for bytes that are not a certificate. */
static void test_der_subject(void **state)
{
	ab_ca *ca = new_ca(nc_basic);
	SSL_CTX *sc;
	X509 *certs[] = {ab_ca_get0_cert(ca), ab_ca_get0_issuer(ca),
			 leaf_of(ca, "b.example.com", &sc)};

	for (size_t i = 0; i < AB_ARRAY_SIZE(certs); i++) {
		unsigned char *der = NULL;
		int n = i2d_X509(certs[i], &der);
		assert_true(n > 0);
		X509_NAME *name = ab_cert_der_subject(der, n);
		assert_non_null(name);
		assert_int_equal(X509_NAME_cmp(name, X509_get_subject_name(certs[i])), 0);
		X509_NAME_free(name);
		for (int k = 0; k < n; k++) { /* every truncation, on the heap (ASan) */
			unsigned char *cut = malloc(k ? (size_t)k : 1);
			memcpy(cut, der, (size_t)k);
			X509_NAME *m = ab_cert_der_subject(cut, k);
			X509_NAME_free(m);
			free(cut);
		}
		der[0] = 0x31; /* a SET, not a certificate */
		assert_null(ab_cert_der_subject(der, n));
		OPENSSL_free(der);
	}
	static const unsigned char junk[] = {0x30, 0x84, 0xff, 0xff, 0xff, 0xff, 0x30, 0x00};
	assert_null(ab_cert_der_subject(junk, sizeof(junk)));
	assert_null(ab_cert_der_subject(junk, 0));
	SSL_CTX_free(sc);
	ab_ca_free(ca);
}

/* ------------------------------------------------ tests: trust bundle */

static int count_certs(const char *pem, X509 **last)
{
	BIO *b = BIO_new_mem_buf(pem, -1);
	X509 *x;
	int n = 0;

	*last = NULL;
	while ((x = PEM_read_bio_X509(b, NULL, NULL, NULL)) != NULL) {
		X509_free(*last);
		*last = x;
		n++;
	}
	ERR_clear_error();
	BIO_free(b);
	return n;
}

/* An empty memfd for the bundle, as the broker makes it. */
static int bundle_fd(void)
{
	int fd = memfd_create("test-bundle", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	assert_true(fd >= 0);
	return fd;
}

/* The bundle's memfd: its bytes (malloc'd, NUL-terminated), checked to be
 * LEN long and sealed against writes and resizing. */
static char *bundle_text(int fd, size_t len)
{
	char *out = malloc(len + 1);
	assert_non_null(out);
	assert_int_equal(pread(fd, out, len + 1, 0), (ssize_t)len);
	out[len] = '\0';
	int seals = fcntl(fd, F_GET_SEALS);
	assert_int_equal(seals & (F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL),
			 F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL);
	assert_true(write(fd, "x", 1) < 0);
	assert_true(fcntl(fd, F_GETFD) & FD_CLOEXEC);
	close(fd);
	return out;
}

static void test_trust_bundle(void **state)
{
	ab_ca *ca = new_ca(nc_basic);
	ab_err err = {0};
	char *out = NULL, *pem = NULL, path[64];
	size_t len = 0;
	int bfd = -1;
	X509 *last;

	assert_int_equal(ab_ca_cert_pem(ca, &pem, &err), 0);
	/* explicit bundle without a final newline: one is added */
	int fd = memfd_with("SYSTEM ROOTS");
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	bfd = bundle_fd();
	assert_int_equal(ab_ca_trust_bundle(ca, path, bfd, &len, &err), 0);
	out = bundle_text(bfd, len);
	assert_int_equal(len, 13 + strlen(pem));
	assert_memory_equal(out, "SYSTEM ROOTS\n", 13);
	assert_string_equal(out + 13, pem);
	free(out);
	close(fd);
	/* with its final newline: none added */
	fd = memfd_with("SYSTEM ROOTS\n");
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	bfd = bundle_fd();
	assert_int_equal(ab_ca_trust_bundle(ca, path, bfd, &len, &err), 0);
	out = bundle_text(bfd, len);
	assert_int_equal(len, 13 + strlen(pem));
	assert_string_equal(out + 13, pem);
	free(out);
	close(fd);
	/* empty explicit bundle: the CA alone */
	fd = memfd_with("");
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	bfd = bundle_fd();
	assert_int_equal(ab_ca_trust_bundle(ca, path, bfd, &len, &err), 0);
	out = bundle_text(bfd, len);
	assert_string_equal(out, pem);
	free(out);
	close(fd);
	/* auto-detected system bundle (Debian: ca-certificates.crt), byte for
	 * byte the file followed by the CA */
	bfd = bundle_fd();
	int r = ab_ca_trust_bundle(ca, NULL, bfd, &len, &err);
	assert_true(r == 0 || r == 1);
	out = bundle_text(bfd, len);
	int n = count_certs(out, &last);
	assert_non_null(last);
	assert_int_equal(X509_cmp(last, ab_ca_get0_cert(ca)), 0);
	X509_free(last);
	if (r == 0) {
		assert_true(n > 1);
		FILE *f = fopen("/etc/ssl/certs/ca-certificates.crt", "r");
		if (f) {
			char *sys = malloc(len + 1);
			assert_non_null(sys);
			size_t got = fread(sys, 1, len + 1, f);
			fclose(f);
			assert_true(got < len);
			assert_memory_equal(out, sys, got);
			free(sys);
		}
	}
	printf("[ info ] trust bundle: %d certificates, %zu bytes%s\n", n, len,
	       r == 1 ? " (no system bundle found)" : "");
	free(out);
	/* explicit paths that cannot be used */
	bfd = bundle_fd();
	len = 7;
	assert_int_equal(ab_ca_trust_bundle(ca, "/nonexistent/ca.crt", bfd, &len, &err), -ENOENT);
	assert_int_equal(len, 0);
	assert_int_equal(ab_ca_trust_bundle(ca, "/", bfd, &len, &err), -EINVAL);
	/* a memfd with bytes already in it is refused, not appended to */
	assert_int_equal(write(bfd, "x", 1), 1);
	assert_int_equal(ab_ca_trust_bundle(ca, NULL, bfd, &len, &err), -EINVAL);
	close(bfd);
	free(pem);
	ab_ca_free(ca);
}

/* ------------------------------------------------ timings (printed) */

static void test_timings(void **state)
{
	enum { N = 50 };
	double t_new[N], t_leaf[N], t_hit[N], t_hs[N];
	ab_ca *ca;
	char h[64];
	SSL_CTX *c;

	for (int i = 0; i < N; i++) {
		double t0 = now_ms();
		ca = new_ca(nc_basic);
		t_new[i] = now_ms() - t0;
		ab_ca_free(ca);
	}
	ca = new_ca(NULL);
	SSL_CTX *cc = client_for(ca);
	for (int i = 0; i < N; i++) {
		snprintf(h, sizeof(h), "h%d.bench.test", i);
		double t0 = now_ms();
		leaf_of(ca, h, &c);
		t_leaf[i] = now_ms() - t0;
		SSL_CTX_free(c);
		t0 = now_ms();
		leaf_of(ca, h, &c);
		t_hit[i] = now_ms() - t0;
		t0 = now_ms();
		assert_int_equal(hs_run(cc, c, h, NULL, 0, 0, NULL).who, 0);
		t_hs[i] = now_ms() - t0;
		SSL_CTX_free(c);
	}
	printf("[ info ] ab_ca_new: median %.3f ms; leaf mint + server SSL_CTX (miss): median "
	       "%.3f ms; cache hit: median %.4f ms; in-memory handshake + ping (both sides): "
	       "median %.3f ms  (n=%d each)\n",
	       median(t_new, N), median(t_leaf, N), median(t_hit, N), median(t_hs, N), N);
	SSL_CTX_free(cc);
	ab_ca_free(ca);
}

/* ------------------------------------------------ key wiping */

static void scalar_patterns(EVP_PKEY *k, unsigned char be[32], unsigned char le[32])
{
	BIGNUM *bn = NULL;

	assert_int_equal(EVP_PKEY_get_bn_param(k, OSSL_PKEY_PARAM_PRIV_KEY, &bn), 1);
	assert_int_equal(BN_bn2binpad(bn, be, 32), 32);
	assert_int_equal(BN_bn2lebinpad(bn, le, 32), 32);
	BN_clear_free(bn);
}

static void test_key_wipe(void **state)
{
	if (!hooks_on) {
		printf("[ info ] key wipe: CRYPTO_set_mem_functions unavailable, skipped\n");
		skip();
	}
	ab_ca *ca = new_ca(nc_basic);
	SSL_CTX *sc, *sc2, *cc = client_for(ca);

	leaf_of(ca, "a.example.com", &sc);
	scalar_patterns(ab_ca_get0_key(ca), pats[0], pats[1]);
	scalar_patterns(SSL_CTX_get0_privatekey(sc), pats[2], pats[3]);
	freed_hits = 0;
	npats = 4;
	/* the scanner finds the live keys (as BIGNUM limbs), and a copy freed
	 * without cleansing */
	size_t before = live_hits();
	assert_true(before >= 2);
	unsigned char *probe = OPENSSL_malloc(64);
	assert_non_null(probe);
	memcpy(probe + 7, pats[1], 32);
	OPENSSL_free(probe);
	assert_int_equal(freed_hits, 1);
	freed_hits = 0;
	/* use both keys: mint more leaves, handshake (the leaf key signs) */
	leaf_of(ca, "b.example.com", &sc2);
	assert_int_equal(hs_run(cc, sc, "a.example.com", NULL, 0, 0, NULL).who, 0);
	assert_int_equal(hs_run(cc, sc2, "b.example.com", NULL, 0, 0, NULL).who, 0);
	SSL_CTX_free(cc);
	/* the CA goes; the leaf key lives on while a context holds it */
	ab_ca_free(ca);
	assert_true(live_hits() >= 1);
	SSL_CTX_free(sc);
	SSL_CTX_free(sc2);
	size_t after = live_hits();
	printf("[ info ] key wipe: live blocks holding a private scalar: %zu before, %zu after "
	       "free; freed blocks still holding one: %zu\n",
	       before, after, freed_hits);
	assert_int_equal(after, 0);
	assert_int_equal(freed_hits, 0);
	npats = 0;
	OPENSSL_cleanse(pats, sizeof(pats));
}

/* The root key never outlives ab_ca_new(), and was cleansed: its scalar is
 * unknown here, so every 32-byte window of the heap that could be a P-256
 * scalar (little-endian limbs at 8-byte alignment, big-endian at any offset;
 * random-looking: >= 28 non-zero bytes, >= 4 bytes >= 0x80) is multiplied by
 * the generator and compared with the root's public key, over the blocks
 * freed during ab_ca_new() and every block alive after it.  The issuing key,
 * alive, must be found by the same scan (control). */
typedef struct keyscan {
	EC_GROUP *grp;
	EC_POINT *pt;
	BIGNUM *bn;
	unsigned char want[2][65]; /* uncompressed public keys: root, issuing */
	size_t candidates, found[2];
} keyscan;

static bool plausible(const unsigned char *w)
{
	int nz = 0, hi = 0;

	for (int i = 0; i < 32; i++) {
		nz += w[i] != 0;
		hi += w[i] >= 0x80;
	}
	return nz >= 28 && hi >= 4;
}

static void try_scalar(keyscan *ks, const unsigned char *w, bool le)
{
	unsigned char pub[65];

	if (!plausible(w))
		return;
	ks->candidates++;
	assert_non_null(le ? BN_lebin2bn(w, 32, ks->bn) : BN_bin2bn(w, 32, ks->bn));
	if (BN_cmp(ks->bn, EC_GROUP_get0_order(ks->grp)) >= 0)
		return;
	assert_int_equal(EC_POINT_mul(ks->grp, ks->pt, ks->bn, NULL, NULL, NULL), 1);
	assert_int_equal(EC_POINT_point2oct(ks->grp, ks->pt, POINT_CONVERSION_UNCOMPRESSED, pub,
					    sizeof(pub), NULL),
			 65);
	for (int k = 0; k < 2; k++)
		ks->found[k] += memcmp(pub, ks->want[k], 65) == 0;
}

static void scan_region(keyscan *ks, const unsigned char *p, size_t n)
{
	VALGRIND_MAKE_MEM_DEFINED(p, n);
	for (size_t off = 0; off + 32 <= n; off++) {
		try_scalar(ks, p + off, false);
		if (off % 8 == 0)
			try_scalar(ks, p + off, true);
	}
}

static void test_root_key_gone(void **state)
{
	if (!hooks_on)
		skip();
	keyscan ks = {0};
	size_t len = 0;
	ab_ca *ca;

	grave_len = 0;
	grave_on = true;
	ca = new_ca(nc_basic);
	grave_on = false;
	/* the certificate's key is in the built-in form (ca.c public_copy), whose
	 * PUB_KEY parameter OpenSSL 3.0 gives compressed: take the encoding */
	unsigned char *enc = NULL;
	len = EVP_PKEY_get1_encoded_public_key(X509_get0_pubkey(ab_ca_get0_cert(ca)), &enc);
	assert_int_equal(len, 65);
	memcpy(ks.want[0], enc, 65);
	OPENSSL_free(enc);
	assert_int_equal(EVP_PKEY_get_octet_string_param(
				 ab_ca_get0_key(ca), OSSL_PKEY_PARAM_PUB_KEY, ks.want[1], 65, &len),
			 1);
	ks.grp = EC_GROUP_new_by_curve_name(NID_X9_62_prime256v1);
	ks.pt = EC_POINT_new(ks.grp);
	ks.bn = BN_new();
	assert_non_null(ks.bn);
	scan_region(&ks, grave, grave_len);
	size_t freed_found = ks.found[0];
	/* live blocks: snapshot the list first (the scan allocates) */
	size_t nblocks = 0, i = 0;
	for (struct mh *h = mh_get(live.next); h != &live; h = mh_get(h->next))
		nblocks++;
	struct mh **blocks = calloc(nblocks, sizeof(*blocks));
	assert_non_null(blocks);
	for (struct mh *h = mh_get(live.next); h != &live && i < nblocks; h = mh_get(h->next))
		blocks[i++] = h;
	size_t live_bytes = 0;
	for (i = 0; i < nblocks; i++) {
		scan_region(&ks, (const unsigned char *)(blocks[i] + 1), blocks[i]->size);
		live_bytes += blocks[i]->size;
	}
	printf("[ info ] root key: scanned %zu bytes freed during ab_ca_new and %zu live bytes "
	       "(%zu candidate scalars): root scalar found %zu times (freed %zu), issuing "
	       "scalar found %zu times (control)\n",
	       grave_len, live_bytes, ks.candidates, ks.found[0], freed_found, ks.found[1]);
	assert_int_equal(ks.found[0], 0);
	assert_true(ks.found[1] >= 1);
	free(blocks);
	BN_free(ks.bn);
	EC_POINT_free(ks.pt);
	EC_GROUP_free(ks.grp);
	free(grave);
	grave = NULL;
	grave_len = grave_cap = 0;
	ab_ca_free(ca);
}

int main(void)
{
	/* before any OpenSSL allocation */
	hooks_on = CRYPTO_set_mem_functions(t_malloc, t_realloc, t_free) == 1;
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ca_cert),
		cmocka_unit_test(test_ca_pem),
		cmocka_unit_test(test_ca_new_bad),
		cmocka_unit_test(test_nc_encoding),
		cmocka_unit_test(test_leaves_chain),
		cmocka_unit_test(test_cache_hit),
		cmocka_unit_test(test_cache_lru),
		cmocka_unit_test(test_server_ctx_refuse),
		cmocka_unit_test(test_nc_verify),
		cmocka_unit_test(test_nc_thief_subca),
		cmocka_unit_test(test_handshake),
		cmocka_unit_test(test_client_ctx),
		cmocka_unit_test(test_client_setup),
		cmocka_unit_test(test_client_setup_ip_match),
		cmocka_unit_test(test_trust_bundle),
		cmocka_unit_test(test_timings),
		cmocka_unit_test(test_key_wipe),
		cmocka_unit_test(test_root_key_gone),
		cmocka_unit_test(test_system_trust_by_need),
		cmocka_unit_test(test_der_subject),
	};
	return cmocka_run_group_tests_name("ca", tests, NULL, NULL);
}
