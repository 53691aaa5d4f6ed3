"""Executor events to store rows: segment encoding, folding, set-based upserts, spool ingest.

`segments` encodes events for the spool (the recorder's side), `fold` folds decoded events into
one row per key, `upsert` writes those rows from Arrow in one transaction, and `liveness` ingests
the spool when a session opens the store and marks dead writers' executions interrupted.
"""

from store.ingest.fold import FoldedRows, fold_segments
from store.ingest.liveness import ingest_spool, maintain, mark_interrupted
from store.ingest.segments import (
    SEGMENT_SCHEMA,
    SegmentRecord,
    encode_events,
    encode_records,
    json_text,
    records_table,
)
from store.ingest.upsert import (
    SegmentDecodeError,
    StagedRows,
    apply_segments,
    decode_segments,
    stage_rows,
    write_staged,
)

__all__ = [
    "SEGMENT_SCHEMA",
    "FoldedRows",
    "SegmentDecodeError",
    "SegmentRecord",
    "StagedRows",
    "apply_segments",
    "decode_segments",
    "encode_events",
    "encode_records",
    "fold_segments",
    "ingest_spool",
    "json_text",
    "maintain",
    "mark_interrupted",
    "records_table",
    "stage_rows",
    "write_staged",
]
