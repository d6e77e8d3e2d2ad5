"""Failed sign-ins to the status pages are slowed, never locked out (issue
50 item 6): a table of the waits, per address and over all of them."""

from __future__ import annotations

from watchdog.web import SlowedSignIns


def test_each_failure_of_an_address_waits_longer_up_to_a_bound():
    slowed = SlowedSignIns()
    waits = [slowed.failed("10.0.0.1") for _ in range(9)]
    assert waits == [0.0, 0.0, 0.0, 0.5, 1.0, 2.0, 4.0, 5.0, 5.0]
    assert slowed.failed("10.0.0.2") == 0.0  # another address: its own count


def test_many_addresses_failing_are_slowed_together():
    """Behind a proxy every client has one address; spread over many, the
    failures of all of them count too."""
    slowed = SlowedSignIns()
    waits = [slowed.failed(f"10.0.{n // 250}.{n % 250}") for n in range(60)]
    assert waits[:39] == [0.0] * 39
    assert waits[39] == 0.5 and waits[-1] >= 2.0


def test_an_address_is_forgotten_after_a_quiet_while(monkeypatch):
    import time

    slowed = SlowedSignIns()
    for _ in range(6):
        slowed.failed("10.0.0.1")
    later = time.monotonic() + SlowedSignIns.FORGOTTEN_AFTER + 1
    monkeypatch.setattr(time, "monotonic", lambda: later)
    assert slowed.failed("10.0.0.1") == 0.0


def test_a_flood_of_failures_holds_no_more_than_a_few_threads_waiting():
    import threading

    slowed = SlowedSignIns()
    slowed.MOST_WAIT = 3.0  # (long enough that every thread starts within it)
    for _ in range(SlowedSignIns.FREE):
        slowed.failed("10.0.0.9")
    answers: list[bool] = []
    threads = [threading.Thread(target=lambda: answers.append(slowed.wait("10.0.0.9")))
               for _ in range(SlowedSignIns.MOST_WAITING + 8)]  # fmt: skip
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert len(answers) == SlowedSignIns.MOST_WAITING + 8
    assert answers.count(True) >= 1 and answers.count(False) >= 1  # (refused: no wait)
