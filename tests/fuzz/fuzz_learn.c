/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target (parent; fuzzing only): run --learn's record and the
 * draft made from it (src/plan/learn.c).  The record's bytes come from the
 * sandbox (paths read from its memory, program names, destinations).
 * Input: lines "K WHAT" (K: r read, w write, c create, x exec, h host),
 * the program after a tab; the host's filesystem is faked from the bytes
 * of each path.  Properties beyond "no crash, no UB":
 *   - ab_learn_add keeps at most AB_LEARN_MAX records and counts the rest;
 *   - building never fails;
 *   - no draft entry is a secret path, the home or a directory holding it,
 *     and no write entry is a system directory;
 *   - the draft loads as a profile (paths absolute, descriptions valid),
 *     with exactly the entries it lists.
 */
#include "agentbox/learn.h"
#include "agentbox/profile.h"

#include <assert.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int fake_stat(void *ctx, const char *path, bool *is_dir)
{
	size_t n = strlen(path);
	unsigned h = 0;
	for (size_t i = 0; i < n; i++)
		h = h * 31 + (unsigned char)path[i];
	if (h % 3 == 0)
		return -ENOENT;
	*is_dir = n > 0 && path[n - 1] == 'd';
	return 0;
}

static ab_mount mounts[] = {
	{.kind = AB_MNT_TMPFS, .dst = "/home/u"},
	{.kind = AB_MNT_BIND_RO, .src = "/usr", .dst = "/usr"},
	{.kind = AB_MNT_BIND_RO, .src = "/etc", .dst = "/etc"},
	{.kind = AB_MNT_MASK, .dst = "/etc/shadow"},
	{.kind = AB_MNT_BIND_RW, .src = "/w", .dst = "/w"},
	{.kind = AB_MNT_PROTECT, .dst = "/w/.git/hooks"},
	{.kind = AB_MNT_TMPFS, .dst = "/tmp"},
};

/* NAME as a whole component of a path under a home ("~/NAME", "/home/u/NAME") */
static bool secret_comp(const char *e, const char *name)
{
	const char *homes[] = {"~/", "/home/u/", "/var/home/u/"};
	for (size_t i = 0; i < 3; i++) {
		size_t hl = strlen(homes[i]), nl = strlen(name);
		if (strncmp(e, homes[i], hl) == 0 && strncmp(e + hl, name, nl) == 0 &&
		    (e[hl + nl] == '\0' || e[hl + nl] == '/'))
			return true;
	}
	return false;
}

static void check_entries(const ab_profile *prof, const json_t *list, bool write)
{
	size_t i;
	json_t *v;
	json_array_foreach(list, i, v)
	{
		const char *e = json_string_value(v);
		bool bad = !e || (e[0] != '/' && strncmp(e, "~/", 2) != 0) ||
			   secret_comp(e, ".ssh") || secret_comp(e, ".aws") ||
			   strcmp(e, "~") == 0 || strcmp(e, "/home/u") == 0 ||
			   strcmp(e, "/home") == 0 || strcmp(e, "/") == 0 ||
			   strcmp(e, "/var/home/u") == 0 ||
			   (write && (strcmp(e, "/etc") == 0 || strcmp(e, "/tmp") == 0));
		if (bad) {
			fprintf(stderr, "bad %s entry: %s\n", write ? "write" : "read",
				e ? e : "?");
			abort();
		}
		(void)prof;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *buf = malloc(size + 1);
	if (!buf)
		return 0;
	memcpy(buf, data, size);
	buf[size] = '\0';
	ab_learn_set paths = {0}, hosts = {0};
	for (char *line = buf, *next; line; line = next) {
		next = memchr(line, '\n', (size_t)(buf + size - line));
		if (next)
			*next++ = '\0';
		if (strlen(line) < 2)
			continue;
		char *prog = strchr(line + 2, '\t');
		if (prog)
			*prog++ = '\0';
		static const char kinds[] = "rwcxh";
		const char *k = strchr(kinds, line[0]);
		if (!k || !line[0])
			continue;
		enum ab_learn_kind kind =
			(enum ab_learn_kind[]){AB_LEARN_READ, AB_LEARN_WRITE, AB_LEARN_CREATE,
					       AB_LEARN_EXEC, AB_LEARN_HOST}[k - kinds];
		ab_learn_set *s = kind == AB_LEARN_HOST ? &hosts : &paths;
		int r = ab_learn_add(s, kind, line + 2, prog);
		assert(r == 0 || r == -EINVAL || r == -E2BIG);
		assert(s->n <= AB_LEARN_MAX);
	}
	char *home_alias[] = {"/var/home/u"};
	ab_plan plan = {.workspace = "/w",
			.home = "/home/u",
			.other_homes = {.v = home_alias, .n = 1},
			.mounts = mounts,
			.nmounts = sizeof(mounts) / sizeof(mounts[0])};
	ab_learn_input in = {.plan = &plan, .paths = &paths, .hosts = &hosts, .stat = fake_stat};
	ab_learn_result res;
	ab_err e = {0};
	int r = ab_learn_build(&in, &res, &e);
	assert(r == 0);
	json_t *fs = json_object_get(res.profile, "filesystem");
	char *text = json_dumps(res.profile, JSON_COMPACT);
	assert(text);
	ab_vars vars = {.home = "/home/u", .workspace = "/w"};
	ab_profile *prof = NULL;
	r = ab_profile_load_buffer(text, strlen(text), "/fuzz/learned.json", &vars, &prof, &e);
	if (r < 0) {
		fprintf(stderr, "draft does not load: %s\n%s\n", e.msg, text);
		abort();
	}
	check_entries(prof, json_object_get(fs, "read"), false);
	check_entries(prof, json_object_get(fs, "write"), true);
	assert(prof->fs.read.n == json_array_size(json_object_get(fs, "read")));
	assert(prof->fs.write.n == json_array_size(json_object_get(fs, "write")));
	ab_profile_free(prof);
	free(text);
	ab_learn_result_free(&res);
	ab_learn_set_free(&paths);
	ab_learn_set_free(&hosts);
	free(buf);
	return 0;
}
