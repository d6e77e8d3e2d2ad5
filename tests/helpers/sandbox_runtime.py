"""Anthropic's sandbox runtime (the `srt` command) for the tests: its version
pinned here (bump it on purpose), fetched from the npm registry into a cache
(.ci/run does it). On Linux it runs the command under bubblewrap, its network
through proxies on the host (socat), and searches with ripgrep: Debian's
bubblewrap, socat and ripgrep.

    python3 tests/helpers/sandbox_runtime.py install    # prints the command's path
"""

from __future__ import annotations

from pathlib import Path

try:  # under pytest, as helpers.sandbox_runtime
    from .pinned_cli import cache_dir, fetch, located, script
except ImportError:  # as a script, or imported from tests/helpers on sys.path
    from pinned_cli import cache_dir, fetch, located, script  # type: ignore[no-redef]

VERSION = "0.0.78"
PACKAGE = "@anthropic-ai/sandbox-runtime"
FOLDER = cache_dir(f"sandbox-runtime-{VERSION}")


def binary() -> Path | None:
    """The pinned engine: AFK_SRT, else the cache; None when missing."""
    return located("AFK_SRT", FOLDER / "node_modules" / ".bin" / "srt")


def install() -> Path:
    return fetch(f"{PACKAGE}@{VERSION}", FOLDER, binary)


if __name__ == "__main__":
    script(install, "sandbox_runtime")
