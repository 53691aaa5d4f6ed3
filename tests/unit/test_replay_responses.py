"""Edited responses for `truva-console replay` (SPEC §3.4): files, options and their checks."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from console.replay.edits import (
    ReplayError,
    ReplayResponse,
    ResponseSpecError,
    load_edits,
    load_response_file,
    load_responses_file,
    parse_config_override,
    parse_response_option,
    parse_response_spec,
)

JSON_TYPE = ("Content-Type", "application/json")
TEXT_TYPE = ("Content-Type", "text/plain; charset=utf-8")

VALID = [
    (
        "spec_example_422_with_retry_after",
        {"status": 422, "headers": {"Retry-After": "2"}, "body": {"success": False}},
        ReplayResponse(422, (JSON_TYPE, ("Retry-After", "2")), b'{"success": false}'),
    ),
    (
        "string_body_is_sent_as_is",
        {"status": 503, "body": "down for <maintenance> ü"},
        ReplayResponse(503, (TEXT_TYPE,), "down for <maintenance> ü".encode()),
    ),
    ("no_body_sends_none_and_no_content_type", {"status": 204}, ReplayResponse(204, (), b"")),
    (
        "json_null_body_is_sent_as_null",
        {"status": 200, "body": None},
        ReplayResponse(200, (JSON_TYPE,), b"null"),
    ),
    (
        "array_body_is_json",
        {"status": 200, "body": [1, "two"]},
        ReplayResponse(200, (JSON_TYPE,), b'[1, "two"]'),
    ),
    (
        "given_content_type_is_kept",
        {"status": 200, "headers": {"content-type": "application/problem+json"}, "body": {}},
        ReplayResponse(200, (("content-type", "application/problem+json"),), b"{}"),
    ),
    ("lowest_status", {"status": 100}, ReplayResponse(100, (), b"")),
    ("highest_status", {"status": 599}, ReplayResponse(599, (), b"")),
    ("drop_is_a_transport_failure", "drop", ReplayResponse(transport_error="reset")),
    (
        "timeout_is_a_client_timeout",
        "timeout",
        ReplayResponse(transport_error="timeout", transport_message="replayed timeout"),
    ),
]


@pytest.mark.parametrize(
    ("value", "expected"), [(c[1], c[2]) for c in VALID], ids=[c[0] for c in VALID]
)
def test_valid_response_specs(value: Any, expected: ReplayResponse) -> None:
    assert parse_response_spec(value, "r.json") == expected


INVALID = [
    (
        "array_instead_of_object",
        [422],
        'r.json: expected an object {"status", "headers", '
        '"body"}, "drop" or "timeout", got an array',
    ),
    ("other_keyword", "close", 'got "close"'),
    ("number_instead_of_object", 422, "got 422"),
    ("status_missing", {"body": {}}, 'r.json: missing required field "status"'),
    (
        "status_as_string",
        {"status": "422"},
        'r.json: status: expected an integer from 100 to 599, got "422"',
    ),
    ("status_too_high", {"status": 600}, "status: expected an integer from 100 to 599, got 600"),
    ("status_too_low", {"status": 99}, "got 99"),
    ("status_boolean", {"status": True}, "got true"),
    ("status_float", {"status": 422.0}, "got 422.0"),
    (
        "unknown_field",
        {"status": 422, "stauts": 1},
        'r.json: unknown field "stauts" (expected one of: body, headers, status)',
    ),
    (
        "headers_not_object",
        {"status": 422, "headers": ["Retry-After: 2"]},
        "r.json: headers: expected an object of strings, got an array",
    ),
    (
        "header_value_number",
        {"status": 429, "headers": {"Retry-After": 2}},
        "r.json: headers.Retry-After: expected a string, got 2",
    ),
    ("header_value_null", {"status": 429, "headers": {"Retry-After": None}}, "got null"),
    (
        "header_name_with_space",
        {"status": 429, "headers": {"Retry After": "2"}},
        'expected header names as HTTP tokens, got "Retry After"',
    ),
    (
        "header_value_with_newline",
        {"status": 200, "headers": {"X-A": "1\r\nX-B: 2"}},
        "headers.X-A: expected one line of text",
    ),
    (
        "content_length_is_computed",
        {"status": 200, "headers": {"Content-Length": "5"}},
        "headers.Content-Length: the replay server sets it from the body",
    ),
    (
        "transfer_encoding_is_computed",
        {"status": 200, "headers": {"Transfer-Encoding": "x"}},
        "headers.Transfer-Encoding: the replay server sets it",
    ),
]


@pytest.mark.parametrize(
    ("value", "message"), [(c[1], c[2]) for c in INVALID], ids=[c[0] for c in INVALID]
)
def test_invalid_response_specs_name_the_problem(value: Any, message: str) -> None:
    with pytest.raises(ResponseSpecError) as caught:
        parse_response_spec(value, "r.json")
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)


FILES = [
    ("missing_file", None, "cannot read: No such file or directory"),
    ("not_json", b"{status: 422}", "invalid JSON at line 1, column 2"),
    ("empty_file", b"", "invalid JSON at line 1, column 1"),
    ("nan_is_not_json", b'{"status": NaN}', "invalid JSON: NaN is not a JSON value"),
    ("duplicate_key", b'{"status": 200, "status": 422}', 'duplicate key "status"'),
    ("not_utf8", b'{"status": 200, "body": "\xff"}', "not UTF-8 text (invalid byte at offset"),
    ("wrong_shape_names_the_file", b'{"status": 1000}', "status: expected an integer"),
    ("body_number_too_big_for_a_float", b'{"status": 200, "body": 1e400}',
     "body: expected finite JSON numbers, got one too large for a float (like 1e400)"),
    ("body_lone_surrogate", b'{"status": 200, "body": "\\ud800"}',
     "body: expected Unicode text, got a lone surrogate (\\ud800)"),
    ("body_lone_surrogate_inside_json", b'{"status": 200, "body": {"a": ["\\udfff"]}}',
     "body: expected Unicode text, got a lone surrogate (\\udfff)"),
    ("header_lone_surrogate", b'{"status": 200, "headers": {"X-Note": "\\ud800"}}',
     "headers.X-Note: expected Unicode text, got a lone surrogate (\\ud800)"),
    ("nested_too_deeply", b'{"status": 200, "body": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
     "JSON nested too deeply to read"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("content", "message"), [(c[1], c[2]) for c in FILES], ids=[c[0] for c in FILES]
)
def test_response_file_errors(tmp_path: Path, content: bytes | None, message: str) -> None:
    path = tmp_path / "edit.json"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(ResponseSpecError) as caught:
        load_response_file(str(path))
    assert str(caught.value).startswith(str(path) + ": ")
    assert message in str(caught.value)


def test_a_device_or_a_pipe_is_not_read_as_a_response_file(tmp_path: Path) -> None:
    # /dev/zero was read until memory ran out (5.3 GB in 6 s, Ctrl-C unheard).
    pipe = tmp_path / "edit.json"
    os.mkfifo(pipe)
    for path in ("/dev/zero", str(pipe)):
        with pytest.raises(ResponseSpecError) as caught:
            load_response_file(path)
        assert str(caught.value) == (
            f"{path}: cannot read: not a regular file (a device, pipe or socket)"
        )


def test_response_file_with_bom_is_read(tmp_path: Path) -> None:
    path = tmp_path / "edit.json"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps({"status": 422}).encode())
    assert load_response_file(str(path)) == ReplayResponse(422)


def test_responses_list_keeps_null_as_recorded(tmp_path: Path) -> None:
    path = tmp_path / "list.json"
    path.write_text(json.dumps([None, "drop", {"status": 200, "body": "ok"}]), encoding="utf-8")
    assert load_responses_file(str(path)) == [
        None,
        ReplayResponse(transport_error="reset"),
        ReplayResponse(200, (TEXT_TYPE,), b"ok"),
    ]


LIST_ERRORS = [
    ("object_instead_of_list", {"status": 200}, "expected an array of responses, got an object"),
    ("item_path_is_named", [None, {"status": "x"}], "list.json: [1].status: expected an integer"),
    (
        "item_header_path_is_named",
        [{"status": 200, "headers": {"A": 1}}],
        "[0].headers.A: expected a string",
    ),
]


@pytest.mark.parametrize(
    ("value", "message"), [(c[1], c[2]) for c in LIST_ERRORS], ids=[c[0] for c in LIST_ERRORS]
)
def test_responses_list_errors(tmp_path: Path, value: Any, message: str) -> None:
    path = tmp_path / "list.json"
    path.write_text(json.dumps(value), encoding="utf-8")
    with pytest.raises(ResponseSpecError) as caught:
        load_responses_file(str(path))
    assert message in str(caught.value)


OPTIONS = [
    ("first_dispatch", "1=a.json", (1, "a.json")),
    ("file_with_equals_sign", "12=dir/x=y.json", (12, "dir/x=y.json")),
]


@pytest.mark.parametrize(
    ("text", "expected"), [(c[1], c[2]) for c in OPTIONS], ids=[c[0] for c in OPTIONS]
)
def test_response_options(text: str, expected: tuple[int, str]) -> None:
    assert parse_response_option(text) == expected


BAD_OPTIONS = [
    (
        "zero",
        "0=a.json",
        "expected N to be a positive integer (the dispatch number, 1 for the first), got '0'",
    ),
    ("negative", "-1=a.json", "got '-1'"),
    ("not_a_number", "two=a.json", "got 'two'"),
    ("signed", "+2=a.json", "got '+2'"),
    ("non_ascii_digit", "٣=a.json", "got '٣'"),
    ("no_equals", "a.json", "--response a.json: expected N=FILE"),
    ("no_file", "2=", "--response 2=: expected N=FILE"),
]


@pytest.mark.parametrize(
    ("text", "message"), [(c[1], c[2]) for c in BAD_OPTIONS], ids=[c[0] for c in BAD_OPTIONS]
)
def test_bad_response_options(text: str, message: str) -> None:
    with pytest.raises(ResponseSpecError) as caught:
        parse_response_option(text)
    assert message in str(caught.value)


def test_edits_merge_list_and_options_by_dispatch(tmp_path: Path) -> None:
    listed = tmp_path / "list.json"
    listed.write_text(json.dumps([{"status": 503}, None]), encoding="utf-8")
    single = tmp_path / "one.json"
    single.write_text(json.dumps({"status": 200}), encoding="utf-8")
    edits = load_edits([f"3={single}", f"2={single}"], str(listed))
    assert list(edits) == [1, 2, 3]
    assert [edits[n].status for n in (1, 2, 3)] == [503, 200, 200]


DUPLICATES = [
    (
        "option_twice",
        ["1=X", "1=X"],
        None,
        "--response 1=X: dispatch 1 is already given by --response 1=X",
    ),
    ("option_and_list", ["1=X"], [{"status": 503}], "dispatch 1 is already given by --responses"),
]


@pytest.mark.parametrize(
    ("options", "listed", "message"),
    [(c[1], c[2], c[3]) for c in DUPLICATES],
    ids=[c[0] for c in DUPLICATES],
)
def test_a_dispatch_given_twice_is_refused(
    tmp_path: Path, options: list[str], listed: list | None, message: str
) -> None:
    single = tmp_path / "one.json"
    single.write_text(json.dumps({"status": 200}), encoding="utf-8")
    options = [option.replace("X", str(single)) for option in options]
    list_path = None
    if listed is not None:
        list_path = tmp_path / "list.json"
        list_path.write_text(json.dumps(listed), encoding="utf-8")
    with pytest.raises(ResponseSpecError) as caught:
        load_edits(options, str(list_path) if list_path else None)
    assert message.replace("X", str(single)) in str(caught.value)


CONFIG_OVERRIDES = [
    ("integer", "max_attempts=5", ("max_attempts", 5)),
    ("boolean", "jitter=false", ("jitter", False)),
    ("null_budget", "max_total_tokens=null", ("max_total_tokens", None)),
    ("float", "backoff_factor=1.5", ("backoff_factor", 1.5)),
]


@pytest.mark.parametrize(
    ("text", "expected"),
    [(c[1], c[2]) for c in CONFIG_OVERRIDES],
    ids=[c[0] for c in CONFIG_OVERRIDES],
)
def test_config_overrides(text: str, expected: tuple[str, Any]) -> None:
    assert parse_config_override(text) == expected


BAD_CONFIG = [
    ("below_minimum", "max_attempts=0", "--config max_attempts=0: expected an integer >= 1, got 0"),
    ("text_for_integer", "max_attempts=five", 'expected an integer >= 1, got "five"'),
    ("unknown_key", "max_atempts=5", "did you mean 'max_attempts'?"),
    ("no_equals", "max_attempts", "--config max_attempts: expected KEY=VALUE"),
]


@pytest.mark.parametrize(
    ("text", "message"), [(c[1], c[2]) for c in BAD_CONFIG], ids=[c[0] for c in BAD_CONFIG]
)
def test_bad_config_overrides(text: str, message: str) -> None:
    with pytest.raises(ReplayError) as caught:
        parse_config_override(text)
    assert message in str(caught.value)
