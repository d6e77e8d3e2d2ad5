"""The digest's text, with no database: errors grouped by what failed, the
golden files of each format, and templates overridden or broken."""

from __future__ import annotations

import os

import pytest
from helpers import TESTS
from helpers.digests import TRACEBACK, sample_digest

from watchdog.config import DigestSettings
from watchdog.digest import normalise_error, render

GOLDEN = TESTS / "golden"


def test_normalise_error_masks_ids_and_numbers():
    a = normalise_error(
        "Timeout after 30s talking to 10.0.0.7 (task 3f2b1c4e-1111-2222-3333-444455556666)"
    )
    b = normalise_error(
        "Timeout after 45s talking to 10.0.0.9 (task 9a2b1c4e-1111-2222-3333-444455556666)\nstack"
    )
    assert a == b == "Timeout after <n>s talking to <n>.<n>.<n>.<n> (task <id>)"
    assert normalise_error("commit deadbeefcafe1 not found") == "commit <hex> not found"
    assert normalise_error("") == "(no error text)"


@pytest.mark.parametrize(
    ("fmt", "name"),
    [
        ("slack", "slack.json"),
        ("html", "email.html"),
        ("text", "email.txt"),
        ("webhook", "webhook.json"),
    ],
)
def test_golden_files(fmt, name):
    rendered = render(sample_digest(), fmt, DigestSettings())
    path = GOLDEN / name
    if os.environ.get("AFK_UPDATE_GOLDEN"):
        path.write_text(rendered)
    assert rendered == path.read_text(), f"{name} changed; AFK_UPDATE_GOLDEN=1 rewrites it"


def test_a_templates_dir_overrides_one_template(tmp_path):
    (tmp_path / "email.txt.j2").write_text("custom: {{ d.failed_total }} failed\n")
    settings = DigestSettings(templates_dir=str(tmp_path))
    assert render(sample_digest(), "text", settings) == "custom: 2 failed\n"
    assert render(sample_digest(), "webhook", settings) == render(
        sample_digest(), "webhook", DigestSettings()
    )


def test_a_broken_custom_template_is_a_clear_error(tmp_path):
    from watchdog.digest import RenderError

    (tmp_path / "slack.json.j2").write_text('{"blocks": [ {{ d.nope }} ]}')
    with pytest.raises(RenderError, match=r"slack\.json\.j2"):
        render(sample_digest(), "slack", DigestSettings(templates_dir=str(tmp_path)))
    (tmp_path / "slack.json.j2").write_text('{"blocks": [}')
    with pytest.raises(RenderError, match="valid JSON"):
        render(sample_digest(), "slack", DigestSettings(templates_dir=str(tmp_path)))


@pytest.mark.parametrize(
    ("error", "headline"),
    [
        (TRACEBACK.format("d['k']", "KeyError: 'user_42'"), "KeyError: 'user_<n>'"),
        (
            TRACEBACK.format("open(p, 'w')", "OSError: [Errno 28] No space left on device"),
            "OSError: [Errno <n>] No space left on device",
        ),
        (
            "===== short test summary info =====\nFAILED tests/test_login.py::test_ok - "
            "AssertionError: assert 401 == 200\n===== 1 failed in 0.3s =====",
            "FAILED tests/test_login.py::test_ok - AssertionError: assert <n> == <n>",
        ),
        (
            "npm ERR! code ERESOLVE\nnpm ERR! ERESOLVE unable to resolve dependency tree",
            "npm ERR! code ERESOLVE",
        ),
        (
            "To github.com:acme/web.git\n ! [rejected]        main -> main (fetch first)\n"
            "error: failed to push some refs",
            "! [rejected] main -> main (fetch first)",
        ),
        (
            "HTTP 503 from https://api.example.com/v1/jobs/8f3a9c1e2b",
            "HTTP <n> from https://api.example.com/v<n>/jobs/<hex>",
        ),
    ],
)
def test_errors_are_grouped_by_what_failed(error, headline):
    from watchdog.digest import normalise_error

    assert normalise_error(error) == headline


@pytest.mark.parametrize(
    ("held", "hint"),
    [
        ({"approval": 12, "question": None}, "afk approve 12 (or afk deny 12 --note '...')"),
        ({"approval": None, "question": "the branch changed .claude/settings.json: ... says "
          "`afk trust 0123abcd-0000-0000-0000-000000000000`"}, "afk trust 0123abcd"),
        ({"approval": None, "question": "staging or prod?"}, "afk answer 0123abcd '...'"),
        ({"approval": None, "question": None}, "afk retry 0123abcd --budget-usd N"),
    ],
)  # fmt: skip
def test_each_held_task_is_told_the_command_that_answers_it(held, hint):
    """Issue 50 item 7: a task waiting for an approval was offered
    `afk retry --budget-usd N`."""
    from watchdog.digest import waiting_hint

    assert waiting_hint({"id": "0123abcd-0000-0000-0000-000000000000", **held}) == hint
