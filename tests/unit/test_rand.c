/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for ab_ca_rand_init (src/creds/ca.c): called before anything
 * else of OpenSSL's, as the broker does, the process's random generator is a
 * Hash_DRBG (over SHA-256) that keys and TLS draw from; a configuration that
 * names a generator still decides; called too late, it changes nothing.
 * Each case runs in a process of its own (this binary again), since the
 * generator is made once per process.
 */
#include "unit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include "agentbox/ca.h"

static const char *self;

/* The generator behind RAND_bytes, and its digest or cipher, as one string
 * ("HASH-DRBG SHA2-256"). */
static void generator(char *out, size_t n)
{
	unsigned char b[16];
	char alg[64] = "";
	assert_int_equal(RAND_bytes(b, sizeof(b)), 1);
	EVP_RAND_CTX *c = RAND_get0_private(NULL);
	assert_non_null(c);
	const char *name = EVP_RAND_get0_name(EVP_RAND_CTX_get0_rand(c));
	OSSL_PARAM p[3] = {
		OSSL_PARAM_construct_utf8_string(OSSL_DRBG_PARAM_DIGEST, alg, sizeof(alg)),
		OSSL_PARAM_construct_end(),
		OSSL_PARAM_construct_end(),
	};
	if (strcmp(name, "HASH-DRBG") != 0)
		p[0] = OSSL_PARAM_construct_utf8_string(OSSL_DRBG_PARAM_CIPHER, alg, sizeof(alg));
	(void)EVP_RAND_CTX_get_params(c, p);
	snprintf(out, n, "%s %s", name, alg);
}

/* What `self CASE` prints on stdout, with OPENSSL_CONF=conf if not NULL. */
static void run_case(const char *which, const char *conf, char *out, size_t n)
{
	int pfd[2];
	assert_int_equal(pipe(pfd), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		dup2(pfd[1], 1);
		if (conf)
			setenv("OPENSSL_CONF", conf, 1);
		execl(self, self, which, (char *)NULL);
		_exit(127);
	}
	close(pfd[1]);
	ssize_t got = read(pfd[0], out, n - 1);
	close(pfd[0]);
	out[got > 0 ? got : 0] = '\0';
	int st = 0;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

static void test_first(void **state)
{
	char out[128];
	run_case("first", NULL, out, sizeof(out));
	assert_string_equal(out, "HASH-DRBG SHA2-256");
}

static void test_without(void **state)
{
	char out[128];
	run_case("without", NULL, out, sizeof(out));
	assert_string_equal(out, "CTR-DRBG AES-256-CTR");
}

static void test_too_late(void **state)
{
	char out[128];
	run_case("late", NULL, out, sizeof(out));
	assert_string_equal(out, "CTR-DRBG AES-256-CTR");
}

static void test_config_decides(void **state)
{
	char conf[] = "/tmp/ab-rand-cnfXXXXXX", out[128];
	int fd = mkstemp(conf);
	assert_true(fd >= 0);
	static const char text[] = "openssl_conf = init\n[init]\nrandom = rand\n"
				   "[rand]\nrandom = CTR-DRBG\ncipher = AES-128-CTR\n";
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	run_case("first", conf, out, sizeof(out));
	unlink(conf);
	assert_string_equal(out, "CTR-DRBG AES-128-CTR");
}

int main(int argc, char **argv)
{
	self = argv[0];
	if (argc == 2) {
		char out[128];
		if (strcmp(argv[1], "first") == 0)
			ab_ca_rand_init();
		if (strcmp(argv[1], "late") == 0) {
			unsigned char b[1];
			RAND_bytes(b, 1);
			ab_ca_rand_init();
		}
		generator(out, sizeof(out));
		fputs(out, stdout);
		return 0;
	}
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_first),
		cmocka_unit_test(test_without),
		cmocka_unit_test(test_too_late),
		cmocka_unit_test(test_config_decides),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
