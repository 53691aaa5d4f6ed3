"""The what-if screen on a large store: does the console stay responsive while it re-decides?

Builds a store of N decisions (bench_whatif.build_store: the demo store copied), opens the
what-if screen headless through Pilot, runs `max_attempts=5` and reports the run's wall time,
how many progress counts reached the screen, and the longest gap between two ticks of a 50 ms
timer on the app during the run (the UI thread's worst stall). Usage:
python bench/bench_tui_whatif.py [--decisions N]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_whatif import build_store
from textual.widgets import Input

from console.tui.app import TruvaConsoleApp
from console.tui.screens.whatif import WhatIfScreen

TICK_S = 0.05


async def measure(db: Path) -> dict[str, float]:
    app = TruvaConsoleApp(db, live_refresh=False)
    app.animation_level = "none"
    ticks: list[float] = []
    counts: list[tuple[int, int, int]] = []
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.press("w")
        while not isinstance(app.screen, WhatIfScreen):
            await pilot.pause()
        screen = app.screen

        def tick() -> None:
            ticks.append(time.perf_counter())
            if screen.progress is not None and (not counts or counts[-1] != screen.progress):
                counts.append(screen.progress)

        screen.query_one("#whatif-config", Input).value = "max_attempts=5"
        app.set_interval(TICK_S, tick)
        started = time.perf_counter()
        await pilot.press("ctrl+r")
        await app.workers.wait_for_complete()
        while screen.running:
            await pilot.pause()
        took = time.perf_counter() - started
        assert screen.view is not None, screen.problem
        gaps = [(b - a, a - started) for a, b in itertools.pairwise(ticks)]
        worst, worst_at = max(gaps) if gaps else (0.0, 0.0)
        return {
            "decisions": counts[-1][2] if counts else 0,
            "executions": counts[-1][1] if counts else 0,
            "seconds": round(took, 2),
            "progress_counts_seen": len(counts),
            "ticks": len(ticks),
            "max_tick_gap_ms": round(worst * 1000, 1),
            "max_gap_at_s": round(worst_at, 2),
            "gaps_over_250ms": sum(1 for gap, _ in gaps if gap > 0.25),
            "headline": screen.view.headline,
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--decisions", type=int, default=50_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        db = build_store(Path(directory), args.decisions)
        result = asyncio.run(measure(db))
    print(result)


if __name__ == "__main__":
    main()
