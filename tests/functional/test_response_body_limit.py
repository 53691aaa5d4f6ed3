"""A tool's response body is read within `max_response_body_bytes` (counted decoded) and within
`timeout_s`: a body too long, a gzip bomb or a body that never ends is a failed request routed
as a `protocol` transport failure, promptly and in bounded memory; one of exactly the limit is
kept byte for byte."""

from __future__ import annotations

import asyncio
import json
import re
import time
import tracemalloc

import pytest

from executor.events import ListRecorder
from executor.plan import parse_plan
from executor.runtime import ExecutionOutcome, PlanExecutor
from tests.support.plans import capability, plan, run_subprocess, step, write_plan
from tests.support.tool_server import ToolReply

MIB = 1 << 20
LIMIT = MIB
PATH = "/capabilities/search"

# What a body past the limit leaves in a step's error; the count is where the read stopped.
TOO_LARGE = re.compile(
    r"request failed: ResponseTooLarge: the tool answered HTTP 200 with a body that passed "
    r"max_response_body_bytes \(1048576 bytes\) at ([0-9,]+) bytes; read stopped"
)


def _document(base_url: str, **config: object) -> dict:
    return plan(base_url, {"search": capability("search")},
                [step("step-1", "search", {"city": "Paris"})],
                config={"max_response_body_bytes": LIMIT, "max_attempts": 2, **config})


async def _run(base_url: str, **config: object) -> tuple[ExecutionOutcome, ListRecorder, float]:
    recorder = ListRecorder()
    executor = PlanExecutor(parse_plan(_document(base_url, **config)), recorder=recorder, env={})
    started = time.monotonic()
    outcome = await executor.run()
    return outcome, recorder, time.monotonic() - started


def _stopped_at(error: str | None) -> int:
    """The byte count a ResponseTooLarge error names (asserting the error is one)."""
    match = TOO_LARGE.fullmatch(error or "")
    assert match is not None, error
    return int(match.group(1).replace(",", ""))


def _assert_failed_as_too_large(outcome: ExecutionOutcome, recorder: ListRecorder) -> None:
    """Routed as a body that does not decode is: two `protocol` attempts, resent once, then
    `budget.attempts`; no status, headers or body kept for either."""
    (result,) = outcome.steps
    assert outcome.status == "failed"
    assert result.dispatch_count == 2
    assert [(a.status, a.transport_error, a.rule) for a in result.attempts] == [
        (0, "protocol", "transient.retry_same"), (0, "protocol", "budget.attempts")]
    stopped_at = _stopped_at(result.error)
    assert LIMIT < stopped_at <= LIMIT + 64 * 1024
    responded = recorder.of_kind("attempt_responded")
    assert [(e.status, e.response_headers, e.response_body) for e in responded] == [
        (0, {}, b""), (0, {}, b"")]
    assert all(_stopped_at(e.transport_error_message) for e in responded)


async def test_a_body_past_the_limit_is_a_failed_request_routed_as_protocol(tool_server):
    tool_server.script(PATH, ToolReply(status=200, body=b"x" * (2 * MIB)))

    outcome, recorder, elapsed_s = await _run(tool_server.base_url)

    _assert_failed_as_too_large(outcome, recorder)
    assert elapsed_s < 10


@pytest.mark.serial
async def test_a_gzip_bomb_stops_at_the_limit_in_bounded_memory(tool_server):
    bomb = ToolReply.gzip_bomb(100 * MIB)
    assert len(bomb.body) < MIB  # it is the expansion that is large, not what is sent
    tool_server.script(PATH, bomb)

    tracemalloc.start()
    try:
        outcome, recorder, elapsed_s = await _run(tool_server.base_url)
        _, peak_bytes = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()

    _assert_failed_as_too_large(outcome, recorder)
    assert peak_bytes < 50 * MIB  # the old read held all 100 MiB (and a copy)
    assert elapsed_s < 10


async def test_a_gzip_body_that_decodes_to_one_byte_past_the_limit_is_too_large(tool_server):
    # Compressed, it is far under the limit: the limit counts the decoded body.
    tool_server.script(PATH, ToolReply.gzipped(ToolReply.ok_of_size(LIMIT + 1).body))

    outcome, recorder, _ = await _run(tool_server.base_url)

    _assert_failed_as_too_large(outcome, recorder)


async def test_an_endless_stream_stops_at_the_limit_and_the_connection_is_dropped(tool_server):
    tool_server.script(PATH, ToolReply.endless())

    outcome, recorder, elapsed_s = await _run(tool_server.base_url)

    _assert_failed_as_too_large(outcome, recorder)
    assert elapsed_s < 10
    for _ in range(500):  # the server notices the hang-up at its next write
        if tool_server.stream_hangups == 2:
            break
        await asyncio.sleep(0.01)
    assert tool_server.stream_hangups == 2


async def test_a_slow_endless_stream_under_the_limit_is_stopped_by_timeout_s(tool_server):
    tool_server.script(PATH, ToolReply.endless(b"x" * 1024, interval_s=0.01))

    outcome, _, elapsed_s = await _run(tool_server.base_url, timeout_s=0.5, max_attempts=1)

    (result,) = outcome.steps
    assert [(a.transport_error, a.rule) for a in result.attempts] == [
        ("timeout", "budget.attempts")]
    assert result.error == "request no response within timeout_s=0.5"
    assert elapsed_s < 5


@pytest.mark.serial
async def test_cancel_is_heard_while_an_endless_stream_is_read(tool_server):
    tool_server.script(PATH, ToolReply.endless())
    executor = PlanExecutor(parse_plan(_document(tool_server.base_url,
                                                 max_response_body_bytes=1 << 30)), env={})
    task = asyncio.create_task(executor.run())
    await asyncio.to_thread(tool_server.wait_for_requests, 1)
    await asyncio.sleep(0.05)  # the body is arriving
    started = time.monotonic()

    executor.cancel()
    outcome = await task

    assert time.monotonic() - started < 1.0
    assert outcome.status == "cancelled"
    assert [(a.rule, a.transport_error) for a in outcome.steps[0].attempts] == [
        ("cancel.in_flight", "cancelled")]


@pytest.mark.parametrize("encoded", ["identity", "gzip"])
async def test_a_body_of_exactly_the_limit_is_kept_byte_for_byte(tool_server, encoded):
    exact = ToolReply.ok_of_size(LIMIT)
    tool_server.script(PATH, exact if encoded == "identity" else ToolReply.gzipped(exact.body))

    outcome, recorder, _ = await _run(tool_server.base_url)

    (result,) = outcome.steps
    assert (result.status, result.final_rule) == ("succeeded", "success.2xx")
    assert result.result == {"success": True, "data": "x" * (LIMIT - 29)}
    (responded,) = recorder.of_kind("attempt_responded")
    assert len(responded.response_body) == LIMIT
    assert responded.response_body == exact.body


async def test_an_unsafe_capability_is_not_resent_after_a_body_past_the_limit(tool_server):
    tool_server.script(PATH, ToolReply(status=200, body=b"x" * (2 * MIB)))
    document = plan(tool_server.base_url, {"search": capability("search", side_effects="unsafe")},
                    [step("step-1", "search", {})],
                    config={"max_response_body_bytes": LIMIT})  # fmt: skip

    outcome = await PlanExecutor(parse_plan(document), env={}).run()

    (result,) = outcome.steps
    assert [(a.transport_error, a.rule) for a in result.attempts] == [
        ("protocol", "side_effects.unsafe_resend")]
    assert result.dispatch_count == 1


def test_run_reports_a_body_past_the_limit_in_one_line_and_exits_0(tool_server, tmp_path):
    tool_server.script(PATH, ToolReply(status=200, body=b"x" * (2 * MIB)))
    path = write_plan(tmp_path, _document(tool_server.base_url))

    ran = run_subprocess("run", str(path), "--json", "--no-store")

    assert ran.returncode == 0, ran.stderr  # the run completed (docs/run.md)
    assert ran.stderr == ""
    document = json.loads(ran.stdout)
    assert document["status"] == "failed"
    (result,) = document["steps"]
    assert [(a["transport_error"], a["rule"]) for a in result["attempts"]] == [
        ("protocol", "transient.retry_same"), ("protocol", "budget.attempts")]
    assert LIMIT < _stopped_at(result["error"]) <= LIMIT + 64 * 1024


def test_run_refuses_a_bad_limit_naming_the_key(tool_server, tmp_path):
    document = _document(tool_server.base_url, max_response_body_bytes=0)

    ran = run_subprocess("run", str(write_plan(tmp_path, document)), "--no-store")

    assert ran.returncode == 2
    assert ran.stderr.strip().endswith(
        "plan.json: config.max_response_body_bytes: expected an integer >= 1, got 0")
    assert not tool_server.received()
