/* SPDX-License-Identifier: MIT */
/* Reaching mount targets inside the staging root: see mount_walk.h. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "agentbox/common.h"
#include "mount_walk.h"

void ab_walk_init(ab_walk *w, int stage_fd)
{
	memset(w, 0, sizeof(*w));
	w->stage = stage_fd;
	for (size_t i = 0; i < AB_WALK_KEEP; i++)
		w->keep[i].fd = -1;
}

static void drop(ab_walk *w, size_t i)
{
	ab_closep(&w->keep[i].fd);
	free(w->keep[i].path);
	w->keep[i].path = NULL;
}

void ab_walk_free(ab_walk *w)
{
	for (size_t i = 0; i < AB_WALK_KEEP; i++)
		drop(w, i);
}

void ab_walk_forget(ab_walk *w, const char *path)
{
	for (size_t i = 0; i < AB_WALK_KEEP; i++)
		if (w->keep[i].path && ab_path_is_under(w->keep[i].path, path))
			drop(w, i);
}

/* Create `name` in `dfd`: a directory when `dir`, else an empty file; one
 * that exists (made meanwhile) is left to the open that follows. */
static int make(int dfd, const char *name, bool dir)
{
	int r;
	if (dir) {
		r = mkdirat(dfd, name, 0755);
	} else {
		r = openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
		if (r >= 0)
			close(r), r = 0;
	}
	return r < 0 && errno != EEXIST ? -errno : 0;
}

/* One component `name` in the directory `dfd`, never followed if it is a
 * symlink; created when missing and `create` (a directory when `dir`, else
 * an empty file).  Returns an O_PATH fd and its mode, or -errno. */
static int step(int dfd, const char *name, bool dir, bool create, mode_t *mode)
{
	int fd = openat(dfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT && create) {
		int r = make(dfd, name, dir);
		if (r < 0)
			return r;
		fd = openat(dfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	}
	if (fd < 0)
		return -errno;
	struct stat st;
	if (fstat(fd, &st) < 0) {
		int e = errno;
		close(fd);
		return -e;
	}
	if (S_ISLNK(st.st_mode)) {
		close(fd);
		return -ELOOP;
	}
	*mode = st.st_mode;
	return fd;
}

/* Component by component from the stage (any path, "/" gives the stage
 * itself): where something may be created on the way. */
static int walk_slow(int stage_fd, const char *dst, bool dir, bool create, bool *is_dir)
{
	char buf[PATH_MAX];
	if (strlen(dst) >= sizeof(buf))
		return -ENAMETOOLONG;
	strcpy(buf, dst);
	int cur = fcntl(stage_fd, F_DUPFD_CLOEXEC, 3);
	if (cur < 0)
		return -errno;
	mode_t m = S_IFDIR;
	char *save = NULL;
	for (char *comp = strtok_r(buf, "/", &save); comp;) {
		char *next = strtok_r(NULL, "/", &save);
		int fd = step(cur, comp, next || dir, create, &m);
		close(cur);
		if (fd < 0)
			return fd;
		if (next && !S_ISDIR(m)) {
			close(fd);
			return -ENOTDIR;
		}
		cur = fd;
		comp = next;
	}
	if (is_dir)
		*is_dir = S_ISDIR(m);
	return cur;
}

/* Absolute, not "/", no empty, "." or ".." component, no trailing slash:
 * the plan's own spelling, which the quick way takes. */
static bool plain(const char *p)
{
	if (p[0] != '/' || p[1] == '\0' || strlen(p) >= PATH_MAX)
		return false;
	for (const char *c = p; *c; c++) {
		if (*c != '/')
			continue;
		const char *n = c + 1;
		if (*n == '\0' || *n == '/')
			return false;
		if (n[0] == '.' &&
		    (n[1] == '/' || n[1] == '\0' || (n[1] == '.' && (n[2] == '/' || n[2] == '\0'))))
			return false;
	}
	return true;
}

/* openat2 from `dfd`, refusing any symlink on the way and at the end
 * (ELOOP; O_NOFOLLOW is not set, so a last symlink is refused, not opened),
 * and staying beneath `dfd`.  Returns an O_PATH fd or -errno. */
static int open_beneath(int dfd, const char *path, int flags)
{
	struct open_how how = {.flags = (unsigned long long)(O_PATH | O_CLOEXEC | flags),
			       .resolve = RESOLVE_NO_SYMLINKS | RESOLVE_BENEATH};
	int fd = (int)syscall(SYS_openat2, dfd, path, &how, sizeof(how));
	return fd < 0 ? -errno : fd;
}

/* The last component, from its parent: the kernel refuses a symlink there,
 * so no fstat is needed; `is_dir`, when asked, comes from O_DIRECTORY (an
 * ENOTDIR then opens it as what it is). */
static int step_quick(int dfd, const char *name, bool dir, bool create, bool *is_dir)
{
	int flags = is_dir ? O_DIRECTORY : 0;
	int fd = open_beneath(dfd, name, flags);
	if (fd == -ENOENT && create) {
		int r = make(dfd, name, dir);
		fd = r < 0 ? r : open_beneath(dfd, name, flags);
	}
	if (fd == -ENOTDIR && is_dir) {
		*is_dir = false;
		return open_beneath(dfd, name, 0);
	}
	if (fd >= 0 && is_dir)
		*is_dir = true;
	return fd;
}

/* The directory `dst[0..len)` (borrowed: kept by the walk), opened in one
 * openat2 that follows no symlink and stays beneath the stage. */
static int parent_fd(ab_walk *w, const char *dst, size_t len, bool create)
{
	if (len == 0)
		return w->stage;
	for (size_t i = 0; i < AB_WALK_KEEP; i++)
		if (w->keep[i].path && strlen(w->keep[i].path) == len &&
		    memcmp(w->keep[i].path, dst, len) == 0)
			return w->keep[i].fd;
	_cleanup_free_ char *path = strndup(dst, len);
	if (!path)
		return -ENOMEM;
	int fd = open_beneath(w->stage, path + 1, O_DIRECTORY);
	if (fd == -ENOENT && create) /* the plain walk creates what is missing */
		fd = walk_slow(w->stage, path, true, create, NULL);
	if (fd < 0)
		return fd;
	size_t slot = AB_WALK_KEEP;
	for (size_t i = 0; i < AB_WALK_KEEP && slot == AB_WALK_KEEP; i++)
		if (!w->keep[i].path)
			slot = i;
	if (slot == AB_WALK_KEEP)
		slot = w->next++ % AB_WALK_KEEP;
	drop(w, slot);
	w->keep[slot].path = path;
	w->keep[slot].fd = fd;
	path = NULL;
	return fd;
}

int ab_walk_open(ab_walk *w, const char *dst, bool dir, bool create, bool *is_dir)
{
	if (!plain(dst))
		return walk_slow(w->stage, dst, dir, create, is_dir);
	const char *base = strrchr(dst, '/');
	int pfd = parent_fd(w, dst, (size_t)(base - dst), create);
	if (pfd < 0)
		return pfd;
	return step_quick(pfd, base + 1, dir, create, is_dir);
}
