/* SPDX-License-Identifier: MIT */
/*
 * The exec record (parent): the server thread's part and the event loop's.
 *
 * An execve/execveat notification: read the path and argv
 * (process_vm_readv), check the notification is still valid, CONTINUE.
 * Then, while the exec proceeds: the pid, the parent and the cwd (/proc), a
 * pidfd, the "exec" line.  Attempts on a path that does not exist inside
 * (execvp's walk along PATH) are not logged.  The record goes to the event
 * loop through a pipe; its pidfd becoming readable gives the "exit" line.
 *
 * A record, not a decision: the kernel re-reads the exec arguments after we
 * let the call continue, so a second thread of the caller can change them in
 * between (time of check / time of use).  The record shows what the process
 * asked for, which is what a well-behaved process runs; a hostile one can
 * make it lie.  docs/audit.md says so.
 */
#include "supervise_int.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/* PIDFD_GET_INFO (Linux 6.15): the exit code of a process, even once its
 * parent reaped it.  Version 0 of the struct (64 bytes); the kernel takes
 * the size from the ioctl number. */
struct ab_pidfd_info {
	uint64_t mask;
	uint64_t cgroupid;
	uint32_t pid, tgid, ppid, ruid, rgid, euid, egid, suid, sgid, fsuid, fsgid;
	int32_t exit_code;
};
_Static_assert(sizeof(struct ab_pidfd_info) == 64, "PIDFD_INFO_SIZE_VER0");
#define AB_PIDFD_GET_INFO _IOWR(0xFF, 11, struct ab_pidfd_info)
#define AB_PIDFD_INFO_PID (1ULL << 0)
#define AB_PIDFD_INFO_EXIT (1ULL << 3)

/* One exec, read by the server thread while the caller waited, finished
 * (logged, its exit awaited) by the event loop. */
typedef struct exec_rec {
	pid_t tid;  /* host: the caller */
	pid_t tgid; /* host: its process */
	long pid;   /* inside; -1: the loop reads it */
	long host_ppid;
	long ppid; /* inside (-1: outside, or unknown) */
	int pidfd;
	uint64_t at_ms; /* when it exec'd (the exit's "ms" counts from here) */
	char path[AB_SUP_ARG_MAX];
	char argv[AB_SUP_ARGV_MAX][AB_SUP_ARG_MAX];
	size_t argc;
	bool truncated;
	char cwd[1024];
} exec_rec;

typedef struct tracked {
	struct ab_supervisor *sup;
	pid_t tgid; /* host */
	long pid;   /* inside */
	int pidfd;
	uint64_t t0;
} tracked;

/* The ids of an exec'ing thread without rendering all of /proc/TID/status
 * (the record's hot path): a pidfd (kept for the exit), the pid inside from the namespace
 * (or the pidfd's fdinfo), PIDFD_GET_INFO (6.13) for the parent.  A thread
 * that is not its process's leader, or an older kernel: the status file. */
static void exec_ids(const ab_supervisor *s, exec_rec *r)
{
	r->pidfd = (int)syscall(SYS_pidfd_open, r->tid, 0); /* EINVAL: not a leader */
	if (r->pidfd >= 0) {
		int v = s->pidns >= 0 ? ioctl(s->pidns, AB_NS_GET_TGID_IN_PIDNS, (int)r->tid) : -1;
		char path[64], buf[512];
		snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", r->pidfd);
		if (v > 0)
			r->pid = v;
		else if (ab_read_small(path, buf, sizeof(buf)) > 0)
			r->pid = sup_status_field(buf, "NSpid:", true);
		struct ab_pidfd_info info = {.mask = AB_PIDFD_INFO_PID};
		if (ioctl(r->pidfd, AB_PIDFD_GET_INFO, &info) == 0 &&
		    (info.mask & AB_PIDFD_INFO_PID))
			r->host_ppid = info.ppid;
	}
	if (r->pid < 0 || r->host_ppid < 0) {
		long tgid;
		sup_proc_ids(r->tid, &r->pid, &r->host_ppid, &tgid);
		if (r->pidfd < 0 && tgid > 0) {
			r->tgid = (pid_t)tgid;
			r->pidfd = (int)syscall(SYS_pidfd_open, r->tgid, 0);
		}
	}
}

/* ------------------------------------------------------------ exits */

static int exit_info(int pidfd)
{
	struct ab_pidfd_info info = {.mask = AB_PIDFD_INFO_EXIT};
	if (ioctl(pidfd, AB_PIDFD_GET_INFO, &info) == 0 && (info.mask & AB_PIDFD_INFO_EXIT))
		return info.exit_code;
	return -1;
}

static void emit_exit(tracked *t)
{
	/* once its parent reaped it, PIDFD_GET_INFO (6.15) has the exit code;
	 * before that (or on older kernels) /proc has it while it is a zombie */
	int code = exit_info(t->pidfd);
	if (code < 0) {
		char path[64], buf[1024];
		snprintf(path, sizeof(path), "/proc/%d/stat", (int)t->tgid);
		if (ab_read_small(path, buf, sizeof(buf)) > 0) {
			const char *st = strrchr(buf, ')');
			if (st && st[1] == ' ' && (st[2] == 'Z' || st[2] == 'X'))
				code = ab_sup_parse_stat_exit(buf);
		}
		if (code < 0) /* reaped meanwhile */
			code = exit_info(t->pidfd);
	}
	json_t *ev = json_object();
	json_object_set_new(ev, "event", json_string("exit"));
	json_object_set_new(ev, "pid", json_integer(t->pid));
	if (code >= 0 && WIFEXITED(code))
		json_object_set_new(ev, "status", json_integer(WEXITSTATUS(code)));
	else if (code >= 0 && WIFSIGNALED(code))
		json_object_set_new(ev, "signal", json_integer(WTERMSIG(code)));
	json_object_set_new(ev, "ms", json_integer((json_int_t)(ab_now_ms() - t->t0)));
	ab_audit_emit(t->sup->audit, ev);
}

static void untrack(ab_supervisor *s, size_t i)
{
	tracked *t = s->tr[i];
	if (s->loop)
		ab_loop_unwatch(s->loop, t->pidfd);
	close(t->pidfd);
	free(t);
	s->tr[i] = s->tr[--s->ntr];
}

static void on_pidfd(ab_loop *l, int fd, unsigned ev, void *data)
{
	tracked *t = data;
	ab_supervisor *s = t->sup;
	emit_exit(t);
	for (size_t i = 0; i < s->ntr; i++) {
		if (s->tr[i] == t) {
			untrack(s, i);
			return;
		}
	}
}

static tracked *find_tracked(ab_supervisor *s, pid_t tgid)
{
	for (size_t i = 0; i < s->ntr; i++)
		if (s->tr[i]->tgid == tgid)
			return s->tr[i];
	return NULL;
}

/* ------------------------------------------------------------ execs */

static void read_argv(pid_t tid, uint64_t argv_addr, exec_rec *r)
{
	uint64_t ptrs[AB_SUP_ARGV_MAX + 1];
	size_t have = 0;
	/* the pointer array, page by page */
	while (argv_addr && have < AB_ARRAY_SIZE(ptrs)) {
		uint64_t a = argv_addr + have * sizeof(uint64_t);
		size_t room = (AB_ARRAY_SIZE(ptrs) - have) * sizeof(uint64_t);
		size_t chunk = 4096 - (size_t)(a & 4095);
		if (chunk > room)
			chunk = room;
		chunk -= chunk % sizeof(uint64_t);
		if (!chunk)
			chunk = sizeof(uint64_t);
		ssize_t n = sup_remote_read(tid, a, &ptrs[have], chunk);
		if (n < (ssize_t)sizeof(uint64_t))
			break;
		size_t got = (size_t)n / sizeof(uint64_t);
		bool end = false;
		for (size_t i = 0; i < got && !end; i++)
			end = ptrs[have + i] == 0;
		have += got;
		if (end)
			break;
	}
	for (size_t i = 0; i < have && ptrs[i]; i++) {
		if (r->argc == AB_SUP_ARGV_MAX) {
			r->truncated = true;
			break;
		}
		int st = sup_remote_str(tid, ptrs[i], r->argv[r->argc], AB_SUP_ARG_MAX);
		if (st < 0) {
			r->truncated = true;
			break;
		}
		r->truncated |= st == 1;
		r->argc++;
	}
}

/* Does PATH exist inside the sandbox (as seen by TID)?  Absolute symlinks
 * resolve inside its root (RESOLVE_IN_ROOT).  false only for ENOENT/ENOTDIR. */
static bool exists_inside(pid_t tid, const char *cwd, const char *path)
{
	char buf[2048], root[64];
	if (path[0] == '/')
		snprintf(buf, sizeof(buf), "%s", path);
	else if ((size_t)snprintf(buf, sizeof(buf), "%s/%s", cwd, path) >= sizeof(buf))
		return true;
	snprintf(root, sizeof(root), "/proc/%d/root", (int)tid);
	_cleanup_close_ int rfd = open(root, O_PATH | O_CLOEXEC);
	if (rfd < 0)
		return true;
	struct open_how how = {.flags = O_PATH | O_CLOEXEC, .resolve = RESOLVE_IN_ROOT};
	int fd = (int)syscall(SYS_openat2, rfd, buf, &how, sizeof(how));
	if (fd >= 0) {
		close(fd);
		return true;
	}
	return errno != ENOENT && errno != ENOTDIR;
}

/* exists_inside, with the absolute paths found in the last second
 * remembered (a script running /bin/true 5,000 times checks it once a
 * second).  A path removed meanwhile still counts as found for that long: the
 * record then shows an exec that failed, with its process's exit. */
static bool exists_cached(ab_supervisor *s, pid_t tid, const char *cwd, const char *path)
{
	uint64_t now = ab_now_ms();
	bool abs = path[0] == '/';
	for (size_t i = 0; abs && i < AB_ARRAY_SIZE(s->seen); i++)
		if (now - s->seen[i].at_ms < 1000 && strcmp(s->seen[i].path, path) == 0)
			return true;
	if (!exists_inside(tid, cwd, path))
		return false;
	if (abs && strlen(path) < sizeof(s->seen[0].path)) {
		unsigned k = s->seen_next++ % AB_ARRAY_SIZE(s->seen);
		snprintf(s->seen[k].path, sizeof(s->seen[k].path), "%s", path);
		s->seen[k].at_ms = now;
	}
	return true;
}

static void track(ab_supervisor *s, exec_rec *m)
{
	tracked *t = find_tracked(s, m->tgid);
	if (t) { /* a second exec in the same process: the exit belongs to it */
		t->t0 = m->at_ms;
		return;
	}
	if (m->pidfd < 0)
		return;
	/* gone before its batch was taken (a short command): its exit now */
	struct pollfd p = {.fd = m->pidfd, .events = POLLIN};
	if (poll(&p, 1, 0) == 1) {
		tracked gone = {.sup = s,
				.tgid = m->tgid,
				.pid = m->pid,
				.pidfd = m->pidfd,
				.t0 = m->at_ms};
		emit_exit(&gone);
		return;
	}
	/* beyond the cap (or out of memory) the exit goes unrecorded */
	t = s->ntr < AB_SUP_TRACKED_MAX ? calloc(1, sizeof(*t)) : NULL;
	tracked **v = t ? realloc(s->tr, (s->ntr + 1) * sizeof(*v)) : NULL;
	if (!v) {
		free(t);
		return;
	}
	s->tr = v;
	*t = (tracked){.sup = s, .tgid = m->tgid, .pid = m->pid, .pidfd = m->pidfd, .t0 = m->at_ms};
	if (ab_loop_watch(s->loop, m->pidfd, AB_EV_READ, on_pidfd, t) < 0) {
		free(t);
		return;
	}
	m->pidfd = -1; /* the entry's now */
	s->tr[s->ntr++] = t;
}

static void log_exec(ab_supervisor *s, exec_rec *r)
{
	json_t *ev = json_object();
	json_object_set_new(ev, "event", json_string("exec"));
	json_object_set_new(ev, "pid", json_integer(r->pid));
	json_object_set_new(ev, "ppid", json_integer(r->ppid));
	json_object_set_new(ev, "cwd", sup_bytes_json(r->cwd));
	json_object_set_new(ev, "path", sup_bytes_json(r->path));
	json_t *argv = json_array();
	for (size_t i = 0; i < r->argc; i++)
		json_array_append_new(argv, sup_bytes_json(r->argv[i]));
	json_object_set_new(ev, "argv", argv);
	if (r->truncated)
		json_object_set_new(ev, "truncated", json_true());
	ab_audit_emit(s->audit, ev);
	s->execs++;
	track(s, r);
	if (r->pidfd >= 0)
		close(r->pidfd);
	free(r);
}

static void drain_tracks(ab_supervisor *s)
{
	exec_rec *r[64];
	ssize_t n;
	do {
		n = read(s->pipe[0], r, sizeof(r));
		for (ssize_t i = 0; i < n / (ssize_t)sizeof(r[0]); i++)
			log_exec(s, r[i]);
	} while (n == (ssize_t)sizeof(r));
}

/* The records are taken AB_SUP_BATCH_MS (10 ms) after the first of a batch arrives,
 * not one by one: a script running short commands then wakes the loop once
 * for several of them, and most of their exits are already known when their
 * execs are logged (no watch, no wakeup of their own).  The loop's share of
 * the record's cost was the most of it (docs/performance.md). */
static void on_batch(ab_loop *l, uint64_t id, void *data)
{
	ab_supervisor *s = data;
	s->batch = 0;
	drain_tracks(s);
	(void)ab_loop_modify(l, s->pipe[0], AB_EV_READ);
}

void sup_on_track(ab_loop *l, int fd, unsigned ev, void *data)
{
	ab_supervisor *s = data;
	if (s->batch)
		return;
	s->batch = ab_loop_timer(l, AB_SUP_BATCH_MS, on_batch, s);
	if (!s->batch) { /* no timer (out of memory): at once */
		drain_tracks(s);
		return;
	}
	(void)ab_loop_modify(l, fd, 0);
}

/* The server thread's part: what goes away with the process (the arguments
 * with the exec, the ids and the cwd with a quick command's exit) is read
 * while it waits, some 20 microseconds; the line and the exit are the
 * loop's, in parallel with the exec. */
void sup_on_exec(ab_supervisor *s, const struct seccomp_notif *rq)
{
	pid_t tid = (pid_t)rq->pid;
	bool at = rq->data.nr == s->nr_execveat;
	uint64_t path_addr = at ? rq->data.args[1] : rq->data.args[0];
	uint64_t argv_addr = at ? rq->data.args[2] : rq->data.args[1];
	if (!s->pol->notify_exec) { /* a learning run without a log: the path only */
		char path[AB_SUP_ARG_MAX];
		if (!at && sup_remote_str(tid, path_addr, path, sizeof(path)) == 0)
			sup_learn_exec(s, tid, path);
		sup_answer(s, rq->id, 0, true);
		return;
	}
	exec_rec *r = malloc(sizeof(*r));
	if (!r) {
		sup_answer(s, rq->id, 0, true);
		return;
	}
	r->tid = r->tgid = tid;
	r->pid = r->host_ppid = -1;
	r->at_ms = ab_now_ms();
	r->argc = 0;
	r->truncated = false;
	r->cwd[0] = '\0';
	if (sup_remote_str(tid, path_addr, r->path, sizeof(r->path)) < 0)
		snprintf(r->path, sizeof(r->path), "?");
	read_argv(tid, argv_addr, r);
	exec_ids(s, r);
	/* now: the parent may be gone when the batch is taken */
	r->ppid = sup_inner_pid(s, r->host_ppid);
	char link[64];
	snprintf(link, sizeof(link), "/proc/%d/cwd", (int)tid);
	ssize_t n = readlink(link, r->cwd, sizeof(r->cwd) - 1);
	r->cwd[n > 0 ? n : 0] = '\0';
	bool found = true;
	if (at && r->path[0] == '\0') { /* fexecve: name the file behind the fd */
		snprintf(link, sizeof(link), "/proc/%d/fd/%d", (int)tid, (int)rq->data.args[0]);
		n = readlink(link, r->path, sizeof(r->path) - 1);
		r->path[n > 0 ? n : 0] = '\0';
	} else {
		/* execvp trying the next directory of PATH: not an exec */
		found = exists_cached(s, tid, r->cwd[0] ? r->cwd : "/", r->path);
	}
	/* all read: is it still the same caller, stopped in this very call?
	 * (then the pid behind the pidfd was not reused either).  The record
	 * goes to the loop before the answer, so the loop writes it while the
	 * exec runs. */
	if (found && !at)
		sup_learn_exec(s, tid, r->path);
	bool valid = sup_still_valid(s, rq->id);
	bool handed = valid && found && write(s->pipe[1], &r, sizeof(r)) == (ssize_t)sizeof(r);
	sup_answer(s, rq->id, 0, true);
	if (handed)
		return;
	if (valid && found) /* 131,072 records behind: counted, never silent */
		s->exec_lost++;
	if (r->pidfd >= 0)
		close(r->pidfd);
	free(r);
}

void sup_exec_finish(ab_supervisor *s)
{
	if (s->batch && s->loop)
		ab_loop_timer_cancel(s->loop, s->batch);
	s->batch = 0;
	if (s->pipe[0] >= 0) {
		drain_tracks(s);
		if (s->loop)
			ab_loop_unwatch(s->loop, s->pipe[0]);
	}
	while (s->ntr) {
		emit_exit(s->tr[s->ntr - 1]);
		untrack(s, s->ntr - 1);
	}
}

void sup_exec_free(ab_supervisor *s)
{
	for (size_t i = 0; i < s->ntr; i++) {
		close(s->tr[i]->pidfd);
		free(s->tr[i]);
	}
	free(s->tr);
}
