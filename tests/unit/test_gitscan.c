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
		put32(x, 0); /* ctime, mtime, dev, ino */
	put32(x, mode);
	for (int i = 0; i < 3; i++)
		put32(x, 0); /* uid, gid, size */
	x->n += x->hash;     /* object name */
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

static void put(const char *root, const char *rel, const char *content, mode_t mode)
{
	char p[512];
	snprintf(p, sizeof(p), "%s/%s", root, rel);
	int fd = open(p, O_CREAT | O_WRONLY | O_TRUNC | O_CLOEXEC, mode);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, content, strlen(content)), (ssize_t)strlen(content));
	close(fd);
}

static bool exists(const char *root, const char *rel)
{
	char p[512];
	struct stat st;
	snprintf(p, sizeof(p), "%s/%s", root, rel);
	return lstat(p, &st) == 0;
}

/* a repository git init would make: inert */
static void repo(const char *root, const char *dir, const char *config)
{
	char p[512];
	snprintf(p, sizeof(p), "%s/.git", dir);
	mkpath(root, p, true);
	snprintf(p, sizeof(p), "%s/.git/hooks", dir);
	mkpath(root, p, true);
	snprintf(p, sizeof(p), "%s/.git/hooks/pre-commit.sample", dir);
	put(root, p, "#!/bin/sh\n", 0755);
	snprintf(p, sizeof(p), "%s/.git/config", dir);
	put(root, p, config, 0644);
}

#define INERT "[core]\n\trepositoryformatversion = 0\n\tbare = false\n"
#define ARMED INERT "\tfsmonitor = ./fsmon.sh\n"

static void settle(const char *root, struct timespec since, bool disarm, ab_strv *found)
{
	struct stat st;
	assert_int_equal(stat(root, &st), 0);
	ab_gitnest_root r = {.path = root, .dev = st.st_dev, .ino = st.st_ino};
	ab_err err = {0};
	assert_int_equal(ab_gitnest_settle(&r, 1, NULL, since, disarm, found, &err), 0);
}

static const char *found_with(const ab_strv *found, const char *what)
{
	for (size_t i = 0; i < found->n; i++)
		if (strstr(found->v[i], what))
			return found->v[i];
	return NULL;
}

static void test_settle(void **state)
{
	(void)state;
	char root[] = "/tmp/abgitnest-XXXXXX";
	assert_non_null(mkdtemp(root));
	/* before the run */
	repo(root, ".", ARMED); /* the root's own: protected, left */
	mkpath(root, "mine", true);
	repo(root, "mine", INERT);
	put(root, "mine/.git/hooks/pre-commit", "#!/bin/sh\n", 0755); /* the user's own hook */
	mkpath(root, "old", true);
	repo(root, "old", INERT); /* armed below, during the run */
	mkpath(root, "oldhook", true);
	repo(root, "oldhook", INERT);
	mkpath(root, "linked", true);
	repo(root, "linked", INERT);
	put(root, "linked/hook.sh", "#!/bin/sh\n", 0755);
	char lp[512];
	snprintf(lp, sizeof(lp), "%s/linked/.git/hooks/pre-commit", root);
	assert_int_equal(symlink("../../hook.sh", lp), 0);
	struct timespec since;
	clock_gettime(CLOCK_REALTIME_COARSE, &since);
	since.tv_nsec += 20000000;
	if (since.tv_nsec >= 1000000000) {
		since.tv_sec++;
		since.tv_nsec -= 1000000000;
	}
	nanosleep(&(struct timespec){0, 60000000}, NULL);
	/* during the run */
	put(root, "old/.git/config", ARMED, 0644);
	put(root, "oldhook/.git/hooks/post-index-change", "#!/bin/sh\n", 0755);
	put(root, "linked/hook.sh", "#!/bin/sh\n", 0755); /* the user's hook, a link, changed */
	mkpath(root, "clone", true);
	repo(root, "clone", INERT "[remote \"origin\"]\n\turl = ../x\n");
	mkpath(root, "deep", true);
	mkpath(root, "deep/a", true);
	mkpath(root, "deep/a/\x1b]0;x\x07", true);
	repo(root, "deep/a/\x1b]0;x\x07", ARMED);
	mkpath(root, "gf", true);
	mkpath(root, "gf/.hidden", true); /* a gitdir by another name */
	put(root, "gf/.hidden/HEAD", "ref: refs/heads/main\n", 0644);
	mkpath(root, "gf/.hidden/objects", true);
	mkpath(root, "gf/.hidden/refs", true);
	put(root, "gf/.hidden/config", ARMED, 0644);
	put(root, "gf/.git", "gitdir: .hidden\n", 0644);
	mkpath(root, "ln", true);
	char p[512], t[512];
	snprintf(p, sizeof(p), "%s/ln/.git", root);
	snprintf(t, sizeof(t), "%s/mine/.git", root);
	assert_int_equal(symlink(t, p), 0);
	mkpath(root, "taken", true);
	repo(root, "taken", ARMED);
	put(root, "taken/.git/config.agentbox-disarmed", "", 0644);

	ab_strv found = {0};
	settle(root, since, false, &found); /* the ablation: judged, nothing moved */
	assert_non_null(found_with(&found, "LEFT ARMED (test ablation): "));
	assert_true(exists(root, "old/.git"));
	ab_strv_free(&found);

	settle(root, since, true, &found);
	for (size_t i = 0; i < found.n; i++)
		print_message("%s\n", found.v[i]);
	assert_true(exists(root, ".git/config")); /* the root's own */
	assert_true(exists(root, "mine/.git"));   /* armed by the user, untouched */
	assert_true(exists(root, "clone/.git"));  /* inert */
	/* a git directory stays one, without what armed it */
	assert_false(exists(root, "old/.git/config"));
	assert_true(exists(root, "old/.git/config.agentbox-disarmed"));
	assert_true(exists(root, "old/.git/hooks.agentbox-disarmed/pre-commit.sample"));
	assert_non_null(found_with(&found, "old/.git (core.fsmonitor in config, line 4): moved "
					   "config to config.agentbox-disarmed, hooks to "
					   "hooks.agentbox-disarmed;"));
	assert_false(exists(root, "oldhook/.git/hooks"));
	assert_non_null(found_with(&found, "hook hooks/post-index-change"));
	assert_false(exists(root, "linked/.git/hooks"));
	/* a gitfile or a link is moved whole; what it names is judged first,
	 * whatever the order of the directory's entries */
	assert_false(exists(root, "gf/.hidden/config")); /* bare-shaped, armed */
	assert_false(exists(root, "gf/.git"));
	assert_true(exists(root, "gf/.git.agentbox-disarmed"));
	assert_non_null(found_with(&found, "bare git repository armed during the run: "));
	assert_false(exists(root, "ln/.git"));
	assert_true(exists(root, "ln/.git.agentbox-disarmed"));
	assert_non_null(found_with(&found, ".git is a symbolic link"));
	assert_true(exists(root, "taken/.git/config.agentbox-disarmed-2"));
	const char *esc = found_with(&found, "deep/a/\\x1b]0;x\\x07/.git");
	assert_non_null(esc);
	assert_null(strchr(esc, '\x1b'));
	assert_int_equal(found.n, 8);
	ab_strv_free(&found);
	settle(root, since, true, &found); /* settled: nothing left */
	assert_int_equal(found.n, 0);
	/* moved back in a later run: its change time is new, so disarmed again */
	clock_gettime(CLOCK_REALTIME_COARSE, &since);
	nanosleep(&(struct timespec){0, 30000000}, NULL);
	snprintf(p, sizeof(p), "%s/old/.git/config.agentbox-disarmed", root);
	snprintf(t, sizeof(t), "%s/old/.git/config", root);
	assert_int_equal(rename(p, t), 0);
	settle(root, since, true, &found);
	assert_int_equal(found.n, 1);
	assert_false(exists(root, "old/.git/config"));
	ab_strv_free(&found);
	char cmd[600];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	assert_int_equal(system(cmd), 0);
}

/* a bare-shaped git directory at REL */
static void bare(const char *root, const char *rel, const char *config)
{
	char p[512];
	mkpath(root, rel, true);
	snprintf(p, sizeof(p), "%s/HEAD", rel);
	put(root, p, "ref: refs/heads/main\n", 0644);
	snprintf(p, sizeof(p), "%s/objects", rel);
	mkpath(root, p, true);
	snprintf(p, sizeof(p), "%s/refs", rel);
	mkpath(root, p, true);
	snprintf(p, sizeof(p), "%s/config", rel);
	put(root, p, config, 0644);
}

/* REL: a link of run TAG to its store entry N in grant 3 */
static void kept_off(const char *root, const char *rel, int n)
{
	char p[512], t[64];
	snprintf(p, sizeof(p), "%s/%s", root, rel);
	snprintf(t, sizeof(t), "/.agentbox-git/3/abcd.%d", n);
	assert_int_equal(symlink(t, p), 0);
}

/* A gitfile and the git directory it names were both kept off the host
 * while the run lasted (links to the store): the gitfile is judged by what
 * it names after the run, whichever of the two the walk meets first, so
 * it is moved aside and `git submodule update` can make it again. */
static void test_settle_kept_off(void **state)
{
	(void)state;
	char root[] = "/tmp/abgitnest-XXXXXX";
	assert_non_null(mkdtemp(root));
	struct timespec since;
	clock_gettime(CLOCK_REALTIME_COARSE, &since);
	nanosleep(&(struct timespec){0, 30000000}, NULL);
	mkpath(root, ".agentbox-git", true);
	put(root, ".agentbox-git/abcd.1", "gitdir: .evil\n", 0644);
	bare(root, ".agentbox-git/abcd.2", ARMED);
	put(root, ".agentbox-git/abcd.3", "gitdir: ../bare2\n", 0644);
	bare(root, ".agentbox-git/abcd.4", ARMED);
	put(root, ".agentbox-git/abcd.5", "gitdir: ../z/y/.evil\n", 0644);
	bare(root, ".agentbox-git/abcd.6", ARMED);
	mkpath(root, "sub", true); /* beside it */
	kept_off(root, "sub/.git", 1);
	kept_off(root, "sub/.evil", 2);
	mkpath(root, "b", true); /* in the directory above, maybe listed already */
	kept_off(root, "b/.git", 3);
	kept_off(root, "bare2", 4);
	mkpath(root, "a", true); /* in a directory maybe walked later */
	kept_off(root, "a/.git", 5);
	mkpath(root, "z", true);
	mkpath(root, "z/y", true);
	kept_off(root, "z/y/.evil", 6);

	struct stat st;
	assert_int_equal(stat(root, &st), 0);
	ab_gitnest_root r = {
		.path = root, .dev = st.st_dev, .ino = st.st_ino, .tag = "abcd", .index = 3};
	ab_strv found = {0};
	ab_err err = {0};
	assert_int_equal(ab_gitnest_settle(&r, 1, NULL, since, true, &found, &err), 0);
	for (size_t i = 0; i < found.n; i++)
		print_message("%s\n", found.v[i]);
	const char *gitfiles[] = {"sub/.git", "b/.git", "a/.git"};
	const char *dirs[] = {"sub/.evil", "bare2", "z/y/.evil"};
	for (size_t i = 0; i < 3; i++) {
		char p[64];
		assert_false(exists(root, gitfiles[i]));
		snprintf(p, sizeof(p), "%s.agentbox-disarmed", gitfiles[i]);
		assert_true(exists(root, p));
		snprintf(p, sizeof(p), "%s/config", dirs[i]);
		assert_false(exists(root, p)); /* and it is disarmed on its own */
		snprintf(p, sizeof(p), "%s/config.agentbox-disarmed", dirs[i]);
		assert_true(exists(root, p));
	}
	assert_int_equal(found.n, 6);
	assert_false(exists(root, ".agentbox-git")); /* every entry back */
	ab_strv_free(&found);
	char cmd[600];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	assert_int_equal(system(cmd), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_versions),
		cmocka_unit_test(test_hostile),
		cmocka_unit_test(test_settle),
		cmocka_unit_test(test_settle_kept_off),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
