"""The footer of every screen: all its keys drawn by one widget, as Textual's Footer draws them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events
from textual.binding import Binding
from textual.geometry import Spacing
from textual.screen import Screen
from textual.strip import Strip
from textual.widget import Widget


@dataclass(frozen=True)
class FooterKeyShown:
    """One key the footer shows: what Textual's `FooterKey` widget held."""

    key: str
    key_display: str
    description: str
    action: str
    disabled: bool
    tooltip: str
    palette: bool = False


# The key the footer always draws (with the palette's) while the screen has it.
ALWAYS_SHOWN_ACTION = "help"


def _fitting(
    keys: list[tuple[FooterKeyShown, Text]], room: int
) -> list[tuple[FooterKeyShown, Text]]:
    """`keys` without the last ones but help until they fit in `room` cells."""
    kept = list(keys)
    while sum(len(drawn) for _, drawn in kept) > room:
        droppable = [i for i, (key, _) in enumerate(kept) if key.action != ALWAYS_SHOWN_ACTION]
        if not droppable:
            break
        del kept[droppable[-1]]
    return kept


class KeysFooter(Widget, can_focus=False):
    """Textual's `Footer` (not compact, no binding groups) drawn as one line by one widget.

    Textual's footer mounts one `FooterKey` widget per key (13 on the execution screen), each
    with its styles and layout, and mounts them all again after each change of the screen's
    bindings; opening a large execution spent ~75 ms of the main thread's CPU on them. Here
    the keys are one `Text` whose spans are the segments those widgets drew (the snapshots
    are the same bytes): each key's display padded by one cell either side, its description
    followed by one cell, the command palette's key at the right behind a `vkey` border and
    one cell of padding (the footer's own). Keys that do not fit are left out from the right,
    `? Help` last, so help and the palette stay visible. A click on a key presses it (a bell
    when it is disabled), a disabled key is dimmed, the key under the mouse is highlighted and
    its tooltip is the footer's. The keys are redrawn once per burst of binding updates, and only
    when they changed.
    """

    ALLOW_SELECT = False
    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "footer-key--key",
        "footer-key--description",
        "keys-footer--hover",
        "keys-footer--palette-border",
    }
    DEFAULT_CSS = """
    KeysFooter {
        color: $footer-foreground;
        background: $footer-background;
        dock: bottom;
        height: 1;
        padding: 0 1 0 0;
        text-wrap: nowrap;
        .footer-key--key {
            color: $footer-key-foreground;
            background: $footer-key-background;
            text-style: bold;
        }
        .footer-key--description {
            color: $footer-description-foreground;
            background: $footer-description-background;
        }
        .keys-footer--hover {
            color: $footer-key-foreground;
            background: $block-hover-background;
        }
        .keys-footer--palette-border {
            color: $foreground 20%;
            background: $footer-item-background;
        }
    }
    """

    show_command_palette = True
    _bindings_ready = False
    _redraw_pending = False
    _keys_shown: tuple[FooterKeyShown, ...] = ()
    _spans: tuple[tuple[int, int, FooterKeyShown], ...] = ()
    _hovered: FooterKeyShown | None = None
    _gap: tuple[int, int] | None = None

    def render_line(self, y: int) -> Strip:
        """The line rendered, its gap between the keys and the palette's key drawn as the
        footer's blank (a background alone, as Textual's Footer showed between its keys)."""
        strip = super().render_line(y)
        if self._gap is None:
            return strip
        start, end = self._gap
        before, gap, after = strip.divide([start, end, strip.cell_length])
        styles = [segment.style for segment in gap if segment.style is not None]
        if not styles:
            return strip
        blank = Strip([Segment(" " * (end - start), Style(bgcolor=styles[0].bgcolor))], end - start)
        return Strip.join([before, blank, after])

    @property
    def keys(self) -> tuple[FooterKeyShown, ...]:
        """The keys shown, in their order (the palette's last)."""
        return self._keys_shown

    def on_mount(self) -> None:
        self.screen.bindings_updated_signal.subscribe(self, self.bindings_changed)

    def on_unmount(self) -> None:
        self.screen.bindings_updated_signal.unsubscribe(self)

    def bindings_changed(self, screen: Screen[Any]) -> None:
        self._bindings_ready = True
        if not screen.app.app_focus:
            return
        if self.is_attached and screen is self.screen and not self._redraw_pending:
            self._redraw_pending = True
            self.call_after_refresh(self._redraw_if_changed)

    def _redraw_if_changed(self) -> None:
        self._redraw_pending = False
        if not self.is_attached:
            return
        keys = self._keys()
        if keys != self._keys_shown:
            self._keys_shown = keys
            # The palette's key is followed by its widget's padding: a cell of background alone
            # (the default, so the first keys drawn need no second layout pass).
            padding = Spacing(0, 1 if keys and keys[-1].palette else 0, 0, 0)
            if self.styles.padding != padding:
                self.styles.padding = padding
            self.refresh()

    def _keys(self) -> tuple[FooterKeyShown, ...]:
        """The keys Textual's `Footer.compose` would yield for the screen's bindings."""
        active = self.screen.active_bindings
        keys: list[FooterKeyShown] = []
        actions: set[str] = set()
        for _node, binding, enabled, tooltip in active.values():
            if binding.show and binding.action not in actions:
                actions.add(binding.action)
                keys.append(self._shown(binding, enabled, tooltip))
        if self.show_command_palette and self.app.ENABLE_COMMAND_PALETTE:
            found = active.get(self.app.COMMAND_PALETTE_BINDING)
            if found is not None:
                binding, enabled = found[1], found[2]
                keys.append(self._shown(binding, enabled, binding.tooltip or binding.description,
                                        palette=True))  # fmt: skip
        return tuple(keys)

    def _shown(self, binding: Binding, enabled: bool, tooltip: str,
               palette: bool = False) -> FooterKeyShown:  # fmt: skip
        return FooterKeyShown(binding.key, self.app.get_key_display(binding),
                              binding.description, binding.action, not enabled, tooltip,
                              palette)  # fmt: skip

    def render(self) -> Text:
        if not self._bindings_ready and not self._keys_shown:
            self._spans = ()
            return Text()
        width = self.content_size.width
        self._gap = None
        base = self.rich_style
        hover = self.get_component_rich_style("keys-footer--hover")
        bound = [(key, self._key_text(key, base, hover))
                 for key in self._keys_shown if not key.palette]  # fmt: skip
        palette = [key for key in self._keys_shown if key.palette]
        tail = Text()
        if palette:
            key = palette[0]
            border = self.get_component_rich_style("keys-footer--palette-border")
            item = self._item_style(key, base, hover)
            tail = Text.assemble(("▏", Style(color=border.color, bgcolor=item.bgcolor)))
            tail.append_text(self._key_text(key, base, hover))
        room = max(0, width - len(tail))
        bound = _fitting(bound, room)
        line = Text(no_wrap=True, end="")
        spans: list[tuple[int, int, FooterKeyShown]] = []
        for key, drawn in bound:
            start = len(line)
            line.append_text(drawn)
            spans.append((start, len(line), key))
        if palette:
            if len(line) > room:
                line = line[:room]
            elif len(line) < room:
                self._gap = (len(line), room)
                line.append(" " * (room - len(line)))
            start = len(line)
            line.append_text(tail)
            spans.append((start, len(line), palette[0]))
        self._spans = tuple(spans)
        return line

    def _item_style(self, key: FooterKeyShown, base: Style, hover: Style) -> Style:
        """The style of a key's own cells: FooterKey's, hovered or dimmed."""
        style = base
        if key is self._hovered:
            style += Style(color=hover.color, bgcolor=hover.bgcolor)
        return style + Style(dim=True) if key.disabled else style

    def _key_text(self, key: FooterKeyShown, base: Style, hover: Style) -> Text:
        """What `FooterKey.render` draws for `key`: not compact, but the palette's key."""
        item = self._item_style(key, base, hover)
        key_style = self.get_component_rich_style("footer-key--key")
        description_style = self.get_component_rich_style("footer-key--description")
        if key is self._hovered:
            key_style += Style(bgcolor=hover.bgcolor)
            description_style += Style(bgcolor=hover.bgcolor)
        if key.description and key.palette:  # its FooterKey kept its own compact default
            text = Text.assemble((key.key_display, key_style),
                                 (f" {key.description}", description_style))  # fmt: skip
        elif key.description:
            text = Text.assemble((f" {key.key_display} ", key_style),
                                 (f"{key.description} ", description_style))  # fmt: skip
        else:
            text = Text.assemble((key.key_display, key_style))
        text.stylize_before(item)
        return text

    def key_at(self, x: int) -> FooterKeyShown | None:
        """The key drawn at column `x` of the footer, if any."""
        for start, end, key in self._spans:
            if start <= x < end or (key.palette and x >= start):  # its padding is the footer's
                return key
        return None

    def on_mouse_down(self, event: events.MouseDown) -> None:
        key = self.key_at(event.x)
        if key is None:
            return
        if key.disabled:
            self.app.bell()
        else:
            self.app.simulate_key(key.key)

    def on_mouse_move(self, event: events.MouseMove) -> None:
        self._hover(self.key_at(event.x))

    def on_leave(self, _event: events.Leave) -> None:
        self._hover(None)

    def _hover(self, key: FooterKeyShown | None) -> None:
        if key is self._hovered:
            return
        self._hovered = key
        self.tooltip = key.tooltip or None if key is not None else None
        self.refresh()
