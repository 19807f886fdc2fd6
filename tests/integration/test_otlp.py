# SPDX-License-Identifier: MIT
"""run --otlp URL: the audit events as OpenTelemetry
log records, POSTed (OTLP/HTTP, JSON) by agentbox's parent to a collector the
test runs on loopback.  Runs as root and as uid 65534."""

import json
import os
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from abtest import INNER_PY, describe

MOUNT = 165 if os.uname().machine == "x86_64" else 40


class Collector:
    """A loopback OTLP/HTTP collector: keeps every POST (path, headers,
    parsed body); answers `status` (or `raw` bytes instead of HTTP)."""

    def __init__(self, status=200, raw=None):
        self.posts = []
        outer = self

        class H(BaseHTTPRequestHandler):
            def do_POST(self):
                n = int(self.headers.get("Content-Length", "0"))
                body = self.rfile.read(n)
                outer.posts.append((self.path, dict(self.headers), json.loads(body)))
                if raw is not None:
                    self.wfile.write(raw)
                    return
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"{}")

            def log_message(self, *a):
                pass

        self.srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.port = self.srv.server_address[1]
        self.url = "http://127.0.0.1:%d" % self.port
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()

    def records(self):
        out = []
        for _, _, body in self.posts:
            for rl in body["resourceLogs"]:
                for sl in rl["scopeLogs"]:
                    out.extend(sl["logRecords"])
        return out

    def close(self):
        self.srv.shutdown()
        self.srv.server_close()


def _attrs(kvs):
    return {a["key"]: a["value"] for a in kvs}


def _collector(ctx, **kw):
    c = Collector(**kw)
    ctx._closers.append(c.close)
    return c


def test_events_reach_the_collector(ctx):
    """Without --log: the run's start, each command, a denied syscall and the
    end arrive as log records with the OTLP shape (resource, scope, times as
    strings, attributes), denials as WARN."""
    c = _collector(ctx)
    code = ("import ctypes; l = ctypes.CDLL(None, use_errno=True); "
            "l.syscall(%d, 0, 0, 0, 0, 0); print('ok')" % MOUNT)
    r = ctx.sandbox("/bin/true; %s -c \"%s\"" % (INNER_PY, code), extra_args=["--otlp", c.url])
    assert r.returncode == 0 and r.stdout == "ok\n", describe(r)
    assert "did not reach" not in r.stderr, describe(r)
    assert c.posts, "no POST reached the collector\n" + describe(r)
    for path, headers, body in c.posts:
        assert path == "/v1/logs", path
        assert headers.get("Content-Type") == "application/json", headers
        res = _attrs(body["resourceLogs"][0]["resource"]["attributes"])
        assert res["service.name"] == {"stringValue": "agentbox"}, res
        assert res["agentbox.profile"] == {"stringValue": "default"}, res
        assert body["resourceLogs"][0]["scopeLogs"][0]["scope"]["name"] == "agentbox", body
    recs = c.records()
    names = [x["eventName"] for x in recs]
    assert names[0] == "start" and names[-1] == "end", names
    for x in recs:
        assert x["timeUnixNano"].isdigit() and len(x["timeUnixNano"]) >= 19, x
        assert _attrs(x["attributes"])["event.name"] == {"stringValue": x["eventName"]}, x
        assert json.loads(x["body"]["stringValue"])["event"] == x["eventName"], x
    true = [x for x in recs if x["eventName"] == "exec"
            and _attrs(x["attributes"]).get("agentbox.path") == {"stringValue": "/bin/true"}]
    assert len(true) == 1, names
    argv = _attrs(true[0]["attributes"])["agentbox.argv"]
    assert argv == {"arrayValue": {"values": [{"stringValue": "/bin/true"}]}}, argv
    assert true[0]["severityText"] == "INFO", true[0]
    pid = _attrs(true[0]["attributes"])["agentbox.pid"]
    assert pid["intValue"].isdigit(), pid  # OTLP/JSON: 64-bit integers as strings
    denied = [x for x in recs if x["eventName"] == "denied"]
    assert len(denied) == 1, names
    a = _attrs(denied[0]["attributes"])
    assert a["agentbox.syscall"] == {"stringValue": "mount"}, a
    assert denied[0]["severityText"] == "WARN" and denied[0]["severityNumber"] == 13, denied
    end = _attrs([x for x in recs if x["eventName"] == "end"][0]["attributes"])
    assert end["agentbox.status"] == {"intValue": "0"}, end


def test_same_events_as_the_log(ctx):
    """With --log too: the collector gets exactly the log's events, in order."""
    c = _collector(ctx)
    log = os.path.join(ctx.scratch, "audit.jsonl")
    r = ctx.sandbox("for i in 1 2 3 4 5; do /bin/true; done",
                    extra_args=["--otlp", c.url + "/custom/logs", "--log", log])
    assert r.returncode == 0, describe(r)
    with open(log, encoding="utf-8") as f:
        lines = [json.loads(x) for x in f]
    recs = c.records()
    assert [x["eventName"] for x in recs] == [e["event"] for e in lines], (recs, lines)
    assert [json.loads(x["body"]["stringValue"]) for x in recs] == lines
    assert {p for p, _, _ in c.posts} == {"/custom/logs"}, c.posts


def test_collector_down_does_not_stop_the_run(ctx):
    """Nothing listens: the command runs and exits as usual; agentbox says how
    many events were lost and why."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    r = ctx.sandbox("echo hi; exit 3", extra_args=["--otlp", "http://127.0.0.1:%d" % port])
    assert r.returncode == 3 and r.stdout == "hi\n", describe(r)
    assert "--otlp:" in r.stderr and "did not reach the collector" in r.stderr, describe(r)
    assert "Connection refused" in r.stderr, describe(r)


def test_collector_refusal_and_garbage(ctx):
    """A collector that answers 500, one that answers bytes that are not HTTP
    and one whose answer never ends its head: each batch is counted as lost,
    with the reason; the run is not affected."""
    cases = [(dict(status=500), "HTTP 500"),
             (dict(raw=b"SSH-2.0-OpenSSH\r\n\r\n"), "not HTTP"),
             (dict(raw=b"HTTP/1.1 200 OK\r\n" + (b"X-Pad: " + b"a" * 900 + b"\r\n") * 10),
              "too l")]  # our 8 KiB buffer or the parser's limit, whichever first
    for kw, why in cases:
        c = _collector(ctx, **kw)
        r = ctx.sandbox("echo hi", extra_args=["--otlp", c.url])
        assert r.returncode == 0 and r.stdout == "hi\n", describe(r)
        assert c.posts, describe(r)
        assert "did not reach the collector" in r.stderr and why in r.stderr, (why, describe(r))


def test_bad_url_stops_before_the_run(ctx):
    """Exit 125 with the reason, nothing run, for URLs agentbox cannot use."""
    marker = os.path.join(ctx.ws, "ran")
    for url, why in [("https://127.0.0.1:4318", "https is not supported"),
                     ("ftp://x", "not an http:// URL"),
                     ("http://user@127.0.0.1", "user information"),
                     ("http://127.0.0.1:99999", "bad port"),
                     ("http://127.0.0.1/v1/logs?x=1", "query"),
                     ("http://", "no host"),
                     ("http://no-such-host.invalid", "cannot resolve")]:
        r = ctx.sandbox("touch %s" % marker, extra_args=["--otlp", url])
        assert r.returncode == 125 and why in r.stderr, (url, describe(r))
        assert not os.path.exists(marker), url
