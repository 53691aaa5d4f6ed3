"""Draw the README screenshot: the execution screen on a failing step of the sample traces.

Run with `make screenshot` (or `python docs/screenshots/redraw.py [OUT.svg]`); it writes
docs/screenshots/execution-failing-step.svg, an SVG exported by Textual.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path

from console.samples import prepare_sample_store, sample_execution_ids
from console.tui.app import TruvaConsoleApp
from console.tui.screens.execution import ExecutionScreen
from console.tui.widgets.tables import AttemptTable, StepTable

DEFAULT_OUT = Path(__file__).resolve().parent / "execution-failing-step.svg"
SIZE = (120, 42)  # tall enough for the decision down to its "Why not" under the focus ring
# scenario-d: a 503 that means "not found", resent until the attempts ran out.
SAMPLE = "scenario-d-misclassified-503"


async def _settle(app: TruvaConsoleApp, pilot, done) -> None:
    for _ in range(200):
        await app.workers.wait_for_complete()
        await pilot.pause()
        if done():
            return
    raise RuntimeError("the console never showed the execution")


async def draw(out: Path) -> None:
    """Open the sample execution on its failing step and decisive (last) attempt; save an SVG."""
    execution_id = sample_execution_ids()[SAMPLE]
    with tempfile.TemporaryDirectory(prefix="truva-screenshot-") as directory:
        db = prepare_sample_store(Path(directory) / "samples.duckdb")
        app = TruvaConsoleApp(db, live_refresh=False, replay_files_dir=Path(directory))
        app.animation_level = "none"
        async with app.run_test(size=SIZE) as pilot:
            await _settle(app, pilot, lambda: True)
            app.open_execution(execution_id)
            await _settle(app, pilot, lambda: isinstance(app.screen, ExecutionScreen)
                          and app.screen.detail is not None)  # fmt: skip
            screen = app.screen
            failing = next(s for s in screen.detail.steps if s.status != "succeeded")
            screen.query_one(StepTable).move_to_key(failing.step_id)
            await pilot.pause()
            attempts = screen.query_one(AttemptTable)
            attempts.move_to_key(str(failing.attempts[-1].n))
            attempts.focus()
            await _settle(app, pilot, lambda: screen.attempt_n == failing.attempts[-1].n)
            svg = app.export_screenshot(title="truva-console: a failing step")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(svg, encoding="utf-8")
    print(f"wrote {out} ({len(svg):,} bytes)")


if __name__ == "__main__":
    asyncio.run(draw(Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_OUT))
