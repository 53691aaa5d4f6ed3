"""The Textual app of truva-console: executions, one execution, replay, bundles, what-if, lint,
palette."""

from __future__ import annotations

import functools
import os
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import ClassVar

from textual import events, on
from textual.app import App, SystemCommand
from textual.binding import BindingType
from textual.screen import Screen
from textual.timer import Timer

from console.tui.actions import SCOPE_TITLES, KeymapError, bindings, keymap_path, load_keymap
from console.tui.keys import KeyOrder
from console.tui.messages import (
    ExecutionRequested,
    LintRequested,
    ReplayRequested,
    SqlRequested,
    WhatIfRequested,
)
from console.tui.prefetch import ExecutionPrefetch
from console.tui.screens.bundle import ImportDialog
from console.tui.screens.execution import ExecutionScreen
from console.tui.screens.executions import DEFAULT_PAGE_SIZE, ExecutionsScreen
from console.tui.screens.help import HelpScreen, chain_scopes, help_renderable
from console.tui.screens.lint import LintScreen
from console.tui.screens.palette import ConsoleCommands
from console.tui.screens.panes import PaneScreen
from console.tui.screens.replay import ReplayScreen
from console.tui.screens.sql import SqlScreen
from console.tui.screens.store_source import StoreSource
from console.tui.screens.whatif import WhatIfScreen
from console.tui.widgets.cells import SAMPLES_DB_ARG
from console.tui.widgets.tables import ExecutionTable
from store.queries import ExecutionDetail, ExecutionRow

REFRESH_INTERVAL_S = 1.0
# How long the list's cursor rests on an execution before it is read ahead (`prefetch`): a
# reader who stops on a row to open it gets it at once; one passing over rows reads nothing.
PREFETCH_REST_S = 0.5
# How long opening an execution waits for its read before showing its screen with loading
# indicators: a read back by then fills the screen before its first layout pass (one fill,
# no loading indicators).
OPEN_WAIT_S = 0.25


def screenshot_directory() -> Path:
    """Where the palette's Screenshot goes: `$XDG_DOWNLOAD_DIR`, else `~/Downloads`, when it is
    a directory; otherwise the current directory."""
    for candidate in (os.environ.get("XDG_DOWNLOAD_DIR"), Path.home() / "Downloads"):
        if candidate and Path(candidate).is_dir():
            return Path(candidate)
    return Path.cwd()


class TruvaConsoleApp(App[int]):
    """Browses the debug store at `db_path`.

    `db_arg` is the `--db` value shown in the CLI twin commands (None when the default or
    `$TRUVA_DB` applies; `SAMPLES_DB_ARG` on the bundled samples, whose twins say `--samples`).
    `live_refresh=False` turns the store polling off (snapshot tests).
    `replay_files_dir` is where edited replay responses are written (a new temporary
    directory by default, kept after exit so the copied `replay` commands still work).
    `keymap_file` overrides keys by action id (default `$XDG_CONFIG_HOME/truva-console/
    keymap.toml`); a file that cannot be used is one notification and the defaults stay.
    """

    CSS_PATH = "console.tcss"
    TITLE = "truva-console"
    COMMANDS = App.COMMANDS | {ConsoleCommands}
    ACTION_SCOPE = "app"
    BINDINGS: ClassVar[list[BindingType]] = bindings("app")

    def __init__(
        self,
        db_path: str | Path,
        *,
        db_arg: str | None = None,
        live_refresh: bool = True,
        refresh_interval_s: float = REFRESH_INTERVAL_S,
        page_size: int = DEFAULT_PAGE_SIZE,
        replay_files_dir: Path | None = None,
        keymap_file: Path | None = None,
    ) -> None:
        super().__init__()
        self.source = StoreSource(Path(db_path))
        self.db_arg = db_arg
        self.refresh_interval_s = refresh_interval_s if live_refresh else None
        self.page_size = page_size
        self.store_problem: str | None = None
        self._replay_files_dir = replay_files_dir
        self.keymap_file = keymap_file or keymap_path()
        self.keymap: dict[str, str] = {}
        self.keymap_problem: str | None = None
        # The execution the list's cursor rests on is read ahead, so that opening it shows it
        # at once (a running one is not: its screen reads and polls).
        self.prefetch_rest_s = PREFETCH_REST_S
        self.open_wait_s = OPEN_WAIT_S
        self._prefetch_timer: Timer | None = None
        self.prefetch = ExecutionPrefetch(
            lambda read: self.run_worker(read, thread=True, exit_on_error=False,
                                         group="prefetch"),
            lambda execution_id: self.source.get_execution(execution_id, llm_texts=False),
        )  # fmt: skip
        self.key_order = KeyOrder(self)

    async def on_event(self, event: events.Event) -> None:
        """Each key the terminal sends is aimed once the one before has had its effect
        (`console.tui.keys`): a burst of keys lands where it would have, typed slowly."""
        if self.key_order.hold(event):
            return
        try:
            await super().on_event(event)
        finally:
            self.key_order.handled(event)

    def on_mount(self) -> None:
        """Apply the user's keymap file, if there is one and it can be used."""
        try:
            self.keymap = load_keymap(self.keymap_file)
        except KeymapError as error:
            self.keymap_problem = str(error)
            self.notify(self.keymap_problem, title="Keymap not used; default keys apply",
                        severity="warning", timeout=10, markup=False)  # fmt: skip
            return
        if self.keymap:
            self.set_keymap(self.keymap)

    @functools.cached_property
    def _sample_ids(self) -> frozenset[str]:
        from console.samples import sample_execution_ids

        return frozenset(sample_execution_ids().values())

    def twin_db_arg(self, execution_ids: Iterable[str]) -> str | None:
        """The `--db` of a twin about `execution_ids`. On the samples it is `--samples`, which
        rebuilds the sample executions with their ids, unless one of them was recorded in this
        console's copy since (a replay, a re-run): `--samples` would not find it, so the twin
        names the copy, which is there until the console exits."""
        if self.db_arg == SAMPLES_DB_ARG and not self._sample_ids.issuperset(execution_ids):
            return str(self.source.db_path)
        return self.db_arg

    def get_default_screen(self) -> ExecutionsScreen:
        return ExecutionsScreen(
            self.source,
            db_arg=self.db_arg,
            page_size=self.page_size,
            refresh_interval_s=self.refresh_interval_s,
        )

    def open_execution(
        self, execution_id: str, step_id: str | None = None, attempt_n: int | None = None
    ) -> None:
        """Show one execution on top of the list (on `step_id` and attempt `attempt_n`), with
        its read ahead when the list's cursor rested on it (`prefetch`), else with the read
        started here if it is back within `OPEN_WAIT_S`.

        That wait holds the event loop: keys pressed meanwhile wait in the queue and reach the
        execution's screen, as they would while it showed its loading indicators; the read has
        the interpreter to itself instead of sharing it with composing and styling the screen.
        """
        self._stop_prefetch_timer()
        gc_paused = False
        prefetched = self.prefetch.take(execution_id, self.listed_row(execution_id))
        if prefetched is None:
            gc_paused = ExecutionScreen.pause_gc()  # the read is part of the open
            prefetched = self.prefetch.read_at_open(execution_id)
            prefetched.finished_within(self.open_wait_s)
        detail = prefetched.ready()
        self.push_screen(
            ExecutionScreen(
                self.source,
                execution_id,
                db_arg=self.twin_db_arg([execution_id]),
                refresh_interval_s=self.refresh_interval_s,
                step_id=step_id,
                attempt_n=attempt_n,
                detail=detail,
                pending=None if detail is not None else prefetched,
                gc_paused=gc_paused,
            )
        )

    def listed_row(self, execution_id: str) -> ExecutionRow | None:
        """The row of `execution_id` on the executions list's current page, if it is there."""
        for screen in self.screen_stack:
            if isinstance(screen, ExecutionsScreen) and screen.page and screen.problem is None:
                rows = screen.page.executions
                return next((row for row in rows if row.execution_id == execution_id), None)
        return None

    @on(ExecutionTable.ExecutionHighlighted)
    def _execution_highlighted(self, message: ExecutionTable.ExecutionHighlighted) -> None:
        self._stop_prefetch_timer()
        execution_id = message.execution_id
        self._prefetch_timer = self.set_timer(self.prefetch_rest_s,
                                              lambda: self._read_ahead(execution_id))  # fmt: skip

    def _read_ahead(self, execution_id: str) -> None:
        """The list's cursor rested on `execution_id`: read it, if the list still shows it."""
        self._prefetch_timer = None
        screen = self.screen_stack[-1] if self.screen_stack else None  # none while exiting
        if not isinstance(screen, ExecutionsScreen):
            return
        if screen.query_one(ExecutionTable).highlighted_key() != execution_id:
            return
        row = self.listed_row(execution_id)
        if row is not None:
            self.prefetch.want(row)

    def _stop_prefetch_timer(self) -> None:
        if self._prefetch_timer is not None:
            self._prefetch_timer.stop()
            self._prefetch_timer = None

    def open_sql(self) -> None:
        """Show the SQL screen on top of the current one."""
        self.push_screen(SqlScreen(self.source.db_path, db_arg=self.db_arg))

    def replay_files_dir(self) -> Path:
        """Where edited replay responses go; a temporary directory made on first use."""
        if self._replay_files_dir is None:
            self._replay_files_dir = Path(tempfile.mkdtemp(prefix="truva-replay-"))
        return self._replay_files_dir

    def open_replay(self, detail: ExecutionDetail, step_id: str) -> None:
        """Show the replay screen for one step of a loaded execution."""
        self.push_screen(
            ReplayScreen(
                detail,
                step_id,
                db_path=self.source.db_path,
                db_arg=self.twin_db_arg([detail.execution.execution_id]),
                files_dir=self.replay_files_dir(),
            )
        )

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        """Textual's commands, with a Screenshot that says where it saved the file."""
        for command in super().get_system_commands(screen):
            if command.title == "Screenshot":
                yield SystemCommand(
                    "Screenshot",
                    f"Save an SVG of the current screen in {screenshot_directory()}",
                    lambda: self.call_after_refresh(self.save_screenshot_here),
                )
            else:
                yield command

    def save_screenshot_here(self) -> Path | None:
        """Save an SVG of the screen in `screenshot_directory()` and say where it went."""
        directory = screenshot_directory()
        try:
            saved = Path(self.save_screenshot(path=str(directory)))
        except OSError as error:
            self.notify(f"{directory}: {error.strerror or error}", title="Screenshot not saved",
                        severity="error", markup=False)  # fmt: skip
            return None
        self.notify(str(saved), title="Screenshot saved", markup=False)
        return saved

    @on(ExecutionRequested)
    def _execution_requested(self, message: ExecutionRequested) -> None:
        self.open_execution(message.execution_id, message.step_id, message.n)

    @on(SqlRequested)
    def _sql_requested(self) -> None:
        self.open_sql()

    @on(ReplayRequested)
    def _replay_requested(self, message: ReplayRequested) -> None:
        self.open_replay(message.detail, message.step_id)

    @on(WhatIfRequested)
    def _whatif_requested(self, message: WhatIfRequested) -> None:
        self.push_screen(WhatIfScreen(self.source.db_path, db_arg=self.db_arg,
                                      filter_text=message.filter_text))  # fmt: skip

    @on(LintRequested)
    def _lint_requested(self) -> None:
        self.push_screen(LintScreen(self.source.db_path, db_arg=self.db_arg))

    def action_help(self) -> None:
        """Show the keys of the focused pane, its screen and the app (F1, `?`)."""
        screen = self.screen
        if isinstance(screen, HelpScreen):
            return
        scopes = chain_scopes(screen.focused or screen)
        where = SCOPE_TITLES.get(scopes[0], "truva-console")
        twin = None
        if isinstance(screen, PaneScreen):
            pane_title = screen.pane_title()
            where = f"the {pane_title} pane" if pane_title else SCOPE_TITLES[screen.ACTION_SCOPE]
            twin = screen.action_twin
        content = help_renderable(f"Keys of {where}", scopes, self.keymap, twin,
                                  width=self.size.width)  # fmt: skip
        self.push_screen(HelpScreen(content))

    @on(ReplayScreen.ReplayFinished)
    @on(ImportDialog.ImportFinished)
    @on(ExecutionScreen.RerunFinished)
    def _store_written(self) -> None:
        """A replay, a re-run or an import added executions: list them."""
        for screen in self.screen_stack:
            if isinstance(screen, ExecutionsScreen):
                screen.load_page()

    @on(ExecutionTable.ExecutionChosen)
    def _execution_chosen(self, message: ExecutionTable.ExecutionChosen) -> None:
        self.open_execution(message.execution_id)

    @on(ExecutionsScreen.PageLoaded)
    def _store_read(self, message: ExecutionsScreen.PageLoaded) -> None:
        self.store_problem = None

    @on(ExecutionsScreen.LoadFailed)
    def _store_unreadable(self, message: ExecutionsScreen.LoadFailed) -> None:
        self.store_problem = message.problem

    async def action_quit(self) -> None:
        """Leave; the exit code is 2 when the store could not be read."""
        self.exit(return_code=2 if self.store_problem else 0)


def run_app(db: str | None, samples: bool) -> int:
    """Run the TUI on the store `db` (or a temporary copy of the bundled samples).

    Returns the exit code for the CLI: 0, or 2 with one line on stderr when the store (or the
    sample traces) could not be read.
    """
    if not samples:
        from store.connection import resolve_db_path

        return _run(resolve_db_path(db), db_arg=db)
    from console.samples import SampleStoreError, prepare_sample_store

    with tempfile.TemporaryDirectory(prefix="truva-samples-") as directory:
        try:
            db_path = prepare_sample_store(Path(directory) / "samples.duckdb")
        except SampleStoreError as error:
            print(f"truva-console: {error}", file=sys.stderr)
            return 2
        return _run(db_path, db_arg=SAMPLES_DB_ARG)


def _run(db_path: Path, *, db_arg: str | None) -> int:
    app = TruvaConsoleApp(db_path, db_arg=db_arg)
    app.run()
    if app.store_problem:
        print(f"truva-console: {app.store_problem}", file=sys.stderr)
    return app.return_code or 0
