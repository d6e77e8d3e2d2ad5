"""A task's id as a person types it: the whole id, or the short one afk
prints (its first 8 digits). Pure and low in the house: the CLI's bootstrap
resolves a short id with the queue, and the broker and the zombie guard, on
the hook's fast path, judge whether one names the run's own task."""

from __future__ import annotations

import uuid
from typing import Any

#: the digits of the short id afk prints (``afk review``, the loop's lines),
#: and the fewest a person may type for a task
SHORT_ID = 8
_HEX = frozenset("0123456789abcdef")


def short_id(task_id: Any) -> str:
    """The short id afk prints for a task: its first :data:`SHORT_ID` digits."""
    return str(task_id)[:SHORT_ID]


def task_id_prefix(value: Any) -> str | None:
    """The hex digits of a short id as typed (a task id's first 8 to 31
    digits, with its dashes or without them, any case); None when ``value``
    is a whole id or no id at all."""
    digits = str(value).strip().lower().replace("-", "")
    if SHORT_ID <= len(digits) < 32 and set(digits) <= _HEX:
        return digits
    return None


def id_range(prefix: str) -> tuple[uuid.UUID, uuid.UUID]:
    """The ids a short id stands for, as a range of the primary key (the
    index answers it; ``id::text LIKE`` would read every row)."""
    return uuid.UUID(prefix.ljust(32, "0")), uuid.UUID(prefix.ljust(32, "f"))


def names_task(value: Any, task_id: Any) -> bool:
    """Whether ``value``, as a person or an agent types it (the whole id or
    a short one), names the task ``task_id``."""
    prefix = task_id_prefix(value)
    if prefix is not None:
        return str(task_id).replace("-", "").startswith(prefix)
    try:
        return uuid.UUID(str(value).strip()) == uuid.UUID(str(task_id))
    except ValueError:
        return False
