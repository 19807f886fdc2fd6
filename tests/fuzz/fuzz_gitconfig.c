/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target (fuzzing only): the git config parser and the key
 * classifier of src/parse/gitconfig.c, fed a config file the sandbox wrote.
 * Checked: no read past the input (ASan: the input is copied to a buffer of
 * exactly its size), every key has a section and a name, the section and the
 * name are lowercase, a value is never longer than the input, the line
 * numbers never go backwards, and an error always has a message.
 */
#include "agentbox/gitconfig.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct fz {
	size_t size;
	unsigned line;
	unsigned n;
} fz;

static int check(const char *key, const char *value, unsigned line, void *ctx)
{
	fz *f = ctx;
	const char *dot = strchr(key, '.'), *last = strrchr(key, '.');
	if (!dot || !last[1] || line < f->line || line == 0)
		abort();
	for (const char *s = key; s < dot; s++)
		if (*s >= 'A' && *s <= 'Z')
			abort();
	for (const char *s = last + 1; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || *s == '-'))
			abort();
	if (value && strlen(value) > f->size)
		abort();
	f->line = line;
	(void)ab_gitkey_class_name(ab_gitkey_classify(key, value));
	/* the callback's error stops the parse: exercise that path too */
	return ++f->n == 5000 ? -1 : 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *buf = malloc(size ? size : 1);
	if (!buf)
		return 0;
	memcpy(buf, data, size);
	fz f = {.size = size};
	ab_err e = {0};
	int r = ab_gitconfig_parse(buf, size, check, &f, &e);
	if (r < 0 && r != -1 && !e.msg[0])
		abort();
	if (r < -1 && r != -EINVAL && r != -E2BIG)
		abort();
	free(buf);
	return 0;
}
