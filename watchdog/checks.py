"""The checks every write makes before it reaches the database: text that a
person typed or an agent wrote, ids, budgets, and JSON that PostgreSQL's
jsonb will take. Each refusal is a :class:`BadInput` of one line."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Mapping
from typing import Any

from .config import is_utf8
from .errors import BadInput

MAX_TEXT = 10_000  # characters of a title, an agent id or a key
MAX_ERROR = 100_000  # characters of last_error kept
MAX_ATTEMPTS = 1_000  # the largest max_attempts a task may have
MAX_TOKEN = 2**63 - 1  # a lease token is a positive bigint


def json_type(value: Any) -> str:
    """What a value is, in JSON's words (for messages: "null", not "NoneType")."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list | tuple):
        return "an array"
    return type(value).__name__


def check_text(what: str, value: Any) -> str:
    if not isinstance(value, str) or not value or value.isspace():
        raise BadInput(f"{what} must be a non-empty string")
    if "\x00" in value:
        raise BadInput(f"{what} must not contain a NUL character")
    if not value.isascii() and not is_utf8(value):
        raise BadInput(f"{what} is not valid UTF-8 (a lone surrogate)")
    if len(value) > MAX_TEXT:
        raise BadInput(f"{what} is longer than {MAX_TEXT} characters")
    return value


#: the largest budget a task may have, US dollars
MAX_BUDGET = 1_000_000


def check_token(value: Any, what: str = "the lease token") -> int:
    """A lease token: a whole number from 1 to 2^63-1, as an option, an
    environment variable or JSON gives it. Anything else cannot name a claim,
    so it is refused here, before a database is asked (which would answer
    with an error, not a verdict)."""
    if isinstance(value, bool):
        token = None
    elif isinstance(value, int):
        token = value
    else:
        text = str(value).strip()
        token = int(text) if text.isascii() and text.isdigit() and len(text) <= 19 else None
    if token is None or not 1 <= token <= MAX_TOKEN:
        shown = str(value) if len(str(value)) <= 24 else str(value)[:23] + "…"
        raise BadInput(f"{what} {shown!r} is not a lease token (a whole number from 1 to 2^63-1)")
    return token


def check_budget(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= MAX_BUDGET:
        raise BadInput(f"a budget must be a number of US dollars above 0, at most {MAX_BUDGET}")
    return float(value)


#: a control character (C0, or DEL)
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def check_id(what: str, value: Any) -> str:
    """An id people type and read (an agent, a runner, an account, a key): text
    as :func:`check_text`, with no control character (a newline, a tab) and
    no space at either end, which would make two ids that read the same."""
    text = check_text(what, value)
    if text != text.strip() or _CONTROL.search(text):
        raise BadInput(f"{what} must not hold control characters or spaces at either end")
    return text


#: json.dumps(value, ensure_ascii=False, allow_nan=False), without building
#: an encoder on every call
_encode_json = json.JSONEncoder(ensure_ascii=False, allow_nan=False).encode

#: a JSON escape of NUL (an odd run of backslashes before u0000)
_NUL_ESCAPE = re.compile(r"(?<!\\)(?:\\\\)*\\u0000")


def dumps_json(what: str, value: Any) -> str:
    """JSON text for the database: no NaN, no NUL (jsonb refuses both)."""
    try:
        text = _encode_json(value)
    except (TypeError, ValueError) as exc:
        raise BadInput(f"{what} is not JSON-serialisable: {exc}") from None
    except RecursionError:
        raise BadInput(f"{what} is nested too deeply") from None
    if "\\u0000" in text and _NUL_ESCAPE.search(text):
        raise BadInput(f"{what} must not contain a NUL character (\\u0000)")
    if not text.isascii() and not is_utf8(text):
        raise BadInput(f"{what} is not valid UTF-8 (a lone surrogate such as \\ud800)")
    return text


def check_json_size(what: str, value: Any, max_bytes: int) -> None:
    size = len(dumps_json(what, value).encode())
    if size > max_bytes:
        raise BadInput(f"{what} is {size} bytes, over the limit of {max_bytes}")


def parse_task_id(value: Any) -> uuid.UUID:
    if isinstance(value, uuid.UUID):
        return value
    try:
        return uuid.UUID(str(value).strip())
    except ValueError:
        raise BadInput(f"not a task id: {value!r}") from None


#: the fields of a task's workspace request (watchdog.workspaces.request)
WORKSPACE_FIELDS = ("repo", "base", "branch", "verify", "require_changes")


def check_workspace(value: Any) -> None:
    """The shape of a task's workspace request: a repository's absolute path,
    and optional text for base, branch and verify. (Whether the repository,
    the base and the branch are what git says is checked where git runs:
    watchdog.workspaces.request.)"""
    if not isinstance(value, Mapping):
        raise BadInput(f"workspace must be a JSON object, not {json_type(value)}")
    unknown = set(value) - set(WORKSPACE_FIELDS)
    if unknown:
        raise BadInput(f"workspace: unknown field(s) {sorted(unknown)}")
    repo = value.get("repo")
    if not isinstance(repo, str) or not repo.startswith("/"):
        raise BadInput("workspace: repo must be a repository's absolute path")
    for name in ("base", "branch", "verify"):
        if value.get(name) is not None:
            check_text(f"workspace {name}", value[name])
    if not isinstance(value.get("require_changes", False), bool):
        raise BadInput("workspace: require_changes must be true or false")


def check_lease(lease: Any) -> float:
    """A lease's length in seconds: from 1 second to 7 days."""
    if isinstance(lease, bool) or not isinstance(lease, int | float) or not 1 <= lease <= 7 * 86400:
        raise BadInput(f"lease must be from 1 second to 7 days, not {lease}")
    return float(lease)


def check_object(what: str, value: Any, max_bytes: int) -> dict[str, Any]:
    """A JSON object (a checkpoint patch) within ``max_bytes``."""
    if not isinstance(value, Mapping):
        raise BadInput(f"{what} must be a JSON object, not {json_type(value)}")
    obj: dict[str, Any] = dict(value)
    check_json_size(what, obj, max_bytes)
    return obj


#: a name a person types and afk shows everywhere: a label, a profile, an
#: account, a web login
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$")


def check_name(what: str, value: Any) -> str:
    """A name (a label a loop advertises or a task requires, a profile, an
    account, a web login): a word of letters, digits and ``_.:-``, 64 at most,
    with no space or control character: one rule, one message."""
    check_text(what, value)
    if not NAME.match(value):
        raise BadInput(
            f"{what} must be a word of letters, digits and _.:- (64 at most, starting with "
            f"a letter or a digit), with no space or control character: not {value[:80]!r}"
            + ("…" if len(value) > 80 else "")
        )
    return str(value)


def check_label(label: Any) -> str:
    """A label a loop advertises or a task requires (:func:`check_name`)."""
    return check_name("label", label)
