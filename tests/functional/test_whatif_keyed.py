"""The keyed `what_if` (one decision per distinct key) against the row-by-row reference, on
stores recorded from the real demo runs: the same reports, the same `--json` bytes."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest

import console.cli.whatif
import console.whatif
from bench.bench_whatif import OVERRIDES, build_store, distinct_keys
from console.entry import main
from console.whatif import what_if, what_if_row_by_row
from store.decision_keys import refresh_stored_keys_sql
from store.queries import ExecutionFilter, open_store
from tests.support.demo_store import record_demo_store

_OVERRIDES = [
    {}, {"max_attempts": 5}, {"max_attempts": 2}, {"max_validation_retries": 0},
    {"retry_after_max_ms": 0}, {"initial_delay_ms": 5000, "max_wall_clock_s": 1},
    {"semantic_retry_enabled": False}, {"error_analyzer_enabled": False},
    {"max_retries_per_tool": 0}, {"max_wall_clock_s": 0.5}, {"max_llm_calls": 1},
    {"max_total_tokens": 100}, {"max_repeated_errors": 1}, {"jitter": False},
    {"initial_delay_ms": 100}, {"backoff_factor": 3}, {"max_delay_ms": 1},
]
_IDS = [",".join(f"{k}={v}" for k, v in o.items()) or "no-overrides" for o in _OVERRIDES]


@pytest.fixture(scope="module")
def demo_db(tmp_path_factory) -> Path:
    return record_demo_store(Path(tmp_path_factory.mktemp("whatif-keyed")) / "demo.duckdb")


@pytest.fixture(scope="module")
def varied_db(demo_db, tmp_path_factory) -> Path:
    """Six copies of the demo store, each with its own elapsed times, token counts and error
    texts, and three variants of parameter keys and 5xx statuses (bench_whatif's variety)."""
    directory = Path(tmp_path_factory.mktemp("whatif-varied"))
    return build_store(demo_db, directory / "varied.duckdb", 6 * 41, 0.5)


@pytest.mark.parametrize("overrides", _OVERRIDES, ids=_IDS)
def test_keyed_report_equals_row_by_row_on_the_demo_store(demo_db, overrides):
    keyed = what_if(open_store(demo_db), None, overrides)
    reference = what_if_row_by_row(open_store(demo_db), None, overrides)
    assert keyed.to_dict() == reference.to_dict()
    assert keyed.first_unreadable == reference.first_unreadable


@pytest.mark.parametrize("overrides", _OVERRIDES, ids=_IDS)
def test_keyed_report_equals_row_by_row_on_a_varied_store(varied_db, overrides):
    keyed = what_if(open_store(varied_db), None, overrides)
    reference = what_if_row_by_row(open_store(varied_db), None, overrides)
    assert keyed.decisions > 200
    assert keyed.to_dict() == reference.to_dict()


@pytest.mark.parametrize(
    "args",
    [[], ["--config", "max_attempts=5"], ["--config", "max_attempts=2", "--tool", "weather"],
     ["--config", "max_validation_retries=0", "--rule", "analyzer.accept"]],
    ids=["regression", "attempts-5", "attempts-2-one-tool", "no-corrections-one-rule"],
)
def test_json_output_is_byte_identical_to_the_row_by_row_path(demo_db, capsys, monkeypatch,
                                                               args):
    assert main(["whatif", "--db", str(demo_db), "--json", *args]) == 0
    keyed = capsys.readouterr().out
    monkeypatch.setattr(console.cli.whatif, "what_if", what_if_row_by_row)
    assert main(["whatif", "--db", str(demo_db), "--json", *args]) == 0
    assert keyed == capsys.readouterr().out
    assert json.loads(keyed)["decisions"] > 0


def test_identical_inputs_are_decided_once(varied_db, monkeypatch):
    calls: list[int] = []
    real = console.whatif.redecider

    def counting(overrides, **kwargs):
        decide_again = real(overrides, **kwargs)

        def counted(inputs):
            calls.append(1)
            return decide_again(inputs)

        return counted

    monkeypatch.setattr(console.whatif, "redecider", counting)
    report = what_if(open_store(varied_db), None, OVERRIDES)
    rerun = report.decisions - report.not_rerun
    # Six copies with their own elapsed times, tokens and error texts, in four variants
    # (the original and k % 3): at most four decisions per recorded demo decision.
    assert len(calls) == distinct_keys(varied_db)
    assert 0 < len(calls) * 6 <= rerun * 4


def test_unreadable_and_incomplete_inputs_are_counted_as_row_by_row(tmp_path, demo_db):
    db = tmp_path / "damaged.duckdb"
    db.write_bytes(demo_db.read_bytes())
    with duckdb.connect(str(db)) as conn:
        rows = conn.execute(
            "SELECT execution_id, step_id, n FROM attempts WHERE action IS NOT NULL "
            "ORDER BY execution_id, step_id, n LIMIT 5"
        ).fetchall()
        damage = [
            "json_merge_patch(decision, '{\"inputs\": {\"error_text\": 5}}')",
            "json_merge_patch(decision, '{\"inputs\": {\"future_field\": 1}}')",
            "json_merge_patch(decision, '{\"inputs\": {\"elapsed_s\": null}}')",
            "json_object('action', 'stop_budget', 'inputs', json('{}'))",
            "json_object('action', 'stop_budget')",
        ]
        for (execution_id, step_id, n), value in zip(rows, damage, strict=True):
            conn.execute(
                f"UPDATE attempts SET decision = {value} "
                "WHERE execution_id = ? AND step_id = ? AND n = ?", [execution_id, step_id, n],
            )
        # As ingest would have written them for these decisions.
        conn.execute(refresh_stored_keys_sql())
    keyed = what_if(open_store(db), ExecutionFilter(), {})
    reference = what_if_row_by_row(open_store(db), ExecutionFilter(), {})
    assert keyed.to_dict() == reference.to_dict()
    assert keyed.first_unreadable == reference.first_unreadable is not None
    # A wrong type, an unknown field, no inputs; a removed field, no fields.
    assert (keyed.unreadable, keyed.incomplete) == (3, 2)
    assert keyed.missing_inputs >= {"elapsed_s", "dispatched"}
