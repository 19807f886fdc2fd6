#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The egress proxy on a real link (part of `make bench`; needs root):

    python3 bench/reallink.py [--agentbox build/agentbox] [--before OLD_BINARY]
                              [--bytes N] [--reps 5] [--fb-reps 9] [--json FILE]
                              [--only fb,shaped,unshaped]

On loopback, client, server and proxy share the same two CPUs and a relayed
byte costs two more copies: bulk through the proxy is bound by CPU there
(bench/proxy.py keeps those figures, as CPU measures).  What a user feels is
whether the proxy keeps up with the link to the upstream, what it costs in
CPU doing so, and what it adds before the first byte.  So here the upstream
servers run in another network namespace:

    host (clients, agentbox, socat) --veth-- upstream netns          "unshaped veth"
    host --veth-- delay netns --veth-- upstream netns                "shaped"
                  (tun + delayline)    (tc tbf, RATE, on the upstream side)

The shaped path: the upstream's egress is limited by tc `tbf` (--rate,
1 Gbit/s), and every packet, both ways, passes a userspace delay line
(bench/delayline.c, compiled here) that holds it RTT/2: this kernel has no
sch_netem.  The delay netns routes what comes in from either veth into the
tun device, and what the delay line writes back on to its destination.

1. fb (first byte, per new sandbox): a fresh `agentbox run` per sample; inside
   it, python makes its TLS context (the bundle agentbox binds), then the
   clock runs from the TCP connect (+ CONNECT) over the TLS 1.3 handshake to
   the first byte of the response of a GET.  The same client on the host,
   directly, with a bundle of the same size (the system bundle and the bench
   CA).  Arms: direct; intercepted (a port a secret is bound to: agentbox
   mints a leaf and verifies the upstream against the system store, which
   here is SSL_CERT_FILE = the system bundle plus the bench CA, so the
   proxy's store has its real size); a blind tunnel (a port no secret is
   bound to); with --before, the intercepted arm again with another agentbox
   build, side by side.  Median added ms per arm.  Guard: interception adds
   <= 5 ms.
2. bulk (shaped and unshaped): curl downloads --bytes (default 256 MiB,
   $REALLINK_BYTES) of response body, as
     plain HTTP: directly; through agentbox's CONNECT tunnel; through socat
       as a plain relay (-b 524288: 512 KiB buffers);
     HTTPS: directly; through agentbox's interception (the secret swapped in
       x-api-key, the body scanned for it); through socat re-encrypting TLS
       (it terminates TLS with the server's certificate and opens TLS to the
       upstream, verifying it; it scans nothing).
   Rate = body bytes / (time_total - time_starttransfer) from curl, median
   of --reps runs interleaved arm by arm; the ratio to direct; CPU-seconds
   per GiB of the relay: agentbox's process (all threads) over the transfer
   window, socat's whole life (wait4).  The HTTPS body is base64 text lines
   (the masking scanner meets possible match starts all the time).
   Guards, shaped link: tunnel >= 0.97x and interception >= 0.95x of direct;
   CPU per GiB no more than socat doing the same.

Prints the tables and PASS/FAIL per guard; exit status 0 (a bench: the
guards are read, not enforced by make).  Not root: skipped with a message.
About 2-4 minutes with the defaults.
"""
import argparse
import base64
import json
import os
import random
import shutil
import signal
import socket
import ssl
import statistics
import string
import subprocess
import sys
import tempfile
import threading
import time

NAME = "bench.test"
SECRET_VAR = "BENCH_KEY"
SECRET_SRC = "AB_REALLINK_SECRET"
SECRET_PREFIX = "sk-bench-"
PROXY = ("127.0.0.1", 3128)
CHUNK = 4 << 20
GIB = 1 << 30
HERE = os.path.dirname(os.path.abspath(__file__))
SYSTEM_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"
# the interpreter the sandboxed clients use, for the direct ones too
PY = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable

# ---------------------------------------------------------------- servers --
# In the upstream netns: P_H plain HTTP, P_T TLS (secret bound: checks
# x-api-key), P_B TLS (not bound: a blind tunnel).  GET /N answers N bytes.


def _read_head(sock):
    buf = b""
    while b"\r\n\r\n" not in buf:
        d = sock.recv(65536)
        if not d:
            return None
        buf += d
    return buf.partition(b"\r\n\r\n")[0]


def _send_n(sock, n, body):
    mv = memoryview(body)
    while n > 0:
        k = min(n, len(mv))
        sock.sendall(mv[:k])
        n -= k


def _handler(ctx, body, want_key):
    def run(c):
        try:
            c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            s = ctx.wrap_socket(c, server_side=True) if ctx else c
            while True:
                head = _read_head(s)
                if head is None:
                    break
                lines = head.split(b"\r\n")
                n = int(lines[0].split(b" ")[1].lstrip(b"/") or b"3")
                key = None
                for line in lines[1:]:
                    k, _, v = line.partition(b":")
                    if k.strip().lower() == b"x-api-key":
                        key = v.strip()
                if want_key is not None and key != want_key:
                    s.sendall(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 3\r\n\r\nno\n")
                    continue
                s.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % n)
                _send_n(s, n, body)
        except (OSError, ssl.SSLError, ValueError, IndexError):
            pass
        finally:
            c.close()
    return run


def serve(srv, base):
    key = os.environb[SECRET_SRC.encode()]
    plain = bytearray(b"x" * CHUNK)
    raw = base64.b64encode(random.Random(1).randbytes(CHUNK * 3 // 4))
    text = bytearray((b"\n".join(raw[i:i + 76] for i in range(0, len(raw), 76)) * 2)[:CHUNK])
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(os.path.join(srv, "cert.pem"), os.path.join(srv, "key.pem"))
    ctx.num_tickets = 0
    for port, h in ((base, _handler(None, plain, None)), (base + 1, _handler(ctx, text, key)),
                    (base + 2, _handler(ctx, text, None))):
        ls = socket.socket()
        ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        ls.bind(("0.0.0.0", port))
        ls.listen(128)

        def loop(ls=ls, h=h):
            while True:
                c, _ = ls.accept()
                threading.Thread(target=h, args=(c,), daemon=True).start()
        threading.Thread(target=loop, daemon=True).start()
    print("ready", flush=True)
    while True:
        time.sleep(3600)


# ------------------------------------------------------- first-byte client --

def client_fb(a):
    """One first request: TLS context first (not timed), then connect
    (+ CONNECT) + TLS + GET + the response's first byte.  Prints JSON."""
    ctx = ssl.create_default_context()  # SSL_CERT_FILE: agentbox's bundle, or ours
    if a.extra_ca:
        ctx.load_verify_locations(cafile=a.extra_ca)
    key = os.environ.get(SECRET_VAR, "").encode()
    t0 = time.perf_counter_ns()
    if a.proxied:
        s = socket.create_connection(PROXY)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        s.sendall(b"CONNECT %s:%d HTTP/1.1\r\nHost: %s:%d\r\n\r\n" % (
            NAME.encode(), a.port, NAME.encode(), a.port))
        head = _read_head(s)
        if not head or not head.startswith(b"HTTP/1.1 200"):
            raise SystemExit("CONNECT refused: %r" % head)
    else:
        s = socket.create_connection((a.ip, a.port))
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    t = ctx.wrap_socket(s, server_hostname=NAME)
    t.sendall(b"GET /3 HTTP/1.1\r\nHost: %s:%d\r\nx-api-key: %s\r\n\r\n" % (
        NAME.encode(), a.port, key))
    first = t.recv(1)
    t1 = time.perf_counter_ns()
    rest = first + t.recv(64)
    issuer = ""
    for rdn in (t.getpeercert() or {}).get("issuer", ()):
        for k, v in rdn:
            issuer = v if k == "commonName" else issuer
    print(json.dumps({"ms": (t1 - t0) / 1e6, "status": rest[:12].decode(errors="replace"),
                      "issuer": issuer}))


# ---------------------------------------------------------------- network --

class Net:
    """The two namespaces, three veth pairs, the tun, tbf, the delay line."""

    def __init__(self, a, tmp):
        self.a = a
        k = os.getpid() % 60
        self.k = k
        self.up, self.dl = "abrl-up%d" % os.getpid(), "abrl-dl%d" % os.getpid()
        o = 100 + 2 * k
        # unshaped: host .1 <-> upstream .2; shaped: host .1 <-> delay .2,
        # delay .1 <-> upstream .2 (10.78.x: a second octet apart per run)
        self.net_u, self.net_s1, self.net_s2 = "10.77.%d" % o, "10.78.%d" % o, "10.77.%d" % (o + 1)
        self.ip_u, self.ip_s = self.net_u + ".2", self.net_s2 + ".2"
        self.dev = {x: "rl%s%d" % (x, os.getpid() % 100000) for x in "abcdefgt"}
        self.tmp = tmp
        self.procs = []
        self.delayline = None

    def sh(self, *argv, ns=None):
        cmd = (["ip", "netns", "exec", ns] if ns else []) + list(argv)
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            raise RuntimeError("%s: %s" % (" ".join(cmd), p.stderr.strip()))

    def setup(self):
        d, up, dl = self.dev, self.up, self.dl
        src = os.path.join(HERE, "delayline.c")
        self.delayline = os.path.join(self.tmp, "delayline")
        p = subprocess.run(["cc", "-O2", "-Wall", "-o", self.delayline, src],
                           capture_output=True, text=True)
        if p.returncode != 0:
            raise RuntimeError("compiling delayline.c: " + p.stderr)
        self.sh("ip", "netns", "add", up)
        self.sh("ip", "netns", "add", dl)
        ip = lambda *x: self.sh("ip", *x)
        ipn = lambda ns, *x: self.sh("ip", "-n", ns, *x)
        # unshaped pair
        ip("link", "add", d["a"], "type", "veth", "peer", "name", d["b"], "netns", up)
        ip("addr", "add", self.net_u + ".1/24", "dev", d["a"])
        ip("link", "set", d["a"], "up")
        ipn(up, "addr", "add", self.net_u + ".2/24", "dev", d["b"])
        ipn(up, "link", "set", d["b"], "up")
        ipn(up, "link", "set", "lo", "up")
        # shaped: host <-> delay <-> upstream
        ip("link", "add", d["c"], "type", "veth", "peer", "name", d["d"], "netns", dl)
        ip("addr", "add", self.net_s1 + ".1/24", "dev", d["c"])
        ip("link", "set", d["c"], "up")
        ipn(dl, "addr", "add", self.net_s1 + ".2/24", "dev", d["d"])
        ipn(dl, "link", "set", d["d"], "up")
        ipn(dl, "link", "set", "lo", "up")
        ipn(dl, "link", "add", d["e"], "type", "veth", "peer", "name", d["f"], "netns", up)
        ipn(dl, "addr", "add", self.net_s2 + ".1/24", "dev", d["e"])
        ipn(dl, "link", "set", d["e"], "up")
        ipn(up, "addr", "add", self.net_s2 + ".2/24", "dev", d["f"])
        ipn(up, "link", "set", d["f"], "up")
        ip("route", "add", self.net_s2 + ".0/24", "via", self.net_s1 + ".2")
        ipn(up, "route", "add", self.net_s1 + ".0/24", "via", self.net_s2 + ".1")
        # the delay netns: whatever comes in on a veth goes to the tun;
        # what the delay line writes back is routed by destination
        ipn(dl, "tuntap", "add", "dev", d["t"], "mode", "tun", "vnet_hdr")
        ipn(dl, "link", "set", d["t"], "up")
        self.sh("sysctl", "-qw", "net.ipv4.ip_forward=1", "net.ipv4.conf.all.rp_filter=0",
                "net.ipv4.conf.default.rp_filter=0", ns=dl)
        for x in "det":
            self.sh("sysctl", "-qw", "net.ipv4.conf.%s.rp_filter=0" % d[x], ns=dl)
        ipn(dl, "rule", "add", "iif", d["d"], "lookup", "100")
        ipn(dl, "rule", "add", "iif", d["e"], "lookup", "100")
        ipn(dl, "route", "add", "default", "dev", d["t"], "table", "100")
        # the rate: the upstream's side of the shaped pair (downloads)
        self.sh("tc", "-n", up, "qdisc", "add", "dev", d["f"], "root", "tbf", "rate", self.a.rate,
                "burst", "256kb", "latency", "20ms")
        self.spawn(["ip", "netns", "exec", dl, self.delayline, d["t"],
                    str(int(self.a.rtt_ms * 1000 / 2))])

    def spawn(self, cmd, **kw):
        p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, **kw)
        self.procs.append(p)
        return p

    def cleanup(self):
        for p in self.procs:
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(5)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        for ns in (self.up, self.dl):  # deleting a netns takes its links along
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        subprocess.run(["ip", "link", "del", self.dev["a"]], capture_output=True)
        subprocess.run(["ip", "link", "del", self.dev["c"]], capture_output=True)


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


def med(v):
    return statistics.median(v) if v else float("nan")


class Bench:
    def __init__(self, a):
        self.a = a
        os.makedirs(a.tmpdir, exist_ok=True)
        self.root = tempfile.mkdtemp(prefix="abreallink.", dir=a.tmpdir)
        os.chmod(self.root, 0o755)
        self.ws = os.path.join(self.root, "ws")
        self.srv = os.path.join(self.root, "srv")
        os.makedirs(self.ws)
        os.makedirs(self.srv, mode=0o700)
        os.chmod(self.ws, 0o777)
        self.ca = os.path.join(self.ws, "ca.pem")
        self.sysbundle = os.path.join(self.root, "system-and-bench.pem")
        self.script = os.path.join(self.ws, "reallink_client.py")
        shutil.copy(os.path.abspath(__file__), self.script)
        self.wrap = os.path.join(self.ws, "wrap.sh")
        self.secret = SECRET_PREFIX + "".join(
            random.SystemRandom().choice(string.ascii_letters + string.digits) for _ in range(40))
        self.net = Net(a, self.root)
        self.seq = 0
        b = a.port_base
        self.P_H, self.P_T, self.P_B, self.P_R = b, b + 1, b + 2, b + 3  # P_R: socat

    # -- setup
    def make_certs(self):
        cakey = os.path.join(self.srv, "ca-key.pem")
        key, cert = os.path.join(self.srv, "key.pem"), os.path.join(self.srv, "cert.pem")
        csr, ext = os.path.join(self.srv, "leaf.csr"), os.path.join(self.srv, "leaf.ext")
        ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        with open(ext, "w") as f:
            f.write("basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\n"
                    "extendedKeyUsage=serverAuth\nsubjectKeyIdentifier=hash\n"
                    "authorityKeyIdentifier=keyid:always\nsubjectAltName=DNS:%s\n" % NAME)
        for argv in (["openssl", "req", "-x509"] + ec +
                     ["-keyout", cakey, "-out", self.ca, "-days", "2",
                      "-subj", "/CN=agentbox reallink bench CA",
                      "-addext", "basicConstraints=critical,CA:TRUE",
                      "-addext", "keyUsage=critical,keyCertSign,cRLSign"],
                     ["openssl", "req"] + ec + ["-keyout", key, "-out", csr, "-subj", "/CN=" + NAME],
                     ["openssl", "x509", "-req", "-in", csr, "-CA", self.ca, "-CAkey", cakey,
                      "-set_serial", str(random.SystemRandom().getrandbits(63)), "-days", "2",
                      "-extfile", ext, "-out", cert]):
            subprocess.run(argv, check=True, capture_output=True)
        os.chmod(self.ca, 0o644)
        os.unlink(cakey)
        with open(self.sysbundle, "wb") as out:
            if os.path.exists(SYSTEM_BUNDLE):
                with open(SYSTEM_BUNDLE, "rb") as f:
                    out.write(f.read())
            with open(self.ca, "rb") as f:
                out.write(f.read())

    def profile(self, ip):
        """Per link: bench.test is ip; the secret bound to P_T only (P_H and
        P_B are plain tunnels).  No network.ca_file: the proxy verifies the
        upstream against the system store (SSL_CERT_FILE, see fb)."""
        path = os.path.join(self.root, "profile-%s.json" % ip)
        bound = ["%s:%d" % (NAME, self.P_T)]
        prof = {"version": 1, "extends": ["default"],
                "network": {"allow": ["%s:%d" % (NAME, p) for p in (self.P_H, self.P_T, self.P_B)],
                            "hosts": {NAME: ip}},
                "secrets": {SECRET_VAR: {"from": {"env": SECRET_SRC}, "hosts": bound,
                                         "in": ["header:x-api-key"],
                                         "placeholder": {"prefix": SECRET_PREFIX}}}}
        with open(path, "w") as f:
            json.dump(prof, f)
        return path

    def setup(self):
        self.make_certs()
        with open(self.wrap, "w") as f:
            f.write('#!/bin/sh\n# tag curl-args...: ready, wait for go, run, done, wait for exit\n'
                    't=$1; shift\n: > "$t.ready"\n'
                    'while [ ! -e "$t.go" ]; do sleep 0.005; done\n'
                    '"$@" > "$t.out" 2> "$t.err"; echo $? > "$t.rc"; : > "$t.done"\n'
                    'while [ ! -e "$t.exit" ]; do sleep 0.005; done\n')
        os.chmod(self.wrap, 0o755)
        self.net.setup()
        env = dict(os.environ, **{SECRET_SRC: self.secret})
        self.server = self.net.spawn(["ip", "netns", "exec", self.net.up, PY,
                                      self.script, "--serve", self.srv,
                                      "--port-base", str(self.a.port_base)],
                                     stdout=subprocess.PIPE, env=env)
        if self.server.stdout.readline().strip() != b"ready":
            raise RuntimeError("the upstream servers did not start")
        self.prof = {self.net.ip_u: self.profile(self.net.ip_u),
                     self.net.ip_s: self.profile(self.net.ip_s)}

    def cleanup(self):
        self.net.cleanup()
        shutil.rmtree(self.root, ignore_errors=True)
        try:
            os.rmdir(self.a.tmpdir)
        except OSError:
            pass

    def env(self, proxied):
        e = {k: v for k, v in os.environ.items() if k not in (SECRET_VAR, SECRET_SRC)}
        e[SECRET_SRC if proxied else SECRET_VAR] = self.secret
        # the proxy's upstream store (inside, agentbox sets the client's own)
        e["SSL_CERT_FILE"] = self.sysbundle
        return e

    def sandbox(self, binary, ip, argv):
        return [binary, "run", "--no-pty", "-q", "-p", self.prof[ip], "-w", self.ws, "--"] + argv

    # -- first byte
    def fb_once(self, arm, ip):
        a = self.a
        base = [PY, self.script,
                "--client", "fb", "--ip", ip]
        if arm == "direct":
            cmd = base + ["--port", str(self.P_T)]
        elif arm == "tunnel":
            cmd = self.sandbox(a.agentbox, ip, base + ["--port", str(self.P_B), "--proxied",
                                                       "--extra-ca", self.ca])
        else:
            binary = a.before if arm == "before" else a.agentbox
            cmd = self.sandbox(binary, ip, base + ["--port", str(self.P_T), "--proxied"])
        p = subprocess.run(cmd, cwd=self.ws, stdin=subprocess.DEVNULL, capture_output=True,
                           env=self.env(arm != "direct"), timeout=60)
        try:
            r = json.loads(p.stdout.decode().strip().splitlines()[-1])
        except (ValueError, IndexError):
            raise RuntimeError("fb %s: exit %d: %s %s" % (arm, p.returncode, p.stdout[-500:],
                                                         p.stderr[-1500:]))
        if not r["status"].startswith("HTTP/1.1 200"):
            raise RuntimeError("fb %s: %r (403: the secret was not swapped in)" % (arm, r))
        return r

    def first_byte(self, ip):
        arms = ["direct", "intercepted", "tunnel"] + (["before"] if self.a.before else [])
        ms = {k: [] for k in arms}
        issuer = {}
        for _ in range(self.a.fb_reps):
            for arm in arms:
                r = self.fb_once(arm, ip)
                ms[arm].append(r["ms"])
                issuer[arm] = r["issuer"]
        m = {k: med(v) for k, v in ms.items()}
        # added: the median of the differences within each repetition (the
        # arms of one repetition run back to back: drift hits them alike)
        added = {k: med([x - d for x, d in zip(ms[k], ms["direct"])]) for k in arms
                 if k != "direct"}
        return {"median_ms": m, "added_ms": added, "all_ms": ms, "issuer": issuer,
                "reps": self.a.fb_reps}

    # -- bulk
    def wait(self, path, p, timeout=600):
        end = time.monotonic() + timeout
        while not os.path.exists(path):
            if p.poll() is not None and not os.path.exists(path):
                raise RuntimeError("exited (%s) before %s" % (p.returncode, path))
            if time.monotonic() > end:
                raise RuntimeError("timed out waiting for " + path)
            time.sleep(0.002)

    def curl_run(self, cmd, proxied, relay=None):
        """cmd: the wrapped curl (inside agentbox when proxied).  Returns
        rate (B/s of body), cpu_s of the relay (agentbox: its process over the
        window; socat: its whole life)."""
        self.seq += 1
        tag = "r%d" % self.seq
        p = subprocess.Popen(cmd(tag), cwd=self.ws, stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                             env=self.env(proxied))
        t = os.path.join(self.ws, tag)
        try:
            self.wait(t + ".ready", p)
            c0 = cpu_ns(p.pid) if proxied else 0
            open(t + ".go", "w").close()
            self.wait(t + ".done", p)
            cpu = (cpu_ns(p.pid) - c0) / 1e9 if proxied else None
            open(t + ".exit", "w").close()
            p.wait(60)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
        if relay:
            _, _, ru = os.wait4(relay.pid, 0)
            relay.returncode = 0
            cpu = ru.ru_utime + ru.ru_stime
        with open(t + ".out") as f:
            out = f.read().split()
        rc = open(t + ".rc").read().strip()
        if rc != "0" or len(out) < 4 or out[0] != "200" or int(float(out[1])) != self.a.bytes:
            raise RuntimeError("curl failed (rc %s): %s %s" % (
                rc, out, open(t + ".err").read()[-1000:]))
        body_s = float(out[3]) - float(out[2])
        return self.a.bytes / body_s, cpu

    def socat(self, tls, ip):
        a = ["socat", "-b", "524288"]
        lst = "TCP-LISTEN:%d,bind=127.0.0.1,reuseaddr" % self.P_R
        if not tls:
            a += [lst, "TCP:%s:%d" % (ip, self.P_H)]
        else:
            a += ["OPENSSL-LISTEN:%d,bind=127.0.0.1,reuseaddr,cert=%s,key=%s,verify=0" % (
                self.P_R, os.path.join(self.srv, "cert.pem"), os.path.join(self.srv, "key.pem")),
                  "OPENSSL:%s:%d,cafile=%s,commonname=%s,snihost=%s" % (
                      ip, self.P_T, self.ca, NAME, NAME)]
        p = subprocess.Popen(a, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE)
        for _ in range(1000):  # listening? (no probe: socat serves one connection)
            if subprocess.run(["ss", "-Hltn", "sport = :%d" % self.P_R],
                              capture_output=True, text=True).stdout.strip():
                break
            if p.poll() is not None:
                raise RuntimeError("socat: " + p.stderr.read().decode(errors="replace"))
            time.sleep(0.005)
        return p

    def bulk(self, ip, with_socat):
        n = self.a.bytes
        fmt = ["-sS", "-o", "/dev/null", "-w",
               "%{http_code} %{size_download} %{time_starttransfer} %{time_total}"]
        w = lambda tag: ["/bin/sh", self.wrap, tag]
        key = ["-H", "x-api-key: " + self.secret]
        tls = lambda port: ["--cacert", self.ca, "--resolve", "%s:%d:%s" % (NAME, port, ip)]
        arms = {
            "plain/direct": (lambda t: w(t) + ["curl", "--noproxy", "*"] + fmt +
                             ["http://%s:%d/%d" % (ip, self.P_H, n)], False, None),
            "plain/agentbox": (lambda t: self.sandbox(self.a.agentbox, ip, w(t) + [
                "curl", "-p", "-x", "http://%s:%d" % PROXY] + fmt +
                ["http://%s:%d/%d" % (NAME, self.P_H, n)]), True, None),
            "tls/direct": (lambda t: w(t) + ["curl", "--noproxy", "*"] + tls(self.P_T) + key +
                           fmt + ["https://%s:%d/%d" % (NAME, self.P_T, n)], False, None),
            "tls/agentbox": (lambda t: self.sandbox(self.a.agentbox, ip, w(t) + [
                "/bin/sh", "-c", 'exec curl "$@" -H "x-api-key: $%s"' % SECRET_VAR, "sh",
                "-x", "http://%s:%d" % PROXY] + fmt +
                ["https://%s:%d/%d" % (NAME, self.P_T, n)]), True, None),
        }
        if with_socat:
            arms["plain/socat"] = (lambda t: w(t) + ["curl", "--noproxy", "*"] + fmt +
                                   ["http://127.0.0.1:%d/%d" % (self.P_R, n)], False, False)
            arms["tls/socat"] = (lambda t: w(t) + ["curl", "--noproxy", "*", "--cacert", self.ca,
                                                   "--resolve", "%s:%d:127.0.0.1" % (
                                                       NAME, self.P_R)] + key + fmt +
                                 ["https://%s:%d/%d" % (NAME, self.P_R, n)], False, True)
        order = ("plain/direct", "plain/agentbox", "plain/socat", "tls/direct", "tls/agentbox",
                 "tls/socat")
        arms = {k: arms[k] for k in order if k in arms}
        rate = {k: [] for k in arms}
        cpu = {k: [] for k in arms}
        for _ in range(self.a.reps):
            for k, (cmd, proxied, socat_tls) in arms.items():
                relay = self.socat(socat_tls, ip) if socat_tls is not None else None
                r, c = self.curl_run(cmd, proxied, relay)
                rate[k].append(r)
                if c is not None:
                    cpu[k].append(c * GIB / n)
        out = {"bytes": n, "reps": self.a.reps, "rate_Bps": rate, "cpu_s_per_gib": cpu}
        out["median_gbps"] = {k: med(v) * 8 / 1e9 for k, v in rate.items()}
        out["ratio"] = {k: med(rate[k]) / med(rate[k.split("/")[0] + "/direct"])
                        for k in arms if not k.endswith("/direct")}
        out["cpu_median"] = {k: med(v) for k, v in cpu.items() if v}
        return out


# ----------------------------------------------------------------- report --

def verdict(ok):
    return "PASS" if ok else "FAIL"


def report(r, a):
    guards = []
    print("\n== egress proxy on a real link (bench/reallink.py) ==")
    print("link: shaped = tbf %s + %g ms RTT (userspace delay line); unshaped = a veth pair"
          % (a.rate, a.rtt_ms))
    for link in ("unshaped", "shaped"):
        fb = r.get("fb_" + link)
        if not fb:
            continue
        print("\nfirst byte of a fresh sandbox's first request, %s (median of %d, ms):"
              % (link, fb["reps"]))
        print("| arm | median ms | added ms (median of paired differences) |\n|---|---:|---:|")
        for k, v in fb["median_ms"].items():
            add = fb["added_ms"].get(k)
            print("| %s | %.2f | %s |" % (k, v, "" if add is None else "%+.2f" % add))
        add = fb["added_ms"]["intercepted"]
        guards.append(("first intercepted byte, %s: +%.2f ms <= 5 ms" % (link, add), add <= 5))
    for link in ("shaped", "unshaped"):
        b = r.get("bulk_" + link)
        if not b:
            continue
        print("\nbulk, %s link, %d MiB, median of %d:" % (link, b["bytes"] >> 20, b["reps"]))
        print("| path | Gbit/s | ratio to direct | CPU-s per GiB |\n|---|---:|---:|---:|")
        for k, g in b["median_gbps"].items():
            c = b["cpu_median"].get(k)
            print("| %s | %.3f | %s | %s |" % (k, g, "%.3f" % b["ratio"][k] if k in b["ratio"]
                                              else "1", "%.2f" % c if c is not None else ""))
        if link != "shaped":
            continue
        t, i = b["ratio"]["plain/agentbox"], b["ratio"]["tls/agentbox"]
        guards.append(("tunnel at %s: %.3fx >= 0.97x" % (a.rate, t), t >= 0.97))
        guards.append(("interception at %s: %.3fx >= 0.95x" % (a.rate, i), i >= 0.95))
        for kind, what in (("plain", "tunnel"), ("tls", "interception")):
            c, s = b["cpu_median"].get(kind + "/agentbox"), b["cpu_median"].get(kind + "/socat")
            if c is not None and s is not None:
                guards.append(("%s CPU per GiB: %.2f s <= socat %.2f s" % (what, c, s), c <= s))
    print()
    for what, ok in guards:
        print("%s  %s" % (verdict(ok), what))
    r["guards"] = [{"guard": w, "pass": ok} for w, ok in guards]


def bench_main(a):
    if os.geteuid() != 0:
        print("bench: reallink skipped (needs root for network namespaces; "
              "run python3 bench/reallink.py as root)")
        return
    for tool in ("ip", "tc", "curl", "cc", "openssl"):
        if not shutil.which(tool):
            print("bench: reallink skipped (%s is missing)" % tool)
            return
    a.agentbox = os.path.abspath(a.agentbox)
    if a.before:
        a.before = os.path.abspath(a.before)
    with_socat = shutil.which("socat") is not None
    if not with_socat:
        print("bench: reallink: socat is missing: no relay to compare CPU with "
              "(apt-get install socat)", file=sys.stderr)
    only = set(a.only.split(",")) if a.only else {"fb", "shaped", "unshaped"}
    b = Bench(a)
    r = {"machine": {"cpus": os.cpu_count(), "kernel": os.uname().release},
         "rate": a.rate, "rtt_ms": a.rtt_ms}
    t0 = time.monotonic()
    try:
        b.setup()
        if "fb" in only:
            r["fb_unshaped"] = b.first_byte(b.net.ip_u)
            r["fb_shaped"] = b.first_byte(b.net.ip_s)
        if "shaped" in only:
            r["bulk_shaped"] = b.bulk(b.net.ip_s, with_socat)
        if "unshaped" in only:
            r["bulk_unshaped"] = b.bulk(b.net.ip_u, with_socat)
    finally:
        b.cleanup()
    r["runtime_s"] = time.monotonic() - t0
    report(r, a)
    print("runtime %.0f s" % r["runtime_s"])
    if a.json:
        os.makedirs(os.path.dirname(os.path.abspath(a.json)), exist_ok=True)
        with open(a.json, "w") as f:
            json.dump(r, f, indent=1)


def main():
    ap = argparse.ArgumentParser(description="agentbox egress proxy on a shaped link")
    ap.add_argument("--agentbox", default=os.path.join(HERE, "..", "build", "agentbox"))
    ap.add_argument("--before", help="another agentbox build: its first intercepted byte too")
    ap.add_argument("--bytes", type=int,
                    default=int(os.environ.get("REALLINK_BYTES", 256 << 20)))
    ap.add_argument("--reps", type=int, default=int(os.environ.get("REALLINK_REPS", 5)))
    ap.add_argument("--fb-reps", type=int, default=15)
    ap.add_argument("--rate", default="1gbit", help="tc tbf rate of the shaped link")
    ap.add_argument("--rtt-ms", type=float, default=10.0)
    ap.add_argument("--only", help="comma list: fb,shaped,unshaped")
    ap.add_argument("--port-base", type=int, default=29080)
    ap.add_argument("--tmpdir", default="/var/lib/agentbox-bench")
    ap.add_argument("--json")
    # internal
    ap.add_argument("--serve", help=argparse.SUPPRESS)
    ap.add_argument("--client", help=argparse.SUPPRESS)
    ap.add_argument("--ip", help=argparse.SUPPRESS)
    ap.add_argument("--port", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--proxied", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--extra-ca", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.serve:
        serve(a.serve, a.port_base)
    elif a.client == "fb":
        client_fb(a)
    else:
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
        bench_main(a)


if __name__ == "__main__":
    main()
