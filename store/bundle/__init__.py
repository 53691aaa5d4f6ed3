"""Trace bundles: executions' store rows, their OTLP spans and a manifest in one zip file.

`export_bundle` reads the rows of chosen executions in one short session, redacts secrets (by
default), rebuilds the spans from the rows and writes the zip atomically. `read_bundle`
validates a bundle completely without touching any store; `import_bundle` then writes its rows
in bounded batches, skipping executions already present with identical rows. The format is
described member by member in docs/bundles.md.

Modules: `format` (members, tables, row encoding), `archive` (safe reading of the zip),
`manifest`, `redaction`, `spans` (rows back to events and spans), `export`, `validate`
(`read_bundle`), `staging` (validated rows in Arrow IPC files) and `importer`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from executor.lazy import lazy_attributes

# Public name -> the module that defines it, imported on first use (the child that builds
# an export's spans imports this package without DuckDB or pyarrow).
_PUBLIC = {
    "BUNDLE_FORMAT": "store.bundle.format",
    "BUNDLE_VERSION": "store.bundle.format",
    "Bundle": "store.bundle.format",
    "BundleConflictError": "store.bundle.format",
    "BundleError": "store.bundle.format",
    "BundleExportError": "store.bundle.format",
    "BundleLimits": "store.bundle.archive",
    "BundleValueError": "store.bundle.format",
    "ColumnSpec": "store.bundle.format",
    "ExportResult": "store.bundle.export",
    "ImportResult": "store.bundle.importer",
    "MANIFEST_MEMBER": "store.bundle.format",
    "README_MEMBER": "store.bundle.format",
    "REDACTED_COLUMNS": "store.bundle.redaction",
    "SPANS_MEMBER": "store.bundle.format",
    "TABLES_FOLDER": "store.bundle.format",
    "TableSpec": "store.bundle.format",
    "decode_value": "store.bundle.format",
    "encode_row": "store.bundle.format",
    "encode_value": "store.bundle.format",
    "events_from_rows": "store.bundle.spans",
    "export_bundle": "store.bundle.export",
    "format_members": "store.bundle.archive",
    "import_bundle": "store.bundle.importer",
    "read_bundle": "store.bundle.validate",
    "read_execution_rows": "store.bundle.format",
    "redact_body": "store.bundle.redaction",
    "redact_row": "store.bundle.redaction",
    "spans_document": "store.bundle.spans",
    "store_table_specs": "store.bundle.format",
    "unsafe_member_reason": "store.bundle.archive",
    "write_bundle": "store.bundle.export",
}

__all__ = [
    "BUNDLE_FORMAT",
    "BUNDLE_VERSION",
    "MANIFEST_MEMBER",
    "README_MEMBER",
    "REDACTED_COLUMNS",
    "SPANS_MEMBER",
    "TABLES_FOLDER",
    "Bundle",
    "BundleConflictError",
    "BundleError",
    "BundleExportError",
    "BundleLimits",
    "BundleValueError",
    "ColumnSpec",
    "ExportResult",
    "ImportResult",
    "TableSpec",
    "decode_value",
    "encode_row",
    "encode_value",
    "events_from_rows",
    "export_bundle",
    "format_members",
    "import_bundle",
    "read_bundle",
    "read_execution_rows",
    "redact_body",
    "redact_row",
    "spans_document",
    "store_table_specs",
    "unsafe_member_reason",
    "write_bundle",
]

if TYPE_CHECKING:
    from store.bundle.archive import BundleLimits, format_members, unsafe_member_reason
    from store.bundle.export import ExportResult, export_bundle, write_bundle
    from store.bundle.format import (
        BUNDLE_FORMAT,
        BUNDLE_VERSION,
        MANIFEST_MEMBER,
        README_MEMBER,
        SPANS_MEMBER,
        TABLES_FOLDER,
        Bundle,
        BundleConflictError,
        BundleError,
        BundleExportError,
        BundleValueError,
        ColumnSpec,
        TableSpec,
        decode_value,
        encode_row,
        encode_value,
        read_execution_rows,
        store_table_specs,
    )
    from store.bundle.importer import ImportResult, import_bundle
    from store.bundle.redaction import REDACTED_COLUMNS, redact_body, redact_row
    from store.bundle.spans import events_from_rows, spans_document
    from store.bundle.validate import read_bundle


__getattr__ = lazy_attributes("store.bundle", _PUBLIC, globals())
