"""What a span may carry (R12): the process's own secrets masked in every
attribute, whatever shape the text has them in, and every credential of a
common shape redacted. Pure: no exporter."""

from __future__ import annotations

import pytest

from watchdog import tracing


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("afk done x --tok 281474976710657", "afk done x --tok ***"),
        ("echo 281474976710657|xargs", "echo ***|xargs"),
        ("X-Fence: 281474976710657", "X-Fence: ***"),
        ("printf %s281474976710657x", "printf %s***x"),
        ("GITHUB_TOKEN=ghp_" + "Z" * 30, "GITHUB_TOKEN=***"),
        ("a token of 28147 digits", "a token of 28147 digits"),  # not the token
        (7, 7),
    ],
)
def test_an_attribute_carries_no_kept_out_value(text, shown):
    tracing.keep_out(281474976710657, None, "", "12345")  # (too short: not kept out)
    assert tracing._attributes({"a": text, "b": None}) == {"a": shown}
