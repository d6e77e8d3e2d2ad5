"""Profiles (issue 44): one way to run an agent each — its harness, its
command, the environment it needs (``CLAUDE_CONFIG_DIR`` for a second
subscription, say) and the account its usage limits park (the profile's
name unless given) — kept in the database, so that loops on several
machines share them. ``afk loop --profile A --profile B`` runs each task
under the first whose account is not parked. afk never stores a credential:
an environment variable whose name says it is one is refused."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ..checks import check_id
from ..db import Database, json_param
from ..errors import BadInput
from .harnesses import HARNESSES
from .sandbox import harness_of

#: an --env name that says it holds a credential (refused: afk stores none)
SECRET = re.compile(r"(?:_KEY|_TOKEN|_SECRET)$|PASSWORD", re.IGNORECASE)
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")


@dataclass(frozen=True)
class Profile:
    name: str
    harness: str
    command: list[str]
    env: dict[str, str]
    account: str

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> Profile:
        return cls(row["name"], row["harness"], list(row["command"]), dict(row["env"]),
                   row["account"])  # fmt: skip

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "harness": self.harness, "command": self.command,
                "env": self.env, "account": self.account}  # fmt: skip


def parse_env(given: Iterable[str]) -> dict[str, str]:
    """``K=V`` pairs; a name that looks like a secret is refused with the
    line that says where to keep it."""
    out: dict[str, str] = {}
    for pair in given:
        name, eq, value = pair.partition("=")
        if not eq or not ENV_NAME.match(name):
            raise BadInput(f"--env {pair!r} is not NAME=VALUE")
        if SECRET.search(name):
            raise BadInput(
                f"--env {name} looks like a secret: afk stores no credentials; keep it in "
                "the harness's own config (its login, its settings) or in the loop's environment"
            )
        if "\x00" in value or len(value) > 4096:
            raise BadInput(f"--env {name}: the value must be text of at most 4096 characters")
        out[name] = value
    return out


class Profiles:
    def __init__(self, db: Database) -> None:
        self.db = db

    def add(
        self,
        name: str,
        command: Sequence[str],
        *,
        harness: str | None = None,
        env: Iterable[str] = (),
        account: str | None = None,
    ) -> Profile:
        name = check_id("profile", name)
        if not command or not command[0]:
            raise BadInput("no agent command given: afk profile add NAME -- CMD [ARG...]")
        found = harness or harness_of(command) or "other"
        if harness is not None and harness not in HARNESSES:
            raise BadInput(f"--harness {harness!r}: one of {', '.join(sorted(HARNESSES))}")
        row = self.db.one(
            "profile_add",
            {
                "name": name,
                "harness": found,
                "command": list(command),
                "env": json_param(parse_env(env)),
                "account": check_id("account", account or name),
            },
        )
        if row is None:
            raise BadInput(f"a profile {name!r} exists already: afk profile remove {name} first")
        return Profile.from_row(row)

    def all(self) -> list[Profile]:
        return [Profile.from_row(r) for r in self.db.all("profiles", {"names": None})]

    def named(self, names: Sequence[str]) -> list[Profile]:
        """The profiles named, in the order given; an unknown one is bad input."""
        rows = {r["name"]: r for r in self.db.all("profiles", {"names": list(names)})}
        missing = [n for n in names if n not in rows]
        if missing:
            raise BadInput(f"no profile {missing[0]!r}: afk profile list shows them")
        return [Profile.from_row(rows[n]) for n in names]

    def remove(self, name: str) -> None:
        if self.db.one("profile_remove", {"name": check_id("profile", name)}) is None:
            raise BadInput(f"no profile {name!r}: afk profile list shows them")
