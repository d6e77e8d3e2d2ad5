"""Issue 53 item 5 (P25): durations, one parser, one message. `--stall-after
-5m` read as an unknown option; `--max-run 0` was refused while the settings
table says 0 is no cap. Every duration flag, and a setting from the
environment, refuses a negative the same way, and nothing runs."""

from __future__ import annotations

import sys

import pytest

NEGATIVE = "is negative: a duration is 0 or more"

FLAGS = {
    "--stall-after": ["loop", "--agent", "a", "--stall-after", "{}", "--", "true"],
    "--max-run": ["loop", "--agent", "a", "--max-run", "{}", "--", "true"],
    "--approval-ttl": ["loop", "--agent", "a", "--approval-ttl", "{}", "--", "true"],
    "--switch-after": ["loop", "--agent", "a", "--profile", "p", "--switch-after", "{}"],
    "--notify-every": ["watchdog", "run", "--notify-every", "{}"],
    "review --since": ["review", "--since", "{}"],
    "dead --since": ["dead", "--since", "{}"],
    "gc --older-than": ["gc", "--older-than", "{}"],
}


@pytest.mark.parametrize("flag", FLAGS)
@pytest.mark.parametrize("value", ["-5m", "-5", "-0.5h", "- 5m"])
def test_a_negative_duration_is_refused_the_same_way_by_every_flag(afk, flag, value):
    done = afk(*(a.format(value) for a in FLAGS[flag]))
    assert done.returncode == 2, (flag, done.stderr)
    assert "Traceback" not in done.stderr and "expected one argument" not in done.stderr
    assert NEGATIVE in done.stderr or "not a duration" in done.stderr, (flag, done.stderr)
    if value != "- 5m":  # (a dash and a space: not a number, an option's word)
        assert NEGATIVE in done.stderr, (flag, done.stderr)


@pytest.mark.parametrize("name", ["AFK_STALL_SECONDS", "AFK_MAX_RUN_SECONDS"])
def test_a_negative_duration_in_the_environment_is_refused_the_same_way(afk, name):
    done = afk("loop", "--agent", "a", "--", "true", env={name: "-5m"})
    assert done.returncode == 2 and NEGATIVE in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_max_run_0_is_no_cap_as_its_setting_says_over_the_environments(afk):
    """`--max-run 0` was refused ("must be above 0"); it means no cap, and
    it wins over AFK_MAX_RUN_SECONDS as any flag does."""
    (task,) = afk.json("enqueue", "--agent", "a", "--title", "slow")["enqueued"]
    slow = [sys.executable, "-c", "import time; time.sleep(3)"]
    done = afk("loop", "--agent", "a", "--max-tasks", "1", "--max-run", "0", "--", *slow,
               env={"AFK_MAX_RUN_SECONDS": "1"})  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert afk.json("show", task)["state"] == "done"
