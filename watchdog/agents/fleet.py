"""The fleet (issue 44): each ``afk loop`` registers itself while it runs
(host, pid, user, labels, profiles, started) and beats four times a
``AFK_FLEET_LOST_SECONDS`` with the task and profile of its run; one that stops
beating is shown as lost (its tasks come back as ever, when their leases run
out), one that exits removes itself. ``afk loops`` and the status pages read
it; ``afk status`` flags a task that requires labels no live loop has."""

from __future__ import annotations

import contextlib
import getpass
import os
import socket
import threading
import uuid
from collections.abc import Sequence
from typing import Any

from ..db import Database


class Fleet:
    """The fleet as ``afk loops`` reads it; a loop not heard of for
    ``lost_after`` seconds (AFK_FLEET_LOST_SECONDS) is lost."""

    def __init__(self, db: Database, lost_after: float = 60.0) -> None:
        self.db, self.lost_after = db, lost_after

    def loops(self) -> list[dict[str, Any]]:
        return self.db.all("loops", {"lost_after": self.lost_after})

    def waiting_for_a_loop(self, agent_id: str | None = None) -> list[dict[str, Any]]:
        """The tasks no live loop can take, each with ``why`` ("waiting for a
        loop with gpu, harness:claude" or "with one of the profiles max-2")."""
        given = {"agent_id": agent_id, "lost_after": self.lost_after}
        return [
            {**r, "id": str(r["id"]), "why": _why(r)}
            for r in self.db.all("waiting_for_a_loop", given)
        ]


def _why(task: dict[str, Any]) -> str:
    wanted = []
    if task["requires"]:
        wanted.append(", ".join(task["requires"]))
    if task["profiles"]:
        wanted.append("one of the profiles " + ", ".join(task["profiles"]))
    return "waiting for a loop with " + " and ".join(wanted)


class Membership:
    """One loop's place in the fleet: registered, beating in a thread of its
    own (a loop asleep until a reset still beats), removed at the end."""

    def __init__(
        self,
        db: Database,
        runner: str,
        agent_id: str,
        labels: Sequence[str],
        profiles: Sequence[str],
        lost_after: float = 60.0,
    ) -> None:
        self.db, self.runner = db, runner
        self.every = max(lost_after / 4, 0.2)  # (beats 4 times before it counts as lost)
        self.task: uuid.UUID | None = None
        self.profile: str | None = None
        self._stop = threading.Event()
        # now() wakes the beat and waits for it: the beat thread is the row's
        # only writer, so an older beat never lands after a newer run
        self._wake = threading.Event()
        self._said = threading.Condition()
        self._asked = self._told = 0
        try:
            user: str | None = getpass.getuser()
        except (KeyError, OSError):
            user = None
        db.execute(
            "loop_register",
            {
                "runner": runner,
                "agent_id": agent_id,
                "host": socket.gethostname(),
                "pid": os.getpid(),
                "username": user,
                "labels": list(labels),
                "profiles": list(profiles),
            },
        )
        self._thread = threading.Thread(target=self._beat, name="afk-fleet-beat", daemon=True)
        self._thread.start()

    #: how long now() waits for its beat to be written (a database away
    #: does not hold the loop: the next beat says it)
    SAY_WITHIN = 5.0

    def now(self, task: uuid.UUID | None, profile: str | None) -> None:
        """The run under way (None between runs), written at once: `afk
        loops` and /fleet show the task from the moment its run starts."""
        with self._said:
            self.task, self.profile = task, profile
            self._asked += 1
            asked = self._asked
            self._wake.set()
            self._said.wait_for(lambda: self._told >= asked or self._stop.is_set(),
                                timeout=self.SAY_WITHIN)  # fmt: skip

    def _beat(self) -> None:
        while True:
            self._wake.wait(self.every)
            if self._stop.is_set():
                return
            with self._said:
                self._wake.clear()
                task, profile, asked = self.task, self.profile, self._asked
            with contextlib.suppress(Exception):  # (a database away: the next beat says it)
                self.db.execute(
                    "loop_beat", {"runner": self.runner, "task_id": task, "profile": profile}
                )
            with self._said:
                self._told = asked
                self._said.notify_all()

    def leave(self) -> None:
        self._stop.set()
        self._wake.set()
        with self._said:
            self._said.notify_all()
        # (a database gone: it shows as lost, then its tasks come back)
        with contextlib.suppress(Exception):
            self.db.execute("loop_leave", {"runner": self.runner})
