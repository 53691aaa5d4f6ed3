"""`truva-console run` records into a real DuckDB file, byte-exact and complete.

Executions recorded through the executor against loopback tool and LLM servers are read back
through the query API and with plain DuckDB SQL, including every example query of
docs/store.md.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import duckdb
import pytest

from store.queries import open_store
from tests.support.llm_server import LLMReply
from tests.support.plans import capability, plan, run_cli, step, write_plan
from tests.support.tool_server import ToolReply

DOCS = Path(__file__).resolve().parents[2] / "docs" / "store.md"
BINARY_BODY = b"\xff\xfe\x00binary\x80 not utf-8"


def _analysis(changes: dict) -> str:
    return json.dumps({"should_retry": True, "reason": "fix", "suggested_changes": changes,
                       "is_transient_error": False})


@pytest.fixture
def recorded(tmp_path, tool_server, llm_server):
    """A store holding one execution with a correction, a binary body, a 429, a 401 and a skip."""
    big_error = "x" * (5 * 1024 * 1024)
    tool_server.script("/capabilities/search_hotels",
                       ToolReply.error(400, "INVALID_CITY", "INVALID CITY CODE: PARIS " + big_error,
                                       "INPUT_ERROR", retryable=True),
                       ToolReply.ok({"hotels": ["H1"]}))
    tool_server.script("/capabilities/binary", ToolReply(status=500, body=BINARY_BODY),
                       ToolReply.ok({"ok": True}))
    tool_server.script("/capabilities/quote",
                       ToolReply.error(429, "RATE_LIMIT", "slow", "RATE_LIMIT",
                                       headers={"Retry-After": "0"}),
                       ToolReply.ok({"price": 468.285}))
    tool_server.script("/capabilities/flights", ToolReply.error(401, "AUTH", "expired key"))
    llm_server.script(_analysis({"city_code": "PAR"}))
    document = plan(
        tool_server.base_url,
        {name: capability(name) for name in ("search_hotels", "binary", "quote", "flights")},
        [step("step-1", "search_hotels", {"city_code": "PARIS"}),
         step("step-2", "binary", {"a": 1}),
         step("step-3", "quote", {"symbol": "TSLA"}),
         step("step-4", "flights", {"from": "CDG"}),
         step("step-5", "quote", {"s": "{{step-4.data.x}}"}, depends_on=["step-4"])],
        llm_base_url=llm_server.base_url, query="Find hotels in Paris")
    document["tools"]["demo"]["headers"] = {"Authorization": "Bearer sk-very-secret-42"}
    db = tmp_path / "store" / "debug.duckdb"
    result = run_cli("run", str(write_plan(tmp_path, document)), "--json", "--db", str(db))
    assert result.code == 0, result.stderr
    return db, result.json(), big_error


def test_attempts_are_byte_exact_and_complete(recorded):
    db, doc, _ = recorded
    detail = open_store(db).get_execution(doc["execution_id"])
    assert detail.execution.status == "partial"
    binary = [a for a in detail.step("step-2").attempts]
    assert binary[0].response_body == BINARY_BODY
    assert binary[0].rule_id == "transient.retry_same"
    hotels = detail.step("step-1").attempts
    assert [(a.action, a.rule_id) for a in hotels] == [
        ("retry_corrected", "analyzer.accept"), ("success", "success.2xx")]
    assert len(hotels[0].response_body) > 5 * 1024 * 1024
    assert json.loads(hotels[1].request_body) == {"city_code": "PAR"}
    assert [s.status for s in detail.steps] == [
        "succeeded", "succeeded", "succeeded", "failed", "skipped"]


def test_llm_prompt_of_5mb_is_stored_whole(recorded):
    db, doc, big_error = recorded
    detail = open_store(db).get_execution(doc["execution_id"])
    (call,) = detail.step("step-1").attempts[0].llm_calls
    prompt = call.messages[0]["content"]
    assert big_error in prompt
    assert call.site == "error_analysis"
    assert call.total_tokens and call.total_tokens > 0
    assert json.loads(call.request_body)["messages"][0]["content"] == prompt
    assert json.loads(call.raw_text)["suggested_changes"] == {"city_code": "PAR"}


def test_secrets_in_outgoing_headers_never_reach_the_disk(recorded):
    db, _, _ = recorded
    for path in [db, *db.parent.rglob("*")]:
        if path.is_file():
            assert b"sk-very-secret-42" not in path.read_bytes(), path


def test_the_docs_example_queries_answer_on_a_recorded_store(recorded):
    db, doc, _ = recorded
    open_store(db).get_execution(doc["execution_id"])  # ingest anything still spooled
    queries = re.findall(r"```sql\n(.*?)```", DOCS.read_text(encoding="utf-8"), re.S)
    assert len(queries) >= 5
    answered = 0
    with duckdb.connect(str(db), read_only=True) as conn:
        for query in queries:
            sql = query.replace("…", doc["execution_id"])
            rows = conn.execute(sql).fetchall()
            answered += bool(rows)
    assert answered >= 4


def test_the_docs_sql_command_examples_run(recorded):
    db, doc, _ = recorded
    open_store(db).get_execution(doc["execution_id"])
    commands = re.findall(r'^truva-console sql (?:--format \w+ +(?:-o \S+ +)?)?"(.+)"',
                          DOCS.read_text(encoding="utf-8"), re.M)  # fmt: skip
    assert len(commands) >= 4
    with duckdb.connect(str(db), read_only=True) as conn:
        for query in commands:
            assert conn.execute(query).fetchall(), query


def test_llm_response_headers_are_recorded_redacted_and_read_in_the_text_view(
    tmp_path, tool_server, llm_server
):
    tool_server.script("/capabilities/search_hotels",
                       ToolReply.error(400, "INVALID_CITY", "INVALID CITY CODE: PARIS",
                                       "INPUT_ERROR", retryable=True),
                       ToolReply.ok({"hotels": ["H1"]}))  # fmt: skip
    llm_server.script(
        LLMReply(status=503, content="busy", headers={"Retry-After": "0"}),
        LLMReply(content=_analysis({"city_code": "PAR"}),
                 headers={"X-Request-ID": "req-42", "x-litellm-response-cost": "0.0012",
                          "Set-Cookie": "session=9fA3kQ7zL2mN8pR4tV6x"}),
    )  # fmt: skip
    document = plan(tool_server.base_url, {"search_hotels": capability("search_hotels")},
                    [step("step-1", "search_hotels", {"city_code": "PARIS"})],
                    llm_base_url=llm_server.base_url)  # fmt: skip
    db = tmp_path / "debug.duckdb"
    result = run_cli("run", str(write_plan(tmp_path, document)), "--json", "--db", str(db))
    assert result.code == 0, result.stderr

    detail = open_store(db).get_execution(result.json()["execution_id"])
    busy, answered = detail.step("step-1").attempts[0].llm_calls
    assert busy.response_headers["retry-after"] == "0"
    assert answered.response_headers["x-request-id"] == "req-42"
    assert answered.response_headers["set-cookie"] == "[REDACTED]"
    with duckdb.connect(str(db), read_only=True) as conn:
        rows = conn.execute(
            "SELECT response_status, request_id, retry_after, response_cost FROM llm_calls_text "
            "ORDER BY called_at"
        ).fetchall()
    assert rows == [(503, None, "0", None), (200, "req-42", None, "0.0012")]
    assert b"9fA3kQ7zL2mN8pR4tV6x" not in db.read_bytes()
