"""Store file paths, file checks, and short-lived DuckDB sessions that wait briefly for the lock."""

from __future__ import annotations

import os
import random
import re
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import duckdb

from store.errors import StoreBusyError, StoreOpenError
from store.schema import ensure_schema

DEFAULT_DB_PATH = Path(".truva") / "debug.duckdb"
DB_ENV_VAR = "TRUVA_DB"
DEFAULT_LOCK_TIMEOUT_S = 2.0

# A DuckDB file starts with an 8-byte checksum followed by this magic.
_DUCKDB_MAGIC = b"DUCK"
_DUCKDB_MAGIC_OFFSET = 8
_LOCK_ERROR_MARKERS = ("Could not set lock on file", "Conflicting lock is held")
_LOCK_HOLDER_PID = re.compile(r"\(PID (\d+)\)")

_process_locks: dict[Path, threading.RLock] = {}
_process_locks_guard = threading.Lock()


@dataclass(frozen=True, slots=True)
class StorePaths:
    """Where one store keeps its database and its spool of not-yet-ingested segments."""

    db: Path
    spool: Path
    segments: Path
    writers: Path

    @property
    def label(self) -> str:
        """The database path as the user gave it, for error messages."""
        return str(self.db)


def store_paths(db_path: str | os.PathLike[str]) -> StorePaths:
    """The paths of the store whose database is `db_path`; the spool is `<db>.spool/`."""
    db = Path(db_path)
    spool = db.with_name(db.name + ".spool")
    return StorePaths(db=db, spool=spool, segments=spool / "segments", writers=spool / "writers")


def resolve_db_path(cli_value: str | None, env: Mapping[str, str] = os.environ) -> Path:
    """The store path: `--db` if given, else `TRUVA_DB`, else `./.truva/debug.duckdb`."""
    if cli_value:
        return Path(cli_value)
    from_env = env.get(DB_ENV_VAR)
    if from_env:
        return Path(from_env)
    return DEFAULT_DB_PATH


def check_store_file(paths: StorePaths, *, create: bool) -> bool:
    """Raise StoreOpenError unless the database is a readable DuckDB file; True if it exists.

    With `create`, a missing file is fine (its directory is made); the file is never touched.
    """
    db = paths.db
    if not db.exists():
        if create:
            try:
                db.parent.mkdir(parents=True, exist_ok=True)
            except OSError as error:
                raise StoreOpenError(
                    f"{paths.label}: cannot create its directory: {error.strerror}"
                ) from error
            return False
        raise StoreOpenError(
            f"{paths.label}: no such file "
            "(run 'truva-console run PLAN' to record one, or pass --db)"
        )
    if db.is_dir():
        raise StoreOpenError(f"{paths.label}: is a directory, expected a DuckDB database file")
    try:
        with db.open("rb") as handle:
            header = handle.read(_DUCKDB_MAGIC_OFFSET + len(_DUCKDB_MAGIC))
    except OSError as error:
        raise StoreOpenError(f"{paths.label}: cannot read: {error.strerror}") from error
    if header[_DUCKDB_MAGIC_OFFSET:] != _DUCKDB_MAGIC:
        detail = "empty file" if not header else "no DuckDB header"
        raise StoreOpenError(f"{paths.label}: not a DuckDB database ({detail})")
    return True


def is_lock_conflict(error: BaseException) -> bool:
    """Whether a DuckDB error says another process holds the file lock."""
    return isinstance(error, duckdb.IOException) and any(
        marker in str(error) for marker in _LOCK_ERROR_MARKERS
    )


def _process_lock(db: Path) -> threading.RLock:
    """One lock per database file in this process, so threads take turns with the file."""
    key = db.resolve()
    with _process_locks_guard:
        lock = _process_locks.get(key)
        if lock is None:
            lock = _process_locks[key] = threading.RLock()
        return lock


def connect(paths: StorePaths, *, lock_timeout_s: float) -> duckdb.DuckDBPyConnection:
    """Open the database read-write, retrying a held lock for up to `lock_timeout_s` seconds.

    Raises StoreBusyError when the lock stays held, StoreOpenError for any other failure.
    """
    deadline = time.monotonic() + lock_timeout_s
    pause_s = 0.002
    while True:
        try:
            return duckdb.connect(str(paths.db))
        except duckdb.Error as error:
            if not is_lock_conflict(error):
                first_line = str(error).splitlines()[0] if str(error) else type(error).__name__
                raise StoreOpenError(f"{paths.label}: cannot open: {first_line}") from error
            remaining_s = deadline - time.monotonic()
            if remaining_s <= 0:
                holder = _LOCK_HOLDER_PID.search(str(error))
                held_by = f"process {holder.group(1)}" if holder else "another process"
                raise StoreBusyError(
                    f"{paths.label}: busy: {held_by} kept the file locked for over "
                    f"{lock_timeout_s:g} s"
                ) from error
            time.sleep(min(remaining_s, random.uniform(pause_s, pause_s * 2)))
            pause_s = min(pause_s * 2, 0.02)


@contextmanager
def session(
    paths: StorePaths, *, create: bool = False, lock_timeout_s: float = DEFAULT_LOCK_TIMEOUT_S
) -> Iterator[duckdb.DuckDBPyConnection]:
    """A connection held only for the `with` block, with the schema checked and migrated.

    Threads of one process take turns; other processes wait up to `lock_timeout_s`.
    """
    with _process_lock(paths.db):
        check_store_file(paths, create=create)
        conn = connect(paths, lock_timeout_s=lock_timeout_s)
        try:
            try:
                ensure_schema(conn, paths.label, create=create)
            except duckdb.Error as error:
                raise StoreOpenError(f"{paths.label}: cannot read the schema: {error}") from error
            yield conn
        finally:
            conn.close()
