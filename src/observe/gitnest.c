/* SPDX-License-Identifier: MIT */
/*
 * After a run: nested git repositories made inert for the host's git
 * (include/agentbox/gitscan.h).  Parent only (or the cleanup watcher when
 * the parent was killed).
 *
 * Every writable tree is walked, without following a symbolic link.  A
 * `.git` entry below its top (the top's own is a protected path), and a
 * directory shaped like a git directory (HEAD, objects and refs: a bare
 * repository, or the target of a gitfile), is judged:
 *
 *   armed    host git could run something from it: its config (and
 *            config.worktree, and the common directory's) holds a key that is
 *            not on the inert allowlist (src/parse/gitconfig.c), or is not a
 *            plain file; its hooks directory holds anything but *.sample; the
 *            `.git` is a symbolic link; a gitfile names such a directory;
 *   touched  one of those entries (the config files, hooks and what is in
 *            them, commondir, the gitfile or link itself) was created or
 *            changed since the run started (birth or change time: a change
 *            time cannot be set from userspace).
 *
 * Armed and touched: disarmed.  A `.git` is renamed to `.git.agentbox-
 * disarmed` (a free name, RENAME_NOREPLACE), the HEAD of a bare-shaped
 * directory to `HEAD.agentbox-disarmed`: git then no longer sees a
 * repository there, so `git status` above it, a gitlink to it and a prompt
 * inside it run nothing of it.  What was moved stays for the user to review.
 * Armed but untouched (the user's own repository with its own hooks) and
 * inert ones (a plain clone, `cargo new`) are left alone.
 *
 * First, a `.git` the run kept off the host while it lasted (a link to
 * /.agentbox-git/GRANT/TAG.N, include/agentbox/mediate.h) gets its content
 * back: the store's entry and the link change places (RENAME_EXCHANGE, so
 * nothing is ever half done), and the link is removed; then it is judged
 * like any other.  Another run's links (another tag) are left alone: they
 * lead nowhere on the host.  What is left in the store of this run (its
 * link was removed inside) is removed.
 */
#include "agentbox/gitscan.h"
#include "agentbox/gitconfig.h"
#include "agentbox/mediate.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define DISARMED ".agentbox-disarmed"
#define GITFILE_MAX 4096

typedef struct verdict {
	bool armed, touched;
	char why[512];
} verdict;

typedef struct nest {
	struct timespec since;
	const ab_gitnest_root *roots;
	size_t nroots;
	size_t seen;
	bool cut, deep;
	bool disarm;           /* false: judge and report only (test ablation) */
	const ab_strv *shared; /* relative paths the shared git config names */
	ab_strv *findings;
	int oom;
	bool keep; /* a link of this run was not put back: its store stays */
	struct disarmed {
		dev_t dev;
		ino_t ino;
	} * disarmed; /* git directories disarmed so far, for a gitfile met later */
	size_t ndisarmed;
} nest;

static bool recent(const struct statx *sx, const struct timespec *since)
{
	const struct statx_timestamp *t[2] = {&sx->stx_ctime,
					      (sx->stx_mask & STATX_BTIME) ? &sx->stx_btime : NULL};
	for (int i = 0; i < 2; i++)
		if (t[i] && (t[i]->tv_sec > since->tv_sec ||
			     (t[i]->tv_sec == since->tv_sec && t[i]->tv_nsec >= since->tv_nsec)))
			return true;
	return false;
}

static void arm(verdict *v, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void arm(verdict *v, const char *fmt, ...)
{
	if (!v->armed) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(v->why, sizeof(v->why), fmt, ap);
		va_end(ap);
	}
	v->armed = true;
}

/* statx NAME in DFD without following it; touched when new.  0 or -errno. */
static int look(const nest *n, int dfd, const char *name, verdict *v, struct statx *sx)
{
	if (statx(dfd, name, AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT,
		  STATX_TYPE | STATX_MODE | STATX_CTIME | STATX_BTIME | STATX_SIZE, sx) < 0)
		return -errno;
	if (recent(sx, &n->since))
		v->touched = true;
	return 0;
}

/* A whole small file (config, gitfile, commondir), not following a link. */
static char *slurp(int dfd, const char *name, size_t max, size_t *len)
{
	_cleanup_close_ int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size > max)
		return NULL;
	char *buf = malloc((size_t)st.st_size + 1);
	if (!buf)
		return NULL;
	ssize_t r = ab_read_full(fd, buf, (size_t)st.st_size);
	if (r < 0) {
		free(buf);
		return NULL;
	}
	buf[r] = '\0';
	*len = (size_t)r;
	return buf;
}

struct cfg_ctx {
	verdict *v;
	const char *file;
};

static int cfg_key(const char *key, const char *value, unsigned line, void *vctx)
{
	struct cfg_ctx *c = vctx;
	if (ab_gitkey_classify(key, value) != AB_GITKEY_INERT)
		arm(c->v, "%s in %s, line %u", key, c->file, line);
	return 0;
}

/* A config file of the repository: armed unless every key is inert. */
static void judge_config(const nest *n, int gd, const char *name, verdict *v)
{
	struct statx sx;
	if (look(n, gd, name, v, &sx) < 0)
		return; /* absent: git's defaults, inert */
	if (!S_ISREG(sx.stx_mode)) {
		arm(v, "%s is not a regular file", name);
		return;
	}
	size_t len = 0;
	_cleanup_free_ char *buf = slurp(gd, name, AB_GITCFG_MAX_BYTES, &len);
	if (!buf) {
		arm(v, "%s cannot be read or is larger than %u bytes", name, AB_GITCFG_MAX_BYTES);
		return;
	}
	ab_err err = {0};
	struct cfg_ctx c = {v, name};
	if (ab_gitconfig_parse(buf, len, cfg_key, &c, &err) < 0)
		arm(v, "%s does not parse (%s)", name, err.msg);
}

static void judge_hooks(const nest *n, int gd, verdict *v)
{
	struct statx sx;
	if (look(n, gd, "hooks", v, &sx) < 0)
		return;
	if (!S_ISDIR(sx.stx_mode)) {
		arm(v, "hooks is not a directory");
		return;
	}
	int fd = openat(gd, "hooks", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	DIR *d = fd < 0 ? NULL : fdopendir(fd);
	if (!d) {
		if (fd >= 0)
			close(fd);
		arm(v, "hooks cannot be read");
		return;
	}
	struct dirent *e;
	while ((e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		size_t l = strlen(e->d_name);
		look(n, dirfd(d), e->d_name, v, &sx);
		/* a hook that is a link into the work tree runs what the link names */
		if (S_ISLNK(sx.stx_mode) &&
		    statx(dirfd(d), e->d_name, AT_NO_AUTOMOUNT, STATX_CTIME | STATX_BTIME, &sx) ==
			    0 &&
		    recent(&sx, &n->since))
			v->touched = true;
		if (l < 7 || strcmp(e->d_name + l - 7, ".sample") != 0)
			arm(v, "hook hooks/%.200s", e->d_name);
	}
	closedir(d);
}

static void judge_dir(const nest *n, int gd, verdict *v)
{
	judge_config(n, gd, "config", v);
	judge_config(n, gd, "config.worktree", v);
	judge_hooks(n, gd, v);
}

/* A git directory: its own entries, and those of the common directory its
 * commondir names (a linked worktree's; git follows one level). */
static void judge_gitdir(const nest *n, int gd, verdict *v)
{
	judge_dir(n, gd, v);
	struct statx sx;
	if (look(n, gd, "commondir", v, &sx) < 0)
		return;
	size_t len = 0;
	_cleanup_free_ char *c = slurp(gd, "commondir", GITFILE_MAX, &len);
	if (!c) {
		arm(v, "commondir cannot be read");
		return;
	}
	c[strcspn(c, "\r\n")] = '\0';
	_cleanup_close_ int cd = openat(gd, c, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (cd >= 0)
		judge_dir(n, cd, v);
}

static void finding(nest *n, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void finding(nest *n, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char *line = NULL;
	if (vasprintf(&line, fmt, ap) < 0)
		line = NULL;
	va_end(ap);
	if (!line || ab_strv_push_take(n->findings, line) < 0)
		n->oom = -ENOMEM;
}

/* Move NAME in DFD aside to NAME.agentbox-disarmed (or -2 ... -9). */
static int move_aside(int dfd, const char *name, char *to, size_t size)
{
	for (int i = 1; i < 10; i++) {
		if (i == 1)
			snprintf(to, size, "%s" DISARMED, name);
		else
			snprintf(to, size, "%s" DISARMED "-%d", name, i);
		if (renameat2(dfd, name, dfd, to, RENAME_NOREPLACE) == 0)
			return 0;
		if (errno != EEXIST)
			return -errno;
	}
	return -EEXIST;
}

/* What can arm a git directory, moved aside when it is disarmed.  Each of
 * them stays in the set judged "touched": moving one back changes its
 * change time, so the next run disarms it again. */
static const char *const pieces[] = {"config", "config.worktree", "hooks", "commondir"};

/* Move aside what is there of PIECES in GD; what moved, for the message. */
static int move_pieces(int gd, char *done, size_t size)
{
	size_t used = 0;
	done[0] = '\0';
	for (size_t i = 0; i < AB_ARRAY_SIZE(pieces); i++) {
		char to[64];
		struct stat st;
		if (fstatat(gd, pieces[i], &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		int r = move_aside(gd, pieces[i], to, sizeof(to));
		if (r < 0)
			return r;
		int w = snprintf(done + used, size - used, "%s%s to %s", used ? ", " : "",
				 pieces[i], to);
		if (w > 0 && (size_t)w < size - used)
			used += (size_t)w;
	}
	return 0;
}

/* GD's pieces were moved aside: a gitfile met later that names it is still
 * judged by what it named when the run ended (and moved aside). */
static void note_disarmed(nest *n, int gd)
{
	struct stat st;
	if (fstat(gd, &st) < 0)
		return;
	struct disarmed *d = reallocarray(n->disarmed, n->ndisarmed + 1, sizeof(*d));
	if (!d) {
		n->oom = -ENOMEM;
		return;
	}
	n->disarmed = d;
	d[n->ndisarmed++] = (struct disarmed){st.st_dev, st.st_ino};
}

static bool was_disarmed(const nest *n, int gd)
{
	struct stat st;
	if (fstat(gd, &st) < 0)
		return false;
	for (size_t i = 0; i < n->ndisarmed; i++)
		if (n->disarmed[i].dev == st.st_dev && n->disarmed[i].ino == st.st_ino)
			return true;
	return false;
}

/* Disarm what the verdict found armed and touched: in a git directory
 * (GD >= 0) its pieces, so it stays a repository that runs nothing; a gitfile
 * or link (GD < 0) is moved aside whole.  REL: the directory holding it,
 * relative to ROOT; it is cleaned for a terminal. */
static void settle(nest *n, int dfd, int gd, const char *root, const char *rel, const char *name,
		   const char *what, const verdict *v)
{
	if (!v->armed || !v->touched)
		return;
	char raw[AB_GIT_PATH_MAX + 16], c[sizeof(raw) * 4], why[sizeof(v->why) * 4 + 1];
	char done[PATH_MAX + 64];
	snprintf(raw, sizeof(raw), "%s%s%s%s", rel, rel[0] && name[0] ? "/" : "", name,
		 rel[0] || name[0] ? "" : ".");
	ab_clean(raw, c, sizeof(c));
	ab_clean(v->why, why, sizeof(why));
	if (!n->disarm) {
		finding(n, "a %s armed during the run was LEFT ARMED (test ablation): %s/%s (%s)",
			what, root, c, why);
		return;
	}
	int r;
	if (gd >= 0) {
		r = move_pieces(gd, done, sizeof(done));
		note_disarmed(n, gd);
	} else {
		char to[PATH_MAX];
		r = move_aside(dfd, name, to, sizeof(to));
		snprintf(done, sizeof(done), "it to %s", to);
	}
	if (r < 0)
		finding(n,
			"a %s armed during the run could NOT be disarmed: %s/%s (%s): rename: "
			"%s; remove it before you run git there",
			what, root, c, why, strerror(-r));
	else
		finding(n,
			"disarmed a %s armed during the run: %s/%s (%s): moved %s; review "
			"what moved before you move it back",
			what, root, c, why, done);
}

/* Every entry of directory NAME in DFD: touched when one is new. */
static void look_inside(const nest *n, int dfd, const char *name, verdict *v)
{
	int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	DIR *d = fd < 0 ? NULL : fdopendir(fd);
	if (!d) {
		if (fd >= 0)
			close(fd);
		return;
	}
	struct dirent *e;
	struct statx sx;
	while (!v->touched && (e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			look(n, dirfd(d), e->d_name, v, &sx);
	closedir(d);
}

/* The paths the system or global git config names relative to the work
 * tree (a hooks directory, a script) are looked for in every nested work
 * tree too: one the run changed there is moved aside whole. */
static void judge_shared(nest *n, int dfd, const char *root, const char *rel)
{
	for (size_t i = 0; n->shared && i < n->shared->n; i++) {
		const char *name = n->shared->v[i];
		verdict v = {0};
		struct statx sx;
		if (look(n, dfd, name, &v, &sx) < 0)
			continue;
		if (S_ISDIR(sx.stx_mode))
			look_inside(n, dfd, name, &v);
		arm(&v, "named by the system or global git config, for every work tree");
		settle(n, dfd, -1, root, rel, name, "path git runs in a nested work tree", &v);
	}
}

/* The store of ROOT (O_RDONLY | O_DIRECTORY), or -errno */
static int open_store(const ab_gitnest_root *root)
{
	_cleanup_free_ char *p = ab_asprintf("%s/" AB_MED_STORE, root->path);
	int fd = p ? ab_open_nofollow(p, O_RDONLY | O_DIRECTORY) : -1;
	return fd < 0 ? -errno : fd;
}

/* Is the link ENTRY in DFD one a run made?  *R: ours (this run's root),
 * NAME its store entry; false for any other link. */
static bool redirect_of(const nest *n, int dfd, const char *entry, const ab_gitnest_root **r,
			char *name, size_t size)
{
	char text[PATH_MAX];
	ssize_t l = readlinkat(dfd, entry, text, sizeof(text) - 1);
	unsigned g;
	*r = NULL;
	if (l < 0)
		return false;
	text[l] = '\0';
	if (!ab_med_parse_redirect(text, &g, name, size))
		return false;
	for (size_t i = 0; i < n->nroots && !*r; i++) {
		const ab_gitnest_root *x = &n->roots[i];
		size_t tl = x->tag ? strlen(x->tag) : 0;
		if (x->tag && x->index == g && strncmp(name, x->tag, tl) == 0 && name[tl] == '.')
			*r = x;
	}
	return true;
}

/* The link ENTRY in DFD, made by this run for ROOT's store entry NAME: the
 * content back in its place.  A line when it cannot be (and the store is
 * then kept: n->keep). */
static void restore(nest *n, int dfd, const char *entry, const ab_gitnest_root *root,
		    const char *name, const char *where, const char *rel)
{
	_cleanup_close_ int store = open_store(root);
	struct stat st;
	int r = store < 0 ? store : fstatat(store, name, &st, AT_SYMLINK_NOFOLLOW) < 0 ? -errno : 0;
	if (r == 0 && !S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode))
		r = -EINVAL;
	if (r == 0 && renameat2(store, name, dfd, entry, RENAME_EXCHANGE) < 0)
		r = -errno;
	if (r == 0) {
		(void)unlinkat(store, name, 0); /* the link, now in the store */
		return;
	}
	char c[AB_GIT_PATH_MAX * 4], e[NAME_MAX * 4 + 1];
	ab_clean(rel, c, sizeof(c));
	ab_clean(entry, e, sizeof(e));
	n->keep = true;
	finding(n,
		"a repository kept off the host during the run could not be put back: "
		"%s/%s%s%s (%s): its content is in %s/" AB_MED_STORE "/%s",
		where, c, c[0] ? "/" : "", e, strerror(-r), root->path, name);
}

/* The git directory a gitfile in PDFD names (PATH), as the host's git will
 * find it once the run's links are all back: a link of this run met on the
 * way (a git directory kept off the host that the walk has not reached yet,
 * such as a bare-shaped `.evil` beside the gitfile) is put back first, so
 * that the gitfile is judged by what it names and not by a link that leads
 * nowhere.  Other links are followed, as git follows them.  An fd or -1. */
static int open_target(nest *n, int pdfd, char *path, const char *root, const char *rel)
{
	int fd = openat(pdfd, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd >= 0 || errno != ENOENT)
		return fd;
	bool abs = path[0] == '/';
	int cur =
		abs ? open("/", O_PATH | O_DIRECTORY | O_CLOEXEC) : fcntl(pdfd, F_DUPFD_CLOEXEC, 0);
	char shown[AB_GIT_PATH_MAX]; /* where C is, for a message */
	int used = snprintf(shown, sizeof(shown), "%s", abs ? "" : rel);
	char *save = NULL;
	for (char *c = strtok_r(path, "/", &save); c && cur >= 0; c = strtok_r(NULL, "/", &save)) {
		const ab_gitnest_root *ours;
		char name[AB_MED_NAME_MAX + 1];
		if (redirect_of(n, cur, c, &ours, name, sizeof(name)) && ours)
			restore(n, cur, c, ours, name, abs ? "" : root, shown);
		if (used >= 0 && (size_t)used < sizeof(shown))
			used += snprintf(shown + used, sizeof(shown) - (size_t)used, "%s%s",
					 used ? "/" : "", c);
		int next = openat(cur, c, O_PATH | O_DIRECTORY | O_CLOEXEC);
		close(cur);
		cur = next;
	}
	if (cur < 0)
		return -1;
	fd = openat(cur, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	close(cur);
	return fd;
}

/* A gitfile ("gitdir: PATH", relative to the directory that holds it). */
static void judge_gitfile(nest *n, int pdfd, verdict *v, const char *root, const char *rel)
{
	size_t len = 0;
	_cleanup_free_ char *c = slurp(pdfd, ".git", GITFILE_MAX, &len);
	if (!c || strncmp(c, "gitdir: ", 8) != 0)
		return; /* not a gitfile git accepts: no repository */
	char *path = c + 8;
	path[strcspn(path, "\r\n")] = '\0';
	_cleanup_close_ int gd = open_target(n, pdfd, path, root, rel);
	if (gd < 0)
		return;
	judge_gitdir(n, gd, v);
	if (was_disarmed(n, gd))
		arm(v, "it names a git directory disarmed as the run ended");
}

static void judge_dotgit(nest *n, int dfd, const char *root, const char *rel)
{
	verdict v = {0};
	struct statx sx;
	if (look(n, dfd, ".git", &v, &sx) < 0)
		return;
	if (S_ISLNK(sx.stx_mode)) {
		const ab_gitnest_root *ours;
		char name[64];
		if (redirect_of(n, dfd, ".git", &ours, name, sizeof(name))) {
			if (!ours)
				return; /* another run's: it leads nowhere on the host */
			restore(n, dfd, ".git", ours, name, root, rel);
			if (look(n, dfd, ".git", &v, &sx) < 0)
				return;
		}
	}
	_cleanup_close_ int gd = -1;
	if (S_ISLNK(sx.stx_mode)) {
		arm(&v, ".git is a symbolic link");
	} else if (S_ISREG(sx.stx_mode)) {
		judge_gitfile(n, dfd, &v, root, rel);
	} else if (S_ISDIR(sx.stx_mode)) {
		gd = openat(dfd, ".git", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (gd < 0)
			return;
		v.touched = false; /* the directory's own time: any git command changes it */
		judge_gitdir(n, gd, &v);
	}
	settle(n, dfd, gd, root, rel, ".git", "nested git repository", &v);
	judge_shared(n, dfd, root, rel);
}

static bool is_root(const nest *n, const struct stat *st)
{
	for (size_t i = 0; i < n->nroots; i++)
		if (n->roots[i].dev == st->st_dev && n->roots[i].ino == st->st_ino)
			return true;
	return false;
}

static int walk(nest *n, int dfd, const char *root, const char *rel, int depth);

static void descend(nest *n, int dfd, const char *root, const char *rel, const char *name,
		    int depth)
{
	char sub[AB_GIT_PATH_MAX];
	if ((size_t)snprintf(sub, sizeof(sub), "%s%s%s", rel, rel[0] ? "/" : "", name) >=
	    sizeof(sub)) {
		n->deep = true;
		return;
	}
	int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
	if (fd >= 0)
		walk(n, fd, root, sub, depth + 1);
}

/* One directory (takes DFD).  Depth 0 is a root: its own .git is protected. */
static int walk(nest *n, int dfd, const char *root, const char *rel, int depth)
{
	struct stat st;
	bool top = depth == 0 || (fstat(dfd, &st) == 0 && is_root(n, &st));
	DIR *d = fdopendir(dfd);
	if (!d) {
		close(dfd);
		return 0;
	}
	unsigned shape = 0; /* HEAD, objects, refs */
	/* the .git first, whatever the order of the entries: a gitfile is
	 * judged by what it names before that is settled on its own */
	if (!top)
		judge_dotgit(n, dirfd(d), root, rel);
	struct dirent *e;
	while (!n->oom && (e = readdir(d))) {
		const char *nm = e->d_name;
		if (!strcmp(nm, ".") || !strcmp(nm, ".."))
			continue;
		if (++n->seen > AB_GITSCAN_WALK_MAX) {
			n->cut = true;
			break;
		}
		shape |= !strcmp(nm, "HEAD")      ? 1
			 : !strcmp(nm, "objects") ? 2
			 : !strcmp(nm, "refs")    ? 4
						  : 0;
		if (!strcmp(nm, ".git"))
			continue; /* judged above; not into it: the objects are no concern */
		if (top && !strcmp(nm, AB_MED_STORE))
			continue; /* the store: its entries are judged where they go back */
		unsigned char t = e->d_type;
		if (t == DT_LNK || t == DT_UNKNOWN) {
			/* a git directory of another name kept off the host (a bare
			 * repository): back in its place, then walked like the rest */
			const ab_gitnest_root *ours;
			char name[AB_MED_NAME_MAX + 1];
			if (redirect_of(n, dirfd(d), nm, &ours, name, sizeof(name)) && ours) {
				restore(n, dirfd(d), nm, ours, name, root, rel);
				t = DT_UNKNOWN;
			} else if (t == DT_LNK) {
				/* put back meanwhile, for a gitfile that names it
				 * (open_target): a directory now */
				t = DT_UNKNOWN;
			}
		}
		if (t == DT_UNKNOWN && fstatat(dirfd(d), nm, &st, AT_SYMLINK_NOFOLLOW) == 0)
			t = S_ISDIR(st.st_mode) ? DT_DIR : DT_REG;
		if (t != DT_DIR)
			continue;
		if (depth + 1 >= AB_GITSCAN_DEPTH)
			n->deep = true;
		else
			descend(n, dirfd(d), root, rel, nm, depth);
	}
	if (shape == 7 && !top) { /* a bare repository, or a gitfile's target */
		verdict v = {0};
		judge_gitdir(n, dirfd(d), &v);
		settle(n, dirfd(d), dirfd(d), root, rel, "", "bare git repository", &v);
	}
	closedir(d);
	return n->oom;
}

/* NAME in DFD and all below it, no link followed: 0 or -errno */
static int remove_tree(int dfd, const char *name, int depth)
{
	if (unlinkat(dfd, name, 0) == 0)
		return 0;
	if (errno != EISDIR)
		return -errno;
	if (depth > AB_GITSCAN_DEPTH)
		return -ELOOP;
	int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	DIR *d = fd < 0 ? NULL : fdopendir(fd);
	if (!d) {
		if (fd >= 0)
			close(fd);
		return -errno;
	}
	struct dirent *e;
	int r = 0;
	while (r == 0 && (e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			r = remove_tree(dirfd(d), e->d_name, depth + 1);
	closedir(d);
	return r < 0 ? r : unlinkat(dfd, name, AT_REMOVEDIR) < 0 ? -errno : 0;
}

/* What this run left in ROOT's store: entries whose link was removed
 * inside (the repository was deleted there).  The store goes when empty. */
static void clear_store(nest *n, const ab_gitnest_root *root)
{
	_cleanup_close_ int store = open_store(root);
	int fd = store < 0 ? -1 : dup(store);
	DIR *d = fd < 0 ? NULL : fdopendir(fd);
	if (!d) {
		if (fd >= 0)
			close(fd);
		return;
	}
	size_t tl = strlen(root->tag);
	struct dirent *e;
	while ((e = readdir(d))) {
		if (strncmp(e->d_name, root->tag, tl) != 0 || e->d_name[tl] != '.')
			continue;
		int r = remove_tree(store, e->d_name, 0);
		if (r < 0)
			finding(n, "could not remove %s/" AB_MED_STORE "/%s: %s", root->path,
				e->d_name, strerror(-r));
	}
	closedir(d);
	/* the store goes with its .gitignore, unless another run's entries are left */
	fd = dup(store);
	d = fd < 0 ? NULL : fdopendir(fd);
	bool others = !d;
	while (d && !others && (e = readdir(d)))
		others = strcmp(e->d_name, ".") && strcmp(e->d_name, "..") &&
			 strcmp(e->d_name, ".gitignore");
	if (d)
		closedir(d);
	else if (fd >= 0)
		close(fd);
	_cleanup_close_ int top = ab_open_nofollow(root->path, O_RDONLY | O_DIRECTORY);
	if (!others && top >= 0) {
		(void)unlinkat(store, ".gitignore", 0);
		(void)unlinkat(top, AB_MED_STORE, AT_REMOVEDIR);
	}
}

int ab_gitnest_settle(const ab_gitnest_root *roots, size_t nroots, const ab_strv *shared,
		      struct timespec since, bool disarm, ab_strv *findings, ab_err *err)
{
	nest n = {.since = since,
		  .roots = roots,
		  .nroots = nroots,
		  .disarm = disarm,
		  .shared = shared,
		  .findings = findings};
	for (size_t i = 0; i < nroots; i++) {
		bool inner = false; /* a root below another one is walked with it */
		for (size_t j = 0; j < nroots && !inner; j++)
			inner = j != i && ab_path_is_under(roots[i].path, roots[j].path) &&
				strcmp(roots[i].path, roots[j].path) != 0;
		if (inner)
			continue;
		int fd = open(roots[i].path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd >= 0 && walk(&n, fd, roots[i].path, "", 0) < 0) {
			free(n.disarmed);
			return ab_fail(err, ENOMEM, "nested repositories");
		}
		for (size_t g = 0; g < roots[i].gitlinks.n; g++) {
			/* the index's gitlinks, even where the walk stopped */
			_cleanup_free_ char *p =
				ab_asprintf("%s/%s", roots[i].path, roots[i].gitlinks.v[g]);
			_cleanup_close_ int gfd =
				p ? ab_open_nofollow(p, O_RDONLY | O_DIRECTORY) : -1;
			if (gfd >= 0)
				judge_dotgit(&n, gfd, roots[i].path, roots[i].gitlinks.v[g]);
		}
	}
	/* a store whose links the walk may not all have met stays, said */
	for (size_t i = 0; i < nroots; i++) {
		if (!roots[i].tag)
			continue;
		if (!n.cut && !n.deep && !n.keep) {
			clear_store(&n, &roots[i]);
			continue;
		}
		_cleanup_close_ int sfd = open_store(&roots[i]);
		if (sfd >= 0)
			finding(&n,
				"what the run kept off the host stays in %s/" AB_MED_STORE
				" (the search did not reach every link to it): review it, put "
				"each entry back where its link is, then remove the link",
				roots[i].path);
	}
	if (n.cut || n.deep)
		finding(&n,
			"the search for nested repositories stopped (more than %d entries, or "
			"deeper than %d): run `find DIR -name .git` in the writable directories "
			"and review what it lists before you run git there",
			AB_GITSCAN_WALK_MAX, AB_GITSCAN_DEPTH);
	free(n.disarmed);
	return n.oom ? ab_fail(err, ENOMEM, "nested repositories") : 0;
}
