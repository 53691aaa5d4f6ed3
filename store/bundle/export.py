"""Exporting executions to a bundle: one short read session, redaction, spans, an atomic zip."""

from __future__ import annotations

import contextlib
import json
import os
import stat
import tempfile
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb

from store.bundle.format import (
    MANIFEST_MEMBER,
    README_MEMBER,
    SPANS_MEMBER,
    BundleExportError,
    read_execution_rows,
    row_line,
    store_table_specs,
)
from store.bundle.manifest import build_manifest
from store.bundle.redaction import redact_row, redaction_manifest
from store.bundle.spans import spans_document
from store.connection import DEFAULT_LOCK_TIMEOUT_S, store_paths
from store.queries import Store, open_store

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

    Rows are read in one short session. Secrets are redacted unless `redact` is false. A
    running execution is refused when named and skipped by `None`. The file is written under
    a temporary name and renamed, so `output` is either the whole bundle or untouched.
    Raises BundleExportError, StoreOpenError, StoreBusyError or ExecutionNotFoundError.
    """
    output_path = Path(output)
    if execution_ids is not None and not execution_ids:
        raise BundleExportError(f"{output_path}: no execution ids given (None exports all)")
    _check_output(output_path, Path(db_path), overwrite=overwrite)
    store = open_store(db_path, lock_timeout_s=lock_timeout_s)
    with store.session() as conn:
        chosen, skipped_running = _choose_executions(store, conn, execution_ids)
        rows = read_execution_rows(conn, chosen)
    if redact:
        rows = {
            table: [redact_row(table, row) for row in table_rows]
            for table, table_rows in rows.items()
        }
    spans, span_count = spans_document(rows)
    size = write_bundle(
        output_path, chosen, rows, spans, span_count, redacted=redact, overwrite=overwrite
    )
    return ExportResult(
        path=output_path,
        execution_ids=tuple(chosen),
        skipped_running=tuple(skipped_running),
        redacted=redact,
        size_bytes=size,
        row_counts={table: len(table_rows) for table, table_rows in rows.items()},
        span_count=span_count,
    )


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
    """
    members: list[tuple[str, bytes]] = [(README_MEMBER, _README.encode("utf-8"))]
    row_counts = {}
    for spec in store_table_specs():
        table_rows = rows.get(spec.name, ())
        members.append((spec.member, b"".join(row_line(spec, row) for row in table_rows)))
        row_counts[spec.name] = len(table_rows)
    spans_bytes = json.dumps(spans, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"
    members.append((SPANS_MEMBER, spans_bytes))
    created_at = created_at or _utc_now_text()
    manifest = build_manifest(
        execution_ids,
        members,
        row_counts,
        span_count,
        redaction=redaction_manifest(redacted),
        created_at=created_at,
    )
    manifest_bytes = (json.dumps(manifest, ensure_ascii=False, indent=2) + "\n").encode("utf-8")
    stamp = datetime.fromisoformat(created_at.replace("Z", "+00:00")).timetuple()[:6]
    return _write_zip_atomically(
        output, [(MANIFEST_MEMBER, manifest_bytes), *members], stamp, overwrite=overwrite
    )


def _write_zip_atomically(
    output: Path, members: Sequence[tuple[str, bytes]], stamp: tuple[int, ...], *, overwrite: bool
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
                for name, data in members:
                    info = zipfile.ZipInfo(name, date_time=stamp)  # type: ignore[arg-type]
                    info.compress_type = zipfile.ZIP_DEFLATED
                    info.external_attr = (stat.S_IFREG | 0o644) << 16
                    archive.writestr(info, data, compresslevel=6)
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
