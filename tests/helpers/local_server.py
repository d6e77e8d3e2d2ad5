"""What the scripted APIs of the real agents share (messages_api.py,
responses_api.py, gemini_api.py): a threaded HTTP server on 127.0.0.1, the
next answer of a script, and server-sent events."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, BinaryIO, TypeVar

T = TypeVar("T")


class LocalServer:
    """``handler`` served on a free port of 127.0.0.1, in a thread of its own."""

    def __init__(self, handler: type[BaseHTTPRequestHandler]) -> None:
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    @property
    def port(self) -> int:
        return int(self.httpd.server_port)

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def next_answer(script: list[T]) -> T:
    """The script's next answer; the last one repeats."""
    return script.pop(0) if len(script) > 1 else script[0]


def write_events(out: BinaryIO, events: Iterable[tuple[str, dict[str, Any]]]) -> None:
    """Server-sent events, each named, with its JSON data."""
    for name, data in events:
        out.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
    out.flush()
