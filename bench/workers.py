"""Worker processes of the throughput benchmarks. Each connects, reports
ready, waits for the start signal, drains its share and exits, so process
start-up is outside the timed part."""

from __future__ import annotations

import asyncio
from typing import Any


def _afk_queue(
    dsn: str, agents: list[str], index: int, ready: Any, start: Any
) -> tuple[Any, list[str]]:
    """A connected queue (before the clock starts) and this worker's agent
    order (each worker starts at another agent), once the start is given."""
    from bench.common import open_queue

    queue = open_queue(dsn, pool_size=1)
    queue.status()
    ready.release()
    start.wait()
    return queue, agents[index % len(agents) :] + agents[: index % len(agents)]


def afk_single(dsn: str, agents: list[str], index: int, ready: Any, start: Any) -> None:
    """This project through its Python API: claim one, done one."""
    queue, order = _afk_queue(dsn, agents, index, ready, start)
    for agent in order:
        while task := queue.claim(agent, runner=f"bench-{index}", lease_seconds=300):
            queue.done(task)
    queue.close()


def afk_next(dsn: str, agents: list[str], index: int, ready: Any, start: Any) -> None:
    """This project through its Python API: done and claim the next in one statement."""
    queue, order = _afk_queue(dsn, agents, index, ready, start)
    for agent in order:
        task = queue.claim(agent, runner=f"bench-{index}", lease_seconds=300)
        while task is not None:
            task = queue.done(task, claim_next=True)
    queue.close()


def afk_batch(
    dsn: str, agents: list[str], index: int, ready: Any, start: Any, size: int = 50
) -> None:
    """This project through its batch claim and batch done."""
    queue, order = _afk_queue(dsn, agents, index, ready, start)
    for agent in order:
        while batch := queue.claim_many(agent, size, runner=f"bench-{index}", lease_seconds=300):
            queue.done_many(batch)
    queue.close()


def pgqueuer_worker(
    dsn: str, agents: list[str], index: int, ready: Any, start: Any, batch_size: int = 10
) -> None:
    """pgqueuer, as its own benchmark drives it: asyncpg, drain mode, no-op jobs."""
    import asyncpg
    from pgqueuer import PgQueuer
    from pgqueuer.db import AsyncpgDriver
    from pgqueuer.types import QueueExecutionMode

    async def main() -> None:
        connection = await asyncpg.connect(dsn=dsn)
        pgq = PgQueuer(AsyncpgDriver(connection))

        @pgq.entrypoint("noop")
        async def noop(job: Any) -> None:
            return None

        ready.release()
        await asyncio.get_running_loop().run_in_executor(None, start.wait)
        await pgq.run(batch_size=batch_size, mode=QueueExecutionMode.drain)
        await connection.close()

    asyncio.run(main())


def procrastinate_worker(dsn: str, agents: list[str], index: int, ready: Any, start: Any) -> None:
    """procrastinate with its defaults: one worker per process, concurrency 1,
    stopping when the queue is empty (wait=False)."""
    import logging

    import procrastinate

    logging.getLogger("procrastinate").setLevel(logging.WARNING)
    app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=dsn))

    @app.task(name="noop")
    def noop() -> None:
        return None

    with app.open():
        ready.release()
        start.wait()
        app.run_worker(wait=False, install_signal_handlers=False)
