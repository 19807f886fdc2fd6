/* SPDX-License-Identifier: MIT */
/*
 * The answer keys of `run --ask` (pure): bytes from the user's terminal to
 * an answer, escape sequences skipped whole (include/agentbox/ask.h).
 */
#include "agentbox/ask.h"

enum {
	K_GROUND,
	K_ESC,     /* after ESC */
	K_CSI,     /* ESC [ or 0x9b: parameters until a final byte 0x40-0x7e */
	K_STR,     /* ESC ] P X ^ _ or 0x9d 0x90 ...: until BEL or ST */
	K_STR_ESC, /* ESC inside a string: ST if '\\' follows */
	K_ONE,     /* ESC O (SS3, keypad and F1-F4): one more byte */
};

const char *ab_ask_answer_name(enum ab_ask_answer a)
{
	switch (a) {
	case AB_ASK_ONCE: return "once";
	case AB_ASK_RUN: return "run";
	case AB_ASK_ALWAYS: return "always";
	case AB_ASK_DENY: return "deny";
	case AB_ASK_TIMEOUT: return "timeout";
	case AB_ASK_CLOSED: return "closed";
	default: return "none";
	}
}

static bool esc_byte(ab_askkey *k, unsigned char ch)
{
	if (ch == '[')
		k->st = K_CSI;
	else if (ch == ']' || ch == 'P' || ch == 'X' || ch == '^' || ch == '_')
		k->st = K_STR;
	else if (ch == 'O')
		k->st = K_ONE;
	else if (ch == 0x1b || (ch >= 0x20 && ch <= 0x2f))
		k->st = K_ESC; /* intermediate bytes (ESC ( B ...): one more */
	else
		k->st = K_GROUND; /* ESC + one byte (Alt-x, SS3's first) */
	return false;
}

/* One byte through the escape-sequence filter: true when it is a key. */
static bool key_byte(ab_askkey *k, unsigned char ch)
{
	switch (k->st) {
	case K_ESC: return esc_byte(k, ch);
	case K_CSI:
		if (ch == 0x1b)
			k->st = K_ESC;
		else if (ch >= 0x40 && ch <= 0x7e)
			k->st = K_GROUND;
		return false;
	case K_STR:
		if (ch == 0x07 || ch == 0x9c)
			k->st = K_GROUND;
		else if (ch == 0x1b)
			k->st = K_STR_ESC;
		return false;
	case K_STR_ESC: k->st = ch == '\\' ? K_GROUND : K_STR; return false;
	case K_ONE: k->st = K_GROUND; return false;
	default: break;
	}
	if (ch == 0x1b) {
		k->st = K_ESC;
		return false;
	}
	if (ch == 0x9b) {
		k->st = K_CSI;
		return false;
	}
	if (ch == 0x9d || ch == 0x90 || ch == 0x98 || ch == 0x9e || ch == 0x9f) {
		k->st = K_STR;
		return false;
	}
	return true;
}

static enum ab_askkey_out confirm_key(ab_askkey *k, unsigned char ch, enum ab_ask_answer *answer)
{
	if (ch == 'y') {
		*answer = AB_ASK_ALWAYS;
		return AB_ASKKEY_ANSWER;
	}
	if (ch == 'n') {
		k->confirming = false;
		return AB_ASKKEY_BACK;
	}
	if (ch == 0x03 || ch == 0x04) {
		*answer = AB_ASK_DENY;
		return AB_ASKKEY_ANSWER;
	}
	return AB_ASKKEY_MORE;
}

static enum ab_askkey_out decide(ab_askkey *k, unsigned char ch, enum ab_ask_answer *answer)
{
	if (ch >= 'A' && ch <= 'Z')
		ch = (unsigned char)(ch - 'A' + 'a');
	if (k->confirming)
		return confirm_key(k, ch, answer);
	switch (ch) {
	case 'o': *answer = AB_ASK_ONCE; return AB_ASKKEY_ANSWER;
	case 'r': *answer = AB_ASK_RUN; return AB_ASKKEY_ANSWER;
	case 'a': k->confirming = true; return AB_ASKKEY_CONFIRM;
	case 'd':
	case 'n':
	case 'q':
	case 0x03: /* Ctrl-C */
	case 0x04: /* Ctrl-D */ *answer = AB_ASK_DENY; return AB_ASKKEY_ANSWER;
	default: return AB_ASKKEY_MORE;
	}
}

enum ab_askkey_out ab_askkey_feed(ab_askkey *k, const unsigned char *p, size_t n, size_t *used,
				  enum ab_ask_answer *answer)
{
	*answer = AB_ASK_NONE;
	for (size_t i = 0; i < n; i++) {
		if (!key_byte(k, p[i]))
			continue;
		enum ab_askkey_out o = decide(k, p[i], answer);
		if (o != AB_ASKKEY_MORE) {
			*used = i + 1;
			return o;
		}
	}
	*used = n;
	return AB_ASKKEY_MORE;
}
