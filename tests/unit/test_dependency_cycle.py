"""The cycle a batch's dependencies would close, found before anything is
enqueued: through the batch's own keys, through tasks enqueued before (by
key or by id), or none."""

from __future__ import annotations

import uuid

import pytest

from watchdog.dependencies import dependency_cycle, is_task_id
from watchdog.models import NewTask

OLD = uuid.UUID("0b0e5f7c-1d2e-4f60-8a9b-0c1d2e3f4a5b")
OLDER = uuid.UUID("1c1f6a8d-2e3f-4a71-9bac-1d2e3f4a5b6c")


def task(key: str | None, *after: str, title: str = "t") -> NewTask:
    return NewTask(title if key is None else f"{title} {key}", key=key, after=list(after) or None)


def row(id_: uuid.UUID, key: str | None, *deps: tuple[str, uuid.UUID | None]) -> dict:
    return {"id": id_, "idem_key": key, "deps": [{"ref": r, "dep_id": d} for r, d in deps]}


@pytest.mark.parametrize(
    "kept, rows, cycle",
    [
        # nothing waits for anything
        ([task("a"), task("b")], [], None),
        # a chain in the batch
        ([task("a"), task("b", "a"), task("c", "b")], [], None),
        # a task waiting for itself
        ([task("a", "a")], [], ["a", "a"]),
        # two waiting for each other, in either order of the batch
        ([task("a", "b"), task("b", "a")], [], ["a", "b", "a"]),
        ([task("b", "a"), task("a", "b")], [], ["b", "a", "b"]),
        # a longer loop behind a task that is not part of it
        (
            [task("x", "a"), task("a", "b"), task("b", "c"), task("c", "a")],
            [],
            ["a", "b", "c", "a"],
        ),
        # a task without a key is named by its title
        ([task(None, "a", title="untitled"), task("a")], [], None),
        # an earlier task that waits for a key of this batch (a forward ref)
        ([task("x", "old")], [row(OLD, "old", ("x", None))], ["x", "old", "x"]),
        # ... named by its id, in capitals
        ([task("x", str(OLD).upper())], [row(OLD, None, ("x", None))], ["x", str(OLD), "x"]),
        # through two earlier tasks, one named by the other's dep id
        (
            [task("x", "old")],
            [row(OLD, "old", ("older", OLDER)), row(OLDER, "older", ("x", None))],
            ["x", "old", "older", "x"],
        ),
        # an earlier task that waits for something else entirely
        ([task("x", "old")], [row(OLD, "old", ("elsewhere", None))], None),
        # a ref to nothing known (a key enqueued later): no edge
        ([task("x", "later")], [], None),
    ],
)
def test_the_first_cycle_of_a_batch_or_none(kept, rows, cycle):
    assert dependency_cycle(kept, rows) == cycle


@pytest.mark.parametrize(
    "ref, is_id",
    [
        (str(OLD), True),
        (str(OLD).upper(), True),
        (str(OLD).replace("-", ""), False),
        (f"{OLD}x", False),
        ("deploy-2am", False),
    ],
)
def test_a_ref_is_a_task_id_only_in_the_shape_of_one(ref, is_id):
    assert is_task_id(ref) is is_id
