/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target (any process; fuzzing only): the whole path a user's
 * profiles take before anything runs (tests/common/compose.h): up to three
 * fuzzed profiles and one shipped profile, loaded, merged in a fuzzed
 * order, planned and explained as text and JSON.  The filesystem the
 * planner sees is fake and fuzzed too (each path's kind is a hash of it
 * and a fuzzed byte), so grants, secrets' files and harness state exist
 * or not, as on a user's machine.
 *
 * Input: byte 0 picks the shipped profile, byte 1 the order, byte 2 salts
 * the filesystem; the rest is split on "\n--\n" into the user's profiles,
 * up to a "\n==gitconfig==\n": what follows it is the content of every
 * regular file git's configuration is read from (plan_gitcfg.c), so the
 * fuzzed config names fuzzed paths on the fuzzed filesystem.
 * Properties beyond "no crash, no leak, no UB": a refusal carries a message
 * and exit code 125.
 */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "agentbox/host.h"
#include "../common/compose.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAXSHIPPED 16
#define MAXUSER 3
static char *shipped[MAXSHIPPED];
static size_t shipped_len[MAXSHIPPED], nshipped;
static FILE *sink;
static ab_host host;
static unsigned fs_salt;

static char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return NULL;
	char *buf = malloc(AB_PROFILE_MAX_BYTES);
	size_t n = buf ? fread(buf, 1, AB_PROFILE_MAX_BYTES, f) : 0;
	fclose(f);
	*len = n;
	return buf;
}

static int shipped_only(const struct dirent *de)
{
	size_t l = strlen(de->d_name);
	return l > 5 && !strcmp(de->d_name + l - 5, ".json") && strcmp(de->d_name, "schema.json");
}

/* the shipped profiles, by name (byte 0 picks the same one on every run) */
static void init_once(void)
{
	if (sink)
		return;
	struct dirent **names = NULL;
	int nn = scandir(AB_SRCDIR "/profiles", &names, shipped_only, alphasort);
	for (int i = 0; i < nn; i++) {
		char p[4096];
		snprintf(p, sizeof(p), "%s/profiles/%s", AB_SRCDIR, names[i]->d_name);
		if (nshipped < MAXSHIPPED && (shipped[nshipped] = slurp(p, &shipped_len[nshipped])))
			nshipped++;
		free(names[i]);
	}
	free(names);
	if (!nshipped)
		__builtin_trap(); /* the shipped profiles are the point */
	ab_host_fake(&host, 7);
	sink = fopen("/dev/null", "w");
}

/* 'd' directory, 'f' file, 'l' symlink, 0 absent.  The home and the
 * workspace are directories, as on a user's machine, and the workspace is
 * a repository (a .git directory) for odd salts, so that git's
 * configuration is read and the paths it names are planned. */
static char kind_of(const char *path, size_t len)
{
	static const char *const dirs[] = {"/fz", "/fz/home", "/fz/home/proj"};
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++)
		if (strlen(dirs[i]) == len && memcmp(dirs[i], path, len) == 0)
			return 'd';
	if ((fs_salt & 1) && len == 18 && memcmp(path, "/fz/home/proj/.git", 18) == 0)
		return 'd';
	uint32_t h = 2166136261u ^ fs_salt;
	for (size_t i = 0; i < len; i++)
		h = (h ^ (unsigned char)path[i]) * 16777619u;
	static const char kinds[8] = {'d', 'd', 'd', 'f', 'f', 'f', 'l', 0};
	return kinds[h % 8];
}

static int fake_lstat(void *ctx, const char *path, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	if (!path || path[0] != '/')
		__builtin_trap(); /* the planner only asks absolute paths */
	size_t len = strlen(path);
	for (size_t i = 1; i < len; i++) {
		if (path[i] != '/')
			continue;
		char k = kind_of(path, i);
		if (!k)
			return -ENOENT;
		if (k != 'd')
			return -ENOTDIR;
	}
	char k = len == 1 ? 'd' : kind_of(path, len);
	if (!k)
		return -ENOENT;
	st->st_mode = k == 'd' ? S_IFDIR | 0755 : k == 'f' ? S_IFREG | 0644 : S_IFLNK | 0777;
	st->st_uid = st->st_gid = 1000;
	return 0;
}

static const char *gc_buf;
static size_t gc_len;

static int fake_readfile(void *ctx, const char *path, size_t max, char **buf, size_t *len)
{
	struct stat st;
	int r = fake_lstat(ctx, path, &st);
	if (r < 0)
		return r;
	if (S_ISDIR(st.st_mode))
		return -EISDIR;
	if (gc_len > max)
		return -E2BIG;
	*buf = malloc(gc_len + 1);
	if (!*buf)
		return -ENOMEM;
	if (gc_len)
		memcpy(*buf, gc_buf, gc_len);
	(*buf)[gc_len] = '\0';
	*len = gc_len;
	return 0;
}

static char *environ_fz[] = {"PATH=/usr/bin:/bin", "HOME=/fz/home",
			     "GH_TOKEN=ghp_x",     "ANTHROPIC_API_KEY=sk-ant-api03-x",
			     "TERM=xterm",         NULL};
static char *argv_fz[] = {"/bin/true", NULL};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	init_once();
	if (size < 3)
		return 0;
	static const char sep[] = "\n--\n";
	compose_part parts[1 + MAXUSER];
	size_t n = 0;
	parts[n++] = (compose_part){.json = shipped[data[0] % nshipped],
				    .len = shipped_len[data[0] % nshipped],
				    .name = "/fz/shipped.json"};
	const char *p = (const char *)data + 3, *end = (const char *)data + size;
	static const char gsep[] = "\n==gitconfig==\n";
	const char *g = memmem(p, (size_t)(end - p), gsep, sizeof(gsep) - 1);
	gc_buf = g ? g + sizeof(gsep) - 1 : "";
	gc_len = g ? (size_t)(end - gc_buf) : 0;
	if (g)
		end = g;
	while (p <= end && n < 1 + MAXUSER) {
		const char *s = memmem(p, (size_t)(end - p), sep, sizeof(sep) - 1);
		const char *e = s ? s : end;
		/* a zero length would mean strlen() to compose_load */
		if (e > p)
			parts[n++] = (compose_part){
				.json = p, .len = (size_t)(e - p), .name = "/fz/home/user.json"};
		p = e + sizeof(sep) - 1;
		if (!s)
			break;
	}
	/* byte 1: a rotation, and reversed or not */
	size_t order[1 + MAXUSER];
	for (size_t i = 0; i < n; i++)
		order[i] = (i + data[1]) % n;
	if (data[1] & 0x80)
		for (size_t i = 0; i < n / 2; i++) {
			size_t t = order[i];
			order[i] = order[n - 1 - i];
			order[n - 1 - i] = t;
		}
	fs_salt = data[2];
	static const ab_vars vars = {
		.home = "/fz/home", .workspace = "/fz/home/proj", .user = "fz"};
	ab_plan_input in = {
		.host = &host,
		.workspace = "/fz/home/proj",
		.home = "/fz/home",
		.argv = argv_fz,
		.environ = environ_fz,
		.lstat = fake_lstat,
		.readfile = fake_readfile,
		.user = "fz",
		.cwd = "/fz/home/proj",
		.force_pty = 0,
	};
	ab_err err;
	memset(&err, 0, sizeof(err));
	if (compose_plan(parts, order, n, &vars, &in, sink, &err) < 0 &&
	    (!err.msg[0] || err.exit_code != AB_EXIT_FAIL))
		__builtin_trap();
	return 0;
}
