"""Go `time.ParseDuration` in Python: duration strings such as `1h2m3.5s` as integer nanoseconds."""

from __future__ import annotations

NANOSECONDS_PER_MILLISECOND = 1_000_000
NANOSECONDS_PER_SECOND = 1_000_000_000

_MAX_INT64 = (1 << 63) - 1
_DIGITS = "0123456789"

# Go's unitMap: both micro signs (U+00B5 and U+03BC) spell microseconds.
_UNIT_NANOSECONDS: dict[str, int] = {
    "ns": 1,
    "us": 1_000,
    "\u00b5s": 1_000,
    "\u03bcs": 1_000,
    "ms": 1_000_000,
    "s": NANOSECONDS_PER_SECOND,
    "m": 60 * NANOSECONDS_PER_SECOND,
    "h": 3600 * NANOSECONDS_PER_SECOND,
}


def parse_go_duration(text: str) -> int:
    """Parse a Go duration string (`[-+]?([0-9]*(\\.[0-9]*)?unit)+`, or `0`) into nanoseconds.

    Mirrors Go's grammar and arithmetic: each component needs digits and a unit (ns, us, µs, μs,
    ms, s, m, h), fractions are truncated to whole nanoseconds, no whitespace is allowed, and the
    total must fit in an int64. Raises ValueError naming the text on bad input.
    """
    original = text
    negative = False
    if text[:1] in ("-", "+"):
        negative = text[0] == "-"
        text = text[1:]
    if text == "0":
        return 0
    if text == "":
        raise ValueError(f"invalid duration {original!r}: expected a number and a unit, e.g. 2s")
    total = 0
    while text:
        if not (text[0] == "." or text[0] in _DIGITS):
            raise ValueError(f"invalid duration {original!r}: expected a digit at {text!r}")
        whole, text, whole_digits = _leading_digits(text)
        if whole > 1 << 63:
            raise ValueError(f"invalid duration {original!r}: out of range")
        fraction, scale, fraction_digits = 0, 1.0, 0
        if text[:1] == ".":
            fraction, scale, text, fraction_digits = _leading_fraction(text[1:])
        if whole_digits == 0 and fraction_digits == 0:
            raise ValueError(f"invalid duration {original!r}: a '.' without digits")
        unit_end = 0
        while unit_end < len(text) and not (text[unit_end] == "." or text[unit_end] in _DIGITS):
            unit_end += 1
        if unit_end == 0:
            raise ValueError(f"invalid duration {original!r}: missing unit (ns, us, ms, s, m, h)")
        unit, text = text[:unit_end], text[unit_end:]
        unit_ns = _UNIT_NANOSECONDS.get(unit)
        if unit_ns is None:
            raise ValueError(
                f"invalid duration {original!r}: unknown unit {unit!r} "
                "(expected ns, us, µs, ms, s, m or h)"
            )
        if whole > (1 << 63) // unit_ns:
            raise ValueError(f"invalid duration {original!r}: out of range")
        value = whole * unit_ns
        if fraction > 0:
            # Go converts through float64 here, truncating toward zero.
            value += int(float(fraction) * (float(unit_ns) / scale))
        total += value
        if value > 1 << 63 or total > 1 << 63:
            raise ValueError(f"invalid duration {original!r}: out of range")
    if negative:
        return -total
    if total > _MAX_INT64:
        raise ValueError(f"invalid duration {original!r}: out of range")
    return total


def _leading_digits(text: str) -> tuple[int, str, int]:
    """Split leading ASCII digits off `text`: (value, rest, digit count)."""
    end = 0
    while end < len(text) and text[end] in _DIGITS:
        end += 1
    return (int(text[:end]) if end else 0), text[end:], end


def _leading_fraction(text: str) -> tuple[int, float, str, int]:
    """Split fraction digits off `text` like Go's leadingFraction: precision stops at int64."""
    value, scale, end, overflowed = 0, 1.0, 0, False
    while end < len(text) and text[end] in _DIGITS:
        if not overflowed:
            candidate = value * 10 + int(text[end])
            if value > _MAX_INT64 // 10 or candidate > 1 << 63:
                overflowed = True
            else:
                value = candidate
                scale *= 10
        end += 1
    return value, scale, text[end:], end
