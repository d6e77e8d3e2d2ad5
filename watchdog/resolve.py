"""Which database a command talks to: the one resolver of a DSN.

Above the embedded server (which it may start) and below the queue (whose
``Queue.connect`` is the door from a DSN), so that the settings below it
never reach up to a server.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path

from . import embedded
from .config import Settings
from .errors import BadInput


def credential(name: str, env: Mapping[str, str] | None = None) -> str | None:
    """A secret passed by systemd's ``LoadCredential=`` (never through the
    environment): None when there is no such credential; one that exists but
    is empty, a folder or unreadable is an error, never "no credential"."""
    env = os.environ if env is None else env
    folder = env.get("CREDENTIALS_DIRECTORY")
    if not folder:
        return None
    path = Path(folder) / name
    if not os.path.lexists(path):
        return None
    try:
        text = path.read_text("utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        reason = getattr(exc, "strerror", None) or "not UTF-8"
        raise BadInput(f"the {name} credential ({path}) cannot be read: {reason}") from None
    if not text:
        raise BadInput(f"the {name} credential ({path}) is empty")
    return text


def resolve_dsn(
    dsn: str | None = None,
    *,
    settings: Settings | None = None,
    env: Mapping[str, str] | None = None,
    note: Callable[[str], None] | None = None,
) -> str:
    """The one place that decides which database a command talks to.

    In order: ``dsn`` (``--dsn``), ``AFK_DSN``, the systemd credential ``dsn``,
    the config file's ``dsn``, else the embedded server under ``AFK_HOME``,
    started if need be.

    One configuration names one database: a DSN that was given but is empty
    or blank is an error, not a reason to go on down the list; the embedded
    server is used only when nothing names a database at all, pinned against
    libpq's environment (PGHOSTADDR, PGOPTIONS…), and ``note`` is told so.
    """
    env = os.environ if env is None else env
    chosen = given_dsn(dsn, settings, env)
    if chosen is not None:
        return chosen
    started = embedded.running(embedded.home(env) / "pgdata") is None
    found = embedded.default_dsn()
    if started:  # said once, when it helps: not on every command and hook
        _embedded_note(note)
    return found


def running_dsn(
    dsn: str | None = None,
    *,
    settings: Settings | None = None,
    env: Mapping[str, str] | None = None,
    note: Callable[[str], None] | None = None,
) -> str | None:
    """:func:`resolve_dsn` for a hook, which must never start a server: the
    embedded server only if it is running already, else None."""
    env = os.environ if env is None else env
    chosen = given_dsn(dsn, settings, env)
    if chosen is not None:
        return chosen
    info = embedded.running(embedded.home(env) / "pgdata")
    if info is None:
        return None
    return embedded.client_dsn(info)


def given_dsn(dsn: str | None, settings: Settings | None, env: Mapping[str, str]) -> str | None:
    """The DSN something names, in the order above; None when nothing does."""
    given = [
        ("--dsn", dsn),
        ("AFK_DSN", env.get("AFK_DSN")),
        ("the config file's dsn", settings.dsn if settings is not None else None),
    ]
    for where, value in given:
        if value is not None and not value.strip():
            raise BadInput(
                f"{where} is empty: give a DSN, or leave it unset for the embedded server"
            )
    chosen = (
        dsn
        or env.get("AFK_DSN")
        or credential("dsn", env)
        or (settings.dsn if settings is not None else None)
    )
    if chosen:
        return chosen.strip()
    if env.get("PGSERVICE"):
        raise BadInput(
            "PGSERVICE is set but no DSN names a database: set AFK_DSN (e.g. "
            "'service=NAME'), or unset PGSERVICE to use the embedded server"
        )
    return None


def _embedded_note(note: Callable[[str], None] | None) -> None:
    if note is not None:
        note(
            "no DSN given (--dsn, AFK_DSN, a credential, the config file): "
            f"started the embedded server under {embedded.home()}"
        )
