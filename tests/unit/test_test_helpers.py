"""The tests' own helpers can fail: a matcher that accepted anything, or a
poll that never gave up, would make every test that uses them pass."""

from __future__ import annotations

import pytest
from helpers import poll
from helpers.conformance import matches


def test_the_conformance_matcher_can_fail():
    assert matches({"a": "*", "b": [1]}, {"a": "x", "b": [1]})
    assert not matches({"a": "*"}, {"a": ""})
    assert not matches({"a": "*"}, {"a": "x", "b": 1})
    assert not matches(None, {})


def test_poll_gives_up_when_the_condition_never_holds():
    with pytest.raises(AssertionError):
        poll(lambda: False, timeout=0.1)
