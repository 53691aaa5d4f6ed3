"""Dialogs that export executions to a trace bundle and import one into the store."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

from rich.text import Text
from textual.widget import Widget
from textual.widgets import Checkbox, RadioButton, RadioSet

from console.tui.screens.file_dialog import FileDialog
from console.tui.screens.store_backed import one_line
from console.tui.widgets.cells import twin_command
from console.tui.widgets.path_suggester import PathSuggester
from store.bundle import ExportResult, ImportResult, export_bundle, import_bundle

BUNDLE_SUFFIX = ".truva.zip"
OVERWRITE_LABEL = "Overwrite an existing file"
REPLACE_LABEL = "Replace executions the store holds with different rows"
# The store's remedies name CLI flags; in a dialog they name the dialog's checkboxes.
_CONTROL_WORDS = (
    ("pass --force to overwrite it", f"tick “{OVERWRITE_LABEL}” to overwrite it"),
    ("pass --replace to overwrite", f"tick “{REPLACE_LABEL}” to overwrite it"),
    ("so --replace leaves it alone", "so Replace leaves it alone"),
)


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


class ExportDialog(FileDialog):
    """Writes the highlighted execution, or every listed one, to a bundle file."""

    WORKER_GROUP = "bundle-export"
    ID_PREFIX = "export"
    TITLE = "Export a trace bundle"
    PATH_TITLE = "bundle file"
    PATH_EXPECTED = "a file name"
    RUN_LABEL = "Export"
    RUN_DOES = "writes the file"
    BUSY_TEXT = "Exporting…"

    class ExportFinished(FileDialog.Finished):
        """The bundle was written; `result` is the `ExportResult`."""

    class ExportFailed(FileDialog.Failed):
        """Nothing was written; `problem` is one line."""

    FINISHED, FAILED = ExportFinished, ExportFailed

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
        super().__init__(db_path, db_arg=db_arg)
        self.highlighted = highlighted
        self.listed = listed
        self.listed_is_everything = listed_is_everything
        self.left_out_running = left_out_running
        self.all_listed = all_listed or highlighted is None

    def compose_fields(self) -> Iterator[Widget]:
        scope = RadioSet(id="export-scope")
        scope.border_title = "executions"
        with scope:
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
        yield self.path_field(value=self.default_path(),
                              suggester=PathSuggester(suffix=BUNDLE_SUFFIX))  # fmt: skip

    def compose_flags(self) -> Iterator[Widget]:
        yield Checkbox("Redact secrets", value=True, id="export-redact")
        yield Checkbox(OVERWRITE_LABEL, value=False, id="export-overwrite")

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
        args += ["-o", self.path_input.value.strip() or "FILE"]
        if not self.checked("redact"):
            args.append("--no-redact")
        if self.checked("overwrite"):
            args.append("--force")
        return twin_command(self.db_arg, *args)

    def default_path(self) -> str:
        return default_bundle_path(self.execution_ids)

    def choose(self, pressed_id: str | None) -> None:
        self.all_listed = pressed_id == "scope-listed"

    def work(self, path: str) -> Callable[[], ExportResult]:
        db_path, execution_ids = self.db_path, self.execution_ids
        redact, overwrite = self.checked("redact"), self.checked("overwrite")
        return lambda: export_bundle(db_path, path, execution_ids, redact=redact,
                                     overwrite=overwrite)  # fmt: skip

    def problem_of(self, error: BaseException) -> str:
        return in_dialog_words(one_line(error))

    def result_text(self, result: ExportResult) -> Text:
        return export_summary(result)


class ImportDialog(FileDialog):
    """Loads a bundle file into the store the console shows."""

    WORKER_GROUP = "bundle-import"
    ID_PREFIX = "import"
    TITLE = "Import a trace bundle"
    PATH_TITLE = "bundle file"
    PATH_EXPECTED = "a path"
    RUN_LABEL = "Import"
    RUN_DOES = "loads the file"
    BUSY_TEXT = "Importing…"

    class ImportFinished(FileDialog.Finished):
        """The bundle was loaded (or every execution of it was already there); `result` is
        the `ImportResult`."""

    class ImportFailed(FileDialog.Failed):
        """The bundle was refused and nothing was written; `problem` is one line."""

    FINISHED, FAILED = ImportFinished, ImportFailed

    def compose_fields(self) -> Iterator[Widget]:
        yield self.path_field(placeholder=f"path/to/bundle{BUNDLE_SUFFIX}",
                              suggester=PathSuggester(suffix=BUNDLE_SUFFIX))  # fmt: skip

    def compose_flags(self) -> Iterator[Widget]:
        yield Checkbox(REPLACE_LABEL, value=False, id="import-replace")

    @property
    def twin_command(self) -> str:
        """The `truva-console import` command that loads the same file."""
        args = ["import", self.path_input.value.strip() or "FILE"]
        if self.checked("replace"):
            args.append("--replace")
        return twin_command(self.db_arg, *args)

    def idle_hint(self) -> str:
        return f"into {self.db_path}  ·  {super().idle_hint()}"

    def work(self, path: str) -> Callable[[], ImportResult]:
        db_path, replace = self.db_path, self.checked("replace")
        return lambda: import_bundle(db_path, path, replace=replace)

    def problem_of(self, error: BaseException) -> str:
        return in_dialog_words(one_line(error))

    def result_text(self, result: ImportResult) -> Text:
        return import_summary(result)
