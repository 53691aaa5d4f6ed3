"""The public Python API: plans built in code, `run_plan`, `call_tool`, and the typed errors.

Plans built here are validated by `executor.plan` exactly as a plan file is, with the same
one-line `PlanError`s; runs go through `PlanExecutor`, so a call made from code takes the same
policy path (retries, layers 3-4, budgets) and reports the same events as `truva-console run`.
docs/library.md shows every name with a runnable example.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Self

import httpx

from executor.cancellation import run_cancellable
from executor.events import FanoutRecorder, NullRecorder, Recorder
from executor.plan import CapabilitySpec, PlanError, ToolSpec, load_plan, parse_plan
from executor.plan import Plan as PlanSpec
from executor.plan.model import key_path
from executor.plan.validation import PlanParser as _Validator
from executor.plan.validation import _describe as describe_json
from executor.policy import Decision
from executor.runtime import (
    STEP_REJECTED,
    STEP_SKIPPED,
    STEP_SUCCEEDED,
    ExecutionOutcome,
    PlanExecutor,
    StepOutcome,
)

__all__ = [
    "LLM",
    "Capability",
    "Plan",
    "Step",
    "Tool",
    "ToolCallCancelled",
    "ToolCallError",
    "ToolCallFailed",
    "ToolCallRejected",
    "call_tool",
    "record_runs",
    "run_labels",
    "run_plan",
    "run_plan_sync",
]

# The `<file>` part of a PlanError for a plan built in code.
CODE_SOURCE = "<plan>"


@dataclass(frozen=True, slots=True)
class Tool:
    """An HTTP tool (a plan file's `tools.<name>`); validated when built.

    `Tool("weather", "ftp://x")` raises `PlanError`:
    `<plan>: tools.weather.base_url: expected an http:// or https:// URL, got "ftp://x"`.
    """

    name: str
    base_url: str
    headers: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "headers", _object(self.headers))
        _Validator(CODE_SOURCE).parse_tools({self.name: self.to_dict()})

    def to_dict(self) -> dict[str, Any]:
        """The plan-file object of this tool."""
        return {"base_url": self.base_url, "headers": _object(self.headers)}

    def capability(self, name: str, **fields: Any) -> Capability:
        """A capability of this tool: `Capability(self, name, **fields)`."""
        return Capability(self, name, **fields)

    def _spec(self) -> ToolSpec:
        return ToolSpec(name=self.name, base_url=self.base_url, headers=dict(self.headers))


@dataclass(frozen=True, slots=True)
class Capability:
    """One capability of a tool (a plan file's `capabilities.<tool>.<name>`); validated when built.

    `path` None means the default `/capabilities/<name>`.
    """

    tool: Tool
    name: str
    path: str | None = None
    description: str = ""
    schema: Mapping[str, Any] | None = None
    orchestrator: bool = False
    side_effects: str = "none"

    def __post_init__(self) -> None:
        if not isinstance(self.tool, Tool):
            name = self.name if isinstance(self.name, str) else "?"
            raise PlanError(CODE_SOURCE, key_path("capabilities", name) + ".tool",
                            f"expected a Tool, got {_describe_value(self.tool)}")
        _Validator(CODE_SOURCE).parse_capabilities(
            {self.key: self.to_dict()}, {self.tool.name: self.tool._spec()}
        )

    @property
    def key(self) -> str:
        """`<tool>.<capability>`, its key in a plan's `capabilities`."""
        return f"{self.tool.name}.{self.name}"

    def to_dict(self) -> dict[str, Any]:
        """The plan-file object of this capability (without the default `path`)."""
        data: dict[str, Any] = {
            "description": self.description,
            "schema": _object(self.schema),
            "orchestrator": self.orchestrator,
            "side_effects": self.side_effects,
        }
        if self.path is not None:
            data["path"] = self.path
        return data


@dataclass(frozen=True, slots=True)
class Step:
    """One step: call `capability` with `parameters`; validated with the plan it is part of.

    `depends_on` names steps by id or by the `Step` itself; bindings such as
    `{{step-1.data.id}}` in `parameters` work as in plan files.
    """

    id: str
    capability: Capability
    parameters: Mapping[str, Any] = field(default_factory=dict)
    depends_on: Sequence[str | Step] = ()
    hitl_approved: Sequence[str] = ()
    instruction: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The plan-file object of this step."""
        return {
            "id": self.id,
            "tool": self.capability.tool.name,
            "capability": self.capability.name,
            "parameters": _object(self.parameters),
            "depends_on": _array(self.depends_on, lambda d: d.id if isinstance(d, Step) else d),
            "hitl_approved": _array(self.hitl_approved),
            "instruction": self.instruction,
        }


@dataclass(frozen=True, slots=True)
class LLM:
    """The OpenAI-compatible endpoint of layers 3-4 (a plan file's `llm`); unset fields fall back
    to `OPENAI_BASE_URL`, `OPENAI_API_KEY` and `TRUVAG3_LLM_MODEL` as in plan files."""

    base_url: str | None = None
    model: str | None = None
    api_key: str | None = None
    timeout_s: float | None = None

    def __post_init__(self) -> None:
        _Validator(CODE_SOURCE).parse_llm(self.to_dict())

    def to_dict(self) -> dict[str, Any]:
        """The plan-file `llm` object: the fields that are set."""
        fields = {"base_url": self.base_url, "model": self.model, "api_key": self.api_key,
                  "timeout_s": self.timeout_s}  # fmt: skip
        return {name: value for name, value in fields.items() if value is not None}


@dataclass(frozen=True, slots=True)
class Plan:
    """A plan built in code; validated when built, as `truva-console run` validates a file.

    The tools and capabilities are those of the steps, plus `capabilities` (ones no step uses).
    A bad plan raises `PlanError` with the plan file's one-line message, `source` in place of
    the file name: `<plan>: steps[1].depends_on[0]: names "step-9", which is not a step in this
    plan`. `spec` is the validated `executor.plan.Plan` the executor runs.
    """

    steps: Sequence[Step]
    query: str = ""
    config: Mapping[str, Any] = field(default_factory=dict)
    llm: LLM | None = None
    capabilities: Sequence[Capability] = ()
    source: str = CODE_SOURCE
    plan_path: str | None = None
    spec: PlanSpec = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        steps = _array(self.steps)
        object.__setattr__(self, "steps", tuple(steps) if isinstance(steps, list) else steps)
        object.__setattr__(self, "capabilities", _capabilities(self.capabilities, self.source))
        object.__setattr__(self, "config", _object(self.config))
        spec = parse_plan(self._document(), source=self.source)
        object.__setattr__(self, "spec", replace(spec, source_path=self.plan_path))

    def _document(self) -> dict[str, Any]:
        tools: dict[str, Tool] = {}
        capabilities: dict[str, Capability] = {}
        steps = self.steps if isinstance(self.steps, tuple) else ()  # else the validator names it
        for index, step in enumerate(steps):
            if isinstance(step, Step) and not isinstance(step.capability, Capability):
                raise PlanError(self.source, f"steps[{index}].capability",
                                f"expected a Capability (tool.capability(name)), got "
                                f"{_describe_value(step.capability)}")
        used = [step.capability for step in steps if isinstance(step, Step)]
        for capability in (*used, *self.capabilities):
            _add_once(tools, capability.tool.name, capability.tool, "tools", "tools")
            _add_once(capabilities, capability.key, capability, "capabilities", "capabilities")
        document: dict[str, Any] = {
            "query": self.query,
            "tools": {name: tool.to_dict() for name, tool in tools.items()},
            "capabilities": {key: c.to_dict() for key, c in capabilities.items()},
            "steps": _array(self.steps, _step_document),
            "config": _object(self.config),
        }
        if self.llm is not None:
            document["llm"] = self.llm.to_dict() if isinstance(self.llm, LLM) else self.llm
        return document

    def to_dict(self) -> dict[str, Any]:
        """The plan as plan-file data, every default spelled out; `Plan.from_dict` accepts it."""
        return self.spec.to_dict()

    @classmethod
    def from_dict(cls, data: Any, *, source: str = CODE_SOURCE) -> Self:
        """A plan from decoded plan-file data; PlanError (naming `source`) when it is not one."""
        return cls._from_spec(parse_plan(data, source=source), source=source)

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> Self:
        """The plan file at `path` (docs/plan-file.md); PlanError naming the file otherwise."""
        spec = load_plan(path)
        return cls._from_spec(spec, source=str(path), plan_path=spec.source_path)

    @classmethod
    def _from_spec(
        cls, spec: PlanSpec, *, source: str, plan_path: str | None = None
    ) -> Self:
        tools = {name: Tool(name, t.base_url, dict(t.headers)) for name, t in spec.tools.items()}
        capabilities = {
            key: _capability_of(c, tools[c.tool]) for key, c in spec.capabilities.items()
        }
        steps = [
            Step(s.id, capabilities[f"{s.tool}.{s.capability}"], s.parameters, s.depends_on,
                 s.hitl_approved, s.instruction)
            for s in spec.steps
        ]  # fmt: skip
        used = {f"{s.tool}.{s.capability}" for s in spec.steps}
        return cls(
            steps=steps, query=spec.query, config=spec.config,
            llm=LLM(**spec.llm) if spec.llm is not None else None,
            capabilities=[c for key, c in capabilities.items() if key not in used],
            source=source, plan_path=plan_path,
        )  # fmt: skip


def _step_document(step: Any) -> Any:
    return step.to_dict() if isinstance(step, Step) else step


def _object(value: Any) -> Any:
    """A mapping as a dict; anything else as given, for the validator to name (not dict()'s
    "dictionary update sequence element #0 has length 1")."""
    return dict(value) if isinstance(value, Mapping) else value


def _array(value: Any, item: Callable[[Any], Any] = lambda x: x) -> Any:
    """A sequence as a list of `item(x)`; a string, mapping or scalar as given, so
    `hitl_approved="city"` is "expected an array", not a check of the names "c", "i", "t", "y"."""
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Iterable):
        return value
    return [item(x) for x in value]


def _capabilities(value: Any, source: str) -> tuple[Capability, ...]:
    """`Plan(capabilities=…)` as a tuple of Capability; PlanError naming a value that is not."""
    items = _array(value)
    if not isinstance(items, list):
        raise PlanError(source, "capabilities",
                        f"expected an array of Capability, got {_describe_value(value)}")
    for index, item in enumerate(items):
        if not isinstance(item, Capability):
            raise PlanError(source, f"capabilities[{index}]",
                            f"expected a Capability, got {_describe_value(item)}")
    return tuple(items)


def _describe_value(value: Any) -> str:
    """A builder value as the plan file's messages show it, or its type's name (`a Step`)."""
    if isinstance(value, (str, int, float, bool, Mapping, list, tuple)) or value is None:
        return describe_json(value)
    return f"a {type(value).__name__}"


def _capability_of(spec: CapabilitySpec, tool: Tool) -> Capability:
    return Capability(tool, spec.name, spec.path, spec.description, spec.schema,
                      spec.orchestrator, spec.side_effects)  # fmt: skip


def _add_once(found: dict[str, Any], key: str, value: Any, what: str, path: str) -> None:
    """Keep `value` under `key`; a different value under the same key is a PlanError."""
    earlier = found.setdefault(key, value)
    if earlier is not value and earlier != value:
        raise PlanError(
            CODE_SOURCE, f"{path}.{key}",
            f"two different {what} are named {key!r}: {earlier!r} and {value!r}",
        )  # fmt: skip


# ---------------------------------------------------------------------------------------------
# Runs made anywhere in the process: the pytest plugin's hook
# ---------------------------------------------------------------------------------------------

_ambient_lock = threading.Lock()
_ambient_recorders: list[Recorder] = []
_ambient_labels: list[dict[str, str]] = []


@contextlib.contextmanager
def record_runs(recorder: Recorder) -> Iterator[None]:
    """Inside, every `run_plan`/`call_tool` in this process also reports to `recorder`."""
    with _ambient_lock:
        _ambient_recorders.append(recorder)
    try:
        yield
    finally:
        with _ambient_lock:
            _ambient_recorders.remove(recorder)


@contextlib.contextmanager
def run_labels(labels: Mapping[str, str]) -> Iterator[None]:
    """Inside, every execution started by `run_plan`/`call_tool` carries `labels`.

    The pytest plugin labels each test's executions `{"test": "<node id>"}`; labels given to
    `run_plan` itself win over these.
    """
    added = {str(key): str(value) for key, value in labels.items()}
    with _ambient_lock:
        _ambient_labels.append(added)
    try:
        yield
    finally:
        with _ambient_lock:
            _ambient_labels.remove(added)


def _run_recorder(recorder: Recorder | None) -> Recorder:
    with _ambient_lock:
        chosen = [r for r in (recorder, *_ambient_recorders) if r is not None]
    if not chosen:
        return NullRecorder()
    return chosen[0] if len(chosen) == 1 else FanoutRecorder(*chosen)


def _run_labels(labels: Mapping[str, str] | None) -> dict[str, str]:
    merged: dict[str, str] = {}
    with _ambient_lock:
        for ambient in _ambient_labels:
            merged.update(ambient)
    merged.update({str(key): str(value) for key, value in (labels or {}).items()})
    return merged


# ---------------------------------------------------------------------------------------------
# Running
# ---------------------------------------------------------------------------------------------


def _spec_of(plan: Plan | PlanSpec, llm: LLM | None) -> PlanSpec:
    spec = plan.spec if isinstance(plan, Plan) else plan
    if llm is None:
        return spec
    source = plan.source if isinstance(plan, Plan) else CODE_SOURCE
    with_llm = parse_plan({**spec.to_dict(), "llm": llm.to_dict()}, source=source)
    return replace(with_llm, source_path=spec.source_path)


@contextlib.contextmanager
def _with_telemetry(recorder: Recorder, telemetry: bool, env: Mapping[str, str] | None
                    ) -> Iterator[Recorder]:  # fmt: skip
    """`recorder`, plus the OTLP export `env` configures when `telemetry` is asked for."""
    if not telemetry or getattr(recorder, "exports_telemetry", False):
        yield recorder
        return
    from executor.telemetry import with_telemetry

    with with_telemetry(recorder, env=os.environ if env is None else env) as recorders:
        yield recorders


async def _until_done(executor: PlanExecutor, cancel: asyncio.Event | None) -> ExecutionOutcome:
    """The run's outcome; `cancel` being set, or this task being cancelled, cancels the run.

    A cancelled task still waits for the run to record how it ended, then re-raises.
    """
    run = asyncio.ensure_future(executor.run())
    watcher = asyncio.ensure_future(cancel.wait()) if cancel is not None else None
    if watcher is not None:
        watcher.add_done_callback(lambda done: done.cancelled() or executor.cancel())
    try:
        return await asyncio.shield(run)
    except asyncio.CancelledError:
        executor.cancel()
        await run
        raise
    finally:
        if watcher is not None:
            watcher.cancel()


async def run_plan(
    plan: Plan | PlanSpec,
    *,
    recorder: Recorder | None = None,
    llm: LLM | None = None,
    env: Mapping[str, str] | None = None,
    telemetry: bool = False,
    cancel: asyncio.Event | None = None,
    labels: Mapping[str, str] | None = None,
    http_client: httpx.AsyncClient | None = None,
) -> ExecutionOutcome:
    """Run every step of `plan` under the TruvaG3 policy and return how it ended.

    `recorder` receives every event (a `store.Recording` writes them to the debug store);
    `llm` replaces the plan's LLM endpoint; `env` is read instead of `os.environ` for
    `TRUVAG3_*`, `OPENAI_*`, `TRUVAG3_OAUTH_TOKEN` and, with `telemetry`, `OTEL_*` (a
    `Recording` exports telemetry itself); setting `cancel` cancels the run, which then ends
    `cancelled`; `labels` tag the execution (shown by `ls`).
    """
    spec = _spec_of(plan, llm)
    with _with_telemetry(_run_recorder(recorder), telemetry, env) as recorders:
        executor = PlanExecutor(spec, recorder=recorders, env=env, http_client=http_client,
                                labels=_run_labels(labels))  # fmt: skip
        return await _until_done(executor, cancel)


class _SignalledRun:
    """A `run_plan` that SIGINT/SIGTERM cancel, for `run_cancellable`."""

    def __init__(self, plan: Plan | PlanSpec, options: dict[str, Any]) -> None:
        self.plan, self.options = plan, options
        self.cancel_event: asyncio.Event = options.pop("cancel", None) or asyncio.Event()

    async def run(self) -> ExecutionOutcome:
        return await run_plan(self.plan, cancel=self.cancel_event, **self.options)

    def cancel(self) -> None:
        self.cancel_event.set()


def run_plan_sync(plan: Plan | PlanSpec, **options: Any) -> ExecutionOutcome:
    """`run_plan` for code without an event loop; Ctrl-C cancels the run as in `truva-console run`
    (the outcome is then `cancelled`). Takes the options of `run_plan`. Inside a running event
    loop it raises RuntimeError saying to `await run_plan(...)` instead."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        raise RuntimeError("run_plan_sync() cannot run inside a running event loop; "
                           "use `await run_plan(plan, ...)` there")  # fmt: skip

    async def main() -> ExecutionOutcome:
        return await run_cancellable(_SignalledRun(plan, dict(options)))

    return asyncio.run(main())


# ---------------------------------------------------------------------------------------------
# One call
# ---------------------------------------------------------------------------------------------


class ToolCallError(Exception):
    """A `call_tool` call that did not succeed; str() is one line naming the rule and reason.

    `decision` is the final `Decision` (None when none was made: cancelled before it started),
    `step` the `StepOutcome` with every attempt, `execution` the whole `ExecutionOutcome`.
    """

    def __init__(
        self, message: str, *, decision: Decision | None, step: StepOutcome,
        execution: ExecutionOutcome,
    ) -> None:  # fmt: skip
        super().__init__(message)
        self.decision = decision
        self.step = step
        self.execution = execution

    @property
    def rule_id(self) -> str | None:
        """The rule of the final decision."""
        return self.decision.rule_id if self.decision is not None else None

    @property
    def execution_id(self) -> str:
        """The recorded execution (`truva-console explain <id>`)."""
        return self.execution.execution_id


class ToolCallFailed(ToolCallError):
    """The call was sent and the policy stopped it (a terminal error, budgets exhausted, ...)."""


class ToolCallRejected(ToolCallError):
    """The call was never sent: the pre-dispatch guard or a budget refused it."""


class ToolCallCancelled(ToolCallError):
    """The call was cancelled (`cancel` set, or the task cancelled)."""


async def call_tool(
    tool: Tool,
    capability: Capability | str,
    params: Mapping[str, Any] | None = None,
    *,
    recorder: Recorder | None = None,
    config: Mapping[str, Any] | None = None,
    llm: LLM | None = None,
    query: str = "",
    instruction: str | None = None,
    hitl_approved: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    telemetry: bool = False,
    cancel: asyncio.Event | None = None,
    labels: Mapping[str, str] | None = None,
    http_client: httpx.AsyncClient | None = None,
) -> Any:
    """POST `params` to one capability through the full policy; return the parsed response.

    It is a one-step plan (`step-1`) run by `run_plan`, recorded as one execution: resends after
    backoff, corrections by layers 3-4 (`llm`, with `query` and `instruction` as the intent) and
    the budgets of `config` (a plan file's `config` keys) all apply. Anything but success raises
    `ToolCallFailed`, `ToolCallRejected` or `ToolCallCancelled`, carrying the final decision.
    """
    if isinstance(capability, str):
        capability = Capability(tool, capability)
    elif capability.tool != tool:
        raise PlanError(
            CODE_SOURCE, f"capabilities.{capability.key}",
            f"is a capability of tool {capability.tool.name!r}, not of {tool.name!r}",
        )  # fmt: skip
    step = Step("step-1", capability, params or {}, hitl_approved=hitl_approved,
                instruction=instruction)  # fmt: skip
    plan = Plan([step], query=query, config=config or {}, llm=llm)
    outcome = await run_plan(plan, recorder=recorder, env=env, telemetry=telemetry,
                             cancel=cancel, labels=labels, http_client=http_client)  # fmt: skip
    (result,) = outcome.steps
    if result.status == STEP_SUCCEEDED:
        return result.result
    raise _call_error(capability.key, result, outcome)


def _call_error(key: str, step: StepOutcome, outcome: ExecutionOutcome) -> ToolCallError:
    decision = step.attempts[-1].decision if step.attempts else None
    if outcome.status == "cancelled":
        kind: type[ToolCallError] = ToolCallCancelled
    elif step.status in (STEP_REJECTED, STEP_SKIPPED):
        kind = ToolCallRejected
    else:
        kind = ToolCallFailed
    if decision is not None:
        why = f"{decision.action} [{decision.rule_id}]: {decision.reason}"
    else:
        why = step.skip_reason or step.error or "no decision was made"
    message = f"{key} {step.status} in execution {outcome.execution_id}: {why}"
    return kind(" ".join(message.split()), decision=decision, step=step, execution=outcome)
