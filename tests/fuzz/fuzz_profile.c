/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target (any process; fuzzing only): the profile loader on
 * arbitrary bytes -- jansson, the strict schema, variable expansion, the
 * syntax-error placement and the position locator -- with fixed variables.
 * Properties checked beyond "no crash, no leak, no UB": a failure always
 * carries a message, and no message or hint ever contains a raw control
 * character (they are printed to the user's terminal).  The locator is also
 * run directly on the raw bytes, which the loader only hands it once jansson
 * has accepted them.
 */
#include "agentbox/profile.h"

#include <stdint.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const ab_vars vars = {
	.home = "/nonexistent-agentbox-fuzz/home",
	.workspace = "/nonexistent-agentbox-fuzz/ws",
	.user = "fuzz",
	.xdg_config_home = "/nonexistent-agentbox-fuzz/xdg",
	.xdg_data_home = NULL,
	.xdg_cache_home = "relative/ignored",
	.xdg_state_home = NULL,
};

static void check_printable(const char *s)
{
	for (size_t i = 0; s[i]; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c < 0x20 || c == 0x7f)
			__builtin_trap();
		if (c == 0xc2 && (unsigned char)s[i + 1] >= 0x80 && (unsigned char)s[i + 1] <= 0x9f)
			__builtin_trap();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const ab_json_step paths[][3] = {
		{{.key = "filesystem"}, {.key = "read"}, {.index = 1}},
		{{.key = "env"}, {.key = "set"}, {.key = "A"}},
		{{.index = 0}, {.key = ""}, {.index = 2}},
	};
	const char *buf = (const char *)data;
	ab_profile *p = NULL;
	ab_err err;
	size_t line, col;

	memset(&err, 0, sizeof(err));
	if (ab_profile_load_buffer(buf, size, "/nonexistent-agentbox-fuzz/p.json", &vars, &p,
				   &err) == 0) {
		if (!p || !p->path || p->files.n == 0)
			__builtin_trap();
		ab_profile_free(p);
	} else {
		if (p || !err.msg[0] || err.exit_code != AB_EXIT_FAIL)
			__builtin_trap();
		check_printable(err.msg);
		check_printable(err.hint);
	}
	for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
		for (size_t depth = 0; depth <= 3; depth++) {
			int r = ab_json_locate(buf, size, paths[i], depth, depth & 1, &line, &col);
			if ((r != 0 && r != -22 && r != -2) || line < 1 || col < 1 ||
			    col > size + 1)
				__builtin_trap();
		}
	}
	return 0;
}
