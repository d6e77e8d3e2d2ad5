"""The digest inside the watchdog service: two replicas at digest time send
one message; a poison alert goes out once; `afk watchdog tick digest`."""

from __future__ import annotations

import json

from helpers import poll
from helpers.digests import digest_env
from helpers.service import Service, run

from watchdog import NewTask


def test_two_replicas_at_digest_time_send_one_message(dsn, sql, queue, receiver):
    queue.enqueue("a", [NewTask("t", max_attempts=1)])
    queue.fail(queue.claim("a", runner="r"), "boom")
    receiver.script = [(503, {}), (503, {})]  # and Slack-like trouble on the way
    env = digest_env(sql, receiver)
    first, second = Service(dsn, **env), Service(dsn, **env)
    try:
        assert poll(lambda: len(receiver.received) == 1, timeout=60)
        leader = first if first.value("afk_watchdog_leader") == 1 else second
        assert poll(
            lambda: (
                leader.value(
                    "afk_digest_deliveries_total", destination="webhook", outcome="delivered"
                )
                == 1
            )
        )
        # kill the leader: the other replica takes over and still sends nothing more
        leader.proc.kill()
        other = second if leader is first else first
        assert poll(lambda: other.value("afk_watchdog_leader") == 1, timeout=30)
        runs = other.value("afk_job_runs_total", job="digest") or 0
        assert poll(lambda: (other.value("afk_job_runs_total", job="digest") or 0) >= runs + 3)
        assert len(receiver.received) == 1 and receiver.attempts == 3
        assert json.loads(receiver.received[0].body)["failed_total"] == 1
    finally:
        first.cleanup()
        second.cleanup()


def test_a_poison_alert_goes_out_once_per_period_across_restarts(dsn, sql, queue, receiver):
    queue.enqueue("a", [NewTask("poisonous", max_attempts=1)])
    queue.fail(queue.claim("a", runner="r"), "always fails")
    env = digest_env(
        sql, receiver, AFK_POISON_ALERT="1", AFK_POISON_INTERVAL="1h", AFK_DIGEST_CRON="0 0 1 1 *"
    )  # no digest due in this test

    def alerts() -> list:
        return [r for r in receiver.received if b"afk.poison_pills" in r.body]

    first = Service(dsn, **env)
    try:
        assert poll(lambda: len(alerts()) == 1, timeout=60)
        assert json.loads(alerts()[0].body)["tasks"][0]["title"] == "poisonous"
    finally:
        assert first.stop() == 0
        first.cleanup()
    # a restart within the same hour runs the poison job again, and sends nothing
    second = Service(dsn, **env)
    try:
        assert poll(
            lambda: (
                second.value("afk_job_last_success_timestamp_seconds", job="poison") is not None
            ),
            timeout=60,
        )
        assert len(alerts()) == 1
    finally:
        second.cleanup()


def test_tick_digest(dsn, sql, receiver):
    env = {"AFK_DSN": dsn, **digest_env(sql, receiver)}
    out = run("watchdog", "tick", "digest", **env)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["result"]["deliveries"][0]["state"] == "delivered"
    assert len(receiver.received) == 1
    receiver.script = [(500, {})]
    sql("DELETE FROM afk_digest_delivery")
    failed = run("watchdog", "tick", "digest", **env)
    assert failed.returncode == 1 and "HTTP 500" in failed.stdout
