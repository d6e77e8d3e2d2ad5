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

import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path

VERSION = "0.171.0"
PACKAGE = "@openai/codex"
TRIPLES = {"x64": "x86_64-unknown-linux-musl", "arm64": "aarch64-unknown-linux-musl"}


def arch() -> str:
    return {"x86_64": "x64", "aarch64": "arm64"}.get(platform.machine(), platform.machine())


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "afk-watchdog" / f"codex-{VERSION}"


def binary() -> Path | None:
    """The pinned CLI: AFK_CODEX_CLI, else the cache; None when missing."""
    given = os.environ.get("AFK_CODEX_CLI")
    if given:
        return Path(given) if Path(given).is_file() else None
    vendor = cache_dir() / "node_modules" / PACKAGE / "vendor"
    path = vendor / TRIPLES.get(arch(), arch()) / "bin" / "codex"
    return path if path.is_file() else None


def install() -> Path:
    found = binary()
    if found is not None:
        return found
    npm = shutil.which("npm")
    if npm is None:
        raise SystemExit("npm is needed to fetch the Codex CLI")
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
            f"{PACKAGE}@{VERSION}-linux-{arch()}",
        ],
        check=True,
    )
    found = binary()
    if found is None:
        raise SystemExit(f"{PACKAGE}@{VERSION}-linux-{arch()} installed no codex binary")
    return found


if __name__ == "__main__":
    if sys.argv[1:] != ["install"]:
        raise SystemExit("usage: python3 tests/helpers/codex_cli.py install")
    print(install())
