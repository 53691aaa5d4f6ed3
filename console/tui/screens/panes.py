"""Panes of a screen: `h`/`l` move between them, a zoom key maximises one, help names them.

`PaneScreen` is a mixin for screens that list their panes (`PANES`: widget ids with the
titles shown on their focus ring); it also turns the action registry of the screen's scope
into palette commands.
"""

from __future__ import annotations

from typing import Any, ClassVar

from textual.actions import parse
from textual.widget import Widget

from console.tui.actions import ConsoleAction, actions_of, run_action
from console.tui.screens.palette import PaletteCommand


class PaneScreen:
    """Mixin for a Textual `Screen` with panes, an action scope and registry palette commands."""

    ACTION_SCOPE: ClassVar[str]
    PANES: ClassVar[tuple[tuple[str, str], ...]] = ()
    # Actions offered in the palette only while `check_action` allows them.
    PALETTE_IF_ENABLED: ClassVar[frozenset[str]] = frozenset()

    # Provided by textual's Screen, which the concrete class also derives from.
    focused: Widget | None
    focus_chain: list[Widget]
    maximized: Widget | None
    query_one: Any
    maximize: Any
    minimize: Any
    check_action: Any
    dismiss: Any

    def label_panes(self) -> None:
        """Put each pane's title on its border (the focus ring)."""
        for pane_id, title in self.PANES:
            self.query_one(f"#{pane_id}").border_title = title

    def focused_pane(self) -> Widget | None:
        """The pane that holds the focus, if any."""
        ids = {pane_id for pane_id, _ in self.PANES}
        node = self.focused
        while isinstance(node, Widget):
            if node.id in ids:
                return node
            node = node.parent
        return None

    def pane_title(self) -> str | None:
        """The title of the focused pane."""
        pane = self.focused_pane()
        return None if pane is None else dict(self.PANES).get(pane.id or "")

    def _first_focusable(self, pane: Widget) -> Widget | None:
        return next((w for w in self.focus_chain if w is pane or pane in w.ancestors), None)

    def action_focus_pane(self, step: int) -> None:
        """Move the focus `step` panes on (1: next, -1: previous), skipping empty ones."""
        panes = [self.query_one(f"#{pane_id}") for pane_id, _ in self.PANES]
        current = self.focused_pane()
        start = panes.index(current) if current in panes else (-1 if step > 0 else 0)
        for offset in range(1, len(panes) + 1):
            target = self._first_focusable(panes[(start + step * offset) % len(panes)])
            if target is not None:
                target.focus()
                return

    def action_zoom_pane(self) -> None:
        """Maximise the focused pane, or restore the zoomed one."""
        if self.maximized is not None:
            self.minimize()
            return
        pane = self.focused_pane()
        if pane is not None:
            self.maximize(pane, container=False)

    def action_back(self) -> None:
        """Restore a zoomed pane; else stop the screen's running work; else close the screen."""
        if self.maximized is not None:
            self.minimize()
            return
        if self.cancel_running():
            return
        self.dismiss()

    def cancel_running(self) -> bool:
        """Stop the work the screen runs, if any (it then reports); whether there was some."""
        return False

    def action_twin(self, action_id: str) -> str | None:
        """The CLI command an action stands for here, when the screen knows it exactly."""
        return None

    def registry_commands(self) -> list[PaletteCommand]:
        """The palette commands of this screen's scope in the action registry."""
        commands = []
        for action in actions_of(self.ACTION_SCOPE):
            if action.palette is None or not self._offered(action):
                continue
            twin = self.action_twin(action.id)
            help_line = action.tooltip + (f" · CLI: {twin}" if twin else "")
            commands.append(PaletteCommand(f"{action.group}: {action.palette}", help_line,
                                           run_action(self, action)))  # fmt: skip
        return commands

    def _offered(self, action: ConsoleAction) -> bool:
        if action.id not in self.PALETTE_IF_ENABLED:
            return True
        name, arguments = parse(action.action)[1:]
        return bool(self.check_action(name, arguments))
