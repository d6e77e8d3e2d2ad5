"""The fleet (issue 44 items 3 and 4): loops advertise labels and a task that
requires them goes only to a loop that has them all; a task no live loop can
take is flagged; every loop registers itself (`afk loops`), leaves when it
exits, and shows as lost when SIGKILLed, its task then reclaimed and done
once by another."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap

import pytest
from helpers import Afk, poll

#: logs which loop ran which task; "long" works until it is stopped
AGENT = textwrap.dedent(
    """
    import json, os, sys, time
    title = sys.argv[-1].split("\\n", 1)[0]
    with open(os.environ["RUNS"], "a") as out:
        out.write(json.dumps({"runner": os.environ["LOOP_NAME"], "title": title,
                              "pid": os.getpid()}) + "\\n")
    time.sleep(60 if title == "long" else 0.2)
    """
)
FAST = {"AFK_FLEET_LOST_SECONDS": "2", "AFK_LEASE_SECONDS": "3", "AFK_LOOP_POLL_SECONDS": "0.5"}


class Loops:
    def __init__(self, afk: Afk, tmp) -> None:
        self.afk, self.agent, self.runs = afk, tmp / "agent.py", tmp / "runs.jsonl"
        self.agent.write_text(AGENT)
        self.runs.write_text("")
        self.env = {**afk.env, **FAST, "RUNS": str(self.runs)}
        self.procs: dict[str, subprocess.Popen[bytes]] = {}

    def start(self, runner: str, *labels: str) -> None:
        args = [a for label in labels for a in ("--label", label)]
        self.procs[runner] = subprocess.Popen(
            [*Afk.command("loop", "--agent", "f", "--wait", "--runner", runner, *args, "--"),
             sys.executable, str(self.agent)],
            env={**self.env, "LOOP_NAME": runner}, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip

    def ran(self) -> list[dict]:
        return [json.loads(line) for line in self.runs.read_text().splitlines() if line]

    def loops(self) -> dict[str, dict]:
        return {r["runner"]: r for r in self.afk.json("loops", "--json", env=self.env)["loops"]}

    def enqueue(self, title: str, *requires: str) -> str:
        args = [a for label in requires for a in ("--requires", label)]
        out = self.afk.json("enqueue", "--agent", "f", "--title", title, *args, env=self.env)
        return str(out["enqueued"][0])

    def stop_all(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()


@pytest.fixture
def loops(afk, tmp_path):
    fleet = Loops(afk, tmp_path)
    yield fleet
    fleet.stop_all()


def test_labels_send_a_task_only_to_a_loop_that_has_them_and_the_fleet_is_listed(loops):
    afk = loops.afk
    gpu = [loops.enqueue(f"train {i}", "gpu") for i in range(3)]
    plain = [loops.enqueue(f"docs {i}") for i in range(3)]
    tpu = loops.enqueue("tpu job", "tpu")
    loops.start("gpu-box", "gpu", "linux")
    loops.start("laptop")
    done = lambda: all(afk.json("show", i, env=loops.env)["state"] == "done" for i in gpu + plain)  # noqa: E731
    poll(done, timeout=120)
    ran = {r["title"]: r["runner"] for r in loops.ran()}
    assert {ran[f"train {i}"] for i in range(3)} == {"gpu-box"}, ran
    # the task no live loop can take: flagged, not silent
    status = afk.json("status", env=loops.env)
    (flag,) = status["waiting_for_a_loop"]
    assert flag["id"] == tpu and flag["why"] == "waiting for a loop with tpu"
    assert afk.json("show", tpu, env=loops.env)["state"] == "todo"
    digest = afk("digest", "--dry-run", "--format", "text", env=loops.env).stdout
    assert "  - waiting for a loop with tpu: tpu job (f)" in digest, digest
    # both registered, alive, with their labels
    seen = poll(lambda: len(loops.loops()) == 2 and loops.loops())
    assert seen["gpu-box"]["labels"] == ["gpu", "linux"] and seen["laptop"]["labels"] == []
    assert {r["state"] for r in seen.values()} == {"alive"}
    # one exits: it leaves the fleet
    loops.procs["laptop"].send_signal(signal.SIGTERM)
    assert loops.procs["laptop"].wait(timeout=60) in (0, 130, 143)
    poll(lambda: set(loops.loops()) == {"gpu-box"})
    text = afk("loops", env=loops.env).stdout
    assert text.startswith("alive f gpu-box on ") and "[gpu, linux]" in text, text
    # and on the status pages' fleet page
    from helpers.service import Service

    service = Service(afk.env["AFK_DSN"], AFK_FLEET_LOST_SECONDS="2")
    try:
        poll(lambda: service.health() == 200, timeout=60)
        page = service.get("/fleet")
        assert page is not None and page.status_code == 200
        assert "gpu-box" in page.text and "laptop" not in page.text
        assert "waiting for a loop with" in page.text and "tpu job" in page.text
    finally:
        service.cleanup()


def test_a_sigkilled_loop_shows_as_lost_and_its_task_is_done_once_by_another(loops):
    afk = loops.afk
    task = loops.enqueue("long")
    loops.start("first")
    poll(lambda: any(r["title"] == "long" for r in loops.ran()), timeout=60)
    poll(lambda: loops.loops()["first"]["task_title"] == "long", timeout=30)
    loops.procs["first"].send_signal(signal.SIGKILL)
    loops.procs["first"].wait()
    poll(lambda: loops.loops()["first"]["state"] == "lost", timeout=30)
    from helpers.service import Service

    service = Service(afk.env["AFK_DSN"], AFK_FLEET_LOST_SECONDS="2")
    try:  # Prometheus sees it too
        poll(lambda: service.value("afk_loops", state="lost") == 1, timeout=60)
        assert service.value("afk_loops", state="alive") == 0
    finally:
        service.cleanup()
    # another loop takes the task back once its lease runs out, and does it
    loops.agent.write_text(AGENT.replace('60 if title == "long" else ', ""))
    loops.start("second")
    poll(lambda: afk.json("show", task, env=loops.env)["state"] == "done", timeout=120)
    runs = afk.json("show", task, env=loops.env)["runs"]
    assert [r["outcome"] for r in runs].count("done") == 1, runs
    assert [r["runner"] for r in loops.ran()] == ["first", "second"]


@pytest.mark.parametrize(
    "args",
    [
        ("loop", "--agent", "f", "--label", "has space", "--", "true"),
        ("loop", "--agent", "f", "--label", "bell\x07", "--", "true"),
        ("enqueue", "--agent", "f", "--title", "t", "--requires", "a b"),
    ],
)
def test_a_bad_label_is_one_line_and_changes_nothing(afk, sql, args):
    before = sql.fingerprint()
    proc = afk(*args)
    assert proc.returncode == 2 and "label" in proc.stderr, proc.stderr
    assert sql.fingerprint() == before


def test_the_digest_and_status_take_a_loop_as_lost_after_the_setting(afk, sql):
    """AFK_FLEET_LOST_SECONDS: a loop seen two minutes ago is alive under an
    hour's setting; the task it can take is not waiting for a loop, in
    `afk status` and in the digest alike (the digest read 60 s whatever the
    setting)."""
    afk.json("enqueue", "--agent", "f", "--title", "tpu job", "--requires", "tpu")
    sql(
        "INSERT INTO afk_loop (runner, agent_id, host, pid, labels, seen_at) "
        "VALUES ('tpu-box', 'f', 'h', 1, '{tpu}', now() - interval '120 seconds')"
    )
    for lost, flagged in (("60", True), ("3600", False)):
        env = {**afk.env, "AFK_FLEET_LOST_SECONDS": lost}
        status = afk.json("status", env=env)
        assert ("waiting_for_a_loop" in status) is flagged, (lost, status)
        digest = afk("digest", "--dry-run", "--format", "text", env=env).stdout
        assert ("waiting for a loop with tpu: tpu job" in digest) is flagged, (lost, digest)


def test_afk_loops_says_when_a_timed_parking_ends_in_the_persons_zone(afk):
    """P23 (issue 53): `afk loops` said a parking with an end lasted "until a
    person clears it" (it read a key the parking does not have)."""
    from datetime import UTC, datetime, timedelta
    from zoneinfo import ZoneInfo

    until = (datetime.now(UTC) + timedelta(days=10)).replace(second=0, microsecond=0)
    afk.json("limit", "--account", "timed", "--until", until.isoformat())
    said = afk("loops", env={**afk.env, "TZ": "Europe/Paris"}).stdout
    shown = until.astimezone(ZoneInfo("Europe/Paris")).strftime("%Y-%m-%d %H:%M %Z")
    assert "parked timed: " in said and f"until {shown}" in said, said
    assert "a person clears it" not in said


def test_afk_loops_shows_the_running_task_as_soon_as_its_run_starts(loops):
    """P35 (issue 53 item 6): the loop writes its task on its fleet row right
    after the claim, before the run starts, not at its next beat (here a
    beat is 30 s away: AFK_FLEET_LOST_SECONDS 120); and between tasks at once
    when the run ends."""
    loops.env["AFK_FLEET_LOST_SECONDS"] = "120"
    task = loops.enqueue("long")
    loops.start("first")
    poll(lambda: any(r["title"] == "long" for r in loops.ran()), timeout=60)
    row = loops.loops()["first"]  # the run has started: no poll, no beat since
    assert (row["task_id"], row["task_title"]) == (task, "long"), row
    text = loops.afk("loops", env=loops.env).stdout
    assert "runs 'long'" in text, text
    pid = next(r["pid"] for r in loops.ran() if r["title"] == "long")
    os.kill(pid, signal.SIGKILL)  # the run ends: the loop is between tasks at once
    poll(lambda: loops.loops()["first"]["task_id"] is None, timeout=20)
