"""One base class; the CLI maps each kind to its exit status.

Every module that logs imports this one, so the library's NullHandler is set
here (not in ``__init__``: a hook answered by the service loads no logging).
"""

from __future__ import annotations

import logging
import re
from datetime import datetime
from typing import Any

logging.getLogger("watchdog").addHandler(logging.NullHandler())

#: every exit status of ``afk``, in the one place they are defined: the
#: parser's epilog and the reference's page are written from it
EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_EMPTY, EXIT_LEASE_LOST, EXIT_PARKED, EXIT_IN_DOUBT = range(7)
EXIT_CODES: tuple[tuple[int, str, str], ...] = (
    (EXIT_OK, "ok", "the command did what it was asked"),
    (
        EXIT_USAGE,
        "bad usage or input",
        "a bad option or value, one line on stderr; nothing changed",
    ),
    (EXIT_EMPTY, "nothing to claim", "afk claim found no task the agent may take now"),
    (EXIT_LEASE_LOST, "lease lost", "the token no longer holds the task: stop working on it"),
    (
        EXIT_PARKED,
        "account parked",
        "the account is parked (a usage limit, or a login that needs a person); afk loop: "
        "the account needs a person, or the agent command cannot run",
    ),
    (
        EXIT_IN_DOUBT,
        "effect in doubt",
        "an effect was started by a call that died unrecorded: it is not run again",
    ),
    (EXIT_ERROR, "anything else", "such as an unreachable database"),
)
#: a stop by a signal: 128 + its number (afk loop: 130 on SIGINT, 143 on SIGTERM)
SIGNALLED = 128


class AfkError(Exception):
    """An afk-watchdog error."""

    exit_code = EXIT_ERROR

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message or (self.__doc__ or "").strip())


class BadInput(AfkError):
    """The request is not valid; nothing was changed."""

    exit_code = EXIT_USAGE


class TaskNotFound(BadInput):
    """No task has that id."""


class NotRunning(BadInput):
    """The task is not running, so there is nothing to finish or fail."""


class WorkspaceError(AfkError):
    """A task's worktree could not be made or used (its repository is gone,
    git refused): the run cannot start, and nothing was lost."""


class ServiceError(AfkError):
    """The watchdog service cannot start as it is configured."""


class LeaseLost(AfkError):
    """This worker no longer holds the task's lease; nothing was changed.

    The lease expired and was reclaimed, the task was paused, or another
    runner claimed it since. Stop working on it."""

    exit_code = EXIT_LEASE_LOST
    #: what a command run by ``afk once`` printed before its record was refused
    stdout: bytes | None = None


class EffectInDoubt(AfkError):
    """An effect was started under this token by a process that is gone, and
    never recorded: the call may or may not have happened. It is not run
    again under this token."""

    exit_code = EXIT_IN_DOUBT


class DatabaseError(AfkError):
    """The database could not be reached or refused the statement."""

    exit_code = EXIT_ERROR


class Conflict(DatabaseError):
    """A unique constraint refused a row (an idempotency key that exists)."""


class SchemaMissing(DatabaseError):
    """The afk tables are not there: run `afk migrate` first."""


_PASSWORD = re.compile(r"(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)|(://[^:/@]*:)([^@]*)(@)", re.I)


def dsn_secrets(conninfo: str) -> list[str]:
    """The password of a connection string in every form a message may repeat
    it: as written, percent-decoded and percent-encoded. Longest first."""
    from urllib.parse import quote, unquote

    found: list[str] = []
    if "://" in conninfo:
        rest = conninfo.split("://", 1)[1]
        userinfo = rest.rsplit("@", 1)[0] if "@" in rest else ""
        if ":" in userinfo:
            found.append(userinfo.split(":", 1)[1])
    found += [
        m.group(1).strip("'")
        for m in re.finditer(r"password\s*=\s*('(?:[^'\\]|\\.)*'|[^&\s]+)", conninfo, re.I)
    ]
    forms = {form for raw in found for form in (raw, unquote(raw), quote(unquote(raw), safe=""))}
    return sorted((f for f in forms if f), key=len, reverse=True)


def scrub(text: str, conninfo: str | None) -> str:
    """``text`` with the password of ``conninfo`` (in any form) and any DSN
    password pattern replaced by ``***``: for every message a driver error
    turns into."""
    for secret in dsn_secrets(conninfo) if conninfo else []:
        text = text.replace(secret, "***")
    return redact(text)


#: the common shapes of a credential in text an agent or a driver prints;
#: each keeps what names it and hides the secret itself
_SECRETS = re.compile(
    # keys and tokens that say what they are: Anthropic, OpenAI, GitHub,
    # Slack, AWS access key ids, JSON web tokens
    r"\b(?:sk-ant-[A-Za-z0-9_-]{8,}|sk-[A-Za-z0-9_-]{16,}|gh[opsur]_[A-Za-z0-9]{16,}"
    r"|github_pat_[A-Za-z0-9_]{16,}|xox[abposr]-[A-Za-z0-9-]{8,}|(?:AKIA|ASIA)[0-9A-Z]{16}"
    r"|eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*)"
    # an HTTP credential: Authorization: Bearer X, Basic X, token X
    r"|(?P<scheme>\b(?:Bearer|Basic|token)\s+)(?P<credential>[A-Za-z0-9._~+/=-]{8,})"
    # NAME=value, NAME: value, "name": "value" for a name that ends in KEY,
    # TOKEN, SECRET or PASSWORD (env style in capitals, or a word of its own)
    r"|(?P<name>\b(?:[A-Z0-9_]*(?:KEY|TOKEN|SECRET|PASSWORD|PASSWD)"
    r"|(?i:(?:[a-z0-9]+[_-])*(?:api|access|auth|private)?[_-]?"
    r"(?:key|token|secret|password|passwd)))['\"]?\s*[=:]\s*['\"]?)"
    r"(?P<value>(?!\*\*\*)[^\s'\",;&]+)"
)


#: what a shell acts on: a "credential" holding one is code, not a literal
_SHELL_ACTIVE = re.compile(r"[$`;|&<>(){}\\\n'\"*?!#~\[\]]")


def redact(text: str, *, literal_only: bool = False) -> str:
    """``text`` with every password of a connection string and every
    credential of a common shape (:data:`_SECRETS`) replaced by ``***``:
    the one scrubber that agent text, driver errors and log lines go
    through before they are stored, sent or printed. ``literal_only``: a
    "credential" with anything a shell acts on in it (``$(…)``, a backtick,
    ``;``, ``|``) is left as it is: a call shown for approval hides no code
    (issue 50 item 4)."""

    def kept(secret: str) -> bool:
        return literal_only and _SHELL_ACTIVE.search(secret) is not None

    def hide(m: re.Match[str]) -> str:
        if m.group(1):
            return m.group(0) if kept(m.group(2)) else m.group(1) + "***"
        return m.group(0) if kept(m.group(4)) else m.group(3) + "***" + m.group(5)

    def hide_secret(m: re.Match[str]) -> str:
        if m.group("scheme"):
            return m.group(0) if kept(m.group("credential")) else m.group("scheme") + "***"
        if m.group("name"):
            return m.group(0) if kept(m.group("value")) else m.group("name") + "***"
        return m.group(0)[:4] + "***"

    return _SECRETS.sub(hide_secret, _PASSWORD.sub(hide, text))


def redact_json(value: Any, *, literal_only: bool = False) -> Any:
    """A JSON value with :func:`redact` applied to each of its strings (a
    tool call's input, kept to be shown to a person)."""
    if isinstance(value, str):
        return redact(value, literal_only=literal_only)
    if isinstance(value, list):
        return [redact_json(v, literal_only=literal_only) for v in value]
    if isinstance(value, dict):
        return {str(k): redact_json(v, literal_only=literal_only) for k, v in value.items()}
    return value


class AccountParked(AfkError):
    """The claimer's account is parked (a usage limit, an outage, a login that
    needs a person): nothing was claimed."""

    exit_code = EXIT_PARKED

    def __init__(self, account: str, limited_until: datetime | None, reason: str) -> None:
        until = limited_until.isoformat() if limited_until else "a person clears it"
        super().__init__(f"account {account!r} is parked until {until}: {reason}")
        self.account, self.limited_until, self.reason = account, limited_until, reason

    def to_json(self) -> dict[str, str | None]:
        return {
            "account": self.account,
            "limited_until": self.limited_until.isoformat() if self.limited_until else None,
            "reason": self.reason,
        }
