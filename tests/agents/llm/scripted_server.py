"""A real OpenAI-compatible HTTP server on 127.0.0.1 with scripted replies (no mocks).

Requests are answered by the next scripted ``Action`` in the queue, or by ``responder(request)``
when the queue is empty. Every request is recorded (path, headers, JSON body, arrival time), so
tests can check what the client actually sent: retries, Retry-After waits, the structured-output
mode, the Authorization header.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable


@dataclass
class Request:
    path: str
    headers: dict[str, str]
    body: dict
    t: float

    @property
    def schema_name(self) -> str | None:
        rf = self.body.get("response_format") or {}
        if rf.get("type") == "json_schema":
            return rf["json_schema"]["name"]
        tools = self.body.get("tools") or []
        if tools:
            return tools[0]["function"]["name"]
        text = self.text
        for name in ("KernelProposals", "ServingProposals", "OrchestratorPick", "Narrative"):
            if f'"title":"{name}"' in text:
                return name
        return None

    @property
    def mode(self) -> str:
        rf = (self.body.get("response_format") or {}).get("type")
        if rf:
            return rf
        return "tools" if self.body.get("tools") else "text"

    @property
    def messages(self) -> list[dict]:
        return self.body.get("messages", [])

    @property
    def text(self) -> str:
        return "\n".join(str(m.get("content", "")) for m in self.messages)

    @property
    def max_tokens(self) -> int | None:
        return self.body.get("max_tokens", self.body.get("max_completion_tokens"))


@dataclass
class Action:
    """How to answer one request."""

    status: int = 200
    payload: Any = None  # dict/str: the structured answer (content, or tool-call arguments)
    raw_content: str | None = None  # exact content string (malformed JSON, prose)
    headers: dict[str, str] = field(default_factory=dict)
    error: dict | None = None
    delay_s: float = 0.0
    empty_choices: bool = False
    usage: tuple[int, int] | None | str = "auto"  # "auto": from the sizes; None: no usage field
    finish_reason: str = "stop"
    drop_connection: bool = False
    raw_body: bytes | None = None  # sent as-is (with status) instead of a completion
    content_type: str = "application/json"


def ok(payload: Any = None, **kw) -> Action:
    return Action(payload=payload, **kw)


def raw(content: str, **kw) -> Action:
    return Action(raw_content=content, **kw)


def status(code: int, message: str = "error", code_name: str | None = None, **kw) -> Action:
    return Action(status=code, error={"message": message, "type": "error", "code": code_name}, **kw)


class ScriptedServer:
    def __init__(self, responder: Callable[[Request], Action] | None = None, port: int = 0):
        self.script: deque[Action | None] = deque()
        self.responder = responder
        self.requests: list[Request] = []
        self.usage_sent: list[tuple[int, int]] = []
        self._conns: set = set()
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", port), self._handler())
        self._httpd.daemon_threads = True
        self.port = self._httpd.server_address[1]
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02},
                                        daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def push(self, *actions: Action | None) -> "ScriptedServer":
        self.script.extend(actions)
        return self

    def start(self) -> "ScriptedServer":
        self._thread.start()
        return self

    def stop(self) -> None:
        """Die: stop accepting connections, close the socket (new clients are refused) and cut
        every open keep-alive connection (a pooled connection must not outlive the server)."""
        self._httpd.shutdown()
        self._httpd.server_close()
        with self._lock:
            conns = list(self._conns)
        for sock in conns:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def __enter__(self) -> "ScriptedServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def chat_requests(self) -> list[Request]:
        return [r for r in self.requests if r.path.endswith("/chat/completions")]

    # --- HTTP -----------------------------------------------------------------------------
    def _next(self, req: Request) -> Action:
        with self._lock:
            if self.script:
                action = self.script.popleft()
                if action is not None:  # None in a script: let the responder answer this one
                    return action
        if self.responder is None:
            return status(500, "no scripted reply left")
        return self.responder(req)

    def _completion(self, req: Request, a: Action) -> dict:
        if a.empty_choices:
            choices: list = []
            content = ""
        else:
            if a.raw_content is not None:
                content = a.raw_content
            else:
                content = a.payload if isinstance(a.payload, str) else json.dumps(a.payload)
            msg: dict = {"role": "assistant", "content": content}
            if req.body.get("tools") and a.raw_content is None:
                name = req.body["tools"][0]["function"]["name"]
                msg = {"role": "assistant", "content": None, "tool_calls": [
                    {"id": "call_1", "type": "function", "function": {"name": name, "arguments": content}}]}
            choices = [{"index": 0, "message": msg, "finish_reason": a.finish_reason}]
        out = {"id": f"chatcmpl-{len(self.requests)}", "object": "chat.completion", "created": int(time.time()),
               "model": req.body.get("model", "scripted"), "choices": choices}
        if a.usage == "auto":
            p, c = len(json.dumps(req.messages)) // 4 + 1, len(content) // 4 + 1
        else:
            p, c = a.usage if a.usage else (None, None)
        if p is not None:
            out["usage"] = {"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c}
            with self._lock:
                self.usage_sent.append((p, c))
        return out

    def _handler(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # keep test output clean
                pass

            def setup(self):
                super().setup()
                with server._lock:
                    server._conns.add(self.connection)

            def finish(self):
                with server._lock:
                    server._conns.discard(self.connection)
                try:
                    super().finish()
                except OSError:
                    pass

            def _send(self, code: int, body: bytes, headers: dict[str, str],
                      content_type: str = "application/json") -> None:
                try:
                    self.send_response(code)
                    self.send_header("Content-Type", content_type)
                    self.send_header("Content-Length", str(len(body)))
                    for k, v in headers.items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout): nothing to do

            def do_GET(self):
                self._send(200, json.dumps({"object": "list", "data": [{"id": "scripted", "object": "model"}]}).encode(), {})

            def do_POST(self):
                n = int(self.headers.get("Content-Length", 0))
                data = self.rfile.read(n)
                try:
                    body = json.loads(data or b"{}")
                except json.JSONDecodeError:
                    body = {}
                req = Request(self.path, {k.lower(): v for k, v in self.headers.items()}, body, time.monotonic())
                with server._lock:
                    server.requests.append(req)
                a = server._next(req)
                if a.delay_s:
                    time.sleep(a.delay_s)
                if a.drop_connection:
                    self.close_connection = True
                    try:
                        self.connection.shutdown(2)
                    except OSError:
                        pass
                    return
                if a.raw_body is not None:
                    self._send(a.status, a.raw_body, a.headers, a.content_type)
                    return
                if a.status != 200:
                    self._send(a.status, json.dumps({"error": a.error or {"message": "error"}}).encode(), a.headers)
                    return
                self._send(200, json.dumps(server._completion(req, a)).encode(), a.headers)

        return Handler
