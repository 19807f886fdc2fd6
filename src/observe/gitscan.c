/* SPDX-License-Identifier: MIT */
/*
 * The gitlinks of a repository's index (include/agentbox/gitscan.h), for
 * the nested repositories settled after a run (gitnest.c).  Parent only;
 * the index parser is pure and fuzzed (tests/fuzz/fuzz_gitindex.c).
 *
 * Index format (Documentation/gitformat-index.txt): "DIRC", version 2, 3 or
 * 4, entry count; each entry 40 bytes of stat data (mode at offset 24), the
 * object name (20 or 32 bytes), 16 bits of flags, in version 3+ 16 more when
 * the extended flag is set, then the path: NUL-terminated and padded to a
 * multiple of 8 (versions 2, 3), or prefix-compressed against the previous
 * entry's path (version 4: a varint of bytes to drop, then the rest).
 */
#include "agentbox/gitscan.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static uint32_t be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* git's offset varint (version 4 path compression). */
static int varint(const uint8_t *p, size_t len, size_t *used, uint64_t *out)
{
	size_t i = 0;
	if (len == 0)
		return -1;
	uint64_t v = p[i] & 0x7f;
	while (p[i++] & 0x80) {
		if (i >= len || v > (UINT64_MAX >> 8))
			return -1;
		v = ((v + 1) << 7) | (p[i] & 0x7f);
	}
	*used = i;
	*out = v;
	return 0;
}

int ab_git_index_gitlinks(const uint8_t *buf, size_t len, size_t hash_len, ab_strv *out,
			  ab_err *err)
{
	if (hash_len != 20 && hash_len != 32)
		return ab_fail(err, EINVAL, "git index: hash length %zu", hash_len);
	if (len < 12 || memcmp(buf, "DIRC", 4) != 0)
		return ab_fail(err, EINVAL, "git index: no DIRC header");
	uint32_t version = be32(buf + 4), count = be32(buf + 8);
	if (version < 2 || version > 4)
		return ab_fail(err, EINVAL, "git index: version %u", version);
	if (count > AB_GIT_INDEX_ENTRIES)
		return ab_fail(err, EINVAL, "git index: %u entries", count);
	char path[AB_GIT_PATH_MAX + 1];
	size_t plen = 0; /* the previous path's length (version 4) */
	size_t off = 12;
	for (uint32_t i = 0; i < count; i++) {
		size_t start = off, fixed = 40 + hash_len + 2;
		if (len - off < fixed)
			return ab_fail(err, EINVAL, "git index: entry %u cut at byte %zu", i, off);
		uint32_t mode = be32(buf + off + 24);
		uint16_t flags =
			(uint16_t)(buf[off + 40 + hash_len] << 8 | buf[off + 41 + hash_len]);
		off += fixed;
		if (flags & 0x4000) { /* extended */
			if (version < 3 || len - off < 2)
				return ab_fail(err, EINVAL,
					       "git index: entry %u: bad extended flags", i);
			off += 2;
		}
		if (version == 4) {
			size_t used;
			uint64_t drop;
			if (varint(buf + off, len - off, &used, &drop) < 0 || drop > plen)
				return ab_fail(err, EINVAL,
					       "git index: entry %u: bad path prefix at byte %zu",
					       i, off);
			off += used;
			plen -= (size_t)drop;
		} else {
			plen = 0;
		}
		const uint8_t *nul = memchr(buf + off, '\0', len - off);
		if (!nul)
			return ab_fail(err, EINVAL, "git index: entry %u: unterminated path", i);
		size_t n = (size_t)(nul - (buf + off));
		if (plen + n > AB_GIT_PATH_MAX)
			return ab_fail(err, EINVAL, "git index: entry %u: path longer than %d", i,
				       AB_GIT_PATH_MAX);
		memcpy(path + plen, buf + off, n);
		plen += n;
		path[plen] = '\0';
		off += n + 1;
		if (version != 4) { /* NULs up to a multiple of 8 from the entry's start */
			size_t total = off - start;
			size_t pad = (8 - total % 8) % 8;
			if (len - off < pad)
				return ab_fail(err, EINVAL, "git index: entry %u: padding cut", i);
			off += pad;
		}
		if ((mode & 0170000) == 0160000 && ab_strv_push(out, path) < 0)
			return ab_fail(err, ENOMEM, "git index");
	}
	return 0;
}

/* The hash length of the repository at GITDIR (extensions.objectFormat). */
static size_t hash_len_of(int gitdir)
{
	int fd = openat(gitdir, "config", O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return 20;
	char buf[16384];
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 20;
	buf[n] = '\0';
	for (char *line = strtok(buf, "\n"); line; line = strtok(NULL, "\n"))
		if (strcasestr(line, "objectformat") && strcasestr(line, "sha256"))
			return 32;
	return 20;
}

int ab_gitscan_snapshot(const char *workspace, ab_strv *gitlinks, ab_err *err)
{
	_cleanup_close_ int ws = open(workspace, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (ws < 0)
		return 0;
	_cleanup_close_ int gd =
		openat(ws, ".git", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (gd < 0)
		return 0; /* no repository, or a gitfile (worktree): nothing to compare */
	_cleanup_close_ int fd = openat(gd, "index", O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size == 0)
		return 0;
	if ((uint64_t)st.st_size > AB_GIT_INDEX_MAX)
		return ab_fail(err, EFBIG, "git index of %s: larger than %u MiB", workspace,
			       AB_GIT_INDEX_MAX >> 20);
	void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	if (m == MAP_FAILED)
		return ab_fail(err, errno, "git index of %s", workspace);
	int r = ab_git_index_gitlinks(m, (size_t)st.st_size, hash_len_of(gd), gitlinks, err);
	munmap(m, (size_t)st.st_size);
	return r;
}
