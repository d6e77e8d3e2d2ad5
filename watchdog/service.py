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
import threading
import time
import uuid
from collections.abc import Callable
from contextlib import suppress
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from . import jobs, systemd
from .config import Settings
from .db import Database
from .errors import DatabaseError
from .metrics import Metrics, serve
from .queue import Queue

logger = logging.getLogger(__name__)

#: jobs that must happen once per period: only the leader runs them
LEADER_ONLY = frozenset({"poison", "prune", "digest"})


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
        rows = self._db.fetch("leader_take", {"name": self.NAME, "holder": self.holder,
                                              "ttl": self._ttl})
        self.held = bool(rows)
        return self.held

    def release(self) -> None:
        if self.held:
            with suppress(DatabaseError):
                self._db.fetch("leader_release", {"name": self.NAME, "holder": self.holder})
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

    def __init__(self, dsn: str, all_settings: Settings) -> None:
        self.settings = settings = all_settings.service
        self.digest_settings = all_settings.digest
        queue_settings = all_settings.queue
        timeout = settings.statement_timeout
        self.db = Database(dsn, pool_size=3, statement_timeout=timeout,
                           application_name="afk-watchdog", connect_timeout=5,
                           retry_for=10)
        self.queue = Queue(self.db, settings=queue_settings)
        self.leader = LeaderLease(self.db, ttl=3 * settings.leader_interval)
        self.metrics = Metrics()
        self.db_ok = False
        #: True under `afk watchdog run`, False for a one-shot tick
        self._scheduled = False
        self._jobs: dict[str, Callable[[], Any]] = {
            "reclaim": self._reclaim, "gauges": self._gauges, "poison": self._poison,
            "prune": self._prune, "leader": self._leader, "digest": self._digest,
        }

    # -- the jobs, with their metrics --------------------------------------

    def _reclaim(self) -> dict[str, int]:
        r = jobs.reclaim(self.queue)
        self.metrics.reclaimed.labels("paused").inc(r.paused)
        self.metrics.reclaimed.labels("failed").inc(r.failed)
        return {"paused": r.paused, "failed": r.failed}

    def _gauges(self) -> dict[str, Any]:
        s = self.settings
        snap = jobs.gauges(self.queue, top_agents=s.metrics_agents, poison_window=s.poison_window)
        m = self.metrics
        for state, n in snap.states.items():
            m.tasks.labels(state).set(n)
        m.set_agents(snap.agents)
        m.expired_leases.set(snap.expired_leases)
        m.oldest_todo_age.set(snap.oldest_todo_age)
        m.since_checkpoint.set(snap.since_checkpoint)
        m.poison_pills.set(snap.poison_pills)
        m.oldest_snapshot.set(snap.oldest_snapshot_age)
        return asdict(snap)

    def _poison(self) -> dict[str, Any]:
        pills = jobs.poison(self.queue, window=self.settings.poison_window)
        self.metrics.poison_pills.set(len(pills))
        out: dict[str, Any] = {"poison_pills": len(pills), "ids": [str(t.id) for t in pills]}
        if pills and self.settings.poison_alert:
            from . import delivery

            sent = delivery.alert_poison(self.db, self.digest_settings, pills,
                                         self.settings.poison_interval)
            out["alerts"] = [o.to_json() for o in sent]
        return out

    def _digest(self) -> dict[str, Any]:
        from . import delivery

        if not self.digest_settings.destinations():
            return {"deliveries": [], "skipped": "no destination configured"}
        outcomes = delivery.run_once(self.db, self.digest_settings)
        for o in outcomes:
            self.metrics.digest_deliveries.labels(o.destination, o.state).inc()
        failed = [o for o in outcomes if o.state != "delivered"]
        if failed:
            # counted as a failed run, so that alerts on afk_job_failures_total fire
            raise RuntimeError("; ".join(f"{o.destination}: {o.error}" for o in failed))
        return {"deliveries": [o.to_json() for o in outcomes]}

    def _prune(self) -> dict[str, int]:
        r = jobs.prune(self.queue, retention=self.settings.retention,
                       batch=self.settings.prune_batch)
        self.metrics.pruned.inc(r.deleted)
        return {"deleted": r.deleted}

    def _leader(self) -> dict[str, bool]:
        was = self.leader.held
        try:
            now = self.leader.check()
        finally:
            self.metrics.leader.set(1 if self.leader.held else 0)
        if now != was:
            # a one-shot `afk watchdog tick` takes the lock on every run: not news
            log = logger.info if self._scheduled else logger.debug
            log("this replica %s the leader", "is now" if now else "is no longer",
                extra={"action": "leader", "leader": now})
        return {"leader": now}

    def run_job(self, name: str) -> JobOutcome:
        """Run one job once: never raises; counts, times and logs it."""
        started = time.monotonic()
        try:
            if name in LEADER_ONLY and not self._leader()["leader"]:
                return JobOutcome(name, True, skipped="another replica holds the leader lease")
            result = self._jobs[name]()
        except DatabaseError as exc:
            self._set_db_ok(False)
            self.metrics.record_job(name, started, ok=False)
            logger.error("job %s failed: %s", name, exc, extra={"action": "job_failed",
                                                                 "job": name})
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
        from apscheduler.executors.pool import ThreadPoolExecutor
        from apscheduler.schedulers.background import BackgroundScheduler

        s = self.settings
        self._scheduled = True
        host, port = s.metrics_host_port()
        server, _ = serve(self.metrics, host, port, healthy=lambda: self.db_ok)
        logger.info("serving /metrics and /healthz on %s:%d", host, server.server_port,
                    extra={"action": "listen", "port": server.server_port})

        scheduler = BackgroundScheduler(
            executors={"default": ThreadPoolExecutor(6)}, timezone=UTC,
            job_defaults={"max_instances": 1, "coalesce": True,
                          "misfire_grace_time": max(1, int(s.misfire_grace))})
        now = datetime.now(UTC)
        schedule = [("leader", s.leader_interval), ("reclaim", s.reclaim_interval),
                    ("gauges", s.gauges_interval), ("poison", s.poison_interval),
                    ("prune", s.prune_interval)]
        if self.digest_settings.destinations():
            schedule.append(("digest", self.digest_settings.check_interval))
        for i, (name, every) in enumerate(schedule):
            scheduler.add_job(self.run_job, "interval", seconds=every, args=[name], id=name,
                              name=name, next_run_time=now + timedelta(milliseconds=50 * i))
        ping = systemd.watchdog_interval()
        if ping:
            # pings come from the scheduler's own thread pool: a wedged
            # scheduler stops them, and systemd restarts the service
            scheduler.add_job(systemd.notify, "interval", seconds=ping, args=["WATCHDOG=1"],
                              id="systemd-watchdog", next_run_time=now)
        scheduler.start()
        systemd.notify("READY=1")
        logger.info("watchdog started", extra={"action": "start"})

        stop.wait()
        systemd.notify("STOPPING=1")
        logger.info("stopping: waiting up to %gs for running jobs", s.shutdown_timeout,
                    extra={"action": "stop"})
        closer = threading.Thread(target=scheduler.shutdown, kwargs={"wait": True},
                                  daemon=True)
        closer.start()
        closer.join(s.shutdown_timeout)
        clean = not closer.is_alive()
        if not clean:
            logger.warning("a job was still running after %gs; exiting anyway",
                           s.shutdown_timeout)
        server.shutdown()
        server.server_close()
        self.close()
        return clean


