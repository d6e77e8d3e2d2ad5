"""The status pages, served by a real `afk watchdog run`, on a database filled
by the real CLI, loaded in headless Chromium. Screenshots are kept in
tests/artefacts/ (AFK_TEST_ARTEFACTS to put them elsewhere)."""

from __future__ import annotations

import html
import json
import os
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from helpers import HELPERS, TESTS, Afk, poll, require_tool
from helpers.browser import Browser
from helpers.service import Service
from psycopg.conninfo import make_conninfo

from watchdog import NewTask

ARTEFACTS = Path(os.environ.get("AFK_TEST_ARTEFACTS") or TESTS / "artefacts")
SCRIPT = "<script>document.title='pwned'</script>"
IMG = "<img src=x onerror=\"document.title='pwned'\">"
RLO = "invoice\u202egnp.exe"
BIG_ERROR = "Traceback (most recent call last):\n" + "  frame\n" * 12_000 + "OSError: disk full"


def fill(afk: Afk, tmp_path: Path, big: int = 100_000) -> dict[str, str]:
    """Running, paused, failed and stuck tasks, hostile titles, and an agent
    with ``big`` tasks (100k), all through the CLI."""
    ids: dict[str, str] = {}
    for title in (SCRIPT, IMG, "@here ping", RLO, "fix the login test"):
        afk.json("enqueue", "--agent", "web", "--title", title)
    run = afk.json("claim", "--agent", "web", "--runner", "laptop-1")  # SCRIPT: running
    ids["running"] = run["id"]
    afk.json(
        "checkpoint",
        run["id"],
        "--token",
        str(run["token"]),
        "--patch",
        json.dumps({"files_touched": ["src/a.py", SCRIPT], "step": IMG}),
    )
    paused = afk.json("claim", "--agent", "web", "--runner", "laptop-2")  # IMG: paused
    afk.json("pause", paused["id"], "--token", str(paused["token"]))
    ids["paused"] = paused["id"]
    afk.json("enqueue", "--agent", "flaky", "--title", "deploy", "--max-attempts", "1")
    failing = afk.json("claim", "--agent", "flaky", "--runner", "ci")
    error = tmp_path / "error.txt"
    error.write_text(BIG_ERROR)
    afk("fail", failing["id"], "--token", str(failing["token"]), "--error", BIG_ERROR[:100_000])
    ids["failed"] = failing["id"]
    afk.json("enqueue", "--agent", "stuck", "--title", "lease runs out")
    stuck = afk.json("claim", "--agent", "stuck", "--runner", "gone", "--lease", "1")
    ids["stuck"] = stuck["id"]
    lines = tmp_path / "big.jsonl"
    lines.write_text("".join(json.dumps({"title": f"item {i}"}) + "\n" for i in range(big)))
    assert afk("enqueue", "--agent", "big", "--file", str(lines)).returncode == 0
    return ids


@pytest.fixture
def browser(tmp_path):
    ARTEFACTS.mkdir(parents=True, exist_ok=True)
    with Browser(require_tool("chromium"), tmp_path / "chromium-profile") as b:
        yield b


def load(browser: Browser, url: str, shot: str) -> tuple[str, list[str]]:
    """The DOM after load, and what the page said (console, exceptions, CSP)."""
    page = browser.load(url, ARTEFACTS / shot)
    assert (ARTEFACTS / shot).stat().st_size > 5000, "no screenshot"
    return page.dom, page.said


def test_the_browser_hears_what_a_page_says(browser):
    """What the pages below are checked with can fail: a console call, an
    uncaught exception and a script the page's CSP refuses are all heard."""
    page = "<title>t</title><script>console.error('boom'); throw new Error('bad')</script>"
    _, said = load(browser, "data:text/html," + page, "self-check.png")
    assert any("boom" in line for line in said) and any("bad" in line for line in said), said
    csp = "<meta http-equiv=Content-Security-Policy content=\"default-src 'none'\">"
    _, said = load(browser, "data:text/html," + csp + "<script>1</script>", "self-check.png")
    assert any("Content Security Policy" in line for line in said), said


@pytest.fixture
def service(dsn):
    # (no reclaim during the test: the page must show the expired lease)
    s = Service(
        dsn,
        AFK_DIGEST_PAUSED_AFTER="1s",
        AFK_DIGEST_TODO_LATE_AFTER="1s",
        AFK_RECLAIM_INTERVAL="100",
    )
    assert poll(lambda: s.health() == 200)
    yield s
    s.cleanup()


def test_every_page_loads_in_chromium_escaped_with_no_script_and_no_console_error(
    afk, service, tmp_path, sql, browser
):
    ids = fill(afk, tmp_path)
    sql.expire(ids["stuck"])

    dom, log = load(browser, service.url + "/", "overview.png")
    assert not log, log
    assert "<title>afk-watchdog</title>" in dom  # a script would have renamed it
    assert "pwned" not in dom.split("</title>")[0]
    assert not re.search(r"<script|<img", dom, re.I), "markup from the data became markup"
    text = html.unescape(re.sub(r"<[^>]+>", " ", dom))
    for expected in (
        "web",
        "flaky",
        "stuck",
        "big",
        SCRIPT[:30],
        "laptop-1",
        "lease expired",
        "OSError: disk full",
        "100000 todo",
    ):
        assert expected in text, expected

    dom, log = load(browser, service.url + "/agents/web", "agent-hostile.png")
    assert not log, log
    assert not re.search(r"<script|<img", dom, re.I)
    assert "\u202e" not in dom and "invoicegnp.exe" in dom  # the override is removed
    assert "@here ping" in dom

    dom, log = load(browser, service.url + "/agents/big", "agent.png")
    assert not log, log
    assert "item 0" in dom and "item 49" in dom and "item 50" not in dom
    nxt = re.search(r'href="(/agents/big\?after=(\d+))"', dom)
    assert nxt and nxt.group(2) == "50"
    dom, _ = load(browser, service.url + html.unescape(nxt.group(1)), "agent-page-2.png")
    assert "item 50" in dom and "item 99" in dom and "item 49<" not in dom

    dom, log = load(browser, service.url + f"/tasks/{ids['running']}", "task.png")
    assert not log, log
    assert not re.search(r"<script|<img", dom, re.I)
    text = html.unescape(re.sub(r"<[^>]+>", " ", dom))
    for expected in ("src/a.py", "claimed", "laptop-1", "Resume:", "Spec", "History"):
        assert expected in text, expected
    dom, log = load(browser, service.url + f"/tasks/{ids['failed']}", "task-failed.png")
    assert not log, log
    assert f"afk retry {ids['failed']}" in dom and "OSError: disk full" in dom


def test_pages_are_read_only_and_bad_paths_are_one_line_errors(afk, service, tmp_path):
    afk.json("enqueue", "--agent", "a", "--title", "t")
    for path, status in [
        ("/tasks/not-a-uuid", 404),
        ("/tasks/" + "0" * 8 + "-0000-0000-0000-" + "0" * 12, 404),
        ("/agents/a?state=bogus", 400),
        ("/agents/a?after=x", 400),
        ("/nowhere", 404),
    ]:
        r = httpx.get(service.url + path)
        assert r.status_code == status, path
        assert "Traceback" not in r.text
    assert httpx.post(service.url + "/", content=b"x").status_code == 405
    r = httpx.get(service.url + "/")
    csp = r.headers["content-security-policy"]
    assert "default-src 'none'" in csp and "script-src" not in csp  # so: no script at all
    assert httpx.get(service.url + "/metrics").status_code == 200
    assert httpx.get(service.url + "/healthz").text == "ok\n"


def test_a_non_loopback_address_needs_the_token(dsn, afk):
    afk.json("enqueue", "--agent", "a", "--title", "t")
    from helpers.service import free_port

    port = free_port()
    bare = Service(dsn, AFK_METRICS_ADDR=f"0.0.0.0:{port}")
    try:
        url = f"http://127.0.0.1:{port}"
        assert poll(lambda: _get(url + "/healthz") == 200)
        assert _get(url + "/") == 403
        assert _get(url + "/metrics") == 200  # Prometheus keeps scraping
        assert "set AFK_WEB_TOKEN" in bare.log()
    finally:
        bare.cleanup()

    port = free_port()
    guarded = Service(dsn, AFK_METRICS_ADDR=f"0.0.0.0:{port}", AFK_WEB_TOKEN="t0ken-xyz")
    try:
        url = f"http://127.0.0.1:{port}"
        assert poll(lambda: _get(url + "/healthz") == 200)
        assert _get(url + "/") == 403
        assert httpx.get(url + "/", headers={"Authorization": "Bearer wrong"}).status_code == 403
        assert (
            httpx.get(url + "/", headers={"Authorization": "Bearer t0ken-xyz"}).status_code == 200
        )
        link = httpx.get(url + "/agents/a?token=t0ken-xyz&state=todo")
        assert link.status_code == 303 and link.headers["location"] == "/agents/a?state=todo"
        cookie = link.headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
        # issue 50 item 6: the cookie is a session of its own, never the token
        assert "t0ken-xyz" not in cookie and "Max-Age=" in cookie
        session = cookie.split(";", 1)[0].split("=", 1)[1]
        with httpx.Client(cookies={"afk_web_token": session}) as client:
            page = client.get(url + "/agents/a?state=todo")
            assert page.status_code == 200 and "t0ken-xyz" not in page.text
        for forged in ("t0ken-xyz", session[:-2] + ("AA" if session[-2:] != "AA" else "BB"),
                       "1." + session.split(".", 1)[1]):  # fmt: skip
            with httpx.Client(cookies={"afk_web_token": forged}) as client:
                assert client.get(url + "/agents/a").status_code == 403, forged
        assert "t0ken-xyz" not in guarded.log()
        assert "AFK_WEB_TOKEN is 9 characters" in guarded.log()  # short: warned
    finally:
        guarded.cleanup()


def _get(url: str) -> int | None:
    try:
        return httpx.get(url, timeout=2).status_code
    except httpx.TransportError:
        return None


def test_no_secret_appears_on_any_page(dsn, afk, tmp_path):
    ids = fill(afk, tmp_path, big=120)  # pages of every kind; their size is another test's
    secrets = {
        "AFK_DIGEST_WEBHOOK_URL": "http://127.0.0.1:9/hook/sup3r-secret-path",
        "AFK_DIGEST_WEBHOOK_SECRET": "whs3cret-value",
        "AFK_DIGEST_SMTP_URL": "smtp://ops:smtp-passw0rd@127.0.0.1:9",
        "AFK_DIGEST_EMAIL_TO": "ops@example.com",
        "AFK_DIGEST_EMAIL_FROM": "afk@example.com",
        "AFK_DIGEST_CRON": "0 0 1 1 *",
    }
    s = Service(make_conninfo(dsn, password="db-passw0rd"), **secrets)
    try:
        assert poll(lambda: s.health() == 200 or s.proc.poll() is not None)
        assert s.health() == 200, s.log()
        pages = ["/", "/agents/web", "/agents/big", *(f"/tasks/{i}" for i in ids.values())]
        for path in pages:
            r = httpx.get(s.url + path)
            assert r.status_code == 200, path
            for value in ("sup3r-secret-path", "whs3cret-value", "smtp-passw0rd", "db-passw0rd"):
                assert value not in r.text, (path, value)
    finally:
        s.cleanup()


def test_the_digest_links_to_the_task_page_when_a_public_url_is_set(afk, tmp_path):
    afk.json("enqueue", "--agent", "f", "--title", "t", "--max-attempts", "1")
    task = afk.json("claim", "--agent", "f")
    afk("fail", task["id"], "--token", str(task["token"]), "--error", "boom")
    env = {"AFK_PUBLIC_URL": "https://afk.example.com/"}
    out = afk("digest", "--dry-run", "--format", "html", env=env)
    assert out.returncode == 0, out.stderr
    assert f"https://afk.example.com/tasks/{task['id']}" in out.stdout
    bad = afk("status", env={"AFK_PUBLIC_URL": "afk.example.com"})
    assert bad.returncode == 2 and "public_url" in bad.stderr


def test_parked_accounts_and_a_tasks_runs_are_shown(afk, service, tmp_path, browser):
    """A real `afk loop` night: a usage limit, then a run that succeeds."""
    import subprocess
    import sys

    (task_id,) = afk.json("enqueue", "--agent", "night", "--title", "fix it")["enqueued"]
    script = tmp_path / "script.jsonl"
    script.write_text(
        json.dumps({"stdout": ["Not logged in · Please run /login"], "exit": 1}) + "\n"
    )
    standin = [sys.executable, str(HELPERS / "standin_agent.py")]
    env = {**afk.env, "STANDIN_SCRIPT": str(script), "STANDIN_LOG": str(tmp_path / "log")}
    loop = [*Afk.command("loop", "--agent", "night", "--account", "laptop", "--"), *standin]
    assert subprocess.run(loop, env=env, capture_output=True, timeout=60).returncode == 5
    until = (datetime.now(UTC) + timedelta(days=3)).isoformat()
    afk.json("limit", "--account", "max-1", "--until", until, "--reason", SCRIPT)
    dom, log = load(browser, service.url + "/", "overview-parked.png")
    assert not log, log
    assert not re.search(r"<script|<img", dom, re.I)
    text = html.unescape(re.sub(r"<[^>]+>", " ", dom))
    for expected in ("Accounts parked", "laptop", "needs human", "Not logged in", "max-1"):
        assert expected in text, expected
    assert "afk limit --account laptop --clear" in text
    dom, log = load(browser, service.url + f"/tasks/{task_id}", "task-runs.png")
    assert not log, log
    text = html.unescape(re.sub(r"<[^>]+>", " ", dom))
    for expected in ("Runs", "needs human", "no attempt spent", "laptop", "Not logged in"):
        assert expected in text, expected


def test_questions_and_the_last_day_are_on_the_pages(afk, service, tmp_path, browser):
    (task_id,) = afk.json("enqueue", "--agent", "night", "--title", "migrate")["enqueued"]
    task = afk.json("claim", "--agent", "night")
    env = {"AFK_TASK_ID": task_id, "AFK_TASK_TOKEN": str(task["token"])}
    assert afk("ask", "Staging or prod? " + SCRIPT, env=env).returncode == 0
    dom, log = load(browser, service.url + "/", "overview-questions.png")
    assert not log, log
    assert not re.search(r"<script|<img", dom, re.I)
    text = " ".join(html.unescape(re.sub(r"<[^>]+>", " ", dom)).split())
    for expected in (
        "Waiting for you: 1",
        "asks: Staging or prod?",
        f"afk answer {task_id[:8]}",
        "The last 24 h",
    ):
        assert expected in text, expected
    dom, log = load(browser, service.url + f"/tasks/{task_id}", "task-question.png")
    assert not log, log
    assert "Staging or prod?" in html.unescape(dom) and "not answered" in dom


def test_the_nights_tables_read_at_a_desk_and_on_a_phone(afk, queue, service, browser, tmp_path):
    """M18: with ordinary agent names, the status page's "The last 24 h" and
    the HTML digest's "The night" broke their headers one letter a line
    ("d o n e") and costs mid-number; at 1280 and 390 px no header or number
    breaks, and the page does not scroll sideways."""
    names = ["api-migrations-2026", "backlog-frontend-refactor", "docs", "nightly-dependency-bumps"]
    for n, agent in enumerate(names):
        queue.enqueue(agent, [NewTask("t")])
        task = queue.claim(agent, runner="r", account="max-1")
        queue.done(task, run={"outcome": "done", "exit_status": 0, "cost_usd": 1.25 + n})
    digest = tmp_path / "digest.html"
    digest.write_text(afk("digest", "--dry-run", "--format", "html").stdout)
    pages = {
        "overview": (service.url + "/", "table.night th, table.night td.num"),
        "digest": (
            digest.as_uri(),
            "table.night tr:first-child td, table.night td:not(:first-child)",
        ),
    }
    for width in (1280, 390):
        browser.resize(width)
        for name, (url, cells) in pages.items():
            page = browser.load(url, ARTEFACTS / f"night-{name}-{width}.png")
            assert not page.said, page.said
            assert "$4.25" in page.dom  # the table is there, with its numbers
            assert browser.wrapped(cells) == [], (name, width)
            assert not browser.overflows(), (name, width)


def test_a_blocked_task_shows_what_it_waits_for(afk, service, browser):
    (root,) = afk.json("enqueue", "--agent", "night", "--title", "migrate", "--key", "m")[
        "enqueued"
    ]
    (dependent,) = afk.json(
        "enqueue", "--agent", "night", "--title", "api", "--after", "m", "--after", "later-key"
    )["enqueued"]
    dom, log = load(browser, service.url + f"/tasks/{dependent}", "task-blocked.png")
    assert not log, log
    text = " ".join(html.unescape(re.sub(r"<[^>]+>", " ", dom)).split())
    for expected in ("blocked", "Waits for", "migrate todo", "later-key : no task has this key"):
        assert expected in text, (expected, text)
    assert f'href="/tasks/{root}"' in dom
    dom, _ = load(browser, service.url + "/", "overview-blocked.png")
    assert "blocked 1" in " ".join(html.unescape(re.sub(r"<[^>]+>", " ", dom)).split())


def test_a_task_failing_again_and_again_is_on_the_overview(afk, queue, service, browser):
    """Issue 53 item 1: the status page says what the digest says."""
    queue.enqueue("night", [NewTask("flaky check", max_attempts=4)])
    queue.fail(queue.claim("night", runner="r"), "FAILED tests/test_a.py::test_b - assert 0")
    dom, log = load(browser, service.url + "/", "overview-retrying.png")
    assert not log, log
    text = " ".join(html.unescape(re.sub(r"<[^>]+>", " ", dom)).split())
    assert "Failing, retrying: 1" in text
    assert "flaky check ( night ) 1 of 4 attempts spent, next try" in text
    assert "FAILED tests/test_a.py::test_b - assert 0" in text


def test_a_tasks_page_with_its_runs_fits_a_phone(queue, sql, service, browser):
    """Issue 50 item 7: the runs table of a task's page scrolled sideways at
    390 px. At a phone's width nothing on the page does."""
    queue.enqueue("nightly-dependency-bumps", [NewTask("bump the HTTP client to 0.28")])
    for n in range(3):
        sql("UPDATE afk_task SET run_after = NULL")
        task = queue.claim("nightly-dependency-bumps", runner="laptop-runner-7", account="max-1")
        assert task is not None
        queue.fail(
            task,
            "FAILED tests/test_client.py::test_timeout_is_honoured_for_every_request_kind - "
            "AssertionError",
            run={"outcome": "task_failure", "exit_status": 1, "cost_usd": 0.25 + n,
                 "session_id": "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"},
        )  # fmt: skip
    browser.resize(390)
    page = browser.load(service.url + f"/tasks/{task.id}", ARTEFACTS / "task-runs-390.png")
    assert not page.said, page.said
    assert "laptop-runner-7" in page.dom and "task_failure" in page.dom
    assert not browser.overflows()
