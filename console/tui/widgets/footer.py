"""The footer of every screen: Textual's Footer, redrawn only when the keys it shows change."""

from __future__ import annotations

from typing import Any

from textual.app import ComposeResult
from textual.binding import Binding
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
    When keys only appear, go or change whether they are enabled (Open and Replay appearing
    once an execution is read), just those keys are mounted, removed or dimmed: the others
    stay mounted, where a recompose would mount every key again.
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
        if keys == self._keys_shown:
            return
        shown, self._keys_shown = self._keys_shown, keys
        if shown is None or not await self._update_keys():
            await self.recompose()

    async def _update_keys(self) -> bool:
        """Bring the key widgets to the screen's bindings by mounting, removing and dimming
        only the keys that changed, as `compose` would draw them; False, having changed
        nothing, when that takes a recompose (binding groups, or a key's text changed)."""
        wanted: dict[str, tuple[Binding, bool, str]] = {}
        for _node, binding, enabled, tooltip in self.screen.active_bindings.values():
            if binding.show:
                if binding.group is not None:
                    return False
                wanted.setdefault(binding.action, (binding, enabled, tooltip))
        keys = [child for child in self.children if isinstance(child, FooterKey)]
        palette = [key for key in keys if key.has_class("-command-palette")]
        shown = [key for key in keys if not key.has_class("-command-palette")]
        palette_wanted = (self.show_command_palette and self.app.ENABLE_COMMAND_PALETTE
                          and self.app.COMMAND_PALETTE_BINDING in self.screen.active_bindings)
        if len(keys) != len(self.children) or len(palette) != int(palette_wanted):
            return False
        by_action = {key.action: key for key in shown}
        for action, key in by_action.items():
            if action in wanted and _drawn_as(key) != self._drawn(*wanted[action]):
                return False
        kept = [action for action in wanted if action in by_action]
        if kept != [key.action for key in shown if key.action in wanted]:
            return False
        if palette and not self._palette_drawn_as(palette[0]):
            return False
        for key in shown:
            if key.action in wanted:
                _set_enabled(key, wanted[key.action][1])
        if palette:
            _set_enabled(palette[0], self.screen.active_bindings[palette[0].key][2])
        gone = [key for key in shown if key.action not in wanted]
        if gone:
            await self.remove_children(gone)
        added: list[FooterKey] = []
        for action, (binding, enabled, tooltip) in wanted.items():
            if action not in by_action:
                added.append(self._new_key(binding, enabled, tooltip))
            elif added:
                await self.mount(*added, before=by_action[action])
                added = []
        if added:
            await self.mount(*added, before=palette[0] if palette else None)
        self.styles.grid_size_columns = len(wanted)
        return True

    def _drawn(self, binding: Binding, _enabled: bool, tooltip: str) -> tuple[Any, ...]:
        """What a key widget for `binding` shows, but for whether it is enabled."""
        return (binding.key, self.app.get_key_display(binding), binding.description,
                tooltip or None)  # fmt: skip

    def _palette_drawn_as(self, key: FooterKey) -> bool:
        """Whether the palette's key widget still shows the palette's binding."""
        palette_key = self.app.COMMAND_PALETTE_BINDING
        found = self.screen.active_bindings.get(palette_key)
        if found is None or key.key != palette_key:
            return False
        binding = found[1]
        drawn = (palette_key, self.app.get_key_display(binding), binding.description,
                 binding.tooltip or binding.description or None)  # fmt: skip
        return _drawn_as(key) == drawn

    def _new_key(self, binding: Binding, enabled: bool, tooltip: str) -> FooterKey:
        """The key widget `compose` yields for an ungrouped binding."""
        key = FooterKey(binding.key, self.app.get_key_display(binding), binding.description,
                        binding.action, disabled=not enabled, tooltip=tooltip)  # fmt: skip
        key.set_reactive(FooterKey.compact, self.compact)
        return key.data_bind(compact=Footer.compact)

    def _keys(self) -> tuple[Any, ...]:
        """What `compose` draws from: the shown bindings, enabled or not, and their tooltips."""
        palette_key = self.app.COMMAND_PALETTE_BINDING
        return tuple(
            (key, binding.action, binding.description, binding.group, enabled, tooltip,
             self.app.get_key_display(binding))
            for key, (_node, binding, enabled, tooltip) in self.screen.active_bindings.items()
            if binding.show or key == palette_key
        )  # fmt: skip


def _drawn_as(key: FooterKey) -> tuple[Any, ...]:
    """What a key widget shows, but for whether it is enabled."""
    return (key.key, key.key_display, key.description, key.tooltip)


def _set_enabled(key: FooterKey, enabled: bool) -> None:
    """Dim a key widget (its class `-disabled`) when its binding is disabled, as compose does."""
    if key._disabled == enabled:
        key._disabled = not enabled
        key.set_class(not enabled, "-disabled")
