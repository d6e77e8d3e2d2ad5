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


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """Keeps each phase's report on the test, for the guard below: a test
    that skipped (a tool missing outside CI) proves nothing and breaks no tier."""
    report = yield
    setattr(item, f"afk_report_{report.when}", report)
    return report


@pytest.fixture(autouse=True)
def e2e_tier(monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> Iterator[None]:
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
    skipped = any(
        getattr(getattr(request.node, f"afk_report_{when}", None), "skipped", False)
        for when in ("setup", "call")
    )
    if not started and not skipped:
        pytest.fail(
            "this e2e test started no process and opened no socket: move it to tests/integration",
            pytrace=False,
        )
