/* SPDX-License-Identifier: MIT */
/*
 * git's configuration syntax and what its keys can do (any process, pure).
 * The parser mirrors git 2.39's config.c (get_next_char, get_base_var,
 * get_extended_base_var, get_value, parse_value) on bytes in memory, with
 * limits; the classifier holds the allowlist and the lists of keys that run
 * programs or name code-bearing paths.  See include/agentbox/gitconfig.h.
 */
#include "agentbox/gitconfig.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ------------------------------------------------------------- parser */

typedef struct gp {
	const unsigned char *b;
	size_t len, pos;
	size_t lstart;        /* offset of the current line's first byte */
	unsigned line;        /* 1-based line of the next byte */
	unsigned eline, ecol; /* where the byte last read was */
	bool eof;
	char *key; /* "section." or "section.sub." then the name */
	size_t keylen, baselen;
	bool have_section;
	char *val;
	size_t vlen;
	size_t entries;
	ab_err *err;
} gp;

/* git's sane_ctype: ASCII only, and isspace is " \t\n\r" (no \v, \f) */
static bool g_space(int c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}
static bool g_alpha(int c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}
static bool g_keychar(int c)
{
	return g_alpha(c) || (c >= '0' && c <= '9') || c == '-';
}
static char g_lower(int c)
{
	return (char)(c >= 'A' && c <= 'Z' ? c + ('a' - 'A') : c);
}

/* get_next_char: "\r\n" is one '\n'; the end of the input reads as '\n'
 * with eof set. */
static int next(gp *g)
{
	g->eline = g->line;
	g->ecol = (unsigned)(g->pos - g->lstart + 1);
	if (g->pos >= g->len) {
		g->eof = true;
		return '\n';
	}
	int c = g->b[g->pos++];
	if (c == '\r' && g->pos < g->len && g->b[g->pos] == '\n') {
		g->pos++;
		c = '\n';
	}
	if (c == '\n') {
		g->line++;
		g->lstart = g->pos;
	}
	return c;
}

static int bad(gp *g, const char *what)
{
	return ab_fail_code(g->err, AB_EXIT_FAIL, EINVAL, "%u:%u: %s", g->eline, g->ecol, what);
}

/* After "[section" and a blank: ' "subsection"]'. */
static int section_ext(gp *g, int c)
{
	do {
		if (c == '\n')
			return bad(g, "unterminated section header");
		c = next(g);
	} while (g_space(c));
	if (c != '"')
		return bad(g,
			   "a blank in a section header must be followed by a quoted subsection");
	g->key[g->keylen++] = '.';
	for (;;) {
		c = next(g);
		if (c == '\n')
			return bad(g, "unterminated subsection name");
		if (c == '"')
			break;
		if (c == '\\') {
			c = next(g);
			if (c == '\n')
				return bad(g, "unterminated subsection name");
		}
		g->key[g->keylen++] = (char)c;
	}
	if (next(g) != ']')
		return bad(g, "expected ']' after the subsection name");
	return 0;
}

/* After '[': the header up to its ']'. */
static int section(gp *g)
{
	g->keylen = 0;
	for (;;) {
		int c = next(g);
		if (g->eof)
			return bad(g, "unterminated section header");
		if (c == ']')
			break;
		if (g_space(c)) {
			int r = section_ext(g, c);
			if (r < 0)
				return r;
			break;
		}
		if (!g_keychar(c) && c != '.')
			return bad(g, "invalid character in a section name");
		g->key[g->keylen++] = g_lower(c);
	}
	if (g->keylen == 0)
		return bad(g, "empty section name");
	g->key[g->keylen++] = '.';
	g->baselen = g->keylen;
	g->have_section = true;
	return 0;
}

/* The escape after '\' in a value: *OUT is the byte it stands for, or -1
 * for a line continuation. */
static int value_escape(gp *g, int *out)
{
	int c = next(g);
	switch (c) {
	case '\n': *out = -1; return 0;
	case 't': *out = '\t'; return 0;
	case 'b': *out = '\b'; return 0;
	case 'n': *out = '\n'; return 0;
	case '\\':
	case '"': *out = c; return 0;
	default: return bad(g, "invalid escape sequence in a value");
	}
}

/* parse_value: after '=', up to the end of the line (continuations go on). */
static int value(gp *g)
{
	bool quote = false, comment = false;
	size_t space = 0;
	g->vlen = 0;
	for (;;) {
		int c = next(g);
		if (c == '\n') {
			if (quote)
				return bad(g, "unterminated quoted value");
			g->val[g->vlen] = '\0';
			return 0;
		}
		if (comment)
			continue;
		if (g_space(c) && !quote) {
			if (g->vlen)
				space++;
			continue;
		}
		if (!quote && (c == ';' || c == '#')) {
			comment = true;
			continue;
		}
		for (; space; space--)
			g->val[g->vlen++] = ' ';
		if (c == '\\') {
			int r = value_escape(g, &c);
			if (r < 0)
				return r;
			if (c >= 0)
				g->val[g->vlen++] = (char)c;
			continue;
		}
		if (c == '"') {
			quote = !quote;
			continue;
		}
		g->val[g->vlen++] = (char)c;
	}
}

/* get_value: C is the key's first letter. */
static int entry(gp *g, int c, ab_gitcfg_cb cb, void *ctx)
{
	unsigned kline = g->eline, kcol = g->ecol;
	if (!g->have_section)
		return bad(g, "a key before any section header");
	if (++g->entries > AB_GITCFG_MAX_ENTRIES)
		return ab_fail_code(g->err, AB_EXIT_FAIL, E2BIG, "%u:%u: more than %u keys", kline,
				    kcol, AB_GITCFG_MAX_ENTRIES);
	g->keylen = g->baselen;
	g->key[g->keylen++] = g_lower(c);
	for (;;) {
		c = next(g);
		if (g->eof || !g_keychar(c))
			break;
		g->key[g->keylen++] = g_lower(c);
	}
	g->key[g->keylen] = '\0';
	while (c == ' ' || c == '\t')
		c = next(g);
	const char *v = NULL;
	if (c != '\n') {
		if (c != '=')
			return bad(g, "expected '=' or the end of the line after a key");
		int r = value(g);
		if (r < 0)
			return r;
		v = g->val;
	}
	return cb(g->key, v, kline, ctx);
}

static int parse_loop(gp *g, ab_gitcfg_cb cb, void *ctx)
{
	bool comment = false;
	for (;;) {
		int c = next(g);
		if (c == '\n') {
			if (g->eof)
				return 0;
			comment = false;
			continue;
		}
		if (comment || g_space(c))
			continue;
		if (c == '#' || c == ';') {
			comment = true;
			continue;
		}
		int r;
		if (c == '[')
			r = section(g);
		else if (!g_alpha(c))
			r = bad(g, "a key must start with a letter");
		else
			r = entry(g, c, cb, ctx);
		if (r < 0)
			return r;
	}
}

/* A NUL anywhere: where, as line and column. */
static int nul_check(gp *g)
{
	const unsigned char *z = g->len ? memchr(g->b, '\0', g->len) : NULL;
	if (!z)
		return 0;
	while (g->pos < (size_t)(z - g->b))
		next(g);
	next(g);
	return bad(g, "NUL byte");
}

int ab_gitconfig_parse(const char *buf, size_t len, ab_gitcfg_cb cb, void *ctx, ab_err *err)
{
	if (len > AB_GITCFG_MAX_BYTES)
		return ab_fail_code(err, AB_EXIT_FAIL, E2BIG,
				    "1:1: %zu bytes, more than a config file may hold (%u)", len,
				    AB_GITCFG_MAX_BYTES);
	if (!buf && len)
		return ab_fail_code(err, AB_EXIT_FAIL, EINVAL, "1:1: no buffer");
	gp g = {.b = (const unsigned char *)buf, .len = len, .line = 1, .err = err};
	int r = nul_check(&g);
	if (r < 0)
		return r;
	g = (gp){.b = (const unsigned char *)buf, .len = len, .line = 1, .err = err};
	/* a key or a value is never longer than the input; the key adds two dots */
	g.key = malloc(len + 4);
	g.val = malloc(len + 1);
	if (!g.key || !g.val) {
		free(g.key);
		free(g.val);
		return ab_fail(err, ENOMEM, "git config");
	}
	/* a UTF-8 byte order mark, whole, is skipped; a partial one is an error */
	static const unsigned char bom[3] = {0xef, 0xbb, 0xbf};
	size_t nb = 0;
	while (nb < 3 && nb < len && g.b[nb] == bom[nb])
		nb++;
	if (nb == 3)
		g.pos = 3;
	else if (nb > 0) {
		g.pos = nb;
		next(&g);
		r = bad(&g, "a partial byte order mark");
	}
	if (r == 0)
		r = parse_loop(&g, cb, ctx);
	free(g.key);
	free(g.val);
	return r;
}

/* --------------------------------------------------------- classifier */

/* How a table row matches the subsection: none, one required, either. */
enum { SUB_NONE, SUB_ANY, SUB_EITHER };

typedef struct keyrule {
	const char *section; /* lowercase */
	int sub;
	const char *name; /* lowercase; "*" any */
	ab_gitkey_class cls;
} keyrule;

#define P AB_GITKEY_PROGRAM
#define D AB_GITKEY_PATH
#define I AB_GITKEY_INERT

/* Keys that run something or name where code comes from.  Looked up before
 * the allowlist, so a driver's command is never covered by an inert
 * wildcard of its section. */
// clang-format off
static const keyrule active_rules[] = {
	/* the value is a command (sh -c, or a program git execs) */
	{"core", SUB_NONE, "pager", P},
	{"core", SUB_NONE, "editor", P},
	{"core", SUB_NONE, "sshcommand", P},
	{"core", SUB_NONE, "askpass", P},
	{"core", SUB_NONE, "gitproxy", P},
	{"core", SUB_NONE, "alternaterefscommand", P},
	{"sequence", SUB_NONE, "editor", P},
	{"diff", SUB_NONE, "external", P},
	{"diff", SUB_ANY, "textconv", P},
	{"diff", SUB_ANY, "command", P},
	{"merge", SUB_ANY, "driver", P},
	{"filter", SUB_ANY, "clean", P},
	{"filter", SUB_ANY, "smudge", P},
	{"filter", SUB_ANY, "process", P},
	{"credential", SUB_EITHER, "helper", P},
	{"gpg", SUB_EITHER, "program", P},
	{"gpg", SUB_ANY, "defaultkeycommand", P}, /* gpg.ssh.defaultKeyCommand */
	{"pager", SUB_NONE, "*", P},
	{"submodule", SUB_ANY, "update", P},     /* "!command" runs it */
	{"remote", SUB_ANY, "uploadpack", P},
	{"remote", SUB_ANY, "receivepack", P},
	{"remote", SUB_ANY, "vcs", P},           /* git-remote-<vcs> */
	{"uploadpack", SUB_NONE, "packobjectshook", P},
	{"web", SUB_NONE, "browser", P},
	{"browser", SUB_ANY, "cmd", P},
	{"browser", SUB_ANY, "path", P},
	{"man", SUB_NONE, "viewer", P},
	{"man", SUB_ANY, "cmd", P},
	{"man", SUB_ANY, "path", P},
	{"difftool", SUB_ANY, "cmd", P},
	{"difftool", SUB_ANY, "path", P},
	{"mergetool", SUB_ANY, "cmd", P},
	{"mergetool", SUB_ANY, "path", P},
	{"sendemail", SUB_EITHER, "smtpserver", P}, /* an absolute path is run */
	{"interactive", SUB_NONE, "difffilter", P},
	{"trailer", SUB_ANY, "command", P},
	{"trailer", SUB_ANY, "cmd", P},
	{"tar", SUB_ANY, "command", P},         /* git archive's tar filters */
	/* where hooks, config, attributes come from */
	{"core", SUB_NONE, "hookspath", D},
	{"core", SUB_NONE, "worktree", D},
	{"core", SUB_NONE, "attributesfile", D},
	{"core", SUB_NONE, "excludesfile", D},
	{"include", SUB_NONE, "path", AB_GITKEY_INCLUDE},
	{"includeif", SUB_ANY, "path", AB_GITKEY_INCLUDE},
};
// clang-format on

/* The allowlist: what git writes into a repository's config by itself, and
 * settings that only change how git shows, stores or names things. */
// clang-format off
static const keyrule inert_rules[] = {
	{"core", SUB_NONE, "repositoryformatversion", I},
	{"core", SUB_NONE, "filemode", I},
	{"core", SUB_NONE, "bare", I},
	{"core", SUB_NONE, "logallrefupdates", I},
	{"core", SUB_NONE, "ignorecase", I},
	{"core", SUB_NONE, "precomposeunicode", I},
	{"core", SUB_NONE, "symlinks", I},
	{"core", SUB_NONE, "autocrlf", I},
	{"core", SUB_NONE, "safecrlf", I},
	{"core", SUB_NONE, "eol", I},
	{"core", SUB_NONE, "sparsecheckout", I},
	{"core", SUB_NONE, "sparsecheckoutcone", I},
	{"core", SUB_NONE, "quotepath", I},
	{"core", SUB_NONE, "checkstat", I},
	{"core", SUB_NONE, "trustctime", I},
	{"core", SUB_NONE, "abbrev", I},
	{"core", SUB_NONE, "compression", I},
	{"core", SUB_NONE, "loosecompression", I},
	{"core", SUB_NONE, "untrackedcache", I},
	{"core", SUB_NONE, "splitindex", I},
	{"core", SUB_NONE, "commitgraph", I},
	{"core", SUB_NONE, "multipackindex", I},
	{"core", SUB_NONE, "preloadindex", I},
	{"core", SUB_NONE, "whitespace", I},
	{"core", SUB_NONE, "warnambiguousrefs", I},
	{"core", SUB_NONE, "longpaths", I},
	{"core", SUB_NONE, "protecthfs", I},
	{"core", SUB_NONE, "protectntfs", I},
	{"core", SUB_NONE, "commentchar", I},
	{"extensions", SUB_NONE, "objectformat", I},
	{"extensions", SUB_NONE, "worktreeconfig", I},
	{"extensions", SUB_NONE, "partialclone", I},
	{"extensions", SUB_NONE, "preciousobjects", I},
	{"extensions", SUB_NONE, "noop", I},
	{"remote", SUB_ANY, "url", I},          /* but "ext::": classify_special */
	{"remote", SUB_ANY, "pushurl", I},
	{"remote", SUB_ANY, "fetch", I},
	{"remote", SUB_ANY, "push", I},
	{"remote", SUB_ANY, "tagopt", I},
	{"remote", SUB_ANY, "prune", I},
	{"remote", SUB_ANY, "prunetags", I},
	{"remote", SUB_ANY, "mirror", I},
	{"remote", SUB_ANY, "skipdefaultupdate", I},
	{"remote", SUB_ANY, "skipfetchall", I},
	{"remote", SUB_ANY, "promisor", I},
	{"remote", SUB_ANY, "partialclonefilter", I},
	{"remote", SUB_NONE, "pushdefault", I},
	{"branch", SUB_ANY, "remote", I},
	{"branch", SUB_ANY, "merge", I},
	{"branch", SUB_ANY, "rebase", I},
	{"branch", SUB_ANY, "pushremote", I},
	{"branch", SUB_ANY, "description", I},
	{"branch", SUB_NONE, "autosetupmerge", I},
	{"branch", SUB_NONE, "autosetuprebase", I},
	{"branch", SUB_NONE, "sort", I},
	{"submodule", SUB_ANY, "url", I},
	{"submodule", SUB_ANY, "active", I},
	{"submodule", SUB_ANY, "branch", I},
	{"submodule", SUB_ANY, "shallow", I},
	{"submodule", SUB_ANY, "ignore", I},
	{"submodule", SUB_ANY, "fetchrecursesubmodules", I},
	{"submodule", SUB_NONE, "active", I},
	{"submodule", SUB_NONE, "recurse", I},
	{"user", SUB_NONE, "*", I},
	{"author", SUB_NONE, "*", I},
	{"committer", SUB_NONE, "*", I},
	{"init", SUB_NONE, "defaultbranch", I},
	{"pull", SUB_NONE, "rebase", I},
	{"pull", SUB_NONE, "ff", I},
	{"fetch", SUB_NONE, "prune", I},
	{"fetch", SUB_NONE, "prunetags", I},
	{"fetch", SUB_NONE, "recursesubmodules", I},
	{"fetch", SUB_NONE, "writecommitgraph", I},
	{"push", SUB_NONE, "default", I},
	{"push", SUB_NONE, "autosetupremote", I},
	{"push", SUB_NONE, "followtags", I},
	{"maintenance", SUB_NONE, "auto", I},
	{"maintenance", SUB_NONE, "strategy", I},
	{"maintenance", SUB_NONE, "repo", I},
	{"color", SUB_EITHER, "*", I},
	{"advice", SUB_NONE, "*", I},
	{"i18n", SUB_NONE, "*", I},
	{"merge", SUB_NONE, "conflictstyle", I},
	{"merge", SUB_NONE, "ff", I},
	{"rebase", SUB_NONE, "autosquash", I},
	{"rebase", SUB_NONE, "autostash", I},
	{"rerere", SUB_NONE, "enabled", I},
	{"status", SUB_NONE, "showuntrackedfiles", I},
	{"diff", SUB_NONE, "renames", I},
	{"diff", SUB_NONE, "algorithm", I},
	{"diff", SUB_NONE, "colormoved", I},
	{"diff", SUB_ANY, "xfuncname", I},
	{"diff", SUB_ANY, "funcname", I},
	{"diff", SUB_ANY, "wordregex", I},
	{"diff", SUB_ANY, "binary", I},
	{"diff", SUB_ANY, "cachetextconv", I},
	{"log", SUB_NONE, "date", I},
	{"log", SUB_NONE, "decorate", I},
	{"gc", SUB_NONE, "auto", I},
	{"gc", SUB_NONE, "autodetach", I},
	{"pack", SUB_NONE, "threads", I},
	{"commit", SUB_NONE, "gpgsign", I},
	{"tag", SUB_NONE, "gpgsign", I},
	{"help", SUB_NONE, "autocorrect", I},
};
// clang-format on

#undef P
#undef D
#undef I

typedef struct keyparts {
	const char *section, *sub, *name;
	size_t seclen, sublen;
} keyparts;

static bool split_key(const char *key, keyparts *k)
{
	const char *dot = strchr(key, '.'), *last = strrchr(key, '.');
	if (!dot)
		return false;
	*k = (keyparts){.section = key, .seclen = (size_t)(dot - key), .name = last + 1};
	if (last != dot) {
		k->sub = dot + 1;
		k->sublen = (size_t)(last - dot - 1);
	}
	return true;
}

static bool rule_matches(const keyrule *r, const keyparts *k)
{
	if (strlen(r->section) != k->seclen || memcmp(r->section, k->section, k->seclen) != 0)
		return false;
	if ((r->sub == SUB_NONE && k->sub) || (r->sub == SUB_ANY && !k->sub))
		return false;
	return strcmp(r->name, "*") == 0 || strcmp(r->name, k->name) == 0;
}

static const keyrule *rule_find(const keyrule *rules, size_t n, const keyparts *k)
{
	for (size_t i = 0; i < n; i++)
		if (rule_matches(&rules[i], k))
			return &rules[i];
	return NULL;
}

/* git_parse_maybe_bool: NULL (a bare key), "", true/yes/on/false/no/off in
 * any case, or an integer (git_parse_int: sign, digits, a k/m/g unit). */
static bool is_git_bool(const char *v)
{
	static const char *const words[] = {"", "true", "yes", "on", "false", "no", "off"};
	if (!v)
		return true;
	for (size_t i = 0; i < AB_ARRAY_SIZE(words); i++)
		if (strcasecmp(v, words[i]) == 0)
			return true;
	const char *s = v + (*v == '-' || *v == '+');
	if (*s < '0' || *s > '9')
		return false;
	while (*s >= '0' && *s <= '9')
		s++;
	if (*s && strchr("kKmMgG", *s))
		s++;
	return *s == '\0';
}

static bool key_is(const keyparts *k, const char *section, const char *name)
{
	return !k->sub && strlen(section) == k->seclen &&
	       memcmp(section, k->section, k->seclen) == 0 && strcmp(k->name, name) == 0;
}

/* Keys whose meaning depends on the value; -1 when not one of them. */
static int classify_special(const keyparts *k, const char *value)
{
	if (key_is(k, "core", "fsmonitor"))
		return is_git_bool(value) ? AB_GITKEY_INERT : AB_GITKEY_PROGRAM;
	if (k->seclen == 5 && memcmp(k->section, "alias", 5) == 0 && !k->sub)
		return value && value[0] == '!' ? AB_GITKEY_PROGRAM : AB_GITKEY_OTHER;
	/* the ext:: transport runs its address as a command */
	if (k->seclen == 6 && memcmp(k->section, "remote", 6) == 0 && k->sub &&
	    (strcmp(k->name, "url") == 0 || strcmp(k->name, "pushurl") == 0) && value &&
	    strncasecmp(value, "ext::", 5) == 0)
		return AB_GITKEY_PROGRAM;
	/* sendemail.tocmd, cccmd, headercmd, sendmailcmd, and per identity */
	size_t nl = strlen(k->name);
	if (k->seclen == 9 && memcmp(k->section, "sendemail", 9) == 0 && nl >= 3 &&
	    strcmp(k->name + nl - 3, "cmd") == 0)
		return AB_GITKEY_PROGRAM;
	return -1;
}

ab_gitkey_class ab_gitkey_classify(const char *key, const char *value)
{
	keyparts k;
	if (!key || !split_key(key, &k) || k.seclen == 0 || !*k.name)
		return AB_GITKEY_OTHER;
	int c = classify_special(&k, value);
	if (c >= 0)
		return (ab_gitkey_class)c;
	const keyrule *r = rule_find(active_rules, AB_ARRAY_SIZE(active_rules), &k);
	if (!r)
		r = rule_find(inert_rules, AB_ARRAY_SIZE(inert_rules), &k);
	return r ? r->cls : AB_GITKEY_OTHER;
}

const char *ab_gitkey_class_name(ab_gitkey_class c)
{
	switch (c) {
	case AB_GITKEY_INERT: return "inert";
	case AB_GITKEY_PROGRAM: return "program";
	case AB_GITKEY_PATH: return "path";
	case AB_GITKEY_INCLUDE: return "include";
	case AB_GITKEY_OTHER: break;
	}
	return "other";
}
