"""One run of an agent's process: started in a group of its own, its output
passed through and read, and stopped (the whole group: SIGTERM, then SIGKILL
after the grace, by the clock) when the supervisor is asked to stop, loses
its lease, or the run stalls or reaches its cap. A guardian process, a
sibling of the agent, ends the group when the supervisor dies by any means,
SIGKILL included: no agent outlives its supervisor to work on a task that
was given to another.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import IO

from .hooklink import ALIVE_PREFIX
from .outcome import MAX_JSON_LINE, OutputReader, Report
from .sandbox import EngineLog

#: how often the supervisor looks at its agent (a stop, a stall, the cap)
TICK = 0.2
#: lines of output at most for a 126/127 exit to be the command's own
#: failure to run (a shell's "not found"), not a run's end
CANNOT_RUN_LINES = 3


@dataclass(frozen=True)
class Limits:
    """What ends a run besides its own end."""

    #: seconds after SIGTERM before SIGKILL
    grace: float = 10.0
    #: seconds with no line of output and no hook before a run is stalled (None: never)
    stall: float | None = None
    #: seconds a run may take at most (None: no cap)
    max_run: float | None = None


class Signs:
    """The running agent's last sign of life, for the supervisor's heartbeat
    to keep on its run (the status page shows it): its last line of output,
    or a hook it fired, and how many seconds ago."""

    def __init__(self) -> None:
        self.reader: OutputReader | None = None
        self.alive: str | None = None

    def last(self) -> tuple[str, float] | None:
        reader = self.reader
        if reader is None:
            return None
        said_ago = time.monotonic() - reader.last_at
        lines = [line for line in list(reader.lines)[-3:] if line.strip()]
        hooked_ago = float("inf")
        if self.alive is not None:
            with contextlib.suppress(OSError):
                hooked_ago = max(time.time() - os.stat(self.alive).st_mtime, 0.0)
        if hooked_ago < said_ago:
            return "a hook (a tool call)", hooked_ago
        return (lines[-1].strip() if lines else "started; nothing said yet"), said_ago


def run_agent(
    command: list[str],
    env: Mapping[str, str],
    *,
    stop: threading.Event,
    lost: threading.Event | None = None,
    limits: Limits | None = None,
    cwd: str | None = None,
    signs: Signs | None = None,
    engine_log: EngineLog | None = None,
) -> Report:
    """Run an agent until it exits; stop its whole process group once
    ``stop`` or ``lost`` is set, or when it stalls or runs past its cap
    (``Report.stopped_for``). Its hooks touch ``AFK_ALIVE_FILE`` (given in
    its environment here) as a sign of life. A command that cannot run at
    all is ``Report.cannot_start``. ``engine_log``: a sandbox engine's log is
    on its stderr, taken out there."""
    limits = limits or Limits()
    reader = OutputReader()
    alive = _alive_file()
    if signs is not None:
        signs.reader, signs.alive = reader, alive
    try:
        guardian = Guardian(limits.grace)
        try:
            proc = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env={**env, "AFK_ALIVE_FILE": alive},
                cwd=cwd,
                start_new_session=True,
            )
        except OSError as exc:
            guardian.release()
            report = reader.report(127)
            report.cannot_start = _cannot_start(command, cwd, exc)
            return report
        guardian.watch(proc.pid)
        try:
            status, stopped_for, after, signalled = _supervise(
                proc, reader, alive, stop, lost, limits, engine_log
            )
        finally:
            guardian.release()
    finally:
        if signs is not None:
            signs.alive = None
        with contextlib.suppress(OSError):
            os.unlink(alive)
    report = reader.report(status)
    report.stopped_for, report.stopped_after = stopped_for, after
    report.signalled = signalled
    if (
        stopped_for is None
        and status in (126, 127)
        and (_said_little(report) or _says_it_cannot_run(report))
    ):
        said = report.lines[-1].strip() if report.lines else f"exit {status}"
        report.cannot_start = f"the agent command {command[0]!r} cannot run: {said}"
    return report


def _supervise(
    proc: subprocess.Popen[bytes],
    reader: OutputReader,
    alive: str,
    stop: threading.Event,
    lost: threading.Event | None,
    limits: Limits,
    engine_log: EngineLog | None = None,
) -> tuple[int, str | None, float | None, bool]:
    """Wait for the agent, pumping its output; its exit status, why the
    supervisor stopped it itself (None: it ended, or was asked to stop), and
    whether it was signalled at all (an agent that ended by itself was not)."""
    pipes = [
        threading.Thread(
            target=_pump, args=(proc.stdout, sys.stdout.buffer, reader, "stdout"), daemon=True
        ),
        threading.Thread(
            target=_pump,
            args=(proc.stderr, sys.stderr.buffer, reader, "stderr", engine_log),
            daemon=True,
        ),
    ]
    for t in pipes:
        t.start()
    started = time.monotonic()

    def why_stop(now: float) -> str | None:
        if stop.is_set() or (lost is not None and lost.is_set()):
            return ""  # (asked to: not the supervisor's own reason)
        if limits.max_run is not None and now - started >= limits.max_run:
            return "timed_out"
        if limits.stall is not None and _silent_for(reader, alive, now) >= limits.stall:
            return "stalled"
        return None

    status, reason = _wait_stopping(proc, why_stop, limits.grace)
    stopped_for = reason or None
    after = {"timed_out": limits.max_run, "stalled": limits.stall}.get(reason or "")
    _signal_group(proc.pid, signal.SIGKILL)  # what it left behind in its group
    for t in pipes:
        t.join(5)
    return status, stopped_for, after, reason is not None


def _wait_stopping(
    proc: subprocess.Popen[bytes], why_stop: Callable[[float], str | None], grace: float
) -> tuple[int, str | None]:
    """Wait for ``proc``; once ``why_stop(now)`` names a reason, stop its
    whole group (SIGTERM, then SIGKILL after ``grace``, by the clock). Its
    exit status, and the reason (None: it ended by itself)."""
    kill_at, reason = 0.0, None
    while True:
        try:
            return proc.wait(timeout=TICK), reason
        except subprocess.TimeoutExpired:
            pass
        now = time.monotonic()
        if reason is not None:  # asked to stop: SIGKILL after the grace
            if now >= kill_at:
                _signal_group(proc.pid, signal.SIGKILL)
            continue
        reason = why_stop(now)
        if reason is not None:
            _signal_group(proc.pid, signal.SIGTERM)
            kill_at = now + grace


def run_check(
    command: list[str],
    cwd: str,
    env: Mapping[str, str],
    *,
    timeout: float,
    lost: threading.Event,
    grace: float,
    keep: int,
) -> tuple[int, str]:
    """A task's check (``--verify``, ``command`` its shell's argv), guarded
    as its run was: in a process group of its own that is stopped whole (SIGTERM, then
    SIGKILL after ``grace``) past ``timeout`` or once ``lost`` is set, and
    by a guardian if this process dies; only the last ``keep`` bytes of what
    it prints are held. Its exit status (124 when it was stopped) and that
    tail, decoded."""
    guardian = Guardian(grace)
    try:
        proc = subprocess.Popen(
            command,
            cwd=cwd,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    except OSError as exc:
        guardian.release()
        return 127, f"the check cannot run: {exc.strerror or exc}"
    guardian.watch(proc.pid)
    tail = bytearray()

    def read(out: IO[bytes]) -> None:
        take = getattr(out, "read1", None) or out.read  # (as it comes)
        while chunk := take(65536):
            tail.extend(chunk)
            del tail[:-keep]

    reader = threading.Thread(target=read, args=(proc.stdout,), daemon=True)
    reader.start()
    deadline = time.monotonic() + timeout

    def why_stop(now: float) -> str | None:
        if lost.is_set():
            return "(the check was stopped: the task's lease was lost)"
        if now >= deadline:
            return f"(the check was stopped after {timeout:g}s)"
        return None

    try:
        status, why = _wait_stopping(proc, why_stop, grace)
        _signal_group(proc.pid, signal.SIGKILL)  # what it left behind in its group
    finally:
        guardian.release()
    reader.join(5)
    said = bytes(tail).decode("utf-8", "replace")
    return (124, f"{said}\n{why}") if why else (status, said)


#: prctl's PR_SET_CHILD_SUBREAPER (Linux 3.4)
_PR_SET_CHILD_SUBREAPER = 36


def become_subreaper() -> bool:
    """Make this process the one an agent's orphans are handed to (not
    init): a process an agent started with `setsid` or `nohup` leaves its
    group, and outlived the run (P27). False where the system has no such
    thing; the group is still stopped as before."""
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


def sweep_orphans(grace: float) -> list[int]:
    """Stop what a run left behind outside its group: the processes handed
    to this process (a subreaper) since, SIGTERM then SIGKILL after
    ``grace``, and reaped. Called between runs, when this process has no
    child of its own left running. The pids it stopped: not those that had
    ended already (a zombie handed over, as the sandbox engine's own helpers
    are when its run ends: reaped, and not the run's doing)."""
    found = []
    for pid, state in _children(os.getpid()):
        if state == "Z":
            _reaped(pid)
        else:
            found.append(pid)
    for pid in found:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    left = found
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = [pid for pid in left if not _reaped(pid)]
    for pid in left:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)
    return found


def _children(parent: int) -> list[tuple[int, str]]:
    """The processes whose parent is ``parent``, with their state letter
    (``Z``: ended, not yet reaped), from /proc ([] without it)."""
    out = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2 :].split()
        if len(fields) > 1 and int(fields[1]) == parent:
            out.append((int(entry), fields[0].decode("ascii", "replace")))
    return out


def _reaped(pid: int) -> bool:
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return True
    return done == pid


def _silent_for(reader: OutputReader, alive: str, now: float) -> float:
    """Seconds since the agent's last sign of life: a line of output, or a
    hook that touched its alive file."""
    silent = now - reader.last_at
    try:
        hooked = time.time() - os.stat(alive).st_mtime
    except OSError:
        return silent
    return min(silent, max(hooked, 0.0))


#: a shell's last word on a command it could not run (its `$0` first, which
#: may be a whole prompt: `sh -c '... "$0"'`, P15)
CANNOT_RUN = re.compile(
    r"(?::|^) ?(?:command )?not found$|: Permission denied$|: No such file or directory$"
)


def _says_it_cannot_run(report: Report) -> bool:
    """Whether the run's last line is a shell's "not found" or "Permission
    denied" for its command, whatever came before it."""
    lines = [line.strip() for line in report.lines if line.strip()]
    return bool(lines) and report.session_id is None and bool(CANNOT_RUN.search(lines[-1]))


def _said_little(report: Report) -> bool:
    return (
        report.session_id is None
        and report.cost_usd is None
        and len([line for line in report.lines if line.strip()]) <= CANNOT_RUN_LINES
    )


def _cannot_start(command: list[str], cwd: str | None, exc: OSError) -> str:
    if cwd is not None and not os.path.isdir(cwd):
        return f"the agent's working directory {cwd} does not exist"
    return f"the agent command {command[0]!r} cannot run: {exc.strerror or exc}"


def _alive_file() -> str:
    """A file of this run that the agent's hooks touch (AFK_ALIVE_FILE)."""
    fd, path = tempfile.mkstemp(prefix=ALIVE_PREFIX)
    os.close(fd)
    return path


def _pump(
    source: IO[bytes] | None,
    sink: IO[bytes],
    reader: OutputReader,
    stream: str,
    engine_log: EngineLog | None = None,
) -> None:
    """Copy the agent's output through as it comes and read it line by line,
    until the agent closes it: an agent whose pipe is not drained blocks for
    the night. Any byte is a sign of life (a progress bar redraws one line
    and never ends it). No more than :data:`MAX_JSON_LINE` bytes of a line
    are held at a time; the rest of a longer line passes through unread. A
    sandbox engine's log (``engine_log``) is taken out first."""
    if source is None:
        return
    read = getattr(source, "read1", None) or source.read  # (as it comes, not a whole buffer)
    line = bytearray()
    skipping = False  # the rest of a line longer than MAX_JSON_LINE: not read
    while True:
        try:
            chunk = read(1 << 16)
        except (OSError, ValueError):
            break
        if not chunk:
            break
        if engine_log is not None:
            chunk = engine_log.take(chunk)
            if not chunk:
                continue
        reader.last_at = time.monotonic()
        try:
            sink.write(chunk)
            sink.flush()
        except (OSError, ValueError):
            pass  # our own output is gone (a closed pipe): keep reading the agent
        *ended, rest = chunk.split(b"\n")
        for piece in ended:  # the ends of lines
            if not skipping and not _hold(line, piece + b"\n", reader, stream):
                reader.feed(bytes(line), stream)  # (never raises)
            line.clear()
            skipping = False
        if not skipping:
            skipping = _hold(line, rest, reader, stream)
    if line:
        reader.feed(bytes(line), stream)


def _hold(line: bytearray, piece: bytes, reader: OutputReader, stream: str) -> bool:
    """Add ``piece`` to the line being read; a line grown past
    :data:`MAX_JSON_LINE` is read as text up to there and emptied (True: skip
    the rest of it)."""
    line += piece
    if len(line) <= MAX_JSON_LINE:
        return False
    reader.feed(bytes(line[: MAX_JSON_LINE + 1]), stream)
    line.clear()
    return True


def _signal_group(pgid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)


#: the guardian: it waits on a pipe whose other end only the supervisor
#: holds; a byte means the run is over, the end of the pipe without one means
#: the supervisor died (the kernel closes its end whatever killed it), and
#: the agent's group is stopped as a stop would stop it
GUARDIAN = """
import os, signal, sys, time
grace = float(sys.argv[1])
signal.signal(signal.SIGINT, signal.SIG_IGN)  # a terminal's Ctrl-C is the supervisor's
signal.signal(signal.SIGHUP, signal.SIG_IGN)
signal.signal(signal.SIGTERM, lambda *_: None)  # stopped with its supervisor: stop the group
def read(n):
    try:
        return os.read(0, n)
    except OSError:
        return b""
line = b""
while b"\\n" not in line:  # the group to guard, once the run has one
    got = read(32)
    if not got:
        sys.exit(0)  # no run began: nothing to guard
    line += got
given, _, said = line.partition(b"\\n")
pgid = int(given)
if said or read(1):
    sys.exit(0)
def signal_group(signum):
    try:
        os.killpg(pgid, signum)
    except ProcessLookupError:
        sys.exit(0)
signal_group(signal.SIGTERM)
deadline = time.monotonic() + grace
while time.monotonic() < deadline:
    time.sleep(0.1)
    signal_group(0)
signal_group(signal.SIGKILL)
"""


class Guardian:
    """Stops the process group it is told of (:meth:`watch`) if this
    process dies before :meth:`release`. It is started before the agent: an
    agent that kills its supervisor at once (a crash of its own making) finds
    it there already, told of its group as soon as the agent is."""

    def __init__(self, grace: float) -> None:
        read, self._write = os.pipe()
        try:
            self._proc: subprocess.Popen[bytes] | None = subprocess.Popen(
                [sys.executable, "-I", "-S", "-c", GUARDIAN, str(grace)],
                stdin=read,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,  # not in the agent's group, nor the terminal's
            )
        except OSError:
            self._proc = None  # no guardian: the run goes on, unguarded
        finally:
            os.close(read)

    def watch(self, pgid: int) -> None:
        """The group to stop should this process die: the run's."""
        with contextlib.suppress(OSError):
            os.write(self._write, f"{pgid}\n".encode())

    def release(self) -> None:
        """The run is over (its group stopped): the guardian leaves it be."""
        with contextlib.suppress(OSError):
            os.write(self._write, b"x")
        os.close(self._write)
        if self._proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._proc.wait(timeout=5)
