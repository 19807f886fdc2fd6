/* SPDX-License-Identifier: MIT */
/*
 * Review mode's change sets (include/agentbox/review.h): prepared before a
 * review run, read after it and by `agentbox review` / `apply`.  Parent only.
 *
 * A change set directory (ab_review_dir_for, 0700) holds:
 *   upper/  the overlay's upper layer: what the sandbox wrote (untrusted);
 *   work/   the overlay's work directory;
 *   meta    JSON written by agentbox: the workspace, the protected paths,
 *           the run's audit log (where review / apply / discard write too).
 *
 * How the overlay shows a change in upper/ (userxattr mode):
 *   a regular file, symlink or directory   added, or modified when the
 *                                          workspace has one at that path;
 *   a character device 0:0                 a whiteout: deleted;
 *   a directory with user.overlay.opaque=y it replaced the workspace's:
 *                                          what only the workspace has there
 *                                          is deleted.
 * The mount (src/sandbox/mount.c) turns redirects and metacopy off, so an
 * entry carrying either mark (or any other device, FIFO or socket) was not
 * made by the overlay for an ordinary change: listed as special, never
 * applied.  Unchanged copies (a file opened for writing and left as it
 * was) are not listed.
 */
#include "agentbox/review.h"
#include "agentbox/plan.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#define META_MAX (1u << 20)
#define OVL_XATTR "user.overlay."

void ab_changeset_free(ab_changeset *cs)
{
	for (size_t i = 0; i < cs->n; i++) {
		free(cs->v[i].path);
		free(cs->v[i].target);
	}
	free(cs->v);
	ab_strv_free(&cs->protect);
	*cs = (ab_changeset){0};
}

/* ------------------------------------------------------------ risks (pure) */

static const char *const usual_ext[] = {
	"c",
	"h",
	"cc",
	"cpp",
	"cxx",
	"hpp",
	"hh",
	"rs",
	"go",
	"py",
	"pyi",
	"js",
	"mjs",
	"cjs",
	"ts",
	"tsx",
	"jsx",
	"java",
	"kt",
	"kts",
	"scala",
	"rb",
	"php",
	"pl",
	"pm",
	"lua",
	"swift",
	"m",
	"mm",
	"cs",
	"fs",
	"ex",
	"exs",
	"erl",
	"hs",
	"ml",
	"mli",
	"clj",
	"dart",
	"r",
	"jl",
	"zig",
	"nim",
	"sql",
	"md",
	"rst",
	"txt",
	"adoc",
	"org",
	"tex",
	"json",
	"jsonc",
	"yaml",
	"yml",
	"toml",
	"ini",
	"cfg",
	"conf",
	"xml",
	"html",
	"htm",
	"css",
	"scss",
	"sass",
	"less",
	"svg",
	"csv",
	"tsv",
	"lock",
	"mod",
	"sum",
	"gradle",
	"cmake",
	"mk",
	"am",
	"in",
	"ac",
	"proto",
	"graphql",
	"vue",
	"svelte",
	"astro",
	"diff",
	"patch",
	"gitignore",
	"gitattributes",
	"editorconfig",
	"dockerignore",
	"po",
	"pot",
	"1",
	"5",
	"8",
};
static const char *const usual_names[] = {
	"Makefile",  "GNUmakefile", "Dockerfile",  "Containerfile", "README",  "LICENSE",
	"COPYING",   "NEWS",        "AUTHORS",     "CHANGELOG",     "Gemfile", "Rakefile",
	"Procfile",  "Jenkinsfile", "Vagrantfile", "CODEOWNERS",    "go.work", "BUILD",
	"WORKSPACE", "meson.build", "configure",   "Cargo.lock",
};

static bool usual_type(const char *path)
{
	const char *base = strrchr(path, '/');
	base = base ? base + 1 : path;
	for (size_t i = 0; i < AB_ARRAY_SIZE(usual_names); i++)
		if (strcmp(base, usual_names[i]) == 0)
			return true;
	const char *dot = strrchr(base, '.');
	if (!dot || !dot[1])
		return false;
	for (size_t i = 0; i < AB_ARRAY_SIZE(usual_ext); i++)
		if (strcasecmp(dot + 1, usual_ext[i]) == 0)
			return true;
	return false;
}

/* a ".git" component below the top: another repository */
static bool nested_git(const char *path)
{
	for (const char *c = strchr(path, '/'); c; c = strchr(c + 1, '/'))
		if (strncmp(c + 1, ".git", 4) == 0 && (c[5] == '/' || c[5] == '\0'))
			return true;
	return false;
}

static bool related(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	size_t n = la < lb ? la : lb;
	if (strncmp(a, b, n) != 0)
		return false;
	return la == lb || (la > lb ? a[n] == '/' : b[n] == '/');
}

unsigned ab_review_path_risk(const char *path, enum ab_change_type type, mode_t mode, uint64_t size,
			     bool binary, const ab_strv *protect)
{
	unsigned r = 0;
	for (size_t i = 0; protect && i < protect->n; i++)
		if (related(path, protect->v[i]))
			r |= AB_RISK_PROTECTED;
	if (nested_git(path))
		r |= AB_RISK_NESTED_GIT;
	bool in_top_git = strncmp(path, ".git/", 5) == 0 || strcmp(path, ".git") == 0;
	switch (type) {
	case AB_CHT_FILE:
		if (mode & 0111)
			r |= AB_RISK_EXEC;
		if (!in_top_git && !(r & AB_RISK_NESTED_GIT) && !usual_type(path))
			r |= AB_RISK_UNUSUAL;
		if (binary && size >= AB_REVIEW_LARGE)
			r |= AB_RISK_BINARY;
		break;
	case AB_CHT_SYMLINK: r |= AB_RISK_SYMLINK; break;
	case AB_CHT_SPECIAL: r |= AB_RISK_SPECIAL; break;
	case AB_CHT_DIR: break;
	}
	if (mode & (S_ISUID | S_ISGID))
		r |= AB_RISK_EXEC;
	return r;
}

/* ------------------------------------------------------------ prepare */

static int mkdir_owned(const char *path, mode_t mode, uid_t uid, gid_t gid, ab_err *err)
{
	if (mkdir(path, mode) < 0 && errno != EEXIST)
		return ab_fail(err, errno, "review mode: mkdir %s", path);
	_cleanup_close_ int fd = ab_open_nofollow(path, O_RDONLY | O_DIRECTORY);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0)
		return ab_fail(err, errno, "review mode: %s", path);
	if (st.st_uid != uid && (geteuid() != 0 || fchown(fd, uid, gid) < 0))
		return ab_fail(err, errno ? errno : EPERM, "review mode: %s is not yours", path);
	if ((st.st_mode & 07777) != mode && fchmod(fd, mode) < 0)
		return ab_fail(err, errno, "review mode: chmod %s", path);
	return 0;
}

static int mkdir_parents(const char *path, ab_err *err)
{
	_cleanup_free_ char *p = strdup(path);
	if (!p)
		return ab_fail(err, ENOMEM, "review mode");
	for (char *s = strchr(p + 1, '/'); s; s = strchr(s + 1, '/')) {
		*s = '\0';
		if (mkdir(p, 0700) < 0 && errno != EEXIST)
			return ab_fail(err, errno, "review mode: mkdir %s", p);
		*s = '/';
	}
	return 0;
}

static int write_meta(const ab_plan *plan, ab_err *err)
{
	json_t *m = json_object(), *prot = json_array();
	size_t wl = strlen(plan->workspace);
	for (size_t i = 0; i < plan->nmounts; i++) {
		const ab_mount *mt = &plan->mounts[i];
		if ((mt->kind == AB_MNT_PROTECT || mt->kind == AB_MNT_PLACEHOLDER) &&
		    ab_path_is_under(mt->dst, plan->workspace) && mt->dst[wl] == '/')
			json_array_append_new(prot, json_string(mt->dst + wl + 1));
	}
	json_object_set_new(m, "workspace", json_string(plan->workspace));
	json_object_set_new(m, "protect", prot);
	if (plan->egress.log_path)
		json_object_set_new(m, "log", json_string(plan->egress.log_path));
	_cleanup_free_ char *path = ab_path_join(plan->review_dir, "meta");
	_cleanup_free_ char *tmp = ab_asprintf("%s/meta.tmp", plan->review_dir);
	int r = path && tmp ? json_dump_file(m, tmp, JSON_COMPACT) : -1;
	json_decref(m);
	if (r < 0 || rename(tmp, path) < 0)
		return ab_fail(err, errno ? errno : EIO, "review mode: write %s/meta",
			       plan->review_dir);
	return 0;
}

int ab_review_prepare(const ab_plan *plan, ab_err *err)
{
	uid_t me = geteuid();
	gid_t mg = getegid();
	if (mkdir_parents(plan->review_dir, err) < 0)
		return -1;
	struct stat st;
	bool pending = lstat(plan->review_dir, &st) == 0;
	if (mkdir_owned(plan->review_dir, 0700, me, mg, err) < 0)
		return -1;
	/* the sandbox's host ids write the layers (root callers: map_kuid) */
	static const char *const sub[] = {"upper", "work"};
	for (size_t i = 0; i < 2; i++) {
		_cleanup_free_ char *p = ab_path_join(plan->review_dir, sub[i]);
		if (!p)
			return ab_fail(err, ENOMEM, "review mode");
		if (mkdir_owned(p, 0755, plan->map_kuid, plan->map_kgid, err) < 0)
			return -1;
	}
	if (pending)
		ab_warn("review mode: continuing the change set pending in %s (agentbox "
			"discard -w %s drops it first)",
			plan->review_dir, plan->workspace);
	return write_meta(plan, err);
}

/* ------------------------------------------------------------ scan */

typedef struct scan {
	ab_changeset *cs;
	char path[PATH_MAX];
	int oom;
} scan;

static ab_change *add(scan *s, const char *rel, enum ab_change_kind k, enum ab_change_type t)
{
	ab_changeset *cs = s->cs;
	if (cs->n == cs->cap) {
		size_t cap = cs->cap ? cs->cap * 2 : 64;
		ab_change *v = realloc(cs->v, cap * sizeof(*v));
		if (!v) {
			s->oom = 1;
			return NULL;
		}
		cs->v = v;
		cs->cap = cap;
	}
	ab_change *c = &cs->v[cs->n];
	*c = (ab_change){.kind = k, .type = t, .lines = -1, .old_lines = -1};
	c->path = strdup(rel);
	if (!c->path) {
		s->oom = 1;
		return NULL;
	}
	cs->n++;
	return c;
}

/* Lines of the file at DFD/NAME (-1: binary or too large), *BINARY. */
static long count_lines(int dfd, const char *name, uint64_t size, bool *binary)
{
	*binary = false;
	_cleanup_close_ int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return -1;
	char buf[65536];
	long lines = 0;
	uint64_t off = 0;
	char last = '\n';
	for (;;) {
		ssize_t n = read(fd, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		if (off < 8192 &&
		    memchr(buf, '\0', (size_t)n < 8192 - off ? (size_t)n : 8192 - off))
			*binary = true;
		if (*binary && size >= AB_REVIEW_LARGE)
			return -1;
		for (ssize_t i = 0; i < n; i++)
			lines += buf[i] == '\n';
		last = buf[n - 1];
		off += (uint64_t)n;
		if (off > AB_REVIEW_READ_MAX)
			return -1;
	}
	if (*binary)
		return -1;
	return lines + (off && last != '\n');
}

static bool same_content(int a, int b)
{
	char x[32768], y[32768];
	for (;;) {
		ssize_t n = ab_read_full(a, x, sizeof(x));
		ssize_t m = ab_read_full(b, y, sizeof(y));
		if (n < 0 || m < 0 || n != m || memcmp(x, y, (size_t)n) != 0)
			return false;
		if (n == 0)
			return true;
	}
}

static bool files_equal(int ud, int ld, const char *name, const struct stat *us,
			const struct stat *ls)
{
	if (us->st_size != ls->st_size || (us->st_mode & 07777) != (ls->st_mode & 07777))
		return false;
	_cleanup_close_ int a = openat(ud, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	_cleanup_close_ int b = openat(ld, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	return a >= 0 && b >= 0 && same_content(a, b);
}

static char *link_of(int dfd, const char *name)
{
	char buf[PATH_MAX];
	ssize_t n = readlinkat(dfd, name, buf, sizeof(buf) - 1);
	if (n < 0)
		return NULL;
	buf[n] = '\0';
	return strdup(buf);
}

static enum ab_change_type type_of(mode_t m)
{
	return S_ISREG(m)   ? AB_CHT_FILE
	       : S_ISDIR(m) ? AB_CHT_DIR
	       : S_ISLNK(m) ? AB_CHT_SYMLINK
			    : AB_CHT_SPECIAL;
}

/* An overlay mark this mount never writes for a plain change (redirect,
 * metacopy, xwhiteout...): anything under user.overlay. but opaque=y on a
 * directory, and origin/impure/uuid (bookkeeping). */
static bool odd_marks(int fd, bool dir, bool *opaque)
{
	char names[4096];
	*opaque = false;
	char p[64];
	snprintf(p, sizeof(p), "/proc/self/fd/%d", fd);
	ssize_t n = fd >= 0 ? listxattr(p, names, sizeof(names)) : -1;
	if (n < 0)
		return errno == ERANGE; /* that many attributes: odd */
	for (ssize_t i = 0; i < n; i += (ssize_t)strlen(names + i) + 1) {
		const char *k = names + i;
		if (strncmp(k, OVL_XATTR, strlen(OVL_XATTR)) != 0)
			continue;
		const char *s = k + strlen(OVL_XATTR);
		if (strcmp(s, "origin") == 0 || strcmp(s, "impure") == 0 || strcmp(s, "uuid") == 0)
			continue;
		char v[8];
		ssize_t vl = strcmp(s, "opaque") == 0 && dir ? getxattr(p, k, v, sizeof(v)) : -1;
		if (vl == 1 && v[0] == 'y') {
			*opaque = true;
			continue;
		}
		return true;
	}
	return false;
}

static int walk(scan *s, int ud, int ld, size_t plen, int depth);

/* What the workspace has at REL (deleted), counted for the listing. */
static void deleted(scan *s, int ld, const char *name, const struct stat *ls)
{
	ab_change *c = add(s, s->path, AB_CHG_DELETED, type_of(ls->st_mode));
	if (!c)
		return;
	c->mode = ls->st_mode;
	c->size = (uint64_t)ls->st_size;
	bool bin;
	if (S_ISREG(ls->st_mode))
		c->old_lines = count_lines(ld, name, c->size, &bin);
	c->risk = ab_review_path_risk(s->path, c->type, 0, 0, false, &s->cs->protect) &
		  (AB_RISK_PROTECTED | AB_RISK_NESTED_GIT);
}

static void file_change(scan *s, int ud, int ld, const char *name, const struct stat *us,
			const struct stat *ls)
{
	bool have = ls->st_mode != 0;
	if (have && S_ISREG(ls->st_mode) && files_equal(ud, ld, name, us, ls))
		return;
	if (have && S_ISLNK(us->st_mode) && S_ISLNK(ls->st_mode)) {
		_cleanup_free_ char *a = link_of(ud, name), *b = link_of(ld, name);
		if (a && b && strcmp(a, b) == 0)
			return;
	}
	ab_change *c = add(s, s->path, have ? AB_CHG_MODIFIED : AB_CHG_ADDED, type_of(us->st_mode));
	if (!c)
		return;
	c->mode = us->st_mode;
	c->size = (uint64_t)us->st_size;
	bool bin = false, obin;
	if (c->type == AB_CHT_FILE)
		c->lines = count_lines(ud, name, c->size, &bin);
	if (have && S_ISREG(ls->st_mode))
		c->old_lines = count_lines(ld, name, (uint64_t)ls->st_size, &obin);
	if (c->type == AB_CHT_SYMLINK)
		c->target = link_of(ud, name);
	c->risk = ab_review_path_risk(s->path, c->type, c->mode, c->size, bin, &s->cs->protect);
}

static void dir_change(scan *s, int ud, int ld, const char *name, size_t plen, int depth,
		       const struct stat *ls)
{
	_cleanup_close_ int sub = openat(ud, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	bool opaque = false;
	if (sub < 0 || odd_marks(sub, true, &opaque)) {
		ab_change *c = add(s, s->path, AB_CHG_ADDED, AB_CHT_SPECIAL);
		if (c)
			c->risk = AB_RISK_SPECIAL | ab_review_path_risk(s->path, AB_CHT_DIR, 0, 0,
									false, &s->cs->protect);
		return;
	}
	bool lower_dir = ls->st_mode && S_ISDIR(ls->st_mode);
	/* a directory the run added to (not opaque: it did not replace what
	 * was there) that is no longer one in the workspace: a conflict */
	bool conflict = ls->st_mode && !lower_dir && !opaque;
	if (ls->st_mode && !lower_dir && opaque)
		deleted(s, ld, name, ls);
	_cleanup_close_ int lsub =
		lower_dir ? openat(ld, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) : -1;
	size_t before = s->cs->n;
	int w = walk(s, sub, opaque ? -(lsub + 2) : lsub, plen, depth + 1);
	for (size_t i = before; conflict && i < s->cs->n; i++)
		s->cs->v[i].risk |= AB_RISK_CONFLICT;
	if (w < 0)
		return;
	if (!lower_dir && s->cs->n == before) {
		ab_change *c = add(s, s->path, AB_CHG_ADDED, AB_CHT_DIR);
		if (c) {
			struct stat us;
			c->mode = fstat(sub, &us) == 0 ? us.st_mode : 0755;
			c->risk |= conflict ? AB_RISK_CONFLICT : 0;
			c->risk = ab_review_path_risk(s->path, AB_CHT_DIR, 0, 0, false,
						      &s->cs->protect);
		}
	}
}

static void entry(scan *s, int ud, int ld, const char *name, size_t plen, int depth)
{
	struct stat us, ls = {0};
	if (fstatat(ud, name, &us, AT_SYMLINK_NOFOLLOW) < 0)
		return;
	if (ld >= 0 && fstatat(ld, name, &ls, AT_SYMLINK_NOFOLLOW) < 0)
		ls.st_mode = 0;
	if (S_ISCHR(us.st_mode) && us.st_rdev == makedev(0, 0)) {
		if (ls.st_mode)
			deleted(s, ld, name, &ls);
		return;
	}
	if (S_ISDIR(us.st_mode)) {
		dir_change(s, ud, ld, name, plen, depth, &ls);
		return;
	}
	if (S_ISREG(us.st_mode)) {
		_cleanup_close_ int fd = openat(ud, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
		bool op;
		if (fd < 0 || odd_marks(fd, false, &op)) {
			ab_change *c = add(s, s->path, AB_CHG_ADDED, AB_CHT_SPECIAL);
			if (c)
				c->risk = AB_RISK_SPECIAL;
			return;
		}
	}
	if (ls.st_mode && S_ISDIR(ls.st_mode))
		deleted(s, ld, name, &ls), ls.st_mode = 0;
	if (!S_ISREG(us.st_mode) && !S_ISLNK(us.st_mode)) {
		ab_change *c = add(s, s->path, AB_CHG_ADDED, AB_CHT_SPECIAL);
		if (c) {
			c->mode = us.st_mode;
			c->risk = ab_review_path_risk(s->path, AB_CHT_SPECIAL, 0, 0, false,
						      &s->cs->protect);
		}
		return;
	}
	file_change(s, ud, ld, name, &us, &ls);
}

static int cmp_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Read the names of directory FD (a dup: the caller keeps FD). */
static int names_of(int fd, ab_strv *out, scan *s)
{
	int d = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *dir = d < 0 ? NULL : fdopendir(d);
	if (!dir) {
		if (d >= 0)
			close(d);
		return -1;
	}
	for (struct dirent *e; (e = readdir(dir));) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		if (++s->cs->seen > AB_REVIEW_MAX_ENTRIES) {
			s->cs->cut = true;
			break;
		}
		if (ab_strv_push(out, e->d_name) < 0) {
			s->oom = 1;
			break;
		}
	}
	closedir(dir);
	if (out->n)
		qsort(out->v, out->n, sizeof(char *), cmp_name);
	return 0;
}

/* UD: an upper directory; LD: the workspace's directory at the same path,
 * -1 none, or -(fd+2) when UD is opaque (what only LD has is deleted).
 * s->path[0..plen) is the relative path of UD. */
static int walk(scan *s, int ud, int ld, size_t plen, int depth)
{
	if (depth > AB_REVIEW_DEPTH) {
		s->cs->cut = true;
		return -1;
	}
	bool opaque = ld < -1;
	int lfd = opaque ? -(ld + 2) : ld;
	_cleanup_strv_ ab_strv names = {0};
	if (names_of(ud, &names, s) < 0)
		return 0;
	for (size_t i = 0; i < names.n && !s->oom; i++) {
		int w = snprintf(s->path + plen, sizeof(s->path) - plen, "%s%s", plen ? "/" : "",
				 names.v[i]);
		if (w < 0 || (size_t)w >= sizeof(s->path) - plen) {
			s->cs->cut = true;
			continue;
		}
		entry(s, ud, lfd, names.v[i], plen + (size_t)w, depth);
	}
	if (opaque && lfd >= 0) {
		_cleanup_strv_ ab_strv lower = {0};
		names_of(lfd, &lower, s);
		for (size_t i = 0; i < lower.n && !s->oom; i++) {
			if (bsearch(&lower.v[i], names.v, names.n, sizeof(char *), cmp_name))
				continue;
			struct stat ls;
			int w = snprintf(s->path + plen, sizeof(s->path) - plen, "%s%s",
					 plen ? "/" : "", lower.v[i]);
			if (w < 0 || (size_t)w >= sizeof(s->path) - plen ||
			    fstatat(lfd, lower.v[i], &ls, AT_SYMLINK_NOFOLLOW) < 0)
				continue;
			deleted(s, lfd, lower.v[i], &ls);
		}
	}
	s->path[plen] = '\0';
	return 0;
}

static int cmp_change(const void *a, const void *b)
{
	const ab_change *x = a, *y = b;
	int c = strcmp(x->path, y->path);
	return c ? c : (int)x->kind - (int)y->kind;
}

static int read_meta(const char *upper, ab_strv *protect, char **workspace, char **log)
{
	const char *slash = strrchr(upper, '/');
	_cleanup_free_ char *dir =
		slash ? ab_asprintf("%.*s/meta", (int)(slash - upper), upper) : NULL;
	if (!dir)
		return -ENOMEM;
	_cleanup_close_ int fd = ab_open_nofollow(dir, O_RDONLY);
	_cleanup_free_ char *buf = NULL;
	size_t len;
	if (fd < 0)
		return -errno;
	int r = ab_read_fd_all(fd, 0, META_MAX, &buf, &len);
	if (r < 0)
		return r;
	json_t *m = json_loadb(buf, len, 0, NULL);
	json_t *p = json_object_get(m, "protect");
	for (size_t i = 0; i < json_array_size(p) && i < 65536; i++)
		if (json_is_string(json_array_get(p, i)))
			ab_strv_push(protect, json_string_value(json_array_get(p, i)));
	const char *ws = json_string_value(json_object_get(m, "workspace"));
	if (workspace)
		*workspace = ws ? strdup(ws) : NULL;
	const char *lg = json_string_value(json_object_get(m, "log"));
	if (log)
		*log = lg && lg[0] == '/' ? strdup(lg) : NULL;
	json_decref(m);
	return m ? 0 : -EINVAL;
}

int ab_review_scan(const char *workspace, const char *upper, ab_changeset *cs, ab_err *err)
{
	*cs = (ab_changeset){0};
	(void)read_meta(upper, &cs->protect, NULL, NULL); /* without it: no protected list */
	_cleanup_close_ int ud = ab_open_nofollow(upper, O_RDONLY | O_DIRECTORY);
	if (ud < 0)
		return ab_fail(err, errno, "change set %s", upper);
	_cleanup_close_ int ld = ab_open_nofollow(workspace, O_RDONLY | O_DIRECTORY);
	if (ld < 0)
		return ab_fail(err, errno, "workspace %s", workspace);
	scan s = {.cs = cs};
	walk(&s, ud, ld, 0, 0);
	if (s.oom) {
		ab_changeset_free(cs);
		return ab_fail(err, ENOMEM, "change set %s", upper);
	}
	if (cs->n)
		qsort(cs->v, cs->n, sizeof(*cs->v), cmp_change);
	return 0;
}

int ab_review_find(const char *workspace, char *const *env, const char *home, char **dir,
		   ab_err *err)
{
	*dir = NULL;
	_cleanup_free_ char *root = ab_review_root(home, env);
	if (!root)
		return ab_fail(err, 0, "no state directory (set HOME or XDG_STATE_HOME)");
	_cleanup_free_ char *d = ab_review_dir_for(root, workspace);
	_cleanup_free_ char *up = d ? ab_path_join(d, "upper") : NULL;
	if (!up)
		return ab_fail(err, ENOMEM, "review");
	struct stat st;
	if (lstat(up, &st) < 0 || !S_ISDIR(st.st_mode))
		return 0;
	/* the name is a hash: the meta file says which workspace it is */
	_cleanup_strv_ ab_strv prot = {0};
	_cleanup_free_ char *ws = NULL;
	if (read_meta(up, &prot, &ws, NULL) == 0 && ws && strcmp(ws, workspace) != 0)
		return 0;
	*dir = TAKE_PTR(d);
	return 1;
}

/* ------------------------------------------------------------ listing */

static const struct {
	unsigned bit;
	const char *what;
} risks[] = {
	{AB_RISK_NESTED_GIT, "nested .git: applied only when named"},
	{AB_RISK_PROTECTED, "protected path: applied only when named"},
	{AB_RISK_SPECIAL, "special file or overlay mark: never applied"},
	{AB_RISK_CONFLICT, "the workspace changed here since the run: not applied"},
	{AB_RISK_EXEC, "executable"},
	{AB_RISK_SYMLINK, "symlink"},
	{AB_RISK_BINARY, "large binary"},
	{AB_RISK_UNUSUAL, "unusual file type"},
};

static void print_one(const ab_change *c, FILE *out)
{
	char path[PATH_MAX + 64], tgt[256], counts[96] = "";
	ab_clean(c->path, path, sizeof(path));
	static const char kinds[] = {'D', 'A', 'M'};
	if (c->type == AB_CHT_DIR)
		snprintf(counts, sizeof(counts), "directory");
	else if (c->kind == AB_CHG_ADDED && c->lines >= 0)
		snprintf(counts, sizeof(counts), "+%ld lines", c->lines);
	else if (c->kind == AB_CHG_DELETED && c->old_lines >= 0)
		snprintf(counts, sizeof(counts), "-%ld lines", c->old_lines);
	else if (c->kind == AB_CHG_MODIFIED && c->lines >= 0 && c->old_lines >= 0)
		snprintf(counts, sizeof(counts), "%ld -> %ld lines", c->old_lines, c->lines);
	else if (c->type == AB_CHT_FILE)
		snprintf(counts, sizeof(counts), "binary, %llu bytes", (unsigned long long)c->size);
	fprintf(out, "  %c %s%s  %s", kinds[c->kind], path, c->type == AB_CHT_DIR ? "/" : "",
		counts);
	if (c->target) {
		ab_clean(c->target, tgt, sizeof(tgt));
		fprintf(out, " -> %s", tgt);
	}
	for (size_t i = 0; i < AB_ARRAY_SIZE(risks); i++)
		if (c->risk & risks[i].bit)
			fprintf(out, "  [%s]", risks[i].what);
	fputc('\n', out);
}

/* Repositories are listed as one line each: the prefix up to its ".git". */
size_t ab_review_git_prefix(const char *path)
{
	const char *c = path;
	for (;;) {
		if (strncmp(c, ".git", 4) == 0 && (c[4] == '/' || c[4] == '\0'))
			return (size_t)(c - path) + 4;
		c = strchr(c, '/');
		if (!c)
			return 0;
		c++;
	}
}

void ab_review_print(const char *dir, const ab_changeset *cs, FILE *out)
{
	char d[PATH_MAX];
	ab_clean(dir, d, sizeof(d));
	if (!cs->n) {
		fprintf(out, "agentbox: review: no changes (change set %s)\n", d);
		return;
	}
	fprintf(out, "agentbox: review: %zu change%s held in %s; the workspace is untouched\n",
		cs->n, cs->n == 1 ? "" : "s", d);
	for (size_t i = 0; i < cs->n;) {
		size_t g = ab_review_git_prefix(cs->v[i].path), j = i + 1;
		if (!g) {
			print_one(&cs->v[i], out);
			i++;
			continue;
		}
		unsigned risk = cs->v[i].risk;
		size_t na = 0, nm = 0, nd = 0;
		for (j = i; j < cs->n && strncmp(cs->v[j].path, cs->v[i].path, g) == 0 &&
			    (cs->v[j].path[g] == '/' || cs->v[j].path[g] == '\0');
		     j++) {
			risk |= cs->v[j].risk;
			na += cs->v[j].kind == AB_CHG_ADDED;
			nm += cs->v[j].kind == AB_CHG_MODIFIED;
			nd += cs->v[j].kind == AB_CHG_DELETED;
		}
		char path[PATH_MAX];
		ab_clean(cs->v[i].path, path, sizeof(path));
		path[g < sizeof(path) ? g : sizeof(path) - 1] = '\0';
		fprintf(out, "  %c %s/  %s: %zu added, %zu modified, %zu deleted",
			na && !nm && !nd ? 'A' : 'M', path,
			(risk & AB_RISK_NESTED_GIT) ? "nested git repository"
						    : "the workspace's git repository",
			na, nm, nd);
		for (size_t k = 0; k < AB_ARRAY_SIZE(risks); k++)
			if ((risk & risks[k].bit) &&
			    (risks[k].bit & (AB_RISK_NAMED_ONLY | AB_RISK_EXEC | AB_RISK_SYMLINK |
					     AB_RISK_CONFLICT)))
				fprintf(out, "  [%s]", risks[k].what);
		fputc('\n', out);
		i = j;
	}
	if (cs->cut)
		fprintf(out,
			"agentbox: review: the listing is INCOMPLETE (more than %d entries or "
			"%d levels): apply only named paths\n",
			AB_REVIEW_MAX_ENTRIES, AB_REVIEW_DEPTH);
}

/* ------------------------------------------------------------ audit */

char *ab_review_log_of(const char *dir)
{
	_cleanup_free_ char *up = ab_path_join(dir, "upper");
	_cleanup_strv_ ab_strv prot = {0};
	char *log = NULL;
	if (up && read_meta(up, &prot, NULL, &log) < 0) {
		free(log);
		return NULL;
	}
	return log;
}
