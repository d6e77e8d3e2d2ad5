"""How the loop reads an agent's output (``process._pump``): lines however
the bytes arrive, a long line cut, and every byte a sign of life."""

from __future__ import annotations

import io
import json

import pytest

from watchdog.agents.outcome import MAX_JSON_LINE, OutputReader
from watchdog.agents.process import _pump


class Chunks:
    """An agent's pipe: the chunks as the kernel hands them over."""

    def __init__(self, *chunks: bytes) -> None:
        self.chunks = iter(chunks)

    def read1(self, _size: int) -> bytes:
        return next(self.chunks, b"")


RESULT = json.dumps({"type": "result", "subtype": "success", "session_id": "s1"}).encode()


@pytest.mark.parametrize(
    ("chunks", "lines"),
    [
        ((b"one\ntwo\n",), ["one", "two"]),
        ((b"o", b"ne\ntw", b"o\n"), ["one", "two"]),
        ((b"no newline at the end",), ["no newline at the end"]),
        (
            (b"\rbuilding 1%", b"\rbuilding 2%", b"\n", b"done\n"),
            ["", "building 1%", "building 2%", "done"],
        ),
        ((b"a\n\nb\n",), ["a", "", "b"]),
    ],
)
def test_lines_are_read_however_the_bytes_arrive(chunks, lines):
    reader, sink = OutputReader(), io.BytesIO()
    _pump(Chunks(*chunks), sink, reader, "stdout")
    assert sink.getvalue() == b"".join(chunks)  # passed through as it came
    assert list(reader.lines) == lines  # (a carriage return is a line's end there)


@pytest.mark.parametrize("split", [7, 4096, MAX_JSON_LINE])
def test_a_line_past_the_limit_is_cut_and_the_next_line_is_read(split):
    long = b"x" * (MAX_JSON_LINE + 10) + b"\n"
    data = long + RESULT + b"\n"
    reader = OutputReader()
    _pump(
        Chunks(*(data[i : i + split] for i in range(0, len(data), split))),
        io.BytesIO(),
        reader,
        "stdout",
    )
    assert reader.found["result"]["session_id"] == "s1"
    assert len(reader.lines) == 1 and reader.lines[0].startswith("xxx")


def test_a_chunk_without_a_newline_is_a_sign_of_life():
    reader = OutputReader()
    reader.last_at = 0.0
    _pump(Chunks(b"\rbuilding 5%"), io.BytesIO(), reader, "stdout")
    assert reader.last_at > 0.0
