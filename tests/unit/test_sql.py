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
CALL = re.compile(r"\.(one|all|execute|copy)\(\s*\"(\w+)\"")
METHOD = {"one": "one", "all": "many", "execute": "exec", "copy": "copy"}


def calls() -> list[tuple[str, str, str]]:
    """(file, method, statement) of every named-statement call in the package."""
    found = []
    for path in sorted(PACKAGE.glob("*.py")):
        for method, name in CALL.findall(path.read_text()):
            found.append((path.name, method, name))
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
