"""The digest's content and templates: grouping, bounds, hostile text,
golden files, and templates found in a wheel install."""

from __future__ import annotations

import html
import json
from datetime import UTC, timedelta

from helpers.digests import TRACEBACK

from watchdog import NewTask
from watchdog.config import DigestSettings
from watchdog.digest import SLACK_MAX_BLOCKS, SLACK_MAX_TEXT, Digest, Group, build, render

HOSTILE_TITLE = (
    'He said "hi" \\ <script>alert(1)</script> <!channel> @here <http://evil|click>\nline 2'
)


def fail_tasks(queue, agent: str, errors: list[str], **task) -> list:
    queue.enqueue(
        agent, [NewTask(f"{agent} task {i}", max_attempts=1, **task) for i in range(len(errors))]
    )
    out = []
    for error in errors:
        t = queue.claim(agent, runner="r")
        queue.checkpoint(t, {"files": ["a.py"], "pr": 3})
        out.append(queue.fail(t, error))
    return out


def window(sql):
    now = sql.one("SELECT now()")
    return now - timedelta(hours=1), now + timedelta(seconds=1)


def test_fifty_failures_with_one_error_read_as_one_group(queue, sql):
    fail_tasks(queue, "a", [f"HTTP 503 from api (request {i})" for i in range(50)])
    fail_tasks(queue, "a", ["syntax error in tests/test_x.py line 3"])
    fail_tasks(queue, "b", ["HTTP 503 from api (request 1)"])
    start, end = window(sql)
    d = build(
        queue.db, start, end, DigestSettings(link_template="https://t/{agent_id}/{task_id}"), UTC
    )
    assert d.failed_total == 52
    assert [(g.agent_id, g.count) for g in d.groups] == [("a", 50), ("a", 1), ("b", 1)]
    big = d.groups[0]
    assert big.error == "HTTP <n> from api (request <n>)" and big.more == 45
    t = big.tasks[0]
    assert t.checkpoint_keys == ["files", "pr"] and t.retry == f"afk retry {t.id}"
    assert t.link == f"https://t/a/{t.id}"
    assert d.per_agent == [
        {"agent_id": "a", "done": 0, "failed": 51},
        {"agent_id": "b", "done": 0, "failed": 1},
    ]


def test_stuck_and_all_clear(queue, sql):
    start, end = window(sql)
    assert build(queue.db, start, end, DigestSettings(), UTC).all_clear
    queue.enqueue("a", [NewTask("stalled"), NewTask("paused"), NewTask("waiting")])
    stalled = queue.claim("a", runner="r1")
    sql.expire(stalled.id)
    queue.claim("a", runner="r2")
    queue.pause("a", runner="r2")
    sql("UPDATE afk_task SET updated_at = now() - interval '7 hours' WHERE title = 'paused'")
    sql("UPDATE afk_task SET created_at = now() - interval '7 hours' WHERE title = 'waiting'")
    d = build(queue.db, start, end, DigestSettings(), UTC)
    assert not d.all_clear and d.failed_total == 0
    assert [t["title"] for t in d.expired] == ["stalled"]
    assert [t["title"] for t in d.paused] == ["paused"]
    assert [t["title"] for t in d.oldest_todo] == ["waiting"]


def test_ten_thousand_failures_still_make_valid_bounded_messages(queue, sql):
    sql("""INSERT INTO afk_task (agent_id, ordinal, title, state, attempts, last_error,
                                 checkpoint, updated_at)
           SELECT 'agent-' || (i % 7), i, 'task ' || i, 'failed', 5,
                  'error kind ' || translate((i % 97)::text, '0123456789', 'abcdefghij')
                  || chr(10) || repeat('x', 3000), '{"k": 1}', now()
             FROM generate_series(1, 10000) i""")
    start, end = window(sql)
    d = build(queue.db, start, end, DigestSettings(), UTC)
    assert d.failed_total == 10000 and len(d.groups) == 20
    assert d.hidden_failures + d.ungrouped_failures + sum(g.count for g in d.groups) == 10000
    slack = json.loads(render(d, "slack", DigestSettings()))
    assert len(slack["blocks"]) <= SLACK_MAX_BLOCKS
    texts = [b["text"]["text"] for b in slack["blocks"] if "text" in b]
    assert all(len(t) <= SLACK_MAX_TEXT for t in texts)
    assert "more failures" in json.dumps(slack)
    webhook = json.loads(render(d, "webhook", DigestSettings()))
    assert webhook["failed_total"] == 10000
    assert len(render(d, "html", DigestSettings())) < 500_000


def test_hostile_content_is_shown_literally(queue, sql):
    huge = "E" * 100_000
    queue.enqueue("a", [NewTask(HOSTILE_TITLE, max_attempts=1)])
    t = queue.claim("a", runner="r")
    queue.fail(t, HOSTILE_TITLE + huge)
    start, end = window(sql)
    d = build(queue.db, start, end, DigestSettings(), UTC)

    slack = render(d, "slack", DigestSettings())
    payload = json.loads(slack)
    text = json.dumps(payload)
    assert "<!channel>" not in text and "<script>" not in text and "<http://evil" not in text
    assert "@here" not in text.replace("@\\u200bhere", "")
    assert "&lt;!channel&gt;" in text and "@\\u200bhere" in text

    page = render(d, "html", DigestSettings())
    assert "<script>" not in page
    assert html.escape("<script>alert(1)</script>") in page

    webhook = json.loads(render(d, "webhook", DigestSettings()))
    assert webhook["groups"][0]["tasks"][0]["title"] == HOSTILE_TITLE
    assert len(webhook["groups"][0]["tasks"][0]["last_error"]) <= 2000

    text = render(d, "text", DigestSettings())
    assert HOSTILE_TITLE.splitlines()[0] in text


def test_a_keyerror_and_a_full_disk_are_two_groups_and_a_long_traceback_keeps_its_tail(queue, sql):
    from watchdog.config import DigestSettings
    from watchdog.digest import build

    frames = "".join(
        f'  File "/w/m{i}.py", line {i}, in f{i}\n    f{i + 1}()\n' for i in range(400)
    )
    errors = [
        TRACEBACK.format("d['k']", "KeyError: 'k'"),
        "Traceback (most recent call last):\n" + frames + "OSError: [Errno 28] No space "
        "left on device",
    ]
    for i, error in enumerate(errors):
        queue.enqueue("a", [NewTask(f"t{i}", max_attempts=1)])
        queue.fail(queue.claim("a", runner="r"), error)
    now = sql.one("SELECT now()")
    digest = build(
        queue.db, now - timedelta(hours=1), now + timedelta(seconds=1), DigestSettings(), UTC
    )
    titles = sorted(g.error for g in digest.groups)
    assert titles == ["KeyError: 'k'", "OSError: [Errno <n>] No space left on device"]


def test_the_digest_reads_right_at_breakfast(queue, sql):
    """Item 15: only late todos are 'stuck', an agent's groups stay together,
    times carry their zone, bidi controls cannot reverse agent text, long
    strings wrap, and the `afk dead --agent` hint is shell-quoted."""
    from watchdog.config import DigestSettings
    from watchdog.digest import build

    queue.enqueue("fresh", [NewTask("just enqueued")])  # not late: not listed
    queue.enqueue("late", [NewTask("waiting since yesterday")])
    sql("UPDATE afk_task SET created_at = now() - interval '2 days' WHERE agent_id = 'late'")
    agent = "b; rm -rf ~"
    for i, error in enumerate(["E1", "E1", "E1", "E2", "E3", "E3"]):
        who = agent if i != 4 else "a"
        queue.enqueue(who, [NewTask(f"t{i} \u202eevil", max_attempts=1)])
        queue.fail(queue.claim(who, runner="r"), error)
    now = sql.one("SELECT now()")
    digest = build(
        queue.db, now - timedelta(hours=1), now + timedelta(seconds=1), DigestSettings(), UTC
    )
    assert [t["agent_id"] for t in digest.oldest_todo] == ["late"]
    agents = [g.agent_id for g in digest.groups]
    assert agents == sorted(agents, key=agents.index)  # each agent's groups together
    assert agents.index("a") in (0, len(agents) - 1)
    for fmt in ("text", "html", "slack"):
        text = render(digest, fmt, DigestSettings())
        assert "\u202e" not in text, fmt
        assert "UTC" in text, fmt
    html_text = render(digest, "html", DigestSettings())
    assert "overflow-wrap:break-word" in html_text and "<bdi>" in html_text
    first = next(g for g in digest.groups if g.agent_id == agent)
    many = Digest(**{**digest.__dict__, "groups": [Group(agent, "E", 9, first.tasks)]})
    assert "afk dead --agent 'b; rm -rf ~'" in render(many, "text", DigestSettings())


def test_a_night_that_fails_again_and_again_is_not_all_clear(queue, sql):
    """Issue 53 item 1 (P20): three tasks, one done, one failing its check
    attempt after attempt, one crashing (its lease expired): the digest names
    both as failing, retrying, in every format, and `afk status` and the
    gauge count them."""
    from watchdog.jobs import gauges

    queue.enqueue(
        "a",
        [
            NewTask("ships fine", max_attempts=5),
            NewTask("flaky check", max_attempts=5),
            NewTask("crashes", max_attempts=5),
        ],
    )
    queue.done(queue.claim("a", runner="r"))
    for _ in range(4):  # 4 of 5 attempts spent, in backoff
        sql("UPDATE afk_task SET run_after = NULL WHERE title = 'flaky check'")
        t = queue.claim("a", runner="r")
        assert t is not None and t.title == "flaky check"
        queue.fail(t, "===== summary =====\nFAILED tests/test_x.py::test_y - assert 1 == 2\n")
    crashed = queue.claim("a", runner="r2")
    assert crashed is not None and crashed.title == "crashes"
    sql.expire(crashed.id)
    queue.reclaim()
    start, end = window(sql)
    d = build(queue.db, start, end, DigestSettings(), UTC)
    assert d.failed_total == 0 and not d.all_clear
    assert d.headline == "0 failed, 2 retrying"
    assert [(r["title"], r["spent"], r["max_attempts"]) for r in d.retrying] == [
        ("flaky check", 4, 5),
        ("crashes", 1, 5),
    ]
    flaky, crash = d.retrying
    assert flaky["error"] == "FAILED tests/test_x.py::test_y - assert 1 == 2"
    assert flaky["next_at"] is not None and crash["next_at"] is None
    assert crash["error"] == "lease expired" and flaky["short_id"] == flaky["id"][:8]

    settings = DigestSettings()
    text = render(d, "text", settings)
    assert text.startswith("afk digest: 0 failed, 2 retrying\n") and "all clear" not in text
    assert "Failing, retrying (2):" in text
    assert f"{flaky['short_id']} flaky check (a): 4 of 5 attempts spent, next try" in text
    assert "error: FAILED tests/test_x.py::test_y - assert 1 == 2" in text
    assert "crashes (a): 1 of 5 attempts spent, due again now" in text
    page = render(d, "html", settings)
    assert "afk digest: 0 failed, 2 retrying" in page and "Failing, retrying (2)" in page
    assert "4 of 5 attempts spent" in page and "Nothing failed" not in page
    slack = json.loads(render(d, "slack", settings))
    assert slack["text"] == "afk digest: 0 failed, 2 retrying"
    assert "4 of 5 attempts spent" in json.dumps(slack) and "white_check_mark" not in json.dumps(
        slack
    )
    hook = json.loads(render(d, "webhook", settings))
    assert hook["all_clear"] is False and hook["retrying_total"] == 2
    assert hook["headline"] == "0 failed, 2 retrying"
    assert [r["title"] for r in hook["retrying"]] == ["flaky check", "crashes"]
    assert queue.overview("a")["retrying"] == 2 and queue.overview("b")["retrying"] == 0
    assert "retrying" not in queue.status("a")
    assert gauges(queue).retrying == [("a", 2)]
    # done, it is no longer retrying; and a window after its failures leaves it out
    sql("UPDATE afk_task SET run_after = NULL WHERE title = 'flaky check'")
    queue.done(queue.claim("a", runner="r"))
    assert queue.overview("a")["retrying"] == 1
    later = build(queue.db, end, end + timedelta(hours=1), DigestSettings(), UTC)
    assert later.retrying == [] and later.all_clear
