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

/* One component `name` in the directory `dfd`, never followed if it is a
 * symlink; created when missing and `create` (a directory when `dir`, else
 * an empty file).  Returns an O_PATH fd and its mode, or -errno. */
static int step(int dfd, const char *name, bool dir, bool create, mode_t *mode)
{
	int fd = openat(dfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT && create) {
		int r;
		if (dir) {
			r = mkdirat(dfd, name, 0755);
		} else {
			r = openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
				   0644);
			if (r >= 0)
				close(r), r = 0;
		}
		if (r < 0 && errno != EEXIST)
			return -errno;
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
static int walk_slow(int stage_fd, const char *dst, bool dir, bool create, mode_t *mode)
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
	if (mode)
		*mode = m;
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
	struct open_how how = {.flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
			       .resolve = RESOLVE_NO_SYMLINKS | RESOLVE_BENEATH};
	int fd = (int)syscall(SYS_openat2, w->stage, path + 1, &how, sizeof(how));
	if (fd < 0 && ((errno == ENOENT && create) || errno == EAGAIN || errno == ENOSYS)) {
		/* to create what is missing; or a rename or mount raced the
		 * lookup; or no openat2: the plain walk decides */
		fd = walk_slow(w->stage, path, true, create, NULL);
		if (fd < 0)
			return fd;
	} else if (fd < 0) {
		return -errno;
	}
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

int ab_walk_open(ab_walk *w, const char *dst, bool dir, bool create, mode_t *mode)
{
	mode_t m;
	if (!plain(dst))
		return walk_slow(w->stage, dst, dir, create, mode);
	const char *base = strrchr(dst, '/');
	int pfd = parent_fd(w, dst, (size_t)(base - dst), create);
	if (pfd < 0)
		return pfd;
	int fd = step(pfd, base + 1, dir, create, &m);
	if (fd >= 0 && mode)
		*mode = m;
	return fd;
}
