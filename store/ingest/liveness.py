"""Bringing a store up to date when a session opens it: spool ingest and writer liveness.

Ready segments are ingested oldest first in bounded groups (a faulty one is set aside, never
deleted unread); executions whose recorder's lease is no longer held are marked `interrupted`.
"""

from __future__ import annotations

import contextlib
import logging
import shutil
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

import duckdb
import pyarrow as pa

from executor.policy.conditions import counted
from store.connection import StorePaths, first_line
from store.errors import StoreAccessError, StoreOpenError
from store.ingest.upsert import SegmentDecodeError, apply_segments
from store.spool import (
    FAILED_SUFFIX,
    DamagedJournal,
    dead_writers,
    orphaned_leases,
    read_segment,
    ready_segments,
    reap_writer,
    remove_files,
    seal_orphaned_journals,
    set_aside_segment,
)

log = logging.getLogger(__name__)

# At most this many segment bytes go into one ingest transaction.
_MAX_INGEST_BYTES = 256 * 1024 * 1024
# DuckDB's memory limit while it ingests a group of at most LIMITED_GROUP_BYTES (its default
# is 80 % of RAM): under it, the appended rows' blocks are reused instead of held, ~70 → ~30 MB
# above the process for a 1,000-step batch of a run. A bigger group (large bodies) keeps the
# default, and a limited group that runs out of memory is applied again without the limit.
INGEST_MEMORY_LIMIT = "100MB"
LIMITED_GROUP_BYTES = 16 * 1024 * 1024


# DuckDB errors caused by a segment's values rather than by the database or the machine.
_SEGMENT_DATA_ERRORS = (duckdb.DataError, duckdb.IntegrityError)
_SEGMENT_FAULTS = (SegmentDecodeError, *_SEGMENT_DATA_ERRORS)


def ingest_spool(conn: duckdb.DuckDBPyConnection, paths: StorePaths) -> int:
    """Ingest every ready spool segment, oldest first; return how many were written.

    A segment already recorded in `ingested_segments` (its delete was lost) is only deleted.
    A segment whose bytes are not an Arrow file, or whose events do not decode or fit their
    columns, is renamed `*.failed` and kept. Any other DuckDB failure (I/O, a full disk, out of
    memory) stops the ingest with StoreAccessError and leaves every segment not yet written in
    the spool for the next session.
    """
    segments = ready_segments(paths)
    if not segments:
        return 0
    done = {
        row[0]
        for row in conn.execute(
            "SELECT segment FROM ingested_segments WHERE list_contains($names, segment)",
            {"names": [path.name for path in segments]},
        ).fetchall()
    }
    _forget_segments(conn, [path for path in segments if path.name in done])
    pending = [path for path in segments if path.name not in done]
    written = 0
    for group, group_bytes in _groups_by_size(pending):
        loaded = _load_segments(group)
        try:
            _apply_group(conn, loaded, limited=group_bytes <= LIMITED_GROUP_BYTES)
        except (*_SEGMENT_FAULTS, duckdb.OutOfMemoryException) as error:
            # One bad segment must not stop every reader, nor one batch too big for memory.
            log.warning("ingesting %d spool segments together failed (%s)", len(loaded), error)
            loaded = _apply_one_by_one(conn, paths, loaded)
        except duckdb.Error as error:
            raise _ingest_failed(paths, error) from error
        written += len(loaded)
        _forget_segments(conn, [path for path, _ in loaded])
    return written


def _ingest_failed(paths: StorePaths, error: duckdb.Error) -> StoreAccessError:
    kept = len(ready_segments(paths))
    return StoreAccessError(
        f"{paths.label}: cannot ingest the spool ({first_line(error)}); its "
        f"{counted(kept, 'segment')} {'is' if kept == 1 else 'are'} kept in {paths.segments} "
        "for the next try"
    )


def _names(loaded: Sequence[tuple[Path, pa.Table]]) -> list[str]:
    return [path.name for path, _ in loaded]


def _apply_group(
    conn: duckdb.DuckDBPyConnection, loaded: Sequence[tuple[Path, pa.Table]], *, limited: bool
) -> None:
    """`apply_segments` of the loaded segments, under INGEST_MEMORY_LIMIT when `limited` (and
    again without it when that runs out of memory)."""
    tables, names = [table for _, table in loaded], _names(loaded)
    if limited:
        try:
            with _memory_limit(conn, INGEST_MEMORY_LIMIT):
                apply_segments(conn, tables, segment_names=names)
            return
        except duckdb.OutOfMemoryException as error:
            log.info("ingesting %d spool segments under %s failed (%s); again without it",
                     len(loaded), INGEST_MEMORY_LIMIT, error)  # fmt: skip
    apply_segments(conn, tables, segment_names=names)


@contextlib.contextmanager
def _memory_limit(conn: duckdb.DuckDBPyConnection, limit: str) -> Iterator[None]:
    """DuckDB's `memory_limit` set to `limit` for the block, then its default again."""
    conn.execute(f"SET memory_limit = '{limit}'")
    try:
        yield
    finally:
        with contextlib.suppress(duckdb.Error):
            conn.execute("RESET memory_limit")


def _groups_by_size(segments: Sequence[Path]) -> Iterable[tuple[list[Path], int]]:
    """The segments in order, in groups of at most `_MAX_INGEST_BYTES`, with their bytes."""
    group: list[Path] = []
    group_bytes = 0
    for path in segments:
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            continue
        if group and group_bytes + size > _MAX_INGEST_BYTES:
            yield group, group_bytes
            group, group_bytes = [], 0
        group.append(path)
        group_bytes += size
    if group:
        yield group, group_bytes


def _load_segments(paths: Sequence[Path]) -> list[tuple[Path, pa.Table]]:
    """The segments' tables. One that is not an Arrow file is set aside; an OSError is raised."""
    loaded = []
    for path in paths:
        try:
            loaded.append((path, read_segment(path, dictionary_bodies=True)))
        except FileNotFoundError:
            continue  # another thread of this process already ingested it
        except DamagedJournal as error:  # the frames before the damage go in; the file is kept
            kept = path.with_name(path.name + FAILED_SUFFIX)
            shutil.copyfile(path, kept)
            log.warning("spool segment %s is damaged (%s); its %d event(s) before the damage "
                        "are ingested, the file is kept as %s", path, error, error.table.num_rows,
                        kept.name)  # fmt: skip
            loaded.append((path, error.table))
        except pa.ArrowException as error:
            log.warning("spool segment %s is unreadable (%s); kept as .failed", path, error)
            set_aside_segment(path)
    return loaded


def _apply_one_by_one(
    conn: duckdb.DuckDBPyConnection, paths: StorePaths, loaded: Sequence[tuple[Path, pa.Table]]
) -> list[tuple[Path, pa.Table]]:
    """Apply segments singly, setting aside the faulty ones; stop at any other DuckDB error.

    Segments applied before such a stop are in `ingested_segments`, so the next session only
    deletes them.
    """
    applied = []
    for path, table in loaded:
        try:
            apply_segments(conn, [table], segment_names=[path.name])
        except _SEGMENT_FAULTS as error:
            log.warning("spool segment %s cannot be ingested (%s); kept as .failed", path, error)
            set_aside_segment(path)
            continue
        except duckdb.Error as error:
            raise _ingest_failed(paths, error) from error
        applied.append((path, table))
    return applied


def _forget_segments(conn: duckdb.DuckDBPyConnection, segments: Sequence[Path]) -> None:
    """Delete ingested segment files, then the `ingested_segments` rows of those now gone."""
    if not segments:
        return
    gone = remove_files(segments)
    if gone:
        conn.execute(
            "DELETE FROM ingested_segments WHERE list_contains($names, segment)",
            {"names": [path.name for path in gone]},
        )


_MARK_INTERRUPTED = """
UPDATE executions SET
    status = 'interrupted',
    finished_at = coalesce(activity.last_at, executions.started_at),
    stop_reason = coalesce(
        executions.stop_reason,
        'the recorder (pid ' || coalesce(CAST(executions.writer_pid AS VARCHAR), '?')
            || ' on ' || coalesce(executions.writer_host, '?')
            || ') stopped before the execution finished'
    )
FROM (
    SELECT target.execution_id, max(activity_at) AS last_at
    FROM (SELECT unnest($execution_ids) AS execution_id) AS target
    LEFT JOIN (
        SELECT execution_id, greatest(started_at, finished_at) AS activity_at FROM steps
        UNION ALL
        SELECT execution_id, greatest(started_at, responded_at, decided_at) FROM attempts
        UNION ALL
        SELECT execution_id, called_at FROM llm_calls
        UNION ALL
        SELECT execution_id, occurred_at FROM events
    ) AS recorded USING (execution_id)
    GROUP BY target.execution_id
) AS activity
WHERE executions.execution_id = activity.execution_id
"""


def mark_interrupted(conn: duckdb.DuckDBPyConnection, writer_tokens: set[str | None]) -> list[str]:
    """Mark running executions of the given dead writers (None: unknown writer) interrupted."""
    tokens = sorted(token for token in writer_tokens if token is not None)
    execution_ids = [
        row[0]
        for row in conn.execute(
            "SELECT execution_id FROM executions WHERE status = 'running' "
            "AND (list_contains($tokens, writer_token) OR ($unknown AND writer_token IS NULL))",
            {"tokens": tokens, "unknown": None in writer_tokens},
        ).fetchall()
    ]
    if not execution_ids:
        return []
    conn.execute("BEGIN TRANSACTION")
    try:
        conn.execute(_MARK_INTERRUPTED, {"execution_ids": execution_ids})
        conn.execute(
            "UPDATE steps SET status = 'interrupted' "
            "WHERE status = 'running' AND list_contains($execution_ids, execution_id)",
            {"execution_ids": execution_ids},
        )
        conn.execute("COMMIT")
    except BaseException:
        # A failed COMMIT has already rolled back; the original error is the one to report.
        with contextlib.suppress(duckdb.Error):
            conn.execute("ROLLBACK")
        raise
    return execution_ids


def maintain(conn: duckdb.DuckDBPyConnection, paths: StorePaths) -> None:
    """Bring the database up to date: ingest the spool, then mark dead writers' runs interrupted.

    Writers already known are checked before ingesting, so every segment they renamed is in by
    the time their unfinished executions are marked. Writers first seen in this ingest are
    checked after it; one that died in between may be marked too early, and its finish, ingested
    on the next open, overrides `interrupted`. A spool that cannot be used (not a directory, no
    permission) raises StoreOpenError naming it; a failed ingest raises StoreAccessError.
    """
    try:
        _maintain(conn, paths)
    except OSError as error:
        where = error.filename or paths.spool
        raise StoreOpenError(
            f"{paths.label}: cannot use its spool: {where}: {error.strerror or error}"
        ) from error


def _maintain(conn: duckdb.DuckDBPyConnection, paths: StorePaths) -> None:
    known_tokens = _running_writer_tokens(conn)
    dead = dead_writers(paths, known_tokens) | set(orphaned_leases(paths))
    dead |= seal_orphaned_journals(paths)  # a killed writer's journal is all it left
    if ingest_spool(conn, paths):
        new_tokens = _running_writer_tokens(conn) - known_tokens
        dead |= dead_writers(paths, new_tokens)
    if dead:
        mark_interrupted(conn, dead)
        for token in dead:
            if token is not None:
                reap_writer(paths, token)


def _running_writer_tokens(conn: duckdb.DuckDBPyConnection) -> set[str | None]:
    return {
        row[0]
        for row in conn.execute(
            "SELECT DISTINCT writer_token FROM executions WHERE status = 'running'"
        ).fetchall()
    }
