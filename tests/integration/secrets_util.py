# SPDX-License-Identifier: MIT
"""Host-side helpers of test_secrets.py (credential brokering).

  * SecretUpstream: a loopback HTTP(S) server like upstream.Upstream that
    records, per request, the exact request line, header pairs and body bytes
    it received (also a partial body when the client was cut), and answers:
        /reflect          the real values it was given, in a header and in the
                          body, raw and encoded (base64, base64url, percent-,
                          JSON-slash-escaped, Basic "user:value" base64)
        /reflect-chunked  the same body, chunked, every value split over
                          chunk boundaries (?whole=1: in one chunk)
        /reflect-big?n=N  N bytes of filler with the raw value at offsets that
                          straddle 16/64 KiB read boundaries (Content-Length)
        /coded?...        "secret=VALUE" and the /reflect body, compressed
                          (comp=gzip|deflate|none) whatever Accept-Encoding
                          said, with a Content-Encoding field per ce=, and
                          te= as Transfer-Encoding (chunked framing when it
                          ends in chunked, else until the close) or else
                          Content-Length
        /gitauth/...      git smart HTTP that requires one of the real values
                          (Authorization: Bearer VALUE, or Basic with VALUE as
                          the password); without it 401 + WWW-Authenticate
        /git/...          git smart HTTP without authentication
        anything else     the JSON echo of upstream.py (method, path, host,
                          headers, body_len)
  * Broker: the bundle a test uses: a TLS upstream for the bound host, a TLS
    upstream for an allowed but unbound host (a blind tunnel), a plain one
    for an allowed unbound http host, a counting listener for names that
    must see nothing, and write_profile() with secrets and network.ca_file.
  * private_key_files(): PEM private-key files under the given roots
    (for "the CA key never touches disk").
"""

import base64
import gzip
import json
import os
import re
import secrets as pysecrets
import shutil
import subprocess
import threading
import urllib.parse
import zlib

import upstream
from abtest import Listener
from upstream import _Handler, _Server, make_git_repo, server_ssl_context, session_ca

BOUND = "api.upstream.test"       # TLS upstream a secret is bound to
TUNNEL = "other.upstream.test"    # TLS upstream allowed, not bound (blind tunnel)
PLAIN = "plain.test"              # plain-HTTP upstream allowed, not bound
BOUND_PLAIN = "bound.test"        # plain-HTTP host a secret is bound to (port 80)
EVIL = "evil.test"                # never allowed: must see nothing


def new_value(prefix="sk-live-", n=24, extra=""):
    """A fresh, recognisable secret value: PREFIX + 2n hex digits + EXTRA."""
    return prefix + pysecrets.token_hex(n) + extra


def encodings(value):
    """The encoded forms of a value the proxy must mask in responses."""
    v = value.encode()
    return {
        "plain": value,
        "b64": base64.b64encode(v).decode(),
        "b64url": base64.urlsafe_b64encode(v).decode().rstrip("="),
        "pct": urllib.parse.quote(value, safe=""),
        "json_slash": value.replace("\\", "\\\\").replace('"', '\\"').replace("/", "\\/"),
        "basic": base64.b64encode(b"x-access-token:" + v).decode(),
    }


class _SecretHandler(_Handler):
    """upstream._Handler plus exact recording and the /reflect* and /gitauth
    endpoints."""

    def _read_body(self, limit=64 << 20):
        rec = self._rec
        te = self.headers.get("Transfer-Encoding", "")
        if te:
            if te.strip().lower() != "chunked":
                raise upstream._BodyError("transfer-encoding %r" % te)
            while True:
                line = self.rfile.readline(1100)
                if not line.endswith(b"\r\n"):
                    raise upstream._BodyError("bad chunk line")
                size = int(line[:-2].split(b";", 1)[0].strip(), 16)
                if size == 0:
                    while self.rfile.readline(8192) not in (b"\r\n", b""):
                        pass
                    return bytes(rec["body"])
                data = self.rfile.read(size)
                rec["body"] += data
                if len(data) != size or self.rfile.read(2) != b"\r\n":
                    raise upstream._BodyError("short chunk")
        cl = self.headers.get("Content-Length")
        if cl is None:
            return b""
        n = int(cl)
        while len(rec["body"]) < n:
            d = self.rfile.read1(n - len(rec["body"])) if hasattr(self.rfile, "read1") \
                else self.rfile.read(n - len(rec["body"]))
            if not d:
                raise upstream._BodyError("short body")
            rec["body"] += d
        return bytes(rec["body"])

    def _handle(self):
        up = self.server.up
        self._rec = {"method": self.command, "target": self.path,
                     "host": self.headers.get("Host"),
                     "headers": [(k.lower(), v) for k, v in self.headers.items()],
                     "body": bytearray(), "tls": up.tls, "sni": self.sni}
        up._add(self._rec)
        split = urllib.parse.urlsplit(self._origin_path())
        if split.path.startswith("/gitauth/") and up.git_root:
            if not self._authorized():
                self.close_connection = False
                try:
                    self._read_body()
                except (upstream._BodyError, ValueError, OSError):
                    self.close_connection = True
                return self._send(401, b"auth required\n", "text/plain",
                                  [("WWW-Authenticate", 'Basic realm="abit"')])
            split = split._replace(path="/git/" + split.path[len("/gitauth/"):])
            return self._git(split)
        if split.path == "/coded":
            return self._coded(split)
        if split.path in ("/reflect", "/reflect-chunked", "/reflect-big"):
            try:
                self._read_body()
            except (upstream._BodyError, ValueError, OSError):
                self.close_connection = True
                return
            return self._reflect(split)
        return super()._handle()

    do_GET = do_POST = do_PUT = do_HEAD = do_DELETE = do_PATCH = do_OPTIONS = _handle

    def _authorized(self):
        auth = self.headers.get("Authorization", "")
        vals = self.server.up.values
        if auth.startswith("Bearer "):
            return auth[7:] in vals
        if auth.startswith("Basic "):
            try:
                user, _, pw = base64.b64decode(auth[6:]).decode().partition(":")
            except Exception:
                return False
            return pw in vals
        return False

    def _reflect_body(self):
        parts = []
        for v in self.server.up.values:
            for k, e in encodings(v).items():
                parts.append("%s=[%s]" % (k, e))
        return ("reflect: " + " ".join(parts) + "\n").encode()

    def _coded(self, split):
        """A server that ignores Accept-Encoding: identity (see /coded)."""
        q = urllib.parse.parse_qs(split.query, keep_blank_values=True)
        vals = self.server.up.values
        body = ("secret=%s\n" % (vals[0] if vals else "")).encode() + self._reflect_body()
        comp = q.get("comp", ["gzip"])[0]
        if comp == "gzip":
            body = gzip.compress(body)
        elif comp == "deflate":
            body = zlib.compress(body)
        te = q.get("te", [""])[0]
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        for ce in q.get("ce", []):
            self.send_header("Content-Encoding", ce)
        if te:
            self.send_header("Transfer-Encoding", te)
            if not te.replace(" ", "").lower().endswith("chunked"):
                self.send_header("Connection", "close")
                self.close_connection = True
        else:
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command == "HEAD":
            return
        if te and te.replace(" ", "").lower().endswith("chunked"):
            for i in range(0, len(body), 50):
                piece = body[i:i + 50]
                self.wfile.write(b"%x\r\n" % len(piece) + piece + b"\r\n")
            self.wfile.write(b"0\r\n\r\n")
        else:
            self.wfile.write(body)

    def _reflect(self, split):
        vals = self.server.up.values
        v = vals[0] if vals else ""
        extra = [("X-Reflect", v), ("X-Reflect-B64", encodings(v)["b64"]),
                 ("Set-Cookie", "k=%s; Path=/" % encodings(v)["pct"])]
        body = self._reflect_body()
        if split.path == "/reflect":
            return self._send(200, body, "text/plain", extra)
        if split.path == "/reflect-big":
            n = int(urllib.parse.parse_qs(split.query).get("n", ["300000"])[0])
            buf = bytearray(b"." * n)
            vb = v.encode()
            for off in (0, 16384 - 5, 65536 - len(vb) // 2, 131072 - 1, n - len(vb)):
                if 0 <= off <= n - len(vb):
                    buf[off:off + len(vb)] = vb
            return self._send(200, bytes(buf), "application/octet-stream", extra)
        # chunked: cut the body into chunks of 1..7 bytes around every value
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Transfer-Encoding", "chunked")
        for k, val in extra:
            self.send_header(k, val)
        self.end_headers()
        i, step = 0, 1
        if "whole=1" in split.query:  # one chunk
            step = len(body)
        while i < len(body):
            piece = body[i:i + step]
            self.wfile.write(b"%x\r\n" % len(piece) + piece + b"\r\n")
            i += len(piece)
            step = step % 7 + 1 if step < 8 else step
        self.wfile.write(b"0\r\n\r\n")


class SecretUpstream(upstream.Upstream):
    """A loopback server (TLS or plain) with exact recording; values: the real
    secret values it knows (for /reflect and /gitauth)."""

    def __init__(self, ctx, tls, name, values=(), git_root=None, conn_timeout=20):
        self.tls = tls
        self.name = name
        self.git_root = git_root
        self.conn_timeout = conn_timeout
        self.values = list(values)
        self.lock = threading.Lock()
        self.conns = 0
        self.handshakes = 0
        self.snis = []
        self.requests = []
        self.headers_seen = []
        self.notes = {}
        self.recs = []
        self.srv = _Server(("127.0.0.1", 0), _SecretHandler, bind_and_activate=True)
        self.srv.up = self
        self.srv.rst = set()
        self.srv.sslctx = None
        if tls:
            sctx = server_ssl_context()

            def on_sni(sslsock, sni, _ctx):
                try:
                    sslsock.ab_sni = sni
                except AttributeError:
                    pass
            sctx.sni_callback = on_sni
            self.srv.sslctx = sctx
        self.port = self.srv.server_address[1]
        self.thread = threading.Thread(target=self.srv.serve_forever,
                                       kwargs={"poll_interval": 0.1}, daemon=True,
                                       name="abit-secret-" + name)
        self.thread.start()
        ctx.on_cleanup(self.stop)

    def _add(self, rec):
        with self.lock:
            self.recs.append(rec)

    def find(self, marker):
        """Records whose request target contains marker."""
        with self.lock:
            return [r for r in self.recs if marker in r["target"]]

    def header(self, marker, name):
        """Values of header `name` in the requests whose target contains marker."""
        out = []
        for r in self.find(marker):
            out += [v for k, v in r["headers"] if k == name.lower()]
        return out

    def everything(self):
        """All bytes this upstream recorded (targets, headers, bodies), for
        'the placeholder/value never arrived' checks."""
        with self.lock:
            parts = []
            for r in self.recs:
                parts.append(r["target"])
                parts += ["%s: %s" % kv for kv in r["headers"]]
                parts.append(bytes(r["body"]).decode("latin-1"))
            return "\n".join(parts)

    def summary(self):
        with self.lock:
            return "%s: %d conns, %d handshakes, targets %s, notes %s" % (
                self.name, self.conns, self.handshakes,
                [r["target"] for r in self.recs][-20:],
                {k: v[-3:] for k, v in self.notes.items()})


class Broker:
    """Upstreams, names and the test CA of one credential-brokering test.

    Names (profile `hosts` mapping):
        api.upstream.test   -> self.api     (TLS, the bound host)
        other.upstream.test -> self.tunnel  (TLS, allowed, unbound: blind tunnel)
        plain.test          -> self.plain   (plain HTTP, allowed, unbound)
        bound.test          -> self.bplain  (plain HTTP, allowed, bound)
        evil.test           -> self.evil    (never allowed; counting listener)
    """

    def __init__(self, ctx, values=(), git=False):
        self.ctx = ctx
        ca = session_ca()
        self.git_root = self.git_text = None
        if git:
            self.git_root, self.git_text = make_git_repo(ctx)
        self.api = SecretUpstream(ctx, True, "api", values, self.git_root)
        self.tunnel = SecretUpstream(ctx, True, "tunnel", values)
        self.plain = SecretUpstream(ctx, False, "plain", values)
        self.bplain = SecretUpstream(ctx, False, "bound-plain", values)
        self.evil = Listener()
        ctx.on_cleanup(self.evil.close)
        # host side: what agentbox verifies intercepted upstreams with
        self.ca_file = os.path.join(ctx.scratch, "upstream-ca.pem")
        with open(ca["ca"]) as f:
            ctx.host_file(self.ca_file, f.read())
        # inside: the test CA, for the blind tunnel (not in the session bundle)
        self.ca_ws = os.path.join(ctx.ws, "ab-test-ca.pem")
        shutil.copyfile(ca["ca"], self.ca_ws)
        os.chmod(self.ca_ws, 0o644)
        if ctx.uid != 0:
            os.chown(self.ca_ws, ctx.uid, ctx.gid)

    def hosts(self):
        return {
            BOUND: "127.0.0.1:%d" % self.api.port,
            TUNNEL: "127.0.0.1:%d" % self.tunnel.port,
            PLAIN: "127.0.0.1:%d" % self.plain.port,
            BOUND_PLAIN: "127.0.0.1:%d" % self.bplain.port,
            EVIL: "127.0.0.1:%d" % self.evil.port,
        }

    def write_profile(self, secrets_, name="secrets", allow=(BOUND, TUNNEL, PLAIN),
                      ca_file=True, log=None, extra=None, extra_hosts=None, net_extra=None):
        """extra_hosts: more NAME -> "api" / "tunnel" / "plain" (that upstream);
        net_extra: more keys of "network"."""
        hosts = self.hosts()
        for n, which in (extra_hosts or {}).items():
            hosts[n] = "127.0.0.1:%d" % getattr(self, which).port
        net = {"allow": list(allow), "hosts": hosts}
        if ca_file:
            net["ca_file"] = self.ca_file if ca_file is True else ca_file
        if log:
            net["log"] = log
        net.update(net_extra or {})
        prof = {"version": 1, "extends": ["default"], "network": net, "secrets": secrets_}
        if extra:
            prof.update(extra)
        path = os.path.join(self.ctx.scratch, name + ".json")
        self.ctx.host_file(path, json.dumps(prof, indent=2) + "\n")
        return path

    def summary(self):
        return "\n".join([self.api.summary(), self.tunnel.summary(), self.plain.summary(),
                          self.bplain.summary(), "evil: %d connections" % self.evil.count()])


# ---------------------------------------------------------------- the disk

PEM_KEY = re.compile(rb"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----")


def private_key_files(roots, max_size=1 << 20):
    """{path: (size, mtime_ns)} of the regular files under roots holding a PEM
    private-key block (symlinks not followed; other file systems entered)."""
    out = {}
    for root in roots:
        if not os.path.isdir(root):
            continue
        for d, dirs, files in os.walk(root, onerror=lambda e: None):
            if d.startswith(("/proc", "/sys")):
                dirs[:] = []
                continue
            for fn in files:
                p = os.path.join(d, fn)
                try:
                    st = os.lstat(p)
                    if not (st.st_mode & 0o170000 == 0o100000) or st.st_size > max_size:
                        continue
                    with open(p, "rb") as f:
                        data = f.read(max_size)
                except OSError:
                    continue
                if PEM_KEY.search(data):
                    out[p] = (st.st_size, st.st_mtime_ns)
    return out


def x509_text(pem_path):
    r = subprocess.run(["openssl", "x509", "-noout", "-text", "-in", pem_path],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=30)
    assert r.returncode == 0, "openssl x509 -text failed: %s" % r.stderr
    return r.stdout


def name_constraints(text):
    """(critical, permitted list, excluded list) of the nameConstraints in
    `openssl x509 -text` output, or None when there is none."""
    lines = text.splitlines()
    for i, l in enumerate(lines):
        if "X509v3 Name Constraints" in l:
            crit = "critical" in l
            perm, excl, cur = [], [], None
            for m in lines[i + 1:]:
                s = m.strip()
                if s.startswith("Permitted:"):
                    cur = perm
                elif s.startswith("Excluded:"):
                    cur = excl
                elif s.startswith(("DNS:", "IP:", "email:", "URI:", "DirName:")) and \
                        cur is not None:
                    cur.append(s)
                else:
                    break
            return crit, perm, excl
    return None


def pem_certs(text):
    return re.findall(r"-----BEGIN CERTIFICATE-----\n.*?-----END CERTIFICATE-----", text,
                      re.S)
