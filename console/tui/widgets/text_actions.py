"""Reading what is focused outside the console: `$PAGER`, `$EDITOR` (a read-only copy), copy."""

from __future__ import annotations

import io
import os
import shlex
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from textual.app import App, SuspendNotSupported
from textual.widget import Widget
from textual.widgets import Collapsible, ContentSwitcher, Static, TextArea

from console.tui.widgets.searchable import Searchable, SearchScope

DEFAULT_PAGER = "less -R"
DEFAULT_EDITOR = "vi"
_EXPORT_WIDTH = 160


@dataclass(frozen=True, slots=True)
class FocusedText:
    """The text a key acts on: `title` names it (`response body`), `selected` the selection."""

    title: str
    text: str
    selected: str = ""


def plain_text(widget: Widget) -> str:
    """What a Static (or a widget with `lines()`) shows, as plain text."""
    lines = getattr(widget, "lines", None)
    if callable(lines):
        return "\n".join(lines(max(widget.size.width, 80))) + "\n"
    if isinstance(widget, Static):
        console = Console(width=_EXPORT_WIDTH, file=io.StringIO(), record=True,
                          color_system=None)  # fmt: skip
        console.print(widget.content)
        return console.export_text()
    return ""


def text_area_text(area: TextArea, title: str) -> FocusedText:
    """A TextArea's whole text and its selection."""
    return FocusedText(title, area.text, area.selected_text)


def _command(variable: str, default: str) -> list[str]:
    return shlex.split(os.environ.get(variable) or default)


def _write_copy(text: str, title: str, *, read_only: bool) -> Path:
    stem = "".join(c if c.isalnum() else "-" for c in title).strip("-") or "text"
    handle, name = tempfile.mkstemp(prefix=f"truva-{stem}-", suffix=".txt")
    with os.fdopen(handle, "w", encoding="utf-8") as out:
        out.write(text)
    path = Path(name)
    if read_only:
        path.chmod(0o444)
    return path


def _run_suspended(app: App, argv: list[str]) -> int:
    """Run `argv` with the terminal handed over; without a terminal to hand over, detached."""
    try:
        with app.suspend():
            return subprocess.run(argv, check=False).returncode
    except SuspendNotSupported:
        return subprocess.run(argv, check=False, stdin=subprocess.DEVNULL).returncode


def open_externally(app: App, focused: FocusedText, *, editor: bool) -> str:
    """Show `focused` in `$PAGER` (default `less -R`) or `$EDITOR`; returns one line for a notice.

    The editor gets a read-only copy in a temporary file, which is kept so the text can be
    saved elsewhere; the pager's copy is deleted afterwards.
    """
    variable, default = ("EDITOR", DEFAULT_EDITOR) if editor else ("PAGER", DEFAULT_PAGER)
    argv = _command(variable, default)
    if editor and os.environ.get("VISUAL"):
        argv = _command("VISUAL", DEFAULT_EDITOR)
    path = _write_copy(focused.text, focused.title, read_only=editor)
    try:
        code = _run_suspended(app, [*argv, str(path)])
    except OSError as error:
        return f"cannot run ${variable} ({shlex.join(argv)}): {error.strerror or error}"
    finally:
        if not editor:
            path.unlink(missing_ok=True)
    where = f" (read-only copy {path})" if editor else ""
    status = "" if code == 0 else f", exit {code}"
    return f"{focused.title} in {shlex.join(argv)}{where}{status}"


# tab id -> (what it is called, the widgets whose text it shows, in order)
_TAB_TEXT: dict[str, tuple[str, tuple[str, ...]]] = {
    "tab-decision": ("decision", ("#decision-body", "#decision-other-inputs")),
    "tab-request": ("request", ("#request-head", "#request-body")),
    "tab-response": ("response", ("#response-head", "#response-body")),
    "tab-llm": ("LLM calls", ("#llm-text",)),
    "tab-events": ("backoff and events", ("#events-body",)),
    "tab-timeline": ("timeline", ("#timeline-body",)),
    "tab-diff": ("request diff", ("#diff-body",)),
}
_AREA_TITLES = {
    "request-body": "request body",
    "response-body": "response body",
    "llm-text": "LLM prompts and answers",
}


def detail_focused_text(detail: Widget, active_tab: str, focused: Widget | None) -> FocusedText:
    """The focused text pane of the attempt detail, else everything the active tab shows."""
    if isinstance(focused, TextArea) and focused.id in _AREA_TITLES:
        return text_area_text(focused, _AREA_TITLES[focused.id])
    title, selectors = _TAB_TEXT.get(active_tab, ("text", ()))
    parts = []
    for selector in selectors:
        widget = detail.query_one(selector)
        text = widget.text if isinstance(widget, TextArea) else plain_text(widget)
        folded = next((a for a in widget.ancestors if isinstance(a, Collapsible)), None)
        if folded is not None and text.strip():  # its heading says what it is ("all inputs")
            if not folded.display:
                continue
            text = f"{folded.title}\n{text}"
        parts.append(text)
    return FocusedText(title, "\n".join(part.rstrip("\n") for part in parts if part) + "\n")


def search_target(detail: Widget, active_tab: str, focused: Widget | None) -> SearchScope | None:
    """What ctrl+f searches: the focused body or LLM text, else every text pane of the active
    tab (heads, bodies, the decision with its folded inputs, events, timeline, diff)."""
    if isinstance(focused, TextArea) and focused.id in _AREA_TITLES:
        return SearchScope([focused])
    if detail.query_one("#detail-switcher", ContentSwitcher).current != "detail-tabs":
        return None  # a note (a skipped step): no tab is shown
    _, selectors = _TAB_TEXT.get(active_tab, ("text", ()))
    panes = [detail.query_one(selector) for selector in selectors]
    searchable = [pane for pane in panes if isinstance(pane, Searchable)]
    return SearchScope(searchable) if searchable else None
