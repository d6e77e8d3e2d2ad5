"""A digest of fixed data and a fixed clock (the golden files'), and the
settings that make the service send one now: for the tests of the digest,
its delivery and the pooler."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from watchdog.digest import Digest, FailedTask, Group

#: the webhook secret of the digest tests
SECRET = "k3y"


def sample_digest() -> Digest:
    """Fixed data and a fixed clock, for the golden files."""
    at = datetime(2026, 11, 30, 6, 45, tzinfo=UTC)
    t1 = FailedTask(
        "11111111-1111-1111-1111-111111111111",
        "backlog-a",
        "Fix the flaky login test",
        5,
        5,
        at,
        "AssertionError: expected 200, got 503",
        ["files", "steps_done"],
        "https://tracker.example/backlog-a/11111111-1111-1111-1111-111111111111",
    )
    t2 = FailedTask(
        "22222222-2222-2222-2222-222222222222",
        "backlog-a",
        "Bump the HTTP client",
        3,
        3,
        at - timedelta(hours=3),
        "pip: resolution impossible",
        [],
        None,
    )
    return Digest(
        window_start=at - timedelta(hours=24),
        window_end=at + timedelta(hours=1, minutes=15),
        generated_at=at + timedelta(hours=1, minutes=15),
        tz=UTC,
        totals={"todo": 4, "running": 1, "paused": 1, "done": 31, "failed": 2},
        per_agent=[{"agent_id": "backlog-a", "done": 12, "failed": 2}],
        failed_total=2,
        groups=[
            Group("backlog-a", "AssertionError: expected <n>, got <n>", 1, [t1]),
            Group("backlog-a", "pip: resolution impossible", 1, [t2]),
        ],
        hidden_groups=0,
        hidden_failures=0,
        ungrouped_failures=0,
        expired=[
            {
                "id": "33333333-3333-3333-3333-333333333333",
                "agent_id": "backlog-b",
                "title": "Document the config",
                "lease_owner": "laptop-2",
                "lease_until": "2026-11-30T05:00:00+00:00",
                "attempts": 1,
            }
        ],
        paused=[],
        oldest_todo=[
            {
                "id": "44444444-4444-4444-4444-444444444444",
                "agent_id": "backlog-b",
                "title": "Remove the dead flag",
                "created_at": "2026-11-28T22:10:00+00:00",
            }
        ],
        no_loop=[
            {
                "id": "66666666-6666-6666-6666-666666666666",
                "agent_id": "backlog-b",
                "title": "Train the ranker",
                "requires": ["gpu"],
                "profiles": None,
                "why": "waiting for a loop with gpu",
            }
        ],
        waiting=[
            {
                "id": "55555555-5555-5555-5555-555555555555",
                "agent_id": "backlog-a",
                "title": "Migrate the billing table",
                "updated_at": "2026-11-30T03:10:00+00:00",
                "budget_usd": None,
                "question": "Which database should the migration target: staging or prod?",
                "reason": "needs input: Which database should the migration target?",
                "approval": None,
                "hint": "afk answer 55555555 '...'",
            }
        ],
        costs={"backlog-a": 4.125},
        to_review=[
            {
                "id": "66666666-6666-6666-6666-666666666666",
                "agent_id": "backlog-a",
                "title": "Add the export button",
                "done_at": "2026-11-30T05:10:00+00:00",
                "branch": "afk/66666666-add-the-export-button",
                "cost_usd": 0.42,
                "check": {"status": 0, "tail": "12 passed"},
                "denied_runs": 0,
                "error": None,
                "path": "/srv/afk/worktrees/app-1a2b3c4d/66666666",
                "head_sha": "d00dfeed" * 5,
                "commits": 2,
                "subjects": ["export: the button", "export: tests"],
                "diffstat": {"files": 3, "insertions": 48, "deletions": 5},
                "dirty": False,
                "pr": {
                    "url": "https://github.example/acme/app/pull/42",
                    "number": 42,
                    "state": "OPEN",
                    "isDraft": False,
                },
                "base": "main",
                "behind_by": 3,
                "conflicts": ["app/export.py"],
                "changes": True,
            }
        ],
        retrying=[
            {
                "id": "77777777-7777-7777-7777-777777777777",
                "short_id": "77777777",
                "agent_id": "backlog-a",
                "title": "Speed up the search page",
                "state": "todo",
                "spent": 4,
                "max_attempts": 5,
                "next_at": "2026-11-30T08:30:00+00:00",
                "error": "FAILED tests/test_search.py::test_fast - assert 2.1 < 1.0",
            }
        ],
        retrying_total=1,
        accounts=[
            {
                "account": "max-1",
                "kinds": ["usage_limit"],
                "reason": "You've hit your session limit · resets 3:45am",
                "parked_seconds": 9000.0,
                "needs_person": False,
                "until": "2026-12-01T03:45:00+00:00",
                "tasks_waited": 3,
                "attempts_spent": 0,
            }
        ],
    )


def digest_env(sql: Any, receiver: Any, **extra: str) -> dict[str, str]:
    at = (sql.one("SELECT now()").astimezone(UTC) - timedelta(minutes=1)).strftime("%H:%M")
    return {
        "AFK_DIGEST_WEBHOOK_URL": receiver.url(),
        "AFK_DIGEST_WEBHOOK_SECRET": SECRET,
        "AFK_DIGEST_AT": at,
        "AFK_DIGEST_TZ": "UTC",
        "AFK_DIGEST_CHECK_INTERVAL": "0.3",
        "AFK_DIGEST_RETRY_BASE": "0.2",
        "AFK_DIGEST_RETRY_CAP": "0.5",
        **extra,
    }


#: a Python traceback with its last frame and error to fill in
TRACEBACK = """Traceback (most recent call last):
  File "/w/app.py", line 12, in <module>
    main()
  File "/w/app.py", line 9, in main
    {}
{}"""
