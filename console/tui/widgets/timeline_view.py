"""The Timeline tab: the selected step's waterfall, then the execution's, redrawn to the width."""

from __future__ import annotations

from rich.text import Text
from textual.widget import Widget

from console.printable import printable
from console.render.timeline import LEGEND, execution_timeline, step_timeline
from store.queries import ExecutionDetail, StepRecord


class TimelineView(Widget):
    """Attempts, LLM calls and waits of one step and of its execution on one time axis each."""

    DEFAULT_CSS = """
    TimelineView { height: auto; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._step: StepRecord | None = None
        self._detail: ExecutionDetail | None = None

    def show(self, step: StepRecord, detail: ExecutionDetail) -> None:
        """Draw `step` and `detail`."""
        self._step, self._detail = step, detail
        self.refresh(layout=True)

    def lines(self, width: int) -> list[str]:
        """What the tab shows at `width` columns."""
        if self._step is None or self._detail is None:
            return ["No step selected."]
        return [
            f"Step {self._step.step_id}", *step_timeline(self._step, width=width), "",
            "Execution", *execution_timeline(self._detail, width=width), "", LEGEND,
        ]  # fmt: skip

    def get_content_height(self, container, viewport, width: int) -> int:
        return len(self.lines(width))

    def render(self) -> Text:
        return Text(printable("\n".join(self.lines(max(self.size.width, 40)))), no_wrap=True)
