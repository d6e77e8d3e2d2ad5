"""The hook's local cache of its session's task: a small file per session
(and supervisor task) in the user's private hook folder, so that a PreToolUse
whose session held its task a moment ago needs no database. A verdict is
reused for at most :data:`CHECK_TTL` seconds (and never past the lease's
expiry, which :mod:`watchdog.agents.hooks` writes as its end)."""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from .hooklink import Untrusted, hook_folder, open_private

#: seconds a PreToolUse verdict is reused without asking the database
CHECK_TTL = 2.0


class SessionCache:
    """A small file per session (and supervisor task): which task the session
    holds, the last verdict on it, and how often the gate blocked.

    It is trusted only in a folder this user owns that no one else may write
    (a planted verdict would let a zombie through); otherwise the hook asks
    the database every time and says so."""

    def __init__(self, key: str, env: Mapping[str, str], say: Callable[[str], None]) -> None:
        folder = Path(hook_folder(env))
        self.data: dict[str, Any] = {}
        why = _private_folder(folder)
        self.usable = why is None
        self.path = folder / (
            hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:32] + ".json"
        )
        if why is not None:
            say(f"warning: {why}; the hook keeps no cache there")
            return
        try:
            data = json.loads(self.path.read_text("utf-8"))
            self.data = data if isinstance(data, dict) else {}
        except (OSError, ValueError):
            self.data = {}

    def save(self) -> None:
        if not self.usable:
            return
        tmp = self.path.with_name(f"{self.path.name}.{os.getpid()}")
        tmp.write_text(json.dumps(self.data), "utf-8")
        tmp.replace(self.path)

    def fresh(self) -> bool:
        """A verdict that the session still holds its task, read less than
        CHECK_TTL ago (a stored end further off than that was not written by
        a hook: it is not trusted)."""
        now = time.time()
        try:
            until = float(self.data.get("until", 0))
        except (TypeError, ValueError):
            return False
        return bool(
            self.data.get("lost") is None
            and self.data.get("task")
            and now < until <= now + CHECK_TTL
        )

    def forget(self) -> None:
        self.data = {}
        if self.usable:
            self.path.unlink(missing_ok=True)


def _private_folder(folder: Path) -> str | None:
    """Why ``folder`` (made now if need be) is not a real folder of this user
    that no one else can write to; None when it is."""
    try:
        folder.mkdir(mode=0o700, exist_ok=True)
        os.close(open_private(str(folder), os.getuid()))
    except Untrusted as exc:
        return str(exc)
    except OSError as exc:
        return f"{folder} cannot be used ({exc.strerror})"
    if folder.stat().st_uid != os.getuid():  # root's will do for a socket, not for a cache
        return f"{folder} is not a private folder of this user"
    return None
