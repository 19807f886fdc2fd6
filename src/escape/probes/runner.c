/* SPDX-License-Identifier: MIT */
/*
 * `agentbox __probe LAB.json RESULTS`: the inside half of test-escape.  Runs
 * in the sandbox, as the sandboxed command.  Each probe runs in its own
 * forked child (so a probe that crashes, hangs or is killed by seccomp costs
 * only its own result) with AB_PROBE_TIMEOUT_MS; the child sends its result
 * as one JSON object over a pipe and the runner appends it, one line per
 * probe, to RESULTS.  The probe API (ab_pr_*) lives here too.
 *
 * The runner never judges alone: the harness parses RESULTS strictly
 * (ab_esc_result_parse re-derives every verdict from the attempts) and adds
 * what it sees from outside.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agentbox/escape.h"

struct ab_probe_run {
	const ab_lab_info *lab;
	const ab_probe_def *def;
	json_t *attempts; /* array */
	json_t *found;    /* array of hashes */
	json_t *report;   /* object */
	size_t dropped;
};

const ab_lab_info *ab_pr_lab(const ab_probe_run *r)
{
	return r->lab;
}

static const struct {
	int e;
	const char *name, *layer;
} errtab[] = {
	{ENOENT, "ENOENT", "mount-ns"},
	{EROFS, "EROFS", "read-only mount"},
	{EACCES, "EACCES", "landlock"},
	{EPERM, "EPERM", "seccomp"},
	{ENOSYS, "ENOSYS", "seccomp"},
	{ENETUNREACH, "ENETUNREACH", "netns"},
	{ECONNREFUSED, "ECONNREFUSED", "netns"},
	{EHOSTUNREACH, "EHOSTUNREACH", "netns"},
	{EXDEV, "EXDEV", "mount-ns"},
	{ESRCH, "ESRCH", "pid-ns"},
	{ENXIO, "ENXIO", "mount-ns"},
	{EBADF, "EBADF", NULL},
	{EFAULT, "EFAULT", NULL},
	{EINVAL, "EINVAL", NULL},
	{ENOTTY, "ENOTTY", NULL},
	{EIO, "EIO", NULL},
	{ELOOP, "ELOOP", "openat"},
	{ENOTDIR, "ENOTDIR", NULL},
	{EEXIST, "EEXIST", NULL},
	{ETIMEDOUT, "ETIMEDOUT", NULL},
	{EAFNOSUPPORT, "EAFNOSUPPORT", "seccomp"},
	{EADDRNOTAVAIL, "EADDRNOTAVAIL", "netns"},
	{ENOTCONN, "ENOTCONN", NULL},
	{EOPNOTSUPP, "EOPNOTSUPP", NULL},
	{ENOKEY, "ENOKEY", "keyring"},
	{EISDIR, "EISDIR", NULL},
	{ENODEV, "ENODEV", NULL},
	{ETXTBSY, "ETXTBSY", NULL},
	{EBUSY, "EBUSY", NULL},
	{ENOTEMPTY, "ENOTEMPTY", NULL},
	{EMFILE, "EMFILE", NULL},
	{ECONNRESET, "ECONNRESET", NULL},
	{EPROTONOSUPPORT, "EPROTONOSUPPORT", "seccomp"},
};

static void errno_info(int e, char *buf, size_t n, const char **layer)
{
	*layer = NULL;
	for (size_t i = 0; i < sizeof(errtab) / sizeof(errtab[0]); i++)
		if (errtab[i].e == e) {
			snprintf(buf, n, "%s", errtab[i].name);
			*layer = errtab[i].layer;
			return;
		}
	snprintf(buf, n, "errno %d", e);
}

static void add(ab_probe_run *r, const char *what, enum ab_esc_verdict v, const char *result,
		const char *layer)
{
	if (json_array_size(r->attempts) >= AB_ESC_MAX_ATTEMPTS) {
		r->dropped++;
		/* never lose an escape: replace the last kept OK attempt's slot */
		if (v != AB_ESC_ESCAPED)
			return;
		json_array_remove(r->attempts, json_array_size(r->attempts) - 1);
	}
	json_t *a = json_object();
	json_object_set_new(a, "what", json_string(what ? what : "?"));
	json_object_set_new(a, "verdict", json_string(ab_esc_verdict_name(v)));
	if (result)
		json_object_set_new(a, "result", json_string(result));
	if (layer)
		json_object_set_new(a, "layer", json_string(layer));
	json_array_append_new(r->attempts, a);
}

void ab_pr_layer(ab_probe_run *r, const char *layer)
{
	size_t n = json_array_size(r->attempts);
	if (n && layer)
		json_object_set_new(json_array_get(r->attempts, n - 1), "layer",
				    json_string(layer));
}

void ab_pr_sys_expect(ab_probe_run *r, const char *what, long ret, int err, const int *ok_errs)
{
	char buf[64];
	const char *layer;
	if (ret >= 0) {
		snprintf(buf, sizeof(buf), "succeeded (%ld)", ret);
		add(r, what, AB_ESC_ESCAPED, buf, NULL);
		return;
	}
	errno_info(err, buf, sizeof(buf), &layer);
	bool ok = !ok_errs;
	for (const int *e = ok_errs; e && *e; e++)
		ok |= *e == err;
	add(r, what, ok ? AB_ESC_OK : AB_ESC_ERROR, buf, ok ? layer : NULL);
}

void ab_pr_sys(ab_probe_run *r, const char *what, long ret, int err)
{
	ab_pr_sys_expect(r, what, ret, err, NULL);
}

#define VA_ADD(r, what, v, fmt)                      \
	do {                                         \
		char b_[512];                        \
		va_list ap_;                         \
		va_start(ap_, fmt);                  \
		vsnprintf(b_, sizeof(b_), fmt, ap_); \
		va_end(ap_);                         \
		add(r, what, v, b_, NULL);           \
	} while (0)

void ab_pr_ok(ab_probe_run *r, const char *what, const char *fmt, ...)
{
	VA_ADD(r, what, AB_ESC_OK, fmt);
}

void ab_pr_escaped(ab_probe_run *r, const char *what, const char *fmt, ...)
{
	VA_ADD(r, what, AB_ESC_ESCAPED, fmt);
}

void ab_pr_error(ab_probe_run *r, const char *what, const char *fmt, ...)
{
	VA_ADD(r, what, AB_ESC_ERROR, fmt);
}

struct scan_ctx {
	ab_probe_run *r;
	const char *what;
};

static void on_token(const char *hash, void *p)
{
	struct scan_ctx *c = p;
	char buf[96];
	snprintf(buf, sizeof(buf), "canary read (sha256 %s)", hash);
	add(c->r, c->what, AB_ESC_ESCAPED, buf, NULL);
	if (json_array_size(c->r->found) < AB_ESC_MAX_FOUND)
		json_array_append_new(c->r->found, json_string(hash));
}

int ab_pr_scan(ab_probe_run *r, const char *what, const void *buf, size_t n)
{
	struct scan_ctx c = {r, what};
	return ab_canary_scan(buf, n, on_token, &c);
}

#define READ_MAX (1u << 20)

void ab_pr_read_file(ab_probe_run *r, const char *path, bool follow, bool escape_on_open)
{
	char what[600];
	snprintf(what, sizeof(what), "read %s", path);
	int fd = open(path,
		      O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK | (follow ? 0 : O_NOFOLLOW));
	if (fd < 0) {
		ab_pr_sys(r, what, -1, errno);
		return;
	}
	struct stat st;
	if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
		close(fd);
		if (escape_on_open)
			ab_pr_escaped(r, what, "directory opened");
		else
			ab_pr_ok(r, what, "directory visible, nothing read");
		return;
	}
	char *buf = malloc(READ_MAX);
	size_t got = 0;
	while (buf && got < READ_MAX) {
		ssize_t k = read(fd, buf + got, READ_MAX - got);
		if (k <= 0)
			break;
		got += (size_t)k;
	}
	close(fd);
	int found = buf ? ab_pr_scan(r, what, buf, got) : 0;
	free(buf);
	if (found)
		return;
	if (escape_on_open)
		ab_pr_escaped(r, what, "opened, read %zu bytes", got);
	else
		ab_pr_ok(r, what, "readable, %zu bytes, no secret", got);
}

void ab_pr_report(ab_probe_run *r, const char *key, json_t *v)
{
	json_object_set_new(r->report, key, v);
}

/* ---- the runner ---- */

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* In the probe's child: run it, send {attempts, found, report, dropped}. */
static _Noreturn void probe_child(const ab_probe_def *d, const ab_lab_info *lab, int wfd)
{
	ab_probe_run r = {lab, d, json_array(), json_array(), json_object(), 0};
	d->fn(&r);
	json_t *o = json_object();
	json_object_set_new(o, "attempts", r.attempts);
	json_object_set_new(o, "found", r.found);
	json_object_set_new(o, "report", r.report);
	json_object_set_new(o, "dropped", json_integer((json_int_t)r.dropped));
	char *s = json_dumps(o, JSON_COMPACT);
	if (s)
		(void)ab_write_all(wfd, s, strlen(s));
	_exit(0);
}

#define CHILD_MAX (8u << 20)

/* Read the child's result from fd into buf (CHILD_MAX bytes) until end of
 * file or the probe's time, counted from t0, runs out; true on timeout. */
static bool read_child(int fd, double t0, char *buf, size_t *got)
{
	for (;;) {
		int left = (int)(AB_PROBE_TIMEOUT_MS - (now_ms() - t0));
		struct pollfd pf = {fd, POLLIN, 0};
		if (left <= 0 || poll(&pf, 1, left) == 0)
			return true;
		ssize_t k = read(fd, buf + *got, CHILD_MAX - 1 - *got);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0 || (*got += (size_t)k) >= CHILD_MAX - 1)
			return false;
	}
}

/* Why the child's result cannot be used (NULL: it can); nb holds a built one. */
static const char *child_failed(pid_t pid, bool timeout, int st, const json_t *body, char *nb,
				size_t n)
{
	if (pid < 0)
		return "fork failed";
	if (timeout)
		return "timed out";
	if (WIFSIGNALED(st)) {
		snprintf(nb, n, "probe killed by signal %d (%s)", WTERMSIG(st),
			 strsignal(WTERMSIG(st)));
		return nb;
	}
	if (!json_is_object(body))
		return "probe sent no result";
	return NULL;
}

/* Run one probe; returns its result line as a JSON object. */
static json_t *run_one(const ab_probe_def *d, const ab_lab_info *lab)
{
	json_t *res = json_object();
	json_object_set_new(res, "id", json_string(d->id));
	int p[2];
	double t0 = now_ms();
	if (pipe2(p, O_CLOEXEC) < 0) {
		json_object_set_new(res, "verdict", json_string("error"));
		json_object_set_new(res, "note", json_sprintf("pipe: %s", strerror(errno)));
		return res;
	}
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		close(p[0]);
		probe_child(d, lab, p[1]);
	}
	close(p[1]);
	char *buf = malloc(CHILD_MAX);
	size_t got = 0;
	bool timeout = pid > 0 && buf && read_child(p[0], t0, buf, &got);
	close(p[0]);
	int st = 0;
	if (pid > 0) {
		if (timeout)
			kill(pid, SIGKILL);
		while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
			;
	}
	json_object_set_new(res, "ms", json_real(now_ms() - t0));
	json_t *body = buf && !timeout ? json_loadb(buf, got, 0, NULL) : NULL;
	free(buf);
	char nb[128];
	const char *note = child_failed(pid, timeout, st, body, nb, sizeof(nb));
	if (note) {
		json_decref(body);
		json_object_set_new(res, "verdict", json_string("error"));
		json_object_set_new(res, "note", json_string(note));
		return res;
	}
	json_object_update(res, body);
	json_decref(body);
	/* the harness refuses lines over 1 MiB: a huge report goes, never an attempt */
	char *probe_line = json_dumps(res, JSON_COMPACT);
	if (probe_line && strlen(probe_line) > (512u << 10))
		json_object_set_new(res, "report", json_object());
	free(probe_line);
	/* a provisional verdict; the harness re-derives it from the attempts */
	json_object_set_new(res, "verdict", json_string("ok"));
	return res;
}

static bool selected(const ab_lab_info *lab, const ab_probe_def *d)
{
	if (!lab->only.n)
		return true;
	for (size_t i = 0; i < lab->only.n; i++)
		if (strcasecmp(lab->only.v[i], d->id) == 0)
			return true;
	return false;
}

int ab_escape_inside(int argc, char **argv)
{
	if (argc != 3) {
		fputs("usage: agentbox __probe LAB.json RESULTS (used by agentbox test-escape)\n",
		      stderr);
		return 2;
	}
	ab_lab_info lab;
	ab_err err = {0};
	if (ab_lab_info_load(argv[1], &lab, &err) < 0) {
		ab_err_print(&err);
		return 2;
	}
	int out = open(argv[2], O_WRONLY | O_CREAT | O_APPEND | O_TRUNC | O_CLOEXEC, 0644);
	if (out < 0) {
		fprintf(stderr, "agentbox __probe: %s: %s\n", argv[2], strerror(errno));
		ab_lab_info_free(&lab);
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	bool stopped = false;
	for (size_t i = 0; i < ab_nprobes; i++) {
		const ab_probe_def *d = &ab_probes[i];
		if (!selected(&lab, d) && !d->gate && !d->control)
			continue;
		json_t *res;
		if (stopped) {
			res = json_pack("{s:s,s:s,s:s}", "id", d->id, "verdict", "skip", "note",
					"not run: the sandbox is not in effect (PRC-01)");
		} else {
			res = run_one(d, &lab);
			json_t *sb = json_object_get(json_object_get(res, "report"), "sandboxed");
			if (d->gate && json_is_false(sb))
				stopped = true;
		}
		char *s = json_dumps(res, JSON_COMPACT);
		json_decref(res);
		if (s) {
			(void)ab_write_all(out, s, strlen(s));
			(void)ab_write_all(out, "\n", 1);
			free(s);
		}
	}
	close(out);
	ab_lab_info_free(&lab);
	return 0;
}
