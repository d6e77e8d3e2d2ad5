"""What reaches a person's terminal from text written outside the machine
(an issue's title, a branch name): escapes and controls shown, not obeyed."""

from __future__ import annotations

import pytest

from watchdog.text import terminal


@pytest.mark.parametrize(
    ("given", "shown"),
    [
        ("plain title", "plain title"),
        ("two\nlines\tand a tab", "two\nlines\tand a tab"),
        ("fix \x1b[31mRED\x1b[0m", "fix \\x1b[31mRED\\x1b[0m"),
        ("\x1b]0;pwned\x07", "\\x1b]0;pwned\\x07"),  # retitles the terminal
        ("\x1b]52;c;ZXZpbA==\x07", "\\x1b]52;c;ZXZpbA==\\x07"),  # writes the clipboard
        ("over\rwritten", "over\\rwritten"),
        ("\x9b2J", "\\x9b2J"),  # the one-byte CSI
        ("abc\u202edcba", "abc\\u202edcba"),  # a right-to-left override
        ("line\u2028sep", "line\\u2028sep"),
    ],
)
def test_terminal_escapes_every_control_but_newlines_and_tabs(given: str, shown: str) -> None:
    assert terminal(given) == shown
