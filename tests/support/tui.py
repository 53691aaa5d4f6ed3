"""Pilot helpers and the stores the TUI tests browse.

`record_real_store` runs three plans through `truva-console run` against scripted loopback tool
and LLM servers: a 429 then success, a 400 corrected by the analyzer, and a 401 that stops with
its dependent step skipped. `record_synthetic_store` writes the fixed-id, fixed-time executions
of `tests.support.events_factory` (used where output must be byte-stable, as in snapshots).
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import io
import json
import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from console.tui.app import TruvaConsoleApp
from store.recorder import StoreRecorder
from tests.support.demo_store import copy_store
from tests.support.events_factory import (
    START_AT,
    exhausted_execution,
    realistic_execution,
    small_execution,
)
from tests.support.llm_server import ScriptedLLMServer
from tests.support.plans import capability, plan, run_cli, step, write_plan
from tests.support.tool_server import ScriptedToolServer, ToolReply

ANALYZER_ANSWER = json.dumps({"should_retry": True, "reason": "typo", "suggested_changes":
                              {"city": "Tokyo"}, "is_transient_error": False})  # fmt: skip
TRIP, SMALL, EXHAUSTED = "exec-trip-0001", "exec-small-0002", "exec-exhausted-0003"
CITY_SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


@dataclass(frozen=True, slots=True)
class RealStore:
    """A store recorded by `truva-console run`, and what went into it."""

    db: Path
    rate_limited: str
    corrected: str
    refused: str
    analyzer_prompt: str


def record_real_store(directory: Path) -> RealStore:
    """Run the three plans into `directory/debug.duckdb`; ids in recording order."""
    db = directory / "debug.duckdb"
    with pytest.MonkeyPatch.context() as env:
        for name in list(os.environ):
            if name.startswith(("TRUVAG3_", "OPENAI_", "TRUVA_", "OTEL_")):
                env.delenv(name)
        with ScriptedToolServer() as tools, ScriptedLLMServer() as llm:
            tools.script(
                "/capabilities/quote",
                ToolReply.error(429, "RATE_LIMIT", "slow down", "RATE_LIMIT"),
                ToolReply.ok({"price": 468.285}),
            )
            tools.script(
                "/capabilities/geocode",
                ToolReply.error(400, "INVALID_CITY", "unknown city Tokio", "INPUT_ERROR"),
                ToolReply.ok({"lat": 35.6897, "lon": 139.6917}),
            )
            tools.script(
                "/capabilities/flights",
                ToolReply.error(401, "AUTH_ERROR", "error 401: invalid API key"),
            )
            llm.script(ANALYZER_ANSWER)
            capabilities = {
                "quote": capability("quote"),
                "geocode": capability("geocode", schema=CITY_SCHEMA),
                "flights": capability("flights"),
                "book": capability("book"),
            }
            documents = [
                plan(tools.base_url, capabilities, [step("step-1", "quote", {"symbol": "TSLA"})],
                     query="Quote TSLA"),
                plan(tools.base_url, capabilities, [step("step-1", "geocode", {"city": "Tokio"})],
                     query="Geocode Tokio", llm_base_url=llm.base_url),
                plan(tools.base_url, capabilities,
                     [step("step-1", "flights", {"from": "LHR"}),
                      step("step-2", "book", {"flight": "{{step-1.data.id}}"},
                           depends_on=["step-1"])],
                     query="Book a flight from LHR"),
            ]  # fmt: skip
            ids = []
            for index, document in enumerate(documents):
                path = write_plan(directory, document, f"plan-{index}.json")
                result = run_cli("--db", str(db), "run", str(path), "--json")
                assert result.code == 0, result.stderr
                ids.append(result.json()["execution_id"])
            prompt = llm.prompts[0]
    return RealStore(db, *ids, analyzer_prompt=prompt)


_REAL_STORES: list[RealStore] = []


def real_store_copy(directory: Path) -> RealStore:
    """`record_real_store`'s store, recorded once per test process (~1.5 s) and copied to
    `directory/debug.duckdb`; the ids and the analyzer's prompt are those of the recording."""
    if not _REAL_STORES:
        recorded = Path(tempfile.mkdtemp(prefix="truva-real-store-"))
        atexit.register(shutil.rmtree, recorded, True)
        _REAL_STORES.append(record_real_store(recorded))
    store = _REAL_STORES[0]
    return dataclasses.replace(store, db=copy_store(store.db, directory / "debug.duckdb"))


def record_synthetic_store(db: Path) -> Path:
    """The factory's partial trip, a small success and an exhausted failure, at fixed times."""
    with StoreRecorder(db) as recorder:
        for event in (
            realistic_execution(TRIP, start_at=START_AT)
            + small_execution(SMALL, start_at=START_AT + 60)
            + exhausted_execution(EXHAUSTED, start_at=START_AT + 120)
        ):
            recorder.record(event)
    return db


async def settle_until(pilot: Any, condition: Callable[[], bool], what: str) -> None:
    """Await workers and message processing until `condition()` holds (at most 200 rounds).

    A worker cancelled by a newer one of its exclusive group (a live list's timer polling while
    the test polls) is no failure: the round ends and `condition()` is asked again."""
    for _ in range(200):
        await workers_done(pilot)
        await pilot.pause()
        if condition():
            await pilot.pause()
            return
    raise AssertionError(f"the console never got to: {what}")


async def workers_done(pilot: Any) -> None:
    """Await the app's workers; one cancelled by a newer worker of its exclusive group is done."""
    from textual.worker import WorkerCancelled

    with contextlib.suppress(WorkerCancelled):
        await pilot.app.workers.wait_for_complete()


async def llm_tab_shown(pilot: Any) -> str:
    """Show the LLM tab ("4") and wait until the step's texts are read; the tab's text."""
    await pilot.press("4")
    area = pilot.app.screen.query_one("#llm-text")
    await settle_until(pilot, lambda: not area.text.startswith("Reading the prompts"),
                       "the LLM tab's texts")  # fmt: skip
    return area.text


async def screen_loaded(pilot: Any) -> None:
    """Wait until the current screen has shown its first answer from the store."""
    from console.tui.screens.execution import ExecutionScreen
    from console.tui.screens.executions import ExecutionsScreen

    def loaded() -> bool:
        screen = pilot.app.screen
        if isinstance(screen, ExecutionScreen):
            shown = screen.detail is not None and not screen.texts_reads_running
            return shown or screen.problem is not None
        if isinstance(screen, ExecutionsScreen):
            return screen.page is not None or screen.problem is not None
        return True  # the command palette, say

    await settle_until(pilot, loaded, "a screen loaded from the store")


def tui_app(db: Path, **options: Any) -> TruvaConsoleApp:
    """The console app on `db`, with animations off so Pilot never waits for one."""
    app = TruvaConsoleApp(db, **options)
    app.animation_level = "none"
    return app


def shown_text(renderable: object, width: int = 116) -> str:
    """What a Static's content looks like as plain text at `width` columns."""
    console = Console(width=width, file=io.StringIO(), record=True, color_system=None)
    console.print(renderable)
    return console.export_text()


async def settle_loaded(pilot: Any) -> None:
    """Wait until the screen has its first answer and every worker's messages are handled."""
    await screen_loaded(pilot)
    await workers_done(pilot)
    await pilot.pause()


async def open_execution(app: TruvaConsoleApp, pilot: Any, execution_id: str) -> Any:
    """Open `execution_id` on top of the list and wait until it has loaded; the screen."""
    from console.tui.screens.execution import ExecutionScreen

    await screen_loaded(pilot)
    app.open_execution(execution_id)
    await settle_until(pilot, lambda: isinstance(app.screen, ExecutionScreen), "the execution")
    await screen_loaded(pilot)
    return app.screen


def static_text(screen: Any, selector: str, width: int = 116) -> str:
    """What the Static at `selector` on `screen` shows, as plain text."""
    from textual.widgets import Static

    return shown_text(screen.query_one(selector, Static).content, width)


def listed_ids(app: TruvaConsoleApp) -> list[str]:
    """The execution ids of the executions table, top to bottom."""
    from console.tui.widgets.tables import ExecutionTable

    table = app.screen.query_one(ExecutionTable)
    return [table.coordinate_to_cell_key((row, 0)).row_key.value for row in range(table.row_count)]


def status_line(app: TruvaConsoleApp) -> str:
    """The status line of the executions screen, as plain text."""
    return shown_text(app.screen.query_one("#executions-status").content)


async def dialog_done(pilot: Any, dialog: Any) -> None:
    """Await an export or import dialog's worker and the message it posts."""
    await settle_until(
        pilot,
        lambda: not getattr(dialog, "exporting", False) and not getattr(dialog, "importing", False),
        "the dialog's worker",
    )


def shown(dialog: Any, selector: str) -> str:
    """What the Static at `selector` of a dialog shows, on one wide line per line."""
    from textual.widgets import Static

    return shown_text(dialog.query_one(selector, Static).content, width=300).strip()


def cell(app: TruvaConsoleApp, execution_id: str, column: str) -> str:
    """The plain text of `column` in the executions table's row of `execution_id`."""
    from console.tui.widgets.tables import ExecutionTable

    value = app.screen.query_one(ExecutionTable).get_cell(execution_id, column)
    return getattr(value, "plain", str(value))


def table_cell(table: Any, row_key: str, column: str) -> str:
    """The plain text of `column` in the row `row_key` of any of the TUI's tables."""
    value = table.get_cell(row_key, column)
    return getattr(value, "plain", str(value))
