# SPDX-License-Identifier: MIT
"""A loopback HTTPS mock of the OpenAI Responses API as `codex exec` uses it
(python3 stdlib + the openssl CLI; host side of the sandbox, in the runner).

Codex talks to https://api.openai.com/v1/responses in two ways, and the mock
answers both:

  * WebSocket (its default for the OpenAI provider): `GET /v1/responses` with
    `Upgrade: websocket` and `Authorization: Bearer KEY`; after the 101, every
    client text frame is one JSON request {"type": "response.create", ...the
    Responses request body...} and the server answers with one text frame
    per stream event (the same JSON objects as the SSE `data:` lines), the
    last one `response.completed`.  The connection is reused across turns.
    The mock never negotiates permessage-deflate, so frames are plain.
  * HTTP + server-sent events (codex's fallback): `POST /v1/responses` with
    a JSON body, answered with `text/event-stream`.

Both go through one Scenario, which looks at a request body and returns the
events to stream.  ShellScenario is the one the harness test uses: the first
turn answers with a custom tool call of Codex's code-mode tool `exec` whose
JavaScript runs `tools.exec_command({cmd: ...})`, i.e. a real shell command
in the workspace; when the next request carries that call's output, it
answers with a final assistant message.

MockOpenAI records everything it receives (headers of every HTTP request
including the WebSocket upgrades, every request body and WebSocket message)
and everything it sends back, so a test can assert where the key went.

The server presents a certificate for api.openai.com (also *.openai.com,
chatgpt.com, and 127.0.0.1 for debugging on the host) issued by the
integration tests' throw-away CA (upstream.session_ca()), so a profile maps
api.openai.com to 127.0.0.1:PORT under network.hosts, names that CA under
network.ca_file, and nothing reaches the real host.  refuse_websocket=True
answers the upgrade with 426, which makes codex fall back to HTTP at once.
The ChatGPT backend's Responses path (/backend-api/codex/responses, a
ChatGPT login) is served like /v1/responses; any other request goes to the
test's `routes` callable first (the token endpoint, account checks).
"""

import atexit
import base64
import gzip
import hashlib
import json
import os
import shutil
import socketserver
import ssl
import struct
import subprocess
import tempfile
import threading
import uuid
import zlib
import http.server

from upstream import session_ca

API_HOST = "api.openai.com"
# the Responses API: the OpenAI API's, and the ChatGPT backend's (a ChatGPT login)
RESPONSES_PATHS = ("/v1/responses", "/backend-api/codex/responses")
WS_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

_LEAF = None
_LEAF_LOCK = threading.Lock()


def openai_leaf():
    """{'cert', 'key', 'ca'}: a leaf for api.openai.com signed by the tests' CA
    (made once per runner process, in its own directory removed at exit)."""
    global _LEAF
    with _LEAF_LOCK:
        if _LEAF is not None:
            return _LEAF
        ca = session_ca()
        d = tempfile.mkdtemp(prefix="abit-openai-leaf-")
        atexit.register(shutil.rmtree, d, True)

        def ossl(args):
            r = subprocess.run(["openssl"] + args, cwd=d, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, timeout=60)
            if r.returncode != 0:
                raise RuntimeError("openssl %s: %s%s" % (" ".join(args), r.stdout, r.stderr))

        ossl(["req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
              "-nodes", "-keyout", "leaf.key", "-out", "leaf.csr", "-subj", "/CN=" + API_HOST])
        with open(os.path.join(d, "leaf.ext"), "w") as f:
            f.write("basicConstraints=critical,CA:FALSE\n"
                    "keyUsage=critical,digitalSignature\n"
                    "extendedKeyUsage=serverAuth\n"
                    "subjectKeyIdentifier=hash\n"
                    "authorityKeyIdentifier=keyid\n"
                    "subjectAltName=DNS:%s,DNS:*.openai.com,DNS:chatgpt.com,"
                    "IP:127.0.0.1\n" % API_HOST)
        ossl(["x509", "-req", "-in", "leaf.csr", "-CA", ca["ca"], "-CAkey", ca["ca_key"],
              "-set_serial", "0x%x" % int.from_bytes(os.urandom(8), "big"),
              "-out", "leaf.pem", "-days", "3", "-sha256", "-extfile", "leaf.ext"])
        _LEAF = {"cert": os.path.join(d, "leaf.pem"), "key": os.path.join(d, "leaf.key"),
                 "ca": ca["ca"]}
        return _LEAF


# ---------------------------------------------------------------- stream events

def ev_created(resp_id):
    return {"type": "response.created", "response": {"id": resp_id}}


def ev_completed(resp_id):
    return {"type": "response.completed",
            "response": {"id": resp_id,
                         "usage": {"input_tokens": 10, "input_tokens_details": None,
                                   "output_tokens": 5, "output_tokens_details": None,
                                   "total_tokens": 15}}}


def ev_message(msg_id, text):
    return {"type": "response.output_item.done",
            "item": {"type": "message", "role": "assistant", "id": msg_id,
                     "content": [{"type": "output_text", "text": text}]}}


def ev_custom_tool_call(call_id, name, tool_input):
    return {"type": "response.output_item.done",
            "item": {"type": "custom_tool_call", "id": "ctc_" + call_id, "call_id": call_id,
                     "name": name, "input": tool_input, "status": "completed"}}


def code_mode_shell(cmd):
    """The input of Codex's code-mode `exec` tool that runs one shell command
    through the nested exec_command tool and returns its result as text."""
    return ("const r = await tools.exec_command(%s);\n"
            "text(JSON.stringify(r));\n" % json.dumps({"cmd": cmd, "yield_time_ms": 20000}))


def input_items(body):
    items = body.get("input")
    return items if isinstance(items, list) else []


def tool_outputs(body):
    """{call_id: output text} of the tool outputs in a request body."""
    out = {}
    for it in input_items(body):
        if not isinstance(it, dict):
            continue
        if it.get("type") in ("custom_tool_call_output", "function_call_output"):
            o = it.get("output")
            if not isinstance(o, str):
                o = json.dumps(o)
            out[it.get("call_id")] = o
    return out


def user_texts(body):
    texts = []
    for it in input_items(body):
        if isinstance(it, dict) and it.get("type") == "message" and it.get("role") == "user":
            for c in it.get("content") or []:
                if isinstance(c, dict) and isinstance(c.get("text"), str):
                    texts.append(c["text"])
    return texts


class ShellScenario:
    """Turn 1 (the prompt carries `marker`): a code-mode tool call that runs
    `cmd`; turn 2 (the request carries that call's output): `final` as the
    assistant's message.  Any other request (a prewarm, a side request) gets
    an empty completed response or a short message."""

    def __init__(self, cmd, final, marker):
        self.cmd = cmd
        self.final = final
        self.marker = marker
        self.call_id = "call_" + uuid.uuid4().hex[:16]
        self.lock = threading.Lock()
        self.tool_calls_sent = 0
        self.finals_sent = 0
        self.tool_output = None      # what codex sent back for our call

    def respond(self, body):
        rid = "resp_" + uuid.uuid4().hex[:16]
        if body.get("generate") is False:             # a WebSocket prewarm
            return [ev_created(rid), ev_completed(rid)]
        outs = tool_outputs(body)
        with self.lock:
            if self.call_id in outs:
                self.tool_output = outs[self.call_id]
                self.finals_sent += 1
                return [ev_created(rid), ev_message("msg_" + rid, self.final), ev_completed(rid)]
            if any(self.marker in t for t in user_texts(body)) and self.tool_calls_sent == 0:
                self.tool_calls_sent += 1
                return [ev_created(rid),
                        ev_custom_tool_call(self.call_id, "exec", code_mode_shell(self.cmd)),
                        ev_completed(rid)]
        return [ev_created(rid), ev_message("msg_" + rid, "ok"), ev_completed(rid)]


# ---------------------------------------------------------------- the server

class _WsClosed(Exception):
    pass


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "mock-openai"
    sys_version = ""

    def log_message(self, fmt, *args):
        pass

    def setup(self):
        self.request.settimeout(self.server.mock.conn_timeout)
        try:
            self.request.do_handshake()
        except (OSError, ssl.SSLError) as e:
            self.server.mock._note("handshake_failures", repr(e))
            raise
        super().setup()

    # -- helpers --
    def _body(self):
        n = int(self.headers.get("Content-Length") or 0)
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            data = bytearray()
            while True:
                size = int(self.rfile.readline(1100).split(b";")[0].strip(), 16)
                if size == 0:
                    while self.rfile.readline(8192) not in (b"\r\n", b""):
                        pass
                    break
                data += self._read_exact(size)
                self._read_exact(2)
            raw = bytes(data)
        else:
            raw = self._read_exact(n) if n else b""
        enc = (self.headers.get("Content-Encoding") or "").lower()
        if enc == "gzip":
            return raw, gzip.decompress(raw)
        if enc in ("deflate",):
            return raw, zlib.decompress(raw)
        if enc and enc != "identity":
            return raw, None                      # zstd &c.: recorded, not decoded
        return raw, raw

    def _send(self, status, body, ctype="application/json", extra=()):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in extra:
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)
        self.server.mock._sent(body)

    def _record(self, transport):
        rec = {"transport": transport, "method": self.command, "path": self.path,
               "headers": [(k.lower(), v) for k, v in self.headers.items()],
               "body": b"", "ws": [], "status": None}
        self.server.mock._add(rec)
        return rec

    # -- HTTP --
    def do_GET(self):
        if self.headers.get("Upgrade", "").lower() == "websocket":
            return self._websocket()
        rec = self._record("http")
        if self._route(rec, b""):
            return
        rec["status"] = 404
        self._send(404, b'{"error":{"message":"not found in the mock",'
                        b'"type":"invalid_request_error"}}')

    def _route(self, rec, body):
        """The test's own answers (MockOpenAI(routes=...)): True if sent."""
        routes = self.server.mock.routes
        got = routes(self.headers.get("Host", ""), self.command, self.path,
                     dict((k.lower(), v) for k, v in self.headers.items()), body) \
            if routes else None
        if got is None:
            return False
        rec["status"], data = got
        self._send(rec["status"], data)
        return True

    def do_POST(self):
        rec = self._record("http")
        raw, body = self._body()
        rec["body"] = raw
        path = self.path.split("?", 1)[0]
        if path not in RESPONSES_PATHS and body is not None and self._route(rec, body):
            return
        if path not in RESPONSES_PATHS or body is None:
            rec["status"] = 404 if body is not None else 415
            return self._send(rec["status"], b'{"error":{"message":"unsupported by the mock"}}')
        try:
            req = json.loads(body)
        except ValueError as e:
            rec["error"] = "%s (%d bytes, Content-Length %s)" % (
                e, len(body), self.headers.get("Content-Length"))
            rec["status"] = 400
            return self._send(400, b'{"error":{"message":"bad json"}}')
        rec["json"] = req
        events = self.server.mock.scenario.respond(req)
        out = b"".join(b"event: %s\ndata: %s\n\n" % (e["type"].encode(), json.dumps(e).encode())
                       for e in events)
        rec["status"] = 200
        self._send(200, out, "text/event-stream", [("Cache-Control", "no-cache")])

    do_PUT = do_DELETE = do_PATCH = do_POST

    # -- WebSocket (RFC 6455, server side, no extensions) --
    def _websocket(self):
        rec = self._record("ws")
        key = self.headers.get("Sec-WebSocket-Key", "")
        accept = base64.b64encode(hashlib.sha1(key.encode() + WS_GUID).digest()).decode()
        if self.server.mock.refuse_websocket:
            rec["status"] = 426
            return self._send(426, b'{"error":{"message":"websocket refused by the mock"}}')
        rec["status"] = 101
        self.send_response(101)
        self.send_header("Upgrade", "websocket")
        self.send_header("Connection", "Upgrade")
        self.send_header("Sec-WebSocket-Accept", accept)
        self.end_headers()
        self.wfile.flush()
        self.close_connection = True
        try:
            while True:
                op, payload = self._ws_read()
                if op == 0x8:                                  # close
                    self._ws_write(0x8, payload[:2])
                    return
                if op == 0x9:                                  # ping
                    self._ws_write(0xA, payload)
                    continue
                if op != 0x1:
                    continue
                rec["ws"].append(payload)
                try:
                    msg = json.loads(payload)
                except ValueError:
                    continue
                if not isinstance(msg, dict) or msg.get("type") != "response.create":
                    continue                                   # response.processed &c.
                for e in self.server.mock.scenario.respond(msg):
                    data = json.dumps(e).encode()
                    self._ws_write(0x1, data)
                    self.server.mock._sent(data)
        except (_WsClosed, OSError, ssl.SSLError, ValueError):
            return

    def _read_exact(self, n):
        """n bytes (a buffered read of a TLS socket may come back short)."""
        data = bytearray()
        while len(data) < n:
            d = self.rfile.read1(n - len(data))
            if not d:
                raise _WsClosed()
            data += d
        return bytes(data)

    def _ws_read(self):
        """One whole message: (opcode, payload), continuation frames joined."""
        op0, buf = None, b""
        while True:
            b1, b2 = self._read_exact(2)
            fin, op = b1 & 0x80, b1 & 0x0F
            if b1 & 0x70:
                raise _WsClosed()                              # no extension was agreed
            n = b2 & 0x7F
            if n == 126:
                n = struct.unpack(">H", self._read_exact(2))[0]
            elif n == 127:
                n = struct.unpack(">Q", self._read_exact(8))[0]
            if n > (64 << 20):
                raise _WsClosed()
            mask = self._read_exact(4) if b2 & 0x80 else b"\0\0\0\0"
            data = bytearray(self._read_exact(n))
            for i in range(len(data)):
                data[i] ^= mask[i & 3]
            if op >= 0x8:                                      # control frames stand alone
                return op, bytes(data)
            if op != 0:
                op0 = op
            buf += bytes(data)
            if fin:
                return op0, buf

    def _ws_write(self, op, payload):
        n = len(payload)
        if n < 126:
            head = struct.pack(">BB", 0x80 | op, n)
        elif n < 65536:
            head = struct.pack(">BBH", 0x80 | op, 126, n)
        else:
            head = struct.pack(">BBQ", 0x80 | op, 127, n)
        self.wfile.write(head + payload)
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


class MockOpenAI:
    """The mock on 127.0.0.1:<ephemeral>; stopped through ctx.on_cleanup.

    Attributes: port, ca_file (the CA that issued its certificate, for
    network.ca_file), recs (one dict per HTTP request: transport "http" or
    "ws", method, path, headers [(lower name, value)], body bytes, ws [the
    client's WebSocket messages], status), scenario."""

    def __init__(self, ctx, scenario, refuse_websocket=False, conn_timeout=60, routes=None):
        leaf = openai_leaf()
        self.scenario = scenario
        self.routes = routes    # (host, method, path, headers, body) -> (status, bytes) | None
        self.refuse_websocket = refuse_websocket
        self.conn_timeout = conn_timeout
        self.ca_file = leaf["ca"]
        self.lock = threading.Lock()
        self.recs = []
        self.sent = []
        self.notes = {}
        self.conns = 0
        sctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        sctx.load_cert_chain(leaf["cert"], leaf["key"])
        sctx.set_alpn_protocols(["http/1.1"])
        self.srv = _Server(("127.0.0.1", 0), _Handler, bind_and_activate=True)
        self.srv.mock = self
        self.srv.sslctx = sctx
        self.port = self.srv.server_address[1]
        self.thread = threading.Thread(target=self.srv.serve_forever,
                                       kwargs={"poll_interval": 0.1}, daemon=True,
                                       name="abit-mock-openai")
        self.thread.start()
        ctx.on_cleanup(self.stop)

    def stop(self):
        self.srv.shutdown()
        self.srv.server_close()

    def _add(self, rec):
        with self.lock:
            self.recs.append(rec)

    def _sent(self, data):
        with self.lock:
            self.sent.append(bytes(data))

    def _note(self, what, value):
        with self.lock:
            if what == "conns":
                self.conns += 1
            else:
                self.notes.setdefault(what, []).append(value)

    # -- what the tests look at --
    def records(self):
        with self.lock:
            return list(self.recs)

    def header_values(self, name):
        """The values of header `name` in every HTTP request, in order."""
        return [dict(r["headers"]).get(name.lower()) for r in self.records()]

    def received_text(self):
        """Everything received: request lines, headers, bodies and WebSocket
        messages, as text (latin-1), for "never arrived" checks."""
        parts = []
        for r in self.records():
            parts.append("%s %s" % (r["method"], r["path"]))
            parts += ["%s: %s" % kv for kv in r["headers"]]
            parts.append(bytes(r["body"]).decode("latin-1"))
            parts += [m.decode("latin-1") for m in r["ws"]]
        return "\n".join(parts)

    def received_payloads(self):
        """Request bodies and WebSocket messages only (no headers)."""
        out = []
        for r in self.records():
            if r["body"]:
                out.append(bytes(r["body"]).decode("latin-1"))
            out += [m.decode("latin-1") for m in r["ws"]]
        return out

    def sent_text(self):
        with self.lock:
            return b"\n".join(self.sent).decode("latin-1")

    def summary(self):
        recs = self.records()
        return "mock: %d conns, %d requests: %s; notes %s; tool calls %d, finals %d" % (
            self.conns, len(recs),
            ["%s %s %s -> %s (%d ws msgs)" % (r["transport"], r["method"], r["path"],
                                             r["status"], len(r["ws"])) for r in recs][-20:],
            {k: v[-3:] for k, v in self.notes.items()},
            self.scenario.tool_calls_sent, self.scenario.finals_sent)
