"""SQL result values as text, the same in `truva-console sql` and the TUI's SQL screen."""

from __future__ import annotations

import json
import math
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from typing import Any

from console.printable import printable
from console.words import on_one_line

# Table cells longer than this are cut with `…`; csv and json keep every value whole.
CELL_WIDTH = 60


def cell_text(value: Any, width: int = CELL_WIDTH) -> str:
    """A value for a table cell: NULL as `NULL`, on one printable line, cut at `width` with `…`."""
    if value is None:
        return "NULL"
    text = printable(on_one_line(value_text(value)))
    return text if len(text) <= width else text[: width - 1] + "…"


def value_text(value: Any) -> str:
    """A value as text: bytes as UTF-8 (or `\\xNN` escapes, as DuckDB writes BLOBs), nested
    values as JSON, times in ISO 8601."""
    if isinstance(value, bytes):
        return _bytes_text(value)
    if isinstance(value, dict | list):
        return json.dumps(jsonable(value), ensure_ascii=False)
    if isinstance(value, datetime | date | time):
        return value.isoformat()
    return str(value)


def _bytes_text(value: bytes) -> str:
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        return "".join(chr(b) if 0x20 <= b < 0x7F and b != 0x5C else f"\\x{b:02x}" for b in value)


def jsonable(value: Any) -> Any:
    """A value as something `json.dumps` writes: bytes as text, times in ISO 8601, decimals
    and non-finite floats as strings, durations in seconds."""
    if isinstance(value, dict):
        return {str(key): jsonable(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(item) for item in value]
    if isinstance(value, bytes):
        return _bytes_text(value)
    if isinstance(value, datetime | date | time):
        return value.isoformat()
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, float) and not math.isfinite(value):  # NaN and infinities are not JSON
        return str(value)
    return value
