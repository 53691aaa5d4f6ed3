"""The LLM layers through the real openai client against a scripted loopback server."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest

from executor.llm import (
    AnalyzerVerdict,
    ContextualReResolver,
    ErrorAnalyzer,
    LayerResult,
    LegacyCorrectionRequest,
    LegacyCorrector,
    LegacyVerdict,
    LLMClient,
    LLMSettings,
    ResolverVerdict,
    invoke_legacy_callback,
)
from tests.support.llm_server import LLMReply, ScriptedLLMServer, computed_usage, prompt_text
from tests.support.tool_server import refused_port


def settings_for(base_url: str, timeout_s: float = 5.0) -> LLMSettings:
    return LLMSettings(
        base_url=base_url, api_key="test-key", model="test-model", timeout_s=timeout_s
    )


@pytest.fixture
async def llm_client(llm_server: ScriptedLLMServer) -> AsyncIterator[LLMClient]:
    client = LLMClient(settings_for(llm_server.base_url))
    yield client
    await client.aclose()


# --- layer 3: error analyzer ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AnalyzerCase:
    http_status: int
    error_response: str
    original_request: dict[str, Any]
    user_query: str
    capability_name: str
    answer: str
    expected: AnalyzerVerdict


ANALYZER_CASES = [
    (
        "tokio_to_tokyo",
        AnalyzerCase(
            400,
            '{"success": false, "error": {"code": "CITY_NOT_FOUND",'
            ' "message": "unknown city Tokio"}}',
            {"city": "Tokio"},
            "What's the weather in Tokyo?",
            "get_weather",
            '{"should_retry": true, "reason": "Tokio is a typo of Tokyo",'
            ' "suggested_changes": {"city": "Tokyo"}, "is_transient_error": false}',
            AnalyzerVerdict(True, "Tokio is a typo of Tokyo", {"city": "Tokyo"}, False),
        ),
    ),
    (
        "paris_to_par",
        AnalyzerCase(
            400,
            '{"error": "INVALID CITY CODE: PARIS"}',
            {"city_code": "PARIS", "check_in": "2026-04-01"},
            "Find hotels in Paris for April 1-3",
            "search_hotels",
            '{"should_retry": true, "reason": "PARIS is not a valid IATA city code.'
            ' The correct code for Paris is PAR.", "suggested_changes": {"city_code": "PAR"},'
            ' "is_transient_error": false}',
            AnalyzerVerdict(
                True,
                "PARIS is not a valid IATA city code. The correct code for Paris is PAR.",
                {"city_code": "PAR"},
                False,
            ),
        ),
    ),
    (
        "date_format_422",
        AnalyzerCase(
            422,
            '{"error": "check_in must be YYYY-MM-DD"}',
            {"check_in": "15/01/2024"},
            "Book for January 15th 2024",
            "book_room",
            '{"should_retry": true, "reason": "wrong date format",'
            ' "suggested_changes": {"check_in": "2024-01-15"}}',
            AnalyzerVerdict(True, "wrong date format", {"check_in": "2024-01-15"}, False),
        ),
    ),
    (
        "version_conflict_409",
        AnalyzerCase(
            409,
            '{"error": "version v1 is retired, use v2"}',
            {"version": "v1"},
            "Deploy the service",
            "deploy",
            '{"should_retry": true, "reason": "v1 retired",'
            ' "suggested_changes": {"version": "v2"}}',
            AnalyzerVerdict(True, "v1 retired", {"version": "v2"}, False),
        ),
    ),
    (
        "genuinely_missing_404",
        AnalyzerCase(
            404,
            '{"error": "order 12345 does not exist"}',
            {"order_id": "12345"},
            "Cancel order 12345",
            "cancel_order",
            '{"should_retry": false, "reason": "The order genuinely does not exist",'
            ' "suggested_changes": {}, "is_transient_error": false}',
            AnalyzerVerdict(False, "The order genuinely does not exist", {}, False),
        ),
    ),
]


@pytest.mark.parametrize("case", [c[1] for c in ANALYZER_CASES], ids=[c[0] for c in ANALYZER_CASES])
async def test_analyzer_verdicts(
    llm_server: ScriptedLLMServer, llm_client: LLMClient, case: AnalyzerCase
) -> None:
    llm_server.script(case.answer)

    result = await ErrorAnalyzer(llm_client).analyze(
        http_status=case.http_status,
        error_response=case.error_response,
        original_request=case.original_request,
        user_query=case.user_query,
        capability_name=case.capability_name,
        capability_description="",
        step_id="step-1",
    )

    assert result.verdict == case.expected
    assert result.parse_error is None
    assert result.parsed == json.loads(case.answer)
    assert result.exchange.site == "error_analysis"
    assert result.exchange.raw_text == case.answer
    [request] = llm_server.requests
    assert f'<error_response status="{case.http_status}">' in prompt_text(request.json)
    assert f'<capability name="{case.capability_name}">' in prompt_text(request.json)


async def test_analyzer_request_is_deterministic_and_byte_exact(
    llm_server: ScriptedLLMServer, llm_client: LLMClient
) -> None:
    llm_server.script('{"should_retry": false}')

    result = await analyze(llm_client)

    [request] = llm_server.requests
    exchange = result.exchange
    assert exchange.request_body == request.body
    assert request.json["temperature"] == 0.0
    assert request.json["max_tokens"] == 500
    assert request.json["model"] == "test-model"
    assert (exchange.temperature, exchange.max_tokens) == (0.0, 500)
    assert list(exchange.messages) == request.json["messages"]
    assert exchange.base_url == llm_server.base_url
    assert exchange.response_status == 200
    assert json.loads(exchange.response_body)["choices"][0]["message"]["content"] == (
        '{"should_retry": false}'
    )


async def test_token_usage_is_recorded(
    llm_server: ScriptedLLMServer, llm_client: LLMClient
) -> None:
    answer = '{"should_retry": false, "reason": "no"}'
    llm_server.script(
        answer, LLMReply(content=answer, usage={"prompt_tokens": 7, "completion_tokens": 3})
    )

    computed = await analyze(llm_client)
    without_total = await analyze(llm_client)

    expected = computed_usage(llm_server.prompts[0], answer)
    assert (computed.exchange.prompt_tokens, computed.exchange.completion_tokens) == (
        expected["prompt_tokens"],
        expected["completion_tokens"],
    )
    assert computed.exchange.total_tokens == expected["total_tokens"]
    assert (
        without_total.exchange.prompt_tokens,
        without_total.exchange.completion_tokens,
        without_total.exchange.total_tokens,
    ) == (7, 3, 10)


async def test_response_bytes_are_kept_exactly(
    llm_server: ScriptedLLMServer, llm_client: LLMClient
) -> None:
    content = json.dumps('{"should_retry": false, "reason": "\\u00e9t\\u00e9"}')
    raw = (
        '{"id":"x","object":"chat.completion","created":1,"model":"m",'
        f'"choices":[{{"index":0,"message":{{"role":"assistant","content":{content}}},'
        '"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":2,'
        '"total_tokens":9}}  \n'
    ).encode()
    llm_server.script(LLMReply(body=raw))

    result = await analyze(llm_client)

    assert result.exchange.response_body == raw
    assert result.verdict == AnalyzerVerdict(False, "été", {}, False)
    assert result.exchange.total_tokens == 9


async def test_clock_and_latency_come_from_the_injected_clocks(
    llm_server: ScriptedLLMServer,
) -> None:
    llm_server.script('{"should_retry": false}')
    readings = iter([10.0, 10.25])
    client = LLMClient(
        settings_for(llm_server.base_url),
        clock=lambda: 1_700_000_000.0,
        monotonic=lambda: next(readings),
    )
    try:
        result = await analyze(client)
    finally:
        await client.aclose()

    assert result.exchange.started_at == 1_700_000_000.0
    assert result.exchange.latency_ms == 250.0


async def test_error_text_is_redacted_on_the_wire(
    llm_server: ScriptedLLMServer, llm_client: LLMClient
) -> None:
    llm_server.script('{"should_retry": false}')

    await analyze(llm_client, error_response="upstream said: api_key=top-secret status=400")

    [request] = llm_server.requests
    assert b"top-secret" not in request.body
    assert "api_key=[REDACTED]" in prompt_text(request.json)


# --- malformed answers and LLM failures -----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FailureCase:
    reply: LLMReply | None
    timeout_s: float = 5.0
    parse_error: str | None = None
    error: str | None = None
    response_status: int | None = 200
    parsed: dict[str, Any] | None = None


CONNECTION_FAILED = "LLM connection to http://127.0.0.1:"
FAILURE_CASES = [
    (
        "not_json",
        FailureCase(LLMReply("Retry with Tokyo."), parse_error="no JSON object found in response"),
    ),
    (
        "wrong_type_should_retry",
        FailureCase(
            LLMReply('{"should_retry": "true", "suggested_changes": {"city": "Tokyo"}}'),
            parse_error='should_retry must be a JSON boolean or absent, got string "true"',
            parsed={"should_retry": "true", "suggested_changes": {"city": "Tokyo"}},
        ),
    ),
    (
        "wrong_type_suggested_changes",
        FailureCase(
            LLMReply('{"should_retry": true, "suggested_changes": ["Tokyo"]}'),
            parse_error="suggested_changes must be a JSON object, null or absent, "
            'got array ["Tokyo"]',
            parsed={"should_retry": True, "suggested_changes": ["Tokyo"]},
        ),
    ),
    (
        "unbalanced",
        FailureCase(
            LLMReply('{"should_retry": true'), parse_error="invalid JSON structure in response"
        ),
    ),
    ("empty_content", FailureCase(LLMReply(""), parse_error="response content is empty")),
    ("null_content", FailureCase(LLMReply(None), parse_error="response content is empty")),
    (
        "llm_http_500",
        FailureCase(
            LLMReply("model crashed", status=500),
            error="LLM endpoint answered HTTP 500: model crashed",
            response_status=500,
        ),
    ),
    (
        "llm_http_429",
        FailureCase(
            LLMReply("quota", status=429),
            error="LLM endpoint answered HTTP 429: quota",
            response_status=429,
        ),
    ),
    (
        "body_not_json",
        FailureCase(
            LLMReply(body="<html>bad gateway</html>"), error="LLM response body is not JSON: "
        ),
    ),
    (
        "empty_choices",
        FailureCase(LLMReply(body='{"choices": []}'), error="LLM response has no choices"),
    ),
    (
        "slower_than_client_timeout",
        FailureCase(
            LLMReply(delay_s=30),
            timeout_s=0.2,
            error="LLM request timed out after 0.2 s",
            response_status=None,
        ),
    ),
    (
        "connection_dropped",
        FailureCase(LLMReply(drop=True), error=CONNECTION_FAILED, response_status=None),
    ),
    (
        "connection_refused",
        FailureCase(None, error=CONNECTION_FAILED, response_status=None),
    ),
]


@pytest.mark.parametrize("case", [c[1] for c in FAILURE_CASES], ids=[c[0] for c in FAILURE_CASES])
async def test_malformed_answers_and_llm_failures_mean_no_correction(
    llm_server: ScriptedLLMServer, case: FailureCase
) -> None:
    if case.reply is not None:
        llm_server.script(case.reply)
    with refused_port() as port:
        base_url = llm_server.base_url if case.reply is not None else f"http://127.0.0.1:{port}/v1"
        client = LLMClient(settings_for(base_url, timeout_s=case.timeout_s))
        try:
            result = await analyze(client)
        finally:
            await client.aclose()

    exchange = result.exchange
    assert result.verdict is None
    assert result.parsed == case.parsed
    assert exchange.response_status == case.response_status
    assert exchange.request_body, "the request bytes are recorded even when the call fails"
    if case.reply is not None:
        assert exchange.request_body == llm_server.requests[0].body
    if case.parse_error is None:
        assert result.parse_error is None
    else:
        assert result.parse_error == case.parse_error
        assert exchange.error is None
        assert exchange.raw_text == case.reply.content
    if case.error is None:
        assert exchange.error is None
    else:
        assert exchange.error is not None and exchange.error.startswith(case.error)
    if case.reply is not None and case.reply.body is not None:
        assert exchange.response_body == case.reply.body.encode()
    if case.response_status not in (None, 200):
        assert json.loads(exchange.response_body)["error"]["message"] == case.reply.content
    if case.response_status is None:
        assert exchange.response_body == b""


async def test_fenced_json_answer_parses(
    llm_server: ScriptedLLMServer, llm_client: LLMClient
) -> None:
    llm_server.script(
        '```json\n{"should_retry": true, "suggested_changes": {"city": "Tokyo"}}\n```'
    )

    result = await analyze(llm_client)

    assert result.verdict == AnalyzerVerdict(True, "", {"city": "Tokyo"}, False)


async def test_cancellation_propagates_out_of_a_layer(
    llm_server: ScriptedLLMServer, llm_client: LLMClient
) -> None:
    llm_server.script(LLMReply('{"should_retry": false}', delay_s=30))
    task = asyncio.create_task(analyze(llm_client))
    assert await asyncio.to_thread(llm_server.wait_for_requests, 1)

    task.cancel()

    with pytest.raises(asyncio.CancelledError):
        await task


# --- layer 4: contextual re-resolver -------------------------------------------------------------

CURRENCY_SCHEMA = {
    "type": "object",
    "properties": {
        "from": {"type": "string", "description": "Source currency code"},
        "to": {"type": "string", "description": "Target currency code"},
        "amount": {"type": "number", "description": "Amount to convert"},
    },
    "required": ["from", "to", "amount"],
}


async def re_resolve(client: LLMClient, **overrides: Any) -> LayerResult:
    arguments: dict[str, Any] = {
        "user_query": "Sell 100 Tesla shares and convert the proceeds to EUR",
        "source_data": {"symbol": "TSLA", "price": 468.285},
        "step_id": "step-2",
        "capability_name": "convert_currency",
        "capability_schema": CURRENCY_SCHEMA,
        "attempted_params": {"from": "USD", "to": "EUR", "amount": 0},
        "error_response": '{"error": {"message": "amount must be greater than 0"}}',
        "http_status": 400,
        "previous_errors": [],
    }
    arguments.update(overrides)
    return await ContextualReResolver(client).re_resolve(**arguments)


async def test_reresolver_computes_the_tesla_amount(
    llm_server: ScriptedLLMServer, llm_client: LLMClient
) -> None:
    llm_server.script(
        '{"should_retry": true, "analysis": "Computed 100 × 468.285 = 46828.5",'
        ' "corrected_parameters": {"from": "USD", "to": "EUR", "amount": 46828.5}}'
    )

    result = await re_resolve(llm_client)

    assert result.verdict == ResolverVerdict(
        should_retry=True,
        corrected_parameters={"from": "USD", "to": "EUR", "amount": 46828.5},
        analysis="Computed 100 × 468.285 = 46828.5",
    )
    assert result.exchange.site == "semantic_retry"
    [request] = llm_server.requests
    assert (request.json["temperature"], request.json["max_tokens"]) == (0.0, 1000)
    assert result.exchange.request_body == request.body
    prompt = prompt_text(request.json)
    assert '<source_data>\n{"price":468.285,"symbol":"TSLA"}\n</source_data>' in prompt
    assert "- amount (number (required)): Amount to convert" in prompt


async def test_reresolver_cannot_fix_and_null_parameters(
    llm_server: ScriptedLLMServer, llm_client: LLMClient
) -> None:
    llm_server.script(
        '{"should_retry": false, "analysis": "No stock symbol in source data",'
        ' "corrected_parameters": null}'
    )

    result = await re_resolve(llm_client, source_data={}, previous_errors=["amount is required"])

    assert result.verdict == ResolverVerdict(False, {}, "No stock symbol in source data")
    prompt = llm_server.prompts[0]
    assert "<previous_failed_attempts>\namount is required\n</previous_failed_attempts>" in prompt


async def test_reresolver_malformed_answer_is_no_correction(
    llm_server: ScriptedLLMServer, llm_client: LLMClient
) -> None:
    llm_server.script('{"should_retry": true, "corrected_parameters": "amount=46828.5"}')

    result = await re_resolve(llm_client)

    assert result.verdict is None
    assert result.parse_error == (
        'corrected_parameters must be a JSON object, null or absent, got string "amount=46828.5"'
    )


# --- legacy correction callback ------------------------------------------------------------------

LEGACY_REQUEST = LegacyCorrectionRequest(
    step_id="step-3",
    tool="weather",
    capability="get_weather",
    parameters={"lat": "35.6897", "lon": "139.6917"},
    error_text="component returned status 400: json: cannot unmarshal string into float64",
    schema={"properties": {"lat": {"type": "number"}, "lon": {"type": "number"}}},
)


async def test_legacy_corrector_calls_the_llm(
    llm_server: ScriptedLLMServer, llm_client: LLMClient
) -> None:
    llm_server.script('```json\n{"lat": 35.6897, "lon": 139.6917}\n```')

    outcome = await invoke_legacy_callback(LegacyCorrector(llm_client), LEGACY_REQUEST)

    assert outcome.corrected_parameters == {"lat": 35.6897, "lon": 139.6917}
    assert outcome.error is None
    assert outcome.layer_result is not None
    assert outcome.layer_result.verdict == LegacyVerdict({"lat": 35.6897, "lon": 139.6917})
    exchange = outcome.layer_result.exchange
    assert (exchange.site, exchange.temperature, exchange.max_tokens) == ("correction", 0.0, 1000)
    [request] = llm_server.requests
    assert (request.json["temperature"], request.json["max_tokens"]) == (0.0, 1000)
    assert "Tool: weather\nCapability: get_weather\nError: component returned status 400" in (
        prompt_text(request.json)
    )


async def test_legacy_corrector_failure_is_no_correction(
    llm_server: ScriptedLLMServer, llm_client: LLMClient
) -> None:
    llm_server.script(LLMReply("down", status=503))

    outcome = await invoke_legacy_callback(LegacyCorrector(llm_client), LEGACY_REQUEST)

    assert outcome.corrected_parameters is None
    assert outcome.error == "LLM endpoint answered HTTP 503: down"
    assert outcome.layer_result is not None and outcome.layer_result.verdict is None


async def test_legacy_callback_is_pluggable_with_a_plain_coroutine(
    llm_server: ScriptedLLMServer,
) -> None:
    seen: list[LegacyCorrectionRequest] = []

    async def unquote_numbers(request: LegacyCorrectionRequest) -> dict[str, Any]:
        seen.append(request)
        return {key: float(value) for key, value in request.parameters.items()}

    outcome = await invoke_legacy_callback(unquote_numbers, LEGACY_REQUEST)

    assert outcome.corrected_parameters == {"lat": 35.6897, "lon": 139.6917}
    assert seen == [LEGACY_REQUEST]
    assert outcome.layer_result is None
    assert llm_server.requests == []


async def analyze(client: LLMClient, **overrides: Any) -> LayerResult:
    arguments: dict[str, Any] = {
        "http_status": 400,
        "error_response": '{"error": "unknown city Tokio"}',
        "original_request": {"city": "Tokio"},
        "user_query": "What's the weather in Tokyo?",
        "capability_name": "get_weather",
        "capability_description": "Current weather for a city.",
        "step_id": "step-1",
    }
    arguments.update(overrides)
    return await ErrorAnalyzer(client).analyze(**arguments)
