/* SPDX-License-Identifier: MIT */
/*
 * Credentials files (parent only): JSON pointers, reading a harness's token
 * file with limits, rendering it with placeholders, and writing rotated
 * tokens back atomically.  See include/agentbox/credfile.h and
 * docs/credentials.md.
 */
#include "agentbox/credfile.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static void wipe_free(void *p)
{
	if (p) {
		explicit_bzero(p, malloc_usable_size(p));
		free(p);
	}
}

void ab_credfile_init(void)
{
	json_set_alloc_funcs(malloc, wipe_free);
}

static void wipe_buf(char *p, size_t n)
{
	if (p) {
		explicit_bzero(p, n);
		free(p);
	}
}

/* The next reference token of *P (after its '/') unescaped into TOK.
 * Returns its length, or -EINVAL. */
static int next_token(const char **p, char *tok, size_t toksz)
{
	const char *s = *p;
	size_t n = 0;
	if (*s != '/')
		return -EINVAL;
	s++;
	while (*s && *s != '/') {
		char c = *s++;
		if (c == '~') {
			if (*s == '0')
				c = '~';
			else if (*s == '1')
				c = '/';
			else
				return -EINVAL;
			s++;
		}
		if (n + 1 >= toksz)
			return -EINVAL;
		tok[n++] = c;
	}
	tok[n] = '\0';
	*p = s;
	return (int)n;
}

int ab_json_pointer_check(const char *ptr)
{
	char tok[AB_JSON_POINTER_MAX + 1];
	if (!ptr || strlen(ptr) > AB_JSON_POINTER_MAX)
		return -EINVAL;
	int depth = 0;
	const char *p = ptr;
	while (*p) {
		if (++depth > AB_JSON_POINTER_DEPTH || next_token(&p, tok, sizeof(tok)) < 0)
			return -EINVAL;
	}
	return 0;
}

static bool array_index(const char *tok, size_t *out)
{
	size_t n = strlen(tok), v = 0;
	if (!n || n > 9 || (n > 1 && tok[0] == '0'))
		return false;
	for (size_t i = 0; i < n; i++) {
		if (tok[i] < '0' || tok[i] > '9')
			return false;
		v = v * 10 + (size_t)(tok[i] - '0');
	}
	*out = v;
	return true;
}

json_t *ab_json_pointer_get(json_t *root, const char *ptr)
{
	char tok[AB_JSON_POINTER_MAX + 1];
	if (!root || ab_json_pointer_check(ptr) < 0)
		return NULL;
	json_t *cur = root;
	const char *p = ptr;
	while (*p && cur) {
		if (next_token(&p, tok, sizeof(tok)) < 0)
			return NULL;
		if (json_is_object(cur)) {
			cur = json_object_get(cur, tok);
		} else if (json_is_array(cur)) {
			size_t i;
			cur = array_index(tok, &i) ? json_array_get(cur, i) : NULL;
		} else {
			return NULL;
		}
	}
	return cur;
}

static int parse_max(const char *buf, size_t len, size_t max, json_t **out, ab_err *err)
{
	*out = NULL;
	if (len > max)
		return ab_fail(err, EFBIG, "larger than %zu bytes", max);
	ab_credfile_init();
	json_error_t je;
	json_t *root = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &je);
	if (!root) {
		/* je.text may quote the input: only the position is reported */
		ab_fail(err, 0, "not valid JSON (line %d, column %d)", je.line, je.column);
		return -EINVAL;
	}
	if (!json_is_object(root) && !json_is_array(root)) {
		json_decref(root);
		ab_fail(err, 0, "not a JSON object");
		return -EINVAL;
	}
	*out = root;
	return 0;
}

int ab_credfile_parse(const char *buf, size_t len, json_t **out, ab_err *err)
{
	return parse_max(buf, len, AB_CREDFILE_MAX, out, err);
}

int ab_credfile_parse_file(const char *buf, size_t len, json_t **out, ab_err *err)
{
	return parse_max(buf, len, AB_CREDFILE_FILE_MAX, out, err);
}

int ab_credfile_read_fd(int fd, const char *path, char **buf, size_t *len, size_t *cap,
			struct stat *st, ab_err *err)
{
	if (fstat(fd, st) < 0)
		return ab_fail(err, errno, "%s", path);
	if (!S_ISREG(st->st_mode))
		return ab_fail(err, EINVAL, "%s is not a regular file", path);
	if ((uint64_t)st->st_size > AB_CREDFILE_FILE_MAX)
		return ab_fail(err, EFBIG, "%s is larger than %d bytes", path,
			       AB_CREDFILE_FILE_MAX);
	size_t c = (size_t)st->st_size + 1; /* one more: a file that grew meanwhile shows */
	char *b = malloc(c);
	if (!b)
		return ab_fail(err, ENOMEM, "%s", path);
	ssize_t got = ab_read_full(fd, b, c);
	if (got < 0 || (size_t)got == c) {
		wipe_buf(b, c);
		return got < 0 ? ab_fail(err, (int)-got, "cannot read %s", path)
			       : ab_fail(err, EAGAIN, "%s changed while it was read", path);
	}
	*buf = b;
	*len = (size_t)got;
	*cap = c;
	return 0;
}

/* Read a regular file of at most AB_CREDFILE_FILE_MAX bytes into a buffer
 * of its size (*CAP bytes, for the wipe). */
static int read_small(const char *path, char **buf, size_t *len, size_t *cap, struct stat *st,
		      ab_err *err)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0)
		return ab_fail(err, errno, "cannot open %s", path);
	return ab_credfile_read_fd(fd, path, buf, len, cap, st, err);
}

int ab_credfile_load(const char *path, json_t **out, ab_err *err)
{
	char *buf = NULL;
	size_t len = 0, cap = 0;
	struct stat st;
	*out = NULL;
	int r = read_small(path, &buf, &len, &cap, &st, err);
	if (r < 0)
		return r;
	if (!len) { /* an empty file (e.g. agentbox's reservation of it): no login */
		wipe_buf(buf, cap);
		return ab_fail_code(err, AB_EXIT_FAIL, ENOENT, "%s is empty", path);
	}
	r = parse_max(buf, len, AB_CREDFILE_FILE_MAX, out, err);
	wipe_buf(buf, cap);
	return r < 0 ? ab_err_prefix(err, "%s", path) : 0;
}

int ab_credfile_get(json_t *root, const char *ptr, char **value, size_t *len)
{
	*value = NULL;
	*len = 0;
	json_t *v = ab_json_pointer_get(root, ptr);
	if (!v)
		return -ENOENT;
	if (!json_is_string(v))
		return -EINVAL;
	size_t n = json_string_length(v);
	const char *s = json_string_value(v);
	if (memchr(s, '\0', n))
		return -EINVAL;
	char *c = malloc(n + 1);
	if (!c)
		return -ENOMEM;
	memcpy(c, s, n);
	c[n] = '\0';
	*value = c;
	*len = n;
	return 0;
}

int ab_credfile_set(json_t *root, const char *ptr, const char *s, size_t n)
{
	json_t *v = ab_json_pointer_get(root, ptr);
	if (!v)
		return -ENOENT;
	if (!json_is_string(v))
		return -EINVAL;
	return json_string_setn(v, s, n) < 0 ? -ENOMEM : 0;
}

int ab_credfile_keep(json_t *root, char *const *ptrs, size_t n, json_t **out)
{
	char tok[AB_JSON_POINTER_MAX + 1];
	json_t *doc = json_object();
	if (!doc)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		json_t *v = ab_json_pointer_get(root, ptrs[i]);
		if (!v || !ptrs[i][0])
			continue;
		/* only through objects (an array index is not kept) */
		json_t *w = root;
		bool objs = true;
		for (const char *q = ptrs[i]; objs && *q;) {
			objs = json_is_object(w) && next_token(&q, tok, sizeof(tok)) >= 0;
			w = objs ? json_object_get(w, tok) : NULL;
		}
		if (!objs)
			continue;
		/* walk ROOT and DOC together, creating objects in DOC */
		json_t *src = root, *dst = doc;
		const char *p = ptrs[i];
		bool ok = true;
		while (ok && *p) {
			if (next_token(&p, tok, sizeof(tok)) < 0 || !json_is_object(src) ||
			    !json_is_object(dst)) {
				ok = false;
				break;
			}
			src = json_object_get(src, tok);
			if (!*p) {
				ok = json_object_set(dst, tok, v) == 0;
				if (!ok) {
					json_decref(doc);
					return -ENOMEM;
				}
				break;
			}
			json_t *next = json_object_get(dst, tok);
			if (!next) {
				next = json_object();
				if (!next || json_object_set_new(dst, tok, next) < 0) {
					json_decref(doc);
					return -ENOMEM;
				}
			}
			dst = next;
		}
	}
	/* the kept parts are shared with ROOT: copy so ROOT can be changed apart */
	json_t *copy = json_deep_copy(doc);
	json_decref(doc);
	if (!copy)
		return -ENOMEM;
	*out = copy;
	return 0;
}

int ab_credfile_dump(const json_t *root, char **out, size_t *len)
{
	ab_credfile_init();
	char *s = json_dumps(root, JSON_COMPACT);
	if (!s)
		return -ENOMEM;
	*out = s;
	*len = strlen(s);
	return 0;
}

bool ab_credfile_stamp_kind_ok(const char *kind)
{
	return strcmp(kind, "now") == 0 || strcmp(kind, "expires_at_ms") == 0;
}

int ab_credfile_stamps_add(ab_credfile_stamps *st, const char *ptr, const char *kind)
{
	for (size_t i = 0; i < st->n; i++)
		if (strcmp(st->ptr[i], ptr) == 0)
			return 0;
	if (st->n >= AB_CREDFILE_STAMPS_MAX)
		return -E2BIG;
	st->ptr[st->n] = ptr;
	st->kind[st->n++] = kind;
	return 0;
}

long long ab_credfile_expires_in(json_t *root)
{
	json_t *v = json_is_object(root) ? json_object_get(root, "expires_in") : NULL;
	long long e = json_is_integer(v) ? (long long)json_integer_value(v) : 0;
	return e > 0 && e <= AB_CREDFILE_EXPIRES_MAX ? e : 0;
}

/* The object a stamp's pointer ends in, and the member's name (TOK). */
static json_t *stamp_parent(json_t *root, const char *ptr, char *tok, size_t size)
{
	if (ab_json_pointer_check(ptr) < 0 || !ptr[0])
		return NULL;
	const char *last = strrchr(ptr, '/');
	char parent[AB_JSON_POINTER_MAX + 1];
	size_t pl = (size_t)(last - ptr);
	memcpy(parent, ptr, pl);
	parent[pl] = '\0';
	json_t *obj = ab_json_pointer_get(root, parent);
	const char *q = last;
	if (!json_is_object(obj) || next_token(&q, tok, size) < 0)
		return NULL;
	return obj;
}

int ab_credfile_apply_stamps(json_t *root, const ab_credfile_stamps *st)
{
	int done = 0;
	for (size_t i = 0; st && i < st->n; i++) {
		char tok[AB_JSON_POINTER_MAX + 1];
		json_t *obj = stamp_parent(root, st->ptr[i], tok, sizeof(tok));
		json_t *v = NULL;
		if (!obj)
			continue;
		if (strcmp(st->kind[i], "now") == 0) {
			time_t sec = (time_t)(st->now_us / 1000000);
			struct tm tm;
			char buf[64];
			if (!gmtime_r(&sec, &tm) ||
			    !strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm))
				continue;
			size_t l = strlen(buf);
			snprintf(buf + l, sizeof(buf) - l, ".%06lldZ", st->now_us % 1000000);
			v = json_string(buf);
		} else if (strcmp(st->kind[i], "expires_at_ms") == 0 && st->expires_in > 0) {
			v = json_integer((json_int_t)(st->now_us / 1000 + st->expires_in * 1000));
		} else {
			continue;
		}
		if (!v || json_object_set_new(obj, tok, v) < 0)
			return -ENOMEM;
		done++;
	}
	return done;
}

/* The new version of the file REAL: its values at PTRS set to VALS, the
 * stamps applied, as compact JSON in *OUT (malloc'd; the caller wipes it).
 * *ST is the file as it was read. */
static int new_version(const char *real, const char *const *ptrs, const char *const *vals,
		       const size_t *lens, size_t n, const ab_credfile_stamps *stamps,
		       struct stat *st, char **out, size_t *olen, ab_err *err)
{
	char *buf = NULL;
	size_t blen = 0, cap = 0;
	int r = read_small(real, &buf, &blen, &cap, st, err);
	if (r < 0)
		return r;
	json_t *root = NULL;
	r = parse_max(buf, blen, AB_CREDFILE_FILE_MAX, &root, err);
	wipe_buf(buf, cap);
	if (r < 0)
		return ab_err_prefix(err, "%s", real);
	for (size_t i = 0; i < n; i++) {
		r = ab_credfile_set(root, ptrs[i], vals[i], lens[i]);
		if (r < 0) {
			json_decref(root);
			return ab_fail(err, -r, "%s: %s is %s", real, ptrs[i],
				       r == -ENOENT ? "not there any more" : "not a string");
		}
	}
	if (ab_credfile_apply_stamps(root, stamps) < 0) {
		json_decref(root);
		return ab_fail(err, ENOMEM, "%s", real);
	}
	r = ab_credfile_dump(root, out, olen);
	json_decref(root);
	return r < 0 ? ab_fail(err, -r, "%s", real) : 0;
}

/* Overwrite REAL with OUT in the same inode: a mount on this path (the
 * sandbox's rendered copy) stays where it is; renaming over it would
 * detach it.  OUT is wiped. */
static int write_in_place(const char *real, char *out, size_t olen, ab_err *err)
{
	_cleanup_close_ int fd = open(real, O_WRONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY);
	int r = fd < 0 ? -errno : 0;
	ssize_t w = r ? -1 : pwrite(fd, out, olen, 0);
	if (!r && (w < 0 || (size_t)w != olen))
		r = w < 0 ? -errno : -EIO;
	if (!r && ftruncate(fd, (off_t)olen) < 0)
		r = -errno;
	if (!r && fsync(fd) < 0)
		r = -errno;
	wipe_buf(out, olen);
	return r < 0 ? ab_fail(err, -r, "%s: write the new version", real) : 0;
}

/* A new file beside BASE in DFD (directory DIR), named into TMP: its fd, or
 * -errno with ERR set. */
static int create_temp(int dfd, const char *dir, const char *base, const char *real,
		       char tmp[NAME_MAX + 1], ab_err *err)
{
	unsigned char rnd[6];
	if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
		return ab_fail(err, EIO, "getrandom");
	int tl = snprintf(tmp, NAME_MAX + 1, ".%.200s.agentbox-%02x%02x%02x%02x%02x%02x", base,
			  rnd[0], rnd[1], rnd[2], rnd[3], rnd[4], rnd[5]);
	if (tl < 0 || tl >= NAME_MAX + 1)
		return ab_fail(err, ENAMETOOLONG, "%s", real);
	int tfd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (tfd < 0)
		return ab_fail(err, errno, "create a temporary file in %s", dir);
	return tfd;
}

/* Replace REAL by a new file holding OUT, with the owner and mode of the
 * old one (ST), renamed over it.  OUT is wiped. */
static int replace_by_rename(const char *real, const struct stat *st, char *out, size_t olen,
			     ab_err *err)
{
	char dirbuf[PATH_MAX], basebuf[PATH_MAX];
	snprintf(dirbuf, sizeof(dirbuf), "%s", real);
	snprintf(basebuf, sizeof(basebuf), "%s", real);
	const char *dir = dirname(dirbuf), *base = basename(basebuf);
	_cleanup_close_ int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0) {
		int e = errno;
		wipe_buf(out, olen);
		return ab_fail(err, e, "open %s", dir);
	}
	char tmp[NAME_MAX + 1];
	int tfd = create_temp(dfd, dir, base, real, tmp, err);
	if (tfd < 0) {
		wipe_buf(out, olen);
		return tfd;
	}
	const char *step = "write";
	int r = ab_write_all(tfd, out, olen);
	wipe_buf(out, olen);
	if (!r && (st->st_uid != geteuid() || st->st_gid != getegid()) &&
	    fchown(tfd, st->st_uid, st->st_gid) < 0)
		r = -errno, step = "chown";
	if (!r && fchmod(tfd, st->st_mode & 07777) < 0)
		r = -errno, step = "chmod";
	if (!r && fsync(tfd) < 0)
		r = -errno, step = "fsync";
	if (close(tfd) < 0 && !r)
		r = -errno, step = "close";
	if (!r && renameat(dfd, tmp, dfd, base) < 0)
		r = -errno, step = "rename";
	if (r < 0) {
		unlinkat(dfd, tmp, 0);
		return ab_fail(err, -r, "%s: %s the new version", real, step);
	}
	(void)fsync(dfd);
	return 0;
}

int ab_credfile_update(const char *path, const char *const *ptrs, const char *const *vals,
		       const size_t *lens, size_t n, const ab_credfile_stamps *stamps,
		       bool in_place, ab_err *err)
{
	char real[PATH_MAX];
	if (!realpath(path, real))
		return ab_fail(err, errno, "cannot resolve %s", path);
	struct stat st;
	char *out = NULL;
	size_t olen = 0;
	int r = new_version(real, ptrs, vals, lens, n, stamps, &st, &out, &olen, err);
	if (r < 0)
		return r;
	if (in_place)
		return write_in_place(real, out, olen, err);
	return replace_by_rename(real, &st, out, olen, err);
}
