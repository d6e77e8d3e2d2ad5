"""The templates ship in the wheel: a wheel built and installed in a fresh
virtualenv renders a digest."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile

from helpers import ROOT


def test_templates_are_found_in_a_wheel_install(tmp_path):
    built = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "-q",
            "-w",
            str(tmp_path / "dist"),
            str(ROOT),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stderr
    (wheel,) = (tmp_path / "dist").glob("afk_watchdog-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        assert {
            f"watchdog/templates/{n}"
            for n in ("slack.json.j2", "email.html.j2", "email.txt.j2", "webhook.json.j2")
        } <= names
        assert "watchdog/sql/tasks.sql" in names
        assert "watchdog/templates/web/overview.html.j2" in names
        assert "watchdog/migrations/0001_afk_task.sql" in names
        archive.extractall(tmp_path / "site")
    script = (
        "import watchdog.digest as d, sys; from watchdog.config import DigestSettings;"
        "assert d.__file__.startswith(sys.argv[1]), d.__file__;"
        "print(d.template_dirs(DigestSettings()))"
    )
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "site")}
    out = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path / "site")],
        env=env,
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr
    assert str(tmp_path / "site" / "watchdog" / "templates") in out.stdout
