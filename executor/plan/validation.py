"""Plan validation with one-line errors naming the file, field and value."""

from __future__ import annotations

import copy
import difflib
import json
import math
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from executor.config import CONFIG_FIELDS, ConfigError, resolve_config
from executor.plan.model import (
    NAME_RE,
    CapabilitySpec,
    Plan,
    PlanError,
    StepSpec,
    ToolSpec,
    binding_matches,
    case_folded_ids,
    copy_json,
    key_path,
)

# seed 003 / SPEC §2.6: what a capability may do to the world when called.
SIDE_EFFECTS = ("none", "idempotent", "unsafe")


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


def quote(text: str) -> str:
    shown = text if len(text) <= _MAX_SHOWN_TEXT else text[: _MAX_SHOWN_TEXT - 1] + "…"
    return json.dumps(shown, ensure_ascii=False)


def _describe(value: Any) -> str:
    """A value as JSON would show it: `"abc"`, `3`, `true`, `null`, `an object`, `an array`."""
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, tuple):
        return "a Python tuple (a JSON array is a list)"
    if isinstance(value, str):
        return quote(value)
    if isinstance(value, int) and value.bit_length() > 14_000:  # str() refuses > 4300 digits
        return "an integer of more than 4000 digits"
    if value is None or isinstance(value, bool | int | float):
        try:
            return json.dumps(value, allow_nan=False)
        except ValueError:
            return repr(value)
    return f"a Python {type(value).__name__}"


def _has_text(value: int) -> bool:
    """Whether str() writes `value` (it refuses more than 4300 digits)."""
    try:
        str(value)
    except ValueError:
        return False
    return True


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


class PlanParser:
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
                problem = f"unknown field {quote(key)} (expected one of: {', '.join(known)})"
                raise self.fail(path, problem)
        for key in required:
            if key not in value:
                raise self.fail(path, f"missing required field {quote(key)}")

    def require_string(self, value: Any, path: str, *, non_empty: bool = False) -> str:
        if not isinstance(value, str):
            raise self.fail(path, f"expected a string, got {_describe(value)}")
        if non_empty and not value:
            raise self.fail(path, 'expected a non-empty string, got ""')
        self.require_sendable_text(value, path)
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
            raise self.fail(path, f"expected an http:// or https:// URL, got {quote(url)}")
        if parts.query or parts.fragment or "?" in url or "#" in url:
            raise self.fail(path, f"expected a URL without query or fragment, got {quote(url)}")
        try:
            parts.port  # noqa: B018 - urlsplit checks the port only when it is read
        except ValueError:
            port = parts.netloc.rpartition(":")[2]
            raise self.fail(path, f"expected a port from 0 to 65535, got {quote(port)} in "
                                  f"{quote(url)}") from None
        return url

    def require_header_name(self, name: str, path: str) -> None:
        """An HTTP field name: a token (RFC 9110 §5.1), which httpx and h11 can send."""
        if _HEADER_NAME_RE.fullmatch(name) is None:
            problem = (
                "expected a header name of ASCII letters, digits and !#$%&'*+-.^_`|~ only, "
                f"got {quote(name)} ({_first_bad_character(name, _HEADER_NAME_CHARS)})"
            )
            raise self.fail(path, problem)

    def require_header_value(self, value: str, path: str, what: str = "a header value") -> None:
        """An HTTP field value the client can send: printable ASCII, spaces and tabs inside."""
        found = header_value_problem(value)
        if found is not None:
            raise self.fail(path, f"expected {what} of printable ASCII, got {quote(value)} "
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
                    hint = f"did you mean {quote(close[0])}? " if close else ""
                    raise self.fail(name_path, f"unknown type {quote(name)} ({hint}expected one "
                                               f"of: {', '.join(SCHEMA_TYPES)})")
        if "properties" in schema:
            properties = self.require_object(schema["properties"], f"{path}.properties")
            for key, property_schema in properties.items():
                self.require_schema(property_schema, key_path(f"{path}.properties", key))
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
                self.require_sendable_text(key, path)
                self.require_json_value(item, key_path(path, key))
        elif isinstance(value, list):
            for index, item in enumerate(value):
                self.require_json_value(item, f"{path}[{index}]")
        elif isinstance(value, str):
            self.require_sendable_text(value, path)
        elif isinstance(value, float) and not math.isfinite(value):
            raise self.fail(path, f"expected a finite JSON number, got {value!r}")
        elif isinstance(value, int) and value.bit_length() > 14_000 and not _has_text(value):
            raise self.fail(path, "a number with more than 4300 digits cannot be sent as JSON")
        elif not (value is None or isinstance(value, bool | int | float)):
            raise self.fail(path, f"expected a JSON value, got {_describe(value)}")

    def require_sendable_text(self, text: str, path: str) -> None:
        """Text UTF-8 can encode: a lone surrogate (`"\\ud800"` in JSON, or in Python) cannot be
        written into a request body."""
        if text.isascii():
            return
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as error:
            raise self.fail(
                path, f"a lone surrogate U+{ord(text[error.start]):04X} at [{error.start}] is "
                "not text (a request body is UTF-8)"
            ) from None

    def require_string_list(self, value: Any, path: str) -> tuple[str, ...]:
        if not isinstance(value, list):
            raise self.fail(path, f"expected an array of strings, got {_describe(value)}")
        first_positions: dict[str, int] = {}
        for index, item in enumerate(value):
            item_path = f"{path}[{index}]"
            text = self.require_string(item, item_path, non_empty=True)
            if text in first_positions:
                first = first_positions[text]
                raise self.fail(item_path, f"{quote(text)} is already listed at [{first}]")
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
            path = key_path("tools", name)
            if not NAME_RE.fullmatch(name):
                problem = 'expected a tool name of ASCII letters, digits, "_" and "-"'
                raise self.fail(path, f"{problem}, got {quote(name)}")
            tool = self.require_object(tool_value, path)
            self.check_fields(tool, path, _TOOL_FIELDS, required=("base_url",))
            base_url = self.require_http_url(tool["base_url"], f"{path}.base_url")
            headers_path = f"{path}.headers"
            headers = self.require_object(tool.get("headers", {}), headers_path)
            for header_name, header_value in headers.items():
                header_path = key_path(headers_path, header_name)
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
            path = key_path("capabilities", key)
            key_match = _CAPABILITY_KEY_RE.fullmatch(key)
            if key_match is None:
                problem = 'expected a key of the form "<tool>.<capability>" (ASCII names)'
                raise self.fail(path, f"{problem}, got {quote(key)}")
            tool_name, name = key_match.groups()
            if tool_name not in tools:
                problem = f"names tool {quote(tool_name)}, which is not in tools"
                raise self.fail(path, f"{problem} (tools: {_names(tools)})")
            capability = self.require_object(capability_value, path)
            self.check_fields(capability, path, _CAPABILITY_FIELDS)
            capability_path = self.require_string(
                capability.get("path", f"/capabilities/{name}"), f"{path}.path"
            )
            if not capability_path.startswith("/"):
                problem = f'expected a path starting with "/", got {quote(capability_path)}'
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
            if not NAME_RE.fullmatch(step_id):
                problem = 'expected ASCII letters, digits, "_" and "-" only'
                raise self.fail(f"{path}.id", f"{problem}, got {quote(step_id)}")
            first_index = seen_ids.get(step_id.casefold())
            if first_index is not None:
                first_id = steps[first_index].id
                if first_id == step_id:
                    problem = f"duplicate step id {quote(step_id)} (also steps[{first_index}].id)"
                else:
                    problem = (
                        f"step id {quote(step_id)} differs from steps[{first_index}].id "
                        f"{quote(first_id)} only in case, which bindings cannot tell apart"
                    )
                raise self.fail(f"{path}.id", problem)
            seen_ids[step_id.casefold()] = index

            tool = self.require_string(step["tool"], f"{path}.tool", non_empty=True)
            if tool not in tools:
                problem = f"names {quote(tool)}, which is not a tool in this plan"
                raise self.fail(f"{path}.tool", f"{problem} (tools: {_names(tools)})")
            capability = self.require_string(
                step["capability"], f"{path}.capability", non_empty=True
            )
            key = f"{tool}.{capability}"
            if key not in capabilities:
                offered = [spec.name for spec in capabilities.values() if spec.tool == tool]
                problem = (
                    f"names {quote(capability)}, but {quote(key)} is not in capabilities "
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
                        f"names {quote(approved_key)}, which is not a key of this step's "
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
                    parameters=copy_json(parameters),
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
        folded_ids = case_folded_ids(step_ids)
        dependencies: dict[str, tuple[str, ...]] = {}
        for index, step in enumerate(steps):
            for dep_index, dependency in enumerate(step.depends_on):
                dep_path = f"steps[{index}].depends_on[{dep_index}]"
                if dependency == step.id:
                    raise self.fail(dep_path, f"names {quote(dependency)}, this step itself")
                if dependency not in known_ids:
                    problem = f"names {quote(dependency)}, which is not a step in this plan"
                    close = folded_ids.get(dependency.casefold())
                    if close is not None:
                        problem += f' (step ids are case-sensitive: "{close}")'
                    raise self.fail(dep_path, problem)
            bound: list[str] = []
            parameters_path = f"steps[{index}].parameters"
            for leaf_path, match in binding_matches(step.parameters, parameters_path):
                token, referenced = match.group(0), match.group(1)
                target = folded_ids.get(referenced.casefold())
                if target == step.id:
                    problem = f"binds {quote(token)}, but a step cannot bind its own result"
                    raise self.fail(leaf_path, problem)
                if target is None and referenced.casefold().startswith(_STEP_ID_PREFIX):
                    problem = f"binds {quote(token)}, but {referenced} is not a step in this plan"
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
                raise self.fail("config", f"unknown field {quote(key)} (expected one of: {known})")
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
