"""The morning digest: what the agents did in a window, read from the queue in
one statement, grouped, bounded, and rendered from Jinja2 templates."""

from __future__ import annotations

import json
import re
import shlex
import urllib.parse
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, tzinfo
from pathlib import Path
from typing import Any

from .agents.decide import account_outcomes
from .config import DigestSettings
from .db import Database
from .errors import AfkError
from .ids import short_id
from .states import EXACT_BELOW, STATES
from .text import shown

FORMATS = {
    "slack": "slack.json.j2",
    "html": "email.html.j2",
    "text": "email.txt.j2",
    "webhook": "webhook.json.j2",
}
#: failed tasks read per digest; beyond this they are counted, not grouped
FAILED_ROWS = 5000
#: tasks listed in full per group
TASKS_PER_GROUP = 5
SLACK_MAX_BLOCKS = 50
SLACK_MAX_TEXT = 3000

_UUID = re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", re.I)
_HEX = re.compile(r"\b(?=[0-9a-f]*\d)[0-9a-f]{7,}\b", re.I)
_NUMBER = re.compile(r"\d+")


class RenderError(AfkError):
    """A template produced something that cannot be sent."""


_EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt|Failure)\b")
#: the line that names a failure, in the shapes coding agents' errors take
_HEADLINES = [
    re.compile(r"^FAILED \S+.*$"),  # pytest's short summary
    re.compile(r"^E\s+\S.*$"),  # pytest's assertion detail
    re.compile(r"^npm ERR! code \S+.*$"),
    re.compile(r"^npm ERR! .*\S.*$"),
    re.compile(r"^\s*! \[(remote )?rejected\].*$"),  # git push
    re.compile(r"^(error|fatal): .*$"),  # git and most CLIs
]


def error_headline(text: str | None) -> str:
    """The one line that says what failed. A Python traceback is named by its
    exception (its last line, ``OSError: [Errno 28] No space left on device``),
    not by "Traceback (most recent call last):"; pytest summaries, npm, git and
    CLI errors by their own telling line; anything else by its first line."""
    lines = [line.rstrip() for line in (text or "").strip().splitlines() if line.strip()]
    if not lines:
        return "(no error text)"
    if any(line.startswith("Traceback (most recent call last)") for line in lines):
        exceptions = [line for line in lines if _EXCEPTION_LINE.match(line)]
        if exceptions:
            return exceptions[-1]
        return lines[-1].strip()
    for pattern in _HEADLINES:
        for line in lines:
            if pattern.match(line):
                return line.strip()
    return lines[0].strip()


def normalise_error(text: str | None) -> str:
    """The error's headline with ids and numbers masked, so that the same
    failure in fifty tasks reads as one group."""
    first = error_headline(text)
    first = _UUID.sub("<id>", first)
    first = _HEX.sub("<hex>", first)
    first = _NUMBER.sub("<n>", first)
    first = " ".join(first.split())
    return first[:200]


@dataclass
class FailedTask:
    id: str
    agent_id: str
    title: str
    attempts: int
    max_attempts: int
    when: datetime
    error: str
    checkpoint_keys: list[str]
    link: str | None
    #: the tasks that waited for it and were cancelled by its failure
    #: (on_dep_failure cancel), down the chain: listed under it, not apart
    cancelled: list[FailedTask] = field(default_factory=list)

    @property
    def retry(self) -> str:
        return f"afk retry {self.id}"


#: the error of a task cancelled by its dependency's failure (migration 0020)
_CANCELLED = re.compile(r"dependency failed: ([0-9a-f-]{36}) ")


def under_roots(tasks: list[FailedTask]) -> list[FailedTask]:
    """The failures with each chain cancelled by a failure folded under
    that root failure: one headline per root, not one per dependent."""
    by_id = {t.id: t for t in tasks}

    def root_of(t: FailedTask) -> tuple[FailedTask, int]:
        seen, depth = {t.id}, 0
        while (m := _CANCELLED.match(t.error or "")) and m.group(1) in by_id:
            t = by_id[m.group(1)]
            if t.id in seen:
                break
            seen.add(t.id)
            depth += 1
        return t, depth

    roots = []
    folded: dict[str, list[tuple[int, str, FailedTask]]] = defaultdict(list)
    for t in tasks:
        root, depth = root_of(t)
        if root is t:
            roots.append(t)
        else:
            folded[root.id].append((depth, t.title, t))
    for root in roots:  # nearest first, as the chain goes down
        root.cancelled = [t for _, _, t in sorted(folded[root.id], key=lambda x: x[:2])]
    return roots


@dataclass
class Group:
    agent_id: str
    error: str
    count: int
    tasks: list[FailedTask]

    @property
    def more(self) -> int:
        return self.count - len(self.tasks)


@dataclass
class Digest:
    window_start: datetime
    window_end: datetime
    generated_at: datetime
    tz: tzinfo
    totals: dict[str, int]
    per_agent: list[dict[str, Any]]
    failed_total: int
    groups: list[Group]
    hidden_groups: int
    hidden_failures: int
    ungrouped_failures: int
    expired: list[dict[str, Any]] = field(default_factory=list)
    paused: list[dict[str, Any]] = field(default_factory=list)
    oldest_todo: list[dict[str, Any]] = field(default_factory=list)
    #: accounts parked in the window: account, kinds, reason, parked_seconds,
    #: needs_person, tasks_waited, attempts_spent
    accounts: list[dict[str, Any]] = field(default_factory=list)
    #: tasks held for a person: id, agent_id, title, question (or None: a
    #: budget), budget_usd, reason, updated_at
    waiting: list[dict[str, Any]] = field(default_factory=list)
    #: what the runs that ended in the window cost, per agent (US dollars)
    costs: dict[str, float] = field(default_factory=dict)
    #: supervised runs done in the window, per agent (where done tasks are not
    #: counted: the status page)
    runs_done: dict[str, int] | None = None
    #: runs stopped as hung (stalled or timed out) in the window, per agent:
    #: {"runs": n, "seconds": the time they took}
    hung: dict[str, dict[str, float]] = field(default_factory=dict)
    #: hosts a sandbox denied to the runs in the window, per agent: {host: times}
    denied_hosts: dict[str, dict[str, int]] = field(default_factory=dict)
    #: the night per profile (issue 44): profile, runs, cost, moved (runs
    #: whose task went on under another profile), parked_seconds
    profiles: list[dict[str, Any]] = field(default_factory=list)
    #: the done tasks with a workspace, as `afk review` gives them: what the
    #: person reads first after the night's story
    to_review: list[dict[str, Any]] = field(default_factory=list)
    #: tasks that ask for what no live loop offers (labels, profiles): id,
    #: agent_id, title, why ("waiting for a loop with gpu")
    no_loop: list[dict[str, Any]] = field(default_factory=list)
    #: failing, retrying: the tasks that spent an attempt in the window and
    #: are not done (the first 50; retrying_total counts them all): id,
    #: short_id, agent_id, title, state, spent, max_attempts, next_at (None:
    #: due now, or running again now), error (its telling line)
    retrying: list[dict[str, Any]] = field(default_factory=list)
    retrying_total: int = 0

    @property
    def stuck(self) -> bool:
        return bool(self.expired or self.paused or self.no_loop)

    @property
    def needs_person(self) -> list[dict[str, Any]]:
        """Accounts still parked until a person acts (logged out, no credit)."""
        return [a for a in self.accounts if a["needs_person"]]

    @property
    def all_clear(self) -> bool:
        return (
            self.failed_total == 0
            and not self.retrying_total
            and not self.stuck
            and not self.needs_person
            and not self.waiting
        )

    @property
    def headline(self) -> str:
        """What the digest says first, in every format: ``all clear``, or
        what needs a look (``2 failed, 3 retrying, 1 waiting for you``)."""
        if self.all_clear:
            return "all clear"
        parts = [f"{self.failed_total} failed"]
        if self.retrying_total:
            parts.append(f"{self.retrying_total} retrying")
        if self.stuck:
            parts.append("tasks stuck")
        if self.waiting:
            parts.append(f"{len(self.waiting)} waiting for you")
        if self.needs_person:
            parts.append("an account needs a person")
        return ", ".join(parts)

    @property
    def cost_total(self) -> float | None:
        return sum(self.costs.values()) if self.costs else None

    @property
    def night(self) -> list[dict[str, Any]]:
        """The night per agent: done, failed, waiting for a person, cost."""
        agents: dict[str, dict[str, Any]] = {}

        def of(agent: str) -> dict[str, Any]:
            return agents.setdefault(
                agent,
                {
                    "agent_id": agent,
                    "done": 0,
                    "failed": 0,
                    "waiting": 0,
                    "cost": None,
                    "hung": 0,
                    "hung_seconds": 0.0,
                    "denied_hosts": [],
                },
            )

        for a in self.per_agent:
            row = of(a["agent_id"])
            row["done"], row["failed"] = int(a["done"]), int(a["failed"])
        for agent, n in (self.runs_done or {}).items():
            of(agent)["done"] = max(of(agent)["done"], n)
        for w in self.waiting:
            of(w["agent_id"])["waiting"] += 1
        for agent, cost in self.costs.items():
            of(agent)["cost"] = cost
        for agent, hung in self.hung.items():
            of(agent)["hung"], of(agent)["hung_seconds"] = int(hung["runs"]), hung["seconds"]
        for agent, hosts in self.denied_hosts.items():
            most = sorted(hosts.items(), key=lambda h: (-h[1], h[0]))
            of(agent)["denied_hosts"] = [f"{host} ({n})" for host, n in most[:DENIED_HOSTS]]
        return [agents[k] for k in sorted(agents)]

    @property
    def done_total(self) -> int:
        return sum(int(a["done"]) for a in self.per_agent)

    def local(self, value: datetime | str) -> datetime:
        if isinstance(value, str):
            value = datetime.fromisoformat(value)
        return value.astimezone(self.tz)

    def to_json(self) -> dict[str, Any]:
        """The plain JSON document of the webhook format."""

        def task(t: FailedTask) -> dict[str, Any]:
            return {
                "id": t.id,
                "agent_id": t.agent_id,
                "title": t.title,
                "attempts": t.attempts,
                "max_attempts": t.max_attempts,
                "failed_at": t.when.isoformat(),
                "last_error": t.error,
                "checkpoint_keys": t.checkpoint_keys,
                "retry": t.retry,
                "link": t.link,
                "cancelled": [{"id": c.id, "title": c.title} for c in t.cancelled],
            }

        return {
            "type": "afk.digest",
            "window": {"start": self.window_start.isoformat(), "end": self.window_end.isoformat()},
            "generated_at": self.generated_at.isoformat(),
            "all_clear": self.all_clear,
            "totals": self.totals,
            "per_agent": self.per_agent,
            "failed_total": self.failed_total,
            "groups": [
                {
                    "agent_id": g.agent_id,
                    "error": g.error,
                    "count": g.count,
                    "tasks": [task(t) for t in g.tasks],
                    "more": g.more,
                }
                for g in self.groups
            ],
            "hidden_groups": self.hidden_groups,
            "hidden_failures": self.hidden_failures,
            "stuck": {
                "expired_leases": self.expired,
                "paused": self.paused,
                "oldest_todo": self.oldest_todo,
                "no_loop": self.no_loop,
            },
            "accounts": self.accounts,
            "night": self.night,
            "waiting": self.waiting,
            "to_review": self.to_review,
            "retrying": self.retrying,
            "retrying_total": self.retrying_total,
            "headline": self.headline,
            "cost_usd": self.cost_total,
        }


def build(
    db: Database,
    start: datetime,
    end: datetime,
    settings: DigestSettings,
    tz: tzinfo,
    *,
    count_done: bool = True,
    review: bool = True,
    lost_after: float = 60.0,
) -> Digest:
    """The digest of the window [start, end). ``count_done=False`` leaves
    each agent's finished count at 0: the status page's overview, whose cost
    must follow the live work, not the window's finishes. ``review``: read
    the done tasks' worktrees for "to review" (git, and `gh` for their pull
    requests). ``lost_after``: a loop not seen for that long is lost (its
    labels and profiles take nothing)."""
    from .agents.fleet import Fleet

    row = db.row(
        "digest_data",
        {
            "start": start,
            "end": end,
            "limit": FAILED_ROWS,
            "paused_after": settings.paused_after,
            "todo_late_after": settings.todo_late_after,
            "exact_below": EXACT_BELOW,
            "count_done": count_done,
            # the outcomes that wait on an account, from decide's table
            **dict(zip(("parking", "resets"), account_outcomes(), strict=True)),
        },
    )
    groups: dict[tuple[str, str], list[FailedTask]] = defaultdict(list)
    read: list[FailedTask] = []
    for f in row["failed"]:
        link = None
        if settings.link_template:
            link = settings.link_template.format(
                task_id=f["id"],
                agent_id=urllib.parse.quote(f["agent_id"], safe=""),
                idem_key=urllib.parse.quote(f["idem_key"] or "", safe=""),
            )
        task = FailedTask(
            id=f["id"],
            agent_id=f["agent_id"],
            title=f["title"],
            attempts=f["attempts"],
            max_attempts=f["max_attempts"],
            when=datetime.fromisoformat(f["updated_at"]),
            error=f["last_error"],
            checkpoint_keys=list(f["checkpoint_keys"]),
            link=link,
        )
        read.append(task)
    for task in under_roots(read):
        groups[(task.agent_id, normalise_error(task.error))].append(task)
    # an agent's groups stay together: agents by their failures, then groups by size
    per_agent: dict[str, int] = defaultdict(int)
    for (agent, _), tasks in groups.items():
        per_agent[agent] += len(tasks)
    ordered = sorted(
        groups.items(), key=lambda kv: (-per_agent[kv[0][0]], kv[0][0], -len(kv[1]), kv[0][1])
    )
    shown = [
        Group(agent, error, len(tasks), tasks[:TASKS_PER_GROUP])
        for (agent, error), tasks in ordered[: settings.max_groups]
    ]
    hidden = ordered[settings.max_groups :]
    totals = {s: int(row["totals"].get(s, 0)) for s in STATES}
    return Digest(
        window_start=start,
        window_end=end,
        generated_at=row["now"],
        tz=tz,
        totals=totals,
        per_agent=row["per_agent"],
        failed_total=int(row["failed_total"]),
        groups=shown,
        hidden_groups=len(hidden),
        hidden_failures=sum(len(t) for _, t in hidden),
        ungrouped_failures=int(row["failed_total"]) - len(row["failed"]),
        expired=row["expired"],
        paused=row["paused"],
        oldest_todo=row["oldest_todo"],
        accounts=row["accounts"],
        waiting=[{**w, "hint": waiting_hint(w)} for w in row["waiting"]],
        costs={str(k): float(v) for k, v in row["costs"].items()},
        runs_done=None if count_done else {str(k): int(n) for k, n in row["runs_done"].items()},
        hung={str(k): dict(v) for k, v in row["hung"].items()},
        denied_hosts={str(k): dict(v) for k, v in row["denied_hosts"].items()},
        profiles=list(row["profiles"]),
        to_review=_to_review(db, start, end) if review else [],
        no_loop=Fleet(db, lost_after).waiting_for_a_loop(),
        retrying=[_retrying(r) for r in row["retrying"]],
        retrying_total=int(row["retrying_total"]),
    )


def waiting_hint(w: dict[str, Any]) -> str:
    """The command that answers a task held for a person (issue 50 item 7):
    a tool call's approval, a pinned config's trust, a question's answer, a
    budget's raise."""
    if w.get("approval") is not None:
        return f"afk approve {w['approval']} (or afk deny {w['approval']} --note '...')"
    if w.get("question"):
        return question_hint(w["id"], str(w["question"]))
    return f"afk retry {short_id(w['id'])} --budget-usd N"


def question_hint(task_id: Any, question: str) -> str:
    """The command that answers a task's question: `afk trust` for a pinned
    config's (its question names that command), else `afk answer`."""
    short = short_id(task_id)
    return f"afk trust {short}" if "afk trust" in question else f"afk answer {short} '...'"


def _retrying(row: dict[str, Any]) -> dict[str, Any]:
    """A failing task that will be tried again, as every format shows it."""
    return {
        "id": row["id"],
        "short_id": short_id(row["id"]),
        "agent_id": row["agent_id"],
        "title": row["title"],
        "state": row["state"],
        "spent": int(row["spent"]),
        "max_attempts": int(row["max_attempts"]),
        "next_at": row["next_at"],
        "error": excerpt(row["last_error"]),
    }


#: tasks the digest lists to review at most
REVIEW_ROWS = 20
#: hosts denied to an agent's runs the night's story names at most (the most tried)
DENIED_HOSTS = 5


def _to_review(db: Database, start: datetime, end: datetime) -> list[dict[str, Any]]:
    from . import workspaces

    since = max((end - start).total_seconds(), 0.0)
    return workspaces.to_review(db, since_seconds=since, limit=REVIEW_ROWS)


# -- rendering -------------------------------------------------------------

_MENTION = re.compile(r"@(channel|here|everyone)\b", re.I)


def slack_escape(text: Any) -> str:
    """Agent-written text as literal Slack mrkdwn: no links, no mentions."""
    value = str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _MENTION.sub(lambda m: "@\u200b" + m.group(1), value)


def slack_url(url: str) -> str:
    """A URL fit for Slack's <url|text> syntax."""
    return urllib.parse.quote(url, safe=":/?#[]@!$&'()*+,;=%~-._")


def excerpt(text: Any, limit: int = 300) -> str:
    """A task's error in one line: the error itself when it is one line, else
    its telling line (a traceback's exception, a test summary), so that a
    long error's excerpt does not stop at its first frames."""
    value = str(text or "")
    lines = [line for line in value.strip().splitlines() if line.strip()]
    line = lines[0] if len(lines) == 1 else error_headline(value)
    return shown(line, limit)


def local_time(digest: Digest, value: datetime | str, fmt: str = "%Y-%m-%d %H:%M") -> str:
    """A time in the digest's zone, always with the zone's name."""
    if "%Z" not in fmt and "%z" not in fmt:
        fmt += " %Z"
    return digest.local(value).strftime(fmt)


def usd(value: float | None) -> str:
    """A cost as people write it: ``$0.52`` (``-`` when no run said one)."""
    return "-" if value is None else f"${value:,.2f}"


def hours(seconds: float) -> str:
    """How long an account was parked: ``2.5 h``, ``40 min``."""
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{max(round(seconds / 60), 1) if seconds > 0 else 0} min"


def template_dirs(settings: DigestSettings) -> list[str]:
    package = Path(__file__).parent
    dirs = [settings.templates_dir] if settings.templates_dir else []
    # installed from a wheel: watchdog/templates; from a checkout: ./templates
    dirs += [str(package / "templates"), str(package.parent / "templates")]
    return [d for d in dirs if Path(d).is_dir()]


def render(digest: Digest, fmt: str, settings: DigestSettings) -> str:
    import jinja2

    if fmt not in FORMATS:
        raise RenderError(f"unknown format {fmt!r} (one of {', '.join(FORMATS)})")
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(template_dirs(settings)),
        autoescape=lambda name: name is not None and ".html" in name,
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        extensions=["jinja2.ext.do"],
    )
    env.filters.update(
        slack=slack_escape,
        slack_url=slack_url,
        truncate_text=shown,
        excerpt=excerpt,
        local=lambda v, fmt="%Y-%m-%d %H:%M": local_time(digest, v, fmt),
        shell_quote=lambda v: shlex.quote(shown(v, 100)),
        hours=hours,
        usd=usd,
    )
    try:
        text = env.get_template(FORMATS[fmt]).render(d=digest, max_text=SLACK_MAX_TEXT)
    except jinja2.TemplateError as exc:
        raise RenderError(f"template {FORMATS[fmt]} failed: {exc}") from exc
    if fmt in ("slack", "webhook"):
        check_json(text, fmt)
    return text


def check_json(text: str, fmt: str) -> Any:
    try:
        payload = json.loads(text)
    except ValueError as exc:
        raise RenderError(f"the {fmt} template did not produce valid JSON: {exc}") from None
    if fmt == "slack":
        blocks = payload.get("blocks", []) if isinstance(payload, dict) else None
        if not isinstance(blocks, list) or len(blocks) > SLACK_MAX_BLOCKS:
            raise RenderError(f"a Slack message holds at most {SLACK_MAX_BLOCKS} blocks")
        for text_field in _texts(payload):
            if len(text_field) > SLACK_MAX_TEXT:
                raise RenderError(f"a Slack text field holds at most {SLACK_MAX_TEXT} characters")
    return payload


def _texts(value: Any) -> list[str]:
    if isinstance(value, dict):
        out = [value["text"]] if isinstance(value.get("text"), str) else []
        for v in value.values():
            out += _texts(v)
        return out
    if isinstance(value, list):
        return [t for v in value for t in _texts(v)]
    return []
