/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target (fuzzing only): review mode's reader of an overlay upper
 * layer (src/observe/review.c), which the sandbox writes.  The input is a
 * program that builds two real trees in a scratch directory, an upper
 * layer and a workspace: directories, files, symlinks, whiteouts (when
 * mknod is allowed), FIFOs, user.overlay.* attributes with fuzzed values,
 * names with control bytes and ".git".  Then ab_review_scan compares them
 * and ab_review_print lists the result.  Checked: every change has a
 * non-empty relative path without "." or ".." components; a whiteout or a
 * special entry is never listed as a plain file; the listing never holds a
 * raw control byte.
 */
#include "agentbox/review.h"

#include <fcntl.h>
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char base[64];

static const char *const names[] = {"a",      "b.c", ".git",   "x\n\x1b[2J",
				    "..dots", "d",   "config", "HEAD"};
static const char *const xattrs[] = {"user.overlay.opaque",   "user.overlay.redirect",
				     "user.overlay.metacopy", "user.overlay.origin",
				     "user.overlay.whiteout", "user.other"};

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *f)
{
	return remove(p) < 0 ? -1 : 0;
}

static void rm_tree(const char *p)
{
	char t[96];
	for (int i = 0; i < 2; i++) {
		snprintf(t, sizeof(t), "%s/%c", p, i ? 'l' : 'u');
		if (nftw(t, rm_one, 16, FTW_DEPTH | FTW_PHYS) < 0 && access(t, F_OK) == 0)
			abort();
	}
}

/* One operation: 3 bytes (op, name, arg) and maybe a payload. */
static size_t step(const uint8_t *d, size_t n, char *cur, size_t cap)
{
	if (n < 3)
		return n;
	const char *name = names[d[1] % (sizeof(names) / sizeof(*names))];
	char p[4096];
	snprintf(p, sizeof(p), "%s/%s", cur, name);
	size_t used = 3, len = d[2] % 16;
	if (len > n - 3)
		len = n - 3;
	switch (d[0] % 9) {
	case 0: mkdir(p, 0755); break;
	case 1: {
		int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_NONBLOCK,
			      0644 | (d[2] & 0111));
		if (fd >= 0) {
			if (write(fd, d + 3, len) < 0) {
			}
			close(fd);
		}
		used += len;
		break;
	}
	case 2: {
		char t[32] = {0};
		memcpy(t, d + 3, len < 31 ? len : 31);
		symlink(t[0] ? t : "/etc", p);
		used += len;
		break;
	}
	case 3: mknod(p, S_IFCHR | 0, makedev(0, 0)); break;
	case 4: mkfifo(p, 0644); break;
	case 5:
		setxattr(cur, xattrs[d[2] % (sizeof(xattrs) / sizeof(*xattrs))], d + 3,
			 len < 4 ? len : 4, 0);
		used += len;
		break;
	case 6: {
		struct stat st;
		if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode) && strlen(p) < cap)
			strcpy(cur, p);
		break;
	}
	case 7: { /* switch tree */
		snprintf(cur, cap, "%s/%c", base, (d[2] & 1) ? 'l' : 'u');
		break;
	}
	default: setxattr(p, xattrs[d[2] % (sizeof(xattrs) / sizeof(*xattrs))], "y", 1, 0); break;
	}
	return used;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!base[0]) {
		snprintf(base, sizeof(base), "/tmp/fuzz-review.%d", (int)getpid());
		mkdir(base, 0700);
	}
	rm_tree(base);
	char u[96], l[96], cur[4096];
	snprintf(u, sizeof(u), "%s/u", base);
	snprintf(l, sizeof(l), "%s/l", base);
	mkdir(u, 0755);
	mkdir(l, 0755);
	strcpy(cur, u);
	for (size_t i = 0; i < size && i < 4096;)
		i += step(data + i, size - i, cur, sizeof(cur));
	ab_changeset cs;
	ab_err err = {0};
	if (ab_review_scan(l, u, &cs, &err) < 0) {
		if (!err.msg[0])
			abort();
		return 0;
	}
	for (size_t i = 0; i < cs.n; i++) {
		const char *p = cs.v[i].path;
		if (!p[0] || p[0] == '/' || strstr(p, "//"))
			abort();
		char *dup = strdup(p), *save = NULL;
		for (char *c = strtok_r(dup, "/", &save); c; c = strtok_r(NULL, "/", &save))
			if (strcmp(c, ".") == 0 || strcmp(c, "..") == 0)
				abort();
		free(dup);
		struct stat st;
		char full[4200];
		snprintf(full, sizeof(full), "%s/%s", u, p);
		if (cs.v[i].kind != AB_CHG_DELETED && cs.v[i].type == AB_CHT_FILE &&
		    (lstat(full, &st) < 0 || !S_ISREG(st.st_mode)))
			abort();
	}
	char *buf = NULL;
	size_t blen = 0;
	FILE *out = open_memstream(&buf, &blen);
	ab_review_print("/x", &cs, out);
	fclose(out);
	for (size_t i = 0; i < blen; i++)
		if ((unsigned char)buf[i] < 0x20 && buf[i] != '\n')
			abort();
	free(buf);
	ab_changeset_free(&cs);
	return 0;
}
