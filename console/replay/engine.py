"""Replays one recorded step locally against recorded or edited tool responses (SPEC §3.4).

The real executor runs the step over real HTTP to a loopback server that answers dispatch k
with the edited response for k, else the original run's k-th response byte for byte. The
steps it depends on are run too and answered with their recorded successful responses, so its
bindings, protected keys and layer-4 context are exactly those of the original run. LLM layers
are answered from the original run's recorded answers by a loopback OpenAI-compatible server,
by the live endpoint, or are off. docs/replay.md describes the choices.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import socket
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote, urlsplit

import httpx

from console.replay.loopback import LOOPBACK, NoDelayHandler, QuietThreadingHTTPServer
from console.words import counted
from executor.config import CONFIG_FIELDS, ConfigError, ExecutorConfig, resolve_config
from executor.events import FanoutRecorder, ListRecorder, LLMCall, NullRecorder, Recorder
from executor.plan import Plan, PlanError, parse_plan
from executor.runtime import ExecutionOutcome, PlanExecutor, StepOutcome
from store.errors import StepNotFoundError
from store.queries import AttemptRecord, ExecutionDetail, LLMCallRecord, StepRecord

__all__ = [
    "LLM_MODES",
    "RESPONSE_KEYWORDS",
    "RecordedLLMAnswer",
    "ReplayError",
    "ReplayResponse",
    "ReplayResult",
    "ReplaySetup",
    "Replayer",
    "ResponseSpecError",
    "ServedDispatch",
    "load_edits",
    "load_response_file",
    "load_responses_file",
    "parse_config_override",
    "parse_response_option",
    "parse_response_spec",
    "prepare_replay",
    "replay_plan_path",
]

LLM_RECORDED = "recorded"
LLM_LIVE = "live"
LLM_OFF = "off"
LLM_MODES = (LLM_RECORDED, LLM_LIVE, LLM_OFF)

# SPEC §3.4: "drop" is a transport failure; "timeout" is the same failure as a client timeout.
RESPONSE_KEYWORDS = {"drop": "reset", "timeout": "timeout"}
_SPEC_FIELDS = ("body", "headers", "status")
_LOWEST_STATUS, _HIGHEST_STATUS = 100, 599
_HEADER_NAME_RE = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
# The replay server frames every body itself, so an edited response may not set these.
_FRAMING_HEADERS = frozenset({"content-length", "transfer-encoding"})
# Not replayed from a recording: framing, hop-by-hop, and an encoding httpx already undid.
_UNREPLAYED_HEADERS = _FRAMING_HEADERS | {"connection", "keep-alive", "content-encoding"}
_BODYLESS_STATUSES = frozenset({204, 304})

# Markers from the replay server to the replay transport; never seen by the executor.
_MARK_TRANSPORT_ERROR = "X-Truva-Replay-Transport-Error"
_MARK_MESSAGE = "X-Truva-Replay-Message"
_MARK_STATUS = "X-Truva-Replay-Status"
_MARK_NAMES = frozenset(
    name.lower() for name in (_MARK_TRANSPORT_ERROR, _MARK_MESSAGE, _MARK_STATUS)
)

_REDACTED = "[REDACTED]"
_URL_USERINFO = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*://)[^/@]*@")
_LIVE_LLM_ENV = ("OPENAI_BASE_URL", "OPENAI_API_KEY", "TRUVAG3_LLM_MODEL")
_STEP_ID_HEADER = "X-TruvaG3-Step-ID"


# ---------------------------------------------------------------------------------------------
# Edited responses: files, options and their validation
# ---------------------------------------------------------------------------------------------


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
        if name.lower() in _FRAMING_HEADERS:
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
        content = Path(path).read_bytes()
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
    edits: dict[int, ReplayResponse] = {}
    given_by: dict[int, str] = {}
    if responses_file is not None:
        for index, response in enumerate(load_responses_file(responses_file), start=1):
            if response is not None:
                edits[index] = response
                given_by[index] = f"--responses {responses_file} item {index}"
    for option in response_options:
        number, path = parse_response_option(option)
        if number in given_by:
            raise ResponseSpecError(
                f"--response {option}: dispatch {number} is already given by {given_by[number]}"
            )
        edits[number] = load_response_file(path)
        given_by[number] = f"--response {option}"
    return dict(sorted(edits.items()))


def parse_config_override(text: str) -> tuple[str, Any]:
    """`KEY=VALUE` → (key, value); VALUE is read as JSON (`5`, `true`, `null`), else as text.

    The pair is validated like a plan's `config` block; ReplayError names the problem.
    """
    key, separator, raw_value = text.partition("=")
    key = key.strip()
    if not separator or not key:
        raise ReplayError(f"--config {text}: expected KEY=VALUE, e.g. max_attempts=5")
    try:
        value = json.loads(raw_value, parse_constant=_reject_constant)
    except (ValueError, _NonStandardConstant):
        value = raw_value
    try:
        resolve_config({key: value}, env={})
    except ConfigError as error:
        raise ReplayError(
            f"--config {text}: expected {error.expected}, got {error.received}"
        ) from error
    return key, value


# ---------------------------------------------------------------------------------------------
# What a replay needs, taken from the store and checked before anything starts
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RecordedLLMAnswer:
    """One LLM answer of the original run: the exact HTTP status and body, and its site."""

    site: str | None
    response: ReplayResponse


@dataclass(frozen=True, slots=True)
class ReplaySetup:
    """A checked replay: the plan to run, its config, and every response it may serve.

    `plan` holds the replayed step and the steps it depends on, in plan order. `recorded`
    holds the original run's responses in dispatch order (None where nothing was received).
    `dependency_responses` answers each dependency with its recorded successful response.
    `llm` is the plan's `llm` block for `llm_mode` "live", the original model settings for
    "recorded", and None when no LLM is used.
    """

    execution_id: str
    step_id: str
    plan: Plan
    config: ExecutorConfig
    original: StepRecord
    recorded: tuple[ReplayResponse | None, ...]
    edits: Mapping[int, ReplayResponse]
    dependency_responses: Mapping[str, ReplayResponse]
    llm_mode: str
    llm: Mapping[str, Any] | None
    llm_answers: tuple[RecordedLLMAnswer, ...]
    notes: tuple[str, ...] = ()


def replay_plan_path(execution_id: str, step_id: str) -> str:
    """The `plan_path` a replay is recorded under, so `ls` and SQL can find it."""
    return f"replay of {execution_id} {step_id}"


def prepare_replay(
    detail: ExecutionDetail,
    step_id: str,
    *,
    edits: Mapping[int, ReplayResponse] | None = None,
    llm_mode: str = LLM_RECORDED,
    config_overrides: Mapping[str, Any] | None = None,
) -> ReplaySetup:
    """Check that `step_id` of the recorded execution can be replayed and gather what it needs.

    Raises StepNotFoundError (unknown step) or ReplayError (no plan snapshot, a dependency that
    did not succeed, an override the config refuses). Reads nothing but `detail`.
    """
    if llm_mode not in LLM_MODES:
        raise ReplayError(f"--llm: expected one of {', '.join(LLM_MODES)}, got {llm_mode!r}")
    execution_id = detail.execution.execution_id
    original = detail.step(step_id)
    overrides = dict(config_overrides or {})
    notes: list[str] = []
    if not isinstance(detail.plan, dict):
        raise ReplayError(
            f"execution {execution_id} has no plan snapshot recorded; it cannot be replayed"
        )
    try:
        plan = parse_plan(
            _replayable_plan(detail.plan), source=f"execution {execution_id} plan snapshot"
        )
    except PlanError as error:
        raise ReplayError(f"{error} (the recorded plan cannot be rebuilt)") from error
    if step_id not in plan.step_ids:
        raise ReplayError(
            f"execution {execution_id}: step {step_id!r} is not in the recorded plan "
            f"(steps: {', '.join(plan.step_ids)})"
        )
    needed = _with_dependencies(plan, step_id)
    dependency_responses = {
        dependency: _dependency_response(detail, step_id, dependency)
        for dependency in needed if dependency != step_id
    }  # fmt: skip
    config = _replay_config(detail, plan, overrides, notes)
    plan = replace(
        plan,
        steps=tuple(step for step in plan.steps if step.id in needed),
        config={**plan.config, **overrides},
        source_path=replay_plan_path(execution_id, step_id),
    )
    dispatched = [a for a in original.attempts if a.dispatched]
    recorded = tuple(_recorded_response(attempt) for attempt in dispatched)
    llm, answers = _llm_settings(detail, plan, original, llm_mode, notes)
    return ReplaySetup(
        execution_id=execution_id,
        step_id=step_id,
        plan=plan,
        config=config,
        original=original,
        recorded=recorded,
        edits=dict(edits or {}),
        dependency_responses=dependency_responses,
        llm_mode=llm_mode,
        llm=llm,
        llm_answers=answers,
        notes=tuple(notes),
    )


def _replayable_plan(plan: dict[str, Any]) -> dict[str, Any]:
    """The plan snapshot without the redacted URL parts that would not parse as URLs.

    Secrets in URLs are redacted at rest, and `https://[REDACTED]@host` is not a valid URL.
    Replay keeps only the path of a tool's base_url, so a redacted userinfo is dropped; a
    redacted `llm.base_url` is dropped too, so `--llm live` falls back to OPENAI_BASE_URL.
    """
    replayable = dict(plan)
    tools = plan.get("tools")
    if isinstance(tools, dict):
        replayable["tools"] = {
            name: {**spec, "base_url": _URL_USERINFO.sub(r"\1", spec["base_url"])}
            if isinstance(spec, dict) and _REDACTED in str(spec.get("base_url", ""))
            else spec
            for name, spec in tools.items()
        }
    llm = plan.get("llm")
    if isinstance(llm, dict) and _REDACTED in str(llm.get("base_url", "")):
        replayable["llm"] = {key: value for key, value in llm.items() if key != "base_url"}
    return replayable


def _with_dependencies(plan: Plan, step_id: str) -> set[str]:
    """`step_id` and every step it depends on, directly or through other steps."""
    needed: set[str] = set()
    waiting = [step_id]
    while waiting:
        current = waiting.pop()
        if current not in needed:
            needed.add(current)
            waiting.extend(plan.dependencies_of(current))
    return needed


def _dependency_response(detail: ExecutionDetail, step_id: str, dependency: str) -> ReplayResponse:
    execution_id = detail.execution.execution_id
    try:
        record: StepRecord | None = detail.step(dependency)
    except StepNotFoundError:
        record = None
    if record is None or record.status != "succeeded":
        status = record.status if record is not None else "not recorded"
        raise ReplayError(
            f"execution {execution_id}: {step_id} depends on {dependency}, which did not succeed "
            f"in the original run ({status}); its result is needed for the replay"
        )
    succeeded = [a for a in record.attempts if a.dispatched and a.action == "success"]
    response = _recorded_response(succeeded[-1]) if succeeded else None
    if response is None:
        raise ReplayError(
            f"execution {execution_id}: {step_id} depends on {dependency}, whose successful "
            "response was not recorded"
        )
    return response


def _recorded_response(attempt: AttemptRecord) -> ReplayResponse | None:
    """The original response of a dispatched attempt, or None when nothing was received."""
    if attempt.transport_error in ("timeout", "connect", "protocol", "reset"):
        message = attempt.transport_error_message or ""
        # The executor writes "request failed: <ExceptionName>: <text>".
        text = message.split(": ", 2)[-1] if message.startswith("request failed: ") else message
        return ReplayResponse(
            transport_error=attempt.transport_error, transport_message=text, source="recorded"
        )
    if attempt.transport_error is not None or attempt.status is None or attempt.status == 0:
        return None
    headers = attempt.response_headers if isinstance(attempt.response_headers, dict) else {}
    kept = tuple(
        (str(name), str(value)) for name, value in headers.items()
        if str(name).lower() not in _UNREPLAYED_HEADERS
    )  # fmt: skip
    return ReplayResponse(
        status=attempt.status, headers=kept, body=attempt.response_body or b"", source="recorded"
    )


def _replay_config(
    detail: ExecutionDetail, plan: Plan, overrides: dict[str, Any], notes: list[str]
) -> ExecutorConfig:
    """The original run's resolved config with `overrides` applied."""
    execution_id = detail.execution.execution_id
    if isinstance(detail.config, dict):
        recorded = dict(detail.config)
    else:
        recorded = dict(plan.config)
        notes.append("no resolved config was recorded; using the plan's config block and defaults")
    dropped = sorted(key for key in recorded if key not in CONFIG_FIELDS)
    if dropped:
        notes.append(
            f"recorded config keys this version does not know were left out: {', '.join(dropped)}"
        )
    recorded = {key: value for key, value in recorded.items() if key in CONFIG_FIELDS}
    try:
        config, _ = resolve_config({**recorded, **overrides}, env={})
    except ConfigError as error:
        raise ReplayError(
            f"execution {execution_id}: recorded config.{error.field}: expected {error.expected}, "
            f"got {error.received}"
        ) from error
    return config


def _step_llm_calls(step: StepRecord) -> list[LLMCallRecord]:
    calls = [call for attempt in step.attempts for call in attempt.llm_calls]
    calls.extend(step.llm_calls)
    calls.sort(key=lambda call: (call.called_at or 0.0, call.call_id))
    return calls


def _recorded_llm_calls(step: StepRecord) -> list[LLMCallRecord]:
    # A call whose prompt failed to build never reached the endpoint, and will not again.
    return [call for call in _step_llm_calls(step) if call.request_body]


def _llm_settings(
    detail: ExecutionDetail, plan: Plan, original: StepRecord, llm_mode: str, notes: list[str]
) -> tuple[dict[str, Any] | None, tuple[RecordedLLMAnswer, ...]]:
    recorded_llm = detail.llm if isinstance(detail.llm, dict) else None
    if llm_mode == LLM_OFF:
        return None, ()
    if llm_mode == LLM_LIVE:
        block = dict(plan.llm or {})
        recorded_url = str((recorded_llm or {}).get("base_url") or "")
        if not block.get("base_url") and recorded_url and _REDACTED not in recorded_url:
            # A redacted recorded URL is no address: OPENAI_BASE_URL supplies one instead.
            block = {"base_url": recorded_url, "model": (recorded_llm or {}).get("model")}
        if _REDACTED in str(block.get("api_key", "")):
            del block["api_key"]  # redacted at rest: OPENAI_API_KEY supplies it
        return {k: v for k, v in block.items() if v is not None}, ()
    if recorded_llm is None:
        notes.append("the original run had no LLM configured, so layers 3 and 4 stay off")
        return None, ()
    textless = [call for call in _step_llm_calls(original) if not call.text_recorded]
    if textless:
        notes.append(
            f"{len(textless)} LLM call(s) of the original run kept no answer text "
            f"({textless[0].text_note}), so they cannot be served; use --llm live"
        )
    answers = tuple(
        RecordedLLMAnswer(
            site=call.site,
            response=ReplayResponse(
                status=call.response_status,
                headers=(("Content-Type", "application/json"),),
                body=call.response_body or b"",
                source="recorded",
            )
            if call.response_status is not None
            else ReplayResponse(transport_error="reset", source="recorded"),
        )
        for call in _recorded_llm_calls(original)
    )
    settings: dict[str, Any] = {"model": recorded_llm.get("model") or "recorded-model"}
    timeout_s = (plan.llm or {}).get("timeout_s")
    if timeout_s is not None:
        settings["timeout_s"] = timeout_s
    return settings, answers


# ---------------------------------------------------------------------------------------------
# Loopback servers and the client transport that understands their failure markers
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Request:
    method: str
    path: str
    step_id: str | None


_Answer = Callable[[_Request], "ReplayResponse | None"]


class _QuietServer(QuietThreadingHTTPServer):
    owner: _ReplayServer


class _Handler(NoDelayHandler):
    server: _QuietServer

    def setup(self) -> None:
        super().setup()
        self.server.owner.track(self.connection)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.owner.untrack(self.connection)

    def _serve(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        step_id = self.headers.get(_STEP_ID_HEADER)
        request = _Request(self.command, urlsplit(self.path).path, step_id)
        response = self.server.owner.answer(request)
        if response is None:
            self.server.owner.wait_closed()
            self.close_connection = True
            return
        self._send(response)

    def _send(self, response: ReplayResponse) -> None:
        if response.transport_error == "reset":
            self.close_connection = True
            return
        status, body = response.status, response.body
        headers = list(response.headers)
        if response.transport_error is not None:
            status, body = 200, b""
            headers = [
                (_MARK_TRANSPORT_ERROR, response.transport_error),
                (_MARK_MESSAGE, quote(response.transport_message)),
            ]
        elif status < 200:
            headers.append((_MARK_STATUS, str(status)))
            status = 200
        try:
            self.send_response_only(status)
            for name, value in headers:
                self.send_header(name, _wire_text(value))
            if status not in _BODYLESS_STATUSES:
                self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if status not in _BODYLESS_STATUSES:
                self.wfile.write(body)
        except OSError:
            self.close_connection = True

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _serve


def _wire_text(value: str) -> str:
    """A header value whose latin-1 encoding is its original bytes (UTF-8 when not latin-1)."""
    try:
        value.encode("latin-1")
        return value
    except UnicodeEncodeError:
        return value.encode("utf-8").decode("latin-1")


class _ReplayServer:
    """Serves `answer(request)` on 127.0.0.1 from a daemon thread; None holds until `close()`."""

    def __init__(self, name: str, answer: _Answer) -> None:
        self._answer = answer
        self._closed = threading.Event()
        self._lock = threading.Lock()
        self._connections: set[socket.socket] = set()
        self._httpd = _QuietServer((LOOPBACK, 0), _Handler)
        self._httpd.owner = self
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
            name=f"replay-{name}:{self.port}", daemon=True,
        )  # fmt: skip
        self._thread.start()

    @property
    def port(self) -> int:
        """The TCP port it listens on."""
        return self._httpd.server_address[1]

    @property
    def base_url(self) -> str:
        """`http://127.0.0.1:PORT`, no trailing slash."""
        return f"http://127.0.0.1:{self.port}"

    def answer(self, request: _Request) -> ReplayResponse | None:
        """The response for `request`; a bug in the answer becomes a 500 naming it."""
        try:
            return self._answer(request)
        except Exception as error:
            body = json.dumps({"success": False, "error": {
                "code": "REPLAY_SERVER_BUG", "message": f"{type(error).__name__}: {error}",
                "category": "SERVICE_ERROR", "retryable": False}}).encode()  # fmt: skip
            # 404, not 5xx: a missing answer is not an outage, so the executor does not retry it.
        return ReplayResponse(404, (("Content-Type", "application/json"),), body)

    def wait_closed(self) -> None:
        """Block the calling handler thread until the server closes."""
        self._closed.wait()

    def track(self, connection: socket.socket) -> None:
        with self._lock:
            self._connections.add(connection)

    def untrack(self, connection: socket.socket) -> None:
        with self._lock:
            self._connections.discard(connection)

    def close(self) -> None:
        """Stop serving, release held handlers and close open connections; returns promptly."""
        if self._closed.is_set():
            return
        self._closed.set()
        self._httpd.shutdown()
        with contextlib.suppress(OSError):
            self._httpd.server_close()
        with self._lock:
            connections = list(self._connections)
        for connection in connections:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)


_TRANSPORT_FAILURES: dict[str, type[httpx.TransportError]] = {
    "connect": httpx.ConnectError,
    "timeout": httpx.ReadTimeout,
    "protocol": httpx.LocalProtocolError,
}


class _ReplayTransport(httpx.AsyncBaseTransport):
    """httpx's own transport, plus the two things a loopback server cannot send for real: a
    recorded timeout, connect or protocol failure, and a 1xx final status."""

    def __init__(self) -> None:
        self._inner = httpx.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self._inner.handle_async_request(request)
        failure = response.headers.get(_MARK_TRANSPORT_ERROR)
        if failure is not None:
            await response.aclose()
            message = unquote(response.headers.get(_MARK_MESSAGE, ""))
            raise _TRANSPORT_FAILURES.get(failure, httpx.LocalProtocolError)(
                message, request=request
            )
        status = response.headers.get(_MARK_STATUS)
        if status is None:
            return response
        headers = [(k, v) for k, v in response.headers.raw if k.decode().lower() not in _MARK_NAMES]
        return httpx.Response(
            int(status), headers=headers, stream=response.stream, extensions=response.extensions
        )

    async def aclose(self) -> None:
        await self._inner.aclose()


class _VirtualMonotonic:
    """A monotonic clock that jumps over backoff waits instead of sleeping them."""

    def __init__(self) -> None:
        self.skipped_s = 0.0

    def monotonic(self) -> float:
        return time.monotonic() + self.skipped_s

    async def sleep(self, seconds: float) -> None:
        self.skipped_s += max(0.0, seconds)
        await asyncio.sleep(0)


# ---------------------------------------------------------------------------------------------
# Running a replay
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ServedDispatch:
    """What the replay served to dispatch `number` of the replayed step."""

    number: int
    source: str  # "edited", "recorded" or "unscripted"
    response: str  # e.g. "HTTP 503", "drop (reset)", "none"

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form."""
        return {"n": self.number, "source": self.source, "response": self.response}


@dataclass(frozen=True, slots=True)
class ReplayResult:
    """How the replay ran: its execution, the replayed step, what was served and what to know."""

    setup: ReplaySetup
    outcome: ExecutionOutcome
    step: StepOutcome | None
    dispatches: tuple[ServedDispatch, ...]
    unscripted_dispatch: int | None
    llm_answers_served: int
    llm_calls_unanswered: tuple[int, ...]
    notes: tuple[str, ...]
    cancelled_by_user: bool = False

    @property
    def execution_id(self) -> str:
        """The replay's own execution id."""
        return self.outcome.execution_id

    @property
    def ran_out(self) -> bool:
        """Whether a dispatch had no recorded or edited response (the replay stopped there) or an
        LLM call had no recorded answer: then its outcome says nothing about the original's."""
        return self.unscripted_dispatch is not None or bool(self.llm_calls_unanswered)

    @property
    def changed(self) -> bool:
        """Whether an attempt (sent, status, action, rule, delay, parameters) or the end differs."""
        original = [_signature_of_record(a) for a in self.setup.original.attempts]
        replayed = [_signature_of_summary(a) for a in (self.step.attempts if self.step else ())]
        status = self.step.status if self.step else None
        return original != replayed or status != self.setup.original.status


def _rounded(delay_ms: float | None) -> float | None:
    return None if delay_ms is None else round(delay_ms, 3)


def _signature_of_record(attempt: AttemptRecord) -> tuple[Any, ...]:
    delay = attempt.delay_ms if attempt.action == "retry_same" else None
    return (
        bool(attempt.dispatched),
        attempt.status,
        attempt.transport_error,
        attempt.action,
        attempt.rule_id,
        _rounded(delay),
        json.dumps(attempt.parameters, sort_keys=True),
    )


def _signature_of_summary(attempt: Any) -> tuple[Any, ...]:
    return (
        attempt.dispatched,
        attempt.status,
        attempt.transport_error,
        attempt.action,
        attempt.rule,
        _rounded(attempt.delay_ms),
        json.dumps(attempt.parameters, sort_keys=True),
    )


class Replayer:
    """Runs one `ReplaySetup`. Construct, then `await run()`; `cancel()` stops it at once."""

    def __init__(
        self,
        setup: ReplaySetup,
        *,
        recorder: Recorder | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.setup = setup
        self.recorder = recorder or NullRecorder()
        self.env = dict(os.environ if env is None else env)
        self._lock = threading.Lock()
        self._dispatches: list[ServedDispatch] = []
        self._llm_requests = 0
        self._llm_unanswered: list[int] = []
        self._unscripted: int | None = None
        self._user_cancelled = False
        self._executor: PlanExecutor | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def cancel(self) -> None:
        """Stop the replay at once, as Ctrl-C stops a run."""
        self._user_cancelled = True
        if self._executor is not None:
            self._executor.cancel()

    async def run(self) -> ReplayResult:
        """Start the loopback servers, run the executor against them, and report."""
        setup = self.setup
        self._loop = asyncio.get_running_loop()
        events = ListRecorder()
        clock = _VirtualMonotonic()
        with contextlib.ExitStack() as servers:
            tools = servers.enter_context(_closing(_ReplayServer("tools", self._answer_tool)))
            llm_block = None
            if setup.llm is not None and setup.llm_mode == LLM_RECORDED:
                llm = servers.enter_context(_closing(_ReplayServer("llm", self._answer_llm)))
                llm_block = {**setup.llm, "base_url": f"{llm.base_url}/v1", "api_key": "unused"}
            elif setup.llm is not None:
                llm_block = dict(setup.llm)
            plan = replace(
                setup.plan,
                tools={
                    name: replace(tool, base_url=tools.base_url + _url_path(tool.base_url))
                    for name, tool in setup.plan.tools.items()
                },
                llm=llm_block,
            )
            env: dict[str, str] = {}
            if setup.llm_mode == LLM_LIVE:
                env = {name: self.env[name] for name in _LIVE_LLM_ENV if name in self.env}
            client = httpx.AsyncClient(
                transport=_ReplayTransport(),
                timeout=httpx.Timeout(setup.config.timeout_s),
                follow_redirects=False,
            )
            self._executor = PlanExecutor(
                plan, recorder=FanoutRecorder(self.recorder, events), env=env,
                http_client=client, sleep=clock.sleep, monotonic=clock.monotonic,
                config=setup.config,
            )  # fmt: skip
            if self._user_cancelled:
                self._executor.cancel()
            try:
                outcome = await self._executor.run()
            finally:
                await client.aclose()
        return self._result(outcome, events)

    # -- answers, called on server threads ----------------------------------------------------

    def _answer_tool(self, request: _Request) -> ReplayResponse | None:
        setup = self.setup
        if request.step_id in setup.dependency_responses:
            return setup.dependency_responses[request.step_id]
        if request.step_id != setup.step_id:
            body = json.dumps({"success": False, "error": {
                "code": "NOT_IN_REPLAY", "message": f"step {request.step_id!r} is not replayed",
                "category": "NOT_FOUND", "retryable": False}}).encode()  # fmt: skip
            return ReplayResponse(404, (("Content-Type", "application/json"),), body)
        with self._lock:
            number = len(self._dispatches) + 1
            response = setup.edits.get(number)
            if response is None and number <= len(setup.recorded):
                response = setup.recorded[number - 1]
            if response is None:
                self._dispatches.append(ServedDispatch(number, "unscripted", "none"))
                self._unscripted = number
            else:
                self._dispatches.append(
                    ServedDispatch(number, response.source, response.describe())
                )
        if response is None:
            assert self._loop is not None
            self._loop.call_soon_threadsafe(self._stop_unscripted)
        return response

    def _stop_unscripted(self) -> None:
        if self._executor is not None:
            self._executor.cancel()

    def _answer_llm(self, request: _Request) -> ReplayResponse | None:
        answers = self.setup.llm_answers
        with self._lock:
            self._llm_requests += 1
            number = self._llm_requests
            if number <= len(answers):
                return answers[number - 1].response
            self._llm_unanswered.append(number)
        message = (
            f"truva-console replay: LLM call {number} has no recorded answer "
            f"({len(answers)} recorded); use --llm live to ask a model"
        )
        body = json.dumps(
            {"error": {"message": message, "type": "replay_exhausted", "param": None, "code": None}}
        ).encode()
        # 404, not 5xx: a missing answer is not an outage, so the executor does not retry it.
        return ReplayResponse(404, (("Content-Type", "application/json"),), body)

    # -- the report ---------------------------------------------------------------------------

    def _result(self, outcome: ExecutionOutcome, events: ListRecorder) -> ReplayResult:
        setup = self.setup
        step = next((s for s in outcome.steps if s.id == setup.step_id), None)
        notes = list(setup.notes)
        made = len(self._dispatches)
        if self._unscripted is not None:
            notes.append(
                f"no recorded response for dispatch {self._unscripted}; pass "
                f"--response {self._unscripted}=FILE (the replay stopped there)"
            )
        unused = [n for n in setup.edits if n > made]
        if unused:
            listed = ", ".join(str(n) for n in unused)
            responses = "edited response" if len(unused) == 1 else "edited responses"
            dispatch = "dispatch" if len(unused) == 1 else "dispatches"
            notes.append(
                f"{responses} for {dispatch} {listed} not used: the replay made "
                f"{counted(made, 'dispatch', 'dispatches')}"
            )
        for number in self._llm_unanswered:
            notes.append(
                f"LLM call {number} had no recorded answer; the replay LLM server "
                "answered HTTP 404 (use --llm live to ask a model)"
            )
        calls = [e for e in events.events
                 if isinstance(e, LLMCall) and e.step_id == setup.step_id]  # fmt: skip
        served = min(self._llm_requests, len(setup.llm_answers))
        for index, (call, answer) in enumerate(zip(calls, setup.llm_answers, strict=False), 1):
            if answer.site and call.site != answer.site:
                notes.append(
                    f"LLM call {index} asked {call.site} but the recorded answer "
                    f"was for {answer.site}"
                )
        if setup.llm_mode == LLM_RECORDED and served < len(setup.llm_answers):
            unasked = len(setup.llm_answers) - served
            verb = "was" if unasked == 1 else "were"
            notes.append(f"{counted(unasked, 'recorded LLM answer')} {verb} not asked for")
        return ReplayResult(
            setup=setup,
            outcome=outcome,
            step=step,
            dispatches=tuple(self._dispatches),
            unscripted_dispatch=self._unscripted,
            llm_answers_served=served,
            llm_calls_unanswered=tuple(self._llm_unanswered),
            notes=tuple(notes),
            cancelled_by_user=self._user_cancelled,
        )


def _url_path(base_url: str) -> str:
    """The path part of a tool's base_url, kept so each capability's URL path is unchanged."""
    return urlsplit(base_url).path.rstrip("/")


@contextlib.contextmanager
def _closing(server: _ReplayServer) -> Iterator[_ReplayServer]:
    try:
        yield server
    finally:
        server.close()
