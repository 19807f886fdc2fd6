/* SPDX-License-Identifier: MIT */
/*
 * Guarded keys of writable JSON files (guard.h).
 */
#include "guard.h"

#include "agentbox/credfile.h"
#include "agentbox/json_pos.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define GUARD_FILES_MAX 16

/* The node at PREFIX ("" is the whole document). */
static json_t *at(json_t *doc, const char *prefix)
{
	return prefix[0] ? ab_json_pointer_get(doc, prefix) : doc;
}

/* KEY as a pointer segment: '~' -> "~0", '/' -> "~1". */
static char *escape_key(const char *key)
{
	size_t n = strlen(key), extra = 0;
	for (size_t i = 0; i < n; i++)
		extra += key[i] == '~' || key[i] == '/';
	char *o = malloc(n + extra + 1), *w = o;
	if (!o)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		if (key[i] == '~' || key[i] == '/') {
			*w++ = '~';
			*w++ = key[i] == '~' ? '0' : '1';
		} else {
			*w++ = key[i];
		}
	}
	*w = '\0';
	return o;
}

static int expand(json_t *doc, const char *prefix, const char *rest, json_t *out)
{
	if (!rest[0]) {
		json_t *v = at(doc, prefix);
		return v && json_object_set(out, prefix, v) < 0 ? -ENOMEM : 0;
	}
	const char *seg = rest + 1; /* rest starts with '/' */
	size_t sl = strcspn(seg, "/");
	const char *next = seg + sl;
	if (sl == 1 && seg[0] == '*') {
		json_t *obj = at(doc, prefix);
		const char *k;
		json_t *v;
		if (!json_is_object(obj))
			return 0;
		json_object_foreach(obj, k, v)
		{
			_cleanup_free_ char *e = escape_key(k);
			_cleanup_free_ char *p = e ? ab_asprintf("%s/%s", prefix, e) : NULL;
			int r = p ? expand(doc, p, next, out) : -ENOMEM;
			if (r < 0)
				return r;
		}
		return 0;
	}
	_cleanup_free_ char *p = ab_asprintf("%s/%.*s", prefix, (int)sl, seg);
	return p ? expand(doc, p, next, out) : -ENOMEM;
}

int ab_guard_collect(json_t *doc, const char *ptr, json_t *out)
{
	return doc ? expand(doc, "", ptr, out) : 0;
}

/* The last segment of PTR, unescaped, and its parent's pointer. */
static int split_last(const char *ptr, char **parent, char **key)
{
	const char *slash = strrchr(ptr, '/');
	*parent = strndup(ptr, (size_t)(slash - ptr));
	*key = malloc(strlen(slash));
	if (!*parent || !*key)
		return -ENOMEM;
	char *w = *key;
	for (const char *s = slash + 1; *s; s++) {
		if (s[0] == '~' && (s[1] == '0' || s[1] == '1')) {
			*w++ = s[1] == '0' ? '~' : '/';
			s++;
		} else {
			*w++ = *s;
		}
	}
	*w = '\0';
	return 0;
}

/* Put START's value back at PTR (or remove it): 1 if DOC changed. */
static int put_back(json_t *doc, const char *ptr, json_t *old)
{
	_cleanup_free_ char *parent = NULL, *key = NULL;
	if (split_last(ptr, &parent, &key) < 0)
		return -ENOMEM;
	json_t *obj = at(doc, parent);
	if (!json_is_object(obj))
		return 0; /* its parent is gone: nothing there runs */
	if (!old)
		return json_object_del(obj, key) == 0;
	return json_object_set_new(obj, key, json_deep_copy(old)) < 0 ? -ENOMEM : 1;
}

int ab_guard_restore(json_t *doc, const ab_strv *ptrs, json_t *start, ab_strv *changed)
{
	_cleanup_json_ json_t *now = json_object();
	if (!now)
		return -ENOMEM;
	for (size_t i = 0; i < ptrs->n; i++)
		if (ab_guard_collect(doc, ptrs->v[i], now) < 0)
			return -ENOMEM;
	const char *k;
	json_t *v;
	json_object_foreach(start, k, v) /* guarded values the run removed */
		if (!json_object_get(now, k) &&
		    json_object_set(now, k, json_null()) < 0) return -ENOMEM;
	int n = 0;
	json_object_foreach(now, k, v)
	{
		json_t *old = json_object_get(start, k);
		json_t *cur = at(doc, k);
		if (old && cur && json_equal(old, cur))
			continue;
		if (!old && !cur)
			continue;
		int r = put_back(doc, k, old);
		if (r < 0)
			return r;
		if (r > 0) {
			if (ab_strv_push(changed, k) < 0)
				return -ENOMEM;
			n++;
		}
	}
	return n;
}

static bool same(json_t *a, json_t *b)
{
	return a == b || (a && b && json_equal(a, b));
}

/* T, B, O: the same object in the host's document now, at the start (or
 * NULL) and in the run's copy. */
static int merge_object(json_t *t, json_t *b, json_t *o)
{
	const char *k;
	json_t *ov, *bv;
	json_object_foreach(o, k, ov)
	{
		bv = b ? json_object_get(b, k) : NULL;
		json_t *tv = json_object_get(t, k);
		if (same(ov, bv) || same(ov, tv))
			continue; /* the run left it, or both made it the same */
		if (same(tv, bv)) {
			if (json_object_set_new(t, k, json_deep_copy(ov)) < 0)
				return -ENOMEM;
		} else if (json_is_object(tv) && json_is_object(ov) &&
			   (!bv || json_is_object(bv))) {
			int r = merge_object(tv, bv, ov);
			if (r < 0)
				return r;
		} /* else both changed it: the host's stays */
	}
	if (b)
		json_object_foreach(b, k, bv) /* what the run removed */
			if (!json_object_get(o, k) && same(json_object_get(t, k), bv))
				json_object_del(t, k);
	return 0;
}

int ab_guard_merge(json_t **theirs, json_t *base, json_t *ours)
{
	if (!ours || same(ours, base) || same(ours, *theirs))
		return 0;
	if (same(*theirs, base)) {
		json_t *c = json_deep_copy(ours);
		if (!c)
			return -ENOMEM;
		json_decref(*theirs);
		*theirs = c;
		return 0;
	}
	if (json_is_object(*theirs) && json_is_object(ours) && (!base || json_is_object(base)))
		return merge_object(*theirs, base, ours);
	return 0;
}

static ab_guard_file *file_of(ab_guard *g, const char *path)
{
	for (size_t i = 0; i < g->n; i++)
		if (strcmp(g->f[i].path, path) == 0)
			return &g->f[i];
	if (g->n >= GUARD_FILES_MAX)
		return NULL;
	ab_guard_file *f = &g->f[g->n];
	*f = (ab_guard_file){.path = strdup(path), .vals = json_object(), .copy_fd = -1};
	if (!f->path || !f->vals) {
		free(f->path);
		json_decref(f->vals);
		return NULL;
	}
	g->n++;
	return f;
}

/* The document now; NULL for an absent file (-ENOENT), or with *ERR set. */
static int load(const char *path, json_t **doc, ab_err *err)
{
	struct stat st;
	*doc = NULL;
	if (lstat(path, &st) < 0)
		return errno == ENOENT ? -ENOENT
				       : ab_fail(err, errno, "filesystem.guard: %s", path);
	if (!S_ISREG(st.st_mode))
		return ab_fail(err, EINVAL, "filesystem.guard: %s is not a regular file", path);
	if (st.st_size == 0)
		return -ENOENT; /* empty: no keys (as the harness takes it) */
	int r = ab_credfile_load(path, doc, err);
	return r < 0 ? ab_err_prefix(err, "filesystem.guard") : 0;
}

/* The bytes of the regular file PATH (at most AB_CREDFILE_FILE_MAX) and its
 * status: 0, -ENOENT (absent), or with *ERR set. */
static int read_bytes(const char *path, char **buf, size_t *len, struct stat *st, ab_err *err)
{
	_cleanup_close_ int fd =
		open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	size_t cap;
	if (fd < 0)
		return errno == ENOENT ? -ENOENT
				       : ab_fail(err, errno, "filesystem.guard: %s", path);
	int r = ab_credfile_read_fd(fd, path, buf, len, &cap, st, err);
	return r < 0 ? ab_err_prefix(err, "filesystem.guard") : 0;
}

/* The run's copy of F: the same bytes, owner and mode, made before the
 * sandbox starts (O_EXCL: never a file someone else put there). */
static int make_copy(ab_guard_file *f, const char *copy, const char *buf, size_t len,
		     const struct stat *st, ab_err *err)
{
	f->copy = strdup(copy);
	if (!f->copy)
		return ab_fail(err, ENOMEM, "filesystem.guard");
	f->copy_fd = open(copy, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (f->copy_fd < 0) {
		free(TAKE_PTR(f->copy));
		return ab_fail(err, errno, "filesystem.guard: make the run's copy %s", copy);
	}
	struct stat cst;
	int r = ab_write_all(f->copy_fd, buf, len);
	if (r == 0 && ((geteuid() == 0 && fchown(f->copy_fd, st->st_uid, st->st_gid) < 0) ||
		       fchmod(f->copy_fd, st->st_mode & 0777) < 0 || fstat(f->copy_fd, &cst) < 0))
		r = -errno;
	f->copy_dev = r == 0 ? cst.st_dev : 0;
	f->copy_ino = r == 0 ? cst.st_ino : 0;
	return r < 0 ? ab_fail(err, -r, "filesystem.guard: write the run's copy %s", copy) : 0;
}

/* F's values at the start, and its copy when the plan shows one (COPY). */
static int snapshot_file(ab_guard_file *f, const char *copy, ab_err *err)
{
	_cleanup_free_ char *buf = NULL;
	size_t len = 0;
	struct stat st;
	_cleanup_json_ json_t *doc = NULL;
	int r = read_bytes(f->path, &buf, &len, &st, err);
	if (r == -ENOENT) {
		if (copy) /* gone since the plan: the bind would fail */
			return ab_fail(err, ENOENT, "filesystem.guard: %s", f->path);
		return 0;
	}
	if (r == 0 && len && ab_credfile_parse_file(buf, len, &doc, err) < 0)
		r = ab_err_prefix(err, "filesystem.guard: %s", f->path);
	if (r < 0) {
		ab_err_hint(err, "agentbox reads it to keep its guarded keys off the host; fix "
				 "or remove the file");
		return r;
	}
	for (size_t j = 0; doc && j < f->ptrs.n; j++)
		if (ab_guard_collect(doc, f->ptrs.v[j], f->vals) < 0)
			return ab_fail(err, ENOMEM, "filesystem.guard");
	if (!copy)
		return 0;
	f->base = TAKE_PTR(doc);
	r = make_copy(f, copy, buf, len, &st, err);
	f->start = TAKE_PTR(buf);
	f->start_len = len;
	return r;
}

static const char *copy_of(const ab_plan *plan, const char *path)
{
	for (size_t i = 0; i < plan->nmounts; i++)
		if (plan->mounts[i].copy && strcmp(plan->mounts[i].dst, path) == 0)
			return plan->mounts[i].copy;
	return NULL;
}

int ab_guard_snapshot(ab_guard *g, const ab_plan *plan, ab_err *err)
{
	const ab_strv *entries = &plan->guard;
	memset(g, 0, sizeof(*g));
	if (!entries->n)
		return 0;
	g->f = calloc(GUARD_FILES_MAX, sizeof(*g->f));
	if (!g->f)
		return ab_fail(err, ENOMEM, "filesystem.guard");
	for (size_t i = 0; i < entries->n; i++) {
		const char *e = entries->v[i];
		const char *hash = strstr(e, "#/");
		_cleanup_free_ char *path = hash ? strndup(e, (size_t)(hash - e)) : NULL;
		ab_guard_file *f = path ? file_of(g, path) : NULL;
		if (!f || ab_strv_push(&f->ptrs, hash + 1) < 0)
			return ab_fail(err, ENOMEM, "filesystem.guard");
	}
	for (size_t i = 0; i < g->n; i++)
		if (snapshot_file(&g->f[i], copy_of(plan, g->f[i].path), err) < 0)
			return -1;
	return 0;
}

/* DOC over PATH by rename, with the file's owner and mode. */
static int rewrite(const char *path, json_t *doc, const struct stat *st)
{
	_cleanup_free_ char *text = json_dumps(doc, JSON_INDENT(2));
	_cleanup_free_ char *tmp = ab_asprintf("%s.agentbox-%d", path, (int)getpid());
	if (!text || !tmp)
		return -ENOMEM;
	_cleanup_close_ int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
				      st->st_mode & 07777);
	if (fd < 0)
		return -errno;
	int r = ab_write_all(fd, text, strlen(text));
	if (r == 0 && (fchmod(fd, st->st_mode & 07777) < 0 ||
		       (geteuid() == 0 && fchown(fd, st->st_uid, st->st_gid) < 0) || fsync(fd) < 0))
		r = -errno;
	if (r == 0 && rename(tmp, path) < 0)
		r = -errno;
	if (r < 0)
		unlink(tmp);
	return r;
}

/* "a, b, c" of CHANGED, cleaned for a terminal, in K. */
static void key_list(const ab_strv *changed, char *k, size_t size)
{
	char keys[1024] = "";
	for (size_t i = 0, used = 0; i < changed->n && used < sizeof(keys); i++) {
		int w = snprintf(keys + used, sizeof(keys) - used, "%s%s", i ? ", " : "",
				 changed->v[i]);
		used += w > 0 ? (size_t)w : 0;
	}
	ab_clean(keys, k, size);
}

static void settle_file(const ab_guard_file *f, bool restore, ab_strv *findings)
{
	ab_err err = {0};
	_cleanup_json_ json_t *doc = NULL;
	struct stat st;
	int r = load(f->path, &doc, &err);
	if (r == -ENOENT)
		return;
	char c[PATH_MAX * 4 + 1];
	ab_clean(f->path, c, sizeof(c));
	char *line = NULL;
	_cleanup_strv_ ab_strv changed = {0};
	if (r < 0) {
		line = ab_asprintf(
			"%s cannot be read after the run (%s): its guarded keys were NOT "
			"checked; review it before a program on the host reads it",
			c, err.msg);
	} else if ((r = ab_guard_restore(doc, &f->ptrs, f->vals, &changed)) > 0) {
		char k[4 * 1024 + 1];
		key_list(&changed, k, sizeof(k));
		if (!restore)
			line = ab_asprintf(
				"%s: keys changed during the run LEFT (test ablation): %s", c, k);
		else if (lstat(f->path, &st) < 0 || (r = rewrite(f->path, doc, &st)) < 0)
			line = ab_asprintf("%s: keys changed during the run could NOT be put back "
					   "(%s): %s; review them before a program on the host "
					   "reads it",
					   c, strerror(r < 0 ? -r : errno), k);
		else
			line = ab_asprintf("%s: put back what the run changed of its guarded keys: "
					   "%s",
					   c, k);
	}
	if (line && ab_strv_push_take(findings, line) < 0)
		free(line);
}

/* What the run left in its copy (NULL: an empty file); -1 with *ERR.  The
 * sandbox is gone: nothing writes it any more. */
/* 1 when it holds the bytes it started with (nothing to merge). */
static int read_copy(ab_guard_file *f, json_t **doc, ab_err *err)
{
	struct stat st;
	*doc = NULL;
	if (f->copy_fd < 0 || fstat(f->copy_fd, &st) < 0 || st.st_dev != f->copy_dev ||
	    st.st_ino != f->copy_ino) {
		/* the cleanup watcher: this number is closed, or another fd now */
		f->copy_fd = open(f->copy, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
		if (f->copy_fd < 0 || fstat(f->copy_fd, &st) < 0)
			return ab_fail(err, errno, "open");
		if (st.st_dev != f->copy_dev || st.st_ino != f->copy_ino)
			return ab_fail(err, 0, "it is no longer the copy agentbox made");
	}
	_cleanup_free_ char *buf = NULL;
	size_t got = 0, cap;
	if (lseek(f->copy_fd, 0, SEEK_SET) < 0)
		return ab_fail(err, errno, "lseek");
	if (ab_credfile_read_fd(f->copy_fd, f->copy, &buf, &got, &cap, &st, err) < 0)
		return -1;
	if (got == f->start_len && (!got || memcmp(buf, f->start, f->start_len) == 0))
		return 1;
	return got ? ab_credfile_parse_file(buf, got, doc, err) : 0;
}

/* The copy stays where it is for the user to review: the host's file is
 * as it was. */
static char *keep_copy(ab_guard_file *f, const char *c, const char *why)
{
	char k[PATH_MAX * 4 + 1];
	ab_clean(f->copy, k, sizeof(k));
	ab_closep(&f->copy_fd);
	f->settled = true;
	return ab_asprintf("%s: what the run wrote to it was NOT merged (%s); it is kept in %s "
			   "for you to review",
			   c, why, k);
}

/* The guarded keys the run changed in OURS, pushed to CHANGED. */
static int run_changed(const ab_guard_file *f, json_t *ours, ab_strv *changed)
{
	_cleanup_json_ json_t *probe = ours ? json_deep_copy(ours) : NULL;
	if (ours && !probe)
		return -ENOMEM;
	return probe ? ab_guard_restore(probe, &f->ptrs, f->vals, changed) : 0;
}

/* Merge the run's copy into the host's file, its guarded keys left as the
 * host has them (RESTORE; all of it in the test ablation). */
static char *settle_copy(ab_guard_file *f, const char *c, bool restore)
{
	ab_err err = {0};
	_cleanup_json_ json_t *ours = NULL, *theirs = NULL, *before = NULL;
	_cleanup_json_ json_t *hostvals = json_object();
	_cleanup_strv_ ab_strv changed = {0}, put = {0};
	struct stat st;
	int same_bytes = read_copy(f, &ours, &err);
	if (same_bytes < 0)
		return keep_copy(f, c, err.msg);
	if (same_bytes) { /* the run left it as it was */
		unlink(f->copy);
		ab_closep(&f->copy_fd);
		f->settled = true;
		return NULL;
	}
	if (!hostvals || run_changed(f, ours, &changed) < 0)
		return keep_copy(f, c, strerror(ENOMEM));
	int r = load(f->path, &theirs, &err);
	if (r == -ENOENT && lstat(f->path, &st) < 0)
		return keep_copy(f, c, "the file was removed on the host while the run lasted");
	if (r < 0 && r != -ENOENT)
		return keep_copy(f, c, err.msg);
	/* the host's guarded values, from a copy: the merge changes THEIRS */
	before = theirs ? json_deep_copy(theirs) : NULL;
	for (size_t j = 0; before && j < f->ptrs.n; j++)
		if (ab_guard_collect(before, f->ptrs.v[j], hostvals) < 0)
			return keep_copy(f, c, strerror(ENOMEM));
	if ((theirs && !before) || ab_guard_merge(&theirs, f->base, ours) < 0 ||
	    (restore && theirs && ab_guard_restore(theirs, &f->ptrs, hostvals, &put) < 0))
		return keep_copy(f, c, strerror(ENOMEM));
	if (theirs && !same(theirs, before) &&
	    (lstat(f->path, &st) < 0 || (r = rewrite(f->path, theirs, &st)) < 0))
		return keep_copy(f, c, strerror(r < 0 ? -r : errno));
	unlink(f->copy);
	ab_closep(&f->copy_fd);
	f->settled = true;
	if (!changed.n)
		return NULL;
	char k[4 * 1024 + 1];
	key_list(&changed, k, sizeof(k));
	return restore ? ab_asprintf("%s: the run's changes were merged back except its guarded "
				     "keys, which stay as the host has them: %s",
				     c, k)
		       : ab_asprintf("%s: keys changed during the run LEFT (test ablation): %s", c,
				     k);
}

void ab_guard_settle(ab_guard *g, bool restore, ab_strv *findings)
{
	for (size_t i = 0; i < g->n; i++) {
		ab_guard_file *f = &g->f[i];
		if (!f->copy) {
			settle_file(f, restore, findings);
			continue;
		}
		if (f->settled)
			continue;
		char c[PATH_MAX * 4 + 1];
		ab_clean(f->path, c, sizeof(c));
		char *line = settle_copy(f, c, restore);
		if (line && ab_strv_push_take(findings, line) < 0)
			free(line);
	}
}

void ab_guard_free(ab_guard *g)
{
	for (size_t i = 0; i < g->n; i++) {
		ab_guard_file *f = &g->f[i];
		if (f->copy && !f->settled) /* the run never ran: nothing to merge */
			unlink(f->copy);
		ab_closep(&f->copy_fd);
		free(f->copy);
		json_decref(f->base);
		free(f->start);
		free(f->path);
		ab_strv_free(&f->ptrs);
		json_decref(f->vals);
	}
	free(g->f);
	memset(g, 0, sizeof(*g));
}
