"""Command palette entries: each screen lists its commands, grouped as `"group: Action"`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from textual.command import DiscoveryHit, Hit, Hits, Provider
from textual.content import Content


@dataclass(frozen=True, slots=True)
class PaletteCommand:
    """One palette entry: `title` like `"view: Refresh"`, a help line and what it does."""

    title: str
    help: str
    run: Callable[[], object]


class ConsoleCommands(Provider):
    """Offers the `palette_commands()` of the screen the palette was opened on."""

    def _commands(self) -> list[PaletteCommand]:
        listed = getattr(self.screen, "palette_commands", None)
        return list(listed()) if callable(listed) else []

    async def discover(self) -> Hits:
        """Every command of the screen, before anything is typed."""
        for command in self._commands():
            yield DiscoveryHit(Content(command.title), command.run, text=command.title,
                               help=Content(command.help))  # fmt: skip

    async def search(self, query: str) -> Hits:
        """The commands whose title matches `query`, best first."""
        matcher = self.matcher(query)
        for command in self._commands():
            score = matcher.match(command.title)
            if score > 0:
                # Titles hold store text (a SQL history entry, a step id): as Content, not
                # markup, so `[/x]` in a query is shown and not parsed (MarkupError).
                shown = Content(command.title) if "[" in command.title else \
                    matcher.highlight(command.title)
                yield Hit(score, shown, command.run, text=command.title,
                          help=Content(command.help))  # fmt: skip
