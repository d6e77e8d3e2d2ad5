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
#: what the CLI imports only where a command needs it, and why
LAZY = {
    "db": "psycopg",
    "queue": "psycopg",
    "accounts": "psycopg",
    "config": "its settings tables, and tomllib",
    "resolve": "the embedded server's lookups",
    "embedded": "the embedded server",
    "loop": "the supervisor",
    "hooks": "the hook's handlers",
    "hooklink": "the hook's client",
    "harnesses": "settings builders",
    "doctor": "every check",
    "digest": "Jinja2",
    "delivery": "httpx, smtplib",
    "destinations": "httpx, smtplib",
    "service": "APScheduler",
    "jobs": "APScheduler",
    "web": "the status pages",
    "demo": "the demo",
    "workspaces": "git",
    "backlogs": "the prd.json reader",
    "brief": "the resume brief",
    "once": "afk once",
    "outcome": "the outcome patterns",
    "tracing": "OpenTelemetry",
    "errors": "(the scrubber, in the last handler)",
    "sql": "the statements",
    "logs": "the log formats",
    "systemd": "sd_notify",
    "metrics": "prometheus-client",
    "models": "the models",
    "checks": "the checks",
    "states": "the states",
    "credential": "the credential",
}
STDLIB_LAZY = {
    "datetime",
    "json",
    "importlib",
    "io",
    "contextlib",
    "shlex",
    "subprocess",
    "tempfile",
    "getpass",
    "signal",
    "socket",
    "time",
    "urllib",
    "zoneinfo",
    "tzlocal",
    "threading",
    "textwrap",
    "uuid",
    "re",
    "secrets",
    "stat",
    "platform",
    "sys",
    "os",
    "shutil",
    "hashlib",
    "http",
    "select",
    "errno",
}


def in_function_imports(path: Path) -> list[tuple[str, str]]:
    """(function, module) of each import inside a function."""
    tree = ast.parse(path.read_text())
    found = []
    for func in ast.walk(tree):
        if isinstance(func, ast.FunctionDef):
            for node in ast.walk(func):
                if isinstance(node, ast.ImportFrom):
                    name = (node.module or "").split(".")[0]
                    if node.level == 2 and not node.module:  # from .. import x
                        found += [(func.name, a.name) for a in node.names]
                    elif node.level == 1:  # a sibling in cli/
                        found.append((func.name, f"cli.{name}"))
                    else:
                        found.append((func.name, name))
                elif isinstance(node, ast.Import):
                    found += [(func.name, a.name.split(".")[0]) for a in node.names]
    return found


def top_imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    out = set()
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.level == 2:
            out.update([node.module.split(".")[0]] if node.module else [a.name for a in node.names])
        elif isinstance(node, ast.Import):
            out.update(a.name.split(".")[0] for a in node.names)
    return out


def test_each_in_function_import_is_of_a_module_kept_off_the_fast_path():
    unexplained = [
        f"{path.name}:{func} imports {module}"
        for path in sorted(CLI.glob("*.py"))
        for func, module in in_function_imports(path)
        if module not in LAZY and module not in STDLIB_LAZY
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
