"""The pre-dispatch guard (seed 000 §12, SPEC §2.2 row 0) and JSON value comparison."""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from executor.params.bindings import string_leaves
from executor.params.coercion import SCALAR_TYPES, declared_types_of, schema_properties

_BRACE_TOKEN_RE = re.compile(r"\{\{([^{}]*)\}\}")
_TOKEN_STEP_ID_RE = re.compile(r"\s*([^{}.\s]+)\.")
_FRAMEWORK_PREFIX = "step-"
_FAMILY_OF_TYPE = {
    **dict.fromkeys(SCALAR_TYPES, "scalar"),
    "object": "object",
    "array": "array",
    "null": "null",
}


@dataclass(frozen=True, slots=True)
class GuardViolation:
    """A reason not to dispatch: kind is unresolved_binding, missing_required, enum or shape."""

    kind: str
    path: str
    expected: str
    received: str
    message: str


def json_type_name(value: Any) -> str:
    """The JSON type of a decoded value: object, array, string, number, boolean or null."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, Mapping):
        return "object"
    if isinstance(value, list | tuple):
        return "array"
    return type(value).__name__


def _value_family(value: Any) -> str:
    """object, array, null or scalar: the container shape the guard compares."""
    json_type = json_type_name(value)
    return json_type if json_type in ("object", "array", "null") else "scalar"


def json_equal(left: Any, right: Any) -> bool:
    """JSON value equality: 1 equals 1.0, true does not equal 1, containers compare deeply.

    Iterative, so values nested at any depth compare without exhausting the recursion limit.
    """
    pending = [(left, right)]
    while pending:
        a, b = pending.pop()
        if isinstance(a, bool) or isinstance(b, bool):
            if not (isinstance(a, bool) and isinstance(b, bool) and a == b):
                return False
        elif isinstance(a, int | float) and isinstance(b, int | float):
            if a != b:
                return False
        elif isinstance(a, Mapping) and isinstance(b, Mapping):
            if a.keys() != b.keys():
                return False
            pending.extend((a[k], b[k]) for k in a)
        elif isinstance(a, list | tuple) and isinstance(b, list | tuple):
            if len(a) != len(b):
                return False
            pending.extend(zip(a, b, strict=True))
        elif type(a) is not type(b) or a != b:
            return False
    return True


def _unresolved_binding_violations(
    params: Any, plan_step_ids: frozenset[str]
) -> list[GuardViolation]:
    """A violation for each reserved `{{id.path}}` token still present in a string leaf."""
    violations = []
    for path, text in string_leaves(params):
        for token in _BRACE_TOKEN_RE.finditer(text):
            inner = token.group(1)
            id_match = _TOKEN_STEP_ID_RE.match(inner)
            step_id = id_match.group(1) if id_match else inner.strip()
            in_plan = id_match is not None and step_id.casefold() in plan_step_ids
            framework_form = inner.lstrip().casefold().startswith(_FRAMEWORK_PREFIX)
            if not (in_plan or framework_form):
                continue
            source = (
                f'plan step "{step_id}", which produced no value at that path'
                if in_plan
                else f'"{step_id}", which is not a step of this plan'
            )
            violations.append(
                GuardViolation(
                    kind="unresolved_binding",
                    path=path,
                    expected="a resolved value",
                    received=token.group(0),
                    message=(
                        f'parameter "{path}" still contains the binding "{token.group(0)}"; '
                        f"it references {source}"
                    ),
                )
            )
    return violations


def _describe_types(declared_types: tuple[str, ...]) -> str:
    """Declared types as prose: `number`, `number or null`."""
    return " or ".join(declared_types)


def _check_value(
    path: str, value: Any, property_schema: Any, skipped_paths: set[str]
) -> list[GuardViolation]:
    """Null, shape and enum violations of one present value, then of its items and properties."""
    if not isinstance(property_schema, Mapping) or path in skipped_paths:
        return []
    if value is None:
        # seed 000 §12: the guard preserves explicit null, whatever the declared type.
        return []
    declared_types = declared_types_of(property_schema)
    declared_families = {_FAMILY_OF_TYPE.get(name) for name in declared_types}
    received_family = _value_family(value)
    # Unknown type names are custom schema behaviour the guard leaves to the tool.
    if (
        declared_types
        and None not in declared_families
        and received_family not in declared_families
    ):
        received_type = json_type_name(value)
        expected = _describe_types(declared_types)
        return [
            GuardViolation(
                kind="shape",
                path=path,
                expected=expected,
                received=received_type,
                message=f'parameter "{path}": expected {expected}, got {received_type}',
            )
        ]
    if value is None:
        return []
    violations = []
    enum_values = property_schema.get("enum")
    if isinstance(enum_values, list | tuple) and not any(
        json_equal(value, allowed) for allowed in enum_values
    ):
        expected = json.dumps(list(enum_values), ensure_ascii=False)
        received = json.dumps(value, ensure_ascii=False)
        violations.append(
            GuardViolation(
                kind="enum",
                path=path,
                expected=expected,
                received=received,
                message=(
                    f'parameter "{path}": value {received} '
                    f"is not one of the declared enum {expected}"
                ),
            )
        )
    if isinstance(value, list | tuple):
        items_schema = property_schema.get("items")
        for index, item in enumerate(value):
            violations.extend(_check_value(f"{path}[{index}]", item, items_schema, skipped_paths))
    elif isinstance(value, Mapping):
        violations.extend(_check_object(path, value, property_schema, skipped_paths))
    return violations


def _check_object(
    path: str, value: Mapping[str, Any], object_schema: Mapping[str, Any], skipped_paths: set[str]
) -> list[GuardViolation]:
    """Missing required keys (in `required` order), then each present declared property."""
    violations = []
    required = object_schema.get("required")
    for key in required if isinstance(required, list | tuple) else ():
        if key not in value:
            key_path = f"{path}.{key}" if path else str(key)
            violations.append(
                GuardViolation(
                    kind="missing_required",
                    path=key_path,
                    expected="present",
                    received="absent",
                    message=f'parameter "{key_path}" is required by the schema but absent',
                )
            )
    properties = schema_properties(object_schema)
    for key, item in value.items():
        if key in properties:
            key_path = f"{path}.{key}" if path else str(key)
            violations.extend(_check_value(key_path, item, properties[key], skipped_paths))
    return violations


# The last step-id tuple folded, by identity: `Plan.step_ids` is one tuple per plan, so a run
# folds its ids once instead of once per attempt (which made long plans quadratic).
_last_folded: list[tuple[tuple[str, ...], frozenset[str]]] = []


def _folded_ids(step_ids: Collection[str]) -> frozenset[str]:
    """The case-folded step ids, cached for the last tuple seen."""
    cached = _last_folded[0] if _last_folded else None
    if cached is not None and cached[0] is step_ids:
        return cached[1]
    folded = frozenset(step_id.casefold() for step_id in step_ids)
    if isinstance(step_ids, tuple):
        _last_folded[:] = [(step_ids, folded)]
    return folded


def guard_parameters(
    params: Mapping[str, Any] | None,
    schema: Mapping[str, Any] | None,
    plan_step_ids: Collection[str],
) -> tuple[GuardViolation, ...]:
    """The pre-dispatch guard: every reason the parameters must not be sent, in report order.

    First each unresolved reserved binding: a `{{id.path}}` token in any string leaf whose id
    is a plan step (case-insensitive) or starts with `step-`; `{{now}}` and other tool
    templates pass. Then, against the schema subset (type, properties, required, enum, items)
    at every depth: required keys that are absent; for each present value in parameter order,
    a container-shape mismatch (object vs array vs scalar; a string where a number is declared
    is coercion's business and passes), else a value outside a declared enum. An explicit null
    is present and passes whatever the declared type (seed 000 §12 "preserves … explicit
    null"). A value
    already reported as an unresolved binding is not schema-checked. Not a full JSON Schema
    validator: unknown type names and other keywords are left to the tool.
    """
    violations = _unresolved_binding_violations(params or {}, _folded_ids(plan_step_ids))
    if isinstance(schema, Mapping) and schema:
        skipped_paths = {violation.path for violation in violations}
        violations.extend(_check_object("", params or {}, schema, skipped_paths))
    return tuple(violations)
