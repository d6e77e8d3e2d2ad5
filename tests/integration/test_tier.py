"""The integration tier keeps its word: a test here that starts a process
fails (tests/integration/conftest.py guards it); a database is allowed."""

from __future__ import annotations

import subprocess

import pytest


def test_an_integration_test_cannot_start_a_process(sql):
    assert sql.one("SELECT 1") == 1  # the database is there
    with pytest.raises(pytest.fail.Exception, match="started a process"):
        subprocess.run(["true"], check=False)
