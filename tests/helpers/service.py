"""Running the watchdog service as a real subprocess, and reading its metrics."""

from __future__ import annotations

import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

FAST = {
    "AFK_RECLAIM_INTERVAL": "1",
    "AFK_GAUGES_INTERVAL": "0.5",
    "AFK_LEADER_INTERVAL": "0.5",
    "AFK_POISON_INTERVAL": "1",
    "AFK_PRUNE_INTERVAL": "1",
    "AFK_MISFIRE_GRACE": "5",
    "AFK_LOG_FORMAT": "json",
    "AFK_SHUTDOWN_TIMEOUT": "5",
}


def free_port() -> int:
    """A free port on 127.0.0.1 for a server a test starts, picked below the
    kernel's ephemeral range. A port the kernel picks (a bind to port 0) is the
    kind it hands to the next outgoing connection, and the suite makes
    thousands: one took a test PostgreSQL's port between the pick and its
    bind, and that server did not start."""
    first = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    if first <= 10_000:  # no room below the range here: let the kernel pick
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            return int(s.getsockname()[1])
    while True:
        port = random.randrange(10_000, first)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port


class Service:
    """``afk watchdog run`` in a subprocess; its log goes to a file."""

    def __init__(self, dsn: str, **env: str) -> None:
        self.port = free_port()
        self.folder = Path(tempfile.mkdtemp(prefix="afk-svc-"))
        self.log_path = self.folder / "log"
        full = {k: v for k, v in os.environ.items() if not k.startswith("AFK_")}
        full.update(FAST)
        #: where it answers hooks (its own: not the user's default, which
        #: another test's service may hold)
        self.socket = env.get("AFK_HOOK_SOCKET", str(self.folder / "hook.sock"))
        full.update(
            {
                "AFK_DSN": dsn,
                "AFK_METRICS_ADDR": f"127.0.0.1:{self.port}",
                "AFK_HOOK_SOCKET": self.socket,
            }
        )
        full.update(env)
        self._log = open(self.log_path, "w")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "watchdog.cli", "watchdog", "run"],
            env=full,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def get(self, path: str) -> httpx.Response | None:
        try:
            return httpx.get(self.url + path, timeout=2)
        except httpx.TransportError:
            return None

    def metrics(self) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
        response = self.get("/metrics")
        if response is None or response.status_code != 200:
            return {}
        out = {}
        for family in text_string_to_metric_families(response.text):
            for sample in family.samples:
                out[(sample.name, frozenset(sample.labels.items()))] = sample.value
        return out

    def value(self, name: str, **labels: str) -> float | None:
        return self.metrics().get((name, frozenset(labels.items())))

    def health(self) -> int | None:
        response = self.get("/healthz")
        return None if response is None else response.status_code

    def log(self) -> str:
        return self.log_path.read_text()

    def signal(self, signum: int) -> None:
        self.proc.send_signal(signum)

    def stop(self, timeout: float = 30) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
            # (shown with the test's failure: where the service was stuck)
            print(f"the service did not stop within {timeout:g}s; its log ends:")
            print(self.log()[-20_000:])
        self._log.close()
        return code

    def cleanup(self) -> None:
        self.stop()
        shutil.rmtree(self.folder, ignore_errors=True)


def run(*args: str, **env: Any) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if not k.startswith("AFK_")}
    full.update(env)
    return subprocess.run(
        [sys.executable, "-m", "watchdog.cli", *args],
        env=full,
        text=True,
        capture_output=True,
        timeout=60,
    )


def answering_hooks(dsn: str, **env: str) -> Service:
    """A service that answers `afk hook` on its socket (``Service.socket``),
    started and listening."""
    from helpers import poll

    service = Service(dsn, **env)
    try:
        poll(lambda: "answering hooks on" in service.log() or service.proc.poll() is not None, 60)
        assert "answering hooks on" in service.log(), service.log()
    except BaseException:
        service.cleanup()  # a service that never listened is not left running
        raise
    return service


def last_words(service: Service) -> str:
    """Stop the service, clean up, and return its log."""
    service.stop()
    log = service.log()
    service.cleanup()
    return log


@contextmanager
def hooks_through(through: str, dsn: str, env: dict[str, str], *events: str) -> Iterator[None]:
    """With ``through`` "the service": a real service answers the hooks of the
    sessions run with ``env`` (its socket is set there, each answer logged),
    and must have answered each of ``events`` by the end of the block.
    Anything else: the hooks go to the database themselves."""
    if through != "the service":
        yield
        return
    service = answering_hooks(dsn, AFK_LOG_LEVEL="DEBUG")
    env["AFK_HOOK_SOCKET"] = service.socket
    try:
        yield
    finally:
        log = last_words(service)
    missing = [event for event in events if f"answered {event}" not in log]
    assert not missing, f"the service did not answer {missing}"
