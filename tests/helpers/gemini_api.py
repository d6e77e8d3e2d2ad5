"""A scripted Gemini API (generateContent) on 127.0.0.1, for the real Gemini CLI.

Each request that offers tools takes the next answer of the script (the last
one repeats): "text:..." (a text turn) or "bash:COMMAND" (a
``run_shell_command`` call; the client runs it and asks again). The CLI's
side requests get what they expect: its model router asks for JSON (a
complexity score), anything else gets a short text. Streamed requests
(``:streamGenerateContent?alt=sse``) get server-sent events. Requests are
recorded. No model, no network.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from helpers.local_server import LocalServer, next_answer

USAGE = {"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15}
ROUTER = {"complexity_reasoning": "a scripted turn", "complexity_score": 1}


@dataclass
class GeminiAPI:
    script: list[str] = field(default_factory=lambda: ["text:done"])
    requests: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        api = self
        lock = threading.Lock()

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *_: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                request = json.loads(body or b"{}")
                config = request.get("generationConfig") or {}
                with lock:
                    api.requests.append(request)
                    if config.get("responseMimeType") == "application/json":
                        answer = "json"
                    elif request.get("tools"):
                        answer = next_answer(api.script)
                    else:
                        answer = "text:ok"
                if answer == "json":
                    parts: list[dict[str, Any]] = [{"text": json.dumps(ROUTER)}]
                elif answer.startswith("bash:"):
                    call = {"name": "run_shell_command", "args": {"command": answer[5:]}}
                    parts = [{"functionCall": call}]
                else:
                    parts = [{"text": answer.removeprefix("text:")}]
                chunk = {
                    "candidates": [
                        {
                            "content": {"parts": parts, "role": "model"},
                            "finishReason": "STOP",
                            "index": 0,
                        }
                    ],
                    "usageMetadata": USAGE,
                }
                data = json.dumps(chunk)
                self.send_response(200)
                if "stream" in self.path:
                    self.send_header("content-type", "text/event-stream")
                    self.end_headers()
                    self.wfile.write(f"data: {data}\n\n".encode())
                else:
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(data.encode())))
                    self.end_headers()
                    self.wfile.write(data.encode())
                self.wfile.flush()

        self.server = LocalServer(Handler)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.port}"

    def seen(self) -> str:
        """Everything the client sent, as one text to search."""
        return json.dumps(self.requests)

    def close(self) -> None:
        self.server.close()
