/* SPDX-License-Identifier: MIT */
/*
 * test-escape probes for files: the positive controls CTL-01 (workspace and
 * /tmp work), CTL-04 (git works) and CTL-06 (the secret sweep finds the
 * workspace's canary), and FS-01..FS-04 (writes outside the workspace,
 * symlinks and `..`, special files and mounts, inherited fds and cwd).
 * Runs inside the sandbox, in each probe's own forked child of
 * `agentbox __probe` (runner.c), as the sandboxed user.  SEC and PER
 * probes are in probe_secper.c, shared helpers in probe_fsutil.c.
 *
 * Rules (escape-probes.md in the shared guide): every attempt is real and
 * never does damage.  Nothing is truncated or overwritten: writes to existing
 * files are zero-byte O_WRONLY|O_APPEND opens; metadata write-backs are
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
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "probe_fsutil.h"

#ifndef __NR_open_tree
#define __NR_open_tree 428
#endif
#ifndef __NR_move_mount
#define __NR_move_mount 429
#endif
#ifndef __NR_fsopen
#define __NR_fsopen 430
#endif
#ifndef __NR_fspick
#define __NR_fspick 433
#endif
#ifndef __NR_openat2
#define __NR_openat2 437
#endif
#ifndef __NR_mount_setattr
#define __NR_mount_setattr 442
#endif
#ifndef OPEN_TREE_CLONE
#define OPEN_TREE_CLONE 1
#endif
#ifndef MOVE_MOUNT_F_EMPTY_PATH
#define MOVE_MOUNT_F_EMPTY_PATH 0x4
#endif
#ifndef FSOPEN_CLOEXEC
#define FSOPEN_CLOEXEC 0x1
#endif
#ifndef FSPICK_CLOEXEC
#define FSPICK_CLOEXEC 0x1
#endif
#ifndef MOUNT_ATTR_RDONLY
#define MOUNT_ATTR_RDONLY 0x1
#endif
#define AB_RESOLVE_IN_ROOT 0x10

struct ab_open_how {
	unsigned long long flags, mode, resolve;
};
struct ab_mount_attr {
	unsigned long long attr_set, attr_clr, propagation, userns_fd;
};

/* ------------------------------------------------------- positive controls */

/* Record a control step: ok when ret >= 0, else an error naming errno. */
static bool step(ab_probe_run *r, const char *what, long ret)
{
	if (ret < 0) {
		ab_pr_error(r, what, "%s", fsp_ename(errno));
		return false;
	}
	ab_pr_ok(r, what, "works");
	return true;
}

/* Create path, write a line, read it back. */
static bool roundtrip(ab_probe_run *r, const char *what, const char *path)
{
	static const char msg[] = "abprobe round trip\n";
	char back[sizeof(msg)] = {0};
	_cleanup_close_ int fd =
		open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0) {
		ab_pr_error(r, what, "create: %s", fsp_ename(errno));
		return false;
	}
	if (!fsp_write_str(fd, msg) ||
	    pread(fd, back, sizeof(msg) - 1, 0) != (ssize_t)sizeof(msg) - 1 ||
	    memcmp(back, msg, sizeof(msg) - 1)) {
		ab_pr_error(r, what, "write/read back failed: %s", fsp_ename(errno));
		return false;
	}
	ab_pr_ok(r, what, "created, written, read back");
	return true;
}

/*
 * CTL-01 workspace-and-tmp-work.  Sub-attempts: in the workspace create,
 * write and read back a file, rename it, mkdir, create a file inside,
 * rename the directory, unlink, rmdir, unlink; in /tmp create, write and
 * read back a file that stays as a marker (the judge checks /tmp is
 * private).  Every step must work, else ERROR.
 */
void ab_probe_ctl01(ab_probe_run *r)
{
	const char *ws = ab_pr_lab(r)->workspace;
	char f[PMAX], f2[PMAX], d[PMAX], d2[PMAX], x[PMAX], t[PMAX];
	if (!fsp_mkname(f, sizeof(f), r, ws, "ctl01.txt") ||
	    !fsp_mkname(f2, sizeof(f2), r, ws, "ctl01.moved") ||
	    !fsp_mkname(d, sizeof(d), r, ws, "ctl01.d") ||
	    !fsp_mkname(d2, sizeof(d2), r, ws, "ctl01.d2") ||
	    !fsp_pf(x, sizeof(x), "%s/inner", d2) ||
	    !fsp_mkname(t, sizeof(t), r, "/tmp", "ctl01")) {
		ab_pr_error(r, "workspace paths", "path too long");
		return;
	}
	if (roundtrip(r, "workspace: create, write, read a file", f) &&
	    step(r, "workspace: rename a file", rename(f, f2)) &&
	    step(r, "workspace: mkdir", mkdir(d, 0700)) &&
	    step(r, "workspace: rename a directory", rename(d, d2)) &&
	    roundtrip(r, "workspace: create a file in a new directory", x) &&
	    step(r, "workspace: unlink in a directory", unlink(x)) &&
	    step(r, "workspace: rmdir", rmdir(d2)))
		step(r, "workspace: unlink", unlink(f2));
	json_t *markers = json_array();
	if (roundtrip(r, "/tmp: create, write, read a file", t))
		fsp_mark(markers, t);
	fsp_report_arr(r, "markers", markers);
}

static const char *find_git(void)
{
	static const char *const c[] = {
		"/usr/bin/git", "/usr/local/bin/git", "/bin/git"};
	for (size_t i = 0; i < AB_ARRAY_SIZE(c); i++)
		if (access(c[i], X_OK) == 0)
			return c[i];
	return NULL;
}

/* Collect a child's output (first out_n-1 bytes) until EOF or the deadline;
 * returns false on timeout. */
static bool drain(int fd, char *out, size_t out_n, double deadline)
{
	size_t got = 0;
	char sink[4096];
	for (;;) {
		int left = (int)(deadline - fsp_now_ms());
		struct pollfd p = {fd, POLLIN, 0};
		if (left <= 0 || poll(&p, 1, left) == 0)
			return false;
		char *dst = got + 1 < out_n ? out + got : sink;
		size_t room = got + 1 < out_n ? out_n - 1 - got : sizeof(sink);
		ssize_t k = read(fd, dst, room);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			break;
		if (dst != sink)
			got += (size_t)k;
	}
	out[got] = '\0';
	return true;
}

/* Run git ARGS in dir.  Returns its exit status, -1 if it could not run,
 * -2 on timeout (4 s).  out gets the start of its output. */
static int run_git(const char *git, const char *dir, const char *home, const char *const *args,
		   char *out, size_t out_n)
{
	const char *argv[24] = {"git", "-c", "user.name=agentbox probe", "-c",
				"user.email=probe@agentbox.invalid", "-c", "commit.gpgsign=false"};
	size_t n = 7;
	for (size_t i = 0; args[i] && n < AB_ARRAY_SIZE(argv) - 1; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	char hb[PMAX];
	if (!fsp_pf(hb, sizeof(hb), "HOME=%s", home))
		return -1;
	const char *envp[] = {hb, "PATH=/usr/bin:/bin", "GIT_CONFIG_NOSYSTEM=1",
			      "GIT_TERMINAL_PROMPT=0", "LC_ALL=C", NULL};
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0)
		return -1;
	pid_t pid = fork();
	if (pid == 0) {
		int nul = open("/dev/null", O_RDONLY | O_CLOEXEC);
		if (nul < 0 || dup2(nul, 0) < 0 || dup2(p[1], 1) < 0 || dup2(p[1], 2) < 0 ||
		    chdir(dir) < 0)
			_exit(126);
		execve(git, (char *const *)argv, (char *const *)envp);
		_exit(127);
	}
	close(p[1]);
	bool done = pid > 0 && drain(p[0], out, out_n, fsp_now_ms() + 4000);
	close(p[0]);
	if (pid < 0)
		return -1;
	if (!done)
		kill(pid, SIGKILL);
	int st = 0;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (!done)
		return -2;
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* One git step of CTL-04. */
static bool git_step(ab_probe_run *r, const char *git, const char *what, const char *const *args)
{
	const ab_lab_info *lab = ab_pr_lab(r);
	const char *home = getenv("HOME") ? getenv("HOME") : lab->home;
	char out[512];
	int st = run_git(git, lab->workspace, home, args, out, sizeof(out));
	if (st == 0) {
		ab_pr_ok(r, what, "exit 0");
		return true;
	}
	out[strcspn(out, "\n")] = '\0';
	if (ab_canary_scan(out, strlen(out), NULL, NULL))
		snprintf(out, sizeof(out), "(output withheld)");
	if (st == -2)
		ab_pr_error(r, what, "timed out");
	else if (st < 0)
		ab_pr_error(r, what, "could not run git: %s", fsp_ename(errno));
	else
		ab_pr_error(r, what, "exit %d: %.200s", st, out);
	return false;
}

/*
 * CTL-04 git-works.  Sub-attempts: git status, write a file, git add, git
 * commit in the workspace repository (system config off, identity via -c);
 * then .git/config must not open for appending and .git/hooks must not
 * take a new file (as intended: OK; if they do, ERROR here and PER-05
 * reports the escape).
 */
void ab_probe_ctl04(ab_probe_run *r)
{
	const char *ws = ab_pr_lab(r)->workspace;
	const char *git = find_git();
	if (!git) {
		ab_pr_error(r, "find git", "git is not installed (/usr/bin/git)");
		return;
	}
	char f[PMAX], base[128], msg[128], cfg[PMAX], hook[PMAX], hooks[PMAX];
	if (!fsp_mkname(f, sizeof(f), r, ws, "ctl04.txt") ||
	    !fsp_pf(cfg, sizeof(cfg), "%s/.git/config", ws) ||
	    !fsp_pf(hooks, sizeof(hooks), "%s/.git/hooks", ws) ||
	    !fsp_mkname(hook, sizeof(hook), r, hooks, "ctl04") ||
	    !fsp_pf(base, sizeof(base), "abprobe-%s-ctl04.txt", fsp_run_id(r)) ||
	    !fsp_pf(msg, sizeof(msg), "abprobe %s ctl04", fsp_run_id(r))) {
		ab_pr_error(r, "workspace paths", "path too long");
		return;
	}
	const char *status[] = {"status", "--porcelain", NULL};
	const char *add[] = {"add", "--", base, NULL};
	const char *commit[] = {"commit", "-q", "-m", msg, NULL};
	if (git_step(r, git, "git status", status)) {
		_cleanup_close_ int fd = open(f, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
		if (fd < 0 || !fsp_write_str(fd, "abprobe ctl04\n"))
			ab_pr_error(r, "write a file to commit", "%s", fsp_ename(errno));
		else if (git_step(r, git, "git add", add))
			git_step(r, git, "git commit", commit);
	}
	int fd = open(cfg, APPEND_FLAGS | O_NOFOLLOW);
	if (fd >= 0) {
		close(fd);
		ab_pr_error(r, ".git/config stays read-only", "it opens for writing (see PER-05)");
	} else {
		ab_pr_ok(r, ".git/config stays read-only", "%s, as intended", fsp_ename(errno));
	}
	fd = open(hook, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd >= 0) {
		close(fd);
		unlink(hook);
		ab_pr_error(r, ".git/hooks stays read-only",
			    "a file was created there (see PER-05)");
	} else {
		ab_pr_ok(r, ".git/hooks stays read-only", "%s, as intended", fsp_ename(errno));
	}
}

/*
 * CTL-06 sweep-finds-canary.  Sub-attempts: read $WORKSPACE/.env with the
 * sweep's reader and scanner (the code the SEC probes use, counting
 * instead of recording escapes), then sweep the whole workspace (without
 * .git).  At least one token must be found, else ERROR.
 */
void ab_probe_ctl06(ab_probe_run *r)
{
	const char *ws = ab_pr_lab(r)->workspace;
	_cleanup_free_ char *buf = malloc(READ_MAX);
	char env[PMAX];
	if (!buf || !fsp_pf(env, sizeof(env), "%s/.env", ws)) {
		ab_pr_error(r, "sweep", "out of memory or path too long");
		return;
	}
	struct fsp_walk w;
	fsp_walk_init(&w, fsp_scan_count, NULL, buf, 1, 2000);
	int dfd = open(ws, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0) {
		ab_pr_error(r, "open the workspace", "%s", fsp_ename(errno));
		return;
	}
	fsp_walk_file(&w, dfd, ".env", env);
	int in_env = w.tokens;
	if (w.files != 1)
		ab_pr_error(r, "read $WORKSPACE/.env", "could not read it");
	else if (!in_env)
		ab_pr_error(r, "read $WORKSPACE/.env", "read it, but the scanner found no token");
	else
		ab_pr_ok(r, "read $WORKSPACE/.env", "found %d canary token(s)", in_env);
	fsp_walk_init(&w, fsp_scan_count, NULL, buf, 4, 2000);
	w.skip_name = ".git";
	fsp_walk_dir(&w, dfd, ws, 1);
	if (w.tokens)
		ab_pr_ok(r, "sweep the workspace", "found %d canary token(s) in %d files", w.tokens,
			 w.files);
	else
		ab_pr_error(r, "sweep the workspace", "no token in %d files", w.files);
}

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
		{"/tmp", "fs01-tmp", true},      {"/var/tmp", "fs01-vartmp", true},
		{"/dev/shm", "fs01-shm", true},  {"/run", "fs01-run", true},
		{"/etc", "fs01-etc", false},     {"/usr/local/bin", "fs01-ulbin", false},
		{"/usr/local", "fs01-ulocal", false}, {"/usr/lib", "fs01-usrlib", false},
		{"/opt", "fs01-opt", false},     {"/var", "fs01-var", false},
		{"/var/lib", "fs01-varlib", false}, {"/srv", "fs01-srv", false},
		{"/mnt", "fs01-mnt", false},     {"/boot", "fs01-boot", false},
		{"/dev", "fs01-dev", false},     {"/", "fs01-root", false},
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

/* ------------------------------------------------------------------ FS-03 */

static void fs03_devices(ab_probe_run *r)
{
	/* open only, never read or ioctl; no watchdog, snapshot or vhost */
	static const char *const devs[] = {
		"/dev/mem", "/dev/kmem", "/dev/port", "/dev/sda", "/dev/sda1", "/dev/vda",
		"/dev/vda1", "/dev/xvda", "/dev/nvme0", "/dev/nvme0n1", "/dev/nvme0n1p1",
		"/dev/dm-0", "/dev/md0", "/dev/loop0", "/dev/loop-control", "/dev/mapper/control",
		"/dev/kvm", "/dev/fuse", "/dev/net/tun", "/dev/console", "/dev/tty0", "/dev/tty1",
		"/dev/kmsg", "/dev/cpu/0/msr", "/dev/input/event0", "/dev/input/mice",
		"/dev/uinput", "/dev/dri/card0", "/dev/sg0", "/dev/hidraw0"};
	char what[128];
	for (size_t i = 0; i < AB_ARRAY_SIZE(devs); i++) {
		fsp_pf(what, sizeof(what), "open %s O_RDONLY", devs[i]);
		int fd = open(devs[i], RD_FLAGS);
		int e = errno;
		if (fd >= 0)
			close(fd);
		ab_pr_sys(r, what, fd, e);
	}
	/* any other device node in /dev (names only) */
	static const char *const std_devs[] = {
		"null", "zero", "full", "random", "urandom", "tty", "ptmx", "console"};
	json_t *odd = json_array();
	DIR *dir = opendir("/dev");
	struct dirent *e;
	while (dir && (e = readdir(dir))) {
		struct stat st;
		bool known = false;
		for (size_t i = 0; i < AB_ARRAY_SIZE(std_devs); i++)
			known |= !strcmp(e->d_name, std_devs[i]);
		if (!known && fstatat(dirfd(dir), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
		    (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)))
			fsp_mark(odd, e->d_name);
	}
	if (dir)
		closedir(dir);
	fsp_report_arr(r, "dev_nodes_other", odd);
}

static void fs03_mknod(ab_probe_run *r)
{
	const char *ws = ab_pr_lab(r)->workspace;
	const char *dirs[] = {ws, "/tmp", "/dev/shm", "/dev"};
	char p[PMAX], what[PMAX + 64];
	for (size_t i = 0; i < AB_ARRAY_SIZE(dirs); i++) {
		if (!fsp_mkname(p, sizeof(p), r, dirs[i], "fs03-null"))
			continue;
		fsp_pf(what, sizeof(what), "mknod %s c 1 3", p);
		if (mknod(p, S_IFCHR | 0600, makedev(1, 3)) < 0) {
			ab_pr_sys(r, what, -1, errno);
			continue;
		}
		int fd = open(p, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
		int e = errno;
		ab_pr_escaped(r, what, "device node created (open: %s; removed again)",
			      fd >= 0 ? "works" : fsp_ename(e));
		if (fd >= 0)
			close(fd);
		unlink(p);
	}
	if (fsp_mkname(p, sizeof(p), r, ws, "fs03-blk")) {
		fsp_pf(what, sizeof(what), "mknod %s b 8 0", p);
		long k = mknod(p, S_IFBLK | 0600, makedev(8, 0));
		ab_pr_sys(r, what, k, errno);
		if (k == 0)
			unlink(p);
	}
}

/* Hard links from the workspace to files outside it and to protected files
 * (a second name would stay writable). */
static void fs03_links(ab_probe_run *r)
{
	const ab_lab_info *lab = ab_pr_lab(r);
	char src[8][PMAX], dst[PMAX], what[2 * PMAX];
	size_t n = 0;
	n += fsp_pf(src[n], PMAX, "/etc/passwd");
	n += fsp_pf(src[n], PMAX, "/etc/hostname");
	n += fsp_pf(src[n], PMAX, "%s/.bashrc", lab->home);
	n += fsp_pf(src[n], PMAX, "%s/.ssh/id_ed25519", lab->home);
	n += lab->sibling && fsp_pf(src[n], PMAX, "%s/.env", lab->sibling);
	n += fsp_pf(src[n], PMAX, "%s/.git/config", lab->workspace);
	n += fsp_pf(src[n], PMAX, "%s/.git/hooks/pre-commit.sample", lab->workspace);
	n += fsp_pf(src[n], PMAX, "%s/.git/info/attributes", lab->workspace);
	for (size_t i = 0; i < n; i++) {
		char tag[32];
		fsp_pf(tag, sizeof(tag), "fs03-hl%zu", i);
		if (!fsp_mkname(dst, sizeof(dst), r, lab->workspace, tag))
			continue;
		fsp_pf(what, sizeof(what), "hard link %s -> workspace", src[i]);
		long k = linkat(AT_FDCWD, src[i], AT_FDCWD, dst, 0);
		int e = errno;
		if (k == 0) {
			ab_pr_escaped(r, what, "second name created (removed again)");
			unlink(dst);
		} else {
			ab_pr_sys(r, what, -1, e);
		}
	}
}

/* A read-only mount made writable again: remount without MS_RDONLY, then
 * mount_setattr clearing MOUNT_ATTR_RDONLY.  Only tried on a mount that is
 * read-only here; restored if it works. */
static void fs03_remount(ab_probe_run *r, const char *t)
{
	char what[PMAX + 64];
	struct statvfs sv;
	fsp_pf(what, sizeof(what), "remount %s read-write (MS_REMOUNT|MS_BIND)", t);
	if (statvfs(t, &sv) < 0) {
		ab_pr_sys(r, what, -1, errno);
		return;
	}
	if (!(sv.f_flag & ST_RDONLY)) {
		ab_pr_ok(r, what, "not read-only here: nothing to remount (skipped)");
		return;
	}
	unsigned long keep = sv.f_flag & (ST_NOSUID | ST_NODEV | ST_NOEXEC);
	if (mount(NULL, t, NULL, MS_REMOUNT | MS_BIND | keep, NULL) == 0) {
		ab_pr_escaped(r, what, "a read-only mount became writable (restored)");
		mount(NULL, t, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | keep, NULL);
	} else {
		ab_pr_sys(r, what, -1, errno);
	}
	struct ab_mount_attr a = {.attr_clr = MOUNT_ATTR_RDONLY};
	fsp_pf(what, sizeof(what), "mount_setattr %s clear MOUNT_ATTR_RDONLY", t);
	if (syscall(__NR_mount_setattr, AT_FDCWD, t, 0, &a, sizeof(a)) == 0) {
		ab_pr_escaped(r, what, "a read-only mount became writable (restored)");
		a = (struct ab_mount_attr){.attr_set = MOUNT_ATTR_RDONLY};
		syscall(__NR_mount_setattr, AT_FDCWD, t, 0, &a, sizeof(a));
	} else {
		ab_pr_sys(r, what, -1, errno);
	}
}

/* Run fn in a grandchild (its root or namespace changes die with it). */
static void in_child(ab_probe_run *r, const char *what, int (*fn)(const char *), const char *arg)
{
	pid_t pid = fork();
	if (pid == 0)
		_exit(fn(arg) == 0 ? 0 : (errno & 0x7f) + 1);
	int st = 0;
	while (pid > 0 && waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (pid < 0 || !WIFEXITED(st))
		ab_pr_error(r, what, "could not run it in a child");
	else if (WEXITSTATUS(st) == 0)
		ab_pr_escaped(r, what, "succeeded");
	else
		ab_pr_sys(r, what, -1, WEXITSTATUS(st) - 1);
}

static int do_chroot(const char *d)
{
	return chroot(d);
}

/* The privilege behind mounting: a privileged caller gets EINVAL (the
 * target is no mount point), an unprivileged one EPERM. */
static void fs03_mounts(ab_probe_run *r, const char *d, const char *pd)
{
	static const int einval[] = {EINVAL, 0};
	const char *ws = ab_pr_lab(r)->workspace;
	FSP_REACH(r, "mount(MS_REMOUNT|MS_BIND) of a plain directory",
		  mount(NULL, d, NULL, MS_REMOUNT | MS_BIND, NULL), einval,
		  "CAP_SYS_ADMIN over the mount namespace");
	FSP_REACH(r, "umount2 of a plain directory", umount2(d, 0), einval,
		  "CAP_SYS_ADMIN over the mount namespace");
	FSP_REACH(r, "pivot_root(dir, dir) of a plain directory", syscall(SYS_pivot_root, pd, pd),
		  einval, "CAP_SYS_ADMIN over the mount namespace");
	long k = mount("abprobe", d, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=16k");
	ab_pr_sys(r, "mount a tmpfs in the workspace", k, errno);
	if (k == 0)
		umount2(d, MNT_DETACH);
	k = mount("/", d, NULL, MS_BIND, NULL);
	ab_pr_sys(r, "bind-mount / into the workspace", k, errno);
	if (k == 0)
		umount2(d, MNT_DETACH);
	in_child(r, "chroot into the workspace", do_chroot, d);
	char p[PMAX];
	fs03_remount(r, "/");
	fs03_remount(r, "/usr");
	fs03_remount(r, "/etc");
	if (fsp_pf(p, sizeof(p), "%s/.git/hooks", ws))
		fs03_remount(r, p);
	if (fsp_pf(p, sizeof(p), "%s/.git/config", ws))
		fs03_remount(r, p);
}

/* The new mount API: open_tree (clone) + move_mount, fsopen, fspick. */
static void fs03_newmount(ab_probe_run *r, const char *d)
{
	long fd = syscall(__NR_open_tree, AT_FDCWD, "/", OPEN_TREE_CLONE | O_CLOEXEC);
	ab_pr_sys(r, "open_tree(/, OPEN_TREE_CLONE)", fd, errno);
	if (fd >= 0) {
		long k =
			syscall(__NR_move_mount, (int)fd, "", AT_FDCWD, d, MOVE_MOUNT_F_EMPTY_PATH);
		ab_pr_sys(r, "move_mount the clone of / into the workspace", k, errno);
		if (k == 0)
			umount2(d, MNT_DETACH);
		close((int)fd);
	}
	fd = syscall(__NR_fsopen, "tmpfs", FSOPEN_CLOEXEC);
	ab_pr_sys(r, "fsopen(tmpfs)", fd, errno);
	if (fd >= 0)
		close((int)fd);
	fd = syscall(__NR_fspick, AT_FDCWD, "/", FSPICK_CLOEXEC);
	ab_pr_sys(r, "fspick(/)", fd, errno);
	if (fd >= 0)
		close((int)fd);
}

/* The "shocker" attack: open_by_handle_at with a real handle and with a
 * forged one for inode 2 (the root of an ext4 file system). */
static void fs03_handles(ab_probe_run *r)
{
	const char *ws = ab_pr_lab(r)->workspace;
	struct {
		struct file_handle fh;
		unsigned char bytes[MAX_HANDLE_SZ];
	} h = {.fh.handle_bytes = MAX_HANDLE_SZ},
	  forged = {.fh.handle_bytes = 8, .fh.handle_type = 1};
	int mid = 0;
	_cleanup_close_ int mfd = open(ws, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (mfd < 0) {
		ab_pr_error(r, "open the workspace", "%s", fsp_ename(errno));
		return;
	}
	if (name_to_handle_at(AT_FDCWD, ws, &h.fh, &mid, 0) < 0) {
		ab_pr_ok(r, "name_to_handle_at(workspace)", "%s (no handle to replay)",
			 fsp_ename(errno));
	} else {
		int fd = open_by_handle_at(mfd, &h.fh, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		int e = errno;
		ab_pr_sys(r, "open_by_handle_at(workspace's own handle)", fd, e);
		if (fd >= 0)
			close(fd);
	}
	uint32_t ino_gen[2] = {2, 0};
	memcpy(forged.fh.f_handle, ino_gen, sizeof(ino_gen));
	int fd = open_by_handle_at(mfd, &forged.fh, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int e = errno;
	ab_pr_sys(r, "open_by_handle_at(forged handle: inode 2 of the workspace's fs)", fd, e);
	if (fd >= 0) {
		fsp_check_dir_fd(r, "the forged handle's directory", fd);
		close(fd);
	}
}

/* A set-id attempt: failed (blocked), worked with the bit kept (escape), or
 * worked but the kernel dropped the bit (blocked, by the kernel). */
static void setid_result(ab_probe_run *r, const char *what, long k, int e, bool bit)
{
	if (k < 0)
		ab_pr_sys(r, what, -1, e);
	else if (bit)
		ab_pr_escaped(r, what, "the set-id bit is set (removed again)");
	else
		ab_pr_ok(r, what, "the call worked but the kernel dropped the bit");
}

/* Set-id bits and file capabilities on files that land on the host. */
static void fs03_setid(ab_probe_run *r)
{
	const char *ws = ab_pr_lab(r)->workspace;
	char f[PMAX], g[PMAX], dd[PMAX];
	if (!fsp_mkname(f, sizeof(f), r, ws, "fs03-suid") ||
	    !fsp_mkname(g, sizeof(g), r, ws, "fs03-plain") ||
	    !fsp_mkname(dd, sizeof(dd), r, ws, "fs03-sgid.d"))
		return;
	struct stat st;
	int fd = open(f, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 04755);
	int e = errno;
	setid_result(r, "create a set-user-ID file", fd, e,
		     fd >= 0 && fstat(fd, &st) == 0 && (st.st_mode & S_ISUID));
	if (fd >= 0) {
		close(fd);
		unlink(f);
	}
	fd = open(g, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0755);
	if (fd < 0) {
		ab_pr_error(r, "create a plain file in the workspace", "%s", fsp_ename(errno));
		return;
	}
	long k = fchmod(fd, 04755);
	e = errno;
	setid_result(r, "fchmod 4755", k, e,
		     k == 0 && fstat(fd, &st) == 0 && (st.st_mode & S_ISUID));
	k = fchmodat(AT_FDCWD, g, 02755, 0);
	e = errno;
	setid_result(r, "chmod 2755", k, e, k == 0 && stat(g, &st) == 0 && (st.st_mode & S_ISGID));
	/* v2 file capability: effective, permitted CAP_NET_RAW */
	uint32_t cap[5] = {0x02000000u | 1u, 1u << 13, 0, 0, 0};
	k = fsetxattr(fd, "security.capability", cap, sizeof(cap), 0);
	ab_pr_sys(r, "setxattr security.capability (file capabilities)", k, errno);
	close(fd);
	unlink(g);
	k = mkdir(dd, 02755);
	e = errno;
	setid_result(r, "mkdir with the set-group-ID bit", k, e,
		     k == 0 && stat(dd, &st) == 0 && (st.st_mode & S_ISGID));
	if (k == 0)
		rmdir(dd);
}

static void fs03_sys(ab_probe_run *r)
{
	static const char *const files[] = {
		"/sys/kernel/mm/transparent_hugepage/enabled", "/sys/kernel/uevent_helper",
		"/sys/kernel/profiling", "/sys/class/net/lo/mtu"};
	char what[128];
	for (size_t i = 0; i < AB_ARRAY_SIZE(files); i++) {
		fsp_pf(what, sizeof(what), "append-open %s (zero bytes)", files[i]);
		fsp_append_open(r, what, files[i], false);
	}
}

/*
 * FS-03 special-files-and-mounts.  Sub-attempts: open /dev/mem, /dev/kmem,
 * /dev/port, disks and other dangerous devices read-only (open only) and
 * list odd device nodes; mknod a char device (1,3) in the workspace, /tmp,
 * /dev/shm, /dev and a block device; hard links from the workspace to
 * /etc/passwd, the home, the sibling and protected .git files;
 * remount/umount2/pivot_root of a plain directory (EINVAL = privileged), a
 * tmpfs and a bind of / into the workspace, chroot (in a child); remount
 * read-only mounts read-write (/, /usr, /etc, .git/hooks, .git/config) and
 * mount_setattr; open_tree+move_mount, fsopen, fspick; open_by_handle_at
 * with a real and a forged handle (shocker); set-id bits and file
 * capabilities; zero-byte writes to /sys.
 */
void ab_probe_fs03(ab_probe_run *r)
{
	char d[PMAX], pd[PMAX];
	const char *ws = ab_pr_lab(r)->workspace;
	if (!fsp_mkname(d, sizeof(d), r, ws, "fs03.d") ||
	    !fsp_mkname(pd, sizeof(pd), r, ws, "fs03.p")) {
		ab_pr_error(r, "workspace paths", "path too long");
		return;
	}
	if (mkdir(d, 0700) < 0 || mkdir(pd, 0700) < 0) {
		ab_pr_error(r, "mkdir scratch directories in the workspace", "%s",
			    fsp_ename(errno));
		rmdir(d);
		return;
	}
	fs03_devices(r);
	fs03_mknod(r);
	fs03_links(r);
	fs03_mounts(r, d, pd);
	fs03_newmount(r, d);
	fs03_handles(r);
	fs03_setid(r);
	fs03_sys(r);
	if (rmdir(d) < 0)
		ab_pr_error(r, "remove the scratch directory", "%s (still mounted?)",
			    fsp_ename(errno));
	rmdir(pd);
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
