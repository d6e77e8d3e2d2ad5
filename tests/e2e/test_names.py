"""Issue 53 item 4 (P24): profile and account names took anything ('bad
name/../x', 5,000 characters, an emoji) while labels were checked. Every name
a person types — a profile, an account (its flag and AFK_ACCOUNT), a web
login, a task's --profiles — is read by the one rule labels follow: one
line, exit 2, and nothing changed."""

from __future__ import annotations

import pytest

BAD = ["bad name/../x", "x" * 5000, "max-\U0001f600", "_x", "a\tb", ".hidden", "a\u202eb"]

DOORS = {
    "profile add NAME": lambda n: (["profile", "add", n, "--", "claude", "-p"], {}),
    "profile add --account": lambda n: (
        ["profile", "add", "ok", "--account", n, "--", "claude", "-p"], {}),
    "loop --account": lambda n: (["loop", "--agent", "a", "--account", n, "--", "true"], {}),
    "limit --account": lambda n: (
        ["limit", "--account", n, "--until", "2099-01-01T05:00Z"], {}),
    "AFK_ACCOUNT": lambda n: (["loop", "--agent", "a", "--", "true"], {"AFK_ACCOUNT": n}),
    "web token --name": lambda n: (["web", "token", "--name", n], {}),
    "enqueue --profiles": lambda n: (
        ["enqueue", "--agent", "a", "--title", "t", "--profiles", n], {}),
}  # fmt: skip


@pytest.mark.parametrize("door", DOORS)
@pytest.mark.parametrize("name", BAD, ids=lambda n: repr(n[:12]))
def test_a_name_that_is_not_a_word_is_refused_at_every_door(afk, sql, door, name):
    argv, env = DOORS[door](name)
    before = sql.fingerprint(), sql("SELECT count(*) AS n FROM afk_profile")
    done = afk(*argv, env=env)
    assert done.returncode == 2, (door, done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "letters, digits and _.:-" in lines[0], (door, done.stderr)
    assert len(lines[0]) < 400 and "Traceback" not in done.stderr
    assert (sql.fingerprint(), sql("SELECT count(*) AS n FROM afk_profile")) == before


@pytest.mark.parametrize("door", ["profile add NAME", "limit --account", "web token --name"])
def test_a_name_that_is_a_word_is_taken(afk, door):
    from datetime import UTC, datetime, timedelta

    argv, env = DOORS[door]("max-2.a_b:c")
    soon = (datetime.now(UTC) + timedelta(days=1)).isoformat(timespec="seconds")
    argv = [soon if a.startswith("2099") else a for a in argv]
    done = afk(*argv, env=env)
    assert done.returncode == 0, (door, done.stderr)
