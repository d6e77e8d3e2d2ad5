"""`afk doctor`'s clock check in-process: a clock off the database's is a
problem."""

from __future__ import annotations


def test_a_clock_off_the_databases_is_a_problem():
    from watchdog.doctor import check_clock

    assert check_clock(1000.0, 1001.5).ok
    late = check_clock(1000.0, 1007.0)
    assert not late.ok and "7.0 s off" in late.detail and "NTP" in (late.fix or "")
