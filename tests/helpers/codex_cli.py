"""The real Codex CLI for the tests: its version pinned here (bump it on
purpose), fetched from the npm registry into a cache (.ci/run does it).

    python3 tests/helpers/codex_cli.py install    # prints the binary's path

The npm package ``@openai/codex`` ships each platform's build as a version of
its own (``0.171.0-linux-x64``); its single binary talks to whatever model
provider ``-c model_providers.NAME.base_url=...`` names, so a scripted
Responses API on localhost (tests/helpers/responses_api.py) makes it run with no
model and no network.
"""

from __future__ import annotations

import platform
from pathlib import Path

try:  # under pytest, as helpers.codex_cli
    from .pinned_cli import cache_dir, fetch, located, script
except ImportError:  # as a script, or imported from tests/helpers on sys.path
    from pinned_cli import cache_dir, fetch, located, script  # type: ignore[no-redef]

VERSION = "0.171.0"
PACKAGE = "@openai/codex"
TRIPLES = {"x64": "x86_64-unknown-linux-musl", "arm64": "aarch64-unknown-linux-musl"}
FOLDER = cache_dir(f"codex-{VERSION}")


def arch() -> str:
    return {"x86_64": "x64", "aarch64": "arm64"}.get(platform.machine(), platform.machine())


def binary() -> Path | None:
    """The pinned CLI: AFK_CODEX_CLI, else the cache; None when missing."""
    vendor = FOLDER / "node_modules" / PACKAGE / "vendor"
    return located("AFK_CODEX_CLI", vendor / TRIPLES.get(arch(), arch()) / "bin" / "codex")


def install() -> Path:
    return fetch(f"{PACKAGE}@{VERSION}-linux-{arch()}", FOLDER, binary)


if __name__ == "__main__":
    script(install, "codex_cli")
