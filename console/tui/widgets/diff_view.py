"""The Diff tab: what each correction changed between consecutive attempts of the step."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from console.printable import printable
from console.render.request_diff import request_diffs
from store.queries import StepRecord


def diff_renderable(step: StepRecord, selected_n: int | None) -> RenderableType:
    """Every consecutive pair of attempts; the pair into the selected attempt is marked `▶`."""
    diffs = request_diffs(step)
    if not diffs:
        return Text(f"{step.step_id} made one attempt or none: nothing to compare.", style="dim")
    parts: list[RenderableType] = []
    for diff in diffs:
        marker = "▶ " if selected_n == diff.after else "  "
        style = "bold" if diff.changes else "dim"
        parts.append(Text.assemble(marker, (f"#{diff.before} → #{diff.after}", style), "  ",
                                   (printable(diff.source_text), style)))  # fmt: skip
        if diff.changes:
            grid = Table.grid(padding=(0, 1))
            grid.add_column(no_wrap=True)
            grid.add_column(style="bold", no_wrap=True)
            for _ in range(3):
                grid.add_column(overflow="fold")
            for change in diff.changes:
                grid.add_row("   ", Text(printable(f"{change.key}:")),
                             Text(printable(change.old), style="red"), "→",
                             Text(printable(change.new), style="green"))  # fmt: skip
            parts.append(grid)
    return Group(*parts)
