"""Logging set-up for the entry points (the library itself only has a NullHandler)."""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime

from .errors import scrub
from .text import escape_controls

#: the connection string of this process, whose password no log line may show
_conninfo: str | None = None

_STANDARD = set(logging.LogRecord("", 0, "", 0, "", None, None).__dict__) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message and any ``extra``
    fields (``action``, ``task_id``, ...). Passwords in DSNs are redacted."""

    def format(self, record: logging.LogRecord) -> str:
        out = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": scrub(record.getMessage(), _conninfo),
        }
        for key, value in record.__dict__.items():
            if key not in _STANDARD and not key.startswith("_"):
                out[key] = value
        if record.exc_info:
            out["exc"] = scrub(self.formatException(record.exc_info), _conninfo)
        return json.dumps(out, default=str, ensure_ascii=False)


class TextFormatter(logging.Formatter):
    """One line per record: control characters in the message (agent-written
    titles and errors reach it) are escaped, so no text can forge a line."""

    def format(self, record: logging.LogRecord) -> str:
        record = logging.makeLogRecord(
            {**record.__dict__, "msg": escape_controls(record.getMessage()), "args": None}
        )
        text = super().format(record)
        fields = {
            k: v for k, v in record.__dict__.items() if k not in _STANDARD and not k.startswith("_")
        }
        if fields:
            text += " " + " ".join(f"{k}={json.dumps(v, default=str)}" for k, v in fields.items())
        return scrub(text, _conninfo)


def level_of(name: str | None, default: str = "INFO") -> int:
    """A logging level from its name; the default for an unknown one."""
    value = logging.getLevelName((name or default).strip().upper())
    return value if isinstance(value, int) else int(logging.getLevelName(default))


def configure(level: str = "INFO", fmt: str = "text", conninfo: str | None = None) -> None:
    global _conninfo
    _conninfo = conninfo
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        JsonFormatter()
        if fmt == "json"
        else TextFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
    )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level_of(level))
    # APScheduler logs every run at INFO; ours are enough
    logging.getLogger("apscheduler").setLevel(logging.WARNING)
