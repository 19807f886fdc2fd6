/* SPDX-License-Identifier: MIT */
/*
 * `run --trace` (parent): load bpf/trace.bpf.c through its libbpf skeleton,
 * filtered to the sandbox's pid namespace, attach it before the sandbox's init
 * goes on (it waits for MAPS_DONE), and turn ring-buffer records into audit
 * events on the run's event loop (src/observe/trace_event.c does the conversion).
 * Built without tracing (AB_HAVE_TRACE=0: no clang, bpftool or kernel BTF at
 * build time), every entry point says so.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/capability.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "agentbox/audit.h"
#include "agentbox/loop.h"
#include "agentbox/seccomp.h"
#include "agentbox/supervise.h"
#include "agentbox/trace.h"

#ifndef AB_HAVE_TRACE
#define AB_HAVE_TRACE 0
#endif

#define AB_BTF_PATH "/sys/kernel/btf/vmlinux"

#ifndef CAP_PERFMON
#define CAP_PERFMON 38
#endif
#ifndef CAP_BPF
#define CAP_BPF 39
#endif

#if AB_HAVE_TRACE

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/types.h>

#include "trace_event.h"
#include "trace.skel.h"

struct ab_trace {
	struct trace_bpf *skel;
	struct ring_buffer *rb;
	struct ab_audit *audit;
	ab_trace_counts counts;
	ab_sup_bucket file_rate, connect_rate, sys_rate;
	unsigned budget; /* records left in this poll ... */
	bool limited;    /* ... when limited (not in the final drain) */
	bool denials;    /* it records the filter's denials (on_sys_enter attached) */
};

/* libbpf's last warning, for the error message (its log is otherwise silent) */
static char last_libbpf_msg[256];

/* libbpf's callback: its format strings are libbpf's own */
__attribute__((format(printf, 2, 0))) static int libbpf_print(enum libbpf_print_level level,
							      const char *fmt, va_list ap)
{
	static int debug = -1;
	if (debug < 0)
		debug = getenv("AGENTBOX_DEBUG") != NULL;
	if (debug)
		return vfprintf(stderr, fmt, ap);
	if (level == LIBBPF_WARN) {
		char buf[sizeof(last_libbpf_msg)];
		vsnprintf(buf, sizeof(buf), fmt, ap);
		const char *m = strncmp(buf, "libbpf: ", 8) == 0 ? buf + 8 : buf;
		snprintf(last_libbpf_msg, sizeof(last_libbpf_msg), "%s", m);
		size_t n = strlen(last_libbpf_msg);
		while (n && (last_libbpf_msg[n - 1] == '\n' || last_libbpf_msg[n - 1] == ' '))
			last_libbpf_msg[--n] = '\0';
	}
	return 0;
}

static int fail_libbpf(ab_err *err, int e, const char *what)
{
	ab_fail(err, e, "%s", what);
	if (last_libbpf_msg[0])
		ab_err_hint(err, "libbpf: %s (AGENTBOX_DEBUG=1 shows its whole log)",
			    last_libbpf_msg);
	else
		ab_err_hint(err, "AGENTBOX_DEBUG=1 shows libbpf's log");
	return -e;
}

/* One record -> one event, unless its kind is over the rate.  A negative
 * return stops ring_buffer__consume after this record (it is consumed). */
static int on_record(void *ctx, void *data, size_t len)
{
	ab_trace *t = ctx;
	json_t *ev = ab_trace_event_json(data, len, &t->counts);
	if (ev) {
		const char *kind = json_string_value(json_object_get(ev, "kind"));
		bool file = kind && strcmp(kind, "file") == 0;
		if (file && json_integer_value(json_object_get(ev, "pid")) == 1) {
			/* init's creator, opening for a caller: the supervisor
			 * records that caller's denial (supervise_create.c) */
			json_decref(ev);
			goto next;
		}
		bool conn = kind && strcmp(kind, "connect") == 0;
		bool sys = kind && strcmp(kind, "syscall") == 0;
		json_t *nr = sys ? json_object_get(ev, "syscall") : NULL;
		if (json_is_integer(nr)) { /* the number -> its name */
			char name[48];
			ab_seccomp_name((int)json_integer_value(nr), name, sizeof(name));
			json_object_set_new(ev, "syscall", json_string(name));
		}
		if (file)
			ab_audit_count_denial(t->audit, "file",
					      json_string_value(json_object_get(ev, "path")),
					      json_string_value(json_object_get(ev, "comm")), 1);
		uint64_t now = ab_now_ms();
		if (file && !ab_sup_bucket_take(&t->file_rate, now, AB_TRACE_RATE_PER_S,
						AB_TRACE_RATE_BURST)) {
			t->counts.suppressed_file++;
			json_decref(ev);
		} else if (conn && !ab_sup_bucket_take(&t->connect_rate, now, AB_TRACE_RATE_PER_S,
						       AB_TRACE_RATE_BURST)) {
			t->counts.suppressed_connect++;
			json_decref(ev);
		} else if (sys && !ab_sup_bucket_take(&t->sys_rate, now, AB_SUP_RATE_PER_S,
						      AB_SUP_RATE_BURST)) {
			t->counts.suppressed_sys++; /* the supervisor's rate */
			json_decref(ev);
		} else {
			ab_audit_emit(t->audit, ev);
		}
	}
next:
	if (t->limited && --t->budget == 0)
		return -EAGAIN; /* the rest next time: the fd stays readable */
	return 0;
}

static void emit_count(ab_trace *t, const char *event, const char *kind, uint64_t n)
{
	if (!n)
		return;
	json_t *ev = json_object();
	json_object_set_new(ev, "event", json_string(event));
	if (kind)
		json_object_set_new(ev, "kind", json_string(kind));
	json_object_set_new(ev, "count", json_integer((json_int_t)n));
	ab_audit_emit(t->audit, ev);
}

/* Open and load the object; DENIALS: with on_sys_enter and the denial
 * recorder switched on. */
static int open_load(ab_trace *t, const struct stat *st, bool denials)
{
	errno = 0;
	t->skel = trace_bpf__open();
	if (!t->skel)
		return -(errno ? errno : EINVAL);
	t->skel->rodata->pidns_dev = (__u64)st->st_dev;
	t->skel->rodata->pidns_ino = (__u64)st->st_ino;
	t->skel->rodata->record_denials = denials;
	bpf_program__set_autoload(t->skel->progs.on_sys_enter, denials);
	bpf_program__set_autoload(t->skel->progs.on_fork, denials);
	return trace_bpf__load(t->skel);
}

/* The sandbox's init gets its task storage (its children get theirs from
 * on_fork): the mark that says "this task is recorded". */
static int mark_init(ab_trace *t, pid_t init)
{
	int pfd = (int)syscall(SYS_pidfd_open, init, 0);
	if (pfd < 0)
		return -errno;
	__u32 zero = 0;
	int r = bpf_map_update_elem(bpf_map__fd(t->skel->maps.entered), &pfd, &zero, BPF_ANY);
	r = r < 0 ? -errno : 0;
	close(pfd);
	return r;
}

/* At the end: every site's count into the summary, the repeats into the log
 * (as the supervisor does), what the rate or the map kept out as
 * "suppressed". */
static void emit_sites(ab_trace *t)
{
	int fd = bpf_map__fd(t->skel->maps.sites);
	struct ab_tev_site_key k, next, *prev = NULL;
	struct ab_tev_site v;
	char name[48], comm[AB_TEV_COMM_LEN + 1];
	uint64_t suppressed = t->counts.suppressed_sys +
			      __atomic_load_n(&t->skel->bss->sites_full, __ATOMIC_RELAXED);
	for (unsigned n = 0; n < AB_TEV_SITES_MAX && bpf_map_get_next_key(fd, prev, &next) == 0;
	     n++) {
		k = next;
		prev = &k;
		if (bpf_map_lookup_elem(fd, &k, &v) < 0)
			continue;
		ab_seccomp_name(k.nr, name, sizeof(name));
		memcpy(comm, v.comm, AB_TEV_COMM_LEN);
		comm[AB_TEV_COMM_LEN] = '\0';
		ab_audit_count_denial(t->audit, "syscall", name, comm, v.count);
		if (v.count < 2)
			continue;
		json_t *ev = json_object();
		json_object_set_new(ev, "event", json_string("denied-repeat"));
		json_object_set_new(ev, "kind", json_string("syscall"));
		json_object_set_new(ev, "source", json_string("bpf"));
		json_object_set_new(ev, "syscall", json_string(name));
		json_object_set_new(ev, "pid", json_integer(v.pid));
		json_object_set_new(ev, "comm", ab_trace_json_bytes(comm, strlen(comm)));
		json_object_set_new(ev, "count", json_integer((json_int_t)v.count));
		ab_audit_emit(t->audit, ev);
	}
	emit_count(t, "suppressed", "syscall", suppressed);
}

int ab_trace_start(pid_t sandbox_pid, struct ab_audit *audit, bool denials, ab_trace **out,
		   ab_err *err)
{
	char path[64];
	struct stat st;
	snprintf(path, sizeof(path), "/proc/%d/ns/pid", (int)sandbox_pid);
	if (stat(path, &st) < 0)
		return ab_fail(err, errno, "kernel tracing: %s", path);
	ab_trace *t = calloc(1, sizeof(*t));
	if (!t)
		return ab_fail(err, ENOMEM, "kernel tracing");
	t->audit = audit;
	last_libbpf_msg[0] = '\0';
	libbpf_set_print(libbpf_print);
	/* the denial recorder (task storage, sys_enter) is a part a kernel may
	 * refuse: then the supervisor records the denials */
	int r = open_load(t, &st, denials);
	if (r < 0 && denials) {
		trace_bpf__destroy(t->skel);
		t->skel = NULL;
		r = open_load(t, &st, false);
		denials = false;
	}
	if (r < 0 && !t->skel) {
		r = fail_libbpf(err, -r, "kernel tracing: open the BPF object");
		goto fail;
	}
	if (r < 0) {
		r = fail_libbpf(err, -r, "kernel tracing: load the BPF programs");
		goto fail;
	}
	/* without the init's mark, nothing of the sandbox would be recorded:
	 * the supervisor keeps the denials then */
	t->denials = denials && mark_init(t, sandbox_pid) == 0;
	if ((r = trace_bpf__attach(t->skel)) < 0) {
		r = fail_libbpf(err, -r, "kernel tracing: attach the BPF programs");
		goto fail;
	}
	t->rb = ring_buffer__new(bpf_map__fd(t->skel->maps.events), on_record, t, NULL);
	if (!t->rb) {
		r = fail_libbpf(err, errno ? errno : ENOMEM, "kernel tracing: ring buffer");
		goto fail;
	}
	*out = t;
	return 0;
fail:
	ab_trace_free(t);
	return r;
}

int ab_trace_fd(const ab_trace *t)
{
	return t && t->rb ? ring_buffer__epoll_fd(t->rb) : -1;
}

bool ab_trace_records_denials(const ab_trace *t)
{
	return t && t->denials;
}

void ab_trace_poll(ab_trace *t)
{
	if (!t || !t->rb)
		return;
	t->limited = true;
	t->budget = AB_TRACE_POLL_BUDGET;
	(void)ring_buffer__consume(t->rb);
	t->limited = false;
}

void ab_trace_get_counts(const ab_trace *t, ab_trace_counts *out)
{
	memset(out, 0, sizeof(*out));
	if (!t)
		return;
	*out = t->counts;
	if (t->skel && t->skel->bss)
		out->lost = __atomic_load_n(&t->skel->bss->lost, __ATOMIC_RELAXED);
}

void ab_trace_free(ab_trace *t)
{
	if (!t)
		return;
	if (t->rb) {
		/* the sandbox is gone: whatever it did is in the buffer by now */
		t->limited = false;
		(void)ring_buffer__consume(t->rb);
		ab_trace_counts c;
		ab_trace_get_counts(t, &c);
		emit_count(t, "suppressed", "file", c.suppressed_file);
		emit_count(t, "suppressed", "connect", c.suppressed_connect);
		if (t->denials)
			emit_sites(t);
		emit_count(t, "trace-lost", NULL, c.lost + c.malformed);
		ring_buffer__free(t->rb);
	}
	trace_bpf__destroy(t->skel); /* detaches; NULL is fine */
	free(t);
}

#else /* !AB_HAVE_TRACE */

struct ab_trace {
	int unused;
};

int ab_trace_start(pid_t sandbox_pid, struct ab_audit *audit, bool denials, ab_trace **out,
		   ab_err *err)
{
	return ab_fail(err, ENOSYS, AB_TRACE_NEEDS_BUILD);
}

int ab_trace_fd(const ab_trace *t)
{
	return -1;
}

bool ab_trace_records_denials(const ab_trace *t)
{
	return false;
}

void ab_trace_poll(ab_trace *t)
{
}

void ab_trace_get_counts(const ab_trace *t, ab_trace_counts *out)
{
	memset(out, 0, sizeof(*out));
}

void ab_trace_free(ab_trace *t)
{
	free(t);
}

#endif /* AB_HAVE_TRACE */

const char *ab_trace_libbpf_version(void)
{
#if AB_HAVE_TRACE
	return libbpf_version_string();
#else
	return NULL;
#endif
}

/* CAP_SYS_ADMIN stands in for both (kernels before 5.8 have neither). */
int ab_trace_check(ab_err *err)
{
	if (!AB_HAVE_TRACE)
		return ab_fail(err, 0, AB_TRACE_NEEDS_BUILD);
	cap_t caps = cap_get_proc();
	if (!caps)
		return ab_fail(err, errno, "kernel tracing: read this process's capabilities");
	cap_flag_value_t admin = CAP_CLEAR, bpf = CAP_CLEAR, perfmon = CAP_CLEAR;
	(void)cap_get_flag(caps, CAP_SYS_ADMIN, CAP_EFFECTIVE, &admin);
	(void)cap_get_flag(caps, CAP_BPF, CAP_EFFECTIVE, &bpf);
	(void)cap_get_flag(caps, CAP_PERFMON, CAP_EFFECTIVE, &perfmon);
	cap_free(caps);
	bool has_bpf = admin == CAP_SET || bpf == CAP_SET;
	bool has_perfmon = admin == CAP_SET || perfmon == CAP_SET;
	if (!has_bpf || !has_perfmon) {
		ab_fail(err, 0,
			"kernel tracing needs root, or CAP_BPF and CAP_PERFMON: uid %u lacks %s",
			(unsigned)geteuid(),
			!has_bpf && !has_perfmon ? "CAP_BPF and CAP_PERFMON"
			: !has_bpf               ? "CAP_BPF"
						 : "CAP_PERFMON");
		ab_err_hint(err, "run agentbox as root, or use --trace=best-effort to run without "
				 "kernel tracing");
		return -EPERM;
	}
	if (access(AB_BTF_PATH, R_OK) < 0) {
		int e = errno;
		ab_fail(err, e, "kernel tracing needs the kernel's BTF (%s)", AB_BTF_PATH);
		ab_err_hint(err, "use a kernel built with CONFIG_DEBUG_INFO_BTF=y");
		return -e;
	}
	return 0;
}
