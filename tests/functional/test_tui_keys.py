"""Keys through Pilot: F1/? help per pane, h/l and Tab between panes, zoom, focus ring, footer,
the user keymap file; and bindings, palette and help all generated from the action registry."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from textual.widgets import Static

from console.tui.actions import ACTIONS, actions_of
from console.tui.screens.bundle import ExportDialog, ImportDialog
from console.tui.screens.execution import ExecutionScreen
from console.tui.screens.executions import ExecutionsScreen
from console.tui.screens.help import HelpScreen
from console.tui.screens.lint import LintScreen
from console.tui.screens.replay import ReplayScreen
from console.tui.screens.whatif import WhatIfScreen
from console.tui.widgets.filter_bar import FilterBar
from console.tui.widgets.footer import KeysFooter
from console.tui.widgets.search_bar import SearchBar
from console.tui.widgets.tables import ExecutionTable, NavigableTable
from tests.support.tui import TRIP, open_execution, screen_loaded, settle_until, shown_text, tui_app

SIZE = (160, 44)


@asynccontextmanager
async def on_trip(db: Path, **options: Any) -> AsyncIterator[tuple[Any, Any, ExecutionScreen]]:
    """The app on `db` at SIZE, showing the execution TRIP: (app, pilot, screen)."""
    app = tui_app(db, live_refresh=False, **options)
    async with app.run_test(size=SIZE) as pilot:
        yield app, pilot, await open_execution(app, pilot, TRIP)


def help_text(app) -> str:
    assert isinstance(app.screen, HelpScreen)
    return shown_text(app.screen.query_one("#help-body", Static).content, 156)


def footer_descriptions(screen) -> set[str]:
    return {key.description for key in screen.query_one(KeysFooter).keys}


@pytest.mark.parametrize("key", ["f1", "question_mark"], ids=["F1", "question_mark"])
async def test_help_key_opens_the_keys_of_the_focused_pane_with_cli_twins(
    synthetic_db: Path, key: str
) -> None:
    async with on_trip(synthetic_db) as (app, pilot, screen):
        assert screen.focused_pane().id == "steps"
        await pilot.press(key)
        text = help_text(app)
        assert "Keys of the Steps pane" in text
        headings = [line.strip() for line in text.splitlines()]
        assert headings.index("Table") < headings.index("Execution screen")
        assert headings.index("Execution screen") < headings.index("Everywhere")
        assert "Replay step: Replay the selected step locally" in text
        assert "truva-console replay EXECUTION STEP --response N=FILE" in text
        assert screen.twin_command in text  # the exact twin of copy-cli
        assert "F1 / ?" in text
        await pilot.press("escape")
        assert app.screen is screen


async def test_help_of_the_detail_pane_names_it(synthetic_db: Path) -> None:
    async with on_trip(synthetic_db) as (app, pilot, screen):
        await pilot.press("l", "l")
        assert screen.focused_pane().id == "attempt-detail"
        await pilot.press("f1")
        text = help_text(app)
        assert "Keys of the Detail pane" in text and "Table" not in text.splitlines()


async def test_h_and_l_move_between_panes_and_wrap(synthetic_db: Path) -> None:
    async with on_trip(synthetic_db) as (_app, pilot, screen):
        seen = [screen.focused_pane().id]
        for key in ("l", "l", "l", "h", "h"):
            await pilot.press(key)
            seen.append(screen.focused_pane().id)
        assert seen == ["steps", "attempts", "attempt-detail", "steps", "attempt-detail",
                        "attempts"]  # fmt: skip


async def test_tab_moves_to_the_next_pane(synthetic_db: Path) -> None:
    async with on_trip(synthetic_db) as (_app, pilot, screen):
        await pilot.press("tab")
        assert screen.focused_pane().id == "attempts"


async def test_zoom_maximises_the_focused_pane_and_escape_restores_it(synthetic_db: Path) -> None:
    async with on_trip(synthetic_db) as (app, pilot, screen):
        await pilot.press("l", "z")
        assert screen.maximized is screen.query_one("#attempts")
        assert not screen.query_one("#steps").display or not screen.query_one("#steps").region
        await pilot.press("z")
        assert screen.maximized is None
        await pilot.press("l", "z")
        assert screen.maximized is screen.query_one("#attempt-detail")
        await pilot.press("escape")  # restores first, stays on the execution
        assert screen.maximized is None and app.screen is screen


async def test_executions_list_panes_help_and_zoom(synthetic_db: Path) -> None:
    app = tui_app(synthetic_db, live_refresh=False)
    async with app.run_test(size=SIZE) as pilot:
        await screen_loaded(pilot)
        screen = app.screen
        assert screen.focused_pane().id == "executions-table"
        await pilot.press("h")
        assert isinstance(app.focused, FilterBar)
        await pilot.press("escape", "z")  # back to the table, zoom it
        assert screen.maximized is screen.query_one("#executions-table")
        await pilot.press("z", "question_mark")
        assert "Keys of the Executions pane" in help_text(app)
        assert "truva-console ls" in help_text(app)


async def test_the_focused_pane_has_an_accent_ring_the_others_a_dim_one(
    synthetic_db: Path,
) -> None:
    async with on_trip(synthetic_db) as (_app, pilot, screen):
        await pilot.pause()

        def ring(pane_id: str):
            return screen.query_one(f"#{pane_id}").styles.border_top

        focused, other = ring("steps"), ring("attempts")
        assert focused[0] == other[0] == "round"
        assert focused[1] != other[1]
        await pilot.press("l")
        await pilot.pause()
        assert ring("attempts")[1] == focused[1] and ring("steps")[1] == other[1]
        assert screen.query_one("#steps").border_title == "Steps"


async def test_the_footer_shows_help_and_the_keys_of_the_focused_pane(synthetic_db: Path) -> None:
    app = tui_app(synthetic_db, live_refresh=False)
    async with app.run_test(size=(200, 44)) as pilot:
        screen = await open_execution(app, pilot, TRIP)
        await pilot.pause()
        shown = footer_descriptions(screen)
        assert {"Help", "Back", "Zoom", "Open", "Replay step"} <= shown
        await pilot.press("l", "l")  # the detail pane: no table, so no Open
        await pilot.pause()
        assert "Open" not in footer_descriptions(screen)
        assert "Help" in footer_descriptions(screen)


def footer_line(screen) -> str:
    """The footer as drawn, as plain text."""
    return screen.query_one(KeysFooter).render_line(0).text


@pytest.mark.parametrize("size", [(60, 20), (80, 24), (120, 35), (200, 44)],
                         ids=lambda size: f"{size[0]}x{size[1]}")  # fmt: skip
async def test_a_narrow_footer_leaves_out_other_keys_before_help_and_the_palette(
    synthetic_db: Path, size: tuple[int, int]
) -> None:
    app = tui_app(synthetic_db, live_refresh=False)
    async with app.run_test(size=size) as pilot:
        await screen_loaded(pilot)
        await pilot.pause()
        listed = footer_line(app.screen)
        screen = await open_execution(app, pilot, TRIP)
        await pilot.pause()
        execution = footer_line(screen)
    for line in (listed, execution):
        assert " ? Help " in line and line.rstrip().endswith("^p palette")
        assert len(line) <= size[0]
    assert listed.startswith(" ⏎ Open  s Sort ")
    if size[0] >= 200:
        assert " q Quit " in listed


def footer_offset(footer: KeysFooter, description: str) -> tuple[int, int]:
    """The footer's offset of the middle of the key shown with `description`."""
    for start, end, key in footer._spans:
        if key.description == description:
            return ((start + end) // 2, 0)
    raise AssertionError(f"no key {description!r} in the footer")


async def test_a_click_on_a_footer_key_runs_its_action(synthetic_db: Path) -> None:
    async with on_trip(synthetic_db) as (app, pilot, screen):
        await pilot.pause()
        footer = screen.query_one(KeysFooter)
        await pilot.click(KeysFooter, offset=footer_offset(footer, "Help"))
        await pilot.pause()
        shown = app.screen
        await pilot.press("escape")
        await pilot.pause()
        await pilot.click(KeysFooter, offset=footer_offset(footer, "Back"))
        await pilot.pause()
        back = app.screen
    assert isinstance(shown, HelpScreen)
    assert isinstance(back, ExecutionsScreen)


async def test_the_footer_key_under_the_mouse_gives_its_tooltip_and_a_disabled_key_rings(
    synthetic_db: Path,
) -> None:
    async with on_trip(synthetic_db) as (app, pilot, screen):
        await pilot.pause()
        footer = screen.query_one(KeysFooter)
        palette = footer.keys[-1]
        await pilot.hover(KeysFooter, offset=footer_offset(footer, palette.description))
        hovered, tooltip = footer._hovered, footer.tooltip
        assert footer._gap is not None
        await pilot.hover(KeysFooter, offset=(footer._gap[0], 0))  # the blank before the palette
        after = footer._hovered
        rung: list[bool] = []
        app.bell = lambda: rung.append(True)  # type: ignore[method-assign]
        key = footer.keys[0]
        footer._keys_shown = (replace(key, disabled=True), *footer.keys[1:])
        footer.refresh()
        await pilot.pause()
        before = app.screen
        await pilot.click(KeysFooter, offset=footer_offset(footer, key.description))
        await pilot.pause()
        unchanged = app.screen is before
    assert palette.palette and hovered == palette and tooltip == palette.tooltip
    assert after is None
    assert rung == [True] and unchanged


async def test_a_keymap_file_rebinds_keys_by_action_id(synthetic_db: Path, tmp_path: Path) -> None:
    keymap = tmp_path / "keymap.toml"
    keymap.write_text('[keys]\nhelp = "f2"\nrefresh = "f5"\nzoom-pane = "m"\n', encoding="utf-8")
    async with on_trip(synthetic_db, keymap_file=keymap) as (app, pilot, screen):
        assert app.keymap_problem is None
        before = screen.requests.current
        await pilot.press("f5")
        assert screen.requests.current == before + 1
        await pilot.press("m")
        assert screen.maximized is not None
        await pilot.press("m", "f1")
        assert app.screen is screen  # f1 is no longer help
        await pilot.press("f2")
        text = help_text(app)
        assert "F5" in text and "F2" in text


async def test_the_default_keymap_file_is_read_from_xdg_config_home(
    synthetic_db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    (tmp_path / "xdg" / "truva-console").mkdir(parents=True)
    (tmp_path / "xdg" / "truva-console" / "keymap.toml").write_text('[keys]\nhelp = "f2"\n')
    app = tui_app(synthetic_db, live_refresh=False)
    async with app.run_test(size=SIZE) as pilot:
        await screen_loaded(pilot)
        await pilot.press("f2")
        assert isinstance(app.screen, HelpScreen)


async def test_a_bad_keymap_file_is_one_notification_and_the_default_keys_stay(
    synthetic_db: Path, tmp_path: Path
) -> None:
    keymap = tmp_path / "keymap.toml"
    keymap.write_text('[keys]\nrefresh = 5\n', encoding="utf-8")
    app = tui_app(synthetic_db, live_refresh=False, keymap_file=keymap)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await screen_loaded(pilot)
        problem = f'{keymap}: [keys] refresh: expected keys such as "f5" or "ctrl+l,f5", got 5'
        assert app.keymap_problem == problem
        assert [n.message for n in app._notifications] == [problem]
        await pilot.pause()
        toasts = [toast.render().plain for toast in app.screen.query("Toast")]
        assert toasts == [f"Keymap not used; default keys apply\n{problem}"]
        await pilot.press("f1")
        assert isinstance(app.screen, HelpScreen)


@pytest.mark.parametrize(
    ("owner", "scope"),
    [(ExecutionsScreen, "executions"), (ExecutionScreen, "execution"), (ReplayScreen, "replay"),
     (ExportDialog, "dialog"), (ImportDialog, "dialog"), (NavigableTable, "table"),
     (FilterBar, "filter"), (ExecutionTable, "execution-table"), (SearchBar, "search"),
     (WhatIfScreen, "whatif"), (LintScreen, "lint")],
    ids=lambda value: value if isinstance(value, str) else value.__name__,
)  # fmt: skip
def test_bindings_are_generated_from_the_registry(owner, scope: str) -> None:
    ids = [binding.id for binding in owner.BINDINGS]
    assert ids == [action.id for action in actions_of(scope)]
    assert scope == owner.ACTION_SCOPE


def test_every_action_has_a_title_group_and_tooltip_and_one_key_per_id() -> None:
    keys: dict[str, str] = {}
    for action in ACTIONS:
        assert action.title and action.group and action.tooltip, action.id
        keys.setdefault(action.id, action.keys)
    seen = {(action.scope, action.id) for action in ACTIONS}
    assert len(seen) == len(ACTIONS)  # one entry per id and scope


async def test_palette_commands_of_a_screen_come_from_its_registry_entries(
    synthetic_db: Path,
) -> None:
    async with on_trip(synthetic_db) as (_app, pilot, screen):
        titles = {command.title for command in screen.palette_commands()}
        expected = {f"{a.group}: {a.palette}" for a in actions_of("execution") if a.palette}
        assert expected <= titles
        commands = screen.palette_commands()
        zoom = next(c for c in commands if c.title == "view: Zoom the focused pane")
        zoom.run()
        await settle_until(pilot, lambda: screen.maximized is not None, "a zoomed pane")


# tui10's keys, each a registry action: (scope, id, keys, a CLI twin the help shows or None).
DEBUGGING_KEYS = {
    "next-failed-execution": ("executions", "f",
                              "truva-console ls --status failed,partial,cancelled,interrupted"),
    "copy-focused": ("execution", "y", None),
    "copy-cli": ("execution", "Y", None),
    "search-text": ("execution", "ctrl+f", "truva-console explain EXECUTION STEP | grep -n TEXT"),
    "open-pager": ("execution", "f3", "truva-console explain EXECUTION STEP | less -R"),
    "open-editor": ("execution", "f4", None),
    "next-failed": ("execution", "n,right_square_bracket", None),
    "previous-failed": ("execution", "N,left_square_bracket", None),
    "show-tab-timeline": ("execution", "6",
                          "truva-console explain EXECUTION STEP --timeline --attempt N"),
    "show-tab-diff": ("execution", "7", None),
    "search-next": ("search", "enter,down", None),
    "search-close": ("search", "escape", None),
}


@pytest.mark.parametrize("action_id", DEBUGGING_KEYS, ids=DEBUGGING_KEYS)
def test_the_debugging_keys_are_registry_actions(action_id: str) -> None:
    scope, keys, twin = DEBUGGING_KEYS[action_id]
    (action,) = [a for a in actions_of(scope) if a.id == action_id]
    assert action.keys == keys
    if twin is not None:
        assert action.cli == twin


async def test_the_debugging_keys_show_in_the_help_and_the_palette(synthetic_db: Path) -> None:
    async with on_trip(synthetic_db) as (app, pilot, screen):
        titles = {command.title for command in screen.palette_commands()}
        await pilot.press("f1")
        text = help_text(app)
    assert {"text: Search the focused text", "view: Next failed attempt",
            "text: Show the focused text in $PAGER", "tab: Timeline", "tab: Diff"} <= titles
    assert "Next failed: Jump to the next failed" in text
    # the help names the exact twin: the execution opened on step-3, attempt 1
    assert f"truva-console explain {TRIP} step-3 --timeline --attempt 1" in " ".join(text.split())
    assert "ctrl+f" in text and "F3" in text


async def test_the_help_of_the_executions_table_lists_its_sort_keys_and_the_table_keys(
    synthetic_db: Path,
) -> None:
    app = tui_app(synthetic_db, live_refresh=False)
    async with app.run_test(size=SIZE) as pilot:
        await screen_loaded(pilot)
        assert isinstance(app.focused, ExecutionTable)
        await pilot.press("f1")
        text = help_text(app)
    headings = [line.strip() for line in text.splitlines()]
    assert headings.index("Executions table") < headings.index("Table")
    assert "Sort: Sort this page by the next column" in text
    assert "truva-console ls --sort COLUMN[:asc|:desc]" in text
    assert "Next failed: Move to the next execution that failed" in text


async def test_keys_that_arrive_together_take_effect_in_order(synthetic_db: Path) -> None:
    """A terminal read of several keys (a paste without bracketed paste, tmux send-keys) posts
    them all at once: each is aimed only after the one before has moved the focus."""
    from textual import events

    app = tui_app(synthetic_db, live_refresh=False)
    async with app.run_test(size=SIZE) as pilot:
        await screen_loaded(pilot)
        names = {"/": "slash", ":": "colon"}
        for character in "/since:2000-01-01":
            app.post_message(events.Key(names.get(character, character), character))
        await settle_until(pilot, lambda: app.screen.query_one(FilterBar).value
                           == "since:2000-01-01", "the typed filter")  # fmt: skip
        # `s` typed into the bar, not sorting the table; `:` too, not opening the SQL screen
        assert isinstance(app.screen, ExecutionsScreen)
        assert isinstance(app.focused, FilterBar)
        app.post_message(events.Key("enter", "\r"))
        app.post_message(events.Key("j", "j"))
        await settle_until(pilot, lambda: isinstance(app.focused, ExecutionTable)
                           and app.focused.cursor_row == 1, "the table, one row down")  # fmt: skip
        assert app.screen.query_one(FilterBar).value == "since:2000-01-01"
        assert app.screen.query_one(ExecutionTable).row_count == 3
