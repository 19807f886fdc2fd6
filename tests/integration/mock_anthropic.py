# SPDX-License-Identifier: MIT
"""A loopback HTTPS mock of the Anthropic Messages API (python3 stdlib + the
test CA of upstream.py), for the end-to-end tests of real harnesses.

It runs on the HOST side, in the test runner, on 127.0.0.1:<ephemeral> with
a leaf of upstream.session_ca() (names upstream.test and *.upstream.test, so
the sandbox reaches it as MOCK_HOST through the profile's network.hosts).

What it answers, as the real API does (HTTP/1.1, keep-alive, chunked SSE):

    POST /v1/messages               a scripted model (see Script): streamed as
                                    server-sent events (message_start,
                                    content_block_start/delta/stop with
                                    text_delta and input_json_delta, ping,
                                    message_delta with the stop_reason,
                                    message_stop) when "stream" is true, else
                                    one JSON message
    POST /v1/messages/count_tokens  {"input_tokens": N}
    GET  /v1/models[/ID]            a model list / one model
    anything else                   404 with an API error object

Every request is recorded exactly (method, target, header pairs, body bytes)
and can be inspected by the test: requests(), header_values(), everything().
Without the right x-api-key (or "Authorization: Bearer") a request gets the
API's 401 authentication_error, so a harness that never got the real key
cannot get past its first call.
"""

import http.server
import json
import os
import secrets
import socketserver
import ssl
import sys
import threading
import time
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

from upstream import server_ssl_context  # noqa: E402

MOCK_HOST = "anthropic.upstream.test"
DEFAULT_MODEL = "claude-sonnet-4-5-20250929"

MODELS = [
    ("claude-opus-4-1-20250805", "Claude Opus 4.1"),
    ("claude-sonnet-4-5-20250929", "Claude Sonnet 4.5"),
    ("claude-haiku-4-5-20251001", "Claude Haiku 4.5"),
    ("claude-3-5-haiku-20241022", "Claude Haiku 3.5"),
]


def _id(prefix):
    return prefix + secrets.token_hex(12)


# --------------------------------------------------------------------------
# the scripted model

def text_block(text):
    return {"type": "text", "text": text}


def tool_use_block(name, inp, tid=None):
    return {"type": "tool_use", "id": tid or _id("toolu_01"), "name": name, "input": inp}


def tool_results(body):
    """[(tool_use_id, text, is_error)] of every tool_result in the request's
    messages, in order."""
    out = []
    for m in body.get("messages") or []:
        c = m.get("content")
        if not isinstance(c, list):
            continue
        for b in c:
            if isinstance(b, dict) and b.get("type") == "tool_result":
                out.append((b.get("tool_use_id"), _flatten(b.get("content")),
                            bool(b.get("is_error"))))
    return out


def _flatten(content):
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(_flatten(x.get("text", "") if isinstance(x, dict) else x)
                         for x in content)
    return "" if content is None else str(content)


def tool_names(body):
    return [t.get("name") for t in body.get("tools") or [] if isinstance(t, dict)]


class Script:
    """A model that plays a fixed agent loop: `steps` is a list of turns,
    each a list of content blocks (text_block / tool_use_block); the turn
    played for a request is the number of tool_results already in its
    conversation (so retries and side requests do not advance it).  The
    last turn should be text only (stop_reason end_turn).

    Only requests that offer the tool named by `needs_tool` (the main agent
    loop) follow the script; any other request (titles, topic detection,
    summaries, quota probes) gets `side_text`.
    """

    def __init__(self, steps, needs_tool="Bash", side_text="OK"):
        self.steps = steps
        self.needs_tool = needs_tool
        self.side_text = side_text
        self.tool_ids = {}  # step index -> [tool_use ids]

    def reply(self, body):
        """-> (content blocks, stop_reason)"""
        if self.needs_tool and self.needs_tool not in tool_names(body):
            return [text_block(self.side_text)], "end_turn"
        n = len(tool_results(body))
        i = min(n, len(self.steps) - 1)
        # the same tool_use ids for the same step (the harness matches
        # results to ids; a retried request must see the same ones)
        blocks = []
        ids = self.tool_ids.setdefault(i, [])
        k = 0
        for b in self.steps[i]:
            b = dict(b)
            if b["type"] == "tool_use":
                if k >= len(ids):
                    ids.append(b.get("id") or _id("toolu_01"))
                b["id"] = ids[k]
                k += 1
            blocks.append(b)
        stop = "tool_use" if any(b["type"] == "tool_use" for b in blocks) else "end_turn"
        return blocks, stop


# --------------------------------------------------------------------------
# the server

class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "mock-anthropic"
    sys_version = ""

    def log_message(self, fmt, *args):
        pass

    def setup(self):
        self.request.settimeout(60)
        try:
            self.request.do_handshake()
        except (OSError, ssl.SSLError) as e:
            self.server.mock._note("handshake_failures", repr(e))
            raise
        super().setup()

    def _body(self):
        te = self.headers.get("Transfer-Encoding", "")
        if te.lower() == "chunked":
            out = bytearray()
            while True:
                line = self.rfile.readline(1100)
                size = int(line.split(b";", 1)[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline(8192) not in (b"\r\n", b""):
                        pass
                    return bytes(out)
                out += self.rfile.read(size)
                self.rfile.read(2)
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def _send_json(self, status, obj, extra=()):
        data = (json.dumps(obj) + "\n").encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("request-id", _id("req_"))
        for k, v in extra:
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def _error(self, status, etype, msg):
        self._send_json(status, {"type": "error", "error": {"type": etype, "message": msg},
                                 "request_id": _id("req_")})

    def _handle(self):
        mock = self.server.mock
        try:
            body = self._body()
        except (OSError, ValueError):
            self.close_connection = True
            return
        rec = {"method": self.command, "target": self.path,
               "headers": [(k.lower(), v) for k, v in self.headers.items()],
               "body": body, "time": time.monotonic()}
        split = urllib.parse.urlsplit(self.path)
        path = split.path.rstrip("/")
        try:
            rec["json"] = json.loads(body) if body else None
        except ValueError:
            rec["json"] = None
        mock._add(rec)
        if path.startswith("/v1/") and not mock.authorized(self.headers):
            rec["answer"] = 401
            return self._error(401, "authentication_error", "invalid x-api-key")
        if path == "/v1/messages" and self.command == "POST":
            return self._messages(rec)
        if path == "/v1/messages/count_tokens" and self.command == "POST":
            rec["answer"] = 200
            n = max(1, len(body) // 4)
            return self._send_json(200, {"input_tokens": n})
        if path == "/v1/models" and self.command == "GET":
            rec["answer"] = 200
            data = [{"type": "model", "id": m, "display_name": d,
                     "created_at": "2025-09-29T00:00:00Z"} for m, d in MODELS]
            return self._send_json(200, {"data": data, "has_more": False,
                                         "first_id": data[0]["id"], "last_id": data[-1]["id"]})
        if path.startswith("/v1/models/") and self.command == "GET":
            mid = path[len("/v1/models/"):]
            rec["answer"] = 200
            return self._send_json(200, {"type": "model", "id": mid, "display_name": mid,
                                         "created_at": "2025-09-29T00:00:00Z"})
        rec["answer"] = 404
        return self._error(404, "not_found_error", "Not found: %s %s" % (self.command, path))

    do_GET = do_POST = do_PUT = do_HEAD = do_DELETE = do_PATCH = do_OPTIONS = _handle

    def _messages(self, rec):
        mock = self.server.mock
        req = rec["json"]
        if not isinstance(req, dict) or not isinstance(req.get("messages"), list):
            rec["answer"] = 400
            return self._error(400, "invalid_request_error", "messages: field required")
        blocks, stop = mock.script.reply(req)
        rec["reply"] = {"blocks": blocks, "stop_reason": stop}
        model = req.get("model") or DEFAULT_MODEL
        usage_in = max(1, len(rec["body"]) // 4)
        out_tokens = sum(len(json.dumps(b)) // 4 + 1 for b in blocks)
        msg_id = _id("msg_01")
        rec["answer"] = 200
        if not req.get("stream"):
            return self._send_json(200, {
                "id": msg_id, "type": "message", "role": "assistant", "model": model,
                "content": blocks, "stop_reason": stop, "stop_sequence": None,
                "usage": {"input_tokens": usage_in, "output_tokens": out_tokens,
                          "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}})
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("request-id", _id("req_"))
        self.send_header("anthropic-organization-id", "00000000-0000-4000-8000-000000000000")
        self.end_headers()

        def ev(name, obj):
            data = ("event: %s\ndata: %s\n\n" % (name, json.dumps(obj))).encode()
            self.wfile.write(b"%x\r\n" % len(data) + data + b"\r\n")
            self.wfile.flush()

        ev("message_start", {"type": "message_start", "message": {
            "id": msg_id, "type": "message", "role": "assistant", "model": model,
            "content": [], "stop_reason": None, "stop_sequence": None,
            "usage": {"input_tokens": usage_in, "cache_creation_input_tokens": 0,
                      "cache_read_input_tokens": 0, "output_tokens": 1}}})
        ev("ping", {"type": "ping"})
        for i, b in enumerate(blocks):
            if b["type"] == "text":
                ev("content_block_start", {"type": "content_block_start", "index": i,
                                           "content_block": {"type": "text", "text": ""}})
                t = b["text"]
                for j in range(0, len(t), 24) or [0]:
                    ev("content_block_delta", {"type": "content_block_delta", "index": i,
                                               "delta": {"type": "text_delta",
                                                         "text": t[j:j + 24]}})
            else:
                ev("content_block_start", {"type": "content_block_start", "index": i,
                                           "content_block": {"type": "tool_use", "id": b["id"],
                                                             "name": b["name"], "input": {}}})
                js = json.dumps(b["input"])
                for j in range(0, len(js), 40):
                    ev("content_block_delta", {"type": "content_block_delta", "index": i,
                                               "delta": {"type": "input_json_delta",
                                                         "partial_json": js[j:j + 40]}})
            ev("content_block_stop", {"type": "content_block_stop", "index": i})
        ev("message_delta", {"type": "message_delta",
                             "delta": {"stop_reason": stop, "stop_sequence": None},
                             "usage": {"output_tokens": out_tokens}})
        ev("message_stop", {"type": "message_stop"})
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


class _Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def get_request(self):
        sock, addr = self.socket.accept()
        self.mock._note("conns", None)
        return self.sslctx.wrap_socket(sock, server_side=True,
                                       do_handshake_on_connect=False), addr

    def handle_error(self, request, client_address):
        pass


class MockAnthropic:
    """The mock on 127.0.0.1:self.port.  keys: the API keys it accepts (the
    real values the proxy must put in); script: a Script."""

    def __init__(self, keys, script, on_cleanup=None):
        self.keys = set(keys)
        self.script = script
        self.lock = threading.Lock()
        self.recs = []
        self.notes = {}
        self.conns = 0
        self.srv = _Server(("127.0.0.1", 0), _Handler, bind_and_activate=True)
        self.srv.mock = self
        self.srv.sslctx = server_ssl_context()
        self.port = self.srv.server_address[1]
        self.thread = threading.Thread(target=self.srv.serve_forever,
                                       kwargs={"poll_interval": 0.1}, daemon=True,
                                       name="abit-mock-anthropic")
        self.thread.start()
        if on_cleanup:
            on_cleanup(self.stop)

    def stop(self):
        self.srv.shutdown()
        self.srv.server_close()

    def _note(self, what, value):
        with self.lock:
            if what == "conns":
                self.conns += 1
            else:
                self.notes.setdefault(what, []).append(value)

    def _add(self, rec):
        with self.lock:
            self.recs.append(rec)

    def authorized(self, headers):
        k = headers.get("x-api-key")
        if k is not None:
            return k in self.keys
        auth = headers.get("Authorization", "")
        return auth.startswith("Bearer ") and auth[7:] in self.keys

    # -- what the test inspects --
    def requests(self, path=None, method=None):
        with self.lock:
            out = list(self.recs)
        if path is not None:
            out = [r for r in out if urllib.parse.urlsplit(r["target"]).path.rstrip("/") == path]
        if method is not None:
            out = [r for r in out if r["method"] == method]
        return out

    def messages(self):
        """The /v1/messages requests that followed the script (the agent loop)."""
        return [r for r in self.requests("/v1/messages", "POST")
                if isinstance(r.get("json"), dict) and
                (not self.script.needs_tool or self.script.needs_tool in tool_names(r["json"]))]

    @staticmethod
    def header(rec, name):
        return [v for k, v in rec["headers"] if k == name.lower()]

    def everything(self):
        """Every byte received (targets, headers, bodies) as text."""
        with self.lock:
            parts = []
            for r in self.recs:
                parts.append(r["target"])
                parts += ["%s: %s" % kv for kv in r["headers"]]
                parts.append(r["body"].decode("latin-1"))
        return "\n".join(parts)

    def summary(self, n=30):
        with self.lock:
            rs = list(self.recs[-n:])
        lines = ["mock: %d connections, %d requests, notes %s" % (
            self.conns, len(self.recs), {k: v[-3:] for k, v in self.notes.items()})]
        for r in rs:
            js = r.get("json") if isinstance(r.get("json"), dict) else {}
            lines.append("  %s %s -> %s (model %s, tools %d, tool_results %d, stop %s)" % (
                r["method"], r["target"], r.get("answer"), js.get("model"),
                len(js.get("tools") or []), len(tool_results(js)) if js else 0,
                (r.get("reply") or {}).get("stop_reason")))
        return "\n".join(lines)


if __name__ == "__main__":
    # manual exploration: python3 mock_anthropic.py KEY  (prints the port,
    # then a line per request; Ctrl-C to stop)
    key = sys.argv[1] if len(sys.argv) > 1 else "sk-ant-api03-" + "x" * 95
    steps = [[text_block("Let me check."), tool_use_block("Bash", {
        "command": "echo hello > mock-was-here.txt && ls", "description": "create a file"})],
        [text_block("Done: MOCK-FINAL-ANSWER")]]
    m = MockAnthropic([key], Script(steps))
    print("port", m.port, flush=True)
    seen = 0
    try:
        while True:
            time.sleep(0.5)
            rs = m.requests()
            for r in rs[seen:]:
                print(r["method"], r["target"], r.get("answer"), dict(r["headers"]).get("x-api-key", "")[:16],
                      len(r["body"]), flush=True)
                print("   headers:", [k for k, _ in r["headers"]], flush=True)
            seen = len(rs)
    except KeyboardInterrupt:
        pass
