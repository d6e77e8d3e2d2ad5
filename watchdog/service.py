"""``afk watchdog run``: the jobs on an APScheduler schedule, the metrics
endpoint, leader election between replicas, systemd notifications.

All state is in the database, so the process can be killed at any moment; on
SIGTERM it lets the running job finish (bounded), closes its connections and
exits 0.
"""

from __future__ import annotations

import logging
import os
import socket
import sys
import threading
import time
import traceback
import uuid
from contextlib import suppress
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from . import jobs, systemd, tracing
from .agents import hooklink
from .agents.hookserver import HookServer, HttpHooks
from .config import Settings
from .db import Database
from .delivery import link_secret
from .errors import DatabaseError, ServiceError
from .links import HOOK_PROOF
from .metrics import Metrics, serve
from .queue import Queue

#: a web token shorter than this is warned about
WEB_TOKEN_MIN = 16
#: on SIGTERM, after the wait for running jobs, this long to close the servers
#: and connections before the service exits anyway
CLOSE_GRACE = 5.0
logger = logging.getLogger(__name__)


def _exit_after(seconds: float) -> None:
    """The last resort of a stop: if the process still runs ``seconds`` from
    now (a statement waiting on a database that stopped answering, with its
    connection still open, waits for ever), log where every thread is and
    exit 0 (all state is in the database). Within systemd's TimeoutStopSec,
    so a stop is never a SIGKILL."""

    def give_up() -> None:
        logger.warning(
            "did not stop within %gs; exiting. Where each thread was:\n%s",
            seconds,
            _stacks(),
            extra={"action": "stop"},
        )
        logging.shutdown()
        os._exit(0)

    timer = threading.Timer(seconds, give_up)
    timer.daemon = True
    timer.start()


def _stacks() -> str:
    names = {thread.ident: thread.name for thread in threading.enumerate()}
    return "\n".join(
        f"Thread {names.get(ident, ident)}:\n" + "".join(traceback.format_stack(frame))
        for ident, frame in sys._current_frames().items()
    )


class LeaderLease:
    """Which replica runs the once-only jobs: the holder of a lease row.

    :meth:`check` takes the lease when it is free or expired and renews it
    when held, in one statement; it lasts ``ttl`` seconds (three leader
    checks), so a replica that dies hands over within that time, and one that
    stops cleanly hands over at once. Unlike a session advisory lock it works
    through a pooler in transaction mode. The once-only jobs are idempotent
    (the digest and alerts have their delivery ledger, prune deletes what is
    old), so a job that outlives the lease and overlaps its successor's run
    does nothing twice.
    """

    NAME = "watchdog"

    def __init__(self, db: Database, ttl: float) -> None:
        self._db = db
        self._ttl = ttl
        self.holder = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.held = False

    def check(self) -> bool:
        """Keep or take the lease; False when another replica holds it.
        Raises :class:`DatabaseError` (and counts as not held) when the
        database cannot be reached."""
        self.held = False
        row = self._db.one(
            "leader_take", {"name": self.NAME, "holder": self.holder, "ttl": self._ttl}
        )
        self.held = row is not None
        return self.held

    def release(self) -> None:
        if self.held:
            with suppress(DatabaseError):
                self._db.execute("leader_release", {"name": self.NAME, "holder": self.holder})
        self.held = False


@dataclass(frozen=True)
class JobOutcome:
    job: str
    ok: bool
    skipped: str | None = None
    result: Any = None
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"job": self.job, "ok": self.ok}
        if self.skipped:
            out["skipped"] = self.skipped
        if self.error:
            out["error"] = self.error
        if self.result is not None:
            out["result"] = self.result
        return out


class Watchdog:
    """The jobs with their metrics and the leader lease, usable without a
    scheduler (``tick``) or under one (:meth:`run`)."""

    def __init__(self, dsn: str, settings: Settings) -> None:
        self.settings = settings
        service = settings.service
        self.db = Database(
            dsn,
            pool_size=3,
            statement_timeout=service.statement_timeout,
            application_name="afk-watchdog",
            connect_timeout=5,
            retry_for=10,
        )
        self.queue = Queue(self.db, settings=settings.queue)
        self.leader = LeaderLease(self.db, ttl=3 * service.leader_interval)
        self.metrics = Metrics([job.name for job in jobs.JOBS])
        self.db_ok = False
        #: True under `afk watchdog run`, False for a one-shot tick
        self.scheduled = False

    def run_job(self, name: str) -> JobOutcome:
        """Run one job of :data:`jobs.JOBS` once: never raises; counts, times
        and logs it. A leader-only job first renews (or takes) the lease."""
        job = jobs.BY_NAME[name]
        with tracing.span(f"afk.job {name}", attributes={"afk.job": name}) as span:
            outcome = self._run_job(job, name)
            if isinstance(outcome.result, dict):  # what it changed, as numbers and flags
                tracing.set_attributes(span, tracing.flat(outcome.result, "afk.job"))
            if not outcome.ok:
                tracing.error(span, outcome.error or "failed")
            return outcome

    def _run_job(self, job: jobs.Job, name: str) -> JobOutcome:
        started = time.monotonic()
        try:
            if job.leader_only and not jobs.run_leader(self)["leader"]:
                return JobOutcome(name, True, skipped="another replica holds the leader lease")
            result = job.run(self)
        except DatabaseError as exc:
            self._set_db_ok(False)
            self.metrics.record_job(name, started, ok=False)
            logger.error(
                "job %s failed: %s", name, exc, extra={"action": "job_failed", "job": name}
            )
            return JobOutcome(name, False, error=str(exc))
        except Exception as exc:  # a bad run must never stop the scheduler
            self.metrics.record_job(name, started, ok=False)
            logger.exception("job %s failed", name, extra={"action": "job_failed", "job": name})
            return JobOutcome(name, False, error=f"{type(exc).__name__}: {exc}")
        self._set_db_ok(True)
        self.metrics.record_job(name, started, ok=True)
        return JobOutcome(name, True, result=result)

    def _set_db_ok(self, ok: bool) -> None:
        self.db_ok = ok
        self.metrics.up.set(1 if ok else 0)

    def close(self) -> None:
        self.leader.release()
        self.db.close()

    # -- the service -------------------------------------------------------

    def run(self, stop: threading.Event) -> bool:
        """Serve until ``stop`` is set. Returns False if a job was still
        running when the shutdown timeout ran out."""
        s = self.settings.service
        self.scheduled = True
        http_hooks = self._http_hooks()  # (first: a port it cannot hold stops the start)
        server = self._serve_http()
        hook_server = self._hook_server()
        scheduler = self._scheduler()
        scheduler.start()
        systemd.notify("READY=1")
        logger.info("watchdog started", extra={"action": "start"})

        stop.wait()
        systemd.notify("STOPPING=1")
        _exit_after(s.shutdown_timeout + CLOSE_GRACE)
        logger.info(
            "stopping: waiting up to %gs for running jobs",
            s.shutdown_timeout,
            extra={"action": "stop"},
        )
        closer = threading.Thread(target=scheduler.shutdown, kwargs={"wait": True}, daemon=True)
        closer.start()
        closer.join(s.shutdown_timeout)
        clean = not closer.is_alive()
        if not clean:
            logger.warning("a job was still running after %gs; exiting anyway", s.shutdown_timeout)
        server.shutdown()
        server.server_close()
        if hook_server is not None:
            hook_server.stop()
        if http_hooks is not None:
            http_hooks.stop()
            http_hooks.hooks.stop()
        self.close()
        return clean

    def _serve_http(self) -> Any:
        """/metrics, /healthz and the status pages, serving (on a thread of
        their own) once this returns; said in the log."""
        from .web import StatusPages

        s = self.settings.service
        host, port = s.metrics_host_port()
        pages = StatusPages(
            self.db,
            self.settings.digest,
            token=s.web_token,
            host=host,
            require_token=s.web_require_token,
            public_url=s.public_url,
            fleet_lost_seconds=self.settings.loop.fleet_lost_seconds,
        )
        if s.web_token and len(s.web_token) < WEB_TOKEN_MIN:
            logger.warning(
                "AFK_WEB_TOKEN is %d characters: a token shorter than %d is easy to guess "
                "(python3 -c 'import secrets; print(secrets.token_urlsafe())' makes one)",
                len(s.web_token),
                WEB_TOKEN_MIN,
                extra={"action": "listen"},
            )
        server, _ = serve(self.metrics, host, port, healthy=lambda: self.db_ok, pages=pages)
        shown = f"[{host}]" if ":" in host else host  # an IPv6 address, as a URL writes it
        logger.info(
            "serving /metrics and /healthz on %s:%d",
            shown,
            server.server_port,
            extra={"action": "listen", "port": server.server_port},
        )
        if pages.refused:
            logger.warning(
                "the status pages answer 403 on %s, which is not a loopback "
                "address: set AFK_WEB_TOKEN to serve them (/metrics and /healthz "
                "stay open)",
                host,
                extra={"action": "listen"},
            )
        else:
            logger.info(
                "status pages on http://%s:%d/%s",
                shown,
                server.server_port,
                " (AFK_WEB_TOKEN required)" if s.web_token else "",
                extra={"action": "listen"},
            )
        return server

    def _scheduler(self) -> Any:
        """The APScheduler of the jobs :data:`jobs.JOBS` enables (and of
        systemd's watchdog pings), not started yet."""
        from apscheduler.executors.pool import ThreadPoolExecutor
        from apscheduler.schedulers.background import BackgroundScheduler

        s = self.settings.service
        scheduler = BackgroundScheduler(
            executors={"default": ThreadPoolExecutor(6)},
            timezone=UTC,
            job_defaults={
                "max_instances": 1,
                "coalesce": True,
                "misfire_grace_time": max(1, int(s.misfire_grace)),
            },
        )
        now = datetime.now(UTC)
        scheduled = [job for job in jobs.JOBS if job.enabled(self.settings)]
        for i, job in enumerate(scheduled):
            scheduler.add_job(
                self.run_job,
                "interval",
                seconds=job.every(self.settings),
                args=[job.name],
                id=job.name,
                name=job.name,
                next_run_time=now + timedelta(milliseconds=50 * i),
            )
        ping = systemd.watchdog_interval()
        if ping:
            # pings come from the scheduler's own thread pool: a wedged
            # scheduler stops them, and systemd restarts the service
            scheduler.add_job(
                systemd.notify,
                "interval",
                seconds=ping,
                args=["WATCHDOG=1"],
                id="systemd-watchdog",
                next_run_time=now,
            )
        return scheduler

    def _hook_server(self) -> HookServer | None:
        """The hooks' fast path (:mod:`watchdog.agents.hookserver`), unless it is off."""
        where = {"AFK_HOOK_SOCKET": self.settings.service.hook_socket}
        path = hooklink.socket_path({**os.environ, **where})
        if path is None:
            return None
        hook_server = HookServer(path, self.db.conninfo)
        return hook_server if hook_server.start() else None

    def _http_hooks(self) -> HttpHooks | None:
        """Claude Code's HTTP hooks on a loopback port (AFK_HOOK_HTTP), off
        unless set."""
        s = self.settings.service
        if not s.hook_http:
            return None
        host, port = s.hook_http_host_port()
        answering = HookServer("", self.db.conninfo)  # (its connections, not its socket)
        http = HttpHooks(
            host,
            port,
            s.hook_token,
            answering,
            link_secret(self.db, "hooks"),
            link_secret(self.db, HOOK_PROOF),
        )
        why = http.start()
        if why is None:
            return http
        answering.stop()
        # another process on the port would hear every agent's HTTP hooks (the
        # bearer token, the task tokens) and could answer "allow": no start
        raise ServiceError(
            f"cannot answer HTTP hooks on {s.hook_http}: {why}; another process may hold "
            "the port, and every agent's HTTP hooks would go to it: free the port or "
            "change AFK_HOOK_HTTP (the Unix socket, AFK_HOOK_SOCKET, is private to you)"
        )
