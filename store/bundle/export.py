"""Exporting executions to a bundle: batches of rows in short sessions, redaction, spans, a zip.

Longer than ~600 lines on purpose: the batched writer and the whole-selection writer it falls
back to share the staged members, their pieces and the JSON pieces, and must write the same
bytes; apart, each would need the other's private details.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import os
import queue
import stat
import tempfile
import threading
import time
import zipfile
import zlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb

from store.bundle.format import (
    MANIFEST_MEMBER,
    MIB,
    README_MEMBER,
    SPANS_MEMBER,
    BundleExportError,
    execution_weights,
    follows_execution_order,
    paused_gc,
    read_execution_rows,
    row_line,
    store_table_specs,
)
from store.bundle.manifest import build_manifest
from store.bundle.redaction import redact_row, redaction_manifest
from store.bundle.span_child import chunked
from store.bundle.span_worker import SpanWorker
from store.bundle.spans import (
    SPANS_MARKER,
    SpanKey,
    SpansNeedSdk,
    default_resource,
    events_from_rows,
    keyed_span_lines,
    otlp_json,
    plain_spans_possible,
    span_document_frame,
    spans_document,
)
from store.connection import DEFAULT_LOCK_TIMEOUT_S, store_paths
from store.queries import Store, open_store

try:  # the same DEFLATE streams, made several times faster (a pinned dependency)
    from zlib_ng import zlib_ng as deflate_module
except ImportError:  # pragma: no cover - without it, the standard library's zlib
    deflate_module = zlib

_README = """\
A truva-console trace bundle (format truva-bundle, version 1): recorded executions of AI-agent
tool calls, with every attempt, routing decision, backoff wait and LLM call.

  manifest.json      what is inside: versions, execution ids, redaction, tables with their
                     columns, and the size and SHA-256 of every other member
  tables/*.jsonl     the debug store's rows for these executions, one JSON object per line;
                     BLOB columns are base64, JSON columns are JSON text, times are UTC
                     text 'YYYY-MM-DD HH:MM:SS.ffffff'
  spans.otlp.json    the executions as OpenTelemetry spans (an OTLP/JSON
                     ExportTraceServiceRequest)

Load it into a store with:  truva-console import BUNDLE
Read it without truva-console:
  unzip -p BUNDLE tables/attempts.jsonl | jq -r '[.step_id, .n, .http_status, .rule_id] | @tsv'
See docs/bundles.md in truva-console for every member and column.
"""


@dataclass(frozen=True, slots=True)
class ExportResult:
    """What `export_bundle` wrote."""

    path: Path
    execution_ids: tuple[str, ...]
    skipped_running: tuple[str, ...]
    redacted: bool
    size_bytes: int
    row_counts: Mapping[str, int]
    span_count: int


def _utc_now_text() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _choose_executions(
    store: Store, conn: duckdb.DuckDBPyConnection, requested: Sequence[str] | None
) -> tuple[list[str], list[str]]:
    """The execution ids to export and, for `requested=None` (all), the running ones skipped."""
    if requested is None:
        chosen, running = store.executions_in_order(conn)
        if not chosen:
            detail = f" ({len(running)} still running)" if running else ""
            raise BundleExportError(f"{store.path}: no finished executions to export{detail}")
        return chosen, running

    def still_running(execution_id: str) -> BundleExportError:
        return BundleExportError(
            f"{store.path}: execution {execution_id} is still running; export it once it "
            "has finished (or once its recorder has stopped and it shows as interrupted)"
        )

    return store.resolve_finished(conn, requested, still_running), []


def _check_output(output: Path, db: Path, *, overwrite: bool) -> None:
    if output.is_dir():
        raise BundleExportError(f"{output}: is a directory, expected a bundle file name")
    if not output.parent.is_dir():
        raise BundleExportError(f"{output}: its directory {output.parent} does not exist")
    try:
        existing = output.stat()
    except OSError:
        existing = None
    if existing is not None and not stat.S_ISREG(existing.st_mode):
        raise BundleExportError(
            f"{output}: exists and is not a regular file (a device, pipe or socket); "
            "choose a file name"
        )
    if output.exists() and not overwrite:
        raise BundleExportError(f"{output}: already exists (pass --force to overwrite it)")
    paths = store_paths(db)
    target = output.resolve()
    if target == paths.db.resolve() or paths.spool.resolve() in target.parents:
        raise BundleExportError(f"{output}: is the store itself; choose another file name")


def export_bundle(
    db_path: str | os.PathLike[str],
    output: str | os.PathLike[str],
    execution_ids: Sequence[str] | None,
    *,
    redact: bool = True,
    overwrite: bool = False,
    lock_timeout_s: float = DEFAULT_LOCK_TIMEOUT_S,
) -> ExportResult:
    """Write the executions `execution_ids` (ids or unique prefixes; None for all) to `output`.

    Rows are read a batch of whole executions at a time (`_BATCH_WEIGHT`) in short sessions
    (`_batch_rows`) and written out before the next is read, so memory is bounded by a batch
    and not the selection. Secrets are redacted unless `redact` is false. A running execution
    is refused when named and skipped by `None`. The file is written under a temporary name
    and renamed, so `output` is either the whole bundle or untouched.
    Raises BundleExportError, StoreOpenError, StoreBusyError or ExecutionNotFoundError.
    """
    output_path = Path(output)
    if execution_ids is not None and not execution_ids:
        raise BundleExportError(f"{output_path}: no execution ids given (None exports all)")
    _check_output(output_path, Path(db_path), overwrite=overwrite)
    store = open_store(db_path, lock_timeout_s=lock_timeout_s)
    with store.session() as conn:
        chosen, skipped_running = _choose_executions(store, conn, execution_ids)
        batches = _execution_batches(conn, chosen)
    written: tuple[int, Mapping[str, int], int] | None = None
    with paused_gc():
        if batches is not None:
            with contextlib.suppress(SpansNeedSdk):
                written = _write_in_batches(
                    store, output_path, chosen, batches, redact=redact, overwrite=overwrite
                )
        if written is None:
            written = _write_whole(store, output_path, chosen, redact=redact, overwrite=overwrite)
    size, row_counts, span_count = written
    return ExportResult(
        path=output_path,
        execution_ids=tuple(chosen),
        skipped_running=tuple(skipped_running),
        redacted=redact,
        size_bytes=size,
        row_counts=row_counts,
        span_count=span_count,
    )


# A batch holds whole executions up to about this weight: a row is `_ROW_WEIGHT` and its
# bodies their bytes (the bench's 80 MB of prompts in 6 batches).
_BATCH_WEIGHT = 16 * MIB
_ROW_WEIGHT = 1024
_SESSION_HOLD_S = 0.5


def _execution_batches(
    conn: duckdb.DuckDBPyConnection, chosen: Sequence[str]
) -> list[list[str]] | None:
    """`chosen` in id order, cut into batches of about `_BATCH_WEIGHT`; None when a table's
    rows are not in execution order (read whole, as `_write_whole` does)."""
    if not all(follows_execution_order(conn, spec, chosen) for spec in store_table_specs()):
        return None
    batches: list[list[str]] = []
    batch: list[str] = []
    weight = 0
    for execution_id, execution_weight in execution_weights(conn, chosen, _ROW_WEIGHT):
        if batch and weight + execution_weight > _BATCH_WEIGHT:
            batches.append(batch)
            batch, weight = [], 0
        batch.append(execution_id)
        weight += execution_weight
    if batch:
        batches.append(batch)
    return batches


def _redacted(rows: dict[str, list[dict[str, Any]]]) -> dict[str, list[dict[str, Any]]]:
    for table, table_rows in rows.items():
        for index, row in enumerate(table_rows):
            table_rows[index] = redact_row(table, row)
    return rows


def _write_whole(
    store: Store, output: Path, chosen: Sequence[str], *, redact: bool, overwrite: bool
) -> tuple[int, Mapping[str, int], int]:
    """The bundle from every row of `chosen` read at once and spans built over all of them:
    for tables out of execution order and spans the SDK must build."""
    with store.session() as conn:
        rows = read_execution_rows(conn, chosen)
    if redact:
        rows = _redacted(rows)
    spans, span_count = spans_document(rows)
    size = write_bundle(
        output, chosen, rows, spans, span_count, redacted=redact, overwrite=overwrite
    )
    return size, {table: len(table_rows) for table, table_rows in rows.items()}, span_count


def _write_in_batches(
    store: Store,
    output: Path,
    chosen: Sequence[str],
    batches: Sequence[Sequence[str]],
    *,
    redact: bool,
    overwrite: bool,
) -> tuple[int, Mapping[str, int], int]:
    """The bundle of `batches` (whole executions, in id order), one batch in memory at a time.

    Each table's lines go to its member as a batch is read; each batch's spans go to a spool
    file with their `SpanKey`, and the spans member is written from it in key order at the
    end: the bytes `write_bundle` writes for all rows at once. Raises SpansNeedSdk.
    """
    created_at = _utc_now_text()
    resource = default_resource()
    specs = store_table_specs()
    with contextlib.ExitStack() as stack:
        readme = _StagedMember.of(output, _README.encode("utf-8"), stack)
        members = {spec.name: stack.enter_context(_StagedMember(output)) for spec in specs}
        spool = stack.enter_context(_SpanSpool(output))
        runs = {name: _Runs(member) for name, member in members.items()}
        row_counts = dict.fromkeys(members, 0)
        worker = _span_worker(output, resource, spool, batches)
        if worker is not None:
            stack.enter_context(worker)
        for rows in stack.enter_context(contextlib.closing(_batch_rows(store, batches))):
            if redact:
                rows = _redacted(rows)
            if worker is not None and worker.stopped:
                break  # its answer, read by `finish`, says why
            # The child builds the spans unless it is behind; then this process builds them.
            events = None if worker is not None and worker.offer(rows) else events_from_rows(rows)
            for spec in specs:  # each table's rows let go once written; the events keep values
                table_rows = rows.pop(spec.name, [])
                runs[spec.name].add(row_line(spec, row) for row in table_rows)
                row_counts[spec.name] += len(table_rows)
                del table_rows
            if events is not None:
                for lines in chunked(keyed_span_lines(events, resource)):
                    spool.add(lines)
            del rows, events
        if worker is not None:
            worker.finish()
        for name, member in members.items():
            runs[name].close()
            member.close()
        spans_member = stack.enter_context(_StagedMember(output))
        spans_runs = _Runs(spans_member)
        spans_runs.add(spool.document_pieces(resource))
        spans_runs.close()
        spans_member.close()
        staged = [
            (README_MEMBER, readme),
            *((spec.member, members[spec.name]) for spec in specs),
            (SPANS_MEMBER, spans_member),
        ]
        manifest = build_manifest(
            chosen,
            [(name, member.size, member.digest.hexdigest()) for name, member in staged],
            row_counts,
            spool.count,
            redaction=redaction_manifest(redact),
            created_at=created_at,
        )
        manifest_bytes = (json.dumps(manifest, ensure_ascii=False, indent=2) + "\n").encode()
        stamp = datetime.fromisoformat(created_at.replace("Z", "+00:00")).timetuple()[:6]
        size = _write_zip_atomically(
            output,
            [(MANIFEST_MEMBER, _StagedMember.of(output, manifest_bytes, stack)), *staged],
            stamp,
            overwrite=overwrite,
        )
    return size, row_counts, spool.count


# Batches from which the spans are built in a child process (`span_worker`), beside the row
# lines: below, its start (~0.4 CPU-s of imports) would cost about what it saves.
_SPAN_WORKER_BATCHES = 2


def _span_worker(
    output: Path, resource: Any, spool: _SpanSpool, batches: Sequence[Sequence[str]]
) -> SpanWorker | None:
    """A child building the spans into `spool`, or None where they are built here (few
    batches, or no child could be started). Raises SpansNeedSdk where the SDK must."""
    if not plain_spans_possible():
        raise SpansNeedSdk
    if len(batches) < _SPAN_WORKER_BATCHES:
        return None
    try:
        return SpanWorker(output, resource, spool.add)
    except OSError:
        return None


def _batch_rows(
    store: Store, batches: Sequence[Sequence[str]]
) -> Iterator[dict[str, list[dict[str, Any]]]]:
    """Each batch's rows. A session is kept for the next batch while it is younger than
    `_SESSION_HOLD_S` (opening the store again costs ~0.07 CPU-s on the bench's), so another
    process waits at most about that and one batch's encoding."""
    with contextlib.ExitStack() as held:
        conn: duckdb.DuckDBPyConnection | None = None
        opened_at = 0.0
        for batch in batches:
            if conn is None:
                conn = held.enter_context(store.session())
                opened_at = time.monotonic()
            rows = read_execution_rows(conn, batch)
            _check_batch(store, rows, batch)
            if time.monotonic() - opened_at > _SESSION_HOLD_S:
                held.close()
                conn = None
            yield rows


def _check_batch(
    store: Store, rows: Mapping[str, Sequence[Mapping[str, Any]]], batch: Sequence[str]
) -> None:
    found = {row["execution_id"] for row in rows.get("executions", ())}
    for execution_id in batch:
        if execution_id not in found:
            raise BundleExportError(
                f"{store.path}: execution {execution_id} was removed from the store while it "
                "was being exported; export again"
            )


class _Runs:
    """Pieces written to a member in runs of about `_PIECE_BYTES`, joined as `_batched` joins
    them over all the pieces of one member, so a member is deflated in the same pieces."""

    def __init__(self, member: _StagedMember) -> None:
        self._member = member
        self._run: list[bytes] = []
        self._size = 0

    def add(self, pieces: Iterable[bytes]) -> None:
        for piece in pieces:
            self._run.append(piece)
            self._size += len(piece)
            if self._size >= _PIECE_BYTES:
                self._member.write(b"".join(self._run))
                self._run, self._size = [], 0

    def close(self) -> None:
        if self._run:
            self._member.write(b"".join(self._run))
            self._run, self._size = [], 0


def _scratch_file(output: Path, prefix: str) -> Any:
    """An unnamed temporary file beside `output` (same disk), or BundleExportError naming it."""
    try:
        return tempfile.TemporaryFile(dir=output.parent, prefix=prefix)
    except OSError as error:
        raise BundleExportError(f"{output}: cannot write: {error.strerror or error}") from error


class _SpanSpool:
    """The spans' compact JSON lines of every batch in a temporary file, each with its key;
    read back as the pieces of the spans document, spans in key order."""

    def __init__(self, output: Path) -> None:
        self._output = output
        self._entries: list[tuple[SpanKey, int, int]] = []
        self._end = 0
        self._lock = threading.Lock()  # `add` is called by a `SpanWorker`'s reader thread too

    def __enter__(self) -> _SpanSpool:
        self._file = _scratch_file(self._output, ".truva-spans.")
        return self

    def __exit__(self, *exc: object) -> None:
        self._file.close()

    @property
    def count(self) -> int:
        return len(self._entries)

    def add(self, keyed: Sequence[tuple[SpanKey, bytes]]) -> None:
        """Keep the `keyed` lines, written about `_PIECE_BYTES` at a time."""
        with self._lock:
            for piece in _batched(self._record(keyed)):
                try:
                    self._file.write(piece)
                except OSError as error:
                    raise BundleExportError(
                        f"{self._output}: cannot write: {error.strerror or error}"
                    ) from error

    def _record(self, keyed: Iterable[tuple[SpanKey, bytes]]) -> Iterator[bytes]:
        for key, line in keyed:
            self._entries.append((key, self._end, len(line)))
            self._end += len(line)
            yield line

    def document_pieces(self, resource: Any) -> Iterator[bytes]:
        """The pieces `write_bundle` writes for the spans document with these spans (in key
        order) and `resource`: those of `_json_pieces`, then a newline."""
        if not self._entries:
            yield from _text_pieces(itertools.chain(_json_pieces(otlp_json(()), 6), ["\n"]))
            return
        frame = [piece.encode("utf-8") for piece in _json_pieces(span_document_frame(resource), 6)]
        marker = _compact_json(SPANS_MARKER).encode("utf-8")
        if frame.count(marker) != 1:
            raise SpansNeedSdk
        at = frame.index(marker)
        yield from frame[:at]
        self._file.flush()
        self._entries.sort(key=lambda entry: entry[0])
        for index, line in enumerate(self._lines()):
            if index:
                yield b","
            yield line
        yield from frame[at + 1 :]
        yield b"\n"

    def _lines(self) -> Iterator[bytes]:
        """The lines in entry order; lines that lie one after the other in the file are read
        together, about `_PIECE_BYTES` at a time."""
        fd = self._file.fileno()
        entries = self._entries
        start = 0
        while start < len(entries):
            end, first = start + 1, entries[start][1]
            last = first + entries[start][2]
            while end < len(entries) and entries[end][1] == last and last - first < _PIECE_BYTES:
                last += entries[end][2]
                end += 1
            data = os.pread(fd, last - first, first)
            if len(data) != last - first:
                raise BundleExportError(f"{self._output}: the spans spool was cut short")
            view = memoryview(data)
            for _key, offset, length in entries[start:end]:
                yield bytes(view[offset - first : offset - first + length])
            start = end


def write_bundle(
    output: Path,
    execution_ids: Sequence[str],
    rows: Mapping[str, Sequence[Mapping[str, Any]]],
    spans: Mapping[str, Any],
    span_count: int,
    *,
    redacted: bool,
    overwrite: bool = False,
    created_at: str | None = None,
) -> int:
    """Write a bundle of raw `rows` and an OTLP/JSON `spans` document of `span_count` spans;
    return its size in bytes.

    Redaction is the caller's: `redacted` only records in the manifest whether it was applied.
    Each member is encoded in pieces and deflated into a temporary file as it goes (its size,
    SHA-256 and CRC-32 taken on the way), then copied into the zip after the manifest, so no
    member is ever held whole nor deflated twice.
    """
    created_at = created_at or _utc_now_text()
    stamp = datetime.fromisoformat(created_at.replace("Z", "+00:00")).timetuple()[:6]
    with contextlib.ExitStack() as stack:
        staged: list[tuple[str, _StagedMember]] = []

        def stage(name: str, pieces: Iterable[bytes]) -> None:
            member = stack.enter_context(_StagedMember(output))
            for piece in pieces:
                member.write(piece)
            member.close()
            staged.append((name, member))

        stage(README_MEMBER, [_README.encode("utf-8")])
        row_counts = {}
        for spec in store_table_specs():
            table_rows = rows.get(spec.name, ())
            stage(spec.member, _batched(row_line(spec, row) for row in table_rows))
            row_counts[spec.name] = len(table_rows)
        stage(SPANS_MEMBER, _batched_text(itertools.chain(_json_pieces(spans, 6), ["\n"])))
        manifest = build_manifest(
            execution_ids,
            [(name, member.size, member.digest.hexdigest()) for name, member in staged],
            row_counts,
            span_count,
            redaction=redaction_manifest(redacted),
            created_at=created_at,
        )
        manifest_bytes = (json.dumps(manifest, ensure_ascii=False, indent=2) + "\n").encode()
        return _write_zip_atomically(
            output,
            [(MANIFEST_MEMBER, _StagedMember.of(output, manifest_bytes, stack)), *staged],
            stamp,
            overwrite=overwrite,
        )


# Members are deflated by zlib-ng at level 6: on the benchmark's 110 MB `llm_calls` member
# 0.27 CPU-s and 7.0 MB, against zlib's 0.99 s and 4.4 MB (zlib-ng level 7: 0.60 s, 4.4 MB;
# zlib level 1: 0.35 s, 12.3 MB). Any inflater reads them.
_COMPRESS_LEVEL = 6
_PIECE_BYTES = MIB
_QUEUED_PIECES = 8


def _batched(pieces: Iterable[bytes]) -> Iterator[bytes]:
    """`pieces` joined into runs of about `_PIECE_BYTES` (fewer, larger writes)."""
    run: list[bytes] = []
    size = 0
    for piece in pieces:
        run.append(piece)
        size += len(piece)
        if size >= _PIECE_BYTES:
            yield b"".join(run)
            run, size = [], 0
    if run:
        yield b"".join(run)


def _compact_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _json_pieces(value: Any, depth: int) -> Iterator[str]:
    """`_compact_json(value)` in pieces: containers `depth` levels deep are walked, the values
    below them (the spans of an OTLP document, at 6) encoded whole by the C encoder."""
    if depth and isinstance(value, dict) and all(isinstance(key, str) for key in value):
        yield "{"
        for index, (key, item) in enumerate(value.items()):
            yield ("," if index else "") + _compact_json(key) + ":"
            yield from _json_pieces(item, depth - 1)
        yield "}"
    elif depth and isinstance(value, list | tuple):
        yield "["
        for index, item in enumerate(value):
            if index:
                yield ","
            yield from _json_pieces(item, depth - 1)
        yield "]"
    else:
        yield _compact_json(value)


def _batched_text(pieces: Iterable[str]) -> Iterator[bytes]:
    """Text `pieces` (a JSON encoder's many small ones) as UTF-8 runs of about `_PIECE_BYTES`."""
    return _batched(_text_pieces(pieces))


def _text_pieces(pieces: Iterable[str]) -> Iterator[bytes]:
    return (piece.encode("utf-8") for piece in pieces)


class _StagedMember:
    """A member deflated into a temporary file beside the bundle, with the size, SHA-256 and
    CRC-32 of its bytes taken on the way.

    Hashing, deflating and writing run on a worker thread (they release the GIL), so they
    overlap with encoding the next rows; at most `_QUEUED_PIECES` pieces wait for it.
    """

    def __init__(self, output: Path) -> None:
        self._output = output
        self.size = 0
        self.crc = 0
        self.compressed_size = 0
        self.digest = hashlib.sha256()
        self._compressor = deflate_module.compressobj(
            _COMPRESS_LEVEL, zlib.DEFLATED, -zlib.MAX_WBITS
        )
        self._pieces: queue.Queue[bytes | None] = queue.Queue(maxsize=_QUEUED_PIECES)
        self._error: BaseException | None = None
        self._worker: threading.Thread | None = None

    def __enter__(self) -> _StagedMember:
        self.file = _scratch_file(self._output, ".truva-member.")
        self._worker = threading.Thread(target=self._deflate, name="bundle-deflate", daemon=True)
        self._worker.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._finish()
        self.file.close()

    @classmethod
    def of(cls, output: Path, data: bytes, stack: contextlib.ExitStack) -> _StagedMember:
        member = stack.enter_context(cls(output))
        member.write(data)
        member.close()
        return member

    def _deflate(self) -> None:
        piece: bytes | None = b""
        try:
            while (piece := self._pieces.get()) is not None:
                self.digest.update(piece)
                self.crc = deflate_module.crc32(piece, self.crc)
                self._store(self._compressor.compress(piece))
            self._store(self._compressor.flush())
        except BaseException as error:  # reported by `close`
            self._error = error
            while piece is not None:  # take what the writer still queues, up to its end
                piece = self._pieces.get()

    def _store(self, data: bytes) -> None:
        self.file.write(data)
        self.compressed_size += len(data)

    def write(self, data: bytes) -> None:
        if data:
            self.size += len(data)
            self._pieces.put(data)

    def _finish(self) -> None:
        if self._worker is not None:
            self._pieces.put(None)
            self._worker.join()
            self._worker = None

    def close(self) -> None:
        """Deflate what is queued; raise what the worker met."""
        self._finish()
        if isinstance(self._error, OSError):
            raise BundleExportError(
                f"{self._output}: cannot write: {self._error.strerror or self._error}"
            ) from self._error
        if self._error is not None:
            raise self._error

    def copy_to(self, archive: zipfile.ZipFile, info: zipfile.ZipInfo) -> None:
        """Write the deflated bytes into `archive` as member `info`, without deflating again."""
        info.compress_type = zipfile.ZIP_DEFLATED
        info.file_size = self.size  # ZIP64 headers when it needs them
        with archive.open(info, "w") as dest:
            # zipfile writes the data as given; the sizes and CRC are ours, set before close()
            # writes them into the headers.
            dest._compressor = _Deflated()  # type: ignore[attr-defined]
            self.file.seek(0)
            while chunk := self.file.read(_PIECE_BYTES):
                archive.fp.write(chunk)  # type: ignore[union-attr]
            dest._file_size = self.size  # type: ignore[attr-defined]
            dest._compress_size = self.compressed_size  # type: ignore[attr-defined]
            dest._crc = self.crc  # type: ignore[attr-defined]


class _Deflated:
    """A stand-in compressor for data that is deflated already."""

    def compress(self, data: bytes) -> bytes:
        return data

    def flush(self) -> bytes:
        return b""


def _write_zip_atomically(
    output: Path,
    members: Sequence[tuple[str, _StagedMember]],
    stamp: tuple[int, ...],
    *,
    overwrite: bool,
) -> int:
    try:
        descriptor, temporary_name = tempfile.mkstemp(
            dir=output.parent, prefix=f".{output.name}.", suffix=".tmp"
        )
    except OSError as error:
        raise BundleExportError(f"{output}: cannot write: {error.strerror or error}") from error
    temporary = Path(temporary_name)
    try:
        with os.fdopen(descriptor, "wb") as handle:
            with zipfile.ZipFile(handle, "w", allowZip64=True) as archive:
                for name, member in members:
                    info = zipfile.ZipInfo(name, date_time=stamp)  # type: ignore[arg-type]
                    info.external_attr = (stat.S_IFREG | 0o644) << 16
                    member.copy_to(archive, info)
            handle.flush()
            os.fsync(handle.fileno())
        temporary.chmod(0o644)
        if overwrite:
            os.replace(temporary, output)
        else:
            try:
                os.link(temporary, output)  # fails if another process created it meanwhile
            except FileExistsError as error:
                raise BundleExportError(
                    f"{output}: already exists (pass --force to overwrite it)"
                ) from error
        return output.stat().st_size
    except OSError as error:
        raise BundleExportError(f"{output}: cannot write: {error.strerror or error}") from error
    finally:
        with contextlib.suppress(OSError):
            temporary.unlink()
