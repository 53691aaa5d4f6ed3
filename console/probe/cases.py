"""The deliberately bad requests a capability schema allows deriving, and those it does not."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from executor.runtime.outcomes import encode_json_body

# The kinds of bad request, in the order they are sent.
MISSING_REQUIRED = "missing_required"
WRONG_TYPE = "wrong_type"
EMPTY_BODY = "empty_body"
NOT_JSON = "not_json"
UNKNOWN_ENUM = "unknown_enum"
KINDS = (MISSING_REQUIRED, WRONG_TYPE, EMPTY_BODY, NOT_JSON, UNKNOWN_ENUM)
# Bodies that never reach the parameters: seed 001 Part 2 answers them with retryable:false.
MALFORMED_KINDS = frozenset({EMPTY_BODY, NOT_JSON})
NOT_JSON_BODY = b"this is not JSON {"
# A capability sends one missing-key request per required key, up to this many.
MAX_MISSING_KEYS = 3
STEP_SLUG = re.compile(r"[^\w-]+", re.ASCII)

# ------------------------------------------------------------------------------ the cases


@dataclass(frozen=True, slots=True)
class ProbeCase:
    """One deliberately bad request: its kind, its name, the step id it is recorded under, the
    exact body sent and the parameters that body encodes ({} when it encodes none)."""

    kind: str
    name: str
    step_id: str
    body: bytes
    parameters: dict[str, Any]


@dataclass(frozen=True, slots=True)
class SkippedCase:
    """A kind of bad request the schema does not allow deriving, and why."""

    kind: str
    reason: str

    def to_dict(self) -> dict[str, str]:
        return {"kind": self.kind, "reason": self.reason}


_JSON_TYPES = {
    "string": "string", "integer": "integer", "int": "integer", "int32": "integer",
    "int64": "integer", "number": "number", "float": "number", "float64": "number",
    "double": "number", "boolean": "boolean", "bool": "boolean", "array": "array",
    "object": "object", "null": "null",
}  # fmt: skip
# Values of a wrong type, tried in order: the first whose JSON type the schema does not allow.
_WRONG_VALUES: tuple[tuple[str, Any], ...] = (
    ("number", 12345), ("string", "not-a-number"), ("array", ["probe"]),
    ("object", {"probe": True}),
)  # fmt: skip


def _declared_types(schema: Any) -> tuple[str, ...]:
    """The JSON types a property schema declares (Go names read as layer 2 reads them)."""
    if not isinstance(schema, Mapping) or "type" not in schema:
        return ()
    declared = schema["type"]
    names = declared if isinstance(declared, list) else [declared]
    return tuple(dict.fromkeys(_JSON_TYPES[str(n).lower()] for n in names
                               if str(n).lower() in _JSON_TYPES))  # fmt: skip


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    return {str: "string", float: "number", list: "array", dict: "object"}.get(
        type(value), "null"
    )


def _accepts(types: tuple[str, ...], value: Any) -> bool:
    kind = _json_type(value)
    return kind in types or (kind == "integer" and "number" in types)


def example_value(schema: Any) -> Any:
    """A value a property schema accepts: its first enum value, else one of its type."""
    if isinstance(schema, Mapping) and isinstance(schema.get("enum"), list) and schema["enum"]:
        return schema["enum"][0]
    types = _declared_types(schema)
    kind = next((t for t in types if t != "null"), types[0] if types else "string")
    if kind == "object":
        return example_parameters(schema)
    return {"string": "probe", "integer": 1, "number": 1.5, "boolean": True, "array": [],
            "null": None}[kind]  # fmt: skip


def example_parameters(schema: Any) -> dict[str, Any]:
    """An object with a value for every required key of `schema` (its properties' examples)."""
    if not isinstance(schema, Mapping):
        return {}
    properties = schema.get("properties") if isinstance(schema.get("properties"), Mapping) else {}
    required = schema.get("required") if isinstance(schema.get("required"), list) else []
    return {key: example_value(properties.get(key)) for key in required}


def _has_binding(value: Any) -> bool:
    return "{{" in json.dumps(value)


def base_parameters(schema: Any, step_parameters: Mapping[str, Any] | None) -> dict[str, Any]:
    """A request the schema would accept: the step's own parameters (those without bindings,
    which only a run resolves) over an example value for every required key."""
    base = example_parameters(schema)
    for key, value in (step_parameters or {}).items():
        if not _has_binding(value):
            base[key] = value
    return base


def _quoted(values: list[Any]) -> str:
    shown = ", ".join(json.dumps(value) for value in values[:5])
    return shown + (", ..." if len(values) > 5 else "")


def derive_cases(
    schema: Mapping[str, Any] | None, step_parameters: Mapping[str, Any] | None = None
) -> tuple[list[ProbeCase], list[SkippedCase]]:
    """The bad requests `schema` allows deriving, in `KINDS` order, and the kinds it does not.

    Each schema-derived request breaks one thing in an otherwise valid request
    (`base_parameters`); the empty and non-JSON bodies need no schema.
    """
    cases: list[tuple[str, str, str, bytes | None, dict[str, Any]]] = []
    skipped: list[SkippedCase] = []
    base = base_parameters(schema, step_parameters)
    properties: Mapping[str, Any] = {}
    required: list[str] = []
    if isinstance(schema, Mapping):
        if isinstance(schema.get("properties"), Mapping):
            properties = schema["properties"]
        if isinstance(schema.get("required"), list):
            required = [key for key in schema["required"] if isinstance(key, str)]
    no_schema = "the capability has no schema" if not schema else None
    # Required keys first: a tool checks those before optional ones.
    ordered = list(dict.fromkeys([*required, *properties]))

    if required:
        for key in required[:MAX_MISSING_KEYS]:
            without = {k: v for k, v in base.items() if k != key}
            cases.append((MISSING_REQUIRED, f"missing required key `{key}`", f"missing-{key}",
                          None, without))  # fmt: skip
    else:
        skipped.append(SkippedCase(MISSING_REQUIRED,
                                   no_schema or "the schema lists no required key"))

    typed = [(key, _declared_types(properties.get(key))) for key in ordered]
    typed = [(key, types) for key, types in typed if types]
    wrong = next(((key, types, value, kind_name) for key, types in typed
                  for kind_name, value in _WRONG_VALUES if not _accepts(types, value)), None)
    if wrong is not None:
        key, types, value, kind_name = wrong
        cases.append((WRONG_TYPE, f"wrong type for `{key}` ({kind_name} instead of "
                      f"{' or '.join(types)})", f"wrong-type-{key}", None,
                      {**base, key: value}))  # fmt: skip
    else:
        skipped.append(SkippedCase(WRONG_TYPE, no_schema or (
            "no property declares a type" if not typed
            else "every declared type accepts any JSON value tried")))

    cases.append((EMPTY_BODY, "empty body", "empty-body", b"", {}))
    cases.append((NOT_JSON, "body that is not JSON", "not-json", NOT_JSON_BODY, {}))

    enum_case, enum_skip = _unknown_enum(ordered, properties, base)
    if enum_case is not None:
        cases.append(enum_case)
    else:
        skipped.append(SkippedCase(UNKNOWN_ENUM, no_schema or enum_skip))

    named: list[ProbeCase] = []
    for index, (kind, name, slug, body, parameters) in enumerate(cases, start=1):
        slug = STEP_SLUG.sub("-", slug).strip("-")[:40]
        named.append(ProbeCase(kind, name, f"probe-{index}-{slug}",
                               encode_json_body(parameters) if body is None else body,
                               parameters if body is None else {}))  # fmt: skip
    return named, skipped


def _unknown_enum(
    ordered: list[str], properties: Mapping[str, Any], base: dict[str, Any]
) -> tuple[tuple[str, str, str, None, dict[str, Any]] | None, str]:
    """The unknown-enum request for the first property with a string or number enum."""
    enums = [(key, properties[key]["enum"]) for key in ordered
             if isinstance(properties.get(key), Mapping)
             and isinstance(properties[key].get("enum"), list) and properties[key]["enum"]]
    for key, values in enums:
        if all(isinstance(value, str) for value in values):
            unknown: Any = next(f"probe-not-{suffix}" for suffix in
                                ("in-enum", *map(str, range(len(values) + 1)))
                                if f"probe-not-{suffix}" not in values)  # fmt: skip
        elif all(isinstance(v, int | float) and not isinstance(v, bool) for v in values):
            unknown = max(values) + 1
        else:
            continue
        name = f"unknown enum value for `{key}` ({json.dumps(unknown)} is not one of " \
               f"{_quoted(values)})"
        return (UNKNOWN_ENUM, name, f"unknown-enum-{key}", None, {**base, key: unknown}), ""
    if enums:
        return None, "no enum lists only strings or only numbers"
    return None, "no property has an enum"


