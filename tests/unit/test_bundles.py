"""Trace bundle pieces: value codec, member-name safety, redaction, events rebuilt from rows."""

from __future__ import annotations

import json
import math

import pytest

from executor.events import ListRecorder
from executor.redact import REDACTED
from store.bundle import (
    REDACTED_COLUMNS,
    BundleValueError,
    ColumnSpec,
    decode_value,
    encode_value,
    events_from_rows,
    redact_body,
    redact_row,
    store_table_specs,
    unsafe_member_reason,
)
from store.schema import STORE_TABLES

SECRET = "sk-live-TOPSECRET-0123456789abcdef"


def column(kind: str, *, nullable: bool = True) -> ColumnSpec:
    return ColumnSpec(name="c", type=kind, nullable=nullable)


# ------------------------------------------------------------------------------ table specs


def test_table_specs_are_the_store_tables_with_their_keys():
    specs = {spec.name: spec for spec in store_table_specs()}

    assert tuple(specs) == STORE_TABLES
    assert specs["attempts"].primary_key == ("execution_id", "step_id", "n")
    assert specs["llm_calls"].primary_key == ("call_id",)
    assert specs["events"].primary_key == ()
    assert specs["attempts"].member == "tables/attempts.jsonl"
    types = {c.name: c.type for c in specs["attempts"].columns}
    assert (types["request_body"], types["decision"], types["started_at"]) == (
        "BLOB",
        "JSON",
        "TIMESTAMP WITH TIME ZONE",
    )
    assert "search_text" not in types  # derived: import computes it
    assert {c.name: c.nullable for c in specs["events"].columns}["seq"] is False


def test_every_redacted_column_exists():
    columns = {spec.name: set(spec.column_names) for spec in store_table_specs()}
    unknown = [
        f"{table}.{name}"
        for table, rules in REDACTED_COLUMNS.items()
        for name in rules
        if name not in columns.get(table, set())
    ]
    assert unknown == []


# ---------------------------------------------------------------------------- value codec

ROUND_TRIPS = [
    ("VARCHAR", "héllo ✓"),
    ("JSON", '{"a":  [1, 2.5, "ü"]}'),
    ("TIMESTAMP", "2026-01-01 00:00:00"),
    ("TIMESTAMP", "2026-01-01 00:00:00.123456"),
    ("BLOB", b"\xff\xfe\x00binary"),
    ("BLOB", b""),
    ("INTEGER", -(2**31)),
    ("BIGINT", 2**63 - 1),
    ("DOUBLE", 542.0735),
    ("DOUBLE", math.inf),
    ("DOUBLE", -math.inf),
    ("BOOLEAN", False),
    ("VARCHAR[]", ["step-1", None]),
    ("VARCHAR", None),
]


@pytest.mark.parametrize(
    ("kind", "value"),
    ROUND_TRIPS,
    ids=[
        "text-unicode", "json-text-kept-verbatim", "timestamp-whole-second",
        "timestamp-microseconds", "blob-non-utf8", "blob-empty", "integer-min", "bigint-max",
        "double", "double-infinity", "double-minus-infinity", "boolean", "text-list",
        "null",
    ],
)  # fmt: skip
def test_values_survive_a_json_line(kind, value):
    encoded = encode_value(column(kind), value)
    line = json.dumps(encoded, allow_nan=False)

    assert decode_value(column(kind), json.loads(line)) == value


def test_nan_survives_a_json_line():
    encoded = encode_value(column("DOUBLE"), math.nan)

    assert encoded == "NaN"
    assert math.isnan(decode_value(column("DOUBLE"), encoded))


BAD_VALUES = [
    ("VARCHAR", 5, "expected text, got 5"),
    ("VARCHAR", "\ud800", "not valid Unicode"),
    ("JSON", '{"a": ', "expected JSON text"),
    ("JSON", "NaN", "expected JSON text"),
    ("TIMESTAMP", "2026-01-01T00:00:00Z", "expected a timestamp"),
    ("TIMESTAMP", "2026-13-01 00:00:00", "expected a timestamp"),
    ("BLOB", "not base64!", "expected base64 text"),
    ("BLOB", "abc", "expected base64 text"),
    ("INTEGER", 2**31, "expected a 32-bit integer"),
    ("INTEGER", True, "expected a 32-bit integer"),
    ("INTEGER", 1.5, "expected a 32-bit integer"),
    ("BIGINT", 2**63, "expected a 64-bit integer"),
    ("DOUBLE", "1.5", "expected a number"),
    ("BOOLEAN", 1, "expected true or false"),
    ("VARCHAR[]", "step-1", "expected a list of text"),
    ("VARCHAR[]", [1], "expected a list of text"),
]


@pytest.mark.parametrize(
    ("kind", "value", "message"),
    BAD_VALUES,
    ids=[
        "text-number", "text-lone-surrogate", "json-truncated", "json-nan-token",
        "timestamp-iso-t-z", "timestamp-month-13", "blob-not-base64", "blob-bad-padding",
        "integer-overflow", "integer-boolean", "integer-float", "bigint-overflow", "double-text",
        "boolean-number", "list-scalar", "list-of-numbers",
    ],
)  # fmt: skip
def test_values_that_do_not_fit_their_column_are_refused(kind, value, message):
    with pytest.raises(BundleValueError, match=message):
        decode_value(column(kind), value)


def test_null_in_a_not_null_column_is_refused():
    with pytest.raises(BundleValueError, match="NOT NULL"):
        decode_value(column("BIGINT", nullable=False), None)


# ---------------------------------------------------------------------------- member names


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("tables/attempts.jsonl", None),
        ("manifest.json", None),
        ("../evil.txt", "'..' path component"),
        ("tables/../../evil", "'..' path component"),
        ("/etc/passwd", "absolute path"),
        ("C:/evil", "absolute path"),
        ("tables\\..\\evil", "backslash"),
        ("tables//x", "empty or '.' path component"),
        ("./manifest.json", "empty or '.' path component"),
        ("tables/", "empty or '.' path component"),
        ("", "empty name"),
        ("a\x00b", "NUL"),
    ],
    ids=[
        "plain-nested", "plain-top", "dotdot-leading", "dotdot-inner", "absolute-posix",
        "absolute-drive-letter", "backslash", "empty-component", "dot-component",
        "directory", "empty", "nul-byte",
    ],
)  # fmt: skip
def test_member_name_safety(name, reason):
    found = unsafe_member_reason(name)
    if reason is None:
        assert found is None
    else:
        assert found is not None and reason in found


# ------------------------------------------------------------------------------- redaction


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (b'{"city": "Paris", "api_key": "' + SECRET.encode() + b'"}',
         b'{"city": "Paris", "api_key": "[REDACTED]"}'),
        (b'{"error": {"message": "password: ' + SECRET.encode() + b'"}}',
         b'{"error": {"message": "password: [REDACTED]"}}'),
        (b"GET /x?api_key=" + SECRET.encode() + b"&city=Paris",
         b"GET /x?api_key=[REDACTED]&city=Paris"),
        (b"\xff\xfe\x00binary", b"\xff\xfe\x00binary"),
        (b"\xff\xfeapi_key=" + SECRET.encode() + b" \x80\x00",
         b"\xff\xfeapi_key=[REDACTED] \x80\x00"),
        (b'{"note": "\\ud800 password=' + SECRET.encode() + b'"}',
         b'{"note": "\\ud800 password=[REDACTED]"}'),
        (b"", b""),
    ],
    ids=[
        "json-sensitive-key", "json-string-pattern", "url-query", "binary-without-secret",
        "binary-with-secret", "json-escaped-lone-surrogate", "empty",
    ],
)  # fmt: skip
def test_redact_body(body, expected):
    assert redact_body(body) == expected


def test_redacted_json_body_stays_valid_json_and_keeps_formatting():
    body = b'{\n  "name": "Ada",\n  "token": "' + SECRET.encode() + b'",\n  "n": 1.50\n}'

    redacted = redact_body(body)

    assert redacted == b'{\n  "name": "Ada",\n  "token": "[REDACTED]",\n  "n": 1.50\n}'
    assert json.loads(redacted)["token"] == REDACTED


def test_redact_row_attempt_columns():
    row = {
        "url": f"http://127.0.0.1:8101/capabilities/forecast?city=Paris&api_key={SECRET}",
        "parameters": json.dumps({"city": "Paris", "api_key": SECRET}),
        "request_headers": json.dumps({"Content-Type": "application/json", "X-Auth-Token": SECRET}),
        "request_body": json.dumps({"city": "Paris", "api_key": SECRET}).encode(),
        "request_size": 58,
        "response_body": b"\xff\xfe\x00binary",
        "response_size": 9,
        "reason": f"Bearer {SECRET} was refused",
        "decision": None,
        "status": 401,
    }

    redacted = redact_row("attempts", row)

    assert (
        redacted["url"]
        == "http://127.0.0.1:8101/capabilities/forecast?city=Paris&api_key=[REDACTED]"
    )
    assert json.loads(redacted["parameters"]) == {"city": "Paris", "api_key": REDACTED}
    assert json.loads(redacted["request_headers"])["X-Auth-Token"] == REDACTED
    assert json.loads(redacted["request_body"]) == {"city": "Paris", "api_key": REDACTED}
    assert redacted["request_size"] == len(redacted["request_body"])
    assert redacted["response_body"] is row["response_body"]
    assert redacted["response_size"] == 9
    assert redacted["reason"] == "Bearer [REDACTED] was refused"
    assert (redacted["decision"], redacted["status"]) == (None, 401)
    assert SECRET not in repr(redacted)


def test_redact_row_leaves_unchanged_json_text_verbatim():
    text = '{"city":   "Paris"}'

    assert redact_row("steps", {"parameters": text})["parameters"] == text


def test_redact_row_llm_prompt_and_answer():
    messages = [
        {"role": "system", "content": "Answer JSON only."},
        {"role": "user", "content": f'Original request: {{"api_key": "{SECRET}"}}'},
    ]
    row = {
        "unsent_messages": json.dumps(messages),
        "response_headers": json.dumps({"x-request-id": "req-1", "set-cookie": SECRET}),
        "raw_text": f'{{"reason": "password={SECRET} is wrong"}}',
        "parsed": json.dumps({"reason": f"password={SECRET} is wrong"}),
        "request_body": json.dumps({"model": "m", "messages": messages}).encode(),
        "request_size": 0,
    }

    redacted = redact_row("llm_calls", row)

    assert json.loads(redacted["unsent_messages"])[1]["content"] == (
        'Original request: {"api_key": "[REDACTED]"}'
    )
    assert json.loads(redacted["response_headers"]) == {
        "x-request-id": "req-1",
        "set-cookie": "[REDACTED]",
    }
    assert json.loads(redacted["raw_text"]) == {"reason": "password=[REDACTED] is wrong"}
    assert json.loads(redacted["parsed"]) == {"reason": "password=[REDACTED] is wrong"}
    assert (
        json.loads(redacted["request_body"])["messages"][1]
        == json.loads(redacted["unsent_messages"])[1]
    )
    assert SECRET not in repr(redacted)


def test_redact_row_plan_keeps_capability_schemas_usable():
    plan = {
        "query": f"log in with password={SECRET}",
        "tools": {"crm": {"base_url": "http://127.0.0.1:8102", "headers": {"X-Api-Key": SECRET}}},
        "capabilities": {
            "crm.login": {
                "path": "/capabilities/login",
                "description": "log in",
                "schema": {
                    "type": "object",
                    "properties": {"password": {"type": "string"}, "token": {"type": "string"}},
                    "required": ["password"],
                },
            }
        },
        "steps": [{"id": "step-1", "parameters": {"password": SECRET}}],
        "llm": {"base_url": "http://127.0.0.1:8200/v1", "api_key": SECRET},
    }

    redacted = json.loads(redact_row("execution_snapshots", {"plan": json.dumps(plan)})["plan"])

    assert (
        redacted["capabilities"]["crm.login"]["schema"]
        == plan["capabilities"]["crm.login"]["schema"]
    )
    assert redacted["tools"]["crm"]["headers"] == {"X-Api-Key": REDACTED}
    assert redacted["steps"][0]["parameters"] == {"password": REDACTED}
    assert redacted["llm"]["api_key"] == REDACTED
    assert redacted["query"] == "log in with password=[REDACTED]"
    assert list(redacted) == list(plan)


def test_redact_row_event_attributes_and_message():
    row = {"message": f"token refused: api_key={SECRET}", "attrs": json.dumps({"password": SECRET})}

    redacted = redact_row("events", row)

    assert redacted == {
        "message": "token refused: api_key=[REDACTED]",
        "attrs": json.dumps({"password": REDACTED}),
    }


# ----------------------------------------------------------------------- events from rows


def sample_rows():
    """Rows of one execution as `read_execution_rows` returns them (a skipped step included)."""
    execution = {
        "execution_id": "exec-1",
        "status": "failed",
        "started_at": "2026-01-01 00:00:00",
        "finished_at": "2026-01-01 00:00:01.5",
        "query": "q",
        "plan_path": None,
        "stop_reason": None,
        "incomplete_steps": ["step-1", "step-2"],
        "llm_calls": 0,
        "llm_total_tokens": 0,
        "tool_version": "0.1.0",
        "writer_pid": 1,
        "writer_host": "h",
        "writer_token": "t",
    }
    snapshot = {
        "execution_id": "exec-1",
        "plan": json.dumps({"query": "q", "steps": [{"id": "step-1"}, {"id": "step-2"}]}),
        "config": "{}",
        "config_sources": "{}",
        "llm": None,
    }
    step = {
        "execution_id": "exec-1",
        "step_id": "step-1",
        "tool": "t",
        "capability": "c",
        "url": "http://127.0.0.1:1/c",
        "depends_on": [],
        "parameters": "{}",
        "protected_keys": "{}",
        "orchestrator": False,
        "side_effects": "none",
        "status": "failed",
        "dispatch_count": 1,
        "attempts": 1,
        "validation_retries": 0,
        "semantic_retries": 0,
        "final_action": "stop_terminal",
        "final_rule_id": "terminal.auth_or_method",
        "error": "HTTP 401",
        "result": None,
        "skip_reason": None,
        "started_at": "2026-01-01 00:00:00.1",
        "finished_at": "2026-01-01 00:00:01",
    }
    skipped = {
        **step,
        "step_id": "step-2",
        "status": "skipped",
        "url": None,
        "parameters": None,
        "started_at": None,
        "finished_at": "2026-01-01 00:00:01.2",
        "dispatch_count": 0,
        "attempts": 0,
        "skip_reason": "dependency step-1 failed",
        "final_action": None,
        "final_rule_id": None,
        "error": None,
    }
    attempt = {
        "execution_id": "exec-1",
        "step_id": "step-1",
        "n": 1,
        "dispatched": True,
        "parameters": "{}",
        "correction_layer": None,
        "method": "POST",
        "url": "http://127.0.0.1:1/c",
        "request_headers": "{}",
        "request_body": b"{}",
        "request_size": 2,
        "http_status": 401,
        "response_headers": "{}",
        "response_body": b"no",
        "response_size": 2,
        "transport_error": None,
        "transport_error_message": None,
        "elapsed_ms": 3.0,
        "retry_policy": "unspecified",
        "action": "stop_terminal",
        "rule_id": "terminal.auth_or_method",
        "reason": "HTTP 401 is terminal",
        "decision": json.dumps(
            {
                "action": "stop_terminal",
                "rule_id": "terminal.auth_or_method",
                "reason": "HTTP 401 is terminal",
                "inputs": {},
            }
        ),
        "decision_layer": None,
        "corrected_parameters": None,
        "delay_ms": None,
        "delay_source": None,
        "started_at": "2026-01-01 00:00:00.2",
        "responded_at": "2026-01-01 00:00:00.3",
        "decided_at": "2026-01-01 00:00:00.3",
    }
    notice = {
        "execution_id": "exec-1",
        "step_id": "step-1",
        "n": 1,
        "seq": 7,
        "writer_token": "t",
        "occurred_at": "2026-01-01 00:00:00.3",
        "kind": "notice",
        "name": "guard.note",
        "message": "m",
        "attrs": "{}",
    }
    return {
        "executions": [execution], "execution_snapshots": [snapshot], "steps": [step, skipped],
        "attempts": [attempt], "llm_calls": [], "events": [notice],
    }  # fmt: skip


def test_events_from_rows_restore_the_reporting_order():
    events = events_from_rows(sample_rows())

    assert [event.kind for event in events] == [
        "execution_started",
        "step_started",
        "attempt_dispatched",
        "attempt_responded",
        "notice",
        "attempt_decided",
        "step_finished",
        "step_finished",
        "execution_finished",
    ]
    dispatched = events[2]
    assert (dispatched.at, dispatched.request_body) == (1_767_225_600.2, b"{}")
    assert [e.step_id for e in events if e.kind == "step_finished"] == ["step-1", "step-2"]


def test_events_from_rows_of_an_interrupted_execution_have_no_finish():
    rows = sample_rows()
    rows["executions"][0]["status"] = "interrupted"

    kinds = [event.kind for event in events_from_rows(rows)]

    assert "execution_finished" not in kinds and kinds[0] == "execution_started"


def test_events_from_rows_feed_a_recorder_without_failures():
    from executor.telemetry import build_spans_from_events

    recorder = ListRecorder()
    for event in events_from_rows(sample_rows()):
        recorder.record(event)
    spans = build_spans_from_events(recorder.events)

    assert sorted(span.name for span in spans) == [
        "execute_tool t.c",
        "orchestrator.execution",
        "orchestrator.step.step-1",
    ]


def test_table_specs_are_built_once_per_schema_version_however_it_is_named():
    from store.schema import SCHEMA_VERSION

    assert store_table_specs() is store_table_specs(SCHEMA_VERSION)
    assert store_table_specs(version=SCHEMA_VERSION) is store_table_specs()
    for spec in store_table_specs():
        assert spec.column_names == tuple(column.name for column in spec.columns)
        assert spec.column_names is spec.column_names  # kept, not rebuilt per row


@pytest.mark.parametrize(
    ("rows", "member_bytes", "expected_mib"),
    [
        # make bench's bundle: 4,000 LLM calls of 27 KB lines; its merge needs 40-50 MiB
        ({"llm_calls": 4_000, "attempts": 200},
         {"llm_calls": 109_800_000, "attempts": 334_000}, 64),
        # 2,400 attempts with 64 KiB bodies (89 KB lines): FATAL at 80 MiB, merged at 88
        ({"attempts": 2_400, "steps": 2_000},
         {"attempts": 214_760_000, "steps": 1_184_000}, 109),
    ],
    ids=["bench_llm_bundle", "wide_attempts"],
)
def test_the_final_merge_gets_memory_for_the_widest_rows(rows, member_bytes, expected_mib):
    from store.bundle.importer import _merge_memory_limit
    from store.bundle.validate import Scan

    members = {f"tables/{name}.jsonl": {"size": size} for name, size in member_bytes.items()}
    tables = [{"name": name, "rows": count} for name, count in (rows | {"executions": 0}).items()]
    scan = Scan(manifest={"tables": tables}, members=members, infos={}, statuses={},
                call_ids={}, span_count=0)  # fmt: skip
    limit = _merge_memory_limit(scan, 64 * 1024 * 1024)
    assert round(limit / 1024 / 1024) == expected_mib
