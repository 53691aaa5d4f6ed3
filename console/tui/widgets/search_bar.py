"""ctrl+f in a text pane: find in a worker thread, highlight every match, jump between them.

Each change of the query or of the text starts a search with a new request number; the search
of an older one stops at its next piece of text (`search_text`'s `stop`), and an answer is
shown only if it is for the latest request and for the text the panes still show.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.containers import Horizontal
from textual.message import Message
from textual.widget import Widget
from textual.widgets import Input, Static
from textual.worker import get_current_worker

from console.render.text_search import SearchResult, SearchStopped, next_match, search_text
from console.tui.actions import bindings
from console.tui.widgets.searchable import SearchScope


class SearchBar(Horizontal):
    """A one-line search of the panes of a `SearchScope`; the text is searched off the UI thread,
    every match is highlighted and the current one (`3/17 matches`) is shown distinctly."""

    DEFAULT_CSS = """
    SearchBar { height: 1; display: none; }
    SearchBar.-open { display: block; }
    SearchBar Input, SearchBar Input:focus { width: 1fr; height: 1; border: none; padding: 0 1; }
    SearchBar #search-status { width: auto; min-width: 16; padding: 0 1; }
    """

    ACTION_SCOPE = "search"
    BINDINGS: ClassVar[list[BindingType]] = bindings("search")

    @dataclass
    class SearchFinished(Message):
        """A search came back from the worker; `request` says which one, `text` what it
        searched (the very string `SearchScope.text` gave)."""

        request: int
        text: str = field(repr=False)
        result: SearchResult

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.target: SearchScope | None = None
        self.result: SearchResult | None = None
        self.current: int | None = None
        self._return_focus: Widget | None = None
        self._request = 0
        self._keep: int | None = None  # the match to select when the search comes back

    def compose(self) -> ComposeResult:
        yield Input(placeholder="search (Enter/↓ next, Shift+Enter/↑ previous, Esc closes)",
                    id="search-input")  # fmt: skip
        yield Static(id="search-status")

    def open(self, target: SearchScope) -> None:
        """Search `target`; an earlier query is searched again in the new text."""
        if self.target is not None and self.target is not target:
            self.target.show(None, None)
        focused = self.screen.focused
        if focused is not None and self not in focused.ancestors_with_self:
            self._return_focus = focused
        self.target = target
        self.add_class("-open")
        search_input = self.query_one(Input)
        search_input.focus()
        self._start(search_input.value)

    def text_changed(self) -> None:
        """The searched panes show new text (another attempt): search it again, if open."""
        if self.target is None:
            return
        self.target.forget_text()
        if self.has_class("-open"):
            self._start(self.query_one(Input).value)

    def text_rewrapped(self) -> None:
        """A searched pane wraps its text anew (it was resized): search it again, if open,
        keeping the current match's number."""
        if self.target is None:
            return
        self.target.forget_text()
        if self.has_class("-open"):
            keep = self.current if self.current is not None else self._keep
            self._start(self.query_one(Input).value, keep=keep)

    def action_close(self) -> None:
        """Hide the bar and give the focus back to the text, with the match still selected."""
        self.remove_class("-open")
        self._request += 1
        if self.target is None:
            return
        focus = self.target.focus_target() or self._return_focus
        self.target.show(None, None)  # a text area keeps its current match selected
        if focus is not None:
            focus.focus()

    @on(Input.Changed, "#search-input")
    def _query_changed(self, event: Input.Changed) -> None:
        event.stop()
        self._start(event.value)

    @on(Input.Submitted, "#search-input")
    def _submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.action_jump(False)

    def _start(self, query: str, *, keep: int | None = None) -> None:
        self._request += 1
        self.result, self.current, self._keep = None, None, keep
        if self.target is None:
            return
        self.target.show(None, None)
        if not query:
            self.query_one("#search-status", Static).update("")
            return
        self.query_one("#search-status", Static).update("searching…")
        self._search(self._request, self.target.text(), query)

    # A description of its own: Textual's default is the repr of every argument, the whole text.
    @work(thread=True, exclusive=True, exit_on_error=False, group="text-search",
          description="search the text panes")  # fmt: skip
    def _search(self, request: int, text: str, query: str) -> None:
        worker = get_current_worker()

        def overtaken() -> bool:
            return worker.is_cancelled or request != self._request

        try:
            result = search_text(text, query, stop=overtaken)
        except SearchStopped:
            return  # a newer query or text is being searched
        self.post_message(self.SearchFinished(request, text, result))

    @on(SearchFinished)
    def _search_finished(self, message: SearchFinished) -> None:
        if message.request != self._request or self.target is None:
            return  # an older query's, or the bar was closed
        if not self.target.is_current(message.text):
            # The panes changed under the search (and no one said so): search what they show.
            self._start(message.result.query, keep=self._keep)
            return
        self.result = message.result
        if self._keep is not None and self._keep < len(message.result.matches):
            self._select(self._keep)
        else:
            self._select(next_match(message.result, self.target.origin()))

    def action_jump(self, backwards: bool) -> None:
        """Show the next (or previous) match, wrapping around."""
        if self.result is None or self.target is None or not self.result.matches:
            return
        total = len(self.result.matches)
        if self.current is None:
            index = next_match(self.result, self.target.origin(), backwards=backwards)
        else:
            index = (self.current + (-1 if backwards else 1)) % total
        self._select(index)

    def _select(self, index: int | None) -> None:
        assert self.result is not None and self.target is not None
        self.current = index
        self.target.show(self.result, index)
        # `no match for '[x'`: the user's query, not markup.
        self.query_one("#search-status", Static).update(Text(self.result.summary(index)))
