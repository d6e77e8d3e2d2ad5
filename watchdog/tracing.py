"""Traces: one OpenTelemetry trace per attempt, from enqueue through claim,
the agent's session and its tool calls, to the finish.

Optional (``pip install 'afk-watchdog[otel]'``) and configured by the
standard variables: ``OTEL_EXPORTER_OTLP_ENDPOINT`` (or
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``), ``OTEL_SERVICE_NAME``,
``OTEL_TRACES_EXPORTER``, ``OTEL_SDK_DISABLED``. Without the extra, or with
no endpoint, nothing here imports OpenTelemetry and every call is a no-op
(:func:`enabled` reads the environment only), so every command costs what it
did.

The spans follow OpenTelemetry's semantic conventions v1.41.0 (both still at
"Development"): messaging spans for the queue (``enqueue {agent}``, producer,
``messaging.message.id`` the task id; ``process {agent}``, the whole attempt,
consumer; ``settle {agent}``), and the GenAI agent spans
(docs/gen-ai/gen-ai-agent-spans.md) for the agent: ``invoke_agent {agent}``
with ``gen_ai.conversation.id`` the session id, and ``execute_tool {tool}``
with ``gen_ai.tool.name`` and ``gen_ai.tool.call.id``. Nothing secret goes
into a span: ids, names and numbers, and a tool's input only as a short
scrubbed summary.
"""

from __future__ import annotations

import atexit
import contextlib
import os
from collections.abc import Iterator, Mapping
from datetime import datetime
from typing import Any

#: the span of a task's first attempt is a child of its enqueue span, whose
#: context the task keeps (afk_task.trace_parent)
SYSTEM = "afk"

_tracer: Any = None
_provider: Any = None


def enabled(env: Mapping[str, str] | None = None) -> bool:
    """Whether traces are to be exported: an OTLP endpoint is named, the SDK
    is not disabled, the exporter is not "none". Reads the environment only."""
    env = os.environ if env is None else env
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    if env.get("OTEL_TRACES_EXPORTER", "otlp").strip().lower() in ("none", ""):
        return False
    return bool(
        env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    )


#: seconds an export may take, at most (a CLI command waits for it at exit)
EXPORT_TIMEOUT = 2


def tracer() -> Any:
    """The process's tracer (set up once, flushed at exit), or None: not
    configured, or the extra is not installed."""
    global _tracer, _provider
    if _tracer is not None or not enabled():
        return _tracer
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError:  # no extra: no traces, and no word on every command
        return None
    from . import __name__ as package

    resource = Resource.create(
        {"service.name": os.environ.get("OTEL_SERVICE_NAME") or "afk-watchdog"}
    )
    _provider = TracerProvider(resource=resource)
    # (a collector that accepts and never answers cost each command and each
    # direct hook the exporter's 10 s, at its exit: bounded unless set, P14)
    named = any(
        os.environ.get(v)
        for v in ("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "OTEL_EXPORTER_OTLP_TIMEOUT")
    )
    exporter = OTLPSpanExporter() if named else OTLPSpanExporter(timeout=EXPORT_TIMEOUT)
    _provider.add_span_processor(
        BatchSpanProcessor(exporter, export_timeout_millis=EXPORT_TIMEOUT * 1000)
    )
    atexit.register(shutdown)
    _tracer = _provider.get_tracer(package)
    return _tracer


def shutdown() -> None:
    """Export what is left (a CLI command's spans, before it exits)."""
    if _provider is not None:
        with contextlib.suppress(Exception):
            _provider.shutdown()


def context_of(traceparent: str | None, tracestate: str | None = None) -> Any:
    """A W3C ``traceparent`` (and ``tracestate``) as a context to parent a
    span by; None for none."""
    if not traceparent:
        return None
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    carrier = {"traceparent": traceparent}
    if tracestate:
        carrier["tracestate"] = tracestate
    return TraceContextTextMapPropagator().extract(carrier)


def headers_of(span: Any) -> dict[str, str]:
    """``{"traceparent": ..., "tracestate": ...}`` of a span, to hand on."""
    from opentelemetry import trace
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    carrier: dict[str, str] = {}
    TraceContextTextMapPropagator().inject(carrier, context=trace.set_span_in_context(span))
    return carrier


def trace_id(span: Any) -> str | None:
    if span is None:
        return None
    return f"{span.get_span_context().trace_id:032x}"


#: values no span of this process may carry, wherever they appear in an
#: attribute (R12: the run's own token in a tool call's input, in a shape no
#: credential pattern knows): the tokens and credentials this process holds
#: (the newest :data:`KEPT_OUT` of them: a loop's night of tasks does not
#: grow the work each attribute costs)
_KEPT_OUT: dict[str, None] = {}
KEPT_OUT = 32


def keep_out(*secrets: object) -> None:
    """Mask these values (a task's token, a run's hook credential) in every
    span this process exports from now on."""
    for secret in secrets:
        value = "" if secret is None else str(secret)
        if len(value) >= 6:  # (a value that short would mask ordinary text)
            _KEPT_OUT.pop(value, None)
            _KEPT_OUT[value] = None
            while len(_KEPT_OUT) > KEPT_OUT:
                _KEPT_OUT.pop(next(iter(_KEPT_OUT)))


def scrubbed(value: Any) -> Any:
    """An attribute's value as a span may carry it: a string with the kept
    out values masked and every credential of a common shape redacted."""
    if not isinstance(value, str):
        return value
    from .errors import redact

    for secret in _KEPT_OUT:
        value = value.replace(secret, "***")
    return redact(value)


def _attributes(attributes: Mapping[str, Any] | None) -> dict[str, Any]:
    return {k: scrubbed(v) for k, v in (attributes or {}).items() if v is not None}


@contextlib.contextmanager
def span(
    name: str,
    *,
    kind: str = "internal",
    parent: str | None = None,
    link: str | None = None,
    attributes: Mapping[str, Any] | None = None,
) -> Iterator[Any]:
    """A span (None when tracing is off), ended when the block ends; an
    exception in the block is recorded on it. ``parent``/``link``: W3C
    traceparents."""
    t = tracer()
    if t is None:
        yield None
        return
    from opentelemetry import trace

    links = []
    if link:
        linked = trace.get_current_span(context_of(link)).get_span_context()
        if linked.is_valid:
            links.append(trace.Link(linked))
    with t.start_as_current_span(
        name,
        context=context_of(parent) if parent else None,
        kind=getattr(trace.SpanKind, kind.upper()),
        links=links,
        attributes=_attributes(attributes),
    ) as s:
        yield s


def current_traceparent() -> str | None:
    """The traceparent of the span now current (None: none, or tracing off)."""
    if tracer() is None:
        return None
    from opentelemetry import trace

    current = trace.get_current_span()
    if not current.get_span_context().is_valid:
        return None
    return headers_of(current).get("traceparent")


def set_attributes(s: Any, attributes: Mapping[str, Any]) -> None:
    if s is not None:
        s.set_attributes(_attributes(attributes))


def add_event(s: Any, name: str, attributes: Mapping[str, Any] | None = None) -> None:
    if s is not None:
        s.add_event(name, attributes=_attributes(attributes))


def error(s: Any, error_type: str) -> None:
    """The span's run did not end well: ``error.type`` and an error status."""
    if s is None:
        return
    from opentelemetry.trace import Status, StatusCode

    error_type = scrubbed(error_type)[:200]
    s.set_attribute("error.type", error_type)
    s.set_status(Status(StatusCode.ERROR, error_type))


def caller_parent() -> str | None:
    """The caller's ``TRACEPARENT`` (a process started inside a trace), when
    no span is current in this process."""
    if tracer() is None:
        return None
    from opentelemetry import trace

    if trace.get_current_span().get_span_context().is_valid:
        return None  # (the current span is the parent)
    return os.environ.get("TRACEPARENT") or None


def record(
    name: str,
    start_ns: int,
    end_ns: int,
    *,
    parent: str | None,
    attributes: Mapping[str, Any] | None = None,
    events: list[str] | None = None,
) -> None:
    """A span of something that happened between two times (a tool call
    whose start one hook saw and whose end another one did)."""
    t = tracer()
    if t is None:
        return
    s = t.start_span(
        name,
        context=context_of(parent),
        start_time=start_ns,
        attributes=_attributes(attributes),
    )
    for event in events or []:
        s.add_event(event, timestamp=end_ns)
    s.end(end_time=end_ns)


def attempt_attributes(agent: str, task_id: Any, attempt: int) -> dict[str, Any]:
    """An attempt's span (``process AGENT``), as a messaging consumer's."""
    return {
        "messaging.system": SYSTEM,
        "messaging.operation.name": "process",
        "messaging.operation.type": "process",
        "messaging.destination.name": agent,
        "messaging.message.id": str(task_id),
        "afk.agent": agent,
        "afk.attempt": attempt,
    }


def attempt_ended(
    task_id: Any,
    attempt: Mapping[str, Any],
    end: datetime,
    failed: str | None = None,
    *,
    always: bool = False,
) -> None:
    """The span of an attempt that ended outside a process that traced it
    (claimed and finished by `afk claim` and `afk done`, the Python API, a
    reclaim): from its claim to ``end``, in the enqueue's trace for a first
    attempt, a trace of its own linked to it for a retry, as `afk loop`
    makes it. ``attempt``: agent, attempts, parent (the enqueue's
    traceparent) and since (its claim), as the queue's statements give it.
    Not ``always``: none while a span is current (`afk loop`'s own)."""
    t = tracer()
    since = attempt.get("since")
    if t is None or not attempt.get("parent") or since is None:
        return
    from opentelemetry import trace

    if not always and trace.get_current_span().get_span_context().is_valid:
        return  # (a process that traced the attempt made its span)
    if isinstance(since, str):
        since = datetime.fromisoformat(since)
    first = int(attempt["attempts"]) <= 1
    parent = attempt["parent"]
    links = []
    if not first:
        linked = trace.get_current_span(context_of(parent)).get_span_context()
        if linked.is_valid:
            links.append(trace.Link(linked))
    s = t.start_span(
        f"process {attempt['agent']}",
        context=context_of(parent) if first else None,
        kind=trace.SpanKind.CONSUMER,
        links=links,
        start_time=int(since.timestamp() * 1e9),
        attributes=attempt_attributes(attempt["agent"], task_id, int(attempt["attempts"])),
    )
    if failed is not None:
        error(s, failed)
    s.end(end_time=max(int(end.timestamp() * 1e9), int(since.timestamp() * 1e9)))


def flat(values: Mapping[str, Any], prefix: str) -> dict[str, Any]:
    """A job's result as span attributes: its numbers, flags and short
    strings (no lists of ids, nothing nested)."""
    out: dict[str, Any] = {}
    for key, value in values.items():
        if isinstance(value, bool | int | float) or (isinstance(value, str) and len(value) <= 100):
            out[f"{prefix}.{key}"] = value
    return out
