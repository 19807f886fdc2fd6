/* SPDX-License-Identifier: MIT */
/*
 * gitconfig.h: git's configuration files, the pure part (any process, no
 * I/O).  The parser follows git 2.39's config.c byte for byte where it
 * accepts a file, and refuses what git refuses:
 *
 *   - a UTF-8 byte order mark at the start is skipped; "\r\n" is "\n";
 *   - "[section]", "[section "subsection"]" (in the quoted form '\' takes
 *     the next byte verbatim, a newline inside is an error), and the legacy
 *     "[section.sub]" (lowercased whole, as git does); section names are
 *     [A-Za-z0-9.-], never empty; the rest of the header's line goes on
 *     (a key may follow the ']');
 *   - a key starts with a letter and goes on with [A-Za-z0-9-]; then
 *     optional blanks and either the end of the line (a bare key: VALUE
 *     NULL, boolean true) or '=' and a value: leading blanks dropped, inner
 *     runs of blanks outside quotes each become a space per byte (a tab
 *     outside quotes becomes ' '), trailing blanks dropped, '"' toggles
 *     quoting, ';' and '#' outside quotes start a comment, the escapes
 *     \" \\ \n \t \b and '\' + newline (continuation) only, anything else
 *     after '\' is an error, as is a newline inside quotes;
 *   - a key before any section header is an error here (git accepts it and
 *     then never finds it under a section; nothing needs it);
 *   - a NUL byte anywhere is an error here (git 2.39 cuts a value short at
 *     a NUL; a file that means different things to two readers is refused);
 *   - limits: AB_GITCFG_MAX_BYTES of input, AB_GITCFG_MAX_ENTRIES keys.
 *
 * The classifier says what one key can make git (or a tool git drives) do.
 * The rule, fail closed:
 *   INCLUDE  include.path and includeIf.<anything>.path: another file is
 *            read as config (whatever the condition: conditions depend on
 *            state the sandbox may change).
 *   PATH     a file or directory git reads code-bearing state from:
 *            core.hooksPath (git runs every hook found there),
 *            core.worktree (the work tree whose .gitattributes and
 *            .gitmodules git obeys), core.attributesFile (attributes pick
 *            the filter, diff and merge drivers that run), core.excludesFile
 *            (an agent-written ignore file hides files from `git status`
 *            and `git add`, so what the user reviews is not what is there).
 *   PROGRAM  the value is (or names) a command that runs: the editors,
 *            pagers, helpers and drivers listed in gitconfig.c, alias.*
 *            whose value starts with '!', core.fsmonitor unless it is a
 *            boolean, remote.*.url with an "ext::" transport.
 *   INERT    on the allowlist in gitconfig.c: everything git init, clone,
 *            config user.*, sparse-checkout, submodule add and worktree
 *            add write, and common settings that only change how git shows
 *            or stores data.
 *   OTHER    everything else, known or not.
 */
#ifndef AGENTBOX_GITCONFIG_H
#define AGENTBOX_GITCONFIG_H

#include <stddef.h>

#include "agentbox/common.h"

#define AB_GITCFG_MAX_BYTES (1u << 20) /* a config file larger than this is an error */
#define AB_GITCFG_MAX_ENTRIES 20000
/* How deep include.path / includeIf chains go (git's MAX_INCLUDE_DEPTH). */
#define AB_GITCFG_MAX_INCLUDE_DEPTH 10

/* key: "section.name" or "section.subsection.name": section and name lowercased
 * (as git does), subsection verbatim (quoted form unescaped; the legacy
 * [section.sub] form lowercased as git does).  value: NULL for a bare "name"
 * (boolean true), else the value unquoted and unescaped as git does
 * (\" \\ \n \t \b, line continuation, inline ; and # comments outside quotes,
 * trailing whitespace trimmed).  line: 1-based line of the key.  The callback
 * returning < 0 stops the parse and that value is returned. */
typedef int (*ab_gitcfg_cb)(const char *key, const char *value, unsigned line, void *ctx);
/* 0, or -EINVAL/-E2BIG with err naming line and column (never a crash, never a
 * read past len; NUL bytes are an error as in git). */
int ab_gitconfig_parse(const char *buf, size_t len, ab_gitcfg_cb cb, void *ctx, ab_err *err);

typedef enum {
	AB_GITKEY_INERT,   /* on an allowlist: runs nothing, reads nothing elsewhere */
	AB_GITKEY_PROGRAM, /* the value is a command git or a git-driven tool runs */
	AB_GITKEY_PATH,    /* names a file/directory git reads hooks, config or attributes from */
	AB_GITKEY_INCLUDE, /* include.path, includeIf.<cond>.path */
	AB_GITKEY_OTHER,   /* anything not known to be inert */
} ab_gitkey_class;
/* Classify one key (as the parser gives it).  VALUE matters only where git
 * gives a key both meanings (core.fsmonitor: a boolean is INERT, anything
 * else PROGRAM).  Fail closed: a key not on the inert allowlist is OTHER. */
ab_gitkey_class ab_gitkey_classify(const char *key, const char *value);

/* "inert", "program", "path", "include", "other". */
const char *ab_gitkey_class_name(ab_gitkey_class c);

#endif
