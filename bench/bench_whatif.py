"""`whatif` speed: recorded decisions re-decided per second, beside reading the same rows.

Records the demo store once, copies its attempts into a store of N decisions (distinct
execution ids), then times, side by side in the same run:
- baseline: reading the decision inputs the way `whatif` does and parsing their JSON;
- `what_if(store, None, {"max_attempts": 5})`.
Prints both rates, the ratio and the projected time for 1,000,000 decisions (issue 13: "1M
recorded decisions in well under a minute"). Usage: python bench/bench_whatif.py [--decisions N]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import duckdb

from console.demo import record_demo
from console.whatif import what_if
from store.queries import open_store
from store.recorder import StoreRecorder


def build_store(directory: Path, decisions: int) -> Path:
    db = directory / "whatif.duckdb"
    recorder = StoreRecorder(db)
    try:
        record_demo(recorder)
    finally:
        recorder.close()
    with duckdb.connect(str(db)) as conn:
        per_copy = conn.execute("SELECT count(*) FROM attempts").fetchone()[0]
        copies = max(1, decisions // per_copy)
        conn.execute("CREATE TEMP TABLE copies AS SELECT range AS k FROM range(1, $n)",
                     {"n": copies})
        conn.execute(
            "INSERT INTO executions SELECT executions.* "
            "REPLACE (execution_id || '-' || k AS execution_id) FROM executions, copies"
        )
        conn.execute(
            "INSERT INTO steps SELECT steps.* "
            "REPLACE (execution_id || '-' || k AS execution_id) FROM steps, copies"
        )
        conn.execute(
            "INSERT INTO attempts SELECT attempts.* "
            "REPLACE (execution_id || '-' || k AS execution_id) FROM attempts, copies"
        )
    return db


def baseline(db: Path) -> int:
    store = open_store(db)
    rows = 0
    ids = store.matching_execution_ids(None)
    for start in range(0, len(ids), 2000):
        batch, _ = store.recorded_decisions(ids[start : start + 2000])
        for row in batch:
            json.loads(row[5])
            rows += 1
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--decisions", type=int, default=100_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-whatif-") as directory:
        db = build_store(Path(directory), args.decisions)
        started = time.perf_counter()
        rows = baseline(db)
        read_s = time.perf_counter() - started
        started = time.perf_counter()
        report = what_if(open_store(db), None, {"max_attempts": 5})
        whatif_s = time.perf_counter() - started
    assert report.decisions == rows
    print(f"decisions                  {rows:>12,}")
    print(f"read + parse (baseline)    {rows / read_s:>12,.0f} /s  ({read_s:.2f} s)")
    print(f"whatif max_attempts=5      {rows / whatif_s:>12,.0f} /s  ({whatif_s:.2f} s), "
          f"{report.changed:,} changed")
    print(f"ratio whatif / baseline    {read_s / whatif_s:>12.2f}")
    print(f"projected for 1,000,000    {whatif_s / rows * 1_000_000:>12.1f} s")


if __name__ == "__main__":
    main()
