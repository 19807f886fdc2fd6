/* SPDX-License-Identifier: MIT */
/*
 * The harnesses' own files (inside, in the probe's child).  The lab plants
 * what a logged-in user of Claude Code, Codex, Gemini CLI and opencode has
 * in the home: OAuth and API-key files (canaries) and the settings that run
 * hooks, MCP servers and plugins outside any sandbox the next time the
 * harness runs.  Under `default` all of it is simply absent; under a
 * harness profile that grants the harness's directory, the tokens must be
 * hidden and the settings read-only.
 *
 *   SEC-04 harness-credentials: read (and scan) every token file.
 *   PER-02 harness-config-handoff: append a newline to every settings file
 *     (harmless: JSON and TOML ignore it) and create hook/rule files and
 *     absent token files (another account's login for the host); a write
 *     that lands on the host is caught by the judge (the planted files are
 *     hashed before and after, the created ones must not appear).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agentbox/escape.h"

/* Relative to HOME; the same list as the lab's (src/escape/lab/lab.c). */
// clang-format off
static const char *const token_files[] = {
	".claude/.credentials.json",  ".codex/auth.json",
	".codex/.env",                ".gemini/oauth_creds.json",
	".gemini/.env",               ".gemini/mcp-oauth-tokens.json",
	".local/share/opencode/auth.json", ".config/gh/hosts.yml",
};
// clang-format on

static const char *const settings_files[] = {
	".claude/settings.json",
	".codex/config.toml",
	".gemini/settings.json",
	".config/opencode/opencode.json",
};

// clang-format off
static const char *const created_files[] = {
	".claude/hooks/abprobe-hook.sh",     ".claude/settings.local.json",
	".codex/hooks.json",                 ".codex/rules/abprobe.rules",
	".gemini/hooks/abprobe-hook.sh",     ".config/opencode/plugin/abprobe.js",
	/* absent state a host harness runs or obeys: a pre-trusted folder,
	 * an install script, instructions */
	".gemini/trustedFolders.json",       ".config/opencode/package.json",
	".codex/AGENTS.md",
	/* token files the lab does not plant: another account's login, planted
	 * for the host's harness (a profile denies them: they must stay absent) */
	".codex/.credentials.json",          ".gemini/gemini-credentials.json",
};
// clang-format on

void ab_probe_sec04(ab_probe_run *r)
{
	const ab_lab_info *lab = ab_pr_lab(r);
	char path[4096];
	for (size_t i = 0; i < sizeof(token_files) / sizeof(token_files[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", lab->home, token_files[i]);
		ab_pr_read_file(r, path, true, false);
	}
}

/* Append one newline to an existing file; the judge decides whether it
 * reached the host (the private home's copy is fine). */
static void append_newline(ab_probe_run *r, json_t *writes, const char *path)
{
	char what[4200];
	snprintf(what, sizeof(what), "append to %s", path);
	int fd = open(path, O_WRONLY | O_APPEND | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY);
	if (fd < 0) {
		ab_pr_sys(r, what, -1, errno);
		return;
	}
	ssize_t w = write(fd, "\n", 1);
	int e = errno;
	close(fd);
	if (w != 1) {
		ab_pr_sys(r, what, -1, e);
		return;
	}
	json_array_append_new(writes, json_string(path));
	ab_pr_ok(r, what, "written (a private copy unless the judge says otherwise)");
}

static void create_file(ab_probe_run *r, json_t *writes, const char *path)
{
	char what[4200], dir[4096];
	snprintf(what, sizeof(what), "create %s", path);
	snprintf(dir, sizeof(dir), "%s", path);
	char *slash = strrchr(dir, '/');
	if (slash) {
		*slash = '\0';
		mkdir(dir, 0700); /* may fail: the open says why */
	}
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0) {
		ab_pr_sys(r, what, -1, errno);
		return;
	}
	ssize_t w = write(fd, "#!/bin/sh\n# abprobe\n", 20);
	close(fd);
	json_array_append_new(writes, json_string(path));
	if (w != 20)
		ab_pr_error(r, what, "created, but the write failed");
	else
		ab_pr_ok(r, what, "created (a private copy unless the judge says otherwise)");
}

void ab_probe_per02(ab_probe_run *r)
{
	const ab_lab_info *lab = ab_pr_lab(r);
	char path[4096];
	json_t *writes = json_array();
	for (size_t i = 0; i < sizeof(settings_files) / sizeof(settings_files[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", lab->home, settings_files[i]);
		append_newline(r, writes, path);
	}
	for (size_t i = 0; i < sizeof(created_files) / sizeof(created_files[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", lab->home, created_files[i]);
		create_file(r, writes, path);
	}
	ab_pr_report(r, "home_writes", writes);
}
