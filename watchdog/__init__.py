"""afk-watchdog: a durable task queue on PostgreSQL for unattended coding agents.

The names below are imported on first use, so that a command which never
touches the database (``afk --help``, ``afk hooks``) does not load the driver.
"""

from __future__ import annotations

import importlib

# (not `typing`: a hook answered by the watchdog service loads next to nothing)
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from .config import QueueSettings
    from .errors import AfkError, BadInput, DatabaseError, LeaseLost, NotRunning, TaskNotFound
    from .queue import (
        BatchResult,
        EffectContext,
        EnqueueResult,
        NewTask,
        Queue,
        ReclaimResult,
        Task,
    )

_EXPORTS = {
    "QueueSettings": "config",
    "AfkError": "errors",
    "BadInput": "errors",
    "DatabaseError": "errors",
    "LeaseLost": "errors",
    "NotRunning": "errors",
    "TaskNotFound": "errors",
    "BatchResult": "queue",
    "EffectContext": "queue",
    "EnqueueResult": "queue",
    "NewTask": "queue",
    "Queue": "queue",
    "ReclaimResult": "queue",
    "Task": "queue",
}

__all__ = [
    "AfkError",
    "BadInput",
    "BatchResult",
    "DatabaseError",
    "EffectContext",
    "EnqueueResult",
    "LeaseLost",
    "NewTask",
    "NotRunning",
    "Queue",
    "QueueSettings",
    "ReclaimResult",
    "Task",
    "TaskNotFound",
]


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
    globals()[name] = value
    return value
