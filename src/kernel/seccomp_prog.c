/* SPDX-License-Identifier: MIT */
/*
 * The compiled seccomp programs (ab_seccomp_prog; seccomp.c describes both):
 * program 2, the hand-written guard, assembled here; both programs compiled
 * (parent, after clone), loaded (child, the last step before exec, without
 * allocating), and rendered for `explain --seccomp` (libseccomp's PFC text,
 * then a disassembly of the guard).
 */
#include "agentbox/seccomp.h"
#include "seccomp_int.h"

#include <errno.h>
#include <linux/audit.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/personality.h>
#include <sys/syscall.h>
#include <unistd.h>

/* personality(2) takes an unsigned int: compare the low half of argument 0. */
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define AB_ARG0_LO ((uint32_t)offsetof(struct seccomp_data, args))
#else
#define AB_ARG0_LO ((uint32_t)offsetof(struct seccomp_data, args) + 4u)
#endif

/* The values personality() may set, besides the 0xffffffff query. */
#define AB_PERSONA_OK_BITS ((uint32_t)(PER_LINUX32 | UNAME26 | ADDR_NO_RANDOMIZE))

/* ---- program 2: the guard, a tiny assembler with forward labels ---- */

enum { L_NEXT = -1, L_ALLOW, L_ENOSYS, L_EPERM, L_KILL, L_PERSONA, L_COUNT };
#define GUARD_MAX 24

typedef struct guard_asm {
	struct sock_filter f[GUARD_MAX];
	signed char jt[GUARD_MAX], jf[GUARD_MAX]; /* label ids or L_NEXT */
	int at[L_COUNT];                          /* where each label sits, -1 unset */
	size_t n;
	bool overflow;
} guard_asm;

static void g_emit(guard_asm *a, uint16_t code, uint32_t k, int jt, int jf)
{
	if (a->n >= GUARD_MAX) {
		a->overflow = true;
		return;
	}
	a->f[a->n] = (struct sock_filter){code, 0, 0, k};
	a->jt[a->n] = (signed char)jt;
	a->jf[a->n] = (signed char)jf;
	a->n++;
}

static void g_label(guard_asm *a, int label)
{
	a->at[label] = (int)a->n;
}

static int g_link(guard_asm *a)
{
	if (a->overflow)
		return -E2BIG;
	for (size_t i = 0; i < a->n; i++) {
		if (BPF_CLASS(a->f[i].code) != BPF_JMP)
			continue;
		int labels[2] = {a->jt[i], a->jf[i]};
		for (int j = 0; j < 2; j++) {
			int target = labels[j] == L_NEXT ? (int)i + 1 : a->at[labels[j]];
			int off = target - (int)i - 1;
			if (target < 0 || off < 0 || off > 255)
				return -EINVAL;
			if (j == 0)
				a->f[i].jt = (uint8_t)off;
			else
				a->f[i].jf = (uint8_t)off;
		}
	}
	return 0;
}

#define LD_ABS (BPF_LD | BPF_W | BPF_ABS)
#define JEQ (BPF_JMP | BPF_JEQ | BPF_K)
#define JGE (BPF_JMP | BPF_JGE | BPF_K)
#define JGT (BPF_JMP | BPF_JGT | BPF_K)
#define AND (BPF_ALU | BPF_AND | BPF_K)
#define RET (BPF_RET | BPF_K)

static void guard_emit(guard_asm *a, bool persona)
{
	g_emit(a, LD_ABS, offsetof(struct seccomp_data, arch), L_NEXT, L_NEXT);
	g_emit(a, JEQ, AB_AUDIT_ARCH, L_NEXT, L_KILL);
	g_emit(a, LD_ABS, offsetof(struct seccomp_data, nr), L_NEXT, L_NEXT);
	/* -1 is how a tracer skips a syscall: leave it to the kernel, as
	 * libseccomp does, so strace/gdb syscall injection keeps working. */
	g_emit(a, JEQ, 0xffffffffu, L_ALLOW, L_NEXT);
#ifdef AB_X32_SYSCALL_BIT
	g_emit(a, JGE, AB_X32_SYSCALL_BIT, L_KILL, L_NEXT);
#endif
	if (persona)
		g_emit(a, JEQ, __NR_personality, L_PERSONA, L_NEXT);
	g_emit(a, JGT, AB_SECCOMP_MAX_KNOWN_NR, L_ENOSYS, L_ALLOW);
	if (persona) {
		g_label(a, L_PERSONA);
		g_emit(a, LD_ABS, AB_ARG0_LO, L_NEXT, L_NEXT);
		g_emit(a, JEQ, 0xffffffffu, L_ALLOW, L_NEXT); /* the query */
		g_emit(a, AND, ~AB_PERSONA_OK_BITS, L_NEXT, L_NEXT);
		g_emit(a, JEQ, 0, L_ALLOW, L_EPERM);
		g_label(a, L_EPERM);
		g_emit(a, RET, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA), L_NEXT, L_NEXT);
	}
	g_label(a, L_ALLOW);
	g_emit(a, RET, SECCOMP_RET_ALLOW, L_NEXT, L_NEXT);
	g_label(a, L_ENOSYS);
	g_emit(a, RET, SECCOMP_RET_ERRNO | (ENOSYS & SECCOMP_RET_DATA), L_NEXT, L_NEXT);
	g_label(a, L_KILL);
	g_emit(a, RET, SECCOMP_RET_KILL_PROCESS, L_NEXT, L_NEXT);
}

static int build_guard(bool persona, struct sock_fprog *out, ab_err *err)
{
	guard_asm a;
	memset(&a, 0, sizeof(a));
	for (int i = 0; i < L_COUNT; i++)
		a.at[i] = -1;
	guard_emit(&a, persona);
	int r = g_link(&a);
	if (r < 0)
		return ab_fail(err, -r, "seccomp: assemble the guard program");
	struct sock_filter *f = calloc(a.n, sizeof(*f));
	if (!f)
		return ab_fail(err, ENOMEM, "seccomp: assemble the guard program");
	memcpy(f, a.f, a.n * sizeof(*f));
	out->filter = f;
	out->len = (unsigned short)a.n;
	return 0;
}

/* ---- both programs ---- */

void ab_seccomp_prog_free(ab_seccomp_prog *p)
{
	if (!p)
		return;
	for (size_t i = 0; i < AB_SECCOMP_MAX_PROGS; i++)
		free(p->progs[i].filter);
	memset(p, 0, sizeof(*p));
}

int ab_seccomp_compile(const ab_seccomp_policy *pol, ab_seccomp_prog *out, ab_err *err)
{
	memset(out, 0, sizeof(*out));
	int r = ab_seccomp_validate(pol, err);
	if (r < 0)
		return r;
	if (pol->disabled)
		return 0; /* ablation: nothing to load */
	r = sc_filter_bpf(pol, &out->progs[0], err);
	if (r >= 0)
		r = build_guard(sc_personality_guarded(pol), &out->progs[1], err);
	if (r < 0) {
		ab_seccomp_prog_free(out);
		return r;
	}
	out->nprogs = 2;
	return 0;
}

#define AB_SECCOMP_WAIT_KILLABLE_RECV (1UL << 5) /* SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV */

/* Child, after no_new_privs, right before exec: no allocation here. */
int ab_seccomp_apply(const ab_seccomp_prog *p, int *listener, ab_err *err)
{
	if (p->nprogs > AB_SECCOMP_MAX_PROGS)
		return ab_fail(err, EINVAL, "seccomp: %zu programs", p->nprogs);
	for (size_t i = 0; i < p->nprogs; i++) {
		/* once agentbox has taken a notification, only a fatal signal ends
		 * the caller's wait (Linux 5.19): a handled signal no longer
		 * restarts a connect agentbox already carried out (EISCONN), nor
		 * sends a Go program's preemption signals round in circles */
		unsigned flags = i == 0 && listener ? SECCOMP_FILTER_FLAG_NEW_LISTENER |
							      AB_SECCOMP_WAIT_KILLABLE_RECV
						    : 0;
		long r = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, flags, &p->progs[i]);
		if (r < 0 && errno == EINVAL && (flags & AB_SECCOMP_WAIT_KILLABLE_RECV)) {
			flags &= ~AB_SECCOMP_WAIT_KILLABLE_RECV; /* before Linux 5.19 */
			r = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, flags, &p->progs[i]);
		}
		if (r >= 0) {
			if (flags)
				*listener = (int)r;
			continue;
		}
		int e = errno;
		ab_fail(err, e, "seccomp: load filter %zu of %zu", i + 1, p->nprogs);
		if (e == EACCES)
			ab_err_hint(err, "no_new_privs must be set before the filter is loaded");
		else if (e == EINVAL)
			ab_err_hint(err, "the kernel refused the filter; `agentbox doctor` checks "
					 "seccomp support");
		return -e;
	}
	return 0;
}

/* ---- the kernel's action cache ---- */

/* seccomp_is_const_allow() of kernel/seccomp.c, on one classic program:
 * ALLOW for NR whatever the arguments (the kernel gives up at the first load
 * of anything but the number and the arch, or an opcode it does not model). */
static bool const_allow(const struct sock_fprog *f, uint32_t nr)
{
	uint32_t a = 0;
	for (size_t pc = 0; pc < f->len; pc++) {
		const struct sock_filter *in = &f->filter[pc];
		bool res;
		switch (in->code) {
		case LD_ABS:
			if (in->k == offsetof(struct seccomp_data, nr))
				a = nr;
			else if (in->k == offsetof(struct seccomp_data, arch))
				a = AB_AUDIT_ARCH;
			else
				return false; /* an argument (or the ip): not cacheable */
			break;
		case RET: return in->k == SECCOMP_RET_ALLOW;
		case BPF_JMP | BPF_JA: pc += in->k; break;
		case JEQ:
		case JGE:
		case JGT:
		case BPF_JMP | BPF_JSET | BPF_K:
			res = BPF_OP(in->code) == BPF_JEQ   ? a == in->k
			      : BPF_OP(in->code) == BPF_JGE ? a >= in->k
			      : BPF_OP(in->code) == BPF_JGT ? a > in->k
							    : (a & in->k) != 0;
			pc += res ? in->jt : in->jf;
			break;
		case AND: a &= in->k; break;
		default: return false;
		}
	}
	return false;
}

bool ab_seccomp_cached(const ab_seccomp_prog *p, int nr)
{
	if (!p || p->nprogs == 0 || nr < 0)
		return false;
	for (size_t i = 0; i < p->nprogs && i < AB_SECCOMP_MAX_PROGS; i++)
		if (!p->progs[i].filter || !const_allow(&p->progs[i], (uint32_t)nr))
			return false;
	return true;
}

/* ---- rendering for tests and `explain` ---- */

static const char *ld_name(uint32_t k)
{
	if (k == offsetof(struct seccomp_data, nr))
		return "$syscall";
	if (k == offsetof(struct seccomp_data, arch))
		return "$arch";
	if (k == AB_ARG0_LO)
		return "$a0.lo32";
	return "?";
}

static void dump_ret(FILE *out, size_t i, uint32_t k)
{
	uint32_t action = k & SECCOMP_RET_ACTION_FULL;
	if (action == SECCOMP_RET_ALLOW)
		fprintf(out, "# %3zu: action ALLOW;\n", i);
	else if (action == SECCOMP_RET_ERRNO)
		fprintf(out, "# %3zu: action ERRNO(%u);\n", i, k & SECCOMP_RET_DATA);
	else if (action == SECCOMP_RET_KILL_PROCESS)
		fprintf(out, "# %3zu: action KILL_PROCESS;\n", i);
	else
		fprintf(out, "# %3zu: action 0x%08x;\n", i, k);
}

static void dump_guard(const struct sock_fprog *p, FILE *out)
{
	fputs("#\n# guard program (hand-written classic BPF, loaded after the filter above;\n"
	      "# the kernel runs both and applies the stricter result)\n#\n",
	      out);
	for (size_t i = 0; i < p->len; i++) {
		const struct sock_filter *f = &p->filter[i];
		const char *op = BPF_OP(f->code) == BPF_JEQ   ? "=="
				 : BPF_OP(f->code) == BPF_JGE ? ">="
							      : ">";
		switch (f->code) {
		case LD_ABS: fprintf(out, "# %3zu: load %s\n", i, ld_name(f->k)); break;
		case JEQ:
		case JGE:
		case JGT:
			fprintf(out, "# %3zu: if (A %s 0x%08x) goto %zu else goto %zu\n", i, op,
				f->k, i + 1 + f->jt, i + 1 + f->jf);
			break;
		case AND: fprintf(out, "# %3zu: A &= 0x%08x\n", i, f->k); break;
		case RET: dump_ret(out, i, f->k); break;
		default: fprintf(out, "# %3zu: code 0x%04x k 0x%08x\n", i, f->code, f->k);
		}
	}
	fputs("#\n", out);
}

int ab_seccomp_export_pfc(const ab_seccomp_policy *pol, FILE *out, ab_err *err)
{
	int r = ab_seccomp_validate(pol, err);
	if (r < 0)
		return r;
	if (pol->disabled) {
		fputs("# seccomp disabled (test ablation): no filter is loaded\n", out);
	} else {
		_cleanup_free_ char *pfc = NULL;
		size_t len = 0;
		r = sc_filter_pfc(pol, &pfc, &len, err);
		if (r < 0)
			return r;
		struct sock_fprog guard = {0, NULL};
		r = build_guard(sc_personality_guarded(pol), &guard, err);
		if (r < 0)
			return r;
		fwrite(pfc, 1, len, out);
		dump_guard(&guard, out);
		free(guard.filter);
	}
	if (fflush(out) != 0 || ferror(out))
		return ab_fail(err, EIO, "seccomp: write the filter");
	return 0;
}
