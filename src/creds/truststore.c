/* SPDX-License-Identifier: MIT */
/*
 * The trust files the sandbox gets for the session CA (parent, credential
 * brokering): the PEM bundle (the system's roots and the session root) and
 * the Java truststore (PKCS#12) made from it.  Public material only: no key
 * is read or written here.  See ca.h for what each holds.
 */
#include "agentbox/ca.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/pkcs12.h>

/* ------------------------------------------------------------ trust bundle */

static int read_bundle(const char *path, char **buf, size_t *len, ab_err *err)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	struct stat st;
	size_t got = 0;

	if (fd < 0)
		return ab_fail(err, errno, "system CA bundle %s", path);
	if (fstat(fd, &st) < 0)
		return ab_fail(err, errno, "system CA bundle %s", path);
	if (!S_ISREG(st.st_mode))
		return ab_fail(err, EINVAL, "system CA bundle %s: not a regular file", path);
	if ((uintmax_t)st.st_size > AB_CA_MAX_BUNDLE)
		return ab_fail(err, EFBIG, "system CA bundle %s: larger than %u bytes", path,
			       AB_CA_MAX_BUNDLE);
	*buf = malloc((size_t)st.st_size + 1);
	if (!*buf)
		return ab_fail(err, ENOMEM, "system CA bundle %s", path);
	while (got < (size_t)st.st_size) {
		ssize_t n = read(fd, *buf + got, (size_t)st.st_size - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) { /* error, or the file shrank: take what we have */
			if (n < 0) {
				free(*buf);
				*buf = NULL;
				return ab_fail(err, errno, "reading system CA bundle %s", path);
			}
			break;
		}
		got += (size_t)n;
	}
	*len = got;
	return 0;
}

int ab_ca_trust_bundle(const ab_ca *ca, const char *system_bundle, char **out, size_t *len,
		       ab_err *err)
{
	static const char *const defaults[] = {
		"/etc/ssl/certs/ca-certificates.crt",
		"/etc/pki/tls/certs/ca-bundle.crt",
		"/etc/ssl/cert.pem",
	};
	_cleanup_free_ char *sys = NULL, *pem = NULL;
	size_t sys_len = 0, pem_len;
	const char *path = system_bundle;
	int r;

	*out = NULL;
	*len = 0;
	for (size_t i = 0; !path && i < AB_ARRAY_SIZE(defaults); i++)
		if (access(defaults[i], R_OK) == 0)
			path = defaults[i];
	if (path && (r = read_bundle(path, &sys, &sys_len, err)) < 0)
		return r;
	if ((r = ab_ca_cert_pem(ca, &pem, err)) < 0)
		return r;
	pem_len = strlen(pem);
	bool nl = sys_len > 0 && sys[sys_len - 1] != '\n';
	*out = malloc(sys_len + nl + pem_len + 1);
	if (!*out)
		return ab_fail(err, ENOMEM, "trust bundle");
	if (sys_len)
		memcpy(*out, sys, sys_len);
	if (nl)
		(*out)[sys_len] = '\n';
	memcpy(*out + sys_len + nl, pem, pem_len + 1);
	*len = sys_len + nl + pem_len;
	return path ? 0 : 1;
}

/* ------------------------------------------------------------ Java truststore */

/* Java's PKCS12 keystore takes a certificate bag as a trusted entry only
 * when it carries Oracle's trusted-key-usage attribute (a SET OF the OIDs
 * the certificate is trusted for); OpenSSL 3.0 has no name for it. */
#define JDK_TRUSTED_KEY_USAGE "2.16.840.1.113894.746875.1.1"

/* A certBag for the certificate DER der[0..len) (an X.509 certificate: one
 * DER SEQUENCE, copied as it is), trusted for Java under alias. */
static bool trusted_bag(STACK_OF(PKCS12_SAFEBAG) * bags, const unsigned char *der, long len,
			const char *alias)
{
	const unsigned char *p = der;
	ASN1_TYPE *cert = d2i_ASN1_TYPE(NULL, &p, len);
	const ASN1_OBJECT *any = OBJ_nid2obj(NID_anyExtendedKeyUsage); /* 2.5.29.37.0 */
	PKCS12_SAFEBAG *bag = NULL;
	bool ok = false;

	if (cert && p == der + len && ASN1_TYPE_get(cert) == V_ASN1_SEQUENCE)
		bag = PKCS12_item_pack_safebag(cert, ASN1_ITEM_rptr(ASN1_ANY), NID_x509Certificate,
					       NID_certBag);
	/* value length -1: the value is the ASN1_OBJECT itself */
	ok = bag && any && PKCS12_add_friendlyname_asc(bag, alias, -1) == 1 &&
	     PKCS12_add1_attr_by_txt(bag, JDK_TRUSTED_KEY_USAGE, V_ASN1_OBJECT,
				     (const unsigned char *)any, -1) == 1 &&
	     sk_PKCS12_SAFEBAG_push(bags, bag) > 0;
	if (!ok)
		PKCS12_SAFEBAG_free(bag);
	ASN1_TYPE_free(cert);
	return ok;
}

/* OpenSSL's own allocations and containers, freed on scope exit. */
static void ossl_freep(void *p)
{
	OPENSSL_free(*(void **)p);
}

static void bags_freep(STACK_OF(PKCS12_SAFEBAG) * *bags)
{
	sk_PKCS12_SAFEBAG_pop_free(*bags, PKCS12_SAFEBAG_free);
}

static void safes_freep(STACK_OF(PKCS7) * *safes)
{
	sk_PKCS7_pop_free(*safes, PKCS7_free);
}

static void p7_freep(PKCS7 **p7)
{
	PKCS7_free(*p7);
}

static void p12_freep(PKCS12 **p12)
{
	PKCS12_free(*p12);
}

/* The "CERTIFICATE" blocks of a PEM text as trusted bags (other blocks are
 * skipped, as PEM_read_bio_X509 skips them); the session CA's alias is
 * fixed, and it is added when the text lacks it.  The certificates are
 * copied as DER, not decoded: OpenSSL 3.0 decodes each public key through
 * its provider decoders, which costs more than the whole rest of the
 * truststore for a system bundle (docs/performance.md). */
static int trust_bags(const ab_ca *ca, const char *pem, size_t len, STACK_OF(PKCS12_SAFEBAG) * bags,
		      ab_err *err)
{
	_cleanup_(ossl_freep) unsigned char *ours = NULL;
	int ours_len = i2d_X509(ab_ca_get0_cert(ca), &ours);
	_cleanup_bio_ BIO *bio = len ? BIO_new_mem_buf(pem, (int)len) : NULL;
	size_t n = 0;
	bool have_ca = false;

	if (ours_len <= 0 || (len && !bio))
		return ab_ossl_fail(err, ENOMEM, "Java truststore");
	ERR_clear_error();
	for (;;) {
		_cleanup_(ossl_freep) char *name = NULL, *header = NULL;
		_cleanup_(ossl_freep) unsigned char *der = NULL;
		char alias[32];
		long dlen = 0;
		int r = 0;
		if (!bio || !PEM_read_bio(bio, &name, &header, &der, &dlen))
			break;
		bool cert =
			strcmp(name, "CERTIFICATE") == 0 || strcmp(name, "X509 CERTIFICATE") == 0;
		bool is_ca = cert && !have_ca && dlen == ours_len &&
			     memcmp(der, ours, (size_t)dlen) == 0;
		if (cert && n >= AB_CA_MAX_TRUST_CERTS)
			r = ab_fail(err, E2BIG,
				    "Java truststore: more than %d certificates in the "
				    "bundle",
				    AB_CA_MAX_TRUST_CERTS);
		else if (cert && header[0])
			r = ab_fail(err, EINVAL,
				    "Java truststore: certificate %zu of the CA bundle "
				    "has PEM headers",
				    n + 1);
		snprintf(alias, sizeof(alias), is_ca ? "agentbox-session-ca" : "system-%zu", n);
		if (!r && cert && !trusted_bag(bags, der, dlen, alias))
			r = ab_fail(err, EINVAL,
				    "Java truststore: certificate %zu of the CA bundle "
				    "is not DER",
				    n + 1);
		have_ca |= is_ca;
		n += cert;
		if (r < 0) {
			ERR_clear_error();
			return r;
		}
	}
	/* the end of the text, or a block that does not decode */
	unsigned long e = ERR_peek_last_error();
	if (bio && !(ERR_GET_LIB(e) == ERR_LIB_PEM && ERR_GET_REASON(e) == PEM_R_NO_START_LINE))
		return ab_ossl_fail(err, EINVAL,
				    "Java truststore: the CA bundle has a PEM block that "
				    "does not decode");
	ERR_clear_error();
	if (!have_ca && !trusted_bag(bags, ours, ours_len, "agentbox-session-ca"))
		return ab_ossl_fail(err, ENOMEM, "Java truststore");
	return 0;
}

int ab_ca_java_truststore(const ab_ca *ca, const char *bundle, size_t len, const char *password,
			  unsigned char **out, size_t *outlen, ab_err *err)
{
	_cleanup_(bags_freep) STACK_OF(PKCS12_SAFEBAG) *bags = sk_PKCS12_SAFEBAG_new_null();
	_cleanup_(safes_freep) STACK_OF(PKCS7) *safes = sk_PKCS7_new_null();
	_cleanup_(p7_freep) PKCS7 *p7 = NULL;
	_cleanup_(p12_freep) PKCS12 *p12 = NULL;
	_cleanup_free_ unsigned char *der = NULL;
	unsigned char *p;
	int r, n;

	*out = NULL;
	*outlen = 0;
	if (len > AB_CA_MAX_BUNDLE)
		return ab_fail(err, EFBIG, "Java truststore: a bundle larger than %u bytes",
			       AB_CA_MAX_BUNDLE);
	if (!bags || !safes)
		return ab_ossl_fail(err, ENOMEM, "Java truststore");
	if ((r = trust_bags(ca, bundle, len, bags, err)) < 0)
		return r;
	/* one unencrypted SafeContents (nothing in it is secret), under an
	 * HMAC-SHA256 integrity MAC */
	p7 = PKCS12_pack_p7data(bags);
	if (!p7 || !sk_PKCS7_push(safes, p7))
		return ab_ossl_fail(err, ENOMEM, "Java truststore");
	p7 = NULL; /* safes owns it */
	p12 = PKCS12_add_safes(safes, NID_pkcs7_data);
	if (!p12 ||
	    PKCS12_set_mac(p12, password, -1, NULL, 0, PKCS12_DEFAULT_ITER, EVP_sha256()) != 1 ||
	    (n = i2d_PKCS12(p12, NULL)) <= 0)
		return ab_ossl_fail(err, EIO, "Java truststore: PKCS#12 encoding");
	p = der = malloc((size_t)n);
	if (!der)
		return ab_fail(err, ENOMEM, "Java truststore");
	if (i2d_PKCS12(p12, &p) != n)
		return ab_ossl_fail(err, EIO, "Java truststore: PKCS#12 encoding");
	*out = TAKE_PTR(der);
	*outlen = (size_t)n;
	return 0;
}
