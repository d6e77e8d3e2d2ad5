"""Accounts: what a usage limit applies to (one agent login, one API key).

A supervisor claims under an account (``afk loop --account``, default
``default``). When the agent says the account hit its usage limit, meets an
outage again and again, or needs a person to log in, the account is *parked*:
every claim under it takes nothing until the parking ends (or, with no end,
until a person clears it with ``afk limit --clear``), while loops under other
accounts go on with the same backlog. See migration 0013 and accounts.sql.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from ..checks import check_id, check_name, check_text
from ..db import Database, Row
from ..errors import BadInput

#: the account of a claimer that names none
DEFAULT_ACCOUNT = "default"
#: kinds of parking, by who or what parked the account
KINDS = ("usage_limit", "outage", "needs_human", "budget", "manual")
#: the furthest a person may park an account by hand (afk limit --until)
MAX_BY_HAND = timedelta(days=31)


@dataclass(frozen=True)
class Parking:
    account: str
    kind: str
    reason: str
    #: None: until a person clears it
    limited_until: datetime | None
    parked_at: datetime

    @classmethod
    def from_row(cls, row: Row) -> Parking:
        return cls(
            row["account"], row["kind"], row["reason"], row["limited_until"], row["parked_at"]
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "account": self.account,
            "limited_until": self.limited_until.isoformat() if self.limited_until else None,
            "reason": self.reason,
            "kind": self.kind,
            "parked_at": self.parked_at.isoformat(),
        }


class Accounts:
    """Parking and clearing accounts, on one database."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def park(self, account: str, kind: str, reason: str, until: datetime | None) -> Parking:
        """Park ``account`` until ``until`` (None: until a person clears it).
        An open parking is extended, never shortened, except by hand
        (``kind="manual"``), which replaces it."""
        account = check_id("account", account)
        if kind not in KINDS:
            raise BadInput(f"kind must be one of {', '.join(KINDS)}")
        reason = check_text("reason", reason)[:1000]
        if until is not None and until.tzinfo is None:
            raise BadInput("the end of a parking needs a time zone (an ISO 8601 offset)")
        row = self.db.row(
            "park", {"account": account, "kind": kind, "reason": reason, "until": until}
        )
        return Parking.from_row(row)

    def park_by_hand(self, account: str, reason: str, until: datetime) -> Parking:
        """A person parks ``account`` until ``until``, which must be ahead of
        the database's clock and at most :data:`MAX_BY_HAND` ahead (a typo
        of a year must not stop an account for centuries)."""
        account = check_name("account", account)
        if until.tzinfo is None:
            raise BadInput("the end of a parking needs a time zone (an ISO 8601 offset)")
        now = self.clock()
        if until <= now:
            raise BadInput(
                f"--until {until.isoformat()} is in the past (it is {now:%Y-%m-%d %H:%M %Z} now)"
            )
        if until > now + MAX_BY_HAND:
            raise BadInput(
                f"--until {until.isoformat()} is more than {MAX_BY_HAND.days} days ahead; "
                "park it for less, and again later if need be"
            )
        return self.park(account, "manual", reason, until)

    def clear(self, account: str, *, who: str | None = None) -> list[Parking]:
        """Unpark ``account``; returns what was cleared (empty: it was not parked)."""
        account = check_id("account", account)
        rows = self.db.all("clear", {"account": account, "who": who or "a person"})
        return [Parking.from_row(r) for r in rows]

    def parked(self, account: str | None = None) -> list[Parking]:
        """The accounts parked now, or ``account`` if it is."""
        if account is not None:
            account = check_id("account", account)
        return [Parking.from_row(r) for r in self.db.all("parked", {"account": account})]

    def spent_today(self, account: str, tz: str) -> tuple[float, datetime]:
        """What ``account``'s runs cost since midnight in zone ``tz`` (an IANA
        name), and the next midnight there."""
        row = self.db.row("spent_today", {"account": check_id("account", account), "tz": tz})
        return float(row["spent"]), row["next_midnight"]

    def clock(self) -> datetime:
        """The database's now(): every time here is read from it."""
        row = self.db.row("clock")
        now: datetime = row["now"]
        return now
