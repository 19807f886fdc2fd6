/* SPDX-License-Identifier: MIT */
/*
 * Internals shared by the supervisor's files (parent only):
 *   supervise.c          the listener: the server thread, what each
 *                        notification is for, denied syscalls, the
 *                        supervisor's life; reading a caller's ids, memory
 *                        and paths
 *   supervise_exec.c     the exec record and the exits
 *   supervise_rename.c   a rename onto a rendered credentials file
 *   supervise_connect.c  connect mediation and its thread pool
 *   supervise_create.c   creation calls, carried out by the sandbox's creator
 *
 * Threads: the server thread owns the site table, the counters and the
 * rename and connect state until it is joined (ab_supervisor_finish); the
 * event loop owns the tracked processes; the audit log takes whole-line
 * writes from both.
 */
#ifndef AGENTBOX_SUPERVISE_INT_H
#define AGENTBOX_SUPERVISE_INT_H

#include <jansson.h>
#include <limits.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>

#include "agentbox/supervise.h"

/* linux/nsfs.h (6.11): a pid of the caller's namespace, translated into the
 * pid namespace behind the fd (its process's pid there) */
#define AB_NS_GET_TGID_IN_PIDNS _IOR(0xb7, 0x9, int)

struct site;
struct tracked;
struct rename_buf;
struct ab_plan;
struct ab_med_req;

struct ab_supervisor {
	ab_audit *audit;
	ab_loop *loop;
	int fd;
	int pidns;   /* the sandbox's pid namespace: pids inside in one ioctl */
	int pipe[2]; /* exec_rec pointers, thread -> loop */
	pthread_t th;
	bool started;
	int stop; /* atomic */
	const ab_seccomp_policy *pol;
	int16_t errnos[AB_SECCOMP_MAX_KNOWN_NR + 1];
	int nr_execve, nr_execveat;
	struct seccomp_notif *req;
	struct seccomp_notif_resp *resp;
	size_t req_size, resp_size;
	struct site *sites; /* open addressing, 2 * AB_SUP_SITES_MAX slots */
	size_t nsites;
	uint64_t *overflow; /* per syscall: denials beyond the site table */
	struct tracked **tr;
	size_t ntr;
	ab_sup_bucket bucket;
	uint64_t suppressed;
	uint64_t cred_suppressed; /* credentials-refused lines the rate limit kept out */
	uint64_t exec_lost;       /* exec records the loop could not take (a full pipe) */
	uint64_t execs;           /* the loop's */
	uint64_t batch;           /* the loop's timer: records are taken in batches */
	/* rendered credentials files (notify_rename): their paths inside, their
	 * owner on the host, the run's start (a new file's birth is after it) */
	char **rendered;
	size_t nrendered;
	uid_t kuid;
	gid_t kgid;
	bool no_groups_failed;
	struct timespec t0;
	struct rename_buf *rb; /* the thread's scratch */
	/* connect mediation: the sandbox's NETLINK_SOCK_DIAG socket (-1: none,
	 * then only shared sockets are reachable by path), the host paths of
	 * the profile's unix_sockets, the refused paths for the summary */
	int diag;
	struct ours_file {
		uint64_t ino;
		uint32_t major, minor;
		int64_t btime_sec;
		uint32_t btime_nsec;
	} ours[64];
	unsigned ours_next;
	bool getfd_warned;
	int root;            /* the sandbox's root (O_PATH), from the first caller */
	int ll_net;          /* the plan's Landlock port rules (-1: none) */
	uint16_t *tcp_ports; /* ... the ports they list */
	size_t ntcp_ports;
	char **shared;
	size_t nshared;
	struct {
		char path[AB_SUP_ARG_MAX];
		char comm[16];
		uint64_t n;
	} refused[16];
	size_t nrefused;
	uint64_t refused_other;
	/* run --learn: the record the thread fills (NULL: not learning), and
	 * the plan it is judged against */
	struct ab_learn_set *learn;
	const struct ab_plan *plan;
	/* ... which program holds the sandbox's end of each loopback TCP
	 * connection the supervisor carried out (its local port), for the
	 * proxy to name who reached a destination; a ring, under learn_mu */
	pthread_mutex_t learn_mu;
	struct learn_port {
		uint16_t port;
		char prog[256];
	} * learn_ports;
	size_t learn_next;
	/* notify_create: the creator's socket (-1: none yet), the request
	 * buffer (src/observe/supervise_create.c) */
	int creator;
	struct ab_med_req *mreq;
	ab_sup_bucket trace_rate; /* run --trace: the creator's refusals recorded */
	uint64_t trace_suppressed;
	/* run --ask / --trace: the creations refused (supervise_refusal.c);
	 * NULL: not kept */
	struct ab_sup_refusal *refusals;
	size_t nrefusals;
	uint64_t refusals_more;
	/* the thread's: paths that existed inside, recently (execvp check) */
	struct {
		char path[AB_SUP_ARG_MAX];
		uint64_t at_ms;
	} seen[32];
	unsigned seen_next;
};

/* ---- supervise.c: answers */

/* CONT: let the call continue; else fail it with ERROR */
void sup_answer(ab_supervisor *s, uint64_t id, int error, bool cont);
/* Is the caller of notification ID still stopped in that very call? */
bool sup_still_valid(ab_supervisor *s, uint64_t id);
/* A "suppressed" line: COUNT records of KIND the rate limit (or a full
 * table) kept out of the log */
void sup_suppressed(ab_supervisor *s, const char *kind, uint64_t count);

/* ---- supervise.c: the caller */

long sup_status_field(const char *text, const char *key, bool last);
/* the pid inside, the parent's pid on the host, the process's (-1: unknown) */
void sup_proc_ids(pid_t tid, long *inner, long *host_ppid, long *tgid);
/* HOST_PID's process's pid inside, -1 when unknown */
long sup_inner_pid(const ab_supervisor *s, long host_pid);
void sup_proc_comm(pid_t tid, char *out, size_t size);
ssize_t sup_remote_read(pid_t pid, uint64_t addr, void *buf, size_t len);
/* A NUL-terminated string at ADDR in PID, at most SIZE-1 bytes: 1 = cut
 * short, 0 = whole, -1 = unreadable. */
int sup_remote_str(pid_t pid, uint64_t addr, char *out, size_t size);
/* JSON for bytes from the sandbox (jansson takes UTF-8 only) */
json_t *sup_bytes_json(const char *s);
/* The directory a relative PATH of TID is relative to (DFD: AT_FDCWD or an
 * fd of TID), as a path inside; "" for an absolute PATH.  0 or -errno. */
int sup_caller_base(pid_t tid, const char *path, int dfd, char *out, size_t size);
/* BASE + "/" + PATH (PATH alone when absolute), as given.  0 or -errno. */
int sup_join_raw(const char *base, const char *path, char *out, size_t size);
int sup_statx_fd(int fd, struct statx *x);

/* ---- supervise_exec.c */

void sup_on_exec(ab_supervisor *s, const struct seccomp_notif *rq);
/* the loop's watch on the records' pipe */
void sup_on_track(ab_loop *l, int fd, unsigned ev, void *data);
/* the records still in the pipe, the exits still awaited */
void sup_exec_finish(ab_supervisor *s);
void sup_exec_free(ab_supervisor *s);

/* ---- supervise_rename.c */

/* the rendered credentials files of PLAN */
int sup_rename_configure(ab_supervisor *s, const struct ab_plan *plan, ab_err *err);
void sup_on_rename(ab_supervisor *s, const struct seccomp_notif *rq);

/* ---- supervise_learn.c */

struct sockaddr;

/* an open, openat, creat, mkdir or mkdirat (notify_learn): recorded, continued */
void sup_on_learn(ab_supervisor *s, const struct seccomp_notif *rq);
/* ... recorded only (the caller answers it) */
void sup_learn_note(ab_supervisor *s, const struct seccomp_notif *rq);
/* an exec of PATH (as given) by TID, for the learning record */
void sup_learn_exec(ab_supervisor *s, pid_t tid, const char *path);
/* a connect TID made on SOCK (its copy) to ADDR: a loopback TCP one is noted
 * by its local port */
void sup_learn_connected(ab_supervisor *s, pid_t tid, int sock, const struct sockaddr *addr);

/* ---- supervise_create.c */

/* Is RQ (a call notify_create notifies) one that creates: an open only with
 * O_CREAT (learning notifies every open) */
bool sup_create_is_creation(const struct seccomp_notif *rq);
/* carried out by the creator, answered with its result (never CONTINUE) */
void sup_on_create(ab_supervisor *s, const struct seccomp_notif *rq);

/* ---- supervise_refusal.c */

/* A creation the creator answered R (< 0) for: its path (the caller's
 * PATH, relative to DFD) into the record, when it is kept.  The caller is
 * still stopped in the call. */
void sup_refusal_note(ab_supervisor *s, const struct seccomp_notif *rq, int dfd, const char *path,
		      int r);
void sup_refusal_free(ab_supervisor *s);

/* ---- supervise_connect.c */

/* the Landlock port rules and the shared unix sockets of PLAN */
int sup_connect_configure(ab_supervisor *s, const struct ab_plan *plan, ab_err *err);
/* the pool's copies of the listener and the rules: -errno */
int sup_connect_attach(ab_supervisor *s);
void sup_on_connect(ab_supervisor *s, const struct seccomp_notif *rq);
/* the refused sockets' counts for the summary */
void sup_connect_finish(ab_supervisor *s);

#endif
