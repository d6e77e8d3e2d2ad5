"""The SQL: named statements from the ``*.sql`` files here, and numbered migrations.

A statement starts with a header line::

    -- name: claim :one retry

then what it returns: ``:one`` (at most one row), ``:row`` (exactly one: an
aggregate, an upsert, a statement built to answer in any case), ``:many``
(rows) or ``:exec`` (nothing), which :class:`~watchdog.db.Database` checks
against the method that runs it (``one()``, ``row()``, ``all()``,
``execute()``), as it checks the
parameters given against the ``%(name)s`` ones in the text. ``:copy`` is a
``COPY … FROM STDIN``, run by ``copy()`` with the rows to send.

``retry`` marks a statement that is safe to run again when the connection was
lost after it was sent (its reply may be lost, not its effect): reads, fenced
writes (a replay after a commit is refused by the fence, or, for ``done``,
recognised), and writes that are idempotent by construction. Every statement
is retried when the connection failed before it was sent.

A statement is sent as :func:`compact` makes it: its comments out and its
blanks folded, so that psycopg's cache of parsed queries (texts up to 4 KiB)
holds even the long ones. :func:`shaped` gives a statement with some of its
parameters fixed to literals (NULL, true, false): a statement whose
parameters switch parts of it on and off (``step``: a claim, a finish, or
both) is then one prepared statement per shape, which the server plans once
(a generic plan) instead of once per call.

A part that a shape does not use is marked, so that the shape leaves it out
(the server still sets up every part of a statement on every call, a write
that writes nothing too: a table and its indexes opened, its triggers
readied)::

    WITH fin AS (
        -- without id: SELECT * FROM afk_task WHERE false
        UPDATE afk_task SET ... WHERE id = %(id)s ...
        RETURNING *
        -- end without id
    ), ...

In a shape with ``id`` written in as NULL (or false), the lines between the
two markers are the one line after ``without id:`` (nothing, if there is
none); otherwise they stay, and the markers are comments like any other.

Who writes ``afk_task`` is one family of files, :data:`TASK_WRITERS`:
``tasks.sql`` (the queue's) and ``tasks_<module>.sql`` (each another
module's: ``tasks_producers.sql``, ``tasks_operators.sql``,
``tasks_people.sql``, ``tasks_effects.sql``, ``tasks_workspaces.sql``). A statement that updates,
inserts or deletes a task lives there and nowhere else
(``tests/unit/test_sql.py`` holds it); the state machine is read in these
files alone.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache, cached_property
from importlib import resources
from typing import Any

_HEADER = re.compile(r"^-- name: (\w+) :(one|row|many|exec|copy)((?: [\w-]+)*)\s*$", re.MULTILINE)
_FLAGS = frozenset({"retry"})
_PARAM = re.compile(r"%\((\w+)\)s")
#: a part of a statement that a shape without a parameter leaves out (or
#: replaces with the alternative after the colon); it holds no other part
#: (a part may hold another: the innermost are found first)
_WITHOUT = re.compile(
    r"^[ \t]*-- without (\w+):([^\n]*)\n((?:(?!^[ \t]*-- without ).)*?)"
    r"^[ \t]*-- end without \1[ \t]*$",
    re.MULTILINE | re.DOTALL,
)


#: a string literal (plain, E'' or a quoted name), a comment, blanks, the rest
_TOKEN = re.compile(
    r"[eE]'(?:[^'\\]|\\.|'')*'|'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|--[^\n]*|\s+|[^'\"\s-]+|-",
    re.DOTALL,
)


def compact(text: str) -> str:
    """``text`` without its comments, each run of blanks one space (string
    literals and quoted names kept as they are)."""
    out: list[str] = []
    for match in _TOKEN.finditer(text):
        token = match.group()
        if token.startswith("--") or token.isspace():
            if out and out[-1] != " ":
                out.append(" ")
        else:
            out.append(token)
    return "".join(out).strip()


def _statement_text(source: str) -> str:
    """What is sent of a statement written as ``source``: compacted, without
    its closing semicolon."""
    return compact(source).rstrip(";").rstrip()


def _check_parts(statement: Statement) -> None:
    """Each ``-- without P`` part ends, and P is a parameter of the statement."""
    named: set[str] = set()

    def kept(found: re.Match[str]) -> str:
        named.add(found.group(1))
        return found.group(3)

    rest = _without(statement.source, kept)
    if "-- without " in rest or "-- end without " in rest:
        raise ValueError(f"query {statement.name!r}: a '-- without' part has no '-- end without'")
    if named - statement.params:
        raise ValueError(f"query {statement.name!r}: a '-- without' part names no parameter of it")


def _without(source: str, part: Callable[[re.Match[str]], str]) -> str:
    """``source`` with each ``-- without`` part replaced by ``part(match)``,
    the innermost first."""
    while True:
        replaced = _WITHOUT.sub(part, source)
        if replaced == source:
            return source
        source = replaced


@dataclass(frozen=True)
class Statement:
    name: str
    text: str
    #: one, many, exec or copy
    returns: str = "many"
    retry: bool = False
    #: the module that runs it (the file's ``-- owner:`` line)
    owner: str = ""
    #: its text as written, comments and all (what :func:`shaped` reads)
    source: str = ""
    #: the parameters a caller gives it, where they are not those of its
    #: text (a shape: its statement's, less those written in)
    expects: frozenset[str] | None = None

    @cached_property
    def params(self) -> frozenset[str]:
        """The named parameters it takes (read once: it is checked on every
        call, on the hot path)."""
        return frozenset(_PARAM.findall(self.text))


_OWNER = re.compile(r"^-- owner: (\S+)\s*$", re.MULTILINE)
#: the one family of files whose statements write afk_task (see above)
TASK_WRITERS = re.compile(r"^tasks(_[a-z]+)?\.sql$")


def parse(text: str, owner: str = "") -> dict[str, Statement]:
    """Split a file of ``-- name: x :returns [flags]`` blocks into {name: Statement}."""
    parts = _HEADER.split(text)
    if "-- name:" in parts[0]:
        raise ValueError(
            "a statement header must read: -- name: NAME :one|:row|:many|:exec|:copy [retry]"
        )
    found: dict[str, Statement] = {}
    for name, returns, flags, body in zip(
        parts[1::4], parts[2::4], parts[3::4], parts[4::4], strict=True
    ):
        if name in found:
            raise ValueError(f"query {name!r} is defined twice")
        given = set(flags.split())
        if given - _FLAGS:
            raise ValueError(f"query {name!r}: unknown flags {sorted(given - _FLAGS)}")
        if "-- name:" in body:
            raise ValueError(
                f"after query {name!r}: a statement header must read: "
                "-- name: NAME :one|:row|:many|:exec|:copy [retry]"
            )
        statement = Statement(name, _statement_text(body), returns, "retry" in given, owner, body)
        _check_parts(statement)
        found[name] = statement
    return found


@cache
def statements() -> dict[str, Statement]:
    """Every statement of every ``*.sql`` file here. Each file belongs to the
    one module that runs its statements, named on its first line
    (``-- owner: watchdog/queue.py``); a name is defined once across them."""
    found: dict[str, Statement] = {}
    for entry in sorted(resources.files(__package__).iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".sql"):
            text = entry.read_text("utf-8")
            owner = _OWNER.search(text.split("-- name:", 1)[0])
            if owner is None:
                raise ValueError(f"{entry.name} names no owner (-- owner: watchdog/x.py)")
            for name, statement in parse(text, owner.group(1)).items():
                if name in found:
                    raise ValueError(f"query {name!r} is defined twice ({entry.name})")
                found[name] = statement
    return found


def statement(name: str) -> Statement:
    return statements().get(name) or _shapes[name]


#: the shapes made so far: by name, and by what they were made from
_shapes: dict[str, Statement] = {}
_shape_names: dict[tuple[str, frozenset[tuple[str, bool | None]]], str] = {}


def shaped(name: str, **fixed: bool | None) -> str:
    """The name of ``name`` with the parameters ``fixed`` written into its
    text as literals (None as NULL, booleans as true and false): they are no
    longer parameters of it. One shape is made once and kept."""
    key = (name, frozenset(fixed.items()))
    made = _shape_names.get(key)
    if made is None:
        shape = shape_of(statements()[name], fixed)
        _shapes[shape.name] = shape
        _shape_names[key] = made = shape.name
    return made


def shape_of(base: Statement, fixed: Mapping[str, bool | None]) -> Statement:
    """``base`` with the parameters ``fixed`` written in, and without the
    parts (``-- without``) of those written in as NULL or false."""
    unknown = set(fixed) - base.params
    if unknown:
        raise TypeError(f"statement {base.name} has no parameters {sorted(unknown)}")
    literal = {k: "NULL" if v is None else "true" if v else "false" for k, v in fixed.items()}

    def part(found: re.Match[str]) -> str:
        param, instead, lines = found.groups()
        left_out = param in fixed and not fixed[param]
        return instead.strip() if left_out else lines

    source = _without(base.source, part)
    text = _PARAM.sub(lambda m: literal.get(m.group(1), m.group(0)), source)
    return Statement(
        base.name + "{" + ",".join(f"{k}={literal[k]}" for k in sorted(literal)) + "}",
        _statement_text(text),
        base.returns,
        base.retry,
        base.owner,
        expects=base.params - set(fixed),
    )


def query(name: str) -> str:
    return statements()[name].text


def checked(name: str, params: Mapping[str, Any]) -> str:
    """The text of ``name``, once ``params`` are exactly its parameters (for
    callers outside :class:`~watchdog.db.Database`: EXPLAIN, pgbench)."""
    return checked_statement(name, params).text


def checked_statement(name: str, params: Mapping[str, Any]) -> Statement:
    """The statement ``name``, once ``params`` are exactly its parameters."""
    found = statement(name)
    expects = found.params if found.expects is None else found.expects
    if params.keys() != expects:
        given = frozenset(params)
        raise TypeError(
            f"statement {name}: missing {sorted(expects - given)}, "
            f"unexpected {sorted(given - expects)}"
        )
    return found


def migrations() -> list[tuple[int, str, str]]:
    """(version, file name, SQL) for every migration, in order."""
    folder = resources.files("watchdog").joinpath("migrations")
    found = []
    for entry in folder.iterdir():
        match = re.fullmatch(r"(\d{4})_\w+\.sql", entry.name)
        if match:
            found.append((int(match.group(1)), entry.name, entry.read_text("utf-8")))
    found.sort()
    versions = [v for v, _, _ in found]
    if versions != list(range(1, len(versions) + 1)):
        raise RuntimeError(f"migration numbers must run 1..n without gaps: {versions}")
    return found
