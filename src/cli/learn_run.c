/* SPDX-License-Identifier: MIT */
/*
 * run --learn FILE (parent): run the command with the learning record on,
 * then write the draft profile (src/plan/learn.c) to FILE and say on
 * stderr what it holds and what was left out, and why (docs/learn.md).
 */
#include "cli.h"

#include "agentbox/learn.h"
#include "agentbox/sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define LEFT_SHOWN 40 /* left-out lines printed; the rest are counted */

/* What the draft extends: the -p profiles as given (a path made absolute,
 * since extends resolves relative paths from the draft's directory), or
 * "default". */
static int extends_of(const ab_cli *cli, ab_strv *out)
{
	if (cli->profiles.n == 0)
		return ab_strv_push(out, "default");
	for (size_t i = 0; i < cli->profiles.n; i++) {
		const char *p = cli->profiles.v[i];
		size_t n = strlen(p);
		bool path = strchr(p, '/') || (n >= 5 && strcmp(p + n - 5, ".json") == 0);
		char abs[PATH_MAX];
		int r = ab_strv_push(out, path && realpath(p, abs) ? abs : p);
		if (r < 0)
			return r;
	}
	return 0;
}

/* The draft's file is made before the run (a FILE that cannot be written
 * is an error before anything runs), as FILE.XXXXXX, renamed at the end. */
typedef struct draft_file {
	char *tmp;
	int fd;
} draft_file;

static int draft_open(const char *file, draft_file *d, ab_err *err)
{
	d->tmp = ab_asprintf("%s.XXXXXX", file);
	if (!d->tmp)
		return ab_fail(err, ENOMEM, "run --learn");
	d->fd = mkostemp(d->tmp, O_CLOEXEC);
	if (d->fd < 0 || fchmod(d->fd, 0644) < 0) {
		int e = errno;
		if (d->fd >= 0)
			unlink(d->tmp);
		return ab_fail(err, e, "run --learn: create %s", d->tmp);
	}
	return 0;
}

static void draft_close(draft_file *d)
{
	if (d->fd >= 0) {
		close(d->fd);
		unlink(d->tmp);
	}
	free(d->tmp);
	*d = (draft_file){.fd = -1};
}

static int draft_write(const char *file, draft_file *d, const json_t *profile, ab_err *err)
{
	char *text = json_dumps(profile, JSON_INDENT(2));
	size_t len = text ? strlen(text) : 0;
	errno = ENOMEM;
	bool ok = text && write(d->fd, text, len) == (ssize_t)len && write(d->fd, "\n", 1) == 1 &&
		  fsync(d->fd) == 0 && rename(d->tmp, file) == 0;
	int e = errno;
	free(text);
	if (!ok)
		return ab_fail(err, e, "run --learn: write %s", file);
	close(d->fd);
	d->fd = -1;
	return 0;
}

/* A line of the summary: recorded bytes are the sandbox's, so control
 * characters (C0, DEL, and C1 as UTF-8) are shown as '?' */
static void say(const char *pre, const char *text)
{
	char buf[8192];
	size_t o = 0;
	for (const unsigned char *p = (const unsigned char *)text; *p && o + 1 < sizeof(buf); p++) {
		bool c1 = p[0] == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f;
		buf[o++] = *p < 0x20 || *p == 0x7f || c1 ? '?' : (char)*p;
		if (c1)
			p++;
	}
	buf[o] = '\0';
	fprintf(stderr, "agentbox:   %s%s\n", pre, buf);
}

static void summary(const char *file, const ab_learn_result *res, const ab_cli *cli)
{
	fprintf(stderr,
		"agentbox: learned a draft profile, written to %s (review it; "
		"`agentbox explain -p %s` shows it)\n",
		file, file);
	if (res->added.n == 0)
		fprintf(stderr, "agentbox:   nothing to add to the profile it extends\n");
	for (size_t i = 0; i < res->added.n; i++)
		say("+ ", res->added.v[i]);
	for (size_t i = 0; i < res->left.n && i < LEFT_SHOWN; i++)
		say("left out: ", res->left.v[i]);
	if (res->left.n > LEFT_SHOWN)
		fprintf(stderr, "agentbox:   left out: %zu more\n", res->left.n - LEFT_SHOWN);
	fprintf(stderr, "agentbox:   env.pass: not learned (a program reads its environment "
			"inside itself; agentbox cannot see which variables it used)\n");
	if (cli->grants.n)
		fprintf(stderr, "agentbox:   the command-line grants (--allow, --read, --write, "
				"--env) are not in the draft: give them again, or add them\n");
}

int ab_cli_learn(const ab_cli *cli, const ab_plan *plan, ab_err *err)
{
	ab_learn_sets sets = {0};
	_cleanup_strv_ ab_strv ext = {0};
	draft_file d = {.fd = -1};
	if (extends_of(cli, &ext) < 0) {
		ab_fail(err, ENOMEM, "run --learn");
		return AB_EXIT_FAIL;
	}
	if (draft_open(cli->learn, &d, err) < 0) {
		draft_close(&d);
		return AB_EXIT_FAIL;
	}
	int code = ab_sandbox_run_learn(plan, &sets, err);
	ab_learn_result res = {0};
	ab_err e = {0};
	int r = code == AB_EXIT_FAIL && err->msg[0] ? -1 : 0;
	if (r == 0) {
		ab_learn_input in = {
			.plan = plan,
			.extends = &ext,
			.argv = &plan->argv,
			.paths = &sets.paths,
			.hosts = &sets.hosts,
			.stat = ab_learn_real_stat,
		};
		r = ab_learn_build(&in, &res, &e);
		if (r == 0)
			r = draft_write(cli->learn, &d, res.profile, &e);
		if (r < 0) {
			*err = e;
			code = AB_EXIT_FAIL;
		} else if (!cli->quiet) {
			summary(cli->learn, &res, cli);
		}
	}
	ab_learn_result_free(&res);
	ab_learn_set_free(&sets.paths);
	ab_learn_set_free(&sets.hosts);
	draft_close(&d);
	return code;
}
