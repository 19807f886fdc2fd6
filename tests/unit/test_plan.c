/* SPDX-License-Identifier: MIT */
/*
 * The planner (plan.c), driven entirely by fakes: profiles built by hand, a
 * fake host (ab_host_fake) and a fake filesystem behind the lstat callback.
 * Checks mount order, deny-wins, absent grants, protected paths, identity in
 * root mode, the environment allowlist, fail-closed downgrades, limits, pty
 * and command decisions; plus golden files of a fixed plan (explain --json
 * and a compact mount list).  Regenerate the goldens with AB_UPDATE_GOLDEN=1.
 */
#include "unit.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include "agentbox/host.h"
#include "agentbox/plan.h"

/* ---------------------------------------------------------------- fake fs */

/* type: 'd' dir, 'f' file, 'l' symlink, 's' socket, 'a' absent (override),
 * 'e' lstat fails with EACCES. */
typedef struct fentry {
	const char *path;
	char type;
	uid_t uid;
} fentry;

// clang-format off
static const fentry base_fs[] = {
	{"/usr", 'd', 0},
	{"/usr/bin", 'd', 0},
	{"/usr/lib", 'd', 0},
	{"/bin", 'l', 0},
	{"/sbin", 'l', 0},
	{"/lib", 'l', 0},
	{"/lib64", 'l', 0},
	{"/opt", 'd', 0},
	{"/etc", 'd', 0},
	{"/etc/passwd", 'f', 0},
	{"/etc/shadow", 'f', 0},
	{"/etc/gshadow", 'f', 0},
	{"/etc/sudoers", 'f', 0},
	{"/etc/sudoers.d", 'd', 0},
	{"/etc/machine-id", 'f', 0},
	{"/etc/ssh", 'd', 0},
	{"/etc/ssh/ssh_config", 'f', 0},
	{"/etc/ssl", 'd', 0},
	{"/etc/ssl/private", 'd', 0},
	{"/etc/ssl/certs", 'd', 0},
	{"/etc/link", 'l', 0},
	{"/home", 'd', 0},
	{"/home/u", 'd', 1000},
	{"/home/u/.ssh", 'd', 1000},
	{"/home/u/.ssh/id_ed25519", 'f', 1000},
	{"/home/u/.gitconfig", 'f', 1000},
	{"/home/u/.config", 'd', 1000},
	{"/home/u/.config/tool", 'd', 1000},
	{"/home/u/proj", 'd', 1000},
	{"/home/u/proj/src", 'd', 1000},
	{"/home/u/proj/.git", 'd', 1000},
	{"/home/u/proj/.git/hooks", 'd', 1000},
	{"/home/u/proj/.git/config", 'f', 1000},
	{"/home/u/proj/.bashrc", 'f', 1000},
	{"/home/u/proj/.env", 'f', 1000},
	{"/home/u/proj/secrets", 'd', 1000},
	{"/data", 'd', 0},
	{"/data/cache", 'd', 1000},
	{"/data/file", 'f', 1000},
	{"/run", 'd', 0},
	{"/tmp", 'd', 0},
	{"/var", 'd', 0},
	{"/var/tmp", 'd', 0},
	{"/run/user", 'd', 0},
	{"/run/user/1000", 'd', 1000},
	{"/run/user/1000/bus", 's', 1000},
	{"/secret", 'e', 0},
	{"/root", 'd', 0},
	{"/root/.gitconfig", 'f', 0},
	{"/root/.config", 'd', 0},
	{"/srv", 'd', 0},
	{"/srv/proj", 'd', 0},       /* root-owned workspace */
	{"/srv/proj/.git", 'd', 0},
	{"/srv/userproj", 'd', 1000}, /* user-owned workspace */
	{"/srv/data", 'd', 0},
	{"/srv/userdata", 'd', 1000},
};
// clang-format on

typedef struct fakefs {
	const fentry *extra; /* consulted first: overrides for one test */
	size_t nextra;
	unsigned calls;
} fakefs;

static const fentry *fs_find(const fakefs *fs, const char *path, size_t len)
{
	for (size_t i = 0; i < fs->nextra; i++)
		if (strlen(fs->extra[i].path) == len && strncmp(fs->extra[i].path, path, len) == 0)
			return &fs->extra[i];
	for (size_t i = 0; i < AB_ARRAY_SIZE(base_fs); i++)
		if (strlen(base_fs[i].path) == len && strncmp(base_fs[i].path, path, len) == 0)
			return &base_fs[i];
	return NULL;
}

static int fake_lstat(void *ctx, const char *path, struct stat *st)
{
	fakefs *fs = ctx;
	fs->calls++;
	if (!path || path[0] != '/')
		fail_msg("planner lstat'ed a relative path: %s", path ? path : "(null)");
	memset(st, 0, sizeof(*st));
	if (strcmp(path, "/") == 0) {
		st->st_mode = S_IFDIR | 0755;
		return 0;
	}
	/* every proper prefix must be a directory */
	for (const char *s = path + 1; *s; s++) {
		if (*s != '/')
			continue;
		const fentry *e = fs_find(fs, path, (size_t)(s - path));
		if (!e || e->type == 'a')
			return -ENOENT;
		if (e->type == 'e')
			return -EACCES;
		if (e->type != 'd')
			return -ENOTDIR;
	}
	const fentry *e = fs_find(fs, path, strlen(path));
	if (!e || e->type == 'a')
		return -ENOENT;
	switch (e->type) {
	case 'd': st->st_mode = S_IFDIR | 0755; break;
	case 'f': st->st_mode = S_IFREG | 0644; break;
	case 'l': st->st_mode = S_IFLNK | 0777; break;
	case 's': st->st_mode = S_IFSOCK | 0666; break;
	case 'e': return -EACCES;
	default: fail_msg("bad fake entry %s", e->path);
	}
	st->st_uid = e->uid;
	st->st_gid = e->uid;
	return 0;
}

/* ---------------------------------------------------------------- profiles */

static void sv_add(ab_strv *s, const char *const *items)
{
	for (size_t i = 0; items[i]; i++)
		assert_int_equal(ab_strv_push(s, items[i]), 0);
}
#define SV(s, ...) sv_add((s), (const char *const[]){__VA_ARGS__, NULL})

static ab_profile *prof_new(void)
{
	ab_profile *p = calloc(1, sizeof(*p));
	assert_non_null(p);
	p->name = strdup("test");
	p->audit.exec = p->audit.denials = -1; /* as the loader leaves them: unset = on */
	p->limits = (ab_limits){AB_LIMIT_UNSET, AB_LIMIT_UNSET, AB_LIMIT_UNSET, AB_LIMIT_UNSET,
				AB_LIMIT_UNSET, AB_LIMIT_UNSET, AB_LIMIT_UNSET};
	return p;
}

static void prof_set_env(ab_profile *p, const char *k, const char *v)
{
	ab_kv *n = realloc(p->env.set, (p->env.nset + 1) * sizeof(*n));
	assert_non_null(n);
	p->env.set = n;
	n[p->env.nset].key = strdup(k);
	n[p->env.nset].val = strdup(v);
	p->env.nset++;
}

static void prof_free(ab_profile *p)
{
	if (!p)
		return;
	free(p->name);
	free(p->path);
	free(p->description);
	free(p->hostname);
	ab_strv *v[] = {&p->files,          &p->command,      &p->fs.read,
			&p->fs.write,       &p->fs.deny,      &p->fs.protect,
			&p->fs.tmpfs,       &p->env.pass,     &p->syscalls.deny,
			&p->syscalls.allow, &p->unix_sockets, &p->allow_downgrade,
			&p->fs.guard};
	for (size_t i = 0; i < AB_ARRAY_SIZE(v); i++)
		ab_strv_free(v[i]);
	for (size_t i = 0; i < p->env.nset; i++) {
		free(p->env.set[i].key);
		free(p->env.set[i].val);
	}
	free(p->env.set);
	free(p->loopback.ports);
	free(p);
}

/* ---------------------------------------------------------------- fixture */

// clang-format off
static char *default_environ[] = {
	"TERM=xterm-256color",
	"SSH_AUTH_SOCK=/run/user/1000/ssh",
	"LC_ALL=C.UTF-8",
	"LC_TIME=en_GB.UTF-8",
	"AWS_SECRET_ACCESS_KEY=hunter2",
	"GITHUB_TOKEN=ghp_x",
	"PATH=/home/u/bin:/usr/bin:/bin",
	"HOME=/home/u",
	"TMPDIR=/var/tmp/u",
	"USER=u",
	"LANG=en_US.UTF-8",
	"COLORTERM=truecolor",
	"TZ=Europe/Paris",
	"LD_PRELOAD=/evil.so",
	"=weird",
	"NOEQUALS",
	NULL,
};
// clang-format on

static char *default_argv[] = {"make", "-j4", NULL};

typedef struct fx {
	ab_profile *prof;
	ab_host host;
	fakefs fs;
	ab_plan_input in;
	ab_plan *plan;
	ab_err err;
} fx;

static void fx_init(fx *f, int abi)
{
	memset(f, 0, sizeof(*f));
	f->prof = prof_new();
	ab_host_fake(&f->host, abi);
	f->in = (ab_plan_input){
		.profile = f->prof,
		.host = &f->host,
		.workspace = "/home/u/proj",
		.home = "/home/u",
		.argv = default_argv,
		.environ = default_environ,
		.lstat = fake_lstat,
		.lstat_ctx = &f->fs,
		.user = "u",
		.cwd = "/home/u/proj/src",
		.force_pty = -1,
	};
}

static int fx_build(fx *f)
{
	if (f->plan) {
		ab_plan_free(f->plan);
		f->plan = NULL;
	}
	memset(&f->err, 0, sizeof(f->err));
	int r = ab_plan_build(&f->in, &f->plan, &f->err);
	if (r < 0)
		assert_null(f->plan);
	return r;
}

static void fx_ok(fx *f)
{
	int r = fx_build(f);
	if (r < 0)
		fail_msg("plan failed: %s (hint: %s)", f->err.msg, f->err.hint);
	assert_non_null(f->plan);
}

static void fx_fail(fx *f, const char *msg_part)
{
	int r = fx_build(f);
	if (r >= 0)
		fail_msg("plan succeeded, expected an error containing '%s'", msg_part);
	assert_int_equal(f->err.exit_code, AB_EXIT_FAIL);
	if (!strstr(f->err.msg, msg_part))
		fail_msg("error '%s' lacks '%s'", f->err.msg, msg_part);
}

static void fx_done(fx *f)
{
	if (f->plan)
		ab_plan_free(f->plan);
	prof_free(f->prof);
	f->plan = NULL;
	f->prof = NULL;
}

static ssize_t find_mount(const ab_plan *p, enum ab_mnt_kind kind, const char *dst)
{
	for (size_t i = 0; i < p->nmounts; i++)
		if (p->mounts[i].kind == kind && strcmp(p->mounts[i].dst, dst) == 0)
			return (ssize_t)i;
	return -1;
}

static size_t count_at(const ab_plan *p, const char *dst)
{
	size_t n = 0;
	for (size_t i = 0; i < p->nmounts; i++)
		n += strcmp(p->mounts[i].dst, dst) == 0;
	return n;
}

static const ab_mount *must_mount(const ab_plan *p, enum ab_mnt_kind kind, const char *dst)
{
	ssize_t i = find_mount(p, kind, dst);
	if (i < 0)
		fail_msg("no %s mount at %s", ab_mnt_kind_name(kind), dst);
	return &p->mounts[i];
}

static bool strv_has_prefix(const ab_strv *s, const char *prefix)
{
	for (size_t i = 0; i < s->n; i++)
		if (strncmp(s->v[i], prefix, strlen(prefix)) == 0)
			return true;
	return false;
}

static const char *env_get(const ab_plan *p, const char *name)
{
	size_t l = strlen(name);
	for (size_t i = 0; i < p->envp.n; i++)
		if (strncmp(p->envp.v[i], name, l) == 0 && p->envp.v[i][l] == '=')
			return p->envp.v[i] + l + 1;
	return NULL;
}

static bool structural(enum ab_mnt_kind k)
{
	return k == AB_MNT_TMPFS || k == AB_MNT_PROC || k == AB_MNT_DEV || k == AB_MNT_BIND_RO ||
	       k == AB_MNT_BIND_RW || k == AB_MNT_SYMLINK;
}

static bool strictly_under(const char *a, const char *b)
{
	return strcmp(a, b) != 0 && ab_path_is_under(a, b);
}

/* The ordering contract every plan must satisfy. */
static void check_order(const ab_plan *p)
{
	for (size_t i = 0; i < p->nmounts; i++) {
		const ab_mount *a = &p->mounts[i];
		assert_non_null(a->dst);
		assert_non_null(a->why);
		assert_int_equal(a->dst[0], '/');
		for (size_t j = i + 1; j < p->nmounts; j++) {
			const ab_mount *b = &p->mounts[j];
			/* CONTENT last */
			if (a->kind == AB_MNT_CONTENT && b->kind != AB_MNT_CONTENT)
				fail_msg("content %s before %s %s", a->dst,
					 ab_mnt_kind_name(b->kind), b->dst);
			/* masks and protections after every bind/tmpfs/proc/dev */
			if (!structural(a->kind) && structural(b->kind))
				fail_msg("%s %s before %s %s", ab_mnt_kind_name(a->kind), a->dst,
					 ab_mnt_kind_name(b->kind), b->dst);
			/* parents before children within one class */
			if (structural(a->kind) == structural(b->kind) &&
			    strictly_under(a->dst, b->dst))
				fail_msg("%s %s (child) before %s %s (parent)",
					 ab_mnt_kind_name(a->kind), a->dst,
					 ab_mnt_kind_name(b->kind), b->dst);
			/* the same path: fresh filesystems under grants */
			if (strcmp(a->dst, b->dst) == 0 &&
			    (a->kind == AB_MNT_BIND_RO || a->kind == AB_MNT_BIND_RW) &&
			    (b->kind == AB_MNT_TMPFS || b->kind == AB_MNT_PROC ||
			     b->kind == AB_MNT_DEV))
				fail_msg("bind %s before %s at the same path", a->dst,
					 ab_mnt_kind_name(b->kind));
		}
	}
}

/* ---------------------------------------------------------------- mounts */

static void test_mount_order_basic(void **state)
{
	fx f;
	fx_init(&f, 7);
	SV(&f.prof->fs.read, "/usr", "/etc", "/home/u/.gitconfig");
	SV(&f.prof->fs.deny, "/etc/shadow", "/etc/ssh");
	SV(&f.prof->fs.protect, ".git/hooks", ".envrc");
	fx_ok(&f);
	const ab_plan *p = f.plan;
	check_order(p);
	/* fresh filesystems first */
	assert_int_equal(p->mounts[0].kind, AB_MNT_PROC);
	assert_string_equal(p->mounts[0].dst, "/proc");
	assert_int_equal(p->mounts[1].kind, AB_MNT_DEV);
	assert_string_equal(p->mounts[1].dst, "/dev");
	assert_int_equal(p->mounts[2].kind, AB_MNT_TMPFS);
	assert_string_equal(p->mounts[2].dst, "/tmp");
	/* the base layout */
	must_mount(p, AB_MNT_TMPFS, "/run");
	must_mount(p, AB_MNT_TMPFS, "/var/tmp");
	must_mount(p, AB_MNT_TMPFS, "/dev/shm");
	const ab_mount *home = must_mount(p, AB_MNT_TMPFS, "/home/u");
	assert_true(home->flags & AB_MNT_F_DIR);
	must_mount(p, AB_MNT_RO_REMOUNT, "/proc/sys");
	must_mount(p, AB_MNT_MASK, "/proc/kcore");
	/* grants */
	const ab_mount *usr = must_mount(p, AB_MNT_BIND_RO, "/usr");
	assert_string_equal(usr->src, "/usr");
	assert_int_equal(usr->flags, AB_MNT_F_DIR);
	assert_string_equal(usr->why, "fs.read");
	const ab_mount *gc = must_mount(p, AB_MNT_BIND_RO, "/home/u/.gitconfig");
	assert_int_equal(gc->flags, 0);
	const ab_mount *ws = must_mount(p, AB_MNT_BIND_RW, "/home/u/proj");
	assert_int_equal(ws->flags, AB_MNT_F_DIR);
	assert_string_equal(ws->why, "workspace");
	assert_true(find_mount(p, AB_MNT_TMPFS, "/home/u") <
		    find_mount(p, AB_MNT_BIND_RW, "/home/u/proj"));
	/* CONTENT last: passwd and group */
	assert_int_equal(p->mounts[p->nmounts - 1].kind, AB_MNT_CONTENT);
	assert_int_equal(p->mounts[p->nmounts - 2].kind, AB_MNT_CONTENT);
	const ab_mount *pw = must_mount(p, AB_MNT_CONTENT, "/etc/passwd");
	assert_non_null(strstr(pw->src, "\nu:x:1000:1000:agentbox sandbox user:/home/u:/bin/sh\n"));
	assert_null(strstr(pw->src, "hunter2"));
	const ab_mount *gr = must_mount(p, AB_MNT_CONTENT, "/etc/group");
	assert_non_null(strstr(gr->src, "\nu:x:1000:\n"));
	/* masks and protections come after every bind (checked by check_order)
	 * and exist */
	must_mount(p, AB_MNT_MASK, "/etc/shadow");
	must_mount(p, AB_MNT_PROTECT, "/home/u/proj/.git/hooks");
	must_mount(p, AB_MNT_PLACEHOLDER, "/home/u/proj/.envrc");
	fx_done(&f);
}

/* A grant of "/" and deep grants: still parents first, tmpfs under binds. */
static void test_mount_order_nested(void **state)
{
	fx f;
	fx_init(&f, 7);
	SV(&f.prof->fs.read, "/home/u/.config/tool", "/", "/usr/lib", "/usr", "/tmp");
	SV(&f.prof->fs.write, "/data/cache");
	SV(&f.prof->fs.tmpfs, "/usr/lib/tmpx", "/home/u/.cache");
	SV(&f.prof->fs.deny, "/etc/ssl/private", "/etc");
	fx_ok(&f);
	const ab_plan *p = f.plan;
	check_order(p);
	assert_int_equal(p->mounts[0].kind, AB_MNT_BIND_RO);
	assert_string_equal(p->mounts[0].dst, "/");
	/* the /tmp grant goes on top of the private /tmp */
	assert_true(find_mount(p, AB_MNT_TMPFS, "/tmp") < find_mount(p, AB_MNT_BIND_RO, "/tmp"));
	const ab_mount *t = must_mount(p, AB_MNT_TMPFS, "/home/u/.cache");
	assert_string_equal(t->why, "fs.tmpfs");
	assert_true(find_mount(p, AB_MNT_BIND_RO, "/usr/lib") <
		    find_mount(p, AB_MNT_TMPFS, "/usr/lib/tmpx"));
	/* deny of /etc hides it; its child deny is then not needed but harmless */
	must_mount(p, AB_MNT_MASK, "/etc");
	fx_done(&f);
}

static void test_deny_wins(void **state)
{
	fx f;
	fx_init(&f, 7);
	SV(&f.prof->fs.read, "/etc", "/etc/ssh/ssh_config", "/home/u/.ssh");
	SV(&f.prof->fs.write, "/etc/ssh");
	SV(&f.prof->fs.deny, "/etc/ssh", "/etc/shadow", "/etc/nonexistent", "/home/u/.ssh",
	   "/home/u/.aws");
	fx_ok(&f);
	const ab_plan *p = f.plan;
	check_order(p);
	/* grants inside (or equal to) a denied path are dropped and listed */
	assert_int_equal(find_mount(p, AB_MNT_BIND_RO, "/etc/ssh/ssh_config"), -1);
	assert_int_equal(find_mount(p, AB_MNT_BIND_RW, "/etc/ssh"), -1);
	assert_int_equal(find_mount(p, AB_MNT_BIND_RO, "/home/u/.ssh"), -1);
	assert_true(ab_strv_contains(&p->hidden,
				     "/etc/ssh/ssh_config (fs.read, inside denied /etc/ssh)"));
	assert_true(ab_strv_contains(&p->hidden, "/etc/ssh (fs.write, inside denied /etc/ssh)"));
	assert_true(
		ab_strv_contains(&p->hidden, "/home/u/.ssh (fs.read, inside denied /home/u/.ssh)"));
	/* denied paths visible through a grant are masked: dir and file */
	const ab_mount *m = must_mount(p, AB_MNT_MASK, "/etc/ssh");
	assert_true(m->flags & AB_MNT_F_DIR);
	assert_string_equal(m->why, "fs.deny");
	m = must_mount(p, AB_MNT_MASK, "/etc/shadow");
	assert_false(m->flags & AB_MNT_F_DIR);
	assert_true(ab_strv_contains(&p->hidden, "/etc/ssh"));
	assert_true(ab_strv_contains(&p->hidden, "/etc/shadow"));
	assert_true(find_mount(p, AB_MNT_BIND_RO, "/etc") < find_mount(p, AB_MNT_MASK, "/etc/ssh"));
	/* absent denied paths and denied paths under the private home need no mask */
	assert_int_equal(find_mount(p, AB_MNT_MASK, "/etc/nonexistent"), -1);
	assert_int_equal(find_mount(p, AB_MNT_MASK, "/home/u/.ssh"), -1);
	assert_int_equal(find_mount(p, AB_MNT_MASK, "/home/u/.aws"), -1);
	/* nothing below /home/u/.ssh is reachable: no mount, no landlock rule */
	for (size_t i = 0; i < p->nmounts; i++)
		if (ab_path_is_under(p->mounts[i].dst, "/home/u/.ssh"))
			fail_msg("mount %s inside a denied path", p->mounts[i].dst);
	for (size_t i = 0; i < p->landlock.nrules; i++)
		if (ab_path_is_under(p->landlock.rules[i].path, "/home/u/.ssh") ||
		    ab_path_is_under(p->landlock.rules[i].path, "/etc/ssh"))
			fail_msg("landlock rule %s inside a denied path",
				 p->landlock.rules[i].path);
	fx_done(&f);
}

/* The host's bound unix sockets that a grant shows are masked (a host
 * process would serve the sandbox through them); those outside grants, in
 * the private home, gone, no longer sockets, or denied anyway are not; the
 * same socket spelled through another form of the home is masked where the
 * grant shows it. */
static void test_host_sockets(void **state)
{
	static const fentry extra[] = {
		{"/home/u/proj/daemon.sock", 's', 1000},
		{"/home/u/proj/notsock", 'f', 1000},
		{"/home/u/proj/denied.sock", 's', 1000},
		{"/home/u/proj/alias.sock", 's', 1000},
		{"/home/u/proj/agent.sock", 's', 1000},
		{"/home/u/x.sock", 's', 1000},
		{"/etc/ro.sock", 's', 0},
		{"/etc/link", 'l', 0},
	};
	fx f;
	fx_init(&f, 7);
	f.fs.extra = extra;
	f.fs.nextra = AB_ARRAY_SIZE(extra);
	f.in.pw_home = "/var/home/u";
	SV(&f.prof->fs.read, "/etc");
	SV(&f.prof->fs.deny, "/home/u/proj/denied.sock");
	SV(&f.prof->unix_sockets, "/home/u/proj/agent.sock"); /* granted on purpose */
	ab_strv socks = {0};
	SV(&socks, "/home/u/proj/daemon.sock", "/run/user/1000/bus", "/home/u/proj/notsock",
	   "/home/u/proj/gone.sock", "/home/u/proj/denied.sock", "/home/u/x.sock", "/etc/ro.sock",
	   "/etc/link/s.sock", "/var/home/u/proj/alias.sock", "/home/u/proj/daemon.sock",
	   "/home/u/proj/agent.sock");
	f.in.host_sockets = &socks;
	fx_ok(&f);
	const ab_plan *p = f.plan;
	check_order(p);
	const ab_mount *m = must_mount(p, AB_MNT_MASK, "/home/u/proj/daemon.sock");
	assert_string_equal(m->why, "host socket");
	assert_false(m->flags & AB_MNT_F_DIR);
	assert_int_equal(count_at(p, "/home/u/proj/daemon.sock"), 1); /* listed twice */
	assert_true(ab_strv_contains(&p->hidden, "/home/u/proj/daemon.sock"));
	must_mount(p, AB_MNT_MASK, "/etc/ro.sock"); /* read-only grants too */
	must_mount(p, AB_MNT_MASK, "/home/u/proj/alias.sock");
	assert_string_equal(must_mount(p, AB_MNT_MASK, "/home/u/proj/denied.sock")->why, "fs.deny");
	assert_int_equal(find_mount(p, AB_MNT_MASK, "/home/u/proj/agent.sock"), -1);
	must_mount(p, AB_MNT_BIND_RW, "/home/u/proj/agent.sock");
	static const char *const none[] = {"/run/user/1000/bus",     "/home/u/proj/notsock",
					   "/home/u/proj/gone.sock", "/home/u/x.sock",
					   "/etc/link/s.sock",       "/var/home/u/proj/alias.sock"};
	for (size_t i = 0; i < AB_ARRAY_SIZE(none); i++)
		assert_int_equal(count_at(p, none[i]), 0);
	ab_strv_free(&socks);
	fx_done(&f);
}

/* agentbox's control directories are hidden from every grant that shows
 * them: masked where they exist (read-only grants too), reserved where absent
 * in a writable grant, left alone under the private /tmp and /run; a
 * workspace inside one is refused. */
static void test_control_dirs(void **state)
{
	static const fentry extra[] = {
		{"/run/user/1000/agentbox", 'd', 1000},
		{"/tmp/agentbox-1000", 'd', 1000},
		{"/tmp/agentbox-1000/w", 'd', 1000},
	};
	static const char *const dirs[] = {"/run/user/1000/agentbox", "/tmp/agentbox-1000", NULL};
	fx f;
	fx_init(&f, 7);
	f.in.control_dirs = dirs;
	fx_ok(&f); /* private /run and /tmp: nothing to hide */
	assert_int_equal(count_at(f.plan, dirs[0]), 0);
	assert_int_equal(count_at(f.plan, dirs[1]), 0);
	fx_done(&f);

	fx_init(&f, 7);
	f.fs.extra = extra;
	f.fs.nextra = AB_ARRAY_SIZE(extra);
	f.in.control_dirs = dirs;
	SV(&f.prof->fs.read, "/run/user/1000");
	SV(&f.prof->fs.write, "/tmp/agentbox-1000");
	fx_ok(&f);
	check_order(f.plan);
	assert_true(must_mount(f.plan, AB_MNT_MASK, dirs[0])->flags & AB_MNT_F_DIR);
	assert_true(must_mount(f.plan, AB_MNT_MASK, dirs[1])->flags & AB_MNT_F_DIR);
	assert_true(ab_strv_contains(&f.plan->hidden, dirs[0]));
	assert_true(ab_strv_contains(&f.plan->hidden, dirs[1]));
	fx_done(&f);

	fx_init(&f, 7); /* absent, in a writable grant: the sandbox may not make it */
	f.in.control_dirs = dirs;
	SV(&f.prof->fs.write, "/tmp");
	fx_ok(&f);
	must_mount(f.plan, AB_MNT_PLACEHOLDER, dirs[1]);
	fx_done(&f);

	fx_init(&f, 7);
	f.fs.extra = extra;
	f.fs.nextra = AB_ARRAY_SIZE(extra);
	f.in.control_dirs = dirs;
	f.in.workspace = "/tmp/agentbox-1000/w";
	f.in.cwd = "/tmp/agentbox-1000/w";
	fx_fail(&f, "refusing to use /tmp/agentbox-1000/w as the workspace: it is inside "
		    "/tmp/agentbox-1000, where agentbox keeps its control sockets");
	fx_done(&f);
}

/* Deny inside the writable workspace masks it; deny of a symlink in a granted
 * tree is refused (a mount cannot cover a link). */
static void test_deny_in_workspace_and_symlink(void **state)
{
	fx f;
	fx_init(&f, 7);
	SV(&f.prof->fs.deny, "/home/u/proj/.env", "/home/u/proj/secrets");
	fx_ok(&f);
	check_order(f.plan);
	assert_false(must_mount(f.plan, AB_MNT_MASK, "/home/u/proj/.env")->flags & AB_MNT_F_DIR);
	assert_true(must_mount(f.plan, AB_MNT_MASK, "/home/u/proj/secrets")->flags & AB_MNT_F_DIR);
	fx_done(&f);

	fx_init(&f, 7);
	SV(&f.prof->fs.read, "/etc");
	SV(&f.prof->fs.deny, "/etc/link");
	fx_fail(&f, "fs.deny: /etc/link is a symbolic link inside a granted tree");
	assert_non_null(strstr(f.err.hint, "target"));
	fx_done(&f);

	/* an lstat error other than "absent" fails closed */
	fx_init(&f, 7);
	SV(&f.prof->fs.read, "/");
	SV(&f.prof->fs.deny, "/secret");
	fx_fail(&f, "fs.deny: /secret");
	assert_int_equal(f.err.code, EACCES);
	fx_done(&f);
}

/* A deny whose path goes through a symbolic link inside a granted tree would
 * be placed by path somewhere else: refused rather than silently lost. */
static void test_deny_through_symlink(void **state)
{
	fentry over[] = {{"/etc/alt", 'd', 0},
			 {"/etc/alt/foo", 'l', 0},
			 {"/etc/alt/foo/secret", 'f', 0},
			 {"/bin/su", 'f', 0}};
	const struct {
		const char *read, *deny, *msg; /* msg NULL: fine */
	} t[] = {
		{"/etc", "/etc/alt/foo/secret",
		 "fs.deny: /etc/alt/foo/secret is below the symbolic link /etc/alt/foo"},
		{"/bin", "/bin/su", "fs.deny: /bin/su is below the symbolic link /bin"},
		{"/", "/bin/su", "fs.deny: /bin/su is below the symbolic link /bin"},
		{"/etc/passwd", "/etc/passwd/x", NULL}, /* under a file: nothing to hide */
		{"/etc", "/etc/alt/missing/x", NULL},
		{"/etc", "/etc/alt", NULL},
	};
	for (size_t i = 0; i < AB_ARRAY_SIZE(t); i++) {
		fx f;
		fx_init(&f, 7);
		f.fs.extra = over;
		f.fs.nextra = AB_ARRAY_SIZE(over);
		SV(&f.prof->fs.read, t[i].read);
		SV(&f.prof->fs.deny, t[i].deny);
		if (t[i].msg) {
			fx_fail(&f, t[i].msg);
			assert_non_null(strstr(f.err.hint, "resolves to"));
		} else {
			fx_ok(&f);
		}
		fx_done(&f);
	}
	/* the directory case still masks */
	fx f;
	fx_init(&f, 7);
	f.fs.extra = over;
	f.fs.nextra = AB_ARRAY_SIZE(over);
	SV(&f.prof->fs.read, "/etc");
	SV(&f.prof->fs.deny, "/etc/alt");
	fx_ok(&f);
	must_mount(f.plan, AB_MNT_MASK, "/etc/alt");
	fx_done(&f);
}

/* Granting the whole home read-only keeps its denied parts masked. */
static void test_deny_under_granted_home(void **state)
{
	fx f;
	fx_init(&f, 7);
	SV(&f.prof->fs.read, "/home/u");
	SV(&f.prof->fs.deny, "/home/u/.ssh");
	fx_ok(&f);
	check_order(f.plan);
	const ab_mount *m = must_mount(f.plan, AB_MNT_MASK, "/home/u/.ssh");
	assert_true(m->flags & AB_MNT_F_DIR);
	assert_true(find_mount(f.plan, AB_MNT_TMPFS, "/home/u") <
		    find_mount(f.plan, AB_MNT_BIND_RO, "/home/u"));
	assert_true(find_mount(f.plan, AB_MNT_BIND_RO, "/home/u") <
		    find_mount(f.plan, AB_MNT_BIND_RW, "/home/u/proj"));
	fx_done(&f);
}

static void test_workspace_denied(void **state)
{
	fx f;
	fx_init(&f, 7);
	SV(&f.prof->fs.deny, "/home/u");
	fx_fail(&f, "the workspace /home/u/proj is inside a denied path (/home/u)");
	fx_done(&f);
}

static void test_absent_grants(void **state)
{
	fx f;
	fx_init(&f, 7);
	SV(&f.prof->fs.read, "/lib32", "/etc/passwd/x", "/nonexistent/deep/path", "/usr");
	SV(&f.prof->fs.write, "/data/missing");
	SV(&f.prof->unix_sockets, "/run/user/1000/missing.sock");
	fx_ok(&f);
	const ab_plan *p = f.plan;
	assert_int_equal(p->absent.n, 5);
	assert_true(ab_strv_contains(&p->absent, "/lib32 (fs.read)"));
	assert_true(ab_strv_contains(&p->absent, "/etc/passwd/x (fs.read)")); /* ENOTDIR */
	assert_true(ab_strv_contains(&p->absent, "/nonexistent/deep/path (fs.read)"));
	assert_true(ab_strv_contains(&p->absent, "/data/missing (fs.write)"));
	assert_true(ab_strv_contains(&p->absent, "/run/user/1000/missing.sock (unix_sockets)"));
	assert_int_equal(find_mount(p, AB_MNT_BIND_RO, "/lib32"), -1);
	must_mount(p, AB_MNT_BIND_RO, "/usr");
	fx_done(&f);

	/* other lstat errors are errors, not "absent" */
	fx_init(&f, 7);
	SV(&f.prof->fs.read, "/secret");
	fx_fail(&f, "fs.read: /secret");
	assert_int_equal(f.err.code, EACCES);
	fx_done(&f);
}

/* Symlinked grants are bound as links (never followed); sockets are files. */
static void test_grant_kinds(void **state)
{
	fx f;
	fx_init(&f, 7);
	SV(&f.prof->fs.read, "/bin", "/usr");
	SV(&f.prof->fs.write, "/home/u/proj", "/data/file");
	SV(&f.prof->unix_sockets, "/run/user/1000/bus");
	fx_ok(&f);
	const ab_plan *p = f.plan;
	assert_int_equal(must_mount(p, AB_MNT_BIND_RO, "/bin")->flags, AB_MNT_F_SYMLINK);
	assert_int_equal(must_mount(p, AB_MNT_BIND_RW, "/data/file")->flags, 0);
	const ab_mount *s = must_mount(p, AB_MNT_BIND_RW, "/run/user/1000/bus");
	assert_int_equal(s->flags, 0);
	assert_string_equal(s->why, "unix_sockets");
	/* the workspace listed in fs.write is bound once */
	assert_int_equal(count_at(p, "/home/u/proj"), 1);
	assert_string_equal(must_mount(p, AB_MNT_BIND_RW, "/home/u/proj")->why, "fs.write");
	fx_done(&f);
}

/* ---------------------------------------------------------------- protect */

/* The account's passwd home is as private as $HOME; git directories and the
 * places startup files live are never writable roots. */
static void test_write_refusals(void **state)
{
	fx f;
	fx_init(&f, 7);
	f.in.home = "/tmp/fakehome";
	f.in.pw_home = "/home/u";
	f.in.workspace = "/home";
	fx_fail(&f, "contains the home directory of your account (/home/u)");
	fx_done(&f);

	fx_init(&f, 7);
	f.in.pw_home = "/home/u";
	SV(&f.prof->fs.write, "/home/u/proj/.git");
	fx_fail(&f, "(inside) a git directory");
	fx_done(&f);

	static const char *const bad[] = {"/home/u",
					  "/home/u/.config",
					  "/home/u/.bashrc",
					  "/home/u/.config/git",
					  "/home/u/.local/bin/x",
					  "/home/u/.ssh/config"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		fx_init(&f, 7);
		SV(&f.prof->fs.write, bad[i]);
		fx_fail(&f, "refusing to make");
		fx_done(&f);
	}
	fx_init(&f, 7);
	SV(&f.prof->fs.write, "/home/u/.config/app");
	fx_ok(&f);
	fx_done(&f);
}

static void test_protect(void **state)
{
	fx f;
	fx_init(&f, 7);
	SV(&f.prof->fs.protect, ".git/hooks", ".git/config", ".envrc", ".vscode/",
	   ".claude/settings.json", ".claude/settings.local.json", ".bashrc", ".idea",
	   ".git/info/attributes", "../escape", ".", "/abs/.x", "a/../../b");
	fx_ok(&f);
	const ab_plan *p = f.plan;
	check_order(p);
	/* existing: re-bound read-only onto itself */
	const ab_mount *m = must_mount(p, AB_MNT_PROTECT, "/home/u/proj/.git/hooks");
	assert_string_equal(m->src, "/home/u/proj/.git/hooks");
	assert_int_equal(m->flags, AB_MNT_F_DIR);
	assert_string_equal(m->why, "fs.protect");
	assert_int_equal(must_mount(p, AB_MNT_PROTECT, "/home/u/proj/.git/config")->flags, 0);
	assert_int_equal(must_mount(p, AB_MNT_PROTECT, "/home/u/proj/.bashrc")->flags, 0);
	/* missing -> a placeholder, always an empty read-only directory (git does
	 * not list empty directories), with or without a trailing slash */
	m = must_mount(p, AB_MNT_PLACEHOLDER, "/home/u/proj/.envrc");
	assert_int_equal(m->flags, AB_MNT_F_DIR);
	assert_null(m->src);
	assert_string_equal(m->why, "fs.protect");
	assert_int_equal(must_mount(p, AB_MNT_PLACEHOLDER, "/home/u/proj/.vscode")->flags,
			 AB_MNT_F_DIR); /* normalised: no trailing slash */
	assert_int_equal(must_mount(p, AB_MNT_PLACEHOLDER, "/home/u/proj/.idea")->flags,
			 AB_MNT_F_DIR);
	/* missing parent -> the parent becomes the placeholder, once */
	assert_int_equal(must_mount(p, AB_MNT_PLACEHOLDER, "/home/u/proj/.claude")->flags,
			 AB_MNT_F_DIR);
	assert_int_equal(count_at(p, "/home/u/proj/.claude"), 1);
	assert_int_equal(find_mount(p, AB_MNT_PLACEHOLDER, "/home/u/proj/.claude/settings.json"),
			 -1);
	assert_int_equal(must_mount(p, AB_MNT_PLACEHOLDER, "/home/u/proj/.git/info")->flags,
			 AB_MNT_F_DIR);
	/* existing directories on the way are pinned (cannot be renamed away),
	 * once, before what they guard */
	m = must_mount(p, AB_MNT_PIN, "/home/u/proj/.git");
	assert_int_equal(m->flags, AB_MNT_F_DIR);
	assert_int_equal(count_at(p, "/home/u/proj/.git"), 1);
	assert_true(find_mount(p, AB_MNT_PIN, "/home/u/proj/.git") <
		    find_mount(p, AB_MNT_PROTECT, "/home/u/proj/.git/hooks"));

	assert_true(find_mount(p, AB_MNT_PIN, "/home/u/proj/.git") <
		    find_mount(p, AB_MNT_PLACEHOLDER, "/home/u/proj/.git/info"));
	/* the writable root itself is never pinned or protected */
	assert_int_equal(count_at(p, "/home/u/proj"), 1);
	/* entries escaping the root, or naming the root itself, do nothing */
	for (size_t i = 0; i < p->nmounts; i++) {
		const ab_mount *x = &p->mounts[i];
		if (x->kind != AB_MNT_PROTECT && x->kind != AB_MNT_PLACEHOLDER &&
		    x->kind != AB_MNT_PIN)
			continue;
		if (!strictly_under(x->dst, "/home/u/proj"))
			fail_msg("protection outside the writable root: %s", x->dst);
	}
	assert_int_equal(find_mount(p, AB_MNT_PLACEHOLDER, "/home/u/escape"), -1);
	assert_int_equal(find_mount(p, AB_MNT_PLACEHOLDER, "/home/u/b"), -1);
	/* "/abs/.x" is anchored (the loader keeps expanded absolute entries so):
	 * it names that one path, which no writable grant holds: nothing */
	assert_int_equal(find_mount(p, AB_MNT_PLACEHOLDER, "/home/u/proj/abs"), -1);
	assert_int_equal(count_at(p, "/abs/.x"), 0);
	fx_done(&f);
	/* anchored entries: only that path, under the writable root holding it;
	 * relative ones still apply under every writable root */
	fx_init(&f, 7);
	SV(&f.prof->fs.protect, "/home/u/proj/.cfg/settings.json", "?/home/u/proj/opt.json",
	   "/home/u/proj/.git/config", "/home/u/.bashrc");
	fx_ok(&f);
	p = f.plan;
	assert_int_equal(must_mount(p, AB_MNT_PLACEHOLDER, "/home/u/proj/.cfg")->flags,
			 AB_MNT_F_DIR);
	assert_int_equal(count_at(p, "/home/u/proj/opt.json"), 0);

	assert_int_equal(must_mount(p, AB_MNT_PROTECT, "/home/u/proj/.git/config")->flags, 0);
	assert_int_equal(count_at(p, "/home/u/.bashrc"), 0); /* home: no writable grant */
	assert_int_equal(find_mount(p, AB_MNT_PROTECT, "/home/u/proj/.git/hooks"), -1);
	fx_done(&f);
	/* an absent denied path inside a writable grant other than the workspace
	 * is reserved (another account's token file cannot be planted for the
	 * host); inside the workspace it stays absent and creatable */
	fx_init(&f, 7);
	SV(&f.prof->fs.write, "/home/u/.config/tool");
	SV(&f.prof->fs.deny, "/home/u/.config/tool/token.json", "/home/u/proj/.env.local");
	fx_ok(&f);
	p = f.plan;
	assert_int_equal(
		must_mount(p, AB_MNT_PLACEHOLDER, "/home/u/.config/tool/token.json")->flags, 0);
	/* a reserved token file stays empty: no login, not an empty document */
	assert_null(must_mount(p, AB_MNT_PLACEHOLDER, "/home/u/.config/tool/token.json")->src);
	assert_int_equal(count_at(p, "/home/u/proj/.env.local"), 0);
	fx_done(&f);
	/* a path named by a "?" entry and an anchored one is reserved by the
	 * anchored one's placeholder, which is agentbox's: not moved aside after
	 * the run as if the run had made it; elsewhere the "?" entry still is */
	fx_init(&f, 7);
	SV(&f.prof->fs.write, "/home/u/.config/tool");
	SV(&f.prof->fs.protect, "?cfg.json", "/home/u/.config/tool/cfg.json");
	fx_ok(&f);
	p = f.plan;
	assert_int_equal(must_mount(p, AB_MNT_PLACEHOLDER, "/home/u/.config/tool/cfg.json")->flags,
			 0);
	assert_false(ab_strv_contains(&p->unguarded, "/home/u/.config/tool/cfg.json"));
	assert_true(ab_strv_contains(&p->unguarded, "/home/u/proj/cfg.json"));
	fx_done(&f);
	/* a missing anchored file is reserved by an empty file, a directory
	 * entry ("/" at the end) by an empty directory */
	fx_init(&f, 7);
	SV(&f.prof->fs.protect, "/home/u/proj/settings.local.json", "/home/u/proj/hooks/");
	fx_ok(&f);
	p = f.plan;
	assert_int_equal(
		must_mount(p, AB_MNT_PLACEHOLDER, "/home/u/proj/settings.local.json")->flags, 0);
	assert_int_equal(must_mount(p, AB_MNT_PLACEHOLDER, "/home/u/proj/hooks")->flags,
			 AB_MNT_F_DIR);
	fx_done(&f);
	/* an anchored JSON file is reserved by "{}" (an empty file is a parse
	 * error to the harness), any other file by an empty one; the test-only
	 * "hstate" ablation ignores anchored entries */
	fx_init(&f, 7);
	SV(&f.prof->fs.protect, "/home/u/proj/a.json", "/home/u/proj/b.jsonc",
	   "/home/u/proj/c.toml", "/home/u/proj/.json", "/home/u/proj/d.json/");
	fx_ok(&f);
	p = f.plan;
	assert_string_equal(must_mount(p, AB_MNT_PLACEHOLDER, "/home/u/proj/a.json")->src, "{}");
	assert_string_equal(must_mount(p, AB_MNT_PLACEHOLDER, "/home/u/proj/b.jsonc")->src, "{}");
	assert_null(must_mount(p, AB_MNT_PLACEHOLDER, "/home/u/proj/c.toml")->src);
	assert_null(must_mount(p, AB_MNT_PLACEHOLDER, "/home/u/proj/.json")->src);
	m = must_mount(p, AB_MNT_PLACEHOLDER, "/home/u/proj/d.json");
	assert_int_equal(m->flags, AB_MNT_F_DIR);
	assert_null(m->src);
	fx_done(&f);
	fx_init(&f, 7);
	f.in.ablate = AB_ABLATE_HSTATE;
	SV(&f.prof->fs.protect, "/home/u/proj/a.json", ".envrc");
	fx_ok(&f);
	assert_int_equal(count_at(f.plan, "/home/u/proj/a.json"), 0);
	must_mount(f.plan, AB_MNT_PLACEHOLDER, "/home/u/proj/.envrc");
	fx_done(&f);
	/* the contents the cleanup accepts as still a placeholder */
	assert_true(ab_placeholder_content_known("", 0));
	assert_true(ab_placeholder_content_known(".", 1));
	assert_true(ab_placeholder_content_known("{}", 2));
	assert_false(ab_placeholder_content_known("{} ", 3));
	assert_false(ab_placeholder_content_known("{\"a\":1}", 7));
	assert_false(ab_placeholder_content_known("..", 2));
	/* inside .git a missing entry becomes an empty file (git never lists its
	 * own files), commondir one holding "." (an empty one kills git); "?"
	 * entries are protected when present and reserve nothing when absent */
	fx_init(&f, 7);
	SV(&f.prof->fs.protect, ".git/config.worktree", ".git/commondir", "?.git/modules/",
	   "?.git/hooks/", "?.husky/");
	fx_ok(&f);
	p = f.plan;
	m = must_mount(p, AB_MNT_PLACEHOLDER, "/home/u/proj/.git/config.worktree");
	assert_int_equal(m->flags, 0);
	assert_null(m->src);
	m = must_mount(p, AB_MNT_PLACEHOLDER, "/home/u/proj/.git/commondir");
	assert_int_equal(m->flags, 0);
	assert_string_equal(m->src, ".");
	assert_int_equal(count_at(p, "/home/u/proj/.git/modules"), 0);
	assert_int_equal(count_at(p, "/home/u/proj/.husky"), 0);
	assert_int_equal(must_mount(p, AB_MNT_PROTECT, "/home/u/proj/.git/hooks")->flags,
			 AB_MNT_F_DIR);
	fx_done(&f);
}

/* Protections apply under every writable directory grant, not under read-only
 * ones, not under file or socket grants, and not inside denied paths. */
static void test_protect_roots(void **state)
{
	fx f;
	fx_init(&f, 7);
	SV(&f.prof->fs.read, "/etc");
	SV(&f.prof->fs.write, "/data/cache", "/data/file");
	SV(&f.prof->unix_sockets, "/run/user/1000/bus");
	SV(&f.prof->fs.deny, "/home/u/proj/.git");
	SV(&f.prof->fs.protect, ".envrc", ".git/hooks");
	fx_ok(&f);
	const ab_plan *p = f.plan;
	must_mount(p, AB_MNT_PLACEHOLDER, "/home/u/proj/.envrc");
	must_mount(p, AB_MNT_PLACEHOLDER, "/data/cache/.envrc");
	assert_int_equal(count_at(p, "/etc/.envrc"), 0);
	assert_int_equal(count_at(p, "/data/file/.envrc"), 0);
	assert_int_equal(count_at(p, "/run/user/1000/bus/.envrc"), 0);
	/* inside the denied .git: masked, not protected */
	assert_int_equal(count_at(p, "/home/u/proj/.git/hooks"), 0);
	must_mount(p, AB_MNT_MASK, "/home/u/proj/.git");
	must_mount(p, AB_MNT_PLACEHOLDER, "/data/cache/.git");
	fx_done(&f);
}

static void test_protect_symlink_refused(void **state)
{
	static const struct {
		const char *rel;
		fentry over;
		const char *msg;
	} t[] = {
		{".envrc",
		 {"/home/u/proj/.envrc", 'l', 1000},
		 "fs.protect: /home/u/proj/.envrc is a symbolic link; refusing to run"},
		/* a link in the middle is refused too (never followed) */
		{".git/hooks",
		 {"/home/u/proj/.git", 'l', 1000},
		 "fs.protect: /home/u/proj/.git is a symbolic link"},
		{".claude/settings.json",
		 {"/home/u/proj/.claude", 'l', 1000},
		 "fs.protect: /home/u/proj/.claude is a symbolic link"},
	};
	for (size_t i = 0; i < AB_ARRAY_SIZE(t); i++) {
		fx f;
		fx_init(&f, 7);
		f.fs.extra = &t[i].over;
		f.fs.nextra = 1;
		SV(&f.prof->fs.protect, t[i].rel);
		fx_fail(&f, t[i].msg);
		assert_non_null(strstr(f.err.hint, t[i].rel));
		fx_done(&f);
	}
}

/* .git as a file (a worktree) or an lstat error. */
static void test_protect_odd(void **state)
{
	fentry over[] = {{"/home/u/proj/.git", 'f', 1000}, {"/home/u/proj/.envrc", 'e', 0}};
	fx f;
	fx_init(&f, 7);
	f.fs.extra = over;
	f.fs.nextra = 1;
	SV(&f.prof->fs.protect, ".git/hooks", ".git");
	fx_ok(&f);
	assert_int_equal(count_at(f.plan, "/home/u/proj/.git/hooks"), 0);
	assert_int_equal(must_mount(f.plan, AB_MNT_PROTECT, "/home/u/proj/.git")->flags, 0);
	fx_done(&f);

	fx_init(&f, 7);
	f.fs.extra = over;
	f.fs.nextra = 2;
	SV(&f.prof->fs.protect, ".envrc");
	fx_fail(&f, "fs.protect: /home/u/proj/.envrc");
	fx_done(&f);
}

/* ---------------------------------------------------------------- paths */

static void test_workspace_refused(void **state)
{
	static const struct {
		const char *ws, *home, *msg;
	} t[] = {
		{"/home/u", "/home/u",
		 "refusing to use /home/u as the workspace: it contains your "
		 "home directory (/home/u)"},
		{"/home/u/", "/home/u", "refusing to use /home/u as the workspace"},
		{"/home", "/home/u", "refusing to use /home as the workspace"},
		{"/", "/home/u", "refusing to use / as the workspace"},
		{"/home/u/proj/..", "/home/u", "refusing to use /home/u as the workspace"},
		{"relative", "/home/u", "workspace and home must be absolute paths"},
		{"/home/u/proj", "relative", "workspace and home must be absolute paths"},
		{"/home/u/proj", "/", "refusing to use / as the home directory"},
		{"/etc", "/home/u",
		 "refusing to use /etc as the workspace: it is inside the system "
		 "tree /etc"},
		{"/usr/src/x", "/home/u", "inside the system tree /usr"},
		{"/proc/self", "/home/u", "inside the system tree /proc"},
		{"/var/lib", "/home/u",
		 "refusing to use /var/lib as the workspace: it is a system "
		 "directory"},
		{"/tmp", "/home/u", "refusing to use /tmp as the workspace"},
		{"/srv", "/home/u", "refusing to use /srv as the workspace"},
		{"/home/u/proj", "/..", "refusing to use / as the home directory"},
	};
	for (size_t i = 0; i < AB_ARRAY_SIZE(t); i++) {
		fx f;
		fx_init(&f, 7);
		f.in.workspace = t[i].ws;
		f.in.home = t[i].home;
		fx_fail(&f, t[i].msg);
		fx_done(&f);
	}
	/* a sibling of home whose name starts with it is fine */
	fentry over[] = {{"/home/u2", 'd', 1000}};
	fx f;
	fx_init(&f, 7);
	f.fs.extra = over;
	f.fs.nextra = 1;
	f.in.workspace = "/home/u2";
	f.in.cwd = "/home/u2";
	fx_ok(&f);
	must_mount(f.plan, AB_MNT_BIND_RW, "/home/u2");
	fx_done(&f);

	/* a project under /tmp: bound on top of the private /tmp */
	fentry tmp[] = {{"/tmp/proj", 'd', 1000}};
	fx_init(&f, 7);
	f.fs.extra = tmp;
	f.fs.nextra = 1;
	f.in.workspace = "/tmp/proj";
	fx_ok(&f);
	check_order(f.plan);
	assert_true(find_mount(f.plan, AB_MNT_TMPFS, "/tmp") <
		    find_mount(f.plan, AB_MNT_BIND_RW, "/tmp/proj"));
	fx_done(&f);
}

static void test_cwd_and_hostname(void **state)
{
	static const struct {
		const char *cwd, *want;
	} t[] = {
		{"/home/u/proj/src", "/home/u/proj/src"},
		{"/home/u/proj", "/home/u/proj"},
		{"/home/u/proj/src/../..", "/home/u/proj"}, /* normalised, outside */
		{"/home/u/projx", "/home/u/proj"},
		{"/tmp", "/home/u/proj"},
		{"relative", "/home/u/proj"},
		{NULL, "/home/u/proj"},
		{"/home/u/proj/./src//", "/home/u/proj/src"},
	};
	for (size_t i = 0; i < AB_ARRAY_SIZE(t); i++) {
		fx f;
		fx_init(&f, 7);
		f.in.cwd = t[i].cwd;
		fx_ok(&f);
		if (strcmp(f.plan->cwd, t[i].want) != 0)
			fail_msg("cwd %s -> %s, want %s", t[i].cwd, f.plan->cwd, t[i].want);
		assert_string_equal(f.plan->hostname, "agentbox");
		fx_done(&f);
	}
	fx f;
	fx_init(&f, 7);
	f.prof->hostname = strdup("box1");
	fx_ok(&f);
	assert_string_equal(f.plan->hostname, "box1");
	assert_string_equal(f.plan->workspace, "/home/u/proj");
	assert_string_equal(f.plan->home, "/home/u");
	fx_done(&f);
}

/* ---------------------------------------------------------------- identity */

static void test_identity_unprivileged(void **state)
{
	fx f;
	fx_init(&f, 7);
	f.host.uid = f.host.euid = 1234;
	f.host.gid = f.host.egid = 2345;
	f.in.supplementary_groups = 2;
	fx_ok(&f);
	const ab_plan *p = f.plan;
	assert_false(p->root_mode);
	assert_false(p->drop_groups);
	assert_int_equal(p->inside_uid, 1234);
	assert_int_equal(p->inside_gid, 2345);
	assert_int_equal(p->map_kuid, 1234);
	assert_int_equal(p->map_kgid, 2345);
	assert_int_equal(p->outer_uid, 1234);
	assert_string_equal(p->user_name, "u");
	for (size_t i = 0; i < p->nmounts; i++)
		assert_false(p->mounts[i].flags & AB_MNT_F_IDMAP);
	assert_true(strv_has_prefix(&p->warnings, "supplementary groups of uid 1234 are kept"));
	/* nothing idmapped: every file lands as uid 1234, no set-id rules */
	assert_true(p->seccomp.setid_unchecked);
	assert_non_null(strstr(p->setid_why, "allowed: no writable grant is idmapped"));
	assert_non_null(strstr(p->setid_why, "uid 1234"));
	fx_done(&f);

	fx_init(&f, 7);
	f.in.user = NULL;
	fx_ok(&f);
	assert_string_equal(f.plan->user_name, "agent");
	assert_int_equal(f.plan->warnings.n, 0);
	fx_done(&f);
}

static void root_host(fx *f)
{
	f->host.uid = f->host.euid = 0;
	f->host.gid = f->host.egid = 0;
	f->host.is_root = true;
	f->in.home = "/root";
	f->in.user = "root";
	f->in.cwd = "/";
}

static void test_identity_root(void **state)
{
	/* user-owned workspace: run as its owner, no idmap needed for it */
	fx f;
	fx_init(&f, 7);
	root_host(&f);
	f.in.workspace = "/srv/userproj";
	f.in.supplementary_groups = 3; /* root drops them: no warning */
	SV(&f.prof->fs.read, "/usr", "/root/.gitconfig", "/srv/userdata");
	SV(&f.prof->fs.write, "/srv/data", "/srv/userdata");
	fx_ok(&f);
	const ab_plan *p = f.plan;
	assert_true(p->root_mode);
	assert_true(p->drop_groups);
	assert_int_equal(p->outer_uid, 0);
	assert_int_equal(p->inside_uid, AB_ROOT_INSIDE_UID);
	assert_int_equal(p->inside_gid, AB_ROOT_INSIDE_GID);
	assert_int_equal(p->map_kuid, 1000);
	assert_int_equal(p->map_kgid, 1000);
	assert_string_equal(p->user_name, "agent");
	assert_false(must_mount(p, AB_MNT_BIND_RW, "/srv/userproj")->flags & AB_MNT_F_IDMAP);
	/* root-owned writable grant: idmapped */
	assert_true(must_mount(p, AB_MNT_BIND_RW, "/srv/data")->flags & AB_MNT_F_IDMAP);
	/* root-owned read grants: plain, except under (root's) home */
	assert_false(must_mount(p, AB_MNT_BIND_RO, "/usr")->flags & AB_MNT_F_IDMAP);
	assert_true(must_mount(p, AB_MNT_BIND_RO, "/root/.gitconfig")->flags & AB_MNT_F_IDMAP);
	/* user-owned grants are never idmapped */
	assert_false(must_mount(p, AB_MNT_BIND_RW, "/srv/userdata")->flags & AB_MNT_F_IDMAP);
	must_mount(p, AB_MNT_TMPFS, "/root");
	const ab_mount *pw = must_mount(p, AB_MNT_CONTENT, "/etc/passwd");
	assert_non_null(
		strstr(pw->src, "\nagent:x:1000:1000:agentbox sandbox user:/root:/bin/sh\n"));
	assert_string_equal(env_get(p, "USER"), "agent");
	assert_string_equal(env_get(p, "HOME"), "/root");
	assert_int_equal(p->warnings.n, 0);
	assert_string_equal(p->cwd, "/srv/userproj");
	/* /srv/data is writable and idmapped: its new files belong to host root */
	assert_false(p->seccomp.setid_unchecked);
	assert_non_null(strstr(p->setid_why, "/srv/data"));
	fx_done(&f);

	/* the user-owned workspace alone: every new file is uid 1000's, and
	 * a read-only idmapped grant takes no file: no set-id rules */
	fx_init(&f, 7);
	root_host(&f);
	f.in.workspace = "/srv/userproj";
	SV(&f.prof->fs.read, "/root/.gitconfig");
	fx_ok(&f);
	assert_true(must_mount(f.plan, AB_MNT_BIND_RO, "/root/.gitconfig")->flags & AB_MNT_F_IDMAP);
	assert_true(f.plan->seccomp.setid_unchecked);
	assert_non_null(strstr(f.plan->setid_why, "uid 1000"));
	fx_done(&f);

	/* root-owned workspace: nobody on the host, through an idmapped bind */
	fx_init(&f, 7);
	root_host(&f);
	f.in.workspace = "/srv/proj";
	SV(&f.prof->fs.protect, ".git/hooks");
	fx_ok(&f);
	p = f.plan;
	assert_int_equal(p->inside_uid, AB_ROOT_INSIDE_UID);
	assert_int_equal(p->map_kuid, AB_ROOT_FALLBACK_KUID);
	assert_int_equal(p->map_kgid, AB_ROOT_FALLBACK_KGID);
	const ab_mount *ws = must_mount(p, AB_MNT_BIND_RW, "/srv/proj");
	assert_int_equal(ws->flags, AB_MNT_F_DIR | AB_MNT_F_IDMAP);
	assert_false(p->seccomp.setid_unchecked);
	assert_non_null(strstr(p->setid_why, "refused (EPERM): /srv/proj"));
	/* protections are plain read-only binds (never writable, no idmap needed) */
	assert_false(must_mount(p, AB_MNT_PLACEHOLDER, "/srv/proj/.git/hooks")->flags &
		     AB_MNT_F_IDMAP);
	fx_done(&f);

	/* the ablated twin: the same plan without the rules, said loudly */
	fx_init(&f, 7);
	root_host(&f);
	f.in.workspace = "/srv/proj";
	f.in.ablate = AB_ABLATE_SETID;
	fx_ok(&f);
	assert_true(f.plan->seccomp.setid_unchecked);
	assert_non_null(strstr(f.plan->setid_why, "NOT CHECKED (test ablation)"));
	assert_int_equal(f.plan->downgrades.n, 1);
	assert_non_null(strstr(f.plan->downgrades.v[0], "TEST ABLATION setid"));
	fx_done(&f);

	/* ... which needs idmapped mounts */
	fx_init(&f, 7);
	root_host(&f);
	f.in.workspace = "/srv/proj";
	f.host.idmap_mounts = AB_NO;
	fx_fail(&f, "needs idmapped mounts");
	assert_non_null(strstr(f.err.hint, "chown"));
	fx_done(&f);

	/* an unknown idmap capability is not refused by the planner */
	fx_init(&f, 7);
	root_host(&f);
	f.in.workspace = "/srv/proj";
	f.host.idmap_mounts = AB_UNKNOWN;
	fx_ok(&f);
	fx_done(&f);
}

/* ---------------------------------------------------------------- env */

static void test_env(void **state)
{
	fx f;
	fx_init(&f, 7);
	SV(&f.prof->env.pass, "GIT_*", "NO_COLOR");
	prof_set_env(f.prof, "EDITOR", "vi");
	prof_set_env(f.prof, "TMPDIR", "/tmp/own");
	prof_set_env(f.prof, "TERM", "dumb");
	char *env[] = {"TERM=xterm",
		       "SSH_AUTH_SOCK=/s",
		       "LC_ALL=C",
		       "LC_CTYPE=C",
		       "LCX=1",
		       "AWS_SECRET=x",
		       "AWS_SECRET_ACCESS_KEY=y",
		       "GIT_AUTHOR_NAME=me",
		       "GITHUB_TOKEN=t",
		       "NO_COLOR=1",
		       "HOME=/elsewhere",
		       "USER=mallory",
		       "LD_PRELOAD=/x.so",
		       "PATH=/custom/bin",
		       "TZ=UTC",
		       "COLORTERM=1",
		       "LANG=C.UTF-8",
		       "LANGUAGE=en",
		       "=x",
		       "NOEQ",
		       "DISPLAY=:0",
		       NULL};
	f.in.environ = env;
	fx_ok(&f);
	const ab_plan *p = f.plan;
	static const struct {
		const char *name, *want; /* want NULL: must be absent */
	} t[] = {
		{"TERM", "dumb"}, /* profile env.set overrides */
		{"SSH_AUTH_SOCK", NULL},
		{"LC_ALL", "C"},
		{"LC_CTYPE", "C"},
		{"LCX", NULL},
		{"AWS_SECRET", NULL},
		{"AWS_SECRET_ACCESS_KEY", NULL},
		{"GIT_AUTHOR_NAME", "me"}, /* profile pattern */
		{"GITHUB_TOKEN", NULL},
		{"NO_COLOR", "1"},
		{"HOME", "/home/u"},
		{"USER", "u"},
		{"LOGNAME", "u"},
		{"TMPDIR", "/tmp/own"},
		{"LD_PRELOAD", NULL},
		{"PATH", "/custom/bin"},
		{"TZ", "UTC"},
		{"COLORTERM", "1"},
		{"LANG", "C.UTF-8"},
		{"LANGUAGE", NULL},
		{"DISPLAY", NULL},
		{"EDITOR", "vi"},
		{"AGENTBOX", "1"},
	};
	for (size_t i = 0; i < AB_ARRAY_SIZE(t); i++) {
		const char *got = env_get(p, t[i].name);
		if (!t[i].want && got)
			fail_msg("%s crossed into the sandbox (=%s)", t[i].name, got);
		if (t[i].want && (!got || strcmp(got, t[i].want) != 0))
			fail_msg("%s = %s, want %s", t[i].name, got ? got : "(unset)", t[i].want);
	}
	/* every entry is K=V, each name once */
	for (size_t i = 0; i < p->envp.n; i++) {
		const char *eq = strchr(p->envp.v[i], '=');
		assert_non_null(eq);
		assert_true(eq > p->envp.v[i]);
		for (size_t j = i + 1; j < p->envp.n; j++)
			if (strncmp(p->envp.v[i], p->envp.v[j], (size_t)(eq - p->envp.v[i]) + 1) ==
			    0)
				fail_msg("duplicate %s", p->envp.v[i]);
	}
	assert_null(p->envp.v[p->envp.n]);
	fx_done(&f);
}

/* No PATH in the caller's environment: a system default; HOME/TMPDIR set. */
static void test_env_defaults(void **state)
{
	fx f;
	fx_init(&f, 7);
	char *env[] = {"SSH_AUTH_SOCK=/s", NULL};
	f.in.environ = env;
	fx_ok(&f);
	const char *path = env_get(f.plan, "PATH");
	assert_non_null(path);
	assert_non_null(strstr(path, "/usr/bin"));
	assert_string_equal(env_get(f.plan, "HOME"), "/home/u");
	assert_string_equal(env_get(f.plan, "TMPDIR"), "/tmp");
	assert_null(env_get(f.plan, "SSH_AUTH_SOCK"));
	fx_done(&f);

	/* NULL environ, hostile long names */
	fx_init(&f, 7);
	f.in.environ = NULL;
	fx_ok(&f);
	assert_non_null(env_get(f.plan, "PATH"));
	fx_done(&f);

	static char longname[600];
	memset(longname, 'T', sizeof(longname) - 3);
	longname[sizeof(longname) - 3] = '=';
	longname[sizeof(longname) - 2] = 'v';
	char *env2[] = {longname, NULL};
	fx_init(&f, 7);
	SV(&f.prof->env.pass, "T*");
	f.in.environ = env2;
	fx_ok(&f); /* an over-long name is dropped, not truncated into a match */
	for (size_t i = 0; i < f.plan->envp.n; i++)
		assert_true(strncmp(f.plan->envp.v[i], "TTTT", 4) != 0);
	fx_done(&f);
}

/* ---------------------------------------------------------------- landlock */

static void test_landlock_full(void **state)
{
	fx f;
	fx_init(&f, 7);
	SV(&f.prof->fs.read, "/usr");
	f.prof->loopback.ports = calloc(2, sizeof(long));
	f.prof->loopback.ports[0] = 8080;
	f.prof->loopback.ports[1] = 5432;
	f.prof->loopback.nports = 2;
	fx_ok(&f);
	const ab_ll_plan *ll = &f.plan->landlock;
	assert_true(ll->enabled);
	assert_int_equal(ll->abi, 7);
	assert_int_equal(ll->handled_fs, ab_landlock_fs_rights(7));
	assert_int_equal(ll->handled_net,
			 LANDLOCK_ACCESS_NET_CONNECT_TCP); /* listening stays free */
	assert_int_equal(ll->scoped, ab_landlock_scopes(7));
	/* the profile's ports, then the way out: the explicit proxy (this fake
	 * profile has transparent mode off, so no DNS port) */
	assert_int_equal(ll->ntcp_ports, 3);
	assert_int_equal(ll->tcp_ports[0], 8080);
	assert_int_equal(ll->tcp_ports[1], 5432);
	assert_int_equal(ll->tcp_ports[2], AB_PROXY_DEFAULT_PORT);
	assert_false(ll->tcp_any);
	assert_int_equal(f.plan->downgrades.n, 0);
	/* rules mirror the mounts */
	bool usr = false, ws = false, home = false, proc = false, dev = false;
	for (size_t i = 0; i < ll->nrules; i++) {
		const ab_ll_rule *r = &ll->rules[i];
		if (strcmp(r->path, "/usr") == 0) {
			usr = true;
			assert_int_equal(r->access, ab_landlock_class_rights(AB_LL_READ, 7));
		} else if (strcmp(r->path, "/home/u/proj") == 0) {
			ws = true;
			assert_int_equal(r->access, ab_landlock_class_rights(AB_LL_WRITE, 7));
		} else if (strcmp(r->path, "/home/u") == 0) {
			home = true;
			assert_int_equal(r->access, ab_landlock_class_rights(AB_LL_WRITE, 7));
		} else if (strcmp(r->path, "/proc") == 0) {
			proc = true;
			assert_int_equal(r->access, ab_landlock_class_rights(AB_LL_PROC, 7));
		} else if (strcmp(r->path, "/dev") == 0) {
			dev = true;
			assert_int_equal(r->access, ab_landlock_class_rights(AB_LL_DEV, 7));
		}
		/* nothing the mount plan hides gets a rule */
		assert_false(ab_path_is_under(r->path, "/proc/kcore"));
	}
	assert_true(usr && ws && home && proc && dev);
	fx_done(&f);

	/* ports are never truncated into other ports */
	const long bad[] = {0, -1, 65536, 65536 + 22, 1L << 40};
	for (size_t i = 0; i < AB_ARRAY_SIZE(bad); i++) {
		fx_init(&f, 7);
		f.prof->loopback.ports = calloc(1, sizeof(long));
		f.prof->loopback.ports[0] = bad[i];
		f.prof->loopback.nports = 1;
		fx_fail(&f, "is not a TCP port");
		fx_done(&f);
	}

	/* "any" port: network not handled at all */
	fx_init(&f, 7);
	f.prof->loopback.any = true;
	fx_ok(&f);
	assert_true(f.plan->landlock.tcp_any);
	assert_int_equal(f.plan->landlock.handled_net, 0);
	fx_done(&f);
}

static void test_landlock_downgrades(void **state)
{
	const struct {
		int abi;
		const char *allow[6];
		bool any;
		const char *err; /* NULL: succeeds */
		const char *hint_part;
		size_t ndown;
	} t[] = {
		{7, {NULL}, false, NULL, NULL, 0},
		{8, {NULL}, false, NULL, NULL, 0}, /* newer kernel: as 7 */
		{6, {NULL}, false, NULL, NULL, 0},
		{5, {NULL}, false, "\"landlock-scope\" (Landlock ABI 5)", "allow_downgrade", 0},
		{5, {"landlock-scope"}, false, NULL, NULL, 1},
		{3, {NULL}, false, "\"landlock-net\"", "allow_downgrade", 0},
		{3, {NULL}, true, "\"landlock-ioctl-dev\"", "\"landlock-ioctl-dev\"", 0},
		{3, {"landlock-net"}, false, "\"landlock-ioctl-dev\"", "allow_downgrade", 0},
		{3, {"landlock-net", "landlock-ioctl-dev", "landlock-scope"}, false, NULL, NULL, 3},
		{3, {"landlock-ioctl-dev", "landlock-scope"}, true, NULL, NULL, 2},
		{2,
		 {"landlock-net", "landlock-ioctl-dev", "landlock-scope"},
		 false,
		 "\"landlock-truncate\"",
		 "allow_downgrade",
		 0},
		/* ABI 1 lacks "refer", which only makes it stricter: never asked for */
		{1,
		 {"landlock-truncate", "landlock-net", "landlock-ioctl-dev", "landlock-scope"},
		 false,
		 NULL,
		 NULL,
		 4},
		{0,
		 {NULL},
		 false,
		 "\"landlock\" (Landlock ABI 0: Landlock unavailable)",
		 "allow_downgrade",
		 0},
		{0, {"landlock-net"}, false, "\"landlock\"", "lsm=", 0},
		{0, {"landlock"}, false, NULL, NULL, 1},
		{-1, {"landlock"}, false, NULL, NULL, 1},
	};
	for (size_t i = 0; i < AB_ARRAY_SIZE(t); i++) {
		fx f;
		fx_init(&f, t[i].abi);
		f.prof->loopback.any = t[i].any;
		for (size_t k = 0; t[i].allow[k]; k++)
			SV(&f.prof->allow_downgrade, t[i].allow[k]);
		int r = fx_build(&f);
		if (t[i].err) {
			if (r >= 0)
				fail_msg("case %zu (abi %d): succeeded", i, t[i].abi);
			if (!strstr(f.err.msg, t[i].err))
				fail_msg("case %zu: '%s' lacks '%s'", i, f.err.msg, t[i].err);
			if (!strstr(f.err.hint, t[i].hint_part))
				fail_msg("case %zu: hint '%s' lacks '%s'", i, f.err.hint,
					 t[i].hint_part);
			assert_int_equal(f.err.exit_code, AB_EXIT_FAIL);
		} else {
			if (r < 0)
				fail_msg("case %zu (abi %d): %s", i, t[i].abi, f.err.msg);
			if (f.plan->downgrades.n != t[i].ndown)
				fail_msg("case %zu: %zu downgrades, want %zu", i,
					 f.plan->downgrades.n, t[i].ndown);
			for (size_t k = 0; k < f.plan->downgrades.n; k++) {
				const char *d = f.plan->downgrades.v[k];
				assert_non_null(strstr(d, "NOT ENFORCED"));
				assert_null(strstr(d, "landlock-refer"));
			}
			bool on = t[i].abi > 0;
			assert_int_equal(f.plan->landlock.enabled, on);
			if (!on)
				assert_int_equal(f.plan->landlock.nrules, 0);
		}
		fx_done(&f);
	}
	/* the downgrade text names the protection */
	fx f;
	fx_init(&f, 3);
	SV(&f.prof->allow_downgrade, "landlock-net", "landlock-ioctl-dev", "landlock-scope");
	fx_ok(&f);
	assert_string_equal(f.plan->downgrades.v[0],
			    "landlock-net: NOT ENFORCED on this kernel (Landlock ABI 3)");
	assert_int_equal(f.plan->landlock.handled_net, 0);
	assert_int_equal(f.plan->landlock.scoped, 0);
	assert_int_equal(f.plan->landlock.handled_fs, ab_landlock_fs_rights(3));
	fx_done(&f);
}

/* ---------------------------------------------------------------- seccomp */

/* Connect mediation (host unix sockets bound after the start) needs seccomp
 * user notification: refused without it, unless the profile accepts the
 * loss; the ablation build turns it off. */
static void test_connect_mediation(void **state)
{
	fx f;
	fx_init(&f, 7);
	fx_ok(&f);
	assert_true(f.plan->seccomp.notify_connect);
	assert_true(ab_seccomp_listens(&f.plan->seccomp));
	fx_done(&f);

	fx_init(&f, 7);
	f.host.seccomp_user_notif = AB_NO;
	fx_fail(&f, "connect mediation needs seccomp user notification");
	assert_non_null(strstr(f.err.hint, "seccomp-user-notif"));
	fx_done(&f);

	fx_init(&f, 7);
	f.host.seccomp_user_notif = AB_NO;
	f.host.seccomp_listener_busy = true;
	fx_fail(&f, "already has the one notification listener");
	fx_done(&f);

	fx_init(&f, 7);
	f.host.seccomp_user_notif = AB_NO;
	SV(&f.prof->allow_downgrade, "seccomp-user-notif");
	fx_ok(&f);
	assert_false(f.plan->seccomp.notify_connect);
	assert_true(f.plan->downgrades.n >= 1);
	assert_non_null(
		strstr(f.plan->downgrades.v[f.plan->downgrades.n - 1], "connect is NOT MEDIATED"));
	fx_done(&f);

	fx_init(&f, 7);
	f.in.ablate = AB_ABLATE_CONNECT;
	fx_ok(&f);
	assert_false(f.plan->seccomp.notify_connect);
	fx_done(&f);
}

static void test_seccomp_required(void **state)
{
	fx f;
	fx_init(&f, 7);
	f.host.seccomp_ok = AB_NO;
	fx_fail(&f, "this kernel has no seccomp filter support");
	assert_non_null(strstr(f.err.hint, "CONFIG_SECCOMP_FILTER"));
	fx_done(&f);

	fx_init(&f, 7);
	f.host.seccomp_ok = AB_UNKNOWN;
	fx_ok(&f);
	fx_done(&f);

	/* the profile's syscall lists reach the policy, validated */
	fx_init(&f, 7);
	SV(&f.prof->syscalls.deny, "ptrace");
	fx_ok(&f);
	assert_true(ab_strv_contains(&f.plan->seccomp.extra_deny, "ptrace"));
	fx_done(&f);

	fx_init(&f, 7);
	SV(&f.prof->syscalls.deny, "no_such_syscall_xyz");
	assert_true(fx_build(&f) < 0);
	assert_non_null(strstr(f.err.msg, "no_such_syscall_xyz"));
	fx_done(&f);
}

/* ---------------------------------------------------------------- limits */

static void test_rlimits(void **state)
{
	fx f;
	fx_init(&f, 7);
	fx_ok(&f);
	/* core=0 by default, nothing else */
	assert_int_equal(f.plan->nrlimits, 1);
	assert_int_equal(f.plan->rlimits[0].resource, RLIMIT_CORE);
	assert_int_equal(f.plan->rlimits[0].soft, 0);
	assert_int_equal(f.plan->rlimits[0].hard, 0);
	assert_false(f.plan->cgroup_apply);
	assert_int_equal(f.plan->cg_memory, AB_LIMIT_UNSET);
	fx_done(&f);

	fx_init(&f, 7);
	f.prof->limits.nofile = 1024;
	f.prof->limits.nproc = 200;
	f.prof->limits.fsize = __LONG_LONG_MAX__; /* "unlimited" */
	f.prof->limits.core = 4096;
	f.prof->limits.cpu = 60;
	fx_ok(&f);
	const struct {
		int res;
		rlim_t v;
	} want[] = {{RLIMIT_NOFILE, 1024},
		    {RLIMIT_NPROC, 200},
		    {RLIMIT_FSIZE, RLIM_INFINITY},
		    {RLIMIT_CORE, 4096},
		    {RLIMIT_CPU, 60}};
	assert_int_equal(f.plan->nrlimits, AB_ARRAY_SIZE(want));
	for (size_t i = 0; i < AB_ARRAY_SIZE(want); i++) {
		assert_int_equal(f.plan->rlimits[i].resource, want[i].res);
		assert_true(f.plan->rlimits[i].soft == want[i].v);
		assert_true(f.plan->rlimits[i].hard == want[i].v);
		assert_true(f.plan->rlimits[i].asked == 0);
	}
	fx_done(&f);

	/* ceilings: above agentbox's hard limit, that limit, and what was asked */
	fx_init(&f, 7);
	f.host.rlim_hard[RLIMIT_NOFILE] = 20000;
	f.host.rlim_hard[RLIMIT_FSIZE] = 1 << 20;
	f.host.rlim_hard[RLIMIT_NPROC] = 500;
	f.prof->limits.nofile = 65536;
	f.prof->limits.fsize = __LONG_LONG_MAX__; /* "unlimited" */
	f.prof->limits.nproc = 200;               /* under it: as asked */
	fx_ok(&f);
	assert_true(f.plan->rlimits[0].soft == 20000 && f.plan->rlimits[0].hard == 20000);
	assert_true(f.plan->rlimits[0].asked == 65536);
	assert_true(f.plan->rlimits[1].soft == 200 && f.plan->rlimits[1].asked == 0);
	assert_true(f.plan->rlimits[2].soft == 1 << 20 &&
		    f.plan->rlimits[2].asked == RLIM_INFINITY);
	fx_done(&f);
}

static void test_cgroup_limits(void **state)
{
	const struct {
		int version, delegated;
		long long mem, pids;
		bool allow;
		const char *err; /* NULL: ok */
		bool apply;
	} t[] = {
		{2, AB_YES, 1 << 30, AB_LIMIT_UNSET, false, NULL, true},
		{2, AB_YES, AB_LIMIT_UNSET, 100, false, NULL, true},
		{2, AB_NO, 1 << 30, AB_LIMIT_UNSET, false, "no writable cgroup v2 subtree", false},
		{2, AB_UNKNOWN, AB_LIMIT_UNSET, 100, false, "no writable cgroup v2 subtree", false},
		{1, AB_NO, 1 << 30, AB_LIMIT_UNSET, false, "this machine has cgroup v1", false},
		{1, AB_NO, AB_LIMIT_UNSET, 64, false, "cgroup v1", false},
		{1, AB_NO, 1 << 30, 64, true, NULL, false},
		{0, AB_UNKNOWN, 1 << 30, AB_LIMIT_UNSET, true, NULL, false},
		{1, AB_NO, AB_LIMIT_UNSET, AB_LIMIT_UNSET, false, NULL,
		 false}, /* no limits: fine */
	};
	for (size_t i = 0; i < AB_ARRAY_SIZE(t); i++) {
		fx f;
		fx_init(&f, 7);
		f.host.cgroup_version = t[i].version;
		f.host.cgroup_delegated = t[i].delegated;
		f.prof->limits.memory = t[i].mem;
		f.prof->limits.pids = t[i].pids;
		if (t[i].allow)
			SV(&f.prof->allow_downgrade, "cgroup-limits");
		int r = fx_build(&f);
		if (t[i].err) {
			if (r >= 0 || !strstr(f.err.msg, t[i].err))
				fail_msg("case %zu: r=%d '%s', want '%s'", i, r, f.err.msg,
					 t[i].err);
			assert_non_null(strstr(f.err.hint, "cgroup-limits"));
			assert_non_null(strstr(f.err.hint, "allow_downgrade"));
		} else {
			if (r < 0)
				fail_msg("case %zu: %s", i, f.err.msg);
			assert_int_equal(f.plan->cgroup_apply, t[i].apply);
			assert_int_equal(f.plan->cg_memory, t[i].mem);
			assert_int_equal(f.plan->cg_pids, t[i].pids);
			bool down = t[i].allow;
			assert_int_equal(strv_has_prefix(&f.plan->downgrades, "cgroup-limits:"),
					 down);
		}
		fx_done(&f);
	}
}

/* ---------------------------------------------------------------- command */

/* Nothing inside may hold the user's real terminal: every one of fds 0-2 that
 * is a terminal gets the sandbox's own pty (all three with --pty). */
static void test_pty_decision(void **state)
{
	const struct {
		int force;
		unsigned ttys, mask;
	} t[] = {
		{-1, 7, 7}, {-1, 3, 3},         {-1, 1, 1}, {-1, 2, 2}, {-1, 4, 4},
		{-1, 0, 0}, {-1, 0x8 | 0x1, 1}, /* only 0-2 count */
		{1, 0, 7},  {1, 7, 7},          {1, 1, 1},  {0, 7, 0},  {0, 0, 0},
	};
	for (size_t i = 0; i < AB_ARRAY_SIZE(t); i++) {
		fx f;
		fx_init(&f, 7);
		f.in.force_pty = t[i].force;
		f.in.tty_mask = t[i].ttys;
		fx_ok(&f);
		if (f.plan->pty_mask != t[i].mask || f.plan->use_pty != (t[i].mask != 0))
			fail_msg("case %zu: force %d ttys %#x -> mask %#x use %d, want %#x", i,
				 t[i].force, t[i].ttys, f.plan->pty_mask, f.plan->use_pty,
				 t[i].mask);
		fx_done(&f);
	}
}

/* Test ablation: only agentbox-ablate sets in.ablate; the plan
 * applies each layer's weakening and lists it as a downgrade. */
static void test_ablation(void **state)
{
	unsigned m = 0;
	ab_err err = {0};
	assert_int_equal(ab_ablate_parse(NULL, &m, &err), 0);
	assert_int_equal(m, 0);
	assert_int_equal(ab_ablate_parse("seccomp,home,pty", &m, &err), 0);
	assert_int_equal(m, AB_ABLATE_SECCOMP | AB_ABLATE_HOME | AB_ABLATE_PTY);
	assert_true(ab_ablate_parse("seccomp,bogus", &m, &err) < 0);
	assert_non_null(strstr(err.msg, "bogus"));
	assert_true(ab_ablate_parse("SECCOMP", &m, &err) < 0);

	fx f;
	fx_init(&f, 7);
	f.in.tty_mask = 7;
	fx_ok(&f); /* no ablation: every layer, nothing listed */
	assert_false(f.plan->seccomp.disabled);
	assert_true(f.plan->landlock.enabled);
	assert_false(f.plan->share_net);
	assert_int_equal(f.plan->pty_mask, 7);
	assert_true(find_mount(f.plan, AB_MNT_TMPFS, "/home/u") >= 0);
	for (size_t i = 0; i < f.plan->downgrades.n; i++)
		assert_null(strstr(f.plan->downgrades.v[i], "ABLATION"));
	f.in.ablate = AB_ABLATE_SECCOMP | AB_ABLATE_LANDLOCK | AB_ABLATE_NETNS | AB_ABLATE_ENV |
		      AB_ABLATE_HOME | AB_ABLATE_PTY;
	fx_ok(&f);
	assert_true(f.plan->seccomp.disabled);
	assert_false(f.plan->landlock.enabled);
	assert_true(f.plan->share_net);
	assert_int_equal(f.plan->pty_mask, 0);
	assert_true(find_mount(f.plan, AB_MNT_TMPFS, "/home/u") < 0);
	assert_true(find_mount(f.plan, AB_MNT_BIND_RW, "/home/u") >= 0);
	bool weird = false; /* env: everything passes, even names the allowlist refuses */
	for (size_t i = 0; i < f.plan->envp.n; i++)
		weird |= strncmp(f.plan->envp.v[i], "SSH_AUTH_SOCK=", 14) == 0;
	assert_true(weird);
	size_t listed = 0;
	for (size_t i = 0; i < f.plan->downgrades.n; i++)
		listed += strstr(f.plan->downgrades.v[i], "TEST ABLATION") != NULL;
	assert_int_equal(listed, 6);
	fx_done(&f);
}

static void test_command(void **state)
{
	/* the CLI's argv wins over the profile's command */
	fx f;
	fx_init(&f, 7);
	SV(&f.prof->command, "bash", "-l");
	fx_ok(&f);
	assert_int_equal(f.plan->argv.n, 2);
	assert_string_equal(f.plan->argv.v[0], "make");
	assert_string_equal(f.plan->argv.v[1], "-j4");
	assert_null(f.plan->argv.v[2]);
	fx_done(&f);

	/* none on the CLI (NULL or empty): the profile's */
	char *empty[] = {NULL};
	for (int k = 0; k < 2; k++) {
		fx_init(&f, 7);
		f.in.argv = k ? empty : NULL;
		SV(&f.prof->command, "bash", "-l");
		fx_ok(&f);
		assert_int_equal(f.plan->argv.n, 2);
		assert_string_equal(f.plan->argv.v[0], "bash");
		fx_done(&f);
	}

	/* none at all: an error with a hint */
	fx_init(&f, 7);
	f.in.argv = NULL;
	fx_fail(&f, "no command to run");
	assert_non_null(strstr(f.err.hint, "--"));
	assert_non_null(strstr(f.err.hint, "\"command\""));
	fx_done(&f);
}

/* A rendered credentials file gets its content mount; a secret after the
 * rendered one whose source is not a file (env, command: no src_file) used
 * to crash the planner (strcmp of NULL while looking for a duplicate). */
static void test_rendered_then_env_secret(void **state)
{
	struct ab_profile_secret sec[3] = {
		{.name = "TOKEN",
		 .src = AB_PSECRET_JSON,
		 .src_file = "/data/file",
		 .src_pointer = "/t",
		 .render = true},
		{.name = "GH_TOKEN", .src = AB_PSECRET_ENV, .src_env = "GH_TOKEN"},
		{.name = "OTHER",
		 .src = AB_PSECRET_JSON,
		 .src_file = "/data/file",
		 .src_pointer = "/u",
		 .render = true},
	};
	fx f;
	fx_init(&f, 7);
	SV(&f.prof->net.allow, "api.test");
	for (size_t i = 0; i < AB_ARRAY_SIZE(sec); i++)
		SV(&sec[i].hosts, "api.test");
	f.prof->secrets = sec;
	f.prof->nsecrets = AB_ARRAY_SIZE(sec);
	fx_ok(&f);
	assert_int_equal(count_at(f.plan, "/data/file"), 1);
	assert_true(find_mount(f.plan, AB_MNT_CONTENT, "/data/file") >= 0);
	f.prof->secrets = NULL;
	f.prof->nsecrets = 0;
	for (size_t i = 0; i < AB_ARRAY_SIZE(sec); i++)
		ab_strv_free(&sec[i].hosts);
	ab_strv_free(&f.prof->net.allow);
	fx_done(&f);
}

/* Nothing the caller's environment says ends up in a mount or rule it should
 * not: hostile values in argv and env stay data. */
static void test_hostile_strings(void **state)
{
	char *argv[] = {"sh", "-c", "echo $(cat /etc/shadow)\n\x01", NULL};
	char *env[] = {"TERM=xterm\nPATH=/evil", "LC_ALL=\x1b[31m", NULL};
	fx f;
	fx_init(&f, 7);
	f.in.argv = argv;
	f.in.environ = env;
	fx_ok(&f);
	assert_string_equal(f.plan->argv.v[2], argv[2]);
	assert_string_equal(env_get(f.plan, "TERM"), "xterm\nPATH=/evil");
	/* PATH comes from the default, not from a newline trick */
	assert_null(strstr(env_get(f.plan, "PATH"), "/evil"));
	fx_done(&f);
}

/* ---------------------------------------------------------------- golden */

/* A fixed profile close to profiles/default.json. */
static void golden_profile(ab_profile *p)
{
	free(p->name);
	p->name = strdup("default");
	p->path = strdup("/fixture/profiles/default.json");
	p->description = strdup("golden fixture");
	SV(&p->files, "/fixture/profiles/default.json");
	SV(&p->fs.read, "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc",
	   "/opt");
	SV(&p->fs.write, "/home/u/proj");
	SV(&p->fs.deny, "/etc/shadow", "/etc/gshadow", "/etc/shadow-", "/etc/gshadow-", "/etc/ssh",
	   "/etc/sudoers", "/etc/sudoers.d", "/etc/ssl/private", "/etc/machine-id", "/etc/docker");
	SV(&p->fs.protect, ".git/hooks", ".git/config", ".git/info/attributes", ".bashrc",
	   ".profile", ".envrc", ".vscode/", ".idea/", ".claude/settings.json",
	   ".claude/settings.local.json", ".mcp.json");
	SV(&p->env.pass, "TERM", "LANG", "LANGUAGE", "LC_*", "COLORTERM", "TZ", "NO_COLOR");
	p->limits.nofile = 65536;
	p->limits.fsize = __LONG_LONG_MAX__;
	p->limits.core = 0;
	p->hostname = strdup("agentbox");
}

static char *read_all(const char *path)
{
	FILE *fp = fopen(path, "re");
	if (!fp)
		return NULL;
	char *buf = NULL;
	size_t len = 0;
	FILE *mem = open_memstream(&buf, &len);
	char chunk[4096];
	size_t n;
	while ((n = fread(chunk, 1, sizeof(chunk), fp)) > 0)
		fwrite(chunk, 1, n, mem);
	fclose(fp);
	fclose(mem);
	return buf;
}

static void golden_compare(const char *name, const char *got)
{
	char path[1024];
	snprintf(path, sizeof(path), "%s/tests/unit/golden/%s", AB_SRCDIR, name);
	const char *upd = getenv("AB_UPDATE_GOLDEN");
	if (upd && strcmp(upd, "1") == 0) {
		FILE *fp = fopen(path, "we");
		if (!fp)
			fail_msg("cannot write %s", path);
		fputs(got, fp);
		fclose(fp);
		print_message("updated %s\n", path);
		return;
	}
	char *want = read_all(path);
	if (!want)
		fail_msg("missing golden file %s (run with AB_UPDATE_GOLDEN=1 to create it)", path);
	if (strcmp(want, got) != 0) {
		/* report the first differing line */
		const char *a = want, *b = got;
		int line = 1;
		while (*a && *a == *b) {
			if (*a == '\n')
				line++;
			a++;
			b++;
		}
		while (a > want && a[-1] != '\n')
			a--, b--;
		char wl[200], gl[200];
		snprintf(wl, sizeof(wl), "%.*s", (int)strcspn(a, "\n"), a);
		snprintf(gl, sizeof(gl), "%.*s", (int)strcspn(b, "\n"), b);
		free(want);
		fail_msg("%s differs at line %d:\n  want: %s\n  got:  %s\n"
			 "(if the change is intended: AB_UPDATE_GOLDEN=1 build/tests/test_plan)",
			 name, line, wl, gl);
	}
	free(want);
}

static void golden_fx(fx *f)
{
	static char *env[] = {"TERM=xterm-256color",
			      "LANG=C.UTF-8",
			      "LC_ALL=C.UTF-8",
			      "PATH=/usr/bin:/bin",
			      "SSH_AUTH_SOCK=/run/user/1000/ssh",
			      "GITHUB_TOKEN=ghp_secret",
			      "HOME=/home/u",
			      NULL};
	static char *argv[] = {"bash", "-l", NULL};
	static const fentry extra[] = {{"/home/u/proj/.claude", 'd', 1000}};
	fx_init(f, 7);
	golden_profile(f->prof);
	f->in.environ = env;
	f->in.argv = argv;
	f->in.tty_mask = 7;
	f->fs.extra = extra;
	f->fs.nextra = 1;
	fx_ok(f);
	check_order(f->plan);
}

/* The compact rendering: what matters most, independent of explain. */
static void test_golden_mounts(void **state)
{
	fx f;
	golden_fx(&f);
	char *buf = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&buf, &len);
	for (size_t i = 0; i < f.plan->nmounts; i++) {
		const ab_mount *m = &f.plan->mounts[i];
		fprintf(out, "%-11s %-36s", ab_mnt_kind_name(m->kind), m->dst);
		fprintf(out, "%s%s%s%s", m->flags & AB_MNT_F_DIR ? " dir" : "",
			m->flags & AB_MNT_F_OPTIONAL ? " optional" : "",
			m->flags & AB_MNT_F_IDMAP ? " idmap" : "",
			m->flags & AB_MNT_F_NOEXEC ? " noexec" : "");
		fprintf(out, " (%s)\n", m->why);
	}
	for (size_t i = 0; i < f.plan->hidden.n; i++)
		fprintf(out, "hidden %s\n", f.plan->hidden.v[i]);
	for (size_t i = 0; i < f.plan->absent.n; i++)
		fprintf(out, "absent %s\n", f.plan->absent.v[i]);
	for (size_t i = 0; i < f.plan->envp.n; i++)
		fprintf(out, "env %s\n", f.plan->envp.v[i]);
	fclose(out);
	/* trailing blanks of the padded columns do not matter */
	golden_compare("plan-default.mounts", buf);
	free(buf);
	fx_done(&f);
}

/* explain --json of the same plan.  The seccomp summary is left out: it is
 * the seccomp module's text (tested there) and would tie this file to it. */
static void test_golden_explain_json(void **state)
{
	fx f;
	golden_fx(&f);
	char *buf = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&buf, &len);
	int r = ab_plan_explain(f.plan, f.prof, true, out, &f.err);
	fclose(out);
	if (r < 0)
		fail_msg("explain: %s", f.err.msg);
	json_error_t je;
	json_t *j = json_loads(buf, 0, &je);
	if (!j)
		fail_msg("explain --json is not JSON: %s (line %d)", je.text, je.line);
	assert_true(json_is_array(json_object_get(j, "seccomp")));
	json_object_del(j, "seccomp");
	/* secret values never appear */
	assert_null(strstr(buf, "ghp_secret"));
	assert_null(strstr(buf, "/run/user/1000/ssh"));
	free(buf);
	char *norm = json_dumps(j, JSON_INDENT(2));
	json_decref(j);
	assert_non_null(norm);
	size_t n = strlen(norm);
	char *withnl = malloc(n + 2);
	memcpy(withnl, norm, n);
	memcpy(withnl + n, "\n", 2);
	free(norm);
	golden_compare("plan-default.json", withnl);
	free(withnl);
	fx_done(&f);
}

/* ---------------------------------------------------------------- git config (plan_gitcfg.c) */

/* Contents served by the fake reader, by path; a path of the fake fs that
 * is a file but not listed here reads as empty; "\x01" reads as EACCES. */
typedef struct fakecfg {
	const char *path, *content;
} fakecfg;
static const fakecfg *gc_files;
static size_t gc_nfiles;

static int fake_readfile(void *ctx, const char *path, size_t max, char **buf, size_t *len)
{
	struct stat st;
	int r = fake_lstat(ctx, path, &st);
	if (r < 0)
		return r;
	if (S_ISDIR(st.st_mode))
		return -EISDIR;
	const char *c = "";
	for (size_t i = 0; i < gc_nfiles; i++)
		if (strcmp(gc_files[i].path, path) == 0)
			c = gc_files[i].content;
	if (strcmp(c, "\x01") == 0)
		return -EACCES;
	if (strlen(c) > max)
		return -E2BIG;
	*buf = strdup(c);
	*len = strlen(c);
	return *buf ? 0 : -ENOMEM;
}

static bool has_gitcfg(const ab_plan *p, const char *entry)
{
	return ab_strv_contains(&p->gitcfg, entry);
}

static void gitcfg_fx(fx *f, const fentry *extra, size_t nextra, const fakecfg *files,
		      size_t nfiles)
{
	fx_init(f, 6);
	SV(&f->prof->fs.protect, ".git/hooks/", ".git/config");
	f->fs.extra = extra;
	f->fs.nextra = nextra;
	f->in.readfile = fake_readfile;
	f->in.readfile_ctx = &f->fs;
	gc_files = files;
	gc_nfiles = nfiles;
}

static void test_gitcfg_protects(void **state)
{
	(void)state;
	static const fentry extra[] = {
		{"/home/u/proj/inc.cfg", 'f', 1000},
		{"/home/u/proj/tools", 'd', 1000},
		{"/home/u/proj/tools/m.sh", 'f', 1000},
	};
	static const fakecfg files[] = {
		{"/home/u/proj/.git/config",
		 "[core]\n\thooksPath = .githooks\n\tfsmonitor = tools/m.sh\n"
		 "\tattributesFile = ~/attrs\n[include]\n\tpath = ../inc.cfg\n"
		 "[remote \"o\"]\n\turl = /elsewhere/r.git\n"},
		{"/home/u/proj/inc.cfg", "[diff \"x\"]\n\ttextconv = ./tc --opt=/x %f "
					 "https://h/p V=/x\n"},
		{"/home/u/.gitconfig", "[alias]\n\tx = !./al.sh\n\ty = log\n"
				       "[core]\n\tfsmonitor = true\n\tpager = less\n"},
	};
	fx f;
	gitcfg_fx(&f, extra, AB_ARRAY_SIZE(extra), files, AB_ARRAY_SIZE(files));
	fx_ok(&f);
	const ab_plan *p = f.plan;
	assert_true(has_gitcfg(p, ".githooks/\tcore.hookspath\t.git/config:2"));
	assert_true(has_gitcfg(p, "tools/m.sh\tcore.fsmonitor\t.git/config:3"));
	assert_true(has_gitcfg(p, "inc.cfg\tinclude.path\t.git/config:6"));
	assert_true(has_gitcfg(p, "tc\tdiff.x.textconv\tinc.cfg:2"));
	assert_true(has_gitcfg(p, "al.sh\talias.x\t/home/u/.gitconfig:2"));
	/* not: ~/attrs and /elsewhere (in no grant), an option, a URL, an assignment */
	assert_int_equal(p->gitcfg.n, 5);
	const ab_mount *m = must_mount(p, AB_MNT_PLACEHOLDER, "/home/u/proj/.githooks");
	assert_true(m->flags & AB_MNT_F_DIR);
	must_mount(p, AB_MNT_PROTECT, "/home/u/proj/tools/m.sh");
	must_mount(p, AB_MNT_PIN, "/home/u/proj/tools");
	must_mount(p, AB_MNT_PROTECT, "/home/u/proj/inc.cfg");
	must_mount(p, AB_MNT_PLACEHOLDER, "/home/u/proj/tc");
	must_mount(p, AB_MNT_PLACEHOLDER, "/home/u/proj/al.sh");
	/* explain shows them */
	char *out = NULL;
	size_t n = 0;
	FILE *mf = open_memstream(&out, &n);
	assert_int_equal(ab_plan_explain(p, f.prof, false, mf, &f.err), 0);
	fclose(mf);
	assert_non_null(strstr(out, "protect .githooks/ (core.hookspath in .git/config:2)"));
	free(out);
	/* the test-only ablation skips it all */
	f.in.ablate = AB_ABLATE_GITCFG;
	fx_ok(&f);
	assert_int_equal(f.plan->gitcfg.n, 0);
	assert_true(find_mount(f.plan, AB_MNT_PLACEHOLDER, "/home/u/proj/.githooks") < 0);
	fx_done(&f);
}

static void test_gitcfg_refusals(void **state)
{
	(void)state;
	static const fentry extra[] = {
		{"/home/u/proj/inc.cfg", 'f', 1000},
		{"/home/u/proj/link", 'l', 1000},
	};
	struct {
		const char *config, *inc, *msg;
	} cases[] = {
		{"[include]\n\tpath = ../inc.cfg\n", "[core]\n  x = \"open\n",
		 "git config /home/u/proj/inc.cfg:2:12: unterminated quoted value"},
		{"[include]\n\tpath = ../inc.cfg\n", "\x01", "git config /home/u/proj/inc.cfg"},
		{"[include]\n\tpath = ../inc.cfg\n", "[include]\n\tpath = inc.cfg\n",
		 "maximum include depth"},
		{"[core]\n\thooksPath = .\n", "", "the writable /home/u/proj or its directory"},
		{"[core]\n\thooksPath = /home/u/proj/\n", "", "the writable /home/u/proj or its"},
		{"[core]\n\teditor = link/x\n", "", "symbolic link"},
	};
	for (size_t i = 0; i < AB_ARRAY_SIZE(cases); i++) {
		fakecfg files[] = {{"/home/u/proj/.git/config", cases[i].config},
				   {"/home/u/proj/inc.cfg", cases[i].inc}};
		fx f;
		gitcfg_fx(&f, extra, AB_ARRAY_SIZE(extra), files, AB_ARRAY_SIZE(files));
		fx_fail(&f, cases[i].msg);
		if (strstr(cases[i].msg, "symbolic"))
			assert_non_null(strstr(f.err.hint, "or change core.editor"));
		fx_done(&f);
	}
	/* more paths than the limit: refused, not thousands of mounts */
	char *many = malloc(300 * 24 + 16);
	assert_non_null(many);
	size_t n = (size_t)sprintf(many, "[core]\n");
	for (int i = 0; i < 300; i++)
		n += (size_t)sprintf(many + n, "\teditor = ./e%d\n", i);
	fakecfg files[] = {{"/home/u/proj/.git/config", many}};
	fx f;
	gitcfg_fx(&f, extra, AB_ARRAY_SIZE(extra), files, 1);
	fx_fail(&f, "more than 256 paths");
	fx_done(&f);
	free(many);
}

static void test_gitcfg_sources(void **state)
{
	(void)state;
	/* GIT_CONFIG_GLOBAL replaces ~/.gitconfig; GIT_CONFIG_NOSYSTEM skips
	 * /etc/gitconfig; GIT_CONFIG_COUNT pairs count; config.worktree only
	 * with extensions.worktreeConfig; a linked worktree's .git file */
	static char *env[] = {"HOME=/home/u",
			      "GIT_CONFIG_GLOBAL=../g.cfg", /* from the cwd */
			      "GIT_CONFIG_NOSYSTEM=1",
			      "GIT_CONFIG_COUNT=1",
			      "GIT_CONFIG_KEY_0=Core.HooksPath",
			      "GIT_CONFIG_VALUE_0=envhooks",
			      NULL};
	static const fentry extra[] = {
		{"/home/u/proj/g.cfg", 'f', 1000},
		{"/etc/gitconfig", 'f', 0},
		{"/home/u/proj/.git/config.worktree", 'f', 1000},
	};
	static const fakecfg files[] = {
		{"/home/u/proj/.git/config", "[extensions]\n\tworktreeConfig\n"},
		{"/home/u/proj/.git/config.worktree", "[core]\n\texcludesFile = wt-excl\n"},
		{"/home/u/proj/g.cfg", "[core]\n\tattributesFile = g-attrs\n"},
		{"/home/u/.gitconfig", "[core]\n\tattributesFile = not-read\n"},
		{"/etc/gitconfig", "[core]\n\tattributesFile = not-read-either\n"},
	};
	fx f;
	gitcfg_fx(&f, extra, AB_ARRAY_SIZE(extra), files, AB_ARRAY_SIZE(files));
	f.in.environ = env;
	fx_ok(&f);
	const ab_plan *p = f.plan;
	assert_true(has_gitcfg(p, "g-attrs\tcore.attributesfile\tg.cfg:2"));
	assert_true(has_gitcfg(p, "wt-excl\tcore.excludesfile\t.git/config.worktree:2"));
	assert_true(has_gitcfg(p, "envhooks/\tcore.hookspath\tGIT_CONFIG_KEY_0"));
	assert_int_equal(p->gitcfg.n, 3);
	fx_done(&f);
}

static void test_gitcfg_workspace_below_top(void **state)
{
	(void)state;
	/* the workspace is a directory of a repository: git finds the
	 * repository above it, and its config names paths in the workspace */
	fakecfg files_below[] = {
		{"/home/u/proj/.git/config",
		 "[core]\n\thooksPath = .githooks\n\tfsmonitor = src/m.sh\n"},
	};
	fx f;
	gitcfg_fx(&f, NULL, 0, files_below, AB_ARRAY_SIZE(files_below));
	f.in.workspace = "/home/u/proj/src";
	fx_ok(&f);
	assert_true(has_gitcfg(f.plan, "src/m.sh\tcore.fsmonitor\t.git/config:3"));
	assert_int_equal(f.plan->gitcfg.n, 1); /* .githooks: not in a writable grant */
	must_mount(f.plan, AB_MNT_PLACEHOLDER, "/home/u/proj/src/m.sh");
	/* hooks in the directory above the workspace: the sandbox cannot
	 * write there; in the workspace itself: refused */
	files_below[0].content = "[core]\n\thooksPath = .\n";
	gc_files = files_below;
	fx_ok(&f);
	files_below[0].content = "[core]\n\thooksPath = src\n";
	fx_fail(&f, "the writable /home/u/proj/src or its directory");
	fx_done(&f);
}

static void test_gitcfg_real_readfile(void **state)
{
	(void)state;
	/* the real reader: a FIFO does not block, a directory is EISDIR, the
	 * size limit holds, a missing file is ENOENT */
	char dir[] = "/tmp/ab-gitcfg-XXXXXX";
	assert_non_null(mkdtemp(dir));
	char f[64], fifo[64], big[64], none[64];
	snprintf(f, sizeof(f), "%s/config", dir);
	snprintf(fifo, sizeof(fifo), "%s/fifo", dir);
	snprintf(big, sizeof(big), "%s/big", dir);
	snprintf(none, sizeof(none), "%s/none", dir);
	FILE *w = fopen(f, "w");
	assert_non_null(w);
	fputs("[core]\n\tbare = false\n", w);
	fclose(w);
	w = fopen(big, "w");
	assert_non_null(w);
	for (int i = 0; i < 100; i++)
		fputs("0123456789", w);
	fclose(w);
	assert_int_equal(mkfifo(fifo, 0600), 0);
	char *buf = NULL;
	size_t len = 0;
	assert_int_equal(ab_real_readfile(NULL, f, 100, &buf, &len), 0);
	assert_int_equal(len, 21);
	assert_string_equal(buf, "[core]\n\tbare = false\n");
	free(buf);
	assert_int_equal(ab_real_readfile(NULL, fifo, 100, &buf, &len), -EINVAL);
	assert_int_equal(ab_real_readfile(NULL, dir, 100, &buf, &len), -EISDIR);
	assert_int_equal(ab_real_readfile(NULL, none, 100, &buf, &len), -ENOENT);
	assert_int_equal(ab_real_readfile(NULL, big, 999, &buf, &len), -E2BIG);
	assert_int_equal(ab_real_readfile(NULL, big, 1000, &buf, &len), 0);
	free(buf);
	unlink(f);
	unlink(fifo);
	unlink(big);
	rmdir(dir);
}

/* Review mode (src/plan/plan_review.c): the workspace bind is marked, the
 * change set named from the state root; a write grant inside the workspace
 * (it would bypass the view) and a missing state root are refused; a grant
 * that shows the change sets has them masked, in any mode. */
static void test_review_mode(void **state)
{
	static const char root[] = "/data/state/agentbox/review";
	static const fentry extra[] = {
		{"/data/state", 'd', 1000},
		{"/data/state/agentbox", 'd', 1000},
		{"/data/state/agentbox/review", 'd', 1000},
	};
	fx f;
	fx_init(&f, 7);
	f.in.review = true;
	f.in.review_root = root;
	fx_ok(&f);
	assert_true(f.plan->review);
	_cleanup_free_ char *want = ab_review_dir_for(root, "/home/u/proj");
	assert_non_null(want);
	assert_string_equal(f.plan->review_dir, want);
	assert_true(strncmp(want, "/data/state/agentbox/review/proj-", 33) == 0);
	assert_true(must_mount(f.plan, AB_MNT_BIND_RW, "/home/u/proj")->flags & AB_MNT_F_REVIEW);
	fx_done(&f);

	fx_init(&f, 7); /* the profile's workspace.mode */
	f.prof->workspace.review = 1;
	f.in.review_root = root;
	fx_ok(&f);
	assert_true(f.plan->review);
	fx_done(&f);

	fx_init(&f, 7); /* default: direct, no flag */
	f.in.review_root = root;
	fx_ok(&f);
	assert_false(f.plan->review);
	assert_false(must_mount(f.plan, AB_MNT_BIND_RW, "/home/u/proj")->flags & AB_MNT_F_REVIEW);
	fx_done(&f);

	fx_init(&f, 7);
	f.in.review = true;
	fx_fail(&f, "review mode: no place for the change set");
	fx_done(&f);

	fx_init(&f, 7);
	f.in.review = true;
	f.in.review_root = root;
	SV(&f.prof->fs.write, "/home/u/proj/src");
	fx_fail(&f, "review mode: the write grant /home/u/proj/src (fs.write) lies inside the "
		    "workspace");
	fx_done(&f);

	fx_init(&f, 7); /* a grant that shows the change sets: masked */
	f.fs.extra = extra;
	f.fs.nextra = AB_ARRAY_SIZE(extra);
	f.in.review_root = root;
	SV(&f.prof->fs.write, "/data/state");
	fx_ok(&f);
	assert_true(must_mount(f.plan, AB_MNT_MASK, root)->flags & AB_MNT_F_DIR);
	fx_done(&f);

	assert_null(ab_review_root(NULL, (char *[]){"XDG_STATE_HOME=rel", NULL}));
	char *r = ab_review_root("/h", (char *[]){"XDG_STATE_HOME=/s", NULL});
	assert_string_equal(r, "/s/agentbox/review");
	free(r);
	r = ab_review_root("/h", (char *[]){NULL});
	assert_string_equal(r, "/h/.local/state/agentbox/review");
	free(r);
	r = ab_review_dir_for("/r", "/a/.hid den\n");
	assert_true(strncmp(r, "/r/_hid_den_-", 13) == 0);
	free(r);
}

/* filesystem.guard: a file granted on its own is shown as the run's copy
 * (made next to it, named by the run's tag); one writable only through a
 * granted directory is not; the test ablation leaves the host's file. */
static void test_guard_copy(void **state)
{
	(void)state;
	fentry over[] = {{"/home/u/.tool.json", 'f', 1000}};
	for (int ablate = 0; ablate < 2; ablate++) {
		fx f;
		fx_init(&f, 7);
		f.fs.extra = over;
		f.fs.nextra = 1;
		f.in.run_tag = "00ab";
		f.in.ablate = ablate ? AB_ABLATE_GUARDCOPY : 0;
		SV(&f.prof->fs.write, "/home/u/.tool.json", "/home/u/.config/tool");
		SV(&f.prof->fs.guard, "/home/u/.tool.json#/a", "/home/u/.tool.json#/b/*",
		   "/home/u/.config/tool/c.json#/x");
		fx_ok(&f);
		const ab_mount *m = must_mount(f.plan, AB_MNT_BIND_RW, "/home/u/.tool.json");
		assert_string_equal(m->src, "/home/u/.tool.json");
		if (ablate) {
			assert_null(m->copy);
			assert_false(m->flags & AB_MNT_F_COPY);
		} else {
			assert_string_equal(m->copy, "/home/u/.tool.json.agentbox-00ab");
			assert_true(m->flags & AB_MNT_F_COPY);
		}
		m = must_mount(f.plan, AB_MNT_BIND_RW, "/home/u/.config/tool");
		assert_null(m->copy);
		assert_false(m->flags & AB_MNT_F_COPY);
		fx_done(&f);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_review_mode),
		cmocka_unit_test(test_mount_order_basic),
		cmocka_unit_test(test_mount_order_nested),
		cmocka_unit_test(test_deny_wins),
		cmocka_unit_test(test_host_sockets),
		cmocka_unit_test(test_control_dirs),
		cmocka_unit_test(test_deny_in_workspace_and_symlink),
		cmocka_unit_test(test_deny_through_symlink),
		cmocka_unit_test(test_deny_under_granted_home),
		cmocka_unit_test(test_workspace_denied),
		cmocka_unit_test(test_absent_grants),
		cmocka_unit_test(test_grant_kinds),
		cmocka_unit_test(test_protect),
		cmocka_unit_test(test_write_refusals),
		cmocka_unit_test(test_protect_roots),
		cmocka_unit_test(test_protect_symlink_refused),
		cmocka_unit_test(test_protect_odd),
		cmocka_unit_test(test_gitcfg_protects),
		cmocka_unit_test(test_gitcfg_refusals),
		cmocka_unit_test(test_gitcfg_sources),
		cmocka_unit_test(test_gitcfg_workspace_below_top),
		cmocka_unit_test(test_gitcfg_real_readfile),
		cmocka_unit_test(test_workspace_refused),
		cmocka_unit_test(test_cwd_and_hostname),
		cmocka_unit_test(test_identity_unprivileged),
		cmocka_unit_test(test_identity_root),
		cmocka_unit_test(test_env),
		cmocka_unit_test(test_env_defaults),
		cmocka_unit_test(test_landlock_full),
		cmocka_unit_test(test_landlock_downgrades),
		cmocka_unit_test(test_seccomp_required),
		cmocka_unit_test(test_connect_mediation),
		cmocka_unit_test(test_rlimits),
		cmocka_unit_test(test_cgroup_limits),
		cmocka_unit_test(test_pty_decision),
		cmocka_unit_test(test_ablation),
		cmocka_unit_test(test_command),
		cmocka_unit_test(test_rendered_then_env_secret),
		cmocka_unit_test(test_hostile_strings),
		cmocka_unit_test(test_guard_copy),
		cmocka_unit_test(test_golden_mounts),
		cmocka_unit_test(test_golden_explain_json),
	};
	return cmocka_run_group_tests_name("plan", tests, NULL, NULL);
}
