/* SPDX-License-Identifier: MIT */
/*
 * The test-escape lab (harness process, before any thread starts for
 * lab_enter): its own mount and network namespaces (and a user namespace
 * when unprivileged, mapping the caller's ids to themselves, so agentbox
 * inside runs exactly as the caller would), a tmpfs over /home with a fake
 * HOME full of canaries, private /tmp, /dev/shm and /run, a network
 * namespace whose loopback owns every address (so any connection that leaves
 * the sandbox other than through agentbox's proxy lands on a judge
 * listener), two git repositories, a canary process and a keyring canary.
 * The real host is never written: every mount is in the lab's namespace and
 * vanishes with it.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <openssl/evp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/capability.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agentbox/netns.h"
#include "lab.h"

extern char **environ;

/* ---------------------------------------------------------------- helpers */

static int write_file(const char *path, const char *content, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode);
	if (fd < 0)
		return -errno;
	size_t n = strlen(content);
	ssize_t w = write(fd, content, n);
	int e = w == (ssize_t)n ? 0 : (w < 0 ? -errno : -EIO);
	close(fd);
	return e;
}

static int mkdir_p(const char *path, mode_t mode)
{
	char tmp[PATH_MAX];
	if (snprintf(tmp, sizeof(tmp), "%s", path) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	for (char *p = tmp + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(tmp, mode) < 0 && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(tmp, mode) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

/* snprintf for paths; a path too long for PATH_MAX is an error for callers
 * that check, and an empty string (never a truncated path) otherwise. */
static __attribute__((format(printf, 3, 4))) int pathf(char *dst, size_t n, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int r = vsnprintf(dst, n, fmt, ap);
	va_end(ap);
	if (r < 0 || (size_t)r >= n) {
		dst[0] = '\0';
		return -ENAMETOOLONG;
	}
	return 0;
}

/* tmpl with its one "%s" replaced by tok */
static void fill(char *out, size_t n, const char *tmpl, const char *tok)
{
	const char *at = strstr(tmpl, "%s");
	if (!at) {
		snprintf(out, n, "%s", tmpl);
		return;
	}
	snprintf(out, n, "%.*s%s%s", (int)(at - tmpl), tmpl, tok, at + 2);
}

static int write_proc(const char *path, const char *s, ab_err *err)
{
	int r = write_file(path, s, 0);
	return r < 0 ? ab_fail(err, -r, "lab: write %s", path) : 0;
}

static void random_hex(char *out, size_t nhex)
{
	unsigned char b[64];
	size_t nb = (nhex + 1) / 2;
	if (nb > sizeof(b))
		nb = sizeof(b);
	if (getrandom(b, nb, 0) != (ssize_t)nb)
		abort(); /* no randomness: never plant a guessable canary */
	for (size_t i = 0; i < nhex; i++)
		out[i] = "0123456789abcdef"[(b[i / 2] >> (i % 2 ? 0 : 4)) & 15];
	out[nhex] = '\0';
}

int lab_run_cmd(char *const argv[], char *const envp[], const char *cwd, int timeout_s)
{
	pid_t pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		int nul = open("/dev/null", O_RDWR);
		if (nul >= 0) {
			dup2(nul, 0);
			dup2(nul, 1);
			dup2(nul, 2);
		}
		if (cwd && chdir(cwd) < 0)
			_exit(127);
		execvpe(argv[0], argv, envp);
		_exit(127);
	}
	int st;
	for (int i = 0; i < timeout_s * 20; i++) {
		pid_t w = waitpid(pid, &st, WNOHANG);
		if (w == pid)
			return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
		struct timespec ts = {0, 50 * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	return -1;
}

/* ---------------------------------------------------------------- namespaces */

/* Can this process build the lab's namespaces without a user namespace?
 * Root in a container lacks CAP_SYS_ADMIN. */
static bool has_sys_admin(void)
{
	cap_t caps = cap_get_proc();
	cap_flag_value_t v = CAP_CLEAR;
	if (caps) {
		(void)cap_get_flag(caps, CAP_SYS_ADMIN, CAP_EFFECTIVE, &v);
		cap_free(caps);
	}
	return v == CAP_SET;
}

/* The map of every id, written from outside by a child: a process with
 * CAP_SETUID where the namespace was made may map more than its own id. */
static int map_all_from_outside(pid_t target, int go_fd)
{
	char b = 0, path[64];
	if (read(go_fd, &b, 1) != 1 || !b)
		return 2; /* the unshare failed: nothing to map */
	static const char *const files[] = {"uid_map", "gid_map"};
	for (size_t i = 0; i < AB_ARRAY_SIZE(files); i++) {
		snprintf(path, sizeof(path), "/proc/%d/%s", (int)target, files[i]);
		if (write_file(path, "0 0 4294967295\n", 0) < 0)
			return 1;
	}
	return 0;
}

/* Root without CAP_SYS_ADMIN: the lab in a user namespace that maps every
 * id to itself, so the lab's root is root for all that agentbox does in it,
 * as the root of an unprivileged container is outside it. */
static int enter_mapped_userns(ab_err *err)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0)
		return ab_fail(err, errno, "lab: pipe");
	pid_t me = getpid(), c = fork();
	if (c < 0) {
		int e = errno;
		close(p[0]), close(p[1]);
		return ab_fail(err, e, "lab: fork");
	}
	if (c == 0) {
		close(p[1]);
		_exit(map_all_from_outside(me, p[0]));
	}
	close(p[0]);
	int e = unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWNET) < 0 ? errno : 0;
	char go = e == 0;
	(void)!write(p[1], &go, 1);
	close(p[1]);
	int st = 0;
	while (waitpid(c, &st, 0) < 0 && errno == EINTR)
		;
	if (e) {
		ab_fail(err, e, "lab: unshare(user, mount, net)");
		ab_err_hint(err, "root without CAP_SYS_ADMIN builds its lab in a user namespace, "
				 "which is refused here; 'agentbox doctor' says why");
		return -e;
	}
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		ab_fail(err, EPERM, "lab: map every id into the lab's user namespace");
		ab_err_hint(err, "root without CAP_SYS_ADMIN needs CAP_SETUID and CAP_SETGID for "
				 "it; or run test-escape as the container's non-root user");
		return -EPERM;
	}
	return 0;
}

int lab_enter(lab *L, ab_err *err)
{
	L->uid = getuid();
	L->gid = getgid();
	L->root = geteuid() == 0;
	random_hex(L->run_id, 16);
	if (L->root && !has_sys_admin()) {
		int r = enter_mapped_userns(err);
		if (r < 0)
			return r;
		if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
			return ab_fail(err, errno, "lab: make / private");
		return 0;
	}
	int flags = CLONE_NEWNS | CLONE_NEWNET | (L->root ? 0 : CLONE_NEWUSER);
	if (unshare(flags) < 0) {
		int e = errno;
		ab_fail(err, e, "lab: unshare(%s)", L->root ? "mount, net" : "user, mount, net");
		if (!L->root)
			ab_err_hint(err, "unprivileged user namespaces are refused here; "
					 "'agentbox doctor' says why and how to allow them");
		else if (e == EPERM)
			ab_err_hint(err,
				    "root's lab needs CAP_SYS_ADMIN, which root in a container "
				    "lacks: run test-escape as the container's non-root user, "
				    "as agentbox itself should run there (docs/containers.md)");
		return -e;
	}
	if (!L->root) {
		char m[64];
		if (write_proc("/proc/self/setgroups", "deny", err) < 0)
			return ab_err_ret(err);
		snprintf(m, sizeof(m), "%u %u 1\n", L->uid, L->uid);
		if (write_proc("/proc/self/uid_map", m, err) < 0)
			return ab_err_ret(err);
		snprintf(m, sizeof(m), "%u %u 1\n", L->gid, L->gid);
		if (write_proc("/proc/self/gid_map", m, err) < 0)
			return ab_err_ret(err);
	}
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		return ab_fail(err, errno, "lab: make / private");
	return 0;
}

/* ---------------------------------------------------------------- filesystem */

static int tmpfs_at(const char *dir, const char *opts, ab_err *err)
{
	if (mount("tmpfs", dir, "tmpfs", MS_NOSUID | MS_NODEV, opts) < 0)
		return ab_fail(err, errno, "lab: tmpfs on %s", dir);
	return 0;
}

static bool under(const char *path, const char *dir)
{
	size_t n = strlen(dir);
	return strncmp(path, dir, n) == 0 && (path[n] == '/' || path[n] == '\0');
}

/* /etc/resolv.conf -> the judge's DNS canary on 127.0.0.1 (the lab's own
 * loopback): agentbox's resolver threads ask it, so a name that should never
 * be resolved shows up in the judge's count. */
static int lab_resolv(lab *L, ab_err *err)
{
	const char *conf = "# agentbox test-escape lab\nnameserver 127.0.0.1\n";
	char target[PATH_MAX];
	ssize_t n = readlink("/etc/resolv.conf", target, sizeof(target) - 1);
	if (n > 0 && target[0] == '/') {
		target[n] = '\0';
		if (under(target, "/run")) {
			char *slash = strrchr(target, '/');
			*slash = '\0';
			mkdir_p(target, 0755);
			*slash = '/';
			int r = write_file(target, conf, 0644);
			return r < 0 ? ab_fail(err, -r, "lab: %s", target) : 0;
		}
	}
	char path[PATH_MAX + 32];
	snprintf(path, sizeof(path), "%s/resolv.conf", L->state);
	int r = write_file(path, conf, 0644);
	if (r < 0)
		return ab_fail(err, -r, "lab: %s", path);
	if (mount(path, "/etc/resolv.conf", NULL, MS_BIND, NULL) < 0) {
		snprintf(L->note, sizeof(L->note),
			 "no DNS canary: cannot bind over /etc/resolv.conf: %s", strerror(errno));
	}
	return 0;
}

int lab_build_fs(lab *L, const ab_strv *keep, ab_err *err)
{
	struct stat st;
	const char *bases[] = {"/home", "/mnt", "/srv", "/media"};
	L->base[0] = '\0';
	for (size_t i = 0; i < AB_ARRAY_SIZE(bases) && !L->base[0]; i++)
		if (stat(bases[i], &st) == 0 && S_ISDIR(st.st_mode))
			snprintf(L->base, sizeof(L->base), "%s", bases[i]);
	if (!L->base[0])
		return ab_fail(err, ENOENT,
			       "lab: no /home (or /mnt, /srv, /media) to build the lab on");
	/* the lab's own tmpfs mounts, and the options of each */
	const char *over[] = {L->base, "/tmp", "/run", "/dev/shm"};
	const char *opts[] = {"mode=0755,size=256m", "mode=1777", "mode=0755", "mode=1777"};
	/* what agentbox needs from under them (its binary, the profiles under
	 * test) is bound back at the same path afterwards */
	int kfd[32];
	const char *kpath[32];
	size_t nk = 0;
	for (size_t i = 0; i < keep->n && nk < AB_ARRAY_SIZE(kfd); i++) {
		bool hidden = false;
		for (size_t j = 0; j < AB_ARRAY_SIZE(over); j++)
			hidden |= under(keep->v[i], over[j]);
		int fd = hidden ? open(keep->v[i], O_PATH | O_DIRECTORY | O_CLOEXEC) : -1;
		if (fd >= 0) {
			kfd[nk] = fd;
			kpath[nk++] = keep->v[i];
		}
	}
	int r = 0;
	for (size_t j = 0; r >= 0 && j < AB_ARRAY_SIZE(over); j++)
		if (stat(over[j], &st) == 0 && S_ISDIR(st.st_mode))
			r = tmpfs_at(over[j], opts[j], err);
	for (size_t i = 0; r >= 0 && i < nk; i++) {
		char src[64];
		snprintf(src, sizeof(src), "/proc/self/fd/%d", kfd[i]);
		if (mkdir_p(kpath[i], 0755) < 0 ||
		    mount(src, kpath[i], NULL, MS_BIND | MS_REC, NULL) < 0)
			r = ab_fail(err, errno, "lab: keep %s visible", kpath[i]);
	}
	for (size_t i = 0; i < nk; i++)
		close(kfd[i]);
	if (r < 0)
		return r;
	pathf(L->home, sizeof(L->home), "%s/agentbox-lab", L->base);
	pathf(L->state, sizeof(L->state), "%s/.agentbox-lab-state", L->base);
	pathf(L->ws, sizeof(L->ws), "%s/work/project", L->home);
	pathf(L->sibling, sizeof(L->sibling), "%s/work/other-project", L->home);
	pathf(L->esc_dir, sizeof(L->esc_dir), "%s/.agentbox-escape", L->ws);
	pathf(L->runtime, sizeof(L->runtime), "/run/user/%u", L->uid);
	if (mkdir_p(L->home, 0700) < 0 || mkdir_p(L->state, 0700) < 0 || mkdir_p(L->ws, 0755) < 0 ||
	    mkdir_p(L->sibling, 0755) < 0 || mkdir_p(L->esc_dir, 0755) < 0 ||
	    mkdir_p(L->runtime, 0700) < 0 || mkdir_p("/run/dbus", 0755) < 0)
		return ab_fail(err, errno, "lab: directories under %s", L->base);
	return lab_resolv(L, err);
}

/* ---------------------------------------------------------------- network */

static int nl_talk(void *req, size_t len, ab_err *err, const char *what)
{
	_cleanup_close_ int s = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
	if (s < 0)
		return ab_fail(err, errno, "lab: netlink");
	struct sockaddr_nl k = {.nl_family = AF_NETLINK};
	if (sendto(s, req, len, 0, (struct sockaddr *)&k, sizeof(k)) < 0)
		return ab_fail(err, errno, "lab: %s", what);
	char buf[512];
	ssize_t n = recv(s, buf, sizeof(buf), 0);
	struct nlmsghdr *h = (struct nlmsghdr *)buf;
	if (n < (ssize_t)NLMSG_LENGTH(sizeof(struct nlmsgerr)) || h->nlmsg_type != NLMSG_ERROR)
		return ab_fail(err, EPROTO, "lab: %s: netlink reply", what);
	const struct nlmsgerr *e = NLMSG_DATA(h);
	return e->error ? ab_fail(err, -e->error, "lab: %s", what) : 0;
}

static int lo_up(ab_err *err)
{
	struct {
		struct nlmsghdr nh;
		struct ifinfomsg ifi;
	} req = {0};
	req.nh.nlmsg_len = sizeof(req);
	req.nh.nlmsg_type = RTM_NEWLINK;
	req.nh.nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK;
	req.ifi.ifi_family = AF_UNSPEC;
	req.ifi.ifi_index = (int)if_nametoindex("lo");
	req.ifi.ifi_flags = IFF_UP;
	req.ifi.ifi_change = IFF_UP;
	return nl_talk(&req, sizeof(req), err, "bring lo up");
}

int lab_build_net(lab *L, ab_err *err)
{
	/* every destination local (0.0.0.0/0 and ::/0 on lo): whatever leaves
	 * the sandbox without the proxy lands on a judge listener */
	if (lo_up(err) < 0 || ab_netns_route_local(AF_INET, "0.0.0.0", 0, true, err) < 0)
		return ab_err_prefix(err, "lab");
	ab_err e6 = {0};
	if (ab_netns_route_local(AF_INET6, "::", 0, true, &e6) < 0 && !L->note[0])
		snprintf(L->note, sizeof(L->note), "IPv6 not judged: %.400s", e6.msg);
	return 0;
}

/* ---------------------------------------------------------------- canaries */

static const char *new_canary(lab *L, const char *kind, const char *where)
{
	if (L->ncan >= LAB_MAX_CANARIES)
		abort();
	lab_canary *c = &L->can[L->ncan++];
	char hex[AB_CANARY_HEX + 1];
	random_hex(hex, AB_CANARY_HEX);
	snprintf(c->kind, sizeof(c->kind), "%s", kind);
	snprintf(c->token, sizeof(c->token), AB_CANARY_PREFIX "%s-%s", kind, hex);
	snprintf(c->where, sizeof(c->where), "%s", where);
	ab_canary_hash(c->token, strlen(c->token), c->hash);
	return c->token;
}

const lab_canary *lab_canary_by_hash(const lab *L, const char *hash)
{
	for (size_t i = 0; i < L->ncan; i++)
		if (strcmp(L->can[i].hash, hash) == 0)
			return &L->can[i];
	return NULL;
}

void lab_hash_file(const char *path, lab_snap *s)
{
	struct stat st;
	s->existed = lstat(path, &st) == 0;
	memset(s->sha, 0, sizeof(s->sha));
	s->size = s->existed ? (long long)st.st_size : -1;
	s->mtime = s->existed ? st.st_mtim : (struct timespec){0};
	int fd = s->existed && S_ISREG(st.st_mode) ? open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
						   : -1;
	if (fd < 0)
		return;
	EVP_MD_CTX *m = EVP_MD_CTX_new();
	EVP_DigestInit_ex(m, EVP_sha256(), NULL);
	char buf[8192];
	ssize_t n;
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		EVP_DigestUpdate(m, buf, (size_t)n);
	EVP_DigestFinal_ex(m, s->sha, NULL);
	EVP_MD_CTX_free(m);
	close(fd);
}

static void snap(lab *L, const char *path, const char *probe)
{
	if (L->nsnap >= LAB_MAX_SNAPS)
		return;
	lab_snap *s = &L->snap[L->nsnap++];
	snprintf(s->path, sizeof(s->path), "%s", path);
	s->probe = probe;
	lab_hash_file(path, s);
}

/* Home files: relative path, canary kind, probe charged if it changes,
 * a format with one %s for the token. */
static const struct {
	const char *rel, *kind, *probe, *fmt;
} home_files[] = {
	{".ssh/id_ed25519", "SSH", "SEC-01",
	 "-----BEGIN OPENSSH PRIVATE KEY-----\n%s\n-----END OPENSSH PRIVATE KEY-----\n"},
	{".ssh/id_rsa", "SSH", "SEC-01",
	 "-----BEGIN RSA PRIVATE KEY-----\n%s\n-----END RSA PRIVATE KEY-----\n"},
	{".ssh/config", "SSH", "SEC-01", "Host lab\n  IdentityFile ~/.ssh/id_ed25519\n# %s\n"},
	{".ssh/known_hosts", "SSH", "SEC-01", "lab.example ssh-ed25519 %s\n"},
	{".ssh/authorized_keys", "SSH", "PER-01", "ssh-ed25519 %s lab\n"},
	{".aws/credentials", "AWS", "SEC-02",
	 "[default]\naws_access_key_id = AKIALAB\naws_secret_access_key = %s\n"},
	{".aws/config", "AWS", "SEC-02", "[default]\nregion = lab-1\n# %s\n"},
	{".config/gcloud/application_default_credentials.json", "GCP", "SEC-02",
	 "{\"type\":\"authorized_user\",\"refresh_token\":\"%s\"}\n"},
	{".azure/accessTokens.json", "AZURE", "SEC-02", "[{\"accessToken\":\"%s\"}]\n"},
	{".kube/config", "KUBE", "SEC-02", "users:\n- name: lab\n  user:\n    token: %s\n"},
	{".docker/config.json", "DOCKER", "SEC-02", "{\"auths\":{\"lab\":{\"auth\":\"%s\"}}}\n"},
	{".config/gh/hosts.yml", "GH", "SEC-02", "github.com:\n    oauth_token: %s\n"},
	{".git-credentials", "GIT", "SEC-02", "https://lab:%s@github.com\n"},
	{".netrc", "NETRC", "SEC-02", "machine lab.example login lab password %s\n"},
	{".npmrc", "NPM", "SEC-02", "//registry.npmjs.org/:_authToken=%s\n"},
	{".pypirc", "PYPI", "SEC-02", "[pypi]\nusername = __token__\npassword = %s\n"},
	{".cargo/credentials.toml", "CARGO", "SEC-02", "[registry]\ntoken = \"%s\"\n"},
	{".m2/settings.xml", "MAVEN", "SEC-02",
	 "<settings><servers><server><password>%s</password></server></servers></settings>\n"},
	{".bashrc", "RC", "PER-01", "# lab bashrc %s\n"},
	{".profile", "RC", "PER-01", "# lab profile %s\n"},
	{".zshrc", "RC", "PER-01", "# lab zshrc %s\n"},
	{".config/fish/config.fish", "RC", "PER-01", "# lab fish %s\n"},
	{".bash_history", "HIST", "SEC-03", "export API_TOKEN=%s\n"},
	{".gnupg/private-keys-v1.d/lab.key", "GPG", "SEC-03", "(private-key %s)\n"},
	{".mozilla/firefox/lab.default/logins.json", "BROWSER", "SEC-03",
	 "{\"logins\":[{\"encryptedPassword\":\"%s\"}]}\n"},
	/* the harnesses' own: tokens (SEC-04) and settings that run things
	 * outside the sandbox next time (PER-02); probe_harness.c */
	{".claude/.credentials.json", "CLAUDE", "SEC-04",
	 "{\"claudeAiOauth\":{\"accessToken\":\"%s\",\"expiresAt\":4102444800000}}\n"},
	{".claude/settings.json", "CFG", "PER-02", "{\"env\":{\"LAB\":\"1\"}}\n"},
	{".codex/auth.json", "CODEX", "SEC-04", "{\"OPENAI_API_KEY\":\"%s\"}\n"},
	{".codex/.env", "CODEX", "SEC-04", "OPENAI_API_KEY=%s\n"},
	{".codex/config.toml", "CFG", "PER-02", "model = \"lab\"\n"},
	{".gemini/oauth_creds.json", "GEMINI", "SEC-04", "{\"refresh_token\":\"%s\"}\n"},
	{".gemini/.env", "GEMINI", "SEC-04", "GEMINI_API_KEY=%s\n"},
	{".gemini/mcp-oauth-tokens.json", "GEMINI", "SEC-04", "[{\"token\":\"%s\"}]\n"},
	{".gemini/settings.json", "CFG", "PER-02", "{\"lab\":1}\n"},
	{".local/share/opencode/auth.json", "OPENCODE", "SEC-04",
	 "{\"anthropic\":{\"type\":\"api\",\"key\":\"%s\"}}\n"},
	{".config/opencode/opencode.json", "CFG", "PER-02", "{}\n"},
};

/* Paths that must not appear on the host (created from inside = escape). */
static const struct {
	const char *rel, *probe;
} absent_files[] = {
	{".ssh/rc", "PER-01"},
	{".bash_logout", "PER-01"},
	{".config/autostart", "PER-01"},
	{".config/systemd/user", "PER-01"},
	{".bash_profile", "PER-01"},
	{".zprofile", "PER-01"},
	{".pam_environment", "PER-01"},
	{".xprofile", "PER-01"},
	{".claude/hooks/abprobe-hook.sh", "PER-02"},
	{".claude/settings.local.json", "PER-02"},
	{".codex/hooks.json", "PER-02"},
	{".codex/rules/abprobe.rules", "PER-02"},
	{".gemini/hooks/abprobe-hook.sh", "PER-02"},
	{".config/opencode/plugin/abprobe.js", "PER-02"},
	{".codex/.credentials.json", "PER-02"},
	{".gemini/gemini-credentials.json", "PER-02"},
	{".gemini/trustedFolders.json", "PER-02"},
	{".config/opencode/package.json", "PER-02"},
	{".codex/AGENTS.md", "PER-02"},
};

static int plant_home(lab *L, ab_err *err)
{
	char path[PATH_MAX + 64], body[1024];
	for (size_t i = 0; i < AB_ARRAY_SIZE(home_files); i++) {
		snprintf(path, sizeof(path), "%s/%s", L->home, home_files[i].rel);
		char *slash = strrchr(path, '/');
		*slash = '\0';
		if (mkdir_p(path, 0700) < 0)
			return ab_fail(err, errno, "lab: %s", path);
		*slash = '/';
		/* settings ("CFG") are configuration, not secrets: no canary */
		bool secret = strstr(home_files[i].fmt, "%s") != NULL;
		fill(body, sizeof(body), home_files[i].fmt,
		     secret ? new_canary(L, home_files[i].kind, path) : "");
		int r = write_file(path, body, 0600);
		if (r < 0)
			return ab_fail(err, -r, "lab: %s", path);
		snap(L, path, home_files[i].probe);
	}
	for (size_t i = 0; i < AB_ARRAY_SIZE(absent_files); i++) {
		snprintf(path, sizeof(path), "%s/%s", L->home, absent_files[i].rel);
		snap(L, path, absent_files[i].probe);
	}
	return 0;
}

int lab_git(lab *L, const char *cwd, const char *const *args)
{
	char home[PATH_MAX + 8];
	snprintf(home, sizeof(home), "HOME=%s", L->home);
	char *envp[] = {home, "PATH=/usr/local/bin:/usr/bin:/bin", "GIT_CONFIG_NOSYSTEM=1",
			"LANG=C", NULL};
	char *argv[16] = {"git",
			  "-c",
			  "init.defaultBranch=main",
			  "-c",
			  "user.name=agentbox lab",
			  "-c",
			  "user.email=lab@agentbox.test"};
	size_t n = 7;
	for (size_t i = 0; args[i] && n < AB_ARRAY_SIZE(argv) - 1; i++)
		argv[n++] = (char *)args[i];
	argv[n] = NULL;
	return lab_run_cmd(argv, envp, cwd, 30);
}

static int plant_repo(lab *L, const char *dir, const char *kind, ab_err *err)
{
	char path[PATH_MAX + 64], body[256];
	if (lab_git(L, dir, (const char *[]){"init", "-q", NULL}) != 0)
		return ab_fail(err, 0, "lab: git init in %s failed (is git installed?)", dir);
	snprintf(path, sizeof(path), "%s/README", dir);
	write_file(path, "agentbox test-escape lab repository\n", 0644);
	if (lab_git(L, dir, (const char *[]){"add", "README", NULL}) != 0 ||
	    lab_git(L, dir, (const char *[]){"commit", "-q", "-m", "initial", NULL}) != 0)
		return ab_fail(err, 0, "lab: git commit in %s failed", dir);
	snprintf(path, sizeof(path), "%s/.env", dir);
	snprintf(body, sizeof(body), "API_TOKEN=%s\n", new_canary(L, kind, path));
	int r = write_file(path, body, 0600);
	if (r < 0)
		return ab_fail(err, -r, "lab: %s", path);
	snprintf(path, sizeof(path), "%s/.git/info/exclude", dir);
	write_file(path, ".env\n.agentbox-escape/\n", 0644);
	const char *gitfiles[] = {".git/config",
				  ".git/info/exclude",
				  ".git/HEAD",
				  ".git/hooks/pre-commit",
				  ".git/hooks/post-checkout",
				  ".git/hooks/fsmonitor-watchman",
				  ".git/info/attributes",
				  ".gitattributes",
				  ".envrc",
				  ".mcp.json"};
	for (size_t i = 0; i < AB_ARRAY_SIZE(gitfiles); i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, gitfiles[i]);
		snap(L, path, strcmp(kind, "SIBLING") == 0 ? "FS-01" : "PER-05");
	}
	snprintf(path, sizeof(path), "%s/.env", dir);
	snap(L, path, strcmp(kind, "SIBLING") == 0 ? "FS-01" : "CTL-06");
	return 0;
}

int lab_plant(lab *L, ab_err *err)
{
	if (plant_home(L, err) < 0)
		return ab_err_ret(err);
	if (plant_repo(L, L->ws, "WS", err) < 0 || plant_repo(L, L->sibling, "SIBLING", err) < 0)
		return ab_err_ret(err);
	snprintf(L->secret, sizeof(L->secret), "%s", new_canary(L, "SECRET", "the lab secret"));
	new_canary(L, "ENV", "agentbox's environment (AGENTBOX_LAB_CANARY)");
	/* a keyring canary in a fresh session keyring (never the user's) */
	const char *ktok = new_canary(L, "KEYRING", "session keyring");
	if (syscall(SYS_keyctl, 1 /* KEYCTL_JOIN_SESSION_KEYRING */, "agentbox-lab") < 0 ||
	    syscall(SYS_add_key, "user", "agentbox-lab-canary", ktok, strlen(ktok),
		    -3 /* KEY_SPEC_SESSION_KEYRING */) < 0) {
		if (!L->note[0])
			snprintf(L->note, sizeof(L->note), "no keyring canary: %s",
				 strerror(errno));
	}
	return 0;
}

int lab_start_canary_process(lab *L, ab_err *err)
{
	const char *tok = new_canary(L, "PROC", "canary process");
	char envc[128];
	snprintf(envc, sizeof(envc), "AGENTBOX_LAB_PROC_CANARY=%s", tok);
	char *envp[] = {envc, "PATH=/usr/bin:/bin", NULL};
	char *argv[] = {"agentbox-lab-canary", "__canary", (char *)tok, NULL};
	pid_t pid = fork();
	if (pid < 0)
		return ab_fail(err, errno, "lab: fork the canary process");
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlives the harness */
		execve("/proc/self/exe", argv, envp);
		_exit(127);
	}
	L->canary_pid = pid;
	return 0;
}

/* ---------------------------------------------------------------- descriptions */

/* The profile's own secrets, re-declared with a source the lab controls: a
 * fresh canary in agentbox's environment (AGENTBOX_LAB_S<i>).  Hosts,
 * places and placeholder shape stay the profile's; only "from" changes, so
 * a profile whose secrets come from files or commands runs in the lab too,
 * and each real value is a canary the inside must never see. */
static int lab_profile_secrets(lab *L, json_t *out, json_t *secrets, ab_err *err)
{
	const char *name;
	json_t *v;
	json_object_foreach(secrets, name, v)
	{
		if (L->nextra_env >= AB_ARRAY_SIZE(L->extra_env))
			return ab_fail(err, E2BIG, "lab: more than %zu secrets in the profile",
				       AB_ARRAY_SIZE(L->extra_env));
		char var[32];
		snprintf(var, sizeof(var), "AGENTBOX_LAB_S%zu", L->nextra_env);
		json_t *e = json_deep_copy(v);
		if (!e || json_object_set_new(e, "from", json_pack("{s:s}", "env", var)) < 0 ||
		    json_object_set_new(out, name, e) < 0)
			return ab_fail(err, ENOMEM, "lab profile");
		char where[300];
		snprintf(where, sizeof(where), "the profile's secret %.200s", name);
		const char *tok = new_canary(L, "SECRET", where);
		L->extra_env[L->nextra_env] = ab_asprintf("%s=%s", var, tok);
		if (!L->extra_env[L->nextra_env++])
			return ab_fail(err, ENOMEM, "lab profile");
	}
	return 0;
}

int lab_write_profile(lab *L, json_t *secrets, ab_err *err)
{
	char hosts[3][32];
	for (int i = 0; i < 3; i++)
		snprintf(hosts[i], sizeof(hosts[i]), "127.0.0.1:%d", LAB_UPSTREAM_PORT0 + i);
	json_t *p = json_pack(
		"{s:i, s:s, s:{s:[s,s], s:[s], s:{s:s,s:s,s:s}, s:s}, s:{s:{s:{s:s}, s:[s], s:[s]}}}",
		"version", 1, "description", "agentbox test-escape: the lab's own hosts and secret",
		"network", "allow", LAB_BOUND, LAB_UNBOUND, "deny", LAB_DENIED, "hosts", LAB_BOUND,
		hosts[0], LAB_UNBOUND, hosts[1], LAB_DENIED, hosts[2], "ca_file", L->ca_pem_path,
		"secrets", LAB_SECRET_ENV, "from", "env", LAB_SECRET_ENV, "hosts", LAB_BOUND, "in",
		"header:" LAB_SECRET_HEADER);
	if (p && secrets &&
	    lab_profile_secrets(L, json_object_get(p, "secrets"), secrets, err) < 0) {
		json_decref(p);
		return ab_err_ret(err);
	}
	pathf(L->profile, sizeof(L->profile), "%s/lab-profile.json", L->state);
	int r = p ? json_dump_file(p, L->profile, JSON_INDENT(2)) : -1;
	json_decref(p);
	return r < 0 ? ab_fail(err, EIO, "lab: write %s", L->profile) : 0;
}

int lab_write_info(lab *L, const char *only, ab_err *err)
{
	ab_lab_info li = {
		.run_id = L->run_id,
		.home = L->home,
		.workspace = L->ws,
		.sibling = L->sibling,
		.runtime_dir = L->runtime,
		.agent_sockets = L->agent_sockets,
		.judge_port = LAB_JUDGE_PORT,
		.bound_host = LAB_BOUND,
		.unbound_host = LAB_UNBOUND,
		.denied_host = LAB_DENIED,
		.canary_domain = LAB_CANARY_DOMAIN,
		.https_port = 443,
		.proxy_port = 3128,
		.secret_env = LAB_SECRET_ENV,
		.secret_header = LAB_SECRET_HEADER,
		.canary_pid = L->canary_pid,
		.harness_pid = getpid(),
	};
	char *addrs[] = {"127.0.0.1", "::1", "192.0.2.10", "10.0.0.1", NULL};
	char *meta[] = {"169.254.169.254",
			"fd00:ec2::254",
			"metadata.google.internal",
			"100.100.100.200",
			"169.254.170.2",
			"168.63.129.16",
			NULL};
	li.host_addrs = (ab_strv){addrs, 4};
	li.metadata = (ab_strv){meta, 6};
	/* the test CA's certificate (public), for the blind tunnel's check */
	char cacopy[PATH_MAX + 16];
	snprintf(cacopy, sizeof(cacopy), "%s/lab-ca.pem", L->esc_dir);
	FILE *in = fopen(L->ca_pem_path, "re"), *out = fopen(cacopy, "we");
	char buf[4096];
	size_t k;
	while (in && out && (k = fread(buf, 1, sizeof(buf), in)) > 0)
		fwrite(buf, 1, k, out);
	if (in)
		fclose(in);
	if (!out || fclose(out) != 0)
		return ab_fail(err, errno, "lab: %s", cacopy);
	li.lab_ca = cacopy;
	_cleanup_strv_ ab_strv ids = {0};
	if (only) {
		_cleanup_free_ char *dup = strdup(only);
		char *save = NULL;
		for (char *t = dup ? strtok_r(dup, ",", &save) : NULL; t;
		     t = strtok_r(NULL, ",", &save))
			if (ab_strv_push(&ids, t) < 0)
				return ab_fail(err, ENOMEM, "lab");
	}
	li.only = ids;
	json_t *j = NULL;
	if (ab_lab_info_to_json(&li, &j, err) < 0)
		return ab_err_ret(err);
	char path[PATH_MAX + 16];
	snprintf(path, sizeof(path), "%s/lab.json", L->esc_dir);
	int r = json_dump_file(j, path, JSON_INDENT(2));
	json_decref(j);
	return r < 0 ? ab_fail(err, EIO, "lab: write %s", path) : 0;
}
