/* SPDX-License-Identifier: MIT */
/* Review mode's risk judgement (src/observe/review.c, pure part). */
#include "unit.h"

#include "agentbox/review.h"

#include <string.h>
#include <sys/stat.h>

static unsigned risk(const char *path, enum ab_change_type t, mode_t m, uint64_t size, bool bin)
{
	char *v[] = {".git/hooks", ".git/config", ".envrc", NULL};
	ab_strv prot = {v, 3};
	return ab_review_path_risk(path, t, m, size, bin, &prot);
}

static void test_risks(void **state)
{
	assert_int_equal(risk("src/a.c", AB_CHT_FILE, 0644, 10, false), 0);
	assert_int_equal(risk("Makefile", AB_CHT_FILE, 0644, 10, false), 0);
	assert_int_equal(risk("run.sh.x", AB_CHT_FILE, 0644, 10, false), AB_RISK_UNUSUAL);
	assert_int_equal(risk("tool", AB_CHT_FILE, 0755, 10, false),
			 AB_RISK_EXEC | AB_RISK_UNUSUAL);
	assert_int_equal(risk("a.py", AB_CHT_FILE, 04644, 10, false), AB_RISK_EXEC);
	assert_int_equal(risk("blob.bin", AB_CHT_FILE, 0644, 2u << 20, true),
			 AB_RISK_UNUSUAL | AB_RISK_BINARY);
	assert_int_equal(risk("small.bin", AB_CHT_FILE, 0644, 100, true), AB_RISK_UNUSUAL);
	/* the workspace's own repository: its objects have no extension */
	assert_int_equal(risk(".git/objects/ab/cdef", AB_CHT_FILE, 0444, 10, true), 0);
	/* protected: at, below and above an entry, not a mere prefix */
	assert_int_equal(risk(".git/hooks/pre-commit", AB_CHT_FILE, 0644, 1, false) &
				 AB_RISK_PROTECTED,
			 AB_RISK_PROTECTED);
	assert_int_equal(risk(".git", AB_CHT_DIR, 0755, 0, false), AB_RISK_PROTECTED);
	assert_int_equal(risk(".envrc", AB_CHT_FILE, 0644, 1, false) & AB_RISK_PROTECTED,
			 AB_RISK_PROTECTED);
	assert_int_equal(risk(".envrc2", AB_CHT_FILE, 0644, 1, false) & AB_RISK_PROTECTED, 0);
	/* nested repositories, at any depth below the top, not a look-alike */
	assert_int_equal(risk("sub/.git/config", AB_CHT_FILE, 0644, 1, false), AB_RISK_NESTED_GIT);
	assert_int_equal(risk("a/b/.git", AB_CHT_SYMLINK, 0777, 1, false),
			 AB_RISK_NESTED_GIT | AB_RISK_SYMLINK);
	assert_int_equal(risk("sub/.github/x.yml", AB_CHT_FILE, 0644, 1, false), 0);
	assert_int_equal(risk("sub/.gitx", AB_CHT_FILE, 0644, 1, false), AB_RISK_UNUSUAL);
	assert_int_equal(risk("fifo", AB_CHT_SPECIAL, 0, 0, false), AB_RISK_SPECIAL);
	assert_int_equal(risk("x", AB_CHT_FILE, 0644, 1, false), AB_RISK_UNUSUAL);
	assert_int_equal(ab_review_path_risk("x.c", AB_CHT_FILE, 0644, 1, false, NULL), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_risks),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
