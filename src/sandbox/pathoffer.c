/* SPDX-License-Identifier: MIT */
/*
 * run --ask, the paths (parent, after the run; docs/ask.md).
 *
 * A creation or an open for writing the sandbox's rules refused is seen by
 * the supervisor (the creator carries them out: src/observe/
 * supervise_refusal.c),
 * but it is not held for a question while the command runs: it is offered
 * at exit.  The record is judged by the learning rules (src/plan/learn.c):
 * the smallest honest grant is the file when the host has it, else the
 * nearest directory the host has; secrets, the home directory, system and
 * startup locations, denied and protected paths are never offered, and are
 * listed with the reason.  The lines are added to the profile "always"
 * writes (plan->ask_profile), shown as a diff, and written only after `y`
 * read from agentbox's controlling terminal; the sandbox is gone by then,
 * and input pending on the terminal is dropped first.
 */
#include "pathoffer.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

#include "agentbox/ask.h"
#include "agentbox/learn.h"
#include "agentbox/loop.h"
#include "agentbox/profile_edit.h"
#include "asker.h"

#define OFFER_LIST_MAX 10 /* paths listed on the terminal or in the summary */
#define OFFER_LINE 600

typedef struct offer {
	const ab_plan *plan;
	const ab_sup_refusal *ref;
	size_t nref;
	uint64_t more;
	ab_learn_result res;
	ab_strv entries; /* the filesystem.write entries, as the profile says them */
} offer;

/* Printable ASCII only: a path the sandbox chose never drives the terminal. */
static void printable(char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || (unsigned char)*s >= 0x7f)
			*s = '?';
}

static void say(FILE *out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(FILE *out, const char *fmt, ...)
{
	char line[OFFER_LINE * 2];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	printable(line);
	fprintf(out, "%s\n", line);
}

/* The record judged: the lines that would grant it, the paths left out. */
static int judge(offer *o)
{
	_cleanup_(ab_learn_set_free) ab_learn_set set = {0};
	for (size_t i = 0; i < o->nref; i++)
		(void)ab_learn_add(&set, o->ref[i].err == ENOENT ? AB_LEARN_CREATE : AB_LEARN_WRITE,
				   o->ref[i].path, o->ref[i].prog);
	ab_learn_input in = {.plan = o->plan, .paths = &set, .stat = ab_learn_real_stat};
	ab_err e = {0};
	if (ab_learn_build(&in, &o->res, &e) < 0)
		return -1;
	json_t *w = json_object_get(json_object_get(o->res.profile, "filesystem"), "write");
	for (size_t i = 0; i < json_array_size(w); i++)
		if (ab_strv_push(&o->entries, json_string_value(json_array_get(w, i))) < 0)
			return -1;
	return 0;
}

static void list_paths(const offer *o, FILE *out)
{
	for (size_t i = 0; i < o->nref && i < OFFER_LIST_MAX; i++) {
		const ab_sup_refusal *r = &o->ref[i];
		char times[32] = "";
		if (r->count > 1)
			snprintf(times, sizeof(times), ", %llu times",
				 (unsigned long long)r->count);
		say(out, "  REFUSED  %s  (%s: %s, by %s%s)", r->path, r->call, strerror(r->err),
		    r->prog[0] ? r->prog : "?", times);
	}
	if (o->nref > OFFER_LIST_MAX || o->more)
		say(out, "  ... %llu more",
		    (unsigned long long)(o->nref > OFFER_LIST_MAX
						 ? o->nref - OFFER_LIST_MAX + o->more
						 : o->more));
	for (size_t i = 0; i < o->res.left.n && i < OFFER_LIST_MAX; i++)
		say(out, "  not offered: %s", o->res.left.v[i]);
}

/* No question: the exit summary lists the paths and the lines. */
static void summary(const offer *o, bool may_ask)
{
	say(stderr, "agentbox: %zu path%s the sandbox was refused creating or writing:", o->nref,
	    o->nref == 1 ? "" : "s");
	list_paths(o, stderr);
	for (size_t i = 0; i < o->res.added.n && i < OFFER_LIST_MAX; i++)
		say(stderr, "  a profile would grant it with: %s", o->res.added.v[i]);
	if (o->res.added.n && !may_ask)
		say(stderr, "  (run --ask on a terminal offers to add %s to a profile)",
		    o->res.added.n == 1 ? "it" : "them");
}

static json_t *strv_json(const ab_strv *v)
{
	json_t *a = json_array();
	for (size_t i = 0; a && i < v->n; i++)
		json_array_append_new(a, json_string(v->v[i]));
	return a;
}

static json_t *paths_json(const offer *o)
{
	json_t *a = json_array();
	for (size_t i = 0; a && i < o->nref; i++) {
		const ab_sup_refusal *r = &o->ref[i];
		json_t *p = json_string(r->path);
		if (!p)
			continue; /* not UTF-8: never offered either */
		json_array_append_new(a, json_pack("{s:o,s:s,s:i,s:s,s:I}", "path", p, "call",
						   r->call, "errno", r->err, "program",
						   r->prog[0] ? r->prog : "?", "count",
						   (json_int_t)r->count));
	}
	return a;
}

static void emit(const offer *o, ab_audit *audit, const char *phase, const char *answer,
		 int64_t waited_ms, const char *note)
{
	if (!audit)
		return;
	json_t *ev = json_object();
	json_object_set_new(ev, "event", json_string("ask-path"));
	json_object_set_new(ev, "phase", json_string(phase));
	json_object_set_new(ev, "paths", paths_json(o));
	json_object_set_new(ev, "lines", strv_json(&o->res.added));
	if (o->res.left.n)
		json_object_set_new(ev, "left", strv_json(&o->res.left));
	json_object_set_new(ev, "profile", json_string(o->plan->ask_profile));
	if (answer) {
		json_object_set_new(ev, "answer", json_string(answer));
		json_object_set_new(ev, "waited_ms", json_integer(waited_ms));
	}
	if (note)
		json_object_set_new(ev, "note", json_string(note));
	ab_audit_emit(audit, ev);
}

/* The diff of the profile with the entries added, on the terminal. */
static int show(const offer *o, FILE *tty, char **old_text, char **new_text)
{
	const char *file = o->plan->ask_profile;
	ab_err e = {0};
	int changed = 0, r = ab_ask_read_profile(file, old_text);
	if (r < 0) {
		say(tty, "agentbox: cannot read %s: %s", file, strerror(-r));
		return -1;
	}
	if (ab_profile_add_list(*old_text, *old_text ? strlen(*old_text) : 0, o->plan->ask_extends,
				"filesystem", "write", &o->entries, new_text, &changed, &e) < 0) {
		say(tty, "agentbox: cannot add to %s: %s", file, e.msg);
		return -1;
	}
	_cleanup_strv_ ab_strv diff = {0};
	if (!changed || ab_text_diff(*old_text, *new_text, 2, &diff) < 0)
		return -1;
	say(tty, "agentbox: %s %s", *old_text ? "change" : "create", file);
	for (size_t i = 0; i < diff.n; i++)
		say(tty, "%s", diff.v[i]);
	return 0;
}

/* The terminal read key by key, without echo or signals (output as it
 * was), and the input pending on it dropped: typed before the offer
 * appeared.  *SAVED: the settings to put back, when there were any. */
static bool tty_keys(int fd, struct termios *saved)
{
	bool tio = tcgetattr(fd, saved) == 0;
	if (tio) {
		struct termios raw = *saved;
		raw.c_lflag &= ~(tcflag_t)(ICANON | ECHO | ISIG);
		raw.c_cc[VMIN] = 1;
		raw.c_cc[VTIME] = 0;
		(void)tcsetattr(fd, TCSANOW, &raw);
	}
	(void)tcflush(fd, TCIFLUSH);
	return tio;
}

/* y or n from the terminal: "yes", "no", "timeout" or "closed". */
static const char *read_answer(int fd, unsigned timeout_s)
{
	ab_askkey k = {.confirming = true};
	uint64_t deadline = ab_now_ms() + (uint64_t)timeout_s * 1000;
	for (;;) {
		uint64_t now = ab_now_ms();
		struct pollfd p = {.fd = fd, .events = POLLIN};
		if (now >= deadline || poll(&p, 1, (int)(deadline - now)) == 0)
			return "timeout";
		unsigned char buf[64];
		ssize_t n = read(fd, buf, sizeof(buf));
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n <= 0)
			return "closed";
		size_t used = 0;
		enum ab_ask_answer a = AB_ASK_NONE;
		enum ab_askkey_out out = ab_askkey_feed(&k, buf, (size_t)n, &used, &a);
		explicit_bzero(buf, sizeof(buf));
		if (out == AB_ASKKEY_ANSWER || out == AB_ASKKEY_BACK)
			return out == AB_ASKKEY_ANSWER && a == AB_ASK_ALWAYS ? "yes" : "no";
	}
}

static void ask(const offer *o, int fd, ab_audit *audit)
{
	FILE *tty = fdopen(dup(fd), "w");
	if (!tty)
		return;
	setvbuf(tty, NULL, _IONBF, 0);
	_cleanup_free_ char *old_text = NULL, *new_text = NULL;
	struct termios saved;
	bool tio = tty_keys(fd, &saved);
	say(tty,
	    "agentbox: the sandbox was refused creating or writing %zu path%s outside its "
	    "grants:",
	    o->nref, o->nref == 1 ? "" : "s");
	list_paths(o, tty);
	for (size_t i = 0; i < o->res.added.n; i++)
		say(tty, "  add      %s", o->res.added.v[i]);
	if (show(o, tty, &old_text, &new_text) < 0) {
		if (tio)
			(void)tcsetattr(fd, TCSANOW, &saved);
		fclose(tty);
		return;
	}
	emit(o, audit, "offer", NULL, 0, NULL);
	unsigned t = o->plan->ask_timeout_s ? o->plan->ask_timeout_s : AB_ASK_DEFAULT_TIMEOUT_S;
	fprintf(tty,
		"agentbox: write this, so that the next run may write there? [y/n] (%u s, then no) ",
		t);
	uint64_t t0 = ab_now_ms();
	const char *ans = read_answer(fd, t);
	if (tio)
		(void)tcsetattr(fd, TCSANOW, &saved);
	fprintf(tty, "%s\n", ans);
	char note[OFFER_LINE] = "";
	if (strcmp(ans, "yes") == 0) {
		int r = ab_ask_write_profile(o->plan->ask_profile, old_text, new_text);
		if (r < 0)
			snprintf(note, sizeof(note), "%.200s not written (%s)",
				 o->plan->ask_profile,
				 r == -ESTALE ? "it changed meanwhile" : strerror(-r));
		say(tty, "agentbox: %s", r < 0 ? note : "written");
	}
	emit(o, audit, "answer", ans, (int64_t)(ab_now_ms() - t0), note[0] ? note : NULL);
	fclose(tty);
}

/* The asker's rules: --ask, the user's stdin is the pty's (a terminal; not
 * --no-pty, where the command held the real terminal), /dev/tty opens. */
static int outer_tty(const ab_plan *plan)
{
	if (!plan->ask || !plan->use_pty || !(plan->pty_mask & 1))
		return -1;
	return open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC);
}

void ab_path_offer(const ab_plan *plan, const ab_supervisor *sup, ab_audit *audit, bool summary_on)
{
	offer o = {.plan = plan};
	o.ref = ab_supervisor_refusals(sup, &o.nref, &o.more);
	if ((o.nref || o.more) && judge(&o) == 0) {
		int fd = o.entries.n && plan->ask_profile ? outer_tty(plan) : -1;
		if (fd >= 0)
			ask(&o, fd, audit);
		else if (summary_on)
			summary(&o, plan->ask);
		if (fd >= 0)
			close(fd);
	}
	ab_learn_result_free(&o.res);
	ab_strv_free(&o.entries);
}
