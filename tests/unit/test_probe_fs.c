/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for the helpers of the file, secret and persistence probes
 * (src/escape/probes/probe_fsutil.c): the secret sweep (what it reads, skips and
 * counts, on hostile trees), the `..` walk that tells whether a directory
 * fd reaches outside the root (proved with a chroot in an unprivileged
 * user namespace), pread that leaves a shared offset alone, path helpers.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "unit.h"
#include "../../src/escape/probes/probe_fsutil.h"

#define TOK_A "ABCANARY-TEST-0123456789abcdef0123456789abcdef"
#define TOK_B "ABCANARY-HOME-fedcba9876543210fedcba9876543210"

static char g_dir[256];

static void put(const char *rel, const char *content)
{
	char p[512];
	snprintf(p, sizeof(p), "%s/%s", g_dir, rel);
	FILE *f = fopen(p, "we");
	assert_non_null(f);
	fputs(content, f);
	fclose(f);
}

static void sub(const char *rel)
{
	char p[512];
	snprintf(p, sizeof(p), "%s/%s", g_dir, rel);
	assert_int_equal(mkdir(p, 0700), 0);
}

/* A hostile little tree: tokens in files, in .git, behind a symlink, a
 * FIFO (must not block), near misses, deep nesting. */
static int setup_tree(void **state)
{
	snprintf(g_dir, sizeof(g_dir), "/tmp/abtest-probefs-XXXXXX");
	assert_non_null(mkdtemp(g_dir));
	sub("a");
	sub("a/b");
	sub("a/b/c");
	sub("a/b/c/d");
	sub(".git");
	sub("ws");
	put("a/one.txt", "x=" TOK_A "\n");
	put("a/b/two.txt", TOK_B " and " TOK_A);
	put("a/b/c/d/deep.txt", TOK_A);
	put(".git/config", TOK_B);
	put("ws/.env", TOK_A);
	put("near.txt", "ABCANARY-TEST-0123 ABCANARY-x-0123456789abcdef0123456789abcdef "
			"ABCANARY-TEST-0123456789abcdef0123456789abcdef0 "
			"ABCANARY-TEST-0123456789ABCDEF0123456789ABCDEF");
	char p[512], q[512];
	snprintf(p, sizeof(p), "%s/fifo", g_dir);
	assert_int_equal(mkfifo(p, 0600), 0);
	snprintf(p, sizeof(p), "%s/link", g_dir);
	snprintf(q, sizeof(q), "%s/a/one.txt", g_dir);
	assert_int_equal(symlink(q, p), 0);
	*state = NULL;
	return 0;
}

static int teardown_tree(void **state)
{
	char cmd[600];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", g_dir);
	return system(cmd) == 0 ? 0 : -1;
}

static int walk(int depth, const char *skip_name, const char *skip_path)
{
	struct fsp_walk w;
	char *buf = malloc(READ_MAX);
	assert_non_null(buf);
	fsp_walk_init(&w, fsp_scan_count, NULL, buf, depth, 5000);
	w.skip_name = skip_name;
	w.skip_path = skip_path;
	int fd = open(g_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	assert_true(fd >= 0);
	fsp_walk_dir(&w, fd, g_dir, 1);
	free(buf);
	return w.tokens;
}

static void test_walk_counts_tokens(void **state)
{
	char ws[512];
	snprintf(ws, sizeof(ws), "%s/ws", g_dir);
	/* one + two(2) + deep + .git + ws: never the link, the FIFO, near misses */
	assert_int_equal(walk(8, NULL, NULL), 6);
	assert_int_equal(walk(8, ".git", NULL), 5);
	assert_int_equal(walk(8, ".git", ws), 4);
}

static void test_walk_depth(void **state)
{
	/* depth 1: the top only (near.txt holds no token) */
	assert_int_equal(walk(1, NULL, NULL), 0);
	/* depth 2: a/one.txt, .git/config, ws/.env */
	assert_int_equal(walk(2, NULL, NULL), 3);
	/* depth 4 stops above a/b/c/d */
	assert_int_equal(walk(4, NULL, NULL), 5);
}

static void test_walk_single_file_and_big_file(void **state)
{
	/* a token beyond READ_MAX is not read: the sweep is bounded */
	char p[512];
	snprintf(p, sizeof(p), "%s/big.bin", g_dir);
	int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, READ_MAX), 0);
	assert_int_equal(pwrite(fd, TOK_A, strlen(TOK_A), READ_MAX), (ssize_t)strlen(TOK_A));
	assert_int_equal(pwrite(fd, TOK_B, strlen(TOK_B), 100), (ssize_t)strlen(TOK_B));
	close(fd);
	struct fsp_walk w;
	char *buf = malloc(READ_MAX);
	assert_non_null(buf);
	fsp_walk_init(&w, fsp_scan_count, NULL, buf, 1, 5000);
	int dfd = open(g_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	fsp_walk_file(&w, dfd, "big.bin", p);
	assert_int_equal(w.files, 1);
	assert_int_equal(w.tokens, 1);
	/* never opened: a FIFO (would block without O_NONBLOCK), a symlink */
	fsp_walk_file(&w, dfd, "fifo", "fifo");
	fsp_walk_file(&w, dfd, "link", "link");
	assert_int_equal(w.files, 1);
	assert_int_equal(w.unreadable, 2);
	close(dfd);
	free(buf);
	unlink(p);
}

static void test_read_all_keeps_offset(void **state)
{
	char p[512], buf[64] = {0};
	snprintf(p, sizeof(p), "%s/a/one.txt", g_dir);
	int fd = open(p, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(lseek(fd, 3, SEEK_SET), 3);
	ssize_t n = fsp_fd_read_all(fd, buf, sizeof(buf) - 1);
	assert_int_equal(n, (ssize_t)strlen("x=" TOK_A "\n"));
	assert_string_equal(buf, "x=" TOK_A "\n");
	assert_int_equal(lseek(fd, 0, SEEK_CUR), 3);
	close(fd);
	/* a directory reads nothing */
	fd = open(g_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	assert_int_equal(fsp_fd_read_all(fd, buf, sizeof(buf)), -1);
	close(fd);
}

static void test_paths(void **state)
{
	char b[8];
	assert_true(fsp_pf(b, sizeof(b), "%s", "1234567"));
	assert_false(fsp_pf(b, sizeof(b), "%s", "12345678"));
	assert_true(fsp_under("/tmp/x", "/tmp"));
	assert_true(fsp_under("/tmp", "/tmp"));
	assert_false(fsp_under("/tmpx", "/tmp"));
	assert_false(fsp_under(NULL, "/tmp"));
	assert_false(fsp_under("/tmp", NULL));
	assert_string_equal(fsp_ename(ENOENT), "ENOENT");
	assert_non_null(fsp_ename(99999));
}

static void test_mountinfo_idmapped(void **state)
{
	(void)state;
	const char *mi = "67 80 254:0 /tmp/ws /tmp/ws rw,nosuid,nodev,relatime,idmapped - ext4 "
			 "/dev/vda rw\n"
			 "87 79 254:0 /srv /srv rw,nosuid,nodev,relatime - ext4 /dev/vda "
			 "rw,idmapped\n"
			 "6 1 0:42 / /odd ro,xidmapped,idmappedx - tmpfs tmpfs ro\n"
			 "7 1 0:42 / /first idmapped,ro - tmpfs tmpfs ro\n"
			 "8 1 0:42 /short";
	assert_int_equal(fsp_mountinfo_idmapped(mi, 67), 1);
	assert_int_equal(fsp_mountinfo_idmapped(mi, 87), 0); /* super options do not count */
	assert_int_equal(fsp_mountinfo_idmapped(mi, 6), 0);
	assert_int_equal(fsp_mountinfo_idmapped(mi, 7), 1);
	assert_int_equal(fsp_mountinfo_idmapped(mi, 8), -1); /* truncated line */
	assert_int_equal(fsp_mountinfo_idmapped(mi, 9), -1);
	assert_int_equal(fsp_mountinfo_idmapped("", 1), -1);
	assert_int_equal(fsp_mountinfo_idmapped("x y\n\n1", 1), -1);
	/* this process's own root is a real mount, not idmapped */
	assert_int_equal(fsp_path_idmapped("/"), 0);
}

static void test_dir_top_inside(void **state)
{
	int top = -1;
	int fd = open(g_dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	assert_int_equal(fsp_dir_top(fd, &top), 0);
	close(fd);
	fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	assert_int_equal(fsp_dir_top(fd, &top), 0);
	close(fd);
	assert_int_equal(top, -1);
}

/* In a child: keep an fd on the old root, chroot into the tree (in a new
 * user and mount namespace, no privilege needed): the kept fd must be
 * seen as reaching outside, a fresh "/" must not. */
static void test_dir_top_outside_after_chroot(void **state)
{
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		int old = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC), top = -1;
		if (old < 0)
			_exit(10);
		if (unshare(CLONE_NEWUSER | CLONE_NEWNS) < 0)
			_exit(77); /* no user namespaces here: skip */
		if (chroot(g_dir) < 0 || chdir("/") < 0)
			_exit(11);
		if (fsp_dir_top(old, &top) != 1 || top < 0)
			_exit(12);
		/* the top reached is the real root: a/one.txt is at g_dir there */
		char rel[300];
		snprintf(rel, sizeof(rel), "%s/a/one.txt", g_dir + 1);
		int f = openat(top, rel, O_RDONLY | O_CLOEXEC);
		if (f < 0)
			_exit(13);
		int now = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC), t2 = -1;
		_exit(fsp_dir_top(now, &t2) == 0 ? 0 : 14);
	}
	int st = 0;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	if (WEXITSTATUS(st) == 77)
		skip();
	assert_int_equal(WEXITSTATUS(st), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_walk_counts_tokens),
		cmocka_unit_test(test_mountinfo_idmapped),
		cmocka_unit_test(test_walk_depth),
		cmocka_unit_test(test_walk_single_file_and_big_file),
		cmocka_unit_test(test_read_all_keeps_offset),
		cmocka_unit_test(test_paths),
		cmocka_unit_test(test_dir_top_inside),
		cmocka_unit_test(test_dir_top_outside_after_chroot),
	};
	return cmocka_run_group_tests(tests, setup_tree, teardown_tree);
}
