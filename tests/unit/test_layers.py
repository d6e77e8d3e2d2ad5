"""The house keeps its shape: every import of a module of the package goes to
a floor below its own (in-function and TYPE_CHECKING imports count), so
there is no circle; and what `afk --help` and a hook answered from its cache
import is pinned (no database driver, no templates, no HTTP, no scheduler
before they are needed: a hook runs on every tool call of an agent)."""

from __future__ import annotations

import ast
from pathlib import Path

from helpers import ROOT, TESTS

PACKAGE = ROOT / "watchdog"

#: each module's floor; a module imports only from floors below its own.
#: (CONTRIBUTING.md draws this picture.)
FLOORS = {
    0: ["errors", "states", "hooklink", "credential"],
    1: ["text", "systemd", "sql", "harnesses", "tracing", "zombie"],
    2: ["outcome", "logs"],
    3: ["config", "process"],
    4: ["db", "checks", "decide"],
    5: ["embedded", "models"],
    6: ["resolve", "fence", "backlogs", "keepalive", "dependencies"],
    7: ["effects", "workspaces", "people", "operators"],
    8: ["queue"],
    9: ["accounts", "brief", "once", "digest", "metrics"],
    10: ["destinations", "hooks", "loop"],
    11: ["delivery", "doctor", "hookserver"],
    12: ["jobs", "web"],
    13: ["service"],
    14: ["demo"],
    15: ["cli"],
    16: ["__init__", "__main__"],
}
FLOOR = {module: floor for floor, modules in FLOORS.items() for module in modules}


def modules() -> dict[str, list[Path]]:
    """Each module of the package and its files (a subpackage, ``sql`` or
    ``cli``, is one module of several files)."""
    found = {p.stem: [p] for p in PACKAGE.glob("*.py")}
    for sub in ("sql", "cli"):
        found[sub] = sorted((PACKAGE / sub).glob("*.py"))
    return found


def imports(path: Path) -> set[str]:
    """The package's modules a file imports, anywhere in it (a file of a
    subpackage importing its siblings imports nothing of the package's)."""
    inside_sub = path.parent != PACKAGE
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            level = node.level - (1 if inside_sub else 0)
            if level == 1 or (node.module or "").startswith("watchdog"):
                name = (node.module or "").removeprefix("watchdog").lstrip(".")
                if name:
                    out.add(name.split(".")[0])
                else:
                    out.update(a.name for a in node.names)
        elif isinstance(node, ast.Import):
            out.update(a.name.split(".")[1] for a in node.names if a.name.startswith("watchdog."))
    return out


def test_every_module_has_a_floor():
    assert set(modules()) == set(FLOOR), "give the new module a floor in FLOORS"


def test_every_import_goes_down_a_floor():
    climbs = []
    for name, paths in modules().items():
        for target in set().union(*map(imports, paths)) - {name}:
            if target in FLOOR and FLOOR[target] >= FLOOR[name]:
                climbs.append(
                    f"{name} (floor {FLOOR[name]}) imports {target} (floor {FLOOR[target]})"
                )
    assert climbs == []


def test_no_test_imports_another_test():
    """Shared helpers live in tests/helpers/, never in a test module."""
    tests = TESTS
    found = []
    for path in sorted(tests.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            found += [
                f"{path.name} imports {n}" for n in names if n.split(".")[0].startswith("test_")
            ]
    assert found == []


def test_no_two_test_files_share_a_name():
    """pytest imports test modules by their base name: two files of one name
    in two tiers make the second fail to collect (import file mismatch)."""
    names = [p.name for p in TESTS.rglob("test_*.py")]
    assert sorted({n for n in names if names.count(n) > 1}) == []
