/* SPDX-License-Identifier: MIT */
/*
 * test-escape probes of the secrets a process can hold: SEC-06 (its own
 * environment and every visible process's, host-channel variables, the lab
 * secret's placeholder) and SEC-07 (kernel keyrings: the harness's canary
 * key must stay out of reach) (docs/test-escape.md).
 *
 * Runs INSIDE the sandbox, in the probe's own forked child (runner.c).
 * Values are only scanned (ab_pr_scan), never printed: SEC-06 reports
 * variable names only.  The one key SEC-07 adds is invalidated at once.
 */
#include <errno.h>
#include <linux/keyctl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "agentbox/escape.h"
#include "probe_sysutil.h"

extern char **environ;

#define AB_LAB_KEY_DESC "agentbox-lab-canary"

/* ------------------------------------------------------------------ */
/* SEC-06                                                             */
/* ------------------------------------------------------------------ */

static bool sockets_exist(const ab_lab_info *lab)
{
	for (size_t i = 0; i < lab->agent_sockets.n; i++)
		if (access(lab->agent_sockets.v[i], F_OK) == 0)
			return true;
	return false;
}

/* SEC-06: own environ (each entry scanned) and /proc/self/environ; every
 * readable /proc/PID/environ and cmdline scanned; host-channel variables
 * (SSH_AUTH_SOCK, DBUS_SESSION_BUS_ADDRESS, DISPLAY, WAYLAND_DISPLAY,
 * GPG_AGENT_INFO, AGENTBOX_LAB_CANARY, XAUTHORITY, DOCKER_HOST, ...) must be
 * absent; XDG_RUNTIME_DIR only if it is the lab's and its sockets exist; the
 * lab secret's variable must hold a placeholder (absent: ERROR).  Reports
 * "env_names" (names only). */
void ab_probe_sec06(ab_probe_run *r)
{
	const ab_lab_info *lab = ab_pr_lab(r);
	json_t *names = json_array();
	int n = 0;
	for (char **e = environ; *e; e++, n++) {
		size_t len = strcspn(*e, "=");
		json_array_append_new(names, json_stringn(*e, len));
		ab_pr_scan(r, "own environment", *e, strlen(*e));
	}
	ab_pr_ok(r, "own environment scanned", "%d variables", n);
	psys_read_scan(r, "read /proc/self/environ", "/proc/self/environ", false, NULL);
	ab_pr_report(r, "env_names", names);

	static const char *const channels[] = {"SSH_AUTH_SOCK",
					       "SSH_AGENT_PID",
					       "DBUS_SESSION_BUS_ADDRESS",
					       "DBUS_SYSTEM_BUS_ADDRESS",
					       "DISPLAY",
					       "WAYLAND_DISPLAY",
					       "XAUTHORITY",
					       "GPG_AGENT_INFO",
					       "GNOME_KEYRING_CONTROL",
					       "DOCKER_HOST",
					       "KRB5CCNAME",
					       "AGENTBOX_LAB_CANARY"};
	char what[96];
	for (size_t i = 0; i < AB_ARRAY_SIZE(channels); i++) {
		snprintf(what, sizeof(what), "host variable %s absent", channels[i]);
		if (getenv(channels[i]))
			ab_pr_escaped(r, what, "present");
		else
			ab_pr_ok(r, what, "absent");
	}
	const char *xdg = getenv("XDG_RUNTIME_DIR");
	if (xdg && lab->runtime_dir && strcmp(xdg, lab->runtime_dir) == 0 && sockets_exist(lab))
		ab_pr_escaped(r, "XDG_RUNTIME_DIR private",
			      "the lab's, its agent sockets are visible");
	else
		ab_pr_ok(r, "XDG_RUNTIME_DIR private",
			 xdg ? "set, no lab socket under it" : "absent");

	if (lab->secret_env && lab->secret_env[0]) {
		snprintf(what, sizeof(what), "lab secret $%s holds a placeholder", lab->secret_env);
		const char *v = getenv(lab->secret_env);
		if (!v)
			ab_pr_error(r, what, "absent: the placeholder is missing");
		else if (!ab_pr_scan(r, what, v, strlen(v)))
			ab_pr_ok(r, what, "present, %zu bytes, not a real value", strlen(v));
	}
	psys_scan_all_procs(r, false);
}

/* ------------------------------------------------------------------ */
/* SEC-07                                                             */
/* ------------------------------------------------------------------ */

#define MAX_KEYS 32

struct keys {
	long serial[MAX_KEYS];
	int n;
};

static void keys_add(struct keys *k, long s)
{
	for (int i = 0; i < k->n; i++)
		if (k->serial[i] == s)
			return;
	if (k->n < MAX_KEYS)
		k->serial[k->n++] = s;
}

/* DESCRIBE and READ a key (scan both); a keyring's READ lists serials. */
static void key_inspect(ab_probe_run *r, struct keys *k, long s)
{
	char what[96], desc[512];
	static char buf[1 << 16];
	snprintf(what, sizeof(what), "keyctl(KEYCTL_DESCRIBE, %ld)", s);
	long n = syscall(SYS_keyctl, KEYCTL_DESCRIBE, s, desc, sizeof(desc) - 1, 0);
	int e = errno;
	if (n > 0) {
		desc[n < (long)sizeof(desc) ? n : (long)sizeof(desc) - 1] = '\0';
		if (!ab_pr_scan(r, what, desc, strlen(desc)))
			ab_pr_escaped(r, what,
				      strstr(desc, AB_LAB_KEY_DESC)
					      ? "the harness's canary key is visible"
					      : "described");
	} else {
		ab_pr_sys(r, what, n, e);
	}
	snprintf(what, sizeof(what), "keyctl(KEYCTL_READ, %ld)", s);
	n = syscall(SYS_keyctl, KEYCTL_READ, s, buf, sizeof(buf), 0);
	e = errno;
	if (n < 0) {
		ab_pr_sys(r, what, n, e);
		return;
	}
	size_t got = (size_t)n < sizeof(buf) ? (size_t)n : sizeof(buf);
	if (!ab_pr_scan(r, what, buf, got))
		ab_pr_escaped(r, what, "read %zu bytes", got);
	if (strncmp(desc, "keyring;", 8) == 0)
		for (size_t i = 0; i + sizeof(int32_t) <= got; i += sizeof(int32_t)) {
			int32_t sub;
			memcpy(&sub, buf + i, sizeof(sub));
			keys_add(k, sub);
		}
}

/* SEC-07: keyctl(GET_KEYRING_ID) of @s, @u, @us, @p, @t; request_key("user",
 * "agentbox-lab-canary"); keyctl(SEARCH) of @s and @u for it; DESCRIBE and
 * READ of every serial obtained (and one level of keyring contents), payloads
 * scanned; add_key into @u (invalidated at once if it works);
 * JOIN_SESSION_KEYRING; /proc/keys checked for the lab key.  Raw syscalls. */
void ab_probe_sec07(ab_probe_run *r)
{
	static const struct {
		long spec;
		const char *name;
	} rings[] = {{KEY_SPEC_SESSION_KEYRING, "@s"},
		     {KEY_SPEC_USER_KEYRING, "@u"},
		     {KEY_SPEC_USER_SESSION_KEYRING, "@us"},
		     {KEY_SPEC_PROCESS_KEYRING, "@p"},
		     {KEY_SPEC_THREAD_KEYRING, "@t"}};
	struct keys k = {{0}, 0};
	char what[128];
	for (size_t i = 0; i < AB_ARRAY_SIZE(rings); i++) {
		snprintf(what, sizeof(what), "keyctl(KEYCTL_GET_KEYRING_ID, %s)", rings[i].name);
		long s = syscall(SYS_keyctl, KEYCTL_GET_KEYRING_ID, rings[i].spec, 0, 0, 0);
		ab_pr_sys(r, what, s, errno);
		if (s >= 0)
			keys_add(&k, s);
	}
	long s = syscall(SYS_request_key, "user", AB_LAB_KEY_DESC, NULL, 0);
	ab_pr_sys(r, "request_key(\"user\", \"" AB_LAB_KEY_DESC "\")", s, errno);
	if (s >= 0)
		keys_add(&k, s);
	for (size_t i = 0; i < 2; i++) {
		snprintf(what, sizeof(what), "keyctl(KEYCTL_SEARCH, %s, \"user\", \"%s\")",
			 rings[i].name, AB_LAB_KEY_DESC);
		s = syscall(SYS_keyctl, KEYCTL_SEARCH, rings[i].spec, "user", AB_LAB_KEY_DESC, 0);
		ab_pr_sys(r, what, s, errno);
		if (s >= 0)
			keys_add(&k, s);
	}
	for (int i = 0; i < k.n; i++) /* k.n grows with keyring contents */
		key_inspect(r, &k, k.serial[i]);

	char desc[64];
	snprintf(desc, sizeof(desc), "abprobe-%s", ab_pr_lab(r)->run_id);
	s = syscall(SYS_add_key, "user", desc, "x", 1, KEY_SPEC_USER_KEYRING);
	int e = errno;
	if (s >= 0)
		syscall(SYS_keyctl, KEYCTL_INVALIDATE, s, 0, 0, 0);
	ab_pr_sys(r, "add_key(\"user\", \"abprobe-RUNID\") into @u", s, e);
	s = syscall(SYS_keyctl, KEYCTL_JOIN_SESSION_KEYRING, NULL, 0, 0, 0);
	ab_pr_sys(r, "keyctl(KEYCTL_JOIN_SESSION_KEYRING, NULL)", s, errno);

	static char buf[1 << 16];
	ssize_t n = psys_read_small("/proc/keys", buf, sizeof(buf));
	if (n < 0)
		ab_pr_sys(r, "read /proc/keys", -1, errno);
	else if (strstr(buf, AB_LAB_KEY_DESC))
		ab_pr_escaped(r, "read /proc/keys", "the harness's canary key is listed");
	else
		ab_pr_ok(r, "read /proc/keys", "%zd bytes, no lab key", n);
	json_t *a = json_array();
	for (int i = 0; i < k.n; i++)
		json_array_append_new(a, json_integer(k.serial[i]));
	ab_pr_report(r, "serials", a);
}
