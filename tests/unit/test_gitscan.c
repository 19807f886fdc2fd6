/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for src/observe/gitscan.c: the git index parser (versions 2-4, SHA-1
 * and SHA-256 names, hostile input) and the after-run findings on a real
 * directory tree.
 */
#include "unit.h"

#include "agentbox/gitscan.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

typedef struct ibuf {
	uint8_t b[8192];
	size_t n;
	size_t hash;
	int version;
	char prev[256];
} ibuf;

static void put32(ibuf *x, uint32_t v)
{
	x->b[x->n++] = (uint8_t)(v >> 24);
	x->b[x->n++] = (uint8_t)(v >> 16);
	x->b[x->n++] = (uint8_t)(v >> 8);
	x->b[x->n++] = (uint8_t)v;
}

static void header(ibuf *x, int version, uint32_t count, size_t hash)
{
	memset(x, 0, sizeof(*x));
	memcpy(x->b, "DIRC", 4);
	x->n = 4;
	put32(x, (uint32_t)version);
	put32(x, count);
	x->hash = hash;
	x->version = version;
}

static void entry(ibuf *x, uint32_t mode, const char *path)
{
	size_t start = x->n;
	for (int i = 0; i < 6; i++)
		put32(x, 0);     /* ctime, mtime, dev, ino */
	put32(x, mode);
	for (int i = 0; i < 3; i++)
		put32(x, 0);     /* uid, gid, size */
	x->n += x->hash;         /* object name */
	size_t len = strlen(path);
	x->b[x->n++] = (uint8_t)((len > 0xfff ? 0xfff : len) >> 8);
	x->b[x->n++] = (uint8_t)(len > 0xfff ? 0xff : len);
	if (x->version == 4) {
		size_t common = 0;
		while (x->prev[common] && x->prev[common] == path[common])
			common++;
		size_t drop = strlen(x->prev) - common;
		assert_true(drop < 128);
		x->b[x->n++] = (uint8_t)drop;
		memcpy(x->b + x->n, path + common, len - common + 1);
		x->n += len - common + 1;
		snprintf(x->prev, sizeof(x->prev), "%s", path);
		return;
	}
	memcpy(x->b + x->n, path, len + 1);
	x->n += len + 1;
	while ((x->n - start) % 8)
		x->b[x->n++] = 0;
}

static void test_versions(void **state)
{
	(void)state;
	const size_t hashes[] = {20, 32};
	for (int version = 2; version <= 4; version++) {
		for (size_t h = 0; h < 2; h++) {
			ibuf x;
			header(&x, version, 4, hashes[h]);
			entry(&x, 0100644, "README");
			entry(&x, 0160000, "lib/sub");
			entry(&x, 0100755, "lib/sub2/x");
			entry(&x, 0160000, "lib/subz");
			ab_strv out = {0};
			ab_err err = {0};
			assert_int_equal(ab_git_index_gitlinks(x.b, x.n, hashes[h], &out, &err), 0);
			assert_int_equal(out.n, 2);
			assert_string_equal(out.v[0], "lib/sub");
			assert_string_equal(out.v[1], "lib/subz");
			ab_strv_free(&out);
		}
	}
}

static void test_hostile(void **state)
{
	(void)state;
	ibuf x;
	ab_strv out = {0};
	ab_err err = {0};
	header(&x, 2, 1, 20);
	entry(&x, 0160000, "sub");
	/* every truncation is an error, never a read past the end */
	for (size_t cut = 0; cut < x.n; cut++) {
		uint8_t *copy = malloc(cut ? cut : 1);
		memcpy(copy, x.b, cut);
		assert_int_equal(ab_git_index_gitlinks(copy, cut, 20, &out, &err), -EINVAL);
		free(copy);
		ab_strv_free(&out);
	}
	/* wrong magic, version, hash length, a count far beyond the data */
	header(&x, 5, 0, 20);
	assert_int_equal(ab_git_index_gitlinks(x.b, x.n, 20, &out, &err), -EINVAL);
	header(&x, 2, 0, 20);
	x.b[0] = 'X';
	assert_int_equal(ab_git_index_gitlinks(x.b, x.n, 20, &out, &err), -EINVAL);
	header(&x, 2, 0, 20);
	assert_int_equal(ab_git_index_gitlinks(x.b, x.n, 21, &out, &err), -EINVAL);
	header(&x, 2, 0xffffffffu, 20);
	assert_int_equal(ab_git_index_gitlinks(x.b, x.n, 20, &out, &err), -EINVAL);
	header(&x, 2, 3, 20);
	entry(&x, 0160000, "a");
	assert_int_equal(ab_git_index_gitlinks(x.b, x.n, 20, &out, &err), -EINVAL);
	ab_strv_free(&out);
	/* the extended flag in version 2 */
	header(&x, 2, 1, 20);
	entry(&x, 0160000, "a");
	x.b[12 + 60] |= 0x40;
	assert_int_equal(ab_git_index_gitlinks(x.b, x.n, 20, &out, &err), -EINVAL);
	/* version 4: dropping more than the previous path has */
	header(&x, 4, 2, 20);
	entry(&x, 0100644, "ab");
	entry(&x, 0160000, "ab/c");
	x.b[x.n - 4] = 9; /* "ab/c" after "ab": drop 0, then "/c\0"; make it drop 9 */
	assert_int_equal(ab_git_index_gitlinks(x.b, x.n, 20, &out, &err), -EINVAL);
	ab_strv_free(&out);
	/* a path with no NUL before the end */
	header(&x, 2, 1, 20);
	entry(&x, 0160000, "sub");
	memset(x.b + 12 + 62, 'A', x.n - (12 + 62));
	assert_int_equal(ab_git_index_gitlinks(x.b, x.n, 20, &out, &err), -EINVAL);
	ab_strv_free(&out);
}

static void mkpath(const char *root, const char *rel, bool dir)
{
	char p[512];
	snprintf(p, sizeof(p), "%s/%s", root, rel);
	if (dir)
		assert_int_equal(mkdir(p, 0755), 0);
	else
		close(open(p, O_CREAT | O_WRONLY | O_CLOEXEC, 0644));
}

static void test_findings(void **state)
{
	(void)state;
	char root[] = "/tmp/abgitscan-XXXXXX";
	assert_non_null(mkdtemp(root));
	mkpath(root, ".git", true);
	mkpath(root, "old", true);
	mkpath(root, "old/.git", true); /* before the run: not a finding */
	struct timespec since;
	sleep(1);
	clock_gettime(CLOCK_REALTIME_COARSE, &since);
	ab_strv before = {0}, found = {0};
	ab_err err = {0};
	assert_int_equal(ab_gitscan_snapshot(root, &before, &err), 0); /* no index: none */
	assert_int_equal(before.n, 0);
	mkpath(root, "new", true);
	mkpath(root, "new/\x1b]0;x\x07", true);
	mkpath(root, "new/\x1b]0;x\x07/.git", false); /* a gitfile counts too */
	assert_true(ab_gitscan_is_repo(root));
	assert_int_equal(ab_gitscan_findings(root, &before, since, true, &found, &err), 0);
	assert_int_equal(found.n, 1);
	assert_non_null(strstr(found.v[0], "new/\\x1b]0;x\\x07/.git"));
	assert_null(strchr(found.v[0], '\x1b'));
	ab_strv_free(&found);
	/* not a repository before the run (its .git, if any now, was a
	 * placeholder): nothing is looked for */
	assert_int_equal(ab_gitscan_findings(root, &before, since, false, &found, &err), 0);
	assert_int_equal(found.n, 0);
	char p[512];
	snprintf(p, sizeof(p), "%s/.git", root);
	rmdir(p);
	assert_false(ab_gitscan_is_repo(root));
	char cmd[600];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	assert_int_equal(system(cmd), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_versions),
		cmocka_unit_test(test_hostile),
		cmocka_unit_test(test_findings),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
