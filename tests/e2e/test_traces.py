"""Traces (the otel extra, an OTLP endpoint): one trace per attempt, from
enqueue through claim, the agent's session and its tool calls, to the
finish. A loopback OTLP/HTTP receiver keeps what afk exports; `afk loop`
runs a stand-in agent that records its environment."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from helpers import HELPERS, Afk, poll
from helpers.otlp import OTLPReceiver

STANDIN = [sys.executable, str(HELPERS / "standin_agent.py")]
CONSUMER, PRODUCER = 5, 4  # (OTLP's SpanKind numbers)


@pytest.fixture
def otlp():
    receiver = OTLPReceiver()
    yield receiver
    receiver.close()


def loop(afk: Afk, env: dict[str, str], tmp_path, *args: str) -> list[dict]:
    log = tmp_path / "runs.jsonl"
    script = tmp_path / "script.jsonl"
    if not script.exists():
        script.write_text("")
    full = {**afk.env, **env, "STANDIN_LOG": str(log), "STANDIN_SCRIPT": str(script),
            "AFK_BACKOFF_BASE_SECONDS": "1", "AFK_BACKOFF_CAP_SECONDS": "1"}  # fmt: skip
    proc = subprocess.run(
        Afk.command("loop", "--agent", "traced", *args, "--", *STANDIN),
        env=full,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    return [json.loads(line) for line in log.read_text().splitlines() if line]


def test_enqueue_claim_session_and_finish_are_one_trace(afk, otlp, tmp_path, dsn):
    env = otlp.env()
    (task_id,) = afk.json("enqueue", "--agent", "traced", "--title", "t", env=env)["enqueued"]
    (run,) = loop(afk, env, tmp_path)
    poll(lambda: otlp.named("settle"), timeout=30)
    (enqueue,) = otlp.named("enqueue traced")
    (process,) = otlp.named("process traced")
    (session,) = otlp.named("invoke_agent traced")
    (settle,) = otlp.named("settle traced")
    assert enqueue.kind == PRODUCER and enqueue.parent_id == ""
    assert enqueue.attributes["messaging.message.id"] == task_id
    assert process.kind == CONSUMER and process.parent_id == enqueue.span_id
    assert process.trace_id == enqueue.trace_id
    assert process.attributes["messaging.message.id"] == task_id
    assert process.attributes["afk.attempt"] == 1 and process.attributes["afk.agent"] == "traced"
    assert session.parent_id == process.span_id and settle.parent_id == process.span_id
    assert settle.attributes["afk.outcome"] == "done"
    # the agent's environment names its session span, for its own spans
    env_of_agent = run["env"]
    assert env_of_agent["TRACEPARENT"].startswith(f"00-{session.trace_id}-{session.span_id}-")
    assert f"afk.task_id={task_id}" in env_of_agent["OTEL_RESOURCE_ATTRIBUTES"]
    # the run keeps its trace id, and the task's page links it
    (stored,) = afk.json("show", task_id)["runs"]
    # the agent's telemetry names the run by its id, never by the task's token
    # (a fencing token is a credential: P7)
    resource = dict(a.split("=", 1) for a in env_of_agent["OTEL_RESOURCE_ATTRIBUTES"].split(","))
    assert resource["afk.run_id"] == str(stored["id"])
    assert env_of_agent["AFK_TASK_TOKEN"] not in env_of_agent["OTEL_RESOURCE_ATTRIBUTES"]
    assert stored["trace_id"] == process.trace_id
    from helpers.service import Service

    service = Service(dsn, AFK_TRACE_URL="https://traces.example/trace/{trace_id}")
    try:
        poll(lambda: service.health() == 200, timeout=60)
        page = service.get(f"/tasks/{task_id}")
        assert page is not None and page.status_code == 200
        assert f"https://traces.example/trace/{process.trace_id}" in page.text
    finally:
        service.cleanup()
    bad = afk("status", env={"AFK_TRACE_URL": "https://traces.example/{task_id}"})
    assert bad.returncode == 2 and "must name {trace_id}" in bad.stderr


def hook(afk: Afk, env: dict[str, str], event: str, command: str, extra: dict | None = None):
    payload = {
        "session_id": "s-traced",
        "hook_event_name": event,
        "tool_name": "Bash",
        "tool_use_id": "toolu_42",
        "tool_input": {"command": command},
    }
    proc = afk("hook", input=json.dumps(payload), env={**env, **(extra or {})})
    assert proc.returncode == 0, proc.stderr
    return proc


PARENT_TRACE, PARENT_SPAN = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
TRACEPARENT = f"00-{PARENT_TRACE}-{PARENT_SPAN}-01"


def test_a_tool_call_seen_by_the_hooks_is_a_span_under_the_session(afk, otlp, tmp_path):
    env = {**otlp.env(), "TRACEPARENT": TRACEPARENT, "TMPDIR": str(tmp_path)}
    secret = "GITHUB_TOKEN=ghp_" + "Z" * 30
    hook(afk, env, "PreToolUse", f"{secret} git push origin main")
    hook(afk, env, "PostToolUse", f"{secret} git push origin main")
    (tool,) = poll(lambda: otlp.named("execute_tool Bash"), timeout=30)
    assert (tool.trace_id, tool.parent_id) == (PARENT_TRACE, PARENT_SPAN)
    assert tool.attributes["gen_ai.tool.call.id"] == "toolu_42"
    summary = tool.attributes["afk.tool.summary"]
    assert summary.startswith("GITHUB_TOKEN=***") and "ZZZZ" not in summary
    # an agent that exports its own spans gets none from the hooks
    own = {"CLAUDE_CODE_ENABLE_TELEMETRY": "1"}
    hook(afk, env, "PreToolUse", "ls", own)
    hook(afk, env, "PostToolUse", "ls", own)
    # without a session's TRACEPARENT, no span either
    plain = {**otlp.env(), "TMPDIR": str(tmp_path)}
    hook(afk, plain, "PreToolUse", "ls")
    hook(afk, plain, "PostToolUse", "ls")
    hook(afk, env, "PreToolUse", "true")  # (a last one, exported after the others)
    hook(afk, env, "PostToolUse", "true")
    poll(lambda: len(otlp.named("execute_tool")) >= 2, timeout=30)
    assert len(otlp.named("execute_tool")) == 2


def test_a_denied_tool_call_is_a_span_with_a_deny_event(afk, otlp, queue, sql, tmp_path):
    from watchdog import NewTask

    queue.enqueue("z", [NewTask("t")])
    task = queue.claim("z", runner="a-supervisor")
    sql.expire(task.id)
    queue.reclaim()  # its agent is a zombie now
    env = {
        **otlp.env(),
        "TRACEPARENT": TRACEPARENT,
        "TMPDIR": str(tmp_path),
        "AFK_TASK_ID": str(task.id),
        "AFK_TASK_TOKEN": str(task.token),
    }
    proc = hook(afk, env, "PreToolUse", "rm -rf build")
    assert json.loads(proc.stdout)["hookSpecificOutput"]["permissionDecision"] == "deny"
    (tool,) = poll(lambda: otlp.named("execute_tool Bash"), timeout=30)
    assert tool.events == ["deny"] and tool.parent_id == PARENT_SPAN


def test_a_retry_after_a_reclaim_is_a_trace_of_its_own_linked_to_the_enqueue(
    afk, otlp, tmp_path, sql
):
    env = otlp.env()
    afk.json("enqueue", "--agent", "traced", "--title", "t", env=env)
    claimed = afk.json("claim", "--agent", "traced", env=env)  # a worker that dies
    sql.expire(claimed["id"])
    assert afk("reclaim", env=env).returncode == 0
    loop(afk, env, tmp_path)
    (enqueue,) = poll(lambda: otlp.named("enqueue traced"), timeout=30)
    spans = poll(lambda: len(otlp.named("process traced")) == 2 and otlp.named("process traced"))
    lost, process = sorted(spans, key=lambda s: s.attributes["afk.attempt"])
    # the dead worker's attempt, ended by the reclaim, in the enqueue's trace
    assert lost.attributes["afk.attempt"] == 1 and lost.parent_id == enqueue.span_id
    assert lost.trace_id == enqueue.trace_id and lost.attributes["error.type"] == "lease_lost"
    assert process.attributes["afk.attempt"] == 2
    assert process.trace_id != enqueue.trace_id and process.parent_id == ""
    assert process.links == [(enqueue.trace_id, enqueue.span_id)]


def test_a_task_claimed_and_finished_through_the_cli_is_an_attempt_span_in_its_trace(afk, otlp):
    """Issue 41, also measured: only `afk loop` made an attempt's span; a
    task claimed by `afk claim` and finished by `afk done` or `afk fail` (or
    the Python API under them) left its enqueue alone in its trace."""
    env = {**otlp.env(), "AFK_BACKOFF_BASE_SECONDS": "1", "AFK_BACKOFF_CAP_SECONDS": "1"}
    afk.json("enqueue", "--agent", "traced", "--title", "t", "--max-attempts", "2", env=env)
    first = afk.json("claim", "--agent", "traced", env=env)
    token = str(first["token"])
    failed = afk("fail", first["id"], "--token", token, "--error", "flaky", env=env)
    assert failed.returncode == 0, failed.stderr

    def claimed() -> dict | None:  # (exit 3 while its backoff runs)
        proc = afk("claim", "--agent", "traced", env=env)
        return json.loads(proc.stdout) if proc.returncode == 0 else None

    second = poll(claimed, timeout=30)
    assert second["id"] == first["id"]
    done = afk("done", second["id"], "--token", str(second["token"]), env=env)
    assert done.returncode == 0, done.stderr
    (enqueue,) = poll(lambda: otlp.named("enqueue traced"), timeout=30)
    spans = poll(lambda: len(otlp.named("process traced")) == 2 and otlp.named("process traced"))
    one, two = sorted(spans, key=lambda s: s.attributes["afk.attempt"])
    assert (one.trace_id, one.parent_id) == (enqueue.trace_id, enqueue.span_id)
    assert one.kind == CONSUMER and one.attributes["error.type"] == "task_failure"
    assert one.attributes["messaging.message.id"] == first["id"]
    assert two.trace_id != enqueue.trace_id and two.parent_id == ""
    assert two.links == [(enqueue.trace_id, enqueue.span_id)]
    assert "error.type" not in two.attributes and two.attributes["afk.attempt"] == 2
    assert one.end_ns >= one.start_ns > enqueue.start_ns and two.start_ns >= one.end_ns


def test_a_callers_traceparent_is_the_enqueues_parent(afk, otlp):
    env = {**otlp.env(), "TRACEPARENT": TRACEPARENT}
    afk.json("enqueue", "--agent", "traced", "--title", "t", env=env)
    (enqueue,) = poll(lambda: otlp.named("enqueue traced"), timeout=30)
    assert (enqueue.trace_id, enqueue.parent_id) == (PARENT_TRACE, PARENT_SPAN)


def test_the_watchdogs_jobs_are_spans_with_what_they_changed(dsn, otlp, queue, sql):
    from helpers.service import Service

    from watchdog import NewTask

    queue.enqueue("a", [NewTask("t")])
    task = queue.claim("a", runner="dead")
    sql.expire(task.id)
    service = Service(dsn, **otlp.env())
    try:

        def reclaimed():
            # (by span id: OTLP delivers at least once, and a batch whose
            # answer came after the exporter's bounded wait is sent again)
            spans = {s.span_id: s for s in otlp.named("afk.job reclaim")}
            return [s for s in spans.values() if s.attributes.get("afk.job.paused")]

        try:
            poll(lambda: service.health() == 200, timeout=60)
            (span,) = poll(reclaimed, timeout=60)
        except AssertionError as exc:  # say which side it was on
            names = sorted({s.name for s in otlp.spans})
            raise AssertionError(
                f"{exc}; spans received: {names}; the service said: {service.log()[-2000:]}"
            ) from None
        assert span.attributes["afk.job.paused"] == 1
        assert poll(lambda: otlp.named("afk.job gauges"), timeout=60)
    finally:
        service.cleanup()


def test_no_secret_reaches_a_span(afk, otlp, tmp_path, dsn):
    """The task's token, and a DSN's password, appear in no exported byte."""
    password = "s3cret-pg-password"  # (the test server trusts: any password connects)
    if "://" in dsn:
        with_password = dsn + ("&" if "?" in dsn else "?") + f"password={password}"
    else:
        with_password = f"{dsn} password={password}"
    env = {**otlp.env(), "AFK_DSN": with_password}
    afk.json("enqueue", "--agent", "traced", "--title", "t", env=env)
    runs = loop(afk, env, tmp_path)
    token = runs[0]["env"]["AFK_TASK_TOKEN"]
    poll(lambda: otlp.named("settle traced"), timeout=30)
    exported = b"".join(otlp.bodies)
    assert otlp.named("process traced")  # (something was exported to look in)
    assert token.encode() not in exported
    assert password.encode() not in exported
    assert b"AFK_TASK_TOKEN" not in exported


def test_without_an_endpoint_or_the_extra_no_command_imports_opentelemetry(afk, tmp_path):
    def imported(env: dict[str, str], *args: str) -> str:
        proc = subprocess.run(
            [sys.executable, "-X", "importtime", "-m", "watchdog.cli", *args],
            env={**afk.env, **env},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
        return proc.stderr

    # no endpoint: nothing of OpenTelemetry is imported, on any path
    for args in (
        ["enqueue", "--agent", "n", "--title", "t"],
        ["status"],
        ["claim", "--agent", "n"],
    ):
        assert "opentelemetry" not in imported({}, *args), args
    # an endpoint but no extra (a package that cannot be imported stands in
    # for a venv without it): every command works as before, without a word
    fake = tmp_path / "no-otel"
    (fake / "opentelemetry").mkdir(parents=True)
    (fake / "opentelemetry" / "__init__.py").write_text("raise ImportError('not installed')\n")
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9", "PYTHONPATH": str(fake)}
    proc = subprocess.run(
        Afk.command("enqueue", "--agent", "n", "--title", "t2"),
        env={**afk.env, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr


def test_a_collector_that_never_answers_costs_a_command_a_bounded_wait(afk, tmp_path):
    """P14: a collector that accepts and never replies cost every command
    (and every direct hook) the exporter's 10 s at its exit. The export is
    bounded (2 s) unless the OTLP timeout is set."""
    import socket
    import time

    hung = socket.socket()
    hung.bind(("127.0.0.1", 0))
    hung.listen(16)  # (accepted by the kernel, never read nor answered)
    try:
        env = {"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{hung.getsockname()[1]}"}
        began = time.monotonic()
        proc = afk("enqueue", "--agent", "oh", "--title", "r1", env=env)
        took = time.monotonic() - began
    finally:
        hung.close()
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    assert took < 8, took  # (10.7 s before; 2 s of export plus the command, with margin)


@pytest.mark.parametrize(
    "command",
    [
        "afk done {id} --tok {token}",  # an abbreviation the person's CLI takes
        "echo {token} | xargs -I T afk done {id} --token T",
        "curl -H 'X-Fence: {token}' http://127.0.0.1:1/",
        "FENCE={token} ./finish.sh",
        "printf %s{token}",
    ],
    ids=["abbreviated", "piped", "a header", "a variable", "glued"],
)
def test_the_tasks_token_reaches_no_span_through_a_tool_call(afk, otlp, queue, tmp_path, command):
    """R12: the task's token in a Bash command, in shapes no credential
    pattern knows, reaches no span: the hook masks the run's own secrets."""
    from watchdog import NewTask

    queue.enqueue("z", [NewTask("t")])
    task = queue.claim("z", runner="r", lease_seconds=600)
    env = {
        **otlp.env(),
        "TRACEPARENT": TRACEPARENT,
        "TMPDIR": str(tmp_path),
        "AFK_TASK_ID": str(task.id),
        "AFK_TASK_TOKEN": str(task.token),
    }
    said = command.format(id=task.id, token=task.token)
    hook(afk, env, "PreToolUse", said)
    hook(afk, env, "PostToolUse", said)
    (tool,) = poll(lambda: otlp.named("execute_tool Bash"), timeout=30)
    assert str(task.token).encode() not in b"".join(otlp.bodies)
    assert "***" in tool.attributes["afk.tool.summary"], tool.attributes
