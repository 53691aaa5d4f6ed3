"""The SQL screen's snippets (the example queries of docs/store.md) and its query history file."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

HISTORY_FILE = "sql_history"
# The history file keeps the newest this many queries; older ones are dropped when it is rewritten.
HISTORY_LIMIT = 500
SNIPPETS_SECTION = "## Questions and their SQL"

_PACKAGE_DIR = Path(__file__).resolve().parents[1]
_INSTALLED_DOC = _PACKAGE_DIR / "_docs" / "store.md"
_SQL_BLOCK = re.compile(r"^```sql\n(.*?)^```", re.S | re.M)


@dataclass(frozen=True, slots=True)
class Snippet:
    """One example query: the question it answers and its SQL."""

    title: str
    sql: str


def store_doc_path() -> Path:
    """docs/store.md of the source checkout, else the copy installed with the package."""
    checkout = _PACKAGE_DIR.parent / "docs" / "store.md"
    return checkout if checkout.is_file() else _INSTALLED_DOC


def parse_snippets(text: str) -> tuple[Snippet, ...]:
    """The ```sql blocks of the doc's "Questions and their SQL" section, each titled by the
    paragraph just before it."""
    start = text.find(SNIPPETS_SECTION)
    if start < 0:
        return ()
    section = text[start + len(SNIPPETS_SECTION) :]
    end = re.search(r"^## ", section, re.M)
    section = section[: end.start()] if end else section
    snippets = []
    previous_end = 0
    for block in _SQL_BLOCK.finditer(section):
        before = section[previous_end : block.start()].strip().split("\n\n")[-1]
        title = " ".join(before.split()) or f"Example {len(snippets) + 1}"
        snippets.append(Snippet(title.rstrip(":"), block.group(1).strip()))
        previous_end = block.end()
    return tuple(snippets)


def load_snippets(path: Path | None = None) -> tuple[Snippet, ...]:
    """The snippets of docs/store.md (`path`); none when the file cannot be read."""
    try:
        return parse_snippets((path or store_doc_path()).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError):
        return ()


def history_path(environ: Mapping[str, str] | None = None) -> Path:
    """`$XDG_STATE_HOME/truva-console/sql_history` (`~/.local/state` when the variable is unset)."""
    env = os.environ if environ is None else environ
    base = env.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "truva-console" / HISTORY_FILE


@dataclass(frozen=True, slots=True)
class HistoryEntry:
    """A query that was run, and when (ISO 8601, UTC)."""

    query: str
    ran_at: str


class SqlHistory:
    """The queries run on the SQL screen, one JSON object a line in `path`, oldest first."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def entries(self) -> list[HistoryEntry]:
        """Newest first; lines that are not an entry are skipped; [] when there is no file."""
        try:
            lines = self.path.read_text(encoding="utf-8").splitlines()
        except FileNotFoundError:
            return []
        except (OSError, UnicodeDecodeError):
            return []
        entries = []
        for line in lines:
            try:
                item = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(item, dict) and isinstance(item.get("query"), str):
                entries.append(HistoryEntry(item["query"], str(item.get("ran_at", ""))))
        entries.reverse()
        return entries

    def add(self, query: str, *, now: datetime | None = None) -> list[HistoryEntry]:
        """Append `query` (not when it repeats the newest entry); the entries, newest first.

        Raises OSError when the file cannot be written.
        """
        query = query.strip()
        entries = self.entries()
        if not query or (entries and entries[0].query == query):
            return entries
        ran_at = (now or datetime.now(UTC)).isoformat(timespec="seconds")
        entries.insert(0, HistoryEntry(query, ran_at))
        self.path.parent.mkdir(parents=True, exist_ok=True)
        line = json.dumps({"query": query, "ran_at": ran_at}, ensure_ascii=False) + "\n"
        if len(entries) > 2 * HISTORY_LIMIT:
            entries = entries[:HISTORY_LIMIT]
            kept = "".join(
                json.dumps({"query": e.query, "ran_at": e.ran_at}, ensure_ascii=False) + "\n"
                for e in reversed(entries)
            )
            partial = self.path.with_name(f".{self.path.name}.partial")
            partial.write_text(kept, encoding="utf-8")
            os.replace(partial, self.path)
        else:
            with self.path.open("a", encoding="utf-8") as file:
                file.write(line)
        return entries
