"""Read-only DuckDB SQL on the store, and its tables and views written out as Parquet files."""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from store.connection import first_line, session
from store.errors import StoreError
from store.queries import Store, open_store

# Rows per batch of `SqlSession.batches` (DuckDB's own default is 131,072: gigabytes of bodies).
STREAMED_BATCH_ROWS = 2_048


class SqlError(StoreError):
    """DuckDB refused or failed a statement; `str(error)` is DuckDB's first line."""


class SqlCancelled(SqlError):
    """The statement was interrupted by `QueryCancel.cancel()` before it finished."""


class ParquetExportError(StoreError):
    """The Parquet directory cannot be written; the message names it."""


def python_values(rows: pa.Table | pa.RecordBatch) -> list[list[Any]]:
    """Each column's values as Python objects; SqlError naming the column for a value Python
    has no type for (DuckDB's `'infinity'::TIMESTAMP`, a date past year 9999)."""
    values = []
    for name, column in zip(rows.schema.names, rows.columns, strict=True):
        try:
            values.append(column.to_pylist())
        except (OverflowError, ValueError, pa.ArrowException) as error:
            raise SqlError(
                f"column {name!r} holds a value Python cannot represent ({first_line(error)}); "
                "cast it to VARCHAR to see it"
            ) from error
    return values


@dataclass(frozen=True, slots=True)
class QueryResult:
    """What a statement returned: column names, DuckDB type names, and the rows in order."""

    columns: tuple[str, ...]
    types: tuple[str, ...]
    rows: tuple[tuple[Any, ...], ...]
    # How many rows the statement returned; more than len(rows) when a limit cut them.
    total_rows: int = -1

    def __post_init__(self) -> None:
        if self.total_rows < 0:
            object.__setattr__(self, "total_rows", len(self.rows))


# A cancelled statement is interrupted again this often until it has ended: DuckDB forgets an
# interrupt that comes before the statement has started executing.
INTERRUPT_REPEAT_S = 0.05


class QueryCancel:
    """Lets another thread interrupt the statement a `SqlSession` call is running (DuckDB's
    `interrupt()`); one handle per call. `cancel()` may come before the statement starts."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._conn: duckdb.DuckDBPyConnection | None = None
        self._detached = threading.Event()
        self.cancelled = False
        self.started = threading.Event()

    def cancel(self) -> None:
        """Interrupt the statement, and keep interrupting it until it has ended; idempotent.

        Returns at once; a daemon thread repeats the interrupt every `INTERRUPT_REPEAT_S`.
        """
        with self._lock:
            if self.cancelled:
                return
            self.cancelled = True
            attached = self._conn is not None
        if attached:
            threading.Thread(target=self._interrupt_until_detached, daemon=True,
                             name="sql-interrupt").start()  # fmt: skip

    def attach(self, conn: duckdb.DuckDBPyConnection) -> None:
        """The connection the call runs on; SqlCancelled when `cancel()` came first."""
        with self._lock:
            self._conn = conn
            self.started.set()
        self.check()

    def detach(self) -> None:
        """The call is done with its connection."""
        with self._lock:
            self._conn = None
            self._detached.set()

    def check(self) -> None:
        """SqlCancelled when `cancel()` was called."""
        if self.cancelled:
            raise SqlCancelled("cancelled")

    def _interrupt_until_detached(self) -> None:
        while True:
            with self._lock:
                if self._conn is None:
                    return
                self._conn.interrupt()
            if self._detached.wait(INTERRUPT_REPEAT_S):
                return


@dataclass(frozen=True, slots=True)
class ParquetFile:
    """One table or view written as `path`, with its row count."""

    name: str
    kind: str
    path: Path
    rows: int


class SqlSession:
    """Runs statements on the store at `db_path`, each in a short read-only connection.

    Before each statement the spool is ingested (as every reader does), so a query sees what
    recorders spooled while another process held the file. The connection is closed after each
    statement, so recorders and readers in other processes get their turn in between.
    """

    def __init__(self, db_path: str | os.PathLike[str]) -> None:
        self.store: Store = open_store(db_path)

    def run(
        self, query: str, *, limit: int | None = None, cancel: QueryCancel | None = None
    ) -> QueryResult | None:
        """Run `query` (one or more statements; the last one's rows come back), or SqlError.

        None when the statement returns no relation. With `limit`, only the first `limit`
        rows are kept and the rest are counted (`total_rows`). `cancel` interrupts the
        statement from another thread (SqlCancelled).
        """
        self.store.refresh()
        with self._read_only() as conn, _attached(cancel, conn), _sql_errors(cancel):
            relation = conn.sql(query)
            if relation is None:
                return None
            reader = relation.arrow()
            types = tuple(str(kind) for kind in relation.types)
            kept, total = [], 0
            for batch in reader:
                if cancel is not None:
                    cancel.check()
                if limit is None or total < limit:
                    kept.append(batch if limit is None else batch.slice(0, limit - total))
                total += batch.num_rows
        table = pa.Table.from_batches(kept, schema=reader.schema)
        columns = tuple(table.schema.names)
        values = python_values(table)
        return QueryResult(columns, types, tuple(zip(*values, strict=True)), total)

    @contextlib.contextmanager
    def batches(self, query: str) -> Iterator[tuple[tuple[str, ...], Iterator[QueryResult]] | None]:
        """`query`'s column names and its rows as QueryResults of one Arrow batch each (None
        when the statement returns no relation), read while the context is open: memory stays
        one batch whatever the result's size. DuckDB's errors, here or while iterating, are
        SqlError."""
        self.store.refresh()
        with self._read_only() as conn:
            with _sql_errors():
                relation = conn.sql(query)
                if relation is not None:
                    reader = relation.to_arrow_reader(batch_size=STREAMED_BATCH_ROWS)
                    types = tuple(str(kind) for kind in relation.types)
            if relation is None:
                yield None
                return
            columns = tuple(reader.schema.names)

            def results() -> Iterator[QueryResult]:
                with _sql_errors():
                    for batch in reader:
                        values = python_values(batch)
                        yield QueryResult(columns, types, tuple(zip(*values, strict=True)))

            yield columns, results()

    def write_parquet(
        self, query: str, target: str | os.PathLike[str], *, cancel: QueryCancel | None = None
    ) -> int:
        """Write what `query` returns to the Parquet file `target`; the number of rows.

        The file is written beside `target` and renamed onto it, so a failed query leaves
        nothing half-written.
        """
        return self._write(query, Path(target), "parquet", cancel)

    def write_csv(
        self, query: str, target: str | os.PathLike[str], *, cancel: QueryCancel | None = None
    ) -> int:
        """Write what `query` returns to the CSV file `target` (a header row; NULL as an empty
        field, DuckDB's COPY format); the number of rows. Nothing is half-written."""
        return self._write(query, Path(target), "csv", cancel)

    def _write(self, query: str, target: Path, file_format: str, cancel: QueryCancel | None) -> int:
        self.store.refresh()
        with (
            self._read_only() as conn,
            _attached(cancel, conn),
            _partial_file(target) as partial,
            _sql_errors(cancel),
        ):
            relation = conn.sql(query)
            if relation is None:
                raise SqlError(f"the statement returns no rows to write as {file_format}")
            if file_format == "parquet":
                relation.write_parquet(str(partial))
                reread = f"read_parquet('{_quoted(partial)}')"
            else:
                relation.write_csv(str(partial), header=True)
                reread = f"read_csv('{_quoted(partial)}', header = true, all_varchar = true)"
            counted_rows = conn.execute(f"SELECT count(*) FROM {reread}").fetchone()
            count = counted_rows[0] if counted_rows else 0
        return int(count)

    @contextlib.contextmanager
    def _read_only(self) -> Any:
        with session(
            self.store.paths, read_only=True, lock_timeout_s=self.store.lock_timeout_s
        ) as conn:
            yield conn


def export_parquet(
    db_path: str | os.PathLike[str], directory: str | os.PathLike[str], *, overwrite: bool = False
) -> list[ParquetFile]:
    """Write every table and view of the store as `DIRECTORY/<name>.parquet`, rows as stored.

    The files are written into a temporary directory beside DIRECTORY and moved in when all of
    them are done. Without `overwrite`, a DIRECTORY that already holds one of these files is
    refused before anything is written.
    """
    target = Path(directory)
    if target.exists() and not target.is_dir():
        raise ParquetExportError(f"{target}: exists and is not a directory")
    store = open_store(db_path)
    with store.session() as conn:
        names = conn.execute(
            "SELECT table_name, 'table' FROM duckdb_tables() "
            "WHERE database_name = current_database() AND schema_name = 'main' "
            "AND NOT internal AND NOT temporary "
            "UNION ALL SELECT view_name, 'view' FROM duckdb_views() "
            "WHERE database_name = current_database() AND schema_name = 'main' "
            "AND NOT internal AND NOT temporary ORDER BY 2, 1"
        ).fetchall()
        if not overwrite:
            clashing = [name for name, _ in names if (target / f"{name}.parquet").exists()]
            if clashing:
                raise ParquetExportError(
                    f"{target}: already holds {clashing[0]}.parquet (pass --force to replace "
                    "the files of this export)"
                )
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
        except OSError as error:
            raise ParquetExportError(f"{target}: cannot write: {error.strerror}") from error
        try:
            written = []
            for name, kind in names:
                path = staging / f"{name}.parquet"
                quoted = '"' + name.replace('"', '""') + '"'
                conn.execute(f"COPY {quoted} TO '{_quoted(path)}' (FORMAT parquet)")
                (rows,) = conn.execute(f"SELECT count(*) FROM {quoted}").fetchone() or (0,)
                written.append(ParquetFile(name, kind, target / path.name, int(rows)))
            try:
                target.mkdir(exist_ok=True)
                for done in written:
                    os.replace(staging / done.path.name, done.path)
            except OSError as error:
                raise ParquetExportError(f"{target}: cannot write: {error.strerror}") from error
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return written


@contextlib.contextmanager
def _sql_errors(cancel: QueryCancel | None = None) -> Iterator[None]:
    """DuckDB's errors in the block as SqlError (their first line), and an interrupt as
    SqlCancelled. An error after a query's first batch comes through Arrow as an OSError; if
    `cancel` interrupted the query, that is SqlCancelled too."""
    try:
        yield
    except duckdb.InterruptException as error:
        raise SqlCancelled("cancelled") from error
    except duckdb.Error as error:
        raise SqlError(first_line(error)) from error
    except OSError as error:
        if cancel is not None:
            cancel.check()
        raise SqlError(first_line(error)) from error


@contextlib.contextmanager
def _attached(cancel: QueryCancel | None, conn: duckdb.DuckDBPyConnection) -> Any:
    """`conn` is what `cancel` interrupts while the block runs."""
    if cancel is None:
        yield
        return
    try:
        cancel.attach(conn)
        yield
    finally:
        cancel.detach()


def output_file(target: Path) -> Path:
    """Where rows for `target` are written: `target`, or the file a symbolic link at `target`
    points to (the link is kept). SqlError for something that is not a regular file (a device
    such as /dev/full, a pipe, a socket, a directory): a rename onto it would replace it, and
    write nothing where the rows were meant to go."""
    try:
        found = target.stat()
    except FileNotFoundError:
        return target  # a new file (a dangling link: the rows replace the link)
    except OSError as error:
        raise SqlError(f"{target}: cannot write: {error.strerror}") from error
    if stat.S_ISDIR(found.st_mode):
        raise SqlError(f"{target}: is a directory, expected a file name")
    if not stat.S_ISREG(found.st_mode):
        raise SqlError(
            f"{target}: exists and is not a regular file (a device, pipe or socket); "
            "choose a file name"
        )
    return Path(os.path.realpath(target)) if target.is_symlink() else target


def replacement_mode(target: Path) -> int:
    """The permission bits a file written at `target` gets: those of the file it replaces, or
    what `open()` would give a new one (0o666 less the umask); `mkstemp`'s are 0o600."""
    try:
        return stat.S_IMODE(os.stat(target).st_mode)
    except OSError:
        return 0o666 & ~_umask()


def _umask() -> int:
    """The process's umask, read without setting it (`os.umask` sets it process-wide, for every
    thread, while it is read: a file another thread created then would be world-writable)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    return 0o022


@contextlib.contextmanager
def _partial_file(target: Path) -> Any:
    """A path beside `target` that is renamed onto it when the block succeeds, else removed."""
    target = output_file(target)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        handle, name = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    except OSError as error:
        raise SqlError(f"{target}: cannot write: {error.strerror}") from error
    os.close(handle)
    partial = Path(name)
    partial.unlink()
    try:
        yield partial
        try:
            os.chmod(partial, replacement_mode(target))
            os.replace(partial, target)
        except OSError as error:
            raise SqlError(f"{target}: cannot write: {error.strerror}") from error
    finally:
        partial.unlink(missing_ok=True)


def _quoted(path: Path) -> str:
    return str(path).replace("'", "''")
