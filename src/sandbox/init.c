/* SPDX-License-Identifier: MIT */
/*
 * The child (pid 1 of the new pid namespace): the containment checklist, then
 * the command's init.  One line per step, in this order, failing closed:
 *
 *   wait for the uid/gid maps     (parent writes them)
 *   hostname, loopback up         (uts, net)
 *   egress listeners -> parent    (netns.c: proxy, DNS, transparent)
 *   new root, pivot_root          (mount.c)
 *   own pty, master to the parent (pty.c)
 *   fresh session keyring         (caps.c)
 *   rlimits                       (caps.c)
 *   Landlock                      (landlock.c)
 *   drop capabilities, no_new_privs (caps.c)
 *   the creator thread -> parent  (creator.c: carries out creation calls)
 *   seccomp (LAST)                (seccomp.c; its notification listener -> parent,
 *                                  which records execs and denials: supervise.c)
 *   spawn the command (vfork-style); reap and forward signals until it exits.
 *
 * Every failure is sent to the parent as one fixed-size ab_err message; the
 * parent prints it once.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/close_range.h>
#include <linux/netlink.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agentbox/caps.h"
#include "agentbox/landlock.h"
#include "agentbox/netns.h"
#include "creator.h"
#include "pty.h"
#include "agentbox/container.h"
#include "agentbox/sandbox.h"
#include "agentbox/seccomp.h"

extern char **environ;

static const int forwarded[] = {SIGINT,  SIGTERM, SIGHUP,   SIGQUIT, SIGUSR1,
				SIGUSR2, SIGCONT, SIGWINCH, SIGALRM};

static int loopback_up(ab_err *err)
{
	_cleanup_close_ int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return ab_fail(err, errno, "loopback: socket");
	struct ifreq ifr = {0};
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
	if (ioctl(s, SIOCGIFFLAGS, &ifr) < 0)
		return ab_fail(err, errno, "loopback: get flags");
	ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
	if (ioctl(s, SIOCSIFFLAGS, &ifr) < 0)
		return ab_fail(err, errno, "loopback: up");
	return 0;
}

static int cmp_int(const void *a, const void *b)
{
	return *(const int *)a - *(const int *)b;
}

/* Every fd above 2 but the sync socket, the pty's slave and the creator's. */
static void close_all_but(int a, int b)
{
	int keep[2 + 65] = {a, b};
	size_t n = 2 + ab_creator_fds(keep + 2, AB_ARRAY_SIZE(keep) - 2);
	qsort(keep, n, sizeof(int), cmp_int);
	unsigned lo = 3;
	for (size_t i = 0; i < n; i++) {
		if (keep[i] < 3 || (unsigned)keep[i] < lo)
			continue;
		if ((unsigned)keep[i] > lo)
			syscall(SYS_close_range, lo, (unsigned)keep[i] - 1, 0);
		lo = (unsigned)keep[i] + 1;
	}
	syscall(SYS_close_range, lo, ~0U, 0);
}

static int parent_alive(int sync_fd)
{
	char c;
	ssize_t n = recv(sync_fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
	return !(n == 0); /* 0 = orderly shutdown: the parent is gone */
}

/* Profile limits are ceilings: one above the inherited hard limit (which an
 * unprivileged process cannot raise) becomes that hard limit, i.e. stricter. */
static int apply_limits(const ab_plan *plan, ab_err *err)
{
	ab_rlimit lim[16];
	size_t n = plan->nrlimits < AB_ARRAY_SIZE(lim) ? plan->nrlimits : AB_ARRAY_SIZE(lim);
	for (size_t i = 0; i < n; i++) {
		struct rlimit cur;
		lim[i] = plan->rlimits[i];
		if (getrlimit(lim[i].resource, &cur) == 0 && cur.rlim_max != RLIM_INFINITY) {
			if (lim[i].hard == RLIM_INFINITY || lim[i].hard > cur.rlim_max)
				lim[i].hard = cur.rlim_max;
			if (lim[i].soft == RLIM_INFINITY || lim[i].soft > lim[i].hard)
				lim[i].soft = lim[i].hard;
		}
	}
	return ab_rlimits_apply(lim, n, err);
}

/* What the parent made while we built the root and locked it down: the
 * filter, then the broker's work (the placeholders, the trust and
 * credentials files' bytes). */
static int from_parent(int sync_fd, ab_seccomp_prog *prog, ab_runtime *rt, ab_err *err)
{
	static struct sock_filter store[AB_SECCOMP_MAX_PROGS * AB_SECCOMP_MAX_INSNS];
	int r = ab_sync_recv_seccomp(sync_fd, prog, store);
	if (r < 0)
		return ab_fail(err, -r, "seccomp: receive the filter");
	if ((r = ab_mount_fill_runtime(sync_fd, rt, err)) < 0)
		return ab_err_prefix(err, "filesystem");
	return 0;
}

static int contain(const ab_child_args *a, int *pty_slave, ab_runtime *rt, ab_err *err)
{
	const ab_plan *plan = a->plan;
	int r;
	if (unshare(CLONE_NEWCGROUP) < 0)
		return ab_fail(err, errno, "cgroup namespace");
	if (sethostname(plan->hostname, strlen(plan->hostname)) < 0) {
		r = ab_fail(err, errno, "sethostname");
		err->step = AB_STEP_SETHOSTNAME; /* the parent names the outer filter */
		return r;
	}
	if (!plan->share_net &&
	    ((r = loopback_up(err)) < 0 || (r = ab_netns_setup(plan, a->sync_fd, err)) < 0))
		return r;
	if ((r = ab_mount_build_root(plan, a->sync_fd, rt, err)) < 0)
		return ab_err_prefix(err, "filesystem");
	/* credential changes clear the parent-death signal: set it again */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || !parent_alive(a->sync_fd))
		return ab_fail(err, ESRCH, "parent exited");
	if (plan->use_pty) {
		int master = -1;
		if ((r = ab_pty_open(&master, pty_slave, a->have_ws ? &a->ws : NULL, err)) < 0)
			return ab_err_prefix(err, "pty");
		ab_sync_msg m = {.type = AB_SYNC_PTY_MASTER};
		r = ab_sync_send(a->sync_fd, &m, master);
		close(master);
		if (r < 0)
			return ab_fail(err, -r, "pty: send master");
	}
	if ((r = ab_keyring_new_session(plan->keyring_skip, err)) < 0)
		return ab_err_prefix(err, "keyring");
	if ((r = apply_limits(plan, err)) < 0)
		return ab_err_prefix(err, "limits");
	if (plan->landlock.enabled && (r = ab_landlock_apply(&plan->landlock, err)) < 0)
		return ab_err_prefix(err, "landlock");
	if ((r = ab_caps_drop_all(plan->cap_last_cap, err)) < 0)
		return ab_err_prefix(err, "capabilities");
	if (plan->seccomp.notify_create) {
		/* before the filter: the thread must not get it */
		int end = -1;
		if ((r = ab_creator_start(plan, &end, err)) < 0)
			return r;
		ab_sync_msg m = {.type = AB_SYNC_CREATOR};
		r = ab_sync_send(a->sync_fd, &m, end);
		close(end);
		if (r < 0)
			return ab_fail(err, -r, "nested git: send the creator's socket");
	}
	ab_seccomp_prog prog = {0};
	if ((r = from_parent(a->sync_fd, &prog, rt, err)) < 0)
		return r;
	if (plan->seccomp.notify_connect) {
		/* the supervisor asks it which unix sockets were bound in here */
		int diag = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
		if (diag < 0)
			return ab_fail(err, errno,
				       "connect mediation: a socket diagnostics socket");
		ab_sync_msg m = {.type = AB_SYNC_SOCKDIAG};
		r = ab_sync_send(a->sync_fd, &m, diag);
		close(diag);
		if (r < 0)
			return ab_fail(err, -r, "connect mediation: send the diagnostics socket");
	}
	bool listen = ab_seccomp_listens(&plan->seccomp);
	int listener = -1;
	if ((r = ab_seccomp_apply(&prog, listen ? &listener : NULL, err)) < 0)
		return ab_err_prefix(err, "seccomp");
	if (listen) {
		/* to the parent before anything can notify: the command's exec
		 * (or a denied call) waits for it to answer */
		ab_sync_msg m = {.type = AB_SYNC_NOTIFY};
		r = ab_sync_send(a->sync_fd, &m, listener);
		close(listener);
		if (r < 0)
			return ab_fail(err, -r, "seccomp: send the notification listener");
	}
	return 0;
}

/* plan->envp with the run-time entries (placeholders) added or replacing. */
static char **merged_env(const ab_plan *plan, const ab_runtime *rt)
{
	if (!rt->env.n)
		return plan->envp.v;
	char **v = calloc(plan->envp.n + rt->env.n + 1, sizeof(char *));
	if (!v)
		return NULL;
	size_t n = 0;
	for (size_t i = 0; i < plan->envp.n; i++) {
		const char *e = plan->envp.v[i];
		size_t kl = strcspn(e, "=");
		bool replaced = false;
		for (size_t j = 0; j < rt->env.n && !replaced; j++)
			replaced = strncmp(rt->env.v[j], e, kl + 1) == 0;
		if (!replaced)
			v[n++] = plan->envp.v[i];
	}
	for (size_t j = 0; j < rt->env.n; j++)
		v[n++] = rt->env.v[j];
	return v;
}

/*
 * The command's process is spawned the way posix_spawn does it: clone with
 * CLONE_VM | CLONE_VFORK, on a stack of its own, so no copy of init's
 * address space (agentbox's whole image, the plan) is made only for the exec
 * to tear it down.  init is suspended until the exec (or _exit).  The rule
 * for such a process: system calls only, no malloc, no stdio, no locks, no
 * message formatting; what it fails at goes into a report init formats.
 * The environment is built by init beforehand.
 *
 * When the exec is recorded (audit.exec with a log, or run --learn) the
 * process runs on a copy instead (no CLONE_VM, as fork did): it must make
 * itself dumpable for agentbox to read the exec's arguments, and
 * dumpability belongs to the address space: on a shared one init (and its
 * unfiltered creator thread) would stay dumpable until it could reset it,
 * after the command had started.
 */
typedef struct {
	const char *what; /* the step that failed (a literal), NULL: exec'd */
	int fd;           /* the fd it concerned, or -1 */
	int err;          /* errno */
	bool exec;        /* the exec itself failed */
} spawn_report;

typedef struct {
	const ab_plan *plan;
	int pty_slave;
	spawn_report *rep; /* a MAP_SHARED page: seen by init either way */
} spawn_args;

#define SPAWN_STACK (64 * 1024)

__attribute__((noreturn)) static void spawn_fail(spawn_report *rep, const char *what, int errnum)
{
	rep->what = what;
	rep->err = errnum;
	_exit(AB_EXIT_FAIL);
}

/* The command's process: signals, terminal, fds, exec.  Never returns. */
static int command_main(void *arg)
{
	const spawn_args *sa = arg;
	const ab_plan *plan = sa->plan;
	spawn_report *rep = sa->rep;
	/* init has no signal handler (drop_handlers), so none can run on its
	 * memory here; the forwarded signals back to their default, then the
	 * mask (init blocked every signal around the clone) emptied */
	for (size_t i = 0; i < AB_ARRAY_SIZE(forwarded); i++)
		signal(forwarded[i], SIG_DFL);
	signal(SIGCHLD, SIG_DFL);
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	if (sa->pty_slave >= 0) {
		int r = ab_pty_make_controlling(sa->pty_slave, plan->pty_mask, &rep->what,
						&rep->fd);
		if (r < 0)
			spawn_fail(rep, rep->what, -r);
	} else if (setsid() < 0) {
		spawn_fail(rep, "setsid", errno);
	}
	/* Nothing but 0-2 crosses exec (the sync socket included). */
	if (syscall(SYS_close_range, 3, ~0U, 0) < 0)
		spawn_fail(rep, "close_range", errno);
	/* init made itself non-dumpable and this copy inherited it: then an
	 * unprivileged agentbox could not read the exec's arguments for the
	 * record (ptrace access).  Nothing else runs inside yet, and this copy
	 * (never init's memory: see above) holds nothing secret (placeholders
	 * only); the exec replaces it. */
	if (plan->seccomp.notify_exec)
		prctl(PR_SET_DUMPABLE, 1);
	execvp(plan->argv.v[0], plan->argv.v);
	rep->exec = true;
	spawn_fail(rep, "exec", errno);
	return AB_EXIT_FAIL;
}

/* The report of a command that did not reach its exec, as init's error. */
static void spawn_error(const ab_plan *plan, const spawn_report *rep, ab_err *err)
{
	const char *cmd = plan->argv.v[0];
	if (rep->exec && rep->err == ENOENT)
		ab_fail_code(err, AB_EXIT_NOTFOUND, 0, "%s: command not found", cmd);
	else if (rep->exec)
		ab_fail_code(err, AB_EXIT_NOEXEC, rep->err, "%s: %s", cmd, strerror(rep->err));
	else if (rep->fd >= 0)
		ab_fail(err, rep->err, "%s %d", rep->what, rep->fd);
	else
		ab_fail(err, rep->err, "%s", rep->what);
}

/* Start the command; returns its pid once it has exec'd, or -1 with *err. */
static pid_t spawn_command(const ab_plan *plan, const ab_runtime *rt, int pty_slave, ab_err *err)
{
	/* execvp looks the command up in the sandbox's PATH, from environ:
	 * init's own from here on (it reads no variable itself) */
	char **env = merged_env(plan, rt);
	if (!env)
		return ab_fail(err, ENOMEM, "environment");
	environ = env;
	size_t stack_size = SPAWN_STACK + (plan->argv.n + 2) * sizeof(char *);
	spawn_report *rep =
		mmap(NULL, sizeof(*rep), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (rep == MAP_FAILED)
		return ab_fail(err, errno, "spawn the command: mmap");
	char *stack = mmap(NULL, stack_size, PROT_READ | PROT_WRITE,
			   MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
	if (stack == MAP_FAILED) {
		int e = errno;
		munmap(rep, sizeof(*rep));
		return ab_fail(err, e, "spawn the command: mmap");
	}
	*rep = (spawn_report){.fd = -1};
	spawn_args sa = {.plan = plan, .pty_slave = pty_slave, .rep = rep};
	bool copy = plan->seccomp.notify_exec || plan->seccomp.notify_learn;
	sigset_t all, old;
	sigfillset(&all);
	sigprocmask(SIG_SETMASK, &all, &old);
	pid_t pid = clone(command_main, stack + stack_size,
			  CLONE_VFORK | SIGCHLD | (copy ? 0 : CLONE_VM), &sa);
	int e = errno;
	sigprocmask(SIG_SETMASK, &old, NULL);
	/* the process has exec'd or exited: nothing runs on the stack any more */
	munmap(stack, stack_size);
	if (pid < 0)
		ab_fail(err, e, "fork");
	else if (rep->what) {
		waitpid(pid, NULL, 0);
		spawn_error(plan, rep, err);
		pid = -1;
	}
	munmap(rep, sizeof(*rep));
	return pid;
}

/* init waits for signals with sigwaitinfo and runs no handler: any it
 * inherited from agentbox goes, before the filter makes each call dearer.
 * The command's process, which shares init's memory until its exec, relies
 * on it. */
static void drop_handlers(void)
{
	for (int sig = 1; sig < _NSIG; sig++) {
		struct sigaction old;
		if (sigaction(sig, NULL, &old) == 0 && old.sa_handler != SIG_DFL &&
		    old.sa_handler != SIG_IGN)
			signal(sig, SIG_DFL);
	}
}

static int encode_status(int st)
{
	if (WIFEXITED(st))
		return WEXITSTATUS(st);
	if (WIFSIGNALED(st))
		return 128 + WTERMSIG(st);
	return AB_EXIT_FAIL;
}

/* pid 1: forward signals, reap everything, exit with the command's status. */
static int init_loop(pid_t cmd, const sigset_t *set)
{
	for (;;) {
		siginfo_t si;
		int sig = sigwaitinfo(set, &si);
		if (sig < 0)
			continue;
		if (sig != SIGCHLD) {
			/* terminal-style signals go to the command's process group */
			bool group =
				sig == SIGINT || sig == SIGQUIT || sig == SIGHUP || sig == SIGCONT;
			kill(group ? -cmd : cmd, sig);
			continue;
		}
		for (;;) {
			int st;
			pid_t p = waitpid(-1, &st, WNOHANG);
			if (p <= 0)
				break;
			if (p == cmd)
				return encode_status(st);
		}
	}
}

static void child_fail(const ab_child_args *a, ab_err *err)
{
	ab_sync_msg m = {.type = AB_SYNC_ERROR};
	if (err->exit_code == 0)
		err->exit_code = AB_EXIT_FAIL;
	m.err = *err;
	ab_sync_send(a->sync_fd, &m, -1);
	_exit(err->exit_code);
}

int ab_child_main(void *arg)
{
	const ab_child_args *a = arg;
	ab_err err = {0};
	int pty_slave = -1;
	ab_runtime rt = {0};

	/* The parent's end of the sync socket (and its other fds) must not live
	 * here, or the parent's death would never show as EOF. */
	for (size_t i = 0; i < AB_ARRAY_SIZE(a->parent_fds); i++)
		if (a->parent_fds[i] >= 0)
			close(a->parent_fds[i]);
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	/* Out of agentbox's session: init (and its creator thread, which opens
	 * files for the sandbox) must never have the user's terminal as its
	 * controlling tty, or /dev/tty opened for the sandbox would be it.
	 * Terminal signals reach init through the parent, which forwards them. */
	if (setsid() < 0) {
		ab_fail(&err, errno, "setsid");
		child_fail(a, &err);
	}
	drop_handlers();
	sigset_t set;
	sigemptyset(&set);
	for (size_t i = 0; i < AB_ARRAY_SIZE(forwarded); i++)
		sigaddset(&set, forwarded[i]);
	sigaddset(&set, SIGCHLD);
	sigprocmask(SIG_BLOCK, &set, NULL);

	ab_sync_msg m;
	if (ab_sync_recv(a->sync_fd, &m, NULL) <= 0 || m.type != AB_SYNC_MAPS_DONE)
		_exit(AB_EXIT_FAIL); /* parent gone or failed: it reports */
	if (contain(a, &pty_slave, &rt, &err) < 0)
		child_fail(a, &err);

	/* From here on: fully contained.  pid 1 is not dumpable, so the command
	 * cannot ptrace or read the memory of its init, and it keeps no fd but
	 * stdio and the sync socket (fds handed to agentbox never cross). */
	prctl(PR_SET_DUMPABLE, 0);
	close_all_but(a->sync_fd, pty_slave);
	pid_t cmd = spawn_command(a->plan, &rt, pty_slave, &err);
	if (cmd < 0)
		child_fail(a, &err);
	if (pty_slave >= 0) {
		/* init must not hold the user's real terminal either */
		int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
		for (int fd = 0; devnull >= 0 && fd <= 2; fd++)
			dup3(devnull, fd, 0);
		if (devnull > 2)
			close(devnull);
		close(pty_slave);
	}
	m = (ab_sync_msg){.type = AB_SYNC_READY, .value = cmd};
	ab_sync_send(a->sync_fd, &m, -1);
	int status = init_loop(cmd, &set);
	/* Nothing of the sandbox outlives the command: kill what is left and
	 * reap it, so that once the parent reads EXIT only this (contained,
	 * exiting) init remains and it may clean up on the host right away. */
	kill(-1, SIGKILL);
	while (waitpid(-1, NULL, 0) > 0 || errno == EINTR)
		;
	m = (ab_sync_msg){.type = AB_SYNC_EXIT, .value = status};
	ab_sync_send(a->sync_fd, &m, -1);
	_exit(status);
}
