"""The sandbox engine's log, read out of a run's stderr (sandbox.EngineLog):
what its proxy decided for each host, and nothing of it passed on as the
agent's output."""

from __future__ import annotations

import pytest

from watchdog.agents.sandbox import MAX_HOSTS, EngineLog

CASES = [
    ("the agent's own lines pass untouched", [b"compiling\n", b"50%\r60%"],
     b"compiling\n50%\r60%", []),
    ("an allowed host is counted and its line kept out",
     [b"[SandboxDebug] Allowed by config rule: api.anthropic.com:443\nok\n"],
     b"ok\n", [("api.anthropic.com:443", True, 1)]),
    ("the two ways of a denial",
     [b"[SandboxDebug] No matching config rule, denying: evil.example:443\n",
      b"[SandboxDebug] Denied by config rule: 10.0.0.9:5432\n",
      b"[SandboxDebug] No matching config rule, denying: evil.example:443\n"],
     b"", [("10.0.0.9:5432", False, 1), ("evil.example:443", False, 2)]),
    ("a multi-line value the engine logged is kept out whole",
     [b"[SandboxDebug] {\n", b'  "allowedHosts": [\n    "a:1"\n  ]\n', b"}\n", b"after\n"],
     b"after\n", []),
    ("the engine's line after the agent's unfinished one",
     [b"building 45%[SandboxDebug] Allowed by config rule: h:80\n"],
     b"building 45%", [("h:80", True, 1)]),
    ("its other lines are kept out and count nothing",
     [b"[SandboxDebug] Network infrastructure initialized\n"], b"", []),
    # P19: srt 0.0.83's wordings, as its sandbox-manager.js logs them
    ("0.0.83's denial without a rule",
     [b"[SandboxDebug] No matching rule, denying: evil.example:443\n"],
     b"", [("evil.example:443", False, 1)]),
    ("0.0.83's ask with no one to ask is a denial",
     [b"[SandboxDebug] No matching rule, asking user: ask.example:443\n"],
     b"", [("ask.example:443", False, 1)]),
    ("0.0.83's per-command allowance",
     [b"[SandboxDebug] Allowed by per-command rule: api.anthropic.com:443\n"],
     b"", [("api.anthropic.com:443", True, 1)]),
]  # fmt: skip


@pytest.mark.parametrize(("case", "chunks", "kept", "tried"), CASES, ids=[c[0] for c in CASES])
def test_the_engine_log_is_read_out_of_the_stream(case, chunks, kept, tried):
    log = EngineLog()
    out = b"".join(log.take(c) for c in chunks)
    assert out == kept
    denied_first = sorted(tried, key=lambda t: (t[1], t[0]))
    assert log.record() == [{"host": h, "allowed": a, "count": n} for h, a, n in denied_first]


def test_a_run_that_tries_endless_hosts_keeps_a_bounded_record():
    log = EngineLog()
    for i in range(MAX_HOSTS + 50):
        log.take(f"[SandboxDebug] No matching config rule, denying: h{i}.example:443\n".encode())
    record = log.record()
    assert len(record) == MAX_HOSTS + 1
    assert {"host": "(others)", "allowed": False, "count": 50} in record


def test_a_line_about_a_host_that_no_wording_reads_is_kept_to_be_warned_of():
    """Another engine version's wording is never silent: the loop warns of it."""
    log = EngineLog()
    log.take(b"[SandboxDebug] Host refused by policy, denying: x.example:443\n")
    log.take(b"[SandboxDebug] [Sandbox Linux] denyRead glob x: denying what holds it\n")
    log.take(b"[SandboxDebug] Network infrastructure initialized\n")
    assert log.record() == []
    assert log.unread == ["Host refused by policy, denying: x.example:443"]
