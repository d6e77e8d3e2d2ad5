"""Agent text made safe to store, print and send: what an agent prints, or
writes through ``afk``, reaches the database, the digest, the pages, the
logs and other people's inboxes.

- :func:`plain`: no terminal escapes, no control characters but newlines and
  tabs (for what goes back to the agent itself, its brief);
- :func:`clean`: that, and every credential of a common shape hidden
  (:func:`watchdog.errors.redact`), for everything stored or shown to people;
- :func:`one_line`: one line, cut at a limit;
- :func:`shown`: :func:`clean` without the bidi controls, cut at a limit (for
  a page, a digest, an email: a right-to-left override in a title would
  reverse the text after it);
- :func:`escape_controls`: every control character written as an escape (a
  log line, which agent text must not break or reorder; a call a person
  approves, shown as it is);
- :func:`json_visible`: JSON with the same escapes (what a terminal or a
  page would obey is written as ``\\uXXXX``).
"""

from __future__ import annotations

import re
from typing import Any

from .errors import redact

_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
#: the Unicode bidi controls
_BIDI = re.compile("[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
#: control characters, and the Unicode line and bidi controls
_LINE_BIDI = "\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069"
_CONTROLS = re.compile(f"[\x00-\x1f\x7f-\x9f{_LINE_BIDI}]")
#: the same, but for newlines and tabs
_TERMINAL = re.compile(f"[\x00-\x08\x0b-\x1f\x7f-\x9f{_LINE_BIDI}]")


def plain(text: str) -> str:
    """No terminal escapes, no control characters but newlines and tabs."""
    return _CONTROL.sub("", _ANSI.sub("", text.replace("\r\n", "\n").replace("\r", "\n")))


def clean(text: str) -> str:
    """:func:`plain`, with every credential hidden: agent text as it may be
    stored, sent and shown."""
    return redact(plain(text))


def one_line(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def shown(text: Any, limit: int = 300) -> str:
    """:func:`clean` without the bidi controls, cut at ``limit``: agent text
    for people (a page, a digest, an email; the templates escape the HTML)."""
    value = _BIDI.sub("", clean(str(text)))
    return value if len(value) <= limit else value[: max(0, limit - 1)] + "…"


def terminal(text: str) -> str:
    """Text for a person's terminal: every control character escaped as
    :func:`escape_controls` does, but for newlines and tabs (a title from an
    issue must not retitle, clear or write the clipboard of the terminal)."""
    return _TERMINAL.sub(_escaped, text)


def escape_controls(text: str) -> str:
    """Every control character (and line or bidi control) as its escape."""
    return _CONTROLS.sub(_escaped, text)


#: what JSON leaves raw but a terminal or a page acts on: C1 controls
#: (U+009B is a CSI), DEL, and the line and bidi controls (they reorder what
#: a person reads)
_JSON_RAW = re.compile(f"[\x7f-\x9f{_LINE_BIDI}]")


def json_visible(text: str) -> str:
    """JSON text (from :func:`json.dumps` with ``ensure_ascii=False``) with
    what it leaves raw and a reader would obey written as ``\\uXXXX``: the
    same value to a JSON reader, every character visible to a person."""
    return _JSON_RAW.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def _escaped(match: re.Match[str]) -> str:
    return match.group().encode("unicode_escape").decode("ascii")
