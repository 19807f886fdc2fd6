/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target (any process; fuzzing only): the `run --trace` record
 * parser (src/observe/trace_event.c), whose records carry bytes chosen inside the
 * sandbox (comm, paths, connect addresses).  Each input is used three ways:
 * as a raw record; framed (a header built from the first 8 bytes with `len`
 * set to what follows, so the fuzzer reaches the path and address parsers
 * without learning the layout); and as a bare sockaddr and a byte string.
 * Properties checked beyond "no crash, no UB":
 *   - an accepted record dumps as JSON that parses back to an object whose
 *     "event" is "trace" or "denied" and whose "kind" matches the record's;
 *   - every prefix of an accepted record shorter than it is refused;
 *   - ab_trace_sockaddr: a family of the three, a NUL-terminated address that
 *     fits, port 0 for unix; an inet/inet6 address parses back;
 *   - ab_trace_json_bytes never fails, never yields a NUL, keeps valid UTF-8
 *     without NUL as is, and at most triples the length.
 */
#include <arpa/inet.h>
#include <linux/types.h>
#include <stdlib.h>
#include <string.h>

#include "agentbox/trace.h"
#include "../../src/observe/trace_event.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct ab_trace_ev framed;

static void check_event(const void *rec, size_t len, unsigned kind)
{
	ab_trace_counts c = {0};
	json_t *o = ab_trace_event_json(rec, len, &c);
	if (!o) {
		if (c.malformed != 1)
			__builtin_trap();
		return;
	}
	char *s = json_dumps(o, JSON_COMPACT | JSON_ENSURE_ASCII);
	json_decref(o);
	if (!s)
		__builtin_trap();
	json_t *back = json_loads(s, 0, NULL);
	free(s);
	if (!json_is_object(back))
		__builtin_trap();
	const char *ev = json_string_value(json_object_get(back, "event"));
	const char *k = json_string_value(json_object_get(back, "kind"));
	if (!ev || !k)
		__builtin_trap();
	bool ok = (kind == AB_TEV_EXEC && !strcmp(ev, "trace") && !strcmp(k, "exec")) ||
		  (kind == AB_TEV_CONNECT && !strcmp(ev, "trace") && !strcmp(k, "connect")) ||
		  (kind == AB_TEV_FILE && !strcmp(ev, "denied") && !strcmp(k, "file")) ||
		  (kind == AB_TEV_DENIED && !strcmp(ev, "denied") && !strcmp(k, "syscall") &&
		   json_is_integer(json_object_get(back, "syscall")));
	if (!ok || c.malformed || c.execs + c.connects + c.file_denied + c.sys_denied != 1)
		__builtin_trap();
	json_decref(back);
	/* the record's own length is the only one that parses */
	struct ab_trace_ev h;
	memcpy(&h, rec, AB_TEV_HDR_SIZE);
	if (len > AB_TEV_HDR_SIZE + h.len)
		return; /* trailing bytes are tolerated */
	for (size_t n = 0; n < len; n += 1 + n / 8) {
		json_t *p = ab_trace_event_json(rec, n, &c);
		if (p)
			__builtin_trap();
	}
}

static void check_sockaddr(const uint8_t *data, size_t size)
{
	char addr[256];
	const char *fam = NULL;
	unsigned port = 12345;
	if (ab_trace_sockaddr(data, size, &fam, addr, sizeof(addr), &port) < 0)
		return;
	if (strnlen(addr, sizeof(addr)) == sizeof(addr) || port > 65535)
		__builtin_trap();
	unsigned char bin[16];
	if (!strcmp(fam, "inet")) {
		if (inet_pton(AF_INET, addr, bin) != 1)
			__builtin_trap();
	} else if (!strcmp(fam, "inet6")) {
		char copy[256];
		strcpy(copy, addr);
		char *pct = strchr(copy, '%');
		if (pct)
			*pct = '\0';
		if (inet_pton(AF_INET6, copy, bin) != 1)
			__builtin_trap();
	} else if (!strcmp(fam, "unix")) {
		if (port != 0 || strlen(addr) > 108)
			__builtin_trap();
	} else {
		__builtin_trap();
	}
}

static void check_bytes(const uint8_t *data, size_t size)
{
	json_t *s = ab_trace_json_bytes(data, size);
	if (!s || json_string_length(s) > size * 3 ||
	    strlen(json_string_value(s)) != json_string_length(s))
		__builtin_trap();
	json_t *direct = memchr(data, 0, size) ? NULL : json_stringn((const char *)data, size);
	if (direct &&
	    (json_string_length(direct) != size || memcmp(json_string_value(s), data, size) != 0))
		__builtin_trap();
	json_decref(direct);
	json_decref(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* raw */
	unsigned char *raw = malloc(size ? size : 1);
	if (!raw)
		return 0;
	memcpy(raw, data, size);
	if (size >= 4) {
		__u32 kind;
		memcpy(&kind, raw, 4);
		check_event(raw, size, kind);
	} else {
		check_event(raw, size, 0);
	}
	free(raw);
	/* framed: kind, op, ret from the first bytes; the rest is the data */
	if (size >= 8 && size - 8 <= AB_TEV_DATA_MAX) {
		memset(&framed, 0, AB_TEV_HDR_SIZE);
		framed.kind = 1 + data[0] % 4;
		framed.op = data[1] % 6;
		framed.flags = data[2] & 1;
		framed.ret = data[3] & 1   ? -13
			     : data[3] & 2 ? -1
			     : data[3] & 4 ? -97
					   : -(int)data[4];
		framed.pid = data[5];
		framed.ppid = data[6];
		memcpy(framed.comm, data + 8, size - 8 < 16 ? size - 8 : 16);
		framed.len = (__u32)(size - 8);
		memcpy(framed.data, data + 8, size - 8);
		size_t len = AB_TEV_HDR_SIZE + framed.len;
		unsigned char *rec = malloc(len);
		if (rec) {
			memcpy(rec, &framed, len);
			check_event(rec, len, framed.kind);
			free(rec);
		}
	}
	check_sockaddr(data, size);
	check_bytes(data, size);
	return 0;
}
