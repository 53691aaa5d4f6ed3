"""Store file paths, file checks, and short-lived DuckDB sessions that wait briefly for the lock."""

from __future__ import annotations

import contextlib
import logging
import os
import random
import re
import stat
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import duckdb

from store.errors import StoreAccessError, StoreBusyError, StoreOpenError
from store.schema import ensure_schema
from store.turns import Turn, TurnTimeoutError, take_turn

log = logging.getLogger(__name__)

DEFAULT_DB_PATH = Path(".truva") / "debug.duckdb"
DB_ENV_VAR = "TRUVA_DB"
DEFAULT_LOCK_TIMEOUT_S = 2.0
# A process waits in line for the file while the line moves, up to this many lock timeouts.
LINE_WAIT_FACTOR = 5

# A DuckDB file starts with an 8-byte checksum followed by this magic.
_DUCKDB_MAGIC = b"DUCK"
_DUCKDB_MAGIC_OFFSET = 8
_LOCK_ERROR_MARKERS = ("Could not set lock on file", "Conflicting lock is held")
_LOCK_HOLDER_PID = re.compile(r"\(PID (\d+)\)")
_LOCK_HOLDER_EXE = re.compile(r"Conflicting lock is held in (\S+) \(PID")

_FILE_KINDS = (
    (stat.S_ISFIFO, "a named pipe"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


@dataclass(slots=True)
class _ProcessTurn:
    """This process's hold on one store file: threads take turns, nested sessions share it."""

    lock: threading.RLock
    depth: int = 0
    turn: Turn | None = None


_process_turns: dict[Path, _ProcessTurn] = {}
_process_turns_guard = threading.Lock()


@dataclass(frozen=True, slots=True)
class StorePaths:
    """Where one store keeps its database and its spool of not-yet-ingested segments.

    `db` is the database with symbolic links resolved, so every spelling of one store shares one
    spool and one set of writer leases; `given` is the path as the user spelled it.
    """

    db: Path
    spool: Path
    segments: Path
    writers: Path
    given: Path

    @property
    def label(self) -> str:
        """The database path as the user gave it, for messages."""
        return str(self.given)


def store_paths(db_path: str | os.PathLike[str]) -> StorePaths:
    """The paths of the store whose database is `db_path`; the spool is `<real db>.spool/`."""
    given = Path(db_path)
    try:
        db = given.resolve()
    except (OSError, RuntimeError):  # a symlink loop: the file checks report it
        db = given.absolute()
    spool = db.with_name(db.name + ".spool")
    return StorePaths(
        db=db, spool=spool, segments=spool / "segments", writers=spool / "writers", given=given
    )


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
    try:
        mode = db.stat().st_mode
    except FileNotFoundError:
        mode = None
    except OSError as error:
        raise StoreOpenError(f"{paths.label}: cannot read: {error.strerror}") from error
    if mode is None:
        dangling = _dangling_link(paths.given)
        if dangling is not None:
            which = "" if dangling == paths.given else f" ({dangling})"
            raise StoreOpenError(
                f"{paths.label}: a symbolic link{which} to {os.readlink(dangling)}, which does "
                "not exist (nothing was created; fix the link or pass the real path with --db)"
            )
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
    if stat.S_ISDIR(mode):
        raise StoreOpenError(f"{paths.label}: is a directory, expected a DuckDB database file")
    if not stat.S_ISREG(mode):
        kind = next((name for test, name in _FILE_KINDS if test(mode)), "not a regular file")
        raise StoreOpenError(f"{paths.label}: is {kind}, expected a DuckDB database file")
    try:
        with db.open("rb") as handle:
            header = handle.read(_DUCKDB_MAGIC_OFFSET + len(_DUCKDB_MAGIC))
    except OSError as error:
        raise StoreOpenError(f"{paths.label}: cannot read: {error.strerror}") from error
    if header[_DUCKDB_MAGIC_OFFSET:] != _DUCKDB_MAGIC:
        detail = "empty file" if not header else "no DuckDB header"
        raise StoreOpenError(f"{paths.label}: not a DuckDB database ({detail})")
    return True


def _dangling_link(path: Path) -> Path | None:
    """The first of `path` and its ancestors that is a symbolic link to nothing, if any."""
    for candidate in (path, *path.parents):
        if candidate.is_symlink() and not candidate.exists():
            return candidate
    return None


def is_lock_conflict(error: BaseException) -> bool:
    """Whether a DuckDB error says another process holds the file lock."""
    return isinstance(error, duckdb.IOException) and any(
        marker in str(error) for marker in _LOCK_ERROR_MARKERS
    )


def is_query_interrupt(error: BaseException) -> bool:
    """Whether `error` is DuckDB's answer to a Ctrl-C that landed inside a query: its
    InterruptException, or the bare RuntimeError("Query interrupted") its client raises on some
    paths (seen from `conn.execute` during `export`)."""
    if isinstance(error, duckdb.InterruptException):
        return True
    return type(error) is RuntimeError and str(error) == "Query interrupted"


def lock_holder(error: BaseException) -> str:
    """Who holds the file, from DuckDB's lock error: `harlequin (pid 9711)` or `another process`.

    The name is the holder's /proc command name, or the script or module a Python holder runs;
    without /proc it is the executable DuckDB names.
    """
    text = str(error)
    pid_match = _LOCK_HOLDER_PID.search(text)
    if pid_match is None:
        return "another process"
    pid = pid_match.group(1)
    name = _process_name(pid)
    if name is None:
        held_in = _LOCK_HOLDER_EXE.search(text)
        name = Path(held_in.group(1)).name if held_in else "process"
    return f"{name} (pid {pid})"


def _process_name(pid: str) -> str | None:
    """`harlequin`, `python3 -m ipykernel_launcher`, `python3 notebook.py`; None without /proc."""
    try:
        comm = Path(f"/proc/{pid}/comm").read_text(errors="replace").strip()
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return None
    args = [arg.decode(errors="replace") for arg in argv if arg]
    if not comm.startswith("python") or len(args) < 2:
        return comm or None
    rest = args[1:]
    for index, arg in enumerate(rest):
        if arg == "-m" and index + 1 < len(rest):
            return f"{comm} -m {rest[index + 1]}"
        if arg == "-c":
            return f"{comm} -c"
        if not arg.startswith("-"):
            return f"{comm} {Path(arg).name}" if Path(arg).name != comm else comm
    return comm


def store_is_writable(paths: StorePaths) -> bool:
    """Whether this process may write the database file and create files beside it (its WAL)."""
    return os.access(paths.db, os.W_OK) and os.access(paths.db.parent, os.W_OK)


def _process_turn(db: Path) -> _ProcessTurn:
    with _process_turns_guard:
        held = _process_turns.get(db)
        if held is None:
            held = _process_turns[db] = _ProcessTurn(lock=threading.RLock())
        return held


@contextmanager
def _turn(paths: StorePaths, *, lock_timeout_s: float, create_spool: bool) -> Iterator[None]:
    """Hold this process's turn with the file: threads one at a time, processes in line."""
    held = _process_turn(paths.db)
    with held.lock:
        if held.depth == 0:
            if create_spool:
                with contextlib.suppress(OSError):
                    paths.spool.mkdir(exist_ok=True)
            try:
                held.turn = take_turn(
                    paths.spool,
                    stall_timeout_s=lock_timeout_s,
                    deadline=time.monotonic() + lock_timeout_s * LINE_WAIT_FACTOR,
                )
            except TurnTimeoutError as error:
                held_by = f"process {error.holder_pid}" if error.holder_pid else "another process"
                if error.stalled:
                    problem = f"{held_by} kept the file locked for over {lock_timeout_s:g} s"
                else:
                    problem = (
                        "other processes kept the file in turn for over "
                        f"{lock_timeout_s * LINE_WAIT_FACTOR:g} s"
                    )
                raise StoreBusyError(f"{paths.label}: busy: {problem}") from error
        held.depth += 1
        try:
            yield
        finally:
            held.depth -= 1
            if held.depth == 0 and held.turn is not None:
                held.turn.release()
                held.turn = None


def first_line(error: BaseException) -> str:
    """The first line of an error's message, or its type name when it has none."""
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def connect(
    paths: StorePaths, *, lock_timeout_s: float, read_only: bool = False
) -> duckdb.DuckDBPyConnection:
    """Open the database, retrying a held lock for up to `lock_timeout_s` seconds.

    Raises StoreBusyError when the lock stays held, StoreOpenError for any other failure.
    """
    deadline = time.monotonic() + lock_timeout_s
    pause_s = 0.002
    while True:
        try:
            conn = duckdb.connect(str(paths.db), read_only=read_only)
            # DuckDB draws a progress bar on the terminal for a query past 2 s (a text search
            # of a big store): over the console's screen, or into a command's output.
            conn.execute("SET enable_progress_bar = false")
            return conn
        except duckdb.Error as error:
            if not is_lock_conflict(error):
                raise StoreOpenError(f"{paths.label}: cannot open: {first_line(error)}") from error
            remaining_s = deadline - time.monotonic()
            if remaining_s <= 0:
                holder = f"{lock_holder(error)} holds {paths.label}"
                raise StoreBusyError(
                    f"{holder}; close it, or use 'truva-console sql' to query the store",
                    holder=holder,
                ) from error
            time.sleep(min(remaining_s, random.uniform(pause_s, pause_s * 2)))
            pause_s = min(pause_s * 2, 0.02)


@contextmanager
def session(
    paths: StorePaths,
    *,
    create: bool = False,
    read_only: bool = False,
    lock_timeout_s: float = DEFAULT_LOCK_TIMEOUT_S,
) -> Iterator[duckdb.DuckDBPyConnection]:
    """A connection held only for the `with` block, with the schema checked and migrated.

    Threads of one process take turns; processes wait in line, in arrival order, and give up
    (StoreBusyError) when one process keeps the file for over `lock_timeout_s` or after
    `LINE_WAIT_FACTOR` times that in line. A DuckDB error inside the block becomes
    StoreAccessError.
    """
    existed = check_store_file(paths, create=create)
    if existed and not read_only and not store_is_writable(paths):
        raise StoreOpenError(
            f"{paths.label}: not writable by this process (no write permission on the file or "
            "its directory)"
        )
    with _turn(paths, lock_timeout_s=lock_timeout_s, create_spool=create and not existed):
        found = _files_state(paths)
        unchanged = found is not None and _SCHEMA_CHECKED.get(str(paths.db)) == found
        conn = connect(paths, lock_timeout_s=lock_timeout_s, read_only=read_only)
        ended = False
        try:
            if not unchanged:
                try:
                    _check_not_truncated(conn, paths)
                    ensure_schema(conn, paths.label, create=create, writable=not read_only)
                except duckdb.InterruptException:  # a Ctrl-C, not a store problem
                    raise
                except duckdb.Error as error:
                    raise StoreOpenError(
                        f"{paths.label}: cannot read the schema: {first_line(error)}"
                    ) from error
            try:
                yield conn
            except duckdb.InterruptException:  # a Ctrl-C, not a store problem: main says so
                raise
            except duckdb.Error as error:
                raise StoreAccessError(f"{paths.label}: {first_line(error)}") from error
            ended = True
        finally:
            try:
                conn.close()
            except duckdb.Error as error:  # committed work is in the WAL; say so, do not mask
                log.warning("closing %s failed: %s", paths.label, first_line(error))
                ended = False
            left = _files_state(paths) if ended else None
            if left is not None:  # still our turn: the files as this session, checked, left them
                _SCHEMA_CHECKED[str(paths.db)] = left


# A DuckDB file is its headers (three of 4 KiB), then blocks of `block_size`: at least its
# `used_blocks` (free ones at the end are cut off the file, so `total_blocks` may be more).
_DUCKDB_HEADER_BYTES = 3 * 4096


def _check_not_truncated(conn: duckdb.DuckDBPyConnection, paths: StorePaths) -> None:
    """Refuse a database file too short to hold the blocks its own metadata says are in use
    (cut by a full disk or a bad copy): some tables would still read, but writing into it fails,
    after a run has made its tool calls, and leaves a spool that can never be ingested."""
    row = conn.execute("PRAGMA database_size").fetchone()
    try:
        size = os.stat(paths.db).st_size
    except OSError:
        return
    if row is None or row[2] is None or row[4] is None:  # block_size, used_blocks
        return
    needed = _DUCKDB_HEADER_BYTES + int(row[2]) * int(row[4])
    if size < needed:
        raise StoreOpenError(
            f"{paths.label}: the file is truncated: {size:,} bytes where the blocks it uses need "
            f"{needed:,}; nothing was read or written (restore it from a copy)"
        )


# Per database, the state of the store files whose schema this process last checked, as a
# session left them (device, inode, size, modification and change times of the database and
# of its WAL; one entry per database, so a long-lived console keeps no history): a session
# that finds them unchanged skips `ensure_schema` (~20 ms of CPU of each read of a
# 1,000-attempt execution). Any write since, by any process (a migration, a damaged column),
# changes them.
_SCHEMA_CHECKED: dict[str, tuple[object, ...]] = {}


def _files_state(paths: StorePaths) -> tuple[object, ...] | None:
    """What tells whether the store's files changed; None when they cannot be looked at."""
    state: list[object] = [str(paths.db)]
    for path in (paths.db, paths.db.with_name(paths.db.name + ".wal")):
        try:
            found = os.stat(path)
        except FileNotFoundError:
            state.append(None)
            continue
        except OSError:
            return None
        state.append((found.st_dev, found.st_ino, found.st_size, found.st_mtime_ns,
                      found.st_ctime_ns))
    return tuple(state)
