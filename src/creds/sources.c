/* SPDX-License-Identifier: MIT */
/*
 * Where a secret's value comes from (parent: the broker, before the sandbox
 * starts): agentbox's environment, a file, a command's output (posix_spawnp
 * with a deadline) or a string in a JSON file.  The one part of credential
 * brokering that does I/O, kept apart from the pure code of secrets.c; a
 * value read here is checked by the same rules as ab_secret_set_value.
 * Every buffer that held a value is wiped before it is freed.  Rules in
 * include/agentbox/secrets.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agentbox/credfile.h"
#include "agentbox/secrets.h"
#include "secrets_int.h"

extern char **environ;

static int finish_loaded(const char *name, const char *what, char *buf, size_t len, char **value,
			 size_t *vlen, ab_err *err)
{
	const char *why = sec_value_problem(buf, len);

	if (why) {
		int code = len == 0 ? ENODATA : len > AB_SECRET_VALUE_MAX ? EFBIG : EINVAL;
		ab_secrets_wipe_free(buf, len);
		return ab_fail_code(err, AB_EXIT_FAIL, code, "secret %s: the value from %s %s",
				    name, what, why);
	}
	buf[len] = '\0';
	*value = buf;
	*vlen = len;
	return 0;
}

static int load_env(const char *name, const char *var, char **value, size_t *len, ab_err *err)
{
	const char *v = var ? getenv(var) : NULL;
	char what[160];
	char *copy;
	size_t n;

	if (!var || !*var)
		return ab_fail_code(err, AB_EXIT_FAIL, EINVAL,
				    "secret %s: no environment variable named", name);
	if (!v)
		return ab_fail_code(err, AB_EXIT_FAIL, ENOENT,
				    "secret %s: environment variable %.80s is not set", name, var);
	n = strlen(v);
	copy = malloc(n + 1);
	if (!copy)
		return ab_fail(err, ENOMEM, "secret %s", name);
	memcpy(copy, v, n + 1);
	snprintf(what, sizeof(what), "environment variable %.80s", var);
	return finish_loaded(name, what, copy, n, value, len, err);
}

static int load_file(const char *name, const char *path, char **value, size_t *len, ab_err *err)
{
	_cleanup_close_ int fd = -1;
	char what[4200];
	size_t n = 0;
	char *buf;

	if (!path || !*path)
		return ab_fail_code(err, AB_EXIT_FAIL, EINVAL, "secret %s: no file named", name);
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return ab_fail(err, errno, "secret %s: cannot open %s", name, path);
	buf = malloc(AB_SECRET_FILE_MAX + 2);
	if (!buf)
		return ab_fail(err, ENOMEM, "secret %s", name);
	ssize_t got = ab_read_full(fd, buf, AB_SECRET_FILE_MAX + 1);
	if (got < 0) {
		ab_secrets_wipe_free(buf, AB_SECRET_FILE_MAX + 2);
		return ab_fail(err, (int)-got, "secret %s: cannot read %s", name, path);
	}
	n = (size_t)got;
	if (n > AB_SECRET_FILE_MAX) {
		ab_secrets_wipe_free(buf, AB_SECRET_FILE_MAX + 2);
		return ab_fail_code(err, AB_EXIT_FAIL, EFBIG,
				    "secret %s: %s is larger than %d bytes", name, path,
				    AB_SECRET_FILE_MAX);
	}
	if (n && buf[n - 1] == '\n') {
		n--;
		if (n && buf[n - 1] == '\r')
			n--;
	}
	explicit_bzero(buf + n, AB_SECRET_FILE_MAX + 2 - n);
	snprintf(what, sizeof(what), "file %s", path);
	return finish_loaded(name, what, buf, n, value, len, err);
}

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int spawn_cmd(char *const *argv, int out_fd, pid_t *pid)
{
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t at;
	sigset_t none, dfl;
	static const int dfl_sigs[] = {SIGPIPE, SIGINT,  SIGQUIT, SIGTERM, SIGHUP,  SIGCHLD,
				       SIGTSTP, SIGTTIN, SIGTTOU, SIGUSR1, SIGUSR2, SIGALRM};
	int r;

	sigemptyset(&none);
	sigemptyset(&dfl);
	for (size_t i = 0; i < AB_ARRAY_SIZE(dfl_sigs); i++)
		sigaddset(&dfl, dfl_sigs[i]);
	if ((r = posix_spawn_file_actions_init(&fa)) != 0)
		return r;
	if ((r = posix_spawnattr_init(&at)) != 0) {
		posix_spawn_file_actions_destroy(&fa);
		return r;
	}
	r = posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	if (!r)
		r = posix_spawn_file_actions_adddup2(&fa, out_fd, 1);
	if (!r)
		r = posix_spawnattr_setsigmask(&at, &none);
	if (!r)
		r = posix_spawnattr_setsigdefault(&at, &dfl);
	if (!r)
		r = posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
	if (!r)
		r = posix_spawnp(pid, argv[0], &fa, &at, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&at);
	return r;
}

typedef struct {
	pid_t pid;
	int pidfd, status;
	bool exited;
} child_t;

static void child_reap(child_t *c, bool block)
{
	int st, r;

	if (c->exited)
		return;
	do
		r = waitpid(c->pid, &st, block ? 0 : WNOHANG);
	while (r < 0 && errno == EINTR);
	if (r == c->pid || (r < 0 && errno == ECHILD)) {
		c->exited = true;
		c->status = r == c->pid ? st : -1;
	}
}

/* Read the child's stdout until EOF (or, once it exited, until the pipe is
 * drained: a daemon it left behind may keep the pipe open) or the deadline. */
static int read_child(child_t *c, int rfd, char *buf, size_t *n, int64_t deadline)
{
	bool eof = false;

	while (!eof || !c->exited) {
		struct pollfd p[2] = {{eof ? -1 : rfd, POLLIN, 0},
				      {c->exited ? -1 : c->pidfd, POLLIN, 0}};
		int64_t left = deadline - now_ms();
		int tmo = c->exited ? 0 : (int)(left < 0 ? 0 : left);
		if (c->pidfd < 0 && tmo > 20)
			tmo = 20;
		if (!c->exited && left <= 0)
			return -ETIMEDOUT;
		int r = poll(p, 2, tmo);
		if (r < 0 && errno != EINTR)
			return -errno;
		if (!c->exited && (c->pidfd < 0 || (r > 0 && p[1].revents)))
			child_reap(c, c->pidfd >= 0);
		if (r > 0 && p[0].revents) {
			ssize_t k = read(rfd, buf + *n, AB_SECRET_FILE_MAX + 1 - *n);
			if (k < 0 && errno != EINTR && errno != EAGAIN)
				return -errno;
			if (k == 0)
				eof = true;
			if (k > 0 && (*n += (size_t)k) > AB_SECRET_FILE_MAX)
				return -EFBIG;
		} else if (c->exited && r >= 0) {
			break; /* exited and nothing left to read right now */
		}
	}
	return 0;
}

static int cmd_result(const char *name, const char *cmd, unsigned tmo, int r, const child_t *c,
		      ab_err *err)
{
	if (r == -ETIMEDOUT)
		return ab_fail_code(
			err, AB_EXIT_FAIL, ETIMEDOUT,
			"secret %s: command %.200s did not finish within %u ms (killed)", name, cmd,
			tmo);
	if (r == -EFBIG)
		return ab_fail_code(err, AB_EXIT_FAIL, EFBIG,
				    "secret %s: command %.200s wrote more than %d bytes", name, cmd,
				    AB_SECRET_FILE_MAX);
	if (r < 0)
		return ab_fail(err, -r, "secret %s: command %.200s", name, cmd);
	if (c->status < 0 || WIFSIGNALED(c->status))
		return ab_fail_code(err, AB_EXIT_FAIL, ECHILD,
				    "secret %s: command %.200s was killed by signal %d", name, cmd,
				    c->status < 0 ? 0 : WTERMSIG(c->status));
	if (WEXITSTATUS(c->status) != 0)
		return ab_fail_code(err, AB_EXIT_FAIL, ECHILD,
				    "secret %s: command %.200s exited with status %d", name, cmd,
				    WEXITSTATUS(c->status));
	return 0;
}

static int load_command(const char *name, const ab_secret_source *src, char **value, size_t *len,
			ab_err *err)
{
	unsigned tmo = src->timeout_ms ? src->timeout_ms : AB_SECRET_CMD_TIMEOUT_MS;
	child_t c = {.pidfd = -1};
	int p[2], r;
	size_t n = 0;
	char *buf, what[240];

	if (!src->argv || !src->argv[0] || !src->argv[0][0])
		return ab_fail_code(err, AB_EXIT_FAIL, EINVAL, "secret %s: empty command", name);
	snprintf(what, sizeof(what), "command %.200s", src->argv[0]);
	buf = malloc(AB_SECRET_FILE_MAX + 2);
	if (!buf)
		return ab_fail(err, ENOMEM, "secret %s", name);
	if (pipe2(p, O_CLOEXEC) < 0) {
		free(buf);
		return ab_fail(err, errno, "secret %s: pipe", name);
	}
	r = spawn_cmd(src->argv, p[1], &c.pid);
	close(p[1]);
	if (r != 0) {
		close(p[0]);
		free(buf);
		return ab_fail(err, r, "secret %s: cannot run %.200s", name, src->argv[0]);
	}
	c.pidfd = (int)syscall(SYS_pidfd_open, c.pid, 0);
	r = read_child(&c, p[0], buf, &n, now_ms() + tmo);
	close(p[0]);
	if (!c.exited)
		kill(c.pid, SIGKILL);
	child_reap(&c, true);
	if (c.pidfd >= 0)
		close(c.pidfd);
	r = cmd_result(name, src->argv[0], tmo, r, &c, err);
	if (r < 0) {
		ab_secrets_wipe_free(buf, AB_SECRET_FILE_MAX + 2);
		return r;
	}
	while (n && strchr(" \t\r\n\v\f", buf[n - 1]))
		n--;
	explicit_bzero(buf + n, AB_SECRET_FILE_MAX + 2 - n);
	return finish_loaded(name, what, buf, n, value, len, err);
}

static int load_json(const char *name, const char *path, const char *ptr, char **value, size_t *len,
		     ab_err *err)
{
	char what[4400];
	json_t *root = NULL;
	if (!path || !*path || !ptr)
		return ab_fail_code(err, AB_EXIT_FAIL, EINVAL,
				    "secret %s: no file or pointer named", name);
	int r = ab_credfile_load(path, &root, err);
	if (r < 0)
		return ab_err_prefix(err, "secret %s", name);
	char *v = NULL;
	size_t n = 0;
	r = ab_credfile_get(root, ptr, &v, &n);
	json_decref(root);
	if (r == -ENOENT)
		return ab_fail_code(err, AB_EXIT_FAIL, ENOENT,
				    "secret %s: %s has no value at %.300s", name, path, ptr);
	if (r == -EINVAL)
		return ab_fail_code(err, AB_EXIT_FAIL, EINVAL,
				    "secret %s: the value at %.300s in %s is not a string", name,
				    ptr, path);
	if (r < 0)
		return ab_fail(err, -r, "secret %s", name);
	snprintf(what, sizeof(what), "%.300s in %s", ptr, path);
	return finish_loaded(name, what, v, n, value, len, err);
}

int ab_secret_load(const char *name, const ab_secret_source *src, char **value, size_t *len,
		   ab_err *err)
{
	*value = NULL;
	*len = 0;
	if (!name || !src)
		return ab_fail_code(err, AB_EXIT_FAIL, EINVAL, "secret %s: no source",
				    name ? name : "?");
	switch (src->kind) {
	case AB_SECRET_SRC_ENV: return load_env(name, src->env, value, len, err);
	case AB_SECRET_SRC_FILE: return load_file(name, src->path, value, len, err);
	case AB_SECRET_SRC_COMMAND: return load_command(name, src, value, len, err);
	case AB_SECRET_SRC_JSON: return load_json(name, src->path, src->pointer, value, len, err);
	}
	return ab_fail_code(err, AB_EXIT_FAIL, EINVAL, "secret %s: unknown source kind %d", name,
			    (int)src->kind);
}
