/* SPDX-License-Identifier: MIT */
/*
 * The host's bound pathname Unix sockets, from /proc/net/unix (see
 * include/agentbox/unixsock.h).  The parser is pure and fuzzed
 * (tests/fuzz/fuzz_unixsock.c); ab_unixsock_host does the reading.
 */
#include "agentbox/unixsock.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static bool is_hex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

/* One field of [0-9a-fA-F] (DEC: [0-9]) after one or more spaces. */
static const char *field(const char *p, const char *end, bool dec)
{
	const char *s = p;
	while (p < end && *p == ' ')
		p++;
	if (p == s)
		return NULL;
	s = p;
	while (p < end && (dec ? (*p >= '0' && *p <= '9') : is_hex(*p)))
		p++;
	return p == s ? NULL : p;
}

/* The path of one line [P, END), or NULL (no path, or not a socket line). */
static const char *line_path(const char *p, const char *end, size_t *n)
{
	const char *s = p;
	while (p < end && is_hex(*p))
		p++;
	if (p == s || p >= end || *p++ != ':')
		return NULL;
	for (int i = 0; i < 6 && p; i++)
		p = field(p, end, i == 5);
	if (!p || end - p < 2 || p[0] != ' ' || p[1] != '/')
		return NULL;
	p++;
	*n = (size_t)(end - p);
	if (*n > AB_UNIXSOCK_PATH_MAX)
		return NULL;
	for (size_t i = 0; i < *n; i++)
		if ((unsigned char)p[i] < 0x20 || p[i] == 0x7f)
			return NULL;
	return p;
}

int ab_unixsock_parse(const char *buf, size_t len, ab_strv *out)
{
	if (len > AB_UNIXSOCK_LIST_MAX)
		return -E2BIG;
	if (len && !buf)
		return -EINVAL;
	int found = 0;
	const char *end = buf + len;
	for (const char *p = buf; p && p < end;) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *le = nl ? nl : end;
		size_t n = 0;
		const char *path = line_path(p, le, &n);
		if (path) {
			char *s = strndup(path, n);
			if (!s || ab_strv_push_take(out, s) < 0)
				return -ENOMEM;
			found++;
		}
		p = nl ? nl + 1 : NULL;
	}
	return found;
}

static bool is_sock(const char *path)
{
	struct stat st;
	return lstat(path, &st) == 0 && S_ISSOCK(st.st_mode);
}

int ab_unixsock_host(ab_strv *out, ab_err *err)
{
	int fd = open("/proc/net/unix", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return ab_fail(err, errno, "list the host's unix sockets (/proc/net/unix)");
	size_t cap = 1 << 16, len = 0;
	char *buf = malloc(cap);
	int r = buf ? 0 : -ENOMEM;
	while (r == 0) {
		if (len == cap) {
			if (cap >= AB_UNIXSOCK_LIST_MAX + 1) {
				r = -E2BIG;
				break;
			}
			size_t nc = cap * 2 > AB_UNIXSOCK_LIST_MAX + 1 ? AB_UNIXSOCK_LIST_MAX + 1 : cap * 2;
			char *nb = realloc(buf, nc);
			if (!nb) {
				r = -ENOMEM;
				break;
			}
			buf = nb;
			cap = nc;
		}
		ssize_t n = read(fd, buf + len, cap - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			r = -errno;
		else if (n == 0)
			break;
		else
			len += (size_t)n;
	}
	close(fd);
	_cleanup_strv_ ab_strv raw = {0};
	if (r == 0) {
		int k = ab_unixsock_parse(buf, len, &raw);
		r = k < 0 ? k : 0;
	}
	free(buf);
	if (r < 0)
		return ab_fail(err, -r, "list the host's unix sockets (/proc/net/unix)");
	char real[PATH_MAX];
	for (size_t i = 0; i < raw.n; i++) {
		/* only sockets that are still there, under either name */
		if (!realpath(raw.v[i], real) || !is_sock(real))
			continue;
		if ((is_sock(raw.v[i]) && ab_strv_push_unique(out, raw.v[i]) < 0) ||
		    ab_strv_push_unique(out, real) < 0)
			return ab_fail(err, ENOMEM, "unix sockets");
	}
	return 0;
}
