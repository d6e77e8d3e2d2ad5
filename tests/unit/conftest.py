"""The unit tier: no process, no socket, no database. A test here that
starts, opens or connects to one fails (tests/unit/test_tiers.py)."""

from __future__ import annotations

import pytest
from helpers import forbid


@pytest.fixture(autouse=True)
def unit_tier(monkeypatch: pytest.MonkeyPatch) -> None:
    forbid(monkeypatch, "unit", sockets=True)
