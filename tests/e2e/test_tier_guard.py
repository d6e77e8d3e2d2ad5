"""The e2e tier's guard (tests/e2e/conftest.py), run by a real pytest on a
folder of its own: a test that starts nothing fails it, and a test that
skipped (its tool is missing on this machine, outside CI) passes it."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

TESTS = """
import subprocess, pytest

def test_starts_a_process():
    subprocess.run(["true"], check=True)

def test_starts_nothing():
    assert 1 + 1 == 2

def test_skips_for_a_missing_tool():
    pytest.skip("no such tool on this machine")
"""

PLUGINS_OFF = ("-p", "no:cacheprovider", "-p", "no:xdist")


def test_the_guard_fails_an_idle_test_and_passes_a_skipped_one(tmp_path: Path) -> None:
    folder = tmp_path / "e2e"
    folder.mkdir()
    shutil.copy(Path(__file__).with_name("conftest.py"), folder / "conftest.py")
    (folder / "test_probe.py").write_text(TESTS)
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rA", "-o", "addopts=", *PLUGINS_OFF, str(folder)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    out = run.stdout
    assert "PASSED e2e/test_probe.py::test_starts_a_process" in out, out
    assert "SKIPPED" in out and "no such tool on this machine" in out, out
    assert "ERROR e2e/test_probe.py::test_starts_nothing" in out, out
    assert "ERROR e2e/test_probe.py::test_skips_for_a_missing_tool" not in out, out
    # (test_starts_nothing's call passed; its teardown errs)
    assert "2 passed, 1 skipped, 1 error" in out.splitlines()[-1], out
