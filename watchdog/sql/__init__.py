"""The queue's SQL: named statements from ``queries.sql`` and numbered migrations."""

from __future__ import annotations

import re
from functools import cache
from importlib import resources

_NAME = re.compile(r"^-- name: (\w+)\s*$", re.MULTILINE)


def parse(text: str) -> dict[str, str]:
    """Split a file of ``-- name: x`` blocks into {name: statement}."""
    parts = _NAME.split(text)
    queries: dict[str, str] = {}
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        if name in queries:
            raise ValueError(f"query {name!r} is defined twice")
        queries[name] = body.strip().rstrip(";")
    return queries


@cache
def queries() -> dict[str, str]:
    return parse(resources.files(__package__).joinpath("queries.sql").read_text("utf-8"))


def query(name: str) -> str:
    return queries()[name]


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
