"""Profiles (issue 44): one way to run an agent each — its harness, its
command, the environment it needs (``CLAUDE_CONFIG_DIR`` for a second
subscription, say) and the account its usage limits park (the profile's
name unless given) — kept in the database, so that loops on several
machines share them. ``afk loop --profile A --profile B`` runs each task
under the first whose account is not parked. afk never stores a credential:
an environment variable whose name says it is one is refused."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ..checks import check_id, check_name
from ..db import Database, json_param
from ..errors import BadInput
from ..models import Task
from .harnesses import HARNESS_LABEL, HARNESS_NAMES, harness_label, harness_of

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


def offered(profiles: Iterable[Profile]) -> list[str]:
    """The labels a loop offers for its profiles' harnesses (harness:claude):
    a task that must run under a harness (afk enqueue --harness) asks for one."""
    return list(
        dict.fromkeys(harness_label(p.harness) for p in profiles if p.harness in HARNESS_NAMES)
    )


def fits(task: Task, profile: Profile) -> bool:
    """Whether ``task`` may run under ``profile``: one of the profiles it
    names (--profiles), the harness it must run under (--harness)."""
    if task.profiles is not None and profile.name not in task.profiles:
        return False
    needs = [x for x in task.requires or () if x.startswith(HARNESS_LABEL)]
    return all(x == HARNESS_LABEL + profile.harness for x in needs)


@dataclass(frozen=True)
class Placement:
    """Where a loop over several profiles runs a task it claimed: under
    ``profile``, resuming its session unless ``fresh``; or (no profile) not
    now: it waits for its session's profile until ``until``."""

    profile: Profile | None
    fresh: bool = False
    until: datetime | None = None
    why: str = ""


def place(
    task: Task,
    session_profile: str | None,
    profiles: Sequence[Profile],
    parked: Mapping[str, datetime | None],
    now: datetime,
    switch_after: float,
) -> Placement:
    """The profile of a claimed task's run (issue 44 item 2). ``parked``:
    each parked account's end (None: until a person clears it). A task keeps
    the profile of the session it resumes while that profile's account is
    not parked, or is parked until at most ``switch_after`` seconds from now
    (it waits for the reset); parked longer, it moves to the first usable
    profile it fits, and starts fresh from its brief. Otherwise it runs
    under the first profile it fits whose account is not parked."""
    fitting = [p for p in profiles if fits(task, p)]
    usable = [p for p in fitting if p.account not in parked]
    own = next((p for p in fitting if p.name == session_profile), None)
    if own is not None:
        if own.account not in parked:
            return Placement(own)
        until = parked[own.account]
        if until is not None and (until - now).total_seconds() <= switch_after:
            return Placement(
                None,
                until=until,
                why=f"its session is profile {own.name!r}'s, parked until its reset",
            )
        if usable:
            return Placement(
                usable[0],
                fresh=True,
                why=f"profile {own.name!r} stays parked longer than --switch-after: "
                f"moved to {usable[0].name!r}, a fresh session from its brief",
            )
    if usable:
        return Placement(usable[0], fresh=session_profile is not None and own is None)
    ends = [parked[p.account] for p in fitting]
    known = [end for end in ends if end is not None]
    return Placement(
        None,
        until=min(known) if known else None,
        why="no profile of this loop that it fits is usable now",
    )


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
        name = check_name("profile", name)
        if not command or not command[0]:
            raise BadInput("no agent command given: afk profile add NAME -- CMD [ARG...]")
        known = harness_of(command)
        found = harness or (known.name if known is not None else "other")
        if harness is not None and harness not in HARNESS_NAMES:
            raise BadInput(f"--harness {harness!r}: one of {', '.join(sorted(HARNESS_NAMES))}")
        row = self.db.one(
            "profile_add",
            {
                "name": name,
                "harness": found,
                "command": list(command),
                "env": json_param(parse_env(env)),
                "account": check_name("account", account or name),
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
            check_name("profile", missing[0])  # (a name no profile can have says so)
            raise BadInput(f"no profile {missing[0]!r}: afk profile list shows them")
        return [Profile.from_row(rows[n]) for n in names]

    def remove(self, name: str) -> None:
        if self.db.one("profile_remove", {"name": check_id("profile", name)}) is None:
            raise BadInput(f"no profile {name!r}: afk profile list shows them")


@dataclass(frozen=True)
class Look:
    """What a look at a loop's profiles found: one removed (``gone``), or
    the profile of the next run (``first``; ``switched`` when it is not the
    last one's), or every one parked (``first`` None), until the earliest
    end of their parkings (``until``; None: a person must clear one)."""

    gone: str | None = None
    first: Profile | None = None
    switched: bool = False
    until: datetime | None = None


class Route:
    """A loop's way through its profiles (issue 44): the first whose account
    is not parked takes the next run; a claimed task goes where :func:`place`
    puts it."""

    def __init__(self, db: Database, profiles: list[Profile], switch_after: float) -> None:
        self.db, self.profiles, self.switch_after = db, profiles, switch_after
        self.first: Profile | None = None
        self.usable: list[Profile] = []
        self.parked: dict[str, datetime | None] = {}

    def look(self, parked: Mapping[str, datetime | None]) -> Look:
        """Look again, with each parked account's end (None: a person's)."""
        known = {p.name for p in Profiles(self.db).all()}
        gone = [p.name for p in self.profiles if p.name not in known]
        if gone:  # (removed while the loop ran: its run, if any, has ended)
            return Look(gone=gone[0])
        self.parked = dict(parked)
        self.usable = [p for p in self.profiles if p.account not in parked]
        if self.usable:
            first, before = self.usable[0], self.first
            self.first = first
            return Look(first=first, switched=before is not None and before is not first)
        self.first = None
        ends = [end for end in (parked[p.account] for p in self.profiles) if end is not None]
        return Look(until=min(ends) if ends else None)

    def place(self, task: Task, session: str | None, now: datetime) -> Placement:
        return place(task, session, self.profiles, self.parked, now, self.switch_after)

    def named(self, name: str | None) -> Profile | None:
        return next((p for p in self.profiles if p.name == name), None)
