"""Importing a validated bundle into a store in bounded, committed batches."""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from store.bundle.archive import BundleLimits, open_archive
from store.bundle.format import (
    MIB,
    TABLES_FOLDER,
    BundleConflictError,
    BundleError,
    TableSpec,
    column_sql,
    insert_sql,
    paused_gc,
    quote,
    store_table_specs,
)
from store.bundle.validate import RowSets, Scan, row_digest, scan_bundle
from store.connection import DEFAULT_LOCK_TIMEOUT_S, first_line, store_paths
from store.queries import Store
from store.schema import DERIVED_COLUMNS, clear_import_pending, mark_import_pending

log = logging.getLogger(__name__)

_FETCH_ROWS = 1_000
_IMPORT_MEMORY_LIMIT = 64 * MIB
_ROW_MEMORY_FACTOR = 32  # the import's memory limit, in longest rows, if over 64 MiB
_MERGE_ROWS_HELD = 1_280  # rows' worth of memory the final merge gets (`_merge_memory_limit`)
_REPLACE_MEMORY_LIMIT = 48 * MIB
# Rows per INSERT of a table with a stored decision key: DuckDB costs ~35 KB per row while it
# computes the key, so a 2,000-row batch of recorded decisions would not fit the import's
# memory limit; slices keep what one INSERT needs bounded (and the peak lower).
_KEYED_SLICE_ROWS = 512


@dataclass(frozen=True, slots=True)
class ImportResult:
    """What `import_bundle` did with each execution of the bundle."""

    bundle: Path
    db: Path
    imported: tuple[str, ...]
    skipped: tuple[str, ...]
    replaced: tuple[str, ...]
    row_counts: Mapping[str, int]
    redacted: bool
    tool_version: str


def _store_row_sets(conn: duckdb.DuckDBPyConnection, execution_ids: Sequence[str]) -> RowSets:
    """Digests of the rows the store holds for `execution_ids`, read in batches."""
    row_sets = RowSets()
    for spec in store_table_specs():
        cursor = conn.execute(
            f"SELECT {', '.join(column_sql(c) for c in spec.columns)} FROM {quote(spec.name)} "
            "WHERE list_contains($ids, execution_id)",
            {"ids": list(execution_ids)},
        )
        while batch := cursor.fetchmany(_FETCH_ROWS):
            for values in batch:
                row = dict(zip(spec.column_names, values, strict=True))
                row_sets.add(spec.name, row["execution_id"], row_digest(spec, row))
    return row_sets


@dataclass(slots=True)
class _ImportPlan:
    """What to do with each execution of a bundle, decided against the store's rows."""

    imported: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    replaced: list[str] = field(default_factory=list)
    conflicts: list[tuple[str, str]] = field(default_factory=list)
    running: list[str] = field(default_factory=list)


def _bundle_row_sets(scan: Scan, execution_ids: Sequence[str]) -> RowSets:
    """Digests of the bundle's staged rows of `execution_ids` only (those the store holds too):
    an execution new to the store is imported without its rows being hashed."""
    row_sets = RowSets()
    if not execution_ids:
        return row_sets
    wanted = pa.array(sorted(execution_ids), type=pa.large_string())
    for spec in store_table_specs():
        for staged in scan.staged[spec.name].batches():
            batch = staged.filter(pc.is_in(staged.column("execution_id"), value_set=wanted))
            for row in batch.to_pylist():
                row_sets.add(spec.name, row["execution_id"], row_digest(spec, row))
    return row_sets


def _plan_import(conn: duckdb.DuckDBPyConnection, scan: Scan, *, replace: bool) -> _ImportPlan:
    ours = _store_row_sets(conn, scan.execution_ids)
    theirs = _bundle_row_sets(scan, [eid for eid in scan.execution_ids if ours.has(eid)])
    stored_statuses = dict(
        conn.execute(
            "SELECT execution_id, status FROM executions WHERE list_contains($ids, execution_id)",
            {"ids": list(scan.execution_ids)},
        ).fetchall()
    )
    plan = _ImportPlan()
    for execution_id in scan.execution_ids:
        differing = [
            spec.name
            for spec in store_table_specs()
            if ours.of(spec.name, execution_id) != theirs.of(spec.name, execution_id)
        ]
        stored_status = stored_statuses.get(execution_id)
        if not ours.has(execution_id):
            plan.imported.append(execution_id)
        elif not differing:
            plan.skipped.append(execution_id)
        elif replace and stored_status == "running":
            plan.running.append(execution_id)
        elif replace:
            plan.replaced.append(execution_id)
        else:
            plan.conflicts.append((execution_id, f"different rows (in {', '.join(differing)})"))
    writing = set(plan.imported) | set(plan.replaced)
    call_ids = [call for eid in sorted(writing) for call in scan.call_ids.get(eid, ())]
    if call_ids:
        for call_id, owner in conn.execute(
            "SELECT call_id, execution_id FROM llm_calls WHERE list_contains($calls, call_id) "
            "AND NOT list_contains($writing, execution_id)",
            {"calls": call_ids, "writing": sorted(writing)},
        ).fetchall():
            plan.conflicts.append((owner, f"an LLM call {call_id!r} that the bundle also holds"))
    return plan


def _conflict_error(db: str, scan: Scan, conflicts: Sequence[tuple[str, str]]) -> BundleError:
    execution_id, difference = conflicts[0]
    more = f" (and {len(conflicts) - 1} more)" if len(conflicts) > 1 else ""
    rows_differ = difference.startswith("different rows")
    hint = (
        "; the bundle is redacted, so it differs from an unredacted recording of the same run"
        if scan.manifest["redaction"]["applied"] and rows_differ
        else ""
    )
    remedy = "pass --replace to overwrite" if rows_differ else "an LLM call id is unique"
    return BundleConflictError(
        f"{db}: execution {execution_id} is already in the store with {difference}{more}{hint}; "
        f"nothing was imported ({remedy})"
    )


def _insert_batch(conn: duckdb.DuckDBPyConnection, spec: TableSpec, batch: pa.RecordBatch) -> None:
    """Insert one staged record batch of decoded rows, computing the derived columns."""
    view_name = f"bundle_{spec.name}"
    derived = DERIVED_COLUMNS.get(spec.name, {})
    names = [quote(column.name) for column in spec.columns]
    casts = ", ".join(
        f"{insert_sql(column)} AS {name}" for name, column in zip(names, spec.columns, strict=True)
    )
    # Derived columns are computed from the typed values (bodies as BLOB).
    insert = (
        f"INSERT INTO {quote(spec.name)} ({', '.join([*names, *derived])}) "
        f"SELECT {', '.join([*names, *derived.values()])} FROM (SELECT {casts} FROM {view_name})"
    )
    conn.register(view_name, pa.Table.from_batches([batch]))
    try:
        conn.execute(insert)
    finally:
        with contextlib.suppress(duckdb.Error):
            conn.unregister(view_name)


def _insert_table(
    conn: duckdb.DuckDBPyConnection,
    scan: Scan,
    spec: TableSpec,
    writing: set[str],
    *,
    commit_batches: bool,
) -> int:
    """Write one table's staged rows of the `writing` executions; return the rows written.

    Each staged batch is one INSERT (a table with a stored decision key, one per slice of
    `_KEYED_SLICE_ROWS`); with `commit_batches`, each batch is its own transaction, so
    DuckDB writes it out.
    """
    keyed = "decision_key" in DERIVED_COLUMNS.get(spec.name, {})
    slice_rows = _KEYED_SLICE_ROWS if keyed else None
    written = 0
    every = writing.issuperset(scan.execution_ids)  # then no row is filtered out
    wanted = pa.array(sorted(writing), type=pa.large_string())
    for staged in scan.staged[spec.name].batches():
        batch = (
            staged
            if every
            else staged.filter(pc.is_in(staged.column("execution_id"), value_set=wanted))
        )
        if not batch.num_rows:
            continue
        if commit_batches:
            conn.execute("BEGIN TRANSACTION")
            try:
                _insert_slices(conn, spec, batch, slice_rows)
                conn.execute("COMMIT")
            except BaseException:
                rollback(conn)
                raise
        else:
            _insert_slices(conn, spec, batch, slice_rows)
        written += batch.num_rows
        del staged, batch
        pa.default_memory_pool().release_unused()
    return written


def _insert_slices(
    conn: duckdb.DuckDBPyConnection, spec: TableSpec, batch: pa.RecordBatch, rows: int | None
) -> None:
    """`batch` as one INSERT, or as one per `rows` rows."""
    if rows is None or batch.num_rows <= rows:
        _insert_batch(conn, spec, batch)
        return
    for start in range(0, batch.num_rows, rows):
        _insert_batch(conn, spec, batch.slice(start, rows))


def rollback(conn: duckdb.DuckDBPyConnection) -> None:
    # A failed COMMIT has already rolled back; the original error is the one to report.
    with contextlib.suppress(duckdb.Error):
        conn.execute("ROLLBACK")


def _delete_rows(
    conn: duckdb.DuckDBPyConnection, execution_ids: Sequence[str], *, orphans_only: bool
) -> None:
    """Delete the executions' rows in every table (with `orphans_only`, rows with no execution)."""
    for spec in store_table_specs():
        if orphans_only and spec.name == "executions":
            continue
        orphan = (
            " AND execution_id NOT IN (SELECT execution_id FROM executions)" if orphans_only else ""
        )
        conn.execute(
            f"DELETE FROM {quote(spec.name)} WHERE list_contains($ids, execution_id){orphan}",
            {"ids": list(execution_ids)},
        )


def _write_bundle(
    conn: duckdb.DuckDBPyConnection,
    db_label: str,
    scan: Scan,
    *,
    replace: bool,
) -> tuple[_ImportPlan, dict[str, int]]:
    """Plan the import against the store, then write it (see `import_bundle`)."""
    row_counts = dict.fromkeys((spec.name for spec in store_table_specs()), 0)
    # DuckDB may cache little during an import, so committed batches are written out; one row
    # must still fit many times over: the stored decision key's SQL parses an attempt's
    # decision JSON, ~30 times its size while it runs (a 5.3 MB row with a 2.1 MB decision
    # needed 85 MiB). The checkpoints merge no row groups until the last one, whose merge needs
    # 40-50 MiB whatever the bundle's size, so the limit does not grow with the bundle's size.
    # A replacement holds its whole transaction: 1/64 of the rows' bytes on top.
    memory_limit = max(_IMPORT_MEMORY_LIMIT, _ROW_MEMORY_FACTOR * scan.longest_line)
    if replace:
        table_bytes = sum(
            member["size"]
            for name, member in scan.members.items()
            if name.startswith(TABLES_FOLDER)
        )
        memory_limit = max(memory_limit, _REPLACE_MEMORY_LIMIT + table_bytes // 64)
    conn.execute(f"SET memory_limit = '{memory_limit // MIB}MiB'")
    # One thread: on this workload (one INSERT per staged batch) a second one only contends.
    conn.execute("SET threads = 1")
    conn.execute("BEGIN TRANSACTION")
    try:
        # Rows a crashed import left behind have no executions row; they are not the store's.
        _delete_rows(conn, scan.execution_ids, orphans_only=True)
        plan = _plan_import(conn, scan, replace=replace)
        if plan.running:
            raise BundleConflictError(
                f"{db_label}: execution {plan.running[0]} is still running in the store (its "
                "recorder may be writing it), so --replace leaves it alone; nothing was "
                "imported (import again once it has finished or shows as interrupted)"
            )
        if plan.conflicts:
            raise _conflict_error(db_label, scan, plan.conflicts)
        writing = set(plan.imported) | set(plan.replaced)
        specs = sorted(store_table_specs(), key=lambda spec: spec.name == "executions")
        if plan.replaced:  # a replacement stays one transaction with the whole import
            _delete_rows(conn, plan.replaced, orphans_only=False)
            for spec in specs:
                row_counts[spec.name] = _insert_table(
                    conn, scan, spec, writing, commit_batches=False
                )
            conn.execute("COMMIT")
            return plan, row_counts
        if writing:  # until their executions rows are in, the rows are a killed import's
            mark_import_pending(conn, sorted(writing))
        conn.execute("COMMIT")
    except BaseException:
        rollback(conn)
        raise
    # No row groups are merged while the batches go in: each automatic checkpoint then writes
    # only the rows committed since the last one, instead of rewriting a table's growing row
    # group (the import's CPU, and its peak memory, grew with the bundle). The checkpoint that
    # follows the executions' rows merges them, once, within the import's memory limit.
    merge_limit = _merge_memory_limit(scan, memory_limit)
    conn.execute("SET max_vacuum_tasks = 0")
    try:
        for spec in specs[:-1]:
            row_counts[spec.name] = _insert_table(conn, scan, spec, writing, commit_batches=True)
        conn.execute("BEGIN TRANSACTION")
        row_counts["executions"] = _insert_table(
            conn, scan, specs[-1], writing, commit_batches=False
        )
        clear_import_pending(conn)
        # The COMMIT may checkpoint, and merge, itself: it gets the merge's memory too.
        _set_memory_limit(conn, merge_limit)
        conn.execute("RESET max_vacuum_tasks")
        conn.execute("COMMIT")
    except BaseException:
        rollback(conn)
        with contextlib.suppress(duckdb.Error):
            _delete_rows(conn, sorted(writing), orphans_only=True)
            clear_import_pending(conn)
        raise
    _merge_row_groups(conn, db_label, merge_limit)
    return plan, row_counts


def _merge_memory_limit(scan: Scan, import_limit: int) -> int:
    """The memory limit for merging the imported row groups: the import's, or more for wide rows.

    The merge holds about a vector's worth (2,048 rows) of a table's values at a time, so
    what it needs grows with the width of the rows, not with their number: 40-50 MiB for the
    benchmark's 27 KB rows, 84-88 MiB for 89 KB ones (64 KiB bodies; FATAL "failed to pin
    block" at 80). 1,280 times the widest table's average line (its member's bytes over the
    rows the manifest gives it) leaves a margin over that.
    """
    widest = max(
        (
            scan.members[f"{TABLES_FOLDER}/{table['name']}.jsonl"]["size"] // table["rows"]
            for table in scan.manifest.get("tables", ())
            if table["rows"] and f"{TABLES_FOLDER}/{table['name']}.jsonl" in scan.members
        ),
        default=0,
    )
    return max(import_limit, _MERGE_ROWS_HELD * widest)


def _set_memory_limit(conn: duckdb.DuckDBPyConnection, limit: int) -> None:
    conn.execute(f"SET memory_limit = '{-(-limit // MIB)}MiB'")


def _merge_row_groups(conn: duckdb.DuckDBPyConnection, db_label: str, memory_limit: int) -> None:
    """Checkpoint now, merging the small row groups the import wrote within its memory limit.

    Left alone, the next checkpoint of the store (by whichever process writes it next, at
    DuckDB's default limit) would merge them. The import is committed already: a failed
    checkpoint leaves the rows in the WAL for a later one, so it is logged, not raised.
    """
    try:
        _set_memory_limit(conn, memory_limit)
        conn.execute("CHECKPOINT")
    except duckdb.Error as error:
        log.warning(
            "%s: the import is committed, but merging its row groups failed (%s); they stay "
            "in the WAL for the store's next checkpoint",
            db_label,
            first_line(error),
        )


@contextlib.contextmanager
def _staging_directory(path: Path) -> Iterator[Path]:
    """A temporary directory for the validated rows (the system's, never the store's)."""
    try:
        directory = tempfile.TemporaryDirectory(prefix="truva-import-")
    except OSError as error:
        raise BundleError(
            f"{path}: cannot create a temporary directory to stage its rows "
            f"({first_line(error)}); nothing was imported"
        ) from error
    with directory as name:
        yield Path(name)


def import_bundle(
    db_path: str | os.PathLike[str],
    bundle_path: str | os.PathLike[str],
    *,
    replace: bool = False,
    limits: BundleLimits | None = None,
    lock_timeout_s: float = DEFAULT_LOCK_TIMEOUT_S,
) -> ImportResult:
    """Validate the bundle completely, then write its executions into the store.

    Validation reads each member once, staging the decoded rows in a temporary directory;
    writing inserts the staged batches. New executions are written in committed batches while
    this process holds the file, each execution's `executions` row last and together, so no
    reader ever sees a partial execution (rows left by a crash have no `executions` row and are
    removed by the next import of that execution); Python holds one row and one batch at a
    time, whatever the bundle's size. An execution already in the
    store with identical rows is skipped, so importing twice changes nothing. One with different
    rows is refused (BundleConflictError, nothing written) unless `replace`, which deletes its
    rows first, in one transaction with the whole import. The store is created when missing.
    """
    path = Path(bundle_path)
    limits = limits or BundleLimits()
    with _staging_directory(path) as staging, open_archive(path, limits) as archive:
        try:
            with paused_gc():
                scan = scan_bundle(path, archive, limits, staging)
            pa.default_memory_pool().release_unused()  # the scan's batches, before DuckDB's
        except OSError as error:
            raise BundleError(
                f"{path}: cannot stage its rows in {staging} ({first_line(error)}); nothing "
                "was imported"
            ) from error
        paths = store_paths(db_path)
        store = Store(paths, lock_timeout_s=lock_timeout_s)
        with store.session(create=True) as conn:
            try:
                plan, row_counts = _write_bundle(conn, store.path, scan, replace=replace)
            except duckdb.InterruptException:  # a Ctrl-C: rolled back, and main says so
                raise
            except duckdb.Error as error:
                raise BundleError(
                    f"{store.path}: writing {path} failed ({first_line(error)}); nothing "
                    "was imported"
                ) from error
            finally:
                with contextlib.suppress(duckdb.Error):
                    conn.execute("RESET memory_limit")
                    conn.execute("RESET threads")
                    conn.execute("RESET max_vacuum_tasks")
    return ImportResult(
        bundle=path,
        db=paths.given,
        imported=tuple(plan.imported),
        skipped=tuple(plan.skipped),
        replaced=tuple(plan.replaced),
        row_counts=row_counts,
        redacted=scan.manifest["redaction"]["applied"],
        tool_version=scan.manifest["tool_version"],
    )
