/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for ab_ca_secure_heap_init (src/creds/ca.c): with OpenSSL's secure
 * heap set up before the session CA is made (as src/egress/broker.c does), the
 * private scalars of the issuing CA key and the leaf key, and the key shares
 * of live TLS connections, are in the secure heap: CRYPTO_secure_used()
 * grows by them and returns to its level when they are freed, and no block
 * of OpenSSL's ordinary heap (every one tracked through
 * CRYPTO_set_mem_functions) holds either scalar, big- or little-endian.
 * The scan finds a scalar copied into an ordinary block (control); without
 * the secure heap the scalars are in ordinary blocks (test_ca.c's key wipe
 * test finds them there).  Its own process: the secure heap is process-wide
 * and can be set up once.
 */
#include "unit.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>

#include "agentbox/ca.h"
#include "agentbox/common.h"

#if defined(__has_include)
#if __has_include(<valgrind/memcheck.h>)
#include <valgrind/memcheck.h>
#endif
#endif
#ifndef VALGRIND_MAKE_MEM_DEFINED
#define VALGRIND_MAKE_MEM_DEFINED(p, n) ((void)(p), (void)(n))
#endif

/* ------------------------------------------------ tracking allocator */
#define MH_MAGIC 0x61622d7368u
#define MH_MASK ((uintptr_t)0x5a5a5a5a5a5a5a5aull) /* links hidden from LeakSanitizer */
struct mh {
	uintptr_t prev, next;
	size_t size, magic;
};
static struct mh live;
static bool hooks_on;
static int heap_state; /* ab_ca_secure_heap_init() */

static struct mh *mh_get(uintptr_t v)
{
	return (struct mh *)(v ^ MH_MASK);
}

static uintptr_t mh_put(struct mh *h)
{
	return (uintptr_t)h ^ MH_MASK;
}

static void *t_malloc(size_t n, const char *file, int line)
{
	struct mh *h = malloc(sizeof(*h) + n);

	if (!h)
		return NULL;
	if (!live.next)
		live.next = live.prev = mh_put(&live);
	memset(h + 1, 0, n);
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
	struct mh *h = (struct mh *)p - 1;
	memcpy(q, p, h->size < n ? h->size : n);
	t_free(p, file, line);
	return q;
}

/* Live ordinary blocks holding one of the 32-byte patterns. */
static size_t live_hits(unsigned char pats[][32], int npats)
{
	size_t hits = 0;

	for (struct mh *h = mh_get(live.next); h != &live; h = mh_get(h->next)) {
		VALGRIND_MAKE_MEM_DEFINED(h + 1, h->size);
		for (int k = 0; k < npats; k++)
			hits += memmem(h + 1, h->size, pats[k], 32) != NULL;
	}
	return hits;
}

/* The private scalar of k, big- and little-endian (the BIGNUM copy made
 * here is cleansed before the scan). */
static void scalar_of(EVP_PKEY *k, unsigned char be[32], unsigned char le[32])
{
	BIGNUM *bn = NULL;

	assert_int_equal(EVP_PKEY_get_bn_param(k, OSSL_PKEY_PARAM_PRIV_KEY, &bn), 1);
	assert_int_equal(BN_bn2binpad(bn, be, 32), 32);
	assert_int_equal(BN_bn2lebinpad(bn, le, 32), 32);
	BN_clear_free(bn);
}

/* ------------------------------------------------ handshakes */

static bool step(SSL *s, bool *done)
{
	int r = SSL_do_handshake(s);

	if (r == 1) {
		*done = true;
		return true;
	}
	int e = SSL_get_error(s, r);
	return e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE;
}

/* A TLS 1.3 client of cc and server of sc through a BIO pair, handshaken. */
static void connect_pair(SSL_CTX *cc, SSL_CTX *sc, SSL **c, SSL **s)
{
	ab_err err = {0};
	BIO *bc = NULL, *bs = NULL;
	bool cd = false, sd = false;

	*c = SSL_new(cc);
	*s = SSL_new(sc);
	assert_non_null(*c);
	assert_non_null(*s);
	assert_int_equal(ab_tls_client_setup(*c, "api.test", &err), 0);
	assert_int_equal(BIO_new_bio_pair(&bc, 0, &bs, 0), 1);
	SSL_set_bio(*c, bc, bc);
	SSL_set_bio(*s, bs, bs);
	SSL_set_connect_state(*c);
	SSL_set_accept_state(*s);
	for (int i = 0; i < 64 && !(cd && sd); i++) {
		assert_true(cd || step(*c, &cd));
		assert_true(sd || step(*s, &sd));
	}
	assert_true(cd && sd);
	assert_int_equal(SSL_version(*c), TLS1_3_VERSION);
}

/* ------------------------------------------------ tests */

static void test_init(void **state)
{
	struct rlimit rl = {0};

	getrlimit(RLIMIT_MEMLOCK, &rl);
	printf("[ info ] secure heap: %u KiB, %s (RLIMIT_MEMLOCK %llu KiB)\n",
	       AB_CA_SECURE_HEAP >> 10, heap_state == 1 ? "locked" : "NOT locked",
	       (unsigned long long)rl.rlim_cur >> 10);
	assert_true(heap_state >= 0);
	assert_int_equal(CRYPTO_secure_malloc_initialized(), 1);
	/* a second call is harmless */
	assert_true(ab_ca_secure_heap_init() >= 0);
	/* secure allocations come from the arena */
	void *p = OPENSSL_secure_malloc(32);
	assert_non_null(p);
	assert_int_equal(CRYPTO_secure_allocated(p), 1);
	OPENSSL_secure_clear_free(p, 32);
}

static void test_keys_in_secure_heap(void **state)
{
	static const char *const nc[] = {"api.test", NULL};
	unsigned char pats[4][32];
	ab_err err = {0};
	ab_ca *ca = NULL;
	SSL_CTX *sc = NULL, *cc = NULL;
	char *pem = NULL;

	if (!hooks_on) {
		printf("[ info ] CRYPTO_set_mem_functions unavailable: ordinary heap not scanned\n");
	}
	/* a first CA warms OpenSSL up (DRBG, group tables) */
	assert_int_equal(ab_ca_new(nc, 7, &ca, &err), 0);
	ab_ca_free(ca);
	size_t base = CRYPTO_secure_used();

	assert_int_equal(ab_ca_new(nc, 7, &ca, &err), 0);
	size_t with_ca = CRYPTO_secure_used();
	/* two live keys (issuing CA, leaf): at least their 32-byte scalars */
	assert_true(with_ca >= base + 64);
	assert_int_equal(ab_ca_server_ctx(ca, "api.test", &sc, &err), 0);
	assert_int_equal(ab_ca_cert_pem(ca, &pem, &err), 0);
	assert_int_equal(ab_ca_client_ctx_mem(pem, &cc, &err), 0);
	free(pem);

	scalar_of(ab_ca_get0_key(ca), pats[0], pats[1]);
	scalar_of(SSL_CTX_get0_privatekey(sc), pats[2], pats[3]);
	if (hooks_on) {
		/* control: the scan finds a scalar in an ordinary block */
		unsigned char *probe = OPENSSL_malloc(64);
		assert_non_null(probe);
		memcpy(probe + 9, pats[1], 32);
		assert_int_equal(live_hits(pats, 4), 1);
		OPENSSL_clear_free(probe, 64);
		assert_int_equal(live_hits(pats, 4), 0);
	}

	/* live TLS 1.3 connections keep their key shares in the secure heap */
	SSL *c[8], *s[8];
	size_t before = CRYPTO_secure_used();
	for (int i = 0; i < 8; i++)
		connect_pair(cc, sc, &c[i], &s[i]);
	size_t during = CRYPTO_secure_used();
	printf("[ info ] secure heap: %zu bytes with the CA's keys (%zu before), %zu more for 8 "
	       "live TLS 1.3 connection pairs\n",
	       with_ca - base, base, during - before);
	assert_true(during > before);
	/* the leaf key signed 8 handshakes: still only in the secure heap */
	if (hooks_on)
		assert_int_equal(live_hits(pats, 4), 0);
	for (int i = 0; i < 8; i++) {
		SSL_free(c[i]);
		SSL_free(s[i]);
	}
	assert_int_equal(CRYPTO_secure_used(), before);

	SSL_CTX_free(cc);
	SSL_CTX_free(sc);
	ab_ca_free(ca);
	assert_int_equal(CRYPTO_secure_used(), base);
	OPENSSL_cleanse(pats, sizeof(pats));
}

int main(void)
{
	/* before any OpenSSL allocation; then the secure heap, as the broker */
	hooks_on = CRYPTO_set_mem_functions(t_malloc, t_realloc, t_free) == 1;
	heap_state = ab_ca_secure_heap_init();
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_init),
		cmocka_unit_test(test_keys_in_secure_heap),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
