"""Parts of the replay screen: the dispatch table, edited-response text, and the comparison."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from textual import on
from textual.message import Message
from textual.widgets import DataTable

from console.printable import printable
from console.render.replay_text import (
    describe_comparison,
    describe_divergence,
    describe_original,
    describe_replay,
)
from console.replay.edits import (
    RESPONSE_KEYWORDS,
    ReplayResponse,
    ResponseSpecError,
    parse_response_spec,
)
from console.replay.engine import ReplayResult
from console.tui.widgets.cells import action_text
from console.tui.widgets.tables import NavigableTable
from store.queries import AttemptRecord

_KEYWORD_OF_TRANSPORT_ERROR = {"reset": "drop", "timeout": "timeout"}


@dataclass(frozen=True, slots=True)
class RecordedDispatch:
    """Dispatch `number` of the original step: the attempt that sent it and what came back."""

    number: int
    attempt: AttemptRecord
    response: ReplayResponse | None


def response_spec_text(response: ReplayResponse | None) -> str:
    """A response as the JSON an edit starts from (`{"status", "headers", "body"}` or `"drop"`).

    A body that is JSON is shown as that value, any other body as a string; None gives "".
    """
    if response is None:
        return ""
    if response.transport_error is not None:
        return json.dumps(_KEYWORD_OF_TRANSPORT_ERROR.get(response.transport_error, "drop"))
    spec: dict[str, Any] = {"status": response.status}
    if response.headers:
        spec["headers"] = dict(response.headers)
    if response.body:
        text = response.body.decode("utf-8", errors="replace")
        try:
            spec["body"] = json.loads(text)
            return json.dumps(spec, indent=2, ensure_ascii=False)
        except (ValueError, RecursionError):  # not JSON, or nested too deeply to lay out
            spec["body"] = text
    return json.dumps(spec, indent=2, ensure_ascii=False)


def edited_value(text: str, where: str) -> Any:
    """The JSON value of an edit: its text decoded, or the bare word `drop` / `timeout`.

    Raises ResponseSpecError (one line naming `where`) when the text is not a usable response.
    """
    stripped = text.strip()
    if stripped in RESPONSE_KEYWORDS:
        value: Any = stripped
    else:
        try:
            value = json.loads(stripped)
        except json.JSONDecodeError as error:
            raise ResponseSpecError(
                f"{where}: invalid JSON at line {error.lineno}, column {error.colno}: {error.msg}"
                ' (expected {"status": …, "headers": {…}, "body": …} or the word drop)'
            ) from error
        except RecursionError as error:
            raise ResponseSpecError(f"{where}: JSON nested too deeply to read") from error
    parse_response_spec(value, where)
    return value


def same_response_text(text: str, recorded_text: str) -> bool:
    """Whether an edit's text says the same as the recorded response's (JSON-equal or equal)."""
    if text.strip() == recorded_text.strip():
        return True
    try:
        return json.loads(text) == json.loads(recorded_text)
    except (ValueError, RecursionError):
        return False


class DispatchTable(NavigableTable):
    """The original step's dispatches, one per row, plus the next one it never made."""

    @dataclass
    class DispatchHighlighted(Message):
        """The cursor moved to dispatch `number`."""

        number: int

    @dataclass
    class DispatchChosen(Message):
        """The user pressed Enter on dispatch `number`."""

        number: int

    def on_mount(self) -> None:
        for label, key in (
            ("N", "n"),
            ("HTTP", "http"),
            ("ACTION", "action"),
            ("RULE", "rule"),
            ("SERVES", "serves"),
        ):
            self.add_column(label, key=key)

    def show_dispatches(
        self, recorded: tuple[RecordedDispatch, ...], row_count: int, edited: set[int]
    ) -> None:
        """Rows 1..`row_count`: the recorded dispatches, then ones the original never made."""
        kept = self.highlighted_key()
        self.clear()
        for number in range(1, row_count + 1):
            dispatch = recorded[number - 1] if number <= len(recorded) else None
            if dispatch is None:
                cells: tuple[Any, ...] = ("-", Text("(not made)", style="dim"), "")
            else:
                attempt = dispatch.attempt
                got = attempt.transport_error or str(attempt.status)
                cells = (Text(printable(got)), action_text(attempt.action),
                         Text(printable(attempt.rule_id) or "-"))
            self.add_row(
                Text(str(number), justify="right"),
                *cells,
                serves_text(number, dispatch, number in edited),
                key=str(number),
            )
        self.move_to_key(kept)
        self.refresh_bindings()

    def mark_edited(self, number: int, dispatch: RecordedDispatch | None, edited: bool) -> None:
        """Update what the replay serves to dispatch `number`."""
        self.update_cell(str(number), "serves", serves_text(number, dispatch, edited))

    @on(DataTable.RowHighlighted)
    def _highlighted(self, event: DataTable.RowHighlighted) -> None:
        event.stop()
        if event.row_key.value is not None:
            self.post_message(self.DispatchHighlighted(int(event.row_key.value)))

    @on(DataTable.RowSelected)
    def _chosen(self, event: DataTable.RowSelected) -> None:
        event.stop()
        if event.row_key.value is not None:
            self.post_message(self.DispatchChosen(int(event.row_key.value)))


def serves_text(number: int, dispatch: RecordedDispatch | None, edited: bool) -> Text:
    """`edited`, `recorded` or `stops here` (no response to serve) for one dispatch row."""
    if edited:
        return Text("edited", style="bold yellow")
    if dispatch is not None and dispatch.response is not None:
        return Text("recorded")
    return Text("stops here", style="dim")


# ---------------------------------------------------------------------------------- comparison


def _delay(delay_ms: float | None) -> str:
    return "-" if delay_ms is None else f"{delay_ms:.1f} ms"


def _got(dispatched: bool | None, status: int | None, transport_error: str | None) -> Text:
    if not dispatched:
        return Text("not sent", style="dim")
    if transport_error:
        return Text(transport_error, style="yellow")
    return Text("-" if status is None else str(status))


def _side_table(title: str, *, with_rules: bool) -> Table:
    table = Table(title=title, title_style="bold", box=None, padding=(0, 1), show_edge=False)
    for label in ("status", "action", "rule", "delay"):
        if label != "rule" or with_rules:
            table.add_column(label, no_wrap=True, header_style="bold")
    return table


def comparison_renderable(result: ReplayResult, *, with_rules: bool = True) -> RenderableType:
    """Original and replayed attempts side by side, both endings, and whether it changed;
    without `with_rules` (a narrow screen) the sides leave out the rule column, which the
    first-divergence line still names."""
    def row(*cells: RenderableType) -> tuple[RenderableType, ...]:
        return cells if with_rules else (cells[0], cells[1], cells[3])

    setup = result.setup
    original = list(setup.original.attempts)
    replayed = list(result.step.attempts) if result.step is not None else []
    edited = {served.number for served in result.dispatches if served.source == "edited"}
    numbers = Table(title=" ", box=None, padding=(0, 1), show_edge=False)
    numbers.add_column("n", justify="right", header_style="bold")
    separator = Table(title=" ", box=None, padding=0, show_edge=False)
    separator.add_column("│", style="dim", header_style="dim")
    left = _side_table("original", with_rules=with_rules)
    right = _side_table("replay", with_rules=with_rules)
    dispatch_number = 0
    divergence = result.first_divergence
    for index in range(max(len(original), len(replayed), 1)):
        diverged = divergence is not None and divergence.attempt == index + 1
        numbers.add_row(Text(str(index + 1), style="bold reverse yellow" if diverged else ""))
        separator.add_row("│")
        if index < len(original):
            attempt = original[index]
            delay = attempt.delay_ms if attempt.action == "retry_same" else None
            left.add_row(*row(
                _got(attempt.dispatched, attempt.status, attempt.transport_error),
                action_text(attempt.action), Text(printable(attempt.rule_id) or "-"),
                _delay(delay),
            ))  # fmt: skip
        else:
            left.add_row(*row("", "", "", ""))
        if index < len(replayed):
            summary = replayed[index]
            got = _got(summary.dispatched, summary.status, summary.transport_error)
            if summary.dispatched:
                dispatch_number += 1
                if dispatch_number == result.unscripted_dispatch:
                    got = Text("unscripted", style="dim")
                elif dispatch_number in edited:
                    got.append("*", style="bold yellow")
            right.add_row(*row(got, action_text(summary.action), Text(printable(summary.rule)),
                               _delay(summary.delay_ms)))  # fmt: skip
        else:
            right.add_row(*row("", "", "", ""))
    sides = Table.grid(padding=(0, 1))
    sides.add_row(numbers, left, separator, right)
    style = "bold yellow" if result.ran_out or result.changed else "bold green"
    verdict = Text(describe_comparison(result), style=style)
    parts: list[RenderableType] = [
        sides,
        Text.assemble(("original ", "bold"), describe_original(setup.original)),
        Text.assemble(("replay   ", "bold"), describe_replay(result)),
        verdict,
    ]
    divergence_text = describe_divergence(result)
    if divergence_text is not None:
        parts.append(Text(printable(divergence_text), style="yellow"))
    if edited:
        parts.append(Text("* an edited response", style="dim"))
    parts.extend(Text(f"note: {printable(note)}", style="yellow") for note in result.notes)
    return Group(*parts)
