"""The real Gemini CLI for the tests: its version pinned here (bump it on
purpose), fetched from the npm registry into a cache (.ci/run does it). It
runs on Node.js 20 or later.

    python3 tests/helpers/gemini_cli.py install    # prints the command's path

It talks to whatever ``GOOGLE_GEMINI_BASE_URL`` names (plain HTTP is allowed
for localhost), so a scripted Gemini API on localhost (tests/helpers/gemini_api.py)
makes it run with no model and no network.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

try:  # under pytest, as helpers.gemini_cli
    from .pinned_cli import cache_dir, fetch, located, script
except ImportError:  # as a script, or imported from tests/helpers on sys.path
    from pinned_cli import cache_dir, fetch, located, script  # type: ignore[no-redef]

VERSION = "0.61.0"
PACKAGE = "@google/gemini-cli"
FOLDER = cache_dir(f"gemini-cli-{VERSION}")


def binary() -> Path | None:
    """The pinned CLI: AFK_GEMINI_CLI, else the cache; None when missing."""
    return located("AFK_GEMINI_CLI", FOLDER / "node_modules" / ".bin" / "gemini")


def install() -> Path:
    if binary() is None:
        node = subprocess.run(["node", "--version"], capture_output=True, text=True).stdout
        if int(node.lstrip("v").split(".")[0] or 0) < 20:
            raise SystemExit(f"the Gemini CLI needs Node.js 20 or later, not {node.strip()}")
    return fetch(f"{PACKAGE}@{VERSION}", FOLDER, binary)


if __name__ == "__main__":
    script(install, "gemini_cli")
