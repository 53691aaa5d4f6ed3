"""`truva-console export` / `import` on real store files: lossless, idempotent, redacted, strict."""

from __future__ import annotations

import base64
import contextlib
import copy
import hashlib
import json
import os
import shutil
import stat
import warnings
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import duckdb
import pytest

import store.bundle.export
from console.samples import sample_trace_files
from executor.eventlog import read_event_log
from executor.events import (
    AttemptDecided,
    AttemptDispatched,
    AttemptResponded,
    ExecutionStarted,
    LLMCall,
    Notice,
    StepFinished,
    StepStarted,
)
from executor.telemetry import build_spans_from_events, spans_to_otlp_json
from store.bundle import MANIFEST_MEMBER, read_bundle
from store.queries import Store, open_store
from store.recorder import StoreRecorder
from store.schema import SCHEMA_VERSION, STORE_TABLES
from tests.support.events_factory import (
    NON_UTF8_BODY,
    START_AT,
    realistic_execution,
    small_execution,
)
from tests.support.plans import run_cli as truva_console
from tests.support.plans import run_subprocess

TRIP, SECRETS, SMALL = "exec-trip-0001", "exec-secrets-0002", "exec-small-0003"
SECRET = "sk-live-TOPSECRET-0123456789abcdef"
LEAK_MARKER = b"TOPSECRET"
SECRET_BINARY_BODY = b"\xff\xfe\x00 api_key=" + SECRET.encode() + b" \x80tail"
# A multi-megabyte LLM prompt with non-ASCII text, recorded and exported whole.
BIG_PROMPT_TAIL = "\n" + "Ünïcode prompt line — café, naïve, 東京.\n" * 80_000


def secret_events(execution_id: str, *, start_at: float) -> list:
    """The realistic execution with a secret in a URL query, headers, JSON bodies, a non-UTF-8
    body, parameters, a prompt, an answer, a notice and error texts."""
    events = []
    for event in realistic_execution(execution_id, start_at=start_at, secret=SECRET):
        if isinstance(event, ExecutionStarted):
            plan = copy.deepcopy(event.plan)
            plan["steps"][0]["parameters"]["api_key"] = SECRET
            event = replace(event, query=f"Plan a trip; my password: {SECRET}", plan=plan)
        elif isinstance(event, StepStarted) and event.step_id == "step-1":
            event = replace(
                event,
                parameters={**event.parameters, "api_key": SECRET},
                url=f"{event.url}?token={SECRET}",
            )
        elif isinstance(event, AttemptDispatched) and event.step_id == "step-1":
            parameters = {**event.parameters, "api_key": SECRET}
            event = replace(
                event,
                url=f"{event.url}?city=Paris&api_key={SECRET}",
                parameters=parameters,
                request_body=json.dumps(parameters).encode(),
            )
        elif isinstance(event, AttemptResponded) and (event.step_id, event.n) == ("step-1", 1):
            body = {
                "success": False,
                "error": {"message": f"password: {SECRET} expired",
                          "details": {"access_token": SECRET}},
            }  # fmt: skip
            event = replace(event, response_body=json.dumps(body).encode())
        elif isinstance(event, AttemptResponded) and event.step_id == "step-3":
            event = replace(event, response_body=SECRET_BINARY_BODY)
        elif isinstance(event, AttemptDecided) and event.step_id == "step-3":
            decision = replace(event.decision, reason=f"HTTP 401 for Bearer {SECRET}")
            event = replace(event, decision=decision)
        elif isinstance(event, LLMCall):
            messages = (
                *event.messages,
                {"role": "user", "content": f'Original request: {{"api_key": "{SECRET}"}}'},
            )
            answer = json.dumps({"should_retry": True, "reason": f"api_key={SECRET} is wrong"})
            event = replace(
                event,
                messages=messages,
                request_body=json.dumps({"model": event.model, "messages": messages}).encode(),
                raw_text=answer,
                parsed=json.loads(answer),
                response_body=json.dumps(
                    {"choices": [{"message": {"role": "assistant", "content": answer}}]}
                ).encode(),
            )
        elif isinstance(event, Notice):
            event = replace(event, attrs={**event.attrs, "password": SECRET})
        elif isinstance(event, StepFinished) and event.step_id == "step-3":
            event = replace(event, error=f"HTTP 401: Authorization: Bearer {SECRET}")
        events.append(event)
    return events


def sample_events() -> list:
    return [event for path in sample_trace_files() for event in read_event_log(path)]


def record(db: Path, events: list) -> None:
    with StoreRecorder(db) as recorder:
        for event in events:
            recorder.record(event)


@pytest.fixture(scope="module")
def source_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store with the realistic run (multi-MB prompt, non-UTF-8 body), the secret-laden run,
    a small run, and every sample trace."""
    db = tmp_path_factory.mktemp("source") / "debug.duckdb"
    record(
        db,
        realistic_execution(TRIP, prompt_extra=BIG_PROMPT_TAIL, binary_body=NON_UTF8_BODY)
        + secret_events(SECRETS, start_at=START_AT + 60)
        + small_execution(SMALL, start_at=START_AT + 120)
        + sample_events(),
    )
    return db


def all_ids(db: Path) -> list[str]:
    with open_store(db).session() as conn:
        return [row[0] for row in conn.execute("SELECT execution_id FROM executions").fetchall()]


def table_rows(db: Path, execution_ids: list[str]) -> dict[str, list[tuple]]:
    """Every column of every row of the bundled tables for `execution_ids`, in a stable order."""
    with open_store(db).session() as conn:
        return {
            table: conn.execute(
                f"SELECT * FROM {table} WHERE list_contains($ids, execution_id) ORDER BY ALL",
                {"ids": execution_ids},
            ).fetchall()
            for table in STORE_TABLES
        }


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """The real `truva-console` entry point, in-process: (exit code, stdout, stderr)."""
    result = truva_console(*argv)
    return result.code, result.stdout, result.stderr


@pytest.fixture(scope="module")
def plain_bundle(source_db: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every execution of the source store, exported with --no-redact."""
    from store.bundle import export_bundle

    path = tmp_path_factory.mktemp("bundles") / "plain.zip"
    export_bundle(source_db, path, None, redact=False)
    return path


@pytest.fixture(scope="module")
def redacted_bundle(source_db: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The trip and secret-laden executions, exported with the default redaction."""
    from store.bundle import export_bundle

    path = tmp_path_factory.mktemp("bundles") / "redacted.zip"
    export_bundle(source_db, path, [TRIP, SECRETS])
    return path


# -------------------------------------------------------------------------------- round trip


def test_round_trip_without_redaction_is_lossless(source_db, tmp_path, capsys):
    bundle, target = tmp_path / "all.zip", tmp_path / "target.duckdb"

    code, out, err = run_cli(
        capsys, "--db", str(source_db), "export", "--all", "--no-redact", "-o", str(bundle)
    )
    assert (code, err) == (0, "")
    assert "NOT redacted" in out
    code, out, err = run_cli(capsys, "--db", str(target), "import", str(bundle), "--json")
    assert (code, err) == (0, "")

    ids = all_ids(source_db)
    assert sorted(json.loads(out)["imported"]) == sorted(ids) and len(ids) == 3 + len(
        sample_trace_files()
    )
    assert table_rows(target, ids) == table_rows(source_db, ids)
    source, imported = open_store(source_db), open_store(target)
    for execution_id in ids:
        assert imported.get_execution(execution_id) == source.get_execution(execution_id)


def test_big_prompt_and_binary_body_come_back_byte_exact(plain_bundle, tmp_path):
    target = tmp_path / "target.duckdb"
    from store.bundle import import_bundle

    import_bundle(target, plain_bundle)

    trip = open_store(target).get_execution(TRIP)
    (call,) = trip.step("step-2").attempts[0].llm_calls
    assert call.messages[1]["content"].endswith(BIG_PROMPT_TAIL)
    assert len(call.request_body) > 3_000_000
    assert trip.step("step-3").attempts[0].response_body == NON_UTF8_BODY


def test_importing_the_same_bundle_twice_changes_nothing(plain_bundle, tmp_path, capsys):
    target = tmp_path / "target.duckdb"
    run_cli(capsys, "--db", str(target), "import", str(plain_bundle))
    ids = all_ids(target)
    before = table_rows(target, ids)

    code, out, err = run_cli(capsys, "--db", str(target), "import", str(plain_bundle), "--json")

    document = json.loads(out)
    assert (code, err) == (0, "")
    assert (document["imported"], document["replaced"]) == ([], [])
    assert sorted(document["skipped"]) == sorted(ids)
    assert set(document["rows"].values()) == {0}
    assert table_rows(target, ids) == before


def test_import_into_a_store_holding_other_executions_adds_only_the_new_ones(
    plain_bundle, tmp_path, capsys
):
    target = tmp_path / "target.duckdb"
    record(target, small_execution("exec-local-0009", start_at=START_AT + 900))
    from store.bundle import export_bundle

    one = tmp_path / "one.zip"
    export_bundle(target, one, ["exec-local"], redact=False)
    run_cli(capsys, "--db", str(target), "import", str(plain_bundle))

    code, out, _ = run_cli(capsys, "--db", str(target), "import", str(one))

    assert code == 0
    assert "skipped (already in the store, identical): 1 — exec-local-0009" in out
    assert len(all_ids(target)) == 3 + len(sample_trace_files()) + 1  # source store + local run


def spans_shape(document: dict[str, Any]) -> list[tuple]:
    """Spans as comparable tuples: ids replaced by names, times in whole microseconds."""
    spans = [
        span
        for resource in document["resourceSpans"]
        for scope in resource["scopeSpans"]
        for span in scope["spans"]
    ]
    names = {span["spanId"]: span["name"] for span in spans}
    return sorted(
        (
            span["traceId"],
            span["name"],
            names.get(span.get("parentSpanId")),
            tuple(sorted(attribute["key"] for attribute in span.get("attributes", ()))),
            tuple(event["name"] for event in span.get("events", ())),
            span["status"].get("code"),
        )
        for span in spans
    )


def span_times_us(document: dict[str, Any]) -> list[tuple[str, str, int, int]]:
    spans = [s for r in document["resourceSpans"] for sc in r["scopeSpans"] for s in sc["spans"]]
    return sorted(
        (s["traceId"], s["name"], int(s["startTimeUnixNano"]) // 1000,
         int(s["endTimeUnixNano"]) // 1000)
        for s in spans
    )  # fmt: skip


def test_bundle_spans_match_the_spans_of_the_live_events(source_db, tmp_path):
    from store.bundle import export_bundle

    events = sample_events()
    sample_ids = sorted({event.execution_id for event in events if event.kind.startswith("exec")})
    bundle = tmp_path / "samples.zip"
    export_bundle(source_db, bundle, sample_ids, redact=False)

    with zipfile.ZipFile(bundle) as archive:
        document = json.loads(archive.read("spans.otlp.json"))
    live = spans_to_otlp_json(build_spans_from_events(events))

    assert spans_shape(document) == spans_shape(live)
    assert len(spans_shape(document)) >= 5 * len(sample_ids)
    for rebuilt, recorded in zip(span_times_us(document), span_times_us(live), strict=True):
        assert rebuilt[:2] == recorded[:2]
        assert abs(rebuilt[2] - recorded[2]) <= 1 and abs(rebuilt[3] - recorded[3]) <= 1


def test_bundle_reads_without_truva_console(plain_bundle, source_db, tmp_path):
    with zipfile.ZipFile(plain_bundle) as archive:
        manifest = json.loads(archive.read(MANIFEST_MEMBER))
        archive.extract("tables/attempts.jsonl", tmp_path)
        for member in manifest["members"]:
            data = archive.read(member["name"])
            assert (len(data), hashlib.sha256(data).hexdigest()) == (
                member["size"],
                member["sha256"],
            )
    assert (manifest["format"], manifest["bundle_version"]) == ("truva-bundle", 1)
    assert manifest["schema_version"] == SCHEMA_VERSION
    assert manifest["redaction"] == {"applied": False}

    rows = duckdb.sql(
        "SELECT step_id, n, from_base64(response_body) AS body, "
        "CAST(decision AS JSON) ->> 'rule_id' AS rule_id "
        f"FROM read_json_auto('{tmp_path / 'tables' / 'attempts.jsonl'}') "
        f"WHERE execution_id = '{TRIP}' ORDER BY step_id, n"
    ).fetchall()
    attempts = [a for s in open_store(source_db).get_execution(TRIP).steps for a in s.attempts]
    assert rows == sorted((a.step_id, a.n, a.response_body, a.rule_id) for a in attempts)


# --------------------------------------------------------------------------------- redaction


def bundle_contents(path: Path) -> Iterator[tuple[str, bytes]]:
    """Every member's bytes, and every base64 column value of every row decoded."""
    yield "(the zip file)", path.read_bytes()
    with zipfile.ZipFile(path) as archive:
        manifest = json.loads(archive.read(MANIFEST_MEMBER))
        blob_columns = {
            table["member"]: [c["name"] for c in table["columns"] if c["encoding"] == "base64"]
            for table in manifest["tables"]
        }
        for info in archive.infolist():
            data = archive.read(info)
            yield info.filename, data
            for number, line in enumerate(data.splitlines(), start=1):
                row = json.loads(line) if info.filename in blob_columns else {}
                for name in blob_columns.get(info.filename, ()):
                    if row[name] is not None:
                        yield f"{info.filename}:{number}:{name}", base64.b64decode(row[name])


def leaks(path: Path) -> list[str]:
    return [where for where, data in bundle_contents(path) if LEAK_MARKER in data]


def test_export_redacts_secrets_from_every_member_by_default(redacted_bundle, plain_bundle):
    assert leaks(redacted_bundle) == []
    plain_leaks = leaks(plain_bundle)
    for place in ("tables/attempts.jsonl", "tables/attempts.jsonl:", "tables/llm_calls.jsonl",
                  "tables/execution_snapshots.jsonl", "tables/events.jsonl",
                  "tables/executions.jsonl", "tables/steps.jsonl"):  # fmt: skip
        assert any(where.startswith(place) for where in plain_leaks), place


def test_redacted_bundle_keeps_json_valid_and_other_bytes_exact(redacted_bundle, tmp_path):
    from store.bundle import import_bundle

    target = tmp_path / "target.duckdb"
    import_bundle(target, redacted_bundle)
    store = open_store(target)
    secrets, trip = store.get_execution(SECRETS), store.get_execution(TRIP)

    first = secrets.step("step-1").attempts[0]
    assert json.loads(first.request_body)["api_key"] == "[REDACTED]"
    assert first.request_size == len(first.request_body)
    assert json.loads(first.response_body)["error"]["details"]["access_token"] == "[REDACTED]"
    assert first.url.endswith("?city=Paris&api_key=[REDACTED]")
    assert secrets.step("step-3").attempts[0].response_body == (
        b"\xff\xfe\x00 api_key=[REDACTED] \x80tail"
    )
    (call,) = secrets.step("step-2").attempts[0].llm_calls
    assert call.messages[-1]["content"] == 'Original request: {"api_key": "[REDACTED]"}'
    assert json.loads(call.request_body)["messages"][-1] == call.messages[-1]
    assert call.parsed["reason"] == "api_key=[REDACTED] is wrong"
    assert trip.step("step-3").attempts[0].response_body == NON_UTF8_BODY
    with zipfile.ZipFile(redacted_bundle) as archive:
        redaction = json.loads(archive.read(MANIFEST_MEMBER))["redaction"]
    assert redaction["applied"] is True
    assert redaction["columns"]["attempts"]["response_body"] == "body"


# ------------------------------------------------------------------------------- bad bundles

Members = list[list[Any]]  # [name, bytes] pairs, duplicates allowed


def read_members(path: Path) -> Members:
    with zipfile.ZipFile(path) as archive:
        return [[info.filename, archive.read(info)] for info in archive.infolist()]


def write_members(path: Path, members: Members, *, symlink: str | None = None) -> Path:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zipfile warns about duplicate names
        with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
            for name, data in members:
                info = zipfile.ZipInfo(name)
                info.compress_type = zipfile.ZIP_DEFLATED
                info.external_attr = (0o120777 if name == symlink else 0o100644) << 16
                archive.writestr(info, data)
    return path


def manifest_of(members: Members) -> dict[str, Any]:
    return json.loads(next(data for name, data in members if name == MANIFEST_MEMBER))


def set_manifest(members: Members, manifest: dict[str, Any], *, fix_digests: bool = True) -> None:
    """Store `manifest`, first listing each non-manifest member with its true size and digest."""
    if fix_digests:
        listed = {entry["name"] for entry in manifest["members"]}
        manifest["members"] = [
            {"name": name, "size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
            for name, data in members
            if name != MANIFEST_MEMBER and name in listed
        ]
    for member in members:
        if member[0] == MANIFEST_MEMBER:
            member[1] = json.dumps(manifest).encode()


def edit_manifest(
    change: Callable[[dict[str, Any]], None], *, fix_digests: bool = True
) -> Callable[[Members], None]:
    def edit(members: Members) -> None:
        manifest = manifest_of(members)
        change(manifest)
        set_manifest(members, manifest, fix_digests=fix_digests)

    return edit


def add_listed_member(name: str, data: bytes) -> Callable[[Members], None]:
    def edit(members: Members) -> None:
        members.append([name, data])
        manifest = manifest_of(members)
        manifest["members"].append({"name": name})
        set_manifest(members, manifest)

    return edit


def replace_member(name: str, data: bytes) -> Callable[[Members], None]:
    def edit(members: Members) -> None:
        for member in members:
            if member[0] == name:
                member[1] = data
        set_manifest(members, manifest_of(members))

    return edit


def unlist(name: str) -> Callable[[dict[str, Any]], None]:
    def change(manifest: dict[str, Any]) -> None:
        manifest["members"] = [entry for entry in manifest["members"] if entry["name"] != name]

    return change


def _row_line(row: dict) -> bytes:
    deep = {key: value for key, value in row.items() if isinstance(value, Nested)}
    line = json.dumps({key: 0 if key in deep else value for key, value in row.items()})
    for key, value in deep.items():
        nested = "[" * value.levels + "1" + "]" * value.levels
        line = line.replace(f'"{key}": 0', f'"{key}": {nested}')
    return line.encode()


def edit_table(table: str, change: Callable[[list[dict]], None], *, rows_delta: int = 0):
    member_name = f"tables/{table}.jsonl"

    def edit(members: Members) -> None:
        for member in members:
            if member[0] == member_name:
                rows = [json.loads(line) for line in member[1].splitlines()]
                change(rows)
                member[1] = b"".join(_row_line(row) + b"\n" for row in rows)
        manifest = manifest_of(members)
        for entry in manifest["tables"]:
            if entry["name"] == table:
                entry["rows"] += rows_delta
        set_manifest(members, manifest)

    return edit


def tamper(name: str) -> Callable[[Members], None]:
    def edit(members: Members) -> None:
        for member in members:
            if member[0] == name:
                member[1] = member[1].replace(b"step-1", b"step-9", 1)

    return edit


def drop_member(name: str) -> Callable[[Members], None]:
    def edit(members: Members) -> None:
        members[:] = [member for member in members if member[0] != name]

    return edit


def duplicate(name: str) -> Callable[[Members], None]:
    def edit(members: Members) -> None:
        members.append([name, next(data for n, data in members if n == name)])

    return edit


class Nested:
    """A value for `set_in_first_row`: a list nested `levels` deep (`[[…1…]]`), which
    `edit_table` writes without json's recursion."""

    def __init__(self, levels: int) -> None:
        self.levels = levels


def set_in_first_row(column: str, value: Any) -> Callable[[list[dict]], None]:
    def change(rows: list[dict]) -> None:
        rows[0][column] = value

    return change


def set_manifest_field(key: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def change(manifest: dict[str, Any]) -> None:
        manifest[key] = value

    return change


def rename_column(manifest: dict[str, Any]) -> None:
    manifest["tables"][3]["columns"][5]["name"] = "params"


def declare_wrong_size(manifest: dict[str, Any]) -> None:
    manifest["members"][1]["size"] += 1


def add_unknown_execution(manifest: dict[str, Any]) -> None:
    manifest["execution_ids"].append("exec-ghost")


def set_spans(document: Any) -> Callable[[Members], None]:
    def edit(members: Members) -> None:
        for member in members:
            if member[0] == "spans.otlp.json":
                member[1] = json.dumps(document).encode()
        set_manifest(members, manifest_of(members))

    return edit


BAD_BUNDLES: list[tuple[str, Callable[[Members], None] | bytes | str, tuple[str, ...], str]] = [
    # (case, how the file is made, extra import options, expected message fragment)
    ("not_a_zip", b"hello, this is not a bundle\n", (), "not a truva bundle (not a zip archive)"),
    ("empty_file", b"", (), "not a truva bundle (not a zip archive)"),
    ("truncated", "truncate", (), "truncated or damaged zip archive"),
    ("manifest_missing", drop_member(MANIFEST_MEMBER), (), "manifest.json is missing"),
    ("manifest_not_json", "manifest_garbage", (), "manifest.json is not valid JSON"),
    ("wrong_format", edit_manifest(set_manifest_field("format", "zipped-stuff")), (),
     "manifest format is \"zipped-stuff\", expected 'truva-bundle'"),
    ("unknown_bundle_version", edit_manifest(set_manifest_field("bundle_version", 99)), (),
     "bundle version 99 is not supported (this truva-console reads version 1); upgrade"),
    ("newer_schema_version",
     edit_manifest(set_manifest_field("schema_version", SCHEMA_VERSION + 1)), (),
     f"store schema version {SCHEMA_VERSION + 1} is newer than this truva-console understands"),
    ("older_schema_version", edit_manifest(set_manifest_field("schema_version", 0)), (),
     "store schema version 0 is older than any this truva-console imports"),
    ("dotdot_member", add_listed_member("../evil.txt", b"x"), (),
     "member '../evil.txt' has an unsafe path (a '..' path component)"),
    ("nested_dotdot_member", add_listed_member("tables/../../evil.txt", b"x"), (),
     "has an unsafe path (a '..' path component)"),
    ("absolute_member", add_listed_member("/tmp/evil.txt", b"x"), (),
     "member '/tmp/evil.txt' has an unsafe path (an absolute path)"),
    ("symlink_member", "symlink", (),
     "member 'tables/link' is a symbolic link"),
    ("duplicate_member", duplicate("tables/steps.jsonl"), (),
     "member 'tables/steps.jsonl' appears twice"),
    ("foreign_member", lambda members: members.append(["extra.txt", b"x"]), (),
     "member 'extra.txt' is not part of the bundle format"),
    ("listed_foreign_member", add_listed_member("padding.bin", b"x"), (),
     "member 'padding.bin' is not part of the bundle format"),
    ("unlisted_member", edit_manifest(unlist("README.txt")), (),
     "member 'README.txt' is not listed in the manifest"),
    ("listed_member_missing", drop_member("tables/events.jsonl"), (),
     "member 'tables/events.jsonl' is listed in the manifest but missing from the archive"),
    ("digest_mismatch", tamper("tables/attempts.jsonl"), (),
     "member 'tables/attempts.jsonl' has SHA-256"),
    ("declared_size_mismatch", edit_manifest(declare_wrong_size, fix_digests=False), (),
     "bytes in the archive, the manifest says"),
    ("size_over_limit", "valid", ("--max-bytes", "1000"), "over the limit of 1000"),
    ("zip_bomb", replace_member("tables/events.jsonl", bytes(24 * 1024 * 1024)),
     ("--max-bytes", str(16 * 1024 * 1024)), "bytes uncompressed, over the limit"),
    ("too_many_members", "valid", ("--max-members", "3"), "9 members, over the limit of 3"),
    ("row_over_max_row_bytes", "valid", ("--max-row-bytes", "200"),
     "bytes, the limit for one row (raise it with --max-row-bytes N)"),
    ("row_for_unknown_execution",
     edit_table("attempts", set_in_first_row("execution_id", "exec-other")), (),
     "tables/attempts.jsonl line 1: execution_id \"exec-other\" is not one of the manifest's"),
    ("execution_without_row", edit_manifest(add_unknown_execution), (),
     "execution exec-ghost is listed in the manifest but has no row"),
    ("bad_column_value", edit_table("attempts", set_in_first_row("n", "one")), (),
     "tables/attempts.jsonl line 1: column n: expected a 32-bit integer, got \"one\""),
    # orjson reads an integer past 64 bits as a float: the refusal quotes the bundle's digits.
    ("integer_past_64_bits", edit_table("attempts", set_in_first_row("n", 2**64 + 1)), (),
     "tables/attempts.jsonl line 1: column n: expected a 32-bit integer, got "
     "18446744073709551617"),
    ("integer_past_a_double", edit_table("attempts", set_in_first_row("n", 10**400)), (),
     "tables/attempts.jsonl line 1: column n: expected a 32-bit integer, got 1000000"),
    # orjson reads 1,000 levels where json stops: refused as before, not a RecursionError.
    ("cell_nested_past_jsons_recursion",
     edit_table("attempts", set_in_first_row("http_status", Nested(1_000))), (),
     "tables/attempts.jsonl line 1: not a JSON object"),
    ("integer_past_a_double_in_a_double_column",
     edit_table("attempts", set_in_first_row("elapsed_ms", 10**400)), (),
     "tables/attempts.jsonl line 1: column elapsed_ms: expected a number a DOUBLE holds, got "),
    ("lone_surrogate_in_text",
     edit_table("attempts", set_in_first_row("step_id", "s\ud800")), (),
     "tables/attempts.jsonl line 1: column step_id: expected text, got text that is not valid "
     "Unicode"),
    ("bad_base64_body",
     edit_table("attempts", set_in_first_row("response_body", "%%%")), (),
     "column response_body: expected base64 text"),
    ("row_count_mismatch", edit_table("steps", lambda rows: rows.pop()), (),
     "tables/steps.jsonl holds"),
    ("duplicate_primary_key", edit_table("steps", lambda rows: rows.append(rows[0]),
                                         rows_delta=1), (),
     "tables/steps.jsonl line"),
    ("columns_differ", edit_manifest(rename_column), (),
     "table attempts columns do not match store schema version"),
    ("running_execution", edit_table("executions", set_in_first_row("status", "running")), (),
     "has status 'running'; a bundle holds finished executions only"),
    ("spans_resource_not_an_object", set_spans({"resourceSpans": [5]}), (),
     "spans.otlp.json: resourceSpans[0] is 5, expected an object"),
    ("spans_scopes_not_a_list", set_spans({"resourceSpans": [{"scopeSpans": 5}]}), (),
     "spans.otlp.json: resourceSpans[0].scopeSpans is 5, expected a list"),
    ("spans_spans_not_a_list", set_spans({"resourceSpans": [{"scopeSpans": [{"spans": 5}]}]}),
     (), "spans.otlp.json: resourceSpans[0].scopeSpans[0].spans is 5, expected a list"),
]  # fmt: skip


SYMLINK_MEMBER = "tables/link"


def make_bad_bundle(valid: Path, target: Path, how: Any) -> Path:
    if isinstance(how, bytes):
        target.write_bytes(how)
    elif how == "valid":
        shutil.copy(valid, target)
    elif how == "truncate":
        data = valid.read_bytes()
        target.write_bytes(data[: len(data) // 2])
    elif how == "symlink":
        members = read_members(valid)
        add_listed_member(SYMLINK_MEMBER, b"/etc/passwd")(members)
        write_members(target, members, symlink=SYMLINK_MEMBER)
    elif how == "manifest_garbage":
        members = read_members(valid)
        members[0][1] = b'{"format": "truva-bundle", '
        write_members(target, members)
    else:
        members = read_members(valid)
        how(members)
        write_members(target, members)
    return target


@pytest.fixture(scope="module")
def small_bundle(source_db: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    from store.bundle import export_bundle

    path = tmp_path_factory.mktemp("bundles") / "small.zip"
    export_bundle(source_db, path, [TRIP, SMALL], redact=False)
    return path


@pytest.fixture(scope="module")
def template_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("template") / "debug.duckdb"
    record(db, small_execution("exec-local-0009", start_at=START_AT + 900))
    open_store(db).refresh()
    return db


@pytest.mark.parametrize(
    ("how", "options", "message"),
    [case[1:] for case in BAD_BUNDLES],
    ids=[case[0] for case in BAD_BUNDLES],
)
def test_bad_bundle_is_refused_and_nothing_is_written(
    how, options, message, small_bundle, template_store, tmp_path, capsys
):
    target = tmp_path / "target.duckdb"
    shutil.copy(template_store, target)
    before = target.read_bytes()
    bad = make_bad_bundle(small_bundle, tmp_path / "bad.zip", how)

    code, out, err = run_cli(capsys, "--db", str(target), "import", str(bad), *options)

    assert (code, out) == (2, "")
    assert err.count("\n") == 1 and err.startswith(f"truva-console: {bad}: ")
    assert message in err
    assert err.rstrip().endswith("nothing was imported")
    assert target.read_bytes() == before


@pytest.mark.parametrize("option", ["--max-bytes", "--max-members", "--max-ratio",
                                    "--max-row-bytes"])
def test_a_limit_below_one_is_one_line(option, small_bundle, tmp_path, capsys):
    target = tmp_path / "new.duckdb"
    code, out, err = run_cli(capsys, "--db", str(target), "import", str(small_bundle),
                             option, "0")  # fmt: skip
    assert (code, out, err) == (2, "", f"truva-console: {option} must be at least 1, got 0\n")
    assert not target.exists()


def test_max_row_bytes_refuses_a_row_one_byte_over_and_takes_one_at_the_limit(
    source_db, tmp_path, capsys
):
    # Only the part of a line left after each 1 MiB read was measured: a bundle of 9 KB rows
    # imported under --max-row-bytes 10.
    from store.bundle import export_bundle

    small_bundle = tmp_path / "small-rows.zip"
    export_bundle(source_db, small_bundle, [SMALL], redact=False)
    lines = [
        (name, number, len(line))
        for name, data in bundle_contents(small_bundle) if name.startswith("tables/")
        for number, line in enumerate(data.split(b"\n")[:-1], start=1)
    ]  # fmt: skip
    name, number, longest = max(lines, key=lambda found: found[2])
    assert longest < 1024 * 1024  # within one read
    code, out, err = run_cli(capsys, "--db", str(tmp_path / "over.duckdb"), "import",
                             str(small_bundle), "--max-row-bytes", str(longest - 1))  # fmt: skip
    assert (code, out) == (2, "")
    assert f"{name} line {number} is over {longest - 1} bytes, the limit for one row" in err
    assert not (tmp_path / "over.duckdb").exists()
    code, _, err = run_cli(capsys, "--db", str(tmp_path / "at.duckdb"), "import",
                           str(small_bundle), "--max-row-bytes", str(longest))  # fmt: skip
    assert code == 0, err


def test_bad_bundle_does_not_create_a_missing_store(small_bundle, tmp_path, capsys):
    bad = make_bad_bundle(small_bundle, tmp_path / "bad.zip", "truncate")
    target = tmp_path / "new" / "debug.duckdb"

    code, _, err = run_cli(capsys, "--db", str(target), "import", str(bad))

    assert code == 2 and "truncated" in err
    assert not target.parent.exists()


def test_valid_small_bundle_passes_every_check(small_bundle):
    bundle = read_bundle(small_bundle)

    assert bundle.execution_ids == (TRIP, SMALL)
    assert len(bundle.rows["attempts"]) == 6 + 6
    assert bundle.span_count > 0 and bundle.redacted is False


def test_conflicting_execution_is_refused_unless_replace(
    plain_bundle, redacted_bundle, tmp_path, capsys
):
    target = tmp_path / "target.duckdb"
    run_cli(capsys, "--db", str(target), "import", str(plain_bundle))
    ids = all_ids(target)
    before = table_rows(target, ids)

    code, out, err = run_cli(capsys, "--db", str(target), "import", str(redacted_bundle))

    assert (code, out) == (2, "")
    assert err.startswith(
        f"truva-console: {target}: execution {SECRETS} is already in the store with different "
        "rows (in executions, execution_snapshots, steps, attempts, llm_calls, events); the "
        "bundle is redacted, so it differs from an unredacted recording of the same run; "
    )
    assert err.rstrip().endswith("nothing was imported (pass --replace to overwrite)")
    assert table_rows(target, ids) == before

    code, out, err = run_cli(
        capsys, "--db", str(target), "import", str(redacted_bundle), "--replace", "--json"
    )

    assert (code, err) == (0, "")
    document = json.loads(out)
    assert (document["replaced"], document["skipped"]) == ([SECRETS], [TRIP])
    secrets = open_store(target).get_execution(SECRETS)
    assert json.loads(secrets.step("step-1").attempts[0].request_body)["api_key"] == "[REDACTED]"
    untouched = [execution_id for execution_id in ids if execution_id not in (TRIP, SECRETS)]
    after = table_rows(target, untouched)
    assert after == table_rows_subset(before, untouched)


def table_rows_subset(rows: dict[str, list[tuple]], execution_ids: list[str]) -> dict:
    """The rows of `execution_ids` (the first column of every bundled table but llm_calls)."""
    position = {table: 1 if table == "llm_calls" else 0 for table in rows}
    return {
        table: [row for row in table_rows if row[position[table]] in execution_ids]
        for table, table_rows in rows.items()
    }


def test_llm_call_id_owned_by_another_execution_is_refused(source_db, tmp_path, capsys):
    from store.bundle import export_bundle

    target = tmp_path / "target.duckdb"
    record(target, realistic_execution(TRIP))
    secrets = export_bundle(source_db, tmp_path / "secrets.zip", [SECRETS], redact=False).path
    members = read_members(secrets)
    edit_table("llm_calls", set_in_first_row("call_id", f"{TRIP}-llm-1"))(members)
    clash = write_members(tmp_path / "clash.zip", members)
    before = table_rows(target, [TRIP, SECRETS])

    code, _, err = run_cli(capsys, "--db", str(target), "import", str(clash), "--replace")

    assert code == 2
    assert (
        f"execution {TRIP} is already in the store with an LLM call '{TRIP}-llm-1' that the "
        "bundle also holds; nothing was imported (an LLM call id is unique)"
    ) in err
    assert table_rows(target, [TRIP, SECRETS]) == before


# ------------------------------------------------------------------------------------ export


def test_export_by_prefix_writes_one_execution(source_db, tmp_path, capsys):
    bundle = tmp_path / "trip.zip"

    code, out, err = run_cli(
        capsys, "--db", str(source_db), "export", "exec-trip", "-o", str(bundle), "--json"
    )

    document = json.loads(out)
    assert (code, err) == (0, "")
    assert document["execution_ids"] == [TRIP] and document["redacted"] is True
    assert document["rows"]["attempts"] == 6 and document["size_bytes"] == bundle.stat().st_size
    assert read_bundle(bundle).execution_ids == (TRIP,)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("exec-nope",), "no execution id starts with 'exec-nope'"),
        (("exec-",), "'exec-' matches several executions"),
        ((), "give execution ids or --all (one of the two)"),
        (("exec-trip", "--all"), "give execution ids or --all (one of the two)"),
    ],
    ids=["unknown-id", "ambiguous-prefix", "no-ids", "ids-and-all"],
)
def test_export_refuses_bad_selections(argv, message, source_db, tmp_path, capsys):
    bundle = tmp_path / "out.zip"

    code, out, err = run_cli(capsys, "--db", str(source_db), "export", *argv, "-o", str(bundle))

    assert (code, out) == (2, "")
    assert message in err and err.count("\n") == 1
    assert not bundle.exists()
    assert list(tmp_path.iterdir()) == []


def test_exporting_twice_gives_identical_tables(source_db, tmp_path):
    from store.bundle import export_bundle

    first = export_bundle(source_db, tmp_path / "first.zip", [TRIP, SECRETS]).path
    second = export_bundle(source_db, tmp_path / "second.zip", [SECRETS, TRIP]).path

    first_members, second_members = dict(read_members(first)), dict(read_members(second))
    assert first_members.keys() == second_members.keys()
    differing = [name for name in first_members if first_members[name] != second_members[name]]
    assert differing == [MANIFEST_MEMBER]  # created_at; span ids derive from recorded ids


def test_exports_in_two_processes_give_identical_spans(source_db, tmp_path):
    # The SDK gives each process a random service.instance.id; a bundle's spans carry none.
    paths = [tmp_path / "first.zip", tmp_path / "second.zip"]
    for path in paths:
        done = run_subprocess("--db", str(source_db), "export", TRIP, "-o", str(path))
        assert done.returncode == 0, done.stderr
    first, second = (dict(read_members(path)) for path in paths)
    assert first["spans.otlp.json"] == second["spans.otlp.json"]
    assert b"service.instance.id" not in first["spans.otlp.json"]
    assert b'"service.name"' in first["spans.otlp.json"]


def test_export_does_not_overwrite_without_force(source_db, tmp_path, capsys):
    bundle = tmp_path / "out.zip"
    bundle.write_bytes(b"keep me")

    code, _, err = run_cli(capsys, "--db", str(source_db), "export", TRIP, "-o", str(bundle))

    assert code == 2 and "already exists (pass --force to overwrite it)" in err
    assert bundle.read_bytes() == b"keep me"
    code, _, err = run_cli(
        capsys, "--db", str(source_db), "export", TRIP, "-o", str(bundle), "--force"
    )
    assert (code, err) == (0, "")
    assert read_bundle(bundle).execution_ids == (TRIP,)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["out.zip"]


def test_export_refuses_to_write_over_the_store(source_db, capsys):
    code, _, err = run_cli(
        capsys, "--db", str(source_db), "export", TRIP, "-o", str(source_db), "--force"
    )

    assert code == 2 and "is the store itself" in err


def test_export_from_a_missing_store_is_refused(tmp_path, capsys):
    code, _, err = run_cli(
        capsys, "--db", str(tmp_path / "none.duckdb"), "export", "--all", "-o",
        str(tmp_path / "out.zip"),
    )  # fmt: skip

    assert code == 2 and "no such file" in err
    assert not (tmp_path / "out.zip").exists()


def test_running_execution_is_refused_by_id_and_skipped_by_all(tmp_path, capsys):
    db, bundle = tmp_path / "debug.duckdb", tmp_path / "out.zip"
    record(db, small_execution("exec-done-0001"))
    running_events = small_execution("exec-running-0002", start_at=START_AT + 60)[:-1]
    recorder = StoreRecorder(db)
    try:
        for event in running_events:
            recorder.record(event)
        recorder.flush()

        code, _, err = run_cli(capsys, "--db", str(db), "export", "exec-running", "-o", str(bundle))
        assert code == 2 and "execution exec-running-0002 is still running" in err
        assert not bundle.exists()

        code, out, err = run_cli(capsys, "--db", str(db), "export", "--all", "-o", str(bundle))
        assert code == 0 and "1 execution: exec-done-0001" in out
        assert "skipped 1 execution still running: exec-running-0002" in err
        assert read_bundle(bundle).execution_ids == ("exec-done-0001",)
    finally:
        recorder.close()


def test_a_bundle_rezipped_without_file_type_bits_imports(small_bundle, tmp_path, capsys):
    rezipped = tmp_path / "rezipped.zip"
    with zipfile.ZipFile(rezipped, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in read_members(small_bundle):
            archive.writestr(name, data)  # permissions 0o600 only, as zipfile writes them

    code, out, err = run_cli(capsys, "--db", str(tmp_path / "db.duckdb"), "import", str(rezipped))

    assert (code, err) == (0, "")
    assert f"imported: 2 — {TRIP}, {SMALL}" in out


def test_export_refuses_to_replace_something_that_is_not_a_file(source_db, tmp_path, capsys):
    pipe = tmp_path / "pipe.zip"
    os.mkfifo(pipe)

    code, out, err = run_cli(
        capsys, "--db", str(source_db), "export", TRIP, "-o", str(pipe), "--force"
    )

    assert (code, out) == (2, "")
    assert err == (
        f"truva-console: {pipe}: exists and is not a regular file (a device, pipe or socket); "
        "choose a file name\n"
    )
    assert stat.S_ISFIFO(pipe.stat().st_mode)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["pipe.zip"]


def refuse_temporary_files(*args: Any, **kwargs: Any) -> Any:
    raise PermissionError(13, "Permission denied")


@pytest.mark.parametrize("target", ["unwritable", "proc"])
def test_export_to_a_place_it_cannot_write_is_one_line(
    target, source_db, tmp_path, capsys, monkeypatch
):
    if target == "proc":
        if not Path("/proc/self").is_dir():
            pytest.skip("no /proc on this system")
        output, expected = Path("/proc/truva-bundle.zip"), "cannot write: "
    else:
        output, expected = tmp_path / "out.zip", "cannot write: Permission denied"
        monkeypatch.setattr(store.bundle.export.tempfile, "mkstemp", refuse_temporary_files)

    code, out, err = run_cli(capsys, "--db", str(source_db), "export", TRIP, "-o", str(output))

    assert (code, out) == (2, "")
    assert err.count("\n") == 1 and err.startswith(f"truva-console: {output}: {expected}")
    assert not output.exists()


def test_replace_leaves_an_execution_that_is_still_running(small_bundle, tmp_path, capsys):
    db = tmp_path / "debug.duckdb"
    recorder = StoreRecorder(db)
    try:
        for event in small_execution(SMALL, start_at=START_AT + 120)[:-1]:
            recorder.record(event)
        recorder.flush()
        before = table_rows(db, [SMALL])

        code, out, err = run_cli(capsys, "--db", str(db), "import", str(small_bundle), "--replace")

        assert (code, out) == (2, "")
        assert err.startswith(
            f"truva-console: {db}: execution {SMALL} is still running in the store"
        )
        assert err.rstrip().endswith(
            "nothing was imported (import again once it has finished or shows as interrupted)"
        )
        assert table_rows(db, [SMALL]) == before
        assert all_ids(db) == [SMALL]
    finally:
        recorder.close()


class CommitFails:
    """A connection whose COMMIT fails as DuckDB's does on a full disk: rolled back, then raised."""

    def __init__(self, connection: duckdb.DuckDBPyConnection) -> None:
        self._connection = connection

    def execute(self, sql: str, *args: Any) -> Any:
        if sql.strip().upper() == "COMMIT":
            self._connection.execute("ROLLBACK")
            raise duckdb.IOException("Could not write file: No space left on device")
        return self._connection.execute(sql, *args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._connection, name)


def test_a_failed_import_commit_reports_the_disk_not_the_rollback(
    small_bundle, tmp_path, capsys, monkeypatch
):
    db = tmp_path / "debug.duckdb"
    real_session = Store.session

    @contextlib.contextmanager
    def failing_commits(self: Store, **options: Any) -> Iterator[Any]:
        with real_session(self, **options) as conn:
            yield CommitFails(conn)

    monkeypatch.setattr(Store, "session", failing_commits)
    code, out, err = run_cli(capsys, "--db", str(db), "import", str(small_bundle))
    monkeypatch.undo()

    assert (code, out) == (2, "")
    assert err == (
        f"truva-console: {db}: writing {small_bundle} failed (Could not write file: "
        "No space left on device); nothing was imported\n"
    )
    assert all_ids(db) == []
