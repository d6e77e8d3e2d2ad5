"""Typed settings, read from ``AFK_*`` environment variables and checked as a whole."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, fields

from .errors import BadInput


@dataclass(frozen=True)
class QueueSettings:
    """How the queue behaves. Each field has an ``AFK_<NAME>`` env var."""

    #: default lease length of a claim, in seconds (refreshed by each checkpoint)
    lease_seconds: int = 600
    #: first retry delay after a reported failure; doubles each attempt
    backoff_base_seconds: float = 30.0
    #: the longest retry delay
    backoff_cap_seconds: float = 3600.0
    #: max_attempts of a task enqueued without one
    max_attempts: int = 5
    #: the largest spec, checkpoint patch or merged checkpoint, in bytes of JSON
    max_json_bytes: int = 1024 * 1024
    #: rows per reclaim statement
    reclaim_batch: int = 500

    def __post_init__(self) -> None:
        problems = []
        if self.lease_seconds <= 0:
            problems.append("lease_seconds must be positive")
        if self.backoff_base_seconds < 0:
            problems.append("backoff_base_seconds must not be negative")
        if self.backoff_cap_seconds < self.backoff_base_seconds:
            problems.append("backoff_cap_seconds must not be less than backoff_base_seconds")
        if self.max_attempts < 1:
            problems.append("max_attempts must be at least 1")
        if self.max_json_bytes < 2:
            problems.append("max_json_bytes must be at least 2")
        if self.reclaim_batch < 1:
            problems.append("reclaim_batch must be at least 1")
        if problems:
            raise BadInput("invalid settings: " + "; ".join(problems))

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> QueueSettings:
        env = os.environ if env is None else env
        values: dict[str, int | float] = {}
        for f in fields(cls):
            name = "AFK_" + f.name.upper()
            raw = env.get(name)
            if raw is None or raw.strip() == "":
                continue
            kind = int if f.type in ("int", int) else float
            try:
                values[f.name] = kind(raw)
            except ValueError:
                raise BadInput(f"{name}={raw!r} is not a valid {kind.__name__}") from None
        return cls(**values)  # type: ignore[arg-type]


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|sec|m|min|h|d|w)?\s*$", re.I)
_UNIT = {"s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_duration(text: str) -> float:
    """``90``, ``90s``, ``15m``, ``2h``, ``7d`` -> seconds."""
    match = _DURATION.match(text)
    if not match:
        raise BadInput(f"not a duration: {text!r} (use e.g. 90s, 15m, 2h, 7d)")
    return float(match.group(1)) * _UNIT[(match.group(2) or "s").lower()]
