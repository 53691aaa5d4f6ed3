"""The F1 / `?` help screen: the keys of the focused pane, its screen and the whole app."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import ClassVar

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.dom import DOMNode
from textual.keys import format_key
from textual.screen import ModalScreen
from textual.widgets import Static

from console.printable import printable
from console.tui.actions import SCOPE_TITLES, ConsoleAction, actions_of

_KEY_NAMES = {
    "question_mark": "?", "slash": "/", "escape": "esc", "backspace": "backspace",
    "enter": "enter", "tab": "tab", "shift+tab": "shift+tab",
    "right_square_bracket": "]", "left_square_bracket": "[",
}  # fmt: skip
# Below this many columns the CLI twin goes under what a key does, not in a column of its own.
NARROW_COLUMNS = 100


def key_text(keys: str) -> str:
    """`f1,question_mark` → `F1 / ?`, `colon` → `:`; `ctrl+r` stays `ctrl+r`. Keys read as
    typed: names not in `_KEY_NAMES` are Textual's `format_key`."""
    shown = []
    for key in keys.split(","):
        name = _KEY_NAMES.get(key) or format_key(key)
        shown.append(name.upper() if len(name) in (2, 3) and name[0] == "f" else name)
    return " / ".join(shown)


def chain_scopes(node: DOMNode | None) -> list[str]:
    """The action scopes from `node` up to the app, nearest first, each once."""
    scopes: list[str] = []
    while node is not None:
        # A subclass's scope first, then its bases' (ExecutionTable: its own, then the table's).
        for klass in type(node).__mro__:
            scope = vars(klass).get("ACTION_SCOPE")
            if isinstance(scope, str) and scope not in scopes:
                scopes.append(scope)
        node = node.parent
    if "app" not in scopes:
        scopes.append("app")
    return scopes


def help_renderable(
    title: str,
    scopes: Sequence[str],
    keymap: Mapping[str, str],
    twin: Callable[[str], str | None] | None = None,
    *,
    width: int | None = None,
) -> RenderableType:
    """One table per scope: key (as the keymap sets it), what it does, the CLI twin; narrower
    than NARROW_COLUMNS (`width`), the twin is a dim `CLI:` line under what the key does."""
    narrow = width is not None and width < NARROW_COLUMNS
    parts: list[RenderableType] = [Text(title, style="bold")]
    for scope in scopes:
        actions: tuple[ConsoleAction, ...] = actions_of(scope)
        if not actions:
            continue
        table = Table(
            title=SCOPE_TITLES.get(scope, scope),
            title_justify="left",
            title_style="bold underline",
            expand=True,
            box=None,
            padding=(0, 2),
        )
        table.add_column("key", style="bold cyan", no_wrap=True)
        table.add_column("what it does (CLI twin)" if narrow else "what it does", ratio=1)
        if not narrow:
            table.add_column("CLI twin", style="dim", ratio=1)
        for action in actions:
            keys = keymap.get(action.id, action.keys)
            cli = (twin(action.id) if twin else None) or action.cli or "-"
            does = f"{action.title}: {action.tooltip}"
            if not narrow:
                table.add_row(key_text(keys), Text(does), Text(printable(cli)))
            elif cli == "-":
                table.add_row(key_text(keys), Text(does))
            else:
                table.add_row(key_text(keys), Text.assemble(does, "\n", (f"CLI: {printable(cli)}",
                                                                            "dim")))  # fmt: skip
        parts += [Text(""), table]
    parts += [Text(""), Text("ctrl+p opens the command palette; esc, F1 or ? close this help.",
                             style="dim")]  # fmt: skip
    return Group(*parts)


class HelpScreen(ModalScreen[None]):
    """Keys of the focused pane, then of its screen, then everywhere; generated from ACTIONS."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,f1,question_mark,q", "close", "Close", id="close-help",
                key_display="esc", tooltip="Close the help"),
    ]  # fmt: skip

    def __init__(self, content: RenderableType) -> None:
        super().__init__()
        self.content = content

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help-box"):
            yield Static(self.content, id="help-body")

    def on_mount(self) -> None:
        self.query_one("#help-box").border_title = "Help"

    def action_close(self) -> None:
        """Close the help."""
        self.dismiss()
