/* SPDX-License-Identifier: MIT */
/*
 * Ask on denial (run --ask, docs/ask.md): the answers and the pure state
 * machine that turns the user's keystrokes, read from agentbox's own
 * terminal (never from the sandbox's pty), into one.  Escape sequences
 * (arrow keys, a terminal's replies to queries) are skipped whole, so no
 * byte inside one ever answers; only the documented letters do.
 */
#ifndef AGENTBOX_ASK_H
#define AGENTBOX_ASK_H

#include <stdbool.h>
#include <stddef.h>

#define AB_ASK_DEFAULT_TIMEOUT_S 60
#define AB_ASK_MAX_TIMEOUT_S 86400

enum ab_ask_answer {
	AB_ASK_NONE = 0, /* no answer yet */
	AB_ASK_ONCE,     /* the held requests for this host:port proceed; the next asks again */
	AB_ASK_RUN,      /* host:port joins the allow list for the rest of the run */
	AB_ASK_ALWAYS,   /* the same, and written to a profile (after the diff is confirmed) */
	AB_ASK_DENY,     /* 403, as without --ask */
	AB_ASK_TIMEOUT,  /* nobody answered in time: a deny */
	AB_ASK_CLOSED,   /* the run ended (or the terminal went away) first: a deny */
};

/* "once", "run", "always", "deny", "timeout", "closed" ("none"). */
const char *ab_ask_answer_name(enum ab_ask_answer a);

/* What the keys asked for: an answer, or that the "always" confirmation
 * (the diff) is to be shown, or taken back. */
enum ab_askkey_out {
	AB_ASKKEY_MORE = 0, /* nothing decided: feed more */
	AB_ASKKEY_ANSWER,   /* *answer holds it */
	AB_ASKKEY_CONFIRM,  /* 'a': show the diff and ask y/n */
	AB_ASKKEY_BACK,     /* 'n' at the confirmation: the question again */
};

typedef struct ab_askkey {
	int st;          /* escape-sequence state (ask.c) */
	bool confirming; /* the "always" diff is shown: y writes, n goes back */
} ab_askkey;

/* Feed N bytes typed at the question.  Returns what they decided and sets
 * *USED to the bytes consumed up to and including the deciding one (the
 * caller drops the rest), else N.  Keys: o once, r run, a always (then y or
 * n), d, n, q, Ctrl-C or Ctrl-D deny; case does not matter; everything
 * else, and every byte of an escape sequence (ESC [ ... final, ESC ] ...
 * BEL/ST, ESC P/X/^/_ ... ST, ESC + one byte, 8-bit CSI/OSC/DCS), is
 * ignored. */
enum ab_askkey_out ab_askkey_feed(ab_askkey *k, const unsigned char *p, size_t n, size_t *used,
				  enum ab_ask_answer *answer);

#endif
