"""Agent hooks: ``afk hook`` reads one hook payload on stdin and acts on its
``hook_event_name`` (the settings that run it, and the other harnesses' names
for its events, are :mod:`watchdog.agents.harnesses`).

Events and fields follow Claude Code's hooks reference
(https://code.claude.com/docs/en/hooks); Codex CLI's hooks
(https://developers.openai.com/codex/hooks) use the same payload and decision
shapes for the events they share. What each event does here:

- ``SessionStart`` (every source, ``compact`` included): the resume brief of
  the session's task as ``additionalContext``; with ``CLAUDE_ENV_FILE``, the
  session's runner id (and its own claim) exported to later Bash calls.
- ``PreToolUse``: denies the call once the session's task is no longer held
  under its token (a zombie stops at its next tool call). A verdict is cached
  for at most :data:`CHECK_TTL` seconds, and never past the lease's expiry.
- ``PostToolUse``: edited files go to ``checkpoint.files_touched``; the lease
  of a task the session claimed itself is refreshed.
- ``PreCompact``: the same refresh.
- ``PostCompact``: the compaction's ``compact_summary`` goes into the task's
  checkpoint, so the brief after it carries what the agent had in mind.
- ``Stop``: an end of turn, never a pause; with ``--gate``, blocks a session
  that still holds its own claim, honouring ``stop_hook_active``, at most
  :data:`GATE_CAP` times.
- ``SessionEnd``: pauses the task the session claimed itself (the attempt is
  given back), with the reason ``session ended: <reason>``.
- ``StopFailure`` (a turn ended by an API error; its output is ignored, so
  this is a side effect only): ``rate_limit`` parks the session's account
  (``AFK_ACCOUNT``, else ``default``) until the reset its message names, else
  for ``AFK_LIMIT_PROBE_SECONDS``; ``overloaded``/``server_error`` for the
  outage backoff; ``billing_error`` and ``authentication_failed`` until a
  person clears it. The same rules as ``afk loop`` (``outcome.py``).

"The session's task" is the supervisor's (``AFK_TASK_ID`` and
``AFK_TASK_TOKEN`` in the agent's environment), else the one whose runner is
the payload's ``session_id``. A hook never finishes, fails or pauses a
supervisor's task, and never extends its lease: the supervisor keeps that, so
a dead supervisor's task runs out and is reclaimed even while its orphaned
agent goes on calling tools.

A hook must never wedge the agent: whatever goes wrong (bad payload, database
down or slow, no server) it exits 0 within its timeout with one line on
stderr; the only refusal is a deliberate deny or block.
"""

from __future__ import annotations

import json
import os
import shlex
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .. import tracing
from ..checks import check_token
from ..errors import AfkError, BadInput, redact
from ..states import FINISHED
from ..text import one_line
from . import approvals, credential, zombie
from .harnesses import BY_EVENT, EVENTS, READERS
from .hooklink import MAX_PAYLOAD
from .sessioncache import CHECK_TTL, SessionCache
from .zombie import afk_words, zombie_may_run

if TYPE_CHECKING:
    from ..config import LoopSettings, QueueSettings, Settings
    from ..db import Database
    from ..queue import Queue


#: times the completion gate blocks one session's Stop
GATE_CAP = 3
#: entries kept in checkpoint.files_touched
MAX_FILES = 200
#: characters of a compaction's summary kept in the checkpoint
MAX_SUMMARY = 20_000
#: tools whose tool_input names a file they edit
EDIT_TOOLS = {
    "Edit": "file_path",
    "Write": "file_path",
    "MultiEdit": "file_path",
    "NotebookEdit": "notebook_path",
    # Gemini CLI's (https://geminicli.com/docs/tools)
    "write_file": "file_path",
    "replace": "file_path",
    # GitHub Copilot CLI's (https://docs.github.com/en/copilot/reference/
    # copilot-cli-reference/cli-hooks-reference#tool-names-for-hook-matching)
    "create": "path",
    "edit": "path",
}
#: tools whose tool_input.command is a shell command (Claude Code, Gemini CLI,
#: Cursor, Copilot CLI)
SHELL_TOOLS = approvals.SHELL_TOOLS


#: StopFailure's ``error`` values that say something about the account
#: (https://code.claude.com/docs/en/hooks#stopfailure), and what they are
ACCOUNT_ERRORS = {
    "rate_limit": "usage_limit",
    "overloaded": "outage",
    "server_error": "outage",
    "billing_error": "needs_human",
    "authentication_failed": "needs_human",
}


class Malformed(BadInput):
    """The hook payload is not usable; nothing was changed."""


#: tool calls whose start a session keeps for its execute_tool spans
MAX_TOOL_STARTS = 50

# -- the payload ------------------------------------------------------------


def parse_payload(raw: bytes) -> dict[str, Any]:
    """One JSON object, as read from stdin (:func:`hooklink.read_stdin`)."""
    if len(raw) > MAX_PAYLOAD:
        raise Malformed(f"the payload is larger than {MAX_PAYLOAD} bytes")
    if not raw.strip():
        raise Malformed("no payload on stdin")
    try:
        payload = json.loads(raw.decode("utf-8-sig"))  # (a BOM is no reason to refuse)
    except UnicodeDecodeError:
        raise Malformed("the payload is not UTF-8") from None
    except ValueError as exc:
        raise Malformed(f"the payload is not JSON ({exc})") from None
    if not isinstance(payload, dict):
        raise Malformed(f"the payload is a JSON {type(payload).__name__}, not an object")
    return payload


def _text(payload: dict[str, Any], key: str, limit: int = 256) -> str:
    value = payload.get(key)
    if not isinstance(value, str) or not value.strip():
        raise Malformed(f"the payload has no {key} string")
    if len(value) > limit or any(ord(c) < 32 or 0xD800 <= ord(c) <= 0xDFFF for c in value):
        raise Malformed(f"the payload's {key} is not a usable id")
    return value


@dataclass
class Context:
    """What one hook run knows: the event, the session, and the task."""

    event: str
    session: str
    payload: dict[str, Any]
    #: the supervisor's task from AFK_TASK_ID / AFK_TASK_TOKEN, if any
    supervised: tuple[uuid.UUID, int] | None
    gate: bool = False
    out: dict[str, Any] = field(default_factory=dict)
    #: why AFK_TASK_ID / AFK_TASK_TOKEN cannot be read, when they are set but
    #: unusable: such an agent's task cannot be checked, so its tools are denied
    invalid: str | None = None
    #: whose payload: one of HARNESSES
    harness: str = "claude"
    #: the hook process's environment (the service runs hooks for other processes)
    env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    #: warnings for stderr, one line each
    notes: list[str] = field(default_factory=list)

    def say(self, line: str) -> None:
        self.notes.append(f"afk hook: {line}")


def supervised_task(env: dict[str, str]) -> tuple[uuid.UUID, int] | None:
    task_id, token = credential.read(env)
    if not task_id and not token:
        return None
    try:
        return uuid.UUID(str(task_id)), check_token(token)
    except (ValueError, BadInput):
        raise BadInput(
            "AFK_TASK_ID / AFK_TASK_TOKEN in the environment are not a task id and a token"
        ) from None


# -- acting on one event ----------------------------------------------------------


@dataclass(frozen=True)
class Look:
    """The session's task as the database sees it now."""

    task_id: uuid.UUID
    token: int
    state: str
    current_token: int
    lease_left: float

    @property
    def held(self) -> bool:
        return self.state == "running" and self.current_token == self.token

    @property
    def finished_by_us(self) -> bool:
        return self.state in FINISHED and self.current_token == self.token

    def why_lost(self) -> str:
        from ..fence import lost_clause

        clause = f"it {lost_clause(self.state, self.current_token, self.token)}"
        if self.state == "running" and self.current_token == self.token:
            return f"{clause}: your supervisor is gone, and it will be reclaimed"
        return clause


class Hook:
    """One ``afk hook`` run against the database at ``conninfo``. The queue is
    opened on first use only: a PreToolUse answered from the cache never loads
    the driver."""

    def __init__(
        self,
        conninfo: str,
        settings: QueueSettings,
        ctx: Context,
        loop: LoopSettings | None = None,
        db: Database | None = None,
    ) -> None:
        from ..config import LoopSettings

        self.conninfo, self.settings, self.ctx = conninfo, settings, ctx
        self.loop = loop or LoopSettings()
        #: the service's connections, when it runs the hook (not closed here)
        self._shared = db
        self._db: Database | None = db
        self._queue: Queue | None = None
        key = f"{conninfo}|{ctx.session}"
        if ctx.supervised is not None:
            key += f"|{ctx.supervised[0]}|{ctx.supervised[1]}"
        self.cache = SessionCache(key, ctx.env, ctx.say)

    @property
    def db(self) -> Database:
        """The database, connected on first use (the tool-call events need only this)."""
        if self._db is None:
            from ..db import Database

            self._db = Database(
                self.conninfo,
                connect_timeout=2,
                statement_timeout=3,
                application_name="afk-hook",
                retry_for=2,
            )
        return self._db

    @property
    def q(self) -> Queue:
        """The queue API, for the session events (the brief, the pause)."""
        if self._queue is None:
            from ..queue import Queue

            self._queue = Queue(self.db, settings=self.settings)
        return self._queue

    def close(self) -> None:
        if self._db is not None and self._db is not self._shared:
            self._db.close()

    def look(self, files: list[str] | None = None, renew: bool | None = None) -> Look | None:
        """One round trip: touch the session's task (fenced) and read it."""
        task_id: uuid.UUID | None
        token: int | None
        if self.ctx.supervised is not None:
            task_id, token = self.ctx.supervised
        elif self.cache.data.get("task") and not self.cache.data.get("lost"):
            task_id, token = uuid.UUID(self.cache.data["task"]), int(self.cache.data["token"])
        else:
            task_id, token = None, None
        row = self.q.touch_session(
            task_id,
            token,
            self.ctx.session,
            renew=self.ctx.supervised is None if renew is None else renew,
            files=files or [],
            max_files=MAX_FILES,
        )
        if row is None:
            if self.ctx.supervised is not None:
                self.ctx.say(
                    f"warning: the supervised task {task_id} (AFK_TASK_ID) is not in "
                    "this hook's database: were the hooks installed with the supervisor's "
                    "--config or --dsn? Nothing was checked"
                )
            return None
        found = Look(
            row["id"],
            row["token"],
            row["cur_state"],
            row["cur_token"],
            float(row["lease_left"] if row["lease_left"] is not None else -1),
        )
        if self.ctx.supervised is None and self.cache.data.get("task") != str(found.task_id):
            self.cache.data.update({"task": str(found.task_id), "token": found.token, "lost": None})
        return found

    def verdict(self, found: Look | None) -> str | None:
        """None while the session may go on; else why it must stop."""
        if found is None:
            return None
        if found.held and (found.lease_left > 0 or self.ctx.supervised is None):
            return None
        if found.finished_by_us and self.ctx.supervised is None:
            return None  # the session finished its own claim: it may claim the next
        return (
            f"afk: task {found.task_id} is no longer yours: {found.why_lost()}. "
            "Stop working on it now: do not edit files, run commands or post anything "
            f"for it; end your turn. (Still allowed: {zombie.may_text()}.)"
        )

    def check(self, files: list[str] | None = None) -> str | None:
        """Touch and judge the session's task; remember the verdict. A session
        whose own claim was lost stays stopped until it holds a new claim."""
        found = self.look(files)
        if found is None:
            return self.cache.data.get("lost") if self.ctx.supervised is None else None
        reason = self.verdict(found)
        self.remember(found, reason)
        return reason

    def remember(self, found: Look | None, reason: str | None) -> None:
        if found is None:
            return
        if self.ctx.supervised is None and found.finished_by_us:
            self.cache.forget()
            return
        ttl = min(CHECK_TTL, found.lease_left - 0.5) if reason is None else 0
        self.cache.data.update(
            {
                "task": str(found.task_id),
                "token": found.token,
                "lost": reason,
                "until": time.time() + max(ttl, 0),
            }
        )
        self.cache.save()

    # -- events ---------------------------------------------------------

    def session_start(self) -> None:
        found = self.look(renew=False)
        try:
            self._brief(found)  # the brief first: the export below is secondary
            self._briefed()
        finally:
            self._export(found)

    def _briefed(self) -> None:
        """Remember that the session has its brief (Gemini's first turn then
        adds none)."""
        if self.ctx.out and not self.cache.data.get("briefed"):
            self.cache.data["briefed"] = True
            self.cache.save()

    def _export(self, found: Look | None) -> None:
        """The session's runner id (and its own claim) for its later Bash calls."""
        env_file = self.ctx.env.get("CLAUDE_ENV_FILE")
        if not env_file or self.ctx.supervised is not None:
            return
        lines = [f"export {credential.RUNNER}={shlex.quote(self.ctx.session)}"]
        if found is not None and found.held:
            written = credential.written(found.task_id, found.token)
            lines += [f"export {name}={value}" for name, value in written.items()]
        try:
            with open(env_file, "a", encoding="utf-8") as out:
                out.write("\n".join(lines) + "\n")
        except OSError as exc:
            self.ctx.say(
                f"warning: cannot write CLAUDE_ENV_FILE ({exc.strerror}); "
                "AFK_RUNNER_ID was not exported"
            )

    def _brief(self, found: Look | None, compacted: bool = False) -> None:
        if found is None:
            return
        reason = self.verdict(found)
        self.remember(found, reason)
        from .brief import resume_brief

        source = self.ctx.payload.get("source")
        head = ["# afk: the task this session works on"]
        if source == "compact" or compacted:
            head.append("(Your context was just compacted: this is where the task stands.)")
        if reason is not None:
            head.append(reason)
        elif self.ctx.supervised is not None:
            head.append(
                f"Task id {found.task_id}, token {found.token} (also in AFK_TASK_ID "
                "and AFK_TASK_TOKEN). Record progress with `afk checkpoint --patch "
                '\'{"step": "..."}\'` and run outside effects with `afk once --name '
                "NAME -- COMMAND`. Exit when the task is done: your supervisor "
                "finishes it. If it cannot be done, run `afk fail --error '...'`."
            )
        else:
            head.append(
                f"You claimed task {found.task_id} with token {found.token}. Record "
                "progress with `afk checkpoint`, and finish it with `afk done` (or "
                "`afk fail --error '...'`)."
            )
        brief = resume_brief(self.q, str(found.task_id))
        self.ctx.out = {
            "hookSpecificOutput": {
                "hookEventName": self.ctx.event,
                "additionalContext": "\n".join(head) + "\n\n" + brief,
            }
        }

    def pre_tool_use(self) -> None:
        try:
            self._pre_tool_use()
        finally:
            self.trace_tool(denied=bool(self.ctx.out))

    def _pre_tool_use(self) -> None:
        rule = self.rule_for_call()
        if rule is not None and not self._is_afk_command():  # (afk's own: never asked about)
            self.ask_a_person(rule)
            return
        if self.cache.fresh():
            return  # held a moment ago, and the lease has not run out since
        reason = self.check()
        if reason is not None and not self._is_afk_command():
            self.ctx.out = {
                "hookSpecificOutput": {
                    "hookEventName": "PreToolUse",
                    "permissionDecision": "deny",
                    "permissionDecisionReason": reason,
                }
            }

    def rule_for_call(self) -> str | None:
        """The --ask-for rule (AFK_ASK_FOR, as afk loop gives a run) that
        names this call, for a supervised run; None for any other call."""
        if self.ctx.supervised is None:
            return None
        rules, _, _ = approvals.run_approvals(self.ctx.env)
        payload = self.ctx.payload
        rule = approvals.first_match(
            rules, str(payload.get("tool_name") or ""), payload.get("tool_input")
        )
        return rule.text if rule is not None else None

    def ask_a_person(self, rule: str) -> None:
        """A call that needs a person (issue 43): deferred while its request
        waits (denied, with a line saying so, where the harness cannot
        defer), let through once when a person approved this very call,
        refused with their note when they denied it."""
        decision, reason = self.decided(rule, defer=READERS[self.ctx.harness].defers)
        self.ctx.out = {
            "hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "permissionDecision": decision,
                "permissionDecisionReason": reason,
            }
        }

    def permission_request(self) -> None:
        """Claude Code would ask a person about a call its settings do not
        allow, and in -p mode it fires PermissionRequest before it denies it
        (https://code.claude.com/docs/en/hooks#permissionrequest). In a
        supervised run no one is at the terminal: the call becomes an
        approval request like one an --ask-for rule names (the task then
        waits for it), and the same call, when it comes again after a person
        approved it, is allowed once. Outside a run, or for afk's own
        commands, the harness asks as it would."""
        if self.ctx.supervised is None or self._is_afk_command():
            return
        decision, reason = self.decided(approvals.ASKED, defer=False)
        said: dict[str, Any] = {"behavior": "allow" if decision == "allow" else "deny"}
        if decision != "allow":
            said["message"] = reason
        self.ctx.out = {
            "hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": said}
        }

    def decided(self, rule: str, *, defer: bool) -> tuple[str, str]:
        """What the call's approval request says, made now if there is none
        (see ``approval_for_call`` in people.sql): allow, deny or defer, and why."""
        assert self.ctx.supervised is not None
        task_id, token = self.ctx.supervised
        payload = self.ctx.payload
        tool, given = str(payload.get("tool_name") or ""), payload.get("tool_input")
        from ..config import approval_ttl

        _, given_ttl, on_timeout = approvals.run_approvals(self.ctx.env)
        ttl = approval_ttl(given_ttl)  # (the loop's bounds, and its default)
        transcript = payload.get("transcript_path")
        row = self.q.approval_for_call(
            task_id,
            token,
            harness=self.ctx.harness,
            session=self.ctx.session,
            transcript=transcript if isinstance(transcript, str) else None,
            tool=tool,
            tool_input=given,
            call_hash=approvals.call_hash(tool, given),
            rule=rule,
            ttl_seconds=ttl,
            on_timeout=on_timeout,
        )
        if row["action"] == "lost":
            reason = self.check()  # (nothing held, nothing known: the fence says no)
            return (
                "deny",
                reason or f"afk: task {task_id} is no longer this run's: stop working on it",
            )
        return approvals.answer(row, rule, defer=defer)

    def trace_tool(self, *, denied: bool = False, ended: bool = False) -> None:
        """``execute_tool <tool>`` spans, under the session's span (its
        TRACEPARENT, which afk loop gives the agent), paired by tool_use_id:
        PreToolUse keeps the start, PostToolUse ends it; a deny is an event
        on a span that ends at once. None when traces are off, or when the
        agent exports its own (CLAUDE_CODE_ENABLE_TELEMETRY=1)."""
        parent = self.ctx.env.get("TRACEPARENT")
        if not parent or not tracing.enabled() or self._own_telemetry():
            return
        now = time.time_ns()
        key = str(self.ctx.payload.get("tool_use_id") or "")
        starts: dict[str, int] = self.cache.data.setdefault("tool_starts", {})
        if not ended and not denied:
            starts[key] = now
            while len(starts) > MAX_TOOL_STARTS:
                starts.pop(next(iter(starts)))
            self.cache.save()
            return
        start = starts.pop(key, now)
        self.cache.save()
        # the run's own secrets, in whatever shape the tool's input has them
        own = self.ctx.supervised[1] if self.ctx.supervised is not None else None
        tracing.keep_out(
            own, self.ctx.env.get("AFK_TASK_TOKEN"), self.ctx.env.get("AFK_HOOK_TOKEN")
        )
        tool = str(self.ctx.payload.get("tool_name") or "tool")
        given = self.ctx.payload.get("tool_input")
        gist = ""
        if isinstance(given, dict):
            gist = str(next((given[k] for k in ("command", "file_path", "path") if k in given), ""))
        tracing.record(
            f"execute_tool {tool}",
            start,
            now,
            parent=parent,
            attributes={
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": tool,
                "gen_ai.tool.call.id": key or None,
                # a bounded, scrubbed summary: never the whole input (scrubbed
                # before it is cut, so that no secret is cut past its mask)
                "afk.tool.summary": one_line(tracing.scrubbed(gist), 100) if gist else None,
            },
            events=["deny"] if denied else [],
        )

    def _own_telemetry(self) -> bool:
        return self.ctx.env.get("CLAUDE_CODE_ENABLE_TELEMETRY", "").strip() in ("1", "true")

    def _is_afk_command(self) -> bool:
        """Whether the tool call is an afk command that a zombie may still run
        (:data:`~watchdog.agents.zombie.ZOMBIE_MAY`)."""
        tool_input = self.ctx.payload.get("tool_input")
        if self.ctx.payload.get("tool_name") not in SHELL_TOOLS or not isinstance(tool_input, dict):
            return False
        words = afk_words(tool_input.get("command"), self.ctx.env.get("PATH"))
        own = None
        if self.ctx.supervised is not None:
            own = (str(self.ctx.supervised[0]), self.ctx.supervised[1])
        return bool(words) and zombie_may_run(words, own)

    def post_tool_use(self) -> None:
        self.trace_tool(ended=True)
        files = self._edited_files()
        rebrief = READERS[self.ctx.harness].rebrief_at == "PostToolUse"
        if rebrief and self.cache.data.get("compressed"):
            self.before_agent()
            if self.ctx.out:
                return
        if not files and self.ctx.supervised is not None and self.cache.fresh():
            # nothing to record, no lease to renew (the supervisor keeps it), and
            # held a moment ago: no database, as for PreToolUse
            return
        reason = self.check(files)
        if reason is not None:
            self.ctx.out = {
                "hookSpecificOutput": {"hookEventName": "PostToolUse", "additionalContext": reason}
            }

    def _edited_files(self) -> list[str]:
        key = EDIT_TOOLS.get(str(self.ctx.payload.get("tool_name")))
        tool_input = self.ctx.payload.get("tool_input")
        if key is None or not isinstance(tool_input, dict):
            return []
        path = tool_input.get(key)
        if not isinstance(path, str) or not path or len(path) > 4096 or "\x00" in path:
            return []
        return [path]

    def pre_compact(self) -> None:
        self.check()
        if READERS[self.ctx.harness].rebrief_at:
            # no compact source at SessionStart: the brief comes back at the
            # next BeforeAgent (Gemini) or postToolUse (Cursor)
            self.cache.data["compressed"] = True
            self.cache.save()

    def before_agent(self) -> None:
        """Gemini's turn start (and Cursor's first tool call after a
        compaction): after a compression, the brief again; and in a session
        with no brief yet, the brief (headless ``gemini -p``, 0.61.0, fires
        no SessionStart)."""
        compressed = bool(self.cache.data.get("compressed"))
        headless = READERS[self.ctx.harness].no_headless_start
        first = headless and not self.cache.data.get("briefed")
        if not compressed and not first:
            return
        self.cache.data["compressed"] = False
        self.cache.save()
        self._brief(self.look(renew=False), compacted=compressed)
        self._briefed()

    def post_compact(self) -> None:
        """The summary a compaction left goes into the task's checkpoint, so
        the brief after it (SessionStart, source compact) carries it."""
        summary = self.ctx.payload.get("compact_summary")
        if not isinstance(summary, str) or not summary.strip():
            return
        found = self.look(renew=False)
        if found is None or not found.held:
            return
        try:
            self.q.checkpoint(
                found.task_id, {"compact_summary": summary[:MAX_SUMMARY]}, token=found.token
            )
        except BadInput as exc:  # over the checkpoint's cap: the brief goes without it
            self.ctx.say(f"warning: the compaction summary was not kept: {exc}")

    def stop(self) -> None:
        """An end of turn: nothing is paused. The gate keeps a session that
        still holds its own claim working on it, a bounded number of times."""
        if not self.ctx.gate or self.ctx.supervised is not None:
            return
        if self.ctx.payload.get("stop_hook_active") is True:
            return
        found = self.look()
        if found is None or not found.held:
            self.remember(found, self.verdict(found))
            return
        blocks = int(self.cache.data.get("gate_blocks", 0))
        if blocks >= GATE_CAP:
            return
        self.cache.data["gate_blocks"] = blocks + 1
        self.remember(found, None)
        self.ctx.out = {
            "decision": "block",
            "reason": (
                f"afk: task {found.task_id} is still running under your claim. Finish it with "
                f"`afk done {found.task_id} --token {found.token}`, or give up with `afk fail "
                f"{found.task_id} --token {found.token} --error '...'` saying why."
            ),
        }

    def session_end(self) -> None:
        """Pause the session's own claim; a supervisor's task is not touched."""
        self.cache.forget()
        if self.ctx.supervised is not None:
            return
        reason = self.ctx.payload.get("reason")
        reason = reason if isinstance(reason, str) and reason.isprintable() else "other"
        paused = self.q.pause(
            None, runner=self.ctx.session, reason=f"session ended: {reason[:100]}"
        )
        if paused:
            self.ctx.say(f"paused {len(paused)} task(s) of session {self.ctx.session}")

    def stop_failure(self) -> None:
        """A turn the API ended: park the account as the loop would
        (:func:`watchdog.agents.decide.decide`: the same rules, the client's own
        retries counted as the outage breaker's worth)."""
        kind = ACCOUNT_ERRORS.get(str(self.ctx.payload.get("error")))
        if kind is None:
            return
        from ..text import clean
        from .accounts import DEFAULT_ACCOUNT, Accounts
        from .decide import RunEnd, decide, rules_of
        from .outcome import Outcome, compile_patterns, limit_reset, reading_zone

        account = self.ctx.env.get("AFK_ACCOUNT") or DEFAULT_ACCOUNT
        said = [
            v
            for v in (
                self.ctx.payload.get("last_assistant_message"),
                self.ctx.payload.get("error_details"),
            )
            if isinstance(v, str) and v.strip()
        ]
        said = [clean(v) for v in said]
        reason = one_line(said[0] if said else str(self.ctx.payload.get("error")))
        accounts = Accounts(self.db)
        now = accounts.clock()
        rules = rules_of(self.loop, self.settings.backoff_base_seconds)
        reset = None
        if kind == "usage_limit":
            limits = compile_patterns(self.loop.limit_patterns)
            reset = limit_reset(said, now, reading_zone(self.ctx.env), limits)
        decision = decide(
            Outcome(kind), rules, now, RunEnd(reset=reset, outages_in_a_row=rules.outage_breaker)
        )
        if decision.park is None:
            return
        parking = accounts.park(
            account,
            decision.park,
            f"{self.ctx.payload.get('error')}: {reason}",
            decision.park_until,
        )
        until_text = parking.limited_until.isoformat() if parking.limited_until else None
        self.ctx.say(f"account {account!r} parked until {until_text or 'a person clears it'}")

    def run(self) -> None:
        if self.ctx.invalid is not None:
            # a supervised agent whose task cannot be checked fails closed
            self.ctx.say(f"warning: {self.ctx.invalid}")
            if self.ctx.event == "PreToolUse" and not self._is_afk_command():
                self.ctx.out = {
                    "hookSpecificOutput": {
                        "hookEventName": "PreToolUse",
                        "permissionDecision": "deny",
                        "permissionDecisionReason": (
                            f"afk: {self.ctx.invalid}: your task cannot be checked, so no "
                            "tool may run; your supervisor must give a task id and token"
                        ),
                    }
                }
            return
        handler: Callable[[], None] = getattr(self, BY_EVENT[self.ctx.event].handler)
        handler()


def detached(ctx: Context) -> bool:
    """A StopFailure about the account: its work goes on after the hook exits
    (the agent ignores its output and, in ``-p`` mode, ends it as it exits)."""
    return ctx.event == "StopFailure" and str(ctx.payload.get("error")) in ACCOUNT_ERRORS


def context(
    payload: dict[str, Any],
    gate: bool,
    alias: str | None,
    harness: str = "claude",
    env: Mapping[str, str] | None = None,
) -> Context | None:
    """The context of a payload in the hook process's environment ``env``;
    None for an event we do not handle. Another harness's event is mapped to
    ours."""
    env = dict(os.environ if env is None else env)
    event = payload.get("hook_event_name")
    if event is None and alias == "stop":
        event = "Stop"  # settings written by an old `afk hooks` sent no event name
    if not isinstance(event, str):
        raise Malformed("the payload has no hook_event_name string")
    reader = READERS[harness]
    payload, event = reader.payload_in(payload), reader.ours(event)
    if event not in EVENTS:
        return None
    session = _text(payload, "session_id")
    try:
        supervised = supervised_task(env)
    except BadInput as exc:
        return Context(
            event, session, payload, None, gate, invalid=str(exc), harness=harness, env=env
        )
    return Context(event, session, payload, supervised, gate, harness=harness, env=env)


@dataclass
class Reply:
    """What one hook run says: ``said`` on stdout (in its harness's words;
    empty where the harness would not read it), ``lines`` on stderr."""

    said: dict[str, Any] = field(default_factory=dict)
    lines: list[str] = field(default_factory=list)
    #: the event and the session it answered (None: the payload was not read)
    event: str | None = None
    session: str | None = None

    def json(self) -> str:
        """``said`` as the harness reads it (an HTTP body): nothing when empty."""
        return json.dumps(self.said, ensure_ascii=False) if self.said else ""

    def stdout(self) -> str:
        return self.json() + "\n" if self.said else ""

    def stderr(self) -> str:
        return "".join(f"{line}\n" for line in self.lines)


#: where a hook is answered: the DSN, the settings, and a database to reuse
#: (the service's; None opens one), or the reply already (no database)
Where = tuple[str, "Settings", "Database | None"]


def run_hook(
    payload: bytes,
    *,
    gate: bool,
    alias: str | None,
    harness: str,
    env: Mapping[str, str],
    where: Callable[[Context], Where | Reply],
) -> Reply:
    """Run one hook, the same for the command line, the service's socket and
    its HTTP hooks: the payload read (a malformed one is a warning and
    changes nothing; an event afk does not handle is ignored), then ``where``
    says which database answers it, then the hook runs there. Never raises
    for what a hook may meet: a hook must never fail the agent, nor print a
    secret."""
    try:
        ctx = context(parse_payload(payload), gate, alias, harness, env=env)
    except AfkError as exc:
        return Reply(lines=[f"afk hook: warning: {exc}; nothing was changed"])
    if ctx is None:
        return Reply(lines=["afk hook: ignored: not an event afk handles"])
    found = where(ctx)
    if isinstance(found, Reply):
        return found
    conninfo, settings, db = found
    said: dict[str, Any] = {}
    try:
        hook = Hook(conninfo, settings.queue, ctx, settings.loop, db=db)
        try:
            hook.run()
        finally:
            hook.close()
        said = answer(ctx) if ctx.out else {}
    except AfkError as exc:
        ctx.say(f"warning: {exc}; nothing was changed")
    except Exception as exc:
        ctx.say(f"warning: {type(exc).__name__}: {redact(str(exc))}; nothing was changed")
    return Reply(said, ctx.notes, ctx.event, ctx.session)


def answer(ctx: Context) -> dict[str, Any]:
    """What the hook prints, in its harness's words (its record's adapter)."""
    return READERS[ctx.harness].answer_out(ctx.out) if ctx.out else ctx.out
