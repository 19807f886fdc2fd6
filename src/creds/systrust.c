/* SPDX-License-Identifier: MIT */
/*
 * systrust.c (parent: the egress proxy's thread): the system trust store the
 * upstream leg of an intercepted connection is verified against, read by
 * need.  SSL_CTX_set_default_verify_paths() decodes every certificate of
 * the system bundle (about 150) into the store at once, which costs tens of
 * milliseconds with OpenSSL 3 (most of it decoding public keys) and fell on
 * the first intercepted connection of every sandbox.  Here the same two
 * sources are used, in the same order, but by need:
 *
 * 1. the bundle file (SSL_CERT_FILE, else OpenSSL's default): on the first
 *    lookup it is read and indexed by subject only (the PEM decoded, each
 *    certificate's subject Name found with ASN1_get_object and decoded on
 *    its own); a lookup decodes and adds only the certificates whose
 *    subject matches (X509_NAME_cmp, OpenSSL's own comparison);
 * 2. the hashed directory (SSL_CERT_DIR, else OpenSSL's default), for the
 *    subjects the file lacks, as OpenSSL's by_dir lookup always did.
 *
 * The trust anchors are the same set as before and are found the same way;
 * only when they are decoded changes.  Verification itself (SSL_VERIFY_PEER,
 * trusted-first chain building, the host check) is the caller's and
 * unchanged.  A bundle larger than AB_CA_MAX_BUNDLE, or with more than
 * AB_CA_MAX_TRUST_CERTS certificates, is not used past that point (fail
 * closed: fewer anchors, never more).
 */
#include "agentbox/ca.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/asn1.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>

typedef struct trust_ent {
	unsigned char *der; /* the certificate (with its aux trust, for aux) */
	long len;
	X509_NAME *subject;
	bool aux;   /* "TRUSTED CERTIFICATE": d2i_X509_AUX */
	bool added; /* in the store already */
} trust_ent;

typedef struct lazy_file {
	char *path;
	bool indexed; /* read (or failed to be: never again) */
	trust_ent *v;
	size_t n;
} lazy_file;

static const char *env_or(const char *env, const char *fallback)
{
	const char *v = secure_getenv(env);

	return v && *v ? v : fallback;
}

static void lazy_free(X509_LOOKUP *lu)
{
	lazy_file *f = X509_LOOKUP_get_method_data(lu);

	if (f) {
		for (size_t i = 0; i < f->n; i++) {
			OPENSSL_free(f->v[i].der);
			X509_NAME_free(f->v[i].subject);
		}
		free(f->v);
		free(f->path);
	}
	free(f);
	(void)X509_LOOKUP_set_method_data(lu, NULL);
}

/* The subject Name of a DER certificate, decoded alone: Certificate ::=
 * SEQUENCE { tbsCertificate SEQUENCE { [0] version OPTIONAL, serial,
 * signature, issuer, validity, subject, ... } ...}.  NULL if it is not
 * there. */
X509_NAME *ab_cert_der_subject(const unsigned char *der, long n)
{
	const unsigned char *p = der, *end = der + n, *at;
	long len = 0;
	int tag, cls;

	for (int depth = 0; depth < 2; depth++) { /* into Certificate, then TBS */
		if (ASN1_get_object(&p, &len, &tag, &cls, end - p) & 0x80 ||
		    tag != V_ASN1_SEQUENCE || cls != V_ASN1_UNIVERSAL)
			return NULL;
		end = p + len;
	}
	for (int field = 0; field < 6; field++) { /* version?, serial .. subject */
		at = p;
		if (ASN1_get_object(&p, &len, &tag, &cls, end - p) & 0x80)
			return NULL;
		if (field == 0 && !(cls == V_ASN1_CONTEXT_SPECIFIC && tag == 0))
			field++; /* no version: this was the serial */
		if (field == 5)
			break;
		p += len;
	}
	if (tag != V_ASN1_SEQUENCE || cls != V_ASN1_UNIVERSAL)
		return NULL;
	long whole = (long)(p - at) + len;
	return d2i_X509_NAME(NULL, &at, whole);
}

static bool cert_pem_name(const char *name, bool *aux)
{
	*aux = strcmp(name, PEM_STRING_X509_TRUSTED) == 0;
	return *aux || strcmp(name, PEM_STRING_X509) == 0 || strcmp(name, PEM_STRING_X509_OLD) == 0;
}

/* One PEM block into the index (taken); false when the index is full. */
static bool index_add(lazy_file *f, size_t *cap, char *name, unsigned char *der, long len)
{
	bool aux = false;
	X509_NAME *subject = cert_pem_name(name, &aux) ? ab_cert_der_subject(der, len) : NULL;

	OPENSSL_free(name);
	if (!subject) { /* not a certificate (a CRL, a key): not an anchor */
		OPENSSL_free(der);
		return true;
	}
	if (f->n == *cap) {
		size_t nc = *cap ? *cap * 2 : 256;
		trust_ent *v = nc <= AB_CA_MAX_TRUST_CERTS ? realloc(f->v, nc * sizeof(*v)) : NULL;
		if (!v) {
			X509_NAME_free(subject);
			OPENSSL_free(der);
			return false;
		}
		f->v = v;
		*cap = nc;
	}
	f->v[f->n++] = (trust_ent){.der = der, .len = len, .subject = subject, .aux = aux};
	return true;
}

/* The whole file in memory (a file BIO would read it a byte a syscall),
 * NULL if it is missing, not a regular file or too large. */
static char *slurp(const char *path, size_t *len)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	struct stat st;

	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) ||
	    (uintmax_t)st.st_size > AB_CA_MAX_BUNDLE)
		return NULL;
	char *buf = malloc((size_t)st.st_size + 1);
	size_t got = 0;
	while (buf && got < (size_t)st.st_size) {
		ssize_t n = read(fd, buf + got, (size_t)st.st_size - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break; /* an error, or the file shrank: what we have */
		got += (size_t)n;
	}
	*len = got;
	return buf;
}

static void index_bundle(lazy_file *f)
{
	size_t len = 0, cap = 0;
	_cleanup_free_ char *pem = slurp(f->path, &len);

	f->indexed = true;
	if (!pem || len > INT_MAX)
		return;
	_cleanup_bio_ BIO *bio = BIO_new_mem_buf(pem, (int)len);
	for (;;) {
		char *name = NULL, *header = NULL;
		unsigned char *der = NULL;
		long dlen = 0;
		if (!bio || !PEM_read_bio(bio, &name, &header, &der, &dlen))
			break;
		OPENSSL_free(header);
		if (!index_add(f, &cap, name, der, dlen))
			break;
	}
	ERR_clear_error(); /* the end of the PEM stream */
}

/* The bundle's certificates of that subject into the store, then the
 * subject from the store. */
static int lazy_by_subject(X509_LOOKUP *lu, X509_LOOKUP_TYPE type, const X509_NAME *name,
			   X509_OBJECT *ret)
{
	lazy_file *f = X509_LOOKUP_get_method_data(lu);
	X509_STORE *st = X509_LOOKUP_get_store(lu);
	int ok = 0;

	if (!f || !st || type != X509_LU_X509)
		return 0;
	if (!f->indexed)
		index_bundle(f);
	for (size_t i = 0; i < f->n; i++) {
		trust_ent *e = &f->v[i];
		if (e->added || X509_NAME_cmp(e->subject, name) != 0)
			continue;
		const unsigned char *p = e->der;
		_cleanup_x509_ X509 *x =
			e->aux ? d2i_X509_AUX(NULL, &p, e->len) : d2i_X509(NULL, &p, e->len);
		e->added = true;
		if (!x || !X509_STORE_add_cert(st, x))
			ERR_clear_error(); /* one that does not decode: not an anchor */
	}
	if (!X509_STORE_lock(st))
		return 0;
	X509_OBJECT *o = X509_OBJECT_retrieve_by_subject(X509_STORE_get0_objects(st), type,
							 (X509_NAME *)name);
	/* as OpenSSL's own lookups do: RET borrows the store's reference, and
	 * the caller (X509_STORE_CTX_get_by_subject) takes its own; a reference
	 * left in RET would never be dropped */
	X509 *found = o ? X509_OBJECT_get0_X509(o) : NULL;
	if (found && (ok = X509_OBJECT_set1_X509(ret, found)))
		X509_free(found);
	X509_STORE_unlock(st);
	return ok;
}

static X509_LOOKUP_METHOD *lazy_method(void)
{
	static X509_LOOKUP_METHOD *m; /* the proxy's thread only; lives until exit */

	if (!m) {
		m = X509_LOOKUP_meth_new("agentbox system bundle, loaded by need");
		if (m && (!X509_LOOKUP_meth_set_get_by_subject(m, lazy_by_subject) ||
			  !X509_LOOKUP_meth_set_free(m, lazy_free))) {
			X509_LOOKUP_meth_free(m);
			m = NULL;
		}
	}
	return m;
}

int ab_ca_system_trust(SSL_CTX *ctx, ab_err *err)
{
	X509_STORE *st = SSL_CTX_get_cert_store(ctx);
	X509_LOOKUP_METHOD *m = lazy_method();
	lazy_file *f = calloc(1, sizeof(*f));

	if (f)
		f->path = strdup(
			env_or(X509_get_default_cert_file_env(), X509_get_default_cert_file()));
	X509_LOOKUP *lu = st && m && f && f->path ? X509_STORE_add_lookup(st, m) : NULL;
	if (!lu || !X509_LOOKUP_set_method_data(lu, f)) {
		if (f)
			free(f->path);
		free(f);
		return ab_ossl_fail(err, ENOMEM, "TLS client context: system trust store");
	}
	X509_LOOKUP *dir = X509_STORE_add_lookup(st, X509_LOOKUP_hash_dir());
	if (!dir)
		return ab_ossl_fail(err, ENOMEM, "TLS client context: system trust store");
	/* a directory that does not exist is no error: the bundle answers */
	(void)X509_LOOKUP_add_dir(
		dir, env_or(X509_get_default_cert_dir_env(), X509_get_default_cert_dir()),
		X509_FILETYPE_PEM);
	ERR_clear_error();
	return 0;
}

void ab_ca_system_trust_warm(SSL_CTX *ctx)
{
	X509_STORE_CTX *sc = X509_STORE_CTX_new();
	X509_NAME *none = X509_NAME_new(); /* matches nothing: only the index is built */

	if (sc && none && X509_STORE_CTX_init(sc, SSL_CTX_get_cert_store(ctx), NULL, NULL) == 1)
		X509_OBJECT_free(X509_STORE_CTX_get_obj_by_subject(sc, X509_LU_X509, none));
	ERR_clear_error();
	X509_NAME_free(none);
	X509_STORE_CTX_free(sc);
}
