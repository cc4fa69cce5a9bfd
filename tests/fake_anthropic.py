"""A local Anthropic-compatible Messages API server for the Claude Code end-to-end test.

It answers every `POST /v1/messages` with one short assistant text, streamed (SSE) when the
request asks for it as Claude Code does, and records each request's raw body so a test can
read exactly what the agent sent to its model.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class AnthropicRequest:
    path: str
    raw: bytes


class FakeAnthropic:
    def __init__(self, answer: str = "Noted.") -> None:
        self.answer = answer
        self._lock = threading.Lock()
        self._log: list[AnthropicRequest] = []
        handler = type("_Bound", (_Handler,), {"owner": self})
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def log(self) -> list[AnthropicRequest]:
        with self._lock:
            return list(self._log)

    def messages(self) -> list[AnthropicRequest]:
        return [r for r in self.log if r.path.split("?")[0] == "/v1/messages"]

    def record(self, request: AnthropicRequest) -> None:
        with self._lock:
            self._log.append(request)

    def __enter__(self) -> FakeAnthropic:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


class _Handler(BaseHTTPRequestHandler):
    owner: FakeAnthropic
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self._send(200, b'{"data": [], "has_more": false}', "application/json")

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.owner.record(AnthropicRequest(self.path, raw))
        try:
            request = json.loads(raw)
        except ValueError:
            request = {}
        if self.path.split("?")[0] != "/v1/messages":
            self._send(200, b'{"input_tokens": 10}', "application/json")
            return
        message = {
            "id": "msg_fake",
            "type": "message",
            "role": "assistant",
            "model": request.get("model", "claude"),
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 1},
        }
        if not request.get("stream"):
            whole = {**message, "content": [{"type": "text", "text": self.owner.answer}]}
            self._send(
                200, json.dumps({**whole, "stop_reason": "end_turn"}).encode(), "application/json"
            )
            return
        events = [
            {"type": "message_start", "message": message},
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": ""},
            },
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": self.owner.answer},
            },
            {"type": "content_block_stop", "index": 0},
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                "usage": {"output_tokens": 2},
            },
            {"type": "message_stop"},
        ]
        data = b"".join(
            f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode() for event in events
        )
        self._send(200, data, "text/event-stream")

    def _send(self, status: int, data: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(data)
