/* SPDX-License-Identifier: MIT */
/*
 * Landlock: the ABI tables (pure, table-driven) and the real effect of
 * ab_landlock_apply() in forked children.  No privileges needed: Landlock works
 * unprivileged under no_new_privs, so this suite runs the same as root and as
 * nobody (setpriv --reuid=65534 --regid=65534 --clear-groups).
 */
#include "unit.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agentbox/landlock.h"

#define FS_ABI1 ((1ULL << 13) - 1)
#define REFER LANDLOCK_ACCESS_FS_REFER
#define TRUNC LANDLOCK_ACCESS_FS_TRUNCATE
#define IOCTL LANDLOCK_ACCESS_FS_IOCTL_DEV
#define RD (LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR)
#define RW_FILE \
	(LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR | LANDLOCK_ACCESS_FS_WRITE_FILE)

static int g_abi; /* probed once */
static int g_abi_errno;
static char g_base[64]; /* temp tree, per test */

/* ---------------------------------------------------------------- tables */

static void test_fs_rights_table(void **state)
{
	static const struct {
		int abi;
		uint64_t want;
	} t[] = {
		{-5, 0},
		{0, 0},
		{1, FS_ABI1},
		{2, FS_ABI1 | REFER},
		{3, FS_ABI1 | REFER | TRUNC},
		{4, FS_ABI1 | REFER | TRUNC},
		{5, FS_ABI1 | REFER | TRUNC | IOCTL},
		{6, FS_ABI1 | REFER | TRUNC | IOCTL},
		{7, FS_ABI1 | REFER | TRUNC | IOCTL},
		{8, FS_ABI1 | REFER | TRUNC | IOCTL}, /* future: as 7 */
		{1000, FS_ABI1 | REFER | TRUNC | IOCTL},
	};
	for (size_t i = 0; i < AB_ARRAY_SIZE(t); i++) {
		uint64_t got = ab_landlock_fs_rights(t[i].abi);
		if (got != t[i].want)
			fail_msg("abi %d: got 0x%llx want 0x%llx", t[i].abi,
				 (unsigned long long)got, (unsigned long long)t[i].want);
	}
	assert_int_equal(ab_landlock_fs_rights(7), 0xffff);
}

static void test_net_and_scope_table(void **state)
{
	for (int abi = -1; abi <= 9; abi++) {
		uint64_t net =
			abi >= 4 ? (LANDLOCK_ACCESS_NET_BIND_TCP | LANDLOCK_ACCESS_NET_CONNECT_TCP)
				 : 0;
		uint64_t sc =
			abi >= 6 ? (LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET | LANDLOCK_SCOPE_SIGNAL)
				 : 0;
		assert_int_equal(ab_landlock_net_rights(abi), net);
		assert_int_equal(ab_landlock_scopes(abi), sc);
	}
}

static void join(const ab_strv *s, char *buf, size_t len)
{
	buf[0] = '\0';
	for (size_t i = 0; i < s->n; i++)
		snprintf(buf + strlen(buf), len - strlen(buf), "%s%s", i ? " " : "", s->v[i]);
}

static void test_downgrades_table(void **state)
{
	static const struct {
		int abi;
		const char *want;
	} t[] = {
		{-1, "landlock"},
		{0, "landlock"},
		{1,
		 "landlock-refer landlock-truncate landlock-net landlock-ioctl-dev landlock-scope"},
		{2, "landlock-truncate landlock-net landlock-ioctl-dev landlock-scope"},
		{3, "landlock-net landlock-ioctl-dev landlock-scope"},
		{4, "landlock-ioctl-dev landlock-scope"},
		{5, "landlock-scope"},
		{6, ""},
		{7, ""},
		{8, ""},
	};
	for (size_t i = 0; i < AB_ARRAY_SIZE(t); i++) {
		ab_strv s = {0};
		char buf[512];
		assert_int_equal(ab_landlock_downgrades(t[i].abi, &s), 0);
		join(&s, buf, sizeof(buf));
		if (strcmp(buf, t[i].want) != 0)
			fail_msg("abi %d: got \"%s\" want \"%s\"", t[i].abi, buf, t[i].want);
		/* appending again adds no duplicates */
		size_t n = s.n;
		assert_int_equal(ab_landlock_downgrades(t[i].abi, &s), 0);
		assert_int_equal(s.n, n);
		ab_strv_free(&s);
	}
}

static void test_class_rights_table(void **state)
{
	static const struct {
		enum ab_ll_class cls;
		int abi;
		uint64_t want;
	} t[] = {
		{AB_LL_READ, 0, 0},
		{AB_LL_READ, 1, RD},
		{AB_LL_READ, 7, RD},
		{AB_LL_WRITE, 0, 0},
		{AB_LL_WRITE, 1, FS_ABI1},
		{AB_LL_WRITE, 2, FS_ABI1 | REFER},
		{AB_LL_WRITE, 3, FS_ABI1 | REFER | TRUNC},
		{AB_LL_WRITE, 7, FS_ABI1 | REFER | TRUNC | IOCTL},
		{AB_LL_DEV, 1, RW_FILE},
		{AB_LL_DEV, 2, RW_FILE},
		{AB_LL_DEV, 3, RW_FILE | TRUNC},
		{AB_LL_DEV, 4, RW_FILE | TRUNC},
		{AB_LL_DEV, 5, RW_FILE | TRUNC | IOCTL},
		{AB_LL_DEV, 7, RW_FILE | TRUNC | IOCTL},
		{AB_LL_DEV, 9, RW_FILE | TRUNC | IOCTL},
		{AB_LL_PROC, 0, 0},
		{AB_LL_PROC, 1, RW_FILE},
		{AB_LL_PROC, 7, RW_FILE},
		{(enum ab_ll_class)99, 7, 0}, /* hostile: unknown class */
		{(enum ab_ll_class) - 1, 7, 0},
	};
	for (size_t i = 0; i < AB_ARRAY_SIZE(t); i++) {
		uint64_t got = ab_landlock_class_rights(t[i].cls, t[i].abi);
		if (got != t[i].want)
			fail_msg("class %d abi %d: got 0x%llx want 0x%llx", (int)t[i].cls, t[i].abi,
				 (unsigned long long)got, (unsigned long long)t[i].want);
		/* never more than the ABI knows */
		assert_int_equal(got & ~ab_landlock_fs_rights(t[i].abi), 0);
	}
	/* DEV never allows mknod or exec */
	uint64_t dev = ab_landlock_class_rights(AB_LL_DEV, 7);
	assert_int_equal(dev & (LANDLOCK_ACCESS_FS_MAKE_CHAR | LANDLOCK_ACCESS_FS_MAKE_BLOCK |
				LANDLOCK_ACCESS_FS_EXECUTE),
			 0);
}

static void test_plan_add(void **state)
{
	ab_ll_plan p = {.enabled = true, .abi = 7};

	assert_int_equal(ab_ll_plan_add(&p, "/usr", AB_LL_READ), 0);
	assert_int_equal(ab_ll_plan_add(&p, "/work", AB_LL_WRITE), 0);
	assert_int_equal(ab_ll_plan_add(&p, "/usr", AB_LL_PROC), 0); /* merges */
	assert_int_equal(p.nrules, 2);
	assert_string_equal(p.rules[0].path, "/usr");
	assert_int_equal(p.rules[0].access, RD | RW_FILE);
	assert_int_equal(p.rules[1].access, ab_landlock_fs_rights(7));
	/* hostile: relative, empty, NULL, unknown class */
	assert_int_equal(ab_ll_plan_add(&p, "usr", AB_LL_READ), -EINVAL);
	assert_int_equal(ab_ll_plan_add(&p, "", AB_LL_READ), -EINVAL);
	assert_int_equal(ab_ll_plan_add(&p, NULL, AB_LL_READ), -EINVAL);
	assert_int_equal(ab_ll_plan_add(&p, "/x", (enum ab_ll_class)42), -EINVAL);
	assert_int_equal(p.nrules, 2);
	ab_ll_plan_free(&p);
	assert_null(p.rules);
	assert_int_equal(p.nrules, 0);
	ab_ll_plan_free(&p); /* twice is fine */
}

static void check_lines(const ab_ll_plan *p, const char *want)
{
	ab_strv s = {0};
	char buf[1024] = "";
	assert_int_equal(ab_landlock_describe(p, &s), 0);
	for (size_t i = 0; i < s.n; i++)
		snprintf(buf + strlen(buf), sizeof(buf) - strlen(buf), "%s\n", s.v[i]);
	if (strcmp(buf, want) != 0)
		fail_msg("got:\n%swant:\n%s", buf, want);
	ab_strv_free(&s);
}

static void test_describe(void **state)
{
	uint16_t ports[20];
	ab_ll_plan p = {.enabled = true,
			.abi = 7,
			.handled_fs = ab_landlock_fs_rights(7),
			.handled_net = ab_landlock_net_rights(7),
			.scoped = ab_landlock_scopes(7)};

	assert_int_equal(ab_ll_plan_add(&p, "/usr", AB_LL_READ), 0);
	check_lines(&p, "ABI 7: filesystem (1 rule)\nTCP connect/bind: none\n"
			"scoped: abstract-unix signal\n");
	ports[0] = 8080;
	p.tcp_ports = ports;
	p.ntcp_ports = 1;
	assert_int_equal(ab_ll_plan_add(&p, "/work", AB_LL_WRITE), 0);
	check_lines(&p, "ABI 7: filesystem (2 rules)\nTCP connect/bind: port 8080\n"
			"scoped: abstract-unix signal\n");
	for (int i = 0; i < 20; i++)
		ports[i] = (uint16_t)(65516 + i);
	p.ntcp_ports = 20; /* hostile: long list is cut, not overflowed */
	p.scoped = LANDLOCK_SCOPE_SIGNAL;
	check_lines(&p, "ABI 7: filesystem (2 rules)\nTCP connect/bind: ports 65516, 65517, "
			"65518, 65519, 65520, 65521, 65522, 65523, 65524, 65525, 65526, 65527, "
			"65528, 65529, 65530, 65531, ... (20 ports)\nscoped: signal\n");
	p.tcp_ports = NULL;
	p.ntcp_ports = 0;
	p.tcp_any = true;
	check_lines(&p, "ABI 7: filesystem (2 rules)\nTCP connect/bind: any port (not restricted)\n"
			"scoped: signal\n");

	ab_ll_plan old = {.enabled = true, .abi = 3, .handled_fs = ab_landlock_fs_rights(3)};
	check_lines(&old, "ABI 3: filesystem (0 rules)\nTCP connect/bind: not restricted by "
			  "Landlock (needs ABI 4)\nscoped: none (needs ABI 6)\n");
	ab_ll_plan off = {.enabled = false};
	check_lines(&off, "not applied (no usable Landlock on this kernel)\n");
	ab_ll_plan_free(&p);
}

static void test_probe(void **state)
{
	int e = -1;
	int abi = ab_landlock_probe_abi(&e);
	assert_true(abi >= 0);
	if (abi == 0)
		assert_true(e != 0);
	else
		assert_int_equal(e, 0);
	assert_int_equal(ab_landlock_probe_abi(NULL), abi);
}

/* ---------------------------------------------------------- behaviour */

#define NEED_ABI(n)                                                                            \
	do {                                                                                   \
		if (g_abi < (n)) {                                                             \
			print_message("SKIP: kernel Landlock ABI %d < %d (errno %d)\n", g_abi, \
				      (n), g_abi_errno);                                       \
			skip();                                                                \
		}                                                                              \
	} while (0)

/* In the child: report a failed expectation and exit non-zero. */
#define CHECK(cond, what)                                                              \
	do {                                                                           \
		if (!(cond)) {                                                         \
			dprintf(2, "child: %s failed (errno %d: %s)\n", (what), errno, \
				strerror(errno));                                      \
			_exit(1);                                                      \
		}                                                                      \
	} while (0)

#define EXPECT_ERRNO(call, e, what)                                                            \
	do {                                                                                   \
		errno = 0;                                                                     \
		long r_ = (long)(call);                                                        \
		if (r_ >= 0 || errno != (e)) {                                                 \
			dprintf(2, "child: %s: got %ld errno %d, want errno %d\n", (what), r_, \
				errno, (e));                                                   \
			_exit(1);                                                              \
		}                                                                              \
	} while (0)

typedef void (*child_fn)(void *ctx);

static void run_in_child(child_fn fn, void *ctx)
{
	fflush(NULL);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		fn(ctx);
		_exit(0);
	}
	int st;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
}

static void apply_or_die(const ab_ll_plan *p)
{
	ab_err err = {0};
	if (ab_landlock_apply(p, &err) < 0) {
		dprintf(2, "child: apply failed: %s\nHint: %s\n", err.msg, err.hint);
		_exit(2);
	}
}

static void mkpath(char *buf, size_t len, const char *rel)
{
	snprintf(buf, len, "%s/%s", g_base, rel);
}

static void write_file(const char *rel, const char *data)
{
	char p[256];
	mkpath(p, sizeof(p), rel);
	int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, data, strlen(data)), (ssize_t)strlen(data));
	close(fd);
}

static int tree_setup(void **state)
{
	char p[256];
	snprintf(g_base, sizeof(g_base), "/tmp/ab-ll-XXXXXX");
	if (!mkdtemp(g_base))
		return -1;
	(void)chmod(g_base, 0755);
	static const char *dirs[] = {"A", "B", "B/x", "B/y"};
	for (size_t i = 0; i < AB_ARRAY_SIZE(dirs); i++) {
		mkpath(p, sizeof(p), dirs[i]);
		if (mkdir(p, 0755) < 0)
			return -1;
	}
	write_file("A/a.txt", "alpha");
	write_file("B/x/moveme", "m");
	write_file("f.txt", "file");
	write_file("g.txt", "sibling");
	return 0;
}

static int rm_cb(const char *path, const struct stat *sb, int type, struct FTW *ftw)
{
	return remove(path);
}

static int tree_teardown(void **state)
{
	if (g_base[0])
		nftw(g_base, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
	g_base[0] = '\0';
	return 0;
}

static void plan_init(ab_ll_plan *p, int abi)
{
	*p = (ab_ll_plan){.enabled = true, .abi = abi, .handled_fs = ab_landlock_fs_rights(abi)};
}

static void child_fs(void *ctx)
{
	ab_ll_plan p;
	char a[256], b[256], path[256], buf[16];

	plan_init(&p, g_abi);
	mkpath(a, sizeof(a), "A");
	mkpath(b, sizeof(b), "B");
	CHECK(ab_ll_plan_add(&p, a, AB_LL_READ) == 0, "plan add A");
	CHECK(ab_ll_plan_add(&p, b, AB_LL_WRITE) == 0, "plan add B");
	CHECK(ab_ll_plan_add(&p, "/nonexistent/agentbox/x", AB_LL_READ) == 0, "plan add");
	apply_or_die(&p); /* the ENOENT rule is skipped silently */

	mkpath(path, sizeof(path), "A/a.txt");
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	CHECK(fd >= 0, "read A/a.txt");
	CHECK(read(fd, buf, sizeof(buf)) == 5, "read content");
	close(fd);
	DIR *d = opendir(a);
	CHECK(d != NULL, "list A");
	closedir(d);
	EXPECT_ERRNO(open(path, O_WRONLY | O_CLOEXEC), EACCES, "write A/a.txt");
	mkpath(path, sizeof(path), "A/new");
	EXPECT_ERRNO(open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644), EACCES, "create in A");
	EXPECT_ERRNO(mkdir(path, 0755), EACCES, "mkdir in A");

	mkpath(path, sizeof(path), "B/new");
	fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	CHECK(fd >= 0, "create in B");
	CHECK(write(fd, "x", 1) == 1, "write in B");
	close(fd);
	CHECK(unlink(path) == 0, "unlink in B");
	mkpath(path, sizeof(path), "B/sub");
	CHECK(mkdir(path, 0755) == 0 && rmdir(path) == 0, "mkdir/rmdir in B");

	EXPECT_ERRNO(open("/etc/passwd", O_RDONLY | O_CLOEXEC), EACCES, "read /etc/passwd");
	mkpath(path, sizeof(path), "f.txt");
	EXPECT_ERRNO(open(path, O_RDONLY | O_CLOEXEC), EACCES, "read f.txt (no rule)");
	EXPECT_ERRNO(open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC), EACCES, "list /");
	ab_ll_plan_free(&p);
}

static void test_apply_fs(void **state)
{
	NEED_ABI(1);
	run_in_child(child_fs, NULL);
}

static void child_file_rule(void *ctx)
{
	ab_ll_plan p;
	char f[256], g[256];

	plan_init(&p, g_abi);
	mkpath(f, sizeof(f), "f.txt");
	mkpath(g, sizeof(g), "g.txt");
	/* READ carries READ_DIR, which must be masked on a regular file,
	 * and DEV on a character device keeps only file rights. */
	CHECK(ab_ll_plan_add(&p, f, AB_LL_READ) == 0, "plan add file");
	CHECK(ab_ll_plan_add(&p, "/dev/null", AB_LL_DEV) == 0, "plan add /dev/null");
	apply_or_die(&p);
	int fd = open(f, O_RDONLY | O_CLOEXEC);
	CHECK(fd >= 0, "read the granted file");
	close(fd);
	EXPECT_ERRNO(open(f, O_WRONLY | O_CLOEXEC), EACCES, "write the read-only file");
	EXPECT_ERRNO(open(g, O_RDONLY | O_CLOEXEC), EACCES, "read the sibling");
	fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
	CHECK(fd >= 0, "open /dev/null for writing");
	CHECK(write(fd, "x", 1) == 1, "write /dev/null");
	close(fd);
	EXPECT_ERRNO(open("/dev/zero", O_RDONLY | O_CLOEXEC), EACCES, "read /dev/zero");
	ab_ll_plan_free(&p);
}

static void test_apply_file_rule(void **state)
{
	NEED_ABI(1);
	run_in_child(child_file_rule, NULL);
}

static void child_errors(void *ctx)
{
	ab_ll_plan p;
	ab_err err = {0};

	/* ENOTDIR is not "absent": it fails and names the path */
	plan_init(&p, g_abi);
	CHECK(ab_ll_plan_add(&p, "/etc/passwd/x", AB_LL_READ) == 0, "plan add");
	CHECK(ab_landlock_apply(&p, &err) == -ENOTDIR, "ENOTDIR fails");
	CHECK(strstr(err.msg, "/etc/passwd/x") != NULL, "message names the path");
	ab_ll_plan_free(&p);

	/* rights the kernel does not know: EINVAL with a hint */
	memset(&err, 0, sizeof(err));
	plan_init(&p, g_abi);
	p.handled_fs |= 1ULL << 62;
	CHECK(ab_landlock_apply(&p, &err) == -EINVAL, "unknown right fails");
	CHECK(strstr(err.msg, "creating the ruleset") != NULL, "message");
	CHECK(err.hint[0] != '\0', "hint");

	/* nothing handled at all */
	memset(&err, 0, sizeof(err));
	p.handled_fs = 0;
	CHECK(ab_landlock_apply(&p, &err) == -ENOMSG, "empty ruleset fails");
	CHECK(err.hint[0] != '\0', "hint");

	/* disabled plan: no-op, and nothing was restricted by the failures */
	p.enabled = false;
	CHECK(ab_landlock_apply(&p, &err) == 0, "disabled plan is a no-op");
	int fd = open("/etc/passwd", O_RDONLY | O_CLOEXEC);
	CHECK(fd >= 0, "still unrestricted after failed applies");
	close(fd);
}

static void test_apply_errors(void **state)
{
	NEED_ABI(1);
	run_in_child(child_errors, NULL);
}

struct refer_ctx {
	int abi;
	int want_errno; /* 0 = rename must succeed */
};

static void child_refer(void *ctx)
{
	const struct refer_ctx *c = ctx;
	ab_ll_plan p;
	char b[256], from[256], to[256];

	plan_init(&p, c->abi);
	mkpath(b, sizeof(b), "B");
	CHECK(ab_ll_plan_add(&p, b, AB_LL_WRITE) == 0, "plan add B");
	apply_or_die(&p);
	mkpath(from, sizeof(from), "B/x/moveme");
	mkpath(to, sizeof(to), "B/y/moveme");
	if (c->want_errno)
		EXPECT_ERRNO(rename(from, to), c->want_errno, "cross-dir rename");
	else
		CHECK(rename(from, to) == 0, "cross-dir rename");
	ab_ll_plan_free(&p);
}

/* ABI 1 cannot handle REFER: cross-directory renames are refused even inside a
 * writable tree (the "landlock-refer" downgrade); ABI >= 2 allows them. */
static void test_apply_refer(void **state)
{
	NEED_ABI(2);
	struct refer_ctx v1 = {1, EXDEV}, cur = {g_abi, 0};
	run_in_child(child_refer, &v1);
	run_in_child(child_refer, &cur);
}

struct net_ctx {
	uint16_t port;
	bool allow;
};

static void child_net(void *ctx)
{
	const struct net_ctx *c = ctx;
	uint16_t ports[1] = {c->port};
	ab_ll_plan p = {
		.enabled = true, .abi = g_abi, .handled_net = ab_landlock_net_rights(g_abi)};
	if (c->allow) {
		p.tcp_ports = ports;
		p.ntcp_ports = 1;
	}
	apply_or_die(&p);
	p.tcp_ports = NULL; /* stack array: not freed */

	struct sockaddr_in sa = {.sin_family = AF_INET,
				 .sin_port = htons(c->port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	CHECK(s >= 0, "socket");
	if (c->allow)
		CHECK(connect(s, (struct sockaddr *)&sa, sizeof(sa)) == 0, "connect allowed port");
	else
		EXPECT_ERRNO(connect(s, (struct sockaddr *)&sa, sizeof(sa)), EACCES,
			     "connect with no ports allowed");
	close(s);
	/* bind to some other port is never granted */
	s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	sa.sin_port = htons((uint16_t)(c->port == 65535 ? 65534 : c->port + 1));
	EXPECT_ERRNO(bind(s, (struct sockaddr *)&sa, sizeof(sa)), EACCES, "bind other port");
	close(s);
}

static void test_apply_net(void **state)
{
	NEED_ABI(4);
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(sa);
	int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(l >= 0);
	assert_int_equal(bind(l, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(l, 8), 0);
	assert_int_equal(getsockname(l, (struct sockaddr *)&sa, &len), 0);

	struct net_ctx deny = {ntohs(sa.sin_port), false};
	struct net_ctx allow = {ntohs(sa.sin_port), true};
	run_in_child(child_net, &deny);
	run_in_child(child_net, &allow);
	close(l);
}

struct scope_ctx {
	uint64_t scoped;
	const char *abstract; /* name without the leading NUL */
};

static int connect_abstract(const char *name)
{
	struct sockaddr_un su = {.sun_family = AF_UNIX};
	size_t n = strlen(name);
	memcpy(su.sun_path + 1, name, n);
	int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return -1;
	int r = connect(s, (struct sockaddr *)&su,
			(socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n));
	int e = errno;
	close(s);
	errno = e;
	return r;
}

static void child_scope(void *ctx)
{
	const struct scope_ctx *c = ctx;
	ab_ll_plan p = {.enabled = true, .abi = g_abi, .scoped = c->scoped};

	apply_or_die(&p);
	if (c->scoped & LANDLOCK_SCOPE_SIGNAL)
		EXPECT_ERRNO(kill(getppid(), 0), EPERM, "signal the parent");
	else
		CHECK(kill(getppid(), 0) == 0, "signal the parent (not scoped)");
	if (c->scoped & LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET)
		EXPECT_ERRNO(connect_abstract(c->abstract), EPERM, "abstract unix connect");
	else
		CHECK(connect_abstract(c->abstract) == 0, "abstract unix connect (not scoped)");

	/* inside the domain: own children remain reachable */
	pid_t kid = fork();
	CHECK(kid >= 0, "fork");
	if (kid == 0) {
		pause();
		_exit(0);
	}
	CHECK(kill(kid, SIGKILL) == 0, "signal own child");
	waitpid(kid, NULL, 0);
}

static void test_apply_scope(void **state)
{
	NEED_ABI(6);
	char name[64];
	snprintf(name, sizeof(name), "agentbox-test-ll-%d", (int)getpid());
	struct sockaddr_un su = {.sun_family = AF_UNIX};
	memcpy(su.sun_path + 1, name, strlen(name));
	int l = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(l >= 0);
	assert_int_equal(
		bind(l, (struct sockaddr *)&su,
		     (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + strlen(name))),
		0);
	assert_int_equal(listen(l, 8), 0);

	struct scope_ctx both = {ab_landlock_scopes(g_abi), name};
	struct scope_ctx sig = {LANDLOCK_SCOPE_SIGNAL, name};
	struct scope_ctx unix_only = {LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET, name};
	run_in_child(child_scope, &both);
	run_in_child(child_scope, &sig);
	run_in_child(child_scope, &unix_only);
	close(l);
}

static int group_setup(void **state)
{
	g_abi = ab_landlock_probe_abi(&g_abi_errno);
	print_message("Landlock ABI %d, uid %d\n", g_abi, (int)geteuid());
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fs_rights_table),
		cmocka_unit_test(test_net_and_scope_table),
		cmocka_unit_test(test_downgrades_table),
		cmocka_unit_test(test_class_rights_table),
		cmocka_unit_test(test_plan_add),
		cmocka_unit_test(test_describe),
		cmocka_unit_test(test_probe),
		cmocka_unit_test_setup_teardown(test_apply_fs, tree_setup, tree_teardown),
		cmocka_unit_test_setup_teardown(test_apply_file_rule, tree_setup, tree_teardown),
		cmocka_unit_test_setup_teardown(test_apply_errors, tree_setup, tree_teardown),
		cmocka_unit_test_setup_teardown(test_apply_refer, tree_setup, tree_teardown),
		cmocka_unit_test(test_apply_net),
		cmocka_unit_test(test_apply_scope),
	};
	return cmocka_run_group_tests(tests, group_setup, NULL);
}
