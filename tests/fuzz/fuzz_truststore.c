/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target (any process; fuzzing only): ab_ca_java_truststore, the
 * Java truststore written as DER by hand from a PEM bundle
 * (src/creds/truststore.c).  Properties beyond "no crash, no UB": a store
 * that is made is one PKCS#12 that OpenSSL reads whole, its MAC checks with
 * the password, and it holds one bag for each certificate OpenSSL's PEM
 * reader finds in the bundle (plus the session CA when the bundle lacks it);
 * the same bundle read from a memfd (ab_ca_java_truststore_fd, what agentbox
 * runs) gives the same result and, written into a second memfd through a
 * third, the same store but for the MAC's salt and value, its MAC checking
 * too.
 */
#include "agentbox/ca.h"

#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/pkcs12.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAC_DATA_LEN 67 /* the MacData at the store's end */

/* The store from a memfd holding data, into another: it must agree with
 * (r, der, len) but for the MAC, and its MAC must verify. */
static void same_from_fd(const ab_ca *ca, const uint8_t *data, size_t size, int r,
			 const unsigned char *der, size_t len)
{
	static int fd = -1, out = -1;
	static unsigned char der2[1 << 18];
	if (fd < 0 && (fd = memfd_create("fuzz-bundle", MFD_CLOEXEC)) < 0)
		__builtin_trap();
	if (out < 0 && (out = memfd_create("fuzz-store", MFD_CLOEXEC)) < 0)
		__builtin_trap();
	if (ftruncate(fd, 0) < 0 || pwrite(fd, data, size, 0) != (ssize_t)size ||
	    lseek(fd, 0, SEEK_END) < 0 || ftruncate(out, 0) < 0 || lseek(out, 0, SEEK_SET) < 0)
		__builtin_trap();
	ab_err err = {0};
	size_t len2 = 0;
	int r2 = ab_ca_java_truststore_fd(ca, fd, size, "changeit", out, &len2, &err);
	if (r2 != r || (r >= 0 && (len2 != len || len2 > sizeof(der2))))
		__builtin_trap();
	if (r >= 0) {
		const unsigned char *p = der2;
		if (pread(out, der2, len2, 0) != (ssize_t)len2 || len < MAC_DATA_LEN ||
		    memcmp(der, der2, len - MAC_DATA_LEN) != 0)
			__builtin_trap();
		PKCS12 *p12 = d2i_PKCS12(NULL, &p, (long)len2);
		if (!p12 || PKCS12_verify_mac(p12, "changeit", -1) != 1)
			__builtin_trap();
		PKCS12_free(p12);
	}
	ERR_clear_error();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static ab_ca *ca;
	ab_err err = {0};
	unsigned char *der = NULL;
	size_t len = 0;

	if (size > 1 << 16)
		return 0;
	if (!ca && ab_ca_new(NULL, 1, &ca, &err) < 0)
		__builtin_trap();
	int r = ab_ca_java_truststore(ca, (const char *)data, size, "changeit", &der, &len, &err);
	if (r < 0 && (der || len || ERR_peek_error()))
		__builtin_trap();
	same_from_fd(ca, data, size, r, der, len);
	if (r < 0)
		return 0;
	const unsigned char *p = der;
	PKCS12 *p12 = d2i_PKCS12(NULL, &p, (long)len);
	if (!p12 || p != der + len || PKCS12_verify_mac(p12, "changeit", -1) != 1)
		__builtin_trap();
	STACK_OF(PKCS7) *safes = PKCS12_unpack_authsafes(p12);
	STACK_OF(PKCS12_SAFEBAG) *bags = safes && sk_PKCS7_num(safes) == 1
						 ? PKCS12_unpack_p7data(sk_PKCS7_value(safes, 0))
						 : NULL;
	if (!bags || sk_PKCS12_SAFEBAG_num(bags) < 1)
		__builtin_trap();
	for (int i = 0; i < sk_PKCS12_SAFEBAG_num(bags); i++)
		if (PKCS12_SAFEBAG_get_bag_nid(sk_PKCS12_SAFEBAG_value(bags, i)) !=
		    NID_x509Certificate)
			__builtin_trap();
	sk_PKCS12_SAFEBAG_pop_free(bags, PKCS12_SAFEBAG_free);
	sk_PKCS7_pop_free(safes, PKCS7_free);
	PKCS12_free(p12);
	free(der);
	ERR_clear_error();
	return 0;
}
