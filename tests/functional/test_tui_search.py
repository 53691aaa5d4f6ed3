"""ctrl+f in every text pane of the execution screen, through Pilot: every match highlighted,
the current one distinctly, `3/17 matches`, Enter/Shift+Enter jumps, a 5 MB text searched
in a worker with only the painted lines styled, and searches overtaken by a newer query or a
new text stopped and never shown."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest
from rich.text import Text
from textual.app import App, ComposeResult
from textual.widgets import Input, Static, TextArea

import console.tui.widgets.long_text as long_text
import console.tui.widgets.search_bar as search_bar
import console.tui.widgets.searchable as searchable
from console.render.text_search import SearchStopped, rows_of, search_text
from console.tui.widgets.long_text import LongTextArea
from console.tui.widgets.search_bar import SearchBar
from console.tui.widgets.searchable import CURRENT_STYLE, MATCH_STYLE, SearchScope
from console.tui.widgets.tables import AttemptTable
from console.tui.widgets.timeline_view import SELECTED_STYLE, TimelineView
from tests.support.tui import (
    TRIP,
    open_execution,
    record_synthetic_store,
    settle_until,
    shown_text,
    tui_app,
)

SIZE = (120, 36)


@pytest.fixture(scope="module")
def synthetic_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return record_synthetic_store(tmp_path_factory.mktemp("tui-search") / "debug.duckdb")


def has_highlights(widget) -> bool:
    content = widget.render() if isinstance(widget, TimelineView) else widget.content
    return isinstance(content, Text) and any(highlighted(widget))


def highlighted(widget) -> tuple[list[str], list[str]]:
    """The pieces of `widget`'s shown text styled as matches, and as the current match."""
    content = widget.render() if isinstance(widget, TimelineView) else widget.content
    if not isinstance(content, Text):
        return [], []
    plain = content.plain
    matches = [plain[s.start : s.end] for s in content.spans if s.style == MATCH_STYLE]
    current = [plain[s.start : s.end] for s in content.spans if s.style == CURRENT_STYLE]
    return matches, current


async def search(app, pilot, screen, query: str) -> SearchBar:
    await pilot.press("ctrl+f")
    bar = screen.query_one(SearchBar)
    assert bar.has_class("-open") and app.focused is bar.query_one(Input)
    bar.query_one(Input).value = query
    await pilot.pause()
    await app.workers.wait_for_complete()
    await pilot.pause()
    return bar


def status(screen) -> str:
    return str(screen.query_one("#search-status", Static).content)


# tab key, the pane searched, what to search (None: the attempt's rule id), step, attempt
PANES = {
    "decision-rule-id": ("1", "#decision-body", None, "step-3", 1),
    "folded-decision-inputs": ("1", "#decision-other-inputs", "max_attempts", "step-3", 1),
    "request-head": ("2", "#request-head", "name", "step-2", 2),
    "response-head": ("3", "#response-head", "Retry-After", "step-1", 1),
    "events": ("5", "#events-body", "coercion", "step-1", 1),
    "timeline": ("6", "#timeline-body", "wait", "step-1", 1),
    "diff": ("7", "#diff-body", "age", "step-2", 2),
}


@pytest.mark.parametrize(("key", "selector", "query", "step_id", "n"), PANES.values(),
                         ids=PANES.keys())  # fmt: skip
async def test_ctrl_f_highlights_every_match_in_each_kind_of_pane(
    synthetic_db: Path, key: str, selector: str, query: str | None, step_id: str, n: int
) -> None:
    app = tui_app(synthetic_db, live_refresh=False)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_execution(app, pilot, TRIP)
        screen.select_step(step_id)
        screen.select_attempt(n)
        await pilot.press(key)
        await pilot.pause()
        if query is None:
            step = next(s for s in screen.detail.steps if s.step_id == step_id)
            query = next(a.rule_id for a in step.attempts if a.n == n)
        bar = await search(app, pilot, screen, query)
        total = len(bar.result.matches)
        assert total >= 1 and status(screen).startswith("1/")
        pane = screen.query_one(selector)
        matches, current = highlighted(pane)
        shown = [piece.lower() for piece in matches + current]
        assert shown and set(shown) == {query.lower()}
        # every match of the tab is highlighted: this pane's plus the other panes'
        in_tab = sum(len(highlighted(p)[0]) + len(highlighted(p)[1]) for p in bar.target.panes
                     if not isinstance(p, TextArea))  # fmt: skip
        in_areas = sum(sum(len(spans) for spans in (p._search_rows or {}).values())
                       for p in bar.target.panes if isinstance(p, TextArea))  # fmt: skip
        assert in_tab + in_areas == total
        await pilot.press("escape")
        assert not bar.has_class("-open")
        assert not has_highlights(pane)


async def test_a_match_in_the_folded_inputs_unfolds_them(synthetic_db: Path) -> None:
    app = tui_app(synthetic_db, live_refresh=False)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_execution(app, pilot, TRIP)  # step-3, the 401 that stopped
        folded = screen.query_one("#decision-all-inputs")
        assert folded.collapsed
        bar = await search(app, pilot, screen, "max_attempts")
        body_matches = sum(map(len, highlighted(screen.query_one("#decision-body"))))
        for _ in range(body_matches):  # past the matches above the fold
            await pilot.press("enter")
        await pilot.pause()
        assert bar.current == body_matches
        assert not folded.collapsed
        assert highlighted(screen.query_one("#decision-other-inputs"))[1] == ["max_attempts"]


async def test_enter_and_shift_enter_move_the_current_match_and_the_count(
    synthetic_db: Path,
) -> None:
    app = tui_app(synthetic_db, live_refresh=False)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_execution(app, pilot, TRIP)
        screen.select_step("step-1")
        await pilot.press("5")  # backoff and events
        bar = await search(app, pilot, screen, "co")
        total = len(bar.result.matches)
        assert total >= 3 and status(screen) == f"1/{total} matches"
        await pilot.press("enter", "enter")
        assert status(screen) == f"3/{total} matches" and bar.current == 2
        await pilot.press("shift+enter")
        assert status(screen) == f"2/{total} matches"
        await pilot.press("up", "up")  # wraps to the last
        assert status(screen) == f"{total}/{total} matches"
        matches, current = highlighted(screen.query_one("#events-body"))
        assert len(current) == 1 and len(matches) == total - 1


async def test_the_count_shows_a_query_that_looks_like_markup_as_typed(
    synthetic_db: Path,
) -> None:
    app = tui_app(synthetic_db, live_refresh=False)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_execution(app, pilot, TRIP)
        await search(app, pilot, screen, "[bold]zz")
        shown = shown_text(screen.query_one("#search-status", Static).content).strip()
    assert shown == "no match for '[bold]zz'"


async def test_the_request_tab_searches_its_head_and_body_as_one_text(
    synthetic_db: Path,
) -> None:
    app = tui_app(synthetic_db, live_refresh=False)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_execution(app, pilot, TRIP)
        screen.select_step("step-2")
        screen.select_attempt(2)
        await pilot.press("2")
        bar = await search(app, pilot, screen, "name")
        head, body = bar.target.panes
        assert (head.id, body.id) == ("request-head", "request-body")
        assert body._search_rows, "the body's matches are highlighted"
        total = len(bar.result.matches)
        head_matches = sum(map(len, highlighted(head)))
        for _ in range(head_matches):
            await pilot.press("enter")
        # the current match is now the body's first: selected in the text area
        assert body.selected_text.lower() == "name"
        assert status(screen) == f"{head_matches + 1}/{total} matches"


async def test_another_attempt_is_searched_again_while_the_bar_is_open(
    synthetic_db: Path,
) -> None:
    app = tui_app(synthetic_db, live_refresh=False)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_execution(app, pilot, TRIP)
        screen.select_step("step-1")
        await pilot.press("3")  # the response: 429 on #1, 200 on #2
        bar = await search(app, pilot, screen, "429")
        first = bar.result
        assert first.matches
        screen.select_attempt(2)
        await pilot.pause()
        await app.workers.wait_for_complete()
        await pilot.pause()
        expected = search_text(bar.target.text(), "429")
        assert bar.result == expected != first
        head, body = bar.target.panes
        assert sum(map(len, highlighted(head))) + sum(
            len(spans) for spans in (body._search_rows or {}).values()
        ) == len(expected.matches)


class BigPane(App[None]):
    def compose(self) -> ComposeResult:
        yield LongTextArea(read_only=True, soft_wrap=True, id="big")
        yield SearchBar(id="search-bar")


async def test_a_5_mb_text_is_searched_in_a_worker_and_only_painted_lines_are_styled(
    monkeypatch,
) -> None:
    line = '{"city": "Tokio", "note": "unknown city"}\n'
    text = line * (5_000_000 // len(line))
    styled_rows: list[int] = []
    original = searchable.stylize_line
    monkeypatch.setattr(
        searchable,
        "stylize_line",
        lambda line, spans, current, row: (
            styled_rows.append(row),
            original(line, spans, current, row),
        ),
    )
    app = BigPane()
    async with app.run_test(size=(80, 20)) as pilot:
        area = app.query_one(LongTextArea)
        area.load_long_text(text)  # prepared in a thread
        await settle_until(pilot, lambda: area.document.line_count > 100_000, "the 5 MB text")
        area.focus()
        bar = app.query_one(SearchBar)
        bar.open(SearchScope([area]))
        bar.query_one(Input).value = "city"
        await pilot.pause()
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert bar.result is not None and bar.result.truncated
        assert str(bar.query_one("#search-status", Static).content) == "1/10000+ matches"
        assert area.selected_text == "city"
        await pilot.press("enter")
        await pilot.pause()
        assert area.selection.start == (0, 35)
        # a frame styles the lines on screen, not the 120,000 lines of the text
        assert 0 < len(set(styled_rows)) <= 2 * area.size.height


async def test_the_timeline_marks_the_selected_attempt_and_follows_the_selection(
    synthetic_db: Path,
) -> None:
    app = tui_app(synthetic_db, live_refresh=False)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_execution(app, pilot, TRIP)
        screen.select_step("step-1")
        screen.select_attempt(1)
        await pilot.press("6")
        await pilot.pause()
        view = screen.query_one(TimelineView)

        def marked_rows() -> list[str]:
            shown = view.render()
            rows = shown.plain.split("\n")
            reversed_rows = {shown.plain.count("\n", 0, span.start) for span in shown.spans
                             if span.style == SELECTED_STYLE}  # fmt: skip
            assert reversed_rows == {i for i, row in enumerate(rows) if row.startswith("▶")}
            return [rows[i].split()[1] for i in sorted(reversed_rows)]

        assert marked_rows() == ["#1", "wait", "step-1"]
        screen.query_one(AttemptTable).focus()  # its cursor moves the selection
        await pilot.press("down")
        await pilot.pause()
        assert screen.attempt_n == 2 and marked_rows() == ["#2", "step-1"]
        assert screen.action_twin("show-tab-timeline") == (
            f"truva-console explain {TRIP} step-1 --timeline --attempt 2"
        )


async def test_an_llm_text_prepared_in_a_thread_is_searched_when_it_arrives(
    synthetic_db: Path, monkeypatch
) -> None:
    monkeypatch.setattr(long_text, "BACKGROUND_LOAD_CHARS", 10)  # every LLM text in a thread
    app = tui_app(synthetic_db, live_refresh=False)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_execution(app, pilot, TRIP)
        screen.select_step("step-1")  # no LLM call: its LLM tab says so
        await pilot.press("4")
        area = screen.query_one("#llm-text", TextArea)
        bar = await search(app, pilot, screen, "error_analysis")
        assert bar.result is not None and not bar.result.matches
        screen.select_step("step-2")  # the analyzer's prompt, loaded in a thread
        await settle_until(pilot, lambda: "error_analysis" in area.text, "the LLM text")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert bar.result == search_text(area.text, "error_analysis")
        assert bar.result.matches and area._search_rows


def widest_line(widget) -> int:
    return max(len(line) for line in widget.content.plain.split("\n"))


async def test_highlights_in_a_static_pane_are_redrawn_at_the_new_width_after_a_resize(
    synthetic_db: Path,
) -> None:
    app = tui_app(synthetic_db, live_refresh=False)
    async with app.run_test(size=(180, 40)) as pilot:
        screen = await open_execution(app, pilot, TRIP)  # step-3, the decision tab
        bar = await search(app, pilot, screen, "HTTP")
        pane = screen.query_one("#decision-body")
        await pilot.press("enter")
        await pilot.pause()
        current, total = bar.current, len(bar.result.matches)
        assert total >= 2 and current == 1
        wide = widest_line(pane)
        await pilot.resize_terminal(100, 40)
        await settle_until(pilot, lambda: bar.result is not None
                           and pane.content_size.width < wide, "the search again")  # fmt: skip
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert widest_line(pane) <= pane.content_size.width < wide
        matches, shown_current = highlighted(pane)
        assert {piece for piece in matches + shown_current} == {"HTTP"}
        assert bar.current == current and status(screen).startswith(f"{current + 1}/")


class HeldSearches:
    """`search_text` as the search bar's worker calls it, held for the queries in `hold` until
    `release`; `outcomes` says how each search ended (`stopped` by its `stop`, or `finished`)."""

    def __init__(self, monkeypatch, hold: set[str] | None = None) -> None:
        self.hold = hold  # None: every query
        self.released = threading.Event()
        self.started: dict[str, threading.Event] = {}
        self.outcomes: dict[str, str] = {}
        monkeypatch.setattr(search_bar, "search_text", self._search)

    def _search(self, text: str, query: str, **options):
        self.started.setdefault(query, threading.Event()).set()
        if self.hold is None or query in self.hold:
            assert self.released.wait(10), "the test never released the search"
        try:
            result = search_text(text, query, **options)
        except SearchStopped:
            self.outcomes[query] = "stopped"
            raise
        self.outcomes[query] = "finished"
        return result

    async def started_for(self, query: str) -> None:
        event = self.started.setdefault(query, threading.Event())
        assert await asyncio.to_thread(event.wait, 10), f"no search for {query!r} started"


async def open_bar(app: BigPane, pilot, text: str) -> tuple[LongTextArea, SearchBar]:
    area = app.query_one(LongTextArea)
    area.load_text(text)
    await pilot.pause()
    area.focus()
    bar = app.query_one(SearchBar)
    bar.open(SearchScope([area]))
    await pilot.pause()
    return area, bar


def status_of(bar: SearchBar) -> str:
    return str(bar.query_one("#search-status", Static).content)


TOKIO_LINES = "".join(f'{{"id": {i}, "city": "{"Tokio" if i % 3 else "Paris"}"}}\n'
                      for i in range(300))  # fmt: skip


async def test_typing_fast_shows_the_last_querys_matches_and_reads_the_text_once(
    monkeypatch,
) -> None:
    held = HeldSearches(monkeypatch)  # every search waits until all five keys are typed
    app = BigPane()
    async with app.run_test(size=(80, 20)) as pilot:
        area, bar = await open_bar(app, pilot, TOKIO_LINES)
        reads: list[int] = []
        read = area.searchable_text
        monkeypatch.setattr(area, "searchable_text", lambda: (reads.append(1), read())[1])
        search_input = bar.query_one(Input)
        for typed in ("t", "to", "tok", "toki", "tokio"):
            search_input.value = typed
            await pilot.pause()
        await held.started_for("tokio")
        searching = [w for w in app.workers if w.group == "text-search"]
        assert searching and status_of(bar) == "searching…"
        # the worker is described in words, not by the repr of the text it was given
        assert all(len(worker.description) < 80 for worker in searching)
        held.released.set()
        await app.workers.wait_for_complete()
        await pilot.pause()
        expected = search_text(TOKIO_LINES, "tokio")
        assert bar.result == expected and len(expected.matches) == 200
        assert status_of(bar) == "1/200 matches"
        assert area.selected_text == "Tokio" and area.selection.start == expected.matches[0][0]
        assert len(reads) == 1  # the pane's text was read for the first key only
        assert held.outcomes["tokio"] == "finished"
        overtaken = {query: outcome for query, outcome in held.outcomes.items()
                     if query != "tokio"}  # fmt: skip
        assert set(overtaken.values()) <= {"stopped"}


async def test_an_answer_that_comes_after_the_query_changed_is_never_shown(monkeypatch) -> None:
    held = HeldSearches(monkeypatch, hold={"paris"})
    app = BigPane()
    async with app.run_test(size=(80, 20)) as pilot:
        area, bar = await open_bar(app, pilot, TOKIO_LINES)
        search_input = bar.query_one(Input)
        search_input.value = "paris"
        await held.started_for("paris")
        search_input.value = "tokio"
        await held.started_for("tokio")
        await settle_until(pilot, lambda: bar.result is not None, "the answer for 'tokio'")
        shown = (bar.result, bar.current, area.selection, area._search_rows, status_of(bar))
        held.released.set()  # the answer for "paris" may come now: it must change nothing
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert held.outcomes["paris"] == "stopped"
        assert (bar.result, bar.current, area.selection, area._search_rows,
                status_of(bar)) == shown  # fmt: skip
        assert bar.result.query == "tokio" and area.selected_text == "Tokio"
        assert {end - start for spans in area._search_rows.values() for start, end in spans} == {5}


async def test_a_text_changed_while_the_bar_is_open_is_searched_again(monkeypatch) -> None:
    held = HeldSearches(monkeypatch, hold={"tokio"})
    app = BigPane()
    async with app.run_test(size=(80, 20)) as pilot:
        area, bar = await open_bar(app, pilot, TOKIO_LINES)
        bar.query_one(Input).value = "tokio"
        await held.started_for("tokio")
        # the text is replaced while its search runs, and nothing tells the bar
        second = "paris\n" * 7 + "Tokio, TOKIO\n" + "tokio\n" * 4
        area.load_text(second)
        await pilot.pause()
        held.released.set()
        await settle_until(pilot, lambda: bar.result is not None, "the answer")
        expected = search_text(second, "tokio")
        assert bar.result == expected and len(expected.matches) == 6
        assert area._search_rows == rows_of(expected.matches)
        assert area.selection.start == (7, 0) and status_of(bar) == "1/6 matches"
        # replaced again with no search running: the next query searches the new text
        third = "tokyo\n" * 3 + "toki"
        area.load_text(third)
        await pilot.pause()
        bar.query_one(Input).value = "toki"
        await settle_until(pilot, lambda: bar.result is not None, "the answer for 'toki'")
        assert bar.result == search_text(third, "toki") and len(bar.result.matches) == 1
        # and replaced once more, said by text_changed (as the execution screen does)
        fourth = "toki toki\n"
        area.load_text(fourth)
        bar.text_changed()
        await settle_until(pilot, lambda: bar.result is not None, "the answer again")
        assert bar.result == search_text(fourth, "toki") and status_of(bar) == "1/2 matches"
