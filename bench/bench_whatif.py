"""`whatif` speed: recorded decisions re-decided per second, keyed path beside the row-by-row one.

Records the demo store (41 decisions) once and copies its attempts into stores of N decisions
(distinct execution ids). Each copy k gets realistic variety: every decision its own
`elapsed_s`, the copy its own `llm_tokens_used` and error text (a request id), and variant
v = k % V an extra parameter key `opt_v` and, for HTTP 503, status 502/503/504 by v % 3, with V
chosen so that about SHARE of the decisions have distinct inputs for a re-decision (none of
the variety a re-decision cannot read counts: elapsed times without a wall-clock budget, token
counts without a token budget, error texts). The worst case gives every copy its own variant
and sets a wall-clock budget, so every decision's inputs are distinct.

Times, in the same run:
- baseline: reading the decision inputs the way `what_if_row_by_row` does and parsing them;
- `what_if_row_by_row` (every decision from its own inputs) on a sample store;
- `what_if` (keyed: one decision per distinct key, grouped by the key stored with each
  decision) on the same sample and on the big store, and with the stored keys' stamps stale
  (keyed from the decision JSON, as before schema 4) on the sample;
- writing the big store's stored keys (the UPDATE the migration runs; ingest computes the same
  expression per attempt);
- `what_if` on the worst-case store, with stored keys and from the JSON.
Prints decisions/s, wall and CPU seconds (the CPU time of all the process's threads: on a
machine shared with other work the wall time is longer), distinct keys and the projected time
for 1,000,000 decisions (issue 13: "1M recorded decisions in well under a minute").
Usage: python bench/bench_whatif.py [--decisions N] [--sample N] [--worst N] [--share S]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import duckdb

from console.demo import record_demo
from console.whatif import WhatIfReport, unaffected_rule_ids, what_if, what_if_row_by_row
from executor.policy.redecide_key import redecide_key
from store.decision_keys import key_expression, refresh_stored_keys_sql
from store.queries import open_store
from store.recorder import StoreRecorder

OVERRIDES = {"max_attempts": 5}


def record_demo_store(directory: Path) -> Path:
    db = directory / "demo.duckdb"
    recorder = StoreRecorder(db)
    try:
        record_demo(recorder)
    finally:
        recorder.close()
    return db


def build_store(
    demo: Path, db: Path, decisions: int, share: float | None, *, keys: bool = True
) -> Path:
    """A copy of `demo` with about `decisions` decisions, about `share` of them with distinct
    inputs; `share=None`: the worst case, every decision distinct. `keys=False` leaves the
    copies' stored keys stale (`write_keys` writes them)."""
    db.write_bytes(demo.read_bytes())
    with duckdb.connect(str(db)) as conn:
        per_copy = conn.execute("SELECT count(*) FROM attempts").fetchone()[0]
        copies = max(1, decisions // per_copy)
        variants = None if share is None else max(1, round(copies * share))
        conn.execute("CREATE TEMP TABLE copies AS SELECT range AS k FROM range(1, $n)",
                     {"n": copies})
        for table in ("executions", "steps"):
            conn.execute(
                f"INSERT INTO {table} SELECT {table}.* "
                f"REPLACE (execution_id || '-' || k AS execution_id) FROM {table}, copies"
            )
        variant = "k" if variants is None else f"k % {variants}"
        wall_clock = "'max_wall_clock_s', 86400.0, " if variants is None else ""
        conn.execute(
            "INSERT INTO attempts SELECT attempts.* REPLACE ("
            "  execution_id || '-' || k AS execution_id,"
            "  CASE WHEN json_type(decision, '$.inputs') = 'OBJECT' THEN json_merge_patch("
            "    decision, json_object('inputs', json_object("
            f"      {wall_clock}"
            "      'elapsed_s', random() * 60,"
            "      'llm_tokens_used', (k * 7919) % 5000,"
            "      'error_text', json_extract_string(decision, '$.inputs.error_text')"
            "                    || ' request ' || k,"
            "      'parameter_keys', to_json(list_append("
            "        CAST(json_extract(decision, '$.inputs.parameter_keys') AS VARCHAR[]),"
            f"        'opt_' || ({variant}))),"
            "      'status', CASE WHEN json_extract(decision, '$.inputs.status') = '503'"
            f"        THEN to_json([502, 503, 504][({variant}) % 3 + 1])"
            "        ELSE json_extract(decision, '$.inputs.status') END))"
            "  ) ELSE decision END AS decision"
            ") FROM attempts, copies"
        )
    if keys:
        write_keys(db)
    return db


def write_keys(db: Path) -> None:
    """The copies' decisions changed: write their stored keys as ingest (and the migration to
    schema 4) would have."""
    with duckdb.connect(str(db)) as conn:
        conn.execute(refresh_stored_keys_sql())


def stale_keys(db: Path) -> None:
    """Stamp every stored key as written by other code: `what_if` keys the JSON."""
    with duckdb.connect(str(db)) as conn:
        conn.execute("UPDATE attempts SET decision_key_version = 'stale'")


def distinct_keys(db: Path) -> int:
    """Distinct keys among the decisions `what_if(OVERRIDES)` re-runs."""
    expression = key_expression(redecide_key(OVERRIDES), "a.decision")
    with duckdb.connect(str(db), read_only=True) as conn:
        return conn.execute(
            f"SELECT count(DISTINCT {expression}) FROM attempts AS a WHERE a.action IS NOT NULL "
            "AND NOT list_contains($skip, coalesce(a.rule_id, ''))",
            {"skip": sorted(unaffected_rule_ids(OVERRIDES))},
        ).fetchone()[0]


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


_cpu: dict[str, float] = {}


def timed(run: Callable[[], WhatIfReport | int]) -> tuple[WhatIfReport | int, float]:
    """The result and wall seconds of `run()`; its CPU seconds (all threads) go to `line`."""
    started, cpu_started = time.perf_counter(), time.process_time()
    result = run()
    _cpu["last"] = time.process_time() - cpu_started
    return result, time.perf_counter() - started


def line(label: str, decisions: int, seconds: float, extra: str = "") -> None:
    cpu = _cpu["last"]
    print(f"{label:<34} {decisions:>10,} decisions {decisions / seconds:>10,.0f} /s "
          f"{seconds:>8.2f} s (CPU {cpu:>7.2f} s)  1M in {seconds / decisions * 1_000_000:>6.1f} s"
          f"  {extra}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--decisions", type=int, default=1_000_000)
    parser.add_argument("--sample", type=int, default=20_000)
    parser.add_argument("--worst", type=int, default=100_000)
    parser.add_argument("--share", type=float, default=0.05)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-whatif-") as name:
        directory = Path(name)
        demo = record_demo_store(directory)
        sample = build_store(demo, directory / "sample.duckdb", args.sample, args.share)
        rows, read_s = timed(lambda: baseline(sample))
        line("read + parse (baseline), sample", rows, read_s)
        slow, slow_s = timed(lambda: what_if_row_by_row(open_store(sample), None, OVERRIDES))
        line("row by row, sample", slow.decisions, slow_s, f"{slow.changed:,} changed")
        fast, fast_s = timed(lambda: what_if(open_store(sample), None, OVERRIDES))
        line("keyed (stored keys), sample", fast.decisions, fast_s,
             f"{fast.changed:,} changed, {distinct_keys(sample):,} distinct keys")
        assert fast.to_dict() == slow.to_dict(), "keyed and row-by-row reports differ"
        stale_keys(sample)
        json_keyed, json_s = timed(lambda: what_if(open_store(sample), None, OVERRIDES))
        line("keyed from the JSON, sample", json_keyed.decisions, json_s, "stamps stale")
        assert json_keyed.to_dict() == slow.to_dict(), "JSON-keyed and row-by-row reports differ"
        big = build_store(demo, directory / "big.duckdb", args.decisions, args.share, keys=False)
        _, keys_s = timed(lambda: write_keys(big) or 0)
        line("writing the stored keys (ingest)", args.decisions, keys_s, "UPDATE, as migration")
        report, big_s = timed(lambda: what_if(open_store(big), None, OVERRIDES))
        line(f"keyed, {args.share:.0%} distinct", report.decisions, big_s,
             f"{report.changed:,} changed, {distinct_keys(big):,} distinct keys, "
             f"{report.not_rerun:,} not re-run")
        big.unlink()
        worst = build_store(demo, directory / "worst.duckdb", args.worst, None)
        report, worst_s = timed(lambda: what_if(open_store(worst), None, OVERRIDES))
        line("keyed, worst case (all distinct)", report.decisions, worst_s,
             f"{report.changed:,} changed, {distinct_keys(worst):,} distinct keys, "
             f"{report.not_rerun:,} not re-run")
        stale_keys(worst)
        report, worst_json_s = timed(lambda: what_if(open_store(worst), None, OVERRIDES))
        line("keyed from the JSON, worst case", report.decisions, worst_json_s, "stamps stale")
    print(f"overrides {OVERRIDES}; speed-up keyed / row by row on the sample: "
          f"{slow_s / fast_s:.1f}x")


if __name__ == "__main__":
    main()
