/* SPDX-License-Identifier: MIT */
/*
 * The sandbox's own pseudo-terminal.
 *
 *  - ab_pty_open: runs in the sandbox child (after the new devpts instance is
 *    mounted on /dev/pts and /dev/ptmx points at pts/ptmx).
 *  - ab_pty_make_controlling: runs in the command's process before its
 *    exec, which may share init's memory: system calls only.
 *  - ab_pty_relay_*: run in the parent, on its event loop: the user's terminal
 *    (raw mode) <-> the master.  Nothing inside ever gets an fd on the user's
 *    real terminal.
 *
 * Non-blocking I/O on the user's terminal.  O_NONBLOCK is a property of the
 * open file description, and the user's terminal description is shared with
 * the login shell and every other job of the session (0, 1 and 2 are usually
 * one description).  Setting O_NONBLOCK on it would leak into the shell if
 * agentbox is SIGKILLed, and would make our own stderr writes fail with EAGAIN
 * meanwhile.  Blocking writes guided by poll are no better: poll's POLLOUT on
 * a tty only means "some room", so a write can still block the whole loop
 * (and the proxy with it) behind a slow terminal.  So the relay opens its *own*
 * file description of the same terminal (or pipe) through /proc/self/fd/N
 * with O_NONBLOCK|O_NOCTTY|O_CLOEXEC, and closes it at the end: the shared
 * description's flags are never touched.  Only where that is impossible
 * (sockets, an exclusive TIOCEXCL tty, no /proc) does it fall back to setting
 * O_NONBLOCK on the caller's fd, and then restores the flags in
 * ab_pty_relay_free.  Regular files and other fds epoll cannot watch
 * (stdout redirected to a file or /dev/null) are written synchronously and, as
 * input, read from a 0 ms timer.  The master is handed over to the relay:
 * O_NONBLOCK on it, closed at the end.
 *
 * Each direction has a 64 KiB buffer; when it is full the source is no longer
 * watched for reading (ab_loop_modify) until it drains: backpressure goes all
 * the way to the writer inside (its pty write blocks) or to the user.
 */
#include "pty.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <termios.h>

#include "termfilter.h"

#ifndef TIOCGPTPEER
#define TIOCGPTPEER _IO('T', 0x41)
#endif

#define RELAY_BUF (64 * 1024)
#define DRAIN_MS 1000              /* time bound for the final drain */
#define DRAIN_MAX_BYTES (4u << 20) /* byte bound for the final drain */

/* ---------------------------------------------------------------------------
 * child / grandchild side
 * ------------------------------------------------------------------------- */

static int open_slave(int m, ab_err *err)
{
	int s = ioctl(m, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (s >= 0)
		return s;
	/* Older kernel (< 4.13): go through the path.  TIOCGPTPEER is preferred
	 * because it cannot be redirected to another devpts instance. */
	char path[128];
	int r = ptsname_r(m, path, sizeof(path));
	if (r != 0)
		return ab_fail(err, r, "ptsname");
	s = open(path, O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (s < 0)
		return ab_fail(err, errno, "open %s", path);
	return s;
}

int ab_pty_open(int *master, int *slave, const struct winsize *ws, ab_err *err)
{
	_cleanup_close_ int m = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (m < 0) {
		int e = errno;
		ab_fail(err, e, "open /dev/ptmx");
		ab_err_hint(err,
			    "the sandbox needs a devpts instance (mount -t devpts -o newinstance)");
		return -e;
	}
	/* grantpt() is unnecessary: a new devpts instance creates the slave with
	 * our uid and mode 0620/0600 already. */
	if (unlockpt(m) < 0)
		return ab_fail(err, errno, "unlockpt");
	_cleanup_close_ int s = open_slave(m, err);
	if (s < 0)
		return s;
	if (ws && ioctl(m, TIOCSWINSZ, ws) < 0)
		return ab_fail(err, errno, "set pty window size");
	*master = TAKE_FD(m);
	*slave = TAKE_FD(s);
	return 0;
}

static int ctl_fail(const char **what, const char *step, int errnum)
{
	*what = step;
	return -errnum;
}

int ab_pty_make_controlling(int slave, unsigned fd_mask, const char **what, int *fd_out)
{
	*fd_out = -1;
	if (slave < 0)
		return ctl_fail(what, "pty slave", EBADF);
	if (setsid() < 0)
		return ctl_fail(what, "setsid", errno);
	if (ioctl(slave, TIOCSCTTY, 0) < 0)
		return ctl_fail(what, "make the pty the controlling terminal", errno);
	for (int fd = 0; fd <= 2; fd++) {
		if (!(fd_mask & (1u << fd)))
			continue; /* not a terminal outside: passed through as it is */
		*fd_out = fd;
		if (fd == slave) {
			/* dup2(x, x) is a no-op: clear O_CLOEXEC by hand */
			int fl = fcntl(fd, F_GETFD);
			if (fl < 0 || fcntl(fd, F_SETFD, fl & ~FD_CLOEXEC) < 0)
				return ctl_fail(what, "pty slave fd", errno);
		} else if (dup2(slave, fd) < 0) {
			return ctl_fail(what, "dup2 pty slave onto", errno);
		}
	}
	*fd_out = -1;
	if (slave > 2)
		close(slave);
	return 0;
}

bool ab_pty_get_winsize(int fd, struct winsize *ws)
{
	struct winsize w;
	if (fd < 0 || ioctl(fd, TIOCGWINSZ, &w) < 0)
		return false;
	if (ws)
		*ws = w;
	return true;
}

/* ---------------------------------------------------------------------------
 * parent side: the relay
 * ------------------------------------------------------------------------- */

struct rbuf {
	size_t start, end; /* live bytes are d[start, end) */
	unsigned char d[RELAY_BUF];
};

enum ep_mode {
	EP_OWN,      /* our own O_NONBLOCK description (reopened); closed at the end */
	EP_BORROWED, /* caller's fd; we may have set O_NONBLOCK (restored at the end) */
	EP_FILE,     /* epoll cannot watch it (regular file, /dev/null): synchronous */
};

struct endpoint {
	int orig; /* the caller's fd */
	int fd;   /* the fd used for I/O (== orig unless EP_OWN) */
	enum ep_mode mode;
	bool set_nonblock; /* EP_BORROWED: we set O_NONBLOCK on the shared description */
	bool watched;
};

struct ab_pty_relay {
	ab_loop *loop;
	int master; /* owned: closed by free */
	int master_flags;
	bool master_flags_set;
	bool master_watched;
	struct endpoint in, out;
	struct termios saved_tio;
	bool tio_saved;
	bool in_eof;      /* stop reading in (EOF or error); the master stays open */
	bool master_eof;  /* master read gave EIO: every slave fd is closed */
	bool master_dead; /* nobody reads input any more: drop it */
	bool out_dead;    /* writing out failed: read the master and discard */
	bool started;     /* fully set up: free() drains */
	bool sigpipe_set; /* we set SIGPIPE to SIG_IGN: restore SIG_DFL */
	uint64_t in_timer;
	struct rbuf to_master, to_out;
	ab_termfilter tf;    /* clipboard sequences out of the output */
	bool pass_clipboard; /* the profile lets them through */
	bool paused;         /* run --ask is asking: the outer terminal is the question's */
};

static size_t rb_len(const struct rbuf *b)
{
	return b->end - b->start;
}
static size_t rb_space(const struct rbuf *b)
{
	return RELAY_BUF - rb_len(b);
}
static void rb_clear(struct rbuf *b)
{
	b->start = b->end = 0;
}

/* Contiguous free tail, compacting first if needed. */
static unsigned char *rb_tail(struct rbuf *b, size_t *n)
{
	if (b->end == RELAY_BUF && b->start > 0) {
		memmove(b->d, b->d + b->start, rb_len(b));
		b->end -= b->start;
		b->start = 0;
	}
	*n = RELAY_BUF - b->end;
	return b->d + b->end;
}

static void rb_consume(struct rbuf *b, size_t n)
{
	b->start += n;
	if (b->start == b->end)
		rb_clear(b);
}

static bool want_in_read(const ab_pty_relay *r)
{
	return !r->paused && !r->in_eof && !r->master_dead && rb_space(&r->to_master) > 0;
}

static bool want_master_read(const ab_pty_relay *r)
{
	return !r->paused && !r->master_eof && (r->out_dead || rb_space(&r->to_out) > 0);
}

static bool want_master_write(const ab_pty_relay *r)
{
	return !r->master_dead && rb_len(&r->to_master) > 0;
}

static bool want_out_write(const ab_pty_relay *r)
{
	return !r->paused && !r->out_dead && rb_len(&r->to_out) > 0;
}

static void master_write(ab_pty_relay *r)
{
	while (want_master_write(r)) {
		ssize_t n = write(r->master, r->to_master.d + r->to_master.start,
				  rb_len(&r->to_master));
		if (n > 0) {
			rb_consume(&r->to_master, (size_t)n);
		} else if (n < 0 && errno == EINTR) {
			continue;
		} else if (n < 0 && errno == EAGAIN) {
			return;
		} else {
			r->master_dead = true;
			rb_clear(&r->to_master);
		}
	}
}

/* Blocking for EP_FILE (regular files do not return EAGAIN), else not. */
static void out_write(ab_pty_relay *r)
{
	while (want_out_write(r)) {
		ssize_t n = write(r->out.fd, r->to_out.d + r->to_out.start, rb_len(&r->to_out));
		if (n > 0) {
			rb_consume(&r->to_out, (size_t)n);
		} else if (n < 0 && errno == EINTR) {
			continue;
		} else if (n < 0 && errno == EAGAIN) {
			return;
		} else {
			/* EIO (terminal hung up), EPIPE, ENOSPC...: keep draining the
			 * master so the inside never blocks, but drop the bytes. */
			r->out_dead = true;
			rb_clear(&r->to_out);
		}
	}
}

static void in_read(ab_pty_relay *r)
{
	size_t room;
	unsigned char *p = rb_tail(&r->to_master, &room);
	if (room == 0)
		return;
	ssize_t n = read(r->in.fd, p, room);
	if (n > 0) {
		r->to_master.end += (size_t)n;
		master_write(r);
	} else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
		/* EOF (stdin closed, terminal hung up) or EIO: stop reading.
		 * Nothing is sent and the master stays open. */
		r->in_eof = true;
	}
}

/* >0 bytes read, 0 nothing now (EAGAIN), -1 end (EIO: slave side closed). */
static ssize_t master_read(ab_pty_relay *r)
{
	size_t room;
	unsigned char *p = rb_tail(&r->to_out, &room);
	if (room == 0)
		return 0;
	ssize_t n = read(r->master, p, room);
	if (n > 0) {
		if (!r->pass_clipboard)
			ab_termfilter_run(&r->tf, p, (size_t)n);
		r->to_out.end += (size_t)n;
		if (r->out_dead)
			rb_clear(&r->to_out);
		out_write(r);
		return n;
	}
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return 0;
	r->master_eof = true;
	r->master_dead = true;
	rb_clear(&r->to_master);
	return -1;
}

static void in_timer_cb(ab_loop *l, uint64_t id, void *data);

/* Recompute what each fd is watched for (no syscall when unchanged). */
static void relay_update(ab_pty_relay *r)
{
	unsigned in_m = want_in_read(r) ? AB_EV_READ : 0;
	unsigned out_m = want_out_write(r) ? AB_EV_WRITE : 0;
	unsigned m_m =
		(want_master_read(r) ? AB_EV_READ : 0) | (want_master_write(r) ? AB_EV_WRITE : 0);
	bool shared = r->in.watched && r->out.watched && r->in.fd == r->out.fd;

	if (r->in.watched)
		(void)ab_loop_modify(r->loop, r->in.fd, in_m | (shared ? out_m : 0));
	if (r->out.watched && !shared)
		(void)ab_loop_modify(r->loop, r->out.fd, out_m);
	if (r->master_watched)
		(void)ab_loop_modify(r->loop, r->master, m_m);
	if (r->out.mode == EP_FILE)
		out_write(r);
	if (r->in.mode == EP_FILE && in_m && !r->in_timer)
		r->in_timer = ab_loop_timer(r->loop, 0, in_timer_cb, r);
}

static void in_timer_cb(ab_loop *l, uint64_t id, void *data)
{
	ab_pty_relay *r = data;
	r->in_timer = 0;
	if (want_in_read(r))
		in_read(r);
	relay_update(r);
}

static void relay_cb(ab_loop *l, int fd, unsigned ev, void *data)
{
	ab_pty_relay *r = data;
	if (fd == r->master) {
		/* HUP on a master: every slave fd is closed, nobody reads input. */
		if (ev & AB_EV_HUP) {
			r->master_dead = true;
			rb_clear(&r->to_master);
		}
		if (ev & AB_EV_WRITE)
			master_write(r);
		if ((ev & (AB_EV_READ | AB_EV_HUP | AB_EV_ERR)) && want_master_read(r))
			(void)master_read(r);
	}
	if (r->in.watched && fd == r->in.fd && (ev & (AB_EV_READ | AB_EV_HUP | AB_EV_ERR)) &&
	    want_in_read(r))
		in_read(r);
	if (r->out.watched && fd == r->out.fd && (ev & (AB_EV_WRITE | AB_EV_HUP | AB_EV_ERR)))
		out_write(r);
	relay_update(r);
}

/* Our own O_NONBLOCK description of the same tty/pipe, or -errno. */
static int reopen_nonblock(int fd, int acc)
{
	struct stat st, st2;
	char path[64];
	if (fstat(fd, &st) < 0)
		return -errno;
	/* Never regular files: a new description would have its own offset. */
	if (!S_ISCHR(st.st_mode) && !S_ISFIFO(st.st_mode))
		return -ENOTSUP;
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	int n = open(path, acc | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (n < 0)
		return -errno;
	if (fstat(n, &st2) < 0 || st2.st_dev != st.st_dev || st2.st_ino != st.st_ino ||
	    st2.st_rdev != st.st_rdev) {
		close(n);
		return -ESTALE;
	}
	return n;
}

static int setup_endpoint(ab_pty_relay *r, struct endpoint *ep, int orig, int acc, unsigned ev,
			  const char *what, ab_err *err)
{
	ep->orig = orig;
	ep->fd = reopen_nonblock(orig, acc);
	ep->mode = EP_OWN;
	if (ep->fd < 0) {
		ep->fd = orig;
		ep->mode = EP_BORROWED;
	}
	int ret = ab_loop_watch(r->loop, ep->fd, ev, relay_cb, r);
	if (ret == -EPERM) { /* epoll cannot watch it: regular file, /dev/null */
		if (ep->mode == EP_OWN)
			close(ep->fd);
		ep->fd = orig;
		ep->mode = EP_FILE;
		return 0;
	}
	if (ret < 0)
		return ab_fail(err, -ret, "watch %s (fd %d)", what, orig);
	ep->watched = true;
	if (ep->mode == EP_BORROWED) {
		int fl = fcntl(orig, F_GETFL);
		if (fl < 0)
			return ab_fail(err, errno, "%s (fd %d) flags", what, orig);
		if (!(fl & O_NONBLOCK)) {
			if (fcntl(orig, F_SETFL, fl | O_NONBLOCK) < 0)
				return ab_fail(err, errno, "%s (fd %d) O_NONBLOCK", what, orig);
			ep->set_nonblock = true;
		}
	}
	return 0;
}

static int setup_master(ab_pty_relay *r, int master, ab_err *err)
{
	int fl = fcntl(master, F_GETFL);
	if (fl < 0)
		return ab_fail(err, errno, "pty master");
	r->master_flags = fl;
	if (fcntl(master, F_SETFL, fl | O_NONBLOCK) < 0)
		return ab_fail(err, errno, "pty master O_NONBLOCK");
	r->master_flags_set = true;
	int ret = ab_loop_watch(r->loop, master, AB_EV_READ, relay_cb, r);
	if (ret < 0)
		return ab_fail(err, -ret, "watch pty master");
	r->master_watched = true;
	return 0;
}

/* Raw mode exactly like `ssh -t` / script(1): cfmakeraw (no echo, no
 * canonical mode, no signals from ^C/^Z - they reach the inner session as
 * bytes - no input translation, no output post-processing: the inner pty
 * already turns \n into \r\n), VMIN 1, VTIME 0. */
static int set_raw(ab_pty_relay *r, ab_err *err)
{
	struct termios t;
	if (tcgetattr(r->in.orig, &t) < 0)
		return 0; /* not a terminal: nothing to do */
	r->saved_tio = t;
	r->tio_saved = true;
	cfmakeraw(&t);
	t.c_cc[VMIN] = 1;
	t.c_cc[VTIME] = 0;
	int ret;
	while ((ret = tcsetattr(r->in.orig, TCSADRAIN, &t)) < 0 && errno == EINTR)
		;
	if (ret < 0)
		return ab_fail(err, errno, "set the terminal to raw mode");
	return 0;
}

/* A write to a pipe whose reader is gone must give EPIPE (-> out_dead), not
 * kill agentbox with the terminal still raw.  Process-wide, but the relay runs
 * after clone, so the sandbox does not inherit it; the caller's own choice
 * (ignored, handled, blocked) is left alone. */
static void ignore_sigpipe(ab_pty_relay *r)
{
	struct sigaction old, ign = {.sa_handler = SIG_IGN};
	if (sigaction(SIGPIPE, NULL, &old) == 0 && old.sa_handler == SIG_DFL &&
	    !(old.sa_flags & SA_SIGINFO)) {
		sigemptyset(&ign.sa_mask);
		r->sigpipe_set = sigaction(SIGPIPE, &ign, NULL) == 0;
	}
}

int ab_pty_relay_start(ab_loop *loop, int in_fd, int out_fd, int master, ab_pty_relay **out,
		       ab_err *err)
{
	if (!loop || in_fd < 0 || out_fd < 0 || master < 0 || !out) {
		if (master >= 0)
			close(master);
		return ab_fail(err, EINVAL, "pty relay");
	}
	ab_pty_relay *r = calloc(1, sizeof(*r));
	if (!r) {
		close(master);
		return ab_fail(err, ENOMEM, "pty relay");
	}
	r->loop = loop;
	r->master = master;
	r->in = (struct endpoint){.orig = in_fd, .fd = -1, .mode = EP_BORROWED};
	r->out = (struct endpoint){.orig = out_fd, .fd = -1, .mode = EP_BORROWED};

	int ret = setup_master(r, master, err);
	if (ret >= 0)
		ret = setup_endpoint(r, &r->in, in_fd, O_RDONLY, AB_EV_READ, "terminal input", err);
	if (ret >= 0)
		ret = setup_endpoint(r, &r->out, out_fd, O_WRONLY, AB_EV_WRITE, "terminal output",
				     err);
	if (ret >= 0)
		ret = set_raw(r, err);
	if (ret < 0) {
		ab_pty_relay_free(r); /* restores whatever was changed */
		return ret;
	}
	ab_pty_relay_resize(r);
	ignore_sigpipe(r);
	r->started = true;
	relay_update(r);
	*out = r;
	return 0;
}

void ab_pty_relay_pass_clipboard(ab_pty_relay *r, bool pass)
{
	if (r)
		r->pass_clipboard = pass;
}

void ab_pty_relay_resize(ab_pty_relay *r)
{
	struct winsize ws = {0};
	if (!r)
		return;
	/* Prefer a non-zero size: in_fd first, then out_fd. */
	bool ok = ab_pty_get_winsize(r->in.orig, &ws) && ws.ws_row && ws.ws_col;
	if (!ok)
		ok = ab_pty_get_winsize(r->out.orig, &ws);
	/* The kernel sends SIGWINCH to the inner foreground group on a change. */
	if (ok)
		(void)ioctl(r->master, TIOCSWINSZ, &ws);
}

void ab_pty_relay_pause(ab_pty_relay *r, bool pause)
{
	if (!r || r->paused == pause)
		return;
	r->paused = pause;
	if (!pause) {
		/* a full-screen program redraws on a size change: one row less,
		 * then the real size (two SIGWINCHs; it reads the last) */
		struct winsize ws = {0};
		if (ioctl(r->master, TIOCGWINSZ, &ws) == 0 && ws.ws_row > 1) {
			ws.ws_row--;
			(void)ioctl(r->master, TIOCSWINSZ, &ws);
		}
		ab_pty_relay_resize(r);
	}
	relay_update(r);
}

static bool wait_writable(int fd, uint64_t deadline)
{
	uint64_t now = ab_now_ms();
	if (now >= deadline)
		return false;
	struct pollfd p = {.fd = fd, .events = POLLOUT};
	int n = poll(&p, 1, (int)(deadline - now));
	return n > 0 && !(p.revents & POLLNVAL);
}

/* Flush what the master still holds to the terminal, bounded in time and
 * bytes: the command has exited, its last output must not be lost. */
static void relay_drain(ab_pty_relay *r)
{
	uint64_t deadline = ab_now_ms() + DRAIN_MS;
	size_t budget = DRAIN_MAX_BYTES;
	while (!r->out_dead) {
		out_write(r);
		if (want_out_write(r)) { /* EAGAIN */
			if (!wait_writable(r->out.fd, deadline))
				break;
			continue;
		}
		if (r->master_eof || budget == 0 || ab_now_ms() >= deadline)
			break;
		ssize_t n = master_read(r);
		if (n <= 0)
			break;
		budget -= (size_t)n > budget ? budget : (size_t)n;
	}
}

/* After unwatching: give back the caller's flags, close our own fd. */
static void restore_endpoint(struct endpoint *ep)
{
	if (ep->set_nonblock) {
		int fl = fcntl(ep->orig, F_GETFL);
		if (fl >= 0)
			(void)fcntl(ep->orig, F_SETFL, fl & ~O_NONBLOCK);
		ep->set_nonblock = false;
	}
	if (ep->mode == EP_OWN && ep->fd >= 0)
		close(ep->fd);
	ep->fd = -1;
}

void ab_pty_relay_free(ab_pty_relay *r)
{
	if (!r)
		return;
	r->paused = false;
	if (r->started)
		relay_drain(r);
	if (r->in_timer)
		ab_loop_timer_cancel(r->loop, r->in_timer);
	if (r->master_watched)
		ab_loop_unwatch(r->loop, r->master);
	/* in and out may share an fd number: unwatch both before closing */
	if (r->in.watched)
		ab_loop_unwatch(r->loop, r->in.fd);
	if (r->out.watched)
		ab_loop_unwatch(r->loop, r->out.fd);
	if (r->tio_saved) {
		while (tcsetattr(r->in.orig, TCSADRAIN, &r->saved_tio) < 0 && errno == EINTR)
			;
		/* Drop input still pending on the user's terminal: a terminal's
		 * answer to a query the command sent last (some report text the
		 * command chose, like a window title) must not land in the shell
		 * the user returns to. */
		(void)tcflush(r->in.orig, TCIFLUSH);
	}
	restore_endpoint(&r->out);
	restore_endpoint(&r->in);
	if (r->master_flags_set)
		(void)fcntl(r->master, F_SETFL, r->master_flags);
	close(r->master);
	if (r->sigpipe_set) {
		struct sigaction dfl = {.sa_handler = SIG_DFL};
		sigemptyset(&dfl.sa_mask);
		(void)sigaction(SIGPIPE, &dfl, NULL);
	}
	ab_explicit_bzero(r->to_master.d, sizeof(r->to_master.d)); /* keystrokes */
	free(r);
}
