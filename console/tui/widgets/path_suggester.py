"""Completion of file paths in an Input, as a shell would: `→` accepts the suggested rest."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from textual.suggester import Suggester

# Entries read from one directory at most, so a huge directory cannot stall a suggestion.
_MAX_ENTRIES = 5000


def complete_path(value: str, *, suffix: str = "") -> str | None:
    """`value` with its last path component completed from the file system, or None.

    Directories complete with a trailing `/`; files only when their name ends with `suffix`.
    Of several matches the directories come first, then by name. `~` is expanded to look,
    and kept in what is returned.
    """
    if not value:
        return None
    head, _, prefix = value.rpartition("/")
    base = head + "/" if head or value.startswith("/") else ""
    directory = Path(os.path.expanduser(base or "."))
    matches: list[tuple[bool, str]] = []
    try:
        with os.scandir(directory) as entries:
            for count, entry in enumerate(entries):
                if count >= _MAX_ENTRIES:
                    break
                if not entry.name.startswith(prefix) or entry.name == prefix:
                    continue
                if prefix == "" and entry.name.startswith("."):
                    continue
                is_dir = entry.is_dir()
                if is_dir or entry.name.endswith(suffix):
                    matches.append((not is_dir, entry.name + ("/" if is_dir else "")))
    except OSError:
        return None
    if not matches:
        return None
    return base + min(matches)[1]


class PathSuggester(Suggester):
    """Suggests the completion of the path typed so far (`./tr` → `./traces/`)."""

    def __init__(self, *, suffix: str = "") -> None:
        super().__init__(use_cache=False, case_sensitive=True)
        self.suffix = suffix

    async def get_suggestion(self, value: str) -> str | None:
        """The completed path, read from the file system in a thread."""
        return await asyncio.to_thread(complete_path, value, suffix=self.suffix)
