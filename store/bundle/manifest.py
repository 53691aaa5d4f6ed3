"""The bundle manifest: what is inside, built on export and checked field by field on import."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from executor import __version__
from store.bundle.archive import refuse, unsafe_member_reason
from store.bundle.format import (
    BUNDLE_FORMAT,
    BUNDLE_VERSION,
    COLUMN_ENCODINGS,
    MANIFEST_MEMBER,
    SPANS_MEMBER,
    describe,
    store_table_specs,
)
from store.schema import MIGRATIONS, SCHEMA_VERSION

_SHA256_HEX = re.compile(r"^[0-9a-f]{64}$")


def build_manifest(
    execution_ids: Sequence[str],
    members: Sequence[tuple[str, int, str]],
    row_counts: Mapping[str, int],
    span_count: int,
    *,
    redaction: Mapping[str, Any],
    created_at: str,
) -> dict[str, Any]:
    """The manifest of a bundle of these members (every member but the manifest itself), each
    given as its name, size and SHA-256 (hex)."""
    tables = [
        {
            "name": spec.name,
            "member": spec.member,
            "rows": row_counts.get(spec.name, 0),
            "primary_key": list(spec.primary_key),
            "columns": [
                {
                    "name": column.name,
                    "type": column.type,
                    "nullable": column.nullable,
                    "encoding": COLUMN_ENCODINGS.get(column.type, "json"),
                }
                for column in spec.columns
            ],
        }
        for spec in store_table_specs()
    ]
    return {
        "format": BUNDLE_FORMAT,
        "bundle_version": BUNDLE_VERSION,
        "schema_version": SCHEMA_VERSION,
        "tool_version": __version__,
        "created_at": created_at,
        "execution_ids": list(execution_ids),
        "redaction": dict(redaction),
        "tables": tables,
        "spans": {
            "member": SPANS_MEMBER,
            "encoding": "OTLP/JSON ExportTraceServiceRequest",
            "spans": span_count,
        },
        "members": [
            {"name": name, "size": size, "sha256": sha256} for name, size, sha256 in members
        ],
    }


def _require(path: Path, condition: bool, problem: str) -> None:
    if not condition:
        raise refuse(path, f"manifest.json: {problem}")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def check_manifest(path: Path, manifest: Any) -> dict[str, dict[str, Any]]:
    """Validate the manifest's fields; return its members by name."""
    _require(path, isinstance(manifest, dict), "expected a JSON object")
    found_format = manifest.get("format")
    if found_format != BUNDLE_FORMAT:
        raise refuse(
            path,
            f"not a truva bundle (manifest format is {describe(found_format)}, "
            f"expected {BUNDLE_FORMAT!r})",
        )
    version = manifest.get("bundle_version")
    _require(path, _is_int(version), f"bundle_version must be an integer, got {describe(version)}")
    if version != BUNDLE_VERSION:
        newer = "; upgrade truva-console" if version > BUNDLE_VERSION else ""
        raise refuse(
            path,
            f"bundle version {version} is not supported (this truva-console "
            f"reads version {BUNDLE_VERSION}){newer}",
        )
    schema_version = manifest.get("schema_version")
    _require(
        path,
        _is_int(schema_version),
        f"schema_version must be an integer, got {describe(schema_version)}",
    )
    if schema_version > SCHEMA_VERSION:
        raise refuse(
            path,
            f"store schema version {schema_version} is newer than this "
            f"truva-console understands ({SCHEMA_VERSION}); upgrade "
            "truva-console",
        )
    oldest = MIGRATIONS[0].version
    if schema_version < oldest:
        raise refuse(
            path,
            f"store schema version {schema_version} is older than any this "
            f"truva-console imports ({oldest} to {SCHEMA_VERSION})",
        )
    for key in ("tool_version", "created_at"):
        _require(
            path,
            isinstance(manifest.get(key), str),
            f"{key} must be text, got {describe(manifest.get(key))}",
        )
    ids = manifest.get("execution_ids")
    _require(
        path,
        isinstance(ids, list) and bool(ids) and all(isinstance(i, str) and i for i in ids),
        "execution_ids must be a non-empty list of ids",
    )
    _require(path, len(set(ids)) == len(ids), "execution_ids lists an id twice")
    redaction = manifest.get("redaction")
    _require(
        path,
        isinstance(redaction, dict) and isinstance(redaction.get("applied"), bool),
        'redaction must be an object with a boolean "applied"',
    )
    members = manifest.get("members")
    _require(path, isinstance(members, list), "members must be a list")
    by_name: dict[str, dict[str, Any]] = {}
    for index, member in enumerate(members):
        where = f"members[{index}]"
        _require(
            path,
            isinstance(member, dict) and isinstance(member.get("name"), str),
            f"{where} must be an object with a name",
        )
        name = member["name"]
        reason = unsafe_member_reason(name)
        if reason:
            raise refuse(path, f"manifest.json: member {name!r} has an unsafe path ({reason})")
        _require(
            path,
            name not in by_name and name != MANIFEST_MEMBER,
            f"{where} names {name!r} twice or names the manifest",
        )
        _require(
            path,
            _is_int(member.get("size")) and member["size"] >= 0,
            f"{where} ({name}) size must be a non-negative integer",
        )
        _require(
            path,
            isinstance(member.get("sha256"), str) and bool(_SHA256_HEX.match(member["sha256"])),
            f"{where} ({name}) sha256 must be 64 lowercase hex digits",
        )
        by_name[name] = member
    return by_name


def check_tables(path: Path, manifest: Mapping[str, Any], members: Mapping[str, Any]) -> None:
    tables = manifest.get("tables")
    _require(
        path,
        isinstance(tables, list) and all(isinstance(t, dict) for t in tables),
        "tables must be a list of objects",
    )
    version = manifest["schema_version"]
    found_names = [str(table.get("name")) for table in tables]
    expected_names = [spec.name for spec in store_table_specs(version)]
    if sorted(found_names) != sorted(expected_names):
        raise refuse(
            path,
            f"manifest.json: tables must be exactly {', '.join(expected_names)}, got "
            f"{', '.join(found_names) or 'none'}",
        )
    by_name = {table["name"]: table for table in tables}
    for spec in store_table_specs(version):
        table = by_name[spec.name]
        _require(
            path,
            table.get("member") == spec.member and spec.member in members,
            f"table {spec.name} must be in member {spec.member}, listed in members",
        )
        _require(
            path,
            _is_int(table.get("rows")) and table["rows"] >= 0,
            f"table {spec.name} rows must be a non-negative integer",
        )
        columns = table.get("columns")
        found = (
            [(c.get("name"), c.get("type")) for c in columns if isinstance(c, dict)]
            if isinstance(columns, list)
            else []
        )
        expected = [(c.name, c.type) for c in spec.columns]
        if found != expected:
            missing = [name for name, _ in expected if name not in dict(found)]
            extra = [str(name) for name, _ in found if name not in dict(expected)]
            detail = (
                "; ".join(
                    part
                    for part in (
                        f"missing {', '.join(missing)}" if missing else "",
                        f"unknown {', '.join(extra)}" if extra else "",
                    )
                    if part
                )
                or "names, types or order differ"
            )
            raise refuse(
                path,
                f"manifest.json: table {spec.name} columns do not match store "
                f"schema version {version} ({detail})",
            )
    spans = manifest.get("spans")
    _require(
        path,
        isinstance(spans, dict) and spans.get("member") == SPANS_MEMBER and SPANS_MEMBER in members,
        f"spans must name member {SPANS_MEMBER}",
    )
