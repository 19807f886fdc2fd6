/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for src/kernel/seccomp.c (no privileges needed).
 *
 *  - validation of the profile lists, with the exact messages;
 *  - the default policy exported as text, compared with the golden file
 *    tests/unit/golden/seccomp-default.pfc (x86_64, libseccomp 2.5.4).  After an
 *    intended policy change regenerate it and review the diff:
 *        AB_UPDATE_GOLDEN=1 build/tests/test_seccomp
 *  - behaviour: forked children set no_new_privs, load the compiled programs
 *    and make real calls (bad arguments, so nothing is changed if a call gets
 *    through), reporting errno as their exit status.  Where the unfiltered
 *    result is the same everywhere, the probe is run unfiltered too ("control")
 *    to prove the filter, not the kernel, produced the error.
 */
#include "unit.h"

#include "agentbox/seccomp.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/seccomp.h>
#include <seccomp.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#if defined(__has_include)
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#endif
#endif
#ifndef RUNNING_ON_VALGRIND
#define RUNNING_ON_VALGRIND 0
#endif
/* Valgrind (3.19) does not implement seccomp(2): libseccomp's probe of the
 * kernel fails and no filter can be loaded.  Under valgrind the tests pin
 * libseccomp's API level and skip the forked behaviour probes, so the leak
 * check still covers validation, compilation, export and describe. */

#ifndef AF_VSOCK
#define AF_VSOCK 40
#endif
#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080
#endif

#define GOLDEN_PFC AB_SRCDIR "/tests/unit/golden/seccomp-default.pfc"

extern char **environ;

/* ---- helpers ---- */

static void pol_set(ab_seccomp_policy *p, const char *const *deny, const char *const *allow)
{
	memset(p, 0, sizeof(*p));
	for (size_t i = 0; deny && deny[i]; i++)
		assert_int_equal(ab_strv_push(&p->extra_deny, deny[i]), 0);
	for (size_t i = 0; allow && allow[i]; i++)
		assert_int_equal(ab_strv_push(&p->allow, allow[i]), 0);
}

static void pol_free(ab_seccomp_policy *p)
{
	ab_strv_free(&p->extra_deny);
	ab_strv_free(&p->allow);
}

/* ---- validation ---- */

typedef struct validate_case {
	const char *deny[3];
	const char *allow[3];
	const char *msg; /* NULL: valid */
} validate_case;

// clang-format off
static const validate_case validate_cases[] = {
	{{"getcwd", "ptrace"}, {NULL}, NULL},
	{{"statmount", "file_setattr"}, {NULL}, NULL}, /* newer than libseccomp 2.5.4 */
	{{"socketcall"}, {NULL}, NULL},                /* a syscall, not on this arch */
	{{"clone3", "socket", "ioctl"}, {NULL}, NULL},
	{{"foo"}, {NULL}, "syscalls.deny: unknown syscall \"foo\""},
	{{"getcwd", "listns"}, {NULL}, "syscalls.deny: unknown syscall \"listns\""},
	{{""}, {NULL}, "syscalls.deny: invalid syscall name \"\""},
	{{"Getcwd"}, {NULL}, "syscalls.deny: invalid syscall name \"Getcwd\""},
	{{"get cwd"}, {NULL}, "syscalls.deny: invalid syscall name \"get cwd\""},
	{{"a\x01\"b\\\xff"}, {NULL}, "syscalls.deny: invalid syscall name \"a\\x01\\x22b\\x5c\\xff\""},
	{{"execve"}, {NULL},
	 "syscalls.deny: \"execve\" cannot be denied (the sandbox could not start the command)"},
	{{NULL}, {"perf_event_open", "userfaultfd"}, NULL},
	{{NULL}, {"personality", "kcmp", "process_vm_readv"}, NULL},
	{{NULL}, {"modify_ldt"}, NULL},
	{{"perf_event_open"}, {"perf_event_open"}, NULL}, /* deny wins, silently */
	{{NULL}, {"bpf"}, "syscalls.allow: \"bpf\" cannot be re-allowed"},
	{{NULL}, {"clone3"}, "syscalls.allow: \"clone3\" cannot be re-allowed"},
	{{NULL}, {"fsopen"}, "syscalls.allow: \"fsopen\" cannot be re-allowed"},
	{{NULL}, {"statmount"}, "syscalls.allow: \"statmount\" cannot be re-allowed"},
	{{NULL}, {"io_uring_setup"}, "syscalls.allow: \"io_uring_setup\" cannot be re-allowed"},
	{{NULL}, {"keyctl"}, "syscalls.allow: \"keyctl\" cannot be re-allowed"},
	{{NULL}, {"add_key"}, "syscalls.allow: \"add_key\" cannot be re-allowed"},
	{{NULL}, {"mount"}, "syscalls.allow: \"mount\" cannot be re-allowed"},
	{{NULL}, {"umount"}, "syscalls.allow: \"umount\" cannot be re-allowed"},
	{{NULL}, {"pivot_root"}, "syscalls.allow: \"pivot_root\" cannot be re-allowed"},
	{{NULL}, {"setns"}, "syscalls.allow: \"setns\" cannot be re-allowed"},
	{{NULL}, {"unshare"}, "syscalls.allow: \"unshare\" cannot be re-allowed"},
	{{NULL}, {"clone"}, "syscalls.allow: \"clone\" cannot be re-allowed"},
	{{NULL}, {"socket"}, "syscalls.allow: \"socket\" cannot be re-allowed"},
	{{NULL}, {"ioctl"}, "syscalls.allow: \"ioctl\" cannot be re-allowed"},
	{{NULL}, {"kexec_load"}, "syscalls.allow: \"kexec_load\" cannot be re-allowed"},
	{{NULL}, {"init_module"}, "syscalls.allow: \"init_module\" cannot be re-allowed"},
	{{NULL}, {"read"}, "syscalls.allow: \"read\" is not denied by the default policy"},
	{{NULL}, {"ptrace"}, "syscalls.allow: \"ptrace\" is not denied by the default policy"},
	{{NULL}, {"nope"}, "syscalls.allow: unknown syscall \"nope\""},
};
// clang-format on

static void test_validate_table(void **state)
{
	(void)state;
	for (size_t i = 0; i < AB_ARRAY_SIZE(validate_cases); i++) {
		const validate_case *c = &validate_cases[i];
		ab_seccomp_policy pol;
		ab_err err;
		memset(&err, 0, sizeof(err));
		pol_set(&pol, c->deny, c->allow);
		int r = ab_seccomp_validate(&pol, &err);
		if (!c->msg) {
			if (r != 0)
				fail_msg("case %zu: unexpected error: %s", i, err.msg);
		} else {
			assert_int_equal(r, -EINVAL);
			if (strcmp(err.msg, c->msg) != 0)
				fail_msg("case %zu:\n  got  %s\n  want %s", i, err.msg, c->msg);
		}
		/* Every entry point validates first. */
		ab_seccomp_prog prog;
		ab_strv lines = {NULL, 0};
		int rc = ab_seccomp_compile(&pol, &prog, &err);
		int rd = ab_seccomp_describe(&pol, &lines, &err);
		FILE *devnull = fopen("/dev/null", "we");
		assert_non_null(devnull);
		int re = ab_seccomp_export_pfc(&pol, devnull, &err);
		fclose(devnull);
		assert_int_equal(rc, c->msg ? -EINVAL : 0);
		assert_int_equal(rd, c->msg ? -EINVAL : 0);
		assert_int_equal(re, c->msg ? -EINVAL : 0);
		if (c->msg)
			assert_int_equal(prog.nprogs, 0);
		ab_seccomp_prog_free(&prog);
		ab_strv_free(&lines);
		pol_free(&pol);
	}
}

static void test_validate_hostile(void **state)
{
	(void)state;
	ab_seccomp_policy pol;
	ab_err err;
	pol_set(&pol, NULL, NULL);

	/* A huge name: rejected, and the message stays bounded. */
	char *big = malloc(1 << 20);
	assert_non_null(big);
	memset(big, 'a', (1 << 20) - 1);
	big[(1 << 20) - 1] = '\0';
	assert_int_equal(ab_strv_push(&pol.extra_deny, big), 0);
	free(big);
	assert_int_equal(ab_seccomp_validate(&pol, &err), -EINVAL);
	char want[160];
	snprintf(want, sizeof(want), "syscalls.deny: invalid syscall name \"%.64s...\"",
		 "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa");
	assert_string_equal(err.msg, want);
	assert_true(err.hint[0] != '\0');
	pol_free(&pol);

	/* Too many entries. */
	pol_set(&pol, NULL, NULL);
	for (int i = 0; i < 257; i++)
		assert_int_equal(ab_strv_push(&pol.allow, "kcmp"), 0);
	assert_int_equal(ab_seccomp_validate(&pol, &err), -EINVAL);
	assert_string_equal(err.msg, "syscalls.allow: too many entries (257, at most 256)");
	pol_free(&pol);

	/* The "cannot be re-allowed" hint names what can be. */
	const char *const allow[] = {"bpf", NULL};
	pol_set(&pol, NULL, allow);
	assert_int_equal(ab_seccomp_validate(&pol, &err), -EINVAL);
	assert_non_null(strstr(err.hint, "perf_event_open"));
	assert_non_null(strstr(err.hint, "personality"));
	assert_null(strstr(err.hint, " bpf"));
	pol_free(&pol);
}

/* ---- compiled programs, text forms ---- */

static void test_compile_shapes(void **state)
{
	(void)state;
	ab_seccomp_policy pol;
	ab_seccomp_prog prog;
	ab_err err;
	pol_set(&pol, NULL, NULL);
	assert_int_equal(ab_seccomp_compile(&pol, &prog, &err), 0);
	assert_int_equal(prog.nprogs, 2);
	assert_true(prog.progs[0].len > 10 && prog.progs[0].len <= BPF_MAXINSNS);
	assert_non_null(prog.progs[0].filter);
	assert_true(prog.progs[1].len > 5 && prog.progs[1].len < 32);
	/* The guard starts by checking the architecture. */
	assert_int_equal(prog.progs[1].filter[0].code, BPF_LD | BPF_W | BPF_ABS);
	assert_int_equal(prog.progs[1].filter[0].k, 4);
	ab_seccomp_prog_free(&prog);
	assert_int_equal(prog.nprogs, 0);
	assert_null(prog.progs[0].filter);
	ab_seccomp_prog_free(&prog); /* idempotent */

	pol.disabled = true;
	assert_int_equal(ab_seccomp_compile(&pol, &prog, &err), 0);
	assert_int_equal(prog.nprogs, 0);
	assert_int_equal(ab_seccomp_apply(&prog, NULL, &err), 0); /* nothing to load */
	ab_seccomp_prog_free(&prog);
	pol_free(&pol);
}

static char *export_text(const ab_seccomp_policy *pol, size_t *len)
{
	char *buf = NULL;
	FILE *f = open_memstream(&buf, len);
	assert_non_null(f);
	ab_err err;
	int r = ab_seccomp_export_pfc(pol, f, &err);
	assert_int_equal(fclose(f), 0);
	if (r != 0)
		fail_msg("export: %s", err.msg);
	return buf;
}

static char *read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "re");
	if (!f)
		return NULL;
	char *buf = NULL;
	size_t cap = 0, n = 0;
	for (;;) {
		if (n + 4096 > cap) {
			cap = cap ? cap * 2 : 65536;
			buf = realloc(buf, cap + 1);
			assert_non_null(buf);
		}
		size_t got = fread(buf + n, 1, cap - n, f);
		n += got;
		if (got == 0)
			break;
	}
	fclose(f);
	buf[n] = '\0';
	*len = n;
	return buf;
}

static void report_first_difference(const char *got, const char *want)
{
	size_t line = 1, col = 0;
	const char *g = got, *w = want;
	while (*g && *g == *w) {
		col++;
		if (*g == '\n') {
			line++;
			col = 0;
		}
		g++;
		w++;
	}
	g -= col; /* print whole lines */
	w -= col;
	const char *ge = strchr(g, '\n'), *we = strchr(w, '\n');
	print_error("golden mismatch at line %zu:\n  got:  %.*s\n  want: %.*s\n", line,
		    (int)(ge ? ge - g : (ptrdiff_t)strlen(g)), g,
		    (int)(we ? we - w : (ptrdiff_t)strlen(w)), w);
}

static void test_golden_pfc(void **state)
{
	(void)state;
#if !defined(__x86_64__)
	skip(); /* the golden file is the x86_64 filter */
#endif
	ab_seccomp_policy pol;
	pol_set(&pol, NULL, NULL);
	size_t len = 0;
	char *got = export_text(&pol, &len);
	const char *update = getenv("AB_UPDATE_GOLDEN");
	if (update && strcmp(update, "1") == 0) {
		FILE *f = fopen(GOLDEN_PFC, "we");
		assert_non_null(f);
		assert_int_equal(fwrite(got, 1, len, f), len);
		assert_int_equal(fclose(f), 0);
		print_message("updated %s\n", GOLDEN_PFC);
	}
	size_t wlen = 0;
	char *want = read_file(GOLDEN_PFC, &wlen);
	if (!want)
		fail_msg("cannot read %s (regenerate with AB_UPDATE_GOLDEN=1)", GOLDEN_PFC);
	if (wlen != len || memcmp(got, want, len) != 0) {
		report_first_difference(got, want);
		fail_msg("%s differs from the exported filter; if the change is intended, "
			 "regenerate with AB_UPDATE_GOLDEN=1 and review the diff",
			 GOLDEN_PFC);
	}
	free(got);
	free(want);
	pol_free(&pol);
}

/* Does the line after the first occurrence of AT read WANT (indent aside)? */
static bool next_line_is(const char *text, const char *at, const char *want)
{
	const char *p = strstr(text, at);
	if (!p)
		return false;
	p += strlen(at);
	p += strspn(p, " ");
	return strncmp(p, want, strlen(want)) == 0;
}

static void test_export_variants(void **state)
{
	(void)state;
	ab_seccomp_policy pol;
	const char *const deny[] = {"getcwd", "socket", NULL};
	const char *const allow[] = {"perf_event_open", "personality", NULL};
	pol_set(&pol, deny, allow);
	size_t len;
	char *t = export_text(&pol, &len);
	assert_non_null(strstr(t, "filter for syscall \"getcwd\""));
	assert_null(strstr(t, "filter for syscall \"perf_event_open\""));
	assert_non_null(strstr(t, "filter for syscall \"bpf\""));
	/* socket is denied outright, its family rules are gone; socketpair keeps them. */
	assert_true(next_line_is(t, "if ($syscall == 41)\n", "action ERRNO(1);"));
	assert_true(next_line_is(t, "if ($syscall == 53)\n", "if ($a0.hi32 == 0)"));
	assert_null(strstr(t, "load $a0.lo32")); /* personality no longer guarded */
	free(t);
	pol_free(&pol);

	pol_set(&pol, NULL, NULL);
	pol.disabled = true;
	t = export_text(&pol, &len);
	assert_string_equal(t, "# seccomp disabled (test ablation): no filter is loaded\n");
	free(t);
	pol_free(&pol);
}

/* The record: denying rules become user notifications answered
 * with the same errno; ENOSYS steering stays plain; execs notify. */
static void test_export_notify(void **state)
{
	(void)state;
	ab_seccomp_policy pol;
	const char *const deny[] = {"getcwd", NULL};
	pol_set(&pol, deny, NULL);
	pol.notify_denials = true;
	pol.notify_exec = true;
	size_t len;
	char *t = export_text(&pol, &len);
	assert_true(next_line_is(t, "if ($syscall == 250)\n", "action 0x7fc00000;")); /* keyctl */
	assert_true(next_line_is(t, "if ($syscall == 435)\n", "action ERRNO(38);"));  /* clone3 */
	assert_true(next_line_is(t, "if ($syscall == 59)\n", "action 0x7fc00000;"));  /* execve */
	assert_true(next_line_is(t, "if ($syscall == 322)\n", "action 0x7fc00000;")); /* execveat */
	assert_true(next_line_is(t, "if ($syscall == 79)\n", "action 0x7fc00000;"));  /* getcwd */
	/* every EPERM rule of program 1 notifies (the guard, printed as
	 * comments, keeps its own personality EPERM) */
	assert_null(strstr(t, "  action ERRNO(1);"));
	free(t);
	assert_int_equal(ab_seccomp_deny_errno(&pol, 250), EPERM);
	assert_int_equal(ab_seccomp_deny_errno(&pol, 79), EPERM);
	assert_int_equal(ab_seccomp_deny_errno(&pol, 41), EAFNOSUPPORT); /* socket families */
	assert_int_equal(ab_seccomp_deny_errno(&pol, 435), ENOSYS);
	assert_int_equal(ab_seccomp_deny_errno(&pol, 0), EPERM); /* unknown: fail closed */
	char name[48];
	ab_seccomp_name(250, name, sizeof(name));
	assert_string_equal(name, "keyctl");
	ab_seccomp_name(469, name, sizeof(name));
	assert_string_equal(name, "file_setattr");
	ab_seccomp_name(100000, name, sizeof(name));
	assert_string_equal(name, "syscall_100000");
	pol_free(&pol);

	/* without the record: plain errnos, as the golden file has them */
	pol_set(&pol, NULL, NULL);
	t = export_text(&pol, &len);
	assert_null(strstr(t, "0x7fc00000"));
	free(t);
	pol_free(&pol);
}

/* Rendered credentials files: rename, renameat, renameat2 notify (only
 * then); a rename the profile denies stays a denial, and the supervisor is
 * told which numbers are renames. */
static void test_export_rename(void **state)
{
	(void)state;
	ab_seccomp_policy pol;
	pol_set(&pol, NULL, NULL);
	pol.notify_rename = true;
	size_t len;
	char *t = export_text(&pol, &len);
	assert_true(next_line_is(t, "if ($syscall == 82)\n", "action 0x7fc00000;"));  /* rename */
	assert_true(next_line_is(t, "if ($syscall == 264)\n", "action 0x7fc00000;")); /* renameat */
	assert_true(
		next_line_is(t, "if ($syscall == 316)\n", "action 0x7fc00000;")); /* renameat2 */
	free(t);
	assert_true(ab_seccomp_notifies_rename(&pol, 82));
	assert_true(ab_seccomp_notifies_rename(&pol, 264));
	assert_true(ab_seccomp_notifies_rename(&pol, 316));
	assert_false(ab_seccomp_notifies_rename(&pol, 59));
	assert_false(ab_seccomp_notifies_rename(&pol, -1));
	assert_true(ab_seccomp_listens(&pol));
	pol_free(&pol);
	/* denied by the profile: a denial (EPERM rule), never a rename */
	const char *const deny[] = {"renameat2", NULL};
	pol_set(&pol, deny, NULL);
	pol.notify_rename = true;
	t = export_text(&pol, &len);
	assert_true(next_line_is(t, "if ($syscall == 316)\n", "action ERRNO(1);"));
	assert_true(next_line_is(t, "if ($syscall == 82)\n", "action 0x7fc00000;"));
	free(t);
	assert_false(ab_seccomp_notifies_rename(&pol, 316));
	assert_true(ab_seccomp_notifies_rename(&pol, 82));
	pol_free(&pol);
	/* off: no rule, nothing is a rename, no listener */
	pol_set(&pol, NULL, NULL);
	t = export_text(&pol, &len);
	assert_null(strstr(t, "if ($syscall == 316)"));
	free(t);
	assert_false(ab_seccomp_notifies_rename(&pol, 316));
	assert_false(ab_seccomp_listens(&pol));
	pol_free(&pol);
}

/* Connect mediation: connect notifies (only then); a profile that denies
 * connect keeps it a denial. */
static void test_export_connect(void **state)
{
	(void)state;
	ab_seccomp_policy pol;
	pol_set(&pol, NULL, NULL);
	pol.notify_connect = true;
	size_t len;
	char *t = export_text(&pol, &len);
	assert_true(next_line_is(t, "if ($syscall == 42)\n", "action 0x7fc00000;")); /* connect */
	free(t);
	assert_true(ab_seccomp_notifies_connect(&pol, 42));
	assert_false(ab_seccomp_notifies_connect(&pol, 43));
	assert_false(ab_seccomp_notifies_connect(&pol, -1));
	assert_true(ab_seccomp_listens(&pol));
	pol_free(&pol);
	const char *const deny[] = {"connect", NULL};
	pol_set(&pol, deny, NULL);
	pol.notify_connect = true;
	t = export_text(&pol, &len);
	assert_true(next_line_is(t, "if ($syscall == 42)\n", "action ERRNO(1);"));
	free(t);
	assert_false(ab_seccomp_notifies_connect(&pol, 42));
	pol_free(&pol);
	pol_set(&pol, NULL, NULL);
	t = export_text(&pol, &len);
	assert_null(strstr(t, "if ($syscall == 42)"));
	free(t);
	assert_false(ab_seccomp_notifies_connect(&pol, 42));
	pol_free(&pol);
}

/* run --learn: the five file calls and the execs notify (x86_64 numbers);
 * a call the profile denies stays a denial; without it none notifies */
static void test_export_learn(void **state)
{
	(void)state;
	ab_seccomp_policy pol;
	pol_set(&pol, NULL, NULL);
	pol.notify_learn = true;
	size_t len;
	char *t = export_text(&pol, &len);
	assert_true(next_line_is(t, "if ($syscall == 257)\n", "action 0x7fc00000;")); /* openat */
	assert_true(next_line_is(t, "if ($syscall == 83)\n", "action 0x7fc00000;"));  /* mkdir */
	assert_true(next_line_is(t, "if ($syscall == 59)\n", "action 0x7fc00000;"));  /* execve */
	free(t);
	assert_true(ab_seccomp_notifies_learn(&pol, 257));
	assert_true(ab_seccomp_notifies_learn(&pol, 2));  /* open */
	assert_true(ab_seccomp_notifies_learn(&pol, 85)); /* creat */
	assert_false(ab_seccomp_notifies_learn(&pol, 0)); /* read */
	assert_false(ab_seccomp_notifies_learn(&pol, -1));
	assert_true(ab_seccomp_listens(&pol));
	pol_free(&pol);
	const char *const deny[] = {"mkdir", NULL};
	pol_set(&pol, deny, NULL);
	pol.notify_learn = true;
	t = export_text(&pol, &len);
	assert_true(next_line_is(t, "if ($syscall == 83)\n", "action ERRNO(1);"));
	free(t);
	assert_false(ab_seccomp_notifies_learn(&pol, 83));
	assert_true(ab_seccomp_notifies_learn(&pol, 257));
	pol_free(&pol);
	pol_set(&pol, NULL, NULL);
	assert_false(ab_seccomp_notifies_learn(&pol, 257));
	pol_free(&pol);
}

static bool lines_have(const ab_strv *l, const char *prefix, const char *word)
{
	for (size_t i = 0; i < l->n; i++) {
		if (strncmp(l->v[i], prefix, strlen(prefix)) != 0)
			continue;
		char pat[96];
		snprintf(pat, sizeof(pat), " %s ", word);
		char *padded = ab_asprintf("%s ", l->v[i]);
		bool hit = padded && strstr(padded, pat);
		free(padded);
		if (hit)
			return true;
	}
	return false;
}

static void test_describe(void **state)
{
	(void)state;
	ab_seccomp_policy pol;
	ab_err err;
	ab_strv l = {NULL, 0};
	pol_set(&pol, NULL, NULL);
	assert_int_equal(ab_seccomp_describe(&pol, &l, &err), 0);
	assert_true(lines_have(&l, "EPERM:", "keyctl"));
	assert_true(lines_have(&l, "EPERM:", "bpf"));
	assert_true(lines_have(&l, "EPERM (relaxable", "perf_event_open"));
	assert_true(lines_have(&l, "ENOSYS (user space", "clone3"));
	assert_true(lines_have(&l, "ENOSYS (user space", "open_tree_attr"));
	assert_false(lines_have(&l, "EPERM:", "umount")); /* not on x86_64/aarch64 */
	assert_true(lines_have(&l, "EAFNOSUPPORT:", "AF_UNIX"));
	assert_true(lines_have(&l, "EPERM: personality", "query"));
	assert_true(lines_have(&l, "KILL:", "foreign"));
	ab_strv_free(&l);
	pol_free(&pol);

	const char *const deny[] = {"getcwd", "getcwd", "keyctl", NULL};
	const char *const allow[] = {"perf_event_open", "kcmp", "personality", NULL};
	pol_set(&pol, deny, allow);
	assert_int_equal(ab_seccomp_describe(&pol, &l, &err), 0);
	assert_true(lines_have(&l, "EPERM (profile syscalls.deny):", "getcwd"));
	assert_false(lines_have(&l, "EPERM (profile syscalls.deny):", "keyctl"));
	assert_true(lines_have(&l, "allowed again", "perf_event_open"));
	assert_false(lines_have(&l, "EPERM (relaxable", "perf_event_open"));
	assert_false(lines_have(&l, "EPERM: personality", "query"));
	size_t n = 0;
	for (size_t i = 0; i < l.n; i++)
		if (strstr(l.v[i], "getcwd"))
			n++;
	assert_int_equal(n, 1);
	ab_strv_free(&l);
	pol_free(&pol);

	pol_set(&pol, NULL, NULL);
	pol.disabled = true;
	assert_int_equal(ab_seccomp_describe(&pol, &l, &err), 0);
	assert_int_equal(l.n, 1);
	assert_non_null(strstr(l.v[0], "disabled"));
	ab_strv_free(&l);
	pol_free(&pol);
}

static void test_apply_requires_nnp(void **state)
{
	(void)state;
	if (geteuid() == 0 || RUNNING_ON_VALGRIND)
		skip(); /* CAP_SYS_ADMIN may load filters without no_new_privs */
	ab_seccomp_policy pol;
	ab_seccomp_prog prog;
	ab_err err;
	pol_set(&pol, NULL, NULL);
	assert_int_equal(ab_seccomp_compile(&pol, &prog, &err), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		int r = ab_seccomp_apply(&prog, NULL, &err);
		_exit(r == -EACCES && strstr(err.msg, "load filter 1 of 2") && err.hint[0] ? 0 : 1);
	}
	int st;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	ab_seccomp_prog_free(&prog);
	pol_free(&pol);
}

/* ---- behaviour ---- */

#define ANY INT_MIN /* control: the unfiltered result varies by host */
#define SIG(s) (-(s))
#define E_SETUP 250

typedef int (*probe_fn)(void);

typedef struct probe_case {
	const char *name;
	probe_fn fn;
	int want;    /* exit status (0 or errno), or SIG(n) */
	int control; /* same, unfiltered; ANY: not checked; SKIP_UNLESS_0: skip if not 0 */
} probe_case;
#define SKIP_UNLESS_0 (INT_MIN + 1)

static int ret_errno(long r)
{
	return r < 0 ? errno : 0;
}

/* Fork; the child sets no_new_privs, loads the programs (prog NULL: none,
 * only_guard: just program 2) and exits with the probe's result. */
static int run_probe(const ab_seccomp_prog *prog, bool only_guard, probe_fn fn)
{
	fflush(NULL);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		ab_err err;
		/* cmocka's handlers catch these in the parent; here a signal must
		 * end the child (int 0x80 without IA32 emulation is a SIGSEGV) */
		static const int sigs[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGSYS, SIGABRT};
		for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
			signal(sigs[i], SIG_DFL);
		if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
			_exit(E_SETUP);
		if (prog && only_guard) {
			if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog->progs[1]) != 0)
				_exit(E_SETUP);
		} else if (prog && ab_seccomp_apply(prog, NULL, &err) != 0) {
			_exit(E_SETUP);
		}
		_exit(fn());
	}
	int st;
	while (waitpid(pid, &st, 0) < 0)
		assert_int_equal(errno, EINTR);
	if (WIFSIGNALED(st))
		return SIG(WTERMSIG(st));
	return WIFEXITED(st) ? WEXITSTATUS(st) : E_SETUP;
}

static const char *result_str(int r, char *buf, size_t size)
{
	if (r < 0)
		snprintf(buf, size, "killed by signal %d", -r);
	else if (r == 0)
		snprintf(buf, size, "success");
	else if (r == E_SETUP)
		snprintf(buf, size, "no_new_privs or filter load failed in the child");
	else
		snprintf(buf, size, "%s (%d)", strerror(r), r);
	return buf;
}

static void run_cases(const ab_seccomp_prog *prog, bool only_guard, const probe_case *cases,
		      size_t n)
{
	size_t failures = 0;
	if (RUNNING_ON_VALGRIND) {
		print_message("skip %zu behaviour probes under valgrind (no seccomp(2))\n", n);
		return;
	}
	for (size_t i = 0; i < n; i++) {
		const probe_case *c = &cases[i];
		char b1[96], b2[96];
		if (c->control != ANY) {
			int ctl = run_probe(NULL, false, c->fn);
			if (c->control == SKIP_UNLESS_0 && ctl != 0) {
				print_message("skip %s: unfiltered it gives %s\n", c->name,
					      result_str(ctl, b1, sizeof(b1)));
				continue;
			}
			if (c->control != SKIP_UNLESS_0 && ctl != c->control) {
				print_error("%s: control (unfiltered) gave %s, expected %s\n",
					    c->name, result_str(ctl, b1, sizeof(b1)),
					    result_str(c->control, b2, sizeof(b2)));
				failures++;
				continue;
			}
		}
		int got = run_probe(prog, only_guard, c->fn);
		if (got != c->want) {
			print_error("%s: got %s, expected %s\n", c->name,
				    result_str(got, b1, sizeof(b1)),
				    result_str(c->want, b2, sizeof(b2)));
			failures++;
		}
	}
	if (failures)
		fail_msg("%zu of %zu behaviour probes failed", failures, n);
}

/* The probes: each returns 0 or errno.  Bad arguments wherever the kernel
 * checks them after the filter, so an unfiltered call fails harmlessly; the
 * rest (unshare, add_key to the process keyring, personality) only change the
 * throwaway child. */
static int p_getpid(void)
{
	return getpid() > 0 ? 0 : 1;
}
static int p_keyctl(void)
{
	return ret_errno(syscall(SYS_keyctl, 0 /* GET_KEYRING_ID */, -3, 0));
}
static int p_add_key(void)
{
	return ret_errno(syscall(SYS_add_key, "user", "agentbox-test", "x", 1, -2 /* process */));
}
static int p_request_key(void)
{
	return ret_errno(syscall(SYS_request_key, "user", "agentbox-none", NULL, 0));
}
static int p_unshare_user(void)
{
	return ret_errno(unshare(CLONE_NEWUSER));
}
static int p_unshare_ns(void)
{
	return ret_errno(unshare(CLONE_NEWNS));
}
static int p_unshare_net_files(void)
{
	return ret_errno(unshare(CLONE_NEWNET | CLONE_FILES));
}
static int p_unshare_time(void)
{
	return ret_errno(unshare(CLONE_NEWTIME));
}
static int p_unshare_cgroup(void)
{
	return ret_errno(unshare(CLONE_NEWCGROUP));
}
static int p_unshare_files(void)
{
	return ret_errno(unshare(CLONE_FILES));
}
static int clone_flags(unsigned long flags)
{
	long r = syscall(SYS_clone, flags | SIGCHLD, 0, 0, 0, 0);
	if (r == 0)
		_exit(0);
	if (r > 0) {
		waitpid((pid_t)r, NULL, 0);
		return 0;
	}
	return errno;
}
static int p_clone_user(void)
{
	return clone_flags(CLONE_NEWUSER);
}
static int p_clone_pid(void)
{
	return clone_flags(CLONE_NEWPID);
}
static int p_clone_uts_ipc(void)
{
	return clone_flags(CLONE_NEWUTS | CLONE_NEWIPC);
}
static int p_clone_plain(void)
{
	return clone_flags(0);
}
static int p_clone3(void)
{
	return ret_errno(syscall(SYS_clone3, NULL, 0));
}
static int p_setns(void)
{
	return ret_errno(syscall(SYS_setns, -1, 0));
}
static int p_mount(void)
{
	return ret_errno(syscall(SYS_mount, NULL, NULL, NULL, 0, NULL));
}
static int p_umount2(void)
{
	return ret_errno(syscall(SYS_umount2, "", 0));
}
static int p_pivot_root(void)
{
	return ret_errno(syscall(SYS_pivot_root, "", ""));
}
static int p_chroot(void)
{
	return ret_errno(syscall(SYS_chroot, ""));
}
static int p_fsopen(void)
{
	return ret_errno(syscall(SYS_fsopen, NULL, 0));
}
static int p_open_tree(void)
{
	return ret_errno(syscall(SYS_open_tree, -1, NULL, 0));
}
static int p_statmount(void)
{
	return ret_errno(syscall(457, NULL, NULL, 0, 0));
}
static int p_listmount(void)
{
	return ret_errno(syscall(458, NULL, NULL, 0, 0));
}
static int p_open_tree_attr(void)
{
	return ret_errno(syscall(467, -1, NULL, 0, NULL, 0));
}
static int p_io_uring_setup(void)
{
	return ret_errno(syscall(SYS_io_uring_setup, 0, NULL));
}
static int p_io_uring_enter(void)
{
	return ret_errno(syscall(SYS_io_uring_enter, -1, 0, 0, 0, NULL, 0));
}
static int p_bpf(void)
{
	return ret_errno(syscall(SYS_bpf, -1, NULL, 0));
}
static int p_perf(void)
{
	return ret_errno(syscall(SYS_perf_event_open, NULL, 0, -1, -1, 0));
}
static int p_userfaultfd(void)
{
	return ret_errno(syscall(SYS_userfaultfd, 0));
}
static int p_vm_readv(void)
{
	return ret_errno(syscall(SYS_process_vm_readv, getpid(), NULL, 0, NULL, 0, 0));
}
static int p_kcmp(void)
{
	return ret_errno(syscall(SYS_kcmp, getpid(), getpid(), 0, 0, 0));
}
static int p_pidfd_getfd(void)
{
	return ret_errno(syscall(SYS_pidfd_getfd, -1, 0, 0));
}
static int p_syslog(void)
{
	return ret_errno(syscall(SYS_syslog, 3, NULL, 0));
}
static int p_get_mempolicy(void)
{
	return ret_errno(syscall(SYS_get_mempolicy, NULL, NULL, 0, NULL, 0));
}
static int p_tiocsti(void)
{
	char c = 'x';
	return ret_errno(ioctl(-1, TIOCSTI, &c));
}
static int p_tiocsti_high(void)
{
	char c = 'x';
	return ret_errno(syscall(SYS_ioctl, -1, (unsigned long)TIOCSTI | 0xdead00000000UL, &c));
}
static int p_tioclinux(void)
{
	char c = 2;
	return ret_errno(syscall(SYS_ioctl, -1, (unsigned long)TIOCLINUX | (1UL << 32), &c));
}
static int p_tcgets(void)
{
	char buf[128];
	return ret_errno(ioctl(-1, TCGETS, buf));
}
static int sock(long family, int type)
{
	long fd = syscall(SYS_socket, family, type, 0);
	if (fd >= 0)
		close((int)fd);
	return ret_errno(fd);
}
static int p_sock_vsock(void)
{
	return sock(AF_VSOCK, SOCK_STREAM);
}
static int p_sock_packet(void)
{
	return sock(AF_PACKET, SOCK_DGRAM);
}
static int p_sock_alg(void)
{
	return sock(AF_ALG, SOCK_SEQPACKET);
}
static int p_sock_bluetooth(void)
{
	return sock(AF_BLUETOOTH, SOCK_STREAM);
}
static int p_sock_unspec(void)
{
	return sock(AF_UNSPEC, SOCK_STREAM);
}
static int p_sock_neg(void)
{
	return sock(-1, SOCK_STREAM);
}
static int p_sock_inet_high(void)
{
	return sock(AF_INET | (1L << 32), SOCK_STREAM);
}
static int p_sock_inet(void)
{
	return sock(AF_INET, SOCK_STREAM);
}
static int p_sock_unix(void)
{
	return sock(AF_UNIX, SOCK_STREAM);
}
static int p_sock_netlink(void)
{
	return sock(AF_NETLINK, SOCK_RAW);
}
static int p_socketpair_unix(void)
{
	int sv[2];
	int r = socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv);
	if (r == 0) {
		close(sv[0]);
		close(sv[1]);
	}
	return ret_errno(r);
}
static int p_socketpair_vsock(void)
{
	int sv[2];
	return ret_errno(socketpair(AF_VSOCK, SOCK_STREAM, 0, sv));
}
static int p_future(void)
{
	return ret_errno(syscall(AB_SECCOMP_MAX_KNOWN_NR + 1));
}
static int p_future_far(void)
{
	return ret_errno(syscall(0x3fffffffL));
}
static int p_minus_one(void)
{
	return ret_errno(syscall(-1L));
}
#if defined(__x86_64__)
static int p_x32(void)
{
	return ret_errno(syscall(0x40000000L | SYS_getpid));
}
static int p_int80(void)
{
	long ret;
	__asm__ volatile("int $0x80" : "=a"(ret) : "0"(20L) : "memory", "r8", "r9", "r10", "r11");
	return ret > 0 ? 0 : (int)-ret;
}
#endif
static int persona(unsigned long v)
{
	return ret_errno(syscall(SYS_personality, v));
}
static int p_persona_query(void)
{
	return persona(0xffffffffUL);
}
static int p_persona_linux(void)
{
	return persona(PER_LINUX);
}
static int p_persona_linux32(void)
{
	return persona(PER_LINUX32);
}
static int p_persona_norandom(void)
{
	return persona(PER_LINUX | ADDR_NO_RANDOMIZE);
}
static int p_persona_all_ok(void)
{
	return persona(PER_LINUX32 | UNAME26 | ADDR_NO_RANDOMIZE);
}
static int p_persona_rie(void)
{
	return persona(READ_IMPLIES_EXEC);
}
static int p_persona_bsd(void)
{
	return persona(PER_BSD);
}
static int p_persona_high(void)
{
	return persona(1UL << 32);
} /* the kernel reads 0 */
static int p_persona_high_rie(void)
{
	return persona((1UL << 32) | READ_IMPLIES_EXEC);
}
static int p_getcwd(void)
{
	char buf[PATH_MAX];
	return getcwd(buf, sizeof(buf)) ? 0 : errno;
}
static int p_open(void)
{
	int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno;
	close(fd);
	return 0;
}
static int p_fork(void)
{
	pid_t pid = fork();
	if (pid < 0)
		return errno;
	if (pid == 0)
		_exit(7);
	int st;
	if (waitpid(pid, &st, 0) != pid)
		return errno;
	return WIFEXITED(st) && WEXITSTATUS(st) == 7 ? 0 : 1;
}
static void *thread_fn(void *arg)
{
	return arg;
}
static int p_thread(void)
{
	pthread_t t;
	int r = pthread_create(&t, NULL, thread_fn, (void *)42);
	if (r)
		return r;
	void *out;
	pthread_join(t, &out);
	return out == (void *)42 ? 0 : 1;
}
static int p_posix_spawn(void)
{
	pid_t pid;
	char *argv[] = {(char *)"true", NULL};
	int r = posix_spawn(&pid, "/bin/true", NULL, NULL, argv, environ);
	if (r)
		return r;
	int st;
	if (waitpid(pid, &st, 0) != pid)
		return errno;
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 1;
}
static int p_exec_true(void)
{
	execl("/bin/true", "true", (char *)NULL);
	return errno;
}
static int p_sh_ls(void)
{
	execl("/bin/sh", "sh", "-c", "ls / >/dev/null && cat /proc/self/status >/dev/null",
	      (char *)NULL);
	return errno;
}
/* 0 if /proc/self/status says "Seccomp: 2" and two filters. */
static int p_status(void)
{
	FILE *f = fopen("/proc/self/status", "re");
	if (!f)
		return errno;
	char line[256];
	int mode = -1, filters = -1;
	while (fgets(line, sizeof(line), f)) {
		sscanf(line, "Seccomp: %d", &mode);
		sscanf(line, "Seccomp_filters: %d", &filters);
	}
	fclose(f);
	return mode == 2 && filters == 2 ? 0 : 1;
}

// clang-format off
static const probe_case default_cases[] = {
	{"getpid", p_getpid, 0, 0},
	{"keyctl", p_keyctl, EPERM, ANY},
	{"add_key", p_add_key, EPERM, ANY},
	{"request_key", p_request_key, EPERM, ENOKEY},
	{"unshare(CLONE_NEWUSER)", p_unshare_user, EPERM, ANY},
	{"unshare(CLONE_NEWNS)", p_unshare_ns, EPERM, ANY},
	{"unshare(CLONE_NEWNET|CLONE_FILES)", p_unshare_net_files, EPERM, ANY},
	{"unshare(CLONE_NEWTIME)", p_unshare_time, EPERM, ANY},
	{"unshare(CLONE_NEWCGROUP)", p_unshare_cgroup, EPERM, ANY},
	{"unshare(CLONE_FILES)", p_unshare_files, 0, 0},
	{"clone(CLONE_NEWUSER)", p_clone_user, EPERM, ANY},
	{"clone(CLONE_NEWPID)", p_clone_pid, EPERM, ANY},
	{"clone(CLONE_NEWUTS|CLONE_NEWIPC)", p_clone_uts_ipc, EPERM, ANY},
	{"clone(SIGCHLD)", p_clone_plain, 0, 0},
	{"clone3", p_clone3, ENOSYS, EINVAL},
	{"setns", p_setns, EPERM, EBADF},
	{"mount", p_mount, EPERM, ANY},
	{"umount2", p_umount2, EPERM, ANY},
	{"pivot_root", p_pivot_root, EPERM, ANY},
	{"chroot", p_chroot, EPERM, ENOENT},
	{"fsopen", p_fsopen, ENOSYS, ANY},
	{"open_tree", p_open_tree, ENOSYS, EFAULT},
	{"statmount (raw 457)", p_statmount, ENOSYS, ANY},
	{"listmount (raw 458)", p_listmount, ENOSYS, ANY},
	{"open_tree_attr (raw 467)", p_open_tree_attr, ENOSYS, ANY},
	{"io_uring_setup", p_io_uring_setup, EPERM, EFAULT},
	{"io_uring_enter", p_io_uring_enter, EPERM, EBADF},
	{"bpf", p_bpf, EPERM, ANY},
	{"perf_event_open", p_perf, EPERM, EFAULT},
	{"userfaultfd", p_userfaultfd, EPERM, ANY},
	{"process_vm_readv", p_vm_readv, EPERM, 0},
	{"kcmp", p_kcmp, EPERM, ANY},
	{"pidfd_getfd", p_pidfd_getfd, EPERM, EBADF},
	{"syslog", p_syslog, EPERM, ANY},
	{"get_mempolicy", p_get_mempolicy, EPERM, ANY},
	{"ioctl(-1, TIOCSTI)", p_tiocsti, EPERM, EBADF},
	{"ioctl(-1, TIOCSTI | high bits)", p_tiocsti_high, EPERM, EBADF},
	{"ioctl(-1, TIOCLINUX | high bits)", p_tioclinux, EPERM, EBADF},
	{"ioctl(-1, TCGETS)", p_tcgets, EBADF, EBADF},
	{"socket(AF_VSOCK)", p_sock_vsock, EAFNOSUPPORT, ANY},
	{"socket(AF_PACKET)", p_sock_packet, EAFNOSUPPORT, ANY},
	{"socket(AF_ALG)", p_sock_alg, EAFNOSUPPORT, ANY},
	{"socket(AF_BLUETOOTH)", p_sock_bluetooth, EAFNOSUPPORT, ANY},
	{"socket(AF_UNSPEC)", p_sock_unspec, EAFNOSUPPORT, ANY},
	{"socket(-1)", p_sock_neg, EAFNOSUPPORT, ANY},
	{"socket(AF_INET | 1 << 32)", p_sock_inet_high, EAFNOSUPPORT, 0},
	{"socket(AF_INET)", p_sock_inet, 0, 0},
	{"socket(AF_UNIX)", p_sock_unix, 0, 0},
	{"socket(AF_NETLINK)", p_sock_netlink, 0, 0},
	{"socketpair(AF_UNIX)", p_socketpair_unix, 0, 0},
	{"socketpair(AF_VSOCK)", p_socketpair_vsock, EAFNOSUPPORT, ANY},
	{"syscall(AB_SECCOMP_MAX_KNOWN_NR + 1)", p_future, ENOSYS, ANY},
	{"syscall(0x3fffffff)", p_future_far, ENOSYS, ENOSYS},
	{"syscall(-1) is left to the kernel", p_minus_one, ENOSYS, ENOSYS},
#if defined(__x86_64__)
	{"x32 getpid", p_x32, SIG(SIGSYS), ANY},
	{"int 0x80 getpid", p_int80, SIG(SIGSYS), SKIP_UNLESS_0},
#endif
	{"personality(query)", p_persona_query, 0, 0},
	{"personality(PER_LINUX)", p_persona_linux, 0, 0},
	{"personality(PER_LINUX32)", p_persona_linux32, 0, 0},
	{"personality(ADDR_NO_RANDOMIZE)", p_persona_norandom, 0, 0},
	{"personality(PER_LINUX32|UNAME26|ADDR_NO_RANDOMIZE)", p_persona_all_ok, 0, 0},
	{"personality(1 << 32)", p_persona_high, 0, 0},
	{"personality(READ_IMPLIES_EXEC)", p_persona_rie, EPERM, 0},
	{"personality(1 << 32 | READ_IMPLIES_EXEC)", p_persona_high_rie, EPERM, 0},
	{"personality(PER_BSD)", p_persona_bsd, EPERM, ANY},
	{"getcwd", p_getcwd, 0, 0},
	{"open /dev/null", p_open, 0, 0},
	{"fork", p_fork, 0, 0},
	{"pthread_create (clone3 -> clone fallback)", p_thread, 0, 0},
	{"posix_spawn /bin/true", p_posix_spawn, 0, 0},
	{"exec /bin/true", p_exec_true, 0, 0},
	{"sh -c 'ls /'", p_sh_ls, 0, 0},
	{"/proc/self/status: Seccomp 2, two filters", p_status, 0, ANY},
};
// clang-format on

static int p_openat_suid(void)
{
	return ret_errno(syscall(SYS_openat, AT_FDCWD, "/nonexistent-agentbox/x",
				 O_CREAT | O_WRONLY | O_CLOEXEC, 04755));
}
static int p_openat_plain(void)
{
	return ret_errno(syscall(SYS_openat, AT_FDCWD, "/nonexistent-agentbox/x",
				 O_CREAT | O_WRONLY | O_CLOEXEC, 0755));
}
static int p_mkdirat_sgid(void)
{
	return ret_errno(syscall(SYS_mkdirat, AT_FDCWD, "/nonexistent-agentbox/x", 02755));
}
static int p_fchmod_suid(void)
{
	return ret_errno(syscall(SYS_fchmod, -1, 04755));
}
static int p_openat2_null(void)
{
	return ret_errno(syscall(437 /* openat2 */, AT_FDCWD, NULL, NULL, 0));
}

// clang-format off
static const probe_case setid_cases[] = {
	{"openat O_CREAT 04755", p_openat_suid, EPERM, ENOENT},
	{"openat O_CREAT 0755", p_openat_plain, ENOENT, ENOENT},
	{"mkdirat 02755", p_mkdirat_sgid, EPERM, ENOENT},
	{"fchmod(-1, 04755)", p_fchmod_suid, EPERM, EBADF},
	{"openat2", p_openat2_null, ENOSYS, ANY},
};
static const probe_case setid_unchecked_cases[] = {
	{"openat O_CREAT 04755", p_openat_suid, ENOENT, ENOENT},
	{"mkdirat 02755", p_mkdirat_sgid, ENOENT, ENOENT},
	{"fchmod(-1, 04755)", p_fchmod_suid, EBADF, EBADF},
	{"openat2 reaches the kernel", p_openat2_null, EINVAL, EINVAL},
	{"ioctl(-1, TIOCSTI) still denied", p_tiocsti, EPERM, EBADF},
};
// clang-format on

/* The set-id mode rules, in and out (the plan decides: ab_plan.setid_why),
 * and what they cost: with them, open and openat must run the filter (an
 * argument check); without, the kernel's action cache lets them skip it.
 * ioctl (TIOCSTI), clone/unshare and socket keep their checks either way. */
static void test_setid_rules_and_cache(void **state)
{
	(void)state;
	ab_seccomp_policy pol;
	ab_seccomp_prog prog;
	ab_err err;
	pol_set(&pol, NULL, NULL);
	assert_int_equal(ab_seccomp_compile(&pol, &prog, &err), 0);
	static const int hot[] = {SYS_read,     SYS_write,      SYS_close,      SYS_mmap,
				  SYS_fstat,    SYS_newfstatat, SYS_getdents64, SYS_fcntl,
				  SYS_mprotect, SYS_brk,        SYS_futex,      SYS_lseek};
	static const int checked[] = {SYS_ioctl,  SYS_clone,      SYS_unshare,
				      SYS_socket, SYS_socketpair, SYS_personality};
	static const int modes[] = {SYS_open,     SYS_openat, SYS_creat,   SYS_chmod,  SYS_fchmod,
				    SYS_fchmodat, SYS_mkdir,  SYS_mkdirat, SYS_mknodat};
	for (size_t i = 0; i < AB_ARRAY_SIZE(hot); i++)
		assert_true(ab_seccomp_cached(&prog, hot[i]));
	for (size_t i = 0; i < AB_ARRAY_SIZE(checked); i++)
		assert_false(ab_seccomp_cached(&prog, checked[i]));
	for (size_t i = 0; i < AB_ARRAY_SIZE(modes); i++)
		assert_false(ab_seccomp_cached(&prog, modes[i]));
	assert_false(ab_seccomp_cached(&prog, SYS_bpf)); /* denied */
	assert_false(ab_seccomp_cached(&prog, AB_SECCOMP_MAX_KNOWN_NR + 1));
	run_cases(&prog, false, setid_cases, AB_ARRAY_SIZE(setid_cases));
	ab_seccomp_prog_free(&prog);

	pol.setid_unchecked = true;
	assert_int_equal(ab_seccomp_compile(&pol, &prog, &err), 0);
	for (size_t i = 0; i < AB_ARRAY_SIZE(hot); i++)
		assert_true(ab_seccomp_cached(&prog, hot[i]));
	for (size_t i = 0; i < AB_ARRAY_SIZE(checked); i++)
		assert_false(ab_seccomp_cached(&prog, checked[i]));
	for (size_t i = 0; i < AB_ARRAY_SIZE(modes); i++)
		assert_true(ab_seccomp_cached(&prog, modes[i]));
	assert_true(ab_seccomp_cached(&prog, 437)); /* openat2 */
	run_cases(&prog, false, setid_unchecked_cases, AB_ARRAY_SIZE(setid_unchecked_cases));
	/* the record's notifications are not cached either (every exec notifies) */
	ab_seccomp_prog_free(&prog);
	pol.notify_exec = true;
	assert_int_equal(ab_seccomp_compile(&pol, &prog, &err), 0);
	assert_false(ab_seccomp_cached(&prog, SYS_execve));
	assert_true(ab_seccomp_cached(&prog, SYS_openat));
	ab_seccomp_prog_free(&prog);
	assert_false(ab_seccomp_cached(&prog, SYS_read)); /* nothing loaded */
	pol_free(&pol);

	ab_strv lines = {0};
	pol_set(&pol, NULL, NULL);
	pol.setid_unchecked = true;
	assert_int_equal(ab_seccomp_describe(&pol, &lines, &err), 0);
	for (size_t i = 0; i < lines.n; i++)
		assert_null(strstr(lines.v[i], "set-user-ID"));
	ab_strv_free(&lines);
	pol_free(&pol);
}

static void test_behaviour_default(void **state)
{
	(void)state;
	ab_seccomp_policy pol;
	ab_seccomp_prog prog;
	ab_err err;
	pol_set(&pol, NULL, NULL);
	assert_int_equal(ab_seccomp_compile(&pol, &prog, &err), 0);
	run_cases(&prog, false, default_cases, AB_ARRAY_SIZE(default_cases));
	ab_seccomp_prog_free(&prog);
	pol_free(&pol);
}

// clang-format off
static const probe_case profile_cases[] = {
	{"deny getcwd", p_getcwd, EPERM, 0},
	{"deny socket: even AF_INET", p_sock_inet, EPERM, 0},
	{"deny socket leaves socketpair's rules", p_socketpair_vsock, EAFNOSUPPORT, ANY},
	{"deny ioctl: even TCGETS", p_tcgets, EPERM, EBADF},
	{"deny clone3 keeps ENOSYS", p_clone3, ENOSYS, EINVAL},
	{"allow perf_event_open", p_perf, EFAULT, EFAULT},
	{"allow kcmp", p_kcmp, 0, ANY},
	{"allow personality", p_persona_rie, 0, 0},
	{"still denied: bpf", p_bpf, EPERM, ANY},
	{"still denied: userfaultfd", p_userfaultfd, EPERM, ANY},
	{"deny beats allow: process_vm_readv", p_vm_readv, EPERM, 0},
	{"still works: exec /bin/true", p_exec_true, 0, 0},
};
// clang-format on

static void test_behaviour_profile(void **state)
{
	(void)state;
	const char *const deny[] = {"getcwd", "socket",           "ioctl",
				    "clone3", "process_vm_readv", NULL};
	const char *const allow[] = {"perf_event_open", "kcmp", "personality", "process_vm_readv",
				     NULL};
	ab_seccomp_policy pol;
	ab_seccomp_prog prog;
	ab_err err;
	pol_set(&pol, deny, allow);
	assert_int_equal(ab_seccomp_compile(&pol, &prog, &err), 0);
	run_cases(&prog, false, profile_cases, AB_ARRAY_SIZE(profile_cases));
	ab_seccomp_prog_free(&prog);
	pol_free(&pol);
}

/* Only program 2: it must stand on its own (arch check, x32, personality). */
// clang-format off
static const probe_case guard_cases[] = {
	{"guard: getpid", p_getpid, 0, 0},
	{"guard: keyctl is not its business", p_keyctl, 0, ANY},
	{"guard: future number", p_future, ENOSYS, ANY},
	{"guard: syscall(-1)", p_minus_one, ENOSYS, ENOSYS},
	{"guard: personality(READ_IMPLIES_EXEC)", p_persona_rie, EPERM, 0},
	{"guard: personality(query)", p_persona_query, 0, 0},
#if defined(__x86_64__)
	{"guard: x32 getpid", p_x32, SIG(SIGSYS), ANY},
	{"guard: int 0x80 getpid", p_int80, SIG(SIGSYS), SKIP_UNLESS_0},
#endif
};
// clang-format on

/* The two highest numbers this build knows (file_getattr, file_setattr in
 * 6.17+), with arguments the kernel rejects. */
static int p_max_known(void)
{
	return ret_errno(syscall(AB_SECCOMP_MAX_KNOWN_NR, -1L, 0L, 0L, 0L, 0L));
}
static int p_max_known_minus_1(void)
{
	return ret_errno(syscall(AB_SECCOMP_MAX_KNOWN_NR - 1, -1L, 0L, 0L, 0L, 0L));
}

static void test_behaviour_guard(void **state)
{
	(void)state;
	if (RUNNING_ON_VALGRIND)
		skip(); /* valgrind runs no foreign ABIs and makes its own high syscalls */
	ab_seccomp_policy pol;
	ab_seccomp_prog prog;
	ab_err err;
	pol_set(&pol, NULL, NULL);
	assert_int_equal(ab_seccomp_compile(&pol, &prog, &err), 0);
	run_cases(&prog, true, guard_cases, AB_ARRAY_SIZE(guard_cases));

	/* Prove the "newer than this build" edge with syscalls this kernel has:
	 * lower the limit in the guard by one, then the highest known number
	 * must fail with ENOSYS and the one below it must still reach the kernel. */
	int ctl = run_probe(NULL, false, p_max_known);
	int ctl1 = run_probe(NULL, false, p_max_known_minus_1);
	size_t hits = 0;
	for (size_t i = 0; i < prog.progs[1].len; i++) {
		struct sock_filter *f = &prog.progs[1].filter[i];
		if (f->code == (BPF_JMP | BPF_JGT | BPF_K) && f->k == AB_SECCOMP_MAX_KNOWN_NR) {
			f->k = AB_SECCOMP_MAX_KNOWN_NR - 1;
			hits++;
		}
	}
	assert_int_equal(hits, 1);
	if (ctl == ENOSYS || ctl1 == ENOSYS) {
		print_message("skip the patched-guard edge: kernel older than syscall %d\n",
			      AB_SECCOMP_MAX_KNOWN_NR);
	} else {
		const probe_case patched[] = {
			{"patched guard: highest known -> ENOSYS", p_max_known, ENOSYS, ANY},
			{"patched guard: the one below passes", p_max_known_minus_1, ctl1, ANY},
		};
		run_cases(&prog, true, patched, AB_ARRAY_SIZE(patched));
	}
	ab_seccomp_prog_free(&prog);
	pol_free(&pol);
}

static void test_behaviour_disabled(void **state)
{
	(void)state;
	ab_seccomp_policy pol;
	ab_seccomp_prog prog;
	ab_err err;
	pol_set(&pol, NULL, NULL);
	pol.disabled = true;
	assert_int_equal(ab_seccomp_compile(&pol, &prog, &err), 0);
	assert_int_equal(prog.nprogs, 0);
	/* The ablation really leaves the calls open (the escape battery's
	 * ablation check relies on that). */
	if (RUNNING_ON_VALGRIND) {
		ab_seccomp_prog_free(&prog);
		pol_free(&pol);
		skip();
	}
	assert_int_equal(run_probe(&prog, false, p_tiocsti), EBADF);
	assert_int_equal(run_probe(&prog, false, p_clone3), EINVAL);
	assert_int_not_equal(run_probe(&prog, false, p_status), 0);
	ab_seccomp_prog_free(&prog);
	pol_free(&pol);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_validate_table),
		cmocka_unit_test(test_validate_hostile),
		cmocka_unit_test(test_compile_shapes),
		cmocka_unit_test(test_golden_pfc),
		cmocka_unit_test(test_export_variants),
		cmocka_unit_test(test_export_notify),
		cmocka_unit_test(test_export_rename),
		cmocka_unit_test(test_export_connect),
		cmocka_unit_test(test_describe),
		cmocka_unit_test(test_apply_requires_nnp),
		cmocka_unit_test(test_behaviour_default),
		cmocka_unit_test(test_behaviour_profile),
		cmocka_unit_test(test_behaviour_guard),
		cmocka_unit_test(test_behaviour_disabled),
		cmocka_unit_test(test_setid_rules_and_cache),
		cmocka_unit_test(test_export_learn),
	};
	if (RUNNING_ON_VALGRIND)
		seccomp_api_set(3); /* see above: no kernel probe under valgrind */
	return cmocka_run_group_tests_name("seccomp", tests, NULL, NULL);
}
