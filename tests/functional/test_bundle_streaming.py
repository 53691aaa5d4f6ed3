"""Bundles are streamed: each member deflated once on export and inflated once on import."""

from __future__ import annotations

import collections
import hashlib
import json
import shutil
import signal
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import duckdb
import pytest

from executor.policy import Decision
from store.bundle import BundleError, export_bundle, import_bundle
from store.queries import open_store
from store.recorder import StoreRecorder
from store.schema import STORE_TABLES
from tests.support.events_factory import (
    one_attempt_execution,
    realistic_execution,
    small_execution,
)

IDS = ("exec-stream-0001", "exec-stream-0002")


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The two executions recorded and exported once per module."""
    work = tmp_path_factory.mktemp("streaming")
    db = work / "source.duckdb"
    with StoreRecorder(db) as recorder:
        for event in [*realistic_execution(IDS[0]), *small_execution(IDS[1], start_at=1.9e9)]:
            recorder.record(event)
    path = work / "runs.zip"
    export_bundle(db, path, None)
    return path


@pytest.fixture
def bundle(exported: Path, tmp_path: Path) -> Path:
    """A copy of the module's bundle in tmp_path, for the test to read or change."""
    path = tmp_path / "runs.zip"
    shutil.copyfile(exported, path)
    return path


def test_a_written_bundle_has_every_member_whole_with_its_crc(bundle):
    with zipfile.ZipFile(bundle) as archive:
        assert archive.testzip() is None  # every member inflates and matches its CRC-32
        manifest = json.loads(archive.read("manifest.json"))
        for member in manifest["members"]:
            data = archive.read(member["name"])
            assert len(data) == member["size"] == archive.getinfo(member["name"]).file_size
            assert hashlib.sha256(data).hexdigest() == member["sha256"]


def test_import_inflates_each_member_once_and_leaves_no_staged_rows(bundle, tmp_path, monkeypatch):
    opened: collections.Counter[str] = collections.Counter()
    original = zipfile.ZipFile.open

    def counting_open(self, name, *args, **kwargs):
        opened[getattr(name, "filename", name)] += 1
        return original(self, name, *args, **kwargs)

    monkeypatch.setattr(zipfile.ZipFile, "open", counting_open)
    staging_parent = tmp_path / "tmp"
    staging_parent.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(staging_parent))
    result = import_bundle(tmp_path / "target.duckdb", bundle)
    assert sorted(result.imported) == sorted(IDS)
    with zipfile.ZipFile(bundle) as archive:
        names = [info.filename for info in archive.infolist()]
    assert dict(opened) == dict.fromkeys(names, 1)
    assert list(staging_parent.iterdir()) == []  # the staged rows are gone
    with duckdb.connect(str(tmp_path / "target.duckdb"), read_only=True) as conn:
        stored = conn.execute("SELECT execution_id FROM executions").fetchall()
    assert sorted(row[0] for row in stored) == sorted(IDS)


def _rewrite(source: Path, target: Path, name: str, change) -> None:
    with zipfile.ZipFile(source) as old, zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as new:
        for info in old.infolist():
            data = old.read(info)
            new.writestr(info.filename, change(data) if info.filename == name else data)


@pytest.mark.parametrize(
    ("case", "member", "change", "expected"),
    [
        ("bad_row_in_a_changed_member", "tables/steps.jsonl",
         lambda data: data.replace(b'"status":"', b'"status":1', 1),
         "member 'tables/steps.jsonl' has SHA-256"),
        ("cut_member", "tables/attempts.jsonl", lambda data: data[: len(data) // 2],
         "member 'tables/attempts.jsonl' is"),
        ("changed_spans", "spans.otlp.json", lambda data: data.replace(b"{", b"[", 1),
         "member 'spans.otlp.json' has SHA-256"),
    ],
)  # fmt: skip
def test_a_changed_member_is_refused_as_changed_not_by_its_first_bad_line(
    bundle, tmp_path, monkeypatch, case, member, change, expected
):
    staging_parent = tmp_path / "tmp"
    staging_parent.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(staging_parent))
    changed = tmp_path / f"{case}.zip"
    _rewrite(bundle, changed, member, change)
    target = tmp_path / "target.duckdb"
    with pytest.raises(BundleError) as refused:
        import_bundle(target, changed)
    assert expected in str(refused.value)
    assert "nothing was imported" in str(refused.value)
    assert not target.exists()
    assert list(staging_parent.iterdir()) == []


def test_a_full_disk_while_deflating_refuses_the_export_and_leaves_nothing(tmp_path, monkeypatch):
    from store.bundle import BundleExportError
    from store.bundle.export import _StagedMember

    db = tmp_path / "source.duckdb"
    with StoreRecorder(db) as recorder:
        for event in small_execution(IDS[1]):
            recorder.record(event)
    original = _StagedMember._store

    def full_disk(self, data):
        if data:  # a small member's first deflated bytes come from the final flush
            raise OSError(28, "No space left on device")
        original(self, data)

    monkeypatch.setattr(_StagedMember, "_store", full_disk)
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(BundleExportError, match="cannot write: No space left on device"):
        export_bundle(db, out / "runs.zip", None)
    assert list(out.iterdir()) == []


def _count_row_digests(monkeypatch) -> collections.Counter[str]:
    """Rows hashed to compare with the store's, by execution id (the bundle's and the store's)."""
    import store.bundle.importer as importer
    import store.bundle.validate as validate

    hashed: collections.Counter[str] = collections.Counter()
    original = validate.row_digest

    def counting_digest(spec, row):
        hashed[row["execution_id"]] += 1
        return original(spec, row)

    monkeypatch.setattr(importer, "row_digest", counting_digest)
    monkeypatch.setattr(validate, "row_digest", counting_digest)
    return hashed


def test_import_hashes_the_rows_only_of_executions_the_store_already_holds(
    bundle, tmp_path, monkeypatch
):
    target = tmp_path / "target.duckdb"
    hashed = _count_row_digests(monkeypatch)
    assert sorted(import_bundle(target, bundle).imported) == sorted(IDS)
    assert hashed == {}  # nothing in the store to compare with: no row was hashed
    # The store now holds both: importing again compares (and skips) them, hashing each row
    # of the bundle once and each stored row once.
    again = import_bundle(target, bundle)
    assert sorted(again.skipped) == sorted(IDS) and again.imported == ()
    with duckdb.connect(str(target), read_only=True) as conn:
        stored = collections.Counter(
            execution_id
            for table in ("executions", "execution_snapshots", "steps", "attempts", "llm_calls",
                          "events")
            for (execution_id,) in conn.execute(f"SELECT execution_id FROM {table}").fetchall()
        )  # fmt: skip
    assert hashed == {eid: 2 * count for eid, count in stored.items()}


def test_import_hashes_no_row_of_a_new_execution_beside_a_known_one(tmp_path, monkeypatch):
    db = tmp_path / "source.duckdb"
    with StoreRecorder(db) as recorder:
        for event in [*small_execution(IDS[0]), *small_execution(IDS[1], start_at=1.9e9)]:
            recorder.record(event)
    one, both = tmp_path / "one.zip", tmp_path / "both.zip"
    export_bundle(db, one, [IDS[0]])
    export_bundle(db, both, None)
    target = tmp_path / "target.duckdb"
    import_bundle(target, one)
    hashed = _count_row_digests(monkeypatch)
    result = import_bundle(target, both)
    assert result.imported == (IDS[1],) and result.skipped == (IDS[0],)
    assert set(hashed) == {IDS[0]}


def test_members_are_deflated_by_zlib_ng_and_inflate_with_the_standard_zlib(bundle):
    import zlib

    from zlib_ng import zlib_ng

    with zipfile.ZipFile(bundle) as archive, open(bundle, "rb") as raw:
        for info in archive.infolist():
            data = archive.read(info)  # the standard library's inflater, CRC-32 checked
            raw.seek(info.header_offset + 26)
            name_length, extra_length = (int.from_bytes(raw.read(2), "little") for _ in "ne")
            raw.seek(info.header_offset + 30 + name_length + extra_length)
            stored = raw.read(info.compress_size)
            compressor = zlib_ng.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS)
            assert stored == compressor.compress(data) + compressor.flush(), info.filename


# The child imports the bundle and kills itself as the second staged batch goes in, after the
# first one's transaction was committed.
_KILLED_IMPORT = """
import os, signal, sys
import store.bundle.importer as importer
inserts = []
real_insert_batch = importer._insert_batch
def insert_batch(conn, spec, batch):
    inserts.append(spec.name)
    if len(inserts) == 2:
        os.kill(os.getpid(), signal.SIGKILL)
    real_insert_batch(conn, spec, batch)
importer._insert_batch = insert_batch
importer.import_bundle(sys.argv[1], sys.argv[2])
"""


def test_an_import_killed_between_its_commits_leaves_a_store_that_opens_and_imports_again(
    bundle, tmp_path
):
    db = tmp_path / "killed.duckdb"
    child = subprocess.run(
        [sys.executable, "-c", _KILLED_IMPORT, str(db), str(bundle)],
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert child.returncode == -signal.SIGKILL, child.stderr

    def rows_of(path: Path) -> dict[str, list[tuple]]:
        with open_store(path).session() as conn:
            return {
                table: conn.execute(f"SELECT * FROM {table} ORDER BY ALL").fetchall()
                for table in STORE_TABLES
            }

    with duckdb.connect(str(db), read_only=True) as raw:  # the file as the kill left it
        assert raw.execute("SELECT count(*) FROM execution_snapshots").fetchone()[0] > 0
    left = rows_of(db)  # the first session removes what the killed import left
    assert left["executions"] == []  # no reader sees a partial execution
    assert left["execution_snapshots"] == []
    result = import_bundle(db, bundle)
    assert sorted(result.imported) == sorted(IDS)
    fresh = tmp_path / "fresh.duckdb"
    import_bundle(fresh, bundle)
    assert rows_of(db) == rows_of(fresh)


# The child imports the bundle and kills itself once every row is committed, before the
# checkpoint that merges the import's row groups.
_KILLED_BEFORE_MERGE = """
import os, signal, sys
import store.bundle.importer as importer
def merge_row_groups(conn, db_label, memory_limit):
    os.kill(os.getpid(), signal.SIGKILL)
importer._merge_row_groups = merge_row_groups
importer.import_bundle(sys.argv[1], sys.argv[2])
"""


def test_an_import_killed_before_merging_its_row_groups_leaves_every_execution(bundle, tmp_path):
    db = tmp_path / "killed.duckdb"
    child = subprocess.run(
        [sys.executable, "-c", _KILLED_BEFORE_MERGE, str(db), str(bundle)],
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert child.returncode == -signal.SIGKILL, child.stderr
    fresh = tmp_path / "fresh.duckdb"
    import_bundle(fresh, bundle)
    assert _rows_of(db) == _rows_of(fresh)  # the WAL holds what the checkpoint did not write
    assert sorted(import_bundle(db, bundle).skipped) == sorted(IDS)


def _rows_of(path: Path) -> dict[str, list[tuple]]:
    with open_store(path).session() as conn:
        return {
            table: conn.execute(f"SELECT * FROM {table} ORDER BY ALL").fetchall()
            for table in STORE_TABLES
        }


def _row_groups(path: Path) -> dict[str, int]:
    with duckdb.connect(str(path), read_only=True) as conn:
        return {
            table: conn.execute(
                f"SELECT count(DISTINCT row_group_id) FROM pragma_storage_info('{table}')"
            ).fetchone()[0]
            for table in STORE_TABLES
        }


def test_an_import_checkpointed_after_every_row_leaves_one_row_group_per_table(
    bundle, tmp_path, monkeypatch
):
    # Every row its own batch and every COMMIT a checkpoint: the import writes a row group per
    # row, and merges them before it ends (not the next process to checkpoint the store).
    from store.bundle import importer, staging

    monkeypatch.setattr(staging, "STAGE_ROWS", 1)
    real_write_bundle = importer._write_bundle

    def write_bundle(conn, *args, **kwargs):
        conn.execute("SET checkpoint_threshold = '1KB'")
        try:
            return real_write_bundle(conn, *args, **kwargs)
        finally:
            conn.execute("RESET checkpoint_threshold")

    monkeypatch.setattr(importer, "_write_bundle", write_bundle)
    db = tmp_path / "target.duckdb"
    assert sorted(import_bundle(db, bundle).imported) == sorted(IDS)
    monkeypatch.undo()
    fresh = tmp_path / "fresh.duckdb"
    import_bundle(fresh, bundle)
    assert _rows_of(db) == _rows_of(fresh)
    written = _row_groups(db)
    assert all(written[table] == 1 for table in ("steps", "attempts", "events")), written


def test_a_failed_checkpoint_after_the_import_is_logged_not_raised(caplog):
    from store.bundle import importer

    class Unwritable:
        def execute(self, sql):
            raise duckdb.IOException("IO Error: No space left on device")

    with caplog.at_level("WARNING", logger=importer.__name__):
        importer._merge_row_groups(Unwritable(), "store.duckdb", 64 * 1024 * 1024)
    assert caplog.messages == [
        "store.duckdb: the import is committed, but merging its row groups failed (IO Error: "
        "No space left on device); they stay in the WAL for the store's next checkpoint"
    ]


# A decision as the executor records it for an HTTP 200 (every input it reads; ~1.6 KB).
_RECORDED_SUCCESS = json.loads(
    '{"action": "success", "rule_id": "success.2xx", "reason": "HTTP 200 is success", '
    '"inputs": {"dispatched": true, "status": 200, "transport_error": null, "retry_policy": '
    '"unspecified", "guard_violations": [], "attempt_number": 1, "max_attempts": 3, '
    '"validation_retries": 0, "max_validation_retries": 2, "max_semantic_retries": 2, '
    '"orchestrator": false, "side_effects": "none", "protected_keys": {}, "has_dependencies":'
    ' false, "llm_configured": false, "error_analyzer_enabled": true, '
    '"semantic_retry_enabled": true, "semantic_retry_independent_steps": true, '
    '"validation_feedback_enabled": true, "legacy_callback_set": false, "legacy_pattern": '
    'null, "cancelled": false, "circuit_open": false, "retry_after_ms": null, '
    '"retry_after_source": null, "elapsed_s": 1.5, "max_wall_clock_s": null, '
    '"llm_tokens_used": 0, "max_total_tokens": null, "llm_calls_used": 0, "max_llm_calls": '
    'null, "repeated_error_count": 0, "max_repeated_errors": null, "retry_after_max_ms": '
    '60000.0, "body_is_json_object": true, "ended_by_deadline": false, "tool_retries_used": '
    '0, "max_retries_per_tool": null, "tool": "crm", "error_text": "component returned status'
    ' 200", "parameter_keys": ["n"], "backoff": {"initial_delay_ns": 1000000, "max_delay_ns":'
    ' 5000000, "backoff_factor": 2.0, "jitter_enabled": true}, "analyzer": null, "resolver": '
    'null, "legacy": null}, "not_matched": [], "delay_ms": null, "delay_source": null, '
    '"layer": null, "corrected_parameters": null, "failure_class": null, "recovery": null, '
    '"impact": "the step succeeded (HTTP 200)", "layers": [], "budgets": '
    '{"step_retries_left": 2, "tool_retries_left": null, "corrections_left": 2}}'
)


def test_an_execution_of_thousands_of_recorded_decisions_imports_in_bounded_memory(tmp_path):
    # DuckDB's stored decision key costs ~35 KB per row while it is computed: a staged batch of
    # 2,000 such attempts failed the import's memory limit ("Out of Memory Error").
    source = tmp_path / "source.duckdb"
    decided = Decision.from_dict(_RECORDED_SUCCESS)
    with StoreRecorder(source) as recorder:
        for event in one_attempt_execution("exec-many", "many", [b"{}"] * 3_000, decided=decided):
            recorder.record(event)
    bundle = tmp_path / "many.truva.zip"
    export_bundle(source, bundle, ["exec-many"])
    result = import_bundle(tmp_path / "target.duckdb", bundle)
    assert result.row_counts["attempts"] == 3_000
    with duckdb.connect(str(tmp_path / "target.duckdb"), read_only=True) as conn:
        keys = conn.execute(
            "SELECT count(*), count(DISTINCT decision_key) FROM attempts WHERE decision_key "
            "IS NOT NULL"
        ).fetchone()
    with duckdb.connect(str(source), read_only=True) as conn:
        recorded = conn.execute("SELECT DISTINCT decision_key FROM attempts").fetchall()
    assert keys == (3_000, 1) and len(recorded) == 1


def _rewrite_listed(source: Path, target: Path, name: str, data: bytes) -> None:
    """`source` with member `name` replaced by `data`, the manifest listing its true digest."""
    with zipfile.ZipFile(source) as old:
        members = {info.filename: old.read(info) for info in old.infolist()}
    members[name] = data
    manifest = json.loads(members["manifest.json"])
    for entry in manifest["members"]:
        entry["size"] = len(members[entry["name"]])
        entry["sha256"] = hashlib.sha256(members[entry["name"]]).hexdigest()
    members["manifest.json"] = json.dumps(manifest).encode()
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as new:
        for member, content in members.items():
            new.writestr(member, content)


def test_a_bad_first_row_of_a_long_member_is_refused_by_its_line_and_its_reader_stops(
    bundle, tmp_path
):
    """The member is read ahead in a thread: a refusal long before its end names the line,
    and leaves no reader behind (one blocked on a full queue would hang the process)."""
    import threading

    with zipfile.ZipFile(bundle) as archive:
        lines = archive.read("tables/attempts.jsonl").splitlines(keepends=True)
    bad = lines[0].replace(b'"execution_id":"', b'"execution_id":7,"x":"', 1)
    long_member = bad + b"".join(lines) * (12 * 1024 * 1024 // sum(map(len, lines)) + 1)
    assert len(long_member) > 12 * 1024 * 1024  # many read-ahead chunks past line 1
    changed = tmp_path / "long.zip"
    _rewrite_listed(bundle, changed, "tables/attempts.jsonl", long_member)
    target = tmp_path / "target.duckdb"
    with pytest.raises(BundleError) as refused:
        import_bundle(target, changed)
    assert "tables/attempts.jsonl line 1: columns differ" in str(refused.value)
    assert not target.exists()
    readers = [thread.name for thread in threading.enumerate() if thread.name.startswith("read ")]
    assert readers == []


def test_a_member_damaged_past_the_read_ahead_is_refused_as_damaged(bundle, tmp_path):
    """A bad CRC is found by the reader thread at the member's end, and reported as before."""
    with zipfile.ZipFile(bundle) as archive:
        lines = archive.read("tables/attempts.jsonl").splitlines(keepends=True)
    long_member = b"".join(lines) * 4
    changed = tmp_path / "crc.zip"
    _rewrite_listed(bundle, changed, "tables/attempts.jsonl", long_member)
    with zipfile.ZipFile(changed) as archive:
        info = archive.getinfo("tables/attempts.jsonl")
    data = bytearray(changed.read_bytes())
    # The CRC-32 in the central directory is what zipfile checks the inflated bytes against.
    entry = data.find(b"PK\x01\x02")
    while data[entry + 46 : entry + 46 + len(info.filename)] != info.filename.encode():
        entry = data.find(b"PK\x01\x02", entry + 4)
    data[entry + 16 : entry + 20] = (info.CRC ^ 1).to_bytes(4, "little")
    changed.write_bytes(bytes(data))
    target = tmp_path / "target.duckdb"
    with pytest.raises(BundleError) as refused:
        import_bundle(target, changed)
    assert "member 'tables/attempts.jsonl' is damaged (Bad CRC-32" in str(refused.value)
    assert not target.exists()
