"""afk-watchdog: a durable task queue on PostgreSQL for unattended coding agents.

The names below are imported on first use, so that a command which never
touches the database (``afk --help``, ``afk hooks``) does not load the driver.
"""

from __future__ import annotations

# (not `typing`: a hook answered by the watchdog service loads next to nothing)
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from .config import QueueSettings
    from .errors import AfkError, BadInput, DatabaseError, LeaseLost, NotRunning, TaskNotFound
    from .models import BatchResult, EffectContext, EnqueueResult, NewTask, ReclaimResult, Task
    from .queue import Queue

_EXPORTS = {
    "QueueSettings": "config",
    "AfkError": "errors",
    "BadInput": "errors",
    "DatabaseError": "errors",
    "LeaseLost": "errors",
    "NotRunning": "errors",
    "TaskNotFound": "errors",
    "BatchResult": "models",
    "EffectContext": "models",
    "EnqueueResult": "models",
    "NewTask": "models",
    "Queue": "queue",
    "ReclaimResult": "models",
    "Task": "models",
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
    module = __import__(f"{__name__}.{_EXPORTS[name]}", fromlist=[name])
    value = getattr(module, name)
    globals()[name] = value
    return value
