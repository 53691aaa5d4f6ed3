"""The GenAI / OpenInference attributes and metric points of one LLM-call span."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from executor.events import LLMCall
from executor.telemetry.attributes import (
    GEN_AI_PROVIDER,
    LLM_OPERATION,
    MODULE_ORCHESTRATION,
    capped,
    completion_fields,
    last_user_text,
    llm_error_type,
    preview,
    server_of,
)
from executor.telemetry.metrics import LLM_ERROR_COUNTERS, LLM_HISTOGRAMS, MetricPoint


@dataclass(frozen=True, slots=True)
class LLMSpanFacts:
    """What one LLM call's span is made of: its attributes and the facts its metrics need."""

    attributes: dict[str, Any]
    error_type: str | None
    address: str | None


def llm_span_facts(event: LLMCall, *, capture_content: bool) -> LLMSpanFacts:
    """The attributes of the `chat <model>` span of one LLM call (content only when captured)."""
    address, port = server_of(event.base_url)
    error_type = llm_error_type(event)
    parsed = event.parsed if isinstance(event.parsed, Mapping) else {}
    should_retry = parsed.get("should_retry")
    completion = completion_fields(event.response_body)
    attributes = {
        "gen_ai.operation.name": LLM_OPERATION,
        "gen_ai.provider.name": GEN_AI_PROVIDER,
        "gen_ai.request.model": event.model,
        "gen_ai.request.temperature": float(event.temperature),
        "gen_ai.request.max_tokens": event.max_tokens,
        "gen_ai.usage.input_tokens": event.prompt_tokens,
        "gen_ai.usage.output_tokens": event.completion_tokens,
        **completion,
        "openinference.span.kind": "LLM",
        "llm.provider": GEN_AI_PROVIDER,
        "llm.system": GEN_AI_PROVIDER,
        "llm.model_name": event.model,
        "llm.invocation_parameters": json.dumps(
            {"temperature": float(event.temperature), "max_tokens": event.max_tokens}
        ),
        "llm.token_count.prompt": event.prompt_tokens,
        "llm.token_count.completion": event.completion_tokens,
        "llm.token_count.total": event.total_tokens,
        **(message_content(event, completion) if capture_content else {}),
        "server.address": address,
        "server.port": port,
        "http.response.status_code": event.response_status,
        "error.type": error_type,
        "truva.llm.site": event.site,
        "truva.llm.call_id": event.call_id,
        "truva.llm.duration": round(event.latency_ms / 1000.0, 6),
        "truva.llm.total_tokens": event.total_tokens,
        "truva.llm.prompt_preview": preview(last_user_text(event.messages)),
        "truva.llm.response_preview": preview(event.raw_text),
        "truva.llm.parse_error": preview(event.parse_error),
        "truva.llm.error": preview(event.error),
        "truva.llm.should_retry": should_retry if isinstance(should_retry, bool) else None,
        "truva.step.id": event.step_id,
        "truva.attempt.n": event.n,
    }
    return LLMSpanFacts(attributes, error_type, address)


def message_content(event: LLMCall, completion: Mapping[str, Any]) -> dict[str, Any]:
    """GenAI and OpenInference message attributes: redacted, each text capped."""
    where = f"llm_calls {event.call_id}"
    system_parts: list[dict[str, Any]] = []
    inputs: list[dict[str, Any]] = []
    plain: list[dict[str, Any]] = []
    attributes: dict[str, Any] = {}
    for index, message in enumerate(event.messages):
        role = str(message.get("role") or "user")
        content = message.get("content")
        text = content if isinstance(content, str) else json.dumps(content, default=str)
        text = capped(text, where)
        if role == "system":
            system_parts.append({"type": "text", "content": text})
        else:
            inputs.append({"role": role, "parts": [{"type": "text", "content": text}]})
        plain.append({"role": role, "content": text})
        attributes[f"llm.input_messages.{index}.message.role"] = role
        attributes[f"llm.input_messages.{index}.message.content"] = text
    if system_parts:
        attributes["gen_ai.system_instructions"] = json.dumps(system_parts, ensure_ascii=False)
    attributes["gen_ai.input.messages"] = json.dumps(inputs, ensure_ascii=False)
    attributes["input.value"] = json.dumps(plain, ensure_ascii=False)
    attributes["input.mime_type"] = "application/json"
    if event.raw_text is not None:
        answer = capped(event.raw_text, where)
        reasons = completion.get("gen_ai.response.finish_reasons") or ("stop",)
        attributes["gen_ai.output.messages"] = json.dumps(
            [
                {
                    "role": "assistant",
                    "parts": [{"type": "text", "content": answer}],
                    "finish_reason": reasons[0],
                }
            ],
            ensure_ascii=False,
        )
        attributes["llm.output_messages.0.message.role"] = "assistant"
        attributes["llm.output_messages.0.message.content"] = answer
        attributes["output.value"] = answer
        attributes["output.mime_type"] = "text/plain"
    return attributes


def llm_metric_points(
    event: LLMCall, capability: str, error_type: str | None, address: str | None
) -> list[MetricPoint]:
    """The latency, error and token-usage points of one LLM call."""
    labels = {**MODULE_ORCHESTRATION, "capability": capability}
    points: list[MetricPoint] = []
    if event.site in LLM_HISTOGRAMS:
        points.append(MetricPoint(LLM_HISTOGRAMS[event.site], event.latency_ms, labels))
        if error_type is not None:
            points.append(MetricPoint(LLM_ERROR_COUNTERS[event.site], 1, labels))
    gen_ai = {
        "gen_ai.operation.name": LLM_OPERATION,
        "gen_ai.provider.name": GEN_AI_PROVIDER,
        "gen_ai.request.model": event.model,
        "server.address": address,
    }
    points.append(
        MetricPoint(
            "gen_ai.client.operation.duration",
            event.latency_ms / 1000.0,
            {**gen_ai, "error.type": error_type},
        )
    )
    for token_type, tokens in (("input", event.prompt_tokens), ("output", event.completion_tokens)):
        if tokens is not None:
            points.append(
                MetricPoint(
                    "gen_ai.client.token.usage", tokens, {**gen_ai, "gen_ai.token.type": token_type}
                )
            )
    return points
