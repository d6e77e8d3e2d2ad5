"""Where the digest and the poison alerts go: one class per destination
behind :class:`Destination`. Each takes what was rendered for it (the digest
is built and rendered once per format, see :class:`Rendered`) and reports the
receiver's status, or raises :class:`DeliveryError` saying whether a retry can
help. The delivery ledger (``delivery.py``) decides when to send and records
the outcome; adding a destination is a class here and its settings.
"""

from __future__ import annotations

import email.utils
import hashlib
import hmac
import json
import smtplib
import ssl
import time
import urllib.parse
from dataclasses import dataclass, field
from email.message import EmailMessage
from typing import TYPE_CHECKING, Any, Protocol

from .config import DigestSettings
from .digest import Digest, render, slack_escape
from .errors import AfkError

if TYPE_CHECKING:
    from .models import Task

USER_AGENT = "afk-watchdog"


class DeliveryError(AfkError):
    """A destination did not take the message. Its text never holds a URL or
    a password."""

    def __init__(
        self,
        message: str,
        *,
        retryable: bool,
        status: int | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.status = status
        self.retry_after = retry_after


def _http_post(url: str, body: bytes, headers: dict[str, str], timeout: float, what: str) -> int:
    import httpx

    try:
        response = httpx.post(
            url,
            content=body,
            timeout=timeout,
            follow_redirects=False,
            headers={"User-Agent": USER_AGENT, **headers},
        )
    except httpx.TimeoutException:
        raise DeliveryError(f"{what}: timed out", retryable=True) from None
    except httpx.TransportError as exc:
        raise DeliveryError(
            f"{what}: cannot connect ({type(exc).__name__})", retryable=True
        ) from None
    status = response.status_code
    if 200 <= status < 300:
        return status
    detail = response.text[:200].strip().replace(url, "<url>")
    if status == 429 or status >= 500:
        raise DeliveryError(
            f"{what}: HTTP {status} {detail}",
            retryable=True,
            status=status,
            retry_after=retry_after(response.headers.get("Retry-After")),
        )
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
    return _http_post(
        settings.slack_url,
        payload.encode(),
        {"Content-Type": "application/json"},
        settings.timeout,
        "slack",
    )


def sign(secret: str, timestamp: int, body: bytes) -> str:
    """The signature header: ``t=<unix time>,v1=<hex HMAC-SHA256 of "t.body">``."""
    mac = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256)
    return f"t={timestamp},v1={mac.hexdigest()}"


def send_webhook(settings: DigestSettings, payload: str, delivery_id: str) -> int:
    body = payload.encode()
    return _http_post(
        settings.webhook_url,
        body,
        {
            "Content-Type": "application/json",
            "X-Afk-Signature": sign(settings.webhook_secret, int(time.time()), body),
            # the same id on every retry of one period: receivers can drop repeats
            "X-Afk-Delivery": delivery_id,
        },
        settings.timeout,
        "webhook",
    )


def send_ntfy(
    settings: DigestSettings,
    title: str,
    text: str,
    *,
    click: str | None = None,
    actions: list[tuple[str, str]] | None = None,
) -> int:
    """A push to a phone through ntfy (https://docs.ntfy.sh/publish/): its JSON
    form, posted to the server of the topic URL (a title in any script), with
    ``actions`` as its buttons (label, URL: each opens the link), and the
    topic's access token when one is set."""
    where = urllib.parse.urlsplit(settings.ntfy_url)
    base, _, topic = where.path.rstrip("/").rpartition("/")
    body = {
        "topic": topic,
        "title": title[:250],
        "message": text[:3800],
        "tags": ["robot"],
        "priority": 4,
        **({"click": click} if click else {}),
        **(
            {"actions": [{"action": "view", "label": n, "url": u} for n, u in actions[:3]]}
            if actions
            else {}
        ),
    }
    headers = {"Content-Type": "application/json"}
    if settings.ntfy_token:
        headers["Authorization"] = f"Bearer {settings.ntfy_token}"
    server = urllib.parse.urlunsplit((where.scheme, where.netloc, base + "/", "", ""))
    return _http_post(server, json.dumps(body).encode(), headers, settings.timeout, "ntfy")


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
            client: smtplib.SMTP = smtplib.SMTP_SSL(
                host, url.port or 465, timeout=settings.timeout, context=context
            )
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
                    raise DeliveryError(
                        "email: the server offers no STARTTLS; refusing to "
                        "log in in clear (add ?starttls=no to allow it)",
                        retryable=False,
                    )
            if url.username:
                client.login(
                    urllib.parse.unquote(url.username), urllib.parse.unquote(url.password or "")
                )
            client.send_message(message)
    except smtplib.SMTPResponseException as exc:
        code = exc.smtp_code
        raise DeliveryError(
            f"email: SMTP {code}", retryable=400 <= code < 500, status=code
        ) from None
    except smtplib.SMTPRecipientsRefused:
        raise DeliveryError("email: every recipient was refused", retryable=False) from None
    except (TimeoutError, smtplib.SMTPServerDisconnected, smtplib.SMTPConnectError, OSError) as exc:
        raise DeliveryError(
            f"email: cannot deliver ({type(exc).__name__})", retryable=True
        ) from None
    return 250


@dataclass
class Rendered:
    """A digest rendered on demand, once per format, for all destinations."""

    digest: Digest
    settings: DigestSettings
    _texts: dict[str, str] = field(default_factory=dict)

    def __getitem__(self, fmt: str) -> str:
        if fmt not in self._texts:
            self._texts[fmt] = render(self.digest, fmt, self.settings)
        return self._texts[fmt]


@dataclass(frozen=True)
class Alert:
    """The poison pills of one period, as every destination tells them."""

    pills: list[Task]

    @property
    def text(self) -> str:
        lines = []
        for t in self.pills[:20]:
            error = (t.last_error or "").strip().splitlines()[0][:200] if t.last_error else ""
            lines.append(f"- {t.title} ({t.agent_id}): {error} — afk retry {t.id}")
        if len(self.pills) > 20:
            lines.append(f"… and {len(self.pills) - 20} more: afk dead --since 1h")
        return f"afk: {len(self.pills)} task(s) failed for good in the last hour\n" + "\n".join(
            lines
        )

    @property
    def subject(self) -> str:
        return f"afk: {len(self.pills)} poison pill(s)"

    def to_json(self) -> dict[str, Any]:
        return {
            "type": "afk.poison_pills",
            "count": len(self.pills),
            "tasks": [
                {
                    "id": str(t.id),
                    "agent_id": t.agent_id,
                    "title": t.title,
                    "last_error": t.last_error,
                }
                for t in self.pills[:100]
            ],
        }


@dataclass(frozen=True)
class AccountAlert:
    """An account that needs a person (logged out, a bad key, no credit):
    every loop on it has stopped until someone acts."""

    account: str
    kind: str
    reason: str

    @property
    def text(self) -> str:
        return (
            f"afk: account {self.account} needs a person: {self.reason}\n"
            f"Its loops have stopped and its tasks wait, no attempt spent. Fix it, then: "
            f"afk limit --account {self.account} --clear"
        )

    @property
    def subject(self) -> str:
        return f"afk: account {self.account} needs a person"

    def to_json(self) -> dict[str, Any]:
        return {
            "type": "afk.account_parked",
            "account": self.account,
            "kind": self.kind,
            "reason": self.reason,
        }


@dataclass(frozen=True)
class QuestionAlert:
    """An agent asks a person (`afk ask`): its task waits for the answer."""

    task_id: str
    agent_id: str
    title: str
    question: str
    #: a signed link to answer it from a phone (with AFK_PUBLIC_URL)
    link: str | None = None

    @property
    def text(self) -> str:
        answer = f"Answer: {self.link}\nOr: " if self.link else ""
        return (
            f"afk: {self.agent_id} asks, on {self.title!r}:\n{self.question}\n"
            f"The task waits for you. {answer}afk answer {self.task_id} '...'"
        )

    @property
    def actions(self) -> list[tuple[str, str]]:
        return [("Answer", self.link)] if self.link else []

    @property
    def subject(self) -> str:
        return f"afk: {self.agent_id} asks a question"

    def to_json(self) -> dict[str, Any]:
        return {
            "type": "afk.question",
            "task_id": self.task_id,
            "agent_id": self.agent_id,
            "title": self.title,
            "question": self.question,
            "link": self.link,
        }


@dataclass(frozen=True)
class WaitingAlert:
    """A task waits for a person for a reason of its own (its budget spent,
    its command that cannot run): no loop takes it until someone acts."""

    task_id: str
    agent_id: str
    title: str
    reason: str

    @property
    def text(self) -> str:
        return (
            f"afk: {self.title!r} ({self.agent_id}) waits for a person: {self.reason}\n"
            f"afk show {self.task_id}"
        )

    @property
    def subject(self) -> str:
        return f"afk: a task of {self.agent_id} waits for a person"

    def to_json(self) -> dict[str, Any]:
        return {
            "type": "afk.waiting",
            "task_id": self.task_id,
            "agent_id": self.agent_id,
            "title": self.title,
            "reason": self.reason,
        }


@dataclass(frozen=True)
class ApprovalAlert:
    """A tool call waits for a person's approval (issue 43), with the links
    that decide it from a phone (none without AFK_PUBLIC_URL)."""

    approval: int
    task_id: str
    agent_id: str
    title: str
    call: str
    expires_at: str
    #: "approve", "deny", "page": signed links to the status server
    links: dict[str, str] = field(default_factory=dict)

    @property
    def text(self) -> str:
        lines = [
            f"afk: {self.agent_id} waits for your approval, on {self.title!r}:",
            self.call,
            f"Request {self.approval}; undecided by {self.expires_at}, it is denied.",
        ]
        if self.links:
            lines += [f"Approve: {self.links['approve']}", f"Deny: {self.links['deny']}"]
        lines.append(f"Or: afk approve {self.approval} / afk deny {self.approval} --note '...'")
        return "\n".join(lines)

    @property
    def subject(self) -> str:
        return f"afk: {self.agent_id} waits for your approval"

    @property
    def actions(self) -> list[tuple[str, str]]:
        return (
            [("Approve", self.links["approve"]), ("Deny", self.links["deny"])] if self.links else []
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "type": "afk.approval",
            "approval": self.approval,
            "task_id": self.task_id,
            "agent_id": self.agent_id,
            "title": self.title,
            "call": self.call,
            "expires_at": self.expires_at,
            "links": self.links,
        }


@dataclass(frozen=True)
class ApprovalsSummary:
    """Many requests at once, told as one message (each call and its links)."""

    requests: list[ApprovalAlert]

    @property
    def text(self) -> str:
        lines = [f"afk: {len(self.requests)} tool calls wait for your approval:"]
        for a in self.requests[:20]:
            lines.append(f"- {a.agent_id}, {a.title!r}: {a.call} (request {a.approval})")
            if a.links:
                lines.append(f"  approve {a.links['approve']}  deny {a.links['deny']}")
        lines.append("All of them: afk approvals")
        return "\n".join(lines)

    @property
    def subject(self) -> str:
        return f"afk: {len(self.requests)} tool calls wait for your approval"

    def to_json(self) -> dict[str, Any]:
        return {"type": "afk.approvals", "requests": [a.to_json() for a in self.requests]}


AnyAlert = Alert | AccountAlert | QuestionAlert | ApprovalAlert | ApprovalsSummary | WaitingAlert


class Destination(Protocol):
    @property
    def name(self) -> str: ...

    def send_digest(self, digest: Digest, rendered: Rendered, delivery_id: str) -> int: ...

    def send_alert(self, alert: AnyAlert, delivery_id: str) -> int: ...


@dataclass(frozen=True)
class Slack:
    settings: DigestSettings
    name: str = "slack"

    def send_digest(self, digest: Digest, rendered: Rendered, delivery_id: str) -> int:
        return send_slack(self.settings, rendered["slack"])

    def send_alert(self, alert: AnyAlert, delivery_id: str) -> int:
        return send_slack(self.settings, json.dumps({"text": slack_escape(alert.text)}))


@dataclass(frozen=True)
class Webhook:
    settings: DigestSettings
    name: str = "webhook"

    def send_digest(self, digest: Digest, rendered: Rendered, delivery_id: str) -> int:
        return send_webhook(self.settings, rendered["webhook"], delivery_id)

    def send_alert(self, alert: AnyAlert, delivery_id: str) -> int:
        return send_webhook(self.settings, json.dumps(alert.to_json()), delivery_id)


@dataclass(frozen=True)
class Email:
    settings: DigestSettings
    name: str = "email"

    def send_digest(self, digest: Digest, rendered: Rendered, delivery_id: str) -> int:
        subject = f"afk digest: {digest.headline}"
        return send_email(self.settings, subject, rendered["text"], rendered["html"])

    def send_alert(self, alert: AnyAlert, delivery_id: str) -> int:
        return send_email(self.settings, alert.subject, alert.text, None)


@dataclass(frozen=True)
class Ntfy:
    settings: DigestSettings
    name: str = "ntfy"

    def send_digest(self, digest: Digest, rendered: Rendered, delivery_id: str) -> int:
        title = f"afk digest: {digest.headline}"
        return send_ntfy(self.settings, title, rendered["text"])

    def send_alert(self, alert: AnyAlert, delivery_id: str) -> int:
        actions = alert.actions if isinstance(alert, ApprovalAlert | QuestionAlert) else None
        click = alert.links.get("page") if isinstance(alert, ApprovalAlert) else None
        return send_ntfy(self.settings, alert.subject, alert.text, click=click, actions=actions)


SENDERS: dict[str, type[Slack] | type[Webhook] | type[Email] | type[Ntfy]] = {
    "slack": Slack,
    "webhook": Webhook,
    "email": Email,
    "ntfy": Ntfy,
}


def configured(settings: DigestSettings) -> list[Destination]:
    """The destinations the settings configure, in their order. A name with
    no class is an error, never a silent fallback to another destination."""
    out: list[Destination] = []
    for name in settings.destinations():
        if name not in SENDERS:
            raise AfkError(f"no destination called {name!r}")
        out.append(SENDERS[name](settings))
    return out
