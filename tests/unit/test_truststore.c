/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for ab_ca_java_truststore (src/creds/truststore.c): the PKCS#12 truststore
 * handed to Java inside the sandbox.  The store is decoded back with
 * OpenSSL's PKCS#12 API: one unencrypted SafeContents of certBags, each the
 * exact DER of a bundle certificate, with its alias (friendlyName) and
 * Oracle's trusted-key-usage attribute holding anyExtendedKeyUsage (what
 * Java 17 requires to take a bag as a trusted entry), under a SHA-256 MAC
 * keyed by the password; the session CA is added when the bundle lacks it.
 * Hostile bundles: undecodable base64, a block that is not a DER SEQUENCE,
 * trailing bytes, PEM headers, a truncated block, too many certificates, an
 * oversized length.  Java itself reads the store in
 * tests/integration/test_java.py.
 */
#include "unit.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/pkcs12.h>
#include <openssl/x509.h>

#include "agentbox/ca.h"
#include "agentbox/common.h"

#define PASS "changeit"
#define JDK_TRUST_OID "2.16.840.1.113894.746875.1.1"

static const char *const nc[] = {"api.test", NULL};

static ab_ca *new_ca(void)
{
	ab_err err = {0};
	ab_ca *ca = NULL;

	assert_int_equal(ab_ca_new(nc, 7, &ca, &err), 0);
	return ca;
}

static char *pem_of(X509 *x)
{
	BIO *b = BIO_new(BIO_s_mem());
	char *data;

	assert_non_null(b);
	assert_int_equal(PEM_write_bio_X509(b, x), 1);
	long n = BIO_get_mem_data(b, &data);
	char *out = malloc((size_t)n + 1);
	assert_non_null(out);
	memcpy(out, data, (size_t)n);
	out[n] = '\0';
	BIO_free(b);
	return out;
}

/* s1 + s2 + s3 (NULL: none), malloc'd */
static char *cat3(const char *s1, const char *s2, const char *s3)
{
	size_t a = strlen(s1), b = s2 ? strlen(s2) : 0, c = s3 ? strlen(s3) : 0;
	char *out = malloc(a + b + c + 1);

	assert_non_null(out);
	memcpy(out, s1, a);
	memcpy(out + a, s2 ? s2 : "", b);
	memcpy(out + a + b, s3 ? s3 : "", c + 1);
	return out;
}

#define MAC_DATA_LEN 67 /* the MacData at the end: SHA-256 MAC, 8-byte salt */

/* The store from bundle's text, made twice: from the text, and from a memfd
 * holding it into another (ab_ca_java_truststore_fd, the file offset left at
 * its end, as the bundle's writer leaves it).  Both agree in all but the
 * MAC's salt and value, and in their errors; both MACs verify. */
static int build(ab_ca *ca, const char *bundle, unsigned char **der, size_t *len, ab_err *err)
{
	size_t n = strlen(bundle);
	memset(err, 0, sizeof(*err));
	int r = ab_ca_java_truststore(ca, bundle, n, PASS, der, len, err);
	int fd = memfd_create("bundle", MFD_CLOEXEC);
	int out = memfd_create("store", MFD_CLOEXEC);
	assert_true(fd >= 0 && out >= 0);
	assert_int_equal(write(fd, bundle, n), (ssize_t)n);
	size_t len2 = 7;
	ab_err err2 = {0};
	assert_int_equal(ab_ca_java_truststore_fd(ca, fd, n, PASS, out, &len2, &err2), r);
	close(fd);
	assert_string_equal(err2.msg, err->msg);
	if (r < 0) {
		close(out);
		return r;
	}
	struct stat st;
	assert_int_equal(fstat(out, &st), 0);
	assert_int_equal((size_t)st.st_size, len2);
	assert_int_equal(len2, *len);
	unsigned char *der2 = malloc(len2);
	assert_non_null(der2);
	assert_int_equal(pread(out, der2, len2, 0), (ssize_t)len2);
	close(out);
	assert_true(len2 > MAC_DATA_LEN);
	assert_memory_equal(der2, *der, len2 - MAC_DATA_LEN);
	for (int i = 0; i < 2; i++) {
		const unsigned char *p = i ? der2 : *der;
		PKCS12 *p12 = d2i_PKCS12(NULL, &p, (long)len2);
		assert_non_null(p12);
		assert_int_equal(PKCS12_verify_mac(p12, PASS, -1), 1);
		PKCS12_free(p12);
	}
	free(der2);
	return r;
}

/* The bags of a store, checked for the structure Java needs; names[i] gets
 * bag i's alias (malloc'd), certs[i] its certificate. */
static size_t decode(const unsigned char *der, size_t len, char **names, X509 **certs, size_t max)
{
	const unsigned char *p = der;
	PKCS12 *p12 = d2i_PKCS12(NULL, &p, (long)len);

	assert_non_null(p12);
	assert_ptr_equal(p, der + len);
	assert_int_equal(PKCS12_mac_present(p12), 1);
	assert_int_equal(PKCS12_verify_mac(p12, PASS, -1), 1);
	assert_int_equal(PKCS12_verify_mac(p12, "wrong", -1), 0);
	const X509_ALGOR *macalg = NULL;
	const ASN1_OBJECT *macobj = NULL;
	const ASN1_INTEGER *iter = NULL;
	PKCS12_get0_mac(NULL, &macalg, NULL, &iter, p12);
	X509_ALGOR_get0(&macobj, NULL, NULL, macalg);
	assert_int_equal(OBJ_obj2nid(macobj), NID_sha256);
	assert_true(ASN1_INTEGER_get(iter) >= 2048);
	ERR_clear_error();

	STACK_OF(PKCS7) *safes = PKCS12_unpack_authsafes(p12);
	assert_non_null(safes);
	assert_int_equal(sk_PKCS7_num(safes), 1);
	PKCS7 *p7 = sk_PKCS7_value(safes, 0);
	assert_int_equal(OBJ_obj2nid(p7->type), NID_pkcs7_data); /* not encrypted */
	STACK_OF(PKCS12_SAFEBAG) *bags = PKCS12_unpack_p7data(p7);
	assert_non_null(bags);
	ASN1_OBJECT *jdk = OBJ_txt2obj(JDK_TRUST_OID, 1);
	assert_non_null(jdk);
	size_t n = (size_t)sk_PKCS12_SAFEBAG_num(bags);
	assert_true(n <= max);
	for (size_t i = 0; i < n; i++) {
		PKCS12_SAFEBAG *bag = sk_PKCS12_SAFEBAG_value(bags, (int)i);
		assert_int_equal(PKCS12_SAFEBAG_get_nid(bag), NID_certBag);
		assert_int_equal(PKCS12_SAFEBAG_get_bag_nid(bag), NID_x509Certificate);
		certs[i] = PKCS12_SAFEBAG_get1_cert(bag);
		assert_non_null(certs[i]);
		names[i] = PKCS12_get_friendlyname(bag);
		assert_non_null(names[i]);
		/* exactly one trusted-key-usage attribute: SET OF { anyExtendedKeyUsage } */
		const STACK_OF(X509_ATTRIBUTE) *attrs = PKCS12_SAFEBAG_get0_attrs(bag);
		int found = 0;
		for (int k = 0; k < sk_X509_ATTRIBUTE_num(attrs); k++) {
			X509_ATTRIBUTE *a = sk_X509_ATTRIBUTE_value(attrs, k);
			if (OBJ_cmp(X509_ATTRIBUTE_get0_object(a), jdk) != 0)
				continue;
			found++;
			assert_int_equal(X509_ATTRIBUTE_count(a), 1);
			ASN1_TYPE *t = X509_ATTRIBUTE_get0_type(a, 0);
			assert_int_equal(ASN1_TYPE_get(t), V_ASN1_OBJECT);
			assert_int_equal(OBJ_obj2nid(t->value.object), NID_anyExtendedKeyUsage);
		}
		assert_int_equal(found, 1);
	}
	ASN1_OBJECT_free(jdk);
	sk_PKCS12_SAFEBAG_pop_free(bags, PKCS12_SAFEBAG_free);
	sk_PKCS7_pop_free(safes, PKCS7_free);
	/* and OpenSSL's own reader finds the same certificates */
	STACK_OF(X509) *cas = NULL;
	EVP_PKEY *key = NULL;
	X509 *cert = NULL;
	assert_int_equal(PKCS12_parse(p12, PASS, &key, &cert, &cas), 1);
	assert_null(key);
	assert_int_equal(sk_X509_num(cas) + (cert != NULL), (int)n);
	sk_X509_pop_free(cas, X509_free);
	X509_free(cert);
	PKCS12_free(p12);
	return n;
}

static void free_decoded(char **names, X509 **certs, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		OPENSSL_free(names[i]);
		X509_free(certs[i]);
	}
}

/* Two other CAs stand for the system roots; comments and other PEM blocks
 * between them, as distro bundles have, are skipped. */
static void test_roundtrip(void **state)
{
	ab_ca *ca = new_ca(), *r1 = new_ca(), *r2 = new_ca();
	char *p1 = pem_of(ab_ca_get0_cert(r1)), *p2 = pem_of(ab_ca_get0_cert(r2));
	char *pc = pem_of(ab_ca_get0_cert(ca));
	char *sys = cat3("# a comment line\n", p1,
			 "\n-----BEGIN X509 CRL-----\nAAAA\n"
			 "-----END X509 CRL-----\n");
	char *sys2 = cat3(sys, "junk between blocks\n", p2);
	char *bundle = cat3(sys2, pc, NULL);
	unsigned char *der = NULL;
	size_t len = 0;
	ab_err err;

	assert_int_equal(build(ca, bundle, &der, &len, &err), 0);
	assert_non_null(der);
	assert_true(len > 0);
	char *names[8];
	X509 *certs[8];
	size_t n = decode(der, len, names, certs, 8);
	assert_int_equal(n, 3);
	assert_string_equal(names[0], "system-0");
	assert_string_equal(names[1], "system-1");
	assert_string_equal(names[2], "agentbox-session-ca");
	assert_int_equal(X509_cmp(certs[0], ab_ca_get0_cert(r1)), 0);
	assert_int_equal(X509_cmp(certs[1], ab_ca_get0_cert(r2)), 0);
	assert_int_equal(X509_cmp(certs[2], ab_ca_get0_cert(ca)), 0);
	free_decoded(names, certs, n);
	free(der);

	/* two stores of one bundle differ only by the MAC's salt: fresh each time */
	unsigned char *der2 = NULL;
	size_t len2 = 0;
	assert_int_equal(build(ca, bundle, &der2, &len2, &err), 0);
	assert_int_equal(len2, len);
	free(der2);

	/* a bundle without the session CA gets it; an empty one holds it alone */
	assert_int_equal(build(ca, sys2, &der, &len, &err), 0);
	n = decode(der, len, names, certs, 8);
	assert_int_equal(n, 3);
	assert_string_equal(names[2], "agentbox-session-ca");
	assert_int_equal(X509_cmp(certs[2], ab_ca_get0_cert(ca)), 0);
	free_decoded(names, certs, n);
	free(der);
	assert_int_equal(ab_ca_java_truststore(ca, "", 0, PASS, &der, &len, &err), 0);
	n = decode(der, len, names, certs, 8);
	assert_int_equal(n, 1);
	assert_string_equal(names[0], "agentbox-session-ca");
	free_decoded(names, certs, n);
	free(der);

	/* the session CA twice: the first copy gets the alias, the second is a root */
	char *twice = cat3(pc, pc, NULL);
	assert_int_equal(build(ca, twice, &der, &len, &err), 0);
	n = decode(der, len, names, certs, 8);
	assert_int_equal(n, 2);
	assert_string_equal(names[0], "agentbox-session-ca");
	assert_string_equal(names[1], "system-1");
	free_decoded(names, certs, n);
	free(der);

	free(twice);
	free(bundle);
	free(sys2);
	free(sys);
	free(pc);
	free(p2);
	free(p1);
	ab_ca_free(r2);
	ab_ca_free(r1);
	ab_ca_free(ca);
}

static void expect_fail(ab_ca *ca, const char *bundle, int code, const char *needle)
{
	unsigned char *der = (unsigned char *)"untouched";
	size_t len = 7;
	ab_err err;

	assert_int_equal(build(ca, bundle, &der, &len, &err), -code);
	assert_null(der);
	assert_int_equal(len, 0);
	if (!strstr(err.msg, needle))
		fail_msg("error '%s' lacks '%s'", err.msg, needle);
	assert_int_equal(ERR_peek_error(), 0); /* the queue is left clean */
}

static void test_hostile(void **state)
{
	ab_ca *ca = new_ca();
	char *pc = pem_of(ab_ca_get0_cert(ca));
	ab_err err = {0};
	unsigned char *der = NULL;
	size_t len = 0;

	/* base64 that does not decode */
	char *bad = cat3(pc,
			 "-----BEGIN CERTIFICATE-----\n!!!!not base64!!!!\n"
			 "-----END CERTIFICATE-----\n",
			 NULL);
	expect_fail(ca, bad, EINVAL, "does not decode");
	free(bad);
	/* DER that is an INTEGER, not a certificate (02 01 05 = "AgEF") */
	bad = cat3(pc, "-----BEGIN CERTIFICATE-----\nAgEF\n-----END CERTIFICATE-----\n", NULL);
	expect_fail(ca, bad, EINVAL, "certificate 2 of the CA bundle is not DER");
	free(bad);
	/* a SEQUENCE followed by trailing bytes (30 00 05 = "MAAF") */
	bad = cat3("-----BEGIN CERTIFICATE-----\nMAAF\n-----END CERTIFICATE-----\n", pc, NULL);
	expect_fail(ca, bad, EINVAL, "certificate 1 of the CA bundle is not DER");
	free(bad);
	/* a length that runs past the data (30 05 00 = "MAUA") */
	bad = cat3("-----BEGIN CERTIFICATE-----\nMAUA\n-----END CERTIFICATE-----\n", NULL, NULL);
	expect_fail(ca, bad, EINVAL, "not DER");
	free(bad);
	/* PEM headers (an encrypted block) on a certificate */
	bad = cat3("-----BEGIN CERTIFICATE-----\nProc-Type: 4,ENCRYPTED\n"
		   "DEK-Info: AES-128-CBC,00000000000000000000000000000000\n\nMAAA\n"
		   "-----END CERTIFICATE-----\n",
		   NULL, NULL);
	expect_fail(ca, bad, EINVAL, "has PEM headers");
	free(bad);
	/* a block cut short (no END line) */
	char *cut = strdup(pc);
	assert_non_null(cut);
	cut[strlen(cut) - 30] = '\0';
	expect_fail(ca, cut, EINVAL, "does not decode");
	free(cut);
	/* more certificates than AB_CA_MAX_TRUST_CERTS */
	size_t one = strlen(pc), many = AB_CA_MAX_TRUST_CERTS + 1;
	char *big = malloc(one * many + 1);
	assert_non_null(big);
	for (size_t i = 0; i < many; i++)
		memcpy(big + i * one, pc, one);
	big[one * many] = '\0';
	expect_fail(ca, big, E2BIG, "more than");
	big[one * (many - 1)] = '\0'; /* exactly the limit: accepted */
	assert_int_equal(build(ca, big, &der, &len, &err), 0);
	free(der);
	free(big);
	/* a store is written only into an empty memfd */
	int bfd = memfd_create("bundle", MFD_CLOEXEC), out = memfd_create("store", MFD_CLOEXEC);
	assert_true(bfd >= 0 && out >= 0);
	assert_int_equal(write(out, "x", 1), 1);
	assert_int_equal(ab_ca_java_truststore_fd(ca, bfd, 0, PASS, out, &len, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "not empty"));
	close(out);
	close(bfd);
	/* a length over the bundle limit is refused before anything is read */
	der = NULL;
	assert_int_equal(
		ab_ca_java_truststore(ca, pc, (size_t)AB_CA_MAX_BUNDLE + 1, PASS, &der, &len, &err),
		-EFBIG);
	assert_null(der);
	free(pc);
	ab_ca_free(ca);
}

/* The store is written as DER by hand: OpenSSL's own PKCS#12 encoder, given
 * the bags read back from it and its MAC salt, writes the same bytes (the
 * SET OF attributes in DER order, every length minimal, the same MAC). */
static void test_openssl_encodes_the_same(void **state)
{
	ab_ca *ca = new_ca(), *r1 = new_ca();
	char *p1 = pem_of(ab_ca_get0_cert(r1)), *pc = pem_of(ab_ca_get0_cert(ca));
	char *bundle = cat3(p1, p1, pc);
	/* a bundle large enough for long-form lengths everywhere */
	size_t one = strlen(p1), many = 300;
	char *big = malloc(one * many + 1);
	assert_non_null(big);
	for (size_t i = 0; i < many; i++)
		memcpy(big + i * one, p1, one);
	big[one * many] = '\0';
	const char *cases[] = {bundle, big, ""};

	for (size_t c = 0; c < AB_ARRAY_SIZE(cases); c++) {
		unsigned char *der = NULL, *again = NULL, *q;
		size_t len = 0;
		ab_err err;
		assert_int_equal(build(ca, cases[c], &der, &len, &err), 0);
		const unsigned char *p = der;
		PKCS12 *mine = d2i_PKCS12(NULL, &p, (long)len);
		assert_non_null(mine);
		const ASN1_OCTET_STRING *salt = NULL;
		const ASN1_INTEGER *iter = NULL;
		PKCS12_get0_mac(NULL, NULL, &salt, &iter, mine);
		assert_int_equal(ASN1_STRING_length(salt), 8);
		STACK_OF(PKCS7) *safes = PKCS12_unpack_authsafes(mine);
		STACK_OF(PKCS12_SAFEBAG) *bags = PKCS12_unpack_p7data(sk_PKCS7_value(safes, 0));
		assert_non_null(bags);
		/* what the store was before: OpenSSL's PKCS12 API end to end */
		STACK_OF(PKCS7) *safes2 = sk_PKCS7_new_null();
		PKCS7 *p7 = PKCS12_pack_p7data(bags);
		assert_non_null(p7);
		assert_true(sk_PKCS7_push(safes2, p7) > 0);
		PKCS12 *theirs = PKCS12_add_safes(safes2, NID_pkcs7_data);
		assert_non_null(theirs);
		assert_int_equal(PKCS12_set_mac(theirs, PASS, -1,
						(unsigned char *)ASN1_STRING_get0_data(salt), 8,
						(int)ASN1_INTEGER_get(iter), EVP_sha256()),
				 1);
		int n = i2d_PKCS12(theirs, NULL);
		assert_int_equal(n, (int)len);
		q = again = malloc((size_t)n);
		assert_non_null(again);
		assert_int_equal(i2d_PKCS12(theirs, &q), n);
		assert_memory_equal(again, der, len);
		free(again);
		PKCS12_free(theirs);
		sk_PKCS7_pop_free(safes2, PKCS7_free);
		sk_PKCS12_SAFEBAG_pop_free(bags, PKCS12_SAFEBAG_free);
		sk_PKCS7_pop_free(safes, PKCS7_free);
		PKCS12_free(mine);
		free(der);
	}
	free(big);
	free(bundle);
	free(pc);
	free(p1);
	ab_ca_free(r1);
	ab_ca_free(ca);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_roundtrip),
		cmocka_unit_test(test_hostile),
		cmocka_unit_test(test_openssl_encodes_the_same),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
