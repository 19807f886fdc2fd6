/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for the pure pieces of src/supervise.c: /proc parsing (hostile
 * process names included) and the rate limiter.  The notification path itself
 * runs for real in tests/integration/test_record.py.
 */
#include "unit.h"

#include "agentbox/supervise.h"

#include <string.h>

static void test_parse_status(void **state)
{
	(void)state;
	const char *st = "Name:\tsh\nUmask:\t0022\nState:\tS (sleeping)\nTgid:\t4242\n"
			 "Ngid:\t0\nPid:\t4243\nPPid:\t4000\nTracerPid:\t0\n"
			 "NStgid:\t4242\t7\nNSpid:\t4243\t8\nNSpgid:\t4242\t7\n";
	long ns, ppid, tgid;
	ab_sup_parse_status(st, &ns, &ppid, &tgid);
	assert_int_equal(ns, 7);
	assert_int_equal(ppid, 4000);
	assert_int_equal(tgid, 4242);
	/* one level only (no pid namespace between) */
	ab_sup_parse_status("Tgid:\t5\nPPid:\t1\nNStgid:\t5\n", &ns, &ppid, &tgid);
	assert_int_equal(ns, 5);
	/* absent keys, and a Name that looks like keys */
	ab_sup_parse_status("Name:\tPPid:\t9\n", &ns, &ppid, &tgid);
	assert_int_equal(ns, -1);
	assert_int_equal(ppid, -1);
	assert_int_equal(tgid, -1);
	ab_sup_parse_status("", &ns, &ppid, &tgid);
	assert_int_equal(ns, -1);
	ab_sup_parse_status("NStgid:\tx\n", &ns, &ppid, &tgid);
	assert_int_equal(ns, -1);
}

static void test_parse_stat_exit(void **state)
{
	(void)state;
	/* 52 fields; the exit code (wait status) is the last */
	char buf[1024];
	const char *tail = "Z 1 5 5 0 -1 4194560 100 0 0 0 0 0 0 0 20 0 1 0 123 0 0 "
			   "18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0 0 0 0 0 "
			   "0 0 0 256";
	snprintf(buf, sizeof(buf), "42 (true) %s\n", tail);
	assert_int_equal(ab_sup_parse_stat_exit(buf), 256);
	/* a name with spaces and parentheses cannot shift the fields */
	snprintf(buf, sizeof(buf), "42 (a) b) 1 2 3) %s\n", tail);
	assert_int_equal(ab_sup_parse_stat_exit(buf), 256);
	assert_int_equal(ab_sup_parse_stat_exit("42 (x) Z 1 2\n"), -1); /* short */
	assert_int_equal(ab_sup_parse_stat_exit("garbage"), -1);
	assert_int_equal(ab_sup_parse_stat_exit(""), -1);
	snprintf(buf, sizeof(buf), "42 (x) %.*s 99999999\n", (int)strlen(tail) - 4, tail);
	assert_int_equal(ab_sup_parse_stat_exit(buf), -1); /* not a wait status */
}

static void test_bucket(void **state)
{
	(void)state;
	ab_sup_bucket b = {0};
	unsigned taken = 0;
	for (int i = 0; i < 1000; i++)
		taken += ab_sup_bucket_take(&b, 1000, 50, 200);
	assert_int_equal(taken, 200); /* the burst */
	assert_false(ab_sup_bucket_take(&b, 1010, 50, 200)); /* 0.5 token later */
	assert_true(ab_sup_bucket_take(&b, 1020, 50, 200));  /* 1 token after 20 ms */
	taken = 0;
	for (int i = 0; i < 1000; i++)
		taken += ab_sup_bucket_take(&b, 2020, 50, 200);
	assert_int_equal(taken, 50); /* one second: the rate */
	taken = 0;
	for (int i = 0; i < 1000; i++)
		taken += ab_sup_bucket_take(&b, 1000000, 50, 200);
	assert_int_equal(taken, 200); /* a long pause refills to the burst only */
	/* time going backwards adds nothing */
	assert_false(ab_sup_bucket_take(&b, 5, 50, 200));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_status),
		cmocka_unit_test(test_parse_stat_exit),
		cmocka_unit_test(test_bucket),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
