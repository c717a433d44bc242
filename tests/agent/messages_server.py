"""A local HTTP server that speaks the Messages API with scripted replies.

The agent reaches it through the SDK's base URL, so the real anthropic client
sends real HTTP requests and parses real responses: nothing of ours is mocked.
Each POST /v1/messages takes the next item of the script:

- a dict: an assistant message (``message(...)`` fills id, model and usage);
- ``Fail(status, ...)``: an error response, optionally with retry-after;
- a callable: called with the request body (what the agent sent, tool results
  included), returning one of the above; scripts use it to echo attempt ids.

A request with ``"stream": true`` (Claude Code always asks so) gets the same message
as server-sent events, the way the Messages API streams it: ``message_start``, per
content block ``content_block_start`` / ``_delta`` (``text_delta`` or
``input_json_delta``) / ``_stop``, then ``message_delta`` with the stop reason and
``message_stop``.

Every request is recorded (headers and JSON body) for the tests to inspect.
"""

from __future__ import annotations

import itertools
import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

_ids = itertools.count(1)


def tool_use(name: str, arguments: Any, id: str | None = None) -> dict[str, Any]:
    """A tool_use content block."""
    return {"type": "tool_use", "id": id or f"toolu_{next(_ids):06d}", "name": name, "input": arguments}


def text(words: str) -> dict[str, Any]:
    """A text content block."""
    return {"type": "text", "text": words}


def message(*content: dict[str, Any], stop_reason: str | None = None, input_tokens: int = 1200,
            output_tokens: int = 300) -> dict[str, Any]:
    """An assistant message; stop_reason is tool_use when a block calls a tool, else end_turn."""
    if stop_reason is None:
        stop_reason = "tool_use" if any(b["type"] == "tool_use" for b in content) else "end_turn"
    return {"id": f"msg_{next(_ids):06d}", "type": "message", "role": "assistant", "model": "scripted",
            "content": list(content), "stop_reason": stop_reason, "stop_sequence": None,
            "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens}}


def stream_events(reply: dict[str, Any]) -> list[dict[str, Any]]:
    """The server-sent events that stream ``reply`` (a ``message(...)``), in order."""
    usage = reply.get("usage", {})
    start = {**reply, "content": [], "stop_reason": None, "stop_sequence": None,
             "usage": {**usage, "output_tokens": 1}}
    events: list[dict[str, Any]] = [{"type": "message_start", "message": start}]
    for index, block in enumerate(reply["content"]):
        if block["type"] == "tool_use":
            opening = {**block, "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        else:
            opening = {**block, "text": ""}
            delta = {"type": "text_delta", "text": block["text"]}
        events += [{"type": "content_block_start", "index": index, "content_block": opening},
                   {"type": "content_block_delta", "index": index, "delta": delta},
                   {"type": "content_block_stop", "index": index}]
    events += [{"type": "message_delta", "delta": {"stop_reason": reply["stop_reason"], "stop_sequence": None},
                "usage": {"output_tokens": usage.get("output_tokens", 1)}},
               {"type": "message_stop"}]
    return events


@dataclass
class Fail:
    """An error response: status, Messages-API error body, headers (e.g. retry-after)."""

    status: int
    kind: str = "api_error"
    text: str = "scripted failure"
    headers: dict[str, str] = field(default_factory=dict)


Item = dict | Fail | Callable[[dict], "dict | Fail"]


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


class MessagesServer:
    """``with MessagesServer(script) as server:`` then point the client at ``server.url``."""

    def __init__(self, script: list[Item] | None = None, *, repeat_last: bool = False):
        self.script: list[Item] = list(script or [])
        self.repeat_last = repeat_last
        self.received: list[Received] = []
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> "MessagesServer":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def tool_results(self, request: int) -> list[dict[str, Any]]:
        """The tool_result blocks of the last user turn of request number ``request``."""
        last = self.received[request].body["messages"][-1]
        return [b for b in last["content"] if isinstance(b, dict) and b.get("type") == "tool_result"]

    def _next(self, body: dict) -> dict | Fail:
        with self._lock:
            index = len(self.received) - 1
            if index < len(self.script):
                item = self.script[index]
            elif self.repeat_last and self.script:
                item = self.script[-1]
            else:
                return Fail(400, "invalid_request_error", f"the script has only {len(self.script)} replies")
        return item(body) if callable(item) else item

    def _handler(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - http.server's naming
                length = int(self.headers.get("content-length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                with server._lock:
                    server.received.append(Received(self.path, dict(self.headers), body))
                if not self.path.startswith("/v1/messages"):
                    return self._send(404, {"type": "error", "error": {"type": "not_found_error",
                                                                       "message": self.path}})
                reply = server._next(body)
                if isinstance(reply, Fail):
                    err = {"type": "error", "error": {"type": reply.kind, "message": reply.text}}
                    return self._send(reply.status, err, reply.headers)
                if body.get("stream"):
                    return self._stream(reply)
                return self._send(200, reply)

            def _stream(self, reply: dict):
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("cache-control", "no-cache")
                self.end_headers()  # HTTP/1.0: closing the connection ends the stream
                for event in stream_events(reply):
                    self.wfile.write(f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode())
                self.wfile.flush()

            def _send(self, status: int, payload: dict, headers: dict[str, str] | None = None):
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):  # quiet: pytest shows failures, not access logs
                pass

        return Handler
