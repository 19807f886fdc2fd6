# SPDX-License-Identifier: MIT
"""Loopback upstreams for the egress tests (python3 stdlib + the openssl and git CLIs).

Everything here runs on the HOST side of the sandbox, in the test runner:

  * session_ca(): a throw-away CA and a leaf certificate for "upstream.test",
    "*.upstream.test" and IP 127.0.0.1, generated once per test session with
    the openssl CLI (deleted at exit).
  * Upstream: a threaded HTTP/1.1 server (plain or TLS) on 127.0.0.1 that
    counts TCP connections, TLS handshakes (and the SNI seen) and requests
    (per Host and path), and answers:
        /big?n=BYTES     a streamed body of BYTES bytes (pattern, Content-Length)
        /reset           headers + 64 KiB of a much larger body, then a TCP RST
        /reset0          a TCP RST before any response byte
        /chunked?n=N     a chunked response body of N bytes (the /big pattern)
        /close?n=N       N bytes delimited by the connection close (no length)
        /sleep?s=S       the echo answer, after S seconds
        /git/...         git smart HTTP (git http-backend as a CGI), if a repo was given
        anything else    JSON {"method","path","host","body_len","tls","sni","headers"}
    Request bodies may be Content-Length or chunked.
  * EchoServer: a selector-based raw TCP echo server (thousands of connections
    in one thread), for CONNECT tunnels.
  * Egress: the bundle a test uses: both upstreams, a counting "evil" listener
    that every must-not-reach name is mapped to, the CA copied into the
    workspace, the default `hosts` mapping and write_profile().
  * INNER_LIB: the client library the tests run INSIDE the sandbox (python3
    stdlib: raw HTTP over the proxy, CONNECT + TLS, a DNS client), and
    inner_json() to run such a script and parse its JSON answer.

Every server is stopped through ctx.on_cleanup.
"""

import atexit
import json
import os
import selectors
import shutil
import socket
import socketserver
import ssl
import struct
import subprocess
import tempfile
import threading
import time
import http.server
import urllib.parse

from abtest import HOST_PATH, INNER_PY, Listener, describe

# ---------------------------------------------------------------- the test CA

_CA = None
_CA_LOCK = threading.Lock()
LEAF_NAMES = ("upstream.test", "*.upstream.test", "*.a.upstream.test")


def _openssl(args, cwd):
    r = subprocess.run(["openssl"] + args, cwd=cwd, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, timeout=60)
    if r.returncode != 0:
        raise RuntimeError("openssl %s failed: %s%s" % (" ".join(args), r.stdout, r.stderr))


def session_ca():
    """{'dir','ca','ca_key','cert','key'}: paths of a CA and a leaf (EC P-256),
    created on first use and removed when the runner exits."""
    global _CA
    with _CA_LOCK:
        if _CA is not None:
            return _CA
        d = tempfile.mkdtemp(prefix="abit-egress-ca-")
        atexit.register(shutil.rmtree, d, True)
        ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        _openssl(["req", "-x509"] + ec + [
            "-keyout", "ca.key", "-out", "ca.pem", "-days", "3", "-sha256",
            "-subj", "/CN=agentbox integration test CA",
            "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign",
            "-addext", "subjectKeyIdentifier=hash"], d)
        _openssl(["req", "-new"] + ec + ["-keyout", "leaf.key", "-out", "leaf.csr",
                                         "-subj", "/CN=upstream.test"], d)
        with open(os.path.join(d, "leaf.ext"), "w") as f:
            f.write("basicConstraints=critical,CA:FALSE\n"
                    "keyUsage=critical,digitalSignature\n"
                    "extendedKeyUsage=serverAuth\n"
                    "subjectKeyIdentifier=hash\n"
                    "authorityKeyIdentifier=keyid\n"
                    "subjectAltName=" + ",".join(["DNS:" + n for n in LEAF_NAMES] +
                                                 ["IP:127.0.0.1"]) + "\n")
        _openssl(["x509", "-req", "-in", "leaf.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
                  "-CAcreateserial", "-out", "leaf.pem", "-days", "3", "-sha256",
                  "-extfile", "leaf.ext"], d)
        os.chmod(os.path.join(d, "ca.pem"), 0o644)
        _CA = {"dir": d, "ca": os.path.join(d, "ca.pem"), "ca_key": os.path.join(d, "ca.key"),
               "cert": os.path.join(d, "leaf.pem"), "key": os.path.join(d, "leaf.key")}
        return _CA


def server_ssl_context():
    ca = session_ca()
    sctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    sctx.load_cert_chain(ca["cert"], ca["key"])
    sctx.set_alpn_protocols(["http/1.1"])
    return sctx


def client_ssl_context():
    """A client context trusting only the test CA (host side use)."""
    c = ssl.create_default_context(cafile=session_ca()["ca"])
    return c


# ---------------------------------------------------------------- HTTP upstream

BIG_PATTERN = bytes(range(256)) * 256  # 64 KiB


def big_body_chunk(offset, n):
    """Bytes [offset, offset+n) of the /big body (repeating 0..255)."""
    out = bytearray()
    while n > 0:
        i = offset % len(BIG_PATTERN)
        piece = BIG_PATTERN[i:i + n]
        out += piece
        n -= len(piece)
        offset += len(piece)
    return bytes(out)


class _BodyError(Exception):
    pass


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "abit-upstream"
    sys_version = ""

    def log_message(self, fmt, *args):  # quiet
        pass

    def setup(self):
        up = self.server.up
        self.request.settimeout(up.conn_timeout)
        self.sni = None
        if up.tls:
            try:
                self.request.do_handshake()
            except (OSError, ssl.SSLError) as e:
                up._note("handshake_failures", repr(e))
                raise
            self.sni = getattr(self.request, "ab_sni", None)
            up._note("handshakes", self.sni)
        super().setup()

    # -- bodies --
    def _read_body(self, limit=256 << 20):
        te = self.headers.get("Transfer-Encoding", "")
        if te:
            if te.strip().lower() != "chunked":
                raise _BodyError("transfer-encoding %r" % te)
            total = bytearray()
            while True:
                line = self.rfile.readline(1100)
                if not line.endswith(b"\r\n"):
                    raise _BodyError("bad chunk line")
                size_s = line[:-2].split(b";", 1)[0].strip()
                try:
                    size = int(size_s, 16)
                except ValueError:
                    raise _BodyError("bad chunk size %r" % size_s)
                if size == 0:
                    while True:  # trailers
                        t = self.rfile.readline(8192)
                        if t in (b"\r\n", b""):
                            break
                    return bytes(total)
                if len(total) + size > limit:
                    raise _BodyError("body too big")
                data = self.rfile.read(size)
                if len(data) != size or self.rfile.read(2) != b"\r\n":
                    raise _BodyError("short chunk")
                total += data
        cl = self.headers.get("Content-Length")
        if cl is None:
            return b""
        n = int(cl)
        if n > limit:
            raise _BodyError("body too big")
        data = self.rfile.read(n)
        if len(data) != n:
            raise _BodyError("short body")
        return data

    def _origin_path(self):
        p = self.path
        if p.startswith("http://") or p.startswith("https://"):
            u = urllib.parse.urlsplit(p)
            p = u.path + ("?" + u.query if u.query else "")
        return p

    def _send(self, status, body, ctype="application/json", extra=()):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in extra:
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _rst(self):
        """Abort the connection with a TCP RST (no FIN, no TLS close_notify)."""
        try:
            self.wfile.flush()
        except OSError:
            pass
        try:
            self.request.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        except OSError:
            pass
        self.server.rst.add(id(self.request))
        self.close_connection = True

    def _handle(self):
        up = self.server.up
        path = self._origin_path()
        host = self.headers.get("Host")
        up._record(self.command, host, path, dict((k.lower(), v) for k, v in self.headers.items()))
        split = urllib.parse.urlsplit(path)
        if split.path.startswith("/git/") and up.git_root:
            return self._git(split)
        try:
            body = self._read_body()
        except (_BodyError, ValueError, OSError) as e:
            up._note("body_errors", str(e))
            self.close_connection = True
            try:
                self._send(400, b"bad body\n", "text/plain")
            except OSError:
                pass
            return
        if split.path == "/big":
            n = int(urllib.parse.parse_qs(split.query).get("n", ["0"])[0])
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(n))
            self.end_headers()
            if self.command == "HEAD":
                return
            off = 0
            while off < n:
                k = min(len(BIG_PATTERN), n - off)
                self.wfile.write(big_body_chunk(off, k))
                off += k
            return
        if split.path == "/chunked":  # a chunked response of n bytes
            n = int(urllib.parse.parse_qs(split.query).get("n", ["0"])[0])
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            off = 0
            while off < n:
                k = min(7000, n - off)
                self.wfile.write(b"%x\r\n" % k + big_body_chunk(off, k) + b"\r\n")
                off += k
            self.wfile.write(b"0\r\n\r\n")
            return
        if split.path == "/close":  # neither Content-Length nor chunked: ends at close
            n = int(urllib.parse.parse_qs(split.query).get("n", ["0"])[0])
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(big_body_chunk(0, n))
            self.close_connection = True
            return
        if split.path == "/sleep":  # answer after s seconds
            time.sleep(float(urllib.parse.parse_qs(split.query).get("s", ["1"])[0]))
        if split.path == "/reset0":
            return self._rst()
        if split.path == "/reset":
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(16 << 20))
            self.end_headers()
            self.wfile.write(big_body_chunk(0, 64 << 10))
            return self._rst()
        info = {"method": self.command, "path": path, "host": host, "body_len": len(body),
                "tls": up.tls, "sni": self.sni, "server": up.name,
                "headers": dict((k.lower(), v) for k, v in self.headers.items())}
        self._send(200, (json.dumps(info) + "\n").encode())

    do_GET = do_POST = do_PUT = do_HEAD = do_DELETE = do_PATCH = do_OPTIONS = _handle

    # -- git smart HTTP through git http-backend (CGI) --
    def _git(self, split):
        up = self.server.up
        try:
            body = self._read_body()
        except (_BodyError, ValueError) as e:
            up._note("body_errors", str(e))
            self.close_connection = True
            return self._send(400, b"bad body\n", "text/plain")
        env = {
            "PATH": HOST_PATH, "HOME": up.git_root, "LANG": "C",
            "GIT_PROJECT_ROOT": up.git_root, "GIT_HTTP_EXPORT_ALL": "1",
            "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_COUNT": "1",
            "GIT_CONFIG_KEY_0": "safe.directory", "GIT_CONFIG_VALUE_0": "*",
            "GATEWAY_INTERFACE": "CGI/1.1", "SERVER_PROTOCOL": "HTTP/1.1",
            "SERVER_SOFTWARE": "abit", "REQUEST_METHOD": self.command,
            "PATH_INFO": urllib.parse.unquote(split.path[len("/git"):]),
            "QUERY_STRING": split.query, "REMOTE_ADDR": "127.0.0.1",
            "CONTENT_TYPE": self.headers.get("Content-Type", ""),
            "CONTENT_LENGTH": str(len(body)),
        }
        for h in ("Git-Protocol", "Content-Encoding"):
            if self.headers.get(h):
                env["HTTP_" + h.upper().replace("-", "_")] = self.headers[h]
        r = subprocess.run(["git", "http-backend"], input=body, env=env, cwd=up.git_root,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
        out = r.stdout
        sep = out.find(b"\r\n\r\n")
        seplen = 4
        if sep < 0 or (out.find(b"\n\n") >= 0 and out.find(b"\n\n") < sep):
            sep, seplen = out.find(b"\n\n"), 2
        if r.returncode != 0 or sep < 0:
            up._note("git_errors", r.stderr.decode("utf-8", "replace"))
            return self._send(500, b"git http-backend failed\n", "text/plain")
        status, ctype, extra = 200, "application/octet-stream", []
        for line in out[:sep].decode("latin-1").splitlines():
            k, _, v = line.partition(":")
            k, v = k.strip(), v.strip()
            if k.lower() == "status":
                status = int(v.split()[0])
            elif k.lower() == "content-type":
                ctype = v
            elif k and k.lower() not in ("content-length", "transfer-encoding", "connection"):
                extra.append((k, v))
        self._send(status, out[sep + seplen:], ctype, extra)


class _Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 1024

    def get_request(self):
        sock, addr = self.socket.accept()
        self.up._note("conns", None)
        if self.sslctx is not None:
            sock = self.sslctx.wrap_socket(sock, server_side=True,
                                           do_handshake_on_connect=False)
        return sock, addr

    def handle_error(self, request, client_address):  # keep the runner's output clean
        pass

    def shutdown_request(self, request):
        if id(request) in self.rst:  # no shutdown(SHUT_WR): close with linger 0 = RST
            self.rst.discard(id(request))
            self.close_request(request)
        else:
            super().shutdown_request(request)


class _Server6(_Server):
    address_family = socket.AF_INET6


class Upstream:
    """A loopback HTTP(S) server on 127.0.0.1:<ephemeral> (or [::1] with v6);
    see the module doc."""

    def __init__(self, ctx, tls=False, git_root=None, name=None, conn_timeout=20, v6=False):
        self.tls = tls
        self.name = name or ("https" if tls else "http")
        self.git_root = git_root
        self.conn_timeout = conn_timeout
        self.lock = threading.Lock()
        self.conns = 0
        self.handshakes = 0
        self.snis = []
        self.requests = []        # (method, host, path)
        self.headers_seen = []    # dict per request
        self.notes = {}
        if v6:
            self.srv = _Server6(("::1", 0), _Handler, bind_and_activate=True)
        else:
            self.srv = _Server(("127.0.0.1", 0), _Handler, bind_and_activate=True)
        self.srv.up = self
        self.srv.rst = set()
        self.srv.sslctx = None
        if tls:
            sctx = server_ssl_context()

            def on_sni(sslsock, name, _ctx):
                try:
                    sslsock.ab_sni = name
                except AttributeError:
                    pass
            sctx.sni_callback = on_sni
            self.srv.sslctx = sctx
        self.port = self.srv.server_address[1]
        self.thread = threading.Thread(target=self.srv.serve_forever, kwargs={"poll_interval": 0.1},
                                       daemon=True, name="abit-upstream-" + self.name)
        self.thread.start()
        ctx.on_cleanup(self.stop)

    def _note(self, what, value):
        with self.lock:
            if what == "conns":
                self.conns += 1
            elif what == "handshakes":
                self.handshakes += 1
                self.snis.append(value)
            else:
                self.notes.setdefault(what, []).append(value)

    def _record(self, method, host, path, headers):
        with self.lock:
            self.requests.append((method, host, path))
            self.headers_seen.append(headers)

    def paths(self):
        with self.lock:
            return [p for _, _, p in self.requests]

    def count(self, path_prefix=None, host=None):
        """Requests seen, optionally only those whose path starts with path_prefix
        and/or whose Host header (without port, lower case) equals host."""
        with self.lock:
            n = 0
            for _, h, p in self.requests:
                if path_prefix is not None and not p.startswith(path_prefix):
                    continue
                if host is not None and (h or "").lower().rsplit(":", 1)[0].rstrip(".") != host:
                    continue
                n += 1
            return n

    def summary(self):
        with self.lock:
            return "%s upstream: %d conns, %d handshakes (SNI %s), requests %s, notes %s" % (
                self.name, self.conns, self.handshakes, self.snis[-10:], self.requests[-20:],
                {k: v[-3:] for k, v in self.notes.items()})

    def stop(self):
        try:
            self.srv.shutdown()
        finally:
            self.srv.server_close()


# ---------------------------------------------------------------- raw echo server

class EchoServer:
    """Raw TCP echo on 127.0.0.1:<ephemeral>, one selector thread; counts
    connections and the peak number open at once."""

    def __init__(self, ctx):
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(4096)
        self.sock.setblocking(False)
        self.port = self.sock.getsockname()[1]
        self.conns = 0
        self.open = 0
        self.peak = 0
        self.sel = selectors.DefaultSelector()
        self.sel.register(self.sock, selectors.EVENT_READ, None)
        self.rpipe, self.wpipe = os.pipe()
        self.sel.register(self.rpipe, selectors.EVENT_READ, "stop")
        self.thread = threading.Thread(target=self._loop, daemon=True, name="abit-echo")
        self.thread.start()
        ctx.on_cleanup(self.stop)

    def _loop(self):
        clients = {}
        while True:
            for key, _ in self.sel.select(1.0):
                if key.data == "stop":
                    for c in list(clients):
                        c.close()
                    return
                if key.fileobj is self.sock:
                    while True:
                        try:
                            c, _ = self.sock.accept()
                        except (BlockingIOError, InterruptedError):
                            break
                        except OSError:
                            break
                        c.setblocking(False)
                        clients[c] = b""
                        self.sel.register(c, selectors.EVENT_READ, "c")
                        self.conns += 1
                        self.open += 1
                        self.peak = max(self.peak, self.open)
                    continue
                c = key.fileobj
                try:
                    data = c.recv(65536)
                except (BlockingIOError, InterruptedError):
                    continue
                except OSError:
                    data = b""
                if not data:
                    self.sel.unregister(c)
                    clients.pop(c, None)
                    c.close()
                    self.open -= 1
                    continue
                try:
                    c.sendall(data)  # small payloads: the send buffer never fills
                except OSError:
                    pass

    def stop(self):
        try:
            os.write(self.wpipe, b"x")
            self.thread.join(5)
        finally:
            for fd in (self.rpipe, self.wpipe):
                try:
                    os.close(fd)
                except OSError:
                    pass
            self.sock.close()


# ---------------------------------------------------------------- git repository

GIT_FILE = "hello.txt"


def make_git_repo(ctx):
    """A bare repo <scratch>/git/repo.git with one commit; returns (root, file text)."""
    root = os.path.join(ctx.scratch, "git")
    src = os.path.join(root, "src")
    os.makedirs(src)
    text = "hello from the loopback git server %s\n" % os.path.basename(ctx.tbase)
    with open(os.path.join(src, GIT_FILE), "w") as f:
        f.write(text)
    env = {"PATH": HOST_PATH, "HOME": root, "LANG": "C", "GIT_CONFIG_NOSYSTEM": "1"}
    base = ["git", "-c", "init.defaultBranch=main", "-c", "user.name=t",
            "-c", "user.email=t@example.com", "-c", "safe.directory=*"]
    for args, cwd in ((["init", "-q"], src), (["add", GIT_FILE], src),
                      (["commit", "-q", "-m", "one"], src),
                      (["clone", "-q", "--bare", src, os.path.join(root, "repo.git")], root)):
        r = subprocess.run(base + args, cwd=cwd, env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, timeout=30)
        assert r.returncode == 0, "git %s: %s%s" % (args, r.stdout, r.stderr)
    return root, text


# ---------------------------------------------------------------- the bundle

class Egress:
    """Upstreams + names + CA for one test.

    Names (the `hosts` mapping of every profile written by write_profile unless
    overridden):
        upstream.test, a.upstream.test  -> the TLS upstream  (https://NAME/)
        http.test                       -> the plain upstream (http://NAME/)
        other.test                      -> a second plain upstream (self.other)
        evil.test, bad.upstream.test    -> self.evil, a counting listener that
                                           must never see a connection
    """

    def __init__(self, ctx, git=False, echo=False):
        self.ctx = ctx
        ca = session_ca()
        self.git_root = self.git_text = None
        if git:
            self.git_root, self.git_text = make_git_repo(ctx)
        self.https = Upstream(ctx, tls=True, git_root=self.git_root, name="https")
        self.http = Upstream(ctx, tls=False, git_root=self.git_root, name="http")
        self.other = Upstream(ctx, tls=False, name="other")  # "other.test"
        self.evil = Listener()
        ctx.on_cleanup(self.evil.close)
        self.echo = EchoServer(ctx) if echo else None
        self.ca = os.path.join(ctx.ws, "ab-test-ca.pem")
        shutil.copyfile(ca["ca"], self.ca)
        os.chmod(self.ca, 0o644)
        if ctx.uid != 0:
            os.chown(self.ca, ctx.uid, ctx.gid)

    def hosts(self, **override):
        h = {
            "upstream.test": "127.0.0.1:%d" % self.https.port,
            "a.upstream.test": "127.0.0.1:%d" % self.https.port,
            "http.test": "127.0.0.1:%d" % self.http.port,
            "other.test": "127.0.0.1:%d" % self.other.port,
            "evil.test": "127.0.0.1:%d" % self.evil.port,
            "bad.upstream.test": "127.0.0.1:%d" % self.evil.port,
        }
        if self.echo:
            h["echo.test"] = "127.0.0.1:%d" % self.echo.port
        for k, v in override.items():
            k = k.replace("_", ".")
            if v is None:
                h.pop(k, None)
            else:
                h[k] = v
        return h

    def evil_hits(self):
        return self.evil.count()

    def write_profile(self, name="egress", allow=("upstream.test", "a.upstream.test", "http.test"),
                      deny=None, private=None, hosts=None, transparent=None, proxy_port=None,
                      log=None, extra=None):
        return write_profile(self.ctx, name=name, allow=allow, deny=deny, private=private,
                             hosts=self.hosts() if hosts is None else hosts,
                             transparent=transparent, proxy_port=proxy_port, log=log,
                             extra=extra)

    def summary(self):
        return "\n".join([self.https.summary(), self.http.summary(), self.other.summary(),
                          "evil listener: %d connections" % self.evil.count()])


def write_profile(ctx, name="egress", allow=(), deny=None, private=None, hosts=None,
                  transparent=None, proxy_port=None, log=None, extra=None):
    """Write <scratch>/<name>.json extending "default" with a network section;
    returns its path (pass it as -p)."""
    net = {"allow": list(allow)}
    if deny is not None:
        net["deny"] = list(deny)
    if private is not None:
        net["private"] = list(private)
    if hosts:
        net["hosts"] = dict(hosts)
    if transparent is not None:
        net["transparent"] = bool(transparent)
    if proxy_port is not None:
        net["proxy_port"] = proxy_port
    if log is not None:
        net["log"] = log
    prof = {"version": 1, "extends": ["default"], "network": net}
    if extra:
        prof.update(extra)
    path = os.path.join(ctx.scratch, name + ".json")
    ctx.host_file(path, json.dumps(prof, indent=2) + "\n")
    return path


# ---------------------------------------------------------------- audit log

def read_log(path, ctx=None):
    """Parsed JSON lines of an audit log (asserts every line is a JSON object
    and, given ctx, that neither of its canaries is in the file)."""
    if not os.path.exists(path):
        raise AssertionError("no audit log was written at %s" % path)
    with open(path, "rb") as f:
        raw = f.read()
    if ctx is not None:
        for tok in (ctx.token, ctx.env_token):
            assert tok.encode() not in raw, "a canary is in the audit log %s" % path
    out = []
    for i, line in enumerate(raw.decode("utf-8", "replace").splitlines()):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            raise AssertionError("audit log line %d is not JSON: %r" % (i + 1, line[:300]))
        assert isinstance(obj, dict), "audit log line %d is not an object: %r" % (i + 1, line)
        out.append(obj)
    return out, raw


# ---------------------------------------------------------------- the inside client library

# Python code run INSIDE the sandbox by /usr/bin/python3, prepended to every
# inner script of test_egress.py (argv[1] is a JSON config; CFG["ca"] is the
# workspace copy of the test CA, CFG["proxy_port"] defaults to 3128).
# Raw-socket HTTP helpers (requests, CONNECT, TLS over a tunnel), a tiny DNS
# client, and run() for subprocesses.

INNER_LIB = r'''
import errno, json, os, random, select, socket, ssl, struct, subprocess, sys, threading, time
CFG = json.loads(sys.argv[1])
PROXY = ("127.0.0.1", int(CFG.get("proxy_port", 3128)))
CA = CFG.get("ca")

def ename(e):
    if isinstance(e, socket.gaierror):
        return "GAI:%s" % (e.args[0],)
    if isinstance(e, socket.timeout):
        return "TIMEOUT"
    if isinstance(e, ssl.SSLError):
        return "SSL:%s" % (e.reason or e.__class__.__name__)
    if isinstance(e, OSError) and e.errno:
        return errno.errorcode.get(e.errno, str(e.errno))
    return "%s:%s" % (type(e).__name__, str(e)[:120])

def tls_ctx(verify=True):
    if verify:
        return ssl.create_default_context(cafile=CA)
    c = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    c.check_hostname = False
    c.verify_mode = ssl.CERT_NONE
    return c

def send_some(s, data, piece=16384):
    """Send data; stop early (quietly) when the peer answers or goes away.
    True if everything was sent."""
    off = 0
    while off < len(data):
        r, w, _ = select.select([s], [s], [], 5)
        if r or not w:
            return False
        try:
            off += s.send(data[off:off + piece])
        except OSError:
            return False
    return True

def read_head(s, timeout=5.0, buf=b""):
    """-> (status or None, headers dict, rest, state) state: ok/closed/timeout/ERR"""
    deadline = time.monotonic() + timeout
    while b"\r\n\r\n" not in buf:
        left = deadline - time.monotonic()
        if left <= 0:
            return None, {}, buf, "timeout"
        s.settimeout(left)
        try:
            d = s.recv(65536)
        except socket.timeout:
            return None, {}, buf, "timeout"
        except OSError as e:
            return None, {}, buf, ename(e)
        if not d:
            return None, {}, buf, "closed"
        buf += d
        if len(buf) > 1 << 20:
            return None, {}, buf, "hugehead"
    head, _, rest = buf.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    try:
        status = int(lines[0].split()[1])
    except (IndexError, ValueError):
        return None, {}, buf, "badstatus:" + lines[0][:80]
    hdrs = {}
    for l in lines[1:]:
        k, _, v = l.partition(":")
        hdrs[k.strip().lower()] = v.strip()
    return status, hdrs, rest, "ok"

def read_response(s, timeout=5.0, buf=b"", head_only=False, method="GET"):
    """-> dict status, headers, body (bytes), state, rest"""
    status, hdrs, rest, state = read_head(s, timeout, buf)
    out = {"status": status, "headers": hdrs, "body": b"", "state": state, "rest": b""}
    if status is None or head_only or method == "HEAD" or status in (204, 304) or \
            100 <= status < 200:
        out["rest"] = rest
        return out
    deadline = time.monotonic() + timeout
    # bodies grow in a bytearray: appending to bytes copies the whole body
    # each time (a 12 MB body took ~20 s of copying on a slow VM)
    if "content-length" in hdrs:
        n = int(hdrs["content-length"])
        body = bytearray(rest)
        while len(body) < n:
            left = deadline - time.monotonic()
            if left <= 0:
                out["state"] = "bodytimeout"
                break
            s.settimeout(left)
            try:
                d = s.recv(min(1 << 20, n - len(body)))
            except OSError as e:
                out["state"] = "body:" + ename(e)
                break
            if not d:
                out["state"] = "bodyclosed"
                break
            body += d
        out["body"], out["rest"] = bytes(body[:n]), bytes(body[n:])
    elif hdrs.get("transfer-encoding", "").lower() == "chunked":
        body, data = bytearray(), rest
        while True:
            while b"\r\n" not in data:
                s.settimeout(max(0.01, deadline - time.monotonic()))
                try:
                    d = s.recv(65536)
                except OSError as e:
                    out["state"] = "body:" + ename(e); out["body"] = bytes(body); return out
                if not d:
                    out["state"] = "bodyclosed"; out["body"] = bytes(body); return out
                data += d
            line, _, data = data.partition(b"\r\n")
            n = int(line.split(b";")[0], 16)
            while len(data) < n + 2:
                s.settimeout(max(0.01, deadline - time.monotonic()))
                try:
                    d = s.recv(65536)
                except OSError as e:
                    out["state"] = "body:" + ename(e); out["body"] = bytes(body); return out
                if not d:
                    out["state"] = "bodyclosed"; out["body"] = bytes(body); return out
                data += d
            if n == 0:  # data now holds the optional trailers and the final CRLF
                while not data.startswith(b"\r\n") and b"\r\n\r\n" not in data:
                    s.settimeout(max(0.01, deadline - time.monotonic()))
                    try:
                        d = s.recv(65536)
                    except OSError as e:
                        out["state"] = "trailer:" + ename(e); break
                    if not d:
                        out["state"] = "trailerclosed"; break
                    data += d
                if data.startswith(b"\r\n"):
                    out["rest"] = data[2:]
                else:
                    out["rest"] = data.partition(b"\r\n\r\n")[2]
                break
            body += data[:n]
            data = data[n + 2:]
        out["body"] = bytes(body)
    else:  # until close
        body = bytearray(rest)
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                out["state"] = "bodytimeout"
                break
            s.settimeout(left)
            try:
                d = s.recv(65536)
            except OSError as e:
                out["state"] = "body:" + ename(e)
                break
            if not d:
                break
            body += d
        out["body"] = bytes(body)
    return out

def conn_closed(s, timeout=1.0):
    """True if the peer closed (EOF/RST) within timeout, False if still open."""
    s.settimeout(timeout)
    try:
        d = s.recv(1)
        return d == b""
    except socket.timeout:
        return False
    except OSError:
        return True

def jresp(r):
    """A JSON-able summary of read_response's result."""
    body = r["body"]
    try:
        parsed = json.loads(body.decode())
    except Exception:
        parsed = None
    return {"status": r["status"], "state": r["state"], "ctype": r["headers"].get("content-type"),
            "text": body[:2000].decode("utf-8", "replace"), "json": parsed}

def proxy_request(raw, timeout=5.0, addr=None):
    """One raw request on a new connection to the proxy."""
    s = socket.create_connection(addr or PROXY, timeout=timeout)
    try:
        send_some(s, raw)
        return jresp(read_response(s, timeout))
    except OSError as e:
        return {"status": None, "state": ename(e)}
    finally:
        s.close()

def plain_get(host, path, extra=b""):
    return ("GET http://%s%s HTTP/1.1\r\nHost: %s\r\n" % (host, path, host)).encode() + \
        extra + b"Connection: close\r\n\r\n"

def normal_ok(tag="normal"):
    r = proxy_request(plain_get("http.test", "/" + tag))
    return r.get("status")

def connect(authority, timeout=5.0, host_hdr=None, addr=None):
    """CONNECT through the proxy: -> (socket or None, response dict)"""
    s = socket.create_connection(addr or PROXY, timeout=timeout)
    s.sendall(("CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" %
               (authority, host_hdr or authority)).encode())
    r = read_response(s, timeout, head_only=True)
    if r["status"] != 200:
        # the denial body, if any
        st, hd, rest, state = r["status"], r["headers"], r["rest"], r["state"]
        body = rest
        if st is not None and "content-length" in hd:
            n = int(hd["content-length"])
            s.settimeout(2)
            while len(body) < n:
                try:
                    d = s.recv(65536)
                except OSError:
                    break
                if not d:
                    break
                body += d
        s.close()
        return None, {"status": st, "state": state, "ctype": hd.get("content-type"),
                      "text": body[:2000].decode("utf-8", "replace")}
    return s, {"status": 200, "state": "ok", "rest": len(r["rest"])}

def https_get(sock, sni, path, host=None, verify=True, timeout=5.0, extra=b""):
    """TLS over an already connected socket, then GET path: -> dict"""
    try:
        t = tls_ctx(verify).wrap_socket(sock, server_hostname=sni)
    except (OSError, ssl.SSLError) as e:
        sock.close()
        return {"status": None, "state": "handshake:" + ename(e)}
    try:
        t.sendall(("GET %s HTTP/1.1\r\nHost: %s\r\n" % (path, host or sni)).encode() + extra +
                  b"Connection: close\r\n\r\n")
        return jresp(read_response(t, timeout))
    except (OSError, ssl.SSLError) as e:
        return {"status": None, "state": ename(e)}
    finally:
        t.close()

def tunnel_get(authority, sni, path, verify=True, host=None):
    s, r = connect(authority)
    if s is None:
        return r
    return https_get(s, sni, path, host=host, verify=verify)

def direct(name, port, timeout=5.0):
    """socket.create_connection by name (the transparent path): socket or error name"""
    try:
        return socket.create_connection((name, port), timeout=timeout)
    except OSError as e:
        return ename(e)

def dns_query(name, qtype=1, tcp=False, server=("127.0.0.1", 53), timeout=2.0):
    """-> {"rcode", "answers": [A/AAAA text], "ancount"} or {"error"}"""
    qid = random.randrange(65536)
    q = struct.pack(">HHHHHH", qid, 0x0100, 1, 0, 0, 0)
    for label in name.rstrip(".").split("."):
        q += bytes([len(label)]) + label.encode()
    q += b"\0" + struct.pack(">HH", qtype, 1)
    fam = socket.AF_INET6 if ":" in server[0] else socket.AF_INET
    try:
        if tcp:
            s = socket.socket(fam, socket.SOCK_STREAM)
            s.settimeout(timeout)
            s.connect(server)
            s.sendall(struct.pack(">H", len(q)) + q)
            data = b""
            while len(data) < 2 or len(data) < 2 + struct.unpack(">H", data[:2])[0]:
                d = s.recv(65536)
                if not d:
                    break
                data += d
            s.close()
            resp = data[2:]
        else:
            s = socket.socket(fam, socket.SOCK_DGRAM)
            s.settimeout(timeout)
            s.sendto(q, server)
            resp, _ = s.recvfrom(65536)
            s.close()
    except socket.timeout:
        return {"error": "noreply"}
    except OSError as e:
        return {"error": ename(e)}
    if len(resp) < 12:
        return {"error": "short"}
    rid, flags, qd, an, ns, ar = struct.unpack(">HHHHHH", resp[:12])
    out = {"rcode": flags & 15, "ancount": an, "answers": [], "id_ok": rid == qid,
           "qr": bool(flags & 0x8000)}
    off = 12
    def skip_name(off):
        while True:
            l = resp[off]
            if l & 0xC0 == 0xC0:
                return off + 2
            off += 1
            if l == 0:
                return off
            off += l
    try:
        for _ in range(qd):
            off = skip_name(off) + 4
        for _ in range(an):
            off = skip_name(off)
            t, c, ttl, rdlen = struct.unpack(">HHIH", resp[off:off + 10])
            off += 10
            rd = resp[off:off + rdlen]
            off += rdlen
            if t == 1 and rdlen == 4:
                out["answers"].append(socket.inet_ntop(socket.AF_INET, rd))
            elif t == 28 and rdlen == 16:
                out["answers"].append(socket.inet_ntop(socket.AF_INET6, rd))
            else:
                out["answers"].append("type%d" % t)
    except Exception as e:
        out["parse_error"] = str(e)
    return out

def run(cmd, env=None, timeout=60, input=None):
    e = dict(os.environ)
    for k, v in (env or {}).items():
        if v is None:
            e.pop(k, None)
        else:
            e[k] = v
    try:
        r = subprocess.run(cmd, env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=timeout, input=input)
    except subprocess.TimeoutExpired:
        return {"rc": "timeout", "out": "", "err": ""}
    return {"rc": r.returncode, "out": r.stdout.decode("utf-8", "replace")[-4000:],
            "err": r.stderr.decode("utf-8", "replace")[-2000:]}

NOPROXY_ENV = {k: None for k in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY",
                                  "ALL_PROXY", "all_proxy")}
'''


# ---------------------------------------------------------------- running code inside

def inner_json(ctx, code, cfg, profile, timeout=60, extra_args=(), env=None):
    """Run INNER_PY -c code JSON(cfg) in the sandbox; returns (parsed last line, run)."""
    r = ctx.sandbox([INNER_PY, "-c", code, json.dumps(cfg)], profile=profile, timeout=timeout,
                    extra_args=extra_args, env=env)
    assert r.returncode == 0, "inner python failed\n" + describe(r)
    lines = r.stdout.strip().splitlines()
    try:
        return json.loads(lines[-1]), r
    except (ValueError, IndexError):
        raise AssertionError("inner python printed no JSON\n" + describe(r))
