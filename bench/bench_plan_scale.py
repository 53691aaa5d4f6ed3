"""Per-step executor cost as a plan grows: independent steps and a dependency chain.

Usage: .venv/bin/python bench/bench_plan_scale.py [--sizes 100,1000,10000] [--rounds 1]
       [--concurrency 1] [--time-limit 600]

One loopback tool answers 200 at once. For each size N it runs, interleaved: (a) a bare
`httpx.AsyncClient` loop POSTing N times (the network floor); (b) the executor on a plan of N
independent one-dispatch steps; (c) the executor on an N-step chain where step i depends on
step i-1 (`depends_on`) and binds a value from it (`{{step-<i-1>.data.n}}`). The executor runs
with no recorder, as `truva-console run --no-store` does with telemetry off, and with
`max_concurrency` 1 so both shapes send one request at a time. A run that passes
`--time-limit` seconds is cancelled and reported with the steps it finished.

It prints the median per-step time of each, then the scaling ratios issue 12 sets goals for:
per-step cost at the largest size ÷ at the smallest (floor <= 1.3), and chain ÷ independent
at the largest size (floor <= 2).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.measures import plan_document as _plan  # noqa: E402
from console.demo.server import DemoHTTPServer, DemoRequest, DemoResponse  # noqa: E402
from executor.events import StepFinished  # noqa: E402
from executor.plan import parse_plan  # noqa: E402
from executor.runtime import PlanExecutor  # noqa: E402


def _ok(request: DemoRequest) -> DemoResponse:
    n = request.json.get("n", 0) if isinstance(request.json, dict) else 0
    return DemoResponse(200, {"success": True, "data": {"n": n}})


class _Counter:
    """A recorder that only counts succeeded steps."""

    def __init__(self) -> None:
        self.succeeded = 0

    def record(self, event: object) -> None:
        if isinstance(event, StepFinished) and event.status == "succeeded":
            self.succeeded += 1


@dataclass(frozen=True, slots=True)
class _Run:
    seconds: float
    steps_done: int
    completed: bool


async def _bare_loop(url: str, size: int) -> int:
    async with httpx.AsyncClient() as client:
        for i in range(size):
            response = await client.post(url, json={"city": "Paris", "n": i})
            response.raise_for_status()
    return size


async def _executor(document: dict[str, Any], time_limit: float) -> int:
    counter = _Counter()
    executor = PlanExecutor(parse_plan(document), recorder=counter, env={})
    timer = asyncio.get_running_loop().call_later(time_limit, executor.cancel)
    try:
        await executor.run()
    finally:
        timer.cancel()
    return counter.succeeded


def _timed(work: Any, size: int) -> _Run:
    started = time.perf_counter()
    done = asyncio.run(work)
    return _Run(time.perf_counter() - started, done, done == size)


def _per_step_ms(runs: list[_Run]) -> float:
    return statistics.median(run.seconds / max(run.steps_done, 1) * 1000 for run in runs)


def main() -> None:
    """Run the sizes and print per-step medians and the scaling ratios."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100,1000,10000")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--time-limit", type=float, default=600.0)
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]
    shapes = ("bare httpx loop", "independent", "chain")
    results: dict[tuple[str, int], list[_Run]] = {}
    with DemoHTTPServer("bench", _ok) as server:
        url = f"{server.base_url}/capabilities/echo"
        # Warm-up, not counted: imports, the server's first connections, the allocator.
        asyncio.run(_executor(_plan(server.base_url, 200, chain=True, concurrency=1), 60.0))
        for size in sizes:
            documents = {
                "independent": _plan(server.base_url, size, chain=False,
                                     concurrency=args.concurrency),
                "chain": _plan(server.base_url, size, chain=True, concurrency=args.concurrency),
            }
            for _ in range(args.rounds):
                results.setdefault(("bare httpx loop", size), []).append(
                    _timed(_bare_loop(url, size), size))
                for shape in ("independent", "chain"):
                    results.setdefault((shape, size), []).append(
                        _timed(_executor(documents[shape], args.time_limit), size))
    print(f"loopback, max_concurrency {args.concurrency}, no recorder, "
          f"{args.rounds} round(s), medians")
    print(f"  {'shape':18s}" + "".join(f"{size:>14,d}" for size in sizes) + "   (ms/step)")
    for shape in shapes:
        cells = []
        for size in sizes:
            runs = results[(shape, size)]
            mark = "" if all(run.completed for run in runs) else "*"
            cells.append(f"{_per_step_ms(runs):13.3f}{mark or ' '}")
        print(f"  {shape:18s}" + "".join(cells))
    incomplete = [(shape, size, run) for (shape, size), runs in results.items() for run in runs
                  if not run.completed]
    for shape, size, run in incomplete:
        print(f"  * {shape} at {size:,}: cancelled after {run.seconds:.0f} s with "
              f"{run.steps_done:,} of {size:,} steps done")
    smallest, largest = sizes[0], sizes[-1]
    print("ratios (floor / goal from issue 12)")
    for shape in ("independent", "chain"):
        ratio = _per_step_ms(results[(shape, largest)]) / _per_step_ms(results[(shape, smallest)])
        print(f"  {shape}: per-step at {largest:,} / at {smallest:,} = {ratio:.2f}"
              f"   (floor <= 1.3, goal 1.0)")
    chain_ratio = _per_step_ms(results[("chain", largest)]) / _per_step_ms(
        results[("independent", largest)])
    print(f"  chain / independent at {largest:,} = {chain_ratio:.2f}   (floor <= 2, goal <= 1.2)")
    for shape in ("independent", "chain"):
        ratio = _per_step_ms(results[("bare httpx loop", largest)]) / _per_step_ms(
            results[(shape, largest)])
        print(f"  bare httpx / {shape} at {largest:,} = {ratio:.2f}   (higher is closer to bare)")


if __name__ == "__main__":
    main()
