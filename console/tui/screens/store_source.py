"""Short read sessions on the debug store for the TUI's worker threads."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import duckdb

from store.errors import StoreBusyError, StoreError
from store.queries import ExecutionDetail, ExecutionFilter, Page, Store, open_store


class StoreUnavailable(Exception):
    """The store cannot be read right now; `str(error)` is one line for the user.

    `held` is True when another process holds the file, which passes once it lets go.
    """

    def __init__(self, problem: str, *, held: bool = False) -> None:
        super().__init__(problem)
        self.held = held


class StoreSource:
    """Opens the store at `db_path` for each query; a missing file reads as an empty store."""

    def __init__(self, db_path: Path) -> None:
        self.db_path = db_path
        self._store: Store | None = None
        self._lock = threading.Lock()

    def exists(self) -> bool:
        """Whether the database file is there yet."""
        return self.db_path.exists()

    def _opened(self) -> Store:
        with self._lock:
            if self._store is None:
                self._store = open_store(self.db_path)
            return self._store

    def _forget(self) -> None:
        with self._lock:
            self._store = None

    def list_page(self, filters: ExecutionFilter, *, limit: int, offset: int) -> Page:
        """One page of executions; an empty page when the file does not exist yet."""
        if not self.exists():
            self._forget()
            return Page(executions=(), total=0, limit=limit, offset=offset)
        try:
            return self._opened().list_executions(filters, limit=limit, offset=offset)
        except (StoreError, duckdb.Error, OSError) as error:
            self._forget()
            raise _unavailable(error) from error

    def get_execution(self, execution_id: str, *, llm_texts: bool = True) -> ExecutionDetail:
        """Everything recorded about one execution (`Store.get_execution`)."""
        try:
            return self._opened().get_execution(execution_id, llm_texts=llm_texts)
        except (StoreError, duckdb.Error, OSError) as error:
            self._forget()
            raise _unavailable(error) from error

    def llm_call_texts(self, execution_id: str, call_ids: list[str]) -> dict[str, dict[str, Any]]:
        """The prompts and answers of some LLM calls (`Store.llm_call_texts`)."""
        try:
            return self._opened().llm_call_texts(execution_id, call_ids)
        except (StoreError, duckdb.Error, OSError) as error:
            self._forget()
            raise _unavailable(error) from error


def _unavailable(error: BaseException) -> StoreUnavailable:
    return StoreUnavailable(_one_line(error), held=isinstance(error, StoreBusyError))


def _one_line(error: BaseException) -> str:
    text = " ".join(str(error).split())
    if isinstance(error, StoreError):
        return text
    return f"{type(error).__name__}: {text}"
