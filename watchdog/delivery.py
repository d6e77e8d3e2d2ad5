"""Delivering the digest (and poison alerts): Slack, a signed webhook, email;
a ledger row per destination and period, claimed like a task, so a period is
sent once even with two replicas or a restart, and retried until it lands."""

from __future__ import annotations

import email.utils
import hashlib
import hmac
import json
import logging
import random
import smtplib
import ssl
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta, tzinfo
from email.message import EmailMessage
from typing import Any

from .config import DigestSettings
from .db import Database
from .digest import Digest, build, render, slack_escape
from .errors import AfkError
from .queue import Task

logger = logging.getLogger(__name__)

FIRST_WINDOW = 24 * 3600.0
USER_AGENT = "afk-watchdog"


class DeliveryError(AfkError):
    """A destination did not take the message. Its text never holds a URL or
    a password."""

    def __init__(self, message: str, *, retryable: bool, status: int | None = None,
                 retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.status = status
        self.retry_after = retry_after


# -- schedule ----------------------------------------------------------------


def timezone_of(settings: DigestSettings) -> tzinfo:
    if settings.tz:
        import zoneinfo

        return zoneinfo.ZoneInfo(settings.tz)
    import tzlocal

    zone: tzinfo = tzlocal.get_localzone()
    return zone


def trigger_of(settings: DigestSettings) -> Any:
    from apscheduler.triggers.cron import CronTrigger

    tz = timezone_of(settings)
    if settings.cron:
        return CronTrigger.from_crontab(settings.cron, timezone=tz)
    hour, minute = settings.at.split(":")
    return CronTrigger(hour=int(hour), minute=int(minute), timezone=tz)


def latest_period(settings: DigestSettings, now: datetime,
                  lookback: timedelta = timedelta(days=8)) -> datetime | None:
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


def _http_post(url: str, body: bytes, headers: dict[str, str], timeout: float,
               what: str) -> int:
    import httpx

    try:
        response = httpx.post(url, content=body, timeout=timeout, follow_redirects=False,
                              headers={"User-Agent": USER_AGENT, **headers})
    except httpx.TimeoutException:
        raise DeliveryError(f"{what}: timed out", retryable=True) from None
    except httpx.TransportError as exc:
        raise DeliveryError(f"{what}: cannot connect ({type(exc).__name__})",
                            retryable=True) from None
    status = response.status_code
    if 200 <= status < 300:
        return status
    detail = response.text[:200].strip().replace(url, "<url>")
    if status == 429 or status >= 500:
        raise DeliveryError(f"{what}: HTTP {status} {detail}", retryable=True, status=status,
                            retry_after=retry_after(response.headers.get("Retry-After")))
    raise DeliveryError(f"{what}: HTTP {status} {detail}", retryable=False, status=status)


def retry_after(value: str | None) -> float | None:
    """Seconds from a Retry-After header (delta-seconds or an HTTP date)."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def send_slack(settings: DigestSettings, payload: str) -> int:
    return _http_post(settings.slack_url, payload.encode(),
                      {"Content-Type": "application/json"}, settings.timeout, "slack")


def sign(secret: str, timestamp: int, body: bytes) -> str:
    """The signature header: ``t=<unix time>,v1=<hex HMAC-SHA256 of "t.body">``."""
    mac = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256)
    return f"t={timestamp},v1={mac.hexdigest()}"


def send_webhook(settings: DigestSettings, payload: str, delivery_id: str) -> int:
    body = payload.encode()
    return _http_post(settings.webhook_url, body, {
        "Content-Type": "application/json",
        "X-Afk-Signature": sign(settings.webhook_secret, int(time.time()), body),
        # the same id on every retry of one period: receivers can drop repeats
        "X-Afk-Delivery": delivery_id,
    }, settings.timeout, "webhook")


def send_email(settings: DigestSettings, subject: str, text: str, html: str | None) -> int:
    url = urllib.parse.urlsplit(settings.smtp_url)
    query = dict(urllib.parse.parse_qsl(url.query))
    message = EmailMessage()
    message["Subject"] = subject
    message["From"] = settings.email_from
    message["To"] = ", ".join(a.strip() for a in settings.email_to.split(",") if a.strip())
    message["Date"] = email.utils.formatdate(localtime=False)
    message["Message-ID"] = email.utils.make_msgid(domain="afk-watchdog")
    message.set_content(text)
    if html is not None:
        message.add_alternative(html, subtype="html")
    context = ssl.create_default_context(cafile=settings.smtp_cafile or None)
    host = url.hostname or "localhost"
    try:
        if url.scheme == "smtps":
            client: smtplib.SMTP = smtplib.SMTP_SSL(host, url.port or 465,
                                                   timeout=settings.timeout, context=context)
        else:
            client = smtplib.SMTP(host, url.port or 587, timeout=settings.timeout)
        with client:
            client.ehlo()
            starttls = query.get("starttls", "auto")
            if url.scheme == "smtp" and starttls != "no":
                if client.has_extn("starttls"):
                    client.starttls(context=context)
                    client.ehlo()
                elif url.password or starttls == "required":
                    raise DeliveryError("email: the server offers no STARTTLS; refusing to "
                                        "log in in clear (add ?starttls=no to allow it)",
                                        retryable=False)
            if url.username:
                client.login(urllib.parse.unquote(url.username),
                             urllib.parse.unquote(url.password or ""))
            client.send_message(message)
    except smtplib.SMTPResponseException as exc:
        code = exc.smtp_code
        raise DeliveryError(f"email: SMTP {code}", retryable=400 <= code < 500,
                            status=code) from None
    except smtplib.SMTPRecipientsRefused:
        raise DeliveryError("email: every recipient was refused", retryable=False) from None
    except (TimeoutError, smtplib.SMTPServerDisconnected, smtplib.SMTPConnectError,
            OSError) as exc:
        raise DeliveryError(f"email: cannot deliver ({type(exc).__name__})",
                            retryable=True) from None
    return 250


def deliver(settings: DigestSettings, destination: str, digest: Digest,
            delivery_id: str) -> int:
    """Render ``digest`` for one destination and send it; the status code."""
    if destination == "slack":
        return send_slack(settings, render(digest, "slack", settings))
    if destination == "webhook":
        return send_webhook(settings, render(digest, "webhook", settings), delivery_id)
    if destination == "email":
        subject = ("afk digest: all clear" if digest.all_clear
                   else f"afk digest: {digest.failed_total} failed")
        return send_email(settings, subject, render(digest, "text", settings),
                          render(digest, "html", settings))
    raise ValueError(destination)


# -- the ledger -------------------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
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


def claim_and_send(db: Database, settings: DigestSettings, destination: str, kind: str,
                   period: datetime, first_window: float, send: Sender) -> Outcome | None:
    """Claim (destination, kind, period) in the ledger and run ``send`` for it;
    record the outcome, fenced by the claim. None if the claim was not ours
    (delivered already, waiting for its retry, or another sender has it)."""
    claimed = db.fetch("digest_claim", {
        "destination": destination, "kind": kind, "period": period,
        "lease": settings.lease, "first_window": first_window,
    })
    if not claimed:
        return None
    row = claimed[0]
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
    finished = db.fetch("digest_finish", {
        "destination": destination, "kind": kind, "period": period,
        "token": row["lease_token"], "state": state, "status": status, "error": error,
        "retry_in": retry_in,
    })
    if not finished:
        logger.warning("%s to %s: the claim expired before the outcome was recorded", kind,
                       destination, extra={"action": kind, "destination": destination})
    log = logger.info if state == "delivered" else logger.warning
    log("%s to %s: %s%s", kind, destination, state, f" ({error})" if error else "",
        extra={"action": kind, "destination": destination, "state": state,
               "attempts": attempts, "status": status})
    return Outcome(destination, period.isoformat(), state, attempts, status, error)


def run_once(db: Database, settings: DigestSettings, *, force: bool = False) -> list[Outcome]:
    """The digest job: for each destination, claim the latest due period in
    the ledger and deliver it. ``force`` sends now, as a period of its own."""
    now: datetime = db.fetch("now")[0]["now"]
    kind = "forced" if force else "digest"
    period = now if force else latest_period(settings, now)
    tz = timezone_of(settings)

    def send(destination: str, row: dict[str, Any]) -> int | None:
        digest = build(db, row["window_start"], row["window_end"], settings, tz)
        if digest.all_clear and not settings.all_clear:
            return None
        delivery_id = f"{destination}:{row['kind']}:{row['period'].isoformat()}"
        return deliver(settings, destination, digest, delivery_id)

    outcomes = [] if period is None else [
        claim_and_send(db, settings, d, kind, period, FIRST_WINDOW, send)
        for d in settings.destinations()]
    if not force:
        # every pending delivery is retried until it lands or fails for good,
        # forced ones included (their window is the one they were claimed with)
        outcomes += [claim_and_send(db, settings, r["destination"], r["kind"], r["period"],
                                    FIRST_WINDOW, send)
                     for r in db.fetch("digest_due_retries")
                     if r["destination"] in settings.destinations()]
    return [o for o in outcomes if o is not None]


def dry_run(db: Database, settings: DigestSettings, fmt: str) -> str:
    """What a digest would say now, from the last delivered one (or 24 h)."""
    rows = db.fetch("digest_last_delivered")
    now: datetime = db.fetch("now")[0]["now"]
    since = rows[0]["since"] if rows and rows[0]["since"] else now - timedelta(
        seconds=FIRST_WINDOW)
    return render(build(db, since, now, settings, timezone_of(settings)), fmt, settings)


def alert_poison(db: Database, settings: DigestSettings, pills: list[Task],
                 interval: float) -> list[Outcome]:
    """A short alert listing poison pills, once per poison period and destination."""
    now: datetime = db.fetch("now")[0]["now"]
    period = datetime.fromtimestamp(now.timestamp() // interval * interval, now.tzinfo)
    lines = []
    for t in pills[:20]:
        error = (t.last_error or "").strip().splitlines()[0][:200] if t.last_error else ""
        lines.append(f"- {t.title} ({t.agent_id}): {error} — afk retry {t.id}")
    if len(pills) > 20:
        lines.append(f"… and {len(pills) - 20} more: afk dead --since 1h")
    text = f"afk: {len(pills)} task(s) failed for good in the last hour\n" + "\n".join(lines)

    def send(destination: str, row: dict[str, Any]) -> int | None:
        if destination == "slack":
            return send_slack(settings, json.dumps({"text": slack_escape(text)}))
        if destination == "webhook":
            body = json.dumps({"type": "afk.poison_pills", "count": len(pills),
                               "tasks": [{"id": str(t.id), "agent_id": t.agent_id,
                                          "title": t.title, "last_error": t.last_error}
                                         for t in pills[:100]]})
            return send_webhook(settings, body, f"webhook:poison:{period.isoformat()}")
        return send_email(settings, f"afk: {len(pills)} poison pill(s)", text, None)

    outcomes = [claim_and_send(db, settings, d, "poison", period, interval, send)
                for d in settings.destinations()]
    return [o for o in outcomes if o is not None]
