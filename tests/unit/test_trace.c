/* SPDX-License-Identifier: MIT */
/*
 * trace_event.c: ring-buffer records of bpf/trace.bpf.c -> audit events.
 * Each kind compared as exact JSON; hostile records (lengths past the record
 * or the caps, unknown kinds, ops and errnos, every truncation of a valid
 * record, random bytes); sockaddr formatting for every family and short
 * address; bytes -> JSON strings (invalid UTF-8, overlong, surrogates,
 * control characters).  Pure, no privileges.
 */
#include "unit.h"

#include <arpa/inet.h>
#include <errno.h>
#include <linux/types.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "agentbox/common.h"
#include "agentbox/trace.h"
#include "../../src/observe/trace_event.h"

static struct ab_trace_ev *rec_new(unsigned kind, const char *comm)
{
	struct ab_trace_ev *e = calloc(1, sizeof(*e));
	assert_non_null(e);
	e->kind = kind;
	e->pid = 7;
	e->tid = 8;
	memcpy(e->comm, comm, strnlen(comm, sizeof(e->comm))); /* the rest stays NUL */
	return e;
}

static void rec_data(struct ab_trace_ev *e, const void *d, size_t n)
{
	memcpy(e->data, d, n);
	e->len = (__u32)n;
}

static size_t rec_size(const struct ab_trace_ev *e)
{
	return AB_TEV_HDR_SIZE + e->len;
}

/* The event as compact JSON in insertion order, or "NULL". */
static char *dump(const void *rec, size_t len, ab_trace_counts *c)
{
	json_t *o = ab_trace_event_json(rec, len, c);
	if (!o)
		return strdup("NULL");
	char *s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_ENSURE_ASCII);
	json_decref(o);
	assert_non_null(s);
	return s;
}

static void expect(const struct ab_trace_ev *e, const char *want, ab_trace_counts *c)
{
	char *got = dump(e, rec_size(e), c);
	if (strcmp(got, want) != 0)
		fail_msg("got  %s\nwant %s", got, want);
	free(got);
}

static void test_exec(void **state)
{
	ab_trace_counts c = {0};
	struct ab_trace_ev *e = rec_new(AB_TEV_EXEC, "python3");
	e->ppid = 2;
	rec_data(e, "/usr/bin/python3", 16);
	expect(e,
	       "{\"event\":\"trace\",\"kind\":\"exec\",\"pid\":7,\"ppid\":2,\"comm\":\"python3\","
	       "\"path\":\"/usr/bin/python3\"}",
	       &c);
	assert_int_equal(c.execs, 1);
	e->flags = AB_TEV_F_TRUNCATED;
	e->ppid = 0; /* the parent is outside the sandbox */
	expect(e,
	       "{\"event\":\"trace\",\"kind\":\"exec\",\"pid\":7,\"ppid\":0,\"comm\":\"python3\","
	       "\"path\":\"/usr/bin/python3\",\"truncated\":true}",
	       &c);
	/* a path stops at a NUL, as the kernel reads it */
	rec_data(e, "/bin/a\0/etc/x", 13);
	e->flags = 0;
	expect(e,
	       "{\"event\":\"trace\",\"kind\":\"exec\",\"pid\":7,\"ppid\":0,\"comm\":\"python3\","
	       "\"path\":\"/bin/a\"}",
	       &c);
	/* an empty path is still a record */
	e->len = 0;
	e->flags = 0;
	expect(e,
	       "{\"event\":\"trace\",\"kind\":\"exec\",\"pid\":7,\"ppid\":0,\"comm\":\"python3\","
	       "\"path\":\"\"}",
	       &c);
	assert_int_equal(c.execs, 4);
	assert_int_equal(c.malformed, 0);
	free(e);
}

static void test_file(void **state)
{
	ab_trace_counts c = {0};
	struct ab_trace_ev *e = rec_new(AB_TEV_FILE, "sh");
	e->op = AB_TEV_OP_OPEN;
	e->ret = -EACCES;
	rec_data(e, "/proc/self/comm", 15);
	expect(e,
	       "{\"event\":\"denied\",\"kind\":\"file\",\"source\":\"bpf\",\"pid\":7,\"comm\":\"sh\","
	       "\"path\":\"/proc/self/comm\",\"op\":\"open\",\"errno\":\"EACCES\"}",
	       &c);
	static const struct {
		unsigned op;
		const char *name;
	} ops[] = {
		{AB_TEV_OP_EXEC, "exec"}, {AB_TEV_OP_MKDIR, "mkdir"}, {AB_TEV_OP_UNLINK, "unlink"}};
	for (size_t i = 0; i < AB_ARRAY_SIZE(ops); i++) {
		char want[256];
		e->op = (__u16)ops[i].op;
		e->ret = -EPERM;
		snprintf(
			want, sizeof(want),
			"{\"event\":\"denied\",\"kind\":\"file\",\"source\":\"bpf\",\"pid\":7,"
			"\"comm\":\"sh\",\"path\":\"/proc/self/comm\",\"op\":\"%s\",\"errno\":\"EPERM\"}",
			ops[i].name);
		expect(e, want, &c);
	}
	assert_int_equal(c.file_denied, 4);
	/* not what the program records: another errno, a success, an unknown op */
	e->op = AB_TEV_OP_OPEN;
	e->ret = -ENOENT;
	expect(e, "NULL", &c);
	e->ret = 0;
	expect(e, "NULL", &c);
	e->ret = -EACCES;
	e->op = 0;
	expect(e, "NULL", &c);
	e->op = 99;
	expect(e, "NULL", &c);
	assert_int_equal(c.malformed, 4);
	assert_int_equal(c.file_denied, 4);
	free(e);
}

static void test_denied(void **state)
{
	ab_trace_counts c = {0};
	struct ab_trace_ev *e = rec_new(AB_TEV_DENIED, "python3");
	struct ab_tev_denied d = {.nr = 250, .ip = 0x7f0011223344ULL};
	e->ret = -EPERM;
	rec_data(e, (const char *)&d, sizeof(d));
	/* the number stays a number here: src/observe/trace.c names it */
	expect(e,
	       "{\"event\":\"denied\",\"kind\":\"syscall\",\"source\":\"bpf\",\"syscall\":250,"
	       "\"errno\":\"EPERM\",\"pid\":7,\"comm\":\"python3\",\"ip\":\"0x7f0011223344\"}",
	       &c);
	e->ret = -EAFNOSUPPORT;
	expect(e,
	       "{\"event\":\"denied\",\"kind\":\"syscall\",\"source\":\"bpf\",\"syscall\":250,"
	       "\"errno\":\"EAFNOSUPPORT\",\"pid\":7,\"comm\":\"python3\",\"ip\":\"0x7f0011223344\"}",
	       &c);
	assert_int_equal(c.sys_denied, 2);
	/* not the filter's errnos, or not the record's size */
	e->ret = -ENOSYS;
	expect(e, "NULL", &c);
	e->ret = 0;
	expect(e, "NULL", &c);
	e->ret = -EPERM;
	e->len = sizeof(d) - 1;
	expect(e, "NULL", &c);
	e->len = sizeof(d) + 1;
	expect(e, "NULL", &c);
	assert_int_equal(c.malformed, 4);
	assert_int_equal(c.sys_denied, 2);
	free(e);
}

static void test_connect(void **state)
{
	ab_trace_counts c = {0};
	struct ab_trace_ev *e = rec_new(AB_TEV_CONNECT, "curl");
	struct sockaddr_in in = {.sin_family = AF_INET, .sin_port = htons(9)};
	inet_pton(AF_INET, "127.0.0.1", &in.sin_addr);
	rec_data(e, &in, sizeof(in));
	e->ret = -ECONNREFUSED;
	expect(e,
	       "{\"event\":\"trace\",\"kind\":\"connect\",\"pid\":7,\"comm\":\"curl\","
	       "\"family\":\"inet\",\"addr\":\"127.0.0.1\",\"port\":9,\"ret\":-111,"
	       "\"errno\":\"ECONNREFUSED\"}",
	       &c);
	e->ret = 0; /* success: no errno */
	expect(e,
	       "{\"event\":\"trace\",\"kind\":\"connect\",\"pid\":7,\"comm\":\"curl\","
	       "\"family\":\"inet\",\"addr\":\"127.0.0.1\",\"port\":9,\"ret\":0}",
	       &c);
	e->ret = -EINPROGRESS; /* non-blocking: not a failure */
	expect(e,
	       "{\"event\":\"trace\",\"kind\":\"connect\",\"pid\":7,\"comm\":\"curl\","
	       "\"family\":\"inet\",\"addr\":\"127.0.0.1\",\"port\":9,\"ret\":-115,"
	       "\"errno\":\"EINPROGRESS\"}",
	       &c);
	assert_int_equal(c.connects, 3);
	assert_int_equal(c.connects_failed, 1);

	struct sockaddr_in6 in6 = {
		.sin6_family = AF_INET6, .sin6_port = htons(443), .sin6_scope_id = 3};
	inet_pton(AF_INET6, "fe80::1", &in6.sin6_addr);
	rec_data(e, &in6, sizeof(in6));
	e->ret = -ENETUNREACH;
	expect(e,
	       "{\"event\":\"trace\",\"kind\":\"connect\",\"pid\":7,\"comm\":\"curl\","
	       "\"family\":\"inet6\",\"addr\":\"fe80::1%3\",\"port\":443,\"ret\":-101,"
	       "\"errno\":\"ENETUNREACH\"}",
	       &c);

	struct sockaddr_un un = {.sun_family = AF_UNIX};
	strcpy(un.sun_path, "/run/x.sock");
	rec_data(e, &un, offsetof(struct sockaddr_un, sun_path) + strlen(un.sun_path) + 1);
	e->ret = -ENOENT;
	expect(e,
	       "{\"event\":\"trace\",\"kind\":\"connect\",\"pid\":7,\"comm\":\"curl\","
	       "\"family\":\"unix\",\"addr\":\"/run/x.sock\",\"ret\":-2,\"errno\":\"ENOENT\"}",
	       &c);
	/* abstract, with a NUL inside: '@' for each NUL, as ss shows them */
	memcpy(un.sun_path, "\0ab\0c", 5);
	rec_data(e, &un, offsetof(struct sockaddr_un, sun_path) + 5);
	e->ret = -ECONNREFUSED;
	expect(e,
	       "{\"event\":\"trace\",\"kind\":\"connect\",\"pid\":7,\"comm\":\"curl\","
	       "\"family\":\"unix\",\"addr\":\"@ab@c\",\"ret\":-111,\"errno\":\"ECONNREFUSED\"}",
	       &c);
	/* a full sun_path with no NUL: cut at sun_path's size, never past it */
	memset(un.sun_path, 'a', sizeof(un.sun_path));
	rec_data(e, &un, sizeof(un));
	char *got = dump(e, rec_size(e), &c);
	char want[160];
	memset(want, 'a', sizeof(un.sun_path));
	want[sizeof(un.sun_path)] = '\0';
	assert_non_null(strstr(got, want));
	assert_null(strstr(got, "aaa\\u"));
	free(got);
	/* an unknown errno number is shown as a number */
	rec_data(e, &in, sizeof(in));
	e->ret = -4000;
	expect(e,
	       "{\"event\":\"trace\",\"kind\":\"connect\",\"pid\":7,\"comm\":\"curl\","
	       "\"family\":\"inet\",\"addr\":\"127.0.0.1\",\"port\":9,\"ret\":-4000,"
	       "\"errno\":\"4000\"}",
	       &c);
	/* the most negative value (a hostile or broken record): no overflow */
	e->ret = INT32_MIN;
	expect(e,
	       "{\"event\":\"trace\",\"kind\":\"connect\",\"pid\":7,\"comm\":\"curl\","
	       "\"family\":\"inet\",\"addr\":\"127.0.0.1\",\"port\":9,\"ret\":-2147483648,"
	       "\"errno\":\"2147483648\"}",
	       &c);
	assert_int_equal(c.malformed, 0);
	free(e);
}

static void test_sockaddr(void **state)
{
	char addr[256];
	const char *fam = NULL;
	unsigned port = 1;
	struct sockaddr_in in = {.sin_family = AF_INET, .sin_port = htons(80)};
	inet_pton(AF_INET, "10.1.2.3", &in.sin_addr);
	/* shortest inet address the kernel could have read: family, port, address */
	assert_int_equal(ab_trace_sockaddr(&in, 8, &fam, addr, sizeof(addr), &port), 0);
	assert_string_equal(fam, "inet");
	assert_string_equal(addr, "10.1.2.3");
	assert_int_equal(port, 80);
	assert_int_equal(ab_trace_sockaddr(&in, 7, &fam, addr, sizeof(addr), &port), -EINVAL);
	assert_int_equal(ab_trace_sockaddr(&in, 1, &fam, addr, sizeof(addr), &port), -EINVAL);
	assert_int_equal(ab_trace_sockaddr(&in, 0, &fam, addr, sizeof(addr), &port), -EINVAL);
	struct sockaddr_in6 in6 = {.sin6_family = AF_INET6, .sin6_port = htons(53)};
	inet_pton(AF_INET6, "::1", &in6.sin6_addr);
	assert_int_equal(ab_trace_sockaddr(&in6, 24, &fam, addr, sizeof(addr), &port), 0);
	assert_string_equal(fam, "inet6");
	assert_string_equal(addr, "::1");
	assert_int_equal(port, 53);
	assert_int_equal(ab_trace_sockaddr(&in6, 23, &fam, addr, sizeof(addr), &port), -EINVAL);
	/* unnamed unix address (family only): an empty address */
	sa_family_t f = AF_UNIX;
	assert_int_equal(ab_trace_sockaddr(&f, sizeof(f), &fam, addr, sizeof(addr), &port), 0);
	assert_string_equal(fam, "unix");
	assert_string_equal(addr, "");
	assert_int_equal(port, 0);
	/* other families are not ours */
	f = AF_NETLINK;
	assert_int_equal(ab_trace_sockaddr(&f, sizeof(f), &fam, addr, sizeof(addr), &port),
			 -EINVAL);
	f = AF_UNSPEC;
	assert_int_equal(ab_trace_sockaddr(&f, sizeof(f), &fam, addr, sizeof(addr), &port),
			 -EINVAL);
	/* too small an output buffer is refused, not overrun */
	assert_int_equal(ab_trace_sockaddr(&in, sizeof(in), &fam, addr, 8, &port), -EINVAL);
}

static void test_hostile_records(void **state)
{
	ab_trace_counts c = {0};
	struct ab_trace_ev *e = rec_new(AB_TEV_EXEC, "");
	/* a comm filling all 16 bytes with no NUL: cut at 16, invalid UTF-8 replaced,
	 * control characters escaped by jansson */
	memcpy(e->comm,
	       "\x1b[31m\xff\xfe"
	       "0123456789",
	       16);
	rec_data(e,
		 "/a\nb\xc0\xaf"
		 "c",
		 7);
	expect(e,
	       "{\"event\":\"trace\",\"kind\":\"exec\",\"pid\":7,\"ppid\":0,"
	       "\"comm\":\"\\u001B[31m\\uFFFD\\uFFFD012345678\","
	       "\"path\":\"/a\\nb\\uFFFD\\uFFFDc\"}",
	       &c);
	/* data longer than the record, or than the caps */
	e->len = 8;
	char *got = dump(e, AB_TEV_HDR_SIZE + 7, &c);
	assert_string_equal(got, "NULL");
	free(got);
	e->len = AB_TEV_DATA_MAX;
	got = dump(e, sizeof(*e), &c);
	assert_string_equal(got, "NULL");
	free(got);
	e->len = UINT32_MAX;
	got = dump(e, sizeof(*e), &c);
	assert_string_equal(got, "NULL");
	free(got);
	e->kind = AB_TEV_CONNECT;
	e->len = AB_TEV_SOCKADDR_MAX + 1;
	got = dump(e, sizeof(*e), &c);
	assert_string_equal(got, "NULL");
	free(got);
	/* unknown kinds, short headers, nothing at all */
	e->kind = 0;
	e->len = 0;
	expect(e, "NULL", &c);
	e->kind = 4;
	expect(e, "NULL", &c);
	got = dump(e, AB_TEV_HDR_SIZE - 1, &c);
	assert_string_equal(got, "NULL");
	free(got);
	got = dump(NULL, 0, &c);
	assert_string_equal(got, "NULL");
	free(got);
	assert_int_equal(c.malformed, 8);
	assert_int_equal(c.execs, 1);
	free(e);
}

/* Every prefix of valid records parses as that record or not at all. */
static void test_truncations(void **state)
{
	ab_trace_counts c = {0};
	struct ab_trace_ev *recs[3];
	recs[0] = rec_new(AB_TEV_EXEC, "sh");
	rec_data(recs[0], "/usr/bin/sh", 11);
	recs[1] = rec_new(AB_TEV_FILE, "cat");
	recs[1]->op = AB_TEV_OP_OPEN;
	recs[1]->ret = -EACCES;
	rec_data(recs[1], "/etc/x", 6);
	recs[2] = rec_new(AB_TEV_CONNECT, "nc");
	struct sockaddr_in6 in6 = {.sin6_family = AF_INET6, .sin6_port = htons(1)};
	rec_data(recs[2], &in6, sizeof(in6));
	recs[2]->ret = -EACCES;
	for (size_t r = 0; r < AB_ARRAY_SIZE(recs); r++) {
		size_t full = rec_size(recs[r]);
		for (size_t n = 0; n <= full; n++) {
			/* a copy of exactly n bytes, so ASan sees any read past it */
			unsigned char *copy = malloc(n ? n : 1);
			assert_non_null(copy);
			memcpy(copy, recs[r], n);
			json_t *o = ab_trace_event_json(copy, n, &c);
			assert_true(n == full ? o != NULL : o == NULL);
			json_decref(o);
			free(copy);
		}
		free(recs[r]);
	}
}

/* Random records: never a crash, and anything accepted dumps as JSON. */
static void test_random(void **state)
{
	ab_trace_counts c = {0};
	unsigned seed = 12345;
	unsigned char *buf = malloc(sizeof(struct ab_trace_ev));
	assert_non_null(buf);
	for (int i = 0; i < 20000; i++) {
		size_t n = (size_t)rand_r(&seed) % (AB_TEV_HDR_SIZE + 160);
		for (size_t j = 0; j < n; j++)
			buf[j] = (unsigned char)rand_r(&seed);
		if (n >= 4) { /* a valid kind often enough to reach the parsers */
			__u32 kind = 1 + (__u32)(rand_r(&seed) % 3);
			memcpy(buf, &kind, 4);
		}
		if (n >= 32) {
			__u32 len = (__u32)(rand_r(&seed) % 130);
			memcpy(buf + 24, &len, 4);
			__u16 op = (__u16)(rand_r(&seed) % 5);
			memcpy(buf + 20, &op, 2);
			__s32 ret = rand_r(&seed) % 2 ? -EACCES : -(rand_r(&seed) % 200);
			memcpy(buf + 16, &ret, 4);
		}
		json_t *o = ab_trace_event_json(buf, n, &c);
		if (o) {
			char *s = json_dumps(o, JSON_COMPACT | JSON_ENSURE_ASCII);
			assert_non_null(s);
			free(s);
			json_decref(o);
		}
	}
	assert_true(c.execs + c.connects + c.file_denied > 100);
	assert_true(c.malformed > 100);
	free(buf);
}

static void check_bytes(const char *in, size_t n, const char *want_json)
{
	json_t *s = ab_trace_json_bytes(in, n);
	assert_non_null(s);
	char *got = json_dumps(s, JSON_ENCODE_ANY | JSON_ENSURE_ASCII);
	assert_non_null(got);
	if (strcmp(got, want_json) != 0)
		fail_msg("got %s want %s", got, want_json);
	free(got);
	json_decref(s);
}

static void test_json_bytes(void **state)
{
	check_bytes("", 0, "\"\"");
	check_bytes("plain", 5, "\"plain\"");
	check_bytes("\xc3\xa9", 2, "\"\\u00E9\"");                /* é */
	check_bytes("\xf0\x9f\x98\x80", 4, "\"\\uD83D\\uDE00\""); /* U+1F600 */
	check_bytes("\xf4\x8f\xbf\xbf", 4, "\"\\uDBFF\\uDFFF\""); /* U+10FFFF, the last */
	check_bytes("\xf4\x90\x80\x80", 4, "\"\\uFFFD\\uFFFD\\uFFFD\\uFFFD\""); /* past it */
	check_bytes("\xc0\x80", 2, "\"\\uFFFD\\uFFFD\"");                       /* overlong NUL */
	check_bytes("\xe0\x80\xaf", 3, "\"\\uFFFD\\uFFFD\\uFFFD\"");            /* overlong '/' */
	check_bytes("\xed\xa0\x80", 3, "\"\\uFFFD\\uFFFD\\uFFFD\"");            /* a surrogate */
	check_bytes("\xe2\x82", 2, "\"\\uFFFD\\uFFFD\"");                       /* cut at the end */
	check_bytes("a\x80"
		    "b",
		    3, "\"a\\uFFFDb\"");                          /* lone continuation */
	check_bytes("\x1b]0;x\x07", 6, "\"\\u001B]0;x\\u0007\""); /* escapes stay escapes */
	check_bytes("a\0b", 3, "\"a\\uFFFDb\"");                  /* no NUL for readers */
	/* the worst case: every byte replaced */
	char bad[300];
	memset(bad, 0xff, sizeof(bad));
	json_t *s = ab_trace_json_bytes(bad, sizeof(bad));
	assert_non_null(s);
	assert_int_equal(json_string_length(s), sizeof(bad) * 3);
	json_decref(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_exec),        cmocka_unit_test(test_file),
		cmocka_unit_test(test_denied),      cmocka_unit_test(test_connect),
		cmocka_unit_test(test_sockaddr),    cmocka_unit_test(test_hostile_records),
		cmocka_unit_test(test_truncations), cmocka_unit_test(test_random),
		cmocka_unit_test(test_json_bytes),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
