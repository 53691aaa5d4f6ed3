"""The footer of every screen: Textual's Footer, redrawn only when the keys it shows change."""

from __future__ import annotations

from typing import Any

from textual.app import ComposeResult
from textual.screen import Screen
from textual.widgets import Footer
from textual.widgets._footer import FooterKey


class KeysFooter(Footer):
    """Textual's `Footer`, recomposed once per burst of binding updates and only on a change.

    Textual's footer recomposes after every bindings update of its screen (each focus move,
    each `refresh_bindings`), mounting every key widget again with its styles. Opening a large
    execution did that a dozen times, most with the same keys. Here the updates of one refresh
    are coalesced, and the keys are compared with those shown before recomposing. Each key is
    given the footer's `compact` before it mounts: its own default (True) made every new key
    restyle itself twice, once for the class its default adds and once when the binding took it
    away (the command palette's key is not bound to the footer's and keeps its default).
    """

    _recompose_pending = False
    _keys_shown: tuple[Any, ...] | None = None

    def bindings_changed(self, screen: Screen[Any]) -> None:
        self._bindings_ready = True
        if not screen.app.app_focus:
            return
        if self.is_attached and screen is self.screen and not self._recompose_pending:
            self._recompose_pending = True
            self.call_after_refresh(self._recompose_if_changed)

    def compose(self) -> ComposeResult:
        for widget in super().compose():
            if isinstance(widget, FooterKey) and not widget.has_class("-command-palette"):
                widget.set_reactive(FooterKey.compact, self.compact)
            yield widget

    async def _recompose_if_changed(self) -> None:
        self._recompose_pending = False
        if not self.is_attached:
            return
        keys = self._keys()
        if keys != self._keys_shown:
            self._keys_shown = keys
            await self.recompose()

    def _keys(self) -> tuple[Any, ...]:
        """What `compose` draws from: the shown bindings, enabled or not, and their tooltips."""
        palette_key = self.app.COMMAND_PALETTE_BINDING
        return tuple(
            (key, binding.action, binding.description, binding.group, enabled, tooltip,
             self.app.get_key_display(binding))
            for key, (_node, binding, enabled, tooltip) in self.screen.active_bindings.items()
            if binding.show or key == palette_key
        )  # fmt: skip
