"""Dialogs that export executions to a trace bundle and import one into the store."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.screen import ModalScreen
from textual.widgets import Button, Checkbox, Input, RadioButton, RadioSet, Static

from console.tui.actions import bindings
from console.tui.screens.store_backed import StoreBacked, StoreRequests, one_line
from console.tui.widgets.cells import twin_command
from console.tui.widgets.path_suggester import PathSuggester
from store.bundle import ExportResult, ImportResult, export_bundle, import_bundle
from store.errors import StoreError

BUNDLE_SUFFIX = ".truva.zip"
OVERWRITE_LABEL = "Overwrite an existing file"
REPLACE_LABEL = "Replace executions the store holds with different rows"
# The store's remedies name CLI flags; in a dialog they name the dialog's checkboxes.
_CONTROL_WORDS = (
    ("pass --force to overwrite it", f"tick “{OVERWRITE_LABEL}” to overwrite it"),
    ("pass --replace to overwrite", f"tick “{REPLACE_LABEL}” to overwrite it"),
    ("so --replace leaves it alone", "so Replace leaves it alone"),
)
PATH_HINT = "→ completes the path"


def in_dialog_words(problem: str) -> str:
    """`problem` with the CLI flags it suggests replaced by the dialog's controls."""
    for cli_words, dialog_words in _CONTROL_WORDS:
        problem = problem.replace(cli_words, dialog_words)
    return problem


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def default_bundle_path(execution_ids: tuple[str, ...] | None) -> str:
    """`./<execution_id>.truva.zip` for one execution, `./executions.truva.zip` for several."""
    if execution_ids is not None and len(execution_ids) == 1:
        return f"./{execution_ids[0]}{BUNDLE_SUFFIX}"
    return f"./executions{BUNDLE_SUFFIX}"


def export_summary(result: ExportResult) -> Text:
    """What was written: file, size, redaction, then executions and row counts."""
    counts = result.row_counts
    secrets = (
        Text("secrets redacted", style="green")
        if result.redacted
        else Text("secrets NOT redacted", style="bold red")
    )
    return Text.assemble(
        ("wrote ", "bold"), (str(result.path), "bold"), f" ({result.size_bytes:,} bytes), ",
        secrets, "\n",
        f"{_plural(len(result.execution_ids), 'execution')} · "
        f"{_plural(counts.get('steps', 0), 'step')}, "
        f"{_plural(counts.get('attempts', 0), 'attempt')}, "
        f"{_plural(counts.get('llm_calls', 0), 'LLM call')}, "
        f"{_plural(counts.get('events', 0), 'event')}, {_plural(result.span_count, 'span')}",
    )  # fmt: skip


def import_summary(result: ImportResult) -> Text:
    """What the import did with each execution of the bundle."""
    text = Text.assemble(
        ("imported ", "bold"), (str(len(result.imported)), "bold green"),
        ", skipped (already in the store) ", (str(len(result.skipped)), "bold"),
    )  # fmt: skip
    if result.replaced:
        text.append(", replaced ")
        text.append(str(len(result.replaced)), style="bold yellow")
    for label, ids in (("imported", result.imported), ("replaced", result.replaced),
                       ("skipped", result.skipped)):  # fmt: skip
        if ids:
            text.append(f"\n{label}: {', '.join(ids)}")
    if result.redacted:
        text.append("\nthe bundle's secrets were redacted when it was exported", style="dim")
    return text


class ExportDialog(StoreBacked, ModalScreen[None]):
    """Writes the highlighted execution, or every listed one, to a bundle file."""

    ACTION_SCOPE = "dialog"
    BINDINGS: ClassVar[list[BindingType]] = bindings("dialog")

    WORKER_GROUP = "bundle-export"

    @dataclass
    class ExportFinished(Message):
        """The bundle was written."""

        request: int
        result: ExportResult

    @dataclass
    class ExportFailed(Message):
        """Nothing was written; `problem` is one line."""

        request: int
        problem: str

    def __init__(
        self,
        db_path: Path,
        *,
        db_arg: str | None,
        highlighted: str | None,
        listed: tuple[str, ...],
        listed_is_everything: bool = False,
        left_out_running: int = 0,
        all_listed: bool = False,
    ) -> None:
        super().__init__()
        self.db_path = db_path
        self.db_arg = db_arg
        self.highlighted = highlighted
        self.listed = listed
        self.listed_is_everything = listed_is_everything
        self.left_out_running = left_out_running
        self.all_listed = all_listed or highlighted is None
        self.result: ExportResult | None = None
        self.problem: str | None = None
        self.exporting = False
        self.requests = StoreRequests()

    def compose(self) -> ComposeResult:
        with Vertical(id="export-box", classes="bundle-box"):
            with RadioSet(id="export-scope"):
                if self.highlighted is not None:
                    yield RadioButton(
                        f"execution {self.highlighted}",
                        value=not self.all_listed,
                        id="scope-highlighted",
                    )
                running = (
                    f" ({self.left_out_running} running left out)" if self.left_out_running else ""
                )
                yield RadioButton(
                    f"all {_plural(len(self.listed), 'listed execution')}{running}",
                    value=self.all_listed,
                    id="scope-listed",
                )
            yield Input(value=default_bundle_path(self.execution_ids), id="export-path",
                        suggester=PathSuggester(suffix=BUNDLE_SUFFIX))  # fmt: skip
            with Horizontal(classes="bundle-flags"):
                yield Checkbox("Redact secrets", value=True, id="export-redact")
                yield Checkbox(OVERWRITE_LABEL, value=False, id="export-overwrite")
            yield Static(id="export-result", classes="bundle-result")
            yield Static(id="export-twin", classes="bundle-twin")
            with Horizontal(classes="bundle-buttons"):
                yield Button("Export", variant="primary", id="export-run")
                yield Button("Close", id="export-close")

    def on_mount(self) -> None:
        self.query_one("#export-box").border_title = "Export a trace bundle"
        self.query_one("#export-scope").border_title = "executions"
        self.query_one("#export-path", Input).border_title = "bundle file"
        self._show_result()
        self._update_twin()
        self.query_one("#export-path", Input).focus()

    @property
    def execution_ids(self) -> tuple[str, ...] | None:
        """The ids to export; None means every finished execution (`--all`)."""
        if not self.all_listed and self.highlighted is not None:
            return (self.highlighted,)
        return None if self.listed_is_everything else self.listed

    @property
    def twin_command(self) -> str:
        """The `truva-console export` command that writes the same bundle."""
        ids = self.execution_ids
        args = ["export", *(ids if ids is not None else ["--all"])]
        args += ["-o", self.query_one("#export-path", Input).value.strip() or "FILE"]
        if not self.query_one("#export-redact", Checkbox).value:
            args.append("--no-redact")
        if self.query_one("#export-overwrite", Checkbox).value:
            args.append("--force")
        return twin_command(self.db_arg, *args)

    def _update_twin(self) -> None:
        self.sub_title = f"CLI: {self.twin_command}"
        twin = Text.assemble(("CLI ", "bold"), self.twin_command)
        self.query_one("#export-twin", Static).update(twin)

    def _show_result(self) -> None:
        shown = self.query_one("#export-result", Static)
        if self.exporting:
            shown.update(Text("Exporting…", style="bold cyan"))
        elif self.problem is not None:
            shown.update(Text(self.problem, style="bold red"))
        elif self.result is not None:
            shown.update(export_summary(self.result))
        else:
            shown.update(Text(f"enter or Export writes the file; {PATH_HINT}; esc closes",
                              style="dim"))  # fmt: skip

    @on(RadioSet.Changed, "#export-scope")
    def _scope_chosen(self, event: RadioSet.Changed) -> None:
        path = self.query_one("#export-path", Input)
        was_default = path.value == default_bundle_path(self.execution_ids)
        self.all_listed = event.pressed.id == "scope-listed"
        if was_default:
            path.value = default_bundle_path(self.execution_ids)
        self._update_twin()

    @on(Input.Changed, "#export-path")
    @on(Checkbox.Changed)
    def _option_changed(self) -> None:
        self._update_twin()

    @on(Input.Submitted, "#export-path")
    @on(Button.Pressed, "#export-run")
    def action_export(self) -> None:
        """Write the bundle in a worker thread."""
        if self.exporting:
            return
        output = self.query_one("#export-path", Input).value.strip()
        if not output:
            self.problem = "bundle file: expected a file name, got nothing"
            self._show_result()
            return
        self.exporting, self.problem = True, None
        self._show_result()
        db_path, execution_ids = self.db_path, self.execution_ids
        redact = self.query_one("#export-redact", Checkbox).value
        overwrite = self.query_one("#export-overwrite", Checkbox).value
        self.run_store_work(
            lambda: export_bundle(db_path, output, execution_ids, redact=redact,
                                  overwrite=overwrite),
            self.ExportFinished,
            failed=lambda request, error: self.ExportFailed(
                request, in_dialog_words(one_line(error))),
            expected=(StoreError, OSError),
        )  # fmt: skip

    @on(ExportFinished)
    def _export_finished(self, message: ExportFinished) -> None:
        if self.requests.answered(message.request):
            self.exporting, self.result, self.problem = False, message.result, None
            self._show_result()

    @on(ExportFailed)
    def _export_failed(self, message: ExportFailed) -> None:
        if self.requests.answered(message.request):
            self.exporting, self.problem = False, message.problem
            self._show_result()

    def store_work_crashed(self, problem: str) -> None:
        """Show the crash as the result."""
        self.exporting, self.problem = False, problem
        self._show_result()

    @on(Button.Pressed, "#export-close")
    def action_close(self) -> None:
        """Close the dialog."""
        self.dismiss()


class ImportDialog(StoreBacked, ModalScreen[None]):
    """Loads a bundle file into the store the console shows."""

    ACTION_SCOPE = "dialog"
    BINDINGS: ClassVar[list[BindingType]] = bindings("dialog")

    WORKER_GROUP = "bundle-import"

    @dataclass
    class ImportFinished(Message):
        """The bundle was loaded (or every execution of it was already there)."""

        request: int
        result: ImportResult

    @dataclass
    class ImportFailed(Message):
        """The bundle was refused and nothing was written; `problem` is one line."""

        request: int
        problem: str

    def __init__(self, db_path: Path, *, db_arg: str | None) -> None:
        super().__init__()
        self.db_path = db_path
        self.db_arg = db_arg
        self.result: ImportResult | None = None
        self.problem: str | None = None
        self.importing = False
        self.requests = StoreRequests()

    def compose(self) -> ComposeResult:
        with Vertical(id="import-box", classes="bundle-box"):
            yield Input(placeholder=f"path/to/bundle{BUNDLE_SUFFIX}", id="import-path",
                        suggester=PathSuggester(suffix=BUNDLE_SUFFIX))  # fmt: skip
            with Horizontal(classes="bundle-flags"):
                yield Checkbox(REPLACE_LABEL, value=False, id="import-replace")
            yield Static(id="import-result", classes="bundle-result")
            yield Static(id="import-twin", classes="bundle-twin")
            with Horizontal(classes="bundle-buttons"):
                yield Button("Import", variant="primary", id="import-run")
                yield Button("Close", id="import-close")

    def on_mount(self) -> None:
        self.query_one("#import-box").border_title = "Import a trace bundle"
        self.query_one("#import-path", Input).border_title = "bundle file"
        self._show_result()
        self._update_twin()
        self.query_one("#import-path", Input).focus()

    @property
    def twin_command(self) -> str:
        """The `truva-console import` command that loads the same file."""
        args = ["import", self.query_one("#import-path", Input).value.strip() or "FILE"]
        if self.query_one("#import-replace", Checkbox).value:
            args.append("--replace")
        return twin_command(self.db_arg, *args)

    def _update_twin(self) -> None:
        self.sub_title = f"CLI: {self.twin_command}"
        twin = Text.assemble(("CLI ", "bold"), self.twin_command)
        self.query_one("#import-twin", Static).update(twin)

    def _show_result(self) -> None:
        shown = self.query_one("#import-result", Static)
        if self.importing:
            shown.update(Text("Importing…", style="bold cyan"))
        elif self.problem is not None:
            shown.update(Text(self.problem, style="bold red"))
        elif self.result is not None:
            shown.update(import_summary(self.result))
        else:
            hint = (f"into {self.db_path}  ·  enter or Import loads the file; {PATH_HINT}; "
                    "esc closes")  # fmt: skip
            shown.update(Text(hint, style="dim"))

    @on(Input.Changed, "#import-path")
    @on(Checkbox.Changed)
    def _option_changed(self) -> None:
        self._update_twin()

    @on(Input.Submitted, "#import-path")
    @on(Button.Pressed, "#import-run")
    def action_import(self) -> None:
        """Validate and load the bundle in a worker thread."""
        if self.importing:
            return
        bundle = self.query_one("#import-path", Input).value.strip()
        if not bundle:
            self.problem = "bundle file: expected a path, got nothing"
            self._show_result()
            return
        self.importing, self.problem = True, None
        self._show_result()
        db_path, replace = self.db_path, self.query_one("#import-replace", Checkbox).value
        self.run_store_work(
            lambda: import_bundle(db_path, bundle, replace=replace),
            self.ImportFinished,
            failed=lambda request, error: self.ImportFailed(
                request, in_dialog_words(one_line(error))),
            expected=(StoreError, OSError),
        )  # fmt: skip

    @on(ImportFinished)
    def _import_finished(self, message: ImportFinished) -> None:
        if self.requests.answered(message.request):
            self.importing, self.result, self.problem = False, message.result, None
            self._show_result()

    @on(ImportFailed)
    def _import_failed(self, message: ImportFailed) -> None:
        if self.requests.answered(message.request):
            self.importing, self.problem = False, message.problem
            self._show_result()

    def store_work_crashed(self, problem: str) -> None:
        """Show the crash as the result."""
        self.importing, self.problem = False, problem
        self._show_result()

    @on(Button.Pressed, "#import-close")
    def action_close(self) -> None:
        """Close the dialog."""
        self.dismiss()
