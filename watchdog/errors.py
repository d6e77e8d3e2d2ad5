"""One base class; the CLI maps each kind to its exit status."""

from __future__ import annotations

import re


class AfkError(Exception):
    """An afk-watchdog error."""

    exit_code = 1

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message or (self.__doc__ or "").strip())


class BadInput(AfkError):
    """The request is not valid; nothing was changed."""

    exit_code = 2


class TaskNotFound(BadInput):
    """No task has that id."""


class NotRunning(BadInput):
    """The task is not running, so there is nothing to finish or fail."""


class LeaseLost(AfkError):
    """This worker no longer holds the task's lease; nothing was changed.

    The lease expired and was reclaimed, the task was paused, or another
    runner claimed it since. Stop working on it."""

    exit_code = 4
    #: what a command run by ``afk once`` printed before its record was refused
    stdout: bytes | None = None


class DatabaseError(AfkError):
    """The database could not be reached or refused the statement."""

    exit_code = 1


class SchemaMissing(DatabaseError):
    """The afk tables are not there: run `afk migrate` first."""


_PASSWORD = re.compile(r"(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)|(://[^:/@]*:)([^@]*)(@)", re.I)


def redact(conninfo: str) -> str:
    """The connection string with any password replaced by ``***``."""

    def hide(m: re.Match[str]) -> str:
        if m.group(1):
            return m.group(1) + "***"
        return m.group(3) + "***" + m.group(5)

    return _PASSWORD.sub(hide, conninfo)
