/* SPDX-License-Identifier: MIT */
/*
 * The control socket of a running sandbox (parent side: the directory, the
 * socket and its removal; the `allow` client).  The serving side is in the
 * proxy (src/egress/pxctl.c), which owns the policy.  See include/agentbox/control.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agentbox/control.h"
#include "agentbox/netpolicy.h"

struct ab_control {
	int dirfd;
	char name[64];
	char path[160];
};

int ab_control_dirs(uid_t uid, ab_control_dir out[2])
{
	int n = 0;
	char run[32];
	struct stat st;
	snprintf(run, sizeof(run), "/run/user/%u", (unsigned)uid);
	/* systemd's $XDG_RUNTIME_DIR, found from the uid alone: `run` and
	 * `allow` agree whatever their environments hold */
	if (lstat(run, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == uid &&
	    !(st.st_mode & (S_IWGRP | S_IWOTH))) {
		snprintf(out[n].base, sizeof(out[n].base), "%s", run);
		snprintf(out[n].leaf, sizeof(out[n].leaf), "agentbox");
		snprintf(out[n].path, sizeof(out[n].path), "%s/agentbox", run);
		n++;
	}
	snprintf(out[n].base, sizeof(out[n].base), "/tmp");
	snprintf(out[n].leaf, sizeof(out[n].leaf), "agentbox-%u", (unsigned)uid);
	snprintf(out[n].path, sizeof(out[n].path), "/tmp/agentbox-%u", (unsigned)uid);
	return n + 1;
}

/* What makes ST (LEAF's lstat, or its open fd's fstat) unusable: 0, or
 * -EPERM with err set. */
static int dir_unsafe(const struct stat *st, const char *path, ab_err *err)
{
	if (S_ISLNK(st->st_mode) || !S_ISDIR(st->st_mode)) {
		ab_fail_code(err, AB_EXIT_FAIL, EPERM,
			     "%s is a %s of uid %u, not a directory: refusing to use it", path,
			     S_ISLNK(st->st_mode) ? "symbolic link" : "file", (unsigned)st->st_uid);
		ab_err_hint(err, "someone may have put it there to take the name; remove it (as "
				 "root if it is not yours)");
		return -EPERM;
	}
	if (st->st_uid != getuid()) {
		ab_fail_code(err, AB_EXIT_FAIL, EPERM,
			     "%s belongs to uid %u, not to you (uid %u): refusing to use it", path,
			     (unsigned)st->st_uid, (unsigned)getuid());
		ab_err_hint(err,
			    "another user may have made it to take the name; remove it as root");
		return -EPERM;
	}
	if (st->st_mode & (S_IRWXG | S_IRWXO)) {
		ab_fail_code(err, AB_EXIT_FAIL, EPERM,
			     "%s is open to other users (mode %04o): refusing to use it", path,
			     (unsigned)(st->st_mode & 07777));
		ab_err_hint(err, "check what is in it, then chmod 700 %s (or remove it)", path);
		return -EPERM;
	}
	return 0;
}

int ab_control_dir_open(const char *base, const char *leaf, bool create, int *dirfd, ab_err *err)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/%s", base, leaf);
	_cleanup_close_ int bfd = open(base, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (bfd < 0)
		return errno == ENOENT && !create ? -ENOENT : ab_fail(err, errno, "%s", base);
	if (create && mkdirat(bfd, leaf, 0700) < 0 && errno != EEXIST)
		return ab_fail(err, errno, "cannot make %s", path);
	/* said from what is there (another user's directory cannot even be
	 * opened), then checked again on what was opened */
	struct stat st, fst;
	if (fstatat(bfd, leaf, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT && !create ? -ENOENT : ab_fail(err, errno, "%s", path);
	int r = dir_unsafe(&st, path, err);
	if (r < 0)
		return r;
	_cleanup_close_ int fd = openat(bfd, leaf, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return ab_fail(err, errno, "%s", path);
	if (fstat(fd, &fst) < 0)
		return ab_fail(err, errno, "%s", path);
	if ((r = dir_unsafe(&fst, path, err)) < 0)
		return r;
	if (fst.st_dev != st.st_dev || fst.st_ino != st.st_ino)
		return ab_fail(err, 0, "%s changed while it was opened: refusing to use it", path);
	*dirfd = TAKE_FD(fd);
	return 0;
}

void ab_control_prepare(void)
{
	ab_control_dir d[2];
	int n = ab_control_dirs(getuid(), d);
	for (int i = 0; i < n; i++) {
		ab_err ignore = {0};
		int fd;
		if (ab_control_dir_open(d[i].base, d[i].leaf, true, &fd, &ignore) == 0) {
			close(fd);
			return;
		}
	}
}

void ab_control_sock_name(const struct stat *ws, char *buf, size_t n)
{
	snprintf(buf, n, "ctl-%llx-%llx", (unsigned long long)ws->st_dev,
		 (unsigned long long)ws->st_ino);
}

/* NAME in the directory DIRFD, through the fd: the directory checked is the
 * one bound or connected in, whatever happens to its path meanwhile. */
static void fd_addr(int dirfd, const char *name, struct sockaddr_un *sa, socklen_t *len)
{
	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	int n = snprintf(sa->sun_path, sizeof(sa->sun_path), "/proc/self/fd/%d/%s", dirfd, name);
	*len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + (size_t)n + 1);
}

int ab_control_open_in(const char *base, const char *leaf, const struct stat *ws, ab_control **out,
		       int *fd, ab_err *err)
{
	_cleanup_close_ int dfd = -1, s = -1;
	int r = ab_control_dir_open(base, leaf, true, &dfd, err);
	if (r < 0)
		return r;
	_cleanup_free_ ab_control *c = calloc(1, sizeof(*c));
	if (!c)
		return ab_fail(err, ENOMEM, "control socket");
	ab_control_sock_name(ws, c->name, sizeof(c->name));
	snprintf(c->path, sizeof(c->path), "%s/%s/%s", base, leaf, c->name);
	/* The caller holds the workspace's lock: a socket of this name is a
	 * dead run's (killed before it could remove it). */
	if (unlinkat(dfd, c->name, 0) < 0 && errno != ENOENT)
		return ab_fail(err, errno, "cannot remove the old socket %s", c->path);
	s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (s < 0)
		return ab_fail(err, errno, "control socket");
	struct sockaddr_un sa;
	socklen_t len;
	fd_addr(dfd, c->name, &sa, &len);
	if (bind(s, (struct sockaddr *)&sa, len) < 0)
		return ab_fail(err, errno, "bind %s", c->path);
	if (listen(s, 16) < 0) {
		r = ab_fail(err, errno, "listen on %s", c->path);
		(void)unlinkat(dfd, c->name, 0); /* bound: the name is ours */
		return r;
	}
	c->dirfd = TAKE_FD(dfd);
	*fd = TAKE_FD(s);
	*out = TAKE_PTR(c);
	return 0;
}

int ab_control_open(const struct stat *ws, ab_control **out, int *fd, ab_err *err)
{
	ab_control_dir d[2];
	int n = ab_control_dirs(getuid(), d);
	ab_err first = {0};
	for (int i = 0; i < n; i++) {
		ab_err e = {0};
		if (ab_control_open_in(d[i].base, d[i].leaf, ws, out, fd, &e) == 0)
			return 0;
		if (!first.msg[0])
			first = e;
	}
	*err = first;
	return ab_err_ret(err);
}

const char *ab_control_path(const ab_control *c)
{
	return c->path;
}

void ab_control_close(ab_control *c)
{
	if (!c)
		return;
	(void)unlinkat(c->dirfd, c->name, 0);
	close(c->dirfd);
	free(c);
}

/* 0, or a negative errno. */
static int send_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return w < 0 ? -errno : -EIO;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Connect to the socket of WS in the first of the caller's directories that
 * has a live one: *FD, or err says why. */
static int connect_ctl(const char *workspace, int *fd, ab_err *err)
{
	struct stat ws;
	if (stat(workspace, &ws) < 0)
		return ab_fail(err, errno, "workspace %s", workspace);
	char name[64];
	ab_control_sock_name(&ws, name, sizeof(name));
	ab_control_dir d[2];
	int n = ab_control_dirs(getuid(), d);
	ab_err first = {0};
	for (int i = 0; i < n; i++) {
		_cleanup_close_ int dfd = -1;
		ab_err e = {0};
		int r = ab_control_dir_open(d[i].base, d[i].leaf, false, &dfd, &e);
		if (r == -ENOENT)
			continue;
		if (r < 0) {
			if (!first.msg[0])
				first = e;
			continue;
		}
		_cleanup_close_ int s =
			socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
		if (s < 0)
			return ab_fail(err, errno, "allow: socket");
		struct sockaddr_un sa;
		socklen_t len;
		fd_addr(dfd, name, &sa, &len);
		int c = connect(s, (struct sockaddr *)&sa, len), ce = errno;
		if (c == 0) {
			*fd = TAKE_FD(s);
			return 0;
		}
		if (ce == ENOENT || ce == ECONNREFUSED)
			continue; /* none here, or a dead run's */
		if (!first.msg[0]) {
			if (ce == EAGAIN)
				ab_fail(&first, 0,
					"the agentbox of %s does not answer (%s/%s: its "
					"queue is full)",
					workspace, d[i].path, name);
			else
				ab_fail(&first, ce, "connect to %s/%s", d[i].path, name);
		}
	}
	if (first.msg[0]) {
		*err = first;
		return ab_err_ret(err);
	}
	ab_fail_code(err, AB_EXIT_FAIL, ENOENT, "no agentbox is running in the workspace %s",
		     workspace);
	ab_err_hint(err, "`agentbox allow` reaches only the sandboxes its user started, for root "
			 "too: run it as that user (sudo -u USER agentbox allow ...), in the "
			 "sandbox's workspace or with -w DIR");
	return -ENOENT;
}

static int unanswered(ab_err *err, const char *workspace)
{
	return ab_fail(err, 0, "allow: the agentbox of %s closed the connection without an answer",
		       workspace);
}

/* Every rule checked here first (the running agentbox parses each again
 * with the same parser): a rule that cannot be one is said before asking. */
static int check_rules(char *const *rules, int nrules, ab_err *err)
{
	size_t total = 0;
	for (int i = 0; i < nrules; i++) {
		ab_netrule nr;
		if (strchr(rules[i], '\n') || strlen(rules[i]) > 300)
			return ab_fail(err, EINVAL, "allow: invalid rule");
		if (ab_netrule_parse(rules[i], &nr, err) < 0)
			return ab_err_prefix(err, "allow");
		total += strlen(rules[i]) + 7;
		if (total > AB_CONTROL_MAX_REQUEST)
			return ab_fail(err, E2BIG, "allow: too many rules at once");
	}
	return 0;
}

/* The connection to the agentbox of WORKSPACE made blocking and checked to
 * be served by the caller's uid, then the requests sent and its write side
 * shut down. */
static int send_rules(int fd, const char *workspace, char *const *rules, int nrules, ab_err *err)
{
	int fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0)
		return ab_fail(err, errno, "allow: socket");
	/* the directory is the caller's alone; still, only its own agentbox is
	 * told which hosts to allow */
	struct ucred cr;
	socklen_t cl = sizeof(cr);
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &cl) < 0)
		return ab_fail(err, errno, "allow: SO_PEERCRED");
	if (cr.uid != getuid())
		return ab_fail(err, 0,
			       "the control socket of %s is served by uid %u, not by you: "
			       "refusing to use it",
			       workspace, (unsigned)cr.uid);
	for (int i = 0; i < nrules; i++) {
		int s = send_all(fd, "allow ", 6);
		if (s >= 0)
			s = send_all(fd, rules[i], strlen(rules[i]));
		if (s >= 0)
			s = send_all(fd, "\n", 1);
		if (s < 0)
			return s == -EPIPE || s == -ECONNRESET
				       ? unanswered(err, workspace)
				       : ab_fail(err, -s, "allow: send to the agentbox of %s",
						 workspace);
	}
	shutdown(fd, SHUT_WR);
	return 0;
}

/* The answer, read to its end (or CAP - 1 bytes) into BUF, NUL-terminated. */
static int read_answer(int fd, const char *workspace, char *buf, size_t cap, ab_err *err)
{
	size_t got = 0;
	while (got < cap - 1) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		int pr = poll(&p, 1, 10000);
		if (pr < 0 && errno == EINTR)
			continue;
		if (pr <= 0)
			return ab_fail(err, pr < 0 ? errno : ETIMEDOUT,
				       "allow: no answer from the agentbox of %s", workspace);
		ssize_t n = read(fd, buf + got, cap - 1 - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == ECONNRESET && got == 0)
			return unanswered(err, workspace);
		if (n < 0)
			return ab_fail(err, errno, "allow: read the answer of the agentbox of %s",
				       workspace);
		if (n == 0)
			break;
		got += (size_t)n;
	}
	buf[got] = '\0';
	return 0;
}

/* Print the answer's lines, one per rule: "ok RULE" on stdout, a refusal
 * on stderr.  0 all added, 1 some refused, or err set. */
static int print_answers(char *buf, const char *workspace, int nrules, ab_err *err)
{
	int refused = 0, answers = 0;
	for (char *line = buf, *nl; *line; line = nl + 1) {
		nl = strchr(line, '\n');
		if (!nl)
			break;
		*nl = '\0';
		answers++;
		if (strncmp(line, "ok ", 3) == 0) {
			printf("agentbox: allowed %s\n", line + 3);
		} else {
			/* "error WHAT": the running agentbox refused the rule */
			const char *what = strncmp(line, "error ", 6) == 0 ? line + 6 : line;
			char clean[sizeof(err->msg)];
			ab_clean(what, clean, sizeof(clean));
			fprintf(stderr, "agentbox: allow: %s\n", clean);
			refused++;
		}
	}
	if (answers == 0)
		return unanswered(err, workspace);
	if (answers != nrules)
		return ab_fail(err, 0, "allow: the agentbox of %s answered %d of %d request%s",
			       workspace, answers, nrules, nrules == 1 ? "" : "s");
	return refused ? 1 : 0;
}

static int allow(const char *workspace, char *const *rules, int nrules, ab_err *err)
{
	int r = check_rules(rules, nrules, err);
	if (r < 0)
		return r;
	_cleanup_close_ int fd = -1;
	if ((r = connect_ctl(workspace, &fd, err)) < 0)
		return r;
	if ((r = send_rules(fd, workspace, rules, nrules, err)) < 0)
		return r;
	/* one line per rule, each at most an error message long */
	size_t cap = (size_t)nrules * (sizeof(err->msg) + 32) + 1;
	_cleanup_free_ char *buf = malloc(cap);
	if (!buf)
		return ab_fail(err, ENOMEM, "allow");
	if ((r = read_answer(fd, workspace, buf, cap, err)) < 0)
		return r;
	return print_answers(buf, workspace, nrules, err);
}

int ab_control_allow(const char *workspace, char *const *rules, int nrules, ab_err *err)
{
	int r = allow(workspace, rules, nrules, err);
	return r < 0 ? AB_EXIT_FAIL : r;
}
