/* SPDX-License-Identifier: MIT */
/*
 * agentbox review / apply / discard (parent; include/agentbox/review.h).
 *
 * Each holds the workspace lock (the one `run` takes), so none of them runs
 * beside a sandbox in the same workspace.  apply rescans the change set (it
 * never trusts an earlier listing) and lands each selected change on its
 * own, atomically per file: the new content is written to a fresh name in
 * the target directory and renamed over the old one.  Every path is reached
 * with openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS) from the workspace and
 * from the upper layer: a symbolic link on the way, planted or swapped in,
 * stops that change (ELOOP), it is never followed.  Modes keep only the
 * permission bits (no setuid, setgid or sticky bit lands).  What lands in a
 * nested .git is then judged like after a direct run (src/observe/gitnest.c):
 * armed, it is moved aside.  Applied changes leave the change set; the last
 * one removes it.
 *
 * Each command, and the end of a review run, writes a "review" audit event
 * (docs/audit.md): the workspace, the change set, its counts, and for apply
 * what was named, applied, left out and failed (paths from the change set
 * are untrusted: written lossily as UTF-8, lists capped at EV_PATHS).
 */
#include "agentbox/gitscan.h"
#include "agentbox/json_pos.h"
#include "agentbox/plan.h"
#include "agentbox/review.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define RESOLVE_STRICT (RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)
#define RM_DEPTH 512
#define EV_PATHS 256 /* paths listed per kind in an apply event */

/* ------------------------------------------------------------ the events */

json_t *ab_review_event(const char *action, const char *workspace, const char *dir,
			const ab_changeset *cs)
{
	json_t *ev = json_object();
	json_object_set_new(ev, "event", json_string("review"));
	json_object_set_new(ev, "action", json_string(action));
	json_object_set_new(ev, "workspace", ab_json_string_lossy(workspace));
	json_object_set_new(ev, "change_set", ab_json_string_lossy(dir));
	if (!cs)
		return ev;
	size_t n[3] = {0};
	for (size_t i = 0; i < cs->n; i++)
		n[cs->v[i].kind]++;
	json_object_set_new(ev, "changes", json_integer((json_int_t)cs->n));
	json_object_set_new(ev, "added", json_integer((json_int_t)n[AB_CHG_ADDED]));
	json_object_set_new(ev, "modified", json_integer((json_int_t)n[AB_CHG_MODIFIED]));
	json_object_set_new(ev, "deleted", json_integer((json_int_t)n[AB_CHG_DELETED]));
	if (cs->cut)
		json_object_set_new(ev, "incomplete", json_true());
	return ev;
}

void ab_review_after_run(const ab_plan *plan, ab_audit *audit)
{
	_cleanup_free_ char *up = ab_path_join(plan->review_dir, "upper");
	ab_changeset cs;
	ab_err err = {0};
	if (!up || ab_review_scan(plan->workspace, up, &cs, &err) < 0) {
		if (err.msg[0])
			ab_err_print(&err);
		return;
	}
	fflush(stdout);
	ab_review_print(plan->review_dir, &cs, stderr);
	ab_audit_emit(audit, ab_review_event("held", plan->workspace, plan->review_dir, &cs));
	if (cs.n)
		fprintf(stderr,
			"agentbox: review: `agentbox review --diff` shows them, `agentbox apply "
			"[PATH...]` lands them, `agentbox discard` drops them (-w %s)\n",
			plan->workspace);
	ab_changeset_free(&cs);
}

enum { O_APPLIED, O_LEFT, O_FAILED, O_N };

/* What an apply did, for its audit event: each list holds the first
 * EV_PATHS items (the files of one repository's .git are one item, as in
 * the listing), n counts them all. */
typedef struct outcome {
	json_t *list[O_N];
	size_t n[O_N];
	char last[O_N][PATH_MAX]; /* the .git item last noted */
} outcome;

static const char *const outcome_key[O_N] = {"applied", "left_out", "failed"};

static void note(outcome *o, int k, const char *path, const char *why)
{
	char item[PATH_MAX];
	size_t g = ab_review_git_prefix(path);
	snprintf(item, sizeof(item), "%.*s%s", (int)(g ? g : strlen(path)), path, g ? "/" : "");
	if (g && strcmp(o->last[k], item) == 0)
		return;
	snprintf(o->last[k], sizeof(o->last[k]), "%s", g ? item : "");
	o->n[k]++;
	if (o->n[k] > EV_PATHS)
		return;
	if (!o->list[k])
		o->list[k] = json_array();
	json_t *v = ab_json_string_lossy(item);
	if (why) {
		json_t *p = json_object();
		json_object_set_new(p, "path", v);
		json_object_set_new(p, k == O_FAILED ? "error" : "reason", json_string(why));
		v = p;
	}
	json_array_append_new(o->list[k], v);
}

/* The apply event: the counts before, what was named, what each change
 * came to, what is still pending (-1: not known), the exit status. */
static void emit_apply(ab_audit *audit, json_t *ev, outcome *o, const ab_strv *sel, long pending,
		       int status)
{
	if (sel->n) {
		json_t *named = json_array();
		for (size_t i = 0; i < sel->n && i < EV_PATHS; i++)
			json_array_append_new(named, ab_json_string_lossy(sel->v[i]));
		json_object_set_new(ev, "named", named);
	}
	bool cut = false;
	for (int k = 0; k < O_N; k++) {
		char key[32];
		json_object_set_new(ev, outcome_key[k], o->list[k] ? o->list[k] : json_array());
		o->list[k] = NULL;
		snprintf(key, sizeof(key), "n_%s", outcome_key[k]);
		json_object_set_new(ev, key, json_integer((json_int_t)o->n[k]));
		cut |= o->n[k] > EV_PATHS;
	}
	if (cut || sel->n > EV_PATHS)
		json_object_set_new(ev, "truncated", json_true());
	if (pending >= 0)
		json_object_set_new(ev, "pending", json_integer(pending));
	json_object_set_new(ev, "status", json_integer(status));
	ab_audit_emit(audit, ev);
}

static int open_beneath(int dfd, const char *rel, int flags, mode_t mode)
{
	struct open_how how = {.flags = (unsigned long long)(flags | O_CLOEXEC),
			       .mode = mode,
			       .resolve = RESOLVE_STRICT};
	int fd = (int)syscall(SYS_openat2, dfd, rel, &how, sizeof(how));
	return fd < 0 ? -errno : fd;
}

static int lock_ws(const char *workspace, ab_err *err)
{
	int fd = open(workspace, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return ab_fail(err, errno, "workspace %s", workspace);
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		close(fd);
		ab_fail(err, 0, "an agentbox sandbox is running in the workspace %s", workspace);
		ab_err_hint(err, "wait for it to end");
		return -EBUSY;
	}
	return fd;
}

/* ------------------------------------------------------------ removal */

/* Remove NAME in DFD and all below it, following no symlink; directories
 * of mode 000 (the overlay's work/work) are opened up first. */
static int rm_at(int dfd, const char *name, int depth)
{
	if (unlinkat(dfd, name, 0) == 0 || errno == ENOENT)
		return 0;
	if (errno != EISDIR && errno != EPERM)
		return -errno;
	if (depth > RM_DEPTH)
		return -ELOOP;
	int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 && errno == EACCES && fchmodat(dfd, name, 0700, 0) == 0)
		fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	DIR *d = fd < 0 ? NULL : fdopendir(fd);
	if (!d) {
		int e = errno;
		if (fd >= 0)
			close(fd);
		return -e;
	}
	int r = 0;
	for (struct dirent *e; r == 0 && (e = readdir(d));)
		if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
			r = rm_at(dirfd(d), e->d_name, depth + 1);
	closedir(d);
	if (r == 0 && unlinkat(dfd, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
		r = -errno;
	return r;
}

static int drop_set(const char *dir, ab_err *err)
{
	_cleanup_free_ char *parent = strdup(dir);
	char *slash = parent ? strrchr(parent, '/') : NULL;
	if (!slash)
		return ab_fail(err, ENOMEM, "discard");
	*slash = '\0';
	_cleanup_close_ int pfd = ab_open_nofollow(parent, O_RDONLY | O_DIRECTORY);
	int r = pfd < 0 ? -errno : rm_at(pfd, slash + 1, 0);
	return r < 0 ? ab_fail(err, -r, "remove the change set %s", dir) : 0;
}

/* ------------------------------------------------------------ apply one */

/* The directory holding REL in the workspace, created (with the upper
 * layer's modes) when CREATE; *BASE: the last component. */
static int parent_of(int ws, int up, const char *rel, bool create, const char **base)
{
	char buf[PATH_MAX];
	snprintf(buf, sizeof(buf), "%s", rel);
	char *slash = strrchr(buf, '/');
	*base = strrchr(rel, '/') ? strrchr(rel, '/') + 1 : rel;
	if (!slash)
		return open_beneath(ws, ".", O_PATH | O_DIRECTORY, 0);
	*slash = '\0';
	int fd = open_beneath(ws, buf, O_PATH | O_DIRECTORY, 0);
	if (fd != -ENOENT || !create)
		return fd;
	/* component by component: each new one as the upper layer has it */
	int cur = open_beneath(ws, ".", O_PATH | O_DIRECTORY, 0);
	for (char *c = buf, *next; cur >= 0 && c; c = next) {
		next = strchr(c, '/');
		if (next)
			*next++ = '\0';
		struct stat st;
		mode_t m = 0755;
		char *end = next ? next - 1 : NULL;
		if (fstatat(up, buf, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode))
			m = st.st_mode & 0777;
		if (mkdirat(cur, c, m) < 0 && errno != EEXIST) {
			int e = errno;
			close(cur);
			return -e;
		}
		int nfd = open_beneath(cur, c, O_PATH | O_DIRECTORY, 0);
		close(cur);
		cur = nfd;
		if (end)
			*end = '/';
	}
	return cur;
}

static int copy_fd(int from, int to)
{
	char buf[65536];
	for (;;) {
		ssize_t n = read(from, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return 0;
		int r = ab_write_all(to, buf, (size_t)n);
		if (r < 0)
			return r;
	}
}

/* A fresh name in PFD for the new content; created by MAKE. */
static int temp_name(char *out, size_t size)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	snprintf(out, size, ".agentbox-apply.%d.%ld", (int)getpid(), (long)ts.tv_nsec);
	return 0;
}

/* Root applying in someone's workspace: the file keeps the owner of the
 * one it replaces, a new one takes its directory's (not root's). */
static int keep_owner(int fd, int pfd, const char *base)
{
	struct stat st;
	if (geteuid() != 0)
		return 0;
	if (fstatat(pfd, base, &st, AT_SYMLINK_NOFOLLOW) < 0 && fstat(pfd, &st) < 0)
		return -errno;
	return fchown(fd, st.st_uid, st.st_gid) < 0 ? -errno : 0;
}

static int land_file(int pfd, const char *base, int up, const ab_change *c)
{
	_cleanup_close_ int src = open_beneath(up, c->path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK, 0);
	struct stat st;
	if (src < 0)
		return src;
	if (fstat(src, &st) < 0 || !S_ISREG(st.st_mode))
		return -EINVAL;
	char tmp[96];
	temp_name(tmp, sizeof(tmp));
	int dst = openat(pfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (dst < 0)
		return -errno;
	int r = copy_fd(src, dst);
	if (r == 0)
		r = keep_owner(dst, pfd, base);
	if (r == 0 && fchmod(dst, st.st_mode & 0777) < 0)
		r = -errno;
	if (r == 0 && fsync(dst) < 0)
		r = -errno;
	close(dst);
	if (r == 0 && renameat(pfd, tmp, pfd, base) < 0)
		r = -errno;
	if (r < 0)
		unlinkat(pfd, tmp, 0);
	return r;
}

static int land_link(int pfd, const char *base, int up, const ab_change *c)
{
	const char *slash = strrchr(c->path, '/');
	char dir[PATH_MAX];
	snprintf(dir, sizeof(dir), "%.*s", slash ? (int)(slash - c->path) : 1,
		 slash ? c->path : ".");
	_cleanup_close_ int ud = open_beneath(up, dir, O_PATH | O_DIRECTORY, 0);
	char target[PATH_MAX];
	ssize_t n = ud < 0 ? -1 : readlinkat(ud, base, target, sizeof(target) - 1);
	if (n < 0)
		return ud < 0 ? ud : -errno;
	target[n] = '\0';
	char tmp[96];
	temp_name(tmp, sizeof(tmp));
	if (symlinkat(target, pfd, tmp) < 0)
		return -errno;
	if (renameat(pfd, tmp, pfd, base) < 0) {
		int e = errno;
		unlinkat(pfd, tmp, 0);
		return -e;
	}
	return 0;
}

static int apply_one(int ws, int up, const ab_change *c)
{
	const char *base;
	_cleanup_close_ int pfd = parent_of(ws, up, c->path, c->kind != AB_CHG_DELETED, &base);
	if (pfd == -ENOENT && c->kind == AB_CHG_DELETED)
		return 0; /* gone already */
	if (pfd < 0)
		return pfd;
	if (c->kind == AB_CHG_DELETED)
		return rm_at(pfd, base, 0);
	struct stat st;
	bool there = fstatat(pfd, base, &st, AT_SYMLINK_NOFOLLOW) == 0;
	switch (c->type) {
	case AB_CHT_DIR:
		if (there && S_ISDIR(st.st_mode))
			return 0;
		return mkdirat(pfd, base, c->mode & 0777) < 0 ? -errno : 0;
	case AB_CHT_FILE:
		if (there && S_ISDIR(st.st_mode))
			return -EISDIR;
		return land_file(pfd, base, up, c);
	case AB_CHT_SYMLINK:
		if (there && S_ISDIR(st.st_mode))
			return -EISDIR;
		return land_link(pfd, base, up, c);
	default: return -EPERM;
	}
}

/* ------------------------------------------------------------ selection */

static bool named(const char *path, char *const *paths, int npaths, bool *used)
{
	bool hit = false;
	for (int i = 0; i < npaths; i++) {
		size_t n = strlen(paths[i]);
		if (strncmp(path, paths[i], n) == 0 && (path[n] == '\0' || path[n] == '/')) {
			used[i] = true;
			hit = true;
		}
	}
	return hit;
}

/* PATH... as the user gave them: relative to the workspace (or absolute
 * inside it), normalised, no "..". */
static int norm_paths(const char *workspace, char *const *in, int n, ab_strv *out, ab_err *err)
{
	for (int i = 0; i < n; i++) {
		_cleanup_free_ char *abs = in[i][0] == '/' ? ab_path_normalize(in[i]) : NULL;
		if (!abs) {
			_cleanup_free_ char *j = ab_asprintf("%s/%s", workspace, in[i]);
			abs = j ? ab_path_normalize(j) : NULL;
		}
		if (!abs || !ab_path_is_under(abs, workspace) || strcmp(abs, workspace) == 0)
			return ab_fail(err, 0, "apply: %s is not a path inside the workspace %s",
				       in[i], workspace);
		if (ab_strv_push(out, abs + strlen(workspace) + 1) < 0)
			return ab_fail(err, ENOMEM, "apply");
	}
	return 0;
}

/* "sub/.git" of "sub/.git/config": the length up to a nested .git, or 0 */
static size_t nested_prefix(const char *path)
{
	for (const char *c = strchr(path, '/'); c; c = strchr(c + 1, '/'))
		if (strncmp(c + 1, ".git", 4) == 0 && (c[5] == '/' || c[5] == '\0'))
			return (size_t)(c - path) + 5;
	return 0;
}

static bool any_nested_git(const ab_changeset *cs, const bool *done)
{
	for (size_t i = 0; i < cs->n; i++)
		if (done[i] && (cs->v[i].risk & AB_RISK_NESTED_GIT))
			return true;
	return false;
}

/* What lands in a nested .git is judged like after a run (gitnest.c); what
 * was moved aside is said, and goes to the event as "disarmed". */
static void settle_nested(const char *workspace, struct timespec since, json_t *ev)
{
	struct stat st;
	if (stat(workspace, &st) < 0)
		return;
	ab_gitnest_root root = {.path = workspace, .dev = st.st_dev, .ino = st.st_ino};
	_cleanup_strv_ ab_strv found = {0};
	ab_err err = {0};
	if (ab_gitnest_settle(&root, 1, NULL, since, true, &found, &err) < 0)
		ab_err_print(&err);
	json_t *dis = found.n ? json_array() : NULL;
	for (size_t i = 0; i < found.n; i++) {
		fprintf(stderr, "agentbox: apply: %s\n", found.v[i]);
		if (i < EV_PATHS)
			json_array_append_new(dis, ab_json_string_lossy(found.v[i]));
	}
	if (dis)
		json_object_set_new(ev, "disarmed", dis);
}

static int apply_selected(const char *workspace, const char *upper, const ab_changeset *cs,
			  const ab_strv *sel, bool *used, outcome *o, json_t *ev, ab_err *err)
{
	_cleanup_close_ int ws = ab_open_nofollow(workspace, O_PATH | O_DIRECTORY);
	_cleanup_close_ int up = ab_open_nofollow(upper, O_PATH | O_DIRECTORY);
	if (ws < 0 || up < 0)
		return ab_fail(err, errno, "apply");
	bool *done = calloc(cs->n ? cs->n : 1, sizeof(bool));
	if (!done)
		return ab_fail(err, ENOMEM, "apply");
	struct timespec since;
	clock_gettime(CLOCK_REALTIME_COARSE, &since);
	int left = 0, failed = 0;
	for (size_t i = 0; i < cs->n; i++) {
		const ab_change *c = &cs->v[i];
		char p[PATH_MAX];
		ab_clean(c->path, p, sizeof(p));
		bool is_named = sel->n && named(c->path, sel->v, (int)sel->n, used);
		if (sel->n && !is_named)
			continue;
		if ((c->risk & AB_RISK_SPECIAL) || (!is_named && (c->risk & AB_RISK_NAMED_ONLY))) {
			/* one line per nested repository */
			size_t g = nested_prefix(c->path);
			if (g && i > 0 && strncmp(cs->v[i - 1].path, c->path, g) == 0 &&
			    (cs->v[i - 1].risk & AB_RISK_NESTED_GIT)) {
				left++;
				continue;
			}
			if (g && g < sizeof(p))
				p[g] = '\0';
			const char *why = (c->risk & AB_RISK_SPECIAL)
						  ? "a special file: never applied"
					  : (c->risk & AB_RISK_NESTED_GIT)
						  ? "inside a nested .git: name it to apply it"
						  : "a protected path: name it to apply it";
			fprintf(stderr, "agentbox: apply: %s left out (%s)\n", p, why);
			note(o, O_LEFT, c->path, why);
			left++;
			continue;
		}
		if (c->risk & AB_RISK_CONFLICT) {
			fprintf(stderr,
				"agentbox: apply: %s: the workspace changed on its way since the "
				"run (a directory is now a symbolic link or a file): not applied, "
				"nothing followed\n",
				p);
			note(o, O_FAILED, c->path,
			     "the workspace changed on its way since the run");
			failed++;
			continue;
		}
		if (c->risk & AB_RISK_PROTECTED)
			fprintf(stderr,
				"agentbox: apply: %s is a protected path; applied because "
				"you named it\n",
				p);
		int r = apply_one(ws, up, c);
		if (r < 0) {
			fprintf(stderr, "agentbox: apply: %s: %s%s\n", p, strerror(-r),
				r == -ELOOP ? " (a symbolic link on the way: not followed)" : "");
			note(o, O_FAILED, c->path, strerror(-r));
			failed++;
			continue;
		}
		note(o, O_APPLIED, c->path, NULL);
		done[i] = true;
	}
	if (any_nested_git(cs, done))
		settle_nested(workspace, since, ev);
	free(done);
	if (failed)
		return ab_fail(err, 0, "apply: %d change%s could not be applied; they stay pending",
			       failed, failed == 1 ? "" : "s");
	return left;
}

/* ------------------------------------------------------------ commands */

static int scan_set(const char *workspace, const char *dir, ab_changeset *cs, ab_err *err)
{
	_cleanup_free_ char *up = ab_path_join(dir, "upper");
	if (!up)
		return ab_fail(err, ENOMEM, "review");
	return ab_review_scan(workspace, up, cs, err);
}

/* The selected changes applied, the named paths that matched nothing said:
 * the number left out, or -1 (*err). */
static int apply_set(const char *workspace, const char *dir, const ab_changeset *cs,
		     const ab_strv *sel, outcome *o, json_t *ev, ab_err *err)
{
	bool *used = calloc(sel->n ? sel->n : 1, sizeof(bool));
	_cleanup_free_ char *up = ab_path_join(dir, "upper");
	int left = used && up ? apply_selected(workspace, up, cs, sel, used, o, ev, err)
			      : ab_fail(err, ENOMEM, "apply");
	for (size_t i = 0; left >= 0 && i < sel->n; i++)
		if (!used[i]) {
			fprintf(stderr, "agentbox: apply: no pending change at %s\n", sel->v[i]);
			note(o, O_LEFT, sel->v[i], "no pending change there");
			left++;
		}
	free(used);
	return left;
}

int ab_review_cmd_apply(const char *workspace, const char *dir, char *const *paths, int npaths,
			ab_audit *audit, ab_err *err)
{
	_cleanup_close_ int lock = lock_ws(workspace, err);
	if (lock < 0)
		return AB_EXIT_FAIL;
	_cleanup_strv_ ab_strv sel = {0};
	if (norm_paths(workspace, paths, npaths, &sel, err) < 0)
		return AB_EXIT_FAIL;
	ab_changeset cs;
	if (scan_set(workspace, dir, &cs, err) < 0)
		return AB_EXIT_FAIL;
	if (cs.cut && !sel.n) {
		ab_changeset_free(&cs);
		ab_fail(err, 0, "apply: the change set is too large to list whole");
		ab_err_hint(err, "name the paths to apply (agentbox apply PATH...)");
		return AB_EXIT_FAIL;
	}
	json_t *ev = ab_review_event("applied", workspace, dir, &cs);
	outcome o = {0};
	int left = apply_set(workspace, dir, &cs, &sel, &o, ev, err);
	ab_changeset_free(&cs);
	/* what was applied now matches the workspace: the rest stays pending */
	if (left < 0 || scan_set(workspace, dir, &cs, err) < 0) {
		emit_apply(audit, ev, &o, &sel, -1, AB_EXIT_FAIL);
		return AB_EXIT_FAIL;
	}
	size_t remain = cs.n;
	ab_changeset_free(&cs);
	/* nothing left: the change set goes (a path named in vain is said) */
	int rc = remain && left ? 1 : 0;
	if (remain == 0 && drop_set(dir, err) < 0)
		rc = AB_EXIT_FAIL;
	emit_apply(audit, ev, &o, &sel, (long)remain, rc);
	if (remain)
		fprintf(stderr, "agentbox: apply: %zu change%s still pending (agentbox review)\n",
			remain, remain == 1 ? "" : "s");
	return rc;
}

int ab_review_cmd_discard(const char *workspace, const char *dir, ab_audit *audit, ab_err *err)
{
	_cleanup_close_ int lock = lock_ws(workspace, err);
	if (lock < 0)
		return AB_EXIT_FAIL;
	/* what is dropped, for the record (a change set too odd to scan is
	 * dropped all the same) */
	ab_changeset cs;
	ab_err serr = {0};
	bool scanned = scan_set(workspace, dir, &cs, &serr) == 0;
	json_t *ev = ab_review_event("discarded", workspace, dir, scanned ? &cs : NULL);
	if (scanned)
		ab_changeset_free(&cs);
	int rc = drop_set(dir, err) < 0 ? AB_EXIT_FAIL : 0;
	json_object_set_new(ev, "status", json_integer(rc));
	ab_audit_emit(audit, ev);
	if (rc)
		return rc;
	fprintf(stderr,
		"agentbox: discard: the change set is dropped; the workspace is as it was\n");
	return 0;
}

/* ------------------------------------------------------------ diff */

/* diff -u of one change into OUT_FD, both sides opened beneath their roots
 * (never through a symlink) and handed to diff as /dev/fd/3 and /dev/fd/4. */
static bool diff_one(int ws, int up, const ab_change *c, int out_fd)
{
	char label_a[PATH_MAX + 8], label_b[PATH_MAX + 8], p[PATH_MAX];
	ab_clean(c->path, p, sizeof(p));
	if (c->type != AB_CHT_FILE) {
		return dprintf(out_fd, "--- %s: %s (not a regular file)\n", p,
			       c->kind == AB_CHG_DELETED ? "deleted" : "changed") > 0;
	}
	int a = c->kind == AB_CHG_ADDED
			? open("/dev/null", O_RDONLY | O_CLOEXEC)
			: open_beneath(ws, c->path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK, 0);
	int b = c->kind == AB_CHG_DELETED
			? open("/dev/null", O_RDONLY | O_CLOEXEC)
			: open_beneath(up, c->path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK, 0);
	snprintf(label_a, sizeof(label_a), "a/%s", p);
	snprintf(label_b, sizeof(label_b), "b/%s", p);
	pid_t pid = a >= 0 && b >= 0 ? fork() : -1;
	if (pid == 0) {
		int null = open("/dev/null", O_WRONLY);
		if (dup2(out_fd, 1) < 0 || dup2(a, 3) < 0 || dup2(b, 4) < 0 || null < 0 ||
		    dup2(null, 2) < 0)
			_exit(127);
		execlp("diff", "diff", "-u", "--label",
		       c->kind == AB_CHG_ADDED ? "/dev/null" : label_a, "--label",
		       c->kind == AB_CHG_DELETED ? "/dev/null" : label_b, "/dev/fd/3", "/dev/fd/4",
		       (char *)NULL);
		_exit(127);
	}
	int st = 0;
	bool ok = true;
	if (pid > 0)
		ok = waitpid(pid, &st, 0) > 0 && WIFEXITED(st) && WEXITSTATUS(st) < 2;
	else
		ok = dprintf(out_fd, "--- %s: cannot be shown\n", p) > 0;
	if (a >= 0)
		close(a);
	if (b >= 0)
		close(b);
	return ok; /* false: the reader is gone (diff's status 2) */
}

static void show_diff(const char *workspace, const char *dir, const ab_changeset *cs)
{
	_cleanup_free_ char *upper = ab_path_join(dir, "upper");
	_cleanup_close_ int ws = ab_open_nofollow(workspace, O_PATH | O_DIRECTORY);
	_cleanup_close_ int up = upper ? ab_open_nofollow(upper, O_PATH | O_DIRECTORY) : -1;
	FILE *pager = NULL;
	if (isatty(STDOUT_FILENO)) {
		const char *pg = getenv("PAGER");
		pager = popen(pg && pg[0] ? pg : "less -R", "w");
	}
	fflush(stdout);
	int out = pager ? fileno(pager) : STDOUT_FILENO;
	signal(SIGPIPE, SIG_IGN);
	for (size_t i = 0; ws >= 0 && up >= 0 && i < cs->n; i++)
		if (!diff_one(ws, up, &cs->v[i], out))
			break;
	if (pager)
		pclose(pager);
}

int ab_review_cmd_show(const char *workspace, const char *dir, bool diff, ab_audit *audit,
		       ab_err *err)
{
	_cleanup_close_ int lock = lock_ws(workspace, err);
	if (lock < 0)
		return AB_EXIT_FAIL;
	ab_changeset cs;
	if (scan_set(workspace, dir, &cs, err) < 0)
		return AB_EXIT_FAIL;
	if (diff)
		show_diff(workspace, dir, &cs);
	else
		ab_review_print(dir, &cs, stdout);
	json_t *ev = ab_review_event("shown", workspace, dir, &cs);
	json_object_set_new(ev, "diff", json_boolean(diff));
	ab_audit_emit(audit, ev);
	ab_changeset_free(&cs);
	return 0;
}
