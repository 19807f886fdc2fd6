/* SPDX-License-Identifier: MIT */
/*
 * cgroup v2 limits for the sandbox (memory.max, memory.swap.max, pids.max).
 * Parent process: ab_cgroup_setup() runs after clone, before the child is told
 * to go on, and moves the child into <base>/agentbox-<pid>;
 * ab_cgroup_cleanup() removes that cgroup after the sandbox exited.
 * The parsers and the write list are pure (any process) and unit-tested;
 * see include/agentbox/cgroup.h for where the cgroup is placed and why.
 */
#include "agentbox/cgroup.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "agentbox/profile.h"

/* ---- pure helpers ---- */

static int add_write(ab_cg_write *w, size_t max, size_t *n, const char *file, long long v,
		     bool optional)
{
	if (*n >= max)
		return -ENOSPC;
	w[*n].file = file;
	w[*n].optional = optional;
	snprintf(w[*n].value, sizeof(w[*n].value), "%lld", v);
	(*n)++;
	return 0;
}

int ab_cgroup_plan_writes(long long memory, long long pids, ab_cg_write *w, size_t max)
{
	size_t n = 0;
	int r;

	if ((memory != AB_LIMIT_UNSET && memory < 1) || (pids != AB_LIMIT_UNSET && pids < 1))
		return -EINVAL;
	if (memory != AB_LIMIT_UNSET) {
		r = add_write(w, max, &n, "memory.max", memory, false);
		if (r < 0)
			return r;
		/* No swap either, or memory.max only moves the excess to swap.
		 * Absent when the kernel does no swap accounting. */
		r = add_write(w, max, &n, "memory.swap.max", 0, true);
		if (r < 0)
			return r;
	}
	if (pids != AB_LIMIT_UNSET) {
		r = add_write(w, max, &n, "pids.max", pids, false);
		if (r < 0)
			return r;
	}
	return (int)n;
}

bool ab_cgroup_path_valid(const char *path)
{
	size_t len = path ? strlen(path) : 0;

	if (len == 0 || len >= PATH_MAX || path[0] != '/')
		return false;
	if (len == 1)
		return true;
	if (path[len - 1] == '/')
		return false;
	for (const char *c = path; *c; c++)
		if ((unsigned char)*c < 0x20 || *c == 0x7f)
			return false;
	for (const char *comp = path + 1; comp;) {
		const char *slash = strchr(comp, '/');
		size_t clen = slash ? (size_t)(slash - comp) : strlen(comp);
		if (clen == 0 || (clen == 1 && comp[0] == '.') ||
		    (clen == 2 && comp[0] == '.' && comp[1] == '.'))
			return false;
		comp = slash ? slash + 1 : NULL;
	}
	return true;
}

int ab_cgroup_parse_self(const char *buf, size_t len, char *out, size_t outlen)
{
	const char *p = buf, *end = buf + len;

	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *eol = nl ? nl : end;
		size_t llen = (size_t)(eol - p);

		if (llen >= 3 && memcmp(p, "0::", 3) == 0) {
			size_t plen = llen - 3;
			if (plen >= outlen)
				return -ENAMETOOLONG;
			memcpy(out, p + 3, plen);
			out[plen] = '\0';
			if (memchr(out, '\0', plen) || !ab_cgroup_path_valid(out)) {
				out[0] = '\0';
				return -EINVAL;
			}
			return 0;
		}
		p = eol + 1;
	}
	return -ENOENT;
}

bool ab_cgroup_list_has(const char *list, const char *name)
{
	size_t nlen = strlen(name);

	if (!list || nlen == 0)
		return false;
	for (const char *p = list; *p;) {
		while (*p == ' ' || *p == '\n' || *p == '\t')
			p++;
		const char *w = p;
		while (*p && *p != ' ' && *p != '\n' && *p != '\t')
			p++;
		if ((size_t)(p - w) == nlen && memcmp(w, name, nlen) == 0)
			return true;
	}
	return false;
}

int ab_cgroup_child_path(const char *base, pid_t pid, char *out, size_t outlen)
{
	if (!ab_cgroup_path_valid(base) || pid <= 0)
		return -EINVAL;
	int n = snprintf(out, outlen, "%s%s/agentbox-%d", AB_CGROUP_ROOT,
			 strcmp(base, "/") == 0 ? "" : base, (int)pid);
	if (n < 0 || (size_t)n >= outlen)
		return -ENAMETOOLONG;
	return 0;
}

int ab_cgroup_parent_path(const char *path, char *out, size_t outlen)
{
	if (!ab_cgroup_path_valid(path) || strcmp(path, "/") == 0)
		return -EINVAL;
	size_t plen = (size_t)(strrchr(path, '/') - path);
	if (plen == 0)
		plen = 1; /* "/a" -> "/" */
	if (plen >= outlen)
		return -ENAMETOOLONG;
	memcpy(out, path, plen);
	out[plen] = '\0';
	return 0;
}

/* ---- the syscalls ---- */

/* Write `value` to dirfd/file with one write(2) (cgroupfs takes it whole). */
static int write_at(int dirfd, const char *file, const char *value)
{
	_cleanup_close_ int fd = openat(dirfd, file, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -errno;
	size_t len = strlen(value);
	ssize_t n = write(fd, value, len);
	if (n < 0)
		return -errno;
	return (size_t)n == len ? 0 : -EIO;
}

static int make_dir(const char *dir, ab_err *err)
{
	if (mkdir(dir, 0755) == 0)
		return 0;
	/* A stale, empty cgroup of an earlier agentbox with the same pid. */
	if (errno == EEXIST && rmdir(dir) == 0 && mkdir(dir, 0755) == 0)
		return 0;
	int r = ab_fail(err, errno, "create cgroup %s", dir);
	ab_err_hint(err,
		    "run `agentbox doctor`; a profile that sets limits.memory or limits.pids "
		    "can accept running without them with allow_downgrade: [\"cgroup-limits\"]");
	return r;
}

int ab_cgroup_setup(long long memory, long long pids, const ab_host *host, pid_t pid,
		    char **out_path, ab_err *err)
{
	ab_cg_write w[AB_CGROUP_MAX_WRITES];
	char dir[PATH_MAX], pidstr[32];
	int n, r;

	*out_path = NULL;
	n = ab_cgroup_plan_writes(memory, pids, w, AB_ARRAY_SIZE(w));
	if (n < 0)
		return ab_fail(err, -n, "cgroup limits: invalid memory/pids value");
	if (n == 0)
		return 0;
	if (host->cgroup_version != 2 || host->cgroup_delegated != AB_YES)
		return ab_fail(err, EOPNOTSUPP,
			       "cgroup limits: no delegated cgroup v2 on this host");
	r = ab_cgroup_child_path(host->cgroup_path, pid, dir, sizeof(dir));
	if (r < 0)
		return ab_fail(err, -r, "cgroup limits: bad cgroup path '%s'", host->cgroup_path);
	r = make_dir(dir, err);
	if (r < 0)
		return r;

	_cleanup_close_ int dfd = open(dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0) {
		r = ab_fail(err, errno, "open cgroup %s", dir);
		goto undo;
	}
	for (int i = 0; i < n; i++) {
		r = write_at(dfd, w[i].file, w[i].value);
		if (r == -ENOENT && w[i].optional)
			continue;
		if (r < 0) {
			r = ab_fail(err, -r, "cgroup limits: write %s to %s/%s", w[i].value, dir,
				    w[i].file);
			goto undo;
		}
	}
	snprintf(pidstr, sizeof(pidstr), "%d", (int)pid);
	r = write_at(dfd, "cgroup.procs", pidstr);
	if (r < 0) {
		r = ab_fail(err, -r, "cgroup limits: move the sandbox into %s", dir);
		goto undo;
	}
	*out_path = ab_strdup(dir);
	if (!*out_path) {
		/* The child is in the cgroup now; it stays there.  The directory is
		 * left behind (the kernel refuses rmdir while it has members). */
		return ab_fail(err, ENOMEM, "cgroup limits");
	}
	return 0;
undo:
	(void)rmdir(dir);
	return r;
}

void ab_cgroup_cleanup(const char *path)
{
	const struct timespec pause = {0, 5 * 1000 * 1000}; /* 5 ms, up to 1 s in all */

	if (!path)
		return;
	for (int i = 0; i < 200; i++) {
		if (rmdir(path) == 0 || errno != EBUSY)
			return;
		if (i == 0) {
			/* Members left (still exiting, or escaped the pid namespace
			 * teardown): kill them all (cgroup.kill, Linux >= 5.14). */
			_cleanup_close_ int dfd =
				open(path, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (dfd >= 0)
				(void)write_at(dfd, "cgroup.kill", "1");
		}
		(void)nanosleep(&pause, NULL);
	}
}
