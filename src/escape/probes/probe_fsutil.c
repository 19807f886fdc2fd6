/* SPDX-License-Identifier: MIT */
/*
 * Helpers shared by the file, secret and persistence probes of test-escape
 * (probe_fs.c, probe_fsctl.c, probe_fsmount.c, probe_secper.c): path
 * formatting, zero-byte writes, reading and scanning, the `..` walk that
 * tells whether a directory fd reaches outside the sandbox's tree, and the
 * bounded recursive reader ("the secret sweep").  Runs inside the sandbox,
 * in a probe's forked child.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "probe_fsutil.h"

const int fsp_k_blocked[] = {ENOENT, EROFS, EACCES, EPERM, ENOTDIR, ELOOP, ENOSYS, EXDEV, 0};

bool fsp_pf(char *buf, size_t n, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int k = vsnprintf(buf, n, fmt, ap);
	va_end(ap);
	return k >= 0 && (size_t)k < n;
}

double fsp_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

const char *fsp_ename(int e)
{
	const char *s = strerrorname_np(e);
	return s ? s : "unknown errno";
}

const char *fsp_run_id(ab_probe_run *r)
{
	return ab_pr_lab(r)->run_id;
}

/* DIR/abprobe-RUNID-TAG (DIR "/" gives /abprobe-...). */
bool fsp_mkname(char *buf, size_t n, ab_probe_run *r, const char *dir, const char *tag)
{
	return fsp_pf(buf, n, "%s/abprobe-%s-%s", strcmp(dir, "/") ? dir : "", fsp_run_id(r), tag);
}

bool fsp_write_str(int fd, const char *s)
{
	return ab_write_all(fd, s, strlen(s)) == 0;
}

void fsp_mark(json_t *arr, const char *path)
{
	json_array_append_new(arr, json_string(path));
}

/* Hand an array to the report if it holds anything. */
void fsp_report_arr(ab_probe_run *r, const char *key, json_t *arr)
{
	if (json_array_size(arr))
		ab_pr_report(r, key, arr);
	else
		json_decref(arr);
}

bool fsp_under(const char *path, const char *dir)
{
	return path && dir && ab_path_is_under(path, dir);
}

/* The places that are private tmpfs inside (threat-model.md section 5). */
bool fsp_is_private(ab_probe_run *r, const char *p)
{
	return fsp_under(p, "/tmp") || fsp_under(p, "/var/tmp") || fsp_under(p, "/dev/shm") ||
	       fsp_under(p, "/run") || fsp_under(p, ab_pr_lab(r)->home);
}

/* A failure with one of `reached` shows the call got past every permission
 * check (a privileged caller's EINVAL, setxattr's ENODATA): ESCAPED. */
void fsp_sys_reach(ab_probe_run *r, const char *what, long ret, int err, const int *reached,
		   const char *why)
{
	for (const int *e = reached; ret < 0 && *e; e++)
		if (*e == err) {
			ab_pr_escaped(r, what, "%s (%s)", why, fsp_ename(err));
			return;
		}
	ab_pr_sys(r, what, ret, err);
}

/* Zero-byte open for appending: nothing is written. */
void fsp_append_open(ab_probe_run *r, const char *what, const char *path, bool follow)
{
	int fd = open(path, APPEND_FLAGS | (follow ? 0 : O_NOFOLLOW));
	int e = errno;
	if (fd >= 0)
		close(fd);
	ab_pr_sys(r, what, fd, e);
	struct stat st;
	/* EACCES from the file's own mode bits is plain DAC, not Landlock */
	if (fd < 0 && e == EACCES && stat(path, &st) == 0 && !(st.st_mode & S_IWOTH) &&
	    !(st.st_uid == geteuid() && (st.st_mode & S_IWUSR)))
		ab_pr_layer(r, "file permissions");
}

/* Read up to max bytes from offset 0 with pread, so an inherited fd's
 * shared offset stays where it was.  Returns bytes read, -1 with errno. */
ssize_t fsp_fd_read_all(int fd, char *buf, size_t max)
{
	size_t got = 0;
	while (got < max) {
		ssize_t k = pread(fd, buf + got, max - got, (off_t)got);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return got ? (ssize_t)got : -1;
		if (k == 0)
			break;
		got += (size_t)k;
	}
	return (ssize_t)got;
}

/* Scan what a regular-file fd holds; records "what".  Returns tokens. */
int fsp_scan_fd(ab_probe_run *r, const char *what, int fd, bool escape_on_open)
{
	struct stat st;
	if (fstat(fd, &st) == 0 && !S_ISREG(st.st_mode)) {
		if (escape_on_open)
			ab_pr_escaped(r, what, "opened (mode %o)", st.st_mode & S_IFMT);
		else
			ab_pr_ok(r, what, "opened, not a regular file: nothing read");
		return 0;
	}
	_cleanup_free_ char *buf = malloc(READ_MAX);
	ssize_t got = buf ? fsp_fd_read_all(fd, buf, READ_MAX) : -1;
	int found = got > 0 ? ab_pr_scan(r, what, buf, (size_t)got) : 0;
	if (found)
		return found;
	if (escape_on_open)
		ab_pr_escaped(r, what, "opened, read %zd bytes", got);
	else
		ab_pr_ok(r, what, "readable, %zd bytes, no secret", got);
	return 0;
}

/* openat + fsp_scan_fd; the open's failure is recorded like ab_pr_sys. */
int fsp_read_at(ab_probe_run *r, const char *what, int dirfd, const char *rel, bool escape_on_open)
{
	_cleanup_close_ int fd = openat(dirfd, rel, RD_FLAGS);
	if (fd < 0) {
		ab_pr_sys(r, what, -1, errno);
		return -1;
	}
	return fsp_scan_fd(r, what, fd, escape_on_open);
}

int fsp_mountinfo_idmapped(const char *mi, unsigned long long mnt_id)
{
	for (const char *l = mi; l && *l;) {
		const char *end = strchr(l, '\n');
		size_t len = end ? (size_t)(end - l) : strlen(l);
		char *e = NULL;
		errno = 0;
		unsigned long long id = strtoull(l, &e, 10);
		if (errno == 0 && e != l && *e == ' ' && id == mnt_id) {
			/* fields: id parent maj:min root mountpoint options ... */
			const char *f = l;
			for (int i = 0; i < 5 && f; i++) {
				f = memchr(f, ' ', len - (size_t)(f - l));
				f = f ? f + 1 : NULL;
			}
			if (!f)
				return -1;
			const char *fe = memchr(f, ' ', len - (size_t)(f - l));
			size_t fl = fe ? (size_t)(fe - f) : len - (size_t)(f - l);
			for (size_t o = 0; o < fl;) {
				const char *c = memchr(f + o, ',', fl - o);
				size_t tl = c ? (size_t)(c - (f + o)) : fl - o;
				if (tl == 8 && memcmp(f + o, "idmapped", 8) == 0)
					return 1;
				o += tl + 1;
			}
			return 0;
		}
		l = end ? end + 1 : NULL;
	}
	return -1;
}

int fsp_path_idmapped(const char *path)
{
	struct statx sx;
	if (statx(AT_FDCWD, path, AT_SYMLINK_NOFOLLOW, STATX_MNT_ID, &sx) != 0 ||
	    !(sx.stx_mask & STATX_MNT_ID))
		return -1;
	int fd = open("/proc/self/mountinfo", RD_FLAGS);
	if (fd < 0)
		return -1;
	char *buf = malloc(READ_MAX + 1);
	size_t n = 0;
	ssize_t k = buf ? 1 : -1;
	while (k > 0 && n < READ_MAX) { /* read(): a seq file, sequentially */
		k = read(fd, buf + n, READ_MAX - n);
		if (k < 0 && errno == EINTR)
			k = 1;
		else if (k > 0)
			n += (size_t)k;
	}
	close(fd);
	int r = -1;
	if (k == 0) {
		buf[n] = '\0';
		r = fsp_mountinfo_idmapped(buf, sx.stx_mnt_id);
	}
	free(buf);
	return r;
}

/* Follow ".." from dirfd to the top.  Returns 1 if the top is not this
 * process's root (the fd reaches a tree above or beside the sandbox; *top
 * gets an O_PATH fd on it), 0 if it is, -1 if undetermined (errno). */
int fsp_dir_top(int dirfd, int *top)
{
	struct stat root, st, ust;
	if (stat("/", &root) < 0)
		return -1;
	int cur = openat(dirfd, ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (cur < 0)
		return -1;
	for (int i = 0;; i++) {
		int up = i < 256 ? openat(cur, "..", O_PATH | O_DIRECTORY | O_CLOEXEC) : -1;
		if (up < 0 || fstat(cur, &st) < 0 || fstat(up, &ust) < 0) {
			int e = up < 0 && i >= 256 ? ELOOP : errno;
			if (up >= 0)
				close(up);
			close(cur);
			errno = e;
			return -1;
		}
		if (ust.st_dev == st.st_dev && ust.st_ino == st.st_ino) {
			close(up);
			break;
		}
		close(cur);
		cur = up;
	}
	if (st.st_dev == root.st_dev && st.st_ino == root.st_ino) {
		close(cur);
		return 0;
	}
	*top = cur;
	return 1;
}

/* Does the directory fd reach outside the sandbox's tree?  Records one
 * attempt; when it does, tries the lab's canaries relative to that top. */
void fsp_check_dir_fd(ab_probe_run *r, const char *what, int dirfd)
{
	const ab_lab_info *lab = ab_pr_lab(r);
	int top = -1;
	int k = fsp_dir_top(dirfd, &top);
	if (k < 0) {
		ab_pr_ok(r, what, "'..' walk stopped (%s): undetermined, nothing reached",
			 fsp_ename(errno));
		return;
	}
	if (k == 0) {
		ab_pr_ok(r, what, "'..' ends at the sandbox's root");
		return;
	}
	ab_pr_escaped(r, what, "'..' leads to a root other than the sandbox's");
	char rel[PMAX], w[PMAX + 64];
	const char *rels[] = {lab->home, lab->sibling};
	const char *tails[] = {".ssh/id_ed25519", ".env"};
	for (size_t i = 0; i < 2; i++)
		if (rels[i] && fsp_pf(rel, sizeof(rel), "%s/%s", rels[i] + 1, tails[i]) &&
		    fsp_pf(w, sizeof(w), "%s: read /%s", what, rel))
			fsp_read_at(r, w, top, rel, false);
	close(top);
}

/* ---- bounded recursive reading ("the secret sweep") ---- */

int fsp_scan_pr(void *ctx, const char *what, const void *buf, size_t n)
{
	return ab_pr_scan(ctx, what, buf, n);
}

int fsp_scan_count(void *ctx, const char *what, const void *buf, size_t n)
{
	return ab_canary_scan(buf, n, NULL, NULL);
}

void fsp_walk_init(struct fsp_walk *w, fsp_scan_fn fn, void *ctx, char *buf, int depth,
		   double budget_ms)
{
	*w = (struct fsp_walk){.scan = fn,
			       .ctx = ctx,
			       .buf = buf,
			       .max_depth = depth,
			       .max_files = 400,
			       .deadline = fsp_now_ms() + budget_ms};
}

void fsp_walk_file(struct fsp_walk *w, int dfd, const char *name, const char *path)
{
	_cleanup_close_ int fd = openat(dfd, name, RD_FLAGS | O_NOFOLLOW);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		w->unreadable++;
		return;
	}
	ssize_t got = fsp_fd_read_all(fd, w->buf, READ_MAX);
	if (got < 0) {
		w->unreadable++;
		return;
	}
	w->files++;
	w->tokens += w->scan(w->ctx, path, w->buf, (size_t)got);
}

/* Walk the directory dfd (taken over) named path.  Opens only regular files
 * and directories, never follows a symlink, never opens a device. */
void fsp_walk_dir(struct fsp_walk *w, int dfd, const char *path, int depth)
{
	DIR *d = fdopendir(dfd);
	if (!d) {
		close(dfd);
		w->unreadable++;
		return;
	}
	w->dirs++;
	struct dirent *e;
	while (w->files < w->max_files && fsp_now_ms() < w->deadline && (e = readdir(d))) {
		char child[PMAX];
		struct stat st;
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") ||
		    !fsp_pf(child, sizeof(child), "%s/%s", strcmp(path, "/") ? path : "",
			    e->d_name))
			continue;
		if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			w->unreadable++;
			continue;
		}
		if (S_ISREG(st.st_mode)) {
			fsp_walk_file(w, dirfd(d), e->d_name, child);
		} else if (S_ISDIR(st.st_mode) && depth < w->max_depth &&
			   !(w->skip_name && !strcmp(e->d_name, w->skip_name)) &&
			   !(w->skip_path && !strcmp(child, w->skip_path))) {
			int sub = openat(dirfd(d), e->d_name,
					 O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (sub < 0)
				w->unreadable++;
			else
				fsp_walk_dir(w, sub, child, depth + 1);
		}
	}
	closedir(d);
}

/* Walk path (a directory, or a single file) with the probe's scanner and
 * record one attempt for it; tokens are recorded by the scanner. */
void fsp_walk_record(ab_probe_run *r, const char *path, int depth, double budget_ms,
		     const char *skip_path)
{
	char what[PMAX + 16];
	struct fsp_walk w;
	_cleanup_free_ char *buf = malloc(READ_MAX);
	if (!buf || !fsp_pf(what, sizeof(what), "walk %s", path)) {
		ab_pr_error(r, path, "out of memory or path too long");
		return;
	}
	struct stat st;
	if (stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
		ab_pr_read_file(r, path, true, false);
		return;
	}
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0) {
		ab_pr_sys(r, what, -1, errno);
		return;
	}
	fsp_walk_init(&w, fsp_scan_pr, r, buf, depth, budget_ms);
	w.skip_path = skip_path;
	fsp_walk_dir(&w, fd, path, 1);
	if (!w.tokens)
		ab_pr_ok(r, what, "visible: %d files read in %d dirs (%d unreadable), no secret",
			 w.files, w.dirs, w.unreadable);
}

void fsp_homes_add(struct fsp_homes *h, const char *p)
{
	if (!p || p[0] != '/' || h->n >= 4)
		return;
	for (size_t i = 0; i < h->n; i++)
		if (!strcmp(h->v[i], p))
			return;
	h->v[h->n++] = p;
}

void fsp_homes_get(ab_probe_run *r, struct fsp_homes *h, bool with_root)
{
	h->n = 0;
	fsp_homes_add(h, ab_pr_lab(r)->home);
	fsp_homes_add(h, getenv("HOME"));
	struct passwd *pw = getpwuid(getuid());
	fsp_homes_add(h, pw ? pw->pw_dir : NULL);
	if (with_root)
		fsp_homes_add(h, "/root");
}

/* Read HOME/rel for every home; a file that opens without a canary is OK
 * (a profile may map a harmless config) but recorded. */
void fsp_read_home_files(ab_probe_run *r, const struct fsp_homes *h, const char *const *rels,
			 size_t n)
{
	char p[PMAX];
	for (size_t i = 0; i < h->n; i++)
		for (size_t k = 0; k < n; k++)
			if (fsp_pf(p, sizeof(p), "%s/%s", h->v[i], rels[k]))
				ab_pr_read_file(r, p, true, false);
}
