"""Delivering the digest (and poison alerts): a ledger row per destination
and period, claimed like a task, so a period is sent once even with two
replicas or a restart, and retried until it lands. How each destination
sends is in ``destinations.py``; this module knows none of their details."""

from __future__ import annotations

import json
import logging
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from .agents.accounts import Parking
from .agents.approvals import shell_command
from .config import DigestSettings
from .db import Database
from .destinations import (
    AccountAlert,
    Alert,
    AnyAlert,
    DeliveryError,
    QuestionAlert,
    Rendered,
    configured,
)
from .digest import Digest, build, hours, render
from .errors import AfkError, redact
from .models import Task
from .text import terminal

logger = logging.getLogger(__name__)

FIRST_WINDOW = 24 * 3600.0


# -- schedule ----------------------------------------------------------------


def trigger_of(settings: DigestSettings) -> Any:
    from apscheduler.triggers.cron import CronTrigger

    tz = settings.day_zone()
    if settings.cron:
        return CronTrigger.from_crontab(settings.cron, timezone=tz)
    hour, minute = settings.at.split(":")
    return CronTrigger(hour=int(hour), minute=int(minute), timezone=tz)


def latest_period(
    settings: DigestSettings, now: datetime, lookback: timedelta = timedelta(days=8)
) -> datetime | None:
    """The latest scheduled time at or before ``now`` (the database's clock)."""
    trigger = trigger_of(settings)
    fire = trigger.get_next_fire_time(None, now - lookback)
    last = None
    for _ in range(100_000):
        if fire is None or fire > now:
            break
        last = fire
        fire = trigger.get_next_fire_time(fire, fire + timedelta(microseconds=1))
    return last


# -- destinations --------------------------------------------------------------


# -- the ledger -------------------------------------------------------------------


@dataclass(frozen=True)
class Delivery:
    destination: str
    period: str
    state: str  # delivered, pending (will retry), failed
    attempts: int
    status: int | None = None
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if v is not None}


def retry_delay(settings: DigestSettings, attempts: int, hint: float | None) -> float:
    """Exponential backoff with jitter; at least what Retry-After asked for."""
    delay = float(min(settings.retry_cap, settings.retry_base * 2 ** max(0, attempts - 1)))
    delay *= random.uniform(0.5, 1.0)
    if hint is not None:
        delay = max(delay, min(hint, settings.retry_cap))
    return delay


Sender = Callable[[str, dict[str, Any]], int | None]


def claim_and_send(
    db: Database,
    settings: DigestSettings,
    destination: str,
    kind: str,
    period: datetime,
    first_window: float,
    send: Sender,
) -> Delivery | None:
    """Claim (destination, kind, period) in the ledger and run ``send`` for it;
    record the outcome, fenced by the claim. None if the claim was not ours
    (delivered already, waiting for its retry, or another sender has it)."""
    row = db.one(
        "digest_claim",
        {
            "destination": destination,
            "kind": kind,
            "period": period,
            "lease": settings.lease,
            "first_window": first_window,
        },
    )
    if row is None:
        return None
    attempts = row["attempts"]
    state, status, error, retry_in = "delivered", None, None, 0.0
    try:
        status = send(destination, row)
        if status is None:
            error = "nothing to report (all-clear messages are off)"
    except DeliveryError as exc:
        status, error = exc.status, str(exc)
        if exc.retryable:
            state, retry_in = "pending", retry_delay(settings, attempts, exc.retry_after)
        else:
            state = "failed"
    except AfkError as exc:  # a template that cannot render: retrying will not help
        state, error = "failed", str(exc)
    except Exception as exc:  # anything else must not leave the delivery `sending` for good
        logger.exception("%s to %s failed", kind, destination, extra={"action": kind})
        state, error = "failed", f"{type(exc).__name__}: {redact(str(exc))}"
    finished = db.one(
        "digest_finish",
        {
            "destination": destination,
            "kind": kind,
            "period": period,
            "token": row["lease_token"],
            "state": state,
            "status": status,
            "error": error,
            "retry_in": retry_in,
        },
    )
    if not finished:
        logger.warning(
            "%s to %s: the claim expired before the outcome was recorded",
            kind,
            destination,
            extra={"action": kind, "destination": destination},
        )
    log = logger.info if state == "delivered" else logger.warning
    log(
        "%s to %s: %s%s",
        kind,
        destination,
        state,
        f" ({error})" if error else "",
        extra={
            "action": kind,
            "destination": destination,
            "state": state,
            "attempts": attempts,
            "status": status,
        },
    )
    return Delivery(destination, period.isoformat(), state, attempts, status, error)


def send_due(
    db: Database, settings: DigestSettings, *, force: bool = False, lost_after: float = 60.0
) -> list[Delivery]:
    """The digest job: for each destination, claim the latest due period in
    the ledger and deliver it. ``force`` sends now, as a period of its own.
    Each window's digest is built once and rendered once per format, whatever
    the number of destinations. ``lost_after``: AFK_FLEET_LOST_SECONDS (a
    loop not seen for that long takes nothing)."""
    now = db_now(db)
    kind = "forced" if force else "digest"
    period = now if force else latest_period(settings, now)
    tz = settings.day_zone()
    destinations = {d.name: d for d in configured(settings)}
    built: dict[tuple[datetime, datetime], tuple[Digest, Rendered]] = {}

    def send(destination: str, row: dict[str, Any]) -> int | None:
        window = (row["window_start"], row["window_end"])
        if window not in built:
            digest = build(db, window[0], window[1], settings, tz, lost_after=lost_after)
            built[window] = (digest, Rendered(digest, settings))
        digest, rendered = built[window]
        if digest.all_clear and not settings.all_clear:
            return None
        delivery_id = f"{destination}:{row['kind']}:{row['period'].isoformat()}"
        return destinations[destination].send_digest(digest, rendered, delivery_id)

    outcomes = (
        []
        if period is None
        else [
            claim_and_send(db, settings, d, kind, period, FIRST_WINDOW, send) for d in destinations
        ]
    )
    if not force:
        # every pending delivery is retried until it lands or fails for good,
        # forced ones included (their window is the one they were claimed with)
        outcomes += [
            claim_and_send(
                db, settings, r["destination"], r["kind"], r["period"], FIRST_WINDOW, send
            )
            for r in db.all("digest_due_retries")
            if r["destination"] in destinations
        ]
    return [o for o in outcomes if o is not None]


def db_now(db: Database) -> datetime:
    """The database's clock: every schedule decision uses it."""
    row = db.row("now")
    now: datetime = row["now"]
    return now


def status(db: Database, limit: int = 50) -> list[dict[str, Any]]:
    """The ledger's latest deliveries (``afk digest status``)."""
    return db.all("digest_status", {"limit": limit})


def dry_run(
    db: Database,
    settings: DigestSettings,
    fmt: str,
    lost_after: float = 60.0,
    since_seconds: float | None = None,
) -> tuple[str, str]:
    """What a digest would say now: the digest rendered, and a line saying
    where its window starts. The window runs from the last delivered digest
    (as the next one will; 24 h when none went out yet), or over the last
    ``since_seconds``."""
    now = db_now(db)
    zone = settings.day_zone()
    if since_seconds is not None:
        since = now - timedelta(seconds=since_seconds)
        note = f"the window is the last {hours(since_seconds)}, as --since asked"
    else:
        last = db.one("digest_last_delivered")
        if last is None:
            since = now - timedelta(seconds=FIRST_WINDOW)
            note = "no digest went out yet: the window is the last 24 h"
        else:
            since = last["since"]
            went = last["delivered_at"] or since
            note = (
                f"the window starts where the last digest's ended: it went out "
                f"{went.astimezone(zone):%Y-%m-%d %H:%M %Z}; --since 24h shows a longer one"
            )
    digest = build(db, since, now, settings, zone, lost_after=lost_after)
    return render(digest, fmt, settings), note


def alert_poison(
    db: Database, settings: DigestSettings, pills: list[Task], interval: float
) -> list[Delivery]:
    """A short alert listing poison pills, once per poison period and destination."""
    now = db_now(db)
    period = datetime.fromtimestamp(now.timestamp() // interval * interval, now.tzinfo)
    alert = Alert(pills)
    destinations = {d.name: d for d in configured(settings)}

    def send(destination: str, row: dict[str, Any]) -> int | None:
        return destinations[destination].send_alert(
            alert, f"{destination}:poison:{period.isoformat()}"
        )

    outcomes = [
        claim_and_send(db, settings, d, "poison", period, interval, send) for d in destinations
    ]
    return [o for o in outcomes if o is not None]


def alert_account(db: Database, settings: DigestSettings, parking: Parking) -> list[Delivery]:
    """An alert that an account needs a person, once per parking and destination."""
    alert = AccountAlert(parking.account, parking.kind, parking.reason)
    destinations = {d.name: d for d in configured(settings)}
    period = parking.parked_at

    def send(destination: str, row: dict[str, Any]) -> int | None:
        return destinations[destination].send_alert(
            alert, f"{destination}:account:{parking.account}:{period.isoformat()}"
        )

    kind = f"account:{parking.account}"
    outcomes = [claim_and_send(db, settings, d, kind, period, 3600, send) for d in destinations]
    return [o for o in outcomes if o is not None]


def alert_questions(
    db: Database, settings: DigestSettings, public_url: str = "", limit: int = 20
) -> list[Delivery]:
    """Tell the alert destinations of each new question, once per question and
    destination (the ledger's kind names the question), with a link to
    answer it from a phone (with ``public_url``)."""
    from . import links

    destinations = {d.name: d for d in configured(settings)}
    outcomes: list[Delivery] = []
    for row in db.all("questions_unalerted", {"limit": limit}):
        link = None
        if public_url:  # (valid a week: a question has no time to live)
            until = int(row["asked_at"].timestamp()) + 7 * 86400
            token = links.sign(link_secret(db), row["question_id"], "answer", until)
            link = f"{public_url.rstrip('/')}/a/{token}"
        alert = QuestionAlert(str(row["id"]), row["agent_id"], row["title"], row["question"], link)
        kind = f"question:{row['question_id']}"
        outcomes += tell_once(db, settings, destinations, alert, kind, row["asked_at"])
        db.execute("question_alerted", {"question_id": row["question_id"]})
    return outcomes


def tell_once(
    db: Database,
    settings: DigestSettings,
    destinations: dict[str, Any],
    alert: AnyAlert,
    kind: str,
    period: datetime,
) -> list[Delivery]:
    """``alert`` to each destination, once per (destination, kind, period):
    the delivery ledger claims it, retries it with backoff, and records it."""

    def send(destination: str, _row: dict[str, Any]) -> int:
        return int(destinations[destination].send_alert(alert, f"{destination}:{kind}"))

    sent = [claim_and_send(db, settings, d, kind, period, 3600, send) for d in destinations]
    return [o for o in sent if o is not None]


#: new approval requests told one by one in a pass; more than this are told
#: as one summary (a night that piles them up is not a phone buzzing all night)
APPROVALS_ONE_BY_ONE = 3


#: characters of a call an approval's push shows (its page shows it whole)
CALL_CHARS = 1500


def approval_call(row: Mapping[str, Any]) -> str:
    """The call a push asks a person about, as it is (issue 50 item 4): its
    tool and its command (or its whole input), whitespace kept, every
    control, line and bidi character a visible escape; cut, saying so."""
    given = row.get("tool_input")
    command = shell_command(given)
    if command is None:
        command = json.dumps(given, ensure_ascii=False, default=str)
    shown = terminal(command)
    if len(shown) > CALL_CHARS:
        cut = len(shown) - CALL_CHARS
        shown = f"{shown[:CALL_CHARS]}… ({cut} more characters: the request's page shows it all)"
    return f"{row.get('tool_name')}({shown})"


def link_secret(db: Database, name: str = "links") -> str:
    """The status server's secret for the links it signs (made once); its
    secret of ``hooks`` signs each run's credential for HTTP hooks."""
    row = db.one("web_secret", {"name": name})
    assert row is not None
    return str(row["value"])


def approval_links(
    db: Database, public_url: str, approval: int, expires_at: datetime
) -> dict[str, str]:
    """The signed links that decide a request from a phone, valid while it
    waits (none without the server's public address)."""
    if not public_url:
        return {}
    from . import links

    secret, until = link_secret(db), int(expires_at.timestamp())
    base = public_url.rstrip("/")
    approve = links.sign(secret, approval, "approve", until)
    return {
        "approve": f"{base}/a/{approve}",
        "deny": f"{base}/a/{links.sign(secret, approval, 'deny', until)}",
        "page": f"{base}/a/{approve}",
    }


def alert_approvals(
    db: Database, settings: DigestSettings, public_url: str, limit: int = 50
) -> list[Delivery]:
    """Tell the alert destinations of each new approval request, once per
    request and destination, with its links; many at once as one summary."""
    from .destinations import ApprovalAlert, ApprovalsSummary

    destinations = {d.name: d for d in configured(settings)}
    rows = db.all("approvals_unalerted", {"limit": limit})
    outcomes: list[Delivery] = []
    alerts = [
        (
            row,
            ApprovalAlert(
                row["id"],
                str(row["task_id"]),
                row["agent_id"],
                row["title"],
                approval_call(row),
                row["expires_at"].isoformat(timespec="minutes"),
                approval_links(db, public_url, row["id"], row["expires_at"]),
            ),
        )
        for row in rows
    ]
    told: list[tuple[dict[str, Any], str, AnyAlert]] = [
        (row, f"approval:{row['id']}", alert) for row, alert in alerts
    ]
    if len(alerts) > APPROVALS_ONE_BY_ONE:
        # one summary a window of notify_every: the requests that come while a
        # window's summary is out wait for the next one (not marked told)
        every = max(settings.notify_every, 60.0)
        window = int(rows[0]["db_now"].timestamp() // every * every)  # (the database's clock)
        period = datetime.fromtimestamp(window, UTC)
        summary = ApprovalsSummary([a for _, a in alerts])
        kind = "approvals-summary"

        def summarize(destination: str, _row: dict[str, Any]) -> int:
            return destinations[destination].send_alert(summary, f"{destination}:{kind}:{window}")

        sent = [
            claim_and_send(db, settings, d, kind, period, every, summarize) for d in destinations
        ]
        if not any(s is not None for s in sent):
            return []  # (this window's summary is out: these wait for the next)
        for row in rows:
            db.execute("approval_alerted", {"approval": row["id"]})
        return [s for s in sent if s is not None]
    for row, kind, alert in told:
        outcomes += tell_once(db, settings, destinations, alert, kind, row["asked_at"])
    for row in rows:
        db.execute("approval_alerted", {"approval": row["id"]})
    return outcomes


def alert_waiting(db: Database, settings: DigestSettings, limit: int = 20) -> list[Delivery]:
    """Tell the alert destinations of each task that waits for a person for
    a reason that is not a question or an approval (its budget spent, its
    command that cannot run), once per task and hold."""
    from .destinations import WaitingAlert

    destinations = {d.name: d for d in configured(settings)}
    outcomes: list[Delivery] = []
    for row in db.all("waiting_for_a_person", {"limit": limit}):
        alert = WaitingAlert(str(row["id"]), row["agent_id"], row["title"], row["reason"])
        outcomes += tell_once(db, settings, destinations, alert, f"waiting:{row['id']}",
                              row["updated_at"])  # fmt: skip
    return outcomes
