"""A simulated night: hours of agent work compressed into minutes.

    python -m bench.night [--tasks 300] [--loops 4] [--minutes 6] [--out DIR]
    python -m bench.night --quick        # a minute: the suite runs this one
    python -m bench.night --sandbox      # every run inside afk loop --sandbox (srt)

Several `afk loop` supervisors on two accounts drain a backlog through a
stand-in agent (bench/night_agent.py) that, at random, works, fails, hits its
account's usage limit (a reset seconds ahead), meets an outage, asks a
question, SIGKILLs its supervisor, outlives its lease, or hangs (after a line,
or from its start) until its supervisor stops it as stalled. Meanwhile a person
answers the questions a little later, supervisors are Ctrl-C'd and SIGKILLed
and started again, the watchdog service reclaims what the dead left, and the
database is restarted once. Then the night is read back from the database and
the agent's log, against the targets:

- every task done (or failed for good by the agent's real failures), none lost;
- 0 attempts spent on usage limits and outages;
- agent time wasted (work whose result was thrown away), apart from the
  crashes' own, under 2% of the night;
- the time from each reset to the next session on that account;
- every question answered and its task done after it;
- no orphan completes anything (a SIGKILLed supervisor's agent dies with
  it), and no task is completed twice but in a lease lost under a living
  supervisor;
- the hangs stopped as stalled (unless their loop was stopped first), and
  the time lost to stalls.

With ``--sandbox`` every loop runs its agent inside the boundary of ``afk
loop --sandbox`` (the sandbox runtime, srt): the agent writes its log in the
loops' folder (the only one a run without a worktree may write), and it does
not SIGKILL its supervisor (inside the sandbox it has its own process ids: its
parent is not the loop), so the night has no crashes; the loops are still
SIGKILLed from outside.

The real Claude Code CLI cannot be made to ask a question, crash its
supervisor or compact on cue against a scripted API, so the night's agent is
a stand-in printing Claude Code's own messages (tests/e2e/test_real_claude.py
runs the real client's classes).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
from psycopg.rows import dict_row

from watchdog import embedded

ROOT = Path(__file__).parent.parent
AGENT = [sys.executable, str(Path(__file__).with_name("night_agent.py"))]
ACCOUNTS = ("max-a", "max-b")


@dataclass
class Night:
    tasks: int
    loops: int
    seconds: float
    lease: int = 4
    unit: float = 0.3
    seed: int = 1
    sandbox: bool = False
    #: the agent's weights of what a run does, over night_agent.WEIGHTS
    weights: dict[str, int] = field(default_factory=dict)
    home: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="afk-night-")))

    def __post_init__(self) -> None:
        # every duration of the night is tuned for the compressed minute
        # (0.3 s): a longer one scales them all, so a stall, a lease, a
        # backoff and a person's Ctrl-C are the same in agent-minutes
        self.scale = scale = self.unit / 0.3
        self.lease = max(self.lease, round(self.lease * scale))
        self.home.chmod(0o755)
        # where the loops run (a sandboxed run without a worktree writes only
        # there), apart from afk's home, which no sandboxed run may read
        self.work = Path(tempfile.mkdtemp(prefix="afk-night-work-", dir="/tmp"))
        self.log = (self.work if self.sandbox else self.home) / "agent.jsonl"
        self.rng = random.Random(self.seed)
        info = embedded.ensure_running(self.home)
        self.pgdata = info.pgdata
        self.dsn = embedded.client_dsn(info)
        self.env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("AFK_")},
            "AFK_DSN": self.dsn,
            "AFK_HOME": str(self.home),
            "AFK_LEASE_SECONDS": str(self.lease),
            "AFK_RECLAIM_INTERVAL": "1",
            "AFK_GAUGES_INTERVAL": "5",
            "AFK_BACKOFF_BASE_SECONDS": str(round(1 * scale)),
            "AFK_BACKOFF_CAP_SECONDS": str(round(4 * scale)),
            "AFK_TRANSIENT_BACKOFF_SECONDS": str(round(1 * scale)),
            "AFK_TRANSIENT_BACKOFF_CAP_SECONDS": str(round(4 * scale)),
            "AFK_LOOP_POLL_SECONDS": "1",
            "AFK_AGENT_GRACE_SECONDS": "3",
            # a hang is stopped after this long with no line and no hook
            "AFK_STALL_SECONDS": str(round(3 * scale)),
            "AFK_MAX_ATTEMPTS": "8",
            "NIGHT_LOG": str(self.log),
            "NIGHT_UNIT": str(self.unit),
            "NIGHT_RESET": str(round(3 * scale)),
            "NIGHT_LEASE": str(self.lease),
            "TMPDIR": str(self.home),
        }
        if self.sandbox:
            self.env |= {
                "AFK_SANDBOX": "1",
                **({"AFK_SRT": os.environ["AFK_SRT"]} if os.environ.get("AFK_SRT") else {}),
                "TMPDIR": str(self.work),
                "NIGHT_WEIGHTS": json.dumps({"crash": 0, **self.weights}),
            }
        elif self.weights:
            self.env["NIGHT_WEIGHTS"] = json.dumps(self.weights)
        self.procs: dict[int, tuple[subprocess.Popen[bytes], str]] = {}
        self.events: list[str] = []

    # -- the parts ------------------------------------------------------------

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "watchdog.cli", *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=60,
        )

    def start_loop(self, n: int) -> None:
        account = ACCOUNTS[n % len(ACCOUNTS)]
        out = open(self.home / f"loop-{n}.log", "ab")  # noqa: SIM115 - kept for the child
        proc = subprocess.Popen(
            [
                *Night.afk(
                    "loop",
                    "--agent",
                    "night",
                    "--account",
                    account,
                    "--wait",
                    "--runner",
                    f"loop-{n}-{time.monotonic_ns()}",
                    "--",
                ),
                *AGENT,
            ],
            env=self.env,
            cwd=self.work,
            stdout=subprocess.DEVNULL,
            stderr=out,
        )
        self.procs[n] = (proc, account)

    @staticmethod
    def afk(*args: str) -> list[str]:
        return [sys.executable, "-m", "watchdog.cli", *args]

    def restart_database(self) -> None:
        owner = self.pgdata.stat().st_uid
        subprocess.run(
            [
                str(embedded.bin_dir() / "pg_ctl"),
                "-D",
                str(self.pgdata),
                "-m",
                "fast",
                "-w",
                "restart",
            ],
            check=True,
            # (the server it starts keeps whatever it was given: no pipes)
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            user=owner if os.geteuid() == 0 and owner != 0 else None,
            timeout=120,
        )
        self.events.append(f"{time.strftime('%H:%M:%S')} database restarted")

    def sql(self, statement: str, *params: Any) -> list[dict[str, Any]]:
        with psycopg.connect(self.dsn, row_factory=dict_row, autocommit=True) as conn:
            cur = conn.execute(statement, params or None)
            return cur.fetchall() if cur.description else []

    # -- the night --------------------------------------------------------------

    def run(self) -> dict[str, Any]:
        lines = "".join(
            json.dumps({"title": f"item {i}", "key": f"night-{i}"}) + "\n"
            for i in range(self.tasks)
        )
        subprocess.run(
            Night.afk("enqueue", "--agent", "night", "--file", "-"),
            input=lines,
            text=True,
            env=self.env,
            check=True,
            capture_output=True,
        )
        service = subprocess.Popen(
            Night.afk("watchdog", "run"),
            env={**self.env, "AFK_METRICS_ADDR": "127.0.0.1:0"},
            stdout=subprocess.DEVNULL,
            stderr=open(self.home / "service.log", "ab"),  # noqa: SIM115
        )
        for n in range(self.loops):
            self.start_loop(n)
        began = time.monotonic()
        restarted = killed = False
        try:
            while time.monotonic() - began < self.seconds:
                time.sleep(1)
                self.answer_questions(older_than=2)
                for n, (proc, _) in list(self.procs.items()):
                    if proc.poll() is not None:  # SIGKILLed by its agent, or ended
                        self.events.append(f"loop {n} ended ({proc.returncode}); started again")
                        self.start_loop(n)
                if self.rng.random() < 0.03 / self.scale:
                    n = self.rng.randrange(self.loops)
                    self.procs[n][0].send_signal(signal.SIGINT)  # a person's Ctrl-C
                    self.events.append(f"loop {n} interrupted (Ctrl-C)")
                left = self.remaining()
                if not restarted and left <= self.tasks * 2 // 3:
                    self.restart_database()  # a third of the way
                    restarted = True
                if not killed and left <= self.tasks // 2:
                    n = self.rng.randrange(self.loops)  # half-way: a supervisor dies
                    self.procs[n][0].send_signal(signal.SIGKILL)
                    self.events.append(f"loop {n} SIGKILLed")
                    killed = True
                if left == 0:
                    break
        finally:
            for proc, _ in self.procs.values():
                proc.send_signal(signal.SIGTERM)
            for proc, _ in self.procs.values():
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    proc.kill()
            service.send_signal(signal.SIGTERM)
            service.wait(timeout=30)
        return self.report(time.monotonic() - began)

    def answer_questions(self, older_than: float) -> None:
        asked = json.loads(self.cli("questions").stdout or "[]")
        for q in asked:
            age = self.sql("SELECT extract(epoch FROM now() - %s::timestamptz) AS s", q["asked_at"])
            if age[0]["s"] >= older_than:
                self.cli("answer", q["id"], "yes: ship it, after the tests pass")

    def remaining(self) -> int:
        return int(
            self.sql("SELECT count(*) AS n FROM afk_task WHERE state NOT IN ('done', 'failed')")[0][
                "n"
            ]
        )

    # -- the report ---------------------------------------------------------------

    def report(self, elapsed: float) -> dict[str, Any]:
        runs = [json.loads(line) for line in self.log.read_text().splitlines() if line]
        states = {
            r["state"]: r["n"]
            for r in self.sql(
                "SELECT state::text AS state, count(*) AS n FROM afk_task GROUP BY state"
            )
        }
        completed: dict[str, int] = {}
        for r in runs:
            if r.get("completed"):
                completed[r["task"]] = completed.get(r["task"], 0) + 1
        done_ids = {str(r["id"]) for r in self.sql("SELECT id FROM afk_task WHERE state = 'done'")}
        held = self.sql("SELECT count(*) AS n FROM afk_task WHERE run_after = afk_held()")[0]["n"]
        limit_attempts = self.sql(
            "SELECT count(*) AS n FROM afk_run WHERE outcome IN ('usage_limit', 'outage') "
            "AND attempt_spent"
        )[0]["n"]
        # agent time thrown away: runs that completed their work on a task that
        # another run completed too (the crash window), or that ended with no
        # result kept (interrupted, lease lost)
        total = sum(r["end"] - r["start"] for r in runs)
        crash_time = sum(r["end"] - r["start"] for r in runs if r["kind"] == "crash")
        wasted = 0.0
        seen: set[str] = set()
        for r in sorted(runs, key=lambda r: r["end"]):
            if r.get("completed"):
                if r["task"] in seen or r["task"] not in done_ids:
                    wasted += r["end"] - r["start"]
                seen.add(r["task"])
        resets = self.sql(
            "SELECT p.account, p.until, (SELECT min(r.started_at) FROM afk_run r "
            " WHERE r.account = p.account AND r.started_at >= p.until) AS first_after "
            "FROM afk_account_park p WHERE p.kind = 'usage_limit'"
        )
        delays = sorted(
            (r["first_after"] - r["until"]).total_seconds() for r in resets if r["first_after"]
        )
        stalls = self.sql(
            "SELECT count(*) AS n, coalesce(sum(extract(epoch FROM ended_at - started_at)), 0)"
            "::float8 AS s FROM afk_run WHERE outcome = 'stalled'"
        )[0]
        hangs = sum(1 for r in runs if r["kind"] in ("hang", "startup"))
        # how each hang's run ended: stalled, unless its loop was stopped first
        # (a Ctrl-C: interrupted; a SIGKILL: lease_lost) or the night ended
        # under it (still open)
        hang_ends: dict[str, int] = {}
        for r in runs:
            if r["kind"] not in ("hang", "startup"):
                continue
            row = self.sql(
                "SELECT coalesce(outcome, 'open') AS o FROM afk_run WHERE task_id = %s::uuid"
                " ORDER BY abs(extract(epoch FROM started_at) - %s) LIMIT 1",
                r["task"],
                r["start"],
            )
            end = row[0]["o"] if row else "no run"
            hang_ends[end] = hang_ends.get(end, 0) + 1
        hangs_missed = sum(
            n
            for o, n in hang_ends.items()
            if o not in ("stalled", "interrupted", "lease_lost", "open")
        )
        # a run whose lease ran out under its supervisor (heartbeats starved on
        # a loaded machine) may finish as its task is given to another: the
        # one window left for a task to be completed twice
        lease_lost = self.sql("SELECT count(*) AS n FROM afk_run WHERE outcome = 'lease_lost'")[0][
            "n"
        ]
        # a run stopped by a person's Ctrl-C just after its agent did the work
        # (before the agent's own exit said so) is the other: its task is run
        # again
        interrupted = self.sql("SELECT count(*) AS n FROM afk_run WHERE outcome = 'interrupted'")[
            0
        ]["n"]
        orphans = sum(1 for r in runs if r["kind"] == "orphan")
        twice = sum(1 for n in completed.values() if n > 1)
        questions = self.sql(
            "SELECT count(*) FILTER (WHERE q.answered_at IS NOT NULL) AS answered, "
            "count(*) FILTER (WHERE q.answered_at IS NOT NULL AND t.state = 'done') AS resumed, "
            "count(*) AS asked FROM afk_question q JOIN afk_task t ON t.id = q.task_id"
        )[0]
        lost = self.tasks - states.get("done", 0) - states.get("failed", 0) - held
        share = wasted / max(total - crash_time, 1e-9)
        return {
            "tasks": self.tasks,
            "agent_minute_seconds": self.unit,
            "lease_seconds": self.lease,
            "loops": self.loops,
            "seconds": round(elapsed, 1),
            "states": states,
            "lost": lost,
            "runs": len(runs),
            "runs_by_kind": {
                k: sum(1 for r in runs if r["kind"] == k) for k in sorted({r["kind"] for r in runs})
            },
            "done_more_than_once": twice,
            "lease_lost_runs": lease_lost,
            "interrupted_runs": interrupted,
            "orphan_completions": orphans,
            "hangs": hangs,
            "hang_ends": hang_ends,
            "hangs_missed": hangs_missed,
            "stalled_runs": stalls["n"],
            "seconds_lost_to_stalls": round(stalls["s"], 1),
            "attempts_on_limits_and_outages": limit_attempts,
            "agent_seconds": round(total, 1),
            "wasted_share_excluding_crashes": round(share, 4),
            "reset_to_next_session_seconds": [round(d, 2) for d in delays],
            "questions": questions,
            "held_for_a_person": held,
            "events": self.events,
            "targets_met": lost == 0
            and limit_attempts == 0
            and share < 0.02
            and orphans == 0
            and twice <= lease_lost + interrupted
            and hangs_missed == 0,
        }

    def close(self) -> None:
        embedded.stop(self.home)
        shutil.rmtree(self.home, ignore_errors=True)
        shutil.rmtree(self.work, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=300)
    parser.add_argument("--loops", type=int, default=4)
    parser.add_argument("--minutes", type=float, default=6)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--quick", action="store_true", help="a minute, 60 tasks, 3 loops")
    parser.add_argument("--out", help="a folder for report.json and report.md")
    parser.add_argument("--sandbox", action="store_true", help="every run inside the sandbox")
    parser.add_argument(
        "--unit",
        type=float,
        default=0.3,
        help="an agent-minute, in seconds (0.3: compressed; 60: a real one); every "
        "duration of the night scales with it",
    )
    parser.add_argument(
        "--weights",
        type=json.loads,
        default={},
        help='what runs do, over the agent\'s own weights (JSON: {"crash": 0})',
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.tasks, args.loops, args.minutes = 60, 3, 1.5
    if not 0.05 <= args.unit <= 600:
        parser.error("--unit: 0.05 to 600 seconds")
    night = Night(
        args.tasks,
        args.loops,
        args.minutes * 60,
        unit=args.unit,
        seed=args.seed,
        sandbox=args.sandbox,
        weights=args.weights,
    )
    try:
        result = night.run()
    finally:
        night.close()
    text = json.dumps(result, indent=2, default=str)
    print(text)
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "report.json").write_text(text + "\n")
    return 0 if result["targets_met"] else 1


if __name__ == "__main__":
    sys.exit(main())
