/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for the pty module (src/sandbox/pty.c).  No privileges needed: the
 * "outer terminal" is a pty pair from the host's /dev/ptmx (om = the user's
 * terminal emulator, os = agentbox's stdin/stdout), the "inner" pty comes
 * from ab_pty_open on the same devpts (im = master handed to the parent,
 * is = what the command gets).
 */
#include "unit.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/capability.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <termios.h>

#include "agentbox/loop.h"
#include "../../src/sandbox/pty.h"

#define GUARD_MS 10000
#define MIB (1u << 20)

struct fixture {
	ab_loop *loop;
	int om, os; /* outer pair */
	int im, is; /* inner pair */
	struct termios os_before;
	int os_flags_before;
};

/* The relay owns (closes) the master it is given: hand it a duplicate so the
 * fixture's f->im stays valid for the next test step. */
static int mdup(struct fixture *f)
{
	int d = fcntl(f->im, F_DUPFD_CLOEXEC, 3);
	assert_true(d >= 0);
	return d;
}

static void set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);
	assert_true(fl >= 0);
	assert_int_equal(fcntl(fd, F_SETFL, fl | O_NONBLOCK), 0);
}

static void make_raw(int fd)
{
	struct termios t;
	assert_int_equal(tcgetattr(fd, &t), 0);
	cfmakeraw(&t);
	assert_int_equal(tcsetattr(fd, TCSANOW, &t), 0);
}

static void open_outer(int *m, int *s)
{
	char name[128];
	*m = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
	assert_true(*m >= 0);
	assert_int_equal(grantpt(*m), 0);
	assert_int_equal(unlockpt(*m), 0);
	assert_int_equal(ptsname_r(*m, name, sizeof(name)), 0);
	*s = open(name, O_RDWR | O_NOCTTY | O_CLOEXEC);
	assert_true(*s >= 0);
}

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	ab_err err = {0};
	assert_non_null(f);
	assert_int_equal(ab_loop_new(&f->loop, &err), 0);
	open_outer(&f->om, &f->os);
	struct winsize ws = {.ws_row = 24, .ws_col = 80};
	assert_int_equal(ioctl(f->os, TIOCSWINSZ, &ws), 0);
	assert_int_equal(ab_pty_open(&f->im, &f->is, NULL, &err), 0);
	make_raw(f->is);
	set_nonblock(f->om);
	set_nonblock(f->is);
	assert_int_equal(tcgetattr(f->os, &f->os_before), 0);
	f->os_flags_before = fcntl(f->os, F_GETFL);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	ab_loop_free(f->loop);
	close(f->om);
	close(f->os);
	close(f->im);
	if (f->is >= 0)
		close(f->is);
	free(f);
	return 0;
}

/* ---- helpers: drive the loop until a sink has collected enough ---- */

struct sink {
	int fd;
	size_t want, len;
	unsigned char buf[4096];
	uint64_t deadline;
};

static void sink_tick(ab_loop *l, uint64_t id, void *data)
{
	struct sink *s = data;
	while (s->len < s->want) {
		size_t room = sizeof(s->buf) - s->len;
		ssize_t n = read(s->fd, s->buf + s->len,
				 room < s->want - s->len ? room : s->want - s->len);
		if (n <= 0)
			break;
		s->len += (size_t)n;
	}
	if (s->len >= s->want || ab_now_ms() > s->deadline)
		ab_loop_stop(l);
	else
		ab_loop_timer(l, 1, sink_tick, s);
}

/* Run the loop until `want` bytes were read from fd; returns them (static). */
static const unsigned char *collect(ab_loop *l, int fd, size_t want)
{
	static struct sink s;
	s = (struct sink){.fd = fd, .want = want, .deadline = ab_now_ms() + GUARD_MS};
	ab_loop_timer(l, 0, sink_tick, &s);
	assert_int_equal(ab_loop_run(l), 0);
	assert_int_equal(s.len, want);
	return s.buf;
}

static void stop_cb(ab_loop *l, uint64_t id, void *data)
{
	ab_loop_stop(l);
}

static void pump_for(ab_loop *l, uint64_t ms)
{
	ab_loop_timer(l, ms, stop_cb, NULL);
	assert_int_equal(ab_loop_run(l), 0);
}

static uint64_t cpu_ms(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return (uint64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000 +
	       (uint64_t)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1000;
}

/* Pump `ms` and check the loop slept rather than spun. */
static void assert_idle(ab_loop *l, uint64_t ms)
{
	uint64_t c0 = cpu_ms();
	pump_for(l, ms);
	assert_true(cpu_ms() - c0 < ms / 3);
}

static void assert_termios_equal(const struct termios *a, const struct termios *b)
{
	assert_int_equal(a->c_iflag, b->c_iflag);
	assert_int_equal(a->c_oflag, b->c_oflag);
	assert_int_equal(a->c_cflag, b->c_cflag);
	assert_int_equal(a->c_lflag, b->c_lflag);
	assert_memory_equal(a->c_cc, b->c_cc, sizeof(a->c_cc));
}

static void assert_restored(struct fixture *f)
{
	struct termios now;
	assert_int_equal(tcgetattr(f->os, &now), 0);
	assert_termios_equal(&now, &f->os_before);
	assert_int_equal(fcntl(f->os, F_GETFL), f->os_flags_before);
}

static void write_all(int fd, const void *p, size_t n)
{
	assert_int_equal(write(fd, p, n), (ssize_t)n);
}

/* ---- ab_pty_open / ab_pty_make_controlling ---- */

static void test_open(void **state)
{
	int m = -1, s = -1;
	ab_err err = {0};
	struct winsize ws = {.ws_row = 33, .ws_col = 111}, got;
	assert_int_equal(ab_pty_open(&m, &s, &ws, &err), 0);
	assert_true(fcntl(m, F_GETFD) & FD_CLOEXEC);
	assert_true(fcntl(s, F_GETFD) & FD_CLOEXEC);
	assert_int_equal(fcntl(m, F_GETFL) & O_ACCMODE, O_RDWR);
	assert_int_equal(fcntl(s, F_GETFL) & O_ACCMODE, O_RDWR);
	assert_true(isatty(s));
	assert_true(ab_pty_get_winsize(s, &got));
	assert_int_equal(got.ws_row, 33);
	assert_int_equal(got.ws_col, 111);
	/* the slave really belongs to this master */
	char name[128];
	struct stat a, b;
	assert_int_equal(ptsname_r(m, name, sizeof(name)), 0);
	assert_int_equal(stat(name, &a), 0);
	assert_int_equal(fstat(s, &b), 0);
	assert_int_equal(a.st_rdev, b.st_rdev);
	close(m);
	close(s);

	int p[2];
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	assert_false(ab_pty_get_winsize(p[0], &got));
	assert_false(ab_pty_get_winsize(-1, &got));
	close(p[0]);
	close(p[1]);
}

/* In a child: make the slave controlling; report problems as exit codes. */
static int controlling_child(int s, int as_fd0)
{
	const char *what = NULL;
	int bad_fd = -1;
	if (as_fd0) { /* the slave already sits on fd 0 (with CLOEXEC) */
		if (dup3(s, 0, O_CLOEXEC) != 0)
			return 10;
		close(s);
		s = 0;
	}
	if (ab_pty_make_controlling(s, 7, &what, &bad_fd) < 0)
		return 11;
	if (bad_fd != -1)
		return 17;
	if (getsid(0) != getpid())
		return 12;
	if (tcgetpgrp(0) != getpgrp())
		return 13;
	for (int fd = 0; fd <= 2; fd++)
		if (!isatty(fd) || (fcntl(fd, F_GETFD) & FD_CLOEXEC))
			return 14;
	if (s > 2 && fcntl(s, F_GETFD) != -1)
		return 15;
	if (write(1, "ok", 2) != 2)
		return 16;
	return 0;
}

static void test_make_controlling(void **state)
{
	for (int as_fd0 = 0; as_fd0 <= 1; as_fd0++) {
		int m = -1, s = -1;
		ab_err err = {0};
		assert_int_equal(ab_pty_open(&m, &s, NULL, &err), 0);
		pid_t pid = fork();
		assert_true(pid >= 0);
		if (pid == 0)
			_exit(controlling_child(s, as_fd0));
		close(s);
		int st;
		assert_int_equal(waitpid(pid, &st, 0), pid);
		assert_true(WIFEXITED(st));
		assert_int_equal(WEXITSTATUS(st), 0);
		char buf[8] = {0};
		assert_int_equal(read(m, buf, sizeof(buf)), 2);
		assert_string_equal(buf, "ok");
		close(m);
	}
	const char *what = NULL;
	int bad_fd = 0;
	assert_int_equal(ab_pty_make_controlling(-1, 7, &what, &bad_fd), -EBADF);
	assert_string_equal(what, "pty slave");
	assert_int_equal(bad_fd, -1);
}

/* ---- relay ---- */

static void test_relay_both_ways(void **state)
{
	struct fixture *f = *state;
	ab_pty_relay *r = NULL;
	ab_err err = {0};
	assert_int_equal(ab_pty_relay_start(f->loop, f->os, f->os, mdup(f), &r, &err), 0);

	/* raw like ssh -t; the shared description untouched */
	struct termios t;
	assert_int_equal(tcgetattr(f->os, &t), 0);
	assert_int_equal(t.c_lflag & (ICANON | ECHO | ISIG | IEXTEN), 0);
	assert_int_equal(t.c_oflag & OPOST, 0);
	assert_int_equal(t.c_iflag & (ICRNL | IXON | ISTRIP), 0);
	assert_int_equal(t.c_cc[VMIN], 1);
	assert_int_equal(t.c_cc[VTIME], 0);
	assert_int_equal(fcntl(f->os, F_GETFL), f->os_flags_before);

	/* keystrokes: ^C, ^Z, CR and ^D arrive as bytes, nothing echoed */
	static const char keys[] = "hi\r\x03\x1a\x04\x7f\x1b[A";
	write_all(f->om, keys, sizeof(keys) - 1);
	assert_memory_equal(collect(f->loop, f->is, sizeof(keys) - 1), keys, sizeof(keys) - 1);
	char c;
	assert_int_equal(read(f->om, &c, 1), -1); /* no echo */

	/* output: no \n -> \r\n added by the outer side */
	static const char out[] = "line\n\x1b[2J\r\n";
	write_all(f->is, out, sizeof(out) - 1);
	assert_memory_equal(collect(f->loop, f->om, sizeof(out) - 1), out, sizeof(out) - 1);

	ab_pty_relay_free(r);
	assert_restored(f);
	ab_pty_relay_free(NULL);
}

static void test_winsize(void **state)
{
	struct fixture *f = *state;
	ab_pty_relay *r = NULL;
	ab_err err = {0};
	struct winsize ws;
	assert_int_equal(ab_pty_relay_start(f->loop, f->os, f->os, mdup(f), &r, &err), 0);
	assert_true(ab_pty_get_winsize(f->is, &ws));
	assert_int_equal(ws.ws_row, 24);
	assert_int_equal(ws.ws_col, 80);

	static const struct winsize sizes[] = {
		{.ws_row = 50, .ws_col = 132},
		{.ws_row = 1, .ws_col = 1},
		{.ws_row = 65535, .ws_col = 65535, .ws_xpixel = 7, .ws_ypixel = 9},
	};
	for (size_t i = 0; i < AB_ARRAY_SIZE(sizes); i++) {
		assert_int_equal(ioctl(f->os, TIOCSWINSZ, &sizes[i]), 0);
		ab_pty_relay_resize(r);
		assert_true(ab_pty_get_winsize(f->is, &ws));
		assert_memory_equal(&ws, &sizes[i], sizeof(ws));
	}
	ab_pty_relay_resize(NULL);
	ab_pty_relay_free(r);
	assert_restored(f);
}

/* Feed `total` pattern bytes into src and check them byte-exact on dst, all
 * non-blocking on the relay's own loop. */
struct stream {
	int src, dst;
	size_t total, sent, got;
	bool bad;
};

static unsigned char pat(size_t i)
{
	return (unsigned char)(i * 131u + (i >> 12));
}

static void feed_cb(ab_loop *l, int fd, unsigned ev, void *data)
{
	struct stream *s = data;
	unsigned char buf[8192];
	size_t n = s->total - s->sent < sizeof(buf) ? s->total - s->sent : sizeof(buf);
	for (size_t i = 0; i < n; i++)
		buf[i] = pat(s->sent + i);
	ssize_t w = write(fd, buf, n);
	if (w > 0)
		s->sent += (size_t)w;
	if (s->sent == s->total)
		ab_loop_unwatch(l, fd);
}

static void check_cb(ab_loop *l, int fd, unsigned ev, void *data)
{
	struct stream *s = data;
	unsigned char buf[8192];
	ssize_t n = read(fd, buf, sizeof(buf));
	for (ssize_t i = 0; i < n; i++)
		if (buf[i] != pat(s->got + (size_t)i))
			s->bad = true;
	if (n > 0)
		s->got += (size_t)n;
	if (s->got >= s->total || s->bad) {
		ab_loop_unwatch(l, fd);
		ab_loop_stop(l);
	}
}

static void run_stream(ab_loop *l, struct stream *s, bool feed)
{
	if (feed)
		assert_int_equal(ab_loop_watch(l, s->src, AB_EV_WRITE, feed_cb, s), 0);
	assert_int_equal(ab_loop_watch(l, s->dst, AB_EV_READ, check_cb, s), 0);
	ab_loop_timer(l, GUARD_MS, stop_cb, NULL);
	assert_int_equal(ab_loop_run(l), 0);
	assert_false(s->bad);
	assert_int_equal(s->sent, s->total);
	assert_int_equal(s->got, s->total);
}

static void test_one_mib_each_way(void **state)
{
	struct fixture *f = *state;
	ab_pty_relay *r = NULL;
	ab_err err = {0};
	assert_int_equal(ab_pty_relay_start(f->loop, f->os, f->os, mdup(f), &r, &err), 0);
	struct stream in = {.src = f->om, .dst = f->is, .total = MIB};
	run_stream(f->loop, &in, true);
	struct stream out = {.src = f->is, .dst = f->om, .total = MIB};
	run_stream(f->loop, &out, true);
	ab_pty_relay_free(r);
	assert_restored(f);
}

/* Nobody reads the outer terminal: the relay must stop reading the master
 * (the inner writer gets EAGAIN after a bounded amount), without spinning;
 * once the terminal reads again everything arrives in order. */
static void test_backpressure(void **state)
{
	struct fixture *f = *state;
	ab_pty_relay *r = NULL;
	ab_err err = {0};
	assert_int_equal(ab_pty_relay_start(f->loop, f->os, f->os, mdup(f), &r, &err), 0);
	struct stream s = {.src = f->is, .dst = f->om, .total = MIB};
	int stalls = 0;
	while (stalls < 5 && s.sent < s.total) {
		size_t before = s.sent;
		for (int k = 0; k < 64; k++)
			feed_cb(f->loop, f->is, AB_EV_WRITE, &s);
		pump_for(f->loop, 10);
		stalls = s.sent == before ? stalls + 1 : 0;
	}
	assert_true(s.sent < s.total / 2); /* bounded by the buffers on the way */
	assert_true(s.sent > 64 * 1024);   /* the relay buffered its share */
	assert_idle(f->loop, 300);
	run_stream(f->loop, &s, true);

	/* and the other way: the inner side does not read */
	struct stream in = {.src = f->om, .dst = f->is, .total = MIB};
	stalls = 0;
	while (stalls < 5 && in.sent < in.total) {
		size_t before = in.sent;
		for (int k = 0; k < 64; k++)
			feed_cb(f->loop, f->om, AB_EV_WRITE, &in);
		pump_for(f->loop, 10);
		stalls = in.sent == before ? stalls + 1 : 0;
	}
	assert_true(in.sent < in.total / 2);
	assert_idle(f->loop, 300);
	run_stream(f->loop, &in, true);
	ab_pty_relay_free(r);
	assert_restored(f);
}

/* The inner side closes its slave: what it wrote last still arrives; the
 * relay stops that direction and does not spin on the hung-up master. */
static void test_slave_closed(void **state)
{
	struct fixture *f = *state;
	ab_pty_relay *r = NULL;
	ab_err err = {0};
	assert_int_equal(ab_pty_relay_start(f->loop, f->os, f->os, mdup(f), &r, &err), 0);
	write_all(f->is, "bye", 3);
	close(f->is);
	f->is = -1;
	assert_memory_equal(collect(f->loop, f->om, 3), "bye", 3);
	write_all(f->om, "late keys", 9); /* nobody reads them: dropped */
	assert_idle(f->loop, 300);
	ab_pty_relay_free(r);
	assert_restored(f);
}

/* The command's last output, never pumped through the loop, is drained by
 * free - both when the slave is closed (EIO) and still open (EAGAIN). */
static void test_drain_on_free(void **state)
{
	struct fixture *f = *state;
	ab_err err = {0};
	for (int closed = 0; closed <= 1; closed++) {
		ab_pty_relay *r = NULL;
		assert_int_equal(ab_pty_relay_start(f->loop, f->os, f->os, mdup(f), &r, &err), 0);
		write_all(f->is, "last words", 10);
		if (closed) {
			close(f->is);
			f->is = -1;
		}
		uint64_t t0 = ab_now_ms();
		ab_pty_relay_free(r);
		assert_true(ab_now_ms() - t0 < 900);
		char buf[32];
		struct pollfd p = {.fd = f->om, .events = POLLIN};
		assert_int_equal(poll(&p, 1, 2000), 1);
		assert_int_equal(read(f->om, buf, sizeof(buf)), 10);
		assert_memory_equal(buf, "last words", 10);
		assert_restored(f);
	}
}

/* stdin is a pipe that reaches EOF: input stops (the master stays open),
 * output keeps flowing, no spinning, no termios touched. */
static void test_input_eof(void **state)
{
	struct fixture *f = *state;
	ab_pty_relay *r = NULL;
	ab_err err = {0};
	int p[2];
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	write_all(p[1], "abc", 3);
	close(p[1]);
	int m = mdup(f);
	assert_int_equal(ab_pty_relay_start(f->loop, p[0], f->os, m, &r, &err), 0);
	struct termios t;
	assert_int_equal(tcgetattr(f->os, &t), 0);
	assert_termios_equal(&t, &f->os_before); /* in_fd is not a tty: no raw mode */
	assert_memory_equal(collect(f->loop, f->is, 3), "abc", 3);
	assert_idle(f->loop, 200);
	write_all(f->is, "still here", 10);
	assert_memory_equal(collect(f->loop, f->om, 10), "still here", 10);
	assert_true(fcntl(m, F_GETFD) >= 0); /* EOF on input does not close the master */
	ab_pty_relay_free(r);
	assert_int_equal(fcntl(p[0], F_GETFL) & O_NONBLOCK, 0);
	close(p[0]);
}

/* stdin and stdout regular files (epoll cannot watch them). */
static void test_regular_files(void **state)
{
	struct fixture *f = *state;
	ab_pty_relay *r = NULL;
	ab_err err = {0};
	FILE *in = tmpfile(), *out = tmpfile();
	assert_non_null(in);
	assert_non_null(out);
	write_all(fileno(in), "from a file", 11);
	assert_int_equal(lseek(fileno(in), 0, SEEK_SET), 0);
	assert_int_equal(ab_pty_relay_start(f->loop, fileno(in), fileno(out), mdup(f), &r, &err),
			 0);
	assert_memory_equal(collect(f->loop, f->is, 11), "from a file", 11);
	struct stream s = {.src = f->is, .total = 256 * 1024};
	while (s.sent < s.total) {
		feed_cb(f->loop, f->is, AB_EV_WRITE, &s);
		pump_for(f->loop, 1);
	}
	ab_pty_relay_free(r);
	assert_int_equal(lseek(fileno(out), 0, SEEK_CUR), (off_t)s.total);
	static unsigned char buf[256 * 1024];
	assert_int_equal(pread(fileno(out), buf, sizeof(buf), 0), (ssize_t)sizeof(buf));
	for (size_t i = 0; i < sizeof(buf); i++)
		if (buf[i] != pat(i))
			fail_msg("byte %zu differs", i);
	fclose(in);
	fclose(out);
}

/* A socket cannot be reopened: the relay sets O_NONBLOCK on the caller's fd
 * (one fd for both directions here) and gives the flags back at the end. */
static void test_borrowed_socket(void **state)
{
	struct fixture *f = *state;
	ab_pty_relay *r = NULL;
	ab_err err = {0};
	int sv[2];
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	int before = fcntl(sv[0], F_GETFL);
	assert_int_equal(ab_pty_relay_start(f->loop, sv[0], sv[0], mdup(f), &r, &err), 0);
	set_nonblock(sv[1]);
	struct stream in = {.src = sv[1], .dst = f->is, .total = MIB};
	run_stream(f->loop, &in, true);
	struct stream out = {.src = f->is, .dst = sv[1], .total = MIB};
	run_stream(f->loop, &out, true);
	ab_pty_relay_free(r);
	assert_int_equal(fcntl(sv[0], F_GETFL), before);
	close(sv[0]);
	close(sv[1]);
}

/* An exclusive (TIOCEXCL) terminal cannot be reopened without
 * CAP_SYS_ADMIN: the fallback must still relay and restore the flags.
 * Runs in a child that drops CAP_SYS_ADMIN when root. */
static int exclusive_child(struct fixture *f)
{
	if (geteuid() == 0) {
		cap_t c = cap_get_proc();
		cap_value_t v = CAP_SYS_ADMIN;
		if (!c || cap_set_flag(c, CAP_EFFECTIVE, 1, &v, CAP_CLEAR) < 0 ||
		    cap_set_proc(c) < 0)
			return 20;
		cap_free(c);
	}
	if (ioctl(f->os, TIOCEXCL) < 0)
		return 21;
	ab_pty_relay *r = NULL;
	ab_err err = {0};
	ab_loop *l = NULL; /* not the parent's: an epoll set is shared across fork */
	if (ab_loop_new(&l, &err) < 0 || ab_pty_relay_start(l, f->os, f->os, mdup(f), &r, &err) < 0)
		return 22;
	if (write(f->is, "excl", 4) != 4)
		return 26;
	struct sink *s = calloc(1, sizeof(*s));
	if (!s)
		return 27;
	*s = (struct sink){.fd = f->om, .want = 4, .deadline = ab_now_ms() + GUARD_MS};
	ab_loop_timer(l, 0, sink_tick, s);
	ab_loop_run(l);
	if (s->len != 4 || memcmp(s->buf, "excl", 4) != 0)
		return 23;
	ab_pty_relay_free(r);
	ab_loop_free(l);
	struct termios t;
	if (tcgetattr(f->os, &t) < 0 || t.c_lflag != f->os_before.c_lflag)
		return 24;
	if (fcntl(f->os, F_GETFL) != f->os_flags_before)
		return 25;
	free(s);
	return 0;
}

static void test_exclusive_tty_fallback(void **state)
{
	struct fixture *f = *state;
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		_exit(exclusive_child(f));
	int st;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
}

static void test_bad_args(void **state)
{
	struct fixture *f = *state;
	ab_pty_relay *r = NULL;
	ab_err err = {0};
	assert_true(ab_pty_relay_start(NULL, f->os, f->os, mdup(f), &r, &err) < 0);
	assert_true(ab_pty_relay_start(f->loop, -1, f->os, mdup(f), &r, &err) < 0);
	assert_true(ab_pty_relay_start(f->loop, f->os, f->os, -1, &r, &err) < 0);
	/* a closed master fails cleanly and leaves the terminal as it was */
	int dead = dup(f->im);
	close(dead);
	assert_true(ab_pty_relay_start(f->loop, f->os, f->os, dead, &r, &err) < 0);
	assert_non_null(strstr(err.msg, "pty master"));
	assert_restored(f);
	/* the master is closed on every failure path too */
	static const int bad_in[] = {-1, 0};
	for (size_t i = 0; i < AB_ARRAY_SIZE(bad_in); i++) {
		int m = mdup(f);
		ab_loop *l = bad_in[i] < 0 ? f->loop : NULL;
		int in = bad_in[i] < 0 ? -1 : f->os;
		assert_true(ab_pty_relay_start(l, in, f->os, m, &r, &err) < 0);
		assert_int_equal(fcntl(m, F_GETFD), -1);
		assert_int_equal(errno, EBADF);
	}
	/* a regular file as master: not a tty, cannot be watched */
	FILE *tf = tmpfile();
	assert_non_null(tf);
	int m = fcntl(fileno(tf), F_DUPFD_CLOEXEC, 3);
	assert_true(ab_pty_relay_start(f->loop, f->os, f->os, m, &r, &err) < 0);
	assert_int_equal(fcntl(m, F_GETFD), -1);
	fclose(tf);
	assert_restored(f);
}

/* free closes the master it was given. */
static void test_owns_master(void **state)
{
	struct fixture *f = *state;
	ab_pty_relay *r = NULL;
	ab_err err = {0};
	int m = mdup(f);
	assert_int_equal(ab_pty_relay_start(f->loop, f->os, f->os, m, &r, &err), 0);
	assert_true(fcntl(m, F_GETFL) & O_NONBLOCK);
	ab_pty_relay_free(r);
	assert_int_equal(fcntl(m, F_GETFD), -1);
	assert_int_equal(errno, EBADF);
}

/* stdout is a pipe whose reader went away: no SIGPIPE death, the master keeps
 * being drained (the inside never blocks), SIGPIPE's disposition restored. */
static void test_sigpipe(void **state)
{
	struct fixture *f = *state;
	ab_pty_relay *r = NULL;
	ab_err err = {0};
	struct sigaction sa;
	int p[2];
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	close(p[0]);
	assert_int_equal(sigaction(SIGPIPE, NULL, &sa), 0);
	assert_true(sa.sa_handler == SIG_DFL);
	assert_int_equal(ab_pty_relay_start(f->loop, f->os, p[1], mdup(f), &r, &err), 0);
	assert_int_equal(sigaction(SIGPIPE, NULL, &sa), 0);
	assert_true(sa.sa_handler == SIG_IGN);
	struct stream s = {.src = f->is, .total = MIB};
	for (int i = 0; i < 2000 && s.sent < s.total; i++) {
		feed_cb(f->loop, f->is, AB_EV_WRITE, &s);
		pump_for(f->loop, 1);
	}
	assert_int_equal(s.sent, s.total);
	ab_pty_relay_free(r);
	assert_int_equal(sigaction(SIGPIPE, NULL, &sa), 0);
	assert_true(sa.sa_handler == SIG_DFL);
	close(p[1]);
	assert_restored(f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_open),
		cmocka_unit_test(test_make_controlling),
		cmocka_unit_test_setup_teardown(test_relay_both_ways, setup, teardown),
		cmocka_unit_test_setup_teardown(test_winsize, setup, teardown),
		cmocka_unit_test_setup_teardown(test_one_mib_each_way, setup, teardown),
		cmocka_unit_test_setup_teardown(test_backpressure, setup, teardown),
		cmocka_unit_test_setup_teardown(test_slave_closed, setup, teardown),
		cmocka_unit_test_setup_teardown(test_drain_on_free, setup, teardown),
		cmocka_unit_test_setup_teardown(test_input_eof, setup, teardown),
		cmocka_unit_test_setup_teardown(test_regular_files, setup, teardown),
		cmocka_unit_test_setup_teardown(test_borrowed_socket, setup, teardown),
		cmocka_unit_test_setup_teardown(test_exclusive_tty_fallback, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bad_args, setup, teardown),
		cmocka_unit_test_setup_teardown(test_owns_master, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sigpipe, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
