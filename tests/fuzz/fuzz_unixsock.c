/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target (fuzzing only): the two listings of the host's unix
 * sockets in src/kernel/unixsock.c, whose paths any local user chooses: the first
 * byte picks /proc/net/unix text (even) or a sock_diag netlink datagram
 * (odd; read for names, and for the UNIX_DIAG_VFS connect mediation asks
 * about: a parse that succeeds for names succeeds for it too).  The rest is copied to an exact-size buffer so ASan sees any read
 * past the end.  Every path reported must be absolute, at most
 * AB_UNIXSOCK_PATH_MAX bytes and free of control bytes; the text parser
 * reports at most one per line.
 */
#include "agentbox/unixsock.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	bool diag = data[0] & 1;
	data++, size--;
	char *buf = malloc(size ? size : 1);
	if (!buf)
		return 0;
	memcpy(buf, data, size);
	ab_strv out = {0};
	if (diag) {
		int r = ab_unixsock_parse_diag(buf, size, &out);
		if (r > 1 || r < -4095)
			abort();
		bool found = false;
		int v = ab_unixsock_parse_vfs(buf, size, 0x800001, 42, &found);
		if (v > 1 || v < -4095 || (r >= 0 && v != r))
			abort();
	} else {
		int r = ab_unixsock_parse(buf, size, &out);
		size_t lines = 1;
		for (size_t i = 0; i < size; i++)
			lines += buf[i] == '\n';
		if (r >= 0 && ((size_t)r != out.n || out.n > lines))
			abort();
	}
	for (size_t i = 0; i < out.n; i++) {
		size_t n = strlen(out.v[i]);
		if (out.v[i][0] != '/' || n > AB_UNIXSOCK_PATH_MAX)
			abort();
		for (size_t k = 0; k < n; k++)
			if ((unsigned char)out.v[i][k] < 0x20 || out.v[i][k] == 0x7f)
				abort();
	}
	ab_strv_free(&out);
	free(buf);
	return 0;
}
