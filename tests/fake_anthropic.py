"""A local Anthropic-compatible Messages API server for the Claude Code end-to-end test.

It answers every `POST /v1/messages` with one short assistant text, streamed (SSE) when the
request asks for it as Claude Code does, and records each request's raw body so a test can
read exactly what the agent sent to its model.

With a `responder`, a request that offers Claude Code's `StructuredOutput` tool (what
`claude -p --json-schema` sends) is answered by a call of that tool whose input is the
responder's answer to the request, with usage counted at four characters a token; the request
that returns the tool's result is answered with a short text. A `status` makes every request
fail with that HTTP status, as a provider refusing the key does.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class AnthropicRequest:
    path: str
    raw: bytes


STRUCTURED_OUTPUT_TOOL = "StructuredOutput"
Responder = Callable[[dict[str, Any]], dict[str, Any]]


class FakeAnthropic:
    def __init__(
        self, answer: str = "Noted.", responder: Responder | None = None, status: int = 0
    ) -> None:
        self.answer = answer
        self.responder = responder
        self.status = status
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
        if self.owner.status:
            refusal = {
                "type": "error",
                "error": {"type": "authentication_error", "message": "invalid x-api-key"},
            }
            self._send(self.owner.status, json.dumps(refusal).encode(), "application/json")
            return
        if self.owner.responder is not None and _offers_structured_output(request):
            self._answer_structured(request, len(raw))
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
        events: list[dict[str, Any]] = [
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

    def _answer_structured(self, request: dict[str, Any], request_bytes: int) -> None:
        """A call of the structured-output tool, or a closing text once its result is back."""
        assert self.owner.responder is not None
        if _returns_tool_result(request):
            block: dict[str, Any] = {"type": "text", "text": ""}
            delta: dict[str, Any] = {"type": "text_delta", "text": "Done."}
            stop, produced = "end_turn", "Done."
        else:
            produced = json.dumps(self.owner.responder(request))
            block = {
                "type": "tool_use",
                "id": f"toolu_{uuid.uuid4().hex[:24]}",
                "name": STRUCTURED_OUTPUT_TOOL,
                "input": {},
            }
            delta = {"type": "input_json_delta", "partial_json": produced}
            stop = "tool_use"
        message = {
            "id": f"msg_{uuid.uuid4().hex[:24]}",
            "type": "message",
            "role": "assistant",
            "model": request.get("model", "claude"),
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": max(1, request_bytes // 4), "output_tokens": 1},
        }
        events: list[dict[str, Any]] = [
            {"type": "message_start", "message": message},
            {"type": "content_block_start", "index": 0, "content_block": block},
            {"type": "content_block_delta", "index": 0, "delta": delta},
            {"type": "content_block_stop", "index": 0},
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {"output_tokens": max(1, len(produced) // 4)},
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


def _offers_structured_output(request: dict[str, Any]) -> bool:
    tools = request.get("tools") or []
    return any(tool.get("name") == STRUCTURED_OUTPUT_TOOL for tool in tools)


def _returns_tool_result(request: dict[str, Any]) -> bool:
    messages = request.get("messages") or []
    if not messages:
        return False
    content = messages[-1].get("content")
    return isinstance(content, list) and any(
        isinstance(part, dict) and part.get("type") == "tool_result" for part in content
    )
