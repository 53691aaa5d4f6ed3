"""Spans rebuilt from the store (`publish`) carry exactly the times the live spans did."""

from __future__ import annotations

from typing import Any

from tests.support.otlp_receiver import OTLPReceiver
from tests.support.plans import capability, plan, run_cli, step, write_plan
from tests.support.tool_server import ToolReply


def span_times(receiver: OTLPReceiver) -> dict[str, Any]:
    """span id → (start, end, the times of its events)."""
    return {
        span.span_id.hex(): (span.start_time_unix_nano, span.end_time_unix_nano,
                             [event.time_unix_nano for event in span.events])
        for _, span in receiver.spans()
    }  # fmt: skip


def test_published_spans_have_the_live_spans_times_to_the_nanosecond(
    tmp_path, tool_server, monkeypatch
):
    # A retry after a 503 gives attempt spans, backoff events and a decision per attempt.
    tool_server.script(
        "/capabilities/quote", ToolReply.error(503, "DOWN", "busy"), ToolReply.ok({"price": 1})
    )
    document = plan(tool_server.base_url, {"quote": capability("quote")},
                    [step("step-1", "quote", {"symbol": "TSLA"})],
                    config={"initial_delay_ms": 5, "max_delay_ms": 10})
    with OTLPReceiver() as live:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", live.endpoint)
        result = run_cli("run", str(write_plan(tmp_path, document)), "--json")
        assert result.code == 0, result.stderr
        live_times = span_times(live)
    execution_id = result.json()["execution_id"]
    with OTLPReceiver() as published:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", published.endpoint)
        assert run_cli("publish", execution_id).code == 0
        published_times = span_times(published)
    assert len(live_times) == 4 and sum(len(events) for *_, events in live_times.values())
    assert published_times == live_times
