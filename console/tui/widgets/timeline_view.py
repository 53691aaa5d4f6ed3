"""The Timeline tab: the selected step's waterfall, then the execution's, redrawn to the width.

The rows of the attempt selected in the attempts table start with `▶` and are shown reversed;
ctrl+f highlights matches in the lines as drawn.
"""

from __future__ import annotations

from rich.style import Style
from rich.text import Text
from textual.widget import Widget

from console.printable import printable
from console.render.text_search import Match, rows_of
from console.render.timeline import SELECTED, step_in_execution_timeline
from console.tui.widgets.searchable import reveal_row, stylize_line
from store.queries import ExecutionDetail, StepRecord

SELECTED_STYLE = Style(reverse=True, bold=True)


class TimelineView(Widget):
    """Attempts, LLM calls and waits of one step and of its execution on one time axis each."""

    DEFAULT_CSS = """
    TimelineView { height: auto; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._step: StepRecord | None = None
        self._detail: ExecutionDetail | None = None
        self.selected_n: int | None = None
        self._matches: list[Match] = []
        self._current: Match | None = None
        self._shows = 0

    def show(self, step: StepRecord, detail: ExecutionDetail, *,
             selected_n: int | None = None) -> None:  # fmt: skip
        """Draw `step` and `detail`, with attempt `selected_n` of the step marked."""
        self._step, self._detail, self.selected_n = step, detail, selected_n
        self._matches, self._current = [], None
        self._shows += 1
        self.refresh(layout=True)

    def lines(self, width: int) -> list[str]:
        """What the tab shows at `width` columns."""
        if self._step is None or self._detail is None:
            return ["No step selected."]
        return step_in_execution_timeline(self._step, self._detail, width=width,
                                          selected_n=self.selected_n)  # fmt: skip

    def _width(self) -> int:
        return max(self.size.width, 40)

    def get_content_height(self, container, viewport, width: int) -> int:
        return len(self.lines(width))

    def searchable_text(self) -> str:
        """The lines as drawn at the current width."""
        return printable("\n".join(self.lines(self._width())))

    def searchable_version(self) -> tuple[int, int]:
        """What is drawn and the width it is drawn at."""
        return self._shows, self._width()

    def show_matches(self, matches: list[Match], current: Match | None) -> None:
        """Highlight `matches` in the drawn lines; scroll `current` into view."""
        self._matches, self._current = matches, current
        self.refresh()
        if current is not None:
            reveal_row(self, current[0][0])

    def render(self) -> Text:
        rows = rows_of(self._matches) if self._matches else {}
        shown = []
        for row, plain in enumerate(printable("\n".join(self.lines(self._width()))).split("\n")):
            line = Text(plain, no_wrap=True, end="")
            if plain.startswith(SELECTED):
                line.stylize(SELECTED_STYLE)
            stylize_line(line, rows.get(row), self._current, row)
            shown.append(line)
        return Text("\n", no_wrap=True, end="").join(shown)
