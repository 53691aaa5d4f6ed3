"""W3C trace context for tool and LLM requests, with ids derived from the recorded ids.

An execution's trace id is `trace_id_for_execution(execution_id)` and every span's id is
`span_id_for(execution_id, ...)`, so the `traceparent` of an attempt is known before its span
exists (the request is built before the dispatch event is recorded) and equals the id the
telemetry recorder then gives the attempt span. Headers are sent only when a recorder that
propagates trace context (the OTLP `TelemetryRecorder`, unless
`TRUVA_PROPAGATE_TRACE_CONTEXT=false`) is among the executor's recorders. Imports nothing from
OpenTelemetry or the rest of the executor.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

# The trace headers for LLM requests made now: set by the executor around a layer's LLM call.
_LLM_HEADERS: ContextVar[Mapping[str, str] | None] = ContextVar(
    "truva_llm_trace_headers", default=None
)


def trace_id_for_execution(execution_id: str) -> str:
    """The 32-hex-digit trace id of an execution: the first 16 bytes of sha256(execution_id)."""
    digest = hashlib.sha256(execution_id.encode("utf-8")).digest()[:16]
    return (digest if any(digest) else b"\x00" * 15 + b"\x01").hex()


def span_id_for(execution_id: str, *key: object) -> str:
    """The 16-hex-digit span id of one recorded thing of an execution, derived from its ids.

    `key` is ("execution",), ("step", step_id), ("attempt", step_id, n) or ("llm", call_id):
    live export, rebuilt bundle spans and `publish` all give a span the same id, so a
    backend that receives it twice deduplicates instead of showing two spans.
    """
    text = "\x1f".join(("span", execution_id, *(str(part) for part in key)))
    digest = hashlib.sha256(text.encode("utf-8")).digest()[:8]
    return (digest if any(digest) else b"\x00" * 7 + b"\x01").hex()


def attempt_traceparent(execution_id: str, step_id: str, n: int) -> str:
    """The W3C `traceparent` of attempt `n` of `step_id`: its trace id and attempt span id."""
    span_id = span_id_for(execution_id, "attempt", step_id, n)
    return f"00-{trace_id_for_execution(execution_id)}-{span_id}-01"


def propagates(recorder: Any) -> bool:
    """True when `recorder`, or one it fans out to, propagates trace context."""
    if getattr(recorder, "propagate_trace_context", False) is True:
        return True
    return any(propagates(inner) for inner in getattr(recorder, "recorders", ()) or ())


def attempt_headers(recorder: Any, execution_id: str, step_id: str, n: int) -> dict[str, str]:
    """`{"traceparent": ...}` for attempt `n` when `recorder` propagates, else `{}`.

    No `tracestate` is sent: the executor starts the trace, so it has no vendor state to pass.
    """
    if not propagates(recorder):
        return {}
    return {"traceparent": attempt_traceparent(execution_id, step_id, n)}


@contextmanager
def llm_trace_context(recorder: Any, execution_id: str, step_id: str, n: int) -> Iterator[None]:
    """LLM requests made inside carry attempt `n`'s trace headers (when `recorder` propagates).

    Tasks created inside copy the context, so a layer call started here sees the headers.
    """
    token = _LLM_HEADERS.set(attempt_headers(recorder, execution_id, step_id, n) or None)
    try:
        yield
    finally:
        _LLM_HEADERS.reset(token)


def llm_headers() -> dict[str, str] | None:
    """The trace headers an LLM request made now should carry, or None."""
    headers = _LLM_HEADERS.get()
    return dict(headers) if headers else None
