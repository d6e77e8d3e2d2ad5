"""Approvals (issue 43) with a stand-in agent that runs its harness's hook
command the way the harness does, for what the real Claude Code CLI cannot
show (tests/e2e/test_real_claude.py has its deferred call resumed): a
harness with no `defer` (Gemini CLI's BeforeTool), a request no one decides
in time, a secret in the call's input, and bad rules."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
from helpers import Afk

#: a stand-in for Gemini CLI: it asks its installed BeforeTool hook (afk's,
#: for Gemini) about `git push origin main`, prints the hook's answer, and
#: ends its turn as an agent told no does
AGENT = textwrap.dedent(
    """
    import json, os, subprocess, sys
    payload = {"session_id": "g-1", "hook_event_name": "BeforeTool",
               "tool_name": "run_shell_command",
               "tool_input": {"command": os.environ["AGENT_COMMAND"]}}
    hook = [sys.executable, "-m", "watchdog.cli", "hook", "--harness", "gemini"]
    said = subprocess.run(hook, input=json.dumps(payload), capture_output=True, text=True)
    print("HOOK-SAID " + (said.stdout.strip() or "{}"), flush=True)
    """
)
RULE = "Bash(git push:*)"


class Approvals:
    def __init__(self, afk: Afk, tmp) -> None:
        self.afk = afk
        self.agent = tmp / "agent.py"
        self.agent.write_text(AGENT)
        self.env = {**afk.env, "USER": "on-call", "AGENT_COMMAND": "git push origin main"}

    def loop(self, *options: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
        command = Afk.command("loop", "--agent", "g", "--ask-for", RULE, *options, "--")
        return subprocess.run(
            [*command, sys.executable, str(self.agent)],
            env={**self.env, **(env or {})},
            capture_output=True,
            text=True,
            timeout=120,
        )

    def said(self, proc: subprocess.CompletedProcess) -> dict:
        (line,) = [x for x in proc.stdout.splitlines() if x.startswith("HOOK-SAID ")]
        return dict(json.loads(line.removeprefix("HOOK-SAID ")))


@pytest.fixture
def approvals(afk, tmp_path):
    return Approvals(afk, tmp_path)


def test_a_harness_without_defer_is_told_no_and_its_task_waits_for_the_person(approvals, sql):
    afk = approvals.afk
    (task_id,) = afk.json("enqueue", "--agent", "g", "--title", "ship")["enqueued"]
    first = approvals.loop()
    assert first.returncode == 0, first.stderr
    answer = approvals.said(first)
    assert answer["decision"] == "deny" and "a person was asked" in answer["reason"], answer
    # the agent ended its turn with exit 0: not done, but waiting, no attempt spent
    task = afk.json("show", task_id)
    assert task["state"] == "paused" and task["attempts"] == 0, task
    assert [r["outcome"] for r in task["runs"]] == ["needs_approval"]
    (waiting,) = afk.json("approvals")
    assert waiting["harness"] == "gemini" and waiting["rule"] == RULE
    # the morning's "waiting for you" names it
    digest = afk("digest", "--dry-run", "--format", "text").stdout
    assert "waiting for a person's approval" in digest and "git push origin main" in digest
    # a person says no, with a word for the agent; the next run hears it
    denied = afk.json(
        "deny", str(waiting["id"]), "--note", "open a pull request instead", env=approvals.env
    )
    assert denied["due_again"] is True
    second = approvals.loop()
    assert second.returncode == 0, second.stderr
    answer = approvals.said(second)
    assert answer["decision"] == "deny" and "open a pull request instead" in answer["reason"]
    assert "on-call" in answer["reason"]
    task = afk.json("show", task_id)
    assert task["state"] == "done", task  # it went on without the push
    assert afk.json("approvals") == []


@pytest.mark.parametrize("then", ["deny", "hold"])
def test_a_request_no_one_decides_in_time_is_denied_or_held(approvals, sql, then):
    afk = approvals.afk
    (task_id,) = afk.json("enqueue", "--agent", "g", "--title", "ship")["enqueued"]
    first = approvals.loop("--approval-ttl", "1m", "--on-approval-timeout", then)
    assert first.returncode == 0, first.stderr
    (waiting,) = afk.json("approvals")
    assert waiting["on_timeout"] == then
    sql("UPDATE afk_approval SET expires_at = now() - interval '1 second'")  # (its minute)
    tick = afk("watchdog", "tick", "approvals")
    assert tick.returncode == 0, tick.stderr
    task = afk.json("show", task_id)
    if then == "hold":  # still waiting for a person, as asked
        assert task["state"] == "paused" and len(afk.json("approvals")) == 1, task
        return
    assert task["state"] == "todo" and afk.json("approvals") == [], task
    (expired,) = afk.json("approvals", "--all")
    assert (expired["decision"], expired["decided_via"]) == ("expired", "ttl")
    second = approvals.loop()
    answer = approvals.said(second)
    assert answer["decision"] == "deny" and "in time" in answer["reason"], answer
    assert afk.json("show", task_id)["state"] == "done"


def test_a_secret_in_the_call_is_not_shown_to_the_person(approvals):
    afk = approvals.afk
    afk.json("enqueue", "--agent", "g", "--title", "ship")
    secret = "git push https://user:hunter2secret@example.com/repo.git main"
    first = approvals.loop(env={"AGENT_COMMAND": secret})
    assert first.returncode == 0, first.stderr
    (waiting,) = afk.json("approvals")
    shown = waiting["tool_input"]["command"]
    assert "hunter2secret" not in json.dumps(waiting) and shown.startswith("git push https://")


@pytest.mark.parametrize(
    "args",
    [
        ("loop", "--agent", "g", "--ask-for", "Bash(", "--", "true"),
        ("loop", "--agent", "g", "--ask-for", "Bash(x)", "--approval-ttl", "5s", "--", "true"),
        ("enqueue", "--agent", "g", "--title", "t", "--ask-for", "Bash()"),
        ("deny", "not-a-number"),
    ],
)
def test_bad_rules_and_ids_are_one_line_and_change_nothing(afk, sql, args):
    afk.json("enqueue", "--agent", "g", "--title", "before")
    before = sql.fingerprint()
    proc = afk(*args)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert sql.fingerprint() == before
