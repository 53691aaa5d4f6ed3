"""A read-only TextArea for texts of megabytes: a prompt, a body.

Textual's TextArea (8.2), for each painted line, asks its wrapped document for its height (a
sum over every line of the text) and its document for the whole text (a join of every line, to
check for a placeholder), and every load, resize or tab switch re-wraps every line through a
regex: a frame of a 40-line pane over a 5 MB prompt (42,000 lines) summed 1.7 million numbers
and joined 5 MB 40 times. Here the height is the length of the offsets list the wrap already
builds (one entry per wrapped line), the joined text is kept until an edit, and a wrap at
width 0 (no soft wrap) skips the per-line work for lines without a tab. Soft wrapping is kept
for texts up to SOFT_WRAP_LIMIT_CHARS; longer ones are shown unwrapped, their lines cut at
LONG_LINE_CHARS for display (the text is read-only here; copying it carries those breaks).
"""

from __future__ import annotations

from collections.abc import Callable

from textual import work
from textual.document._document import Document, EditResult, Location
from textual.document._document_navigator import DocumentNavigator
from textual.document._wrapped_document import WrappedDocument
from textual.expand_tabs import get_tab_widths
from textual.widgets import TextArea

from console.tui.widgets.read_only import ReadOnlyTextArea
from console.tui.widgets.searchable import SearchableTextArea

SOFT_WRAP_LIMIT_CHARS = 200_000
LONG_LINE_CHARS = 2_000
# Texts longer than this are prepared (built, lines cut, split, wrapped) in a thread, so that
# loading a prompt of megabytes leaves the console drawing frames meanwhile.
BACKGROUND_LOAD_CHARS = SOFT_WRAP_LIMIT_CHARS


class CountedWrappedDocument(WrappedDocument):
    """A WrappedDocument whose height is O(1) and whose width-0 wrap is a few list builds,
    done once per text (the constructor wraps at width 0, and so does the text area after)."""

    _unwrapped_for: tuple[int, int, int] | None = None

    @property
    def height(self) -> int:
        return len(self._offset_to_line_info)

    def wrap(self, width: int, tab_width: int | None = None) -> None:
        if width:
            self._unwrapped_for = None
            super().wrap(width, tab_width)
            return
        self._width = 0
        if tab_width:
            self._tab_width = tab_width
        lines = self.document.lines
        done_for = (id(lines), len(lines), self._tab_width)
        if self._unwrapped_for == done_for:
            return
        self._unwrapped_for = done_for
        size = self._tab_width
        self._tab_width_cache = [
            [w for _, w in get_tab_widths(line, size)] if "\t" in line else [0] if line else []
            for line in lines
        ]
        self._wrap_offsets = [[] for _ in lines]
        self._offset_to_line_info = [(index, 0) for index in range(len(lines))]
        self._line_index_to_offsets = [[index] for index in range(len(lines))]

    def wrap_range(self, start: Location, old_end: Location, new_end: Location) -> None:
        self._unwrapped_for = None
        super().wrap_range(start, old_end, new_end)


class JoinedOnceDocument(Document):
    """A Document that joins its lines into `text` once, and again only after an edit."""

    @property
    def text(self) -> str:
        joined = self.__dict__.get("_joined")
        if joined is None:
            joined = self.__dict__["_joined"] = super().text
        return joined

    def replace_range(self, start: Location, end: Location, text: str) -> EditResult:
        self.__dict__.pop("_joined", None)
        return super().replace_range(start, end, text)


class LongTextArea(SearchableTextArea, ReadOnlyTextArea):
    """A TextArea whose frames cost the same for a 5 MB text as for a 5 KB one (and which, while
    read-only, offers no editing keys; ctrl+f highlights its matches)."""

    def on_mount(self) -> None:
        # A text loaded before the area was mounted (a detail tab built and filled at once)
        # gets what Textual computes when the cursor moves, once mounted: its bracket match.
        self.call_after_refresh(lambda: self._watch_selection(self.selection, self.selection))

    def _set_document(self, text: str, language: str | None) -> None:
        if language:  # syntax-aware: Textual's own documents, only the height made O(1)
            super()._set_document(text, language)
            self.wrapped_document.__class__ = CountedWrappedDocument
            return
        # Textual's plain-text branch, with the documents above.
        self._highlight_query = None
        self.document = JoinedOnceDocument(text)
        self.wrapped_document = CountedWrappedDocument(self.document, tab_width=self.indent_width)
        self.navigator = DocumentNavigator(self.wrapped_document)
        self._build_highlight_map()
        self.move_cursor((0, 0))
        self._rewrap_and_refresh_virtual_size()

    _loads = 0  # numbers the loads: a text prepared in a thread is shown only if still wanted

    def load_long_text(self, text: str) -> None:
        """Load `text`, soft-wrapped when short; a long text's long lines are cut for display."""
        self.load_long_text_from(lambda: text, len(text))

    def load_long_text_from(self, build: Callable[[], str], size: int) -> None:
        """Load the text `build()` returns; `size` (its expected length) above
        BACKGROUND_LOAD_CHARS builds and prepares it in a thread, showing a note until then."""
        self._loads += 1
        if size <= BACKGROUND_LOAD_CHARS:
            text = build()
            long = len(text) > SOFT_WRAP_LIMIT_CHARS
            if long:
                text = fold_long_lines(text, LONG_LINE_CHARS)
            self.set_reactive(TextArea.soft_wrap, not long)  # load_text wraps for it, once
            self.load_text(text)
            return
        self.set_reactive(TextArea.soft_wrap, True)
        self.load_text(f"Loading {size:,} characters…")
        self._prepare(build, self._loads)

    @work(thread=True, exit_on_error=False, group="long-text")
    def _prepare(self, build: Callable[[], str], load: int) -> None:
        text = build()
        long = len(text) > SOFT_WRAP_LIMIT_CHARS
        folded = fold_long_lines(text, LONG_LINE_CHARS) if long else text
        document = JoinedOnceDocument(folded)
        wrapped = CountedWrappedDocument(document, tab_width=self.indent_width)
        self.app.call_from_thread(self._install, load, document, wrapped, not long)

    def _install(
        self, load: int, document: Document, wrapped: CountedWrappedDocument, soft_wrap: bool
    ) -> None:
        """Show a text `_prepare` made, as `load_text` would have (unless superseded)."""
        if load != self._loads or not self.is_attached:
            return
        self.history.clear()
        self.clear_search_highlights()
        self.set_reactive(TextArea.soft_wrap, soft_wrap)
        self._highlight_query = None
        self.document = document
        self.wrapped_document = wrapped
        self.navigator = DocumentNavigator(wrapped)
        self._build_highlight_map()
        self.move_cursor((0, 0))
        self._rewrap_and_refresh_virtual_size()
        self.post_message(self.Changed(self).set_sender(self))
        self.update_suggestion()


def fold_long_lines(text: str, width: int) -> str:
    """`text` with every line longer than `width` broken into lines of `width` characters."""
    lines = text.split("\n")
    if all(len(line) <= width for line in lines):
        return text
    out: list[str] = []
    for line in lines:
        out.extend([line[i : i + width] for i in range(0, len(line), width)] or [""])
    return "\n".join(out)
