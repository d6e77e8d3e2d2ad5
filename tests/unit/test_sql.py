"""The named statements and their callers agree: every statement run is
defined, every one defined is run, each by the method its cardinality asks
for; every file parses. (Parameters are checked on every call, by
Database and sql.checked.)"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from watchdog import sql

PACKAGE = Path(sql.__file__).parent.parent
CALL = re.compile(r"\.(one|row|all|execute|copy)\(\s*(?:sql\.shaped\()?\"(\w+)\"")
METHOD = {"one": "one", "row": "row", "all": "many", "execute": "exec", "copy": "copy"}


def calls() -> list[tuple[str, str, str]]:
    """(file, method, statement) of every named-statement call in the package."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for method, name in CALL.findall(path.read_text()):
            found.append((str(path.relative_to(PACKAGE)), method, name))
    return found


def test_every_statement_called_is_defined_with_the_cardinality_of_its_method():
    statements = sql.statements()
    for file, method, name in calls():
        assert name in statements, f"{file} runs {name!r}, which no .sql file defines"
        assert statements[name].returns == METHOD[method], (
            f"{file} runs {name} with {method}() but it is :{statements[name].returns}"
        )


def test_every_statement_defined_is_called():
    called = {name for _, _, name in calls()}
    assert set(sql.statements()) - called == set()


def test_only_the_module_that_owns_a_file_runs_its_statements():
    """Each .sql file names its owner; no other module (cli.py least of all)
    runs its statements."""
    statements = sql.statements()
    for file, _, name in calls():
        assert statements[name].owner == f"watchdog/{file}", (
            f"{file} runs {name}, which belongs to {statements[name].owner}"
        )
    for statement in statements.values():
        assert (PACKAGE.parent / statement.owner).is_file(), statement.owner


#: a statement that writes afk_task (not afk_task_effect, not afk_task_history),
#: itself or through the function that gives a task back (migration 0038)
WRITES_TASKS = re.compile(
    r"\b(?:UPDATE|INSERT\s+INTO|DELETE\s+FROM)\s+afk_task\b(?!_)|\bafk_give_back\(", re.I
)


def writers_outside_the_family() -> list[str]:
    out = []
    for path in sorted((PACKAGE / "sql").glob("*.sql")):
        for name, statement in sql.parse(path.read_text()).items():
            if WRITES_TASKS.search(statement.text) and not sql.TASK_WRITERS.match(path.name):
                out.append(f"{path.name}: {name}")
    return out


def test_every_writer_of_afk_task_is_in_the_one_family_of_files():
    """Who writes afk_task is one family of SQL files (sql.TASK_WRITERS,
    named in its module's header and in CONTRIBUTING): a statement that
    writes the table anywhere else fails here."""
    assert writers_outside_the_family() == [], "move it to the family's file of its module"
    assert sql.TASK_WRITERS.pattern in (PACKAGE.parent / "CONTRIBUTING.md").read_text()
    # the check finds a writer where there is one, and only there
    planted = "-- name: sneaky :exec\nUPDATE afk_task SET title = 'x' WHERE id = %(id)s;\n"
    assert WRITES_TASKS.search(sql.parse(planted)["sneaky"].text)
    ledger = "-- name: ok :exec\nUPDATE afk_task_effect SET done = true;\n"
    assert not WRITES_TASKS.search(sql.parse(ledger)["ok"].text)
    family = [bool(sql.TASK_WRITERS.match(n)) for n in ("tasks_people.sql", "people.sql")]
    assert family == [True, False]


@pytest.mark.parametrize(
    "text, message",
    [
        ("-- name: x\nSELECT 1", "header must read"),
        ("-- name: x :some\nSELECT 1", "header must read"),
        ("-- name: x :one frobnicate\nSELECT 1", "unknown flags"),
        ("-- name: x :one\nSELECT 1\n-- name: x :one\nSELECT 2", "defined twice"),
    ],
)
def test_a_bad_header_is_refused(text, message):
    with pytest.raises(ValueError, match=message):
        sql.parse(text)


def test_parameters_are_read_from_the_text_and_checked():
    st = sql.parse("-- name: x :one retry\nSELECT %(a)s, %(b)s::int, %(a)s")["x"]
    assert (st.returns, st.retry, st.params) == ("one", True, frozenset({"a", "b"}))
    with pytest.raises(TypeError, match=r"missing \['reason'\], unexpected \['why'\]"):
        sql.checked("pause_agent", {"agent_id": "a", "runner": "r", "why": "x"})


def test_a_statement_is_sent_without_its_comments_and_with_its_blanks_folded():
    (statement,) = sql.parse(
        "-- name: x :one\n-- what it does\nSELECT 'a  -- b', E'it''s\\n  x' -- why\n"
        '  ,   "odd  --name"\n  FROM t -- end\n WHERE a - 1 > 0;\n'
    ).values()
    assert statement.text == (
        "SELECT 'a  -- b', E'it''s\\n  x' , \"odd  --name\" FROM t WHERE a - 1 > 0"
    )


def test_every_statement_fits_the_parse_cache_of_psycopg():
    """psycopg keeps the parse of a query text up to 4 KiB (and 50
    parameters); a longer one is parsed again on every call. (The digest's
    query, run once a morning, may be longer.)"""
    from psycopg import _queries

    once_a_day = {"digest_data"}
    for statement in sql.statements().values():
        if statement.name in once_a_day:
            continue
        assert len(statement.text.encode()) <= _queries.MAX_CACHED_STATEMENT_LENGTH, statement.name
        assert len(statement.params) <= _queries.MAX_CACHED_STATEMENT_PARAMS, statement.name


def test_a_shape_writes_the_fixed_parameters_in_as_literals():
    name = sql.shaped("step", claim=True, id=None, token=None)
    shape, base = sql.statement(name), sql.statement("step")
    assert shape.expects == base.params - {"claim", "id", "token"}
    assert shape.params <= shape.expects  # (the parts a claim needs not are left out)
    assert "%(claim)s" not in shape.text and "NULL::uuid" in shape.text
    assert (shape.returns, shape.retry, shape.owner) == (base.returns, base.retry, base.owner)
    assert sql.shaped("step", token=None, id=None, claim=True) == name  # made once
    with pytest.raises(TypeError, match="no parameters"):
        sql.shaped("step", nope=None)


TOY = """-- name: toy :one
SELECT a.x,
       -- without b: NULL AS y
       (SELECT y FROM b WHERE b.k = %(b)s
        -- without c:
        AND b.c = %(c)s
        -- end without c
       ) AS y
       -- end without b
  FROM a WHERE a.k = %(a)s;
"""


@pytest.mark.parametrize(
    ("fixed", "text"),
    [
        ({}, "SELECT a.x, (SELECT y FROM b WHERE b.k = %(b)s AND b.c = %(c)s ) AS y"),
        ({"b": None}, "SELECT a.x, NULL AS y FROM"),
        ({"b": False}, "SELECT a.x, NULL AS y FROM"),
        ({"b": True}, "SELECT a.x, (SELECT y FROM b WHERE b.k = true AND b.c = %(c)s ) AS y"),
        ({"c": None}, "SELECT a.x, (SELECT y FROM b WHERE b.k = %(b)s ) AS y"),
        ({"c": None, "a": None}, "FROM a WHERE a.k = NULL"),
    ],
)
def test_a_shape_leaves_out_the_parts_of_what_it_writes_in_as_null(fixed, text):
    """A part marked `-- without P` (the line after the colon in its place,
    or nothing) is left out of a shape with P written in as NULL or false;
    parts nest; the statement as written keeps them all."""
    toy = sql.parse(TOY)["toy"]
    assert "%(b)s" in toy.text and "AND b.c = %(c)s" in toy.text
    shape = sql.shape_of(toy, fixed)
    assert text in shape.text, shape.text
    assert "--" not in shape.text
    assert shape.expects == toy.params - set(fixed)


@pytest.mark.parametrize(
    "body",
    [
        "SELECT 1\n-- without a:\nWHERE %(a)s\n",  # no end
        "SELECT 1\n-- without z:\nWHERE %(a)s\n-- end without z\n",  # not a parameter
        "SELECT 1\n-- without a:\nWHERE %(a)s\n-- end without b\n",  # another's end
    ],
)
def test_a_part_without_its_end_or_its_parameter_is_refused(body):
    with pytest.raises(ValueError, match="without"):
        sql.parse("-- name: bad :one\n" + body)


def test_the_step_returns_the_task_as_task_from_row_reads_it():
    """The step statement (a claim, a finish: the hot path) names the task's
    columns that Task.from_row reads, no more (the columns that serve the
    database alone would cross the wire on every call) and no fewer (a
    missing one would read as None)."""
    import ast
    import inspect
    import textwrap

    from watchdog.models import Task

    source = textwrap.dedent(inspect.getsource(Task.from_row))
    read = {
        node.slice.value if isinstance(node, ast.Subscript) else node.args[0].value
        for node in ast.walk(ast.parse(source))
        if (isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant))
        or (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "get"
            and isinstance(node.args[0], ast.Constant)
        )
    }
    text = sql.query("step")
    listed = set(re.findall(r"\br\.(\w+)", text[text.rindex("db_now") :]))
    assert listed == read
    assert "r.*" not in text
