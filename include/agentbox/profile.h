/* SPDX-License-Identifier: MIT */
/*
 * Profiles: JSON (jansson), strict schema, `extends`, variable expansion.
 * Pure apart from reading the profile files themselves.  Runs in the parent.
 *
 * The loaded profile is fully merged (extends resolved) and every path is
 * expanded and lexically normalised (absolute), except `fs.protect`, whose
 * entries are relative to each writable root.
 */
#ifndef AGENTBOX_PROFILE_H
#define AGENTBOX_PROFILE_H

#include "agentbox/common.h"
#include "agentbox/json_pos.h"

#define AB_PROFILE_MAX_BYTES (1024 * 1024) /* a profile file larger than this is refused */
#define AB_PROFILE_MAX_DEPTH 8             /* extends nesting */
#define AB_PROFILE_MAX_LIST 1024           /* entries per list */
#define AB_PROFILE_MAX_SYSCALLS 256        /* entries per syscalls list: keeps the BPF small */
#define AB_PROXY_DEFAULT_PORT 3128         /* network.proxy_port default */
#define AB_PSECRET_ENV 0
#define AB_PSECRET_FILE 1
#define AB_PSECRET_COMMAND 2
#define AB_PSECRET_JSON 3 /* a string in a JSON file, by JSON pointer (src_file, src_pointer) */
/* secrets.NAME.elsewhere, network.placeholder_elsewhere: a placeholder in a
 * request to a host its secret is not bound to */
#define AB_ELSEWHERE_UNSET 0   /* the secret's: the profile's; the profile's: forward */
#define AB_ELSEWHERE_FORWARD 1 /* sent on unchanged, recorded (placeholder-elsewhere) */
#define AB_ELSEWHERE_REFUSE 2  /* the request is refused (403, exfiltration) */

/* Variables available for expansion: "~" (at the start of a path), ${HOME},
 * ${WORKSPACE}, ${XDG_CONFIG_HOME}, ${XDG_DATA_HOME}, ${XDG_CACHE_HOME},
 * ${XDG_STATE_HOME}, ${USER}.  XDG_* default per the XDG spec from HOME. */
typedef struct ab_vars {
	const char *home;      /* caller's real home (absolute) */
	const char *workspace; /* absolute, normalised */
	const char *user;      /* login name, may be NULL */
	const char *xdg_config_home, *xdg_data_home, *xdg_cache_home, *xdg_state_home;
	/* Optional: checks one syscalls.deny/allow entry (list is "deny" or
	 * "allow") so its error gets the entry's FILE:LINE:COL.  The loader
	 * itself only checks the name's shape (keeps it free of libseccomp). */
	int (*syscall_check)(const char *list, const char *name, ab_err *err);
} ab_vars;

typedef struct ab_kv {
	char *key;
	char *val;
} ab_kv;

#define AB_LIMIT_UNSET (-1LL)

typedef struct ab_limits {
	long long nofile, nproc, fsize, core, memory, pids, cpu; /* AB_LIMIT_UNSET if absent */
} ab_limits;

typedef struct ab_profile {
	char *name;        /* as requested (name or path) */
	char *path;        /* absolute path of the leaf file */
	char *description; /* may be NULL */
	ab_strv files;     /* every file merged, base first */
	ab_strv shadows;   /* places a name lookup tried, found absent, before the file
			      it used: a file created there would be loaded instead next
			      time, so the planner reserves those inside writable trees */

	ab_strv command; /* default command if none on the CLI; may be empty */

	struct {
		ab_strv read;    /* bound read-only at the same path */
		ab_strv write;   /* bound read-write at the same path */
		ab_strv deny;    /* absent inside (masked), wins over read/write */
		ab_strv protect; /* relative to each writable root: read-only / uncreatable */
		ab_strv tmpfs;   /* private empty writable tmpfs at that path */
		ab_strv guard;   /* "FILE#/POINTER" ('*' a whole segment: every key):
				    keys of a writable JSON file put back when the run
				    ends if the run changed them (src/sandbox/guard.c) */
	} fs;

	struct {
		ab_strv pass; /* names or NAME_PREFIX* patterns copied from agentbox's env */
		ab_kv *set;   /* NAME=value, set inside (expanded) */
		size_t nset;
	} env;

	ab_limits limits;

	struct {
		ab_strv deny;  /* extra syscalls to fail with EPERM */
		ab_strv allow; /* default-denied syscalls this profile re-allows (relaxable only) */
	} syscalls;

	/* The record: -1 unset (= on), 0 off, 1 on.  exec needs a log. */
	struct {
		int exec;
		int denials;
	} audit;

	/* terminal.clipboard: -1 unset (= filtered), 0 filtered, 1 the clipboard
	 * escape sequences reach the user's terminal (src/sandbox/termfilter.c) */
	struct {
		int clipboard;
	} terminal;

	/* ask: -1 unset (= off), 0 off, 1 ask on the user's terminal when the
	 * proxy refuses a host that is not listed (src/sandbox/asker.c) */
	int ask;
	/* workspace.mode: -1 unset (= "direct"), 0 "direct", 1 "review": the
	 * command works on a copy-on-write view (docs/review.md) */
	struct {
		int review;
	} workspace;

	/* TCP ports that processes inside may connect()/bind() to on the sandbox's
	 * own loopback, enforced by Landlock (ABI >= 4).  NULL list = none. */
	struct {
		long *ports;
		size_t nports;
		bool any; /* "loopback_ports": "any" */
	} loopback;

	/* Egress: rules are validated with ab_netrule_parse at load and
	 * kept as text; the proxy builds its ab_netpolicy from them. */
	struct {
		ab_strv allow, deny, priv; /* network.allow / deny / private */
		ab_kv *hosts;              /* network.hosts: name -> "ADDR" or "ADDR:PORT" */
		size_t nhosts;
		int transparent;           /* -1 unset (= on), 0 off, 1 on */
		long proxy_port;           /* 0 unset (= AB_PROXY_DEFAULT_PORT) */
		char *log;                 /* audit log path, NULL = none */
		char *upstream_proxy;      /* "env" or "http://HOST:PORT"; NULL = dial directly */
		char *ca_file;             /* PEM bundle to verify intercepted upstreams with,
					      instead of the system store (tests, private CAs) */
		int placeholder_elsewhere; /* AB_ELSEWHERE_*: the default of every secret */
	} net;

	/* Brokered secrets: the sandbox sees a placeholder; the proxy
	 * swaps it for the value on requests to the bound hosts. */
	struct ab_profile_secret {
		char *name;
		int src;           /* AB_PSECRET_ENV / _FILE / _COMMAND */
		char *src_env;     /* env: variable of agentbox's environment */
		char *src_file;    /* file: absolute path */
		ab_strv src_cmd;   /* command: argv */
		ab_strv hosts;     /* bound hosts (network rules; each must be allowed) */
		ab_strv places;    /* "header:NAME", "query", "body"; empty = default headers */
		char *ph_prefix;   /* placeholder prefix, may be NULL */
		long ph_len;       /* placeholder length, 0 = the value's */
		bool ph_jwt;       /* placeholder {"jwt": true}: the value's JWT header and
				       payload, a random signature (secrets.h) */
		bool ph_stable;    /* placeholder {"stable": true}: the same placeholder every
				       run for the same value (keyed, src/creds/phkey.c) */
		char *env_name;    /* variable inside holding the placeholder; NULL = name,
				       "" = none */
		bool mask_in_body; /* body of a request to a bound host, "body" not
				       allowed: send a mask instead of refusing */
		int elsewhere;     /* AB_ELSEWHERE_*: wins over network.placeholder_elsewhere */
		/* subscription logins (docs/credentials.md) */
		char *src_pointer;       /* json: JSON pointer into src_file */
		bool optional;           /* "optional": an absent source skips the secret */
		ab_strv optional_unless; /* "optional": [NAMES]: absent is fine only when
					    one of these secrets was loaded */
		char *hint;              /* printed when the secret is missing (not optional) */
		bool render;             /* json: src_file is shown inside, rendered with the
				       placeholders of every secret read from it */
		ab_strv render_keep;     /* render: only these JSON pointers are kept (empty:
					the whole document) */
		char *rot_host;          /* "rotate": token endpoint host[:port] (a netrule) */
		char *rot_path;          /* ... its path (exact, no query) */
		char *rot_field;         /* ... JSON pointer of the new value in its response */
		ab_strv rot_stamp_ptr;   /* ... "stamp": JSON pointers in the file, and */
		ab_strv rot_stamp_kind;  /* their kinds ("now", "expires_at_ms"; credfile.h) */
	} * secrets;
	size_t nsecrets;

	ab_strv unix_sockets;    /* host socket paths bound in on purpose */
	ab_strv cli_grants;      /* one-off grants from the command line, as typed
				    ("--allow api.example.com"): for explain and the audit log */
	ab_strv cli_write;       /* the fs.write entries that came from --write (expanded):
				    an error about one names the option */
	ab_strv allow_downgrade; /* named protections the user accepts losing */
	char *hostname;          /* inside hostname; NULL = "agentbox" */
	/* descriptions: what an entry is for (run --learn writes them): key
	 * "LIST\tENTRY" (LIST one of AB_PROFILE_DESCR_LISTS), value the text.
	 * Shown by explain; they grant nothing. */
	ab_kv *descr;
	size_t ndescr;
} ab_profile;

/* The lists whose entries a "descriptions" object may describe. */
#define AB_PROFILE_DESCR_LISTS                                                     \
	{                                                                          \
		"filesystem.read", "filesystem.write", "network.allow", "env.pass" \
	}
#define AB_PROFILE_DESCR_MAX 1024 /* bytes of one description */

/* Find a profile by name or path:
 *   contains '/' or ends in ".json" -> a path (relative to cwd);
 *   else $XDG_CONFIG_HOME/agentbox/profiles/NAME.json,
 *        then AB_DATADIR/profiles/NAME.json (installed),
 *        then <dir of /proc/self/exe>/../profiles/NAME.json (build tree).
 * Returns a malloc'd absolute path or fails with a message listing where it looked. */
int ab_profile_find(const char *name_or_path, const ab_vars *vars, char **out_path, ab_err *err);

/* The names ab_profile_find would find by name, from every place it looks
 * (for shell completion); unsorted, unique. */
int ab_profile_list_names(const ab_vars *vars, ab_strv *out);

/* Load, validate, resolve extends (relative names resolved from the including
 * file's directory first, then by ab_profile_find), merge, expand.
 * Errors read "FILE:LINE:COL: message" and carry exit code 125. */
int ab_profile_load(const char *name_or_path, const ab_vars *vars, ab_profile **out, ab_err *err);

/* Same from an in-memory buffer (tests, fuzzing).  `fname` is used in messages
 * and to resolve relative extends. */
int ab_profile_load_buffer(const char *buf, size_t len, const char *fname, const ab_vars *vars,
			   ab_profile **out, ab_err *err);

/* Merge `top` over `base` into `base` (used for repeated -p and extends).
 * Lists are unioned (base first, duplicates dropped), deny lists are unioned
 * (deny always wins at planning time), scalars/limits/env.set from `top` override;
 * a secret of `top` replaces the one of the same name whole. */
int ab_profile_merge(ab_profile *base, const ab_profile *top, ab_err *err);

/* What happens to secret X's placeholder on a host X is not bound to, under
 * a profile whose network.placeholder_elsewhere is DEF: X's own "elsewhere"
 * wins, then DEF, then AB_ELSEWHERE_FORWARD. */
static inline int ab_psecret_elsewhere(const struct ab_profile_secret *x, int def)
{
	return x->elsewhere ? x->elsewhere : def ? def : AB_ELSEWHERE_FORWARD;
}

void ab_profile_free(ab_profile *p);
static inline void ab_profile_freep(ab_profile **p)
{
	if (*p)
		ab_profile_free(*p);
}
#define _cleanup_profile_ _cleanup_(ab_profile_freep)

/* ---- helpers, exposed for unit tests and the fuzzer ---- */

/* ab_json_step and ab_json_locate (the position locator): agentbox/json_pos.h */

/* "123", "8G" (K/M/G/T, binary, either case) or "unlimited" (LLONG_MAX).
 * Returns 0, -EINVAL (syntax) or -ERANGE (does not fit a long long). */
int ab_profile_parse_size(const char *s, long long *out);

/* Expand ${VAR} (the variables above) and, when tilde is set, a leading "~"
 * or "~/".  Fails (-EINVAL, message without position) on an unknown or unset
 * variable, an unterminated "${", or a result longer than 64 KiB. */
int ab_profile_expand(const char *in, const ab_vars *vars, bool tilde, char **out, ab_err *err);

/* network.hosts values: "ADDR" or "ADDR:PORT" (IPv4 dotted quad or [IPv6]).
 * Writes the canonical address (brackets kept for IPv6) to out, the port (0 if
 * absent) to *port; returns AB_HOST_IPV4/AB_HOST_IPV6 or -EINVAL. */
int ab_profile_parse_hostaddr(const char *s, char *out, size_t outlen, unsigned *port);

/* network.upstream_proxy URLs: "http://HOST[:PORT][/]" (default port 8080).
 * 0 with the normalised host, or -EINVAL. */
int ab_upstream_proxy_parse(const char *url, char *host, size_t hostlen, unsigned *port);

/* Known downgrade names (for validation of allow_downgrade and for explain). */
extern const char *const ab_downgrade_names[];
bool ab_downgrade_known(const char *name);
/* What losing a named downgrade costs, one sentence ("landlock-truncate" ->
 * "..."), for doctor and explain.  Unknown names get a generic sentence. */
const char *ab_downgrade_describe(const char *name);

#endif
