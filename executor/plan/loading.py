"""Reading a plan file: strict JSON (duplicate keys, non-standard constants), then validation."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from executor.files import read_regular_file
from executor.plan.model import Plan, PlanError, key_path
from executor.plan.validation import PlanParser, quote


class _ObjectWithDuplicates(dict):
    """A decoded JSON object that repeated some keys; the duplicates are kept for the error."""

    duplicate_keys: list[str]


def _object_from_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    decoded: dict[str, Any] = {}
    duplicates: list[str] = []
    for key, value in pairs:
        if key in decoded and key not in duplicates:
            duplicates.append(key)
        decoded[key] = value
    if not duplicates:
        return decoded
    flagged = _ObjectWithDuplicates(decoded)
    flagged.duplicate_keys = duplicates
    return flagged


class _NonStandardConstant(ValueError):
    def __init__(self, constant: str) -> None:
        super().__init__(constant)
        self.constant = constant


def _reject_constant(constant: str) -> Any:
    raise _NonStandardConstant(constant)


def _first_duplicate_key(value: Any, path: str) -> tuple[str, str] | None:
    """(path of the object, key) for the first repeated key, outermost objects first."""
    if isinstance(value, _ObjectWithDuplicates):
        return path, value.duplicate_keys[0]
    if isinstance(value, dict):
        children = ((key_path(path, key), item) for key, item in value.items())
    elif isinstance(value, list):
        children = ((f"{path}[{index}]", item) for index, item in enumerate(value))
    else:
        return None
    for child_path, child in children:
        found = _first_duplicate_key(child, child_path)
        if found is not None:
            return found
    return None


TOO_DEEP = "nested too deeply to be a plan (Python's recursion limit was reached)"


def load_plan(path: str | Path) -> Plan:
    """Read and validate the plan file at `path`; raise PlanError naming the file and problem."""
    file = str(path)
    try:
        content = read_regular_file(path)
    except OSError as error:
        raise PlanError(
            file, "", f"cannot read the plan file: {error.strerror or error}"
        ) from error
    try:
        text = content.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        bad_byte = content[error.start]
        problem = f"not UTF-8 text (invalid byte 0x{bad_byte:02x} at offset {error.start})"
        raise PlanError(file, "", problem) from error
    try:
        data = json.loads(
            text, object_pairs_hook=_object_from_pairs, parse_constant=_reject_constant
        )
    except json.JSONDecodeError as error:
        problem = f"invalid JSON at line {error.lineno}, column {error.colno}: {error.msg}"
        raise PlanError(file, "", problem) from error
    except _NonStandardConstant as error:
        problem = f"invalid JSON: {error.constant} is not a JSON value"
        raise PlanError(file, "", problem) from error
    except RecursionError as error:
        raise PlanError(file, "", TOO_DEEP) from error
    except ValueError as error:  # an integer literal beyond Python's int conversion limit
        problem = "invalid JSON: a number with more than 4300 digits"
        raise PlanError(file, "", problem) from error
    try:
        duplicate = _first_duplicate_key(data, "")
    except RecursionError as error:
        raise PlanError(file, "", TOO_DEEP) from error
    if duplicate is not None:
        object_path, key = duplicate
        raise PlanError(file, object_path, f"duplicate key {quote(key)}")
    return replace(parse_plan(data, source=file), source_path=file)


def parse_plan(data: Any, source: str = "<plan>") -> Plan:
    """Validate decoded plan data; raise PlanError naming `source`, the path and the problem.

    Checks unknown fields at every level, required fields, JSON types, names and references
    (tools, capabilities, depends_on, hitl_approved keys, `{{step-…}}` bindings), dependency
    cycles over depends_on plus bindings, and the config values via `resolve_config`.
    """
    try:
        return PlanParser(source).parse(data)
    except RecursionError as error:
        raise PlanError(source, "", TOO_DEEP) from error
