/* SPDX-License-Identifier: MIT */
/*
 * Internals shared by the seccomp files (parent only; see seccomp.c for the
 * policy and the two programs):
 *   seccomp.c         the policy: its tables, syscall names and numbers, the
 *                     profile's lists checked, the errnos of denials, the
 *                     words `explain` shows
 *   seccomp_filter.c  program 1: the policy as libseccomp rules, exported as
 *                     BPF (or PFC text)
 *   seccomp_prog.c    program 2, the hand-written guard; both programs
 *                     compiled, loaded in the child, rendered for `explain`
 */
#ifndef AGENTBOX_SECCOMP_INT_H
#define AGENTBOX_SECCOMP_INT_H

#include <sched.h>
#include <stdbool.h>
#include <stddef.h>

#include "agentbox/seccomp.h"

#if defined(__x86_64__) && !defined(__ILP32__)
#define AB_AUDIT_ARCH AUDIT_ARCH_X86_64
#define AB_X32_SYSCALL_BIT 0x40000000u
#define AB_FOREIGN_ABIS "i386 via int 0x80, x32"
#elif defined(__aarch64__)
#define AB_AUDIT_ARCH AUDIT_ARCH_AARCH64
#define AB_FOREIGN_ABIS "32-bit arm"
#else
#error "the seccomp policy knows x86_64 and aarch64 only (clone's flags argument, syscall numbers): port it"
#endif

#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080
#endif

enum {
	D_ENOSYS = 1 << 0, /* ENOSYS instead of EPERM: user space has a fallback */
	D_RELAX = 1 << 1,  /* the profile's syscalls.allow may drop it */
	D_PROBE = 1 << 2,  /* ordinary programs probe it on every start and cope:
			      recorded, but left out of the exit summary */
};

typedef struct sc_deny_entry {
	const char *name;
	unsigned flags;
} sc_deny_entry;

/* The default deny list (seccomp.c). */
extern const sc_deny_entry sc_deny_table[];
extern const size_t sc_deny_table_n;

/* The CLONE_NEW* flags clone and unshare may not carry; CLONE_NEWTIME last
 * (unshare only). */
typedef struct sc_ns_flag {
	unsigned long flag;
	const char *name;
} sc_ns_flag;
extern const sc_ns_flag sc_ns_flags[];
extern const size_t sc_ns_flags_n;

enum { NR_UNKNOWN = -1, NR_OTHER_ARCH = -2 };

/* Native number, NR_OTHER_ARCH (a syscall, not on this arch) or NR_UNKNOWN. */
int sc_resolve_nr(const char *name);
/* The sc_deny_table entry of NAME, or NULL. */
const sc_deny_entry *sc_find_deny(const char *name);
/* Does the profile re-allow NAME?  Deny always wins over allow. */
bool sc_relaxed(const ab_seccomp_policy *pol, const char *name);
/* Does the table entry E deny (not re-allowed by the profile)? */
bool sc_entry_active(const ab_seccomp_policy *pol, const sc_deny_entry *e);
/* Does the guard restrict personality() (not re-allowed)? */
bool sc_personality_guarded(const ab_seccomp_policy *pol);

/* Program 1 (seccomp_filter.c), POL already validated: the classic BPF
 * libseccomp makes of it (*OUT's filter malloc'd), or its PFC text
 * (*BUF malloc'd, NUL-terminated, *LEN bytes). */
int sc_filter_bpf(const ab_seccomp_policy *pol, struct sock_fprog *out, ab_err *err);
int sc_filter_pfc(const ab_seccomp_policy *pol, char **buf, size_t *len, ab_err *err);

#endif
