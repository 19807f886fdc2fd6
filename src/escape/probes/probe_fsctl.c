/* SPDX-License-Identifier: MIT */
/*
 * test-escape's positive controls for files: CTL-01 (the workspace and
 * /tmp work), CTL-04 (git works in the workspace repository) and CTL-06
 * (the secret sweep the SEC probes use finds the workspace's canary).  A
 * control proves the sandbox still lets work be done, and that the probes
 * can see what they look for: every step must work, else the control is an
 * ERROR.  Runs inside the sandbox, in each probe's own forked child of
 * `agentbox __probe` (runner.c), as the sandboxed user.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "probe_fsutil.h"

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
	static const char *const c[] = {"/usr/bin/git", "/usr/local/bin/git", "/bin/git"};
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
	const char *argv[24] = {"git",
				"-c",
				"user.name=agentbox probe",
				"-c",
				"user.email=probe@agentbox.invalid",
				"-c",
				"commit.gpgsign=false"};
	size_t n = 7;
	for (size_t i = 0; args[i] && n < AB_ARRAY_SIZE(argv) - 1; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	char hb[PMAX];
	if (!fsp_pf(hb, sizeof(hb), "HOME=%s", home))
		return -1;
	const char *envp[] = {hb,
			      "PATH=/usr/bin:/bin",
			      "GIT_CONFIG_NOSYSTEM=1",
			      "GIT_TERMINAL_PROMPT=0",
			      "LC_ALL=C",
			      NULL};
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
