/* SPDX-License-Identifier: MIT */
/*
 * The records bpf/trace.bpf.c writes into its ring buffer, shared by the BPF
 * program and src/observe/trace_event.c, which turns them into audit events.  Plain
 * fixed-width types only (the BPF side has vmlinux.h, not libc).  A record is
 * AB_TEV_HDR_SIZE bytes of header followed by `len` bytes of data: a path
 * (exec, file; no NUL) or the sockaddr as the sandbox passed it (connect).
 * Everything in data, and comm, is chosen by the sandbox: hostile bytes.
 */
#ifndef AGENTBOX_TRACE_EVENT_H
#define AGENTBOX_TRACE_EVENT_H

#define AB_TEV_COMM_LEN 16 /* TASK_COMM_LEN */
#define AB_TEV_DATA_MAX \
	4096                    /* bytes of a path kept (a power of two: the BPF side
				  masks with AB_TEV_DATA_MAX - 1); longer ones are cut */
#define AB_TEV_SOCKADDR_MAX 112 /* bytes of a connect() address kept (sockaddr_un is 110) */

enum ab_tev_kind {
	AB_TEV_EXEC = 1,    /* sched_process_exec: a program started */
	AB_TEV_CONNECT = 2, /* connect(2) returned (any result) */
	AB_TEV_FILE = 3,    /* a file operation failed with EACCES or EPERM */
	AB_TEV_DENIED = 4,  /* the seccomp filter failed a call (the first from its site) */
};

/* AB_TEV_DENIED's data: the call and where it came from */
struct ab_tev_denied {
	__s32 nr; /* the system call's number */
	__u32 pad;
	__u64 ip; /* the caller's instruction pointer */
};

/* Denials are counted per (tid, syscall, call site) in a BPF hash map of this
 * many entries; the first of a site is a record, the rest only counts. */
#define AB_TEV_SITES_MAX 4096

struct ab_tev_site_key {
	__u32 tid; /* inside */
	__s32 nr;
	__u64 ip;
};

struct ab_tev_site {
	__u64 count;
	__u32 pid; /* inside */
	__s32 err; /* the errno the filter answered */
	char comm[AB_TEV_COMM_LEN];
};

enum ab_tev_op {
	AB_TEV_OP_OPEN = 1,   /* open, openat, openat2, creat */
	AB_TEV_OP_EXEC = 2,   /* execve, execveat (the exec was refused) */
	AB_TEV_OP_MKDIR = 3,  /* mkdir, mkdirat */
	AB_TEV_OP_UNLINK = 4, /* unlink, unlinkat, rmdir */
};

#define AB_TEV_F_TRUNCATED 0x1 /* data was cut at AB_TEV_DATA_MAX - 1 bytes */

struct ab_trace_ev {
	__u32 kind;  /* enum ab_tev_kind */
	__u32 pid;   /* thread group id, as seen inside the sandbox */
	__u32 tid;   /* thread id, inside */
	__u32 ppid;  /* exec: the parent's thread group id inside; 0 = outside the sandbox */
	__s32 ret;   /* connect, file: the system call's return value (-errno) */
	__u16 op;    /* file: enum ab_tev_op */
	__u16 flags; /* AB_TEV_F_* */
	__u32 len;   /* bytes of data that follow the header */
	char comm[AB_TEV_COMM_LEN]; /* NUL-padded, not always NUL-terminated */
	__u8 data[AB_TEV_DATA_MAX];
};

#define AB_TEV_HDR_SIZE 44 /* offsetof(struct ab_trace_ev, data) */

/* System call numbers the BPF program recognises at sys_exit.  The C side
 * checks them against <sys/syscall.h> (src/observe/trace_event.c). */
#if defined(__TARGET_ARCH_x86) || defined(__x86_64__)
#define AB_TNR_CONNECT 42
#define AB_TNR_OPEN 2
#define AB_TNR_CREAT 85
#define AB_TNR_OPENAT 257
#define AB_TNR_OPENAT2 437
#define AB_TNR_EXECVE 59
#define AB_TNR_EXECVEAT 322
#define AB_TNR_MKDIR 83
#define AB_TNR_MKDIRAT 258
#define AB_TNR_UNLINK 87
#define AB_TNR_UNLINKAT 263
#define AB_TNR_RMDIR 84
#elif defined(__TARGET_ARCH_arm64) || defined(__aarch64__)
#define AB_TNR_CONNECT 203
#define AB_TNR_OPENAT 56
#define AB_TNR_OPENAT2 437
#define AB_TNR_EXECVE 221
#define AB_TNR_EXECVEAT 281
#define AB_TNR_MKDIRAT 34
#define AB_TNR_UNLINKAT 35
/* no open, creat, mkdir, unlink, rmdir on arm64 */
#else
#error "kernel tracing knows x86_64 and aarch64 only (syscall numbers, registers): port it"
#endif

#endif
