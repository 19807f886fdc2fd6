/* SPDX-License-Identifier: MIT */
/*
 * `agentbox report` (parent, pure): the model (report_int.h) as text for a
 * terminal.  Every string of a log may come from inside the sandbox: each
 * is printed through ab_report_sanitize, capped to a width.
 */
#include "report_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ sanitizing */

static bool escaped_cp(uint32_t cp)
{
	return cp < 0x20 || (cp >= 0x7f && cp <= 0x9f) || cp == 0x061c || cp == 0x200e ||
	       cp == 0x200f || (cp >= 0x2028 && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069);
}

/* One output unit at s[0..n): bytes consumed; *cols its width; *esc true
 * when each consumed byte is shown as \xNN. */
static size_t unit(const unsigned char *s, size_t n, size_t *cols, bool *esc)
{
	unsigned char c = s[0];
	*esc = false;
	if (c == '\\') {
		*cols = 2;
		return 1;
	}
	if (c < 0x80) {
		*esc = escaped_cp(c);
		*cols = *esc ? 4 : 1;
		return 1;
	}
	size_t len = c >= 0xf0 && c <= 0xf4 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 && c < 0xe0 ? 2 : 0;
	if (c > 0xf4)
		len = 0;
	uint32_t cp = len == 2 ? c & 0x1f : len == 3 ? c & 0x0f : c & 0x07;
	bool ok = len && len <= n;
	for (size_t i = 1; ok && i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			ok = false;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	if (ok && ((len == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
		   (len == 4 && (cp < 0x10000 || cp > 0x10ffff))))
		ok = false;
	if (!ok) {
		*esc = true;
		*cols = 4;
		return 1;
	}
	*esc = escaped_cp(cp);
	*cols = *esc ? 4 * len : 1;
	return len;
}

static void put_unit(FILE *out, const unsigned char *s, size_t k, bool esc)
{
	if (esc) {
		for (size_t i = 0; i < k; i++)
			fprintf(out, "\\x%02x", s[i]);
	} else if (k == 1 && s[0] == '\\') {
		fputs("\\\\", out);
	} else {
		fwrite(s, 1, k, out);
	}
}

size_t ab_report_sanitize(FILE *out, const char *str, size_t n, size_t max_cols)
{
	const unsigned char *s = (const unsigned char *)(str ? str : "");
	if (!str)
		n = 0;
	size_t len = strnlen((const char *)s, n), total = 0, cols, k;
	bool esc;
	for (size_t i = 0; i < len; i += k) {
		k = unit(s + i, len - i, &cols, &esc);
		total += cols;
	}
	size_t limit = max_cols && total > max_cols ? (max_cols > 3 ? max_cols - 3 : 0) : SIZE_MAX;
	size_t done = 0;
	for (size_t i = 0; i < len; i += k) {
		k = unit(s + i, len - i, &cols, &esc);
		if (done + cols > limit)
			break;
		put_unit(out, s + i, k, esc);
		done += cols;
	}
	if (limit != SIZE_MAX) {
		fputs("...", out);
		done += 3;
	}
	return done;
}

/* ------------------------------------------------------------------ text */

#define LIST_MAX 50 /* entries per list in the text report */
#define ARGV_COLS 100
#define CWD_COLS 60
#define INDENT_MAX 24

static void put(FILE *out, const char *s, size_t cols)
{
	ab_report_sanitize(out, s, SIZE_MAX, cols);
}

static void human_ms(char *out, size_t n, int64_t ms)
{
	if (ms < 0)
		snprintf(out, n, "?");
	else if (ms < 1000)
		snprintf(out, n, "%lld ms", (long long)ms);
	else if (ms < 60000)
		snprintf(out, n, "%.1f s", (double)ms / 1000);
	else if (ms < 3600000)
		snprintf(out, n, "%lld min %lld s", (long long)(ms / 60000),
			 (long long)(ms / 1000 % 60));
	else
		snprintf(out, n, "%lld h %lld min", (long long)(ms / 3600000),
			 (long long)(ms / 60000 % 60));
}

static void text_session(FILE *out, const session *s, const char *pre)
{
	char a[40], b[40], d[40];
	rep_fmt_ts(a, sizeof(a), s->start_ms != TS_NONE ? s->start_ms : s->first_ms);
	rep_fmt_ts(b, sizeof(b), s->end_ms != TS_NONE ? s->end_ms : s->last_ms);
	human_ms(d, sizeof(d), rep_session_ms(s));
	char st[40] = "";
	if (s->status >= 0)
		snprintf(st, sizeof(st), " (exit status %lld)", (long long)s->status);
	fprintf(out, "%sProfile:  ", pre);
	put(out, s->profile ? s->profile : (s->has_start ? "?" : "(no start record)"), 80);
	fprintf(out, "\n%sStarted:  %s\n%sEnded:    %s%s\n%sDuration: %s\n", pre, a, pre, b,
		s->has_end ? st : " (no end record: still running, or agentbox was killed)", pre,
		d);
	if (s->ngrants || s->grants_cut) {
		fprintf(out, "%sGrants:  ", pre);
		for (size_t i = 0; i < s->ngrants; i++) {
			fputc(' ', out);
			put(out, s->grants[i], 100);
		}
		fprintf(out, "%s\n", s->grants_cut ? " ..." : "");
	}
}

static void status_label(char *buf, size_t n, const cmd *c)
{
	if (c->replaced && !c->exited)
		snprintf(buf, n, "exec");
	else if (!c->exited || (!c->has_status && !c->has_signal))
		snprintf(buf, n, "?");
	else if (c->has_signal) {
		const char *name = c->sig > 0 && c->sig < 65 ? sigabbrev_np((int)c->sig) : NULL;
		if (name)
			snprintf(buf, n, "signal %lld (SIG%s)", (long long)c->sig, name);
		else
			snprintf(buf, n, "signal %lld", (long long)c->sig);
	} else
		snprintf(buf, n, "exit %lld", (long long)c->status);
}

static bool needs_quote(const char *s)
{
	if (!s[0])
		return true;
	for (; *s; s++)
		if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_@%+=:,./-",
			    *s))
			return true;
	return false;
}

/* argv shell-quoted (a quote as '"'"', no backslash the sanitizer would
 * double), then sanitized, capped at cols. */
static void put_argv(FILE *out, const cmd *c, size_t cols)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&buf, &len);
	if (!m)
		return;
	if (!c->argc)
		fputs(c->path ? c->path : "?", m);
	for (uint32_t i = 0; i < c->argc; i++) {
		const char *a = c->argv[i];
		if (i)
			fputc(' ', m);
		if (!needs_quote(a)) {
			fputs(a, m);
			continue;
		}
		fputc('\'', m);
		for (; *a; a++)
			fputs(*a == '\'' ? "'\"'\"'" : (char[]){*a, 0}, m);
		fputc('\'', m);
	}
	if (fclose(m) == 0)
		put(out, buf, cols);
	free(buf);
	if (c->truncated)
		fputs(" [truncated]", out);
}

static bool same_line(const cmd *a, const cmd *b)
{
	if (a->first_child != NONE || b->first_child != NONE || a->argc != b->argc ||
	    a->cwd != b->cwd || a->path != b->path || a->truncated != b->truncated ||
	    a->exited != b->exited || a->replaced != b->replaced ||
	    a->has_status != b->has_status || a->has_signal != b->has_signal ||
	    (a->has_status && a->status != b->status) || (a->has_signal && a->sig != b->sig))
		return false;
	return !a->argc || memcmp(a->argv, b->argv, a->argc * sizeof(*a->argv)) == 0;
}

/* The siblings from N on that print as one line: the last of them, *K how
 * many, *MS their run time in all (-1 when one's is unknown). */
static uint32_t same_run(const ab_report *r, uint32_t n, uint64_t *k, int64_t *ms)
{
	const cmd *c = &r->cmds.v[n];
	uint32_t m = n;
	*k = 1;
	*ms = c->ms;
	while (r->cmds.v[m].next != NONE && same_line(c, &r->cmds.v[r->cmds.v[m].next])) {
		m = r->cmds.v[m].next;
		(*k)++;
		*ms = *ms >= 0 && r->cmds.v[m].ms >= 0 ? *ms + r->cmds.v[m].ms : -1;
	}
	return m;
}

/* C's line (K times, MS in all) at DEPTH.  Its cwd is shown when it is not
 * its parent's (a top-level command's parent: PREV_ROOT, the top-level
 * command before it, within its session). */
static void text_cmd_line(const ab_report *r, FILE *out, const cmd *c, size_t depth,
			  uint32_t prev_root, uint64_t k, int64_t ms)
{
	if (c->parent == NONE && r->ses.n > 1 &&
	    (prev_root == NONE || r->cmds.v[prev_root].session != c->session))
		fprintf(out, "  [session %u]\n", c->session + 1);
	fputs("  ", out);
	for (size_t i = 0; i < depth && i < INDENT_MAX; i++)
		fputs("  ", out);
	if (depth > INDENT_MAX)
		fprintf(out, "[depth %zu] ", depth);
	put_argv(out, c, ARGV_COLS);
	char st[64], t[40];
	status_label(st, sizeof(st), c);
	human_ms(t, sizeof(t), ms);
	fprintf(out, "  [%s%s%s]", st, ms >= 0 ? ", " : "", ms >= 0 ? t : "");
	if (k > 1)
		fprintf(out, " (%llu times)", (unsigned long long)k);
	const char *pcwd = c->parent != NONE ? r->cmds.v[c->parent].cwd
			   : prev_root != NONE && r->cmds.v[prev_root].session == c->session
				   ? r->cmds.v[prev_root].cwd
				   : NULL;
	if (c->cwd && c->cwd != pcwd) {
		fputs("  in ", out);
		put(out, c->cwd, CWD_COLS);
	}
	fputc('\n', out);
}

/* The tree, depth first, without recursion (parents precede children) */
static void text_commands(const ab_report *r, FILE *out, size_t max_lines)
{
	fprintf(out, "\nCommands (%zu)\n", r->cmds.n);
	if (!r->cmds.n) {
		fprintf(out, "  none recorded%s\n",
			r->execs ? "" : " (this log has no exec records)");
		return;
	}
	size_t lines = 0, shown = 0, depth = 0;
	uint32_t n = r->first_root, prev_root = NONE;
	while (n != NONE) {
		const cmd *c = &r->cmds.v[n];
		uint64_t k;
		int64_t ms;
		uint32_t m = same_run(r, n, &k, &ms);
		if (lines >= max_lines)
			break;
		text_cmd_line(r, out, c, depth, prev_root, k, ms);
		lines++;
		shown += k;
		if (c->parent == NONE)
			prev_root = n;
		if (c->first_child != NONE) {
			n = c->first_child;
			depth++;
			continue;
		}
		n = m;
		while (n != NONE && r->cmds.v[n].next == NONE) {
			n = r->cmds.v[n].parent;
			depth--;
		}
		if (n != NONE) {
			if (r->cmds.v[n].parent == NONE)
				prev_root = n;
			n = r->cmds.v[n].next;
		}
	}
	if (shown < r->cmds.n)
		fprintf(out,
			"  ... %zu more command%s not shown (agentbox report --json lists all)\n",
			r->cmds.n - shown, plural(r->cmds.n - shown, "", "s"));
}

static void more(FILE *out, size_t n)
{
	if (n > LIST_MAX)
		fprintf(out, "    ... %zu more\n", n - LIST_MAX);
}

/* The lists below are printed in the order of A, B, D (rep_sorted) */
static void text_reached(const ab_report *r, const uint32_t *a, FILE *out)
{
	uint64_t up = 0, down = 0;
	for (size_t i = 0; i < r->reached.n; i++) {
		up = sat_add(up, r->reached.v[i].up);
		down = sat_add(down, r->reached.v[i].down);
	}
	char u[32], dn[32];
	ab_fmt_bytes(u, sizeof(u), up);
	ab_fmt_bytes(dn, sizeof(dn), down);
	fprintf(out, "  reached: %zu destination%s, %llu request%s, %s up, %s down\n", r->reached.n,
		plural(r->reached.n, "", "s"), (unsigned long long)r->req_allowed,
		plural(r->req_allowed, "", "s"), u, dn);
	for (size_t i = 0; i < r->reached.n && i < LIST_MAX; i++) {
		const agg *h = &r->reached.v[a[i]];
		ab_fmt_bytes(u, sizeof(u), h->up);
		ab_fmt_bytes(dn, sizeof(dn), h->down);
		fputs("    ", out);
		put(out, h->a, 80);
		fprintf(out, ":%u  %llu request%s, %s up, %s down\n", h->port,
			(unsigned long long)h->n, plural(h->n, "", "s"), u, dn);
	}
	more(out, r->reached.n);
}

static void text_refused(const ab_report *r, const uint32_t *b, FILE *out)
{
	fprintf(out, "  refused: %llu request%s\n", (unsigned long long)r->req_denied,
		plural(r->req_denied, "", "s"));
	for (size_t i = 0; i < r->refused.n && i < LIST_MAX; i++) {
		const agg *h = &r->refused.v[b[i]];
		fputs("    ", out);
		put(out, h->a, 80);
		fprintf(out, ":%u  %llu attempt%s, rule ", h->port, (unsigned long long)h->n,
			plural(h->n, "", "s"));
		put(out, h->b ? h->b : "-", 40);
		if (h->c) {
			fputs(": ", out);
			put(out, h->c, 160);
		}
		fputc('\n', out);
	}
	more(out, r->refused.n);
}

static void text_dns(const ab_report *r, const uint32_t *d, FILE *out)
{
	fprintf(out, "  DNS: %llu lookup%s answered, %llu refused\n",
		(unsigned long long)r->dns_allowed, plural(r->dns_allowed, "", "s"),
		(unsigned long long)r->dns_denied);
	for (size_t i = 0; i < r->dns.n && i < LIST_MAX; i++) {
		const agg *h = &r->dns.v[d[i]];
		fputs("    ", out);
		put(out, h->a, 80);
		fprintf(out, "  %llu lookup%s", (unsigned long long)h->n, plural(h->n, "", "s"));
		if (h->b) {
			fputs(" (", out);
			put(out, h->b, 20);
			fputc(')', out);
		}
		fputc('\n', out);
	}
	more(out, r->dns.n);
}

static int text_network(const ab_report *r, FILE *out)
{
	fputs("\nNetwork\n", out);
	if (!r->req_allowed && !r->req_denied && !r->dns_denied && !r->dns_allowed) {
		fputs("  no requests\n", out);
		return 0;
	}
	_cleanup_free_ uint32_t *a = rep_sorted(r->reached.v, r->reached.n, false);
	_cleanup_free_ uint32_t *b = rep_sorted(r->refused.v, r->refused.n, false);
	_cleanup_free_ uint32_t *d = rep_sorted(r->dns.v, r->dns.n, false);
	if (!a || !b || !d)
		return -ENOMEM;
	text_reached(r, a, out);
	text_refused(r, b, out);
	text_dns(r, d, out);
	return 0;
}

static void put_err(FILE *out, const char *e)
{
	if (e) {
		fputs(" (", out);
		put(out, e, 20);
		fputc(')', out);
	}
}

/* Denied syscalls, by S (sorted) */
static void text_denied_sys(const ab_report *r, const uint32_t *s, FILE *out)
{
	fprintf(out, "  syscalls: %llu\n", (unsigned long long)r->sys_total);
	for (size_t i = 0; i < r->sys.n && i < LIST_MAX; i++) {
		const agg *a = &r->sys.v[s[i]];
		fputs("    ", out);
		put(out, a->a, 40);
		fputs(" by ", out);
		put(out, a->b ? a->b : "?", 40);
		fprintf(out, "  %llu time%s", (unsigned long long)a->n, plural(a->n, "", "s"));
		put_err(out, a->c);
		fputc('\n', out);
	}
	more(out, r->sys.n);
	if (r->suppressed)
		fprintf(out, "    %llu more record%s suppressed by the rate limit\n",
			(unsigned long long)r->suppressed, plural(r->suppressed, "", "s"));
}

static void text_denied_files(const ab_report *r, const uint32_t *f, FILE *out)
{
	fprintf(out, "  files: %llu\n", (unsigned long long)r->file_total);
	for (size_t i = 0; i < r->file.n && i < LIST_MAX; i++) {
		const agg *a = &r->file.v[f[i]];
		fputs("    ", out);
		put(out, a->b ? a->b : "?", 20);
		fputc(' ', out);
		put(out, a->a, 80);
		fputs(" by ", out);
		put(out, a->c ? a->c : "?", 40);
		fprintf(out, "  %llu time%s", (unsigned long long)a->n, plural(a->n, "", "s"));
		put_err(out, a->d);
		fputc('\n', out);
	}
	more(out, r->file.n);
}

/* NET counts refused requests and lookups too (listed under Network); the
 * connects refused (traced, or a host's unix socket) are listed here. */
static void text_denied_net(const ab_report *r, uint64_t net, const uint32_t *n, FILE *out)
{
	fprintf(out,
		"  network: %llu (%llu request%s refused, %llu DNS lookup%s refused, "
		"%llu connect%s refused)\n",
		(unsigned long long)net, (unsigned long long)r->req_denied,
		plural(r->req_denied, "", "s"), (unsigned long long)r->dns_denied,
		plural(r->dns_denied, "", "s"), (unsigned long long)r->net_total,
		plural(r->net_total, "", "s"));
	for (size_t i = 0; i < r->net.n && i < LIST_MAX; i++) {
		const agg *a = &r->net.v[n[i]];
		fputs("    connect ", out);
		put(out, a->b ? a->b : "?", 10);
		fputc(' ', out);
		put(out, a->a ? a->a : "?", 80);
		if (a->b && strcmp(a->b, "unix") == 0)
			fputs(" by ", out); /* a socket's path: no port */
		else
			fprintf(out, " port %u by ", a->port);
		put(out, a->c ? a->c : "?", 40);
		fprintf(out, "  %llu time%s", (unsigned long long)a->n, plural(a->n, "", "s"));
		put_err(out, a->d);
		fputc('\n', out);
	}
	more(out, r->net.n);
}

static int text_denials(const ab_report *r, FILE *out)
{
	uint64_t net = sat_add(sat_add(r->req_denied, r->dns_denied), r->net_total);
	uint64_t total =
		sat_add(sat_add(sat_add(r->sys_total, r->file_total), net), r->other_total);
	fprintf(out, "\nDenials (%llu)\n", (unsigned long long)total);
	_cleanup_free_ uint32_t *s = rep_sorted(r->sys.v, r->sys.n, false);
	_cleanup_free_ uint32_t *f = rep_sorted(r->file.v, r->file.n, false);
	_cleanup_free_ uint32_t *n = rep_sorted(r->net.v, r->net.n, false);
	_cleanup_free_ uint32_t *o = rep_sorted(r->other.v, r->other.n, false);
	if (!s || !f || !n || !o)
		return -ENOMEM;
	text_denied_sys(r, s, out);
	text_denied_files(r, f, out);
	text_denied_net(r, net, n, out);
	if (r->other_total) {
		fprintf(out, "  other: %llu\n", (unsigned long long)r->other_total);
		for (size_t i = 0; i < r->other.n && i < LIST_MAX; i++) {
			fputs("    ", out);
			put(out, r->other.v[o[i]].a, 40);
			fprintf(out, "  %llu\n", (unsigned long long)r->other.v[o[i]].n);
		}
		more(out, r->other.n);
	}
	return 0;
}

/* Security-relevant findings, in log order, each message in full up to
 * WARN_COLS; "... N more" counts the events not shown (kept or not). */
#define WARN_COLS 300

static void text_warnings(const ab_report *r, FILE *out)
{
	if (!r->warnings)
		return;
	fprintf(out, "\nWarnings (%llu)\n", (unsigned long long)r->warnings);
	uint64_t shown = 0;
	for (size_t i = 0; i < r->warns.n && i < LIST_MAX; i++) {
		const agg *w = &r->warns.v[i];
		fputs("  ", out);
		if (r->ses.n > 1)
			fprintf(out, "[session %u] ", w->port + 1);
		put(out, w->a ? w->a : "?", 20);
		fputs(": ", out);
		put(out, w->b, WARN_COLS);
		if (w->n > 1)
			fprintf(out, " x%llu", (unsigned long long)w->n);
		fputc('\n', out);
		shown = sat_add(shown, w->n);
	}
	if (shown < r->warnings)
		fprintf(out, "  ... %llu more\n", (unsigned long long)(r->warnings - shown));
}

/* Renames onto a rendered credentials file: saved ones, then refused ones. */
static void text_creds(const ab_report *r, const uint32_t *ix, bool refused, FILE *out)
{
	size_t shown = 0, n = 0;
	for (size_t i = 0; i < r->creds.n; i++) {
		const agg *a = &r->creds.v[ix[i]];
		if ((a->port != 0) != refused)
			continue;
		n++;
		if (shown >= LIST_MAX)
			continue;
		shown++;
		fputs(refused ? "  credentials files refused: "
			      : "  credentials files saved inside: ",
		      out);
		put(out, a->a, 120);
		if (a->b) {
			fputs(" (", out);
			put(out, a->b, 120);
			fputc(')', out);
		}
		fprintf(out, " x%llu\n", (unsigned long long)a->n);
	}
	more(out, n);
}

static int text_secrets(const ab_report *r, FILE *out)
{
	fputs("\nSecrets\n", out);
	_cleanup_free_ uint32_t *k = rep_sorted(r->skipped.v, r->skipped.n, true);
	if (!k)
		return -ENOMEM;
	for (size_t i = 0; i < r->skipped.n && i < LIST_MAX; i++) {
		fputs("  ", out);
		put(out, r->skipped.v[k[i]].a, 40);
		fputs(" not loaded: its source was absent (optional)\n", out);
	}
	more(out, r->skipped.n);
	_cleanup_free_ uint32_t *s = rep_sorted(r->secrets.v, r->secrets.n, true);
	_cleanup_free_ uint32_t *cr = rep_sorted(r->creds.v, r->creds.n, true);
	if (!s || !cr)
		return -ENOMEM;
	if (!r->secrets.n && !r->cred_saved && !r->cred_refused)
		fputs("  none used\n", out);
	for (size_t i = 0; i < r->secrets.n && i < LIST_MAX; i++) {
		const agg *a = &r->secrets.v[s[i]];
		fputs("  ", out);
		put(out, a->a, 40);
		fputs(" -> ", out);
		put(out, a->b, 80);
		fprintf(out, ":%u  ", a->port);
		if (a->n || a->m || !a->e)
			fprintf(out, "%llu request%s", (unsigned long long)a->n,
				plural(a->n, "", "s"));
		if (a->m)
			fprintf(out, ", masked in %llu", (unsigned long long)a->m);
		if (a->e)
			fprintf(out,
				"%splaceholder sent on unchanged in %llu request%s (not bound "
				"there)",
				a->n || a->m ? ", " : "", (unsigned long long)a->e,
				plural(a->e, "", "s"));
		fputc('\n', out);
	}
	more(out, r->secrets.n);
	text_creds(r, cr, false, out);
	text_creds(r, cr, true, out);
	return 0;
}

static void text_policy(const ab_report *r, FILE *out)
{
	fputs("\nRuntime policy changes\n", out);
	if (!r->policies) {
		fputs("  none\n", out);
		return;
	}
	for (size_t i = 0; i < r->pol.n && i < LIST_MAX; i++) {
		const policy *p = &r->pol.v[i];
		char t[40];
		rep_fmt_ts(t, sizeof(t), p->ts);
		fprintf(out, "  %s  ", t);
		put(out, p->action ? p->action : "?", 20);
		fputc(' ', out);
		put(out, p->rule, 100);
		if (p->by_pid >= 0)
			fprintf(out, "  (by pid %lld)", (long long)p->by_pid);
		if (p->by) {
			fputs("  (by ", out);
			put(out, p->by, 40);
			fputc(')', out);
		}
		fputc('\n', out);
	}
	if (r->policies > LIST_MAX)
		fprintf(out, "  ... %llu more\n", (unsigned long long)(r->policies - LIST_MAX));
}

/* run --ask: each answer with its question, in log order */
static void text_asks(const ab_report *r, FILE *out)
{
	if (!r->ask_questions && !r->ask_answers)
		return;
	fprintf(out, "\nQuestions asked (run --ask): %llu question%s, %llu answer%s\n",
		(unsigned long long)r->ask_questions, plural(r->ask_questions, "", "s"),
		(unsigned long long)r->ask_answers, plural(r->ask_answers, "", "s"));
	for (size_t i = 0; i < r->asks.n && i < LIST_MAX; i++) {
		const askrec *a = &r->asks.v[i];
		char t[40], w[32];
		rep_fmt_ts(t, sizeof(t), a->ts);
		human_ms(w, sizeof(w), a->waited_ms);
		fprintf(out, "  %s  ", t);
		put(out, a->host, 80);
		fprintf(out, ":%lld  ", (long long)a->port);
		put(out, a->answer, 20);
		fprintf(out, " (after %s)", w);
		if (a->profile) {
			fputs(", written to ", out);
			put(out, a->profile, 120);
		}
		if (a->note) {
			fputs(", ", out);
			put(out, a->note, 160);
		}
		fputc('\n', out);
		const char *sub[] = {a->request, a->program};
		static const char *const what[] = {"request", "program"};
		for (size_t k = 0; k < 2; k++) {
			if (!sub[k])
				continue;
			fprintf(out, "      %s  ", what[k]);
			put(out, sub[k], 120);
			fputc('\n', out);
		}
	}
	more(out, r->asks.n);
	if (r->ask_questions > r->ask_answers)
		fprintf(out, "  %llu question%s without an answer in the log\n",
			(unsigned long long)(r->ask_questions - r->ask_answers),
			plural(r->ask_questions - r->ask_answers, "", "s"));
}

#define REVIEW_LIST 20 /* paths per list of one review step in the text */

static void text_paths(FILE *out, const char *what, const pathlist *l)
{
	for (uint32_t i = 0; i < l->n && i < REVIEW_LIST; i++) {
		fprintf(out, "      %-9s ", what);
		put(out, l->path[i], 120);
		if (l->why[i]) {
			fputs(" (", out);
			put(out, l->why[i], 120);
			fputc(')', out);
		}
		fputc('\n', out);
	}
	uint64_t all = l->total > (int64_t)l->n ? (uint64_t)l->total : l->n;
	if (all > REVIEW_LIST)
		fprintf(out, "      ... %llu more\n", (unsigned long long)(all - REVIEW_LIST));
}

/* run --ask's offers at exit: each answer with its paths and lines */
static void text_path_asks(const ab_report *r, FILE *out)
{
	if (!r->path_offers && !r->path_answers)
		return;
	fprintf(out, "\nPaths offered at exit (run --ask): %llu offer%s, %llu answer%s\n",
		(unsigned long long)r->path_offers, plural(r->path_offers, "", "s"),
		(unsigned long long)r->path_answers, plural(r->path_answers, "", "s"));
	for (size_t i = 0; i < r->pathasks.n && i < LIST_MAX; i++) {
		const pathaskrec *a = &r->pathasks.v[i];
		char t[40], w[32];
		rep_fmt_ts(t, sizeof(t), a->ts);
		human_ms(w, sizeof(w), a->waited_ms);
		fprintf(out, "  %s  ", t);
		put(out, a->answer, 20);
		fprintf(out, " (after %s)", w);
		if (a->profile && a->answer && strcmp(a->answer, "yes") == 0 && !a->note) {
			fputs(", written to ", out);
			put(out, a->profile, 120);
		}
		if (a->note) {
			fputs(", ", out);
			put(out, a->note, 160);
		}
		fputc('\n', out);
		text_paths(out, "refused", &a->paths);
		text_paths(out, "line", &a->lines);
	}
	more(out, r->pathasks.n);
}

static void text_review_one(const revrec *v, const revrec *prev, FILE *out)
{
	char t[40];
	rep_fmt_ts(t, sizeof(t), v->ts);
	fprintf(out, "  %s  ", t);
	put(out, v->action, 20);
	bool lists = v->applied.total >= 0 || v->left_out.total >= 0 || v->failed.total >= 0;
	if (v->changes >= 0)
		fprintf(out, "%s %lld change%s", lists ? ", of" : ":", (long long)v->changes,
			plural(v->changes, "", "s"));
	if (v->added >= 0 && v->modified >= 0 && v->deleted >= 0)
		fprintf(out, " (%lld added, %lld modified, %lld deleted)", (long long)v->added,
			(long long)v->modified, (long long)v->deleted);
	if (v->incomplete)
		fputs(", INCOMPLETE listing", out);
	if (v->diff == 1)
		fputs(", as a diff", out);
	if (lists)
		fprintf(out, "; %lld applied, %lld left out, %lld failed",
			(long long)(v->applied.total > 0 ? v->applied.total : 0),
			(long long)(v->left_out.total > 0 ? v->left_out.total : 0),
			(long long)(v->failed.total > 0 ? v->failed.total : 0));
	if (v->pending >= 0)
		fprintf(out, "; %lld still pending", (long long)v->pending);
	if (v->status >= 0)
		fprintf(out, " [exit %lld]", (long long)v->status);
	fputc('\n', out);
	bool same = prev && prev->workspace == v->workspace && prev->change_set == v->change_set;
	if (!same && (v->workspace || v->change_set)) {
		fputs("      workspace ", out);
		put(out, v->workspace ? v->workspace : "?", 120);
		fputs(", change set ", out);
		put(out, v->change_set ? v->change_set : "?", 160);
		fputc('\n', out);
	}
	text_paths(out, "applied", &v->applied);
	text_paths(out, "left out", &v->left_out);
	text_paths(out, "failed", &v->failed);
}

/* run --review's steps, in log order */
static void text_review(const ab_report *r, FILE *out)
{
	if (!r->reviews)
		return;
	fputs("\nReview (run --review, agentbox review / apply / discard)\n", out);
	for (size_t i = 0; i < r->revs.n && i < LIST_MAX; i++)
		text_review_one(&r->revs.v[i], i ? &r->revs.v[i - 1] : NULL, out);
	if (r->reviews > LIST_MAX)
		fprintf(out, "  ... %llu more\n", (unsigned long long)(r->reviews - LIST_MAX));
}

int ab_report_text(const ab_report *r, const ab_report_opts *o, FILE *out)
{
	size_t max_lines = o && o->max_lines ? o->max_lines : AB_REPORT_LINES;
	fputs("agentbox report", out);
	if (o && o->source) {
		fputs(": ", out);
		put(out, o->source, 0);
	}
	fputc('\n', out);
	if (!r->c.events && !r->c.bad_lines) {
		fputs("no events\n", out);
		return fflush(out) == 0 && !ferror(out) ? 0 : -EIO;
	}
	if (r->ses.n == 1) {
		text_session(out, &r->ses.v[0], "");
	} else if (r->ses.n > 1) {
		fprintf(out, "Sessions: %zu (the log holds several runs; the counts cover all)\n",
			r->ses.n);
		for (size_t i = 0; i < r->ses.n && i < 20; i++) {
			fprintf(out, "  [session %zu]\n", i + 1);
			text_session(out, &r->ses.v[i], "    ");
		}
		if (r->ses.n > 20)
			fprintf(out, "  ... %zu more sessions\n", r->ses.n - 20);
	}
	fprintf(out, "Events:   %llu", (unsigned long long)r->c.events);
	if (r->c.unknown)
		fprintf(out, " (%llu of kinds this agentbox does not know, ignored)",
			(unsigned long long)r->c.unknown);
	fputc('\n', out);
	text_warnings(r, out);
	text_commands(r, out, max_lines);
	if (r->exits_unmatched)
		fprintf(out, "  (%llu exit record%s without an exec record)\n",
			(unsigned long long)r->exits_unmatched,
			plural(r->exits_unmatched, "", "s"));
	if (text_network(r, out) < 0 || text_denials(r, out) < 0 || text_secrets(r, out) < 0)
		return -ENOMEM;
	text_policy(r, out);
	text_asks(r, out);
	text_path_asks(r, out);
	text_review(r, out);
	if (r->trace_exec || r->trace_connect || r->trace_lost) {
		fprintf(out,
			"\nKernel trace\n  %llu exec%s, %llu connect%s (%llu refused, %llu "
			"failed otherwise), %llu event%s lost\n",
			(unsigned long long)r->trace_exec, plural(r->trace_exec, "", "s"),
			(unsigned long long)r->trace_connect, plural(r->trace_connect, "", "s"),
			(unsigned long long)r->net_total, (unsigned long long)r->trace_failed,
			(unsigned long long)r->trace_lost, plural(r->trace_lost, "", "s"));
	}
	if (r->c.bad_lines || r->c.dropped)
		fputc('\n', out);
	if (r->c.bad_lines)
		fprintf(out, "%llu line%s could not be read (first: line %llu)\n",
			(unsigned long long)r->c.bad_lines, plural(r->c.bad_lines, "", "s"),
			(unsigned long long)r->c.first_bad);
	if (r->c.dropped)
		fprintf(out,
			"%llu event%s not kept in full: the report holds at most %zu items "
			"and %zu MiB of strings\n",
			(unsigned long long)r->c.dropped, plural(r->c.dropped, " was", "s were"),
			r->lim.max_items, r->lim.max_bytes >> 20);
	return fflush(out) == 0 && !ferror(out) ? 0 : -EIO;
}
