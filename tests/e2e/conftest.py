"""The end-to-end tier: real processes, signals and sockets. A test here
that starts nothing of the kind (no process, no fork, no socket of its own)
fails: it belongs a tier down, in tests/integration, where the database
alone is real (it reaches it through libpq, which opens no Python socket)."""

from __future__ import annotations

import multiprocessing.process
import os
import socket
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(autouse=True)
def e2e_tier(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    started: list[str] = []

    def counting(name: str, real: Any) -> Any:
        def counted(*args: Any, **kwargs: Any) -> Any:
            started.append(name)
            return real(*args, **kwargs)

        return counted

    monkeypatch.setattr(
        subprocess.Popen,
        "_execute_child",
        counting("a process", subprocess.Popen._execute_child),  # type: ignore[attr-defined]
    )
    monkeypatch.setattr(os, "fork", counting("a fork", os.fork))
    monkeypatch.setattr(
        multiprocessing.process.BaseProcess,
        "start",
        counting("a process", multiprocessing.process.BaseProcess.start),
    )
    monkeypatch.setattr(socket.socket, "bind", counting("a server", socket.socket.bind))
    monkeypatch.setattr(socket.socket, "connect", counting("a connection", socket.socket.connect))
    yield
    if not started:
        pytest.fail(
            "this e2e test started no process and opened no socket: move it to tests/integration",
            pytrace=False,
        )
