"""`console.session.recording()`: the one store + telemetry wiring of run, rerun, replay and demo.

A real executor runs against a scripted loopback tool into a DuckDB file in tmp_path, with a real
OTLP receiver on loopback; the block then fails, and both must still be closed.
"""

from __future__ import annotations

import threading

import pytest

from console.session import recording
from executor.plan import parse_plan
from executor.runtime import PlanExecutor
from executor.telemetry import TelemetryConfigError
from store.queries import open_store
from tests.support.otlp_receiver import OTLPReceiver
from tests.support.plans import capability, plan, run_cli, step, write_plan
from tests.support.tool_server import ToolReply


class BlockFailed(RuntimeError):
    pass


def quote_document(tool_server) -> dict:
    tool_server.script("/capabilities/quote", ToolReply.ok({"price": 1}))
    return plan(
        tool_server.base_url,
        {"quote": capability("quote")},
        [step("step-1", "quote", {"symbol": "TSLA"})],
        query="quote TSLA",
    )


async def test_recording_closes_the_store_and_the_exporter_when_the_block_fails(
    tmp_path, tool_server
):
    db = tmp_path / "debug.duckdb"
    with OTLPReceiver() as receiver:
        env = {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint}
        with pytest.raises(BlockFailed), recording(db, env=env) as session:
            outcome = await PlanExecutor(
                parse_plan(quote_document(tool_server)), recorder=session.recorder, env={}
            ).run()
            raise BlockFailed("after the run")
        # The exporter was shut down (it exports on shutdown) and the store recorder closed
        # (closing ingests its journal), though the block raised.
        assert "orchestrator.execution" in receiver.span_names()
    assert session.stored
    assert session.exit_notice is None
    page = open_store(db).list_executions()
    assert [row.execution_id for row in page.executions] == [outcome.execution_id]


def test_recording_refuses_a_bad_otel_value_before_the_block_and_releases_the_store(tmp_path):
    db = tmp_path / "debug.duckdb"
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_TRACES_EXPORTER": "zipkin"}
    entered = False
    with pytest.raises(TelemetryConfigError), recording(db, env=env):
        entered = True
    assert not entered
    # The store recorder, opened first, was closed: its flushing thread has ended.
    assert "store-recorder" not in {thread.name for thread in threading.enumerate()}


def test_recording_without_a_store_records_nowhere(tmp_path, tool_server):
    with recording(None, telemetry=False) as session:
        assert not session.stored
    assert session.exit_notice is None


def test_run_no_store_through_the_cli_leaves_no_store(tmp_path, tool_server, monkeypatch):
    db = tmp_path / "store" / "debug.duckdb"
    monkeypatch.setenv("TRUVA_DB", str(db))
    result = run_cli("run", str(write_plan(tmp_path, quote_document(tool_server))), "--no-store")
    assert result.code == 0, result.stderr
    assert "execution " in result.stdout
    assert not db.exists()
