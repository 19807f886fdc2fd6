/* SPDX-License-Identifier: MIT */
/*
 * `run --trace`, pure part (parent): one ring-buffer record of
 * bpf/trace.bpf.c -> one audit event (docs/audit.md).  The record's layout is
 * ours, but every byte of comm, paths and addresses was chosen inside the
 * sandbox: lengths are checked against the record, strings are cut at their
 * caps (paths also at a NUL, as the kernel reads them), and invalid UTF-8 and
 * NUL bytes become U+FFFD (a "\u0000" trips C readers); jansson escapes the
 * rest.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/types.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>

#include "agentbox/trace.h"
#include "trace_event.h"

_Static_assert(offsetof(struct ab_trace_ev, data) == AB_TEV_HDR_SIZE, "record header size");
_Static_assert((AB_TEV_DATA_MAX & (AB_TEV_DATA_MAX - 1)) == 0, "a power of two");
_Static_assert(AB_TEV_SOCKADDR_MAX >= sizeof(struct sockaddr_un), "sockaddr_un fits");
/* the numbers the BPF program matches at sys_exit */
_Static_assert(AB_TNR_CONNECT == SYS_connect && AB_TNR_OPENAT == SYS_openat &&
		       AB_TNR_OPENAT2 == SYS_openat2 && AB_TNR_EXECVE == SYS_execve &&
		       AB_TNR_EXECVEAT == SYS_execveat && AB_TNR_MKDIRAT == SYS_mkdirat &&
		       AB_TNR_UNLINKAT == SYS_unlinkat,
	       "syscall numbers");
#ifdef AB_TNR_OPEN
_Static_assert(AB_TNR_OPEN == SYS_open && AB_TNR_CREAT == SYS_creat && AB_TNR_MKDIR == SYS_mkdir &&
		       AB_TNR_UNLINK == SYS_unlink && AB_TNR_RMDIR == SYS_rmdir,
	       "legacy syscall numbers");
#endif

/* Length of the valid UTF-8 sequence at s (n bytes left), 0 if invalid. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
	unsigned char c = s[0];
	size_t len;
	unsigned cp;
	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		len = 2, cp = c & 0x1f;
	else if (c >= 0xe0 && c <= 0xef)
		len = 3, cp = c & 0x0f;
	else if (c >= 0xf0 && c <= 0xf4)
		len = 4, cp = c & 0x07;
	else
		return 0;
	if (len > n)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
	    (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return len;
}

json_t *ab_trace_json_bytes(const void *s, size_t n)
{
	const unsigned char *p = s;
	_cleanup_free_ char *buf = malloc(n * 3 + 1); /* U+FFFD is 3 bytes */
	if (!buf)
		return NULL;
	size_t o = 0;
	for (size_t i = 0; i < n;) {
		size_t l = p[i] ? utf8_len(p + i, n - i) : 0;
		if (l == 0) {
			memcpy(buf + o, "\xef\xbf\xbd", 3);
			o += 3;
			i++;
			continue;
		}
		memcpy(buf + o, p + i, l);
		o += l;
		i += l;
	}
	return json_stringn(buf, o);
}

int ab_trace_sockaddr(const void *sa, size_t len, const char **family, char *addr, size_t addr_size,
		      unsigned *port)
{
	sa_family_t f;
	if (len < sizeof(f) || addr_size < INET6_ADDRSTRLEN + 12)
		return -EINVAL;
	memcpy(&f, sa, sizeof(f));
	*port = 0;
	addr[0] = '\0';
	if (f == AF_INET) {
		struct sockaddr_in in;
		if (len < offsetof(struct sockaddr_in, sin_addr) + sizeof(in.sin_addr))
			return -EINVAL;
		memset(&in, 0, sizeof(in));
		memcpy(&in, sa, len < sizeof(in) ? len : sizeof(in));
		*family = "inet";
		*port = ntohs(in.sin_port);
		return inet_ntop(AF_INET, &in.sin_addr, addr, (socklen_t)addr_size) ? 0 : -EINVAL;
	}
	if (f == AF_INET6) {
		struct sockaddr_in6 in6;
		if (len < offsetof(struct sockaddr_in6, sin6_addr) + sizeof(in6.sin6_addr))
			return -EINVAL;
		memset(&in6, 0, sizeof(in6));
		memcpy(&in6, sa, len < sizeof(in6) ? len : sizeof(in6));
		*family = "inet6";
		*port = ntohs(in6.sin6_port);
		if (!inet_ntop(AF_INET6, &in6.sin6_addr, addr, (socklen_t)addr_size))
			return -EINVAL;
		if (in6.sin6_scope_id) {
			size_t o = strlen(addr);
			snprintf(addr + o, addr_size - o, "%%%u", (unsigned)in6.sin6_scope_id);
		}
		return 0;
	}
	if (f == AF_UNIX) {
		const char *path = (const char *)sa + offsetof(struct sockaddr_un, sun_path);
		size_t n = len - offsetof(struct sockaddr_un, sun_path);
		if (n > sizeof(((struct sockaddr_un *)0)->sun_path))
			n = sizeof(((struct sockaddr_un *)0)->sun_path);
		if (n + 1 > addr_size)
			return -EINVAL;
		*family = "unix";
		if (n > 0 && path[0] == '\0') {
			/* abstract: "@name", each NUL in it shown as '@' too (as ss does) */
			addr[0] = '@';
			for (size_t i = 1; i < n; i++)
				addr[i] = path[i] ? path[i] : '@';
			addr[n] = '\0';
		} else {
			size_t l = strnlen(path, n);
			memcpy(addr, path, l);
			addr[l] = '\0';
		}
		return 0;
	}
	return -EINVAL;
}

/* The name of the errno a negative return value RET carries.  RET comes
 * from the ring buffer: any value, INT_MIN included (negated in 64 bits). */
static const char *errno_name(int32_t ret, char *buf, size_t size)
{
	int64_t e = -(int64_t)ret;
	const char *n = e > 0 && e < 4096 ? strerrorname_np((int)e) : NULL;
	if (n)
		return n;
	snprintf(buf, size, "%lld", (long long)e);
	return buf;
}

static const char *op_name(unsigned op)
{
	switch (op) {
	case AB_TEV_OP_OPEN: return "open";
	case AB_TEV_OP_EXEC: return "exec";
	case AB_TEV_OP_MKDIR: return "mkdir";
	case AB_TEV_OP_UNLINK: return "unlink";
	default: return NULL;
	}
}

/* Adds key -> the bytes as a JSON string; false on ENOMEM. */
static bool set_bytes(json_t *o, const char *key, const void *s, size_t n)
{
	json_t *v = ab_trace_json_bytes(s, n);
	return v && json_object_set_new(o, key, v) == 0;
}

static json_t *file_event(const struct ab_trace_ev *h, const unsigned char *data, const char *op,
			  ab_trace_counts *c)
{
	char eb[16];
	json_t *o = json_object();
	if (!o)
		return NULL;
	bool ok = json_object_set_new(o, "event", json_string("denied")) == 0 &&
		  json_object_set_new(o, "kind", json_string("file")) == 0 &&
		  json_object_set_new(o, "source", json_string("bpf")) == 0 &&
		  json_object_set_new(o, "pid", json_integer(h->pid)) == 0 &&
		  set_bytes(o, "comm", h->comm, strnlen(h->comm, sizeof(h->comm))) &&
		  set_bytes(o, "path", data, strnlen((const char *)data, h->len)) &&
		  json_object_set_new(o, "op", json_string(op)) == 0 &&
		  json_object_set_new(o, "errno",
				      json_string(errno_name(h->ret, eb, sizeof(eb)))) == 0 &&
		  (!(h->flags & AB_TEV_F_TRUNCATED) ||
		   json_object_set_new(o, "truncated", json_true()) == 0);
	if (!ok) {
		json_decref(o);
		return NULL;
	}
	c->file_denied++;
	return o;
}

static json_t *exec_event(const struct ab_trace_ev *h, const unsigned char *data,
			  ab_trace_counts *c)
{
	json_t *o = json_object();
	if (!o)
		return NULL;
	bool ok = json_object_set_new(o, "event", json_string("trace")) == 0 &&
		  json_object_set_new(o, "kind", json_string("exec")) == 0 &&
		  json_object_set_new(o, "pid", json_integer(h->pid)) == 0 &&
		  json_object_set_new(o, "ppid", json_integer(h->ppid)) == 0 &&
		  set_bytes(o, "comm", h->comm, strnlen(h->comm, sizeof(h->comm))) &&
		  set_bytes(o, "path", data, strnlen((const char *)data, h->len)) &&
		  (!(h->flags & AB_TEV_F_TRUNCATED) ||
		   json_object_set_new(o, "truncated", json_true()) == 0);
	if (!ok) {
		json_decref(o);
		return NULL;
	}
	c->execs++;
	return o;
}

static json_t *connect_event(const struct ab_trace_ev *h, const unsigned char *data,
			     ab_trace_counts *c)
{
	const char *family;
	char addr[INET6_ADDRSTRLEN + sizeof(((struct sockaddr_un *)0)->sun_path) + 16];
	unsigned port;
	if (ab_trace_sockaddr(data, h->len, &family, addr, sizeof(addr), &port) < 0)
		return NULL;
	char eb[16];
	json_t *o = json_object();
	if (!o)
		return NULL;
	bool inet = strcmp(family, "unix") != 0;
	bool ok = json_object_set_new(o, "event", json_string("trace")) == 0 &&
		  json_object_set_new(o, "kind", json_string("connect")) == 0 &&
		  json_object_set_new(o, "pid", json_integer(h->pid)) == 0 &&
		  set_bytes(o, "comm", h->comm, strnlen(h->comm, sizeof(h->comm))) &&
		  json_object_set_new(o, "family", json_string(family)) == 0 &&
		  set_bytes(o, "addr", addr, strlen(addr)) &&
		  (!inet || json_object_set_new(o, "port", json_integer(port)) == 0) &&
		  json_object_set_new(o, "ret", json_integer(h->ret)) == 0 &&
		  (h->ret >= 0 ||
		   json_object_set_new(o, "errno",
				       json_string(errno_name(h->ret, eb, sizeof(eb)))) == 0);
	if (!ok) {
		json_decref(o);
		return NULL;
	}
	c->connects++;
	if (h->ret < 0 && h->ret != -EINPROGRESS)
		c->connects_failed++;
	return o;
}

/* The first denied call from a site: the line the supervisor writes without
 * tracing (src/observe/supervise.c), plus "source"; "syscall" is the number here (the
 * caller names it: src/observe/trace.c, with libseccomp's table). */
static json_t *denied_event(const struct ab_trace_ev *h, const unsigned char *data,
			    ab_trace_counts *c)
{
	struct ab_tev_denied d;
	memcpy(&d, data, sizeof(d));
	char ip[24], eb[16];
	snprintf(ip, sizeof(ip), "0x%llx", (unsigned long long)d.ip);
	json_t *o = json_object();
	if (!o)
		return NULL;
	bool ok = json_object_set_new(o, "event", json_string("denied")) == 0 &&
		  json_object_set_new(o, "kind", json_string("syscall")) == 0 &&
		  json_object_set_new(o, "source", json_string("bpf")) == 0 &&
		  json_object_set_new(o, "syscall", json_integer(d.nr)) == 0 &&
		  json_object_set_new(o, "errno",
				      json_string(errno_name(h->ret, eb, sizeof(eb)))) == 0 &&
		  json_object_set_new(o, "pid", json_integer(h->pid)) == 0 &&
		  set_bytes(o, "comm", h->comm, strnlen(h->comm, sizeof(h->comm))) &&
		  json_object_set_new(o, "ip", json_string(ip)) == 0;
	if (!ok) {
		json_decref(o);
		return NULL;
	}
	c->sys_denied++;
	return o;
}

json_t *ab_trace_event_json(const void *rec, size_t len, ab_trace_counts *c)
{
	struct ab_trace_ev h; /* the header only: data stays in rec */
	if (!rec || len < AB_TEV_HDR_SIZE) {
		c->malformed++;
		return NULL;
	}
	memcpy(&h, rec, AB_TEV_HDR_SIZE);
	const unsigned char *data = (const unsigned char *)rec + AB_TEV_HDR_SIZE;
	json_t *o = NULL;
	bool fits = h.len <= len - AB_TEV_HDR_SIZE;
	switch (h.kind) {
	case AB_TEV_EXEC:
		if (fits && h.len < AB_TEV_DATA_MAX)
			o = exec_event(&h, data, c);
		break;
	case AB_TEV_CONNECT:
		if (fits && h.len <= AB_TEV_SOCKADDR_MAX)
			o = connect_event(&h, data, c);
		break;
	case AB_TEV_FILE:
		/* only the two errnos the program records; anything else is not ours */
		if (fits && h.len < AB_TEV_DATA_MAX && op_name(h.op) &&
		    (h.ret == -EACCES || h.ret == -EPERM))
			o = file_event(&h, data, op_name(h.op), c);
		break;
	case AB_TEV_DENIED:
		/* the three errnos the program records */
		if (fits && h.len == sizeof(struct ab_tev_denied) &&
		    (h.ret == -EPERM || h.ret == -EACCES || h.ret == -EAFNOSUPPORT))
			o = denied_event(&h, data, c);
		break;
	default: break;
	}
	if (!o)
		c->malformed++;
	return o;
}
