"""Build a large synthetic debug store with DuckDB SQL and time the console's queries on it.

Usage: .venv/bin/python bench/bench_store.py [--executions 100000] [--db PATH] [--keep]
Each execution has 5 steps and 2 attempts per step (1M attempts for 100k executions), half of
the executions one LLM call, and 3 backoff events per retried attempt. Timings go through the
public query API, so each includes opening the file (~13 ms) and closing it.
"""

from __future__ import annotations

import argparse
import hashlib
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from store.connection import session, store_paths
from store.queries import ExecutionFilter, Store, open_store
from store.schema import DERIVED_COLUMNS

START_AT = 1_767_225_600

_EXECUTIONS = """
INSERT INTO executions
SELECT
    md5(CAST(i AS VARCHAR)) AS execution_id,
    CASE WHEN i % 10 = 0 THEN 'failed' WHEN i % 7 = 0 THEN 'partial' ELSE 'succeeded' END,
    make_timestamptz(CAST(($start + i * 30) * 1000000 AS BIGINT)),
    make_timestamptz(CAST(($start + i * 30 + 2.5) * 1000000 AS BIGINT)),
    'bench query number ' || i,
    'plans/bench.json', NULL, [], (i % 2), (i % 2) * 150, '0.1.0', 1, 'bench', 'bench-writer',
    NULL AS rerun_of, NULL AS labels
FROM range($executions) AS t(i)
"""

_SNAPSHOTS = """
INSERT INTO execution_snapshots
SELECT md5(CAST(i AS VARCHAR)),
    '{"query": "bench", "steps": [{"id": "step-0"}, {"id": "step-1"}, {"id": "step-2"},'
        || ' {"id": "step-3"}, {"id": "step-4"}]}',
    '{"max_attempts": 3}', '{}', '{"model": "gpt-test"}'
FROM range($executions) AS t(i)
"""

_STEPS = """
INSERT INTO steps
SELECT
    md5(CAST(k // 5 AS VARCHAR)), 'step-' || (k % 5),
    ['weather', 'crm', 'billing', 'geo', 'inventory'][k % 5 + 1],
    ['forecast', 'create_contact', 'charge', 'lookup', 'reserve'][k % 5 + 1],
    'http://127.0.0.1:8101/capabilities/x', [], '{"city": "Paris"}', '{}', false, 'none',
    CASE WHEN (k // 5) % 10 = 0 AND k % 5 = 2 THEN 'failed' ELSE 'succeeded' END,
    2, 2, 0, 0,
    CASE WHEN (k // 5) % 10 = 0 AND k % 5 = 2 THEN 'stop_terminal' ELSE 'success' END,
    CASE WHEN (k // 5) % 10 = 0 AND k % 5 = 2 THEN 'terminal.auth_or_method'
        ELSE 'success.2xx' END,
    NULL, '{"ok": true}', NULL,
    make_timestamptz(CAST(($start + (k // 5) * 30 + (k % 5) * 0.4) * 1000000 AS BIGINT)),
    make_timestamptz(CAST(($start + (k // 5) * 30 + (k % 5) * 0.4 + 0.3) * 1000000 AS BIGINT))
FROM range($executions * 5) AS t(k)
"""

# First attempts fail with 429, 503, 400 or 401 by a hash of their index; second attempts pass.
_ATTEMPTS = """
INSERT INTO attempts
SELECT
    md5(CAST(k // 10 AS VARCHAR)), 'step-' || ((k % 10) // 2), k % 2 + 1, true,
    '{"city": "Paris", "i": ' || k || '}', NULL, 'POST', 'http://127.0.0.1:8101/capabilities/x',
    '{"Content-Type": "application/json", "Authorization": "[REDACTED]"}',
    encode('{"city": "Paris", "i": ' || k || '}'), 30,
    status,
    '{"Content-Type": "application/json"}',
    encode(CASE WHEN status = 200 THEN '{"success":true,"data":{"value":' || k || '}}'
        ELSE '{"success":false,"error":{"code":"E' || status || '","message":"failure '
            || k || ' ' || repeat('detail ', 40) || '","category":"SERVICE_ERROR"}}' END),
    300, NULL, NULL, 12.5, 'unspecified',
    action, rule_id, 'HTTP ' || status || ' routed by ' || rule_id,
    '{"action": "' || action || '", "rule_id": "' || rule_id || '", "inputs": {"status": '
        || status || ', "attempt_number": ' || (k % 2 + 1) || ', "max_attempts": 3},'
        || ' "not_matched": [{"rule_id": "success.2xx", "reason": "not 2xx"},'
        || ' {"rule_id": "refused.explicit_false", "reason": "retryable unspecified"}]}',
    NULL, NULL,
    CASE WHEN action = 'retry_same' THEN 542.0735 END,
    CASE WHEN action = 'retry_same' THEN 'backoff' END,
    make_timestamptz(CAST(($start + (k // 10) * 30 + (k % 10) * 0.2) * 1000000 AS BIGINT)),
    make_timestamptz(CAST(($start + (k // 10) * 30 + (k % 10) * 0.2 + 0.01) * 1000000 AS BIGINT)),
    make_timestamptz(CAST(($start + (k // 10) * 30 + (k % 10) * 0.2 + 0.02) * 1000000 AS BIGINT)),
    NULL AS recovery, NULL AS impact, NULL AS search_text,
    NULL AS decision_key, NULL AS decision_key_version
FROM (
    SELECT k, status,
        CASE status WHEN 200 THEN 'success' WHEN 401 THEN 'stop_terminal'
            WHEN 400 THEN 'retry_corrected' ELSE 'retry_same' END AS action,
        CASE status WHEN 200 THEN 'success.2xx' WHEN 401 THEN 'terminal.auth_or_method'
            WHEN 400 THEN 'analyzer.accept' ELSE 'transient.retry_same' END AS rule_id
    FROM (
        SELECT k, CASE WHEN k % 2 = 1 THEN 200
            ELSE [429, 503, 400, 401][CAST(hash(k) % 4 AS INTEGER) + 1] END AS status
        FROM range($executions * 10) AS t(k)
    )
)
"""

_LLM_CALLS = """
INSERT INTO llm_calls
SELECT
    'call-' || i, md5(CAST(i AS VARCHAR)), 'step-1', 1, 'error_analysis', 'gpt-test',
    'http://127.0.0.1:8200/v1', 0.0, 1024,
    encode('{"model": "gpt-test", "messages": [{"role": "system", "content": "You analyze '
        || 'failed tool calls."}, {"role": "user", "content": "HTTP 400 from '
        || 'crm.create_contact for request ' || i || ' ' || repeat('context ', 100) || '"}]}'),
    850, 200, encode('{"choices": []}'), 15,
    '{"should_retry": true, "reason": "fix ' || i || '"}', '{"should_retry": true}',
    NULL, NULL, 120, 30, 150, 800.0,
    make_timestamptz(CAST(($start + i * 30 + 1) * 1000000 AS BIGINT)),
    '{"x-request-id": "req-' || i || '"}', NULL, NULL
FROM range(0, $executions, 2) AS t(i)
"""

_EVENTS = """
INSERT INTO events
SELECT a.execution_id, a.step_id, a.n, row_number() OVER (), 'bench-writer',
    a.decided_at, 'backoff', phase,
    'backoff ' || phase, '{"planned_ms": 542.0735, "actual_ms": 543.1, "source": "backoff"}'
FROM attempts AS a, (VALUES ('planned'), ('started'), ('finished')) AS p(phase)
WHERE a.action = 'retry_same'
"""


def build(db: Path, executions: int) -> float:
    """Create the store at `db` and fill it; returns the seconds it took."""
    started = time.perf_counter()
    with session(store_paths(db), create=True) as conn:
        params = {"executions": executions, "start": START_AT}
        for statement in (_EXECUTIONS, _SNAPSHOTS, _STEPS, _ATTEMPTS, _LLM_CALLS):
            conn.execute(statement, {k: v for k, v in params.items() if f"${k}" in statement})
        conn.execute(_EVENTS)
        for table, derived in DERIVED_COLUMNS.items():  # as ingest computes them
            assignments = ", ".join(f"{name} = {sql}" for name, sql in derived.items())
            conn.execute(f"UPDATE {table} SET {assignments}")
        conn.execute("CHECKPOINT")
    return time.perf_counter() - started


def timed(run: Callable[[], Any], repeat: int = 5) -> float:
    """Median wall time of `run` in milliseconds."""
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        run()
        samples.append((time.perf_counter() - started) * 1000)
    return statistics.median(samples)


def cases(store: Store, executions: int) -> list[tuple[str, Callable[[], Any]]]:
    """The queries a console user runs, by name."""
    some_id = duckdb_id(executions // 2)
    window = (START_AT + 30 * executions // 4, START_AT + 30 * executions // 2)
    return [
        ("list: first page (50)", lambda: store.list_executions()),
        ("list: page at offset 50,000", lambda: store.list_executions(offset=executions // 2)),
        ("filter: status=failed", lambda: store.list_executions(ExecutionFilter(status="failed"))),
        ("filter: tool=crm", lambda: store.list_executions(ExecutionFilter(tool="crm"))),
        ("filter: capability=geo.lookup",
         lambda: store.list_executions(ExecutionFilter(capability="geo.lookup"))),
        ("filter: action=stop_terminal",
         lambda: store.list_executions(ExecutionFilter(action="stop_terminal"))),
        ("filter: rule_id=analyzer.accept",
         lambda: store.list_executions(ExecutionFilter(rule_id="analyzer.accept"))),
        ("filter: http_status=429",
         lambda: store.list_executions(ExecutionFilter(http_status=429))),
        ("filter: tool=crm + action=retry_same",
         lambda: store.list_executions(ExecutionFilter(tool="crm", action="retry_same"))),
        ("filter: time range",
         lambda: store.list_executions(ExecutionFilter(since=window[0], until=window[1]))),
        ("filter: text (bodies, prompts)",
         lambda: store.list_executions(ExecutionFilter(text="failure 123457 "))),
        ("detail: get_execution (full id)", lambda: store.get_execution(some_id)),
        ("detail: get_execution (8-char prefix)", lambda: store.get_execution(some_id[:8])),
        ("summary_counts: all", lambda: store.summary_counts()),
        ("summary_counts: status=failed",
         lambda: store.summary_counts(ExecutionFilter(status="failed"))),
    ]  # fmt: skip


def duckdb_id(index: int) -> str:
    """The execution id the generator gives execution number `index`."""
    return hashlib.md5(str(index).encode()).hexdigest()


def bench_recorder(directory: Path, executions: int = 1000) -> None:
    """Time `record()` on the executor's side, and the whole recording until `close()`."""
    from store.recorder import StoreRecorder
    from tests.support.events_factory import realistic_execution

    events = [
        event
        for index in range(executions)
        for event in realistic_execution(f"rec-{index:06d}", start_at=START_AT + index)
    ]
    recorder = StoreRecorder(directory / "recorder.duckdb")
    started = time.perf_counter()
    for event in events:
        recorder.record(event)
    recorded = time.perf_counter() - started
    recorder.close()
    total = time.perf_counter() - started
    print(f"recorder: {len(events):,} events of {executions:,} executions; record() "
          f"{recorded / len(events) * 1e6:.1f} µs per event on the caller's thread; "
          f"{len(events) / total:,.0f} events/s written through close()")  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--executions", type=int, default=100_000)
    parser.add_argument("--db", type=Path, help="store file to create (default: a temp dir)")
    parser.add_argument("--keep", action="store_true", help="keep the generated store")
    args = parser.parse_args()
    directory = tempfile.TemporaryDirectory(prefix="truva-bench-")
    db = args.db or Path(directory.name) / "bench.duckdb"
    if db.exists():
        parser.error(f"{db} exists; pass a new path")
    seconds = build(db, args.executions)
    size_mb = db.stat().st_size / 1e6
    print(f"built {args.executions:,} executions, {args.executions * 10:,} attempts in "
          f"{seconds:.1f} s ({size_mb:.0f} MB)")  # fmt: skip
    store = open_store(db)
    print(f"{'query':44} {'median ms':>10}")
    print(f"{'open_store':44} {timed(lambda: open_store(db)):10.1f}")
    for name, run in cases(store, args.executions):
        print(f"{name:44} {timed(run):10.1f}")
    bench_recorder(Path(directory.name))
    if args.keep:
        print(f"kept {db}")
    else:
        directory.cleanup()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
