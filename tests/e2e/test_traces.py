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


def test_enqueue_claim_session_and_finish_are_one_trace(afk, otlp, tmp_path):
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
    # the run keeps its trace id
    (stored,) = afk.json("show", task_id)["runs"]
    assert stored["trace_id"] == process.trace_id
