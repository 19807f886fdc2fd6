/* SPDX-License-Identifier: MIT */
/*
 * The run-time mounts' files (child, src/sandbox/mount.c mounts them): the
 * session CA's trust files and the rendered credentials files are mounted
 * empty while the parent's broker makes them; here each is remembered
 * (ab_mount_defer_fill) and, once the parent says they are done
 * (AB_SYNC_RUNTIME_DONE, after the placeholders' environment), copied from
 * the parent's memfd into it (ab_mount_fill_runtime).  See
 * docs/architecture.md, "The new root".
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agentbox/sandbox.h"
#include "agentbox/sync.h"
#include "mount_int.h"

/* The whole of the memfd `from` into `to`, in the kernel. */
static int copy_runtime(int from, int to)
{
	/* sealed: the parent finished it (it seals each file once written) */
	int seals = fcntl(from, F_GET_SEALS);
	if (seals < 0)
		return -errno;
	if (!(seals & F_SEAL_WRITE))
		return -EPROTO;
	off_t off = 0;
	for (;;) {
		ssize_t n = sendfile(to, from, &off, 1 << 30);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return 0;
	}
}

static int recv_env(int sync_fd, int len, ab_runtime *rt, ab_err *err)
{
	if (len <= 0 || len > AB_SYNC_ENV_MAX)
		return ab_fail(err, EPROTO, "receive the environment");
	char *buf = malloc((size_t)len + 1);
	if (!buf)
		return ab_fail(err, ENOMEM, "receive the environment");
	ssize_t n;
	do
		n = recv(sync_fd, buf, (size_t)len + 1, 0);
	while (n < 0 && errno == EINTR);
	if (n != len || memchr(buf, '\0', (size_t)len) || !memchr(buf, '=', (size_t)len)) {
		free(buf);
		return ab_fail(err, n < 0 ? errno : EPROTO, "receive the environment");
	}
	buf[len] = '\0';
	return ab_strv_push_take(&rt->env, buf) < 0 ? ab_fail(err, ENOMEM, "environment") : 0;
}

/* A run-time file's copy, left for ab_mount_fill_runtime: TO (the staged
 * file, taken) gets FROM's bytes (the parent's memfd, dup'ed). */
int ab_mount_defer_fill(ab_runtime *rt, int from, int to)
{
	if (from < 0)
		return -EPROTO; /* the parent never sent it */
	if (rt->nfills == AB_MAX_MOUNTS)
		return -E2BIG;
	if (rt->nfills == rt->capfills) {
		size_t cap = rt->capfills ? 2 * rt->capfills : 8;
		ab_runtime_fill *v = realloc(rt->fills, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		rt->fills = v;
		rt->capfills = cap;
	}
	int d = fcntl(from, F_DUPFD_CLOEXEC, 3);
	if (d < 0)
		return -errno;
	rt->fills[rt->nfills++] = (ab_runtime_fill){.from = d, .to = to};
	return 0;
}

int ab_mount_fill_runtime(int sync_fd, ab_runtime *rt, ab_err *err)
{
	for (;;) {
		ab_sync_msg m;
		int fd = -1;
		int r = ab_sync_recv(sync_fd, &m, &fd);
		if (r <= 0)
			return ab_fail(err, r < 0 ? -r : EPIPE, "wait for the secrets");
		if (fd >= 0) {
			close(fd);
			return ab_fail(err, EPROTO, "wait for the secrets");
		}
		if (m.type == AB_SYNC_RUNTIME_DONE)
			break;
		if (m.type != AB_SYNC_ENV)
			return ab_fail(err, EPROTO, "wait for the secrets");
		if ((r = recv_env(sync_fd, m.value, rt, err)) < 0)
			return r;
	}
	int r = 0;
	for (size_t i = 0; i < rt->nfills; i++) {
		ab_runtime_fill *f = &rt->fills[i];
		int q = r < 0 ? 0 : copy_runtime(f->from, f->to);
		if (q < 0)
			r = ab_fail(err, -q, "the session CA's and credentials files");
		ab_closep(&f->from);
		ab_closep(&f->to);
	}
	rt->nfills = 0;
	return r;
}
