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
#include <jansson.h>

#include "agentbox/json_pos.h"
#include <stdint.h>
#include <string.h>
#include <sys/resource.h>

#include "agentbox/host.h"

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
static bool env_value_shown(const char *name, size_t len)
{
	static const char *const safe[] = {"HOME", "TMPDIR", "PATH", "TERM", "LANG"};
	for (size_t i = 0; i < AB_ARRAY_SIZE(safe); i++)
		if (strlen(safe[i]) == len && strncmp(safe[i], name, len) == 0)
			return true;
	return len > 3 && strncmp(name, "LC_", 3) == 0;
}

static const char *rlimit_name(int res)
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
static void rights_text(uint64_t access, uint64_t handled, char *buf, size_t len)
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
static bool mask_listed(const ab_plan *p, const ab_mount *m)
{
	return m->kind == AB_MNT_MASK && !ab_strv_contains(&p->hidden, m->dst);
}

static bool is_system_kind(enum ab_mnt_kind k)
{
	return k == AB_MNT_PROC || k == AB_MNT_DEV || k == AB_MNT_RO_REMOUNT ||
	       k == AB_MNT_SYMLINK || k == AB_MNT_CONTENT;
}

static const char *pty_name(const ab_plan *p)
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
	if (m->flags & AB_MNT_F_NOEXEC)
		fputs(", noexec", out);
	if (m->flags & AB_MNT_F_OPTIONAL)
		fputs(", if present", out);
	fputs("]\n", out);
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

static bool pick_ro(const ab_plan *p, const ab_mount *m)
{
	return m->kind == AB_MNT_BIND_RO;
}
static bool pick_rw(const ab_plan *p, const ab_mount *m)
{
	return m->kind == AB_MNT_BIND_RW || m->kind == AB_MNT_TMPFS;
}
static bool pick_protect(const ab_plan *p, const ab_mount *m)
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
	text_mounts(out, p, "readable (read-only binds)", pick_ro);
	text_mounts(out, p, "writable", pick_rw);
	fputs("  hidden (absent inside, even within granted trees):\n", out);
	for (size_t i = 0; i < p->hidden.n; i++)
		put_line(out, "    ", p->hidden.v[i], "\n");
	for (size_t i = 0; i < p->nmounts; i++) {
		if (!mask_listed(p, &p->mounts[i]))
			continue;
		put_line(out, "    ", p->mounts[i].dst, "  [");
		put_line(out, "", p->mounts[i].why ? p->mounts[i].why : "mask", "]\n");
	}
	text_mounts(out, p, "protected (read-only or uncreatable inside writable trees)",
		    pick_protect);
	fputs(p->git_settle
		      ? "  nested git repositories in writable trees: armed during the run "
			"(a config key naming a program, a hook, a link) -> moved aside when "
			"it ends; so is a \"?\" entry the run created\n"
		      : "  nested git repositories and \"?\" entries: NOT SET ASIDE after the "
			"run (test ablation)\n",
	      out);
	text_gitcfg(out, p);
	if (p->guard.n)
		text_list(out,
			  "guarded keys of writable JSON files (put back after the run when "
			  "it changed them)",
			  &p->guard);
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

static const char *secret_source(const struct ab_profile_secret *x, char *buf, size_t n)
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
static const char *secret_elsewhere(const ab_egress_plan *e, const struct ab_profile_secret *x,
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
			secret_source(x, src, sizeof(src)), var[0] ? "$" : "",
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
		bool refuse = strcmp(secret_elsewhere(e, x, by, sizeof(by)), "refuse") == 0;
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
		if (env_value_shown(kv, len) && kv[len] == '=')
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
		rights_text(ll->rules[i].access, ll->handled_fs, rights, sizeof(rights));
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
		fprintf(out, "  %s: ", rlimit_name(r->resource));
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

	fputs("\nDowngrades (protections this kernel cannot apply; the profile's "
	      "allow_downgrade accepts them)\n",
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

/* ---- JSON ----
 * Builders return NULL on allocation failure; json_object_set_new() and
 * json_array_append_new() then fail (and free nothing twice), so one `bad`
 * flag per builder catches every error. */

static json_t *jstr(const char *s)
{
	return ab_json_string_lossy(s);
}

static json_t *strv_json(const ab_strv *v)
{
	json_t *a = json_array();
	int bad = !a;
	for (size_t i = 0; a && i < v->n; i++)
		bad |= json_array_append_new(a, jstr(v->v[i]));
	if (bad) {
		json_decref(a);
		return NULL;
	}
	return a;
}

static json_t *checked(json_t *o, int bad)
{
	if (bad || !o) {
		json_decref(o);
		return NULL;
	}
	return o;
}

static json_t *json_profile(const ab_profile *prof)
{
	json_t *o = json_object();
	int bad = !o;
	bad |= json_object_set_new(o, "name", prof && prof->name ? jstr(prof->name) : json_null());
	bad |= json_object_set_new(o, "files", prof ? strv_json(&prof->files) : json_array());
	bad |= json_object_set_new(o, "cli_grants",
				   prof ? strv_json(&prof->cli_grants) : json_array());
	bad |= json_object_set_new(o, "description",
				   prof && prof->description ? jstr(prof->description)
							     : json_null());
	json_t *d = json_object();
	bad |= !d;
	for (size_t i = 0; d && prof && i < prof->ndescr; i++) {
		_cleanup_free_ char *k = strdup(prof->descr[i].key);
		char *tab = k ? strchr(k, '\t') : NULL;
		if (!tab) {
			bad = 1;
			break;
		}
		*tab = '\0';
		json_t *l = json_object_get(d, k);
		if (!l) {
			l = json_object();
			bad |= json_object_set_new(d, k, l);
		}
		bad |= !l || json_object_set_new(l, tab + 1, jstr(prof->descr[i].val));
	}
	bad |= json_object_set_new(o, "descriptions", d);
	return checked(o, bad);
}

static json_t *json_identity(const ab_plan *p)
{
	json_t *o = json_object();
	int bad = !o;
	bad |= json_object_set_new(o, "inside_uid", json_integer(p->inside_uid));
	bad |= json_object_set_new(o, "inside_gid", json_integer(p->inside_gid));
	bad |= json_object_set_new(o, "host_uid", json_integer(p->map_kuid));
	bad |= json_object_set_new(o, "host_gid", json_integer(p->map_kgid));
	bad |= json_object_set_new(o, "caller_uid", json_integer(p->outer_uid));
	bad |= json_object_set_new(o, "caller_gid", json_integer(p->outer_gid));
	bad |= json_object_set_new(o, "root_mode", json_boolean(p->root_mode));
	bad |= json_object_set_new(o, "drop_groups", json_boolean(p->drop_groups));
	bad |= json_object_set_new(o, "user", p->user_name ? jstr(p->user_name) : json_null());
	bad |= json_object_set_new(o, "hostname", p->hostname ? jstr(p->hostname) : json_null());
	return checked(o, bad);
}

static json_t *json_mount(const ab_mount *m)
{
	static const struct {
		unsigned bit;
		const char *name;
	} fl[] = {{AB_MNT_F_DIR, "dir"},
		  {AB_MNT_F_OPTIONAL, "optional"},
		  {AB_MNT_F_IDMAP, "idmap"},
		  {AB_MNT_F_NOEXEC, "noexec"}};
	json_t *o = json_object(), *flags = json_array();
	int bad = !o || !flags;
	for (size_t i = 0; flags && i < AB_ARRAY_SIZE(fl); i++)
		if (m->flags & fl[i].bit)
			bad |= json_array_append_new(flags, jstr(fl[i].name));
	bad |= json_object_set_new(o, "kind", jstr(ab_mnt_kind_name(m->kind)));
	/* A CONTENT mount's src is file content, not a path: not repeated here. */
	bad |= json_object_set_new(
		o, "src", m->src && m->kind != AB_MNT_CONTENT ? jstr(m->src) : json_null());
	bad |= json_object_set_new(o, "dst", jstr(m->dst));
	bad |= json_object_set_new(o, "flags", flags);
	bad |= json_object_set_new(o, "why", m->why ? jstr(m->why) : json_null());
	return checked(o, bad);
}

static json_t *json_mounts(const ab_plan *p, bool (*pick)(const ab_plan *, const ab_mount *))
{
	json_t *a = json_array();
	int bad = !a;
	for (size_t i = 0; a && i < p->nmounts; i++) {
		if (!pick)
			bad |= json_array_append_new(a, json_mount(&p->mounts[i]));
		else if (pick(p, &p->mounts[i]))
			bad |= json_array_append_new(a, jstr(p->mounts[i].dst));
	}
	return checked(a, bad);
}

/* {"path", "key", "source"} per path git's configuration names. */
static json_t *json_gitcfg(const ab_plan *p)
{
	json_t *a = json_array();
	int bad = !a;
	for (size_t i = 0; a && i < p->gitcfg.n; i++) {
		_cleanup_free_ char *e = strdup(p->gitcfg.v[i]);
		char *key = e ? strchr(e, '\t') : NULL;
		char *src = key ? strchr(key + 1, '\t') : NULL;
		if (!src) {
			bad = 1;
			break;
		}
		*key++ = '\0';
		*src++ = '\0';
		bad |= json_array_append_new(a, json_pack("{s:o, s:o, s:o}", "path", jstr(e), "key",
							  jstr(key), "source", jstr(src)));
	}
	return checked(a, bad);
}

static json_t *json_hidden(const ab_plan *p)
{
	json_t *a = strv_json(&p->hidden);
	int bad = !a;
	for (size_t i = 0; a && i < p->nmounts; i++)
		if (mask_listed(p, &p->mounts[i]))
			bad |= json_array_append_new(a, jstr(p->mounts[i].dst));
	return checked(a, bad);
}

static json_t *json_secrets(const ab_plan *p)
{
	const ab_egress_plan *e = &p->egress;
	json_t *a = json_array();
	int bad = !a;
	for (size_t i = 0; a && i < e->nsecrets; i++) {
		const struct ab_profile_secret *x = &e->secrets[i];
		char src[300], by[128];
		json_t *o = json_object();
		const char *var = x->env_name ? x->env_name : x->name;
		bad |= !o || json_object_set_new(o, "name", jstr(x->name)) ||
		       json_object_set_new(o, "source", jstr(secret_source(x, src, sizeof(src)))) ||
		       json_object_set_new(o, "hosts", strv_json(&x->hosts)) ||
		       json_object_set_new(o, "in", strv_json(&x->places)) ||
		       json_object_set_new(o, "mask_in_body", json_boolean(x->mask_in_body)) ||
		       json_object_set_new(o, "elsewhere",
					   jstr(secret_elsewhere(e, x, by, sizeof(by)))) ||
		       json_object_set_new(o, "elsewhere_by", jstr(by)) ||
		       json_object_set_new(o, "optional", json_boolean(x->optional)) ||
		       json_object_set_new(o, "render", json_boolean(x->render)) ||
		       json_object_set_new(o, "env", var[0] ? jstr(var) : json_null());
		bad |= json_array_append_new(a, o);
	}
	return checked(a, bad);
}

static json_t *json_network(const ab_plan *p)
{
	const ab_ll_plan *ll = &p->landlock;
	const ab_egress_plan *e = &p->egress;
	json_t *o = json_object(), *ports, *tports = json_array();
	int bad = !o || !tports;
	if (ll->tcp_any) {
		ports = jstr("any");
	} else {
		ports = json_array();
		for (size_t i = 0; ports && i < ll->ntcp_ports; i++)
			bad |= json_array_append_new(ports, json_integer(ll->tcp_ports[i]));
	}
	for (size_t i = 0; tports && i < e->nports; i++)
		bad |= json_array_append_new(tports, json_integer(e->ports[i]));
	bad |= json_object_set_new(o, "mode", jstr("proxy"));
	bad |= json_object_set_new(o, "proxy_port", json_integer(e->proxy_port));
	bad |= json_object_set_new(o, "transparent", json_boolean(e->transparent));
	bad |= json_object_set_new(o, "transparent_ports", tports);
	bad |= json_object_set_new(o, "allow", strv_json(&e->allow));
	bad |= json_object_set_new(o, "deny", strv_json(&e->deny));
	bad |= json_object_set_new(o, "private", strv_json(&e->priv));
	bad |= json_object_set_new(o, "hosts", strv_json(&e->hosts));
	bad |= json_object_set_new(o, "log", e->log_path ? jstr(e->log_path) : json_null());
	if (e->upstream_host) {
		json_t *u = json_object();
		bad |= !u || json_object_set_new(u, "host", jstr(e->upstream_host)) ||
		       json_object_set_new(u, "port", json_integer(e->upstream_port)) ||
		       json_object_set_new(u, "no_proxy", strv_json(&e->no_proxy));
		bad |= json_object_set_new(o, "upstream_proxy", u);
	} else {
		bad |= json_object_set_new(o, "upstream_proxy", json_null());
	}
	bad |= json_object_set_new(o, "loopback_ports", ports);
	bad |= json_object_set_new(o, "loopback_ports_enforced",
				   json_boolean(ll->enabled && (ll->tcp_any || ll->handled_net)));
	return checked(o, bad);
}

static json_t *json_env(const ab_plan *p)
{
	json_t *o = json_object(), *names = json_array(), *values = json_object();
	int bad = !o || !names || !values;
	for (size_t i = 0; names && values && i < p->envp.n; i++) {
		const char *kv = p->envp.v[i];
		size_t len = strcspn(kv, "=");
		char *n = strndup(kv, len);
		json_t *name = n ? jstr(n) : NULL;
		free(n);
		bad |= json_array_append(names, name);
		if (name && kv[len] == '=' && env_value_shown(kv, len))
			bad |= json_object_setn_new(values, kv, len, jstr(kv + len + 1));
		json_decref(name);
	}
	bad |= json_object_set_new(o, "names", names);
	bad |= json_object_set_new(o, "values", values);
	return checked(o, bad);
}

static json_t *json_landlock(const ab_plan *p)
{
	const ab_ll_plan *ll = &p->landlock;
	json_t *o = json_object(), *rules = json_array();
	int bad = !o || !rules;
	char rights[512];
	for (size_t i = 0; rules && i < ll->nrules; i++) {
		json_t *r = json_object();
		rights_text(ll->rules[i].access, 0, rights, sizeof(rights));
		bad |= json_object_set_new(r, "path", jstr(ll->rules[i].path));
		bad |= json_object_set_new(r, "access", jstr(rights));
		bad |= json_object_set_new(r, "access_bits",
					   json_integer((json_int_t)ll->rules[i].access));
		bad |= json_array_append_new(rules, r);
	}
	bad |= json_object_set_new(o, "abi", json_integer(ll->abi));
	bad |= json_object_set_new(o, "enabled", json_boolean(ll->enabled));
	bad |= json_object_set_new(o, "handled_fs", json_integer((json_int_t)ll->handled_fs));
	bad |= json_object_set_new(o, "handled_net", json_integer((json_int_t)ll->handled_net));
	bad |= json_object_set_new(o, "scoped", json_integer((json_int_t)ll->scoped));
	bad |= json_object_set_new(o, "rules", rules);
	return checked(o, bad);
}

static json_t *rlim_json(rlim_t v)
{
	return v == RLIM_INFINITY ? jstr("unlimited") : json_integer((json_int_t)v);
}

static json_t *json_limits(const ab_plan *p)
{
	json_t *o = json_object(), *rl = json_object();
	int bad = !o || !rl;
	for (size_t i = 0; rl && i < p->nrlimits; i++) {
		json_t *r = json_object();
		bad |= json_object_set_new(r, "soft", rlim_json(p->rlimits[i].soft));
		bad |= json_object_set_new(r, "hard", rlim_json(p->rlimits[i].hard));
		if (p->rlimits[i].asked)
			bad |= json_object_set_new(r, "asked", rlim_json(p->rlimits[i].asked));
		bad |= json_object_set_new(rl, rlimit_name(p->rlimits[i].resource), r);
	}
	bad |= json_object_set_new(o, "rlimits", rl);
	bad |= json_object_set_new(o, "memory",
				   p->cg_memory == AB_LIMIT_UNSET ? json_null()
								  : json_integer(p->cg_memory));
	bad |= json_object_set_new(
		o, "pids", p->cg_pids == AB_LIMIT_UNSET ? json_null() : json_integer(p->cg_pids));
	bad |= json_object_set_new(o, "cgroup", json_boolean(p->cgroup_apply));
	return checked(o, bad);
}

static int explain_json(const ab_plan *p, const ab_profile *prof, const ab_strv *sc, FILE *out)
{
	json_t *o = json_object();
	int bad = !o;
	bad |= json_object_set_new(o, "profile", json_profile(prof));
	bad |= json_object_set_new(o, "identity", json_identity(p));
	bad |= json_object_set_new(o, "workspace", jstr(p->workspace ? p->workspace : ""));
	bad |= json_object_set_new(o, "cwd", jstr(p->cwd ? p->cwd : ""));
	if (p->review) { /* absent: "direct" */
		bad |= json_object_set_new(o, "workspace_mode", jstr("review"));
		bad |= json_object_set_new(o, "review_dir", jstr(p->review_dir));
	}
	bad |= json_object_set_new(o, "command", strv_json(&p->argv));
	bad |= json_object_set_new(o, "mounts", json_mounts(p, NULL));
	bad |= json_object_set_new(o, "readable", json_mounts(p, pick_ro));
	bad |= json_object_set_new(o, "writable", json_mounts(p, pick_rw));
	bad |= json_object_set_new(o, "hidden", json_hidden(p));
	bad |= json_object_set_new(o, "protected", json_mounts(p, pick_protect));
	if (p->gitcfg.n)
		bad |= json_object_set_new(o, "gitconfig", json_gitcfg(p));
	if (p->guard.n)
		bad |= json_object_set_new(o, "guarded", strv_json(&p->guard));
	bad |= json_object_set_new(o, "absent", strv_json(&p->absent));
	bad |= json_object_set_new(o, "network", json_network(p));
	bad |= json_object_set_new(o, "secrets", json_secrets(p));
	bad |= json_object_set_new(o, "env", json_env(p));
	bad |= json_object_set_new(o, "seccomp",
				   p->seccomp.disabled ? json_array() : strv_json(sc));
	bad |= json_object_set_new(o, "seccomp_enabled", json_boolean(!p->seccomp.disabled));
	bad |= json_object_set_new(o, "setid_checked",
				   json_pack("{s:b, s:s?}", "enforced",
					     !p->seccomp.disabled && !p->seccomp.setid_unchecked,
					     "why", p->setid_why));
	bad |= json_object_set_new(o, "record",
				   json_pack("{s:b, s:b}", "exec", p->seccomp.notify_exec,
					     "denials", p->seccomp.notify_denials));
	bad |= json_object_set_new(o, "connect_mediated", json_boolean(p->seccomp.notify_connect));
	bad |= json_object_set_new(o, "nested_repos_disarmed", json_boolean(p->git_settle));
	bad |= json_object_set_new(
		o, "keyring",
		p->keyring_skip ? json_pack("{s:s, s:s}", "session", "skipped", "refused",
					    strerrorname_np(p->keyring_skip)
						    ? strerrorname_np(p->keyring_skip)
						    : "?")
				: json_pack("{s:s}", "session", "fresh"));
	bad |= json_object_set_new(o, "landlock", json_landlock(p));
	bad |= json_object_set_new(o, "limits", json_limits(p));
	bad |= json_object_set_new(o, "pty", jstr(pty_name(p)));
	bad |= json_object_set_new(o, "clipboard", jstr(p->pass_clipboard ? "passed" : "filtered"));
	bad |= json_object_set_new(o, "downgrades", strv_json(&p->downgrades));
	bad |= json_object_set_new(o, "warnings", strv_json(&p->warnings));
	if (!bad)
		bad = json_dumpf(o, out, JSON_INDENT(2)) < 0 || fputc('\n', out) == EOF;
	json_decref(o);
	return bad ? -ENOMEM : 0;
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
		r = explain_json(p, prof, &sc, out);
	else
		r = explain_text(p, prof, &sc, &ll, out);
	if (r < 0)
		return ab_fail(err, -r, "explain");
	if (fflush(out) == EOF || ferror(out))
		return ab_fail(err, EIO, "explain: writing the output");
	return 0;
}
