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
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sock_diag.h>
#include <linux/unix_diag.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static bool is_hex(char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

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

/* A name from a UNIX_DIAG_NAME attribute: a pathname (up to its NUL) that
 * passes the same checks as a /proc line's, or NULL. */
static const char *diag_name(const char *p, size_t n, size_t *len)
{
	const char *nul = memchr(p, '\0', n);
	size_t l = nul ? (size_t)(nul - p) : n;
	if (l < 1 || p[0] != '/' || l > AB_UNIXSOCK_PATH_MAX)
		return NULL;
	for (size_t i = 0; i < l; i++)
		if ((unsigned char)p[i] < 0x20 || p[i] == 0x7f)
			return NULL;
	*len = l;
	return p;
}

/* Walk one datagram of a unix sock_diag dump: ATTR for every attribute of
 * every socket message (its type, payload and length).  1 at NLMSG_DONE, 0
 * when more follow, an NLMSG_ERROR's error, -EPROTO, or ATTR's error. */
typedef int (*diag_attr_fn)(void *ctx, unsigned type, const char *p, size_t n);

static int diag_walk(const void *buf, size_t len, diag_attr_fn attr, void *ctx)
{
	if (len && !buf)
		return -EINVAL;
	const char *p = buf;
	size_t off = 0;
	while (len - off >= sizeof(struct nlmsghdr)) {
		struct nlmsghdr h;
		memcpy(&h, p + off, sizeof(h));
		if (h.nlmsg_len < sizeof(h) || h.nlmsg_len > len - off)
			return -EPROTO;
		if (h.nlmsg_type == NLMSG_DONE)
			return 1;
		if (h.nlmsg_type == NLMSG_ERROR) {
			struct nlmsgerr e = {0};
			if (h.nlmsg_len >= NLMSG_LENGTH(sizeof(e)))
				memcpy(&e, p + off + NLMSG_HDRLEN, sizeof(e));
			return e.error < 0 && e.error > -4096 ? e.error : -EPROTO;
		}
		if (h.nlmsg_type == SOCK_DIAG_BY_FAMILY &&
		    h.nlmsg_len >= NLMSG_LENGTH(sizeof(struct unix_diag_msg))) {
			size_t a = off + NLMSG_LENGTH(sizeof(struct unix_diag_msg));
			size_t end = off + h.nlmsg_len;
			while (end - a >= sizeof(struct rtattr)) {
				struct rtattr ra;
				memcpy(&ra, p + a, sizeof(ra));
				if (ra.rta_len < sizeof(ra) || ra.rta_len > end - a)
					return -EPROTO;
				int r = attr(ctx, ra.rta_type, p + a + RTA_LENGTH(0),
					     ra.rta_len - RTA_LENGTH(0));
				if (r < 0)
					return r;
				size_t step = RTA_ALIGN(ra.rta_len);
				if (step > end - a)
					break;
				a += step;
			}
		}
		size_t step = NLMSG_ALIGN(h.nlmsg_len);
		if (step > len - off)
			break;
		off += step;
	}
	return 0;
}

static int name_attr(void *ctx, unsigned type, const char *p, size_t n)
{
	size_t nl = 0;
	const char *name = type == UNIX_DIAG_NAME ? diag_name(p, n, &nl) : NULL;
	if (!name)
		return 0;
	char *c = strndup(name, nl);
	return c && ab_strv_push_take(ctx, c) == 0 ? 0 : -ENOMEM;
}

int ab_unixsock_parse_diag(const void *buf, size_t len, ab_strv *out)
{
	return diag_walk(buf, len, name_attr, out);
}

typedef struct vfs_want {
	uint32_t dev, ino;
	bool found;
} vfs_want;

static int vfs_attr(void *ctx, unsigned type, const char *p, size_t n)
{
	vfs_want *w = ctx;
	struct unix_diag_vfs v;
	if (type != UNIX_DIAG_VFS || n < sizeof(v))
		return 0;
	memcpy(&v, p, sizeof(v));
	if (v.udiag_vfs_dev == w->dev && v.udiag_vfs_ino == w->ino)
		w->found = true;
	return 0;
}

int ab_unixsock_parse_vfs(const void *buf, size_t len, uint32_t dev, uint32_t ino, bool *found)
{
	vfs_want w = {.dev = dev, .ino = ino, .found = *found};
	int r = diag_walk(buf, len, vfs_attr, &w);
	*found = w.found;
	return r;
}

/* Send one dump request on the netlink socket FD (the namespace it was made
 * in), and feed every datagram of the answer to PARSE.  0 or -errno. */
typedef int (*diag_parse_fn)(const void *buf, size_t len, void *ctx);

static int diag_dump(int fd, unsigned show, diag_parse_fn parse, void *ctx)
{
	struct {
		struct nlmsghdr h;
		struct unix_diag_req r;
	} q = {.h = {.nlmsg_len = sizeof(q),
		     .nlmsg_type = SOCK_DIAG_BY_FAMILY,
		     .nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP,
		     .nlmsg_seq = 1},
	       .r = {.sdiag_family = AF_UNIX,
		     .udiag_states = (1u << TCP_LISTEN) | (1u << TCP_CLOSE),
		     .udiag_show = show}};
	int r = send(fd, &q, sizeof(q), 0) == (ssize_t)sizeof(q) ? 0 : -errno;
	size_t total = 0;
	_cleanup_free_ char *buf = r == 0 ? malloc(1 << 16) : NULL;
	if (r == 0 && !buf)
		r = -ENOMEM;
	while (r == 0) {
		ssize_t n = recv(fd, buf, 1 << 16, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			r = n < 0 ? -errno : -EPROTO;
			break;
		}
		total += (size_t)n;
		if (total > AB_UNIXSOCK_LIST_MAX) {
			r = -E2BIG;
			break;
		}
		r = parse(buf, (size_t)n, ctx);
		if (r == 1)
			return 0;
	}
	/* an answer cut short would be read by the next request: drop it */
	while (buf && recv(fd, buf, 1 << 16, MSG_DONTWAIT) > 0)
		;
	return r;
}

static int parse_names(const void *buf, size_t len, void *ctx)
{
	return ab_unixsock_parse_diag(buf, len, ctx);
}

static int parse_vfs(const void *buf, size_t len, void *ctx)
{
	vfs_want *w = ctx;
	return ab_unixsock_parse_vfs(buf, len, w->dev, w->ino, &w->found);
}

int ab_unixsock_bound_in(int diag_fd, uint32_t dev, uint32_t ino)
{
	vfs_want w = {.dev = dev, .ino = ino};
	int r = diag_dump(diag_fd, UDIAG_SHOW_VFS, parse_vfs, &w);
	return r < 0 ? r : w.found;
}

/* The kernel's socket diagnostics: only sockets another one could reach
 * (listening, or unconnected: a bound datagram socket), a fraction of
 * /proc/net/unix and measured ten times faster to list (docs/performance.md).
 * -ENOENT/-EPROTONOSUPPORT without unix_diag (then /proc/net/unix). */
static int list_diag(ab_strv *raw)
{
	_cleanup_close_ int fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
	return fd < 0 ? -errno : diag_dump(fd, UDIAG_SHOW_NAME, parse_names, raw);
}

/* /proc/net/unix, read whole (at most AB_UNIXSOCK_LIST_MAX bytes). */
static int list_proc(ab_strv *raw)
{
	_cleanup_close_ int fd = open("/proc/net/unix", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	_cleanup_free_ char *buf = NULL;
	size_t len = 0;
	int r = ab_read_fd_all(fd, 1 << 16, AB_UNIXSOCK_LIST_MAX, &buf, &len);
	if (r < 0)
		return r;
	int k = ab_unixsock_parse(buf, len, raw);
	return k < 0 ? k : 0;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int ab_unixsock_list(bool diag, ab_strv *raw)
{
	return diag ? list_diag(raw) : list_proc(raw);
}

int ab_unixsock_host(ab_strv *out, ab_err *err)
{
	_cleanup_strv_ ab_strv raw = {0};
	int r = list_diag(&raw);
	if (r < 0) {
		ab_strv_free(&raw);
		r = list_proc(&raw);
		if (r < 0)
			return ab_fail(err, -r,
				       "list the host's unix sockets (sock_diag, then "
				       "/proc/net/unix)");
	}
	/* each path as bound, and as its directory's real path says (a socket
	 * bound through a symlinked directory); sorted, so one realpath(3) per
	 * directory.  The plan checks that a path still names a socket. */
	if (raw.n > 1) /* qsort(3) takes no NULL, even with no elements */
		qsort(raw.v, raw.n, sizeof(*raw.v), cmp_str);
	char dir[PATH_MAX], real[PATH_MAX] = "";
	dir[0] = '\0';
	bool have_real = false;
	for (size_t i = 0; i < raw.n; i++) {
		const char *path = raw.v[i], *slash = strrchr(path, '/');
		size_t dl = (size_t)(slash - path);
		if (i && strcmp(path, raw.v[i - 1]) == 0)
			continue;
		if (dl >= sizeof(dir))
			continue;
		if (strlen(dir) != dl || strncmp(dir, path, dl) != 0) {
			memcpy(dir, path, dl);
			dir[dl] = '\0';
			have_real = realpath(dl ? dir : "/", real) != NULL;
		}
		if (ab_strv_push(out, path) < 0)
			return ab_fail(err, ENOMEM, "unix sockets");
		if (!have_real || (strcmp(real, dl ? dir : "/") == 0))
			continue;
		char *alt = ab_asprintf("%s%s", strcmp(real, "/") ? real : "", slash);
		if (!alt || ab_strv_push_take(out, alt) < 0)
			return ab_fail(err, ENOMEM, "unix sockets");
	}
	return 0;
}
