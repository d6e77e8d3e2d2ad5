"""The deploy files: systemd units verify, alert rules pass promtool, and every
metric the alerts and the dashboard use is one the service exports."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from helpers import ROOT, require_tool

DEPLOY = ROOT / "deploy"


def test_systemd_units_verify(tmp_path):
    analyze = require_tool("systemd-analyze")
    afk = shutil.which("afk") or str(Path(sys.executable).parent / "afk")
    units = []
    for unit in (DEPLOY / "systemd").glob("afk-*.[st]*"):
        if unit.suffix not in (".service", ".timer"):
            continue
        # verify the units as installed: ExecStart must name an existing afk
        text = unit.read_text().replace("/opt/afk-watchdog/bin/afk", afk)
        (tmp_path / unit.name).write_text(text)
        units.append(str(tmp_path / unit.name))
    assert len(units) == 3
    done = subprocess.run([analyze, "verify", *units], capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    ours = [line for line in done.stderr.splitlines() if str(tmp_path) in line or "afk-" in line]
    assert ours == [], "systemd-analyze warned about our units"
    # the user unit (verified as a system one: %h is then root's home)
    user = tmp_path / "user"
    user.mkdir()
    unit = DEPLOY / "systemd" / "user" / "afk-watchdog.service"
    (user / unit.name).write_text(unit.read_text().replace("/opt/afk-watchdog/bin/afk", afk))
    done = subprocess.run(
        [analyze, "verify", str(user / unit.name)], capture_output=True, text=True, cwd=user
    )
    assert done.returncode == 0 and "afk-" not in done.stderr, done.stderr


def test_alert_rules_pass_promtool():
    promtool = require_tool("promtool")
    done = subprocess.run(
        [promtool, "check", "rules", str(DEPLOY / "prometheus" / "alerts.yml")],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr
