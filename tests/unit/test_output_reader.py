"""The loop's reader of an agent's output: whatever a line holds, it is read
as JSON or as text, never an exception (a reader that died would leave the
rest of the night's output unread)."""

from __future__ import annotations

import pytest

from watchdog.agents.outcome import MAX_JSON_LINE, MAX_KEPT_LINE, OutputReader


@pytest.mark.parametrize(
    "line",
    [
        b'{"type":"result","x":' + b"[" * 200_000 + b"]" * 200_000 + b"}\n",
        b'{"a":' * 100_000 + b"1" + b"}" * 100_000 + b"\n",
        b"\xff\xfe\x00\x01garbage\n",
        b"{not json\n",
        b'{"type": "result", "total_cost_usd": "a string"}\n',
        b'{"type": "rate_limit_event", "rate_limit_info": []}\n',
    ],
)
def test_no_line_makes_the_reader_raise(line):
    reader = OutputReader()
    reader.feed(line)
    reader.feed(b"API Error: 529 Overloaded\n")
    assert reader.report(1).lines[-1] == "API Error: 529 Overloaded"


def test_a_long_line_is_kept_cut():
    reader = OutputReader()
    reader.feed(b"x" * (MAX_JSON_LINE + 1))
    (kept,) = reader.report(1).lines
    assert len(kept) == MAX_KEPT_LINE + 1 and kept.endswith("…")


@pytest.mark.parametrize("size", [10, 120 * 1024 - 1, 120 * 1024, 300_000, 2_000_000])
def test_a_prompt_always_fits_one_argument(size):
    """M25: Linux refuses one argument over 128 KiB; the brief is cut with a
    pointer to the whole of it, on a character boundary."""
    from watchdog.agents.brief import CUT_NOTE, MAX_PROMPT, fit_prompt

    prompt = "title\n\n" + "é" * size
    fitted = fit_prompt(prompt)
    assert len(fitted.encode()) <= MAX_PROMPT < 128 * 1024
    if len(prompt.encode()) <= MAX_PROMPT:
        assert fitted == prompt
    else:
        assert fitted.startswith("title\n\n") and fitted.endswith(CUT_NOTE)
