# SPDX-License-Identifier: MIT
"""Kernel attack surface from inside (python3 ctypes probes, see abtest.PROBES_PY).

Each probe is a real attempt with harmless arguments.  Where an unfiltered
call would fail anyway with a distinctive errno (EBADF, EFAULT, EINVAL, ENOTTY),
only EPERM/ENOSYS proves the seccomp filter stopped it.
"""

import subprocess

from abtest import INNER_PY, describe, host_probes, probes, skip


def _expect(res, name, allowed):
    ret, err = res[name]
    assert err in allowed, "%s: returned %s errno %s inside, expected one of %s" % (
        name, ret, err, sorted(allowed))


def test_keyctl_blocked(ctx):
    res = probes(ctx, "keyctl", "keyctl_user", "add_key", "request_key")
    for n in res:
        _expect(res, n, {"EPERM", "ENOSYS"})


def test_unshare_blocked(ctx):
    res = probes(ctx, "unshare_user", "unshare_mnt", "unshare_net", "setns")
    _expect(res, "unshare_user", {"EPERM"})
    _expect(res, "unshare_mnt", {"EPERM"})
    _expect(res, "unshare_net", {"EPERM"})
    _expect(res, "setns", {"EPERM"})


def test_clone3_enosys(ctx):
    res = probes(ctx, "clone3")
    _expect(res, "clone3", {"ENOSYS"})


def test_io_uring_blocked(ctx):
    res = probes(ctx, "io_uring_setup")
    _expect(res, "io_uring_setup", {"EPERM", "ENOSYS"})


def test_tiocsti_blocked(ctx):
    # stdin is /dev/null: an unfiltered ioctl would give ENOTTY; EBADF for fd -1.
    res = probes(ctx, "tiocsti", "tiocsti_hi", "tiocsti_badfd", "tioclinux")
    for n in res:
        _expect(res, n, {"EPERM"})


def test_ptrace_blocked(ctx):
    res = probes(ctx, "ptrace_init", "ptrace_parent", "getppid")
    for n in ("ptrace_init", "ptrace_parent"):
        ret, err = res[n]
        assert ret == -1, "%s succeeded inside (ppid %s)" % (n, res["getppid"][0])
        assert err in {"EPERM", "ESRCH", "EACCES"}, "%s: %s" % (n, err)


def test_mount_blocked(ctx):
    res = probes(ctx, "mount", "mount_bind", "fsopen", "open_tree", "pivot_root", "chroot")
    for n in ("mount", "mount_bind", "pivot_root", "chroot"):
        _expect(res, n, {"EPERM"})
    for n in ("fsopen", "open_tree"):
        _expect(res, n, {"ENOSYS", "EPERM"})


def test_dangerous_syscalls_blocked(ctx):
    res = probes(ctx, "bpf", "perf_event_open", "userfaultfd", "kexec_load", "init_module")
    for n in res:
        _expect(res, n, {"EPERM", "ENOSYS"})


def test_proc_sys_readonly(ctx):
    res = probes(ctx, "core_pattern", "sysrq", "modprobe")
    for n in res:
        _expect(res, n, {"EACCES", "EROFS", "ENOENT", "EPERM"})
    r = ctx.sandbox("echo '|/tmp/x' > /proc/sys/kernel/core_pattern")
    assert r.returncode != 0, describe(r)
    with open("/proc/sys/kernel/core_pattern") as f:
        assert "/tmp/x" not in f.read()


I386_PY = r'''
import ctypes, mmap, os, sys
code = bytes([0xb8, 20, 0, 0, 0, 0xcd, 0x80, 0xc3])  # mov eax,20 (i386 getpid); int 0x80; ret
buf = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
buf.write(code)
f = ctypes.CFUNCTYPE(ctypes.c_long)(ctypes.addressof(ctypes.c_char.from_buffer(buf)))
r = f() & 0xffffffff
print("RESULT", "pid" if r == os.getpid() else "ret=%d" % (r - (1 << 32) if r >> 31 else r))
'''


def test_32bit_syscall_entry(ctx):
    host = subprocess.run([INNER_PY, "-c", I386_PY], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, timeout=30)
    if "RESULT pid" not in host.stdout:
        skip("this kernel has no IA32 syscall emulation (int 0x80 gave %r, rc %d)" % (
            host.stdout.strip(), host.returncode))
    r = ctx.sandbox(["sh", "-c", '%s -c "$1"; echo "rc=$?"' % INNER_PY, "sh", I386_PY])
    assert "RESULT pid" not in r.stdout, "a 32-bit syscall went through inside\n" + describe(r)
    # non-native architectures are killed (SIGSYS = 31 -> 128+31)
    assert "rc=159" in r.stdout or "RESULT ret=-" in r.stdout, describe(r)


def test_host_controls(ctx):
    """Positive control: unsandboxed, the same probes reach the kernel (so the
    errnos above come from the sandbox, not from the probe being broken)."""
    res = host_probes("tiocsti_badfd", "clone3", "io_uring_setup")
    assert res["tiocsti_badfd"][1] == "EBADF", res
    assert res["clone3"][1] in {"EINVAL", "EFAULT"}, res
    # io_uring may be disabled by sysctl; then it is EPERM on the host too.
    assert res["io_uring_setup"][1] in {"OK", "EPERM"}, res
    ctl = ctx.py_json("import json, os, threading\n"
                      "pid = os.fork()\n"
                      "if pid == 0: os._exit(7)\n"
                      "st = os.waitpid(pid, 0)[1]\n"
                      "t = threading.Thread(target=lambda: None); t.start(); t.join()\n"
                      "r, w = os.pipe(); os.write(w, b'x')\n"
                      "print(json.dumps([os.waitstatus_to_exitcode(st), os.read(r, 1).decode()]))")
    assert ctl == [7, "x"], "fork/threads/pipes inside: %s" % ctl
