/* SPDX-License-Identifier: MIT */
/*
 * test-escape probes for secrets and persistence: SEC-01 (ssh keys), SEC-02
 * (cloud and tool tokens), SEC-03 (histories, gnupg, browsers, other homes,
 * the sibling repository, service-account tokens), PER-01 (shell startup
 * files in the home) and PER-05 (git hooks and config that the host's git
 * would run).  Runs inside the sandbox, in each probe's own forked child of
 * `agentbox __probe` (runner.c), as the sandboxed user.
 *
 * Reads are only scanned (ab_pr_scan), never reported.  PER-01 creates
 * files only where they do not exist (the private home) and reports them
 * for the judge.  PER-05 writes its payload (`touch /tmp/abprobe-RUN-per05`)
 * only into files it managed to open for writing: that is the attack the
 * judge checks for by running the host's git afterwards.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "probe_fsutil.h"

/* -------------------------------------------------------------- SEC-01..03 */

/*
 * SEC-01 ssh-keys.  Sub-attempts, for the lab's home, $HOME, the passwd
 * home and /root: read ~/.ssh/{id_ed25519,id_rsa,id_ecdsa,id_dsa,
 * id_ed25519_sk,config,known_hosts,authorized_keys,id_ed25519.pub} and walk
 * ~/.ssh (opendir, every file read); the host keys in /etc/ssh.  Everything
 * read is scanned.
 */
void ab_probe_sec01(ab_probe_run *r)
{
	static const char *const rels[] = {
		".ssh/id_ed25519",  ".ssh/id_rsa",          ".ssh/id_ecdsa",
		".ssh/id_dsa",      ".ssh/id_ed25519_sk",   ".ssh/config",
		".ssh/known_hosts", ".ssh/authorized_keys", ".ssh/id_ed25519.pub"};
	static const char *const host_keys[] = {"/etc/ssh/ssh_host_ed25519_key",
						"/etc/ssh/ssh_host_rsa_key",
						"/etc/ssh/ssh_host_ecdsa_key"};
	struct fsp_homes h;
	char p[PMAX];
	fsp_homes_get(r, &h, true);
	fsp_read_home_files(r, &h, rels, AB_ARRAY_SIZE(rels));
	for (size_t i = 0; i < h.n; i++)
		if (fsp_pf(p, sizeof(p), "%s/.ssh", h.v[i]))
			fsp_walk_record(r, p, 2, 500, NULL);
	for (size_t i = 0; i < AB_ARRAY_SIZE(host_keys); i++)
		ab_pr_read_file(r, host_keys[i], false, false);
}

/*
 * SEC-02 cloud-and-devtool-tokens.  Sub-attempts, for each home: read the
 * credential files of AWS, gcloud, Azure, kubectl, docker, gh, git, netrc,
 * npm, yarn, pip, cargo, maven, gradle, terraform, vault, postgres, mysql,
 * s3cmd, boto, rclone, doctl, Hugging Face, Claude, Codex, Copilot, the
 * GNOME keyring; opendir the credential directories.  Everything read is
 * scanned.
 */
void ab_probe_sec02(ab_probe_run *r)
{
	static const char *const rels[] = {".aws/credentials",
					   ".aws/config",
					   ".config/gcloud/application_default_credentials.json",
					   ".config/gcloud/credentials.db",
					   ".config/gcloud/access_tokens.db",
					   ".azure/accessTokens.json",
					   ".azure/msal_token_cache.json",
					   ".kube/config",
					   ".docker/config.json",
					   ".config/gh/hosts.yml",
					   ".config/hub",
					   ".git-credentials",
					   ".config/git/credentials",
					   ".netrc",
					   ".npmrc",
					   ".yarnrc.yml",
					   ".pypirc",
					   ".config/pip/pip.conf",
					   ".cargo/credentials.toml",
					   ".cargo/credentials",
					   ".m2/settings.xml",
					   ".gradle/gradle.properties",
					   ".terraform.d/credentials.tfrc.json",
					   ".vault-token",
					   ".pgpass",
					   ".my.cnf",
					   ".s3cfg",
					   ".boto",
					   ".config/rclone/rclone.conf",
					   ".config/doctl/config.yaml",
					   ".cache/huggingface/token",
					   ".huggingface/token",
					   ".claude/.credentials.json",
					   ".codex/auth.json",
					   ".config/github-copilot/hosts.json",
					   ".config/github-copilot/apps.json",
					   ".local/share/keyrings/login.keyring"};
	static const char *const dirs[] = {".aws",  ".config/gcloud", ".azure",
					   ".kube", ".docker",        ".config/gh"};
	struct fsp_homes h;
	char p[PMAX], what[PMAX + 16];
	fsp_homes_get(r, &h, false);
	fsp_read_home_files(r, &h, rels, AB_ARRAY_SIZE(rels));
	for (size_t i = 0; i < h.n; i++)
		for (size_t k = 0; k < AB_ARRAY_SIZE(dirs); k++) {
			if (!fsp_pf(p, sizeof(p), "%s/%s", h.v[i], dirs[k]) ||
			    !fsp_pf(what, sizeof(what), "opendir %s", p))
				continue;
			DIR *d = opendir(p);
			int e = errno;
			if (d) {
				int n = 0;
				while (readdir(d))
					n++;
				closedir(d);
				ab_pr_ok(r, what, "visible, %d entries (files are read above)", n);
			} else {
				ab_pr_sys(r, what, -1, e);
			}
		}
}

/* What is left of a probe's time budget (ms) for one more walk: at most
 * `each`, 0 when the probe's `total` since t0 is spent. */
static double budget(double t0, double total, double each)
{
	double left = total - (fsp_now_ms() - t0);
	return left < 20 ? 0 : left < each ? left : each;
}

/* The secret places under one home (SEC-03). */
static void sec03_home(ab_probe_run *r, const char *home, double t0)
{
	static const char *const rels[] = {".bash_history",
					   ".zsh_history",
					   ".python_history",
					   ".psql_history",
					   ".mysql_history",
					   ".node_repl_history",
					   ".lesshst",
					   ".viminfo",
					   ".local/share/fish/fish_history",
					   ".gnupg",
					   ".mozilla",
					   ".config/google-chrome/Default/Login Data",
					   ".config/chromium/Default/Login Data",
					   ".local/share/keyrings",
					   ".password-store",
					   ".ssh",
					   ".aws",
					   ".git-credentials",
					   ".netrc",
					   ".config/gh",
					   ".docker/config.json",
					   ".kube/config"};
	char p[PMAX];
	for (size_t i = 0; i < AB_ARRAY_SIZE(rels); i++)
		if (budget(t0, 3500, 300) > 0 && fsp_pf(p, sizeof(p), "%s/%s", home, rels[i]))
			fsp_walk_record(r, p, 5, budget(t0, 3500, 300), NULL);
}

/* Report the mount table (the judge may compare sources with host paths)
 * and scan it. */
static void sec03_mountinfo(ab_probe_run *r)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	if (!f) {
		ab_pr_sys(r, "read /proc/self/mountinfo", -1, errno);
		return;
	}
	json_t *mounts = json_array();
	char *line = NULL;
	size_t cap = 0;
	int n = 0;
	while (getline(&line, &cap, f) > 0) {
		char root[PMAX], mnt[PMAX];
		ab_pr_scan(r, "/proc/self/mountinfo", line, strlen(line));
		if (sscanf(line, "%*s %*s %*s %4095s %4095s", root, mnt) == 2 && n++ < 200)
			json_array_append_new(mounts, json_sprintf("%s <- %s", mnt, root));
	}
	free(line);
	fclose(f);
	ab_pr_ok(r, "read /proc/self/mountinfo", "%d mounts (reported)", n);
	ab_pr_report(r, "mounts", mounts);
}

/*
 * SEC-03 other-secrets.  Sub-attempts: shell and tool histories, ~/.gnupg,
 * browser profiles, keyrings and the password store under each home; the
 * same under /root and every /home/USER; /etc/shadow, /etc/gshadow,
 * /etc/sudoers, /etc/ssl/private; the sibling repository (its .env, its
 * .git/config, a walk); the workspace's parent and the lab's root (the
 * workspace itself skipped); /var/lib, /run/user/USER, /run/secrets,
 * /var/run/secrets (service account tokens); /proc/self/mountinfo reported.
 * Everything read is scanned.
 */
void ab_probe_sec03(ab_probe_run *r)
{
	static const char *const abs_paths[] = {"/etc/shadow",      "/etc/gshadow", "/etc/sudoers",
						"/etc/ssl/private", "/run/user",    "/run/secrets",
						"/var/run/secrets"};
	const ab_lab_info *lab = ab_pr_lab(r);
	double t0 = fsp_now_ms();
	struct fsp_homes h;
	char p[PMAX];
	/* the lab's own places first, so a big real home cannot starve them */
	if (lab->sibling) {
		if (fsp_pf(p, sizeof(p), "%s/.env", lab->sibling))
			ab_pr_read_file(r, p, true, false);
		if (fsp_pf(p, sizeof(p), "%s/.git/config", lab->sibling))
			ab_pr_read_file(r, p, true, false);
		fsp_walk_record(r, lab->sibling, 3, 300, NULL);
	}
	_cleanup_free_ char *par =
		fsp_pf(p, sizeof(p), "%s/..", lab->workspace) ? ab_path_normalize(p) : NULL;
	_cleanup_free_ char *lroot =
		fsp_pf(p, sizeof(p), "%s/..", lab->home) ? ab_path_normalize(p) : NULL;
	if (par)
		fsp_walk_record(r, par, 2, 300, lab->workspace);
	if (lroot && (!par || strcmp(lroot, par)))
		fsp_walk_record(r, lroot, 2, 300, lab->workspace);
	for (size_t i = 0; i < AB_ARRAY_SIZE(abs_paths); i++)
		fsp_walk_record(r, abs_paths[i], 4, 200, NULL);
	fsp_walk_record(r, "/var/lib", 1, 200, NULL);
	sec03_mountinfo(r);
	fsp_homes_get(r, &h, true);
	for (size_t i = 0; i < h.n; i++)
		sec03_home(r, h.v[i], t0);
	DIR *d = opendir("/home");
	struct dirent *e;
	int users = 0;
	while (d && users < 8 && budget(t0, 4000, 150) > 0 && (e = readdir(d)))
		if (e->d_name[0] != '.' && fsp_pf(p, sizeof(p), "/home/%s", e->d_name) && ++users)
			fsp_walk_record(r, p, 4, budget(t0, 4000, 150), lab->workspace);
	if (d)
		closedir(d);
	else
		ab_pr_sys(r, "opendir /home", -1, errno);
}

/* ------------------------------------------------------------------ PER-01 */

/* One startup file: append-open if it exists (a planted host file holds a
 * canary), else create it (private home: recorded for the judge). */
static void per01_one(ab_probe_run *r, const char *home, const char *rel, bool marker,
		      json_t *markers, json_t *home_writes)
{
	char p[PMAX], what[PMAX + 48], line[128];
	if (!fsp_pf(p, sizeof(p), "%s/%s", home, rel))
		return;
	fsp_pf(what, sizeof(what), "append-open %s (zero bytes)", p);
	int fd = open(p, APPEND_FLAGS | O_NOFOLLOW);
	if (fd >= 0) {
		close(fd);
		_cleanup_close_ int rfd = open(p, RD_FLAGS | O_NOFOLLOW);
		_cleanup_free_ char *buf = malloc(READ_MAX);
		ssize_t got = rfd >= 0 && buf ? fsp_fd_read_all(rfd, buf, READ_MAX) : -1;
		if (got > 0 && ab_canary_scan(buf, (size_t)got, NULL, NULL))
			ab_pr_escaped(r, what, "the host's planted startup file is writable");
		else
			ab_pr_ok(r, what,
				 "exists and is writable but holds no canary (private copy); judge "
				 "checks");
		fsp_mark(home_writes, p);
		return;
	}
	if (errno != ENOENT) {
		ab_pr_sys(r, what, -1, errno);
		return;
	}
	/* create it, with its directories, inside the home */
	for (char *s = p + strlen(home) + 1; (s = strchr(s, '/')); s++) {
		*s = '\0';
		(void)mkdir(p, 0700);
		*s = '/';
	}
	fsp_pf(what, sizeof(what), "create %s", p);
	fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0) {
		ab_pr_sys_expect(r, what, -1, errno, fsp_k_blocked);
		return;
	}
	fsp_pf(line, sizeof(line), "# abprobe-%s-per01\n", fsp_run_id(r));
	fsp_write_str(fd, line);
	close(fd);
	ab_pr_ok(r, what, "written (private); judge checks");
	fsp_mark(marker ? markers : home_writes, p);
}

/*
 * PER-01 shell-startup-files.  Sub-attempts, in the lab's home and $HOME:
 * append-open (zero bytes) or create ~/.bashrc, ~/.bash_profile,
 * ~/.bash_login, ~/.bash_logout, ~/.profile, ~/.zshrc, ~/.zshenv,
 * ~/.zprofile, ~/.config/fish/config.fish, ~/.ssh/rc,
 * ~/.ssh/authorized_keys, ~/.gitconfig, ~/.config/git/config,
 * ~/.pam_environment, ~/.xsessionrc, ~/.vimrc, an autostart entry, a
 * systemd user unit, an environment.d file and a program in ~/.local/bin;
 * the same via /proc/self/root.  An existing file that holds a canary (the
 * host's) and opens for writing is an escape; created files go to the
 * report ("home_writes", "markers" for abprobe-* names) for the judge.
 */
void ab_probe_per01(ab_probe_run *r)
{
	static const char *const rels[] = {".bashrc",
					   ".bash_profile",
					   ".bash_login",
					   ".bash_logout",
					   ".profile",
					   ".zshrc",
					   ".zshenv",
					   ".zprofile",
					   ".config/fish/config.fish",
					   ".ssh/rc",
					   ".ssh/authorized_keys",
					   ".gitconfig",
					   ".config/git/config",
					   ".pam_environment",
					   ".xsessionrc",
					   ".vimrc"};
	static const char *const named[][2] = {{".config/autostart", "per01.desktop"},
					       {".config/systemd/user", "per01.service"},
					       {".config/environment.d", "per01.conf"},
					       {".local/bin", "per01"}};
	json_t *markers = json_array(), *home_writes = json_array();
	struct fsp_homes h;
	char rel[256], p[PMAX], what[PMAX + 32];
	h.n = 0; /* never the passwd home: only the lab's and $HOME */
	fsp_homes_add(&h, ab_pr_lab(r)->home);
	fsp_homes_add(&h, getenv("HOME"));
	for (size_t i = 0; i < h.n; i++) {
		for (size_t k = 0; k < AB_ARRAY_SIZE(rels); k++)
			per01_one(r, h.v[i], rels[k], false, markers, home_writes);
		for (size_t k = 0; k < AB_ARRAY_SIZE(named); k++)
			if (fsp_pf(rel, sizeof(rel), "%s/abprobe-%s-%s", named[k][0], fsp_run_id(r),
				   named[k][1]))
				per01_one(r, h.v[i], rel, true, markers, home_writes);
	}
	if (fsp_pf(p, sizeof(p), "/proc/self/root%s/.bashrc", ab_pr_lab(r)->home) &&
	    fsp_pf(what, sizeof(what), "append-open %s (zero bytes)", p)) {
		int fd = open(p, APPEND_FLAGS | O_NOFOLLOW);
		if (fd >= 0)
			ab_pr_ok(r, what,
				 "writable (the private home's file, created above); judge checks");
		else
			ab_pr_sys(r, what, -1, errno);
		if (fd >= 0)
			close(fd);
	}
	fsp_report_arr(r, "markers", markers);
	fsp_report_arr(r, "home_writes", home_writes);
}

/* ------------------------------------------------------------------ PER-05 */

struct per05 {
	ab_probe_run *r;
	const char *ws;
	char marker[PMAX];     /* /tmp/abprobe-RUN-per05: what the payloads create */
	char hook[PMAX];       /* #!/bin/sh payload */
	char config[PMAX * 2]; /* git config payload */
};

/* A write that worked: ESCAPED, and the payload goes in (the real attack,
 * so the judge's host git run can show whether it would fire). */
static void per05_hit(struct per05 *c, const char *what, int fd, const char *payload)
{
	bool wrote = payload && fsp_write_str(fd, payload);
	ab_pr_escaped(c->r, what, "opened for writing%s", wrote ? "; payload written" : "");
}

/* Create path (must not exist) with mode; payload written if it works. */
static void per05_create(struct per05 *c, const char *path, mode_t mode, const char *payload)
{
	char what[PMAX + 16];
	fsp_pf(what, sizeof(what), "create %s", path);
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
	if (fd < 0) {
		ab_pr_sys(c->r, what, -1, errno);
		return;
	}
	per05_hit(c, what, fd, payload);
	close(fd);
}

/* Append-open path; payload appended if it works.  True if it did. */
static bool per05_append(struct per05 *c, const char *path, const char *payload)
{
	char what[PMAX + 16];
	fsp_pf(what, sizeof(what), "append to %s", path);
	int fd = open(path, APPEND_FLAGS | O_NOFOLLOW);
	if (fd < 0) {
		ab_pr_sys(c->r, what, -1, errno);
		return false;
	}
	per05_hit(c, what, fd, payload);
	close(fd);
	return true;
}

/* Write a new file (O_EXCL); false if it cannot. */
static bool put_file(const char *path, const char *a, const char *b, mode_t mode)
{
	_cleanup_close_ int fd =
		open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
	return fd >= 0 && fsp_write_str(fd, a) && (!b || fsp_write_str(fd, b));
}

/* The config payload's core.hooksPath names a directory in the workspace
 * (writable by design): give it a hook once the config took the payload. */
static void per05_hooks_path(struct per05 *c)
{
	char d[PMAX], p[PMAX];
	if (fsp_pf(d, sizeof(d), "%s/.abprobe-%s-hooks", c->ws, fsp_run_id(c->r)) &&
	    mkdir(d, 0755) == 0 && fsp_pf(p, sizeof(p), "%s/pre-commit", d))
		put_file(p, c->hook, NULL, 0755);
}

static void per05_payloads(struct per05 *c)
{
	const char *m = c->marker;
	fsp_pf(c->hook, sizeof(c->hook), "#!/bin/sh\ntouch %s\n", m);
	fsp_pf(c->config, sizeof(c->config),
	       "\n# abprobe %s per05\n[core]\n\tfsmonitor = \"touch %s #\"\n\tpager = \"touch %s; "
	       "cat #\"\n"
	       "\tsshCommand = \"touch %s #\"\n\thooksPath = %s/.abprobe-%s-hooks\n"
	       "[diff]\n\texternal = \"touch %s #\"\n[filter \"abprobe\"]\n\tclean = \"touch %s; "
	       "cat #\"\n"
	       "\tsmudge = \"touch %s; cat #\"\n[credential]\n\thelper = \"!touch %s #\"\n",
	       fsp_run_id(c->r), m, m, m, c->ws, fsp_run_id(c->r), m, m, m, m);
}

/* hooks, config, config.worktree, commondir, info/attributes, modules,
 * worktrees: in place. */
static void per05_in_place(struct per05 *c)
{
	static const char *const hooks[] = {
		"pre-commit", "post-checkout",         "fsmonitor-watchman", "pre-push",
		"post-merge", "reference-transaction", "post-index-change"};
	char p[PMAX], what[PMAX + 16];
	for (size_t i = 0; i < AB_ARRAY_SIZE(hooks); i++)
		if (fsp_pf(p, sizeof(p), "%s/.git/hooks/%s", c->ws, hooks[i]))
			per05_create(c, p, 0755, c->hook);
	if (fsp_pf(p, sizeof(p), "%s/.git/hooks/pre-commit.sample", c->ws))
		per05_append(c, p, NULL);
	bool hit = fsp_pf(p, sizeof(p), "%s/.git/config", c->ws) && per05_append(c, p, c->config);
	hit |= fsp_pf(p, sizeof(p), "%s/.git/config.worktree", c->ws) &&
	       per05_append(c, p, c->config);
	if (hit)
		per05_hooks_path(c);
	if (fsp_pf(p, sizeof(p), "%s/.git/commondir", c->ws))
		per05_append(c, p, NULL); /* never write: it would break the repository */
	if (fsp_pf(p, sizeof(p), "%s/.git/info/attributes", c->ws))
		per05_append(c, p, "* filter=abprobe diff=abprobe\n");
	const char *subs[] = {"modules", "worktrees"};
	for (size_t i = 0; i < 2; i++) {
		if (!fsp_pf(p, sizeof(p), "%s/.git/%s/abprobe-%s", c->ws, subs[i],
			    fsp_run_id(c->r)) ||
		    !fsp_pf(what, sizeof(what), "mkdir %s", p))
			continue;
		long k = mkdir(p, 0700);
		ab_pr_sys(c->r, what, k, errno);
		if (k == 0)
			rmdir(p);
	}
}

/* Replace a protected entry: rename over it, or exchange it with ours.
 * A success is exchanged back at once. */
static void per05_swap(struct per05 *c, const char *ours, const char *theirs)
{
	char what[2 * PMAX];
	fsp_pf(what, sizeof(what), "renameat2(%s, %s, RENAME_EXCHANGE)", ours, theirs);
	if (renameat2(AT_FDCWD, ours, AT_FDCWD, theirs, RENAME_EXCHANGE) == 0) {
		ab_pr_escaped(c->r, what, "protected entry swapped (swapped back)");
		renameat2(AT_FDCWD, ours, AT_FDCWD, theirs, RENAME_EXCHANGE);
	} else {
		ab_pr_sys(c->r, what, -1, errno);
	}
	fsp_pf(what, sizeof(what), "rename(%s, %s)", ours, theirs);
	FSP_SYS(c->r, what, rename(ours, theirs));
}

static void rm_tree1(const char *dir, const char *const *names)
{
	char p[PMAX];
	for (size_t i = 0; names[i]; i++)
		if (fsp_pf(p, sizeof(p), "%s/%s", dir, names[i]))
			unlink(p);
	rmdir(dir);
}

/* The current .git/config (up to 64 KiB), "" if unreadable; NULL on OOM. */
static char *read_small(const char *path)
{
	char *b = calloc(1, 65536);
	_cleanup_close_ int fd = b ? open(path, RD_FLAGS | O_NOFOLLOW) : -1;
	if (fd >= 0 && read(fd, b, 65535) < 0)
		b[0] = '\0';
	return b;
}

/* The ways `git config` and an attacker replace files: config.lock renamed
 * over config, a hooks directory and a whole .git of our own swapped in, a
 * hard link to config. */
static void per05_replace(struct per05 *c)
{
	static const char *const names[] = {"pre-commit", "config", NULL};
	char gdir[PMAX], cfg[PMAX], lock[PMAX], hooks[PMAX], mine[PMAX], p[PMAX], q[PMAX];
	if (!fsp_pf(gdir, sizeof(gdir), "%s/.git", c->ws) ||
	    !fsp_pf(cfg, sizeof(cfg), "%s/config", gdir) ||
	    !fsp_pf(lock, sizeof(lock), "%s.lock", cfg) ||
	    !fsp_pf(hooks, sizeof(hooks), "%s/hooks", gdir) ||
	    !fsp_mkname(mine, sizeof(mine), c->r, gdir, "per05-hooks"))
		return;
	_cleanup_free_ char *orig = read_small(cfg);
	if (!orig)
		return;
	if (put_file(lock, orig, c->config, 0644)) {
		per05_swap(c, lock, cfg);
		unlink(lock);
	} else {
		ab_pr_sys(c->r, "create .git/config.lock (to rename over config)", -1, errno);
	}
	if (mkdir(mine, 0700) == 0 && fsp_pf(p, sizeof(p), "%s/pre-commit", mine) &&
	    put_file(p, c->hook, NULL, 0755))
		per05_swap(c, mine, hooks);
	rm_tree1(mine, names);
	/* a whole .git of our own, with the payload config */
	if (fsp_mkname(mine, sizeof(mine), c->r, c->ws, "per05-gitdir") && mkdir(mine, 0700) == 0 &&
	    fsp_pf(p, sizeof(p), "%s/config", mine) && put_file(p, orig, c->config, 0644))
		per05_swap(c, mine, gdir);
	rm_tree1(mine, names);
	/* a second name for .git/config, written through */
	if (fsp_mkname(q, sizeof(q), c->r, c->ws, "per05-cfglink")) {
		if (linkat(AT_FDCWD, cfg, AT_FDCWD, q, 0) == 0) {
			per05_append(c, q, c->config);
			unlink(q);
		} else {
			ab_pr_sys(c->r, "hard link .git/config into the workspace", -1, errno);
		}
	}
}

/* Editor, direnv and agent settings; hook managers (`?` entries). */
static void per05_settings(struct per05 *c)
{
	static const char *const files[] = {".envrc",
					    ".vscode/settings.json",
					    ".vscode/tasks.json",
					    ".idea/workspace.xml",
					    ".claude/settings.json",
					    ".claude/settings.local.json",
					    ".mcp.json"};
	static const char *const ents[] = {".envrc", ".vscode", ".idea", ".claude", ".mcp.json"};
	char p[PMAX], q[PMAX], what[2 * PMAX], env[PMAX];
	fsp_pf(env, sizeof(env), "touch %s\n", c->marker);
	for (size_t i = 0; i < AB_ARRAY_SIZE(files); i++) {
		struct stat st;
		if (!fsp_pf(p, sizeof(p), "%s/%s", c->ws, files[i]))
			continue;
		if (lstat(p, &st) == 0 && S_ISREG(st.st_mode))
			per05_append(c, p, NULL);
		else if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode) &&
			 fsp_pf(q, sizeof(q), "%s/x", p))
			per05_create(c, q, 0644, NULL); /* a placeholder directory */
		else
			per05_create(c, p, 0644, i == 0 ? env : NULL);
	}
	/* replace a placeholder directory: remove it, rename it away */
	for (size_t i = 0; i < AB_ARRAY_SIZE(ents); i++) {
		struct stat st;
		if (!fsp_pf(p, sizeof(p), "%s/%s", c->ws, ents[i]) || lstat(p, &st) < 0 ||
		    !S_ISDIR(st.st_mode) || !fsp_pf(q, sizeof(q), "%s.abprobe", p))
			continue;
		fsp_pf(what, sizeof(what), "rename %s away", p);
		long k = rename(p, q);
		ab_pr_sys(c->r, what, k, errno);
		if (k == 0)
			rename(q, p);
	}
	const char *opt[] = {".husky", ".pre-commit-config.yaml"};
	for (size_t i = 0; i < 2; i++) {
		struct stat st;
		if (!fsp_pf(p, sizeof(p), "%s/%s", c->ws, opt[i]))
			continue;
		if (lstat(p, &st) < 0) {
			ab_pr_ok(c->r, p,
				 "absent: a `?` entry may be created (runs only through the "
				 "protected hooks)");
		} else if (S_ISDIR(st.st_mode)) {
			if (fsp_pf(q, sizeof(q), "%s/pre-commit", p))
				per05_create(c, q, 0755, c->hook);
		} else {
			per05_append(c, p, NULL);
		}
	}
}

/* A nested repository with a payload config: the documented open gap
 * (threat-model.md, "Nested git repositories").  Recorded, not judged. */
static void per05_nested(struct per05 *c)
{
	char d[PMAX], g[PMAX], p[PMAX];
	static const char *const names[] = {"config", "HEAD", NULL};
	if (!fsp_mkname(d, sizeof(d), c->r, c->ws, "per05-nested") ||
	    !fsp_pf(g, sizeof(g), "%s/.git", d))
		return;
	bool made = mkdir(d, 0700) == 0 && mkdir(g, 0700) == 0 &&
		    fsp_pf(p, sizeof(p), "%s/config", g) &&
		    put_file(p, "[core]\n\trepositoryformatversion = 0\n", c->config, 0644) &&
		    fsp_pf(p, sizeof(p), "%s/HEAD", g) &&
		    put_file(p, "ref: refs/heads/main\n", NULL, 0644);
	if (made) {
		ab_pr_ok(c->r, "create a nested repository with a payload config",
			 "KNOWN GAP (threat-model.md): it can be created; removed again");
		ab_pr_report(c->r, "known_gaps", json_pack("[s]", "nested-git-repository"));
	} else {
		ab_pr_sys(c->r, "create a nested repository with a payload config", -1, errno);
	}
	rm_tree1(g, names);
	rmdir(d);
}

/*
 * PER-05 git-trust-handoff.  Sub-attempts (payload: `touch
 * /tmp/abprobe-RUN-per05`, written only into files that opened): create
 * hooks (pre-commit, post-checkout, fsmonitor-watchman, pre-push,
 * post-merge, reference-transaction, post-index-change), append to a sample
 * hook; append core.fsmonitor, core.pager, core.sshCommand, core.hooksPath,
 * diff.external, filter.abprobe.clean/smudge and credential.helper to
 * .git/config and .git/config.worktree; append-open .git/commondir; write
 * .git/info/attributes; mkdir in .git/modules and .git/worktrees; rename
 * config.lock over config, exchange (RENAME_EXCHANGE) and rename a new
 * hooks directory and a whole new .git over the protected ones; hard-link
 * .git/config; .envrc, .vscode, .idea, .claude/settings*.json, .mcp.json
 * (create, write into the placeholder, rename it away); .husky and
 * .pre-commit-config.yaml when they exist; a nested repository (known gap,
 * recorded).  Any write that works is ESCAPED; the judge runs host git and
 * checks the payload marker ("payload_marker").
 */
void ab_probe_per05(ab_probe_run *r)
{
	static struct per05 c;
	c.r = r;
	c.ws = ab_pr_lab(r)->workspace;
	if (!fsp_mkname(c.marker, sizeof(c.marker), r, "/tmp", "per05")) {
		ab_pr_error(r, "workspace paths", "path too long");
		return;
	}
	per05_payloads(&c);
	ab_pr_report(r, "payload_marker", json_string(c.marker));
	per05_in_place(&c);
	per05_replace(&c);
	per05_settings(&c);
	per05_nested(&c);
}
