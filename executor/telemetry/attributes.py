"""Span attribute values and names: previews, caps, the OTel attribute form, span names."""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from executor.events import (
    LLMCall,
)
from executor.policy import Decision
from executor.redact import redact_json_value, redact_secrets

if TYPE_CHECKING:
    pass

_logger = logging.getLogger(__name__)

INSTRUMENTATION_SCOPE = "truva-console.executor"
DEFAULT_SERVICE_NAME = "truva-console"
PREVIEW_CHARS = 500  # TruvaG3 truncateString(…, 500): the first 500 characters, then "..."
SHORT_PREVIEW_CHARS = 200  # TruvaG3's limit for re-resolution analysis and raw responses
MODULE_ORCHESTRATION = {"module": "orchestration"}
GEN_AI_PROVIDER = "openai"  # every LLM call goes through the OpenAI-compatible chat API

SPAN_EXECUTION = "orchestrator.execution"
STEP_SPAN_PREFIX = "orchestrator.step."
TOOL_SPAN_PREFIX = "execute_tool "
LLM_OPERATION = "chat"

def preview(text: str | None, limit: int = PREVIEW_CHARS) -> str | None:
    """`text` redacted, then cut like TruvaG3's truncateString: first `limit` chars plus "..."."""
    if text is None:
        return None
    redacted = redact_secrets(text)
    return redacted if len(redacted) <= limit else redacted[:limit] + "..."


def json_preview(value: Any, limit: int = PREVIEW_CHARS) -> str:
    """A JSON value with credentials removed, as compact sorted JSON cut to `limit` chars."""
    text = json.dumps(redact_json_value(value), sort_keys=True, default=str, ensure_ascii=False)
    return text if len(text) <= limit else text[:limit] + "..."


def to_ns(at: float) -> int:
    """Epoch seconds to epoch nanoseconds, whole microseconds as the store keeps them (DuckDB's
    `round(at * 1000000)`, halves away from zero; `at * 1e6` is a multiple of 0.25 today, so a
    quarter of all times end in .5), so spans rebuilt from it (`publish`, a bundle's spans)
    carry exactly the times the live ones did (a float's nanoseconds differ by 256-512 ns)."""
    micros = at * 1e6
    return math.floor(micros + 0.5) * 1000 if micros >= 0 else math.ceil(micros - 0.5) * 1000


_SCALAR_TYPES = frozenset({str, bool, int, float})  # kept as they are, as their subclasses


def otel_attributes(values: Mapping[str, Any]) -> dict[str, Any]:
    """OTel attribute values: None dropped, sequences made homogeneous, others as JSON text."""
    return {
        key: value if type(value) in _SCALAR_TYPES else _otel_value(value)
        for key, value in values.items()
        if value is not None
    }


def _otel_value(value: Any) -> Any:
    """One attribute value that is not None nor of an exact scalar type, as `otel_attributes`
    keeps it."""
    if isinstance(value, str | bool | int | float):
        return value
    if isinstance(value, list | tuple):
        items = [item for item in value if item is not None]
        if all(isinstance(item, str) for item in items):
            return tuple(items)
        return tuple(json.dumps(item, default=str) for item in items)
    return json_preview(value)


def server_of(url: str) -> tuple[str | None, int | None]:
    """`server.address` and `server.port` of a URL (the port defaulted from the scheme)."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None, None
    if port is None:
        port = {"http": 80, "https": 443}.get(parts.scheme)
    return parts.hostname, port


def body_text(body: bytes) -> str:
    return body.decode("utf-8", errors="replace")


def layer_name(decision: Decision) -> str | None:
    return str(decision.layer) if decision.layer else None


def skip_classification(skip_reason: str) -> tuple[str, str, str | None]:
    """(reason, blocking_reason, failed_dependency) metric labels for a skip reason."""
    explicit_one = "skipped due to failed dependency: "
    explicit_many = "skipped due to failed dependencies: "
    templated = "skipped due to failed template dependency: "
    if skip_reason.startswith(explicit_one):
        return "failed_dependency", "explicit_dep", skip_reason[len(explicit_one) :].strip()
    if skip_reason.startswith(explicit_many):
        first = skip_reason[len(explicit_many) :].split(",")[0].strip()
        return "failed_dependency", "explicit_dep", first
    if skip_reason.startswith(templated):
        first = skip_reason[len(templated) :].split(" ")[0].strip()
        return "failed_dependency", "template_induced", first
    if skip_reason.startswith("run cancelled"):
        return "cancelled", "", None
    if skip_reason.startswith("task stopped"):
        return "task_stopped", "", None
    if skip_reason.startswith("no executable steps"):
        return "no_executable_steps", "", None
    return "other", "", None


def llm_error_type(event: LLMCall) -> str | None:
    """A low-cardinality `error.type` for a failed LLM call; None when it did not fail."""
    if event.error is None:
        return None
    if event.response_status is not None and event.response_status >= 400:
        return str(event.response_status)
    message = event.error.lower()
    if "timed out" in message:
        return "timeout"
    if "connection" in message:
        return "connection_error"
    if event.response_status is not None:
        return "invalid_response"
    return "_OTHER"


def completion_fields(body: bytes) -> dict[str, Any]:
    """`gen_ai.response.*` attributes read from an OpenAI chat-completions response body."""
    try:
        document = json.loads(body) if body else None
    except ValueError:
        return {}
    if not isinstance(document, dict):
        return {}
    reasons = [
        choice.get("finish_reason")
        for choice in document.get("choices") or []
        if isinstance(choice, dict) and isinstance(choice.get("finish_reason"), str)
    ]
    model, response_id = document.get("model"), document.get("id")
    return {
        "gen_ai.response.model": model if isinstance(model, str) else None,
        "gen_ai.response.id": response_id if isinstance(response_id, str) else None,
        "gen_ai.response.finish_reasons": tuple(reasons) if reasons else None,
    }


CONTENT_CHARS = 8192  # cap of one captured text (a message, tool arguments, a tool result)
WORKFLOW_OPERATION = "invoke_workflow"


def capped(text: str | None, where: str) -> str | None:
    """`text` redacted and cut to CONTENT_CHARS, with a marker naming the store row it came from.

    A cut text ends in `…[truncated: N of M chars; the whole text is in the debug store,
    <where>]`, so nobody mistakes a span attribute for the full prompt or body.
    """
    if text is None:
        return None
    redacted = redact_secrets(text)
    if len(redacted) <= CONTENT_CHARS:
        return redacted
    return (
        f"{redacted[:CONTENT_CHARS]}…[truncated: {CONTENT_CHARS} of {len(redacted)} chars; "
        f"the whole text is in the debug store, {where}]"
    )


def capped_json(value: Any, where: str) -> str:
    """A JSON value with credentials removed, as compact sorted JSON, capped like `capped`."""
    text = json.dumps(redact_json_value(value), sort_keys=True, default=str, ensure_ascii=False)
    return capped(text, where) or ""


def mime_type(headers: Mapping[str, str] | None) -> str:
    for key, value in (headers or {}).items():
        if key.lower() == "content-type" and "json" in str(value).lower():
            return "application/json"
    return "text/plain"


def workflow_name(plan_path: str | None) -> str:
    """`gen_ai.workflow.name`: the plan file's stem, or `plan` for a plan given in memory."""
    if plan_path:
        stem = plan_path.replace("\\", "/").rsplit("/", 1)[-1]
        return stem.removesuffix(".json") or "plan"
    return "plan"


def capability_descriptions(plan: Any) -> dict[str, str]:
    """`"<tool>.<capability>"` → its non-empty description, from the recorded plan, redacted
    (`redact_secrets`: a plan's text may hold a credential; the live spans had it verbatim)."""
    capabilities = plan.get("capabilities") if isinstance(plan, Mapping) else None
    if not isinstance(capabilities, Mapping):
        return {}
    return {
        str(name): redact_secrets(spec["description"])
        for name, spec in capabilities.items()
        if isinstance(spec, Mapping) and isinstance(spec.get("description"), str)
        and spec["description"]
    }


def last_user_text(messages: Sequence[Mapping[str, Any]]) -> str | None:
    for message in reversed(messages):
        if message.get("role") == "user" and isinstance(message.get("content"), str):
            return message["content"]
    return None

