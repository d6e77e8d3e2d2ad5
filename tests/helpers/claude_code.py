"""The real Claude Code CLI for the tests: its version pinned here (bump it on
purpose), fetched from the npm registry into a cache (.ci/run does it).

    python3 tests/helpers/claude_code.py install    # prints the binary's path

The single-binary Linux build talks to whatever ANTHROPIC_BASE_URL names, so a
scripted Messages API on localhost (tests/helpers/messages_api.py) makes it run with
no model and no network.
"""

from __future__ import annotations

import platform
from pathlib import Path

try:  # under pytest, as helpers.claude_code
    from .pinned_cli import cache_dir, fetch, located, script
except ImportError:  # as a script, or imported from tests/helpers on sys.path
    from pinned_cli import cache_dir, fetch, located, script  # type: ignore[no-redef]

VERSION = "2.1.332"
PACKAGE = "@anthropic-ai/claude-code-linux-{arch}"
FOLDER = cache_dir(f"claude-code-{VERSION}")


def package() -> str:
    arch = {"x86_64": "x64", "aarch64": "arm64"}.get(platform.machine(), platform.machine())
    return PACKAGE.format(arch=arch)


def binary() -> Path | None:
    """The pinned CLI: AFK_CLAUDE_CLI, else the cache; None when missing."""
    return located("AFK_CLAUDE_CLI", FOLDER / "node_modules" / package() / "claude")


def install() -> Path:
    return fetch(f"{package()}@{VERSION}", FOLDER, binary)


if __name__ == "__main__":
    script(install, "claude_code")
