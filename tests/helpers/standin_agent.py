"""A stand-in for a coding agent run by a supervisor (``afk loop``): it says
and does what a script tells it, as Claude Code or Codex CLI would say it.

The script is a JSON Lines file (``STANDIN_SCRIPT``): each run takes the
first line left (under a lock), so a test writes the night in order. A run
with no line left succeeds. A line may hold:

- ``stdout`` / ``stderr``: lines to print (``{epoch+N}`` is replaced by the
  epoch N seconds from now, as Claude Code's usage-limit message carries it);
- ``result``: a JSON result object printed last on stdout (as
  ``--output-format json`` does);
- ``afk``: an ``afk`` command to run first, inside the task (e.g. ``fail``);
- ``sleep``: seconds to work (a stop is awaited here);
- ``exit``: the exit status (default 0).

Every run appends one line to ``STANDIN_LOG``: when it started, its argv and
its AFK_* environment, for the test to read.
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import time


def take_line(path: str) -> dict[str, object]:
    with open(path, "r+", encoding="utf-8") as script:
        fcntl.flock(script, fcntl.LOCK_EX)
        lines = [line for line in script.read().splitlines() if line.strip()]
        if not lines:
            return {}
        script.seek(0)
        script.truncate()
        script.write("".join(line + "\n" for line in lines[1:]))
        step: dict[str, object] = json.loads(lines[0])
        return step


def expand(text: str) -> str:
    while "{epoch+" in text:
        start = text.index("{epoch+")
        end = text.index("}", start)
        seconds = float(text[start + 7 : end])
        text = text[:start] + str(int(time.time() + seconds)) + text[end + 1 :]
    return text


def main() -> int:
    started = time.time()
    step = take_line(os.environ["STANDIN_SCRIPT"]) if os.environ.get("STANDIN_SCRIPT") else {}
    with open(os.environ["STANDIN_LOG"], "a", encoding="utf-8") as log:
        env = {
            k: v
            for k, v in os.environ.items()
            if k.startswith("AFK_")
            or k in ("TRACEPARENT", "TRACESTATE", "OTEL_RESOURCE_ATTRIBUTES")
        }
        log.write(
            json.dumps({"at": started, "pid": os.getpid(), "argv": sys.argv[1:], "env": env}) + "\n"
        )
    if step.get("afk"):
        afk = [sys.executable, "-m", "watchdog.cli", *step["afk"]]  # type: ignore[misc]
        subprocess.run(afk, check=False, stdout=subprocess.DEVNULL)
    time.sleep(float(step.get("sleep", 0)))  # type: ignore[arg-type]
    for line in step.get("stdout", []):  # type: ignore[attr-defined]
        print(expand(line), flush=True)
    for line in step.get("stderr", []):  # type: ignore[attr-defined]
        print(expand(line), file=sys.stderr, flush=True)
    if "result" in step:
        print(json.dumps(step["result"]), flush=True)
    return int(step.get("exit", 0))  # type: ignore[call-overload]


if __name__ == "__main__":
    sys.exit(main())
