/* SPDX-License-Identifier: MIT */
/*
 * run --ask, the terminal side (parent, on the event loop; docs/ask.md).
 *
 * The proxy holds a request to a host no rule lists and calls on_question.
 * Questions wait in a queue; the first is drawn on the last lines of
 * agentbox's own controlling terminal (/dev/tty, opened O_CLOEXEC: the
 * sandbox never holds it), with the relay paused so that neither the
 * command's output nor the user's keystrokes pass meanwhile.  Input pending
 * on the terminal when the question appears is dropped (it was typed for
 * the command), and the keys are read through ab_askkey_feed, which skips
 * escape sequences whole (a terminal's replies to queries).  Nothing the
 * sandbox writes reaches that input: its output goes to the relay, which is
 * paused, and from there only to the terminal's screen.
 */
#include "asker.h"

#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <termios.h>
#include <unistd.h>

#include "agentbox/ask.h"
#include "agentbox/netpolicy.h"
#include "agentbox/profile.h"
#include "agentbox/profile_edit.h"

#define ASK_QUEUE_MAX AB_PROXY_MAX_QUESTIONS
#define ASK_LINE 512
#define ASK_DIFF_CONTEXT 2

typedef struct ask_q {
	char host[AB_HOST_BUF];
	unsigned port;
	char request[ASK_LINE];
	char program[ASK_LINE];
	long pid;
	uint64_t t0;
} ask_q;

struct ab_asker {
	ab_loop *loop;
	ab_proxy *px;
	ab_pty_relay *relay;
	ab_audit *audit;
	const ab_plan *plan;
	pid_t init;
	int tty;
	ask_q q[ASK_QUEUE_MAX];
	size_t nq;
	bool showing;   /* q[0] is on the screen */
	unsigned drawn; /* lines the question occupies */
	uint64_t timer; /* q[0]'s timeout */
	uint64_t next;  /* the next question, from a 0 ms timer */
	ab_askkey keys;
	char *new_text; /* "always": the profile as it will be written */
	char *old_text; /* and as it was read (NULL: a new file) */
	bool closing;   /* ab_asker_free: no next question */
};

/* ------------------------------------------------------------ the screen */

static void tty_put(ab_asker *a, const char *s, size_t n)
{
	uint64_t deadline = ab_now_ms() + 1000;
	while (n) {
		ssize_t w = write(a->tty, s, n);
		if (w > 0) {
			s += w;
			n -= (size_t)w;
			continue;
		}
		if (w < 0 && errno == EINTR)
			continue;
		uint64_t now = ab_now_ms();
		struct pollfd p = {.fd = a->tty, .events = POLLOUT};
		if (w == 0 || errno != EAGAIN || now >= deadline ||
		    poll(&p, 1, (int)(deadline - now)) <= 0)
			return;
	}
}

static unsigned tty_rows(ab_asker *a, unsigned *cols)
{
	struct winsize ws = {0};
	if (ioctl(a->tty, TIOCGWINSZ, &ws) < 0 || !ws.ws_row || !ws.ws_col)
		ws.ws_row = 24, ws.ws_col = 80;
	*cols = ws.ws_col;
	return ws.ws_row;
}

/* Erase what the question drew and put the cursor (and attributes) back. */
static void undraw(ab_asker *a)
{
	if (!a->drawn)
		return;
	unsigned cols, rows = tty_rows(a, &cols);
	char buf[64];
	for (unsigned i = 0; i < a->drawn && i < rows; i++) {
		int n = snprintf(buf, sizeof(buf), "\033[%u;1H\033[2K", rows - i);
		tty_put(a, buf, (size_t)n);
	}
	tty_put(a, "\0338", 2);
	a->drawn = 0;
}

/* LINES (the last is where the cursor stays) on the bottom rows, over what
 * the command drew there; cursor and attributes saved first (DECSC). */
static void draw(ab_asker *a, const ab_strv *lines)
{
	if (a->drawn)
		undraw(a);
	unsigned cols, rows = tty_rows(a, &cols);
	size_t n = lines->n < rows ? lines->n : rows;
	tty_put(a, "\0337\033[0m", 6);
	char buf[64];
	for (size_t i = 0; i < n; i++) {
		/* taller than the screen (a long diff): its head, and the prompt */
		const char *l = lines->v[i < n - 1 ? i : lines->n - 1];
		int k = snprintf(buf, sizeof(buf), "\033[%zu;1H\033[2K", rows - n + 1 + i);
		tty_put(a, buf, (size_t)k);
		size_t len = strlen(l);
		tty_put(a, l, len < cols ? len : cols - 1);
	}
	a->drawn = (unsigned)n;
}

/* Printable ASCII only: what the sandbox chose (a path, argv) never drives
 * the terminal. */
static void printable(char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || (unsigned char)*s >= 0x7f)
			*s = '?';
}

static int push(ab_strv *v, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int push(ab_strv *v, const char *fmt, ...)
{
	char line[ASK_LINE * 2];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	return ab_strv_push(v, line);
}

static void draw_question(ab_asker *a, const char *note)
{
	const ask_q *q = &a->q[0];
	_cleanup_strv_ ab_strv l = {0};
	unsigned left = a->plan->ask_timeout_s;
	push(&l,
	     "\033[7m agentbox: the sandbox asks for a host its profile does not allow \033[0m");
	push(&l, "  host     %s   port %u", q->host, q->port);
	push(&l, "  program  %s", q->program[0] ? q->program : "(not known)");
	push(&l, "  request  %s", q->request);
	if (note)
		push(&l, "  %s", note);
	if (a->plan->ask_profile)
		push(&l,
		     "  [o] allow once  [r] allow for this run  [a] always (%s)  [d] deny   "
		     "(%u s, then deny) ",
		     a->plan->ask_profile, left);
	else
		push(&l, "  [o] allow once  [r] allow for this run  [d] deny   (%u s, then deny) ",
		     left);
	draw(a, &l);
}

/* ------------------------------------------------------------ the program */

/* The inode of the sandbox's TCP socket from CPORT to SPORT (its network
 * namespace's table, through INIT), or 0. */
static unsigned long sock_inode(pid_t init, uint16_t cport, uint16_t sport)
{
	static const char *const tables[] = {"tcp", "tcp6"};
	for (size_t t = 0; t < 2; t++) {
		char path[64], line[512];
		snprintf(path, sizeof(path), "/proc/%d/net/%s", (int)init, tables[t]);
		FILE *f = fopen(path, "re");
		if (!f)
			continue;
		unsigned long ino = 0;
		while (!ino && fgets(line, sizeof(line), f)) {
			char la[64], ra[64];
			unsigned lp, rp;
			unsigned long inode;
			if (sscanf(line,
				   " %*d: %63[0-9A-Fa-f]:%x %63[0-9A-Fa-f]:%x %*x %*s %*s %*s "
				   "%*d %*d %lu",
				   la, &lp, ra, &rp, &inode) == 5 &&
			    lp == cport && rp == sport)
				ino = inode;
		}
		fclose(f);
		if (ino)
			return ino;
	}
	return 0;
}

static bool holds_socket(const char *pid, const char *want)
{
	char path[320];
	snprintf(path, sizeof(path), "/proc/%s/fd", pid);
	DIR *d = opendir(path);
	if (!d)
		return false;
	bool found = false;
	struct dirent *e;
	while (!found && (e = readdir(d))) {
		char link[600], target[80];
		snprintf(link, sizeof(link), "/proc/%s/fd/%s", pid, e->d_name);
		ssize_t n = readlink(link, target, sizeof(target) - 1);
		found = n > 0 && (size_t)n == strlen(want) && memcmp(target, want, (size_t)n) == 0;
	}
	closedir(d);
	return found;
}

/* "comm: argv..." of the sandbox process holding the client socket (best
 * effort; a few /proc reads, once per question). */
static void find_program(ab_asker *a, ask_q *q, const ab_ask_question *aq)
{
	unsigned long ino =
		aq->client_port ? sock_inode(a->init, aq->client_port, aq->server_port) : 0;
	/* a socket's inode is unique: whoever holds it asked (the sandbox's
	 * processes are the only ones with sockets in its network namespace) */
	char want[48], path[320];
	snprintf(want, sizeof(want), "socket:[%lu]", ino);
	DIR *d = ino ? opendir("/proc") : NULL;
	struct dirent *e;
	long self = (long)getpid();
	while (d && (e = readdir(d))) {
		/* not agentbox itself: its supervisor carries out the sandbox's
		 * connects on a copy of the caller's socket, held a moment longer */
		if (e->d_name[0] < '1' || e->d_name[0] > '9' ||
		    strtol(e->d_name, NULL, 10) == self || !holds_socket(e->d_name, want))
			continue;
		char cmd[ASK_LINE] = "";
		snprintf(path, sizeof(path), "/proc/%s/cmdline", e->d_name);
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		ssize_t k = fd >= 0 ? read(fd, cmd, sizeof(cmd) - 1) : -1;
		if (fd >= 0)
			close(fd);
		for (ssize_t i = 0; i < k - 1; i++)
			if (!cmd[i])
				cmd[i] = ' ';
		cmd[k > 0 ? k : 0] = '\0';
		q->pid = strtol(e->d_name, NULL, 10);
		/* a long command line is cut, never the pid */
		snprintf(q->program, sizeof(q->program), "%.*s (pid %ld on the host)",
			 (int)sizeof(q->program) - 48, cmd, q->pid);
		printable(q->program);
		break;
	}
	if (d)
		closedir(d);
}

/* ------------------------------------------------------------ the flow */

static void show_next(ab_loop *l, uint64_t id, void *data);
static void on_timeout(ab_loop *l, uint64_t id, void *data);
static void on_key(ab_loop *l, int fd, unsigned ev, void *data);

static void emit(ab_asker *a, const ask_q *q, const char *phase, enum ab_ask_answer ans,
		 const char *note)
{
	json_t *ev = json_object();
	json_object_set_new(ev, "event", json_string("ask"));
	json_object_set_new(ev, "phase", json_string(phase));
	json_object_set_new(ev, "host", json_string(q->host));
	json_object_set_new(ev, "port", json_integer(q->port));
	json_object_set_new(ev, "request", json_string(q->request));
	if (q->program[0])
		json_object_set_new(ev, "program", json_string(q->program));
	if (ans != AB_ASK_NONE) {
		json_object_set_new(ev, "answer", json_string(ab_ask_answer_name(ans)));
		json_object_set_new(ev, "waited_ms",
				    json_integer((json_int_t)(ab_now_ms() - q->t0)));
	}
	if (ans == AB_ASK_ALWAYS && a->plan->ask_profile)
		json_object_set_new(ev, "profile", json_string(a->plan->ask_profile));
	if (note)
		json_object_set_new(ev, "note", json_string(note));
	ab_audit_emit(a->audit, ev);
}

static void clear_edit(ab_asker *a)
{
	free(a->new_text);
	free(a->old_text);
	a->new_text = a->old_text = NULL;
}

/* The question is off the screen, the terminal the command's again. */
static void put_away(ab_asker *a)
{
	if (a->timer)
		ab_loop_timer_cancel(a->loop, a->timer);
	a->timer = 0;
	ab_loop_unwatch(a->loop, a->tty);
	undraw(a);
	a->showing = false;
	a->keys = (ab_askkey){0};
	clear_edit(a);
	ab_pty_relay_pause(a->relay, false);
}

/* q[0] answered (NOTE: what else happened, for the log). */
static void answered(ab_asker *a, enum ab_ask_answer ans, const char *note)
{
	ask_q q = a->q[0];
	memmove(&a->q[0], &a->q[1], (a->nq - 1) * sizeof(a->q[0]));
	a->nq--;
	put_away(a);
	emit(a, &q, "answer", ans, note);
	(void)ab_proxy_answer(a->px, q.host, q.port, ans);
	if (a->nq && !a->next && !a->closing)
		a->next = ab_loop_timer(a->loop, 0, show_next, a);
}

static void show_next(ab_loop *l, uint64_t id, void *data)
{
	ab_asker *a = data;
	a->next = 0;
	if (a->showing || !a->nq)
		return;
	ab_pty_relay_pause(a->relay, true);
	(void)tcflush(a->tty, TCIFLUSH); /* typed for the command, not for this */
	if (ab_loop_watch(l, a->tty, AB_EV_READ, on_key, a) < 0) {
		ab_pty_relay_pause(a->relay, false);
		answered(a, AB_ASK_CLOSED, "the terminal cannot be read");
		return;
	}
	a->showing = true;
	a->q[0].t0 = ab_now_ms();
	a->timer = ab_loop_timer(l, (uint64_t)a->plan->ask_timeout_s * 1000, on_timeout, a);
	draw_question(a, NULL);
}

static void on_timeout(ab_loop *l, uint64_t id, void *data)
{
	ab_asker *a = data;
	a->timer = 0;
	if (a->showing)
		answered(a, AB_ASK_TIMEOUT, NULL);
}

static void on_question(void *ctx, const ab_ask_question *aq)
{
	ab_asker *a = ctx;
	if (a->nq >= ASK_QUEUE_MAX) { /* the proxy keeps as many: not reached */
		(void)ab_proxy_answer(a->px, aq->host, aq->port, AB_ASK_DENY);
		return;
	}
	ask_q *q = &a->q[a->nq++];
	*q = (ask_q){.port = aq->port, .t0 = ab_now_ms()};
	snprintf(q->host, sizeof(q->host), "%s", aq->host);
	snprintf(q->request, sizeof(q->request), "%s", aq->request);
	printable(q->host);
	printable(q->request);
	find_program(a, q, aq);
	emit(a, q, "question", AB_ASK_NONE, NULL);
	if (!a->showing && !a->next)
		a->next = ab_loop_timer(a->loop, 0, show_next, a); /* never from inside the proxy */
}

/* ------------------------------------------------------------ "always" */

int ab_ask_read_profile(const char *path, char **out)
{
	*out = NULL;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	size_t cap = AB_PROFILE_MAX_BYTES + 1, len = 0;
	char *b = malloc(cap + 1);
	ssize_t n = 1;
	while (b && len < cap && (n = read(fd, b + len, cap - len)) > 0)
		len += (size_t)n;
	int e = errno;
	close(fd);
	if (!b || n < 0 || len >= cap) {
		free(b);
		return !b ? -ENOMEM : n < 0 ? -e : -EFBIG;
	}
	b[len] = '\0';
	*out = b;
	return 0;
}

/* The diff of the profile edit, drawn for y/n; false (with NOTE) when it
 * cannot be made. */
static bool show_diff(ab_asker *a, char *note, size_t nn)
{
	const ask_q *q = &a->q[0];
	const char *file = a->plan->ask_profile;
	char rule[AB_HOST_BUF + 8];
	snprintf(rule, sizeof(rule), "%s:%u", q->host, q->port);
	clear_edit(a);
	ab_err e = {0};
	int changed = 0, r = ab_ask_read_profile(file, &a->old_text);
	if (r < 0) {
		snprintf(note, nn, "cannot read %.200s: %s", file, strerror(-r));
		return false;
	}
	if (ab_profile_add_allow(a->old_text, a->old_text ? strlen(a->old_text) : 0,
				 a->plan->ask_extends, rule, &a->new_text, &changed, &e) < 0) {
		snprintf(note, nn, "cannot add to %.200s: %.200s", file, e.msg);
		return false;
	}
	_cleanup_strv_ ab_strv l = {0}, diff = {0};
	if (ab_text_diff(a->old_text, a->new_text, ASK_DIFF_CONTEXT, &diff) < 0)
		return false;
	push(&l, "\033[7m agentbox: %s %s \033[0m", a->old_text ? "change" : "create", file);
	for (size_t i = 0; i < diff.n; i++) {
		char *d = diff.v[i];
		printable(d);
		push(&l, "%s%s\033[0m",
		     d[0] == '+'   ? "\033[32m"
		     : d[0] == '-' ? "\033[31m"
				   : "",
		     d);
	}
	if (!changed)
		push(&l, "  (%s is listed there already)", rule);
	push(&l, "  write this and allow %s for this run? [y/n] ", rule);
	draw(a, &l);
	return true;
}

int ab_ask_write_profile(const char *file, const char *old_text, const char *new_text)
{
	_cleanup_free_ char *now = NULL;
	int r = ab_ask_read_profile(file, &now);
	if (r == 0 && !((!now && !old_text) || (now && old_text && !strcmp(now, old_text))))
		r = -ESTALE;
	_cleanup_free_ char *dir = strdup(file);
	char *slash = dir ? strrchr(dir, '/') : NULL;
	if (r == 0 && slash && slash != dir) {
		*slash = '\0';
		for (char *p = dir + 1; (p = strchr(p, '/')); *p++ = '/') {
			*p = '\0';
			(void)mkdir(dir, 0700);
		}
		(void)mkdir(dir, 0700);
	}
	_cleanup_free_ char *tmp =
		r == 0 ? ab_asprintf("%s.agentbox-%d", file, (int)getpid()) : NULL;
	if (r == 0 && !tmp)
		r = -ENOMEM;
	int fd =
		r == 0 ? open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644) : -1;
	if (r == 0 && fd < 0)
		r = -errno;
	size_t len = new_text ? strlen(new_text) : 0;
	if (fd >= 0) {
		if (write(fd, new_text, len) != (ssize_t)len || fsync(fd) < 0)
			r = -(errno ? errno : EIO);
		close(fd);
		if (r == 0 && rename(tmp, file) < 0)
			r = -errno;
		if (r < 0)
			unlink(tmp);
	}
	return r;
}

/* Write the confirmed text (ab_ask_write_profile), NOTE saying why not. */
static int write_profile(ab_asker *a, char *note, size_t nn)
{
	const char *file = a->plan->ask_profile;
	int r = ab_ask_write_profile(file, a->old_text, a->new_text);
	if (r < 0)
		snprintf(note, nn, "%.200s not written (%s): allowed for this run only", file,
			 r == -ESTALE ? "it changed meanwhile" : strerror(-r));
	return r;
}

/* ------------------------------------------------------------ the keys */

static void on_key(ab_loop *l, int fd, unsigned ev, void *data)
{
	ab_asker *a = data;
	unsigned char buf[256];
	ssize_t n = read(fd, buf, sizeof(buf));
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) { /* the terminal hung up */
		answered(a, AB_ASK_CLOSED, "the terminal went away");
		return;
	}
	size_t used = 0;
	enum ab_ask_answer ans;
	enum ab_askkey_out o = ab_askkey_feed(&a->keys, buf, (size_t)n, &used, &ans);
	explicit_bzero(buf, sizeof(buf)); /* keystrokes */
	char note[ASK_LINE] = "";
	if (o == AB_ASKKEY_CONFIRM && !a->plan->ask_profile) {
		a->keys.confirming = false;
		draw_question(a, "\"always\" has no profile to write here: o, r or d");
	} else if (o == AB_ASKKEY_CONFIRM && !show_diff(a, note, sizeof(note))) {
		a->keys.confirming = false;
		draw_question(a, note[0] ? note : "the profile edit failed");
	} else if (o == AB_ASKKEY_BACK) {
		clear_edit(a);
		draw_question(a, NULL);
	} else if (o == AB_ASKKEY_ANSWER && ans == AB_ASK_ALWAYS) {
		bool ok = write_profile(a, note, sizeof(note)) == 0;
		answered(a, ok ? AB_ASK_ALWAYS : AB_ASK_RUN, ok ? NULL : note);
		if (!ok)
			ab_warn("--ask: %s", note);
	} else if (o == AB_ASKKEY_ANSWER) {
		answered(a, ans, NULL);
	}
}

/* ------------------------------------------------------------ life */

ab_asker *ab_asker_new(ab_loop *loop, ab_proxy *px, ab_pty_relay *relay, ab_audit *audit,
		       const ab_plan *plan, pid_t init)
{
	int tty = open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC | O_NONBLOCK);
	if (tty < 0)
		return NULL; /* no terminal to ask on: as without --ask */
	ab_asker *a = calloc(1, sizeof(*a));
	if (!a) {
		close(tty);
		return NULL;
	}
	*a = (ab_asker){.loop = loop,
			.px = px,
			.relay = relay,
			.audit = audit,
			.plan = plan,
			.init = init,
			.tty = tty};
	ab_proxy_set_ask(px, on_question, a);
	return a;
}

void ab_asker_free(ab_asker *a)
{
	if (!a)
		return;
	ab_proxy_set_ask(a->px, NULL, NULL);
	a->closing = true;
	if (a->next)
		ab_loop_timer_cancel(a->loop, a->next);
	a->next = 0;
	while (a->nq)
		answered(a, AB_ASK_CLOSED, "the run ended");
	if (a->showing)
		put_away(a);
	clear_edit(a);
	close(a->tty);
	free(a);
}
