"""The CLI's in-function imports (watchdog/cli/): each keeps a fast path
fast, and says which. `afk --help`, `afk hook`'s fallback and every command
that does not need them start without the database driver, the templates,
HTTP or the scheduler; a module the file imports at its top anyway is never
imported again inside a function."""

from __future__ import annotations

import ast
from pathlib import Path

from helpers import ROOT

CLI = ROOT / "watchdog" / "cli"
#: what the CLI imports only inside the commands that need it, and what
#: importing it would add to every other command's start (`afk --help`, the
#: hook's fallback): measured by importing each after watchdog.cli
LAZY = {
    # psycopg (some 190 modules)
    **dict.fromkeys(
        ("db", "queue", "models", "accounts", "backlogs", "workspaces", "loop", "delivery"),
        "psycopg",
    ),
    "demo": "psycopg",
    "broker": "psycopg (the loop's broker, with its hook server)",
    "sandbox": "the boundary of afk loop --sandbox, and only there",
    "approvals": "the rules of afk loop --ask-for (fnmatch, hashlib), and only there",
    "profiles": "afk profile and afk loop --profile (psycopg)",
    "fleet": "afk loops and afk status (psycopg)",
    "process": "the agent's process runner, for afk loop only",
    "cli.agents": "afk loop's boundary, for afk doctor --sandbox (psycopg)",
    "brokerlink": "json: the afk an agent runs inside a run, and only there",
    "cli": "the parser, for the broker (cli/__init__ imports this file: a circle)",
    "cli.agentcli": "the agent's commands, for afk loop's broker only",
    "service": "psycopg, prometheus-client, APScheduler",
    "web": "jinja2 and the status pages (afk web token)",
    # a subprocess module and the embedded server's lookups
    **dict.fromkeys(("embedded", "once", "resolve"), "subprocess"),
    "outcome": "zoneinfo and the outcome patterns",
    "words": "a task's and a wait's words, with outcome's (afk claim's and afk gc's lines)",
    "sql": "importlib.resources and the statements",
    "hooks": "the hook's handlers (ten modules)",
    "doctor": "every check (four modules)",
    "checkup": "afk doctor's agent half, with doctor",
    "delivery": "httpx, smtplib",
    # the standard library's
    "subprocess": "subprocess",
    "importlib": "importlib.metadata (afk --version)",
}


def _modules(node: ast.ImportFrom) -> list[str]:
    """The package's modules an import from ``..`` names (the agent wing's
    by their own names: ``from ..agents import hooks`` is ``hooks``)."""
    module = (node.module or "").removeprefix("agents").lstrip(".")
    if not module:  # from .. import x, from ..agents import x
        return [a.name for a in node.names]
    return [module.split(".")[0]]


def in_function_imports(path: Path) -> list[tuple[str, str]]:
    """(function, module) of each import inside a function."""
    tree = ast.parse(path.read_text())
    found = []
    for func in ast.walk(tree):
        if isinstance(func, ast.FunctionDef):
            for node in ast.walk(func):
                if isinstance(node, ast.ImportFrom):
                    if node.level == 2:
                        found += [(func.name, m) for m in _modules(node)]
                    elif node.level == 1:  # a sibling in cli/
                        found.append((func.name, f"cli.{(node.module or '').split('.')[0]}"))
                    else:
                        found.append((func.name, (node.module or "").split(".")[0]))
                elif isinstance(node, ast.Import):
                    found += [(func.name, a.name.split(".")[0]) for a in node.names]
    return found


def top_imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    out = set()
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.level == 2:
            out.update(_modules(node))
        elif isinstance(node, ast.Import):
            out.update(a.name.split(".")[0] for a in node.names)
    return out


def test_each_in_function_import_is_of_a_module_kept_off_the_fast_path():
    unexplained = [
        f"{path.name}:{func} imports {module}"
        for path in sorted(CLI.glob("*.py"))
        for func, module in in_function_imports(path)
        if module not in LAZY
    ]
    assert unexplained == [], "name why it is imported late (LAZY), or import it at the top"


def test_no_module_imported_at_the_top_is_imported_again_inside_a_function():
    again = [
        f"{path.name}:{func} imports {module} again"
        for path in sorted(CLI.glob("*.py"))
        for func, module in in_function_imports(path)
        if module in top_imports(path)
    ]
    assert again == []
