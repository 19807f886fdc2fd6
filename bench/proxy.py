#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Egress proxy benchmark (`make bench-proxy`, run as root):

    python3 bench/proxy.py [--agentbox build/agentbox] [--reps 7] [--json FILE]
                           [--only latency,https,bulk,curl,memory] [--port-base 28080]

Each figure is measured against a direct connection in the same run, the two
sides interleaved (direct, proxied, direct, proxied...) so that drift hits
both.  The direct client runs on the host against 127.0.0.1; the proxied
client runs inside `agentbox run` with a profile that maps bench.test to
127.0.0.1 and allows the bench ports, and goes through the explicit proxy
(127.0.0.1:3128 inside the sandbox).  The servers run on the host in one
separate process.

1. latency  small HTTP GET on one kept-alive connection: direct vs
            absolute-form through the proxy.  Median per request, added ms.
2. https    fresh connection per request: TCP connect + TLS 1.3 handshake
            (self-signed EC P-256 cert made with the openssl CLI, trusted
            through a CA file in the workspace) + GET; through the proxy
            CONNECT first.  Median, added ms.
3. bulk     a raw TCP server sends N bytes (a preallocated buffer, sendall)
            when asked; the python client reads them with recv_into into a
            preallocated buffer; direct vs a CONNECT tunnel (the splice path).
            Rate and ratio.  Also curl downloading N bytes from an HTTP
            server, direct vs absolute-form through the proxy: that is the
            proxy's HTTP forwarding path (user-space copies), not splice.
4. memory   a client inside opens 2,000 CONNECT tunnels to an echo server,
            sends a (binary) byte through each and reads it back, then holds them;
            the bench reads VmRSS and the fd count of the agentbox process
            (the proxy runs in it) with zero tunnels, with them held, and
            after they are closed.

Both sides run the same way: the client starts, says it is ready (a file in
the workspace), waits for "go", runs, writes its result and waits for
"exit".  Between go and the result the bench samples the CPU time of the
agentbox process (the proxy's cost per request / per GB) and how busy the
whole machine is (/proc/stat).  A busy machine is reported as a warning:
other work on a 2-CPU box moves these figures a lot.

The servers use 5 loopback ports from --port-base (default 28080..28084).
Python 3 standard library, openssl and curl.  About 40 s with the defaults.
"""
import argparse
import json
import os
import resource
import selectors
import shutil
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time

NAME = "bench.test"
PROXY = ("127.0.0.1", 3128)
PORT_BASE = 28080  # http, bulk, echo, http bulk, https: base .. base+4
P_HTTP = P_BULK = P_ECHO = P_HBULK = P_HTTPS = 0
PORTS = ()


def set_ports(base):
    global P_HTTP, P_BULK, P_ECHO, P_HBULK, P_HTTPS, PORTS
    PORTS = tuple(range(base, base + 5))
    P_HTTP, P_BULK, P_ECHO, P_HBULK, P_HTTPS = PORTS
CHUNK = 4 << 20  # bulk send/recv buffer
HTTP_RESP = (b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
             b"Content-Length: 3\r\n\r\nok\n")
CLIENT_NAME = "abproxy_client.py"
# the interpreter the sandboxed client uses, for the direct client (and the
# servers) too: the same build on both sides
PY = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable


# ---------------------------------------------------------------- servers --

def _listen(port, backlog=128):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", port))
    s.listen(backlog)
    return s


def _accept_loop(ls, handler):
    while True:
        c, _ = ls.accept()
        c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        threading.Thread(target=handler, args=(c,), daemon=True).start()


def _read_head(sock, buf):
    """Read until a blank line; returns (head, rest) or (None, buf) at EOF."""
    while b"\r\n\r\n" not in buf:
        d = sock.recv(65536)
        if not d:
            return None, buf
        buf += d
    head, _, rest = buf.partition(b"\r\n\r\n")
    return head, rest


def _serve_http(c):
    """Keep-alive responder: every request head gets HTTP_RESP."""
    buf = b""
    try:
        while True:
            head, buf = _read_head(c, buf)
            if head is None:
                return
            c.sendall(HTTP_RESP)
    except OSError:
        pass
    finally:
        c.close()


def _serve_https(ctx):
    def handler(c):
        try:
            c.settimeout(10)
            t = ctx.wrap_socket(c, server_side=True)
            head, _ = _read_head(t, b"")
            if head is not None:
                t.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n"
                          b"Connection: close\r\n\r\nok\n")
            t.close()
        except (OSError, ssl.SSLError):
            c.close()
    return handler


_BULK = None


def _send_n(c, n):
    mv = memoryview(_BULK)
    while n > 0:
        k = min(n, len(mv))
        c.sendall(mv[:k])
        n -= k


def _serve_bulk(c):
    """Raw TCP: the client sends b'bulk N\\n', the server sends N bytes."""
    try:
        buf = b""
        while b"\n" not in buf:
            d = c.recv(256)
            if not d:
                return
            buf += d
        _send_n(c, int(buf.split()[1]))
        c.shutdown(socket.SHUT_WR)
        c.recv(1)
    except (OSError, ValueError, IndexError):
        pass
    finally:
        c.close()


def _serve_hbulk(c):
    """HTTP: GET /N answers N bytes (for curl)."""
    try:
        head, _ = _read_head(c, b"")
        if head is None:
            return
        n = int(head.split(b" ")[1].rsplit(b"/", 1)[1])
        c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n"
                  b"Connection: close\r\n\r\n" % n)
        _send_n(c, n)
        c.shutdown(socket.SHUT_WR)
        c.recv(1)
    except (OSError, ValueError, IndexError):
        pass
    finally:
        c.close()


def _serve_echo(ls):
    """One thread, many idle connections: echo whatever arrives."""
    sel = selectors.DefaultSelector()
    ls.setblocking(False)
    sel.register(ls, selectors.EVENT_READ, None)
    while True:
        for key, _ in sel.select():
            if key.data is None:
                try:
                    c, _ = ls.accept()
                except BlockingIOError:
                    continue
                c.setblocking(False)
                sel.register(c, selectors.EVENT_READ, 1)
                continue
            c = key.fileobj
            try:
                d = c.recv(4096)
            except BlockingIOError:
                continue
            except OSError:
                d = b""
            if not d:
                sel.unregister(c)
                c.close()
                continue
            try:
                c.send(d)
            except OSError:
                pass


def serve(srvdir):
    global _BULK
    _raise_nofile()
    _BULK = bytearray(b"x" * CHUNK)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(os.path.join(srvdir, "cert.pem"), os.path.join(srvdir, "key.pem"))
    ctx.num_tickets = 0  # no resumption: every handshake is a full one
    socks = {p: _listen(p, 4096) for p in PORTS}
    for port, h in ((P_HTTP, _serve_http), (P_HTTPS, _serve_https(ctx)),
                    (P_BULK, _serve_bulk), (P_HBULK, _serve_hbulk)):
        threading.Thread(target=_accept_loop, args=(socks[port], h), daemon=True).start()
    threading.Thread(target=_serve_echo, args=(socks[P_ECHO],), daemon=True).start()
    print("ready", flush=True)
    while True:
        time.sleep(3600)


# ---------------------------------------------------------------- clients --
# The same code runs on the host (direct) and in the sandbox (--proxied).

def _raise_nofile(want=65536):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    top = want if hard == resource.RLIM_INFINITY else min(want, hard)
    if soft < top:
        resource.setrlimit(resource.RLIMIT_NOFILE, (top, hard))


def _connect(addr):
    s = socket.create_connection(addr)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def _tunnel(port):
    """A CONNECT tunnel to NAME:port through the proxy."""
    s = _connect(PROXY)
    s.sendall(b"CONNECT %s:%d HTTP/1.1\r\nHost: %s:%d\r\n\r\n"
              % (NAME.encode(), port, NAME.encode(), port))
    buf = b""
    while b"\r\n\r\n" not in buf:
        d = s.recv(4096)
        if not d:
            raise RuntimeError("proxy closed during CONNECT")
        buf += d
    head, _, rest = buf.partition(b"\r\n\r\n")
    if not head.startswith(b"HTTP/1.1 200") or rest:
        raise RuntimeError("CONNECT refused: %r" % buf[:300])
    return s


def _dial(port, proxied):
    return _tunnel(port) if proxied else _connect(("127.0.0.1", port))


class _Reader:
    """Response reader for a kept-alive connection (Content-Length only)."""

    def __init__(self, sock):
        self.s, self.buf = sock, b""

    def response(self):
        while True:
            i = self.buf.find(b"\r\n\r\n")
            if i >= 0:
                break
            d = self.s.recv(65536)
            if not d:
                raise RuntimeError("connection closed in a response head")
            self.buf += d
        head = self.buf[:i]
        if not head.startswith(b"HTTP/1.1 200"):
            raise RuntimeError("unexpected response: %r" % head[:300])
        n = 0
        for line in head.split(b"\r\n")[1:]:
            k, _, v = line.partition(b":")
            if k.strip().lower() == b"content-length":
                n = int(v)
        end = i + 4 + n
        while len(self.buf) < end:
            d = self.s.recv(65536)
            if not d:
                raise RuntimeError("connection closed in a response body")
            self.buf += d
        self.buf = self.buf[end:]


def client_latency(a):
    if a.proxied:
        s = _connect(PROXY)
        req = b"GET http://%s:%d/ HTTP/1.1\r\nHost: %s:%d\r\n\r\n" % (
            NAME.encode(), P_HTTP, NAME.encode(), P_HTTP)
    else:
        s = _connect(("127.0.0.1", P_HTTP))
        req = b"GET / HTTP/1.1\r\nHost: %s:%d\r\n\r\n" % (NAME.encode(), P_HTTP)
    r = _Reader(s)
    clock = time.perf_counter_ns
    out = []
    for i in range(a.warmup + a.n):
        t0 = clock()
        s.sendall(req)
        r.response()
        if i >= a.warmup:
            out.append(clock() - t0)
    s.close()
    return {"ns": out}


def client_https(a):
    ctx = ssl.create_default_context(cafile=a.ca)
    req = b"GET / HTTP/1.1\r\nHost: %s:%d\r\n\r\n" % (NAME.encode(), P_HTTPS)
    clock = time.perf_counter_ns
    out = []
    for i in range(a.warmup + a.n):
        t0 = clock()
        s = _dial(P_HTTPS, a.proxied)
        t = ctx.wrap_socket(s, server_hostname=NAME)
        t.sendall(req)
        _Reader(t).response()
        t.close()
        if i >= a.warmup:
            out.append(clock() - t0)
    return {"ns": out}


def client_bulk(a):
    buf = bytearray(CHUNK)
    mv = memoryview(buf)
    runs = []
    for _ in range(a.n):
        s = _dial(P_BULK, a.proxied)
        t0 = time.perf_counter_ns()
        s.sendall(b"bulk %d\n" % a.bytes)
        got = 0
        while got < a.bytes:
            k = s.recv_into(mv)
            if not k:
                raise RuntimeError("bulk: EOF after %d of %d bytes" % (got, a.bytes))
            got += k
        t1 = time.perf_counter_ns()
        s.close()
        runs.append({"bytes": got, "ns": t1 - t0})
    return {"runs": runs}


def _wait_file(path, timeout=60):
    end = time.monotonic() + timeout
    while not os.path.exists(path):
        if time.monotonic() > end:
            raise RuntimeError("timed out waiting for " + path)
        time.sleep(0.005)


def client_memory(a):
    """Stages, each acknowledged with a file in the workspace: 'base' (no
    tunnel yet), 'held' (a.n tunnels open and idle), 'closed'."""
    _raise_nofile(a.n + 256)
    d = a.sync
    open(os.path.join(d, "base"), "w").close()
    _wait_file(os.path.join(d, "go"))
    socks = []
    t0 = time.perf_counter_ns()
    for i in range(a.n):
        s = _tunnel(P_ECHO)
        # a binary byte: the proxy tunnels it at once (printable bytes with
        # no newline yet could still become an HTTP request line: it waits)
        s.sendall(b"\x00")
        got = s.recv(1)
        if got != b"\x00":
            raise RuntimeError("echo through tunnel %d failed: %r" % (i, got))
        socks.append(s)
    t1 = time.perf_counter_ns()
    open(os.path.join(d, "held"), "w").close()
    _wait_file(os.path.join(d, "release"))
    for s in socks:
        s.close()
    open(os.path.join(d, "closed"), "w").close()
    _wait_file(os.path.join(d, "exit"))
    return {"tunnels": a.n, "open_ns": t1 - t0}


CLIENTS = {"latency": client_latency, "https": client_https, "bulk": client_bulk,
           "memory": client_memory}


def client_main(a):
    # --hold: the bench reads the proxy's CPU time between OUT.start (the
    # client is ready, nothing sent yet) and OUT (the result is written);
    # the client waits for OUT.go and OUT.exit around them.
    if a.hold:
        open(a.out + ".start", "w").close()
        _wait_file(a.out + ".go")
    res = CLIENTS[a.client](a)
    tmp = a.out + ".tmp"
    with open(tmp, "w") as f:
        json.dump(res, f)
    os.rename(tmp, a.out)
    if a.hold:
        _wait_file(a.out + ".exit")


# ------------------------------------------------------------------ bench --

def cpu_ns(pid):
    """CPU time of a process so far (all its threads), in ns."""
    t = 0
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/schedstat" % (pid, tid)) as f:
                t += int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            pass
    return t


def stat_sample():
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return sum(v), v[3] + v[4]


def stat_busy(a, b):
    """Fraction of all CPUs busy between two samples (the whole machine)."""
    return 1 - (b[1] - a[1]) / max(1, b[0] - a[0])


def cpu_busy(seconds):
    s0 = stat_sample()
    time.sleep(seconds)
    return stat_busy(s0, stat_sample())


class Bench:
    def __init__(self, a):
        self.a = a
        self.root = tempfile.mkdtemp(prefix="abproxy.", dir=a.tmpdir)
        os.chmod(self.root, 0o755)
        self.ws = os.path.join(self.root, "ws")
        self.srv = os.path.join(self.root, "srv")
        os.makedirs(self.ws)
        os.makedirs(self.srv, mode=0o700)
        os.chmod(self.ws, 0o777)
        self.script = os.path.join(self.ws, CLIENT_NAME)
        shutil.copy(os.path.abspath(__file__), self.script)
        self.ca = os.path.join(self.ws, "ca.pem")
        self.profile = os.path.join(self.root, "profile.json")
        self.server = None
        self.seq = 0

    # -- setup
    def setup(self):
        key, cert = os.path.join(self.srv, "key.pem"), os.path.join(self.srv, "cert.pem")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                        "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", key, "-out",
                        cert, "-days", "2", "-subj", "/CN=" + NAME, "-addext",
                        "subjectAltName=DNS:%s,IP:127.0.0.1" % NAME],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        shutil.copy(cert, self.ca)
        os.chmod(self.ca, 0o644)
        prof = {"version": 1, "extends": ["default"],
                "network": {"allow": ["%s:%d" % (NAME, p) for p in PORTS],
                            "hosts": {NAME: "127.0.0.1"}}}
        with open(self.profile, "w") as f:
            json.dump(prof, f)
        self.server = subprocess.Popen([PY, os.path.abspath(__file__), "--serve", self.srv,
                                        "--port-base", str(P_HTTP)], stdout=subprocess.PIPE)
        if self.server.stdout.readline().strip() != b"ready":
            raise SystemExit("bench: the servers did not start (ports %s busy?)" % (PORTS,))

    def cleanup(self):
        if self.server:
            self.server.terminate()
            self.server.wait()
        shutil.rmtree(self.root, ignore_errors=True)
        try:
            os.rmdir(self.a.tmpdir)  # only when nothing else is in it
        except OSError:
            pass

    # -- running clients
    def sandbox_cmd(self, argv):
        return [self.a.agentbox, "run", "--no-pty", "-q", "-p", self.profile, "-w", self.ws,
                "--"] + argv

    def client(self, mode, proxied, extra, timeout=120):
        """Run one client (both sides the same way: start, wait for its
        ready file, go, wait for its result); returns its JSON result with
        the proxy's CPU time and the machine's busy fraction over the
        measured window added."""
        self.seq += 1
        out = "res-%d.json" % self.seq
        path = os.path.join(self.ws, out)
        argv = [self.script, "--hold", "--client", mode, "--out", out,
                "--port-base", str(P_HTTP)] + extra
        cmd = self.sandbox_cmd(["/usr/bin/python3"] + argv + ["--proxied"]) if proxied \
            else [PY] + argv
        p = subprocess.Popen(cmd, cwd=self.ws, stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        cpu = busy = None
        try:
            if self._wait_client(p, path + ".start", timeout):
                c0 = cpu_ns(p.pid) if proxied else 0
                s0 = stat_sample()
                open(path + ".go", "w").close()
                if self._wait_client(p, path, timeout, 0.01):
                    busy = stat_busy(s0, stat_sample())
                    cpu = cpu_ns(p.pid) - c0 if proxied else None
                    open(path + ".exit", "w").close()
            out_txt = p.communicate(timeout=30)[0]
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
        if p.returncode != 0 or not os.path.exists(path):
            raise SystemExit("bench: %s client (%s) failed, exit %s:\n%s" % (
                mode, "proxied" if proxied else "direct", p.returncode,
                out_txt.decode(errors="replace")[-3000:]))
        with open(path) as f:
            res = json.load(f)
        for f in (path, path + ".start", path + ".go", path + ".exit"):
            if os.path.exists(f):
                os.unlink(f)
        res["proxy_cpu_ns"], res["busy"] = cpu, busy
        return res

    def abab(self, mode, extra, reps):
        """reps pairs, direct first then proxied in each pair."""
        d, p = [], []
        for _ in range(reps):
            d.append(self.client(mode, False, extra))
            p.append(self.client(mode, True, extra))
        return d, p

    # -- the measurements
    def latency_like(self, mode, n, warmup):
        d, p = self.abab(mode, ["--n", str(n), "--warmup", str(warmup), "--ca", self.ca],
                         self.a.reps)
        dall = [x for r in d for x in r["ns"]]
        pall = [x for r in p for x in r["ns"]]
        dm, pm = statistics.median(dall) / 1e6, statistics.median(pall) / 1e6
        pairs = [(statistics.median(y["ns"]) - statistics.median(x["ns"])) / 1e6
                 for x, y in zip(d, p)]
        q = lambda v, f: sorted(v)[int(f * (len(v) - 1))] / 1e6
        cpu = [r["proxy_cpu_ns"] / (n + warmup) / 1e3 for r in p if r["proxy_cpu_ns"]]
        return {"n_per_rep": n, "reps": self.a.reps,
                "proxy_cpu_us_per_req": statistics.median(cpu) if cpu else None,
                "direct_median_ms": dm, "proxied_median_ms": pm,
                "added_ms": pm - dm, "ratio": pm / dm,
                "direct_p90_ms": q(dall, 0.9), "proxied_p90_ms": q(pall, 0.9),
                "added_ms_per_rep": pairs}

    def bulk(self):
        n = self.a.bulk_bytes
        d, p = self.abab("bulk", ["--n", "1", "--bytes", str(n)], self.a.bulk_reps)
        rate = lambda r: r["runs"][0]["bytes"] / (r["runs"][0]["ns"] / 1e9) / 1e9
        dr, pr = [rate(x) for x in d], [rate(x) for x in p]
        cpu = [r["proxy_cpu_ns"] / 1e9 / (n / 1e9) for r in p if r["proxy_cpu_ns"]]
        return {"bytes": n, "reps": self.a.bulk_reps, "client": "python recv_into",
                "direct_busy": statistics.median(x["busy"] for x in d),
                "proxied_busy": statistics.median(x["busy"] for x in p),
                "proxy_cpu_s_per_gb": statistics.median(cpu) if cpu else None,
                "direct_gbps": statistics.median(dr), "proxied_gbps": statistics.median(pr),
                "ratio": statistics.median(pr) / statistics.median(dr),
                "ratio_per_rep": [y / x for x, y in zip(dr, pr)],
                "direct_all": dr, "proxied_all": pr}

    def curl_bulk(self):
        n = self.a.curl_bytes
        fmt = ["-sS", "-o", "/dev/null", "-w", "%{speed_download} %{size_download}"]
        dcmd = ["curl", "--noproxy", "*"] + fmt + ["http://127.0.0.1:%d/%d" % (P_HBULK, n)]
        pcmd = self.sandbox_cmd(["/usr/bin/curl", "-x", "http://%s:%d" % PROXY] + fmt +
                                ["http://%s:%d/%d" % (NAME, P_HBULK, n)])
        dr, pr = [], []

        def one(cmd, sink):
            p = subprocess.run(cmd, cwd=self.ws, stdin=subprocess.DEVNULL,
                               capture_output=True, timeout=120)
            speed, size = p.stdout.split()[:2] if p.returncode == 0 else (b"0", b"0")
            if p.returncode != 0 or int(float(size)) != n:
                raise SystemExit("bench: curl failed (exit %d): %s %s" % (
                    p.returncode, p.stdout[-300:], p.stderr[-1000:]))
            sink.append(float(speed) / 1e9)
        for _ in range(self.a.bulk_reps):
            one(dcmd, dr)
            one(pcmd, pr)
        return {"bytes": n, "reps": self.a.bulk_reps,
                "client": "curl, absolute-form through the proxy (HTTP forwarding path)",
                "direct_gbps": statistics.median(dr), "proxied_gbps": statistics.median(pr),
                "ratio": statistics.median(pr) / statistics.median(dr),
                "direct_all": dr, "proxied_all": pr}

    @staticmethod
    def proc_stats(pid):
        v = {}
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                k, _, rest = line.partition(":")
                if k in ("VmRSS", "VmHWM"):
                    v[k] = int(rest.split()[0]) / 1024
        return {"rss_mb": v.get("VmRSS"), "hwm_mb": v.get("VmHWM"),
                "fds": len(os.listdir("/proc/%d/fd" % pid))}

    def memory(self):
        n = self.a.tunnels
        sync = os.path.join(self.ws, "sync")
        os.makedirs(sync)
        os.chmod(sync, 0o777)
        out = os.path.join(self.ws, "mem.json")
        cmd = self.sandbox_cmd(["/usr/bin/python3", self.script, "--client", "memory",
                                "--port-base", str(P_HTTP),
                                "--proxied", "--n", str(n), "--out", "mem.json",
                                "--sync", sync])
        p = subprocess.Popen(cmd, cwd=self.ws, stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        try:
            exe = os.readlink("/proc/%d/exe" % p.pid)
            if os.path.basename(exe) != os.path.basename(self.a.agentbox):
                raise SystemExit("bench: pid %d is %s, not agentbox" % (p.pid, exe))
            stages = {}
            for stage, nxt in (("base", "go"), ("held", "release"), ("closed", "exit")):
                if not self._wait_client(p, os.path.join(sync, stage)):
                    break
                if stage != "base":
                    time.sleep(0.3)  # let the proxy finish closing
                stages[stage] = self.proc_stats(p.pid)
                open(os.path.join(sync, nxt), "w").close()
            out_txt = p.communicate(timeout=60)[0]
            if p.returncode != 0 or not os.path.exists(out) or len(stages) != 3:
                raise SystemExit("bench: memory client failed, exit %d:\n%s"
                                 % (p.returncode, out_txt.decode(errors="replace")[-3000:]))
            with open(out) as f:
                res = json.load(f)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
        b, h = stages["base"], stages["held"]
        return {"tunnels": n, "pid_exe": exe,
                "open_all_s": res["open_ns"] / 1e9,
                "base_rss_mb": b["rss_mb"], "held_rss_mb": h["rss_mb"],
                "closed_rss_mb": stages["closed"]["rss_mb"],
                "peak_rss_mb": stages["closed"]["hwm_mb"],
                "per_tunnel_kb": (h["rss_mb"] - b["rss_mb"]) * 1024 / n,
                "base_fds": b["fds"], "held_fds": h["fds"], "closed_fds": stages["closed"]["fds"]}

    @staticmethod
    def _wait_client(p, path, timeout=120, poll=0.002):
        """Wait for a sync file; False if the client exited first."""
        end = time.monotonic() + timeout
        while not os.path.exists(path):
            if p.poll() is not None:
                return False
            if time.monotonic() > end:
                raise SystemExit("bench: a client timed out")
            time.sleep(poll)
        return True


def report(r):
    ok = lambda c: "ok" if c else "MISSED"
    rows = []
    L, H = r.get("latency"), r.get("https")
    if L:
        rows.append(("HTTP keep-alive GET, median", "%.3f ms" % L["direct_median_ms"],
                     "%.3f ms" % L["proxied_median_ms"],
                     "+%.3f ms (x%.2f)" % (L["added_ms"], L["ratio"]),
                     "<= +0.3 ms: " + ok(L["added_ms"] <= 0.3)))
    if H:
        rows.append(("HTTPS fresh conn+TLS+GET, median", "%.3f ms" % H["direct_median_ms"],
                     "%.3f ms" % H["proxied_median_ms"],
                     "+%.3f ms (x%.2f)" % (H["added_ms"], H["ratio"]),
                     "<= +0.3 ms: " + ok(H["added_ms"] <= 0.3)))
    B = r.get("bulk")
    if B:
        rows.append(("CONNECT bulk %d MiB (python)" % (B["bytes"] >> 20),
                     "%.2f GB/s" % B["direct_gbps"], "%.2f GB/s" % B["proxied_gbps"],
                     "x%.2f" % B["ratio"], ">= x0.9: " + ok(B["ratio"] >= 0.9)))
    C = r.get("curl_bulk")
    if C:
        rows.append(("HTTP forward bulk %d MiB (curl)" % (C["bytes"] >> 20),
                     "%.2f GB/s" % C["direct_gbps"], "%.2f GB/s" % C["proxied_gbps"],
                     "x%.2f" % C["ratio"], "(no target)"))
    M = r.get("memory")
    if M:
        rows.append(("agentbox RSS, %d idle tunnels" % M["tunnels"],
                     "%.1f MB (0 tunnels)" % M["base_rss_mb"], "%.1f MB" % M["held_rss_mb"],
                     "%.1f KB/tunnel" % M["per_tunnel_kb"],
                     "<= 30 MB: " + ok(M["held_rss_mb"] <= 30)))
        rows.append(("agentbox fds / after close", "%d" % M["base_fds"], "%d" % M["held_fds"],
                     "%d fds, %.1f MB" % (M["closed_fds"], M["closed_rss_mb"]),
                     "back: " + ok(M["closed_fds"] == M["base_fds"])))
    hdr = ("measure", "direct", "proxied", "added/ratio", "target")
    w = [max(len(str(x[i])) for x in rows + [hdr]) for i in range(5)]
    line = lambda x: "  ".join(str(v).ljust(w[i]) for i, v in enumerate(x)).rstrip()
    print(line(hdr))
    print("  ".join("-" * k for k in w))
    for x in rows:
        print(line(x))
    if L:
        print("latency added per rep (ms): " +
              " ".join("%.3f" % v for v in L["added_ms_per_rep"]) +
              "; p90 direct %.3f proxied %.3f" % (L["direct_p90_ms"], L["proxied_p90_ms"]))
    if H:
        print("https added per rep (ms):   " +
              " ".join("%.3f" % v for v in H["added_ms_per_rep"]))
    if B:
        print("bulk ratio per rep:         " + " ".join("%.2f" % v for v in B["ratio_per_rep"]))
    if L and L["proxy_cpu_us_per_req"] is not None:
        print("proxy CPU: %.1f us per kept-alive request" % L["proxy_cpu_us_per_req"] +
              (", %.1f us per https connection" % H["proxy_cpu_us_per_req"]
               if H and H["proxy_cpu_us_per_req"] is not None else "") +
              (", %.2f s per GB tunnelled" % B["proxy_cpu_s_per_gb"]
               if B and B["proxy_cpu_s_per_gb"] is not None else ""))
    if B:
        print("machine CPU busy during bulk: direct %.0f%%, proxied %.0f%% of %d CPUs" % (
            100 * B["direct_busy"], 100 * B["proxied_busy"], r["machine"]["cpus"]))
    if M:
        print("%d tunnels opened in %.2f s; agentbox peak RSS %.1f MB" % (
            M["tunnels"], M["open_all_s"], M["peak_rss_mb"]))
    print("machine: %d CPUs, %.0f%% busy before the bench, %.0f%% after" % (
        r["machine"]["cpus"], 100 * r["busy_before"], 100 * r["busy_after"]))


def bench_main(a):
    if os.geteuid() != 0:
        raise SystemExit("bench: run as root")
    if not os.access(a.agentbox, os.X_OK):
        raise SystemExit("bench: not executable: %s (run make first)" % a.agentbox)
    a.agentbox = os.path.abspath(a.agentbox)
    os.makedirs(a.tmpdir, exist_ok=True)
    b = Bench(a)
    r = {"machine": {"cpus": os.cpu_count(), "kernel": os.uname().release}}
    r["busy_before"] = cpu_busy(1.0)
    if r["busy_before"] > 0.1:
        print("bench: warning: the machine is %.0f%% busy before the bench starts: "
              "figures will be noisy (bulk throughput most)" % (100 * r["busy_before"]),
              file=sys.stderr)
    t0 = time.monotonic()
    try:
        b.setup()
        only = set(a.only.split(",")) if a.only else None
        want = lambda k: only is None or k in only
        if want("latency"):
            r["latency"] = b.latency_like("latency", a.lat_n, 300)
        if want("https"):
            r["https"] = b.latency_like("https", a.https_n, 20)
        if want("bulk"):
            r["bulk"] = b.bulk()
        if want("curl"):
            r["curl_bulk"] = b.curl_bulk()
        if want("memory"):
            r["memory"] = b.memory()
    finally:
        b.cleanup()
    r["runtime_s"] = time.monotonic() - t0
    r["busy_after"] = cpu_busy(0.5)
    report(r)
    print("runtime %.0f s" % r["runtime_s"])
    if a.json:
        os.makedirs(os.path.dirname(os.path.abspath(a.json)), exist_ok=True)
        with open(a.json, "w") as f:
            json.dump(r, f, indent=1)


def main():
    ap = argparse.ArgumentParser(description="agentbox egress proxy benchmark")
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--agentbox", default=os.path.join(here, "..", "build", "agentbox"))
    ap.add_argument("--reps", type=int, default=7, help="ABAB pairs (latency, https)")
    ap.add_argument("--bulk-reps", type=int, default=5)
    ap.add_argument("--lat-n", type=int, default=3000, help="requests per latency run")
    ap.add_argument("--https-n", type=int, default=300, help="requests per https run")
    ap.add_argument("--bulk-bytes", type=int, default=2 << 30)
    ap.add_argument("--curl-bytes", type=int, default=1 << 30)
    ap.add_argument("--tunnels", type=int, default=2000)
    ap.add_argument("--only", help="comma list: latency,https,bulk,curl,memory")
    ap.add_argument("--port-base", type=int, default=PORT_BASE,
                    help="first of the 5 loopback ports the servers use")
    ap.add_argument("--tmpdir", default="/var/lib/agentbox-bench",
                    help="parent of the scratch dir (the workspace must not be /tmp)")
    ap.add_argument("--json", help="also write the results as JSON to this file")
    # internal
    ap.add_argument("--serve", help=argparse.SUPPRESS)
    ap.add_argument("--client", choices=sorted(CLIENTS), help=argparse.SUPPRESS)
    ap.add_argument("--proxied", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    ap.add_argument("--n", type=int, default=1, help=argparse.SUPPRESS)
    ap.add_argument("--warmup", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--bytes", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--ca", help=argparse.SUPPRESS)
    ap.add_argument("--sync", help=argparse.SUPPRESS)
    ap.add_argument("--hold", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    set_ports(a.port_base)
    if a.serve:
        serve(a.serve)
    elif a.client:
        client_main(a)
    else:
        bench_main(a)


if __name__ == "__main__":
    main()
