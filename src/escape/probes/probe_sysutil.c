/* SPDX-License-Identifier: MIT */
/*
 * Helpers of the process, privilege, keyring, terminal and kernel probes
 * of test-escape (probe_prc.c, probe_secproc.c, probe_tty.c, probe_krn.c;
 * declared in probe_sysutil.h): how a blocked or a reached syscall is
 * recorded, the forked sub-child that keeps a successful call from
 * changing the probe process, small /proc reads, and the scan of every
 * visible process's environment and command line.  Runs INSIDE the
 * sandbox, in a probe's forked child (runner.c).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agentbox/escape.h"
#include "probe_sysutil.h"

const int psys_b_seccomp[] = {EPERM, ENOSYS, 0}; /* filtered, or capability-checked */
const int psys_b_enosys[] = {ENOSYS, EPERM, 0};

const char *psys_ename(int e)
{
	const char *n = strerrorname_np(e);
	return n ? n : "unknown errno";
}

/* Reached the kernel's own checks unless the errno is one of `blocked`:
 * a success, or EBADF/EFAULT/EINVAL..., means the call was not filtered. */
void psys_rec_filtered(ab_probe_run *r, const char *what, long ret, int err, const int *blocked,
		       const char *layer)
{
	if (ret >= 0) {
		ab_pr_escaped(r, what, "succeeded (%ld)%s", ret, blocked ? ": not filtered" : "");
		return;
	}
	for (const int *e = blocked; e && *e; e++)
		if (*e == err) {
			ab_pr_sys(r, what, ret, err);
			if (layer)
				ab_pr_layer(r, layer);
			return;
		}
	if (!blocked) { /* a real attempt: any failure is a block */
		ab_pr_sys(r, what, ret, err);
		if (layer)
			ab_pr_layer(r, layer);
		return;
	}
	ab_pr_escaped(r, what, "reached the kernel (%s): not filtered", psys_ename(err));
}

/* Name the layer of the last attempt from its errno (0: leave the guess). */
void psys_layer_for(ab_probe_run *r, int err, int e1, const char *l1, int e2, const char *l2)
{
	if (err == e1)
		ab_pr_layer(r, l1);
	else if (e2 && err == e2)
		ab_pr_layer(r, l2);
}

/* Read up to n-1 bytes of a small file, NUL-terminated.  -1 with errno. */
ssize_t psys_read_small(const char *path, char *buf, size_t n)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0)
		return -1;
	size_t got = 0;
	while (got + 1 < n) {
		ssize_t k = read(fd, buf + got, n - 1 - got);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			break;
		got += (size_t)k;
	}
	int e = errno;
	close(fd);
	buf[got] = '\0';
	errno = e;
	return (ssize_t)got;
}

/* Printable copy (for values shown to the judge), at most n-1 chars. */
void psys_printable(const char *s, size_t len, char *out, size_t n)
{
	size_t o = 0;
	for (size_t i = 0; i < len && o + 1 < n; i++)
		out[o++] = (s[i] >= 0x20 && s[i] < 0x7f) ? s[i] : (s[i] == '\0' ? ' ' : '.');
	while (o && out[o - 1] == '.')
		o--; /* a trailing newline */
	out[o] = '\0';
}

/* ---- forked sub-child: a success must not change the probe process ---- */

/* 0 with *out filled; the signal that killed the child; or -1 (timeout, fork). */
int psys_sub_run(psys_fn fn, const void *arg, struct psys_out *out)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0)
		return -1;
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0) {
		close(p[0]);
		close(p[1]);
		return -1;
	}
	if (pid == 0) {
		close(p[0]);
		errno = 0;
		struct psys_out o;
		o.ret = fn(arg);
		o.err = errno;
		(void)!write(p[1], &o, sizeof(o));
		_exit(0);
	}
	close(p[1]);
	struct pollfd pf = {p[0], POLLIN, 0};
	int rc = -1;
	if (poll(&pf, 1, PSYS_SUB_TIMEOUT_MS) > 0 && read(p[0], out, sizeof(*out)) == sizeof(*out))
		rc = 0;
	close(p[0]);
	int st = 0;
	if (rc != 0 && waitpid(pid, &st, WNOHANG) == 0)
		kill(pid, SIGKILL);
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (rc != 0 && WIFSIGNALED(st) && WTERMSIG(st) != SIGKILL)
		rc = WTERMSIG(st);
	return rc;
}

void psys_rec_sub(ab_probe_run *r, const char *what, int rc, const struct psys_out *o,
		  const int *blocked, const char *layer)
{
	if (rc == SIGSYS) {
		ab_pr_ok(r, what, "killed by SIGSYS");
		ab_pr_layer(r, "seccomp");
	} else if (rc > 0) {
		ab_pr_error(r, what, "sub-child killed by signal %d (%s)", rc, strsignal(rc));
	} else if (rc < 0) {
		ab_pr_error(r, what, "no result from the sub-child (timeout or fork failed)");
	} else {
		psys_rec_filtered(r, what, o->ret, o->err, blocked, layer);
	}
}

static long f_syscall(const void *arg)
{
	const struct psys_sc *s = arg;
	return syscall(s->nr, s->a[0], s->a[1], s->a[2], s->a[3], s->a[4], s->a[5]);
}

void psys_run_table(ab_probe_run *r, const struct psys_sc *t, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		struct psys_out o = {0, 0};
		int rc = psys_sub_run(f_syscall, &t[i], &o);
		psys_rec_sub(r, t[i].what, rc, &o, t[i].blocked, t[i].layer);
	}
}

/* Session of a process (field 6 of /proc/PID/stat), or -1. */
static long pid_sid(pid_t pid)
{
	char path[64], buf[1024];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if (psys_read_small(path, buf, sizeof(buf)) <= 0)
		return -1;
	const char *p = strrchr(buf, ')');
	char state;
	long ppid, pgrp, sid;
	if (!p || sscanf(p + 1, " %c %ld %ld %ld", &state, &ppid, &pgrp, &sid) != 4)
		return -1;
	return sid;
}

/* A process in our session: one of this sandbox's (the sandboxed command is
 * a session leader), so a lab pid number that exists here is pid reuse.  The
 * sandbox's init (pid 1) is outside the session: callers treat it apart. */
bool psys_pid_is_ours(pid_t pid)
{
	long sid = pid_sid(pid);
	return sid >= 0 && sid == (long)getsid(0);
}

/* Open, read and scan; records one attempt (or the canaries found). */
void psys_read_scan(ab_probe_run *r, const char *what, const char *path, bool escape_on_open,
		    const char *fail_layer)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0) {
		int e = errno;
		ab_pr_sys(r, what, -1, e);
		if (fail_layer)
			psys_layer_for(r, e, ENOENT, "pid-ns", e == ESRCH ? 0 : e, fail_layer);
		return;
	}
	static char buf[1 << 18];
	size_t got = 0;
	ssize_t k = 0;
	while (got < sizeof(buf) && (k = read(fd, buf + got, sizeof(buf) - got)) > 0)
		got += (size_t)k;
	int e = errno;
	bool failed = got == 0 && k < 0;
	close(fd);
	if (ab_pr_scan(r, what, buf, got))
		return;
	if (escape_on_open && failed)
		ab_pr_escaped(r, what, "opened (read failed: %s)", psys_ename(e));
	else if (escape_on_open)
		ab_pr_escaped(r, what, "opened, read %zu bytes", got);
	else
		ab_pr_ok(r, what, "readable, %zu bytes, no secret", got);
}

/* Open a path for writing (O_APPEND, never written); an fd is an escape. */
void psys_open_for_write(ab_probe_run *r, const char *path)
{
	char what[512];
	snprintf(what, sizeof(what), "open %s O_WRONLY|O_APPEND (no write)", path);
	int fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	int e = errno;
	if (fd >= 0)
		close(fd);
	ab_pr_sys(r, what, fd, e);
	/* DAC is checked before the mount's EROFS and Landlock's file_open hook */
	if (fd < 0 && (strncmp(path, "/proc/", 6) == 0 || strncmp(path, "/sys/", 5) == 0))
		psys_layer_for(r, e, EACCES, "permissions", 0, NULL);
}

/* ---- every process ---- */

/* Scan every readable /proc/PID/{environ,cmdline} except our own; count
 * processes outside the sandbox (not pid 1, not in our session). */
void psys_scan_all_procs(ab_probe_run *r, bool count_outside)
{
	DIR *d = opendir("/proc");
	if (!d) {
		ab_pr_error(r, "list /proc", "%s", psys_ename(errno));
		return;
	}
	int nread = 0, denied = 0, visible = 0, outside = 0, first = 0;
	long my_sid = getsid(0);
	struct dirent *de;
	static char buf[1 << 18];
	char path[300], first_comm[64] = "";
	while ((de = readdir(d))) {
		int pid = atoi(de->d_name);
		if (pid <= 0 || pid == getpid())
			continue;
		visible++;
		long sid = pid_sid(pid);
		if (pid != 1 && sid >= 0 && sid != my_sid && !outside++) {
			first = pid;
			snprintf(path, sizeof(path), "/proc/%d/comm", pid);
			psys_read_small(path, first_comm, sizeof(first_comm));
			first_comm[strcspn(first_comm, "\n")] = '\0';
		}
		for (int f = 0; f < 2; f++) {
			snprintf(path, sizeof(path), "/proc/%d/%s", pid, f ? "cmdline" : "environ");
			ssize_t n = psys_read_small(path, buf, sizeof(buf));
			if (n < 0) {
				denied++;
				continue;
			}
			nread++;
			ab_pr_scan(r, path, buf, (size_t)n);
		}
	}
	closedir(d);
	ab_pr_ok(r, "scan /proc/PID/environ and /proc/PID/cmdline for canaries",
		 "%d processes, %d files read, %d denied", visible, nread, denied);
	if (!count_outside)
		return;
	if (outside)
		ab_pr_escaped(r, "processes outside the sandbox are visible", "%d (e.g. pid %d %s)",
			      outside, first, first_comm);
	else
		ab_pr_ok(r, "processes outside the sandbox are visible", "none of %d", visible);
	if (!outside)
		ab_pr_layer(r, "pid-ns");
	ab_pr_report(r, "visible_pids", json_integer(visible));
}
