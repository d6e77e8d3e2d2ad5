"""The real Claude Code CLI for the tests: its version pinned here (bump it on
purpose), fetched from the npm registry into a cache (.ci/run does it).

    python3 tests/helpers/claude_code.py install    # prints the binary's path

The single-binary Linux build talks to whatever ANTHROPIC_BASE_URL names, so a
scripted Messages API on localhost (tests/helpers/messages_api.py) makes it run with
no model and no network.
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path

VERSION = "2.1.332"
PACKAGE = "@anthropic-ai/claude-code-linux-{arch}"


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "afk-watchdog" / f"claude-code-{VERSION}"


def package() -> str:
    arch = {"x86_64": "x64", "aarch64": "arm64"}.get(platform.machine(), platform.machine())
    return PACKAGE.format(arch=arch)


def binary() -> Path | None:
    """The pinned CLI: AFK_CLAUDE_CLI, else the cache; None when missing."""
    given = os.environ.get("AFK_CLAUDE_CLI")
    if given:
        return Path(given) if Path(given).is_file() else None
    path = cache_dir() / "node_modules" / package() / "claude"
    return path if path.is_file() else None


def install() -> Path:
    found = binary()
    if found is not None:
        return found
    npm = shutil.which("npm")
    if npm is None:
        raise SystemExit("npm is needed to fetch the Claude Code CLI")
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
            f"{package()}@{VERSION}",
        ],
        check=True,
    )
    found = binary()
    if found is None:
        raise SystemExit(f"{package()}@{VERSION} installed no claude binary")
    return found


if __name__ == "__main__":
    if sys.argv[1:] != ["install"]:
        raise SystemExit("usage: python3 tests/helpers/claude_code.py install")
    print(install())
