"""Probing a live tool: deliberately bad requests derived from a capability schema, graded.

`derive_cases(schema, parameters)` names a small set of bad requests (missing required key,
wrong type, empty body, not JSON, unknown enum value) and says which it could not derive and
why. `Prober` sends them once each over real HTTP (the headers and auth `run` sends, a timeout
per request, cancellable), records them as one execution (labelled `probe`) through the
recorder it is given, and grades every answer with lint's checks plus the probe's own rows
(`PROBE_CHECKS`). Headless: no Textual. `truva-console probe` is the command.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import socket
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import urlsplit

import httpx

from console.lint import ReportCard
from executor import __version__
from executor.config import ExecutorConfig, resolve_config
from executor.events import (
    AttemptDecided,
    AttemptDispatched,
    AttemptResponded,
    ExecutionFinished,
    ExecutionStarted,
    Recorder,
    StepFinished,
    StepStarted,
)
from executor.params import match_type_related_error
from executor.plan import CapabilitySpec, Plan, PlanError, StepSpec, parse_plan
from executor.plan.model import key_path
from executor.policy import Action, Decision, DecisionInputs, decide
from executor.runtime.outcomes import (
    HttpOutcome,
    classify_transport_error,
    default_tls_context,
    encode_json_body,
    first_header,
    flatten_headers,
    new_execution_id,
    step_error_text,
)
from executor.runtime.step_loop import tool_request_headers
from executor.tool_contract import CHECKS, Check, Finding, Grade, Response, grade_response
from executor.tracecontext import attempt_headers
from executor.wire import parse_retry_after_header

PROBE_LABEL = "probe"
DEFAULT_TIMEOUT_S = 10.0
# The kinds of bad request, in the order they are sent.
MISSING_REQUIRED = "missing_required"
WRONG_TYPE = "wrong_type"
EMPTY_BODY = "empty_body"
NOT_JSON = "not_json"
UNKNOWN_ENUM = "unknown_enum"
KINDS = (MISSING_REQUIRED, WRONG_TYPE, EMPTY_BODY, NOT_JSON, UNKNOWN_ENUM)
# Bodies that never reach the parameters: seed 001 Part 2 answers them with retryable:false.
MALFORMED_KINDS = frozenset({EMPTY_BODY, NOT_JSON})
NOT_JSON_BODY = b"this is not JSON {"
# A capability sends one missing-key request per required key, up to this many.
MAX_MISSING_KEYS = 3
_STEP_SLUG = re.compile(r"[^\w-]+", re.ASCII)


class ProbeError(ValueError):
    """Bad probe input (unknown step, bad schema, unreachable tool); str() is one line."""


# ------------------------------------------------------------------------------ the cases


@dataclass(frozen=True, slots=True)
class ProbeCase:
    """One deliberately bad request: its kind, its name, the step id it is recorded under, the
    exact body sent and the parameters that body encodes ({} when it encodes none)."""

    kind: str
    name: str
    step_id: str
    body: bytes
    parameters: dict[str, Any]


@dataclass(frozen=True, slots=True)
class SkippedCase:
    """A kind of bad request the schema does not allow deriving, and why."""

    kind: str
    reason: str

    def to_dict(self) -> dict[str, str]:
        return {"kind": self.kind, "reason": self.reason}


_JSON_TYPES = {
    "string": "string", "integer": "integer", "int": "integer", "int32": "integer",
    "int64": "integer", "number": "number", "float": "number", "float64": "number",
    "double": "number", "boolean": "boolean", "bool": "boolean", "array": "array",
    "object": "object", "null": "null",
}  # fmt: skip
# Values of a wrong type, tried in order: the first whose JSON type the schema does not allow.
_WRONG_VALUES: tuple[tuple[str, Any], ...] = (
    ("number", 12345), ("string", "not-a-number"), ("array", ["probe"]),
    ("object", {"probe": True}),
)  # fmt: skip


def _declared_types(schema: Any) -> tuple[str, ...]:
    """The JSON types a property schema declares (Go names read as layer 2 reads them)."""
    if not isinstance(schema, Mapping) or "type" not in schema:
        return ()
    declared = schema["type"]
    names = declared if isinstance(declared, list) else [declared]
    return tuple(dict.fromkeys(_JSON_TYPES[str(n).lower()] for n in names
                               if str(n).lower() in _JSON_TYPES))  # fmt: skip


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    return {str: "string", float: "number", list: "array", dict: "object"}.get(
        type(value), "null"
    )


def _accepts(types: tuple[str, ...], value: Any) -> bool:
    kind = _json_type(value)
    return kind in types or (kind == "integer" and "number" in types)


def example_value(schema: Any) -> Any:
    """A value a property schema accepts: its first enum value, else one of its type."""
    if isinstance(schema, Mapping) and isinstance(schema.get("enum"), list) and schema["enum"]:
        return schema["enum"][0]
    types = _declared_types(schema)
    kind = next((t for t in types if t != "null"), types[0] if types else "string")
    if kind == "object":
        return example_parameters(schema)
    return {"string": "probe", "integer": 1, "number": 1.5, "boolean": True, "array": [],
            "null": None}[kind]  # fmt: skip


def example_parameters(schema: Any) -> dict[str, Any]:
    """An object with a value for every required key of `schema` (its properties' examples)."""
    if not isinstance(schema, Mapping):
        return {}
    properties = schema.get("properties") if isinstance(schema.get("properties"), Mapping) else {}
    required = schema.get("required") if isinstance(schema.get("required"), list) else []
    return {key: example_value(properties.get(key)) for key in required}


def _has_binding(value: Any) -> bool:
    return "{{" in json.dumps(value)


def base_parameters(schema: Any, step_parameters: Mapping[str, Any] | None) -> dict[str, Any]:
    """A request the schema would accept: the step's own parameters (those without bindings,
    which only a run resolves) over an example value for every required key."""
    base = example_parameters(schema)
    for key, value in (step_parameters or {}).items():
        if not _has_binding(value):
            base[key] = value
    return base


def _quoted(values: list[Any]) -> str:
    shown = ", ".join(json.dumps(value) for value in values[:5])
    return shown + (", ..." if len(values) > 5 else "")


def derive_cases(
    schema: Mapping[str, Any] | None, step_parameters: Mapping[str, Any] | None = None
) -> tuple[list[ProbeCase], list[SkippedCase]]:
    """The bad requests `schema` allows deriving, in `KINDS` order, and the kinds it does not.

    Each schema-derived request breaks one thing in an otherwise valid request
    (`base_parameters`); the empty and non-JSON bodies need no schema.
    """
    cases: list[tuple[str, str, str, bytes | None, dict[str, Any]]] = []
    skipped: list[SkippedCase] = []
    base = base_parameters(schema, step_parameters)
    properties: Mapping[str, Any] = {}
    required: list[str] = []
    if isinstance(schema, Mapping):
        if isinstance(schema.get("properties"), Mapping):
            properties = schema["properties"]
        if isinstance(schema.get("required"), list):
            required = [key for key in schema["required"] if isinstance(key, str)]
    no_schema = "the capability has no schema" if not schema else None
    # Required keys first: a tool checks those before optional ones.
    ordered = list(dict.fromkeys([*required, *properties]))

    if required:
        for key in required[:MAX_MISSING_KEYS]:
            without = {k: v for k, v in base.items() if k != key}
            cases.append((MISSING_REQUIRED, f"missing required key `{key}`", f"missing-{key}",
                          None, without))  # fmt: skip
    else:
        skipped.append(SkippedCase(MISSING_REQUIRED,
                                   no_schema or "the schema lists no required key"))

    typed = [(key, _declared_types(properties.get(key))) for key in ordered]
    typed = [(key, types) for key, types in typed if types]
    wrong = next(((key, types, value, kind_name) for key, types in typed
                  for kind_name, value in _WRONG_VALUES if not _accepts(types, value)), None)
    if wrong is not None:
        key, types, value, kind_name = wrong
        cases.append((WRONG_TYPE, f"wrong type for `{key}` ({kind_name} instead of "
                      f"{' or '.join(types)})", f"wrong-type-{key}", None,
                      {**base, key: value}))  # fmt: skip
    else:
        skipped.append(SkippedCase(WRONG_TYPE, no_schema or (
            "no property declares a type" if not typed
            else "every declared type accepts any JSON value tried")))

    cases.append((EMPTY_BODY, "empty body", "empty-body", b"", {}))
    cases.append((NOT_JSON, "body that is not JSON", "not-json", NOT_JSON_BODY, {}))

    enum_case, enum_skip = _unknown_enum(ordered, properties, base)
    if enum_case is not None:
        cases.append(enum_case)
    else:
        skipped.append(SkippedCase(UNKNOWN_ENUM, no_schema or enum_skip))

    named: list[ProbeCase] = []
    for index, (kind, name, slug, body, parameters) in enumerate(cases, start=1):
        slug = _STEP_SLUG.sub("-", slug).strip("-")[:40]
        named.append(ProbeCase(kind, name, f"probe-{index}-{slug}",
                               encode_json_body(parameters) if body is None else body,
                               parameters if body is None else {}))  # fmt: skip
    return named, skipped


def _unknown_enum(
    ordered: list[str], properties: Mapping[str, Any], base: dict[str, Any]
) -> tuple[tuple[str, str, str, None, dict[str, Any]] | None, str]:
    """The unknown-enum request for the first property with a string or number enum."""
    enums = [(key, properties[key]["enum"]) for key in ordered
             if isinstance(properties.get(key), Mapping)
             and isinstance(properties[key].get("enum"), list) and properties[key]["enum"]]
    for key, values in enums:
        if all(isinstance(value, str) for value in values):
            unknown: Any = next(f"probe-not-{suffix}" for suffix in
                                ("in-enum", *map(str, range(len(values) + 1)))
                                if f"probe-not-{suffix}" not in values)  # fmt: skip
        elif all(isinstance(v, int | float) and not isinstance(v, bool) for v in values):
            unknown = max(values) + 1
        else:
            continue
        name = f"unknown enum value for `{key}` ({json.dumps(unknown)} is not one of " \
               f"{_quoted(values)})"
        return (UNKNOWN_ENUM, name, f"unknown-enum-{key}", None, {**base, key: unknown}), ""
    if enums:
        return None, "no enum lists only strings or only numbers"
    return None, "no property has an enum"


# ------------------------------------------------------------------------------ the checks


def _rejected(r: Response) -> tuple[Grade, str]:
    if r.status in (400, 422):
        return Grade.PASS, f"rejected with HTTP {r.status}"
    if 200 <= r.status < 300:
        return Grade.FAIL, (f"HTTP {r.status} for a deliberately bad request: the tool accepted "
                            "it, so the executor takes its answer as a result")
    if r.status >= 500:
        return Grade.FAIL, (f"HTTP {r.status} for a deliberately bad request: the executor "
                            "resends it unchanged and it cannot succeed (Scenario D); answer "
                            "400 or 422")
    if 400 <= r.status < 500:
        return Grade.WARN, (f"HTTP {r.status} for a deliberately bad request: an input error "
                            "is 400 or 422 (INPUT_ERROR)")
    return Grade.FAIL, f"HTTP {r.status} for a deliberately bad request: answer 400 or 422"


def _malformed_retryable(r: Response) -> tuple[Grade, str]:
    if (r.envelope.error_object or {}).get("retryable") is False:
        return Grade.PASS, "retryable:false for a body that cannot be read"
    return Grade.WARN, ("retryable:true for a body that is empty or not JSON: no correction of "
                        "the parameters fixes a body that was never read; seed 001 answers "
                        "bad JSON with retryable:false")


def _declares_retryable(r: Response) -> bool:
    return r.is_error and isinstance((r.envelope.error_object or {}).get("retryable"), bool)


# The probe's own rows, after lint's: what a probe knows that a recorded response does not —
# the request was deliberately bad.
PROBE_CHECKS: tuple[Check, ...] = (
    Check("probe_rejected", "a bad request gets a 4xx input error (400/422), not 2xx or 5xx",
          "seed 000 §8 Scenario D, §11", lambda r: True, _rejected),
    Check("probe_malformed_retryable", "an unreadable body gets retryable:false",
          "seed 001 Part 2", _declares_retryable, _malformed_retryable),
)
PROBE_TABLE: tuple[Check, ...] = CHECKS + PROBE_CHECKS


def grade_probe(case: ProbeCase, outcome: HttpOutcome) -> list[Finding]:
    """Lint's findings for the answer to `case`, plus the probe's rows that apply to its kind.

    A request that got no answer fails `probe_rejected` and has no other finding; one
    cancelled in flight has none.
    """
    if outcome.transport_error == "cancelled":
        return []
    if outcome.status == 0:
        return [Finding("probe_rejected", Grade.FAIL,
                        f"no answer: {outcome.transport_error_message or outcome.transport_error}")]
    rows = [row for row in PROBE_TABLE
            if row.id != "probe_malformed_retryable" or case.kind in MALFORMED_KINDS]
    return grade_response(outcome.status, outcome.headers, outcome.body, rows)


# ------------------------------------------------------------------------------ the target


@dataclass(frozen=True, slots=True)
class ProbeTarget:
    """What is probed: a plan holding the tool and capability (for headers, auth and the
    recorded snapshot), the step whose parameters seed the requests, and where they go."""

    plan: Plan
    step: StepSpec
    capability: CapabilitySpec
    url: str
    side_effects_known: bool = True

    @property
    def refusal(self) -> str | None:
        """Why probing needs `--yes` (side effects not `none`, or unknown), else None."""
        key = self.capability.key
        if not self.side_effects_known:
            return (f"{key}: side_effects unknown (no plan says it); the probes may change "
                    "something; pass --side-effects none if the capability has none, or --yes "
                    "to send them anyway")
        if self.capability.side_effects != "none":
            return (f"{key}: side_effects is {self.capability.side_effects!r}, not 'none'; the "
                    "probes may change something; pass --yes to send them anyway")
        return None


def target_from_plan(plan: Plan, step_id: str) -> ProbeTarget:
    """The target of `--step STEP` in `plan`; ProbeError naming the step when it is not one."""
    try:
        step = plan.step(step_id)
    except KeyError:
        shown = ", ".join(plan.step_ids[:10]) + (", ..." if len(plan.step_ids) > 10 else "")
        raise ProbeError(f"{plan.source_path or 'plan'}: --step {step_id}: not a step of this "
                         f"plan (steps: {shown})") from None  # fmt: skip
    return ProbeTarget(plan, step, plan.capability_for(step), plan.url_for(step))


def target_from_url(
    url: str,
    path: str,
    schema: Any,
    *,
    schema_file: str,
    tool: str = "tool",
    side_effects: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> ProbeTarget:
    """The target of `--url URL --capability PATH --schema FILE`, validated as a plan's tool
    and capability are; ProbeError naming the option and the problem."""
    name = _STEP_SLUG.sub("-", path.rstrip("/").rsplit("/", 1)[-1]).strip("-") or "root"
    key = f"{tool}.{name}"
    document = {
        "tools": {tool: {"base_url": url, "headers": dict(headers or {})}},
        "capabilities": {key: {"path": path, "schema": schema,
                               "side_effects": side_effects or "none"}},
        "steps": [{"id": "probe", "tool": tool, "capability": name}],
    }  # fmt: skip
    tool_path, capability_path = key_path("tools", tool), key_path("capabilities", key)
    options = {f"{tool_path}.base_url": "--url", f"{tool_path}.headers": "--header",
               tool_path: "--tool", f"{capability_path}.path": "--capability",
               f"{capability_path}.schema": f"--schema {schema_file}",
               capability_path: "--capability", "tools": "--tool"}  # fmt: skip
    try:
        plan = parse_plan(document, source="probe")
    except PlanError as error:
        where = next((option + error.path[len(prefix):] for prefix, option in options.items()
                      if error.path.startswith(prefix)), error.path)  # fmt: skip
        raise ProbeError(f"{where}: {error.problem}") from error
    target = target_from_plan(plan, "probe")
    return replace(target, side_effects_known=side_effects is not None)


def check_reachable(url: str, timeout_s: float) -> None:
    """ProbeError when nothing accepts a TCP connection at `url`'s host and port (checked
    before anything is recorded, so an unreachable tool leaves no execution behind)."""
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        socket.create_connection((parts.hostname or "", port), timeout=timeout_s).close()
    except OSError as error:
        reason = error.strerror or str(error) or type(error).__name__
        raise ProbeError(f"{url}: cannot connect to {parts.hostname}:{port}: {reason}; is "
                         "the tool running?") from error  # fmt: skip


# ------------------------------------------------------------------------------ the run


@dataclass(frozen=True, slots=True)
class ProbeResult:
    """One probe as sent and answered, the policy's decision on it and its findings."""

    case: ProbeCase
    outcome: HttpOutcome
    decision: Decision
    findings: tuple[Finding, ...]

    @property
    def grade(self) -> Grade:
        grades = [finding.grade for finding in self.findings]
        return Grade.FAIL if Grade.FAIL in grades else (
            Grade.WARN if Grade.WARN in grades else Grade.PASS)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.case.name, "kind": self.case.kind, "step_id": self.case.step_id,
            "http_status": self.outcome.status or None,
            "transport_error": self.outcome.transport_error,
            "action": str(self.decision.action), "rule_id": self.decision.rule_id,
            "grade": self.grade.value,
            "findings": [{"check": f.check, "grade": f.grade.value, "message": f.message}
                         for f in self.findings],
        }  # fmt: skip


@dataclass(slots=True)
class ProbeOutcome:
    """How a probe ended: the execution it was recorded as, each result, what was skipped."""

    execution_id: str
    target: ProbeTarget
    results: list[ProbeResult] = field(default_factory=list)
    skipped: list[SkippedCase] = field(default_factory=list)
    cancelled: bool = False
    status: str = "failed"

    def card(self) -> ReportCard:
        """The report card of the answers, with lint's checks and the probe's rows."""
        card = ReportCard(self.target.step.tool, checks=PROBE_TABLE)
        for result in self.results:
            where = (self.execution_id, result.case.step_id, 1, result.outcome.status)
            card.add(self.target.step.capability, where, result.findings)
        return card


def _decision_inputs(
    config: ExecutorConfig, capability: CapabilitySpec, case: ProbeCase, outcome: HttpOutcome,
    now: float, tool: str,
) -> DecisionInputs:
    """What the step loop would give `decide()` for this answer on a one-attempt run without
    an LLM (the probe's recorded config: `max_attempts` 1)."""
    retry_after_ms, retry_after_source = None, None
    header_value = first_header(outcome.headers, "retry-after")
    if header_value is not None:
        retry_after_ms = parse_retry_after_header(header_value, now=now)
        retry_after_source = "retry_after_header" if retry_after_ms is not None else None
    if retry_after_ms is None and outcome.envelope.retry_after_detail_ms is not None:
        retry_after_ms = outcome.envelope.retry_after_detail_ms
        retry_after_source = "retry_after_details"
    error_text = step_error_text(outcome)
    return DecisionInputs(
        dispatched=True, status=outcome.status, transport_error=outcome.transport_error,
        retry_policy=outcome.envelope.retry_policy, attempt_number=1,
        max_attempts=config.max_attempts, max_validation_retries=config.max_validation_retries,
        max_semantic_retries=config.max_semantic_retries, orchestrator=capability.orchestrator,
        side_effects=capability.side_effects, llm_configured=False,
        error_analyzer_enabled=config.error_analyzer_enabled,
        semantic_retry_enabled=config.semantic_retry_enabled,
        semantic_retry_independent_steps=config.semantic_retry_independent_steps,
        validation_feedback_enabled=config.validation_feedback_enabled,
        legacy_pattern=match_type_related_error(error_text, ""),
        retry_after_ms=retry_after_ms, retry_after_source=retry_after_source,
        max_wall_clock_s=config.max_wall_clock_s, max_total_tokens=config.max_total_tokens,
        max_llm_calls=config.max_llm_calls, repeated_error_count=1,
        max_repeated_errors=config.max_repeated_errors,
        retry_after_max_ms=config.retry_after_max_ms,
        body_is_json_object=outcome.envelope.is_object,
        max_retries_per_tool=config.max_retries_per_tool, tool=tool, error_text=error_text,
        parameter_keys=tuple(case.parameters), backoff=config.backoff(),
    )  # fmt: skip


class Prober:
    """Sends each case once, in order, records everything, grades every answer; cancellable.

    The recorded execution holds a plan snapshot with one step per case (its `instruction`
    is the case's name), config `max_attempts` 1 and label `probe`, so `explain`, the TUI and
    `whatif` read it as any other execution.
    """

    def __init__(
        self,
        target: ProbeTarget,
        cases: list[ProbeCase],
        *,
        recorder: Recorder,
        skipped: list[SkippedCase] | None = None,
        env: Mapping[str, str] | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        http_client: httpx.AsyncClient | None = None,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.target = target
        self.cases = cases
        self.skipped = list(skipped or [])
        self.recorder = recorder
        self.env = dict(env or {})
        self.timeout_s = timeout_s
        self.clock = clock
        self.monotonic = monotonic
        self.execution_id = new_execution_id(clock())
        resolved, sources = resolve_config(target.plan.config, self.env)
        self.config = replace(resolved, max_attempts=1, timeout_s=timeout_s)
        self.config_sources = {**sources, "max_attempts": "probe (one request per case)",
                               "timeout_s": "probe (--timeout)"}
        self._http = http_client
        self._cancel = asyncio.Event()

    def cancel(self) -> None:
        """Stop now: a request in flight is abandoned and no further case is sent."""
        self._cancel.set()

    def snapshot(self) -> Plan:
        """The plan recorded with the execution: the target's tool and capability, one step per
        case (parameters as sent; an unreadable body has none), config `max_attempts` 1."""
        step = self.target.step
        steps = tuple(StepSpec(case.step_id, step.tool, step.capability, dict(case.parameters),
                               instruction=f"probe: {case.name}") for case in self.cases)
        config = {**self.target.plan.config, "max_attempts": 1, "timeout_s": self.timeout_s}
        return Plan(
            query=f"probe {self.target.capability.key}: deliberately bad requests",
            tools={step.tool: self.target.plan.tools[step.tool]},
            capabilities={self.target.capability.key: self.target.capability},
            steps=steps, config=config, source_path=self.target.plan.source_path,
        )  # fmt: skip

    async def run(self) -> ProbeOutcome:
        """Send every case (until cancelled) and return the graded results."""
        outcome = ProbeOutcome(self.execution_id, self.target, skipped=self.skipped)
        snapshot = self.snapshot()
        self._emit(ExecutionStarted(
            execution_id=self.execution_id, started_at=self.clock(), query=snapshot.query,
            plan_path=snapshot.source_path, plan=snapshot.to_dict(),
            config=self.config.to_dict(),
            config_sources=dict(self.config_sources),
            llm=None, tool_version=__version__,
            labels={PROBE_LABEL: self.target.capability.key},
        ))  # fmt: skip
        owns_http = self._http is None
        http = self._http or httpx.AsyncClient(
            timeout=httpx.Timeout(self.timeout_s), follow_redirects=False,
            verify=default_tls_context(),
        )
        try:
            for case in self.cases:
                if self._cancel.is_set():
                    break
                outcome.results.append(await self._probe(http, snapshot, case))
        finally:
            if owns_http:
                await http.aclose()
        outcome.cancelled = self._cancel.is_set()
        succeeded = sum(1 for r in outcome.results if r.decision.action is Action.SUCCESS)
        if outcome.cancelled:
            outcome.status = "cancelled"
        elif succeeded == len(self.cases):
            outcome.status = "succeeded"
        else:
            outcome.status = "partial" if succeeded else "failed"
        incomplete = tuple(case.step_id for case in self.cases if case.step_id not in {
            r.case.step_id for r in outcome.results if r.decision.action is Action.SUCCESS})
        self._emit(ExecutionFinished(
            execution_id=self.execution_id, finished_at=self.clock(), status=outcome.status,
            stop_reason="cancelled" if outcome.cancelled else None,
            incomplete_steps=incomplete, llm_calls=0, llm_total_tokens=0,
        ))
        return outcome

    async def _probe(self, http: httpx.AsyncClient, snapshot: Plan, case: ProbeCase) -> ProbeResult:
        target, step_id = self.target, case.step_id
        step = snapshot.step(step_id)
        self._emit(StepStarted(
            execution_id=self.execution_id, step_id=step_id, started_at=self.clock(),
            tool=step.tool, capability=step.capability, url=target.url, depends_on=(),
            parameters=dict(case.parameters), protected_keys={},
            orchestrator=target.capability.orchestrator,
            side_effects=target.capability.side_effects,
        ))
        headers = tool_request_headers(snapshot, step, self.env, self.execution_id)
        headers.update(attempt_headers(self.recorder, self.execution_id, step_id, 1))
        self._emit(AttemptDispatched(
            execution_id=self.execution_id, step_id=step_id, n=1, attempt_number=1,
            at=self.clock(), method="POST", url=target.url, request_headers=dict(headers),
            request_body=case.body, parameters=dict(case.parameters), correction_layer=None,
        ))
        answered = await self._send(http.post(target.url, content=case.body, headers=headers))
        self._emit(AttemptResponded(
            execution_id=self.execution_id, step_id=step_id, n=1, at=self.clock(),
            elapsed_ms=answered.elapsed_ms, status=answered.status,
            response_headers=answered.headers, response_body=answered.body,
            transport_error=answered.transport_error,
            transport_error_message=answered.transport_error_message,
            retry_policy=str(answered.envelope.retry_policy),
        ))
        decision = decide(_decision_inputs(self.config, target.capability, case, answered,
                                           self.clock(), step.tool))  # fmt: skip
        self._emit(AttemptDecided(
            execution_id=self.execution_id, step_id=step_id, n=1, at=self.clock(),
            dispatched=True, parameters=dict(case.parameters), decision=decision,
        ))
        success = decision.action is Action.SUCCESS
        self._emit(StepFinished(
            execution_id=self.execution_id, step_id=step_id, finished_at=self.clock(),
            status="succeeded" if success else "failed",
            dispatch_count=0 if answered.transport_error == "connect" else 1, attempts=1,
            validation_retries=0, semantic_retries=0, final_action=str(decision.action),
            final_rule_id=decision.rule_id, error=None if success else step_error_text(answered),
            result=answered.envelope.json_value if success else None,
        ))  # fmt: skip
        return ProbeResult(case, answered, decision, tuple(grade_probe(case, answered)))

    async def _send(self, request: Awaitable[httpx.Response]) -> HttpOutcome:
        """The answer to `request` within `timeout_s`, or the transport failure; cancellable."""
        started = self.monotonic()
        work = asyncio.ensure_future(asyncio.wait_for(request, timeout=self.timeout_s))
        stop = asyncio.ensure_future(self._cancel.wait())
        try:
            await asyncio.wait({work, stop}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stop.cancel()
        elapsed_ms = (self.monotonic() - started) * 1000.0
        if not work.done():
            work.cancel()
            await asyncio.gather(work, return_exceptions=True)
            return HttpOutcome(0, {}, b"", elapsed_ms, "cancelled", "probe cancelled in flight")
        error = work.exception()
        if isinstance(error, TimeoutError):
            return HttpOutcome(0, {}, b"", elapsed_ms, "timeout",
                               f"no response within {self.timeout_s:g} s")
        if isinstance(error, httpx.TransportError):
            return HttpOutcome(0, {}, b"", elapsed_ms, classify_transport_error(error),
                               f"request failed: {type(error).__name__}: {error}")
        if error is not None:
            raise error
        response = work.result()
        return HttpOutcome(response.status_code, flatten_headers(response.headers),
                           response.content, elapsed_ms)

    def _emit(self, event: Any) -> None:
        # A recorder failure must not stop the probe (as in the executor).
        with contextlib.suppress(Exception):
            self.recorder.record(event)
