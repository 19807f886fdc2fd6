/* SPDX-License-Identifier: MIT */
/*
 * ca.c (parent: the egress proxy's thread): the per-session interception CA
 * made in memory at start, leaf certificates minted per host on demand and
 * cached as server SSL_CTXs, the client SSL_CTX for the upstream leg, and
 * OpenSSL's secure heap the keys live in (the trust files handed to the
 * sandbox are truststore.c's).  Nothing here writes a file; keys are never
 * serialised.  See ca.h for the certificate profiles and the name
 * constraint encoding.
 */
#include "agentbox/ca.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509v3.h>

#include "agentbox/netpolicy.h"

#define CA_NBUCKETS 2048 /* power of two, >= 2 * AB_CA_CACHE_MAX */
#define LEAF_CN_MAX 64   /* ub-common-name (RFC 5280) */
#define NONE (-1)

typedef struct leaf_slot {
	char host[AB_HOST_BUF];
	SSL_CTX *ctx;   /* NULL: slot free */
	int prev, next; /* LRU list (prev: more recent) */
	int hnext;      /* hash chain */
} leaf_slot;

typedef struct nc_entry {
	char name[AB_HOST_BUF]; /* normalised host, or the suffix of a wildcard */
	bool wildcard;
} nc_entry;

struct ab_ca {
	X509 *cert;         /* the root (trust anchor); its key is gone */
	X509 *issuer;       /* the issuing CA, signed by the root */
	EVP_PKEY *key;      /* the issuing CA's key: signs the leaves */
	EVP_PKEY *leaf_key; /* shared by every leaf */
	EVP_PKEY *leaf_pub; /* its public half, for the certificates */
	nc_entry *nc;       /* the constraint list, NULL: unconstrained */
	size_t n_nc;
	leaf_slot *leaves; /* AB_CA_CACHE_MAX slots */
	int buckets[CA_NBUCKETS];
	int lru_head, lru_tail; /* head: most recently used */
	size_t n_leaves;
};

/* ------------------------------------------------------------ errors */

/* What failed and OpenSSL's own word for it (ca.h). */
int ab_ossl_fail(ab_err *err, int errnum, const char *what)
{
	char buf[256] = "";
	unsigned long e = ERR_get_error();

	if (e != 0)
		ERR_error_string_n(e, buf, sizeof(buf));
	ERR_clear_error();
	return ab_fail_code(err, AB_EXIT_FAIL, errnum, "%s%s%s", what, buf[0] ? ": " : "", buf);
}

/* ------------------------------------------------------------ names */

static bool ends_with_label(const char *name, const char *suffix)
{
	size_t nl = strlen(name), sl = strlen(suffix);

	return nl > sl + 1 && name[nl - sl - 1] == '.' && strcmp(name + nl - sl, suffix) == 0;
}

/* name at or below base */
static bool at_or_below(const char *name, const char *base)
{
	return strcmp(name, base) == 0 || ends_with_label(name, base);
}

/* Is host (normalised) one of the names the constraint list allows? */
static bool nc_allows(const ab_ca *ca, const char *host)
{
	if (!ca->nc)
		return true;
	for (size_t i = 0; i < ca->n_nc; i++) {
		const nc_entry *e = &ca->nc[i];
		if (e->wildcard ? ends_with_label(host, e->name) : strcmp(host, e->name) == 0)
			return true;
	}
	return false;
}

static int parse_constraints(ab_ca *ca, const char *const *list, ab_err *err)
{
	size_t n = 0;

	while (list[n]) {
		if (++n > AB_CA_MAX_CONSTRAINTS)
			return ab_fail(err, E2BIG, "CA name constraints: more than %d entries",
				       AB_CA_MAX_CONSTRAINTS);
	}
	if (n == 0)
		return ab_fail(err, EINVAL, "CA name constraints: empty list (NULL means none)");
	ca->nc = calloc(n, sizeof(*ca->nc));
	if (!ca->nc)
		return ab_fail(err, ENOMEM, "CA name constraints");
	for (size_t i = 0; i < n; i++) {
		nc_entry *e = &ca->nc[ca->n_nc];
		const char *in = list[i];

		e->wildcard = strncmp(in, "*.", 2) == 0;
		int r = ab_host_normalize(e->wildcard ? in + 2 : in, e->name, sizeof(e->name));
		if (r != AB_HOST_NAME)
			return ab_fail(err, EINVAL, "CA name constraint '%.300s': %s", in,
				       r < 0 ? ab_host_strerror(r)
					     : "IP literals cannot be intercepted");
		bool dup = false;
		for (size_t j = 0; j < ca->n_nc; j++)
			dup |= ca->nc[j].wildcard == e->wildcard &&
			       strcmp(ca->nc[j].name, e->name) == 0;
		if (!dup)
			ca->n_nc++;
	}
	return 0;
}

/* ------------------------------------------------------------ building blocks */

static GENERAL_NAME *gn_dns(const char *s)
{
	GENERAL_NAME *gn = GENERAL_NAME_new();
	ASN1_IA5STRING *ia5 = ASN1_IA5STRING_new();

	if (!gn || !ia5 || !ASN1_STRING_set(ia5, s, (int)strlen(s))) {
		GENERAL_NAME_free(gn);
		ASN1_IA5STRING_free(ia5);
		return NULL;
	}
	GENERAL_NAME_set0_value(gn, GEN_DNS, ia5);
	return gn;
}

/* An iPAddress constraint matching every address of the family: all-zero
 * address and mask (8 or 32 bytes). */
static GENERAL_NAME *gn_ip_any(int len)
{
	static const unsigned char zero[32];
	GENERAL_NAME *gn = GENERAL_NAME_new();
	ASN1_OCTET_STRING *os = ASN1_OCTET_STRING_new();

	if (!gn || !os || !ASN1_OCTET_STRING_set(os, zero, len)) {
		GENERAL_NAME_free(gn);
		ASN1_OCTET_STRING_free(os);
		return NULL;
	}
	GENERAL_NAME_set0_value(gn, GEN_IPADD, os);
	return gn;
}

/* Push a subtree with base gn (taken, freed on failure) onto *sk. */
static bool push_subtree(STACK_OF(GENERAL_SUBTREE) * *sk, GENERAL_NAME *gn)
{
	GENERAL_SUBTREE *st;

	if (!gn)
		return false;
	if (!*sk && !(*sk = sk_GENERAL_SUBTREE_new_null()))
		goto fail;
	if (!(st = GENERAL_SUBTREE_new()))
		goto fail;
	GENERAL_NAME_free(st->base);
	st->base = gn;
	if (!sk_GENERAL_SUBTREE_push(*sk, st)) {
		GENERAL_SUBTREE_free(st);
		return false;
	}
	return true;
fail:
	GENERAL_NAME_free(gn);
	return false;
}

/* Exact entry e needs the exclusion ".e" unless another entry lies at or
 * below it, or a wildcard covers its subdomains (see ca.h). */
static bool exact_needs_exclusion(const ab_ca *ca, size_t k)
{
	const char *e = ca->nc[k].name;

	for (size_t i = 0; i < ca->n_nc; i++) {
		const nc_entry *o = &ca->nc[i];
		if (i == k)
			continue;
		if (at_or_below(o->name, e) || (o->wildcard && ends_with_label(e, o->name)))
			return false;
	}
	return true;
}

static bool covered_by_wildcard(const ab_ca *ca, const char *name)
{
	for (size_t i = 0; i < ca->n_nc; i++)
		if (ca->nc[i].wildcard && ends_with_label(name, ca->nc[i].name))
			return true;
	return false;
}

static bool build_subtrees(const ab_ca *ca, NAME_CONSTRAINTS *nc)
{
	char dot[AB_HOST_BUF + 1];

	for (size_t i = 0; i < ca->n_nc; i++) {
		const nc_entry *e = &ca->nc[i];
		snprintf(dot, sizeof(dot), ".%s", e->name);
		if (e->wildcard) {
			if (!push_subtree(&nc->permittedSubtrees, gn_dns(dot)))
				return false;
			continue;
		}
		if (covered_by_wildcard(ca, e->name))
			continue;
		if (!push_subtree(&nc->permittedSubtrees, gn_dns(e->name)))
			return false;
		if (exact_needs_exclusion(ca, i) &&
		    !push_subtree(&nc->excludedSubtrees, gn_dns(dot)))
			return false;
	}
	return push_subtree(&nc->excludedSubtrees, gn_ip_any(8)) &&
	       push_subtree(&nc->excludedSubtrees, gn_ip_any(32));
}

static bool add_name_constraints(const ab_ca *ca, X509 *x)
{
	NAME_CONSTRAINTS *nc = NAME_CONSTRAINTS_new();
	bool ok = nc && build_subtrees(ca, nc) &&
		  X509_add1_ext_i2d(x, NID_name_constraints, nc, 1, X509V3_ADD_DEFAULT) == 1;

	NAME_CONSTRAINTS_free(nc);
	return ok;
}

/* An extension from OpenSSL's text form (fixed strings only). */
static bool add_ext(X509 *x, X509 *issuer, int nid, const char *value)
{
	X509V3_CTX v3;
	X509_EXTENSION *ext;
	bool ok;

	X509V3_set_ctx(&v3, issuer, x, NULL, NULL, 0);
	ext = X509V3_EXT_nconf_nid(NULL, &v3, nid, value);
	if (!ext)
		return false;
	ok = X509_add_ext(x, ext, -1) == 1;
	X509_EXTENSION_free(ext);
	return ok;
}

static bool add_san(X509 *x, const char *host, bool critical)
{
	GENERAL_NAMES *gens = sk_GENERAL_NAME_new_null();
	GENERAL_NAME *gn = gn_dns(host);
	bool ok = false;

	if (gens && gn && sk_GENERAL_NAME_push(gens, gn)) {
		gn = NULL;
		ok = X509_add1_ext_i2d(x, NID_subject_alt_name, gens, critical,
				       X509V3_ADD_DEFAULT) == 1;
	}
	GENERAL_NAME_free(gn);
	GENERAL_NAMES_free(gens);
	return ok;
}

/* 16 random bytes, positive (top bit clear), never short (first byte != 0). */
static bool set_random_serial(X509 *x)
{
	unsigned char b[16];
	BIGNUM *bn = NULL;
	bool ok = false;

	if (RAND_bytes(b, sizeof(b)) != 1)
		return false;
	b[0] = (unsigned char)((b[0] & 0x7f) | 0x01);
	bn = BN_bin2bn(b, sizeof(b), NULL);
	if (bn)
		ok = BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(x)) != NULL;
	BN_free(bn);
	return ok;
}

static bool name_add(X509_NAME *n, const char *field, const char *value)
{
	return X509_NAME_add_entry_by_txt(n, field, MBSTRING_UTF8, (const unsigned char *)value, -1,
					  -1, 0) == 1;
}

/* ------------------------------------------------------------ the CA */

/* A public-only copy of k.  Certificates get these: X509_set_pubkey() keeps
 * a reference to the EVP_PKEY it is given (OpenSSL 3.0 x_pubkey.c), which
 * would keep a private key alive as long as the certificate.
 *
 * The copy is in OpenSSL's built-in (non-provider) form: d2i_PublicKey
 * sets the point on a key that has only the group, and gives such a key.
 * X509_set_pubkey encodes a built-in key directly; a provider key it
 * encodes with an OSSL_ENCODER and decodes back with an OSSL_DECODER, and
 * in OpenSSL 3.0 their first set-up in a process walks every encoder and
 * decoder: most of the session CA's cost at start and a quarter of each
 * leaf's (docs/performance.md).  Signing, verifying and TLS take either
 * form. */
static EVP_PKEY *public_copy(EVP_PKEY *k)
{
	unsigned char pub[65]; /* uncompressed P-256 point */
	size_t len = 0;
	EVP_PKEY_CTX *pctx;
	EVP_PKEY *out = NULL;
	OSSL_PARAM params[2];

	if (!k || EVP_PKEY_get_octet_string_param(k, OSSL_PKEY_PARAM_PUB_KEY, pub, sizeof(pub),
						  &len) != 1)
		return NULL;
	params[0] =
		OSSL_PARAM_construct_utf8_string(OSSL_PKEY_PARAM_GROUP_NAME, (char *)"P-256", 0);
	params[1] = OSSL_PARAM_construct_end();
	pctx = EVP_PKEY_CTX_new_from_name(NULL, "EC", NULL);
	if (pctx && EVP_PKEY_fromdata_init(pctx) == 1)
		EVP_PKEY_fromdata(pctx, &out, EVP_PKEY_KEY_PARAMETERS, params);
	EVP_PKEY_CTX_free(pctx);
	const unsigned char *p = pub;
	if (out && !d2i_PublicKey(EVP_PKEY_EC, &out, &p, (long)len)) {
		EVP_PKEY_free(out);
		return NULL;
	}
	return out;
}

/* The root (issuer == NULL: self-signed by sign_key) or the issuing CA
 * (signed by sign_key, the root's key).  Both carry the name constraints.
 * subject_key: public only (see public_copy). */
static bool fill_ca_cert(const ab_ca *ca, X509 *x, X509 *issuer, EVP_PKEY *subject_key,
			 EVP_PKEY *sign_key, const char *cn, int days)
{
	bool root = issuer == NULL;
	X509_NAME *name = X509_get_subject_name(x);

	return X509_set_version(x, X509_VERSION_3) && set_random_serial(x) &&
	       name_add(name, "O", "agentbox") && name_add(name, "CN", cn) &&
	       X509_set_issuer_name(x, root ? name : X509_get_subject_name(issuer)) &&
	       X509_gmtime_adj(X509_getm_notBefore(x), -3600) &&
	       (root ? X509_time_adj_ex(X509_getm_notAfter(x), days, 0, NULL) != NULL
		     : X509_set1_notAfter(x, X509_get0_notAfter(issuer)) == 1) &&
	       X509_set_pubkey(x, subject_key) &&
	       add_ext(x, root ? x : issuer, NID_basic_constraints,
		       root ? "critical,CA:TRUE,pathlen:1" : "critical,CA:TRUE,pathlen:0") &&
	       add_ext(x, root ? x : issuer, NID_key_usage, "critical,keyCertSign,cRLSign") &&
	       add_ext(x, root ? x : issuer, NID_subject_key_identifier, "hash") &&
	       (root || add_ext(x, issuer, NID_authority_key_identifier, "keyid:always")) &&
	       (root || add_ext(x, issuer, NID_ext_key_usage, "serverAuth")) &&
	       (!ca->nc || add_name_constraints(ca, x)) && X509_sign(x, sign_key, EVP_sha256()) > 0;
}

/* Root and issuing CA; the root key is freed (cleansed) before returning. */
static int make_cas(ab_ca *ca, int days, ab_err *err)
{
	unsigned char id[4];
	char cn[80];
	/* root_key's is the last reference: cleansed and gone on return */
	_cleanup_evp_pkey_ EVP_PKEY *root_key = EVP_EC_gen("P-256");
	_cleanup_evp_pkey_ EVP_PKEY *root_pub = public_copy(root_key);
	_cleanup_evp_pkey_ EVP_PKEY *key_pub = NULL;
	bool ok;

	ca->key = EVP_EC_gen("P-256");
	ca->leaf_key = EVP_EC_gen("P-256");
	key_pub = public_copy(ca->key);
	ca->leaf_pub = public_copy(ca->leaf_key);
	if (!root_key || !root_pub || !key_pub || !ca->leaf_pub || RAND_bytes(id, sizeof(id)) != 1)
		return ab_ossl_fail(err, EIO, "session CA: P-256 key generation");
	ca->cert = X509_new();
	ca->issuer = X509_new();
	snprintf(cn, sizeof(cn), "agentbox session CA %02x%02x%02x%02x", id[0], id[1], id[2],
		 id[3]);
	ok = ca->cert && fill_ca_cert(ca, ca->cert, NULL, root_pub, root_key, cn, days);
	snprintf(cn, sizeof(cn), "agentbox session issuing CA %02x%02x%02x%02x", id[0], id[1],
		 id[2], id[3]);
	ok = ok && ca->issuer && fill_ca_cert(ca, ca->issuer, ca->cert, key_pub, root_key, cn, 0);
	if (!ok)
		return ab_ossl_fail(err, EIO, "session CA: certificate");
	return 0;
}

static void ca_freep(ab_ca **ca)
{
	ab_ca_free(*ca);
}

int ab_ca_new(const char *const *name_constraints, int days, ab_ca **out, ab_err *err)
{
	_cleanup_(ca_freep) ab_ca *ca = NULL;
	int r;

	*out = NULL;
	if (days < 1 || days > AB_CA_MAX_DAYS)
		return ab_fail(err, EINVAL, "CA validity: %d days (1..%d)", days, AB_CA_MAX_DAYS);
	ca = calloc(1, sizeof(*ca));
	if (!ca)
		return ab_fail(err, ENOMEM, "session CA");
	ca->lru_head = ca->lru_tail = NONE;
	for (size_t i = 0; i < CA_NBUCKETS; i++)
		ca->buckets[i] = NONE;
	if (name_constraints && (r = parse_constraints(ca, name_constraints, err)) < 0)
		return r;
	ca->leaves = calloc(AB_CA_CACHE_MAX, sizeof(*ca->leaves));
	if (!ca->leaves)
		return ab_fail(err, ENOMEM, "session CA: leaf cache");
	if ((r = make_cas(ca, days, err)) < 0)
		return r;
	*out = TAKE_PTR(ca);
	return 0;
}

int ab_ca_cert_pem(const ab_ca *ca, char **out, ab_err *err)
{
	_cleanup_bio_ BIO *bio = BIO_new(BIO_s_mem());
	char *data;
	long len;

	*out = NULL;
	if (!bio || !PEM_write_bio_X509(bio, ca->cert))
		return ab_ossl_fail(err, ENOMEM, "session CA: PEM");
	len = BIO_get_mem_data(bio, &data);
	*out = malloc((size_t)len + 1);
	if (!*out)
		return ab_fail(err, ENOMEM, "session CA: PEM");
	memcpy(*out, data, (size_t)len);
	(*out)[len] = '\0';
	return 0;
}

X509 *ab_ca_get0_cert(const ab_ca *ca)
{
	return ca->cert;
}

X509 *ab_ca_get0_issuer(const ab_ca *ca)
{
	return ca->issuer;
}

EVP_PKEY *ab_ca_get0_key(const ab_ca *ca)
{
	return ca->key;
}

size_t ab_ca_cache_size(const ab_ca *ca)
{
	return ca->n_leaves;
}

void ab_ca_free(ab_ca *ca)
{
	if (!ca)
		return;
	/* slots are taken in order (cache_slot): those past n_leaves were never
	 * touched, and reading them would fault in ~70 pages for nothing */
	if (ca->leaves)
		for (size_t i = 0; i < ca->n_leaves; i++)
			SSL_CTX_free(ca->leaves[i].ctx);
	free(ca->leaves);
	free(ca->nc);
	X509_free(ca->cert);
	X509_free(ca->issuer);
	EVP_PKEY_free(ca->leaf_key);
	EVP_PKEY_free(ca->leaf_pub);
	EVP_PKEY_free(ca->key);
	free(ca);
}

/* ------------------------------------------------------------ leaves */

static X509 *mint_leaf(const ab_ca *ca, const char *host)
{
	_cleanup_x509_ X509 *x = X509_new();
	bool long_name = strlen(host) > LEAF_CN_MAX;
	bool ok;

	if (!x)
		return NULL;
	ok = X509_set_version(x, X509_VERSION_3) && set_random_serial(x) &&
	     (long_name || name_add(X509_get_subject_name(x), "CN", host)) &&
	     X509_set_issuer_name(x, X509_get_subject_name(ca->issuer)) &&
	     X509_gmtime_adj(X509_getm_notBefore(x), -3600) &&
	     X509_set1_notAfter(x, X509_get0_notAfter(ca->issuer)) &&
	     X509_set_pubkey(x, ca->leaf_pub) &&
	     add_ext(x, ca->issuer, NID_basic_constraints, "CA:FALSE") &&
	     add_ext(x, ca->issuer, NID_key_usage, "critical,digitalSignature") &&
	     add_ext(x, ca->issuer, NID_ext_key_usage, "serverAuth") &&
	     add_ext(x, ca->issuer, NID_authority_key_identifier, "keyid:always") &&
	     add_san(x, host, long_name) && X509_sign(x, ca->key, EVP_sha256()) > 0;
	return ok ? TAKE_PTR(x) : NULL;
}

/* ALPN on the intercepted leg: http/1.1 or nothing (see ca.h). */
static int alpn_select(SSL *ssl, const unsigned char **out, unsigned char *outlen,
		       const unsigned char *in, unsigned int inlen, void *arg)
{
	unsigned int i = 0;

	while (i < inlen) {
		unsigned int n = in[i];
		if (n == 0 || n > inlen - i - 1)
			break;
		if (n == 8 && memcmp(in + i + 1, "http/1.1", 8) == 0) {
			*out = in + i + 1;
			*outlen = 8;
			return SSL_TLSEXT_ERR_OK;
		}
		i += 1 + n;
	}
	return SSL_TLSEXT_ERR_NOACK;
}

static SSL_CTX *server_ctx_new(const ab_ca *ca, const char *host, ab_err *err)
{
	_cleanup_ssl_ctx_ SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
	_cleanup_x509_ X509 *leaf = NULL;

	if (!ctx) {
		ab_ossl_fail(err, ENOMEM, "TLS server context");
		return NULL;
	}
	leaf = mint_leaf(ca, host);
	if (!leaf) {
		ab_ossl_fail(err, EIO, "minting the leaf certificate");
		return NULL;
	}
	if (!SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) ||
	    !SSL_CTX_use_certificate(ctx, leaf) || !SSL_CTX_add1_chain_cert(ctx, ca->issuer) ||
	    !SSL_CTX_use_PrivateKey(ctx, ca->leaf_key) || !SSL_CTX_check_private_key(ctx)) {
		ab_ossl_fail(err, EIO, "TLS server context");
		return NULL;
	}
	/* The leg to the sandbox's client: AEAD only, and AES-128-GCM first
	 * (the server's preference decides).  It is TLS 1.3's mandatory suite,
	 * 128-bit security on a loopback leg inside this host, and a quarter
	 * less work per byte than AES-256-GCM on the proxy's hottest path
	 * (docs/performance.md).  The upstream leg keeps what the upstream
	 * picks. */
	if (!SSL_CTX_set_ciphersuites(ctx, "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:"
					   "TLS_CHACHA20_POLY1305_SHA256") ||
	    !SSL_CTX_set_cipher_list(ctx, "ECDHE-ECDSA-AES128-GCM-SHA256:"
					  "ECDHE-ECDSA-AES256-GCM-SHA384:"
					  "ECDHE-ECDSA-CHACHA20-POLY1305")) {
		ab_ossl_fail(err, EIO, "TLS server context: cipher suites");
		return NULL;
	}
	SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION |
					 SSL_OP_CIPHER_SERVER_PREFERENCE);
	SSL_CTX_sess_set_cache_size(ctx, 256);
	SSL_CTX_set_alpn_select_cb(ctx, alpn_select, NULL);
	return TAKE_PTR(ctx);
}

static uint32_t host_hash(const char *s)
{
	uint32_t h = 2166136261u;

	while (*s)
		h = (h ^ (unsigned char)*s++) * 16777619u;
	return h & (CA_NBUCKETS - 1);
}

static void lru_unlink(ab_ca *ca, int i)
{
	leaf_slot *l = &ca->leaves[i];

	if (l->prev != NONE)
		ca->leaves[l->prev].next = l->next;
	else
		ca->lru_head = l->next;
	if (l->next != NONE)
		ca->leaves[l->next].prev = l->prev;
	else
		ca->lru_tail = l->prev;
	l->prev = l->next = NONE;
}

static void lru_push_front(ab_ca *ca, int i)
{
	leaf_slot *l = &ca->leaves[i];

	l->prev = NONE;
	l->next = ca->lru_head;
	if (ca->lru_head != NONE)
		ca->leaves[ca->lru_head].prev = i;
	ca->lru_head = i;
	if (ca->lru_tail == NONE)
		ca->lru_tail = i;
}

static int cache_find(const ab_ca *ca, const char *host)
{
	for (int i = ca->buckets[host_hash(host)]; i != NONE; i = ca->leaves[i].hnext)
		if (strcmp(ca->leaves[i].host, host) == 0)
			return i;
	return NONE;
}

/* A free slot: an unused one, else the least recently used, evicted. */
static int cache_slot(ab_ca *ca)
{
	int i;

	if (ca->n_leaves < AB_CA_CACHE_MAX)
		return (int)ca->n_leaves++;
	i = ca->lru_tail;
	lru_unlink(ca, i);
	for (int *p = &ca->buckets[host_hash(ca->leaves[i].host)]; *p != NONE;
	     p = &ca->leaves[*p].hnext) {
		if (*p == i) {
			*p = ca->leaves[i].hnext;
			break;
		}
	}
	SSL_CTX_free(ca->leaves[i].ctx);
	ca->leaves[i].ctx = NULL;
	return i;
}

int ab_ca_server_ctx(ab_ca *ca, const char *host, SSL_CTX **out, ab_err *err)
{
	char norm[AB_HOST_BUF];
	SSL_CTX *ctx;
	int i;

	*out = NULL;
	if (!host || ab_host_normalize(host, norm, sizeof(norm)) != AB_HOST_NAME ||
	    strcmp(norm, host) != 0)
		return ab_fail(err, EINVAL,
			       "TLS interception: '%.300s' is not a normalised host name",
			       host ? host : "(null)");
	if (!nc_allows(ca, host))
		return ab_fail(err, EPERM,
			       "TLS interception: %s is outside the session CA's name "
			       "constraints",
			       host);
	i = cache_find(ca, host);
	if (i != NONE) {
		lru_unlink(ca, i);
		lru_push_front(ca, i);
	} else {
		ctx = server_ctx_new(ca, host, err);
		if (!ctx)
			return ab_err_prefix(err, "TLS interception for %s", host);
		i = cache_slot(ca);
		leaf_slot *l = &ca->leaves[i];
		snprintf(l->host, sizeof(l->host), "%s", host);
		l->ctx = ctx;
		l->hnext = ca->buckets[host_hash(host)];
		ca->buckets[host_hash(host)] = i;
		lru_push_front(ca, i);
	}
	if (!SSL_CTX_up_ref(ca->leaves[i].ctx))
		return ab_ossl_fail(err, ENOMEM, "TLS server context reference");
	*out = ca->leaves[i].ctx;
	return 0;
}

/* ------------------------------------------------------------ upstream */

static SSL_CTX *client_ctx_base(ab_err *err)
{
	static const unsigned char alpn[] = "\x08http/1.1";
	_cleanup_ssl_ctx_ SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());

	if (!ctx) {
		ab_ossl_fail(err, ENOMEM, "TLS client context");
		return NULL;
	}
	if (!SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) ||
	    SSL_CTX_set_alpn_protos(ctx, alpn, sizeof(alpn) - 1) != 0) {
		ab_ossl_fail(err, EIO, "TLS client context");
		return NULL;
	}
	SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION);
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	X509_VERIFY_PARAM_set_hostflags(SSL_CTX_get0_param(ctx),
					X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
	return TAKE_PTR(ctx);
}

int ab_ca_client_ctx(const char *ca_file, SSL_CTX **out, ab_err *err)
{
	_cleanup_ssl_ctx_ SSL_CTX *ctx = NULL;

	*out = NULL;
	ctx = client_ctx_base(err);
	if (!ctx)
		return ab_err_ret(err);
	if (!ca_file) {
		if (ab_ca_system_trust(ctx, err) < 0)
			return ab_err_ret(err);
	} else if (SSL_CTX_load_verify_file(ctx, ca_file) != 1) {
		return ab_ossl_fail(err, EINVAL, "TLS client context: loading CA bundle");
	}
	*out = TAKE_PTR(ctx);
	return 0;
}

int ab_ca_client_ctx_mem(const char *pem, SSL_CTX **out, ab_err *err)
{
	_cleanup_ssl_ctx_ SSL_CTX *ctx = NULL;
	_cleanup_bio_ BIO *bio = NULL;
	int n = 0;

	*out = NULL;
	ctx = client_ctx_base(err);
	if (!ctx)
		return ab_err_ret(err);
	bio = BIO_new_mem_buf(pem, -1);
	if (!bio)
		return ab_ossl_fail(err, ENOMEM, "TLS client context");
	for (;;) {
		_cleanup_x509_ X509 *x = PEM_read_bio_X509(bio, NULL, NULL, NULL);
		if (!x)
			break;
		if (!X509_STORE_add_cert(SSL_CTX_get_cert_store(ctx), x))
			return ab_ossl_fail(err, EIO, "TLS client context: adding a CA");
		n++;
	}
	ERR_clear_error(); /* the end of the PEM stream */
	if (n == 0)
		return ab_fail(err, EINVAL, "TLS client context: no certificate in the PEM");
	*out = TAKE_PTR(ctx);
	return 0;
}

int ab_tls_client_setup(SSL *ssl, const char *host, ab_err *err)
{
	char norm[AB_HOST_BUF], ip[AB_HOST_BUF];
	int kind;
	bool ok;

	kind = host ? ab_host_normalize(host, norm, sizeof(norm)) : -EINVAL;
	if (kind < 0 || strcmp(norm, host) != 0)
		return ab_fail(err, EINVAL, "TLS upstream: '%.300s' is not a normalised host",
			       host ? host : "(null)");
	SSL_set_verify(ssl, SSL_VERIFY_PEER, NULL);
	SSL_set_hostflags(ssl, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
	if (kind == AB_HOST_NAME) {
		ok = SSL_set1_host(ssl, host) == 1 && SSL_set_tlsext_host_name(ssl, host) == 1;
	} else {
		size_t l = strlen(norm);
		if (kind == AB_HOST_IPV6) { /* "[v6]" */
			memcpy(ip, norm + 1, l - 2);
			ip[l - 2] = '\0';
		} else {
			memcpy(ip, norm, l + 1);
		}
		ok = X509_VERIFY_PARAM_set1_host(SSL_get0_param(ssl), NULL, 0) == 1 &&
		     X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), ip) == 1;
	}
	if (!ok)
		return ab_ossl_fail(err, EIO, "TLS upstream: setting the expected peer name");
	return 0;
}

/* ------------------------------------------------------------ secure heap */

void ab_ca_rand_init(void)
{
	if (RAND_set_DRBG_type(NULL, "HASH-DRBG", NULL, NULL, "SHA256") != 1)
		ERR_clear_error();
}

int ab_ca_secure_heap_init(void)
{
	if (CRYPTO_secure_malloc_initialized())
		return 1;
	switch (CRYPTO_secure_malloc_init(AB_CA_SECURE_HEAP, AB_CA_SECURE_HEAP_MIN)) {
	case 1: return 1;
	case 2: return 0; /* usable, not locked */
	default: return -ENOMEM;
	}
}
