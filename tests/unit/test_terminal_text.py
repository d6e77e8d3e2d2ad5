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


#: the C1 controls (U+0080 to U+009F) and DEL: a terminal acts on several
#: (U+009B is CSI, U+009D OSC, U+009C ST); text has no use for any
C1 = "".join(map(chr, range(0x7F, 0xA0)))


@pytest.mark.parametrize("char", list(C1), ids=lambda c: f"U+{ord(c):04X}")
def test_every_c1_control_is_gone_from_what_is_stored_and_shown(char: str) -> None:
    from watchdog.text import clean, plain, shown

    for keep in (plain, clean, shown):
        assert keep(f"a{char}b") == "ab", keep
    assert char not in terminal(f"a{char}b")


def test_json_on_a_terminal_writes_c1_bidi_and_line_controls_as_escapes(capsys) -> None:
    import json

    from watchdog.cli.common import emit

    value = {"title": f"x{C1}\u202e\u2066\u2028y é ü 日本"}
    emit(value)
    out = capsys.readouterr().out
    assert not any(c in out for c in C1 + "\u202e\u2066\u2028")
    assert json.loads(out) == value and "é ü 日本" in out
