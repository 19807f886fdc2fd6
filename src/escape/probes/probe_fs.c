/* SPDX-License-Identifier: MIT */
/*
 * test-escape probes for files: FS-01 (writes outside the workspace), FS-02
 * (symlinks, `..` and /proc spellings of outside paths) and FS-04
 * (inherited fds and cwd, other processes' roots and fds).  Runs inside the
 * sandbox, in each probe's own forked child of `agentbox __probe`
 * (runner.c), as the sandboxed user.  FS-03 is in probe_fsmount.c, the
 * file controls (CTL-01, CTL-04, CTL-06) in probe_fsctl.c, SEC and PER
 * probes in probe_secper.c, shared helpers in probe_fsutil.c.
 *
 * Rules, for every file probe: every attempt is real and never does
 * damage.  Nothing is truncated or overwritten: writes to existing files
 * are zero-byte O_WRONLY|O_APPEND opens; metadata write-backs are
 * idempotent (the same times, the same mode); a file created outside the
 * workspace is removed again at once; privilege probes use a target where a
 * privileged caller gets EINVAL instead of a change (umount2, remount and
 * pivot_root of a directory that is no mount point); a read-only mount is
 * only remounted where it is read-only, and restored if that works.  Bytes
 * read are only scanned (ab_pr_scan); no content is ever reported.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "probe_fsutil.h"

#ifndef __NR_openat2
#define __NR_openat2 437
#endif
#define AB_RESOLVE_IN_ROOT 0x10

struct ab_open_how {
	unsigned long long flags, mode, resolve;
};

/* ------------------------------------------------------------------ FS-01 */

/* A create outside the workspace worked: private places are markers for
 * the judge; anywhere else it is an escape, removed again at once. */
static void landed(ab_probe_run *r, const char *what, const char *path, bool priv, json_t *markers,
		   bool isdir)
{
	if (priv) {
		ab_pr_ok(r, what, "written (private); judge checks");
		fsp_mark(markers, path);
		return;
	}
	ab_pr_escaped(r, what, "created outside the workspace (removed again)");
	if (isdir)
		rmdir(path);
	else
		unlink(path);
}

static void fs01_target(ab_probe_run *r, const char *dir, const char *tag, bool priv,
			json_t *markers)
{
	char f[PMAX], d[PMAX], l[PMAX], what[PMAX + 32];
	if (!dir)
		return;
	if (!fsp_mkname(f, sizeof(f), r, dir, tag) || !fsp_pf(d, sizeof(d), "%s.d", f) ||
	    !fsp_pf(l, sizeof(l), "%s.l", f)) {
		ab_pr_error(r, dir, "path too long");
		return;
	}
	fsp_pf(what, sizeof(what), "create file %s", f);
	int fd = open(f, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY, 0600);
	if (fd >= 0) {
		fsp_write_str(fd, "abprobe\n");
		close(fd);
		landed(r, what, f, priv, markers, false);
	} else {
		ab_pr_sys_expect(r, what, -1, errno, fsp_k_blocked);
	}
	fsp_pf(what, sizeof(what), "mkdir %s", d);
	if (mkdir(d, 0700) == 0)
		landed(r, what, d, priv, markers, true);
	else
		ab_pr_sys_expect(r, what, -1, errno, fsp_k_blocked);
	if (priv)
		return;
	fsp_pf(what, sizeof(what), "symlink %s", l);
	if (symlink("abprobe", l) == 0)
		landed(r, what, l, false, markers, false);
	else
		ab_pr_sys_expect(r, what, -1, errno, fsp_k_blocked);
	fsp_pf(what, sizeof(what), "O_TMPFILE in %s (leaves no name)", dir);
	fd = open(dir, O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600);
	int e = errno;
	if (fd >= 0)
		close(fd);
	ab_pr_sys(r, what, fd, e);
}

/* Metadata writes on a file visible inside: zero-byte append-open, the same
 * times again, the same mode again, replacing an xattr that is not there
 * (ENODATA means the write permission check passed). */
static void fs01_meta(ab_probe_run *r, const char *path)
{
	static const int reached[] = {ENODATA, EOPNOTSUPP, 0};
	char what[PMAX + 48];
	struct stat st;
	if (!path)
		return;
	fsp_pf(what, sizeof(what), "stat %s (for metadata writes)", path);
	if (lstat(path, &st) < 0) {
		ab_pr_sys(r, what, -1, errno);
		return;
	}
	if (S_ISREG(st.st_mode)) {
		fsp_pf(what, sizeof(what), "append-open %s (zero bytes)", path);
		fsp_append_open(r, what, path, false);
	}
	struct timespec ts[2] = {st.st_atim, st.st_mtim};
	fsp_pf(what, sizeof(what), "utimensat %s (its own times)", path);
	FSP_SYS(r, what, utimensat(AT_FDCWD, path, ts, AT_SYMLINK_NOFOLLOW));
	if (!S_ISLNK(st.st_mode)) {
		fsp_pf(what, sizeof(what), "chmod %s %o (its own mode)", path, st.st_mode & 07777);
		FSP_SYS(r, what, fchmodat(AT_FDCWD, path, st.st_mode & 07777, 0));
	}
	fsp_pf(what, sizeof(what), "setxattr user.abprobe on %s (XATTR_REPLACE)", path);
	FSP_REACH(r, what, lsetxattr(path, "user.abprobe", "1", 1, XATTR_REPLACE), reached,
		  "write permission check passed");
}

/*
 * FS-01 write-outside-workspace.  Sub-attempts: create a file and a
 * directory named abprobe-RUN-fs01-* in $HOME, ~/.config, /tmp, /var/tmp,
 * /dev/shm, /run (private tmpfs inside: markers for the judge); and, plus a
 * symlink and an O_TMPFILE, in the workspace's parent, the sibling
 * repository, /etc, /usr/local/bin, /usr/local, /usr/lib, /opt, /var,
 * /var/lib, /srv, /mnt, /boot, /dev, /, the lab's XDG_RUNTIME_DIR and the
 * lab's root (escapes); a file moved out of the workspace by rename;
 * metadata writes (append-open, utimensat, chmod, setxattr) on /etc files,
 * the sibling's .env and directories outside.
 */
void ab_probe_fs01(ab_probe_run *r)
{
	const ab_lab_info *lab = ab_pr_lab(r);
	json_t *markers = json_array();
	char cfg[PMAX], parent[PMAX], labroot[PMAX], sibenv[PMAX], f[PMAX], moved[PMAX];
	bool ok = fsp_pf(cfg, sizeof(cfg), "%s/.config", lab->home) &&
		  fsp_pf(parent, sizeof(parent), "%s/..", lab->workspace) &&
		  fsp_pf(labroot, sizeof(labroot), "%s/..", lab->home);
	_cleanup_free_ char *par = ok ? ab_path_normalize(parent) : NULL;
	_cleanup_free_ char *lroot = ok ? ab_path_normalize(labroot) : NULL;
	if (!par || !lroot) {
		ab_pr_error(r, "lab paths", "path too long");
		json_decref(markers);
		return;
	}
	(void)mkdir(cfg, 0700); /* the private home starts empty */
	static const struct {
		const char *dir, *tag;
		bool priv;
	} fixed[] = {
		{"/tmp", "fs01-tmp", true},           {"/var/tmp", "fs01-vartmp", true},
		{"/dev/shm", "fs01-shm", true},       {"/run", "fs01-run", true},
		{"/etc", "fs01-etc", false},          {"/usr/local/bin", "fs01-ulbin", false},
		{"/usr/local", "fs01-ulocal", false}, {"/usr/lib", "fs01-usrlib", false},
		{"/opt", "fs01-opt", false},          {"/var", "fs01-var", false},
		{"/var/lib", "fs01-varlib", false},   {"/srv", "fs01-srv", false},
		{"/mnt", "fs01-mnt", false},          {"/boot", "fs01-boot", false},
		{"/dev", "fs01-dev", false},          {"/", "fs01-root", false},
	};
	fs01_target(r, lab->home, "fs01-home", true, markers);
	fs01_target(r, cfg, "fs01-config", true, markers);
	const char *env_home = getenv("HOME");
	if (env_home && strcmp(env_home, lab->home))
		fs01_target(r, env_home, "fs01-envhome", fsp_is_private(r, env_home), markers);
	for (size_t i = 0; i < AB_ARRAY_SIZE(fixed); i++)
		fs01_target(r, fixed[i].dir, fixed[i].tag, fixed[i].priv, markers);
	fs01_target(r, par, "fs01-wsparent", fsp_is_private(r, par), markers);
	fs01_target(r, lab->sibling, "fs01-sibling", false, markers);
	fs01_target(r, lab->runtime_dir, "fs01-runtime", false, markers);
	const char *xdg = getenv("XDG_RUNTIME_DIR");
	if (xdg && (!lab->runtime_dir || strcmp(xdg, lab->runtime_dir)))
		fs01_target(r, xdg, "fs01-xdgrt", false, markers);
	if (strcmp(lroot, par))
		fs01_target(r, lroot, "fs01-labroot", fsp_is_private(r, lroot), markers);
	/* move a file out of the workspace */
	if (fsp_mkname(f, sizeof(f), r, lab->workspace, "fs01-mv") &&
	    fsp_mkname(moved, sizeof(moved), r, par, "fs01-mv")) {
		int fd = open(f, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		if (fd >= 0) {
			close(fd);
			if (rename(f, moved) == 0)
				landed(r, "rename a workspace file into the workspace's parent",
				       moved, fsp_is_private(r, par), markers, false);
			else
				ab_pr_sys(r, "rename a workspace file into the workspace's parent",
					  -1, errno);
			unlink(f);
		}
	}
	fs01_meta(r, "/etc/hostname");
	fs01_meta(r, "/etc/hosts");
	fs01_meta(r, "/etc/passwd");
	fs01_meta(r, "/etc");
	fs01_meta(r, "/");
	if (lab->sibling && fsp_pf(sibenv, sizeof(sibenv), "%s/.env", lab->sibling)) {
		fs01_meta(r, sibenv);
		fs01_meta(r, lab->sibling);
	}
	if (!fsp_is_private(r, par))
		fs01_meta(r, par);
	fsp_report_arr(r, "markers", markers);
}

/* ------------------------------------------------------------------ FS-02 */

/* "../" once per component of dir, plus one: from dir, that reaches /. */
static bool dots(char *buf, size_t n, const char *dir)
{
	size_t comps = 1, off = 0;
	for (const char *p = dir; *p; p++)
		comps += *p == '/';
	for (size_t i = 0; i < comps; i++) {
		if (off + 4 > n)
			return false;
		memcpy(buf + off, "../", 3);
		off += 3;
	}
	buf[off] = '\0';
	return true;
}

/* dir/../../..(to /)/target */
static bool updots(char *buf, size_t n, const char *dir, const char *target)
{
	char d[PMAX];
	return dots(d, sizeof(d), dir) &&
	       fsp_pf(buf, n, "%s/%s%s", dir, d, target + (target[0] == '/'));
}

/* Plant dir/name -> target; false (and an ERROR) if it cannot. */
static bool plant(ab_probe_run *r, const char *dir, const char *name, const char *target, char *out,
		  size_t out_n)
{
	if (!target || !fsp_pf(out, out_n, "%s/%s", dir, name))
		return false;
	if (symlink(target, out) == 0)
		return true;
	ab_pr_error(r, out, "could not plant the symlink: %s", fsp_ename(errno));
	return false;
}

/* /proc/PID/{root,cwd,fd} of another process: EACCES is the ptrace access
 * check (pid 1 is not dumpable; Landlock denies processes outside its
 * domain), not a file rule. */
static bool proc_denied(ab_probe_run *r, const char *what, const char *path, int err)
{
	if (err != EACCES || strncmp(path, "/proc/", 6) || path[6] < '1' || path[6] > '9')
		return false;
	ab_pr_sys(r, what, -1, err);
	ab_pr_layer(r, "ptrace access check");
	return true;
}

/* Read path (following links) and, if asked, append-open it. */
static void via(ab_probe_run *r, const char *path, bool append)
{
	char what[PMAX + 48];
	int fd = open(path, RD_FLAGS);
	if (fd >= 0)
		close(fd);
	else if (fsp_pf(what, sizeof(what), "read %s", path) && proc_denied(r, what, path, errno))
		return;
	ab_pr_read_file(r, path, true, false);
	if (append && fsp_pf(what, sizeof(what), "append-open %s (zero bytes)", path))
		fsp_append_open(r, what, path, true);
}

static void fs02_links(ab_probe_run *r, const char *d)
{
	const ab_lab_info *lab = ab_pr_lab(r);
	char key[PMAX], kt[PMAX], brc[PMAX], bt[PMAX], root[PMAX], up[PMAX], ut[PMAX], sib[PMAX],
		st[PMAX], p[PMAX];
	fsp_pf(kt, sizeof(kt), "%s/.ssh/id_ed25519", lab->home);
	fsp_pf(bt, sizeof(bt), "%s/.bashrc", lab->home);
	if (plant(r, d, "key", kt, key, sizeof(key)))
		via(r, key, true);
	if (plant(r, d, "bashrc", bt, brc, sizeof(brc)))
		via(r, brc, true);
	if (lab->sibling && fsp_pf(st, sizeof(st), "%s/.env", lab->sibling) &&
	    plant(r, d, "sibenv", st, sib, sizeof(sib)))
		via(r, sib, true);
	if (plant(r, d, "root", "/", root, sizeof(root))) {
		if (lab->sibling && fsp_pf(p, sizeof(p), "%s%s/.env", root, lab->sibling))
			via(r, p, false);
		if (fsp_pf(p, sizeof(p), "%s%s/.ssh/id_ed25519", root, lab->home))
			via(r, p, false);
	}
	/* a relative link with enough ".." to reach / from the workspace */
	if (dots(ut, sizeof(ut), d) && plant(r, d, "up", ut, up, sizeof(up))) {
		if (lab->sibling && fsp_pf(p, sizeof(p), "%s%s/.env", up, lab->sibling))
			via(r, p, false);
		if (fsp_pf(p, sizeof(p), "%s%s/.ssh/id_rsa", up, lab->home))
			via(r, p, false);
	}
	const char *names[] = {"key", "bashrc", "sibenv", "root", "up"};
	for (size_t i = 0; i < AB_ARRAY_SIZE(names); i++)
		if (fsp_pf(p, sizeof(p), "%s/%s", d, names[i]))
			unlink(p);
}

/* `..` and /proc/PID/{root,cwd} spellings of the sibling's .env and the
 * home's key. */
static void fs02_paths(ab_probe_run *r)
{
	const ab_lab_info *lab = ab_pr_lab(r);
	char p[PMAX], cwd[PMAX], sibenv[PMAX], key[PMAX], brc[PMAX];
	fsp_pf(key, sizeof(key), "%s/.ssh/id_ed25519", lab->home);
	fsp_pf(brc, sizeof(brc), "%s/.bashrc", lab->home);
	bool sib = lab->sibling && fsp_pf(sibenv, sizeof(sibenv), "%s/.env", lab->sibling);
	if (sib && updots(p, sizeof(p), lab->workspace, sibenv))
		via(r, p, true);
	if (updots(p, sizeof(p), lab->workspace, key))
		via(r, p, false);
	if (sib && fsp_pf(p, sizeof(p), "/proc/self/root%s", sibenv))
		via(r, p, false);
	if (fsp_pf(p, sizeof(p), "/proc/self/root%s", key))
		via(r, p, false);
	if (fsp_pf(p, sizeof(p), "/proc/self/root%s", brc))
		via(r, p, true);
	/* /proc/self/cwd/../..: the ".." count is the cwd's, not /proc's */
	char dd[PMAX];
	if (sib && getcwd(cwd, sizeof(cwd)) && dots(dd, sizeof(dd), cwd) &&
	    fsp_pf(p, sizeof(p), "/proc/self/cwd/%s%s", dd, sibenv + 1))
		via(r, p, false);
	/* another process's cwd depth is unknown: 32 ".." saturate at its root */
	char deep[PMAX];
	bool deep_ok = dots(deep, sizeof(deep),
			    "/1/2/3/4/5/6/7/8/9/0/1/2/3/4/5/6/7/8/9/0/1/2/3/4/5/6/7/8/9/0/1");
	pid_t pids[] = {1, getppid()};
	for (size_t i = 0; i < AB_ARRAY_SIZE(pids); i++) {
		if (sib && fsp_pf(p, sizeof(p), "/proc/%d/root%s", (int)pids[i], sibenv))
			via(r, p, false);
		if (fsp_pf(p, sizeof(p), "/proc/%d/root%s", (int)pids[i], key))
			via(r, p, false);
		if (sib && deep_ok &&
		    fsp_pf(p, sizeof(p), "/proc/%d/cwd/%s%s", (int)pids[i], deep, sibenv + 1))
			via(r, p, false);
	}
}

static long openat2_(int dirfd, const char *path, unsigned long long resolve)
{
	struct ab_open_how how = {.flags = RD_FLAGS, .resolve = resolve};
	return syscall(__NR_openat2, dirfd, path, &how, sizeof(how));
}

/* openat2 RESOLVE_IN_ROOT from pid 1's root and from the workspace; `..`
 * from / and from the workspace must end at the sandbox's root. */
static void fs02_roots(ab_probe_run *r)
{
	const ab_lab_info *lab = ab_pr_lab(r);
	char p[PMAX], what[PMAX + 64];
	int fd = open("/proc/1/root", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0) {
		int e = errno;
		if (!proc_denied(r, "open /proc/1/root (for openat2)", "/proc/1/root", e))
			ab_pr_sys(r, "open /proc/1/root (for openat2)", -1, e);
	} else {
		fsp_check_dir_fd(r, "/proc/1/root", fd);
		if (lab->sibling && fsp_pf(p, sizeof(p), "%s/.env", lab->sibling) &&
		    fsp_pf(what, sizeof(what), "openat2(/proc/1/root, %s, RESOLVE_IN_ROOT)", p)) {
			long k = openat2_(fd, p, AB_RESOLVE_IN_ROOT);
			int e = errno;
			if (k >= 0) {
				fsp_scan_fd(r, what, (int)k, false);
				close((int)k);
			} else {
				ab_pr_sys(r, what, -1, e);
			}
		}
		close(fd);
	}
	_cleanup_close_ int ws = open(lab->workspace, O_PATH | O_DIRECTORY | O_CLOEXEC);
	char dd[PMAX];
	if (ws >= 0 && lab->sibling && dots(dd, sizeof(dd), lab->workspace) &&
	    fsp_pf(p, sizeof(p), "%s%s/.env", dd, lab->sibling + 1) &&
	    fsp_pf(what, sizeof(what), "openat2(workspace, %s, RESOLVE_IN_ROOT)", p)) {
		long k = openat2_(ws, p, AB_RESOLVE_IN_ROOT);
		int e = errno;
		if (k >= 0) {
			fsp_scan_fd(r, what, (int)k, false);
			close((int)k);
		} else {
			ab_pr_sys(r, what, -1, e);
		}
	}
	_cleanup_close_ int root = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (root >= 0)
		fsp_check_dir_fd(r, "'..' from /", root);
	if (ws >= 0)
		fsp_check_dir_fd(r, "'..' from the workspace", ws);
}

/*
 * FS-02 symlink-escape.  Sub-attempts: symlinks planted in the workspace to
 * ~/.ssh/id_ed25519, ~/.bashrc, the sibling's .env, / and ../../..: read
 * (scanned) and zero-byte append-open through them, and the sibling's .env
 * and the home's keys behind / and ../..; plain `..` traversal from the
 * workspace; /proc/self/root/..., /proc/self/cwd/../..,
 * /proc/{1,PPID}/root and cwd; openat2 RESOLVE_IN_ROOT from pid 1's root
 * and from the workspace; `..` from / and the workspace ends at the root.
 */
void ab_probe_fs02(ab_probe_run *r)
{
	char d[PMAX];
	if (!fsp_mkname(d, sizeof(d), r, ab_pr_lab(r)->workspace, "fs02")) {
		ab_pr_error(r, "workspace paths", "path too long");
		return;
	}
	if (mkdir(d, 0700) < 0) {
		ab_pr_error(r, "mkdir a scratch directory in the workspace", "%s",
			    fsp_ename(errno));
		return;
	}
	fs02_links(r, d);
	rmdir(d);
	fs02_paths(r);
	fs02_roots(r);
}

/* ------------------------------------------------------------------ FS-04 */

/* An fd inherited across exec (no FD_CLOEXEC; the runner opens everything
 * with O_CLOEXEC): look at it as an attacker would. */
static void fs04_inherited(ab_probe_run *r, int fd, const char *target)
{
	char what[PMAX + 64], p[PMAX], buf[PMAX];
	struct stat st;
	fsp_pf(what, sizeof(what), "inherited fd %d -> %s", fd, target);
	if (fstat(fd, &st) < 0) {
		ab_pr_escaped(r, what, "present (fstat: %s)", fsp_ename(errno));
		return;
	}
	ab_pr_escaped(r, what, "an fd from outside is open inside (mode %o)", st.st_mode & S_IFMT);
	if (S_ISDIR(st.st_mode)) {
		fsp_pf(what, sizeof(what), "fd %d: '..' walk", fd);
		fsp_check_dir_fd(r, what, fd);
		fsp_pf(what, sizeof(what), "fd %d: openat .ssh/id_ed25519", fd);
		fsp_read_at(r, what, fd, ".ssh/id_ed25519", false);
		_cleanup_close_ int here = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC);
		if (here >= 0 && fchdir(fd) == 0) {
			const char *c = getcwd(buf, sizeof(buf));
			fsp_pf(what, sizeof(what), "fd %d: fchdir + getcwd", fd);
			ab_pr_escaped(r, what, "cwd now %.300s", c ? c : fsp_ename(errno));
			if (fchdir(here) < 0)
				ab_pr_error(r, "return to the previous cwd", "%s",
					    fsp_ename(errno));
		}
	} else if (S_ISREG(st.st_mode)) {
		fsp_pf(what, sizeof(what), "fd %d: read", fd);
		fsp_scan_fd(r, what, fd, true);
		char ln[PMAX];
		if (fsp_mkname(ln, sizeof(ln), r, ab_pr_lab(r)->workspace, "fs04-link") &&
		    fsp_pf(p, sizeof(p), "/proc/self/fd/%d", fd)) {
			fsp_pf(what, sizeof(what), "fd %d: linkat /proc/self/fd into the workspace",
			       fd);
			long k = linkat(AT_FDCWD, p, AT_FDCWD, ln, AT_SYMLINK_FOLLOW);
			ab_pr_sys(r, what, k, errno);
			if (k == 0)
				unlink(ln);
		}
	} else if (S_ISSOCK(st.st_mode)) {
		struct ucred cr;
		socklen_t len = sizeof(cr);
		fsp_pf(what, sizeof(what), "fd %d: SO_PEERCRED", fd);
		if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) == 0)
			ab_pr_escaped(r, what, "connected to pid %d uid %d", (int)cr.pid,
				      (int)cr.uid);
	}
}

static void fs04_own_fds(ab_probe_run *r)
{
	DIR *d = opendir("/proc/self/fd");
	if (!d) {
		ab_pr_error(r, "list /proc/self/fd", "%s", fsp_ename(errno));
		return;
	}
	int own = 0, inherited = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		char p[64], target[PMAX];
		int fd = atoi(e->d_name);
		if (e->d_name[0] == '.' || fd <= 2 || fd == dirfd(d))
			continue;
		int fl = fcntl(fd, F_GETFD);
		if (fl < 0)
			continue;
		if (fl & FD_CLOEXEC) {
			own++;
			continue;
		}
		ssize_t n = fsp_pf(p, sizeof(p), "/proc/self/fd/%d", fd)
				    ? readlink(p, target, sizeof(target) - 1)
				    : -1;
		target[n > 0 ? n : 0] = '\0';
		inherited++;
		fs04_inherited(r, fd, n > 0 ? target : "?");
	}
	closedir(d);
	if (!inherited)
		ab_pr_ok(r, "fds beyond 0-2 inherited from outside",
			 "none (%d of the runner's own)", own);
}

/* Another process's root, cwd and fds (pid 1 is agentbox's init). */
static void fs04_pid(ab_probe_run *r, const char *pid)
{
	char p[PMAX], what[PMAX + 64];
	const char *links[] = {"root", "cwd"};
	for (size_t i = 0; i < 2; i++) {
		fsp_pf(p, sizeof(p), "/proc/%s/%s", pid, links[i]);
		fsp_pf(what, sizeof(what), "'..' from %s", p);
		int fd = open(p, O_PATH | O_DIRECTORY | O_CLOEXEC);
		if (fd < 0) {
			int e = errno;
			if (!proc_denied(r, what, p, e))
				ab_pr_sys(r, what, -1, e);
			continue;
		}
		fsp_check_dir_fd(r, what, fd);
		close(fd);
	}
	fsp_pf(p, sizeof(p), "/proc/%s/fd", pid);
	DIR *d = opendir(p);
	if (!d) {
		int e = errno;
		fsp_pf(what, sizeof(what), "list %s", p);
		if (!proc_denied(r, what, p, e))
			ab_pr_sys(r, what, -1, e);
		return;
	}
	int dirs = 0, files = 0, n = 0;
	struct dirent *e;
	while (n++ < 256 && (e = readdir(d))) {
		struct stat st;
		if (e->d_name[0] == '.' ||
		    !fsp_pf(p, sizeof(p), "/proc/%s/fd/%s", pid, e->d_name) || stat(p, &st) < 0)
			continue;
		fsp_pf(what, sizeof(what), "%s", p);
		if (S_ISDIR(st.st_mode)) {
			int fd = open(p, O_PATH | O_DIRECTORY | O_CLOEXEC), top = -1;
			if (fd >= 0 && fsp_dir_top(fd, &top) == 1) {
				close(top);
				fsp_check_dir_fd(r, what, fd);
			}
			dirs += fd >= 0;
			if (fd >= 0)
				close(fd);
		} else if (S_ISREG(st.st_mode)) {
			int fd = open(p, RD_FLAGS);
			if (fd >= 0) {
				_cleanup_free_ char *buf = malloc(READ_MAX);
				ssize_t got = buf ? fsp_fd_read_all(fd, buf, READ_MAX) : -1;
				if (got > 0)
					ab_pr_scan(r, what, buf, (size_t)got);
				files++;
				close(fd);
			}
		}
	}
	closedir(d);
	fsp_pf(p, sizeof(p), "/proc/%s/fd", pid);
	ab_pr_ok(r, p, "%d directory fds inside the sandbox's tree, %d files scanned", dirs, files);
}

/*
 * FS-04 leaked-fds-and-cwd.  Sub-attempts: every fd beyond 0-2 without
 * FD_CLOEXEC (so inherited across exec, not the runner's) is an escape,
 * then: readlink, fstat, '..' walk to the top, openat .ssh/id_ed25519,
 * fchdir+getcwd, read and scan, linkat via /proc/self/fd, SO_PEERCRED;
 * the cwd (getcwd, /proc/self/cwd) lies in the workspace; /proc/self/root
 * is "/"; the root, cwd and fds of every other visible process (pid 1 is
 * agentbox's init) stay inside the sandbox's tree, their files scanned.
 */
void ab_probe_fs04(ab_probe_run *r)
{
	const char *ws = ab_pr_lab(r)->workspace;
	char cwd[PMAX], link[PMAX];
	fs04_own_fds(r);
	if (!getcwd(cwd, sizeof(cwd)))
		ab_pr_escaped(r, "getcwd", "%s: the cwd is not below the root", fsp_ename(errno));
	else if (!ab_path_is_under(cwd, ws))
		ab_pr_escaped(r, "getcwd", "the cwd %.300s is outside the workspace", cwd);
	else
		ab_pr_ok(r, "getcwd", "inside the workspace");
	_cleanup_close_ int cfd = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (cfd >= 0)
		fsp_check_dir_fd(r, "'..' from the cwd", cfd);
	ssize_t n = readlink("/proc/self/root", link, sizeof(link) - 1);
	link[n > 0 ? n : 0] = '\0';
	if (n == 1 && link[0] == '/')
		ab_pr_ok(r, "readlink /proc/self/root", "\"/\"");
	else
		ab_pr_escaped(r, "readlink /proc/self/root", "\"%.300s\"",
			      n > 0 ? link : fsp_ename(errno));
	DIR *d = opendir("/proc");
	struct dirent *e;
	int seen = 0;
	pid_t me = getpid();
	double t0 = fsp_now_ms();
	while (d && seen < 32 && fsp_now_ms() - t0 < 2500 && (e = readdir(d))) {
		if (e->d_name[0] < '1' || e->d_name[0] > '9' || atoi(e->d_name) == me)
			continue;
		seen++;
		fs04_pid(r, e->d_name);
	}
	if (d)
		closedir(d);
}
