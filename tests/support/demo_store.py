"""A debug store recorded from the real demo runs (loopback demo tools and the rule-based model)."""

from __future__ import annotations

import atexit
import itertools
import shutil
import tempfile
from pathlib import Path

import duckdb
import pytest

from console.demo import record_demo
from store.recorder import StoreRecorder

# One recording per test process and `fixed_ids`; each caller gets a copy of its files.
_RECORDED: dict[bool, Path] = {}


def record_demo_store(db: Path, *, fixed_ids: bool = False) -> Path:
    """A store at `db` of every demo plan's run; with `fixed_ids` the execution ids are numbered
    in run order (`20261201-120000-demo000001`, …), so what a screen shows does not change
    between runs. The demo is recorded once per test process (~3 s) and its files copied."""
    recorded = _RECORDED.get(fixed_ids)
    if recorded is None:
        directory = tempfile.mkdtemp(prefix="truva-demo-store-")
        atexit.register(shutil.rmtree, directory, True)
        recorded = Path(directory) / "demo.duckdb"
        _record(recorded, fixed_ids=fixed_ids)
        _RECORDED[fixed_ids] = recorded
    return copy_store(recorded, db)


def copy_store(source: Path, db: Path) -> Path:
    """A copy of the store at `source` (its file and any spool) at `db`, for a test to change."""
    db.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, db)
    spool = source.with_name(source.name + ".spool")
    if spool.is_dir():
        shutil.copytree(spool, db.with_name(db.name + ".spool"))
    return db


def _record(db: Path, *, fixed_ids: bool) -> None:
    """Run every demo plan into `db` (a new store)."""
    with pytest.MonkeyPatch.context() as patch:
        if fixed_ids:
            numbers = itertools.count(1)
            patch.setattr("executor.runtime.plan_executor.new_execution_id",
                          lambda now=None: f"20261201-120000-demo{next(numbers):06d}")  # fmt: skip
        recorder = StoreRecorder(db)
        try:
            record_demo(recorder)
        finally:
            recorder.close()


def execution_of(db: Path, plan: str) -> str:
    """The id of the execution of the demo plan `plan` (`scenario-d-misclassified-503`)."""
    with duckdb.connect(str(db), read_only=True) as conn:
        row = conn.execute(
            "SELECT execution_id FROM executions WHERE plan_path = ?", [f"demo:{plan}"]
        ).fetchone()
    assert row is not None, plan
    return row[0]


_SAMPLES: list[Path] = []


def sample_store_copy(db: Path) -> Path:
    """A copy of `prepare_sample_store()`'s store at `db` (which must not exist yet): the sample
    traces are replayed into a store once per test process (~0.5 s of CPU) and copied."""
    from console.samples import prepare_sample_store

    assert not db.exists(), db
    if not _SAMPLES:
        directory = tempfile.mkdtemp(prefix="truva-sample-store-")
        atexit.register(shutil.rmtree, directory, True)
        _SAMPLES.append(prepare_sample_store(Path(directory) / "samples.duckdb"))
    return copy_store(_SAMPLES[0], db)
