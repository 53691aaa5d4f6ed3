"""The frozen plan records (SPEC §3.1): tools, capabilities, steps and the plan."""

from __future__ import annotations

import base64
import copy
import heapq
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

from executor.params import TEMPLATE_RE

# Step ids, tool names and capability names: Go's ASCII `[\w-]+`, as in the binding syntax.
NAME_RE = re.compile(r"[\w-]+", re.ASCII)


class PlanError(ValueError):
    """A plan that cannot be run; str() is one line: `<file>: <path in plan>: <problem>`.

    `path` is empty for problems with the file as a whole (unreadable, not JSON, not an object).
    """

    def __init__(self, file: str, path: str, problem: str) -> None:
        self.file = file
        self.path = path
        self.problem = problem
        super().__init__(": ".join(part for part in (file, path, problem) if part))


def split_userinfo(url: str) -> tuple[str, tuple[str, str] | None]:
    """`url` without userinfo, and the percent-decoded (user, password) it held, if any."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url, None
    userinfo, _, host = parts.netloc.rpartition("@")
    username, _, password = userinfo.partition(":")
    return urlunsplit(parts._replace(netloc=host)), (unquote(username), unquote(password))


def basic_authorization(username: str, password: str) -> str:
    """`Basic <base64(user:password)>`, UTF-8, as httpx builds it from URL userinfo."""
    return "Basic " + base64.b64encode(f"{username}:{password}".encode()).decode("ascii")


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """An HTTP tool: where it listens and the extra headers sent with every call."""

    name: str
    base_url: str
    headers: dict[str, str] = field(default_factory=dict)

    @property
    def userinfo(self) -> tuple[str, str] | None:
        """The (user, password) written in `base_url`, if any; sent as HTTP Basic only when
        neither the tool's `headers` nor `TRUVAG3_OAUTH_TOKEN` give an Authorization."""
        return split_userinfo(self.base_url)[1]

    @property
    def has_authorization_header(self) -> bool:
        """Whether `headers` sets Authorization (in any letter case)."""
        return any(name.lower() == "authorization" for name in self.headers)


@dataclass(frozen=True, slots=True)
class CapabilitySpec:
    """One capability of a tool, keyed `tool.capability`; `path` is POSTed the parameters."""

    key: str
    tool: str
    name: str
    path: str
    description: str = ""
    schema: dict[str, Any] | None = None
    orchestrator: bool = False
    side_effects: str = "none"


@dataclass(frozen=True, slots=True)
class StepSpec:
    """One plan step as written; bindings in `parameters` are resolved at run time."""

    id: str
    tool: str
    capability: str
    parameters: dict[str, Any] = field(default_factory=dict)
    depends_on: tuple[str, ...] = ()
    hitl_approved: tuple[str, ...] = ()
    instruction: str | None = None


@dataclass(frozen=True, slots=True)
class Plan:
    """A validated plan. `config` is the explicit config block as written (resolve it with
    `executor.config.resolve_config`); `raw` is the data the plan was parsed from."""

    query: str
    tools: dict[str, ToolSpec]
    capabilities: dict[str, CapabilitySpec]
    steps: tuple[StepSpec, ...]
    config: dict[str, Any] = field(default_factory=dict)
    llm: dict[str, Any] | None = None
    source_path: str | None = None
    raw: dict[str, Any] = field(default_factory=dict)

    # Derived once at construction, so every lookup below is O(1) whatever the plan's length.
    _step_ids: tuple[str, ...] = field(init=False, repr=False, compare=False)
    _steps_by_id: dict[str, StepSpec] = field(init=False, repr=False, compare=False)
    _dependencies: dict[str, tuple[str, ...]] = field(init=False, repr=False, compare=False)
    _dependents: dict[str, tuple[str, ...]] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        step_ids = tuple(step.id for step in self.steps)
        steps_by_id: dict[str, StepSpec] = {}
        for step in self.steps:
            steps_by_id.setdefault(step.id, step)
        folded_ids = case_folded_ids(step_ids)
        dependencies = {
            step.id: tuple(dict.fromkeys(
                (*step.depends_on, *_bound_step_ids(step.parameters, folded_ids))
            ))
            for step in steps_by_id.values()
        }
        dependents: dict[str, list[str]] = {step_id: [] for step_id in steps_by_id}
        for step_id, step_dependencies in dependencies.items():
            for dependency in step_dependencies:
                dependents.setdefault(dependency, []).append(step_id)
        object.__setattr__(self, "_step_ids", step_ids)
        object.__setattr__(self, "_steps_by_id", steps_by_id)
        object.__setattr__(self, "_dependencies", dependencies)
        object.__setattr__(
            self, "_dependents", {key: tuple(value) for key, value in dependents.items()}
        )

    @property
    def step_ids(self) -> tuple[str, ...]:
        """Step ids in plan order."""
        return self._step_ids

    def step(self, step_id: str) -> StepSpec:
        """The step with id `step_id`; KeyError if there is none."""
        return self._steps_by_id[step_id]

    def _as_step(self, step: StepSpec | str) -> StepSpec:
        return self.step(step) if isinstance(step, str) else step

    def capability_for(self, step: StepSpec | str) -> CapabilitySpec:
        """The capability a step calls."""
        spec = self._as_step(step)
        return self.capabilities[f"{spec.tool}.{spec.capability}"]

    def url_for(self, step: StepSpec | str) -> str:
        """The URL a step POSTs to: the tool's base_url without trailing slash, plus the path.

        Userinfo is left out: left in, httpx would send it as Basic auth over the plan's own
        Authorization header (the executor sends it itself, last in precedence)."""
        spec = self._as_step(step)
        base_url = split_userinfo(self.tools[spec.tool].base_url)[0]
        return base_url.rstrip("/") + self.capability_for(spec).path

    def dependencies_of(self, step_id: str) -> tuple[str, ...]:
        """`depends_on` plus the steps its parameter bindings name (auto-included, reference
        §3.2), in that order without repeats."""
        self.step(step_id)  # KeyError for an unknown step, as before
        return self._dependencies[step_id]

    def dependents_of(self, step_id: str) -> tuple[str, ...]:
        """The steps whose `dependencies_of` include `step_id`, in plan order."""
        self.step(step_id)
        return self._dependents.get(step_id, ())

    def topological_order(self) -> tuple[str, ...]:
        """Step ids with every step after its dependencies; ties keep plan order."""
        ordered_ids = list(self._steps_by_id)
        index = {step_id: position for position, step_id in enumerate(ordered_ids)}
        waiting_on = {step_id: len(deps) for step_id, deps in self._dependencies.items()}
        ready = [index[step_id] for step_id, count in waiting_on.items() if count == 0]
        heapq.heapify(ready)
        order: list[str] = []
        while ready:
            step_id = ordered_ids[heapq.heappop(ready)]
            order.append(step_id)
            for dependent in self._dependents.get(step_id, ()):
                waiting_on[dependent] -= 1
                if waiting_on[dependent] == 0:
                    heapq.heappush(ready, index[dependent])
        if len(order) < len(ordered_ids):
            placed = set(order)
            remaining = [step_id for step_id in ordered_ids if step_id not in placed]
            raise ValueError(f"steps: dependency cycle among {', '.join(remaining)}")
        return tuple(order)

    def to_dict(self) -> dict[str, Any]:
        """The plan as JSON-able data with every default spelled out; `parse_plan` accepts it."""
        data: dict[str, Any] = {
            "query": self.query,
            "tools": {
                name: {"base_url": tool.base_url, "headers": dict(tool.headers)}
                for name, tool in self.tools.items()
            },
            "capabilities": {
                key: {
                    "path": capability.path,
                    "description": capability.description,
                    "schema": copy.deepcopy(capability.schema),
                    "orchestrator": capability.orchestrator,
                    "side_effects": capability.side_effects,
                }
                for key, capability in self.capabilities.items()
            },
            "steps": [
                {
                    "id": step.id,
                    "tool": step.tool,
                    "capability": step.capability,
                    "parameters": copy_json(step.parameters),
                    "depends_on": list(step.depends_on),
                    "hitl_approved": list(step.hitl_approved),
                    "instruction": step.instruction,
                }
                for step in self.steps
            ],
            "config": copy.deepcopy(self.config),
        }
        if self.llm is not None:
            data["llm"] = copy.deepcopy(self.llm)
        return data


def copy_json(value: Any) -> Any:
    """A deep copy of JSON data (dicts, lists, scalars), several times faster than
    `copy.deepcopy`; anything else is copied by `copy.deepcopy`."""
    kind = type(value)
    if kind is dict:
        return {key: copy_json(item) for key, item in value.items()}
    if kind is list:
        return [copy_json(item) for item in value]
    if value is None or kind is str or kind is int or kind is float or kind is bool:
        return value
    return copy.deepcopy(value)


def key_path(parent: str, key: str) -> str:
    """`parent.key`, or `parent["key"]` when the key is not a plain name."""
    if NAME_RE.fullmatch(key):
        return f"{parent}.{key}" if parent else key
    return f"{parent}[{json.dumps(key)}]"


def case_folded_ids(step_ids: tuple[str, ...]) -> dict[str, str]:
    """Case-folded step id → step id; bindings name steps case-insensitively (reference §3.2)."""
    return {step_id.casefold(): step_id for step_id in step_ids}


def binding_matches(value: Any, path: str) -> list[tuple[str, re.Match[str]]]:
    """(path of the string leaf, binding match) for every binding in `value`, in order."""
    if isinstance(value, str):
        return [(path, match) for match in TEMPLATE_RE.finditer(value)]
    if isinstance(value, Mapping):
        return [
            found
            for key, item in value.items()
            for found in binding_matches(item, key_path(path, str(key)))
        ]
    if isinstance(value, list | tuple):
        return [
            found
            for index, item in enumerate(value)
            for found in binding_matches(item, f"{path}[{index}]")
        ]
    return []


def _bound_step_ids(parameters: Mapping[str, Any], folded_ids: dict[str, str]) -> list[str]:
    """The plan steps that bindings in `parameters` name, in order of appearance."""
    bound = (folded_ids.get(m.group(1).casefold()) for _, m in binding_matches(parameters, ""))
    return list(dict.fromkeys(step_id for step_id in bound if step_id is not None))
