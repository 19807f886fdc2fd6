/* SPDX-License-Identifier: MIT */
/*
 * gitconfig.c: the parser on the configs git writes, every quoting and
 * escape rule (the expected values are what git 2.39's `git config -l`
 * prints for the same bytes), hostile input (unterminated quotes and
 * headers, NULs, huge lines, deep continuations, the limits), and the
 * class of every key the header lists.
 */
#include "unit.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agentbox/gitconfig.h"

typedef struct coll {
	char out[8192];
	size_t n;
	int stop_at; /* return -ECANCELED on this entry (1-based), 0 never */
	int seen;
} coll;

static int collect(const char *key, const char *value, unsigned line, void *ctx)
{
	coll *c = ctx;
	c->seen++;
	if (c->stop_at && c->seen == c->stop_at)
		return -ECANCELED;
	int w = value ? snprintf(c->out + c->n, sizeof(c->out) - c->n, "%s=%s@%u|", key, value,
				 line)
		      : snprintf(c->out + c->n, sizeof(c->out) - c->n, "%s@%u|", key, line);
	if (w > 0 && (size_t)w < sizeof(c->out) - c->n)
		c->n += (size_t)w;
	return 0;
}

static int parse_n(const char *s, size_t n, coll *c, ab_err *e)
{
	memset(c, 0, sizeof(*c));
	return ab_gitconfig_parse(s, n, collect, c, e);
}

/* S parses; its entries are EXPECT */
static void ok(const char *s, const char *expect)
{
	coll c;
	ab_err e = {0};
	int r = parse_n(s, strlen(s), &c, &e);
	if (r != 0)
		fail_msg("parse of [%s] failed: %s", s, e.msg);
	assert_string_equal(c.out, expect);
}

/* S is refused with R, the message starting with POS ("line:col:") */
static void bad(const char *s, size_t n, int r, const char *pos)
{
	coll c;
	ab_err e = {0};
	assert_int_equal(parse_n(s, n, &c, &e), r);
	if (strncmp(e.msg, pos, strlen(pos)) != 0)
		fail_msg("[%s]: expected position %s, got %s", s, pos, e.msg);
}

static void test_git_written(void **state)
{
	(void)state;
	/* git init + clone + config user.* + worktree config, as git 2.39 writes them */
	ok("[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n"
	   "\tlogallrefupdates = true\n[remote \"origin\"]\n\turl = /tmp/gx/up\n"
	   "\tfetch = +refs/heads/*:refs/remotes/origin/*\n[branch \"master\"]\n"
	   "\tremote = origin\n\tmerge = refs/heads/master\n[user]\n\tname = A\n"
	   "\temail = a@b\n[extensions]\n\tworktreeConfig = true\n",
	   "core.repositoryformatversion=0@2|core.filemode=true@3|core.bare=false@4|"
	   "core.logallrefupdates=true@5|remote.origin.url=/tmp/gx/up@7|"
	   "remote.origin.fetch=+refs/heads/*:refs/remotes/origin/*@8|"
	   "branch.master.remote=origin@10|branch.master.merge=refs/heads/master@11|"
	   "user.name=A@13|user.email=a@b@14|extensions.worktreeconfig=true@16|");
	ok("[core]\n\tsparseCheckout = true\n\tsparseCheckoutCone = true\n",
	   "core.sparsecheckout=true@2|core.sparsecheckoutcone=true@3|");
	ok("", "");
	ok("\n\n# only comments\n; here\n", "");
}

static void test_quoting(void **state)
{
	(void)state;
	/* each checked against `git config -f FILE -l` */
	ok("[Sec.SuB]\n\tKey = \"a\\tb\" ; c\n\tk2 = x \\\n  y  z  \n[s \"Sub\\\"x\\y\"] K\n",
	   "sec.sub.key=a\tb@2|sec.sub.k2=x   y  z@3|s.Sub\"xy.k@5|");
	ok("[a]\nb = \" lead\"and\" trail \" \n", "a.b= leadand trail @2|");
	ok("[a]\nb = x\\n\\t\\b\\\\\\\"y\n", "a.b=x\n\t\b\\\"y@2|");
	ok("[a]\nb = one # comment\nc = \"in # quotes ; too\"\n",
	   "a.b=one@2|a.c=in # quotes ; too@3|");
	ok("[a]\nb = x\ty\n", "a.b=x y@2|");      /* a tab outside quotes: ' ' */
	ok("[a]\nb = \"x\ty\"\n", "a.b=x\ty@2|"); /* inside: kept */
	ok("[a]\nb\nc =\nd = \"\"\n", "a.b@2|a.c=@3|a.d=@4|");
	ok("[a]\r\nb = 1\r\n", "a.b=1@2|");
	ok("[a]\nb = x\ry\n", "a.b=x y@2|"); /* a lone CR is a blank */
	ok("[b \"q\"]x=1\n[c]y\n[d]\n  z  \r\n", "b.q.x=1@1|c.y@2|d.z@4|");
	ok("[a \"\"]\nk=2\n", "a..k=2@2|");
	ok("[ \"x\"]\nk = 1\n", ".x.k=1@2|"); /* git takes an empty section too */
	ok("[a]b=1", "a.b=1@1|");             /* no final newline */
	ok("[a]\nb = x\\", "a.b=x@2|");       /* '\' at the end of input */
	ok("\xef\xbb\xbf[a]\nb=1\n", "a.b=1@2|");
	ok("[a]\nb = 1\\\n2\\\n3\nc=4\n", "a.b=123@2|a.c=4@5|");
	ok("[a]\nb-2 = v\n", "a.b-2=v@2|");
	ok("[A.B.C]\nd=1\n", "a.b.c.d=1@2|");
	ok("[a]\n  # c\n\t; c\nb=1 ; x \"\n", "a.b=1@4|"); /* a quote inside a comment */
}

static void test_hostile(void **state)
{
	(void)state;
	bad("[a]\nb = \"open\n", 13, -EINVAL, "2:10:");
	bad("[a", 2, -EINVAL, "1:3:");
	bad("[a \"x", 5, -EINVAL, "1:6:");
	bad("[a \"x\n\"]", 8, -EINVAL, "1:6:");
	bad("[a \"x\" ]", 8, -EINVAL, "1:7:");
	bad("[a x]", 5, -EINVAL, "1:4:");
	bad("[]", 2, -EINVAL, "1:2:");
	bad("[a!]", 4, -EINVAL, "1:3:");
	bad("[a]\nb = \\q\n", 11, -EINVAL, "2:6:");
	bad("[a]\n1b = 1\n", 11, -EINVAL, "2:1:");
	bad("[a]\nb c\n", 8, -EINVAL, "2:3:");
	bad("b = 1\n", 6, -EINVAL, "1:1:"); /* no section */
	bad("[a]\nb = \"x\\\n", 11, -EINVAL, "");
	bad("\xef\xbb[a]\n", 6, -EINVAL, "1:3:");
	/* NUL anywhere, even where git would skip or cut */
	bad("[a]\nb = x\0y\n", 12, -EINVAL, "2:6:");
	bad("# \0\n[a]\n", 8, -EINVAL, "1:3:");
	bad("[a]\0", 4, -EINVAL, "1:4:");
	/* the byte limit, and exactly at it */
	size_t big = AB_GITCFG_MAX_BYTES;
	char *s = malloc(big + 2);
	assert_non_null(s);
	memcpy(s, "[a]\nb = ", 8);
	memset(s + 8, 'x', big - 9);
	s[big - 1] = '\n';
	coll c;
	ab_err e = {0};
	assert_int_equal(parse_n(s, big, &c, &e), 0);
	s[big] = '\n';
	assert_int_equal(parse_n(s, big + 1, &c, &e), -E2BIG);
	/* deep continuations: one value over a million lines */
	memcpy(s, "[a]\nb = ", 8);
	size_t n = 8;
	while (n + 3 < big) {
		s[n++] = 'y';
		s[n++] = '\\';
		s[n++] = '\n';
	}
	assert_int_equal(parse_n(s, n, &c, &e), 0);
	assert_int_equal(c.seen, 1);
	/* a huge section header and subsection */
	s[0] = '[';
	memset(s + 1, 'a', big - 3);
	s[big - 2] = ']';
	s[big - 1] = '\n';
	assert_int_equal(parse_n(s, big, &c, &e), 0);
	memcpy(s, "[a \"", 4);
	memset(s + 4, '\\', big - 8);
	memcpy(s + big - 4, "x\"]\n", 4);
	assert_int_equal(parse_n(s, big, &c, &e), 0);
	/* the entry limit */
	n = 0;
	n += (size_t)sprintf(s, "[a]\n");
	for (int i = 0; i < AB_GITCFG_MAX_ENTRIES; i++)
		n += (size_t)sprintf(s + n, "b\n");
	assert_int_equal(parse_n(s, n, &c, &e), 0);
	n += (size_t)sprintf(s + n, "b\n");
	assert_int_equal(parse_n(s, n, &c, &e), -E2BIG);
	assert_non_null(strstr(e.msg, "20002:1:"));
	free(s);
	/* a read past len: the buffer ends in the middle of a quoted value */
	char *tight = malloc(9);
	memcpy(tight, "[a]\nb=\"x", 8);
	assert_int_equal(parse_n(tight, 8, &c, &e), -EINVAL);
	assert_int_equal(parse_n(NULL, 0, &c, &e), 0);
	free(tight);
}

static void test_callback_stops(void **state)
{
	(void)state;
	coll c = {.stop_at = 2};
	ab_err e = {0};
	const char *s = "[a]\nb=1\nc=2\nd=3\n";
	assert_int_equal(ab_gitconfig_parse(s, strlen(s), collect, &c, &e), -ECANCELED);
	assert_int_equal(c.seen, 2);
}

#define CL(k, v, cls) assert_int_equal(ab_gitkey_classify(k, v), cls)

static void test_classify_program(void **state)
{
	(void)state;
	static const char *const prog[] = {"core.pager",
					   "core.editor",
					   "core.sshcommand",
					   "core.askpass",
					   "core.gitproxy",
					   "sequence.editor",
					   "diff.external",
					   "diff.x.textconv",
					   "diff.x.command",
					   "merge.x.driver",
					   "filter.x.clean",
					   "filter.x.smudge",
					   "filter.lfs.process",
					   "credential.helper",
					   "credential.https://h.example.helper",
					   "gpg.program",
					   "gpg.ssh.program",
					   "gpg.x509.program",
					   "pager.log",
					   "submodule.s.update",
					   "remote.o.uploadpack",
					   "remote.o.receivepack",
					   "remote.o.vcs",
					   "uploadpack.packobjectshook",
					   "web.browser",
					   "browser.ff.cmd",
					   "browser.ff.path",
					   "man.x.cmd",
					   "man.viewer",
					   "difftool.x.cmd",
					   "difftool.x.path",
					   "mergetool.x.cmd",
					   "sendemail.tocmd",
					   "sendemail.cccmd",
					   "sendemail.sendmailcmd",
					   "sendemail.work.tocmd",
					   "sendemail.smtpserver",
					   "core.alternaterefscommand",
					   "interactive.difffilter",
					   "trailer.t.command",
					   "tar.tgz.command",
					   "gpg.ssh.defaultkeycommand"};
	for (size_t i = 0; i < AB_ARRAY_SIZE(prog); i++)
		if (ab_gitkey_classify(prog[i], "x") != AB_GITKEY_PROGRAM)
			fail_msg("%s is not PROGRAM", prog[i]);
	/* core.fsmonitor: a boolean is the built-in daemon or off */
	CL("core.fsmonitor", NULL, AB_GITKEY_INERT);
	CL("core.fsmonitor", "true", AB_GITKEY_INERT);
	CL("core.fsmonitor", "FALSE", AB_GITKEY_INERT);
	CL("core.fsmonitor", "", AB_GITKEY_INERT);
	CL("core.fsmonitor", "0", AB_GITKEY_INERT);
	CL("core.fsmonitor", "1k", AB_GITKEY_INERT);
	CL("core.fsmonitor", ".git/hooks/fsmonitor-watchman", AB_GITKEY_PROGRAM);
	CL("core.fsmonitor", "truex", AB_GITKEY_PROGRAM);
	CL("core.fsmonitor", "1x", AB_GITKEY_PROGRAM);
	/* aliases: '!' runs a shell command; others run git with options */
	CL("alias.st", "status", AB_GITKEY_OTHER);
	CL("alias.x", "!./evil", AB_GITKEY_PROGRAM);
	CL("alias.x", NULL, AB_GITKEY_OTHER);
	/* remote URLs: ext:: runs its address */
	CL("remote.o.url", "https://example.com/r.git", AB_GITKEY_INERT);
	CL("remote.o.url", "ext::sh -c evil", AB_GITKEY_PROGRAM);
	CL("remote.o.pushurl", "EXT::x", AB_GITKEY_PROGRAM);
}

static void test_classify_path_include(void **state)
{
	(void)state;
	CL("core.hookspath", ".githooks", AB_GITKEY_PATH);
	CL("core.worktree", "../..", AB_GITKEY_PATH);
	CL("core.attributesfile", "x", AB_GITKEY_PATH);
	CL("core.excludesfile", "x", AB_GITKEY_PATH);
	CL("include.path", "x", AB_GITKEY_INCLUDE);
	CL("includeif.gitdir:/w/.path", "x", AB_GITKEY_INCLUDE);
	CL("includeif.onbranch:main.path", "x", AB_GITKEY_INCLUDE);
	CL("include.x.path", "x", AB_GITKEY_OTHER);
	CL("includeif.path", "x", AB_GITKEY_OTHER);
}

static void test_classify_inert(void **state)
{
	(void)state;
	/* every key git init, clone, config user.*, sparse-checkout, submodule
	 * add, worktree add and maintenance register wrote (git 2.39) */
	static const char *const inert[] = {"core.repositoryformatversion",
					    "core.filemode",
					    "core.bare",
					    "core.logallrefupdates",
					    "core.ignorecase",
					    "core.precomposeunicode",
					    "core.symlinks",
					    "core.autocrlf",
					    "core.eol",
					    "core.sparsecheckout",
					    "core.sparsecheckoutcone",
					    "remote.origin.url",
					    "remote.origin.pushurl",
					    "remote.origin.fetch",
					    "remote.origin.push",
					    "remote.origin.tagopt",
					    "remote.origin.prune",
					    "remote.origin.mirror",
					    "remote.origin.promisor",
					    "remote.origin.partialclonefilter",
					    "branch.main.remote",
					    "branch.main.merge",
					    "branch.main.rebase",
					    "branch.main.pushremote",
					    "submodule.sm.url",
					    "submodule.sm.active",
					    "submodule.sm.branch",
					    "submodule.sm.shallow",
					    "user.name",
					    "user.email",
					    "user.signingkey",
					    "init.defaultbranch",
					    "pull.rebase",
					    "pull.ff",
					    "fetch.prune",
					    "extensions.objectformat",
					    "extensions.worktreeconfig",
					    "extensions.partialclone",
					    "maintenance.auto",
					    "maintenance.strategy",
					    "maintenance.repo",
					    "color.ui",
					    "color.diff.meta",
					    "diff.x.xfuncname",
					    "diff.x.binary",
					    "advice.detachedhead"};
	for (size_t i = 0; i < AB_ARRAY_SIZE(inert); i++)
		if (ab_gitkey_classify(inert[i], "v") != AB_GITKEY_INERT)
			fail_msg("%s is not INERT", inert[i]);
	/* fail closed: unknown, or known but able to change what runs */
	static const char *const other[] = {"core.nosuchkey",
					    "protocol.allow",
					    "protocol.ext.allow",
					    "pull.twohead",
					    "diff.tool",
					    "merge.tool",
					    "core.sharedrepository",
					    "http.sslcert",
					    "x.y.z",
					    "nosection",
					    ".x.k",
					    "a..",
					    "user.x.name",
					    "remote.url",
					    "submodule.path",
					    "safe.directory",
					    "uploadpack.allowanysha1inwant",
					    "alias"};
	for (size_t i = 0; i < AB_ARRAY_SIZE(other); i++)
		if (ab_gitkey_classify(other[i], "v") != AB_GITKEY_OTHER)
			fail_msg("%s is not OTHER", other[i]);
	CL(NULL, "v", AB_GITKEY_OTHER);
	assert_string_equal(ab_gitkey_class_name(AB_GITKEY_PATH), "path");
	assert_string_equal(ab_gitkey_class_name(AB_GITKEY_OTHER), "other");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_git_written),
		cmocka_unit_test(test_quoting),
		cmocka_unit_test(test_hostile),
		cmocka_unit_test(test_callback_stops),
		cmocka_unit_test(test_classify_program),
		cmocka_unit_test(test_classify_path_include),
		cmocka_unit_test(test_classify_inert),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
