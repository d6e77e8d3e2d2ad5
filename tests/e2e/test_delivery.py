"""Delivering the digest to real servers: an HTTP server on 127.0.0.1 for Slack
and the signed webhook, aiosmtpd for email; the ledger's once-per-period
promise, retries, catch-up, and secrets kept out of every output."""

from __future__ import annotations

import email
import email.policy
import hashlib
import hmac
import json
import subprocess
import time
from datetime import UTC, datetime, timedelta

import pytest
from helpers import poll, require_tool
from helpers.browser import Browser
from helpers.service import free_port

from watchdog import NewTask
from watchdog.config import DigestSettings
from watchdog.delivery import latest_period, send_due

SECRET = "s3cret-signing-key"


def due_now(sql, **kw) -> DigestSettings:
    """Settings whose daily digest time passed two minutes ago (UTC)."""
    now = sql.one("SELECT now()").astimezone(UTC) - timedelta(minutes=2)
    base = {"at": now.strftime("%H:%M"), "tz": "UTC", "retry_base": 0.05, "retry_cap": 0.2}
    return DigestSettings(**{**base, **kw})


def verify(received, secret=SECRET, tolerance=300) -> dict:
    """What a receiver does (the README shows the same): check the signature."""
    fields = dict(part.split("=", 1) for part in received.headers["X-Afk-Signature"].split(","))
    assert abs(time.time() - int(fields["t"])) < tolerance, "replayed or stale"
    expected = hmac.new(
        secret.encode(), fields["t"].encode() + b"." + received.body, hashlib.sha256
    ).hexdigest()
    assert hmac.compare_digest(expected, fields["v1"]), "bad signature"
    return json.loads(received.body)


def failing_task(queue, title="Fix the login"):
    queue.enqueue("a", [NewTask(title, max_attempts=1)])
    return queue.fail(queue.claim("a", runner="r"), "AssertionError: boom")


def test_signed_webhook_once_per_period(queue, sql, receiver):
    failing_task(queue)
    settings = due_now(sql, webhook_url=receiver.url(), webhook_secret=SECRET)
    (outcome,) = send_due(queue.db, settings)
    assert outcome.state == "delivered" and outcome.status == 200
    assert send_due(queue.db, settings) == []  # the ledger: this period is done
    (got,) = receiver.received
    document = verify(got)
    assert document["failed_total"] == 1 and document["groups"][0]["tasks"][0]["title"] == (
        "Fix the login"
    )
    assert got.headers["X-Afk-Delivery"].startswith("webhook:digest:")
    tampered = type(got)(got.path, got.headers, got.body.replace(b"boom", b"fine"))
    with pytest.raises(AssertionError, match="bad signature"):
        verify(tampered)


def test_slack_503_several_times_then_200_delivers_one_message(queue, sql, receiver):
    failing_task(queue)
    receiver.script = [(503, {}), (503, {}), (502, {}), (200, {})]
    settings = due_now(sql, slack_url=receiver.url("/services/T000/B000/XXXX"))
    states = []

    def attempt() -> bool:
        states.extend(o.state for o in send_due(queue.db, settings))
        return bool(receiver.received)

    poll(attempt, timeout=30)
    time.sleep(0.3)
    states += [o.state for o in send_due(queue.db, settings)]
    assert states == ["pending", "pending", "pending", "delivered"]
    assert len(receiver.received) == 1 and receiver.attempts == 4
    blocks = json.loads(receiver.received[0].body)["blocks"]
    assert blocks[0]["type"] == "header"


def test_retry_after_is_honoured(queue, sql, receiver):
    receiver.script = [(429, {"Retry-After": "30"})]
    settings = due_now(sql, slack_url=receiver.url(), retry_cap=60)
    (outcome,) = send_due(queue.db, settings)
    assert outcome.state == "pending" and outcome.status == 429
    wait = sql.one("SELECT extract(epoch FROM next_attempt_at - now()) FROM afk_digest_delivery")
    assert 28 <= wait <= 61
    assert send_due(queue.db, settings) == []  # not before its time
    assert receiver.attempts == 1


def test_a_4xx_is_not_retried_and_shows_in_status(queue, sql, receiver, afk):
    receiver.script = [(404, {})]
    settings = due_now(sql, slack_url=receiver.url("/services/T0/B0/tok3n-in-url"))
    (outcome,) = send_due(queue.db, settings)
    assert outcome.state == "failed" and outcome.status == 404
    assert send_due(queue.db, settings) == []
    assert receiver.attempts == 1
    (row, *_) = afk.json("digest", "status")
    assert row["state"] == "failed" and row["last_status"] == 404
    assert "tok3n" not in json.dumps(row)


def test_an_unreachable_destination_is_retried(queue, sql):
    settings = due_now(sql, webhook_url="http://127.0.0.1:1/hook", webhook_secret=SECRET, timeout=2)
    (outcome,) = send_due(queue.db, settings)
    assert outcome.state == "pending" and "cannot connect" in outcome.error


def test_a_crashed_senders_claim_expires_and_is_retried(queue, sql, receiver):
    settings = due_now(sql, webhook_url=receiver.url(), webhook_secret=SECRET)
    period = latest_period(settings, sql.one("SELECT now()"))
    sql(
        """INSERT INTO afk_digest_delivery (destination, kind, period, state, attempts,
                                            lease_token, lease_until, window_start, window_end)
           VALUES ('webhook', 'digest', %s, 'sending', 1, 1, now() + interval '1 hour',
                   now() - interval '1 day', now())""",
        period,
    )
    assert send_due(queue.db, settings) == []  # a live sender holds it
    sql("UPDATE afk_digest_delivery SET lease_until = now() - interval '1 second'")
    (outcome,) = send_due(queue.db, settings)
    assert outcome.state == "delivered" and outcome.attempts == 2
    assert len(receiver.received) == 1


def test_catch_up_sends_one_digest_covering_the_whole_gap(queue, sql, receiver):
    settings = due_now(sql, webhook_url=receiver.url(), webhook_secret=SECRET)
    # the last delivered digest was three days ago; one period since is still pending
    sql("""INSERT INTO afk_digest_delivery (destination, kind, period, state, window_start,
                                            window_end, delivered_at)
           VALUES ('webhook', 'digest', now() - interval '3 days', 'delivered',
                   now() - interval '4 days', now() - interval '3 days', now() - interval '3 days'),
                  ('webhook', 'digest', now() - interval '2 days', 'pending',
                   now() - interval '3 days', now() - interval '2 days', NULL)""")
    sql(
        "UPDATE afk_digest_delivery SET next_attempt_at = now() + interval '1 hour' "
        "WHERE state = 'pending'"
    )
    old = failing_task(queue, "failed two days ago")
    sql("UPDATE afk_task SET updated_at = now() - interval '50 hours' WHERE id = %s", old.id)
    failing_task(queue, "failed today")
    (outcome,) = send_due(queue.db, settings)
    assert outcome.state == "delivered"
    (got,) = receiver.received
    document = verify(got)
    titles = {t["title"] for g in document["groups"] for t in g["tasks"]}
    assert titles == {"failed two days ago", "failed today"}
    start = datetime.fromisoformat(document["window"]["start"])
    assert start < datetime.now(UTC) - timedelta(days=2, hours=23)
    assert sql("SELECT state FROM afk_digest_delivery ORDER BY period") == [
        {"state": "delivered"},
        {"state": "superseded"},
        {"state": "delivered"},
    ]


def test_all_clear_can_be_turned_off(queue, sql, receiver):
    on = due_now(sql, webhook_url=receiver.url(), webhook_secret=SECRET)
    (outcome,) = send_due(queue.db, on)
    assert verify(receiver.received[0])["all_clear"] is True
    sql("DELETE FROM afk_digest_delivery")
    off = due_now(sql, webhook_url=receiver.url(), webhook_secret=SECRET, all_clear=False)
    (outcome,) = send_due(queue.db, off)
    assert outcome.state == "delivered" and "nothing to report" in outcome.error
    assert len(receiver.received) == 1


@pytest.fixture
def smtp_server():
    from aiosmtpd.controller import Controller
    from aiosmtpd.handlers import Message
    from aiosmtpd.smtp import AuthResult

    class Inbox(Message):
        def __init__(self):
            super().__init__(email.message.EmailMessage)
            self.messages = []

        def handle_message(self, message):
            self.messages.append(message)

    inbox = Inbox()

    def authenticator(server, session, envelope, mechanism, auth_data):
        ok = auth_data.login == b"afk" and auth_data.password == b"p@ss word"
        return AuthResult(success=ok)

    controller = Controller(
        inbox,
        hostname="127.0.0.1",
        port=free_port(),
        authenticator=authenticator,
        auth_require_tls=False,
    )
    controller.start()
    yield controller, inbox
    controller.stop()


def test_email_is_multipart_text_and_html(queue, sql, smtp_server):
    controller, inbox = smtp_server
    failing_task(queue, "<b>Fix</b> the login")
    port = controller.port
    settings = due_now(
        sql,
        smtp_url=f"smtp://afk:p%40ss%20word@127.0.0.1:{port}?starttls=no",
        email_to="me@example.org, you@example.org",
        email_from="afk@example.org",
    )
    (outcome,) = send_due(queue.db, settings)
    assert outcome.state == "delivered", outcome.error
    (message,) = inbox.messages
    parsed = email.message_from_bytes(message.as_bytes(), policy=email.policy.default)
    assert parsed["Subject"] == "afk digest: 1 failed"
    assert parsed["To"] == "me@example.org, you@example.org"
    text = parsed.get_body(("plain",)).get_content()
    html_part = parsed.get_body(("html",)).get_content()
    assert "<b>Fix</b> the login" in text
    assert "&lt;b&gt;Fix&lt;/b&gt; the login" in html_part


def test_email_refused_recipients_are_not_retried(queue, sql):
    from aiosmtpd.controller import Controller
    from aiosmtpd.handlers import Sink

    class Refusing(Sink):
        async def handle_RCPT(self, server, session, envelope, address, rcpt_options):
            return "550 5.1.1 no such user"

    controller = Controller(Refusing(), hostname="127.0.0.1", port=free_port())
    controller.start()
    try:
        settings = due_now(
            sql,
            smtp_url=f"smtp://127.0.0.1:{controller.port}?starttls=no",
            email_to="nobody@example.org",
            email_from="afk@example.org",
        )
        (outcome,) = send_due(queue.db, settings)
        assert outcome.state == "failed" and "refused" in outcome.error
        assert send_due(queue.db, settings) == []
    finally:
        controller.stop()


def test_email_refuses_a_password_in_clear(queue, sql, smtp_server):
    controller, _inbox = smtp_server
    port = controller.port
    settings = due_now(
        sql,
        smtp_url=f"smtp://afk:pw@127.0.0.1:{port}",
        email_to="me@example.org",
        email_from="afk@example.org",
    )
    (outcome,) = send_due(queue.db, settings)
    assert outcome.state == "failed" and "STARTTLS" in outcome.error


def test_email_over_implicit_tls(queue, sql, tmp_path):
    import ssl

    from aiosmtpd.controller import Controller
    from aiosmtpd.handlers import Sink

    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    made = subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        capture_output=True,
    )
    assert made.returncode == 0, made.stderr
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    got = []

    class Handler(Sink):
        async def handle_DATA(self, server, session, envelope):
            got.append(envelope.content)
            return "250 OK"

    controller = Controller(Handler(), hostname="127.0.0.1", port=free_port(), ssl_context=context)
    controller.start()
    try:
        port = controller.port
        settings = due_now(
            sql,
            smtp_url=f"smtps://127.0.0.1:{port}",
            smtp_cafile=str(cert),
            email_to="me@example.org",
            email_from="afk@example.org",
        )
        (outcome,) = send_due(queue.db, settings)
        assert outcome.state == "delivered", outcome.error
        assert len(got) == 1
        # without trusting the certificate, nothing is sent
        sql("DELETE FROM afk_digest_delivery")
        untrusted = due_now(
            sql,
            smtp_url=f"smtps://127.0.0.1:{port}",
            email_to="me@example.org",
            email_from="afk@example.org",
        )
        (outcome,) = send_due(queue.db, untrusted)
        assert outcome.state != "delivered" and len(got) == 1
    finally:
        controller.stop()


def test_cli_send_status_dry_run_and_no_secrets(afk, queue, sql, receiver):
    failing_task(queue)
    url = receiver.url("/hooks/T0/B0/sup3r-secret-path")
    at = (sql.one("SELECT now()").astimezone(UTC) - timedelta(minutes=2)).strftime("%H:%M")
    env = {
        "AFK_DIGEST_WEBHOOK_URL": url,
        "AFK_DIGEST_WEBHOOK_SECRET": SECRET,
        "AFK_DIGEST_AT": at,
        "AFK_DIGEST_TZ": "UTC",
    }
    slack = afk("digest", "--dry-run", "--format", "slack", env=env)
    assert slack.returncode == 0 and json.loads(slack.stdout)["blocks"]
    sent = afk("digest", "send", env=env)
    assert sent.returncode == 0, sent.stderr
    assert json.loads(sent.stdout)["deliveries"][0]["state"] == "delivered"
    again = afk("digest", "send", env=env)
    assert json.loads(again.stdout) == {"deliveries": []} and "--force" in again.stderr
    forced = afk("digest", "send", "--force", env=env)
    assert json.loads(forced.stdout)["deliveries"][0]["state"] == "delivered"
    assert len(receiver.received) == 2
    receiver.script = [(403, {})]
    refused = afk("digest", "send", "--force", env=env)
    assert refused.returncode == 1
    status = afk("digest", "status", env=env)
    helptext = afk("watchdog", "settings", env=env)
    for out in (slack, sent, again, forced, refused, status, helptext):
        assert "sup3r-secret-path" not in out.stdout + out.stderr
        assert SECRET not in out.stdout + out.stderr
    assert "(secret)" in helptext.stdout
    bad = afk("digest", "send", env={**env, "AFK_DIGEST_WEBHOOK_SECRET": ""})
    assert bad.returncode == 2 and "webhook_secret" in bad.stderr


def test_html_digest_renders_in_chromium(tmp_path):
    chromium = require_tool("chromium")
    from helpers.digests import sample_digest

    from watchdog.digest import render

    page = tmp_path / "digest.html"
    page.write_text(render(sample_digest(), "html", DigestSettings()))
    shot = tmp_path / "digest.png"
    with Browser(chromium, tmp_path / "profile", width=800, height=1000) as browser:
        said = browser.load(page.as_uri(), shot).said
    assert not said, said  # the mail's HTML runs nothing and loads nothing
    assert shot.exists()
    from PIL import Image

    image = Image.open(shot).convert("L")
    colours = image.getcolors(maxcolors=1_000_000) or []
    assert len(colours) > 20, "the rendered digest is blank"
    dark = sum(n for n, value in colours if value < 100)
    assert dark > 500, "no text was drawn"


def test_a_forced_digest_that_hit_a_5xx_is_retried_by_the_job(queue, sql, receiver):
    failing_task(queue)
    receiver.script[:] = [(503, {})]
    settings = due_now(sql, webhook_url=receiver.url(), webhook_secret=SECRET)
    (forced,) = send_due(queue.db, settings, force=True)
    assert forced.state == "pending"
    sql(
        "UPDATE afk_digest_delivery SET next_attempt_at = now() - interval '1 second' "
        "WHERE kind = 'forced'"
    )
    outcomes = send_due(queue.db, settings)  # the service's job, not forced
    assert {(o.state, o.period) for o in outcomes} >= {("delivered", forced.period)}
    assert sql.one("SELECT count(*) FROM afk_digest_delivery WHERE state = 'pending'") == 0
    assert any(r.headers["X-Afk-Delivery"].startswith("webhook:forced:") for r in receiver.received)


def test_a_failing_night_is_told_in_every_format(queue, sql, receiver, smtp_server):
    """Issue 53 item 1: a task failing its check attempt after attempt (not
    failed for good) is named by every destination: Slack, the signed webhook,
    email (subject and both parts) and the ntfy push, sent to real servers."""
    controller, inbox = smtp_server
    queue.enqueue("a", [NewTask("ships fine"), NewTask("flaky check", max_attempts=5)])
    queue.done(queue.claim("a", runner="r"))
    for _ in range(2):
        sql("UPDATE afk_task SET run_after = NULL WHERE title = 'flaky check'")
        queue.fail(queue.claim("a", runner="r"), "error: the check failed\nmore")
    settings = due_now(
        sql,
        slack_url=receiver.url("/slack"),
        webhook_url=receiver.url("/hook"),
        webhook_secret=SECRET,
        ntfy_url=receiver.url("/ntfy/afk-night"),
        smtp_url=f"smtp://127.0.0.1:{controller.port}?starttls=no",
        email_to="me@example.org",
        email_from="afk@example.org",
    )
    outcomes = send_due(queue.db, settings)
    assert sorted(o.destination for o in outcomes if o.state == "delivered") == [
        "email",
        "ntfy",
        "slack",
        "webhook",
    ]
    by_path = {r.path: r.body for r in receiver.received}
    headline = "afk digest: 0 failed, 1 retrying"
    slack = json.loads(by_path["/slack"])
    assert slack["text"] == headline and "2 of 5 attempts spent" in by_path["/slack"].decode()
    hook = verify(next(r for r in receiver.received if r.path == "/hook"))
    assert hook["all_clear"] is False and hook["retrying_total"] == 1
    assert hook["retrying"][0]["error"] == "error: the check failed"
    push = json.loads(by_path["/ntfy/"])
    assert push["title"] == headline and "Failing, retrying (1):" in push["message"]
    (message,) = inbox.messages
    parsed = email.message_from_bytes(message.as_bytes(), policy=email.policy.default)
    assert parsed["Subject"] == headline
    assert "2 of 5 attempts spent" in parsed.get_body(("plain",)).get_content()
    assert "2 of 5 attempts spent" in parsed.get_body(("html",)).get_content()


def test_a_dry_run_after_a_digest_says_when_it_went_out_and_takes_since(afk, queue, sql, receiver):
    """P37: right after a digest, the dry run's window is empty; it says why
    (when the last one went out) and --since shows a longer window."""
    failing_task(queue, "the failure of the night")
    env = {
        "AFK_DIGEST_WEBHOOK_URL": receiver.url(),
        "AFK_DIGEST_WEBHOOK_SECRET": SECRET,
        "AFK_DIGEST_TZ": "UTC",
    }
    first = afk("digest", "--dry-run", env=env)
    assert first.returncode == 0 and "the failure of the night" in first.stdout
    assert "no digest went out yet: the window is the last 24 h" in first.stderr
    assert afk("digest", "send", env=env).returncode == 0 and len(receiver.received) == 1
    after = afk("digest", "--dry-run", env=env)
    assert after.returncode == 0 and "the failure of the night" not in after.stdout
    went = sql.one("SELECT max(delivered_at) FROM afk_digest_delivery").astimezone(UTC)
    assert f"it went out {went:%Y-%m-%d %H:%M} UTC; --since 24h shows a longer one" in after.stderr
    longer = afk("digest", "--dry-run", "--since", "24h", env=env)
    assert longer.returncode == 0 and "the failure of the night" in longer.stdout
    assert "the window is the last 24.0 h, as --since asked" in longer.stderr
    for bad in (["--since", "-1h"], ["--since", "soon"], ["send", "--since", "1h"]):
        out = afk("digest", *bad)
        assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1, (bad, out)
