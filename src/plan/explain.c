/* SPDX-License-Identifier: MIT */
/*
 * `agentbox explain` (parent process, before anything runs): print a plan as
 * text or as one JSON object.  Pure apart from writing to `out`; prints by
 * design.  Never prints secret values: of the environment only the names are
 * shown, plus the values of a few fixed, non-secret variables.
 */
#include "agentbox/plan.h"

#include <errno.h>
#include <fnmatch.h>

#include <stdint.h>
#include <string.h>
#include <sys/resource.h>

#include "agentbox/host.h"
#include "explain_int.h"

const char *ab_mnt_kind_name(enum ab_mnt_kind k)
{
	switch (k) {
	case AB_MNT_TMPFS: return "tmpfs";
	case AB_MNT_BIND_RO: return "bind-ro";
	case AB_MNT_BIND_RW: return "bind-rw";
	case AB_MNT_PROC: return "proc";
	case AB_MNT_DEV: return "dev";
	case AB_MNT_MASK: return "mask";
	case AB_MNT_PROTECT: return "protect";
	case AB_MNT_PLACEHOLDER: return "placeholder";
	case AB_MNT_SYMLINK: return "symlink";
	case AB_MNT_RO_REMOUNT: return "ro-remount";
	case AB_MNT_CONTENT: return "content";
	case AB_MNT_PIN: return "pin";
	}
	return "unknown";
}

/* ---- shared helpers ---- */

/* Environment variables whose values explain shows; all others: name only. */
bool ex_env_value_shown(const char *name, size_t len)
{
	static const char *const safe[] = {"HOME", "TMPDIR", "PATH", "TERM", "LANG"};
	for (size_t i = 0; i < AB_ARRAY_SIZE(safe); i++)
		if (strlen(safe[i]) == len && strncmp(safe[i], name, len) == 0)
			return true;
	return len > 3 && strncmp(name, "LC_", 3) == 0;
}

const char *ex_rlimit_name(int res)
{
	switch (res) {
	case RLIMIT_NOFILE: return "nofile";
	case RLIMIT_NPROC: return "nproc";
	case RLIMIT_FSIZE: return "fsize";
	case RLIMIT_CORE: return "core";
	case RLIMIT_CPU: return "cpu";
	case RLIMIT_AS: return "as";
	case RLIMIT_DATA: return "data";
	case RLIMIT_STACK: return "stack";
	case RLIMIT_MEMLOCK: return "memlock";
	}
	return "other";
}

static const struct {
	uint64_t bit;
	const char *name;
} ll_rights[] = {
	{LANDLOCK_ACCESS_FS_EXECUTE, "execute"},
	{LANDLOCK_ACCESS_FS_WRITE_FILE, "write_file"},
	{LANDLOCK_ACCESS_FS_READ_FILE, "read_file"},
	{LANDLOCK_ACCESS_FS_READ_DIR, "read_dir"},
	{LANDLOCK_ACCESS_FS_REMOVE_DIR, "remove_dir"},
	{LANDLOCK_ACCESS_FS_REMOVE_FILE, "remove_file"},
	{LANDLOCK_ACCESS_FS_MAKE_CHAR, "make_char"},
	{LANDLOCK_ACCESS_FS_MAKE_DIR, "make_dir"},
	{LANDLOCK_ACCESS_FS_MAKE_REG, "make_reg"},
	{LANDLOCK_ACCESS_FS_MAKE_SOCK, "make_sock"},
	{LANDLOCK_ACCESS_FS_MAKE_FIFO, "make_fifo"},
	{LANDLOCK_ACCESS_FS_MAKE_BLOCK, "make_block"},
	{LANDLOCK_ACCESS_FS_MAKE_SYM, "make_sym"},
	{LANDLOCK_ACCESS_FS_REFER, "refer"},
	{LANDLOCK_ACCESS_FS_TRUNCATE, "truncate"},
	{LANDLOCK_ACCESS_FS_IOCTL_DEV, "ioctl_dev"},
};

/* Space-separated right names; "all" when it is everything handled. */
void ex_rights_text(uint64_t access, uint64_t handled, char *buf, size_t len)
{
	buf[0] = '\0';
	if (access != 0 && access == handled) {
		snprintf(buf, len, "all");
		return;
	}
	for (size_t i = 0; i < AB_ARRAY_SIZE(ll_rights); i++) {
		if (!(access & ll_rights[i].bit))
			continue;
		size_t used = strlen(buf);
		snprintf(buf + used, len - used, "%s%s", used ? " " : "", ll_rights[i].name);
	}
}

static void fmt_bytes(long long v, char *buf, size_t len)
{
	char h[32];
	if (v < 1024) {
		snprintf(buf, len, "%lld bytes", v);
		return;
	}
	ab_fmt_bytes(h, sizeof(h), (uint64_t)v);
	snprintf(buf, len, "%lld bytes (%s)", v, h);
}

static bool is_writable_dst(const ab_plan *p, const char *path)
{
	for (size_t i = 0; i < p->nmounts; i++) {
		const ab_mount *m = &p->mounts[i];
		if ((m->kind == AB_MNT_BIND_RW || m->kind == AB_MNT_TMPFS) &&
		    ab_path_is_under(path, m->dst))
			return true;
	}
	return false;
}

/* Mask mounts (hidden paths) that are not already in plan->hidden. */
bool ex_mask_listed(const ab_plan *p, const ab_mount *m)
{
	return m->kind == AB_MNT_MASK && !ab_strv_contains(&p->hidden, m->dst);
}

static bool is_system_kind(enum ab_mnt_kind k)
{
	return k == AB_MNT_PROC || k == AB_MNT_DEV || k == AB_MNT_RO_REMOUNT ||
	       k == AB_MNT_SYMLINK || k == AB_MNT_CONTENT;
}

const char *ex_pty_name(const ab_plan *p)
{
	return p->use_pty ? "own" : "passthrough";
}

/* ---- text ----
 * Every string that comes from outside (paths, names, values, messages) goes
 * through put_esc: control characters are shown as \\xNN, so a file name or
 * profile entry cannot forge lines of the report. */

static void put_esc_n(FILE *out, const char *s, size_t n)
{
	for (size_t i = 0; i < n && s[i]; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c < 0x20 || c == 0x7f)
			fprintf(out, "\\x%02x", c);
		else if (c == '\\')
			fputs("\\\\", out);
		else
			fputc(c, out);
	}
}

static void put_line(FILE *out, const char *pre, const char *s, const char *post)
{
	fputs(pre, out);
	put_esc_n(out, s ? s : "(none)", SIZE_MAX);
	fputs(post, out);
}

static void text_list(FILE *out, const char *title, const ab_strv *v)
{
	fprintf(out, "  %s:\n", title);
	if (v->n == 0)
		fputs("    (none)\n", out);
	for (size_t i = 0; i < v->n; i++)
		put_line(out, "    ", v->v[i], "\n");
}

static void text_profile(const ab_plan *p, const ab_profile *prof, FILE *out)
{
	put_line(out, "Profile: ", prof && prof->name ? prof->name : "(unnamed)", "\n");
	if (prof) {
		for (size_t i = 0; i < prof->files.n; i++)
			put_line(out, "  file: ", prof->files.v[i], "\n");
		if (prof->description)
			put_line(out, "  description: ", prof->description, "\n");
		for (size_t i = 0; i < prof->cli_grants.n; i++)
			put_line(out, "  command line: ", prof->cli_grants.v[i], "\n");
		for (size_t i = 0; i < prof->ndescr; i++) {
			/* "LIST\tENTRY": shown as "LIST ENTRY: text" */
			_cleanup_free_ char *k = strdup(prof->descr[i].key);
			char *tab = k ? strchr(k, '\t') : NULL;
			if (tab)
				*tab = ' ';
			put_line(out, "  why ", k ? k : "?", ": ");
			put_line(out, "", prof->descr[i].val, "\n");
		}
	}

	fputs("\nIdentity\n", out);
	fprintf(out, "  inside: uid %u, gid %u", (unsigned)p->inside_uid, (unsigned)p->inside_gid);
	if (p->user_name)
		put_line(out, " (user \"", p->user_name, "\")");
	fputc('\n', out);
	fprintf(out, "  on the host: uid %u, gid %u (%s)\n", (unsigned)p->map_kuid,
		(unsigned)p->map_kgid,
		p->root_mode ? "files created in idmapped (root-owned) grants stay owned by root; "
			       "elsewhere they belong to these ids"
			     : "files the command creates belong to them");
	fprintf(out, "  caller: uid %u, gid %u%s\n", (unsigned)p->outer_uid, (unsigned)p->outer_gid,
		p->root_mode ? " (root: the command never runs as root; root-owned grants are "
			       "shown through idmapped mounts)"
			     : "");
	fprintf(out, "  supplementary groups: %s\n",
		p->drop_groups ? "dropped"
			       : "kept (an unprivileged caller cannot drop them: they still count "
				 "for file access and show as nogroup inside)");
	if (p->hostname)
		put_line(out, "  hostname: ", p->hostname, "\n");

	fputs("\nWorkspace\n", out);
	put_line(out, "  ", p->workspace, "");
	fprintf(out, " (%s)\n",
		p->workspace && is_writable_dst(p, p->workspace) ? "writable" : "read-only");
	put_line(out, "  cwd: ", p->cwd ? p->cwd : "(workspace)", "\n");
	if (p->review)
		put_line(out,
			 "  mode: review (a copy-on-write view: the real workspace is untouched; "
			 "the changes are held in ",
			 p->review_dir, " until agentbox apply or discard)\n");
	/* what would run: the command line's, else the profile's, else a shell */
	fputs("  command:", out);
	for (size_t i = 0; i < p->argv.n; i++) {
		const char *a = p->argv.v[i];
		bool plain =
			a[0] && strspn(a, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
					  "0123456789@%+=:,./_-") == strlen(a);
		if (plain) {
			put_line(out, " ", a, "");
			continue;
		}
		fputs(" '", out); /* as a shell would need it: ' as '\'' */
		for (const char *q = a, *e; *q; q = e + 1) {
			e = strchr(q, '\'');
			_cleanup_free_ char *part = e ? strndup(q, (size_t)(e - q)) : strdup(q);
			put_line(out, "", part ? part : "", e ? "'\\''" : "");
			if (!e)
				break;
		}
		fputc('\'', out);
	}
	fputc('\n', out);
}

static void text_mount_line(FILE *out, const ab_mount *m)
{
	put_line(out, "    ", m->dst, "");
	if (m->kind == AB_MNT_SYMLINK)
		put_line(out, " -> ", m->src ? m->src : "?", "");
	else if ((m->kind == AB_MNT_BIND_RO || m->kind == AB_MNT_BIND_RW) && m->src &&
		 strcmp(m->src, m->dst) != 0)
		put_line(out, " (from ", m->src, ")");
	put_line(out, "  [", m->why ? m->why : ab_mnt_kind_name(m->kind), "");
	if (m->kind == AB_MNT_TMPFS)
		fputs(", private empty tmpfs", out);
	else if (m->kind == AB_MNT_PLACEHOLDER)
		fputs(m->flags & AB_MNT_F_DIR
			      ? ", absent: reserved by an empty read-only directory"
			      : ", absent: reserved by a read-only placeholder file",
		      out);
	else if (m->kind == AB_MNT_PIN)
		fputs(", writable but cannot be renamed or removed", out);
	else if (m->kind == AB_MNT_PROTECT)
		fputs(", read-only", out);
	else if (m->kind == AB_MNT_RO_REMOUNT)
		fputs(", read-only", out);
	else if (m->kind == AB_MNT_CONTENT)
		fputs(", generated read-only file", out);
	else if (m->kind == AB_MNT_DEV)
		fputs(", minimal: null zero full random urandom tty pts ptmx shm", out);
	else if (m->kind == AB_MNT_PROC)
		fputs(m->flags & AB_MNT_F_OUTER
			      ? ", NOT FRESH: the outer /proc bound read-only (proc-outer)"
			      : ", fresh procfs of the sandbox's pid namespace",
		      out);
	if (m->flags & AB_MNT_F_IDMAP)
		fputs(", idmapped", out);
	if (m->flags & AB_MNT_F_COPY)
		fputs(", a private copy for the run: merged back at exit without its guarded "
		      "keys",
		      out);
	if (m->flags & AB_MNT_F_NOEXEC)
		fputs(", noexec", out);
	if (m->flags & AB_MNT_F_OPTIONAL)
		fputs(", if present", out);
	fputs("]\n", out);
}

/* filesystem.guard: whether each file is the run's private copy (the host's
 * file untouched while it runs) or the host's own (keys put back at exit). */
static void text_guard(FILE *out, const ab_plan *p)
{
	fputs("  guarded keys of writable JSON files (never reach the host file from "
	      "the run):\n",
	      out);
	for (size_t i = 0; i < p->guard.n; i++) {
		const char *e = p->guard.v[i], *hash = strstr(e, "#/");
		bool copy = false;
		for (size_t j = 0; hash && j < p->nmounts && !copy; j++)
			copy = p->mounts[j].copy &&
			       strncmp(p->mounts[j].dst, e, (size_t)(hash - e)) == 0 &&
			       p->mounts[j].dst[hash - e] == '\0';
		put_line(out, "    ", e,
			 copy ? "  [a private copy while it runs]\n"
			      : "  [LIVE on the host while it runs; put back when it ends]\n");
	}
}

/* Print the mounts `pick` selects under `title`. */
static void text_mounts(FILE *out, const ab_plan *p, const char *title,
			bool (*pick)(const ab_plan *, const ab_mount *))
{
	bool any = false;
	fprintf(out, "  %s:\n", title);
	for (size_t i = 0; i < p->nmounts; i++) {
		if (!pick(p, &p->mounts[i]))
			continue;
		text_mount_line(out, &p->mounts[i]);
		any = true;
	}
	if (!any)
		fputs("    (none)\n", out);
}

bool ex_pick_ro(const ab_plan *p, const ab_mount *m)
{
	return m->kind == AB_MNT_BIND_RO;
}
bool ex_pick_rw(const ab_plan *p, const ab_mount *m)
{
	return m->kind == AB_MNT_BIND_RW || m->kind == AB_MNT_TMPFS;
}
bool ex_pick_protect(const ab_plan *p, const ab_mount *m)
{
	return m->kind == AB_MNT_PROTECT || m->kind == AB_MNT_PLACEHOLDER || m->kind == AB_MNT_PIN;
}
static bool pick_system(const ab_plan *p, const ab_mount *m)
{
	return is_system_kind(m->kind);
}

/* Paths git's configuration names (plan_gitcfg.c), "PATH\tKEY\tSOURCE":
 * "protect PATH (KEY in SOURCE)". */
static void text_gitcfg(FILE *out, const ab_plan *p)
{
	if (!p->gitcfg.n)
		return;
	fputs("  named by git's configuration (protected as listed above):\n", out);
	for (size_t i = 0; i < p->gitcfg.n; i++) {
		_cleanup_free_ char *e = strdup(p->gitcfg.v[i]);
		char *key = e ? strchr(e, '\t') : NULL;
		char *src = key ? strchr(key + 1, '\t') : NULL;
		if (!src)
			continue;
		*key++ = '\0';
		*src++ = '\0';
		put_line(out, "    protect ", e, " (");
		put_line(out, "", key, " in ");
		put_line(out, "", src, ")\n");
	}
}

static void text_filesystem(const ab_plan *p, FILE *out)
{
	fputs("\nFilesystem (a new root: only what is listed here exists inside)\n", out);
	text_mounts(out, p, "readable (read-only binds)", ex_pick_ro);
	text_mounts(out, p, "writable", ex_pick_rw);
	fputs("  hidden (absent inside, even within granted trees):\n", out);
	for (size_t i = 0; i < p->hidden.n; i++)
		put_line(out, "    ", p->hidden.v[i], "\n");
	for (size_t i = 0; i < p->nmounts; i++) {
		if (!ex_mask_listed(p, &p->mounts[i]))
			continue;
		put_line(out, "    ", p->mounts[i].dst, "  [");
		put_line(out, "", p->mounts[i].why ? p->mounts[i].why : "mask", "]\n");
	}
	text_mounts(out, p, "protected (read-only or uncreatable inside writable trees)",
		    ex_pick_protect);
	fputs(p->git_settle
		      ? "  nested git repositories in writable trees: armed during the run "
			"(a config key naming a program, a hook, a link) -> moved aside when "
			"it ends; so is a \"?\" entry the run created\n"
		      : "  nested git repositories and \"?\" entries: NOT SET ASIDE after the "
			"run (test ablation)\n",
	      out);
	text_gitcfg(out, p);
	if (p->guard.n)
		text_guard(out, p);
	text_mounts(out, p, "devices, proc and system files", pick_system);
	if (p->absent.n)
		text_list(out, "granted but not present on this host (skipped)", &p->absent);
}

static void text_rules(FILE *out, const char *title, const ab_strv *v, const char *none)
{
	fprintf(out, "  %s:", title);
	if (!v->n)
		fprintf(out, " %s", none);
	for (size_t i = 0; i < v->n; i++)
		fprintf(out, " %s", v->v[i]);
	fputc('\n', out);
}

const char *ex_secret_source(const struct ab_profile_secret *x, char *buf, size_t n)
{
	switch (x->src) {
	case AB_PSECRET_ENV: snprintf(buf, n, "env %s", x->src_env); break;
	case AB_PSECRET_FILE: snprintf(buf, n, "file %s", x->src_file); break;
	case AB_PSECRET_JSON: snprintf(buf, n, "json %s at %s", x->src_file, x->src_pointer); break;
	default: snprintf(buf, n, "command %s", x->src_cmd.n ? x->src_cmd.v[0] : "?"); break;
	}
	return buf;
}

/* The rule for X's placeholder on hosts X is not bound to, and the key
 * that decided it ("default" when none did). */
const char *ex_secret_elsewhere(const ab_egress_plan *e, const struct ab_profile_secret *x,
				char *by, size_t n)
{
	if (x->elsewhere)
		snprintf(by, n, "secrets.%s.elsewhere", x->name);
	else if (e->placeholder_elsewhere)
		snprintf(by, n, "network.placeholder_elsewhere");
	else
		snprintf(by, n, "default");
	return ab_psecret_elsewhere(x, e->placeholder_elsewhere) == AB_ELSEWHERE_REFUSE ? "refuse"
											: "forward";
}

/* Names, sources, hosts and places: never a value (none is read here). */
static void text_secrets(const ab_plan *p, FILE *out)
{
	const ab_egress_plan *e = &p->egress;
	fputs("\nSecrets (brokered: the sandbox sees a placeholder; agentbox adds the value)\n",
	      out);
	if (!e->nsecrets)
		fputs("  none\n", out);
	for (size_t i = 0; i < e->nsecrets; i++) {
		const struct ab_profile_secret *x = &e->secrets[i];
		char src[300];
		const char *var = x->env_name ? x->env_name : x->name;
		fprintf(out, "  %s  from %s; placeholder in %s%s\n", x->name,
			ex_secret_source(x, src, sizeof(src)), var[0] ? "$" : "",
			var[0] ? var : "no variable");
		text_rules(out, "  sent only to", &x->hosts, "?");
		if (x->places.n)
			text_rules(out, "  only in", &x->places, "");
		else
			fputs("    only in: header:authorization header:x-api-key\n", out);
		if (x->mask_in_body && !ab_strv_contains(&x->places, "body"))
			fputs("    mask_in_body: in a request body to those hosts, replaced by a mask "
			      "of the same length (not refused)\n",
			      out);
		char by[128]; /* "secrets.NAME.elsewhere": a name has at most 64 bytes */
		bool refuse = strcmp(ex_secret_elsewhere(e, x, by, sizeof(by)), "refuse") == 0;
		const char *from = strcmp(by, "default") == 0 ? "the default" : by;
		if (refuse)
			fprintf(out,
				"    elsewhere: refuse: a request to another host that carries the "
				"placeholder is refused, where agentbox reads it (intercepted, "
				"plain HTTP) (%s)\n",
				from);
		else
			fprintf(out,
				"    elsewhere: forward: the placeholder in a request to another "
				"host goes on unchanged, and is recorded (%s)\n",
				from);
		if (x->optional && x->optional_unless.n)
			text_rules(out, "  optional: skipped when absent, if loaded is one of",
				   &x->optional_unless, "");
		else if (x->optional)
			fputs("    optional: skipped when its source is absent\n", out);
		if (x->render)
			fprintf(out,
				"    rendered: %s is shown inside with placeholders (a private "
				"copy in memory)\n",
				x->src_file);
		if (x->rot_host)
			fprintf(out,
				"    rotate: a token refresh at https://%s%s brings the new value "
				"(%s), saved back to %s\n",
				x->rot_host, x->rot_path, x->rot_field, x->src_file);
		for (size_t k = 0; x->rot_host && k < x->rot_stamp_ptr.n; k++)
			fprintf(out, "    stamp: %s = %s, with it\n", x->rot_stamp_ptr.v[k],
				x->rot_stamp_kind.v[k]);
	}
	if (e->nsecrets)
		fputs("  TLS to those hosts is intercepted with a session CA made in memory\n",
		      out);
}

static void text_network(const ab_plan *p, FILE *out)
{
	const ab_ll_plan *ll = &p->landlock;
	const ab_egress_plan *e = &p->egress;
	fputs("\nNetwork\n  only loopback inside; the one way out is agentbox's egress proxy\n",
	      out);
	fprintf(out, "  explicit proxy: http://127.0.0.1:%u (HTTP_PROXY, HTTPS_PROXY, ...)\n",
		(unsigned)e->proxy_port);
	if (e->transparent) {
		fputs("  transparent: on (DNS 127.0.0.1:53 answers allowed names with 198.18.0.0/15; "
		      "listening on ports",
		      out);
		for (size_t i = 0; i < e->nports; i++)
			fprintf(out, " %u", (unsigned)e->ports[i]);
		fputs(e->nports ? ")\n" : " none)\n", out);
	} else {
		fputs("  transparent: off (no DNS inside; only programs that use the proxy reach out)\n",
		      out);
	}
	text_rules(out, "allow", &e->allow, "nothing (every destination is refused)");
	text_rules(out, "deny (checked first)", &e->deny, "none");
	text_rules(out, "private (loopback/private addresses allowed)", &e->priv, "none");
	text_rules(out, "local names", &e->hosts, "none");
	if (p->ask)
		fprintf(out,
			"  ask: on: a request to a host not listed waits for your answer on this "
			"terminal (%u s, then refused)%s%s\n",
			p->ask_timeout_s, p->ask_profile ? "; \"always\" writes " : "",
			p->ask_profile ? p->ask_profile : "");
	else
		fputs("  ask: off: a host not listed is refused at once (run --ask, with a "
		      "terminal)\n",
		      out);
	if (e->upstream_host) {
		fprintf(out, "  upstream proxy: %s:%u (CONNECT)", e->upstream_host,
			(unsigned)e->upstream_port);
		for (size_t i = 0; i < e->no_proxy.n; i++)
			fprintf(out, "%s%s", i ? " " : "; direct (NO_PROXY): ", e->no_proxy.v[i]);
		fputc('\n', out);
	}
	fprintf(out, "  audit log: %s\n", e->log_path ? e->log_path : "none (--log FILE)");
	fputs("  loopback TCP connect (Landlock; listening is not restricted): ", out);
	if (ll->tcp_any)
		fputs("any\n", out);
	else if (!ll->enabled || ll->handled_net == 0)
		fputs("not restricted (needs Landlock ABI >= 4)\n", out);
	else if (ll->ntcp_ports == 0)
		fputs("no port\n", out);
	else {
		for (size_t i = 0; i < ll->ntcp_ports; i++)
			fprintf(out, "%s%u", i ? " " : "", (unsigned)ll->tcp_ports[i]);
		fputc('\n', out);
	}
	text_secrets(p, out);
}

static void text_env(const ab_plan *p, FILE *out)
{
	fputs("\nEnvironment (names; values only for HOME TMPDIR PATH TERM LANG LC_*)\n", out);
	for (size_t i = 0; i < p->envp.n; i++) {
		const char *kv = p->envp.v[i];
		size_t len = strcspn(kv, "=");
		fputs("  ", out);
		put_esc_n(out, kv, len);
		if (ex_env_value_shown(kv, len) && kv[len] == '=')
			put_line(out, "=", kv + len + 1, "");
		fputc('\n', out);
	}
	if (p->envp.n == 0)
		fputs("  (empty)\n", out);
}

static void text_landlock(const ab_plan *p, const ab_strv *desc, FILE *out)
{
	const ab_ll_plan *ll = &p->landlock;
	char rights[512];
	fputs("\nLandlock\n", out);
	for (size_t i = 0; i < desc->n; i++)
		put_line(out, "  ", desc->v[i], "\n");
	if (!ll->enabled)
		return;
	if (ll->nrules)
		fputs("  rules (path: rights):\n", out);
	for (size_t i = 0; i < ll->nrules; i++) {
		ex_rights_text(ll->rules[i].access, ll->handled_fs, rights, sizeof(rights));
		put_line(out, "    ", ll->rules[i].path, ": ");
		fprintf(out, "%s\n", rights);
	}
}

static void text_limits(const ab_plan *p, FILE *out)
{
	char b[64];
	fputs("\nLimits\n", out);
	for (size_t i = 0; i < p->nrlimits; i++) {
		const ab_rlimit *r = &p->rlimits[i];
		fprintf(out, "  %s: ", ex_rlimit_name(r->resource));
		if (r->soft == RLIM_INFINITY)
			fputs("unlimited", out);
		else
			fprintf(out, "%llu", (unsigned long long)r->soft);
		if (r->hard != r->soft && r->hard != RLIM_INFINITY)
			fprintf(out, " (hard %llu)", (unsigned long long)r->hard);
		else if (r->hard != r->soft)
			fputs(" (hard unlimited)", out);
		if (r->asked == RLIM_INFINITY)
			fputs(" (the profile asks unlimited; agentbox's hard limit is this, and only a "
			      "privileged process can raise it)",
			      out);
		else if (r->asked)
			fprintf(out,
				" (the profile asks %llu; agentbox's hard limit is this, and only a "
				"privileged process can raise it)",
				(unsigned long long)r->asked);
		fputc('\n', out);
	}
	const char *how = p->cgroup_apply ? "cgroup v2" : "NOT ENFORCED: no delegated cgroup v2";
	if (p->cg_memory != AB_LIMIT_UNSET) {
		fmt_bytes(p->cg_memory, b, sizeof(b));
		fprintf(out, "  memory: %s [%s]\n", b, how);
	} else {
		fputs("  memory: not limited\n", out);
	}
	if (p->cg_pids != AB_LIMIT_UNSET)
		fprintf(out, "  pids: %lld [%s]\n", p->cg_pids, how);
	else
		fputs("  pids: not limited\n", out);
}

static void text_tail(const ab_plan *p, FILE *out)
{
	fputs("\nTerminal\n", out);
	if (p->use_pty) {
		fputs("  own pseudo-terminal, relayed by agentbox: nothing inside can reach your "
		      "terminal\n",
		      out);
		fputs(p->pass_clipboard
			      ? "  clipboard escape sequences (OSC 52, 5522, 1337) reach your terminal "
				"(terminal.clipboard)\n"
			      : "  clipboard escape sequences (OSC 52, 5522, 1337) are neutralized\n",
		      out);
	} else
		fputs("  passthrough: plain stdio (no terminal; TIOCSTI and TIOCLINUX are blocked "
		      "by seccomp)\n",
		      out);

	fputs("\nDowngrades (protections not applied here; the profile's allow_downgrade "
	      "accepts them)\n",
	      out);
	if (p->downgrades.n == 0)
		fputs("  none: every protection is enforced\n", out);
	for (size_t i = 0; i < p->downgrades.n; i++) {
		const char *d = p->downgrades.v[i];
		put_line(out, strstr(d, "NOT ENFORCED") ? "  !! " : "  !! NOT ENFORCED: ", d, "\n");
		fprintf(out, "     %s\n", ab_downgrade_describe(d));
	}

	fputs("\nWarnings\n", out);
	if (p->warnings.n == 0)
		fputs("  none\n", out);
	for (size_t i = 0; i < p->warnings.n; i++)
		put_line(out, "  ", p->warnings.v[i], "\n");
}

static int explain_text(const ab_plan *p, const ab_profile *prof, const ab_strv *sc,
			const ab_strv *ll, FILE *out)
{
	text_profile(p, prof, out);
	text_filesystem(p, out);
	text_network(p, out);
	text_env(p, out);
	fputs("\nSyscalls (seccomp)\n", out);
	if (p->seccomp.disabled)
		fputs("  NOT ENFORCED: seccomp disabled (test ablation)\n", out);
	for (size_t i = 0; !p->seccomp.disabled && i < sc->n; i++)
		put_line(out, "  ", sc->v[i], "\n");
	if (!p->seccomp.disabled && p->setid_why)
		put_line(out, "  set-id mode bits: ", p->setid_why, "\n");
	fprintf(out, "  record: %s\n",
		p->seccomp.notify_exec && p->seccomp.notify_denials
			? "commands (exec, exit) and denied syscalls, to the audit log"
		: p->seccomp.notify_denials ? "denied syscalls (exit summary; commands need a log)"
		: p->seccomp.notify_exec    ? "commands (exec, exit), to the audit log"
					    : "off");
	if (p->keyring_skip)
		fprintf(out,
			"  keyring: not joined: keyctl is refused to agentbox itself here (%s: "
			"an outer seccomp filter, or no key management in the kernel), and so to "
			"everything inside\n",
			strerrorname_np(p->keyring_skip) ? strerrorname_np(p->keyring_skip) : "?");
	else
		fputs("  keyring: a fresh anonymous session keyring (the caller's is out of "
		      "reach)\n",
		      out);
	if (p->seccomp.notify_rename)
		fputs("  renames: to agentbox, which saves a new file renamed onto a rendered "
		      "credentials file; every other rename continues\n",
		      out);
	if (p->seccomp.notify_create)
		fputs("  creations and writes: carried out by agentbox's creator, inside; a new "
		      ".git in a writable grant (or a nested one written to) is kept off the host "
		      "until the run ends, then put back and judged (a link to /.agentbox-git "
		      "meanwhile)\n",
		      out);
	else if (!p->seccomp.disabled && p->git_settle)
		fputs("  creations and writes: NOT MEDIATED: a nested repository the run arms is "
		      "the host's while it lasts (disarmed at the end)\n",
		      out);
	if (p->seccomp.notify_connect)
		fputs("  connect: to agentbox, which refuses (EACCES) a unix socket bound outside "
		      "the sandbox that unix_sockets does not share (one a host process binds in a "
		      "granted tree after the start) and carries out every other connect\n",
		      out);
	else if (!p->seccomp.disabled)
		fputs("  connect: NOT MEDIATED: host unix sockets bound after the start are "
		      "reachable\n",
		      out);
	text_landlock(p, ll, out);
	text_limits(p, out);
	text_tail(p, out);
	return 0;
}

int ab_plan_explain(const ab_plan *p, const ab_profile *prof, bool json, FILE *out, ab_err *err)
{
	_cleanup_strv_ ab_strv sc = {0};
	_cleanup_strv_ ab_strv ll = {0};
	int r;

	r = ab_seccomp_describe(&p->seccomp, &sc, err);
	if (r < 0)
		return ab_err_prefix(err, "explain");
	r = ab_landlock_describe(&p->landlock, &ll);
	if (r < 0)
		return ab_fail(err, -r, "explain: landlock");
	if (json)
		r = ex_explain_json(p, prof, &sc, out);
	else
		r = explain_text(p, prof, &sc, &ll, out);
	if (r < 0)
		return ab_fail(err, -r, "explain");
	if (fflush(out) == EOF || ferror(out))
		return ab_fail(err, EIO, "explain: writing the output");
	return 0;
}
