"""How cost grows with size: executor steps, recorded attempts and text search at 1k/10k/100k.

Usage: .venv/bin/python bench/scaling.py [--sizes 1000,10000,100000] [--parts executor,...]

Parts: `executor` (ms/step of the bare httpx loop, the executor without a recorder, and the
executor + DuckDB store, concurrency 1); `executor-store` (the same without the no-recorder
run); `attempts` (attempt rows/s through StoreRecorder,
1 KB bodies); `search` (text search ms over a bench_store.py store of size/10 executions, i.e.
`size` attempts). Per-unit figures should stay flat; anything growing with size is a bug.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench import measures  # noqa: E402


def executor_row(size: int, work: Path) -> list[str]:
    with measures._echo_server() as server:
        url = f"{server.base_url}/capabilities/echo"
        document = measures.plan_document(server.base_url, size)
        asyncio.run(measures._bare_loop(url, 200, 1))
        bare = measures._seconds(lambda: measures._bare_loop(url, size, 1))
        plain = measures._seconds(lambda: measures._run_executor(document, None))
        stored = measures._executor_with_store(document, work / f"scale-{size}.duckdb")
    return [f"{seconds / size * 1e3:.3f}" for seconds in (bare, plain, stored)]


def executor_store_row(size: int, work: Path) -> list[str]:
    with measures._echo_server() as server:
        url = f"{server.base_url}/capabilities/echo"
        document = measures.plan_document(server.base_url, size)
        asyncio.run(measures._bare_loop(url, 200, 1))
        bare = measures._seconds(lambda: measures._bare_loop(url, size, 1))
        stored = measures._executor_with_store(document, work / f"scale-{size}.duckdb")
    return [f"{seconds / size * 1e3:.3f}" for seconds in (bare, stored)]


def attempts_row(size: int, work: Path) -> list[str]:
    executions = measures.attempt_executions(max(size // 100, 1), min(size, 100), 1_000)
    seconds = measures.record_all(work / f"attempts-{size}.duckdb", executions)
    return [f"{size / seconds:,.0f}"]


def search_row(size: int, work: Path) -> list[str]:
    from bench.bench_store import build
    from store.queries import ExecutionFilter, open_store

    executions = max(size // 10, 1)
    db = work / f"search-{executions}.duckdb"
    build(db, executions)
    store = open_store(db)
    samples = []
    for _ in range(3):
        started = time.perf_counter()
        store.list_executions(ExecutionFilter(text=f"failure {executions * 5 + 7} "))
        samples.append((time.perf_counter() - started) * 1e3)
    return [f"{statistics.median(samples):.1f}"]


PARTS = {
    "executor": (executor_row, "ms/step: bare httpx | executor | executor + store"),
    "executor-store": (executor_store_row, "ms/step: bare httpx | executor + store"),
    "attempts": (attempts_row, "attempt rows/s through StoreRecorder (1 KB bodies)"),
    "search": (search_row, "text search ms (size = attempts)"),
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--parts", default=",".join(PARTS))
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]
    with tempfile.TemporaryDirectory(prefix="truva-scaling-") as tmp:
        for part in args.parts.split(","):
            run, title = PARTS[part]
            print(title, flush=True)
            for size in sizes:
                started = time.perf_counter()
                cells = run(size, Path(tmp))
                print(f"  {size:>9,d}  " + "  ".join(f"{cell:>10}" for cell in cells)
                      + f"   ({time.perf_counter() - started:.0f} s)", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
