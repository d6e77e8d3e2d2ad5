"""The integration tier: a real database, in-process. A test here that
starts a process fails (the database server is the session's, started
before the test)."""

from __future__ import annotations

import pytest
from helpers import forbid


@pytest.fixture(autouse=True)
def integration_tier(monkeypatch: pytest.MonkeyPatch) -> None:
    forbid(monkeypatch, "integration", sockets=False)
