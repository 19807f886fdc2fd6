/* SPDX-License-Identifier: MIT */
/* The error value, string vectors and path helpers.  Pure, any process. */
#include "agentbox/common.h"

#include <errno.h>
#include <stdio.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>

__attribute__((format(printf, 3, 0))) static void vset(ab_err *e, int errnum, const char *fmt,
						       va_list ap)
{
	int n = vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
	if (n < 0)
		e->msg[0] = '\0';
	if (errnum != 0) {
		size_t len = strlen(e->msg);
		if (len < sizeof(e->msg))
			snprintf(e->msg + len, sizeof(e->msg) - len, ": %s", strerror(errnum));
	}
	e->code = errnum;
	e->hint[0] = '\0';
	e->step = 0;
}

int ab_fail(ab_err *e, int errnum, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vset(e, errnum, fmt, ap);
	va_end(ap);
	e->exit_code = AB_EXIT_FAIL;
	return errnum > 0 ? -errnum : -EINVAL;
}

int ab_fail_code(ab_err *e, int exit_code, int errnum, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vset(e, 0, fmt, ap);
	va_end(ap);
	e->code = errnum;
	e->exit_code = exit_code;
	return errnum > 0 ? -errnum : -EINVAL;
}

int ab_err_ret(const ab_err *e)
{
	return e->code > 0 ? -e->code : -EINVAL;
}

int ab_err_prefix(ab_err *e, const char *fmt, ...)
{
	char ctx[512], old[sizeof(e->msg)];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(ctx, sizeof(ctx), fmt, ap);
	va_end(ap);
	memcpy(old, e->msg, sizeof(old));
	old[sizeof(old) - 1] = '\0';
	/* truncation keeps the leading context, which says what was attempted */
	size_t cl = strnlen(ctx, sizeof(ctx) - 1);
	memcpy(e->msg, ctx, cl);
	memcpy(e->msg + cl, ": ", 2);
	size_t room = sizeof(e->msg) - cl - 3;
	size_t ol = strnlen(old, room);
	memcpy(e->msg + cl + 2, old, ol);
	e->msg[cl + 2 + ol] = '\0';
	return ab_err_ret(e);
}

void ab_err_hint(ab_err *e, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(e->hint, sizeof(e->hint), fmt, ap);
	va_end(ap);
}

void ab_err_print(const ab_err *e)
{
	fprintf(stderr, "agentbox: %s\n", e->msg[0] ? e->msg : "unknown error");
	if (e->hint[0])
		fprintf(stderr, "Hint: %s\n", e->hint);
}

void ab_warn(const char *fmt, ...)
{
	va_list ap;
	fputs("agentbox: warning: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/* ---- strv ---- */

int ab_strv_push_take(ab_strv *s, char *str)
{
	if (!str)
		return -ENOMEM;
	char **nv = realloc(s->v, (s->n + 2) * sizeof(char *));
	if (!nv) {
		free(str);
		return -ENOMEM;
	}
	nv[s->n++] = str;
	nv[s->n] = NULL;
	s->v = nv;
	return 0;
}

int ab_strv_push(ab_strv *s, const char *str)
{
	return ab_strv_push_take(s, strdup(str));
}

bool ab_strv_contains(const ab_strv *s, const char *str)
{
	for (size_t i = 0; i < s->n; i++)
		if (strcmp(s->v[i], str) == 0)
			return true;
	return false;
}

int ab_strv_push_unique(ab_strv *s, const char *str)
{
	if (ab_strv_contains(s, str))
		return 0;
	return ab_strv_push(s, str);
}

int ab_strv_extend(ab_strv *dst, const ab_strv *src)
{
	for (size_t i = 0; i < src->n; i++) {
		int r = ab_strv_push_unique(dst, src->v[i]);
		if (r < 0)
			return r;
	}
	return 0;
}

int ab_strv_copy(ab_strv *dst, const ab_strv *src)
{
	for (size_t i = 0; i < src->n; i++) {
		int r = ab_strv_push(dst, src->v[i]);
		if (r < 0)
			return r;
	}
	return 0;
}

void ab_strv_free(ab_strv *s)
{
	for (size_t i = 0; i < s->n; i++)
		free(s->v[i]);
	free(s->v);
	s->v = NULL;
	s->n = 0;
}

/* ---- strings and paths ---- */

char *ab_strdup(const char *s)
{
	return s ? strdup(s) : NULL;
}

ssize_t ab_read_full(int fd, void *buf, size_t size)
{
	char *b = buf;
	size_t got = 0;

	while (got < size) {
		ssize_t n = read(fd, b + got, size - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			break;
		got += (size_t)n;
	}
	return (ssize_t)got;
}

ssize_t ab_read_small(const char *path, char *buf, size_t size)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);

	if (fd < 0)
		return -errno;
	ssize_t got = ab_read_full(fd, buf, size - 1);
	if (got >= 0)
		buf[got] = '\0';
	return got;
}

int ab_read_fd_all(int fd, size_t hint, size_t max, char **out, size_t *len)
{
	/* sized from the hint (+1 to see EOF); grows if there is more */
	size_t cap = hint + 1 < 4096 ? 4096 : hint + 1, n = 0;
	if (cap > max + 1)
		cap = max + 1;
	char *buf = NULL;
	int r = 0;
	*out = NULL;
	*len = 0;
	for (;;) {
		if (!buf || n == cap) {
			size_t ncap = buf ? cap * 2 : cap;
			if (ncap > max + 1)
				ncap = max + 1;
			char *nb = realloc(buf, ncap + 1); /* + the NUL */
			if (!nb) {
				r = -ENOMEM;
				break;
			}
			buf = nb;
			cap = ncap;
		}
		ssize_t k = read(fd, buf + n, cap - n);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0) {
			r = -errno;
			break;
		}
		if (k == 0)
			break;
		n += (size_t)k;
		if (n > max) {
			r = -E2BIG;
			break;
		}
	}
	if (r < 0) {
		free(buf);
		return r;
	}
	buf[n] = '\0';
	*out = buf;
	*len = n;
	return 0;
}

int ab_write_all(int fd, const void *p, size_t n)
{
	const char *c = p;
	while (n) {
		ssize_t w = write(fd, c, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return w < 0 ? -errno : -EIO;
		c += w;
		n -= (size_t)w;
	}
	return 0;
}

int ab_memfd_seal(int fd)
{
	return fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) < 0
		       ? -errno
		       : 0;
}

void ab_fmt_bytes(char *out, size_t size, uint64_t b)
{
	static const char *const u[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
	double v = (double)b;
	size_t i = 0;
	while (v >= 1024 && i + 1 < AB_ARRAY_SIZE(u)) {
		v /= 1024;
		i++;
	}
	if (i == 0)
		snprintf(out, size, "%llu B", (unsigned long long)b);
	else
		snprintf(out, size, "%.1f %s", v, u[i]);
}

void ab_clean(const char *s, char *out, size_t size)
{
	size_t o = 0;
	for (const unsigned char *p = (const unsigned char *)s; *p && o + 5 < size; p++) {
		if (*p < 0x20 || *p >= 0x7f || *p == '\\')
			o += (size_t)snprintf(out + o, size - o, "\\x%02x", *p);
		else
			out[o++] = (char)*p;
	}
	out[o] = '\0';
}

char *ab_asprintf(const char *fmt, ...)
{
	va_list ap;
	char *out = NULL;
	va_start(ap, fmt);
	if (vasprintf(&out, fmt, ap) < 0)
		out = NULL;
	va_end(ap);
	return out;
}

char *ab_path_join(const char *a, const char *b)
{
	size_t la = strlen(a);
	while (la > 0 && a[la - 1] == '/')
		la--;
	while (*b == '/')
		b++;
	return ab_asprintf("%.*s/%s", (int)la, a, b);
}

char *ab_path_normalize(const char *p)
{
	if (!p || p[0] != '/')
		return NULL;
	size_t len = strlen(p);
	char *out = malloc(len + 2);
	if (!out)
		return NULL;
	size_t o = 0;
	const char *s = p;
	while (*s) {
		while (*s == '/')
			s++;
		if (!*s)
			break;
		const char *e = strchr(s, '/');
		size_t n = e ? (size_t)(e - s) : strlen(s);
		if (n == 1 && s[0] == '.') {
			/* skip */
		} else if (n == 2 && s[0] == '.' && s[1] == '.') {
			while (o > 0 && out[o - 1] != '/')
				o--;
			if (o > 0)
				o--; /* drop the '/' */
		} else {
			out[o++] = '/';
			memcpy(out + o, s, n);
			o += n;
		}
		s += n;
	}
	if (o == 0)
		out[o++] = '/';
	out[o] = '\0';
	return out;
}

bool ab_path_is_under(const char *path, const char *dir)
{
	size_t ld = strlen(dir);
	if (ld == 1 && dir[0] == '/')
		return path[0] == '/';
	if (strncmp(path, dir, ld) != 0)
		return false;
	return path[ld] == '\0' || path[ld] == '/';
}

struct ab_open_how_ {
	unsigned long long flags, mode, resolve;
};

int ab_open_nofollow(const char *path, int flags)
{
	struct ab_open_how_ how = {.flags = (unsigned long long)(flags | O_CLOEXEC),
				   .resolve = 0x04 /* RESOLVE_NO_SYMLINKS */ |
					      0x02 /* RESOLVE_NO_MAGICLINKS */};
	return (int)syscall(437 /* openat2, x86_64 and asm-generic alike */, AT_FDCWD, path, &how,
			    sizeof(how));
}

void ab_explicit_bzero(void *p, size_t n)
{
	explicit_bzero(p, n);
}

#define LIGHT_STACK (64 * 1024)

pid_t ab_light_spawn(ab_light *l, int (*fn)(void *), void *arg, int extra_flags)
{
	l->pid = -1;
	l->stack = mmap(NULL, LIGHT_STACK, PROT_READ | PROT_WRITE,
			MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
	if (l->stack == MAP_FAILED) {
		l->stack = NULL;
		return -1;
	}
	l->pid = clone(fn, (char *)l->stack + LIGHT_STACK, CLONE_VM | SIGCHLD | extra_flags, arg);
	if (l->pid < 0) {
		int e = errno;
		munmap(l->stack, LIGHT_STACK);
		l->stack = NULL;
		errno = e;
	}
	return l->pid;
}

int ab_light_reap(ab_light *l)
{
	int st = -1;
	if (l->pid > 0)
		while (waitpid(l->pid, &st, __WALL) < 0 && errno == EINTR)
			;
	/* the child is gone: nothing runs on its stack any more */
	if (l->stack)
		munmap(l->stack, LIGHT_STACK);
	l->pid = -1;
	l->stack = NULL;
	return st;
}
