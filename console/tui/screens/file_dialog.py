"""The shape every file dialog shares: a path, options, a result line, the CLI twin, a worker.

The bundle export and import dialogs and the SQL screen's export dialog are `FileDialog`s: each
names its widgets `ID_PREFIX-…`, composes its own fields and checkboxes, says what its twin
command is and what work it runs; showing the result, answering the worker and closing are here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.screen import ModalScreen
from textual.widget import Widget
from textual.widgets import Button, Checkbox, Input, RadioSet, Static

from console.tui.actions import bindings
from console.tui.screens.store_backed import StoreBacked, StoreRequests, one_line
from store.errors import StoreError

PATH_HINT = "→ completes the path"


class FileDialog(StoreBacked, ModalScreen[None]):
    """A dialog that writes or reads one file in a worker thread and shows what came of it.

    A subclass sets the class constants, nests its own `Finished` and `Failed` subclasses
    (`FINISHED`, `FAILED`) so the app can tell whose work ended, and implements
    `compose_fields`, `compose_flags`, `twin_command`, `work` and `result_text`.
    """

    ACTION_SCOPE = "dialog"
    BINDINGS: ClassVar[list[BindingType]] = bindings("dialog")

    ID_PREFIX: ClassVar[str]  # the widgets are #ID_PREFIX-box, -path, -result, -twin, -run, -close
    TITLE: ClassVar[str]  # the box's border title
    PATH_TITLE: ClassVar[str]  # the path input's border title, and the field a problem names
    PATH_EXPECTED: ClassVar[str]  # what an empty path should have been: "a file name"
    RUN_LABEL: ClassVar[str]  # the primary button: "Export"
    RUN_DOES: ClassVar[str]  # what it does, for the hint: "writes the file"
    BUSY_TEXT: ClassVar[str]  # shown while the work runs: "Exporting…"

    @dataclass
    class Finished(Message):
        """The work ended; `result` is what it returned."""

        request: int
        result: Any

    @dataclass
    class Failed(Message):
        """Nothing was written; `problem` is one line."""

        request: int
        problem: str

    FINISHED: ClassVar[type[Finished]]
    FAILED: ClassVar[type[Failed]]

    def __init__(self, db_path: Path, *, db_arg: str | None) -> None:
        super().__init__()
        self.db_path = db_path
        self.db_arg = db_arg
        self.result: Any = None
        self.problem: str | None = None
        self.busy = False
        self.requests = StoreRequests()

    def widget_id(self, part: str) -> str:
        """The id of one of the dialog's widgets: `export-path` for `path`."""
        return f"{self.ID_PREFIX}-{part}"

    def compose(self) -> ComposeResult:
        with Vertical(id=self.widget_id("box"), classes="bundle-box") as box:
            box.border_title = self.TITLE
            yield from self.compose_fields()
            with Horizontal(classes="bundle-flags"):
                yield from self.compose_flags()
            yield Static(id=self.widget_id("result"), classes="bundle-result")
            yield Static(id=self.widget_id("twin"), classes="bundle-twin")
            with Horizontal(classes="bundle-buttons"):
                yield Button(self.RUN_LABEL, variant="primary", id=self.widget_id("run"),
                             classes="dialog-run")  # fmt: skip
                yield Button("Close", id=self.widget_id("close"), classes="dialog-close")

    def compose_fields(self) -> Iterator[Widget]:
        """What stands above the checkboxes: any choice, then `path_field(…)`."""
        raise NotImplementedError

    def compose_flags(self) -> Iterator[Widget]:
        """The option checkboxes."""
        raise NotImplementedError

    def path_field(self, **options: Any) -> Input:
        """The dialog's path input (`#ID_PREFIX-path`, titled `PATH_TITLE`)."""
        path = Input(id=self.widget_id("path"), **options)
        path.border_title = self.PATH_TITLE
        return path

    def on_mount(self) -> None:
        self._show_result()
        self._update_twin()
        self.path_input.focus()

    @property
    def path_input(self) -> Input:
        """The input the file's path is typed in."""
        return self.query_one(f"#{self.widget_id('path')}", Input)

    def checked(self, part: str) -> bool:
        """Whether the checkbox `#ID_PREFIX-part` is ticked."""
        return self.query_one(f"#{self.widget_id(part)}", Checkbox).value

    @property
    def twin_command(self) -> str:
        """The `truva-console` command that does what the dialog does."""
        raise NotImplementedError

    def twin_line(self) -> str:
        """The twin command as the dialog shows it, on one line."""
        return self.twin_command

    def _update_twin(self) -> None:
        self.sub_title = f"CLI: {self.twin_line()}"
        twin = Text.assemble(("CLI ", "bold"), self.twin_line())
        self.query_one(f"#{self.widget_id('twin')}", Static).update(twin)

    def idle_hint(self) -> str:
        """What the result line says before anything ran."""
        return f"enter or {self.RUN_LABEL} {self.RUN_DOES}; {PATH_HINT}; esc closes"

    def result_text(self, result: Any) -> Text:
        """What the work's `result` is shown as."""
        raise NotImplementedError

    def _show_result(self) -> None:
        shown = self.query_one(f"#{self.widget_id('result')}", Static)
        if self.busy:
            shown.update(Text(self.BUSY_TEXT, style="bold cyan"))
        elif self.problem is not None:
            shown.update(Text(self.problem, style="bold red"))
        elif self.result is not None:
            shown.update(self.result_text(self.result))
        else:
            shown.update(Text(self.idle_hint(), style="dim"))

    def default_path(self) -> str:
        """The path the input starts with for the current choice."""
        return ""

    def choose(self, pressed_id: str | None) -> None:
        """The radio button `pressed_id` was chosen."""

    @on(RadioSet.Changed)
    def _choice_changed(self, event: RadioSet.Changed) -> None:
        path = self.path_input
        was_default = path.value == self.default_path()
        self.choose(event.pressed.id)
        if was_default:
            path.value = self.default_path()
        self._update_twin()

    @on(Input.Changed)
    @on(Checkbox.Changed)
    def _option_changed(self) -> None:
        self._update_twin()

    def work(self, path: str) -> Callable[[], Any]:
        """What the worker thread runs for the typed `path` (the options read now)."""
        raise NotImplementedError

    def problem_of(self, error: BaseException) -> str:
        """An expected error of the work as one line in the dialog's words."""
        return one_line(error)

    @on(Input.Submitted)
    @on(Button.Pressed, ".dialog-run")
    def _run_asked(self) -> None:
        self.submit()

    def submit(self) -> None:
        """Run the work for the typed path in a worker thread (nothing while it runs)."""
        if self.busy:
            return
        path = self.path_input.value.strip()
        if not path:
            self.problem = f"{self.PATH_TITLE}: expected {self.PATH_EXPECTED}, got nothing"
            self._show_result()
            return
        self.busy, self.problem = True, None
        self._show_result()
        self.run_store_work(
            self.work(path),
            self.FINISHED,
            failed=lambda request, error: self.FAILED(request, self.problem_of(error)),
            expected=(StoreError, OSError),
        )

    @on(Finished)
    def _finished(self, message: Finished) -> None:
        if self.requests.answered(message.request):
            self.busy, self.result, self.problem = False, message.result, None
            self._show_result()

    @on(Failed)
    def _failed(self, message: Failed) -> None:
        if self.requests.answered(message.request):
            self.busy, self.problem = False, message.problem
            self._show_result()

    def store_work_crashed(self, problem: str) -> None:
        """Show the crash as the result."""
        self.busy, self.problem = False, problem
        self._show_result()

    @on(Button.Pressed, ".dialog-close")
    def _close_pressed(self) -> None:
        self.action_close()

    def action_close(self) -> None:
        """Close the dialog."""
        self.dismiss()
