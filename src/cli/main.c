/* SPDX-License-Identifier: MIT */
/*
 * agentbox: cli -> profile -> host probe -> plan -> run / explain / check /
 * doctor.  The only place that prints errors and picks the exit status.
 */
#include <errno.h>
#include <openssl/crypto.h>
#include <seccomp.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/random.h>
#include <unistd.h>

#include "cli.h"
#include "agentbox/container.h"
#include "agentbox/control.h"
#include "agentbox/escape.h"
#include <jansson.h>
#include "agentbox/host.h"
#include "agentbox/otlp.h"
#include "agentbox/phkey.h"
#include "agentbox/plan.h"
#include "agentbox/profile.h"
#include "agentbox/report.h"
#include "agentbox/review.h"
#include "agentbox/sandbox.h"
#include "agentbox/seccomp.h"
#include "agentbox/trace.h"
#include "agentbox/unixsock.h"

extern char **environ;

/* Profile loader hook: one syscalls entry checked against the seccomp
 * module's rules, so the error carries FILE:LINE:COL. */
static int check_syscall(const char *list, const char *name, ab_err *err)
{
	char *v[2] = {(char *)name, NULL};
	ab_strv one = {v, 1};
	ab_seccomp_policy pol = {0};
	if (strcmp(list, "deny") == 0)
		pol.extra_deny = one;
	else
		pol.allow = one;
	int r = ab_seccomp_validate(&pol, err);
	if (r < 0) {
		/* the loader names the entry itself: drop "syscalls.deny: " */
		const char *colon = strstr(err->msg, ": ");
		if (colon && strncmp(err->msg, "syscalls.", 9) == 0)
			memmove(err->msg, colon + 2, strlen(colon + 2) + 1);
	}
	return r;
}

typedef struct ctx {
	char home[PATH_MAX];
	char workspace[PATH_MAX];
	char cwd[PATH_MAX];
	char user[256];
	char pw_home[PATH_MAX];
	char home_real[PATH_MAX], pw_home_real[PATH_MAX];
	const char *aliases[3];
	ab_vars vars;
} ctx;

static int fill_ctx(ctx *c, const char *workspace, ab_err *err)
{
	memset(c, 0, sizeof(*c));
	struct passwd *pw = getpwuid(geteuid());
	const char *home = getenv("HOME");
	if (!home || home[0] != '/')
		home = pw ? pw->pw_dir : NULL;
	if (!home || home[0] != '/')
		return ab_fail(err, 0, "cannot determine the home directory (set HOME)");
	_cleanup_free_ char *nh = ab_path_normalize(home);
	if (!nh || strlen(nh) >= sizeof(c->home))
		return ab_fail(err, ENAMETOOLONG, "HOME");
	strcpy(c->home, nh);
	if (pw && pw->pw_name)
		snprintf(c->user, sizeof(c->user), "%s", pw->pw_name);
	if (pw && pw->pw_dir && pw->pw_dir[0] == '/')
		snprintf(c->pw_home, sizeof(c->pw_home), "%s", pw->pw_dir);
	size_t na = 0;
	if (realpath(c->home, c->home_real))
		c->aliases[na++] = c->home_real;
	if (c->pw_home[0] && realpath(c->pw_home, c->pw_home_real))
		c->aliases[na++] = c->pw_home_real;
	c->aliases[na] = NULL;
	if (!getcwd(c->cwd, sizeof(c->cwd)))
		return ab_fail(err, errno, "getcwd");
	const char *ws = workspace ? workspace : c->cwd;
	if (!realpath(ws, c->workspace))
		return ab_fail(err, errno, "workspace %s", ws);
	struct stat st;
	if (stat(c->workspace, &st) < 0 || !S_ISDIR(st.st_mode))
		return ab_fail(err, ENOTDIR, "workspace %s", c->workspace);
	c->vars = (ab_vars){
		.home = c->home,
		.workspace = c->workspace,
		.user = c->user[0] ? c->user : NULL,
		.xdg_config_home = getenv("XDG_CONFIG_HOME"),
		.xdg_data_home = getenv("XDG_DATA_HOME"),
		.xdg_cache_home = getenv("XDG_CACHE_HOME"),
		.xdg_state_home = getenv("XDG_STATE_HOME"),
		.syscall_check = check_syscall,
	};
	/* relative or empty XDG values are ignored, per the spec */
	const char **x[] = {&c->vars.xdg_config_home, &c->vars.xdg_data_home,
			    &c->vars.xdg_cache_home, &c->vars.xdg_state_home};
	for (size_t i = 0; i < AB_ARRAY_SIZE(x); i++)
		if (*x[i] && (*x[i])[0] != '/')
			*x[i] = NULL;
	return 0;
}

/* NAMES (none: "default") loaded and merged in order */
static int load_profiles(const ab_strv *names, const ab_vars *vars, ab_profile **out, ab_err *err)
{
	ab_profile *merged = NULL;
	size_t n = names->n;
	for (size_t i = 0; i < (n ? n : 1); i++) {
		const char *name = n ? names->v[i] : "default";
		ab_profile *p = NULL;
		int r = ab_profile_load(name, vars, &p, err);
		if (r < 0) {
			if (merged)
				ab_profile_free(merged);
			return r;
		}
		if (!merged) {
			merged = p;
			continue;
		}
		r = ab_profile_merge(merged, p, err);
		ab_profile_free(p);
		if (r < 0) {
			ab_profile_free(merged);
			return r;
		}
	}
	*out = merged;
	return 0;
}

/* One command-line grant ("allow=HOST", "read=PATH", ...) as a one-key
 * profile, loaded through the profile loader (same validation, same
 * expansion) and merged over the profile.  Relative paths are the cwd's. */
static int apply_grant(const char *g, const ab_vars *vars, const char *cwd, ab_profile *prof,
		       ab_err *err)
{
	const char *eq = strchr(g, '=');
	const char *val = eq + 1;
	size_t klen = (size_t)(eq - g);
	_cleanup_free_ char *abs = NULL;
	if ((strncmp(g, "read", klen) == 0 || strncmp(g, "write", klen) == 0) && val[0] != '/' &&
	    val[0] != '~' && val[0] != '$') {
		abs = ab_asprintf("%s/%s", cwd, val);
		if (!abs)
			return ab_fail(err, ENOMEM, "--%.*s", (int)klen, g);
		val = abs;
	}
	json_t *j = NULL;
	if (strncmp(g, "allow", klen) == 0)
		j = json_pack("{s:i,s:{s:[s]}}", "version", 1, "network", "allow", val);
	else if (strncmp(g, "env", klen) == 0)
		j = json_pack("{s:i,s:{s:[s]}}", "version", 1, "env", "pass", val);
	else
		j = json_pack("{s:i,s:{s:[s]}}", "version", 1, "filesystem",
			      strncmp(g, "read", klen) == 0 ? "read" : "write", val);
	_cleanup_free_ char *buf = j ? json_dumps(j, JSON_COMPACT) : NULL;
	json_decref(j);
	if (!buf)
		return ab_fail(err, EINVAL, "--%.*s: not a valid value", (int)klen, g);
	char fname[32];
	snprintf(fname, sizeof(fname), "--%.*s", (int)klen, g);
	ab_profile *one = NULL;
	if (ab_profile_load_buffer(buf, strlen(buf), fname, vars, &one, err) < 0) {
		/* "--allow:1:42: network.allow[0]: what" -> "--allow VALUE: what" */
		const char *what = strstr(err->msg, "]: ");
		char msg[sizeof(err->msg)];
		snprintf(msg, sizeof(msg), "%s %.400s: %.900s", fname, eq + 1,
			 what ? what + 3 : err->msg);
		snprintf(err->msg, sizeof(err->msg), "%s", msg);
		return ab_err_ret(err);
	}
	ab_strv_free(&one->files); /* not a file: shown as a command-line grant */
	ab_strv_free(&one->shadows);
	char *shown = ab_asprintf("%s %s", fname, eq + 1);
	int r = shown ? ab_strv_push_take(&one->cli_grants, shown) : -ENOMEM;
	if (r >= 0)
		r = ab_strv_extend(&one->cli_write, &one->fs.write);
	if (r >= 0)
		r = ab_profile_merge(prof, one, err);
	ab_profile_free(one);
	return r < 0 ? (err->msg[0] ? r : ab_fail(err, -r, "%s", fname)) : 0;
}

static int count_supplementary_groups(void)
{
	gid_t groups[NGROUPS_MAX];
	int n = getgroups(NGROUPS_MAX, groups);
	int extra = 0;
	for (int i = 0; i < n; i++)
		if (groups[i] != getegid())
			extra++;
	return extra;
}

/* Where run --ask's "always" writes (docs/ask.md): --ask-profile; else the
 * last -p (or "default") when it was given as a path or lies in the user's
 * profile directory; else a new file of its name there that extends the one
 * found (a lookup by name finds it first from then on). */
static int ask_target(const ab_cli *cli, const ctx *c, char **file, char **extends, ab_err *err)
{
	if (cli->ask_profile) {
		*file = cli->ask_profile[0] == '/' ? ab_path_normalize(cli->ask_profile)
						   : ab_asprintf("%s/%s", c->cwd, cli->ask_profile);
		return *file ? 0 : ab_fail(err, ENOMEM, "--ask-profile");
	}
	const char *name = cli->profiles.n ? cli->profiles.v[cli->profiles.n - 1] : "default";
	_cleanup_free_ char *found = NULL;
	if (ab_profile_find(name, &c->vars, &found, err) < 0)
		return -1;
	_cleanup_free_ char *dir =
		c->vars.xdg_config_home && c->vars.xdg_config_home[0] == '/'
			? ab_asprintf("%s/agentbox/profiles", c->vars.xdg_config_home)
			: ab_asprintf("%s/.config/agentbox/profiles", c->home);
	if (!dir)
		return ab_fail(err, ENOMEM, "--ask");
	bool by_path = strchr(name, '/') ||
		       (strlen(name) > 5 && !strcmp(name + strlen(name) - 5, ".json"));
	if (by_path || ab_path_is_under(found, dir)) {
		*file = TAKE_PTR(found);
		return 0;
	}
	*file = ab_asprintf("%s/%s.json", dir, name);
	*extends = TAKE_PTR(found);
	return *file ? 0 : ab_fail(err, ENOMEM, "--ask");
}

/* The plan `run` builds from PROF: explain shows it and check builds it too,
 * so that a profile check accepts is one run accepts on this machine. */
static int plan_from(const ab_cli *cli, const ctx *c, const ab_profile *prof, ab_plan **out,
		     ab_err *err)
{
	ab_host host;
	ab_host_probe(&host, false);
	if (ab_strv_contains(&prof->allow_downgrade, "proc-outer"))
		host.fresh_proc = ab_ctr_try_proc();
	_cleanup_free_ char *log_abs = NULL;
	if (cli->log_path) {
		log_abs = cli->log_path[0] == '/' ? strdup(cli->log_path)
						  : ab_asprintf("%s/%s", c->cwd, cli->log_path);
		if (!log_abs)
			return ab_fail(err, ENOMEM, "run");
	}
	ab_otlp_url ou;
	if (cli->otlp_url && ab_otlp_parse_url(cli->otlp_url, &ou, err) < 0)
		return -1;
	/* the host's sockets a grant would show are hidden (plan.c) */
	_cleanup_strv_ ab_strv socks = {0};
	if (ab_unixsock_host(&socks, err) < 0)
		return -1;
	/* agentbox's control directories (control.h): a grant that would show
	 * one has it hidden (plan.c); run makes its own first, so that it exists
	 * to be hidden */
	if (cli->cmd == AB_CMD_RUN)
		ab_control_prepare();
	_cleanup_free_ char *ask_file = NULL, *ask_ext = NULL;
	if (cli->cmd == AB_CMD_RUN && (cli->ask || prof->ask == 1) &&
	    ask_target(cli, c, &ask_file, &ask_ext, err) < 0)
		return -1;
	ab_control_dir cdirs[2];
	const char *cpaths[3] = {NULL, NULL, NULL};
	for (int i = 0, n = ab_control_dirs(getuid(), cdirs); i < n; i++)
		cpaths[i] = cdirs[i].path;
	_cleanup_free_ char *review_root = ab_review_root(c->home, environ);
	char run_tag[17] = "0";
	uint64_t rnd = 0;
	if (getrandom(&rnd, sizeof(rnd), GRND_NONBLOCK) == (ssize_t)sizeof(rnd))
		snprintf(run_tag, sizeof(run_tag), "%016llx", (unsigned long long)rnd);
	else
		snprintf(run_tag, sizeof(run_tag), "%x", (unsigned)getpid());
	ab_plan_input in = {
		.run_tag = run_tag,
		.review = cli->review,
		.review_root = review_root,
		.host_sockets = &socks,
		.control_dirs = cpaths,
		.profile = prof,
		.host = &host,
		.workspace = c->workspace,
		.home = c->home,
		.pw_home = c->pw_home[0] ? c->pw_home : NULL,
		.home_aliases = c->aliases,
		.argv = cli->argc > 0 ? cli->argv : NULL,
		.environ = environ,
		.tty_mask = (isatty(0) ? 1u : 0) | (isatty(1) ? 2u : 0) | (isatty(2) ? 4u : 0),
		.lstat = ab_real_lstat,
		.readfile = ab_real_readfile,
		.user = c->vars.user,
		.cwd = c->cwd,
		.force_pty = cli->pty,
		.log_path = log_abs,
		.otlp_url = cli->otlp_url,
		.quiet = cli->quiet,
		.trace = cli->trace,
		.ask = cli->ask ? 1 : 0,
		.ask_timeout_s = cli->ask_timeout_s,
		.ask_profile = ask_file,
		.ask_extends = ask_ext,
		.learn = cli->cmd == AB_CMD_RUN && cli->learn,
		.supplementary_groups = host.is_root ? 0 : count_supplementary_groups(),
	};
#ifdef AB_ABLATION
	if (ab_ablate_parse(getenv("AGENTBOX_TEST_ABLATE"), &in.ablate, err) < 0)
		return -1;
#endif
	if (cli->cmd != AB_CMD_RUN && !in.argv) {
		/* no command needed to show or check a plan: the profile's or a shell */
		static char *sh[] = {"/bin/sh", NULL};
		if (!prof->command.n)
			in.argv = sh;
	}
	/* a stable placeholder's key exists before the plan, which hides it
	 * from every grant that would show it */
	for (size_t i = 0; cli->cmd == AB_CMD_RUN && i < prof->nsecrets; i++) {
		if (!prof->secrets[i].ph_stable)
			continue;
		_cleanup_free_ char *key = ab_phkey_path(c->home, environ);
		if (key)
			(void)ab_phkey_ensure(key); /* the broker warns if it cannot */
		break;
	}
	return ab_plan_build(&in, out, err);
}

static int cmd_run_or_explain(const ab_cli *cli, ab_err *err)
{
	ctx c;
	if (fill_ctx(&c, cli->workspace, err) < 0)
		return AB_EXIT_FAIL;
	_cleanup_profile_ ab_profile *prof = NULL;
	if (load_profiles(&cli->profiles, &c.vars, &prof, err) < 0)
		return AB_EXIT_FAIL;
	for (size_t i = 0; i < cli->grants.n; i++)
		if (apply_grant(cli->grants.v[i], &c.vars, c.cwd, prof, err) < 0)
			return AB_EXIT_FAIL;
	_cleanup_plan_ ab_plan *plan = NULL;
	if (plan_from(cli, &c, prof, &plan, err) < 0)
		return AB_EXIT_FAIL;
	if (cli->cmd == AB_CMD_EXPLAIN) {
		if (ab_plan_explain(plan, prof, cli->json, stdout, err) < 0)
			return AB_EXIT_FAIL;
		return fflush(stdout) == 0 ? 0 : AB_EXIT_FAIL;
	}
	if (!cli->quiet) {
		for (size_t i = 0; i < plan->downgrades.n; i++)
			ab_warn("%s", plan->downgrades.v[i]);
		/* a log was asked for: say what it will lack */
		if ((plan->egress.log_path || plan->egress.otlp_url) && plan->record_lost)
			ab_warn("%s", plan->record_lost);
	}
	fflush(stdout);
	fflush(stderr);
	if (cli->learn)
		return ab_cli_learn(cli, plan, err);
	return ab_sandbox_run(plan, err);
}

static int cmd_check(const ab_cli *cli, ab_err *err)
{
	ctx c;
	int rc = 0;
	if (fill_ctx(&c, cli->workspace, err) < 0) {
		ab_err_print(err);
		return AB_EXIT_FAIL;
	}
	for (int i = 0; i < cli->ncheck; i++) {
		ab_profile *p = NULL;
		ab_err e = {0};
		ab_plan *plan = NULL;
		if (ab_profile_load(cli->check_files[i], &c.vars, &p, &e) < 0 ||
		    plan_from(cli, &c, p, &plan, &e) < 0) {
			ab_err_print(&e);
			rc = AB_EXIT_FAIL;
		}
		ab_plan_free(plan);
		ab_profile_free(p);
	}
	return rc;
}

static int push_dir_of(ab_strv *v, const char *path, int up)
{
	_cleanup_free_ char *d = strdup(path);
	if (!d)
		return -ENOMEM;
	for (int i = 0; i < up; i++) {
		char *s = strrchr(d, '/');
		if (!s || s == d)
			return 0;
		*s = '\0';
	}
	return ab_strv_push(v, d);
}

/* test-escape: the profile's secrets as profile JSON entries without their
 * sources (the lab supplies canary values). */
static json_t *secrets_json(const ab_profile *prof)
{
	json_t *secrets = json_object();
	for (size_t i = 0; secrets && i < prof->nsecrets; i++) {
		const struct ab_profile_secret *s = &prof->secrets[i];
		json_t *e = json_object(), *hosts = json_array(), *in = json_array();
		for (size_t j = 0; j < s->hosts.n; j++)
			json_array_append_new(hosts, json_string(s->hosts.v[j]));
		for (size_t j = 0; j < s->places.n; j++)
			json_array_append_new(in, json_string(s->places.v[j]));
		json_object_set_new(e, "hosts", hosts);
		if (s->places.n)
			json_object_set_new(e, "in", in);
		else
			json_decref(in);
		if (s->ph_prefix || s->ph_len) {
			json_t *ph = json_object();
			if (s->ph_prefix)
				json_object_set_new(ph, "prefix", json_string(s->ph_prefix));
			if (s->ph_len)
				json_object_set_new(ph, "length", json_integer(s->ph_len));
			json_object_set_new(e, "placeholder", ph);
		}
		if (s->env_name)
			json_object_set_new(
				e, "env", s->env_name[0] ? json_string(s->env_name) : json_false());
		if (s->mask_in_body)
			json_object_set_new(e, "mask_in_body", json_true());
		/* the rule in force (network.placeholder_elsewhere does not cross) */
		if (ab_psecret_elsewhere(s, prof->net.placeholder_elsewhere) == AB_ELSEWHERE_REFUSE)
			json_object_set_new(e, "elsewhere", json_string("refuse"));
		json_object_set_new(secrets, s->name, e);
	}
	return secrets;
}

/* test-escape: resolve and validate the profiles here (with the real HOME
 * and XDG dirs), then hand over to the harness, which enters the lab. */
static int cmd_test_escape(const ab_cli *cli, ab_err *err)
{
	ab_test_escape_args a = {.format = cli->format,
				 .out_path = cli->out_path,
				 .only = cli->only,
				 .list = cli->list,
				 .quiet = cli->quiet};
	if (cli->list)
		return ab_test_escape(&a);
	ctx c;
	if (fill_ctx(&c, "/", err) < 0)
		return AB_EXIT_FAIL;
	/* names are found as `run` finds them, in the caller's own profile
	 * directories (~/.config/agentbox/profiles): the lab gets paths */
	_cleanup_strv_ ab_strv paths = {0}, keep = {0};
	char display[512] = "";
	size_t n = cli->profiles.n;
	for (size_t i = 0; i < (n ? n : 1); i++) {
		const char *name = n ? cli->profiles.v[i] : "default";
		char *path = NULL;
		if (ab_profile_find(name, &c.vars, &path, err) < 0 ||
		    ab_strv_push_take(&paths, path) < 0)
			return AB_EXIT_FAIL;
		size_t dl = strlen(display);
		snprintf(display + dl, sizeof(display) - dl, "%s%s", i ? "+" : "", name);
	}
	/* then validated with the lab's paths (src/escape/lab/lab.c), which the run
	 * inside will use: the caller's cwd plays no part */
	c.vars.home = "/home/agentbox-lab";
	c.vars.workspace = "/home/agentbox-lab/work/project";
	_cleanup_profile_ ab_profile *prof = NULL;
	if (load_profiles(&paths, &c.vars, &prof, err) < 0)
		return AB_EXIT_FAIL;
	for (size_t i = 0; i < prof->files.n; i++)
		if (push_dir_of(&keep, prof->files.v[i], 1) < 0)
			return ab_fail(err, ENOMEM, "test-escape");
	char exe[PATH_MAX];
	ssize_t k = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (k > 0) {
		exe[k] = '\0';
		if (push_dir_of(&keep, exe, 2) < 0)
			return ab_fail(err, ENOMEM, "test-escape");
	}
	json_t *secrets = secrets_json(prof);
	a.secrets = secrets;
	a.clipboard = prof->terminal.clipboard == 1;
	a.profiles = paths;
	a.display = display;
	a.keep = keep;
	fflush(stdout);
	int rc = ab_test_escape(&a);
	json_decref(secrets);
	return rc;
}

/* The libraries a security fix may be in, as linked into this binary. */
/* review / apply / discard: the change set `run --review` left in the
 * workspace's name (docs/review.md).  Their events go to --log FILE, else
 * to the log the run wrote (the change set's meta file says which). */
static int review_log(const ab_cli *cli, const ctx *c, const char *dir, ab_audit **audit,
		      ab_err *err)
{
	_cleanup_free_ char *log = NULL;
	if (cli->log_path)
		log = cli->log_path[0] == '/' ? strdup(cli->log_path)
					      : ab_asprintf("%s/%s", c->cwd, cli->log_path);
	else
		log = ab_review_log_of(dir);
	if (cli->log_path && !log)
		return ab_fail(err, ENOMEM, "--log");
	if (ab_audit_open(log, audit, err) == 0)
		return 0;
	if (cli->log_path)
		return -1;
	/* the run's log is gone or unwritable: said, and not recorded */
	ab_warn("%s; this is not recorded in the run's audit log (--log FILE names one)", err->msg);
	*err = (ab_err){0};
	return ab_audit_open(NULL, audit, err);
}

static int cmd_review(const ab_cli *cli, ab_err *err)
{
	ctx c;
	if (fill_ctx(&c, cli->workspace, err) < 0)
		return AB_EXIT_FAIL;
	_cleanup_free_ char *dir = NULL;
	int r = ab_review_find(c.workspace, environ, c.home, &dir, err);
	if (r < 0)
		return AB_EXIT_FAIL;
	if (r == 0) {
		ab_fail(err, 0, "no change set is pending for the workspace %s", c.workspace);
		ab_err_hint(err, "agentbox run --review makes one");
		return AB_EXIT_FAIL;
	}
	ab_audit *audit = NULL;
	if (review_log(cli, &c, dir, &audit, err) < 0)
		return AB_EXIT_FAIL;
	if (cli->cmd == AB_CMD_REVIEW)
		r = ab_review_cmd_show(c.workspace, dir, cli->diff, audit, err);
	else if (cli->cmd == AB_CMD_APPLY)
		r = ab_review_cmd_apply(c.workspace, dir, cli->argv, cli->argc, audit, err);
	else
		r = ab_review_cmd_discard(c.workspace, dir, audit, err);
	ab_audit_free(audit);
	return r;
}

static int print_version(void)
{
	const struct scmp_version *sv = seccomp_version();
	const char *bpf = ab_trace_libbpf_version();
	printf("agentbox %s\n", AB_VERSION);
	printf("  %s (%s)\n", OpenSSL_version(OPENSSL_VERSION),
	       AB_STATIC_LIBS ? "linked statically" : "shared library");
	printf("  libseccomp %u.%u.%u\n", sv->major, sv->minor, sv->micro);
	printf("  jansson %s\n", jansson_version_str());
	printf("  libbpf %s\n", bpf ? bpf : "(not built in: no run --trace)");
	printf("  libseccomp, libcap, jansson%s: %s\n", bpf ? ", libbpf" : "",
	       AB_STATIC_LIBS ? "linked statically (make STATIC_LIBS=0 links them as shared "
				"libraries)"
			      : "shared libraries");
	return 0;
}

int main(int argc, char **argv)
{
	ab_cli cli;
	ab_err err = {0};
	int rc;
	/* hidden: the inside of test-escape and its canary process */
	if (argc >= 2 && strcmp(argv[1], "__probe") == 0)
		return ab_escape_inside(argc - 1, argv + 1);
	if (argc >= 2 && strcmp(argv[1], "__canary") == 0)
		return ab_escape_canary();
	if (argc >= 2 && strcmp(argv[1], "__profiles") == 0) { /* shell completion */
		ctx c;
		_cleanup_strv_ ab_strv names = {0};
		if (fill_ctx(&c, "/", &err) < 0 || ab_profile_list_names(&c.vars, &names) < 0)
			return AB_EXIT_FAIL;
		for (size_t i = 0; i < names.n; i++)
			puts(names.v[i]);
		return 0;
	}
	if (ab_cli_parse(argc, argv, &cli, &err) < 0) {
		ab_err_print(&err);
		ab_cli_free(&cli);
		return AB_EXIT_FAIL;
	}
	switch (cli.cmd) {
	case AB_CMD_HELP:
		ab_cli_usage(cli.help_for);
		rc = 0;
		break;
	case AB_CMD_VERSION: rc = print_version(); break;
	case AB_CMD_DOCTOR: rc = ab_doctor(cli.json); break;
	case AB_CMD_CHECK: rc = cmd_check(&cli, &err); break;
	case AB_CMD_ALLOW: {
		ctx c;
		rc = fill_ctx(&c, cli.workspace, &err) < 0
			     ? AB_EXIT_FAIL
			     : ab_control_allow(c.workspace, cli.argv, cli.argc, &err);
		/* every failure is said, and is 125 */
		if (rc < 0 || rc == AB_EXIT_FAIL) {
			if (!err.msg[0])
				ab_fail(&err, 0, "allow failed");
			ab_err_print(&err);
			rc = AB_EXIT_FAIL;
		}
		break;
	}
	case AB_CMD_REPORT:
		rc = ab_report_file(cli.argv[0], cli.json, stdout, &err);
		if (rc == AB_EXIT_FAIL)
			ab_err_print(&err);
		break;
	case AB_CMD_REVIEW:
	case AB_CMD_APPLY:
	case AB_CMD_DISCARD:
		rc = cmd_review(&cli, &err);
		if (rc == AB_EXIT_FAIL && err.msg[0])
			ab_err_print(&err);
		break;
	case AB_CMD_TEST_ESCAPE:
		rc = cmd_test_escape(&cli, &err);
		if (rc == AB_EXIT_FAIL && err.msg[0])
			ab_err_print(&err);
		break;
	case AB_CMD_RUN:
	case AB_CMD_EXPLAIN:
		rc = cmd_run_or_explain(&cli, &err);
		if (rc == AB_EXIT_FAIL ||
		    ((rc == AB_EXIT_NOEXEC || rc == AB_EXIT_NOTFOUND) && err.msg[0]))
			if (err.msg[0])
				ab_err_print(&err);
		break;
	default: ab_cli_usage(AB_CMD_NONE); rc = AB_EXIT_FAIL;
	}
	ab_cli_free(&cli);
	return rc;
}
