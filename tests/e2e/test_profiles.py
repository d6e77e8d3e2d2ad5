"""Profiles (issue 44): a loop over several ways to run an agent, each on its
own account, goes on under the next when a usage limit parks one, waits only
when every one is parked (until the earliest reset), and goes back to the
first after its reset. Stand-in agents: each profile's environment says which
account it is, and the stand-in prints the real Claude Code's usage-limit
line for a parked one."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time

import pytest
from helpers import Afk, poll

#: a stand-in: it logs its run, then, per its plan for (its account, the
#: task, the how-many-th run of that pair), hits a usage limit that resets
#: N seconds later ("limit:N"), or works a moment and is done
AGENT = textwrap.dedent(
    """
    import json, os, sys, time
    who, title = os.environ["WHO"], sys.argv[-1].split("\\n", 1)[0]
    runs = os.environ["RUNS"]
    before = sum(1 for line in open(runs) if json.loads(line)["who"] == who
                 and json.loads(line)["title"] == title)
    with open(runs, "a") as out:
        out.write(json.dumps({"who": who, "title": title, "at": time.time()}) + "\\n")
    plan = json.loads(os.environ["PLAN"]).get(f"{who}:{title}", [])
    step = plan[before] if before < len(plan) else "work"
    if step.startswith("limit:"):
        print(f"Claude AI usage limit reached|{int(time.time() + float(step[6:]))}", flush=True)
        sys.exit(1)
    time.sleep(float(os.environ.get("WORK", "0")))
    print("done", flush=True)
    """
)


class Fleet:
    def __init__(self, afk: Afk, tmp) -> None:
        self.afk = afk
        self.agent = tmp / "agent.py"
        self.agent.write_text(AGENT)
        self.runs = tmp / "runs.jsonl"
        self.runs.write_text("")
        self.env = {**afk.env, "RUNS": str(self.runs), "AFK_BACKOFF_BASE_SECONDS": "1"}

    def profile(self, name: str, *extra: str) -> subprocess.CompletedProcess[str]:
        return self.afk("profile", "add", name, "--env", f"WHO={name}", *extra, "--",
                        sys.executable, str(self.agent), env=self.env)  # fmt: skip

    def loop(self, plan: dict[str, list[str]], *args: str, work: float = 0) -> tuple[int, str]:
        env = {**self.env, "PLAN": json.dumps(plan), "WORK": str(work)}
        proc = subprocess.run(Afk.command("loop", "--agent", "f", *args), env=env,
                              capture_output=True, text=True, timeout=300)  # fmt: skip
        return proc.returncode, proc.stderr

    def ran(self) -> list[dict]:
        return [json.loads(line) for line in self.runs.read_text().splitlines() if line]


@pytest.fixture
def fleet(afk, tmp_path):
    return Fleet(afk, tmp_path)


def test_a_limit_sends_the_next_run_to_the_next_profile_at_once_and_back_after_the_reset(fleet):
    afk = fleet.afk
    for name in ("one", "two"):
        assert fleet.profile(name).returncode == 0
    lines = "".join(json.dumps({"title": f"task {i}"}) + "\n" for i in range(1, 9))
    ids = afk.json("enqueue", "--agent", "f", "--file", "-", input=lines)["enqueued"]
    code, said = fleet.loop({"one:task 2": ["limit:4"]}, "--profile", "one", "--profile", "two",
                            work=0.8)  # fmt: skip
    assert code == 0, said
    ran = fleet.ran()
    # task 2 hit one's limit, then ran at once under two, no attempt spent
    second = afk.json("show", ids[1])
    assert [(r["profile"], r["outcome"], r["attempt_spent"]) for r in second["runs"]] == [
        ("one", "usage_limit", False),
        ("two", "done", True),
    ], second["runs"]
    assert second["attempts"] == 1
    limited_at = next(r["at"] for r in ran if (r["who"], r["title"]) == ("one", "task 2"))
    parked = [r for r in afk.json("limit") if r["account"] == "one"] or [None]
    assert parked[0] is None  # (it ran out; the loop went back to it)
    # while one was parked, every run went to two; after its reset, back to one
    # (the reset is a whole second, 3 to 4 s after the limit)
    during = [r["who"] for r in ran if limited_at < r["at"] < limited_at + 2.5]
    after = [r["who"] for r in ran if r["at"] > limited_at + 4.5]
    assert during and set(during) == {"two"}, ran
    assert after and after[-1] == "one", ran
    assert all(afk.json("show", i)["state"] == "done" for i in ids)
    # the morning's story per profile
    digest = afk("digest", "--dry-run", "--format", "text").stdout
    per = digest.split("Per profile:", 1)[1].split("\n\n", 1)[0]
    (one,) = [x for x in per.splitlines() if x.startswith("  - one:")]
    assert "1 run(s) went on under another profile after a limit" in one, per
    assert "parked " in one and any(x.startswith("  - two:") for x in per.splitlines())


def test_when_every_profile_is_parked_the_loop_waits_for_the_earliest_reset(fleet):
    afk = fleet.afk
    for name in ("one", "two"):
        assert fleet.profile(name).returncode == 0
    (task_id,) = afk.json("enqueue", "--agent", "f", "--title", "task 1")["enqueued"]
    began = time.time()
    plan = {"one:task 1": ["limit:3"], "two:task 1": ["limit:120"]}
    code, said = fleet.loop(plan, "--profile", "one", "--profile", "two")
    assert code == 0, said
    assert time.time() - began < 60  # not the later reset
    ran = fleet.ran()
    assert [r["who"] for r in ran] == ["one", "two", "one"], ran
    reset = int(ran[0]["at"] + 3)  # (as the stand-in printed it: a whole second)
    assert ran[2]["at"] >= reset - 0.05, (ran, reset)  # after one's reset, not before
    assert "every profile is parked" in said
    task = afk.json("show", task_id)
    assert task["state"] == "done" and task["attempts"] == 1
    assert [r["profile"] for r in task["runs"]] == ["one", "two", "one"]


@pytest.mark.parametrize(
    "args, says",
    [
        (
            ("profile", "add", "p", "--env", "ANTHROPIC_API_KEY=sk", "--", "true"),
            "looks like a secret",
        ),
        (("profile", "add", "p", "--env", "DB_PASSWORD=x", "--", "true"), "looks like a secret"),
        (("profile", "add", "p", "--env", "NOEQUALS", "--", "true"), "NAME=VALUE"),
        (("profile", "add", "p"), "no agent command"),
        (("loop", "--agent", "f", "--profile", "nobody"), "no profile 'nobody'"),
        (("loop", "--agent", "f", "--profile", "ghost"), "cannot be found"),
        (("loop", "--agent", "f", "--profile", "ghost", "--", "true"), "not both"),
        (("loop", "--agent", "f", "--profile", "real", "--switch-after", "8d"), "0 to 7 days"),
        (("loop", "--agent", "f", "--profile", "real", "--switch-after", "soon"), "soon"),
        (("loop", "--agent", "f", "--switch-after", "1m", "--", "true"), "goes with --profile"),
        (("loop", "--agent", "f", "--label", "harness:claude", "--", "true"), "offers harness"),
        (("enqueue", "--agent", "f", "--title", "x", "--profiles", "real,nobody"), "'nobody'"),
        (("enqueue", "--agent", "f", "--title", "x", "--harness", "emacs"), "'emacs'"),
    ],
)
def test_bad_profiles_are_one_line_exit_2_and_change_nothing(afk, sql, args, says):
    made = afk("profile", "add", "ghost", "--", "/nonexistent/agent")
    assert made.returncode == 0, made.stderr
    assert afk("profile", "add", "real", "--", "true").returncode == 0
    afk.json("enqueue", "--agent", "f", "--title", "t")
    before = sql.fingerprint(), sql("SELECT name FROM afk_profile ORDER BY name")
    proc = afk(*args)
    assert proc.returncode == 2 and says in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert (sql.fingerprint(), sql("SELECT name FROM afk_profile ORDER BY name")) == before


def test_profiles_are_listed_shown_and_removed(afk):
    made = afk.json("profile", "add", "max-2", "--env", "CLAUDE_CONFIG_DIR=/home/me/.claude-2",
                    "--", "claude", "-p", "--output-format", "json")  # fmt: skip
    assert made == {"name": "max-2", "harness": "claude", "account": "max-2",
                    "command": ["claude", "-p", "--output-format", "json"],
                    "env": {"CLAUDE_CONFIG_DIR": "/home/me/.claude-2"}}  # fmt: skip
    assert [p["name"] for p in afk.json("profile", "list")] == ["max-2"]
    assert afk.json("profile", "show", "max-2") == made
    again = afk("profile", "add", "max-2", "--", "claude")
    assert again.returncode == 2 and "exists already" in again.stderr
    assert afk.json("profile", "remove", "max-2") == {"removed": "max-2"}
    assert afk.json("profile", "list") == []


@pytest.mark.parametrize(
    "command, harness",
    [
        (["/opt/bin/claude", "-p"], "claude"),
        (["codex", "exec"], "codex"),
        (["gemini", "-p"], "gemini"),
        # Cursor's CLI is cursor-agent: its profile is a cursor one, which a
        # task of `afk enqueue --harness cursor` fits (it was "cursor-agent")
        (["cursor-agent", "-p"], "cursor"),
        (["copilot", "-p"], "copilot"),
        (["./my-agent.sh"], "other"),
    ],
)
def test_a_profile_is_of_the_harness_its_command_runs(afk, command, harness):
    assert afk.json("profile", "add", "p", "--", *command)["harness"] == harness


def test_a_profile_removed_while_its_loop_runs_ends_the_loop_after_its_run(fleet):
    """Item 7: the run under way finishes; then the loop stops with one line."""
    afk = fleet.afk
    assert fleet.profile("one").returncode == 0
    lines = "".join(json.dumps({"title": f"task {i}"}) + "\n" for i in range(1, 4))
    ids = afk.json("enqueue", "--agent", "f", "--file", "-", input=lines)["enqueued"]
    env = {**fleet.env, "PLAN": "{}", "WORK": "3"}
    loop = Afk.command("loop", "--agent", "f", "--profile", "one")
    proc = subprocess.Popen(
        loop, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )

    poll(lambda: fleet.ran(), timeout=60)  # the first run is under way
    assert afk("profile", "remove", "one").returncode == 0
    _, said = proc.communicate(timeout=120)
    assert proc.returncode == 2, said
    assert "profile 'one' was removed (afk profile remove): the loop stops" in said
    assert afk.json("show", ids[0])["state"] == "done"  # the run it had finished
    assert afk.json("show", ids[1])["state"] == "todo"


def test_a_task_runs_only_under_the_profiles_or_harness_it_names(fleet):
    """``afk enqueue --profiles`` and ``--harness``: a loop takes such a task
    only when one of its usable profiles fits, runs it under that profile
    (its run under that profile's account), and leaves the rest in order; a
    task no live loop can take is flagged in afk status."""
    afk = fleet.afk
    made = [fleet.profile(name) for name in ("one", "two", "three")]
    made.append(fleet.profile("cx", "--harness", "codex"))
    assert all(m.returncode == 0 for m in made), [m.stderr for m in made]
    enqueue = ("enqueue", "--agent", "f", "--title")
    (b,) = afk.json(*enqueue, "task b", "--profiles", "two,three")["enqueued"]
    (c,) = afk.json(*enqueue, "task c", "--profiles", "three")["enqueued"]
    (d,) = afk.json(*enqueue, "task d", "--harness", "codex")["enqueued"]
    (a,) = afk.json(*enqueue, "task a")["enqueued"]
    code, said = fleet.loop({}, "--profile", "one", "--profile", "two", "--profile", "cx")
    assert code == 0, said
    assert [(r["title"], r["who"]) for r in fleet.ran()] == [
        ("task b", "two"),
        ("task d", "cx"),
        ("task a", "one"),
    ]
    for task_id, profile in ((b, "two"), (d, "cx"), (a, "one")):
        (run,) = afk.json("show", task_id)["runs"]
        assert (run["profile"], run["account"], run["outcome"]) == (profile, profile, "done")
    assert afk.json("show", c)["state"] == "todo"
    flagged = afk.json("status", "--agent", "f")["waiting_for_a_loop"]
    assert [(t["id"], t["why"]) for t in flagged] == [
        (c, "waiting for a loop with one of the profiles three")
    ]


def _session_under(sql, task_id: str, profile: str) -> None:
    """The state a run under ``profile`` leaves when a person decided a call
    it asked for: a decided request whose session the next run resumes
    (denied: an approved call the stand-in never makes would keep its task
    from ending done, issue 50 item 2)."""
    sql("""INSERT INTO afk_run (task_id, token, agent_id, runner, account, profile, ended_at,
                                outcome)
           VALUES (%s, 5, 'f', 'gone', %s, %s, now(), 'needs_approval')""",
        task_id, profile, profile)  # fmt: skip
    sql("""INSERT INTO afk_approval (task_id, session_id, harness, tool_name, tool_input,
                                     call_hash, rule, asked_token, expires_at, decision,
                                     decided_at, decided_by)
           VALUES (%s, '6b1c1f1e-0d7e-4c55-9d54-2f0c6f1a7e01', 'claude', 'Bash',
                   '{"command": "make deploy"}', 'h', 'Bash(make deploy)', 5,
                   now() + interval '1 hour', 'denied', now(), 'me')""", task_id)  # fmt: skip


def test_a_task_keeps_the_profile_of_its_session_while_its_reset_is_near(fleet, sql):
    """The session of a task's last run is profile one's (a person decided a
    call it asked for), and one is parked for a few seconds: within
    --switch-after the task waits for one (no attempt spent, the other task
    runs meanwhile under two), then runs under one."""
    afk = fleet.afk
    for name in ("one", "two"):
        assert fleet.profile(name).returncode == 0
    (held,) = afk.json("enqueue", "--agent", "f", "--title", "task 1")["enqueued"]
    (other,) = afk.json("enqueue", "--agent", "f", "--title", "task 2")["enqueued"]
    _session_under(sql, held, "one")
    until = sql.one("SELECT now() + interval '4 seconds'")
    parked = afk("limit", "--account", "one", "--until", until.isoformat(), "--reason", "test")
    assert parked.returncode == 0, parked.stderr
    code, said = fleet.loop({}, "--profile", "one", "--profile", "two")
    assert code == 0, said
    assert [(r["title"], r["who"]) for r in fleet.ran()] == [("task 2", "two"), ("task 1", "one")]
    assert fleet.ran()[1]["at"] >= until.timestamp() - 0.05
    task = afk.json("show", held)
    assert [(r["profile"], r["outcome"], r["attempt_spent"]) for r in task["runs"]] == [
        ("one", "needs_approval", None),
        ("one", "usage_limit", False),
        ("one", "done", True),
    ], task["runs"]
    assert task["attempts"] == 1 and "parked until its reset" in said
    assert afk.json("show", other)["state"] == "done"


def test_a_task_moves_fresh_when_its_sessions_profile_stays_parked_past_switch_after(fleet, sql):
    afk = fleet.afk
    for name in ("one", "two"):
        assert fleet.profile(name).returncode == 0
    (held,) = afk.json("enqueue", "--agent", "f", "--title", "task 1")["enqueued"]
    _session_under(sql, held, "one")
    until = sql.one("SELECT now() + interval '2 hours'")
    assert afk("limit", "--account", "one", "--until", until.isoformat()).returncode == 0
    code, said = fleet.loop({}, "--profile", "one", "--profile", "two", "--switch-after", "10m")
    assert code == 0, said
    assert [(r["title"], r["who"]) for r in fleet.ran()] == [("task 1", "two")]
    assert "stays parked longer than --switch-after: moved to 'two'" in said
    runs = afk.json("show", held)["runs"]
    assert [(r["profile"], r["outcome"]) for r in runs][1:] == [("two", "done")]
