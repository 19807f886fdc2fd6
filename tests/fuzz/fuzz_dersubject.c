/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target (any process; fuzzing only): ab_cert_der_subject, the
 * walk to a certificate's subject that indexes the system bundle read by
 * need (src/creds/systrust.c).  Properties beyond "no crash, no UB": when
 * OpenSSL decodes the same bytes as a certificate, the walk finds a subject
 * and it is the certificate's (X509_NAME_cmp); what the walk finds is a Name
 * that encodes again.
 */
#include "agentbox/ca.h"

#include <openssl/x509.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size > 1 << 16)
		return 0;
	X509_NAME *name = ab_cert_der_subject(data, (long)size);
	const unsigned char *p = data;
	X509 *x = d2i_X509(NULL, &p, (long)size);
	if (x && (!name || X509_NAME_cmp(name, X509_get_subject_name(x)) != 0))
		__builtin_trap();
	if (name) {
		unsigned char *der = NULL;
		if (i2d_X509_NAME(name, &der) <= 0)
			__builtin_trap();
		OPENSSL_free(der);
	}
	X509_free(x);
	X509_NAME_free(name);
	return 0;
}
