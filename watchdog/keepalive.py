"""The heartbeat thread of :meth:`~watchdog.queue.Queue.leased`: it renews a
task's lease while the task runs, and says when the lease is gone."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from .errors import AfkError, LeaseLost

if TYPE_CHECKING:
    from .models import Task

logger = logging.getLogger(__name__)


class Keepalive:
    """The heartbeat thread of :meth:`Queue.leased`: ``beat`` is its
    heartbeat, every third of the ``lease`` (or every ``interval``).
    ``lost`` is set (and ``error`` holds the reason) once the lease is gone;
    a database that cannot be reached is retried at the next beat, as the
    lease still runs."""

    def __init__(
        self,
        beat: Callable[..., object],
        task: Task,
        lease: float,
        interval: float | None = None,
        sign: Callable[[], tuple[str, float] | None] | None = None,
    ) -> None:
        self._beat, self._sign = beat, sign
        self.interval = interval if interval is not None else max(lease / 3, 0.05)
        self.lost = threading.Event()
        self.error: LeaseLost | None = None
        self.beats = 0
        self._task = task
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name=f"afk-keepalive-{task.id}", daemon=True
        )

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self._beat(self._task, sign=self._sign() if self._sign else None)
                self.beats += 1
            except LeaseLost as exc:
                self.error = exc
                self.lost.set()
                return
            except AfkError as exc:
                logger.warning(
                    "heartbeat of task %s failed: %s",
                    self._task.id,
                    exc,
                    extra={"action": "heartbeat", "task_id": str(self._task.id)},
                )
