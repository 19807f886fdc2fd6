/* SPDX-License-Identifier: MIT */
/*
 * What users compose, not only what ships: every shipped profile merged with
 * a user's extensions (an env secret, a file secret, a command secret, a
 * rendered JSON secret, a writable grant), every subset of them in both
 * orders, loaded, merged, planned and explained as `run -p A -p B ...` would,
 * against a home on first run (the harnesses' files absent) and after a
 * login (their credential files present).  An env secret after a rendered
 * one once crashed the planner; nothing here may fail or crash.
 */
#include "unit.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "agentbox/host.h"
#include "../common/compose.h"

#define PROFILES AB_SRCDIR "/profiles"
#define MAXP 16

/* the user's extensions: each binds its secret to a host it also allows */
// clang-format off
static const char *const EXT[] = {
	"{\"version\":1,\"network\":{\"allow\":[\"env.example\"]},\"secrets\":{\"GH_TOKEN\":"
	"{\"from\":{\"env\":\"GH_TOKEN\"},\"hosts\":[\"env.example\"],"
	"\"in\":[\"header:authorization\"]}}}",
	"{\"version\":1,\"network\":{\"allow\":[\"file.example\"]},\"secrets\":{\"FILE_TOKEN\":"
	"{\"from\":{\"file\":\"~/.config/tok/token\"},\"hosts\":[\"file.example\"]}}}",
	"{\"version\":1,\"network\":{\"allow\":[\"cmd.example\"]},\"secrets\":{\"CMD_TOKEN\":"
	"{\"from\":{\"command\":[\"/bin/echo\",\"tok\"]},\"hosts\":[\"cmd.example\"],"
	"\"in\":[\"body\"]}}}",
	"{\"version\":1,\"network\":{\"allow\":[\"render.example\"]},\"secrets\":{\"APP_TOKEN\":"
	"{\"from\":{\"json\":\"~/.myapp/creds.json\",\"pointer\":\"/auth/token\"},"
	"\"render\":{\"keep\":[\"/auth\"]},\"env\":false,\"hosts\":[\"render.example\"]}}}",
	"{\"version\":1,\"filesystem\":{\"write\":[\"~/.cache/extra\"]}}",
};
// clang-format on
#define NEXT AB_ARRAY_SIZE(EXT)

typedef struct world {
	char root[64], home[96], ws[96];
	ab_vars v;
	ab_host host;
	ab_plan_input in;
	compose_part parts[MAXP];
	size_t nshipped;
	char *shipped[MAXP];
	FILE *sink;
	unsigned plans;
} world;

static void put(const char *dir, const char *rel, const char *text)
{
	char p[256];
	snprintf(p, sizeof(p), "%s/%s", dir, rel);
	for (char *s = p + strlen(dir) + 1; (s = strchr(s, '/')); s++) {
		*s = 0;
		assert_true(mkdir(p, 0700) == 0 || errno == EEXIST);
		*s = '/';
	}
	if (!text) {
		assert_true(mkdir(p, 0700) == 0 || errno == EEXIST);
		return;
	}
	FILE *f = fopen(p, "w");
	assert_non_null(f);
	fputs(text, f);
	assert_int_equal(fclose(f), 0);
}

static void list_shipped(world *w)
{
	DIR *d = opendir(PROFILES);
	assert_non_null(d);
	struct dirent *de;
	while ((de = readdir(d))) {
		size_t l = strlen(de->d_name);
		if (l < 6 || strcmp(de->d_name + l - 5, ".json") != 0 ||
		    strcmp(de->d_name, "schema.json") == 0)
			continue;
		assert_true(w->nshipped < MAXP);
		w->shipped[w->nshipped++] = ab_asprintf("%s/%s", PROFILES, de->d_name);
	}
	closedir(d);
	/* every harness the project ships a profile for is in the set */
	assert_true(w->nshipped >= 6);
}

static char *environ_ok[] = {"PATH=/usr/bin:/bin",
			     "GH_TOKEN=ghp_x",
			     "ANTHROPIC_API_KEY=sk-ant-api03-x",
			     "OPENAI_API_KEY=sk-x",
			     "GEMINI_API_KEY=AIzaSy0000000000000000000000000000000",
			     NULL};
static char *argv_true[] = {"/bin/true", NULL};

static int setup(void **state)
{
	world *w = calloc(1, sizeof(*w));
	assert_non_null(w);
	snprintf(w->root, sizeof(w->root), "/tmp/ab-compose-XXXXXX");
	assert_non_null(mkdtemp(w->root));
	snprintf(w->home, sizeof(w->home), "%s/home", w->root);
	snprintf(w->ws, sizeof(w->ws), "%s/home/proj", w->root);
	put(w->root, "home/proj", NULL);
	put(w->home, ".config/tok/token", "tok-file\n");
	put(w->home, ".myapp/creds.json", "{\"auth\":{\"token\":\"tok-json\"}}");
	w->v = (ab_vars){.home = w->home, .workspace = w->ws, .user = "u"};
	ab_host_fake(&w->host, 7);
	w->in = (ab_plan_input){
		.host = &w->host,
		.workspace = w->ws,
		.home = w->home,
		.argv = argv_true,
		.environ = environ_ok,
		.lstat = ab_real_lstat,
		.user = "u",
		.cwd = w->ws,
		.force_pty = 0,
	};
	list_shipped(w);
	for (size_t i = 0; i < NEXT; i++)
		w->parts[1 + i] = (compose_part){.json = EXT[i], .name = "/x/user.json"};
	w->sink = fopen("/dev/null", "w");
	assert_non_null(w->sink);
	*state = w;
	return 0;
}

static int teardown(void **state)
{
	world *w = *state;
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", w->root);
	assert_int_equal(system(cmd), 0);
	for (size_t i = 0; i < w->nshipped; i++)
		free(w->shipped[i]);
	fclose(w->sink);
	free(w);
	return 0;
}

static void plan_one(world *w, const size_t *idx, size_t n, const char *label)
{
	ab_err err = {0};
	if (compose_plan(w->parts, idx, n, &w->v, &w->in, w->sink, &err) < 0) {
		char ord[64] = "";
		for (size_t i = 0; i < n; i++)
			snprintf(ord + strlen(ord), sizeof(ord) - strlen(ord), " %zu", idx[i]);
		fail_msg("%s, order%s: %s", label, ord, err.msg);
	}
	w->plans++;
}

/* Each shipped profile with every subset of the extensions, in both
 * orders: forward and reversed, so every two parts meet in both orders
 * (the shipped profile first, as `-p claude-code -p mine.json`, and last). */
static void compose_all(world *w)
{
	for (size_t s = 0; s < w->nshipped; s++) {
		w->parts[0] = (compose_part){.path = w->shipped[s]};
		for (unsigned mask = 0; mask < (1u << NEXT); mask++) {
			size_t idx[MAXP], rev[MAXP], n = 0;
			idx[n++] = 0;
			for (size_t e = 0; e < NEXT; e++)
				if (mask & (1u << e))
					idx[n++] = 1 + e;
			for (size_t i = 0; i < n; i++)
				rev[i] = idx[n - 1 - i];
			plan_one(w, idx, n, w->shipped[s]);
			plan_one(w, rev, n, w->shipped[s]);
		}
	}
}

static void test_first_run(void **state)
{
	world *w = *state;
	w->plans = 0;
	compose_all(w);
	assert_int_equal(w->plans, w->nshipped * 2 * (1u << NEXT));
}

/* after a subscription login: the harnesses' credential files exist, so
 * their rendered secrets are planned as mounts beside the user's */
static void test_logged_in(void **state)
{
	world *w = *state;
	static const char *const logins[] = {".claude/.credentials.json", ".codex/auth.json"};
	for (size_t i = 0; i < AB_ARRAY_SIZE(logins); i++)
		put(w->home, logins[i],
		    "{\"claudeAiOauth\":{\"accessToken\":\"a\"},"
		    "\"tokens\":{\"access_token\":\"a\"}}");
	w->plans = 0;
	compose_all(w);
	assert_int_equal(w->plans, w->nshipped * 2 * (1u << NEXT));
}

/* the crash this test was written for, alone: an env secret merged after a
 * harness whose secret renders a file that exists */
static void test_env_secret_after_render(void **state)
{
	world *w = *state;
	put(w->home, ".claude/.credentials.json", "{\"claudeAiOauth\":{\"accessToken\":\"a\"}}");
	char *p = ab_asprintf("%s/claude-code.json", PROFILES);
	w->parts[0] = (compose_part){.path = p};
	size_t order[] = {0, 1};
	ab_err err = {0};
	int r = compose_plan(w->parts, order, 2, &w->v, &w->in, w->sink, &err);
	free(p);
	if (r < 0)
		fail_msg("%s", err.msg);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_env_secret_after_render),
		cmocka_unit_test(test_first_run),
		cmocka_unit_test(test_logged_in),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
