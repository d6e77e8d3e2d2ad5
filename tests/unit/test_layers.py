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
#: (CONTRIBUTING.md draws this picture; ``agents.*`` are the agent wing's
#: modules, in watchdog/agents/, each on its own floor.)
FLOORS = {
    0: ["errors", "states", "ids", "agents.hooklink", "agents.credential", "agents.shellwords"],
    1: [
        "text",
        "git",
        "systemd",
        "sql",
        "agents.harnesses",
        "agents.sessioncache",
        "tracing",
        "agents.brokerlink",
        "agents.approvals",
        "links",
    ],
    2: ["agents.outcome", "agents.reach", "logs"],
    3: ["config", "agents.sandbox", "agents.zombie"],
    4: ["agents.process"],
    5: ["db", "checks", "agents.decide"],
    6: ["embedded", "models", "agents.fleet", "agents.words"],
    7: ["resolve", "fence", "backlogs", "keepalive", "dependencies"],
    8: ["effects", "workspaces", "people", "operators", "producers"],
    9: ["queue"],
    10: [
        "agents.accounts",
        "agents.brief",
        "agents.checkup",
        "agents.once",
        "agents.profiles",
        "digest",
        "metrics",
    ],
    11: ["destinations", "agents.hooks", "agents.loop"],
    12: ["delivery", "doctor", "agents.hookserver"],
    13: ["jobs", "web", "agents.broker"],
    14: ["service"],
    15: ["demo"],
    16: ["cli"],
    17: ["__init__", "__main__", "agents"],
}
FLOOR = {module: floor for floor, modules in FLOORS.items() for module in modules}

#: subpackages that are one module of several files
WHOLE = ("sql", "cli")


def modules() -> dict[str, list[Path]]:
    """Each module of the package and its files: a subpackage of ``WHOLE`` is
    one module of several files; each module of ``agents`` is one, and the
    package's ``__init__`` is ``agents``."""
    found = {p.stem: [p] for p in PACKAGE.glob("*.py")}
    for sub in WHOLE:
        found[sub] = sorted((PACKAGE / sub).glob("*.py"))
    for p in (PACKAGE / "agents").glob("*.py"):
        found["agents" if p.stem == "__init__" else f"agents.{p.stem}"] = [p]
    return found


def module_key(dotted: str) -> str | None:
    """The FLOORS name of an absolute module of the package (None: not ours)."""
    parts = dotted.split(".")
    if parts[0] != "watchdog" or len(parts) == 1:
        return "__init__" if parts == ["watchdog"] else None
    if parts[1] == "agents" and len(parts) > 2:
        return f"agents.{parts[2]}"
    return parts[1]


def imports(path: Path) -> set[str]:
    """The package's modules a file imports, anywhere in it, by FLOORS name
    (a file of a ``WHOLE`` subpackage importing its siblings imports its own)."""
    package = ["watchdog", *path.parent.relative_to(PACKAGE).parts]
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = [*base, *(node.module or "").split(".")] if node.module else base
            key = module_key(".".join(m for m in module if m))
            if node.module is None or key in (None, "__init__", "agents"):
                # `from . import a, b`: each name may be a module
                for alias in node.names:
                    sub = module_key(".".join([*module, alias.name]))
                    if sub in FLOOR:
                        out.add(sub)
            elif key is not None:
                out.add(key)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                key = module_key(alias.name)
                if key is not None:
                    out.add(key)
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
