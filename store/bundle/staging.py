"""Validated bundle rows staged in Arrow IPC files, so an import inflates each member once.

`scan_bundle` decodes and checks every row once; with a staging directory it appends the
decoded rows here, column by column, in record batches of bounded size. The import then hands
those batches to DuckDB without decoding any member again.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa

from store.bundle.format import ARROW_TYPES, MIB, TableSpec

# A staged record batch holds at most this many rows or bytes of text and bodies.
STAGE_ROWS = 2_000
STAGE_BYTES = 4 * MIB


def arrow_schema(spec: TableSpec) -> pa.Schema:
    """The Arrow schema a table's decoded rows are staged with."""
    return pa.schema([(column.name, ARROW_TYPES[column.type]) for column in spec.columns])


def binary_array(values: list[bytes | None]) -> pa.LargeBinaryArray:
    """`pa.array(values, type=pa.large_binary())`, the bytes copied by one join (a third of
    the time, for bodies)."""
    lengths = [0 if value is None else len(value) for value in values]
    null_count = values.count(None)
    validity = None
    if null_count:
        validity = pa.array([value is not None for value in values]).buffers()[1]
    offsets = pa.array(itertools.accumulate(lengths, initial=0), type=pa.int64()).buffers()[1]
    data = pa.py_buffer(b"".join([value for value in values if value is not None]))
    return pa.LargeBinaryArray.from_buffers(
        pa.large_binary(), len(values), [validity, offsets, data], null_count
    )


class StagedTable:
    """A table's decoded rows appended to an Arrow IPC file in bounded record batches."""

    def __init__(self, spec: TableSpec, path: Path) -> None:
        self.spec = spec
        self.path = path
        self.rows = 0
        self._schema = arrow_schema(spec)
        self._sink = pa.OSFile(str(path), "wb")
        self._writer = pa.ipc.new_stream(self._sink, self._schema)
        self._columns: dict[str, list[Any]] = {name: [] for name in self._schema.names}
        self._text_names = [
            field.name
            for field in self._schema
            if field.type in (pa.large_string(), pa.large_binary())
        ]
        self._pending_rows = 0
        self._pending_bytes = 0

    def append(self, row: Mapping[str, Any]) -> None:
        for name, values in self._columns.items():
            values.append(row[name])
        self._pending_rows += 1
        # The bytes of its text and bodies (the columns that hold str or bytes).
        self._pending_bytes += sum(map(len, filter(None, map(row.__getitem__, self._text_names))))
        if self._pending_rows >= STAGE_ROWS or self._pending_bytes >= STAGE_BYTES:
            self._flush()

    def _flush(self) -> None:
        if not self._pending_rows:
            return
        batch = pa.record_batch(
            [
                binary_array(self._columns[field.name])
                if field.type == pa.large_binary()
                else pa.array(self._columns[field.name], type=field.type)
                for field in self._schema
            ],
            schema=self._schema,
        )
        self._writer.write_batch(batch)
        self.rows += self._pending_rows
        self._columns = {name: [] for name in self._schema.names}
        self._pending_rows = self._pending_bytes = 0

    def close(self) -> None:
        """Write the last batch and close the file."""
        self._flush()
        self._writer.close()
        self._sink.close()

    def abandon(self) -> None:
        """Close the file without writing what is pending (the scan failed)."""
        self._sink.close()

    def batches(self) -> Iterator[pa.RecordBatch]:
        """The staged record batches, read one at a time."""
        with pa.OSFile(str(self.path), "rb") as source:
            reader = pa.ipc.open_stream(source)
            yield from reader
