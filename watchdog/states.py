"""The words every layer shares about a task's state, at the bottom of the
house: the one list of states (the ``afk_state`` enum's, in its order) and
the sets the code reasons with."""

from __future__ import annotations

from enum import StrEnum


class State(StrEnum):
    TODO = "todo"
    RUNNING = "running"
    PAUSED = "paused"
    DONE = "done"
    FAILED = "failed"
    #: waiting for the tasks it depends on (migration 0020): no claim takes it
    BLOCKED = "blocked"


#: every state, in the order of the database's enum
STATES: tuple[str, ...] = tuple(State)
#: claimable: a claim takes these (when not in a backoff)
WAITING = frozenset({State.TODO, State.PAUSED})
#: not finished: what the queue still owes
OPEN = frozenset({State.TODO, State.RUNNING, State.PAUSED, State.BLOCKED})
#: finished for good (until a person retries a failed one)
FINISHED = frozenset({State.DONE, State.FAILED})

#: below this many rows (the planner's estimate) done tasks are counted
#: exactly; above, estimated (afk_state_counts, migration 0006)
EXACT_BELOW = 200_000
