/* SPDX-License-Identifier: MIT */
/*
 * The harness side of test-escape (private to src/escape/): the lab it
 * builds (lab.c), the servers and the judge (judge.c), the command
 * (harness.c).  All of it runs in the harness process and its threads,
 * inside the lab's namespaces; nothing touches the real host.
 */
#ifndef AGENTBOX_ESCAPE_LAB_H
#define AGENTBOX_ESCAPE_LAB_H

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <openssl/ssl.h>

#include "agentbox/escape.h"

#define LAB_MAX_CANARIES 64
#define LAB_MAX_SNAPS 128
#define LAB_MAX_LISTEN 24
#define LAB_MAX_HITS 256
#define LAB_JUDGE_PORT 47001
#define LAB_UPSTREAM_PORT0 8441 /* bound, unbound, denied: 8441..8443 on 127.0.0.1 */
#define LAB_SECRET_ENV "AGENTBOX_LAB_TOKEN"
#define LAB_SECRET_HEADER "x-lab-token"
#define LAB_BOUND "bound.lab.agentbox.test"
#define LAB_UNBOUND "unbound.lab.agentbox.test"
#define LAB_DENIED "denied.lab.agentbox.test"
#define LAB_CANARY_DOMAIN "exfil.agentbox.test"

typedef struct lab_canary {
	char kind[16];
	char token[64]; /* "ABCANARY-KIND-<32 hex>" (never printed) */
	char hash[AB_CANARY_HASH_HEX + 1];
	char where[PATH_MAX]; /* where it was planted (display) */
} lab_canary;

typedef struct lab_snap { /* a host file the judge re-checks */
	char path[PATH_MAX];
	const char *probe; /* probe charged if it changed */
	bool existed;
	unsigned char sha[32];
	long long size;
	struct timespec mtime;
} lab_snap;

typedef struct lab_hit {
	const char *probe; /* charged probe id */
	char what[160];
} lab_hit;

typedef struct lab_upstream {
	const char *name; /* LAB_BOUND / LAB_UNBOUND / LAB_DENIED */
	uint16_t port;
	int fd;
	SSL_CTX *ctx;
	atomic_int hits, real, other, none;
} lab_upstream;

typedef struct lab {
	bool root;
	uid_t uid;
	gid_t gid;
	char run_id[17];
	char base[PATH_MAX]; /* the tmpfs holding home, state (/home) */
	char home[PATH_MAX];
	char ws[PATH_MAX], sibling[PATH_MAX], state[PATH_MAX], runtime[PATH_MAX];
	char esc_dir[PATH_MAX]; /* WS/.agentbox-escape: probe binary, LAB.json, RESULTS */
	char profile[PATH_MAX]; /* the lab's additions (merged last) */
	char ca_pem_path[PATH_MAX];
	lab_canary can[LAB_MAX_CANARIES];
	size_t ncan;
	char secret[64];     /* the lab secret's real value (a canary token) */
	char *extra_env[16]; /* "AGENTBOX_LAB_S<i>=<canary>": the profile's own secrets */
	size_t nextra_env;
	lab_snap snap[LAB_MAX_SNAPS];
	size_t nsnap;
	ab_strv agent_sockets;
	pid_t canary_pid;
	int extra_fd[3]; /* handed to agentbox as 3, 4, 5 */
	int extra_peer;  /* other end of fd 5 */
	/* servers (judge.c) */
	int listen_fd[LAB_MAX_LISTEN];
	char listen_what[LAB_MAX_LISTEN][48];
	const char *listen_probe[LAB_MAX_LISTEN];
	int nlisten;
	int dns_fd[2]; /* UDP+TCP 53 (TCP in listen_fd) */
	lab_upstream up[3];
	void *ca; /* ab_ca * */
	int pty_master, pty_slave;
	char *pty_out;     /* what agentbox printed (diagnostics) */
	bool late_bound;   /* the socket bound after the start (CRD-01) is up */
	bool clipboard_ok; /* terminal.clipboard: clipboard sequences pass on purpose */
	size_t pty_len;
	pthread_mutex_t mu;
	lab_hit hits[LAB_MAX_HITS];
	size_t nhits, hits_dropped;
	size_t dns_queries, dns_canary_queries;
	atomic_bool stop;
	pthread_t thr[4];
	int nthr;
	char note[512]; /* first non-fatal setup note (v6 missing...) */
} lab;

/* lab.c */
int lab_enter(lab *L, ab_err *err); /* namespaces: call single-threaded */
int lab_build_fs(lab *L, const ab_strv *keep, ab_err *err);
int lab_build_net(lab *L, ab_err *err);
int lab_plant(lab *L, ab_err *err); /* canaries, repos, snapshots */
int lab_start_canary_process(lab *L, ab_err *err);
int lab_write_profile(lab *L, json_t *secrets, ab_err *err);
int lab_write_info(lab *L, const char *only, ab_err *err);
const lab_canary *lab_canary_by_hash(const lab *L, const char *hash);
void lab_hash_file(const char *path, lab_snap *s);
/* git in the lab as the harness's user, HOME the fake home, no system config;
 * returns its exit status (-1: could not run or timed out) */
int lab_git(lab *L, const char *cwd, const char *const *args);
int lab_run_cmd(char *const argv[], char *const envp[], const char *cwd, int timeout_s);

/* judge.c */
int lab_servers_start(lab *L, ab_err *err);
void lab_servers_stop(lab *L);
void lab_hit_add(lab *L, const char *probe, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
void lab_judge(lab *L, ab_esc_results *rs);
void lab_free(lab *L);

#endif
