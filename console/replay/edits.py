"""What a replay changes, read and checked before it starts: edited tool responses (SPEC §3.4),
edited request parameters and config overrides. Every problem is one line naming the file or
option, the path and the value.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from executor.config import ConfigError, resolve_config
from executor.files import read_regular_file

__all__ = [
    "FRAMING_HEADERS",
    "RESPONSE_KEYWORDS",
    "ReplayError",
    "ReplayResponse",
    "ResponseSpecError",
    "load_edits",
    "load_parameter_edits",
    "load_params_file",
    "load_response_file",
    "load_responses_file",
    "parse_config_override",
    "parse_param_option",
    "parse_response_option",
    "parse_response_spec",
]

# SPEC §3.4: "drop" is a transport failure; "timeout" is the same failure as a client timeout.
RESPONSE_KEYWORDS = {"drop": "reset", "timeout": "timeout"}
_SPEC_FIELDS = ("body", "headers", "status")
_LOWEST_STATUS, _HIGHEST_STATUS = 100, 599
_HEADER_NAME_RE = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
# The replay server frames every body itself, so an edited response may not set these.
FRAMING_HEADERS = frozenset({"content-length", "transfer-encoding"})


class ResponseSpecError(ValueError):
    """An edited response that cannot be used; str() is one line naming where and what."""


class ReplayError(ValueError):
    """A replay that cannot start (unknown step, no plan snapshot, bad override); one line."""


@dataclass(frozen=True, slots=True)
class ReplayResponse:
    """What the replay tool server answers to one dispatch.

    With `transport_error` None it is an HTTP answer: `status`, `headers` in order, and the exact
    `body` bytes. Otherwise the request fails as the original did: "reset" closes the
    connection without an answer; "timeout", "connect" and "protocol" make the client raise that
    failure (`transport_message` is its text). `source` is "edited" or "recorded".
    """

    status: int = 0
    headers: tuple[tuple[str, str], ...] = ()
    body: bytes = b""
    transport_error: str | None = None
    transport_message: str = ""
    source: str = "edited"

    def describe(self) -> str:
        """`HTTP 422`, `drop (reset)` or `timeout`, for reports."""
        if self.transport_error is None:
            return f"HTTP {self.status}"
        if self.transport_error == "reset":
            return "drop (reset)"
        return self.transport_error


def _problem(where: str, path: str, problem: str) -> ResponseSpecError:
    return ResponseSpecError(": ".join(part for part in (where, path, problem) if part))


def _shown(value: Any) -> str:
    """A value as JSON would show it: `"abc"`, `3`, `true`, `null`, `an object`, `an array`."""
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "an array"
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 60 else text[:59] + "…"


def parse_response_spec(value: Any, where: str, path: str = "") -> ReplayResponse:
    """An edited response from decoded JSON: `{"status", "headers"?, "body"?}`, "drop" or "timeout".

    A string body is sent as-is (UTF-8); any other JSON body is sent JSON-encoded; no body sends
    none. Content-Type defaults to application/json, or text/plain for a string body.
    Raises ResponseSpecError naming `where` (the file), `path` and the problem.
    """
    if isinstance(value, str) and value in RESPONSE_KEYWORDS:
        kind = RESPONSE_KEYWORDS[value]
        message = "replayed timeout" if kind == "timeout" else ""
        return ReplayResponse(transport_error=kind, transport_message=message)
    if not isinstance(value, dict):
        expected = 'an object {"status", "headers", "body"}, "drop" or "timeout"'
        raise _problem(where, path, f"expected {expected}, got {_shown(value)}")
    for key in value:
        if key not in _SPEC_FIELDS:
            known = ", ".join(_SPEC_FIELDS)
            raise _problem(where, path, f"unknown field {_shown(key)} (expected one of: {known})")
    if "status" not in value:
        raise _problem(where, path, 'missing required field "status"')
    status = value["status"]
    if (
        isinstance(status, bool)
        or not isinstance(status, int)
        or not _LOWEST_STATUS <= status <= _HIGHEST_STATUS
    ):
        expected = f"an integer from {_LOWEST_STATUS} to {_HIGHEST_STATUS}"
        raise _problem(where, _join(path, "status"), f"expected {expected}, got {_shown(status)}")
    headers = _parse_headers(value.get("headers", {}), where, _join(path, "headers"))
    names = {name.lower() for name, _ in headers}
    body: bytes = b""
    content_type: str | None = None
    if "body" in value:
        body, content_type = _body_bytes(value["body"], where, _join(path, "body"))
    if content_type is not None and "content-type" not in names:
        headers = (("Content-Type", content_type), *headers)
    return ReplayResponse(status=status, headers=headers, body=body)


def _body_bytes(value: Any, where: str, path: str) -> tuple[bytes, str]:
    """The bytes a response body is sent as, and its default Content-Type."""
    if isinstance(value, str):
        text, content_type = value, "text/plain; charset=utf-8"
    else:
        try:
            text = json.dumps(value, ensure_ascii=False, allow_nan=False)
        except ValueError as error:
            problem = "expected finite JSON numbers, got one too large for a float (like 1e400)"
            raise _problem(where, path, problem) from error
        except RecursionError as error:
            problem = "expected a JSON value, got one nested too deeply"
            raise _problem(where, path, problem) from error
        content_type = "application/json"
    return _utf8(text, where, path), content_type


def _utf8(text: str, where: str, path: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as error:
        problem = f"expected Unicode text, got a lone surrogate (\\u{ord(text[error.start]):04x})"
        raise _problem(where, path, problem) from error


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _parse_headers(value: Any, where: str, path: str) -> tuple[tuple[str, str], ...]:
    if not isinstance(value, dict):
        raise _problem(where, path, f"expected an object of strings, got {_shown(value)}")
    headers = []
    for name, header_value in value.items():
        here = f"{path}.{name}"
        if not _HEADER_NAME_RE.fullmatch(name):
            raise _problem(where, path, f"expected header names as HTTP tokens, got {_shown(name)}")
        if name.lower() in FRAMING_HEADERS:
            raise _problem(where, here, "the replay server sets it from the body; leave it out")
        if not isinstance(header_value, str):
            raise _problem(where, here, f"expected a string, got {_shown(header_value)}")
        if any(ch in header_value for ch in "\r\n\0"):
            raise _problem(where, here, "expected one line of text, got a line break or NUL")
        _utf8(header_value, where, here)
        headers.append((name, header_value))
    return tuple(headers)


class _DuplicateKey(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


class _NonStandardConstant(ValueError):
    def __init__(self, constant: str) -> None:
        super().__init__(constant)
        self.constant = constant


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    decoded: dict[str, Any] = {}
    for key, item in pairs:
        if key in decoded:
            raise _DuplicateKey(key)
        decoded[key] = item
    return decoded


def _reject_constant(constant: str) -> Any:
    raise _NonStandardConstant(constant)


def _read_json(path: str) -> Any:
    try:
        content = read_regular_file(path)
    except OSError as error:
        raise _problem(path, "", f"cannot read: {error.strerror or error}") from error
    try:
        text = content.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        problem = f"not UTF-8 text (invalid byte at offset {error.start})"
        raise _problem(path, "", problem) from error
    try:
        return json.loads(text, object_pairs_hook=_unique_keys, parse_constant=_reject_constant)
    except json.JSONDecodeError as error:
        problem = f"invalid JSON at line {error.lineno}, column {error.colno}: {error.msg}"
        raise _problem(path, "", problem) from error
    except _DuplicateKey as error:
        raise _problem(path, "", f"duplicate key {_shown(error.key)}") from error
    except _NonStandardConstant as error:
        raise _problem(path, "", f"invalid JSON: {error.constant} is not a JSON value") from error
    except RecursionError as error:
        raise _problem(path, "", "JSON nested too deeply to read") from error


def load_response_file(path: str) -> ReplayResponse:
    """The edited response in the JSON file at `path` (`--response N=FILE`)."""
    return parse_response_spec(_read_json(path), path)


def load_responses_file(path: str) -> list[ReplayResponse | None]:
    """The list of edited responses at `path` (`--responses FILE`); item i answers dispatch i+1.

    A `null` item keeps the recorded response of that dispatch.
    """
    items = _read_json(path)
    if not isinstance(items, list):
        raise _problem(path, "", f"expected an array of responses, got {_shown(items)}")
    return [
        None if item is None else parse_response_spec(item, path, f"[{index}]")
        for index, item in enumerate(items)
    ]


def parse_response_option(text: str) -> tuple[int, str]:
    """`N=FILE` → (N, FILE); N is the dispatch number, 1 for the first."""
    number, separator, path = text.partition("=")
    if not separator or not path:
        raise ResponseSpecError(f"--response {text}: expected N=FILE, e.g. 2=422.json")
    if not number.isascii() or not number.isdigit() or int(number) < 1:
        raise ResponseSpecError(
            f"--response {text}: expected N to be a positive integer (the dispatch number, "
            f"1 for the first), got {number!r}"
        )
    return int(number), path


def load_edits(
    response_options: Sequence[str], responses_file: str | None = None
) -> dict[int, ReplayResponse]:
    """Dispatch number → edited response from `--responses FILE` and `--response N=FILE`.

    A dispatch given twice, in either or both, is an error.
    """

    def given() -> Iterator[tuple[int, Callable[[], ReplayResponse], str]]:
        if responses_file is not None:
            for index, response in enumerate(load_responses_file(responses_file), start=1):
                if response is not None:
                    yield index, lambda r=response: r, f"--responses {responses_file} item {index}"
        for option in response_options:
            number, path = parse_response_option(option)
            yield number, lambda p=path: load_response_file(p), f"--response {option}"

    edits = _merged(given(), lambda number: f"dispatch {number}", ResponseSpecError)
    return dict(sorted(edits.items()))


def _merged(
    given: Iterable[tuple[Any, Callable[[], Any], str]],
    name: Callable[[Any], str],
    error: type[ValueError],
) -> dict[Any, Any]:
    """key → value from (key, read the value, where it was given) in order; a key given twice
    raises `error` naming both places."""
    merged: dict[Any, Any] = {}
    given_by: dict[Any, str] = {}
    for key, value_of, origin in given:
        if key in given_by:
            raise error(f"{origin}: {name(key)} is already given by {given_by[key]}")
        merged[key] = value_of()
        given_by[key] = origin
    return merged


def _key_value(option: str, text: str, example: str) -> tuple[str, Any]:
    """`KEY=VALUE` → (key, value); VALUE is read as JSON (`5`, `true`, `null`), else as text."""
    key, separator, raw_value = text.partition("=")
    key = key.strip()
    if not separator or not key:
        raise ReplayError(f"{option} {text}: expected KEY=VALUE, e.g. {example}")
    try:
        value = json.loads(raw_value, parse_constant=_reject_constant)
    except (ValueError, _NonStandardConstant, RecursionError):
        value = raw_value
    return key, value


def parse_config_override(text: str) -> tuple[str, Any]:
    """`KEY=VALUE` → (key, value); VALUE is read as JSON (`5`, `true`, `null`), else as text.

    The pair is validated like a plan's `config` block; ReplayError names the problem.
    """
    key, value = _key_value("--config", text, "max_attempts=5")
    try:
        resolve_config({key: value}, env={})
    except ConfigError as error:
        raise ReplayError(
            f"--config {text}: expected {error.expected}, got {error.received}"
        ) from error
    return key, value


def parse_param_option(text: str) -> tuple[str, Any]:
    """`--param KEY=VALUE` → (key, value); VALUE is read as JSON (`2`, `"2"`, `[1]`), else as
    text, so `city_code=PAR` sets the string "PAR"."""
    return _key_value("--param", text, "city_code=PAR")


def load_params_file(path: str) -> dict[str, Any]:
    """The parameter edits in the JSON object at `path` (`--params FILE`): key → new value."""
    try:
        edits = _read_json(path)
    except ResponseSpecError as error:
        raise ReplayError(str(error)) from error
    if not isinstance(edits, dict):
        raise ReplayError(f"{path}: expected an object of parameter → value, got {_shown(edits)}")
    for key in edits:
        if not key.strip():
            raise ReplayError(f"{path}: expected parameter names, got {_shown(key)}")
    return edits


def load_parameter_edits(
    param_options: Sequence[str], params_file: str | None = None
) -> dict[str, Any]:
    """Parameter → new value for the replayed step, from `--params FILE` and `--param KEY=VALUE`.

    A key given twice, in either or both, is an error. The keys are checked against the step
    when the replay is prepared (`prepare_replay`).
    """

    def given() -> Iterator[tuple[str, Callable[[], Any], str]]:
        if params_file is not None:
            for key, value in load_params_file(params_file).items():
                yield key, lambda v=value: v, f"--params {params_file}"
        for option in param_options:
            key, value = parse_param_option(option)
            yield key, lambda v=value: v, f"--param {option}"

    return _merged(given(), _shown, ReplayError)
