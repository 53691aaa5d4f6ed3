"""Command palette entries: each screen lists its commands, grouped as `"group: Action"`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from textual.command import DiscoveryHit, Hit, Hits, Provider


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
            yield DiscoveryHit(command.title, command.run, help=command.help)

    async def search(self, query: str) -> Hits:
        """The commands whose title matches `query`, best first."""
        matcher = self.matcher(query)
        for command in self._commands():
            score = matcher.match(command.title)
            if score > 0:
                yield Hit(score, matcher.highlight(command.title), command.run,
                          text=command.title, help=command.help)  # fmt: skip
