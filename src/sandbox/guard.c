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

static ab_guard_file *file_of(ab_guard *g, const char *path)
{
	for (size_t i = 0; i < g->n; i++)
		if (strcmp(g->f[i].path, path) == 0)
			return &g->f[i];
	if (g->n >= GUARD_FILES_MAX)
		return NULL;
	ab_guard_file *f = &g->f[g->n];
	*f = (ab_guard_file){.path = strdup(path), .vals = json_object()};
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

int ab_guard_snapshot(ab_guard *g, const ab_strv *entries, ab_err *err)
{
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
	for (size_t i = 0; i < g->n; i++) {
		_cleanup_json_ json_t *doc = NULL;
		int r = load(g->f[i].path, &doc, err);
		if (r == -ENOENT)
			continue;
		if (r < 0) {
			ab_err_hint(err, "agentbox reads it to put its guarded keys back after the "
					 "run; fix or remove the file");
			return r;
		}
		for (size_t j = 0; j < g->f[i].ptrs.n; j++)
			if (ab_guard_collect(doc, g->f[i].ptrs.v[j], g->f[i].vals) < 0)
				return ab_fail(err, ENOMEM, "filesystem.guard");
	}
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
		char keys[1024] = "", k[4 * sizeof(keys) + 1];
		for (size_t i = 0, used = 0; i < changed.n && used < sizeof(keys); i++) {
			int w = snprintf(keys + used, sizeof(keys) - used, "%s%s", i ? ", " : "",
					 changed.v[i]);
			used += w > 0 ? (size_t)w : 0;
		}
		ab_clean(keys, k, sizeof(k));
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

void ab_guard_settle(const ab_guard *g, bool restore, ab_strv *findings)
{
	for (size_t i = 0; i < g->n; i++)
		settle_file(&g->f[i], restore, findings);
}

void ab_guard_free(ab_guard *g)
{
	for (size_t i = 0; i < g->n; i++) {
		free(g->f[i].path);
		ab_strv_free(&g->f[i].ptrs);
		json_decref(g->f[i].vals);
	}
	free(g->f);
	memset(g, 0, sizeof(*g));
}
