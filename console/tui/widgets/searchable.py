"""Text panes ctrl+f can search: every match highlighted, the current one distinctly.

A searchable pane gives its text (`searchable_text`), says when that text changes
(`searchable_version`) and shows matches (`show_matches`); the search bar searches several
panes of a tab as one text (`SearchScope`), joined once and again only when a pane's version
changes. Highlights are kept line by line and applied only to the lines a pane paints, so a
5 MB body costs no more per frame than a short one.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from rich.console import RenderableType
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.geometry import Region
from textual.message import Message
from textual.widget import Widget
from textual.widgets import Collapsible, Static, TextArea
from textual.widgets.text_area import Selection

from console.render.text_search import Location, Match, RowSpan, SearchResult, rows_of, split_rows

MATCH_STYLE = Style(color="#000000", bgcolor="#ffd75f")
CURRENT_STYLE = Style(color="#000000", bgcolor="#ff5f00", bold=True, underline=True)


@runtime_checkable
class Searchable(Protocol):
    """A pane the search bar can search."""

    def searchable_text(self) -> str:
        """The text as the pane shows it, lines separated by newlines."""
        ...

    def searchable_version(self) -> Hashable:
        """A cheap value that stays equal as long as `searchable_text` would give the same text."""
        ...

    def show_matches(self, matches: list[Match], current: Match | None) -> None:
        """Highlight `matches` (rows counted in `searchable_text`) and bring `current` into
        view; no matches and no current clears the highlights."""
        ...


def stylize_line(line: Text, spans: list[RowSpan] | None, current: Match | None,
                 row: int) -> None:  # fmt: skip
    """Put the match style on `spans` of `line` (line `row`) and the current style on its part
    of `current`."""
    (start_row, start_column), (end_row, end_column) = current or ((-1, 0), (-1, 0))
    here = start_column if row == start_row else 0 if start_row < row <= end_row else None
    for start, end in spans or ():
        if start != here:  # the current match gets its own style below
            line.stylize(MATCH_STYLE, start, len(line.plain) if end is None else end)
    if current is not None and start_row <= row <= end_row:
        start = start_column if row == start_row else 0
        end = end_column if row == end_row else len(line.plain)
        line.stylize(CURRENT_STYLE, start, end)


class SearchableTextArea(TextArea):
    """A TextArea whose search matches are highlighted; the current one is also selected."""

    _search_rows: dict[int, list[RowSpan]] | None = None
    _search_current: Match | None = None
    _text_version = 0

    def searchable_text(self) -> str:
        """The whole text."""
        return self.text

    def searchable_version(self) -> int:
        """Counts the loads and edits of the text."""
        return self._text_version

    def _build_highlight_map(self) -> None:
        # Every load, edit, undo and redo of a TextArea rebuilds its highlights: the text changed.
        self._text_version += 1
        super()._build_highlight_map()

    def show_matches(self, matches: list[Match], current: Match | None) -> None:
        """Highlight `matches`; select `current` and scroll it to the middle."""
        shown = self._search_rows is not None or self._search_current is not None
        if not shown and not matches and current is None:
            return  # nothing to clear: no repaint (a 4 MB line takes ~0.1 s to paint)
        self._search_rows = rows_of(matches) if matches else None
        self._search_current = current
        self._line_cache.clear()
        if current is not None:
            self.selection = Selection(*current)
            self.scroll_cursor_visible(center=True, animate=False)
        self.refresh()

    def get_line(self, line_index: int) -> Text:
        """The line with its search highlights (the lines not painted are never styled)."""
        line = super().get_line(line_index)
        if self._search_rows is not None or self._search_current is not None:
            rows = self._search_rows or {}
            stylize_line(line, rows.get(line_index), self._search_current, line_index)
        return line

    def clear_search_highlights(self) -> None:
        """Drop the highlights (the text is being replaced)."""
        self._search_rows, self._search_current = None, None

    def load_text(self, text: str) -> None:
        """Show `text`; any highlights are dropped."""
        self.clear_search_highlights()
        super().load_text(text)


def _content_width(widget: Widget) -> int:
    """The width `widget` renders at; for a hidden one (a folded section), its first shown
    ancestor's."""
    for node in (widget, *widget.ancestors):
        if isinstance(node, Widget) and node.content_size.width:
            return node.content_size.width
    return 80


class SearchableStatic(Static):
    """A Static whose text can be searched: what it shows is rendered to lines at its width,
    and while there are matches those lines are shown with the matches highlighted.

    Resized to another width while highlighted, it posts `Rewrapped`: its lines wrap anew, so
    the search must run again over them.
    """

    @dataclass
    class Rewrapped(Message):
        """The static shows highlights rendered at another width than it now has."""

        static: SearchableStatic

    def __init__(self, content: RenderableType = "", **kwargs) -> None:
        super().__init__(content, **kwargs)
        self._source: RenderableType = content
        self._lines: list[Text] | None = None
        self._lines_width: int | None = None
        self._highlighted = False
        self._updates = 0

    def update(self, content: RenderableType = "", *, layout: bool = True) -> None:
        """Show `content`; any highlights are dropped."""
        self._source, self._lines, self._highlighted = content, None, False
        self._updates += 1
        super().update(content, layout=layout)

    def rendered_lines(self) -> list[Text]:
        """What the widget shows, as one Text per line at its current width."""
        console = self.app.console
        self._lines_width = _content_width(self)
        options = console.options.update_width(self._lines_width)
        lines = console.render_lines(self._source, options, pad=False, new_lines=False)
        return [_line_text(line) for line in lines]

    def on_resize(self) -> None:
        """Highlights drawn at the old width ask for the search again (a height change alone,
        such as showing them, does not)."""
        if self._highlighted and _content_width(self) != self._lines_width:
            self.post_message(self.Rewrapped(self))

    def searchable_text(self) -> str:
        """What the widget shows, as plain text."""
        self._lines = self.rendered_lines()
        return "\n".join(line.plain for line in self._lines)

    def searchable_version(self) -> tuple[int, int]:
        """The content shown and the width it is rendered at."""
        return self._updates, _content_width(self)

    def show_matches(self, matches: list[Match], current: Match | None) -> None:
        """Show the rendered lines with `matches` highlighted, or the content again."""
        was_highlighted = self._highlighted
        self._highlighted = bool(matches) or current is not None
        if not self._highlighted:
            if was_highlighted:
                super().update(self._source)
            return
        lines = self._lines if self._lines is not None else self.rendered_lines()
        rows = rows_of(matches)
        shown = []
        for row, line in enumerate(lines):
            line = line.copy()
            stylize_line(line, rows.get(row), current, row)
            shown.append(line)
        super().update(Text("\n", no_wrap=True, end="").join(shown))
        if current is not None:
            reveal_row(self, current[0][0])


def _line_text(segments: list[Segment]) -> Text:
    line = Text(no_wrap=True, end="")
    for segment in segments:
        if not segment.control:
            line.append(segment.text, segment.style)
    return line


def reveal_row(widget: Widget, row: int) -> None:
    """Unfold what hides `widget` and scroll its nearest scrolling ancestor to line `row`."""
    for node in widget.ancestors:
        if isinstance(node, Collapsible) and node.collapsed:
            node.collapsed = False
    widget.call_after_refresh(_scroll_to_row, widget, row)


def _scroll_to_row(widget: Widget, row: int) -> None:
    y = row + widget.styles.gutter.top
    node: Widget = widget
    while isinstance(node.parent, Widget):
        y += node.virtual_region.y
        parent = node.parent
        if parent.allow_vertical_scroll:
            parent.scroll_to_region(Region(0, y, 1, 1), animate=False, center=True,
                                    immediate=True)  # fmt: skip
            return
        node = parent


class SearchScope:
    """The panes of one tab searched as one text: their texts joined by newlines."""

    def __init__(self, panes: list[Searchable]) -> None:
        self.panes = panes
        self._row_starts: list[int] = []
        self._text: str | None = None
        self._versions: list[Hashable] | None = None

    def text(self) -> str:
        """The panes' texts joined (taken on the UI thread; searched in a worker); the same
        string again while no pane's version has changed."""
        versions = [pane.searchable_version() for pane in self.panes]
        if self._text is not None and versions == self._versions:
            return self._text
        texts = [pane.searchable_text() for pane in self.panes]
        self._row_starts, row = [], 0
        for text in texts:
            self._row_starts.append(row)
            row += text.count("\n") + 1
        self._text, self._versions = "\n".join(texts), versions
        return self._text

    def is_current(self, text: str) -> bool:
        """Whether `text` (one `text()` gave) is what the panes show now."""
        versions = [pane.searchable_version() for pane in self.panes]
        return text is self._text and versions == self._versions

    def forget_text(self) -> None:
        """Drop the joined text: the next `text()` reads the panes again."""
        self._text = self._versions = None

    def origin(self) -> Location:
        """Where the first match is looked for: a lone text area's cursor, else the top."""
        if len(self.panes) == 1 and isinstance(self.panes[0], TextArea):
            row, column = self.panes[0].selection.start
            return row, column - 1
        return 0, -1

    def show(self, result: SearchResult | None, current: int | None) -> None:
        """Highlight `result` in every pane, `current` in the pane that holds it."""
        if result is None or not self._row_starts:
            for pane in self.panes:
                pane.show_matches([], None)
            return
        for pane, pairs in zip(self.panes, split_rows(result.matches, self._row_starts),
                               strict=True):  # fmt: skip
            here = next((match for index, match in pairs if index == current), None)
            pane.show_matches([match for _, match in pairs], here)

    def focus_target(self) -> Widget | None:
        """The pane to give the focus back to: the first that can take it."""
        return next((p for p in self.panes if isinstance(p, Widget) and p.focusable), None)
