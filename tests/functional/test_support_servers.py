"""The loopback test servers behave as documented: scripts, envelopes, delays, drops, shutdown."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from typing import Any

import httpx
import openai
import pytest

from tests.support.llm_server import LLMReply, ScriptedLLMServer, computed_usage, prompt_text
from tests.support.tool_server import ScriptedToolServer, ToolReply

# --- ScriptedToolServer --------------------------------------------------------------------------


def test_tool_server_records_the_request_and_answers_ok(tool_server: ScriptedToolServer) -> None:
    tool_server.script("/capabilities/search", ToolReply.ok({"hotels": ["H1"]}))

    response = httpx.post(
        tool_server.url("/capabilities/search?page=2"),
        json={"city_code": "PAR"},
        headers={"X-Step-Id": "step-1"},
    )

    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    assert response.json() == {"success": True, "data": {"hotels": ["H1"]}}
    [received] = tool_server.received("/capabilities/search")
    assert received.method == "POST"
    assert received.path == "/capabilities/search"
    assert received.headers["x-step-id"] == "step-1"
    assert received.json == {"city_code": "PAR"}
    assert received.body == response.request.content


def test_tool_server_uses_replies_in_order_and_repeats_the_last(
    tool_server: ScriptedToolServer,
) -> None:
    tool_server.script(
        "/capabilities/quote",
        ToolReply.error(429, "RATE_LIMIT", "slow down", "RATE_LIMIT", retryable=True),
        ToolReply.error(503, "SERVICE_ERROR", "busy", "SERVICE_ERROR"),
    )
    tool_server.script("/capabilities/quote", ToolReply.ok(1), ToolReply.ok(2))

    statuses = [httpx.post(tool_server.url("/capabilities/quote")) for _ in range(5)]

    assert [r.status_code for r in statuses] == [429, 503, 200, 200, 200]
    assert [r.json().get("data") for r in statuses[2:]] == [1, 2, 2]
    assert len(tool_server.received("/capabilities/quote")) == 5


ERROR_ENVELOPE_CASES = [
    (
        "retryable_omitted_by_default",
        {},
        {"code": "BAD", "message": "bad city", "category": "INPUT_ERROR"},
    ),
    (
        "retryable_false",
        {"retryable": False},
        {"code": "BAD", "message": "bad city", "category": "INPUT_ERROR", "retryable": False},
    ),
    (
        "retryable_null",
        {"retryable": None},
        {"code": "BAD", "message": "bad city", "category": "INPUT_ERROR", "retryable": None},
    ),
    (
        "retryable_string",
        {"retryable": "false"},
        {"code": "BAD", "message": "bad city", "category": "INPUT_ERROR", "retryable": "false"},
    ),
    (
        "details_included",
        {"retryable": True, "details": {"retry_after": "2"}},
        {
            "code": "BAD",
            "message": "bad city",
            "category": "INPUT_ERROR",
            "retryable": True,
            "details": {"retry_after": "2"},
        },
    ),
]


@pytest.mark.parametrize(
    ("extra", "expected_error"),
    [c[1:] for c in ERROR_ENVELOPE_CASES],
    ids=[c[0] for c in ERROR_ENVELOPE_CASES],
)
def test_tool_error_envelope_fields(
    tool_server: ScriptedToolServer, extra: dict[str, Any], expected_error: dict[str, Any]
) -> None:
    tool_server.script("/c", ToolReply.error(400, "BAD", "bad city", "INPUT_ERROR", **extra))

    response = httpx.post(tool_server.url("/c"))

    assert response.status_code == 400
    assert json.loads(response.content) == {"success": False, "error": expected_error}


RAW_BODY_CASES = [
    ("text_sent_as_is", "upstream exploded", b"upstream exploded", "text/plain; charset=utf-8"),
    ("bytes_sent_as_is", b"\x00\x01not json", b"\x00\x01not json", "application/octet-stream"),
    ("json_text_sent_as_is", '{"success":false', b'{"success":false', "text/plain; charset=utf-8"),
    ("none_is_empty", None, b"", "application/json"),
]


@pytest.mark.parametrize(
    ("body", "expected_bytes", "content_type"),
    [c[1:] for c in RAW_BODY_CASES],
    ids=[c[0] for c in RAW_BODY_CASES],
)
def test_tool_reply_raw_bodies(
    tool_server: ScriptedToolServer, body: Any, expected_bytes: bytes, content_type: str
) -> None:
    tool_server.script("/raw", ToolReply(status=502, body=body))

    response = httpx.post(tool_server.url("/raw"))

    assert response.status_code == 502
    assert response.content == expected_bytes
    assert response.headers["content-type"] == content_type


def test_tool_reply_headers_are_sent(tool_server: ScriptedToolServer) -> None:
    tool_server.script(
        "/limited",
        ToolReply.error(429, "RATE_LIMIT", "later", "RATE_LIMIT", headers={"Retry-After": "3"}),
    )

    response = httpx.get(tool_server.url("/limited"))

    assert response.headers["retry-after"] == "3"
    assert tool_server.received("/limited")[0].method == "GET"


def test_unscripted_path_is_a_404_no_script_envelope(tool_server: ScriptedToolServer) -> None:
    response = httpx.post(tool_server.url("/capabilities/missing"), json={})

    assert response.status_code == 404
    error = response.json()["error"]
    assert response.json()["success"] is False
    assert error["code"] == "NO_SCRIPT"
    assert "POST /capabilities/missing" in error["message"]
    assert [r.path for r in tool_server.received()] == ["/capabilities/missing"]


DROP_CASES = [
    ("drop", ToolReply(drop=True)),
    ("drop_after_delay", ToolReply(delay_s=0.05, drop_after_delay=True)),
    ("drop_with_delay", ToolReply(delay_s=0.05, drop=True)),
]


@pytest.mark.parametrize("reply", [c[1] for c in DROP_CASES], ids=[c[0] for c in DROP_CASES])
def test_dropped_connection_is_a_transport_error(
    tool_server: ScriptedToolServer, reply: ToolReply
) -> None:
    tool_server.script("/flaky", reply, ToolReply.ok("recovered"))

    with pytest.raises(httpx.TransportError):
        httpx.post(tool_server.url("/flaky"), json={"n": 1})
    second = httpx.post(tool_server.url("/flaky"), json={"n": 2})

    assert second.json()["data"] == "recovered"
    assert [r.json for r in tool_server.received("/flaky")] == [{"n": 1}, {"n": 2}]


def test_delay_longer_than_client_timeout_times_out(tool_server: ScriptedToolServer) -> None:
    tool_server.script("/slow", ToolReply(delay_s=30, body={"success": True}))

    with pytest.raises(httpx.ReadTimeout):
        httpx.post(tool_server.url("/slow"), timeout=0.2)


async def test_a_delayed_reply_does_not_block_other_requests(
    tool_server: ScriptedToolServer,
) -> None:
    tool_server.script("/slow", ToolReply.ok("slow", delay_s=30))
    tool_server.script("/fast", ToolReply.ok("fast"))
    async with httpx.AsyncClient(timeout=60) as client:
        slow = asyncio.create_task(client.post(tool_server.url("/slow")))
        assert await asyncio.to_thread(tool_server.wait_for_requests, 1)

        fast = await client.post(tool_server.url("/fast"))

        assert fast.json()["data"] == "fast"
        assert not slow.done()
        slow.cancel()
        with pytest.raises(asyncio.CancelledError):
            await slow


@pytest.mark.serial  # a bound on wall-clock seconds
def test_close_interrupts_a_sleeping_handler() -> None:
    server = ScriptedToolServer()
    server.script("/slow", ToolReply.ok("never", delay_s=60))
    closer = threading.Thread(
        target=lambda: server.wait_for_requests(1) and server.close(), daemon=True
    )
    closer.start()
    started = time.perf_counter()

    with pytest.raises(httpx.TransportError):
        httpx.post(server.url("/slow"), timeout=60)
    closer.join(timeout=5)

    assert not closer.is_alive()
    assert time.perf_counter() - started < 5


# --- ScriptedLLMServer ---------------------------------------------------------------------------


def openai_client(server: ScriptedLLMServer, timeout: float = 5.0) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url, api_key="k", max_retries=0, timeout=timeout)


def test_llm_server_answers_a_chat_completion(llm_server: ScriptedLLMServer) -> None:
    llm_server.script('{"should_retry": false}')
    messages = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hello"}]

    completion = openai_client(llm_server).chat.completions.create(
        model="test-model", messages=messages
    )

    assert completion.object == "chat.completion"
    assert completion.id == "chatcmpl-scripted-1"
    assert completion.model == "test-model"
    assert completion.choices[0].message.content == '{"should_retry": false}'
    assert completion.choices[0].finish_reason == "stop"
    expected_usage = computed_usage("be brief\nhello", '{"should_retry": false}')
    assert completion.usage is not None
    assert completion.usage.model_dump(
        include={"prompt_tokens", "completion_tokens", "total_tokens"}
    ) == (expected_usage)
    [request] = llm_server.requests
    assert request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == "Bearer k"
    assert prompt_text(request.json) == "be brief\nhello"
    assert llm_server.prompts == ["be brief\nhello"]


def test_llm_server_routes_by_prompt_substring(llm_server: ScriptedLLMServer) -> None:
    llm_server.script("default answer")
    llm_server.script_for("convert_currency", "currency answer")
    client = openai_client(llm_server)

    def ask(prompt: str) -> str | None:
        completion = client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": prompt}]
        )
        return completion.choices[0].message.content

    assert ask("fix convert_currency please") == "currency answer"
    assert ask("fix convert_currency again") == "default answer"
    assert llm_server.pending() == 0


def test_exhausted_llm_script_answers_500(llm_server: ScriptedLLMServer) -> None:
    with pytest.raises(openai.InternalServerError) as raised:
        openai_client(llm_server).chat.completions.create(
            model="m", messages=[{"role": "user", "content": "x"}]
        )

    assert raised.value.status_code == 500
    assert "script exhausted: request #1 has no reply left" in str(raised.value)


LLM_FAILURE_CASES = [
    ("rate_limited", LLMReply(status=429, content="slow down"), openai.RateLimitError),
    ("server_error", LLMReply(status=503, content="overloaded"), openai.InternalServerError),
    ("dropped", LLMReply(drop=True), openai.APIConnectionError),
    ("too_slow", LLMReply(delay_s=30), openai.APITimeoutError),
]


@pytest.mark.parametrize(
    ("reply", "error_type"),
    [c[1:] for c in LLM_FAILURE_CASES],
    ids=[c[0] for c in LLM_FAILURE_CASES],
)
def test_llm_failures_reach_the_openai_client(
    llm_server: ScriptedLLMServer, reply: LLMReply, error_type: type[Exception]
) -> None:
    llm_server.script(reply)

    with pytest.raises(error_type):
        openai_client(llm_server, timeout=0.2).chat.completions.create(
            model="m", messages=[{"role": "user", "content": "x"}]
        )


def test_llm_reply_body_and_usage_overrides(llm_server: ScriptedLLMServer) -> None:
    raw_body = b'{"not": "a completion"}'
    llm_server.script(
        LLMReply(content="a", usage={"prompt_tokens": 1, "completion_tokens": 2}),
        LLMReply(body=raw_body),
    )
    with httpx.Client() as client:
        url = llm_server.base_url + "/chat/completions"
        first = client.post(url, json={"model": "m", "messages": []})
        second = client.post(url, json={"model": "m", "messages": []})

    assert first.json()["usage"] == {"prompt_tokens": 1, "completion_tokens": 2}
    assert second.content == raw_body


def test_llm_server_rejects_other_paths(llm_server: ScriptedLLMServer) -> None:
    response = httpx.get(llm_server.base_url + "/models")

    assert response.status_code == 404
    assert "serves POST /v1/chat/completions only, got GET /v1/models" in response.text
