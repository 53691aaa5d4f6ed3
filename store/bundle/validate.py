"""Validating a whole bundle in bounded memory, and reading its rows (`read_bundle`)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import zipfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from store.bundle.archive import (
    BundleLimits,
    JsonStream,
    MemberDigest,
    check_directory,
    count_spans,
    member_lines,
    member_stream,
    open_archive,
    read_member,
    refuse,
    verify_member,
)
from store.bundle.format import (
    MANIFEST_MEMBER,
    SPANS_MEMBER,
    Bundle,
    BundleError,
    BundleValueError,
    TableSpec,
    decode_json,
    describe,
    encode_value,
    parse_json,
    reject_constant,
    store_table_specs,
    upgrade_row,
)
from store.bundle.manifest import check_manifest, check_tables
from store.bundle.staging import StagedTable
from store.records import FINISHED_EXECUTION_STATUSES


def _decode_line(
    path: Path, spec: TableSpec, number: int, line: str, execution_ids: set[str]
) -> dict[str, Any]:
    """One table row, decoded and checked; BundleError names the member, line and column.

    A row that orjson reads and a check refuses is judged again from json's reading
    (`parse_json`), so the message quotes the bundle's own digits; a line json cannot read
    (nested past its recursion, which orjson reads) is refused as not a JSON object, as before."""
    try:
        encoded = parse_json(line)
        row = _decoded_row(path, spec, number, encoded, execution_ids)
        if row is not None:
            return row
        encoded = decode_json(line)
    except (ValueError, RecursionError) as error:
        raise refuse(path, f"{spec.member} line {number}: not a JSON object") from error
    row = _decoded_row(path, spec, number, encoded, execution_ids, strict=True)
    assert row is not None
    return row


def _decoded_row(
    path: Path,
    spec: TableSpec,
    number: int,
    encoded: Any,
    execution_ids: set[str],
    *,
    strict: bool = False,
) -> dict[str, Any] | None:
    """The row of one parsed line; a refusal raised when `strict`, None otherwise."""
    where = f"{spec.member} line {number}"
    if not isinstance(encoded, dict):
        if not strict:
            return None
        raise refuse(path, f"{where}: not a JSON object")
    names = spec.column_names
    if encoded.keys() != spec.column_set:
        if not strict:
            return None
        missing = sorted(set(names) - set(encoded))
        extra = sorted(set(encoded) - set(names))
        raise refuse(
            path,
            f"{where}: columns differ from the table's (missing "
            f"{missing or 'none'}, unknown {extra or 'none'})",
        )
    row = _decode_cells(spec, encoded)
    if isinstance(row, tuple):
        if not strict:
            return None
        raise refuse(path, f"{where}: column {row[0]}: {row[1]}")
    if row["execution_id"] not in execution_ids:
        if not strict:
            return None
        raise refuse(
            path,
            f"{where}: execution_id {describe(row['execution_id'])} is not "
            "one of the manifest's execution_ids",
        )
    return row


def _decode_cells(
    spec: TableSpec, encoded: dict[str, Any]
) -> dict[str, Any] | tuple[str, BundleValueError]:
    """The row's decoded cells, or the first refused cell's column and problem."""
    row = {}
    try:
        for name, decode in spec.decoders:
            row[name] = decode(encoded[name])
    except BundleValueError as problem:
        return name, problem
    return row


def _bundle_row(
    path: Path,
    scan: Scan,
    spec: TableSpec,
    number: int,
    line: str,
    execution_ids: set[str],
    bundle_spec: TableSpec | None = None,
) -> dict[str, Any]:
    """A row decoded with the bundle's columns (`bundle_spec`, when the caller has it), then
    given every current column (NULL if new)."""
    bundle_spec = bundle_spec or scan.bundle_spec(spec)
    row = _decode_line(path, bundle_spec, number, line, execution_ids)
    if bundle_spec is spec:  # the current schema: the row has its columns, in order
        return row
    row = upgrade_row(spec.name, row, scan.manifest["schema_version"])
    return {name: row.get(name) for name in spec.column_names}


def row_digest(spec: TableSpec, row: Mapping[str, Any]) -> int:
    """A 128-bit digest of a row's values, summed per execution to compare row sets.

    BLOB values are hashed as their bytes (with their length), the others as the JSON of their
    encoded values in column order, so no body is base64-encoded again to be compared.
    """
    digest = hashlib.blake2b(digest_size=16)
    scalars: list[Any] = []
    for column in spec.columns:
        value = row[column.name]
        if column.type == "BLOB" and value is not None:
            data = bytes(value)
            digest.update(len(data).to_bytes(8, "big"))
            digest.update(data)
            scalars.append(len(data))
        else:
            scalars.append(encode_value(column, value))
    digest.update(json.dumps(scalars, ensure_ascii=False, allow_nan=False).encode("utf-8"))
    return int.from_bytes(digest.digest(), "big")


def _key_hash(spec: TableSpec, row: Mapping[str, Any]) -> int:
    key = json.dumps([row[name] for name in spec.primary_key], ensure_ascii=False)
    return int.from_bytes(hashlib.blake2b(key.encode("utf-8"), digest_size=8).digest(), "big")


@dataclass(slots=True)
class RowSets:
    """Per execution and table, how many rows and the sum of their digests (mod 2**128)."""

    sums: dict[tuple[str, str], tuple[int, int]] = field(default_factory=dict)

    def add(self, table: str, execution_id: str, digest: int) -> None:
        count, total = self.sums.get((table, execution_id), (0, 0))
        self.sums[(table, execution_id)] = (count + 1, (total + digest) % (1 << 128))

    def of(self, table: str, execution_id: str) -> tuple[int, int]:
        return self.sums.get((table, execution_id), (0, 0))

    def has(self, execution_id: str) -> bool:
        return any(self.of(spec.name, execution_id)[0] for spec in store_table_specs())


@dataclass(slots=True)
class Scan:
    """What validating a bundle learned, without keeping its rows."""

    manifest: dict[str, Any]
    members: dict[str, dict[str, Any]]
    infos: dict[str, zipfile.ZipInfo]
    statuses: dict[str, Any]
    call_ids: dict[str, list[str]]
    span_count: int
    longest_line: int = 0
    staged: dict[str, StagedTable] = field(default_factory=dict)

    @property
    def execution_ids(self) -> tuple[str, ...]:
        return tuple(self.manifest["execution_ids"])

    def bundle_spec(self, spec: TableSpec) -> TableSpec:
        """The table as the bundle's schema version has it (an older one lacks new columns)."""
        return next(
            found
            for found in store_table_specs(self.manifest["schema_version"])
            if found.name == spec.name
        )


def _scan_table(
    path: Path,
    archive: zipfile.ZipFile,
    scan: Scan,
    spec: TableSpec,
    limits: BundleLimits,
    staged: StagedTable | None,
) -> None:
    """Decode and check every row of one table member, keeping key hashes only (and, with
    `staged`, appending the decoded rows to it; row digests are taken from there by the
    import, for the executions the store already holds). The member is read once: its size and
    SHA-256 are taken on the way and checked at its end."""
    declared_rows = next(t["rows"] for t in scan.manifest["tables"] if t["name"] == spec.name)
    execution_ids = set(scan.execution_ids)
    bundle_spec = scan.bundle_spec(spec)
    key_hashes: list[int] = []
    rows = 0
    info, member = scan.infos[spec.member], scan.members[spec.member]
    digest = MemberDigest()
    lines = member_lines(path, archive, info, member, limits, digest)
    try:
        for number, line in lines:
            row = _bundle_row(path, scan, spec, number, line, execution_ids, bundle_spec)
            rows += 1
            scan.longest_line = max(scan.longest_line, len(line))
            if spec.primary_key:
                key_hashes.append(_key_hash(spec, row))
            if spec.name == "executions":
                scan.statuses[row["execution_id"]] = row["status"]
            elif spec.name == "llm_calls":
                scan.call_ids.setdefault(row["execution_id"], []).append(row["call_id"])
            if staged is not None:
                staged.append(row)
    except BundleError:
        # A changed or cut member is refused as such, whatever its first bad line says.
        lines.close()
        verify_member(path, archive, info, member)
        raise
    digest.check(path, info, member)
    if rows != declared_rows:
        raise refuse(path, f"{spec.member} holds {rows} rows, the manifest says {declared_rows}")
    if key_hashes:
        hashes = pa.array(key_hashes, type=pa.uint64())
        del key_hashes
        if len(pc.unique(hashes)) != len(hashes):
            _refuse_duplicate_key(path, archive, scan, spec, hashes, limits)


def _refuse_duplicate_key(
    path: Path,
    archive: zipfile.ZipFile,
    scan: Scan,
    spec: TableSpec,
    hashes: pa.Array,
    limits: BundleLimits,
) -> None:
    """Find the first row whose primary key repeats an earlier one and refuse it by line."""
    counts = pc.value_counts(hashes)
    repeated = {item["values"] for item in counts.to_pylist() if item["counts"] > 1}
    seen: set[tuple[Any, ...]] = set()
    lines = member_lines(path, archive, scan.infos[spec.member], scan.members[spec.member], limits)
    with contextlib.closing(lines):  # its reader thread stops at the refusal
        for number, line in lines:
            row = _bundle_row(path, scan, spec, number, line, set(scan.execution_ids))
            if _key_hash(spec, row) not in repeated:
                continue
            key = tuple(row[name] for name in spec.primary_key)
            if key in seen:
                named = ", ".join(f"{name}={row[name]!r}" for name in spec.primary_key)
                raise refuse(path, f"{spec.member} line {number}: a second row for {named}")
            seen.add(key)


def scan_bundle(
    path: Path, archive: zipfile.ZipFile, limits: BundleLimits, staging: Path | None = None
) -> Scan:
    """Validate an open bundle completely in bounded memory; BundleError on the first problem.

    With `staging` (a directory), every decoded row is also staged there for the import
    (`Scan.staged`), so no member is read twice.

    Checks, before anything is decoded: the member list (within the limits, every member a
    plain file of the format with a safe relative path, no duplicates); then the manifest
    (format, versions, members, tables and columns), every member's size and SHA-256, every
    row (types, execution ids, primary keys) and the spans document. Members are streamed.
    """
    infos = archive.infolist()
    check_directory(path, infos, limits, path.stat().st_size)
    by_name = {info.filename: info for info in infos}
    manifest_info = by_name.get(MANIFEST_MEMBER)
    if manifest_info is None:
        raise refuse(path, f"not a truva bundle ({MANIFEST_MEMBER} is missing)")
    if manifest_info.file_size > limits.max_manifest_bytes:
        raise refuse(
            path,
            f"{MANIFEST_MEMBER} is {manifest_info.file_size} bytes, over the "
            f"limit of {limits.max_manifest_bytes}",
        )
    manifest_bytes = read_member(path, archive, manifest_info, manifest_info.file_size)
    try:
        manifest = json.loads(manifest_bytes.decode("utf-8"), parse_constant=reject_constant)
    except (UnicodeDecodeError, ValueError, RecursionError) as error:
        raise refuse(path, f"{MANIFEST_MEMBER} is not valid JSON") from error
    members = check_manifest(path, manifest)
    for name in by_name:
        if name != MANIFEST_MEMBER and name not in members:
            raise refuse(path, f"member {name!r} is not listed in the manifest")
    for name, member in members.items():
        info = by_name.get(name)
        if info is None:
            raise refuse(
                path, f"member {name!r} is listed in the manifest but missing from the archive"
            )
        if info.file_size != member["size"]:
            raise refuse(
                path,
                f"member {name!r} is {info.file_size} bytes in the archive, "
                f"the manifest says {member['size']}",
            )
    check_tables(path, manifest, members)
    table_members = {spec.member for spec in store_table_specs()}
    for name, member in members.items():
        if name not in table_members and name != SPANS_MEMBER:
            verify_member(path, archive, by_name[name], member)
    scan = Scan(
        manifest=manifest,
        members=members,
        infos=by_name,
        statuses={},
        call_ids={},
        span_count=0,
    )
    for spec in store_table_specs():
        staged = None
        if staging is not None:
            staged = StagedTable(spec, staging / f"{spec.name}.arrows")
            scan.staged[spec.name] = staged
        try:
            _scan_table(path, archive, scan, spec, limits, staged)
        except BaseException:
            if staged is not None:
                staged.abandon()
            raise
        if staged is not None:
            staged.close()
    for execution_id in scan.execution_ids:
        status = scan.statuses.get(execution_id)
        if status is None:
            raise refuse(
                path,
                f"execution {execution_id} is listed in the manifest but has no "
                "row in tables/executions.jsonl",
            )
        if status not in FINISHED_EXECUTION_STATUSES:
            raise refuse(
                path,
                f"execution {execution_id} has status {status!r}; a bundle holds "
                "finished executions only",
            )
    spans_info, spans_member = by_name[SPANS_MEMBER], members[SPANS_MEMBER]
    digest = MemberDigest()
    try:
        with member_stream(path, archive, spans_info, spans_member["size"], digest) as read:
            stream = JsonStream(path, read, limits.max_line_bytes)
            scan.span_count = count_spans(path, stream)
    except BundleError:
        verify_member(path, archive, spans_info, spans_member)
        raise
    digest.check(path, info=spans_info, member=spans_member)
    return scan


def table_rows(
    path: Path, archive: zipfile.ZipFile, scan: Scan, spec: TableSpec, limits: BundleLimits
) -> Iterator[dict[str, Any]]:
    """The rows of a table member of a scanned bundle, decoded one line at a time."""
    execution_ids = set(scan.execution_ids)
    lines = member_lines(path, archive, scan.infos[spec.member], scan.members[spec.member], limits)
    for number, line in lines:
        yield _bundle_row(path, scan, spec, number, line, execution_ids)


def read_bundle(
    bundle_path: str | os.PathLike[str], *, limits: BundleLimits | None = None
) -> Bundle:
    """Open and validate a bundle completely; BundleError (one line) on the first problem.

    Validation streams every member (see `import_bundle`); the returned Bundle then holds every
    row in memory, so this is for bundles small enough to inspect. Reads no store and writes
    nothing.
    """
    path = Path(bundle_path)
    limits = limits or BundleLimits()
    with open_archive(path, limits) as archive:
        scan = scan_bundle(path, archive, limits)
        rows = {
            spec.name: tuple(table_rows(path, archive, scan, spec, limits))
            for spec in store_table_specs()
        }
    manifest = scan.manifest
    return Bundle(
        path=path,
        manifest=manifest,
        execution_ids=scan.execution_ids,
        redacted=manifest["redaction"]["applied"],
        tool_version=manifest["tool_version"],
        created_at=manifest["created_at"],
        rows=rows,
        span_count=scan.span_count,
    )
