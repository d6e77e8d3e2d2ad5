"""The real Gemini CLI for the tests: its version pinned here (bump it on
purpose), fetched from the npm registry into a cache (.ci/run does it). It
runs on Node.js 20 or later.

    python3 tests/helpers/gemini_cli.py install    # prints the command's path

It talks to whatever ``GOOGLE_GEMINI_BASE_URL`` names (plain HTTP is allowed
for localhost), so a scripted Gemini API on localhost (tests/helpers/gemini_api.py)
makes it run with no model and no network.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

VERSION = "0.61.0"
PACKAGE = "@google/gemini-cli"


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "afk-watchdog" / f"gemini-cli-{VERSION}"


def binary() -> Path | None:
    """The pinned CLI: AFK_GEMINI_CLI, else the cache; None when missing."""
    given = os.environ.get("AFK_GEMINI_CLI")
    if given:
        return Path(given) if Path(given).is_file() else None
    path = cache_dir() / "node_modules" / ".bin" / "gemini"
    return path if path.exists() else None


def install() -> Path:
    found = binary()
    if found is not None:
        return found
    npm = shutil.which("npm")
    if npm is None:
        raise SystemExit("npm is needed to fetch the Gemini CLI")
    folder = cache_dir()
    folder.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [
            npm,
            "install",
            "--prefix",
            str(folder),
            "--no-audit",
            "--no-fund",
            "--silent",
            f"{PACKAGE}@{VERSION}",
        ],
        check=True,
    )
    found = binary()
    if found is None:
        raise SystemExit(f"{PACKAGE}@{VERSION} installed no gemini command")
    return found


if __name__ == "__main__":
    if sys.argv[1:] != ["install"]:
        raise SystemExit("usage: python3 tests/helpers/gemini_cli.py install")
    print(install())
