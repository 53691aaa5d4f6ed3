"""What the executor and its recording cost, as ratios against a bare httpx loop run side by side.

Usage: .venv/bin/python bench/bench_executor.py [--requests 300] [--rounds 5]

One loopback tool answers 200 at once. Each round runs, interleaved so machine noise hits all of
them alike: (a) a bare `httpx.AsyncClient` loop POSTing the same JSON N times; (b) the executor
running a plan of N independent one-dispatch steps with max_concurrency 1 and no recorder;
(c) the same with a `ListRecorder`; (d) the same recording into a DuckDB store through
`StoreRecorder`. It prints the median per-request time of each and its ratio to (a).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import httpx

from console.demo.server import DemoHTTPServer, DemoRequest, DemoResponse
from executor.events import ListRecorder, Recorder
from executor.plan import parse_plan
from executor.runtime import PlanExecutor
from store.recorder import StoreRecorder


def _ok(request: DemoRequest) -> DemoResponse:
    return DemoResponse(200, {"success": True, "data": {"echo": request.json}})


def _plan(base_url: str, requests: int) -> dict:
    return {
        "query": "bench",
        "tools": {"bench": {"base_url": base_url}},
        "capabilities": {"bench.echo": {"path": "/capabilities/echo"}},
        "steps": [
            {"id": f"step-{i}", "tool": "bench", "capability": "echo",
             "parameters": {"city": "Paris", "n": i}}
            for i in range(requests)
        ],
        "config": {"max_concurrency": 1},
    }


async def _bare_loop(url: str, requests: int) -> None:
    async with httpx.AsyncClient() as client:
        for i in range(requests):
            response = await client.post(url, json={"city": "Paris", "n": i})
            response.raise_for_status()


async def _executor(document: dict, recorder: Recorder | None) -> None:
    outcome = await PlanExecutor(parse_plan(document), recorder=recorder, env={}).run()
    assert outcome.status == "succeeded", outcome.status


def _timed(run: Callable[[], Awaitable[None]]) -> float:
    started = time.perf_counter()
    asyncio.run(run())
    return time.perf_counter() - started


def main() -> None:
    """Run the rounds and print medians and ratios."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    timings: dict[str, list[float]] = {
        "bare httpx loop": [], "executor, no recorder": [], "executor + ListRecorder": [],
        "executor + StoreRecorder (DuckDB)": [],
    }
    with DemoHTTPServer("bench", _ok) as server, tempfile.TemporaryDirectory() as tmp:
        url = f"{server.base_url}/capabilities/echo"
        document = _plan(server.base_url, args.requests)
        for round_number in range(args.rounds):
            db = Path(tmp) / f"round-{round_number}.duckdb"
            timings["bare httpx loop"].append(_timed(lambda: _bare_loop(url, args.requests)))
            timings["executor, no recorder"].append(_timed(lambda: _executor(document, None)))
            timings["executor + ListRecorder"].append(
                _timed(lambda: _executor(document, ListRecorder())))
            recorder = StoreRecorder(db)
            started = time.perf_counter()
            asyncio.run(_executor(document, recorder))
            recorder.close()
            timings["executor + StoreRecorder (DuckDB)"].append(time.perf_counter() - started)
    baseline = statistics.median(timings["bare httpx loop"])
    print(f"{args.requests} requests x {args.rounds} rounds, loopback, medians")
    for name, values in timings.items():
        median = statistics.median(values)
        per_request_ms = median / args.requests * 1000
        print(f"  {name:36s} {per_request_ms:7.3f} ms/request   x{median / baseline:5.2f}")


if __name__ == "__main__":
    main()
