/* SPDX-License-Identifier: MIT */
/*
 * `run`, parent side (host namespaces): compile seccomp, clone the child into
 * new namespaces, write its uid/gid maps, then serve it from one event loop
 * (sync messages, pty relay, signals) until it exits, and clean up after it.
 * ab_sandbox_run is that sequence of phases over one run_state, which owns
 * every resource; whichever phase fails, run_release() is the one way out.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include "agentbox/audit.h"
#include "agentbox/broker.h"
#include "agentbox/cgroup.h"
#include "cleanup.h"
#include "settle.h"
#include "guard.h"
#include "agentbox/control.h"
#include "agentbox/host.h"
#include "agentbox/loop.h"
#include "agentbox/mediate.h"
#include "agentbox/netns.h"
#include "agentbox/phkey.h"
#include "agentbox/proxy.h"
#include "agentbox/review.h"
#include "pty.h"
#include "agentbox/container.h"
#include "agentbox/sandbox.h"
#include "agentbox/sync.h"
#include "agentbox/supervise.h"
#include "agentbox/trace.h"
#include "asker.h"
#include "pathoffer.h"
#include "watch.h"

#define CHILD_STACK (256 * 1024)

int ab_sync_send_seccomp(int fd, const ab_seccomp_prog *p)
{
	ab_sync_msg m = {.type = AB_SYNC_SECCOMP, .value = (int)p->nprogs};
	int r = ab_sync_send(fd, &m, -1);
	for (size_t i = 0; r == 0 && i < p->nprogs; i++) {
		size_t len = p->progs[i].len * sizeof(struct sock_filter);
		if (p->progs[i].len > AB_SECCOMP_MAX_INSNS)
			return -E2BIG;
		ssize_t n;
		do
			n = send(fd, p->progs[i].filter, len, MSG_NOSIGNAL);
		while (n < 0 && errno == EINTR);
		r = n == (ssize_t)len ? 0 : -(n < 0 ? errno : EIO);
	}
	return r;
}

int ab_sync_recv_seccomp(int fd, ab_seccomp_prog *out, struct sock_filter *store)
{
	ab_sync_msg m;
	int r = ab_sync_recv(fd, &m, NULL);
	if (r <= 0)
		return r < 0 ? r : -EPIPE;
	if (m.type != AB_SYNC_SECCOMP || m.value < 0 || m.value > AB_SECCOMP_MAX_PROGS)
		return -EPROTO;
	out->nprogs = 0;
	for (int i = 0; i < m.value; i++) {
		struct sock_filter *buf = store + (size_t)i * AB_SECCOMP_MAX_INSNS;
		ssize_t n;
		do
			n = recv(fd, buf, AB_SECCOMP_MAX_INSNS * sizeof(*buf), MSG_TRUNC);
		while (n < 0 && errno == EINTR);
		if (n <= 0 || n % (ssize_t)sizeof(*buf) != 0 ||
		    n > (ssize_t)(AB_SECCOMP_MAX_INSNS * sizeof(*buf)))
			return n < 0 ? -errno : -EPROTO;
		out->progs[i].filter = buf;
		out->progs[i].len = (unsigned short)(n / (ssize_t)sizeof(*buf));
		out->nprogs++;
	}
	return 1;
}

/* ------------------------------------------------------------ id maps */

static int write_file(pid_t pid, const char *name, const char *content, ab_err *err)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, name);
	_cleanup_close_ int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return ab_fail(err, errno, "open %s", path);
	ssize_t n = write(fd, content, strlen(content));
	if (n < 0 || (size_t)n != strlen(content))
		return ab_fail(err, n < 0 ? errno : EIO, "write %s", path);
	return 0;
}

static int write_maps(const ab_plan *p, pid_t pid, ab_err *err)
{
	char map[64];
	int r;
	/* Unprivileged callers must deny setgroups before writing gid_map; root
	 * leaves it allowed so the child can drop root's supplementary groups. */
	if (!p->root_mode && (r = write_file(pid, "setgroups", "deny\n", err)) < 0)
		return r;
	snprintf(map, sizeof(map), "%u %u 1\n", (unsigned)p->inside_uid, (unsigned)p->map_kuid);
	if ((r = write_file(pid, "uid_map", map, err)) < 0)
		return r;
	snprintf(map, sizeof(map), "%u %u 1\n", (unsigned)p->inside_gid, (unsigned)p->map_kgid);
	return write_file(pid, "gid_map", map, err);
}

/* ------------------------------------------------------------ the run */

/* Everything one run holds.  Each resource starts as none (-1, NULL, zero)
 * and is released once, by run_release(), whichever phase failed. */
typedef struct run_state {
	const ab_plan *plan;
	ab_err *err;
	ab_learn_sets *learn; /* run --learn: the record to fill, or NULL */
	sigset_t sigs;        /* parent_signals: blocked, read through sig_fd */
	/* the child */
	pid_t child;      /* -1 until clone */
	bool child_done;  /* reaped */
	int child_status; /* raw waitpid status */
	bool have_exit;   /* AB_SYNC_EXIT received */
	int exit_status;
	bool have_error;
	ab_err child_err;
	int fatal; /* parent-side failure while serving */
	bool tampered;
	/* the host side */
	int ws_lock; /* the workspace, flock'ed */
	ab_cleaner cleaner;
	ab_watch watch;
	int devnull;
	struct termios saved_tio[3]; /* --no-pty: put back at the end */
	bool tio_saved[3];
	struct timespec git_since; /* nested repositories touched after it are judged */
	ab_guard guard;            /* filesystem.guard's values at the start */
	ab_phkey_id key_before;
	char *cg_path;  /* the run's cgroup, removed at the end */
	int *idmap_fds; /* one per plan mount, -1 for none */
	/* the channel */
	int sync_fd;   /* our end of the sync socketpair */
	int child_end; /* the child's end, closed after clone */
	int sig_fd;
	ab_seccomp_prog prog;
	/* the services */
	ab_loop *loop;
	ab_pty_relay *relay;
	struct ab_asker *asker; /* run --ask: the questions on the user's terminal */
	ab_proxy *proxy;        /* egress: serves the listeners the child hands over */
	ab_stash stash;         /* the values moved out of agentbox's environment */
	ab_broker *broker;      /* secrets and the session CA (the proxy borrows it) */
	ab_broker_files files;  /* the run-time mounts' memfds, sent empty, filled by it */
	ab_audit *audit;        /* the log (maybe none) and the exit summary's counts */
	ab_supervisor *sup;     /* the exec and denial record (seccomp user notification) */
	bool want_trace;        /* --trace and ab_trace_check passed */
	ab_trace *trace;        /* --trace: kernel tracing into the audit log */
	ab_control *ctl;        /* `agentbox allow`'s socket (removed at the end) */
	int ctl_fd;             /* its listener, until the proxy takes it */
	ab_err ctl_err;         /* why there is none, for the audit log */
} run_state;

/* The relay reads the user's keystrokes from stdin when it is a terminal
 * (else from nothing) and shows the pty's output on the first of stdout,
 * stderr that is a terminal; fds that are not terminals were handed to the
 * command directly. */
static int start_relay(run_state *s, ab_loop *l, int master)
{
	const unsigned m = s->plan->pty_mask;
	int in = STDIN_FILENO, out = STDOUT_FILENO;
	if (!(m & 1)) {
		in = s->devnull;
	}
	if (!(m & 2) && (m & 4))
		out = STDERR_FILENO;
	else if (!(m & 2))
		out = s->devnull;
	int r = ab_pty_relay_start(l, in, out, master, &s->relay, s->err);
	if (r == 0)
		ab_pty_relay_pass_clipboard(s->relay, s->plan->pass_clipboard);
	/* no terminal to ask on (no /dev/tty): as without --ask */
	if (r == 0 && s->plan->ask && s->proxy && (m & 1))
		s->asker = ab_asker_new(l, s->proxy, s->relay, s->audit, s->plan, s->child);
	return r;
}

static void on_sync(ab_loop *l, int fd, unsigned ev, void *data)
{
	run_state *s = data;
	ab_sync_msg m;
	int pfd = -1;
	int r = ab_sync_recv(fd, &m, &pfd);
	if (r <= 0) {
		ab_loop_unwatch(l, fd);
		return;
	}
	switch (m.type) {
	case AB_SYNC_PTY_MASTER:
		if (pfd < 0 || s->relay)
			break;
		if (start_relay(s, l, pfd) < 0) {
			s->fatal = -1;
			kill(s->child, SIGKILL);
		}
		pfd = -1; /* the relay owns it now */
		break;
	case AB_SYNC_LISTENER:
		if (pfd >= 0 && s->proxy)
			(void)ab_proxy_add_listener(s->proxy, AB_LISTENER_KIND(m.value),
						    AB_LISTENER_PORT(m.value), pfd);
		else if (pfd >= 0)
			close(pfd);
		pfd = -1;
		break;
	case AB_SYNC_SOCKDIAG:
		if (pfd >= 0 && s->sup) {
			ab_supervisor_set_diag(s->sup, pfd);
			pfd = -1;
		}
		break;
	case AB_SYNC_CREATOR:
		if (pfd >= 0 && s->sup) {
			ab_supervisor_set_creator(s->sup, pfd);
			pfd = -1;
		}
		break;
	case AB_SYNC_NOTIFY:
		if (pfd >= 0 && s->sup) {
			/* unserved, every exec inside would wait forever: stop */
			if (ab_supervisor_attach(s->sup, l, pfd, s->child, s->err) < 0) {
				s->fatal = -1;
				kill(s->child, SIGKILL);
			}
			pfd = -1;
		}
		break;
	case AB_SYNC_ERROR:
		s->have_error = true;
		s->child_err = m.err;
		break;
	case AB_SYNC_EXIT:
		s->have_exit = true;
		s->exit_status = m.value;
		break;
	default: break;
	}
	if (pfd >= 0)
		close(pfd);
}

/* A protected path was replaced or removed on the host: stop the sandbox
 * before it can use the now unprotected path. */
static void on_watch(ab_loop *l, int fd, unsigned ev, void *data)
{
	run_state *s = data;
	const char *path = ab_watch_changed(&s->watch);
	if (!path || s->have_exit || s->tampered)
		return;
	s->tampered = true;
	kill(s->child, SIGKILL);
	ab_fail(s->err, 0,
		"protected or hidden path %s was replaced or removed outside the sandbox while "
		"it ran; the sandbox was stopped (its read-only cover no longer applied)",
		path);
	ab_err_hint(s->err, "change protected files (e.g. with git config) while no agentbox "
			    "runs in that workspace");
}

static void on_signal(ab_loop *l, int fd, unsigned ev, void *data)
{
	run_state *s = data;
	struct signalfd_siginfo si;
	while (read(fd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
		int sig = (int)si.ssi_signo;
		if (sig == SIGCHLD) {
			int st;
			pid_t p = waitpid(s->child, &st, WNOHANG);
			if (p == s->child) {
				s->child_done = true;
				s->child_status = st;
				ab_loop_stop(l);
			}
		} else if (sig == SIGWINCH) {
			if (s->relay)
				ab_pty_relay_resize(s->relay);
			else
				kill(s->child, sig);
		} else {
			kill(s->child, sig);
		}
	}
}

static void on_trace(ab_loop *l, int fd, unsigned ev, void *data)
{
	ab_trace_poll(((run_state *)data)->trace);
}

/* --trace failed (TERR): strict stops the run, best-effort warns and runs
 * without it. */
static int trace_failed(const ab_plan *plan, ab_err *terr, ab_err *err)
{
	ab_err_prefix(terr, "--trace");
	if (plan->trace == AB_TRACE_BEST_EFFORT) {
		ab_warn("%s; running without kernel tracing", terr->msg);
		return 0;
	}
	*err = *terr;
	return -1;
}

/* Without a control socket the sandbox still runs (a convenience, not a
 * protection), but it is said, on stderr now and in the log. */
static void control_failed(run_state *s, const ab_err *cerr)
{
	ab_warn("no control socket: `agentbox allow` cannot reach this sandbox: %s", cerr->msg);
	if (cerr->hint[0])
		fprintf(stderr, "Hint: %s\n", cerr->hint);
	ab_control_close(s->ctl);
	s->ctl = NULL;
}

/* `agentbox allow`'s socket: made after clone (the sandbox never held it),
 * before the command starts (a failure is said before it draws anything),
 * under the workspace lock (control.h). */
static void open_control(run_state *s)
{
	struct stat ws;
	if (fstat(s->ws_lock, &ws) < 0)
		ab_fail(&s->ctl_err, errno, "workspace %s", s->plan->workspace);
	else if (ab_control_open(&ws, &s->ctl, &s->ctl_fd, &s->ctl_err) == 0)
		return;
	control_failed(s, &s->ctl_err);
}

static const int parent_signals[] = {SIGCHLD, SIGINT,  SIGTERM,  SIGHUP,  SIGQUIT,
				     SIGUSR1, SIGUSR2, SIGWINCH, SIGCONT, SIGALRM};

/* The last messages (EXIT, ERROR) the child sent before exiting. */
static void drain_sync(run_state *s)
{
	for (;;) {
		ab_sync_msg m;
		int pfd = -1;
		struct timeval tv = {0, 0};
		setsockopt(s->sync_fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
		int fl = fcntl(s->sync_fd, F_GETFL);
		fcntl(s->sync_fd, F_SETFL, fl | O_NONBLOCK);
		int r = ab_sync_recv(s->sync_fd, &m, &pfd);
		if (pfd >= 0)
			close(pfd);
		if (r <= 0)
			break;
		if (m.type == AB_SYNC_ERROR) {
			s->have_error = true;
			s->child_err = m.err;
		} else if (m.type == AB_SYNC_EXIT) {
			s->have_exit = true;
			s->exit_status = m.value;
		}
	}
}

static int serve(run_state *s, ab_err *err)
{
	int r = ab_loop_new(&s->loop, err);
	if (r < 0)
		return r;
	if (s->proxy && (r = ab_proxy_attach(s->proxy, s->loop, err)) < 0)
		return r;
	if (s->proxy && s->ctl_fd >= 0) {
		/* the proxy's from here, closed on failure too */
		r = ab_proxy_control(s->proxy, TAKE_FD(s->ctl_fd), &s->ctl_err);
		if (r < 0)
			control_failed(s, &s->ctl_err);
	}
	if (s->ctl_err.msg[0]) { /* after the proxy's "start" */
		json_t *ev = json_object();
		json_object_set_new(ev, "event", json_string("warning"));
		json_object_set_new(ev, "kind", json_string("control"));
		json_object_set_new(ev, "message", json_string(s->ctl_err.msg));
		ab_audit_emit(s->audit, ev);
	}
	if (ab_loop_watch(s->loop, s->sync_fd, AB_EV_READ, on_sync, s) < 0 ||
	    ab_loop_watch(s->loop, s->sig_fd, AB_EV_READ, on_signal, s) < 0 ||
	    (s->watch.fd >= 0 &&
	     ab_loop_watch(s->loop, s->watch.fd, AB_EV_READ, on_watch, s) < 0) ||
	    (s->trace &&
	     ab_loop_watch(s->loop, ab_trace_fd(s->trace), AB_EV_READ, on_trace, s) < 0))
		return ab_fail(err, errno, "event loop");
	/* the child may already be gone */
	int st;
	if (waitpid(s->child, &st, WNOHANG) == s->child) {
		s->child_done = true;
		s->child_status = st;
	}
	while (!s->child_done) {
		r = ab_loop_run(s->loop);
		if (r < 0 && r != -EINTR)
			return ab_fail(err, -r, "event loop");
	}
	drain_sync(s);
	return 0;
}

static int start_child(const ab_plan *plan, ab_child_args *args, pid_t *out, ab_err *err)
{
	void *stack = mmap(NULL, CHILD_STACK, PROT_READ | PROT_WRITE,
			   MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
	if (stack == MAP_FAILED)
		return ab_fail(err, errno, "mmap child stack");
	/* CLONE_NEWCGROUP comes later, in the child, once the parent has moved it
	 * into its own cgroup (so that cgroup is the namespace's root). */
	int flags = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS |
		    SIGCHLD | (plan->share_net ? 0 : CLONE_NEWNET);
	pid_t pid = clone(ab_child_main, (char *)stack + CHILD_STACK, flags, args);
	int e = errno;
	if (pid < 0) {
		munmap(stack, CHILD_STACK);
		ab_host h;
		ab_host_probe(&h, false);
		ab_host_userns_error(&h, e, err);
		return -e;
	}
	/* the stack stays mapped in the child (its own copy); ours is unused */
	munmap(stack, CHILD_STACK);
	*out = pid;
	return 0;
}

static int send_idmaps(int fd, const ab_plan *plan, int *fds)
{
	for (size_t i = 0; i < plan->nmounts; i++) {
		if (fds[i] < 0)
			continue;
		ab_sync_msg m = {.type = AB_SYNC_IDMAP, .value = (int)i};
		int r = ab_sync_send(fd, &m, fds[i]);
		ab_closep(&fds[i]);
		if (r < 0)
			return r;
	}
	ab_sync_msg end = {.type = AB_SYNC_IDMAP, .value = -1};
	return ab_sync_send(fd, &end, -1);
}

static int setup_cgroup(const ab_plan *plan, pid_t child, char **path, ab_err *err)
{
	if (!plan->cgroup_apply)
		return 0;
	ab_host h;
	ab_host_probe(&h, false);
	return ab_cgroup_setup(plan->cg_memory, plan->cg_pids, &h, child, path, err);
}

static int exit_code_of(run_state *s, ab_err *err)
{
	if (s->tampered)
		return AB_EXIT_FAIL; /* err was set by on_watch */
	if (s->have_error) {
		*err = s->child_err;
		return err->exit_code ? err->exit_code : AB_EXIT_FAIL;
	}
	if (s->have_exit)
		return s->exit_status;
	if (WIFEXITED(s->child_status)) {
		if (WEXITSTATUS(s->child_status) == AB_EXIT_FAIL) {
			ab_fail(err, 0, "the sandbox failed to start (no details reported)");
			return AB_EXIT_FAIL;
		}
		return WEXITSTATUS(s->child_status);
	}
	if (WIFSIGNALED(s->child_status))
		return 128 + WTERMSIG(s->child_status);
	return AB_EXIT_FAIL;
}

static void settle_git(run_state *s)
{
	ab_settle_run(s->plan, s->git_since, &s->guard, s->audit);
	ab_cleaner_settled(&s->cleaner);
}

/* The cleanup watcher's, when agentbox was killed before settle_git: no
 * log then (its file is closed there), stderr only. */
static void settle_in_watcher(void *ctx)
{
	run_state *s = ctx;
	ab_settle_run(s->plan, s->git_since, &s->guard, NULL);
}

/* ---- the phases of a run: each returns < 0 with *err set (or the child's
 * report to collect) and leaves what it holds in run_state for run_release */

static int run_init(run_state *s, const ab_plan *plan, ab_err *err)
{
	*s = (run_state){.plan = plan,
			 .err = err,
			 .child = -1,
			 .ws_lock = -1,
			 .cleaner = {.pipe_fd = -1},
			 .watch = {.fd = -1},
			 .devnull = -1,
			 .sync_fd = -1,
			 .child_end = -1,
			 .sig_fd = -1,
			 .ctl_fd = -1,
			 .files = {.bundle = -1, .ca = -1, .java = -1}};
	sigemptyset(&s->sigs);
	for (size_t i = 0; i < AB_ARRAY_SIZE(parent_signals); i++)
		sigaddset(&s->sigs, parent_signals[i]);
	sigprocmask(SIG_BLOCK, &s->sigs, NULL);
	s->idmap_fds = calloc(plan->nmounts ? plan->nmounts : 1, sizeof(int));
	if (!s->idmap_fds)
		return ab_fail(err, ENOMEM, "run");
	for (size_t i = 0; i < plan->nmounts; i++)
		s->idmap_fds[i] = -1;
	return 0;
}

/* One sandbox per workspace: two would see each other's placeholders as
 * protected paths and, removing their own, undo the other's protection.
 * The lock lives as long as the parent (and the cleanup watcher). */
static int lock_workspace(run_state *s)
{
	const ab_plan *plan = s->plan;
	s->ws_lock = open(plan->workspace, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (s->ws_lock < 0)
		return ab_fail(s->err, errno, "workspace %s", plan->workspace);
	if (flock(s->ws_lock, LOCK_EX | LOCK_NB) < 0) {
		int e = errno;
		ab_fail(s->err, e == EWOULDBLOCK ? 0 : e,
			"another agentbox is running in the workspace %s", plan->workspace);
		ab_err_hint(s->err,
			    "wait for it to end, or give each sandbox its own directory (e.g. "
			    "a separate clone of the repository)");
		return -1;
	}
	return 0;
}

/* Under the lock, before clone: what the run must put back or look at
 * afterwards, the inotify watch and the cleanup watcher. */
static int prepare_host(run_state *s)
{
	const ab_plan *plan = s->plan;
	/* --no-pty (or no terminal at all): the command holds the user's real
	 * terminal, so at least its settings are put back afterwards */
	for (int fd = 0; !plan->use_pty && fd <= 2; fd++)
		s->tio_saved[fd] = tcgetattr(fd, &s->saved_tio[fd]) == 0;
	bool placeholders = false;
	for (size_t i = 0; i < plan->nmounts; i++)
		placeholders |= plan->mounts[i].kind == AB_MNT_PLACEHOLDER;
	/* nested repositories armed during the run are disarmed after it */
	clock_gettime(CLOCK_REALTIME_COARSE, &s->git_since); /* the clock file times use */
	if (ab_guard_snapshot(&s->guard, plan, s->err) < 0)
		return -1;
	if (plan->review && ab_review_prepare(plan, s->err) < 0)
		return -1;
	if (ab_watch_init(&s->watch, plan, s->err) < 0)
		return -1;
	s->cleaner.settle = settle_in_watcher;
	s->cleaner.settle_ctx = s;
	if ((placeholders || s->watch.fd >= 0 || plan->git_settle) &&
	    ab_cleaner_start(&s->cleaner, s->ws_lock, s->watch.fd, s->err) < 0)
		return -1;
	if (plan->use_pty && (plan->pty_mask & 3) != 3) {
		s->devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
		if (s->devnull < 0)
			return ab_fail(s->err, errno, "open /dev/null");
	}
	return 0;
}

/* Before anything starts, so that a bad --trace, log path or collector is
 * a setup error: the tracing check, the log, the record, the proxy. */
static int prepare_services(run_state *s)
{
	const ab_plan *plan = s->plan;
	ab_err *err = s->err;
	if (plan->trace != AB_TRACE_OFF) {
		ab_err terr = {0};
		s->want_trace = ab_trace_check(&terr) == 0;
		if (!s->want_trace && trace_failed(plan, &terr, err) < 0)
			return -1;
	}
	if (ab_audit_open(plan->egress.log_path, &s->audit, err) < 0)
		return -1;
	if (plan->egress.otlp_url &&
	    ab_audit_export(s->audit, plan->egress.otlp_url, plan->egress.profile_name, err) < 0)
		return -1;
	if (ab_seccomp_listens(&plan->seccomp) &&
	    (ab_supervisor_new(&plan->seccomp, s->audit, &s->sup, err) < 0 ||
	     ab_supervisor_configure(s->sup, plan, err) < 0))
		return -1;
	if (ab_proxy_new(&plan->egress, s->audit, &s->proxy, err) < 0)
		return -1;
	/* the creations refused, for run --ask's offer and the summary */
	if (s->sup && (plan->ask_wanted || plan->trace != AB_TRACE_OFF))
		ab_supervisor_keep_refusals(s->sup);
	if (s->learn) {
		if (!s->sup)
			return ab_fail(err, 0, "run --learn: no seccomp listener to record with");
		ab_supervisor_learn(s->sup, &s->learn->paths);
		ab_proxy_learn(s->proxy, &s->learn->hosts, s->sup);
	}
	/* before clone: the values agentbox's environment holds move out of it */
	if (ab_broker_stash(plan, &s->stash, err) < 0)
		return -1;
	if (plan->ph_key_rw)
		ab_phkey_id_of(plan->ph_key, &s->key_before);
	return 0;
}

/* Clone the child, then what must follow clone before the child may go on:
 * SIGPIPE ignored, the watcher told, the control socket, the tracer. */
static int start_sandbox(run_state *s)
{
	const ab_plan *plan = s->plan;
	int sv[2] = {-1, -1};
	s->sig_fd = signalfd(-1, &s->sigs, SFD_CLOEXEC | SFD_NONBLOCK);
	if (s->sig_fd < 0 || socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		return ab_fail(s->err, errno, "run: signalfd/socketpair");
	s->sync_fd = sv[0];
	s->child_end = sv[1];
	ab_child_args args = {.plan = plan,
			      .sync_fd = s->child_end,
			      .parent_fds = {s->sync_fd, s->sig_fd, s->cleaner.pipe_fd, s->devnull,
					     s->ws_lock, s->watch.fd}};
	if (plan->use_pty)
		args.have_ws = ab_pty_get_winsize(STDIN_FILENO, &args.ws) ||
			       ab_pty_get_winsize(STDOUT_FILENO, &args.ws) ||
			       ab_pty_get_winsize(STDERR_FILENO, &args.ws);
	if (start_child(plan, &args, &s->child, s->err) < 0)
		return -1;
	/* The proxy writes to sockets whose peers may be gone (splice has no
	 * MSG_NOSIGNAL): EPIPE, not death.  Set after clone so the sandbox keeps
	 * the default disposition (an ignored signal would survive its exec). */
	signal(SIGPIPE, SIG_IGN);
	ab_closep(&s->child_end);
	ab_cleaner_watch_pid(&s->cleaner, s->child);
	if (s->proxy)
		open_control(s);
	/* the child waits for MAPS_DONE: tracing sees everything it does */
	if (s->want_trace) {
		ab_err terr = {0};
		if (ab_trace_start(s->child, s->audit, plan->seccomp.notify_denials, &s->trace,
				   &terr) < 0 &&
		    trace_failed(plan, &terr, s->err) < 0)
			return -1;
	}
	return 0;
}

/* What the child waits for, in the order it needs it: its id maps and cgroup
 * (MAPS_DONE), the placeholders (PLACEHOLDERS_DONE), the idmapped trees, the
 * run-time files' memfds, still empty (CONTENT_DONE: at its first mount that
 * needs one), the seccomp filter, then the secrets' environment and the
 * files filled (RUNTIME_DONE: waited for after its lockdown, before the
 * filter is loaded).  One socket, one order. */
static int feed_child(run_state *s)
{
	const ab_plan *plan = s->plan;
	ab_err *err = s->err;
	ab_sync_msg go = {.type = AB_SYNC_MAPS_DONE};
	/* A failed send means the child already died; a failed write of the
	 * maps or of the cgroup said why. */
	if (write_maps(plan, s->child, err) < 0 ||
	    setup_cgroup(plan, s->child, &s->cg_path, err) < 0 ||
	    ab_sync_send(s->sync_fd, &go, -1) < 0) {
		if (!err->msg[0])
			ab_fail(err, EIO, "run: start the sandbox");
		return -1;
	}
	/* the child gets going (hostname, loopback, sources) while we create
	 * the placeholders */
	if (ab_placeholders_create(plan, &s->cleaner, err) < 0 ||
	    ab_watch_start(&s->watch, plan, err) < 0)
		return -1;
	/* From here agentbox holds real values: no core dump of it, and no
	 * process of the same user may ptrace it or read its memory.  Not
	 * before: the child's id maps were written through /proc, which a
	 * non-dumpable parent's clone would have made root's. */
	if (plan->egress.nsecrets && prctl(PR_SET_DUMPABLE, 0) < 0)
		return ab_fail(err, errno, "prctl(PR_SET_DUMPABLE)");
	ab_sync_msg ph = {.type = AB_SYNC_PLACEHOLDERS_DONE};
	(void)ab_sync_send(s->sync_fd, &ph, -1);
	/* the child builds its root while we make the idmapped trees, the
	 * seccomp filter and the run-time files */
	if (plan->root_mode) {
		if (ab_mount_prepare_idmaps(plan, s->idmap_fds, err) < 0)
			return -1;
		(void)send_idmaps(s->sync_fd, plan, s->idmap_fds);
	}
	/* the run-time mounts' files, empty: the child mounts them now, and
	 * gets on with its Landlock rules and the rest while the broker fills
	 * them (it waits for RUNTIME_DONE only before its filter) */
	if (ab_broker_files_send(plan, s->sync_fd, &s->files, err) < 0)
		return -1;
	/* the tracer records the denials in the kernel: the filter answers them
	 * itself (no round trip to the supervisor per denied call) */
	ab_seccomp_policy pol = plan->seccomp;
	if (ab_trace_records_denials(s->trace))
		pol.notify_denials = false;
	if (ab_seccomp_compile(&pol, &s->prog, err) < 0)
		return -1;
	(void)ab_sync_send_seccomp(s->sync_fd, &s->prog);
	/* secrets and the session CA: made now, so the child never held them */
	if (ab_broker_prepare(plan, &s->stash, &s->files, s->sync_fd, &s->broker, err) < 0)
		return -1;
	ab_broker_files_close(&s->files);
	ab_sync_msg rt = {.type = AB_SYNC_RUNTIME_DONE};
	(void)ab_sync_send(s->sync_fd, &rt, -1);
	/* the proxy's masking set, made while the child finishes (the proxy
	 * serves nothing before the event loop) */
	if (s->broker)
		ab_proxy_set_broker(s->proxy, s->broker);
	return 0;
}

/* Until the child is gone; after the last fork (the idmap helper above):
 * threads may start. */
static int serve_child(run_state *s)
{
	if (ab_audit_export_run(s->audit, s->err) < 0 || serve(s, s->err) < 0 || s->fatal)
		return -1;
	return 0;
}

/* ---- the one way out: the child killed and reaped unless it already was,
 * then every resource released once, in an order that matters */

/* The services stop before anything they use goes: the proxy's connections,
 * the control socket (still under the workspace lock), the relay, the
 * record's last exits and repeat counts, the tracer's last records (before
 * the summary and "end"). */
static void stop_services(run_state *s)
{
	ab_asker_free(s->asker); /* the held requests get their 403 */
	s->asker = NULL;
	if (s->proxy)
		ab_proxy_shutdown(s->proxy);
	ab_closep(&s->ctl_fd);
	ab_control_close(s->ctl);
	s->ctl = NULL;
	if (s->relay)
		ab_pty_relay_free(s->relay);
	s->relay = NULL;
	ab_supervisor_finish(s->sup);
	if (s->loop)
		ab_loop_free(s->loop);
	s->loop = NULL;
	ab_trace_free(s->trace);
	s->trace = NULL;
}

static void restore_terminal(run_state *s)
{
	for (int fd = 0; fd <= 2; fd++) {
		if (!s->tio_saved[fd])
			continue;
		(void)tcsetattr(fd, TCSANOW, &s->saved_tio[fd]);
		if (fd == 0)
			(void)tcflush(fd, TCIFLUSH);
	}
}

/* The run's last words: the summary on stderr, "end" (with the status when
 * the command ran) in the log. */
static void close_log(run_state *s, int code, bool ran)
{
	if (s->audit && s->plan->egress.summary && ran)
		ab_audit_summary(s->audit, stderr);
	/* run --ask: the paths the sandbox was refused creating, offered */
	if (s->sup && ran)
		ab_path_offer(s->plan, s->sup, s->audit, s->plan->egress.summary);
	ab_proxy_free(s->proxy);
	s->proxy = NULL;
	ab_supervisor_free(s->sup);
	s->sup = NULL;
	if (!s->audit)
		return;
	json_t *ev = json_object();
	json_object_set_new(ev, "event", json_string("end"));
	if (ran)
		json_object_set_new(ev, "status", json_integer(code));
	ab_audit_emit(s->audit, ev);
	ab_audit_free(s->audit);
	s->audit = NULL;
}

static void settle_phkey(run_state *s)
{
	const ab_plan *plan = s->plan;
	if (!plan->ph_key_rw || s->child <= 0)
		return;
	int kr = ab_phkey_settle(plan->ph_key, &s->key_before);
	if (kr > 0)
		ab_warn("%s was replaced during the run (a writable grant covers it) and is "
			"removed: the next run makes a new key, and new stable placeholders",
			plan->ph_key);
	else if (kr < 0)
		ab_warn("%s was replaced during the run (a writable grant covers it) and "
			"could not be removed (%s): remove it before the next run",
			plan->ph_key, strerror(-kr));
}

static void release_fds(run_state *s)
{
	if (s->idmap_fds) {
		for (size_t i = 0; i < s->plan->nmounts; i++)
			ab_closep(&s->idmap_fds[i]);
		free(TAKE_PTR(s->idmap_fds));
	}
	ab_closep(&s->sync_fd);
	ab_closep(&s->child_end);
	ab_closep(&s->sig_fd);
	ab_closep(&s->devnull);
	if (s->ws_lock >= 0) {
		/* placeholders are gone: release the lock now, for the watcher's
		 * copy too (it is one open file description) */
		flock(s->ws_lock, LOCK_UN);
		ab_closep(&s->ws_lock);
	}
}

static void run_release(run_state *s, int code)
{
	bool ran = code != AB_EXIT_FAIL || s->have_exit;
	if (s->child > 0 && !s->child_done) {
		kill(s->child, SIGKILL);
		waitpid(s->child, NULL, 0);
		s->child_done = true;
	}
	stop_services(s);
	restore_terminal(s);
	/* after the terminal is back to normal */
	if (s->child > 0 && ran)
		settle_git(s);
	/* review mode: what the run changed, held in its change set */
	if (s->plan->review && s->child > 0)
		ab_review_after_run(s->plan, s->audit);
	close_log(s, code, ran);
	ab_broker_free(s->broker); /* wipes the values */
	s->broker = NULL;
	ab_broker_files_close(&s->files);
	ab_stash_free(&s->stash);
	ab_watch_free(&s->watch);
	ab_cleaner_finish(&s->cleaner);
	settle_phkey(s);
	if (s->cg_path) {
		ab_cgroup_cleanup(s->cg_path);
		free(TAKE_PTR(s->cg_path));
	}
	release_fds(s);
	ab_seccomp_prog_free(&s->prog);
	ab_guard_free(&s->guard);
}

/* The parent failed while starting the child: if the child failed first
 * (its error waits on the sync socket), that is the cause, not the broken
 * pipe the parent then met. */
static void child_said(run_state *s, ab_err *err)
{
	if (s->child <= 0 || s->sync_fd < 0)
		return;
	drain_sync(s);
	if (s->have_error)
		*err = s->child_err;
}

/* A set-up step an outer sandbox (a container engine) refused: say why and
 * what to change, with what only the parent sees (container.c). */
static void explain_step(const ab_plan *plan, ab_err *err)
{
	ab_ctr_facts f;
	char cause[512], fix[sizeof(err->hint)];
	if (!err->step)
		return;
	ab_ctr_detect(&f, plan->outer_uid == 0);
	if (!ab_ctr_advise(&f, err->step, err->code, cause, sizeof(cause), fix, sizeof(fix)))
		return;
	size_t len = strlen(err->msg);
	snprintf(err->msg + len, sizeof(err->msg) - len, ": %s", cause);
	ab_err_hint(err, "%s", fix);
}

int ab_sandbox_run(const ab_plan *plan, ab_err *err)
{
	return ab_sandbox_run_learn(plan, NULL, err);
}

int ab_sandbox_run_learn(const ab_plan *plan, ab_learn_sets *learn, ab_err *err)
{
	/* validate now, compile after clone (overlapping the child's setup) */
	if (ab_seccomp_validate(&plan->seccomp, err) < 0)
		return AB_EXIT_FAIL;
	/* a new .git inside is a link to this path, which must lead nowhere
	 * on the host (include/agentbox/mediate.h) */
	struct stat lst;
	if (plan->seccomp.notify_create && lstat(AB_MED_LINK_ROOT, &lst) == 0) {
		ab_fail(err, EEXIST,
			"%s exists on this host: the links agentbox makes for a new .git "
			"inside would lead there",
			AB_MED_LINK_ROOT);
		ab_err_hint(err, "remove %s (agentbox never makes it on the host)",
			    AB_MED_LINK_ROOT);
		return AB_EXIT_FAIL;
	}
	run_state s;
	int code = AB_EXIT_FAIL;
	int ri = run_init(&s, plan, err);
	s.learn = learn;
	if (ri == 0 && lock_workspace(&s) == 0 && prepare_host(&s) == 0 &&
	    prepare_services(&s) == 0 && start_sandbox(&s) == 0 && feed_child(&s) == 0 &&
	    serve_child(&s) == 0)
		code = exit_code_of(&s, err);
	else
		child_said(&s, err);
	if (code == AB_EXIT_FAIL)
		explain_step(plan, err);
	run_release(&s, code);
	/* the signal mask stays: main returns right away, and a signal still
	 * pending (a second Ctrl-C) must not replace the command's status */
	return code;
}
