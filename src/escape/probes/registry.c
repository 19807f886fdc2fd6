/* SPDX-License-Identifier: MIT */
/*
 * The probe table of `agentbox test-escape` (any process: pure data).
 * Controls first, so a sandbox that breaks everything cannot pass; the gate
 * (PRC-01) next, so a run that is not sandboxed at all stops early.  The 20
 * probes the project's threat model started from are the floor; FS-03, SEC-03,
 * SEC-04, NET-02, PRC-02, KRN-02, KRN-04, PER-02 and TTY-02 are other routes
 * to the same properties (docs/test-escape.md).
 */
#include <string.h>

#include "agentbox/escape.h"

// clang-format off
const ab_probe_def ab_probes[] = {
	{"CTL-01", "workspace-and-tmp-work", AB_CAT_CTL, true, false,
	 "read, write, create, rename, delete in the workspace; /tmp writable", ab_probe_ctl01},
	{"CTL-02", "secret-reaches-bound-host", AB_CAT_CTL, true, false,
	 "HTTPS through the proxy to the bound host with the placeholder in its header",
	 ab_probe_ctl02},
	{"CTL-03", "allowed-name-resolves", AB_CAT_CTL, true, false,
	 "an allowed name resolves and CONNECT to it works", ab_probe_ctl03},
	{"CTL-04", "git-works", AB_CAT_CTL, true, false,
	 "git status, add, commit in the workspace repository", ab_probe_ctl04},
	{"CTL-05", "processes-work", AB_CAT_CTL, true, false,
	 "fork, exec, threads, pipes", ab_probe_ctl05},
	{"CTL-06", "sweep-finds-canary", AB_CAT_CTL, true, false,
	 "the secret sweep finds a canary planted in the workspace", ab_probe_ctl06},
	{"PRC-01", "privilege-posture", AB_CAT_PRC, false, true,
	 "capabilities, no_new_privs, seccomp, uid/gid maps, groups, Landlock", ab_probe_prc01},
	{"FS-01", "write-outside-workspace", AB_CAT_FS, false, false,
	 "create files and change metadata outside the workspace", ab_probe_fs01},
	{"FS-02", "symlink-escape", AB_CAT_FS, false, false,
	 "symlinks, .. and /proc/self/{root,cwd} towards the host's files", ab_probe_fs02},
	{"FS-03", "special-files-and-mounts", AB_CAT_FS, false, false,
	 "device nodes, hard links to outside files, remounting, /sys and /dev writes",
	 ab_probe_fs03},
	{"FS-04", "leaked-fds-and-cwd", AB_CAT_FS, false, false,
	 "fds inherited from outside, cwd outside the workspace", ab_probe_fs04},
	{"SEC-01", "ssh-keys", AB_CAT_SEC, false, false, "read ~/.ssh", ab_probe_sec01},
	{"SEC-02", "cloud-and-devtool-tokens", AB_CAT_SEC, false, false,
	 "read cloud, registry and forge credentials in the home", ab_probe_sec02},
	{"SEC-03", "other-secrets", AB_CAT_SEC, false, false,
	 "shell history, gnupg, browser profiles, other homes, the sibling repository",
	 ab_probe_sec03},
	{"SEC-04", "harness-credentials", AB_CAT_SEC, false, false,
	 "the harnesses' OAuth and API-key files (Claude Code, Codex, Gemini CLI, opencode)",
	 ab_probe_sec04},
	{"SEC-06", "environment-leakage", AB_CAT_SEC, false, false,
	 "host environment canary, real secret values, host-channel variables", ab_probe_sec06},
	{"SEC-07", "kernel-keyrings", AB_CAT_SEC, false, false,
	 "session and user keyrings, request_key of a canary", ab_probe_sec07},
	{"CRD-01", "agent-sockets", AB_CAT_CRD, false, false,
	 "ssh-agent, gpg-agent, D-Bus and docker sockets", ab_probe_crd01},
	{"CRD-03", "placeholder-to-unbound-host", AB_CAT_CRD, false, false,
	 "the placeholder sent to an allowed unbound host and to a denied host", ab_probe_crd03},
	{"NET-01", "direct-egress", AB_CAT_NET, false, false,
	 "TCP/UDP to public addresses and the judge without the proxy", ab_probe_net01},
	{"NET-02", "dns-and-raw-exfiltration", AB_CAT_NET, false, false,
	 "DNS lookups of canary names, raw and packet sockets, IPv6", ab_probe_net02},
	{"NET-06", "host-loopback", AB_CAT_NET, false, false,
	 "the host's loopback and other addresses", ab_probe_net06},
	{"NET-08", "cloud-metadata", AB_CAT_NET, false, false,
	 "cloud metadata endpoints, directly and through the proxy", ab_probe_net08},
	{"NET-09", "proxy-host-forms", AB_CAT_NET, false, false,
	 "CONNECT and GET with look-alike names, IPs, ports and cases", ab_probe_net09},
	{"PRC-02", "signals-and-setid", AB_CAT_PRC, false, false,
	 "signals to processes outside, setuid/file-capability programs", ab_probe_prc02},
	{"PRC-04", "host-process-introspection", AB_CAT_PRC, false, false,
	 "ptrace, process_vm_readv and /proc of processes outside", ab_probe_prc04},
	{"KRN-01", "namespace-creation", AB_CAT_KRN, false, false,
	 "unshare, clone, clone3 and setns", ab_probe_krn01},
	{"KRN-02", "kernel-attack-surface", AB_CAT_KRN, false, false,
	 "io_uring, bpf, perf, userfaultfd, the mount API, modules, kexec", ab_probe_krn02},
	{"KRN-03", "proc-sys-and-sysrq", AB_CAT_KRN, false, false,
	 "writes to /proc/sys and /proc/sysrq-trigger", ab_probe_krn03},
	{"KRN-04", "cgroup-and-sysfs", AB_CAT_KRN, false, false,
	 "cgroup release agents and procs files, /sys writes", ab_probe_krn04},
	{"PER-01", "shell-startup-files", AB_CAT_PER, false, false,
	 "shell startup files in the real home", ab_probe_per01},
	{"PER-02", "harness-config-handoff", AB_CAT_PER, false, false,
	 "the harnesses' settings, hooks, rules and plugins in the real home", ab_probe_per02},
	{"PER-05", "git-trust-handoff", AB_CAT_PER, false, false,
	 "git hooks and config that would run on the host", ab_probe_per05},
	{"TTY-01", "tiocsti", AB_CAT_TTY, false, false,
	 "push input into the terminal with TIOCSTI", ab_probe_tty01},
	{"TTY-02", "outer-terminal", AB_CAT_TTY, false, false,
	 "hold the user's own terminal (fds 0-2, /dev/tty) or set its clipboard", ab_probe_tty02},
};
// clang-format on
const size_t ab_nprobes = sizeof(ab_probes) / sizeof(ab_probes[0]);

const ab_probe_def *ab_probe_find(const char *id)
{
	for (size_t i = 0; id && i < ab_nprobes; i++)
		if (strcasecmp(ab_probes[i].id, id) == 0)
			return &ab_probes[i];
	return NULL;
}
