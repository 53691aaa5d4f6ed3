"""Go's formatting of values: `%v`, `json.Marshal`, float digits, as TruvaG3 renders them."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any


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
    """Literal JSON text queued between the values `go_json` still has to encode."""

    text: str


def _go_json_scalar(value: Any, *, exact_ints: bool = False) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int) and exact_ints:
        return str(value)
    if isinstance(value, float) and exact_ints and not math.isfinite(value):
        return json.dumps(value)  # as a request body has always written it
    if isinstance(value, int | float):
        as_float = _as_go_float(value)
        return str(value) if as_float is None else _go_json_float(as_float)
    if isinstance(value, str):
        return _go_json_string(value)
    return _go_json_string(str(value))


def go_json(value: Any, *, exact_ints: bool = False) -> str:
    """Compact JSON the way Go's `json.Marshal` writes a decoded value: sorted keys, no spaces.

    Numbers are float64s, as Go decodes them; with `exact_ints` a Python int is written as it
    is (Go would round one past 2**53). Iterative, so a value nested as deep as any decoder
    returns never hits the recursion limit.
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
            parts.append(_go_json_scalar(item, exact_ints=exact_ints))
    return "".join(parts)


def holds_float(value: Any) -> bool:
    """Whether a decoded JSON value holds a float anywhere (iteratively, for any depth)."""
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, float):
            return True
        if isinstance(item, Mapping):
            pending.extend(item.values())
        elif isinstance(item, list | tuple):
            pending.extend(item)
    return False


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
        return go_json(value)
    return str(value)


def go_type_name(value: Any) -> str:
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


def format_typed(value: Any, go_type: str) -> str:
    """`%v` of a value of a known Go type; int64 values print as integers, not float64."""
    if go_type == "int64" and isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return go_format_value(value)
