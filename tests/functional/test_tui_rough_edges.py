"""TUI bugs seen by a new user (issue 10): the palette's Screenshot and Keys, readable box titles,
one colour per meaning, and a loading state instead of empty tables."""

from __future__ import annotations

import io
import threading
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from textual.color import Color
from textual.widget import Widget

from console.render.rich_views import decision_renderable
from console.render.views import attempt_view
from console.samples import prepare_sample_store, sample_execution_ids
from console.tui.app import TruvaConsoleApp
from console.tui.screens.bundle import ExportDialog
from console.tui.screens.execution import ExecutionScreen
from console.tui.screens.replay import ReplayScreen
from console.tui.screens.store_source import StoreSource
from console.tui.widgets.cells import action_text
from console.tui.widgets.tables import AttemptTable, StepTable
from store.queries import ExecutionDetail, open_store
from tests.support.tui import open_execution, screen_loaded, settle_until, tui_app


def console_app(db: Path, tmp_path: Path) -> TruvaConsoleApp:
    return tui_app(db, db_arg=str(db), live_refresh=False,
                   replay_files_dir=tmp_path / "replay-files")  # fmt: skip


SIZE = (120, 36)
RATE_LIMITED = sample_execution_ids()["scenario-b-rate-limit"]
MISCLASSIFIED_503 = sample_execution_ids()["scenario-d-misclassified-503"]


@pytest.fixture(scope="module")
def sample_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return prepare_sample_store(tmp_path_factory.mktemp("rough-edges") / "samples.duckdb")


async def run_palette_command(pilot, title: str) -> None:
    await pilot.press("ctrl+p")
    await pilot.press(*title)
    await settle_until(pilot, lambda: True, "the palette's search")
    await pilot.press("enter")


def notifications(app: TruvaConsoleApp) -> list[tuple[str, str]]:
    return [(note.title, note.message) for note in app._notifications]


# ----------------------------------------------------------------------------- Screenshot


@pytest.mark.parametrize("xdg", [False, True], ids=["no_downloads_dir", "xdg_download_dir"])
async def test_palette_screenshot_without_downloads_saves_and_says_where(
    sample_db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, xdg: bool
) -> None:
    home, work, xdg_dir = tmp_path / "home", tmp_path / "work", tmp_path / "xdg-downloads"
    for directory in (home, work, xdg_dir):
        directory.mkdir()
    monkeypatch.setenv("HOME", str(home))  # no ~/Downloads
    monkeypatch.chdir(work)
    if xdg:
        monkeypatch.setenv("XDG_DOWNLOAD_DIR", str(xdg_dir))
    else:
        monkeypatch.delenv("XDG_DOWNLOAD_DIR", raising=False)
    expected_dir = xdg_dir if xdg else work
    app = console_app(sample_db, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await screen_loaded(pilot)
        await run_palette_command(pilot, "Screenshot")
        await settle_until(pilot, lambda: list(expected_dir.glob("*.svg")), "a saved screenshot")
        saved = list(expected_dir.glob("*.svg"))
        notes = notifications(app)
    assert len(saved) == 1 and saved[0].read_text(encoding="utf-8").startswith("<svg")
    assert ("Screenshot saved", str(saved[0])) in notes
    assert not (home / "Downloads").exists()


# ----------------------------------------------------------------------------------- Keys


async def test_keys_of_a_read_only_body_offer_copy_but_no_editing(
    sample_db: Path, tmp_path: Path
) -> None:
    app = console_app(sample_db, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await open_execution(app, pilot, RATE_LIMITED)
        await pilot.press("2")
        app.screen.query_one("#request-body").focus()
        await pilot.pause()
        await run_palette_command(pilot, "Keys")
        await settle_until(pilot, lambda: bool(app.screen.query("HelpPanel")), "the keys panel")
        listed = {binding.description for _, binding, _, _ in app.screen.active_bindings.values()}
    assert {"Copy", "Select all", "Cursor down"} <= listed
    editing = {"Cut", "Paste", "Undo", "Redo", "Delete line", "Delete character left",
               "Delete to line start", "Delete to line end"}  # fmt: skip
    assert listed & editing == set()


# -------------------------------------------------------------------------------- colours


def _luminance(color: Color) -> float:
    def channel(value: int) -> float:
        c = value / 255
        return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4

    return 0.2126 * channel(color.r) + 0.7152 * channel(color.g) + 0.0722 * channel(color.b)


def contrast_ratio(foreground: Color, background: Color) -> float:
    """The WCAG contrast ratio of two opaque colours (1 to 21)."""
    lighter, darker = sorted((_luminance(foreground), _luminance(background)), reverse=True)
    return (lighter + 0.05) / (darker + 0.05)


def title_contrasts(screen) -> dict[str, float]:
    """Each titled box of `screen`: the contrast of its title colour with its background."""
    contrasts = {}
    for widget in screen.query(Widget):
        if not widget.border_title:
            continue
        background = widget.background_colors[1]
        title = widget.styles.border_title_color
        # An unset (transparent) title colour is drawn in the border's colour.
        shown = background + (title if title.a else widget.styles.border_top[1])
        contrasts[str(widget.border_title)] = round(contrast_ratio(shown, background), 1)
    return contrasts


async def test_replay_screen_box_titles_are_readable(sample_db: Path, tmp_path: Path) -> None:
    app = console_app(sample_db, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await open_execution(app, pilot, MISCLASSIFIED_503)
        await pilot.press("R")
        await settle_until(pilot, lambda: isinstance(app.screen, ReplayScreen), "the replay")
        contrasts = title_contrasts(app.screen)
    assert {"LLM layers", "config overrides", "Response #1"} <= set(contrasts)
    assert {title: ratio for title, ratio in contrasts.items() if ratio < 4.5} == {}


async def test_export_dialog_box_titles_are_readable(sample_db: Path, tmp_path: Path) -> None:
    app = console_app(sample_db, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await screen_loaded(pilot)
        await pilot.press("x")
        await settle_until(pilot, lambda: isinstance(app.screen, ExportDialog), "the dialog")
        contrasts = title_contrasts(app.screen)
    assert {"Export a trace bundle", "executions", "bundle file"} <= set(contrasts)
    assert {title: ratio for title, ratio in contrasts.items() if ratio < 4.5} == {}


def _styles_of(renderable, words: set[str]) -> dict[str, str]:
    console = Console(width=200, file=io.StringIO(), color_system="truecolor")
    found = {}
    for segment in console.render(renderable):
        if segment.text.strip() in words and segment.style is not None:
            found[segment.text.strip()] = str(segment.style.color.name if segment.style.color
                                              else "default")  # fmt: skip
    return found


def test_why_not_rule_names_do_not_wear_the_retry_same_colour(sample_db: Path) -> None:
    detail: ExecutionDetail = open_store(sample_db).get_execution(RATE_LIMITED)
    attempt = detail.steps[0].attempts[0]
    assert attempt.action == "retry_same"
    missed = {str(miss["rule_id"]) for miss in attempt.decision["not_matched"]}
    assert missed
    retry_same_colour = action_text("retry_same").style
    styles = _styles_of(decision_renderable(attempt_view(attempt)), missed)
    assert set(styles) == missed
    assert retry_same_colour == "yellow"
    assert {rule: colour for rule, colour in styles.items() if colour == "yellow"} == {}


# --------------------------------------------------------------------------------- loading


class GatedSource(StoreSource):
    """The real store, answering `get_execution` only once the test opens the gate (a store
    slow under load)."""

    def __init__(self, db_path: Path) -> None:
        super().__init__(db_path)
        self.gate = threading.Event()

    def get_execution(self, execution_id: str, **options: Any) -> ExecutionDetail:
        assert self.gate.wait(timeout=60), "the test never opened the gate"
        return super().get_execution(execution_id, **options)


async def test_execution_screen_shows_loading_not_empty_tables_until_the_data_arrives(
    sample_db: Path, tmp_path: Path
) -> None:
    app = console_app(sample_db, tmp_path)
    app.source = source = GatedSource(sample_db)
    async with app.run_test(size=SIZE) as pilot:
        await screen_loaded(pilot)
        app.open_execution(RATE_LIMITED)
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, ExecutionScreen)
        steps, attempts = screen.query_one(StepTable), screen.query_one(AttemptTable)
        waiting = (steps.loading, attempts.loading, screen.query_one("#attempt-detail").loading)
        summary = str(screen.query_one("#execution-summary").content)
        source.gate.set()
        await screen_loaded(pilot)
        loaded = (steps.loading, attempts.loading, screen.query_one("#attempt-detail").loading)
        rows = (steps.row_count, attempts.row_count)
    assert waiting == (True, True, True)
    assert summary == f"Loading execution {RATE_LIMITED}…"
    assert loaded == (False, False, False)
    assert rows == (1, 2)


# ------------------------------------------------------------------------------ 80×24 room


@pytest.mark.parametrize(("size", "short"), [((80, 24), True), ((120, 36), False)],
                         ids=["80x24", "120x36"])  # fmt: skip
async def test_a_short_terminal_leaves_the_decision_room(
    sample_db: Path, tmp_path: Path, size: tuple[int, int], short: bool
) -> None:
    app = console_app(sample_db, tmp_path)
    async with app.run_test(size=size) as pilot:
        screen = await open_execution(app, pilot, MISCLASSIFIED_503)
        decision_rows = screen.query_one("#tab-decision .detail-scroll").size.height
        has_short = screen.has_class("-short")
    assert has_short is short
    assert decision_rows >= 8
