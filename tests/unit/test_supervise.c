/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for the pure pieces of src/observe/supervise.c: /proc parsing (hostile
 * process names included), the rate limiter, and the decisions behind a rename
 * onto a rendered credentials file (path normalisation, the file checks).  The
 * notification paths themselves run for real in tests/integration/test_record.py
 * and test_cred_rename.py.
 */
#include "unit.h"

#include "agentbox/supervise.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>

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
	assert_int_equal(taken, 200);                        /* the burst */
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

static void norm_is(const char *base, const char *path, const char *want)
{
	char out[64];
	assert_int_equal(ab_sup_path_norm(base, path, out, sizeof(out)), 0);
	assert_string_equal(out, want);
}

static void test_path_norm(void **state)
{
	(void)state;
	norm_is("/home/u/.codex", "auth.json", "/home/u/.codex/auth.json");
	norm_is("/home/u", ".codex//./auth.json", "/home/u/.codex/auth.json");
	norm_is("/ignored", "/home/u/.codex/auth.json", "/home/u/.codex/auth.json");
	norm_is("/home/u/.codex/sub", "../auth.json", "/home/u/.codex/auth.json");
	norm_is("/", "../../../../etc/x", "/etc/x"); /* ".." stops at the root */
	norm_is("/a", "..", "/");
	norm_is("/a/b", "./", "/a/b"); /* no trailing slash */
	norm_is("/a/", "b/c/../../d", "/a/d");
	norm_is("//a//", "...", "/a/..."); /* "..." is a name */
	char out[16];
	assert_int_equal(ab_sup_path_norm("relative", "x", out, sizeof(out)), -EINVAL);
	assert_int_equal(ab_sup_path_norm(NULL, "x", out, sizeof(out)), -EINVAL);
	assert_int_equal(ab_sup_path_norm("/a", "", out, sizeof(out)), -EINVAL);
	assert_int_equal(ab_sup_path_norm("/a", "bcdefghijklmnopq", out, sizeof(out)),
			 -ENAMETOOLONG);
	assert_int_equal(ab_sup_path_norm("/a", "bcdefghijklm", out, sizeof(out)), 0);
	assert_string_equal(out, "/a/bcdefghijklm"); /* exactly fits */
	/* hostile: a long run of ".." and slashes stays in bounds */
	char path[4096];
	for (size_t i = 0; i + 3 < sizeof(path); i += 3)
		memcpy(path + i, "../", 3);
	path[sizeof(path) - 1] = '\0';
	assert_int_equal(ab_sup_path_norm("/a/b", path, out, sizeof(out)), 0);
	assert_string_equal(out, "/");
}

#define KUID 1234

static struct statx sx(unsigned mode, unsigned nlink, unsigned uid, unsigned ino, int64_t btime)
{
	struct statx x = {0};
	x.stx_mask = STATX_BASIC_STATS | STATX_BTIME | STATX_MNT_ID;
	x.stx_attributes_mask = STATX_ATTR_MOUNT_ROOT;
	x.stx_mode = (uint16_t)mode;
	x.stx_nlink = nlink;
	x.stx_uid = uid;
	x.stx_ino = ino;
	x.stx_dev_major = 8;
	x.stx_mnt_id = 7;
	x.stx_btime.tv_sec = btime;
	return x;
}

/* the new file, its directory, the rendered copy, its directory: all fine */
typedef struct rn_case {
	struct statx src, sdir, tgt, tdir;
	bool tmpfs;
} rn_case;

static rn_case rn_ok(void)
{
	rn_case c = {
		.src = sx(S_IFREG | 0600, 1, KUID, 10, 2000),
		.sdir = sx(S_IFDIR | 0755, 2, KUID, 2, 0),
		.tgt = sx(S_IFREG | 0600, 0, KUID, 3, 0),
		.tdir = sx(S_IFDIR | 0755, 2, KUID, 2, 0),
		.tmpfs = true,
	};
	c.tgt.stx_attributes = STATX_ATTR_MOUNT_ROOT;
	c.tgt.stx_dev_major = 0;
	c.tgt.stx_mnt_id = 99;
	c.src.stx_size = 100;
	return c;
}

static const char *rn(const rn_case *c)
{
	return ab_sup_rename_refusal(&c->src, &c->sdir, &c->tgt, &c->tdir, c->tmpfs, KUID, 1000, 0);
}

static void test_rename_refusal(void **state)
{
	(void)state;
	rn_case c = rn_ok();
	assert_null(rn(&c));
	c.src.stx_size = AB_SUP_RENDERED_MAX; /* the limit itself */
	assert_null(rn(&c));
	c.src.stx_btime.tv_sec = 1000; /* born the very moment the run started */
	assert_null(rn(&c));
	const char *why;
	/* each way a file can be not the sandbox's own new file */
	c = rn_ok();
	c.src.stx_uid = 0;
	why = rn(&c);
	assert_string_equal(why, "the new file is not the sandbox's");
	c = rn_ok();
	c.src.stx_nlink = 2;
	why = rn(&c);
	assert_string_equal(why, "the new file has other links");
	c = rn_ok();
	c.src.stx_nlink = 0;
	why = rn(&c);
	assert_string_equal(why, "the new file has other links");
	c = rn_ok();
	c.src.stx_mode = S_IFLNK | 0777;
	why = rn(&c);
	assert_string_equal(why, "the new file is not a regular file");
	c = rn_ok();
	c.src.stx_mode = S_IFIFO | 0600;
	why = rn(&c);
	assert_string_equal(why, "the new file is not a regular file");
	c = rn_ok();
	c.src.stx_mode = S_IFDIR | 0700;
	why = rn(&c);
	assert_string_equal(why, "the new file is not a regular file");
	c = rn_ok();
	c.src.stx_size = AB_SUP_RENDERED_MAX + 1;
	why = rn(&c);
	assert_string_equal(why, "the new file is larger than 64 KiB");
	c = rn_ok();
	c.src.stx_attributes = STATX_ATTR_MOUNT_ROOT;
	why = rn(&c);
	assert_string_equal(why, "the new file is a mount point");
	c = rn_ok();
	c.src.stx_mnt_id = 8;
	why = rn(&c);
	assert_string_equal(why, "the new file is a mount point");
	c = rn_ok();
	c.src.stx_dev_minor = 1;
	why = rn(&c);
	assert_string_equal(why, "the new file is a mount point");
	c = rn_ok();
	c.src.stx_btime.tv_sec = 999;
	why = rn(&c);
	assert_string_equal(why, "the new file is older than the sandbox");
	c = rn_ok();
	c.src.stx_mask &= ~STATX_BTIME;
	why = rn(&c);
	assert_string_equal(why, "the new file's birth time is unknown");
	c = rn_ok();
	c.sdir.stx_ino = 5;
	why = rn(&c);
	assert_string_equal(why, "the new file is in another directory");
	c = rn_ok();
	c.sdir.stx_mnt_id = 5; /* the same directory through another mount */
	why = rn(&c);
	assert_string_equal(why, "the new file is in another directory");
	/* each way the target can be something else than the rendered copy */
	c = rn_ok();
	c.tgt.stx_attributes = 0;
	why = rn(&c);
	assert_string_equal(why, "the target is not the rendered copy");
	c = rn_ok();
	c.tmpfs = false;
	why = rn(&c);
	assert_string_equal(why, "the target is not the rendered copy");
	c = rn_ok();
	c.tgt.stx_nlink = 1;
	why = rn(&c);
	assert_string_equal(why, "the target is not the rendered copy");
	c = rn_ok();
	c.tgt.stx_uid = 0;
	why = rn(&c);
	assert_string_equal(why, "the target is not the rendered copy");
	c = rn_ok();
	c.tgt.stx_mode = S_IFDIR | 0700;
	why = rn(&c);
	assert_string_equal(why, "the target is not the rendered copy");
	/* a kernel that does not tell: refused */
	c = rn_ok();
	c.tgt.stx_attributes_mask = 0;
	why = rn(&c);
	assert_string_equal(why, "the kernel does not tell the file's identity");
	c = rn_ok();
	c.sdir.stx_mask &= ~STATX_MNT_ID;
	why = rn(&c);
	assert_string_equal(why, "the kernel does not tell the file's identity");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_status),   cmocka_unit_test(test_parse_stat_exit),
		cmocka_unit_test(test_bucket),         cmocka_unit_test(test_path_norm),
		cmocka_unit_test(test_rename_refusal),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
