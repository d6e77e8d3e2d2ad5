"""A scripted Anthropic Messages API on 127.0.0.1, for the real Claude Code CLI.

Each POST to /v1/messages takes the next answer of the script (the last one
repeats): an HTTP error as the API sends it (a 429 with its rate-limit
headers, a 529 overloaded, a 401), or a short text turn. Requests are
recorded. No model, no network.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from helpers.local_server import LocalServer, next_answer, write_events

ERRORS: dict[int, tuple[str, str]] = {
    429: (
        "rate_limit_error",
        "This request would exceed your account's rate limit. Please try again later.",
    ),
    529: ("overloaded_error", "Overloaded"),
    500: ("api_error", "Internal server error"),
    401: ("authentication_error", "invalid x-api-key"),
}


@dataclass
class MessagesAPI:
    #: answers in turn: an HTTP status (an error), "text:..." (a text turn),
    #: "bash:COMMAND" (a Bash tool call; the client runs it and asks again), or
    #: "tool:NAME:{json input}" (any other tool call)
    script: list[int | str] = field(default_factory=lambda: ["text:done"])
    requests: list[dict[str, Any]] = field(default_factory=list)
    calls: int = 0

    def __post_init__(self) -> None:
        api = self
        lock = threading.Lock()

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with lock:
                    api.requests.append({"path": self.path, "body": body})
                    answer = next_answer(api.script)
                request = json.loads(body or b"{}")
                if isinstance(answer, int):
                    self.error(answer)
                elif answer.startswith(("bash:", "tool:")) and request.get("tools"):
                    if answer.startswith("bash:"):
                        self.tool_use("Bash", {"command": answer.removeprefix("bash:")}, request)
                    else:  # tool:NAME:{json input}
                        name, _, given = answer.removeprefix("tool:").partition(":")
                        self.tool_use(name, json.loads(given), request)
                elif answer.startswith(("bash:", "tool:")):  # a side request: plain text
                    with lock:
                        api.script.insert(0, answer)
                    self.text("ok", request)
                else:
                    self.text(answer.removeprefix("text:"), request)

            def error(self, status: int) -> None:
                kind, message = ERRORS[status]
                payload = json.dumps({"type": "error", "error": {"type": kind, "message": message}})
                self.send_response(status)
                self.send_header("content-type", "application/json")
                if status == 429:
                    self.send_header("retry-after", "3600")
                    self.send_header("anthropic-ratelimit-requests-remaining", "0")
                self.send_header("content-length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload.encode())

            def text(self, text: str, request: dict[str, Any]) -> None:
                message = {
                    "id": "msg_standin",
                    "type": "message",
                    "role": "assistant",
                    "model": request.get("model", "claude-standin"),
                    "content": [{"type": "text", "text": text}],
                    "stop_reason": "end_turn",
                    "stop_sequence": None,
                    "usage": {"input_tokens": 10, "output_tokens": 5},
                }
                if request.get("stream"):
                    self.stream(message, text)
                    return
                payload = json.dumps(message).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def tool_use(
                self, name: str, tool_input: dict[str, Any], request: dict[str, Any]
            ) -> None:
                api.calls += 1
                block = {
                    "type": "tool_use",
                    "id": f"toolu_{api.calls:04d}",
                    "name": name,
                    "input": {},
                }
                message = {
                    "id": f"msg_tool_{api.calls}",
                    "type": "message",
                    "role": "assistant",
                    "model": request.get("model", "claude-standin"),
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {"input_tokens": 10, "output_tokens": 5},
                }
                delta = {"type": "input_json_delta", "partial_json": json.dumps(tool_input)}
                self.events(message, block, delta, "tool_use")

            def stream(self, message: dict[str, Any], text: str) -> None:
                block = {"type": "text", "text": ""}
                delta = {"type": "text_delta", "text": text}
                self.events({**message, "content": []}, block, delta, "end_turn")

            def events(
                self, start: dict[str, Any], block: dict[str, Any], delta: dict[str, Any], stop: str
            ) -> None:
                events = [
                    (
                        "message_start",
                        {"type": "message_start", "message": {**start, "stop_reason": None}},
                    ),
                    (
                        "content_block_start",
                        {"type": "content_block_start", "index": 0, "content_block": block},
                    ),
                    (
                        "content_block_delta",
                        {"type": "content_block_delta", "index": 0, "delta": delta},
                    ),
                    ("content_block_stop", {"type": "content_block_stop", "index": 0}),
                    (
                        "message_delta",
                        {
                            "type": "message_delta",
                            "delta": {"stop_reason": stop, "stop_sequence": None},
                            "usage": {"output_tokens": 5},
                        },
                    ),
                    ("message_stop", {"type": "message_stop"}),
                ]
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("cache-control", "no-cache")
                self.end_headers()
                write_events(self.wfile, events)

            def do_GET(self) -> None:
                self.send_response(404)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.server = LocalServer(Handler)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.port}"

    def close(self) -> None:
        self.server.close()
