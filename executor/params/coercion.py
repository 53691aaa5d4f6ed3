"""Layer 2: schema coercion of parameter values, with Go strconv parsing rules."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from executor import gojson
from executor.params.gofmt import format_typed, go_type_name

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
        before = format_typed(self.from_value, self.from_type)
        after = format_typed(self.to_value, self.to_type)
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


def parse_go_int(text: str) -> int | None:
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

    return gojson.loads(text, parse_constant=reject_constant)


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
        parsed = parse_go_int(value)
    elif declared_type in BOOLEAN_TYPES:
        parsed = _parse_go_bool(value)
    else:
        return _MISSING
    return _MISSING if parsed is None else parsed


def declared_types_of(property_schema: Mapping[str, Any]) -> tuple[str, ...]:
    """The lower-cased `type` of a schema property: one name, a list of names, or none."""
    declared = property_schema.get("type")
    if isinstance(declared, str):
        return (declared.lower(),)
    if isinstance(declared, list | tuple):
        return tuple(name.lower() for name in declared if isinstance(name, str))
    return ()


def schema_properties(schema: Mapping[str, Any] | None) -> Mapping[str, Any]:
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
                from_type=go_type_name(value),
                from_value=value,
                to_type=go_type_name(coerced),
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
    properties = schema_properties(schema)
    if not properties:
        return coerced_params, ()
    coercions: list[Coercion] = []
    for key, value in params.items():
        property_schema = properties.get(key)
        if not isinstance(property_schema, Mapping):
            continue
        coercion = _coerce_value(key, value, declared_types_of(property_schema))
        if coercion is not None:
            coerced_params[key] = coercion.to_value
            coercions.append(coercion)
    return coerced_params, tuple(coercions)
