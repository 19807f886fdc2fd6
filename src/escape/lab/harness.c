/* SPDX-License-Identifier: MIT */
/*
 * `agentbox test-escape` (harness process): list, or build the lab, run
 * `agentbox run -p PROFILE... -p LAB -w WS -- WS/.agentbox-escape/agentbox
 * __probe LAB.json RESULTS` on a pty inside it, judge, print, exit 0-4.
 * Also `agentbox __canary`, the lab's canary process.
 */
#include <errno.h>
#include <fcntl.h>
#include <pty.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "lab.h"

#define RUN_TIMEOUT_S 300 /* the whole battery; each probe has its own 15 s */

int ab_escape_canary(void)
{
	sigset_t none;
	sigemptyset(&none);
	for (;;)
		sigsuspend(&none);
}

static void list_probes(void)
{
	for (size_t i = 0; i < ab_nprobes; i++)
		printf("%-7s %-4s %-28s %s%s\n", ab_probes[i].id, ab_esc_cat_name(ab_probes[i].cat),
		       ab_probes[i].name, ab_probes[i].control ? "[control] " : "",
		       ab_probes[i].summary);
}

static bool wanted(const char *only, const ab_probe_def *d)
{
	if (!only || d->control || d->gate)
		return true;
	size_t n = strlen(d->id);
	for (const char *p = only; (p = strcasestr(p, d->id)); p += n)
		if ((p == only || p[-1] == ',') && (p[n] == ',' || p[n] == '\0'))
			return true;
	return false;
}

static int check_only(const char *only)
{
	if (!only)
		return 0;
	_cleanup_free_ char *dup = strdup(only);
	char *save = NULL;
	for (char *t = dup ? strtok_r(dup, ",", &save) : NULL; t; t = strtok_r(NULL, ",", &save))
		if (!ab_probe_find(t)) {
			fprintf(stderr,
				"agentbox: test-escape: --only: no probe '%s' (see --list)\n", t);
			return -1;
		}
	return 0;
}

static int copy_self(const char *dst, ab_err *err)
{
	_cleanup_close_ int in = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
	_cleanup_close_ int out = open(dst, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0755);
	if (in < 0 || out < 0)
		return ab_fail(err, errno, "lab: copy agentbox to %s", dst);
	char buf[65536];
	ssize_t n;
	while ((n = read(in, buf, sizeof(buf))) > 0)
		if (write(out, buf, (size_t)n) != n)
			return ab_fail(err, errno, "lab: copy agentbox");
	return n < 0 ? ab_fail(err, errno, "lab: copy agentbox") : 0;
}

/* fds 3, 4, 5 handed to agentbox: a directory fd on HOME, the canary key,
 * a connected socket (the judge listens on its peer) */
static int make_extra_fds(lab *L, ab_err *err)
{
	char key[PATH_MAX + 32];
	snprintf(key, sizeof(key), "%s/.ssh/id_ed25519", L->home);
	int sp[2];
	L->extra_fd[0] = open(L->home, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	L->extra_fd[1] = open(key, O_RDONLY | O_CLOEXEC);
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) < 0)
		return ab_fail(err, errno, "lab: socketpair");
	L->extra_fd[2] = sp[0];
	L->extra_peer = sp[1];
	if (L->extra_fd[0] < 0 || L->extra_fd[1] < 0)
		return ab_fail(err, errno, "lab: extra fds");
	return 0;
}

typedef struct argbuf {
	char *argv[64];
	char *envp[32];
	char store[16][PATH_MAX + 64];
	int ns;
} argbuf;

/* x + y + z, kept in b (NULL parts are empty) */
static char *cat3(argbuf *b, const char *x, const char *y, const char *z)
{
	if (b->ns >= 16)
		return NULL;
	char *s = b->store[b->ns++];
	snprintf(s, sizeof(b->store[0]), "%s%s%s", x, y ? y : "", z ? z : "");
	return s;
}

static void build_exec(lab *L, const ab_test_escape_args *a, const char *exe, argbuf *b)
{
	int n = 0;
	b->argv[n++] = (char *)exe;
	b->argv[n++] = "run";
	for (size_t i = 0; i < a->profiles.n && n < 50; i++) {
		b->argv[n++] = "-p";
		b->argv[n++] = a->profiles.v[i];
	}
	b->argv[n++] = "-p";
	b->argv[n++] = L->profile;
	b->argv[n++] = "-w";
	b->argv[n++] = L->ws;
	b->argv[n++] = "--";
	b->argv[n++] = cat3(b, "", L->esc_dir, "/agentbox");
	b->argv[n++] = "__probe";
	b->argv[n++] = cat3(b, "", L->esc_dir, "/lab.json");
	b->argv[n++] = cat3(b, "", L->esc_dir, "/results.jsonl");
	b->argv[n] = NULL;
	const lab_canary *envc = NULL;
	for (size_t i = 0; i < L->ncan; i++)
		if (strcmp(L->can[i].kind, "ENV") == 0)
			envc = &L->can[i];
	int e = 0;
	b->envp[e++] = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
	b->envp[e++] = cat3(b, "HOME=", L->home, NULL);
	b->envp[e++] = "TERM=xterm-256color";
	b->envp[e++] = "LANG=C.UTF-8";
	b->envp[e++] = cat3(b, "XDG_RUNTIME_DIR=", L->runtime, NULL);
	b->envp[e++] = cat3(b, "SSH_AUTH_SOCK=", L->runtime, "/ssh-agent.sock");
	b->envp[e++] = cat3(b, "DBUS_SESSION_BUS_ADDRESS=unix:path=", L->runtime, "/bus");
	b->envp[e++] = cat3(b, "GPG_AGENT_INFO=", L->runtime, "/gnupg/S.gpg-agent:0:1");
	b->envp[e++] = "DISPLAY=:0";
	b->envp[e++] = "WAYLAND_DISPLAY=wayland-0";
	b->envp[e++] = cat3(b, "AGENTBOX_LAB_CANARY=", envc ? envc->token : "", NULL);
	b->envp[e++] = cat3(b, LAB_SECRET_ENV "=", L->secret, NULL);
	for (size_t i = 0; i < L->nextra_env && e < 28; i++)
		b->envp[e++] = L->extra_env[i];
	const char *abl = getenv("AGENTBOX_TEST_ABLATE");
	if (abl)
		b->envp[e++] = cat3(b, "AGENTBOX_TEST_ABLATE=", abl, NULL);
	b->envp[e] = NULL;
}

/* Run agentbox on the outer pty; returns its exit status, -1 on timeout. */
static int run_agentbox(lab *L, const argbuf *b, ab_err *err)
{
	struct winsize ws = {.ws_row = 24, .ws_col = 80};
	if (openpty(&L->pty_master, &L->pty_slave, NULL, NULL, &ws) < 0)
		return ab_fail(err, errno, "lab: openpty");
	fcntl(L->pty_master, F_SETFD, FD_CLOEXEC);
	fcntl(L->pty_slave, F_SETFD, FD_CLOEXEC);
	/* the extra fds above the numbers they are moved to */
	int hi[3];
	for (int i = 0; i < 3; i++)
		hi[i] = fcntl(L->extra_fd[i], F_DUPFD_CLOEXEC, 100);
	pid_t pid = fork();
	if (pid < 0)
		return ab_fail(err, errno, "lab: fork");
	if (pid == 0) {
		setsid();
		ioctl(L->pty_slave, TIOCSCTTY, 0);
		dup2(L->pty_slave, 0);
		dup2(L->pty_slave, 1);
		dup2(L->pty_slave, 2);
		for (int i = 0; i < 3; i++)
			dup2(hi[i], 3 + i); /* dup2 clears FD_CLOEXEC: inherited on purpose */
		if (chdir(L->ws) < 0)
			_exit(125);
		syscall(SYS_close_range, 6, ~0U, 0);
		execve(b->argv[0], b->argv, b->envp);
		_exit(127);
	}
	for (int i = 0; i < 3; i++)
		close(hi[i]);
	int st = 0;
	for (int i = 0; i < RUN_TIMEOUT_S * 10; i++) {
		pid_t w = waitpid(pid, &st, WNOHANG);
		if (w == pid)
			return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
		struct timespec ts = {0, 100 * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	return -1;
}

/* RESULTS -> rs, in registry order; a probe that should have run and has
 * no line is an ERROR. */
static void collect(lab *L, const ab_test_escape_args *a, int status, ab_esc_results *rs)
{
	char path[PATH_MAX + 32];
	snprintf(path, sizeof(path), "%s/results.jsonl", L->esc_dir);
	FILE *f = fopen(path, "re");
	ab_esc_result *parsed = calloc(ab_nprobes, sizeof(*parsed));
	bool *have = calloc(ab_nprobes, sizeof(*have));
	char *line = NULL;
	size_t cap = 0;
	while (f && parsed && have && getline(&line, &cap, f) > 0) {
		ab_esc_result r = {0};
		ab_err e = {0};
		if (ab_esc_result_parse(line, ab_probes, ab_nprobes, &r, &e) < 0)
			continue;
		size_t k = (size_t)(r.def - ab_probes);
		if (have[k])
			ab_esc_result_free(&parsed[k]);
		parsed[k] = r;
		have[k] = true;
	}
	free(line);
	if (f)
		fclose(f);
	rs->v = calloc(ab_nprobes, sizeof(*rs->v));
	for (size_t k = 0; rs->v && parsed && have && k < ab_nprobes; k++) {
		if (have[k]) {
			rs->v[rs->n++] = parsed[k];
			continue;
		}
		if (!wanted(a->only, &ab_probes[k]))
			continue;
		ab_esc_result *r = &rs->v[rs->n++];
		*r = (ab_esc_result){.def = &ab_probes[k], .verdict = AB_ESC_ERROR};
		char note[128];
		snprintf(note, sizeof(note), "no result (agentbox run exited with status %d)",
			 status);
		r->note = strdup(note);
	}
	free(parsed);
	free(have);
	ab_esc_result *g = NULL;
	for (size_t i = 0; i < rs->n; i++)
		if (rs->v[i].def->gate)
			g = &rs->v[i];
	if (g && json_is_false(json_object_get(g->report, "sandboxed")))
		rs->not_in_effect = true;
}

/* The end of what agentbox printed, on one line ("a; b"). */
static void tail_output(const lab *L, char *out, size_t n)
{
	const char *s = L->pty_out ? L->pty_out : "";
	size_t len = strlen(s);
	const char *t = len > 600 ? s + len - 600 : s;
	size_t w = 0;
	for (; *t && w + 3 < n; t++) {
		if (*t == '\r')
			continue;
		if (*t == '\n') {
			if (w && t[1])
				out[w++] = ';', out[w++] = ' ';
			continue;
		}
		out[w++] = (unsigned char)*t < 0x20 ? ' ' : *t;
	}
	out[w] = '\0';
}

static int build_and_run(lab *L, const ab_test_escape_args *a, ab_esc_results *rs, ab_err *err)
{
	if (lab_enter(L, err) < 0 || lab_build_fs(L, &a->keep, err) < 0 ||
	    lab_build_net(L, err) < 0 || lab_plant(L, err) < 0)
		return ab_err_ret(err);
	/* the canary process before any thread */
	if (lab_start_canary_process(L, err) < 0 || make_extra_fds(L, err) < 0)
		return ab_err_ret(err);
	char exe[PATH_MAX + 32];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0)
		return ab_fail(err, errno, "lab: /proc/self/exe");
	exe[n] = '\0';
	char dst[PATH_MAX + 32];
	snprintf(dst, sizeof(dst), "%s/agentbox", L->esc_dir);
	if (copy_self(dst, err) < 0)
		return ab_err_ret(err);
	/* servers first: they make the CA file and the agent sockets that the
	 * profile and LAB.json name */
	if (lab_servers_start(L, err) < 0)
		return ab_err_ret(err);
	L->clipboard_ok = a->clipboard;
	if (lab_write_profile(L, a->secrets, err) < 0 || lab_write_info(L, a->only, err) < 0)
		return ab_err_ret(err);
	static argbuf b;
	build_exec(L, a, exe, &b);
	int st = run_agentbox(L, &b, err);
	if (st < -1)
		return st;
	/* let the judge's threads take what is still queued, then stop them */
	struct timespec ts = {0, 300 * 1000 * 1000};
	nanosleep(&ts, NULL);
	lab_servers_stop(L);
	collect(L, a, st, rs);
	bool any = false;
	for (size_t i = 0; i < rs->n; i++)
		any |= rs->v[i].nattempts > 0;
	if (!any) {
		char tail[700], msg[1024];
		tail_output(L, tail, sizeof(tail));
		snprintf(msg, sizeof(msg), "agentbox run %s (status %d); it said: %s",
			 st < 0 ? "timed out" : "produced no results", st, tail);
		rs->lab_error = strdup(msg);
		return 0;
	}
	lab_judge(L, rs);
	if (L->canary_pid > 0)
		kill(L->canary_pid, SIGKILL);
	return 0;
}

int ab_test_escape(const ab_test_escape_args *a)
{
	if (a->list) {
		list_probes();
		return 0;
	}
	enum ab_esc_format fmt = AB_ESC_TAP;
	if (a->format && ab_esc_format_parse(a->format, &fmt) < 0) {
		fprintf(stderr, "agentbox: test-escape: --format: '%s' is not tap, junit or json\n",
			a->format);
		return AB_EXIT_FAIL;
	}
	if (check_only(a->only) < 0)
		return AB_EXIT_FAIL;
	FILE *out = stdout;
	if (a->out_path && !(out = fopen(a->out_path, "we"))) {
		fprintf(stderr, "agentbox: test-escape: %s: %s\n", a->out_path, strerror(errno));
		return AB_EXIT_FAIL;
	}
	static lab L;
	memset(&L, 0, sizeof(L));
	L.pty_master = L.pty_slave = L.extra_peer = -1;
	L.dns_fd[0] = L.dns_fd[1] = -1;
	ab_esc_results rs = {0};
	rs.profile = strdup(a->display ? a->display : "default");
	ab_err err = {0};
	/* this process enters the lab: its namespaces and mounts end with it */
	if (build_and_run(&L, a, &rs, &err) < 0) {
		char msg[2200];
		snprintf(msg, sizeof(msg), "%s%s%s", err.msg, err.hint[0] ? "\nHint: " : "",
			 err.hint);
		rs.lab_error = strdup(msg);
	}
	/* a part of the lab that could not be built judges less: say so */
	if (L.note[0])
		fprintf(stderr, "agentbox: test-escape: warning: the lab judges less here: %s\n",
			L.note);
	if (L.canary_pid > 0) {
		kill(L.canary_pid, SIGKILL);
		waitpid(L.canary_pid, NULL, 0);
	}
	ab_err werr = {0};
	if (ab_esc_write(&rs, fmt, out, &werr) < 0)
		ab_err_print(&werr);
	if (out != stdout)
		fclose(out);
	else
		fflush(stdout);
	if (!a->quiet && (isatty(2) || rs.lab_error))
		ab_esc_write_summary(&rs, stderr);
	if (rs.lab_error && !isatty(2) && a->quiet)
		fprintf(stderr, "agentbox: test-escape: lab setup failed: %s\n", rs.lab_error);
	int code = ab_esc_exit_status(&rs);
	ab_esc_results_free(&rs);
	lab_free(&L);
	return code;
}
