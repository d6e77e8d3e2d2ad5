"""A scripted OpenAI Responses API on 127.0.0.1, for the real Codex CLI.

Each POST to /v1/responses takes the next answer of the script (the last one
repeats) and streams it as server-sent events: "text:..." (an assistant
message) or "bash:COMMAND" (a shell command). Codex 0.171.0 offers its
shell as a nested tool of one ``exec`` tool that runs JavaScript, so a
command is an ``exec`` call of ``tools.exec_command({cmd})``; Codex's hooks
see it as a ``Bash`` call. Requests are recorded. No model, no network.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from helpers.local_server import LocalServer, next_answer, write_events

USAGE = {
    "input_tokens": 10,
    "output_tokens": 5,
    "total_tokens": 15,
    "input_tokens_details": {"cached_tokens": 0},
    "output_tokens_details": {"reasoning_tokens": 0},
}


@dataclass
class ResponsesAPI:
    script: list[str] = field(default_factory=lambda: ["text:done"])
    requests: list[dict[str, Any]] = field(default_factory=list)
    calls: int = 0

    def __post_init__(self) -> None:
        api = self
        lock = threading.Lock()

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *_: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with lock:
                    api.requests.append(json.loads(body or b"{}"))
                    answer = next_answer(api.script)
                    api.calls += 1
                    n = api.calls
                if answer.startswith("bash:"):
                    command = json.dumps(answer.removeprefix("bash:"))
                    js = f"text(JSON.stringify(await tools.exec_command({{cmd: {command}}})));"
                    item = {
                        "type": "custom_tool_call",
                        "id": f"ctc_{n}",
                        "call_id": f"call_{n}",
                        "name": "exec",
                        "status": "completed",
                        "input": js,
                    }
                else:
                    item = {
                        "type": "message",
                        "role": "assistant",
                        "id": f"msg_{n}",
                        "content": [{"type": "output_text", "text": answer.removeprefix("text:")}],
                    }
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.end_headers()
                events = [
                    ("response.created", {"response": {"id": f"resp_{n}"}}),
                    ("response.output_item.done", {"item": item, "output_index": 0}),
                    ("response.completed", {"response": {"id": f"resp_{n}", "usage": USAGE}}),
                ]
                write_events(self.wfile, [(kind, {"type": kind, **data}) for kind, data in events])

        self.server = LocalServer(Handler)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.port}/v1"

    def seen(self) -> str:
        """Everything the client sent, as one text to search."""
        return json.dumps(self.requests)

    def close(self) -> None:
        self.server.close()
