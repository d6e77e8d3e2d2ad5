"""A stand-in for ``claude -p PROMPT`` that runs the hooks the way Claude Code
does (https://code.claude.com/docs/en/hooks), so the examples and the hooks are
tested end to end without a model.

It reads its settings as Claude Code does: ``--settings JSON`` on its
command line (what ``afk loop`` gives it), the user's ``~/.claude/settings.json``,
the project's ``.claude/settings.json`` and ``.claude/settings.local.json``
(as ``afk hooks claude --install`` wrote them), a hook whose command is the
same as one already read run once. For each event it runs every matching hook:
a command through the shell with the JSON payload on stdin and the hook's
timeout, an HTTP hook as a POST of the payload with its headers (``$VAR``
filled from the environment for the variables its ``allowedEnvVars`` lists):

- ``SessionStart`` (source ``startup``, and ``compact`` after a compaction):
  stdout, or ``hookSpecificOutput.additionalContext``, becomes context;
  ``CLAUDE_ENV_FILE`` is given, and what the hooks write to it is sourced
  before every Bash tool call.
- ``PreToolUse``: exit 2 (stderr the reason) or ``permissionDecision: deny``
  blocks the call, which then does not run.
- ``PostToolUse`` after each call that ran; ``PreCompact`` before a compaction.
- ``Stop`` at the end of the turn, with ``stop_hook_active``; a ``decision:
  block`` makes the agent go on (the plan's ``on_stop_block`` actions), at
  most 8 blocks in a row, as Claude Code caps them.
- ``SessionEnd`` (reason ``other``) when it exits normally. A signal ends it
  at once with 128+N and no hooks, as an interrupt does.

What it does is a plan: ``STANDIN_PLAN`` names a JSON file mapping the
prompt's first line, or else the task title in it (up to a ':'), to a list of
actions:
``{"bash": CMD}``, ``{"write": PATH, "content": TEXT}``, ``{"edit": PATH}``,
``{"think": SECONDS}`` (no tool calls), ``{"wait_for": PATH}`` (no tool calls),
``{"compact": true}``, ``{"exit": CODE}`` (a crash: no more hooks),
``{"busy": SECONDS}`` (a ``sleep 0.3`` Bash call after another, saying
nothing), ``{"say": TEXT}`` (a line of its output), ``{"ends": TEXT,
"api_error_status": N}`` (the session ends with that error, as an API error
or a usage limit ends it: exit 1). ``{"runs": [PLAN, ...]}`` gives each run
of the task its own plan (the last one again after them). With
``--output-format json`` nothing is printed until the result object at the
end, as Claude Code does. Every event, decision and tool call is appended as
a JSON line to ``STANDIN_LOG``.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any


class Agent:
    def __init__(self, prompt: str, argv: list[str]) -> None:
        self.project = Path(os.environ.get("CLAUDE_PROJECT_DIR") or os.getcwd())
        self.settings = read_settings(argv, self.project)
        self.json_output = "--output-format" in argv and "json" in argv
        self.said: list[str] = []
        self.session = str(uuid.uuid4())
        self.title = prompt.splitlines()[0].split(":")[0].strip() if prompt else ""
        plan = json.loads(Path(os.environ["STANDIN_PLAN"]).read_text())
        first_line = prompt.splitlines()[0].strip() if prompt else ""
        self.plan: dict[str, Any] = plan.get(first_line, plan.get(self.title, {}))
        if isinstance(self.plan, list):
            self.plan = {"actions": self.plan}
        self.env_file = Path(tempfile.mkstemp(prefix="claude-env-")[1])
        self.log_path = os.environ["STANDIN_LOG"]
        if "runs" in self.plan:
            runs = self.plan["runs"]
            self.plan = runs[min(self.runs_before(), len(runs) - 1)]
            if isinstance(self.plan, list):
                self.plan = {"actions": self.plan}
        self.context: list[str] = []

    def runs_before(self) -> int:
        """The runs of this task before this one (their "start" lines)."""
        with open(self.log_path, "a+") as log:
            log.seek(0)
            lines = [json.loads(line) for line in log if line.strip()]
        return sum(1 for e in lines if e.get("event") == "start" and e["title"] == self.title)

    def say(self, text: str) -> None:
        self.said.append(text)
        if not self.json_output:
            print(text, flush=True)

    def end(self, error: str | None = None, status: int | None = None) -> int:
        """The session's last word: its result (json), then its exit status."""
        if self.json_output:
            result: dict[str, Any] = {
                "type": "result",
                "subtype": "success" if error is None else "error_during_execution",
                "is_error": error is not None,
                "result": error if error is not None else "\n".join(self.said) or "done",
                "session_id": self.session,
                "num_turns": 1,
                "total_cost_usd": 0.01,
            }
            if status is not None:
                result["api_error_status"] = status
            print(json.dumps(result), flush=True)
        elif error is not None:
            print(error, flush=True)
        return 0 if error is None else 1

    def log(self, **entry: Any) -> None:
        entry = {
            "session": self.session,
            "title": self.title,
            "pid": os.getpid(),
            "at": time.time(),
            **entry,
        }
        with open(self.log_path, "a") as out:
            out.write(json.dumps(entry) + "\n")

    # -- hooks ------------------------------------------------------------

    def hooks(self, event: str, match: str | None, **fields: Any) -> list[dict[str, Any]]:
        """Run every hook of ``event`` whose matcher matches; their results."""
        payload = {
            "session_id": self.session,
            "transcript_path": f"/tmp/{self.session}.jsonl",
            "cwd": str(self.project),
            "permission_mode": "bypassPermissions",
            "hook_event_name": event,
            **fields,
        }
        results = []
        for group in self.settings.get("hooks", {}).get(event, []):
            matcher = group.get("matcher") or "*"
            if match is not None and matcher != "*" and not re.fullmatch(matcher, match):
                continue
            for hook in group["hooks"]:
                env = {**os.environ, "CLAUDE_PROJECT_DIR": str(self.project)}
                if event == "SessionStart":
                    env["CLAUDE_ENV_FILE"] = str(self.env_file)
                started = time.monotonic()
                kind = hook.get("type", "command")
                if kind == "http":
                    code, out, err = post_hook(hook, payload)
                else:
                    try:
                        proc = subprocess.run(
                            ["bash", "-c", hook["command"]],
                            input=json.dumps(payload),
                            text=True,
                            env=env,
                            capture_output=True,
                            cwd=self.project,
                            timeout=hook.get("timeout", 60),
                        )
                        code, out, err = proc.returncode, proc.stdout, proc.stderr
                    except subprocess.TimeoutExpired:
                        code, out, err = None, "", "timed out"
                result = {
                    "event": event,
                    "type": kind,
                    "hook_exit": code,
                    "stdout": out,
                    "stderr": err,
                    "seconds": time.monotonic() - started,
                }
                try:
                    result["json"] = json.loads(out) if out.strip() else None
                except ValueError:
                    result["json"] = None
                self.log(**result)
                results.append(result)
        return results

    def session_start(self, source: str) -> None:
        for r in self.hooks("SessionStart", source, source=source):
            specific = (r["json"] or {}).get("hookSpecificOutput", {})
            text = specific.get("additionalContext") if r["json"] else r["stdout"]
            if text:
                self.context.append(text)
                self.log(event="context", source=source, text=text)

    # -- tools ------------------------------------------------------------

    def tool(self, name: str, tool_input: dict[str, Any]) -> bool:
        """One tool call through PreToolUse and PostToolUse; False if denied."""
        for r in self.hooks(
            "PreToolUse",
            name,
            tool_name=name,
            tool_input=tool_input,
            tool_use_id=f"toolu_{uuid.uuid4().hex[:12]}",
        ):
            specific = (r["json"] or {}).get("hookSpecificOutput", {})
            if r["hook_exit"] == 2 or specific.get("permissionDecision") == "deny":
                reason = specific.get("permissionDecisionReason") or r["stderr"]
                self.log(event="denied", tool=name, tool_input=tool_input, reason=reason)
                return False
        response = self.run_tool(name, tool_input)
        self.log(event="tool", tool=name, tool_input=tool_input, response=response)
        self.hooks(
            "PostToolUse", name, tool_name=name, tool_input=tool_input, tool_response=response
        )
        return True

    def run_tool(self, name: str, tool_input: dict[str, Any]) -> dict[str, Any]:
        if name == "Bash":
            script = f'[ -f "{self.env_file}" ] && . "{self.env_file}"\n{tool_input["command"]}'
            proc = subprocess.run(
                ["bash", "-c", script], text=True, capture_output=True, cwd=self.project
            )
            return {"stdout": proc.stdout, "stderr": proc.stderr, "exit": proc.returncode}
        path = Path(tool_input["file_path"])
        if name == "Write":
            path.write_text(tool_input["content"])
        else:
            with path.open("a") as out:
                out.write(tool_input["new_string"] + "\n")
        return {"filePath": str(path), "success": True}

    def act(self, action: dict[str, Any]) -> None:
        if "bash" in action:
            self.tool("Bash", {"command": action["bash"]})
        elif "write" in action:
            path = str((self.project / action["write"]).resolve())
            self.tool("Write", {"file_path": path, "content": action.get("content", "x\n")})
        elif "edit" in action:
            path = str((self.project / action["edit"]).resolve())
            self.tool("Edit", {"file_path": path, "old_string": "", "new_string": "edited"})
        elif "think" in action:
            time.sleep(action["think"])
        elif "busy" in action:
            until = time.monotonic() + action["busy"]
            while time.monotonic() < until:
                self.tool("Bash", {"command": "sleep 0.3"})
        elif "say" in action:
            self.say(action["say"])
        elif "ends" in action:
            self.hooks("SessionEnd", "other", reason="other")
            self.log(event="exit", code=1, error=action["ends"])
            said = expand(action["ends"])
            os._exit(self.end(said, action.get("api_error_status")))
        elif "wait_for" in action:
            deadline = time.monotonic() + action.get("timeout", 60)
            while not (self.project / action["wait_for"]).exists():
                if time.monotonic() > deadline:
                    break
                time.sleep(0.05)
        elif "compact" in action:
            self.hooks("PreCompact", "auto", trigger="auto", custom_instructions="")
            self.context.clear()
            self.session_start("compact")
        elif "exit" in action:
            self.log(event="crash", code=action["exit"])
            os._exit(action["exit"])

    def main(self) -> int:
        self.log(event="start", env_task=os.environ.get("AFK_TASK_ID"))
        self.session_start("startup")
        for action in self.plan.get("actions", []):
            self.act(action)
        active = False
        for _ in range(8):
            blocked = [
                r
                for r in self.hooks("Stop", None, stop_hook_active=active)
                if r["hook_exit"] == 2 or (r["json"] or {}).get("decision") == "block"
            ]
            if not blocked:
                break
            self.log(event="stop_blocked", reason=(blocked[0]["json"] or {}).get("reason"))
            for action in self.plan.get("on_stop_block", []):
                self.act(action)
            active = True
        self.hooks("SessionEnd", "other", reason="other")
        self.log(event="exit", code=self.plan.get("exit_code", 0))
        self.end()
        return int(self.plan.get("exit_code", 0))


def expand(text: str) -> str:
    """``{epoch+N}``: the epoch N seconds from now (a usage limit's reset)."""
    return re.sub(r"\{epoch\+(\d+)\}", lambda m: str(int(time.time()) + int(m.group(1))), text)


def read_settings(argv: list[str], project: Path) -> dict[str, Any]:
    """The hooks of every settings source, in Claude Code's order (the command
    line's, the user's, the project's, the project's local), each command
    once."""
    sources: list[dict[str, Any]] = []
    if "--settings" in argv:
        sources.append(json.loads(argv[argv.index("--settings") + 1]))
    for path in (
        Path.home() / ".claude" / "settings.json",
        project / ".claude" / "settings.json",
        project / ".claude" / "settings.local.json",
    ):
        if path.is_file():
            sources.append(json.loads(path.read_text()))
    hooks: dict[str, list[dict[str, Any]]] = {}
    seen: set[str] = set()
    for source in sources:
        for event, groups in source.get("hooks", {}).items():
            for group in groups:
                kept = []
                for hook in group["hooks"]:
                    same = json.dumps([event, hook.get("command"), hook.get("url")])
                    if same not in seen:
                        seen.add(same)
                        kept.append(hook)
                if kept:
                    hooks.setdefault(event, []).append({**group, "hooks": kept})
    return {"hooks": hooks}


def post_hook(hook: dict[str, Any], payload: dict[str, Any]) -> tuple[int | None, str, str]:
    """An HTTP hook: (an exit status as a command's would be, its body, why
    it failed). A 2xx answer is exit 0; anything else a non-blocking error."""
    import urllib.error
    import urllib.request

    allowed = set(hook.get("allowedEnvVars", []))

    def fill(value: str) -> str:
        return re.sub(
            r"\$\{?([A-Za-z0-9_]+)\}?",
            lambda m: os.environ.get(m.group(1), "") if m.group(1) in allowed else "",
            value,
        )

    headers = {k: fill(str(v)) for k, v in hook.get("headers", {}).items()}
    headers["Content-Type"] = "application/json"
    request = urllib.request.Request(
        hook["url"], data=json.dumps(payload).encode(), headers=headers, method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=hook.get("timeout", 30)) as answer:
            return 0, answer.read().decode(), ""
    except (OSError, urllib.error.HTTPError) as exc:
        return 1, "", str(exc)


def main() -> int:
    agent = Agent(sys.argv[-1] if len(sys.argv) > 1 else "", sys.argv[1:])

    def interrupted(signum: int, _frame: object) -> None:
        agent.log(event="interrupted", signal=signum)
        os._exit(128 + signum)

    signal.signal(signal.SIGINT, interrupted)
    signal.signal(signal.SIGTERM, interrupted)
    return agent.main()


if __name__ == "__main__":
    sys.exit(main())
