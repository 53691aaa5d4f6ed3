"""The Decision tab: verdict, the inputs the deciding rule read, why not, and all inputs folded."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Collapsible, Static

from console.printable import printable
from console.render.decision import DecisionView, decision_view
from console.render.warnings import attempt_warnings
from console.tui.widgets.cells import action_text
from store.queries import AttemptRecord

# Rule names in "why not" and the inputs a rule read each get their own colour (not the yellow
# of retry_same in the action column).
_RULE_STYLE = "magenta"
_READ_STYLE = "bold cyan"


def field_grid(rows: list[tuple[str, RenderableType | str]]) -> Table:
    """Bold labels beside their values, one row each."""
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold", no_wrap=True)
    grid.add_column(overflow="fold")
    for label, value in rows:
        grid.add_row(label, printable(value) if isinstance(value, str) else value)
    return grid


def heading(text: str) -> Text:
    """A section heading, after a blank line."""
    return Text(f"\n{text}", style="bold underline")


def _pairs(pairs: tuple[tuple[str, str], ...], value_style: str = "") -> Table:
    """Key/value pairs two to a row, read left to right."""
    grid = Table.grid(padding=(0, 2), expand=True)
    for _ in range(2):
        grid.add_column(style="bold", no_wrap=True)
        grid.add_column(overflow="fold", ratio=1, style=value_style)
    for index in range(0, len(pairs), 2):
        left, right = pairs[index], pairs[index + 1] if index + 1 < len(pairs) else ("", "")
        grid.add_row(*(printable(cell) for cell in (*left, *right)))
    return grid


def decision_renderable(view: DecisionView) -> RenderableType:
    """Action, rule, reason, recovery; the inputs the rule read; earlier rules; the layers."""
    layer = f"  (layer {view.layer})" if view.layer else ""
    headline = Text.assemble(action_text(view.action), "  by rule ",
                             (printable(view.rule_id), "bold"), printable(layer))  # fmt: skip
    rows: list[tuple[str, RenderableType | str]] = [("action", headline), ("reason", view.reason)]
    if view.recovery:
        rows.append(("recovery", Text(printable(view.recovery), style="bold")))
    if view.impact:
        rows.append(("impact", view.impact))
    if view.delay:
        rows.append(("delay", view.delay))
    if view.corrected:
        rows.append(("corrected", view.corrected))
    parts: list[RenderableType] = [field_grid(rows)]
    parts.append(heading(f"Inputs {view.rule_id} read"))
    parts.append(_pairs(view.read_inputs, _READ_STYLE) if view.read_inputs
                 else Text("none recorded", style="dim"))  # fmt: skip
    parts.append(heading("Why not: earlier rules that did not match (first match wins)"))
    if view.not_matched:
        misses = Table.grid(padding=(0, 2))
        misses.add_column(style=_RULE_STYLE, no_wrap=True)
        misses.add_column(overflow="fold")
        for rule_id, reason in view.not_matched:
            misses.add_row(printable(rule_id), printable(reason))
        parts.append(misses)
    else:
        parts.append(Text("none: the first rule matched", style="dim"))
    if view.layers:
        parts.append(heading("Correction layers: consulted, or why not"))
        notes = Table.grid(padding=(0, 2))
        notes.add_column(style=_RULE_STYLE, no_wrap=True)
        notes.add_column(no_wrap=True)
        notes.add_column(overflow="fold")
        for line in view.layers:
            notes.add_row(printable(line.layer),
                          "consulted" if line.consulted else "not consulted",
                          printable(line.detail))  # fmt: skip
        parts.append(notes)
    return Group(*parts)


class DecisionPanel(VerticalScroll):
    """The decision of one attempt; the inputs its rule did not read are folded away."""

    def compose(self) -> ComposeResult:
        yield Static(id="decision-body")
        with Collapsible(title="all inputs", collapsed=True, id="decision-all-inputs"):
            yield Static(id="decision-other-inputs")

    def show(self, attempt: AttemptRecord) -> None:
        """Fill the panel from `attempt`."""
        view = decision_view(attempt)
        body = self.query_one("#decision-body", Static)
        folded = self.query_one("#decision-all-inputs", Collapsible)
        if view is None:
            body.update(Text("No decision recorded for this attempt (it was still in flight)."))
            folded.display = False
            return
        warnings = attempt_warnings(attempt)
        body.update(Group(*(Text(f"⚠ tool contract: {printable(w.message)}", style="bold yellow")
                            for w in warnings), decision_renderable(view)))  # fmt: skip
        folded.display = bool(view.other_inputs)
        folded.title = f"all inputs ({len(view.other_inputs)} more)"
        self.query_one("#decision-other-inputs", Static).update(_pairs(view.other_inputs))
