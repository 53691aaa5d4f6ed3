"""The key stored with every recorded decision (`attempts.decision_key`, schema 4): written at
ingest, import and migration, read by `what_if` instead of the decision JSON, and not trusted
where it was computed by other code or cannot see what the overrides change."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

import store.queries
from bench.bench_whatif import build_store
from console import whatif as whatif_module
from console.whatif import what_if, what_if_row_by_row
from store.decision_keys import (
    STORED_KEY,
    STORED_KEY_VERSION,
    KeyScan,
    key_expression,
    stored_key_serves,
)
from store.queries import open_store
from store.schema import SCHEMA_VERSION, _attempts_text_view, stored_schema_version
from tests.support.demo_store import record_demo_store
from tests.support.plans import run_cli

_KEYS = "SELECT execution_id, step_id, n, decision_key, decision_key_version FROM attempts"


@pytest.fixture(scope="module")
def demo_db(tmp_path_factory) -> Path:
    return record_demo_store(Path(tmp_path_factory.mktemp("stored-keys")) / "demo.duckdb")


@pytest.fixture(scope="module")
def varied_db(demo_db, tmp_path_factory) -> Path:
    directory = Path(tmp_path_factory.mktemp("stored-keys-varied"))
    return build_store(demo_db, directory / "varied.duckdb", 6 * 41, 0.5)


def _copy(source: Path, target: Path) -> Path:
    target.write_bytes(source.read_bytes())
    return target


def _keys(db: Path) -> list[tuple]:
    with duckdb.connect(str(db), read_only=True) as conn:
        return conn.execute(f"{_KEYS} ORDER BY ALL").fetchall()


def test_ingest_writes_the_stored_key_and_stamp_of_every_decision(demo_db):
    with duckdb.connect(str(demo_db), read_only=True) as conn:
        rows = conn.execute(
            f"SELECT decision_key, {key_expression(STORED_KEY)}, decision_key_version "
            "FROM attempts WHERE decision IS NOT NULL"
        ).fetchall()
    assert len(rows) == 41
    assert all(stored == computed is not None for stored, computed, _ in rows)
    assert {stamp for _, _, stamp in rows} == {STORED_KEY_VERSION}


def test_a_schema_3_store_migrates_and_gets_the_keys_ingest_writes(demo_db, tmp_path):
    db = _copy(demo_db, tmp_path / "v3.duckdb")
    with duckdb.connect(str(db)) as conn:
        conn.execute("DROP VIEW attempts_text")
        conn.execute("ALTER TABLE attempts DROP COLUMN decision_key")
        conn.execute("ALTER TABLE attempts DROP COLUMN decision_key_version")
        conn.execute(_attempts_text_view("CREATE", ("search_text",)))
        conn.execute("UPDATE schema_info SET value = '3' WHERE key = 'schema_version'")
    report = what_if(open_store(db), None, {"max_attempts": 5})
    with duckdb.connect(str(db), read_only=True) as conn:
        assert stored_schema_version(conn) == SCHEMA_VERSION == 4
    assert _keys(db) == _keys(demo_db)
    assert report.to_dict() == what_if(open_store(demo_db), None, {"max_attempts": 5}).to_dict()
    assert report.changed > 0


def test_a_bundle_import_writes_the_stored_keys(demo_db, tmp_path):
    bundle, target = tmp_path / "all.zip", tmp_path / "imported.duckdb"
    exported = run_cli("--db", str(demo_db), "export", "--all", "--no-redact", "-o", str(bundle))
    assert exported.code == 0, exported.stderr
    imported = run_cli("--db", str(target), "import", str(bundle))
    assert imported.code == 0, imported.stderr
    assert _keys(target) == _keys(demo_db)


_SERVES = [
    ({}, True), ({"max_attempts": 5}, True), ({"initial_delay_ms": 5000}, True),
    ({"max_wall_clock_s": None}, True), ({"max_retries_per_tool": None}, True),
    ({"max_wall_clock_s": 0.5}, False), ({"max_total_tokens": 100}, False),
    ({"max_llm_calls": 1}, False), ({"max_repeated_errors": 1}, False),
    ({"max_retries_per_tool": 0}, False), ({"max_attempts": 5, "max_llm_calls": 1}, False),
]


@pytest.mark.parametrize(
    ("overrides", "serves"), _SERVES,
    ids=[",".join(f"{k}={v}" for k, v in o.items()) or "no-overrides" for o, _ in _SERVES],
)
def test_the_stored_key_serves_unless_the_overrides_set_a_budget(overrides, serves):
    assert stored_key_serves(overrides) is serves


def _spoil_keys(db: Path, stamp: str, where: str = "TRUE") -> None:
    """One key for every decision `where` selects: wrong unless it is not used."""
    with duckdb.connect(str(db)) as conn:
        conn.execute(
            f"UPDATE attempts SET decision_key = 'one key', decision_key_version = ? "
            f"WHERE {where}", [stamp],
        )


@pytest.mark.parametrize("where", ["TRUE", "n % 2 = 0"], ids=["all-stale", "half-stale"])
@pytest.mark.parametrize(
    "overrides", [{}, {"max_attempts": 5}, {"max_validation_retries": 0}],
    ids=["no-overrides", "max_attempts=5", "max_validation_retries=0"],
)
def test_keys_stamped_by_other_code_are_not_trusted(varied_db, tmp_path, overrides, where):
    db = _copy(varied_db, tmp_path / "stale.duckdb")
    _spoil_keys(db, "an older policy", where)
    keyed = what_if(open_store(db), None, overrides)
    assert keyed.to_dict() == what_if_row_by_row(open_store(db), None, overrides).to_dict()
    assert keyed.to_dict() == what_if(open_store(varied_db), None, overrides).to_dict()


def test_current_keys_are_trusted(varied_db, tmp_path):
    # The converse: with the current stamp the stored key is what groups the decisions.
    db = _copy(varied_db, tmp_path / "trusted.duckdb")
    _spoil_keys(db, STORED_KEY_VERSION)
    keyed = what_if(open_store(db), None, {"max_attempts": 5})
    reference = what_if_row_by_row(open_store(db), None, {"max_attempts": 5})
    assert keyed.to_dict() != reference.to_dict()


@pytest.mark.parametrize(
    "overrides", [o for o, serves in _SERVES if not serves],
    ids=[",".join(f"{k}={v}" for k, v in o.items()) for o, serves in _SERVES if not serves],
)
def test_a_budget_set_by_the_overrides_keys_from_the_recorded_json(varied_db, tmp_path,
                                                                    overrides):
    db = _copy(varied_db, tmp_path / "budget.duckdb")
    _spoil_keys(db, STORED_KEY_VERSION)
    keyed = what_if(open_store(db), None, overrides)
    assert keyed.to_dict() == what_if_row_by_row(open_store(db), None, overrides).to_dict()


def _sessions_and_progress(db: Path, monkeypatch, slice_s: float) -> tuple[int, list[int], int]:
    opened = open_store(db)
    sessions: list[int] = []
    real = store.queries.Store.session

    def counted(self, **kwargs):
        sessions.append(1)
        return real(self, **kwargs)

    monkeypatch.setattr(store.queries.Store, "session", counted)
    monkeypatch.setattr(whatif_module, "FAST_EXECUTIONS_PER_BATCH", 5)
    monkeypatch.setattr(whatif_module, "SESSION_SLICE_S", slice_s)
    done: list[int] = []
    report = what_if(opened, None, {"max_attempts": 5},
                     progress=lambda executions, _: done.append(executions))
    monkeypatch.setattr(store.queries.Store, "session", real)
    assert report.to_dict() == what_if_row_by_row(
        open_store(db), None, {"max_attempts": 5}).to_dict()
    return len(sessions), done, report.executions


def test_the_batches_share_one_store_session(varied_db, monkeypatch):
    sessions, done, executions = _sessions_and_progress(varied_db, monkeypatch, 3600.0)
    # The matching executions, then every batch in one session.
    assert sessions == 2
    assert len(done) == -(-executions // 5) > 2
    assert done[-1] == executions


def test_a_session_held_past_its_slice_lets_a_writer_in_before_the_next_batch(
    varied_db, monkeypatch
):
    sessions, done, executions = _sessions_and_progress(varied_db, monkeypatch, 0.0)
    assert sessions == 1 + len(done) == 1 + -(-executions // 5)


# How the rows are keyed: stored keys, stale stamps on half of them (stored and from the JSON
# in one query), and a budget set by --config (every row keyed from the JSON).
_KEYINGS = [("stored", None, {"max_attempts": 5}),
            ("half_stale", "rowid % 2 = 0", {"max_attempts": 5}),
            ("from_json", None, {"max_attempts": 5, "max_wall_clock_s": 100})]


@pytest.mark.parametrize("bound", [1, 7])
@pytest.mark.parametrize(("stale", "overrides"), [k[1:] for k in _KEYINGS],
                         ids=[k[0] for k in _KEYINGS])
def test_batches_bounded_by_decisions_give_the_row_by_row_report(
    varied_db, tmp_path, monkeypatch, bound, stale, overrides
):
    """With at most `bound` decisions a batch, executions are batched by their decisions and
    one with more is read a range of steps at a time (a step with more is a range alone)."""
    db = _copy(varied_db, tmp_path / "bounded.duckdb")
    if stale is not None:
        _spoil_keys(db, "stale", stale)
    monkeypatch.setattr(whatif_module, "DECISIONS_PER_BATCH", bound)
    batches: list[tuple[int, tuple[str, str] | None, int]] = []
    real_batch = KeyScan.batch

    def spied(self, execution_ids, *args, steps=None, **kwargs):
        keyed = real_batch(self, execution_ids, *args, steps=steps, **kwargs)
        batches.append((len(execution_ids), steps, keyed.table.num_rows + keyed.skipped))
        return keyed

    monkeypatch.setattr(KeyScan, "batch", spied)
    done: list[int] = []
    report = what_if(open_store(db), None, overrides,
                     progress=lambda executions, _: done.append(executions))
    monkeypatch.setattr(KeyScan, "batch", real_batch)
    assert report.to_dict() == what_if_row_by_row(open_store(db), None, overrides).to_dict()
    assert report.changed > 0
    assert any(steps is not None for _, steps, _ in batches)
    for executions, steps, rows in batches:
        assert rows <= bound or (executions == 1 and steps is not None and steps[0] == steps[1])
    assert sum(rows for *_, rows in batches) == report.decisions
    assert done == sorted(done) and done[-1] == report.executions
