// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * `agentbox run --trace`: kernel-side recorder (CO-RE, loaded by src/observe/trace.c).
 *
 * Two BTF tracepoints (tp_btf: raw tracepoints, so no tracefs is needed):
 *   sched_process_exec   a program started                   -> AB_TEV_EXEC
 *   sys_exit             connect(2) returned                 -> AB_TEV_CONNECT
 *                        open/exec/mkdir/unlink family failed
 *                        with EACCES or EPERM (what Landlock,
 *                        the mount flags or DAC refused)     -> AB_TEV_FILE
 *                        a call the seccomp filter failed
 *                        (EPERM, EACCES, EAFNOSUPPORT)        -> AB_TEV_DENIED
 *   sys_enter            (only when denials are recorded) marks the sandbox
 *                        task's call as run: the kernel skips sys_enter for a
 *                        call seccomp refused, but not sys_exit, so a sys_exit
 *                        with no mark is one the filter failed.
 *   sched_process_fork   (idem) a sandbox task's child gets its mark too.
 * The marks live in task storage that only sandbox tasks have (agentbox
 * creates the init's, the fork program each child's): every other task on
 * the machine pays one empty lookup per call, not a pid namespace test.
 * Denials are counted per (thread, syscall, call site) in `sites`; only the
 * first of a site is a record.  With them recorded here, the filter answers
 * them itself: no user notification, no round trip to agentbox per call.
 * Arguments are read at sys_exit from the saved user registers (they are
 * still there; the return value is in its own argument), and the user memory
 * they point to was just read by the kernel.  A sandboxed thread racing to
 * change a path or an address after the call can make the record lie: this is
 * a record, not an enforcement point.
 *
 * Only tasks whose active pid namespace is the sandbox's (dev/ino of
 * /proc/<init>/ns/pid, set in .rodata before load) are recorded; pids are as
 * seen inside.  The sandbox cannot create a nested pid namespace (seccomp).
 * Records go through one ring buffer; a full buffer increments `lost`.
 */
#include "vmlinux.h"

#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "../src/observe/trace_event.h"

#define EPERM 1
#define EACCES 13
#define AF_UNIX 1
#define AF_INET 2
#define AF_INET6 10

char LICENSE[] SEC("license") = "Dual MIT/GPL";

const volatile __u64 pidns_dev = 0;
const volatile __u64 pidns_ino = 0;
const volatile bool record_denials = false; /* on_sys_enter is loaded too */

__u64 lost = 0;       /* records the ring buffer had no room for */
__u64 sites_full = 0; /* denials beyond AB_TEV_SITES_MAX sites: counted only */

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, AB_TEV_SITES_MAX);
	__type(key, struct ab_tev_site_key);
	__type(value, struct ab_tev_site);
} sites SEC(".maps");

/* per sandbox task: 1 between its sys_enter and sys_exit */
struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, __u32);
} entered SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 * 1024);
} events SEC(".maps");

/* one record under construction per CPU (too large for the BPF stack) */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct ab_trace_ev);
} scratch SEC(".maps");

/* The current task's pid and tgid inside the sandbox; false when it is not
 * in the sandbox's pid namespace. */
static __always_inline bool in_sandbox(struct bpf_pidns_info *ns)
{
	return bpf_get_ns_current_pid_tgid(pidns_dev, pidns_ino, ns, sizeof(*ns)) == 0;
}

static __always_inline struct ab_trace_ev *start(__u32 kind, struct bpf_pidns_info *ns)
{
	__u32 zero = 0;
	struct ab_trace_ev *e = bpf_map_lookup_elem(&scratch, &zero);
	if (!e)
		return NULL;
	e->kind = kind;
	e->pid = ns->tgid;
	e->tid = ns->pid;
	e->ppid = 0;
	e->ret = 0;
	e->op = 0;
	e->flags = 0;
	e->len = 0;
	bpf_get_current_comm(e->comm, sizeof(e->comm));
	return e;
}

static __always_inline void submit(struct ab_trace_ev *e)
{
	__u64 size = AB_TEV_HDR_SIZE + (e->len & (AB_TEV_DATA_MAX - 1));
	if (size > sizeof(*e))
		return;
	if (bpf_ringbuf_output(&events, e, size, 0) < 0)
		__sync_fetch_and_add(&lost, 1);
}

/* bpf_probe_read_*_str's result -> len (no NUL) and the truncation flag */
static __always_inline void set_len(struct ab_trace_ev *e, long n)
{
	if (n <= 0) {
		e->len = 0;
		return;
	}
	e->len = (__u32)(n - 1);
	if (n >= AB_TEV_DATA_MAX)
		e->flags |= AB_TEV_F_TRUNCATED;
}

/* The thread group id inside the namespace at `level` (== ns) of task t's
 * group leader; 0 when it is not in that namespace (the sandbox's init's
 * parent is agentbox, outside). */
static __always_inline __u32 tgid_in(struct task_struct *t, unsigned int level,
				     struct pid_namespace *ns)
{
	struct pid *p = BPF_CORE_READ(t, group_leader, thread_pid);
	if (!p || BPF_CORE_READ(p, level) < level)
		return 0;
	struct upid up;
	if (bpf_core_read(&up, sizeof(up), &p->numbers[level]) < 0 || up.ns != ns)
		return 0;
	return (__u32)up.nr;
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(on_exec, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
	struct bpf_pidns_info ns;
	if (!in_sandbox(&ns))
		return 0;
	struct ab_trace_ev *e = start(AB_TEV_EXEC, &ns);
	if (!e)
		return 0;
	struct pid *me = BPF_CORE_READ(p, thread_pid);
	unsigned int level = BPF_CORE_READ(me, level);
	struct upid up;
	if (bpf_core_read(&up, sizeof(up), &me->numbers[level]) == 0)
		e->ppid = tgid_in(BPF_CORE_READ(p, real_parent), level, up.ns);
	const char *fn = BPF_CORE_READ(bprm, filename);
	set_len(e, bpf_probe_read_kernel_str(e->data, AB_TEV_DATA_MAX, fn));
	submit(e);
	return 0;
}

/* A direct (BTF-checked) load, not a helper call: this runs for every
 * system call on the machine. */
static __always_inline long syscall_nr(struct pt_regs *regs)
{
#if defined(__TARGET_ARCH_x86)
	return regs->orig_ax;
#elif defined(__TARGET_ARCH_arm64)
	return regs->syscallno;
#else
#error "port syscall_nr"
#endif
}

/* Which argument holds the path, and what kind of operation it is; -1: not
 * one of ours. */
static __always_inline int file_call(long nr, __u16 *op)
{
	switch (nr) {
#ifdef AB_TNR_OPEN
	case AB_TNR_OPEN:
	case AB_TNR_CREAT: *op = AB_TEV_OP_OPEN; return 0;
	case AB_TNR_MKDIR: *op = AB_TEV_OP_MKDIR; return 0;
	case AB_TNR_UNLINK:
	case AB_TNR_RMDIR: *op = AB_TEV_OP_UNLINK; return 0;
#endif
	case AB_TNR_OPENAT:
	case AB_TNR_OPENAT2: *op = AB_TEV_OP_OPEN; return 1;
	case AB_TNR_EXECVE: *op = AB_TEV_OP_EXEC; return 0;
	case AB_TNR_EXECVEAT: *op = AB_TEV_OP_EXEC; return 1;
	case AB_TNR_MKDIRAT: *op = AB_TEV_OP_MKDIR; return 1;
	case AB_TNR_UNLINKAT: *op = AB_TEV_OP_UNLINK; return 1;
	default: return -1;
	}
}

#define EAFNOSUPPORT 97

SEC("tp_btf/sys_enter")
int BPF_PROG(on_sys_enter, struct pt_regs *regs, long id)
{
	__u32 *m = bpf_task_storage_get(&entered, bpf_get_current_task_btf(), 0, 0);
	if (m)
		*m = 1;
	return 0;
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(on_fork, struct task_struct *parent, struct task_struct *child)
{
	if (bpf_task_storage_get(&entered, parent, 0, 0))
		bpf_task_storage_get(&entered, child, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	return 0;
}

static __always_inline void record_denial(struct bpf_pidns_info *ns, struct pt_regs *regs, long nr,
					  long ret)
{
	struct ab_tev_site_key k = {.tid = ns->pid, .nr = (__s32)nr, .ip = PT_REGS_IP_CORE(regs)};
	struct ab_tev_site *v = bpf_map_lookup_elem(&sites, &k);
	if (v) {
		__sync_fetch_and_add(&v->count, 1);
		return;
	}
	struct ab_tev_site nv = {.count = 1, .pid = ns->tgid, .err = (__s32)-ret};
	bpf_get_current_comm(nv.comm, sizeof(nv.comm));
	if (bpf_map_update_elem(&sites, &k, &nv, BPF_NOEXIST) < 0) {
		v = bpf_map_lookup_elem(&sites, &k); /* another CPU was first, or full */
		if (v)
			__sync_fetch_and_add(&v->count, 1);
		else
			__sync_fetch_and_add(&sites_full, 1);
		return;
	}
	struct ab_trace_ev *e = start(AB_TEV_DENIED, ns);
	if (!e)
		return;
	e->ret = (__s32)ret;
	struct ab_tev_denied d = {.nr = (__s32)nr, .ip = k.ip};
	__builtin_memcpy(e->data, &d, sizeof(d));
	e->len = sizeof(d);
	submit(e);
}

SEC("tp_btf/sys_exit")
int BPF_PROG(on_sys_exit, struct pt_regs *regs, long ret)
{
	long nr = syscall_nr(regs);
	if (record_denials) {
		/* a sandbox task's call clears its mark; a call without one that
		 * failed with the filter's errnos was refused by it */
		__u32 *m = bpf_task_storage_get(&entered, bpf_get_current_task_btf(), 0, 0);
		if (m) {
			bool ran = *m;
			*m = 0;
			struct bpf_pidns_info ns;
			/* connect never runs in the caller: agentbox carries it
			 * out (connect mediation) and its answer is the connect's
			 * own result, recorded as a connect below */
			if (!ran && nr != AB_TNR_CONNECT &&
			    (ret == -EPERM || ret == -EACCES || ret == -EAFNOSUPPORT) &&
			    in_sandbox(&ns)) {
				record_denial(&ns, regs, nr, ret);
				return 0; /* not run: no file or connect record */
			}
		}
	}
	/* cheapest test first: this runs for every system call on the machine */
	bool denied = ret == -EACCES || ret == -EPERM;
	if (!denied && nr != AB_TNR_CONNECT)
		return 0;
	__u16 op = 0;
	int arg = nr == AB_TNR_CONNECT ? -1 : file_call(nr, &op);
	if (nr != AB_TNR_CONNECT && arg < 0)
		return 0;
	struct bpf_pidns_info ns;
	if (!in_sandbox(&ns))
		return 0;
	if (nr == AB_TNR_CONNECT) {
		const void *addr = (const void *)PT_REGS_PARM2_CORE_SYSCALL(regs);
		__u32 alen = (__u32)PT_REGS_PARM3_CORE_SYSCALL(regs);
		__u16 family = 0;
		if (!addr || alen < sizeof(family) ||
		    bpf_probe_read_user(&family, sizeof(family), addr) < 0)
			return 0;
		if (family != AF_INET && family != AF_INET6 && family != AF_UNIX)
			return 0;
		struct ab_trace_ev *e = start(AB_TEV_CONNECT, &ns);
		if (!e)
			return 0;
		e->ret = (__s32)ret;
		if (alen > AB_TEV_SOCKADDR_MAX)
			alen = AB_TEV_SOCKADDR_MAX;
		/* keep the clamped value in a register the verifier tracks */
		asm volatile("%0 &= 0xff" : "+r"(alen));
		if (alen > AB_TEV_SOCKADDR_MAX || bpf_probe_read_user(e->data, alen, addr) < 0)
			return 0;
		e->len = alen;
		submit(e);
		return 0;
	}
	struct ab_trace_ev *e = start(AB_TEV_FILE, &ns);
	if (!e)
		return 0;
	e->ret = (__s32)ret;
	e->op = op;
	const char *path = (const char *)(arg == 0 ? PT_REGS_PARM1_CORE_SYSCALL(regs)
						   : PT_REGS_PARM2_CORE_SYSCALL(regs));
	set_len(e, bpf_probe_read_user_str(e->data, AB_TEV_DATA_MAX, path));
	submit(e);
	return 0;
}
