/* SPDX-License-Identifier: MIT */
/*
 * What the files of the secrets module share (secrets.c, placeholder.c,
 * encode.c, scanset.c, rewrite.c, sources.c), not part of its interface
 * (include/agentbox/secrets.h).
 */
#ifndef AGENTBOX_SECRETS_INT_H
#define AGENTBOX_SECRETS_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Character classes by hand: the locale must not change what a placeholder
 * or a token is. */
static inline bool is_alnum(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

static inline bool ph_char(unsigned char c)
{
	return is_alnum(c) || c == '_' || c == '-';
}

static inline int tolower_ascii(char c)
{
	return c >= 'A' && c <= 'Z' ? c + 32 : (unsigned char)c;
}

/* secrets.c */

/* Why V[0..LEN) cannot be a secret's value (a phrase after "the value"), or
 * NULL when it can: one rule for a value set and a value loaded. */
const char *sec_value_problem(const char *v, size_t len);
/* A NUL-terminated copy of P[0..N), or NULL. */
char *sec_memdup(const char *p, size_t n);

/* encode.c: each writes a NUL after what it returns, except the decoders */

extern const char sec_b64_std[];
extern const char sec_b64_url[];
/* OUT: room for 4 * ((N + 2) / 3) + 1. */
size_t sec_b64_encode(const unsigned char *in, size_t n, char *out, const char *alpha, bool pad);
/* Standard alphabet, padding optional.  OUT: 3 * N / 4 + 3.  0, or -1 when
 * invalid. */
int sec_b64_decode(const char *in, size_t n, unsigned char *out, size_t *outlen);
/* Everything but unreserved characters.  OUT: 3 * N + 1. */
size_t sec_pct_encode(const char *in, size_t n, char *out, bool lower);
/* %HH of S[0..N) into OUT (may be S); MAP (optional, N entries) gets the
 * offset in S of each output byte.  Returns the length. */
size_t sec_pct_decode(const char *s, size_t n, char *out, uint32_t *map);
/* '"' and '\\' (and '/' as "\/" when SLASH).  OUT: 2 * N + 1. */
size_t sec_json_escape(const char *in, size_t n, char *out, bool slash);

#endif
