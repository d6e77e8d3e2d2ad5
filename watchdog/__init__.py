"""afk-watchdog: a durable task queue on PostgreSQL for unattended coding agents."""

import logging

from .config import QueueSettings
from .errors import AfkError, BadInput, DatabaseError, LeaseLost, NotRunning, TaskNotFound
from .queue import EnqueueResult, NewTask, Queue, ReclaimResult, Task

__all__ = [
    "AfkError",
    "BadInput",
    "DatabaseError",
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

logging.getLogger(__name__).addHandler(logging.NullHandler())
