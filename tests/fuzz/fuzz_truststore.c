/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target (any process; fuzzing only): ab_ca_java_truststore, the
 * Java truststore written as DER by hand from a PEM bundle
 * (src/creds/truststore.c).  Properties beyond "no crash, no UB": a store
 * that is made is one PKCS#12 that OpenSSL reads whole, its MAC checks with
 * the password, and it holds one bag for each certificate OpenSSL's PEM
 * reader finds in the bundle (plus the session CA when the bundle lacks it).
 */
#include "agentbox/ca.h"

#include <string.h>

#include <openssl/err.h>
#include <openssl/pkcs12.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

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
	if (ab_ca_java_truststore(ca, (const char *)data, size, "changeit", &der, &len, &err) < 0) {
		if (der || len || ERR_peek_error())
			__builtin_trap();
		return 0;
	}
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
