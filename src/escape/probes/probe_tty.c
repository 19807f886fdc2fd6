/* SPDX-License-Identifier: MIT */
/*
 * test-escape probes of the terminal: TTY-01 (pushing input with TIOCSTI,
 * TIOCLINUX selection and paste, console redirection) and TTY-02 (holding
 * the user's own terminal, setting its clipboard) (docs/test-escape.md).
 *
 * Runs INSIDE the sandbox, in the probe's own forked child (runner.c).
 * What TIOCSTI injects is a shell comment; ioctls that could do harm are
 * tried on a bad fd (EBADF shows the call was not filtered), TIOCCONS on a
 * terminal is undone at once.  The judge compares what TTY-02 reports with
 * the outer pty and reads that pty for the injected text and the
 * clipboard write.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "agentbox/escape.h"
#include "probe_sysutil.h"

#define AB_PROBE_TEXT "#abprobe\n" /* what TIOCSTI injects: a shell comment */

/* ------------------------------------------------------------------ */
/* TTY-01, TTY-02                                                     */
/* ------------------------------------------------------------------ */

/* The sandbox's own devpts instance (st_dev of /dev/pts), or 0. */
static dev_t own_devpts(void)
{
	struct stat st;
	return stat("/dev/pts/ptmx", &st) == 0 || stat("/dev/pts", &st) == 0 ? st.st_dev : 0;
}

/* Injects AB_PROBE_TEXT byte by byte; a first success continues the string. */
static void sti(ab_probe_run *r, int fd, const char *name, bool *sent)
{
	char what[96];
	snprintf(what, sizeof(what), "ioctl(%s, TIOCSTI)", name);
	const char *s = AB_PROBE_TEXT;
	if (ioctl(fd, TIOCSTI, s) < 0) {
		ab_pr_sys(r, what, -1, errno);
		return;
	}
	for (s++; *s && ioctl(fd, TIOCSTI, s) == 0; s++)
		;
	*sent = true;
	struct stat st;
	dev_t pts = own_devpts();
	if (fstat(fd, &st) == 0 && pts && st.st_dev == pts)
		ab_pr_ok(r, what, "injected into the sandbox's own pty (judge checks the outer)");
	else
		ab_pr_escaped(r, what, "injected into a terminal that is not the sandbox's pty");
}

/* TIOCSTI on each distinct terminal among fds 0-2, and a harmless
 * TIOCLINUX (6, TIOCL_GETSHIFTSTATE) on it. */
static void tty01_fds(ab_probe_run *r, bool *sent)
{
	dev_t seen[3];
	ino_t seen_ino[3];
	int nseen = 0;
	char name[64];
	for (int fd = 0; fd < 3; fd++) {
		struct stat st;
		snprintf(name, sizeof(name), "fd %d", fd);
		if (fstat(fd, &st) < 0 || !isatty(fd)) {
			ab_pr_ok(r, name, "not a terminal");
			continue;
		}
		bool dup = false;
		for (int i = 0; i < nseen; i++)
			dup |= seen[i] == st.st_rdev && seen_ino[i] == st.st_ino;
		if (dup)
			continue;
		seen[nseen] = st.st_rdev, seen_ino[nseen++] = st.st_ino;
		sti(r, fd, name, sent);
		char sub = 6; /* TIOCL_GETSHIFTSTATE */
		snprintf(name, sizeof(name), "ioctl(fd %d, TIOCLINUX, 6)", fd);
		int k = ioctl(fd, TIOCLINUX, &sub), e = errno;
		psys_rec_filtered(r, name, k, e, psys_b_seccomp, "seccomp");
	}
}

/* TIOCCONS on each terminal among fds 0-2 (undone if it works); not tried
 * with CAP_SYS_ADMIN, which is an escape by itself. */
static void tty01_cons(ab_probe_run *r)
{
	char name[64];
	struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
	struct __user_cap_data_struct cd[2] = {{0, 0, 0}, {0, 0, 0}};
	bool admin = syscall(SYS_capget, &h, cd) == 0 && (cd[0].effective & (1u << CAP_SYS_ADMIN));
	for (int fd = 0; fd < 3; fd++) {
		if (!isatty(fd))
			continue;
		snprintf(name, sizeof(name), "ioctl(fd %d, TIOCCONS)", fd);
		if (admin) {
			ab_pr_escaped(r, name,
				      "CAP_SYS_ADMIN held: would redirect the console (not tried)");
			continue;
		}
		long k = ioctl(fd, TIOCCONS);
		int e = errno;
		if (k == 0)
			ioctl(fd, TIOCCONS); /* undo */
		ab_pr_sys(r, name, k, e);
		if (k < 0)
			ab_pr_layer(r, "capabilities"); /* TIOCCONS is not filtered */
	}
}

/* TTY-01: TIOCSTI of "#abprobe\n" on fds 0-2 (each distinct terminal once)
 * and on /dev/tty; ioctl(-1, TIOCSTI) and ioctl(-1, TIOCSTI | 1<<32) (EBADF:
 * not filtered, CVE-2019-10063); ioctl(-1, TIOCLINUX) with subcodes 2/3
 * (selection, paste) and the high-bit variant; TIOCLINUX subcode 6 (a
 * harmless read) on terminals; TIOCSETD/TIOCCONS on a bad fd (not filtered
 * by design: reported) and TIOCCONS on terminals unless CAP_SYS_ADMIN.
 * Reports "tiocsti_sent". */
void ab_probe_tty01(ab_probe_run *r)
{
	bool sent = false;
	tty01_fds(r, &sent);
	int tty = open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (tty < 0) {
		int e = errno;
		ab_pr_sys(r, "open /dev/tty", -1, e);
		psys_layer_for(r, e, ENXIO, "no controlling terminal", 0, NULL);
	} else {
		sti(r, tty, "/dev/tty", &sent);
		close(tty);
	}
	char c = '#', sub2[8] = {2}, sub3 = 3;
	const struct psys_sc t[] = {
		{"ioctl(-1, TIOCSTI)",
		 SYS_ioctl,
		 {-1, TIOCSTI, PSYS_L(&c)},
		 psys_b_seccomp,
		 "seccomp"},
		{"ioctl(-1, TIOCSTI | 1<<32)",
		 SYS_ioctl,
		 {-1, (1L << 32) | TIOCSTI, PSYS_L(&c)},
		 psys_b_seccomp,
		 "seccomp"},
		{"ioctl(-1, TIOCLINUX, 2 set selection)",
		 SYS_ioctl,
		 {-1, TIOCLINUX, PSYS_L(sub2)},
		 psys_b_seccomp,
		 "seccomp"},
		{"ioctl(-1, TIOCLINUX, 3 paste)",
		 SYS_ioctl,
		 {-1, TIOCLINUX, PSYS_L(&sub3)},
		 psys_b_seccomp,
		 "seccomp"},
		{"ioctl(-1, TIOCLINUX | 1<<32, 3 paste)",
		 SYS_ioctl,
		 {-1, (1L << 32) | TIOCLINUX, PSYS_L(&sub3)},
		 psys_b_seccomp,
		 "seccomp"},
	};
	psys_run_table(r, t, AB_ARRAY_SIZE(t));
	int ld = 0;
	long k = ioctl(-1, TIOCSETD, &ld);
	ab_pr_ok(r, "ioctl(-1, TIOCSETD)", "%s: not filtered by design (own ptys only)",
		 k < 0 ? psys_ename(errno) : "succeeded");
	k = ioctl(-1, TIOCCONS);
	ab_pr_ok(r, "ioctl(-1, TIOCCONS)", "%s: not filtered by design (needs CAP_SYS_ADMIN)",
		 k < 0 ? psys_ename(errno) : "succeeded");
	tty01_cons(r);
	ab_pr_report(r, "tiocsti_sent", json_boolean(sent));
}

static json_t *tty_identity(int fd, const char *name, dev_t pts, bool *foreign)
{
	struct stat st;
	json_t *o = json_object();
	json_object_set_new(o, "fd", json_string(name));
	if (fstat(fd, &st) < 0) {
		json_object_set_new(o, "error", json_string(psys_ename(errno)));
		return o;
	}
	json_object_set_new(o, "dev", json_integer((json_int_t)st.st_dev));
	json_object_set_new(o, "ino", json_integer((json_int_t)st.st_ino));
	json_object_set_new(o, "rdev", json_integer((json_int_t)st.st_rdev));
	json_object_set_new(o, "chr", json_boolean(S_ISCHR(st.st_mode)));
	bool tty = isatty(fd);
	json_object_set_new(o, "isatty", json_boolean(tty));
	if (!tty)
		return o;
	char tn[128];
	if (ttyname_r(fd, tn, sizeof(tn)) == 0)
		json_object_set_new(o, "ttyname", json_string(tn));
	unsigned int dev;
	pid_t pg, sid;
	if (ioctl(fd, TIOCGDEV, &dev) == 0)
		json_object_set_new(o, "tty_dev", json_integer(dev));
	if (ioctl(fd, TIOCGPGRP, &pg) == 0)
		json_object_set_new(o, "pgrp", json_integer(pg));
	if (ioctl(fd, TIOCGSID, &sid) == 0)
		json_object_set_new(o, "sid", json_integer(sid));
	/* /dev/tty itself sits on /dev, not devpts: judged via fds 0-2 */
	if (strcmp(name, "/dev/tty") != 0 && (!pts || st.st_dev != pts))
		*foreign = true;
	return o;
}

/* TTY-02: fstat of fds 0-2 and of /dev/tty (dev, ino, rdev), ttyname,
 * TIOCGDEV, TIOCGPGRP, TIOCGSID, our session and process group: reported as
 * "ttys" for the judge to compare with the outer pty.  A terminal on fds 0-2
 * that is not on the sandbox's own devpts instance is ESCAPED (the user's
 * terminal is held inside). */
void ab_probe_tty02(ab_probe_run *r)
{
	dev_t pts = own_devpts();
	json_t *a = json_array();
	bool foreign = false;
	char name[16];
	for (int fd = 0; fd < 3; fd++) {
		snprintf(name, sizeof(name), "%d", fd);
		json_array_append_new(a, tty_identity(fd, name, pts, &foreign));
	}
	int tty = open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (tty >= 0) {
		json_array_append_new(a, tty_identity(tty, "/dev/tty", pts, &foreign));
		close(tty);
	}
	ab_pr_report(r, "ttys", a);
	ab_pr_report(r, "session",
		     json_pack("{s:i,s:i,s:I}", "sid", (int)getsid(0), "pgrp", (int)getpgrp(),
			       "devpts_dev", (json_int_t)pts));
	int e = errno;
	if (tty < 0) {
		ab_pr_sys(r, "open /dev/tty (a controlling terminal)", -1, e);
		psys_layer_for(r, e, ENXIO, "no controlling terminal", 0, NULL);
	} else
		ab_pr_ok(r, "open /dev/tty (a controlling terminal)",
			 "opened: reported, judge compares");
	if (foreign)
		ab_pr_escaped(r, "terminals on fds 0-2 are the sandbox's own pty",
			      "a terminal outside the sandbox's devpts is held");
	else
		ab_pr_ok(r, "terminals on fds 0-2 are the sandbox's own pty",
			 "reported; judge compares");
	/* a clipboard write (OSC 52) through the terminal: the judge looks for
	 * it on the outer terminal */
	static const char osc52[] = "\x1b]52;c;" AB_ESC_CLIP_B64 "\x07";
	if (isatty(1) && write(1, osc52, sizeof(osc52) - 1) == (ssize_t)sizeof(osc52) - 1)
		ab_pr_ok(r, "set the clipboard with OSC 52",
			 "written; judge reads the outer terminal");
	else
		ab_pr_ok(r, "set the clipboard with OSC 52", "not tried: stdout is not a terminal");
}
