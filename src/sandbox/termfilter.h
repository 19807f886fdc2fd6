/* SPDX-License-Identifier: MIT */
/*
 * termfilter.h: the sandbox's terminal output, on its way to the user's
 * terminal, loses the escape sequences that reach the user's clipboard
 * (src/sandbox/termfilter.c; pure, fuzzed).
 *
 * OSC 52 (xterm and most terminals), OSC 5522 (kitty's clipboard protocol)
 * and OSC 1337 (iTerm2: CopyToClipboard, file transfers) set the clipboard,
 * and on terminals that allow it read it back into the sandbox's input.  A
 * command inside could plant a command line in the clipboard for the user
 * to paste into a host shell, or read what the user copied.
 *
 * The filter never holds bytes back and never changes a length: in an OSC
 * introducer (ESC ], its UTF-8 C1 form C2 9D, or a raw 9D after an ASCII
 * byte, as an 8-bit terminal reads it) whose number (leading zeros
 * ignored) becomes one of those, the digit that completes it is rewritten
 * to '9' (52 -> 59, 5522 -> 5529, 1337 -> 1339), numbers no terminal
 * assigns, so the terminal still reads the whole sequence to its end and
 * ignores it.  State carries across chunks: the digits may arrive in any
 * split.
 */
#ifndef AGENTBOX_TERMFILTER_H
#define AGENTBOX_TERMFILTER_H

#include <stddef.h>
#include <stdint.h>

typedef struct ab_termfilter {
	uint8_t st;           /* where in an introducer or OSC number we are */
	uint32_t num;         /* the OSC number so far */
	uint8_t ndig;         /* its digits (after leading zeros) */
	uint8_t prev;         /* the last byte (a raw 0x9d after an ASCII one is OSC) */
	uint64_t neutralized; /* sequences rewritten so far */
} ab_termfilter;

/* Filter P[0..N) in place. */
void ab_termfilter_run(ab_termfilter *f, unsigned char *p, size_t n);

#endif
