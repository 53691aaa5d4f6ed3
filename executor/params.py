"""Step parameters: schema coercion, template bindings, the pre-dispatch guard, legacy patterns."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

__all__ = [
    "TEMPLATE_RE",
    "TYPE_ERROR_PATTERNS",
    "VALIDATION_ERROR_PATTERNS",
    "Coercion",
    "GuardViolation",
    "binding_references",
    "coerce_parameters",
    "exact_bound_keys",
    "exact_bound_paths",
    "go_format_value",
    "guard_parameters",
    "json_equal",
    "match_type_related_error",
    "resolve_bindings",
    "value_at_path",
]

# ---------------------------------------------------------------------------------------------
# Go value formatting
# ---------------------------------------------------------------------------------------------


def _shortest_digits(number: float) -> tuple[str, int]:
    """Shortest round-trip decimal digits of a finite, non-zero `abs(number)` and Go's `dp`.

    The value is 0.<digits> × 10**dp, as in Go strconv's `decimalSlice`.
    """
    _, digit_tuple, exponent = Decimal(repr(abs(number))).normalize().as_tuple()
    digits = "".join(str(digit) for digit in digit_tuple)
    return digits, len(digits) + int(exponent)


def _format_e(negative: bool, digits: str, dp: int) -> str:
    """Go strconv `fmtE` with the shortest precision: d[.ddd]e±XX."""
    mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
    exponent = dp - 1
    sign = "-" if exponent < 0 else "+"
    return f"{'-' if negative else ''}{mantissa}e{sign}{abs(exponent):02d}"


def _format_f(negative: bool, digits: str, dp: int) -> str:
    """Go strconv `fmtF` with the shortest precision: no exponent, no trailing zeros."""
    integer_part = (digits[:dp] + "0" * max(dp - len(digits), 0)) if dp > 0 else "0"
    fraction_digits = max(len(digits) - dp, 0)
    fraction = "".join(
        digits[dp + i] if 0 <= dp + i < len(digits) else "0" for i in range(fraction_digits)
    )
    text = integer_part + ("." + fraction if fraction else "")
    return ("-" if negative else "") + text


def _format_non_finite(number: float) -> str:
    """Go's spelling of NaN and the infinities."""
    if math.isnan(number):
        return "NaN"
    return "+Inf" if number > 0 else "-Inf"


def _go_float_v(number: float) -> str:
    """Go `%v` of a float64: strconv 'g', shortest digits, exponent form when exp < -4 or >= 6."""
    if not math.isfinite(number):
        return _format_non_finite(number)
    negative = math.copysign(1.0, number) < 0
    if number == 0:
        return "-0" if negative else "0"
    digits, dp = _shortest_digits(number)
    exponent = dp - 1
    if exponent < -4 or exponent >= 6:
        return _format_e(negative, digits, dp)
    return _format_f(negative, digits, dp)


def _go_json_float(number: float) -> str:
    """Go `encoding/json` float64 text: 'f' form, 'e' form below 1e-6 or from 1e21 (e-09 → e-9)."""
    if not math.isfinite(number):
        return _format_non_finite(number)
    negative = math.copysign(1.0, number) < 0
    if number == 0:
        return "-0" if negative else "0"
    digits, dp = _shortest_digits(number)
    if abs(number) < 1e-6 or abs(number) >= 1e21:
        text = _format_e(negative, digits, dp)
        return re.sub(r"e-0(\d)$", r"e-\1", text)
    return _format_f(negative, digits, dp)


def _as_go_float(number: int | float) -> float | None:
    """A JSON number as Go decodes it (float64); None when an int is beyond float range."""
    try:
        return float(number)
    except OverflowError:
        return None


_GO_JSON_HTML_ESCAPES = {
    "<": "\\u003c",
    ">": "\\u003e",
    "&": "\\u0026",
    "\u2028": "\\u2028",
    "\u2029": "\\u2029",
}


def _go_json_string(text: str) -> str:
    """Go `json.Marshal` of a string: UTF-8 kept, HTML-sensitive characters escaped."""
    encoded = json.dumps(text, ensure_ascii=False)
    for character, escape in _GO_JSON_HTML_ESCAPES.items():
        encoded = encoded.replace(character, escape)
    return encoded


@dataclass(frozen=True, slots=True)
class _JsonText:
    """Literal JSON text queued between the values `_go_json` still has to encode."""

    text: str


def _go_json_scalar(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        as_float = _as_go_float(value)
        return str(value) if as_float is None else _go_json_float(as_float)
    if isinstance(value, str):
        return _go_json_string(value)
    return _go_json_string(str(value))


def _go_json(value: Any) -> str:
    """Compact JSON the way Go's `json.Marshal` writes a decoded value: sorted keys, no spaces.

    Iterative, so a value nested as deep as any decoder returns never hits the recursion limit.
    """
    parts: list[str] = []
    pending: list[Any] = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, _JsonText):
            parts.append(item.text)
        elif isinstance(item, Mapping):
            members = sorted(((str(key), member) for key, member in item.items()),
                             key=lambda pair: pair[0])
            queued: list[Any] = [_JsonText("{")]
            for index, (key, member) in enumerate(members):
                queued += [_JsonText(("," if index else "") + _go_json_string(key) + ":"), member]
            queued.append(_JsonText("}"))
            pending.extend(reversed(queued))
        elif isinstance(item, list | tuple):
            queued = [_JsonText("[")]
            for index, member in enumerate(item):
                queued += [_JsonText(","), member] if index else [member]
            queued.append(_JsonText("]"))
            pending.extend(reversed(queued))
        else:
            parts.append(_go_json_scalar(item))
    return "".join(parts)


def go_format_value(value: Any) -> str:
    """Format a decoded JSON value like Go `%v` does when it splices a binding into text.

    Numbers are Go float64 (46828.5 → "46828.5", 1000000 → "1e+06", 42 → "42"); bools are
    true/false; strings are as-is. Objects and arrays become compact Go-style JSON instead of
    Go's `map[k:v]` text, and null becomes "null" instead of Go's "<nil>".
    """
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        as_float = _as_go_float(value)
        return str(value) if as_float is None else _go_float_v(as_float)
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping | list | tuple):
        return _go_json(value)
    return str(value)


def _go_type_name(value: Any) -> str:
    """The Go type a decoded or coerced value has (`%T`, with maps shortened to `map`)."""
    if value is None:
        return "nil"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int64"
    if isinstance(value, float):
        return "float64"
    if isinstance(value, str):
        return "string"
    if isinstance(value, Mapping):
        return "map"
    if isinstance(value, list | tuple):
        return "slice"
    return type(value).__name__


def _format_typed(value: Any, go_type: str) -> str:
    """`%v` of a value of a known Go type; int64 values print as integers, not float64."""
    if go_type == "int64" and isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return go_format_value(value)


# ---------------------------------------------------------------------------------------------
# Layer 2: schema coercion
# ---------------------------------------------------------------------------------------------

NUMBER_TYPES = frozenset({"number", "float64", "float", "double"})
INTEGER_TYPES = frozenset({"integer", "int", "int64", "int32"})
BOOLEAN_TYPES = frozenset({"boolean", "bool"})
STRING_TYPES = frozenset({"string"})
SCALAR_TYPES = NUMBER_TYPES | INTEGER_TYPES | BOOLEAN_TYPES | STRING_TYPES

# Go strconv's `special`: signed inf/infinity, unsigned nan, any letter case.
_GO_SPECIAL_FLOAT_RE = re.compile(r"[+-]?(?:inf|infinity)|nan", re.IGNORECASE)
# Go strconv.ParseInt(s, 10, 64): base 10 takes no prefix and no underscores.
_GO_INT_RE = re.compile(r"[+-]?[0-9]+")
_INT64_DIGITS = 19
_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1
_GO_BOOL_WORDS = {
    **dict.fromkeys(("1", "t", "T", "TRUE", "true", "True"), True),
    **dict.fromkeys(("0", "f", "F", "FALSE", "false", "False"), False),
}
# Tried in this order, exactly and then case-insensitively (Go `extractPrimaryField`).
_PRIMARY_FIELD_NAMES = ("code", "id", "value", "name", "key")
_MISSING = object()


@dataclass(frozen=True, slots=True)
class Coercion:
    """One layer 2 change: parameter `key` went from `from_value` to `to_value`."""

    key: str
    from_type: str
    from_value: Any
    to_type: str
    to_value: Any

    def log_line(self) -> str:
        """The Go log entry `key: <T>(<v>) -> <T>(<v>)`, e.g. `n: string(5) -> int64(5)`."""
        before = _format_typed(self.from_value, self.from_type)
        after = _format_typed(self.to_value, self.to_type)
        return f"{self.key}: {self.from_type}({before}) -> {self.to_type}({after})"

    def to_dict(self) -> dict[str, Any]:
        """The coercion as a JSON-able dict, with its `log_line`."""
        return {
            "key": self.key,
            "from_type": self.from_type,
            "from_value": self.from_value,
            "to_type": self.to_type,
            "to_value": self.to_value,
            "log_line": self.log_line(),
        }


def _underscores_ok(text: str) -> bool:
    """Go strconv `underscoreOK`: each `_` sits between digits, or between a base prefix and a
    digit."""
    saw = "^"  # ^ start, 0 digit or base prefix, _ underscore, ! anything else
    if text[:1] in ("+", "-"):
        text = text[1:]
    index = 0
    hexadecimal = False
    if len(text) >= 2 and text[0] == "0" and text[1].lower() in "box":
        index, saw, hexadecimal = 2, "0", text[1].lower() == "x"
    for character in text[index:]:
        if "0" <= character <= "9" or (hexadecimal and "a" <= character.lower() <= "f"):
            saw = "0"
        elif character == "_":
            if saw != "0":
                return False
            saw = "_"
        elif saw == "_":
            return False
        else:
            saw = "!"
    return saw != "_"


def _read_go_float(text: str) -> float | None:
    """Go strconv `readFloat` plus the conversion, for the whole of `text`; None on a syntax
    error or when a finite literal overflows float64 (Go's ErrRange)."""
    index, length = 0, len(text)
    sign = ""
    if index < length and text[index] in "+-":
        sign = "-" if text[index] == "-" else ""
        index += 1
    hexadecimal = index + 2 < length and text[index] == "0" and text[index + 1] in "xX"
    if hexadecimal:
        index += 2
    exponent_char = "p" if hexadecimal else "e"
    digit_chars = "0123456789abcdefABCDEF" if hexadecimal else "0123456789"
    integer_digits: list[str] = []
    fraction_digits: list[str] = []
    saw_dot = False
    while index < length:
        character = text[index]
        if character == "_":
            pass
        elif character == ".":
            if saw_dot:
                break
            saw_dot = True
        elif character in digit_chars:
            (fraction_digits if saw_dot else integer_digits).append(character)
        else:
            break
        index += 1
    if not integer_digits and not fraction_digits:
        return None
    exponent = 0
    if index < length and text[index].lower() == exponent_char:
        index += 1
        exponent_sign = 1
        if index < length and text[index] in "+-":
            exponent_sign = -1 if text[index] == "-" else 1
            index += 1
        if index >= length or not "0" <= text[index] <= "9":
            return None
        while index < length and ("0" <= text[index] <= "9" or text[index] == "_"):
            # Go stops accumulating once the exponent reaches 10000.
            if text[index] != "_" and exponent < 10000:
                exponent = exponent * 10 + int(text[index])
            index += 1
        exponent *= exponent_sign
    elif hexadecimal:
        return None  # a hexadecimal mantissa needs a p exponent
    if index != length or ("_" in text and not _underscores_ok(text)):
        return None
    mantissa = "".join(integer_digits) + "." + "".join(fraction_digits)
    try:
        if hexadecimal:
            return float.fromhex(f"{sign}0x{mantissa}p{exponent}")
        number = float(f"{sign}{mantissa}e{exponent}")
    except OverflowError:
        return None
    return None if math.isinf(number) else number


def _parse_go_float(text: str) -> float | None:
    """Go `strconv.ParseFloat(text, 64)` when it gives a finite number, else None.

    Accepts what Go accepts: decimal and hexadecimal (`0x1p-2`, `0x1.8P+1`) literals, and
    underscores between digits (`1_000.5`, `0x_1p0`). Go's NaN, Inf and Infinity (any case)
    and a finite literal beyond float64 give None: they are not JSON, so they are never sent.
    """
    if _GO_SPECIAL_FLOAT_RE.fullmatch(text):
        return None
    return _read_go_float(text)


def _parse_go_int(text: str) -> int | None:
    """Go `strconv.ParseInt(text, 10, 64)`; None on syntax or int64 range errors."""
    if not _GO_INT_RE.fullmatch(text):
        return None
    sign = text[0] if text[0] in "+-" else ""
    digits = text[len(sign):].lstrip("0") or "0"
    if len(digits) > _INT64_DIGITS:
        return None  # beyond int64, and int() would refuse more than 4300 digits
    number = int(sign + digits)  # leading zeros dropped: they count toward int()'s limit
    return number if _INT64_MIN <= number <= _INT64_MAX else None


def _parse_go_bool(text: str) -> bool | None:
    """Go `strconv.ParseBool(text)`; None for anything outside its twelve words."""
    return _GO_BOOL_WORDS.get(text)


def _decode_go_json(text: str) -> Any:
    """Decode JSON as Go would; NaN and Infinity literals are rejected with ValueError."""

    def reject_constant(name: str) -> Any:
        raise ValueError(f"{name} is not JSON")

    return json.loads(text, parse_constant=reject_constant)


def _extract_primary_field(mapping: Mapping[str, Any]) -> str | None:
    """The one string that identifies `mapping` (Go `extractPrimaryField`), None when none does."""
    if len(mapping) == 1:
        (only_value,) = mapping.values()
        if isinstance(only_value, str):
            return only_value
    for name in _PRIMARY_FIELD_NAMES:
        field_value = mapping.get(name, _MISSING)
        if isinstance(field_value, str):
            return field_value
    for name in _PRIMARY_FIELD_NAMES:
        for key, field_value in mapping.items():
            if str(key).casefold() == name and isinstance(field_value, str):
                return field_value
    return None


def _coerce_to_string(value: Any) -> str | None:
    """A map, or a string holding a JSON object, reduced to its primary field."""
    if isinstance(value, Mapping):
        return _extract_primary_field(value)
    if isinstance(value, str) and value.startswith("{") and value.endswith("}"):
        try:
            decoded = _decode_go_json(value)
        except (ValueError, RecursionError):
            return None
        if isinstance(decoded, dict):
            return _extract_primary_field(decoded)
    return None


def _coerce_to(value: Any, declared_type: str) -> Any:
    """`value` coerced to one declared type, or `_MISSING` when the Go rule does not apply."""
    if declared_type in STRING_TYPES:
        extracted = _coerce_to_string(value)
        return _MISSING if extracted is None else extracted
    if not isinstance(value, str):
        return _MISSING
    if declared_type in NUMBER_TYPES:
        parsed: Any = _parse_go_float(value)
    elif declared_type in INTEGER_TYPES:
        parsed = _parse_go_int(value)
    elif declared_type in BOOLEAN_TYPES:
        parsed = _parse_go_bool(value)
    else:
        return _MISSING
    return _MISSING if parsed is None else parsed


def _declared_types(property_schema: Mapping[str, Any]) -> tuple[str, ...]:
    """The lower-cased `type` of a schema property: one name, a list of names, or none."""
    declared = property_schema.get("type")
    if isinstance(declared, str):
        return (declared.lower(),)
    if isinstance(declared, list | tuple):
        return tuple(name.lower() for name in declared if isinstance(name, str))
    return ()


def _schema_properties(schema: Mapping[str, Any] | None) -> Mapping[str, Any]:
    """The `properties` of a schema, empty when the schema or its properties are absent."""
    if not isinstance(schema, Mapping):
        return {}
    properties = schema.get("properties")
    return properties if isinstance(properties, Mapping) else {}


def _coerce_value(key: str, value: Any, declared_types: tuple[str, ...]) -> Coercion | None:
    """The coercion of one top-level parameter, trying its declared types in order."""
    if isinstance(value, Mapping) and "object" in declared_types:
        return None
    # A string already fits a union naming "string"; only the JSON-object rule applies to it.
    candidates = (
        ("string",) if isinstance(value, str) and "string" in declared_types else declared_types
    )
    for declared_type in candidates:
        coerced = _coerce_to(value, declared_type)
        if coerced is not _MISSING:
            return Coercion(
                key=key,
                from_type=_go_type_name(value),
                from_value=value,
                to_type=_go_type_name(coerced),
                to_value=coerced,
            )
    return None


def coerce_parameters(
    params: dict[str, Any] | None, schema: Mapping[str, Any] | None
) -> tuple[dict[str, Any] | None, tuple[Coercion, ...]]:
    """Layer 2: coerce top-level string parameters to the types the capability schema declares.

    Follows Go `coerceParameterTypes`: only keys named in `schema.properties` are touched;
    number/float64/float/double use ParseFloat (decimal or hex, underscores between digits),
    integer/int/int64/int32 ParseInt (base 10, int64: no prefix, no underscores), boolean/bool
    ParseBool, and string reduces a map (or a string holding a JSON object) to its primary
    field. A value that fails to parse is kept as it was, and so is one that parses to NaN or
    ±Inf, which JSON cannot carry (Go would fail to marshal it). With a type list such
    as `["integer", "null"]` each named type is tried in order, except that a string already
    satisfies a list naming "string" and a map one naming "object". Returns a new dict (None
    for None params) and the coercions applied, in parameter order; `params` is not mutated.
    """
    if params is None:
        return None, ()
    coerced_params = dict(params)
    properties = _schema_properties(schema)
    if not properties:
        return coerced_params, ()
    coercions: list[Coercion] = []
    for key, value in params.items():
        property_schema = properties.get(key)
        if not isinstance(property_schema, Mapping):
            continue
        coercion = _coerce_value(key, value, _declared_types(property_schema))
        if coercion is not None:
            coerced_params[key] = coercion.to_value
            coercions.append(coercion)
    return coerced_params, tuple(coercions)


# ---------------------------------------------------------------------------------------------
# Template bindings
# ---------------------------------------------------------------------------------------------

# reference §3.2: `{{<stepId>.<fieldPath>}}`, with Go's ASCII `\w`.
TEMPLATE_RE = re.compile(r"\{\{([\w-]+)\.([\w-]+(?:\.[\w-]+)*)\}\}", re.ASCII)


def _find_step_result(results: Mapping[str, Any], step_id: str) -> Any:
    """The result of `step_id`, matched exactly and then case-insensitively; `_MISSING` if none."""
    if step_id in results:
        return results[step_id]
    folded = step_id.casefold()
    for candidate_id, result in results.items():
        if str(candidate_id).casefold() == folded:
            return result
    return _MISSING


def _walk_path(root: Any, field_path: str) -> Any:
    """Go `extractFieldValue`: follow dot segments through maps and arrays; `_MISSING` if lost.

    Array indexes are read like Go `strconv.Atoi` (int64 range).
    """
    current = root
    for segment in field_path.split("."):
        if isinstance(current, Mapping):
            current = current.get(segment, _MISSING)
            if current is _MISSING:
                return _MISSING
        elif isinstance(current, list | tuple):
            index = _parse_go_int(segment)
            if index is None or not 0 <= index < len(current):
                return _MISSING
            current = current[index]
        else:
            return _MISSING
    return current


def _lookup_binding(results: Mapping[str, Any], step_id: str, field_path: str) -> Any:
    """The value `{{step_id.field_path}}` names, or `_MISSING` when the step or path is absent."""
    step_result = _find_step_result(results, step_id)
    if step_result is _MISSING:
        return _MISSING
    # reference §3.2: the path is read under "response." unless it already starts there.
    if not field_path.lower().startswith("response."):
        field_path = "response." + field_path
    return _walk_path({"response": step_result}, field_path)


def _resolve_string(text: str, results: Mapping[str, Any]) -> Any:
    """One string leaf with its bindings resolved (Go `substituteTemplates`)."""
    exact = TEMPLATE_RE.fullmatch(text)
    if exact is not None:
        value = _lookup_binding(results, exact.group(1), exact.group(2))
        if value is _MISSING:
            return text
        if isinstance(value, Mapping | list | tuple):
            return _go_json(value)
        return value

    def splice(match: re.Match[str]) -> str:
        value = _lookup_binding(results, match.group(1), match.group(2))
        return match.group(0) if value is _MISSING else go_format_value(value)

    return TEMPLATE_RE.sub(splice, text)


def resolve_bindings(params: Any, results: Mapping[str, Any]) -> Any:
    """Replace `{{step-id.path}}` bindings in every string leaf with values from earlier steps.

    `results` maps a step id to that step's parsed JSON response body; the path is read under
    `response.` (added unless present). A string that is exactly one binding becomes the raw
    value (number, string or bool keep their type, an explicit JSON null becomes None, an
    object or array becomes compact Go-style JSON text). Bindings inside longer text are
    spliced in with `go_format_value`. A binding whose step or path is missing stays literal.
    Lists and dicts are rebuilt recursively; other values and `params` itself are unchanged.
    """
    if isinstance(params, str):
        return _resolve_string(params, results)
    if isinstance(params, Mapping):
        return {key: resolve_bindings(value, results) for key, value in params.items()}
    if isinstance(params, list | tuple):
        return [resolve_bindings(item, results) for item in params]
    return params


def _string_leaves(value: Any, path: str = "") -> list[tuple[str, str]]:
    """Every string leaf under `value` with its JSON-path-ish location, depth first (iterative)."""
    leaves: list[tuple[str, str]] = []
    pending: list[tuple[str, Any]] = [(path, value)]
    while pending:
        location, item = pending.pop()
        if isinstance(item, str):
            leaves.append((location, item))
        elif isinstance(item, Mapping):
            pending.extend(reversed([
                (f"{location}.{key}" if location else str(key), member)
                for key, member in item.items()
            ]))
        elif isinstance(item, list | tuple):
            pending.extend(reversed([
                (f"{location}[{index}]", member) for index, member in enumerate(item)
            ]))
    return leaves


def binding_references(value: Any) -> set[str]:
    """The step ids that `{{id.path}}` bindings in any string leaf of `value` refer to."""
    return {
        match.group(1) for _, text in _string_leaves(value) for match in TEMPLATE_RE.finditer(text)
    }


def exact_bound_keys(params: Mapping[str, Any] | None) -> frozenset[str]:
    """Top-level keys whose original value is exactly one binding (protected from correction)."""
    if not params:
        return frozenset()
    return frozenset(
        key
        for key, value in params.items()
        if isinstance(value, str) and TEMPLATE_RE.fullmatch(value) is not None
    )


PathSegments = tuple[str | int, ...]
MISSING = object()  # what `value_at_path` returns where a path leads nowhere


def render_path(segments: PathSegments) -> str:
    """A JSON path as users read it: `filter.city`, `items[0].id`."""
    text = ""
    for segment in segments:
        if isinstance(segment, int):
            text += f"[{segment}]"
        else:
            text += f".{segment}" if text else segment
    return text


def exact_bound_paths(params: Any, prefix: PathSegments = ()) -> dict[str, PathSegments]:
    """Every location, at any depth, whose original value is exactly one `{{step.path}}` token.

    Maps the rendered path (`amount`, `order.total`, `lines[0].sku`) to its segments; these
    values are protected from correction (seed 000 §12: exact template bindings).
    """
    found: dict[str, PathSegments] = {}
    if isinstance(params, str):
        if prefix and TEMPLATE_RE.fullmatch(params) is not None:
            found[render_path(prefix)] = prefix
    elif isinstance(params, Mapping):
        for key, value in params.items():
            found.update(exact_bound_paths(value, (*prefix, str(key))))
    elif isinstance(params, list | tuple):
        for index, value in enumerate(params):
            found.update(exact_bound_paths(value, (*prefix, index)))
    return found


def value_at_path(root: Any, segments: PathSegments) -> Any:
    """The value at `segments` inside `root`, or `MISSING` when the path leads nowhere."""
    value = root
    for segment in segments:
        if isinstance(segment, int):
            if not isinstance(value, list | tuple) or not 0 <= segment < len(value):
                return MISSING
        elif not isinstance(value, Mapping) or segment not in value:
            return MISSING
        value = value[segment]
    return value


# ---------------------------------------------------------------------------------------------
# Pre-dispatch guard (seed 000 §12, SPEC §2.2 row 0)
# ---------------------------------------------------------------------------------------------

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
    for path, text in _string_leaves(params):
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
    declared_types = _declared_types(property_schema)
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
    properties = _schema_properties(object_schema)
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


# ---------------------------------------------------------------------------------------------
# Legacy layer 3 trigger (reference §2.6, Go `isTypeRelatedError`)
# ---------------------------------------------------------------------------------------------

TYPE_ERROR_PATTERNS = (
    "cannot unmarshal string into",
    "cannot unmarshal number into",
    "cannot unmarshal bool into",
    "json: cannot unmarshal",
    "type mismatch",
    "invalid type",
    "expected number",
    "expected string",
    "expected boolean",
    "expected integer",
    "expected float",
    "invalid value",
)

VALIDATION_ERROR_PATTERNS = (
    "must be greater than",
    "must be less than",
    "must be positive",
    "must be non-negative",
    "must be at least",
    "must be at most",
    "is required",
    "missing required",
    "cannot be empty",
    "cannot be zero",
    "cannot be null",
    "cannot be negative",
    "invalid format",
    "out of range",
    "invalid_request",
    "bad request",
    "validation failed",
    "constraint violation",
)


def match_type_related_error(error_text: str, response_body: str) -> str | None:
    """The first type or validation pattern found in `lower(error_text + " " + response_body)`."""
    haystack = f"{error_text} {response_body}".lower()
    for pattern in (*TYPE_ERROR_PATTERNS, *VALIDATION_ERROR_PATTERNS):
        if pattern in haystack:
            return pattern
    return None
