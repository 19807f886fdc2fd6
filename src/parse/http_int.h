/* SPDX-License-Identifier: MIT */
/*
 * The byte classes of RFC 9110 that both halves of the HTTP/1.1 parser use:
 * the heads (http.c) and the bodies (http_body.c).
 */
#ifndef AGENTBOX_PARSE_HTTP_INT_H
#define AGENTBOX_PARSE_HTTP_INT_H

#include <stdbool.h>
#include <string.h>

/* tchar: a byte of a token (method, field name, transfer coding). */
static inline bool is_tchar(unsigned char c)
{
	if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))
		return true;
	return c && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

static inline bool is_digit(unsigned char c)
{
	return c >= '0' && c <= '9';
}

/* A hex digit's value, or -1. */
static inline int hexval(unsigned char c)
{
	if (is_digit(c))
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* A control byte a field value may not hold (HTAB may). */
static inline bool is_ctl(unsigned char c)
{
	return (c < 0x20 && c != '\t') || c == 0x7f;
}

#endif
