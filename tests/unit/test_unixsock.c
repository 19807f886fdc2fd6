/* SPDX-License-Identifier: MIT */
/* Unit tests for the /proc/net/unix parser (src/kernel/unixsock.c), including
 * hostile listings: paths are chosen by any local user.  No privileges. */
#include "unit.h"

#include <errno.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sock_diag.h>
#include <linux/unix_diag.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <unistd.h>

#include "agentbox/unixsock.h"

static const char listing[] =
	"Num       RefCount Protocol Flags    Type St Inode Path\n"
	"0000000000000000: 00000002 00000000 00010000 0001 01 24219 /run/user/1000/bus\n"
	"0000000000000000: 00000003 00000000 00000000 0001 03  1584\n"
	"0000000000000000: 00000002 00000000 00010000 0001 01 12345 @/tmp/.X11-unix/X0\n"
	"ffff8a0b1c2d3e4f: 00000002 00000000 00000000 0002 01   999 /run/systemd/journal/socket\n"
	"0000000000000000: 00000002 00000000 00010000 0001 01 77 /home/u/my proj/a b.sock\n"
	"0000000000000000: 00000002 00000000 00010000 0001 01 78 /no/newline/at/end";

static void test_listing(void **state)
{
	ab_strv out = {0};
	assert_int_equal(ab_unixsock_parse(listing, strlen(listing), &out), 4);
	assert_int_equal(out.n, 4);
	assert_string_equal(out.v[0], "/run/user/1000/bus");
	assert_string_equal(out.v[1], "/run/systemd/journal/socket");
	assert_string_equal(out.v[2], "/home/u/my proj/a b.sock"); /* spaces kept */
	assert_string_equal(out.v[3], "/no/newline/at/end");
	ab_strv_free(&out);
	assert_int_equal(ab_unixsock_parse("", 0, &out), 0);
	assert_int_equal(ab_unixsock_parse(NULL, 0, &out), 0);
	assert_int_equal(out.n, 0);
}

static void test_hostile(void **state)
{
	ab_strv out = {0};
	/* a path of exactly the maximum is kept, one byte more is not */
	char line[512], path[AB_UNIXSOCK_PATH_MAX + 2];
	memset(path, 'a', sizeof(path));
	path[0] = '/';
	path[AB_UNIXSOCK_PATH_MAX] = '\0';
	snprintf(line, sizeof(line), "0: 00000002 00000000 00010000 0001 01 1 %s\n", path);
	assert_int_equal(ab_unixsock_parse(line, strlen(line), &out), 1);
	path[AB_UNIXSOCK_PATH_MAX] = 'a';
	path[AB_UNIXSOCK_PATH_MAX + 1] = '\0';
	snprintf(line, sizeof(line), "0: 00000002 00000000 00010000 0001 01 1 %s\n", path);
	assert_int_equal(ab_unixsock_parse(line, strlen(line), &out), 0);
	ab_strv_free(&out);
	/* control bytes, relative paths, malformed fields, a NUL: skipped */
	static const char *const bad[] = {
		"0: 00000002 00000000 00010000 0001 01 1 /a\tb\n",
		"0: 00000002 00000000 00010000 0001 01 1 /a\x7f\n",
		"0: 00000002 00000000 00010000 0001 01 1 relative.sock\n",
		"0: 00000002 00000000 00010000 0001 01 1  /two-spaces\n",
		"0: 0000000g 00000000 00010000 0001 01 1 /badhex\n",
		"0: 00000002 00000000 00010000 0001 01 x1 /baddec\n",
		"0 00000002 00000000 00010000 0001 01 1 /nocolon\n",
		": 00000002 00000000 00010000 0001 01 1 /noaddr\n",
		"0: 00000002 00000000 00010000 0001 01 /short\n",
		"0: 00000002 00000000 00010000 0001 01 1/nospace\n",
		"0: 00000002 00000000 00010000 0001 01 1 /\n",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int r = ab_unixsock_parse(bad[i], strlen(bad[i]), &out);
		if (i == 10) { /* "/" alone is a path (of a directory, never a socket) */
			assert_int_equal(r, 1);
			continue;
		}
		if (r != 0)
			fail_msg("case %zu parsed: %s", i, out.n ? out.v[out.n - 1] : "?");
	}
	ab_strv_free(&out);
	const char nul[] = "0: 00000002 00000000 00010000 0001 01 1 /a\0b\n";
	assert_int_equal(ab_unixsock_parse(nul, sizeof(nul) - 1, &out), 0);
	/* a newline in a bound path makes its tail a line of its own: at worst
	 * another path to look at (the plan hides only existing sockets) */
	const char forged[] = "0: 00000002 00000000 00010000 0001 01 1 /tmp/x\n"
			      "0: 00000002 00000000 00010000 0001 01 1 /home/u/ws/fake\n";
	assert_int_equal(ab_unixsock_parse(forged, strlen(forged), &out), 2);
	ab_strv_free(&out);
	/* limits */
	assert_int_equal(ab_unixsock_parse(NULL, 1, &out), -EINVAL);
	assert_int_equal(ab_unixsock_parse(listing, (size_t)AB_UNIXSOCK_LIST_MAX + 1, &out),
			 -E2BIG);
}

/* Netlink sock_diag datagrams, built by hand. */
typedef struct nlb {
	uint8_t b[4096];
	size_t n;
} nlb;

static void nl_sock(nlb *o, const char *name, size_t namelen, bool with_name)
{
	struct nlmsghdr h = {.nlmsg_type = SOCK_DIAG_BY_FAMILY};
	struct unix_diag_msg m = {.udiag_family = AF_UNIX};
	size_t at = o->n, len = NLMSG_LENGTH(sizeof(m));
	o->n += NLMSG_HDRLEN;
	memcpy(o->b + o->n, &m, sizeof(m));
	o->n = at + len;
	if (with_name) {
		struct rtattr ra = {.rta_type = UNIX_DIAG_NAME, .rta_len = RTA_LENGTH(namelen)};
		memcpy(o->b + o->n, &ra, sizeof(ra));
		memcpy(o->b + o->n + RTA_LENGTH(0), name, namelen);
		o->n += RTA_ALIGN(ra.rta_len);
		len = o->n - at;
	}
	h.nlmsg_len = (uint32_t)len;
	memcpy(o->b + at, &h, sizeof(h));
	o->n = at + NLMSG_ALIGN(len);
}

static void nl_done(nlb *o)
{
	struct nlmsghdr h = {.nlmsg_len = NLMSG_LENGTH(4), .nlmsg_type = NLMSG_DONE};
	memcpy(o->b + o->n, &h, sizeof(h));
	o->n += NLMSG_LENGTH(4);
}

static void test_diag(void **state)
{
	nlb o = {0};
	nl_sock(&o, "/run/user/1000/bus", 19, true); /* with its NUL */
	nl_sock(&o, "\0abstract", 9, true);
	nl_sock(&o, NULL, 0, false); /* unnamed */
	nl_sock(&o, "/no/nul", 7, true);
	nl_sock(&o, "rel.sock", 8, true);
	nl_sock(&o, "/bad\nname", 9, true);
	ab_strv out = {0};
	assert_int_equal(ab_unixsock_parse_diag(o.b, o.n, &out), 0); /* more to come */
	assert_int_equal(out.n, 2);
	assert_string_equal(out.v[0], "/run/user/1000/bus");
	assert_string_equal(out.v[1], "/no/nul");
	nl_done(&o);
	ab_strv_free(&out);
	assert_int_equal(ab_unixsock_parse_diag(o.b, o.n, &out), 1);
	ab_strv_free(&out);
	/* a length past the end, an attribute past its message: refused */
	nlb t = o;
	struct nlmsghdr h;
	memcpy(&h, t.b, sizeof(h));
	h.nlmsg_len = (uint32_t)t.n + 4;
	memcpy(t.b, &h, sizeof(h));
	assert_int_equal(ab_unixsock_parse_diag(t.b, t.n, &out), -EPROTO);
	t = o;
	struct rtattr ra;
	memcpy(&ra, t.b + NLMSG_LENGTH(sizeof(struct unix_diag_msg)), sizeof(ra));
	ra.rta_len = 4000;
	memcpy(t.b + NLMSG_LENGTH(sizeof(struct unix_diag_msg)), &ra, sizeof(ra));
	assert_int_equal(ab_unixsock_parse_diag(t.b, t.n, &out), -EPROTO);
	ab_strv_free(&out);
	/* an error message: its error (no unix_diag: ENOENT) */
	nlb e = {0};
	struct nlmsghdr eh = {.nlmsg_len = NLMSG_LENGTH(sizeof(struct nlmsgerr)),
			      .nlmsg_type = NLMSG_ERROR};
	struct nlmsgerr err = {.error = -ENOENT};
	memcpy(e.b, &eh, sizeof(eh));
	memcpy(e.b + NLMSG_HDRLEN, &err, sizeof(err));
	e.n = eh.nlmsg_len;
	assert_int_equal(ab_unixsock_parse_diag(e.b, e.n, &out), -ENOENT);
	/* a trailing partial header is ignored; nothing, no NULL */
	assert_int_equal(ab_unixsock_parse_diag(o.b, 3, &out), 0);
	assert_int_equal(ab_unixsock_parse_diag(NULL, 0, &out), 0);
	assert_int_equal(ab_unixsock_parse_diag(NULL, 1, &out), -EINVAL);
	assert_int_equal(out.n, 0);
}

/* UNIX_DIAG_VFS attributes: the one asked for is found, a short one is
 * skipped, a hostile length refused. */
static void nl_vfs(nlb *o, uint32_t dev, uint32_t ino, size_t vlen)
{
	struct nlmsghdr h = {.nlmsg_type = SOCK_DIAG_BY_FAMILY};
	struct unix_diag_msg m = {.udiag_family = AF_UNIX};
	struct unix_diag_vfs v = {.udiag_vfs_ino = ino, .udiag_vfs_dev = dev};
	size_t at = o->n;
	memcpy(o->b + at + NLMSG_HDRLEN, &m, sizeof(m));
	o->n = at + NLMSG_LENGTH(sizeof(m));
	struct rtattr ra = {.rta_type = UNIX_DIAG_VFS, .rta_len = RTA_LENGTH(vlen)};
	memcpy(o->b + o->n, &ra, sizeof(ra));
	memcpy(o->b + o->n + RTA_LENGTH(0), &v, vlen < sizeof(v) ? vlen : sizeof(v));
	o->n += RTA_ALIGN(ra.rta_len);
	h.nlmsg_len = (uint32_t)(o->n - at);
	memcpy(o->b + at, &h, sizeof(h));
	o->n = at + NLMSG_ALIGN(h.nlmsg_len);
}

static void test_diag_vfs(void **state)
{
	nlb o = {0};
	nl_vfs(&o, 0x800001, 42, sizeof(struct unix_diag_vfs));
	nl_vfs(&o, 0x800001, 43, 4); /* too short: not read */
	nl_sock(&o, "/named", 6, true);
	bool found = false;
	assert_int_equal(ab_unixsock_parse_vfs(o.b, o.n, 0x800001, 42, &found), 0);
	assert_true(found);
	found = false;
	assert_int_equal(ab_unixsock_parse_vfs(o.b, o.n, 0x800001, 43, &found), 0);
	assert_false(found);
	assert_int_equal(ab_unixsock_parse_vfs(o.b, o.n, 0x800002, 42, &found), 0);
	assert_false(found);
	nl_done(&o);
	assert_int_equal(ab_unixsock_parse_vfs(o.b, o.n, 1, 1, &found), 1);
	/* found stays found across datagrams */
	found = true;
	assert_int_equal(ab_unixsock_parse_vfs(o.b, 0, 1, 1, &found), 0);
	assert_true(found);
	nlb t = o;
	struct rtattr ra;
	memcpy(&ra, t.b + NLMSG_LENGTH(sizeof(struct unix_diag_msg)), sizeof(ra));
	ra.rta_len = 4000;
	memcpy(t.b + NLMSG_LENGTH(sizeof(struct unix_diag_msg)), &ra, sizeof(ra));
	assert_int_equal(ab_unixsock_parse_vfs(t.b, t.n, 1, 1, &found), -EPROTO);
	assert_int_equal(ab_unixsock_parse_vfs(NULL, 1, 1, 1, &found), -EINVAL);
}

/* The live question connect mediation asks: is a socket of this namespace
 * bound to the file?  Listening and unconnected datagram sockets are; a
 * closed one, a regular file, another namespace's are not. */
static int not_bound_here(void *arg)
{
	const struct stat *st = arg;
	int d = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
	return d >= 0 && ab_unixsock_bound_in(d, (major(st->st_dev) << 20) | minor(st->st_dev),
					      (uint32_t)st->st_ino) == 0
		       ? 0
		       : 1;
}

static void test_bound_in(void **state)
{
	char dir[] = "/tmp/ab-unixsock-XXXXXX";
	assert_non_null(mkdtemp(dir));
	char sp[64], dp[64], fp[64];
	snprintf(sp, sizeof(sp), "%s/s.sock", dir);
	snprintf(dp, sizeof(dp), "%s/d.sock", dir);
	snprintf(fp, sizeof(fp), "%s/file", dir);
	int ls = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int ds = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", sp);
	assert_int_equal(bind(ls, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(ls, 1), 0);
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", dp);
	assert_int_equal(bind(ds, (struct sockaddr *)&a, sizeof(a)), 0);
	FILE *f = fopen(fp, "w");
	assert_non_null(f);
	fclose(f);
	int diag = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
	assert_true(diag >= 0);
	const char *paths[] = {sp, dp, fp};
	int want[] = {1, 1, 0};
	for (int round = 0; round < 2; round++) /* the socket answers again */
		for (size_t i = 0; i < 3; i++) {
			struct stat st;
			assert_int_equal(stat(paths[i], &st), 0);
			uint32_t dev = (major(st.st_dev) << 20) | minor(st.st_dev);
			assert_int_equal(ab_unixsock_bound_in(diag, dev, (uint32_t)st.st_ino),
					 want[i]);
		}
	struct stat st;
	assert_int_equal(stat(sp, &st), 0);
	close(ls);
	assert_int_equal(ab_unixsock_bound_in(diag, (major(st.st_dev) << 20) | minor(st.st_dev),
					      (uint32_t)st.st_ino),
			 0);
	/* a socket of another network namespace's diagnostics: not bound there */
	ls = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	unlink(sp);
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", sp);
	assert_int_equal(bind(ls, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(ls, 1), 0);
	assert_int_equal(stat(sp, &st), 0);
	int status = unit_in_new_ns(CLONE_NEWNET, not_bound_here, &st);
	assert_true(status == 0 || status == 77);
	close(ls);
	close(ds);
	close(diag);
	unlink(sp);
	unlink(dp);
	unlink(fp);
	rmdir(dir);
}

/* The real listing of this machine parses, and a socket bound here shows. */
static void test_host(void **state)
{
	char dir[] = "/tmp/ab-unixsock-XXXXXX";
	assert_non_null(mkdtemp(dir));
	char real[64], link[64];
	snprintf(real, sizeof(real), "%s/real", dir);
	snprintf(link, sizeof(link), "%s/link", dir);
	assert_int_equal(mkdir(real, 0700), 0);
	assert_int_equal(symlink("real", link), 0);
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	snprintf(a.sun_path, sizeof(a.sun_path), "%s/s.sock", link); /* bound via the link */
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(fd >= 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	ab_strv out = {0};
	ab_err err = {0};
	assert_int_equal(ab_unixsock_host(&out, &err), 0);
	for (size_t i = 0; i < out.n; i++)
		assert_true(out.v[i][0] == '/');
	char want[96];
	assert_true(ab_strv_contains(&out, a.sun_path)); /* as bound */
	snprintf(want, sizeof(want), "%s/s.sock", real);
	assert_true(ab_strv_contains(&out, want)); /* and its real path */
	ab_strv_free(&out);
	/* both listings have it (the /proc one is the fallback) */
	for (int diag = 0; diag <= 1; diag++) {
		assert_int_equal(ab_unixsock_list(diag, &out), 0);
		assert_true(ab_strv_contains(&out, a.sun_path));
		ab_strv_free(&out);
	}
	close(fd);
	/* a socket file whose socket is closed is not listed */
	assert_int_equal(ab_unixsock_host(&out, &err), 0);
	assert_false(ab_strv_contains(&out, want));
	ab_strv_free(&out);
	unlink(want);
	unlink(link);
	rmdir(real);
	rmdir(dir);
}

/* A host with no socket at all (a fresh network namespace: a CI VM had
 * none once its test sockets closed): an empty list, not a failure. */
static int host_empty(void *arg)
{
	(void)arg;
	ab_strv out = {0};
	ab_err err = {0};
	for (int diag = 0; diag <= 1; diag++)
		if (ab_unixsock_list(diag, &out) < 0 || out.n)
			return 1;
	return ab_unixsock_host(&out, &err) == 0 && out.n == 0 ? 0 : 2;
}

static void test_host_empty(void **state)
{
	int st = unit_in_new_ns(CLONE_NEWNET, host_empty, NULL);
	if (st == 77)
		skip();
	assert_int_equal(st, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_listing),    cmocka_unit_test(test_hostile),
		cmocka_unit_test(test_diag),       cmocka_unit_test(test_host),
		cmocka_unit_test(test_host_empty), cmocka_unit_test(test_diag_vfs),
		cmocka_unit_test(test_bound_in),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
