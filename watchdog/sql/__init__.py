"""The SQL: named statements from the ``*.sql`` files here, and numbered migrations.

A statement starts with a header line::

    -- name: claim retry

``retry`` marks a statement that is safe to run again when the connection
was lost after it was sent (its reply may be lost, not its effect): reads,
fenced writes (a replay after a commit is refused by the fence, or, for
``done``, recognised), and writes that are idempotent by construction. Every
statement is retried when the connection failed before it was sent.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from importlib import resources

_HEADER = re.compile(r"^-- name: (\w+)((?: [\w-]+)*)\s*$", re.MULTILINE)
_FLAGS = frozenset({"retry"})


@dataclass(frozen=True)
class Statement:
    name: str
    text: str
    retry: bool = False


def parse(text: str) -> dict[str, Statement]:
    """Split a file of ``-- name: x [flags]`` blocks into {name: Statement}."""
    parts = _HEADER.split(text)
    found: dict[str, Statement] = {}
    for name, flags, body in zip(parts[1::3], parts[2::3], parts[3::3], strict=True):
        if name in found:
            raise ValueError(f"query {name!r} is defined twice")
        given = set(flags.split())
        if given - _FLAGS:
            raise ValueError(f"query {name!r}: unknown flags {sorted(given - _FLAGS)}")
        found[name] = Statement(name, body.strip().rstrip(";"), "retry" in given)
    return found


@cache
def statements() -> dict[str, Statement]:
    """Every statement of every ``*.sql`` file here: one file per owner (the
    queue's ``queries.sql``, the status pages' ``web.sql``); a name is
    defined once across them."""
    found: dict[str, Statement] = {}
    for entry in sorted(resources.files(__package__).iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".sql"):
            for name, statement in parse(entry.read_text("utf-8")).items():
                if name in found:
                    raise ValueError(f"query {name!r} is defined twice ({entry.name})")
                found[name] = statement
    return found


def statement(name: str) -> Statement:
    return statements()[name]


def query(name: str) -> str:
    return statements()[name].text


def migrations() -> list[tuple[int, str, str]]:
    """(version, file name, SQL) for every migration, in order."""
    folder = resources.files("watchdog").joinpath("migrations")
    found = []
    for entry in folder.iterdir():
        match = re.fullmatch(r"(\d{4})_\w+\.sql", entry.name)
        if match:
            found.append((int(match.group(1)), entry.name, entry.read_text("utf-8")))
    found.sort()
    versions = [v for v, _, _ in found]
    if versions != list(range(1, len(versions) + 1)):
        raise RuntimeError(f"migration numbers must run 1..n without gaps: {versions}")
    return found
