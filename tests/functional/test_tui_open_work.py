"""The work the execution screen does when it opens: counted, so that a regression fails.

Only the Decision tab is built at open; each other tab is built (and its data read) the first
time it is shown; the footer's keys are one widget.
"""

from __future__ import annotations

import gc
import threading
from pathlib import Path
from typing import Any

import pytest
from rich.text import Text
from textual.app import App, ComposeResult
from textual.dom import DOMNode
from textual.widgets import TextArea
from textual.widgets._footer import FooterKey

from console.tui.screens.execution import ExecutionScreen
from console.tui.screens.store_source import StoreSource, StoreUnavailable
from console.tui.widgets.attempt_detail import AttemptDetail
from console.tui.widgets.footer import KeysFooter
from console.tui.widgets.tables import ExecutionTable, NavigableTable, StepTable
from tests.support.tui import (
    TRIP,
    open_execution,
    screen_loaded,
    settle_until,
    static_text,
    tui_app,
)

SIZE = (120, 36)

# tab key, the tab, a widget it builds
TABS = {
    "request": ("2", "tab-request", "#request-body"),
    "response": ("3", "tab-response", "#response-body"),
    "llm": ("4", "tab-llm", "#llm-text"),
    "events": ("5", "tab-events", "#events-body"),
    "timeline": ("6", "tab-timeline", "#timeline-body"),
    "diff": ("7", "tab-diff", "#diff-body"),
}


class CountingSource(StoreSource):
    """The store source, counting the reads of LLM texts."""

    def __init__(self, db_path: Path) -> None:
        super().__init__(db_path)
        self.text_reads: list[list[str]] = []

    def llm_call_texts(self, execution_id: str, call_ids: list[str]) -> dict[str, Any]:
        self.text_reads.append(list(call_ids))
        return super().llm_call_texts(execution_id, call_ids)


class GatedSource(StoreSource):
    """The store source, whose execution reads wait for the test (or fail when told to)."""

    def __init__(self, db_path: Path, *, fail: bool = False) -> None:
        super().__init__(db_path)
        self.gate = threading.Event()
        self.fail = fail

    def get_execution(self, execution_id: str, **options: Any) -> Any:
        assert self.gate.wait(timeout=60), "the test never opened the gate"
        if self.fail:
            raise StoreUnavailable("the store is held by another process", held=True)
        return super().get_execution(execution_id, **options)


class ReadCountingSource(StoreSource):
    """The store source, counting the reads of executions."""

    def __init__(self, db_path: Path) -> None:
        super().__init__(db_path)
        self.reads: list[str] = []

    def get_execution(self, execution_id: str, **options: Any) -> Any:
        self.reads.append(execution_id)
        return super().get_execution(execution_id, **options)


@pytest.fixture
def loading_shown(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Each `ExecutionScreen._show_loading(loading)` of the test, in order."""
    shown: list[bool] = []
    show_loading = ExecutionScreen._show_loading

    def recording(screen: ExecutionScreen, loading: bool) -> None:
        shown.append(loading)
        show_loading(screen, loading)

    monkeypatch.setattr(ExecutionScreen, "_show_loading", recording)
    return shown


async def test_the_highlighted_execution_opens_with_its_read_ahead(
    synthetic_db: Path, loading_shown: list[bool]
) -> None:
    app = tui_app(synthetic_db, live_refresh=False)
    app.source = source = ReadCountingSource(synthetic_db)
    app.prefetch_rest_s = 0.001  # the cursor has rested on the row long enough
    async with app.run_test(size=SIZE) as pilot:
        await screen_loaded(pilot)
        await settle_until(pilot, lambda: bool(source.reads), "the read ahead")
        await app.workers.wait_for_complete()  # `reads` names a read as it starts: let it end
        highlighted = app.screen.query_one(ExecutionTable).highlighted_key()
        read_ahead = list(source.reads)
        app.open_execution(highlighted)
        await settle_until(pilot, lambda: getattr(app.screen, "detail", None) is not None,
                           "the execution shown")  # fmt: skip
        await app.workers.wait_for_complete()
        shown = app.screen.detail.execution.execution_id
        reads = list(source.reads)
    assert read_ahead == [highlighted]  # read when the cursor rested on it
    assert shown == highlighted and reads == read_ahead  # and not read again to open it
    assert True not in loading_shown  # no loading indicators: it was there at once


async def test_an_execution_opened_at_once_is_not_read_ahead(synthetic_db: Path) -> None:
    app = tui_app(synthetic_db, live_refresh=False)
    app.source = source = ReadCountingSource(synthetic_db)
    async with app.run_test(size=SIZE) as pilot:
        await screen_loaded(pilot)
        highlighted = app.screen.query_one(ExecutionTable).highlighted_key()
        await open_execution(app, pilot, highlighted)
        await app.workers.wait_for_complete()
        reads = list(source.reads)
        timer = app._prefetch_timer
    assert reads == [highlighted]  # the open's own read; the cursor had not rested
    assert timer is None


async def test_an_execution_read_within_the_wait_opens_composed_with_it(
    synthetic_db: Path, loading_shown: list[bool]
) -> None:
    app = tui_app(synthetic_db, live_refresh=False)
    app.source = source = ReadCountingSource(synthetic_db)
    app.open_wait_s = 60.0  # the read is always back within it here
    async with app.run_test(size=SIZE) as pilot:
        await screen_loaded(pilot)
        app.open_execution(TRIP)
        gc_during_open = gc.isenabled()
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, ExecutionScreen)
        shown_at_first_pause = screen.detail is not None
        rows = screen.query_one(StepTable).row_count
        await app.workers.wait_for_complete()
        await pilot.pause()
        reads = list(source.reads)
        gc_after = gc.isenabled()
    assert shown_at_first_pause and rows == 5  # no frame of loading indicators first
    assert True not in loading_shown
    assert reads == [TRIP]  # read once, by the open; the screen did not read again
    assert (gc_during_open, gc_after) == (False, True)


async def test_a_read_slower_than_the_wait_shows_loading_and_is_not_repeated(
    synthetic_db: Path,
) -> None:
    app = tui_app(synthetic_db, live_refresh=False)
    app.source = source = GatedSource(synthetic_db)
    reads: list[str] = []
    gated_read = source.get_execution

    def counting(execution_id: str, **options: Any) -> Any:
        reads.append(execution_id)
        return gated_read(execution_id, **options)

    source.get_execution = counting  # type: ignore[method-assign]
    app.open_wait_s = 0.01
    async with app.run_test(size=SIZE) as pilot:
        await screen_loaded(pilot)
        app.open_execution(TRIP)
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, ExecutionScreen)
        waiting = (screen.detail, screen.query_one(StepTable).loading)
        source.gate.set()
        await screen_loaded(pilot)
        shown = screen.detail.execution.execution_id if screen.detail else None
        loading_after = screen.query_one(StepTable).loading
    assert waiting == (None, True)
    assert (shown, loading_after) == (TRIP, False)
    assert reads == [TRIP]  # the screen waited for the open's read instead of reading again


async def test_a_failed_read_at_open_is_reported_without_a_second_read(
    synthetic_db: Path,
) -> None:
    app = tui_app(synthetic_db, live_refresh=False)
    app.source = source = GatedSource(synthetic_db, fail=True)
    reads: list[str] = []
    gated_read = source.get_execution

    def counting(execution_id: str, **options: Any) -> Any:
        reads.append(execution_id)
        return gated_read(execution_id, **options)

    source.get_execution = counting  # type: ignore[method-assign]
    source.gate.set()  # it fails at once: a held store, say
    async with app.run_test(size=SIZE) as pilot:
        await screen_loaded(pilot)
        app.open_execution(TRIP)
        await screen_loaded(pilot)
        screen = app.screen
        assert isinstance(screen, ExecutionScreen)
        shown = (screen.detail, screen.problem, screen.query_one(StepTable).loading)
    assert shown == (None, "the store is held by another process", False)
    assert reads == [TRIP]  # the open's error is the screen's: not met twice (a lock wait each)


async def test_a_filled_table_is_sized_before_the_next_idle(synthetic_db: Path) -> None:
    app = tui_app(synthetic_db, live_refresh=False)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_execution(app, pilot, TRIP)
        steps = screen.query_one(StepTable)
        steps.show_steps(screen.detail.steps)  # no idle between filling and looking
        height = steps.virtual_size.height
        widths = [column.content_width for column in steps.ordered_columns]
        labels = [len(column.label) for column in steps.ordered_columns]
        step_width = max(len(step.step_id) for step in screen.detail.steps)
    assert height == steps.row_count + 1  # the rows and the header, for the next layout pass
    assert all(width >= label for width, label in zip(widths, labels, strict=True))
    assert widths[0] == max(step_width, labels[0])


async def test_text_rows_are_measured_as_textual_measures_them() -> None:
    class TableApp(App[None]):
        def compose(self) -> ComposeResult:
            yield NavigableTable()

    rows = [(Text("日本語"), Text("two\nlonger line")), (Text("x"), Text(""))]

    def filled(table: NavigableTable) -> None:
        table.clear(columns=True)
        table.add_columns("A", "B")
        for cells in rows:
            table.add_row(*cells)

    async with TableApp().run_test() as pilot:
        table = pilot.app.query_one(NavigableTable)
        filled(table)
        table.measure_rows()  # ours: the widest line's cells, no console
        ours = [column.content_width for column in table.ordered_columns]
        filled(table)
        table._update_dimensions(list(table._new_rows))  # Textual's own measurement
        textual = [column.content_width for column in table.ordered_columns]
    assert ours == textual == [6, 11]


@pytest.mark.parametrize("fail", [False, True], ids=["loaded", "load-failed"])
async def test_the_gc_is_paused_while_an_execution_opens(synthetic_db: Path, fail: bool) -> None:
    app = tui_app(synthetic_db, live_refresh=False)
    app.source = source = GatedSource(synthetic_db, fail=fail)
    async with app.run_test(size=SIZE) as pilot:
        await screen_loaded(pilot)
        app.open_execution(TRIP)
        await pilot.pause()
        assert isinstance(app.screen, ExecutionScreen)
        while_loading = gc.isenabled()
        source.gate.set()
        await app.workers.wait_for_complete()
        await pilot.pause()
        shown = (app.screen.detail is not None, app.screen.problem is not None)
        after = gc.isenabled()
    assert while_loading is False
    assert shown == ((False, True) if fail else (True, False))
    assert after is True


async def test_opening_an_execution_builds_only_the_decision_tab(synthetic_db: Path) -> None:
    app = tui_app(synthetic_db, live_refresh=False)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_execution(app, pilot, TRIP)
        detail = screen.query_one(AttemptDetail)
        built = set(detail.built_tabs)
        unbuilt = [selector for _key, _tab, selector in TABS.values() if screen.query(selector)]
        decision = static_text(screen, "#decision-body")
        widgets = len(list(screen.walk_children()))
    assert built == {"tab-decision"}
    assert unbuilt == []
    assert decision.strip()  # the decision of the opening attempt is shown
    assert widgets <= 60  # 67 when all seven tabs were built at open


@pytest.mark.parametrize("name", list(TABS), ids=list(TABS))
async def test_a_tab_is_built_and_filled_when_first_shown(synthetic_db: Path, name: str) -> None:
    key, tab_id, selector = TABS[name]
    app = tui_app(synthetic_db, live_refresh=False)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_execution(app, pilot, TRIP)
        screen.select_step("step-2")
        screen.select_attempt(1)
        await pilot.press(key)
        await app.workers.wait_for_complete()
        await pilot.pause()
        detail = screen.query_one(AttemptDetail)
        widget = screen.query_one(selector)
        shown = widget.text if isinstance(widget, TextArea) else str(widget.render())
        built = set(detail.built_tabs)
    assert built == {"tab-decision", tab_id}
    assert shown.strip() and "Reading the prompts" not in shown


async def test_a_built_tab_follows_the_selected_attempt(synthetic_db: Path) -> None:
    app = tui_app(synthetic_db, live_refresh=False)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_execution(app, pilot, TRIP)
        screen.select_step("step-2")
        screen.select_attempt(1)
        await pilot.press("2")
        first = screen.query_one("#request-body", TextArea).text
        screen.select_attempt(2)
        await pilot.pause()
        second = screen.query_one("#request-body", TextArea).text
    assert first != second  # the corrected attempt sent other parameters


async def test_llm_texts_are_read_when_the_llm_tab_is_shown(synthetic_db: Path) -> None:
    app = tui_app(synthetic_db, live_refresh=False)
    app.source = source = CountingSource(synthetic_db)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_execution(app, pilot, TRIP)
        screen.select_step("step-2")  # its first attempt made an LLM call
        screen.select_attempt(1)
        await app.workers.wait_for_complete()
        await pilot.pause()
        reads_before = len(source.text_reads)
        await pilot.press("4")
        await app.workers.wait_for_complete()
        await pilot.pause()
        reads_after = len(source.text_reads)
        shown = screen.query_one("#llm-text", TextArea).text
        screen.select_attempt(2)  # the tab is built now: the step's texts are kept
        await app.workers.wait_for_complete()
        await pilot.pause()
        reads_later = len(source.text_reads)
    assert (reads_before, reads_after, reads_later) == (0, 1, 1)
    assert "── raw response ──" in shown


async def test_the_footer_is_one_widget_restyled_at_most_once_per_open(synthetic_db: Path) -> None:
    app = tui_app(synthetic_db, live_refresh=False)
    restyled: list[DOMNode] = []
    async with app.run_test(size=SIZE) as pilot:
        update_styles = app.update_styles

        def counting(node: DOMNode, animate: bool = True) -> None:
            restyled.append(node)
            update_styles(node, animate=animate)

        app.update_styles = counting  # type: ignore[method-assign]
        await open_execution(app, pilot, TRIP)
        footer = app.screen.query_one(KeysFooter)
        footers = [node for node in restyled if node is footer]
        key_widgets = len(app.screen.query(FooterKey))
        shown = len(footer.keys)
    assert key_widgets == 0  # Textual's footer mounted one FooterKey per key (13 here)
    assert shown > 10
    assert len(footers) <= 1


async def test_a_palette_tab_command_builds_the_tab(synthetic_db: Path) -> None:
    app = tui_app(synthetic_db, live_refresh=False)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_execution(app, pilot, TRIP)
        commands = {command.title: command for command in screen.palette_commands()}
        commands["tab: Diff"].run()
        await pilot.pause()
        active = screen.query_one("#detail-tabs").active
        diff = static_text(screen, "#diff-body")
    assert active == "tab-diff"
    assert diff.strip()


async def test_what_an_open_froze_for_the_gc_is_unfrozen_when_the_screen_closes(
    synthetic_db: Path,
) -> None:
    app = tui_app(synthetic_db, live_refresh=False)
    async with app.run_test(size=SIZE) as pilot:
        await open_execution(app, pilot, TRIP)
        frozen_while_shown = gc.get_freeze_count()
        app.pop_screen()
        await pilot.pause()
        frozen_after = gc.get_freeze_count()
        enabled_after = gc.isenabled()
    assert frozen_while_shown > 0
    assert (frozen_after, enabled_after) == (0, True)
