"""The simulated night, short (bench/night.py --quick): a minute of several
`afk loop` supervisors on two accounts, a stand-in agent that works, fails,
hits usage limits, meets outages, asks questions, SIGKILLs its supervisor and
outlives its lease, Ctrl-C'd and SIGKILLed supervisors, the watchdog's
reclaim, and one database restart. The targets are the night's promises."""

from __future__ import annotations

import json
import subprocess
import sys

from helpers import ROOT


def test_a_short_night_loses_nothing_and_spends_no_attempt_on_limits():
    proc = subprocess.run(
        [sys.executable, "-m", "bench.night", "--quick"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    report = json.loads(proc.stdout)
    assert report["lost"] == 0, report
    assert report["attempts_on_limits_and_outages"] == 0, report
    # a SIGKILLed supervisor's agent dies with it (its guardian): no orphan
    # completes a task that a retry completes again
    assert report["orphan_completions"] == 0, report
    # A task may still be completed twice where its lease ran out under a
    # living supervisor (on a loaded machine its heartbeats starve), or where
    # a person's Ctrl-C stopped a run whose agent had done the work but not
    # yet exited
    windows = report["lease_lost_runs"] + report["interrupted_runs"]
    assert report["done_more_than_once"] <= windows, {
        k: report[k]
        for k in ("done_more_than_once", "lease_lost_runs", "interrupted_runs", "events")
    }
    # the hangs (after a line, or from the start) were stopped as stalled,
    # unless a Ctrl-C or a SIGKILL of their loop came first, or the night
    # ended under them: none ended any other way (say, done or failed)
    assert report["hangs_missed"] == 0, report["hang_ends"]
    assert sum(report["hang_ends"].values()) == report["hangs"], report["hang_ends"]
    assert report["questions"]["asked"] == report["questions"]["resumed"], report
    assert report["states"].get("done", 0) + report["states"].get("failed", 0) == report["tasks"]
    assert any("database restarted" in e for e in report["events"]), report["events"]
    assert any("SIGKILLed" in e for e in report["events"]), report["events"]
    assert report["wasted_share_excluding_crashes"] < 0.02, report
    assert proc.returncode == 0, proc.stderr[-2000:]
