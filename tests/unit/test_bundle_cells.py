"""The import's per-column cell decoders accept and refuse exactly what `decode_value` does."""

from __future__ import annotations

import math

import pyarrow as pa
import pytest

from store.bundle.format import (
    TIMESTAMPTZ,
    BundleValueError,
    ColumnSpec,
    decode_value,
    fast_decoder,
)
from store.bundle.staging import binary_array

# (case id, column type, nullable, encoded cell)
_CELLS = [
    ("text", "VARCHAR", False, "hello"),
    ("text_empty", "VARCHAR", False, ""),
    ("text_unicode", "VARCHAR", False, "çay ☕ 𝄞"),
    ("text_lone_surrogate", "VARCHAR", False, "bad \ud800 text"),
    ("text_got_number", "VARCHAR", False, 12),
    ("text_got_bool", "VARCHAR", True, True),
    ("text_got_list", "VARCHAR", True, ["a"]),
    ("text_null_nullable", "VARCHAR", True, None),
    ("text_null_not_null", "VARCHAR", False, None),
    ("json_object", "JSON", True, '{"a": [1, 2.5, null]}'),
    ("json_invalid", "JSON", True, "{not json"),
    ("json_nan_constant", "JSON", True, "[NaN]"),
    ("json_deep", "JSON", True, "[" * 100_000 + "]" * 100_000),
    ("json_unicode", "JSON", True, '"ş"'),
    ("json_surrogate", "JSON", True, '"\ud800"'),
    ("json_got_object", "JSON", True, {"a": 1}),
    ("json_integer_past_64_bits", "JSON", True, "[18446744073709551616]"),
    ("json_number_past_a_double", "JSON", True, "[1e400]"),
    ("json_duplicate_keys", "JSON", True, '{"a": 1, "a": 2}'),
    ("json_nested_past_pythons_recursion", "JSON", True, "[" * 1_010 + "]" * 1_010),
    ("json_nested_past_orjsons_limit", "JSON", True, "[" * 1_025 + "]" * 1_025),
    ("json_trailing_text", "JSON", True, "{} x"),
    ("timestamp", "TIMESTAMP", False, "2026-01-31 14:00:00.123456"),
    ("timestamp_no_fraction", TIMESTAMPTZ, False, "2026-01-31 14:00:00"),
    ("timestamp_iso_t", TIMESTAMPTZ, False, "2026-01-31T14:00:00"),
    ("timestamp_month_13", TIMESTAMPTZ, False, "2026-13-31 14:00:00"),
    ("timestamp_unicode_digits", TIMESTAMPTZ, False, "٢٠٢٦-01-31 14:00:00"),
    ("timestamp_got_number", "TIMESTAMP", False, 1_700_000_000),
    ("base64", "BLOB", True, "aGVsbG8="),
    ("base64_empty", "BLOB", True, ""),
    ("base64_bad_padding", "BLOB", True, "aGVsbG8"),
    ("base64_bad_alphabet", "BLOB", True, "aGV*bG8="),
    ("base64_newline", "BLOB", True, "aGVs\nbG8="),
    ("base64_unicode", "BLOB", True, "aGVsbG8ş"),
    ("base64_excess_after_padding", "BLOB", True, "aGVsbG8=aGVs"),
    ("base64_got_number", "BLOB", True, 5),
    ("base64_padding_after_a_full_quad", "BLOB", True, "aGVsbG8hAAAA="),
    ("base64_leading_padding", "BLOB", True, "=aGVsbG8h"),
    ("base64_url_alphabet", "BLOB", True, "a-_sbG8h"),
    ("base64_nul", "BLOB", True, "aGVs\x00bG8h"),
    ("base64_long", "BLOB", True, "aGVsbG8h" * 10_000),
    ("integer", "INTEGER", False, 7),
    ("integer_max", "INTEGER", False, 2**31 - 1),
    ("integer_over", "INTEGER", False, 2**31),
    ("integer_got_bool", "INTEGER", False, True),
    ("integer_got_float", "INTEGER", False, 7.0),
    ("bigint_min", "BIGINT", False, -(2**63)),
    ("bigint_under", "BIGINT", False, -(2**63) - 1),
    ("bigint_got_text", "BIGINT", True, "7"),
    ("double", "DOUBLE", True, 1.5),
    ("double_from_int", "DOUBLE", True, 3),
    ("double_nan_text", "DOUBLE", True, "NaN"),
    ("double_infinity_text", "DOUBLE", True, "-Infinity"),
    ("double_other_text", "DOUBLE", True, "1.5"),
    ("double_got_bool", "DOUBLE", True, False),
    ("boolean", "BOOLEAN", False, False),
    ("boolean_got_int", "BOOLEAN", False, 1),
    ("boolean_null_not_null", "BOOLEAN", False, None),
    ("list", "VARCHAR[]", True, ["a", None, "b"]),
    ("list_got_text", "VARCHAR[]", True, "a"),
    ("list_of_numbers", "VARCHAR[]", True, [1]),
]


def _outcome(decode, value):
    try:
        decoded = decode(value)
    except BundleValueError as problem:
        return ("refused", str(problem))
    if isinstance(decoded, float) and math.isnan(decoded):
        return ("nan",)
    return ("decoded", type(decoded), decoded)


@pytest.mark.parametrize(
    ("kind", "nullable", "value"), [case[1:] for case in _CELLS], ids=[case[0] for case in _CELLS]
)
def test_the_fast_decoder_accepts_and_refuses_as_decode_value(kind, nullable, value):
    column = ColumnSpec(name="c", type=kind, nullable=nullable)
    expected = _outcome(lambda cell: decode_value(column, cell), value)
    assert _outcome(fast_decoder(column), value) == expected


def test_the_corpus_holds_refusals_and_decodings_of_every_column_type():
    """The comparison above would pass vacuously if no case were refused, or none decoded."""
    kinds = {kind: set() for _, kind, _, _ in _CELLS}
    for _, kind, nullable, value in _CELLS:
        column = ColumnSpec(name="c", type=kind, nullable=nullable)
        kinds[kind].add(_outcome(lambda cell, column=column: decode_value(column, cell), value)[0])
    assert all("refused" in outcomes for outcomes in kinds.values()), kinds
    assert all(outcomes - {"refused"} for outcomes in kinds.values()), kinds


@pytest.mark.parametrize(
    "values",
    [[], [None], [b""], [b"a", None, b"", b"xyz"], [b"q"] * 5, [None, None], [bytes(range(256))]],
    ids=["empty", "one_null", "one_empty", "mixed", "no_nulls", "all_nulls", "binary"],
)
def test_a_staged_body_column_equals_pyarrows_own_array(values):
    built = binary_array(values)
    built.validate(full=True)
    assert built.equals(pa.array(values, type=pa.large_binary()))
    assert built.null_count == values.count(None)
    assert built.to_pylist() == values
