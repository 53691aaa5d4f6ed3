"""What a replay needs, taken from the store and checked before anything starts.

`prepare_replay` rebuilds the replayed step and the steps it depends on from the recorded plan
snapshot and resolved config, gathers the original responses and LLM answers it may serve, and
refuses, with one line, a replay that cannot be faithful (docs/replay.md).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from console.replay.edits import FRAMING_HEADERS, ReplayError, ReplayResponse
from executor.config import CONFIG_FIELDS, ConfigError, ExecutorConfig, resolve_config
from executor.plan import Plan, PlanError, parse_plan, split_userinfo
from store.errors import StepNotFoundError
from store.queries import AttemptRecord, ExecutionDetail, LLMCallRecord, StepRecord

__all__ = [
    "LLM_LIVE",
    "LLM_MODES",
    "LLM_OFF",
    "LLM_RECORDED",
    "RecordedLLMAnswer",
    "ReplaySetup",
    "live_endpoint",
    "prepare_replay",
    "recorded_config",
    "replay_plan_path",
    "replayed_from",
]

LLM_RECORDED = "recorded"
LLM_LIVE = "live"
LLM_OFF = "off"
LLM_MODES = (LLM_RECORDED, LLM_LIVE, LLM_OFF)
REPLAY_PATH_PREFIX = "replay of "

# Not replayed from a recording: framing, hop-by-hop, and an encoding httpx already undid.
_UNREPLAYED_HEADERS = FRAMING_HEADERS | {"connection", "keep-alive", "content-encoding"}
_REDACTED = "[REDACTED]"
_ENDPOINT_OPTIONS = {"base_url": "--llm-base-url", "model": "--llm-model"}
_PARAMETER_PATH = re.compile(r"^steps\[\d+\]\.parameters\.?(.*)$")
_URL_USERINFO = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*://)[^/@]*@")


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
    `llm` is the plan's `llm` block for `llm_mode` "live" (with the endpoint given for the
    replay), the original model settings for "recorded", and None when no LLM is used.
    `parameter_edits` are the replayed step's parameters that the replay changed (key → value).
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
    parameter_edits: Mapping[str, Any] = field(default_factory=dict)


def replay_plan_path(execution_id: str, step_id: str) -> str:
    """The `plan_path` a replay is recorded under, so `ls` and SQL can find it."""
    return f"{REPLAY_PATH_PREFIX}{execution_id} {step_id}"


def replayed_from(plan_path: str | None) -> str | None:
    """`<execution_id> <step_id>` when `plan_path` is one `replay_plan_path` wrote, else None."""
    if plan_path is None or not plan_path.startswith(REPLAY_PATH_PREFIX):
        return None
    return plan_path.removeprefix(REPLAY_PATH_PREFIX)


def prepare_replay(
    detail: ExecutionDetail,
    step_id: str,
    *,
    edits: Mapping[int, ReplayResponse] | None = None,
    llm_mode: str = LLM_RECORDED,
    config_overrides: Mapping[str, Any] | None = None,
    parameter_edits: Mapping[str, Any] | None = None,
    llm_base_url: str | None = None,
    llm_model: str | None = None,
) -> ReplaySetup:
    """Check that `step_id` of the recorded execution can be replayed and gather what it needs.

    `parameter_edits` replace (or add) keys of the step's recorded parameters; the edited plan
    is checked as a plan file is, and a key the capability's schema does not name is refused.
    `llm_base_url` and `llm_model` (only with `llm_mode` "live") point the LLM layers at
    another endpoint; the recorded API key is then not sent, OPENAI_API_KEY supplies one.
    Raises StepNotFoundError (unknown step) or ReplayError (no plan snapshot, a dependency that
    did not succeed, an override the config refuses, a bad edit). Reads nothing but `detail`.
    """
    if llm_mode not in LLM_MODES:
        raise ReplayError(f"--llm: expected one of {', '.join(LLM_MODES)}, got {llm_mode!r}")
    endpoint = {
        key: value for key, value in (("base_url", llm_base_url), ("model", llm_model))
        if value is not None
    }  # fmt: skip
    if endpoint and llm_mode != LLM_LIVE:
        given = " and ".join(_ENDPOINT_OPTIONS[key] for key in endpoint)
        raise ReplayError(f"{given}: only with --llm live (the LLM mode is {llm_mode})")
    parameter_edits = dict(parameter_edits or {})
    execution_id = detail.execution.execution_id
    original = detail.step(step_id)
    overrides = dict(config_overrides or {})
    notes: list[str] = []
    if not isinstance(detail.plan, dict):
        raise ReplayError(
            f"execution {execution_id} has no plan snapshot recorded; it cannot be replayed"
        )
    snapshot = _replayable_plan(detail.plan)
    try:
        plan = parse_plan(snapshot, source=f"execution {execution_id} plan snapshot")
    except PlanError as error:
        raise ReplayError(f"{error} (the recorded plan cannot be rebuilt)") from error
    if step_id not in plan.step_ids:
        raise ReplayError(
            f"execution {execution_id}: step {step_id!r} is not in the recorded plan "
            f"(steps: {', '.join(plan.step_ids)})"
        )
    if endpoint:
        _check_endpoint(snapshot, endpoint)
    if parameter_edits:
        plan = _edited_plan(snapshot, plan, step_id, parameter_edits)
    needed = _with_dependencies(plan, step_id)
    dependency_responses = {
        dependency: _dependency_response(detail, step_id, dependency)
        for dependency in needed if dependency != step_id
    }  # fmt: skip
    config = recorded_config(detail, plan, overrides, notes)
    plan = replace(
        plan,
        steps=tuple(step for step in plan.steps if step.id in needed),
        config={**plan.config, **overrides},
        source_path=replay_plan_path(execution_id, step_id),
    )
    dispatched = [a for a in original.attempts if a.dispatched]
    recorded = tuple(_recorded_response(attempt) for attempt in dispatched)
    llm, answers = _llm_settings(detail, plan, original, llm_mode, notes)
    if llm is not None and endpoint:
        if "base_url" in endpoint:
            llm.pop("api_key", None)  # the recorded key is for the recorded endpoint
        llm.update(endpoint)
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
        parameter_edits=parameter_edits,
    )


def live_endpoint(setup: ReplaySetup) -> dict[str, str | None]:
    """For `--llm live`: the `base_url` (without userinfo) and `model` the plan gives, None where
    the environment supplies them (OPENAI_BASE_URL, TRUVAG3_LLM_MODEL)."""
    block = setup.llm or {}
    base_url = block.get("base_url")
    return {
        "base_url": split_userinfo(str(base_url))[0] if base_url else None,
        "model": str(block["model"]) if block.get("model") else None,
    }


def _check_endpoint(snapshot: dict[str, Any], endpoint: Mapping[str, str]) -> None:
    """Refuse an `--llm-base-url` or `--llm-model` a plan's `llm` block would refuse."""
    llm = snapshot.get("llm") if isinstance(snapshot.get("llm"), dict) else {}
    try:
        parse_plan({**snapshot, "llm": {**llm, **endpoint}}, source="replay")
    except PlanError as error:
        field_name = error.path.removeprefix("llm.")
        if field_name not in endpoint:
            raise ReplayError(f"{error} (the recorded plan cannot be rebuilt)") from error
        option = _ENDPOINT_OPTIONS[field_name]
        raise ReplayError(f"{option} {endpoint[field_name]!r}: {error.problem}") from error


def _edited_plan(
    snapshot: dict[str, Any], plan: Plan, step_id: str, edits: Mapping[str, Any]
) -> Plan:
    """The recorded plan with the replayed step's parameters edited, checked as a plan file is."""
    step = plan.step(step_id)
    capability = plan.capabilities[f"{step.tool}.{step.capability}"]
    schema = capability.schema if isinstance(capability.schema, dict) else {}
    properties = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
    for key in edits:
        if properties and key not in properties and key not in step.parameters:
            raise ReplayError(
                f"parameter {json.dumps(key)}: {step_id} ({capability.key}) has no such parameter "
                f"(its schema names: {', '.join(properties)})"
            )
    steps = [
        {**item, "parameters": {**item.get("parameters", {}), **edits}}
        if isinstance(item, dict) and item.get("id") == step_id else item
        for item in snapshot.get("steps", [])
    ]  # fmt: skip
    try:
        return parse_plan({**snapshot, "steps": steps}, source="replay")
    except PlanError as error:
        match = _PARAMETER_PATH.match(error.path)
        if match is None:
            raise ReplayError(f"{error} (the edited plan cannot be rebuilt)") from error
        raise ReplayError(f"parameter {match.group(1)}: {error.problem}") from error


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


def recorded_config(
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
    if any(not call.texts_loaded for call in calls):
        # A replay answers from the recorded texts: one read without them would look unrecorded.
        raise ValueError(f"{step.step_id}: its LLM calls were read without their texts")
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
