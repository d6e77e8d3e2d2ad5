"""Typed settings, read from ``AFK_*`` environment variables (and, for the
service, an optional TOML file) and checked as a whole before anything runs."""

from __future__ import annotations

import os
import re
import stat
import tomllib
from collections.abc import Mapping
from dataclasses import MISSING, dataclass, field, fields, replace
from datetime import tzinfo
from pathlib import Path
from typing import Any, TypeVar, get_type_hints

from .agents import credential
from .errors import BadInput

S = TypeVar("S")

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|sec|m|min|h|d|w)?\s*$", re.I)
_UNIT = {"ms": 0.001, "s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600, "d": 86400, "w": 604800}


def is_utf8(text: str) -> bool:
    """Whether a str can be written as UTF-8 (no lone surrogate: what Python
    makes of bytes that were not UTF-8 in an argument or a variable)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def parse_negative(text: Any) -> str:
    """What a negative duration is told, wherever it is given."""
    return f"{text!r} is negative: a duration is 0 or more (90s, 15m, 2h, 7d)"


def parse_duration(text: str) -> float:
    """``90``, ``90s``, ``15m``, ``2h``, ``7d`` -> seconds."""
    if str(text).strip().startswith("-"):
        raise BadInput(parse_negative(text))
    match = _DURATION.match(str(text))
    if not match:
        raise BadInput(f"not a duration: {text!r} (use e.g. 90s, 15m, 2h, 7d)")
    return float(match.group(1)) * _UNIT[(match.group(2) or "s").lower()]


def env_name(field_name: str, prefix: str = "AFK_") -> str:
    return prefix + field_name.upper()


def _convert(name: str, kind: type, raw: Any, duration: bool) -> Any:
    import math

    try:
        if isinstance(raw, str) and kind in (int, float) and "_" in raw:
            raise ValueError(raw)  # Python's 1_000 is no number to a person
        if kind is bool:
            if isinstance(raw, bool):
                return raw
            text = str(raw).strip().lower()
            if text in ("1", "true", "yes", "on"):
                return True
            if text in ("0", "false", "no", "off"):
                return False
            raise ValueError(raw)
        if kind is float and duration and isinstance(raw, str):
            return parse_duration(raw)
        if kind is int and isinstance(raw, float) and not raw.is_integer():
            raise ValueError(raw)
        if kind in (int, float) and isinstance(raw, bool):
            raise ValueError(raw)
        value = kind(raw)
        if kind is float and not math.isfinite(value):
            raise ValueError(raw)
        return value
    except (TypeError, ValueError, BadInput):
        if duration and str(raw).strip().startswith("-"):  # (a negative's one message)
            raise BadInput(f"{name}={parse_negative(raw)}") from None
        raise BadInput(
            f"{name}={raw!r} is not a valid {kind.__name__}" + (" or duration" if duration else "")
        ) from None


def load(
    cls: type[S], env: Mapping[str, str] | None = None, file_values: Mapping[str, Any] | None = None
) -> S:
    """Build settings ``cls`` from defaults < TOML values < ``AFK_*`` env vars."""
    env = os.environ if env is None else env
    hints = get_type_hints(cls)
    prefix = getattr(cls, "ENV_PREFIX", "AFK_")
    values: dict[str, Any] = {}
    for f in fields(cls):  # type: ignore[arg-type]
        kind = hints[f.name]
        duration = f.metadata.get("duration", False)
        name = f.metadata.get("env") or env_name(f.name, prefix)
        if file_values and f.name in file_values:
            values[f.name] = _convert(f.name, kind, file_values[f.name], duration)
        raw = env.get(name)
        if raw is not None and raw.strip() != "":
            values[f.name] = _convert(name, kind, raw, duration)
    return cls(**values)


#: the largest settings file afk reads (R11: `--config /dev/zero` ran out of
#: memory; a settings file is a few kilobytes)
MAX_CONFIG_BYTES = 1 << 20


def read_toml(path: str | Path) -> dict[str, Any]:
    """The settings file, read once and bounded: a regular file (a device or
    a pipe is refused before it is opened: it could be endless, or block) of
    at most :data:`MAX_CONFIG_BYTES`."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            raise BadInput(f"config file {path} is not a regular file")
        with open(path, "rb") as handle:
            raw = handle.read(MAX_CONFIG_BYTES + 1)
    except OSError as exc:
        raise BadInput(f"cannot read config file {path}: {exc.strerror}") from None
    if len(raw) > MAX_CONFIG_BYTES:
        raise BadInput(f"config file {path} is larger than {MAX_CONFIG_BYTES} bytes")
    try:
        return tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise BadInput(f"config file {path} is not UTF-8") from None
    except tomllib.TOMLDecodeError as exc:
        raise BadInput(f"config file {path} is not valid TOML: {exc}") from None


def describe(cls: type) -> list[tuple[str, Any, str]]:
    """(env var, default, help) of every field, for --help. Secrets show no value."""
    out = []
    prefix = getattr(cls, "ENV_PREFIX", "AFK_")
    for f in fields(cls):
        default = f.default if f.default is not MISSING else None
        if f.metadata.get("secret"):
            default = "(secret)"
        elif default == "":
            default = "-"
        name = f.metadata.get("env") or env_name(f.name, prefix)
        out.append((name, default, f.metadata.get("help", "")))
    return out


def _field(
    default: Any, help: str, duration: bool = False, secret: bool = False, env: str | None = None
) -> Any:
    return field(
        default=default,
        repr=not secret,
        metadata={"help": help, "duration": duration, "secret": secret, "env": env},
    )


@dataclass(frozen=True)
class QueueSettings:
    """How the queue behaves. Each field has an ``AFK_<NAME>`` env var."""

    lease_seconds: int = _field(
        120, "default lease of a claim, seconds (kept alive by a heartbeat every third of it)"
    )
    backoff_base_seconds: float = _field(30.0, "first retry delay after a failure; doubles")
    backoff_cap_seconds: float = _field(3600.0, "the longest retry delay")
    max_attempts: int = _field(5, "max_attempts of a task enqueued without one")
    max_json_bytes: int = _field(1024 * 1024, "largest spec, checkpoint or result, bytes")
    reclaim_batch: int = _field(500, "rows per reclaim statement")
    command_timeout: float = _field(
        10.0, "longest statement of a CLI command, seconds (0: none; afk migrate has none)"
    )

    def __post_init__(self) -> None:
        problems = []
        if self.lease_seconds <= 0:
            problems.append("lease_seconds must be positive")
        if self.backoff_base_seconds < 0:
            problems.append("backoff_base_seconds must not be negative")
        if self.backoff_cap_seconds < self.backoff_base_seconds:
            problems.append("backoff_cap_seconds must not be less than backoff_base_seconds")
        if self.max_attempts < 1:
            problems.append("max_attempts must be at least 1")
        if self.max_json_bytes < 2:
            problems.append("max_json_bytes must be at least 2")
        if self.reclaim_batch < 1:
            problems.append("reclaim_batch must be at least 1")
        if not 0 <= self.command_timeout <= 3600:
            problems.append("command_timeout must be from 0 to 3600 seconds")
        if problems:
            raise BadInput("invalid settings: " + "; ".join(problems))

    @classmethod
    def from_env(
        cls, env: Mapping[str, str] | None = None, file_values: Mapping[str, Any] | None = None
    ) -> QueueSettings:
        return load(cls, env, file_values)


@dataclass(frozen=True)
class ServiceSettings:
    """The watchdog service. Durations take 90, 90s, 15m, 2h or 7d."""

    reclaim_interval: float = _field(60.0, "how often expired leases are reclaimed", True)
    alert_interval: float = _field(
        3.0,
        "how often new approval requests and questions are looked for and pushed to a "
        "person (two small index reads; no LISTEN, so a pooler in transaction mode works)",
        True,
    )
    gauges_interval: float = _field(15.0, "how often the gauges are refreshed", True)
    poison_interval: float = _field(3600.0, "how often failed tasks are surfaced", True)
    poison_window: float = _field(3600.0, "failed within this long counts as a poison pill", True)
    poison_alert: bool = _field(False, "also post poison pills to the digest destinations")
    prune_interval: float = _field(86400.0, "how often old done tasks are deleted", True)
    retention: float = _field(30 * 86400.0, "done tasks older than this are deleted", True)
    prune_batch: int = _field(1000, "rows per prune statement")
    leader_interval: float = _field(
        15.0,
        "how often a replica renews or takes the leader lease (which lasts three of these)",
        True,
    )
    metrics_addr: str = _field("127.0.0.1:9464", "host:port of /metrics and /healthz")
    metrics_agents: int = _field(20, "agent_id label for this many largest agents (0: none)")
    misfire_grace: float = _field(30.0, "a job this late still runs", True)
    statement_timeout: float = _field(30.0, "longest statement of a job", True)
    shutdown_timeout: float = _field(10.0, "on SIGTERM, wait this long for a running job", True)
    log_format: str = _field("text", "text or json (one JSON object per line, for journald)")
    public_url: str = _field(
        "",
        "the address people reach the status pages at, e.g. "
        "https://afk.example.com (the digest then links each task's page)",
    )
    web_token: str = _field(
        "",
        "token the status pages require (needed when metrics_addr is not a loopback address)",
        secret=True,
    )
    web_require_token: bool = _field(
        False,
        "require the token on a loopback address too (behind a reverse proxy, whoever "
        "reaches the proxy reaches the pages)",
    )
    hook_socket: str = _field(
        "",
        "the Unix socket on which the service answers `afk hook` for processes of its "
        "user (empty: afk-hooks/service.sock in XDG_RUNTIME_DIR or /run/user/UID, else "
        "afk-hooks-UID/service.sock under TMPDIR; off: none); the hooks "
        "read AFK_HOOK_SOCKET from their environment",
    )
    hook_http: str = _field(
        "",
        "a loopback host:port on which the service answers Claude Code's HTTP hooks "
        "(afk hooks claude --transport http; empty: off)",
    )
    hook_token: str = _field(
        "",
        "the bearer token an HTTP hook must carry (its settings name $AFK_HOOK_TOKEN: "
        "give the agents the same variable)",
        secret=True,
    )

    def __post_init__(self) -> None:
        problems = []
        for f in fields(self):
            value = getattr(self, f.name)
            if f.metadata.get("duration") and not value > 0:
                problems.append(f"{f.name} must be positive")
        if self.prune_batch < 1:
            problems.append("prune_batch must be at least 1")
        if self.alert_interval > 60:
            problems.append("alert_interval must be at most 60 seconds (a person waits on it)")
        if self.metrics_agents < 0:
            problems.append("metrics_agents must not be negative")
        if self.log_format not in ("text", "json"):
            problems.append("log_format must be text or json")
        if self.public_url and not re.match(r"^https?://[^\s/]+", self.public_url):
            problems.append("public_url must be an http(s):// address")
        if self.web_require_token and not self.web_token:
            problems.append("web_require_token is on but web_token (AFK_WEB_TOKEN) is not set")
        if self.web_token and (
            not self.web_token.isprintable() or self.web_token.strip() != self.web_token
        ):
            problems.append("web_token must be printable, with no space at either end")
        try:
            self.metrics_host_port()
        except ValueError as exc:
            problems.append(str(exc))
        if self.hook_http:
            try:
                self.hook_http_host_port()
            except ValueError as exc:
                problems.append(str(exc))
            if len(self.hook_token) < 16:
                problems.append(
                    "hook_http is set: AFK_HOOK_TOKEN must be set too, 16 characters or more"
                )
            elif not all(33 <= ord(c) <= 126 for c in self.hook_token):
                # (an HTTP header is read as latin-1: a token of other characters,
                # or with a space or a newline, never matches, P25)
                problems.append("hook_token (AFK_HOOK_TOKEN) must be printable ASCII, no spaces")
        if problems:
            raise BadInput("invalid settings: " + "; ".join(problems))

    def hook_http_host_port(self) -> tuple[str, int]:
        """AFK_HOOK_HTTP as (host, port): a loopback address only, for no hook
        is ever answered from anywhere else."""
        import ipaddress

        host, sep, port = self.hook_http.rpartition(":")
        if not sep or not port.isdigit() or int(port) > 65535:
            raise ValueError(f"hook_http must be host:port, not {self.hook_http!r}")
        host = host.strip("[]") or "127.0.0.1"
        try:
            loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
        except ValueError:
            loopback = False
        if not loopback:
            raise ValueError(f"hook_http must be a loopback address, not {host}")
        return host, int(port)

    def metrics_host_port(self) -> tuple[str, int]:
        host, sep, port = self.metrics_addr.rpartition(":")
        if not sep or not port.isdigit() or int(port) > 65535:
            raise ValueError(f"metrics_addr must be host:port, not {self.metrics_addr!r}")
        return host.strip("[]") or "0.0.0.0", int(port)

    def check_against(self, queue: QueueSettings) -> None:
        """Rules that relate the service to the queue."""
        if self.reclaim_interval > queue.lease_seconds:
            raise BadInput(
                f"invalid settings: the reclaim interval ({self.reclaim_interval:g}s) is longer "
                f"than the default lease ({queue.lease_seconds}s): an expired lease would wait "
                "longer than the lease itself to be reclaimed. Lower AFK_RECLAIM_INTERVAL or "
                "raise AFK_LEASE_SECONDS."
            )


#: how long an approval request waits for a person: by default, at least and
#: at most (the loop's setting, its --approval-ttl and the hook that records
#: a request all read these); and what it becomes when no one decided
DEFAULT_APPROVAL_TTL = 12 * 3600.0
APPROVAL_TTL_BOUNDS = (60.0, 30 * 86400.0)
ON_APPROVAL_TIMEOUT = ("deny", "hold")


def approval_ttl_problem(seconds: float) -> str | None:
    """What is wrong with a request's time to live, or None."""
    low, high = APPROVAL_TTL_BOUNDS
    return None if low <= seconds <= high else "must be from 1 minute to 30 days"


def approval_ttl(given: float | None) -> float:
    """A request's time to live as a run was given it, held to the bounds."""
    low, high = APPROVAL_TTL_BOUNDS
    return DEFAULT_APPROVAL_TTL if given is None else min(max(given, low), high)


@dataclass(frozen=True)
class LoopSettings:
    """A supervisor (``afk loop``) and how it reads the agent's account."""

    limit_probe_first_seconds: float = _field(
        60.0,
        "a usage limit that names no reset is probed again after this long first, "
        "doubled for each such limit in a row up to AFK_LIMIT_PROBE_SECONDS",
        True,
    )
    limit_probe_seconds: float = _field(
        900.0, "the longest a usage limit that names no reset parks the account", True
    )
    transient_backoff_seconds: float = _field(
        30.0, "a provider outage's task is retried after this long; doubles in a row", True
    )
    transient_backoff_cap_seconds: float = _field(900.0, "the longest outage backoff", True)
    outage_breaker: int = _field(
        3, "outages in a row that park the account for the backoff (a circuit breaker)"
    )
    sandbox: bool = _field(
        False, "run every run of afk loop inside the sandbox runtime (afk loop --sandbox)"
    )
    allow_hosts: str = _field(
        "", "hosts a sandboxed run may reach besides its model API, comma-separated"
    )
    srt: str = _field("", "the sandbox runtime's command (default: srt on PATH)")
    fleet_lost_seconds: float = _field(
        60.0,
        "a loop not heard of for this long is shown as lost (afk loops); it beats 4 times as often",
        True,
    )
    ask_for: str = _field(
        "",
        "tool calls a person must approve (afk loop --ask-for), one permission rule a line: "
        "Bash(git push:*), WebFetch, mcp__deploy__*",
    )
    approval_ttl_seconds: float = _field(
        DEFAULT_APPROVAL_TTL,
        "how long an approval request waits for a person, 1 minute to 30 days "
        "(afk loop --approval-ttl)",
        True,
    )
    on_approval_timeout: str = _field(
        "deny", "what a request no one decided in time becomes: deny or hold"
    )
    limit_patterns: str = _field(
        "",
        "more patterns, one a line: [usage_limit|outage|needs_human:]REGEX, "
        "with an optional (?P<reset>...) group",
    )
    stay_for_approvals: bool = _field(
        True,
        "a loop whose tasks wait for a person's approval stays for the decision and "
        "takes the task again within seconds, in the same session (false: it ends when "
        "nothing else is due, and a later loop takes it)",
    )
    loop_poll_seconds: float = _field(
        10.0,
        "how often `afk loop --wait` looks for new tasks (and any loop for a task held "
        "by a lease or a concurrency key)",
        True,
    )
    agent_grace_seconds: float = _field(
        10.0, "on a stop, how long the agent has after SIGTERM before SIGKILL", True
    )
    daily_budget_usd: float = _field(
        0.0,
        "what one account's runs may cost a day, US dollars (0: no limit); reached, the "
        "account is parked until midnight (AFK_DIGEST_TZ)",
    )
    stall_seconds: float = _field(
        900.0,
        "a run whose agent printed no line and fired no hook for this long is stopped "
        "as stalled (afk loop --stall-after)",
        True,
    )
    ports_per_task: int = _field(
        10, "ports a task's workspace holds (AFK_PORT is the first; no two live tasks overlap)"
    )
    verify_timeout_seconds: float = _field(
        600.0, "how long a task's check (--verify) may take before it counts as failed", True
    )
    max_run_seconds: float = _field(
        0.0,
        "a run still going after this long is stopped as timed out, an attempt spent "
        "(0: no cap; afk loop --max-run)",
        True,
    )

    def __post_init__(self) -> None:
        problems = [
            f"{f.name} must be positive"
            for f in fields(self)
            if f.metadata.get("duration")
            and not getattr(self, f.name) > 0
            and not (f.name == "max_run_seconds" and self.max_run_seconds == 0)
        ]
        if self.transient_backoff_cap_seconds < self.transient_backoff_seconds:
            problems.append(
                "transient_backoff_cap_seconds must not be less than transient_backoff_seconds"
            )
        if self.outage_breaker < 1:
            problems.append("outage_breaker must be at least 1")
        if not 1 <= self.ports_per_task <= 1000:
            problems.append("ports_per_task must be from 1 to 1000")
        if not 0 <= self.daily_budget_usd <= 1_000_000:
            problems.append("daily_budget_usd must be from 0 (none) to 1000000")
        ttl = approval_ttl_problem(self.approval_ttl_seconds)
        if ttl is not None:
            problems.append(f"approval_ttl_seconds {ttl}")
        if self.on_approval_timeout not in ON_APPROVAL_TIMEOUT:
            problems.append("on_approval_timeout must be deny or hold")
        if problems:
            raise BadInput("invalid settings: " + "; ".join(problems))
        if self.limit_patterns.strip():  # (the built-in ones need no check on every start)
            from .agents.outcome import compile_patterns

            compile_patterns(self.limit_patterns)


_HH_MM = re.compile(r"^([01]?\d|2[0-3]):([0-5]\d)$")


@dataclass(frozen=True)
class DigestSettings:
    """The morning digest: where it goes, when, and what it shows."""

    ENV_PREFIX = "AFK_DIGEST_"

    slack_url: str = _field("", "Slack incoming webhook URL", secret=True)
    webhook_url: str = _field("", "generic webhook URL (POST of the JSON digest)", secret=True)
    webhook_secret: str = _field("", "HMAC-SHA256 key signing the webhook", secret=True)
    smtp_url: str = _field(
        "", "smtp://user:pass@host:587 (STARTTLS) or smtps://...:465", secret=True
    )
    smtp_cafile: str = _field("", "CA file to verify the SMTP server with (default: system)")
    ntfy_url: str = _field(
        "", "an ntfy topic URL (https://ntfy.sh/your-secret-topic): pushes to a phone", secret=True
    )
    ntfy_token: str = _field("", "the ntfy topic's access token, if it has one", secret=True)
    email_to: str = _field("", "recipients, comma-separated")
    email_from: str = _field("", "sender address")
    at: str = _field("08:00", "time of day of the digest (HH:MM)")
    tz: str = _field(
        "", "IANA time zone of AFK_DIGEST_AT and of the times shown (default: the system's)"
    )
    cron: str = _field("", "a crontab expression instead of AFK_DIGEST_AT (e.g. '0 8 * * 1-5')")
    all_clear: bool = _field(True, "send a short all-clear when there is nothing to report")
    question_alert: bool = _field(
        True, "tell the destinations at once when an agent asks a person (afk ask)"
    )
    notify_every: float = _field(
        900.0,
        "when many approval requests pile up, one summary of them at most this often "
        "(afk watchdog run --notify-every)",
        True,
    )
    link_template: str = _field("", "per-task link, e.g. https://tracker/{agent_id}/{task_id}")
    trace_url: str = _field(
        "",
        "a run's trace in your tracing tool, e.g. https://jaeger.example/trace/{trace_id} "
        "(the task page links each run's trace)",
        env="AFK_TRACE_URL",
    )
    paused_after: float = _field(6 * 3600.0, "a task paused this long counts as stuck", True)
    todo_late_after: float = _field(
        6 * 3600.0, "an agent's oldest todo this old counts as waiting too long", True
    )
    max_groups: int = _field(20, "error groups shown in full; the rest are counted")
    check_interval: float = _field(60.0, "how often the service checks for a due digest", True)
    timeout: float = _field(10.0, "HTTP and SMTP timeout", True)
    retry_base: float = _field(30.0, "first retry delay of a failed delivery; doubles", True)
    retry_cap: float = _field(600.0, "the longest retry delay", True)
    lease: float = _field(120.0, "a sender's claim on a delivery expires after this", True)
    templates_dir: str = _field(
        "", "a folder of templates overriding the shipped ones", env="AFK_TEMPLATES_DIR"
    )

    def day_zone(self) -> tzinfo:
        """The zone of the person's day: the digest's hour and the times it
        shows, the daily budget's midnight (``tz``, else this host's). The
        one resolver of it; a time in an agent's words is read in
        :func:`watchdog.agents.outcome.reading_zone`."""
        if self.tz:
            import zoneinfo

            return zoneinfo.ZoneInfo(self.tz)
        import tzlocal

        zone: tzinfo = tzlocal.get_localzone()
        return zone

    def __post_init__(self) -> None:
        problems = []
        for name in ("slack_url", "webhook_url", "ntfy_url"):
            value = getattr(self, name)
            if value and not re.match(r"^https?://[^\s/]+", value):
                problems.append(f"{name} must be an http(s) URL")
        if self.webhook_url and not self.webhook_secret:
            problems.append(
                "webhook_url needs webhook_secret (AFK_DIGEST_WEBHOOK_SECRET) to sign what it sends"
            )
        email = (self.smtp_url, self.email_to, self.email_from)
        if any(email) and not all(email):
            problems.append("email needs smtp_url, email_to and email_from together")
        if self.smtp_url and not re.match(r"^smtps?://[^\s/]+", self.smtp_url):
            problems.append("smtp_url must start with smtp:// or smtps://")
        if not _HH_MM.match(self.at):
            problems.append(f"at must be HH:MM, not {self.at!r}")
        if self.tz:
            try:
                import zoneinfo

                zoneinfo.ZoneInfo(self.tz)
            except (ValueError, zoneinfo.ZoneInfoNotFoundError):
                problems.append(f"tz {self.tz!r} is not an IANA time zone")
        if self.cron:
            try:
                from apscheduler.triggers.cron import CronTrigger

                CronTrigger.from_crontab(self.cron)
            except ValueError as exc:
                problems.append(f"cron {self.cron!r} is not valid: {exc}")
        for f in fields(self):
            if f.metadata.get("duration") and not getattr(self, f.name) > 0:
                problems.append(f"{f.name} must be positive")
        if self.templates_dir and not Path(self.templates_dir).is_dir():
            problems.append(
                f"templates_dir {self.templates_dir} is not a folder (AFK_TEMPLATES_DIR)"
            )
        if self.link_template:
            problems += _link_template_problems(self.link_template)
        if self.trace_url:
            problems += _trace_url_problems(self.trace_url)
        if self.retry_cap < self.retry_base:
            problems.append("retry_cap must not be less than retry_base")
        if not 1 <= self.max_groups <= 40:
            problems.append("max_groups must be from 1 to 40 (a Slack message holds 50 blocks)")
        if problems:
            raise BadInput("invalid digest settings: " + "; ".join(problems))

    def destinations(self) -> list[str]:
        """The destinations these settings turn on, in :data:`DESTINATIONS`' order."""
        return [name for name, switch in DESTINATIONS if getattr(self, switch)]


#: the digest's destinations: each one's name and the setting that turns it on.
#: Its class is ``destinations.SENDERS[name]`` (tests/unit/test_settings.py
#: checks that the two name the same destinations).
DESTINATIONS: tuple[tuple[str, str], ...] = (
    ("slack", "slack_url"),
    ("webhook", "webhook_url"),
    ("email", "smtp_url"),
    ("ntfy", "ntfy_url"),
)


def no_destination() -> str:
    """What to say when no destination is configured: the variables that
    configure one."""
    names = [env_name(switch, DigestSettings.ENV_PREFIX) for _, switch in DESTINATIONS]
    return f"no digest destination is configured ({', '.join(names[:-1])} or {names[-1]})"


#: the fields a digest link may name
LINK_FIELDS = ("task_id", "agent_id", "idem_key")


def _trace_url_problems(template: str) -> list[str]:
    """AFK_TRACE_URL: an http(s) address that names {trace_id}, and nothing else."""
    import string

    if not re.match(r"^https?://[^\s]+$", template):
        return ["trace_url (AFK_TRACE_URL) must be an http(s):// address"]
    try:
        named = [f for _, f, _, _ in string.Formatter().parse(template) if f is not None]
    except ValueError as exc:
        return [f"trace_url (AFK_TRACE_URL) is not a valid template: {exc}"]
    if named != ["trace_id"]:
        return ["trace_url (AFK_TRACE_URL) must name {trace_id}, once, and nothing else"]
    return []


def _link_template_problems(template: str) -> list[str]:
    """A link template names only {task_id}, {agent_id} and {idem_key}, as
    they are (no attribute, index or conversion: a typo must fail here, not
    while the digest is sent)."""
    import string

    try:
        parts = [(f, spec, conv) for _, f, spec, conv in string.Formatter().parse(template)]
    except ValueError as exc:
        return [f"link_template is not a valid template: {exc}"]
    named = [(f, spec, conv) for f, spec, conv in parts if f is not None]
    bad = [f for f, _, _ in named if f not in LINK_FIELDS]
    if bad or any(spec or conv for _, spec, conv in named):
        which = ", ".join("{" + f + "}" for f in bad) or "a format spec or conversion"
        return [
            f"link_template names {which}; it may name only "
            + ", ".join("{" + f + "}" for f in LINK_FIELDS)
        ]
    return []


def load_digest(
    file_values: Mapping[str, Any] | None = None, env: Mapping[str, str] | None = None
) -> DigestSettings:
    section = (file_values or {}).get("digest") or {}
    if not isinstance(section, Mapping):
        raise BadInput("config file: [digest] must be a table")
    known = {f.name for f in fields(DigestSettings)}
    unknown = sorted(k for k in section if k not in known)
    if unknown:
        raise BadInput(f"config file: unknown digest setting(s) {', '.join(unknown)}")
    return load(DigestSettings, env, section)


@dataclass(frozen=True)
class Settings:
    queue: QueueSettings
    service: ServiceSettings
    digest: DigestSettings
    #: the config file's dsn, if any (--dsn and AFK_DSN come first)
    dsn: str | None = field(default=None, repr=False)
    loop: LoopSettings = field(default_factory=LoopSettings)

    def check_service(self) -> None:
        """The rules that relate the service's settings to the others: checked
        where the service starts, so that a worker's short lease is not refused
        for the sake of a service it does not run."""
        self.service.check_against(self.queue)
        if self.service.poison_alert and not self.digest.destinations():
            raise BadInput(f"invalid settings: poison_alert is on but {no_destination()}")


def load_all(config_path: str | None = None, env: Mapping[str, str] | None = None) -> Settings:
    """All settings from the TOML file (``--config`` or ``AFK_CONFIG``) and the
    environment, checked together: defaults < TOML < ``AFK_*``. This is the one
    loader every entry point (CLI, hooks, service, demo, ``Queue.connect``) uses."""
    env = os.environ if env is None else env
    path = config_path or env.get("AFK_CONFIG")
    file_values = read_toml(path) if path else {}
    known = {f.name for cls in (QueueSettings, ServiceSettings, LoopSettings) for f in fields(cls)}
    extra_known = {"dsn", "digest"}
    unknown = sorted(k for k in file_values if k not in known | extra_known)
    if unknown:
        raise BadInput(f"config file {path}: unknown setting(s) {', '.join(unknown)}")
    warn_unknown_env(env)
    if credential.BROKER in env:
        # the afk an agent runs: what its run gave it (its ports, the hooks'
        # socket and token) is the run's, never one of its settings
        env = {k: v for k, v in env.items() if k not in credential.GIVEN}
    queue = load(QueueSettings, env, file_values)
    service = load(ServiceSettings, env, file_values)
    digest = load_digest(file_values, env)
    loop = load(LoopSettings, env, file_values)
    if service.public_url and not digest.link_template:
        # the digest links each task to its status page
        digest = replace(digest, link_template=service.public_url.rstrip("/") + "/tasks/{task_id}")
    dsn = file_values.get("dsn")
    if dsn is not None and not isinstance(dsn, str):
        raise BadInput(f"config file {path}: dsn must be a string")
    return Settings(queue, service, digest, dsn, loop)


#: what afk reads that is not a setting of the tables above, and what each is
READ_ELSEWHERE = {
    "AFK_DSN": "the PostgreSQL connection string (default: the embedded server)",
    "AFK_CONFIG": "a TOML file of settings",
    "AFK_HOME": "where the embedded server keeps its data (default "
    "~/.local/share/afk-watchdog, /var/lib/afk-watchdog for root)",
    "AFK_LOG_LEVEL": "the service's log level (default INFO)",
    "AFK_AGENT_ID": "the default of --agent",
    "AFK_RUNNER_ID": "the default of --runner",
    "AFK_ACCOUNT": "the default of --account (else: default)",
    "AFK_TEST_DSN": "the tests' server: any PostgreSQL where they may create databases",
}
OTHER_ENV = (
    *READ_ELSEWHERE,
    *credential.NAMES,
    credential.BROKERED,
    # what afk doctor --live sets for the hooks it fires (P28)
    "AFK_HOOK_EXPLAIN",
    # what afk gives an agent (credential.GIVEN): read by the afk an agent runs
    *credential.GIVEN,
)


def setting_names() -> list[str]:
    """The variable of every setting of the tables."""
    names = []
    for cls in (QueueSettings, ServiceSettings, LoopSettings, DigestSettings):
        prefix = getattr(cls, "ENV_PREFIX", "AFK_")
        names += [f.metadata.get("env") or env_name(f.name, prefix) for f in fields(cls)]
    return names


def known_env() -> list[str]:
    return [*OTHER_ENV, *setting_names()]


#: what afk gives an agent's run (credential.GIVEN) that is also a setting:
#: inside a run (its broker in the environment) afk reads none of it as one
GIVEN_NOT_SETTINGS = tuple(sorted(set(credential.GIVEN) & set(setting_names())))


def warn_unknown_env(env: Mapping[str, str]) -> None:
    """A typo in a variable name would silently leave a setting at its default:
    say so, naming the closest known variable (never the value)."""
    import difflib
    import logging

    known = known_env()
    for name in sorted(env):
        if name.startswith("AFK_") and name not in known:
            close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
            hint = f" (did you mean {close[0]}?)" if close else ""
            logging.getLogger(__name__).warning("unknown setting %s is ignored%s", name, hint)
