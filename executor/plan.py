"""Plan files (SPEC §3.1): loading, validation with one-line errors, and the frozen plan records."""

from __future__ import annotations

import base64
import copy
import difflib
import heapq
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

from executor.config import CONFIG_FIELDS, ConfigError, resolve_config
from executor.params import TEMPLATE_RE

__all__ = [
    "LLM_TIMEOUT_MAX_S",
    "PLAN_FIELDS",
    "SCHEMA_TYPES",
    "SIDE_EFFECTS",
    "CapabilitySpec",
    "Plan",
    "PlanError",
    "StepSpec",
    "ToolSpec",
    "basic_authorization",
    "load_plan",
    "parse_plan",
    "split_userinfo",
]

# seed 003 / SPEC §2.6: what a capability may do to the world when called.
SIDE_EFFECTS = ("none", "idempotent", "unsafe")

# Step ids, tool names and capability names: Go's ASCII `[\w-]+`, as in the binding syntax.
_NAME_RE = re.compile(r"[\w-]+", re.ASCII)
_CAPABILITY_KEY_RE = re.compile(r"([\w-]+)\.([\w-]+)", re.ASCII)
# SPEC §2.2 row 0: a binding whose id starts with this names a step even when none matches.
_STEP_ID_PREFIX = "step-"

_TOP_FIELDS = ("capabilities", "config", "llm", "query", "steps", "tools")
_TOOL_FIELDS = ("base_url", "headers")
_CAPABILITY_FIELDS = ("description", "orchestrator", "path", "schema", "side_effects")
_STEP_FIELDS = (
    "capability",
    "depends_on",
    "hitl_approved",
    "id",
    "instruction",
    "parameters",
    "tool",
)
_LLM_FIELDS = ("api_key", "base_url", "model", "timeout_s")

# Every field each level of a plan may hold; docs/plan-file.md has one table per level.
PLAN_FIELDS: dict[str, tuple[str, ...]] = {
    "plan": _TOP_FIELDS,
    "tools.<tool>": _TOOL_FIELDS,
    "capabilities.<tool>.<capability>": _CAPABILITY_FIELDS,
    "steps[]": _STEP_FIELDS,
    "llm": _LLM_FIELDS,
}

_MAX_SHOWN_TEXT = 80

# The JSON Schema type names, and the Go names layer 2 also reads (reference §2.5), lower case.
SCHEMA_TYPES = (
    "array", "boolean", "integer", "null", "number", "object", "string",
    "bool", "double", "float", "float64", "int", "int32", "int64",
)
# Seconds per LLM call: a documented maximum, like the config maxima.
LLM_TIMEOUT_MAX_S = 3600

# RFC 9110 §5.1 field names are tokens; field values are visible ASCII with inner spaces/tabs.
_HEADER_NAME_CHARS = "!#$%&'*+-.^_`|~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
_HEADER_NAME_RE = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_HEADER_VALUE_CHARS = "".join(chr(c) for c in range(0x20, 0x7F)) + "\t"
_HEADER_VALUE_RE = re.compile(r"(?:[\x21-\x7e](?:[ \t]*[\x21-\x7e])*)?")
_CHARACTER_NAMES = {"\r": "a carriage return (CR)", "\n": "a line feed (LF)", "\0": "a NUL",
                    " ": "a space", "\t": "a tab"}


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
        folded_ids = _case_folded_ids(step_ids)
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
                    "parameters": copy.deepcopy(step.parameters),
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


# ---------------------------------------------------------------------------------------------
# Loading
# ---------------------------------------------------------------------------------------------


class _ObjectWithDuplicates(dict):
    """A decoded JSON object that repeated some keys; the duplicates are kept for the error."""

    duplicate_keys: list[str]


def _object_from_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    decoded: dict[str, Any] = {}
    duplicates: list[str] = []
    for key, value in pairs:
        if key in decoded and key not in duplicates:
            duplicates.append(key)
        decoded[key] = value
    if not duplicates:
        return decoded
    flagged = _ObjectWithDuplicates(decoded)
    flagged.duplicate_keys = duplicates
    return flagged


class _NonStandardConstant(ValueError):
    def __init__(self, constant: str) -> None:
        super().__init__(constant)
        self.constant = constant


def _reject_constant(constant: str) -> Any:
    raise _NonStandardConstant(constant)


def _first_duplicate_key(value: Any, path: str) -> tuple[str, str] | None:
    """(path of the object, key) for the first repeated key, outermost objects first."""
    if isinstance(value, _ObjectWithDuplicates):
        return path, value.duplicate_keys[0]
    if isinstance(value, dict):
        children = ((_key_path(path, key), item) for key, item in value.items())
    elif isinstance(value, list):
        children = ((f"{path}[{index}]", item) for index, item in enumerate(value))
    else:
        return None
    for child_path, child in children:
        found = _first_duplicate_key(child, child_path)
        if found is not None:
            return found
    return None


TOO_DEEP = "nested too deeply to be a plan (Python's recursion limit was reached)"


def load_plan(path: str | Path) -> Plan:
    """Read and validate the plan file at `path`; raise PlanError naming the file and problem."""
    file = str(path)
    try:
        content = Path(path).read_bytes()
    except OSError as error:
        raise PlanError(
            file, "", f"cannot read the plan file: {error.strerror or error}"
        ) from error
    try:
        text = content.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        bad_byte = content[error.start]
        problem = f"not UTF-8 text (invalid byte 0x{bad_byte:02x} at offset {error.start})"
        raise PlanError(file, "", problem) from error
    try:
        data = json.loads(
            text, object_pairs_hook=_object_from_pairs, parse_constant=_reject_constant
        )
    except json.JSONDecodeError as error:
        problem = f"invalid JSON at line {error.lineno}, column {error.colno}: {error.msg}"
        raise PlanError(file, "", problem) from error
    except _NonStandardConstant as error:
        problem = f"invalid JSON: {error.constant} is not a JSON value"
        raise PlanError(file, "", problem) from error
    except RecursionError as error:
        raise PlanError(file, "", TOO_DEEP) from error
    except ValueError as error:  # an integer literal beyond Python's int conversion limit
        problem = "invalid JSON: a number with more than 4300 digits"
        raise PlanError(file, "", problem) from error
    try:
        duplicate = _first_duplicate_key(data, "")
    except RecursionError as error:
        raise PlanError(file, "", TOO_DEEP) from error
    if duplicate is not None:
        object_path, key = duplicate
        raise PlanError(file, object_path, f"duplicate key {_quote(key)}")
    return replace(parse_plan(data, source=file), source_path=file)


def parse_plan(data: Any, source: str = "<plan>") -> Plan:
    """Validate decoded plan data; raise PlanError naming `source`, the path and the problem.

    Checks unknown fields at every level, required fields, JSON types, names and references
    (tools, capabilities, depends_on, hitl_approved keys, `{{step-…}}` bindings), dependency
    cycles over depends_on plus bindings, and the config values via `resolve_config`.
    """
    try:
        return _PlanParser(source).parse(data)
    except RecursionError as error:
        raise PlanError(source, "", TOO_DEEP) from error


# ---------------------------------------------------------------------------------------------
# Validation
# ---------------------------------------------------------------------------------------------


def _key_path(parent: str, key: str) -> str:
    """`parent.key`, or `parent["key"]` when the key is not a plain name."""
    if _NAME_RE.fullmatch(key):
        return f"{parent}.{key}" if parent else key
    return f"{parent}[{json.dumps(key)}]"


def _quote(text: str) -> str:
    shown = text if len(text) <= _MAX_SHOWN_TEXT else text[: _MAX_SHOWN_TEXT - 1] + "…"
    return json.dumps(shown, ensure_ascii=False)


def _describe(value: Any) -> str:
    """A value as JSON would show it: `"abc"`, `3`, `true`, `null`, `an object`, `an array`."""
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, list | tuple):
        return "an array"
    if isinstance(value, str):
        return _quote(value)
    if isinstance(value, int) and value.bit_length() > 14_000:  # str() refuses > 4300 digits
        return "an integer of more than 4000 digits"
    if value is None or isinstance(value, bool | int | float):
        try:
            return json.dumps(value, allow_nan=False)
        except ValueError:
            return repr(value)
    return f"a Python {type(value).__name__}"


def _first_bad_character(text: str, allowed: str) -> str:
    """Which character of `text` is not in `allowed`, and where: `a line feed (LF) at [5]`."""
    for index, character in enumerate(text):
        if character not in allowed:
            name = _CHARACTER_NAMES.get(character)
            if name is None and 0x21 <= ord(character) <= 0x7E:
                name = f"the character {json.dumps(character)}"
            elif name is None:
                kind = "a non-ASCII character" if ord(character) > 0x7F else "a control character"
                name = f"{kind} U+{ord(character):04X}"
            return f"{name} at [{index}]"
    return "no character outside the allowed set"


def header_value_problem(value: str) -> str | None:
    """Why `value` cannot be sent as an HTTP header value (`a line feed (LF) at [5]`), or None."""
    if _HEADER_VALUE_RE.fullmatch(value) is not None:
        return None
    if value != value.strip(" \t") and _HEADER_VALUE_RE.fullmatch(value.strip(" \t")):
        return "leading or trailing whitespace"
    return _first_bad_character(value, _HEADER_VALUE_CHARS)


def _names(names: Any) -> str:
    listed = sorted(names)
    return ", ".join(listed) if listed else "none"


def _case_folded_ids(step_ids: tuple[str, ...]) -> dict[str, str]:
    """Case-folded step id → step id; bindings name steps case-insensitively (reference §3.2)."""
    return {step_id.casefold(): step_id for step_id in step_ids}


def _binding_matches(value: Any, path: str) -> list[tuple[str, re.Match[str]]]:
    """(path of the string leaf, binding match) for every binding in `value`, in order."""
    if isinstance(value, str):
        return [(path, match) for match in TEMPLATE_RE.finditer(value)]
    if isinstance(value, Mapping):
        return [
            found
            for key, item in value.items()
            for found in _binding_matches(item, _key_path(path, str(key)))
        ]
    if isinstance(value, list | tuple):
        return [
            found
            for index, item in enumerate(value)
            for found in _binding_matches(item, f"{path}[{index}]")
        ]
    return []


def _bound_step_ids(parameters: Mapping[str, Any], folded_ids: dict[str, str]) -> list[str]:
    """The plan steps that bindings in `parameters` name, in order of appearance."""
    bound = (folded_ids.get(m.group(1).casefold()) for _, m in _binding_matches(parameters, ""))
    return list(dict.fromkeys(step_id for step_id in bound if step_id is not None))


class _PlanParser:
    """One validation pass over decoded plan data; every failure is a PlanError."""

    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, path: str, problem: str) -> PlanError:
        return PlanError(self.source, path, problem)

    # -- generic checks --------------------------------------------------------------------

    def require_object(self, value: Any, path: str, what: str = "an object") -> dict[str, Any]:
        if not isinstance(value, Mapping):
            raise self.fail(path, f"expected {what}, got {_describe(value)}")
        for key in value:
            if not isinstance(key, str):
                raise self.fail(path, f"expected string keys, got {_describe(key)}")
        return dict(value)

    def check_fields(
        self,
        value: dict[str, Any],
        path: str,
        known: tuple[str, ...],
        required: tuple[str, ...] = (),
    ) -> None:
        for key in value:
            if key not in known:
                problem = f"unknown field {_quote(key)} (expected one of: {', '.join(known)})"
                raise self.fail(path, problem)
        for key in required:
            if key not in value:
                raise self.fail(path, f"missing required field {_quote(key)}")

    def require_string(self, value: Any, path: str, *, non_empty: bool = False) -> str:
        if not isinstance(value, str):
            raise self.fail(path, f"expected a string, got {_describe(value)}")
        if non_empty and not value:
            raise self.fail(path, 'expected a non-empty string, got ""')
        return value

    def require_bool(self, value: Any, path: str) -> bool:
        if not isinstance(value, bool):
            raise self.fail(path, f"expected true or false, got {_describe(value)}")
        return value

    def require_http_url(self, value: Any, path: str) -> str:
        url = self.require_string(value, path)
        try:
            parts = urlsplit(url)
        except ValueError:
            parts = None
        if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
            raise self.fail(path, f"expected an http:// or https:// URL, got {_quote(url)}")
        if parts.query or parts.fragment or "?" in url or "#" in url:
            raise self.fail(path, f"expected a URL without query or fragment, got {_quote(url)}")
        return url

    def require_header_name(self, name: str, path: str) -> None:
        """An HTTP field name: a token (RFC 9110 §5.1), which httpx and h11 can send."""
        if _HEADER_NAME_RE.fullmatch(name) is None:
            problem = (
                "expected a header name of ASCII letters, digits and !#$%&'*+-.^_`|~ only, "
                f"got {_quote(name)} ({_first_bad_character(name, _HEADER_NAME_CHARS)})"
            )
            raise self.fail(path, problem)

    def require_header_value(self, value: str, path: str, what: str = "a header value") -> None:
        """An HTTP field value the client can send: printable ASCII, spaces and tabs inside."""
        found = header_value_problem(value)
        if found is not None:
            raise self.fail(path, f"expected {what} of printable ASCII, got {_quote(value)} "
                                  f"({found})")

    def require_schema(self, schema: Any, path: str) -> None:
        """The JSON Schema subset layer 2 and the guard read: known `type` names, and
        `properties`, `items`, `required`, `enum` of the right JSON types, at every depth."""
        if isinstance(schema, bool):
            return  # JSON Schema's true/false schemas
        if not isinstance(schema, Mapping):
            raise self.fail(path, f"expected a JSON Schema object, got {_describe(schema)}")
        if "type" in schema:
            declared = schema["type"]
            names = declared if isinstance(declared, list) else [declared]
            if not names:
                raise self.fail(f"{path}.type", "expected a type name or a non-empty array of "
                                                "type names, got an empty array")
            for index, name in enumerate(names):
                name_path = f"{path}.type" + (f"[{index}]" if isinstance(declared, list) else "")
                if not isinstance(name, str):
                    raise self.fail(name_path, f"expected a type name, got {_describe(name)}")
                if name.lower() not in SCHEMA_TYPES:
                    close = difflib.get_close_matches(name.lower(), SCHEMA_TYPES, n=1)
                    hint = f"did you mean {_quote(close[0])}? " if close else ""
                    raise self.fail(name_path, f"unknown type {_quote(name)} ({hint}expected one "
                                               f"of: {', '.join(SCHEMA_TYPES)})")
        if "properties" in schema:
            properties = self.require_object(schema["properties"], f"{path}.properties")
            for key, property_schema in properties.items():
                self.require_schema(property_schema, _key_path(f"{path}.properties", key))
        if "items" in schema:
            items = schema["items"]
            if isinstance(items, list):
                for index, item in enumerate(items):
                    self.require_schema(item, f"{path}.items[{index}]")
            else:
                self.require_schema(items, f"{path}.items")
        if "additionalProperties" in schema:
            self.require_schema(schema["additionalProperties"], f"{path}.additionalProperties")
        for keyword in ("anyOf", "oneOf", "allOf"):
            if keyword in schema:
                options = schema[keyword]
                if not isinstance(options, list):
                    raise self.fail(f"{path}.{keyword}",
                                    f"expected an array of schemas, got {_describe(options)}")
                for index, option in enumerate(options):
                    self.require_schema(option, f"{path}.{keyword}[{index}]")
        if "required" in schema:
            required = schema["required"]
            if not isinstance(required, list) or not all(isinstance(k, str) for k in required):
                raise self.fail(f"{path}.required",
                                f"expected an array of property names, got {_describe(required)}")
        if "enum" in schema and not isinstance(schema["enum"], list):
            raise self.fail(f"{path}.enum",
                            f"expected an array of values, got {_describe(schema['enum'])}")

    def require_json_value(self, value: Any, path: str) -> None:
        """Only JSON data (objects with string keys, arrays, strings, finite numbers, booleans,
        null), so the plan can be written back out."""
        if isinstance(value, Mapping):
            for key, item in value.items():
                if not isinstance(key, str):
                    raise self.fail(path, f"expected string keys, got {_describe(key)}")
                self.require_json_value(item, _key_path(path, key))
        elif isinstance(value, list):
            for index, item in enumerate(value):
                self.require_json_value(item, f"{path}[{index}]")
        elif isinstance(value, float) and not math.isfinite(value):
            raise self.fail(path, f"expected a finite JSON number, got {value!r}")
        elif not (value is None or isinstance(value, str | bool | int | float)):
            raise self.fail(path, f"expected a JSON value, got {_describe(value)}")

    def require_string_list(self, value: Any, path: str) -> tuple[str, ...]:
        if not isinstance(value, list):
            raise self.fail(path, f"expected an array of strings, got {_describe(value)}")
        first_positions: dict[str, int] = {}
        for index, item in enumerate(value):
            item_path = f"{path}[{index}]"
            text = self.require_string(item, item_path, non_empty=True)
            if text in first_positions:
                first = first_positions[text]
                raise self.fail(item_path, f"{_quote(text)} is already listed at [{first}]")
            first_positions[text] = index
        return tuple(first_positions)

    # -- sections --------------------------------------------------------------------------

    def parse(self, data: Any) -> Plan:
        if not isinstance(data, Mapping):
            raise self.fail("", f"expected a JSON object at the top level, got {_describe(data)}")
        top = self.require_object(data, "")
        self.check_fields(top, "", _TOP_FIELDS, required=("tools", "capabilities", "steps"))
        query = self.require_string(top.get("query", ""), "query")
        tools = self.parse_tools(top["tools"])
        capabilities = self.parse_capabilities(top["capabilities"], tools)
        steps = self.parse_steps(top["steps"], tools, capabilities)
        self.check_references(steps)
        config = self.parse_config(top.get("config", {}))
        llm = self.parse_llm(top.get("llm"))
        return Plan(
            query=query,
            tools=tools,
            capabilities=capabilities,
            steps=steps,
            config=config,
            llm=llm,
            source_path=None,
            raw=copy.deepcopy(dict(data)),
        )

    def parse_tools(self, value: Any) -> dict[str, ToolSpec]:
        tools_data = self.require_object(value, "tools")
        tools: dict[str, ToolSpec] = {}
        for name, tool_value in tools_data.items():
            path = _key_path("tools", name)
            if not _NAME_RE.fullmatch(name):
                problem = 'expected a tool name of ASCII letters, digits, "_" and "-"'
                raise self.fail(path, f"{problem}, got {_quote(name)}")
            tool = self.require_object(tool_value, path)
            self.check_fields(tool, path, _TOOL_FIELDS, required=("base_url",))
            base_url = self.require_http_url(tool["base_url"], f"{path}.base_url")
            headers_path = f"{path}.headers"
            headers = self.require_object(tool.get("headers", {}), headers_path)
            for header_name, header_value in headers.items():
                header_path = _key_path(headers_path, header_name)
                if not header_name:
                    raise self.fail(headers_path, 'expected non-empty header names, got ""')
                self.require_header_name(header_name, header_path)
                self.require_header_value(
                    self.require_string(header_value, header_path), header_path
                )
            tools[name] = ToolSpec(name=name, base_url=base_url, headers=headers)
        return tools

    def parse_capabilities(
        self, value: Any, tools: dict[str, ToolSpec]
    ) -> dict[str, CapabilitySpec]:
        capabilities_data = self.require_object(value, "capabilities")
        capabilities: dict[str, CapabilitySpec] = {}
        for key, capability_value in capabilities_data.items():
            path = _key_path("capabilities", key)
            key_match = _CAPABILITY_KEY_RE.fullmatch(key)
            if key_match is None:
                problem = 'expected a key of the form "<tool>.<capability>" (ASCII names)'
                raise self.fail(path, f"{problem}, got {_quote(key)}")
            tool_name, name = key_match.groups()
            if tool_name not in tools:
                problem = f"names tool {_quote(tool_name)}, which is not in tools"
                raise self.fail(path, f"{problem} (tools: {_names(tools)})")
            capability = self.require_object(capability_value, path)
            self.check_fields(capability, path, _CAPABILITY_FIELDS)
            capability_path = self.require_string(
                capability.get("path", f"/capabilities/{name}"), f"{path}.path"
            )
            if not capability_path.startswith("/"):
                problem = f'expected a path starting with "/", got {_quote(capability_path)}'
                raise self.fail(f"{path}.path", problem)
            description = self.require_string(
                capability.get("description", ""), f"{path}.description"
            )
            schema = capability.get("schema")
            if schema is not None:
                schema = self.require_object(schema, f"{path}.schema", "a JSON Schema object")
                self.require_json_value(schema, f"{path}.schema")
                self.require_schema(schema, f"{path}.schema")
            orchestrator = self.require_bool(
                capability.get("orchestrator", False), f"{path}.orchestrator"
            )
            side_effects = capability.get("side_effects", "none")
            if side_effects not in SIDE_EFFECTS or not isinstance(side_effects, str):
                expected = ", ".join(json.dumps(choice) for choice in SIDE_EFFECTS)
                raise self.fail(
                    f"{path}.side_effects",
                    f"expected one of {expected}, got {_describe(side_effects)}",
                )
            capabilities[key] = CapabilitySpec(
                key=key,
                tool=tool_name,
                name=name,
                path=capability_path,
                description=description,
                schema=copy.deepcopy(schema),
                orchestrator=orchestrator,
                side_effects=side_effects,
            )
        return capabilities

    def parse_steps(
        self,
        value: Any,
        tools: dict[str, ToolSpec],
        capabilities: dict[str, CapabilitySpec],
    ) -> tuple[StepSpec, ...]:
        if not isinstance(value, list):
            raise self.fail("steps", f"expected an array of steps, got {_describe(value)}")
        if not value:
            raise self.fail("steps", "expected at least one step, got an empty array")
        steps: list[StepSpec] = []
        seen_ids: dict[str, int] = {}
        for index, step_value in enumerate(value):
            path = f"steps[{index}]"
            step = self.require_object(step_value, path)
            self.check_fields(step, path, _STEP_FIELDS, required=("id", "tool", "capability"))

            step_id = self.require_string(step["id"], f"{path}.id", non_empty=True)
            if not _NAME_RE.fullmatch(step_id):
                problem = 'expected ASCII letters, digits, "_" and "-" only'
                raise self.fail(f"{path}.id", f"{problem}, got {_quote(step_id)}")
            first_index = seen_ids.get(step_id.casefold())
            if first_index is not None:
                first_id = steps[first_index].id
                if first_id == step_id:
                    problem = f"duplicate step id {_quote(step_id)} (also steps[{first_index}].id)"
                else:
                    problem = (
                        f"step id {_quote(step_id)} differs from steps[{first_index}].id "
                        f"{_quote(first_id)} only in case, which bindings cannot tell apart"
                    )
                raise self.fail(f"{path}.id", problem)
            seen_ids[step_id.casefold()] = index

            tool = self.require_string(step["tool"], f"{path}.tool", non_empty=True)
            if tool not in tools:
                problem = f"names {_quote(tool)}, which is not a tool in this plan"
                raise self.fail(f"{path}.tool", f"{problem} (tools: {_names(tools)})")
            capability = self.require_string(
                step["capability"], f"{path}.capability", non_empty=True
            )
            key = f"{tool}.{capability}"
            if key not in capabilities:
                offered = [spec.name for spec in capabilities.values() if spec.tool == tool]
                problem = (
                    f"names {_quote(capability)}, but {_quote(key)} is not in capabilities "
                    f"({tool} has: {_names(offered)})"
                )
                raise self.fail(f"{path}.capability", problem)

            parameters = self.require_object(step.get("parameters", {}), f"{path}.parameters")
            self.require_json_value(parameters, f"{path}.parameters")
            depends_on = self.require_string_list(step.get("depends_on", []), f"{path}.depends_on")
            hitl_approved = self.require_string_list(
                step.get("hitl_approved", []), f"{path}.hitl_approved"
            )
            for key_index, approved_key in enumerate(hitl_approved):
                if approved_key not in parameters:
                    problem = (
                        f"names {_quote(approved_key)}, which is not a key of this step's "
                        f"parameters (parameters: {_names(parameters)})"
                    )
                    raise self.fail(f"{path}.hitl_approved[{key_index}]", problem)
            instruction = step.get("instruction")
            if instruction is not None:
                instruction = self.require_string(instruction, f"{path}.instruction")
            steps.append(
                StepSpec(
                    id=step_id,
                    tool=tool,
                    capability=capability,
                    parameters=copy.deepcopy(parameters),
                    depends_on=depends_on,
                    hitl_approved=hitl_approved,
                    instruction=instruction,
                )
            )
        return tuple(steps)

    def check_references(self, steps: tuple[StepSpec, ...]) -> None:
        """depends_on and binding targets exist, and the dependency graph has no cycle."""
        step_ids = tuple(step.id for step in steps)
        known_ids = frozenset(step_ids)
        folded_ids = _case_folded_ids(step_ids)
        dependencies: dict[str, tuple[str, ...]] = {}
        for index, step in enumerate(steps):
            for dep_index, dependency in enumerate(step.depends_on):
                dep_path = f"steps[{index}].depends_on[{dep_index}]"
                if dependency == step.id:
                    raise self.fail(dep_path, f"names {_quote(dependency)}, this step itself")
                if dependency not in known_ids:
                    problem = f"names {_quote(dependency)}, which is not a step in this plan"
                    close = folded_ids.get(dependency.casefold())
                    if close is not None:
                        problem += f' (step ids are case-sensitive: "{close}")'
                    raise self.fail(dep_path, problem)
            bound: list[str] = []
            parameters_path = f"steps[{index}].parameters"
            for leaf_path, match in _binding_matches(step.parameters, parameters_path):
                token, referenced = match.group(0), match.group(1)
                target = folded_ids.get(referenced.casefold())
                if target == step.id:
                    problem = f"binds {_quote(token)}, but a step cannot bind its own result"
                    raise self.fail(leaf_path, problem)
                if target is None and referenced.casefold().startswith(_STEP_ID_PREFIX):
                    problem = f"binds {_quote(token)}, but {referenced} is not a step in this plan"
                    raise self.fail(leaf_path, problem)
                if target is not None:
                    bound.append(target)
            dependencies[step.id] = tuple(dict.fromkeys((*step.depends_on, *bound)))
        cycle = _find_cycle(step_ids, dependencies)
        if cycle is not None:
            raise self.fail("steps", f"cycle {' -> '.join(cycle)}")

    def parse_config(self, value: Any) -> dict[str, Any]:
        config = self.require_object(value, "config")
        for key in config:
            if key not in CONFIG_FIELDS:
                known = ", ".join(sorted(CONFIG_FIELDS))
                raise self.fail("config", f"unknown field {_quote(key)} (expected one of: {known})")
        self.require_json_value(config, "config")
        try:
            resolve_config(config, env={})
        except ConfigError as error:
            problem = f"expected {error.expected}, got {error.received}"
            raise self.fail(f"config.{error.field}", problem) from error
        return copy.deepcopy(config)

    def parse_llm(self, value: Any) -> dict[str, Any] | None:
        if value is None:
            return None
        llm = self.require_object(value, "llm")
        self.check_fields(llm, "llm", _LLM_FIELDS)
        if "base_url" in llm:
            self.require_http_url(llm["base_url"], "llm.base_url")
        if "model" in llm:
            self.require_string(llm["model"], "llm.model", non_empty=True)
        if "api_key" in llm:
            api_key = self.require_string(llm["api_key"], "llm.api_key")
            self.require_header_value(api_key, "llm.api_key", "a key")
        if "timeout_s" in llm:
            timeout_s = llm["timeout_s"]
            is_number = isinstance(timeout_s, int | float) and not isinstance(timeout_s, bool)
            if not (is_number and math.isfinite(timeout_s) and timeout_s > 0):
                problem = f"expected a number of seconds > 0, got {_describe(timeout_s)}"
                raise self.fail("llm.timeout_s", problem)
            if timeout_s > LLM_TIMEOUT_MAX_S:
                problem = (
                    f"expected a number of seconds <= {LLM_TIMEOUT_MAX_S} "
                    f"(the documented maximum), got {_describe(timeout_s)}"
                )
                raise self.fail("llm.timeout_s", problem)
        return copy.deepcopy(llm)


def _find_cycle(
    step_ids: tuple[str, ...], dependencies: dict[str, tuple[str, ...]]
) -> list[str] | None:
    """The first dependency cycle found by depth-first search in plan order, closed (a → … → a)."""
    on_path: dict[str, int] = {}
    finished: set[str] = set()
    for root in step_ids:
        if root in finished:
            continue
        path = [root]
        on_path[root] = 0
        pending = [iter(dependencies[root])]
        while pending:
            dependency = next(pending[-1], None)
            if dependency is None:
                done = path.pop()
                del on_path[done]
                finished.add(done)
                pending.pop()
                continue
            if dependency in on_path:
                return [*path[on_path[dependency] :], dependency]
            if dependency not in finished:
                on_path[dependency] = len(path)
                path.append(dependency)
                pending.append(iter(dependencies[dependency]))
    return None
