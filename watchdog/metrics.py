"""Prometheus metrics of the watchdog, on a registry of its own, and the HTTP
endpoint serving ``/metrics`` and ``/healthz``."""

from __future__ import annotations

import math
import socket
import threading
import time
from collections.abc import Callable, Iterable
from datetime import datetime
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    make_wsgi_app,
)

from .agents.outcome import RUN_OUTCOMES
from .errors import BadInput
from .states import STATES


class Metrics:
    def __init__(self, jobs: Iterable[str] = ()) -> None:
        """``jobs``: the job names whose series exist from the start (at 0)."""
        # a counter's *_created series doubles the scrape and says nothing
        # that a restart's reset does not (the watchdog is the only user here)
        disable_created_metrics()  # type: ignore[no-untyped-call]
        r = self.registry = CollectorRegistry(auto_describe=True)
        self._queue_metrics(r)
        self._job_metrics(r)
        self._agent_metrics(r)
        #: when the worktrees' bytes were last measured (time.monotonic())
        self.workspace_bytes_at: float | None = None
        #: the database time up to which ended runs were counted
        self.runs_seen_until: datetime | None = None
        for state in STATES:
            self.tasks.labels(state)
            self.workspaces.labels(state)
        for outcome in ("paused", "failed"):
            self.reclaimed.labels(outcome)
        for job in jobs:
            self.job_runs.labels(job)
            self.job_failures.labels(job)
        for outcome in RUN_OUTCOMES:
            self.agent_runs.labels(str(outcome))

    def _queue_metrics(self, r: CollectorRegistry) -> None:
        """The backlog's gauges."""
        self.tasks = Gauge(
            "afk_tasks",
            "Tasks per state (done is estimated above 200k rows).",
            ["state"],
            registry=r,
        )
        self.agent_tasks = Gauge(
            "afk_agent_tasks",
            "Open tasks per agent and state, for the largest agents only.",
            ["agent_id", "state"],
            registry=r,
        )
        self.retrying = Gauge(
            "afk_tasks_retrying",
            "Tasks waiting to retry after a spent attempt (a failure, an expired lease), "
            "per agent, for the largest agents: the digest's failing, retrying.",
            ["agent"],
            registry=r,
        )
        self.expired_leases = Gauge(
            "afk_expired_leases",
            "Running tasks whose lease has expired, not yet reclaimed.",
            registry=r,
        )
        self.oldest_todo_age = Gauge(
            "afk_oldest_todo_age_seconds", "Age of the oldest todo task (0 when none).", registry=r
        )
        self.since_checkpoint = Gauge(
            "afk_seconds_since_last_checkpoint",
            "Longest time any running task has gone without a checkpoint or claim.",
            registry=r,
        )
        self.oldest_snapshot = Gauge(
            "afk_oldest_snapshot_age_seconds",
            "Age of the oldest transaction holding a snapshot on the queue's database "
            "(long ones slow every claim).",
            registry=r,
        )

    def _job_metrics(self, r: CollectorRegistry) -> None:
        """The jobs' counters and timings, the leader, the database's health."""
        self.reclaimed = Counter(
            "afk_reclaimed", "Expired leases reclaimed, by outcome.", ["outcome"], registry=r
        )
        self.poison_pills = Gauge(
            "afk_poison_pills", "Tasks that failed within the poison window.", registry=r
        )
        self.pruned = Counter(
            "afk_pruned_tasks", "Done tasks deleted by the prune job.", registry=r
        )
        self.job_runs = Counter("afk_job_runs", "Job runs.", ["job"], registry=r)
        self.job_failures = Counter(
            "afk_job_failures", "Job runs that failed.", ["job"], registry=r
        )
        self.job_duration = Histogram(
            "afk_job_duration_seconds",
            "Job run time.",
            ["job"],
            registry=r,
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
        )
        self.job_last_success = Gauge(
            "afk_job_last_success_timestamp_seconds",
            "Unix time of the last successful run.",
            ["job"],
            registry=r,
        )
        self.digest_deliveries = Counter(
            "afk_digest_deliveries",
            "Digest delivery attempts, by destination and outcome "
            "(delivered, pending: will retry, failed: refused for good).",
            ["destination", "outcome"],
            registry=r,
        )
        self.leader = Gauge(
            "afk_watchdog_leader", "1 on the replica that holds the once-only jobs.", registry=r
        )
        self.up = Gauge("afk_up", "1 when the last database round trip succeeded.", registry=r)

    def _agent_metrics(self, r: CollectorRegistry) -> None:
        """The agents' accounts, runs and workspaces."""
        self.accounts_parked = Gauge(
            "afk_accounts_parked",
            "Accounts parked now (a usage limit, an outage, a login that needs a person).",
            registry=r,
        )
        self.account_parked_until = Gauge(
            "afk_account_parked_until_timestamp_seconds",
            "Unix time a parked account's parking ends (+Inf: until a person clears it).",
            ["account", "kind"],
            registry=r,
        )
        self.account_parked = Gauge(
            "afk_account_parked",
            "1 for each account parked now (a usage limit, an outage, a person's).",
            ["account"],
            registry=r,
        )
        self.loops = Gauge(
            "afk_loops",
            "afk loop supervisors registered, alive or lost (no beat for AFK_FLEET_LOST_SECONDS).",
            ["state"],
            registry=r,
        )
        self.agent_runs = Counter(
            "afk_agent_runs",
            "Agent runs under a supervisor that ended, by outcome class.",
            ["outcome"],
            registry=r,
        )
        self.workspaces = Gauge(
            "afk_workspaces",
            "Task worktrees not yet removed (afk gc), by the state of their task.",
            ["state"],
            registry=r,
        )
        self.workspace_bytes = Gauge(
            "afk_workspace_bytes",
            "Bytes in the task worktrees not yet removed (measured every few minutes).",
            registry=r,
        )

    def set_parked(self, parked: Iterable[tuple[str, str, float | None]]) -> None:
        self.account_parked_until.clear()
        self.account_parked.clear()
        n = 0
        for account, kind, until in parked:
            self.account_parked_until.labels(account, kind).set(
                math.inf if until is None else until
            )
            self.account_parked.labels(account).set(1)
            n += 1
        self.accounts_parked.set(n)

    def set_loops(self, states: Iterable[str]) -> None:
        counts = {"alive": 0, "lost": 0}
        for state in states:
            counts[state] = counts.get(state, 0) + 1
        for state, n in counts.items():
            self.loops.labels(state).set(n)

    def set_agents(self, rows: Iterable[tuple[str, str, int]]) -> None:
        self.agent_tasks.clear()
        for agent, state, n in rows:
            self.agent_tasks.labels(agent, state).set(n)

    def set_retrying(self, rows: Iterable[tuple[str, int]]) -> None:
        self.retrying.clear()
        for agent, n in rows:
            self.retrying.labels(agent).set(n)

    def record_job(self, job: str, started: float, ok: bool) -> None:
        self.job_runs.labels(job).inc()
        self.job_duration.labels(job).observe(time.monotonic() - started)
        if ok:
            self.job_last_success.labels(job).set(time.time())
        else:
            self.job_failures.labels(job).inc()


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _Server6(_Server):
    address_family = socket.AF_INET6


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass

    def get_environ(self) -> dict[str, Any]:
        environ: dict[str, Any] = super().get_environ()
        # the path as sent, before WSGI decodes it (as latin-1): an agent id
        # may hold a "/" (sent as %2F) or be UTF-8
        environ["afk.raw_path"] = self.path.split("?", 1)[0]
        return environ


def serve(
    metrics: Metrics,
    host: str,
    port: int,
    healthy: Callable[[], bool],
    pages: Callable[..., Iterable[bytes]] | None = None,
) -> tuple[WSGIServer, threading.Thread]:
    """Serve /metrics and /healthz in a daemon thread, and every other path
    from ``pages`` (the status pages) if given; returns the server
    (``server.server_port`` is the bound port) and its thread."""
    metrics_app = make_wsgi_app(metrics.registry)

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if environ.get("PATH_INFO") == "/healthz":
            ok = healthy()
            start_response(
                "200 OK" if ok else "503 Service Unavailable",
                [("Content-Type", "text/plain; charset=utf-8")],
            )
            return [b"ok\n" if ok else b"database unreachable\n"]
        if environ.get("PATH_INFO") != "/metrics" and pages is not None:
            return pages(environ, start_response)
        if environ.get("PATH_INFO") != "/metrics":
            start_response("404 Not Found", [("Content-Type", "text/plain; charset=utf-8")])
            return [b"not found: /metrics and /healthz are served here\n"]
        result: Iterable[bytes] = metrics_app(environ, start_response)
        return result

    server_class: type[_Server] = _Server6 if ":" in host else _Server
    try:
        server = make_server(
            host, port, app, server_class=server_class, handler_class=_QuietHandler
        )
    except OSError as exc:
        raise BadInput(
            f"cannot serve /metrics on {host}:{port}: {exc.strerror or exc} "
            "(another service on that port? set AFK_METRICS_ADDR)"
        ) from None
    thread = threading.Thread(target=server.serve_forever, name="afk-metrics", daemon=True)
    thread.start()
    return server, thread
