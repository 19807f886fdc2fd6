/* SPDX-License-Identifier: MIT */
/*
 * The plan: every policy decision, as plain data.  Built by ab_plan_build()
 * from the profile, the CLI, the host probe and a filesystem view (lstat), all
 * of which are inputs, so unit tests drive it with fakes.  `explain` prints it;
 * `run` applies it.  No fds, no library handles in here.
 */
#ifndef AGENTBOX_PLAN_H
#define AGENTBOX_PLAN_H

#include <stdio.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "agentbox/caps.h"
#include "agentbox/common.h"
#include "agentbox/host.h"
#include "agentbox/landlock.h"
#include "agentbox/profile.h"
#include "agentbox/seccomp.h"

/* Uid/gid the command gets inside when agentbox is started by root. */
#define AB_ROOT_INSIDE_UID 1000
#define AB_ROOT_INSIDE_GID 1000
/* Host uid/gid the sandbox runs as when root starts agentbox on a root-owned
 * workspace (files written there stay owned by root through an idmapped mount). */
#define AB_ROOT_FALLBACK_KUID 65534
#define AB_ROOT_FALLBACK_KGID 65534

enum ab_mnt_kind {
	AB_MNT_TMPFS,   /* empty tmpfs at dst (data: mode) */
	AB_MNT_BIND_RO, /* bind src -> dst, read-only, nosuid,nodev */
	AB_MNT_BIND_RW, /* bind src -> dst, read-write, nosuid,nodev */
	AB_MNT_PROC,    /* fresh procfs for the new pid namespace */
	AB_MNT_DEV,  /* minimal /dev: tmpfs + null zero full random urandom tty, pts, ptmx, shm */
	AB_MNT_MASK, /* dst hidden: empty read-only tmpfs (dir) or empty file (file) */
	AB_MNT_PROTECT,     /* existing dst inside a rw tree: re-bound read-only onto itself */
	AB_MNT_PLACEHOLDER, /* absent dst inside a rw tree: the parent creates a placeholder
			       on the host (an empty directory with F_DIR, else a file whose
			       content is src or empty), the child covers it read-only, and
			       it is removed after exit (docs/protected-paths.md) */
	AB_MNT_SYMLINK,     /* create symlink dst -> src (for symlinked system dirs) */
	AB_MNT_RO_REMOUNT,  /* make the existing mount at dst read-only (e.g. /proc/sys) */
	AB_MNT_CONTENT,     /* read-only file at dst whose content is `src` (e.g. /etc/passwd) */
	AB_MNT_PIN          /* existing directory inside a rw tree bound onto itself (same
			     access), so it cannot be renamed: guards protected paths below it */
};

#define AB_MNT_F_DIR 0x1      /* dst is (or must be) a directory; else a file */
#define AB_MNT_F_OPTIONAL 0x2 /* skip silently if src is absent (system defaults) */
#define AB_MNT_F_IDMAP 0x4    /* root caller: idmap on-disk root -> sandbox kuid */
#define AB_MNT_F_NOEXEC 0x8
#define AB_MNT_F_SYMLINK 0x10 /* the source is a symlink: recreated inside, no Landlock rule */
#define AB_MNT_F_RUNTIME \
	0x20                  /* AB_MNT_CONTENT made at run time (the session CA): the
				 parent sends it as an AB_SYNC_CONTENT memfd; src is NULL */
#define AB_MNT_F_CA_ONLY 0x40 /* ... the session CA alone, not the combined bundle */
#define AB_MNT_F_RENDER \
	0x80                /* ... a credentials file rendered with placeholders
				 (writable, 0600, owned by the command's uid; in the
				 sandbox's memory, changes are not written back) */
#define AB_MNT_F_JAVA 0x100 /* ... the session trust as a Java PKCS#12 truststore */
#define AB_MNT_F_OUTER \
	0x200 /* AB_MNT_PROC: the outer /proc bound read-only (the "proc-outer"
		 downgrade, where a fresh one is refused) */
#define AB_MNT_F_REVIEW \
	0x400 /* the workspace in review mode: an overlay (upper and work in
		 plan->review_dir) is stacked on the bind (docs/review.md) */
#define AB_MNT_F_COPY \
	0x800 /* AB_MNT_BIND_RW of a file filesystem.guard names: the run's
		 private copy (ab_mount.copy) is bound in its place, and merged
		 back without the guarded keys when the run ends (guard.c) */

typedef struct ab_mount {
	enum ab_mnt_kind kind;
	char *src;  /* host path (binds), link target (symlink), or NULL */
	char *copy; /* AB_MNT_F_COPY: host path of the run's private copy of src */
	char *dst;  /* path inside the new root (absolute) */
	unsigned flags;
	char *why; /* short provenance for explain: "fs.read", "workspace", "home", ... */
} ab_mount;

/* A writable grant of a host directory, where a new `.git` would be the
 * host's too (include/agentbox/mediate.h); review mode's workspace is not
 * one (the command writes the change set). */
static inline bool ab_plan_git_grant(const ab_mount *m)
{
	return m->kind == AB_MNT_BIND_RW && (m->flags & AB_MNT_F_DIR) && m->src &&
	       !(m->flags & AB_MNT_F_REVIEW);
}

/* lstat provider, so tests can fake the filesystem.  Returns 0 or -errno. */
typedef int (*ab_lstat_fn)(void *ctx, const char *path, struct stat *st);
int ab_real_lstat(void *ctx, const char *path, struct stat *st);
/* Whole-file reader, so tests can fake git's config files (plan_gitcfg.c):
 * *BUF malloc'd and NUL-terminated, *LEN bytes, at most MAX (else -E2BIG);
 * 0, -ENOENT, -EISDIR (a directory), -EINVAL (neither: a FIFO, a device) or
 * another -errno. */
typedef int (*ab_readfile_fn)(void *ctx, const char *path, size_t max, char **buf, size_t *len);
int ab_real_readfile(void *ctx, const char *path, size_t max, char **buf, size_t *len);

typedef struct ab_plan_input {
	const ab_profile *profile;
	const ab_host *host;
	const char *workspace;           /* absolute, normalised, exists */
	const char *home;                /* caller's home (absolute, from $HOME) */
	const char *pw_home;             /* home from the passwd entry, may be NULL */
	const char *const *home_aliases; /* NULL-terminated: the same homes with symlinks
					    resolved (realpath), when they differ; may be NULL */
	char *const *argv;    /* command; NULL/empty = profile command, then $SHELL-less /bin/sh */
	char *const *environ; /* agentbox's environment (source of pass-through) */
	unsigned tty_mask;    /* bit N: agentbox's fd N (0-2) is a terminal */
	ab_lstat_fn lstat;
	void *lstat_ctx;
	ab_readfile_fn readfile; /* git config files; NULL: none is read (and none protected) */
	void *readfile_ctx;
	const char *user;            /* caller's login name, may be NULL */
	const char *cwd;             /* caller's cwd (kept inside when under the workspace) */
	int supplementary_groups;    /* how many the caller has besides its primary gid */
	int force_pty;               /* 1 always, 0 never, -1 auto (any of 0-2 a terminal) */
	const char *log_path;        /* --log FILE (absolute), overrides network.log; may be NULL */
	const char *otlp_url;        /* --otlp URL: the events also go to that collector */
	bool quiet;                  /* -q: no network summary at exit */
	int trace;                   /* run --trace: enum ab_trace_mode (trace.h) */
	int ask;                     /* run --ask: 1; else 0 (the profile's "ask" decides) */
	unsigned ask_timeout_s;      /* --ask-timeout; 0: AB_ASK_DEFAULT_TIMEOUT_S */
	const char *ask_profile;     /* the profile file "always" writes, or NULL */
	const char *ask_extends;     /* what a new ask_profile extends, or NULL */
	bool learn;                  /* run --learn: the file calls and execs notify
					(seccomp.notify_learn); refused without seccomp
					user notification */
	const ab_strv *host_sockets; /* the host's bound pathname unix sockets
					(ab_unixsock_host); those a grant shows are
					masked.  NULL: none */
	const char *const *control_dirs; /* NULL-terminated: where agentbox keeps its
					    control sockets (ab_control_dirs); a grant
					    that shows one has it masked.  May be NULL */
	bool review;                     /* run --review: a copy-on-write view of the workspace */
	const char *review_root;         /* where change sets are kept (ab_review_root); its
				    grants are masked; NULL: none known */
	const char *run_tag; /* hex, unique among runs that may share a grant (or NULL) */
	unsigned ablate;     /* AB_ABLATE_*: test-only weakening (see below); 0 always
				       in the installed binary */
} ab_plan_input;

/* Test-only ablation (proving that test-escape can fail).  Only
 * build/agentbox-ablate, whose main.c is compiled with -DAB_ABLATION, sets
 * these, from AGENTBOX_TEST_ABLATE (a comma-separated list of the names in
 * plan.c's table: seccomp, landlock, netns, env, home, pty, connect, settle,
 * gitconfig, hstate, setid, gitlive, phhold); the
 * agentbox binary that is built and installed has no way to.  Each ablated
 * layer is listed in plan->downgrades ("TEST ABLATION: ..."), so run prints it
 * and explain shows it. */
#define AB_ABLATE_SECCOMP 0x01  /* no seccomp filter */
#define AB_ABLATE_LANDLOCK 0x02 /* no Landlock domain */
#define AB_ABLATE_NETNS 0x04    /* the host's network namespace, no proxy */
#define AB_ABLATE_ENV 0x08      /* agentbox's whole environment passes in */
#define AB_ABLATE_HOME 0x10     /* the real home bound read-write instead of a tmpfs */
#define AB_ABLATE_PTY 0x20      /* no pty: the command gets agentbox's own fds 0-2 */
#define AB_ABLATE_CONNECT 0x40  /* connect(2) is not mediated (host sockets bound later) */
#define AB_ABLATE_SETTLE 0x80   /* what the run left armed stays (settle.h) */
#define AB_ABLATE_GITCFG 0x100  /* paths named by git's configuration are not protected */
#define AB_ABLATE_HSTATE 0x200  /* anchored fs.protect entries (harness state) are ignored */
#define AB_ABLATE_SETID 0x400   /* seccomp's set-id mode rules left out, even where needed */
#define AB_ABLATE_GITLIVE 0x800 /* creation calls not carried out: a new .git is the host's */
#define AB_ABLATE_GUARDCOPY \
	0x1000                  /* a guarded file is the host's own while the run lasts (no copy) */
#define AB_ABLATE_PHHOLD 0x2000 /* the watcher holds each placeholder from its creation on */
/* "seccomp,home" -> mask; unknown names: -EINVAL with a message. */
int ab_ablate_parse(const char *s, unsigned *out, ab_err *err);

/* Whether `buf` (n bytes) is a content agentbox gives a placeholder file
 * (empty, "." for .git/commondir, "{}" for an anchored JSON file): the
 * cleanup removes a placeholder file only while it still holds one. */
bool ab_placeholder_content_known(const char *buf, size_t n);

/* The synthetic range transparent mode answers DNS queries from: every
 * address of it is local inside the sandbox's network namespace. */
#define AB_SYNTH_NET "198.18.0.0"
#define AB_SYNTH_PREFIX 15
#define AB_EGRESS_MAX_PORTS 64 /* transparent listener ports */
/* With brokered secrets: the session CA inside (read-only files on /run). */
#define AB_TRUST_BUNDLE "/run/agentbox/ca-bundle.pem" /* system roots + session CA */
#define AB_TRUST_CA "/run/agentbox/session-ca.pem"    /* the session CA alone */
#define AB_TRUST_JAVA "/run/agentbox/truststore.p12"  /* both, for Java (PKCS#12) */
/* Its password keys the integrity MAC only (a truststore holds nothing
 * secret); the JDK's default for cacerts, which tools assume. */
#define AB_TRUST_JAVA_PASSWORD "changeit"

/* Egress: what the child sets up inside the network namespace and
 * what the parent's proxy enforces.  Rule texts are canonical (validated). */
typedef struct ab_egress_plan {
	uint16_t proxy_port;                 /* explicit proxy on 127.0.0.1 inside */
	bool transparent;                    /* DNS responder + synthetic range + listeners */
	uint16_t ports[AB_EGRESS_MAX_PORTS]; /* transparent listener ports (0.0.0.0:P) */
	size_t nports;
	ab_strv allow, deny, priv; /* network.allow / deny / private */
	ab_strv hosts;             /* "name=ADDR[:PORT]" local name mappings */
	char *log_path;            /* audit log, NULL = none */
	char *otlp_url;            /* OTLP/HTTP collector (src/observe/otlp.c), NULL = none */
	char *upstream_host;       /* network.upstream_proxy: dial through it (CONNECT) */
	uint16_t upstream_port;
	ab_strv no_proxy;   /* host's NO_PROXY entries (upstream_proxy "env") */
	char *profile_name; /* for 403 explanations */
	ab_strv grants;     /* command-line grants, for the audit log's start event */
	ab_strv downgrades; /* the plan's downgrades, for the same event */
	/* credential brokering: the profile's secrets (borrowed: the
	 * profile outlives the plan), the CA bundle for intercepted upstreams */
	const struct ab_profile_secret *secrets;
	size_t nsecrets;
	int placeholder_elsewhere; /* network.placeholder_elsewhere (AB_ELSEWHERE_*): the
				       secrets' default (ab_psecret_elsewhere) */
	char *ca_file;
	bool summary; /* print a summary on stderr at exit (a terminal, not -q) */
} ab_egress_plan;

typedef struct ab_plan {
	/* identity */
	uid_t outer_uid;
	gid_t outer_gid; /* caller */
	uid_t inside_uid;
	gid_t inside_gid; /* what the command sees */
	uid_t map_kuid;
	gid_t map_kgid; /* host ids inside_uid/gid map to */
	bool root_mode; /* caller is root: write maps with privilege,
						  drop supplementary groups, idmap binds */
	bool drop_groups;

	char *workspace;
	char *home;          /* same path inside as outside */
	ab_strv other_homes; /* the account's passwd home and the resolved forms of both,
				where they differ from home: as private as home */
	char *cwd;           /* inside: workspace (or the caller's cwd if under it) */
	char *hostname;

	ab_mount *mounts; /* applied in order, after the new root tmpfs */
	size_t nmounts;
	ab_strv hidden; /* for explain: deny entries that were masked */
	/* a secret has a stable placeholder: the key file (src/creds/phkey.c), NULL
	 * when none has.  Its directory is denied like a profile's deny entry
	 * (masked where a grant shows it); PH_KEY_RW: a writable grant covers
	 * it, so the run may leave another file there (src/sandbox/sandbox.c removes
	 * a key that is not the one the run started with) */
	char *ph_key;
	bool ph_key_rw;
	ab_strv gitcfg;         /* for explain: paths git's configuration names inside a writable
			     grant, protected: "PATH\tKEY\tFILE:LINE" (plan_gitcfg.c) */
	ab_strv git_shared_rel; /* relative paths the system or global git config (or
				   GIT_CONFIG_COUNT) names as hooks or programs: git takes
				   them from each work tree, nested repositories' too; what
				   a run changed there is disarmed after it (gitscan.h) */
	ab_strv absent;         /* for explain: grants whose host path does not exist (skipped) */
	ab_strv guard;          /* filesystem.guard: "FILE#/POINTER", put back after the run */
	ab_strv unguarded;      /* host paths of "?" protect entries absent at the start: nothing
			      reserves them, so one that exists after the run is named */
	char *user_name;        /* login name inside (USER/LOGNAME, passwd entry) */

	ab_ll_plan landlock;
	ab_seccomp_policy seccomp;
	char *setid_why; /* why seccomp's set-id mode rules are in or out (explain) */
	ab_rlimit *rlimits;
	size_t nrlimits;
	long long cg_memory, cg_pids; /* AB_LIMIT_UNSET or bytes/count, via cgroup v2 */
	bool cgroup_apply;

	ab_strv argv; /* command to exec */
	ab_strv envp; /* the complete environment inside, "K=V" */

	bool use_pty;
	unsigned pty_mask;   /* which of the command's fds 0-2 get the pty: those that are
			      terminals outside (all three with --pty) */
	bool pass_clipboard; /* terminal.clipboard: the relay lets the clipboard
				escape sequences through (src/sandbox/termfilter.c) */
	/* run --ask / "ask": a host the proxy refuses as not listed is asked
	 * about on the user's terminal (src/sandbox/asker.c, docs/ask.md); only
	 * with the sandbox's own pty and stdin a terminal */
	bool ask;
	/* --ask or "ask" asked for, even where it cannot ask (no terminal):
	 * the creations the sandbox's rules refused are recorded, and listed
	 * at exit (src/sandbox/pathoffer.c) */
	bool ask_wanted;
	unsigned ask_timeout_s;
	char *ask_profile; /* the file "always" writes; NULL: not offered */
	char *ask_extends; /* what that file extends when it is new, or NULL */

	ab_egress_plan egress;
	bool review;      /* workspace.mode "review" or run --review (docs/review.md) */
	char *review_dir; /* ... its change set: upper/, work/, meta */
	char git_tag[24]; /* this run's name for what it keeps off the host
			   * (include/agentbox/mediate.h): hex */
	bool git_settle;  /* after the run, nested repositories armed during it are
			       disarmed (gitscan.h) and "?" entries it created moved aside
			       (src/sandbox/settle.c); false only as a test ablation */
	bool share_net;   /* test ablation "netns": no CLONE_NEWNET, no proxy */
	bool ph_hold;     /* test ablation "phhold": the cleanup watcher is handed each
			     placeholder as it is made, not at exit (cleanup.c) */
	int trace;        /* run --trace: enum ab_trace_mode (trace.h), src/observe/trace.c */

	ab_strv downgrades; /* named protections lost on this kernel and allowed by the profile */
	const char *record_lost; /* why there is no record here (static text), or NULL */
	ab_strv warnings;        /* other things the user should know */
	int cap_last_cap;
	int keyring_skip; /* 0: the child joins a fresh session keyring; else the errno
			     with which keyctl is refused to agentbox itself (an outer
			     filter): the join is skipped if it fails the same way, as
			     nothing inside can call keyctl either */
} ab_plan;

/* Does the sandbox see the host file PATH as it is: a bind shows it, and no
 * mask (a deny) or content (a rendered copy) covers it? */
bool ab_plan_shows(const ab_plan *p, const char *path);

/* Review mode (src/plan/plan_review.c).  Where change sets are kept:
 * $XDG_STATE_HOME/agentbox/review (else HOME/.local/state/...), from ENV;
 * malloc'd, NULL when neither is absolute. */
char *ab_review_root(const char *home, char *const *env);
/* The change-set directory of WORKSPACE under ROOT:
 * ROOT/BASENAME-HASH (malloc'd). */
char *ab_review_dir_for(const char *root, const char *workspace);
/* Would the planner refuse PATH as a write grant (a git directory, the home
 * directory, a startup location or the directory holding one)?  0, or
 * -EINVAL with the reason in *ERR. */
int ab_plan_check_write_grant(const ab_plan *p, const char *path, ab_err *err);

/* Decide everything.  Fails closed: a downgrade the profile does not allow is
 * an error with a Hint.  Exit code 125 on failure. */
int ab_plan_build(const ab_plan_input *in, ab_plan **out, ab_err *err);
void ab_plan_free(ab_plan *p);
static inline void ab_plan_freep(ab_plan **p)
{
	if (*p)
		ab_plan_free(*p);
}
#define _cleanup_plan_ _cleanup_(ab_plan_freep)

/* explain: human text or JSON (jansson) to `out`. */
int ab_plan_explain(const ab_plan *p, const ab_profile *prof, bool json, FILE *out, ab_err *err);

const char *ab_mnt_kind_name(enum ab_mnt_kind k);

#endif
