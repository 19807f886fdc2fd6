/* SPDX-License-Identifier: MIT */
/*
 * Shared basics: the one error value, string vectors, cleanup attributes.
 *
 * Error convention (see docs/architecture.md):
 *   fallible functions return >= 0 on success and a negative errno on failure,
 *   filling the ab_err passed as their last argument.  Callers add context with
 *   ab_err_prefix() on the way up; only main() (or the parent after the child
 *   reported) prints, once, with ab_err_print().
 *
 * ab_err is fixed-size and pointer-free so the child can send it to the parent
 * over the sync socket with one write and no allocation after clone.
 */
#ifndef AGENTBOX_COMMON_H
#define AGENTBOX_COMMON_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#define AB_EXIT_FAIL 125     /* agentbox itself failed: usage, profile, setup */
#define AB_EXIT_NOEXEC 126   /* command found but not executable */
#define AB_EXIT_NOTFOUND 127 /* command not found */

typedef struct ab_err {
	int code;       /* errno value (positive), 0 if none */
	int exit_code;  /* process exit status to use: AB_EXIT_* (default 125) */
	char msg[1536]; /* "context: context: what failed: strerror" */
	char hint[512]; /* optional "how to fix it" line, printed as "Hint: ..." */
	int step;       /* which set-up step an outer sandbox refused (enum ab_step,
			   container.h), 0 if none: the parent explains it */
} ab_err;

/* Set *e (overwriting) from a printf format; appends ": strerror(errnum)" when
 * errnum != 0.  Returns -errnum, or -EINVAL when errnum is 0. */
int ab_fail(ab_err *e, int errnum, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Fail with this code: EXIT_CODE is the exit status (AB_EXIT_*) and ERRNUM
 * the errno recorded and returned, without ": strerror(errnum)" appended (the
 * message says what went wrong where strerror's words would mislead).
 * Returns -errnum, or -EINVAL when errnum is 0. */
int ab_fail_code(ab_err *e, int exit_code, int errnum, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/* Prepend "context: " to the message.  Returns -e->code (or -EINVAL). */
int ab_err_prefix(ab_err *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Set the hint line (overwrites). */
void ab_err_hint(ab_err *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Print "agentbox: MSG\nHint: HINT\n" to stderr. */
void ab_err_print(const ab_err *e);
/* Return value for callers: -code or -EINVAL. */
int ab_err_ret(const ab_err *e);

/* Warnings the planner or the host probe produce; printed by the top layer. */
void ab_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ---- string vectors (NULL-terminated, owned) ---- */
typedef struct ab_strv {
	char **v; /* always NULL-terminated when n > 0 or after any push */
	size_t n;
} ab_strv;

int ab_strv_push(ab_strv *s, const char *str);        /* copies; -ENOMEM */
int ab_strv_push_take(ab_strv *s, char *str);         /* takes ownership */
int ab_strv_push_unique(ab_strv *s, const char *str); /* no-op if present */
bool ab_strv_contains(const ab_strv *s, const char *str);
int ab_strv_extend(ab_strv *dst, const ab_strv *src); /* unique-append all */
void ab_strv_free(ab_strv *s);
int ab_strv_copy(ab_strv *dst, const ab_strv *src);

/* ---- memory helpers: abort on OOM is *not* used; these return NULL ---- */
char *ab_strdup(const char *s);
char *ab_asprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Read a small file (at most SIZE-1 bytes) into BUF, NUL-terminated: the
 * length, or -errno. */
ssize_t ab_read_small(const char *path, char *buf, size_t size);
/* Read FD to its end into a malloc'd, NUL-terminated buffer (*OUT, *LEN
 * bytes), starting at HINT bytes (e.g. st_size; 0: 4 KiB) and growing.
 * 0, -E2BIG past MAX bytes, -ENOMEM, or the read error; *OUT is NULL on
 * failure. */
int ab_read_fd_all(int fd, size_t hint, size_t max, char **out, size_t *len);
/* Read FD until its end or SIZE bytes, again after EINTR and short reads:
 * how many (no NUL added), or -errno.  A caller that reads one byte more
 * than it takes knows the file was too large. */
ssize_t ab_read_full(int fd, void *buf, size_t size);
/* Write all N bytes of P to FD, again after EINTR and short writes: 0, or
 * -errno (-EIO when write returns 0).  System calls only: usable in a child
 * after fork or clone. */
int ab_write_all(int fd, const void *p, size_t n);
/* A memfd (made with MFD_ALLOW_SEALING) sealed for good: no write, no
 * resize, no more seals.  0 or -errno. */
int ab_memfd_seal(int fd);

/* B bytes for a person: "999 B", else one decimal in the largest binary
 * unit it reaches ("1.5 KiB" ... "2.0 EiB"). */
void ab_fmt_bytes(char *out, size_t size, uint64_t b);

/* S for a terminal: bytes below 0x20, from 0x7f up, and '\\' as the text
 * \xNN (names and paths from inside a sandbox).  OUT is cut short, never
 * mid-escape, and always NUL-terminated. */
void ab_clean(const char *s, char *out, size_t size);
/* Join path components with exactly one '/' between them. */
char *ab_path_join(const char *a, const char *b);
/* Normalise an absolute path lexically: collapse //, remove /./ and resolve
 * /../ without touching the filesystem.  Returns NULL for relative input. */
char *ab_path_normalize(const char *p);
/* true if path == dir or path is below dir (both normalised, absolute). */
bool ab_path_is_under(const char *path, const char *dir);

/* openat2(AT_FDCWD, path) that follows no symlink (and no /proc magic link)
 * on the way; with O_PATH|O_NOFOLLOW a final symlink is returned as itself.
 * O_CLOEXEC is added.  Returns an fd or -1 with errno. */
int ab_open_nofollow(const char *path, int flags);

/* Wipe memory the compiler may not optimise away (secrets). */
void ab_explicit_bzero(void *p, size_t n);

/* A short-lived helper process that shares agentbox's memory (clone with
 * CLONE_VM and EXTRA_FLAGS, e.g. CLONE_VFORK or CLONE_NEWUSER) on a small
 * stack of its own: no page tables copied and no copy-on-write faults
 * afterwards, which a fork of agentbox pays (docs/performance.md).  FN may make system calls only: no malloc, no
 * stdio, nothing that takes a lock or changes memory the parent uses (errno
 * is the parent's; with CLONE_VFORK the parent is suspended meanwhile).
 * Its return value is the exit status.  The child's fd table, signal
 * handlers, credentials and namespaces are its own.  Returns the pid, or -1
 * with errno; ab_light_reap() waits for it and frees the stack. */
typedef struct ab_light {
	pid_t pid;
	void *stack;
} ab_light;
pid_t ab_light_spawn(ab_light *l, int (*fn)(void *), void *arg, int extra_flags);
int ab_light_reap(ab_light *l); /* wait status, or -1 */

/* ---- cleanup attributes (systemd style) ---- */
static inline void ab_freep(void *p)
{
	free(*(void **)p);
}
static inline void ab_closep(int *fd)
{
	if (*fd >= 0) {
		int saved = *fd;
		*fd = -1;
		(void)close(saved);
	}
}
static inline void ab_strv_freep(ab_strv *s)
{
	ab_strv_free(s);
}

#define _cleanup_(f) __attribute__((cleanup(f)))
#define _cleanup_free_ _cleanup_(ab_freep)
#define _cleanup_close_ _cleanup_(ab_closep)
#define _cleanup_strv_ _cleanup_(ab_strv_freep)

static inline void *ab_take_ptr_(void **p)
{
	void *r = *p;
	*p = NULL;
	return r;
}
#define TAKE_PTR(p) ((__typeof__(p))ab_take_ptr_((void **)&(p)))
static inline int ab_take_fd_(int *fd)
{
	int r = *fd;
	*fd = -1;
	return r;
}
#define TAKE_FD(fd) ab_take_fd_(&(fd))

#define AB_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* statx bits newer than some C libraries' headers (the kernel has had them
 * since 5.8); the values are the kernel's ABI. */
#ifndef STATX_ATTR_MOUNT_ROOT
#define STATX_ATTR_MOUNT_ROOT 0x00002000
#endif
#ifndef STATX_MNT_ID
#define STATX_MNT_ID 0x00001000U
#endif

#endif
