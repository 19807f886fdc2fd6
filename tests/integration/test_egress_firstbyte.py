# SPDX-License-Identifier: MIT
"""The first intercepted byte: the proxy's handshake with the real host runs
alongside the client's, not after it (src/egress/pxtls.c).

The upstream here is a TCP listener that records the first bytes it gets and
never answers.  The client inside sends its ClientHello through a CONNECT
tunnel to a host a secret is bound to, then stops: it never reads the
proxy's answer, so its own handshake never completes.  The proxy must still
have sent the upstream its ClientHello for that host (with the host's name
as SNI) - which it only does after the client's handshake when the two are
serialised.  No timing is measured: the wait is only the failure bound.
"""

import json
import os
import socket
import threading

HOST = "api.firstbyte.test"
SRC = "AB_FIRSTBYTE_SECRET"

INNER = r'''
import json, os, socket, ssl, sys, time
cfg = json.loads(sys.argv[1])
s = socket.create_connection(("127.0.0.1", 3128), timeout=10)
s.sendall(b"CONNECT %s:443 HTTP/1.1\r\nHost: %s:443\r\n\r\n" % (cfg["host"].encode(), cfg["host"].encode()))
head = b""
while b"\r\n\r\n" not in head:
    d = s.recv(4096)
    if not d:
        break
    head += d
out = {"connect": head.split(b"\r\n")[0].decode(errors="replace")}
inc, outb = ssl.MemoryBIO(), ssl.MemoryBIO()
obj = ssl.create_default_context().wrap_bio(inc, outb, server_hostname=cfg["host"])
try:
    obj.do_handshake()
except ssl.SSLWantReadError:
    pass
s.sendall(outb.read())  # the ClientHello, and nothing after it
end = time.monotonic() + cfg["wait"]
while time.monotonic() < end and not os.path.exists(cfg["marker"]):
    time.sleep(0.02)
out["upstream_saw_hello"] = os.path.exists(cfg["marker"])
print(json.dumps(out))
'''


class HelloRecorder:
    """Accepts connections, keeps the first bytes of each, answers nothing;
    writes MARKER once a TLS ClientHello naming HOST arrived."""

    def __init__(self, marker):
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self.marker = marker
        self.got = []
        self.conns = []
        threading.Thread(target=self.run, daemon=True).start()

    def run(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(c)
            threading.Thread(target=self.read, args=(c,), daemon=True).start()

    def read(self, c):
        buf = b""
        try:
            c.settimeout(30)
            while len(buf) < 5 or len(buf) < 5 + int.from_bytes(buf[3:5], "big"):
                d = c.recv(4096)
                if not d:
                    break
                buf += d
        except OSError:
            pass
        self.got.append(buf)
        if buf[:1] == b"\x16" and HOST.encode() in buf:
            with open(self.marker, "w") as f:
                f.write("hello\n")
            os.chmod(self.marker, 0o644)

    def close(self):
        self.sock.close()
        for c in self.conns:
            c.close()


def test_upstream_handshake_starts_with_the_clients(ctx):
    """The upstream gets the proxy's ClientHello while the client's own
    handshake with the proxy is still open."""
    marker = os.path.join(ctx.ws, "upstream-saw-hello")
    rec = HelloRecorder(marker)
    ctx.on_cleanup(rec.close)
    prof = os.path.join(ctx.scratch, "firstbyte.json")
    ctx.host_file(prof, json.dumps({
        "version": 1, "extends": ["default"],
        "network": {"allow": [HOST], "hosts": {HOST: "127.0.0.1:%d" % rec.port}},
        "secrets": {"KEY": {"from": {"env": SRC}, "hosts": [HOST]}}}))
    r = ctx.sandbox(["/usr/bin/python3", "-c", INNER,
                     json.dumps({"host": HOST, "marker": marker, "wait": 10})],
                    profile=prof, timeout=60, env={SRC: "sk-firstbyte-0123456789abcdef"})
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["connect"].startswith("HTTP/1.1 200"), out
    assert out["upstream_saw_hello"], (
        "the proxy did not start the upstream's handshake while the client's was open "
        "(upstream got %r)" % [g[:16] for g in rec.got])
