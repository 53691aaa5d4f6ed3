"""Bundles carry schema v2's columns (`rerun_of`, `recovery`, `impact`) and v1 bundles still import.

The store is a real DuckDB file recorded through the store recorder; bundles are written and
read through the real `truva-console export` / `import`.
"""

from __future__ import annotations

import base64
import hashlib
import json
import zipfile
from dataclasses import replace
from pathlib import Path

import duckdb
import pytest

from executor.events import AttemptDecided, ExecutionStarted
from executor.faults import Recovery
from store.bundle import MANIFEST_MEMBER, store_table_specs
from store.queries import open_store
from store.recorder import StoreRecorder
from store.schema import SCHEMA_VERSION
from tests.support.events_factory import START_AT, realistic_execution, small_execution
from tests.support.plans import run_cli

ORIGINAL, RERUN = "exec-original-0001", "exec-rerun-0002"
V2_COLUMNS = {"executions": ("rerun_of",), "attempts": ("recovery", "impact")}
# Columns of later versions, which a v1 bundle does not have either.
AFTER_V1_COLUMNS = {"executions": ("rerun_of", "labels"), "attempts": ("recovery", "impact")}


def _rerun_events() -> list:
    events = []
    for event in small_execution(RERUN, steps=1, start_at=START_AT + 60):
        if isinstance(event, ExecutionStarted):
            event = replace(event, rerun_of=ORIGINAL)
        elif isinstance(event, AttemptDecided) and event.n == 2:
            event = replace(event, decision=replace(event.decision, recovery=Recovery.STOP,
                                                     impact="The hotel was not booked."))
        events.append(event)
    return events


@pytest.fixture
def source_db(tmp_path: Path) -> Path:
    db = tmp_path / "source.duckdb"
    with StoreRecorder(db) as recorder:
        for event in small_execution(ORIGINAL, steps=1) + _rerun_events():
            recorder.record(event)
    return db


def _v2_values(db: Path) -> tuple[list, list]:
    with duckdb.connect(str(db), read_only=True) as conn:
        executions = conn.execute(
            "SELECT execution_id, rerun_of FROM executions ORDER BY execution_id"
        ).fetchall()
        attempts = conn.execute(
            "SELECT execution_id, n, recovery, impact FROM attempts ORDER BY execution_id, n"
        ).fetchall()
    return executions, attempts


def test_a_bundle_round_trips_rerun_of_recovery_and_impact(source_db: Path, tmp_path: Path):
    bundle, target = tmp_path / "all.zip", tmp_path / "target.duckdb"
    exported = run_cli("--db", str(source_db), "export", "--all", "--no-redact", "-o", str(bundle))
    assert exported.code == 0, exported.stderr
    with zipfile.ZipFile(bundle) as archive:
        manifest = json.loads(archive.read(MANIFEST_MEMBER))
        lines = archive.read("tables/executions.jsonl").decode().splitlines()
    assert manifest["schema_version"] == SCHEMA_VERSION == 4
    assert {json.loads(line)["execution_id"]: json.loads(line)["rerun_of"] for line in lines} == {
        ORIGINAL: None, RERUN: ORIGINAL}
    imported = run_cli("--db", str(target), "import", str(bundle))
    assert imported.code == 0, imported.stderr

    assert _v2_values(target) == _v2_values(source_db) == (
        [(ORIGINAL, None), (RERUN, ORIGINAL)],
        [(ORIGINAL, 1, None, None), (ORIGINAL, 2, None, None),
         (RERUN, 1, None, None), (RERUN, 2, "stop", "The hotel was not booked.")],
    )  # fmt: skip
    assert open_store(target).get_execution(RERUN) == open_store(source_db).get_execution(RERUN)


def _old_row(table: str, row: dict) -> dict:
    """A current bundle row with the values an export of schema 1 or 2 wrote instead."""
    if table == "attempts":
        row["status"] = row["http_status"]
        row["attempt_number"] = 1
    if table == "llm_calls":
        body = base64.b64decode(row["request_body"]) if row["request_body"] else b""
        messages = json.loads(body)["messages"] if body else json.loads(row["unsent_messages"])
        row["messages"] = json.dumps(messages)
    return row


def as_old_bundle(bundle: Path, target: Path, version: int) -> Path:
    """`bundle` rewritten as an export of store schema `version` (1 or 2) would have written it."""
    with zipfile.ZipFile(bundle) as archive:
        members = {info.filename: archive.read(info) for info in archive.infolist()}
    manifest = json.loads(members[MANIFEST_MEMBER])
    manifest["schema_version"] = version
    specs = {spec.name: spec for spec in store_table_specs(version)}
    for table in manifest["tables"]:
        spec = specs[table["name"]]
        table["columns"] = [{"name": c.name, "type": c.type, "nullable": c.nullable}
                            for c in spec.columns]  # fmt: skip
        rows = [_old_row(spec.name, json.loads(line))
                for line in members[table["member"]].decode().splitlines()]  # fmt: skip
        members[table["member"]] = b"".join(
            json.dumps({c.name: row.get(c.name) for c in spec.columns}).encode() + b"\n"
            for row in rows
        )
    manifest["members"] = [
        {"name": entry["name"], "size": len(members[entry["name"]]),
         "sha256": hashlib.sha256(members[entry["name"]]).hexdigest()}
        for entry in manifest["members"]
    ]  # fmt: skip
    members[MANIFEST_MEMBER] = json.dumps(manifest).encode()
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return target


def test_a_v1_bundle_imports_with_the_new_columns_null(source_db: Path, tmp_path: Path):
    bundle, target = tmp_path / "all.zip", tmp_path / "target.duckdb"
    run_cli("--db", str(source_db), "export", "--all", "--no-redact", "-o", str(bundle))
    v1 = as_old_bundle(bundle, tmp_path / "v1.zip", 1)

    imported = run_cli("--db", str(target), "import", str(v1))

    assert imported.code == 0, imported.stderr
    executions, attempts = _v2_values(target)
    assert executions == [(ORIGINAL, None), (RERUN, None)]
    assert {(recovery, impact) for _, _, recovery, impact in attempts} == {(None, None)}
    assert len(attempts) == 4


def test_a_v1_bundle_with_a_v2_column_is_refused(source_db: Path, tmp_path: Path):
    bundle = tmp_path / "all.zip"
    run_cli("--db", str(source_db), "export", "--all", "--no-redact", "-o", str(bundle))
    with zipfile.ZipFile(bundle) as archive:
        members = {info.filename: archive.read(info) for info in archive.infolist()}
    manifest = json.loads(members[MANIFEST_MEMBER])
    manifest["schema_version"] = 1
    members[MANIFEST_MEMBER] = json.dumps(manifest).encode()
    mislabelled = tmp_path / "mislabelled.zip"
    with zipfile.ZipFile(mislabelled, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)

    result = run_cli("--db", str(tmp_path / "t.duckdb"), "import", str(mislabelled))

    assert result.code == 2
    assert ("manifest.json: table executions columns do not match store schema version 1 "
            "(unknown rerun_of, labels)") in result.stderr  # fmt: skip


@pytest.mark.parametrize("version", [1, 2])
def test_an_older_bundle_reads_back_as_the_recording_it_came_from(
    tmp_path: Path, version: int
) -> None:
    source, target = tmp_path / "source.duckdb", tmp_path / "target.duckdb"
    with StoreRecorder(source) as recorder:
        for event in realistic_execution("exec-realistic-1"):
            recorder.record(event)
    bundle = tmp_path / "all.zip"
    exported = run_cli("--db", str(source), "export", "--all", "--no-redact", "-o", str(bundle))
    assert exported.code == 0, exported.stderr
    old = as_old_bundle(bundle, tmp_path / f"v{version}.zip", version)

    imported = run_cli("--db", str(target), "import", str(old))

    assert imported.code == 0, imported.stderr
    original = open_store(source).get_execution("exec-realistic-1")
    restored = open_store(target).get_execution("exec-realistic-1")
    if version == 1:  # v1 had no recovery or impact; everything else reads back the same
        original = _without_v2_values(original)
    original = _without_llm_response_headers(original)  # kept from schema v3 on
    assert restored == original
    attempts = [a for s in restored.steps for a in s.attempts]
    assert [a.status for a in attempts] == [429, 200, 400, 200, 401, None]
    assert [a.attempt_number for a in attempts] == [
        a.decision["inputs"]["attempt_number"] for a in attempts
    ]
    (call,) = restored.step("step-2").attempts[0].llm_calls
    assert call.messages and call.messages[0]["role"] == "system"
    again = run_cli("--db", str(target), "import", str(old))
    assert again.code == 0 and "skipped" in again.stdout, again.stdout


def _without_llm_response_headers(detail):
    def plain(calls):
        return tuple(replace(call, response_headers=None) for call in calls)

    steps = tuple(
        replace(step, attempts=tuple(replace(att, llm_calls=plain(att.llm_calls))
                                     for att in step.attempts))
        for step in detail.steps
    )
    return replace(detail, steps=steps)


def _without_v2_values(detail):
    steps = tuple(
        replace(step, attempts=tuple(replace(a, recovery=None, impact=None) for a in step.attempts))
        for step in detail.steps
    )
    return replace(detail, execution=replace(detail.execution, rerun_of=None), steps=steps)
