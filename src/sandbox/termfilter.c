/* SPDX-License-Identifier: MIT */
/* Clipboard escape sequences out of the sandbox's terminal output (see
 * include/agentbox/termfilter.h). */
#include "termfilter.h"

enum { T_TEXT, T_ESC, T_C2, T_NUM };

/* The OSC numbers that reach the clipboard. */
static const uint32_t clip[] = {52, 5522, 1337};

void ab_termfilter_run(ab_termfilter *f, unsigned char *p, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		unsigned char c = p[i], before = f->prev;
		f->prev = c;
		switch (f->st) {
		case T_ESC:
			if (c == ']') {
				f->st = T_NUM;
				f->num = f->ndig = 0;
				continue;
			}
			break;
		case T_C2:
			if (c == 0x9d) {
				f->st = T_NUM;
				f->num = f->ndig = 0;
				continue;
			}
			break;
		case T_NUM:
			if (c >= '0' && c <= '9') {
				if (c == '0' && f->ndig == 0)
					continue; /* leading zeros: 052 is 52 */
				if (f->ndig >= 6) {
					f->st = T_TEXT; /* no number we look for is this long */
					continue;
				}
				f->num = f->num * 10 + (uint32_t)(c - '0');
				f->ndig++;
				for (size_t k = 0; k < sizeof(clip) / sizeof(clip[0]); k++) {
					if (f->num == clip[k]) {
						p[i] = '9';
						f->neutralized++;
						f->st = T_TEXT;
						break;
					}
				}
				continue;
			}
			break;
		default: break;
		}
		/* text, or the end of an introducer or number: this byte may
		 * start the next one.  A raw 0x9d after an ASCII byte is no
		 * UTF-8 continuation: a terminal in 8-bit mode reads it as OSC */
		if (c == 0x9d && before < 0x80) {
			f->st = T_NUM;
			f->num = f->ndig = 0;
		} else {
			f->st = c == 0x1b ? T_ESC : c == 0xc2 ? T_C2 : T_TEXT;
		}
	}
}
