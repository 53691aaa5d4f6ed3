"""ctrl+f over a multi-MB response body, typed key by key through Pilot: how long until the
final query's answer is shown, and how long the UI thread stalls meanwhile.

Records a store with three one-attempt steps (step-0 answers a JSON-lines body of --mb MB,
step-1 a one-line body of --line-mb MB, step-2 10 kB of the same lines: the floor of each way
of typing), opens the execution headless, shows the Response tab of each, opens the search bar
and types --query one key at a time, in two ways: Pilot's `press`, which after each key waits
until the whole process (the search thread too) is idle, and keys posted every --interval-ms
whatever the console is doing (a fast typist). Reports, per body, scope (the focused body
alone; the tab: head and body) and way, the seconds from the first key to the final query's
answer on screen, from the last key (sent) to it, and the longest gap between two ticks of a
20 ms timer on the app (the UI thread's worst stall). Usage:
python bench/bench_tui_search.py [--mb 5.9] [--line-mb 4] [--query cityxyz] [--rounds 3]
    [--interval-ms 40]
Nothing is judged.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from textual import events  # noqa: E402 (after the path set-up above)
from textual.widgets import Input, Static  # noqa: E402

from console.tui.widgets.search_bar import SearchBar  # noqa: E402
from store.recorder import StoreRecorder  # noqa: E402
from tests.support.events_factory import one_attempt_execution  # noqa: E402
from tests.support.tui import open_execution, settle_until, tui_app  # noqa: E402

EXECUTION_ID = "exec-search-0001"
TICK_S = 0.02


def lines_body(mb: float, query: str) -> bytes:
    """JSON lines of ~100 characters, every 50th holding `query` (as `Tokio ...`)."""
    line = '{"id": %d, "city": "Paris", "note": "' + "x" * 60 + '"}\n'
    parts, size, index = [], 0, 0
    while size < mb * 1_000_000:
        text = line % index
        if index % 50 == 0:
            text = text.replace("Paris", f"Unknown {query.upper()} Tokio")
        parts.append(text)
        size += len(text)
        index += 1
    return "".join(parts).encode()


def one_line_body(mb: float, query: str) -> bytes:
    """One line of `mb` MB (a minified JSON array), `query` in every ~5 KiB."""
    item = '{"city":"Paris","note":"' + "y" * 80 + '"}'
    marked = '{"city":"' + query + '","note":"' + "y" * 80 + '"}'
    count = int(mb * 1_000_000) // (len(item) + 1)
    return ("[" + ",".join(marked if i % 50 == 0 else item for i in range(count)) + "]").encode()


def build_store(directory: Path, mb: float, line_mb: float, query: str) -> Path:
    db = directory / "search.duckdb"
    bodies = [lines_body(mb, query), one_line_body(line_mb, query), lines_body(0.01, query)]
    with StoreRecorder(db) as recorder:
        for event in one_attempt_execution(EXECUTION_ID, "big bodies", bodies):
            recorder.record(event)
    return db


async def type_query(
    db: Path, step: str, focus_body: bool, query: str, interval_s: float | None
) -> dict[str, float | str]:
    """Type `query` into the search bar over step `step`'s response: through `pilot.press`
    when `interval_s` is None, else a key posted every `interval_s`."""
    app = tui_app(db, live_refresh=False)
    ticks: list[float] = []
    async with app.run_test(size=(120, 36)) as pilot:
        screen = await open_execution(app, pilot, EXECUTION_ID)
        screen.select_step(step)
        await pilot.press("3")
        body = screen.query_one("#response-body")
        await settle_until(pilot, lambda: len(body.text) > 9_000, "the body")
        if focus_body:
            body.focus()
        await pilot.press("ctrl+f")
        bar = screen.query_one(SearchBar)
        status = bar.query_one("#search-status", Static)
        assert app.focused is bar.query_one(Input)
        app.set_interval(TICK_S, lambda: ticks.append(time.perf_counter()))
        await pilot.pause()

        async def answered() -> float:
            while bar.result is None or bar.result.query != query:
                await asyncio.sleep(0.002)
            return time.perf_counter()

        answer = asyncio.ensure_future(asyncio.wait_for(answered(), 60))
        started = time.perf_counter()
        for key in query:
            last_key = time.perf_counter()
            if interval_s is None:
                await pilot.press(key)
            else:
                app.post_message(events.Key(key, key))
                await asyncio.sleep(interval_s)
        answered_at = await answer
        shown = str(status.content)
        await pilot.pause(0.1)
        within = [t for t in ticks if t >= started]
        gaps = [b - a for a, b in itertools.pairwise(within)]
    return {"final_s": answered_at - started, "after_last_key_s": answered_at - last_key,
            "max_gap_ms": 1000 * max(gaps, default=0.0), "status": shown}  # fmt: skip


def _runs(values: list[float], unit: str, digits: int) -> str:
    shown = ", ".join(f"{v:.{digits}f}" for v in values)
    return f"{statistics.median(values):.{digits}f} {unit} ({shown})"


async def run(db: Path, query: str, rounds: int, interval_s: float) -> None:
    cases = [("step-0", True, "lines, body"), ("step-0", False, "lines, tab"),
             ("step-1", True, "one-line, body"), ("step-1", False, "one-line, tab"),
             ("step-2", True, "10 kB, body")]
    for step, focus_body, label in cases:
        for way, interval in (("press", None), (f"{interval_s * 1000:.0f} ms", interval_s)):
            results = [await type_query(db, step, focus_body, query, interval)
                       for _ in range(rounds)]  # fmt: skip
            print(f"{label:15} {way:6} first key → answer "
                  f"{_runs([r['final_s'] for r in results], 's', 3)}; last key → answer "
                  f"{_runs([r['after_last_key_s'] for r in results], 's', 3)}; max UI gap "
                  f"{_runs([r['max_gap_ms'] for r in results], 'ms', 0)}; "
                  f"{results[-1]['status']}", flush=True)  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=5.9)
    parser.add_argument("--line-mb", type=float, default=4.0)
    parser.add_argument("--query", default="cityxyz")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--interval-ms", type=float, default=40.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        db = build_store(Path(directory), args.mb, args.line_mb, args.query)
        asyncio.run(run(db, args.query, args.rounds, args.interval_ms / 1000))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
