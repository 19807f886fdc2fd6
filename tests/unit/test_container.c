/* SPDX-License-Identifier: MIT */
/*
 * agentbox inside container engines: engine detection from what a process
 * sees, the /proc overmounts from mountinfo, the advice for every refused
 * step (which engine, which user), and the doctor lines built from a fake
 * trial.  The real trial runs in tests/integration/test_containers.py.
 */
#include "unit.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "agentbox/container.h"
#include "agentbox/host.h"

#define CG(s) s, sizeof(s) - 1

static void test_engine_of(void **state)
{
	assert_int_equal(ab_ctr_engine_of(false, false, NULL, NULL, NULL, 0), AB_ENGINE_NONE);
	assert_int_equal(ab_ctr_engine_of(true, false, NULL, NULL, NULL, 0), AB_ENGINE_PODMAN);
	assert_int_equal(ab_ctr_engine_of(false, true, NULL, NULL, NULL, 0), AB_ENGINE_DOCKER);
	assert_int_equal(ab_ctr_engine_of(false, false, "podman", NULL, NULL, 0), AB_ENGINE_PODMAN);
	assert_int_equal(ab_ctr_engine_of(false, false, "docker", NULL, NULL, 0), AB_ENGINE_DOCKER);
	assert_int_equal(ab_ctr_engine_of(false, false, "lxc", NULL, NULL, 0), AB_ENGINE_OTHER);
	assert_int_equal(ab_ctr_engine_of(false, false, "", NULL, NULL, 0), AB_ENGINE_NONE);
	/* $container wins over a file the image may have kept */
	assert_int_equal(ab_ctr_engine_of(false, true, "podman", NULL, NULL, 0), AB_ENGINE_PODMAN);
	/* a pod: the pod's settings are what can be changed */
	assert_int_equal(ab_ctr_engine_of(true, false, NULL, "10.0.0.1", NULL, 0),
			 AB_ENGINE_KUBERNETES);
	assert_int_equal(ab_ctr_engine_of(false, false, NULL, NULL,
					  CG("0::/kubepods.slice/kubepods-pod1.slice/cri-x\n")),
			 AB_ENGINE_KUBERNETES);
	assert_int_equal(ab_ctr_engine_of(false, false, NULL, NULL,
					  CG("0::/system.slice/docker-0123abcd.scope\n")),
			 AB_ENGINE_DOCKER);
	assert_int_equal(ab_ctr_engine_of(false, false, NULL, NULL, CG("12:pids:/docker/0123\n")),
			 AB_ENGINE_DOCKER);
	assert_int_equal(ab_ctr_engine_of(false, false, NULL, NULL,
					  CG("0::/machine.slice/libpod-0123.scope/container\n")),
			 AB_ENGINE_PODMAN);
	assert_int_equal(ab_ctr_engine_of(false, false, NULL, NULL,
					  CG("0::/user.slice/user-1000.slice/session-2.scope\n")),
			 AB_ENGINE_NONE);
	/* the text is bounded by its length, not a NUL */
	assert_int_equal(ab_ctr_engine_of(false, false, NULL, NULL, "0::/x\nkubepods", 6),
			 AB_ENGINE_NONE);
	assert_string_equal(ab_engine_name(AB_ENGINE_DOCKER), "Docker");
	assert_string_equal(ab_engine_name(99), "?");
	assert_string_equal(ab_step_name(AB_STEP_PROC), "proc mount");
	assert_string_equal(ab_step_name(-1), "?");
}

static const char mountinfo[] =
	"22 1 0:21 / / rw,relatime - overlay overlay rw\n"
	"23 22 0:22 / /proc rw,nosuid,nodev,noexec,relatime - proc proc rw\n"
	"24 23 0:5 /null /proc/keys rw,nosuid - devtmpfs udev rw\n"
	"25 23 0:5 /null /proc/timer_list rw,nosuid - devtmpfs udev rw\n"
	"26 23 0:23 / /proc/acpi ro,relatime - tmpfs tmpfs ro\n"
	"27 23 0:24 / /proc/sys/fs/binfmt_misc rw - binfmt_misc binfmt_misc rw\n"
	"28 22 0:25 / /procfoo rw - tmpfs tmpfs rw\n"
	"29 22 0:26 / /run/proc/x rw - tmpfs tmpfs rw\n";

static void test_proc_overmounts(void **state)
{
	char out[AB_CTR_OVERMOUNTS_MAX];
	assert_int_equal(ab_ctr_proc_overmounts(CG(mountinfo), out, sizeof(out)), 3);
	assert_string_equal(out, "/proc/keys, /proc/timer_list, /proc/acpi");
	/* a plain host: nothing */
	assert_int_equal(ab_ctr_proc_overmounts(CG("23 22 0:22 / /proc rw - proc proc rw\n"), out,
						sizeof(out)),
			 0);
	assert_string_equal(out, "");
	/* hostile: short lines, no newline at the end, a cut-off buffer */
	assert_int_equal(ab_ctr_proc_overmounts(CG("1 2 3 4"), out, sizeof(out)), 0);
	assert_int_equal(ab_ctr_proc_overmounts(CG("\n\n\n1 2 3 /proc/x"), out, sizeof(out)), 0);
	assert_int_equal(ab_ctr_proc_overmounts(CG("1 2 3 4 /proc/x"), out, sizeof(out)), 1);
	assert_string_equal(out, "/proc/x");
	char small[12];
	assert_int_equal(ab_ctr_proc_overmounts(CG(mountinfo), small, sizeof(small)), 3);
	assert_string_equal(small, "/proc/keys"); /* whole names only */
	assert_int_equal(ab_ctr_proc_overmounts(mountinfo, 0, out, sizeof(out)), 0);
}

typedef struct advice_case {
	const char *name;
	int engine;
	bool root;
	int userns, yama;
	int step, errnum;
	bool known;
	const char *cause, *fix, *not_fix;
} advice_case;

// clang-format off
static const advice_case advice_cases[] = {
	/* the matrix's rows */
	{ "podman-sethostname", AB_ENGINE_PODMAN, false, AB_NO, -1, AB_STEP_SETHOSTNAME, EPERM,
	  true, "podman's default seccomp profile allows sethostname only with CAP_SYS_ADMIN",
	  "--security-opt seccomp=" AB_DATADIR "/containers/podman-seccomp.json", "unconfined " },
	{ "filter-sethostname", AB_ENGINE_NONE, false, AB_NO, -1, AB_STEP_SETHOSTNAME, EPERM,
	  true, "a seccomp filter or security module around agentbox refuses sethostname",
	  "let agentbox's process make that call (sethostname)", "CAP_SYS_ADMIN" },
	{ "docker-userns", AB_ENGINE_DOCKER, false, AB_NO, -1, AB_STEP_USERNS, EPERM, true,
	  "Docker's default seccomp profile allows new namespaces",
	  "docker-seccomp.json (Docker's default plus", NULL },
	{ "docker-proc-user", AB_ENGINE_DOCKER, false, AB_NO, -1, AB_STEP_PROC, EPERM, true,
	  "Mount too revealing", "--security-opt systempaths=unconfined", "Never unmask" },
	{ "podman-proc-user", AB_ENGINE_PODMAN, false, AB_NO, -1, AB_STEP_PROC, EPERM, true,
	  "refuses a fresh /proc", "--security-opt unmask=/proc/*", "Never unmask" },
	{ "podman-proc-root-userns", AB_ENGINE_PODMAN, true, AB_YES, -1, AB_STEP_PROC, EPERM,
	  true, "Mount too revealing", "unmask=/proc/* (safe here: the container has its own user",
	  NULL },
	/* container root, no user namespace: never the unmask flag alone */
	{ "docker-proc-root", AB_ENGINE_DOCKER, true, AB_NO, -1, AB_STEP_PROC, EPERM, true,
	  "Mount too revealing", "Never unmask /proc for container root without a user namespace",
	  "systempaths=unconfined" },
	{ "podman-proc-root-unknown", AB_ENGINE_PODMAN, true, AB_UNKNOWN, -1, AB_STEP_PROC,
	  EPERM, true, "Mount too revealing", "core_pattern", "unmask=/proc/* (" },
	{ "k8s-proc", AB_ENGINE_KUBERNETES, false, AB_NO, -1, AB_STEP_PROC, EPERM, true,
	  "Mount too revealing", "procMount: Unmasked", NULL },
	{ "no-engine-proc", AB_ENGINE_NONE, false, AB_NO, -1, AB_STEP_PROC, EPERM, true,
	  "Mount too revealing", "nothing mounted over it", "--security-opt" },
	{ "docker-pidfd-noyama", AB_ENGINE_DOCKER, false, AB_NO, -1, AB_STEP_PIDFD_GETFD, EPERM,
	  true, "allows pidfd_getfd only with CAP_SYS_PTRACE (Yama is not active)",
	  "docker-seccomp.json (Docker's default plus pidfd_getfd)", "ptrace_scope" },
	{ "yama3-pidfd", AB_ENGINE_NONE, false, AB_NO, 3, AB_STEP_PIDFD_GETFD, EPERM, true,
	  "ptrace_scope = 3", "ptrace_scope <= 2", NULL },
	{ "yama1-docker-pidfd", AB_ENGINE_DOCKER, false, AB_NO, 1, AB_STEP_PIDFD_GETFD, EPERM,
	  true, "Docker's default seccomp profile allows pidfd_getfd only with CAP_SYS_PTRACE",
	  "docker-seccomp.json", "Yama is not active" },
	{ "docker-root-open-tree", AB_ENGINE_DOCKER, true, AB_NO, -1, AB_STEP_OPEN_TREE, EPERM,
	  true, "lacks CAP_SYS_ADMIN", "non-root user", "Linux >=" },
	{ "docker-keyring", AB_ENGINE_DOCKER, false, AB_NO, -1, AB_STEP_KEYRING, EPERM, true,
	  "Docker's default seccomp profile refuses keyctl", "docker-seccomp.json", NULL },
	{ "docker-mount", AB_ENGINE_DOCKER, false, AB_NO, -1, AB_STEP_MOUNT, EPERM, true,
	  "refuses mount", "docker-seccomp.json", NULL },
	{ "podman-keyring-custom", AB_ENGINE_PODMAN, false, AB_NO, -1, AB_STEP_KEYRING, EPERM,
	  true, "podman's default allows the call", "podman-seccomp.json", NULL },
	/* nothing specific to say */
	{ "proc-enoent", AB_ENGINE_DOCKER, false, AB_NO, -1, AB_STEP_PROC, ENOENT, false, NULL,
	  NULL, NULL },
	{ "host-userns", AB_ENGINE_NONE, false, AB_NO, -1, AB_STEP_USERNS, EPERM, false, NULL,
	  NULL, NULL },
	{ "no-step", AB_ENGINE_DOCKER, false, AB_NO, -1, AB_STEP_NONE, EPERM, false, NULL, NULL,
	  NULL },
	{ "bad-step", AB_ENGINE_DOCKER, false, AB_NO, -1, 99, EPERM, false, NULL, NULL, NULL },
};
// clang-format on

static void test_advice(void **state)
{
	for (size_t i = 0; i < AB_ARRAY_SIZE(advice_cases); i++) {
		const advice_case *c = &advice_cases[i];
		ab_ctr_facts f = {.engine = c->engine,
				  .root = c->root,
				  .userns = c->userns,
				  .yama_scope = c->yama};
		snprintf(f.proc_overmounts, sizeof(f.proc_overmounts), "/proc/keys");
		char cause[512], fix[512];
		bool known = ab_ctr_advise(&f, c->step, c->errnum, cause, sizeof(cause), fix,
					   sizeof(fix));
		if (known != c->known)
			fail_msg("case %s: known %d", c->name, known);
		if (!known) {
			assert_string_equal(cause, "");
			assert_string_equal(fix, "");
			continue;
		}
		if (!strstr(cause, c->cause) || !strstr(fix, c->fix) ||
		    (c->not_fix && strstr(fix, c->not_fix)))
			fail_msg("case %s:\ncause: %s\nfix: %s", c->name, cause, fix);
		/* run prints the fix as its Hint (ab_err.hint): it fits whole */
		assert_true(strlen(fix) < sizeof(((ab_err *)0)->hint) - 1);
		assert_true(strlen(cause) < sizeof(cause) - 1);
		/* the broad switches are never the advice */
		assert_null(strstr(fix, "seccomp=unconfined "));
		assert_null(strstr(fix, "--privileged "));
	}
}

/* ---- doctor lines from a fake trial ---- */

static char *doctor(const ab_host *h, int *rc)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&buf, &len);
	assert_non_null(out);
	*rc = ab_doctor_report(h, false, out);
	assert_int_equal(fclose(out), 0);
	return buf;
}

static void test_doctor_trial(void **state)
{
	ab_host h;
	int rc;
	ab_host_fake(&h, 6);
	char *t = doctor(&h, &rc);
	assert_int_equal(rc, 0);
	assert_non_null(strstr(t, "ok        sandbox set-up"));
	assert_non_null(strstr(t, "no container engine found"));
	free(t);

	/* podman, defaults: the first row */
	h.ctr.engine = AB_ENGINE_PODMAN;
	h.container = AB_YES;
	h.trial.step = AB_STEP_SETHOSTNAME;
	h.trial.errnum = EPERM;
	t = doctor(&h, &rc);
	assert_int_equal(rc, 1);
	assert_non_null(strstr(t, "missing   sandbox set-up   sethostname refused"));
	assert_non_null(strstr(t, "podman-seccomp.json"));
	assert_non_null(strstr(t, "engine: podman"));
	assert_non_null(strstr(t, "cannot work on this host; missing: sandbox set-up"));
	free(t);

	/* Docker as root: proc refused, open_tree refused, pidfd_getfd refused */
	h.ctr.engine = AB_ENGINE_DOCKER;
	h.ctr.root = h.is_root = true;
	h.uid = h.euid = 0;
	h.ctr.userns = AB_NO;
	h.trial.step = AB_STEP_PROC;
	h.trial.open_tree_errno = EPERM;
	h.trial.getfd_errno = EPERM;
	snprintf(h.ctr.proc_overmounts, sizeof(h.ctr.proc_overmounts), "/proc/keys");
	t = doctor(&h, &rc);
	assert_int_equal(rc, 1);
	assert_non_null(strstr(t, "proc mount refused in a throwaway child"));
	assert_non_null(strstr(t, "Never unmask /proc for container root"));
	assert_non_null(strstr(t, "warn      idmapped mounts  open_tree: Operation not permitted"));
	assert_non_null(strstr(t, "warn      pidfd_getfd"));
	assert_non_null(strstr(t, "CAP_SYS_PTRACE"));
	assert_non_null(strstr(t, "mounted over /proc: /proc/keys"));
	free(t);
}

/* The idmapped-mount line on a new kernel whose filter refuses
 * mount_setattr: never "use Linux >= 5.12". */
static void test_doctor_idmap_filtered(void **state)
{
	ab_host h;
	int rc;
	ab_host_fake(&h, 6);
	h.is_root = true;
	h.uid = h.euid = 0;
	h.idmap_mounts = AB_UNKNOWN;
	snprintf(h.kernel_release, sizeof(h.kernel_release), "6.18.44");
	char *t = doctor(&h, &rc);
	assert_null(strstr(t, "Linux >= 5.12"));
	assert_non_null(strstr(t, "mount_setattr is refused here"));
	free(t);
	h.idmap_mounts = AB_NO;
	snprintf(h.kernel_release, sizeof(h.kernel_release), "5.10.0");
	t = doctor(&h, &rc);
	assert_non_null(strstr(t, "Linux >= 5.12"));
	free(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_engine_of),
		cmocka_unit_test(test_proc_overmounts),
		cmocka_unit_test(test_advice),
		cmocka_unit_test(test_doctor_trial),
		cmocka_unit_test(test_doctor_idmap_filtered),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
